"""Set commands: SADD ... SSCAN, encodings, errors, RESP3 shapes and a seeded
differential run against a real redis-server (set order is unspecified, so
unordered replies are compared as sets)."""

import random
import shutil
import socket
import subprocess
import time

import pytest
import redis

from helpers import IS_REDIS, REDIS_VERSION, RawConn

# Listpack-encoded sets arrived in Redis 7.2 (older servers use hashtable instead).
LISTPACK = b"hashtable" if IS_REDIS and REDIS_VERSION and REDIS_VERSION < (7, 2) else b"listpack"

WRONGTYPE = r"^WRONGTYPE Operation against a key holding the wrong kind of value$"
NOT_INT = r"^value is not an integer or out of range$"


def S(*xs):
    return {x.encode() if isinstance(x, str) else x for x in xs}


def test_sadd_srem_scard(rr):
    assert rr.execute_command("SADD", "s", "a", "b", "a") == 2
    assert rr.execute_command("SADD", "s", "b", "c") == 1
    assert rr.execute_command("SCARD", "s") == 3
    assert rr.execute_command("SREM", "s", "a", "zz") == 1
    assert rr.execute_command("SREM", "nokey", "a") == 0
    assert rr.execute_command("SCARD", "nokey") == 0
    assert rr.execute_command("SREM", "s", "b", "c") == 2
    assert rr.execute_command("EXISTS", "s") == 0


def test_membership(rr):
    rr.execute_command("SADD", "s", "a", "1")
    assert rr.execute_command("SISMEMBER", "s", "a") == 1
    assert rr.execute_command("SISMEMBER", "s", "x") == 0
    assert rr.execute_command("SISMEMBER", "nokey", "x") == 0
    assert rr.execute_command("SMISMEMBER", "s", "a", "x", "1") == [1, 0, 1]
    assert rr.execute_command("SMISMEMBER", "nokey", "a") == [0]
    assert set(rr.execute_command("SMEMBERS", "s")) == S("a", "1")
    assert rr.execute_command("SMEMBERS", "nokey") == []


def test_encodings(r):
    r.sadd("i", *range(10))
    assert r.object("encoding", "i") == b"intset"
    r.sadd("i", "x")
    assert r.object("encoding", "i") == LISTPACK
    r.sadd("big", *range(513))
    assert r.object("encoding", "big") == b"hashtable"
    r.sadd("i2", *range(512))
    assert r.object("encoding", "i2") == b"intset"
    r.sadd("i2", 512)
    assert r.object("encoding", "i2") == b"hashtable"
    r.sadd("l", *[f"m{i}" for i in range(128)])
    assert r.object("encoding", "l") == LISTPACK
    r.sadd("l", "m128")
    assert r.object("encoding", "l") == b"hashtable"
    r.sadd("long", "x" * 65)
    assert r.object("encoding", "long") == b"hashtable"
    assert r.type("i") == b"set"


def test_wrongtype(r):
    r.set("str", "v")
    r.sadd("s", "a")
    for args in [("SADD", "str", "a"), ("SREM", "str", "a"), ("SMEMBERS", "str"),
                 ("SISMEMBER", "str", "a"), ("SMISMEMBER", "str", "a"), ("SCARD", "str"),
                 ("SPOP", "str"), ("SPOP", "str", "2"), ("SRANDMEMBER", "str"),
                 ("SRANDMEMBER", "str", "2"), ("SMOVE", "str", "s", "a"),
                 ("SMOVE", "s", "str", "a"), ("SINTER", "s", "str"), ("SINTER", "nokey", "str"),
                 ("SINTERCARD", "2", "s", "str"), ("SINTERSTORE", "d", "s", "str"),
                 ("SUNION", "s", "str"), ("SUNIONSTORE", "d", "str"), ("SDIFF", "s", "str"),
                 ("SDIFFSTORE", "d", "str", "s"), ("SSCAN", "str", "0")]:
        with pytest.raises(redis.ResponseError, match=WRONGTYPE):
            r.execute_command(*args)
    assert r.get("str") == b"v"
    assert r.smove("nokey", "str", "a") == 0
    assert r.exists("d") == 0


def test_spop(rr):
    assert rr.execute_command("SPOP", "nokey") is None
    assert rr.execute_command("SPOP", "nokey", "3") == []
    rr.execute_command("SADD", "s", *"abcdef")
    m = rr.execute_command("SPOP", "s")
    assert m in S(*"abcdef")
    assert rr.execute_command("SISMEMBER", "s", m) == 0
    two = rr.execute_command("SPOP", "s", "2")
    assert len(set(two)) == 2
    assert rr.execute_command("SPOP", "s", "0") == []
    rest = rr.execute_command("SPOP", "s", "100")
    assert set(rest) | set(two) | {m} == S(*"abcdef")
    assert rr.execute_command("EXISTS", "s") == 0
    with pytest.raises(redis.ResponseError, match="^value is out of range, must be positive$"):
        rr.execute_command("SPOP", "s", "-1")
    with pytest.raises(redis.ResponseError, match="^value is out of range, must be positive$"):
        rr.execute_command("SPOP", "s", "x")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        rr.execute_command("SPOP", "s", "1", "2")


def test_spop_big(rr):
    rr.execute_command("SADD", "s", *[f"m{i}" for i in range(1000)])
    got = rr.execute_command("SPOP", "s", "300")
    assert len(set(got)) == 300
    assert rr.execute_command("SCARD", "s") == 700
    assert not any(rr.execute_command("SMISMEMBER", "s", *got))


def test_srandmember(rr):
    assert rr.execute_command("SRANDMEMBER", "nokey") is None
    assert rr.execute_command("SRANDMEMBER", "nokey", "5") == []
    assert rr.execute_command("SRANDMEMBER", "nokey", "-5") == []
    rr.execute_command("SADD", "s", *"abc")
    assert rr.execute_command("SRANDMEMBER", "s") in S(*"abc")
    assert rr.execute_command("SRANDMEMBER", "s", "0") == []
    two = rr.execute_command("SRANDMEMBER", "s", "2")
    assert len(set(two)) == 2 and set(two) <= S(*"abc")
    assert set(rr.execute_command("SRANDMEMBER", "s", "10")) == S(*"abc")
    rep = rr.execute_command("SRANDMEMBER", "s", "-10")
    assert len(rep) == 10 and set(rep) <= S(*"abc")
    assert rr.execute_command("SCARD", "s") == 3
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("SRANDMEMBER", "s", "x")
    with pytest.raises(redis.ResponseError, match="out of range"):
        rr.execute_command("SRANDMEMBER", "s", "-9223372036854775808")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        rr.execute_command("SRANDMEMBER", "s", "1", "2")


def test_srandmember_big_unique(rr):
    rr.execute_command("SADD", "s", *range(2000))
    for n in (5, 100, 1500):
        got = rr.execute_command("SRANDMEMBER", "s", str(n))
        assert len(got) == n and len(set(got)) == n


def test_smove(rr):
    rr.execute_command("SADD", "a", "x", "y")
    assert rr.execute_command("SMOVE", "a", "b", "x") == 1
    assert rr.execute_command("SMOVE", "a", "b", "zz") == 0
    assert rr.execute_command("SMOVE", "nokey", "b", "x") == 0
    assert set(rr.execute_command("SMEMBERS", "b")) == S("x")
    assert rr.execute_command("SMOVE", "a", "a", "y") == 1
    assert rr.execute_command("SMOVE", "a", "a", "q") == 0
    assert rr.execute_command("SMOVE", "a", "b", "y") == 1
    assert rr.execute_command("EXISTS", "a") == 0
    assert set(rr.execute_command("SMEMBERS", "b")) == S("x", "y")


def test_inter_union_diff(rr):
    rr.execute_command("SADD", "a", "1", "2", "3", "x")
    rr.execute_command("SADD", "b", "2", "3", "4")
    rr.execute_command("SADD", "c", "3", "x", "5")
    assert set(rr.execute_command("SINTER", "a", "b")) == S("2", "3")
    assert set(rr.execute_command("SINTER", "a", "b", "c")) == S("3")
    assert rr.execute_command("SINTER", "a", "nokey") == []
    assert set(rr.execute_command("SUNION", "a", "nokey", "c")) == S("1", "2", "3", "x", "5")
    assert set(rr.execute_command("SDIFF", "a", "b")) == S("1", "x")
    assert set(rr.execute_command("SDIFF", "a", "b", "c")) == S("1")
    assert rr.execute_command("SDIFF", "nokey", "a") == []
    assert rr.execute_command("SINTERSTORE", "d", "a", "b") == 2
    assert set(rr.execute_command("SMEMBERS", "d")) == S("2", "3")
    assert rr.execute_command("SUNIONSTORE", "d", "a", "b") == 5
    assert rr.execute_command("SCARD", "d") == 5
    assert rr.execute_command("SDIFFSTORE", "d", "a", "a") == 0
    assert rr.execute_command("EXISTS", "d") == 0
    rr.execute_command("SET", "d", "str")
    assert rr.execute_command("SINTERSTORE", "d", "a", "nokey") == 0
    assert rr.execute_command("EXISTS", "d") == 0
    rr.execute_command("SET", "d", "str")
    rr.execute_command("EXPIRE", "d", "100")
    assert rr.execute_command("SUNIONSTORE", "d", "a") == 4
    assert rr.execute_command("TTL", "d") == -1
    assert rr.execute_command("SINTERSTORE", "a", "a", "c") == 2
    assert set(rr.execute_command("SMEMBERS", "a")) == S("3", "x")


def test_store_encoding(r):
    r.sadd("big", *range(1000))
    r.sadd("small", 1, 2, 3)
    r.sinterstore("d", "big", "small")
    assert r.object("encoding", "d") == b"intset"
    r.sdiffstore("d2", "big", *[f"nokey{i}" for i in range(2)])
    assert r.object("encoding", "d2") == b"hashtable"


def test_sintercard(rr):
    rr.execute_command("SADD", "a", *"abcde")
    rr.execute_command("SADD", "b", *"bcdef")
    assert rr.execute_command("SINTERCARD", "2", "a", "b") == 4
    assert rr.execute_command("SINTERCARD", "2", "a", "b", "LIMIT", "2") == 2
    assert rr.execute_command("SINTERCARD", "2", "a", "b", "limit", "0") == 4
    assert rr.execute_command("SINTERCARD", "1", "a") == 5
    assert rr.execute_command("SINTERCARD", "2", "a", "nokey") == 0
    for args, msg in [(("0", "a"), "^numkeys should be greater than 0$"),
                      (("x", "a"), "^numkeys should be greater than 0$"),
                      (("3", "a", "b"), "^Number of keys can't be greater than number of args$"),
                      (("1", "a", "LIMIT", "-1"), "^LIMIT can't be negative$"),
                      (("1", "a", "LIMIT", "x"), "^LIMIT can't be negative$"),
                      (("1", "a", "x"), "^syntax error$"),
                      (("1", "a", "LIMIT"), "^syntax error$")]:
        with pytest.raises(redis.ResponseError, match=msg):
            rr.execute_command("SINTERCARD", *args)


def test_sscan(rr):
    assert rr.execute_command("SSCAN", "nokey", "0") == [b"0", []]
    rr.execute_command("SADD", "s", "a1", "a2", "b1")
    cur, items = rr.execute_command("SSCAN", "s", "0")
    assert cur == b"0" and set(items) == S("a1", "a2", "b1")
    cur, items = rr.execute_command("SSCAN", "s", "0", "MATCH", "a*")
    assert set(items) == S("a1", "a2")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        rr.execute_command("SSCAN", "s", "0", "COUNT", "0")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        rr.execute_command("SSCAN", "s", "0", "FOO", "1")
    with pytest.raises(redis.ResponseError, match="^invalid cursor$"):
        rr.execute_command("SSCAN", "s", "x")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("SSCAN", "s", "0", "COUNT", "x")


def test_sscan_big_with_writes(rr):
    members = [f"m{i}" for i in range(1000)]
    rr.execute_command("SADD", "s", *members)
    seen = set()
    cur = b"0"
    rounds = 0
    while True:
        cur, items = rr.execute_command("SSCAN", "s", cur, "COUNT", "50")
        seen.update(items)
        rounds += 1
        # Churn: members added and removed during the iteration.
        rr.execute_command("SADD", "s", f"tmp{rounds}")
        rr.execute_command("SREM", "s", f"tmp{rounds - 1}")
        if cur == b"0":
            break
        assert rounds < 1000
    assert S(*members) <= seen
    assert rounds > 5


def test_resp3_shapes(server, r):
    r.sadd("s", "a", "b")
    c = RawConn(server.port)
    try:
        c.cmd("HELLO", "3")
        for args, prefix in [(("SMEMBERS", "s"), b"~2"), (("SMEMBERS", "nokey"), b"~0"),
                             (("SINTER", "s"), b"~2"), (("SUNION", "s"), b"~2"),
                             (("SDIFF", "s"), b"~2"), (("SPOP", "nokey", "1"), b"~0"),
                             (("SRANDMEMBER", "s", "1"), b"*1"),
                             (("SRANDMEMBER", "s", "-3"), b"*3"),
                             (("SMISMEMBER", "s", "a"), b"*1"),
                             (("SPOP", "nokey"), b"_"), (("SSCAN", "s", "0"), b"*2")]:
            c.send_cmd(*args)
            assert c.read_raw().startswith(prefix), args
    finally:
        c.close()


def test_arity(rr):
    for args in [("SADD", "s"), ("SREM", "s"), ("SMEMBERS",), ("SISMEMBER", "s"),
                 ("SMISMEMBER", "s"), ("SCARD",), ("SPOP",), ("SMOVE", "a", "b"),
                 ("SINTER",), ("SINTERCARD", "1"), ("SINTERSTORE", "d"), ("SSCAN", "s")]:
        with pytest.raises(redis.ResponseError, match="^wrong number of arguments"):
            rr.execute_command(*args)


# --------------------------------------------------------------------------- differential

UNORDERED = {"SMEMBERS", "SINTER", "SUNION", "SDIFF", "SRANDMEMBER"}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _norm(cmd, reply):
    if isinstance(reply, redis.ResponseError):
        return ("err", str(reply))
    if cmd in UNORDERED and isinstance(reply, list):
        return ("set", frozenset(reply))
    return reply


@pytest.mark.skipif(IS_REDIS or shutil.which("redis-server") is None,
                    reason="needs redis-server to compare against Ember")
def test_differential_against_redis(server, r):
    port = _free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ref = redis.Redis(port=port)
        for _ in range(100):
            try:
                ref.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        ref.flushall()
        rng = random.Random(1234)
        keys = ["s1", "s2", "s3", "str"]
        r.set("str", "v")
        ref.set("str", "v")

        def member():
            return rng.choice([str(rng.randint(0, 30)), f"m{rng.randint(0, 30)}",
                               "x" * rng.choice([1, 70])])

        def k():
            return rng.choice(keys)

        for step in range(600):
            op = rng.choice(["SADD", "SADD", "SADD", "SREM", "SMEMBERS", "SISMEMBER",
                             "SMISMEMBER", "SCARD", "SMOVE", "SINTER", "SINTERCARD",
                             "SINTERSTORE", "SUNION", "SUNIONSTORE", "SDIFF", "SDIFFSTORE",
                             "SPOPALL", "SRANDALL"])
            if op == "SADD":
                args = ["SADD", k(), *[member() for _ in range(rng.randint(1, 40))]]
            elif op == "SREM":
                args = ["SREM", k(), *[member() for _ in range(rng.randint(1, 5))]]
            elif op in ("SMEMBERS", "SCARD"):
                args = [op, k()]
            elif op == "SISMEMBER":
                args = [op, k(), member()]
            elif op == "SMISMEMBER":
                args = [op, k(), member(), member()]
            elif op == "SMOVE":
                args = [op, k(), k(), member()]
            elif op in ("SINTER", "SUNION", "SDIFF"):
                args = [op, *[k() for _ in range(rng.randint(1, 3))]]
            elif op == "SINTERCARD":
                n = rng.randint(1, 3)
                args = [op, str(n), *[k() for _ in range(n)]]
                if rng.random() < 0.5:
                    args += ["LIMIT", str(rng.randint(0, 5))]
            elif op == "SRANDALL":
                args = ["SRANDMEMBER", k(), "1000"]
            elif op == "SPOPALL":
                args = ["SPOP", k(), "1000"]
            else:
                args = [op, k(), *[k() for _ in range(rng.randint(1, 3))]]
            if op == "SPOPALL" and r.type(args[1]) != b"set":
                continue
            got = []
            for c in (r, ref):
                try:
                    got.append(_norm(args[0] if op != "SPOPALL" else "SMEMBERS",
                                     c.execute_command(*args)))
                except redis.ResponseError as e:
                    got.append(_norm(args[0], e))
            assert got[0] == got[1], (step, args, got)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
