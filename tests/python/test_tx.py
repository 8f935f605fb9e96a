"""MULTI / EXEC / DISCARD / WATCH / UNWATCH, as Redis 7.2 (validated against redis-server)."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from helpers import IS_EMBER


def test_exec_runs_queued_commands_and_replies_in_order(r, raw):
    c = raw()
    assert c.cmd("MULTI") == "OK"
    assert c.cmd("SET", "a", "1") == "QUEUED"
    assert c.cmd("INCR", "a") == "QUEUED"
    assert c.cmd("GET", "a") == "QUEUED"
    assert c.cmd("EXEC") == ["OK", 2, b"2"]


def test_runtime_errors_do_not_stop_the_transaction(r, raw):
    c = raw()
    c.cmd("MULTI")
    c.cmd("SET", "s", "x")
    c.cmd("LPUSH", "s", "y")
    c.cmd("INCR", "s")
    c.cmd("SET", "t", "ok")
    res = c.cmd("EXEC")
    assert res[0] == "OK"
    assert "WRONGTYPE" in str(res[1])
    assert "not an integer" in str(res[2])
    assert res[3] == "OK"
    assert r.get("t") == b"ok"


def test_queue_errors_abort_with_execabort(r, raw):
    c = raw()
    c.cmd("MULTI")
    c.cmd("SET", "a", "1")
    err = c.cmd("NOSUCHCOMMAND")
    assert "unknown command" in str(err)
    err = c.cmd("GET")
    assert "wrong number of arguments" in str(err)
    res = c.cmd("EXEC")
    assert "EXECABORT Transaction discarded because of previous errors" in str(res)
    assert r.exists("a") == 0


def test_control_errors(r, raw):
    c = raw()
    assert "EXEC without MULTI" in str(c.cmd("EXEC"))
    assert "DISCARD without MULTI" in str(c.cmd("DISCARD"))
    c.cmd("MULTI")
    assert "MULTI calls can not be nested" in str(c.cmd("MULTI"))
    assert "WATCH inside MULTI is not allowed" in str(c.cmd("WATCH", "x"))
    # Neither error aborts the transaction.
    c.cmd("SET", "k", "v")
    assert c.cmd("EXEC") == ["OK"]


def test_discard(r, raw):
    c = raw()
    c.cmd("MULTI")
    c.cmd("SET", "a", "1")
    assert c.cmd("DISCARD") == "OK"
    assert r.exists("a") == 0
    assert c.cmd("PING") == "PONG"


def test_empty_exec(r, raw):
    c = raw()
    c.cmd("MULTI")
    assert c.cmd("EXEC") == []


def test_redis_py_pipeline_transaction(r):
    p = r.pipeline(transaction=True)
    p.set("x", 1).incrby("x", 5).get("x").lpush("l", "a", "b").lrange("l", 0, -1)
    assert p.execute() == [True, 6, b"6", 2, [b"b", b"a"]]


def test_watch_untouched_key_exec_succeeds(r):
    r.set("w", 1)
    with r.pipeline() as p:
        p.watch("w")
        v = int(p.get("w"))
        p.multi()
        p.set("w", v + 1)
        assert p.execute() == [True]
    assert r.get("w") == b"2"


def test_watch_touched_key_from_another_client_aborts(server, r):
    r.set("w", 1)
    other = server.client()
    with r.pipeline() as p:
        p.watch("w")
        other.set("w", 10)
        p.multi()
        p.set("w", 2)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("w") == b"10"
    other.close()


def test_watch_missing_key_then_created_aborts(server, r, raw):
    c = raw()
    c.cmd("WATCH", "new")
    r.set("new", "x")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None


def test_after_exec_keys_are_no_longer_watched(server, r, raw):
    c = raw()
    c.cmd("WATCH", "k")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]
    r.set("k", "1")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]


def test_after_failed_exec_keys_are_no_longer_watched(server, r, raw):
    c = raw()
    c.cmd("WATCH", "k")
    r.set("k", "1")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None
    r.set("k", "2")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]


def test_unwatch_and_discard_forget_watches(server, r, raw):
    c = raw()
    c.cmd("WATCH", "k")
    assert c.cmd("UNWATCH") == "OK"
    r.set("k", "1")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]
    c.cmd("WATCH", "k")
    r.set("k", "2")
    c.cmd("MULTI")
    c.cmd("DISCARD")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]


def test_watch_remembers_db(server, r, raw):
    c = raw()
    c.cmd("SELECT", "1")
    c.cmd("WATCH", "k")
    c.cmd("SELECT", "0")
    r.set("k", "db0")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]


def test_watched_key_expiring_aborts(server, r, raw):
    c = raw()
    r.set("e", "v", px=100)
    c.cmd("WATCH", "e")
    time.sleep(0.2)
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None


def test_watch_expire_touches(server, r, raw):
    r.set("e", "v")
    c = raw()
    c.cmd("WATCH", "e")
    r.expire("e", 100)
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None


def test_flushall_touches_existing_watched_keys_only(server, r, raw):
    c = raw()
    r.set("x", "1")
    c.cmd("WATCH", "x")
    r.flushall()
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None
    c.cmd("WATCH", "absent")
    r.flushall()
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]


def test_flushdb_and_swapdb_touch(server, r, raw):
    c = raw()
    r.set("x", "1")
    c.cmd("WATCH", "x")
    r.flushdb()
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None
    r.set("y", "1")
    c.cmd("WATCH", "y")
    r.swapdb(0, 1)
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") is None
    r.swapdb(0, 1)


def test_blocking_command_inside_multi_does_not_block(r, raw):
    c = raw()
    c.cmd("MULTI")
    c.cmd("BLPOP", "none", "0")
    c.cmd("BRPOPLPUSH", "none", "dst", "0")
    c.cmd("BZPOPMIN", "none", "0")
    assert c.cmd("EXEC") == [None, None, None]
    r.rpush("l", "a")
    c.cmd("MULTI")
    c.cmd("BLPOP", "l", "0")
    assert c.cmd("EXEC") == [[b"l", b"a"]]


def test_push_and_pop_in_one_transaction_skips_waiter(server, r):
    import test_blocking as tb

    call = tb.Call(server, "BLPOP", "q", 0)
    tb.wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.rpush("q", "x").lpop("q")
    assert p.execute() == [1, b"x"]
    time.sleep(0.05)
    assert r.info("clients")["blocked_clients"] == 1
    r.rpush("q", "y")
    assert call.join() == [b"q", b"y"]


def test_exec_wakes_blocked_client(server, r):
    import test_blocking as tb

    call = tb.Call(server, "BLPOP", "q", 0)
    tb.wait_blocked(r, 1)
    p = r.pipeline(transaction=True)
    p.rpush("q", "a", "b")
    p.execute()
    assert call.join() == [b"q", b"a"]


def test_client_list_shows_multi(server, r, raw):
    c = raw()
    cid = c.cmd("CLIENT", "ID")
    c.cmd("MULTI")
    c.cmd("PING")
    c.cmd("PING")
    line = [x for x in r.client_list() if int(x["id"]) == cid][0]
    assert line["multi"] == "2"
    assert "x" in line["flags"]
    c.cmd("DISCARD")


def test_reset_discards_and_unwatches(server, r, raw):
    c = raw()
    c.cmd("WATCH", "k")
    c.cmd("MULTI")
    c.cmd("SET", "k", "1")
    assert c.cmd("RESET") == "RESET"
    assert r.exists("k") == 0
    r.set("k", "2")
    c.cmd("MULTI")
    c.cmd("PING")
    assert c.cmd("EXEC") == ["PONG"]


def test_resp3_exec_abort_is_null(server, r):
    c = server.client(protocol=3)
    c.set("w", 1)
    with c.pipeline() as p:
        p.watch("w")
        r.set("w", 2)
        p.multi()
        p.incr("w")
        with pytest.raises(redis.WatchError):
            p.execute()
    c.close()


@pytest.mark.skipif(not IS_EMBER, reason="many-thread atomicity check for Ember's workers")
def test_exec_is_atomic_against_other_threads(server, r):
    r.mset({"a": 0, "b": 0})
    stop = threading.Event()
    bad = []

    def writer():
        c = server.client()
        while not stop.is_set():
            p = c.pipeline(transaction=True)
            p.incr("a").incr("b")
            p.execute()
        c.close()

    def reader():
        c = server.client()
        while not stop.is_set():
            a, b = c.mget("a", "b")
            if a != b:
                bad.append((a, b))
        c.close()

    threads = [threading.Thread(target=writer) for _ in range(2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    assert bad == []
    assert r.get("a") == r.get("b")
