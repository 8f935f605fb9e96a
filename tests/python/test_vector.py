"""Vector sets through redis-py's `vset()` helpers (Redis 8 commands) and Ember's VSIM.*
commands: replies as redis-py parses them, errors, recall on generated data.

Redis 7 has no vector sets: against EMBER_SERVER=redis the suite is skipped.
"""

from __future__ import annotations

import random
import struct

import pytest
import redis
from redis.commands.vectorset.commands import QuantizationOptions

from helpers import IS_REDIS

pytestmark = pytest.mark.skipif(IS_REDIS, reason="vector sets need Redis 8 (the reference is 7)")


def fill(r, key="s", quant=QuantizationOptions.NOQUANT):
    vs = r.vset()
    assert vs.vadd(key, [1.0, 0.0, 0.0], "a", quantization=quant,
                   attributes={"year": 1990, "genre": "drama"}) == 1
    assert vs.vadd(key, [0.9, 0.1, 0.0], "b", quantization=quant,
                   attributes={"year": 2005, "genre": "comedy"}) == 1
    assert vs.vadd(key, [0.0, 1.0, 0.0], "c", quantization=quant) == 1
    assert vs.vadd(key, [0.0, 0.0, 1.0], "d", quantization=quant,
                   attributes='{"year": 2010, "genre": "drama"}') == 1
    return vs


def test_vadd_vsim_helpers(r):
    vs = fill(r)
    assert r.type("s") == b"vectorset"
    assert vs.vcard("s") == 4
    assert vs.vdim("s") == 3
    assert vs.vadd("s", [0.0, 1.0, 0.0], "c", quantization=QuantizationOptions.NOQUANT) == 0
    assert vs.vsim("s", [1.0, 0.0, 0.0], count=2) == [b"a", b"b"]
    scores = vs.vsim("s", "a", with_scores=True, count=4)
    assert list(scores)[:2] == [b"a", b"b"]
    assert scores[b"a"] == pytest.approx(1.0)
    assert scores[b"c"] == pytest.approx(0.5)
    blob = struct.pack("<3f", 0.0, 0.0, 1.0)
    assert vs.vsim("s", blob, count=1) == [b"d"]
    assert vs.vsim("s", "a", filter='.genre == "drama"') == [b"a", b"d"]
    assert vs.vsim("s", "a", filter=".year > 2000 and .genre == 'drama'",
                   filter_ef=50, truth=True, no_thread=True, ef=20) == [b"d"]
    assert vs.vsim("s", "a", epsilon=0.1) == [b"a", b"b"]
    both = vs.vsim("s", "a", with_scores=True, with_attribs=True, count=1)
    assert b"a" in both
    assert vs.vsim("nokey", [1.0, 0.0, 0.0]) == []


def test_emb_info_attrs_links_rand(r):
    vs = fill(r, quant=QuantizationOptions.Q8)
    emb = vs.vemb("s", "b")
    assert len(emb) == 3 and emb[0] == pytest.approx(0.9, abs=0.01)
    raw = vs.vemb("s", "b", raw=True)
    assert raw["quantization"] in ("int8", b"int8")
    assert vs.vemb("s", "zz") is None
    info = vs.vinfo("s")
    info = {(k.decode() if isinstance(k, bytes) else k): v for k, v in info.items()}
    assert info["size"] == 4 and info["vector-dim"] == 3 and info["hnsw-m"] == 16
    assert info["quant-type"] in ("int8", b"int8")
    assert info["attributes-count"] == 3
    assert vs.vgetattr("s", "a") == {"year": 1990, "genre": "drama"}
    assert vs.vgetattr("s", "c") is None
    assert vs.vsetattr("s", "c", {"year": 1}) == 1
    assert vs.vgetattr("s", "c") == {"year": 1}
    assert vs.vsetattr("s", "zz", {"year": 1}) == 0
    assert vs.vsetattr("s", "c", "") == 1
    assert vs.vgetattr("s", "c") is None
    links = vs.vlinks("s", "a")
    assert links and links[-1] and b"a" not in links[-1]
    with_scores = vs.vlinks("s", "a", with_scores=True)
    assert isinstance(with_scores[-1], dict)
    assert vs.vlinks("s", "zz") is None
    assert vs.vrandmember("s") in (b"a", b"b", b"c", b"d")
    assert len(set(vs.vrandmember("s", 3))) == 3
    assert len(vs.vrandmember("s", -7)) == 7
    assert vs.vrandmember("nokey") is None
    assert vs.vrem("s", "a") == 1
    assert vs.vrem("s", "a") == 0
    assert vs.vcard("s") == 3


def test_errors(r):
    vs = fill(r)
    with pytest.raises(redis.ResponseError, match="dimension mismatch"):
        vs.vadd("s", [1.0, 0.0], "x", quantization=QuantizationOptions.NOQUANT)
    with pytest.raises(redis.ResponseError, match="quantization mismatch"):
        vs.vadd("s", [1.0, 0.0, 0.0], "x", quantization=QuantizationOptions.BIN)
    with pytest.raises(redis.ResponseError, match="element not found"):
        vs.vsim("s", "zz")
    with pytest.raises(redis.ResponseError, match="syntax error in FILTER"):
        vs.vsim("s", "a", filter=".year >")
    with pytest.raises(redis.ResponseError, match="key does not exist"):
        vs.vdim("nokey")
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        vs.vadd("str", [1.0], "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        vs.vsim("str", [1.0])


def test_key_semantics(r):
    vs = fill(r)
    assert r.rename("s", "t")
    assert vs.vcard("t") == 4
    assert r.copy("t", "u")
    vs.vrem("u", "a")
    assert vs.vcard("t") == 4 and vs.vcard("u") == 3
    assert r.pexpire("u", 100000)
    assert 0 < r.pttl("u") <= 100000
    assert r.delete("t", "u") == 2
    for e in ("a", "b"):
        vs.vadd("v", [1.0, 2.0], e)
    vs.vrem("v", "a")
    vs.vrem("v", "b")
    assert r.exists("v") == 0, "an emptied vector set is deleted"


def test_ember_vsim_commands(r):
    assert r.execute_command("VSIM.CREATEINDEX", "idx", "DIM", 4, "METRIC", "cosine",
                             "M", 16, "EF_CONSTRUCTION", 200, "QUANT", "f32") == b"OK"
    blob = struct.pack("<4f", 1, 0, 0, 0)
    assert r.execute_command("VSIM.SET", "idx", "x", blob, "ATTR", '{"k": 1}') == 1
    assert r.execute_command("VSIM.SET", "idx", "y", 0, 1, 0, 0) == 1
    assert r.execute_command("VSIM.SET", "idx", "y", "[0, 1, 0.5, 0]") == 0
    assert r.execute_command("VSIM.CARD", "idx") == 2
    out = r.execute_command("VSIM.SEARCH", "idx", "1,0,0,0", 2, "WITHSCORES", "WITHATTRS")
    assert out[0] == b"x" and float(out[1]) == pytest.approx(0.0, abs=1e-6)
    assert out[2] == b'{"k": 1}'
    assert r.execute_command("VSIM.SEARCH", "idx", blob, 2, "FILTER", ".k == 1") == [b"x"]
    vec, attrs = r.execute_command("VSIM.GET", "idx", "y")
    assert [float(v) for v in vec] == pytest.approx([0, 1, 0.5, 0])
    assert attrs is None
    with pytest.raises(redis.ResponseError, match="dimension mismatch"):
        r.execute_command("VSIM.SET", "idx", "z", 1, 2)
    with pytest.raises(redis.ResponseError, match="no such vector index"):
        r.execute_command("VSIM.SEARCH", "nope", "1,0,0,0", 1)
    assert r.execute_command("VSIM.DEL", "idx", "x") == 1
    assert r.execute_command("VSIM.DROP", "idx") == b"OK"
    assert r.exists("idx") == 0


def test_recall_on_generated_data(r):
    """2,000 clustered 32-d vectors: VSIM's top 10 against brute force, after churn too."""
    rnd = random.Random(7)
    dim = 32
    centres = [[rnd.uniform(-1, 1) for _ in range(dim)] for _ in range(20)]
    data = {}
    for i in range(2000):
        c = centres[i % 20]
        data[f"e{i}"] = [x + rnd.uniform(-0.3, 0.3) for x in c]
    p = r.pipeline(transaction=False)
    for name, v in data.items():
        p.execute_command("VADD", "big", "FP32", struct.pack(f"<{dim}f", *v), name, "NOQUANT")
    p.execute()
    # Churn: delete 300, update 300.
    names = list(data)
    for name in names[:300]:
        assert r.vset().vrem("big", name) == 1
        del data[name]
    for name in names[300:600]:
        c = centres[rnd.randrange(20)]
        data[name] = [x + rnd.uniform(-0.3, 0.3) for x in c]
        assert r.vset().vadd("big", data[name], name,
                             quantization=QuantizationOptions.NOQUANT) == 0

    def cos(a, b):
        dot = sum(x * y for x, y in zip(a, b))
        na = sum(x * x for x in a) ** 0.5
        nb = sum(x * x for x in b) ** 0.5
        return dot / (na * nb)

    found = 0
    queries = [[x + rnd.uniform(-0.3, 0.3) for x in centres[q % 20]] for q in range(40)]
    for q in queries:
        truth = sorted(data, key=lambda n: -cos(q, data[n]))[:10]
        got = [n.decode() for n in r.vset().vsim("big", q, count=10, ef=100)]
        found += len(set(got) & set(truth))
    assert found / (len(queries) * 10) >= 0.9
