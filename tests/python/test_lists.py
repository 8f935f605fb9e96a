"""List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LINSERT LREM
LTRIM LPOS LMOVE RPOPLPUSH LMPOP, checked against Redis 7.x replies and error texts, plus a
seeded differential run against a real redis-server."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import redis

from helpers import IS_REDIS, REDIS_VERSION, make_client, free_port

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INT = "value is not an integer or out of range"


def err(rr, *args):
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command(*args)
    return str(e.value)


# --------------------------------------------------------------------------- push / pop

def test_push_and_range(rr):
    assert rr.execute_command("RPUSH", "l", "a", "b", "c") == 3
    assert rr.execute_command("LPUSH", "l", "x", "y") == 5
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"y", b"x", b"a", b"b", b"c"]
    assert rr.execute_command("LLEN", "l") == 5
    assert rr.execute_command("LLEN", "nokey") == 0
    assert rr.execute_command("TYPE", "l") == b"list"


def test_pushx(rr):
    assert rr.execute_command("LPUSHX", "l", "a") == 0
    assert rr.execute_command("RPUSHX", "l", "a", "b") == 0
    assert rr.execute_command("EXISTS", "l") == 0
    rr.execute_command("RPUSH", "l", "m")
    assert rr.execute_command("LPUSHX", "l", "a", "b") == 3
    assert rr.execute_command("RPUSHX", "l", "z") == 4
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"b", b"a", b"m", b"z"]


def test_pop(rr):
    rr.execute_command("RPUSH", "l", "a", "b", "c", "d")
    assert rr.execute_command("LPOP", "l") == b"a"
    assert rr.execute_command("RPOP", "l") == b"d"
    assert rr.execute_command("LPOP", "l", "0") == []
    assert rr.execute_command("RPOP", "l", "5") == [b"c", b"b"]
    assert rr.execute_command("EXISTS", "l") == 0
    assert rr.execute_command("LPOP", "l") is None
    assert rr.execute_command("LPOP", "l", "2") is None
    assert rr.execute_command("RPOP", "l", "0") is None


def test_pop_errors(rr):
    rr.execute_command("RPUSH", "l", "a")
    assert err(rr, "LPOP", "l", "-1") == "value is out of range, must be positive"
    assert err(rr, "RPOP", "l", "x") == "value is out of range, must be positive"
    assert err(rr, "LPOP", "l", "1", "2") == "wrong number of arguments for 'lpop' command"


def test_pop_wire_shapes(raw):
    c = raw()
    c.send_cmd("RPUSH", "l", "a")
    assert c.read_raw() == b":1\r\n"
    for args, wire in [
        (("LPOP", "nokey"), b"$-1\r\n"),
        (("LPOP", "nokey", "1"), b"*-1\r\n"),
        (("LMPOP", "1", "nokey", "LEFT"), b"*-1\r\n"),
        (("LPOS", "l", "zz"), b"$-1\r\n"),
        (("LINDEX", "l", "5"), b"$-1\r\n"),
        (("LMOVE", "nokey", "x", "LEFT", "RIGHT"), b"$-1\r\n"),
    ]:
        c.send_cmd(*args)
        assert c.read_raw() == wire, args
    c.send_cmd("HELLO", "3")
    c.read_reply()
    for args, wire in [
        (("LPOP", "nokey"), b"_\r\n"),
        (("LPOP", "nokey", "1"), b"_\r\n"),
        (("LMPOP", "1", "nokey", "LEFT"), b"_\r\n"),
        (("LPOS", "l", "zz"), b"_\r\n"),
        (("LINDEX", "l", "5"), b"_\r\n"),
        (("RPOPLPUSH", "nokey", "x"), b"_\r\n"),
        (("LRANGE", "nokey", "0", "-1"), b"*0\r\n"),
        (("LPOP", "l", "1"), b"*1\r\n$1\r\na\r\n"),
    ]:
        c.send_cmd(*args)
        assert c.read_raw() == wire, args


# --------------------------------------------------------------------------- reads

@pytest.mark.parametrize("start,end,expected", [
    (0, -1, "abcde"), (1, 2, "bc"), (-2, -1, "de"), (-100, 1, "ab"), (3, 100, "de"),
    (4, 2, ""), (5, 10, ""), (-1, -2, ""), (0, 0, "a"),
    (0, 1000000000000, "abcde"), (-9223372036854775808, 9223372036854775807, "abcde"),
])
def test_lrange(rr, start, end, expected):
    rr.execute_command("RPUSH", "l", *"abcde")
    got = rr.execute_command("LRANGE", "l", str(start), str(end))
    assert got == [c.encode() for c in expected]


def test_lrange_errors(rr):
    rr.execute_command("RPUSH", "l", "a")
    assert err(rr, "LRANGE", "l", "a", "1") == NOT_INT
    assert err(rr, "LRANGE", "l", "0", "1.5") == NOT_INT
    assert rr.execute_command("LRANGE", "nokey", "0", "-1") == []


def test_lindex(rr):
    rr.execute_command("RPUSH", "l", "a", "b", "c")
    assert rr.execute_command("LINDEX", "l", "0") == b"a"
    assert rr.execute_command("LINDEX", "l", "-1") == b"c"
    assert rr.execute_command("LINDEX", "l", "3") is None
    assert rr.execute_command("LINDEX", "l", "-4") is None
    assert rr.execute_command("LINDEX", "nokey", "0") is None
    assert err(rr, "LINDEX", "l", "x") == NOT_INT


def test_lpos(rr):
    rr.execute_command("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert rr.execute_command("LPOS", "l", "c") == 2
    assert rr.execute_command("LPOS", "l", "c", "RANK", "2") == 6
    assert rr.execute_command("LPOS", "l", "c", "RANK", "-1") == 7
    assert rr.execute_command("LPOS", "l", "c", "COUNT", "0") == [2, 6, 7]
    assert rr.execute_command("LPOS", "l", "c", "COUNT", "2") == [2, 6]
    assert rr.execute_command("LPOS", "l", "c", "RANK", "-1", "COUNT", "2") == [7, 6]
    assert rr.execute_command("LPOS", "l", "c", "COUNT", "0", "MAXLEN", "7") == [2, 6]
    assert rr.execute_command("LPOS", "l", "c", "RANK", "4") is None
    assert rr.execute_command("LPOS", "l", "zz", "COUNT", "3") == []
    assert rr.execute_command("LPOS", "nokey", "c") is None
    assert rr.execute_command("LPOS", "nokey", "c", "COUNT", "1") == []


def test_lpos_errors(rr):
    rr.execute_command("RPUSH", "l", "a")
    assert err(rr, "LPOS", "l", "a", "RANK", "0") == (
        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
        "or use negative to start from the end of the list")
    assert err(rr, "LPOS", "l", "a", "COUNT", "-1") == "COUNT can't be negative"
    assert err(rr, "LPOS", "l", "a", "MAXLEN", "-1") == "MAXLEN can't be negative"
    assert err(rr, "LPOS", "l", "a", "RANK", "x") == NOT_INT
    assert err(rr, "LPOS", "l", "a", "FOO", "1") == "syntax error"
    assert err(rr, "LPOS", "l", "a", "RANK") == "syntax error"


# --------------------------------------------------------------------------- edits

def test_lset(rr):
    assert err(rr, "LSET", "nokey", "0", "x") == "no such key"
    rr.execute_command("RPUSH", "l", "a", "b")
    assert rr.execute_command("LSET", "l", "-1", "z") == b"OK"
    assert rr.execute_command("LSET", "l", "0", "y" * 100) == b"OK"
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"y" * 100, b"z"]
    assert err(rr, "LSET", "l", "2", "x") == "index out of range"
    assert err(rr, "LSET", "l", "-3", "x") == "index out of range"
    assert err(rr, "LSET", "l", "x", "x") == NOT_INT


def test_linsert(rr):
    assert rr.execute_command("LINSERT", "nokey", "BEFORE", "a", "b") == 0
    rr.execute_command("RPUSH", "l", "a", "c")
    assert rr.execute_command("LINSERT", "l", "BEFORE", "c", "b") == 3
    assert rr.execute_command("LINSERT", "l", "after", "c", "d") == 4
    assert rr.execute_command("LINSERT", "l", "AFTER", "zz", "d") == -1
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"a", b"b", b"c", b"d"]
    assert err(rr, "LINSERT", "l", "MIDDLE", "a", "b") == "syntax error"


def test_lrem(rr):
    rr.execute_command("RPUSH", "l", *"abacaba")
    assert rr.execute_command("LREM", "l", "2", "a") == 2
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"b", b"c", b"a", b"b", b"a"]
    assert rr.execute_command("LREM", "l", "-1", "b") == 1
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"b", b"c", b"a", b"a"]
    assert rr.execute_command("LREM", "l", "0", "a") == 2
    assert rr.execute_command("LREM", "l", "0", "zz") == 0
    assert rr.execute_command("LREM", "nokey", "0", "a") == 0
    assert err(rr, "LREM", "l", "x", "a") == NOT_INT
    assert rr.execute_command("LREM", "l", "0", "b") == 1
    assert rr.execute_command("LREM", "l", "0", "c") == 1
    assert rr.execute_command("EXISTS", "l") == 0


def test_ltrim(rr):
    rr.execute_command("RPUSH", "l", *"abcdef")
    assert rr.execute_command("LTRIM", "l", "1", "-2") == b"OK"
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"b", b"c", b"d", b"e"]
    assert rr.execute_command("LTRIM", "l", "-2", "100") == b"OK"
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [b"d", b"e"]
    assert rr.execute_command("LTRIM", "l", "5", "1") == b"OK"
    assert rr.execute_command("EXISTS", "l") == 0
    assert rr.execute_command("LTRIM", "nokey", "0", "1") == b"OK"
    assert err(rr, "LTRIM", "l", "a", "1") == NOT_INT


# --------------------------------------------------------------------------- moves

def test_lmove_and_rpoplpush(rr):
    rr.execute_command("RPUSH", "s", "a", "b", "c")
    assert rr.execute_command("LMOVE", "s", "d", "LEFT", "RIGHT") == b"a"
    assert rr.execute_command("LMOVE", "s", "d", "right", "left") == b"c"
    assert rr.execute_command("LRANGE", "d", "0", "-1") == [b"c", b"a"]
    assert rr.execute_command("RPOPLPUSH", "s", "d") == b"b"
    assert rr.execute_command("EXISTS", "s") == 0
    assert rr.execute_command("LRANGE", "d", "0", "-1") == [b"b", b"c", b"a"]
    assert rr.execute_command("RPOPLPUSH", "s", "d") is None
    # Rotation of a single list.
    assert rr.execute_command("RPOPLPUSH", "d", "d") == b"a"
    assert rr.execute_command("LRANGE", "d", "0", "-1") == [b"a", b"b", b"c"]
    assert rr.execute_command("LMOVE", "d", "d", "LEFT", "RIGHT") == b"a"
    assert rr.execute_command("LRANGE", "d", "0", "-1") == [b"b", b"c", b"a"]
    rr.execute_command("RPUSH", "one", "x")
    assert rr.execute_command("LMOVE", "one", "one", "LEFT", "LEFT") == b"x"
    assert rr.execute_command("LRANGE", "one", "0", "-1") == [b"x"]
    assert err(rr, "LMOVE", "d", "e", "UP", "LEFT") == "syntax error"


def test_lmove_wrongtype(rr):
    rr.execute_command("SET", "str", "v")
    rr.execute_command("RPUSH", "s", "a")
    assert err(rr, "LMOVE", "s", "str", "LEFT", "LEFT") == WRONGTYPE
    assert rr.execute_command("LRANGE", "s", "0", "-1") == [b"a"]
    assert err(rr, "RPOPLPUSH", "str", "s") == WRONGTYPE
    # A missing source answers nil before the destination's type is checked.
    assert rr.execute_command("RPOPLPUSH", "nokey", "str") is None


def test_lmpop(rr):
    rr.execute_command("RPUSH", "b", "1", "2", "3")
    assert rr.execute_command("LMPOP", "2", "a", "b", "LEFT") == [b"b", [b"1"]]
    assert rr.execute_command("LMPOP", "2", "a", "b", "RIGHT", "COUNT", "10") == [b"b", [b"3", b"2"]]
    assert rr.execute_command("EXISTS", "b") == 0
    assert rr.execute_command("LMPOP", "2", "a", "b", "LEFT") is None


def test_lmpop_errors(rr):
    assert err(rr, "LMPOP", "0", "a", "LEFT") == "numkeys should be greater than 0"
    assert err(rr, "LMPOP", "-1", "a", "LEFT") == "numkeys should be greater than 0"
    assert err(rr, "LMPOP", "x", "a", "LEFT") == "numkeys should be greater than 0"
    assert err(rr, "LMPOP", "1", "a", "LEFT", "COUNT", "x") == "count should be greater than 0"
    assert err(rr, "LMPOP", "2", "a", "LEFT") == "syntax error"
    assert err(rr, "LMPOP", "9223372036854775807", "a", "LEFT") == "syntax error"
    assert err(rr, "LMPOP", "1", "a", "MIDDLE") == "syntax error"
    assert err(rr, "LMPOP", "1", "a", "LEFT", "COUNT", "0") == "count should be greater than 0"
    assert err(rr, "LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1") == "syntax error"
    assert err(rr, "LMPOP", "1", "a", "LEFT", "COUNT") == "syntax error"
    rr.execute_command("SET", "s", "v")
    assert err(rr, "LMPOP", "1", "s", "LEFT") == WRONGTYPE


def test_lmpop_resp3(r3):
    r3.rpush("l", "a", "b")
    assert r3.execute_command("LMPOP", "1", "l", "LEFT", "COUNT", "1") == [b"l", [b"a"]]


# --------------------------------------------------------------------------- types, encodings

@pytest.mark.parametrize("cmd", [
    ("LPUSH", "s", "a"), ("RPUSH", "s", "a"), ("LPUSHX", "s", "a"), ("RPUSHX", "s", "a"),
    ("LPOP", "s"), ("RPOP", "s", "2"), ("LLEN", "s"), ("LRANGE", "s", "0", "-1"),
    ("LINDEX", "s", "0"), ("LSET", "s", "0", "a"), ("LINSERT", "s", "BEFORE", "a", "b"),
    ("LREM", "s", "0", "a"), ("LTRIM", "s", "0", "1"), ("LPOS", "s", "a"),
    ("LMOVE", "s", "d", "LEFT", "LEFT"), ("RPOPLPUSH", "s", "d"), ("LMPOP", "1", "s", "LEFT"),
])
def test_wrongtype(rr, cmd):
    rr.execute_command("SET", "s", "v")
    assert err(rr, *cmd) == WRONGTYPE
    assert rr.execute_command("GET", "s") == b"v"


def test_non_list_commands_reject_lists(rr):
    rr.execute_command("RPUSH", "l", "a")
    assert err(rr, "GET", "l") == WRONGTYPE


@pytest.mark.skipif(IS_REDIS and (REDIS_VERSION or (0,)) < (7, 2),
                    reason="lists report listpack from Redis 7.2")
def test_object_encoding(rr):
    rr.execute_command("RPUSH", "l", *[str(i) for i in range(128)])
    assert rr.execute_command("OBJECT", "ENCODING", "l") == b"listpack"
    rr.execute_command("RPUSH", "l", "x")
    assert rr.execute_command("OBJECT", "ENCODING", "l") == b"quicklist"
    rr.execute_command("RPUSH", "big", "x" * 9000)
    assert rr.execute_command("OBJECT", "ENCODING", "big") == b"quicklist"


def test_large_list(rr):
    n = 5000
    for i in range(0, n, 500):
        rr.execute_command("RPUSH", "l", *[str(j) for j in range(i, i + 500)])
    assert rr.execute_command("LLEN", "l") == n
    assert rr.execute_command("LINDEX", "l", "2500") == b"2500"
    assert rr.execute_command("LRANGE", "l", "-2", "-1") == [b"4998", b"4999"]
    assert rr.execute_command("LPOS", "l", "4000") == 4000
    assert rr.execute_command("LTRIM", "l", "100", "199") == b"OK"
    assert rr.execute_command("LLEN", "l") == 100


def test_binary_elements(rr):
    v = bytes(range(256))
    rr.execute_command("RPUSH", "l", v, b"", b"\x00")
    assert rr.execute_command("LRANGE", "l", "0", "-1") == [v, b"", b"\x00"]
    assert rr.execute_command("LPOS", "l", b"") == 1


# --------------------------------------------------------------------------- differential

def _start_redis():
    """A fresh redis-server: (process, port, its working directory), or Nones."""
    exe = shutil.which("redis-server")
    if exe is None:
        return None, None, None
    port = free_port()
    wd = tempfile.mkdtemp(prefix="ember-lists-diff-")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", wd],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port, wd
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=10)
    shutil.rmtree(wd, ignore_errors=True)
    return None, None, None


def _random_cmd(rnd):
    keys = ["k1", "k2", "k3", "str"]
    vals = ["a", "b", "c", "1", "22", ""]
    k = rnd.choice(keys)
    k2 = rnd.choice(keys)
    v = rnd.choice(vals)
    idx = str(rnd.randint(-6, 6))
    side = rnd.choice(["LEFT", "RIGHT", "left", "UP"])
    choices = [
        ("LPUSH", k, *rnd.choices(vals, k=rnd.randint(1, 4))),
        ("RPUSH", k, *rnd.choices(vals, k=rnd.randint(1, 4))),
        ("LPUSHX", k, v), ("RPUSHX", k, v),
        ("LPOP", k), ("RPOP", k), ("LPOP", k, str(rnd.randint(0, 3))),
        ("RPOP", k, str(rnd.randint(-1, 3))),
        ("LLEN", k), ("LRANGE", k, idx, str(rnd.randint(-6, 6))), ("LINDEX", k, idx),
        ("LSET", k, idx, v), ("LINSERT", k, rnd.choice(["BEFORE", "AFTER"]), v, "ins"),
        ("LREM", k, str(rnd.randint(-2, 2)), v), ("LTRIM", k, idx, str(rnd.randint(-6, 6))),
        ("LPOS", k, v), ("LPOS", k, v, "RANK", str(rnd.choice([-2, -1, 1, 2])),
                         "COUNT", str(rnd.randint(0, 2)), "MAXLEN", str(rnd.randint(0, 5))),
        ("LMOVE", k, k2, side, rnd.choice(["LEFT", "RIGHT"])), ("RPOPLPUSH", k, k2),
        ("LMPOP", "2", k, k2, side, "COUNT", str(rnd.randint(0, 3))),
        ("LMPOP", "1", k, rnd.choice(["LEFT", "RIGHT"])),
        ("LRANGE", k, "0", "-1"),
    ]
    return rnd.choice(choices)


def _differential(server, next_cmd, steps, keys, setup=(), check_every=0):
    """Sends `next_cmd(step)` to a fresh redis-server and to Ember for `steps` steps and
    asserts equal replies (and errors); the lists `keys` are compared every `check_every`
    steps (0: never) and at the end."""
    proc, port, wd = _start_redis()
    if proc is None:
        pytest.skip("redis-server not available")
    try:
        ref = make_client(port, raw=True)
        ours = server.client(raw=True)
        ref.execute_command("FLUSHALL")
        for c in (ref, ours):
            for cmd in setup:
                c.execute_command(*cmd)

        def same_lists(step):
            for k in keys:
                assert ref.execute_command("LRANGE", k, "0", "-1") == \
                    ours.execute_command("LRANGE", k, "0", "-1"), (step, k)

        for step in range(steps):
            cmd = next_cmd(step)
            replies = []
            for c in (ref, ours):
                try:
                    replies.append(c.execute_command(*cmd))
                except redis.ResponseError as e:
                    replies.append(("error", str(e)))
            assert replies[0] == replies[1], (step, cmd)
            if check_every and step % check_every == 0:
                same_lists(step)
        same_lists(steps)
        ref.close()
        ours.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(wd, ignore_errors=True)


@pytest.mark.skipif(IS_REDIS, reason="differential test compares Ember with redis-server")
def test_differential_against_redis(server, r):
    rnd = random.Random(20240601)
    _differential(server, lambda _step: _random_cmd(rnd), 600, ("k1", "k2", "k3"),
                  setup=[("SET", "str", "v")])


def _random_long_cmd(rnd, grow):
    """Commands on lists of hundreds to thousands of elements (Ember keeps those in
    blocks of 128 slots, and goes back to one ring buffer under 64)."""
    keys = ["k1", "k2"]
    k, k2 = rnd.choice(keys), rnd.choice(keys)
    vals = ["a", "b", "c", "x" * 40]
    many = lambda: [rnd.choice(vals) + str(rnd.randint(0, 9)) for _ in range(rnd.randint(1, 90))]
    idx = lambda: str(rnd.randint(-700, 700))
    v = rnd.choice(vals) + str(rnd.randint(0, 9))
    choices = [
        ("RPUSH", k, *many()), ("LPUSH", k, *many()),
        ("LINDEX", k, idx()), ("LRANGE", k, idx(), idx()), ("LSET", k, idx(), v),
        ("LINSERT", k, rnd.choice(["BEFORE", "AFTER"]), v, "ins"), ("LPOS", k, v),
        ("LPOS", k, v, "RANK", str(rnd.choice([-3, -1, 1, 2])), "COUNT", "0"),
        ("LMOVE", k, k2, rnd.choice(["LEFT", "RIGHT"]), rnd.choice(["LEFT", "RIGHT"])),
        ("LLEN", k),
    ]
    if not grow:
        choices += [
            ("LPOP", k, str(rnd.randint(1, 120))), ("RPOP", k, str(rnd.randint(1, 120))),
            ("LREM", k, str(rnd.randint(-20, 20)), v), ("LTRIM", k, idx(), idx()),
            ("LMPOP", "2", k, k2, rnd.choice(["LEFT", "RIGHT"]), "COUNT", "100"),
        ]
    return rnd.choice(choices)


@pytest.mark.skipif(IS_REDIS, reason="differential test compares Ember with redis-server")
def test_differential_long_lists_against_redis(server, r):
    rnd = random.Random(20261205)
    _differential(server, lambda step: _random_long_cmd(rnd, grow=(step // 500) % 2 == 0),
                  3000, ("k1", "k2"), check_every=250)
