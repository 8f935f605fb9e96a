//! Geospatial commands against the real binary: stored scores, positions, distances,
//! geohashes, searches (radius and box, sorting, COUNT/ANY, STORE/STOREDIST), reply
//! shapes in RESP2 and RESP3, and error texts.

mod common;

use common::{err, int, ok as q, raw_roundtrip, Ember};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(v: &[&str]) -> Value {
    Value::Array(v.iter().map(|s| bulk(s)).collect())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn sicily(c: &mut redis::Connection) {
    assert_eq!(
        int(
            c,
            &[
                "GEOADD",
                "Sicily",
                "13.361389",
                "38.115556",
                "Palermo",
                "15.087269",
                "37.502669",
                "Catania"
            ]
        ),
        2
    );
}

#[test]
fn geoadd_scores_options_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    sicily(&mut c);
    assert_eq!(
        q(&mut c, &["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"]),
        bulks(&["Palermo", "3479099956230698", "Catania", "3479447370796909"])
    );
    assert_eq!(
        int(
            &mut c,
            &["GEOADD", "Sicily", "CH", "13.5", "38.1", "Palermo"]
        ),
        1
    );
    assert_eq!(
        int(
            &mut c,
            &["GEOADD", "Sicily", "NX", "1", "1", "Palermo", "2", "2", "x"]
        ),
        1
    );
    assert_eq!(int(&mut c, &["GEOADD", "nokey", "XX", "1", "1", "a"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "nokey"]), 0);
    assert_eq!(
        err(&mut c, &["GEOADD", "k", "200", "100", "a"]),
        "ERR invalid longitude,latitude pair 200.000000,100.000000"
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "k", "1", "2", "a", "3"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "k", "NX", "XX", "1", "2", "a"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "k", "x", "2", "a"]),
        "ERR value is not a valid float"
    );
    q(&mut c, &["SET", "s", "v"]);
    assert_eq!(err(&mut c, &["GEOADD", "s", "1", "1", "a"]), WRONGTYPE);
}

#[test]
fn geopos_geodist_geohash() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    sicily(&mut c);
    assert_eq!(
        q(&mut c, &["GEOPOS", "Sicily", "Palermo", "nope"]),
        Value::Array(vec![
            bulks(&["13.36138933897018433", "38.11555639549629859"]),
            Value::Nil
        ])
    );
    assert_eq!(
        q(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania"]),
        bulk("166274.1516")
    );
    assert_eq!(
        q(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "KM"]),
        bulk("166.2742")
    );
    assert_eq!(
        q(&mut c, &["GEODIST", "Sicily", "Palermo", "nope"]),
        Value::Nil
    );
    assert_eq!(
        err(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "yd"]),
        "ERR unsupported unit provided. please use M, KM, FT, MI"
    );
    assert_eq!(
        q(&mut c, &["GEOHASH", "Sicily", "Palermo", "Catania", "nope"]),
        Value::Array(vec![bulk("sqc8b49rny0"), bulk("sqdtr74hyu0"), Value::Nil])
    );
    q(&mut c, &["SET", "s", "v"]);
    assert_eq!(err(&mut c, &["GEOPOS", "s", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GEOHASH", "s", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GEODIST", "s", "a", "b"]), WRONGTYPE);
}

#[test]
fn searches() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    sicily(&mut c);
    assert_eq!(
        q(
            &mut c,
            &[
                "GEORADIUS",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "WITHDIST",
                "ASC"
            ]
        ),
        Value::Array(vec![
            bulks(&["Catania", "56.4413"]),
            bulks(&["Palermo", "190.4424"])
        ])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYBOX",
                "400",
                "400",
                "km",
                "DESC"
            ]
        ),
        bulks(&["Catania", "Palermo"])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "COUNT",
                "1",
                "WITHHASH"
            ]
        ),
        Value::Array(vec![Value::Array(vec![
            bulk("Catania"),
            Value::Int(3479447370796909)
        ])])
    );
    assert_eq!(
        int(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST"
            ]
        ),
        2
    );
    assert_eq!(
        q(&mut c, &["ZRANGE", "d", "0", "-1"]),
        bulks(&["Catania", "Palermo"])
    );
    assert_eq!(
        int(
            &mut c,
            &[
                "GEORADIUSBYMEMBER",
                "Sicily",
                "Palermo",
                "1",
                "km",
                "STORE",
                "d"
            ]
        ),
        1
    );
    assert_eq!(
        q(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        bulks(&["Palermo", "3479099956230698"])
    );
    assert_eq!(
        int(
            &mut c,
            &["GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "d"]
        ),
        0
    );
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(
        q(&mut c, &["GEORADIUS_RO", "nokey", "0", "0", "1", "km"]),
        Value::Array(vec![])
    );
    assert_eq!(
        err(
            &mut c,
            &["GEORADIUS_RO", "Sicily", "0", "0", "1", "km", "STORE", "d"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        err(
            &mut c,
            &["GEORADIUSBYMEMBER_RO", "Sicily", "nope", "1", "km"]
        ),
        "ERR could not decode requested zset member"
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "1",
                "1",
                "BYRADIUS",
                "1",
                "km",
                "ANY"
            ]
        ),
        "ERR the ANY argument requires COUNT argument"
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "1",
                "1",
                "BYRADIUS",
                "-1",
                "km"
            ]
        ),
        "ERR radius cannot be negative"
    );
    assert_eq!(
        err(
            &mut c,
            &["GEORADIUS", "Sicily", "1", "1", "1", "km", "COUNT", "0"]
        ),
        "ERR COUNT must be > 0"
    );
    q(&mut c, &["SET", "s", "v"]);
    assert_eq!(
        err(
            &mut c,
            &[
                "GEOSEARCH",
                "s",
                "FROMLONLAT",
                "1",
                "1",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        WRONGTYPE
    );
}

#[test]
fn resp3_shapes() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let hello = raw_roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%"));
    let r = raw_roundtrip(&mut s, b"GEOADD g 13.361389 38.115556 Palermo\r\n", 4);
    assert_eq!(r, b":1\r\n");
    let want = b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n";
    let r = raw_roundtrip(&mut s, b"GEOPOS g Palermo nope\r\n", want.len());
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(want));
    let want = b"*1\r\n*3\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n";
    let r = raw_roundtrip(
        &mut s,
        b"GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST WITHCOORD\r\n",
        want.len(),
    );
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(want));
    let r = raw_roundtrip(&mut s, b"GEODIST g Palermo nope\r\n", 3);
    assert_eq!(r, b"_\r\n");
}
