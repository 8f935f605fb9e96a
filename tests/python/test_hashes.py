"""Hash commands: HSET HGET HMGET HMSET HGETALL HDEL HLEN HEXISTS HKEYS HVALS HSETNX
HINCRBY HINCRBYFLOAT HSTRLEN HRANDFIELD HSCAN, with reply shapes (RESP2 and RESP3), error
texts, encodings, and a seeded differential run against a real redis-server."""

import random
import shutil
import subprocess
import time

import pytest
import redis

from helpers import IS_REDIS, make_client, free_port

WRONGTYPE = r"^WRONGTYPE Operation against a key holding the wrong kind of value$"
NOT_INT = r"^value is not an integer or out of range$"
NOT_FLOAT = r"^value is not a valid float$"


def arity(cmd):
    return rf"^wrong number of arguments for '{cmd}' command$"


def test_hset_hget_basic(rr):
    assert rr.execute_command("HSET", "h", "a", "1", "b", "2") == 2
    assert rr.execute_command("HSET", "h", "a", "10", "c", "3") == 1
    assert rr.execute_command("HGET", "h", "a") == b"10"
    assert rr.execute_command("HGET", "h", "zz") is None
    assert rr.execute_command("HGET", "nokey", "a") is None
    assert rr.execute_command("HLEN", "h") == 3
    assert rr.execute_command("HLEN", "nokey") == 0
    assert rr.execute_command("TYPE", "h") == b"hash"
    # duplicate fields in one call count once
    assert rr.execute_command("HSET", "h2", "x", "1", "x", "2") == 1
    assert rr.execute_command("HGET", "h2", "x") == b"2"


def test_hset_arity(rr):
    with pytest.raises(redis.ResponseError, match=arity("hset")):
        rr.execute_command("HSET", "h", "a", "1", "b")
    with pytest.raises(redis.ResponseError, match=arity("hset")):
        rr.execute_command("HSET", "h", "a")
    with pytest.raises(redis.ResponseError, match=arity("hmset")):
        rr.execute_command("HMSET", "h", "a", "1", "b")
    assert rr.execute_command("EXISTS", "h") == 0


def test_hmset_hmget(rr):
    assert rr.execute_command("HMSET", "h", "a", "1", "b", "2") == b"OK"
    assert rr.execute_command("HMGET", "h", "a", "x", "b") == [b"1", None, b"2"]
    assert rr.execute_command("HMGET", "nokey", "a", "b") == [None, None]


def test_hgetall_keys_vals_order_and_shapes(rr, rr3):
    rr.execute_command("HSET", "h", "z", "1", "a", "2", "m", "3")
    assert rr.execute_command("HGETALL", "h") == [b"z", b"1", b"a", b"2", b"m", b"3"]
    assert rr.execute_command("HKEYS", "h") == [b"z", b"a", b"m"]
    assert rr.execute_command("HVALS", "h") == [b"1", b"2", b"3"]
    assert rr3.execute_command("HGETALL", "h") == {b"z": b"1", b"a": b"2", b"m": b"3"}
    assert rr.execute_command("HGETALL", "nokey") == []
    assert rr3.execute_command("HGETALL", "nokey") == {}
    assert rr.execute_command("HKEYS", "nokey") == []
    assert rr.execute_command("HVALS", "nokey") == []


def test_hgetall_resp3_raw(raw):
    c = raw()
    c.cmd("HELLO", "3")
    c.cmd("HSET", "h", "f", "v")
    c.send_cmd("HGETALL", "h")
    assert c.read_raw() == b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    c.send_cmd("HGETALL", "nokey")
    assert c.read_raw() == b"%0\r\n"
    c.send_cmd("HGET", "h", "nofield")
    assert c.read_raw() == b"_\r\n"


def test_hdel_deletes_empty_key(rr):
    rr.execute_command("HSET", "h", "a", "1", "b", "2", "c", "3")
    assert rr.execute_command("HDEL", "h", "a", "zz", "a") == 1
    assert rr.execute_command("HKEYS", "h") == [b"b", b"c"]
    assert rr.execute_command("HDEL", "h", "b", "c", "d") == 2
    assert rr.execute_command("EXISTS", "h") == 0
    assert rr.execute_command("HDEL", "nokey", "a") == 0


def test_hexists_hstrlen_hsetnx(rr):
    rr.execute_command("HSET", "h", "a", "hello")
    assert rr.execute_command("HEXISTS", "h", "a") == 1
    assert rr.execute_command("HEXISTS", "h", "b") == 0
    assert rr.execute_command("HEXISTS", "nokey", "b") == 0
    assert rr.execute_command("HSTRLEN", "h", "a") == 5
    assert rr.execute_command("HSTRLEN", "h", "b") == 0
    assert rr.execute_command("HSTRLEN", "nokey", "b") == 0
    assert rr.execute_command("HSETNX", "h", "a", "x") == 0
    assert rr.execute_command("HGET", "h", "a") == b"hello"
    assert rr.execute_command("HSETNX", "h", "b", "x") == 1
    assert rr.execute_command("HSETNX", "new", "b", "x") == 1
    assert rr.execute_command("HGET", "new", "b") == b"x"


def test_hincrby(rr):
    assert rr.execute_command("HINCRBY", "h", "n", 5) == 5
    assert rr.execute_command("HINCRBY", "h", "n", -7) == -2
    assert rr.execute_command("HGET", "h", "n") == b"-2"
    rr.execute_command("HSET", "h", "s", "abc", "sp", " 1", "big", "9223372036854775807")
    with pytest.raises(redis.ResponseError, match=r"^hash value is not an integer$"):
        rr.execute_command("HINCRBY", "h", "s", 1)
    with pytest.raises(redis.ResponseError, match=r"^hash value is not an integer$"):
        rr.execute_command("HINCRBY", "h", "sp", 1)
    with pytest.raises(redis.ResponseError, match=r"^increment or decrement would overflow$"):
        rr.execute_command("HINCRBY", "h", "big", 1)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("HINCRBY", "h", "n", "1.5")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("HINCRBY", "nokey", "n", "x")
    assert rr.execute_command("EXISTS", "nokey") == 0


def test_hincrbyfloat(rr):
    assert rr.execute_command("HINCRBYFLOAT", "h", "f", "10.5") == b"10.5"
    assert rr.execute_command("HINCRBYFLOAT", "h", "f", "0.1") == b"10.6"
    assert rr.execute_command("HINCRBYFLOAT", "h", "f", "-5") == b"5.6"
    assert rr.execute_command("HINCRBYFLOAT", "h", "g", "5.0e3") == b"5000"
    rr.execute_command("HSET", "h", "i", "3", "s", "abc")
    assert rr.execute_command("HINCRBYFLOAT", "h", "i", "1.5") == b"4.5"
    with pytest.raises(redis.ResponseError, match=r"^hash value is not a float$"):
        rr.execute_command("HINCRBYFLOAT", "h", "s", 1)
    with pytest.raises(redis.ResponseError, match=NOT_FLOAT):
        rr.execute_command("HINCRBYFLOAT", "h", "f", "abc")
    with pytest.raises(redis.ResponseError, match=r"^value is NaN or Infinity$"):
        rr.execute_command("HINCRBYFLOAT", "h", "f", "inf")
    assert rr.execute_command("HGET", "h", "f") == b"5.6"


def test_hrandfield(rr, rr3):
    assert rr.execute_command("HRANDFIELD", "nokey") is None
    assert rr.execute_command("HRANDFIELD", "nokey", 5) == []
    assert rr.execute_command("HRANDFIELD", "nokey", -5, "WITHVALUES") == []
    rr.execute_command("HSET", "h", "a", "1", "b", "2", "c", "3")
    assert rr.execute_command("HRANDFIELD", "h") in (b"a", b"b", b"c")
    assert rr.execute_command("HRANDFIELD", "h", 0) == []
    assert rr.execute_command("HRANDFIELD", "h", 5) == [b"a", b"b", b"c"]
    assert rr.execute_command("HRANDFIELD", "h", 3, "WITHVALUES") == [
        b"a", b"1", b"b", b"2", b"c", b"3"]
    two = rr.execute_command("HRANDFIELD", "h", 2)
    assert len(two) == 2 and len(set(two)) == 2 and set(two) <= {b"a", b"b", b"c"}
    many = rr.execute_command("HRANDFIELD", "h", -20)
    assert len(many) == 20 and set(many) <= {b"a", b"b", b"c"}
    flat = rr.execute_command("HRANDFIELD", "h", -4, "WITHVALUES")
    assert len(flat) == 8
    for i in range(0, 8, 2):
        assert {b"a": b"1", b"b": b"2", b"c": b"3"}[flat[i]] == flat[i + 1]
    pairs = rr3.execute_command("HRANDFIELD", "h", -4, "WITHVALUES")
    assert len(pairs) == 4 and all(isinstance(p, list) and len(p) == 2 for p in pairs)
    pairs = rr3.execute_command("HRANDFIELD", "h", 2, "withvalues")
    assert len(pairs) == 2 and all(len(p) == 2 for p in pairs)
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("HRANDFIELD", "h", 2, "WITHSCORES")
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("HRANDFIELD", "h", 2, "WITHVALUES", "x")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("HRANDFIELD", "h", "x")
    with pytest.raises(redis.ResponseError, match=r"^value is out of range"):
        rr.execute_command("HRANDFIELD", "h", "-9223372036854775808")
    with pytest.raises(redis.ResponseError, match=r"^value is out of range$"):
        rr.execute_command("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES")


def test_hrandfield_big_hash(rr):
    for i in range(300):
        rr.execute_command("HSET", "big", f"f{i}", i)
    got = rr.execute_command("HRANDFIELD", "big", 100)
    assert len(got) == 100 and len(set(got)) == 100
    got = rr.execute_command("HRANDFIELD", "big", 250, "WITHVALUES")
    assert len(got) == 500
    for i in range(0, 500, 2):
        assert got[i] == b"f" + got[i + 1]
    assert len(rr.execute_command("HRANDFIELD", "big", 1000)) == 300


def test_hscan_small_returns_all(rr):
    rr.execute_command("HSET", "h", "a", "1", "b", "2", "ab", "3")
    assert rr.execute_command("HSCAN", "h", 0) == [b"0", [b"a", b"1", b"b", b"2", b"ab", b"3"]]
    assert rr.execute_command("HSCAN", "h", 0, "COUNT", 1) == [
        b"0", [b"a", b"1", b"b", b"2", b"ab", b"3"]]
    assert rr.execute_command("HSCAN", "h", 0, "MATCH", "a*") == [b"0", [b"a", b"1", b"ab", b"3"]]
    assert rr.execute_command("HSCAN", "nokey", 0) == [b"0", []]
    with pytest.raises(redis.ResponseError, match=r"^invalid cursor$"):
        rr.execute_command("HSCAN", "h", "abc")
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("HSCAN", "h", 0, "COUNT", 0)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("HSCAN", "h", 0, "COUNT", "x")
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("HSCAN", "h", 0, "BOGUS")
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("HSCAN", "h", 0, "MATCH")


def test_hscan_big_iterates_everything(rr, rr3):
    for i in range(1000):
        rr.execute_command("HSET", "big", f"f{i}", f"v{i}")
    seen = {}
    cursor = b"0"
    calls = 0
    while True:
        cursor, items = rr.execute_command("HSCAN", "big", cursor, "COUNT", 20)
        calls += 1
        for i in range(0, len(items), 2):
            seen[items[i]] = items[i + 1]
        if cursor == b"0":
            break
    assert calls > 5
    assert len(seen) == 1000
    assert all(seen[f"f{i}".encode()] == f"v{i}".encode() for i in range(1000))
    # RESP3 keeps the flat array shape
    c, items = rr3.execute_command("HSCAN", "big", 0, "MATCH", "f1*", "COUNT", 5000)
    assert c == b"0" and len(items) == 2 * 111


def test_encodings(rr):
    if IS_REDIS:
        # Debian's redis-server ships 512; Redis 7.2's default (Ember's limit) is 128.
        rr.execute_command("CONFIG", "SET", "hash-max-listpack-entries", "128")
    rr.execute_command("HSET", "h", "a", "1")
    assert rr.execute_command("OBJECT", "ENCODING", "h") == b"listpack"
    for i in range(128):
        rr.execute_command("HSET", "h", f"f{i}", "1")
    assert rr.execute_command("OBJECT", "ENCODING", "h") == b"hashtable"
    rr.execute_command("HSET", "h2", "a", "x" * 64)
    assert rr.execute_command("OBJECT", "ENCODING", "h2") == b"listpack"
    rr.execute_command("HSET", "h2", "b", "x" * 65)
    assert rr.execute_command("OBJECT", "ENCODING", "h2") == b"hashtable"
    assert rr.execute_command("HGET", "h2", "a") == b"x" * 64


def test_big_hash_ops(rr):
    for i in range(500):
        rr.execute_command("HSET", "big", f"f{i}", i)
    for i in range(0, 500, 2):
        assert rr.execute_command("HDEL", "big", f"f{i}") == 1
    assert rr.execute_command("HLEN", "big") == 250
    assert rr.execute_command("HGET", "big", "f1") == b"1"
    assert rr.execute_command("HGET", "big", "f2") is None
    assert sorted(rr.execute_command("HKEYS", "big")) == sorted(
        f"f{i}".encode() for i in range(1, 500, 2))
    assert rr.execute_command("HDEL", "big", *[f"f{i}" for i in range(500)]) == 250
    assert rr.execute_command("EXISTS", "big") == 0


def test_wrongtype(rr):
    rr.execute_command("SET", "s", "v")
    for cmd in (["HSET", "s", "a", "1"], ["HGET", "s", "a"], ["HMGET", "s", "a"],
                ["HMSET", "s", "a", "1"], ["HGETALL", "s"], ["HDEL", "s", "a"], ["HLEN", "s"],
                ["HEXISTS", "s", "a"], ["HKEYS", "s"], ["HVALS", "s"], ["HSETNX", "s", "a", "1"],
                ["HINCRBY", "s", "a", "1"], ["HINCRBYFLOAT", "s", "a", "1"],
                ["HSTRLEN", "s", "a"], ["HRANDFIELD", "s"], ["HRANDFIELD", "s", "2"],
                ["HSCAN", "s", "0"]):
        with pytest.raises(redis.ResponseError, match=WRONGTYPE):
            rr.execute_command(*cmd)
    rr.execute_command("HSET", "h", "a", "1")
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        rr.execute_command("GET", "h")
    assert rr.execute_command("GET", "s") == b"v"


def test_binary_fields(rr):
    f = bytes(range(256))
    assert rr.execute_command("HSET", "h", f, b"\x00\r\n") == 1
    assert rr.execute_command("HGET", "h", f) == b"\x00\r\n"
    assert rr.execute_command("HSET", "h", "", "") == 1
    assert rr.execute_command("HGET", "h", "") == b""


# --------------------------------------------------------------------------- differential

REDIS_SERVER = shutil.which("redis-server")


@pytest.fixture
def reference():
    if IS_REDIS or REDIS_SERVER is None:
        pytest.skip("needs redis-server as a reference while testing Ember")
    port = free_port()
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = make_client(port, raw=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                c.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield c
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _call(c, args):
    try:
        return c.execute_command(*args)
    except redis.ResponseError as e:
        return ("ERR", str(e))


def test_differential_against_redis(rr, reference):
    rng = random.Random(20240611)
    keys = ["h1", "h2", "h3", "s"]
    fields = [f"f{i}" for i in range(12)] + ["", "x y"]

    def val():
        return rng.choice(["1", "-3", "10.5", "abc", "", "007", str(rng.randint(-100, 100)),
                           "1e3", "9223372036854775807", " 5"])

    reference.execute_command("FLUSHALL")
    for c in (rr, reference):
        c.execute_command("SET", "s", "str")
    for step in range(600):
        k = rng.choice(keys)
        f = rng.choice(fields)
        op = rng.randrange(17)
        if op == 0:
            n = rng.randint(1, 3)
            args = ["HSET", k] + [x for _ in range(n) for x in (rng.choice(fields), val())]
        elif op == 1:
            args = ["HGET", k, f]
        elif op == 2:
            args = ["HMGET", k] + rng.sample(fields, 3)
        elif op == 3:
            args = ["HMSET", k, f, val()]
        elif op == 4:
            args = ["HGETALL", k]
        elif op == 5:
            args = ["HDEL", k] + rng.sample(fields, rng.randint(1, 4))
        elif op == 6:
            args = ["HLEN", k]
        elif op == 7:
            args = ["HEXISTS", k, f]
        elif op == 8:
            args = ["HKEYS", k]
        elif op == 9:
            args = ["HVALS", k]
        elif op == 10:
            args = ["HSETNX", k, f, val()]
        elif op == 11:
            args = ["HINCRBY", k, f, rng.choice(["1", "-5", "100", "x",
                                                  "9223372036854775807"])]
        elif op == 12:
            args = ["HINCRBYFLOAT", k, f, rng.choice(["0.1", "-1.5", "3", "1e2", "abc",
                                                       "2.5e-3", "inf"])]
        elif op == 13:
            args = ["HSTRLEN", k, f]
        elif op == 14:
            args = ["HRANDFIELD", k, rng.choice(["20", "0", "100"])] + (
                ["WITHVALUES"] if rng.random() < 0.5 else [])
        elif op == 15:
            args = ["HSCAN", k, "0"] + (["MATCH", "f1*"] if rng.random() < 0.5 else [])
        else:
            args = ["EXISTS", k]
        got, want = _call(rr, args), _call(reference, args)
        assert got == want, f"step {step}: {args!r}: ember {got!r} != redis {want!r}"
    for k in keys:
        assert _call(rr, ["HGETALL", k]) == _call(reference, ["HGETALL", k])
