"""Ember-only nanosecond expiry commands (skipped against redis-server).

    NEXPIRE   key nanoseconds      [NX|XX|GT|LT]  -> 1 if the timeout was set, else 0
    NEXPIREAT key unix-nanoseconds [NX|XX|GT|LT]  -> 1 if the timeout was set, else 0
    NTTL      key                                 -> remaining ns, -1 no TTL, -2 no key

They mirror EXPIRE/PEXPIRE/EXPIREAT/TTL: same option rules and error texts,
a non-positive relative time or a time in the past deletes the key.
"""

import time

import pytest
import redis

from helpers import ember_only, wait_until

pytestmark = ember_only

NOT_INT = r"^value is not an integer or out of range$"
NX_XX_GT_LT = r"^NX and XX, GT or LT options at the same time are not compatible$"
GT_LT = r"^GT and LT options at the same time are not compatible$"
SEC = 1_000_000_000


def when(cmd, seconds):
    if cmd == "NEXPIRE":
        return seconds * SEC
    return time.time_ns() + seconds * SEC


def test_nttl_missing_and_persistent(rr):
    assert rr.execute_command("NTTL", "nokey") == -2
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("NTTL", "k") == -1


def test_nexpire_sets_ttl(rr):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command("NEXPIRE", "k", 100 * SEC) == 1
    ns = rr.execute_command("NTTL", "k")
    assert 98 * SEC < ns <= 100 * SEC
    assert 98_000 <= rr.execute_command("PTTL", "k") <= 100_000
    assert 98 <= rr.execute_command("TTL", "k") <= 100
    assert rr.execute_command("GET", "k") == b"v"


def test_nexpireat_sets_ttl(rr):
    rr.execute_command("SET", "k", "v")
    at = time.time_ns() + 100 * SEC
    assert rr.execute_command("NEXPIREAT", "k", at) == 1
    assert abs(rr.execute_command("PEXPIRETIME", "k") - at // 1_000_000) <= 1
    assert 98 * SEC < rr.execute_command("NTTL", "k") <= 100 * SEC


def test_nttl_after_pexpire(rr):
    rr.execute_command("SET", "k", "v")
    rr.execute_command("PEXPIRE", "k", 5000)
    assert 4 * SEC < rr.execute_command("NTTL", "k") <= 5 * SEC


def test_nttl_decreases(rr):
    rr.execute_command("SET", "k", "v")
    rr.execute_command("NEXPIRE", "k", 100 * SEC)
    a = rr.execute_command("NTTL", "k")
    time.sleep(0.01)
    b = rr.execute_command("NTTL", "k")
    assert b < a


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
def test_missing_key(rr, cmd):
    assert rr.execute_command(cmd, "nokey", when(cmd, 100)) == 0
    assert rr.execute_command("EXISTS", "nokey") == 0


def test_sub_millisecond_expiry(rr):
    rr.execute_command("SET", "k", "v")
    rr.execute_command("SET", "keep", "v")
    assert rr.execute_command("NEXPIRE", "k", 500_000) == 1   # 0.5 ms
    wait_until(lambda: rr.execute_command("GET", "k") is None, timeout=10,
               msg="key with a 0.5 ms NEXPIRE to expire")
    assert rr.execute_command("NTTL", "k") == -2
    assert rr.execute_command("GET", "keep") == b"v"


def test_nexpire_active_expiry(rr):
    for i in range(20):
        rr.execute_command("SET", f"k{i}", "v")
        rr.execute_command("NEXPIRE", f"k{i}", 2_000_000)
    wait_until(lambda: rr.execute_command("DBSIZE") == 0, timeout=15, interval=0.05,
               msg="untouched NEXPIRE'd keys to be reclaimed")


@pytest.mark.parametrize("cmd,arg", [("NEXPIRE", 0), ("NEXPIRE", -1), ("NEXPIREAT", 1),
                                     ("NEXPIREAT", 0)])
def test_non_positive_or_past_deletes(rr, cmd, arg):
    # mirrors EXPIRE k 0 / EXPIREAT k <past>
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", arg) == 1
    assert rr.execute_command("EXISTS", "k") == 0
    assert rr.execute_command("NTTL", "k") == -2


def test_persist_clears_nexpire(rr):
    rr.execute_command("SET", "k", "v")
    rr.execute_command("NEXPIRE", "k", 100 * SEC)
    assert rr.execute_command("PERSIST", "k") == 1
    assert rr.execute_command("NTTL", "k") == -1


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
def test_nx(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 100), "NX") == 1
    assert rr.execute_command(cmd, "k", when(cmd, 200), "NX") == 0
    assert rr.execute_command("NTTL", "k") <= 100 * SEC


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
def test_xx(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 100), "XX") == 0
    assert rr.execute_command("NTTL", "k") == -1
    rr.execute_command("EXPIRE", "k", 50)
    assert rr.execute_command(cmd, "k", when(cmd, 100), "XX") == 1
    assert rr.execute_command("NTTL", "k") > 50 * SEC


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
def test_gt(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 100), "GT") == 0
    assert rr.execute_command("NTTL", "k") == -1
    rr.execute_command("EXPIRE", "k", 100)
    assert rr.execute_command(cmd, "k", when(cmd, 50), "GT") == 0
    assert rr.execute_command(cmd, "k", when(cmd, 300), "GT") == 1
    assert rr.execute_command("NTTL", "k") > 200 * SEC


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
def test_lt(rr, cmd):
    rr.execute_command("SET", "k", "v")
    assert rr.execute_command(cmd, "k", when(cmd, 300), "LT") == 1
    assert rr.execute_command(cmd, "k", when(cmd, 400), "LT") == 0
    assert rr.execute_command(cmd, "k", when(cmd, 100), "LT") == 1
    assert rr.execute_command("NTTL", "k") <= 100 * SEC


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
@pytest.mark.parametrize("opts,err", [(("NX", "XX"), NX_XX_GT_LT), (("NX", "GT"), NX_XX_GT_LT),
                                      (("GT", "LT"), GT_LT)])
def test_incompatible_options(rr, cmd, opts, err):
    rr.execute_command("SET", "k", "v")
    with pytest.raises(redis.ResponseError, match=err):
        rr.execute_command(cmd, "k", when(cmd, 100), *opts)
    assert rr.execute_command("NTTL", "k") == -1


@pytest.mark.parametrize("cmd", ["NEXPIRE", "NEXPIREAT"])
def test_not_integer(rr, cmd):
    rr.execute_command("SET", "k", "v")
    for bad in ("abc", "1.5", "", "99999999999999999999"):
        with pytest.raises(redis.ResponseError, match=NOT_INT):
            rr.execute_command(cmd, "k", bad)
    assert rr.execute_command("NTTL", "k") == -1


@pytest.mark.parametrize("cmd,args", [("NEXPIRE", ("k",)), ("NEXPIREAT", ("k",)), ("NTTL", ()),
                                      ("NTTL", ("a", "b"))])
def test_arity(rr, cmd, args):
    with pytest.raises(redis.ResponseError,
                       match=rf"^wrong number of arguments for '{cmd.lower()}' command$"):
        rr.execute_command(cmd, *args)
