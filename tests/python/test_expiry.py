"""Key expiry: EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT), TTL PTTL, EXPIRETIME
PEXPIRETIME, PERSIST, passive and active expiry."""

import time

import pytest
import redis

from helpers import wait_until

NOT_INT = r"^value is not an integer or out of range$"
NX_XX_GT_LT = r"^NX and XX, GT or LT options at the same time are not compatible$"
GT_LT = r"^GT and LT options at the same time are not compatible$"

RELATIVE = [("EXPIRE", 1), ("PEXPIRE", 1000)]
ALL_CMDS = ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]


def when(cmd, seconds):
    """The argument for `cmd` meaning `seconds` from now."""
    if cmd == "EXPIRE":
        return seconds
    if cmd == "PEXPIRE":
        return seconds * 1000
    if cmd == "EXPIREAT":
        return int(time.time()) + seconds
    return int(time.time() * 1000) + seconds * 1000


# --------------------------------------------------------------------------- TTL / PTTL

def test_ttl_missing_and_persistent(rr):
    assert rr.execute_command("TTL", "nokey") == -2
    assert rr.execute_command("PTTL", "nokey") == -2
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("TTL", "k") == -1
    assert rr.execute_command("PTTL", "k") == -1


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_variants_set_ttl(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 100)) == 1
    assert 98 <= rr.execute_command("TTL", "k") <= 100
    assert 98000 <= rr.execute_command("PTTL", "k") <= 100000
    assert rr.execute_command("GET", "k") == b"v"


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_missing_key(rr, cmd):
    assert rr.execute_command(cmd, "nokey", when(cmd, 100)) == 0
    assert rr.execute_command("EXISTS", "nokey") == 0


def test_ttl_rounding(rr):
    rr.execute_command("SET", "k", "v")
    rr.execute_command("PEXPIRE", "k", 100500)
    # TTL rounds to the nearest second
    assert rr.execute_command("TTL", "k") in (100, 101)
    rr.execute_command("PEXPIRE", "k", 2000)
    assert rr.execute_command("TTL", "k") in (1, 2)


# --------------------------------------------------------------------------- EXPIRETIME

def test_expiretime(rr):
    assert rr.execute_command("EXPIRETIME", "nokey") == -2
    assert rr.execute_command("PEXPIRETIME", "nokey") == -2
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("EXPIRETIME", "k") == -1
    assert rr.execute_command("PEXPIRETIME", "k") == -1
    at_ms = int(time.time() * 1000) + 100_000
    rr.execute_command("PEXPIREAT", "k", at_ms)
    assert rr.execute_command("PEXPIRETIME", "k") == at_ms
    assert rr.execute_command("EXPIRETIME", "k") in (at_ms // 1000, (at_ms + 999) // 1000)
    rr.execute_command("EXPIREAT", "k", 4000000000)
    assert rr.execute_command("EXPIRETIME", "k") == 4000000000
    assert rr.execute_command("PEXPIRETIME", "k") == 4000000000000


def test_expire_relative_matches_expiretime(rr):
    rr.execute_command("SET", "k", "v")
    before = int(time.time())
    rr.execute_command("EXPIRE", "k", 1000)
    after = int(time.time()) + 1
    assert before + 1000 <= rr.execute_command("EXPIRETIME", "k") <= after + 1000


# --------------------------------------------------------------------------- PERSIST

def test_persist(rr):
    rr.execute_command("SET", "k", "v", "EX", 100)
    assert rr.execute_command("PERSIST", "k") == 1
    assert rr.execute_command("TTL", "k") == -1
    assert rr.execute_command("PERSIST", "k") == 0
    assert rr.execute_command("PERSIST", "nokey") == 0
    assert rr.execute_command("GET", "k") == b"v"


# --------------------------------------------------------------------------- NX XX GT LT

@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_nx(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 100), "NX") == 1
    assert rr.execute_command(cmd, "k", when(cmd, 200), "NX") == 0
    assert rr.execute_command("TTL", "k") <= 100


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_xx(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 100), "XX") == 0
    assert rr.execute_command("TTL", "k") == -1
    rr.execute_command("EXPIRE", "k", 50)
    assert rr.execute_command(cmd, "k", when(cmd, 100), "XX") == 1
    assert rr.execute_command("TTL", "k") > 50


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_gt(rr, cmd):
    rr.execute_command("SET", "k", "v")
    # a key without TTL counts as infinite: GT never applies
    assert rr.execute_command(cmd, "k", when(cmd, 100), "GT") == 0
    assert rr.execute_command("TTL", "k") == -1
    rr.execute_command("EXPIRE", "k", 100)
    assert rr.execute_command(cmd, "k", when(cmd, 50), "GT") == 0
    assert rr.execute_command(cmd, "k", when(cmd, 300), "GT") == 1
    assert rr.execute_command("TTL", "k") > 200


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_lt(rr, cmd):
    rr.execute_command("SET", "k", "v")
    # a key without TTL counts as infinite: LT always applies
    assert rr.execute_command(cmd, "k", when(cmd, 300), "LT") == 1
    assert rr.execute_command(cmd, "k", when(cmd, 400), "LT") == 0
    assert rr.execute_command(cmd, "k", when(cmd, 100), "LT") == 1
    assert rr.execute_command("TTL", "k") <= 100


def test_expire_xx_gt_combined(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("EXPIRE", "k", 100, "XX", "GT") == 0
    rr.execute_command("EXPIRE", "k", 100)
    assert rr.execute_command("EXPIRE", "k", 50, "XX", "GT") == 0
    assert rr.execute_command("EXPIRE", "k", 200, "XX", "GT") == 1
    assert rr.execute_command("EXPIRE", "k", 100, "xx", "lt") == 1
    assert rr.execute_command("TTL", "k") <= 100


def test_expire_options_on_missing_key(rr):
    for opt in ("NX", "XX", "GT", "LT"):
        assert rr.execute_command("EXPIRE", "nokey", 100, opt) == 0


@pytest.mark.parametrize("cmd", ALL_CMDS)
@pytest.mark.parametrize("opts,err", [
    (("NX", "XX"), NX_XX_GT_LT),
    (("NX", "GT"), NX_XX_GT_LT),
    (("LT", "NX"), NX_XX_GT_LT),
    (("GT", "LT"), GT_LT),
])
def test_expire_incompatible_options(rr, cmd, opts, err):
    rr.execute_command("SET", "k", "v")
    with pytest.raises(redis.ResponseError, match=err):
        rr.execute_command(cmd, "k", when(cmd, 100), *opts)
    assert rr.execute_command("TTL", "k") == -1


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_unsupported_option(rr, cmd):
    rr.execute_command("SET", "k", "v")
    with pytest.raises(redis.ResponseError, match=r"^Unsupported option foo$"):
        rr.execute_command(cmd, "k", when(cmd, 100), "foo")


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_not_integer(rr, cmd):
    rr.execute_command("SET", "k", "v")
    for bad in ("abc", "1.5", "", "99999999999999999999"):
        with pytest.raises(redis.ResponseError, match=NOT_INT):
            rr.execute_command(cmd, "k", bad)


@pytest.mark.parametrize("cmd,value", [("EXPIRE", "9223372036854775807"),
                                       ("EXPIRE", "9223372036854775"),
                                       ("EXPIRE", "-9223372036854775808"),
                                       ("PEXPIRE", "9223372036854775807"),
                                       ("EXPIREAT", "9223372036854775807")])
def test_expire_overflow(rr, cmd, value):
    rr.execute_command("SET", "k", "v")
    with pytest.raises(redis.ResponseError, match=rf"^invalid expire time in '{cmd.lower()}' command$"):
        rr.execute_command(cmd, "k", value)
    assert rr.execute_command("TTL", "k") == -1


@pytest.mark.parametrize("cmd", ALL_CMDS)
def test_expire_arity(rr, cmd):
    with pytest.raises(redis.ResponseError, match=rf"^wrong number of arguments for '{cmd.lower()}' command$"):
        rr.execute_command(cmd, "k")


# --------------------------------------------------------------------------- deleting by expiry

@pytest.mark.parametrize("cmd,arg", [("EXPIRE", 0), ("EXPIRE", -1), ("PEXPIRE", 0),
                                     ("PEXPIRE", -100), ("EXPIREAT", 1), ("PEXPIREAT", 1),
                                     ("EXPIREAT", 0)])
def test_non_positive_or_past_expire_deletes(rr, cmd, arg):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", arg) == 1
    assert rr.execute_command("EXISTS", "k") == 0
    assert rr.execute_command("TTL", "k") == -2


def test_negative_expire_with_gt_does_not_delete(rr):
    rr.execute_command("SET", "k", "v", "EX", 100)
    assert rr.execute_command("EXPIRE", "k", -5, "GT") == 0
    assert rr.execute_command("EXISTS", "k") == 1
    assert rr.execute_command("EXPIRE", "k", -5, "LT") == 1
    assert rr.execute_command("EXISTS", "k") == 0


def test_key_expires_after_milliseconds(rr):
    rr.execute_command("SET", "k", "v", "PX", 50)
    rr.execute_command("SET", "keep", "v")
    wait_until(lambda: rr.execute_command("GET", "k") is None, timeout=10,
               msg="key with PX 50 to expire")
    assert rr.execute_command("EXISTS", "k") == 0
    assert rr.execute_command("TTL", "k") == -2
    assert rr.execute_command("GET", "keep") == b"v"


def test_pexpire_then_vanishes(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("PEXPIRE", "k", 30) == 1
    wait_until(lambda: rr.execute_command("EXISTS", "k") == 0, timeout=10,
               msg="key with PEXPIRE 30 to expire")
    assert rr.execute_command("PTTL", "k") == -2


def test_active_expiry_without_access(rr):
    """Keys nobody touches are reclaimed too (DBSIZE drops to 0)."""
    rr.execute_command("MSET", *[x for i in range(50) for x in (f"k{i}", "v")])
    for i in range(50):
        rr.execute_command("PEXPIRE", f"k{i}", 20)
    rr.execute_command("SET", "persistent", "v")
    wait_until(lambda: rr.execute_command("DBSIZE") == 1, timeout=15, interval=0.05,
               msg="expired keys to be reclaimed without being accessed")
    assert rr.execute_command("KEYS", "*") == [b"persistent"]


def test_expired_key_not_visible_to_exists_keys_mget(rr):
    rr.execute_command("SET", "a", "1", "PX", 20)
    rr.execute_command("SET", "b", "2")
    wait_until(lambda: rr.execute_command("EXISTS", "a") == 0, timeout=10, msg="a to expire")
    assert rr.execute_command("MGET", "a", "b") == [None, b"2"]
    assert rr.execute_command("KEYS", "*") == [b"b"]


def test_set_nx_on_expired_key(rr):
    rr.execute_command("SET", "k", "old", "PX", 20)
    wait_until(lambda: rr.execute_command("SET", "k", "new", "NX") == b"OK", timeout=10,
               msg="SET NX to succeed after the key expired")
    assert rr.execute_command("GET", "k") == b"new"
    assert rr.execute_command("TTL", "k") == -1


def test_incr_on_expired_key_starts_from_zero(rr):
    rr.execute_command("SET", "n", "100", "PX", 20)
    wait_until(lambda: rr.execute_command("EXISTS", "n") == 0, timeout=10, msg="n to expire")
    assert rr.execute_command("INCR", "n") == 1
    assert rr.execute_command("TTL", "n") == -1


def test_expire_then_persist_survives(rr):
    rr.execute_command("SET", "k", "v", "PX", 300)
    assert rr.execute_command("PERSIST", "k") == 1
    time.sleep(0.5)
    assert rr.execute_command("GET", "k") == b"v"


def test_info_keyspace_counts_expires(rr):
    rr.execute_command("MSET", "a", "1", "b", "2", "c", "3")
    rr.execute_command("EXPIRE", "a", 100)
    rr.execute_command("EXPIRE", "b", 100)
    line = [ln for ln in rr.execute_command("INFO", "keyspace").decode().split("\r\n")
            if ln.startswith("db0:")]
    assert line and line[0].startswith("db0:keys=3,expires=2,avg_ttl=")
