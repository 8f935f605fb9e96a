//! One logical database's slice of a shard: a hash table plus an ordered expiry index.
//!
//! Every mutation goes through [`Table`] so that the expiry index always matches the
//! deadlines stored in entries. Deadlines are absolute nanoseconds since the Unix epoch;
//! `0` means "no expiry".

use std::collections::BTreeSet;
use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use crate::value::Value;

/// A key's value and metadata.
#[derive(Debug)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Absolute deadline in ns since the epoch, or 0 for none (kept in step with the index).
    expire_at: u64,
    /// Last access time in seconds since the epoch (low 32 bits), for OBJECT IDLETIME.
    access: u32,
}

impl Entry {
    /// The absolute deadline (ns since the epoch), if any.
    pub fn expire_at(&self) -> Option<u64> {
        (self.expire_at != 0).then_some(self.expire_at)
    }

    /// Seconds since the last access, at `now` (ns).
    pub fn idle_secs(&self, now: u64) -> u64 {
        u64::from(secs(now).wrapping_sub(self.access))
    }

    fn expired(&self, now: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now
    }
}

fn secs(now_ns: u64) -> u32 {
    (now_ns / 1_000_000_000) as u32
}

/// One database's keys within one shard.
pub struct Table {
    map: HashTable<(Box<[u8]>, Entry)>,
    expiries: BTreeSet<(u64, Box<[u8]>)>,
    hasher: FixedState,
    /// Keys removed because their deadline passed (lazily or actively), for INFO.
    expired: u64,
}

impl Table {
    /// An empty table hashing with `hasher` (the keyspace's, so hashes can be reused).
    pub fn new(hasher: FixedState) -> Self {
        Table {
            map: HashTable::new(),
            expiries: BTreeSet::new(),
            hasher,
            expired: 0,
        }
    }

    /// Number of keys, including expired keys not yet reaped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with a deadline.
    pub fn volatile_len(&self) -> usize {
        self.expiries.len()
    }

    /// Sum of the remaining time to live (ns) of up to `limit` volatile keys, and how many
    /// were summed (for INFO's avg_ttl).
    pub fn ttl_sample(&self, now: u64, limit: usize) -> (u128, usize) {
        let mut sum = 0u128;
        let mut n = 0;
        for (at, _) in self.expiries.iter().take(limit) {
            sum += u128::from(at.saturating_sub(now));
            n += 1;
        }
        (sum, n)
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The live entry for `key` (hash `h`), touching its access time. An expired entry is
    /// removed and reported as absent.
    pub fn get(&mut self, h: u64, key: &[u8], now: u64) -> Option<&mut Entry> {
        let e = self.get_no_touch(h, key, now)?;
        e.access = secs(now);
        Some(e)
    }

    /// Like [`Table::get`] but leaves the access time alone (TYPE, TTL, OBJECT ...).
    pub fn get_no_touch(&mut self, h: u64, key: &[u8], now: u64) -> Option<&mut Entry> {
        let occ = self.map.find_entry(h, |(k, _)| &k[..] == key).ok()?;
        if occ.get().1.expired(now) {
            let ((k, e), _) = occ.remove();
            self.expiries.remove(&(e.expire_at, k));
            self.expired += 1;
            return None;
        }
        Some(&mut occ.into_mut().1)
    }

    /// True when `key` exists and is live.
    pub fn contains(&mut self, h: u64, key: &[u8], now: u64) -> bool {
        self.get_no_touch(h, key, now).is_some()
    }

    /// Stores `value` under `key` with deadline `expire_at` (0: none), replacing any old
    /// entry; returns the old live entry.
    pub fn insert(
        &mut self,
        h: u64,
        key: &[u8],
        value: Value,
        expire_at: u64,
        now: u64,
    ) -> Option<Entry> {
        let old = self.remove(h, key, now);
        if expire_at != 0 {
            self.expiries.insert((expire_at, key.into()));
        }
        let entry = Entry {
            value,
            expire_at,
            access: secs(now),
        };
        let hasher = self.hasher;
        self.map
            .insert_unique(h, (key.into(), entry), |(k, _)| hasher.hash_one(&k[..]));
        old
    }

    /// Removes `key`; returns its entry if it was live.
    pub fn remove(&mut self, h: u64, key: &[u8], now: u64) -> Option<Entry> {
        let e = self.remove_entry(h, key)?;
        if e.expired(now) {
            self.expired += 1;
            return None;
        }
        Some(e)
    }

    fn remove_entry(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
        let found = self.map.find_entry(h, |(k, _)| &k[..] == key).ok()?;
        let ((k, e), _) = found.remove();
        if e.expire_at != 0 {
            self.expiries.remove(&(e.expire_at, k));
        }
        Some(e)
    }

    /// Sets (or with `at == 0` clears) the deadline of a live key; false if there is no key.
    pub fn set_expire(&mut self, h: u64, key: &[u8], at: u64, now: u64) -> bool {
        let Some(e) = self.get_no_touch(h, key, now) else {
            return false;
        };
        let old = std::mem::replace(&mut e.expire_at, at);
        if old != 0 {
            self.expiries.remove(&(old, key.into()));
        }
        if at != 0 {
            self.expiries.insert((at, key.into()));
        }
        true
    }

    /// Removes up to `max` keys whose deadline has passed; returns how many.
    pub fn expire_due(&mut self, now: u64, max: usize) -> usize {
        self.expire_due_with(now, max, &mut |_| {})
    }

    /// As [`Table::expire_due`], calling `on_expired` with each removed key.
    pub fn expire_due_with(
        &mut self,
        now: u64,
        max: usize,
        on_expired: &mut dyn FnMut(&[u8]),
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Some((at, _)) = self.expiries.first() else {
                break;
            };
            if *at > now {
                break;
            }
            let Some((_, key)) = self.expiries.pop_first() else {
                break;
            };
            let h = self.hash(&key);
            if let Ok(found) = self.map.find_entry(h, |(k, _)| *k == key) {
                found.remove();
            }
            on_expired(&key);
            n += 1;
        }
        self.expired += n as u64;
        n
    }

    /// How many keys this table has removed because their deadline passed, lazily (on
    /// access) or actively ([`Table::expire_due`]); kept across [`Table::take`].
    pub fn expired_count(&self) -> u64 {
        self.expired
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.map.clear();
        self.expiries.clear();
    }

    /// Moves all contents out, leaving the table empty (for FLUSH ASYNC and SWAPDB).
    pub fn take(&mut self) -> Table {
        let mut old = std::mem::replace(self, Table::new(self.hasher));
        self.expired = std::mem::take(&mut old.expired);
        old
    }

    /// Calls `f` for every live key.
    pub fn for_each_live(&self, now: u64, mut f: impl FnMut(&[u8], &Entry)) {
        for (k, e) in self.map.iter() {
            if !e.expired(now) {
                f(k, e);
            }
        }
    }

    /// Live keys with hash in `[from, to]`, as (hash, key) sorted by hash.
    pub fn keys_in_hash_range(&self, from: u64, to: u64, now: u64) -> Vec<(u64, &[u8], &Entry)> {
        let mut out: Vec<(u64, &[u8], &Entry)> = self
            .map
            .iter()
            .filter(|(_, e)| !e.expired(now))
            .filter_map(|(k, e)| {
                let h = self.hash(k);
                (h >= from && h <= to).then_some((h, &k[..], e))
            })
            .collect();
        out.sort_unstable_by_key(|(h, _, _)| *h);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::RString;

    fn s(v: &str) -> Value {
        Value::String(RString::from_bytes(v.as_bytes()))
    }

    #[test]
    fn insert_get_remove_and_expiry_index() {
        let hs = FixedState::with_seed(7);
        let mut t = Table::new(hs);
        let h = hs.hash_one(&b"k"[..]);
        assert!(t.insert(h, b"k", s("v"), 0, 10).is_none());
        assert!(t.get(h, b"k", 10).is_some());
        assert!(t.set_expire(h, b"k", 100, 10));
        assert_eq!(t.volatile_len(), 1);
        assert!(t.get(h, b"k", 99).is_some());
        assert!(t.get(h, b"k", 100).is_none(), "expired at deadline");
        assert_eq!(t.len(), 0);
        assert_eq!(t.volatile_len(), 0);

        t.insert(h, b"k", s("v"), 50, 10);
        let old = t.insert(h, b"k", s("w"), 0, 20).unwrap();
        assert_eq!(old.expire_at(), Some(50));
        assert_eq!(t.volatile_len(), 0, "overwrite drops the old deadline");
        assert!(t.set_expire(h, b"k", 60, 20));
        assert!(t.set_expire(h, b"k", 0, 20));
        assert_eq!(t.volatile_len(), 0);
    }

    #[test]
    fn active_expiry_removes_only_due_keys() {
        let hs = FixedState::with_seed(1);
        let mut t = Table::new(hs);
        for i in 0..100u64 {
            let k = format!("k{i}");
            let h = hs.hash_one(k.as_bytes());
            t.insert(
                h,
                k.as_bytes(),
                s("v"),
                if i < 60 { 1000 + i } else { 0 },
                0,
            );
        }
        assert_eq!(t.expire_due(1029, 1000), 30);
        assert_eq!(t.len(), 70);
        assert_eq!(t.expire_due(5000, 10), 10);
        assert_eq!(t.expire_due(5000, 1000), 20);
        assert_eq!(t.len(), 40);
        assert_eq!(t.volatile_len(), 0);
        assert_eq!(t.expired_count(), 60);
    }

    #[test]
    fn expired_count_includes_lazy_expiry_and_survives_take() {
        let hs = FixedState::with_seed(3);
        let mut t = Table::new(hs);
        let h = |k: &str| hs.hash_one(k.as_bytes());
        for k in ["a", "b", "c"] {
            t.insert(h(k), k.as_bytes(), s("v"), 100, 0);
        }
        assert!(t.get(h("a"), b"a", 50).is_some());
        assert_eq!(t.expired_count(), 0);
        assert!(t.get(h("a"), b"a", 100).is_none(), "lazy expiry on read");
        assert!(
            t.remove(h("b"), b"b", 200).is_none(),
            "removing an expired key"
        );
        assert!(
            t.insert(h("c"), b"c", s("w"), 0, 200).is_none(),
            "overwriting one"
        );
        assert_eq!(t.expired_count(), 3);
        let taken = t.take();
        assert_eq!(taken.expired_count(), 0);
        assert_eq!(t.expired_count(), 3);
        assert_eq!(t.len(), 0);
    }
}
