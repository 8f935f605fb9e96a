"""RESP2/RESP3 wire protocol, inline commands, pipelining, big values, malformed input,
generic error texts."""

import os
import time

import pytest
import redis

from helpers import RespError, encode


def hello3(c):
    c.send_cmd("HELLO", "3")
    assert isinstance(c.read_reply(), dict)


# --------------------------------------------------------------------------- RESP2 wire format

def test_resp2_reply_types(raw):
    c = raw()
    cases = [
        (("SET", "k", "v"), b"+OK\r\n"),
        (("GET", "k"), b"$1\r\nv\r\n"),
        (("GET", "nokey"), b"$-1\r\n"),
        (("EXISTS", "k"), b":1\r\n"),
        (("MGET", "k", "nokey"), b"*2\r\n$1\r\nv\r\n$-1\r\n"),
        (("KEYS", "nomatch*"), b"*0\r\n"),
        (("SET", "k", "v", "NX"), b"$-1\r\n"),
        (("INCRBYFLOAT", "f", "1.5"), b"$3\r\n1.5\r\n"),
        (("CONFIG", "GET", "maxclients"), b"*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"),
        (("SET", "e", ""), b"+OK\r\n"),
        (("GET", "e"), b"$0\r\n\r\n"),
        (("TTL", "nokey"), b":-2\r\n"),
        (("GET",), b"-ERR wrong number of arguments for 'get' command\r\n"),
    ]
    for args, wire in cases:
        c.send_cmd(*args)
        assert c.read_raw() == wire, args


# --------------------------------------------------------------------------- RESP3

def test_resp3_reply_types(raw):
    c = raw()
    hello3(c)
    cases = [
        (("SET", "k", "v"), b"+OK\r\n"),
        (("GET", "k"), b"$1\r\nv\r\n"),
        (("GET", "nokey"), b"_\r\n"),
        (("MGET", "k", "nokey"), b"*2\r\n$1\r\nv\r\n_\r\n"),
        (("SET", "k", "v", "NX"), b"_\r\n"),
        (("CLIENT", "GETNAME"), b"_\r\n"),
        (("OBJECT", "ENCODING", "nokey"), b"_\r\n"),
        (("EXISTS", "k"), b":1\r\n"),
        (("KEYS", "nomatch*"), b"*0\r\n"),
        # INCRBYFLOAT stays a bulk string in RESP3 (it is not a double reply)
        (("INCRBYFLOAT", "f", "1.5"), b"$3\r\n1.5\r\n"),
        (("INCRBYFLOAT", "f", "0.1"), b"$3\r\n1.6\r\n"),
        (("CONFIG", "GET", "maxclients"), b"%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"),
        (("GET",), b"-ERR wrong number of arguments for 'get' command\r\n"),
    ]
    for args, wire in cases:
        c.send_cmd(*args)
        assert c.read_raw() == wire, args


def test_resp3_hello_is_map(raw):
    c = raw()
    c.send_cmd("HELLO", "3")
    value, wire = c.read_frame()
    assert wire.startswith(b"%7\r\n$6\r\nserver\r\n")
    assert value[b"proto"] == 3


def test_resp3_config_get_map_several(raw):
    c = raw()
    hello3(c)
    c.send_cmd("CONFIG", "GET", "maxclients", "timeout")
    value, wire = c.read_frame()
    assert wire.startswith(b"%2\r\n")
    assert value == {b"maxclients": b"10000", b"timeout": b"0"}


def test_resp3_lcs_idx_map(raw):
    c = raw()
    hello3(c)
    c.cmd("MSET", "a", "ohmytext", "b", "mynewtext")
    c.send_cmd("LCS", "a", "b", "IDX")
    value, wire = c.read_frame()
    assert wire.startswith(b"%2\r\n")
    assert value == {b"matches": [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len": 6}


def test_redis_py_resp3_types(rr3, rr):
    assert rr3.execute_command("HELLO", "3")[b"proto"] == 3
    assert rr3.execute_command("GET", "nokey") is None
    rr3.execute_command("SET", "f", "10.5")
    # bulk string in both protocols
    assert rr3.execute_command("INCRBYFLOAT", "f", "0.1") == b"10.6"
    assert rr.execute_command("INCRBYFLOAT", "f", "0.1") == b"10.7"
    assert rr3.execute_command("CONFIG", "GET", "timeout") == {b"timeout": b"0"}
    assert rr.execute_command("CONFIG", "GET", "timeout") == [b"timeout", b"0"]


def test_redis_py_resp3_high_level(r3):
    assert r3.set("k", "v") is True
    assert r3.get("k") == b"v"
    assert r3.get("nokey") is None
    assert r3.config_get("maxclients") == {"maxclients": "10000"}  # redis-py decodes it
    assert r3.incrbyfloat("f", 1.5) == 1.5
    assert r3.ttl("k") == -1


# --------------------------------------------------------------------------- inline commands

def test_inline_ping(raw):
    c = raw()
    c.send(b"PING\r\n")
    assert c.read_raw() == b"+PONG\r\n"
    c.send(b"ping\n")            # bare LF is accepted too
    assert c.read_raw() == b"+PONG\r\n"


def test_inline_quoted_arguments(raw):
    c = raw()
    c.send(b'SET k "a b"\r\nGET k\r\n')
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b"$3\r\na b\r\n"
    c.send(b"SET k 'single quoted'\r\nGET k\r\n")
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b"$13\r\nsingle quoted\r\n"
    c.send(b'SET k "esc\\x41\\n\\"q\\""\r\nGET k\r\n')
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b'$8\r\nescA\n"q"\r\n'
    c.send(b"ECHO ''\r\n")
    assert c.read_raw() == b"$0\r\n\r\n"


def test_inline_extra_spaces_and_empty_lines(raw):
    c = raw()
    c.send(b"\r\n\r\n   SET   k    v  \r\n\r\nGET k\r\n")
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b"$1\r\nv\r\n"
    assert c.read_available(0.2) == b""


def test_inline_unknown_command(raw):
    c = raw()
    c.send(b"foo a b c\r\n")
    assert c.read_raw() == b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' 'c' \r\n"
    assert c.cmd("PING") == "PONG"


def test_inline_unbalanced_quotes_closes(raw, r):
    c = raw()
    c.send(b'SET k "abc\r\n')
    assert c.read_reply() == RespError("ERR Protocol error: unbalanced quotes in request")
    assert c.is_closed()
    assert r.ping() is True


def test_inline_and_multibulk_mixed(raw):
    c = raw()
    c.send(b"SET a 1\r\n" + encode("INCR", "a") + b"GET a\r\n" + encode("GET", "a"))
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b":2\r\n"
    assert c.read_raw() == b"$1\r\n2\r\n"
    assert c.read_raw() == b"$1\r\n2\r\n"


# --------------------------------------------------------------------------- multibulk edge cases

def test_empty_and_null_multibulk_are_ignored(raw):
    c = raw()
    c.send(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n")
    assert c.read_raw() == b"+PONG\r\n"
    assert c.read_available(0.2) == b""


def test_binary_safe_bulk_arguments(raw):
    c = raw()
    key = b"k\r\n\x00"
    val = b"\r\n*1\r\n$4\r\nPING\r\n\x00\xff"
    c.send_cmd("SET", key, val)
    assert c.read_raw() == b"+OK\r\n"
    c.send_cmd("GET", key)
    assert c.read_reply() == val


def test_empty_bulk_argument(raw):
    c = raw()
    c.send(b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$0\r\n\r\n")
    assert c.read_raw() == b"+OK\r\n"
    c.send(b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n")
    assert c.read_raw() == b"$0\r\n\r\n"


def test_command_split_across_many_writes(raw):
    c = raw()
    data = encode("SET", "split", "value") + encode("GET", "split")
    for i in range(len(data)):
        c.send(data[i:i + 1])
        if i % 8 == 0:
            time.sleep(0.002)
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b"$5\r\nvalue\r\n"


def test_case_insensitive_command_names(raw):
    c = raw()
    for name in ("ping", "PING", "PiNg"):
        c.send_cmd(name)
        assert c.read_raw() == b"+PONG\r\n"


# --------------------------------------------------------------------------- pipelining

def test_pipeline_10000_commands_in_one_write(raw):
    c = raw(timeout=60)
    n = 10_000
    c.send(encode("INCR", "counter") * n)
    for i in range(1, n + 1):
        assert c.read_raw() == b":%d\r\n" % i
    assert c.cmd("GET", "counter") == str(n).encode()


def test_pipeline_mixed_commands_in_order(raw):
    c = raw(timeout=60)
    parts = []
    expected = []
    for i in range(3000):
        parts.append(encode("SET", f"k{i}", f"v{i}"))
        expected.append(b"+OK\r\n")
        parts.append(encode("GET", f"k{i}"))
        v = f"v{i}".encode()
        expected.append(b"$%d\r\n%s\r\n" % (len(v), v))
        parts.append(encode("GET", f"missing{i}"))
        expected.append(b"$-1\r\n")
    c.send(b"".join(parts))
    for i, want in enumerate(expected):
        assert c.read_raw() == want, i


def test_redis_py_pipeline(r):
    with r.pipeline(transaction=False) as p:
        for i in range(1000):
            p.set(f"k{i}", i)
            p.get(f"k{i}")
        out = p.execute()
    assert out[0::2] == [True] * 1000
    assert out[1::2] == [str(i).encode() for i in range(1000)]


# --------------------------------------------------------------------------- big values

@pytest.mark.parametrize("size", [1 << 20, 5 * (1 << 20) + 7])
def test_big_value_round_trip_raw(raw, size):
    c = raw(timeout=60)
    blob = os.urandom(size)
    c.send_cmd("SET", "big", blob)
    assert c.read_raw() == b"+OK\r\n"
    c.send_cmd("GET", "big")
    header = b"$%d\r\n" % size
    assert c.read_exactly(len(header)) == header
    assert c.read_exactly(size) == blob
    assert c.read_exactly(2) == b"\r\n"
    assert c.cmd("STRLEN", "big") == size


def test_big_value_round_trip_redis_py(r):
    blob = os.urandom(1 << 20)
    assert r.set("big", blob) is True
    assert r.get("big") == blob
    assert r.append("big", b"x") == (1 << 20) + 1


def test_many_big_values_pipelined(raw):
    c = raw(timeout=60)
    blobs = [os.urandom(100_000) for _ in range(20)]
    c.send(b"".join(encode("SET", f"b{i}", b) for i, b in enumerate(blobs)))
    for _ in blobs:
        assert c.read_raw() == b"+OK\r\n"
    c.send(encode("MGET", *[f"b{i}" for i in range(20)]))
    assert c.read_reply() == blobs


# --------------------------------------------------------------------------- malformed input

@pytest.mark.parametrize("payload,error", [
    (b"*abc\r\n", "ERR Protocol error: invalid multibulk length"),
    (b"*1\r\n$-5\r\n", "ERR Protocol error: invalid bulk length"),
    (b"*1\r\n$abc\r\n", "ERR Protocol error: invalid bulk length"),
    (b"*1\r\nfoo\r\n", "ERR Protocol error: expected '$', got 'f'"),
    (b"*2\r\n$4\r\nECHO\r\n:12\r\n", "ERR Protocol error: expected '$', got ':'"),
    (b"*1\r\n$536870913\r\n", "ERR Protocol error: invalid bulk length"),
])
def test_malformed_input_closes_connection(server, raw, payload, error):
    other = raw()
    assert other.cmd("PING") == "PONG"
    bad = raw()
    bad.send(payload)
    assert bad.read_reply() == RespError(error)
    assert bad.is_closed(), "connection must be closed after a protocol error"
    # other clients are unaffected
    assert other.cmd("ECHO", "still here") == b"still here"
    with server.raw() as fresh:
        assert fresh.cmd("PING") == "PONG"


def test_protocol_error_keeps_data(r, raw):
    r.set("survivor", "ok")
    bad = raw()
    bad.send(b"*1\r\n$-5\r\n")
    assert isinstance(bad.read_reply(), RespError)
    assert bad.is_closed()
    assert r.get("survivor") == b"ok"


def test_commands_before_protocol_error_are_answered(raw):
    c = raw()
    c.send(encode("SET", "k", "v") + encode("GET", "k") + b"*x\r\n")
    assert c.read_raw() == b"+OK\r\n"
    assert c.read_raw() == b"$1\r\nv\r\n"
    assert c.read_reply() == RespError("ERR Protocol error: invalid multibulk length")
    assert c.is_closed()


# --------------------------------------------------------------------------- generic errors

def test_unknown_command_error_text(rr):
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("foo", "a", "b")
    assert str(e.value) == "unknown command 'foo', with args beginning with: 'a' 'b' "
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command("NOSUCHCMD")
    assert str(e.value) == "unknown command 'NOSUCHCMD', with args beginning with: "


def test_unknown_command_raw(raw):
    c = raw()
    c.send_cmd("foo", "a", "b")
    assert c.read_raw() == b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
    # connection stays usable
    assert c.cmd("PING") == "PONG"


def test_wrong_arity_error_text(raw):
    c = raw()
    c.send_cmd("GET")
    assert c.read_raw() == b"-ERR wrong number of arguments for 'get' command\r\n"
    c.send_cmd("set", "only-key")
    assert c.read_raw() == b"-ERR wrong number of arguments for 'set' command\r\n"
    c.send_cmd("GET", "a", "b")
    assert c.read_raw() == b"-ERR wrong number of arguments for 'get' command\r\n"


def test_not_an_integer_error_text(raw):
    c = raw()
    c.send_cmd("INCRBY", "k", "abc")
    assert c.read_raw() == b"-ERR value is not an integer or out of range\r\n"
    c.send_cmd("SET", "k", "abc")
    c.read_reply()
    c.send_cmd("INCR", "k")
    assert c.read_raw() == b"-ERR value is not an integer or out of range\r\n"


def test_errors_do_not_break_pipeline(raw):
    c = raw()
    c.send(encode("SET", "k", "1") + encode("NOSUCH") + encode("GET") + encode("INCR", "k")
           + encode("GET", "k"))
    assert c.read_raw() == b"+OK\r\n"
    assert isinstance(c.read_reply(), RespError)
    assert isinstance(c.read_reply(), RespError)
    assert c.read_raw() == b":2\r\n"
    assert c.read_raw() == b"$1\r\n2\r\n"
