"""Pub/sub: SUBSCRIBE/PSUBSCRIBE/SSUBSCRIBE, PUBLISH/SPUBLISH, PUBSUB introspection, RESP2
subscribed mode and RESP3 push messages (validated against redis-server)."""

from __future__ import annotations

import socket
import time

import pytest
import redis

from helpers import IS_EMBER


def get_msg(p, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no message")


def test_subscribe_publish_unsubscribe(server, r):
    p = r.pubsub()
    p.subscribe("ch1", "ch2")
    assert get_msg(p) == {"type": "subscribe", "pattern": None, "channel": b"ch1", "data": 1}
    assert get_msg(p) == {"type": "subscribe", "pattern": None, "channel": b"ch2", "data": 2}
    assert r.publish("ch1", "hello") == 1
    assert get_msg(p) == {"type": "message", "pattern": None, "channel": b"ch1",
                          "data": b"hello"}
    assert r.publish("nobody", "x") == 0
    p.unsubscribe("ch1")
    assert get_msg(p)["data"] == 1
    p.unsubscribe()
    assert get_msg(p) == {"type": "unsubscribe", "pattern": None, "channel": b"ch2",
                          "data": 0}
    p.close()


def test_psubscribe_and_both_deliveries(server, r):
    p = r.pubsub()
    p.psubscribe("news.*")
    p.subscribe("news.tech")
    assert get_msg(p)["type"] == "psubscribe"
    assert get_msg(p)["data"] == 2
    assert r.publish("news.tech", "m") == 2
    got = [get_msg(p), get_msg(p)]
    types = sorted(m["type"] for m in got)
    assert types == ["message", "pmessage"]
    pm = [m for m in got if m["type"] == "pmessage"][0]
    assert pm["pattern"] == b"news.*" and pm["channel"] == b"news.tech"
    assert r.execute_command("PUBSUB", "NUMPAT") == 1
    p.punsubscribe()
    assert get_msg(p)["type"] == "punsubscribe"
    p.close()


def test_pubsub_introspection(server, r):
    p = r.pubsub()
    p.subscribe("a1", "a2", "b1")
    for _ in range(3):
        get_msg(p)
    assert sorted(r.pubsub_channels()) == [b"a1", b"a2", b"b1"]
    assert sorted(r.pubsub_channels("a*")) == [b"a1", b"a2"]
    assert r.pubsub_numsub("a1", "zz") == [(b"a1", 1), (b"zz", 0)]
    assert r.pubsub_numpat() == 0
    p.close()
    deadline = time.monotonic() + 5
    while r.pubsub_channels() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert r.pubsub_channels() == []


def test_shard_channels(server, r):
    p = r.pubsub()
    p.ssubscribe("s1")
    m = get_msg(p)
    assert m["type"] == "ssubscribe" and m["data"] == 1
    assert r.spublish("s1", "hi") == 1
    m = get_msg(p)
    assert m["type"] == "smessage" and m["data"] == b"hi"
    assert r.execute_command("PUBSUB", "SHARDCHANNELS") == [b"s1"]
    assert r.execute_command("PUBSUB", "SHARDNUMSUB", "s1") == [b"s1", 1]
    # Shard channels are a separate namespace.
    assert r.publish("s1", "x") == 0
    p.close()


def raw_conn(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.settimeout(5)
    return s


def read_until(s, marker: bytes, timeout=5.0):
    buf = b""
    deadline = time.monotonic() + timeout
    while marker not in buf and time.monotonic() < deadline:
        buf += s.recv(65536)
    return buf


def test_resp2_subscribed_mode_rules(server, r):
    s = raw_conn(server)
    s.sendall(b"SUBSCRIBE x\r\n")
    assert read_until(s, b":1\r\n").endswith(b":1\r\n")
    s.sendall(b"GET k\r\n")
    got = read_until(s, b"\r\n")
    assert got.startswith(b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE"
                          b" / PING / QUIT / RESET are allowed in this context")
    s.sendall(b"PING\r\n")
    assert read_until(s, b"\r\n\r\n") == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    s.sendall(b"PING hi\r\n")
    assert read_until(s, b"hi\r\n") == b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
    s.sendall(b"UNSUBSCRIBE\r\n")
    assert read_until(s, b":0\r\n").endswith(b":0\r\n")
    s.sendall(b"PING\r\n")
    assert read_until(s, b"\r\n") == b"+PONG\r\n"
    s.close()


def test_resp3_push_messages_and_commands_allowed(server, r):
    s = raw_conn(server)
    s.sendall(b"HELLO 3\r\n")
    read_until(s, b"modules")
    s.sendall(b"SUBSCRIBE ch\r\n")
    got = read_until(s, b":1\r\n")
    assert got.endswith(b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
    s.sendall(b"SET k v\r\n")
    assert read_until(s, b"+OK\r\n").endswith(b"+OK\r\n")
    r.publish("ch", "m")
    assert read_until(s, b"$1\r\nm\r\n") == b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n"
    s.close()


def test_unsubscribe_without_subscriptions(server, r):
    s = raw_conn(server)
    s.sendall(b"UNSUBSCRIBE\r\n")
    assert read_until(s, b":0\r\n") == b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
    s.sendall(b"PUNSUBSCRIBE\r\n")
    assert read_until(s, b":0\r\n") == b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
    s.close()


def test_reset_leaves_subscribed_mode(server, r):
    s = raw_conn(server)
    s.sendall(b"SUBSCRIBE x\r\n")
    read_until(s, b":1\r\n")
    s.sendall(b"RESET\r\n")
    assert read_until(s, b"+RESET\r\n").endswith(b"+RESET\r\n")
    assert r.pubsub_numsub("x") == [(b"x", 0)]
    s.sendall(b"GET k\r\n")
    assert read_until(s, b"\r\n") == b"$-1\r\n"
    s.close()


def test_client_list_pubsub_fields(server, r):
    p = r.pubsub()
    p.subscribe("a", "b")
    p.psubscribe("c*")
    for _ in range(3):
        get_msg(p)
    lines = [c for c in r.client_list() if c.get("sub") == "2"]
    assert len(lines) == 1
    assert lines[0]["psub"] == "1" and "P" in lines[0]["flags"]
    p.close()


def test_many_subscribers_on_many_connections(server, r):
    subs = []
    for i in range(12):
        p = server.client().pubsub()
        p.subscribe("fan")
        get_msg(p)
        subs.append(p)
    for i in range(5):
        assert r.publish("fan", str(i)) == 12
    for p in subs:
        assert [get_msg(p)["data"] for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]
        p.close()


@pytest.mark.skipif(not IS_EMBER, reason="the limit is 32mb in both; Ember's kill is checked")
def test_slow_subscriber_is_disconnected_by_output_limit(server, r):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"SUBSCRIBE flood\r\n")
    time.sleep(0.2)
    payload = b"x" * (1 << 20)
    # Never read: the server's queue for this client passes the 32 MB hard limit.
    for _ in range(80):
        r.publish("flood", payload)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and r.pubsub_numsub("flood")[0][1] > 0:
        time.sleep(0.05)
    assert r.pubsub_numsub("flood") == [(b"flood", 0)]
    s.close()


@pytest.mark.parametrize("proto", [2, 3])
def test_subscribe_confirmations_are_sent_with_client_reply_off(server, r, raw, proto):
    # Redis sends pub/sub traffic whatever CLIENT REPLY says, in RESP2 and RESP3: the
    # (un)subscribe confirmations and the messages (unit/pubsub "PubSub messages with CLIENT
    # REPLY OFF", "Keyspace notifications: we receive keyspace notifications").
    c = raw(timeout=5)
    c.cmd("HELLO", str(proto))
    c.send_cmd("CLIENT", "REPLY", "OFF")
    c.send_cmd("SUBSCRIBE", "channel")
    assert c.read_reply() == [b"subscribe", b"channel", 1]
    c.send_cmd("PSUBSCRIBE", "ch*")
    assert c.read_reply() == [b"psubscribe", b"ch*", 2]
    assert r.publish("channel", "hello") == 2
    assert c.read_reply() == [b"message", b"channel", b"hello"]
    assert c.read_reply() == [b"pmessage", b"ch*", b"channel", b"hello"]
    c.send_cmd("UNSUBSCRIBE", "channel")
    assert c.read_reply() == [b"unsubscribe", b"channel", 1]
    c.send_cmd("PUNSUBSCRIBE", "ch*")
    assert c.read_reply() == [b"punsubscribe", b"ch*", 0]
    # Plain replies stay off.
    c.send_cmd("PING")
    c.send_cmd("CLIENT", "REPLY", "ON")
    assert c.read_reply() == "OK"
