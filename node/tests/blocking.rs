//! Blocking list commands through the `redis` crate: a waiter on one connection (one worker
//! thread) is served by pushes from connections on other threads, in FIFO order.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{int, Ember};

fn blocked_clients(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("clients").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn wait_blocked(c: &mut redis::Connection, n: i64) {
    let t0 = Instant::now();
    while blocked_clients(c) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never saw {n} blocked"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn waiters_on_other_threads_are_served_fifo() {
    let e = Ember::start(&["--threads", "4"]);
    let mut c = e.conn();
    let mut handles = Vec::new();
    for i in 0..4 {
        let mut w = e.conn();
        handles.push(thread::spawn(move || {
            let v: (String, String) = redis::cmd("BLPOP").arg("q").arg(0).query(&mut w).unwrap();
            v
        }));
        wait_blocked(&mut c, i + 1);
    }
    assert_eq!(int(&mut c, &["RPUSH", "q", "a", "b", "c", "d", "e"]), 5);
    let got: Vec<String> = handles.into_iter().map(|h| h.join().unwrap().1).collect();
    assert_eq!(got, ["a", "b", "c", "d"]);
    assert_eq!(int(&mut c, &["LLEN", "q"]), 1);
    assert_eq!(blocked_clients(&mut c), 0);
}

#[test]
fn timeout_returns_nil_and_unblocks() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let t0 = Instant::now();
    let v: Option<(String, String)> = redis::cmd("BRPOP")
        .arg("none")
        .arg(0.1)
        .query(&mut c)
        .unwrap();
    assert!(v.is_none());
    assert!(t0.elapsed() >= Duration::from_millis(95));
    let v: Option<String> = redis::cmd("BLMOVE")
        .arg("none")
        .arg("d")
        .arg("LEFT")
        .arg("LEFT")
        .arg(0.01)
        .query(&mut c)
        .unwrap();
    assert!(v.is_none());
    assert_eq!(blocked_clients(&mut c), 0);
}

#[test]
fn pushes_from_many_threads_reach_every_waiter() {
    let e = Ember::start(&["--threads", "3"]);
    let mut c = e.conn();
    let n = 12;
    let waiters: Vec<_> = (0..n)
        .map(|i| {
            let mut w = e.conn();
            thread::spawn(move || {
                let v: (String, String) = redis::cmd("BLPOP")
                    .arg(format!("k{}", i % 3))
                    .arg(0)
                    .query(&mut w)
                    .unwrap();
                v.1
            })
        })
        .collect();
    wait_blocked(&mut c, n);
    let writers: Vec<_> = (0..3)
        .map(|k| {
            let mut w = e.conn();
            thread::spawn(move || {
                for j in 0..n / 3 {
                    let _: i64 = redis::cmd("LPUSH")
                        .arg(format!("k{k}"))
                        .arg(format!("{k}-{j}"))
                        .query(&mut w)
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut got: Vec<String> = waiters.into_iter().map(|h| h.join().unwrap()).collect();
    got.sort();
    let mut want: Vec<String> = (0..3)
        .flat_map(|k| (0..n / 3).map(move |j| format!("{k}-{j}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
}
