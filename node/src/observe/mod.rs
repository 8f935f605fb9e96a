//! What the execution pipeline shows about the commands it runs: the slow log
//! ([`slowlog`]), the latency monitor's events ([`latency`]) and the MONITOR stream
//! ([`monitor`]).
//!
//! [`crate::exec`] measures every command it runs and hands the ones that may interest an
//! observer to [`Observers::after`]. Which ones may is one number, [`Observers::gate`]: the
//! shortest duration any observer records (the slow log's `slowlog-log-slower-than`, the
//! latency monitor's `latency-monitor-threshold`), or 0 while a client monitors. A command
//! faster than the gate costs one atomic load and a compare; none of the three locks
//! anything then.
//!
//! This layer knows clients, specs and arguments, not the server: the pipeline passes in
//! what it measured.

pub mod latency;
pub mod monitor;
pub mod slowlog;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use resp::Args;

use crate::client::Client;
use crate::registry::{flags, CommandSpec};

/// The slow log, the latency monitor and the monitors, with the gate in front of them.
pub struct Observers {
    /// Commands that took at least this long (ns) are shown to [`Observers::after`].
    gate: AtomicU64,
    /// SLOWLOG.
    pub slowlog: slowlog::SlowLog,
    /// LATENCY.
    pub latency: latency::LatencyMonitor,
    /// MONITOR.
    pub monitors: monitor::Monitors,
}

impl Default for Observers {
    fn default() -> Self {
        let o = Observers {
            gate: AtomicU64::new(u64::MAX),
            slowlog: slowlog::SlowLog::default(),
            latency: latency::LatencyMonitor::default(),
            monitors: monitor::Monitors::default(),
        };
        o.regate();
        o
    }
}

/// Where a command ran from, as the observers tell it apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Origin {
    /// A client's own command (top level or inside EXEC).
    Client,
    /// `redis.call` from a script or function of the client (MONITOR shows `lua`).
    Script,
    /// A blocked command run again to serve it (MONITOR showed it when it blocked).
    Served,
    /// A Raft entry applied to this node's keyspace (the node that took the client's
    /// command showed it to its monitors).
    Log,
}

impl Observers {
    /// The shortest duration (ns) an observer wants to see; 0 while someone monitors.
    #[inline(always)]
    pub fn gate(&self) -> u64 {
        self.gate.load(Relaxed)
    }

    /// Applies `slowlog-log-slower-than` (µs, negative: off), `slowlog-max-len` and
    /// `latency-monitor-threshold` (ms, 0: off).
    pub fn configure(&self, slower_than_us: i64, max_len: u64, latency_ms: u64) {
        self.slowlog.configure(slower_than_us, max_len);
        self.latency.configure(latency_ms);
        self.regate();
    }

    /// Puts the client owning `mailbox` in MONITOR mode (false: it was already).
    pub fn add_monitor(&self, mailbox: std::sync::Arc<crate::pubsub::Mailbox>) -> bool {
        let added = self.monitors.add(mailbox);
        self.regate();
        added
    }

    /// Takes client `id` out of MONITOR mode (it sent RESET or closed).
    pub fn remove_monitor(&self, id: u64) {
        if self.monitors.remove(id) {
            self.regate();
        }
    }

    /// Recomputes the gate after a threshold or the set of monitors changed.
    fn regate(&self) {
        let g = if self.monitors.active() {
            0
        } else {
            self.slowlog.threshold_ns().min(self.latency.threshold_ns())
        };
        self.gate.store(g, Relaxed);
    }

    /// A command the pipeline ran took `dur` ns (at least [`Observers::gate`]): records it
    /// where it belongs. `args` are the command as the client sent it; arguments the
    /// handler marked secret (`client.redacted`) are shown as `(redacted)`.
    #[cold]
    pub fn after(
        &self,
        client: &Client,
        spec: &CommandSpec,
        args: Args<'_>,
        dur: u64,
        origin: Origin,
    ) {
        if dur >= self.latency.threshold_ns() && origin != Origin::Log {
            let event = if spec.has(flags::FAST) {
                "fast-command"
            } else {
                "command"
            };
            self.latency.add(event, dur / 1_000_000);
        }
        if dur >= self.slowlog.threshold_ns()
            && !spec.has(flags::SKIP_SLOWLOG)
            && client.block_request.is_none()
        {
            self.slowlog.push(client, args, dur / 1_000);
        }
        if self.monitors.active()
            && matches!(origin, Origin::Client | Origin::Script)
            && !spec.has(flags::SKIP_MONITOR | flags::ADMIN)
        {
            self.monitors.feed(client, args, origin == Origin::Script);
        }
    }
}

/// `args` with the arguments at `redacted` shown as `(redacted)`: what the slow log and
/// MONITOR keep of a command that carries a password.
pub fn shown_args<'a>(args: &'a Args<'_>, redacted: &[u32]) -> Vec<&'a [u8]> {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            if redacted.contains(&(i as u32)) {
                &b"(redacted)"[..]
            } else {
                a
            }
        })
        .collect()
}
