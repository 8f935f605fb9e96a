//! Expiry commands (EXPIRE PEXPIRE EXPIREAT PEXPIREAT with NX XX GT LT, TTL PTTL
//! EXPIRETIME PEXPIRETIME PERSIST, NEXPIRE NEXPIREAT NTTL NEXPIRETIME) and passive/active expiry,
//! against the real binary. Timing is only ever checked by generous polling.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{err, int, ok, Ember};
use redis::{Connection, Value};

const SEC_NS: i64 = 1_000_000_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// Polls `f` every few milliseconds until it holds; fails after `secs` seconds.
fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The argument of `cmd` meaning `secs` seconds from now.
fn when(cmd: &str, secs: i64) -> String {
    match cmd {
        "EXPIRE" => secs.to_string(),
        "PEXPIRE" => (secs * 1000).to_string(),
        "EXPIREAT" => (now_ms() / 1000 + secs).to_string(),
        "PEXPIREAT" => (now_ms() + secs * 1000).to_string(),
        "NEXPIRE" => (secs * SEC_NS).to_string(),
        "NEXPIREAT" => (now_ns() + secs * SEC_NS).to_string(),
        _ => unreachable!("{cmd}"),
    }
}

const ALL: [&str; 6] = [
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "NEXPIRE",
    "NEXPIREAT",
];

#[test]
fn ttl_family_on_missing_and_persistent_keys() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for q in [
        "TTL",
        "PTTL",
        "NTTL",
        "EXPIRETIME",
        "PEXPIRETIME",
        "NEXPIRETIME",
    ] {
        assert_eq!(int(&mut c, &[q, "nokey"]), -2, "{q}");
    }
    ok(&mut c, &["SET", "k", "v"]);
    for q in [
        "TTL",
        "PTTL",
        "NTTL",
        "EXPIRETIME",
        "PEXPIRETIME",
        "NEXPIRETIME",
    ] {
        assert_eq!(int(&mut c, &[q, "k"]), -1, "{q}");
        assert_eq!(
            err(&mut c, &[q]),
            format!(
                "ERR wrong number of arguments for '{}' command",
                q.to_lowercase()
            )
        );
        assert_eq!(
            err(&mut c, &[q, "a", "b"]),
            format!(
                "ERR wrong number of arguments for '{}' command",
                q.to_lowercase()
            )
        );
    }
}

#[test]
fn every_variant_sets_a_ttl() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for name in ALL {
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(int(&mut c, &[name, "k", &when(name, 100)]), 1, "{name}");
        let ttl = int(&mut c, &["TTL", "k"]);
        assert!((98..=100).contains(&ttl), "{name}: TTL {ttl}");
        let pttl = int(&mut c, &["PTTL", "k"]);
        assert!((98_000..=100_000).contains(&pttl), "{name}: PTTL {pttl}");
        let nttl = int(&mut c, &["NTTL", "k"]);
        assert!(
            (98 * SEC_NS..=100 * SEC_NS).contains(&nttl),
            "{name}: NTTL {nttl}"
        );
        assert_eq!(
            ok(&mut c, &["GET", "k"]),
            Value::BulkString(b"v".to_vec()),
            "{name}"
        );
        assert_eq!(int(&mut c, &[name, "nokey", &when(name, 100)]), 0, "{name}");
        assert_eq!(int(&mut c, &["EXISTS", "nokey"]), 0);
        assert_eq!(
            err(&mut c, &[name, "k"]),
            format!(
                "ERR wrong number of arguments for '{}' command",
                name.to_lowercase()
            )
        );
    }
}

#[test]
fn expiretime_and_rounding() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let at_ms = now_ms() + 100_000;
    assert_eq!(int(&mut c, &["PEXPIREAT", "k", &at_ms.to_string()]), 1);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), at_ms);
    let secs = int(&mut c, &["EXPIRETIME", "k"]);
    assert!(
        secs == at_ms / 1000 || secs == (at_ms + 999) / 1000,
        "{secs}"
    );
    assert_eq!(int(&mut c, &["EXPIREAT", "k", "4000000000"]), 1);
    assert_eq!(int(&mut c, &["EXPIRETIME", "k"]), 4_000_000_000);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), 4_000_000_000_000);
    let at_ns = now_ns() + 100 * SEC_NS;
    assert_eq!(int(&mut c, &["NEXPIREAT", "k", &at_ns.to_string()]), 1);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), at_ns / 1_000_000);

    // TTL rounds the remaining milliseconds to the nearest second.
    ok(&mut c, &["PEXPIRE", "k", "100500"]);
    let ttl = int(&mut c, &["TTL", "k"]);
    assert!(ttl == 100 || ttl == 101, "{ttl}");
    ok(&mut c, &["PEXPIRE", "k", "2000"]);
    let ttl = int(&mut c, &["TTL", "k"]);
    assert!(ttl == 1 || ttl == 2, "{ttl}");

    let before = now_ms() / 1000;
    ok(&mut c, &["EXPIRE", "k", "1000"]);
    let after = now_ms() / 1000 + 1;
    let t = int(&mut c, &["EXPIRETIME", "k"]);
    assert!(before + 1000 <= t && t <= after + 1000, "{t}");
}

#[test]
fn persist() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), -1);
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(int(&mut c, &["PERSIST", "nokey"]), 0);
    ok(&mut c, &["SET", "n", "v"]);
    ok(&mut c, &["NEXPIRE", "n", &(100 * SEC_NS).to_string()]);
    assert_eq!(int(&mut c, &["PERSIST", "n"]), 1);
    assert_eq!(int(&mut c, &["NTTL", "n"]), -1);
    assert_eq!(
        err(&mut c, &["PERSIST"]),
        "ERR wrong number of arguments for 'persist' command"
    );
    // A persisted key outlives its old deadline.
    ok(&mut c, &["SET", "p", "v", "PX", "100"]);
    assert_eq!(int(&mut c, &["PERSIST", "p"]), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ok(&mut c, &["GET", "p"]), Value::BulkString(b"v".to_vec()));
}

#[test]
fn nx_xx_gt_lt() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for name in ALL {
        ok(&mut c, &["SET", "k", "v"]);
        // NX: only without a TTL.
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 100), "NX"]),
            1,
            "{name} NX"
        );
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 200), "nx"]),
            0,
            "{name} NX"
        );
        assert!(int(&mut c, &["TTL", "k"]) <= 100);

        // XX: only with a TTL.
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 100), "XX"]),
            0,
            "{name} XX"
        );
        assert_eq!(int(&mut c, &["TTL", "k"]), -1);
        ok(&mut c, &["EXPIRE", "k", "50"]);
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 100), "XX"]),
            1,
            "{name} XX"
        );
        assert!(int(&mut c, &["TTL", "k"]) > 50);

        // GT: no TTL counts as infinite, so GT never applies to it.
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 100), "GT"]),
            0,
            "{name} GT"
        );
        assert_eq!(int(&mut c, &["TTL", "k"]), -1);
        ok(&mut c, &["EXPIRE", "k", "100"]);
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 50), "GT"]),
            0,
            "{name} GT"
        );
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 300), "gt"]),
            1,
            "{name} GT"
        );
        assert!(int(&mut c, &["TTL", "k"]) > 200);

        // LT: no TTL counts as infinite, so LT always applies to it.
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 300), "LT"]),
            1,
            "{name} LT"
        );
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 400), "LT"]),
            0,
            "{name} LT"
        );
        assert_eq!(
            int(&mut c, &[name, "k", &when(name, 100), "lt"]),
            1,
            "{name} LT"
        );
        assert!(int(&mut c, &["TTL", "k"]) <= 100);

        // Combined XX GT / XX LT.
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(int(&mut c, &[name, "k", &when(name, 100), "XX", "GT"]), 0);
        ok(&mut c, &["EXPIRE", "k", "100"]);
        assert_eq!(int(&mut c, &[name, "k", &when(name, 50), "XX", "GT"]), 0);
        assert_eq!(int(&mut c, &[name, "k", &when(name, 200), "XX", "GT"]), 1);
        assert_eq!(int(&mut c, &[name, "k", &when(name, 100), "xx", "lt"]), 1);
        assert!(int(&mut c, &["TTL", "k"]) <= 100);

        // Options on a missing key.
        for opt in ["NX", "XX", "GT", "LT"] {
            assert_eq!(int(&mut c, &[name, "nokey", &when(name, 100), opt]), 0);
        }
    }
}

#[test]
fn option_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
    let gtlt = "ERR GT and LT options at the same time are not compatible";
    for name in ALL {
        let w = when(name, 100);
        for (opts, msg) in [
            (&["NX", "XX"][..], nx),
            (&["NX", "GT"][..], nx),
            (&["LT", "NX"][..], nx),
            (&["GT", "LT"][..], gtlt),
            (&["XX", "GT", "LT"][..], gtlt),
        ] {
            let mut args = vec![name, "k", w.as_str()];
            args.extend_from_slice(opts);
            assert_eq!(err(&mut c, &args), msg, "{args:?}");
        }
        assert_eq!(
            err(&mut c, &[name, "k", &w, "foo"]),
            "ERR Unsupported option foo"
        );
        assert_eq!(
            err(&mut c, &[name, "k", &w, "NX", "bar"]),
            "ERR Unsupported option bar"
        );
        // Options are checked before the amount, as in Redis.
        assert_eq!(
            err(&mut c, &[name, "k", "abc", "foo"]),
            "ERR Unsupported option foo"
        );
        for bad in ["abc", "1.5", "", " 1", "99999999999999999999"] {
            assert_eq!(
                err(&mut c, &[name, "k", bad]),
                "ERR value is not an integer or out of range",
                "{name} {bad:?}"
            );
        }
        // Repeating a compatible option is fine.
        assert_eq!(int(&mut c, &[name, "k", &w, "XX", "XX"]), 0);
        assert_eq!(int(&mut c, &["TTL", "k"]), -1, "no error path set a TTL");
    }
}

#[test]
fn overflow_is_rejected() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    for (name, v) in [
        ("EXPIRE", "9223372036854775807"),
        ("EXPIRE", "9223372036854775"),
        ("EXPIRE", "-9223372036854775808"),
        ("PEXPIRE", "9223372036854775807"),
        ("EXPIREAT", "9223372036854775807"),
        ("PEXPIREAT", "9223372036854775807"),
    ] {
        assert_eq!(
            err(&mut c, &[name, "k", v]),
            format!(
                "ERR invalid expire time in '{}' command",
                name.to_lowercase()
            )
        );
        assert_eq!(int(&mut c, &["TTL", "k"]), -1);
    }
    // Not overflows: far in the past, so the key is deleted.
    assert_eq!(int(&mut c, &["EXPIRE", "k", "-9223372036854775"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["PEXPIRE", "k", "-9223372036854775808"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["PEXPIREAT", "k", "-9223372036854775808"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["NEXPIRE", "k", "-9223372036854775808"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    // The largest nanosecond deadline is representable.
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["NEXPIREAT", "k", "9223372036854775807"]), 1);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), 9_223_372_036_854);
}

#[test]
fn past_or_non_positive_deadline_deletes() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    for (name, v) in [
        ("EXPIRE", "0"),
        ("EXPIRE", "-1"),
        ("PEXPIRE", "0"),
        ("PEXPIRE", "-100"),
        ("EXPIREAT", "1"),
        ("EXPIREAT", "0"),
        ("PEXPIREAT", "1"),
        ("NEXPIRE", "0"),
        ("NEXPIRE", "-1"),
        ("NEXPIREAT", "1"),
        ("NEXPIREAT", "0"),
    ] {
        ok(&mut c, &["SET", "k", "v", "EX", "100"]);
        assert_eq!(int(&mut c, &[name, "k", v]), 1, "{name} {v}");
        assert_eq!(int(&mut c, &["EXISTS", "k"]), 0, "{name} {v}");
        assert_eq!(int(&mut c, &["TTL", "k"]), -2);
        assert_eq!(int(&mut c, &["NTTL", "k"]), -2);
    }
    // With GT a past deadline is never greater: nothing happens. With LT it is: delete.
    ok(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "-5", "GT"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "-5", "LT"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    // NX on a persistent key with a past deadline deletes it too.
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["PEXPIRE", "k", "-1", "NX"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
}

#[test]
fn millisecond_precision() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["SET", "keep", "v"]);
    let start = Instant::now();
    assert_eq!(int(&mut c, &["PEXPIRE", "k", "50"]), 1);
    let pttl = int(&mut c, &["PTTL", "k"]);
    assert!((0..=50).contains(&pttl), "{pttl}");
    wait_until(10, "PEXPIRE 50 to expire", || {
        int(&mut c, &["EXISTS", "k"]) == 0
    });
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "a 50 ms TTL took {:?}",
        start.elapsed()
    );
    assert_eq!(int(&mut c, &["PTTL", "k"]), -2);
    assert_eq!(
        ok(&mut c, &["GET", "keep"]),
        Value::BulkString(b"v".to_vec())
    );
}

#[test]
fn nanosecond_precision() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["SET", "keep", "v"]);
    assert_eq!(int(&mut c, &["NEXPIRE", "k", "1000000"]), 1);
    // Either still alive with 0 < NTTL <= 1 ms, or already gone.
    let nttl = int(&mut c, &["NTTL", "k"]);
    assert!(nttl == -2 || (0 < nttl && nttl <= 1_000_000), "{nttl}");
    wait_until(10, "NEXPIRE 1ms to expire", || {
        int(&mut c, &["EXISTS", "k"]) == 0
    });
    assert_eq!(int(&mut c, &["NTTL", "k"]), -2);
    assert_eq!(
        ok(&mut c, &["GET", "keep"]),
        Value::BulkString(b"v".to_vec())
    );

    // A long nanosecond TTL counts down.
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["NEXPIRE", "k", &(100 * SEC_NS).to_string()]);
    let a = int(&mut c, &["NTTL", "k"]);
    assert!(98 * SEC_NS < a && a <= 100 * SEC_NS, "{a}");
    std::thread::sleep(Duration::from_millis(10));
    let b = int(&mut c, &["NTTL", "k"]);
    assert!(b < a, "{b} !< {a}");
    // An absolute nanosecond deadline is kept exactly.
    let at = now_ns() + 50 * SEC_NS + 123;
    ok(&mut c, &["NEXPIREAT", "k", &at.to_string()]);
    let left = int(&mut c, &["NTTL", "k"]);
    assert!(left > 0 && left <= 50 * SEC_NS + 123, "{left}");
}

#[test]
fn expired_keys_are_gone_for_every_command() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "a", "1", "PX", "20"]);
    ok(&mut c, &["SET", "b", "2"]);
    wait_until(10, "a to expire", || int(&mut c, &["EXISTS", "a"]) == 0);
    assert_eq!(
        ok(&mut c, &["MGET", "a", "b"]),
        Value::Array(vec![Value::Nil, Value::BulkString(b"2".to_vec())])
    );
    assert_eq!(
        ok(&mut c, &["KEYS", "*"]),
        Value::Array(vec![Value::BulkString(b"b".to_vec())])
    );
    assert_eq!(int(&mut c, &["EXPIRE", "a", "100"]), 0);
    assert_eq!(int(&mut c, &["PERSIST", "a"]), 0);
    // Writing an expired key starts afresh, without a TTL.
    ok(&mut c, &["SET", "n", "100", "PX", "20"]);
    wait_until(10, "n to expire", || int(&mut c, &["EXISTS", "n"]) == 0);
    assert_eq!(int(&mut c, &["INCR", "n"]), 1);
    assert_eq!(int(&mut c, &["TTL", "n"]), -1);
}

/// DBSIZE counts keys whether or not they have expired, so it only drops when the
/// background sweep reclaims them.
fn dbsize(c: &mut Connection) -> i64 {
    int(c, &["DBSIZE"])
}

#[test]
fn active_expiry_reclaims_untouched_keys() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        let k = format!("k{i}");
        pipe.cmd("SET").arg(&k).arg("v").ignore();
        if i % 2 == 0 {
            pipe.cmd("PEXPIRE").arg(&k).arg(20).ignore();
        } else {
            pipe.cmd("NEXPIRE").arg(&k).arg(20_000_000).ignore();
        }
    }
    pipe.cmd("SET").arg("persistent").arg("v").ignore();
    pipe.query::<()>(&mut c).unwrap();
    // Nothing but DBSIZE touches the keyspace until they are all reclaimed.
    wait_until(15, "expired keys to be reclaimed without access", || {
        dbsize(&mut c) == 1
    });
    assert_eq!(
        ok(&mut c, &["KEYS", "*"]),
        Value::Array(vec![Value::BulkString(b"persistent".to_vec())])
    );
}
