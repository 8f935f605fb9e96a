//! Hash commands against the real binary: replies, RESP3 shapes, encodings and error texts.

mod common;

use std::collections::HashSet;

use common::{err, int, ok, raw_roundtrip, Ember};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

fn strings(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::BulkString(b) => String::from_utf8(b).unwrap_or_default(),
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn set_get_and_friends() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    assert_eq!(int(&mut c, &["HSET", "h", "a", "10", "c", "3"]), 1);
    assert_eq!(ok(&mut c, &["HGET", "h", "a"]), bulk("10"));
    assert_eq!(ok(&mut c, &["HGET", "h", "x"]), Value::Nil);
    assert_eq!(ok(&mut c, &["HGET", "nokey", "x"]), Value::Nil);
    assert_eq!(ok(&mut c, &["HMSET", "h", "d", "4"]), Value::Okay);
    assert_eq!(
        ok(&mut c, &["HMGET", "h", "a", "zz", "d"]),
        Value::Array(vec![bulk("10"), Value::Nil, bulk("4")])
    );
    assert_eq!(int(&mut c, &["HLEN", "h"]), 4);
    assert_eq!(int(&mut c, &["HEXISTS", "h", "c"]), 1);
    assert_eq!(int(&mut c, &["HEXISTS", "h", "q"]), 0);
    assert_eq!(int(&mut c, &["HSTRLEN", "h", "a"]), 2);
    assert_eq!(int(&mut c, &["HSETNX", "h", "a", "x"]), 0);
    assert_eq!(int(&mut c, &["HSETNX", "h", "e", "5"]), 1);
    assert_eq!(
        ok(&mut c, &["HKEYS", "h"]),
        bulks(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(
        ok(&mut c, &["HVALS", "h"]),
        bulks(&["10", "2", "3", "4", "5"])
    );
    assert_eq!(
        ok(&mut c, &["HGETALL", "h"]),
        bulks(&["a", "10", "b", "2", "c", "3", "d", "4", "e", "5"])
    );
    assert_eq!(int(&mut c, &["HDEL", "h", "a", "b", "zz"]), 2);
    assert_eq!(int(&mut c, &["HDEL", "h", "c", "d", "e"]), 3);
    assert_eq!(int(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(
        err(&mut c, &["HSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err(&mut c, &["HMSET", "h", "a"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
}

#[test]
fn resp3_shapes() {
    let e = Ember::start(&[]);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", e.port))
        .expect("client");
    let mut c = client.get_connection().expect("connect");
    ok(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(
        ok(&mut c, &["HGETALL", "h"]),
        Value::Map(vec![(bulk("f"), bulk("v"))])
    );
    assert_eq!(ok(&mut c, &["HGETALL", "nokey"]), Value::Map(vec![]));
    assert_eq!(
        ok(&mut c, &["HRANDFIELD", "h", "-2", "WITHVALUES"]),
        Value::Array(vec![bulks(&["f", "v"]), bulks(&["f", "v"])])
    );
    // The raw bytes of a RESP3 map.
    let mut s = e.raw();
    let hello = raw_roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%"));
    std::thread::sleep(std::time::Duration::from_millis(200));
    s.set_nonblocking(true).ok();
    let _ = raw_roundtrip(&mut s, b"", 1);
    s.set_nonblocking(false).ok();
    let want = b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n";
    assert_eq!(raw_roundtrip(&mut s, b"HGETALL h\r\n", want.len()), want);
}

#[test]
fn incr_commands() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(int(&mut c, &["HINCRBY", "h", "n", "-8"]), -3);
    ok(
        &mut c,
        &["HSET", "h", "s", "x", "max", "9223372036854775807"],
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "s", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "max", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "n", "1.0"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        ok(&mut c, &["HINCRBYFLOAT", "h", "f", "10.5"]),
        bulk("10.5")
    );
    assert_eq!(ok(&mut c, &["HINCRBYFLOAT", "h", "f", "0.1"]), bulk("10.6"));
    assert_eq!(ok(&mut c, &["HINCRBYFLOAT", "h", "n", "0.5"]), bulk("-2.5"));
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "s", "1"]),
        "ERR hash value is not a float"
    );
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "f", "nope"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "f", "inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(ok(&mut c, &["HGET", "h", "f"]), bulk("10.6"));
}

#[test]
fn wrongtype_and_missing() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "s", "v"]);
    let wt = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["HSET", "s", "a", "1"][..],
        &["HGET", "s", "a"],
        &["HGETALL", "s"],
        &["HDEL", "s", "a"],
        &["HINCRBY", "s", "a", "1"],
        &["HRANDFIELD", "s", "1"],
        &["HSCAN", "s", "0"],
        &["HLEN", "s"],
    ] {
        assert_eq!(err(&mut c, args), wt, "{args:?}");
    }
    assert_eq!(ok(&mut c, &["HGETALL", "nokey"]), Value::Array(vec![]));
    assert_eq!(ok(&mut c, &["HRANDFIELD", "nokey"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["HRANDFIELD", "nokey", "3"]),
        Value::Array(vec![])
    );
    assert_eq!(
        ok(&mut c, &["HSCAN", "nokey", "0"]),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
}

#[test]
fn encodings_and_big_hashes() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for i in 0..128 {
        ok(&mut c, &["HSET", "h", &format!("f{i}"), &i.to_string()]);
    }
    assert_eq!(ok(&mut c, &["OBJECT", "ENCODING", "h"]), bulk("listpack"));
    ok(&mut c, &["HSET", "h", "f128", "128"]);
    assert_eq!(ok(&mut c, &["OBJECT", "ENCODING", "h"]), bulk("hashtable"));
    ok(&mut c, &["HSET", "long", "a", &"x".repeat(65)]);
    assert_eq!(
        ok(&mut c, &["OBJECT", "ENCODING", "long"]),
        bulk("hashtable")
    );
    for i in 129..2000 {
        ok(&mut c, &["HSET", "h", &format!("f{i}"), &i.to_string()]);
    }
    for i in (0..2000).step_by(3) {
        assert_eq!(int(&mut c, &["HDEL", "h", &format!("f{i}")]), 1);
    }
    let live: HashSet<String> = (0..2000)
        .filter(|i| i % 3 != 0)
        .map(|i| format!("f{i}"))
        .collect();
    assert_eq!(int(&mut c, &["HLEN", "h"]) as usize, live.len());
    for i in [1, 2, 4, 1999] {
        assert_eq!(
            ok(&mut c, &["HGET", "h", &format!("f{i}")]),
            bulk(&i.to_string())
        );
    }
    // HSCAN visits every field exactly once.
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let Value::Array(mut reply) = ok(&mut c, &["HSCAN", "h", &cursor, "COUNT", "50"]) else {
            panic!("HSCAN reply is not an array")
        };
        let items = strings(reply.pop().unwrap_or(Value::Nil));
        cursor = strings(Value::Array(reply)).pop().unwrap_or_default();
        for pair in items.chunks(2) {
            assert!(seen.insert(pair[0].clone()), "duplicate {}", pair[0]);
            assert_eq!(format!("f{}", pair[1]), pair[0]);
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, live);
    // HRANDFIELD with distinct fields.
    let picks = strings(ok(&mut c, &["HRANDFIELD", "h", "500"]));
    assert_eq!(picks.iter().collect::<HashSet<_>>().len(), 500);
    assert!(picks.iter().all(|p| live.contains(p)));
    let picks = strings(ok(&mut c, &["HRANDFIELD", "h", "-3000"]));
    assert_eq!(picks.len(), 3000);
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "-100000000000"]),
        "ERR value is out of range"
    );
}
