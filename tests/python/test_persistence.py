"""Persistence interchange with a real redis-server (7.0): DUMP payloads and dump.rdb
files move both ways, and every type reads back the same (values, encodings big and
small, TTLs, streams with consumer groups and pending entries, HLLs byte for byte).

The peer is Debian's redis-server; the tests skip when it is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest
import redis

from helpers import HOST, ServerProcess, _redis_server_bin, free_port, make_client

pytestmark = pytest.mark.skipif(shutil.which(_redis_server_bin()) is None,
                                reason="redis-server not installed")


class RedisAt:
    """A redis-server whose working directory is `workdir` (it loads dump.rdb there)."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.port = free_port()
        self.proc = subprocess.Popen(
            [_redis_server_bin(), "--port", str(self.port), "--bind", HOST, "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                c = make_client(self.port)
                c.ping()
                c.close()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.proc.poll() is not None:
                    raise RuntimeError("redis-server exited during start-up")
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def client(self, **kw) -> redis.Redis:
        return make_client(self.port, **kw)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workdirs():
    made = []

    def make() -> str:
        d = tempfile.mkdtemp(prefix="ember-persist-")
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def peer(workdirs):
    p = RedisAt(workdirs())
    yield p
    p.stop()


@pytest.fixture
def ember_at(workdirs):
    started = []

    def start(workdir: str | None = None) -> ServerProcess:
        srv = ServerProcess(("--save", ""))
        if workdir is not None:
            for name in os.listdir(workdir):
                if name.endswith(".rdb"):
                    shutil.copy(os.path.join(workdir, name), srv.workdir)
        started.append(srv)
        srv.start()
        return srv

    yield start
    for s in started:
        s.stop()


def populate(c: redis.Redis) -> None:
    """One key per type and encoding (small/listpack, large/hashtable, intset, quicklist
    with several nodes, LZF-compressible strings, streams with groups), some with TTLs,
    and a key in db 2."""
    c.set("s:small", "hello")
    c.set("s:int", "12345")
    c.set("s:neg", "-7")
    c.set("s:maxint", str(2**63 - 1))
    c.set("s:big", "ab" * 5000)
    c.set("s:bin", bytes(range(256)))
    c.set("s:empty", "")
    c.set("s:float", "3.14")
    c.rpush("l:small", "a", "b", "3", "-4")
    c.rpush("l:big", *[f"item-{i}" * (1 + i % 7) for i in range(3000)])
    c.rpush("l:huge-elem", "x" * 20000, "y", "z" * 9000)
    c.sadd("set:ints", 1, 2, 3, -5, 2**40)
    c.sadd("set:bigints", *range(1000))
    c.sadd("set:small", "a", "b", "c")
    c.sadd("set:big", *[f"m{i}" for i in range(700)])
    c.hset("h:small", mapping={"f1": "v1", "f2": "2", "f3": ""})
    c.hset("h:big", mapping={f"field{i}": f"value{i}" * (i % 5) for i in range(1000)})
    c.hset("h:bigval", mapping={"k": "v" * 5000})
    c.zadd("z:small", {"a": 1.5, "b": -2, "c": float("inf"), "d": float("-inf"), "e": 0})
    c.zadd("z:big", {f"m{i}": i / 7 for i in range(500)})
    c.zadd("z:tiny", {"x": 1e-300, "y": 123456789.123456789})
    c.geoadd("geo", (13.361389, 38.115556, "Palermo"), (15.087269, 37.502669, "Catania"))
    c.pfadd("hll:sparse", "a", "b", "c")
    c.pfadd("hll:dense", *[f"e{i}" for i in range(5000)])
    c.setbit("bits", 1000, 1)
    c.setbit("bits", 7, 1)
    # Streams: several listpack nodes, deletions, groups, consumers, pending entries.
    for i in range(300):
        c.xadd("st:big", {"n": i, "payload": "p" * (i % 30)}, id=f"{1000 + i}-{i % 3}")
    c.xdel("st:big", "1010-1", "1011-2")
    c.xgroup_create("st:big", "g1", id="0")
    c.xgroup_create("st:big", "g2", id="1100-0")
    c.xreadgroup("g1", "alice", {"st:big": ">"}, count=5)
    c.xreadgroup("g1", "bob", {"st:big": ">"}, count=3)
    c.xreadgroup("g2", "carol", {"st:big": ">"}, count=2)
    c.xack("st:big", "g1", "1000-0")
    c.xclaim("st:big", "g1", "bob", 0, ["1001-1"])
    c.xadd("st:small", {"a": "1"}, id="5-5")
    c.xadd("st:empty", {"a": "1"}, id="7-0")
    c.xdel("st:empty", "7-0")
    c.xgroup_create("st:empty", "g", id="$")
    # Deadlines.
    c.set("ttl:str", "v", px=500_000)
    c.rpush("ttl:list", "x")
    c.pexpire("ttl:list", 400_000)


def populate_db2(port: int) -> None:
    c = make_client(port, db=2)
    c.set("db2:key", "in db 2")
    c.hset("db2:hash", "a", "b")
    c.close()


def keys_of(c: redis.Redis) -> list[bytes]:
    return sorted(c.keys("*"))


VOLATILE = (b"active-time", b"radix-tree-keys", b"radix-tree-nodes")


def _drop_volatile(v):
    """XINFO STREAM FULL without `active-time` (a Redis 7.2 field 7.0 lacks) and the
    radix tree's shape (how entries are packed into nodes, not what they are)."""
    if isinstance(v, list):
        out = []
        i = 0
        while i < len(v):
            if v[i] in VOLATILE and i + 1 < len(v):
                i += 2
                continue
            out.append(_drop_volatile(v[i]))
            i += 1
        return out
    return v


def snapshot(c: redis.Redis) -> dict:
    """Everything observable about every key, in a comparable form."""
    raw = redis.Redis(connection_pool=c.connection_pool)
    raw.response_callbacks.clear()
    out = {}
    for k in keys_of(c):
        t = c.type(k)
        if t == b"string":
            v = c.get(k)
        elif t == b"list":
            v = c.lrange(k, 0, -1)
        elif t == b"set":
            v = sorted(c.smembers(k))
        elif t == b"hash":
            v = sorted(c.hgetall(k).items())
        elif t == b"zset":
            # As floats: Redis 7.0 prints scores with %.17g, 7.2 (and Ember) shortest.
            v = c.zrange(k, 0, -1, withscores=True)
        elif t == b"stream":
            v = _drop_volatile(raw.execute_command("XINFO", "STREAM", k, "FULL"))
        else:
            raise AssertionError(f"unexpected type {t!r} for {k!r}")
        out[k] = (t, v, c.pexpiretime(k))
    return out


def assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b), "same keys"
    for k in a:
        ta, va, ea = a[k]
        tb, vb, eb = b[k]
        assert (ta, va) == (tb, vb), f"key {k!r} differs"
        assert ea == eb, f"key {k!r}: deadline {ea} != {eb}"


def transfer_by_dump(src: redis.Redis, dst: redis.Redis) -> None:
    for k in keys_of(src):
        payload = src.dump(k)
        at = src.pexpiretime(k)
        if at > 0:
            dst.restore(k, at, payload, absttl=True)
        else:
            dst.restore(k, 0, payload)


def test_dump_from_redis_restores_in_ember(peer, r):
    src = peer.client()
    populate(src)
    transfer_by_dump(src, r)
    assert_same(snapshot(src), snapshot(r))
    assert r.pfcount("hll:dense") == src.pfcount("hll:dense")
    assert r.xpending("st:big", "g1") == src.xpending("st:big", "g1")
    assert r.geopos("geo", "Palermo") == src.geopos("geo", "Palermo")
    # The restored values keep working.
    assert r.incr("s:int") == 12346
    r.xadd("st:big", {"n": "new"})
    assert r.xreadgroup("g1", "dave", {"st:big": ">"}, count=1)


def test_dump_from_ember_restores_in_redis(peer, r):
    populate(r)
    dst = peer.client()
    transfer_by_dump(r, dst)
    assert_same(snapshot(r), snapshot(dst))
    assert dst.pfcount("hll:dense") == r.pfcount("hll:dense")
    assert dst.incr("s:int") == 12346
    assert dst.xautoclaim("st:big", "g1", "zed", 0, "0-0", count=2)[1]


def test_dump_payloads_are_identical_for_plain_values(peer, r):
    """Where Redis 7.0 picks the same encoding as Ember writes, the bytes match."""
    src = peer.client()
    for c in (src, r):
        c.set("str", "hello")
        c.set("num", "-123456")
        c.set("short", "q" * 20)  # longer ones are LZF-compressed, each its own way
    for k in ("str", "num", "short"):
        assert r.dump(k) == src.dump(k), k


def test_rdb_file_from_redis_loads_in_ember(peer, ember_at):
    src = peer.client()
    populate(src)
    populate_db2(peer.port)
    expect = snapshot(src)
    src.save()
    srv = ember_at(peer.workdir)
    c = srv.client()
    assert_same(expect, snapshot(c))
    d2 = srv.client(db=2)
    assert d2.get("db2:key") == b"in db 2"
    assert d2.hgetall("db2:hash") == {b"a": b"b"}
    info = c.info("keyspace")
    assert info["db2"]["keys"] == 2


def test_rdb_file_from_ember_loads_in_redis(ember_at, workdirs):
    srv = ember_at()
    c = srv.client()
    populate(c)
    populate_db2(srv.port)
    c.execute_command("TAG.SET", "s:small", "red")  # Ember-only: redis skips the aux field
    c.set("nttl", "v")
    c.execute_command("NEXPIREAT", "nttl", 4102444800123456789)
    expect = snapshot(c)
    c.save()
    d = workdirs()
    shutil.copy(os.path.join(srv.workdir, "dump.rdb"), d)
    peer = RedisAt(d)
    try:
        dst = peer.client()
        assert_same(expect, snapshot(dst))
        assert dst.pexpiretime("nttl") == 4102444800123, "ns deadline as ms for Redis"
        d2 = peer.client(db=2)
        assert d2.get("db2:key") == b"in db 2"
        # And back: Redis's own save of that data loads in Ember again.
        dst.save()
    finally:
        peer.stop()
    again = ember_at(d)
    c2 = again.client()
    assert_same(expect, snapshot(c2))


def test_rdb_without_compression_and_with_lzf(ember_at, workdirs):
    """rdbcompression no writes plain strings; both files load in redis-server."""
    for setting in ("yes", "no"):
        srv = ember_at()
        c = srv.client()
        c.config_set("rdbcompression", setting)
        c.set("big", "ab" * 5000)
        c.rpush("l", *["xyz" * 50] * 100)
        c.save()
        size = os.path.getsize(os.path.join(srv.workdir, "dump.rdb"))
        if setting == "yes":
            assert size < 5000, size
        else:
            assert size > 10000, size
        d = workdirs()
        shutil.copy(os.path.join(srv.workdir, "dump.rdb"), d)
        peer = RedisAt(d)
        try:
            dst = peer.client()
            assert dst.get("big") == b"ab" * 5000
            assert dst.lrange("l", 0, -1) == [b"xyz" * 50] * 100
        finally:
            peer.stop()
