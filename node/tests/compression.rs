//! String value compression against the real binary: every string command on compressed
//! values gives the same replies as a node with compression off, CONFIG SET toggles the
//! policy for later writes, and INFO counts the live compressed values and the bytes saved.

mod common;

use std::time::{Duration, Instant};

use common::Ember;
use redis::Value;

/// JSON-like text of `n` bytes (compresses well).
fn json(n: usize, seed: u32) -> Vec<u8> {
    let mut v = Vec::new();
    let mut i = seed;
    while v.len() < n {
        v.extend_from_slice(
            format!("{{\"id\":{i},\"user\":\"name{i}\",\"ok\":true,\"tags\":[\"x\",\"y\"]}},")
                .as_bytes(),
        );
        i += 1;
    }
    v.truncate(n);
    v
}

/// Pseudo-random bytes (do not compress).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn run(c: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).expect("command name"));
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(c).map_err(|e| {
        let code = e.code().unwrap_or("");
        let detail = e.detail().unwrap_or("");
        format!("{code} {detail}")
    })
}

/// A node with compression on (threshold 64 bytes) and one with it off.
struct Pair {
    on: redis::Connection,
    off: redis::Connection,
    _servers: (Ember, Ember),
}

impl Pair {
    fn start() -> Pair {
        let a = Ember::start(&["--compression", "yes", "--compression-threshold", "64"]);
        let b = Ember::start(&[]);
        Pair {
            on: a.conn(),
            off: b.conn(),
            _servers: (a, b),
        }
    }

    /// Runs `args` on both nodes and checks that the replies are the same.
    fn both(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        let a = run(&mut self.on, args);
        let b = run(&mut self.off, args);
        assert_eq!(
            a,
            b,
            "{:?}",
            args.iter()
                .map(|x| String::from_utf8_lossy(&x[..x.len().min(40)]).into_owned())
                .collect::<Vec<_>>()
        );
        a
    }

    /// Same as [`Pair::both`] for text arguments.
    fn both_s(&mut self, args: &[&str]) -> Result<Value, String> {
        let v: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.both(&v)
    }
}

fn info_field(c: &mut redis::Connection, name: &str) -> String {
    let info: String = redis::cmd("INFO").arg("memory").query(c).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO memory has no {name}"))
        .trim()
        .to_string()
}

fn info_u64(c: &mut redis::Connection, name: &str) -> u64 {
    info_field(c, name).parse().expect("number")
}

fn bulk(v: Result<Value, String>) -> Vec<u8> {
    match v {
        Ok(Value::BulkString(b)) => b,
        other => panic!("not a bulk string: {other:?}"),
    }
}

fn int(v: Result<Value, String>) -> i64 {
    match v {
        Ok(Value::Int(i)) => i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Waits until INFO reports `n` compressed values (frees may be lazy).
fn wait_compressed(c: &mut redis::Connection, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_u64(c, "compressed_values") != n {
        assert!(
            Instant::now() < deadline,
            "compressed_values stays {} (want {n})",
            info_u64(c, "compressed_values")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn string_commands_see_original_bytes() {
    let mut p = Pair::start();
    let text = json(1000, 0);
    p.both(&[b"SET", b"k", &text]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 1);
    assert_eq!(info_u64(&mut p.off, "compressed_values"), 0);
    assert_eq!(bulk(p.both_s(&["GET", "k"])), text);
    assert_eq!(int(p.both_s(&["STRLEN", "k"])), 1000);
    p.both_s(&["GETRANGE", "k", "10", "80"]).unwrap();
    p.both_s(&["GETRANGE", "k", "-50", "-1"]).unwrap();
    p.both_s(&["SUBSTR", "k", "0", "5000"]).unwrap();
    p.both_s(&["OBJECT", "ENCODING", "k"]).unwrap();
    assert_eq!(
        p.both_s(&["OBJECT", "ENCODING", "k"]),
        Ok(Value::BulkString(b"raw".to_vec()))
    );
    p.both_s(&["LCS", "k", "k", "LEN"]).unwrap();
    // APPEND decompresses, edits and stores compressed again.
    assert_eq!(int(p.both_s(&["APPEND", "k", "tail-of-the-value"])), 1017);
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 1);
    p.both_s(&["GET", "k"]).unwrap();
    assert_eq!(int(p.both_s(&["SETRANGE", "k", "5", "XYZ"])), 1017);
    assert_eq!(int(p.both_s(&["SETRANGE", "k", "1100", "end"])), 1103);
    p.both_s(&["GET", "k"]).unwrap();
    p.both_s(&["OBJECT", "ENCODING", "k"]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 1);
    // INCR family on a compressed (non-integer) value.
    p.both_s(&["INCR", "k"]).unwrap_err();
    p.both_s(&["INCRBYFLOAT", "k", "1.5"]).unwrap_err();
    p.both_s(&["DECRBY", "k", "3"]).unwrap_err();
    // GETSET / GETEX / GETDEL return the original bytes.
    let second = json(700, 50);
    assert_eq!(bulk(p.both(&[b"GETSET", b"k", &second])).len(), 1103);
    assert_eq!(bulk(p.both_s(&["GETEX", "k", "PX", "100000"])), second);
    assert_eq!(bulk(p.both_s(&["GETDEL", "k"])), second);
    p.both_s(&["EXISTS", "k"]).unwrap();
    wait_compressed(&mut p.on, 0);
    // SET ... GET, MSET / MGET, SETNX, SETEX, MSETNX, SET with KEEPTTL.
    p.both(&[b"MSET", b"a", &json(300, 1), b"b", &json(400, 2)])
        .unwrap();
    p.both_s(&["MGET", "a", "b", "nope"]).unwrap();
    p.both(&[b"SET", b"a", &json(500, 3), b"GET"]).unwrap();
    p.both(&[b"SETEX", b"c", b"100", &json(200, 4)]).unwrap();
    p.both_s(&["GET", "c"]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 3);
    // Short strings under the threshold stay plain; integers stay integers.
    p.both_s(&["SET", "short", "0123456789abcdef"]).unwrap();
    p.both_s(&["SET", "n", "12345"]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 3);
    p.both_s(&["OBJECT", "ENCODING", "short"]).unwrap();
    p.both_s(&["OBJECT", "ENCODING", "n"]).unwrap();
    // A repetitive integer-looking value with leading zeros: compressed, still a number
    // for INCRBYFLOAT (float parse) and not for INCR.
    let zeros = format!("{}7", "0".repeat(99));
    p.both_s(&["SET", "z", &zeros]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 4);
    p.both_s(&["INCR", "z"]).unwrap_err();
    p.both_s(&["INCRBYFLOAT", "z", "1"]).unwrap();
    // Copies and renames keep content.
    p.both_s(&["COPY", "a", "a2"]).unwrap();
    p.both_s(&["RENAME", "b", "b2"]).unwrap();
    p.both_s(&["GET", "a2"]).unwrap();
    p.both_s(&["GET", "b2"]).unwrap();
    // DUMP / RESTORE, where the node has them, see the original bytes.
    if let Ok(Value::BulkString(d)) = p.both_s(&["DUMP", "a"]) {
        p.both(&[b"RESTORE", b"a3", b"0", &d]).unwrap();
        p.both_s(&["GET", "a3"]).unwrap();
    }
}

#[test]
fn bit_commands_on_compressed_values() {
    let mut p = Pair::start();
    let text = json(2000, 7);
    p.both(&[b"SET", b"bits", &text]).unwrap();
    p.both(&[b"SET", b"other", &json(2000, 900)]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 2);
    for args in [
        vec!["GETBIT", "bits", "0"],
        vec!["GETBIT", "bits", "12345"],
        vec!["GETBIT", "bits", "999999"],
        vec!["BITCOUNT", "bits"],
        vec!["BITCOUNT", "bits", "10", "500"],
        vec!["BITCOUNT", "bits", "5", "3000", "BIT"],
        vec!["BITPOS", "bits", "1"],
        vec!["BITPOS", "bits", "0", "100"],
        vec!["BITPOS", "bits", "1", "-10", "-1", "BIT"],
        vec!["SETBIT", "bits", "7", "1"],
        vec!["SETBIT", "bits", "20000", "1"],
        vec!["GETBIT", "bits", "20000"],
        vec!["BITFIELD", "bits", "GET", "u8", "0", "GET", "i16", "100"],
        vec![
            "BITFIELD", "bits", "SET", "u8", "8", "255", "INCRBY", "i5", "100", "1",
        ],
        vec!["BITFIELD_RO", "bits", "GET", "u32", "64"],
        vec!["BITOP", "XOR", "dest", "bits", "other"],
        vec!["BITOP", "NOT", "dest2", "bits"],
        vec!["GET", "bits"],
        vec!["GET", "dest"],
        vec!["GET", "dest2"],
        vec!["STRLEN", "bits"],
        vec!["BITCOUNT", "dest"],
        vec!["OBJECT", "ENCODING", "bits"],
    ] {
        p.both_s(&args).unwrap();
    }
    // The edited bitmap is still stored compressed.
    assert!(info_u64(&mut p.on, "compressed_values") >= 2);
    // SETBIT far out on a missing key: a long run of zeros, compressed.
    p.both_s(&["SETBIT", "fresh", "80000", "1"]).unwrap();
    p.both_s(&["GET", "fresh"]).unwrap();
    p.both_s(&["SETRANGE", "fresh2", "5000", "x"]).unwrap();
    p.both_s(&["GET", "fresh2"]).unwrap();
    let n = info_u64(&mut p.on, "compressed_values");
    p.both_s(&["DEL", "fresh", "fresh2"]).unwrap();
    wait_compressed(&mut p.on, n - 2);
}

#[test]
fn hyperloglog_on_compressed_strings() {
    let mut p = Pair::start();
    // A plain compressed string is not an HLL.
    p.both(&[b"SET", b"s", &json(500, 1)]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 1);
    p.both_s(&["PFADD", "s", "a"]).unwrap_err();
    p.both_s(&["PFCOUNT", "s"]).unwrap_err();
    // A dense HLL (12 KiB of registers) gets compressed and keeps working.
    let elems: Vec<String> = (0..3000).map(|i| format!("e{i}")).collect();
    let mut args = vec!["PFADD", "h"];
    args.extend(elems.iter().map(String::as_str));
    p.both_s(&args).unwrap();
    p.both_s(&["PFCOUNT", "h"]).unwrap();
    p.both_s(&["PFADD", "h", "one-more", "and-another"])
        .unwrap();
    p.both_s(&["PFCOUNT", "h"]).unwrap();
    p.both_s(&["PFADD", "h2", "x", "y", "z"]).unwrap();
    p.both_s(&["PFMERGE", "m", "h", "h2"]).unwrap();
    p.both_s(&["PFCOUNT", "m"]).unwrap();
    p.both_s(&["PFCOUNT", "h", "h2", "s2"]).unwrap();
    let dense = bulk(p.both_s(&["GET", "h"]));
    assert_eq!(&dense[..4], b"HYLL");
    // The dense HLL is compressed on the compression node.
    assert!(info_u64(&mut p.on, "compressed_values") >= 2);
    // HLL bytes written by SET and read back by PF commands.
    p.both(&[b"SET", b"copy", &dense]).unwrap();
    p.both_s(&["PFCOUNT", "copy"]).unwrap();
    p.both_s(&["PFADD", "copy", "zzz"]).unwrap();
    p.both_s(&["GET", "copy"]).unwrap();
}

#[test]
fn sort_patterns_read_compressed_values() {
    let mut p = Pair::start();
    p.both_s(&["RPUSH", "ids", "3", "1", "2"]).unwrap();
    for i in 1..=3 {
        // Weights with long runs of leading zeros (compressible, still numbers).
        let w = format!("{}{}", "0".repeat(100), 10 - i);
        p.both_s(&["SET", &format!("w_{i}"), &w]).unwrap();
        let key = format!("obj_{i}");
        p.both(&[b"SET", key.as_bytes(), &json(300, i)]).unwrap();
        let h = format!("h_{i}");
        p.both(&[b"HSET", h.as_bytes(), b"f", &json(200, i * 10)])
            .unwrap();
    }
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 6);
    p.both_s(&["SORT", "ids", "BY", "w_*"]).unwrap();
    p.both_s(&[
        "SORT", "ids", "BY", "w_*", "DESC", "GET", "#", "GET", "obj_*",
    ])
    .unwrap();
    p.both_s(&[
        "SORT", "ids", "BY", "nosort", "GET", "obj_*", "GET", "h_*->f",
    ])
    .unwrap();
    p.both_s(&[
        "SORT", "ids", "BY", "obj_*", "ALPHA", "GET", "obj_*", "STORE", "out",
    ])
    .unwrap();
    p.both_s(&["LRANGE", "out", "0", "-1"]).unwrap();
}

#[test]
fn incompressible_values_stay_plain() {
    let mut p = Pair::start();
    p.both(&[b"SET", b"r", &noise(4096, 42)]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 0);
    assert_eq!(info_u64(&mut p.on, "compression_bytes_saved"), 0);
    assert_eq!(bulk(p.both_s(&["GET", "r"])), noise(4096, 42));
    p.both_s(&["APPEND", "r", "more"]).unwrap();
    assert_eq!(info_u64(&mut p.on, "compressed_values"), 0);
}

#[test]
fn config_and_info() {
    let e = Ember::start(&["--compression", "yes"]);
    let mut c = e.conn();
    let get = |c: &mut redis::Connection, name: &str| -> Vec<String> {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(c)
            .expect("CONFIG GET")
    };
    assert_eq!(get(&mut c, "compression"), ["compression", "yes"]);
    assert_eq!(
        get(&mut c, "compression-threshold"),
        ["compression-threshold", "512"]
    );
    assert_eq!(info_field(&mut c, "compression"), "yes");
    // Default threshold 512: 511 bytes stay plain, 512 are compressed.
    let text = json(4096, 0);
    let set = |c: &mut redis::Connection, k: &str, v: &[u8]| {
        let _: () = redis::cmd("SET").arg(k).arg(v).query(c).expect("SET");
    };
    set(&mut c, "below", &text[..511]);
    assert_eq!(info_u64(&mut c, "compressed_values"), 0);
    set(&mut c, "at", &text[..512]);
    assert_eq!(info_u64(&mut c, "compressed_values"), 1);
    set(&mut c, "big", &text);
    assert_eq!(info_u64(&mut c, "compressed_values"), 2);
    let saved = info_u64(&mut c, "compression_bytes_saved");
    assert!(saved > 4096 / 2 && saved < 4096 + 512, "saved {saved}");
    // Turning it off affects later writes only.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("compression")
        .arg("no")
        .query(&mut c)
        .expect("CONFIG SET");
    assert_eq!(info_field(&mut c, "compression"), "no");
    set(&mut c, "later", &text);
    assert_eq!(info_u64(&mut c, "compressed_values"), 2);
    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).expect("GET");
    assert_eq!(got, text);
    // An edit while compression is off stores the value plain.
    let _: i64 = redis::cmd("APPEND")
        .arg("big")
        .arg("x")
        .query(&mut c)
        .expect("APPEND");
    assert_eq!(info_u64(&mut c, "compressed_values"), 1);
    // Back on, with a higher threshold.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("compression")
        .arg("yes")
        .arg("compression-threshold")
        .arg("2kb")
        .query(&mut c)
        .expect("CONFIG SET");
    assert_eq!(
        get(&mut c, "compression-threshold"),
        ["compression-threshold", "2048"]
    );
    set(&mut c, "mid", &text[..2047]);
    assert_eq!(info_u64(&mut c, "compressed_values"), 1);
    set(&mut c, "mid", &text[..2048]);
    assert_eq!(info_u64(&mut c, "compressed_values"), 2);
    // Overwrites and deletes drop the counted values; saved bytes go back to zero.
    let _: i64 = redis::cmd("DEL")
        .arg("at")
        .arg("mid")
        .query(&mut c)
        .expect("DEL");
    wait_compressed(&mut c, 0);
    assert_eq!(info_u64(&mut c, "compression_bytes_saved"), 0);
    // Bad values are refused like any boolean / memory directive.
    let e1 = redis::cmd("CONFIG")
        .arg("SET")
        .arg("compression")
        .arg("maybe")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(
        e1.to_string().contains("argument must be 'yes' or 'no'"),
        "{e1}"
    );
    let e2 = redis::cmd("CONFIG")
        .arg("SET")
        .arg("compression-threshold")
        .arg("lots")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e2.to_string().contains("memory value"), "{e2}");
}

#[test]
fn flushall_releases_counters() {
    let e = Ember::start(&["--compression", "yes", "--compression-threshold", "100"]);
    let mut c = e.conn();
    for i in 0..50u32 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(json(1000, i))
            .query(&mut c)
            .expect("SET");
    }
    assert_eq!(info_u64(&mut c, "compressed_values"), 50);
    assert!(info_u64(&mut c, "compression_bytes_saved") > 50 * 500);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
    wait_compressed(&mut c, 0);
    assert_eq!(info_u64(&mut c, "compression_bytes_saved"), 0);
}
