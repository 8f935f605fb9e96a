"""Cluster mode on real processes: three `ember --cluster-enabled yes` nodes on 127.0.0.1,
driven by redis-py's RedisCluster and `redis-cli -c`. Leaders are killed (SIGKILL) and
frozen (SIGSTOP) during a write load; every acknowledged write must be there afterwards."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import MovedError
from redis.retry import Retry

from helpers import HOST, IS_REDIS, find_ember_bin, in_thread

pytestmark = pytest.mark.skipif(IS_REDIS, reason="starts ember processes in cluster mode")

# Small enough to come up fast in a debug build, big enough that every node leads some.
GROUPS = 8
NODE_TIMEOUT_MS = 1000


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((HOST, 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Node:
    """One ember process in cluster mode; its directory outlives restarts."""

    def __init__(self, port: int, bus: int, bootstrap: str, workdir: str, groups: int = GROUPS,
                 join: str = "", extra: tuple[str, ...] = ()):
        self.port, self.bus, self.bootstrap, self.workdir = port, bus, bootstrap, workdir
        self.groups, self.join, self.extra = groups, join, extra
        self.proc: subprocess.Popen | None = None
        self.log = os.path.join(workdir, "server.log")

    def start(self) -> None:
        argv = [str(find_ember_bin()), "--port", str(self.port), "--bind", HOST,
                "--dir", self.workdir, "--cluster-enabled", "yes",
                *(["--cluster-join", self.join] if self.join
                  else ["--cluster-bootstrap", self.bootstrap]),
                "--cluster-port", str(self.bus),
                "--cluster-groups", str(self.groups),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), *self.extra]
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.workdir)
        logf.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"node {self.port} exited:\n{self.output()}"
            try:
                with socket.create_connection((HOST, self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    s.settimeout(2)
                    if s.recv(16).startswith((b"+PONG", b"-NOAUTH")):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"node {self.port} did not answer PING:\n{self.output()}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host=HOST, port=self.port, **kw)

    def output(self) -> str:
        try:
            with open(self.log, "rb") as f:
                return f.read()[-8000:].decode("utf-8", "replace")
        except OSError:
            return "<no output>"


class Cluster:
    """n nodes bootstrapped together, each in its own directory under root."""

    def __init__(self, n: int = 3, groups: int = GROUPS, extra: tuple[str, ...] = ()):
        ports = _free_ports(2 * n)
        self.root = tempfile.mkdtemp(prefix="ember-cluster-")
        pairs = list(zip(ports[:n], ports[n:]))
        boot = ",".join(f"{HOST}:{p}@{b}" for p, b in pairs)
        self.nodes = []
        for i, (p, b) in enumerate(pairs):
            d = os.path.join(self.root, f"n{i + 1}")
            os.makedirs(d)
            self.nodes.append(Node(p, b, boot, d, groups, extra=extra))

    def start(self) -> "Cluster":
        for n in self.nodes:
            n.start()
        self.wait_ok()
        self.wait_connected()
        return self

    def wait_connected(self, timeout: float = 30) -> None:
        """Until every live node has had a pong from every other live node."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = [n.client(decode_responses=True).execute_command("CLUSTER", "NODES")
                        for n in self.alive()]
                if not any(",fail " in t for t in last):
                    return
            except redis.RedisError as e:
                last = e
            time.sleep(0.1)
        raise AssertionError(f"nodes not connected after {timeout}s: {last}")

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def by_port(self, port: int) -> Node:
        return next(n for n in self.nodes if n.port == port)

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.proc and n.proc.poll() is None]

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every live node reports cluster_state:ok."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                states = [n.client().cluster("INFO")["cluster_state"] for n in self.alive()]
                if all(s == "ok" for s in states):
                    return
                last = states
            except redis.RedisError as e:
                last = e
            time.sleep(0.1)
        raise AssertionError(f"cluster not ok after {timeout}s: {last}\n"
                             + "\n".join(n.output() for n in self.nodes))

    def leader_of(self, key: str) -> Node:
        """The node that answers writes for key's slot right now."""
        slot = self.nodes[0].client().cluster("KEYSLOT", key)
        for n in self.alive():
            for r in n.client().execute_command("CLUSTER", "SLOTS"):
                if r[0] <= slot <= r[1]:
                    return self.by_port(int(r[2][1]))
        raise AssertionError(f"no leader for slot {slot}")

    def rc(self, socket_timeout: float = 5, **kw) -> RedisCluster:
        starts = [ClusterNode(HOST, n.port) for n in self.alive()]
        kw.setdefault("retry", Retry(ExponentialBackoff(cap=0.2, base=0.02), 10))
        return RedisCluster(startup_nodes=starts, socket_timeout=socket_timeout, **kw)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster().start()
    yield c
    c.stop()
    shutil.rmtree(c.root, ignore_errors=True)


def cli(port: int, *args: str) -> str:
    out = subprocess.run(["redis-cli", "-c", "-h", HOST, "-p", str(port), *args],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def _cli_script(port: int, script: str) -> list[str]:
    """Runs newline-separated commands on one redis-cli connection (no -c)."""
    out = subprocess.run(["redis-cli", "-h", HOST, "-p", str(port)], input=script,
                         capture_output=True, text=True, timeout=30)
    return [line for line in out.stdout.splitlines() if line]


# -- protocol ---------------------------------------------------------------------------

def test_cluster_info_and_topology(cluster):
    c = cluster.nodes[0].client(decode_responses=True)
    info = c.cluster("INFO")
    assert info["cluster_state"] == "ok"
    assert int(info["cluster_slots_assigned"]) == 16384
    assert int(info["cluster_known_nodes"]) == 3
    assert c.info("cluster") == {"cluster_enabled": 1}
    myids = {n.client(decode_responses=True).execute_command("CLUSTER", "MYID")
             for n in cluster.nodes}
    assert len(myids) == 3 and all(len(i) == 40 for i in myids)

    slots = c.execute_command("CLUSTER", "SLOTS")
    covered = sorted((r[0], r[1]) for r in slots)
    assert covered[0][0] == 0 and covered[-1][1] == 16383
    assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:]))
    for r in slots:
        assert len(r) == 2 + 1, r       # the leader only: every node is a master
        assert r[2][2] in myids
    # Leaders are spread: every node leads some slots.
    assert {int(r[2][1]) for r in slots} == {n.port for n in cluster.nodes}

    nodes = c.execute_command("CLUSTER", "NODES")
    lines = [l for l in nodes.splitlines() if l]
    assert len(lines) == 3
    assert sum("myself" in l for l in lines) == 1
    assert all(" master " in l or ",master " in l for l in lines)

    shards = c.execute_command("CLUSTER", "SHARDS")
    assert len(shards) == 3
    rc = cluster.rc()
    assert len(rc.get_primaries()) == 3 and rc.get_replicas() == []
    rc.close()


def test_heartbeats_travel_in_batches(cluster):
    """Every group's heartbeats to a peer go in one RaftBatch RPC per interval."""
    def stats():
        info = cluster.nodes[0].client(decode_responses=True).cluster("INFO")
        return (int(info["cluster_bus_batch_rpcs_received"]),
                int(info["cluster_bus_batched_requests_received"]))
    b0, r0 = stats()
    time.sleep(1.0)
    b1, r1 = stats()
    assert b1 > b0, "no batch RPC in a second"
    # Node 1 gets the heartbeats of the groups the two others lead, several per RPC.
    assert (r1 - r0) / (b1 - b0) > 1.5, (b1 - b0, r1 - r0)


def test_keyslot_and_moved(cluster):
    c = cluster.nodes[0].client()
    assert c.cluster("KEYSLOT", "foo") == 12182
    assert c.cluster("KEYSLOT", "{user1000}.following") == c.cluster("KEYSLOT", "{user1000}.x")
    owner = cluster.leader_of("moved-key")
    other = next(n for n in cluster.nodes if n is not owner)
    with pytest.raises(MovedError) as e:
        other.client().execute_command("SET", "moved-key", "v")
    slot = c.cluster("KEYSLOT", "moved-key")
    assert str(e.value) == f"{slot} {HOST}:{owner.port}"    # redis-py strips "MOVED "
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        owner.client().execute_command("MSET", "a", "1", "b", "2")


def test_busy_script_redirects_before_busy(cluster):
    # Redis checks cluster redirection before -BUSY: while a read-only script runs past
    # busy-reply-threshold on a node, a client beside it (same worker, connected before)
    # gets MOVED for a key another node leads, CROSSSLOT for keys of two slots, and -BUSY
    # for a key led here; SCRIPT KILL from it ends the script.
    node = cluster.nodes[0]
    admin = node.client()
    keys = [f"busy-{i}" for i in range(200)]
    here = next(k for k in keys if cluster.leader_of(k) is node)
    away = next(k for k in keys if cluster.leader_of(k) is not node)
    owner = cluster.leader_of(away)
    admin.set(here, "v")
    admin.config_set("busy-reply-threshold", 200)
    admin.execute_command("DEBUG", "SPREAD", 1)
    spinner = node.client(socket_timeout=60)
    beside = node.client()
    assert spinner.ping() and beside.ping()
    out = {}
    th = in_thread(lambda: spinner.eval_ro("local i = 0 while true do i = i + 1 end", 0), out)
    try:
        time.sleep(0.6)
        assert th.is_alive()
        with pytest.raises(MovedError) as e:
            beside.execute_command("GET", away)
        assert str(e.value).endswith(f"{HOST}:{owner.port}")
        with pytest.raises(redis.ResponseError, match="hash to the same slot"):
            beside.execute_command("MGET", here, away)
        with pytest.raises(redis.ResponseError, match="^BUSY"):
            beside.execute_command("GET", here)
        assert beside.script_kill() in (True, b"OK")
        th.join(timeout=20)
        assert not th.is_alive() and "killed by user" in out["err"]
        assert beside.execute_command("GET", here) == b"v"
    finally:
        if th.is_alive():
            with node.client() as k:
                try:
                    k.script_kill()
                except redis.ResponseError:
                    pass
        th.join(timeout=20)
        admin.config_set("busy-reply-threshold", 5000)
        admin.execute_command("DEBUG", "SPREAD", 0)
        for c in (admin, spinner, beside):
            c.close()


def test_redis_cli_follows_moved(cluster):
    for n in cluster.nodes:
        assert cli(n.port, "set", "foo", f"bar{n.port}") == "OK"
        for m in cluster.nodes:
            assert cli(m.port, "get", "foo") == f"bar{n.port}"
    assert cli(cluster.nodes[1].port, "cluster", "keyslot", "foo") == "12182"


def test_redis_py_cluster_client(cluster):
    rc = cluster.rc(decode_responses=True)
    for i in range(300):
        assert rc.set(f"k:{i}", f"v{i}")
    assert [rc.get(f"k:{i}") for i in range(300)] == [f"v{i}" for i in range(300)]
    assert rc.incr("ctr") == 1 and rc.incrby("ctr", 41) == 42
    # Hash tags keep multi-key commands in one slot.
    assert rc.mset({"{t}a": "1", "{t}b": "2"})
    assert rc.mget(["{t}a", "{t}b"]) == ["1", "2"]
    rc.rpush("{t}list", "x", "y", "z")
    assert rc.lrange("{t}list", 0, -1) == ["x", "y", "z"]
    rc.hset("h", mapping={"f": "1", "g": "2"})
    assert rc.hgetall("h") == {"f": "1", "g": "2"}
    rc.zadd("z", {"a": 1, "b": 2})
    assert rc.zrange("z", 0, -1, withscores=True) == [("a", 1.0), ("b", 2.0)]
    assert rc.expire("k:1", 100) and 0 < rc.ttl("k:1") <= 100
    # A script on one slot runs on that group's leader.
    assert rc.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", 1, "sc", 5) == 5
    # Every node counts the keys of a slot it holds.
    slot = rc.keyslot("k:7")
    n = cluster.nodes[0].client()
    assert n.cluster("COUNTKEYSINSLOT", slot) >= 1
    assert "k:7" in [k.decode() if isinstance(k, bytes) else k
                     for k in n.cluster("GETKEYSINSLOT", slot, 100)]
    rc.close()


def test_keys_scan_dbsize_show_each_key_once(cluster):
    rc = cluster.rc(decode_responses=True)
    rc.flushall()
    names = {f"u:{i}" for i in range(200)}
    for k in names:
        rc.set(k, 1)
    # Asked on every primary and merged: each key exactly once.
    assert sorted(rc.scan_iter(match="u:*", count=50)) == sorted(names)
    assert sorted(rc.keys("u:*", target_nodes=RedisCluster.PRIMARIES)) == sorted(names)
    assert rc.dbsize(target_nodes=RedisCluster.PRIMARIES) == 200
    # Per node: the keys of the groups it leads; READONLY shows every key held there.
    per_node = [n.client().dbsize() for n in cluster.nodes]
    assert sum(per_node) == 200 and all(x > 0 for x in per_node)
    c = cluster.nodes[0].client(single_connection_client=True)
    c.execute_command("READONLY")
    deadline = time.monotonic() + 5
    while c.dbsize() != 200:    # replicas catch up
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert len(c.keys("u:*")) == 200
    rc.close()


def test_pipeline_of_writes(cluster):
    rc = cluster.rc()
    p = rc.pipeline(transaction=False)
    for i in range(200):
        p.set(f"p:{i}", i)
        p.incr(f"pc:{i % 7}")
    res = p.execute()
    assert all(r is True for r in res[0::2])
    assert sorted(int(rc.get(f"pc:{j}")) for j in range(7)) == sorted(
        len(range(j, 200, 7)) for j in range(7))
    rc.close()


def test_multi_exec_in_one_slot(cluster):
    owner = cluster.leader_of("{tx}a")
    c = owner.client()
    p = c.pipeline(transaction=True)
    p.set("{tx}a", 1).incr("{tx}a").rpush("{tx}l", "x", "y").get("{tx}a")
    assert p.execute() == [True, 2, 2, b"2"]
    # An error inside EXEC is that command's reply; the others apply.
    p = c.pipeline(transaction=True)
    p.lpush("{tx}a", "z").incr("{tx}a")
    res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError) and res[1] == 3
    # Keys of different slots: CROSSSLOT, and nothing applies (one redis-cli connection).
    out = _cli_script(owner.port, "MULTI\nSET {tx}a 100\nSET {other}b 1\nEXEC\nEXEC\n")
    assert out == ["OK", "QUEUED", "QUEUED",
                   "CROSSSLOT Keys in request don't hash to the same slot",
                   "ERR EXEC without MULTI"], out
    assert c.get("{tx}a") == b"3"
    # On a node that does not lead the slot: MOVED at EXEC.
    other = next(n for n in cluster.nodes if n is not owner)
    out = _cli_script(other.port, "MULTI\nINCR {tx}a\nEXEC\n")
    assert out[:2] == ["OK", "QUEUED"] and out[2].startswith("MOVED "), out
    assert c.get("{tx}a") == b"3"


def test_blocking_pops(cluster):
    owner = cluster.leader_of("{b}l")
    c = owner.client()
    # Something to pop: answered at once.
    c.rpush("{b}l", "a")
    assert list(c.blpop(["{b}l"], timeout=1)) == [b"{b}l", b"a"]
    # Nothing: nil once the timeout passes.
    t0 = time.monotonic()
    assert c.blpop(["{b}l"], timeout=0.3) is None
    assert time.monotonic() - t0 >= 0.25
    # A push through another node's client wakes the waiter, which pops it once.
    got = {}

    def wait(name, fn):
        got[name] = fn(owner.client())

    t = threading.Thread(target=wait, args=("blpop", lambda r: r.blpop(["{b}l", "{b}m"], 5)))
    t.start()
    time.sleep(0.3)
    cluster.rc().rpush("{b}m", "x")
    t.join(6)
    assert list(got["blpop"]) == [b"{b}m", b"x"]
    assert c.llen("{b}m") == 0
    # Two waiters, one element: one gets it, the other times out.
    ts = [threading.Thread(target=wait, args=(f"w{i}", lambda r: r.brpop(["{b}q"], 1.5)))
          for i in range(2)]
    for t in ts:
        t.start()
    time.sleep(0.3)
    c.lpush("{b}q", "only")
    for t in ts:
        t.join(5)
    assert sorted([got["w0"] is None, got["w1"] is None]) == [False, True], got
    # BLMOVE and BZPOPMIN wake the same way.
    t = threading.Thread(target=wait, args=("blmove", lambda r: r.blmove("{b}s", "{b}d", 5)))
    t.start()
    time.sleep(0.3)
    c.rpush("{b}s", "v")
    t.join(6)
    assert got["blmove"] == b"v" and c.lrange("{b}d", 0, -1) == [b"v"]
    t = threading.Thread(target=wait, args=("bz", lambda r: r.bzpopmin("{b}z", 5)))
    t.start()
    time.sleep(0.3)
    c.zadd("{b}z", {"m": 2})
    t.join(6)
    assert list(got["bz"]) == [b"{b}z", b"m", 2.0]
    # Pushes inside a transaction and inside a script wake waiters too.
    for name, push in (("tx", lambda: c.pipeline(transaction=True).rpush("{b}e", "t").execute()),
                       ("lua", lambda: c.eval("return redis.call('RPUSH', KEYS[1], 'l')",
                                              1, "{b}e"))):
        t = threading.Thread(target=wait, args=(name, lambda r: r.blpop(["{b}e"], 5)))
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        push()
        t.join(6)
        assert got[name] is not None and time.monotonic() - t0 < 2, (name, got)
    # A waiter whose client went away takes nothing from a later push.
    s = socket.create_connection((HOST, owner.port))
    s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$5\r\n{b}g\r\n$1\r\n0\r\n")
    time.sleep(0.3)
    s.close()
    time.sleep(0.3)
    c.rpush("{b}g", "kept")
    time.sleep(0.3)
    assert c.lrange("{b}g", 0, -1) == [b"kept"]
    # Every replica applied the same pops.
    for n in cluster.alive():
        r = n.client()
        r.execute_command("READONLY")
        assert r.lrange("{b}d", 0, -1) == [b"v"] and r.llen("{b}q") == 0
    # CLIENT UNBLOCK reaches a waiting pop (TIMEOUT: its nil; ERROR: -UNBLOCKED), and
    # INFO counts it among blocked_clients.
    for reason, expect in (("TIMEOUT", None), ("ERROR", "UNBLOCKED")):
        w = owner.client(single_connection_client=True)
        wid = w.client_id()
        t = threading.Thread(target=wait, args=(reason, lambda r, w=w: _outcome(
            lambda: w.blpop(["{b}u"], 0))))
        t.start()
        deadline = time.monotonic() + 5
        while c.info("clients")["blocked_clients"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert c.client_unblock(wid, error=reason == "ERROR") == 1
        t.join(5)
        assert not t.is_alive()
        if expect is None:
            assert got[reason] is None
        else:
            assert expect in str(got[reason])
        assert c.client_unblock(wid) == 0       # not waiting any more
        w.close()
    assert c.info("clients")["blocked_clients"] == 0
    # Elsewhere: MOVED.
    other = next(n for n in cluster.nodes if n is not owner)
    with pytest.raises(MovedError):
        other.client().blpop(["{b}l"], 1)


def _outcome(fn):
    """fn()'s result, or the error it raised."""
    try:
        return fn()
    except redis.RedisError as e:
        return e


def test_blocking_stream_reads(cluster):
    owner = cluster.leader_of("{x}s")
    c = owner.client()
    got = {}

    def wait(name, fn, r=None):
        got[name] = fn(r or owner.client())

    def after(fn, *args):
        t = threading.Thread(target=wait, args=args)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        fn()
        t.join(6)
        assert not t.is_alive()
        return time.monotonic() - t0

    # XREAD BLOCK $: nothing yet, then an XADD through another node's client wakes it
    # with that entry only.
    c.xadd("{x}s", {"f": "old"}, id="1-1")
    t0 = time.monotonic()
    assert not c.xread({"{x}s": "$"}, block=300)     # redis-py: [] for the nil
    assert time.monotonic() - t0 >= 0.25
    took = after(lambda: cluster.rc().xadd("{x}s", {"f": "new"}, id="2-1"),
                 "xread", lambda r: r.xread({"{x}s": "$", "{x}t": "$"}, block=5000))
    assert got["xread"] == [[b"{x}s", [(b"2-1", {b"f": b"new"})]]] and took < 2
    # A stream created while waiting (XREAD BLOCK 0: no timeout) serves the waiter too.
    after(lambda: c.xadd("{x}t", {"a": "1"}, id="5-1"),
          "new", lambda r: r.xread({"{x}t": "$"}, block=0))
    assert got["new"] == [[b"{x}t", [(b"5-1", {b"a": b"1"})]]]
    # XREADGROUP BLOCK is a write: the leader proposes it again on each XADD, and every
    # replica records the same delivery in the group's pending list.
    c.xgroup_create("{x}s", "g", id="$")
    t0 = time.monotonic()
    assert not c.xreadgroup("g", "alice", {"{x}s": ">"}, block=200)
    assert time.monotonic() - t0 >= 0.15
    after(lambda: c.xadd("{x}s", {"f": "grp"}, id="3-1"),
          "group", lambda r: r.xreadgroup("g", "alice", {"{x}s": ">"}, count=1, block=5000))
    assert got["group"] == [[b"{x}s", [(b"3-1", {b"f": b"grp"})]]]
    for n in cluster.alive():
        r = n.client()
        r.execute_command("READONLY")
        deadline = time.monotonic() + 5
        while r.xpending("{x}s", "g")["pending"] != 1:
            assert time.monotonic() < deadline, n.port
            time.sleep(0.05)
    # A READONLY connection blocks on a replica and is served by the writes it applies.
    replica = next(n for n in cluster.nodes if n is not owner)
    ro = replica.client()
    ro.execute_command("READONLY")
    after(lambda: c.xadd("{x}s", {"f": "ro"}, id="4-1"),
          "ro", lambda r: r.xread({"{x}s": "3-1"}, block=5000), ro)
    assert got["ro"] == [[b"{x}s", [(b"4-1", {b"f": b"ro"})]]]
    # Elsewhere, without READONLY: MOVED, for the read and the group read.
    with pytest.raises(MovedError):
        replica.client().xread({"{x}s": "$"}, block=100)
    with pytest.raises(MovedError):
        replica.client().xreadgroup("g", "bob", {"{x}s": ">"}, block=100)
    # Bad BLOCK values are the command's own errors.
    with pytest.raises(redis.ResponseError, match="timeout is negative"):
        c.execute_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "{x}s", ">")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        c.execute_command("XREAD", "BLOCK", "x", "STREAMS", "{x}s", "$")


def test_watch_in_one_slot(cluster):
    owner = cluster.leader_of("{w}k")
    c, other = owner.client(), owner.client()
    c.set("{w}k", 1)
    # Nobody writes the watched key: EXEC runs (the optimistic-locking loop of redis-py).
    with c.pipeline(transaction=True) as p:
        p.watch("{w}k")
        v = int(p.get("{w}k"))
        p.multi()
        p.set("{w}k", v + 1)
        assert p.execute() == [True]
    assert c.get("{w}k") == b"2"
    # Another connection writes it between WATCH and EXEC: EXEC is nil, nothing applies.
    with c.pipeline(transaction=True) as p:
        p.watch("{w}k")
        other.set("{w}k", 10)
        p.multi()
        p.set("{w}k", 99)
        p.rpush("{w}l", "x")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert c.get("{w}k") == b"10" and c.exists("{w}l") == 0
    # The watching connection's own write counts too, as in Redis (EXEC's nil prints as an
    # empty line, which _cli_script drops).
    out = _cli_script(owner.port, "WATCH {w}k\nSET {w}k 11\nMULTI\nINCR {w}k\nEXEC\nGET {w}k\n")
    assert out == ["OK", "OK", "OK", "QUEUED", "11"], out
    # UNWATCH forgets it; a watched key that expires before EXEC aborts.
    out = _cli_script(owner.port, "WATCH {w}k\nUNWATCH\nSET {w}k 1\nMULTI\nINCR {w}k\nEXEC\n")
    assert out[-1] == "2", out
    c.set("{w}t", "v", px=200)
    with c.pipeline(transaction=True) as p:
        p.watch("{w}t")
        time.sleep(0.4)
        p.multi()
        p.set("{w}k", "late")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert c.get("{w}k") == b"2"
    # Keys of two slots, WATCH then a transaction elsewhere, and WATCH on a non-leader.
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        c.execute_command("WATCH", "{w}k", "{x}k")
    out = _cli_script(owner.port, "WATCH {w}k\nMULTI\nSET {x}k 1\nEXEC\n")
    assert out[-1].startswith("CROSSSLOT"), out
    nonowner = next(n for n in cluster.nodes if n is not owner)
    with pytest.raises(MovedError):
        nonowner.client().execute_command("WATCH", "{w}k")
    # RedisCluster's optimistic-locking helper: a concurrent writer forces retries, and
    # every increment lands exactly once.
    rc = cluster.rc()
    rc.set("{w}n", 0)

    def bump(pipe):
        v = int(pipe.get("{w}n"))
        pipe.multi()
        pipe.set("{w}n", v + 1)

    stop = threading.Event()
    interfered = []

    def interfere():
        w = cluster.rc()
        while not stop.is_set():
            w.incr("{w}n", 1000)
            interfered.append(1)
            time.sleep(0.005)

    t = threading.Thread(target=interfere)
    t.start()
    try:
        for _ in range(20):
            rc.transaction(bump, "{w}n")
    finally:
        stop.set()
        t.join()
    # A lost update (SET over a concurrent INCRBY) would drop a 1000.
    assert interfered and int(rc.get("{w}n")) == 1000 * len(interfered) + 20


def _next_message(p, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(timeout=0.1)
        if m and m["type"] in ("message", "smessage"):
            return m
    return None


def test_publish_reaches_subscribers_on_every_node(cluster):
    subs = []
    for n in cluster.nodes:
        p = n.client().pubsub()
        p.subscribe("news")
        assert p.get_message(timeout=5)["type"] == "subscribe"
        subs.append(p)
    pub = cluster.nodes[0].client()
    # The count is this node's subscribers, as in Redis Cluster.
    assert pub.publish("news", "m1") == 1
    assert pub.publish("news", "m2") == 1
    for p in subs:
        got = [_next_message(p), _next_message(p)]
        assert [m["data"] for m in got if m] == [b"m1", b"m2"]
        p.close()


def test_sharded_pubsub_routes_by_slot(cluster):
    owner = cluster.leader_of("{sh}chan")
    other = next(n for n in cluster.nodes if n is not owner)
    with pytest.raises(MovedError):
        other.client().execute_command("SPUBLISH", "{sh}chan", "x")
    p = owner.client().pubsub()
    p.ssubscribe("{sh}chan")
    assert p.get_sharded_message(timeout=5)["type"] == "ssubscribe"
    rc = cluster.rc()
    assert rc.spublish("{sh}chan", "hello") == 1
    m = _next_message(p)
    assert m and m["type"] == "smessage" and m["data"] == b"hello"
    p.close()
    rc.close()


def _raw(port: int, data: bytes, until: bytes) -> bytes:
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(data)
        buf = b""
        while not buf.endswith(until):
            chunk = s.recv(65536)
            assert chunk, buf
            buf += chunk
        return buf


def test_resp3_writes_answer_in_resp3(cluster):
    owner = cluster.leader_of("{r3}z")
    hello = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
    zincr = b"*4\r\n$7\r\nZINCRBY\r\n$5\r\n{r3}z\r\n$3\r\n1.5\r\n$1\r\nm\r\n"
    multi = b"*1\r\n$5\r\nMULTI\r\n"
    exec_ = b"*1\r\n$4\r\nEXEC\r\n"
    out = _raw(owner.port, hello + zincr + multi + zincr + exec_, b"*1\r\n,3\r\n")
    # A double in RESP3, alone and inside EXEC's array.
    assert b"\r\n,1.5\r\n+OK\r\n+QUEUED\r\n*1\r\n,3\r\n" in out, out
    # RESP2 clients still get a bulk string.
    out = _raw(owner.port, zincr, b"\r\n4.5\r\n")
    assert out == b"$3\r\n4.5\r\n"
    rc = cluster.rc(protocol=3)
    rc.zadd("{r3}y", {"a": 1, "b": 2})
    assert rc.zpopmin("{r3}y") == [b"a", 1.0]     # a double, as RESP3 sends it
    rc.close()


def test_readonly_reads_on_replica(cluster):
    rc = cluster.rc()
    rc.set("ro-key", "v1")
    owner = cluster.leader_of("ro-key")
    replica = next(n for n in cluster.nodes if n is not owner)
    c = replica.client()
    with pytest.raises(MovedError):
        c.get("ro-key")
    assert c.execute_command("READONLY") is True
    deadline = time.monotonic() + 5
    while c.get("ro-key") != b"v1":     # a follower may lag a little
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with pytest.raises(MovedError):
        c.set("ro-key", "v2")           # writes still go to the leader
    assert c.execute_command("READWRITE") is True
    with pytest.raises(MovedError):
        c.get("ro-key")
    rc.close()


# -- failover under load ----------------------------------------------------------------

class WriteLoad:
    """Unique SETs and per-thread INCRs through RedisCluster; records what was acked."""

    def __init__(self, cluster: Cluster, tag: str, threads: int = 3):
        self.cluster, self.tag = cluster, tag
        self.stop_flag = threading.Event()
        self.acked_sets: list[str] = []
        self.incr_acked = [0] * threads
        self.incr_tried = [0] * threads
        self.errors = 0
        self.lock = threading.Lock()
        self.ready = threading.Semaphore(0)
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def _run(self, i: int) -> None:
        # No client-side retries: a call that timed out may have applied, and a retry would
        # apply it again; every call is then one attempt at most.
        while True:
            try:
                rc = self.cluster.rc(socket_timeout=1, retry=Retry(NoBackoff(), 0))
                break
            except redis.RedisError:    # a node died while the client was starting
                time.sleep(0.05)
        self.ready.release()
        seq = 0
        while not self.stop_flag.is_set():
            key = f"{self.tag}:s:{i}:{seq}"
            try:
                if rc.set(key, f"{i}-{seq}"):
                    with self.lock:
                        self.acked_sets.append(key)
            except Exception:   # unknown outcome: neither acked nor counted
                with self.lock:
                    self.errors += 1
            seq += 1
            self.incr_tried[i] += 1
            try:
                rc.incr(f"{self.tag}:c:{i}")
                self.incr_acked[i] += 1
            except Exception:
                with self.lock:
                    self.errors += 1
        rc.close()

    def start(self) -> "WriteLoad":
        for t in self.threads:
            t.start()
        for _ in self.threads:
            assert self.ready.acquire(timeout=30), "a load thread could not connect"
        return self

    def finish(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)

    def check(self) -> None:
        rc = self.cluster.rc(decode_responses=True)
        assert len(self.acked_sets) > 50, "the load made almost no progress"
        missing = []
        for key in self.acked_sets:
            _, _, i, seq = key.split(":")
            if rc.get(key) != f"{i}-{seq}":
                missing.append(key)
        assert not missing, f"{len(missing)} acknowledged SETs lost, e.g. {missing[:5]}"
        for i, (acked, tried) in enumerate(zip(self.incr_acked, self.incr_tried)):
            v = int(rc.get(f"{self.tag}:c:{i}") or 0)
            assert acked <= v <= tried, f"counter {i}: {v} not in [{acked}, {tried}]"
        rc.close()


def _writes_resume_after(cluster: Cluster, key: str, t0: float, limit: float = 20) -> float:
    """Liveness only (how fast is benches/cluster_bench.py's business): a write to key
    succeeds again within limit seconds."""
    rc = cluster.rc(socket_timeout=0.5)
    try:
        while True:
            try:
                rc.set(key, "after")
                return time.monotonic() - t0
            except redis.RedisError:
                assert time.monotonic() - t0 < limit, "writes did not resume"
                time.sleep(0.02)
    finally:
        rc.close()


def test_kill_leader_under_load(cluster):
    load = WriteLoad(cluster, "kill").start()
    time.sleep(1.0)
    victim = cluster.leader_of("kill-probe")
    t0 = time.monotonic()
    victim.kill()
    _writes_resume_after(cluster, "kill-probe", t0)
    time.sleep(1.0)
    load.finish()
    load.check()
    assert cluster.rc().get("kill-probe") == b"after"
    # The killed node comes back from its disk and catches up.
    victim.start()
    cluster.wait_ok()
    load.check()
    c = victim.client()
    c.execute_command("READONLY")
    deadline = time.monotonic() + 10
    while c.get("kill-probe") != b"after":
        assert time.monotonic() < deadline, "restarted node did not catch up"
        time.sleep(0.1)
    # It led nothing when it came back; the rebalancer hands it its share again.
    deadline = time.monotonic() + 30
    while True:
        counts = _leader_counts(cluster)
        if counts.get(victim.port, 0) >= GROUPS // 3 and \
                max(counts.values()) - min(counts.values()) <= 1 and len(counts) == 3:
            break
        assert time.monotonic() < deadline, f"leaders not spread again: {counts}"
        time.sleep(0.2)


def _leader_counts(cluster, groups: int = GROUPS) -> dict[int, int]:
    """Groups led per node port, from CLUSTER SLOTS (each group is an equal slot range)."""
    per_group = 16384 // groups
    counts: dict[int, int] = {}
    for r in cluster.alive()[0].client().execute_command("CLUSTER", "SLOTS"):
        port = int(r[2][1])
        counts[port] = counts.get(port, 0) + (r[1] - r[0] + 1) // per_group
    return counts


def test_sigstop_leader_under_load(cluster):
    load = WriteLoad(cluster, "stop").start()
    time.sleep(1.0)
    victim = cluster.leader_of("stop-probe")
    t0 = time.monotonic()
    os.kill(victim.proc.pid, signal.SIGSTOP)
    try:
        _writes_resume_after(cluster, "stop-probe", t0)
        time.sleep(1.0)
    finally:
        os.kill(victim.proc.pid, signal.SIGCONT)
    time.sleep(1.5)     # the old leader wakes up, learns the new term, steps down
    load.finish()
    load.check()
    cluster.wait_ok()


def test_full_restart_keeps_data(cluster):
    rc = cluster.rc(decode_responses=True)
    for i in range(100):
        rc.set(f"durable:{i}", str(i))
    rc.close()
    for n in cluster.nodes:
        n.kill()
    for n in cluster.nodes:
        n.start()
    cluster.wait_ok()
    rc = cluster.rc(decode_responses=True)
    assert [rc.get(f"durable:{i}") for i in range(100)] == [str(i) for i in range(100)]
    rc.close()


def _held_keys(node: Node) -> int:
    """Keys this node holds a replica of (a READONLY connection's DBSIZE)."""
    with node.client() as r:
        r.execute_command("READONLY")
        return r.dbsize()


def _wait(what: str, check, timeout: float = 60):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last is True:
                return
        except redis.RedisError as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"{what}: not after {timeout}s (last: {last})")


def test_join_and_forget_move_groups_under_load():
    """A fourth node joins a running cluster (`cluster-join`) during a write load: the
    metadata group gives it its share of the replicas, the groups move to it (learner,
    then voter, old member removed and emptied), it comes to lead some; then CLUSTER
    FORGET moves a node's replicas away and drops it. No acknowledged write is lost, every
    key keeps exactly three replicas, and the joined node keeps its id over a restart."""
    c = Cluster().start()
    try:
        rc = c.rc(decode_responses=True)
        for i in range(300):
            rc.set(f"j{i}", i)
        load = WriteLoad(c, "join").start()
        port, bus = _free_ports(2)
        d = os.path.join(c.root, "n4")
        os.makedirs(d)
        n4 = Node(port, bus, "", d, GROUPS, join=f"{HOST}:{c.nodes[1].port}")
        c.nodes.append(n4)
        n4.start()
        n4_id = n4.client(decode_responses=True).cluster("MYID")

        def joined():
            infos = [n.client().cluster("INFO") for n in c.nodes]
            if not all(int(i["cluster_known_nodes"]) == 4 for i in infos):
                return [i["cluster_known_nodes"] for i in infos]
            # 8 groups x 3 replicas over 4 nodes: 6 each, and n4 leads some.
            line = next(l for l in c.nodes[0].client(decode_responses=True)
                        .execute_command("CLUSTER", "NODES").splitlines() if l.startswith(n4_id))
            return len(line.split()) > 8 or line
        _wait("node 4 joined and leads some groups", joined)
        c.wait_ok()
        load.finish()
        load.check()
        assert all(rc.get(f"j{i}") == str(i) for i in range(300))
        total = sum(1 for _ in rc.scan_iter(count=1000))
        _wait("every key on exactly 3 nodes",
              lambda: sum(_held_keys(n) for n in c.nodes) == 3 * total
              or [_held_keys(n) for n in c.nodes])
        assert 0 < _held_keys(n4) < total

        # FORGET node 2: its replicas move away, it leaves the topology and is emptied.
        n2 = c.nodes[1]
        n2_id = n2.client(decode_responses=True).cluster("MYID")
        assert c.nodes[0].client().execute_command("CLUSTER", "FORGET", n2_id) in (b"OK", "OK", True)
        _wait("node 2 emptied", lambda: _held_keys(n2) == 0)
        for n in (c.nodes[0], c.nodes[2], n4):
            _wait("node 2 forgotten", lambda n=n: n2_id not in n.client(decode_responses=True)
                  .execute_command("CLUSTER", "NODES"))
        n2.stop()
        c.wait_ok()
        rc.close()
        rc = c.rc(decode_responses=True)
        assert all(rc.get(f"j{i}") == str(i) for i in range(300))
        _wait("every key on the 3 remaining nodes",
              lambda: all(_held_keys(n) == total for n in c.alive())
              or [_held_keys(n) for n in c.alive()])
        with pytest.raises(redis.ResponseError, match="Unknown node"):
            c.nodes[0].client().execute_command("CLUSTER", "FORGET", n2_id)

        # The joined node comes back with its id and its data.
        n4.stop()
        n4.start()
        assert n4.client(decode_responses=True).cluster("MYID") == n4_id
        c.wait_ok()
        _wait("node 4 reloaded its replicas", lambda: _held_keys(n4) == total or _held_keys(n4))
        assert all(rc.get(f"j{i}") == str(i) for i in range(300))
        rc.close()
    finally:
        c.stop()
        shutil.rmtree(c.root, ignore_errors=True)


FUNCTION_LIB = """#!lua name=clusterlib
redis.register_function('bump', function(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end)
redis.register_function{function_name='peek', callback=function(keys, args)
  return redis.call('GET', keys[1])
end, flags={'no-writes'}}
"""


def test_functions_are_cluster_wide(cluster):
    """FUNCTION LOAD goes through the metadata group to every node; FCALL is proposed
    with its library's code, so every replica applies the same write; redis-py's
    RedisCluster loads it on every master (the same code again is not an error)."""
    first = cluster.nodes[0].client()
    first.execute_command("FUNCTION", "FLUSH")
    assert first.execute_command("FUNCTION", "LOAD", FUNCTION_LIB) == b"clusterlib"
    with pytest.raises(redis.ResponseError, match="already exists"):
        first.execute_command("FUNCTION", "LOAD", FUNCTION_LIB.replace("bump", "bump2"))
    rc = cluster.rc(decode_responses=True)
    # redis-py sends it to every master; each answers the library's name.
    loaded = rc.function_load(FUNCTION_LIB)
    assert set(loaded.values()) == {"clusterlib"} and len(loaded) == 3, loaded
    for n in cluster.nodes:    # each node applies the metadata entry on its own
        _wait(f"clusterlib on node {n.port}", lambda n=n: [
            lib["library_name"] for lib in
            n.client(decode_responses=True).execute_command("FUNCTION", "LIST")
        ] == ["clusterlib"], timeout=10)
    keys = [f"fn:{i}" for i in range(40)]   # every group
    for k in keys:
        assert rc.fcall("bump", 1, k, 5) == 5
        assert rc.fcall("bump", 1, k, 2) == 7
        assert rc.fcall_ro("peek", 1, k) == "7"
    # Every node holds every group (3 nodes, 3 replicas) and applies the same writes
    # (followers a moment after the leader).
    for n in cluster.nodes:
        r = n.client(decode_responses=True)
        r.execute_command("READONLY")
        _wait(f"replicas on node {n.port}",
              lambda r=r: [r.get(k) for k in keys] == ["7"] * len(keys), timeout=10)
    with pytest.raises(redis.ResponseError, match="Function not found"):
        rc.fcall("nope", 1, "fn:0")
    owner = cluster.leader_of("fn:0")
    out = _cli_script(owner.port, "MULTI\nFCALL bump 1 fn:0 1\nEXEC\n")
    assert out[:2] == ["OK", "QUEUED"] and "not supported" in out[2], out
    # DELETE and FLUSH reach every node too.
    assert cluster.nodes[1].client().execute_command("FUNCTION", "DELETE", "clusterlib") == b"OK"
    for n in cluster.nodes:
        _wait(f"no library on node {n.port}",
              lambda n=n: n.client().execute_command("FUNCTION", "LIST") == [], timeout=10)
    with pytest.raises(redis.ResponseError, match="Function not found"):
        rc.fcall("bump", 1, "fn:0", 1)
    rc.close()


# -- scripts stay in their group -------------------------------------------------------

NON_LOCAL = "Script attempted to access a non local key in a cluster node"
CROSS_SLOT = "Script attempted to access keys that do not hash to the same slot"

SCRIPT_LIB = """#!lua name=grouplib
redis.register_function('setarg', function(keys, args)
  if keys[1] then redis.call('SET', keys[1], 'f') end
  return redis.call('SET', args[1], args[2])
end)
redis.register_function{function_name='setcross', callback=function(keys, args)
  return redis.call('SET', args[1], args[2])
end, flags={'allow-cross-slot-keys'}}
redis.register_function{function_name='getarg', callback=function(keys, args)
  return redis.call('GET', args[1])
end, flags={'no-writes'}}
"""


@pytest.fixture(scope="module")
def cluster_r2():
    """Three nodes, two replicas per group: each group lives on two of the three nodes,
    so a node can hold one key's group and not another's."""
    c = Cluster(extra=("--cluster-replicas", "2")).start()
    yield c
    c.stop()
    shutil.rmtree(c.root, ignore_errors=True)


def _readonly(node: Node) -> redis.Redis:
    r = node.client(decode_responses=True, single_connection_client=True)
    r.execute_command("READONLY")
    return r


def _holders(cluster: Cluster, key: str) -> frozenset[int]:
    """Ports of the nodes holding key's group (a READONLY read answers there, MOVED
    elsewhere)."""
    ports = set()
    for n in cluster.nodes:
        with _readonly(n) as r:
            try:
                r.exists(key)
                ports.add(n.port)
            except MovedError:
                pass
    return frozenset(ports)


def _group_of(cluster: Cluster, key: str) -> int:
    return cluster.nodes[0].client().cluster("KEYSLOT", key) * GROUPS // 16384


def _script_keys(cluster: Cluster):
    """x0; x1, of a group whose nodes are not x0's (so a node of x0's group lacks x1's);
    y, of x0's group and another slot."""
    x0 = "x0"
    held = _holders(cluster, x0)
    x1 = next(k for k in (f"x{i}" for i in range(1, 200)) if _holders(cluster, k) != held)
    y = next(k for k in (f"y{i}" for i in range(200))
             if _group_of(cluster, k) == _group_of(cluster, x0)
             and cluster.nodes[0].client().cluster("KEYSLOT", k)
             != cluster.nodes[0].client().cluster("KEYSLOT", x0))
    assert len(held) == 2 and held - _holders(cluster, x1), (held, _holders(cluster, x1))
    return x0, x1, y, held


def _replicas_agree(cluster: Cluster, held, key: str, value: str) -> None:
    """Waits until every node of key's group holds value at key."""
    for n in cluster.nodes:
        if n.port in held:
            with _readonly(n) as r:
                _wait(f"{key} on node {n.port}", lambda r=r: r.get(key) == value, timeout=10)


def _no_orphan(cluster: Cluster, key: str) -> None:
    """No node holds key (a READONLY KEYS lists every key a node holds)."""
    for n in cluster.nodes:
        with _readonly(n) as r:
            assert r.keys(key) == [], f"node {n.port} holds {key}"


def test_script_refuses_key_of_another_group(cluster_r2):
    """A script routed to x0's group that touches x1 of another group is refused with
    Redis Cluster's error, on the leader and alike on every replica's apply: what it wrote
    before stays (everywhere), x1 exists nowhere, and x0's replicas answer an EVAL_RO read
    the same. A shebang script stays in its declared slot."""
    c = cluster_r2
    x0, x1, y, held = _script_keys(c)
    r = c.leader_of(x0).client(decode_responses=True)
    with pytest.raises(redis.ResponseError, match=NON_LOCAL):
        r.eval(f"return redis.call('set','{x1}','boom')", 1, x0)
    with pytest.raises(redis.ResponseError, match=NON_LOCAL):
        r.eval(f"redis.call('set', KEYS[1], 'before'); redis.call('set','{x1}','boom')", 1, x0)
    _replicas_agree(c, held, x0, "before")
    # redis.pcall gets the error as a value; the script goes on.
    err = r.eval(f"local e = redis.pcall('set','{x1}','boom')\n"
                 "redis.call('set', KEYS[1], e['err']) return e['err']", 1, x0)
    assert NON_LOCAL in err, err
    _replicas_agree(c, held, x0, err)
    _no_orphan(c, x1)
    # A script without a shebang may touch another slot of its group; with one it may not.
    assert r.eval(f"return redis.call('set','{y}','same-group')", 1, x0) == "OK"
    with pytest.raises(redis.ResponseError, match=CROSS_SLOT):
        r.eval(f"#!lua\nreturn redis.call('set','{y}','boom')", 1, x0)
    assert r.eval(f"#!lua flags=allow-cross-slot-keys\nreturn redis.call('get','{y}')",
                  1, x0) == "same-group"
    # Every replica of x0's group answers an EVAL_RO read alike.
    for n in c.nodes:
        if n.port in held:
            with _readonly(n) as ro:
                _wait(f"{y} on node {n.port}", lambda ro=ro: ro.get(y) == "same-group",
                      timeout=10)
                assert ro.eval_ro("return redis.call('get', KEYS[1])", 1, x0) == r.get(x0)
                with pytest.raises(redis.ResponseError, match=NON_LOCAL):
                    ro.eval_ro(f"return redis.call('get','{x1}')", 1, x0)
    _no_orphan(c, x1)


def test_function_and_multi_refuse_key_of_another_group(cluster_r2):
    """FCALL, FCALL_RO and EVAL inside MULTI/EXEC follow the same rule."""
    c = cluster_r2
    x0, x1, y, held = _script_keys(c)
    first = c.nodes[0].client()
    assert first.execute_command("FUNCTION", "LOAD", "REPLACE", SCRIPT_LIB) == b"grouplib"
    for n in c.nodes:
        _wait(f"grouplib on node {n.port}", lambda n=n: len(
            n.client().execute_command("FUNCTION", "LIST")) == 1, timeout=10)
    r = c.leader_of(x0).client(decode_responses=True)
    with pytest.raises(redis.ResponseError, match=NON_LOCAL):
        r.fcall("setarg", 1, x0, x1, "boom")
    _replicas_agree(c, held, x0, "f")      # its write before the refused one stays
    with pytest.raises(redis.ResponseError, match=CROSS_SLOT):
        r.fcall("setarg", 1, x0, y, "boom")
    assert r.fcall("setcross", 1, x0, y, "fn") == "OK"
    with pytest.raises(redis.ResponseError, match=NON_LOCAL):
        r.fcall("setcross", 1, x0, x1, "boom")
    with pytest.raises(redis.ResponseError, match=NON_LOCAL):
        r.fcall_ro("getarg", 1, x0, x1)
    assert r.fcall_ro("getarg", 1, x0, x0) == "f"
    # MULTI/EXEC: the transaction is one entry; the script's refused call is its reply.
    p = r.pipeline(transaction=True)
    p.set(x0, "m").eval(f"return redis.call('set','{x1}','boom')", 1, x0).get(x0)
    res = p.execute(raise_on_error=False)
    assert res[0] is True and res[2] == "m", res
    assert isinstance(res[1], redis.ResponseError) and NON_LOCAL in str(res[1]), res
    _replicas_agree(c, held, x0, "m")
    _replicas_agree(c, held, y, "fn")
    _no_orphan(c, x1)
    first.execute_command("FUNCTION", "FLUSH")


def test_script_without_keys_runs_here_and_touches_no_key(cluster_r2):
    """numkeys 0: the script has no group; it runs on the node that got it (EVAL, FCALL
    and the _RO forms), and every key, even one led there, is non local to it."""
    c = cluster_r2
    x0, x1, _, _ = _script_keys(c)
    owner = c.leader_of(x0)
    owner.client().set(x0, "v")
    first = c.nodes[0].client()
    first.execute_command("FUNCTION", "LOAD", "REPLACE", SCRIPT_LIB)
    for n in c.nodes:
        _wait(f"grouplib on node {n.port}", lambda n=n: len(
            n.client().execute_command("FUNCTION", "LIST")) == 1, timeout=10)
        r = n.client(decode_responses=True)
        assert r.eval("return redis.call('ping')", 0) == "PONG"
        assert r.eval_ro("return ARGV[1]", 0, "a") == "a"
        for k in (x0, x1):
            with pytest.raises(redis.ResponseError, match=NON_LOCAL):
                r.eval(f"return redis.call('set','{k}','boom')", 0)
            with pytest.raises(redis.ResponseError, match=NON_LOCAL):
                r.eval_ro(f"return redis.call('get','{k}')", 0)
            with pytest.raises(redis.ResponseError, match=NON_LOCAL):
                r.fcall("setarg", 0, k, "boom")
            with pytest.raises(redis.ResponseError, match=NON_LOCAL):
                r.fcall_ro("getarg", 0, k)
        # A write without keys would reach every group the node holds.
        with pytest.raises(redis.ResponseError, match="without keys"):
            r.eval("return redis.call('flushall')", 0)
    with pytest.raises(redis.ResponseError, match="'no-cluster' flag is set"):
        owner.client().eval("#!lua flags=no-cluster\nreturn 1", 1, x0)
    assert owner.client().get(x0) == b"v"
    _no_orphan(c, x1)
    first.execute_command("FUNCTION", "FLUSH")


def test_join_with_a_password():
    """With requirepass on every node, a joining node logs in with masterauth (as a Redis
    replica does with its master), and so does a member forwarding CLUSTER JOIN to the
    metadata group's leader."""
    secret = ("--requirepass", "s3cret", "--masterauth", "s3cret")
    ports = _free_ports(4)
    root = tempfile.mkdtemp(prefix="ember-cluster-")
    boot = f"{HOST}:{ports[0]}@{ports[1]}"
    nodes = []
    try:
        for i, (p, b, join) in enumerate([(ports[0], ports[1], ""),
                                          (ports[2], ports[3], f"{HOST}:{ports[0]}")]):
            d = os.path.join(root, f"n{i + 1}")
            os.makedirs(d)
            n = Node(p, b, boot if not join else "", d, 4, join=join, extra=secret)
            nodes.append(n)
            n.start()
        r = redis.Redis(host=HOST, port=ports[2], password="s3cret", decode_responses=True)
        _wait("the second node joined",
              lambda: int(r.cluster("INFO")["cluster_known_nodes"]) == 2 or r.cluster("INFO"))
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=HOST, port=ports[2]).cluster("INFO")
    finally:
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)
