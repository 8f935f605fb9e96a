"""The stock redis-cli against the server under test.

redis-cli prints "raw" output when stdout is not a terminal (as here); --no-raw
forces the human-readable form ("(integer) 1", "(nil)", quoted strings).
"""

import re

import pytest


def test_cli_set_get(cli, r):
    assert cli("set", "k", "v") == "OK\n"
    assert cli("get", "k") == "v\n"
    assert r.get("k") == b"v"


def test_cli_default_output_formats(cli):
    cli("set", "k", "v")
    assert cli("--no-raw", "get", "k") == '"v"\n'
    assert cli("--no-raw", "get", "nokey") == "(nil)\n"
    assert cli("--no-raw", "incr", "n") == "(integer) 1\n"
    assert cli("--no-raw", "mget", "k", "nokey") == '1) "v"\n2) (nil)\n'
    assert cli("--no-raw", "keys", "nomatch*") == "(empty array)\n"
    assert cli("--no-raw", "set", "k", "v") == "OK\n"


def test_cli_raw_mode(cli):
    cli("set", "k", "hello world")
    assert cli("--raw", "get", "k") == "hello world\n"
    assert cli("--raw", "get", "nokey") == "\n"
    assert cli("--raw", "incr", "n") == "1\n"
    assert cli("--raw", "mget", "k", "nokey") == "hello world\n\n"


def test_cli_error_reply(cli):
    assert cli("--no-raw", "foo", "a") == \
        "(error) ERR unknown command 'foo', with args beginning with: 'a' \n"
    out = cli("--raw", "get")
    # redis-cli prints an extra empty line after an error in raw mode
    assert out == "ERR wrong number of arguments for 'get' command\n\n"


def test_cli_binary_value(cli, r):
    r.set("bin", b"a\x00b\n")
    assert cli("--no-raw", "get", "bin") == '"a\\x00b\\n"\n'


def test_cli_ping_and_info(cli):
    assert cli("ping") == "PONG\n"
    out = cli("info", "server")
    assert out.startswith("# Server")
    assert re.search(r"^redis_version:\d+\.\d+\.\d+\r?$", out, re.M)


def test_cli_pipe_mode(cli, r):
    n = 2000
    lines = []
    for i in range(n):
        lines.append(f"SET key:{i} value-{i}\r\n")
    lines.append("INCR counter\r\n" * 500)
    out = cli("--pipe", input="".join(lines), timeout=60)
    assert f"errors: 0, replies: {n + 500}" in out
    assert r.dbsize() == n + 1
    assert r.get("key:1234") == b"value-1234"
    assert r.get("counter") == b"500"


def test_cli_pipe_mode_resp_input(cli, r):
    def resp(*args):
        out = [f"*{len(args)}\r\n"]
        for a in args:
            out.append(f"${len(a.encode())}\r\n{a}\r\n")
        return "".join(out)
    payload = "".join(resp("SET", f"p{i}", f"v {i}") for i in range(1000))
    payload += resp("NOSUCHCOMMAND")
    out = cli("--pipe", input=payload, timeout=60, check=False)   # exits 1 on errors
    assert "errors: 1, replies: 1001" in out
    assert r.get("p999") == b"v 999"


def test_cli_resp3_mode(cli):
    out = cli("-3", "--no-raw", "hello", "3")
    assert re.search(r'^1# "server" => ".+"$', out, re.M)
    assert '"proto" => (integer) 3' in out
    assert '"mode" => "standalone"' in out
    assert '"modules" => (empty array)' in out
    assert cli("-3", "--no-raw", "get", "nokey") == "(nil)\n"
    assert cli("-3", "--no-raw", "config", "get", "maxclients") == '1# "maxclients" => "10000"\n'
    # INCRBYFLOAT is a bulk string, even in RESP3
    assert cli("-3", "--no-raw", "incrbyfloat", "f", "1.5") == '"1.5"\n'


def test_cli_resp2_explicit(cli):
    assert cli("-2", "--no-raw", "config", "get", "maxclients") == '1) "maxclients"\n2) "10000"\n'


def test_cli_select_db(cli, server):
    cli("-n", "3", "set", "k", "in-db-3")
    assert cli("-n", "3", "get", "k") == "in-db-3\n"
    assert cli("get", "k") == "\n"
    c = server.client(db=3)
    try:
        assert c.get("k") == b"in-db-3"
    finally:
        c.close()


def test_cli_with_password(start_server):
    import shutil
    import subprocess
    exe = shutil.which("redis-cli")
    if exe is None:
        pytest.skip("redis-cli not installed")
    srv = start_server("--requirepass", "pw", password="pw")
    base = [exe, "-h", srv.host, "-p", str(srv.port)]
    out = subprocess.run(base + ["get", "k"], capture_output=True, text=True, timeout=30).stdout
    assert out == "NOAUTH Authentication required.\n\n"
    out = subprocess.run(base + ["--no-auth-warning", "-a", "pw", "set", "k", "v"],
                         capture_output=True, text=True, timeout=30).stdout
    assert out == "OK\n"
    out = subprocess.run(base + ["--no-auth-warning", "-a", "wrong", "ping"],
                         capture_output=True, text=True, timeout=30)
    assert "WRONGPASS" in out.stdout + out.stderr


def test_cli_stdin_last_argument(cli, r):
    # -x reads the last argument from stdin
    assert cli("-x", "set", "fromstdin", input="payload\nline2") == "OK\n"
    assert r.get("fromstdin") == b"payload\nline2"
