//! Keyspace notifications against the real binary: a subscriber on another connection
//! receives `__keyspace@<db>__:<key>` / `__keyevent@<db>__:<event>` messages (RESP2 through
//! the `redis` crate, RESP3 as push frames), the config directive's text form, and
//! lazily and actively expired keys.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{err, ok, Ember};
use redis::Value;

/// Reads pattern messages until `n` arrived: (channel, payload) pairs.
fn messages(ps: &mut redis::PubSub<'_>, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|_| {
            let m = ps.get_message().expect("message");
            (
                m.get_channel_name().to_string(),
                m.get_payload::<String>().expect("payload"),
            )
        })
        .collect()
}

fn pair(c: &str, m: &str) -> (String, String) {
    (c.to_string(), m.to_string())
}

#[test]
fn config_text_and_errors() {
    let e = Ember::start(&["--notify-keyspace-events", "KEA"]);
    let mut c = e.conn();
    let get = |c: &mut redis::Connection| -> Value {
        common::cmd(c, &["CONFIG", "GET", "notify-keyspace-events"]).expect("get")
    };
    let v = |s: &str| {
        Value::Array(vec![
            Value::BulkString(b"notify-keyspace-events".to_vec()),
            Value::BulkString(s.as_bytes().to_vec()),
        ])
    };
    assert_eq!(get(&mut c), v("AKE"));
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Elg"]);
    assert_eq!(get(&mut c), v("glE"));
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "nKAm"]);
    assert_eq!(get(&mut c), v("AKm"));
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEX"]),
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
         Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
    );
    assert_eq!(get(&mut c), v("AKm"));
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    assert_eq!(get(&mut c), v(""));
}

#[test]
fn subscriber_on_another_connection_gets_events() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = e.conn();
    let mut ps = sub.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    ps.psubscribe("__key*__:*").expect("psubscribe");
    ok(&mut c, &["SET", "k", "v"]);
    common::cmd(&mut c, &["LPUSH", "l", "a", "b"]).expect("lpush");
    common::cmd(&mut c, &["DEL", "k"]).expect("del");
    common::cmd(&mut c, &["SELECT", "2"]).expect("select");
    common::cmd(&mut c, &["HSET", "h", "f", "v"]).expect("hset");
    assert_eq!(
        messages(&mut ps, 8),
        vec![
            pair("__keyspace@0__:k", "set"),
            pair("__keyevent@0__:set", "k"),
            pair("__keyspace@0__:l", "lpush"),
            pair("__keyevent@0__:lpush", "l"),
            pair("__keyspace@0__:k", "del"),
            pair("__keyevent@0__:del", "k"),
            pair("__keyspace@2__:h", "hset"),
            pair("__keyevent@2__:hset", "h"),
        ]
    );
}

#[test]
fn classes_filter_and_new_keys() {
    let e = Ember::start(&["--notify-keyspace-events", "Kln"]);
    let mut c = e.conn();
    let mut sub = e.conn();
    let mut ps = sub.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    ps.psubscribe("__key*__:*").expect("psubscribe");
    // Strings and generic commands are filtered out; the list's creation is "new".
    ok(&mut c, &["SET", "s", "1"]);
    common::cmd(&mut c, &["RPUSH", "l", "a"]).expect("rpush");
    common::cmd(&mut c, &["RPOP", "l"]).expect("rpop");
    assert_eq!(
        messages(&mut ps, 4),
        vec![
            pair("__keyspace@0__:s", "new"),
            pair("__keyspace@0__:l", "new"),
            pair("__keyspace@0__:l", "rpush"),
            pair("__keyspace@0__:l", "rpop"),
        ]
    );
}

#[test]
fn expired_keys_lazy_and_active() {
    let e = Ember::start(&["--notify-keyspace-events", "Exm"]);
    let mut c = e.conn();
    let mut sub = e.conn();
    let mut ps = sub.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    ps.psubscribe("__keyevent@*").expect("psubscribe");
    // Lazy: the active cycle is paused, GET finds the key past its deadline.
    ok(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    ok(&mut c, &["SET", "lazy", "v", "PX", "5"]);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        common::cmd(&mut c, &["GET", "lazy"]).expect("get"),
        Value::Nil
    );
    assert_eq!(
        messages(&mut ps, 2),
        vec![
            pair("__keyevent@0__:expired", "lazy"),
            pair("__keyevent@0__:keymiss", "lazy"),
        ]
    );
    // Active: nobody touches the key.
    ok(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    ok(&mut c, &["SET", "active", "v", "PX", "5"]);
    assert_eq!(
        messages(&mut ps, 1),
        vec![pair("__keyevent@0__:expired", "active")]
    );
}

/// Reads from `s` until `needle` appears in what was read (or 10 s pass).
fn read_until(s: &mut std::net::TcpStream, needle: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.windows(needle.len()).any(|w| w == needle) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

#[test]
fn resp3_subscriber_gets_push_frames() {
    let e = Ember::start(&["--notify-keyspace-events", "KE$"]);
    let mut raw = e.raw();
    raw.write_all(b"HELLO 3\r\nSUBSCRIBE __keyevent@0__:incrby\r\n")
        .expect("write");
    read_until(&mut raw, b"__keyevent@0__:incrby\r\n:1\r\n");
    let mut c = e.conn();
    common::cmd(&mut c, &["INCR", "counter"]).expect("incr");
    let got = read_until(&mut raw, b"counter\r\n");
    assert_eq!(
        got,
        b">3\r\n$7\r\nmessage\r\n$21\r\n__keyevent@0__:incrby\r\n$7\r\ncounter\r\n".to_vec()
    );
}
