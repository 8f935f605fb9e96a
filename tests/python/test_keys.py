"""Keyspace commands: DEL UNLINK EXISTS TYPE RENAME KEYS SCAN RANDOMKEY DBSIZE FLUSH* MOVE
COPY TOUCH OBJECT SWAPDB."""

import time

import pytest
import redis

from helpers import requires_72, wait_until

SYNTAX = r"^syntax error$"
NOT_INT = r"^value is not an integer or out of range$"
OUT_OF_RANGE = r"^DB index is out of range$"
SAME_OBJECT = r"^source and destination objects are the same$"


def arity(cmd):
    return rf"^wrong number of arguments for '{cmd}' command$"


@pytest.fixture
def db1(server, r):
    c = server.client(db=1, raw=True)
    yield c
    c.close()


# --------------------------------------------------------------------------- DEL UNLINK EXISTS

def test_del(rr):
    rr.execute_command("MSET", "a", "1", "b", "2", "c", "3")
    assert rr.execute_command("DEL", "a") == 1
    assert rr.execute_command("DEL", "a") == 0
    assert rr.execute_command("DEL", "b", "c", "nokey", "b") == 2
    assert rr.execute_command("DBSIZE") == 0


def test_unlink(rr):
    rr.execute_command("MSET", "a", "1", "b", "2")
    assert rr.execute_command("UNLINK", "a", "b", "nokey") == 2
    assert rr.execute_command("EXISTS", "a", "b") == 0


def test_del_arity(rr):
    with pytest.raises(redis.ResponseError, match=arity("del")):
        rr.execute_command("DEL")


def test_exists_counts_duplicates(rr):
    rr.execute_command("SET", "a", "1")
    assert rr.execute_command("EXISTS", "a") == 1
    assert rr.execute_command("EXISTS", "nokey") == 0
    assert rr.execute_command("EXISTS", "a", "a", "a") == 3
    assert rr.execute_command("EXISTS", "a", "nokey", "a") == 2


# --------------------------------------------------------------------------- TYPE

def test_type(rr):
    rr.execute_command("SET", "s", "v")
    rr.execute_command("SET", "n", "123")
    assert rr.execute_command("TYPE", "s") == b"string"
    assert rr.execute_command("TYPE", "n") == b"string"
    assert rr.execute_command("TYPE", "nokey") == b"none"


def test_type_is_simple_string(raw):
    c = raw()
    c.send_cmd("SET", "s", "v")
    c.read_reply()
    c.send_cmd("TYPE", "s")
    assert c.read_raw() == b"+string\r\n"
    c.send_cmd("TYPE", "missing")
    assert c.read_raw() == b"+none\r\n"


# --------------------------------------------------------------------------- RENAME RENAMENX

def test_rename(rr):
    rr.execute_command("SET", "a", "1")
    assert rr.execute_command("RENAME", "a", "b") == b"OK"
    assert rr.execute_command("GET", "a") is None
    assert rr.execute_command("GET", "b") == b"1"


def test_rename_overwrites_and_moves_ttl(rr):
    rr.execute_command("SET", "a", "1", "EX", 100)
    rr.execute_command("SET", "b", "2")
    assert rr.execute_command("RENAME", "a", "b") == b"OK"
    assert rr.execute_command("GET", "b") == b"1"
    assert 98 <= rr.execute_command("TTL", "b") <= 100
    # a destination TTL is replaced by the source's (none)
    rr.execute_command("SET", "c", "3")
    rr.execute_command("SET", "d", "4", "EX", 100)
    rr.execute_command("RENAME", "c", "d")
    assert rr.execute_command("TTL", "d") == -1


def test_rename_same_key(rr):
    rr.execute_command("SET", "a", "1", "EX", 100)
    assert rr.execute_command("RENAME", "a", "a") == b"OK"
    assert rr.execute_command("GET", "a") == b"1"
    assert rr.execute_command("TTL", "a") > 0
    assert rr.execute_command("RENAMENX", "a", "a") == 0


def test_rename_missing(rr):
    with pytest.raises(redis.ResponseError, match=r"^no such key$"):
        rr.execute_command("RENAME", "nokey", "x")
    with pytest.raises(redis.ResponseError, match=r"^no such key$"):
        rr.execute_command("RENAMENX", "nokey", "x")
    with pytest.raises(redis.ResponseError, match=r"^no such key$"):
        rr.execute_command("RENAME", "nokey", "nokey")


def test_renamenx(rr):
    rr.execute_command("MSET", "a", "1", "b", "2")
    assert rr.execute_command("RENAMENX", "a", "b") == 0
    assert rr.execute_command("MGET", "a", "b") == [b"1", b"2"]
    assert rr.execute_command("RENAMENX", "a", "c") == 1
    assert rr.execute_command("MGET", "a", "c") == [None, b"1"]


# --------------------------------------------------------------------------- KEYS

KEYS_FIXTURE = ["hello", "hallo", "hxllo", "hllo", "heeello", "h-llo", "hbllo",
                "a*b", "a?b", "axb", "a[b", "a\\b", "foo:1", "foo:2", "foo:10"]


@pytest.mark.parametrize("pattern,expected", [
    ("*", KEYS_FIXTURE),
    ("h?llo", ["hello", "hallo", "hxllo", "h-llo", "hbllo"]),
    ("h*llo", ["hello", "hallo", "hxllo", "hllo", "heeello", "h-llo", "hbllo"]),
    ("h[ae]llo", ["hello", "hallo"]),
    ("h[^e]llo", ["hallo", "hxllo", "h-llo", "hbllo"]),
    ("h[a-b]llo", ["hallo", "hbllo"]),
    ("h[b-a]llo", ["hallo", "hbllo"]),           # reversed ranges work in Redis
    ("h[!e]llo", ["hello"]),                    # '!' is NOT negation in Redis globs
    ("a\\*b", ["a*b"]),
    ("a\\?b", ["a?b"]),
    ("a\\[b", ["a[b"]),
    ("a\\\\b", ["a\\b"]),
    ("a[\\[]b", ["a[b"]),
    ("a*b", ["a*b", "a?b", "axb", "a[b", "a\\b"]),
    ("*\\*b", ["a*b"]),
    ("foo:?", ["foo:1", "foo:2"]),
    ("foo:*", ["foo:1", "foo:2", "foo:10"]),
    ("foo:1*", ["foo:1", "foo:10"]),
    ("nomatch*", []),
    ("hello", ["hello"]),
    ("HELLO", []),
])
def test_keys_glob(rr, pattern, expected):
    rr.execute_command("MSET", *[x for k in KEYS_FIXTURE for x in (k, "1")])
    got = rr.execute_command("KEYS", pattern)
    assert sorted(got) == sorted(k.encode() for k in expected)


def test_keys_empty_db(rr):
    assert rr.execute_command("KEYS", "*") == []


def test_keys_skips_expired(rr):
    rr.execute_command("SET", "live", "1")
    rr.execute_command("SET", "dead", "1", "PX", 1)
    wait_until(lambda: rr.execute_command("KEYS", "*") == [b"live"], timeout=10,
               msg="expired key to disappear from KEYS")


# --------------------------------------------------------------------------- SCAN

def _full_scan(c, *args):
    cursor = b"0"
    seen = []
    calls = 0
    while True:
        cursor, batch = c.execute_command("SCAN", cursor, *args)
        assert isinstance(cursor, bytes) and cursor.isdigit()
        seen.extend(batch)
        calls += 1
        assert calls < 100000, "SCAN did not terminate"
        if cursor == b"0":
            return seen, calls


def test_scan_reply_shape(rr):
    rr.execute_command("SET", "k", "v")
    cursor, keys = rr.execute_command("SCAN", 0)
    assert cursor == b"0"
    assert keys == [b"k"]


def test_scan_empty(rr):
    assert rr.execute_command("SCAN", 0) == [b"0", []]


def test_scan_full_iteration_exactly_once(rr):
    names = [f"key:{i}".encode() for i in range(500)]
    rr.execute_command("MSET", *[x for k in names for x in (k, b"v")])
    seen, calls = _full_scan(rr, "COUNT", 10)
    assert sorted(seen) == sorted(names), "each key must be returned exactly once"
    assert calls > 1, "COUNT 10 over 500 keys should take several calls"


def test_scan_match(rr):
    rr.execute_command("MSET", *[x for i in range(200) for x in (f"user:{i}", "1")])
    rr.execute_command("MSET", *[x for i in range(100) for x in (f"order:{i}", "1")])
    seen, _ = _full_scan(rr, "MATCH", "user:1*", "COUNT", 20)
    expected = sorted(f"user:{i}".encode() for i in range(200) if str(i).startswith("1"))
    assert sorted(seen) == expected
    seen, _ = _full_scan(rr, "MATCH", "nothing*")
    assert seen == []


def test_scan_type(rr):
    rr.execute_command("MSET", *[x for i in range(50) for x in (f"s:{i}", "1")])
    seen, _ = _full_scan(rr, "TYPE", "string", "COUNT", 7)
    assert sorted(seen) == sorted(f"s:{i}".encode() for i in range(50))
    seen, _ = _full_scan(rr, "TYPE", "list")
    assert seen == []
    seen, _ = _full_scan(rr, "MATCH", "s:1*", "TYPE", "string")
    assert sorted(seen) == sorted(f"s:{i}".encode() for i in range(50) if str(i).startswith("1"))


def test_scan_with_concurrent_changes(server, rr):
    stable = {f"stable:{i}".encode() for i in range(300)}
    doomed = [f"doomed:{i}".encode() for i in range(300)]
    rr.execute_command("MSET", *[x for k in stable for x in (k, b"1")])
    rr.execute_command("MSET", *[x for k in doomed for x in (k, b"1")])
    other = server.client(raw=True)
    try:
        cursor = b"0"
        seen = set()
        step = 0
        while True:
            cursor, batch = rr.execute_command("SCAN", cursor, "COUNT", 15)
            seen.update(batch)
            # mutate the keyspace between SCAN calls from another connection
            other.execute_command("MSET", *[x for j in range(10)
                                            for x in (f"added:{step}:{j}", "1")])
            if step * 10 < len(doomed):
                other.execute_command("DEL", *doomed[step * 10:(step + 1) * 10])
            step += 1
            assert step < 10000
            if cursor == b"0":
                break
    finally:
        other.close()
    missing = stable - seen
    assert not missing, f"{len(missing)} keys present for the whole scan were not returned"


def test_scan_errors(rr):
    with pytest.raises(redis.ResponseError, match=r"^invalid cursor$"):
        rr.execute_command("SCAN", "abc")
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        rr.execute_command("SCAN", 0, "COUNT", 0)
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        rr.execute_command("SCAN", 0, "COUNT", -1)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("SCAN", 0, "COUNT", "abc")
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        rr.execute_command("SCAN", 0, "MATCH")
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        rr.execute_command("SCAN", 0, "FOO", "bar")


def test_scan_iter_redis_py(r):
    r.mset({f"k{i}": i for i in range(100)})
    assert sorted(r.scan_iter(match="k1*", count=5)) == sorted(
        f"k{i}".encode() for i in range(100) if str(i).startswith("1"))


# --------------------------------------------------------------------------- RANDOMKEY DBSIZE

def test_randomkey(rr):
    assert rr.execute_command("RANDOMKEY") is None
    rr.execute_command("MSET", "a", "1", "b", "2", "c", "3")
    seen = {rr.execute_command("RANDOMKEY") for _ in range(50)}
    assert seen <= {b"a", b"b", b"c"}
    assert seen


def test_dbsize(rr, db1):
    assert rr.execute_command("DBSIZE") == 0
    rr.execute_command("MSET", "a", "1", "b", "2")
    db1.execute_command("SET", "x", "1")
    assert rr.execute_command("DBSIZE") == 2
    assert db1.execute_command("DBSIZE") == 1
    rr.execute_command("DEL", "a")
    assert rr.execute_command("DBSIZE") == 1


# --------------------------------------------------------------------------- FLUSHDB FLUSHALL

def test_flushdb_only_current_db(rr, db1):
    rr.execute_command("SET", "a", "1")
    db1.execute_command("SET", "b", "1")
    assert db1.execute_command("FLUSHDB") == b"OK"
    assert db1.execute_command("DBSIZE") == 0
    assert rr.execute_command("GET", "a") == b"1"


@pytest.mark.parametrize("mode", [(), ("SYNC",), ("ASYNC",), ("sync",), ("async",)])
def test_flushall_modes(rr, db1, mode):
    rr.execute_command("SET", "a", "1")
    db1.execute_command("SET", "b", "1")
    assert rr.execute_command("FLUSHALL", *mode) == b"OK"
    assert rr.execute_command("DBSIZE") == 0
    assert db1.execute_command("DBSIZE") == 0


@pytest.mark.parametrize("mode", [(), ("SYNC",), ("ASYNC",)])
def test_flushdb_modes(rr, mode):
    rr.execute_command("MSET", "a", "1", "b", "2")
    assert rr.execute_command("FLUSHDB", *mode) == b"OK"
    assert rr.execute_command("DBSIZE") == 0


def test_flush_errors(rr):
    for cmd in ("FLUSHALL", "FLUSHDB"):
        with pytest.raises(redis.ResponseError, match=SYNTAX):
            rr.execute_command(cmd, "FOO")
        with pytest.raises(redis.ResponseError, match=SYNTAX):
            rr.execute_command(cmd, "SYNC", "ASYNC")


# --------------------------------------------------------------------------- MOVE

def test_move(rr, db1):
    rr.execute_command("SET", "k", "v", "EX", 100)
    assert rr.execute_command("MOVE", "k", 1) == 1
    assert rr.execute_command("EXISTS", "k") == 0
    assert db1.execute_command("GET", "k") == b"v"
    assert db1.execute_command("TTL", "k") > 0


def test_move_target_exists(rr, db1):
    rr.execute_command("SET", "k", "src")
    db1.execute_command("SET", "k", "dst")
    assert rr.execute_command("MOVE", "k", 1) == 0
    assert rr.execute_command("GET", "k") == b"src"
    assert db1.execute_command("GET", "k") == b"dst"


def test_move_missing_and_errors(rr):
    assert rr.execute_command("MOVE", "nokey", 1) == 0
    rr.execute_command("SET", "k", "v")
    with pytest.raises(redis.ResponseError, match=SAME_OBJECT):
        rr.execute_command("MOVE", "k", 0)
    with pytest.raises(redis.ResponseError, match=OUT_OF_RANGE):
        rr.execute_command("MOVE", "k", 16)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("MOVE", "k", "abc")


# --------------------------------------------------------------------------- COPY

def test_copy(rr):
    rr.execute_command("SET", "a", "v", "EX", 100)
    assert rr.execute_command("COPY", "a", "b") == 1
    assert rr.execute_command("GET", "b") == b"v"
    assert 98 <= rr.execute_command("TTL", "b") <= 100
    # independent values
    rr.execute_command("APPEND", "b", "2")
    assert rr.execute_command("GET", "a") == b"v"


def test_copy_existing_destination(rr):
    rr.execute_command("MSET", "a", "new", "b", "old")
    assert rr.execute_command("COPY", "a", "b") == 0
    assert rr.execute_command("GET", "b") == b"old"
    assert rr.execute_command("COPY", "a", "b", "REPLACE") == 1
    assert rr.execute_command("GET", "b") == b"new"


def test_copy_to_db(rr, db1):
    rr.execute_command("SET", "a", "v")
    assert rr.execute_command("COPY", "a", "a", "DB", 1) == 1
    assert db1.execute_command("GET", "a") == b"v"
    assert rr.execute_command("GET", "a") == b"v"
    rr.execute_command("SET", "a", "v2")
    assert rr.execute_command("COPY", "a", "a", "DB", 1) == 0
    assert rr.execute_command("COPY", "a", "a", "DB", 1, "REPLACE") == 1
    assert db1.execute_command("GET", "a") == b"v2"


def test_copy_missing_and_errors(rr):
    assert rr.execute_command("COPY", "nokey", "b") == 0
    rr.execute_command("SET", "a", "v")
    with pytest.raises(redis.ResponseError, match=SAME_OBJECT):
        rr.execute_command("COPY", "a", "a")
    with pytest.raises(redis.ResponseError, match=OUT_OF_RANGE):
        rr.execute_command("COPY", "a", "b", "DB", 16)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("COPY", "a", "b", "DB", "abc")
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        rr.execute_command("COPY", "a", "b", "FOO")


# --------------------------------------------------------------------------- TOUCH

def test_touch(rr):
    rr.execute_command("MSET", "a", "1", "b", "2")
    assert rr.execute_command("TOUCH", "a", "b", "nokey") == 2
    assert rr.execute_command("TOUCH", "nokey") == 0


# --------------------------------------------------------------------------- OBJECT

@pytest.mark.parametrize("value,encoding", [
    ("12345", b"int"),
    ("-1", b"int"),
    ("0", b"int"),
    ("9223372036854775807", b"int"),
    ("12345678901234567890", b"embstr"),   # does not fit i64
    ("0123", b"embstr"),                   # not canonical
    ("12.5", b"embstr"),
    ("hello", b"embstr"),
    ("a" * 44, b"embstr"),
    ("a" * 45, b"raw"),
    ("a" * 1000, b"raw"),
])
def test_object_encoding(rr, value, encoding):
    rr.execute_command("SET", "k", value)
    assert rr.execute_command("OBJECT", "ENCODING", "k") == encoding


def test_object_encoding_after_append_is_raw(rr):
    rr.execute_command("SET", "k", "1")
    rr.execute_command("APPEND", "k", "2")
    assert rr.execute_command("OBJECT", "ENCODING", "k") == b"raw"


def test_object_encoding_after_incr_is_int(rr):
    rr.execute_command("SET", "k", "a")
    rr.execute_command("SET", "n", "1")
    rr.execute_command("INCR", "n")
    assert rr.execute_command("OBJECT", "ENCODING", "n") == b"int"


def test_object_missing_key(rr):
    for sub in ("ENCODING", "IDLETIME", "REFCOUNT"):
        assert rr.execute_command("OBJECT", sub, "nokey") is None


def test_object_freq_requires_lfu(rr):
    rr.execute_command("SET", "k", "v")
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("OBJECT", "FREQ", "k")
    assert str(e.value) == (
        "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that "
        "when switching between policies at runtime LRU and LFU data will take some time to adjust.")


def test_object_refcount(rr):
    rr.execute_command("SET", "k", "hello")
    assert rr.execute_command("OBJECT", "REFCOUNT", "k") == 1


def test_object_idletime(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("OBJECT", "IDLETIME", "k") in (0, 1)
    # OBJECT IDLETIME itself does not touch the key, so idle time grows ...
    wait_until(lambda: rr.execute_command("OBJECT", "IDLETIME", "k") >= 1, timeout=10,
               interval=0.1, msg="OBJECT IDLETIME to reach 1")
    # ... and an access resets it.
    rr.execute_command("GET", "k")
    assert rr.execute_command("OBJECT", "IDLETIME", "k") == 0


def test_object_help(rr):
    lines = rr.execute_command("OBJECT", "HELP")
    assert isinstance(lines, list) and all(isinstance(x, bytes) for x in lines)
    assert lines[0] == b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    text = b"\n".join(lines)
    for sub in (b"ENCODING <key>", b"FREQ <key>", b"IDLETIME <key>", b"REFCOUNT <key>", b"HELP"):
        assert sub in text


def test_object_errors(rr):
    with pytest.raises(redis.ResponseError, match=r"^unknown subcommand 'FOO'\. Try OBJECT HELP\.$"):
        rr.execute_command("OBJECT", "FOO", "k")
    with pytest.raises(redis.ResponseError, match=arity("object|encoding")):
        rr.execute_command("OBJECT", "ENCODING")


# --------------------------------------------------------------------------- SWAPDB

def test_swapdb(server, rr, db1):
    rr.execute_command("SET", "zero", "0")
    db1.execute_command("SET", "one", "1")
    assert rr.execute_command("SWAPDB", 0, 1) == b"OK"
    # already-open connections see the swapped data
    assert rr.execute_command("GET", "one") == b"1"
    assert rr.execute_command("GET", "zero") is None
    assert db1.execute_command("GET", "zero") == b"0"
    assert rr.execute_command("SWAPDB", 1, 0) == b"OK"
    assert rr.execute_command("GET", "zero") == b"0"


def test_swapdb_same_db_and_errors(rr):
    rr.execute_command("SET", "a", "1")
    assert rr.execute_command("SWAPDB", 0, 0) == b"OK"
    assert rr.execute_command("GET", "a") == b"1"
    with pytest.raises(redis.ResponseError, match=OUT_OF_RANGE):
        rr.execute_command("SWAPDB", 0, 16)
    with pytest.raises(redis.ResponseError, match=r"^invalid first DB index$"):
        rr.execute_command("SWAPDB", "a", 0)
    with pytest.raises(redis.ResponseError, match=r"^invalid second DB index$"):
        rr.execute_command("SWAPDB", 0, "b")


def test_keyspace_commands_arity(rr):
    for cmd, args in [("EXISTS", ()), ("TYPE", ()), ("RENAME", ("a",)), ("KEYS", ()),
                      ("RANDOMKEY", ("x",)), ("DBSIZE", ("x",)), ("TOUCH", ()),
                      ("MOVE", ("a",)), ("COPY", ("a",)), ("SWAPDB", ("0",)), ("UNLINK", ())]:
        with pytest.raises(redis.ResponseError, match=arity(cmd.lower())):
            rr.execute_command(cmd, *args)



@requires_72
def test_unlink_frees_big_values_in_the_background(r):
    r.rpush("big", *range(1000))
    r.sadd("bigset", *range(1000))
    r.set("small", "v")
    before = r.info("memory").get("lazyfreed_objects", 0)
    assert r.unlink("big", "bigset", "small", "missing") == 3
    assert r.exists("big", "bigset", "small") == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if r.info("memory").get("lazyfreed_objects", 0) >= before + 2:
            break
        time.sleep(0.02)
    assert r.info("memory")["lazyfreed_objects"] >= before + 2
    assert r.info("memory")["lazyfree_pending_objects"] == 0
