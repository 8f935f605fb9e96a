"""Ember-only key tags (skipped against redis-server).

    TAG.SET key tag [tag ...]                  -> tags newly added; ERR no such key
    TAG.DEL key tag [tag ...]                  -> tags removed (0 without the key)
    TAG.GET key                                -> the key's tags, sorted bytewise
    TAG.MEMBERS tag [CURSOR c [COUNT n]]       -> keys with the tag / [cursor, keys]
    TAG.COUNT tag                              -> live keys with the tag
    TAG.LIST                                   -> every tag in use in the database
    TAG.DELKEYS tag                            -> deletes every key with the tag

Tags follow their key: gone with it (DEL, expiry, emptied collections, FLUSH*), moved by
RENAME/MOVE/SWAPDB, kept by an overwrite, not copied by COPY.
"""

import time

import pytest
import redis

from helpers import ember_only
from test_tracking import Resp3

pytestmark = ember_only


def arity(name):
    return rf"^wrong number of arguments for '{name}' command$"


def members(r, tag):
    return sorted(r.execute_command("TAG.MEMBERS", tag))


def test_set_get_del(r):
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        r.execute_command("TAG.SET", "nokey", "t")
    r.set("k", "v")
    assert r.execute_command("TAG.SET", "k", "b", "a", "b") == 2
    assert r.execute_command("TAG.SET", "k", "a", b"\xff", b"\x00") == 2
    assert r.execute_command("TAG.GET", "k") == [b"\x00", b"a", b"b", b"\xff"]
    assert r.execute_command("TAG.DEL", "k", "a", "nope") == 1
    assert r.execute_command("TAG.DEL", "nokey", "a") == 0
    assert r.execute_command("TAG.GET", "k") == [b"\x00", b"b", b"\xff"]
    assert r.execute_command("TAG.GET", "nokey") == []
    r.rpush("l", "x")
    assert r.execute_command("TAG.SET", "l", "b") == 1
    assert members(r, "b") == [b"k", b"l"]
    assert r.execute_command("TAG.COUNT", "b") == 2
    assert r.execute_command("TAG.COUNT", "none") == 0
    assert r.execute_command("TAG.MEMBERS", "none") == []
    assert sorted(r.execute_command("TAG.LIST")) == [b"\x00", b"b", b"\xff"]


@pytest.mark.parametrize("args", [
    ("TAG.SET", "k"), ("TAG.DEL", "k"), ("TAG.GET",), ("TAG.GET", "k", "x"),
    ("TAG.MEMBERS",), ("TAG.COUNT",), ("TAG.COUNT", "a", "b"), ("TAG.LIST", "x"),
    ("TAG.DELKEYS",), ("TAG.DELKEYS", "a", "b"),
])
def test_arity(r, args):
    with pytest.raises(redis.ResponseError, match=arity(args[0].lower())):
        r.execute_command(*args)


def test_command_info(r, rr):
    assert rr.execute_command("COMMAND", "GETKEYS", "TAG.SET", "k", "t") == [b"k"]
    assert rr.execute_command("COMMAND", "GETKEYS", "TAG.GET", "k") == [b"k"]
    want = {
        "tag.set": (-3, b"write", 1), "tag.del": (-3, b"write", 1),
        "tag.get": (2, b"readonly", 1), "tag.members": (-2, b"readonly", 0),
        "tag.count": (2, b"readonly", 0), "tag.list": (1, b"readonly", 0),
        "tag.delkeys": (2, b"write", 0),
    }
    for name, (ar, flag, first) in want.items():
        [info] = rr.execute_command("COMMAND", "INFO", name)
        assert info[0] == name.encode()
        assert info[1] == ar
        assert flag in info[2]
        assert info[3] == first


def test_del_overwrite_copy_and_emptied_collections(r):
    for k in "abcd":
        r.set(k, "v")
        r.execute_command("TAG.SET", k, "t")
    assert r.delete("a") == 1
    assert r.unlink("b") == 1
    assert members(r, "t") == [b"c", b"d"]
    r.set("a", "v")
    assert r.execute_command("TAG.GET", "a") == []
    r.set("c", "new", ex=100)
    r.incr("num")
    assert r.execute_command("TAG.GET", "c") == [b"t"], "an overwrite keeps the tags"
    assert r.copy("c", "copy")
    assert r.execute_command("TAG.GET", "copy") == [], "COPY does not copy tags"
    r.sadd("s", "m")
    r.execute_command("TAG.SET", "s", "t")
    r.srem("s", "m")
    r.sadd("s", "m")
    assert r.execute_command("TAG.GET", "s") == []
    r.hset("h", "f", "v")
    r.execute_command("TAG.SET", "h", "t")
    r.hdel("h", "f")
    assert members(r, "t") == [b"c", b"d"]
    r.flushdb()
    assert r.execute_command("TAG.LIST") == []


def test_expiry_removes_tags(r):
    for k in ("x", "y", "keep"):
        r.set(k, "v")
        r.execute_command("TAG.SET", k, "t")
    assert r.pexpire("x", 50)
    assert r.pexpire("y", 50)
    time.sleep(0.15)
    assert r.execute_command("TAG.COUNT", "t") == 1
    assert members(r, "t") == [b"keep"]
    r.set("x", "v")
    assert r.execute_command("TAG.GET", "x") == []
    deadline = time.time() + 5
    while r.dbsize() != 2:
        assert time.time() < deadline, "active expiry"
        time.sleep(0.02)
    r.set("y", "v")
    assert r.execute_command("TAG.GET", "y") == []
    assert r.execute_command("TAG.LIST") == [b"t"]


def test_rename_move_swapdb(r, server):
    r.set("src", "v")
    r.set("dst", "v")
    r.execute_command("TAG.SET", "src", "s")
    r.execute_command("TAG.SET", "dst", "d")
    r.rename("src", "dst")
    assert r.execute_command("TAG.GET", "dst") == [b"s"]
    assert r.execute_command("TAG.GET", "src") == []
    assert r.execute_command("TAG.MEMBERS", "d") == []
    assert r.renamenx("dst", "nx")
    assert r.execute_command("TAG.MEMBERS", "s") == [b"nx"]
    assert r.move("nx", 1)
    assert r.execute_command("TAG.COUNT", "s") == 0
    other = server.client()
    other.select(1)
    assert other.execute_command("TAG.GET", "nx") == [b"s"]
    r.swapdb(0, 1)
    assert r.execute_command("TAG.MEMBERS", "s") == [b"nx"]
    assert other.execute_command("TAG.COUNT", "s") == 0
    other.flushall()
    other.close()


def test_delkeys_many_keys(r):
    p = r.pipeline(transaction=False)
    for i in range(5000):
        p.set(f"k:{i}", "v")
        p.execute_command("TAG.SET", f"k:{i}", "all", f"mod{i % 4}")
    p.execute()
    r.set("plain", "v")
    assert r.execute_command("TAG.COUNT", "all") == 5000
    assert r.execute_command("TAG.DELKEYS", "mod0") == 1250
    assert r.dbsize() == 3751
    assert not r.exists("k:0") and not r.exists("k:4996") and r.exists("k:1")
    assert r.execute_command("TAG.COUNT", "all") == 3750
    assert sorted(r.execute_command("TAG.LIST")) == [b"all", b"mod1", b"mod2", b"mod3"]
    assert r.execute_command("TAG.DELKEYS", "mod0") == 0
    assert r.execute_command("TAG.DELKEYS", "all") == 3750
    assert r.keys() == [b"plain"]
    assert r.execute_command("TAG.LIST") == []


def test_delkeys_touches_watched_and_tracked_keys(r, server):
    r.set("w", "v")
    r.execute_command("TAG.SET", "w", "t")
    p = server.client().pipeline(transaction=True)
    p.watch("w")
    c3 = Resp3(server.port)
    try:
        assert c3.cmd("CLIENT", "TRACKING", "ON") == "OK"
        assert c3.cmd("GET", "w") == b"v"
        assert r.execute_command("TAG.DELKEYS", "t") == 1
        assert c3.wait_push() == [b"invalidate", [b"w"]]
    finally:
        c3.close()
    p.multi()
    p.set("x", "y")
    with pytest.raises(redis.WatchError):
        p.execute()


def test_members_cursor(r):
    p = r.pipeline(transaction=False)
    for i in range(3000):
        p.set(f"m:{i}", "v")
        if i % 3:
            p.execute_command("TAG.SET", f"m:{i}", "t")
    p.execute()
    want = {f"m:{i}".encode() for i in range(3000) if i % 3}
    for count in (None, 1, 50, 100000):
        seen, cursor, calls = set(), b"0", 0
        while True:
            args = ["TAG.MEMBERS", "t", "CURSOR", cursor]
            if count is not None:
                args += ["COUNT", count]
            cursor, keys = r.execute_command(*args)
            assert isinstance(cursor, bytes)
            seen.update(keys)
            calls += 1
            if cursor == b"0":
                break
        assert seen == want, count
        assert calls == 1 if count == 100000 else calls > 1
    assert set(r.execute_command("TAG.MEMBERS", "t")) == want
    assert r.execute_command("TAG.MEMBERS", "t", "CURSOR", "99999999") == [b"0", []]


@pytest.mark.parametrize("args,msg", [
    (("CURSOR", "x"), "^invalid cursor$"),
    (("CURSOR", "0", "COUNT", "0"), "^syntax error$"),
    (("CURSOR", "0", "COUNT", "x"), "^value is not an integer or out of range$"),
    (("CURSOR", "0", "COUNT"), "^syntax error$"),
    (("CURSOR",), "^syntax error$"),
    (("NOPE", "0"), "^syntax error$"),
    (("CURSOR", "0", "MATCH", "*"), "^syntax error$"),
])
def test_members_errors(r, args, msg):
    with pytest.raises(redis.ResponseError, match=msg):
        r.execute_command("TAG.MEMBERS", "t", *args)


def test_delkeys_notifies_del(r, server):
    r.set("n1", "v")
    r.set("n2", "v")
    r.execute_command("TAG.SET", "n1", "t")
    r.execute_command("TAG.SET", "n2", "t")
    r.config_set("notify-keyspace-events", "Eg")
    try:
        sub = server.client().pubsub()
        sub.subscribe("__keyevent@0__:del")
        assert sub.get_message(timeout=5)["type"] == "subscribe"
        assert r.execute_command("TAG.DELKEYS", "t") == 2
        got = set()
        for _ in range(2):
            m = sub.get_message(timeout=5)
            assert m is not None and m["channel"] == b"__keyevent@0__:del"
            got.add(m["data"])
        assert got == {b"n1", b"n2"}
        sub.close()
    finally:
        r.config_set("notify-keyspace-events", "")
