//! String commands against the real binary: every option, reply shape and error text.

mod common;

use std::time::{Duration, Instant};

use common::{err, ok as q, raw_roundtrip, Ember};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    match q(c, &["PTTL", key]) {
        Value::Int(i) => i,
        v => panic!("PTTL gave {v:?}"),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Polls until `key` is gone (generous: expiry is only checked, never timed).
fn wait_gone(c: &mut redis::Connection, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while q(c, &["GET", key]) != Value::Nil {
        assert!(Instant::now() < deadline, "{key} never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn info_stat(c: &mut redis::Connection, field: &str) -> i64 {
    let Value::BulkString(text) = q(c, &["INFO", "stats"]) else {
        panic!("INFO is not a bulk string")
    };
    let text = String::from_utf8(text).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO"))
}

#[test]
fn get_set_basics_and_binary_values() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "k", "v"]), Value::Okay);
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("v"));
    assert_eq!(q(&mut c, &["SET", "k", "v2"]), Value::Okay);
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("v2"));
    assert_eq!(q(&mut c, &["SET", "empty", ""]), Value::Okay);
    assert_eq!(q(&mut c, &["GET", "empty"]), bulk(""));

    let blob: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let key = b"\x00key\xff\r\n".to_vec();
    let r: Value = redis::cmd("SET")
        .arg(&key)
        .arg(&blob)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, Value::Okay);
    let r: Value = redis::cmd("GET").arg(&key).query(&mut c).unwrap();
    assert_eq!(r, Value::BulkString(blob));

    assert_eq!(
        err(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(&mut c, &["GET", "a", "b"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(&mut c, &["SET", "k"]),
        "ERR wrong number of arguments for 'set' command"
    );
}

#[test]
fn set_nx_xx_get_keepttl() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["SET", "k", "v1", "XX"]), Value::Nil);
    assert_eq!(q(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "k", "v1", "NX"]), Value::Okay);
    assert_eq!(q(&mut c, &["SET", "k", "v2", "NX"]), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "k", "v3", "XX"]), Value::Okay);
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("v3"));

    // GET returns the old value, alone or with NX/XX (Redis 7).
    assert_eq!(q(&mut c, &["SET", "g", "a", "GET"]), Value::Nil);
    assert_eq!(q(&mut c, &["SET", "g", "b", "GET"]), bulk("a"));
    assert_eq!(q(&mut c, &["SET", "g", "c", "XX", "GET"]), bulk("b"));
    assert_eq!(q(&mut c, &["SET", "g", "d", "NX", "GET"]), bulk("c"));
    assert_eq!(q(&mut c, &["GET", "g"]), bulk("c"), "NX aborted the write");
    assert_eq!(q(&mut c, &["SET", "new", "x", "NX", "GET"]), Value::Nil);
    assert_eq!(q(&mut c, &["GET", "new"]), bulk("x"));
    assert_eq!(q(&mut c, &["SET", "missing", "x", "XX", "GET"]), Value::Nil);
    assert_eq!(q(&mut c, &["GET", "missing"]), Value::Nil);
    assert_eq!(
        q(&mut c, &["SET", "g", "e", "get", "GET"]),
        bulk("c"),
        "GET may repeat"
    );

    // Without KEEPTTL a SET drops the TTL; with it the TTL stays.
    assert_eq!(q(&mut c, &["SET", "t", "v", "EX", "100"]), Value::Okay);
    assert_eq!(q(&mut c, &["SET", "t", "v2", "KEEPTTL"]), Value::Okay);
    assert!((98_000..=100_000).contains(&pttl(&mut c, "t")));
    assert_eq!(q(&mut c, &["SET", "t", "v3", "KEEPTTL", "GET"]), bulk("v2"));
    assert!(pttl(&mut c, "t") > 0);
    assert_eq!(q(&mut c, &["SET", "t", "v4"]), Value::Okay);
    assert_eq!(pttl(&mut c, "t"), -1);
    assert_eq!(q(&mut c, &["SET", "nottl", "v", "KEEPTTL"]), Value::Okay);
    assert_eq!(pttl(&mut c, "nottl"), -1);

    // Options are case-insensitive.
    assert_eq!(
        q(&mut c, &["set", "ci", "v", "ex", "100", "nx"]),
        Value::Okay
    );
    assert_eq!(q(&mut c, &["SeT", "ci", "w", "xX", "Get"]), bulk("v"));
}

#[test]
fn set_expire_options() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["SET", "ex", "v", "EX", "100"]), Value::Okay);
    assert!((98_000..=100_000).contains(&pttl(&mut c, "ex")));
    assert_eq!(q(&mut c, &["SET", "px", "v", "PX", "50000"]), Value::Okay);
    assert!((48_000..=50_000).contains(&pttl(&mut c, "px")));
    let at = now_ms() + 300_000;
    assert_eq!(
        q(&mut c, &["SET", "pxat", "v", "PXAT", &at.to_string()]),
        Value::Okay
    );
    assert_eq!(q(&mut c, &["PEXPIRETIME", "pxat"]), int(at));
    let at_s = now_ms() / 1000 + 400;
    assert_eq!(
        q(&mut c, &["SET", "exat", "v", "EXAT", &at_s.to_string()]),
        Value::Okay
    );
    assert_eq!(q(&mut c, &["PEXPIRETIME", "exat"]), int(at_s * 1000));
    // The last of repeated EX options wins.
    assert_eq!(
        q(&mut c, &["SET", "twice", "v", "EX", "10", "EX", "1000"]),
        Value::Okay
    );
    assert!(pttl(&mut c, "twice") > 900_000);

    // An absolute time in the past sets nothing visible.
    assert_eq!(q(&mut c, &["SET", "past", "v"]), Value::Okay);
    assert_eq!(q(&mut c, &["SET", "past", "v", "EXAT", "1"]), Value::Okay);
    assert_eq!(q(&mut c, &["GET", "past"]), Value::Nil);
    assert_eq!(
        q(&mut c, &["SET", "past2", "v", "PXAT", "1", "GET"]),
        Value::Nil
    );
    assert_eq!(q(&mut c, &["GET", "past2"]), Value::Nil);

    // A short PX really expires.
    assert_eq!(q(&mut c, &["SET", "short", "v", "PX", "50"]), Value::Okay);
    wait_gone(&mut c, "short");
}

#[test]
fn set_option_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "k", "orig"]);
    let syntax: &[&[&str]] = &[
        &["NX", "XX"],
        &["XX", "NX"],
        &["EX", "10", "PX", "100"],
        &["EX", "10", "KEEPTTL"],
        &["KEEPTTL", "PX", "100"],
        &["EX", "10", "PXAT", "1"],
        &["EXAT", "10", "PXAT", "1"],
        &["FOO"],
        &["EX"],
        &["PX"],
        &["PERSIST"],
        &["EX", "abc", "NX", "XX"],
    ];
    for opts in syntax {
        let mut args = vec!["SET", "k", "v"];
        args.extend_from_slice(opts);
        assert_eq!(err(&mut c, &args), "ERR syntax error", "{opts:?}");
    }
    let invalid: &[&[&str]] = &[
        &["EX", "0"],
        &["EX", "-1"],
        &["PX", "0"],
        &["PX", "-5"],
        &["EXAT", "0"],
        &["PXAT", "0"],
        &["EXAT", "-1"],
        &["EX", "9999999999999999"],
        &["PX", "9223372036854775807"],
    ];
    for opts in invalid {
        let mut args = vec!["SET", "k", "v"];
        args.extend_from_slice(opts);
        assert_eq!(
            err(&mut c, &args),
            "ERR invalid expire time in 'set' command",
            "{opts:?}"
        );
    }
    for opts in [
        ["EX", "abc"],
        ["PX", "1.5"],
        ["EXAT", "x"],
        ["EX", "99999999999999999999"],
    ] {
        let mut args = vec!["SET", "k", "v"];
        args.extend_from_slice(&opts);
        assert_eq!(
            err(&mut c, &args),
            "ERR value is not an integer or out of range",
            "{opts:?}"
        );
    }
    assert_eq!(
        q(&mut c, &["GET", "k"]),
        bulk("orig"),
        "failed SETs change nothing"
    );
    assert_eq!(pttl(&mut c, "k"), -1);
}

#[test]
fn setnx_setex_psetex() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["SETNX", "k", "1"]), int(1));
    assert_eq!(q(&mut c, &["SETNX", "k", "2"]), int(0));
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("1"));

    assert_eq!(q(&mut c, &["SETEX", "s", "100", "v"]), Value::Okay);
    assert_eq!(q(&mut c, &["GET", "s"]), bulk("v"));
    assert!((98_000..=100_000).contains(&pttl(&mut c, "s")));
    assert_eq!(q(&mut c, &["PSETEX", "p", "100000", "v"]), Value::Okay);
    assert!((98_000..=100_000).contains(&pttl(&mut c, "p")));

    for (cmd, ttl) in [
        ("SETEX", "0"),
        ("SETEX", "-1"),
        ("PSETEX", "0"),
        ("PSETEX", "-10"),
        ("SETEX", "9223372036854775807"),
    ] {
        let text = err(&mut c, &[cmd, "x", ttl, "v"]);
        assert_eq!(
            text,
            format!(
                "ERR invalid expire time in '{}' command",
                cmd.to_lowercase()
            )
        );
    }
    assert_eq!(
        err(&mut c, &["SETEX", "x", "abc", "v"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["PSETEX", "x", "1.5", "v"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["SETEX", "x", "10"]),
        "ERR wrong number of arguments for 'setex' command"
    );
    assert_eq!(q(&mut c, &["GET", "x"]), Value::Nil);
}

#[test]
fn getset_getdel_getex() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["GETSET", "k", "1"]), Value::Nil);
    assert_eq!(q(&mut c, &["GETSET", "k", "2"]), bulk("1"));
    q(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(q(&mut c, &["GETSET", "k", "w"]), bulk("v"));
    assert_eq!(pttl(&mut c, "k"), -1, "GETSET drops the TTL");

    assert_eq!(q(&mut c, &["GETDEL", "k"]), bulk("w"));
    assert_eq!(q(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(q(&mut c, &["GETDEL", "k"]), Value::Nil);

    q(&mut c, &["SET", "g", "v"]);
    assert_eq!(q(&mut c, &["GETEX", "g"]), bulk("v"));
    assert_eq!(pttl(&mut c, "g"), -1);
    assert_eq!(q(&mut c, &["GETEX", "g", "EX", "100"]), bulk("v"));
    assert!((98_000..=100_000).contains(&pttl(&mut c, "g")));
    assert_eq!(q(&mut c, &["GETEX", "g", "PX", "50000"]), bulk("v"));
    assert!((48_000..=50_000).contains(&pttl(&mut c, "g")));
    let at = now_ms() / 1000 + 300;
    assert_eq!(
        q(&mut c, &["GETEX", "g", "EXAT", &at.to_string()]),
        bulk("v")
    );
    assert_eq!(q(&mut c, &["PEXPIRETIME", "g"]), int(at * 1000));
    assert_eq!(
        q(
            &mut c,
            &["GETEX", "g", "PXAT", &(at * 1000 + 5).to_string()]
        ),
        bulk("v")
    );
    assert_eq!(q(&mut c, &["PEXPIRETIME", "g"]), int(at * 1000 + 5));
    assert_eq!(q(&mut c, &["GETEX", "g", "persist"]), bulk("v"));
    assert_eq!(pttl(&mut c, "g"), -1);

    // Missing keys: nil, nothing created, and the expire argument is not even checked.
    assert_eq!(q(&mut c, &["GETEX", "nokey", "EX", "10"]), Value::Nil);
    assert_eq!(q(&mut c, &["GETEX", "nokey", "EX", "abc"]), Value::Nil);
    assert_eq!(q(&mut c, &["GET", "nokey"]), Value::Nil);

    // A past absolute time deletes the key after replying.
    assert_eq!(q(&mut c, &["GETEX", "g", "EXAT", "1"]), bulk("v"));
    assert_eq!(q(&mut c, &["GET", "g"]), Value::Nil);

    q(&mut c, &["SET", "g", "v"]);
    for opts in [
        &["EX", "0"][..],
        &["PX", "-1"],
        &["EXAT", "-1"],
        &["EX", "9223372036854775807"],
    ] {
        let mut args = vec!["GETEX", "g"];
        args.extend_from_slice(opts);
        assert_eq!(
            err(&mut c, &args),
            "ERR invalid expire time in 'getex' command",
            "{opts:?}"
        );
    }
    for opts in [
        &["PERSIST", "EX", "10"][..],
        &["EX", "10", "PX", "10"],
        &["FOO"],
        &["EX"],
        &["NX"],
        &["KEEPTTL"],
        &["GET"],
    ] {
        let mut args = vec!["GETEX", "g"];
        args.extend_from_slice(opts);
        assert_eq!(err(&mut c, &args), "ERR syntax error", "{opts:?}");
    }
    assert_eq!(
        err(&mut c, &["GETEX", "g", "EX", "abc"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(pttl(&mut c, "g"), -1);
}

#[test]
fn mget_mset_msetnx() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(
        q(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]),
        Value::Okay
    );
    assert_eq!(
        q(&mut c, &["MGET", "a", "nokey", "c", "b", "a"]),
        Value::Array(vec![bulk("1"), Value::Nil, bulk("3"), bulk("2"), bulk("1")])
    );
    q(&mut c, &["MSET", "a", "x", "a", "y"]);
    assert_eq!(q(&mut c, &["GET", "a"]), bulk("y"), "last value wins");
    q(&mut c, &["SET", "t", "v", "EX", "100"]);
    q(&mut c, &["MSET", "t", "w"]);
    assert_eq!(pttl(&mut c, "t"), -1, "MSET drops TTLs");

    assert_eq!(q(&mut c, &["MSETNX", "n1", "1", "n2", "2"]), int(1));
    assert_eq!(q(&mut c, &["MSETNX", "n2", "x", "n3", "3"]), int(0));
    assert_eq!(
        q(&mut c, &["MGET", "n1", "n2", "n3"]),
        Value::Array(vec![bulk("1"), bulk("2"), Value::Nil])
    );
    assert_eq!(q(&mut c, &["MSETNX", "n4", "a", "n4", "b"]), int(1));
    assert_eq!(q(&mut c, &["GET", "n4"]), bulk("b"));

    // Many keys spread over every shard.
    let mut args: Vec<String> = vec!["MSET".into()];
    for i in 0..500 {
        args.push(format!("key:{i}"));
        args.push(format!("val:{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(q(&mut c, &refs), Value::Okay);
    let mut mget: Vec<String> = vec!["MGET".into()];
    mget.extend((0..500).map(|i| format!("key:{i}")));
    let refs: Vec<&str> = mget.iter().map(String::as_str).collect();
    let expect: Vec<Value> = (0..500).map(|i| bulk(&format!("val:{i}"))).collect();
    assert_eq!(q(&mut c, &refs), Value::Array(expect));

    assert_eq!(
        err(&mut c, &["MSET", "a"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSETNX", "a", "1", "b"]),
        "ERR wrong number of arguments for 'msetnx' command"
    );
    assert_eq!(
        err(&mut c, &["MGET"]),
        "ERR wrong number of arguments for 'mget' command"
    );
}

#[test]
fn msetnx_is_atomic_across_shards() {
    let e = Ember::start(&[]);
    // Two writers race MSETNX over the same 50 keys in opposite orders: exactly one wins
    // and every key ends with that writer's value.
    for round in 0..20 {
        let keys: Vec<String> = (0..50).map(|i| format!("r{round}:k{i}")).collect();
        let mut handles = Vec::new();
        for w in 0..2 {
            let client = e.client();
            let mut ks = keys.clone();
            if w == 1 {
                ks.reverse();
            }
            handles.push(std::thread::spawn(move || {
                let mut c = client.get_connection().expect("connect");
                let mut cmd = redis::cmd("MSETNX");
                for k in &ks {
                    cmd.arg(k).arg(format!("w{w}"));
                }
                cmd.query::<i64>(&mut c).expect("msetnx")
            }));
        }
        let wins: Vec<i64> = handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        assert_eq!(
            wins.iter().sum::<i64>(),
            1,
            "exactly one MSETNX wins: {wins:?}"
        );
        let winner = format!("w{}", wins.iter().position(|&w| w == 1).unwrap_or(0));
        let mut c = e.conn();
        let mut mget = redis::cmd("MGET");
        for k in &keys {
            mget.arg(k);
        }
        let vals: Vec<String> = mget.query(&mut c).expect("mget");
        assert!(vals.iter().all(|v| *v == winner), "mixed values: {vals:?}");
    }
}

#[test]
fn append_strlen_and_encodings() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["STRLEN", "k"]), int(0));
    assert_eq!(q(&mut c, &["APPEND", "k", "Hello"]), int(5));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "k"]), bulk("embstr"));
    assert_eq!(q(&mut c, &["APPEND", "k", " World"]), int(11));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "k"]), bulk("raw"));
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("Hello World"));
    assert_eq!(q(&mut c, &["STRLEN", "k"]), int(11));
    assert_eq!(q(&mut c, &["APPEND", "k", ""]), int(11));

    assert_eq!(q(&mut c, &["SET", "n", "12"]), Value::Okay);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "n"]), bulk("int"));
    assert_eq!(q(&mut c, &["STRLEN", "n"]), int(2));
    assert_eq!(q(&mut c, &["APPEND", "n", "34"]), int(4));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "n"]), bulk("raw"));
    assert_eq!(q(&mut c, &["INCR", "n"]), int(1235));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "n"]), bulk("int"));
    assert_eq!(q(&mut c, &["APPEND", "fresh", "42"]), int(2));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "fresh"]), bulk("int"));
    q(&mut c, &["SET", "long", &"x".repeat(45)]);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "long"]), bulk("raw"));

    q(&mut c, &["SET", "t", "v", "EX", "100"]);
    q(&mut c, &["APPEND", "t", "w"]);
    assert!(pttl(&mut c, "t") > 0, "APPEND keeps the TTL");
    q(&mut c, &["SET", "u", "h\u{e9}llo"]);
    assert_eq!(q(&mut c, &["STRLEN", "u"]), int(6));
}

#[test]
fn incr_family() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(q(&mut c, &["INCR", "n"]), int(1));
    assert_eq!(q(&mut c, &["INCR", "n"]), int(2));
    assert_eq!(q(&mut c, &["DECR", "n"]), int(1));
    assert_eq!(q(&mut c, &["INCRBY", "n", "10"]), int(11));
    assert_eq!(q(&mut c, &["INCRBY", "n", "-3"]), int(8));
    assert_eq!(q(&mut c, &["DECRBY", "n", "10"]), int(-2));
    assert_eq!(q(&mut c, &["DECR", "m"]), int(-1));
    assert_eq!(q(&mut c, &["GET", "n"]), bulk("-2"));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "n"]), bulk("int"));

    q(&mut c, &["SET", "t", "1", "EX", "100"]);
    q(&mut c, &["INCR", "t"]);
    assert!(pttl(&mut c, "t") > 0, "INCR keeps the TTL");

    for v in [
        "abc",
        " 1",
        "1 ",
        "+1",
        "1.5",
        "",
        "0x10",
        "99999999999999999999",
        "1e3",
        "-0",
        "007",
    ] {
        q(&mut c, &["SET", "bad", v]);
        assert_eq!(
            err(&mut c, &["INCR", "bad"]),
            "ERR value is not an integer or out of range",
            "{v:?}"
        );
        assert_eq!(q(&mut c, &["GET", "bad"]), bulk(v), "{v:?} unchanged");
    }
    for bad in ["abc", "1.5", "99999999999999999999", ""] {
        assert_eq!(
            err(&mut c, &["INCRBY", "x", bad]),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err(&mut c, &["DECRBY", "x", bad]),
            "ERR value is not an integer or out of range"
        );
    }
    assert_eq!(q(&mut c, &["GET", "x"]), Value::Nil);

    q(&mut c, &["SET", "big", "9223372036854775807"]);
    assert_eq!(
        err(&mut c, &["INCR", "big"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["INCRBY", "big", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(q(&mut c, &["GET", "big"]), bulk("9223372036854775807"));
    q(&mut c, &["SET", "small", "-9223372036854775808"]);
    assert_eq!(
        err(&mut c, &["DECR", "small"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["DECRBY", "small", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["INCRBY", "small", "-1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        q(&mut c, &["INCRBY", "small", "9223372036854775807"]),
        int(-1)
    );
    assert_eq!(
        err(&mut c, &["DECRBY", "x", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    q(&mut c, &["SET", "edge", "9223372036854775806"]);
    assert_eq!(q(&mut c, &["INCR", "edge"]), int(i64::MAX));
    q(&mut c, &["SET", "edge", "-9223372036854775807"]);
    assert_eq!(q(&mut c, &["DECR", "edge"]), int(i64::MIN));
}

#[test]
fn incrbyfloat_values_and_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "f", "10.5"]);
    assert_eq!(q(&mut c, &["INCRBYFLOAT", "f", "0.1"]), bulk("10.6"));
    assert_eq!(q(&mut c, &["GET", "f"]), bulk("10.6"));
    assert_eq!(q(&mut c, &["INCRBYFLOAT", "f", "-5"]), bulk("5.6"));
    q(&mut c, &["SET", "g", "5.0e3"]);
    assert_eq!(q(&mut c, &["INCRBYFLOAT", "g", "2.0e2"]), bulk("5200"));
    let cases = [
        ("h", "3.0e3", "3000"),
        ("h", "-3000", "0"),
        ("i", "5", "5"),
        ("i", "0.25", "5.25"),
        ("i", "-10", "-4.75"),
        ("j", ".5", "0.5"),
        ("k", "5.", "5"),
        ("l", "1e17", "100000000000000000"),
        ("m", "0.0000001", "0.0000001"),
        ("o", "0.1", "0.1"),
        ("o", "0.2", "0.3"),
        ("p", "10000000000", "10000000000"),
        ("p", "0.1", "10000000000.09999999962747097"),
        ("r", "0x10", "16"),
        ("s", "+5", "5"),
        ("t", "1e-20", "0"),
    ];
    for (key, by, want) in cases {
        assert_eq!(
            q(&mut c, &["INCRBYFLOAT", key, by]),
            bulk(want),
            "{key} += {by}"
        );
    }
    q(&mut c, &["SET", "int", "7"]);
    assert_eq!(q(&mut c, &["INCRBYFLOAT", "int", "3"]), bulk("10"));
    assert_eq!(
        q(&mut c, &["INCR", "int"]),
        int(11),
        "the result is a plain decimal string"
    );

    q(&mut c, &["SET", "ttl", "1", "EX", "100"]);
    q(&mut c, &["INCRBYFLOAT", "ttl", "1.5"]);
    assert!(pttl(&mut c, "ttl") > 0, "INCRBYFLOAT keeps the TTL");

    for v in ["abc", " 1", "1 ", "", "1.5.5"] {
        q(&mut c, &["SET", "badv", v]);
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "badv", "1"]),
            "ERR value is not a valid float",
            "{v:?}"
        );
    }
    for by in ["abc", "", "1.5.5", " 1", "nan", "1e5000"] {
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "none", by]),
            "ERR value is not a valid float",
            "{by:?}"
        );
    }
    assert_eq!(q(&mut c, &["GET", "none"]), Value::Nil);
    q(&mut c, &["SET", "one", "1"]);
    for by in ["inf", "-inf", "+inf"] {
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "one", by]),
            "ERR increment would produce NaN or Infinity"
        );
    }
    q(&mut c, &["SET", "huge", "1.1e4932"]);
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "huge", "1.1e4932"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(q(&mut c, &["GET", "one"]), bulk("1"));
}

#[test]
fn getrange_and_substr() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "k", "This is a string"]);
    let cases: &[(&str, &str, &str)] = &[
        ("0", "3", "This"),
        ("-3", "-1", "ing"),
        ("0", "-1", "This is a string"),
        ("10", "100", "string"),
        ("-100", "3", "This"),
        ("5", "3", ""),
        ("100", "200", ""),
        ("0", "-100", "T"),
        ("-100", "-200", ""),
        ("-1", "-1", "g"),
        ("-5", "-3", "tri"),
        (
            "-9223372036854775808",
            "9223372036854775807",
            "This is a string",
        ),
    ];
    for (s, t, want) in cases {
        assert_eq!(
            q(&mut c, &["GETRANGE", "k", s, t]),
            bulk(want),
            "GETRANGE {s} {t}"
        );
        assert_eq!(
            q(&mut c, &["SUBSTR", "k", s, t]),
            bulk(want),
            "SUBSTR {s} {t}"
        );
    }
    q(&mut c, &["SET", "n", "1234567"]);
    assert_eq!(q(&mut c, &["GETRANGE", "n", "1", "3"]), bulk("234"));
    assert_eq!(q(&mut c, &["GETRANGE", "n", "-2", "-1"]), bulk("67"));
    q(&mut c, &["SET", "e", ""]);
    assert_eq!(q(&mut c, &["GETRANGE", "e", "0", "-1"]), bulk(""));
    assert_eq!(q(&mut c, &["GETRANGE", "nokey", "0", "-1"]), bulk(""));
    assert_eq!(
        err(&mut c, &["GETRANGE", "k", "x", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["GETRANGE", "k", "0"]),
        "ERR wrong number of arguments for 'getrange' command"
    );
}

#[test]
fn setrange_padding_and_limits() {
    let e = Ember::start(&["--proto-max-bulk-len", "1mb"]);
    let mut c = e.conn();
    q(&mut c, &["SET", "k", "Hello World"]);
    assert_eq!(q(&mut c, &["SETRANGE", "k", "6", "Redis"]), int(11));
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("Hello Redis"));
    assert_eq!(q(&mut c, &["SETRANGE", "k", "11", "!!"]), int(13));
    assert_eq!(q(&mut c, &["GET", "k"]), bulk("Hello Redis!!"));
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "k"]), bulk("raw"));

    assert_eq!(q(&mut c, &["SETRANGE", "z", "5", "x"]), int(6));
    assert_eq!(
        q(&mut c, &["GET", "z"]),
        Value::BulkString(b"\0\0\0\0\0x".to_vec())
    );
    q(&mut c, &["SET", "s", "ab"]);
    assert_eq!(q(&mut c, &["SETRANGE", "s", "4", "cd"]), int(6));
    assert_eq!(
        q(&mut c, &["GET", "s"]),
        Value::BulkString(b"ab\0\0cd".to_vec())
    );
    q(&mut c, &["SET", "n", "1234"]);
    assert_eq!(q(&mut c, &["SETRANGE", "n", "1", "x"]), int(4));
    assert_eq!(q(&mut c, &["GET", "n"]), bulk("1x34"));

    // An empty value creates nothing and reports the current length.
    assert_eq!(q(&mut c, &["SETRANGE", "none", "5", ""]), int(0));
    assert_eq!(q(&mut c, &["GET", "none"]), Value::Nil);
    assert_eq!(q(&mut c, &["SETRANGE", "s", "100", ""]), int(6));
    assert_eq!(q(&mut c, &["SETRANGE", "none", "99999999999", ""]), int(0));

    // proto-max-bulk-len is 1 MiB here.
    assert_eq!(
        q(&mut c, &["SETRANGE", "big", "1048575", "x"]),
        int(1_048_576)
    );
    let too_big = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    assert_eq!(err(&mut c, &["SETRANGE", "big2", "1048576", "x"]), too_big);
    assert_eq!(err(&mut c, &["SETRANGE", "s", "1048575", "xy"]), too_big);
    assert_eq!(
        err(&mut c, &["SETRANGE", "s", "9223372036854775807", "x"]),
        too_big
    );
    assert_eq!(err(&mut c, &["APPEND", "big", "x"]), too_big);
    assert_eq!(q(&mut c, &["STRLEN", "big"]), int(1_048_576));
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "abc", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q(&mut c, &["GET", "big2"]), Value::Nil);
}

#[test]
fn lcs_replies() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
    assert_eq!(q(&mut c, &["LCS", "key1", "key2"]), bulk("mytext"));
    assert_eq!(q(&mut c, &["LCS", "key1", "key2", "LEN"]), int(6));
    assert_eq!(q(&mut c, &["LCS", "key1", "nokey"]), bulk(""));
    assert_eq!(q(&mut c, &["LCS", "nokey", "nokey2", "LEN"]), int(0));

    let range = |a: i64, b: i64| Value::Array(vec![int(a), int(b)]);
    let m1 = vec![range(4, 7), range(5, 8)];
    let m2 = vec![range(2, 3), range(0, 1)];
    let idx = |matches: Vec<Value>| {
        Value::Array(vec![
            bulk("matches"),
            Value::Array(matches),
            bulk("len"),
            int(6),
        ])
    };
    assert_eq!(
        q(&mut c, &["LCS", "key1", "key2", "IDX"]),
        idx(vec![Value::Array(m1.clone()), Value::Array(m2.clone())])
    );
    assert_eq!(
        q(&mut c, &["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4"]),
        idx(vec![Value::Array(m1.clone())])
    );
    let with_len = |mut m: Vec<Value>, n: i64| {
        m.push(int(n));
        Value::Array(m)
    };
    assert_eq!(
        q(&mut c, &["LCS", "key1", "key2", "idx", "withmatchlen"]),
        idx(vec![with_len(m1.clone(), 4), with_len(m2.clone(), 2)])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "LCS",
                "key1",
                "key2",
                "IDX",
                "MINMATCHLEN",
                "-5",
                "WITHMATCHLEN"
            ]
        ),
        idx(vec![with_len(m1.clone(), 4), with_len(m2, 2)])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "LCS",
                "key1",
                "key2",
                "MINMATCHLEN",
                "3",
                "WITHMATCHLEN",
                "IDX"
            ]
        ),
        idx(vec![with_len(m1, 4)])
    );
    // Options that only matter with IDX are accepted without it.
    assert_eq!(
        q(&mut c, &["LCS", "key1", "key2", "WITHMATCHLEN"]),
        bulk("mytext")
    );
    assert_eq!(
        q(&mut c, &["LCS", "key1", "key2", "LEN", "MINMATCHLEN", "3"]),
        int(6)
    );

    assert_eq!(
        err(&mut c, &["LCS", "key1", "key2", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(
        err(&mut c, &["LCS", "key1", "key2", "FOO"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["LCS", "key1", "key2", "MINMATCHLEN"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["LCS", "key1", "key2", "MINMATCHLEN", "abc"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut c, &["LCS", "key1"]),
        "ERR wrong number of arguments for 'lcs' command"
    );
}

#[test]
fn lcs_idx_is_a_map_in_resp3() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let hello = raw_roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%7\r\n"));
    let r = raw_roundtrip(&mut s, b"MSET key1 ohmytext key2 mynewtext\r\n", 5);
    assert_eq!(r, b"+OK\r\n");
    let want = b"%2\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n\
*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n";
    let r = raw_roundtrip(&mut s, b"LCS key1 key2 IDX WITHMATCHLEN\r\n", want.len());
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(want));
    let r = raw_roundtrip(&mut s, b"GET nokey\r\n", 3);
    assert_eq!(r, b"_\r\n");
}

#[test]
fn lcs_table_is_bounded_by_proto_max_bulk_len() {
    let e = Ember::start(&["--proto-max-bulk-len", "1mb"]);
    let mut c = e.conn();
    // 511 x 511 cells of 4 bytes fit in 1 MiB; 512 x 512 do not.
    q(
        &mut c,
        &["MSET", "a", &"ab".repeat(255), "b", &"ba".repeat(255)],
    );
    assert_eq!(q(&mut c, &["LCS", "a", "b", "LEN"]), int(509));
    q(
        &mut c,
        &["MSET", "a", &"x".repeat(600), "b", &"x".repeat(600)],
    );
    let msg = "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
    assert_eq!(err(&mut c, &["LCS", "a", "b"]), msg);
    assert_eq!(err(&mut c, &["LCS", "a", "b", "LEN"]), msg);
    // Option errors come first.
    assert_eq!(
        err(&mut c, &["LCS", "a", "b", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
}

#[test]
fn read_commands_count_keyspace_hits_and_misses() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "k", "v"]);
    let (h0, m0) = (
        info_stat(&mut c, "keyspace_hits"),
        info_stat(&mut c, "keyspace_misses"),
    );
    q(&mut c, &["GET", "k"]);
    q(&mut c, &["GET", "nokey"]);
    q(&mut c, &["MGET", "k", "nokey", "k"]);
    q(&mut c, &["STRLEN", "k"]);
    q(&mut c, &["GETRANGE", "nokey", "0", "1"]);
    q(&mut c, &["LCS", "k", "nokey"]);
    q(&mut c, &["SET", "k", "w", "GET"]);
    // Writes without GET do not count.
    q(&mut c, &["SET", "k", "x"]);
    q(&mut c, &["INCR", "counter"]);
    let (h1, m1) = (
        info_stat(&mut c, "keyspace_hits"),
        info_stat(&mut c, "keyspace_misses"),
    );
    assert_eq!(h1 - h0, 1 + 2 + 1 + 1 + 1, "hits");
    assert_eq!(m1 - m0, 1 + 1 + 1 + 1, "misses");
}
