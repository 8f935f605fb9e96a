//! Key events the keyspace records for keyspace notifications: keys removed lazily
//! because their deadline passed, and keys created.
//!
//! Recording is off unless [`crate::Keyspace::set_recording`] turned it on; a guard reads the
//! switch once when it is taken. Events go to a per-thread log that the command layer
//! drains ([`take`]) in the order they happened, so a command's own notifications can be
//! published after the ones its lookups caused, as Redis does.

use std::cell::RefCell;

/// Record keys that expire lazily (on access).
pub const RECORD_EXPIRED: u8 = 1;
/// Record keys that are created.
pub const RECORD_NEW: u8 = 2;

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEvent {
    /// Its deadline had passed; it was removed on access.
    Expired,
    /// It did not exist and was stored.
    New,
    /// A live key was removed (a store that follows it replaces the key, so it is not new).
    Removed,
}

thread_local! {
    static LOG: RefCell<Vec<(KeyEvent, usize, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
}

/// Appends an event for `key` in `db` to this thread's log.
pub(crate) fn record(ev: KeyEvent, db: usize, key: &[u8]) {
    LOG.with(|l| {
        let mut l = l.borrow_mut();
        if ev == KeyEvent::New {
            // A live key removed and stored again by the same command is replaced, not new.
            if let Some(pos) = l
                .iter()
                .rposition(|(e, d, k)| *e == KeyEvent::Removed && *d == db && k == key)
            {
                l.remove(pos);
                return;
            }
        }
        l.push((ev, db, key.to_vec()));
    });
}

/// Takes this thread's log: (event, db, key) in order, without [`KeyEvent::Removed`] marks.
pub fn take() -> Vec<(KeyEvent, usize, Vec<u8>)> {
    let mut v = LOG.with(|l| std::mem::take(&mut *l.borrow_mut()));
    v.retain(|(e, _, _)| *e != KeyEvent::Removed);
    v
}

/// True when this thread's log holds anything.
#[inline]
pub fn pending() -> bool {
    LOG.with(|l| !l.borrow().is_empty())
}
