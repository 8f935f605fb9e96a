"""Bitmap commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.

Validated against redis-server (EMBER_SERVER=redis); the differential test at the end
replays a seeded random command sequence on a private redis-server and on the server
under test and compares every raw reply.
"""

from __future__ import annotations

import random
import shutil

import pytest
import redis

from helpers import (
    reference_redis,
    IS_REDIS, RawConn, _redis_server_bin, requires_72,
)

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
BAD_OFFSET = "bit offset is not an integer or out of range"
BAD_BIT = "bit is not an integer or out of range"
BAD_TYPE = ("Invalid bitfield type. Use something like i16 u8. "
            "Note that u64 is not supported but i64 is.")


def err(fn, *args):
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


# ---------------------------------------------------------------------------
# SETBIT / GETBIT
# ---------------------------------------------------------------------------

def test_setbit_getbit(r):
    assert r.setbit("k", 7, 1) == 0
    assert r.get("k") == b"\x01"
    assert r.setbit("k", 7, 1) == 1
    assert r.setbit("k", 0, 1) == 0
    assert r.get("k") == b"\x81"
    assert r.getbit("k", 0) == 1 and r.getbit("k", 1) == 0 and r.getbit("k", 7) == 1
    assert r.getbit("k", 100) == 0
    assert r.getbit("missing", 3) == 0
    assert r.setbit("k", 7, 0) == 1
    assert r.get("k") == b"\x80"
    # Growing pads with zero bytes, even when clearing a bit.
    assert r.setbit("g", 23, 0) == 0
    assert r.get("g") == b"\x00\x00\x00"
    assert r.setbit("k", 15, 1) == 0
    assert r.get("k") == b"\x80\x01"


def test_setbit_on_int_encoded_and_getbit_on_int(r):
    r.set("n", 1)   # "1" = 0x31
    assert r.getbit("n", 2) == 1 and r.getbit("n", 3) == 1 and r.getbit("n", 7) == 1
    assert r.getbit("n", 6) == 0
    assert r.setbit("n", 6, 1) == 0
    assert r.get("n") == b"3"


def test_setbit_errors(r):
    assert err(r.execute_command, "SETBIT", "k", -1, 1) == BAD_OFFSET
    assert err(r.execute_command, "SETBIT", "k", "abc", 1) == BAD_OFFSET
    assert err(r.execute_command, "SETBIT", "k", 4294967296, 1) == BAD_OFFSET
    assert err(r.execute_command, "SETBIT", "k", "#1", 1) == BAD_OFFSET
    assert err(r.execute_command, "SETBIT", "k", 0, 2) == BAD_BIT
    assert err(r.execute_command, "SETBIT", "k", 0, -1) == BAD_BIT
    assert err(r.execute_command, "SETBIT", "k", 0, "x") == BAD_BIT
    # Offset is checked before the bit value.
    assert err(r.execute_command, "SETBIT", "k", -1, 5) == BAD_OFFSET
    assert err(r.execute_command, "GETBIT", "k", -1) == BAD_OFFSET
    assert err(r.execute_command, "GETBIT", "k", 4294967296) == BAD_OFFSET
    assert r.exists("k") == 0
    r.lpush("l", "a")
    assert err(r.execute_command, "SETBIT", "l", 0, 1) == WRONGTYPE
    assert err(r.execute_command, "GETBIT", "l", 0) == WRONGTYPE
    # Arity.
    assert "wrong number of arguments" in err(r.execute_command, "SETBIT", "k", 0)
    assert "wrong number of arguments" in err(r.execute_command, "GETBIT", "k")


def test_setbit_keeps_ttl(r):
    r.set("k", "a", ex=100)
    r.setbit("k", 100, 1)
    assert 0 < r.ttl("k") <= 100


# ---------------------------------------------------------------------------
# BITCOUNT
# ---------------------------------------------------------------------------

def test_bitcount(r):
    r.set("k", "foobar")
    assert r.bitcount("k") == 26
    assert r.bitcount("k", 0, 0) == 4
    assert r.bitcount("k", 1, 1) == 6
    assert r.bitcount("k", 1, -2) == 18
    assert r.bitcount("k", -3, -1) == 10
    assert r.bitcount("k", -1, -3) == 0
    assert r.bitcount("k", 5, 1) == 0
    assert r.bitcount("k", -100, 100) == 26
    assert r.execute_command("BITCOUNT", "k", 5, 30, "BIT") == 17
    assert r.execute_command("BITCOUNT", "k", 5, 30, "byte") == 4
    assert r.execute_command("BITCOUNT", "k", 0, -1, "BIT") == 26
    assert r.execute_command("BITCOUNT", "k", -7, -1, "bit") == 4
    assert r.execute_command("BITCOUNT", "k", 1, 1, "BIT") == 1
    assert r.execute_command("BITCOUNT", "k", 0, 0, "BIT") == 0
    assert r.bitcount("missing") == 0
    assert r.bitcount("missing", 0, 5) == 0
    r.set("e", "")
    assert r.bitcount("e") == 0
    r.set("n", 7)
    assert r.bitcount("n") == 5


def test_bitcount_errors(r):
    r.set("k", "foobar")
    assert err(r.execute_command, "BITCOUNT", "k", 0) == "syntax error"
    assert err(r.execute_command, "BITCOUNT", "k", 0, 1, "BIT", "x") == "syntax error"
    assert err(r.execute_command, "BITCOUNT", "k", 0, 1, "bits") == "syntax error"
    assert err(r.execute_command, "BITCOUNT", "k", "a", 1) == \
        "value is not an integer or out of range"
    r.sadd("s", "a")
    assert err(r.execute_command, "BITCOUNT", "s") == WRONGTYPE
    assert err(r.execute_command, "BITCOUNT", "s", 0, 1) == WRONGTYPE


@requires_72
def test_bitcount_bitpos_missing_key_bad_args(r):
    # Redis 7.2 validates the arguments before looking the key up.
    assert err(r.execute_command, "BITCOUNT", "missing", 0, 1, "x") == "syntax error"
    assert err(r.execute_command, "BITCOUNT", "missing", "a", 1) == \
        "value is not an integer or out of range"
    assert err(r.execute_command, "BITPOS", "missing", 1, 0, 1, "x") == "syntax error"
    assert err(r.execute_command, "BITPOS", "missing", 1, "a") == \
        "value is not an integer or out of range"


# ---------------------------------------------------------------------------
# BITPOS
# ---------------------------------------------------------------------------

def test_bitpos(r):
    r.set("k", b"\xff\xf0\x00")
    assert r.bitpos("k", 0) == 12
    assert r.bitpos("k", 1) == 0
    r.set("k", b"\x00\xff\xf0")
    assert r.bitpos("k", 1, 0) == 8
    assert r.bitpos("k", 1, 2) == 16
    assert r.bitpos("k", 1, 2, -1) == 16
    assert r.bitpos("k", 1, 7, 15, "bit") == 8
    assert r.bitpos("k", 0, 8, 15, "bit") == -1
    assert r.bitpos("k", 0, 8, 20, "bit") == 20
    assert r.bitpos("k", 1, 3) == -1
    r.set("ones", b"\xff\xff")
    assert r.bitpos("ones", 0) == 16          # padded with zeros past the end
    assert r.bitpos("ones", 0, 1) == 16
    assert r.bitpos("ones", 0, 0, -1) == -1   # explicit end: no padding
    assert r.bitpos("ones", 0, 0, 1, "BYTE") == -1
    assert r.bitpos("missing", 0) == 0
    assert r.bitpos("missing", 1) == -1
    assert r.bitpos("missing", 1, 0, 1, "BIT") == -1
    r.set("e", "")
    assert r.bitpos("e", 0) == -1
    assert r.bitpos("e", 1) == -1
    r.set("z", b"\x00\x00")
    assert r.bitpos("z", 1) == -1
    assert r.bitpos("z", 0, 5, 3) == -1


def test_bitpos_errors(r):
    r.set("k", "a")
    assert err(r.execute_command, "BITPOS", "k", 2) == "The bit argument must be 1 or 0."
    assert err(r.execute_command, "BITPOS", "k", "x") == \
        "value is not an integer or out of range"
    assert err(r.execute_command, "BITPOS", "k", 1, 0, 1, "bits") == "syntax error"
    assert err(r.execute_command, "BITPOS", "k", 1, 0, 1, "bit", "x") == "syntax error"
    r.hset("h", "a", "b")
    assert err(r.execute_command, "BITPOS", "h", 1) == WRONGTYPE


# ---------------------------------------------------------------------------
# BITOP
# ---------------------------------------------------------------------------

def test_bitop(r):
    r.set("a", b"\xf0\x0f\xaa")
    r.set("b", b"\xff\x00")
    assert r.bitop("AND", "d", "a", "b") == 3
    assert r.get("d") == b"\xf0\x00\x00"
    assert r.bitop("or", "d", "a", "b") == 3
    assert r.get("d") == b"\xff\x0f\xaa"
    assert r.bitop("XOR", "d", "a", "b") == 3
    assert r.get("d") == b"\x0f\x0f\xaa"
    assert r.bitop("NOT", "d", "a") == 3
    assert r.get("d") == b"\x0f\xf0\x55"
    assert r.bitop("AND", "d", "a", "missing") == 3
    assert r.get("d") == b"\x00\x00\x00"
    assert r.bitop("OR", "d", "a") == 3
    assert r.get("d") == b"\xf0\x0f\xaa"
    # The destination may be a source.
    assert r.bitop("XOR", "a", "a", "b") == 3
    assert r.get("a") == b"\x0f\x0f\xaa"
    r.set("n", 12)
    assert r.bitop("OR", "d", "n") == 2
    assert r.get("d") == b"12"


def test_bitop_empty_result_deletes_dest(r):
    r.set("d", "x", ex=100)
    assert r.bitop("OR", "d", "m1", "m2") == 0
    assert r.exists("d") == 0
    r.lpush("l", "x")
    assert r.bitop("NOT", "l", "m1") == 0
    assert r.exists("l") == 0
    r.set("e", "")
    r.set("d", "x")
    assert r.bitop("AND", "d", "e") == 0
    assert r.exists("d") == 0


def test_bitop_overwrites_and_clears_ttl(r):
    r.set("a", "abc")
    r.set("d", "old", ex=100)
    assert r.bitop("AND", "d", "a") == 3
    assert r.ttl("d") == -1
    r.zadd("z", {"m": 1})
    assert r.bitop("AND", "z", "a") == 3
    assert r.type("z") == b"string"


def test_bitop_errors(r):
    r.set("a", "x")
    assert err(r.execute_command, "BITOP", "NOT", "d", "a", "a") == \
        "BITOP NOT must be called with a single source key."
    assert err(r.execute_command, "BITOP", "NAND", "d", "a") == "syntax error"
    r.sadd("s", "m")
    assert err(r.execute_command, "BITOP", "AND", "d", "a", "s") == WRONGTYPE
    assert r.exists("d") == 0
    assert "wrong number of arguments" in err(r.execute_command, "BITOP", "AND", "d")


# ---------------------------------------------------------------------------
# BITFIELD / BITFIELD_RO
# ---------------------------------------------------------------------------

def test_bitfield_basic(r):
    assert r.execute_command("BITFIELD", "k", "SET", "i8", 0, 100, "GET", "i8", 0) == [0, 100]
    assert r.get("k") == b"d"
    assert r.execute_command("BITFIELD", "k", "INCRBY", "u2", 100, 1, "GET", "u4", 0) == [1, 6]
    assert r.strlen("k") == 13
    assert r.execute_command("BITFIELD", "k", "SET", "u8", "#1", 255, "GET", "u8", "#1",
                             "GET", "i4", "#3", "GET", "i8", 8) == [0, 255, -1, -1]
    assert r.execute_command("BITFIELD", "k", "GET", "u8", 1000, "GET", "i64", 0) == \
        [0, 7277535522854010880]
    assert r.execute_command("BITFIELD", "missing", "GET", "i8", 0) == [0]
    assert r.exists("missing") == 0
    assert r.execute_command("BITFIELD", "k") == []


def test_bitfield_overflow(r):
    cmd = r.execute_command
    assert cmd("BITFIELD", "k", "SET", "u8", 0, 250) == [0]
    assert cmd("BITFIELD", "k", "INCRBY", "u8", 0, 10) == [4]
    assert cmd("BITFIELD", "k", "OVERFLOW", "SAT", "INCRBY", "u8", 0, 300,
               "INCRBY", "u8", 0, -1000) == [255, 0]
    assert cmd("BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", 0, 256,
               "SET", "u8", 0, 3, "OVERFLOW", "WRAP", "INCRBY", "u8", 0, 256) == [None, 0, 3]
    assert cmd("BITFIELD", "k", "SET", "i8", 0, 127, "INCRBY", "i8", 0, 1) == [3, -128]
    assert cmd("BITFIELD", "k", "OVERFLOW", "sat", "INCRBY", "i8", 0, -1) == [-128]
    assert cmd("BITFIELD", "k", "OVERFLOW", "fail", "SET", "i8", 0, 128, "GET", "i8", 0) == \
        [None, -128]
    assert cmd("BITFIELD", "k", "SET", "i64", 0, 9223372036854775807,
               "INCRBY", "i64", 0, 1) == [-9223372036854775808, -9223372036854775808]
    assert cmd("BITFIELD", "k", "OVERFLOW", "SAT", "INCRBY", "i64", 0, -1) == \
        [-9223372036854775808]
    assert cmd("BITFIELD", "k", "OVERFLOW", "SAT", "SET", "u63", 0, -1,
               "GET", "u63", 0) == [4611686018427387904, 9223372036854775807]
    # Redis's exact arithmetic: SAT on a far-out-of-range SET saturates high.
    assert cmd("BITFIELD", "k", "OVERFLOW", "SAT", "SET", "i8", 0,
               -9223372036854775808, "GET", "i8", 0) == [-1, 127]
    assert cmd("BITFIELD", "k", "SET", "i1", 0, 1, "GET", "i1", 0, "GET", "u1", 0) == [0, -1, 1]


def test_bitfield_fail_still_creates_key(r):
    assert r.execute_command("BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u2", 10, 9) == [None]
    assert r.get("k") == b"\x00\x00"


def test_bitfield_errors(r):
    cmd = r.execute_command
    assert err(cmd, "BITFIELD", "k", "GET", "u64", 0) == BAD_TYPE
    assert err(cmd, "BITFIELD", "k", "GET", "i65", 0) == BAD_TYPE
    assert err(cmd, "BITFIELD", "k", "GET", "i0", 0) == BAD_TYPE
    assert err(cmd, "BITFIELD", "k", "GET", "x8", 0) == BAD_TYPE
    assert err(cmd, "BITFIELD", "k", "GET", "i8", -1) == BAD_OFFSET
    assert err(cmd, "BITFIELD", "k", "GET", "i8", "#-1") == BAD_OFFSET
    assert err(cmd, "BITFIELD", "k", "GET", "i8", "#") == BAD_OFFSET
    assert err(cmd, "BITFIELD", "k", "SET", "i8", 4294967296, 1) == BAD_OFFSET
    assert err(cmd, "BITFIELD", "k", "SET", "i8", "#536870912", 1) == BAD_OFFSET
    assert err(cmd, "BITFIELD", "k", "SET", "i8", 0, "x") == \
        "value is not an integer or out of range"
    assert err(cmd, "BITFIELD", "k", "GET", "i8") == "syntax error"
    assert err(cmd, "BITFIELD", "k", "SET", "i8", 0) == "syntax error"
    assert err(cmd, "BITFIELD", "k", "FOO") == "syntax error"
    assert err(cmd, "BITFIELD", "k", "OVERFLOW") == "syntax error"
    assert err(cmd, "BITFIELD", "k", "OVERFLOW", "x", "GET", "i8", 0) == \
        "Invalid OVERFLOW type specified"
    # Nothing runs when a later operation is bad.
    assert err(cmd, "BITFIELD", "k", "SET", "i8", 0, 1, "GET", "u64", 0) == BAD_TYPE
    assert r.exists("k") == 0
    r.lpush("l", "a")
    assert err(cmd, "BITFIELD", "l", "GET", "i8", 0) == WRONGTYPE
    assert err(cmd, "BITFIELD", "l", "SET", "i8", 0, 1) == WRONGTYPE
    assert err(cmd, "BITFIELD_RO", "l", "GET", "i8", 0) == WRONGTYPE


def test_bitfield_ro(r):
    r.set("k", "abc")
    assert r.execute_command("BITFIELD_RO", "k", "GET", "u8", 0, "GET", "i4", "#1") == [97, 1]
    assert r.execute_command("BITFIELD_RO", "missing", "GET", "u8", 0) == [0]
    assert r.execute_command("BITFIELD_RO", "k") == []
    assert err(r.execute_command, "BITFIELD_RO", "k", "SET", "u8", 0, 1) == \
        "BITFIELD_RO only supports the GET subcommand"
    assert err(r.execute_command, "BITFIELD_RO", "k", "INCRBY", "u8", 0, 1) == \
        "BITFIELD_RO only supports the GET subcommand"
    # Parse errors come first.
    assert err(r.execute_command, "BITFIELD_RO", "k", "SET", "u8", 0, 1, "GET", "u64", 0) == \
        BAD_TYPE
    assert r.get("k") == b"abc"


def test_resp3_shapes(r3, rr3):
    assert rr3.execute_command("SETBIT", "k", 1, 1) == 0
    assert rr3.execute_command("BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u1", 1, 1,
                               "GET", "u8", 0) == [None, 64]
    assert rr3.execute_command("BITCOUNT", "k") == 1
    assert rr3.execute_command("BITPOS", "k", 1) == 1


def test_resp2_null_in_bitfield(rr):
    assert rr.execute_command("BITFIELD", "k", "OVERFLOW", "FAIL", "SET", "u1", 0, 2) == [None]
    assert rr.execute_command("BITFIELD", "k", "GET", "u1", 0) == [0]


# ---------------------------------------------------------------------------
# Differential test against a private redis-server
# ---------------------------------------------------------------------------

KEYS = ["k1", "k2", "k3"]


def _random_command(rng: random.Random) -> list:
    k = rng.choice(KEYS)
    roll = rng.random()
    if roll < 0.18:
        return ["SETBIT", k, rng.randrange(0, 80), rng.randrange(0, 2)]
    if roll < 0.28:
        return ["GETBIT", k, rng.randrange(0, 90)]
    if roll < 0.33:
        return ["SET", k, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 6)))]
    if roll < 0.35:
        return ["SET", k, rng.randrange(-1000, 100000)]
    if roll < 0.45:
        if rng.random() < 0.3:
            return ["BITCOUNT", k]
        c = ["BITCOUNT", k, rng.randrange(-12, 12), rng.randrange(-12, 12)]
        if rng.random() < 0.5:
            c.append(rng.choice(["BIT", "byte"]))
            if c[-1] == "BIT":
                c[2], c[3] = rng.randrange(-90, 90), rng.randrange(-90, 90)
        return c
    if roll < 0.57:
        c = ["BITPOS", k, rng.randrange(0, 2)]
        n = rng.randrange(0, 4)
        if n >= 1:
            c.append(rng.randrange(-12, 12))
        if n >= 2:
            c.append(rng.randrange(-12, 12))
        if n == 3:
            c.append(rng.choice(["BIT", "BYTE"]))
            if c[-1] == "BIT":
                c[3], c[4] = rng.randrange(-90, 90), rng.randrange(-90, 90)
        return c
    if roll < 0.67:
        op = rng.choice(["AND", "OR", "XOR", "NOT"])
        n = 1 if op == "NOT" else rng.randrange(1, 4)
        return ["BITOP", op, rng.choice(KEYS), *[rng.choice(KEYS + ["none"]) for _ in range(n)]]
    if roll < 0.70:
        return ["DEL", k]
    if roll < 0.72:
        return ["LPUSH", k, "x"]
    if roll < 0.74:
        return ["GET", k]
    c = ["BITFIELD" if rng.random() < 0.8 else "BITFIELD_RO", k]
    for _ in range(rng.randrange(0, 5)):
        sub = rng.random()
        signed = rng.random() < 0.5
        width = rng.randrange(1, 65 if signed else 64)
        t = f"{'i' if signed else 'u'}{width}"
        off = rng.randrange(0, 80)
        off = f"#{rng.randrange(0, 4)}" if rng.random() < 0.2 else off
        if sub < 0.15:
            c += ["OVERFLOW", rng.choice(["WRAP", "SAT", "FAIL"])]
        elif sub < 0.5:
            c += ["GET", t, off]
        elif sub < 0.75:
            v = rng.choice([rng.randrange(-300, 300), rng.randrange(-2**63, 2**63)])
            c += ["SET", t, off, v]
        else:
            v = rng.choice([rng.randrange(-300, 300), rng.randrange(-2**63, 2**63)])
            c += ["INCRBY", t, off, v]
    return c


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
            for i in range(400):
                cmd = _random_command(rng)
                a = ref.cmd(*cmd)
                b = ours.cmd(*cmd)
                assert a == b, f"step {i} RESP{resp}: {cmd}: redis={a!r} ember={b!r}"
            for k in KEYS:
                assert ref.cmd("TYPE", k) == ours.cmd("TYPE", k)
                assert ref.cmd("GET", k) == ours.cmd("GET", k)
        ours.close()
