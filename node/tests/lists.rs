//! List commands against the real binary: reply shapes, error texts, encodings, and the
//! atomicity of multi-key moves under concurrent clients.

mod common;

use common::{err, int, ok as q, raw_roundtrip, Ember};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| bulk(s)).collect())
}

fn range(c: &mut redis::Connection, key: &str) -> Value {
    q(c, &["LRANGE", key, "0", "-1"])
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn push_pop_range() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["RPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(int(&mut c, &["LPUSH", "l", "x", "y"]), 5);
    assert_eq!(range(&mut c, "l"), bulks(&["y", "x", "a", "b", "c"]));
    assert_eq!(q(&mut c, &["LPOP", "l"]), bulk("y"));
    assert_eq!(q(&mut c, &["RPOP", "l", "2"]), bulks(&["c", "b"]));
    assert_eq!(q(&mut c, &["LPOP", "l", "0"]), Value::Array(vec![]));
    assert_eq!(int(&mut c, &["LLEN", "l"]), 2);
    assert_eq!(q(&mut c, &["RPOP", "l", "9"]), bulks(&["a", "x"]));
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    assert_eq!(q(&mut c, &["LPOP", "l"]), Value::Nil);
    assert_eq!(int(&mut c, &["LPUSHX", "l", "a"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    assert_eq!(
        err(&mut c, &["LPOP", "l", "-1"]),
        "ERR value is out of range, must be positive"
    );
}

#[test]
fn index_set_insert_rem_trim_pos() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["RPUSH", "l", "a", "b", "c", "b", "a"]);
    assert_eq!(q(&mut c, &["LINDEX", "l", "-1"]), bulk("a"));
    assert_eq!(q(&mut c, &["LINDEX", "l", "9"]), Value::Nil);
    assert_eq!(q(&mut c, &["LSET", "l", "0", "z"]), Value::Okay);
    assert_eq!(
        err(&mut c, &["LSET", "l", "5", "z"]),
        "ERR index out of range"
    );
    assert_eq!(err(&mut c, &["LSET", "nokey", "0", "z"]), "ERR no such key");
    assert_eq!(int(&mut c, &["LINSERT", "l", "AFTER", "c", "d"]), 6);
    assert_eq!(int(&mut c, &["LINSERT", "l", "BEFORE", "nope", "d"]), -1);
    assert_eq!(range(&mut c, "l"), bulks(&["z", "b", "c", "d", "b", "a"]));
    assert_eq!(int(&mut c, &["LPOS", "l", "b", "RANK", "-1"]), 4);
    assert_eq!(
        q(&mut c, &["LPOS", "l", "b", "COUNT", "0"]),
        Value::Array(vec![Value::Int(1), Value::Int(4)])
    );
    assert!(err(&mut c, &["LPOS", "l", "b", "RANK", "0"]).starts_with("ERR RANK can't be zero"));
    assert_eq!(int(&mut c, &["LREM", "l", "-1", "b"]), 1);
    assert_eq!(range(&mut c, "l"), bulks(&["z", "b", "c", "d", "a"]));
    assert_eq!(q(&mut c, &["LTRIM", "l", "1", "-2"]), Value::Okay);
    assert_eq!(range(&mut c, "l"), bulks(&["b", "c", "d"]));
    assert_eq!(q(&mut c, &["LTRIM", "l", "-1", "0"]), Value::Okay);
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
}

#[test]
fn huge_ranges_and_counts_do_not_allocate_or_panic() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["RPUSH", "l", "a", "b"]);
    assert_eq!(
        q(&mut c, &["LRANGE", "l", "0", "1000000000000"]),
        bulks(&["a", "b"])
    );
    assert_eq!(
        q(
            &mut c,
            &["LRANGE", "l", "-9223372036854775808", "9223372036854775807"]
        ),
        bulks(&["a", "b"])
    );
    assert_eq!(
        q(&mut c, &["LPOS", "l", "a", "COUNT", "9223372036854775807"]),
        Value::Array(vec![Value::Int(0)])
    );
    assert_eq!(
        q(&mut c, &["LPOS", "l", "a", "RANK", "-9223372036854775807"]),
        Value::Nil
    );
    assert_eq!(
        q(
            &mut c,
            &["LMPOP", "1", "l", "LEFT", "COUNT", "9223372036854775807"]
        ),
        Value::Array(vec![bulk("l"), bulks(&["a", "b"])])
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "9223372036854775807", "l", "LEFT"]),
        "ERR syntax error"
    );
    assert_eq!(int(&mut c, &["LREM", "l", "-9223372036854775808", "a"]), 0);
    assert_eq!(q(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn moves_and_wrongtype() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["RPUSH", "s", "1", "2", "3"]);
    q(&mut c, &["SET", "str", "v"]);
    assert_eq!(q(&mut c, &["LMOVE", "s", "d", "LEFT", "RIGHT"]), bulk("1"));
    assert_eq!(q(&mut c, &["RPOPLPUSH", "s", "d"]), bulk("3"));
    assert_eq!(range(&mut c, "d"), bulks(&["3", "1"]));
    assert_eq!(q(&mut c, &["RPOPLPUSH", "d", "d"]), bulk("1"));
    assert_eq!(range(&mut c, "d"), bulks(&["1", "3"]));
    assert_eq!(
        err(&mut c, &["LMOVE", "s", "str", "LEFT", "LEFT"]),
        WRONGTYPE
    );
    assert_eq!(range(&mut c, "s"), bulks(&["2"]));
    assert_eq!(err(&mut c, &["LPUSH", "str", "x"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["LRANGE", "str", "0", "1"]), WRONGTYPE);
    assert_eq!(
        q(
            &mut c,
            &["LMPOP", "3", "nokey", "s", "d", "RIGHT", "COUNT", "5"]
        ),
        Value::Array(vec![bulk("s"), bulks(&["2"])])
    );
    assert_eq!(int(&mut c, &["EXISTS", "s"]), 0);
    assert_eq!(err(&mut c, &["LMPOP", "1", "str", "LEFT"]), WRONGTYPE);
    assert_eq!(
        q(&mut c, &["TYPE", "d"]),
        Value::SimpleString("list".into())
    );
}

#[test]
fn encodings() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let items: Vec<String> = (0..128).map(|i| i.to_string()).collect();
    let mut args = vec!["RPUSH", "l"];
    args.extend(items.iter().map(|s| s.as_str()));
    q(&mut c, &args);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "l"]), bulk("listpack"));
    q(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "l"]), bulk("quicklist"));
    q(&mut c, &["LTRIM", "l", "0", "9"]);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "l"]), bulk("listpack"));
    let big = "x".repeat(9000);
    q(&mut c, &["RPUSH", "b", &big]);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "b"]), bulk("quicklist"));
}

#[test]
fn resp3_null_shapes() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let hello = raw_roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%"));
    // Drain the rest of HELLO's map.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let _ = raw_roundtrip(&mut s, b"PING\r\n", 0);
    let mut rest = Vec::new();
    while !rest.ends_with(b"+PONG\r\n") {
        rest.extend(raw_roundtrip(&mut s, b"", 1));
    }
    let reply = raw_roundtrip(
        &mut s,
        b"LPOP nokey\r\nLPOP nokey 2\r\nLMPOP 1 nokey LEFT\r\nLPOS nokey a COUNT 1\r\n",
        13,
    );
    assert_eq!(reply, b"_\r\n_\r\n_\r\n*0\r\n");
    let mut s2 = e.raw();
    let reply = raw_roundtrip(
        &mut s2,
        b"LPOP nokey\r\nLPOP nokey 2\r\nLMPOP 1 nokey LEFT\r\n",
        15,
    );
    assert_eq!(reply, b"$-1\r\n*-1\r\n*-1\r\n");
}

#[test]
fn concurrent_lmove_keeps_every_element() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let items: Vec<String> = (0..200).map(|i| i.to_string()).collect();
    let mut args = vec!["RPUSH", "a"];
    args.extend(items.iter().map(|s| s.as_str()));
    q(&mut c, &args);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let client = e.client();
            std::thread::spawn(move || {
                let mut c = client.get_connection().expect("connect");
                for i in 0..300 {
                    let (src, dst) = if (i + t) % 2 == 0 {
                        ("a", "b")
                    } else {
                        ("b", "a")
                    };
                    let _ = common::cmd(&mut c, &["LMOVE", src, dst, "LEFT", "RIGHT"]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let na = int(&mut c, &["LLEN", "a"]);
    let nb = int(&mut c, &["LLEN", "b"]);
    assert_eq!(na + nb, 200);
}
