//! RDB snapshots and DUMP/RESTORE against the real binary: SAVE, BGSAVE, LASTSAVE, save
//! points, SHUTDOWN and SIGTERM saves, restart with every type (plus Ember's tags and
//! nanosecond TTLs), a corrupt file refusing to start, DUMP/RESTORE options and errors,
//! FUNCTION DUMP/RESTORE.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cmd, err, int, ok, temp_dir, Ember};
use redis::{Connection, Value};

fn bulk(c: &mut Connection, args: &[&str]) -> Option<Vec<u8>> {
    match ok(c, args) {
        Value::BulkString(b) => Some(b),
        Value::Nil => None,
        v => panic!("{args:?}: expected a bulk string, got {v:?}"),
    }
}

fn text(c: &mut Connection, args: &[&str]) -> String {
    String::from_utf8(bulk(c, args).expect("a value")).unwrap()
}

fn strs(v: Value) -> Vec<String> {
    let Value::Array(items) = v else {
        panic!("expected an array, got {v:?}");
    };
    items
        .into_iter()
        .map(|i| match i {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            Value::Int(n) => n.to_string(),
            other => panic!("expected a bulk string, got {other:?}"),
        })
        .collect()
}

fn sorted(v: Value) -> Vec<String> {
    let mut s = strs(v);
    s.sort();
    s
}

/// A field of INFO persistence.
fn info_field(c: &mut Connection, name: &str) -> String {
    let info = text(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} missing from INFO: {info}"))
        .trim()
        .to_string()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A deadline in 2100 with sub-millisecond digits.
const NS_DEADLINE: &str = "4102444800123456789";

/// Writes one key of every type (and Ember's extras) into `c`.
fn fill(c: &mut Connection) {
    ok(c, &["SET", "str", "hello"]);
    ok(c, &["SET", "int", "12345"]);
    ok(c, &["SET", "big", &"x".repeat(10_000)]);
    int(c, &["RPUSH", "list", "a", "b", "c", "1", "2"]);
    int(c, &["SADD", "iset", "1", "2", "3"]);
    int(c, &["SADD", "set", "x", "y", "z"]);
    int(c, &["HSET", "hash", "f1", "v1", "f2", "22"]);
    int(c, &["ZADD", "zset", "1.5", "a", "-2", "b", "inf", "c"]);
    ok(c, &["XADD", "stream", "1-1", "f", "v"]);
    ok(c, &["XADD", "stream", "2-0", "f", "w", "g", "h"]);
    ok(c, &["XGROUP", "CREATE", "stream", "grp", "0"]);
    ok(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "grp",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "stream",
            ">",
        ],
    );
    int(c, &["PFADD", "hll", "a", "b", "c"]);
    int(c, &["SETBIT", "bits", "100", "1"]);
    ok(c, &["SET", "ttl", "v", "EX", "1000"]);
    ok(c, &["SET", "nttl", "v"]);
    int(c, &["NEXPIREAT", "nttl", NS_DEADLINE]);
    int(c, &["TAG.SET", "str", "red", "blue"]);
    int(c, &["TAG.SET", "hash", "red"]);
    ok(c, &["SELECT", "3"]);
    ok(c, &["SET", "in3", "three"]);
    ok(c, &["SELECT", "0"]);
    ok(
        c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=plib\nredis.register_function('pf', function() return 7 end)",
        ],
    );
}

/// Checks what [`fill`] wrote.
fn check(c: &mut Connection) {
    assert_eq!(text(c, &["GET", "str"]), "hello");
    assert_eq!(int(c, &["INCR", "int"]), 12346);
    assert_eq!(text(c, &["GET", "big"]), "x".repeat(10_000));
    assert_eq!(
        strs(ok(c, &["LRANGE", "list", "0", "-1"])),
        ["a", "b", "c", "1", "2"]
    );
    assert_eq!(sorted(ok(c, &["SMEMBERS", "iset"])), ["1", "2", "3"]);
    assert_eq!(sorted(ok(c, &["SMEMBERS", "set"])), ["x", "y", "z"]);
    assert_eq!(
        sorted(ok(c, &["HGETALL", "hash"])),
        ["22", "f1", "f2", "v1"]
    );
    assert_eq!(
        strs(ok(c, &["ZRANGE", "zset", "0", "-1", "WITHSCORES"])),
        ["b", "-2", "a", "1.5", "c", "inf"]
    );
    assert_eq!(int(c, &["XLEN", "stream"]), 2);
    let pending = ok(c, &["XPENDING", "stream", "grp"]);
    let Value::Array(p) = pending else {
        panic!("{pending:?}")
    };
    assert_eq!(p[0], Value::Int(1), "one pending entry survives");
    assert_eq!(p[1], Value::BulkString(b"1-1".to_vec()));
    assert_eq!(int(c, &["PFCOUNT", "hll"]), 3);
    assert_eq!(int(c, &["GETBIT", "bits", "100"]), 1);
    let ttl = int(c, &["TTL", "ttl"]);
    assert!((990..=1000).contains(&ttl), "ttl {ttl}");
    assert_eq!(
        int(c, &["NEXPIRETIME", "nttl"]).to_string(),
        NS_DEADLINE,
        "the nanosecond deadline survives exactly"
    );
    assert_eq!(sorted(ok(c, &["TAG.GET", "str"])), ["blue", "red"]);
    assert_eq!(sorted(ok(c, &["TAG.MEMBERS", "red"])), ["hash", "str"]);
    ok(c, &["SELECT", "3"]);
    assert_eq!(text(c, &["GET", "in3"]), "three");
    ok(c, &["SELECT", "0"]);
    assert_eq!(int(c, &["FCALL", "pf", "0"]), 7);
    assert_eq!(int(c, &["DBSIZE"]), 13);
}

#[test]
fn save_and_restart_keeps_every_type() {
    let dir = temp_dir("persist");
    {
        let e = Ember::start_in(&dir, None, &["--save", ""]);
        let mut c = e.conn();
        fill(&mut c);
        assert_ne!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
        let before = int(&mut c, &["LASTSAVE"]);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(ok(&mut c, &["SAVE"]), Value::Okay);
        assert!(int(&mut c, &["LASTSAVE"]) > before);
        assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
        assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
        assert!(dir.join("dump.rdb").exists());
        // Killed, not shut down: only what SAVE wrote survives.
        ok(&mut c, &["SET", "after-save", "lost"]);
    }
    let e = Ember::start_in(&dir, None, &["--save", ""]);
    let mut c = e.conn();
    check(&mut c);
    assert_eq!(bulk(&mut c, &["GET", "after-save"]), None);
    drop(e);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn file_is_redis_rdb() {
    let e = Ember::start(&["--save", ""]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    ok(&mut c, &["SAVE"]);
    let data = std::fs::read(e.dir.join("dump.rdb")).unwrap();
    assert_eq!(&data[..9], b"REDIS0010", "magic and version 10 (Redis 7.0)");
    assert_eq!(data[data.len() - 9], 0xff, "EOF opcode before the checksum");
    // dbfilename is honoured.
    ok(&mut c, &["CONFIG", "SET", "dbfilename", "other.rdb"]);
    ok(&mut c, &["SAVE"]);
    assert!(e.dir.join("other.rdb").exists());
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "dbfilename", "a/b.rdb"]),
        "ERR CONFIG SET failed (possibly related to argument 'dbfilename') - dbfilename can't be a path, just a filename"
    );
}

#[test]
fn bgsave_and_schedule() {
    let e = Ember::start(&["--save", ""]);
    let mut c = e.conn();
    for i in 0..2000 {
        ok(&mut c, &["SET", &format!("k{i}"), &"v".repeat(100)]);
    }
    assert_eq!(
        ok(&mut c, &["BGSAVE"]),
        Value::SimpleString("Background saving started".into())
    );
    // A second one while the first runs is refused, or scheduled with SCHEDULE.
    match cmd(&mut c, &["BGSAVE"]) {
        Ok(v) => assert_eq!(v, Value::SimpleString("Background saving started".into())),
        Err(e) => assert_eq!(e.detail(), Some("Background save already in progress")),
    }
    let v = ok(&mut c, &["BGSAVE", "SCHEDULE"]);
    assert!(
        v == Value::SimpleString("Background saving started".into())
            || v == Value::SimpleString("Background saving scheduled".into()),
        "{v:?}"
    );
    assert_eq!(err(&mut c, &["BGSAVE", "NOW"]), "ERR syntax error");
    wait_for("bgsave to finish", || {
        info_field(&mut c, "rdb_bgsave_in_progress") == "0"
            && info_field(&mut c, "rdb_changes_since_last_save") == "0"
    });
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(e.dir.join("dump.rdb").exists());
    // A fresh server on that file sees the keys.
    let dir = e.dir.clone();
    let e2 = Ember::start_in(&dir, None, &["--save", ""]);
    let mut c2 = e2.conn();
    assert_eq!(int(&mut c2, &["DBSIZE"]), 2000);
}

#[test]
fn save_points_trigger_a_background_save() {
    let e = Ember::start(&["--save", "1 2"]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "a", "1"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !e.dir.join("dump.rdb").exists(),
        "one change is below the save point"
    );
    ok(&mut c, &["SET", "b", "2"]);
    wait_for("the save point to fire", || e.dir.join("dump.rdb").exists());
    wait_for("the save to finish", || {
        info_field(&mut c, "rdb_changes_since_last_save") == "0"
    });
    assert_eq!(
        strs(ok(&mut c, &["CONFIG", "GET", "save"])),
        ["save", "1 2"]
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "save", "1"]),
        "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"
    );
}

#[test]
fn shutdown_and_sigterm_save() {
    // SHUTDOWN with save points saves; SHUTDOWN NOSAVE does not.
    let dir = temp_dir("shutdown");
    let mut e = Ember::start_in(&dir, None, &[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "1"]);
    let _ = cmd(&mut c, &["SHUTDOWN"]);
    assert_eq!(e.wait_exit(Duration::from_secs(20)), Some(true));
    let mut e = Ember::start_in(&dir, None, &[]);
    let mut c = e.conn();
    assert_eq!(text(&mut c, &["GET", "k"]), "1");
    ok(&mut c, &["SET", "k", "2"]);
    let _ = cmd(&mut c, &["SHUTDOWN", "NOSAVE"]);
    assert_eq!(e.wait_exit(Duration::from_secs(20)), Some(true));
    let mut e = Ember::start_in(&dir, None, &[]);
    let mut c = e.conn();
    assert_eq!(text(&mut c, &["GET", "k"]), "1", "NOSAVE kept the old file");
    // SIGTERM saves like SHUTDOWN.
    ok(&mut c, &["SET", "k", "3"]);
    let st = Command::new("kill")
        .args(["-TERM", &e.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(e.wait_exit(Duration::from_secs(20)), Some(true));
    let e = Ember::start_in(&dir, None, &[]);
    let mut c = e.conn();
    assert_eq!(text(&mut c, &["GET", "k"]), "3");
    // Without save points and no SAVE modifier, SHUTDOWN does not save.
    drop(e);
    let mut e = Ember::start_in(&dir, None, &["--save", ""]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "4"]);
    let _ = cmd(&mut c, &["SHUTDOWN"]);
    assert_eq!(e.wait_exit(Duration::from_secs(20)), Some(true));
    let e = Ember::start_in(&dir, None, &["--save", ""]);
    let mut c = e.conn();
    assert_eq!(text(&mut c, &["GET", "k"]), "3");
    drop(e);
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs ember in `dir` expecting it to refuse to start; returns its stderr.
fn refuses_to_start(dir: &std::path::Path) -> String {
    let port = common::free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(!st.success(), "a corrupt file must stop start-up");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ember started on a corrupt file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let mut s = String::from_utf8_lossy(&out.stderr).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stdout));
    s
}

#[test]
fn corrupt_or_truncated_file_refuses_to_start() {
    let dir = temp_dir("corrupt");
    {
        let e = Ember::start_in(&dir, None, &["--save", ""]);
        let mut c = e.conn();
        for i in 0..100 {
            ok(&mut c, &["SET", &format!("key{i}"), &format!("value{i}")]);
        }
        ok(&mut c, &["SAVE"]);
    }
    let path = dir.join("dump.rdb");
    let good = std::fs::read(&path).unwrap();
    // One flipped byte: the checksum catches it.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x20;
    std::fs::write(&path, &bad).unwrap();
    let log = refuses_to_start(&dir);
    assert!(log.contains("Fatal error loading"), "{log}");
    // Truncated: the log names the offset.
    std::fs::write(&path, &good[..good.len() / 3]).unwrap();
    let log = refuses_to_start(&dir);
    assert!(log.contains("offset"), "{log}");
    // Not an RDB file at all.
    std::fs::write(&path, b"hello world, not a dump").unwrap();
    let log = refuses_to_start(&dir);
    assert!(log.contains("Fatal error loading"), "{log}");
    // The good file loads again.
    std::fs::write(&path, &good).unwrap();
    let e = Ember::start_in(&dir, None, &["--save", ""]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["DBSIZE"]), 100);
    drop(e);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dump_restore_options_and_errors() {
    let e = Ember::start(&["--save", ""]);
    let mut c = e.conn();
    assert_eq!(bulk(&mut c, &["DUMP", "missing"]), None);
    // Known bytes: redis-server 7.0's DUMP of the integer string "10".
    let mut r = redis::cmd("RESTORE");
    r.arg("fromredis")
        .arg(0)
        .arg(&b"\x00\xc0\n\n\x00n\x9fWE\x0e\xaec\xbb"[..]);
    assert_eq!(r.query::<Value>(&mut c).unwrap(), Value::Okay);
    assert_eq!(text(&mut c, &["GET", "fromredis"]), "10");
    int(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let p = bulk(&mut c, &["DUMP", "l"]).unwrap();
    let restore = |c: &mut Connection, key: &str, ttl: &str, extra: &[&str]| {
        let mut r = redis::cmd("RESTORE");
        r.arg(key).arg(ttl).arg(&p[..]);
        for a in extra {
            r.arg(*a);
        }
        r.query::<Value>(c)
    };
    assert_eq!(restore(&mut c, "l2", "0", &[]).unwrap(), Value::Okay);
    assert_eq!(
        strs(ok(&mut c, &["LRANGE", "l2", "0", "-1"])),
        ["a", "b", "c"]
    );
    assert_eq!(int(&mut c, &["TTL", "l2"]), -1);
    let e1 = restore(&mut c, "l2", "0", &[]).unwrap_err();
    assert_eq!(e1.code(), Some("BUSYKEY"));
    assert_eq!(e1.detail(), Some("Target key name already exists."));
    assert_eq!(
        restore(&mut c, "l2", "5000", &["REPLACE"]).unwrap(),
        Value::Okay
    );
    let pttl = int(&mut c, &["PTTL", "l2"]);
    assert!((4000..=5000).contains(&pttl), "pttl {pttl}");
    // ABSTTL: an absolute unix-ms deadline; one in the past deletes instead.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let at = (now_ms + 100_000).to_string();
    assert_eq!(
        restore(&mut c, "l3", &at, &["ABSTTL"]).unwrap(),
        Value::Okay
    );
    let ttl = int(&mut c, &["TTL", "l3"]);
    assert!((98..=100).contains(&ttl), "ttl {ttl}");
    assert_eq!(
        restore(&mut c, "l3", "1000", &["ABSTTL", "REPLACE"]).unwrap(),
        Value::Okay
    );
    assert_eq!(int(&mut c, &["EXISTS", "l3"]), 0, "past deadline: deleted");
    // IDLETIME sets the idle clock.
    assert_eq!(
        restore(&mut c, "l4", "0", &["IDLETIME", "1000"]).unwrap(),
        Value::Okay
    );
    let idle = int(&mut c, &["OBJECT", "IDLETIME", "l4"]);
    assert!((1000..=1002).contains(&idle), "idle {idle}");
    // Errors, with Redis's texts.
    let bad = |r: redis::RedisResult<Value>| {
        let e = r.unwrap_err();
        format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
    };
    assert_eq!(
        bad(restore(&mut c, "x", "-1", &[])),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(
        bad(restore(&mut c, "x", "abc", &[])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        bad(restore(&mut c, "x", "0", &["IDLETIME", "-1"])),
        "ERR Invalid IDLETIME value, must be >= 0"
    );
    assert_eq!(
        bad(restore(&mut c, "x", "0", &["FREQ", "256"])),
        "ERR Invalid FREQ value, must be >= 0 and <= 255"
    );
    assert_eq!(
        bad(restore(&mut c, "x", "0", &["IDLETIME", "1", "FREQ", "1"])),
        "ERR syntax error"
    );
    assert_eq!(
        bad(restore(&mut c, "x", "0", &["BOGUS"])),
        "ERR syntax error"
    );
    let mut flipped = p.clone();
    let n = flipped.len();
    flipped[n - 1] ^= 1;
    let mut r = redis::cmd("RESTORE");
    r.arg("x").arg(0).arg(&flipped[..]);
    assert_eq!(
        bad(r.query(&mut c)),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        err(&mut c, &["RESTORE", "x", "0", "garbage"]),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(int(&mut c, &["EXISTS", "x"]), 0);
    assert_eq!(
        err(&mut c, &["RESTORE", "x", "0"]),
        "ERR wrong number of arguments for 'restore' command"
    );
}

#[test]
fn dump_restore_round_trips_every_type() {
    let e = Ember::start(&["--save", ""]);
    let mut c = e.conn();
    fill(&mut c);
    let keys = [
        "str", "int", "big", "list", "iset", "set", "hash", "zset", "stream", "hll", "bits",
    ];
    for k in keys {
        let p = bulk(&mut c, &["DUMP", k]).unwrap();
        let copy = format!("{k}-copy");
        let mut r = redis::cmd("RESTORE");
        r.arg(&copy).arg(0).arg(&p[..]);
        assert_eq!(r.query::<Value>(&mut c).unwrap(), Value::Okay, "{k}");
        assert_eq!(
            bulk(&mut c, &["DUMP", &copy]).unwrap(),
            p,
            "{k}: the copy dumps to the same bytes"
        );
        assert_eq!(
            ok(&mut c, &["TYPE", &copy]),
            ok(&mut c, &["TYPE", k]),
            "{k}"
        );
    }
    assert_eq!(int(&mut c, &["PFCOUNT", "hll-copy"]), 3);
    assert_eq!(
        strs(ok(
            &mut c,
            &["ZRANGE", "zset-copy", "0", "-1", "WITHSCORES"]
        )),
        ["b", "-2", "a", "1.5", "c", "inf"]
    );
}

#[test]
fn function_dump_and_restore() {
    let e = Ember::start(&["--save", ""]);
    let mut c = e.conn();
    ok(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)",
        ],
    );
    let p = bulk(&mut c, &["FUNCTION", "DUMP"]).unwrap();
    ok(&mut c, &["FUNCTION", "FLUSH"]);
    let restore = |c: &mut Connection, extra: &[&str]| {
        let mut r = redis::cmd("FUNCTION");
        r.arg("RESTORE").arg(&p[..]);
        for a in extra {
            r.arg(*a);
        }
        r.query::<Value>(c)
    };
    assert_eq!(restore(&mut c, &[]).unwrap(), Value::Okay);
    assert_eq!(int(&mut c, &["FCALL", "f1", "0"]), 1);
    let e1 = restore(&mut c, &[]).unwrap_err();
    assert_eq!(e1.detail(), Some("Library lib1 already exists"));
    assert_eq!(restore(&mut c, &["REPLACE"]).unwrap(), Value::Okay);
    // FLUSH drops libraries that the payload lacks.
    ok(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib2\nredis.register_function('f2', function() return 2 end)",
        ],
    );
    assert_eq!(restore(&mut c, &["FLUSH"]).unwrap(), Value::Okay);
    assert!(cmd(&mut c, &["FCALL", "f2", "0"]).is_err());
    assert_eq!(int(&mut c, &["FCALL", "f1", "0"]), 1);
    assert_eq!(
        err(&mut c, &["FUNCTION", "RESTORE", "junk"]),
        "ERR payload version or checksum are wrong"
    );
    let e2 = restore(&mut c, &["BOGUS"]).unwrap_err();
    assert_eq!(
        e2.detail(),
        Some("Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
    );
}
