//! MONITOR: every command the node runs, streamed to the clients that asked, one status
//! line each as Redis writes it (replicationFeedMonitors):
//! `+1339518083.107412 [0 127.0.0.1:60866] "set" "foo" "bar"`, `[0 lua]` for a command a
//! script ran. Administrative commands and the ones flagged `skip_monitor` are not shown
//! (scripts show themselves, before the commands they run). A line is encoded once and
//! queued to each monitor's mailbox ([`crate::pubsub::Mailbox`]), which holds it to the
//! `replica` output-buffer limit as Redis does.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;
use resp::Args;

use crate::client::Client;
use crate::pubsub::Mailbox;

/// The clients in MONITOR mode.
#[derive(Default)]
pub struct Monitors {
    /// How many there are (one load on the command path while 0).
    count: AtomicUsize,
    list: Mutex<Vec<Arc<Mailbox>>>,
}

impl Monitors {
    /// True while a client monitors.
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    /// Adds the client owning `mailbox` (again: no change). True when added.
    pub fn add(&self, mailbox: Arc<Mailbox>) -> bool {
        let mut l = self.list.lock();
        if l.iter().any(|m| m.info.id == mailbox.info.id) {
            return false;
        }
        mailbox.info.monitor.store(true, Relaxed);
        l.push(mailbox);
        self.count.store(l.len(), Relaxed);
        true
    }

    /// Removes client `id` (it closed or sent RESET). True when it was monitoring.
    pub fn remove(&self, id: u64) -> bool {
        let mut l = self.list.lock();
        let before = l.len();
        l.retain(|m| {
            let keep = m.info.id != id;
            if !keep {
                m.info.monitor.store(false, Relaxed);
            }
            keep
        });
        self.count.store(l.len(), Relaxed);
        l.len() != before
    }

    /// Number of monitors.
    pub fn len(&self) -> usize {
        self.count.load(Relaxed)
    }

    /// True when nobody monitors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shows `args`, run by `client` (`from_script`: by a script of it), to every monitor.
    pub fn feed(&self, client: &Client, args: Args<'_>, from_script: bool) {
        let shown = super::shown_args(&args, &client.redacted);
        let line = line(
            storage::clock::now_ns(),
            client.db,
            &if from_script {
                "lua".to_string()
            } else {
                client.info.addr.to_string()
            },
            &shown,
        );
        let l = self.list.lock();
        for m in l.iter() {
            m.send(line.clone());
        }
    }
}

/// One MONITOR line: `+sec.usec [db peer] "arg" ...\r\n`.
pub fn line(now_ns: u64, db: usize, peer: &str, args: &[&[u8]]) -> Vec<u8> {
    let mut s = format!(
        "+{}.{:06} [{} {}] ",
        now_ns / 1_000_000_000,
        (now_ns / 1_000) % 1_000_000,
        db,
        peer
    )
    .into_bytes();
    for (j, a) in args.iter().enumerate() {
        storage::aof::repr(&mut s, a);
        if j + 1 != args.len() {
            s.push(b' ');
        }
    }
    s.extend_from_slice(b"\r\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_written_as_redis_writes_them() {
        let l = line(
            1_339_518_083_107_412_345,
            0,
            "127.0.0.1:60866",
            &[b"set", b"k\"\\", b"a\r\n\t\x07\x08\x00\xff b"],
        );
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1339518083.107412 [0 127.0.0.1:60866] \"set\" \"k\\\"\\\\\" \"a\\r\\n\\t\\a\\b\\x00\\xff b\"\r\n"
        );
        let l = line(5_000_001_000, 3, "lua", &[b"get"]);
        assert_eq!(l, b"+5.000001 [3 lua] \"get\"\r\n");
    }
}
