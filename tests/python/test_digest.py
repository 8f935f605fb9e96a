"""DEBUG DIGEST and DEBUG DIGEST-VALUE: equal to redis-server 7.0's for the same data of
every type, and unchanged by an AOF replay of a random mixed write workload.

The side-by-side tests load the same commands into Ember (the session server) and into a
private redis-server (started with `--enable-debug-command yes`); the AOF tests start their
own Embers in private directories.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time

import pytest
import redis

from helpers import (
    IS_REDIS, Proc, RespError, _redis_server_bin, make_client, reference_redis, wait_rewrite,
)

pytestmark = pytest.mark.skipif(IS_REDIS, reason="compares Ember with redis-server itself")

needs_redis = pytest.mark.skipif(shutil.which(_redis_server_bin()) is None,
                                 reason="redis-server not installed")

ZEROS = "0" * 40


# ---------------------------------------------------------------------------
# Ember and redis-server side by side
# ---------------------------------------------------------------------------

def dataset() -> dict[int, list[tuple]]:
    """Commands per database: every type and encoding, with and without expiry."""
    db0: list[tuple] = [
        # Strings: raw, embedded, integer-encoded, not-quite-integers, binary, long.
        ("SET", "str", "hello"),
        ("SET", "int", "12345"),
        ("SET", "neg", "-987654321"),
        ("SET", "i64max", "9223372036854775807"),
        ("SET", "huge", "123456789012345678901234567890"),
        ("SET", "lead0", "007"),
        ("SET", "plus", "+5"),
        ("SET", "empty", ""),
        ("SET", "bin", bytes(range(256))),
        ("SET", "long", "x" * 100),
        ("SET", "float", "1.5"),
        ("INCRBYFLOAT", "float", "0.1"),
        ("INCR", "counter"),
        ("INCRBY", "counter", "41"),
        ("APPEND", "app", "abc"),
        ("APPEND", "app", "def"),
        ("SETRANGE", "sr", "5", "xy"),
        ("SETBIT", "bits", "77", "1"),
        ("PFADD", "hll", "a", "b", "c"),
        ("SET", "str_ex", "v", "EX", "100000"),
        ("SET", "int_px", "42", "PX", "100000000"),
        # Lists: small, long (several quicklist nodes), integers, edited in place.
        ("RPUSH", "list", "a", "b", "c", "1", "-2", "300000"),
        ("RPUSH", "biglist", *[f"e{i}" if i % 3 else str(i) for i in range(400)]),
        ("RPUSH", "longelems", *["y" * 70 + str(i) for i in range(20)]),
        ("RPUSH", "edited", "a", "b", "c"),
        ("LINSERT", "edited", "BEFORE", "b", "x"),
        ("LSET", "edited", "0", "first"),
        ("LPUSH", "list_ex", "z", "y"),
        ("EXPIRE", "list_ex", "50000"),
        # Sets: intset, intset grown past its limit, listpack, hashtable, mixed.
        ("SADD", "iset", "1", "2", "3", "-5", "1000000", "9223372036854775807"),
        ("SADD", "bigiset", *[str(i * 7) for i in range(600)]),
        ("SADD", "lpset", "a", "b", "c", "10"),
        ("SADD", "bigset", *[f"m{i}" for i in range(200)]),
        ("SADD", "mixset", "1", "x", "007"),
        ("SADD", "set_ex", "p", "q"),
        ("PEXPIRE", "set_ex", "90000000"),
        # Sorted sets: listpack and skiplist, scores as %.17g sees them.
        ("ZADD", "zs", "1", "a", "2.5", "b", "-3", "c", "0.1", "d", "1e20", "e", "1e-5", "f",
         "inf", "g", "-inf", "h", "3.0000000000000004", "i", "12345", "20",
         "123456789012345678", "j", "0.0001", "k", "-0.5", "l"),
        ("ZADD", "zneg0", "-0", "m", "0", "n"),
        ("ZADD", "bigzs", *[x for i in range(200) for x in (repr(i / 7), f"m{i}")]),
        ("ZINCRBY", "bigzs", "0.3", "m5"),
        ("ZADD", "zs_ex", "1", "a"),
        ("EXPIRE", "zs_ex", "70000"),
        # Hashes: listpack (integer values too), hashtable, long values.
        ("HSET", "hash", "f1", "v1", "f2", "22", "f3", "-7"),
        ("HINCRBY", "hash", "f2", "3"),
        ("HINCRBYFLOAT", "hash", "fl", "2.25"),
        ("HSET", "bighash", *[x for i in range(200) for x in (f"f{i}", f"v{i}")]),
        ("HSET", "longhash", "f", "z" * 100),
        ("HSET", "hash_ex", "a", "1"),
        ("EXPIRE", "hash_ex", "80000"),
        # Streams: shared master fields, deletions, several nodes, groups, empty streams.
        ("XADD", "st", "1-1", "f", "v"),
        ("XADD", "st", "1-2", "f", "w"),
        ("XADD", "st", "2-0", "a", "1", "b", "2"),
        ("XADD", "st", "5-0", "f", "x", "g", "y"),
        ("XDEL", "st", "1-2"),
        ("XGROUP", "CREATE", "st", "grp", "0"),
        ("XADD", "bigst", "MAXLEN", "250", "1-0", "f", "0"),
        *[("XADD", "bigst", f"{i}-{i % 3}", "f", str(i), "g", "x" * (i % 5))
          for i in range(2, 300)],
        ("XTRIM", "bigst", "MAXLEN", "200"),
        ("XADD", "emptyst", "1-1", "f", "v"),
        ("XDEL", "emptyst", "1-1"),
        ("XGROUP", "CREATE", "mkst", "g", "$", "MKSTREAM"),
        ("XADD", "st_ex", "7-7", "k", "v"),
        ("EXPIRE", "st_ex", "60000"),
    ]
    db1 = [("SET", "str", "hello"), ("RPUSH", "list", "a"), ("SADD", "s", "1")]
    db9 = [("HSET", "h", "k", "v"), ("SET", "x", "1", "EX", "100000")]
    return {0: db0, 1: db1, 9: db9}


def both(ember, ref, *cmd):
    a, b = ember.cmd(*cmd), ref.cmd(*cmd)
    assert a == b, f"{cmd!r}: ember {a!r} != redis {b!r}"
    return a


def enc(k) -> str:
    return k.decode() if isinstance(k, bytes) else k


@needs_redis
def test_digests_equal_redis_for_every_type(raw):
    ember = raw()
    with reference_redis("--enable-debug-command", "yes") as ref:
        data = dataset()
        for db, cmds in data.items():
            both(ember, ref, "SELECT", db)
            for cmd in cmds:
                reply = both(ember, ref, *cmd)
                assert not isinstance(reply, RespError), (cmd, reply)
        both(ember, ref, "SELECT", 0)
        # The data really is there in every encoding the test means to cover.
        assert ref.cmd("OBJECT", "ENCODING", "int") == ember.cmd("OBJECT", "ENCODING", "int")
        assert ref.cmd("OBJECT", "ENCODING", "iset") == b"intset"
        assert ref.cmd("OBJECT", "ENCODING", "bigiset") == b"hashtable"
        assert ref.cmd("OBJECT", "ENCODING", "bigzs") == b"skiplist"
        assert ref.cmd("OBJECT", "ENCODING", "longhash") == b"hashtable"

        for db in data:
            both(ember, ref, "SELECT", db)
            keys = sorted(ember.cmd("KEYS", "*"))
            assert keys and keys == sorted(ref.cmd("KEYS", "*"))
            for k in keys:
                got = ember.cmd("DEBUG", "DIGEST-VALUE", k)
                want = ref.cmd("DEBUG", "DIGEST-VALUE", k)
                assert got == want, f"db {db} key {enc(k)!r} ({ref.cmd('TYPE', k)}): " \
                                    f"ember {got} != redis {want}"
                assert got[0] != ZEROS
            # Several keys at once, a missing one among them.
            multi = both(ember, ref, "DEBUG", "DIGEST-VALUE", *keys, "no-such-key")
            assert multi[-1] == ZEROS and len(multi) == len(keys) + 1
        both(ember, ref, "SELECT", 0)
        assert both(ember, ref, "DEBUG", "DIGEST-VALUE") == []
        digest = both(ember, ref, "DEBUG", "DIGEST")
        assert len(digest) == 40 and digest != ZEROS

        # An expiry changes the digest (only its presence counts); PERSIST restores it.
        before = both(ember, ref, "DEBUG", "DIGEST-VALUE", "str")
        both(ember, ref, "PEXPIRE", "str", "12345678")
        with_ttl = both(ember, ref, "DEBUG", "DIGEST-VALUE", "str")
        assert with_ttl != before
        both(ember, ref, "EXPIRE", "str", "99999")
        assert both(ember, ref, "DEBUG", "DIGEST-VALUE", "str") == with_ttl
        both(ember, ref, "PERSIST", "str")
        assert both(ember, ref, "DEBUG", "DIGEST-VALUE", "str") == before
        assert both(ember, ref, "DEBUG", "DIGEST") == digest

        # The same dataset in another database digests differently.
        both(ember, ref, "SWAPDB", "0", "2")
        assert both(ember, ref, "DEBUG", "DIGEST") != digest


@needs_redis
def test_empty_dataset_digest_is_zeros(raw):
    ember = raw()
    with reference_redis("--enable-debug-command", "yes") as ref:
        assert both(ember, ref, "DEBUG", "DIGEST") == ZEROS
        both(ember, ref, "SET", "k", "v")
        assert both(ember, ref, "DEBUG", "DIGEST") != ZEROS
        both(ember, ref, "DEL", "k")
        assert both(ember, ref, "DEBUG", "DIGEST") == ZEROS
        assert both(ember, ref, "DEBUG", "DIGEST-VALUE", "k") == [ZEROS]


def test_digest_arguments(raw):
    c = raw()
    assert isinstance(c.cmd("DEBUG", "DIGEST", "extra"), RespError)
    help_lines = c.cmd("DEBUG", "HELP")
    assert any(line.startswith("DIGEST-VALUE") for line in help_lines)
    assert c.cmd("DEBUG", "SLEEP", "0") == "OK"


# ---------------------------------------------------------------------------
# A random mixed workload, then an AOF replay
# ---------------------------------------------------------------------------

SCRIPTS = [
    # (body, key prefixes)
    ("redis.call('rpush', KEYS[1], ARGV[1]); return redis.call('lpop', KEYS[1])", ["l"]),
    ("redis.call('incrbyfloat', KEYS[1], ARGV[1]); "
     "return redis.call('expire', KEYS[1], 5000 + ARGV[1] * 0)", ["f"]),
    ("redis.call('spop', KEYS[1]); return redis.call('sadd', KEYS[1], ARGV[1])", ["S"]),
    ("return redis.call('xadd', KEYS[1], '*', 'k', ARGV[1])", ["x"]),
    ("redis.call('zpopmin', KEYS[1]); "
     "return redis.call('zadd', KEYS[1], ARGV[1], 'm' .. ARGV[1])", ["z"]),
    ("return redis.call('hincrbyfloat', KEYS[1], 'fl', ARGV[1])", ["h"]),
    ("redis.call('set', KEYS[1], ARGV[1], 'PX', 900000000); "
     "return redis.call('lmove', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')", ["s", "l", "l"]),
    ("redis.call('spop', KEYS[1], 2); redis.call('srandmember', KEYS[1]); "
     "return redis.call('del', KEYS[2])", ["S", "h"]),
]


class Workload:
    """Seeded random write commands over a few hundred keys of every type. The commands
    depend only on the seed, never on replies, so a run is reproducible."""

    PREFIXES = {"s": 40, "f": 20, "l": 40, "S": 40, "z": 40, "h": 40, "x": 30, "v": 6}

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.ops = [
            (12, self.string), (4, self.floats), (10, self.lists), (4, self.blocking),
            (8, self.sets), (8, self.zsets), (7, self.hashes), (6, self.streams),
            (8, self.generic), (3, self.multi), (4, self.script), (1, self.vectors),
        ]
        self.total = sum(w for w, _ in self.ops)

    def key(self, p: str) -> str:
        return f"{p}:{self.rng.randrange(self.PREFIXES[p])}"

    def val(self) -> str:
        r = self.rng.random()
        if r < 0.3:
            return str(self.rng.randrange(-1000, 100000))
        if r < 0.35:
            return "v" * self.rng.randrange(60, 90)
        return f"v{self.rng.randrange(10000)}"

    def ttl(self) -> list[str]:
        return self.rng.choice([["EX", str(self.rng.randrange(10_000, 100_000))],
                                ["PX", str(self.rng.randrange(10_000_000, 100_000_000))],
                                ["EXAT", str(int(time.time()) + 50_000)],
                                ["KEEPTTL"], []])

    def step(self, c: redis.Redis) -> None:
        n = self.rng.randrange(self.total)
        for w, op in self.ops:
            if n < w:
                return op(c)
            n -= w

    def run(self, c, *cmd):
        try:
            return c.execute_command(*cmd)
        except redis.ResponseError:
            return None

    # -- the families -------------------------------------------------------
    def string(self, c):
        k, v, rng = self.key("s"), self.val(), self.rng
        r = rng.random()
        if r < 0.4:
            extra = rng.choice([[], ["NX"], ["XX"], ["GET"]])
            self.run(c, "SET", k, v, *self.ttl(), *extra)
        elif r < 0.55:
            self.run(c, "APPEND", k, v)
        elif r < 0.65:
            self.run(c, "SETRANGE", k, rng.randrange(20), v)
        elif r < 0.75:
            self.run(c, "GETEX", k, *rng.choice([["EX", "40000"], ["PERSIST"],
                                                 ["PXAT", str(int(time.time() * 1000)
                                                              + 60_000_000)]]))
        elif r < 0.85:
            self.run(c, "SETEX", k, rng.randrange(10_000, 90_000), v)
        else:
            self.run(c, "GETDEL", k)

    def floats(self, c):
        k, rng = self.key("f"), self.rng
        if rng.random() < 0.8:
            self.run(c, "INCRBYFLOAT", k, repr(round(rng.uniform(-100, 100), rng.randrange(6))))
        else:
            self.run(c, "SET", k, repr(rng.uniform(-5, 5)), "KEEPTTL")

    def lists(self, c):
        k, rng = self.key("l"), self.rng
        r = rng.random()
        if r < 0.35:
            self.run(c, rng.choice(["LPUSH", "RPUSH"]), k,
                     *[self.val() for _ in range(rng.randrange(1, 6))])
        elif r < 0.5:
            self.run(c, rng.choice(["LPOP", "RPOP"]), k, *rng.choice([[], ["2"]]))
        elif r < 0.65:
            self.run(c, "LMOVE", k, self.key("l"), rng.choice(["LEFT", "RIGHT"]),
                     rng.choice(["LEFT", "RIGHT"]))
        elif r < 0.72:
            self.run(c, "LSET", k, rng.randrange(-3, 3), self.val())
        elif r < 0.8:
            self.run(c, "LINSERT", k, rng.choice(["BEFORE", "AFTER"]), self.val(), self.val())
        elif r < 0.87:
            self.run(c, "LREM", k, rng.randrange(-2, 3), self.val())
        elif r < 0.93:
            self.run(c, "LTRIM", k, rng.randrange(3), rng.randrange(-5, 20))
        else:
            self.run(c, "RPOPLPUSH", k, self.key("l"))

    def blocking(self, c):
        """A blocking pop served at once: its key was just given an element."""
        rng = self.rng
        if rng.random() < 0.6:
            k = self.key("l")
            self.run(c, "RPUSH", k, self.val())
            cmd = rng.choice([["BLPOP", k, "5"], ["BRPOP", self.key("l"), k, "5"],
                              ["BLMOVE", k, self.key("l"), "LEFT", "RIGHT", "5"],
                              ["BLMPOP", "5", "2", self.key("l"), k, "LEFT", "COUNT", "2"]])
        else:
            k = self.key("z")
            self.run(c, "ZADD", k, rng.randrange(100), self.val())
            cmd = rng.choice([["BZPOPMIN", k, "5"], ["BZPOPMAX", self.key("z"), k, "5"],
                              ["BZMPOP", "5", "1", k, "MIN", "COUNT", "2"]])
        self.run(c, *cmd)

    def sets(self, c):
        k, rng = self.key("S"), self.rng
        r = rng.random()
        if r < 0.4:
            ints = rng.random() < 0.5
            members = [str(rng.randrange(-50, 600)) if ints else self.val()
                       for _ in range(rng.randrange(1, 8))]
            self.run(c, "SADD", k, *members)
        elif r < 0.6:
            self.run(c, "SPOP", k, *rng.choice([[], [str(rng.randrange(1, 5))]]))
        elif r < 0.75:
            self.run(c, "SREM", k, self.val(), str(rng.randrange(-50, 600)))
        elif r < 0.85:
            self.run(c, "SMOVE", k, self.key("S"), str(rng.randrange(-50, 600)))
        else:
            self.run(c, rng.choice(["SUNIONSTORE", "SINTERSTORE", "SDIFFSTORE"]),
                     self.key("S"), k, self.key("S"))

    def score(self) -> str:
        rng = self.rng
        return rng.choice([str(rng.randrange(-100, 100)), repr(rng.uniform(-1e6, 1e6)),
                           repr(rng.random() / 3), "inf", "-inf", "1e-7"])

    def zsets(self, c):
        k, rng = self.key("z"), self.rng
        r = rng.random()
        if r < 0.4:
            self.run(c, "ZADD", k, *[x for _ in range(rng.randrange(1, 5))
                                     for x in (self.score(), self.val())])
        elif r < 0.55:
            self.run(c, "ZINCRBY", k, repr(rng.uniform(-10, 10)), self.val())
        elif r < 0.7:
            self.run(c, rng.choice(["ZPOPMIN", "ZPOPMAX"]), k, *rng.choice([[], ["2"]]))
        elif r < 0.8:
            self.run(c, "ZREM", k, self.val())
        elif r < 0.87:
            self.run(c, "ZREMRANGEBYRANK", k, 0, rng.randrange(3))
        elif r < 0.94:
            self.run(c, "ZUNIONSTORE", self.key("z"), 2, k, self.key("z"))
        else:
            self.run(c, "ZADD", k, "INCR", self.score(), self.val())

    def hashes(self, c):
        k, rng = self.key("h"), self.rng
        r = rng.random()
        f = f"f{rng.randrange(30)}"
        if r < 0.45:
            self.run(c, "HSET", k, *[x for _ in range(rng.randrange(1, 5))
                                     for x in (f"f{rng.randrange(30)}", self.val())])
        elif r < 0.6:
            self.run(c, "HINCRBYFLOAT", k, "fl", repr(round(rng.uniform(-50, 50), 3)))
        elif r < 0.7:
            self.run(c, "HINCRBY", k, "n", rng.randrange(-100, 100))
        elif r < 0.85:
            self.run(c, "HDEL", k, f, f"f{rng.randrange(30)}")
        else:
            self.run(c, "HSETNX", k, f, self.val())

    def streams(self, c):
        k, rng = self.key("x"), self.rng
        r = rng.random()
        if r < 0.65:
            trim = rng.choice([[], [], ["MAXLEN", "~", "20"], ["MAXLEN", "15"]])
            fields = [x for i in range(rng.randrange(1, 4)) for x in (f"f{i}", self.val())]
            self.run(c, "XADD", k, *trim, "*", *fields)
        elif r < 0.8:
            entries = self.run(c, "XRANGE", k, "-", "+", "COUNT", 3) or []
            if entries:
                self.run(c, "XDEL", k, entries[rng.randrange(len(entries))][0])
        elif r < 0.9:
            self.run(c, "XTRIM", k, "MAXLEN", rng.randrange(5, 30))
        else:
            self.run(c, "XGROUP", "CREATE", k, "g", "$", "MKSTREAM")

    def generic(self, c):
        rng = self.rng
        p = rng.choice(list(self.PREFIXES))
        k = self.key(p)
        r = rng.random()
        if r < 0.2:
            self.run(c, "EXPIRE", k, rng.randrange(10_000, 100_000))
        elif r < 0.35:
            self.run(c, "PEXPIRE", k, rng.randrange(10_000_000, 100_000_000))
        elif r < 0.42:
            self.run(c, "EXPIREAT", k, int(time.time()) + rng.randrange(10_000, 100_000))
        elif r < 0.55:
            self.run(c, "PERSIST", k)
        elif r < 0.65:
            self.run(c, rng.choice(["DEL", "UNLINK"]), k)
        elif r < 0.8:
            self.run(c, rng.choice(["RENAME", "RENAMENX"]), k, self.key(p))
        else:
            self.run(c, "COPY", k, self.key(p), *rng.choice([[], ["REPLACE"]]))

    def multi(self, c):
        p = c.pipeline(transaction=True)
        for _ in range(self.rng.randrange(2, 5)):
            self.rng.choice([self.string, self.lists, self.sets, self.zsets, self.hashes,
                             self.floats, self.generic])(p)
        try:
            p.execute(raise_on_error=False)
        except redis.ResponseError:
            pass

    def script(self, c):
        body, prefixes = self.rng.choice(SCRIPTS)
        keys = [self.key(p) for p in prefixes]
        arg = str(self.rng.randrange(1, 50))
        self.run(c, "EVAL", body, len(keys), *keys, arg)

    def vectors(self, c):
        k, rng = self.key("v"), self.rng
        if rng.random() < 0.8:
            attr = ["SETATTR", f'{{"n": {rng.randrange(9)}}}'] if rng.random() < 0.3 else []
            self.run(c, "VADD", k, "VALUES", 3, *[repr(rng.uniform(-1, 1)) for _ in range(3)],
                     f"e{rng.randrange(20)}", *attr)
        else:
            self.run(c, "VREM", k, f"e{rng.randrange(20)}")


DBS = (0, 3)


def snapshot(port: int) -> tuple[str, dict]:
    """DEBUG DIGEST, and per key: DEBUG DIGEST-VALUE, TYPE and PEXPIRETIME."""
    out = {}
    for db in DBS:
        c = make_client(port, db=db, raw=True)
        keys = sorted(c.keys("*"))
        if keys:
            digests = c.execute_command("DEBUG", "DIGEST-VALUE", *keys)
            for k, d in zip(keys, digests):
                out[(db, k.decode())] = (d, c.type(k), c.pexpiretime(k))
        c.close()
    c = make_client(port, raw=True)
    digest = c.execute_command("DEBUG", "DIGEST")
    c.close()
    return digest, out


def aof_commands(workdir: str, key: str) -> list[list[bytes]]:
    """The commands of the AOF's incremental files that name `key` (for failure reports)."""
    d = os.path.join(workdir, "appendonlydir")
    out = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".incr.aof"):
            continue
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            end = data.index(b"\r\n", pos)
            if data[pos:pos + 1] == b"#":  # an annotation (Ember's #NOW:<ns>)
                pos = end + 2
                continue
            n, pos, args = int(data[pos + 1:end]), end + 2, []
            for _ in range(n):
                end = data.index(b"\r\n", pos)
                ln = int(data[pos + 1:end])
                args.append(data[end + 2:end + 2 + ln])
                pos = end + 2 + ln + 2
            if key.encode() in args or args[0].upper() in (b"SELECT", b"MULTI", b"EXEC"):
                out.append(args)
    return out


def diff_report(before: dict, after: dict, workdir: str) -> str:
    bad = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    lines = [f"{len(bad)} keys differ"]
    for db, key in bad[:5]:
        lines.append(f"db {db} key {key!r}: original {before.get((db, key))} "
                     f"replayed {after.get((db, key))}")
        cmds = [c for c in aof_commands(workdir, key) if key.encode() in c]
        lines += ["    AOF: " + " ".join(a.decode(errors="replace") for a in c)
                  for c in cmds[-15:]]
    return "\n".join(lines)


@pytest.fixture
def workdirs():
    dirs = [tempfile.mkdtemp(prefix="ember-digest-") for _ in range(2)]
    yield dirs
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("seed,rewrite", [(1, "none"), (2, "rdb-base"), (3, "aof-base")])
def test_aof_replay_keeps_every_digest(workdirs, seed, rewrite):
    """A few thousand random writes on two databases (with a rewrite halfway for the
    `*-base` cases), then a fresh Ember on a copy of the AOF directory: the dataset digest
    and every key's digest, type and deadline are the original's."""
    src, dst = workdirs
    preamble = "no" if rewrite == "aof-base" else "yes"
    e = Proc("ember", src, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble)
    clients = {db: make_client(e.port, db=db, raw=True) for db in DBS}
    w = Workload(seed)
    steps = 3000
    for i in range(steps):
        w.step(clients[0] if w.rng.random() < 0.85 else clients[3])
        if rewrite != "none" and i == steps // 2:
            plain = e.client()
            assert plain.bgrewriteaof()
            wait_rewrite(plain)
            plain.close()
    digest, keys = snapshot(e.port)
    assert len(keys) > 150, len(keys)
    assert digest != ZEROS.encode()
    for c in clients.values():
        c.close()
    e.shutdown()

    shutil.copytree(os.path.join(src, "appendonlydir"), os.path.join(dst, "appendonlydir"))
    f = Proc("ember", dst, "--appendonly", "yes")
    digest2, keys2 = snapshot(f.port)
    f.shutdown()
    assert keys2 == keys, diff_report(keys, keys2, src)
    assert digest2 == digest
