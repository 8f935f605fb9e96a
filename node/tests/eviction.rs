//! maxmemory and eviction against the real binary: a write storm stays under the limit,
//! each policy picks the keys it should, `-OOM` when nothing can go, and an evicted key
//! is deleted the way DEL deletes (WATCH, keyspace events, tags).

mod common;

use std::time::Duration;

use common::{cmd, err, existing, int, ok, Ember};
use redis::Value;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// One INFO field as an integer.
fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg(section).query(c).expect("info");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

fn used(c: &mut redis::Connection) -> u64 {
    info_field(c, "memory", "used_memory")
}

fn evicted(c: &mut redis::Connection) -> u64 {
    info_field(c, "stats", "evicted_keys")
}

/// SETs `prefix:<i>` for `range` with `value` (and a TTL of `ttl(i)` seconds when some),
/// pipelined 1,000 at a time; returns the replies that were errors.
fn fill(
    c: &mut redis::Connection,
    prefix: &str,
    range: std::ops::Range<usize>,
    value: &str,
    ttl: impl Fn(usize) -> Option<u64>,
) -> Vec<String> {
    let mut errors = Vec::new();
    let items: Vec<usize> = range.collect();
    for chunk in items.chunks(1000) {
        let mut p = redis::pipe();
        for &i in chunk {
            let k = format!("{prefix}:{i}");
            match ttl(i) {
                Some(s) => p.cmd("SET").arg(k).arg(value).arg("EX").arg(s),
                None => p.cmd("SET").arg(k).arg(value),
            };
        }
        let replies: Vec<redis::RedisResult<Value>> = match p.query::<Vec<Value>>(c) {
            Ok(v) => v.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        for r in replies {
            match r {
                Ok(Value::ServerError(e)) => errors.push(format!("{e:?}")),
                Err(e) => errors.push(e.to_string()),
                Ok(_) => {}
            }
        }
    }
    errors
}

fn value(len: usize) -> String {
    "x".repeat(len)
}

/// A write storm of 100-byte values (about 60 MB of data) into a 20 MB limit: used memory
/// sampled between pipelines and the recorded peak stay under the limit plus 1 MB of
/// slack. The slack: memory is checked before every command against a gauge refreshed at
/// most once a millisecond, so the writes of up to a millisecond (one 1,000-command
/// pipeline is about 150 KB of keys and values) can land before the next eviction, and
/// the server's own buffers (query and reply buffers of a pipeline) come on top.
#[test]
fn write_storm_stays_under_maxmemory() {
    const MAX: u64 = 20 << 20;
    let e = Ember::start(&["--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = e.conn();
    let v = value(100);
    let mut highest = 0;
    for round in 0..300 {
        let errors = fill(
            &mut c,
            "storm",
            round * 1000..(round + 1) * 1000,
            &v,
            |_| None,
        );
        assert!(errors.is_empty(), "{errors:?}");
        if round % 5 == 0 {
            highest = highest.max(used(&mut c));
        }
    }
    let peak = info_field(&mut c, "memory", "used_memory_peak");
    let slack = 1 << 20;
    assert!(highest <= MAX + slack, "used_memory reached {highest}");
    assert!(peak <= MAX + slack, "used_memory_peak {peak}");
    // Commands keep evicting while memory is over the limit: lift it before counting.
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let gone = evicted(&mut c);
    let keys = int(&mut c, &["DBSIZE"]) as u64;
    assert!(gone > 100_000, "evicted_keys {gone}");
    assert_eq!(keys + gone, 300_000, "every key is either kept or evicted");
    assert!(highest > MAX / 2, "the storm filled memory: {highest}");
}

/// allkeys-lru: a hot set touched after the bulk of the data was written survives while
/// about half of the keys are evicted to make room for new ones (random eviction would
/// keep about half of it).
#[test]
fn lru_keeps_recently_used_keys() {
    let e = Ember::start(&["--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = e.conn();
    let v = value(100);
    let hot: Vec<String> = (0..1000).map(|i| format!("hot:{i}")).collect();
    assert!(fill(&mut c, "hot", 0..1000, &v, |_| None).is_empty());
    let mut cold = 0;
    while used(&mut c) < 18 << 20 {
        assert!(fill(&mut c, "cold", cold..cold + 1000, &v, |_| None).is_empty());
        cold += 1000;
        assert!(cold < 1_000_000, "memory does not grow");
    }
    assert_eq!(evicted(&mut c), 0, "nothing evicted while filling");
    // The access clock counts seconds: let the cold keys age.
    std::thread::sleep(Duration::from_millis(2100));
    for k in &hot {
        let _: Option<String> = redis::cmd("GET").arg(k).query(&mut c).expect("get");
    }
    // Fewer new keys than cold ones: once the cold keys are gone the hot set would be
    // older than the new keys and its turn would come.
    assert!(fill(&mut c, "new", 0..cold * 2 / 3, &v, |_| None).is_empty());
    let gone = evicted(&mut c);
    assert!(gone as usize >= cold / 3, "evicted only {gone} of {cold}");
    let kept = existing(&mut c, &hot).len();
    assert!(
        kept >= 950,
        "only {kept} of 1000 hot keys survived {gone} evictions"
    );
}

/// volatile-*: only keys with a TTL are evicted, and once none is left writes get -OOM
/// while reads and deletes still work.
#[test]
fn volatile_policies_evict_only_keys_with_ttl() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let e = Ember::start(&["--maxmemory-policy", policy]);
        let mut c = e.conn();
        let v = value(1000);
        assert!(fill(&mut c, "p", 0..2000, &v, |_| None).is_empty());
        assert!(fill(&mut c, "v", 0..2000, &v, |_| Some(1000)).is_empty());
        let limit = used(&mut c) - (1 << 20);
        ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        let gone = evicted(&mut c);
        assert!(gone > 0, "{policy}: nothing evicted");
        let persistent: Vec<String> = (0..2000).map(|i| format!("p:{i}")).collect();
        assert_eq!(existing(&mut c, &persistent).len(), 2000, "{policy}");
        // Keep writing persistent keys: volatile ones go until none is left, then -OOM.
        let mut errors = Vec::new();
        let mut next = 2000;
        while errors.is_empty() {
            errors = fill(&mut c, "p", next..next + 500, &v, |_| None);
            next += 500;
            assert!(next < 20_000, "{policy}: never refused");
        }
        let first: String = errors[0].chars().take(300).collect();
        assert!(
            first.contains("OOM")
                && first.contains("command not allowed when used memory > 'maxmemory'."),
            "{policy}: {first}"
        );
        let volatile: Vec<String> = (0..2000).map(|i| format!("v:{i}")).collect();
        assert!(
            existing(&mut c, &volatile).len() < 10,
            "{policy}: volatile keys left"
        );
        assert_eq!(existing(&mut c, &persistent).len(), 2000, "{policy}");
        assert_eq!(err(&mut c, &["SET", "another", "1"]), OOM, "{policy}");
        let got: String = redis::cmd("GET").arg("p:0").query(&mut c).expect("get");
        assert_eq!(got.len(), 1000);
        assert_eq!(int(&mut c, &["DEL", "p:1"]), 1, "{policy}: DEL works");
    }
}

/// noeviction: DENYOOM commands, a transaction queueing while out of memory, and scripts
/// that would write are refused; reads, deletes and allow-oom scripts are not.
#[test]
fn noeviction_refuses_writes_only() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "maxmemory-policy"]).unwrap(),
        Value::Array(vec![
            Value::BulkString(b"maxmemory-policy".to_vec()),
            Value::BulkString(b"noeviction".to_vec())
        ])
    );
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    assert_eq!(err(&mut c, &["SET", "a", "1"]), OOM);
    assert_eq!(err(&mut c, &["RPUSH", "l", "1"]), OOM);
    assert_eq!(err(&mut c, &["INCR", "k2"]), OOM);
    let got: String = redis::cmd("GET").arg("k").query(&mut c).expect("get");
    assert_eq!(got, "v");
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 1);
    assert_eq!(evicted(&mut c), 0);
    // Queueing is refused and the transaction is aborted.
    ok(&mut c, &["MULTI"]);
    assert_eq!(err(&mut c, &["GET", "k"]), OOM);
    assert!(err(&mut c, &["EXEC"]).starts_with("EXECABORT"));
    // Scripts: a compat script stops at its first write; one with flags is refused up
    // front unless it says allow-oom.
    let e1 = err(&mut c, &["EVAL", "return redis.call('set','s','1')", "0"]);
    assert!(e1.contains(OOM), "{e1}");
    let e2 = err(
        &mut c,
        &["EVAL", "#!lua\nreturn redis.call('set','s','1')", "0"],
    );
    assert_eq!(e2, OOM);
    ok(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set','s','1')",
            "0",
        ],
    );
    let read: String = redis::cmd("EVAL")
        .arg("return redis.call('get','k')")
        .arg(0)
        .query(&mut c)
        .expect("read-only script");
    assert_eq!(read, "v");
    assert_eq!(int(&mut c, &["DEL", "k", "s"]), 2);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    ok(&mut c, &["SET", "a", "1"]);
}

/// volatile-ttl removes the keys whose deadlines come first.
#[test]
fn volatile_ttl_evicts_soonest_deadlines_first() {
    let e = Ember::start(&["--maxmemory-policy", "volatile-ttl"]);
    let mut c = e.conn();
    let n = 4000;
    let v = value(1000);
    assert!(fill(&mut c, "t", 0..n, &v, |i| Some(10_000 + i as u64)).is_empty());
    let limit = used(&mut c) - (1 << 20);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let keys: Vec<String> = (0..n).map(|i| format!("t:{i}")).collect();
    let alive = existing(&mut c, &keys);
    let gone: Vec<usize> = (0..n).filter(|i| !alive.contains(&keys[*i])).collect();
    assert!(!gone.is_empty());
    let latest = *gone.iter().max().unwrap_or(&0);
    assert!(
        latest < 2 * gone.len(),
        "{} evicted, the latest deadline among them is key {latest}",
        gone.len()
    );
}

/// LFU counters: OBJECT FREQ grows with access (logarithmically), RESTORE FREQ sets it,
/// and the OBJECT subcommands of the other family answer Redis's errors.
#[test]
fn lfu_frequency() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    ok(&mut c, &["SET", "k", "v"]);
    let e1 = err(&mut c, &["OBJECT", "FREQ", "k"]);
    assert!(
        e1.contains("An LFU maxmemory policy is not selected"),
        "{e1}"
    );
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    ok(&mut c, &["CONFIG", "SET", "lfu-log-factor", "0"]);
    let e2 = err(&mut c, &["OBJECT", "IDLETIME", "k"]);
    assert!(e2.contains("An LFU maxmemory policy is selected"), "{e2}");
    assert_eq!(
        int(&mut c, &["OBJECT", "FREQ", "k"]),
        5,
        "new keys start at 5"
    );
    for _ in 0..10 {
        ok(&mut c, &["GET", "k"]);
    }
    assert_eq!(
        int(&mut c, &["OBJECT", "FREQ", "k"]),
        15,
        "factor 0: +1 per access"
    );
    ok(&mut c, &["CONFIG", "SET", "lfu-log-factor", "10"]);
    for _ in 0..1000 {
        ok(&mut c, &["GET", "k"]);
    }
    let f = int(&mut c, &["OBJECT", "FREQ", "k"]);
    assert!(f > 15 && f < 100, "factor 10: logarithmic growth, got {f}");
    let payload: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut c).expect("dump");
    redis::cmd("RESTORE")
        .arg("k2")
        .arg(0)
        .arg(payload)
        .arg("FREQ")
        .arg(200)
        .query::<()>(&mut c)
        .expect("restore");
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "k2"]), 200);
    assert_eq!(
        cmd(&mut c, &["OBJECT", "FREQ", "nokey"]).unwrap(),
        Value::Nil
    );
}

/// An evicted key is deleted as DEL deletes it: WATCH sees it, the `evicted` event is
/// published and its tags go with it.
#[test]
fn evicted_keys_are_deleted_like_del() {
    let e = Ember::start(&["--notify-keyspace-events", "Ee"]);
    let mut c = e.conn();
    let mut sub = e.conn();
    let mut ps = sub.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    ps.subscribe("__keyevent@0__:evicted").expect("subscribe");
    ok(&mut c, &["SET", "w", "1", "EX", "1000"]);
    ok(&mut c, &["SET", "keep", "1"]);
    ok(&mut c, &["TAG.SET", "w", "t1"]);
    ok(&mut c, &["WATCH", "w"]);
    let mut admin = e.conn();
    ok(
        &mut admin,
        &["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"],
    );
    ok(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
    ok(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);
    let m = ps.get_message().expect("evicted event");
    assert_eq!(m.get_payload::<String>().expect("payload"), "w");
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["PING"]);
    assert_eq!(
        cmd(&mut c, &["EXEC"]).unwrap(),
        Value::Nil,
        "WATCH saw the eviction"
    );
    assert_eq!(int(&mut c, &["EXISTS", "w", "keep"]), 1);
    assert_eq!(int(&mut c, &["TAG.COUNT", "t1"]), 0);
    assert_eq!(evicted(&mut c), 1);
}
