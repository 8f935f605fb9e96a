//! WATCH: which clients watch which keys, and the dirty flag a write sets on them.
//!
//! Every successful write command touches its keys here (one atomic load when nobody
//! watches anything). Touching a watched key sets the `watch_dirty` flag of each client
//! watching it, on whatever thread; EXEC then answers a null reply. A key that expires
//! after it was watched also aborts the transaction (checked at EXEC, see
//! [`Watched`]). Writes touch their keys while still holding their worker's gate, and EXEC
//! checks the flags while holding every gate, so no write slips between check and run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::Mutex;
use storage::Keyspace;

use crate::client::ClientInfo;

/// A key a client watches.
#[derive(Debug, Clone)]
pub struct Watched {
    /// Its database.
    pub db: usize,
    /// The key.
    pub key: Vec<u8>,
    /// The key's deadline when it was watched, if it was live and volatile: reaching it
    /// before EXEC aborts the transaction (Redis's `isWatchedKeyExpired`).
    pub deadline: Option<u64>,
}

/// The clients watching each (db, key).
type ByKey = HashMap<(usize, Vec<u8>), Vec<Arc<ClientInfo>>>;

/// All watched keys of all clients.
#[derive(Default)]
pub struct Watches {
    by_key: Mutex<ByKey>,
    count: AtomicUsize,
}

impl Watches {
    /// True while any key is watched.
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(SeqCst) > 0
    }

    /// Registers `client` as watching `key` in `db` (the caller avoids duplicates).
    pub fn watch(&self, client: &Arc<ClientInfo>, db: usize, key: &[u8]) {
        let mut m = self.by_key.lock();
        m.entry((db, key.to_vec()))
            .or_default()
            .push(client.clone());
        self.count.fetch_add(1, SeqCst);
    }

    /// Forgets every key in `keys` for `client` and clears its dirty flag.
    pub fn unwatch_all(&self, client: &ClientInfo, keys: &[Watched]) {
        if !keys.is_empty() {
            let mut m = self.by_key.lock();
            for w in keys {
                let slot = (w.db, w.key.clone());
                if let Some(v) = m.get_mut(&slot) {
                    let before = v.len();
                    v.retain(|c| c.id != client.id);
                    self.count.fetch_sub(before - v.len(), SeqCst);
                    if v.is_empty() {
                        m.remove(&slot);
                    }
                }
            }
        }
        client.watch_dirty.store(false, Relaxed);
    }

    /// Marks every client watching `key` in `db` dirty.
    pub fn touch(&self, db: usize, key: &[u8]) {
        if !self.active() {
            return;
        }
        let m = self.by_key.lock();
        // A borrowed lookup key needs an owned tuple; the map is small and this only runs
        // while something is watched.
        if let Some(v) = m.get(&(db, key.to_vec())) {
            for c in v {
                c.watch_dirty.store(true, Relaxed);
            }
        }
    }

    /// FLUSHDB / FLUSHALL / SWAPDB: marks dirty the watchers of every key watched in `db`
    /// that exists now in `db` or in one of `also` (call before the keyspace changes, while
    /// holding no shard lock).
    pub fn touch_existing(&self, ks: &Keyspace, db: usize, also: &[usize], now: u64) {
        if !self.active() {
            return;
        }
        let keys: Vec<Vec<u8>> = {
            let m = self.by_key.lock();
            m.keys()
                .filter(|(d, _)| *d == db)
                .map(|(_, k)| k.clone())
                .collect()
        };
        for key in keys {
            let exists = std::iter::once(db)
                .chain(also.iter().copied())
                .any(|d| ks.lock(d, &key, now).peek().is_some());
            if exists {
                self.touch(db, &key);
            }
        }
    }
}
