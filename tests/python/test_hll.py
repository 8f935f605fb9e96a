"""HyperLogLog commands: PFADD, PFCOUNT, PFMERGE in Redis's exact string formats.

Validated against redis-server (EMBER_SERVER=redis): the fixtures below are the bytes
Redis writes. The differential test at the end replays a seeded random sequence (with
HLLs copied between servers and deliberately corrupted strings) on a private redis-server
and on the server under test, comparing every raw reply, GET bytes included.
"""

from __future__ import annotations

import random
import shutil

import pytest
import redis

from helpers import IS_REDIS, RawConn, _redis_server_bin, reference_redis

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_HLL = "WRONGTYPE Key is not a valid HyperLogLog string value."
CORRUPT = "INVALIDOBJ Corrupted HLL object detected"

EMPTY_STALE = b"HYLL\x01" + b"\0" * 10 + b"\x80\x7f\xff"
REDIS_10 = bytes.fromhex(
    "48594c4c010000000000000000000080452580472e844fc9804412844a5184430d844103844eb984408880406a8441b1")


def err(fn, *args):
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


def fnv(b: bytes) -> int:
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    return h


def add_range(r, key, n, start=0):
    for i in range(start, start + n, 1000):
        r.pfadd(key, *[f"e{j}" for j in range(i, min(start + n, i + 1000))])


def test_pfadd_basics(r, rr):
    assert r.execute_command("PFADD", "h") == 1
    assert rr.get("h") == EMPTY_STALE
    assert r.execute_command("PFADD", "h") == 0
    assert r.pfcount("h") == 0
    assert r.pfadd("h", "a", "b", "c") == 1
    assert r.pfadd("h", "a", "b") == 0
    assert r.pfadd("h", "") == 1          # the empty string is an element too
    assert r.pfcount("h") == 4
    assert r.pfcount("missing") == 0
    assert r.type("h") == b"string"
    assert err(r.execute_command, "PFADD").startswith("wrong number of arguments")
    assert err(r.execute_command, "PFCOUNT").startswith("wrong number of arguments")
    assert err(r.execute_command, "PFMERGE").startswith("wrong number of arguments")


@pytest.mark.parametrize("n,length,before,count,after", [
    (10, 48, 0x4afcb65d27f7d346, 10, 0xd06c25fbeaa23420),
    (1000, 1906, 0x5935de0232806824, 1008, 0x4ded8ea0046b668d),
    (100000, 12304, 0xafbf1713dc5ba3c8, 100853, 0xfd1fc23694773e63),
])
def test_bytes_match_redis(rr, n, length, before, count, after):
    add_range(rr, "h", n)
    v = rr.get("h")
    assert len(v) == length
    assert v[4] == (1 if n < 2000 else 0)      # sparse, then dense
    assert fnv(v) == before
    assert rr.pfcount("h") == count
    assert fnv(rr.get("h")) == after


def test_cached_cardinality(rr):
    add_range(rr, "h", 100)
    v = rr.get("h")
    assert v[15] & 0x80
    assert rr.pfcount("h") == 100
    v = rr.get("h")
    assert int.from_bytes(v[8:16], "little") == 100
    forged = bytearray(v)
    forged[8] = 42
    rr.set("h", bytes(forged))
    assert rr.pfcount("h") == 42            # a valid cache is trusted
    assert rr.pfadd("h", "new-element") == 1
    assert rr.get("h")[15] & 0x80
    assert rr.pfcount("h") == 101


def test_redis_written_hll_loads(rr):
    rr.set("r", REDIS_10)
    assert rr.pfcount("r") == 10
    assert rr.pfadd("r", "e3") == 0
    assert rr.pfadd("r", "e10", "e11") == 1
    add_range(rr, "mine", 12)
    assert rr.pfcount("r") == 12 and rr.pfcount("mine") == 12
    assert rr.get("r") == rr.get("mine")


def test_count_union_and_merge(rr):
    rr.pfadd("a", 1, 2, 3)
    rr.pfadd("b", 3, 4, 5)
    a = rr.get("a")
    assert rr.pfcount("a", "b", "missing") == 5
    assert rr.get("a") == a                   # union count leaves keys alone
    assert rr.pfmerge("d", "a", "b") == b"OK"
    assert rr.pfcount("d") == 5
    rr.pfadd("c", 9)
    assert rr.pfmerge("d", "c") == b"OK"      # the destination is a source too
    assert rr.pfcount("d") == 6
    assert rr.execute_command("PFMERGE", "e") == b"OK"
    assert rr.get("e") == EMPTY_STALE
    assert rr.pfmerge("f", "nope") == b"OK"
    assert rr.get("f") == EMPTY_STALE
    add_range(rr, "big", 5000)
    assert rr.get("big")[4] == 0
    rr.pfmerge("sd", "a", "big")
    assert rr.get("sd")[4] == 0               # any dense input makes a dense result
    assert rr.get("d")[4] == 1
    assert rr.pfcount("sd") == rr.pfcount("a", "big")
    # Union estimates stay close to the truth.
    add_range(rr, "x", 20000)
    add_range(rr, "y", 20000, start=10000)
    u = rr.pfcount("x", "y")
    assert abs(u - 30000) < 30000 * 0.03


def test_resp3_shapes(r3):
    assert r3.pfadd("h", "a") == 1
    assert r3.pfcount("h") == 1
    assert r3.pfcount("h", "nope") == 1
    assert r3.pfmerge("d", "h") is True


def test_wrong_types(r, rr):
    r.rpush("l", "x")
    assert err(r.pfadd, "l", "a") == WRONGTYPE
    assert err(r.pfcount, "l") == WRONGTYPE
    assert err(r.pfcount, "l", "x") == WRONGTYPE
    assert err(r.pfmerge, "d", "l") == WRONGTYPE
    assert err(r.execute_command, "PFMERGE", "l") == WRONGTYPE
    assert r.exists("d") == 0
    r.set("s", "hello")
    r.set("n", 12345)
    for k in ("s", "n"):
        assert err(r.pfadd, k, "a") == NOT_HLL
        assert err(r.pfcount, k) == NOT_HLL
        assert err(r.pfcount, "nope", k) == NOT_HLL
        assert err(r.pfmerge, "d", k) == NOT_HLL
    assert r.get("s") == b"hello"
    assert r.object("encoding", "n") == b"int"


def test_corrupted_hlls(rr):
    good = REDIS_10
    bad_headers = [
        b"X" + good[1:],                      # broken magic
        good[:4] + b"\x02" + good[5:],        # unknown encoding
        good[:4] + b"\x00" + good[5:],        # dense of the wrong length
        good[:15],                            # shorter than the header
    ]
    for v in bad_headers:
        rr.set("x", v)
        assert err(rr.pfadd, "x", "a") == NOT_HLL
        assert err(rr.pfcount, "x") == NOT_HLL
        assert err(rr.pfcount, "x", "nope") == NOT_HLL
        assert err(rr.pfmerge, "d", "x") == NOT_HLL
    # Sparse codes covering more than 16384 registers.
    for tail in (b"\x80", b"\x00", b"\x40\x00"):
        rr.set("x", good + tail)
        assert err(rr.pfcount, "x") == CORRUPT
        assert err(rr.pfcount, "x", "nope") == CORRUPT
        assert err(rr.pfmerge, "d", "x") == CORRUPT
    # ...or fewer.
    short = b"HYLL\x01" + b"\0" * 10 + b"\x80" + b"\x7f\xfe"
    rr.set("x", short)
    assert err(rr.pfcount, "x") == CORRUPT
    assert err(rr.pfcount, "x", "nope") == CORRUPT
    # Every register at 63: the estimate overflows and Redis answers LLONG_MIN.
    rr.set("x", b"HYLL\0" + b"\0" * 10 + b"\x80" + b"\xff" * 12288)
    assert rr.pfcount("x") == -2**63
    assert rr.pfcount("x", "nope") == -2**63
    assert rr.get("x")[8:16] == b"\0" * 7 + b"\x80"
    # No registers at all: the (valid, zero) cache answers, updates fail.
    rr.set("x", b"HYLL\x01" + b"\0" * 11)
    assert rr.pfcount("x") == 0
    assert err(rr.pfadd, "x", "a") == CORRUPT


def test_random_damage_never_crashes(rr):
    add_range(rr, "dense", 3000)
    dense = rr.get("dense")
    rng = random.Random(99)
    for i in range(300):
        v = bytearray(REDIS_10 if i % 2 else dense)
        for _ in range(rng.randint(1, 3)):
            v[rng.randrange(16, len(v))] = rng.randrange(256)
        if i % 3 == 0:
            v += bytes([rng.randrange(256)])
        rr.set("x", bytes(v))
        for cmd in (("PFADD", "x", f"r{i}"), ("PFCOUNT", "x"), ("PFCOUNT", "x", "dense"),
                    ("PFMERGE", "y", "x")):
            try:
                rr.execute_command(*cmd)
            except redis.ResponseError as e:
                assert str(e) in (CORRUPT, NOT_HLL)
    assert rr.ping()


# ---------------------------------------------------------------------------
# Differential test against a private redis-server
# ---------------------------------------------------------------------------

KEYS = ["h1", "h2", "h3", "h4"]


def _random_command(rng: random.Random, state: dict) -> list:
    roll = rng.random()
    if roll < 0.45:
        n = rng.choice([1, 1, 2, 5, 20, 200, 1500])
        base = rng.randrange(0, 50000)
        return ["PFADD", rng.choice(KEYS), *[f"m{base + j}" for j in range(n)]]
    if roll < 0.6:
        return ["PFCOUNT", rng.choice(KEYS)]
    if roll < 0.7:
        return ["PFCOUNT", *rng.sample(KEYS + ["nokey"], rng.randint(2, 4))]
    if roll < 0.8:
        return ["PFMERGE", rng.choice(KEYS + ["d"]),
                *rng.sample(KEYS + ["nokey"], rng.randint(0, 3))]
    if roll < 0.9:
        return ["GET", rng.choice(KEYS + ["d"])]
    if roll < 0.95 and state.get("last"):
        # Copy an HLL written by the reference server, possibly damaged.
        v = bytearray(state["last"])
        if rng.random() < 0.5 and len(v) > 16:
            v[rng.randrange(16, len(v))] = rng.randrange(256)
        if rng.random() < 0.2:
            v += bytes([rng.randrange(256)])
        return ["SET", rng.choice(KEYS), bytes(v)]
    return ["DEL", rng.choice(KEYS + ["d"])]


@pytest.mark.skipif(IS_REDIS, reason="differential test compares Ember with redis-server")
@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None, reason="redis-server missing")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_differential_against_redis(server, r, seed):
    with reference_redis() as ref:
        ours = RawConn(server.port)
        for resp in ("2", "3"):
            ref.cmd("HELLO", resp)
            ours.cmd("HELLO", resp)
            ref.cmd("FLUSHALL")
            ours.cmd("FLUSHALL")
            rng = random.Random(seed * 10 + int(resp))
            state: dict = {}
            for i in range(300):
                cmd = _random_command(rng, state)
                a = ref.cmd(*cmd)
                b = ours.cmd(*cmd)
                assert a == b, f"step {i} RESP{resp}: {cmd[:3]}: redis={a!r:.200} ember={b!r:.200}"
                if cmd[0] == "GET" and isinstance(a, bytes):
                    state["last"] = a
            for k in KEYS + ["d"]:
                assert ref.cmd("GET", k) == ours.cmd("GET", k)
        ours.close()


def test_pfdebug_encoding_decode_todense_getreg(r):
    r.pfadd("hll", "a", "b", "c")
    assert r.execute_command("PFDEBUG", "ENCODING", "hll") in (b"sparse", "sparse")
    # Redis's own text for this HLL (murmurhash64a of a, b and c).
    assert r.execute_command("PFDEBUG", "DECODE", "hll") == (
        b"Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
    assert r.execute_command("PFDEBUG", "TODENSE", "hll") == 1
    assert r.execute_command("PFDEBUG", "TODENSE", "hll") == 0
    assert r.execute_command("PFDEBUG", "ENCODING", "hll") in (b"dense", "dense")
    regs = r.execute_command("PFDEBUG", "GETREG", "hll")
    assert len(regs) == 16384
    assert sorted(v for v in regs if v) == [1, 1, 2]
    assert regs[8436] == 1 and regs[8436 + 1 + 4274] == 2
    assert r.pfcount("hll") == 3
    with pytest.raises(redis.ResponseError, match="HLL encoding is not sparse"):
        r.execute_command("PFDEBUG", "DECODE", "hll")
    with pytest.raises(redis.ResponseError, match="Unknown PFDEBUG subcommand 'NOPE'"):
        r.execute_command("PFDEBUG", "NOPE", "hll")
    with pytest.raises(redis.ResponseError, match="The specified key does not exist"):
        r.execute_command("PFDEBUG", "ENCODING", "nokey")
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("PFDEBUG", "ENCODING", "str")


def test_pfselftest_passes(r):
    assert r.execute_command("PFSELFTEST") in (b"OK", True, "OK")
