//! Counters for INFO. Each worker thread owns one [`WorkerStats`] (written only by that
//! thread, so no cache line bounces between cores); INFO sums them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Calls, time and failures of one command.
#[derive(Default)]
pub struct CmdStat {
    /// Number of calls.
    pub calls: AtomicU64,
    /// Nanoseconds spent, by the wall clock (INFO shows microseconds, as Redis's `ustime`
    /// differences do).
    pub nsec: AtomicU64,
    /// Calls rejected before running (arity, auth ...).
    pub rejected: AtomicU64,
    /// Calls that ran and replied with an error.
    pub failed: AtomicU64,
    /// How long its calls took (`latency-tracking`), made at this worker's first call.
    pub hist: std::sync::OnceLock<Box<Histogram>>,
}

impl CmdStat {
    /// Counts a call of `ns` in the latency histogram.
    #[inline]
    pub fn record(&self, ns: u64) {
        self.hist
            .get_or_init(|| Box::new(Histogram::default()))
            .record(ns);
    }
}

/// Buckets of a [`Histogram`]: 4 per power of two from 4 ns to 2^40 ns (18 minutes);
/// longer calls count in the last.
pub const BUCKETS: usize = 4 + 39 * 4;

/// Latencies of one command on one worker: log-linear buckets (each power of two split in
/// four, so a bucket's bounds are within 25% of each other), written by the worker alone.
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Histogram {
    /// The bucket `ns` counts in.
    #[inline]
    pub fn bucket(ns: u64) -> usize {
        if ns < 4 {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros() as usize;
        let m = ((ns >> (e - 2)) & 3) as usize;
        (4 + (e - 2) * 4 + m).min(BUCKETS - 1)
    }

    /// The largest value (ns) bucket `i` holds.
    pub fn upper(i: usize) -> u64 {
        if i < 4 {
            return i as u64;
        }
        let e = (i - 4) / 4 + 2;
        let m = ((i - 4) % 4) as u64;
        ((5 + m) << (e - 2)) - 1
    }

    /// Counts one call of `ns`.
    #[inline]
    pub fn record(&self, ns: u64) {
        WorkerStats::add(&self.counts[Self::bucket(ns)], 1);
    }

    /// Adds this histogram's counts into `into`.
    pub fn add_to(&self, into: &mut [u64; BUCKETS]) {
        for (a, c) in into.iter_mut().zip(self.counts.iter()) {
            *a += c.load(Relaxed);
        }
    }

    fn reset(&self) {
        for c in &self.counts {
            c.store(0, Relaxed);
        }
    }
}

/// The value (ns) at percentile `p` (0 to 100) of `counts`: the upper bound of the bucket
/// it falls in (0 with no calls).
pub fn percentile(counts: &[u64; BUCKETS], p: f64) -> u64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0;
    }
    let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= want {
            return Histogram::upper(i);
        }
    }
    Histogram::upper(BUCKETS - 1)
}

/// Bytes the Lua heaps of EVAL scripts hold (all engines), kept by [`crate::script`].
pub static LUA_EVAL_MEMORY: AtomicU64 = AtomicU64::new(0);
/// Bytes the Lua heaps of function libraries hold, kept by [`crate::script`].
pub static LUA_FUNCTIONS_MEMORY: AtomicU64 = AtomicU64::new(0);

/// Bytes the slow log's entries hold (INFO `ember_slowlog_memory`), kept by
/// [`crate::observe::slowlog`]; not data, so left out of `used_memory` as the Lua heaps are.
pub static SLOWLOG_MEMORY: AtomicU64 = AtomicU64::new(0);

/// The Lua heaps of every engine (EVAL, functions), in bytes as Lua requested them
/// (INFO `used_memory_vm_eval`, `used_memory_vm_functions`). Not data:
/// [`crate::evict::allocated_bytes`] leaves it out of `used_memory`, so a script's garbage
/// never makes `maxmemory` evict keys (as in Redis, whose Lua heap is outside
/// `used_memory`).
pub fn lua_memory() -> (u64, u64) {
    (
        LUA_EVAL_MEMORY.load(Relaxed),
        LUA_FUNCTIONS_MEMORY.load(Relaxed),
    )
}

/// One worker's counters.
pub struct WorkerStats {
    /// Commands processed.
    pub commands: AtomicU64,
    /// Connections accepted by this worker.
    pub connections: AtomicU64,
    /// Bytes read from clients.
    pub net_input: AtomicU64,
    /// Bytes written to clients.
    pub net_output: AtomicU64,
    /// Keyspace lookups that found a key.
    pub hits: AtomicU64,
    /// Keyspace lookups that found no key.
    pub misses: AtomicU64,
    /// Commands answered with an error.
    pub error_replies: AtomicU64,
    /// Per-command statistics, indexed like the registry.
    pub cmd: Box<[CmdStat]>,
    /// Held by this worker while it runs a command; EXEC and scripts take every worker's
    /// gate to run alone (uncontended otherwise: only this worker takes it).
    pub gate: parking_lot::Mutex<()>,
    /// Error replies by code (INFO errorstats), at most [`ERROR_CODES`] codes.
    pub error_codes: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Distinct error codes counted per worker (Redis's ERROR_STATS_NUMBER); replies with
/// other codes still count in `total_error_replies`.
pub const ERROR_CODES: usize = 128;

impl WorkerStats {
    /// Counters for a registry of `commands` entries.
    pub fn new(commands: usize) -> Self {
        WorkerStats {
            commands: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            net_input: AtomicU64::new(0),
            net_output: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            error_replies: AtomicU64::new(0),
            cmd: (0..commands).map(|_| CmdStat::default()).collect(),
            gate: parking_lot::Mutex::new(()),
            error_codes: Default::default(),
        }
    }

    /// Adds `v` to a counter. Each worker is the only writer of its counters, so a relaxed
    /// load and store (plain moves, no locked instruction) is enough on the command path;
    /// a concurrent CONFIG RESETSTAT may at worst be overwritten by one in-flight update.
    #[inline]
    pub fn add(c: &AtomicU64, v: u64) {
        c.store(c.load(Relaxed).wrapping_add(v), Relaxed);
    }

    /// Counts the error replies `out` wrote since the last count (INFO
    /// `total_error_replies` and errorstats). Nothing to do, and one load, without errors.
    #[inline]
    pub fn count_errors(&self, out: &mut resp::ReplyWriter) {
        if out.has_errors() {
            self.count_codes(out.take_errors());
        }
    }

    #[inline(never)]
    fn count_codes(&self, codes: Vec<String>) {
        Self::add(&self.error_replies, codes.len() as u64);
        let mut m = self.error_codes.lock();
        for c in codes {
            if let Some(n) = m.get_mut(&c) {
                *n += 1;
            } else if m.len() < ERROR_CODES {
                m.insert(c, 1);
            }
        }
    }

    /// Zeroes every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
        self.error_codes.lock().clear();
        for c in [
            &self.commands,
            &self.connections,
            &self.net_input,
            &self.net_output,
            &self.hits,
            &self.misses,
            &self.error_replies,
        ] {
            c.store(0, Relaxed);
        }
        for s in self.cmd.iter() {
            s.calls.store(0, Relaxed);
            s.nsec.store(0, Relaxed);
            s.rejected.store(0, Relaxed);
            s.failed.store(0, Relaxed);
            if let Some(h) = s.hist.get() {
                h.reset();
            }
        }
    }
}

/// Sum of one field over all workers.
pub fn sum(workers: &[std::sync::Arc<WorkerStats>], f: impl Fn(&WorkerStats) -> &AtomicU64) -> u64 {
    workers.iter().map(|w| f(w).load(Relaxed)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_within_a_quarter() {
        assert_eq!(Histogram::bucket(0), 0);
        assert_eq!(Histogram::bucket(3), 3);
        let mut prev_upper = 3;
        for i in 4..BUCKETS {
            let lower = prev_upper + 1;
            let upper = Histogram::upper(i);
            assert_eq!(Histogram::bucket(lower), i, "lower of {i}");
            assert_eq!(Histogram::bucket(upper), i, "upper of {i}");
            assert!(upper - lower <= lower / 4 + 1);
            prev_upper = upper;
        }
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
        // Powers of two start buckets, so microsecond octaves (1024 ns ...) are exact.
        assert_eq!(Histogram::upper(Histogram::bucket(1024) - 1), 1023);
    }

    #[test]
    fn percentiles_come_from_the_bucket_they_fall_in() {
        let h = Histogram::default();
        for _ in 0..99 {
            h.record(1_000);
        }
        h.record(1_000_000);
        let mut c = [0; BUCKETS];
        h.add_to(&mut c);
        let p50 = percentile(&c, 50.0);
        assert!((1_000..1_250).contains(&p50), "{p50}");
        let p100 = percentile(&c, 100.0);
        assert!((1_000_000..1_250_000).contains(&p100), "{p100}");
        assert_eq!(percentile(&[0; BUCKETS], 50.0), 0);
    }
}
