//! MEMORY: USAGE (a key's footprint), STATS (where the memory goes), DOCTOR, MALLOC-STATS
//! (jemalloc's report), PURGE and HELP.
//!
//! A key's footprint ([`key_usage`]) is Ember's real layout: its slot in the shard's hash
//! table (the key's pointer plus the [`Entry`] inline, and a control byte), the key bytes
//! and the value's allocations, each rounded up to jemalloc's size class, plus its entry
//! in the expiry index when it has a TTL. Collections are walked whole (SAMPLES is parsed
//! and checked as Redis does, not used to sample).

use std::mem::size_of;
use std::sync::atomic::Ordering::Relaxed;

use resp::Args;
use storage::key::ThinKey;
use storage::{Entry, Value};

use super::util::{is, parse_i64, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Server;

/// The MEMORY container.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec::container("memory", G, SUBCOMMANDS)
    .doc("A container for memory diagnostics commands.", "4.0.0")];

static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("usage", -3, READONLY, (2, 2, 1), G, usage)
        .doc("Estimates the memory usage of a key.", "4.0.0"),
    CommandSpec::new("stats", 2, 0, (0, 0, 0), G, stats)
        .doc("Returns details about memory usage.", "4.0.0"),
    CommandSpec::new("doctor", 2, 0, (0, 0, 0), G, doctor)
        .doc("Outputs a memory problems report.", "4.0.0"),
    CommandSpec::new("malloc-stats", 2, 0, (0, 0, 0), G, malloc_stats)
        .doc("Returns the allocator statistics.", "4.0.0"),
    CommandSpec::new("purge", 2, 0, (0, 0, 0), G, purge)
        .doc("Asks the allocator to release memory.", "4.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), G, help).doc(
        "Returns helpful text about the different subcommands.",
        "4.0.0",
    ),
];

/// Bytes jemalloc hands out for a request of `n` (its size classes: 8, then multiples of
/// 16 up to 128, then four classes per doubling).
pub fn alloc_class(n: usize) -> usize {
    match n {
        0 => 0,
        1..=8 => 8,
        9..=128 => (n + 15) & !15,
        _ => {
            let log = usize::BITS - 1 - (n - 1).leading_zeros();
            let step = 1usize << (log - 2);
            (n + step - 1) & !(step - 1)
        }
    }
}

/// One key's slot in its table: the key (inline, or its pointer) and the entry, plus a
/// control byte.
const SLOT: usize = size_of::<(ThinKey, Entry)>() + 1;
/// One expiry-index element (deadline and key), before B-tree node overhead.
const EXPIRY_ELEM: usize = size_of::<(u64, ThinKey)>();

/// The allocation of a key's bytes (with its length header; none for an inline key).
fn key_alloc(len: usize) -> usize {
    alloc_class(ThinKey::alloc_len(len))
}

/// Bytes the value's own allocations take.
fn value_usage(v: &Value) -> usize {
    let boxed = match v {
        Value::String(_) => 0,
        Value::List(b) => size_of_val(&**b),
        Value::Hash(b) => size_of_val(&**b),
        Value::Set(b) => size_of_val(&**b),
        Value::ZSet(b) => size_of_val(&**b),
        Value::Stream(b) => size_of_val(&**b),
        // Types added later: their heap_size alone.
        #[allow(unreachable_patterns)]
        _ => 0,
    };
    let heap = v.heap_size();
    match v {
        Value::String(_) => alloc_class(heap),
        _ => alloc_class(boxed) + heap,
    }
}

/// MEMORY USAGE's figure for `key` with `e`: table slot, key, value and expiry entry.
pub fn key_usage(key: &[u8], e: &Entry) -> usize {
    let expiry = if e.expire_at().is_some() {
        EXPIRY_ELEM + key_alloc(key.len())
    } else {
        0
    };
    SLOT + key_alloc(key.len()) + value_usage(&e.value) + expiry
}

/// What deleting `key` gives back to the allocator (the table slot stays: tables do not
/// shrink), for eviction's accounting.
pub fn freed_by_delete(key: &[u8], e: &Entry) -> usize {
    key_usage(key, e) - SLOT
}

fn usage(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if is(args.arg(i), "samples") && i + 1 < args.len() {
            if parse_i64(args.arg(i + 1))? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = args.arg(2);
    let mut g = ctx.lock(key);
    let n = g.peek().map(|e| key_usage(key, e));
    drop(g);
    match n {
        Some(n) => ctx.out.int(n as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

/// The figures MEMORY STATS and MEMORY DOCTOR report.
struct Figures {
    peak: u64,
    used: u64,
    startup: u64,
    clients: u64,
    /// Per database with keys: (db, keys, table bytes, expiry index bytes).
    dbs: Vec<(usize, u64, u64, u64)>,
    allocated: u64,
    active: u64,
    resident: u64,
    rss: u64,
}

impl Figures {
    fn gather(ctx: &Ctx<'_>) -> Figures {
        let server = ctx.server;
        let (allocated, active, resident) = allocator();
        let used = crate::evict::allocated_bytes();
        let ks = &server.keyspace;
        let mut dbs: Vec<(usize, u64, u64, u64)> =
            (0..ks.db_count()).map(|d| (d, 0, 0, 0)).collect();
        for i in 0..ks.shard_count() {
            ks.with_shard(i, |s| {
                for (d, row) in dbs.iter_mut().enumerate() {
                    let t = s.table_ref(d);
                    row.1 += t.len() as u64;
                    row.2 += t.table_bytes() as u64;
                    // B-tree leaves hold up to 11 elements; count them about 2/3 full.
                    row.3 += (t.volatile_len() * EXPIRY_ELEM * 3 / 2) as u64;
                }
            });
        }
        dbs.retain(|r| r.1 > 0);
        let clients = server
            .clients
            .all()
            .iter()
            .map(|c| c.qbuf.load(Relaxed) as u64)
            .sum();
        Figures {
            peak: crate::cmd::server::peak_memory().max(used),
            used,
            startup: server.evict.startup_memory(),
            clients,
            dbs,
            allocated,
            active,
            resident,
            rss: rss_bytes(),
        }
    }

    fn overhead(&self) -> u64 {
        self.startup + self.clients + self.dbs.iter().map(|r| r.2 + r.3).sum::<u64>()
    }

    fn keys(&self) -> u64 {
        self.dbs.iter().map(|r| r.1).sum()
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn stats(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let f = Figures::gather(ctx);
    let overhead = f.overhead();
    let keys = f.keys();
    let net = f.used.saturating_sub(f.startup);
    let dataset = f.used.saturating_sub(overhead);
    let out = &mut *ctx.out;
    out.map(27 + f.dbs.len());
    let int = |out: &mut resp::ReplyWriter, k: &str, v: u64| {
        out.bulk(k.as_bytes());
        out.int(i64::try_from(v).unwrap_or(i64::MAX));
    };
    int(out, "peak.allocated", f.peak);
    int(out, "total.allocated", f.used);
    int(out, "startup.allocated", f.startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", f.clients);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    for &(db, _, table, expires) in &f.dbs {
        out.bulk(format!("db.{db}").as_bytes());
        out.map(2);
        int(out, "overhead.hashtable.main", table);
        int(out, "overhead.hashtable.expires", expires);
    }
    int(out, "overhead.total", overhead);
    int(out, "keys.count", keys);
    int(
        out,
        "keys.bytes-per-key",
        net.checked_div(keys).unwrap_or(0),
    );
    int(out, "dataset.bytes", dataset);
    let dbl = |out: &mut resp::ReplyWriter, k: &str, v: f64| {
        out.bulk(k.as_bytes());
        out.double(v);
    };
    dbl(out, "dataset.percentage", ratio(dataset, net) * 100.0);
    dbl(out, "peak.percentage", ratio(f.used, f.peak) * 100.0);
    int(out, "allocator.allocated", f.allocated);
    int(out, "allocator.active", f.active);
    int(out, "allocator.resident", f.resident);
    dbl(
        out,
        "allocator-fragmentation.ratio",
        ratio(f.active, f.allocated),
    );
    int(
        out,
        "allocator-fragmentation.bytes",
        f.active.saturating_sub(f.allocated),
    );
    dbl(out, "allocator-rss.ratio", ratio(f.resident, f.active));
    int(
        out,
        "allocator-rss.bytes",
        f.resident.saturating_sub(f.active),
    );
    dbl(out, "rss-overhead.ratio", ratio(f.rss, f.resident));
    int(out, "rss-overhead.bytes", f.rss.saturating_sub(f.resident));
    dbl(out, "fragmentation", ratio(f.rss, f.used));
    int(out, "fragmentation.bytes", f.rss.saturating_sub(f.used));
    Ok(())
}

fn doctor(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let f = Figures::gather(ctx);
    let text = doctor_report(&f);
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// Redis's `getMemoryDoctorReport`, for the problems Ember can see.
fn doctor_report(f: &Figures) -> String {
    if f.used < 5 * 1024 * 1024 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.".into();
    }
    let peak = f.peak as f64 / f.used as f64 > 1.5;
    let high_frag = ratio(f.rss, f.used) > 1.4 && f.rss.saturating_sub(f.used) > 10 << 20;
    let big_clients = f.clients > 200 << 20;
    if !peak && !high_frag && !big_clients {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.".into();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Ember instance memory implants:\n\n");
    if peak {
        s.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Ember instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Ember instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if high_frag {
        s.push_str(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Ember process is much larger than the sum of the logical allocations Ember performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, try MEMORY PURGE. Note: The currently used allocator is \"jemalloc\".\n\n");
    }
    if big_clients {
        s.push_str(" * Big client buffers: The clients output buffers are in general a lot bigger than expected. This may be due to clients sending big pipelines without reading the replies in time.\n\n");
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

fn malloc_stats(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let mut text = Vec::new();
    if tikv_jemalloc_ctl::stats_print::stats_print(&mut text, Default::default()).is_err() {
        text = b"Stats not supported for the current allocator".to_vec();
    }
    ctx.out.verbatim("txt", &text);
    Ok(())
}

fn purge(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    if purge_arenas() {
        ctx.out.ok();
        Ok(())
    } else {
        Err(CmdError::err("Error purging dirty pages"))
    }
}

/// Returns every arena's unused dirty pages to the system (jemalloc `arena.<all>.purge`).
fn purge_arenas() -> bool {
    // SAFETY: `arena.4096.purge` (4096 = MALLCTL_ARENAS_ALL) is a void control: jemalloc
    // requires null old/new pointers and zero lengths, which is what is passed; the name
    // is NUL-terminated. Tested in `tests::purge_works`.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}

fn help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

/// (allocated, active, resident) bytes from jemalloc, freshly refreshed.
fn allocator() -> (u64, u64, u64) {
    use tikv_jemalloc_ctl::{epoch, stats as je};
    let _ = epoch::advance();
    let r = |v: tikv_jemalloc_ctl::Result<usize>| v.map_or(0, |x| x as u64);
    (
        r(je::allocated::read()),
        r(je::active::read()),
        r(je::resident::read()),
    )
}

/// The process's resident set size in bytes.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_size_classes() {
        let classes: Vec<usize> = [
            0, 1, 8, 9, 16, 17, 100, 128, 129, 160, 161, 256, 257, 1000, 4097,
        ]
        .iter()
        .map(|&n| alloc_class(n))
        .collect();
        assert_eq!(
            classes,
            [0, 8, 8, 16, 16, 32, 112, 128, 160, 160, 192, 256, 320, 1024, 5120]
        );
    }

    #[test]
    fn usage_counts_slot_key_value_and_expiry() {
        let v = Value::String(storage::RString::from_bytes(b"0123456789abcdef"));
        let hs = foldhash::fast::FixedState::default();
        let mut t = storage::Table::new(hs);
        use std::hash::BuildHasher;
        let h = hs.hash_one(&b"key:1"[..]);
        t.insert(h, b"key:1", v, 0, 1);
        let e = t.get_no_touch(h, b"key:1", 1).unwrap();
        // A 5-byte key lives inside the slot: no allocation of its own.
        let key = 0;
        assert_eq!(ThinKey::alloc_len(5), 0);
        assert_eq!(ThinKey::alloc_len(16), 20);
        assert_eq!(key_alloc(16), 32);
        assert_eq!(SLOT, 56 + 1);
        assert_eq!(key_usage(b"key:1", e), SLOT + key + 16);
        assert_eq!(freed_by_delete(b"key:1", e), key + 16);
        t.set_expire(h, b"key:1", 100, 1);
        let e = t.get_no_touch(h, b"key:1", 1).unwrap();
        assert_eq!(key_usage(b"key:1", e), SLOT + key + 16 + EXPIRY_ELEM + key);
    }

    #[test]
    fn purge_works() {
        assert!(purge_arenas());
    }

    #[test]
    fn doctor_texts() {
        let mut f = Figures {
            peak: 0,
            used: 1 << 20,
            startup: 0,
            clients: 0,
            dbs: Vec::new(),
            allocated: 0,
            active: 0,
            resident: 0,
            rss: 0,
        };
        assert!(doctor_report(&f).contains("empty"));
        f.used = 100 << 20;
        f.peak = 100 << 20;
        f.rss = 100 << 20;
        assert!(doctor_report(&f).contains("can't find any memory issue"));
        f.peak = 400 << 20;
        assert!(doctor_report(&f).contains("Peak memory"));
    }
}
