//! Set commands against the real binary: replies, encodings, errors and atomic
//! multi-key operations.

mod common;

use std::collections::HashSet;

use common::{cmd, err, int, ok, Ember};
use redis::Value;

fn members(v: Value) -> HashSet<Vec<u8>> {
    let items = match v {
        Value::Array(a) | Value::Set(a) => a,
        v => panic!("expected a collection, got {v:?}"),
    };
    items
        .into_iter()
        .map(|x| match x {
            Value::BulkString(b) => b,
            x => panic!("expected a bulk string, got {x:?}"),
        })
        .collect()
}

fn set_of(xs: &[&str]) -> HashSet<Vec<u8>> {
    xs.iter().map(|x| x.as_bytes().to_vec()).collect()
}

fn encoding(c: &mut redis::Connection, key: &str) -> Value {
    ok(c, &["OBJECT", "ENCODING", key])
}

#[test]
fn add_remove_and_read() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["SADD", "s", "a", "b", "a"]), 2);
    assert_eq!(int(&mut c, &["SCARD", "s"]), 2);
    assert_eq!(int(&mut c, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(members(ok(&mut c, &["SMEMBERS", "s"])), set_of(&["a", "b"]));
    assert_eq!(int(&mut c, &["SREM", "s", "a", "b", "z"]), 2);
    assert_eq!(int(&mut c, &["EXISTS", "s"]), 0);
    ok(&mut c, &["SET", "str", "v"]);
    assert!(err(&mut c, &["SADD", "str", "a"]).starts_with("WRONGTYPE"));
    assert!(err(&mut c, &["SINTER", "nokey", "str"]).starts_with("WRONGTYPE"));
}

#[test]
fn encodings() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["SADD", "i", "1", "2", "3"]);
    assert_eq!(encoding(&mut c, "i"), Value::BulkString(b"intset".to_vec()));
    int(&mut c, &["SADD", "i", "x"]);
    assert_eq!(
        encoding(&mut c, "i"),
        Value::BulkString(b"listpack".to_vec())
    );
    let long = "y".repeat(65);
    int(&mut c, &["SADD", "i", &long]);
    assert_eq!(
        encoding(&mut c, "i"),
        Value::BulkString(b"hashtable".to_vec())
    );
    assert_eq!(int(&mut c, &["SCARD", "i"]), 5);
    assert_eq!(int(&mut c, &["SISMEMBER", "i", "2"]), 1);
}

#[test]
fn pop_random_and_move() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let many: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "s"];
    args.extend(many.iter().map(String::as_str));
    assert_eq!(int(&mut c, &args), 600);
    let popped = members(ok(&mut c, &["SPOP", "s", "100"]));
    assert_eq!(popped.len(), 100);
    assert_eq!(int(&mut c, &["SCARD", "s"]), 500);
    let rnd = ok(&mut c, &["SRANDMEMBER", "s", "-2000"]);
    match rnd {
        Value::Array(a) => assert_eq!(a.len(), 2000),
        v => panic!("{v:?}"),
    }
    assert!(err(&mut c, &["SRANDMEMBER", "s", "-1000000000000000000"]).contains("out of range"));
    assert_eq!(members(ok(&mut c, &["SRANDMEMBER", "s", "50"])).len(), 50);
    assert_eq!(int(&mut c, &["SADD", "a", "x"]), 1);
    assert_eq!(int(&mut c, &["SMOVE", "a", "b", "x"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(members(ok(&mut c, &["SMEMBERS", "b"])), set_of(&["x"]));
    assert_eq!(cmd(&mut c, &["SPOP", "nokey"]).unwrap(), Value::Nil);
}

#[test]
fn algebra() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["SADD", "a", "1", "2", "3"]);
    int(&mut c, &["SADD", "b", "2", "3", "4"]);
    assert_eq!(
        members(ok(&mut c, &["SINTER", "a", "b"])),
        set_of(&["2", "3"])
    );
    assert_eq!(members(ok(&mut c, &["SUNION", "a", "b"])).len(), 4);
    assert_eq!(members(ok(&mut c, &["SDIFF", "a", "b"])), set_of(&["1"]));
    assert_eq!(int(&mut c, &["SINTERCARD", "2", "a", "b", "LIMIT", "1"]), 1);
    assert_eq!(int(&mut c, &["SINTERSTORE", "d", "a", "b"]), 2);
    assert_eq!(encoding(&mut c, "d"), Value::BulkString(b"intset".to_vec()));
    assert_eq!(int(&mut c, &["SDIFFSTORE", "d", "a", "a"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(int(&mut c, &["SUNIONSTORE", "d", "a", "b", "nokey"]), 4);
}

#[test]
fn sscan_walks_everything() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let many: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    let mut args = vec!["SADD", "s"];
    args.extend(many.iter().map(String::as_str));
    int(&mut c, &args);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let v = ok(&mut c, &["SSCAN", "s", &cursor, "COUNT", "100"]);
        let Value::Array(mut parts) = v else { panic!() };
        let items = parts.pop().unwrap();
        let Value::BulkString(cur) = parts.pop().unwrap() else {
            panic!()
        };
        seen.extend(members(items));
        cursor = String::from_utf8(cur).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
}
