//! SLOWLOG: the last `slowlog-max-len` commands that ran for at least
//! `slowlog-log-slower-than` microseconds, as Redis keeps them (slowlog.c): an id, the
//! Unix time it was logged, its duration in µs, at most 32 arguments of at most 128 bytes
//! each (the rest summarised), the client's address and name.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;
use resp::Args;

use crate::client::Client;

/// Arguments kept per entry; the last one kept says how many more there were.
pub const MAX_ARGC: usize = 32;
/// Bytes kept per argument; the rest is summarised.
pub const MAX_STRING: usize = 128;

/// One slow command.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Increasing id (never reused, not even after SLOWLOG RESET).
    pub id: u64,
    /// Unix time (s) it was logged.
    pub time: i64,
    /// How long it ran (µs).
    pub duration_us: u64,
    /// Its arguments, trimmed.
    pub args: Vec<Vec<u8>>,
    /// `ip:port` of the client.
    pub peer: String,
    /// CLIENT SETNAME of the client.
    pub name: Vec<u8>,
}

/// The slow log.
pub struct SlowLog {
    /// `slowlog-log-slower-than` in ns (u64::MAX: off).
    threshold: AtomicU64,
    /// `slowlog-max-len`.
    max_len: AtomicU64,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            threshold: AtomicU64::new(10_000_000),
            max_len: AtomicU64::new(128),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }
}

impl SlowLog {
    /// The shortest duration (ns) logged; u64::MAX while off.
    #[inline]
    pub fn threshold_ns(&self) -> u64 {
        self.threshold.load(Relaxed)
    }

    /// `slowlog-log-slower-than` (µs; negative turns the log off) and `slowlog-max-len`
    /// (a shorter log drops its oldest entries at once).
    pub fn configure(&self, slower_than_us: i64, max_len: u64) {
        let t = u64::try_from(slower_than_us).map_or(u64::MAX, |us| us.saturating_mul(1_000));
        self.threshold.store(t, Relaxed);
        self.max_len.store(max_len, Relaxed);
        let mut e = self.entries.lock();
        while e.len() as u64 > max_len {
            drop_oldest(&mut e);
        }
    }

    /// Logs a command of `client` that ran `duration_us` (the caller checked the threshold).
    pub fn push(&self, client: &Client, args: Args<'_>, duration_us: u64) {
        let max = self.max_len.load(Relaxed);
        if max == 0 {
            return;
        }
        let shown = super::shown_args(&args, &client.redacted);
        let entry = Entry {
            id: self.next_id.fetch_add(1, Relaxed),
            time: storage::clock::now_ns() as i64 / 1_000_000_000,
            duration_us,
            args: trim(&shown),
            peer: client.info.addr.to_string(),
            name: client.info.name.lock().clone(),
        };
        let mut e = self.entries.lock();
        held(size_of_entry(&entry), true);
        e.push_front(entry);
        while e.len() as u64 > max {
            drop_oldest(&mut e);
        }
    }

    /// The newest `count` entries (all with None), newest first.
    pub fn get(&self, count: Option<usize>) -> Vec<Entry> {
        let e = self.entries.lock();
        e.iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// True when nothing is logged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every entry (ids go on from where they were).
    pub fn reset(&self) {
        let mut e = self.entries.lock();
        while !e.is_empty() {
            drop_oldest(&mut e);
        }
    }
}

/// About the bytes `e` holds on the heap (its arguments, address and name, and their
/// vectors' headers).
fn size_of_entry(e: &Entry) -> u64 {
    let args: usize = e.args.iter().map(|a| a.capacity() + 24).sum();
    (std::mem::size_of::<Entry>() + args + e.peer.capacity() + e.name.capacity()) as u64
}

/// Counts `bytes` into (`add`) or out of [`crate::stats::SLOWLOG_MEMORY`].
fn held(bytes: u64, add: bool) {
    let m = &crate::stats::SLOWLOG_MEMORY;
    if add {
        m.fetch_add(bytes, Relaxed);
    } else {
        m.fetch_sub(bytes.min(m.load(Relaxed)), Relaxed);
    }
}

fn drop_oldest(e: &mut VecDeque<Entry>) {
    if let Some(old) = e.pop_back() {
        held(size_of_entry(&old), false);
    }
}

/// The arguments an entry keeps: at most [`MAX_ARGC`], the last of them saying how many
/// were left out, each at most [`MAX_STRING`] bytes and a note of how many were cut.
fn trim(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let kept = args.len().min(MAX_ARGC);
    let mut out = Vec::with_capacity(kept);
    for (j, a) in args.iter().take(kept).enumerate() {
        if kept != args.len() && j == kept - 1 {
            out.push(format!("... ({} more arguments)", args.len() - kept + 1).into_bytes());
        } else if a.len() > MAX_STRING {
            let mut s = a[..MAX_STRING].to_vec();
            s.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            out.push(s);
        } else {
            out.push(a.to_vec());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_commands_and_arguments_are_trimmed_as_redis_does() {
        let many: Vec<Vec<u8>> = (0..35).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(|v| v.as_slice()).collect();
        let t = trim(&refs);
        assert_eq!(t.len(), 32);
        assert_eq!(t[30], b"30");
        assert_eq!(t[31], b"... (4 more arguments)");
        let long = vec![b'A'; 129];
        let t = trim(&[b"sadd", &long]);
        assert_eq!(t[1].len(), 128 + "... (1 more bytes)".len());
        assert!(t[1].ends_with(b"... (1 more bytes)"));
        let exact = vec![b'A'; 128];
        assert_eq!(trim(&[&exact])[0], exact);
    }

    #[test]
    fn a_shorter_log_drops_the_oldest_and_negative_turns_it_off() {
        let log = SlowLog::default();
        log.configure(-1, 10);
        assert_eq!(log.threshold_ns(), u64::MAX);
        log.configure(0, 10);
        assert_eq!(log.threshold_ns(), 0);
        log.configure(5, 10);
        assert_eq!(log.threshold_ns(), 5_000);
    }
}
