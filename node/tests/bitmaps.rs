//! Bitmap commands against the real binary: SETBIT/GETBIT, BITCOUNT and BITPOS ranges
//! (BYTE and BIT), BITOP, BITFIELD/BITFIELD_RO with every overflow mode, error texts and
//! the RESP3 null of a failed BITFIELD operation.

mod common;

use common::{err, int, ok as q, raw_roundtrip, Ember};
use redis::Value;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

fn raw_get(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    match q(c, &["GET", key]) {
        Value::BulkString(b) => b,
        v => panic!("GET {key}: {v:?}"),
    }
}

fn ints(v: &[Option<i64>]) -> Value {
    Value::Array(v.iter().map(|x| x.map_or(Value::Nil, Value::Int)).collect())
}

#[test]
fn setbit_getbit() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["SETBIT", "k", "7", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "k", "7", "1"]), 1);
    assert_eq!(int(&mut c, &["SETBIT", "k", "0", "1"]), 0);
    assert_eq!(raw_get(&mut c, "k"), b"\x81");
    assert_eq!(int(&mut c, &["GETBIT", "k", "0"]), 1);
    assert_eq!(int(&mut c, &["GETBIT", "k", "1"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "k", "1000"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "nokey", "3"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "g", "23", "0"]), 0);
    assert_eq!(raw_get(&mut c, "g"), b"\x00\x00\x00");
    // An int-encoded value is read and edited as its text.
    q(&mut c, &["SET", "n", "1"]);
    assert_eq!(int(&mut c, &["GETBIT", "n", "7"]), 1);
    assert_eq!(int(&mut c, &["SETBIT", "n", "6", "1"]), 0);
    assert_eq!(raw_get(&mut c, "n"), b"3");

    assert_eq!(err(&mut c, &["SETBIT", "k", "-1", "1"]), BAD_OFFSET);
    assert_eq!(err(&mut c, &["SETBIT", "k", "4294967296", "1"]), BAD_OFFSET);
    assert_eq!(err(&mut c, &["SETBIT", "k", "#1", "1"]), BAD_OFFSET);
    assert_eq!(err(&mut c, &["GETBIT", "k", "x"]), BAD_OFFSET);
    assert_eq!(
        err(&mut c, &["SETBIT", "k", "1", "2"]),
        "ERR bit is not an integer or out of range"
    );
    q(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(err(&mut c, &["SETBIT", "l", "1", "1"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GETBIT", "l", "1"]), WRONGTYPE);
}

#[test]
fn setbit_max_offset_allocates_512mb() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["SETBIT", "big", "4294967295", "1"]), 0);
    assert_eq!(int(&mut c, &["STRLEN", "big"]), 536_870_912);
    assert_eq!(int(&mut c, &["GETBIT", "big", "4294967295"]), 1);
    assert_eq!(int(&mut c, &["BITCOUNT", "big"]), 1);
    assert_eq!(int(&mut c, &["BITPOS", "big", "1"]), 4294967295);
    assert_eq!(int(&mut c, &["DEL", "big"]), 1);
}

#[test]
fn bitcount_and_bitpos() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "k", "foobar"]);
    assert_eq!(int(&mut c, &["BITCOUNT", "k"]), 26);
    assert_eq!(int(&mut c, &["BITCOUNT", "k", "1", "1"]), 6);
    assert_eq!(int(&mut c, &["BITCOUNT", "k", "-3", "-1"]), 10);
    assert_eq!(int(&mut c, &["BITCOUNT", "k", "-1", "-3"]), 0);
    assert_eq!(int(&mut c, &["BITCOUNT", "k", "5", "30", "BIT"]), 17);
    assert_eq!(int(&mut c, &["BITCOUNT", "k", "-7", "-1", "bit"]), 4);
    assert_eq!(int(&mut c, &["BITCOUNT", "nokey"]), 0);
    assert_eq!(err(&mut c, &["BITCOUNT", "k", "0"]), "ERR syntax error");
    assert_eq!(
        err(&mut c, &["BITCOUNT", "k", "0", "1", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["BITCOUNT", "nokey", "0", "1", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["BITCOUNT", "k", "a", "1"]),
        "ERR value is not an integer or out of range"
    );

    q(&mut c, &["SET", "p", "\u{0}"]);
    q(&mut c, &["SETRANGE", "p", "1", "\u{7f}"]);
    // p = 00000000 01111111
    assert_eq!(int(&mut c, &["BITPOS", "p", "1"]), 9);
    assert_eq!(int(&mut c, &["BITPOS", "p", "0"]), 0);
    assert_eq!(int(&mut c, &["BITPOS", "p", "0", "1"]), 8);
    assert_eq!(int(&mut c, &["BITPOS", "p", "1", "10", "15", "BIT"]), 10);
    assert_eq!(int(&mut c, &["BITPOS", "p", "0", "9", "15", "BIT"]), -1);
    q(&mut c, &["SET", "ones", "\u{7f}"]);
    q(&mut c, &["SETBIT", "ones", "0", "1"]);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0"]), 8);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0", "0", "-1"]), -1);
    assert_eq!(int(&mut c, &["BITPOS", "nokey", "0"]), 0);
    assert_eq!(int(&mut c, &["BITPOS", "nokey", "1"]), -1);
    assert_eq!(
        err(&mut c, &["BITPOS", "p", "3"]),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(
        err(&mut c, &["BITPOS", "nokey", "1", "0", "1", "bits"]),
        "ERR syntax error"
    );
    q(&mut c, &["SADD", "s", "a"]);
    assert_eq!(err(&mut c, &["BITCOUNT", "s"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["BITPOS", "s", "1"]), WRONGTYPE);
}

#[test]
fn bitop() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "a", "\u{70}\u{0f}\u{2a}"]);
    q(&mut c, &["SET", "b", "\u{7f}\u{00}"]);
    assert_eq!(int(&mut c, &["BITOP", "AND", "d", "a", "b"]), 3);
    assert_eq!(raw_get(&mut c, "d"), b"\x70\x00\x00");
    assert_eq!(int(&mut c, &["BITOP", "or", "d", "a", "b"]), 3);
    assert_eq!(raw_get(&mut c, "d"), b"\x7f\x0f\x2a");
    assert_eq!(int(&mut c, &["BITOP", "XOR", "d", "a", "b", "nokey"]), 3);
    assert_eq!(raw_get(&mut c, "d"), b"\x0f\x0f\x2a");
    assert_eq!(int(&mut c, &["BITOP", "NOT", "d", "a"]), 3);
    assert_eq!(raw_get(&mut c, "d"), b"\x8f\xf0\xd5");
    assert_eq!(int(&mut c, &["BITOP", "XOR", "a", "a", "b"]), 3);
    assert_eq!(raw_get(&mut c, "a"), b"\x0f\x0f\x2a");
    // An empty result deletes the destination, whatever its type.
    q(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(int(&mut c, &["BITOP", "OR", "l", "m1", "m2"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    // The destination loses its TTL.
    q(&mut c, &["SET", "t", "x", "EX", "100"]);
    assert_eq!(int(&mut c, &["BITOP", "AND", "t", "b"]), 2);
    assert_eq!(int(&mut c, &["TTL", "t"]), -1);
    assert_eq!(
        err(&mut c, &["BITOP", "NOT", "d", "a", "b"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    assert_eq!(
        err(&mut c, &["BITOP", "NAND", "d", "a"]),
        "ERR syntax error"
    );
    q(&mut c, &["SADD", "s", "a"]);
    assert_eq!(err(&mut c, &["BITOP", "AND", "z", "a", "s"]), WRONGTYPE);
    assert_eq!(int(&mut c, &["EXISTS", "z"]), 0);
}

#[test]
fn bitfield_ops_and_overflow() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(
        q(
            &mut c,
            &["BITFIELD", "k", "SET", "u8", "0", "250", "INCRBY", "u8", "0", "10"]
        ),
        ints(&[Some(0), Some(4)])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "BITFIELD", "k", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "300", "INCRBY", "u8",
                "0", "-1000"
            ]
        ),
        ints(&[Some(255), Some(0)])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "256", "OVERFLOW",
                "WRAP", "INCRBY", "u8", "0", "257"
            ]
        ),
        ints(&[None, Some(1)])
    );
    assert_eq!(
        q(
            &mut c,
            &[
                "BITFIELD", "k", "SET", "i8", "#1", "127", "INCRBY", "i8", "#1", "1", "GET", "u8",
                "8"
            ]
        ),
        ints(&[Some(0), Some(-128), Some(128)])
    );
    assert_eq!(
        q(
            &mut c,
            &["BITFIELD", "k", "SET", "i64", "0", "-1", "GET", "u63", "1", "GET", "i64", "0"]
        ),
        ints(&[Some(0x0180_0000_0000_0000), Some(i64::MAX), Some(-1)])
    );
    // FAIL still creates (and grows) the key.
    assert_eq!(
        q(
            &mut c,
            &["BITFIELD", "f", "OVERFLOW", "FAIL", "SET", "u2", "10", "9"]
        ),
        ints(&[None])
    );
    assert_eq!(raw_get(&mut c, "f"), b"\x00\x00");
    assert_eq!(
        q(&mut c, &["BITFIELD", "nokey", "GET", "i8", "0"]),
        ints(&[Some(0)])
    );
    assert_eq!(int(&mut c, &["EXISTS", "nokey"]), 0);
    assert_eq!(q(&mut c, &["BITFIELD", "k"]), ints(&[]));

    assert_eq!(err(&mut c, &["BITFIELD", "k", "GET", "u64", "0"]), BAD_TYPE);
    assert_eq!(err(&mut c, &["BITFIELD", "k", "GET", "i65", "0"]), BAD_TYPE);
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "GET", "i8", "#-1"]),
        BAD_OFFSET
    );
    assert_eq!(
        err(
            &mut c,
            &["BITFIELD", "k", "SET", "i64", "#9223372036854775807", "1"]
        ),
        BAD_OFFSET
    );
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "GET", "i8"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(
            &mut c,
            &["BITFIELD", "k", "OVERFLOW", "NO", "GET", "i8", "0"]
        ),
        "ERR Invalid OVERFLOW type specified"
    );
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "INCRBY", "i8", "0", "1.5"]),
        "ERR value is not an integer or out of range"
    );
    q(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(err(&mut c, &["BITFIELD", "l", "GET", "i8", "0"]), WRONGTYPE);
    assert_eq!(
        err(&mut c, &["BITFIELD", "l", "SET", "i8", "0", "1"]),
        WRONGTYPE
    );
}

#[test]
fn bitfield_ro() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    q(&mut c, &["SET", "k", "abc"]);
    assert_eq!(
        q(
            &mut c,
            &["BITFIELD_RO", "k", "GET", "u8", "0", "GET", "i4", "#1"]
        ),
        ints(&[Some(97), Some(1)])
    );
    assert_eq!(
        err(&mut c, &["BITFIELD_RO", "k", "SET", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    assert_eq!(
        err(&mut c, &["BITFIELD_RO", "k", "SET", "u64", "0", "1"]),
        BAD_TYPE
    );
    assert_eq!(raw_get(&mut c, "k"), b"abc");
}

#[test]
fn resp3_null_for_failed_bitfield() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let hello = raw_roundtrip(&mut s, b"HELLO 3\r\n", 1);
    assert!(hello.starts_with(b"%"));
    // Drain whatever is left of the HELLO map.
    std::thread::sleep(std::time::Duration::from_millis(100));
    s.set_nonblocking(true).ok();
    let mut sink = [0u8; 4096];
    while std::io::Read::read(&mut s, &mut sink).is_ok_and(|n| n > 0) {}
    s.set_nonblocking(false).ok();
    let want = b"*2\r\n_\r\n:0\r\n";
    let got = raw_roundtrip(
        &mut s,
        b"BITFIELD k OVERFLOW FAIL SET u1 0 2 GET u1 0\r\n",
        want.len(),
    );
    assert_eq!(got, want);
    let want = b"*1\r\n$-1\r\n";
    let mut s2 = e.raw();
    let got = raw_roundtrip(
        &mut s2,
        b"BITFIELD k OVERFLOW FAIL INCRBY u1 0 2\r\n",
        want.len(),
    );
    assert_eq!(got, want);
}
