//! One logical database's slice of a shard: a hash table plus an ordered expiry index.
//!
//! Every mutation goes through [`Table`] so that the expiry index always matches the
//! deadlines stored in entries. Deadlines are absolute nanoseconds since the Unix epoch;
//! `0` means "no expiry".

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use foldhash::fast::FixedState;
use hashbrown_buckets::HashTable;

use crate::key::ThinKey;
use crate::tags::TagIndex;
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
    /// True when the key has tags in the table's [`TagIndex`] (one byte of padding).
    tagged: bool,
    /// Redis's 8-bit logarithmic access counter (LFU eviction; padding bytes).
    lfu_count: u8,
    /// When `lfu_count` was last decremented or incremented, in minutes (low 16 bits).
    lfu_time: u16,
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

    /// Makes the entry look idle for `secs` seconds at `now` (RESTORE IDLETIME).
    pub fn set_idle(&mut self, now: u64, idle: u64) {
        self.access = secs(now).wrapping_sub(idle as u32);
    }

    pub(crate) fn expired(&self, now: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now
    }

    /// The LFU counter at `now` after the decay the idle minutes call for, without storing
    /// it (Redis's `LFUDecrAndReturn`, what OBJECT FREQ reports).
    pub fn lfu_freq(&self, now: u64) -> u8 {
        let decay = LFU.load(Relaxed) >> 32 & 0x7fff_ffff;
        self.lfu_decayed(now, decay)
    }

    fn lfu_decayed(&self, now: u64, decay_minutes: u64) -> u8 {
        if decay_minutes == 0 {
            return self.lfu_count;
        }
        let elapsed = u64::from(minutes(now).wrapping_sub(self.lfu_time));
        let periods = elapsed / decay_minutes;
        self.lfu_count.saturating_sub(periods.min(255) as u8)
    }

    /// Sets the LFU counter to `freq` as of `now` (RESTORE ... FREQ).
    pub fn set_lfu_freq(&mut self, freq: u8, now: u64) {
        self.lfu_count = freq;
        self.lfu_time = minutes(now);
    }

    /// One access under an LFU policy: decay, then a logarithmic increment (Redis's
    /// `updateLFU`). `params` is the packed [`LFU`] word.
    fn lfu_touch(&mut self, now: u64, params: u64) {
        let factor = params & 0xffff_ffff;
        let decay = params >> 32 & 0x7fff_ffff;
        let mut c = self.lfu_decayed(now, decay);
        if c < 255 {
            let base = u64::from(c.saturating_sub(LFU_INIT_VAL));
            // p = 1 / (base * factor + 1), drawn with a 53-bit uniform.
            let r = (rand::random::<u64>() >> 11) as f64 / (1u64 << 53) as f64;
            if r < 1.0 / (base.saturating_mul(factor) as f64 + 1.0) {
                c += 1;
            }
        }
        self.lfu_count = c;
        self.lfu_time = minutes(now);
    }
}

/// The hash the bucket table sees for a key of keyspace hash `h`. The keyspace picks a
/// key's shard with the top bits of `h`, and the table's 7-bit control tags are the top
/// bits of its hash too: fed `h` itself, every key of a shard carried the same tag, so a
/// lookup compared the key of every full slot in its group. Multiplying by an odd
/// constant (a bijection) brings the low, shard-independent bits up into the tag.
#[inline]
fn spread(h: u64) -> u64 {
    h.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Bytes of one bucket of a table's map.
const SLOT: usize = std::mem::size_of::<(ThinKey, Entry)>();

/// The addresses of the control group and the first bucket a lookup of hash `h` probes,
/// in a map whose [`Table::bucket_hint`] is `(end, mask)`.
pub(crate) fn bucket_lines(end: usize, mask: usize, h: u64) -> (usize, usize) {
    let pos = (spread(h) as usize) & mask;
    (
        end.wrapping_add(pos),
        end.wrapping_sub((pos + 1).wrapping_mul(SLOT)),
    )
}

fn secs(now_ns: u64) -> u32 {
    (now_ns / 1_000_000_000) as u32
}

/// Minutes since the epoch, low 16 bits (Redis's `LFUGetTimeInMinutes`).
fn minutes(now_ns: u64) -> u16 {
    (now_ns / 60_000_000_000) as u16
}

/// The LFU counter of a new key (Redis's `LFU_INIT_VAL`), so it is not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

/// LFU tracking: 0 when off; else bit 63 set, `lfu-decay-time` in bits 32..63 and
/// `lfu-log-factor` in bits 0..32. Read (one relaxed load) on every touching lookup.
static LFU: AtomicU64 = AtomicU64::new(0);
const LFU_ON: u64 = 1 << 63;

/// Turns LFU counting on lookups on (`Some((lfu-log-factor, lfu-decay-time))`, an LFU
/// maxmemory policy) or off. The decay time is also what [`Entry::lfu_freq`] applies.
pub fn set_lfu(params: Option<(u32, u32)>) {
    let w = match params {
        Some((factor, decay)) => LFU_ON | u64::from(decay & 0x7fff_ffff) << 32 | u64::from(factor),
        None => 0,
    };
    LFU.store(w, Relaxed);
}

/// One database's keys within one shard.
pub struct Table {
    /// Keys behind thin pointers: a slot is 48 bytes (key 8, entry 40), not 56.
    map: HashTable<(ThinKey, Entry)>,
    expiries: BTreeSet<(u64, ThinKey)>,
    hasher: FixedState,
    /// Keys removed because their deadline passed (lazily or actively), for INFO.
    expired: u64,
    /// Key tags, beside the map so untagged keys pay nothing ([`crate::tags`]).
    tags: Option<Box<TagIndex>>,
}

impl Table {
    /// An empty table hashing with `hasher` (the keyspace's, so hashes can be reused).
    pub fn new(hasher: FixedState) -> Self {
        Table {
            map: HashTable::new(),
            expiries: BTreeSet::new(),
            hasher,
            expired: 0,
            tags: None,
        }
    }

    /// Number of keys, including expired keys not yet reaped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The address of the key map's header (its control pointer and bucket mask), which
    /// every lookup reads first: [`crate::Keyspace::prefetch`] loads it ahead.
    pub(crate) fn header_addr(&self) -> usize {
        &self.map as *const HashTable<(ThinKey, Entry)> as usize
    }

    /// Where the value of `key` (hash `h`) keeps its heap bytes ([`Value::heap_span`]),
    /// expired or not, without touching the key.
    #[inline]
    pub(crate) fn value_span(&self, h: u64, key: &[u8]) -> Option<(usize, usize)> {
        let (_, e) = self.map.find(spread(h), |(k, _)| &k[..] == key)?;
        e.value.heap_span()
    }

    /// Number of buckets of the key map (a power of two, or 0).
    pub(crate) fn num_buckets(&self) -> usize {
        self.map.num_buckets()
    }

    /// Where the map's buckets end and its control bytes begin (hashbrown keeps bucket `i`
    /// just below the end at `end - (i + 1) * SLOT`, the control bytes from `end` up), and
    /// its bucket mask: what [`bucket_lines`] needs to prefetch a lookup without the lock.
    /// `None` while the map is empty (a recomputation finds an occupied bucket to measure
    /// from; `tests::bucket_hint_matches_the_buckets` checks the layout).
    pub(crate) fn bucket_hint(&self) -> Option<(usize, usize)> {
        let i = self.map.iter_buckets().next()?;
        let at = self.map.get_bucket(i)? as *const (ThinKey, Entry) as usize;
        Some((at + (i + 1) * SLOT, self.map.num_buckets() - 1))
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
        // Stored only when it changes (once a second at most): a hot key read or updated
        // in place from several threads then keeps its slot's cache line shared, instead
        // of pulling it over from the core that wrote it last on every access.
        let s = secs(now);
        if e.access != s {
            e.access = s;
        }
        let lfu = LFU.load(Relaxed);
        if lfu != 0 {
            e.lfu_touch(now, lfu);
        }
        Some(e)
    }

    /// Like [`Table::get`] but leaves the access time alone (TYPE, TTL, OBJECT ...).
    pub fn get_no_touch(&mut self, h: u64, key: &[u8], now: u64) -> Option<&mut Entry> {
        let occ = self
            .map
            .find_entry(spread(h), |(k, _)| &k[..] == key)
            .ok()?;
        if occ.get().1.expired(now) {
            let ((k, e), _) = occ.remove();
            if e.tagged {
                drop_tags(&mut self.tags, &k);
            }
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
    /// entry; returns the old live entry. Overwriting a live key keeps its tags.
    pub fn insert(
        &mut self,
        h: u64,
        key: &[u8],
        value: Value,
        expire_at: u64,
        now: u64,
    ) -> Option<Entry> {
        let old = self.unlink(h, key);
        let mut tagged = false;
        let (mut lfu_count, mut lfu_time) = (LFU_INIT_VAL, minutes(now));
        let old = match old {
            Some(e) if e.expired(now) => {
                if e.tagged {
                    self.drop_tags(key);
                }
                self.expired += 1;
                None
            }
            Some(e) => {
                tagged = e.tagged;
                // An overwrite keeps the access frequency, as Redis's dbSetValue.
                (lfu_count, lfu_time) = (e.lfu_count, e.lfu_time);
                Some(e)
            }
            None => None,
        };
        if expire_at != 0 {
            self.expiries.insert((expire_at, key.into()));
        }
        let mut entry = Entry {
            value,
            expire_at,
            access: secs(now),
            tagged,
            lfu_count,
            lfu_time,
        };
        let lfu = LFU.load(Relaxed);
        if lfu != 0 && old.is_some() {
            entry.lfu_touch(now, lfu);
        }
        let hasher = self.hasher;
        self.map
            .insert_unique(spread(h), (key.into(), entry), |(k, _)| {
                spread(hasher.hash_one(&k[..]))
            });
        old
    }

    /// Removes `key` (and its tags); returns its entry if it was live.
    pub fn remove(&mut self, h: u64, key: &[u8], now: u64) -> Option<Entry> {
        let e = self.unlink(h, key)?;
        if e.tagged {
            self.drop_tags(key);
        }
        if e.expired(now) {
            self.expired += 1;
            return None;
        }
        Some(e)
    }

    /// Takes `key`'s entry out of the map and the expiry index, leaving its tags.
    fn unlink(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
        let found = self
            .map
            .find_entry(spread(h), |(k, _)| &k[..] == key)
            .ok()?;
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
            if let Ok(found) = self.map.find_entry(spread(h), |(k, _)| *k == key) {
                let ((_, e), _) = found.remove();
                if e.tagged {
                    self.drop_tags(&key);
                }
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

    /// Removes every key (and every tag).
    pub fn clear(&mut self) {
        self.map.clear();
        self.expiries.clear();
        self.tags = None;
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

/// Eviction support: random samples of keys and the soonest deadlines, for the node's
/// approximated LRU / LFU / TTL / random eviction (Redis's `evictionPoolPopulate`).
impl Table {
    /// Calls `f` with up to `n` keys (with their entries) found from a random bucket
    /// onwards: a random sample, as Redis's `dictGetSomeKeys`. Keys whose deadline passed
    /// but are not reaped yet may be among them. Returns how many were visited.
    pub fn sample(&self, n: usize, f: &mut dyn FnMut(&[u8], &Entry)) -> usize {
        let len = self.map.len();
        if len == 0 || n == 0 {
            return 0;
        }
        let buckets = self.map.num_buckets();
        let want = n.min(len);
        if len.saturating_mul(8) < buckets {
            // Sparse (hashbrown does not shrink): probing would mostly hit empty buckets.
            let skip = (rand::random::<u64>() % len as u64) as usize;
            let mut seen = 0;
            for (k, e) in self.map.iter().skip(skip).chain(self.map.iter()).take(want) {
                f(k, e);
                seen += 1;
            }
            return seen;
        }
        let mut i = (rand::random::<u64>() % buckets as u64) as usize;
        let mut seen = 0;
        for _ in 0..buckets {
            if let Some((k, e)) = self.map.get_bucket(i) {
                f(k, e);
                seen += 1;
                if seen == want {
                    break;
                }
            }
            i = (i + 1) % buckets;
        }
        seen
    }

    /// As [`Table::sample`] among the keys with a deadline (volatile-* policies): up to
    /// `n` keys at random points of the expiry index.
    pub fn sample_volatile(&self, n: usize, f: &mut dyn FnMut(&[u8], &Entry)) -> usize {
        let (Some(lo), Some(hi)) = (self.expiries.first(), self.expiries.last()) else {
            return 0;
        };
        let (lo, span) = (lo.0, hi.0 - lo.0);
        let mut seen = 0;
        for _ in 0..n.min(self.expiries.len()) {
            let at = lo + rand::random::<u64>() % span.saturating_add(1).max(1);
            let Some((_, key)) = self.expiries.range((at, ThinKey::default())..).next() else {
                continue;
            };
            if let Some((k, e)) = self.map.find(spread(self.hash(key)), |(k, _)| k == key) {
                f(k, e);
                seen += 1;
            }
        }
        seen
    }

    /// Calls `f` with the (up to) `n` keys whose deadlines come first (volatile-ttl).
    pub fn soonest_expiring(&self, n: usize, f: &mut dyn FnMut(&[u8], &Entry)) -> usize {
        let mut seen = 0;
        for (_, key) in self.expiries.iter().take(n) {
            if let Some((k, e)) = self.map.find(spread(self.hash(key)), |(k, _)| k == key) {
                f(k, e);
                seen += 1;
            }
        }
        seen
    }

    /// Buckets of the key table and the bytes it allocated (MEMORY STATS, bytes per key).
    pub fn table_bytes(&self) -> usize {
        self.map.allocation_size()
    }
}

/// Drops every tag of `key` from `tags`, freeing the index when it empties.
fn drop_tags(tags: &mut Option<Box<TagIndex>>, key: &[u8]) {
    if let Some(ix) = tags.as_mut() {
        ix.remove_key(key);
        if ix.is_empty() {
            *tags = None;
        }
    }
}

/// Key tags ([`crate::tags`]): the index lives beside the map; `Entry::tagged` marks the
/// keys it holds so removals of untagged keys never look at it.
impl Table {
    /// Drops every tag of `key` from the index (the entry is gone or being replaced).
    fn drop_tags(&mut self, key: &[u8]) {
        drop_tags(&mut self.tags, key);
    }

    /// True when `key` is in the map and its deadline has not passed (no lazy removal).
    fn is_live(&self, key: &[u8], now: u64) -> bool {
        self.map
            .find(spread(self.hash(key)), |(k, _)| &k[..] == key)
            .is_some_and(|(_, e)| !e.expired(now))
    }

    /// The entry of `key`, live or not, without touching it.
    fn entry_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        self.map
            .find_mut(spread(h), |(k, _)| &k[..] == key)
            .map(|(_, e)| e)
    }

    /// The tags of `key`, sorted bytewise (empty when it has none). The caller knows the
    /// key is live (e.g. inside [`Table::for_each_live`], for snapshots).
    pub fn tags_of(&self, key: &[u8]) -> &[Box<[u8]>] {
        self.tags.as_ref().map_or(&[], |ix| ix.tags_of(key))
    }

    /// Replaces the tags of `key` by `tags` (none clears them): a snapshot load attaching
    /// the saved tags, or RENAME/MOVE re-attaching [`Table::take_tags`]. False (nothing
    /// stored) when the table has no entry for `key`.
    pub fn set_tags<T: Into<Box<[u8]>>>(
        &mut self,
        key: &[u8],
        tags: impl IntoIterator<Item = T>,
    ) -> bool {
        let h = self.hash(key);
        let Some(e) = self.entry_mut(h, key) else {
            return false;
        };
        let was = std::mem::replace(&mut e.tagged, false);
        if was {
            self.drop_tags(key);
        }
        let mut any = false;
        for t in tags {
            let t: Box<[u8]> = t.into();
            any |= self.tags.get_or_insert_with(Box::default).add(key, &t);
        }
        if any {
            if let Some(e) = self.entry_mut(h, key) {
                e.tagged = true;
            }
        }
        true
    }

    /// Adds `tags` to the live `key` (hash `h`); returns how many it did not have yet, or
    /// `None` when there is no such key (TAG.SET).
    pub fn add_tags<'t>(
        &mut self,
        h: u64,
        key: &[u8],
        tags: impl IntoIterator<Item = &'t [u8]>,
        now: u64,
    ) -> Option<usize> {
        self.get_no_touch(h, key, now)?;
        let ix = self.tags.get_or_insert_with(Box::default);
        let added = tags.into_iter().filter(|t| ix.add(key, t)).count();
        let has = !ix.tags_of(key).is_empty();
        if ix.is_empty() {
            self.tags = None;
        }
        if let Some(e) = self.entry_mut(h, key) {
            e.tagged = has;
        }
        Some(added)
    }

    /// Removes `tags` from the live `key` (hash `h`); returns how many it had (TAG.DEL).
    pub fn remove_tags<'t>(
        &mut self,
        h: u64,
        key: &[u8],
        tags: impl IntoIterator<Item = &'t [u8]>,
        now: u64,
    ) -> usize {
        match self.get_no_touch(h, key, now) {
            Some(e) if e.tagged => {}
            _ => return 0,
        }
        let Some(ix) = self.tags.as_mut() else {
            return 0;
        };
        let removed = tags.into_iter().filter(|t| ix.remove(key, t)).count();
        let has = !ix.tags_of(key).is_empty();
        if ix.is_empty() {
            self.tags = None;
        }
        if let Some(e) = self.entry_mut(h, key) {
            e.tagged = has;
        }
        removed
    }

    /// Takes every tag off `key` (hash `h`), which stays, and returns them, so that RENAME
    /// and MOVE can re-attach them to the key's new place with [`Table::set_tags`].
    pub fn take_tags(&mut self, h: u64, key: &[u8]) -> Vec<Box<[u8]>> {
        match self.entry_mut(h, key) {
            Some(e) if e.tagged => e.tagged = false,
            _ => return Vec::new(),
        }
        let Some(ix) = self.tags.as_mut() else {
            return Vec::new();
        };
        let tags = ix.remove_key(key);
        if ix.is_empty() {
            self.tags = None;
        }
        tags
    }

    /// The live keys carrying `tag`.
    pub fn tagged_keys<'a>(&'a self, tag: &'a [u8], now: u64) -> impl Iterator<Item = &'a [u8]> {
        self.tags
            .iter()
            .flat_map(move |ix| ix.keys_with(tag))
            .filter(move |k| self.is_live(k, now))
    }

    /// The tags at least one live key carries, each once.
    pub fn tag_names(&self, now: u64) -> impl Iterator<Item = &[u8]> {
        self.tags
            .iter()
            .flat_map(|ix| ix.tags())
            .filter_map(move |(tag, mut keys)| keys.any(|k| self.is_live(k, now)).then_some(tag))
    }

    /// Removes every live key carrying `tag` (and its tags); returns the keys with their
    /// entries (TAG.DELKEYS).
    pub fn remove_tagged(&mut self, tag: &[u8], now: u64) -> Vec<(Vec<u8>, Entry)> {
        let keys: Vec<Vec<u8>> = self.tagged_keys(tag, now).map(<[u8]>::to_vec).collect();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let h = self.hash(&k);
            if let Some(e) = self.remove(h, &k, now) {
                out.push((k, e));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::RString;
    use std::collections::HashSet;

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

    fn tags(t: &Table, k: &[u8]) -> Vec<Vec<u8>> {
        t.tags_of(k).iter().map(|t| t.to_vec()).collect()
    }

    #[test]
    fn entry_stays_40_bytes_with_the_tag_flag() {
        assert!(std::mem::size_of::<Entry>() <= 40);
        // A key table slot: key (16 bytes, inline up to 15) + entry (the memory per key
        // depends on it).
        assert!(std::mem::size_of::<(ThinKey, Entry)>() <= 56);
    }

    #[test]
    fn bucket_hint_matches_the_buckets() {
        let hs = FixedState::with_seed(7);
        let mut t = Table::new(hs);
        assert_eq!(t.bucket_hint(), None);
        for n in 0..5000u32 {
            let k = format!("k{n}");
            let h = hs.hash_one(k.as_bytes());
            t.insert(h, k.as_bytes(), s("v"), 0, 1);
            if n % 97 != 0 {
                continue;
            }
            // The bucket a lookup probes first: where hashbrown keeps it.
            let (end, mask) = t.bucket_hint().unwrap();
            assert_eq!(mask + 1, t.num_buckets());
            let idx = t
                .map
                .find_bucket_index(spread(h), |(kk, _)| &kk[..] == k.as_bytes());
            let idx = idx.unwrap();
            let at = t.map.get_bucket(idx).unwrap() as *const (ThinKey, Entry) as usize;
            assert_eq!(at, end - (idx + 1) * SLOT);
            let (ctrl, first) = bucket_lines(end, mask, h);
            assert_eq!(first, end - (((spread(h) as usize) & mask) + 1) * SLOT);
            assert_eq!(ctrl, end + ((spread(h) as usize) & mask));
        }
    }

    #[test]
    fn tags_follow_the_key_through_removals() {
        let hs = FixedState::with_seed(5);
        let mut t = Table::new(hs);
        let h = |k: &str| hs.hash_one(k.as_bytes());
        for k in ["del", "lazy", "active", "over", "expover", "keep"] {
            t.insert(h(k), k.as_bytes(), s("v"), 0, 0);
            assert_eq!(
                t.add_tags(h(k), k.as_bytes(), [&b"x"[..], b"y"], 0),
                Some(2)
            );
        }
        assert_eq!(t.add_tags(h("nokey"), b"nokey", [&b"x"[..]], 0), None);
        assert_eq!(t.add_tags(h("del"), b"del", [&b"x"[..], b"z"], 0), Some(1));
        assert_eq!(
            tags(&t, b"del"),
            [b"x".to_vec(), b"y".to_vec(), b"z".to_vec()]
        );

        // DEL.
        assert!(t.remove(h("del"), b"del", 0).is_some());
        assert!(t.tags_of(b"del").is_empty());
        // Lazy expiry.
        t.set_expire(h("lazy"), b"lazy", 100, 0);
        assert!(t.get(h("lazy"), b"lazy", 100).is_none());
        assert!(t.tags_of(b"lazy").is_empty());
        // Active expiry.
        t.set_expire(h("active"), b"active", 100, 0);
        assert_eq!(
            t.tagged_keys(b"x", 100).count(),
            3,
            "an expired key is not live"
        );
        assert_eq!(t.expire_due(100, 10), 1);
        assert!(t.tags_of(b"active").is_empty());
        // Overwriting a live key keeps its tags, one whose deadline passed does not.
        t.insert(h("over"), b"over", s("w"), 0, 100);
        assert_eq!(tags(&t, b"over"), [b"x".to_vec(), b"y".to_vec()]);
        t.set_expire(h("expover"), b"expover", 150, 100);
        t.insert(h("expover"), b"expover", s("w"), 0, 200);
        assert!(t.tags_of(b"expover").is_empty());
        let mut live: Vec<&[u8]> = t.tagged_keys(b"y", 200).collect();
        live.sort();
        assert_eq!(live, [&b"keep"[..], b"over"]);
        assert_eq!(t.tag_names(200).count(), 2);

        assert_eq!(t.remove_tags(h("keep"), b"keep", [&b"y"[..], b"q"], 200), 1);
        assert_eq!(t.remove_tags(h("nokey"), b"nokey", [&b"y"[..]], 200), 0);
        assert_eq!(tags(&t, b"keep"), [b"x".to_vec()]);

        // FLUSH.
        t.clear();
        assert!(t.tags_of(b"keep").is_empty());
        assert_eq!(t.tag_names(200).count(), 0);
        assert!(t.tags.is_none());
    }

    #[test]
    fn rename_and_take_move_tags() {
        let hs = FixedState::with_seed(9);
        let mut t = Table::new(hs);
        let h = |k: &str| hs.hash_one(k.as_bytes());
        t.insert(h("a"), b"a", s("v"), 0, 0);
        t.insert(h("b"), b"b", s("v"), 0, 0);
        t.add_tags(h("a"), b"a", [&b"t1"[..]], 0);
        t.add_tags(h("b"), b"b", [&b"t2"[..]], 0);
        // RENAME a b: take a's tags, remove a, store b, replace b's tags.
        let moved = t.take_tags(h("a"), b"a");
        let e = t.remove(h("a"), b"a", 0).unwrap();
        t.insert(h("b"), b"b", e.value, 0, 0);
        assert!(t.set_tags(b"b", moved));
        assert_eq!(tags(&t, b"b"), [b"t1".to_vec()]);
        assert_eq!(t.tagged_keys(b"t2", 0).count(), 0);
        assert_eq!(t.tagged_keys(b"t1", 0).collect::<Vec<_>>(), [&b"b"[..]]);
        assert!(!t.set_tags(b"nokey", vec![b"t".to_vec()]));
        assert!(t.set_tags(b"b", Vec::<Vec<u8>>::new()));
        assert!(t.tags.is_none());

        // take() carries the tags along (FLUSH ASYNC, SWAPDB).
        t.add_tags(h("b"), b"b", [&b"t3"[..]], 0);
        let taken = t.take();
        assert_eq!(tags(&taken, b"b"), [b"t3".to_vec()]);
        assert!(t.tags_of(b"b").is_empty());

        let mut t = taken;
        let gone = t.remove_tagged(b"t3", 0);
        assert_eq!(gone.len(), 1);
        assert!(t.is_empty() && t.tags.is_none());
    }

    #[test]
    fn sampling_finds_keys_and_soonest_deadlines() {
        let hs = FixedState::with_seed(11);
        let mut t = Table::new(hs);
        let mut n = 0;
        assert_eq!(t.sample(5, &mut |_, _| n += 1), 0);
        for i in 0..1000u64 {
            let k = format!("k{i}");
            let at = if i % 10 == 0 { 1_000 + i } else { 0 };
            t.insert(hs.hash_one(k.as_bytes()), k.as_bytes(), s("v"), at, 0);
        }
        let mut keys = Vec::new();
        assert_eq!(t.sample(5, &mut |k, _| keys.push(k.to_vec())), 5);
        let mut vol = 0;
        assert_eq!(
            t.sample_volatile(5, &mut |_, e| vol += u32::from(e.expire_at().is_some())),
            5
        );
        assert_eq!(vol, 5, "volatile samples have deadlines");
        let mut first = Vec::new();
        t.soonest_expiring(3, &mut |k, _| first.push(k.to_vec()));
        assert_eq!(first, [b"k0".to_vec(), b"k10".to_vec(), b"k20".to_vec()]);
        // A sparse table (after mass removal) is still sampled.
        for i in 1..1000u64 {
            let k = format!("k{i}");
            t.remove(hs.hash_one(k.as_bytes()), k.as_bytes(), 0);
        }
        let mut left = Vec::new();
        assert_eq!(t.sample(5, &mut |k, _| left.push(k.to_vec())), 1);
        assert_eq!(left, [b"k0".to_vec()]);
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays() {
        let hs = FixedState::with_seed(13);
        let mut t = Table::new(hs);
        let h = hs.hash_one(&b"k"[..]);
        t.insert(h, b"k", s("v"), 0, 0);
        assert_eq!(
            t.get_no_touch(h, b"k", 0).unwrap().lfu_freq(0),
            LFU_INIT_VAL
        );
        // Factor 0: every access counts.
        set_lfu(Some((0, 1)));
        for _ in 0..10 {
            t.get(h, b"k", 0);
        }
        let e = t.get_no_touch(h, b"k", 0).unwrap();
        assert_eq!(e.lfu_freq(0), LFU_INIT_VAL + 10);
        // One decay period per minute idle.
        assert_eq!(e.lfu_freq(3 * 60 * 1_000_000_000), LFU_INIT_VAL + 7);
        e.set_lfu_freq(200, 0);
        assert_eq!(e.lfu_freq(0), 200);
        // An overwrite keeps (and counts as an access to) the frequency.
        t.insert(h, b"k", s("w"), 0, 0);
        assert_eq!(t.get_no_touch(h, b"k", 0).unwrap().lfu_freq(0), 201);
        set_lfu(None);
        t.get(h, b"k", 0);
        assert_eq!(t.get_no_touch(h, b"k", 0).unwrap().lfu_freq(0), 201);
    }

    #[test]
    fn keys_of_one_shard_get_spread_control_tags() {
        // 1,024 shards: every key of a shard has the same top 10 bits of its hash.
        let hs = FixedState::with_seed(17);
        let one_shard: Vec<u64> = (0..400_000)
            .map(|i| hs.hash_one(format!("key:{i}").as_bytes()))
            .filter(|h| h >> 54 == 3)
            .collect();
        assert!(one_shard.len() > 200);
        let tags: HashSet<u64> = one_shard.iter().map(|&h| spread(h) >> 57).collect();
        assert!(tags.len() > 100, "{} distinct tags of 128", tags.len());
        let low: HashSet<u64> = one_shard.iter().map(|&h| spread(h) & 1023).collect();
        assert!(low.len() > 100, "bucket index bits vary too");
    }
}
