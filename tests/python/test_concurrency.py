"""Many clients at once: atomic counters, independent keys, connection churn.

Each test is bounded to well under ~20 s against redis-server.
"""

import threading
import time

import pytest

from helpers import encode

# Clients on different worker threads (Ember gathers them on one at light load).
pytestmark = pytest.mark.usefixtures("all_workers")


def run_threads(n, target, timeout=120):
    errors = []
    results = [None] * n
    start = threading.Barrier(n)

    def wrap(i):
        try:
            start.wait(30)
            results[i] = target(i)
        except BaseException as e:  # noqa: BLE001
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=wrap, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "threads did not finish in time"
    assert not errors, errors[:5]
    return results


def test_50_threads_2000_incr_each(server, r):
    threads, per_thread = 50, 2000

    incr = encode("INCR", "counter")

    def work(i):
        # raw socket: ~3x less client-side CPU than redis-py, so the server is what is measured
        with server.raw(timeout=60) as c:
            last = 0
            for _ in range(per_thread):
                c.send(incr)
                v = c.read_reply()
                assert isinstance(v, int) and v > last, v
                last = v

    t0 = time.monotonic()
    run_threads(threads, work)
    assert r.get("counter") == str(threads * per_thread).encode()
    assert time.monotonic() - t0 < 60


def test_concurrent_incr_pipelined(server, r):
    threads, batches, batch = 20, 20, 250

    def work(i):
        c = server.client(raw=True)
        try:
            for _ in range(batches):
                with c.pipeline(transaction=False) as p:
                    for _ in range(batch):
                        p.execute_command("INCRBY", "pcounter", 2)
                    p.execute()
        finally:
            c.close()

    run_threads(threads, work)
    assert r.get("pcounter") == str(threads * batches * batch * 2).encode()


def test_concurrent_set_get_distinct_keys(server, r):
    threads, keys_per_thread = 32, 200

    def work(i):
        c = server.client(raw=True, single_connection_client=True)
        try:
            for k in range(keys_per_thread):
                key, val = f"t{i}:k{k}", f"value-{i}-{k}".encode()
                assert c.execute_command("SET", key, val) == b"OK"
                got = c.execute_command("GET", key)
                assert got == val, (key, got)
            return c.execute_command("MGET", *[f"t{i}:k{k}" for k in range(keys_per_thread)])
        finally:
            c.close()

    results = run_threads(threads, work)
    for i, vals in enumerate(results):
        assert vals == [f"value-{i}-{k}".encode() for k in range(keys_per_thread)]
    assert r.dbsize() == threads * keys_per_thread


def test_concurrent_append(server, r):
    threads, per_thread = 16, 250

    def work(i):
        c = server.client(raw=True, single_connection_client=True)
        try:
            for _ in range(per_thread):
                c.execute_command("APPEND", "log", chr(ord("a") + i))
        finally:
            c.close()

    run_threads(threads, work)
    value = r.get("log")
    assert len(value) == threads * per_thread
    for i in range(threads):
        assert value.count(chr(ord("a") + i).encode()) == per_thread


def test_concurrent_incrbyfloat(server, r):
    threads, per_thread = 10, 200

    def work(i):
        c = server.client(raw=True, single_connection_client=True)
        try:
            for _ in range(per_thread):
                c.execute_command("INCRBYFLOAT", "f", "0.5")
        finally:
            c.close()

    run_threads(threads, work)
    assert r.get("f") == b"1000"


def test_setnx_race_has_one_winner(server, r):
    threads, rounds = 16, 20
    clients = [server.client(raw=True, single_connection_client=True) for _ in range(threads)]
    try:
        for c in clients:
            c.execute_command("PING")
        for rnd in range(rounds):
            results = run_threads(threads, lambda i: clients[i].execute_command(
                "SET", f"lock:{rnd}", f"owner{i}", "NX"))
            winners = [i for i, res in enumerate(results) if res == b"OK"]
            assert len(winners) == 1, (rnd, results)
            assert r.get(f"lock:{rnd}") == f"owner{winners[0]}".encode()
    finally:
        for c in clients:
            c.close()


def test_mset_is_atomic_for_readers(server, r):
    r.mset({"a": "0", "b": "0", "c": "0"})
    stop = threading.Event()
    torn = []

    def writer():
        c = server.client(raw=True, single_connection_client=True)
        try:
            i = 0
            while not stop.is_set() and i < 20000:
                i += 1
                c.execute_command("MSET", "a", i, "b", i, "c", i)
        finally:
            c.close()

    def reader(_):
        c = server.client(raw=True, single_connection_client=True)
        try:
            for _ in range(1500):
                a, b, cc = c.execute_command("MGET", "a", "b", "c")
                if not (a == b == cc):
                    torn.append((a, b, cc))
        finally:
            c.close()

    w = threading.Thread(target=writer, daemon=True)
    w.start()
    try:
        run_threads(4, reader)
    finally:
        stop.set()
        w.join(30)
    assert not torn, f"MGET observed a partially applied MSET: {torn[:3]}"


def test_many_simultaneous_connections(server, r):
    conns = []
    try:
        for _ in range(200):
            conns.append(server.raw())
        for i, c in enumerate(conns):
            c.send_cmd("SET", f"conn:{i}", i)
        for c in conns:
            assert c.read_raw() == b"+OK\r\n"
        assert r.info("clients")["connected_clients"] >= 200
        for i, c in enumerate(conns):
            assert c.cmd("GET", f"conn:{i}") == str(i).encode()
    finally:
        for c in conns:
            c.close()
    assert r.dbsize() == 200


def test_connection_churn(server, r):
    def work(i):
        for j in range(50):
            with server.raw() as c:
                assert c.cmd("INCR", "churn") > 0
                if j % 2:
                    c.send_cmd("PING")   # leave a reply unread on close
    run_threads(10, work)
    assert r.get("churn") == b"500"
    assert r.ping() is True


def test_concurrent_pipelines_keep_order(server, r):
    n = 8

    def work(i):
        with server.raw(timeout=60) as c:
            c.send(encode("INCR", f"seq:{i}") * 2000)
            for expect in range(1, 2001):
                assert c.read_raw() == b":%d\r\n" % expect

    run_threads(n, work)
    for i in range(n):
        assert r.get(f"seq:{i}") == b"2000"


def test_pipelines_mixing_exclusive_and_plain_commands(server, r):
    """Each batch mixes plain commands with ones that stop every worker (EXEC, EVAL), a
    blocking pop that finds data, and eviction switched on and off: a worker that kept
    its own gate across such a batch would wait for itself forever."""
    threads, rounds = 8, 30
    incr_lua = "return redis.call('INCR', KEYS[1])"

    def work(i):
        c = server.client(raw=True)
        try:
            for n in range(rounds):
                p = c.pipeline(transaction=False)
                p.execute_command("SET", f"mix:{i}", n)
                p.execute_command("EVAL", incr_lua, 1, "mix:lua")
                p.execute_command("INCR", "mix:plain")
                p.execute_command("MULTI")
                p.execute_command("INCR", "mix:tx")
                p.execute_command("EXEC")
                p.execute_command("RPUSH", f"mix:list:{i}", n)
                p.execute_command("BLPOP", f"mix:list:{i}", 1)
                if i == 0:
                    p.execute_command("CONFIG", "SET", "maxmemory", "1gb")
                    p.execute_command("SET", "mix:evicting", n)
                    p.execute_command("CONFIG", "SET", "maxmemory", "0")
                p.execute_command("GET", f"mix:{i}")
                replies = p.execute()
                assert replies[2] >= 1
                assert replies[5][0] >= 1
                assert replies[7] == [f"mix:list:{i}".encode(), str(n).encode()]
                assert replies[-1] == str(n).encode()
        finally:
            c.close()

    run_threads(threads, work, timeout=60)
    total = threads * rounds
    assert r.get("mix:lua") == str(total).encode()
    assert r.get("mix:plain") == str(total).encode()
    assert r.get("mix:tx") == str(total).encode()


def test_hot_key_pipelines_with_commands_that_lock_or_wait(server, r):
    """Pipelines of pushes, SADDs and HSETs to three hot keys (a batch keeps the key's
    shard locked from one such command to the next), mixed with commands that must never
    find that shard still taken by the worker running them: other commands on the same
    keys, multi-key ones, EXEC and EVAL (they stop every worker), blocked BLPOP consumers
    served by the pushes, eviction and the AOF switched on and off. Nothing may hang and
    every write must be counted."""
    pushers, rounds, consumers = 6, 40, 2
    lua = "return redis.call('LPUSH', KEYS[1], 'lua')"
    done = threading.Event()
    popped = [0] * consumers

    def push(i):
        c = server.client(raw=True)
        pushed = 0
        try:
            for n in range(rounds):
                p = c.pipeline(transaction=False)
                for k in range(25):
                    p.execute_command("LPUSH", "hot:list", f"{i}-{n}-{k}")
                    if k % 3 == 0:
                        p.execute_command("SADD", "hot:set", f"{i}-{n}-{k}")
                        p.execute_command("HSET", "hot:hash", f"{i}-{n}-{k}", k)
                    if k % 8 == 0:
                        p.execute_command("LLEN", "hot:list")
                        p.execute_command("EXISTS", "hot:list", "hot:set", "hot:hash")
                pushed += 25
                p.execute_command("EVAL", lua, 1, "hot:list")
                p.execute_command("MULTI")
                p.execute_command("RPUSH", "hot:list", "tx")
                p.execute_command("SADD", "hot:set", f"tx-{i}-{n}")
                p.execute_command("EXEC")
                p.execute_command("RPUSHX", "hot:list", "x")
                pushed += 3
                replies = p.execute()
                assert all(not isinstance(x, Exception) for x in replies), replies
            return pushed
        finally:
            c.close()

    def consume(j):
        c = server.client(raw=True)
        try:
            while not done.is_set():
                if c.blpop(["hot:list"], timeout=0.2) is not None:
                    popped[j] += 1
        finally:
            c.close()

    def toggle():
        c = server.client()
        try:
            for n in range(20):
                c.config_set("maxmemory", "1gb" if n % 2 == 0 else "0")
                if n == 5:
                    c.config_set("appendonly", "yes")
                if n == 12:
                    c.config_set("appendonly", "no")
                time.sleep(0.02)
        finally:
            c.config_set("maxmemory", "0")
            c.config_set("appendonly", "no")
            c.close()

    workers = [threading.Thread(target=consume, args=(j,), daemon=True) for j in range(consumers)]
    for t in workers:
        t.start()
    tog = threading.Thread(target=toggle, daemon=True)
    tog.start()
    try:
        pushed = run_threads(pushers, push, timeout=90)
    finally:
        done.set()
        tog.join(30)
        for t in workers:
            t.join(30)
    assert not tog.is_alive() and not any(t.is_alive() for t in workers)
    assert r.llen("hot:list") + sum(popped) == sum(pushed)
    assert r.scard("hot:set") == pushers * rounds * (9 + 1)
    assert r.hlen("hot:hash") == pushers * rounds * 9


def test_hot_key_pipelines_while_evicting(server, r):
    """Pipelines of pushes to hot keys while every command must evict first: eviction
    locks shards, so a batch that still kept one for its next push would wait for itself.
    Keys come and go; nothing may hang and no write may fail."""
    threads, rounds = 4, 200
    r.config_set("maxmemory-policy", "allkeys-lru")
    p = r.pipeline(transaction=False)
    for n in range(2000):
        p.set(f"ev:fill:{n}", "x" * 200)
    p.execute()
    used = int(r.info("memory")["used_memory"])

    def work(i):
        c = server.client(raw=True)
        try:
            for n in range(rounds):
                p = c.pipeline(transaction=False)
                for k in range(20):
                    p.execute_command("LPUSH", f"ev:hot:{i % 2}", "v" * 1000)
                    p.execute_command("SADD", f"ev:set:{i % 2}", f"{i}-{n}-{k}")
                    p.execute_command("HSET", f"ev:hash:{i % 2}", f"{i}-{n}-{k}", k)
                replies = p.execute()
                assert all(isinstance(x, int) for x in replies), replies[:3]
        finally:
            c.close()

    try:
        r.config_set("maxmemory", used - 100_000)
        run_threads(threads, work, timeout=60)
        assert int(r.info("stats")["evicted_keys"]) > 0
    finally:
        r.config_set("maxmemory", 0)
        r.config_set("maxmemory-policy", "noeviction")
