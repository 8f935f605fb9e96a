"""Connection-level commands: PING ECHO HELLO AUTH SELECT QUIT RESET CLIENT *."""

import threading
import time

import pytest
import redis

from helpers import IS_REDIS, IS_REDIS_70, RespError, requires_72, parse_client_line, wait_until

WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOAUTH = "NOAUTH Authentication required."
# Redis 7.2 added "<proto>" to this message; 7.0 lacks it.
HELLO_NOAUTH_72 = ("NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                   "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
                   "select the RESP protocol version at the same time")
HELLO_NOAUTH_70 = HELLO_NOAUTH_72.replace("HELLO <proto> AUTH", "HELLO AUTH")
HELLO_NOAUTH = HELLO_NOAUTH_70 if IS_REDIS_70 else HELLO_NOAUTH_72


# --------------------------------------------------------------------------- PING / ECHO

def test_ping_simple_string(raw):
    c = raw()
    c.send(b"*1\r\n$4\r\nPING\r\n")
    assert c.read_raw() == b"+PONG\r\n"


def test_ping_with_argument_is_bulk(raw):
    c = raw()
    c.send_cmd("PING", "hello world")
    assert c.read_raw() == b"$11\r\nhello world\r\n"


def test_ping_redis_py(rr):
    assert rr.execute_command("PING") == b"PONG"
    assert rr.execute_command("PING", b"\x00bin\xff") == b"\x00bin\xff"


def test_ping_wrong_arity(rr):
    with pytest.raises(redis.ResponseError, match=r"^wrong number of arguments for 'ping' command$"):
        rr.execute_command("PING", "a", "b")


def test_echo(rr):
    assert rr.execute_command("ECHO", "hi") == b"hi"
    assert rr.execute_command("ECHO", "") == b""
    payload = bytes(range(256))
    assert rr.execute_command("ECHO", payload) == payload


@pytest.mark.parametrize("args", [(), ("a", "b")])
def test_echo_wrong_arity(rr, args):
    with pytest.raises(redis.ResponseError, match=r"^wrong number of arguments for 'echo' command$"):
        rr.execute_command("ECHO", *args)


def test_repeated_and_alternating_command_names_on_one_connection(raw):
    """Each command is found by its own name and subcommand, whatever came before it on
    the connection (Ember remembers the last name a connection sent)."""
    c = raw()
    assert c.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == "OK"
    assert c.cmd("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"allkeys-lru"]
    assert c.cmd("config", "set", "maxmemory-policy", "noeviction") == "OK"
    assert c.cmd("CONFIG", "get", "maxmemory-policy") == [b"maxmemory-policy", b"noeviction"]
    assert c.cmd("SET", "k", "v") == "OK"
    assert c.cmd("set", "k", "w") == "OK"
    assert c.cmd("Get", "k") == b"w"
    assert c.cmd("GET", "k") == b"w"
    assert c.cmd("OBJECT", "ENCODING", "k") == b"embstr"
    assert c.cmd("OBJECT", "REFCOUNT", "k") == 1
    assert c.cmd("CLIENT", "SETNAME", "named") == "OK"
    assert c.cmd("CLIENT", "GETNAME") == b"named"
    err = c.cmd("GETT", "k")
    assert isinstance(err, RespError) and err.message.startswith("ERR unknown command 'GETT'")
    assert c.cmd("GET", "k") == b"w"
    err = c.cmd("GET")
    assert isinstance(err, RespError)
    assert err.message == "ERR wrong number of arguments for 'get' command"


# --------------------------------------------------------------------------- HELLO

HELLO_KEYS = {b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"}


def _check_hello_map(m, proto, client_id=None):
    assert set(m.keys()) == HELLO_KEYS
    assert m[b"proto"] == proto
    assert isinstance(m[b"id"], int) and m[b"id"] > 0
    if client_id is not None:
        assert m[b"id"] == client_id
    assert m[b"mode"] == b"standalone"
    assert m[b"role"] == b"master"
    assert m[b"modules"] == []
    assert isinstance(m[b"server"], bytes) and m[b"server"]
    assert isinstance(m[b"version"], bytes) and m[b"version"].count(b".") == 2
    if IS_REDIS:
        assert m[b"server"] == b"redis"


def test_hello_3_returns_map(raw):
    c = raw()
    client_id = c.cmd("CLIENT", "ID")
    c.send_cmd("HELLO", "3")
    value, wire = c.read_frame()
    assert wire.startswith(b"%7\r\n")
    _check_hello_map(value, 3, client_id)
    # The connection now speaks RESP3: "no name" is the RESP3 null.
    c.send_cmd("CLIENT", "GETNAME")
    assert c.read_raw() == b"_\r\n"


def test_hello_2_returns_flat_array(raw):
    c = raw()
    c.send_cmd("HELLO", "2")
    value, wire = c.read_frame()
    assert wire.startswith(b"*14\r\n")
    m = dict(zip(value[::2], value[1::2]))
    _check_hello_map(m, 2)
    c.send_cmd("CLIENT", "GETNAME")
    assert c.read_raw() == b"$-1\r\n"


def test_hello_switch_back_to_2(raw):
    c = raw()
    c.send_cmd("HELLO", "3")
    assert isinstance(c.read_reply(), dict)
    c.send_cmd("HELLO", "2")
    assert isinstance(c.read_reply(), list)
    c.send_cmd("CLIENT", "GETNAME")
    assert c.read_raw() == b"$-1\r\n"


def test_hello_without_arguments_keeps_protocol(raw):
    c = raw()
    c.send_cmd("HELLO")
    value, wire = c.read_frame()
    assert wire.startswith(b"*14\r\n")
    assert dict(zip(value[::2], value[1::2]))[b"proto"] == 2


def test_hello_redis_py_protocol_3(r3):
    info = r3.execute_command("HELLO", "3")
    assert info[b"proto"] == 3
    assert info[b"id"] == r3.client_id()


@pytest.mark.parametrize("version", ["4", "1", "0"])
def test_hello_unsupported_protocol(raw, version):
    c = raw()
    assert c.cmd("HELLO", version) == RespError("NOPROTO unsupported protocol version")
    # still usable, still RESP2
    c.send_cmd("CLIENT", "GETNAME")
    assert c.read_raw() == b"$-1\r\n"


def test_hello_protocol_not_integer(raw):
    c = raw()
    assert c.cmd("HELLO", "abc") == RespError("ERR Protocol version is not an integer or out of range")


def test_hello_setname(raw):
    c = raw()
    reply = c.cmd("HELLO", "3", "SETNAME", "myconn")
    assert reply[b"proto"] == 3
    assert c.cmd("CLIENT", "GETNAME") == b"myconn"


def test_hello_bad_option(raw):
    c = raw()
    assert c.cmd("HELLO", "3", "FOO") == RespError("ERR Syntax error in HELLO option 'FOO'")
    assert c.cmd("HELLO", "3", "SETNAME") == RespError("ERR Syntax error in HELLO option 'SETNAME'")
    assert c.cmd("HELLO", "3", "AUTH", "default") == RespError("ERR Syntax error in HELLO option 'AUTH'")


# --------------------------------------------------------------------------- AUTH

def test_auth_without_password_configured(raw):
    c = raw()
    assert c.cmd("AUTH", "foo") == RespError(
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?")
    assert c.cmd("AUTH", "a", "b", "c") == RespError("ERR syntax error")


@pytest.fixture
def authsrv(start_server):
    return start_server("--requirepass", "s3cret", password="s3cret")


def test_auth_required(authsrv):
    with authsrv.raw() as c:
        assert c.cmd("PING") == RespError(NOAUTH)
        assert c.cmd("ECHO", "x") == RespError(NOAUTH)
        assert c.cmd("CLIENT", "ID") == RespError(NOAUTH)
        assert c.cmd("GET", "k") == RespError(NOAUTH)
        assert c.cmd("SET", "k", "v") == RespError(NOAUTH)
        assert c.cmd("AUTH", "wrong") == RespError(WRONGPASS)
        assert c.cmd("AUTH", "default", "wrong") == RespError(WRONGPASS)
        assert c.cmd("AUTH", "nosuchuser", "s3cret") == RespError(WRONGPASS)
        assert c.cmd("ECHO", "x") == RespError(NOAUTH)
        assert c.cmd("AUTH", "s3cret") == "OK"
        assert c.cmd("ECHO", "x") == b"x"
        assert c.cmd("SET", "k", "v") == "OK"
        assert c.cmd("GET", "k") == b"v"
    with authsrv.raw() as c:
        assert c.cmd("AUTH", "default", "s3cret") == "OK"
        assert c.cmd("GET", "k") == b"v"


def test_auth_redis_py_wrong_password(authsrv):
    bad = authsrv.client(password="nope")
    with pytest.raises(redis.AuthenticationError):
        bad.ping()
    good = authsrv.client()
    assert good.ping() is True


def test_hello_auth(authsrv):
    with authsrv.raw() as c:
        assert c.cmd("HELLO", "3") == RespError(HELLO_NOAUTH)
        assert c.cmd("HELLO", "3", "AUTH", "default", "wrong") == RespError(WRONGPASS)
        assert c.cmd("ECHO", "x") == RespError(NOAUTH)
        m = c.cmd("HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "authed")
        assert isinstance(m, dict) and m[b"proto"] == 3
        assert c.cmd("CLIENT", "GETNAME") == b"authed"
        c.send_cmd("CLIENT", "SETNAME", "")
        assert c.read_raw() == b"+OK\r\n"
        c.send_cmd("CLIENT", "GETNAME")
        assert c.read_raw() == b"_\r\n"


def test_quit_allowed_without_auth(authsrv):
    with authsrv.raw() as c:
        assert c.cmd("QUIT") == "OK"
        assert c.is_closed()


def test_reset_deauthenticates(authsrv):
    with authsrv.raw() as c:
        assert c.cmd("AUTH", "s3cret") == "OK"
        assert c.cmd("PING") == "PONG"
        assert c.cmd("RESET") == "RESET"
        assert c.cmd("ECHO", "x") == RespError(NOAUTH)


def test_unauthenticated_request_limits(authsrv):
    """Before AUTH a client may announce at most 10 arguments and bulks of at most 16 KiB
    (Redis's limits): past them the server answers the protocol error and closes, instead
    of buffering what an unauthenticated client sends (20 such clients grew RSS by 1 GB)."""
    with authsrv.raw(timeout=5) as c:
        c.send(b"*2\r\n$4\r\nAUTH\r\n$500000000\r\n")
        assert c.read_raw() == b"-ERR Protocol error: unauthenticated bulk length\r\n"
        assert c.is_closed()
    with authsrv.raw(timeout=5) as c:
        c.send(b"*11\r\n")
        assert c.read_raw() == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
        assert c.is_closed()
    with authsrv.raw(timeout=5) as c:
        # At the limits: answered (NOAUTH), connection kept.
        assert c.cmd("ECHO", "x" * 16384) == RespError(NOAUTH)
        assert c.cmd("DEL", *(["k"] * 9)) == RespError(NOAUTH)
        # Authenticated (in the same pipeline), the usual limits apply again.
        c.send_cmd("AUTH", "s3cret")
        c.send_cmd("ECHO", "y" * 100000)
        c.send_cmd(*(["ECHO"] * 11))
        assert c.read_reply() == "OK"
        assert c.read_reply() == b"y" * 100000
        assert isinstance(c.read_reply(), RespError)  # wrong number of arguments, kept open
        assert c.cmd("PING") == "PONG"
        # RESET drops the authentication, and the tighter limits with it.
        assert c.cmd("RESET") == "RESET"
        c.send(b"*2\r\n$4\r\nECHO\r\n$16385\r\n")
        assert c.read_raw() == b"-ERR Protocol error: unauthenticated bulk length\r\n"
        assert c.is_closed()


def test_unauthenticated_clients_cannot_fill_memory(authsrv):
    """The attack of issue 34: many unauthenticated connections each announcing a 500 MB
    AUTH argument and sending data. Each is closed at the header, so the server's memory
    stays where it was."""
    before = authsrv.client().info("memory")["used_memory"]
    conns = []
    try:
        for _ in range(10):
            c = authsrv.raw(timeout=5)
            conns.append(c)
            c.send(b"*2\r\n$4\r\nAUTH\r\n$500000000\r\n")
        chunk = b"x" * (1 << 20)
        for c in conns:
            try:
                for _ in range(8):
                    c.send(chunk)
            except OSError:
                pass  # closed by the server: what the fix does
        for c in conns:
            assert c.is_closed()
        after = authsrv.client().info("memory")["used_memory"]
        assert after < before + 16 * (1 << 20), (before, after)
    finally:
        for c in conns:
            c.close()


# --------------------------------------------------------------------------- SELECT

def test_select_isolates_databases(server, r):
    c = server.client(single_connection_client=True, raw=True)
    try:
        for db in range(16):
            assert c.execute_command("SELECT", db) == b"OK"
            assert c.execute_command("SET", "k", f"v{db}") == b"OK"
        for db in range(16):
            c.execute_command("SELECT", db)
            assert c.execute_command("GET", "k") == f"v{db}".encode()
            assert c.execute_command("DBSIZE") == 1
    finally:
        c.close()


@pytest.mark.parametrize("db", ["16", "-1", "1000000"])
def test_select_out_of_range(raw, db):
    c = raw()
    assert c.cmd("SELECT", db) == RespError("ERR DB index is out of range")


def test_select_not_integer(raw):
    c = raw()
    assert c.cmd("SELECT", "abc") == RespError("ERR value is not an integer or out of range")


# --------------------------------------------------------------------------- QUIT / RESET

def test_quit(raw):
    c = raw()
    c.send_cmd("QUIT")
    assert c.read_raw() == b"+OK\r\n"
    assert c.is_closed()


def test_quit_inline(raw):
    c = raw()
    c.send(b"QUIT\r\n")
    assert c.read_raw() == b"+OK\r\n"
    assert c.is_closed()


def test_reset_restores_connection_state(raw, r):
    c = raw()
    assert c.cmd("SELECT", "3") == "OK"
    assert c.cmd("CLIENT", "SETNAME", "before-reset") == "OK"
    assert isinstance(c.cmd("HELLO", "3"), dict)
    c.send_cmd("RESET")
    assert c.read_raw() == b"+RESET\r\n"
    # back to RESP2 ...
    c.send_cmd("CLIENT", "GETNAME")
    assert c.read_raw() == b"$-1\r\n"
    # ... and to DB 0
    assert c.cmd("SET", "after-reset", "1") == "OK"
    assert r.get("after-reset") == b"1"


def test_reset_turns_client_reply_back_on(raw):
    c = raw()
    c.send_cmd("CLIENT", "REPLY", "OFF")
    c.send_cmd("RESET")
    assert c.read_raw() == b"+RESET\r\n"
    assert c.cmd("PING") == "PONG"


# --------------------------------------------------------------------------- CLIENT

def test_client_id_unique_and_increasing(raw):
    a, b = raw(), raw()
    ida = a.cmd("CLIENT", "ID")
    idb = b.cmd("CLIENT", "ID")
    assert isinstance(ida, int) and isinstance(idb, int)
    assert ida > 0 and idb > ida
    assert a.cmd("CLIENT", "ID") == ida


def test_client_setname_getname(raw):
    c = raw()
    assert c.cmd("CLIENT", "GETNAME") is None
    assert c.cmd("CLIENT", "SETNAME", "conn-1") == "OK"
    assert c.cmd("CLIENT", "GETNAME") == b"conn-1"
    # empty name clears it
    assert c.cmd("CLIENT", "SETNAME", "") == "OK"
    assert c.cmd("CLIENT", "GETNAME") is None


@pytest.mark.parametrize("name", ["a b", "a\nb", "tab\tname"])
def test_client_setname_invalid(raw, name):
    c = raw()
    assert c.cmd("CLIENT", "SETNAME", name) == RespError(
        "ERR Client names cannot contain spaces, newlines or special characters.")


def test_client_unknown_subcommand(raw):
    c = raw()
    assert c.cmd("CLIENT", "FOO") == RespError("ERR unknown subcommand 'FOO'. Try CLIENT HELP.")


def test_client_info(raw):
    c = raw()
    cid = c.cmd("CLIENT", "ID")
    c.cmd("CLIENT", "SETNAME", "info-test")
    c.cmd("SELECT", "2")
    info = c.cmd("CLIENT", "INFO")
    assert isinstance(info, bytes) and info.endswith(b"\n") and info.count(b"\n") == 1
    f = parse_client_line(info)
    assert f["id"] == str(cid)
    assert f["name"] == "info-test"
    assert f["db"] == "2"
    assert f["addr"] == "127.0.0.1:%d" % c.sock.getsockname()[1]
    assert f["cmd"] == "client|info"
    assert f["resp"] == "2"


def test_client_list(raw):
    a, b = raw(), raw()
    ida = a.cmd("CLIENT", "ID")
    idb = b.cmd("CLIENT", "ID")
    a.cmd("CLIENT", "SETNAME", "alpha")
    b.cmd("CLIENT", "SETNAME", "beta")
    text = a.cmd("CLIENT", "LIST")
    assert isinstance(text, bytes) and text.endswith(b"\n")
    entries = {int(e["id"]): e for e in map(parse_client_line, text.decode().splitlines())}
    assert entries[ida]["name"] == "alpha"
    assert entries[idb]["name"] == "beta"
    assert entries[idb]["addr"] == "127.0.0.1:%d" % b.sock.getsockname()[1]
    # filtered by id
    only = a.cmd("CLIENT", "LIST", "ID", idb)
    lines = only.decode().splitlines()
    assert len(lines) == 1 and parse_client_line(lines[0])["name"] == "beta"
    both = a.cmd("CLIENT", "LIST", "ID", ida, idb)
    assert sorted(int(parse_client_line(x)["id"]) for x in both.decode().splitlines()) == [ida, idb]
    normal = a.cmd("CLIENT", "LIST", "TYPE", "normal")
    assert {ida, idb} <= {int(parse_client_line(x)["id"]) for x in normal.decode().splitlines()}


def test_client_list_errors(raw):
    c = raw()
    assert c.cmd("CLIENT", "LIST", "ID", "abc") == RespError("ERR Invalid client ID")
    assert c.cmd("CLIENT", "LIST", "TYPE", "foo") == RespError("ERR Unknown client type 'foo'")


def test_client_kill_by_id(raw):
    killer, victim = raw(), raw()
    vid = victim.cmd("CLIENT", "ID")
    assert killer.cmd("CLIENT", "KILL", "ID", vid) == 1
    assert victim.is_closed(), "killed connection was not closed"
    wait_until(lambda: vid not in [int(parse_client_line(x)["id"])
                                   for x in killer.cmd("CLIENT", "LIST").decode().splitlines()],
               timeout=5, msg="killed client to disappear from CLIENT LIST")
    # killing it again finds nothing
    assert killer.cmd("CLIENT", "KILL", "ID", vid) == 0
    assert killer.cmd("PING") == "PONG"


def test_client_kill_by_addr_new_style(raw):
    killer, victim = raw(), raw()
    victim.cmd("PING")
    addr = "127.0.0.1:%d" % victim.sock.getsockname()[1]
    assert killer.cmd("CLIENT", "KILL", "ADDR", addr) == 1
    assert victim.is_closed()
    assert killer.cmd("CLIENT", "KILL", "ADDR", addr) == 0


def test_client_kill_by_addr_old_style(raw):
    killer, victim = raw(), raw()
    victim.cmd("PING")
    addr = "127.0.0.1:%d" % victim.sock.getsockname()[1]
    assert killer.cmd("CLIENT", "KILL", addr) == "OK"
    assert victim.is_closed()
    assert killer.cmd("CLIENT", "KILL", addr) == RespError("ERR No such client")


def test_client_kill_errors(raw):
    c = raw()
    assert c.cmd("CLIENT", "KILL", "ID", "abc") == RespError("ERR client-id should be greater than 0")
    assert c.cmd("CLIENT", "KILL", "FOO", "bar") == RespError("ERR syntax error")
    assert c.cmd("CLIENT", "KILL") == RespError("ERR wrong number of arguments for 'client|kill' command")


@requires_72
def test_client_setinfo(raw):
    c = raw()
    assert c.cmd("CLIENT", "SETINFO", "LIB-NAME", "ember-tests") == "OK"
    assert c.cmd("CLIENT", "SETINFO", "lib-ver", "1.2.3") == "OK"
    f = parse_client_line(c.cmd("CLIENT", "INFO"))
    assert f["lib-name"] == "ember-tests"
    assert f["lib-ver"] == "1.2.3"
    listed = [parse_client_line(x) for x in c.cmd("CLIENT", "LIST").decode().splitlines()]
    assert any(e.get("lib-name") == "ember-tests" for e in listed)


@requires_72
def test_client_setinfo_errors(raw):
    c = raw()
    err = c.cmd("CLIENT", "SETINFO", "FOO", "bar")
    assert isinstance(err, RespError) and err.message.startswith("ERR ")
    err = c.cmd("CLIENT", "SETINFO", "LIB-NAME", "has space")
    assert isinstance(err, RespError) and err.message.startswith("ERR ")
    err = c.cmd("CLIENT", "SETINFO", "LIB-NAME")
    assert err == RespError("ERR wrong number of arguments for 'client|setinfo' command")


def test_client_reply_off_on(raw):
    c = raw()
    c.send(b"CLIENT REPLY OFF\r\nPING\r\nSET k v\r\nCLIENT REPLY ON\r\nGET k\r\n")
    # OFF itself is silent; ON answers +OK.
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b"$1\r\nv\r\n"
    assert c.read_available(0.2) == b""


def test_client_reply_skip(raw):
    c = raw()
    c.send(b"CLIENT REPLY SKIP\r\nPING first\r\nPING second\r\nPING third\r\n")
    assert c.read_raw() == b"$6\r\nsecond\r\n"
    assert c.read_raw() == b"$5\r\nthird\r\n"
    assert c.read_available(0.2) == b""


def test_client_reply_syntax_error(raw):
    c = raw()
    assert c.cmd("CLIENT", "REPLY", "MAYBE") == RespError("ERR syntax error")


def _timed_in_thread(fn):
    out = {}

    def run():
        t0 = time.monotonic()
        try:
            out["result"] = fn()
        except Exception as e:  # noqa: BLE001
            out["error"] = e
        out["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_client_pause_write_delays_writes_until_unpause(server, rr):
    writer = server.client()
    reader = server.client()
    try:
        assert rr.execute_command("CLIENT", "PAUSE", 20000, "WRITE") == b"OK"
        t, out = _timed_in_thread(lambda: writer.set("paused-key", "v"))
        time.sleep(0.5)
        assert t.is_alive(), "SET completed while clients were paused for writes"
        # reads are not paused in WRITE mode
        t0 = time.monotonic()
        assert reader.get("paused-key") is None
        assert time.monotonic() - t0 < 5
        assert t.is_alive()
        assert rr.execute_command("CLIENT", "UNPAUSE") == b"OK"
        t.join(15)
        assert not t.is_alive(), "SET still blocked after CLIENT UNPAUSE"
        assert "error" not in out, out.get("error")
        assert out["result"] is True
        assert out["elapsed"] >= 0.2   # it was still blocked after 0.5 s (asserted above)
        assert reader.get("paused-key") == b"v"
    finally:
        rr.execute_command("CLIENT", "UNPAUSE")
        writer.close()
        reader.close()


def _blocked_clients(r):
    return int(r.info("clients")["blocked_clients"])


def test_client_pause_write_counts_paused_clients_as_blocked(server, r, rr):
    # Redis counts the clients a pause holds back in INFO blocked_clients (its unit/pause
    # waits on that count): PUBLISH and PFCOUNT (may-replicate) wait under PAUSE WRITE too.
    rr.execute_command("PFADD", "hll", "a")
    conns = [server.client() for _ in range(3)]
    try:
        assert rr.execute_command("CLIENT", "PAUSE", 60000, "WRITE") == b"OK"
        calls = [
            _timed_in_thread(lambda: conns[0].set("k", "v")),
            _timed_in_thread(lambda: conns[1].execute_command("PFCOUNT", "hll")),
            _timed_in_thread(lambda: conns[2].publish("ch", "m")),
        ]
        wait_until(lambda: _blocked_clients(r) == 3, timeout=10, msg="3 paused clients")
        assert rr.execute_command("CLIENT", "UNPAUSE") == b"OK"
        for t, _ in calls:
            t.join(10)
            assert not t.is_alive(), "a paused command did not finish after UNPAUSE"
        assert [out.get("result") for _, out in calls] == [True, 1, 0]
        assert _blocked_clients(r) == 0
    finally:
        rr.execute_command("CLIENT", "UNPAUSE")
        for c in conns:
            c.close()


def test_client_pause_write_holds_write_exec_and_scripts_not_read_only_ones(server, r, rr):
    # As Redis: under PAUSE WRITE a read-only script (no-writes shebang, EVAL_RO, a
    # no-writes function via FCALL) runs at once, and EXEC waits only when it queued a write.
    rr.set("x", "y")
    rr.execute_command("FUNCTION", "LOAD", "REPLACE",
                       "#!lua name=pauselib\n"
                       "redis.register_function{function_name='ro_f', "
                       "callback=function() return 'hello' end, flags={'no-writes'}}\n"
                       "redis.register_function('rw_f', function() return 'rw' end)")
    c = server.client(socket_timeout=5)
    w1, w2, w3 = server.client(), server.client(), server.client()
    try:
        assert rr.execute_command("CLIENT", "PAUSE", 60000, "WRITE") == b"OK"
        assert c.eval("#!lua flags=no-writes\nreturn 'unique'", 0) == b"unique"
        assert c.execute_command("EVAL_RO", "return redis.call('get', KEYS[1])", 1, "x") == b"y"
        assert c.execute_command("FCALL", "ro_f", 0) == b"hello"
        p = c.pipeline(transaction=True)
        p.get("x").ping()
        assert p.execute() == [b"y", True]
        calls = [
            _timed_in_thread(lambda: w1.eval("return 1", 0)),
            _timed_in_thread(lambda: w2.execute_command("FCALL", "rw_f", 0)),
            _timed_in_thread(lambda: w3.pipeline(transaction=True).set("x", "z").execute()),
        ]
        wait_until(lambda: _blocked_clients(r) == 3, timeout=10, msg="3 paused clients")
        assert rr.get("x") == b"y"
        assert rr.execute_command("CLIENT", "UNPAUSE") == b"OK"
        for t, _ in calls:
            t.join(10)
            assert not t.is_alive(), "a paused command did not finish after UNPAUSE"
        assert [out.get("result") for _, out in calls] == [1, b"rw", [True]]
        assert rr.get("x") == b"z"
    finally:
        rr.execute_command("CLIENT", "UNPAUSE")
        rr.execute_command("FUNCTION", "DELETE", "pauselib")
        for conn in (c, w1, w2, w3):
            conn.close()


def test_client_pause_all_expires_by_itself(server, rr):
    other = server.client()
    try:
        other.ping()
        assert rr.execute_command("CLIENT", "PAUSE", 600) == b"OK"
        t0 = time.monotonic()
        assert other.set("k", "v") is True
        elapsed = time.monotonic() - t0
        assert 0.4 <= elapsed < 15, elapsed
    finally:
        other.close()


def test_client_pause_errors(rr):
    with pytest.raises(redis.ResponseError, match=r"^timeout is not an integer or out of range$"):
        rr.execute_command("CLIENT", "PAUSE", "abc")
    with pytest.raises(redis.ResponseError, match=r"^CLIENT PAUSE mode must be WRITE or ALL$"):
        rr.execute_command("CLIENT", "PAUSE", 100, "FOO")
    with pytest.raises(redis.ResponseError, match=r"^timeout is negative$"):
        rr.execute_command("CLIENT", "PAUSE", -1)
    assert rr.execute_command("CLIENT", "UNPAUSE") == b"OK"


def test_idle_timeout_closes_idle_clients_only(server):
    # CONFIG SET timeout: a client idle that long is closed; one that keeps sending stays.
    import socket
    busy = server.client(socket_timeout=10)
    busy.config_set("timeout", 1)
    try:
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        idle.sendall(b"PING\r\n")
        assert idle.recv(64) == b"+PONG\r\n"
        deadline = time.monotonic() + 6
        closed = False
        while time.monotonic() < deadline and not closed:
            assert busy.ping() is True
            idle.settimeout(0.2)
            try:
                closed = idle.recv(64) == b""
            except socket.timeout:
                pass
        assert closed, "the idle client was not closed"
        assert busy.ping() is True
        idle.close()
    finally:
        busy.config_set("timeout", 0)
        busy.close()
