"""SORT and SORT_RO: numeric and ALPHA sorting, BY/GET patterns, LIMIT, STORE, errors.

Validated against redis-server (EMBER_SERVER=redis); the differential test at the end
replays a seeded random sequence of SORT commands over random lists, sets and sorted
sets (numbers and strings) with string and hash keys for BY/GET, on a private
redis-server and on the server under test, and compares every raw reply.
"""

from __future__ import annotations

import random
import shutil

import pytest
import redis

from helpers import IS_REDIS, RawConn, _redis_server_bin, reference_redis

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_DOUBLE = "One or more scores can't be converted into double"


def err(fn, *args):
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


def test_numeric_and_alpha(rr):
    rr.rpush("l", 3, 1, 2, 10, "-1.5", "1e1")
    assert rr.sort("l") == [b"-1.5", b"1", b"2", b"3", b"10", b"1e1"]
    assert rr.sort("l", desc=True) == [b"1e1", b"10", b"3", b"2", b"1", b"-1.5"]
    assert rr.sort("l", alpha=True) == [b"-1.5", b"1", b"10", b"1e1", b"2", b"3"]
    assert rr.sort("l", start=1, num=2) == [b"1", b"2"]
    assert rr.execute_command("SORT", "l", "LIMIT", 4, 100) == [b"10", b"1e1"]
    assert rr.execute_command("SORT", "l", "LIMIT", -5, 2) == [b"-1.5", b"1"]
    assert rr.execute_command("SORT", "l", "LIMIT", 10, 2) == []
    assert rr.execute_command("SORT", "l", "LIMIT", 0, 0) == []
    assert rr.execute_command("SORT", "l", "LIMIT", 0, -1) == rr.sort("l")
    rr.rpush("w", "a", "b")
    assert err(rr.sort, "w") == NOT_DOUBLE
    assert rr.sort("w", alpha=True) == [b"a", b"b"]
    rr.rpush("e", "", " 2", "0x10", "inf", "-inf")
    assert rr.sort("e") == [b"-inf", b"", b" 2", b"0x10", b"inf"]
    rr.rpush("n", "nan")
    assert err(rr.sort, "n") == NOT_DOUBLE
    assert rr.sort("missing") == []


def test_sets_and_zsets(rr):
    rr.sadd("s", 5, 3, 9, "-2")
    assert rr.sort("s") == [b"-2", b"3", b"5", b"9"]
    assert rr.sort("s", desc=True, start=0, num=2) == [b"9", b"5"]
    # BY nosort on a set with STORE sorts ALPHA for determinism.
    assert rr.execute_command("SORT", "s", "BY", "nosort", "STORE", "d") == 4
    assert rr.lrange("d", 0, -1) == [b"-2", b"3", b"5", b"9"]
    rr.zadd("z", {"c": 1, "a": 3, "b": 2})
    assert rr.sort("z", alpha=True) == [b"a", b"b", b"c"]
    assert rr.execute_command("SORT", "z", "BY", "nosort") == [b"c", b"b", b"a"]
    assert rr.execute_command("SORT", "z", "BY", "nosort", "DESC") == [b"a", b"b", b"c"]
    assert rr.execute_command("SORT", "z", "BY", "nosort", "LIMIT", 1, 1) == [b"b"]
    assert rr.execute_command("SORT", "z", "BY", "nosort", "DESC", "LIMIT", 1, 5) == \
        [b"b", b"c"]
    assert err(rr.sort, "z") == NOT_DOUBLE
    rr.rpush("l", "x", "y", "z")
    assert rr.execute_command("SORT", "l", "BY", "nosort", "DESC", "LIMIT", 1, 1) == [b"y"]


def test_by_and_get(rr):
    rr.rpush("l", 1, 2, 3)
    rr.mset({"w_1": 30, "w_2": 10, "w_3": 20, "o_1": "one", "o_3": "three"})
    rr.hset("h_1", mapping={"f": "b", "n": 5})
    rr.hset("h_2", mapping={"f": "a", "n": 9})
    assert rr.sort("l", by="w_*") == [b"2", b"3", b"1"]
    assert rr.sort("l", by="w_*", desc=True) == [b"1", b"3", b"2"]
    assert rr.sort("l", by="h_*->f", alpha=True) == [b"3", b"2", b"1"]
    assert rr.sort("l", by="h_*->n", desc=True) == [b"2", b"1", b"3"]
    assert rr.sort("l", by="w_*", get=["o_*", "#", "h_*->f"]) == \
        [None, b"2", b"a", b"three", b"3", None, b"one", b"1", b"b"]
    # A GET pattern without '*' never matches; BY without '*' does not sort.
    assert rr.sort("l", get="o_1") == [None, None, None]
    assert rr.sort("l", by="w_1", desc=True) == [b"3", b"2", b"1"]
    # A string read as a hash (and the reverse) is missing.
    assert rr.sort("l", get=["w_*->f", "h_*"]) == [None] * 6
    # Missing BY keys score 0 (ties by element).
    assert rr.sort("l", by="nokey_*", desc=True) == [b"3", b"2", b"1"]
    rr.set("w_2", "x")
    assert err(rr.sort, "l", None, None, "w_*") == NOT_DOUBLE


def test_store(rr):
    rr.rpush("l", 2, 1)
    rr.set("o_1", "one")
    rr.set("d", "old")
    rr.expire("d", 100)
    assert rr.sort("l", store="d") == 2
    assert rr.lrange("d", 0, -1) == [b"1", b"2"]
    assert rr.ttl("d") == -1
    assert rr.sort("l", get=["o_*", "#"], store="d") == 4
    assert rr.lrange("d", 0, -1) == [b"one", b"1", b"", b"2"]
    assert rr.sort("l", store="l") == 2
    assert rr.lrange("l", 0, -1) == [b"1", b"2"]
    assert rr.sort("nokey", store="d") == 0
    assert rr.exists("d") == 0
    assert rr.execute_command("SORT", "l", "LIMIT", 0, 0, "STORE", "d") == 0
    assert rr.exists("d") == 0


def test_errors_and_sort_ro(rr):
    rr.rpush("l", 2, 1)
    rr.set("str", "x")
    rr.hset("h", "f", "v")
    assert err(rr.sort, "str") == WRONGTYPE
    assert err(rr.sort, "h") == WRONGTYPE
    assert err(rr.execute_command, "SORT", "l", "FOO") == "syntax error"
    assert err(rr.execute_command, "SORT", "l", "LIMIT", 1) == "syntax error"
    assert err(rr.execute_command, "SORT", "l", "BY") == "syntax error"
    assert err(rr.execute_command, "SORT", "l", "LIMIT", "x", 1) == \
        "value is not an integer or out of range"
    assert err(rr.execute_command, "SORT") == \
        "wrong number of arguments for 'sort' command"
    # Syntax errors come before the type check.
    assert err(rr.execute_command, "SORT", "str", "FOO") == "syntax error"
    assert rr.execute_command("SORT_RO", "l") == [b"1", b"2"]
    assert rr.execute_command("SORT_RO", "l", "BY", "nosort", "GET", "#", "DESC") == \
        [b"1", b"2"]
    assert err(rr.execute_command, "SORT_RO", "l", "STORE", "d") == "syntax error"
    assert err(rr.execute_command, "SORT_RO", "str") == WRONGTYPE


def test_store_keyword_without_value(rr):
    rr.rpush("l", 2, 1)
    assert err(rr.execute_command, "SORT", "l", "STORE") == "syntax error"


def test_command_info(rr):
    info = rr.execute_command("COMMAND", "INFO", "sort", "sort_ro")
    assert info[0][0] == b"sort" and info[0][1] == -2
    assert set(info[0][2]) >= {b"write", b"denyoom", b"movablekeys"}
    assert info[1][0] == b"sort_ro" and info[1][1] == -2
    assert b"readonly" in info[1][2]
    assert info[0][3:6] == [1, 1, 1]
    assert rr.execute_command("COMMAND", "GETKEYS", "SORT_RO", "l") == [b"l"]


def test_resp3(rr3):
    rr3.rpush("l", 2, 1)
    assert rr3.execute_command("SORT", "l", "GET", "nokey_*") == [None, None]
    assert rr3.execute_command("SORT", "l") == [b"1", b"2"]


# ---------------------------------------------------------------------------
# Differential test against a private redis-server
# ---------------------------------------------------------------------------

NUMS = ["1", "2", "3", "-1", "0", "1.5", "10", "-20", "7", "2.25", "100", "-0.5", "42"]
STRS = ["a", "b", "c", "ab", "abc", "B", "zz", "m", "x1", "y"]


def _setup(rng: random.Random) -> list:
    cmds = [["FLUSHDB"]]
    pool = rng.choice([NUMS, STRS, NUMS + STRS[:2]])
    elems = set()
    l = [rng.choice(pool) for _ in range(rng.randrange(0, 10))]
    if l:
        cmds.append(["RPUSH", "l", *l])
    s = rng.sample(pool, rng.randrange(0, min(9, len(pool))))
    if s:
        cmds.append(["SADD", "s", *s])
    z = rng.sample(pool, rng.randrange(0, min(9, len(pool))))
    if z:
        pairs = []
        for m in z:
            pairs += [rng.choice(["1", "2", "0", "-1", "5"]), m]
        cmds.append(["ZADD", "z", *pairs])
    elems.update(l, s, z)
    uniq = list(range(len(elems)))
    rng.shuffle(uniq)
    for e, u in zip(sorted(elems), uniq):
        if rng.random() < 0.8:
            cmds.append(["SET", f"w_{e}", rng.choice(["1", "2", "3", "-4", "0.5", "8"])])
        # Unique values: ALPHA BY compares these, and Redis breaks no ALPHA BY tie.
        cmds.append(["SET", f"u_{e}", f"k{u:03d}"])
        if rng.random() < 0.7:
            cmds.append(["HSET", f"h_{e}", "f", f"v{u}", "n", rng.choice(["5", "-1", "3"])])
        if rng.random() < 0.5:
            cmds.append(["SET", f"o_{e}", f"obj-{e}"])
    if rng.random() < 0.3:
        cmds.append(["SET", "w_" + rng.choice(NUMS), "notanumber"])
    return cmds


def _random_sort(rng: random.Random) -> list:
    src = rng.choice(["l", "l", "s", "z", "nokey"])
    ro = rng.random() < 0.2
    store = not ro and rng.random() < 0.3
    alpha = rng.random() < 0.4
    gets = [rng.choice(["#", "o_*", "h_*->f", "h_*->n", "w_*", "o_1", "w_*->f", "h_*->"])
            for _ in range(rng.choice([0, 0, 1, 2, 3]))]
    by = None
    r = rng.random()
    if r < 0.3:
        # ALPHA BY: Redis leaves ties in an unspecified order, so ALPHA sorts by the
        # u_* keys, unique per element.
        by = "u_*" if alpha else rng.choice(["w_*", "h_*->n", "nokey_*"])
    elif r < 0.45 and (src != "s" or store):
        # No sorting: native order (a set's order is unspecified unless STOREd).
        by = rng.choice(["nosort", "w_1", "#"])
    opts = []
    if by:
        opts.append(["BY", by])
    if alpha:
        opts.append(["ALPHA"])
    if rng.random() < 0.5:
        opts.append([rng.choice(["ASC", "DESC"])])
    if rng.random() < 0.4:
        opts.append(["LIMIT", str(rng.randrange(-2, 8)), str(rng.randrange(-2, 6))])
    opts += [["GET", g] for g in gets]
    if store:
        # Storing over the source keeps its elements (and their u_* keys) only without GET.
        opts.append(["STORE", "dst" if gets or rng.random() < 0.5 else "l"])
    rng.shuffle(opts)
    cmd = ["SORT_RO" if ro else "SORT", src]
    for o in opts:
        cmd += o
    return cmd


@pytest.mark.skipif(IS_REDIS, reason="differential test compares Ember with redis-server")
@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None, reason="redis-server missing")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_differential_against_redis(server, r, seed):
    with reference_redis() as ref:
        ours = RawConn(server.port)
        rng = random.Random(seed)
        for resp in ("2", "3"):
            ref.cmd("HELLO", resp)
            ours.cmd("HELLO", resp)
            for i in range(300):
                if i % 15 == 0:
                    for c in _setup(rng):
                        assert ref.cmd(*c) == ours.cmd(*c), c
                cmd = _random_sort(rng)
                a = ref.cmd(*cmd)
                b = ours.cmd(*cmd)
                assert a == b, f"step {i} RESP{resp}: {cmd}: redis={a!r} ember={b!r}"
                if "STORE" in cmd:
                    dst = cmd[cmd.index("STORE") + 1]
                    a = ref.cmd("LRANGE", dst, 0, -1)
                    b = ours.cmd("LRANGE", dst, 0, -1)
                    assert a == b, f"step {i}: stored {cmd}"
                    assert ref.cmd("EXISTS", dst) == ours.cmd("EXISTS", dst)
        ours.close()


def test_sort_getkeys_and_acl_categories(raw):
    c = raw()
    assert c.cmd("COMMAND", "GETKEYS", "SORT", "src", "BY", "w_*", "LIMIT", "0", "1",
                 "GET", "#", "STORE", "dst") == [b"src", b"dst"]
    assert c.cmd("COMMAND", "GETKEYS", "SORT", "src", "STORE", "a", "STORE", "b") == [
        b"src", b"b"]
    assert c.cmd("COMMAND", "GETKEYS", "SORT", "src") == [b"src"]
    info = c.cmd("COMMAND", "INFO", "sort", "sort_ro")
    cats = {}
    for entry in info:
        cats[entry[0]] = {x.decode() if isinstance(x, bytes) else x for x in entry[6]}
    assert cats[b"sort"] == {"@write", "@set", "@sortedset", "@list", "@slow", "@dangerous"}
    assert cats[b"sort_ro"] == {"@read", "@set", "@sortedset", "@list", "@slow",
                                "@dangerous"}
