"""String commands.

WRONGTYPE errors need a non-string type; lists are not part of Ember's
foundation scope yet, so those checks live in test_wrongtype_* functions that
skip when the server does not know LPUSH.
"""

import time

import pytest
import redis

SYNTAX = r"^syntax error$"
NOT_INT = r"^value is not an integer or out of range$"
NOT_FLOAT = r"^value is not a valid float$"
OVERFLOW = r"^increment or decrement would overflow$"
WRONGTYPE = r"^WRONGTYPE Operation against a key holding the wrong kind of value$"


def invalid_expire(cmd):
    return rf"^invalid expire time in '{cmd}' command$"


def arity(cmd):
    return rf"^wrong number of arguments for '{cmd}' command$"


# --------------------------------------------------------------------------- GET / SET

def test_get_set_basic(rr):
    assert rr.execute_command("GET", "k") is None
    assert rr.execute_command("SET", "k", "v") == b"OK"
    assert rr.execute_command("GET", "k") == b"v"
    assert rr.execute_command("SET", "k", "v2") == b"OK"
    assert rr.execute_command("GET", "k") == b"v2"


def test_set_binary_and_empty(rr):
    blob = bytes(range(256)) * 4
    assert rr.execute_command("SET", b"\x00key\xff", blob) == b"OK"
    assert rr.execute_command("GET", b"\x00key\xff") == blob
    assert rr.execute_command("SET", "empty", "") == b"OK"
    assert rr.execute_command("GET", "empty") == b""
    assert rr.execute_command("EXISTS", "empty") == 1


def test_set_overwrites_ttl(rr):
    rr.execute_command("SET", "k", "v", "EX", 100)
    assert rr.execute_command("TTL", "k") > 0
    rr.execute_command("SET", "k", "v2")
    assert rr.execute_command("TTL", "k") == -1


def test_set_ex_px(rr):
    assert rr.execute_command("SET", "k", "v", "EX", 100) == b"OK"
    assert 98 <= rr.execute_command("TTL", "k") <= 100
    assert rr.execute_command("SET", "k", "v", "PX", 100000) == b"OK"
    assert 98000 <= rr.execute_command("PTTL", "k") <= 100000


def test_set_exat_pxat(rr):
    now = int(time.time())
    assert rr.execute_command("SET", "k", "v", "EXAT", now + 100) == b"OK"
    assert rr.execute_command("EXPIRETIME", "k") == now + 100
    assert rr.execute_command("SET", "k", "v", "PXAT", (now + 200) * 1000 + 123) == b"OK"
    assert rr.execute_command("PEXPIRETIME", "k") == (now + 200) * 1000 + 123


def test_set_exat_in_the_past_deletes(rr):
    assert rr.execute_command("SET", "k", "v", "EXAT", 1) == b"OK"
    assert rr.execute_command("EXISTS", "k") == 0
    assert rr.execute_command("SET", "k", "v", "PXAT", 1) == b"OK"
    assert rr.execute_command("GET", "k") is None


def test_set_nx_xx(rr):
    assert rr.execute_command("SET", "k", "v1", "XX") is None
    assert rr.execute_command("EXISTS", "k") == 0
    assert rr.execute_command("SET", "k", "v1", "NX") == b"OK"
    assert rr.execute_command("SET", "k", "v2", "NX") is None
    assert rr.execute_command("GET", "k") == b"v1"
    assert rr.execute_command("SET", "k", "v3", "XX") == b"OK"
    assert rr.execute_command("GET", "k") == b"v3"


def test_set_keepttl(rr):
    rr.execute_command("SET", "k", "v", "EX", 100)
    assert rr.execute_command("SET", "k", "v2", "KEEPTTL") == b"OK"
    assert 98 <= rr.execute_command("TTL", "k") <= 100
    assert rr.execute_command("GET", "k") == b"v2"
    rr.execute_command("SET", "nottl", "v")
    rr.execute_command("SET", "nottl", "v2", "KEEPTTL")
    assert rr.execute_command("TTL", "nottl") == -1


def test_set_get_option(rr):
    assert rr.execute_command("SET", "k", "v1", "GET") is None
    assert rr.execute_command("SET", "k", "v2", "GET") == b"v1"
    assert rr.execute_command("GET", "k") == b"v2"
    # GET combined with other options (allowed since 7.0)
    assert rr.execute_command("SET", "k", "v3", "XX", "GET") == b"v2"
    assert rr.execute_command("SET", "k", "v4", "NX", "GET") == b"v3"
    assert rr.execute_command("GET", "k") == b"v3"
    assert rr.execute_command("SET", "new", "x", "NX", "GET") is None
    assert rr.execute_command("GET", "new") == b"x"
    rr.execute_command("EXPIRE", "k", 100)
    assert rr.execute_command("SET", "k", "v5", "KEEPTTL", "GET") == b"v3"
    assert rr.execute_command("TTL", "k") > 0


def test_set_options_case_insensitive(rr):
    assert rr.execute_command("set", "k", "v", "ex", 100, "nx") == b"OK"
    assert rr.execute_command("SeT", "k", "v2", "xX", "Get") == b"v"


@pytest.mark.parametrize("opts", [
    ("NX", "XX"),
    ("XX", "NX"),
    ("EX", "10", "PX", "100"),
    ("EX", "10", "KEEPTTL"),
    ("KEEPTTL", "PX", "100"),
    ("EX", "10", "PXAT", "1"),
    ("EXAT", "10", "PXAT", "1"),
    ("FOO",),
    ("EX",),
    ("PX",),
    ("EX", "10", "PERSIST"),
])
def test_set_syntax_errors(rr, opts):
    rr.execute_command("SET", "k", "orig")
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        rr.execute_command("SET", "k", "v", *opts)
    assert rr.execute_command("GET", "k") == b"orig"


@pytest.mark.parametrize("opts", [("EX", "0"), ("EX", "-1"), ("PX", "0"), ("PX", "-5"),
                                  ("EXAT", "0"), ("PXAT", "0"), ("EXAT", "-1"),
                                  ("EX", "9999999999999999"),
                                  ("PX", "9223372036854775807")])
def test_set_invalid_expire(rr, opts):
    with pytest.raises(redis.ResponseError, match=invalid_expire("set")):
        rr.execute_command("SET", "k", "v", *opts)
    assert rr.execute_command("EXISTS", "k") == 0


@pytest.mark.parametrize("opts", [("EX", "abc"), ("PX", "1.5"), ("EXAT", "x"),
                                  ("EX", "99999999999999999999")])
def test_set_expire_not_integer(rr, opts):
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("SET", "k", "v", *opts)


def test_set_wrong_arity(rr):
    with pytest.raises(redis.ResponseError, match=arity("set")):
        rr.execute_command("SET", "k")
    with pytest.raises(redis.ResponseError, match=arity("get")):
        rr.execute_command("GET")
    with pytest.raises(redis.ResponseError, match=arity("get")):
        rr.execute_command("GET", "a", "b")


# --------------------------------------------------------------------------- SETNX SETEX PSETEX

def test_setnx(rr):
    assert rr.execute_command("SETNX", "k", "1") == 1
    assert rr.execute_command("SETNX", "k", "2") == 0
    assert rr.execute_command("GET", "k") == b"1"


def test_setex_psetex(rr):
    assert rr.execute_command("SETEX", "k", 100, "v") == b"OK"
    assert rr.execute_command("GET", "k") == b"v"
    assert 98 <= rr.execute_command("TTL", "k") <= 100
    assert rr.execute_command("PSETEX", "p", 100000, "v") == b"OK"
    assert 98000 <= rr.execute_command("PTTL", "p") <= 100000


@pytest.mark.parametrize("cmd,ttl", [("SETEX", "0"), ("SETEX", "-1"), ("PSETEX", "0"),
                                     ("PSETEX", "-10"), ("SETEX", "9223372036854775807")])
def test_setex_invalid_expire(rr, cmd, ttl):
    with pytest.raises(redis.ResponseError, match=invalid_expire(cmd.lower())):
        rr.execute_command(cmd, "k", ttl, "v")


def test_setex_errors(rr):
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("SETEX", "k", "abc", "v")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("PSETEX", "k", "abc", "v")
    with pytest.raises(redis.ResponseError, match=arity("setex")):
        rr.execute_command("SETEX", "k", "10")


# --------------------------------------------------------------------------- GETSET GETDEL GETEX

def test_getset(rr):
    assert rr.execute_command("GETSET", "k", "1") is None
    assert rr.execute_command("GETSET", "k", "2") == b"1"
    assert rr.execute_command("GET", "k") == b"2"


def test_getset_clears_ttl(rr):
    rr.execute_command("SET", "k", "v", "EX", 100)
    rr.execute_command("GETSET", "k", "w")
    assert rr.execute_command("TTL", "k") == -1


def test_getdel(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("GETDEL", "k") == b"v"
    assert rr.execute_command("EXISTS", "k") == 0
    assert rr.execute_command("GETDEL", "k") is None


def test_getex_variants(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("GETEX", "k") == b"v"
    assert rr.execute_command("TTL", "k") == -1
    assert rr.execute_command("GETEX", "k", "EX", 100) == b"v"
    assert 98 <= rr.execute_command("TTL", "k") <= 100
    assert rr.execute_command("GETEX", "k", "PX", 50000) == b"v"
    assert 48000 <= rr.execute_command("PTTL", "k") <= 50000
    at = int(time.time()) + 300
    assert rr.execute_command("GETEX", "k", "EXAT", at) == b"v"
    assert rr.execute_command("EXPIRETIME", "k") == at
    assert rr.execute_command("GETEX", "k", "PXAT", at * 1000 + 5) == b"v"
    assert rr.execute_command("PEXPIRETIME", "k") == at * 1000 + 5
    assert rr.execute_command("GETEX", "k", "PERSIST") == b"v"
    assert rr.execute_command("TTL", "k") == -1


def test_getex_missing_key(rr):
    assert rr.execute_command("GETEX", "nokey") is None
    assert rr.execute_command("GETEX", "nokey", "EX", 10) is None
    assert rr.execute_command("EXISTS", "nokey") == 0


def test_getex_past_time_deletes(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("GETEX", "k", "EXAT", 1) == b"v"
    assert rr.execute_command("EXISTS", "k") == 0


def test_getex_errors(rr):
    rr.execute_command("SET", "k", "v")
    for opts in [("EX", "0"), ("PX", "-1"), ("EXAT", "-1"), ("EX", "9223372036854775807")]:
        with pytest.raises(redis.ResponseError, match=invalid_expire("getex")):
            rr.execute_command("GETEX", "k", *opts)
    for opts in [("PERSIST", "EX", "10"), ("EX", "10", "PX", "10"), ("FOO",), ("EX",)]:
        with pytest.raises(redis.ResponseError, match=SYNTAX):
            rr.execute_command("GETEX", "k", *opts)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("GETEX", "k", "EX", "abc")
    assert rr.execute_command("TTL", "k") == -1


# --------------------------------------------------------------------------- MGET MSET MSETNX

def test_mget_mset(rr):
    assert rr.execute_command("MSET", "a", "1", "b", "2", "c", "3") == b"OK"
    assert rr.execute_command("MGET", "a", "nokey", "c", "b", "a") == [b"1", None, b"3", b"2", b"1"]


def test_mset_last_value_wins(rr):
    rr.execute_command("MSET", "a", "1", "a", "2")
    assert rr.execute_command("GET", "a") == b"2"


def test_mset_clears_ttl(rr):
    rr.execute_command("SET", "a", "x", "EX", 100)
    rr.execute_command("MSET", "a", "y")
    assert rr.execute_command("TTL", "a") == -1


def test_msetnx(rr):
    assert rr.execute_command("MSETNX", "a", "1", "b", "2") == 1
    assert rr.execute_command("MSETNX", "b", "x", "c", "3") == 0
    assert rr.execute_command("MGET", "a", "b", "c") == [b"1", b"2", None]


@pytest.mark.parametrize("cmd,args", [("MSET", ("a",)), ("MSET", ("a", "1", "b")),
                                      ("MSETNX", ("a", "1", "b")), ("MGET", ())])
def test_mset_arity(rr, cmd, args):
    with pytest.raises(redis.ResponseError, match=arity(cmd.lower())):
        rr.execute_command(cmd, *args)


# --------------------------------------------------------------------------- APPEND STRLEN

def test_append_strlen(rr):
    assert rr.execute_command("STRLEN", "k") == 0
    assert rr.execute_command("APPEND", "k", "Hello") == 5
    assert rr.execute_command("APPEND", "k", " World") == 11
    assert rr.execute_command("GET", "k") == b"Hello World"
    assert rr.execute_command("STRLEN", "k") == 11
    assert rr.execute_command("APPEND", "k", "") == 11


def test_append_to_integer(rr):
    rr.execute_command("SET", "n", "12")
    assert rr.execute_command("APPEND", "n", "34") == 4
    assert rr.execute_command("INCR", "n") == 1235


def test_append_keeps_ttl(rr):
    rr.execute_command("SET", "k", "v", "EX", 100)
    rr.execute_command("APPEND", "k", "w")
    assert rr.execute_command("TTL", "k") > 0


def test_strlen_binary(rr):
    rr.execute_command("SET", "k", "h\u00e9llo".encode())
    assert rr.execute_command("STRLEN", "k") == 6


# --------------------------------------------------------------------------- INCR family

def test_incr_decr(rr):
    assert rr.execute_command("INCR", "n") == 1
    assert rr.execute_command("INCR", "n") == 2
    assert rr.execute_command("DECR", "n") == 1
    assert rr.execute_command("INCRBY", "n", 10) == 11
    assert rr.execute_command("INCRBY", "n", -3) == 8
    assert rr.execute_command("DECRBY", "n", 10) == -2
    assert rr.execute_command("DECR", "m") == -1
    assert rr.execute_command("GET", "n") == b"-2"


def test_incr_keeps_ttl(rr):
    rr.execute_command("SET", "n", "1", "EX", 100)
    rr.execute_command("INCR", "n")
    assert rr.execute_command("TTL", "n") > 0


@pytest.mark.parametrize("value", ["abc", " 1", "1 ", "+1", "1.5", "", "0x10",
                                   "99999999999999999999", "1e3"])
def test_incr_not_integer(rr, value):
    rr.execute_command("SET", "n", value)
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("INCR", "n")
    assert rr.execute_command("GET", "n") == value.encode()


def test_incrby_argument_not_integer(rr):
    for bad in ["abc", "1.5", "99999999999999999999", ""]:
        with pytest.raises(redis.ResponseError, match=NOT_INT):
            rr.execute_command("INCRBY", "n", bad)
        with pytest.raises(redis.ResponseError, match=NOT_INT):
            rr.execute_command("DECRBY", "n", bad)
    assert rr.execute_command("EXISTS", "n") == 0


def test_incr_overflow(rr):
    rr.execute_command("SET", "n", "9223372036854775807")
    with pytest.raises(redis.ResponseError, match=OVERFLOW):
        rr.execute_command("INCR", "n")
    with pytest.raises(redis.ResponseError, match=OVERFLOW):
        rr.execute_command("INCRBY", "n", 1)
    assert rr.execute_command("GET", "n") == b"9223372036854775807"
    rr.execute_command("SET", "n", "-9223372036854775808")
    with pytest.raises(redis.ResponseError, match=OVERFLOW):
        rr.execute_command("DECR", "n")
    with pytest.raises(redis.ResponseError, match=OVERFLOW):
        rr.execute_command("DECRBY", "n", 1)
    with pytest.raises(redis.ResponseError, match=OVERFLOW):
        rr.execute_command("INCRBY", "n", -1)
    assert rr.execute_command("INCRBY", "n", 9223372036854775807) == -1


def test_decrby_min_int(rr):
    # negating i64::MIN is itself an overflow
    with pytest.raises(redis.ResponseError, match=r"^decrement would overflow$"):
        rr.execute_command("DECRBY", "n", "-9223372036854775808")


def test_incr_extremes(rr):
    rr.execute_command("SET", "n", "9223372036854775806")
    assert rr.execute_command("INCR", "n") == 9223372036854775807
    rr.execute_command("SET", "n", "-9223372036854775807")
    assert rr.execute_command("DECR", "n") == -9223372036854775808


# --------------------------------------------------------------------------- INCRBYFLOAT

def test_incrbyfloat_formatting(rr):
    rr.execute_command("SET", "f", "10.5")
    assert rr.execute_command("INCRBYFLOAT", "f", "0.1") == b"10.6"
    assert rr.execute_command("GET", "f") == b"10.6"
    rr.execute_command("SET", "g", "10.50")
    assert rr.execute_command("INCRBYFLOAT", "g", "0.1") == b"10.6"
    assert rr.execute_command("INCRBYFLOAT", "h", "3.0e3") == b"3000"
    assert rr.execute_command("INCRBYFLOAT", "h", "-3000") == b"0"
    assert rr.execute_command("INCRBYFLOAT", "i", "5") == b"5"
    assert rr.execute_command("INCRBYFLOAT", "i", "0.25") == b"5.25"
    assert rr.execute_command("INCRBYFLOAT", "i", "-10") == b"-4.75"
    assert rr.execute_command("INCRBYFLOAT", "j", "1.5e2") == b"150"
    assert rr.execute_command("INCRBYFLOAT", "k", ".5") == b"0.5"
    assert rr.execute_command("INCRBYFLOAT", "l", "5.") == b"5"
    assert rr.execute_command("INCRBYFLOAT", "m", "1e17") == b"100000000000000000"
    assert rr.execute_command("INCRBYFLOAT", "n", "0.0000001") == b"0.0000001"


def test_incrbyfloat_on_integer_value(rr):
    rr.execute_command("SET", "f", "10")
    assert rr.execute_command("INCRBYFLOAT", "f", "1.5") == b"11.5"
    rr.execute_command("SET", "f", "7")
    assert rr.execute_command("INCRBYFLOAT", "f", "3") == b"10"
    # The stored value is now an integer string again, so INCR works on it.
    assert rr.execute_command("INCR", "f") == 11


def test_incrbyfloat_keeps_ttl(rr):
    rr.execute_command("SET", "f", "1", "EX", 100)
    rr.execute_command("INCRBYFLOAT", "f", "1.5")
    assert rr.execute_command("TTL", "f") > 0


@pytest.mark.parametrize("value", ["abc", " 1", "1 ", "", "1.5.5"])
def test_incrbyfloat_value_not_float(rr, value):
    rr.execute_command("SET", "f", value)
    with pytest.raises(redis.ResponseError, match=NOT_FLOAT):
        rr.execute_command("INCRBYFLOAT", "f", "1")


@pytest.mark.parametrize("incr", ["abc", "", "1.5.5", " 1", "nan"])
def test_incrbyfloat_increment_not_float(rr, incr):
    with pytest.raises(redis.ResponseError, match=NOT_FLOAT):
        rr.execute_command("INCRBYFLOAT", "f", incr)
    assert rr.execute_command("EXISTS", "f") == 0


@pytest.mark.parametrize("incr", ["inf", "-inf", "+inf"])
def test_incrbyfloat_infinity(rr, incr):
    rr.execute_command("SET", "f", "1")
    with pytest.raises(redis.ResponseError, match=r"^increment would produce NaN or Infinity$"):
        rr.execute_command("INCRBYFLOAT", "f", incr)
    assert rr.execute_command("GET", "f") == b"1"


def test_incrbyfloat_redis_py_callback(r):
    # redis-py turns the bulk reply into a float
    r.set("f", "10.5")
    assert r.incrbyfloat("f", 0.1) == pytest.approx(10.6)


# --------------------------------------------------------------------------- GETRANGE SUBSTR SETRANGE

@pytest.mark.parametrize("start,end,expected", [
    (0, 3, b"This"),
    (-3, -1, b"ing"),
    (0, -1, b"This is a string"),
    (10, 100, b"string"),
    (-100, 3, b"This"),
    (5, 3, b""),
    (100, 200, b""),
    (0, -100, b"T"),
    (-1, -1, b"g"),
    (-5, -3, b"tri"),
])
def test_getrange(rr, start, end, expected):
    rr.execute_command("SET", "k", "This is a string")
    assert rr.execute_command("GETRANGE", "k", start, end) == expected
    assert rr.execute_command("SUBSTR", "k", start, end) == expected


def test_getrange_missing_and_errors(rr):
    assert rr.execute_command("GETRANGE", "nokey", 0, -1) == b""
    rr.execute_command("SET", "k", "abc")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("GETRANGE", "k", "x", 1)
    with pytest.raises(redis.ResponseError, match=arity("getrange")):
        rr.execute_command("GETRANGE", "k", 0)


def test_getrange_integer_encoded(rr):
    rr.execute_command("SET", "n", "1234567")
    assert rr.execute_command("GETRANGE", "n", 1, 3) == b"234"
    assert rr.execute_command("GETRANGE", "n", -2, -1) == b"67"


def test_setrange(rr):
    rr.execute_command("SET", "k", "Hello World")
    assert rr.execute_command("SETRANGE", "k", 6, "Redis") == 11
    assert rr.execute_command("GET", "k") == b"Hello Redis"
    assert rr.execute_command("SETRANGE", "k", 11, "!!") == 13
    assert rr.execute_command("GET", "k") == b"Hello Redis!!"


def test_setrange_pads_with_zero_bytes(rr):
    assert rr.execute_command("SETRANGE", "k", 5, "x") == 6
    assert rr.execute_command("GET", "k") == b"\x00\x00\x00\x00\x00x"
    rr.execute_command("SET", "s", "ab")
    assert rr.execute_command("SETRANGE", "s", 4, "cd") == 6
    assert rr.execute_command("GET", "s") == b"ab\x00\x00cd"


def test_setrange_empty_value(rr):
    # empty value on a missing key does not create it
    assert rr.execute_command("SETRANGE", "k", 5, "") == 0
    assert rr.execute_command("EXISTS", "k") == 0
    rr.execute_command("SET", "s", "abc")
    assert rr.execute_command("SETRANGE", "s", 10, "") == 3
    assert rr.execute_command("GET", "s") == b"abc"


def test_setrange_on_integer(rr):
    rr.execute_command("SET", "n", "1234")
    assert rr.execute_command("SETRANGE", "n", 1, "x") == 4
    assert rr.execute_command("GET", "n") == b"1x34"


def test_setrange_errors(rr):
    with pytest.raises(redis.ResponseError,
                       match=r"^string exceeds maximum allowed size \(proto-max-bulk-len\)$"):
        rr.execute_command("SETRANGE", "k", 536870912, "x")
    with pytest.raises(redis.ResponseError, match=r"^offset is out of range$"):
        rr.execute_command("SETRANGE", "k", -1, "x")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        rr.execute_command("SETRANGE", "k", "abc", "x")
    assert rr.execute_command("EXISTS", "k") == 0


# --------------------------------------------------------------------------- LCS

@pytest.fixture
def lcs_keys(rr):
    rr.execute_command("MSET", "key1", "ohmytext", "key2", "mynewtext")
    return rr


def test_lcs_string(lcs_keys):
    assert lcs_keys.execute_command("LCS", "key1", "key2") == b"mytext"


def test_lcs_len(lcs_keys):
    assert lcs_keys.execute_command("LCS", "key1", "key2", "LEN") == 6


def test_lcs_missing_keys_are_empty(lcs_keys):
    assert lcs_keys.execute_command("LCS", "key1", "nokey") == b""
    assert lcs_keys.execute_command("LCS", "nokey", "nokey2", "LEN") == 0


def _idx(reply):
    # RESP2: flat [b'matches', [...], b'len', n]; RESP3: map
    if isinstance(reply, list):
        reply = dict(zip(reply[::2], reply[1::2]))
    return reply


def test_lcs_idx(lcs_keys):
    reply = _idx(lcs_keys.execute_command("LCS", "key1", "key2", "IDX"))
    assert reply == {b"matches": [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len": 6}


def test_lcs_idx_minmatchlen(lcs_keys):
    reply = _idx(lcs_keys.execute_command("LCS", "key1", "key2", "IDX", "MINMATCHLEN", 4))
    assert reply == {b"matches": [[[4, 7], [5, 8]]], b"len": 6}


def test_lcs_idx_withmatchlen(lcs_keys):
    reply = _idx(lcs_keys.execute_command("LCS", "key1", "key2", "IDX", "WITHMATCHLEN"))
    assert reply == {b"matches": [[[4, 7], [5, 8], 4], [[2, 3], [0, 1], 2]], b"len": 6}
    reply = _idx(lcs_keys.execute_command("LCS", "key1", "key2", "IDX", "MINMATCHLEN", 4,
                                          "WITHMATCHLEN"))
    assert reply == {b"matches": [[[4, 7], [5, 8], 4]], b"len": 6}


def test_lcs_idx_resp3_is_map(rr3):
    rr3.execute_command("MSET", "key1", "ohmytext", "key2", "mynewtext")
    reply = rr3.execute_command("LCS", "key1", "key2", "IDX")
    assert reply == {b"matches": [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len": 6}


def test_lcs_errors(lcs_keys):
    with pytest.raises(redis.ResponseError,
                       match=r"^If you want both the length and indexes, please just use IDX\.$"):
        lcs_keys.execute_command("LCS", "key1", "key2", "LEN", "IDX")
    with pytest.raises(redis.ResponseError, match=SYNTAX):
        lcs_keys.execute_command("LCS", "key1", "key2", "FOO")
    with pytest.raises(redis.ResponseError, match=NOT_INT):
        lcs_keys.execute_command("LCS", "key1", "key2", "MINMATCHLEN", "abc")
    with pytest.raises(redis.ResponseError, match=arity("lcs")):
        lcs_keys.execute_command("LCS", "key1")


# --------------------------------------------------------------------------- WRONGTYPE

def _make_list(rr):
    try:
        rr.execute_command("RPUSH", "list", "a")
    except redis.ResponseError as e:
        if "unknown command" in str(e):
            pytest.skip("server has no list type yet (WRONGTYPE needs a non-string key)")
        raise


@pytest.mark.parametrize("cmd", [("GET", "list"), ("APPEND", "list", "x"), ("INCR", "list"),
                                 ("INCRBYFLOAT", "list", "1"), ("STRLEN", "list"),
                                 ("GETRANGE", "list", 0, 1), ("SETRANGE", "list", 0, "x"),
                                 ("GETDEL", "list"), ("GETEX", "list"), ("GETSET", "list", "x"),
                                 ("SET", "list", "x", "GET")])
def test_wrongtype(rr, cmd):
    _make_list(rr)
    with pytest.raises(redis.ResponseError, match=WRONGTYPE):
        rr.execute_command(*cmd)


def test_lcs_wrongtype(rr):
    _make_list(rr)
    rr.execute_command("SET", "s", "abc")
    with pytest.raises(redis.ResponseError, match=r"^The specified keys must contain string values$"):
        rr.execute_command("LCS", "list", "s")


def test_set_overwrites_other_types_and_mget_returns_nil(rr):
    _make_list(rr)
    assert rr.execute_command("MGET", "list") == [None]
    assert rr.execute_command("SET", "list", "x") == b"OK"
    assert rr.execute_command("GET", "list") == b"x"
