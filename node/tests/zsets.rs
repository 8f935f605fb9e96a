//! Sorted-set commands against the real binary: options, reply shapes (RESP2 and RESP3),
//! error texts, encodings and the empty-key rule.

mod common;

use common::{err, int, ok as q, raw_roundtrip, Ember};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn bulks(v: &[&str]) -> Value {
    Value::Array(v.iter().map(|s| bulk(s)).collect())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn zadd_options_and_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]), 3);
    assert_eq!(
        int(&mut c, &["ZADD", "z", "CH", "5", "a", "2", "b", "4", "d"]),
        2
    );
    assert_eq!(int(&mut c, &["ZADD", "z", "NX", "9", "a", "9", "e"]), 1);
    assert_eq!(int(&mut c, &["ZADD", "z", "XX", "9", "zz"]), 0);
    assert_eq!(
        int(&mut c, &["ZADD", "z", "GT", "CH", "1", "a", "10", "b"]),
        1
    );
    assert_eq!(
        int(&mut c, &["ZADD", "z", "LT", "CH", "1", "a", "20", "b"]),
        1
    );
    assert_eq!(q(&mut c, &["ZSCORE", "z", "a"]), bulk("1"));
    assert_eq!(q(&mut c, &["ZADD", "z", "INCR", "1.5", "a"]), bulk("2.5"));
    assert_eq!(
        q(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        Value::Nil
    );
    assert_eq!(
        q(&mut c, &["ZADD", "nokey", "XX", "INCR", "1", "a"]),
        Value::Nil
    );
    assert_eq!(int(&mut c, &["EXISTS", "nokey"]), 0);
    assert_eq!(
        err(&mut c, &["ZADD", "z", "XX", "NX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "GT", "LT", "1", "a"]),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "nan", "a"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "1", "a", "2"]),
        "ERR syntax error"
    );
    assert_eq!(q(&mut c, &["ZADD", "z", "INCR", "+inf", "i"]), bulk("inf"));
    assert_eq!(
        err(&mut c, &["ZADD", "z", "INCR", "-inf", "i"]),
        "ERR resulting score is not a number (NaN)"
    );
    q(&mut c, &["SET", "s", "v"]);
    assert_eq!(err(&mut c, &["ZADD", "s", "1", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["ZRANGE", "s", "0", "-1"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["ZUNION", "1", "s"]), WRONGTYPE);
}

#[test]
fn ranges_ranks_and_removal() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    assert_eq!(q(&mut c, &["ZRANGE", "z", "1", "2"]), bulks(&["b", "c"]));
    assert_eq!(
        q(&mut c, &["ZRANGE", "z", "0", "0", "REV", "WITHSCORES"]),
        bulks(&["e", "5"])
    );
    assert_eq!(
        q(
            &mut c,
            &["ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "2"]
        ),
        bulks(&["c", "d"])
    );
    assert_eq!(
        q(
            &mut c,
            &["ZREVRANGEBYSCORE", "z", "(5", "-inf", "LIMIT", "0", "2"]
        ),
        bulks(&["d", "c"])
    );
    assert_eq!(int(&mut c, &["ZCOUNT", "z", "(1", "(5"]), 3);
    assert_eq!(int(&mut c, &["ZRANK", "z", "c"]), 2);
    assert_eq!(int(&mut c, &["ZREVRANK", "z", "c"]), 2);
    assert_eq!(
        q(&mut c, &["ZRANK", "z", "d", "WITHSCORE"]),
        Value::Array(vec![Value::Int(3), bulk("4")])
    );
    assert_eq!(q(&mut c, &["ZRANK", "z", "x"]), Value::Nil);
    assert_eq!(
        err(&mut c, &["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        err(&mut c, &["ZCOUNT", "z", "x", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        err(&mut c, &["ZLEXCOUNT", "z", "a", "+"]),
        "ERR min or max not valid string range item"
    );
    assert_eq!(int(&mut c, &["ZREM", "z", "a", "nope"]), 1);
    assert_eq!(int(&mut c, &["ZREMRANGEBYSCORE", "z", "-inf", "(3"]), 1);
    assert_eq!(int(&mut c, &["ZREMRANGEBYRANK", "z", "-1", "-1"]), 1);
    assert_eq!(q(&mut c, &["ZRANGE", "z", "0", "-1"]), bulks(&["c", "d"]));
    assert_eq!(int(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-1"]), 2);
    assert_eq!(int(&mut c, &["EXISTS", "z"]), 0);
    // Huge counts on a tiny set neither hang nor allocate.
    int(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(
        q(&mut c, &["ZRANGE", "z", "0", "1000000000000"]),
        bulks(&["a"])
    );
    assert_eq!(
        q(&mut c, &["ZPOPMAX", "z", "1000000000000"]),
        bulks(&["a", "1"])
    );
}

#[test]
fn lex_ranges() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(
        &mut c,
        &[
            "ZADD", "z", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e",
        ],
    );
    assert_eq!(
        q(&mut c, &["ZRANGEBYLEX", "z", "(a", "[c"]),
        bulks(&["b", "c"])
    );
    assert_eq!(
        q(
            &mut c,
            &["ZREVRANGEBYLEX", "z", "+", "-", "LIMIT", "1", "2"]
        ),
        bulks(&["d", "c"])
    );
    assert_eq!(int(&mut c, &["ZLEXCOUNT", "z", "-", "+"]), 5);
    assert_eq!(int(&mut c, &["ZREMRANGEBYLEX", "z", "[b", "(d"]), 2);
    assert_eq!(int(&mut c, &["ZCARD", "z"]), 3);
}

#[test]
fn pops_and_store() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q(&mut c, &["ZPOPMIN", "z"]), bulks(&["a", "1"]));
    assert_eq!(q(&mut c, &["ZPOPMAX", "z", "1"]), bulks(&["c", "3"]));
    assert_eq!(
        err(&mut c, &["ZPOPMIN", "z", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(int(&mut c, &["ZRANGESTORE", "d", "z", "0", "-1"]), 1);
    assert_eq!(q(&mut c, &["ZRANGE", "d", "0", "-1"]), bulks(&["b"]));
    int(&mut c, &["ZADD", "o", "5", "b", "7", "x"]);
    assert_eq!(
        int(
            &mut c,
            &["ZUNIONSTORE", "u", "2", "z", "o", "WEIGHTS", "2", "1"]
        ),
        2
    );
    assert_eq!(
        q(&mut c, &["ZRANGE", "u", "0", "-1", "WITHSCORES"]),
        bulks(&["x", "7", "b", "9"])
    );
    assert_eq!(int(&mut c, &["ZINTERCARD", "2", "z", "o"]), 1);
    assert_eq!(
        q(&mut c, &["ZDIFF", "2", "o", "z", "WITHSCORES"]),
        bulks(&["x", "7"])
    );
    assert_eq!(
        q(&mut c, &["ZMPOP", "2", "none", "o", "MAX"]),
        Value::Array(vec![bulk("o"), Value::Array(vec![bulks(&["x", "7"])])])
    );
    assert_eq!(int(&mut c, &["ZINTERSTORE", "u", "2", "z", "nokey"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "u"]), 0);
}

#[test]
fn encodings() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let mut args: Vec<String> = vec!["ZADD".into(), "z".into()];
    for i in 0..128 {
        args.push(i.to_string());
        args.push(format!("m{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(int(&mut c, &refs), 128);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "z"]), bulk("listpack"));
    int(&mut c, &["ZADD", "z", "500", "extra"]);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "z"]), bulk("skiplist"));
    assert_eq!(int(&mut c, &["ZRANK", "z", "m77"]), 77);
    assert_eq!(
        q(&mut c, &["ZRANGE", "z", "-2", "-1"]),
        bulks(&["m127", "extra"])
    );
    let long = "x".repeat(65);
    int(&mut c, &["ZADD", "l", "1", &long]);
    assert_eq!(q(&mut c, &["OBJECT", "ENCODING", "l"]), bulk("skiplist"));
    assert_eq!(
        q(&mut c, &["TYPE", "z"]),
        Value::SimpleString("zset".into())
    );
}

#[test]
fn resp3_shapes() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let hello = raw_roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%"));
    let r = raw_roundtrip(&mut s, b"ZADD z 1 a 2.5 b\r\n", 4);
    assert_eq!(r, b":2\r\n");
    let r = raw_roundtrip(&mut s, b"ZSCORE z b\r\n", 6);
    assert_eq!(r, b",2.5\r\n");
    let want = b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n";
    let r = raw_roundtrip(&mut s, b"ZRANGE z 0 -1 WITHSCORES\r\n", want.len());
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(want));
    let want = b"*2\r\n$1\r\na\r\n,1\r\n";
    let r = raw_roundtrip(&mut s, b"ZPOPMIN z\r\n", want.len());
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(want));
    let r = raw_roundtrip(&mut s, b"ZSCORE z nope\r\n", 3);
    assert_eq!(r, b"_\r\n");
}

#[test]
fn setops_accept_plain_sets() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    int(&mut c, &["ZADD", "z", "5", "a", "2", "b", "-1", "c"]);
    int(&mut c, &["SADD", "s", "a", "c", "d"]);
    int(&mut c, &["SADD", "ints", "1", "2", "3"]);
    int(&mut c, &["ZADD", "zi", "10", "2", "0.5", "3", "4", "9"]);
    assert_eq!(
        q(&mut c, &["ZUNION", "2", "z", "s", "WITHSCORES"]),
        bulks(&["c", "0", "d", "1", "b", "2", "a", "6"])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "ZINTER",
                "2",
                "s",
                "z",
                "WEIGHTS",
                "3",
                "2",
                "AGGREGATE",
                "MAX",
                "WITHSCORES"
            ]
        ),
        bulks(&["c", "3", "a", "10"])
    );
    assert_eq!(q(&mut c, &["ZDIFF", "2", "s", "z"]), bulks(&["d"]));
    assert_eq!(
        q(
            &mut c,
            &[
                "ZINTER",
                "2",
                "ints",
                "zi",
                "AGGREGATE",
                "MIN",
                "WITHSCORES"
            ]
        ),
        bulks(&["3", "0.5", "2", "1"])
    );
    assert_eq!(int(&mut c, &["ZINTERCARD", "2", "ints", "zi"]), 2);
    assert_eq!(
        int(
            &mut c,
            &["ZUNIONSTORE", "d", "2", "s", "ints", "WEIGHTS", "2", "-1"]
        ),
        6
    );
    assert_eq!(
        q(&mut c, &["TYPE", "d"]),
        Value::SimpleString("zset".into())
    );
    assert_eq!(
        q(&mut c, &["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        bulks(&["1", "-1", "2", "-1", "3", "-1", "a", "2", "c", "2", "d", "2"])
    );
    assert_eq!(int(&mut c, &["ZINTERSTORE", "d", "2", "s", "ints"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(int(&mut c, &["ZDIFFSTORE", "s", "2", "s", "z"]), 1);
    assert_eq!(
        q(&mut c, &["TYPE", "s"]),
        Value::SimpleString("zset".into())
    );
    let mut big = vec!["SADD", "big"];
    let nums: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    big.extend(nums.iter().map(String::as_str));
    assert_eq!(int(&mut c, &big), 600);
    assert_eq!(int(&mut c, &["ZINTERCARD", "2", "big", "zi"]), 3);
    assert_eq!(int(&mut c, &["ZINTERCARD", "1", "big", "LIMIT", "7"]), 7);
    int(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(err(&mut c, &["ZUNION", "2", "z", "l"]), WRONGTYPE);
    assert_eq!(
        err(&mut c, &["ZINTERSTORE", "d", "2", "ints", "l"]),
        WRONGTYPE
    );
}
