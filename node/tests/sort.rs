//! SORT and SORT_RO against the real binary: numeric/ALPHA order, LIMIT, BY and GET
//! patterns (strings and hash fields), STORE, error texts, and concurrent use of
//! pattern-reading SORT alongside writers (no deadlock).

mod common;

use common::{err, int, ok as q, Ember};
use redis::Value;

fn bulks(v: &[&str]) -> Value {
    Value::Array(
        v.iter()
            .map(|s| Value::BulkString(s.as_bytes().to_vec()))
            .collect(),
    )
}

fn opt_bulks(v: &[Option<&str>]) -> Value {
    Value::Array(
        v.iter()
            .map(|s| match s {
                Some(s) => Value::BulkString(s.as_bytes().to_vec()),
                None => Value::Nil,
            })
            .collect(),
    )
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

#[test]
fn numeric_alpha_and_limit() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["RPUSH", "l", "3", "1", "2", "10", "-1.5", "1e1"]);
    assert_eq!(
        q(&mut c, &["SORT", "l"]),
        bulks(&["-1.5", "1", "2", "3", "10", "1e1"])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "DESC"]),
        bulks(&["1e1", "10", "3", "2", "1", "-1.5"])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "ALPHA"]),
        bulks(&["-1.5", "1", "10", "1e1", "2", "3"])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "LIMIT", "1", "2"]),
        bulks(&["1", "2"])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "LIMIT", "-5", "2"]),
        bulks(&["-1.5", "1"])
    );
    assert_eq!(q(&mut c, &["SORT", "l", "LIMIT", "10", "2"]), bulks(&[]));
    assert_eq!(q(&mut c, &["SORT", "l", "LIMIT", "0", "0"]), bulks(&[]));
    assert_eq!(
        q(
            &mut c,
            &[
                "SORT",
                "l",
                "LIMIT",
                "9223372036854775807",
                "9223372036854775807"
            ]
        ),
        bulks(&[])
    );
    int(&mut c, &["RPUSH", "e", "", " 2", "0x10", "inf", "-inf"]);
    assert_eq!(
        q(&mut c, &["SORT", "e"]),
        bulks(&["-inf", "", " 2", "0x10", "inf"])
    );
    int(&mut c, &["RPUSH", "w", "a", "nan"]);
    assert_eq!(err(&mut c, &["SORT", "w"]), NOT_DOUBLE);
    assert_eq!(q(&mut c, &["SORT", "missing"]), bulks(&[]));
}

#[test]
fn sets_zsets_and_nosort() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["SADD", "s", "5", "3", "9", "-2"]);
    assert_eq!(q(&mut c, &["SORT", "s"]), bulks(&["-2", "3", "5", "9"]));
    assert_eq!(int(&mut c, &["SORT", "s", "BY", "nosort", "STORE", "d"]), 4);
    assert_eq!(
        q(&mut c, &["LRANGE", "d", "0", "-1"]),
        bulks(&["-2", "3", "5", "9"])
    );
    int(&mut c, &["ZADD", "z", "1", "c", "3", "a", "2", "b"]);
    assert_eq!(q(&mut c, &["SORT", "z", "ALPHA"]), bulks(&["a", "b", "c"]));
    assert_eq!(
        q(&mut c, &["SORT", "z", "BY", "nosort"]),
        bulks(&["c", "b", "a"])
    );
    assert_eq!(
        q(
            &mut c,
            &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "5"]
        ),
        bulks(&["b", "c"])
    );
    assert_eq!(err(&mut c, &["SORT", "z"]), NOT_DOUBLE);
    int(&mut c, &["RPUSH", "l", "x", "y", "z"]);
    assert_eq!(
        q(
            &mut c,
            &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "1"]
        ),
        bulks(&["y"])
    );
}

#[test]
fn by_get_and_store() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["RPUSH", "l", "1", "2", "3"]);
    q(
        &mut c,
        &[
            "MSET", "w_1", "30", "w_2", "10", "w_3", "20", "o_1", "one", "o_3", "three",
        ],
    );
    int(&mut c, &["HSET", "h_1", "f", "b", "n", "5"]);
    int(&mut c, &["HSET", "h_2", "f", "a", "n", "9"]);
    assert_eq!(
        q(&mut c, &["SORT", "l", "BY", "w_*"]),
        bulks(&["2", "3", "1"])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "BY", "h_*->f", "ALPHA"]),
        bulks(&["3", "2", "1"])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "BY", "h_*->n", "DESC"]),
        bulks(&["2", "1", "3"])
    );
    assert_eq!(
        q(
            &mut c,
            &["SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#", "GET", "h_*->f"]
        ),
        opt_bulks(&[
            None,
            Some("2"),
            Some("a"),
            Some("three"),
            Some("3"),
            None,
            Some("one"),
            Some("1"),
            Some("b"),
        ])
    );
    assert_eq!(
        q(&mut c, &["SORT", "l", "GET", "o_1"]),
        opt_bulks(&[None, None, None])
    );
    assert_eq!(
        int(
            &mut c,
            &["SORT", "l", "BY", "w_*", "GET", "o_*", "STORE", "dst"]
        ),
        3
    );
    assert_eq!(
        q(&mut c, &["LRANGE", "dst", "0", "-1"]),
        bulks(&["", "three", "one"])
    );
    assert_eq!(int(&mut c, &["SORT", "nokey", "STORE", "dst"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "dst"]), 0);
    q(&mut c, &["SET", "w_2", "x"]);
    assert_eq!(err(&mut c, &["SORT", "l", "BY", "w_*"]), NOT_DOUBLE);
}

#[test]
fn errors_and_sort_ro() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["RPUSH", "l", "2", "1"]);
    q(&mut c, &["SET", "str", "x"]);
    assert_eq!(err(&mut c, &["SORT", "str"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["SORT", "l", "FOO"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["SORT", "l", "LIMIT", "1"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut c, &["SORT", "l", "STORE"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["SORT", "l", "LIMIT", "x", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut c, &["SORT", "str", "FOO"]), "ERR syntax error");
    assert_eq!(q(&mut c, &["SORT_RO", "l"]), bulks(&["1", "2"]));
    assert_eq!(
        err(&mut c, &["SORT_RO", "l", "STORE", "d"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut c, &["SORT_RO", "str"]), WRONGTYPE);
    assert_eq!(
        q(&mut c, &["COMMAND", "GETKEYS", "SORT_RO", "l"]),
        bulks(&["l"])
    );
}

#[test]
fn pattern_sort_with_concurrent_writers() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let elems: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    let mut push = vec!["RPUSH", "l"];
    push.extend(elems.iter().map(String::as_str));
    int(&mut c, &push);
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let mut w = e.conn();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let k = format!("w_{}", (i * 7 + t) % 50);
                    let v = format!("{}", i % 13);
                    q(&mut w, &["MSET", &k, &v, "other", &v]);
                    q(&mut w, &["SET", &format!("o_{}", i % 50), "x"]);
                }
            })
        })
        .collect();
    for _ in 0..100 {
        match q(
            &mut c,
            &["SORT", "l", "BY", "w_*", "GET", "o_*", "GET", "#"],
        ) {
            Value::Array(v) => assert_eq!(v.len(), 100),
            v => panic!("unexpected {v:?}"),
        }
        assert_eq!(int(&mut c, &["SORT", "l", "BY", "w_*", "STORE", "dst"]), 50);
    }
    for w in writers {
        w.join().expect("writer");
    }
}
