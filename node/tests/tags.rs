//! Key tags (TAG.SET TAG.DEL TAG.GET TAG.MEMBERS TAG.COUNT TAG.LIST TAG.DELKEYS, Ember only)
//! against the real binary: replies, errors, and tags following their key through DEL,
//! expiry, RENAME, MOVE, SWAPDB, FLUSHDB, overwrites and emptied collections.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{err, int, ok, Ember};
use redis::{Connection, Value};

/// The strings of an array reply, in reply order.
fn strs(v: Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("expected an array, got {v:?}");
    };
    items
        .into_iter()
        .map(|i| match i {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("expected a bulk string, got {other:?}"),
        })
        .collect()
}

/// The strings of an array reply, sorted.
fn sorted(v: Value) -> Vec<String> {
    let mut s = strs(v);
    s.sort();
    s
}

fn tags(c: &mut Connection, key: &str) -> Vec<String> {
    strs(ok(c, &["TAG.GET", key]))
}

fn members(c: &mut Connection, tag: &str) -> Vec<String> {
    sorted(ok(c, &["TAG.MEMBERS", tag]))
}

#[test]
fn set_get_del_and_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(err(&mut c, &["TAG.SET", "nokey", "t"]), "ERR no such key");
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["TAG.SET", "k", "b", "a", "b"]), 2);
    assert_eq!(int(&mut c, &["TAG.SET", "k", "a", "c"]), 1);
    assert_eq!(tags(&mut c, "k"), ["a", "b", "c"], "sorted bytewise");
    assert_eq!(int(&mut c, &["TAG.DEL", "k", "a", "zz"]), 1);
    assert_eq!(int(&mut c, &["TAG.DEL", "nokey", "a"]), 0);
    assert_eq!(tags(&mut c, "k"), ["b", "c"]);
    assert!(tags(&mut c, "nokey").is_empty());
    ok(&mut c, &["SET", "plain", "v"]);
    assert!(tags(&mut c, "plain").is_empty());
    // Binary-safe tags.
    let _: i64 = redis::cmd("TAG.SET")
        .arg("k")
        .arg(&b"\x00\xff"[..])
        .query(&mut c)
        .expect("binary tag");
    assert_eq!(int(&mut c, &["TAG.COUNT", "\u{0}\u{ff}"]), 0, "other bytes");
    let bin: Vec<Vec<u8>> = redis::cmd("TAG.GET").arg("k").query(&mut c).unwrap();
    assert_eq!(
        bin.first().map(Vec::as_slice),
        Some(&b"\x00\xff"[..]),
        "sorted bytewise"
    );

    let arity = |c: &mut Connection, args: &[&str]| {
        assert_eq!(
            err(c, args),
            format!(
                "ERR wrong number of arguments for '{}' command",
                args[0].to_lowercase()
            )
        );
    };
    arity(&mut c, &["TAG.SET", "k"]);
    arity(&mut c, &["TAG.DEL", "k"]);
    arity(&mut c, &["TAG.GET"]);
    arity(&mut c, &["TAG.GET", "k", "x"]);
    arity(&mut c, &["TAG.MEMBERS"]);
    arity(&mut c, &["TAG.COUNT"]);
    arity(&mut c, &["TAG.COUNT", "a", "b"]);
    arity(&mut c, &["TAG.LIST", "x"]);
    arity(&mut c, &["TAG.DELKEYS"]);
    arity(&mut c, &["TAG.DELKEYS", "a", "b"]);

    // TAG.SET on a key of any type; WRONGTYPE never applies.
    ok(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(int(&mut c, &["TAG.SET", "l", "b"]), 1);
    assert_eq!(members(&mut c, "b"), ["k", "l"]);
    assert_eq!(int(&mut c, &["TAG.COUNT", "b"]), 2);
    assert_eq!(int(&mut c, &["TAG.COUNT", "none"]), 0);
    assert!(members(&mut c, "none").is_empty());
    let list = strs(ok(&mut c, &["TAG.LIST"]));
    assert_eq!(list.len(), 3, "{list:?}");
    assert!(list.contains(&"b".to_string()) && list.contains(&"c".to_string()));
}

#[test]
fn command_info_flags_and_keys() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let keys = |c: &mut Connection, args: &[&str]| -> Vec<String> {
        let mut q = redis::cmd("COMMAND");
        q.arg("GETKEYS");
        for a in args {
            q.arg(*a);
        }
        q.query(c).unwrap_or_default()
    };
    assert_eq!(keys(&mut c, &["TAG.SET", "k", "t"]), ["k"]);
    assert_eq!(keys(&mut c, &["TAG.DEL", "k", "t"]), ["k"]);
    assert_eq!(keys(&mut c, &["TAG.GET", "k"]), ["k"]);
    let info = format!("{:?}", ok(&mut c, &["COMMAND", "INFO", "tag.delkeys"]));
    assert!(info.contains("write"), "{info}");
    let info = format!("{:?}", ok(&mut c, &["COMMAND", "INFO", "tag.members"]));
    assert!(info.contains("readonly"), "{info}");
}

#[test]
fn tags_go_with_deleted_keys_and_survive_overwrites() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for k in ["a", "b", "c", "d"] {
        ok(&mut c, &["SET", k, "v"]);
        int(&mut c, &["TAG.SET", k, "t"]);
    }
    assert_eq!(int(&mut c, &["DEL", "a"]), 1);
    assert_eq!(int(&mut c, &["UNLINK", "b"]), 1);
    assert_eq!(members(&mut c, "t"), ["c", "d"]);
    // Re-created keys start without tags.
    ok(&mut c, &["SET", "a", "v"]);
    assert!(tags(&mut c, "a").is_empty());
    // Overwriting keeps the tags (SET, a SET with another type's command after DEL is new).
    ok(&mut c, &["SET", "c", "new"]);
    ok(&mut c, &["SET", "c", "newer", "EX", "100"]);
    assert_eq!(tags(&mut c, "c"), ["t"]);
    // COPY does not copy tags; REPLACE onto a tagged key keeps the destination's.
    assert_eq!(int(&mut c, &["COPY", "c", "copy"]), 1);
    assert!(tags(&mut c, "copy").is_empty());
    int(&mut c, &["TAG.SET", "d", "dtag"]);
    assert_eq!(int(&mut c, &["COPY", "c", "d", "REPLACE"]), 1);
    assert_eq!(tags(&mut c, "d"), ["dtag", "t"]);
    // A collection emptied by its last removal takes its tags with it.
    ok(&mut c, &["SADD", "s", "m"]);
    int(&mut c, &["TAG.SET", "s", "t"]);
    assert_eq!(int(&mut c, &["SREM", "s", "m"]), 1);
    ok(&mut c, &["SADD", "s", "m"]);
    assert!(tags(&mut c, "s").is_empty());
    assert_eq!(members(&mut c, "t"), ["c", "d"]);
    // FLUSHDB and FLUSHALL drop every tag.
    ok(&mut c, &["FLUSHDB"]);
    assert!(strs(ok(&mut c, &["TAG.LIST"])).is_empty());
    ok(&mut c, &["SET", "c", "v"]);
    int(&mut c, &["TAG.SET", "c", "t"]);
    ok(&mut c, &["FLUSHALL", "ASYNC"]);
    assert_eq!(int(&mut c, &["TAG.COUNT", "t"]), 0);
}

#[test]
fn expiry_removes_tags() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for k in ["lazy", "active", "keep"] {
        ok(&mut c, &["SET", k, "v"]);
        int(&mut c, &["TAG.SET", k, "t", k]);
    }
    assert_eq!(int(&mut c, &["PEXPIRE", "lazy", "50"]), 1);
    assert_eq!(int(&mut c, &["PEXPIRE", "active", "50"]), 1);
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(members(&mut c, "t"), ["keep"]);
    assert_eq!(int(&mut c, &["TAG.COUNT", "t"]), 1);
    assert!(tags(&mut c, "lazy").is_empty());
    assert_eq!(sorted(ok(&mut c, &["TAG.LIST"])), ["keep", "t"]);
    // Re-creating the key does not bring the tags back.
    ok(&mut c, &["SET", "lazy", "v"]);
    assert!(tags(&mut c, "lazy").is_empty());
    // The active sweep reaps "active"; its tags do not come back with a new key either.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while int(&mut c, &["DBSIZE"]) != 2 {
        assert!(std::time::Instant::now() < deadline, "active expiry");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(&mut c, &["SET", "active", "v"]);
    assert!(tags(&mut c, "active").is_empty());
    assert_eq!(members(&mut c, "t"), ["keep"]);
}

#[test]
fn rename_move_and_swapdb_carry_tags() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "src", "v"]);
    ok(&mut c, &["SET", "dst", "v"]);
    int(&mut c, &["TAG.SET", "src", "s1", "s2"]);
    int(&mut c, &["TAG.SET", "dst", "d"]);
    ok(&mut c, &["RENAME", "src", "dst"]);
    assert_eq!(
        tags(&mut c, "dst"),
        ["s1", "s2"],
        "the old destination's are gone"
    );
    assert!(tags(&mut c, "src").is_empty());
    assert!(members(&mut c, "d").is_empty());
    assert_eq!(members(&mut c, "s1"), ["dst"]);
    assert_eq!(int(&mut c, &["RENAMENX", "dst", "nx"]), 1);
    assert_eq!(tags(&mut c, "nx"), ["s1", "s2"]);
    ok(&mut c, &["SET", "other", "v"]);
    assert_eq!(int(&mut c, &["RENAMENX", "nx", "other"]), 0);
    assert_eq!(tags(&mut c, "nx"), ["s1", "s2"]);
    assert!(tags(&mut c, "other").is_empty());

    assert_eq!(int(&mut c, &["MOVE", "nx", "1"]), 1);
    assert!(members(&mut c, "s1").is_empty());
    ok(&mut c, &["SELECT", "1"]);
    assert_eq!(tags(&mut c, "nx"), ["s1", "s2"]);
    assert_eq!(members(&mut c, "s1"), ["nx"]);
    ok(&mut c, &["SWAPDB", "0", "1"]);
    assert!(members(&mut c, "s1").is_empty());
    ok(&mut c, &["SELECT", "0"]);
    assert_eq!(members(&mut c, "s1"), ["nx"]);
    assert_eq!(tags(&mut c, "nx"), ["s1", "s2"]);
}

#[test]
fn delkeys_across_shards_and_watch() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut p = redis::pipe();
    for i in 0..5000u32 {
        let k = format!("key:{i}");
        p.cmd("SET").arg(&k).arg("v").ignore();
        p.cmd("TAG.SET").arg(&k).arg("bulk").ignore();
        if i.is_multiple_of(5) {
            p.cmd("TAG.SET").arg(&k).arg("fifth").ignore();
        }
    }
    let _: () = p.query(&mut c).expect("pipeline");
    ok(&mut c, &["SET", "untagged", "v"]);
    assert_eq!(int(&mut c, &["TAG.COUNT", "bulk"]), 5000);
    assert_eq!(int(&mut c, &["TAG.COUNT", "fifth"]), 1000);

    // A WATCHed key deleted by TAG.DELKEYS aborts the transaction.
    let mut w = e.conn();
    let _: () = redis::cmd("WATCH").arg("key:0").query(&mut w).unwrap();
    assert_eq!(int(&mut c, &["TAG.DELKEYS", "fifth"]), 1000);
    let r: Option<(String,)> = redis::pipe().atomic().set("x", "y").query(&mut w).unwrap();
    assert!(r.is_none(), "EXEC ran although key:0 was deleted");

    assert_eq!(int(&mut c, &["DBSIZE"]), 4001);
    assert_eq!(int(&mut c, &["TAG.COUNT", "bulk"]), 4000);
    assert_eq!(int(&mut c, &["EXISTS", "key:0", "key:5", "key:4995"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "key:1"]), 1);
    assert_eq!(int(&mut c, &["TAG.DELKEYS", "fifth"]), 0);
    assert_eq!(int(&mut c, &["TAG.DELKEYS", "bulk"]), 4000);
    assert_eq!(int(&mut c, &["DBSIZE"]), 1);
    assert!(strs(ok(&mut c, &["TAG.LIST"])).is_empty());
    // Only the client's database.
    ok(&mut c, &["SET", "k", "v"]);
    int(&mut c, &["TAG.SET", "k", "t"]);
    ok(&mut c, &["SELECT", "1"]);
    assert_eq!(int(&mut c, &["TAG.DELKEYS", "t"]), 0);
    ok(&mut c, &["SELECT", "0"]);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 1);
}

#[test]
fn members_cursor_returns_every_key() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut p = redis::pipe();
    for i in 0..3000u32 {
        let k = format!("m:{i}");
        p.cmd("SET").arg(&k).arg("v").ignore();
        if !i.is_multiple_of(3) {
            p.cmd("TAG.SET").arg(&k).arg("t").ignore();
        }
    }
    let _: () = p.query(&mut c).expect("pipeline");
    for count in [None, Some("1"), Some("100"), Some("100000")] {
        let mut seen = HashSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let mut args = vec!["TAG.MEMBERS", "t", "CURSOR", cursor.as_str()];
            if let Some(n) = count {
                args.extend(["COUNT", n]);
            }
            let Value::Array(mut page) = ok(&mut c, &args) else {
                panic!("not an array");
            };
            assert_eq!(page.len(), 2);
            let keys = strs(page.pop().unwrap());
            let Some(Value::BulkString(next)) = page.pop() else {
                panic!("cursor is not a bulk string");
            };
            seen.extend(keys);
            calls += 1;
            cursor = String::from_utf8(next).unwrap();
            if cursor == "0" {
                break;
            }
            assert!(calls < 100_000);
        }
        assert_eq!(seen.len(), 2000, "COUNT {count:?}");
        assert!((0..3000u32).all(|i| seen.contains(&format!("m:{i}")) != i.is_multiple_of(3)));
        if count == Some("100000") {
            assert_eq!(calls, 1);
        } else {
            assert!(calls > 1, "COUNT {count:?}: {calls} calls");
        }
    }
    assert_eq!(members(&mut c, "t").len(), 2000);
    // A cursor past the end ends the walk.
    let v = ok(&mut c, &["TAG.MEMBERS", "t", "CURSOR", "99999999"]);
    assert_eq!(
        format!("{v:?}"),
        format!("{:?}", ok(&mut c, &["TAG.MEMBERS", "none", "CURSOR", "0"]))
    );

    // Errors as SSCAN's.
    assert_eq!(
        err(&mut c, &["TAG.MEMBERS", "t", "CURSOR", "x"]),
        "ERR invalid cursor"
    );
    assert_eq!(
        err(&mut c, &["TAG.MEMBERS", "t", "CURSOR", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["TAG.MEMBERS", "t", "CURSOR", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["TAG.MEMBERS", "t", "CURSOR", "0", "COUNT"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["TAG.MEMBERS", "t", "CURSOR"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut c, &["TAG.MEMBERS", "t", "x"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["TAG.MEMBERS", "t", "CURSOR", "0", "MATCH", "*"]),
        "ERR syntax error"
    );
}
