"""SLOWLOG, LATENCY and MONITOR: what the execution pipeline shows about the commands it
runs, in Redis 7's reply shapes (checked against redis-server with EMBER_SERVER=redis).

Each test starts its own server: the thresholds these tests set would disturb the others.
"""

from __future__ import annotations

import threading

import pytest
import redis

from helpers import IS_REDIS, RawConn, RespError, wait_until

DEBUG_ON = ("--enable-debug-command", "yes")


@pytest.fixture
def srv(start_server):
    return start_server(*DEBUG_ON)


@pytest.fixture
def c(srv):
    cl = srv.client()
    cl.ping()  # its handshake (CLIENT SETINFO ...) is over before a test monitors
    yield cl
    cl.close()


def slowlog(c, n=None):
    args = ["SLOWLOG", "GET"] + ([] if n is None else [n])
    return c.execute_command(*args)


def entry_args(e):
    return [a.decode() if isinstance(a, bytes) else a for a in e[3]]


# ---------------------------------------------------------------------------------------
# SLOWLOG
# ---------------------------------------------------------------------------------------


def test_slowlog_logs_only_commands_over_the_threshold(c):
    c.config_set("slowlog-log-slower-than", 100000)
    c.execute_command("SLOWLOG", "RESET")
    c.ping()
    assert c.execute_command("SLOWLOG", "LEN") == 0
    c.client_setname("sleeper")
    c.execute_command("DEBUG", "SLEEP", "0.2")
    assert c.execute_command("SLOWLOG", "LEN") == 1
    e = slowlog(c)[0]
    assert len(e) == 6
    ident, when, micros, args, peer, name = e
    assert isinstance(ident, int) and isinstance(when, int)
    assert micros > 100000
    assert entry_args(e) == ["DEBUG", "SLEEP", "0.2"]
    assert peer.decode().startswith("127.0.0.1:")
    assert name == b"sleeper"


def test_slowlog_max_len_get_count_and_reset(c):
    c.config_set("slowlog-log-slower-than", 0)
    c.config_set("slowlog-max-len", 10)
    for _ in range(100):
        c.ping()
    assert c.execute_command("SLOWLOG", "LEN") == 10
    assert len(slowlog(c, 5)) == 5
    assert len(slowlog(c, 0)) == 0
    assert len(slowlog(c, -1)) == 10
    # Newest first, ids increasing with time.
    ids = [e[0] for e in slowlog(c, -1)]
    assert ids == sorted(ids, reverse=True)
    with pytest.raises(redis.ResponseError, match="count should be greater than or equal to -1"):
        slowlog(c, -2)
    with pytest.raises(redis.ResponseError, match="count should be greater than or equal to -1"):
        slowlog(c, "x")
    c.config_set("slowlog-log-slower-than", -1)
    c.execute_command("SLOWLOG", "RESET")
    assert c.execute_command("SLOWLOG", "LEN") == 0
    c.ping()
    assert c.execute_command("SLOWLOG", "LEN") == 0


def test_a_shorter_slowlog_drops_its_oldest_entries(c):
    c.config_set("slowlog-log-slower-than", 0)
    for i in range(5):
        c.set(f"k{i}", i)
    c.config_set("slowlog-max-len", 1)
    (e,) = slowlog(c, -1)
    assert entry_args(e) == ["CONFIG", "SET", "slowlog-max-len", "1"]


def test_slowlog_trims_long_commands_and_arguments(c):
    c.config_set("slowlog-log-slower-than", 0)
    c.execute_command("SLOWLOG", "RESET")
    c.sadd("set", *range(3, 34))
    e = slowlog(c)[0]
    args = entry_args(e)
    assert len(args) == 32
    assert args[:3] == ["SADD", "set", "3"]
    assert args[-1] == "... (2 more arguments)"
    c.execute_command("SLOWLOG", "RESET")
    c.sadd("set", "foo", "A" * 129)
    args = entry_args(slowlog(c)[0])
    assert args[:3] == ["SADD", "set", "foo"]
    assert args[3] == "A" * 128 + "... (1 more bytes)"


def test_slowlog_keeps_the_command_as_sent_and_exec_is_not_logged(c):
    c.config_set("slowlog-log-slower-than", 0)
    c.sadd("s", "a", "b", "c")
    c.execute_command("SLOWLOG", "RESET")
    c.spop("s", 10)
    assert entry_args(slowlog(c)[0]) == ["SPOP", "s", "10"]
    c.config_set("slowlog-log-slower-than", 100000)
    c.execute_command("SLOWLOG", "RESET")
    p = c.pipeline(transaction=True)
    p.execute_command("DEBUG", "SLEEP", "0.2")
    p.execute()
    log = slowlog(c)
    assert len(log) == 1
    assert entry_args(log[0]) == ["DEBUG", "SLEEP", "0.2"]


def failed_logins(srv):
    with RawConn(srv.port) as raw:
        for args in (("AUTH", "not-real"), ("AUTH", "not-real", "not-a-password"),
                     ("HELLO", "2", "AUTH", "not-real", "not-a-password")):
            assert isinstance(raw.cmd(*args), RespError)


def test_slowlog_redacts_passwords(srv, c):
    c.config_set("slowlog-log-slower-than", 0)
    c.execute_command("SLOWLOG", "RESET")
    failed_logins(srv)
    log = [entry_args(e) for e in slowlog(c, -1)]
    assert ["HELLO", "2", "AUTH", "(redacted)", "(redacted)"] in log
    assert ["AUTH", "(redacted)", "(redacted)"] in log
    assert ["AUTH", "(redacted)"] in log
    assert not any("not-real" in a for e in log for a in e)


def test_a_blocked_command_is_logged_once_served(srv, c):
    c.config_set("slowlog-log-slower-than", 0)
    blocked = srv.client()
    out = {}
    th = threading.Thread(target=lambda: out.update(r=blocked.blpop("l", 0)))
    th.start()
    wait_until(lambda: c.info("clients")["blocked_clients"] == 1, msg="client blocked")
    c.execute_command("SLOWLOG", "RESET")
    p = c.pipeline(transaction=True)
    p.lpush("l", "foo")
    p.execute_command("SLOWLOG", "RESET")
    p.execute()
    th.join(10)
    assert out["r"] == (b"l", b"foo")
    assert entry_args(slowlog(c)[0]) == ["BLPOP", "l", "0"]
    blocked.close()


def test_slowlog_help_and_arity(c):
    lines = c.execute_command("SLOWLOG", "HELP")
    assert any(b"GET" in line for line in lines)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        c.execute_command("SLOWLOG", "LEN", "x")


# ---------------------------------------------------------------------------------------
# LATENCY
# ---------------------------------------------------------------------------------------


def histogram(c, *names):
    raw = c.execute_command("LATENCY", "HISTOGRAM", *names)
    # RESP2: a flat list of name, [calls, n, histogram_usec, [bucket, count ...]].
    it = iter(raw)
    out = {}
    for name, body in zip(it, it):
        d = dict(zip(body[::2], body[1::2]))
        h = d[b"histogram_usec"]
        out[name.decode()] = (d[b"calls"], list(zip(h[::2], h[1::2])))
    return out


def test_latency_histogram_counts_calls_per_command(c):
    c.config_resetstat()
    h = histogram(c)
    assert list(h) == ["config|resetstat"]
    c.set("a", "b")
    c.set("c", "d")
    c.get("a")
    c.execute_command("CLIENT", "ID")
    h = histogram(c)
    assert h["set"][0] == 2 and h["get"][0] == 1
    # Cumulative counts at powers of two of microseconds, ending at the calls.
    buckets = h["set"][1]
    assert buckets and buckets[-1][1] == 2
    assert [b for b, _ in buckets] == sorted(b for b, _ in buckets)
    assert all(b in (1, 2, 4, 8, 16, 32, 65, 131, 262, 524, 1048, 2097, 4194, 8388) for b, _ in buckets)
    assert set(histogram(c, "set", "hset", "nosuch")) == {"set"}
    assert set(histogram(c, "client")) == {"client|id"}
    assert set(histogram(c, "CLIENT|ID")) == {"client|id"}
    c.config_set("latency-tracking", "no")
    c.config_resetstat()
    c.set("a", "b")
    assert histogram(c, "set") == {}


def test_latency_events_latest_history_reset(c):
    assert c.execute_command("LATENCY", "LATEST") == []
    c.config_set("latency-monitor-threshold", 100)
    c.execute_command("DEBUG", "SLEEP", "0.2")
    latest = c.execute_command("LATENCY", "LATEST")
    assert len(latest) == 1
    name, when, last, worst = latest[0]
    assert name == b"command"
    assert 200 <= last < 2000 and worst == last and when > 0
    hist = c.execute_command("LATENCY", "HISTORY", "command")
    assert hist == [[when, last]]
    assert c.execute_command("LATENCY", "HISTORY", "blabla") == []
    # Fast commands under the threshold leave no event.
    c.ping()
    assert len(c.execute_command("LATENCY", "LATEST")) == 1
    assert c.execute_command("LATENCY", "RESET", "blabla") == 0
    assert c.execute_command("LATENCY", "RESET") == 1
    assert c.execute_command("LATENCY", "LATEST") == []


def test_latency_graph_doctor_and_help(c):
    with pytest.raises(redis.ResponseError, match="No samples available for event 'command'"):
        c.execute_command("LATENCY", "GRAPH", "command")
    doctor = c.execute_command("LATENCY", "DOCTOR")
    assert b"Latency monitoring is disabled" in doctor
    c.config_set("latency-monitor-threshold", 100)
    c.execute_command("DEBUG", "SLEEP", "0.2")
    graph = c.execute_command("LATENCY", "GRAPH", "command").decode()
    assert graph.startswith("command - high ")
    assert graph.splitlines()[1] == "-" * 80
    doctor = c.execute_command("LATENCY", "DOCTOR").decode()
    assert "1. command: 1 latency spikes" in doctor
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'latency|help' command"):
        c.execute_command("LATENCY", "HELP", "xxx")


def test_info_latencystats_reports_the_configured_percentiles(srv, c):
    c = srv.client(raw=True)
    c.config_resetstat()
    for _ in range(10):
        c.set("k", "v")
    text = c.execute_command("INFO", "LATENCYSTATS").decode()
    assert "# Latencystats" in text
    line = next(x for x in text.splitlines() if x.startswith("latency_percentiles_usec_set:"))
    parts = dict(p.split("=") for p in line.split(":", 1)[1].split(","))
    assert list(parts) == ["p50", "p99", "p99.9"]
    assert all(float(v) > 0 for v in parts.values())
    c.config_set("latency-tracking-info-percentiles", "0 50 100")
    line = next(
        x for x in c.execute_command("INFO", "LATENCYSTATS").decode().splitlines()
        if x.startswith("latency_percentiles_usec_set:")
    )
    assert [p.split("=")[0] for p in line.split(":", 1)[1].split(",")] == ["p0", "p50", "p100"]
    with pytest.raises(redis.ResponseError, match=r"should sit between \[0.0,100.0\]"):
        c.config_set("latency-tracking-info-percentiles", "101")
    assert c.config_get("latency-tracking-info-percentiles") == [
        b"latency-tracking-info-percentiles", b"0 50 100"
    ]


# ---------------------------------------------------------------------------------------
# MONITOR
# ---------------------------------------------------------------------------------------


def monitor(srv) -> RawConn:
    m = RawConn(srv.port)
    assert m.cmd("MONITOR") == "OK"
    return m


def test_monitor_shows_commands_as_redis_formats_them(srv, c):
    m = monitor(srv)
    c.set("foo", 'x"y\n')
    c.get("foo")
    c.execute_command("SELECT", "3")
    line = m.read_reply()
    ts, rest = line.split(" ", 1)
    sec, usec = ts.split(".")
    assert sec.isdigit() and len(usec) == 6
    assert rest.startswith("[0 127.0.0.1:")
    assert rest.endswith('] "SET" "foo" "x\\"y\\n"')
    assert m.read_reply().endswith('"GET" "foo"')
    # The database after the command ran, as Redis shows it.
    assert '[3 127.0.0.1:' in m.read_reply()
    m.close()


def test_monitor_shows_scripts_then_their_commands_as_lua(srv, c):
    c.function_load(
        "#!lua name=t\nredis.register_function('f', function() return redis.call('set', 'foo', 'bar') end)",
        replace=True,
    )
    m = monitor(srv)
    c.eval("redis.call('set', KEYS[1], ARGV[1])", 1, "foo", "bar")
    assert '"EVAL"' in m.read_reply()
    assert m.read_reply().endswith('[0 lua] "set" "foo" "bar"')
    c.fcall("f", 0)
    assert '"FCALL" "f" "0"' in m.read_reply()
    assert m.read_reply().endswith('[0 lua] "set" "foo" "bar"')
    m.close()


def test_monitor_orders_multi_exec_and_skips_admin_commands(srv, c):
    m = monitor(srv)
    raw = RawConn(srv.port)
    assert raw.cmd("MULTI") == "OK"
    assert raw.cmd("SET", "foo", "bar") == "QUEUED"
    raw.cmd("EXEC")
    assert raw.cmd("MULTI") == "OK"
    assert isinstance(raw.cmd("SYNTAX", "error"), RespError)
    assert isinstance(raw.cmd("EXEC"), RespError)
    c.config_get("port")  # admin: not shown
    c.ping()
    assert m.read_reply().endswith('"MULTI"')
    assert m.read_reply().endswith('"SET" "foo" "bar"')
    assert m.read_reply().endswith('"EXEC"')
    assert m.read_reply().endswith('"MULTI"')
    assert m.read_reply().endswith('"EXEC"')
    assert m.read_reply().endswith('"PING"')
    raw.close()
    m.close()


def test_monitor_redacts_passwords(srv, c):
    m = monitor(srv)
    failed_logins(srv)
    assert m.read_reply().endswith('"AUTH" "(redacted)"')
    assert m.read_reply().endswith('"AUTH" "(redacted)" "(redacted)"')
    assert m.read_reply().endswith('"HELLO" "2" "AUTH" "(redacted)" "(redacted)"')
    m.close()


def test_a_monitor_is_flagged_and_reset_ends_it(srv, c):
    m = monitor(srv)
    line = next(x for x in c.client_list() if x["cmd"] == "monitor")
    assert "O" in line["flags"]
    # Its own commands still run and are shown to it.
    m.send_cmd("PING")
    got = {m.read_reply(), m.read_reply()}
    assert "PONG" in got
    assert any(isinstance(x, str) and x.endswith('"PING"') for x in got)
    assert m.cmd("RESET") == "RESET"
    c.set("after", "reset")
    assert m.cmd("PING") == "PONG"
    m.close()


def test_monitor_is_refused_inside_multi(c):
    p = c.pipeline(transaction=True)
    p.execute_command("MONITOR")
    res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError)
    assert "MONITOR isn't allowed for DENY BLOCKING client" in str(res[0])


@pytest.mark.skipif(IS_REDIS, reason="Ember's own gate: nothing is recorded under it")
def test_nothing_is_observed_under_the_thresholds(c):
    c.config_set("slowlog-log-slower-than", 10_000_000)
    c.execute_command("SLOWLOG", "RESET")
    for _ in range(200):
        c.set("k", "v")
    assert c.execute_command("SLOWLOG", "LEN") == 0
    assert c.execute_command("LATENCY", "LATEST") == []


@pytest.mark.skipif(IS_REDIS, reason="Redis counts its slow log in used_memory")
def test_a_long_slow_log_never_evicts_the_dataset(start_server):
    """The slow log is not data: with a long `slowlog-max-len` it can hold more than the
    headroom under maxmemory, and it must not make the dataset be evicted. Its bytes are
    left out of used_memory and reported as `ember_slowlog_memory`."""
    srv = start_server("--maxmemory", "40mb", "--maxmemory-policy", "allkeys-lru")
    c = srv.client()
    p = c.pipeline(transaction=False)
    for i in range(10_000):
        p.set(f"data:{i}", "v" * 1000)
    p.execute()
    assert c.dbsize() == 10_000
    before = c.info("memory")["used_memory"]
    c.config_set("slowlog-max-len", 100_000)
    c.config_set("slowlog-log-slower-than", 0)
    # 20,000 entries of 31 arguments cut to 128 bytes: about 100 MB of slow log.
    big = ["x" * 200] * 31
    for start in range(0, 20_000, 1_000):
        p = c.pipeline(transaction=False)
        for _ in range(1_000):
            p.execute_command("EXISTS", *big)
        p.execute()
    mem = c.info("memory")
    assert mem["ember_slowlog_memory"] > 80 << 20, mem["ember_slowlog_memory"]
    assert mem["used_memory"] < before + (8 << 20), (before, mem["used_memory"])
    assert c.info("stats")["evicted_keys"] == 0
    assert c.dbsize() == 10_000
    # Dropping it gives the bytes back.
    c.config_set("slowlog-log-slower-than", -1)
    c.execute_command("SLOWLOG", "RESET")
    assert c.info("memory")["ember_slowlog_memory"] == 0


# ---------------------------------------------------------------------------------------
# INFO errorstats and cpu
# ---------------------------------------------------------------------------------------


def test_info_errorstats_counts_error_replies_by_code(c):
    c.config_resetstat()
    assert c.info("errorstats") == {}
    c.set("s", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        c.lpush("s", "a")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        c.execute_command("NOSUCHCMD")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        c.execute_command("GET")
    # Inside EXEC each failing command's error counts.
    p = c.pipeline(transaction=True)
    p.lpush("s", "a")
    p.get("s")
    res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError) and res[1] == b"x"
    assert c.info("errorstats") == {
        "errorstat_ERR": {"count": 2},
        "errorstat_WRONGTYPE": {"count": 2},
    }
    assert c.info("stats")["total_error_replies"] == 4
    stats = c.info("commandstats")
    assert stats["cmdstat_lpush"]["failed_calls"] == 2
    assert stats["cmdstat_get"]["rejected_calls"] == 1
    c.config_resetstat()
    assert c.info("errorstats") == {}
    assert c.info("stats")["total_error_replies"] == 0


def test_default_info_has_cpu_and_errorstats(c):
    info = c.info()
    for field in ("used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"):
        assert isinstance(info[field], float) and info[field] >= 0, field
    before = info["used_cpu_user"] + info["used_cpu_sys"]
    for _ in range(2000):
        c.ping()
    after = c.info("cpu")
    assert after["used_cpu_user"] + after["used_cpu_sys"] > before


def test_default_info_sections_are_redis_7s(srv):
    raw = srv.client(raw=True)
    text = raw.execute_command("INFO").decode()
    headers = [x[2:] for x in text.split("\r\n") if x.startswith("# ")]
    want = ["Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU",
            "Errorstats", "Cluster", "Keyspace"]
    if IS_REDIS:
        want.insert(want.index("Errorstats"), "Modules")
    assert headers == want
    raw.close()
