"""Ember's optional string compression (`compression yes`, `compression-threshold`).

Values at or above the threshold are stored zstd-compressed; every command must see the
original bytes. Checked differentially against a private redis-server (which never
compresses) and through INFO's compressed_values / compression_bytes_saved counters.
"""

from __future__ import annotations

import json
import random
import shutil
import time

import pytest

from helpers import IS_REDIS, RawConn, RespError, _redis_server_bin, reference_redis

pytestmark = pytest.mark.skipif(IS_REDIS, reason="Ember-only feature (compression)")


def text(n: int, seed: int = 0) -> bytes:
    """JSON-like bytes of length n (compressible)."""
    rows = []
    i = seed
    while sum(len(r) for r in rows) < n:
        rows.append(json.dumps({"id": i, "user": f"name{i}", "ok": True, "tags": ["a", "b"]}))
        i += 1
    return ",".join(rows).encode()[:n]


def info(conn: RawConn) -> dict[str, str]:
    raw = conn.cmd("INFO", "memory")
    out = {}
    for line in raw.decode().splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


def compressed(conn: RawConn) -> int:
    return int(info(conn)["compressed_values"])


def wait_compressed(conn: RawConn, n: int) -> None:
    deadline = time.monotonic() + 10
    while compressed(conn) != n:
        assert time.monotonic() < deadline, f"compressed_values {compressed(conn)} != {n}"
        time.sleep(0.02)


def test_get_set_and_counters(start_server):
    srv = start_server("--compression", "yes", "--compression-threshold", "100")
    c = srv.client()
    v = text(5000)
    c.set("k", v)
    assert c.get("k") == v
    assert c.strlen("k") == 5000
    st = info(srv.raw())
    assert st["compression"] == "yes"
    assert int(st["compressed_values"]) == 1
    assert 2500 < int(st["compression_bytes_saved"]) < 5000
    assert c.object("encoding", "k") == b"raw"
    # Random bytes do not compress: stored as they are, not counted.
    noise = random.Random(7).randbytes(5000)
    c.set("n", noise)
    assert c.get("n") == noise
    assert compressed(srv.raw()) == 1
    c.delete("k")
    wait_compressed(srv.raw(), 0)
    assert int(info(srv.raw())["compression_bytes_saved"]) == 0


def test_config_get_set(start_server):
    srv = start_server()
    c = srv.client()
    assert c.config_get("compression") == {"compression": "no"}
    assert c.config_get("compression-threshold") == {"compression-threshold": "512"}
    c.set("before", text(2000))
    assert compressed(srv.raw()) == 0
    assert info(srv.raw())["compression"] == "no"
    c.config_set("compression", "yes")
    c.config_set("compression-threshold", "1000")
    c.set("small", text(999))
    assert compressed(srv.raw()) == 0
    c.set("after", text(1000))
    assert compressed(srv.raw()) == 1
    # Values written before the change stay as they were until rewritten.
    assert c.get("before") == text(2000)
    c.append("before", b"!")
    assert compressed(srv.raw()) == 2
    assert c.get("before") == text(2000) + b"!"
    with pytest.raises(Exception, match="argument must be 'yes' or 'no'"):
        c.config_set("compression", "sometimes")


def _value(rng: random.Random) -> bytes:
    kind = rng.random()
    if kind < 0.5:
        return text(rng.choice([20, 40, 50, 64, 200, 1000, 3000]), rng.randrange(100))
    if kind < 0.7:
        return bytes([rng.choice(b"ab")]) * rng.randrange(1, 400)
    if kind < 0.85:
        return str(rng.randrange(-1000, 100000)).encode()
    return rng.randbytes(rng.randrange(1, 300))


KEYS = ["a", "b", "c"]


def _command(rng: random.Random) -> list:
    k = rng.choice(KEYS)
    n = rng.randrange(0, 4000)
    choices = [
        lambda: ["SET", k, _value(rng)],
        lambda: ["GET", k],
        lambda: ["APPEND", k, _value(rng)],
        lambda: ["SETRANGE", k, str(rng.randrange(0, 3000)), _value(rng)[:50]],
        lambda: ["GETRANGE", k, str(rng.randrange(-500, 500)), str(rng.randrange(-500, 3000))],
        lambda: ["SUBSTR", k, str(rng.randrange(0, 100)), str(rng.randrange(0, 3000))],
        lambda: ["STRLEN", k],
        lambda: ["GETSET", k, _value(rng)],
        lambda: ["GETDEL", k],
        lambda: ["GETEX", k, "PERSIST"],
        lambda: ["INCR", k],
        lambda: ["INCRBYFLOAT", k, "1.5"],
        lambda: ["GETBIT", k, str(n * 4)],
        lambda: ["SETBIT", k, str(n * 4), str(rng.randrange(2))],
        lambda: ["BITCOUNT", k],
        lambda: ["BITCOUNT", k, str(rng.randrange(0, 100)), str(rng.randrange(-50, 2000))],
        lambda: ["BITPOS", k, str(rng.randrange(2))],
        lambda: ["BITFIELD", k, "GET", "u8", str(n), "INCRBY", "i12", str(n * 2), "77"],
        lambda: ["BITOP", rng.choice(["AND", "OR", "XOR"]), "d", k, rng.choice(KEYS)],
        lambda: ["GET", "d"],
        lambda: ["OBJECT", "ENCODING", k],
        lambda: ["LCS", k, rng.choice(KEYS), "LEN"],
        lambda: ["PFADD", k, "x", "y"],
        lambda: ["PFCOUNT", k],
        lambda: ["MGET", *KEYS],
        lambda: ["DEL", k],
    ]
    return rng.choice(choices)()


def _same(a, b) -> bool:
    if isinstance(a, RespError) or isinstance(b, RespError):
        return isinstance(a, RespError) and isinstance(b, RespError) and a.message == b.message
    return a == b


@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None, reason="redis-server missing")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_differential_against_redis(start_server, seed):
    srv = start_server("--compression", "yes", "--compression-threshold", "32")
    ours = srv.raw()
    rng = random.Random(seed)
    saw_compressed = 0
    with reference_redis() as ref:
        for i in range(400):
            cmd = _command(rng)
            if cmd[0] == "LCS" and ref.cmd("STRLEN", cmd[1]) * ref.cmd("STRLEN", cmd[2]) > 2_000_000:
                continue
            a = ref.cmd(*cmd)
            b = ours.cmd(*cmd)
            assert _same(a, b), f"step {i}: {cmd!r:.120}: redis={a!r:.200} ember={b!r:.200}"
            saw_compressed = max(saw_compressed, compressed(ours))
        for k in KEYS + ["d"]:
            assert ref.cmd("GET", k) == ours.cmd("GET", k)
    # The sequence really exercised compressed values.
    assert saw_compressed > 0


def test_sort_by_and_get_patterns(start_server):
    srv = start_server("--compression", "yes", "--compression-threshold", "32")
    c = srv.client()
    c.rpush("ids", 3, 1, 2)
    for i in (1, 2, 3):
        c.set(f"w_{i}", b"0" * 80 + str(10 - i).encode())
        c.set(f"obj_{i}", text(300, i))
    assert compressed(srv.raw()) == 6
    assert c.sort("ids", by="w_*") == [b"3", b"2", b"1"]
    assert c.sort("ids", by="w_*", get=["#", "obj_*"]) == [
        b"3", text(300, 3), b"2", text(300, 2), b"1", text(300, 1)]
