"""Server commands: INFO TIME CONFIG COMMAND DBSIZE."""

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import redis

from helpers import (HOST, IS_EMBER, IS_REDIS_70, RespError, find_ember_bin, free_port,
                     make_client, parse_info, parse_kv, wait_until)


def info(c, *sections):
    return parse_info(c.execute_command("INFO", *sections))


# --------------------------------------------------------------------------- INFO

def test_info_default_sections(rr):
    text = rr.execute_command("INFO")
    assert isinstance(text, bytes)
    assert text.startswith(b"# Server\r\n")
    assert b"\n" not in text.replace(b"\r\n", b"")
    sections = parse_info(text)
    for name in ("server", "clients", "memory", "stats", "keyspace"):
        assert name in sections, f"INFO lacks section {name}"
    assert "commandstats" not in sections


@pytest.mark.parametrize("arg", ["all", "everything"])
def test_info_all_includes_commandstats(rr, arg):
    sections = info(rr, arg)
    for name in ("server", "clients", "memory", "stats", "keyspace", "commandstats"):
        assert name in sections


def test_info_server(server, rr):
    s = info(rr, "server")
    assert list(s) == ["server"]
    s = s["server"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", s["redis_version"])
    assert s["redis_mode"] == "standalone"
    assert s["tcp_port"] == str(server.port)
    assert int(s["process_id"]) == server.proc.pid
    assert int(s["uptime_in_seconds"]) >= 0
    assert re.fullmatch(r"[0-9a-f]{40}", s["run_id"])
    assert s["arch_bits"] == "64"


def test_info_section_case_insensitive(rr):
    assert list(info(rr, "SERVER")) == ["server"]
    assert list(info(rr, "Keyspace")) == ["keyspace"]


def test_info_multiple_sections(rr):
    sections = info(rr, "server", "clients")
    assert sorted(sections) == ["clients", "server"]


def test_info_unknown_section_is_empty(rr):
    assert rr.execute_command("INFO", "nosuchsection") == b""


def test_info_clients(server, rr):
    conns = [server.raw() for _ in range(3)]
    try:
        for c in conns:
            assert c.cmd("PING") == "PONG"
        now = info(rr, "clients")["clients"]
        n_open = int(now["connected_clients"])
        assert n_open >= 4          # rr + the three raw connections
        assert now["maxclients"] == "10000"
        assert now["blocked_clients"] == "0"
    finally:
        for c in conns:
            c.close()
    wait_until(lambda: int(info(rr, "clients")["clients"]["connected_clients"]) <= n_open - 3,
               timeout=10, msg="connected_clients to drop after closing connections")


def test_info_memory(rr):
    m = info(rr, "memory")["memory"]
    assert int(m["used_memory"]) > 0
    assert re.fullmatch(r"[\d.]+[BKMGTP]?", m["used_memory_human"])


def test_info_memory_grows_with_data(rr):
    before = int(info(rr, "memory")["memory"]["used_memory"])
    rr.execute_command("MSET", *[x for i in range(2000) for x in (f"key:{i}", "x" * 1000)])
    after = int(info(rr, "memory")["memory"]["used_memory"])
    assert after - before > 1_000_000


def test_info_stats(server, rr):
    rr.execute_command("CONFIG", "RESETSTAT")
    rr.execute_command("SET", "k", "v")
    rr.execute_command("GET", "k")
    rr.execute_command("GET", "k")
    rr.execute_command("GET", "nokey")
    st = info(rr, "stats")["stats"]
    assert st["keyspace_hits"] == "2"
    assert st["keyspace_misses"] == "1"
    assert int(st["total_commands_processed"]) >= 4
    conns_before = int(st["total_connections_received"])
    c = server.raw()
    c.cmd("PING")
    c.close()
    st = info(rr, "stats")["stats"]
    assert int(st["total_connections_received"]) == conns_before + 1


def test_info_stats_expired_keys(rr):
    rr.execute_command("CONFIG", "RESETSTAT")
    rr.execute_command("SET", "k", "v", "PX", 10)
    wait_until(lambda: rr.execute_command("EXISTS", "k") == 0, timeout=10, msg="k to expire")
    wait_until(lambda: info(rr, "stats")["stats"]["expired_keys"] == "1", timeout=10,
               msg="expired_keys to count the expired key")


def test_info_keyspace(server, rr):
    assert info(rr, "keyspace")["keyspace"] == {}
    rr.execute_command("MSET", "a", "1", "b", "2", "c", "3")
    rr.execute_command("EXPIRE", "a", 100)
    db1 = server.client(db=1, raw=True)
    try:
        db1.execute_command("SET", "x", "1")
        ks = info(rr, "keyspace")["keyspace"]
        assert sorted(ks) == ["db0", "db1"]
        db0 = parse_kv(ks["db0"])
        assert db0["keys"] == "3"
        assert db0["expires"] == "1"
        assert int(db0["avg_ttl"]) >= 0
        assert ks["db0"].startswith("keys=3,expires=1,avg_ttl=")
        assert ks["db1"].startswith("keys=1,expires=0,avg_ttl=0")
    finally:
        db1.close()


def test_info_commandstats(server, rr):
    c = server.client(raw=True, single_connection_client=True)
    try:
        c.execute_command("PING")
        assert c.execute_command("CONFIG", "RESETSTAT") == b"OK"
        for _ in range(3):
            c.execute_command("GET", "k")
        c.execute_command("SET", "k", "v")
        cs = info(c, "commandstats")["commandstats"]
        get = parse_kv(cs["cmdstat_get"])
        assert get["calls"] == "3"
        assert int(get["usec"]) >= 0
        assert float(get["usec_per_call"]) >= 0
        assert get["rejected_calls"] == "0"
        assert get["failed_calls"] == "0"
        assert parse_kv(cs["cmdstat_set"])["calls"] == "1"
        assert re.fullmatch(r"calls=3,usec=\d+,usec_per_call=\d+\.\d{2},rejected_calls=0,failed_calls=0",
                            cs["cmdstat_get"])
        assert "cmdstat_incr" not in cs
    finally:
        c.close()


def test_config_resetstat_clears_commandstats(rr):
    rr.execute_command("GET", "k")
    assert "cmdstat_get" in info(rr, "commandstats")["commandstats"]
    assert rr.execute_command("CONFIG", "RESETSTAT") == b"OK"
    cs = info(rr, "commandstats").get("commandstats", {})
    assert "cmdstat_get" not in cs
    st = info(rr, "stats")["stats"]
    assert st["keyspace_hits"] == "0" and st["keyspace_misses"] == "0"


# --------------------------------------------------------------------------- TIME

def test_time(rr):
    reply = rr.execute_command("TIME")
    assert isinstance(reply, list) and len(reply) == 2
    secs, usecs = reply
    assert isinstance(secs, bytes) and secs.isdigit()
    assert isinstance(usecs, bytes) and usecs.isdigit()
    assert 0 <= int(usecs) < 1_000_000
    assert abs(int(secs) + int(usecs) / 1e6 - time.time()) < 5


def test_time_arity(rr):
    with pytest.raises(redis.ResponseError, match=r"^wrong number of arguments for 'time' command$"):
        rr.execute_command("TIME", "x")


# --------------------------------------------------------------------------- CONFIG GET

def config_get(c, *patterns):
    flat = c.execute_command("CONFIG", "GET", *patterns)
    assert isinstance(flat, list) and len(flat) % 2 == 0
    return dict(zip(flat[::2], flat[1::2]))


def test_config_get_defaults(server, rr):
    assert config_get(rr, "maxclients") == {b"maxclients": b"10000"}
    assert config_get(rr, "timeout") == {b"timeout": b"0"}
    assert config_get(rr, "proto-max-bulk-len") == {b"proto-max-bulk-len": b"536870912"}
    assert config_get(rr, "databases") == {b"databases": b"16"}
    assert config_get(rr, "port") == {b"port": str(server.port).encode()}


def test_config_get_glob(rr):
    assert config_get(rr, "maxclient?") == {b"maxclients": b"10000"}
    assert config_get(rr, "timeou[st]") == {b"timeout": b"0"}
    assert config_get(rr, "proto-max-*") == {b"proto-max-bulk-len": b"536870912"}
    everything = config_get(rr, "*")
    assert len(everything) > 5
    for k in (b"maxclients", b"timeout", b"port", b"databases", b"proto-max-bulk-len"):
        assert k in everything


def test_config_get_several_patterns(rr):
    got = config_get(rr, "maxclients", "timeout", "nosuchparam")
    assert got == {b"maxclients": b"10000", b"timeout": b"0"}
    # overlapping patterns report each parameter once
    flat = rr.execute_command("CONFIG", "GET", "timeout", "timeou*", "timeout")
    assert flat == [b"timeout", b"0"]


def test_config_get_unknown_is_empty(rr):
    assert rr.execute_command("CONFIG", "GET", "nosuchparam") == []


def test_config_get_resp3_map(rr3):
    assert rr3.execute_command("CONFIG", "GET", "maxclients", "timeout") == {
        b"maxclients": b"10000", b"timeout": b"0"}


def test_config_get_arity(rr):
    with pytest.raises(redis.ResponseError,
                       match=r"^wrong number of arguments for 'config\|get' command$"):
        rr.execute_command("CONFIG", "GET")


# --------------------------------------------------------------------------- CONFIG SET

def test_config_set_several_pairs(rr):
    try:
        assert rr.execute_command("CONFIG", "SET", "timeout", "30", "maxclients", "5000") == b"OK"
        assert config_get(rr, "timeout", "maxclients") == {b"timeout": b"30",
                                                           b"maxclients": b"5000"}
        assert int(info(rr, "clients")["clients"]["maxclients"]) == 5000
    finally:
        rr.execute_command("CONFIG", "SET", "timeout", "0", "maxclients", "10000")
    assert config_get(rr, "timeout", "maxclients") == {b"timeout": b"0", b"maxclients": b"10000"}


def test_config_set_unknown_parameter(rr):
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("CONFIG", "SET", "xyz", "1")
    assert str(e.value) == "Unknown option or number of arguments for CONFIG SET - 'xyz'"


def test_config_set_is_atomic(rr):
    # one bad pair rejects the whole command: timeout stays unchanged
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("CONFIG", "SET", "timeout", "77", "xyz", "1")
    assert str(e.value) == "Unknown option or number of arguments for CONFIG SET - 'xyz'"
    assert config_get(rr, "timeout") == {b"timeout": b"0"}


def test_config_set_bad_values(rr):
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("CONFIG", "SET", "maxclients", "abc")
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'maxclients') - "
                            "argument couldn't be parsed into an integer")
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("CONFIG", "SET", "timeout", "-1")
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'timeout') - "
                            "argument must be between 0 and 2147483647 inclusive")
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("CONFIG", "SET", "timeout", "5", "timeout", "6")
    assert str(e.value) == ("CONFIG SET failed (possibly related to argument 'timeout') - "
                            "duplicate parameter")
    assert config_get(rr, "timeout", "maxclients") == {b"timeout": b"0", b"maxclients": b"10000"}


def test_config_set_arity(rr):
    with pytest.raises(redis.ResponseError,
                       match=r"^wrong number of arguments for 'config\|set' command$"):
        rr.execute_command("CONFIG", "SET", "timeout")
    # an odd number of arguments after the first pair is a syntax error
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("CONFIG", "SET", "timeout", "0", "maxclients")


def test_config_unknown_subcommand(rr):
    with pytest.raises(redis.ResponseError, match=r"^unknown subcommand 'FOO'\. Try CONFIG HELP\.$"):
        rr.execute_command("CONFIG", "FOO")


def test_config_set_maxclients_rejects_new_connections(start_server):
    srv = start_server()
    admin = srv.raw()
    # The harness's start-up probe may still be closing; it would count against the limit.
    wait_until(lambda: parse_info(admin.cmd("INFO", "clients"))["clients"]["connected_clients"] == "1",
               msg="the start-up probe to disconnect")
    assert admin.cmd("CONFIG", "SET", "maxclients", "2") == "OK"
    ok = srv.raw()
    assert ok.cmd("PING") == "PONG"
    rejected = srv.raw()
    assert rejected.read_raw() == b"-ERR max number of clients reached\r\n"
    assert rejected.is_closed()
    st = parse_info(admin.cmd("INFO", "stats"))["stats"]
    assert st["rejected_connections"] == "1"
    assert admin.cmd("CONFIG", "SET", "maxclients", "10") == "OK"
    again = srv.raw()
    assert again.cmd("PING") == "PONG"


def test_config_set_timeout_closes_idle_clients(start_server):
    srv = start_server()
    admin = srv.raw()
    assert admin.cmd("CONFIG", "SET", "timeout", "1") == "OK"
    idle = srv.raw()
    assert idle.cmd("PING") == "PONG"
    t0 = time.monotonic()
    assert idle.is_closed(timeout=15), "idle client was not disconnected with timeout 1"
    assert time.monotonic() - t0 >= 0.5


def test_config_set_proto_max_bulk_len(start_server):
    srv = start_server()
    c = srv.raw()
    assert c.cmd("CONFIG", "SET", "proto-max-bulk-len", "1mb") == "OK"
    assert c.cmd("CONFIG", "GET", "proto-max-bulk-len") == [b"proto-max-bulk-len", b"1048576"]
    assert c.cmd("SETRANGE", "k", 2_000_000, "x") == RespError(
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    assert c.cmd("SETRANGE", "k", 1000, "x") == 1001
    c.send_cmd("APPEND", "big", b"x" * 1_000_000)
    assert c.read_reply() == 1_000_000
    assert c.cmd("APPEND", "big", b"x" * 100_000) == RespError(
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    # a bulk string longer than the limit is a protocol error
    other = srv.raw()
    other.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n")
    reply = other.read_reply()
    assert reply == RespError("ERR Protocol error: invalid bulk length")
    assert other.is_closed()


# --------------------------------------------------------------------------- COMMAND

def test_command_count(rr):
    n = rr.execute_command("COMMAND", "COUNT")
    assert isinstance(n, int) and n > 50
    assert len(rr.execute_command("COMMAND")) == n


def test_command_list(rr):
    names = rr.execute_command("COMMAND", "LIST")
    assert all(isinstance(x, bytes) for x in names)
    top = {x for x in names if b"|" not in x}
    assert len(top) == rr.execute_command("COMMAND", "COUNT")
    for cmd in (b"get", b"set", b"ping", b"client", b"config", b"command", b"expire", b"scan"):
        assert cmd in names
    assert b"config|get" in names
    assert b"client|kill" in names


def test_command_list_filterby_pattern(rr):
    got = set(rr.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "incr*"))
    assert got == {b"incr", b"incrby", b"incrbyfloat"}


def test_command_list_filterby_aclcat(rr):
    got = set(rr.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", "string"))
    assert {b"get", b"set", b"append", b"incr", b"mget"} <= got
    assert b"del" not in got


def test_command_list_errors(rr):
    with pytest.raises(redis.ResponseError, match=r"^syntax error$"):
        rr.execute_command("COMMAND", "LIST", "FOO")


def test_command_info_get(rr):
    reply = rr.execute_command("COMMAND", "INFO", "get")
    assert len(reply) == 1
    entry = reply[0]
    assert len(entry) == 10
    name, arity, flags, first, last, step, categories = entry[:7]
    assert name == b"get"
    assert arity == 2
    assert set(flags) == {b"readonly", b"fast"}
    assert (first, last, step) == (1, 1, 1)
    assert set(categories) == {b"@read", b"@string", b"@fast"}
    assert entry[7] == []          # tips
    assert entry[9] == []          # subcommands


def test_command_info_key_specs_get(rr):
    entry = rr.execute_command("COMMAND", "INFO", "get")[0]
    assert entry[8] == [[b"flags", [b"RO", b"access"],
                         b"begin_search", [b"type", b"index", b"spec", [b"index", 1]],
                         b"find_keys", [b"type", b"range", b"spec",
                                        [b"lastkey", 0, b"keystep", 1, b"limit", 0]]]]


@pytest.mark.parametrize("cmd,arity,flags,keys", [
    ("set", -3, {b"write", b"denyoom"}, (1, 1, 1)),
    ("mset", -3, {b"write", b"denyoom"}, (1, -1, 2)),
    ("del", -2, {b"write"}, (1, -1, 1)),
    ("mget", -2, {b"readonly", b"fast"}, (1, -1, 1)),
    ("incr", 2, {b"write", b"denyoom", b"fast"}, (1, 1, 1)),
    ("expire", -3, {b"write", b"fast"}, (1, 1, 1)),
    ("rename", 3, {b"write"}, (1, 2, 1)),
    ("ping", -1, {b"fast"}, (0, 0, 0)),
    ("keys", 2, {b"readonly"}, (0, 0, 0)),
])
def test_command_info_table(rr, cmd, arity, flags, keys):
    entry = rr.execute_command("COMMAND", "INFO", cmd)[0]
    assert entry[0] == cmd.encode()
    assert entry[1] == arity
    assert set(entry[2]) == flags
    assert tuple(entry[3:6]) == keys


def test_command_info_several_and_unknown(rr):
    reply = rr.execute_command("COMMAND", "INFO", "get", "nosuchcmd", "SET")
    assert len(reply) == 3
    assert reply[0][0] == b"get"
    assert reply[1] is None
    assert reply[2][0] == b"set"


def test_command_info_subcommands(rr):
    entry = rr.execute_command("COMMAND", "INFO", "config")[0]
    assert entry[0] == b"config"
    assert entry[1] == -2
    subs = {s[0] for s in entry[9]}
    assert {b"config|get", b"config|set", b"config|resetstat"} <= subs


def test_command_docs(rr):
    reply = rr.execute_command("COMMAND", "DOCS", "get")
    assert reply[0] == b"get"
    doc = dict(zip(reply[1][::2], reply[1][1::2]))
    # Redis 7.2 rewrote the summaries; 7.0 still says "Get the value of a key".
    expected = b"Get the value of a key" if IS_REDIS_70 else b"Returns the string value of a key."
    assert doc[b"summary"] == expected
    assert doc[b"since"] == b"1.0.0"
    assert doc[b"group"] == b"string"


@pytest.mark.skipif(IS_EMBER, reason="Ember's COMMAND DOCS has no complexity/arguments yet "
                    "(listed in README's differences)")
def test_command_docs_complexity_and_arguments(rr):
    reply = rr.execute_command("COMMAND", "DOCS", "get")
    doc = dict(zip(reply[1][::2], reply[1][1::2]))
    assert doc[b"complexity"] == b"O(1)"
    args = [dict(zip(a[::2], a[1::2])) for a in doc[b"arguments"]]
    assert args[0][b"name"] == b"key" and args[0][b"type"] == b"key"


def test_command_docs_resp3_and_unknown(rr3):
    reply = rr3.execute_command("COMMAND", "DOCS", "get", "nosuchcmd")
    assert list(reply) == [b"get"]
    assert reply[b"get"][b"group"] == b"string"
    assert rr3.execute_command("COMMAND", "DOCS", "nosuchcmd") == {}


@pytest.mark.parametrize("args,keys", [
    (("SET", "a", "b"), [b"a"]),
    (("GET", "k"), [b"k"]),
    (("MSET", "a", "1", "b", "2"), [b"a", b"b"]),
    (("MGET", "a", "b", "c"), [b"a", b"b", b"c"]),
    (("DEL", "a", "b"), [b"a", b"b"]),
    (("RENAME", "a", "b"), [b"a", b"b"]),
    (("COPY", "a", "b", "DB", "1"), [b"a", b"b"]),
    (("LCS", "a", "b"), [b"a", b"b"]),
    (("EXPIRE", "a", "10"), [b"a"]),
    (("set", "a", "b", "EX", "10"), [b"a"]),
])
def test_command_getkeys(rr, args, keys):
    assert rr.execute_command("COMMAND", "GETKEYS", *args) == keys


def test_command_getkeys_errors(rr):
    with pytest.raises(redis.ResponseError, match=r"^Invalid command specified$"):
        rr.execute_command("COMMAND", "GETKEYS", "nosuchcmd", "a")
    with pytest.raises(redis.ResponseError,
                       match=r"^Invalid number of arguments specified for command$"):
        rr.execute_command("COMMAND", "GETKEYS", "GET", "a", "b")
    with pytest.raises(redis.ResponseError, match=r"^The command has no key arguments$"):
        rr.execute_command("COMMAND", "GETKEYS", "KEYS", "*")


def test_command_unknown_subcommand(rr):
    with pytest.raises(redis.ResponseError, match=r"^unknown subcommand 'FOO'\. Try COMMAND HELP\.$"):
        rr.execute_command("COMMAND", "FOO")


# --------------------------------------------------------------------------- config file

def test_config_file_is_loaded(start_server, tmp_path):
    conf = tmp_path / "ember.conf"
    conf.write_text("# test config\nmaxclients 123\ntimeout 7\n")
    srv = start_server(config_file=conf)
    with srv.raw() as c:
        assert c.cmd("CONFIG", "GET", "maxclients") == [b"maxclients", b"123"]
        assert c.cmd("CONFIG", "GET", "timeout") == [b"timeout", b"7"]


def test_command_line_overrides(start_server):
    srv = start_server("--maxclients", "77")
    with srv.raw() as c:
        assert c.cmd("CONFIG", "GET", "maxclients") == [b"maxclients", b"77"]


def test_requirepass_from_config_file(start_server, tmp_path):
    conf = tmp_path / "ember.conf"
    conf.write_text('requirepass "from-file"\n')
    srv = start_server(config_file=conf, password="from-file")
    with srv.raw() as c:
        assert c.cmd("GET", "k") == RespError("NOAUTH Authentication required.")
        assert c.cmd("AUTH", "from-file") == "OK"
        assert c.cmd("PING") == "PONG"
    assert srv.alive()


REDIS_CONF = Path(__file__).parent / "data" / "redis-7.0.15.conf"
DEBIAN_CONF = Path("/etc/redis/redis.conf")


def test_stock_redis_conf_loads(start_server, tmp_path):
    """The redis.conf that Redis 7.0.15 ships (71 directives once comments are stripped)
    starts the server unchanged: 45 of its lines used to be fatal. Directives Ember keeps
    without acting on them are shown by CONFIG GET, and each is logged once."""
    srv = start_server("--pidfile", str(tmp_path / "redis.pid"), config_file=REDIS_CONF)
    c = srv.client()
    assert c.ping() is True
    cfg = c.config_get("*")
    for name, value in [
        ("hash-max-listpack-entries", "512"),
        ("list-max-listpack-size", "-2"),
        ("lazyfree-lazy-eviction", "no"),
        ("oom-score-adj-values", "0 200 800"),
        ("slowlog-max-len", "128"),
        ("client-output-buffer-limit",
         "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    ]:
        assert cfg[name] == value, name
    assert (tmp_path / "redis.pid").read_text().strip() == str(srv.proc.pid)
    if IS_EMBER:
        out = srv.output()
        assert out.count("Directive 'activerehashing' is accepted") == 1, out
        assert "Directive 'port'" not in out


@pytest.mark.skipif(not DEBIAN_CONF.exists(), reason="Debian's redis-server is not installed")
def test_debian_redis_conf_loads(start_server, tmp_path):
    """Debian's /etc/redis/redis.conf (daemonize yes, a pidfile and log under /run and
    /var/log) loads; the flags after it keep the test in the foreground and in tmp."""
    srv = start_server("--daemonize", "no", "--pidfile", str(tmp_path / "p.pid"),
                       "--logfile", "", "--dir", str(tmp_path), config_file=DEBIAN_CONF)
    assert srv.client().config_get("appendfsync") == {"appendfsync": "everysec"}


def test_config_set_of_kept_directives(r):
    """CONFIG SET of the parameters tools and suites set first (Redis's suite stopped at
    them), with Redis's bounds and aliases."""
    for name, value in [
        ("list-max-listpack-size", "128"),
        ("zset-max-ziplist-entries", "64"),
        ("list-compress-depth", "1"),
        ("latency-monitor-threshold", "100"),
        ("lazyfree-lazy-user-del", "yes"),
        ("hash-max-listpack-value", "1024"),
    ]:
        old = r.config_get(name)[name]
        try:
            assert r.config_set(name, value) is True
            assert r.config_get(name) == {name: value}
        finally:
            r.config_set(name, old)
    for name, bad in [("active-expire-effort", "11"), ("lazyfree-lazy-eviction", "maybe"),
                      ("repl-diskless-load", "sometimes"), ("hll-sparse-max-bytes", "x")]:
        with pytest.raises(redis.ResponseError, match="CONFIG SET failed"):
            r.config_set(name, bad)
    assert r.config_get("hash-max-ziplist-entries") == {"hash-max-ziplist-entries": "512"}
    with pytest.raises(redis.ResponseError, match="Unknown option"):
        r.config_set("no-such-directive", "1")


@pytest.mark.skipif(not IS_EMBER, reason="starts the ember binary itself")
def test_daemonize_and_pidfile(tmp_path):
    """`daemonize yes`: the command returns at once, the server goes on in the background
    with its pid in `pidfile`, and removes the file when it shuts down."""
    port = free_port()
    pidfile = tmp_path / "ember.pid"
    started = subprocess.run(
        [str(find_ember_bin()), "--daemonize", "yes", "--port", str(port), "--bind", HOST,
         "--pidfile", str(pidfile), "--logfile", str(tmp_path / "ember.log"),
         "--dir", str(tmp_path), "--save", ""],
        timeout=20, capture_output=True)
    assert started.returncode == 0, started
    c = make_client(port)
    deadline = time.monotonic() + 20
    while True:
        try:
            if pidfile.exists() and c.ping():
                break
        except redis.ConnectionError:
            pass
        assert time.monotonic() < deadline, "the daemon did not come up"
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    assert _running(pid)
    try:
        c.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    deadline = time.monotonic() + 20
    while _running(pid) or pidfile.exists():
        assert time.monotonic() < deadline, "the daemon did not exit and clean up"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (a daemon is reaped by init, which may be
    slow to do it in a container)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not IS_EMBER, reason="reads Ember's log")
def test_log_to_a_file_has_no_colour_codes(start_server):
    """stdout redirected to a file (as here, or by a supervisor) gets plain log lines."""
    srv = start_server()
    wait_until(lambda: "Ready to accept connections" in srv.output(), msg="the ready line")
    assert "\x1b[" not in srv.output(), srv.output()[:500]


# --------------------------------------------------------------------------- ROLE MODULE LOLWUT

def test_role_of_a_standalone_master(rr):
    assert rr.execute_command("ROLE") == [b"master", 0, []]


def test_module_list_is_empty_and_loading_fails_as_in_redis(rr, r):
    assert rr.execute_command("MODULE", "LIST") == []
    assert any(b"LIST" in line for line in rr.execute_command("MODULE", "HELP"))
    if IS_EMBER:
        # redis-server refuses both before trying (enable-module-command no); Ember cannot
        # load modules at all and says so as a failed load does.
        with pytest.raises(redis.ResponseError, match="no such module with that name"):
            r.execute_command("MODULE", "UNLOAD", "nosuch")
        with pytest.raises(redis.ResponseError, match="Error loading the extension"):
            r.execute_command("MODULE", "LOAD", "/nonexistent/module.so")


def test_lolwut_answers_the_version(rr, r):
    text = rr.execute_command("LOLWUT")
    version = r.info("server")["redis_version"]
    assert text == f"Redis ver. {version}\n".encode()
    assert rr.execute_command("LOLWUT", "VERSION", "7") == text
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.execute_command("LOLWUT", "VERSION", "x")


def test_client_no_evict_sets_the_e_flag(r):
    assert r.execute_command("CLIENT", "NO-EVICT", "on") == b"OK"
    me = r.client_info()
    assert "e" in me["flags"]
    assert r.execute_command("CLIENT", "NO-EVICT", "off") == b"OK"
    assert "e" not in r.client_info()["flags"]
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("CLIENT", "NO-EVICT", "maybe")


def test_info_server_has_the_git_commit(rr):
    text = rr.execute_command("INFO", "SERVER").decode()
    assert re.search(r"\r\nredis_git_sha1:[0-9a-f]{8}\r\n", text), text
    assert re.search(r"\r\nredis_git_dirty:[01]\r\n", text), text


def test_config_get_hidden_directives_answer_only_by_name(r):
    # Redis's HIDDEN_CONFIG: left out of patterns, there when asked by name.
    assert "key-load-delay" not in r.config_get("*")
    assert "key-load-delay" not in r.config_get("key-load-*")
    assert r.config_get("key-load-delay") == {"key-load-delay": "0"}


def test_client_kill_user_of_no_such_user(r):
    with pytest.raises(redis.ResponseError, match="No such user 'wrong_user'"):
        r.execute_command("CLIENT", "KILL", "USER", "wrong_user")
    assert r.execute_command("CLIENT", "KILL", "USER", "default", "SKIPME", "yes") >= 0


def test_config_resetstat_zeroes_lazyfreed_objects(r):
    # A hashtable set of 10,000 members: freed lazily by Redis too (effort > 64).
    r.sadd("big", *(f"m{i}" for i in range(10_000)))
    r.unlink("big")
    wait_until(lambda: r.info("memory")["lazyfree_pending_objects"] == 0
               and r.info("memory")["lazyfreed_objects"] >= 1, msg="lazy free done")
    r.config_resetstat()
    assert r.info("memory")["lazyfreed_objects"] == 0
