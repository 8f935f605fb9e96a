"""client-output-buffer-limit: Redis's three classes (normal, replica/slave, pubsub) as a
real configuration (config file, command line, CONFIG GET/SET), enforced on slow
subscribers and on normal clients, and a closed client logged once."""

from __future__ import annotations

import socket
import time

import pytest
import redis

from helpers import IS_EMBER

DEFAULT = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
LOG_LINE = "overcoming of output buffer limits"


def _wait(cond, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _quiet_subscriber(port: int, channel: str) -> socket.socket:
    """A subscriber that never reads after its SUBSCRIBE reply, with a small receive
    buffer so the server's side fills fast."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(f"SUBSCRIBE {channel}\r\n".encode())
    got = b""
    s.settimeout(5)
    while got.count(b"\r\n") < 6:  # *3, $9 subscribe, channel, :1
        got += s.recv(4096)
    return s


def _flood_until_closed(r, channel: str, size: int, most: int) -> int:
    """Publishes `size`-byte messages until nobody receives them (the subscriber was
    closed) or `most` were sent; returns how many were sent."""
    payload = b"x" * size
    for n in range(1, most + 1):
        if r.publish(channel, payload) == 0:
            return n
    return most


def test_config_get_set_and_errors(r):
    assert r.config_get("client-output-buffer-limit") == {"client-output-buffer-limit": DEFAULT}
    try:
        # One class at a time; units; the others keep their values.
        assert r.config_set("client-output-buffer-limit", "pubsub 1mb 512kb 10") is True
        assert r.config_get("client-output-buffer-limit")["client-output-buffer-limit"] == (
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10")
        assert r.config_set("client-output-buffer-limit", "normal 100mb 50mb 3 replica 4 5 6") is True
        assert r.config_get("client-output-buffer-limit")["client-output-buffer-limit"] == (
            "normal 104857600 52428800 3 slave 4 5 6 pubsub 1048576 524288 10")
        for bad, why in [
            ("pubsub 1mb 512kb", "Wrong number of arguments in buffer limit configuration."),
            ("master 0 0 0", "Invalid client class specified in buffer limit configuration."),
            ("normal 1 x 0",
             "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
        ]:
            with pytest.raises(redis.ResponseError) as e:
                r.config_set("client-output-buffer-limit", bad)
            assert why in str(e.value)
        # A refused value changes nothing.
        assert r.config_get("client-output-buffer-limit")["client-output-buffer-limit"] == (
            "normal 104857600 52428800 3 slave 4 5 6 pubsub 1048576 524288 10")
    finally:
        r.config_set("client-output-buffer-limit", DEFAULT)


def test_config_file_lines_per_class(start_server, tmp_path):
    conf = tmp_path / "redis.conf"
    conf.write_text("client-output-buffer-limit normal 0 0 0\n"
                    "client-output-buffer-limit replica 256mb 64mb 60\n"
                    "client-output-buffer-limit pubsub 16mb 4mb 30\n")
    srv = start_server(config_file=conf)
    assert srv.client().config_get("client-output-buffer-limit")[
        "client-output-buffer-limit"] == (
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 16777216 4194304 30")


@pytest.mark.skipif(not IS_EMBER, reason="reads Ember's log")
def test_slow_subscriber_closed_and_logged_once(start_server):
    """With the default pubsub limit (32 MB hard), a subscriber that never reads is
    closed, and the server logs it once (it used to log every message published to it
    after the limit: 14 lines)."""
    srv = start_server()
    r = srv.client()
    s = _quiet_subscriber(srv.port, "flood")
    try:
        # Pipelines of 32 messages: those that follow the one past the limit reach the
        # mailbox before the connection is gone, and must not be logged again.
        payload = b"x" * (256 << 10)
        for _ in range(40):
            p = r.pipeline(transaction=False)
            for _ in range(32):
                p.publish("flood", payload)
            if p.execute()[-1] == 0:
                break
        else:
            raise AssertionError("the subscriber was never closed")
        _wait(lambda: LOG_LINE in srv.output(), what="the log line")
        assert srv.output().count(LOG_LINE) == 1, srv.output()
    finally:
        s.close()


def test_pubsub_limit_from_config(start_server):
    """A smaller pubsub hard limit set at start-up is the one enforced."""
    srv = start_server("--client-output-buffer-limit", "pubsub 1mb 0 0")
    r = srv.client()
    s = _quiet_subscriber(srv.port, "ch")
    try:
        # With 32 MB the subscriber would take more than 64 x 256 KB.
        assert _flood_until_closed(r, "ch", 256 << 10, 64) < 64
    finally:
        s.close()


def test_pubsub_soft_limit_over_time(start_server):
    """Over the soft limit for longer than its seconds: closed, though never at the hard
    limit (0: none)."""
    srv = start_server("--client-output-buffer-limit", "pubsub 0 512kb 1")
    r = srv.client()
    s = _quiet_subscriber(srv.port, "ch")
    try:
        payload = b"x" * (64 << 10)
        # About 3 MB a second: past the socket buffers and the soft limit within seconds,
        # then closed once a second over it is out.
        _wait(lambda: r.publish("ch", payload) == 0, timeout=20, what="the soft limit")
    finally:
        s.close()


def test_normal_hard_limit_drops_a_too_big_reply(r, raw):
    """Redis's `No response for single command if client output buffer hard limit is
    enforced`: a reply bigger than the normal hard limit closes the client unanswered."""
    r.set("obuf:big", "x" * 200_000)
    try:
        r.config_set("client-output-buffer-limit", "normal 100000 0 0")
        c = raw()
        c.send_cmd("GET", "obuf:big")
        assert c.is_closed()
        assert c.buf == b""
        small = raw()
        assert small.cmd("PING") == "PONG"
    finally:
        r.config_set("client-output-buffer-limit", DEFAULT)
        r.delete("obuf:big")


def test_normal_soft_limit_closes_a_client_that_does_not_read(r, server):
    """Over the normal soft limit for longer than its seconds while not reading: closed.
    A client that reads its big replies stays."""
    r.set("obuf:big", "x" * 200_000)
    try:
        r.config_set("client-output-buffer-limit", "normal 0 100000 1")
        reader = server.client(single_connection_client=True)
        for _ in range(3):
            assert len(reader.get("obuf:big")) == 200_000
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", server.port))
        s.sendall(b"CLIENT SETNAME idle-reader\r\n" + b"GET obuf:big\r\n" * 200)
        try:
            _wait(lambda: not any(c.get("name") == "idle-reader" for c in r.client_list()),
                  timeout=15, what="the idle reader to be closed")
        finally:
            s.close()
        fresh = server.client(single_connection_client=True)
        assert len(fresh.get("obuf:big")) == 200_000
    finally:
        r.config_set("client-output-buffer-limit", DEFAULT)
        r.delete("obuf:big")
