"""The append-only file: CONFIG SET appendonly yes at run time, BGREWRITEAOF, INFO
persistence fields, and the interchange with Debian's redis-server 7.0 both ways (a Redis
7 multi-part AOF directory written by one loads in the other).

These tests start their own servers (Ember and redis-server) in private directories.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import pytest
import redis

from helpers import IS_REDIS, Proc, _redis_server_bin, wait_rewrite

pytestmark = pytest.mark.skipif(IS_REDIS, reason="starts Ember and redis-server itself")

MANIFEST = os.path.join("appendonlydir", "appendonly.aof.manifest")


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="ember-aof-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def info(c: redis.Redis) -> dict:
    return c.info("persistence")


def manifest(workdir: str) -> list[str]:
    with open(os.path.join(workdir, MANIFEST)) as f:
        return [line.strip() for line in f if line.strip()]


def fill(c: redis.Redis) -> None:
    """Every type, expiries, a transaction, SPOP, a script, a second database."""
    c.set("str", "hello")
    c.set("ttl", "v", ex=1000)
    c.set("pttl", "v")
    c.pexpire("pttl", 500000)
    c.rpush("list", "a", "b", "c", "1")
    c.lmove("list", "list2", "LEFT", "RIGHT")
    c.sadd("set", *[f"m{i}" for i in range(20)])
    c.spop("set")
    c.spop("set", 3)
    c.hset("hash", mapping={"f1": "v1", "f2": "22"})
    c.hincrby("hash", "f2", 3)
    c.zadd("zset", {"a": 1.5, "b": -2, "c": 3})
    c.zincrby("zset", 1, "a")
    c.xadd("stream", {"f": "v"}, id="1-1")
    c.xadd("stream", {"f": "w"})
    c.xgroup_create("stream", "grp", id="0")
    c.xreadgroup("grp", "alice", {"stream": ">"}, count=1)
    c.pfadd("hll", "a", "b", "c")
    c.setbit("bits", 100, 1)
    c.incrbyfloat("float", 1.25)
    p = c.pipeline(transaction=True)
    p.incr("tx")
    p.rpush("txl", "x")
    p.execute()
    c.eval("redis.call('incr', KEYS[1]); redis.call('sadd', KEYS[2], 'q', 'r'); "
           "redis.call('spop', KEYS[2]); return 1", 2, "ev", "evs")
    c.set("gone", "x")
    c.delete("gone")
    c.execute_command("SELECT", "3")
    c.set("in3", "three")
    c.execute_command("SELECT", "0")


def state(c: redis.Redis) -> dict:
    """Everything in databases 0 and 3, by key: type, value, absolute deadline."""
    out = {}
    for db in (0, 3):
        c.execute_command("SELECT", db)
        for k in sorted(c.keys("*")):
            t = c.type(k)
            if t == "string":
                v = c.get(k)
            elif t == "list":
                v = c.lrange(k, 0, -1)
            elif t == "set":
                v = sorted(c.smembers(k))
            elif t == "hash":
                v = sorted(c.hgetall(k).items())
            elif t == "zset":
                v = c.zrange(k, 0, -1, withscores=True)
            elif t == "stream":
                groups = [(g["name"], g["consumers"], g["pending"], g["last-delivered-id"])
                          for g in c.xinfo_groups(k)]
                v = (c.xrange(k), groups)
            else:
                v = None
            out[(db, k)] = (t, v, c.pexpiretime(k))
    c.execute_command("SELECT", 0)
    return out


def test_config_set_appendonly_yes_at_run_time(workdir):
    e = Proc("ember", workdir, "--appendonly", "no")
    c = e.client()
    for i in range(100):
        c.set(f"before:{i}", i)
    assert info(c)["aof_enabled"] == 0
    assert c.config_set("appendonly", "yes")
    assert c.config_get("appendonly") == {"appendonly": "yes"}
    wait_rewrite(c)
    i = info(c)
    assert i["aof_enabled"] == 1
    assert i["aof_last_bgrewrite_status"] == "ok"
    assert i["aof_current_size"] > 0 and i["aof_base_size"] > 0
    m = manifest(workdir)
    assert m[0].startswith("file appendonly.aof.") and m[0].endswith(".base.rdb seq 1 type b"), m
    assert m[1].endswith("type i"), m
    for i in range(100):
        c.set(f"after:{i}", i)
    e.kill()  # SIGKILL: nothing flushed at exit
    e = Proc("ember", workdir, "--appendonly", "yes")
    c = e.client()
    assert c.dbsize() == 200
    assert c.get("before:7") == "7" and c.get("after:99") == "99"
    assert c.config_set("appendonly", "no")
    assert info(c)["aof_enabled"] == 0
    assert "aof_current_size" not in info(c)
    e.shutdown()


def test_bgrewriteaof_and_info_fields(workdir):
    e = Proc("ember", workdir, "--appendonly", "yes", "--appendfsync", "always")
    c = e.client()
    fill(c)
    before = state(c)
    i = info(c)
    for field in ("aof_enabled", "aof_rewrite_in_progress", "aof_rewrite_scheduled",
                  "aof_last_rewrite_time_sec", "aof_current_rewrite_time_sec",
                  "aof_last_bgrewrite_status", "aof_rewrites",
                  "aof_rewrites_consecutive_failures", "aof_last_write_status",
                  "aof_current_size", "aof_base_size", "aof_buffer_length"):
        assert field in i, field
    assert i["aof_last_write_status"] == "ok"
    size_before = i["aof_current_size"]
    assert c.bgrewriteaof() is True
    wait_rewrite(c)
    m = manifest(workdir)
    assert m == ["file appendonly.aof.2.base.rdb seq 2 type b",
                 "file appendonly.aof.2.incr.aof seq 2 type i"], m
    files = sorted(os.listdir(os.path.join(workdir, "appendonlydir")))
    assert files == ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof",
                     "appendonly.aof.manifest"], files
    i = info(c)
    assert i["aof_last_bgrewrite_status"] == "ok"
    assert i["aof_base_size"] > 0
    assert i["aof_current_size"] == i["aof_base_size"]
    assert size_before > 0
    c.set("after-rewrite", "1")
    e.kill()
    e = Proc("ember", workdir, "--appendonly", "yes")
    c = e.client()
    after = state(c)
    assert after.pop((0, "after-rewrite"))[1] == "1"
    assert after == before
    e.shutdown()


@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None,
                    reason="redis-server not installed")
@pytest.mark.parametrize("rewrite", [False, True])
def test_redis_writes_ember_loads(workdir, rewrite):
    r = Proc("redis", workdir, "--appendonly", "yes")
    c = r.client()
    fill(c)
    if rewrite:
        c.bgrewriteaof()
        wait_rewrite(c)
        c.set("after-rewrite", "1")
    expected = state(c)
    r.shutdown()
    e = Proc("ember", workdir, "--appendonly", "yes")
    c = e.client()
    assert state(c) == expected
    # Ember goes on appending to redis-server's incr file.
    c.set("from-ember", "yes")
    e.kill()
    e = Proc("ember", workdir, "--appendonly", "yes")
    assert e.client().get("from-ember") == "yes"
    e.shutdown()


@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None,
                    reason="redis-server not installed")
@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_ember_writes_redis_loads(workdir, preamble):
    e = Proc("ember", workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble)
    c = e.client()
    fill(c)
    c.bgrewriteaof()
    wait_rewrite(c)
    c.set("after-rewrite", "1")
    c.blpop(["list2"], timeout=1)
    c.hset("hash", "f3", "3")
    expected = state(c)
    suffix = "rdb" if preamble == "yes" else "aof"
    assert manifest(workdir)[0] == f"file appendonly.aof.2.base.{suffix} seq 2 type b"
    e.shutdown()
    r = Proc("redis", workdir, "--appendonly", "yes")
    c = r.client()
    assert state(c) == expected, r.output()
    r.shutdown()


def ember_only(c: redis.Redis) -> dict:
    """Key tags, a sub-millisecond deadline and vector sets, as Ember sees them."""
    vs = sorted(c.execute_command("VSIM", "vs", "VALUES", "3", "1", "0", "0",
                                  "COUNT", "10"))
    return {
        "tags": c.execute_command("TAG.GET", "tagged"),
        "members": sorted(c.execute_command("TAG.MEMBERS", "t1")),
        "nexpiretime": c.execute_command("NEXPIRETIME", "nttl"),
        "vcard": c.execute_command("VCARD", "vs"),
        "vsim": vs,
        "vemb": [round(float(x), 6) for x in c.execute_command("VEMB", "vs", "a")],
        "attr": c.execute_command("VGETATTR", "vs", "b"),
        "idx": c.execute_command("VSIM.CARD", "idx"),
        "idx_get": c.execute_command("VSIM.GET", "idx", "p")[0],
    }


@pytest.mark.parametrize("rewrite", ["none", "yes", "no"])
def test_ember_only_data_survives_a_restart(workdir, rewrite):
    """Tags, nanosecond deadlines and vector sets come back from the AOF, before and after
    a rewrite with an RDB or an AOF base."""
    pre = "yes" if rewrite == "none" else rewrite
    e = Proc("ember", workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", pre)
    c = e.client()
    c.set("tagged", "v")
    c.execute_command("TAG.SET", "tagged", "t1", "t2")
    c.set("other", "v")
    c.execute_command("TAG.SET", "other", "t1")
    c.set("nttl", "v")
    at = time.time_ns() + 3_600_000_000_123
    c.execute_command("NEXPIREAT", "nttl", at)
    c.execute_command("VADD", "vs", "VALUES", "3", "1", "0", "0", "a")
    c.execute_command("VADD", "vs", "VALUES", "3", "0", "1", "0", "b",
                      "SETATTR", '{"year": 1999}')
    c.execute_command("VADD", "vs", "VALUES", "3", "0", "0", "1", "c")
    c.execute_command("VREM", "vs", "c")
    c.execute_command("VSIM.CREATEINDEX", "idx", "DIM", "2", "METRIC", "l2")
    c.execute_command("VSIM.SET", "idx", "p", "[0.5, 0.25]", "ATTR", '{"k": 1}')
    expected = ember_only(c)
    assert expected["nexpiretime"] == at
    assert expected["vcard"] == 2 and expected["tags"] == ["t1", "t2"]
    if rewrite != "none":
        c.bgrewriteaof()
        wait_rewrite(c)
        suffix = "rdb" if rewrite == "yes" else "aof"
        assert manifest(workdir)[0].endswith(f".base.{suffix} seq 2 type b")
    e.kill()
    e = Proc("ember", workdir, "--appendonly", "yes")
    c = e.client()
    assert ember_only(c) == expected
    e.shutdown()
