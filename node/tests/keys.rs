//! Generic keyspace commands (DEL UNLINK EXISTS TYPE RENAME RENAMENX KEYS SCAN RANDOMKEY
//! MOVE COPY TOUCH OBJECT) against the real binary.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{cmd, err, int, ok, raw_roundtrip, Ember};
use redis::{Connection, Value};

/// Runs a command that must reply with a bulk string or nil.
fn bulk(c: &mut Connection, args: &[&str]) -> Option<Vec<u8>> {
    match ok(c, args) {
        Value::BulkString(b) => Some(b),
        Value::Nil => None,
        v => panic!("{args:?}: expected a bulk string, got {v:?}"),
    }
}

/// The strings of an array reply, sorted.
fn sorted(v: Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("expected an array, got {v:?}");
    };
    let mut out: Vec<String> = items
        .into_iter()
        .map(|i| match i {
            Value::BulkString(b) => String::from_utf8(b).unwrap(),
            other => panic!("expected a bulk string, got {other:?}"),
        })
        .collect();
    out.sort();
    out
}

fn strs(v: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    out.sort();
    out
}

fn conn_db(e: &Ember, db: &str) -> Connection {
    let mut c = e.conn();
    ok(&mut c, &["SELECT", db]);
    c
}

const SAME: &str = "ERR source and destination objects are the same";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const DB_RANGE: &str = "ERR DB index is out of range";
const SYNTAX: &str = "ERR syntax error";

#[test]
fn del_unlink_exists() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["MSET", "a", "1", "b", "2", "c", "3", "d", "4"]);
    assert_eq!(int(&mut c, &["EXISTS", "a"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "nokey"]), 0);
    assert_eq!(
        int(&mut c, &["EXISTS", "a", "a", "nokey", "b"]),
        3,
        "duplicates count"
    );
    assert_eq!(int(&mut c, &["DEL", "a"]), 1);
    assert_eq!(int(&mut c, &["DEL", "a"]), 0);
    assert_eq!(
        int(&mut c, &["DEL", "b", "c", "nokey", "b"]),
        2,
        "a duplicate is deleted once"
    );
    assert_eq!(int(&mut c, &["UNLINK", "d", "nokey"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "a", "b", "c", "d"]), 0);
    assert_eq!(
        err(&mut c, &["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );
    assert_eq!(
        err(&mut c, &["UNLINK"]),
        "ERR wrong number of arguments for 'unlink' command"
    );
    assert_eq!(
        err(&mut c, &["EXISTS"]),
        "ERR wrong number of arguments for 'exists' command"
    );
}

#[test]
fn del_many_keys_across_shards() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let names: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
    let mut mset = vec!["MSET"];
    for n in &names {
        mset.push(n);
        mset.push("v");
    }
    ok(&mut c, &mset);
    let mut exists = vec!["EXISTS"];
    exists.extend(names.iter().map(String::as_str));
    assert_eq!(int(&mut c, &exists), 300);
    let mut del = vec!["DEL"];
    del.extend(names.iter().map(String::as_str));
    del.push("missing");
    assert_eq!(int(&mut c, &del), 300);
    assert_eq!(int(&mut c, &exists), 0);
}

#[test]
fn type_command() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "s", "v"]);
    ok(&mut c, &["SET", "n", "123"]);
    assert_eq!(
        ok(&mut c, &["TYPE", "s"]),
        Value::SimpleString("string".into())
    );
    assert_eq!(
        ok(&mut c, &["TYPE", "n"]),
        Value::SimpleString("string".into())
    );
    assert_eq!(
        ok(&mut c, &["TYPE", "nokey"]),
        Value::SimpleString("none".into())
    );
    let mut s = e.raw();
    assert_eq!(raw_roundtrip(&mut s, b"TYPE s\r\n", 9), b"+string\r\n");
    assert_eq!(raw_roundtrip(&mut s, b"TYPE x\r\n", 7), b"+none\r\n");
    assert_eq!(
        err(&mut c, &["TYPE"]),
        "ERR wrong number of arguments for 'type' command"
    );
    assert_eq!(
        err(&mut c, &["TYPE", "a", "b"]),
        "ERR wrong number of arguments for 'type' command"
    );
}

#[test]
fn rename_and_renamenx() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "a", "1"]);
    assert_eq!(ok(&mut c, &["RENAME", "a", "b"]), Value::Okay);
    assert_eq!(bulk(&mut c, &["GET", "a"]), None);
    assert_eq!(bulk(&mut c, &["GET", "b"]), Some(b"1".to_vec()));

    // The source's TTL travels; the destination's old TTL is dropped.
    ok(&mut c, &["SET", "src", "x", "EX", "100"]);
    ok(&mut c, &["SET", "dst", "y"]);
    assert_eq!(ok(&mut c, &["RENAME", "src", "dst"]), Value::Okay);
    assert_eq!(bulk(&mut c, &["GET", "dst"]), Some(b"x".to_vec()));
    let ttl = int(&mut c, &["TTL", "dst"]);
    assert!((98..=100).contains(&ttl), "{ttl}");
    ok(&mut c, &["SET", "p", "1"]);
    ok(&mut c, &["SET", "q", "2", "EX", "100"]);
    ok(&mut c, &["RENAME", "p", "q"]);
    assert_eq!(int(&mut c, &["TTL", "q"]), -1);

    // Same key: a no-op that still requires the key to exist.
    assert_eq!(ok(&mut c, &["RENAME", "dst", "dst"]), Value::Okay);
    assert!(int(&mut c, &["TTL", "dst"]) > 0);
    assert_eq!(int(&mut c, &["RENAMENX", "dst", "dst"]), 0);
    assert_eq!(
        err(&mut c, &["RENAME", "nokey", "nokey"]),
        "ERR no such key"
    );
    assert_eq!(err(&mut c, &["RENAME", "nokey", "x"]), "ERR no such key");
    assert_eq!(err(&mut c, &["RENAMENX", "nokey", "x"]), "ERR no such key");

    ok(&mut c, &["MSET", "m", "1", "n", "2"]);
    assert_eq!(int(&mut c, &["RENAMENX", "m", "n"]), 0);
    assert_eq!(bulk(&mut c, &["GET", "m"]), Some(b"1".to_vec()));
    assert_eq!(bulk(&mut c, &["GET", "n"]), Some(b"2".to_vec()));
    assert_eq!(int(&mut c, &["RENAMENX", "m", "o"]), 1);
    assert_eq!(bulk(&mut c, &["GET", "m"]), None);
    assert_eq!(bulk(&mut c, &["GET", "o"]), Some(b"1".to_vec()));
    assert_eq!(
        err(&mut c, &["RENAME", "a"]),
        "ERR wrong number of arguments for 'rename' command"
    );
}

#[test]
fn keys_glob_patterns() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(sorted(ok(&mut c, &["KEYS", "*"])), Vec::<String>::new());
    let fixture = [
        "hello", "hallo", "hxllo", "hllo", "heeello", "a*b", "a?b", "axb", "foo:1", "foo:2",
        "foo:10",
    ];
    for k in fixture {
        ok(&mut c, &["SET", k, "1"]);
    }
    assert_eq!(sorted(ok(&mut c, &["KEYS", "*"])), strs(&fixture));
    assert_eq!(
        sorted(ok(&mut c, &["KEYS", "h?llo"])),
        strs(&["hello", "hallo", "hxllo"])
    );
    assert_eq!(
        sorted(ok(&mut c, &["KEYS", "h*llo"])),
        strs(&["hello", "hallo", "hxllo", "hllo", "heeello"])
    );
    assert_eq!(
        sorted(ok(&mut c, &["KEYS", "h[ae]llo"])),
        strs(&["hello", "hallo"])
    );
    assert_eq!(
        sorted(ok(&mut c, &["KEYS", "h[^e]llo"])),
        strs(&["hallo", "hxllo"])
    );
    assert_eq!(sorted(ok(&mut c, &["KEYS", "a\\*b"])), strs(&["a*b"]));
    assert_eq!(
        sorted(ok(&mut c, &["KEYS", "foo:1*"])),
        strs(&["foo:1", "foo:10"])
    );
    assert_eq!(
        sorted(ok(&mut c, &["KEYS", "HELLO"])),
        Vec::<String>::new(),
        "case-sensitive"
    );
    assert_eq!(
        err(&mut c, &["KEYS"]),
        "ERR wrong number of arguments for 'keys' command"
    );
}

/// Every key a full SCAN iteration with `opts` returns, in order of arrival.
fn full_scan(c: &mut Connection, opts: &[&str]) -> (Vec<String>, usize) {
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(opts);
        let Value::Array(mut parts) = ok(c, &args) else {
            panic!("SCAN reply is not an array");
        };
        assert_eq!(parts.len(), 2);
        let keys = parts.pop().unwrap();
        let Value::BulkString(next) = parts.pop().unwrap() else {
            panic!("SCAN cursor is not a bulk string");
        };
        let next = String::from_utf8(next).unwrap();
        assert!(next.parse::<u64>().is_ok(), "cursor {next}");
        let Value::Array(keys) = keys else {
            panic!("SCAN keys are not an array");
        };
        for k in keys {
            let Value::BulkString(k) = k else {
                panic!("key is not a bulk string")
            };
            seen.push(String::from_utf8(k).unwrap());
        }
        calls += 1;
        assert!(calls < 100_000, "SCAN did not terminate");
        if next == "0" {
            return (seen, calls);
        }
        cursor = next;
    }
}

#[test]
fn scan_iterates_everything_once() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(full_scan(&mut c, &[]).0, Vec::<String>::new());
    ok(&mut c, &["SET", "only", "v"]);
    assert_eq!(
        ok(&mut c, &["SCAN", "0"]),
        Value::Array(vec![
            Value::BulkString(b"0".to_vec()),
            Value::Array(vec![Value::BulkString(b"only".to_vec())])
        ])
    );
    ok(&mut c, &["DEL", "only"]);
    for i in 0..500 {
        ok(&mut c, &["SET", &format!("key:{i}"), "v"]);
    }
    let (mut seen, calls) = full_scan(&mut c, &["COUNT", "10"]);
    assert!(
        calls > 10,
        "COUNT 10 over 500 keys takes many calls ({calls})"
    );
    seen.sort();
    let mut expected: Vec<String> = (0..500).map(|i| format!("key:{i}")).collect();
    expected.sort();
    assert_eq!(seen, expected, "each key exactly once");
    // Default COUNT and a COUNT larger than the keyspace.
    assert_eq!(full_scan(&mut c, &[]).0.len(), 500);
    let (all, calls) = full_scan(&mut c, &["COUNT", "100000"]);
    assert_eq!((all.len(), calls), (500, 1));
}

#[test]
fn scan_match_and_type() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for i in 0..200 {
        ok(&mut c, &["SET", &format!("user:{i}"), "1"]);
    }
    for i in 0..50 {
        ok(&mut c, &["SET", &format!("order:{i}"), "1"]);
    }
    let (mut seen, _) = full_scan(&mut c, &["MATCH", "user:1*", "COUNT", "20"]);
    seen.sort();
    let mut expected: Vec<String> = (0..200)
        .filter(|i| i.to_string().starts_with('1'))
        .map(|i| format!("user:{i}"))
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    assert_eq!(full_scan(&mut c, &["MATCH", "nothing*"]).0.len(), 0);
    assert_eq!(full_scan(&mut c, &["match", "*"]).0.len(), 250);
    assert_eq!(
        full_scan(&mut c, &["TYPE", "string", "COUNT", "7"]).0.len(),
        250
    );
    assert_eq!(full_scan(&mut c, &["TYPE", "STRING"]).0.len(), 250);
    assert_eq!(full_scan(&mut c, &["TYPE", "list"]).0.len(), 0);
    let (seen, _) = full_scan(
        &mut c,
        &["MATCH", "order:*", "TYPE", "string", "COUNT", "3"],
    );
    assert_eq!(seen.len(), 50);
}

#[test]
fn scan_keeps_stable_keys_under_concurrent_changes() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut other = e.conn();
    for i in 0..300 {
        ok(&mut c, &["SET", &format!("stable:{i}"), "1"]);
        ok(&mut c, &["SET", &format!("doomed:{i}"), "1"]);
    }
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    let mut step = 0;
    loop {
        let Value::Array(parts) = ok(&mut c, &["SCAN", &cursor, "COUNT", "15"]) else {
            panic!("bad SCAN reply");
        };
        let (Value::BulkString(next), Value::Array(keys)) = (&parts[0], &parts[1]) else {
            panic!("bad SCAN reply");
        };
        for k in keys {
            if let Value::BulkString(k) = k {
                seen.insert(String::from_utf8(k.clone()).unwrap());
            }
        }
        for j in 0..10 {
            ok(&mut other, &["SET", &format!("added:{step}:{j}"), "1"]);
            ok(&mut other, &["DEL", &format!("doomed:{}", step * 10 + j)]);
        }
        step += 1;
        assert!(step < 10_000);
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    for i in 0..300 {
        assert!(seen.contains(&format!("stable:{i}")), "stable:{i} missing");
    }
}

#[test]
fn scan_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(err(&mut c, &["SCAN", "abc"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["SCAN", " 1"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["SCAN", "1x"]), "ERR invalid cursor");
    assert_eq!(err(&mut c, &["SCAN", "-"]), "ERR invalid cursor");
    // strtoul semantics: a sign is accepted, "-1" wraps to the largest cursor.
    assert!(cmd(&mut c, &["SCAN", "-1"]).is_ok());
    assert!(cmd(&mut c, &["SCAN", "+0"]).is_ok());
    assert_eq!(
        err(&mut c, &["SCAN", "18446744073709551616"]),
        "ERR invalid cursor"
    );
    assert!(
        cmd(&mut c, &["SCAN", "18446744073709551615"]).is_ok(),
        "u64::MAX is a cursor"
    );
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "-1"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["SCAN", "0", "MATCH"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "TYPE"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "FOO", "bar"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SCAN"]),
        "ERR wrong number of arguments for 'scan' command"
    );
}

#[test]
fn randomkey() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(ok(&mut c, &["RANDOMKEY"]), Value::Nil);
    ok(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    let mut seen = HashSet::new();
    for _ in 0..50 {
        seen.insert(bulk(&mut c, &["RANDOMKEY"]).unwrap());
    }
    assert!(!seen.is_empty());
    for k in &seen {
        assert!([b"a".to_vec(), b"b".to_vec(), b"c".to_vec()].contains(k));
    }
    assert_eq!(
        err(&mut c, &["RANDOMKEY", "x"]),
        "ERR wrong number of arguments for 'randomkey' command"
    );
    let mut d = conn_db(&e, "5");
    assert_eq!(ok(&mut d, &["RANDOMKEY"]), Value::Nil);
}

#[test]
fn move_between_databases() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut d1 = conn_db(&e, "1");
    ok(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(int(&mut c, &["MOVE", "k", "1"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    assert_eq!(bulk(&mut d1, &["GET", "k"]), Some(b"v".to_vec()));
    assert!(int(&mut d1, &["TTL", "k"]) > 0, "TTL moves with the key");

    // Target exists: nothing moves.
    ok(&mut c, &["SET", "k", "src"]);
    assert_eq!(int(&mut c, &["MOVE", "k", "1"]), 0);
    assert_eq!(bulk(&mut c, &["GET", "k"]), Some(b"src".to_vec()));
    assert_eq!(bulk(&mut d1, &["GET", "k"]), Some(b"v".to_vec()));

    assert_eq!(int(&mut c, &["MOVE", "nokey", "1"]), 0);
    assert_eq!(err(&mut c, &["MOVE", "k", "0"]), SAME);
    assert_eq!(err(&mut c, &["MOVE", "nokey", "0"]), SAME);
    assert_eq!(err(&mut c, &["MOVE", "k", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["MOVE", "k", "-1"]), DB_RANGE);
    assert_eq!(err(&mut c, &["MOVE", "k", "abc"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["MOVE", "k", "99999999999"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(
        err(&mut c, &["MOVE", "k"]),
        "ERR wrong number of arguments for 'move' command"
    );
    // From a non-zero database back to 0.
    assert_eq!(int(&mut d1, &["MOVE", "k", "0"]), 0, "db0 already has k");
    ok(&mut d1, &["SET", "only1", "x"]);
    assert_eq!(int(&mut d1, &["MOVE", "only1", "0"]), 1);
    assert_eq!(bulk(&mut c, &["GET", "only1"]), Some(b"x".to_vec()));
}

#[test]
fn copy_within_and_across_databases() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut d1 = conn_db(&e, "1");
    ok(&mut c, &["SET", "a", "v", "EX", "100"]);
    assert_eq!(int(&mut c, &["COPY", "a", "b"]), 1);
    assert_eq!(bulk(&mut c, &["GET", "b"]), Some(b"v".to_vec()));
    let ttl = int(&mut c, &["TTL", "b"]);
    assert!((98..=100).contains(&ttl), "TTL is copied: {ttl}");
    ok(&mut c, &["APPEND", "b", "2"]);
    assert_eq!(
        bulk(&mut c, &["GET", "a"]),
        Some(b"v".to_vec()),
        "independent copies"
    );

    ok(&mut c, &["MSET", "x", "new", "y", "old"]);
    assert_eq!(int(&mut c, &["COPY", "x", "y"]), 0);
    assert_eq!(bulk(&mut c, &["GET", "y"]), Some(b"old".to_vec()));
    assert_eq!(int(&mut c, &["COPY", "x", "y", "REPLACE"]), 1);
    assert_eq!(bulk(&mut c, &["GET", "y"]), Some(b"new".to_vec()));
    // REPLACE of a volatile destination by a persistent source drops the TTL.
    ok(&mut c, &["SET", "vol", "1", "EX", "100"]);
    assert_eq!(int(&mut c, &["COPY", "x", "vol", "replace"]), 1);
    assert_eq!(int(&mut c, &["TTL", "vol"]), -1);

    assert_eq!(int(&mut c, &["COPY", "x", "x", "DB", "1"]), 1);
    assert_eq!(bulk(&mut d1, &["GET", "x"]), Some(b"new".to_vec()));
    ok(&mut c, &["SET", "x", "newer"]);
    assert_eq!(int(&mut c, &["COPY", "x", "x", "DB", "1"]), 0);
    assert_eq!(int(&mut c, &["COPY", "x", "x", "REPLACE", "DB", "1"]), 1);
    assert_eq!(bulk(&mut d1, &["GET", "x"]), Some(b"newer".to_vec()));
    assert_eq!(
        int(&mut c, &["COPY", "x", "x", "DB", "0", "DB", "2"]),
        1,
        "last DB wins"
    );

    assert_eq!(int(&mut c, &["COPY", "nokey", "z"]), 0);
    assert_eq!(err(&mut c, &["COPY", "a", "a"]), SAME);
    assert_eq!(err(&mut c, &["COPY", "a", "a", "DB", "0"]), SAME);
    assert_eq!(err(&mut c, &["COPY", "a", "b", "DB", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["COPY", "a", "b", "DB", "abc"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["COPY", "a", "b", "DB", "-99999999999"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(err(&mut c, &["COPY", "a", "b", "DB"]), SYNTAX);
    assert_eq!(err(&mut c, &["COPY", "a", "b", "FOO"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["COPY", "a"]),
        "ERR wrong number of arguments for 'copy' command"
    );
}

#[test]
fn touch_and_object_idletime() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["MSET", "a", "1", "b", "2"]);
    assert_eq!(int(&mut c, &["TOUCH", "a", "b", "nokey", "a"]), 3);
    assert_eq!(int(&mut c, &["TOUCH", "nokey"]), 0);
    assert_eq!(
        err(&mut c, &["TOUCH"]),
        "ERR wrong number of arguments for 'touch' command"
    );

    let idle = int(&mut c, &["OBJECT", "IDLETIME", "a"]);
    assert!((0..=1).contains(&idle), "{idle}");
    // OBJECT, TYPE, EXISTS and TTL do not touch the key, so its idle time grows...
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        ok(&mut c, &["TYPE", "a"]);
        ok(&mut c, &["EXISTS", "a"]);
        ok(&mut c, &["TTL", "a"]);
        if int(&mut c, &["OBJECT", "IDLETIME", "a"]) >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "idle time did not grow");
        std::thread::sleep(Duration::from_millis(100));
    }
    // ...and TOUCH (or GET) resets it.
    assert_eq!(int(&mut c, &["TOUCH", "a"]), 1);
    assert_eq!(int(&mut c, &["OBJECT", "IDLETIME", "a"]), 0);
}

#[test]
fn object_encoding_refcount_freq_help() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let long = "a".repeat(45);
    let emb = "a".repeat(44);
    for (v, enc) in [
        ("12345", "int"),
        ("-1", "int"),
        ("9223372036854775807", "int"),
        ("12345678901234567890", "embstr"),
        ("0123", "embstr"),
        ("hello", "embstr"),
        (emb.as_str(), "embstr"),
        (long.as_str(), "raw"),
    ] {
        ok(&mut c, &["SET", "k", v]);
        assert_eq!(
            bulk(&mut c, &["OBJECT", "ENCODING", "k"]),
            Some(enc.as_bytes().to_vec()),
            "{v}"
        );
    }
    ok(&mut c, &["SET", "k", "1"]);
    ok(&mut c, &["APPEND", "k", "2"]);
    assert_eq!(
        bulk(&mut c, &["object", "encoding", "k"]),
        Some(b"raw".to_vec())
    );

    for (v, rc) in [
        ("hello", 1),
        ("0", 2147483647),
        ("9999", 2147483647),
        ("10000", 1),
        ("-5", 1),
    ] {
        ok(&mut c, &["SET", "r", v]);
        assert_eq!(int(&mut c, &["OBJECT", "REFCOUNT", "r"]), rc, "{v}");
    }
    for sub in ["ENCODING", "IDLETIME", "REFCOUNT", "FREQ"] {
        assert_eq!(ok(&mut c, &["OBJECT", sub, "nokey"]), Value::Nil, "{sub}");
    }
    assert_eq!(
        err(&mut c, &["OBJECT", "FREQ", "k"]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );

    let Value::Array(lines) = ok(&mut c, &["OBJECT", "HELP"]) else {
        panic!("OBJECT HELP is not an array");
    };
    let lines: Vec<String> = lines
        .into_iter()
        .map(|l| match l {
            Value::SimpleString(s) => s,
            other => panic!("help line {other:?}"),
        })
        .collect();
    assert_eq!(
        lines[0],
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(lines.len(), 15, "same line count as Redis 7.2");
    for sub in [
        "ENCODING <key>",
        "FREQ <key>",
        "IDLETIME <key>",
        "REFCOUNT <key>",
        "HELP",
    ] {
        assert!(lines.iter().any(|l| l == sub), "{sub} missing");
    }
    assert_eq!(
        lines.last().map(String::as_str),
        Some("    Prints this help.")
    );

    assert_eq!(
        err(&mut c, &["OBJECT", "FOO", "k"]),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        err(&mut c, &["OBJECT"]),
        "ERR wrong number of arguments for 'object' command"
    );
}

#[test]
fn resp3_nulls() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    s.write_all(b"HELLO 3\r\nRANDOMKEY\r\nOBJECT ENCODING nokey\r\nTYPE nokey\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"+none\r\n") {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "connection closed");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"%7"), "{}", String::from_utf8_lossy(&got));
    assert!(
        got.ends_with(b"*0\r\n_\r\n_\r\n+none\r\n"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

#[test]
fn expired_keys_are_invisible_to_keyspace_commands() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "live", "1"]);
    ok(&mut c, &["SET", "dead", "1", "PX", "1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while int(&mut c, &["EXISTS", "dead"]) != 0 {
        assert!(Instant::now() < deadline, "key did not expire");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sorted(ok(&mut c, &["KEYS", "*"])), strs(&["live"]));
    assert_eq!(full_scan(&mut c, &[]).0, vec!["live".to_string()]);
    assert_eq!(
        ok(&mut c, &["TYPE", "dead"]),
        Value::SimpleString("none".into())
    );
    assert_eq!(err(&mut c, &["RENAME", "dead", "x"]), "ERR no such key");
    assert_eq!(int(&mut c, &["COPY", "dead", "x"]), 0);
    assert_eq!(int(&mut c, &["MOVE", "dead", "1"]), 0);
    assert_eq!(ok(&mut c, &["OBJECT", "ENCODING", "dead"]), Value::Nil);
    assert_eq!(bulk(&mut c, &["RANDOMKEY"]), Some(b"live".to_vec()));
}
