//! Scripting through the `redis` crate: EVAL/EVALSHA, conversions, error texts, the
//! sandbox, functions, and scripts running alone across worker threads.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::{err, int, ok, Ember};
use redis::Value;

#[test]
fn eval_and_evalsha() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["EVAL", "return 7", "0"]), 7);
    assert_eq!(
        ok(&mut c, &["EVAL", "return {1, 'a', false, 2.9}", "0"]),
        Value::Array(vec![
            Value::Int(1),
            Value::BulkString(b"a".to_vec()),
            Value::Nil,
            Value::Int(2)
        ])
    );
    let Value::BulkString(sha) = ok(&mut c, &["SCRIPT", "LOAD", "return ARGV[1]"]) else {
        panic!("sha expected")
    };
    let sha = String::from_utf8(sha).unwrap();
    assert_eq!(
        ok(&mut c, &["EVALSHA", &sha, "0", "x"]),
        Value::BulkString(b"x".to_vec())
    );
    assert!(err(&mut c, &["EVALSHA", &"0".repeat(40), "0"]).starts_with("NOSCRIPT"));
    assert!(err(&mut c, &["EVAL", "return 1", "3", "a"]).contains("greater than number of args"));
    assert!(err(&mut c, &["EVAL", "return 1", "-1"]).contains("can't be negative"));
}

#[test]
fn error_texts() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "s", "a"]);
    let m = err(&mut c, &["EVAL", "return redis.call('incr', 's')", "0"]);
    assert!(
        m.starts_with("ERR value is not an integer or out of range script: "),
        "{m}"
    );
    assert!(m.ends_with(", on @user_script:1."), "{m}");
    let m = err(&mut c, &["EVAL", "return nosuch", "0"]);
    assert!(
        m.starts_with(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'nosuch'"
        ),
        "{m}"
    );
    let m = err(&mut c, &["EVAL", "x = 1", "0"]);
    assert!(
        m.starts_with("ERR user_script:1: Attempt to modify a readonly table"),
        "{m}"
    );
    let m = err(&mut c, &["EVAL_RO", "redis.call('set', 'a', 1)", "0"]);
    assert!(
        m.starts_with("ERR Write commands are not allowed from read-only scripts."),
        "{m}"
    );
}

#[test]
fn functions() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let lib = "#!lua name=l\nredis.register_function('f', function(k, a) return #k + #a end)";
    assert_eq!(
        ok(&mut c, &["FUNCTION", "LOAD", lib]),
        Value::BulkString(b"l".to_vec())
    );
    assert_eq!(int(&mut c, &["FCALL", "f", "1", "k", "a", "b"]), 3);
    assert!(err(&mut c, &["FCALL_RO", "f", "0"]).contains("write flag"));
    ok(&mut c, &["FUNCTION", "DELETE", "l"]);
    assert!(err(&mut c, &["FCALL", "f", "0"]).contains("Function not found"));
}

#[test]
fn scripts_are_atomic_for_other_threads() {
    let e = Ember::start(&["--threads", "4"]);
    let mut c = e.conn();
    ok(&mut c, &["MSET", "a", "0", "b", "0"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let mut w = e.conn();
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    ok(
                        &mut w,
                        &[
                            "EVAL",
                            "redis.call('incr', KEYS[1]) for i = 1, 1000 do end \
                             redis.call('incr', KEYS[2])",
                            "2",
                            "a",
                            "b",
                        ],
                    );
                }
            })
        })
        .collect();
    let mut r = e.conn();
    for _ in 0..300 {
        let Value::Array(v) = ok(&mut r, &["MGET", "a", "b"]) else {
            panic!()
        };
        assert_eq!(v[0], v[1], "a script was seen half done");
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
}
