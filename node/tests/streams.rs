//! Integration tests for the stream commands (XADD ... XINFO), including blocking XREAD and
//! XREADGROUP woken by writes from other connections.

mod common;

use std::time::{Duration, Instant};

use common::{cmd, err, int, ok, Ember};
use redis::Value;

fn bulk(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        v => panic!("expected a string, got {v:?}"),
    }
}

fn arr(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        v => panic!("expected an array, got {v:?}"),
    }
}

/// Ids of an entry list `[[id, [f, v...]], ...]`.
fn ids(v: &Value) -> Vec<String> {
    arr(v).iter().map(|e| bulk(&arr(e)[0])).collect()
}

#[test]
fn xadd_ids_and_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(bulk(&ok(&mut c, &["XADD", "s", "1-1", "a", "1"])), "1-1");
    assert_eq!(bulk(&ok(&mut c, &["XADD", "s", "1-*", "b", "2"])), "1-2");
    assert_eq!(bulk(&ok(&mut c, &["XADD", "s", "5", "c", "3"])), "5-0");
    assert!(err(&mut c, &["XADD", "s", "5-0", "a", "1"])
        .contains("equal or smaller than the target stream top item"));
    assert!(err(&mut c, &["XADD", "s2", "0-0", "a", "1"]).contains("must be greater than 0-0"));
    assert_eq!(int(&mut c, &["EXISTS", "s2"]), 0);
    assert!(err(&mut c, &["XADD", "s", "abc", "a", "1"])
        .contains("Invalid stream ID specified as stream command argument"));
    assert!(err(&mut c, &["XADD", "s", "-", "a", "1"]).contains("Invalid stream ID"));
    assert!(err(&mut c, &["XADD", "s", "*", "a"]).contains("wrong number of arguments for 'xadd'"));
    // An auto id is at least now and greater than the last one.
    let id = bulk(&ok(&mut c, &["XADD", "s", "*", "x", "y"]));
    let ms: u64 = id.split('-').next().unwrap_or("0").parse().unwrap_or(0);
    assert!(ms > 1_600_000_000_000);
    assert_eq!(
        ok(&mut c, &["XADD", "nos", "NOMKSTREAM", "*", "a", "1"]),
        Value::Nil
    );
    assert_eq!(int(&mut c, &["EXISTS", "nos"]), 0);
    assert_eq!(int(&mut c, &["XLEN", "s"]), 4);
    assert_eq!(int(&mut c, &["XLEN", "missing"]), 0);
    ok(&mut c, &["SET", "str", "x"]);
    assert!(err(&mut c, &["XADD", "str", "*", "a", "1"]).starts_with("WRONGTYPE"));
    assert!(err(&mut c, &["XLEN", "str"]).starts_with("WRONGTYPE"));
    assert_eq!(bulk(&ok(&mut c, &["TYPE", "s"])), "stream");
    assert_eq!(bulk(&ok(&mut c, &["OBJECT", "ENCODING", "s"])), "stream");
}

#[test]
fn xadd_trimming() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for i in 1..=10 {
        let id = format!("{i}-0");
        ok(&mut c, &["XADD", "s", "MAXLEN", "5", &id, "f", "v"]);
    }
    assert_eq!(int(&mut c, &["XLEN", "s"]), 5);
    ok(&mut c, &["XADD", "s", "MINID", "=", "9", "11-0", "f", "v"]);
    assert_eq!(
        ids(&ok(&mut c, &["XRANGE", "s", "-", "+"])),
        ["9-0", "10-0", "11-0"]
    );
    assert!(err(
        &mut c,
        &["XADD", "s", "MAXLEN", "1", "LIMIT", "1", "*", "f", "v"]
    )
    .contains("LIMIT cannot be used without the special ~ option"));
    assert!(err(
        &mut c,
        &["XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v"]
    )
    .contains("MAXLEN and MINID options at the same time are not compatible"));
    assert!(err(&mut c, &["XADD", "s", "MAXLEN", "-1", "*", "f", "v"])
        .contains("The MAXLEN argument must be >= 0."));
    // Approximate trimming only drops whole nodes of 100 entries.
    for i in 1..=250 {
        let id = format!("{i}-0");
        ok(&mut c, &["XADD", "big", &id, "f", "v"]);
    }
    assert_eq!(int(&mut c, &["XTRIM", "big", "MAXLEN", "~", "120"]), 100);
    assert_eq!(int(&mut c, &["XLEN", "big"]), 150);
    assert_eq!(int(&mut c, &["XTRIM", "big", "MAXLEN", "120"]), 30);
    assert_eq!(int(&mut c, &["XTRIM", "big", "MINID", "240"]), 109);
    assert_eq!(int(&mut c, &["XLEN", "big"]), 11);
    assert_eq!(int(&mut c, &["XTRIM", "nokey", "MAXLEN", "0"]), 0);
    assert!(err(&mut c, &["XTRIM", "big", "FOO", "1"]).contains("syntax error"));
    assert!(err(&mut c, &["XTRIM", "big", "LIMIT", "10"]).contains("syntax error"));
    // A stream emptied by trimming is kept.
    assert_eq!(int(&mut c, &["XTRIM", "big", "MAXLEN", "0"]), 11);
    assert_eq!(int(&mut c, &["EXISTS", "big"]), 1);
}

#[test]
fn xrange_xrevrange_xdel() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for i in 1..=5 {
        let id = format!("{i}-1");
        ok(&mut c, &["XADD", "s", &id, "k", &i.to_string()]);
    }
    let all = ok(&mut c, &["XRANGE", "s", "-", "+"]);
    assert_eq!(ids(&all), ["1-1", "2-1", "3-1", "4-1", "5-1"]);
    let first = &arr(&all)[0];
    assert_eq!(bulk(&arr(&arr(first)[1])[1]), "1");
    assert_eq!(
        ids(&ok(&mut c, &["XRANGE", "s", "(1-1", "3"])),
        ["2-1", "3-1"]
    );
    assert_eq!(
        ids(&ok(&mut c, &["XRANGE", "s", "2", "(4-1", "COUNT", "5"])),
        ["2-1", "3-1"]
    );
    assert_eq!(
        ids(&ok(&mut c, &["XREVRANGE", "s", "+", "-", "COUNT", "2"])),
        ["5-1", "4-1"]
    );
    assert_eq!(
        ok(&mut c, &["XRANGE", "s", "-", "+", "COUNT", "0"]),
        Value::Nil
    );
    assert_eq!(
        ids(&ok(&mut c, &["XRANGE", "missing", "-", "+"])),
        Vec::<String>::new()
    );
    assert!(err(&mut c, &["XRANGE", "s", "(-", "+"]).contains("Invalid stream ID"));
    assert!(err(&mut c, &["XRANGE", "s", "-", "(0-0"]).contains("invalid end ID for the interval"));
    assert!(err(&mut c, &["XRANGE", "s", "-", "+", "FOO"]).contains("syntax error"));
    assert_eq!(int(&mut c, &["XDEL", "s", "2-1", "4-1", "9-9"]), 2);
    assert_eq!(
        ids(&ok(&mut c, &["XRANGE", "s", "-", "+"])),
        ["1-1", "3-1", "5-1"]
    );
    assert!(err(&mut c, &["XDEL", "s", "abc"]).contains("Invalid stream ID"));
    assert_eq!(int(&mut c, &["XDEL", "s", "1-1", "3-1", "5-1"]), 3);
    assert_eq!(int(&mut c, &["XLEN", "s"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "s"]), 1);
}

#[test]
fn groups_pending_claim() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for i in 1..=4 {
        let id = format!("{i}-0");
        ok(&mut c, &["XADD", "s", &id, "f", "v"]);
    }
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    assert!(err(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]).starts_with("BUSYGROUP"));
    assert!(
        err(&mut c, &["XGROUP", "CREATE", "nokey", "g", "0"]).contains("requires the key to exist")
    );
    ok(
        &mut c,
        &["XGROUP", "CREATE", "newkey", "g", "$", "MKSTREAM"],
    );
    assert_eq!(int(&mut c, &["XLEN", "newkey"]), 0);
    let r = ok(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    assert_eq!(bulk(&arr(&arr(&r)[0])[0]), "s");
    assert_eq!(ids(&arr(&arr(&r)[0])[1]), ["1-0", "2-0"]);
    let r = ok(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"],
    );
    assert_eq!(ids(&arr(&arr(&r)[0])[1]), ["3-0", "4-0"]);
    // Nothing new: a null array.
    assert_eq!(
        ok(
            &mut c,
            &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]
        ),
        Value::Nil
    );
    // History of a consumer.
    let r = ok(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
    );
    assert_eq!(ids(&arr(&arr(&r)[0])[1]), ["1-0", "2-0"]);
    let summary = ok(&mut c, &["XPENDING", "s", "g"]);
    let s = arr(&summary);
    assert_eq!(s[0], Value::Int(4));
    assert_eq!(bulk(&s[1]), "1-0");
    assert_eq!(bulk(&s[2]), "4-0");
    let ext = ok(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "alice"]);
    let rows = arr(&ext);
    assert_eq!(rows.len(), 2);
    assert_eq!(bulk(&arr(&rows[0])[1]), "alice");
    assert_eq!(arr(&rows[0])[3], Value::Int(2)); // delivered twice (history read)
    assert_eq!(int(&mut c, &["XACK", "s", "g", "1-0", "9-9"]), 1);
    assert_eq!(int(&mut c, &["XACK", "s", "nogroup", "2-0"]), 0);
    // XCLAIM moves ownership.
    let r = ok(&mut c, &["XCLAIM", "s", "g", "bob", "0", "2-0", "JUSTID"]);
    assert_eq!(bulk(&arr(&r)[0]), "2-0");
    let r = ok(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "bob"]);
    assert_eq!(arr(&r).len(), 3);
    // XAUTOCLAIM with a deleted entry reports it in the third element.
    assert_eq!(int(&mut c, &["XDEL", "s", "3-0"]), 1);
    let r = ok(
        &mut c,
        &["XAUTOCLAIM", "s", "g", "carol", "0", "0", "JUSTID"],
    );
    let parts = arr(&r);
    assert_eq!(bulk(&parts[0]), "0-0");
    let claimed: Vec<String> = arr(&parts[1]).iter().map(bulk).collect();
    assert_eq!(claimed, ["2-0", "4-0"]);
    let deleted: Vec<String> = arr(&parts[2]).iter().map(bulk).collect();
    assert_eq!(deleted, ["3-0"]);
    assert!(err(&mut c, &["XCLAIM", "s", "nogroup", "x", "0", "1-0"]).starts_with("NOGROUP"));
    assert!(err(
        &mut c,
        &["XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT", "0"]
    )
    .contains("COUNT must be > 0"));
    // Consumers and groups management.
    assert_eq!(
        int(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "dave"]),
        1
    );
    assert_eq!(
        int(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "dave"]),
        0
    );
    assert_eq!(
        int(&mut c, &["XGROUP", "DELCONSUMER", "s", "g", "carol"]),
        2
    );
    let r = ok(&mut c, &["XPENDING", "s", "g"]);
    assert_eq!(arr(&r)[0], Value::Int(0));
    ok(
        &mut c,
        &["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"],
    );
    let r = ok(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s", ">"],
    );
    assert_eq!(ids(&arr(&arr(&r)[0])[1]), ["1-0", "2-0", "4-0"]);
    assert_eq!(int(&mut c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    assert_eq!(int(&mut c, &["XGROUP", "DESTROY", "s", "g"]), 0);
    assert!(err(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "x", "STREAMS", "s", ">"]
    )
    .starts_with("NOGROUP"));
    assert!(err(&mut c, &["XGROUP", "FOO"]).contains("unknown subcommand"));
}

#[test]
fn xinfo_and_xsetid() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["XADD", "s", "1-0", "a", "1"]);
    ok(&mut c, &["XADD", "s", "2-0", "b", "2"]);
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let info = ok(&mut c, &["XINFO", "STREAM", "s"]);
    let m = arr(&info);
    let get = |name: &str| {
        let i = m
            .iter()
            .position(|v| matches!(v, Value::BulkString(b) if b == name.as_bytes()));
        m[i.expect("field") + 1].clone()
    };
    assert_eq!(get("length"), Value::Int(2));
    assert_eq!(bulk(&get("last-generated-id")), "2-0");
    assert_eq!(get("entries-added"), Value::Int(2));
    assert_eq!(get("groups"), Value::Int(1));
    assert_eq!(bulk(&arr(&get("first-entry"))[0]), "1-0");
    let groups = ok(&mut c, &["XINFO", "GROUPS", "s"]);
    let g = arr(&arr(&groups)[0]);
    assert_eq!(bulk(&g[1]), "g");
    assert_eq!(g[11], Value::Int(2)); // lag
    ok(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let cons = ok(&mut c, &["XINFO", "CONSUMERS", "s", "g"]);
    let c0 = arr(&arr(&cons)[0]);
    assert_eq!(bulk(&c0[1]), "c");
    assert_eq!(c0[3], Value::Int(1));
    let full = ok(&mut c, &["XINFO", "STREAM", "s", "FULL", "COUNT", "1"]);
    assert_eq!(arr(&full).len(), 18);
    assert!(err(&mut c, &["XINFO", "STREAM", "nokey"]).contains("no such key"));
    assert!(err(&mut c, &["XINFO", "CONSUMERS", "s", "nog"]).starts_with("NOGROUP"));
    ok(
        &mut c,
        &[
            "XSETID",
            "s",
            "10-0",
            "ENTRIESADDED",
            "20",
            "MAXDELETEDID",
            "5-0",
        ],
    );
    assert_eq!(bulk(&ok(&mut c, &["XADD", "s", "10-*", "c", "3"])), "10-1");
    assert!(err(&mut c, &["XSETID", "s", "1-0"]).contains("smaller than"));
    assert!(err(&mut c, &["XSETID", "nokey", "1-0"]).contains("no such key"));
}

#[test]
fn xread_basic_and_resp3() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["XADD", "a", "1-0", "f", "1"]);
    ok(&mut c, &["XADD", "b", "2-0", "f", "2"]);
    let r = ok(
        &mut c,
        &["XREAD", "COUNT", "10", "STREAMS", "a", "b", "0", "0"],
    );
    assert_eq!(arr(&r).len(), 2);
    assert_eq!(ok(&mut c, &["XREAD", "STREAMS", "a", "$"]), Value::Nil);
    assert!(err(&mut c, &["XREAD", "STREAMS", "a", "b", "0"]).contains("Unbalanced"));
    assert!(
        err(&mut c, &["XREAD", "BLOCK", "-1", "STREAMS", "a", "0"]).contains("timeout is negative")
    );
    // RESP3: a map of stream name to entries.
    let mut raw = e.raw();
    let out = common::raw_roundtrip(&mut raw, b"HELLO 3\r\n", 10);
    assert!(out.starts_with(b"%"));
    let mut out = Vec::new();
    use std::io::{Read, Write};
    raw.write_all(b"XREAD STREAMS a 0\r\n").expect("write");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 4096];
    while !out.ends_with(b"$1\r\n1\r\n") && Instant::now() < deadline {
        let n = raw.read(&mut buf).unwrap_or(0);
        out.extend_from_slice(&buf[..n]);
    }
    let s = String::from_utf8_lossy(&out);
    assert!(s.contains("%1\r\n$1\r\na\r\n*1\r\n*2\r\n$3\r\n1-0"), "{s}");
}

#[test]
fn xread_block_woken_by_xadd() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["XADD", "s", "1-0", "f", "old"]);
    let client = e.client();
    let t = std::thread::spawn(move || {
        let mut w = client.get_connection().expect("connect");
        std::thread::sleep(Duration::from_millis(200));
        ok(&mut w, &["XADD", "s", "2-0", "f", "new"]);
    });
    let start = Instant::now();
    let r = ok(&mut c, &["XREAD", "BLOCK", "5000", "STREAMS", "s", "$"]);
    t.join().expect("thread");
    assert!(start.elapsed() < Duration::from_secs(4));
    let entries = &arr(&arr(&r)[0])[1];
    assert_eq!(ids(entries), ["2-0"]);
    // Timeout gives a null array.
    let start = Instant::now();
    assert_eq!(
        ok(&mut c, &["XREAD", "BLOCK", "100", "STREAMS", "s", "$"]),
        Value::Nil
    );
    assert!(start.elapsed() >= Duration::from_millis(90));
    // A missing stream with `$` waits for its creation.
    let client = e.client();
    let t = std::thread::spawn(move || {
        let mut w = client.get_connection().expect("connect");
        std::thread::sleep(Duration::from_millis(150));
        ok(&mut w, &["XADD", "fresh", "7-0", "f", "v"]);
    });
    let r = ok(&mut c, &["XREAD", "BLOCK", "0", "STREAMS", "fresh", "$"]);
    t.join().expect("thread");
    assert_eq!(ids(&arr(&arr(&r)[0])[1]), ["7-0"]);
}

#[test]
fn xreadgroup_block_two_consumers() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let spawn_reader = |name: &'static str| {
        let client = e.client();
        std::thread::spawn(move || {
            let mut r = client.get_connection().expect("connect");
            let v = ok(
                &mut r,
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    name,
                    "COUNT",
                    "1",
                    "BLOCK",
                    "5000",
                    "STREAMS",
                    "s",
                    ">",
                ],
            );
            ids(&arr(&arr(&v)[0])[1])
        })
    };
    let a = spawn_reader("c1");
    let b = spawn_reader("c2");
    std::thread::sleep(Duration::from_millis(300));
    ok(&mut c, &["XADD", "s", "1-0", "f", "v"]);
    ok(&mut c, &["XADD", "s", "2-0", "f", "v"]);
    let mut got = a.join().expect("a");
    got.extend(b.join().expect("b"));
    got.sort();
    assert_eq!(got, ["1-0", "2-0"]);
    let r = ok(&mut c, &["XPENDING", "s", "g"]);
    assert_eq!(arr(&r)[0], Value::Int(2));
    assert_eq!(arr(&arr(&r)[3]).len(), 2);
}

#[test]
fn xreadgroup_block_errors_when_stream_deleted() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let client = e.client();
    let t = std::thread::spawn(move || {
        let mut w = client.get_connection().expect("connect");
        std::thread::sleep(Duration::from_millis(200));
        ok(&mut w, &["DEL", "s"]);
    });
    let msg = err(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "5000",
            "STREAMS",
            "s",
            ">",
        ],
    );
    t.join().expect("thread");
    assert!(msg.contains("no longer exists"), "{msg}");
    // Group destroyed while blocked: NOGROUP.
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let client = e.client();
    let t = std::thread::spawn(move || {
        let mut w = client.get_connection().expect("connect");
        std::thread::sleep(Duration::from_millis(200));
        ok(&mut w, &["XGROUP", "DESTROY", "s", "g"]);
    });
    let msg = err(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "5000",
            "STREAMS",
            "s",
            ">",
        ],
    );
    t.join().expect("thread");
    assert!(msg.starts_with("NOGROUP"), "{msg}");
    // Inside MULTI, BLOCK does not block.
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    let r = ok(&mut c, &["EXEC"]);
    assert_eq!(arr(&r)[0], Value::Nil);
    let _ = cmd(&mut c, &["PING"]);
}
