//! Server commands against the real binary: INFO, TIME, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB,
//! CONFIG, COMMAND, SHUTDOWN and DEBUG.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{free_port, Ember};

// ------------------------------------------------------------------------------------------
// A tiny RESP2/RESP3 client, so replies (and error texts) can be checked exactly.
// ------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Arr(Vec<R>),
    Map(Vec<(R, R)>),
    Set(Vec<R>),
    Verbatim(String, Vec<u8>),
    Bool(bool),
    Double(String),
}

impl R {
    /// Text of a simple, bulk or verbatim string.
    fn s(&self) -> String {
        match self {
            R::Simple(s) | R::Double(s) => s.clone(),
            R::Bulk(b) | R::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a string: {other:?}"),
        }
    }

    fn int(&self) -> i64 {
        match self {
            R::Int(i) => *i,
            other => panic!("not an integer: {other:?}"),
        }
    }

    /// Elements of an array or set.
    fn items(&self) -> &[R] {
        match self {
            R::Arr(v) | R::Set(v) => v,
            other => panic!("not an array: {other:?}"),
        }
    }

    /// String elements of an array or set.
    fn strs(&self) -> Vec<String> {
        self.items().iter().map(R::s).collect()
    }

    /// A RESP2 flat array or a RESP3 map, as (key, value) pairs.
    fn pairs(&self) -> Vec<(String, R)> {
        match self {
            R::Map(m) => m.iter().map(|(k, v)| (k.s(), v.clone())).collect(),
            R::Arr(v) => v.chunks(2).map(|p| (p[0].s(), p[1].clone())).collect(),
            other => panic!("not a map: {other:?}"),
        }
    }

    fn field(&self, name: &str) -> R {
        self.pairs()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no field {name} in {self:?}"))
    }
}

struct Client {
    r: BufReader<TcpStream>,
}

impl Client {
    fn new(e: &Ember) -> Client {
        Client::at(e.port)
    }

    fn at(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        Client {
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, args: &[&str]) {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a.as_bytes());
            buf.extend_from_slice(b"\r\n");
        }
        self.r.get_mut().write_all(&buf).expect("write");
    }

    fn call(&mut self, args: &[&str]) -> R {
        self.send(args);
        self.read()
    }

    /// The error text of a command that must fail.
    fn err(&mut self, args: &[&str]) -> String {
        match self.call(args) {
            R::Err(e) => e,
            other => panic!("{args:?} did not fail: {other:?}"),
        }
    }

    fn ok(&mut self, args: &[&str]) {
        assert_eq!(self.call(args), R::Simple("OK".into()), "{args:?}");
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        let n = self.r.read_line(&mut l).expect("read");
        assert!(n > 0, "connection closed");
        l.trim_end_matches("\r\n").to_string()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0; n + 2];
        self.r.read_exact(&mut b).expect("read bulk");
        b.truncate(n);
        b
    }

    fn read(&mut self) -> R {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        let n = || rest.parse::<i64>().expect("length");
        match t {
            "+" => R::Simple(rest.into()),
            "-" => R::Err(rest.into()),
            ":" => R::Int(n()),
            "_" => R::Null,
            "#" => R::Bool(rest == "t"),
            "," => R::Double(rest.into()),
            "$" if n() < 0 => R::Null,
            "$" => R::Bulk(self.bytes(n() as usize)),
            "=" => {
                let b = self.bytes(n() as usize);
                R::Verbatim(String::from_utf8_lossy(&b[..3]).into(), b[4..].to_vec())
            }
            "*" if n() < 0 => R::Null,
            "*" => R::Arr((0..n()).map(|_| self.read()).collect()),
            "~" => R::Set((0..n()).map(|_| self.read()).collect()),
            "%" => R::Map((0..n()).map(|_| (self.read(), self.read())).collect()),
            other => panic!("unexpected reply type {other:?} in {l:?}"),
        }
    }

    /// True when the server closed the connection (reads EOF).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.r.read(&mut b), Ok(0) | Err(_))
    }
}

/// INFO text parsed into section -> field -> value (section names lower-cased).
fn parse_info(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut cur = String::new();
    for line in text.split("\r\n") {
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix("# ") {
            cur = h.to_lowercase();
            out.entry(cur.clone()).or_default();
            continue;
        }
        let (k, v) = line.split_once(':').expect("field line");
        out.entry(cur.clone())
            .or_default()
            .insert(k.into(), v.into());
    }
    out
}

fn info(c: &mut Client, section: &str) -> HashMap<String, String> {
    let text = c.call(&["INFO", section]).s();
    parse_info(&text).remove(section).unwrap_or_default()
}

fn kv(v: &str) -> HashMap<String, String> {
    v.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(a, b)| (a.into(), b.into()))
        .collect()
}

/// Polls `f` for up to 20 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh, empty directory under the system temp dir.
fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ember-server-test-{}-{tag}-{}",
        std::process::id(),
        free_port()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d.canonicalize().expect("canonical temp dir")
}

// ------------------------------------------------------------------------------------------
// TIME, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB
// ------------------------------------------------------------------------------------------

#[test]
fn time_and_dbsize() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let t = c.call(&["TIME"]).strs();
    assert_eq!(t.len(), 2);
    let secs: u64 = t[0].parse().unwrap();
    let usecs: u64 = t[1].parse().unwrap();
    assert!(usecs < 1_000_000);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) < 60, "{secs} vs {now}");
    assert_eq!(
        c.err(&["TIME", "x"]),
        "ERR wrong number of arguments for 'time' command"
    );

    assert_eq!(c.call(&["DBSIZE"]), R::Int(0));
    c.ok(&["SET", "a", "1"]);
    c.ok(&["SET", "b", "2"]);
    assert_eq!(c.call(&["DBSIZE"]), R::Int(2));
    c.ok(&["SELECT", "3"]);
    assert_eq!(c.call(&["DBSIZE"]), R::Int(0));
    assert_eq!(
        c.err(&["DBSIZE", "x"]),
        "ERR wrong number of arguments for 'dbsize' command"
    );
}

#[test]
fn flushdb_and_flushall() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let fill = |c: &mut Client| {
        for db in ["0", "1"] {
            c.ok(&["SELECT", db]);
            for i in 0..50 {
                c.ok(&["SET", &format!("k{i}"), "v"]);
            }
        }
        c.ok(&["SELECT", "0"]);
    };
    fill(&mut c);
    c.ok(&["FLUSHDB"]);
    assert_eq!(c.call(&["DBSIZE"]), R::Int(0));
    c.ok(&["SELECT", "1"]);
    assert_eq!(
        c.call(&["DBSIZE"]),
        R::Int(50),
        "FLUSHDB touches only the current db"
    );
    c.ok(&["FLUSHDB", "async"]);
    assert_eq!(
        c.call(&["DBSIZE"]),
        R::Int(0),
        "ASYNC empties the db before replying"
    );
    c.ok(&["SELECT", "0"]);

    fill(&mut c);
    c.ok(&["FLUSHALL", "SYNC"]);
    for db in ["0", "1"] {
        c.ok(&["SELECT", db]);
        assert_eq!(c.call(&["DBSIZE"]), R::Int(0));
    }
    fill(&mut c);
    c.ok(&["FLUSHALL", "ASYNC"]);
    for db in ["0", "1"] {
        c.ok(&["SELECT", db]);
        assert_eq!(c.call(&["DBSIZE"]), R::Int(0));
        assert_eq!(c.call(&["GET", "k1"]), R::Null);
    }
    c.ok(&["FLUSHALL"]);
    c.ok(&["FLUSHDB", "sync"]);
    assert_eq!(c.err(&["FLUSHDB", "now"]), "ERR syntax error");
    assert_eq!(c.err(&["FLUSHALL", "ASYNC", "SYNC"]), "ERR syntax error");
    assert_eq!(c.err(&["FLUSHALL", "x"]), "ERR syntax error");
}

#[test]
fn swapdb() {
    let e = Ember::start(&[]);
    let mut a = Client::new(&e);
    let mut b = Client::new(&e);
    a.ok(&["SET", "k", "in-db0"]);
    b.ok(&["SELECT", "1"]);
    b.ok(&["SET", "k", "in-db1"]);
    b.ok(&["SET", "only1", "x"]);
    a.ok(&["SWAPDB", "0", "1"]);
    assert_eq!(
        a.call(&["GET", "k"]).s(),
        "in-db1",
        "a client sees the other db's data"
    );
    assert_eq!(a.call(&["DBSIZE"]), R::Int(2));
    assert_eq!(b.call(&["GET", "k"]).s(), "in-db0");
    assert_eq!(b.call(&["GET", "only1"]), R::Null);
    a.ok(&["SWAPDB", "1", "1"]);
    a.ok(&["SWAPDB", "1", "0"]);
    assert_eq!(a.call(&["GET", "k"]).s(), "in-db0");

    assert_eq!(a.err(&["SWAPDB", "x", "1"]), "ERR invalid first DB index");
    assert_eq!(
        a.err(&["SWAPDB", "0", "1.5"]),
        "ERR invalid second DB index"
    );
    assert_eq!(
        a.err(&["SWAPDB", "4294967296", "0"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        a.err(&["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        a.err(&["SWAPDB", "-1", "0"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        a.err(&["SWAPDB", "0"]),
        "ERR wrong number of arguments for 'swapdb' command"
    );
}

// ------------------------------------------------------------------------------------------
// INFO
// ------------------------------------------------------------------------------------------

#[test]
fn info_sections_and_layout() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let text = c.call(&["INFO"]).s();
    assert!(text.starts_with("# Server\r\n"), "{text}");
    assert!(text.ends_with("\r\n"));
    assert!(!text.replace("\r\n", "").contains('\n'));
    assert!(
        text.contains("\r\n\r\n# Clients\r\n"),
        "sections are separated by a blank line"
    );
    let headers: Vec<&str> = text.split("\r\n").filter(|l| l.starts_with("# ")).collect();
    assert_eq!(
        headers,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    assert_eq!(
        c.call(&["INFO", "default"])
            .s()
            .split("\r\n")
            .filter(|l| l.starts_with("# "))
            .count(),
        10
    );
    for arg in ["all", "everything", "ALL"] {
        let text = c.call(&["INFO", arg]).s();
        let s = parse_info(&text);
        assert!(s.contains_key("commandstats"), "{arg}");
        assert!(s.contains_key("latencystats"), "{arg}");
        assert_eq!(s.len(), 12, "{arg}");
    }
    let two = parse_info(&c.call(&["INFO", "KEYSPACE", "server", "server"]).s());
    let mut names: Vec<&String> = two.keys().collect();
    names.sort();
    assert_eq!(names, ["keyspace", "server"]);
    assert_eq!(c.call(&["INFO", "nosuchsection"]), R::Bulk(Vec::new()));
    let cs = c.call(&["INFO", "commandstats"]).s();
    assert!(cs.starts_with("# Commandstats\r\n"));

    // RESP3: a verbatim string of format txt.
    assert_eq!(c.call(&["HELLO", "3"]).field("proto"), R::Int(3));
    match c.call(&["INFO", "server"]) {
        R::Verbatim(f, text) => {
            assert_eq!(f, "txt");
            assert!(text.starts_with(b"# Server\r\n"));
        }
        other => panic!("not verbatim: {other:?}"),
    }
}

#[test]
fn info_server_clients_memory() {
    let e = Ember::start(&["--threads", "3"]);
    let mut c = Client::new(&e);
    let s = info(&mut c, "server");
    assert_eq!(s["redis_version"], "7.2.0");
    assert_eq!(s["redis_mode"], "standalone");
    assert_eq!(s["tcp_port"], e.port.to_string());
    assert_eq!(s["arch_bits"], "64");
    assert_eq!(s["ember_threads"], "3");
    assert_eq!(s["io_threads_active"], "0");
    assert_eq!(s["config_file"], "");
    assert_eq!(s["hz"], "10");
    assert!(s["run_id"].len() == 40 && s["run_id"].bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(s["process_id"].parse::<u32>().unwrap() > 0);
    assert!(s["executable"].ends_with("ember"), "{}", s["executable"]);
    assert!(!s["os"].is_empty() && !s["ember_version"].is_empty());
    let usec: u64 = s["server_time_usec"].parse().unwrap();
    assert!(usec > 1_600_000_000_000_000);
    assert!(s["uptime_in_seconds"].parse::<u64>().is_ok());
    assert_eq!(s["uptime_in_days"], "0");

    // The harness's start-up probes may still be closing: wait until `c` is the only client.
    eventually("the start-up probes to disconnect", || {
        info(&mut c, "clients")["connected_clients"] == "1"
    });
    let before = 1;
    let mut others: Vec<Client> = (0..3).map(|_| Client::new(&e)).collect();
    for o in &mut others {
        assert_eq!(o.call(&["PING"]), R::Simple("PONG".into()));
    }
    let cl = info(&mut c, "clients");
    assert_eq!(
        cl["connected_clients"].parse::<usize>().unwrap(),
        before + 3
    );
    assert_eq!(cl["maxclients"], "10000");
    assert_eq!(cl["blocked_clients"], "0");
    drop(others);
    eventually("connected_clients to drop", || {
        info(&mut c, "clients")["connected_clients"]
            .parse::<usize>()
            .unwrap()
            == before
    });

    let m = info(&mut c, "memory");
    let used: u64 = m["used_memory"].parse().unwrap();
    assert!(used > 0);
    assert!(m["used_memory_rss"].parse::<u64>().unwrap() > 0);
    assert!(m["used_memory_peak"].parse::<u64>().unwrap() >= used);
    assert!(
        m["used_memory_human"].ends_with(['B', 'K', 'M', 'G']),
        "{}",
        m["used_memory_human"]
    );
    assert!(m["mem_allocator"].starts_with("jemalloc-"));
    assert_eq!(m["maxmemory"], "0");
    assert_eq!(m["maxmemory_policy"], "noeviction");
    let value = "x".repeat(1000);
    for i in 0..3000 {
        c.send(&["SET", &format!("key:{i}"), &value]);
    }
    for _ in 0..3000 {
        assert_eq!(c.read(), R::Simple("OK".into()));
    }
    let after: u64 = info(&mut c, "memory")["used_memory"].parse().unwrap();
    assert!(after > used + 2_000_000, "used_memory {used} -> {after}");
    let peak: u64 = info(&mut c, "memory")["used_memory_peak"].parse().unwrap();
    assert!(peak >= after);

    let p = info(&mut c, "persistence");
    assert_eq!(p["loading"], "0");
    assert_eq!(info(&mut c, "replication")["role"], "master");
    assert_eq!(info(&mut c, "cluster")["cluster_enabled"], "0");
}

#[test]
fn info_stats_counters() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    c.ok(&["CONFIG", "RESETSTAT"]);
    c.ok(&["SET", "k", "v"]);
    c.call(&["GET", "k"]);
    c.call(&["GET", "k"]);
    c.call(&["GET", "nokey"]);
    c.err(&["SWAPDB", "x", "0"]);
    c.err(&["GET"]);
    let st = info(&mut c, "stats");
    assert_eq!(st["keyspace_hits"], "2");
    assert_eq!(st["keyspace_misses"], "1");
    assert_eq!(st["total_error_replies"], "2");
    // CONFIG RESETSTAT itself is counted after it ran, then SET, 3 GET, SWAPDB.
    assert_eq!(st["total_commands_processed"], "6");
    assert!(st["total_net_input_bytes"].parse::<u64>().unwrap() > 0);
    assert!(st["total_net_output_bytes"].parse::<u64>().unwrap() > 0);
    let conns: u64 = st["total_connections_received"].parse().unwrap();
    let mut other = Client::new(&e);
    other.call(&["PING"]);
    let st = info(&mut c, "stats");
    assert_eq!(
        st["total_connections_received"].parse::<u64>().unwrap(),
        conns + 1
    );
    assert_eq!(st["rejected_connections"], "0");

    // instantaneous_ops_per_sec is sampled: keep the server busy until it shows.
    eventually("instantaneous_ops_per_sec > 0", || {
        for _ in 0..200 {
            other.send(&["PING"]);
        }
        for _ in 0..200 {
            other.read();
        }
        info(&mut c, "stats")["instantaneous_ops_per_sec"] != "0"
    });
}

#[test]
fn info_expired_keys_counts_lazy_and_active_expiry() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    c.ok(&["SET", "lazy", "v", "PX", "30"]);
    c.ok(&["SET", "active", "v", "PX", "30"]);
    std::thread::sleep(Duration::from_millis(40));
    // Either the read or the background cycle removes "lazy": both count.
    assert_eq!(c.call(&["GET", "lazy"]), R::Null);
    eventually("both keys to count as expired", || {
        info(&mut c, "stats")["expired_keys"] == "2"
    });
    c.ok(&["CONFIG", "RESETSTAT"]);
    assert_eq!(info(&mut c, "stats")["expired_keys"], "0");
}

#[test]
fn info_keyspace() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    assert!(info(&mut c, "keyspace").is_empty());
    c.ok(&["SET", "a", "1"]);
    c.ok(&["SET", "b", "2", "EX", "100"]);
    c.ok(&["SET", "c", "3"]);
    c.ok(&["SELECT", "5"]);
    c.ok(&["SET", "x", "1"]);
    let ks = info(&mut c, "keyspace");
    let mut dbs: Vec<&String> = ks.keys().collect();
    dbs.sort();
    assert_eq!(dbs, ["db0", "db5"]);
    assert!(
        ks["db0"].starts_with("keys=3,expires=1,avg_ttl="),
        "{}",
        ks["db0"]
    );
    let avg: u64 = kv(&ks["db0"])["avg_ttl"].parse().unwrap();
    assert!(avg > 90_000 && avg <= 100_000, "{avg}");
    assert_eq!(ks["db5"], "keys=1,expires=0,avg_ttl=0");
}

#[test]
fn info_commandstats_and_resetstat() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    c.ok(&["CONFIG", "RESETSTAT"]);
    for _ in 0..3 {
        c.call(&["GET", "k"]);
    }
    c.ok(&["SET", "k", "v"]);
    c.err(&["GET"]);
    c.err(&["SWAPDB", "0", "99"]);
    c.call(&["CONFIG", "GET", "timeout"]);
    let cs = info(&mut c, "commandstats");
    let get = kv(&cs["cmdstat_get"]);
    assert_eq!(get["calls"], "3");
    assert_eq!(get["rejected_calls"], "1", "arity errors are rejections");
    assert_eq!(get["failed_calls"], "0");
    let per_call = &get["usec_per_call"];
    assert!(
        per_call.split_once('.').is_some_and(|(_, d)| d.len() == 2),
        "{per_call}"
    );
    assert!(cs["cmdstat_get"].starts_with("calls=3,usec="));
    assert_eq!(kv(&cs["cmdstat_set"])["calls"], "1");
    let swap = kv(&cs["cmdstat_swapdb"]);
    assert_eq!(
        (swap["calls"].as_str(), swap["failed_calls"].as_str()),
        ("1", "1")
    );
    assert_eq!(kv(&cs["cmdstat_config|get"])["calls"], "1");
    assert_eq!(kv(&cs["cmdstat_config|resetstat"])["calls"], "1");
    assert!(!cs.contains_key("cmdstat_incr"));
    assert!(
        !cs.contains_key("cmdstat_config"),
        "containers are never called themselves"
    );

    c.ok(&["CONFIG", "RESETSTAT"]);
    let cs = info(&mut c, "commandstats");
    assert!(!cs.contains_key("cmdstat_get"));
    assert_eq!(kv(&cs["cmdstat_config|resetstat"])["calls"], "1");
    let st = info(&mut c, "stats");
    assert_eq!(st["keyspace_hits"], "0");
    assert_eq!(st["keyspace_misses"], "0");
    assert_eq!(st["total_error_replies"], "0");
}

// ------------------------------------------------------------------------------------------
// CONFIG
// ------------------------------------------------------------------------------------------

#[test]
fn config_get() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let get = |c: &mut Client, args: &[&str]| -> Vec<(String, String)> {
        let mut full = vec!["CONFIG", "GET"];
        full.extend_from_slice(args);
        c.call(&full)
            .pairs()
            .into_iter()
            .map(|(k, v)| (k, v.s()))
            .collect()
    };
    let one = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    assert_eq!(get(&mut c, &["maxclients"]), one("maxclients", "10000"));
    assert_eq!(get(&mut c, &["port"]), one("port", &e.port.to_string()));
    assert_eq!(
        get(&mut c, &["proto-max-bulk-len"]),
        one("proto-max-bulk-len", "536870912")
    );
    assert_eq!(get(&mut c, &["maxclient?"]), one("maxclients", "10000"));
    assert_eq!(get(&mut c, &["timeou[st]"]), one("timeout", "0"));
    assert_eq!(
        get(&mut c, &["MAXCLIENTS"]),
        one("MAXCLIENTS", "10000"),
        "a plain name is echoed as given"
    );
    assert_eq!(get(&mut c, &["MAXCLIENT*"]), one("maxclients", "10000"));
    assert_eq!(get(&mut c, &["nosuchparam"]), vec![]);
    assert_eq!(
        get(&mut c, &["timeout", "timeou*", "TIMEOUT", "maxclients"]).len(),
        2
    );
    let all = get(&mut c, &["*"]);
    for k in [
        "maxclients",
        "timeout",
        "port",
        "databases",
        "bind",
        "dir",
        "save",
        "appendonly",
        "hz",
    ] {
        assert!(
            all.iter().any(|(n, _)| n == k),
            "{k} missing from CONFIG GET *"
        );
    }
    let cwd = get(&mut c, &["dir"]);
    assert!(
        Path::new(&cwd[0].1).is_absolute(),
        "dir is the absolute working directory"
    );
    assert_eq!(
        c.err(&["CONFIG", "GET"]),
        "ERR wrong number of arguments for 'config|get' command"
    );
    // RESP3: a map.
    c.call(&["HELLO", "3"]);
    match c.call(&["CONFIG", "GET", "maxclients", "timeout"]) {
        R::Map(m) => assert_eq!(m.len(), 2),
        other => panic!("not a map: {other:?}"),
    }
}

#[test]
fn config_set() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let val = |c: &mut Client, k: &str| c.call(&["CONFIG", "GET", k]).items()[1].s();
    c.ok(&["CONFIG", "SET", "timeout", "30", "maxclients", "5000"]);
    assert_eq!(val(&mut c, "timeout"), "30");
    assert_eq!(val(&mut c, "maxclients"), "5000");
    assert_eq!(info(&mut c, "clients")["maxclients"], "5000");
    c.ok(&["CONFIG", "SET", "TIMEOUT", "0", "MaxClients", "10000"]);
    assert_eq!(val(&mut c, "timeout"), "0");
    c.ok(&["CONFIG", "SET", "proto-max-bulk-len", "2mb"]);
    assert_eq!(val(&mut c, "proto-max-bulk-len"), "2097152");
    c.ok(&["CONFIG", "SET", "loglevel", "WARNING"]);
    assert_eq!(val(&mut c, "loglevel"), "warning");

    assert_eq!(
        c.err(&["CONFIG", "SET", "xyz", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'xyz'"
    );
    // One bad pair rejects the whole command.
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout", "77", "xyz", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'xyz'"
    );
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout", "77", "maxclients", "abc"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"
    );
    assert_eq!(val(&mut c, "timeout"), "0");
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout", "-1"]),
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive"
    );
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout", "5", "Timeout", "6"]),
        "ERR CONFIG SET failed (possibly related to argument 'Timeout') - duplicate parameter"
    );
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout", "5", "Port", "7000"]),
        "ERR CONFIG SET failed (possibly related to argument 'Port') - can't set immutable config"
    );
    assert_eq!(
        c.err(&["CONFIG", "SET", "databases", "4"]),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    // The first problem found wins, as in Redis.
    assert_eq!(
        c.err(&["CONFIG", "SET", "port", "1", "xyz", "1"]),
        "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"
    );
    assert!(c
        .err(&["CONFIG", "SET", "appendfsync", "sometimes"])
        .starts_with("ERR CONFIG SET failed (possibly related to argument 'appendfsync') - "));
    assert_eq!(val(&mut c, "timeout"), "0");
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout", "0", "maxclients"]),
        "ERR syntax error"
    );
    assert_eq!(
        c.err(&["CONFIG", "SET", "timeout"]),
        "ERR wrong number of arguments for 'config|set' command"
    );
    assert_eq!(
        c.err(&["CONFIG", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try CONFIG HELP."
    );
    assert_eq!(
        c.err(&["CONFIG"]),
        "ERR wrong number of arguments for 'config' command"
    );

    // requirepass takes effect for new connections.
    c.ok(&["CONFIG", "SET", "requirepass", "s3cret"]);
    let mut n = Client::new(&e);
    assert_eq!(n.err(&["PING"]), "NOAUTH Authentication required.");
    n.ok(&["AUTH", "s3cret"]);
    c.ok(&["CONFIG", "SET", "requirepass", ""]);
    assert_eq!(Client::new(&e).call(&["PING"]), R::Simple("PONG".into()));
}

#[test]
fn config_set_maxclients_rejects_connections() {
    let e = Ember::start(&[]);
    let mut admin = Client::new(&e);
    // The harness's start-up probe connection may still be counted for a moment.
    eventually("only the admin connection", || {
        info(&mut admin, "clients")["connected_clients"] == "1"
    });
    admin.ok(&["CONFIG", "SET", "maxclients", "2"]);
    let mut ok = Client::new(&e);
    assert_eq!(ok.call(&["PING"]), R::Simple("PONG".into()));
    let mut refused = Client::new(&e);
    assert_eq!(
        refused.read(),
        R::Err("ERR max number of clients reached".into())
    );
    assert_eq!(info(&mut admin, "stats")["rejected_connections"], "1");
    admin.ok(&["CONFIG", "RESETSTAT"]);
    assert_eq!(info(&mut admin, "stats")["rejected_connections"], "0");
}

#[test]
fn config_dir() {
    let start = temp_dir("start");
    let other = temp_dir("other");
    let e = Ember::start(&["--dir", start.to_str().unwrap()]);
    let mut c = Client::new(&e);
    let dir = |c: &mut Client| c.call(&["CONFIG", "GET", "dir"]).items()[1].s();
    assert_eq!(
        dir(&mut c),
        start.display().to_string(),
        "the process chdirs to dir at start"
    );
    let missing = start.join("does-not-exist");
    assert_eq!(
        c.err(&["CONFIG", "SET", "dir", missing.to_str().unwrap()]),
        "ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory"
    );
    assert_eq!(dir(&mut c), start.display().to_string());
    // A later failure in the same command moves nothing.
    assert!(c
        .err(&[
            "CONFIG",
            "SET",
            "dir",
            other.to_str().unwrap(),
            "timeout",
            "x"
        ])
        .contains("argument 'timeout'"));
    assert_eq!(dir(&mut c), start.display().to_string());
    c.ok(&["CONFIG", "SET", "dir", other.to_str().unwrap()]);
    assert_eq!(dir(&mut c), other.display().to_string());
    drop(c);
    drop(e);
    let _ = std::fs::remove_dir_all(&start);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn config_rewrite() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    assert_eq!(
        c.err(&["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );

    let d = temp_dir("rewrite");
    let conf = d.join("ember.conf");
    std::fs::write(
        &conf,
        "# my settings\nmaxclients 123\n\ntimeout 7\n# again\ntimeout 8\n",
    )
    .unwrap();
    let srv = Ember::start_with_config(Some(&conf), &["--dir", d.to_str().unwrap()]);
    let mut c = Client::at(srv.port);
    let s = info(&mut c, "server");
    assert_eq!(s["config_file"], conf.display().to_string());
    c.ok(&[
        "CONFIG",
        "SET",
        "maxclients",
        "321",
        "requirepass",
        "two words",
    ]);
    c.ok(&["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(&conf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# my settings");
    assert_eq!(lines[1], "maxclients 321", "{text}");
    assert_eq!(
        lines[3], "timeout 8",
        "the last value wins in place of the first line: {text}"
    );
    assert_eq!(lines[4], "# again");
    assert!(!text.contains("timeout 7"));
    assert!(text.contains("# Generated by CONFIG REWRITE\n"));
    assert!(text.contains("requirepass \"two words\"\n"), "{text}");
    assert!(text.contains(&format!("port {}\n", srv.port)));
    assert!(text.contains(&format!("dir {}\n", d.display())));
    c.ok(&["AUTH", "two words"]);
    drop(c);
    drop(srv);

    // The rewritten file starts a server with the same settings.
    let again = Ember::start_with_config(Some(&conf), &[]);
    let mut c = Client::at(again.port);
    c.ok(&["AUTH", "two words"]);
    assert_eq!(
        c.call(&["CONFIG", "GET", "maxclients"]).items()[1].s(),
        "321"
    );
    assert_eq!(c.call(&["CONFIG", "GET", "timeout"]).items()[1].s(), "8");
    c.ok(&["CONFIG", "REWRITE"]);
    drop(c);
    drop(again);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn help_replies() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    for (args, header, has) in [
        (
            &["CONFIG", "HELP"][..],
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "RESETSTAT",
        ),
        (
            &["command", "help"][..],
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GETKEYSANDFLAGS <full-command>",
        ),
        (
            &["DEBUG", "HELP"][..],
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "SLEEP <seconds>",
        ),
    ] {
        let lines = c.call(args);
        assert!(lines.items().iter().all(|l| matches!(l, R::Simple(_))));
        let lines = lines.strs();
        assert_eq!(lines[0], header);
        assert!(lines.iter().any(|l| l == has), "{lines:?}");
        assert_eq!(&lines[lines.len() - 2..], ["HELP", "    Prints this help."]);
    }
    assert_eq!(
        c.err(&["CONFIG", "HELP", "x"]),
        "ERR wrong number of arguments for 'config|help' command"
    );
}

// ------------------------------------------------------------------------------------------
// COMMAND
// ------------------------------------------------------------------------------------------

#[test]
fn command_count_list_and_info() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let n = c.call(&["COMMAND", "COUNT"]).int();
    assert!(n >= 10);
    let all = c.call(&["COMMAND"]);
    assert_eq!(all.items().len() as i64, n);
    assert_eq!(c.call(&["COMMAND", "INFO"]).items().len() as i64, n);
    assert!(all.items().iter().all(|e| e.items().len() == 10));

    let names = c.call(&["COMMAND", "LIST"]).strs();
    assert_eq!(names.iter().filter(|n| !n.contains('|')).count() as i64, n);
    for want in [
        "get",
        "ping",
        "config",
        "config|get",
        "config|set",
        "command",
        "command|info",
        "client|kill",
        "info",
    ] {
        assert!(names.iter().any(|x| x == want), "{want} missing");
    }
    let mut got = c
        .call(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*"])
        .strs();
    got.sort();
    assert_eq!(
        got,
        [
            "config|get",
            "config|help",
            "config|resetstat",
            "config|rewrite",
            "config|set"
        ]
    );
    let got = c
        .call(&["COMMAND", "LIST", "filterby", "pattern", "FLUSH*"])
        .strs();
    assert_eq!(got.len(), 2);
    let got = c
        .call(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"])
        .strs();
    assert!(
        got.iter().any(|x| x == "ping") && !got.iter().any(|x| x == "info"),
        "{got:?}"
    );
    let got = c
        .call(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "admin"])
        .strs();
    assert!(got.iter().any(|x| x == "config|set") && got.iter().any(|x| x == "shutdown"));
    assert_eq!(
        c.call(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuchcat"]),
        R::Arr(vec![])
    );
    assert_eq!(
        c.call(&["COMMAND", "LIST", "FILTERBY", "MODULE", "x"]),
        R::Arr(vec![])
    );
    assert_eq!(c.err(&["COMMAND", "LIST", "FOO"]), "ERR syntax error");
    assert_eq!(
        c.err(&["COMMAND", "LIST", "FILTERBY", "PATTERN"]),
        "ERR syntax error"
    );
    assert_eq!(
        c.err(&["COMMAND", "LIST", "FILTERBY", "NAME", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        c.err(&["COMMAND", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try COMMAND HELP."
    );
    assert_eq!(
        c.err(&["COMMAND", "COUNT", "x"]),
        "ERR wrong number of arguments for 'command|count' command"
    );

    // COMMAND INFO: Redis 7's 10-element entries.
    let get = c.call(&["COMMAND", "INFO", "GET"]).items()[0].clone();
    let f = get.items();
    assert_eq!(f[0].s(), "get");
    assert_eq!(f[1], R::Int(2));
    let mut flags = f[2].strs();
    flags.sort();
    assert_eq!(flags, ["fast", "readonly"]);
    assert_eq!((f[3].int(), f[4].int(), f[5].int()), (1, 1, 1));
    let mut cats = f[6].strs();
    cats.sort();
    assert_eq!(cats, ["@fast", "@read", "@string"]);
    assert_eq!(f[7], R::Arr(vec![]), "tips");
    let spec = &f[8].items()[0];
    assert_eq!(spec.field("flags").strs(), ["RO", "access"]);
    let bs = spec.field("begin_search");
    assert_eq!(bs.field("type").s(), "index");
    assert_eq!(bs.field("spec").field("index"), R::Int(1));
    let fk = spec.field("find_keys");
    assert_eq!(fk.field("type").s(), "range");
    let fks = fk.field("spec");
    assert_eq!(
        (
            fks.field("lastkey"),
            fks.field("keystep"),
            fks.field("limit")
        ),
        (R::Int(0), R::Int(1), R::Int(0))
    );
    assert_eq!(f[9], R::Arr(vec![]), "no subcommands");

    let mset = c.call(&["COMMAND", "INFO", "mset"]).items()[0].clone();
    assert_eq!(
        (
            mset.items()[3].int(),
            mset.items()[4].int(),
            mset.items()[5].int()
        ),
        (1, -1, 2)
    );
    let fks = mset.items()[8].items()[0].field("find_keys").field("spec");
    assert_eq!(
        (fks.field("lastkey"), fks.field("keystep")),
        (R::Int(-1), R::Int(2))
    );

    let ping = c.call(&["COMMAND", "INFO", "ping"]).items()[0].clone();
    assert_eq!(ping.items()[8], R::Arr(vec![]), "no key specs without keys");
    assert_eq!(ping.items()[1], R::Int(-1));

    let cfg = c.call(&["COMMAND", "INFO", "config"]).items()[0].clone();
    assert_eq!(cfg.items()[1], R::Int(-2));
    let subs: Vec<String> = cfg.items()[9]
        .items()
        .iter()
        .map(|s| s.items()[0].s())
        .collect();
    for s in [
        "config|get",
        "config|set",
        "config|resetstat",
        "config|rewrite",
        "config|help",
    ] {
        assert!(subs.iter().any(|x| x == s), "{s}");
    }
    let setsub = cfg.items()[9]
        .items()
        .iter()
        .find(|s| s.items()[0].s() == "config|set")
        .unwrap()
        .clone();
    assert_eq!(setsub.items()[1], R::Int(-4));
    assert!(setsub.items()[2].strs().contains(&"admin".to_string()));

    let cmd = c.call(&["COMMAND", "INFO", "command"]).items()[0].clone();
    assert_eq!(cmd.items()[1], R::Int(-1));
    assert!(cmd.items()[9].items().len() >= 7);

    let several = c.call(&[
        "COMMAND",
        "INFO",
        "get",
        "nosuchcmd",
        "SET",
        "config|GET",
        "get|x",
    ]);
    let v = several.items();
    assert_eq!(v.len(), 5);
    assert_eq!(v[0].items()[0].s(), "get");
    assert_eq!(v[1], R::Null);
    assert_eq!(v[2].items()[0].s(), "set");
    assert_eq!(v[3].items()[0].s(), "config|get");
    assert_eq!(v[4], R::Null);

    // RESP3: flags, categories and tips are sets.
    c.call(&["HELLO", "3"]);
    let get = c.call(&["COMMAND", "INFO", "get"]).items()[0].clone();
    assert!(matches!(get.items()[2], R::Set(_)));
    assert!(matches!(get.items()[6], R::Set(_)));
    assert!(matches!(get.items()[8].items()[0], R::Map(_)));
}

#[test]
fn command_docs() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let reply = c.call(&["COMMAND", "DOCS", "info", "nosuchcmd", "config"]);
    let docs = reply.pairs();
    assert_eq!(docs.len(), 2, "unknown names are skipped");
    assert_eq!(docs[0].0, "info");
    let info = &docs[0].1;
    assert_eq!(
        info.field("summary").s(),
        "Returns information and statistics about the server."
    );
    assert_eq!(info.field("since").s(), "1.0.0");
    assert_eq!(info.field("group").s(), "server");
    assert!(!info.pairs().iter().any(|(k, _)| k == "subcommands"));
    let config = &docs[1].1;
    let subs = config.field("subcommands").pairs();
    assert!(subs.iter().any(|(k, _)| k == "config|get"));
    let set = &subs.iter().find(|(k, _)| k == "config|set").unwrap().1;
    assert_eq!(set.field("group").s(), "server");
    assert_eq!(set.field("since").s(), "2.0.0");

    let ping = c.call(&["COMMAND", "DOCS", "PING"]).pairs();
    assert_eq!(ping[0].0, "ping");
    assert_eq!(ping[0].1.field("group").s(), "connection");
    let all = c.call(&["COMMAND", "DOCS"]).pairs();
    assert_eq!(all.len() as i64, c.call(&["COMMAND", "COUNT"]).int());
    assert_eq!(
        c.call(&["COMMAND", "DOCS", "config|get"]).pairs()[0].0,
        "config|get"
    );

    c.call(&["HELLO", "3"]);
    assert_eq!(c.call(&["COMMAND", "DOCS", "nosuchcmd"]), R::Map(vec![]));
    assert!(matches!(c.call(&["COMMAND", "DOCS", "get"]), R::Map(_)));
}

#[test]
fn command_getkeys() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    let keys = |c: &mut Client, args: &[&str]| {
        let mut full = vec!["COMMAND", "GETKEYS"];
        full.extend_from_slice(args);
        c.call(&full).strs()
    };
    assert_eq!(keys(&mut c, &["GET", "k"]), ["k"]);
    assert_eq!(keys(&mut c, &["set", "a", "b", "EX", "10"]), ["a"]);
    assert_eq!(keys(&mut c, &["MSET", "a", "1", "b", "2"]), ["a", "b"]);
    assert_eq!(keys(&mut c, &["MGET", "a", "b", "c"]), ["a", "b", "c"]);
    assert_eq!(keys(&mut c, &["DEL", "a", "b"]), ["a", "b"]);
    assert_eq!(keys(&mut c, &["RENAME", "a", "b"]), ["a", "b"]);

    let flags = c.call(&["COMMAND", "GETKEYSANDFLAGS", "MSET", "a", "1", "b", "2"]);
    let v = flags.items();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].items()[0].s(), "a");
    assert_eq!(v[0].items()[1].strs(), ["RW", "update"]);
    assert_eq!(v[1].items()[0].s(), "b");
    let flags = c.call(&["COMMAND", "GETKEYSANDFLAGS", "GET", "k"]);
    assert_eq!(flags.items()[0].items()[1].strs(), ["RO", "access"]);

    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "nosuchcmd", "a"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "CONFIG", "nosuch"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "GET", "a", "b"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "MSET", "a"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "PING", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "CONFIG", "GET"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS", "GET"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        c.err(&["COMMAND", "GETKEYS"]),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
}

// ------------------------------------------------------------------------------------------
// SHUTDOWN
// ------------------------------------------------------------------------------------------

#[test]
fn shutdown_options_and_errors() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    assert_eq!(
        c.err(&["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    assert_eq!(c.err(&["SHUTDOWN", "ABORT", "NOW"]), "ERR syntax error");
    assert_eq!(c.err(&["SHUTDOWN", "SAVE", "NOSAVE"]), "ERR syntax error");
    assert_eq!(c.err(&["SHUTDOWN", "later"]), "ERR syntax error");
    // A save that cannot complete (a directory sits where dump.rdb goes)
    // keeps the server running, as Redis does.
    std::fs::create_dir_all(e.dir.join("dump.rdb").join("x")).unwrap();
    assert_eq!(
        c.err(&["SHUTDOWN", "SAVE"]),
        "ERR Errors trying to SHUTDOWN. Check logs."
    );
    assert_eq!(
        c.err(&["SHUTDOWN", "save", "now"]),
        "ERR Errors trying to SHUTDOWN. Check logs."
    );
    assert_eq!(c.call(&["PING"]), R::Simple("PONG".into()), "still running");
}

#[test]
fn shutdown_exits_without_reply() {
    for args in [
        &["SHUTDOWN"][..],
        &["SHUTDOWN", "NOSAVE", "NOW", "FORCE"],
        &["shutdown", "SAVE", "FORCE"],
    ] {
        let mut e = Ember::start(&[]);
        let mut c = Client::new(&e);
        c.ok(&["SET", "k", "v"]);
        c.send(args);
        assert!(
            c.closed(),
            "{args:?}: the client gets no reply, the connection closes"
        );
        assert_eq!(
            e.wait_exit(Duration::from_secs(20)),
            Some(true),
            "{args:?}: exit status 0"
        );
    }
}

// ------------------------------------------------------------------------------------------
// DEBUG
// ------------------------------------------------------------------------------------------

#[test]
fn debug_object() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    assert_eq!(c.err(&["DEBUG", "OBJECT", "nokey"]), "ERR no such key");
    c.ok(&["SET", "s", "hello"]);
    c.ok(&["SET", "n", "12345"]);
    c.ok(&["SET", "big", &"x".repeat(100)]);
    let parse = |line: String| -> HashMap<String, String> {
        line.split(' ')
            .filter_map(|p| p.split_once(':'))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let s = c.call(&["DEBUG", "OBJECT", "s"]);
    assert!(matches!(s, R::Simple(_)), "a status reply");
    let line = s.s();
    assert!(line.starts_with("Value at:0x"), "{line}");
    let f = parse(line);
    assert_eq!(f["refcount"], "1");
    assert_eq!(f["encoding"], "embstr");
    assert_eq!(f["serializedlength"], "6");
    assert!(f["lru_seconds_idle"].parse::<u64>().unwrap() < 100);
    assert!(f["lru"].parse::<u64>().unwrap() < 1 << 24);
    let f = parse(c.call(&["debug", "object", "n"]).s());
    assert_eq!(
        (f["encoding"].as_str(), f["serializedlength"].as_str()),
        ("int", "3")
    );
    let f = parse(c.call(&["DEBUG", "OBJECT", "big"]).s());
    assert_eq!(
        (f["encoding"].as_str(), f["serializedlength"].as_str()),
        ("raw", "102")
    );
    c.ok(&["SELECT", "1"]);
    assert_eq!(
        c.err(&["DEBUG", "OBJECT", "s"]),
        "ERR no such key",
        "the current db only"
    );
}

#[test]
fn debug_sleep_and_errors() {
    let e = Ember::start(&[]);
    let mut c = Client::new(&e);
    c.ok(&["DEBUG", "SLEEP", "0"]);
    c.ok(&["DEBUG", "SLEEP", "abc"]);
    c.ok(&["DEBUG", "SLEEP", "-1"]);
    let t0 = Instant::now();
    c.ok(&["DEBUG", "sleep", "0.2"]);
    assert!(
        t0.elapsed() >= Duration::from_millis(190),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        c.err(&["DEBUG", "FOO"]),
        "ERR unknown subcommand or wrong number of arguments for 'FOO'. Try DEBUG HELP."
    );
    assert_eq!(
        c.err(&["DEBUG", "OBJECT"]),
        "ERR unknown subcommand or wrong number of arguments for 'OBJECT'. Try DEBUG HELP."
    );
    assert_eq!(
        c.err(&["DEBUG", "SLEEP", "1", "2"]),
        "ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP."
    );
    assert_eq!(
        c.err(&["DEBUG"]),
        "ERR wrong number of arguments for 'debug' command"
    );
}
