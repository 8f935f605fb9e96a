//! Server commands: INFO, TIME, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, CONFIG (GET, SET,
//! RESETSTAT, REWRITE, HELP), COMMAND (COUNT, DOCS, GETKEYS, GETKEYSANDFLAGS, HELP, INFO,
//! LIST) and SHUTDOWN. DEBUG has its own family file, `cmd/debug.rs`.
//!
//! INFO reports only what Ember really measures or what is true by construction (for
//! example `role:master`, `loading:0`); Redis fields Ember cannot compute honestly are left
//! out rather than faked. COMMAND answers entirely from the registry, so a new command
//! appears in COMMAND INFO/DOCS/LIST/GETKEYS as soon as its family declares it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::{Display, Write as _};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use resp::{Args, ReplyWriter};
use storage::clock::NS_PER_SEC;
use storage::pattern::glob_match;
use storage::Table;
use tracing::{info as log_info, warn};

use crate::cmd::connection::REDIS_COMPAT_VERSION;
use crate::cmd::util::{is, lossy, parse_i64_or, reply_help};
use crate::config::Config;
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags, flags::*, BusyAnswer, ClusterRoute, CommandSpec, Group, Registry};
use crate::server::Server;
use crate::stats::{self, WorkerStats};

const S: Group = Group::Server;

/// Mask of Redis's 24-bit LRU clock (seconds): INFO `lru_clock`, DEBUG OBJECT `lru`.
pub const LRU_CLOCK_MAX: u64 = (1 << 24) - 1;

/// Server commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("info", -1, LOADING | STALE, (0, 0, 0), S, info).doc(
        "Returns information and statistics about the server.",
        "1.0.0",
    ),
    CommandSpec::new("time", 1, LOADING | STALE | FAST, (0, 0, 0), S, time)
        .doc("Returns the server time.", "2.6.0"),
    CommandSpec::new("dbsize", 1, READONLY | FAST, (0, 0, 0), S, dbsize)
        .doc("Returns the number of keys in the database.", "1.0.0"),
    CommandSpec::new("flushdb", -1, WRITE, (0, 0, 0), S, flushdb)
        .doc("Remove all keys from the current database.", "1.0.0")
        .routed(ClusterRoute::LedGroups),
    CommandSpec::new("flushall", -1, WRITE, (0, 0, 0), S, flushall)
        .doc("Removes all keys from all databases.", "1.0.0")
        .routed(ClusterRoute::LedGroups),
    CommandSpec::new("swapdb", 3, WRITE | FAST, (0, 0, 0), S, swapdb)
        .doc("Swaps two Redis databases.", "4.0.0"),
    CommandSpec::container("config", S, CONFIG_SUBCOMMANDS)
        .doc("A container for server configuration commands.", "2.0.0"),
    // COMMAND runs on its own (no argument) and is also a container of subcommands.
    CommandSpec {
        subcommands: COMMAND_SUBCOMMANDS,
        ..CommandSpec::new("command", -1, LOADING | STALE, (0, 0, 0), S, command)
            .doc("Returns detailed information about all commands.", "2.8.13")
    },
    CommandSpec::new(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        (0, 0, 0),
        S,
        shutdown,
    )
    .doc(
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "1.0.0",
    )
    .when_busy(shutdown_when_busy),
];

const ADMIN_CFG: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("get", -3, ADMIN_CFG, (0, 0, 0), S, config_get).doc(
        "Returns the effective values of configuration parameters.",
        "2.0.0",
    ),
    CommandSpec::new("set", -4, ADMIN_CFG, (0, 0, 0), S, config_set)
        .doc("Sets configuration parameters in-flight.", "2.0.0"),
    CommandSpec::new("resetstat", 2, ADMIN_CFG, (0, 0, 0), S, config_resetstat)
        .doc("Resets the server's statistics.", "2.0.0"),
    CommandSpec::new("rewrite", 2, ADMIN_CFG, (0, 0, 0), S, config_rewrite)
        .doc("Persists the effective configuration to file.", "2.8.0"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, config_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("count", 2, LOADING | STALE, (0, 0, 0), S, command_count)
        .doc("Returns a count of commands.", "2.8.13"),
    CommandSpec::new("docs", -2, LOADING | STALE, (0, 0, 0), S, command_docs).doc(
        "Returns documentary information about one, multiple or all commands.",
        "7.0.0",
    ),
    CommandSpec::new(
        "getkeys",
        -3,
        LOADING | STALE,
        (0, 0, 0),
        S,
        command_getkeys,
    )
    .doc(
        "Extracts the key names from an arbitrary command.",
        "2.8.13",
    ),
    CommandSpec::new(
        "getkeysandflags",
        -3,
        LOADING | STALE,
        (0, 0, 0),
        S,
        command_getkeysandflags,
    )
    .doc(
        "Extracts the key names and access flags for an arbitrary command.",
        "7.0.0",
    ),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, command_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
    CommandSpec::new("info", -2, LOADING | STALE, (0, 0, 0), S, command_info).doc(
        "Returns information about one, multiple or all commands.",
        "2.8.13",
    ),
    CommandSpec::new("list", -2, LOADING | STALE, (0, 0, 0), S, command_list)
        .doc("Returns a list of command names.", "7.0.0"),
];

// ------------------------------------------------------------------------------------------
// Shared helpers
// ------------------------------------------------------------------------------------------

/// The text of an I/O error without Rust's " (os error N)" suffix, like `strerror`.
fn os_error_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

// ------------------------------------------------------------------------------------------
// TIME, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB
// ------------------------------------------------------------------------------------------

fn time(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    // The wall clock now, not the command's snapshot: inside a script or EXEC, ctx.now is
    // frozen for key expiry, but TIME moves on as in Redis.
    let now = storage::clock::now_ns();
    let secs = now / NS_PER_SEC;
    let usecs = (now % NS_PER_SEC) / 1_000;
    ctx.out.array(2);
    ctx.out.bulk_int(secs as i64);
    ctx.out.bulk_int(usecs as i64);
    Ok(())
}

fn dbsize(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    // Cluster mode counts the keys of the groups led here (a scan: no per-slot counts).
    if let Some(served) = crate::cluster::ServedKeys::for_client(ctx.server, ctx.client) {
        let ks = &ctx.server.keyspace;
        let mut n = 0i64;
        for shard in 0..ks.shard_count() {
            ks.with_shard(shard, |sh| {
                sh.table_ref(ctx.db()).for_each_live(ctx.now, |k, _| {
                    n += i64::from(served.contains(k));
                })
            });
        }
        ctx.out.int(n);
        return Ok(());
    }
    let n = ctx.ks().db_size(ctx.db());
    ctx.out.int(n as i64);
    Ok(())
}

/// FLUSHDB/FLUSHALL's optional `ASYNC|SYNC`; true for ASYNC.
fn flush_mode(args: Args<'_>) -> Result<bool, CmdError> {
    match args.len() {
        1 => Ok(false),
        2 if is(args.arg(1), "sync") => Ok(false),
        2 if is(args.arg(1), "async") => Ok(true),
        _ => Err(CmdError::Syntax),
    }
}

/// Frees flushed tables: on the lazy-free thread for ASYNC, here otherwise. Either way no
/// shard lock is held any more.
fn dispose(server: &crate::server::Server, tables: Vec<Table>, lazy: bool) {
    if tables.is_empty() {
        return;
    }
    if lazy {
        server.lazyfree.free(Box::new(tables));
    } else {
        drop(tables);
    }
}

/// Empties database `db` (or every database) atomically: all shard locks are held while
/// the tables are taken, so no command sees a half-flushed keyspace. Every key waited on
/// in a flushed database is ready afterwards (a blocked XREADGROUP learns that its stream
/// is gone, as Redis's signalFlushedDb).
fn flush(ctx: &mut Ctx<'_>, db: Option<usize>, lazy: bool) {
    let dbs = ctx.ks().db_count();
    let range = match db {
        Some(d) => d..d + 1,
        None => 0..dbs,
    };
    for d in range {
        ctx.server.watches.touch_existing(ctx.ks(), d, &[], ctx.now);
    }
    ctx.server.tracking.invalidate_all();
    let mut taken = Vec::new();
    {
        let mut all = ctx.ks().lock_all(ctx.now);
        for shard in all.shards_mut() {
            let range = match db {
                Some(d) => d..d + 1,
                None => 0..dbs,
            };
            for d in range {
                let t = shard.table(d);
                if !t.is_empty() {
                    taken.push(t.take());
                }
            }
        }
    }
    dispose(ctx.server, taken, lazy);
    let range = match db {
        Some(d) => d..d + 1,
        None => 0..dbs,
    };
    for d in range {
        ctx.server.blocking.ready_db(d, &mut ctx.client.ready_keys);
    }
}

fn flushdb(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let lazy = flush_mode(args)?;
    let db = ctx.db();
    flush(ctx, Some(db), lazy);
    ctx.out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let lazy = flush_mode(args)?;
    flush(ctx, None, lazy);
    ctx.out.ok();
    Ok(())
}

/// A database index argument as Redis's `getIntFromObjectOrReply` reads it.
fn db_index(arg: &[u8], err: &str) -> Result<i64, CmdError> {
    let v = parse_i64_or(arg, err)?;
    if i32::try_from(v).is_err() {
        return Err(CmdError::err(err));
    }
    Ok(v)
}

fn swapdb(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let a = db_index(args.arg(1), "invalid first DB index")?;
    let b = db_index(args.arg(2), "invalid second DB index")?;
    let n = ctx.ks().db_count() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return Err(CmdError::DbIndex);
    }
    let (a, b) = (a as usize, b as usize);
    ctx.server
        .watches
        .touch_existing(ctx.ks(), a, &[b], ctx.now);
    ctx.server
        .watches
        .touch_existing(ctx.ks(), b, &[a], ctx.now);
    {
        let mut all = ctx.ks().lock_all(ctx.now);
        for shard in all.shards_mut() {
            shard.swap_dbs(a, b);
        }
    }
    for db in [a, b] {
        ctx.server.blocking.ready_db(db, &mut ctx.client.ready_keys);
    }
    ctx.out.ok();
    Ok(())
}

// ------------------------------------------------------------------------------------------
// INFO
// ------------------------------------------------------------------------------------------

/// Sections of a plain `INFO` (Redis's defaults that Ember has).
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Every section, in the order Redis prints them.
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

fn info(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut want: BTreeSet<&'static str> = BTreeSet::new();
    let mut all = false;
    if args.len() == 1 {
        want.extend(DEFAULT_SECTIONS);
    }
    for a in args.iter().skip(1) {
        if is(a, "default") {
            want.extend(DEFAULT_SECTIONS);
        } else if is(a, "all") || is(a, "everything") {
            all = true;
        } else if let Some(s) = ALL_SECTIONS.iter().find(|s| is(a, s)) {
            want.insert(*s);
        }
    }
    let text = info_text(ctx.server, ctx.now, |s| all || want.contains(s));
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// CPU time (system, user) in seconds used by this process (`children`: by its waited-for
/// children), from getrusage.
fn cpu_seconds(children: bool) -> (f64, f64) {
    let who = if children {
        libc::RUSAGE_CHILDREN
    } else {
        libc::RUSAGE_SELF
    };
    // SAFETY: `rusage` is plain old data, so all-zero is a valid value; getrusage only
    // writes into the struct it is given and `who` is one of the two documented values.
    // Tested in `tests::cpu_time_grows`.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_stime), secs(ru.ru_utime))
}

/// Appends one `key:value` INFO line.
fn kv(s: &mut String, key: &str, value: impl Display) {
    let _ = write!(s, "{key}:{value}\r\n");
}

/// Redis's `bytesToHuman`: `512B`, `1.50K`, `2.00M`, ...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 10, "K"),
        (1 << 20, "M"),
        (1 << 30, "G"),
        (1 << 40, "T"),
        (1 << 50, "P"),
    ];
    if n < 1024 {
        return format!("{n}B");
    }
    for (i, (unit, suffix)) in UNITS.iter().enumerate() {
        let next = UNITS.get(i + 1).map_or(1 << 60, |u| u.0);
        if n < next {
            return format!("{:.2}{suffix}", n as f64 / *unit as f64);
        }
    }
    format!("{n}B")
}

/// "sysname release machine", as Redis's `os` field (read from /proc, cached).
fn os_name() -> &'static str {
    static OS: OnceLock<String> = OnceLock::new();
    OS.get_or_init(|| {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let sys = match read("/proc/sys/kernel/ostype") {
            s if s.is_empty() => std::env::consts::OS.to_string(),
            s => s,
        };
        format!(
            "{sys} {} {}",
            read("/proc/sys/kernel/osrelease"),
            std::env::consts::ARCH
        )
    })
}

/// A `Name:   1234 kB` line of a /proc file, in bytes.
fn proc_kb(path: &str, field: &str) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim_start_matches(':').split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Allocator figures: (allocated, active, resident) bytes, freshly refreshed.
fn allocator_stats() -> (u64, u64, u64) {
    use tikv_jemalloc_ctl::{epoch, stats as je};
    let _ = epoch::advance();
    let r = |v: tikv_jemalloc_ctl::Result<usize>| v.map_or(0, |x| x as u64);
    (
        r(je::allocated::read()),
        r(je::active::read()),
        r(je::resident::read()),
    )
}

/// The highest `used_memory` seen (by the sampler or by INFO).
static PEAK_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Current used bytes (allocated less thread caches and Lua heaps, as eviction counts
/// them), jemalloc's allocated, active and resident bytes, also raising the recorded peak.
fn used_memory() -> (u64, u64, u64, u64) {
    let (allocated, active, resident) = allocator_stats();
    let used = crate::evict::allocated_bytes();
    PEAK_MEMORY.fetch_max(used, Relaxed);
    (used, allocated, active, resident)
}

/// The highest used memory seen (INFO used_memory_peak, MEMORY STATS peak.allocated).
pub fn peak_memory() -> u64 {
    PEAK_MEMORY.load(Relaxed)
}

fn jemalloc_version() -> &'static str {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        let v = tikv_jemalloc_ctl::version::read().unwrap_or("unknown");
        format!("jemalloc-{}", v.split('-').next().unwrap_or(v))
    })
}

/// Instantaneous rates, sampled every 100 ms like Redis's `trackInstantaneousMetric`.
struct Rates {
    last: Option<(Instant, [u64; 3])>,
    samples: [[f64; RATE_SAMPLES]; 3],
    idx: usize,
}

const RATE_SAMPLES: usize = 16;

static RATES: Mutex<Rates> = parking_lot::const_mutex(Rates {
    last: None,
    samples: [[0.0; RATE_SAMPLES]; 3],
    idx: 0,
});

/// Totals the rates are computed from: commands, input bytes, output bytes.
fn rate_totals(server: &Server) -> [u64; 3] {
    [
        stats::sum(&server.workers, |w| &w.commands),
        stats::sum(&server.workers, |w| &w.net_input),
        stats::sum(&server.workers, |w| &w.net_output),
    ]
}

/// Takes one sample of the instantaneous metrics.
fn sample_rates(server: &Server) {
    let now = Instant::now();
    let totals = rate_totals(server);
    let mut r = RATES.lock();
    if let Some((at, prev)) = r.last {
        let dt = now.duration_since(at).as_secs_f64();
        if dt > 0.0 {
            let idx = r.idx;
            for (k, (t, p)) in totals.iter().zip(prev).enumerate() {
                r.samples[k][idx] = t.saturating_sub(p) as f64 / dt;
            }
            r.idx = (idx + 1) % RATE_SAMPLES;
        }
    }
    r.last = Some((now, totals));
}

/// Average of the sampled rates: (ops/sec, input bytes/sec, output bytes/sec).
fn current_rates() -> (f64, f64, f64) {
    let r = RATES.lock();
    let avg = |k: usize| r.samples[k].iter().sum::<f64>() / RATE_SAMPLES as f64;
    (avg(0), avg(1), avg(2))
}

fn reset_rates() {
    let mut r = RATES.lock();
    r.last = None;
    r.samples = [[0.0; RATE_SAMPLES]; 3];
    r.idx = 0;
}

/// Starts the thread that samples INFO's instantaneous metrics and peak memory every
/// 100 ms (Redis does this in `serverCron`).
pub fn spawn_sampler(server: Arc<Server>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("ember-stats".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            sample_rates(&server);
            used_memory();
        })
        .map(|_| ())
        .map_err(|e| format!("can't start stats thread: {e}"))
}

/// Keys expired (lazily or by the active cycle) since start or the last RESETSTAT.
fn expired_keys(server: &Server) -> u64 {
    server
        .keyspace
        .expired_count()
        .saturating_sub(server.expired_base.load(Relaxed))
}

/// Replaces the characters Redis's `getSafeInfoString` forbids in INFO field names.
fn safe_info_name(s: &str) -> String {
    s.replace(['#', ':', '\n', '\r'], "_")
}

/// The INFO text for the sections `want` accepts (section names in lower case).
pub fn info_text(server: &Server, now: u64, want: impl Fn(&str) -> bool) -> String {
    let mut s = String::with_capacity(4096);
    let mut sections = 0;
    let mut begin = |s: &mut String, title: &str| {
        if sections > 0 {
            s.push_str("\r\n");
        }
        sections += 1;
        let _ = write!(s, "# {title}\r\n");
    };
    let cfg = server.config.read().clone();
    let sum = |f: fn(&WorkerStats) -> &AtomicU64| stats::sum(&server.workers, f);

    if want("server") {
        begin(&mut s, "Server");
        let uptime = server.uptime();
        let hz = cfg.get_u64("hz");
        kv(&mut s, "redis_version", REDIS_COMPAT_VERSION);
        kv(&mut s, "redis_git_sha1", env!("EMBER_GIT_SHA1"));
        kv(&mut s, "redis_git_dirty", env!("EMBER_GIT_DIRTY"));
        kv(&mut s, "ember_version", env!("CARGO_PKG_VERSION"));
        kv(&mut s, "redis_mode", "standalone");
        kv(&mut s, "os", os_name());
        kv(&mut s, "arch_bits", usize::BITS);
        kv(
            &mut s,
            "multiplexing_api",
            if cfg!(target_os = "linux") {
                "epoll"
            } else {
                "kqueue"
            },
        );
        kv(&mut s, "process_id", std::process::id());
        kv(&mut s, "process_supervised", "no");
        kv(&mut s, "run_id", &server.run_id);
        kv(&mut s, "tcp_port", server.port);
        kv(&mut s, "server_time_usec", now / 1_000);
        kv(&mut s, "uptime_in_seconds", uptime);
        kv(&mut s, "uptime_in_days", uptime / 86_400);
        kv(&mut s, "hz", hz);
        kv(&mut s, "configured_hz", hz);
        kv(&mut s, "lru_clock", (now / NS_PER_SEC) & LRU_CLOCK_MAX);
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        kv(&mut s, "executable", exe);
        kv(
            &mut s,
            "config_file",
            server.config_file.as_deref().unwrap_or(""),
        );
        kv(&mut s, "io_threads_active", 0);
        kv(&mut s, "ember_threads", server.threads);
        kv(&mut s, "ember_threads_active", server.balance.active());
        kv(&mut s, "ember_connections_moved", server.balance.moved());
    }

    if want("clients") {
        begin(&mut s, "Clients");
        kv(&mut s, "connected_clients", server.clients.len());
        kv(&mut s, "cluster_connections", 0);
        kv(&mut s, "maxclients", server.live.maxclients.load(Relaxed));
        let cluster_waiting = server.cluster.get().map_or(0, |cl| cl.waiters.waiting());
        kv(
            &mut s,
            "blocked_clients",
            server.blocking.blocked() + cluster_waiting + server.pause.waiting(),
        );
        kv(&mut s, "tracking_clients", server.tracking.client_count());
    }

    if want("memory") {
        begin(&mut s, "Memory");
        let (used, allocated, active, resident) = used_memory();
        let peak = PEAK_MEMORY.load(Relaxed).max(used);
        let rss = proc_kb("/proc/self/status", "VmRSS");
        let total = proc_kb("/proc/meminfo", "MemTotal");
        kv(&mut s, "used_memory", used);
        kv(&mut s, "used_memory_human", bytes_to_human(used));
        kv(&mut s, "used_memory_rss", rss);
        kv(&mut s, "used_memory_rss_human", bytes_to_human(rss));
        kv(&mut s, "used_memory_peak", peak);
        kv(&mut s, "used_memory_peak_human", bytes_to_human(peak));
        let perc = if peak == 0 {
            0.0
        } else {
            used as f64 * 100.0 / peak as f64
        };
        kv(&mut s, "used_memory_peak_perc", format!("{perc:.2}%"));
        // Memory that is not data, outside used_memory (as Redis reports it).
        let (eval, functions) = crate::stats::lua_memory();
        kv(&mut s, "used_memory_lua", eval);
        kv(&mut s, "used_memory_lua_human", bytes_to_human(eval));
        kv(&mut s, "used_memory_vm_eval", eval);
        kv(&mut s, "used_memory_vm_functions", functions);
        kv(&mut s, "used_memory_vm_total", eval + functions);
        kv(
            &mut s,
            "used_memory_vm_total_human",
            bytes_to_human(eval + functions),
        );
        kv(
            &mut s,
            "ember_slowlog_memory",
            crate::stats::SLOWLOG_MEMORY.load(Relaxed),
        );
        kv(&mut s, "allocator_allocated", allocated);
        kv(&mut s, "allocator_active", active);
        kv(&mut s, "allocator_resident", resident);
        kv(&mut s, "total_system_memory", total);
        kv(&mut s, "total_system_memory_human", bytes_to_human(total));
        let max = server.evict.maxmemory();
        kv(&mut s, "used_memory_startup", server.evict.startup_memory());
        kv(&mut s, "maxmemory", max);
        kv(&mut s, "maxmemory_human", bytes_to_human(max));
        kv(&mut s, "maxmemory_policy", server.evict.policy().name());
        let frag = if used == 0 {
            0.0
        } else {
            rss as f64 / used as f64
        };
        kv(&mut s, "mem_fragmentation_ratio", format!("{frag:.2}"));
        kv(
            &mut s,
            "lazyfree_pending_objects",
            server.lazyfree.pending.load(Relaxed),
        );
        // In the memory section, as Redis 7 prints it.
        kv(
            &mut s,
            "lazyfreed_objects",
            server.lazyfree.freed.load(Relaxed),
        );
        kv(&mut s, "mem_allocator", jemalloc_version());
        let (packed, saved) = storage::compress::stats();
        let on = storage::compress::policy().enabled;
        kv(&mut s, "compression", if on { "yes" } else { "no" });
        kv(&mut s, "compressed_values", packed);
        kv(&mut s, "compression_bytes_saved", saved);
    }

    if want("persistence") {
        begin(&mut s, "Persistence");
        let snap = &server.snapshots;
        let bg = snap.in_progress.load(Relaxed);
        let now_s = storage::clock::now_ns() / storage::clock::NS_PER_SEC;
        kv(&mut s, "loading", 0);
        kv(&mut s, "async_loading", 0);
        kv(&mut s, "current_cow_peak", 0);
        kv(&mut s, "current_cow_size", 0);
        kv(&mut s, "current_fork_perc", "0.00");
        kv(&mut s, "current_save_keys_processed", 0);
        kv(&mut s, "current_save_keys_total", 0);
        kv(&mut s, "rdb_changes_since_last_save", server.dirty());
        kv(&mut s, "rdb_bgsave_in_progress", u8::from(bg));
        kv(&mut s, "rdb_last_save_time", snap.last_save.load(Relaxed));
        kv(
            &mut s,
            "rdb_last_bgsave_status",
            if snap.last_ok.load(Relaxed) {
                "ok"
            } else {
                "err"
            },
        );
        kv(
            &mut s,
            "rdb_last_bgsave_time_sec",
            snap.last_duration.load(Relaxed),
        );
        let cur = if bg {
            now_s.saturating_sub(snap.started.load(Relaxed)) as i64
        } else {
            -1
        };
        kv(&mut s, "rdb_current_bgsave_time_sec", cur);
        kv(&mut s, "rdb_saves", snap.saves.load(Relaxed));
        kv(&mut s, "rdb_last_cow_size", 0);
        kv(&mut s, "rdb_last_load_keys_expired", 0);
        kv(
            &mut s,
            "rdb_last_load_keys_loaded",
            snap.loaded_keys.load(Relaxed),
        );
        for (k, v) in crate::aof::info_fields(server) {
            kv(&mut s, k, v);
        }
    }

    if want("stats") {
        begin(&mut s, "Stats");
        let (ops, input, output) = current_rates();
        kv(
            &mut s,
            "total_connections_received",
            sum(|w| &w.connections),
        );
        kv(&mut s, "total_commands_processed", sum(|w| &w.commands));
        kv(&mut s, "instantaneous_ops_per_sec", ops.round() as u64);
        kv(&mut s, "total_net_input_bytes", sum(|w| &w.net_input));
        kv(&mut s, "total_net_output_bytes", sum(|w| &w.net_output));
        kv(
            &mut s,
            "instantaneous_input_kbps",
            format!("{:.2}", input / 1024.0),
        );
        kv(
            &mut s,
            "instantaneous_output_kbps",
            format!("{:.2}", output / 1024.0),
        );
        kv(
            &mut s,
            "rejected_connections",
            server.rejected_conns.load(Relaxed),
        );
        kv(&mut s, "expired_keys", expired_keys(server));
        kv(&mut s, "evicted_keys", server.evict.evicted.load(Relaxed));
        kv(&mut s, "keyspace_hits", sum(|w| &w.hits));
        kv(&mut s, "keyspace_misses", sum(|w| &w.misses));
        kv(&mut s, "total_error_replies", sum(|w| &w.error_replies));
        kv(&mut s, "tracking_total_keys", server.tracking.key_count());
    }

    if want("replication") {
        begin(&mut s, "Replication");
        kv(&mut s, "role", "master");
        kv(&mut s, "connected_slaves", 0);
        kv(&mut s, "master_failover_state", "no-failover");
        kv(&mut s, "master_repl_offset", 0);
        kv(&mut s, "repl_backlog_active", 0);
    }

    if want("cpu") {
        begin(&mut s, "CPU");
        let (sys, user) = cpu_seconds(false);
        let (csys, cuser) = cpu_seconds(true);
        kv(&mut s, "used_cpu_sys", format!("{sys:.6}"));
        kv(&mut s, "used_cpu_user", format!("{user:.6}"));
        kv(&mut s, "used_cpu_sys_children", format!("{csys:.6}"));
        kv(&mut s, "used_cpu_user_children", format!("{cuser:.6}"));
    }

    if want("commandstats") {
        begin(&mut s, "Commandstats");
        let reg = &server.registry;
        for idx in 0..reg.len() {
            let field = |f: fn(&stats::CmdStat) -> &AtomicU64| -> u64 {
                server
                    .workers
                    .iter()
                    .filter_map(|w| w.cmd.get(idx))
                    .map(|c| f(c).load(Relaxed))
                    .sum()
            };
            let (calls, nsec) = (field(|c| &c.calls), field(|c| &c.nsec));
            let usec = nsec / 1000;
            let (rejected, failed) = (field(|c| &c.rejected), field(|c| &c.failed));
            if calls == 0 && rejected == 0 && failed == 0 {
                continue;
            }
            let per_call = if calls == 0 {
                0.0
            } else {
                nsec as f64 / 1000.0 / calls as f64
            };
            let _ = write!(
                s,
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
                safe_info_name(&reg.entry(idx).full_name)
            );
        }
    }

    if want("errorstats") {
        begin(&mut s, "Errorstats");
        let mut codes: BTreeMap<String, u64> = BTreeMap::new();
        for w in &server.workers {
            for (c, n) in w.error_codes.lock().iter() {
                *codes.entry(c.clone()).or_default() += n;
            }
        }
        for (c, n) in codes {
            let _ = write!(s, "errorstat_{}:count={n}\r\n", safe_info_name(&c));
        }
    }

    if want("latencystats") {
        begin(&mut s, "Latencystats");
        let percentiles: Vec<f64> = server
            .config
            .read()
            .get("latency-tracking-info-percentiles")
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        let reg = &server.registry;
        for idx in 0..reg.len() {
            let Some(h) = crate::cmd::observe::histogram_of(server, idx) else {
                continue;
            };
            let shown: Vec<String> = percentiles
                .iter()
                .map(|p| format!("p{p}={:.3}", stats::percentile(&h, *p) as f64 / 1000.0))
                .collect();
            let _ = write!(
                s,
                "latency_percentiles_usec_{}:{}\r\n",
                safe_info_name(&reg.entry(idx).full_name),
                shown.join(",")
            );
        }
    }

    if want("cluster") {
        begin(&mut s, "Cluster");
        kv(
            &mut s,
            "cluster_enabled",
            i64::from(server.cluster.get().is_some()),
        );
    }

    if want("keyspace") {
        begin(&mut s, "Keyspace");
        let ks = &server.keyspace;
        for db in 0..ks.db_count() {
            let (keys, expires, avg_ttl) = ks.db_stats(db, now);
            if keys > 0 {
                let _ = write!(
                    s,
                    "db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n"
                );
            }
        }
    }
    s
}

// ------------------------------------------------------------------------------------------
// CONFIG
// ------------------------------------------------------------------------------------------

/// The value CONFIG GET reports: `dir` is the working directory, as in Redis.
fn config_value(name: &str, stored: String) -> String {
    if name.eq_ignore_ascii_case("notify-keyspace-events") {
        let flags = crate::notify::parse_flags(&stored).unwrap_or(0);
        return crate::notify::flags_to_string(flags);
    }
    if name.eq_ignore_ascii_case("dir") {
        return std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
    }
    stored
}

fn config_get(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let cfg = ctx.server.config.read().clone();
    let mut found: Vec<(String, String)> = Vec::new();
    let seen =
        |found: &[(String, String)], n: &str| found.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    for pat in args.iter().skip(2) {
        if !pat.iter().any(|c| matches!(c, b'[' | b'*' | b'?')) {
            // A plain name is looked up directly and reported as given.
            let Ok(name) = std::str::from_utf8(pat) else {
                continue;
            };
            if Config::is_known(name) && !seen(&found, name) {
                let v = config_value(name, cfg.get(name).to_string());
                found.push((name.to_string(), v));
            }
            continue;
        }
        for (name, v) in cfg.matching(pat) {
            if !seen(&found, name) {
                found.push((name.to_string(), config_value(name, v)));
            }
        }
    }
    ctx.out.map(found.len());
    for (k, v) in &found {
        ctx.out.bulk(k.as_bytes());
        ctx.out.bulk(v.as_bytes());
    }
    Ok(())
}

fn set_failed(name: &str, reason: &str) -> CmdError {
    CmdError::err(format!(
        "CONFIG SET failed (possibly related to argument '{name}') - {reason}"
    ))
}

const IMMUTABLE: &str = "can't set immutable config";

fn config_set(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let pairs: Vec<(String, String)> = (2..args.len())
        .step_by(2)
        .map(|i| {
            (
                String::from_utf8_lossy(args.arg(i)).into_owned(),
                String::from_utf8_lossy(args.arg(i + 1)).into_owned(),
            )
        })
        .collect();
    let mut guard = ctx.server.config.write();

    // Pass 1, as Redis: unknown names, immutable directives and duplicates; the first
    // problem found is the one reported, and nothing is changed.
    let mut seen: Vec<String> = Vec::with_capacity(pairs.len());
    for (name, value) in &pairs {
        if !Config::is_known(name) {
            return Err(CmdError::err(format!(
                "Unknown option or number of arguments for CONFIG SET - '{}'",
                lossy(name.as_bytes(), 128)
            )));
        }
        let mut probe = guard.clone();
        if let Err(e) = probe.set(name, std::slice::from_ref(value), true) {
            if e == IMMUTABLE {
                return Err(set_failed(&lossy(name.as_bytes(), 128), IMMUTABLE));
            }
        }
        let lower = name.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Err(set_failed(
                &lossy(name.as_bytes(), 128),
                "duplicate parameter",
            ));
        }
        seen.push(lower);
    }

    // Pass 2: set every value on a copy, in order; any failure leaves the running
    // configuration (and the working directory) untouched.
    let mut next = guard.clone();
    let old_dir = std::env::current_dir().ok();
    let mut moved = false;
    let restore_dir = |moved: bool| {
        if let (true, Some(d)) = (moved, &old_dir) {
            let _ = std::env::set_current_dir(d);
        }
    };
    for ((name, value), lower) in pairs.iter().zip(&seen) {
        if let Err(e) = next.set(name, std::slice::from_ref(value), true) {
            restore_dir(moved);
            return Err(set_failed(lower, &e));
        }
        if lower == "dir" {
            if let Err(e) = std::env::set_current_dir(value) {
                restore_dir(moved);
                return Err(set_failed(lower, &os_error_text(&e)));
            }
            moved = true;
            if let Ok(abs) = std::env::current_dir() {
                let _ = next.set("dir", &[abs.display().to_string()], true);
            }
        }
    }
    *guard = next;
    drop(guard);
    for (name, _) in &pairs {
        crate::config::note_inert(name);
    }
    ctx.server.apply_config();
    crate::aof::config_changed(ctx.server).map_err(CmdError::err)?;
    // A lower maxmemory takes effect now, as in Redis (this worker holds its gate).
    ctx.server.evict.perform(ctx.server);
    ctx.out.ok();
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    for w in &ctx.server.workers {
        w.reset();
    }
    ctx.server.rejected_conns.store(0, Relaxed);
    ctx.server.evict.evicted.store(0, Relaxed);
    ctx.server.lazyfree.freed.store(0, Relaxed);
    ctx.server
        .expired_base
        .store(ctx.server.keyspace.expired_count(), Relaxed);
    reset_rates();
    ctx.out.ok();
    Ok(())
}

fn config_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let Some(path) = ctx.server.config_file.clone() else {
        return Err(CmdError::err("The server is running without a config file"));
    };
    let cfg = ctx.server.config.read().clone();
    match rewrite_config_file(&path, &cfg) {
        Ok(()) => {
            log_info!("CONFIG REWRITE executed with success.");
            ctx.out.ok();
            Ok(())
        }
        Err(e) => {
            warn!("CONFIG-REWRITE failed: {e}");
            Err(CmdError::err(format!(
                "Rewriting config file: {}",
                os_error_text(&e)
            )))
        }
    }
}

/// Rewrites `path` to hold `cfg`, keeping comments and the order of existing lines;
/// the new text replaces the file atomically (temporary file, fsync, rename).
fn rewrite_config_file(path: &str, cfg: &Config) -> std::io::Result<()> {
    let old = match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let text = rewrite_config_text(&old, cfg, cwd.as_deref());
    let tmp = format!("{path}.{:08x}.tmp", rand::random::<u32>());
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

const REWRITE_SIGNATURE: &str = "# Generated by CONFIG REWRITE";

/// Quotes a directive value for a config file when it needs it (the config reader
/// understands `"..."` with `\\`, `\"`, `\n`, `\r`, `\t` and `\xHH` escapes).
fn conf_value(name: &str, v: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-._:/*@,+=".contains(c);
    let plain = |w: &str| !w.is_empty() && w.chars().all(safe);
    if plain(v) || (name == "bind" && v.split(' ').all(plain)) {
        return v.to_string();
    }
    let mut q = String::from("\"");
    for &b in v.as_bytes() {
        match b {
            b'\\' => q.push_str("\\\\"),
            b'"' => q.push_str("\\\""),
            b'\n' => q.push_str("\\n"),
            b'\r' => q.push_str("\\r"),
            b'\t' => q.push_str("\\t"),
            0x20..=0x7e => q.push(char::from(b)),
            _ => {
                let _ = write!(q, "\\x{b:02x}");
            }
        }
    }
    q.push('"');
    q
}

/// Redis's CONFIG REWRITE algorithm over the old file text: lines of known directives are
/// replaced in place by the running value (extra occurrences blanked), unknown directives
/// are commented out with `# ??? `, comments stay, and directives that differ from their
/// default but were not in the file are appended after a signature comment. `dir` is
/// always written, as the absolute working directory `cwd`.
pub fn rewrite_config_text(old: &str, cfg: &Config, cwd: Option<&str>) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut needs_signature = true;
    let mut at: BTreeMap<String, VecDeque<usize>> = BTreeMap::new();
    for raw in old.lines() {
        let line = raw.trim_matches(|c| matches!(c, '\r' | '\n' | '\t' | ' '));
        if line.is_empty() || line.starts_with('#') {
            if line == REWRITE_SIGNATURE {
                needs_signature = false;
            }
            lines.push(line.to_string());
            continue;
        }
        let name = line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if !Config::is_known(&name) {
            lines.push(format!("# ??? {line}"));
            continue;
        }
        at.entry(name).or_default().push_back(lines.len());
        lines.push(line.to_string());
    }
    let defaults = Config::default();
    let mut processed: BTreeSet<&str> = BTreeSet::new();
    for (name, value) in cfg.matching(b"*") {
        processed.insert(name);
        let (value, force) = if name == "dir" {
            match cwd {
                Some(c) => (c.to_string(), true),
                None => continue,
            }
        } else {
            let force = value != defaults.get(name);
            (value, force)
        };
        let text = format!("{name} {}", conf_value(name, &value));
        match at.get_mut(name).and_then(|l| l.pop_front()) {
            Some(i) => {
                if let Some(slot) = lines.get_mut(i) {
                    *slot = text;
                }
            }
            None if force => {
                if needs_signature {
                    lines.push(REWRITE_SIGNATURE.to_string());
                    needs_signature = false;
                }
                lines.push(text);
            }
            None => {}
        }
    }
    for (name, rest) in &at {
        if processed.contains(name.as_str()) {
            for &i in rest {
                if let Some(slot) = lines.get_mut(i) {
                    slot.clear();
                }
            }
        }
    }
    let mut out = String::new();
    let mut was_empty = false;
    for l in &lines {
        if l.is_empty() {
            if was_empty {
                continue;
            }
            was_empty = true;
        } else {
            was_empty = false;
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

// ------------------------------------------------------------------------------------------
// COMMAND
// ------------------------------------------------------------------------------------------

/// Looks up `name` or `container|sub`, case-insensitively (Redis's `lookupCommandBySds`).
fn lookup_full(reg: &Registry, name: &[u8]) -> Option<usize> {
    let mut parts = name.splitn(3, |&c| c == b'|');
    let top = reg.lookup(parts.next()?)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(top),
        (Some(sub), None) => reg.lookup_sub(top, sub),
        _ => None,
    }
}

/// The key-spec flags Ember can derive from a command's flags.
fn key_flags(spec: &CommandSpec) -> &'static [&'static str] {
    if spec.has(READONLY) {
        &["RO", "access"]
    } else if spec.has(WRITE) {
        &["RW", "update"]
    } else {
        &["RO"]
    }
}

fn write_flag_set(out: &mut ReplyWriter, names: &[&str]) {
    out.set(names.len());
    for n in names {
        out.simple(n.as_bytes());
    }
}

/// One Redis 7 COMMAND INFO entry (10 elements), subcommands included.
fn write_command_info(out: &mut ReplyWriter, reg: &Registry, idx: usize) {
    let entry = reg.entry(idx);
    let spec = entry.spec;
    out.array(10);
    out.bulk(entry.full_name.as_bytes());
    out.int(i64::from(spec.arity));
    // may_replicate is hidden from COMMAND INFO, as in Redis.
    let names: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(f, n)| spec.has(*f) && *n != "may_replicate")
        .map(|(_, n)| *n)
        .collect();
    write_flag_set(out, &names);
    out.int(i64::from(spec.first_key));
    out.int(i64::from(spec.last_key));
    out.int(i64::from(spec.key_step));
    let cats = spec.acl_categories();
    out.set(cats.len());
    for c in cats {
        out.simple(format!("@{c}").as_bytes());
    }
    out.set(0); // tips
    if spec.first_key > 0 {
        out.array(1);
        out.map(3);
        out.bulk(b"flags");
        write_flag_set(out, key_flags(spec));
        out.bulk(b"begin_search");
        out.map(2);
        out.bulk(b"type");
        out.bulk(b"index");
        out.bulk(b"spec");
        out.map(1);
        out.bulk(b"index");
        out.int(i64::from(spec.first_key));
        out.bulk(b"find_keys");
        out.map(2);
        out.bulk(b"type");
        out.bulk(b"range");
        out.bulk(b"spec");
        out.map(3);
        out.bulk(b"lastkey");
        let last = if spec.last_key < 0 {
            spec.last_key
        } else {
            spec.last_key - spec.first_key
        };
        out.int(i64::from(last));
        out.bulk(b"keystep");
        out.int(i64::from(spec.key_step));
        out.bulk(b"limit");
        out.int(0);
    } else {
        out.array(0);
    }
    if spec.subcommands.is_empty() {
        out.set(0);
    } else {
        let subs = reg.subcommands(idx);
        out.array(subs.len());
        for s in subs {
            write_command_info(out, reg, s);
        }
    }
}

/// One COMMAND DOCS entry: summary, since, group and nested subcommands.
fn write_command_docs(out: &mut ReplyWriter, reg: &Registry, idx: usize) {
    let spec = reg.entry(idx).spec;
    let has_subs = !spec.subcommands.is_empty();
    let fields = 1
        + usize::from(!spec.summary.is_empty())
        + usize::from(!spec.since.is_empty())
        + usize::from(has_subs);
    out.map(fields);
    if !spec.summary.is_empty() {
        out.bulk(b"summary");
        out.bulk(spec.summary.as_bytes());
    }
    if !spec.since.is_empty() {
        out.bulk(b"since");
        out.bulk(spec.since.as_bytes());
    }
    out.bulk(b"group");
    out.bulk(spec.group.name().as_bytes());
    if has_subs {
        out.bulk(b"subcommands");
        let subs = reg.subcommands(idx);
        out.map(subs.len());
        for s in subs {
            out.bulk(reg.entry(s).full_name.as_bytes());
            write_command_docs(out, reg, s);
        }
    }
}

fn command(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let reg = &ctx.server.registry;
    let top = reg.top_level();
    ctx.out.array(top.len());
    for &idx in top {
        write_command_info(ctx.out, reg, idx);
    }
    Ok(())
}

fn command_count(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.out.int(ctx.server.registry.top_level().len() as i64);
    Ok(())
}

fn command_info(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() == 2 {
        return command(ctx, args);
    }
    let reg = &ctx.server.registry;
    ctx.out.array(args.len() - 2);
    for name in args.iter().skip(2) {
        match lookup_full(reg, name) {
            Some(idx) => write_command_info(ctx.out, reg, idx),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn command_docs(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let reg = &ctx.server.registry;
    let found: Vec<usize> = if args.len() == 2 {
        reg.top_level().to_vec()
    } else {
        args.iter()
            .skip(2)
            .filter_map(|n| lookup_full(reg, n))
            .collect()
    };
    ctx.out.map(found.len());
    for idx in found {
        ctx.out.bulk(reg.entry(idx).full_name.as_bytes());
        write_command_docs(ctx.out, reg, idx);
    }
    Ok(())
}

/// COMMAND LIST's optional filter.
enum ListFilter {
    None,
    Module,
    AclCat(Vec<u8>),
    Pattern(Vec<u8>),
}

impl ListFilter {
    fn keeps(&self, spec: &CommandSpec, full_name: &str) -> bool {
        match self {
            ListFilter::None => true,
            // Ember has no modules.
            ListFilter::Module => false,
            ListFilter::AclCat(cat) => spec
                .acl_categories()
                .iter()
                .any(|c| c.as_bytes().eq_ignore_ascii_case(cat)),
            ListFilter::Pattern(p) => glob_match(p, full_name.as_bytes(), true),
        }
    }
}

fn command_list(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut filter = ListFilter::None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(args.arg(i), "filterby") && more == 2 {
            let (kind, arg) = (args.arg(i + 1), args.arg(i + 2).to_vec());
            filter = if is(kind, "module") {
                ListFilter::Module
            } else if is(kind, "aclcat") {
                ListFilter::AclCat(arg)
            } else if is(kind, "pattern") {
                ListFilter::Pattern(arg)
            } else {
                return Err(CmdError::Syntax);
            };
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let reg = &ctx.server.registry;
    let mut names: Vec<&str> = Vec::new();
    for &top in reg.top_level() {
        for idx in std::iter::once(top).chain(reg.subcommands(top)) {
            let e = reg.entry(idx);
            if filter.keeps(e.spec, &e.full_name) {
                names.push(&e.full_name);
            }
        }
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS.
fn getkeys(ctx: &mut Ctx<'_>, args: Args<'_>, with_flags: bool) -> CmdResult {
    let reg = &ctx.server.registry;
    let cmd = args.slice(2);
    let invalid = || CmdError::err("Invalid command specified");
    let top = reg.lookup(cmd.arg(0)).ok_or_else(invalid)?;
    let idx = if cmd.len() > 1 && !reg.entry(top).spec.subcommands.is_empty() {
        reg.lookup_sub(top, cmd.arg(1)).ok_or_else(invalid)?
    } else {
        top
    };
    let spec = reg.entry(idx).spec;
    if !spec.has_keys() {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !spec.arity_ok(cmd.len()) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    let positions = spec.key_positions(&cmd);
    if positions.is_empty() {
        return Err(CmdError::err("Invalid arguments specified for command"));
    }
    ctx.out.array(positions.len());
    for p in positions {
        if with_flags {
            ctx.out.array(2);
            ctx.out.bulk(cmd.arg(p));
            write_flag_set(ctx.out, key_flags(spec));
        } else {
            ctx.out.bulk(cmd.arg(p));
        }
    }
    Ok(())
}

fn command_getkeys(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    getkeys(ctx, args, false)
}

fn command_getkeysandflags(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    getkeys(ctx, args, true)
}

fn command_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------
// SHUTDOWN
// ------------------------------------------------------------------------------------------

/// SHUTDOWN beside a busy script: only SHUTDOWN NOSAVE, and at once; other forms get
/// `-BUSY`, as Redis.
fn shutdown_when_busy(_server: &Server, args: Args<'_>) -> BusyAnswer {
    let has = |w: &str| args.iter().skip(1).any(|a| is(a, w));
    if !has("nosave") {
        BusyAnswer::Refuse
    } else if !has("save") && !has("abort") {
        BusyAnswer::Shutdown
    } else {
        BusyAnswer::Wait
    }
}

fn shutdown(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (mut nosave, mut save, mut now, mut force, mut abort) = (false, false, false, false, false);
    for a in args.iter().skip(1) {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if is(a, "now") {
            now = true;
        } else if is(a, "force") {
            force = true;
        } else if is(a, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && (nosave || save || now || force)) || (nosave && save) {
        return Err(CmdError::Syntax);
    }
    if abort {
        // Shutdown is immediate: there is never one in progress to abort.
        return Err(CmdError::err("No shutdown in progress."));
    }
    let points =
        !crate::snapshot::parse_save_points(ctx.server.config.read().get("save")).is_empty();
    if save || (points && !nosave) {
        if let Err(e) = crate::snapshot::save(ctx.server) {
            if !force {
                warn!("Error trying to save the DB, can't exit: {e}");
                return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
            }
            warn!("Error trying to save the DB, exiting anyway (FORCE): {e}");
        }
    }
    let _ = now;
    ctx.server.snapshots.saved_for_shutdown.store(true, Relaxed);
    // Like Redis, the client gets no reply: the connection closes and the process exits.
    ctx.client.close_after_reply = true;
    ctx.server.request_shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows() {
        let (sys0, user0) = cpu_seconds(false);
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (sys1, user1) = cpu_seconds(false);
        assert!(
            sys1 + user1 > sys0 + user0,
            "{sys0} {user0} -> {sys1} {user1}"
        );
        let (csys, cuser) = cpu_seconds(true);
        assert!(csys >= 0.0 && cuser >= 0.0);
    }

    #[test]
    fn human_bytes() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1024), "1.00K");
        assert_eq!(bytes_to_human(1536), "1.50K");
        assert_eq!(bytes_to_human(5 << 20), "5.00M");
        assert_eq!(bytes_to_human(3 << 30), "3.00G");
        assert_eq!(bytes_to_human(1 << 40), "1.00T");
        assert_eq!(bytes_to_human(1 << 50), "1.00P");
        assert_eq!(bytes_to_human(u64::MAX), format!("{}B", u64::MAX));
    }

    #[test]
    fn conf_quoting() {
        assert_eq!(conf_value("port", "6379"), "6379");
        assert_eq!(conf_value("bind", "127.0.0.1 -::1"), "127.0.0.1 -::1");
        assert_eq!(conf_value("requirepass", ""), "\"\"");
        assert_eq!(conf_value("requirepass", "a b\"c\\"), "\"a b\\\"c\\\\\"");
        assert_eq!(conf_value("logfile", "x\ny\u{1}"), "\"x\\ny\\x01\"");
    }

    #[test]
    fn rewrite_keeps_comments_and_replaces_lines() {
        let mut cfg = Config::default();
        cfg.set("maxclients", &["500".to_string()], false).unwrap();
        cfg.set("timeout", &["9".to_string()], false).unwrap();
        cfg.set("requirepass", &["p w".to_string()], false).unwrap();
        let old = "# my config\nmaxclients 100\n\n\n# twice\nmaxclients 200\nport 6379\n";
        let text = rewrite_config_text(old, &cfg, Some("/data"));
        assert_eq!(
            text,
            "# my config\nmaxclients 500\n\n# twice\n\nport 6379\n# Generated by CONFIG REWRITE\ndir /data\nrequirepass \"p w\"\ntimeout 9\n"
        );
        // The result loads back to the same values, and a second rewrite is stable.
        let mut back = Config::default();
        back.apply_text(&text).unwrap();
        assert_eq!(back.get("maxclients"), "500");
        assert_eq!(back.get("requirepass"), "p w");
        assert_eq!(back.get("timeout"), "9");
        assert_eq!(rewrite_config_text(&text, &cfg, Some("/data")), text);
    }

    #[test]
    fn rewrite_comments_out_unknown_directives() {
        let cfg = Config::default();
        let text = rewrite_config_text("bogus 1\nhz 10\n", &cfg, None);
        assert_eq!(text, "# ??? bogus 1\nhz 10\n");
    }

    #[test]
    fn registry_tables_are_consistent() {
        let reg = Registry::new(&[COMMANDS]);
        let cmd = reg.lookup(b"command").unwrap();
        assert!(reg.entry(cmd).spec.handler.is_some());
        assert_eq!(reg.subcommands(cmd).len(), COMMAND_SUBCOMMANDS.len());
        assert!(lookup_full(&reg, b"CONFIG|Get").is_some());
        assert!(lookup_full(&reg, b"config|nope").is_none());
        assert!(lookup_full(&reg, b"config|get|x").is_none());
        assert!(lookup_full(&reg, b"info|x").is_none());
        for &top in reg.top_level() {
            let spec = reg.entry(top).spec;
            assert!(!spec.summary.is_empty(), "{} has no summary", spec.name);
            for sub in spec.subcommands {
                assert!(!sub.summary.is_empty());
                assert!(sub.arity.unsigned_abs() >= 2);
            }
        }
    }

    #[test]
    fn info_names_are_sanitised() {
        assert_eq!(safe_info_name("client|list"), "client|list");
        assert_eq!(safe_info_name("a:b#c\r\n"), "a_b_c__");
    }
}
