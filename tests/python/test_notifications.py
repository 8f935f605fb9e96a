"""Keyspace notifications (notify-keyspace-events), differential against a private
redis-server: the same command script runs against both with the same event classes, and
the (channel, message) sequence a pattern subscriber receives must be identical."""

from __future__ import annotations

import time

import pytest

from helpers import IS_REDIS, RawConn, reference_redis

pytestmark = pytest.mark.skipif(IS_REDIS, reason="differential test: compares Ember with Redis")

SENTINEL = "zz-notify-sentinel"


def _events(port: int, flags: str, script, setup=()) -> list:
    """Runs `script` (list of commands, or "sleep:<s>") on a fresh db with `flags` and
    returns what a pattern subscriber saw, in order."""
    with RawConn(port) as c, RawConn(port) as sub:
        c.cmd("FLUSHALL")
        c.cmd("CONFIG", "SET", "notify-keyspace-events", "")
        for cmd in setup:
            c.cmd(*cmd)
        c.cmd("CONFIG", "SET", "notify-keyspace-events", flags)
        sub.cmd("PSUBSCRIBE", "__key*__:*")
        sub.cmd("SUBSCRIBE", SENTINEL)
        replies = []
        for cmd in script:
            if isinstance(cmd, str) and cmd.startswith("sleep:"):
                time.sleep(float(cmd[6:]))
                continue
            try:
                replies.append(c.cmd(*cmd))
            except Exception as e:  # error replies are part of the comparison
                replies.append(("error", str(e)))
        c.cmd("PUBLISH", SENTINEL, "end")
        seen = []
        while True:
            m = sub.read_reply()
            if m[0] == b"message" and m[1] == SENTINEL.encode():
                break
            assert m[0] == b"pmessage", m
            seen.append((m[2], m[3]))
        c.cmd("CONFIG", "SET", "notify-keyspace-events", "")
        return seen, replies


def _compare(server, ref_port, flags, script, setup=()):
    ours, our_replies = _events(server.port, flags, script, setup)
    theirs, their_replies = _events(ref_port, flags, script, setup)
    for cmd, a, b in zip([c for c in script if not isinstance(c, str)], our_replies,
                         their_replies):
        if cmd[0] != "SPOP":  # random members
            assert a == b, f"{flags}: {cmd}: ember={a!r} redis={b!r}"
    assert ours == theirs, f"{flags}: ember={ours!r}\nredis={theirs!r}"
    return ours


@pytest.fixture(scope="module")
def ref_port():
    with reference_redis("--enable-debug-command", "yes") as conn:
        assert conn.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0") == "OK"
        yield conn.sock.getpeername()[1]


GENERIC = [
    ("SET", "a", "1"), ("SET", "b", "2"), ("SET", "c", "3"),
    ("DEL", "a", "nope", "b"), ("UNLINK", "c"),
    ("SET", "k", "v"), ("RENAME", "k", "k2"), ("SET", "k3", "x"), ("RENAME", "k2", "k3"),
    ("RENAMENX", "k3", "k4"), ("RENAME", "k4", "k4"),
    ("MOVE", "k4", "3"), ("SELECT", "3"), ("MOVE", "k4", "0"), ("SELECT", "0"),
    ("COPY", "k4", "k5"), ("COPY", "k4", "k5"), ("COPY", "k4", "k5", "REPLACE"),
    ("COPY", "k4", "k6", "DB", "2"),
    ("EXPIRE", "k4", "100"), ("PEXPIRE", "k4", "100000", "NX"), ("PERSIST", "k4"),
    ("PERSIST", "k4"), ("EXPIRE", "k5", "-1"), ("EXPIREAT", "k6", "1"),
    ("SET", "e", "1", "EX", "100"), ("SETEX", "f", "100", "v"), ("PSETEX", "g", "100000", "v"),
    ("GETEX", "e", "PERSIST"), ("GETEX", "e", "EX", "50"), ("GETDEL", "e"),
    ("EXISTS", "nope", "f"), ("TYPE", "nope"), ("TTL", "nope"), ("TOUCH", "nope", "f"),
]

STRINGS = [
    ("SET", "s", "1"), ("SET", "s", "2", "NX"), ("SET", "s", "3", "XX", "GET"),
    ("SET", "t", "3", "GET"), ("SETNX", "u", "1"), ("SETNX", "u", "2"), ("GETSET", "u", "9"),
    ("MSET", "m1", "a", "m2", "b"), ("MSETNX", "m3", "a", "m4", "b"), ("MSETNX", "m3", "z"),
    ("APPEND", "s", "xx"), ("APPEND", "new", "yy"), ("INCR", "i"), ("INCRBY", "i", "5"),
    ("DECR", "i"), ("DECRBY", "i", "2"), ("INCRBYFLOAT", "fl", "1.5"),
    ("INCR", "s"), ("SETRANGE", "r", "2", "ab"), ("SETRANGE", "r", "0", ""),
    ("SETRANGE", "none", "0", ""), ("GET", "nope"), ("MGET", "s", "nope", "nope2"),
    ("STRLEN", "nope"), ("GETRANGE", "nope", "0", "1"), ("GETDEL", "nope"),
    ("GETEX", "nope"), ("LCS", "s", "nope"),
]

LISTS = [
    ("LPUSH", "l", "a", "b", "c"), ("RPUSH", "l", "d"), ("LPUSHX", "nl", "x"),
    ("RPUSHX", "l", "e"), ("LPOP", "l"), ("RPOP", "l", "2"), ("LPOP", "l", "0"),
    ("LINSERT", "l", "BEFORE", "a", "z"), ("LINSERT", "l", "BEFORE", "nope", "z"),
    ("LSET", "l", "0", "q"), ("LREM", "l", "0", "q"), ("LREM", "l", "0", "nope"),
    ("RPUSH", "l", "1", "2", "3", "4"), ("LTRIM", "l", "1", "-1"),
    ("LMOVE", "l", "l2", "LEFT", "RIGHT"), ("RPOPLPUSH", "l2", "l"), ("LMOVE", "l", "l", "LEFT", "LEFT"),
    ("LMPOP", "2", "nope", "l", "RIGHT", "COUNT", "2"), ("BLPOP", "l", "0.01"),
    ("BRPOP", "l", "0.01"), ("LRANGE", "l", "0", "-1"), ("LPOP", "l", "10"),
    ("RPUSH", "x", "1"), ("LTRIM", "x", "1", "0"), ("RPUSH", "y", "1"), ("LMOVE", "y", "z", "LEFT", "LEFT"),
    ("BLMOVE", "z", "w", "RIGHT", "LEFT", "0.01"), ("LLEN", "nope"), ("LINDEX", "nope", "0"),
    ("LPOS", "nope", "a"), ("LRANGE", "nope", "0", "1"),
]

HASHES = [
    ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "1"), ("HMSET", "h", "c", "3"),
    ("HSETNX", "h", "a", "9"), ("HSETNX", "h", "d", "4"), ("HDEL", "h", "nope"),
    ("HDEL", "h", "a", "b"), ("HINCRBY", "h", "n", "3"), ("HINCRBYFLOAT", "h", "f", "1.5"),
    ("HINCRBY", "h2", "n", "1"), ("HDEL", "h2", "n"), ("HGET", "nope", "a"),
    ("HGETALL", "nope"), ("HLEN", "nope"), ("HEXISTS", "nope", "a"), ("HSCAN", "nope", "0"),
]

SETS = [
    ("SADD", "s1", "a", "b", "c"), ("SADD", "s1", "a"), ("SREM", "s1", "nope"),
    ("SREM", "s1", "a"), ("SADD", "s2", "b", "x"), ("SMOVE", "s1", "s2", "b"),
    ("SMOVE", "s1", "s3", "c"), ("SMOVE", "s2", "s2", "x"), ("SMOVE", "s2", "s4", "nope"),
    ("SADD", "p", "1", "2", "3"), ("SPOP", "p"), ("SPOP", "p", "0"), ("SPOP", "p", "1"),
    ("SPOP", "p", "5"), ("SADD", "a1", "1", "2"), ("SADD", "a2", "2", "3"),
    ("SINTERSTORE", "d", "a1", "a2"), ("SUNIONSTORE", "d", "a1", "a2"),
    ("SDIFFSTORE", "d", "a1", "a1"), ("SDIFFSTORE", "d", "a1", "a1"),
    ("SINTERSTORE", "d2", "a1", "nope"), ("SINTER", "a1", "nope"), ("SUNION", "nope", "a1"),
    ("SMEMBERS", "nope"), ("SCARD", "nope"), ("SISMEMBER", "nope", "a"),
    ("SINTERCARD", "2", "a1", "nope"),
]

ZSETS = [
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1", "a"),
    ("ZADD", "z", "CH", "5", "a"), ("ZADD", "z", "XX", "1", "nope"), ("ZADD", "zz", "XX", "1", "a"),
    ("ZADD", "z", "INCR", "1", "a"), ("ZINCRBY", "z", "0", "a"), ("ZINCRBY", "z", "2", "d"),
    ("ZREM", "z", "nope"), ("ZREM", "z", "d"), ("ZADD", "z", "10", "e", "11", "f", "12", "g"),
    ("ZREMRANGEBYSCORE", "z", "100", "200"), ("ZREMRANGEBYSCORE", "z", "10", "10"),
    ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZREMRANGEBYLEX", "z", "-", "+"),
    ("ZADD", "z1", "1", "a", "2", "b"), ("ZADD", "z2", "2", "b", "3", "c"),
    ("ZUNIONSTORE", "zd", "2", "z1", "z2"), ("ZINTERSTORE", "zd", "2", "z1", "z2"),
    ("ZDIFFSTORE", "zd", "2", "z1", "z1"), ("ZDIFFSTORE", "zd", "2", "z1", "z1"),
    ("ZRANGESTORE", "zr", "z1", "0", "-1"), ("ZRANGESTORE", "zr", "nope", "0", "-1"),
    ("ZPOPMIN", "z1"), ("ZPOPMAX", "z2", "5"), ("ZPOPMIN", "z1", "0"),
    ("ZADD", "m", "1", "a", "2", "b"), ("ZMPOP", "2", "nope", "m", "MIN"),
    ("BZPOPMAX", "m", "0.01"), ("BZMPOP", "0.01", "1", "m", "MAX"),
    ("ZSCORE", "nope", "a"), ("ZRANGE", "nope", "0", "-1"), ("ZCARD", "nope"),
    ("ZUNION", "2", "nope", "z1"), ("ZRANK", "nope", "a"),
]


ZSETS += [("ZUNIONSTORE", "zd", "2", "z1", "nope"), ("ZINTERCARD", "2", "z1", "nope")]
SETS += [("SUNIONSTORE", "d", "a1", "nope"), ("SDIFFSTORE", "d", "nope", "a1")]

STREAMS = [
    ("XADD", "x", "1-1", "f", "v"), ("XADD", "x", "2-1", "f", "v"),
    ("XADD", "x", "MAXLEN", "1", "3-1", "f", "v"), ("XADD", "nope", "NOMKSTREAM", "4-1", "f", "v"),
    ("XTRIM", "x", "MAXLEN", "5"), ("XADD", "x", "4-1", "f", "v"), ("XTRIM", "x", "MAXLEN", "1"),
    ("XDEL", "x", "1-1"), ("XDEL", "x", "4-1"), ("XGROUP", "CREATE", "x", "g", "0"),
    ("XGROUP", "CREATE", "y", "g", "$", "MKSTREAM"), ("XGROUP", "SETID", "x", "g", "0"),
    ("XGROUP", "CREATECONSUMER", "x", "g", "c"), ("XGROUP", "CREATECONSUMER", "x", "g", "c"),
    ("XGROUP", "DELCONSUMER", "x", "g", "c"), ("XGROUP", "DELCONSUMER", "x", "g", "c"),
    ("XGROUP", "DESTROY", "x", "g"), ("XGROUP", "DESTROY", "x", "g"), ("XSETID", "x", "9-9"),
    ("XLEN", "nope"), ("XRANGE", "nope", "-", "+"),
    # Consumers created on the fly, and XREAD's lookups of missing streams.
    ("XADD", "s2", "1-1", "f", "v"), ("XADD", "s2", "2-1", "f", "v"),
    ("XGROUP", "CREATE", "s2", "g2", "0"),
    ("XREADGROUP", "GROUP", "g2", "alice", "COUNT", "1", "STREAMS", "s2", ">"),
    ("XREADGROUP", "GROUP", "g2", "alice", "STREAMS", "s2", ">"),
    ("XREADGROUP", "GROUP", "g2", "bob", "STREAMS", "s2", ">"),
    ("XREADGROUP", "GROUP", "g2", "bob2", "STREAMS", "s2", "0"),
    ("XCLAIM", "s2", "g2", "carol", "0", "1-1"), ("XCLAIM", "s2", "g2", "erin", "0", "9-9"),
    ("XAUTOCLAIM", "s2", "g2", "dave", "0", "0"),
    ("XREAD", "STREAMS", "nope", "s2", "0", "0"), ("XREAD", "STREAMS", "nope", "0"),
]

MISC = [
    ("SETBIT", "b", "7", "1"), ("SETBIT", "b", "7", "1"), ("GETBIT", "nope", "0"),
    ("BITCOUNT", "nope"), ("BITPOS", "nope", "1"), ("BITOP", "OR", "bd", "b", "nope"),
    ("BITOP", "AND", "bd", "nope"), ("BITOP", "AND", "bd", "nope"),
    ("BITFIELD", "bf", "SET", "u8", "0", "1"), ("BITFIELD", "bf", "GET", "u8", "0"),
    ("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "10"),
    ("PFADD", "h", "a", "b"), ("PFADD", "h", "a"), ("PFCOUNT", "nope"), ("PFMERGE", "h2", "h", "nope"),
    ("GEOADD", "g", "13.361389", "38.115556", "Palermo", "15.087269", "37.502669", "Catania"),
    ("GEOADD", "g", "NX", "13.361389", "38.115556", "Palermo"),
    ("GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"),
    ("GEORADIUS", "g", "15", "37", "200", "km", "STORE", "gr"),
    ("GEOSEARCHSTORE", "gs", "g", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEOSEARCHSTORE", "gs", "nope", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"),
    ("GEOPOS", "nope", "a"), ("RPUSH", "l", "3", "1", "2"), ("SORT", "l", "STORE", "ls"),
    ("SORT", "nope", "STORE", "ls"), ("SORT", "nope", "STORE", "ls"), ("SORT", "nope"),
    ("SET", "w_1", "5"), ("SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#"),
    ("SORT", "l", "BY", "nosort", "GET", "w_*", "STORE", "ls2"),
]


@pytest.mark.parametrize("flags", ["KEA", "El", "Kx", "Em", "AKEm", "Kg$", "KEn", "KEAnm"])
@pytest.mark.parametrize("family", ["generic", "strings", "lists", "hashes", "sets", "zsets",
                                    "streams", "misc"])
def test_families_match_redis(server, ref_port, flags, family):
    script = {"generic": GENERIC, "strings": STRINGS, "lists": LISTS, "hashes": HASHES,
              "sets": SETS, "zsets": ZSETS, "streams": STREAMS, "misc": MISC}[family]
    _compare(server, ref_port, flags, script)


def test_lazy_expiry_matches_redis(server, ref_port):
    with RawConn(server.port) as c:
        c.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        script = [("SET", "a", "1", "PX", "20"), ("SET", "b", "1", "PX", "20"),
                  ("RPUSH", "c", "x"), ("PEXPIRE", "c", "20"), ("SET", "d", "1", "PX", "20"),
                  "sleep:0.1", ("GET", "a"), ("SET", "b", "2"), ("RPUSH", "c", "y"),
                  ("EXISTS", "d")]
        ev = _compare(server, ref_port, "KEA", script)
        assert (b"__keyevent@0__:expired", b"a") in ev
        _compare(server, ref_port, "KExmn", script)
    finally:
        with RawConn(server.port) as c:
            c.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_active_expiry(server, ref_port):
    # Nothing touches the keys: the active cycle removes them and publishes "expired".
    for port in (server.port, ref_port):
        with RawConn(port) as c:
            c.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    try:
        script = [("SET", "a", "1", "PX", "10"), ("HSET", "h", "f", "v"), ("PEXPIRE", "h", "10"),
                  "sleep:0.8"]
        ours, _ = _events(server.port, "Ex", script)
        theirs, _ = _events(ref_port, "Ex", script)
        assert sorted(ours) == sorted(theirs) == [
            (b"__keyevent@0__:expired", b"a"), (b"__keyevent@0__:expired", b"h")]
    finally:
        with RawConn(ref_port) as c:
            c.cmd("DEBUG", "SET-ACTIVE-EXPIRE", "0")


def test_config_text_matches_redis(server, ref_port):
    for value in ["", "KEA", "AKE", "gE", "Elg", "Kx", "Em", "nKAm", "g$lshzxetdKE", "KEn",
                  "tdm", "KEX", "a", "K E"]:
        got = []
        for port in (server.port, ref_port):
            with RawConn(port) as c:
                try:
                    c.cmd("CONFIG", "SET", "notify-keyspace-events", value)
                    got.append(c.cmd("CONFIG", "GET", "notify-keyspace-events"))
                except Exception as e:
                    got.append(str(e))
                c.cmd("CONFIG", "SET", "notify-keyspace-events", "")
        assert got[0] == got[1], value


def test_off_by_default(server, r):
    assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": ""}
    with RawConn(server.port) as sub:
        sub.cmd("PSUBSCRIBE", "__key*__:*")
        sub.cmd("SUBSCRIBE", SENTINEL)
        r.set("k", "v")
        r.delete("k")
        r.publish(SENTINEL, "end")
        m = sub.read_reply()
        assert m[0] == b"message" and m[1] == SENTINEL.encode(), m
