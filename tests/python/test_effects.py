"""What a write declares it did (node/src/effects.rs), as the AOF writes it: each command
whose arguments do not say what happened is appended in its deterministic form (SPOP as
SREM, XADD * with its ID, relative expiries as absolute deadlines, served blocking pops
as the pops they became), and a command that changed nothing it must propagate is not
appended at all.

These tests start their own Ember with `appendonly yes` and read its incr file.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import threading

import pytest
import redis

from helpers import IS_REDIS, Proc, wait_until

pytestmark = pytest.mark.skipif(IS_REDIS, reason="reads Ember's AOF files")


@pytest.fixture
def server():
    d = tempfile.mkdtemp(prefix="ember-fx-")
    e = Proc("ember", d, "--appendonly", "yes", "--appendfsync", "always")
    yield e
    e.kill()
    shutil.rmtree(d, ignore_errors=True)


def commands(e: Proc) -> list[list[str]]:
    """The commands of the incr file(s), in order (annotation lines skipped)."""
    out: list[list[str]] = []
    for path in sorted(glob.glob(os.path.join(e.workdir, "appendonlydir", "*.incr.aof"))):
        data = open(path, "rb").read()
        i = 0
        while i < len(data):
            if data[i:i + 1] == b"#":
                i = data.index(b"\n", i) + 1
                continue
            assert data[i:i + 1] == b"*", data[i:i + 40]
            end = data.index(b"\r\n", i)
            n = int(data[i + 1:end])
            i = end + 2
            cmd = []
            for _ in range(n):
                end = data.index(b"\r\n", i)
                ln = int(data[i + 1:end])
                cmd.append(data[end + 2:end + 2 + ln].decode(errors="replace"))
                i = end + 2 + ln + 2
            out.append(cmd)
    return out


def after(e: Proc, marker: str) -> list[list[str]]:
    """The commands appended after `SET <marker> 1` (each case writes its own marker)."""
    cmds = commands(e)
    at = max(i for i, c in enumerate(cmds) if c[:2] == ["SET", marker])
    return [c for c in cmds[at + 1:] if c[0].upper() not in ("SELECT",)]


def test_spop_is_the_srem_of_what_it_popped(server):
    c = server.client()
    c.sadd("s", "a", "b", "c", "d")
    c.set("m1", 1)
    one = c.spop("s")
    some = c.spop("s", 2)
    rest = c.spop("s", 10)
    assert c.spop("missing") is None
    assert c.spop("missing", 3) == []
    got = after(server, "m1")
    assert got[0] == ["SREM", "s", one]
    assert got[1][:2] == ["SREM", "s"] and sorted(got[1][2:]) == sorted(some)
    assert got[2][:2] == ["SREM", "s"] and sorted(got[2][2:]) == sorted(rest)
    assert len(got) == 3, got


def test_xadd_star_is_appended_with_its_id(server):
    c = server.client()
    c.set("m2", 1)
    id1 = c.xadd("x", {"f": "v"})
    id2 = c.xadd("x", {"g": "w"}, maxlen=10, approximate=False)
    assert c.xadd("nostream", {"f": "v"}, nomkstream=True) is None
    got = after(server, "m2")
    assert got[0] == ["XADD", "x", id1, "f", "v"]
    assert got[1] == ["XADD", "x", "MAXLEN", "10", id2, "g", "w"]
    assert len(got) == 2, got


def test_relative_expiries_become_absolute_deadlines(server):
    c = server.client()
    c.set("m3", 1)
    c.set("k", "v", ex=100)
    c.setex("k2", 100, "v")
    c.set("k3", "v")
    c.expire("k3", 50)
    c.expire("missing", 10)
    c.getex("k3", persist=True)
    c.getex("k3")
    c.execute_command("NEXPIRE", "k3", 5_000_000_123)
    got = after(server, "m3")
    ms = {k: c.pexpiretime(k) for k in ("k", "k2")}
    assert got[0] == ["SET", "k", "v", "PXAT", str(ms["k"])]
    assert got[1] == ["SET", "k2", "v", "PXAT", str(ms["k2"])]
    assert got[2] == ["SET", "k3", "v"]
    assert got[3][:2] == ["PEXPIREAT", "k3"] and int(got[3][2]) > 0
    assert got[4] == ["DEL", "missing"]
    assert got[5] == ["PERSIST", "k3"]
    # GETEX without options changed nothing: not appended.
    assert got[6][:2] == ["NEXPIREAT", "k3"] and int(got[6][2]) % 1_000_000 != 0
    assert len(got) == 7, got


def test_served_blocking_pops_are_the_pops_they_became(server):
    c = server.client()
    c.rpush("l", "a", "b", "c")
    c.rpush("l2", "x", "y", "z")
    c.zadd("z", {"m": 1, "n": 2})
    c.set("m4", 1)
    assert tuple(c.blpop(["empty", "l"], 0)) == ("l", "a")
    assert tuple(c.brpop(["l"], 0)) == ("l", "c")
    assert c.blmpop(0, 1, "l2", direction="LEFT", count=2) == ["l2", ["x", "y"]]
    assert c.bzpopmin("z", 0) == ("z", "m", 1.0)
    assert c.blmove("l2", "dst", 0, "LEFT", "RIGHT") == "z"
    assert c.brpoplpush("l", "dst2", 0) == "b"
    got = after(server, "m4")
    assert got == [
        ["LPOP", "l"],
        ["RPOP", "l"],
        ["LPOP", "l2", "2"],
        ["ZPOPMIN", "z"],
        ["LMOVE", "l2", "dst", "LEFT", "RIGHT"],
        ["RPOPLPUSH", "l", "dst2"],
    ], got


def test_a_blocking_pop_that_found_nothing_in_multi_is_not_appended(server):
    c = server.client()
    c.set("m5", 1)
    p = c.pipeline(transaction=True)
    p.blpop(["nothing"], 0)
    p.set("after", 1)
    assert p.execute() == [None, True]
    got = after(server, "m5")
    assert ["SET", "after", "1"] in got
    assert not any(cmd[0].upper() in ("BLPOP", "LPOP") for cmd in got), got


def test_a_blocked_pop_served_later_is_appended_as_its_pop(server):
    c = server.client()
    c.set("m6", 1)
    blocked = server.client()
    res: dict = {}
    t = threading.Thread(target=lambda: res.setdefault("r", blocked.blpop(["q"], 10)))
    t.start()
    wait_until(lambda: int(c.info("clients")["blocked_clients"]) == 1, msg="client blocked")
    c.rpush("q", "v")
    t.join(10)
    assert tuple(res["r"]) == ("q", "v")
    got = after(server, "m6")
    assert got == [["RPUSH", "q", "v"], ["LPOP", "q"]], got


def test_restore_with_a_ttl_is_appended_with_its_absolute_deadline(server):
    c = server.client()
    c.set("src", "value")
    raw = redis.Redis(host=c.connection_pool.connection_kwargs["host"], port=server.port)
    dump = raw.dump("src")
    c.set("m7", 1)
    raw.restore("r", 100000, dump)
    got = after(server, "m7")
    at = c.pexpiretime("r")
    assert len(got) == 1
    assert got[0][:3] == ["RESTORE", "r", str(at)] and got[0][-1] == "ABSTTL", got
