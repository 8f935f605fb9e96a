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
}

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
        }
    }

    /// Adds `v` to a counter. Each worker is the only writer of its counters, so a relaxed
    /// load and store (plain moves, no locked instruction) is enough on the command path;
    /// a concurrent CONFIG RESETSTAT may at worst be overwritten by one in-flight update.
    #[inline]
    pub fn add(c: &AtomicU64, v: u64) {
        c.store(c.load(Relaxed).wrapping_add(v), Relaxed);
    }

    /// Zeroes every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
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
        }
    }
}

/// Sum of one field over all workers.
pub fn sum(workers: &[std::sync::Arc<WorkerStats>], f: impl Fn(&WorkerStats) -> &AtomicU64) -> u64 {
    workers.iter().map(|w| f(w).load(Relaxed)).sum()
}
