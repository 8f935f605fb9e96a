//! Blocking commands in cluster mode: the pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP) and XREADGROUP ... BLOCK, which are writes, and XREAD ...
//! BLOCK, which is a read.
//!
//! XREAD ... BLOCK runs on the node it reached (the leader, or any node for a READONLY
//! connection) and blocks there as in single-node mode: every write this node applies
//! serves the XREADs waiting on its keys (`state_machine::execute_on`). A read that waits
//! for a write it then sees needs no further leadership check.
//!
//! A pop is a write, so it goes through the group's log like any other: the leader
//! proposes the command, and every replica applies it without blocking (an empty key gives
//! the command's timeout reply). When that reply is the nil of "nothing to pop", the
//! connection waits on its leader for a write to one of the keys (every applied write,
//! inside EXEC and scripts too, wakes the connections waiting on its keys through
//! `exec::note_key_written` and [`KeyWaiters`]) and proposes the pop again,
//! until it pops something, its timeout passes, or the client goes away. A connection is
//! registered before its first proposal, so a push applied in between is not missed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Connections waiting for writes to keys.
#[derive(Default)]
pub struct KeyWaiters {
    inner: Mutex<Inner>,
    count: AtomicUsize,
}

/// [`KeyWaiters`]' maps.
#[derive(Default)]
struct Inner {
    /// Who waits on each key.
    by_key: HashMap<Vec<u8>, Vec<Arc<Notify>>>,
    /// Each waiting client's wake-up and CLIENT UNBLOCK reason ([`UNBLOCK_TIMEOUT`],
    /// [`UNBLOCK_ERROR`]; 0 while none).
    by_client: HashMap<u64, (Arc<Notify>, Arc<AtomicU8>)>,
}

/// CLIENT UNBLOCK id TIMEOUT: the waiter answers as if its timeout passed.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK id ERROR: the waiter answers `-UNBLOCKED`.
pub const UNBLOCK_ERROR: u8 = 2;

impl KeyWaiters {
    /// True while any connection waits (the apply path's fast check).
    pub fn active(&self) -> bool {
        self.count.load(Ordering::SeqCst) > 0
    }

    /// How many connections wait (INFO's blocked_clients).
    pub fn waiting(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Wakes `n` on every write to one of `keys`, or on CLIENT UNBLOCK of client `id`
    /// (which sets `reason`); a wake while nobody waits is kept.
    pub fn register(&self, id: u64, keys: &[Vec<u8>], n: &Arc<Notify>, reason: &Arc<AtomicU8>) {
        let mut m = self.inner.lock();
        for k in keys {
            m.by_key.entry(k.clone()).or_default().push(n.clone());
        }
        m.by_client.insert(id, (n.clone(), reason.clone()));
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Undoes [`KeyWaiters::register`].
    pub fn unregister(&self, id: u64, keys: &[Vec<u8>], n: &Arc<Notify>) {
        let mut m = self.inner.lock();
        for k in keys {
            if let Some(list) = m.by_key.get_mut(k) {
                list.retain(|x| !Arc::ptr_eq(x, n));
                if list.is_empty() {
                    m.by_key.remove(k);
                }
            }
        }
        if m.by_client.get(&id).is_some_and(|(x, _)| Arc::ptr_eq(x, n)) {
            m.by_client.remove(&id);
        }
        self.count.fetch_sub(1, Ordering::SeqCst);
    }

    /// `key` was written: wake whoever waits on it.
    pub fn written(&self, key: &[u8]) {
        if let Some(list) = self.inner.lock().by_key.get(key) {
            for n in list {
                n.notify_one();
            }
        }
    }

    /// CLIENT UNBLOCK: wakes client `id` with `reason` if it waits here (true), once.
    pub fn unblock(&self, id: u64, reason: u8) -> bool {
        match self.inner.lock().by_client.remove(&id) {
            Some((n, r)) => {
                r.store(reason, Ordering::SeqCst);
                n.notify_one();
                true
            }
            None => false,
        }
    }
}

/// The deadline of a BLOCK argument in milliseconds (`0`: none); `None` when it does not
/// parse.
pub fn deadline_ms(arg: &[u8]) -> Option<Option<Instant>> {
    let ms: u64 = std::str::from_utf8(arg).ok()?.parse().ok()?;
    if ms == 0 {
        return Some(None);
    }
    Some(Some(
        Instant::now() + Duration::from_millis(ms.min(365 * 24 * 3600 * 1000)),
    ))
}

/// The deadline of a timeout argument in seconds (`0`: none); `None` when it does not
/// parse (the command itself has already answered such a timeout with an error).
pub fn deadline(arg: &[u8]) -> Option<Option<Instant>> {
    let secs: f64 = std::str::from_utf8(arg).ok()?.parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    if secs == 0.0 {
        return Some(None);
    }
    Some(Some(
        Instant::now() + Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX / 4),
    ))
}

/// Whether a reply is a nil (RESP2 null array or bulk, RESP3 null): a pop found nothing.
pub fn is_nil(reply: &[u8]) -> bool {
    matches!(reply, b"*-1\r\n" | b"$-1\r\n" | b"_\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_wake_on_their_keys_only() {
        let w = KeyWaiters::default();
        let n = Arc::new(Notify::new());
        let reason = Arc::new(AtomicU8::new(0));
        w.register(7, &[b"a".to_vec(), b"b".to_vec()], &n, &reason);
        assert_eq!(w.waiting(), 1);
        assert!(w.active());
        w.written(b"c");
        w.written(b"b");
        // The wake is kept as a permit until the waiter looks.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), n.notified())
                .await
                .expect("woken by b");
            assert!(
                tokio::time::timeout(Duration::from_millis(20), n.notified())
                    .await
                    .is_err(),
                "c woke nobody"
            );
        });
        // CLIENT UNBLOCK reaches the registered client once, and no other.
        assert!(!w.unblock(8, UNBLOCK_ERROR));
        assert!(w.unblock(7, UNBLOCK_ERROR));
        assert_eq!(reason.load(Ordering::SeqCst), UNBLOCK_ERROR);
        assert!(!w.unblock(7, UNBLOCK_TIMEOUT));
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), n.notified())
                .await
                .expect("woken by CLIENT UNBLOCK");
        });
        w.unregister(7, &[b"a".to_vec(), b"b".to_vec()], &n);
        let m = w.inner.lock();
        assert!(!w.active() && m.by_key.is_empty() && m.by_client.is_empty());
    }

    #[test]
    fn timeouts_and_nils() {
        assert_eq!(deadline(b"0"), Some(None));
        assert!(deadline(b"0.5").unwrap().is_some());
        assert_eq!(deadline(b"-1"), None);
        assert_eq!(deadline(b"x"), None);
        assert!(is_nil(b"*-1\r\n") && is_nil(b"_\r\n") && !is_nil(b"*2\r\n"));
    }

    #[test]
    fn block_milliseconds() {
        assert_eq!(deadline_ms(b"0"), Some(None));
        assert!(deadline_ms(b"250").unwrap().is_some());
        assert_eq!(deadline_ms(b"-1"), None);
        assert_eq!(deadline_ms(b"1.5"), None);
    }
}
