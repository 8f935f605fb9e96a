"""Format versions on real processes: upgrades from the previous release, and refusals of
files written by a newer one.

Upgrade tests need the previous release's binary in ``EMBER_PREV_BIN`` (e.g. built from
commit d2f159f, the last one without format versions) and skip without it. Each starts
that binary, writes under load, stops it while the load runs, starts this binary
(``EMBER_BIN``) on the same directory and checks that every acknowledged write is there
and that the node keeps serving (and restarts again) with the data it wrote on top:

- a single node with ``appendonly yes`` (an RDB-preamble base written by a rewrite under
  load, then the incr file this binary goes on appending to);
- a single node with only ``dump.rdb`` (written by ``SHUTDOWN SAVE``);
- a one-node cluster whose group took a Raft snapshot (over 10,000 entries), so the new
  binary installs the old snapshot and replays the old log after it;
- a three-node cluster.

The refusal tests need no old binary: this binary must exit non-zero, naming the format
and the versions, on an RDB or an AOF that declares the next format version.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time

import pytest
import redis

from helpers import HOST, IS_REDIS, find_ember_bin, free_port

pytestmark = pytest.mark.skipif(IS_REDIS, reason="starts Ember processes itself")

PREV_BIN = os.environ.get("EMBER_PREV_BIN", "")
needs_prev = pytest.mark.skipif(not PREV_BIN, reason="EMBER_PREV_BIN (the previous release's "
                                "binary) is not set")
SEC = 1_000_000_000
# This build: the binary under test, whatever EMBER_BIN says later in a test.
NEW_BIN = str(find_ember_bin())


class Proc:
    """One Ember process (`binary`) in `workdir` on `port`."""

    def __init__(self, binary: str, workdir: str, port: int, *extra: str):
        self.binary, self.workdir, self.port = binary, workdir, port
        self.argv = [binary, "--port", str(port), "--bind", HOST, "--dir", workdir, *extra]
        self.logpath = os.path.join(workdir, "server.log")
        log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=workdir)
        log.close()

    def wait_ready(self, timeout: float = 60) -> "Proc":
        deadline = time.monotonic() + timeout
        while True:
            try:
                c = self.client()
                c.ping()
                c.close()
                return self
            except (redis.ConnectionError, redis.BusyLoadingError):
                assert self.proc.poll() is None, f"exited during start-up:\n{self.output()}"
                assert time.monotonic() < deadline, self.output()
                time.sleep(0.05)

    def output(self) -> str:
        with open(self.logpath, "rb") as f:
            return f.read()[-20000:].decode(errors="replace")

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host=HOST, port=self.port, **kw)

    def terminate(self) -> None:
        """SIGTERM (what a service manager sends on an upgrade), then wait."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def exit_code(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout)


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="ember-upgrade-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Load:
    """Writers on one node: per thread, unique SETs, an RPUSH list and an INCR counter;
    records what was acknowledged. A call that failed has an unknown outcome."""

    def __init__(self, port: int, tag: str, threads: int = 3):
        self.port, self.tag = port, tag
        self.stop_flag = threading.Event()
        self.acked: list[list[int]] = [[] for _ in range(threads)]
        self.tried = [0] * threads
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def _run(self, i: int) -> None:
        c = redis.Redis(host=HOST, port=self.port, socket_timeout=5)
        seq = 0
        while not self.stop_flag.is_set():
            self.tried[i] = seq + 1
            try:
                p = c.pipeline(transaction=True)
                p.set(f"{self.tag}:s:{i}:{seq}", f"{i}-{seq}")
                p.rpush(f"{self.tag}:l:{i}", seq)
                p.incr(f"{self.tag}:c:{i}")
                p.execute()
                self.acked[i].append(seq)
            except redis.RedisError:
                if self.stop_flag.is_set():
                    break
                time.sleep(0.01)
            seq += 1
        c.close()

    def start(self) -> "Load":
        for t in self.threads:
            t.start()
        return self

    def wait_for(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while sum(len(a) for a in self.acked) < n:
            assert time.monotonic() < deadline, "the load made too little progress"
            time.sleep(0.05)

    def finish(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)

    def check(self, c: redis.Redis) -> None:
        assert sum(len(a) for a in self.acked) > 50, "the load made almost no progress"
        for i, acked in enumerate(self.acked):
            missing = [s for s in acked
                       if c.get(f"{self.tag}:s:{i}:{s}") != f"{i}-{s}".encode()]
            assert not missing, f"thread {i}: acknowledged SETs lost, e.g. {missing[:5]}"
            # Transactions: all or nothing; an unacknowledged one may be there too.
            lst = [int(x) for x in c.lrange(f"{self.tag}:l:{i}", 0, -1)]
            assert lst == sorted(lst) and set(acked) <= set(lst), (acked[-5:], lst[-5:])
            v = int(c.get(f"{self.tag}:c:{i}") or 0)
            assert v == len(lst) and len(acked) <= v <= self.tried[i], (v, len(acked))


def ember_only_data(c: redis.Redis) -> dict:
    """Keys that use Ember's extensions: tags, a nanosecond deadline, a vector set."""
    at = time.time_ns() + 3600 * SEC + 123_457
    c.set("x:tagged", "v")
    c.execute_command("TAG.SET", "x:tagged", "t1", "t2")
    c.set("x:nttl", "v")
    assert c.execute_command("NEXPIREAT", "x:nttl", at) == 1
    c.execute_command("VADD", "x:vs", "VALUES", "3", "1", "0", "0", "a")
    c.execute_command("VADD", "x:vs", "VALUES", "3", "0", "1", "0", "b")
    return ember_view(c)


def ember_view(c: redis.Redis) -> dict:
    return {
        "tags": sorted(c.execute_command("TAG.GET", "x:tagged")),
        "nexpiretime": c.execute_command("NEXPIRETIME", "x:nttl"),
        "vcard": c.execute_command("VCARD", "x:vs"),
        "vsim": c.execute_command("VSIM", "x:vs", "VALUES", "3", "1", "0", "0", "COUNT", "1"),
    }


# -- single node -----------------------------------------------------------------------

@needs_prev
def test_upgrade_single_node_aof_under_load(workdir):
    port = free_port()
    args = ("--appendonly", "yes", "--save", "", "--appendfsync", "always")
    old = Proc(PREV_BIN, workdir, port, *args).wait_ready()
    ext = ember_only_data(old.client())
    load = Load(port, "aof").start()
    load.wait_for(200)
    # A rewrite under load: the old binary writes an RDB-preamble base (with ember-ext
    # fields) and a fresh incr file while the load goes on.
    old.client().bgrewriteaof()
    load.wait_for(600)
    old.terminate()
    load.finish()

    new = Proc(NEW_BIN, workdir, port, *args).wait_ready()
    c = new.client()
    load.check(c)
    assert ember_view(c) == ext
    # It keeps serving and appending (to the old binary's incr file), and comes back again.
    more = Load(port, "aof2").start()
    more.wait_for(200)
    new.terminate()
    more.finish()
    again = Proc(NEW_BIN, workdir, port, *args).wait_ready()
    c = again.client()
    load.check(c)
    more.check(c)
    assert ember_view(c) == ext
    again.terminate()


@needs_prev
def test_upgrade_single_node_rdb(workdir):
    port = free_port()
    old = Proc(PREV_BIN, workdir, port, "--save", "").wait_ready()
    ext = ember_only_data(old.client())
    load = Load(port, "rdb").start()
    load.wait_for(300)
    load.finish()
    try:
        old.client().shutdown(save=True)
    except redis.ConnectionError:
        pass
    assert old.exit_code() == 0
    new = Proc(NEW_BIN, workdir, port, "--save", "").wait_ready()
    c = new.client()
    load.check(c)
    assert ember_view(c) == ext
    # This binary's own dump.rdb (with the ember-fmt field) loads back too.
    c.set("after", "upgrade")
    try:
        c.shutdown(save=True)
    except redis.ConnectionError:
        pass
    assert new.exit_code() == 0
    again = Proc(NEW_BIN, workdir, port, "--save", "").wait_ready()
    c = again.client()
    load.check(c)
    assert c.get("after") == b"upgrade"
    assert ember_view(c) == ext
    again.terminate()


# -- cluster ---------------------------------------------------------------------------

def _cluster_mod():
    import test_cluster  # the process harness of the cluster tests
    return test_cluster


@needs_prev
def test_upgrade_one_node_cluster_with_a_raft_snapshot(workdir, monkeypatch):
    """Over 10,000 entries in one group: the old binary's Raft snapshot, and the log after
    it, are what the new binary starts from."""
    tc = _cluster_mod()
    monkeypatch.setenv("EMBER_BIN", PREV_BIN)
    cl = tc.Cluster(n=1, groups=1, extra=("--cluster-fsync", "no"))
    node = cl.nodes[0]
    try:
        cl.start()
        acked: list[list[int]] = [[] for _ in range(8)]
        stop = threading.Event()

        def writer(i: int) -> None:
            c = node.client(socket_timeout=5)
            seq = 0
            while not stop.is_set():
                try:
                    c.set(f"{{s{i}}}:{seq}", seq)
                    acked[i].append(seq)
                except redis.RedisError:
                    if stop.is_set():
                        break
                    time.sleep(0.01)
                seq += 1

        threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 300
        while sum(map(len, acked)) < 10_500:
            assert time.monotonic() < deadline, f"only {sum(map(len, acked))} writes"
            time.sleep(0.1)
        # Stopped while the writers still run.
        node.stop()
        stop.set()
        for t in threads:
            t.join(30)
        assert "build snapshot" in node.output(), "the old binary took no Raft snapshot"

        monkeypatch.setenv("EMBER_BIN", NEW_BIN)
        node.start()
        cl.wait_ok()
        c = node.client()
        for i, seqs in enumerate(acked):
            got = c.mget([f"{{s{i}}}:{s}" for s in seqs]) if seqs else []
            missing = [s for s, v in zip(seqs, got) if v != str(s).encode()]
            assert not missing, f"writer {i}: acknowledged writes lost, e.g. {missing[:5]}"
        c.set("{s0}:after", "upgrade")
        node.stop()
        node.start()
        cl.wait_ok()
        assert node.client().get("{s0}:after") == b"upgrade"
    finally:
        cl.stop()
        shutil.rmtree(cl.root, ignore_errors=True)


@needs_prev
def test_upgrade_three_node_cluster_under_load(monkeypatch):
    tc = _cluster_mod()
    monkeypatch.setenv("EMBER_BIN", PREV_BIN)
    cl = tc.Cluster()
    try:
        cl.start()
        load = tc.WriteLoad(cl, "up").start()
        time.sleep(3.0)
        cl.stop()           # every node, one after the other, while the load runs
        load.finish()
        monkeypatch.setenv("EMBER_BIN", NEW_BIN)
        for n in cl.nodes:
            n.start()
        cl.wait_ok(60)
        cl.wait_connected()
        load.check()
        # Serving: new writes land and survive another restart of every node.
        more = tc.WriteLoad(cl, "up2").start()
        time.sleep(2.0)
        more.finish()
        more.check()
        cl.stop()
        for n in cl.nodes:
            n.start()
        cl.wait_ok(60)
        load.check()
        more.check()
    finally:
        cl.stop()
        shutil.rmtree(cl.root, ignore_errors=True)


# -- refusals of a newer format --------------------------------------------------------

def _rdb_with_format(version: bytes) -> bytes:
    """REDIS0010, AUX ember-fmt = version, one string key, EOF, checksum 0 (not checked)."""
    def s(b: bytes) -> bytes:
        assert len(b) < 64
        return bytes([len(b)]) + b
    body = b"REDIS0010" + b"\xfa" + s(b"ember-fmt") + s(version)
    body += b"\x00" + s(b"k") + s(b"v") + b"\xff"
    return body + struct.pack("<Q", 0)


def _refused(workdir: str, *extra: str) -> str:
    p = Proc(NEW_BIN, workdir, free_port(), *extra)
    try:
        code = p.exit_code(60)
    finally:
        if p.proc.poll() is None:
            p.proc.kill()
    assert code != 0, p.output()
    return p.output()


def test_rdb_of_a_newer_format_is_refused(workdir):
    # The same file with version 1 loads: the crafted layout is right.
    with open(os.path.join(workdir, "dump.rdb"), "wb") as f:
        f.write(_rdb_with_format(b"1"))
    p = Proc(NEW_BIN, workdir, free_port(), "--save", "").wait_ready()
    assert p.client().get("k") == b"v"
    p.terminate()
    with open(os.path.join(workdir, "dump.rdb"), "wb") as f:
        f.write(_rdb_with_format(b"2"))
    out = _refused(workdir, "--save", "")
    assert ("the RDB file uses Ember format version 2 (AUX field ember-fmt); this build "
            "reads Ember format versions 1 to 1") in out, out


def test_aof_of_a_newer_format_is_refused(workdir):
    aofdir = os.path.join(workdir, "appendonlydir")
    os.makedirs(aofdir)
    with open(os.path.join(aofdir, "appendonly.aof.manifest"), "w") as f:
        f.write("file appendonly.aof.1.incr.aof seq 1 type i\n")

    first = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"

    def incr(version: bytes) -> None:
        with open(os.path.join(aofdir, "appendonly.aof.1.incr.aof"), "wb") as f:
            f.write(first)
            f.write(b"#ember-fmt:" + version + b"\r\n")
            f.write(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n")

    args = ("--appendonly", "yes", "--save", "")
    incr(b"1")
    p = Proc(NEW_BIN, workdir, free_port(), *args).wait_ready()
    assert p.client().mget("a", "b") == [b"1", b"2"]
    p.terminate()
    incr(b"2")
    out = _refused(workdir, *args)
    assert (f"the file uses Ember AOF format version 2 (annotation #ember-fmt at offset "
            f"{len(first)}); this build reads Ember AOF format versions 1 to 1") in out, out
    assert "appendonly.aof.1.incr.aof" in out, out
