//! `maxmemory` and key eviction, as Redis's `evict.c`: before a command runs while used
//! memory is over `maxmemory`, keys are evicted by the configured policy until it is under;
//! if nothing can be evicted, commands that may grow memory get `-OOM`.
//!
//! - Used memory is jemalloc's allocated bytes less what sits in thread caches (freed by
//!   Ember, not yet returned to the arenas) and less the Lua heaps (not data, as in Redis:
//!   [`crate::stats::lua_memory`]), refreshed at most once a millisecond by
//!   whichever command looks first ([`Evictor::used_memory`]).
//! - LRU, LFU and TTL policies approximate the ideal victim by sampling, with Redis's
//!   16-entry eviction pool kept across calls. Keys are spread over many shards by hash,
//!   so each round samples `maxmemory-samples` keys of every database in one shard (the
//!   shards visited in turn): statistically the same as sampling the whole database.
//!   volatile-ttl takes each shard's soonest deadlines from its ordered expiry index.
//! - A victim is deleted like DEL deletes: WATCH, client-side caching, tags and the
//!   `evicted` keyspace event (class `e`) all see it.
//! - Eviction runs under the calling worker's gate, so never in the middle of a script or
//!   EXEC on another worker; `maxmemory-eviction-tenacity` bounds the time one command
//!   spends evicting (the next command carries on, as Redis's eviction timer would).
//!
//! While `maxmemory` is 0, [`Evictor::enabled`] is one relaxed atomic load.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use storage::{clock, Entry, Parked};

use crate::client::Client;
use crate::error::CmdError;
use crate::registry::{flags, CommandSpec};
use crate::server::Server;
use crate::stats::WorkerStats;

/// Redis's reply when a command is refused for memory.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The `-OOM` error.
pub fn oom_error() -> CmdError {
    CmdError::raw(OOM)
}

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Policy {
    /// Refuse writes that may grow memory.
    NoEviction = 0,
    /// Least recently used among all keys.
    AllKeysLru,
    /// Least frequently used among all keys.
    AllKeysLfu,
    /// Any key.
    AllKeysRandom,
    /// Least recently used among keys with a TTL.
    VolatileLru,
    /// Least frequently used among keys with a TTL.
    VolatileLfu,
    /// Any key with a TTL.
    VolatileRandom,
    /// The key with the soonest deadline.
    VolatileTtl,
}

/// Policy names in the order Redis lists them (its CONFIG SET error text).
pub const POLICY_NAMES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

impl Policy {
    const ALL: [Policy; 8] = [
        Policy::NoEviction,
        Policy::AllKeysLru,
        Policy::AllKeysLfu,
        Policy::AllKeysRandom,
        Policy::VolatileLru,
        Policy::VolatileLfu,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
    ];

    /// The policy named `s` (case-insensitive).
    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
    }

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// True for the LFU policies (OBJECT FREQ works, OBJECT IDLETIME does not).
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }

    /// True when only keys with a TTL may be evicted.
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn from_u8(v: u8) -> Policy {
        Policy::ALL
            .get(usize::from(v))
            .copied()
            .unwrap_or(Policy::NoEviction)
    }
}

/// Redis's `EVPOOL_SIZE`.
const POOL_SIZE: usize = 16;

/// An eviction candidate: higher `score` is a better victim.
struct Candidate {
    score: u64,
    db: usize,
    key: Vec<u8>,
}

/// What [`Evictor::perform`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Used memory is under `maxmemory` (or there is no limit).
    Ok,
    /// Still over, but out of time for this command: the next command carries on.
    Running,
    /// Still over and nothing (more) can be evicted.
    Fail,
}

/// The eviction state of a node.
#[derive(Default)]
pub struct Evictor {
    /// `maxmemory` in bytes; 0 = no limit.
    maxmemory: AtomicU64,
    /// [`Policy`] as u8.
    policy: AtomicU8,
    /// `maxmemory-samples`.
    samples: AtomicUsize,
    /// `maxmemory-eviction-tenacity`.
    tenacity: AtomicU32,
    /// Keys evicted since start or CONFIG RESETSTAT (INFO `evicted_keys`).
    pub evicted: AtomicU64,
    /// Used memory at the last refresh.
    used: AtomicU64,
    /// When `used` was refreshed (ns since the epoch).
    refreshed: AtomicU64,
    /// The eviction pool; its lock also makes one worker evict at a time.
    pool: Mutex<Vec<Candidate>>,
    /// The next shard to sample.
    cursor: AtomicUsize,
    /// Used memory when the node was created (INFO used_memory_startup).
    startup: AtomicU64,
}

impl Evictor {
    /// Copies the configuration directives in (called by `Server::apply_config`).
    pub fn configure(&self, c: &crate::config::Config) {
        if self.startup.load(Relaxed) == 0 {
            self.startup.store(allocated_bytes(), Relaxed);
        }
        self.maxmemory.store(c.get_u64("maxmemory"), Relaxed);
        let policy = Policy::parse(c.get("maxmemory-policy")).unwrap_or(Policy::NoEviction);
        let old = Policy::from_u8(self.policy.swap(policy as u8, Relaxed));
        if old != policy {
            // Scores of another policy mean nothing now.
            self.pool.lock().clear();
        }
        self.samples.store(
            (c.get_u64("maxmemory-samples") as usize).clamp(1, 64),
            Relaxed,
        );
        self.tenacity.store(
            c.get_u64("maxmemory-eviction-tenacity").min(100) as u32,
            Relaxed,
        );
        let lfu = policy.is_lfu().then(|| {
            (
                c.get_u64("lfu-log-factor").min(u64::from(u32::MAX)) as u32,
                c.get_u64("lfu-decay-time").min(u64::from(u32::MAX)) as u32,
            )
        });
        storage::table::set_lfu(lfu);
    }

    /// True when `maxmemory` is set (one relaxed load).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.maxmemory.load(Relaxed) != 0
    }

    /// Used memory when the node was created.
    pub fn startup_memory(&self) -> u64 {
        self.startup.load(Relaxed)
    }

    /// `maxmemory` in bytes (0: none).
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Relaxed)
    }

    /// The configured policy.
    pub fn policy(&self) -> Policy {
        Policy::from_u8(self.policy.load(Relaxed))
    }

    /// Used memory, refreshed from the allocator when the cached figure is over 1 ms old.
    pub fn used_memory(&self) -> u64 {
        let now = clock::now_ns();
        let at = self.refreshed.load(Relaxed);
        if now.saturating_sub(at) >= clock::NS_PER_MS
            && self
                .refreshed
                .compare_exchange(at, now, Relaxed, Relaxed)
                .is_ok()
        {
            return self.refresh();
        }
        self.used.load(Relaxed)
    }

    /// Reads used memory from the allocator now.
    pub fn refresh(&self) -> u64 {
        let used = allocated_bytes();
        self.used.store(used, Relaxed);
        used
    }

    /// Evicts keys until used memory is under `maxmemory` (Redis's `performEvictions`).
    /// The caller holds its worker's gate (or every gate).
    pub fn perform(&self, server: &Server) -> Outcome {
        let max = self.maxmemory();
        if max == 0 || self.used_memory() <= max {
            return Outcome::Ok;
        }
        // One evictor at a time; a worker that waited here finds the work done.
        let mut pool = self.pool.lock();
        let mut used = self.refresh();
        if used <= max {
            return Outcome::Ok;
        }
        let policy = self.policy();
        if policy == Policy::NoEviction {
            return Outcome::Fail;
        }
        let start = Instant::now();
        let limit = time_limit(self.tenacity.load(Relaxed));
        let mut n = 0u64;
        let outcome = 'outer: loop {
            let to_free = used - max;
            let mut freed = 0u64;
            while freed < to_free {
                match self.evict_one(server, policy, &mut pool) {
                    Some(bytes) => freed += bytes as u64,
                    None => break 'outer Outcome::Fail,
                }
                n += 1;
                if n.is_multiple_of(16) && limit.is_some_and(|l| start.elapsed() > l) {
                    break 'outer Outcome::Running;
                }
            }
            used = self.refresh();
            if used <= max {
                break Outcome::Ok;
            }
        };
        drop(pool);
        server
            .observe
            .latency
            .add_if_needed("eviction-cycle", start.elapsed().as_nanos() as u64);
        self.evicted.fetch_add(n, Relaxed);
        if outcome == Outcome::Fail && self.refresh() <= max {
            return Outcome::Ok;
        }
        outcome
    }

    /// Evicts one key; returns the bytes it is estimated to free, or `None` when no key
    /// can be evicted.
    fn evict_one(
        &self,
        server: &Server,
        policy: Policy,
        pool: &mut Vec<Candidate>,
    ) -> Option<usize> {
        let ks = &server.keyspace;
        let shards = ks.shard_count();
        let dbs = ks.db_count();
        let volatile = policy.volatile();
        let now = clock::now_ns();
        if matches!(policy, Policy::AllKeysRandom | Policy::VolatileRandom) {
            // Visit shards in turn from a random one; the first key found goes.
            let first = rand::random::<u64>() as usize % shards;
            for step in 0..shards {
                let shard = (first + step) % shards;
                let mut victim = None;
                ks.with_shard(shard, |s| {
                    for db in 0..dbs {
                        let t = s.table_ref(db);
                        let mut take = |k: &[u8], _: &Entry| victim = Some((db, k.to_vec()));
                        let found = if volatile {
                            t.sample_volatile(1, &mut take)
                        } else {
                            t.sample(1, &mut take)
                        };
                        if found > 0 {
                            break;
                        }
                    }
                });
                if let Some((db, key)) = victim {
                    if let Some(bytes) = delete_evicted(server, db, &key, volatile, now) {
                        return Some(bytes);
                    }
                }
            }
            return None;
        }
        let samples = self.samples.load(Relaxed);
        loop {
            // Fill the pool from shards in turn until this round saw enough candidates and
            // the pool is full: a victim is always the best of at least POOL_SIZE keys,
            // also in the first rounds, when a few samples of one or two shards would leave
            // the pick to chance.
            let mut seen = 0;
            let mut visited = 0;
            while visited < shards && (seen < samples || pool.len() < POOL_SIZE) {
                let shard = self.cursor.fetch_add(1, Relaxed) % shards;
                visited += 1;
                ks.with_shard(shard, |s| {
                    for db in 0..dbs {
                        let t = s.table_ref(db);
                        if t.is_empty() || (volatile && t.volatile_len() == 0) {
                            continue;
                        }
                        let mut offer = |k: &[u8], e: &Entry| {
                            let score = match policy {
                                Policy::AllKeysLfu | Policy::VolatileLfu => {
                                    255 - u64::from(e.lfu_freq(now))
                                }
                                Policy::VolatileTtl => u64::MAX - e.expire_at().unwrap_or(u64::MAX),
                                _ => e.idle_secs(now),
                            };
                            pool_insert(pool, score, db, k);
                        };
                        seen += match policy {
                            Policy::VolatileTtl => t.soonest_expiring(samples, &mut offer),
                            _ if volatile => t.sample_volatile(samples, &mut offer),
                            _ => t.sample(samples, &mut offer),
                        };
                    }
                });
            }
            if seen == 0 && pool.is_empty() {
                return None;
            }
            // The best candidates first; ones deleted meanwhile are dropped.
            while let Some(c) = pool.pop() {
                if let Some(bytes) = delete_evicted(server, c.db, &c.key, volatile, now) {
                    return Some(bytes);
                }
            }
            if seen == 0 {
                return None;
            }
        }
    }
}

/// Inserts a candidate in the pool (ascending score), dropping the worst when full.
fn pool_insert(pool: &mut Vec<Candidate>, score: u64, db: usize, key: &[u8]) {
    if pool.iter().any(|c| c.db == db && c.key == key) {
        return;
    }
    let pos = pool.partition_point(|c| c.score < score);
    if pool.len() >= POOL_SIZE {
        if pos == 0 {
            return;
        }
        pool.remove(0);
        pool.insert(
            pos - 1,
            Candidate {
                score,
                db,
                key: key.to_vec(),
            },
        );
    } else {
        pool.insert(
            pos,
            Candidate {
                score,
                db,
                key: key.to_vec(),
            },
        );
    }
}

/// How long one command may spend evicting (Redis's `evictionTimeLimitUs`); `None` when
/// unlimited (tenacity 100).
fn time_limit(tenacity: u32) -> Option<Duration> {
    if tenacity <= 10 {
        return Some(Duration::from_micros(50 * u64::from(tenacity)));
    }
    if tenacity < 100 {
        return Some(Duration::from_micros(
            (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        ));
    }
    None
}

/// Deletes `key` of `db` for eviction, as DEL would (WATCH, tracking, tags, the `evicted`
/// event); `volatile`: only if it has a TTL. Returns the bytes it is estimated to free.
fn delete_evicted(
    server: &Server,
    db: usize,
    key: &[u8],
    volatile: bool,
    now: u64,
) -> Option<usize> {
    crate::aof::evicted(server, db, key, || {
        remove_victim(server, db, key, volatile, now)
    })
}

/// The deletion [`delete_evicted`] logs: the freed bytes, or None when the key is gone
/// (or, for a volatile policy, no longer has a TTL).
fn remove_victim(
    server: &Server,
    db: usize,
    key: &[u8],
    volatile: bool,
    now: u64,
) -> Option<usize> {
    let mut g = server.keyspace.lock(db, key, now);
    let bytes = match g.peek() {
        Some(e) if !volatile || e.expire_at().is_some() => {
            crate::cmd::memory::freed_by_delete(key, e)
        }
        _ => {
            drop(g);
            crate::notify::flush_recorded(server);
            return None;
        }
    };
    let old = g.remove();
    drop(g);
    drop(old);
    // Publishes lazy expiries the lookup caused and clears this thread's event log, so a
    // command that then stores this key sees it as new.
    crate::notify::flush_recorded(server);
    server.watches.touch(db, key);
    server.tracking.invalidate(0, key);
    if server.notify.wants(crate::notify::EVICTED) {
        server
            .notify
            .publish(server, crate::notify::EVICTED, "evicted", key, db);
    }
    Some(bytes)
}

/// Before a command runs: while `maxmemory` is set (else one relaxed load), evicts if
/// memory is over the limit and refuses with `-OOM` a command that may grow memory when
/// nothing more can go (Redis's processCommand check). Takes this worker's gate while
/// evicting, unless the caller holds it already (`gate_held`: a batch keeps it from one
/// command to the next, and eviction may be switched on by another client meanwhile).
#[inline]
pub fn admit(
    server: &Server,
    stats: &WorkerStats,
    client: &Client,
    spec: &CommandSpec,
    gate_held: bool,
    parked: &Parked<'_>,
) -> Result<(), CmdError> {
    if !server.evict.enabled() {
        return Ok(());
    }
    // Eviction locks shards: the one a batch keeps goes first.
    parked.release();
    admit_slow(server, stats, client, spec, gate_held)
}

fn admit_slow(
    server: &Server,
    stats: &WorkerStats,
    client: &Client,
    spec: &CommandSpec,
    gate_held: bool,
) -> Result<(), CmdError> {
    let ev = &server.evict;
    if ev.used_memory() <= ev.maxmemory() {
        return Ok(());
    }
    let outcome = if gate_held {
        ev.perform(server)
    } else {
        let gate = match stats.gate.try_lock() {
            Some(g) => g,
            // Busy script: the command's own gate wait answers -BUSY.
            None => match server.wait_gate(&stats.gate) {
                Ok(g) => g,
                Err(_) => return Ok(()),
            },
        };
        let o = ev.perform(server);
        drop(gate);
        o
    };
    if outcome == Outcome::Fail && rejects_on_oom(server, client, spec) {
        return Err(oom_error());
    }
    Ok(())
}

/// True when a command is refused while memory cannot be freed: DENYOOM commands, EXEC of
/// a transaction holding one, and anything but EXEC / DISCARD / QUIT / RESET while a
/// transaction is being queued.
fn rejects_on_oom(server: &Server, client: &Client, spec: &CommandSpec) -> bool {
    if spec.has(flags::DENYOOM) {
        return true;
    }
    let Some(m) = client.multi.as_ref() else {
        return false;
    };
    if spec.has(flags::RUNS_QUEUED) {
        let reg = &server.registry;
        return m
            .queued
            .iter()
            .any(|q| reg.entry(q.cmd_index).spec.has(flags::DENYOOM));
    }
    !spec.has(flags::OOM_OK_IN_MULTI)
}

/// For scripts: true when memory is over `maxmemory` and nothing could be evicted, so a
/// script without `allow-oom` may not start writing (Redis's `server.script_oom`).
pub fn script_oom(server: &Server) -> bool {
    let ev = &server.evict;
    ev.enabled() && ev.used_memory() > ev.maxmemory() && ev.perform(server) == Outcome::Fail
}

/// Used memory as `maxmemory` counts it (INFO `used_memory`): jemalloc's allocated bytes
/// less the bytes cached in thread caches (freed by Ember), the Lua heaps
/// ([`crate::stats::lua_memory`]) and the slow log ([`crate::stats::SLOWLOG_MEMORY`]),
/// which are not data: as in Redis, a script's heap and its garbage never make eviction
/// delete keys, and neither does a long slow log.
pub fn allocated_bytes() -> u64 {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    let allocated = stats::allocated::read().unwrap_or(0) as u64;
    let (eval, functions) = crate::stats::lua_memory();
    allocated
        .saturating_sub(tcache_bytes())
        .saturating_sub(eval)
        .saturating_sub(functions)
        .saturating_sub(crate::stats::SLOWLOG_MEMORY.load(Relaxed))
}

/// Bytes held in jemalloc's thread caches, all arenas merged.
fn tcache_bytes() -> u64 {
    // SAFETY: `stats.arenas.<MALLCTL_ARENAS_ALL = 4096>.tcache_bytes` is a read-only
    // `size_t` statistic (jemalloc 5.3 with stats enabled), so reading it as `usize` is
    // the documented type; the name is NUL-terminated. Tested in `tests::tcache_bytes_reads`.
    let v = unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0") };
    v.map_or(0, |b| b as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::Value;

    #[test]
    fn policies_round_trip() {
        for name in POLICY_NAMES {
            assert_eq!(Policy::parse(name).map(Policy::name), Some(*name));
        }
        assert_eq!(Policy::parse("ALLKEYS-LRU"), Some(Policy::AllKeysLru));
        assert_eq!(Policy::parse("lru"), None);
        for p in Policy::ALL {
            assert_eq!(Policy::from_u8(p as u8), p);
        }
        assert!(Policy::VolatileTtl.volatile() && !Policy::AllKeysLfu.volatile());
    }

    #[test]
    fn time_limit_follows_tenacity() {
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert!(time_limit(50).unwrap() > Duration::from_millis(100));
        assert_eq!(time_limit(100), None);
    }

    #[test]
    fn pool_keeps_the_best_sixteen() {
        let mut pool = Vec::new();
        for i in 0..40u64 {
            pool_insert(&mut pool, (i * 7) % 40, 0, format!("k{i}").as_bytes());
        }
        pool_insert(&mut pool, 39, 0, b"k17"); // duplicate key: ignored
        assert_eq!(pool.len(), POOL_SIZE);
        let scores: Vec<u64> = pool.iter().map(|c| c.score).collect();
        assert_eq!(scores, (24..40).collect::<Vec<_>>());
    }

    /// The first victim is already the best of a full pool: volatile-ttl's first pick is
    /// the soonest deadline among at least POOL_SIZE keys, whatever the hash seed.
    #[test]
    fn first_round_fills_the_pool() {
        let server = Server::new(crate::config::Config::default(), 1, None, None);
        let now = clock::now_ns();
        let n = 4000u64;
        let key = |i: u64| format!("t:{i}").into_bytes();
        for i in 0..n {
            let at = now + (10_000 + i) * clock::NS_PER_SEC;
            let k = key(i);
            let mut g = server.keyspace.lock(0, &k, now);
            g.insert(Value::String(storage::RString::from_bytes(b"v")), at);
        }
        let mut pool = Vec::new();
        let freed = server
            .evict
            .evict_one(&server, Policy::VolatileTtl, &mut pool);
        assert!(freed.is_some());
        let gone: Vec<u64> = (0..n)
            .filter(|&i| {
                let k = key(i);
                server.keyspace.lock(0, &k, now).peek().is_none()
            })
            .collect();
        assert_eq!(gone.len(), 1);
        assert_eq!(pool.len(), POOL_SIZE - 1);
        let index = |c: &Candidate| -> u64 {
            let k = std::str::from_utf8(&c.key).expect("utf-8");
            k["t:".len()..].parse().expect("index")
        };
        assert!(
            pool.iter().all(|c| index(c) > gone[0]),
            "victim {} is not the soonest of {:?}",
            gone[0],
            pool.iter().map(index).collect::<Vec<_>>()
        );
    }

    #[test]
    fn tcache_bytes_reads() {
        // jemalloc answers EINVAL for a wrong name or size, so Ok means the read matched.
        let _ = tikv_jemalloc_ctl::epoch::advance();
        // SAFETY: as in `tcache_bytes`.
        let r =
            unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0") };
        assert!(r.is_ok(), "{r:?}");
    }
}
