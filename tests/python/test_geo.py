"""Geospatial commands: GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH(STORE), GEORADIUS*.

Validated against redis-server (EMBER_SERVER=redis); the differential test at the end
loads seeded random points into a private redis-server and into the server under test,
then compares the raw bytes of every GEOSEARCH / GEORADIUS reply (random centres,
radii, boxes, units and options, RESP2 and RESP3).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time

import pytest
import redis

from helpers import HOST, IS_REDIS, RawConn, _redis_server_bin, free_port

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def err(fn, *args):
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


def sicily(rr):
    assert rr.execute_command("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo",
                              "15.087269", "37.502669", "Catania") == 2


# ---------------------------------------------------------------------------
# GEOADD
# ---------------------------------------------------------------------------

def test_geoadd_scores_and_options(rr):
    sicily(rr)
    assert rr.execute_command("ZRANGE", "Sicily", 0, -1, "WITHSCORES") == [
        b"Palermo", b"3479099956230698", b"Catania", b"3479447370796909"]
    assert rr.execute_command("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo") == 0
    assert rr.execute_command("GEOADD", "Sicily", "CH", "13.5", "38.1", "Palermo") == 1
    assert rr.execute_command("GEOADD", "Sicily", "NX", "1", "1", "Palermo", "2", "2", "x") == 1
    assert rr.execute_command("GEOADD", "Sicily", "XX", "CH", "1", "1", "Palermo", "3", "3",
                              "y") == 1
    assert rr.execute_command("ZCARD", "Sicily") == 3
    assert rr.execute_command("GEOADD", "nokey", "XX", "1", "1", "a") == 0
    assert rr.exists("nokey") == 0
    assert rr.execute_command("GEOADD", "k", "ch", "nx", "0", "0", "a", "0", "0", "a") == 1


def test_geoadd_errors(rr):
    assert err(rr.execute_command, "GEOADD", "k", "1", "2") .startswith("wrong number")
    assert err(rr.execute_command, "GEOADD", "k", "1", "2", "a", "3") == "syntax error"
    assert err(rr.execute_command, "GEOADD", "k", "NX", "XX", "1", "2", "a") == "syntax error"
    assert err(rr.execute_command, "GEOADD", "k", "NX", "XX", "CH") == "syntax error"
    assert err(rr.execute_command, "GEOADD", "k", "200", "100", "a") == \
        "invalid longitude,latitude pair 200.000000,100.000000"
    assert err(rr.execute_command, "GEOADD", "k", "0", "85.06", "a") == \
        "invalid longitude,latitude pair 0.000000,85.060000"
    assert err(rr.execute_command, "GEOADD", "k", "x", "1", "a") == "value is not a valid float"
    assert err(rr.execute_command, "GEOADD", "k", "1", "1", "a", "1", "nan", "b") == \
        "value is not a valid float"
    assert rr.exists("k") == 0
    rr.set("s", "v")
    assert err(rr.execute_command, "GEOADD", "s", "1", "1", "a") == WRONGTYPE
    # Bounds are inclusive.
    assert rr.execute_command("GEOADD", "k", "180", "85.05112878", "a", "-180",
                              "-85.05112878", "b") == 2


# ---------------------------------------------------------------------------
# GEOPOS / GEODIST / GEOHASH
# ---------------------------------------------------------------------------

def test_geopos(rr, rr3):
    sicily(rr)
    assert rr.execute_command("GEOPOS", "Sicily", "Palermo", "Catania", "NonExisting") == [
        [b"13.36138933897018433", b"38.11555639549629859"],
        [b"15.08726745843887329", b"37.50266842333162032"],
        None]
    assert rr.execute_command("GEOPOS", "nokey", "a", "b") == [None, None]
    assert rr3.execute_command("GEOPOS", "Sicily", "Palermo", "zz") == [
        [13.36138933897018433, 38.11555639549629859], None]
    rr.set("s", "v")
    assert err(rr.execute_command, "GEOPOS", "s", "a") == WRONGTYPE


def test_geopos_resp3_raw(server, r):
    r.execute_command("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo", "0", "0", "o")
    with RawConn(server.port) as c:
        c.cmd("HELLO", "3")
        c.send_cmd("GEOPOS", "Sicily", "Palermo", "o", "missing")
        assert c.read_raw() == (b"*3\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"
                                b"*2\r\n,0.00000268220901489\r\n,0.00000126736058093\r\n_\r\n")
        c.send_cmd("GEODIST", "Sicily", "Palermo", "o")
        assert c.read_raw().startswith(b"$")
        c.cmd("HELLO", "2")
        c.send_cmd("GEOPOS", "Sicily", "missing")
        assert c.read_raw() == b"*1\r\n*-1\r\n"


def test_geodist(rr):
    sicily(rr)
    assert rr.execute_command("GEODIST", "Sicily", "Palermo", "Catania") == b"166274.1516"
    assert rr.execute_command("GEODIST", "Sicily", "Palermo", "Catania", "km") == b"166.2742"
    assert rr.execute_command("GEODIST", "Sicily", "Palermo", "Catania", "MI") == b"103.3182"
    assert rr.execute_command("GEODIST", "Sicily", "Palermo", "Catania", "ft") == \
        b"545518.8700"
    assert rr.execute_command("GEODIST", "Sicily", "Palermo", "Palermo") == b"0.0000"
    assert rr.execute_command("GEODIST", "Sicily", "Foo", "Bar") is None
    assert rr.execute_command("GEODIST", "nokey", "Foo", "Bar") is None
    assert err(rr.execute_command, "GEODIST", "Sicily", "Palermo", "Catania", "yd") == \
        "unsupported unit provided. please use M, KM, FT, MI"
    assert err(rr.execute_command, "GEODIST", "Sicily", "Palermo", "Catania", "km", "x") == \
        "syntax error"
    # The unit is checked before the key.
    assert err(rr.execute_command, "GEODIST", "nokey", "a", "b", "yd") == \
        "unsupported unit provided. please use M, KM, FT, MI"
    rr.set("s", "v")
    assert err(rr.execute_command, "GEODIST", "s", "a", "b") == WRONGTYPE


def test_geohash(rr):
    sicily(rr)
    assert rr.execute_command("GEOHASH", "Sicily", "Palermo", "Catania", "x") == [
        b"sqc8b49rny0", b"sqdtr74hyu0", None]
    assert rr.execute_command("GEOHASH", "nokey", "a") == [None]
    assert rr.execute_command("GEOHASH", "Sicily") == []
    rr.execute_command("GEOADD", "k", "-180", "-85.05112878", "a", "180", "85.05112878", "b",
                       "0", "0", "c")
    assert rr.execute_command("GEOHASH", "k", "a", "b", "c") == [
        b"00bh0hbj200", b"bp05b5048p0", b"s0000000000"]
    rr.set("s", "v")
    assert err(rr.execute_command, "GEOHASH", "s", "a") == WRONGTYPE


def test_positions_of_plain_zset_scores(rr):
    rr.execute_command("ZADD", "z", "0", "zero", "4503599627370495", "max", "123.75", "frac")
    res = rr.execute_command("GEOPOS", "z", "zero", "max", "frac")
    assert res == [[b"-179.99999731779098511", b"-85.05112751263942528"],
                   [b"179.99999731779098511", b"85.05112751263942528"],
                   [b"-179.99995976686477661", b"-85.05109456126433543"]]
    assert rr.execute_command("GEOHASH", "z", "zero", "max") == [b"00bh0hbj200",
                                                                 b"zzpgzgpfxz0"]


def test_positions_of_out_of_range_scores(rr):
    # Scores no GEOADD would write decode as C's (uint64_t) cast makes them.
    rr.execute_command("ZADD", "zz", "-1", "neg", "1e300", "big", "-inf", "ninf", "inf",
                       "pinf", "1.8e19", "over", "-1e19", "nbig")
    hi, lo = b"85.0511287799999991", b"-85.05112751263942528"
    west = b"-179.99999731779098511"
    assert rr.execute_command("GEOPOS", "zz", "neg", "big", "ninf", "pinf", "over",
                              "nbig") == [[b"180", hi], [west, lo], [b"180", lo], [west, lo],
                                          [b"180", hi], [b"180", lo]]
    assert rr.execute_command("GEOHASH", "zz", "neg", "big", "ninf", "pinf", "over",
                              "nbig") == [b"bp05b5048p0", b"00bh0hbj200", b"00bh0hbj200",
                                          b"00bh0hbj200", b"bp05b5048p0", b"00bh0hbj200"]
    assert rr.execute_command("GEOSEARCH", "zz", "FROMMEMBER", "neg", "BYRADIUS", "1", "km",
                              "WITHDIST") == []


# ---------------------------------------------------------------------------
# GEOSEARCH / GEORADIUS
# ---------------------------------------------------------------------------

def test_georadius_examples(rr):
    sicily(rr)
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST") == [
        [b"Palermo", b"190.4424"], [b"Catania", b"56.4413"]]
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHCOORD") == [
        [b"Palermo", [b"13.36138933897018433", b"38.11555639549629859"]],
        [b"Catania", [b"15.08726745843887329", b"37.50266842333162032"]]]
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST",
                              "WITHCOORD", "WITHHASH", "ASC") == [
        [b"Catania", b"56.4413", 3479447370796909,
         [b"15.08726745843887329", b"37.50266842333162032"]],
        [b"Palermo", b"190.4424", 3479099956230698,
         [b"13.36138933897018433", b"38.11555639549629859"]]]
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1") == [
        b"Catania"]
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "DESC") == [
        b"Palermo", b"Catania"]
    assert rr.execute_command("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km",
                              "WITHDIST", "ASC") == [[b"Palermo", b"0.0000"],
                                                     [b"Catania", b"166.2742"]]
    assert rr.execute_command("GEORADIUS_RO", "Sicily", "15", "37", "100", "km") == [b"Catania"]
    assert rr.execute_command("GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "1", "m") == [
        b"Catania"]
    assert rr.execute_command("GEORADIUS", "nokey", "15", "37", "200", "km") == []


def test_geosearch_examples(rr):
    sicily(rr)
    rr.execute_command("GEOADD", "Sicily", "12.758489", "38.788135", "edge1", "17.241510",
                       "38.788135", "edge2")
    assert rr.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS",
                              "200", "km", "ASC") == [b"Catania", b"Palermo"]
    assert rr.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400",
                              "400", "km", "ASC", "WITHCOORD", "WITHDIST") == [
        [b"Catania", b"56.4413", [b"15.08726745843887329", b"37.50266842333162032"]],
        [b"Palermo", b"190.4424", [b"13.36138933897018433", b"38.11555639549629859"]],
        [b"edge2", b"279.7403", [b"17.24151045083999634", b"38.78813451624225195"]],
        [b"edge1", b"279.7405", [b"12.7584877610206604", b"38.78813451624225195"]]]
    assert rr.execute_command("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "1",
                              "m") == [b"Palermo"]
    assert rr.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS",
                              "500", "km", "COUNT", "1", "ANY") in ([b"Palermo"], [b"Catania"],
                                                                    [b"edge1"], [b"edge2"])
    assert rr.execute_command("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYBOX", "1", "1",
                              "km") == []


def test_geosearchstore_and_store(rr):
    sicily(rr)
    assert rr.execute_command("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37",
                              "BYRADIUS", "200", "km") == 2
    assert rr.execute_command("ZRANGE", "dst", 0, -1, "WITHSCORES") == [
        b"Palermo", b"3479099956230698", b"Catania", b"3479447370796909"]
    assert rr.execute_command("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37",
                              "BYRADIUS", "200", "km", "STOREDIST", "COUNT", "1") == 1
    res = rr.execute_command("ZRANGE", "dst", 0, -1, "WITHSCORES")
    assert res[0] == b"Catania" and abs(float(res[1]) - 56.4412578701582) < 1e-9
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE",
                              "d2") == 2
    assert rr.execute_command("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST",
                              "d3", "DESC") == 2
    res = rr.execute_command("ZRANGE", "d3", 0, -1, "WITHSCORES")
    assert res[0::2] == [b"Catania", b"Palermo"]
    assert abs(float(res[1]) - 56.4412578701582) < 1e-9
    assert abs(float(res[3]) - 190.44242984775784) < 1e-9
    # An empty result deletes the destination.
    assert rr.execute_command("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "0", "0",
                              "BYRADIUS", "1", "m") == 0
    assert rr.exists("dst") == 0
    rr.set("d2", "x")
    assert rr.execute_command("GEOSEARCHSTORE", "d2", "nokey", "FROMLONLAT", "0", "0",
                              "BYRADIUS", "1", "m") == 0
    assert rr.exists("d2") == 0
    rr.set("d2", "x")
    assert rr.execute_command("GEORADIUSBYMEMBER", "nokey", "m", "1", "km", "STORE", "d2") == 0
    assert rr.exists("d2") == 0
    # Same key as source and destination.
    assert rr.execute_command("GEOSEARCHSTORE", "Sicily", "Sicily", "FROMMEMBER", "Palermo",
                              "BYRADIUS", "10", "km") == 1
    assert rr.execute_command("ZRANGE", "Sicily", 0, -1) == [b"Palermo"]


def test_search_errors(rr):
    sicily(rr)
    e = lambda *a: err(rr.execute_command, *a)  # noqa: E731
    assert e("GEORADIUS", "Sicily", "15", "37", "-1", "km") == "radius cannot be negative"
    assert e("GEORADIUS", "Sicily", "15", "37", "x", "km") == "need numeric radius"
    assert e("GEORADIUS", "Sicily", "15", "37", "1", "yd") == \
        "unsupported unit provided. please use M, KM, FT, MI"
    assert e("GEORADIUS", "Sicily", "200", "37", "1", "km") == \
        "invalid longitude,latitude pair 200.000000,37.000000"
    assert e("GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0") == "COUNT must be > 0"
    assert e("GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "x") == \
        "value is not an integer or out of range"
    assert e("GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT") == "syntax error"
    assert e("GEORADIUS", "Sicily", "15", "37", "1", "km", "FOO") == "syntax error"
    assert e("GEORADIUS", "Sicily", "15", "37", "1", "km", "STORE", "d", "WITHDIST") == \
        "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD " \
        "options"
    assert e("GEORADIUS_RO", "Sicily", "15", "37", "1", "km", "STORE", "d") == "syntax error"
    assert e("GEORADIUSBYMEMBER", "Sicily", "nope", "1", "km") == \
        "could not decode requested zset member"
    assert e("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "1", "km") == \
        "could not decode requested zset member"
    assert e("GEOSEARCH", "Sicily", "BYRADIUS", "1", "km", "ASC", "ASC") == \
        "exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "ASC", "ASC") == \
        "exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "FROMMEMBER", "Palermo",
             "BYRADIUS", "1", "km") == "syntax error"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "BYBOX",
             "1", "1", "km") == "syntax error"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "-1", "1", "km") == \
        "height or width cannot be negative"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "x", "1", "km") == \
        "need numeric width"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "1", "y", "km") == \
        "need numeric height"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "ANY") == \
        "the ANY argument requires COUNT argument"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STORE",
             "d") == "syntax error"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km",
             "STOREDIST") == "syntax error"
    assert e("GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km",
             "WITHCOORD") == \
        "GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1") == "syntax error"
    assert e("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1") == \
        "wrong number of arguments for 'geosearch' command"
    rr.set("s", "v")
    assert e("GEOSEARCH", "s", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km") == WRONGTYPE
    assert e("GEORADIUS", "s", "15", "37", "-1", "km") == WRONGTYPE
    assert e("GEOSEARCHSTORE", "d", "s", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km") == \
        WRONGTYPE
    # A missing source skips the member lookup but still parses the rest.
    assert rr.execute_command("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "1",
                              "km") == []
    assert e("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", "-1", "km") == \
        "radius cannot be negative"
    assert rr.execute_command("GEORADIUSBYMEMBER", "nokey", "x", "-1", "km") == []


def test_huge_count_and_radius(rr):
    sicily(rr)
    assert rr.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", "0", "0", "BYRADIUS",
                              "inf", "m", "COUNT", "1000000000000000000", "DESC") == [
        b"Palermo", b"Catania"]
    assert rr.execute_command("GEORADIUS", "Sicily", "0", "0", "30000", "km", "ASC") == [
        b"Catania", b"Palermo"]


def test_geosearch_resp3(r3):
    r3.execute_command("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo")
    res = r3.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS",
                             "200", "km", "WITHCOORD", "WITHDIST")
    assert res == [[b"Palermo", b"190.4424", [13.36138933897018433, 38.11555639549629859]]]


# ---------------------------------------------------------------------------
# Differential test against a private redis-server
# ---------------------------------------------------------------------------

UNITS = ["m", "km", "ft", "mi", "KM"]
SEEDS = [int(s) for s in os.environ.get("GEO_DIFF_SEEDS", "1,2,3,4").split(",")]


def _random_points(rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    pts = []
    cx, cy = rng.uniform(-170, 170), rng.uniform(-80, 80)
    for i in range(n):
        kind = rng.random()
        if kind < 0.4:       # cluster
            x = max(-180.0, min(180.0, cx + rng.gauss(0, 2)))
            y = max(-85.0, min(85.0, cy + rng.gauss(0, 2)))
        elif kind < 0.5 and pts:   # duplicate position: distance ties
            _, x, y = pts[rng.randrange(len(pts))]
            pts.append((f"d{i}", x, y))
            continue
        elif kind < 0.6:     # near the antimeridian or the poles
            x = rng.choice([-1, 1]) * rng.uniform(175, 180)
            y = rng.uniform(-85.05, 85.05)
        else:
            x = rng.uniform(-180, 180)
            y = rng.uniform(-85.05, 85.05)
        pts.append((f"m{i}", f"{x:.6f}", f"{y:.6f}"))
    return pts


def _random_search(rng: random.Random, pts) -> list:
    form = rng.choice(["GEOSEARCH", "GEOSEARCH", "GEORADIUS", "GEORADIUSBYMEMBER",
                       "GEORADIUS_RO", "GEOSEARCHSTORE", "GEORADIUSBYMEMBER_RO"])
    key = rng.choice(["g", "g", "g", "nokey"])
    unit = rng.choice(UNITS)
    scale = {"m": 1, "km": 1000, "KM": 1000, "ft": 0.3048, "mi": 1609.34}[unit]
    meters = rng.choice([1e3, 5e4, 3e5, 1e6, 3e6, 8e6, 2e7])
    r = f"{rng.uniform(0, meters) / scale:.3f}"
    if rng.random() < 0.05:
        r = rng.choice(["0", "inf", "1e-3", "40000000"])
    if rng.random() < 0.5:
        _, x, y = rng.choice(pts)
        center = (float(x) + rng.uniform(-1, 1), float(y) + rng.uniform(-1, 1))
    else:
        center = (rng.uniform(-180, 180), rng.uniform(-85, 85))
    cx = f"{max(-180.0, min(180.0, center[0])):.5f}"
    cy = f"{max(-85.0, min(85.0, center[1])):.5f}"
    if rng.random() < 0.05:
        cx = rng.choice(["180", "-180", "0"])
    if rng.random() < 0.05:
        cy = rng.choice(["85.05112878", "-85.05112878", "0"])
    member = rng.choice(pts)[0] if rng.random() < 0.95 else "nomember"
    opts = []
    store = form == "GEOSEARCHSTORE" or (form in ("GEORADIUS", "GEORADIUSBYMEMBER")
                                         and rng.random() < 0.2)
    if not store:
        for o in ("WITHCOORD", "WITHDIST", "WITHHASH"):
            if rng.random() < 0.4:
                opts.append(o)
    if rng.random() < 0.6:
        opts.append(rng.choice(["ASC", "DESC"]))
    if rng.random() < 0.5:
        opts += ["COUNT", str(rng.choice([1, 2, 3, 5, 10, 50]))]
        if rng.random() < 0.25:
            opts.append("ANY")
    rng.shuffle(opts)
    opts = _fix_pairs(opts)
    if form.startswith("GEOSEARCH"):
        src = ["FROMMEMBER", member] if rng.random() < 0.4 else ["FROMLONLAT", cx, cy]
        if rng.random() < 0.5:
            shape = ["BYRADIUS", r, unit]
        else:
            w = f"{rng.uniform(0, 2 * meters) / scale:.3f}"
            h = f"{rng.uniform(0, 2 * meters) / scale:.3f}"
            shape = ["BYBOX", w, h, unit]
        parts = [src, shape]
        rng.shuffle(parts)
        if form == "GEOSEARCHSTORE":
            if rng.random() < 0.4:
                opts.append("STOREDIST")
            return [form, "dst", key, *parts[0], *parts[1], *opts]
        return [form, key, *parts[0], *parts[1], *opts]
    if store:
        opts += [rng.choice(["STORE", "STOREDIST"]), "dst"]
    if "BYMEMBER" in form:
        return [form, key, member, r, unit, *opts]
    return [form, key, cx, cy, r, unit, *opts]


def _fix_pairs(opts: list) -> list:
    """Re-attach the COUNT argument to COUNT after a shuffle."""
    out = [o for o in opts if not (o.isdigit())]
    n = [o for o in opts if o.isdigit()]
    if n:
        i = out.index("COUNT")
        out.insert(i + 1, n[0])
    return out


def _start_redis():
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="geo-diff-")
    proc = subprocess.Popen(
        [_redis_server_bin(), "--port", str(port), "--bind", HOST, "--save", "",
         "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            return proc, workdir, RawConn(port)
        except OSError:
            if time.monotonic() > deadline:
                proc.terminate()
                raise
            time.sleep(0.05)


def _scores(reply):
    if not isinstance(reply, list):
        return reply
    flat = []
    for x in reply:
        flat += x if isinstance(x, list) else [x]
    return [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]


def _raw(conn: RawConn, *args) -> bytes:
    conn.send_cmd(*args)
    return conn.read_raw()


@pytest.mark.skipif(IS_REDIS, reason="differential test compares Ember with redis-server")
@pytest.mark.skipif(shutil.which(_redis_server_bin()) is None, reason="redis-server missing")
@pytest.mark.parametrize("seed", SEEDS)
def test_differential_against_redis(server, r, seed):
    proc, workdir, ref = _start_redis()
    try:
        ours = RawConn(server.port)
        rng = random.Random(seed)
        for resp in ("2", "3"):
            ref.cmd("HELLO", resp)
            ours.cmd("HELLO", resp)
            ref.cmd("FLUSHALL")
            ours.cmd("FLUSHALL")
            # Small sets stay listpacks, big ones become skiplists: both are covered.
            pts = _random_points(rng, rng.choice([20, 100, 300]))
            for i in range(0, len(pts), 50):
                args = ["GEOADD", "g"]
                for m, x, y in pts[i:i + 50]:
                    args += [x, y, m]
                assert _raw(ref, *args) == _raw(ours, *args)
            for m in ("GEOPOS", "GEOHASH"):
                cmd = [m, "g", *[p[0] for p in pts[:40]], "nomember"]
                assert _raw(ref, *cmd) == _raw(ours, *cmd)
            for _ in range(30):
                a, b = rng.choice(pts)[0], rng.choice(pts)[0]
                cmd = ["GEODIST", "g", a, b, rng.choice(UNITS)]
                assert _raw(ref, *cmd) == _raw(ours, *cmd), cmd
            for _ in range(20):
                m, x, y = rng.choice(pts)
                cmd = ["GEOADD", "g", *rng.sample(["NX", "XX", "CH"], rng.randrange(0, 3)),
                       x, y, m, f"{rng.uniform(-180, 180):.4f}", f"{rng.uniform(-85, 85):.4f}",
                       rng.choice([m, f"new{rng.randrange(10)}"])]
                assert _raw(ref, *cmd) == _raw(ours, *cmd), cmd
            for i in range(150):
                cmd = _random_search(rng, pts)
                a = _raw(ref, *cmd)
                b = _raw(ours, *cmd)
                assert a == b, f"step {i} RESP{resp}: {cmd}: redis={a!r} ember={b!r}"
                if cmd[0] in ("GEOSEARCHSTORE", "GEORADIUS", "GEORADIUSBYMEMBER"):
                    # Scores compared as numbers: 7.0 and 7.2 format doubles differently.
                    z = ("ZRANGE", "dst", "0", "-1", "WITHSCORES")
                    za, zb = ref.cmd(*z), ours.cmd(*z)
                    assert _scores(za) == _scores(zb), f"step {i}: {cmd}"
        ref.close()
        ours.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def test_georadius_getkeys_reports_store_key(raw):
    c = raw()
    assert c.cmd("COMMAND", "GETKEYS", "GEORADIUS", "src", "15", "37", "200", "km",
                 "STORE", "a", "STOREDIST", "b") == [b"src", b"a", b"b"]
    assert c.cmd("COMMAND", "GETKEYS", "GEORADIUSBYMEMBER", "src", "m", "200", "km",
                 "STORE", "dst") == [b"src", b"dst"]
    assert c.cmd("COMMAND", "GETKEYS", "GEORADIUS", "src", "15", "37", "200", "km") == [b"src"]
    assert c.cmd("COMMAND", "GETKEYS", "GEORADIUS", "src", "15", "37", "200", "km",
                 "STOREDIST", "x", "STORE", "y") == [b"src", b"y", b"x"]
