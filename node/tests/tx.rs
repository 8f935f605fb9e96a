//! MULTI/EXEC/WATCH through the `redis` crate, across worker threads: EXEC is atomic with
//! respect to clients on every thread, and WATCH sees writes from any thread.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::Ember;

#[test]
fn exec_is_atomic_for_readers_on_other_threads() {
    let e = Ember::start(&["--threads", "4"]);
    let mut c = e.conn();
    let _: () = redis::cmd("MSET")
        .arg("a")
        .arg(0)
        .arg("b")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let mut w = e.conn();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let _: (i64, i64) = redis::pipe()
                        .atomic()
                        .incr("a", 1)
                        .incr("b", 1)
                        .query(&mut w)
                        .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut rd = e.conn();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut torn = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (a, b): (i64, i64) =
                        redis::cmd("MGET").arg("a").arg("b").query(&mut rd).unwrap();
                    if a != b {
                        torn += 1;
                    }
                }
                torn
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(800));
    stop.store(true, Ordering::Relaxed);
    let done: i64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    let torn: i64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(done > 0);
    assert_eq!(torn, 0, "a reader saw half a transaction");
    let (a, b): (i64, i64) = redis::cmd("MGET").arg("a").arg("b").query(&mut c).unwrap();
    assert_eq!((a, b), (done, done));
}

#[test]
fn watch_sees_writes_from_other_threads() {
    let e = Ember::start(&["--threads", "4"]);
    let mut c = e.conn();
    let mut others: Vec<redis::Connection> = (0..4).map(|_| e.conn()).collect();
    for (i, o) in others.iter_mut().enumerate() {
        let _: () = redis::cmd("WATCH").arg("k").query(&mut c).unwrap();
        let _: () = redis::cmd("SET").arg("k").arg(i).query(o).unwrap();
        let r: Option<(String,)> = redis::pipe()
            .atomic()
            .set("k", "mine")
            .query(&mut c)
            .unwrap();
        assert!(r.is_none(), "EXEC ran although k changed (writer {i})");
    }
    let _: () = redis::cmd("WATCH").arg("k").query(&mut c).unwrap();
    let r: Option<(String,)> = redis::pipe()
        .atomic()
        .set("k", "mine")
        .query(&mut c)
        .unwrap();
    assert!(r.is_some());
}
