"""Sorted-set commands: ZADD and friends, ranges, removal, pops, set algebra, ZSCAN.

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


def err(fn, *args):
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


def test_zadd_basic_and_flags(r):
    assert r.execute_command("ZADD", "z", 1, "a", 2, "b", 3, "c") == 3
    assert r.execute_command("ZADD", "z", 5, "a", 4, "d") == 1
    assert r.execute_command("ZADD", "z", "CH", 6, "a", 4, "d", 7, "e") == 2
    assert r.execute_command("ZADD", "z", "NX", 100, "a", 8, "f") == 1
    assert r.zscore("z", "a") == 6.0
    assert r.execute_command("ZADD", "z", "XX", 100, "a", 9, "g") == 0
    assert r.zscore("z", "a") == 100.0 and r.zscore("z", "g") is None
    assert r.execute_command("ZADD", "z", "GT", "CH", 50, "a", 200, "b") == 1
    assert r.zscore("z", "a") == 100.0 and r.zscore("z", "b") == 200.0
    assert r.execute_command("ZADD", "z", "LT", "CH", 50, "a", 300, "b") == 1
    assert r.zscore("z", "a") == 50.0 and r.zscore("z", "b") == 200.0
    # GT/LT still add new members.
    assert r.execute_command("ZADD", "z", "GT", 1, "new") == 1


def test_zadd_incr(rr):
    assert rr.execute_command("ZADD", "z", "INCR", 5, "a") == b"5"
    assert rr.execute_command("ZADD", "z", "INCR", "1.5", "a") == b"6.5"
    assert rr.execute_command("ZADD", "z", "NX", "INCR", 1, "a") is None
    assert rr.execute_command("ZADD", "z", "XX", "INCR", 1, "missing") is None
    assert rr.execute_command("ZADD", "z", "GT", "INCR", -1, "a") is None
    assert rr.execute_command("ZADD", "nokey", "XX", "INCR", 1, "a") is None
    assert rr.execute_command("ZADD", "nokey", "XX", 1, "a") == 0
    assert rr.exists("nokey") == 0
    assert rr.execute_command("ZADD", "z", "INCR", "+inf", "i") == b"inf"
    with pytest.raises(redis.ResponseError, match="resulting score is not a number"):
        rr.execute_command("ZADD", "z", "INCR", "-inf", "i")


def test_zadd_errors(r):
    assert err(r.execute_command, "ZADD", "z", "XX", "NX", 1, "a") == \
        "XX and NX options at the same time are not compatible"
    for opts in (("GT", "LT"), ("GT", "NX"), ("LT", "NX")):
        assert err(r.execute_command, "ZADD", "z", *opts, 1, "a") == \
            "GT, LT, and/or NX options at the same time are not compatible"
    assert err(r.execute_command, "ZADD", "z", "INCR", 1, "a", 2, "b") == \
        "INCR option supports a single increment-element pair"
    assert err(r.execute_command, "ZADD", "z", "nan", "a") == "value is not a valid float"
    assert err(r.execute_command, "ZADD", "z", "abc", "a") == "value is not a valid float"
    assert err(r.execute_command, "ZADD", "z", 1, "a", 2) == "syntax error"
    assert err(r.execute_command, "ZADD", "z", "NX") .startswith("wrong number")
    assert r.exists("z") == 0
    r.set("s", "v")
    assert err(r.execute_command, "ZADD", "s", 1, "a") == WRONGTYPE


def test_scores_and_card(r, r3, rr):
    r.zadd("z", {"a": 1.5, "b": -2, "c": float("inf")})
    assert rr.execute_command("ZSCORE", "z", "a") == b"1.5"
    assert rr.execute_command("ZSCORE", "z", "c") == b"inf"
    assert rr.execute_command("ZSCORE", "z", "x") is None
    assert rr.execute_command("ZMSCORE", "z", "a", "x", "b") == [b"1.5", None, b"-2"]
    assert rr.execute_command("ZMSCORE", "nokey", "a") == [None]
    assert r.zcard("z") == 3 and r.zcard("nokey") == 0
    assert r3.zscore("z", "a") == 1.5
    assert r3.execute_command("ZMSCORE", "z", "a", "x") == [1.5, None]
    assert rr.execute_command("ZINCRBY", "z", "2.5", "a") == b"4"
    assert rr.execute_command("ZINCRBY", "new", 3, "m") == b"3"
    assert err(rr.execute_command, "ZINCRBY", "z", "x", "a") == "value is not a valid float"
    r.set("s", "v")
    for c in (("ZSCORE", "s", "a"), ("ZCARD", "s"), ("ZMSCORE", "s", "a"),
              ("ZINCRBY", "s", 1, "a"), ("ZRANK", "s", "a"), ("ZRANGE", "s", 0, -1),
              ("ZREM", "s", "a"), ("ZPOPMIN", "s"), ("ZCOUNT", "s", 0, 1)):
        assert err(r.execute_command, *c) == WRONGTYPE


def test_rank(r, rr):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zrank("z", "a") == 0 and r.zrank("z", "c") == 2
    assert r.zrevrank("z", "a") == 2
    assert r.zrank("z", "x") is None and r.zrank("nokey", "x") is None


@requires_72
def test_rank_withscore(rr, rr3):
    rr.zadd("z", {"a": 1, "b": 2.5})
    assert rr.execute_command("ZRANK", "z", "b", "WITHSCORE") == [1, b"2.5"]
    assert rr.execute_command("ZREVRANK", "z", "b", "WITHSCORE") == [0, b"2.5"]
    assert rr.execute_command("ZRANK", "z", "x", "WITHSCORE") is None
    assert rr3.execute_command("ZRANK", "z", "b", "WITHSCORE") == [1, 2.5]
    assert err(rr.execute_command, "ZRANK", "z", "b", "foo") == "syntax error"


def test_zrange_forms(r, rr):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert rr.execute_command("ZRANGE", "z", 0, -1) == [b"a", b"b", b"c", b"d", b"e"]
    assert rr.execute_command("ZRANGE", "z", -2, 100, "WITHSCORES") == [b"d", b"4", b"e", b"5"]
    assert rr.execute_command("ZRANGE", "z", 3, 1) == []
    assert rr.execute_command("ZRANGE", "z", 0, 1, "REV") == [b"e", b"d"]
    assert rr.execute_command("ZREVRANGE", "z", 0, 1, "WITHSCORES") == [b"e", b"5", b"d", b"4"]
    assert rr.execute_command("ZRANGE", "z", "(1", "3", "BYSCORE") == [b"b", b"c"]
    assert rr.execute_command("ZRANGE", "z", "+inf", "(3", "BYSCORE", "REV") == [b"e", b"d"]
    assert rr.execute_command("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", 1, 2) == \
        [b"b", b"c"]
    assert rr.execute_command("ZRANGEBYSCORE", "z", 2, 4, "WITHSCORES", "LIMIT", 1, -1) == \
        [b"c", b"3", b"d", b"4"]
    assert rr.execute_command("ZREVRANGEBYSCORE", "z", 4, 2) == [b"d", b"c", b"b"]
    assert rr.execute_command("ZRANGEBYSCORE", "z", 5, 1) == []
    assert rr.execute_command("ZRANGEBYSCORE", "z", "(2", "(2") == []
    assert rr.execute_command("ZRANGE", "nokey", 0, -1) == []
    assert err(rr.execute_command, "ZRANGE", "z", 0, -1, "LIMIT", 0, 1).startswith(
        "syntax error, LIMIT is only supported")
    assert err(rr.execute_command, "ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES").startswith(
        "syntax error, WITHSCORES not supported")
    assert err(rr.execute_command, "ZRANGE", "z", "a", "b", "BYSCORE") == \
        "min or max is not a float"
    assert err(rr.execute_command, "ZRANGE", "z", "a", 1) == \
        "value is not an integer or out of range"
    assert err(rr.execute_command, "ZRANGEBYSCORE", "z", 0, 1, "BYLEX") == "syntax error"
    assert err(rr.execute_command, "ZRANGE", "z", 0, 1, "FOO") == "syntax error"


def test_zrange_resp3(r3, rr3):
    r3.zadd("z", {"a": 1, "b": 2.5})
    assert rr3.execute_command("ZRANGE", "z", 0, -1, "WITHSCORES") == [[b"a", 1.0], [b"b", 2.5]]
    assert rr3.execute_command("ZRANGE", "z", 0, -1) == [b"a", b"b"]
    assert rr3.execute_command("ZPOPMIN", "z") == [b"a", 1.0]
    assert rr3.execute_command("ZPOPMAX", "z", 1) == [[b"b", 2.5]]


def test_lex(r, rr):
    r.zadd("z", {m: 0 for m in "abcdefg"})
    assert rr.execute_command("ZRANGEBYLEX", "z", "-", "[c") == [b"a", b"b", b"c"]
    assert rr.execute_command("ZRANGEBYLEX", "z", "(b", "(e") == [b"c", b"d"]
    assert rr.execute_command("ZREVRANGEBYLEX", "z", "+", "(e") == [b"g", b"f"]
    assert rr.execute_command("ZRANGEBYLEX", "z", "-", "+", "LIMIT", 2, 2) == [b"c", b"d"]
    assert rr.execute_command("ZRANGE", "z", "[f", "-", "BYLEX", "REV", "LIMIT", 0, 1) == [b"f"]
    assert r.zlexcount("z", "[b", "[d") == 3
    assert r.zlexcount("z", "+", "-") == 0
    for bad in (("a", "[b"), ("[a", "b"), ("-a", "+")):
        assert err(r.execute_command, "ZLEXCOUNT", "z", *bad) == \
            "min or max not valid string range item"
        assert err(r.execute_command, "ZRANGEBYLEX", "z", *bad) == \
            "min or max not valid string range item"
    assert r.execute_command("ZREMRANGEBYLEX", "z", "[b", "(d") == 2
    assert r.zcard("z") == 5


def test_zcount(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "n": float("-inf")})
    assert r.zcount("z", "-inf", "+inf") == 4
    assert r.zcount("z", "(1", 3) == 2
    assert r.zcount("z", "(1", "(3") == 1
    assert r.zcount("nokey", 0, 1) == 0
    assert r.zcount("z", "(", 1) == 1  # strtod reads "" as 0
    assert err(r.execute_command, "ZCOUNT", "z", "(x", 1) == "min or max is not a float"
    assert err(r.execute_command, "ZCOUNT", "z", "nan", 1) == "min or max is not a float"


def test_zrem_and_remrange(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zrem("z", "a", "x", "a") == 1
    assert r.zremrangebyrank("z", 0, 0) == 1
    assert r.zrange("z", 0, -1) == [b"c", b"d", b"e"]
    assert r.zremrangebyscore("z", "(3", 4) == 1
    assert r.zremrangebyrank("z", 5, 10) == 0
    assert r.zremrangebyrank("z", 0, -1) == 2
    assert r.exists("z") == 0
    assert r.zrem("nokey", "a") == 0
    assert err(r.execute_command, "ZREMRANGEBYRANK", "z", "x", 1) == \
        "value is not an integer or out of range"


def test_pops(r, rr):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert rr.execute_command("ZPOPMIN", "z") == [b"a", b"1"]
    assert rr.execute_command("ZPOPMAX", "z", 5) == [b"c", b"3", b"b", b"2"]
    assert r.exists("z") == 0
    assert rr.execute_command("ZPOPMIN", "z") == []
    assert rr.execute_command("ZPOPMIN", "z", 0) == []
    assert err(rr.execute_command, "ZPOPMIN", "z", -1) == "value is out of range, must be positive"
    assert err(rr.execute_command, "ZPOPMIN", "z", 1, 2) == "syntax error"


def test_zmpop(rr):
    rr.zadd("b", {"x": 1, "y": 2, "z": 3})
    assert rr.execute_command("ZMPOP", 2, "a", "b", "MIN", "COUNT", 2) == \
        [b"b", [[b"x", b"1"], [b"y", b"2"]]]
    assert rr.execute_command("ZMPOP", 2, "a", "b", "MAX") == [b"b", [[b"z", b"3"]]]
    assert rr.execute_command("ZMPOP", 2, "a", "b", "MAX") is None
    assert err(rr.execute_command, "ZMPOP", 0, "a", "MIN") == "numkeys should be greater than 0"
    assert err(rr.execute_command, "ZMPOP", 1, "a", "MIN", "COUNT", 0) == \
        "count should be greater than 0"
    assert err(rr.execute_command, "ZMPOP", 3, "a", "MIN") == "syntax error"
    assert err(rr.execute_command, "ZMPOP", 1, "a", "MID") == "syntax error"


def test_zrangestore(r):
    r.zadd("src", {"a": 1, "b": 2, "c": 3})
    assert r.execute_command("ZRANGESTORE", "dst", "src", "(1", "+inf", "BYSCORE") == 2
    assert r.zrange("dst", 0, -1, withscores=True) == [(b"b", 2.0), (b"c", 3.0)]
    assert r.execute_command("ZRANGESTORE", "dst", "src", 5, 10) == 0
    assert r.exists("dst") == 0
    assert err(r.execute_command, "ZRANGESTORE", "dst", "src", 0, 1, "WITHSCORES") == \
        "syntax error"


def test_zrandmember(r, rr, rr3):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert rr.execute_command("ZRANDMEMBER", "z") in (b"a", b"b", b"c")
    assert rr.execute_command("ZRANDMEMBER", "nokey") is None
    assert rr.execute_command("ZRANDMEMBER", "nokey", 3) == []
    got = rr.execute_command("ZRANDMEMBER", "z", 2)
    assert len(got) == 2 and len(set(got)) == 2
    assert sorted(rr.execute_command("ZRANDMEMBER", "z", 10)) == [b"a", b"b", b"c"]
    assert len(rr.execute_command("ZRANDMEMBER", "z", -10)) == 10
    ws = rr.execute_command("ZRANDMEMBER", "z", -4, "WITHSCORES")
    assert len(ws) == 8
    for m, s in zip(ws[::2], ws[1::2]):
        assert {b"a": b"1", b"b": b"2", b"c": b"3"}[m] == s
    pairs = rr3.execute_command("ZRANDMEMBER", "z", 2, "WITHSCORES")
    assert len(pairs) == 2 and all(isinstance(p, list) and len(p) == 2 for p in pairs)
    assert rr.execute_command("ZRANDMEMBER", "z", 0) == []
    assert err(rr.execute_command, "ZRANDMEMBER", "z", 1, "FOO") == "syntax error"
    assert err(rr.execute_command, "ZRANDMEMBER", "z", "x") == \
        "value is not an integer or out of range"


def test_zscan(r):
    r.zadd("small", {"a": 1, "b": 2.5, "c": 3})
    cur, items = r.zscan("small", 0)
    assert cur == 0 and dict(items) == {b"a": 1.0, b"b": 2.5, b"c": 3.0}
    cur, items = r.zscan("small", 0, match="b*")
    assert items == [(b"b", 2.5)]
    r.zadd("big", {f"m{i}": i for i in range(500)})
    seen = {}
    cur = 0
    while True:
        cur, items = r.zscan("big", cur, count=50)
        seen.update(dict(items))
        if cur == 0:
            break
    assert len(seen) == 500 and seen[b"m42"] == 42.0
    assert r.zscan("nokey", 0) == (0, [])
    assert err(r.execute_command, "ZSCAN", "big", "x") == "invalid cursor"
    assert err(r.execute_command, "ZSCAN", "big", 0, "COUNT", 0) == "syntax error"


def test_encoding(r):
    r.zadd("z", {f"m{i}": i for i in range(128)})
    assert r.object("encoding", "z") == b"listpack"
    r.zadd("z", {"one-more": 1000})
    assert r.object("encoding", "z") == b"skiplist"
    r.zadd("long", {"x" * 65: 1})
    assert r.object("encoding", "long") == b"skiplist"
    assert r.zrange("z", 0, 2) == [b"m0", b"m1", b"m2"]
    assert r.zrank("z", "m100") == 100


def test_big_set_ops(r):
    import random as rnd
    rng = rnd.Random(7)
    model = {}
    pipe = r.pipeline(transaction=False)
    for i in range(3000):
        m = f"k{rng.randrange(2000)}"
        s = rng.randrange(100)
        model[m] = s
        pipe.zadd("z", {m: s})
    pipe.execute()
    order = sorted(model.items(), key=lambda kv: (kv[1], kv[0].encode()))
    assert r.zcard("z") == len(model)
    assert r.zrange("z", 100, 120) == [m.encode() for m, _ in order[100:121]]
    for idx in (0, 17, 500, len(order) - 1):
        assert r.zrank("z", order[idx][0]) == idx
    assert r.zcount("z", 10, "(20") == sum(1 for v in model.values() if 10 <= v < 20)


def test_setops(r, rr):
    r.zadd("a", {"x": 1, "y": 2, "z": 3})
    r.zadd("b", {"y": 10, "z": 20, "w": 30})
    assert rr.execute_command("ZUNION", 2, "a", "b", "WITHSCORES") == \
        [b"x", b"1", b"y", b"12", b"z", b"23", b"w", b"30"]
    assert rr.execute_command("ZINTER", 2, "a", "b", "WEIGHTS", 2, 1, "AGGREGATE", "MAX",
                              "WITHSCORES") == [b"y", b"10", b"z", b"20"]
    assert rr.execute_command("ZDIFF", 2, "a", "b", "WITHSCORES") == [b"x", b"1"]
    assert rr.execute_command("ZUNIONSTORE", "d", 2, "a", "b", "AGGREGATE", "MIN") == 4
    assert rr.execute_command("ZRANGE", "d", 0, -1, "WITHSCORES") == \
        [b"x", b"1", b"y", b"2", b"z", b"3", b"w", b"30"]
    assert rr.execute_command("ZINTERSTORE", "d", 2, "a", "nokey") == 0
    assert rr.exists("d") == 0
    assert rr.execute_command("ZDIFFSTORE", "d", 1, "a") == 3
    assert rr.execute_command("ZINTERCARD", 2, "a", "b") == 2
    assert rr.execute_command("ZINTERCARD", 2, "a", "b", "LIMIT", 1) == 1
    assert err(rr.execute_command, "ZINTERCARD", 2, "a", "b", "LIMIT", -1) == \
        "LIMIT can't be negative"
    assert err(rr.execute_command, "ZUNION", 0, "a") == \
        "at least 1 input key is needed for 'zunion' command"
    assert err(rr.execute_command, "ZUNION", 3, "a") == "syntax error"
    assert err(rr.execute_command, "ZUNION", 2, "a", "b", "WEIGHTS", 1, "x") == \
        "weight value is not a float"
    assert err(rr.execute_command, "ZUNION", 2, "a", "b", "AGGREGATE", "AVG") == "syntax error"
    assert err(rr.execute_command, "ZDIFF", 2, "a", "b", "WEIGHTS", 1, 2) == "syntax error"
    rr.set("s", "v")
    assert err(rr.execute_command, "ZUNION", 2, "a", "s") == WRONGTYPE


def test_big_counts_do_not_hang(rr):
    rr.zadd("z", {"a": 1})
    assert rr.execute_command("ZRANGE", "z", 0, 10**15) == [b"a"]
    assert rr.execute_command("ZPOPMIN", "z", 10**15) == [b"a", b"1"]
    rr.zadd("z", {"a": 1})
    assert rr.execute_command("ZRANDMEMBER", "z", 10**15) == [b"a"]
    assert rr.execute_command("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", 10**15, 10**15) == []


# ---------------------------------------------------------------------------
# Differential test against a private redis-server
# ---------------------------------------------------------------------------

def _random_command(rng: random.Random) -> list:
    keys = ["k1", "k2", "k3"]
    members = [f"m{i}" for i in range(12)] + ["a", "b", "ab", "abc"]
    scores = ["0", "1", "2", "-1", "1.5", "2.25", "-inf", "+inf", "10", "3"]
    bounds = ["-inf", "+inf", "0", "(1", "2", "(2.25", "1.5", "(0", "10"]
    lex = ["-", "+", "[a", "(a", "[m3", "(m5", "[b", "[m"]
    k = rng.choice(keys)
    m = lambda: rng.choice(members)  # noqa: E731
    c = rng.randrange(30)
    if c < 6:
        opts = rng.choice([[], [], ["NX"], ["XX"], ["GT"], ["LT"], ["CH"], ["GT", "CH"]])
        args = []
        for _ in range(rng.randrange(1, 4)):
            args += [rng.choice(scores), m()]
        return ["ZADD", k, *opts, *args]
    if c == 6:
        return ["ZADD", k, "INCR", rng.choice(["1", "-1", "0.5"]), m()]
    if c == 7:
        return ["ZINCRBY", k, rng.choice(["1", "2", "-0.5"]), m()]
    if c == 8:
        return ["ZSCORE", k, m()]
    if c == 9:
        return ["ZMSCORE", k, m(), m()]
    if c == 10:
        return ["ZCARD", k]
    if c == 11:
        return [rng.choice(["ZRANK", "ZREVRANK"]), k, m()]
    if c == 12:
        return ["ZCOUNT", k, rng.choice(bounds), rng.choice(bounds)]
    if c == 13:
        return ["ZLEXCOUNT", k, rng.choice(lex), rng.choice(lex)]
    if c == 14:
        extra = rng.choice([[], ["WITHSCORES"], ["REV"], ["REV", "WITHSCORES"]])
        return ["ZRANGE", k, str(rng.randrange(-6, 6)), str(rng.randrange(-6, 6)), *extra]
    if c == 15:
        extra = rng.choice([[], ["WITHSCORES"], ["LIMIT", "1", "2"], ["LIMIT", "0", "-1", "WITHSCORES"]])
        return [rng.choice(["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]), k, rng.choice(bounds),
                rng.choice(bounds), *extra]
    if c == 16:
        extra = rng.choice([[], ["LIMIT", "1", "3"]])
        return [rng.choice(["ZRANGEBYLEX", "ZREVRANGEBYLEX"]), k, rng.choice(lex),
                rng.choice(lex), *extra]
    if c == 17:
        return ["ZREM", k, m(), m()]
    if c == 18:
        return ["ZREMRANGEBYRANK", k, str(rng.randrange(-3, 3)), str(rng.randrange(-3, 3))]
    if c == 19:
        return ["ZREMRANGEBYSCORE", k, rng.choice(bounds), rng.choice(bounds)]
    if c == 20:
        return ["ZREMRANGEBYLEX", k, rng.choice(lex), rng.choice(lex)]
    if c == 21:
        return [rng.choice(["ZPOPMIN", "ZPOPMAX"]), k, *rng.choice([[], ["2"], ["0"]])]
    if c == 22:
        return ["ZRANGESTORE", rng.choice(keys), k, "0", str(rng.randrange(-2, 4))]
    if c == 23:
        op = rng.choice(["ZUNION", "ZINTER", "ZDIFF"])
        extra = [] if op == "ZDIFF" else rng.choice([[], ["WEIGHTS", "2", "1"], ["AGGREGATE", "MAX"]])
        return [op, "2", k, rng.choice(keys), *extra, "WITHSCORES"]
    if c == 24:
        op = rng.choice(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])
        return [op, rng.choice(keys), "2", k, rng.choice(keys)]
    if c == 25:
        return ["ZINTERCARD", "2", k, rng.choice(keys)]
    if c == 26:
        return ["ZMPOP", "2", k, rng.choice(keys), rng.choice(["MIN", "MAX"]), "COUNT", "2"]
    if c == 27:
        return ["ZSCAN", k, "0"]
    if c == 28:
        return ["ZADD", k, rng.choice(["nan", "x", "1"]), m(), *rng.choice([[], ["1"]])]
    return ["ZRANGE", k, rng.choice(bounds), rng.choice(bounds), "BYSCORE",
            *rng.choice([[], ["REV"], ["LIMIT", "1", "1"]])]


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
            for k in ("k1", "k2", "k3"):
                a = ref.cmd("ZRANGE", k, 0, -1, "WITHSCORES")
                b = ours.cmd("ZRANGE", k, 0, -1, "WITHSCORES")
                assert a == b
        ours.close()


# ---------------------------------------------------------------------------
# Plain sets as inputs of the set algebra (each member scores 1)
# ---------------------------------------------------------------------------

def test_setops_accept_plain_sets(r, rr):
    r.zadd("z", {"a": 5, "b": 2, "c": -1})
    r.sadd("s", "a", "c", "d")          # listpack set
    r.sadd("ints", 1, 2, 3)             # intset
    r.zadd("zi", {"2": 10, "3": 0.5, "9": 4})
    assert rr.execute_command("ZUNION", 2, "z", "s", "WITHSCORES") == \
        [b"c", b"0", b"d", b"1", b"b", b"2", b"a", b"6"]
    assert rr.execute_command("ZINTER", 2, "s", "z", "WEIGHTS", 3, 2, "AGGREGATE", "MAX",
                              "WITHSCORES") == [b"c", b"3", b"a", b"10"]
    assert rr.execute_command("ZDIFF", 2, "s", "z", "WITHSCORES") == [b"d", b"1"]
    assert rr.execute_command("ZDIFF", 2, "z", "s") == [b"b"]
    assert rr.execute_command("ZINTER", 2, "ints", "zi", "AGGREGATE", "MIN",
                              "WITHSCORES") == [b"3", b"0.5", b"2", b"1"]
    assert rr.execute_command("ZUNION", 1, "ints", "WITHSCORES") == \
        [b"1", b"1", b"2", b"1", b"3", b"1"]
    assert rr.execute_command("ZINTERCARD", 2, "ints", "zi") == 2
    assert rr.execute_command("ZINTERCARD", 3, "ints", "zi", "s") == 0
    assert rr.execute_command("ZUNIONSTORE", "d", 2, "s", "ints", "WEIGHTS", 2, "-1") == 6
    assert rr.type("d") == b"zset"
    assert rr.execute_command("ZRANGE", "d", 0, -1, "WITHSCORES") == \
        [b"1", b"-1", b"2", b"-1", b"3", b"-1", b"a", b"2", b"c", b"2", b"d", b"2"]
    assert rr.execute_command("ZINTERSTORE", "d", 2, "s", "ints") == 0
    assert rr.exists("d") == 0
    assert rr.execute_command("ZDIFFSTORE", "s", 2, "s", "z") == 1
    assert rr.type("s") == b"zset"
    assert rr.execute_command("ZRANGE", "s", 0, -1, "WITHSCORES") == [b"d", b"1"]
    rr.sadd("big", *range(600))         # hashtable set
    assert rr.execute_command("ZINTERCARD", 2, "big", "zi") == 3
    assert rr.execute_command("ZINTERCARD", 1, "big", "LIMIT", 7) == 7
    rr.rpush("l", "a")
    assert err(rr.execute_command, "ZUNION", 2, "z", "l") == WRONGTYPE
    assert err(rr.execute_command, "ZINTERCARD", 2, "ints", "l") == WRONGTYPE


def test_setops_plain_sets_resp3(r3):
    r3.sadd("s", "x")
    r3.zadd("z", {"x": 1.5})
    assert r3.execute_command("ZUNION", 2, "s", "z", "WITHSCORES") == [[b"x", 2.5]]


def _mixed_setop(rng: random.Random) -> list:
    keys = ["s1", "s2", "z1", "z2", "i1", "nokey"]
    n = rng.randrange(1, 4)
    srcs = [rng.choice(keys) for _ in range(n)]
    op = rng.choice(["ZUNION", "ZINTER", "ZDIFF", "ZUNIONSTORE", "ZINTERSTORE",
                     "ZDIFFSTORE", "ZINTERCARD"])
    extra = []
    if op in ("ZUNION", "ZINTER", "ZUNIONSTORE", "ZINTERSTORE"):
        if rng.random() < 0.6:
            extra += ["WEIGHTS"] + [rng.choice(["1", "2", "-1", "0.5", "0", "3"])
                                    for _ in range(n)]
        if rng.random() < 0.6:
            extra += ["AGGREGATE", rng.choice(["SUM", "MIN", "MAX"])]
    if op == "ZINTERCARD" and rng.random() < 0.5:
        extra += ["LIMIT", str(rng.randrange(0, 4))]
    if op.endswith("STORE"):
        return [op, rng.choice(["d1", "d2"]), str(n), *srcs, *extra]
    if op != "ZINTERCARD" and rng.random() < 0.7:
        extra.append("WITHSCORES")
    return [op, str(n), *srcs, *extra]


@pytest.mark.skipif(IS_REDIS, reason="differential test compares Ember with redis-server")
@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None, reason="redis-server missing")
@pytest.mark.parametrize("seed", [7, 8])
def test_differential_setops_with_plain_sets(server, r, seed):
    with reference_redis() as ref:
        ours = RawConn(server.port)
        rng = random.Random(seed)
        members = [f"m{i}" for i in range(10)] + [str(i) for i in range(8)]
        for resp in ("2", "3"):
            for c in (ref, ours):
                c.cmd("HELLO", resp)
                c.cmd("FLUSHALL")
            for i in range(300):
                if i % 40 == 0:
                    # Refill the inputs: sets (listpack and intset) and sorted sets.
                    setup = [["DEL", "s1", "s2", "z1", "z2", "i1"],
                             ["SADD", "s1", *rng.sample(members, 6)],
                             ["SADD", "s2", *rng.sample(members, 4)],
                             ["SADD", "i1", *rng.sample([str(i) for i in range(8)], 4)]]
                    for z in ("z1", "z2"):
                        pairs = []
                        for m in rng.sample(members, 7):
                            pairs += [rng.choice(["1", "2", "-3", "0.25", "7"]), m]
                        setup.append(["ZADD", z, *pairs])
                    for cmd in setup:
                        assert ref.cmd(*cmd) == ours.cmd(*cmd)
                cmd = _mixed_setop(rng)
                a = ref.cmd(*cmd)
                b = ours.cmd(*cmd)
                assert a == b, f"step {i} RESP{resp}: {cmd}: redis={a!r} ember={b!r}"
                if cmd[0].endswith("STORE"):
                    a = ref.cmd("ZRANGE", cmd[1], 0, -1, "WITHSCORES")
                    b = ours.cmd("ZRANGE", cmd[1], 0, -1, "WITHSCORES")
                    assert a == b, f"step {i}: stored {cmd}"
        ours.close()
