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

/// With all 4 workers in use (DEBUG SPREAD 4) connections go to them in turn, so the 4
/// connections opened right after the script's own land on every worker, one of them beside
/// the script. Every writer is held while the script runs: each gets `-BUSY` (those on other
/// workers from their own loop, the one beside the script from the script's hook) and its
/// write is not done; after SCRIPT KILL all writes go through.
#[test]
fn long_script_holds_writers_on_every_worker() {
    use std::sync::mpsc;
    use std::time::Duration;

    let e = Ember::start(&["--threads", "4", "--busy-reply-threshold", "100"]);
    ok(&mut e.conn(), &["DEBUG", "SPREAD", "4"]);
    let mut script = e.conn();
    let writers: Vec<_> = (0..4).map(|_| e.conn()).collect();
    let mut killer = e.conn();
    let runner = thread::spawn(move || {
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<Value>(&mut script)
            .unwrap_err()
            .to_string()
    });
    // The script is running once a connection on another worker gets -BUSY.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !matches!(redis::cmd("PING").query::<Value>(&mut killer), Err(e) if e.to_string().contains("BUSY"))
    {
        assert!(std::time::Instant::now() < deadline, "never saw -BUSY");
        thread::sleep(Duration::from_millis(10));
    }
    let killed = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let handles: Vec<_> = writers
        .into_iter()
        .enumerate()
        .map(|(i, mut w)| {
            let (tx, killed) = (tx.clone(), killed.clone());
            thread::spawn(move || loop {
                match redis::cmd("INCR").arg(format!("w{i}")).query::<i64>(&mut w) {
                    Ok(v) => {
                        assert!(killed.load(Ordering::SeqCst), "w{i} ran during the script");
                        // 1: no write refused with -BUSY was applied.
                        assert_eq!(v, 1);
                        tx.send(("ok", i)).unwrap();
                        return;
                    }
                    Err(e) => {
                        assert!(e.to_string().contains("BUSY"), "{e}");
                        tx.send(("busy", i)).unwrap();
                        while !killed.load(Ordering::SeqCst) {
                            thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut busy = std::collections::HashSet::new();
    while busy.len() < 4 {
        let (what, i) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("every writer gets -BUSY");
        assert_eq!(what, "busy");
        busy.insert(i);
    }
    killed.store(true, Ordering::SeqCst);
    ok(&mut killer, &["SCRIPT", "KILL"]);
    assert!(runner.join().unwrap().contains("Script killed"));
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(rx.iter().filter(|(what, _)| *what == "ok").count(), 4);
}

/// SHUTDOWN NOSAVE is allowed while a script is busy and stops the server, also from a
/// connection beside the script (DEBUG SPREAD 1: one worker serves both), which the script's
/// hook answers. Raw sockets with a read timeout, so a missing answer fails instead of
/// hanging.
#[test]
fn shutdown_nosave_stops_a_busy_script() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    let mut e = Ember::start(&["--threads", "2", "--busy-reply-threshold", "100"]);
    ok(&mut e.conn(), &["DEBUG", "SPREAD", "1"]);
    let mut script = e.conn();
    let mut other = e.raw();
    other
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 256];
    other.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    assert!(matches!(other.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG")));
    let _runner = thread::spawn(move || {
        let _ = redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query::<Value>(&mut script);
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        other.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        match other.read(&mut buf) {
            Ok(n) if buf[..n].starts_with(b"-BUSY") => break,
            Ok(n) => assert!(buf[..n].starts_with(b"+PONG"), "{:?}", &buf[..n]),
            Err(e) => panic!("no answer beside the busy script: {e}"),
        }
        assert!(Instant::now() < deadline, "never saw -BUSY");
        thread::sleep(Duration::from_millis(20));
    }
    other
        .write_all(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
        .unwrap();
    // The server closes the connection without a reply.
    let mut buf = [0u8; 256];
    other
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let r = other.read(&mut buf);
    assert!(
        !matches!(r, Ok(n) if n > 0),
        "SHUTDOWN answered {:?}",
        String::from_utf8_lossy(&buf[..*r.as_ref().unwrap_or(&0)])
    );
    assert!(
        e.wait_exit(Duration::from_secs(20)).is_some(),
        "ember still running after SHUTDOWN NOSAVE"
    );
}
