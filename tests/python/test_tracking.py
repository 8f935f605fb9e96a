"""Client-side caching: CLIENT TRACKING (default, BCAST, PREFIX, OPTIN, OPTOUT, NOLOOP,
REDIRECT), CLIENT CACHING, GETREDIR, TRACKINGINFO; RESP3 invalidation pushes and RESP2
`__redis__:invalidate` messages (validated against redis-server)."""

from __future__ import annotations

import socket
import time

import pytest


class Resp3:
    """A minimal RESP3 connection that keeps push frames apart from replies."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.settimeout(5)
        self.buf = b""
        self.pushes = []
        self.cmd("HELLO", "3")

    def close(self):
        self.s.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+",):
            return rest.decode()
        if t == b"-":
            return RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"_":
            return None
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            items = [self._read() for _ in range(n)]
            return ("push", items) if t == b">" else items
        if t == b"%":
            n = int(rest)
            return {self._read_key(): self._read() for _ in range(n)}
        raise AssertionError(f"unexpected {line!r}")

    def _read_key(self):
        k = self._read()
        return k.decode() if isinstance(k, bytes) else k

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        while True:
            v = self._read()
            if isinstance(v, tuple):
                self.pushes.append(v[1])
                continue
            return v

    def wait_push(self, timeout=5.0):
        if self.pushes:
            return self.pushes.pop(0)
        self.s.settimeout(timeout)
        v = self._read()
        assert isinstance(v, tuple), v
        return v[1]

    def no_push(self, wait=0.2):
        time.sleep(wait)
        self.s.settimeout(0.05)
        try:
            self.buf += self.s.recv(65536)
        except socket.timeout:
            pass
        self.s.settimeout(5)
        return not self.buf and not self.pushes


@pytest.fixture
def c3(server, r):
    c = Resp3(server.port)
    yield c
    c.close()


def test_default_mode_invalidates_keys_read(server, r, c3):
    r.set("k", "v")
    assert c3.cmd("CLIENT", "TRACKING", "ON") == "OK"
    assert c3.cmd("GET", "k") == b"v"
    r.set("k", "v2")
    assert c3.wait_push() == [b"invalidate", [b"k"]]
    # Invalidated once: the key is forgotten until read again.
    r.set("k", "v3")
    assert c3.no_push()
    c3.cmd("GET", "k")
    r.delete("k")
    assert c3.wait_push() == [b"invalidate", [b"k"]]


def test_own_writes_invalidate_unless_noloop(server, r, c3):
    c3.cmd("CLIENT", "TRACKING", "ON")
    c3.cmd("GET", "a")
    c3.cmd("SET", "a", "1")
    assert c3.wait_push() == [b"invalidate", [b"a"]]
    c3.cmd("CLIENT", "TRACKING", "ON", "NOLOOP")
    c3.cmd("GET", "a")
    c3.cmd("SET", "a", "2")
    assert c3.no_push()
    # The own write still dropped the key from the table: read it again.
    c3.cmd("GET", "a")
    r.set("a", "3")
    assert c3.wait_push() == [b"invalidate", [b"a"]]


def test_bcast_prefixes(server, r, c3):
    assert c3.cmd("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX",
                  "obj:") == "OK"
    r.set("user:1", "x")
    assert c3.wait_push() == [b"invalidate", [b"user:1"]]
    r.set("other", "x")
    assert c3.no_push()
    r.lpush("obj:list", "a")
    assert c3.wait_push() == [b"invalidate", [b"obj:list"]]
    info = c3.cmd("CLIENT", "TRACKINGINFO")
    assert set(info["flags"]) == {b"on", b"bcast"}
    assert sorted(info["prefixes"]) == [b"obj:", b"user:"]


def test_bcast_invalidations_of_one_command_come_in_one_message_per_prefix(server, r, raw):
    # Redis gathers BCAST invalidations and sends one message per prefix with every key
    # written (unit/tracking "The connection gets invalidation messages about all the
    # keys"; one message per key desynchronised the unit's reads until it hung).
    sub = raw(timeout=5)
    sub_id = sub.cmd("CLIENT", "ID")
    sub.send_cmd("SUBSCRIBE", "__redis__:invalidate")
    assert sub.read_reply()[0] == b"subscribe"
    t = raw(timeout=5)
    # Keys read in default mode before switching to BCAST do not get messages of their own.
    assert t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", sub_id) == "OK"
    t.cmd("MGET", "a", "b", "c")
    assert t.cmd("CLIENT", "TRACKING", "OFF") == "OK"
    assert t.cmd("CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", sub_id) == "OK"
    assert t.cmd("MSET", "a", "1", "b", "2", "c", "3") == "OK"
    msg = sub.read_reply()
    assert msg[:2] == [b"message", b"__redis__:invalidate"]
    assert sorted(msg[2]) == [b"a", b"b", b"c"]
    assert t.cmd("CLIENT", "TRACKING", "OFF") == "OK"
    assert t.cmd("CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", sub_id,
                 "PREFIX", "a:", "PREFIX", "b:") == "OK"
    t.cmd("MULTI")
    for k in ("a:1", "a:2", "b:1", "b:2", "c:1"):
        t.cmd("INCR", k)
    assert t.cmd("EXEC") == [1, 1, 1, 1, 1]
    got = sorted(sorted(sub.read_reply()[2]) for _ in range(2))
    assert got == [[b"a:1", b"a:2"], [b"b:1", b"b:2"]]
    # Nothing else arrives (c:1 has no prefix): a marker write comes next.
    r.set("a:marker", "x")
    assert sub.read_reply()[2] == [b"a:marker"]


def test_script_read_tracks_its_declared_keys(server, r, c3):
    # Redis 7.0 (unit/tracking "Tracking only occurs for scripts when a command calls a
    # read-only command"): a script that runs a read command tracks the keys it declared;
    # one that only writes, or EVAL_RO that only PINGs, tracks nothing.
    assert c3.cmd("CLIENT", "TRACKING", "ON") == "OK"
    c3.cmd("EVAL", "redis.call('set', 'key3', 'bar')", 2, "key1", "key2")
    c3.cmd("EVAL_RO", "redis.call('ping')", 2, "key1", "key2")
    r.mset({"key2": 1, "key1": 1})
    assert c3.no_push()
    c3.cmd("EVAL", "redis.call('get', 'key3')", 2, "key1", "key2")
    r.mset({"key2": 2, "key1": 2})
    assert c3.wait_push() == [b"invalidate", [b"key2"]]
    assert c3.wait_push() == [b"invalidate", [b"key1"]]
    c3.cmd("EVAL_RO", "redis.call('get', 'key1')", 2, "key1", "key2")
    r.mset({"key2": 3, "key1": 3})
    assert c3.wait_push() == [b"invalidate", [b"key2"]]
    assert c3.wait_push() == [b"invalidate", [b"key1"]]
    assert c3.cmd("PING") == "PONG"
    assert c3.no_push()


def test_optin_and_optout(server, r, c3):
    c3.cmd("CLIENT", "TRACKING", "ON", "OPTIN")
    c3.cmd("GET", "x")
    r.set("x", "1")
    assert c3.no_push()
    assert c3.cmd("CLIENT", "CACHING", "YES") == "OK"
    c3.cmd("GET", "x")
    r.set("x", "2")
    assert c3.wait_push() == [b"invalidate", [b"x"]]
    c3.cmd("CLIENT", "TRACKING", "OFF")
    c3.cmd("CLIENT", "TRACKING", "ON", "OPTOUT")
    assert c3.cmd("CLIENT", "CACHING", "NO") == "OK"
    c3.cmd("GET", "y")
    r.set("y", "1")
    assert c3.no_push()
    c3.cmd("GET", "y")
    r.set("y", "2")
    assert c3.wait_push() == [b"invalidate", [b"y"]]


def test_flushall_invalidates_everything(server, r, c3):
    c3.cmd("CLIENT", "TRACKING", "ON")
    c3.cmd("GET", "k")
    r.flushall()
    assert c3.wait_push() == [b"invalidate", None]


def test_redirect_to_resp2_subscriber(server, r, raw):
    sub = raw()
    sub_id = sub.cmd("CLIENT", "ID")
    sub.send_cmd("SUBSCRIBE", "__redis__:invalidate")
    assert sub.read_reply()[0] == b"subscribe"
    t = raw()
    assert t.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", sub_id) == "OK"
    assert t.cmd("CLIENT", "GETREDIR") == sub_id
    t.cmd("GET", "rk")
    r.set("rk", "v")
    assert sub.read_reply() == [b"message", b"__redis__:invalidate", [b"rk"]]


def test_getredir_and_trackinginfo_when_off(server, r, raw):
    c = raw()
    assert c.cmd("CLIENT", "GETREDIR") == -1
    info = c.cmd("CLIENT", "TRACKINGINFO")
    assert info[0] == b"flags" and info[1] == [b"off"]
    assert info[2:] == [b"redirect", -1, b"prefixes", []]
    c.cmd("CLIENT", "TRACKING", "ON")
    assert c.cmd("CLIENT", "GETREDIR") == 0


def test_tracking_errors(server, r, raw):
    c = raw()
    e = lambda *a: str(c.cmd(*a))  # noqa: E731
    assert "PREFIX option requires BCAST mode to be enabled" in e(
        "CLIENT", "TRACKING", "ON", "PREFIX", "p")
    assert "OPTIN and OPTOUT are not compatible with BCAST" in e(
        "CLIENT", "TRACKING", "ON", "BCAST", "OPTIN")
    assert "You can't specify both OPTIN mode and OPTOUT mode" in e(
        "CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT")
    assert "The client ID you want redirect to does not exist" in e(
        "CLIENT", "TRACKING", "ON", "REDIRECT", "987654")
    assert "overlaps with another provided prefix" in e(
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "foo", "PREFIX", "foobar")
    assert "syntax error" in e("CLIENT", "TRACKING", "MAYBE")
    assert "CLIENT CACHING can be called only" in e("CLIENT", "CACHING", "YES")
    c.cmd("CLIENT", "TRACKING", "ON", "OPTIN")
    assert "CLIENT CACHING NO is only valid" in e("CLIENT", "CACHING", "NO")
    assert "You can't switch BCAST mode" in e("CLIENT", "TRACKING", "ON", "BCAST")
    assert "You can't switch OPTIN/OPTOUT mode" in e("CLIENT", "TRACKING", "ON", "OPTOUT")


def test_expired_key_is_invalidated(server, r, c3):
    r.set("t", "v", px=100)
    c3.cmd("CLIENT", "TRACKING", "ON")
    c3.cmd("GET", "t")
    assert c3.wait_push(timeout=5) == [b"invalidate", [b"t"]]


def test_info_tracking_clients(server, r, c3):
    c3.cmd("CLIENT", "TRACKING", "ON")
    assert r.info("clients")["tracking_clients"] == 1
    c3.cmd("CLIENT", "TRACKING", "OFF")
    assert r.info("clients")["tracking_clients"] == 0


def test_tracking_table_max_keys_forgets_and_invalidates(start_server):
    """tracking-table-max-keys: past the limit the server forgets remembered keys and tells
    the clients that may cache them, as if they had been written (Redis's unit/tracking
    waited forever for these once the directive was accepted)."""
    srv = start_server()
    r = srv.client()
    c = Resp3(srv.port)
    try:
        assert r.config_get("tracking-table-max-keys") == {"tracking-table-max-keys": "1000000"}
        c.cmd("CLIENT", "TRACKING", "ON")
        for k in ("a", "b", "c"):
            c.cmd("GET", k)
        assert r.info("stats")["tracking_total_keys"] == 3
        assert r.config_set("tracking-table-max-keys", 1) is True
        evicted = []
        while len(evicted) < 2:
            push = c.wait_push()
            assert push[0] == b"invalidate"
            evicted += push[1]
        assert len(set(evicted)) == 2 and set(evicted) < {b"a", b"b", b"c"}
        assert r.info("stats")["tracking_total_keys"] == 1
        # Reading a new key pushes another one out.
        c.cmd("GET", "d")
        push = c.wait_push()
        assert push[0] == b"invalidate" and len(push[1]) == 1
        assert r.info("stats")["tracking_total_keys"] == 1
    finally:
        c.close()


def test_redirect_to_a_resp3_client_that_never_subscribed(server, r, c3):
    """A REDIRECT target needs no subscription or tracking of its own: a RESP3 client gets
    the invalidation pushes, with CLIENT REPLY OFF too (Redis's unit/tracking waited
    forever for this one)."""
    target = Resp3(server.port)
    try:
        tid = target.cmd("CLIENT", "ID")
        assert c3.cmd("CLIENT", "TRACKING", "ON", "REDIRECT", tid) == "OK"
        r.set("redir:k", "v")
        assert c3.cmd("GET", "redir:k") == b"v"
        target.s.sendall(b"CLIENT REPLY OFF\r\n")
        r.set("redir:k", "v2")
        assert target.wait_push() == [b"invalidate", [b"redir:k"]]
        assert c3.no_push()
    finally:
        target.close()
