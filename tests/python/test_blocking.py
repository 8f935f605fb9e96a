"""Blocking list commands (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP) and CLIENT UNBLOCK.

Blocked clients run on their own connections (and so, on Ember, usually on other worker
threads than the writer); a helper waits until the server reports them blocked before
the test writes.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
import redis

# Clients on different worker threads (Ember gathers them on one at light load).
pytestmark = pytest.mark.usefixtures("all_workers")


class Call:
    """Runs one command on its own connection in a thread."""

    def __init__(self, server, *args, protocol: int = 2):
        self.conn = server.client(protocol=protocol)
        self.id = self.conn.client_id()
        self.result = None
        self.error = None
        self.elapsed = None
        self.thread = threading.Thread(target=self._run, args=args, daemon=True)
        self.thread.start()

    def _run(self, *args):
        t0 = time.monotonic()
        try:
            res = self.conn.execute_command(*args)
            # redis-py turns BLPOP/BRPOP replies into tuples.
            self.result = list(res) if isinstance(res, tuple) else res
        except Exception as e:  # noqa: BLE001 - the test inspects it
            self.error = e
        self.elapsed = time.monotonic() - t0

    def join(self, timeout: float = 10.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "blocked call did not return"
        self.conn.close()
        return self.result


def wait_blocked(r, n: int, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if r.info("clients")["blocked_clients"] >= n:
            return
        time.sleep(0.01)
    raise AssertionError(f"never saw {n} blocked clients")


def test_blpop_serves_at_once_when_data_exists(r):
    r.rpush("b", "x", "y")
    assert r.blpop(["a", "b"], 0) == (b"b", b"x")
    assert r.brpop(["a", "b"], 0) == (b"b", b"y")
    assert r.exists("b") == 0


def test_blpop_woken_by_push_from_another_client(server, r):
    c = Call(server, "BLPOP", "q1", "q2", 0)
    wait_blocked(r, 1)
    assert r.rpush("q2", "a", "b") == 2
    assert c.join() == [b"q2", b"a"]
    assert r.lrange("q2", 0, -1) == [b"b"]
    assert r.info("clients")["blocked_clients"] == 0


def test_brpop_takes_the_tail(server, r):
    c = Call(server, "BRPOP", "q", 0)
    wait_blocked(r, 1)
    r.rpush("q", "a", "b", "c")
    assert c.join() == [b"q", b"c"]


def test_waiters_are_served_in_fifo_order(server, r):
    calls = []
    for i in range(3):
        calls.append(Call(server, "BLPOP", "fifo", 0))
        wait_blocked(r, i + 1)
    r.rpush("fifo", "a", "b", "c", "d")
    assert [c.join() for c in calls] == [[b"fifo", b"a"], [b"fifo", b"b"], [b"fifo", b"c"]]
    assert r.lrange("fifo", 0, -1) == [b"d"]


def test_pushed_element_goes_to_waiter_before_next_command(server, r):
    c = Call(server, "BLPOP", "k", 0)
    wait_blocked(r, 1)
    p = r.pipeline(transaction=False)
    p.rpush("k", "x")
    p.lpop("k")
    assert p.execute() == [1, None]
    assert c.join() == [b"k", b"x"]


def test_timeout_is_sub_second_and_replies_null(server, r):
    c = Call(server, "BLPOP", "none", 0.2)
    assert c.join() is None
    assert c.elapsed >= 0.19
    c = Call(server, "BLMOVE", "none", "dst", "LEFT", "RIGHT", 0.05)
    assert c.join() is None
    assert r.info("clients")["blocked_clients"] == 0


def test_timeout_reply_resp3_is_null(server, r):
    c = Call(server, "BLPOP", "none", 0.05, protocol=3)
    assert c.join() is None
    assert c.error is None


def test_timeout_errors(r):
    with pytest.raises(redis.ResponseError, match="timeout is negative"):
        r.blpop(["k"], -1)
    with pytest.raises(redis.ResponseError, match="timeout is not a float or out of range"):
        r.execute_command("BLPOP", "k", "abc")
    with pytest.raises(redis.ResponseError, match="timeout is not a float or out of range"):
        r.execute_command("BLMOVE", "a", "b", "LEFT", "LEFT", "nan")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("BLMOVE", "a", "b", "UP", "LEFT", 0)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        r.execute_command("BLPOP", "k")


def test_wrongtype(server, r):
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.blpop(["s"], 0)
    r.rpush("l", "x")
    # The first non-empty list is served before a later key of another type is seen.
    assert r.blpop(["l", "s"], 0) == (b"l", b"x")


def test_waiter_ignores_key_of_other_type_then_is_served(server, r):
    c = Call(server, "BLPOP", "t", 0)
    wait_blocked(r, 1)
    r.set("t", "string")
    time.sleep(0.05)
    assert r.info("clients")["blocked_clients"] == 1
    r.delete("t")
    r.lpush("t", "v")
    assert c.join() == [b"t", b"v"]


def test_blmove_and_chained_waiter(server, r):
    c1 = Call(server, "BLMOVE", "src", "mid", "LEFT", "RIGHT", 0)
    wait_blocked(r, 1)
    c2 = Call(server, "BLPOP", "mid", 0)
    wait_blocked(r, 2)
    r.rpush("src", "v")
    assert c1.join() == b"v"
    # The element BLMOVE pushed to "mid" wakes the client blocked there.
    assert c2.join() == [b"mid", b"v"]
    assert r.exists("src", "mid") == 0


def test_brpoplpush(server, r):
    r.rpush("a", "1", "2")
    assert r.brpoplpush("a", "b", 0) == b"2"
    c = Call(server, "BRPOPLPUSH", "x", "y", 0)
    wait_blocked(r, 1)
    r.lpush("x", "z")
    assert c.join() == b"z"
    assert r.lrange("y", 0, -1) == [b"z"]


def test_blmove_wrongtype_destination(server, r):
    r.set("dst", "s")
    r.rpush("src", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.blmove("src", "dst", 0, "LEFT", "RIGHT")
    assert r.lrange("src", 0, -1) == [b"v"]


def test_blocked_move_to_wrongtype_destination_gets_wrongtype(server, r):
    # Redis: a blocked BRPOPLPUSH / BLMOVE whose destination holds another type when an
    # element arrives is answered -WRONGTYPE, and the element stays in the source.
    r.set("dst", "s")
    c = Call(server, "BRPOPLPUSH", "src", "dst", 0)
    wait_blocked(r, 1)
    r.rpush("src", "a", "b", "c")
    c.join()
    assert isinstance(c.error, redis.ResponseError) and "WRONGTYPE" in str(c.error)
    assert r.lrange("src", 0, -1) == [b"a", b"b", b"c"]
    assert r.info("clients")["blocked_clients"] == 0
    r.delete("src")
    c = Call(server, "BLMOVE", "src", "dst", "LEFT", "RIGHT", 0)
    wait_blocked(r, 1)
    r.rpush("src", "x")
    c.join()
    assert isinstance(c.error, redis.ResponseError) and "WRONGTYPE" in str(c.error)
    assert r.lrange("src", 0, -1) == [b"x"]


def test_failed_blocked_move_leaves_the_element_to_the_next_waiter(server, r):
    r.set("bad", "s")
    c1 = Call(server, "BRPOPLPUSH", "src", "bad", 0)
    wait_blocked(r, 1)
    c2 = Call(server, "BRPOPLPUSH", "src", "good", 0)
    wait_blocked(r, 2)
    r.lpush("src", "foo")
    c1.join()
    assert isinstance(c1.error, redis.ResponseError) and "WRONGTYPE" in str(c1.error)
    assert c2.join() == b"foo"
    assert r.lrange("good", 0, -1) == [b"foo"]
    assert r.exists("src") == 0


def test_blocked_move_keeps_waiting_on_source_of_other_type(server, r):
    # The source turning into another type is no answer: the client stays blocked.
    c = Call(server, "BLMOVE", "src", "dst", "LEFT", "RIGHT", 0)
    wait_blocked(r, 1)
    r.set("src", "string")
    r.delete("src")
    r.rpush("src", "v")
    assert c.join() == b"v"
    assert r.lrange("dst", 0, -1) == [b"v"]


def test_blmpop(server, r):
    r.rpush("m2", "a", "b", "c")
    assert r.execute_command("BLMPOP", 0, 2, "m1", "m2", "RIGHT", "COUNT", 2) == [
        b"m2", [b"c", b"b"]]
    c = Call(server, "BLMPOP", 0, 2, "n1", "n2", "LEFT", "COUNT", 5)
    wait_blocked(r, 1)
    r.rpush("n2", "x", "y")
    assert c.join() == [b"n2", [b"x", b"y"]]
    assert r.execute_command("BLMPOP", 0.01, 1, "none", "LEFT") is None
    with pytest.raises(redis.ResponseError, match="numkeys"):
        r.execute_command("BLMPOP", 0, 0, "k", "LEFT")
    with pytest.raises(redis.ResponseError, match="count"):
        r.execute_command("BLMPOP", 0, 1, "k", "LEFT", "COUNT", 0)


def test_client_unblock(server, r):
    c = Call(server, "BLPOP", "u", 0)
    wait_blocked(r, 1)
    assert r.client_unblock(c.id) == 1
    assert c.join() is None
    c = Call(server, "BLPOP", "u", 0)
    wait_blocked(r, 1)
    assert r.client_unblock(c.id, error=True) == 1
    c.join()
    assert isinstance(c.error, redis.ResponseError)
    assert "client unblocked via CLIENT UNBLOCK" in str(c.error)
    assert r.client_unblock(r.client_id()) == 0
    assert r.client_unblock(999999) == 0
    with pytest.raises(redis.ResponseError, match="TIMEOUT or ERROR"):
        r.execute_command("CLIENT", "UNBLOCK", 1, "MAYBE")


def test_client_list_shows_blocked_flag(server, r):
    c = Call(server, "BLPOP", "f", 0)
    wait_blocked(r, 1)
    mine = [x for x in r.client_list() if int(x["id"]) == c.id][0]
    assert "b" in mine["flags"]
    r.rpush("f", "1")
    c.join()


def test_disconnect_while_blocked_forgets_the_client(server, r):
    c = server.client()
    conn = c.connection_pool.get_connection()
    conn.send_command("BLPOP", "gone", 0)
    wait_blocked(r, 1)
    conn.disconnect()
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert r.info("clients")["blocked_clients"] == 0
    r.rpush("gone", "v")
    assert r.lrange("gone", 0, -1) == [b"v"]


def test_pipeline_after_blocking_command_runs_after_it(server, r):
    c = server.client()
    conn = c.connection_pool.get_connection()
    conn.send_packed_command(conn.pack_commands([("BLPOP", "pp", 0), ("PING",)]))
    wait_blocked(r, 1)
    r.rpush("pp", "v")
    assert conn.read_response() == [b"pp", b"v"]
    assert conn.read_response() == b"PONG"
    conn.disconnect()


def test_move_and_swapdb_wake_waiters(server, r):
    c = Call(server, "BLPOP", "mv", 0)
    wait_blocked(r, 1)
    r.execute_command("SELECT", 1)
    r.rpush("mv", "from-db1")
    assert r.move("mv", 0) == 1
    assert c.join() == [b"mv", b"from-db1"]

    c = Call(server, "BLPOP", "sw", 0)
    wait_blocked(r, 1)
    r.rpush("sw", "from-db1")
    r.swapdb(0, 1)
    assert c.join() == [b"sw", b"from-db1"]
    r.execute_command("SELECT", 0)


def test_many_waiters_many_writers(server, r):
    n = 16
    calls = [Call(server, "BLPOP", f"mw{i % 4}", 0) for i in range(n)]
    wait_blocked(r, n)

    def push(i):
        c = server.client()
        for j in range(n // 4):
            c.rpush(f"mw{i}", f"{i}-{j}")
        c.close()

    writers = [threading.Thread(target=push, args=(i,)) for i in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    got = sorted(c.join()[1] for c in calls)
    assert got == sorted(f"{i}-{j}".encode() for i in range(4) for j in range(n // 4))
    assert r.info("clients")["blocked_clients"] == 0


def test_bzpopmin_bzpopmax(server, r, r3):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.bzpopmin(["none", "z"], 0) == (b"z", b"a", 1.0)
    assert r.bzpopmax(["z"], 0) == (b"z", b"c", 3.0)
    assert r3.execute_command("BZPOPMIN", "z", 0) == [b"z", b"b", 2.0]
    assert r.exists("z") == 0
    c = Call(server, "BZPOPMAX", "z1", "z2", 0)
    wait_blocked(r, 1)
    r.zadd("z2", {"x": 5, "y": 7})
    assert c.join() == [b"z2", b"y", 7.0]
    assert r.bzpopmin(["none"], 0.01) is None
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.bzpopmin(["s"], 0)
    with pytest.raises(redis.ResponseError, match="timeout is negative"):
        r.bzpopmin(["z"], -1)


def test_bzmpop(server, r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.execute_command("BZMPOP", 0, 2, "none", "z", "MAX", "COUNT", 2) == [
        b"z", [[b"c", b"3"], [b"b", b"2"]]]
    c = Call(server, "BZMPOP", 0, 1, "zz", "MIN", "COUNT", 10)
    wait_blocked(r, 1)
    r.zadd("zz", {"m": 1, "n": 2})
    assert c.join() == [b"zz", [[b"m", b"1"], [b"n", b"2"]]]
    assert r.execute_command("BZMPOP", 0.01, 1, "none", "MIN") is None
    with pytest.raises(redis.ResponseError, match="numkeys"):
        r.execute_command("BZMPOP", 0, 0, "z", "MIN")


def test_blocked_on_list_ignores_zset_and_the_reverse(server, r):
    cl = Call(server, "BLPOP", "k", 0)
    wait_blocked(r, 1)
    cz = Call(server, "BZPOPMIN", "k", 0)
    wait_blocked(r, 2)
    r.zadd("k", {"m": 1})
    assert cz.join() == [b"k", b"m", 1.0]
    assert r.info("clients")["blocked_clients"] == 1
    r.rpush("k", "v")
    assert cl.join() == [b"k", b"v"]


def test_input_while_blocked_counts_against_query_buffer_limit(server, r):
    r.config_set("client-query-buffer-limit", 1024 * 1024)
    try:
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"BLPOP never 0\r\n")
        wait_blocked(r, 1)
        try:
            s.sendall(b"*2\r\n$3\r\nGET\r\n$2000000\r\n" + b"x" * 2_000_000)
        except OSError:
            pass
        deadline = time.monotonic() + 10
        while r.info("clients")["blocked_clients"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert r.info("clients")["blocked_clients"] == 0
        s.close()
    finally:
        r.config_set("client-query-buffer-limit", 1024 * 1024 * 1024)
