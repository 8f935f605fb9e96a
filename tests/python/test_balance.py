"""Connections moving between Ember's worker threads.

Ember serves connections on as few workers as carry the load (node/src/balance.rs) and
moves connections between workers when that changes. DEBUG SPREAD <n> fixes the number of
workers (0: automatic), which makes moves happen when a test wants them. A connection's
whole state must survive a move: database, name, protocol, MULTI queue, WATCH, and every
reply in order.
"""

import threading
import time

import pytest

from helpers import ember_only, encode, parse_client_line, wait_until

pytestmark = ember_only


def info_server(c) -> dict:
    return c.info("server")


def worker_of(admin, name: str) -> int:
    for line in admin.execute_command("CLIENT", "LIST").decode().splitlines():
        f = parse_client_line(line)
        if f.get("name") == name:
            return int(f["io-thread"])
    raise AssertionError(f"no client named {name}")


@pytest.fixture
def four(start_server):
    srv = start_server("--threads", "4")
    return srv


def test_client_list_names_the_worker(four):
    c = four.client()
    f = parse_client_line(c.execute_command("CLIENT", "INFO"))
    assert 0 <= int(f["io-thread"]) < 4
    info = info_server(c)
    assert info["ember_threads"] == 4
    assert 1 <= info["ember_threads_active"] <= 4


def test_debug_spread_arguments(four):
    c = four.raw()
    assert c.cmd("DEBUG", "SPREAD", "x").message.startswith("ERR value is not an integer")
    assert c.cmd("DEBUG", "SPREAD", "-1").message.startswith("ERR value is not an integer")
    # More than there are: all of them.
    assert c.cmd("DEBUG", "SPREAD", "99") == "OK"
    assert c.cmd("INFO", "server").count(b"ember_threads_active:4") == 1
    assert c.cmd("DEBUG", "SPREAD", "0") == "OK"


def test_state_survives_moves(four):
    admin = four.client()
    assert admin.execute_command("DEBUG", "SPREAD", "1") == b"OK"
    # Idle connections on worker 0, so that spreading moves more than one connection
    # (each worker keeps an even share).
    ballast = [four.raw() for _ in range(8)]
    for x in ballast:
        assert x.cmd("PING") == "PONG"
    c = four.raw()
    assert c.cmd("CLIENT", "SETNAME", "mover") == "OK"
    assert c.cmd("SELECT", "3") == "OK"
    hello = c.cmd("HELLO", "3")
    assert isinstance(hello, dict) and hello[b"proto"] == 3
    assert c.cmd("SET", "w", "1") == "OK"
    assert c.cmd("WATCH", "w") == "OK"
    assert c.cmd("MULTI") == "OK"
    seen = {worker_of(admin, "mover")}
    # Spread to 4 workers and back to 1, eight times: the client's next command is its
    # last before a quiet point, where it moves.
    for i in range(8):
        n = 4 if i % 2 == 0 else 1
        assert admin.execute_command("DEBUG", "SPREAD", str(n)) == b"OK"
        before = worker_of(admin, "mover")
        assert c.cmd("INCR", "n") == "QUEUED"
        assert c.cmd("HSET", "h", f"f{i}", str(i)) == "QUEUED"
        wait_until(lambda: worker_of(admin, "mover") != before, timeout=5,
                   msg=f"the client moved from worker {before} (spread {n})")
        seen.add(worker_of(admin, "mover"))
    assert len(seen) >= 2, seen
    exec_reply = c.cmd("EXEC")
    # RESP3 replies, in order, in database 3.
    assert exec_reply == [i // 2 + 1 if i % 2 == 0 else 1 for i in range(16)], exec_reply
    assert c.cmd("GET", "n") == b"8"
    assert c.cmd("HGETALL", "h") == {f"f{i}".encode(): str(i).encode() for i in range(8)}
    assert admin.execute_command("GET", "n") is None  # database 0
    # WATCH survives a move too: a write by another client aborts the EXEC.
    assert c.cmd("WATCH", "w") == "OK"
    assert admin.execute_command("DEBUG", "SPREAD", "4") == b"OK"
    assert c.cmd("MULTI") == "OK"
    assert c.cmd("INCR", "n") == "QUEUED"
    other = four.raw()
    assert other.cmd("SELECT", "3") == "OK"
    assert other.cmd("SET", "w", "2") == "OK"
    assert c.cmd("EXEC") is None
    assert c.cmd("GET", "n") == b"8"
    assert info_server(admin)["ember_connections_moved"] > 0


def test_moves_under_load_lose_nothing(four):
    admin = four.client()
    threads, batches, batch = 12, 60, 40
    stop = threading.Event()
    errors: list[str] = []

    def client(i: int) -> None:
        try:
            with four.raw(timeout=60) as c:
                expect = 0
                for _ in range(batches):
                    c.send(b"".join(encode("INCR", f"own:{i}") + encode("INCR", "shared")
                                    for _ in range(batch)))
                    for _ in range(batch):
                        expect += 1
                        own = c.read_reply()
                        shared = c.read_reply()
                        if own != expect or not isinstance(shared, int):
                            errors.append(f"client {i}: {own!r} {shared!r} (want {expect})")
                            return
        except Exception as e:  # noqa: BLE001
            errors.append(f"client {i}: {e!r}")

    # A subscriber (stays where it is) and a blocked client (moves once served).
    sub = four.raw(timeout=30)
    assert sub.cmd("SUBSCRIBE", "ch") == [b"subscribe", b"ch", 1]
    blocked = four.raw(timeout=30)
    blocked.send_cmd("BLPOP", "q", "0")

    def spreader() -> None:
        n = 0
        while not stop.is_set():
            admin.execute_command("DEBUG", "SPREAD", str(n % 4 + 1))
            admin.execute_command("PUBLISH", "ch", str(n))
            n += 1
            time.sleep(0.01)

    moved_before = info_server(admin)["ember_connections_moved"]
    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    s = threading.Thread(target=spreader)
    s.start()
    for t in workers:
        t.start()
    for t in workers:
        t.join(120)
    stop.set()
    s.join(30)
    assert not errors, errors[:5]
    assert admin.execute_command("GET", "shared") == str(threads * batches * batch).encode()
    for i in range(threads):
        assert admin.execute_command("GET", f"own:{i}") == str(batches * batch).encode()
    assert info_server(admin)["ember_connections_moved"] > moved_before
    # Every message published reached the subscriber, in order.
    assert admin.execute_command("PUBSUB", "NUMSUB", "ch")[1] == 1
    admin.execute_command("PUBLISH", "ch", "last")
    got = []
    while True:
        m = sub.read_reply()
        got.append(m[2])
        if m[2] == b"last":
            break
    assert got[:-1] == [str(i).encode() for i in range(len(got) - 1)]
    # The blocked client is served wherever it is.
    admin.execute_command("RPUSH", "q", "x")
    assert blocked.read_reply() == [b"q", b"x"]
    assert blocked.cmd("PING") == "PONG"
    admin.execute_command("DEBUG", "SPREAD", "0")


def test_idle_server_gathers_on_one_worker(four):
    admin = four.client()
    assert admin.execute_command("DEBUG", "SPREAD", "4") == b"OK"
    assert info_server(admin)["ember_threads_active"] == 4
    # Back to automatic: nothing runs, so one worker serves everything.
    assert admin.execute_command("DEBUG", "SPREAD", "0") == b"OK"
    wait_until(lambda: info_server(admin)["ember_threads_active"] == 1, timeout=10,
               msg="one active worker")
    # New connections go to the active worker; the others move there at their next command.
    fresh = four.client()
    assert parse_client_line(fresh.execute_command("CLIENT", "INFO"))["io-thread"] == "0"
    admin.ping()
    wait_until(lambda: parse_client_line(admin.execute_command("CLIENT", "INFO"))["io-thread"]
               == "0", timeout=5, msg="the old connection moved to worker 0")
