//! HyperLogLog commands against the real binary: Redis's exact sparse and dense bytes,
//! cardinalities, merges, cached cardinality, corrupted strings, and (when `redis-server`
//! is installed) a live byte-for-byte comparison with Redis.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{cmd, err, free_port, int, ok, Ember};
use redis::Value;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// FNV-1a 64, to pin long byte strings to what Redis wrote.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn get(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    match ok(c, &["GET", key]) {
        Value::BulkString(b) => b,
        v => panic!("GET {key}: {v:?}"),
    }
}

fn set(c: &mut redis::Connection, key: &str, val: &[u8]) {
    let _: () = redis::cmd("SET").arg(key).arg(val).query(c).expect("SET");
}

/// PFADDs `e0 .. e{n-1}` to `key` in batches of 1000.
fn add_range(c: &mut redis::Connection, key: &str, n: usize) {
    let mut i = 0;
    while i < n {
        let mut q = redis::cmd("PFADD");
        q.arg(key);
        for j in i..n.min(i + 1000) {
            q.arg(format!("e{j}"));
        }
        let _: i64 = q.query(c).expect("PFADD");
        i += 1000;
    }
}

/// The sparse HLL Redis 7 writes for PFADD h e0 .. e9.
const REDIS_10: &str =
    "48594c4c010000000000000000000080452580472e844fc9804412844a5184430d844103844eb984408880406a8441b1";

#[test]
fn bytes_match_redis_fixtures() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    // (elements, length, fnv before PFCOUNT, PFCOUNT, fnv after PFCOUNT), from Redis.
    let cases: [(usize, usize, u64, i64, u64); 3] = [
        (10, 48, 0x4afc_b65d_27f7_d346, 10, 0xd06c_25fb_eaa2_3420),
        (
            1000,
            1906,
            0x5935_de02_3280_6824,
            1008,
            0x4ded_8ea0_046b_668d,
        ),
        (
            100_000,
            12304,
            0xafbf_1713_dc5b_a3c8,
            100_853,
            0xfd1f_c236_9477_3e63,
        ),
    ];
    for (n, len, before, count, after) in cases {
        let key = format!("h{n}");
        add_range(&mut c, &key, n);
        let v = get(&mut c, &key);
        assert_eq!(v.len(), len, "{n} elements");
        assert_eq!(fnv(&v), before, "{n} elements");
        assert_eq!(int(&mut c, &["PFCOUNT", &key]), count);
        assert_eq!(fnv(&get(&mut c, &key)), after, "cached cardinality of {n}");
    }
    assert_eq!(get(&mut c, "h10"), {
        let mut v = hex(REDIS_10);
        v[8] = 10;
        v[15] = 0;
        v
    });
}

#[test]
fn pfadd_replies_and_empty_hll() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    // Creating the key counts as a change, even with no elements.
    assert_eq!(int(&mut c, &["PFADD", "h"]), 1);
    assert_eq!(
        get(&mut c, "h"),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff"
    );
    assert_eq!(int(&mut c, &["PFADD", "h"]), 0);
    assert_eq!(int(&mut c, &["PFCOUNT", "h"]), 0);
    assert_eq!(int(&mut c, &["PFADD", "h", "a", "b", "c"]), 1);
    assert_eq!(int(&mut c, &["PFADD", "h", "a", "b"]), 0);
    assert_eq!(int(&mut c, &["PFCOUNT", "h"]), 3);
    assert_eq!(int(&mut c, &["PFCOUNT", "missing"]), 0);
    assert_eq!(
        ok(&mut c, &["TYPE", "h"]),
        Value::SimpleString("string".into())
    );
    assert!(err(&mut c, &["PFADD"]).contains("wrong number of arguments"));
    assert!(err(&mut c, &["PFCOUNT"]).contains("wrong number of arguments"));
    assert!(err(&mut c, &["PFMERGE"]).contains("wrong number of arguments"));
}

#[test]
fn cached_cardinality_is_kept_in_the_header() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    add_range(&mut c, "h", 100);
    let v = get(&mut c, "h");
    assert_eq!(v[15] & 0x80, 0x80, "stale after PFADD");
    assert_eq!(int(&mut c, &["PFCOUNT", "h"]), 100);
    let v = get(&mut c, "h");
    assert_eq!(u64::from_le_bytes(v[8..16].try_into().unwrap()), 100);
    // A forged valid cache is answered as is, as Redis does.
    let mut forged = v.clone();
    forged[8] = 42;
    set(&mut c, "h", &forged);
    assert_eq!(int(&mut c, &["PFCOUNT", "h"]), 42);
    // An update marks it stale again and the real count comes back.
    assert_eq!(int(&mut c, &["PFADD", "h", "new-element"]), 1);
    assert_eq!(int(&mut c, &["PFCOUNT", "h"]), 101);
}

#[test]
fn redis_written_hll_loads() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    set(&mut c, "r", &hex(REDIS_10));
    assert_eq!(int(&mut c, &["PFCOUNT", "r"]), 10);
    assert_eq!(int(&mut c, &["PFADD", "r", "e1"]), 0);
    assert_eq!(int(&mut c, &["PFADD", "r", "e10", "e11"]), 1);
    add_range(&mut c, "mine", 12);
    assert_eq!(int(&mut c, &["PFCOUNT", "r"]), 12);
    assert_eq!(int(&mut c, &["PFCOUNT", "mine"]), 12);
    assert_eq!(get(&mut c, "r"), get(&mut c, "mine"));
}

#[test]
fn multi_key_count_and_merge() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["PFADD", "a", "1", "2", "3"]), 1);
    assert_eq!(int(&mut c, &["PFADD", "b", "3", "4", "5"]), 1);
    let a = get(&mut c, "a");
    assert_eq!(int(&mut c, &["PFCOUNT", "a", "b", "missing"]), 5);
    // The union count leaves the keys untouched (their caches stay stale).
    assert_eq!(get(&mut c, "a"), a);
    assert_eq!(ok(&mut c, &["PFMERGE", "d", "a", "b"]), Value::Okay);
    assert_eq!(int(&mut c, &["PFCOUNT", "d"]), 5);
    // The destination is a source too.
    assert_eq!(int(&mut c, &["PFADD", "c", "9"]), 1);
    assert_eq!(ok(&mut c, &["PFMERGE", "d", "c"]), Value::Okay);
    assert_eq!(int(&mut c, &["PFCOUNT", "d"]), 6);
    // No sources, or missing ones: an empty HLL.
    assert_eq!(ok(&mut c, &["PFMERGE", "e"]), Value::Okay);
    assert_eq!(ok(&mut c, &["PFMERGE", "f", "nope"]), Value::Okay);
    assert_eq!(int(&mut c, &["PFCOUNT", "e", "f"]), 0);
    assert_eq!(
        get(&mut c, "e"),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff"
    );
    // Sparse + dense gives dense; sparse + sparse stays sparse.
    add_range(&mut c, "big", 5000);
    assert_eq!(get(&mut c, "big")[4], 0);
    assert_eq!(ok(&mut c, &["PFMERGE", "sd", "a", "big"]), Value::Okay);
    assert_eq!(get(&mut c, "sd")[4], 0);
    assert_eq!(get(&mut c, "d")[4], 1);
    assert_eq!(
        int(&mut c, &["PFCOUNT", "sd"]),
        int(&mut c, &["PFCOUNT", "big", "a"])
    );
}

#[test]
fn wrong_types_and_corruption() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(err(&mut c, &["PFADD", "l", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["PFCOUNT", "l"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["PFCOUNT", "l", "x"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["PFMERGE", "d", "l"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["PFMERGE", "l"]), WRONGTYPE);
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    ok(&mut c, &["SET", "s", "hello"]);
    ok(&mut c, &["SET", "n", "12345"]);
    for k in ["s", "n"] {
        assert_eq!(err(&mut c, &["PFADD", k, "a"]), NOT_HLL);
        assert_eq!(err(&mut c, &["PFCOUNT", k]), NOT_HLL);
        assert_eq!(err(&mut c, &["PFMERGE", "d", k]), NOT_HLL);
    }
    assert_eq!(get(&mut c, "s"), b"hello");
    assert_eq!(
        ok(&mut c, &["OBJECT", "ENCODING", "n"]),
        Value::BulkString(b"int".to_vec())
    );
    let good = hex(REDIS_10);
    // Broken magic, unknown encoding, dense of the wrong size, short header.
    let mut magic = good.clone();
    magic[0] = b'X';
    let mut enc = good.clone();
    enc[4] = 2;
    let mut dense = good.clone();
    dense[4] = 0;
    for bad in [magic, enc, dense, good[..15].to_vec()] {
        set(&mut c, "x", &bad);
        assert_eq!(err(&mut c, &["PFADD", "x", "a"]), NOT_HLL);
        assert_eq!(err(&mut c, &["PFCOUNT", "x"]), NOT_HLL);
        assert_eq!(err(&mut c, &["PFCOUNT", "x", "h"]), NOT_HLL);
    }
    // Sparse codes that do not cover exactly 16384 registers.
    for tail in [&[0x80u8][..], &[0x00], &[0x40, 0x00]] {
        let mut bad = good.clone();
        bad.extend_from_slice(tail);
        set(&mut c, "x", &bad);
        assert_eq!(err(&mut c, &["PFCOUNT", "x"]), CORRUPT);
        assert_eq!(err(&mut c, &["PFCOUNT", "x", "h"]), CORRUPT);
        assert_eq!(err(&mut c, &["PFMERGE", "d", "x"]), CORRUPT);
    }
    // Every register at 63: the estimate overflows and Redis answers LLONG_MIN.
    let mut maxed = b"HYLL\0\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    maxed.resize(12304, 0xff);
    set(&mut c, "x", &maxed);
    assert_eq!(int(&mut c, &["PFCOUNT", "x"]), i64::MIN);
    assert_eq!(int(&mut c, &["PFCOUNT", "x", "nope"]), i64::MIN);
    assert_eq!(get(&mut c, "x")[8..16], [0, 0, 0, 0, 0, 0, 0, 0x80]);
    // A header with no registers at all: the (valid, zero) cache answers, updates fail.
    set(&mut c, "x", b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0");
    assert_eq!(int(&mut c, &["PFCOUNT", "x"]), 0);
    assert_eq!(err(&mut c, &["PFADD", "x", "a"]), CORRUPT);
    // Random damage never crashes the server.
    add_range(&mut c, "dense", 3000);
    let dense = get(&mut c, "dense");
    assert_eq!(dense.len(), 12304);
    let mut seed = 1u64;
    for i in 0..300 {
        let mut v = if i % 2 == 0 {
            good.clone()
        } else {
            dense.clone()
        };
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let pos = 16 + (seed >> 33) as usize % (v.len() - 16);
        v[pos] = (seed >> 20) as u8;
        if i % 3 == 0 {
            v.push((seed >> 40) as u8);
        }
        set(&mut c, "x", &v);
        let _ = cmd(&mut c, &["PFADD", "x", &format!("r{i}")]);
        let _ = cmd(&mut c, &["PFCOUNT", "x"]);
        let _ = cmd(&mut c, &["PFCOUNT", "x", "dense"]);
        let _ = cmd(&mut c, &["PFMERGE", "y", "x"]);
    }
    assert_eq!(ok(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

// ------------------------------------------------------------------------------------------
// Live comparison with redis-server

struct RedisServer {
    port: u16,
    child: Child,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a private redis-server, or `None` when it is not installed.
fn redis_server() -> Option<RedisServer> {
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let r = RedisServer { port, child };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(r)
}

#[test]
fn byte_identical_with_live_redis() {
    let Some(rs) = redis_server() else {
        eprintln!("redis-server not available: skipped");
        return;
    };
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", rs.port))
        .and_then(|c| c.get_connection())
        .expect("redis connection");
    let e = Ember::start(&[]);
    let mut c = e.conn();
    let both = |r: &mut redis::Connection, c: &mut redis::Connection, args: &[&str]| {
        let a = cmd(r, args).map_err(|e| e.to_string());
        let b = cmd(c, args).map_err(|e| e.to_string());
        assert_eq!(a, b, "{args:?}");
    };
    for n in [10usize, 300, 1000, 2500, 100_000] {
        let key = format!("h{n}");
        add_range(&mut r, &key, n);
        add_range(&mut c, &key, n);
        assert_eq!(get(&mut r, &key), get(&mut c, &key), "{n} elements");
        both(&mut r, &mut c, &["PFCOUNT", &key]);
        assert_eq!(get(&mut r, &key), get(&mut c, &key), "{n} after PFCOUNT");
    }
    // One element at a time through the sparse -> dense promotion.
    for i in 0..2500 {
        let ele = format!("x{i}");
        both(&mut r, &mut c, &["PFADD", "one", &ele]);
        if i % 250 == 0 {
            both(&mut r, &mut c, &["PFCOUNT", "one"]);
        }
    }
    assert_eq!(get(&mut r, "one"), get(&mut c, "one"));
    // Merges of sparse and dense, into new and existing destinations.
    for args in [
        &["PFMERGE", "m1", "h10", "h300"][..],
        &["PFMERGE", "m2", "h10", "h100000"],
        &["PFMERGE", "h300", "h1000"],
        &["PFMERGE", "m3", "nope"],
        &["PFMERGE", "m1", "h2500"],
    ] {
        both(&mut r, &mut c, args);
        assert_eq!(get(&mut r, args[1]), get(&mut c, args[1]), "{args:?}");
    }
    both(&mut r, &mut c, &["PFCOUNT", "h10", "h300", "h1000", "nope"]);
    both(&mut r, &mut c, &["PFCOUNT", "m1", "m2", "one"]);
    // HLLs written by Redis load here and keep evolving identically.
    for key in ["h10", "h1000", "h100000", "m1"] {
        let v = get(&mut r, key);
        let k2 = format!("{key}:copy");
        set(&mut c, &k2, &v);
        set(&mut r, &k2, &v);
        both(&mut r, &mut c, &["PFCOUNT", &k2]);
        both(&mut r, &mut c, &["PFADD", &k2, "z1", "z2", "z3", "e5"]);
        both(&mut r, &mut c, &["PFCOUNT", &k2]);
        assert_eq!(get(&mut r, &k2), get(&mut c, &k2), "{k2}");
    }
}
