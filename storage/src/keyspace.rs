//! The sharded keyspace: many independently locked shards, each holding every database's
//! keys whose hash falls in the shard's range.
//!
//! A key's 64-bit hash picks its shard by its top bits, so iterating shards in order and
//! each shard's keys by hash visits the whole keyspace in hash order. SCAN cursors are
//! therefore plain hash values: stable across table growth, shard locks and SWAPDB, and
//! every key present for a whole iteration is returned.

use std::cell::Cell;
use std::hash::BuildHasher;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

use foldhash::fast::FixedState;
use parking_lot::{Mutex, MutexGuard};

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

use crate::events::{self, KeyEvent, RECORD_EXPIRED, RECORD_NEW};
use crate::table::{Entry, Table};
use crate::value::Value;

/// A cache-line aligned wrapper so neighbouring shard locks do not share a line.
#[repr(align(128))]
struct Padded<T>(T);

/// One lock stripe: one table per logical database.
pub struct Shard {
    dbs: Vec<Table>,
}

impl Shard {
    /// The table of database `db` (panics-free: callers validate `db` at SELECT time).
    pub fn table(&mut self, db: usize) -> &mut Table {
        let last = self.dbs.len() - 1;
        &mut self.dbs[db.min(last)]
    }

    /// Read access to the table of database `db`.
    pub fn table_ref(&self, db: usize) -> &Table {
        &self.dbs[db.min(self.dbs.len() - 1)]
    }

    /// Swaps the contents of two databases in this shard.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b);
    }
}

/// What [`Keyspace::prefetch`] needs of one table without the shard lock: where its
/// buckets are (the end of them, a 48-bit address, with log2 of its bucket count in the top
/// 16 bits, in one relaxed atomic, so a stale hint only makes a prefetch miss; 0 while
/// unknown), and where the table itself is (its map's header, read by every lookup: a
/// shard's tables live in a buffer of their own, apart from the lock's line).
#[derive(Default)]
struct BucketHint(AtomicU64, usize);

impl BucketHint {
    fn get(&self) -> Option<(usize, usize)> {
        let v = self.0.load(Relaxed);
        let end = (v & ((1 << 48) - 1)) as usize;
        (end != 0).then(|| (end, (1usize << (v >> 48).min(47)) - 1))
    }

    /// Publishes `hint` (`None`: unknown). Hints that do not pack are not published.
    fn set(&self, hint: Option<(usize, usize)>) {
        let v = match hint {
            Some((end, mask)) if end >> 48 == 0 && mask.wrapping_add(1).is_power_of_two() => {
                end as u64 | u64::from((mask + 1).trailing_zeros()) << 48
            }
            _ => 0,
        };
        self.0.store(v, Relaxed);
    }
}

/// The whole keyspace of one node.
pub struct Keyspace {
    shards: Box<[Padded<Mutex<Shard>>]>,
    /// One [`BucketHint`] per database and shard (`db * shards + shard`: database 0's
    /// hints, the usual ones, share few cache lines).
    hints: Box<[BucketHint]>,
    shift: u32,
    hasher: FixedState,
    dbs: usize,
    /// Which key events guards record ([`events`]); 0 = none.
    recording: AtomicU8,
}

/// One page of a SCAN-like iteration.
#[derive(Debug, Default)]
pub struct ScanPage {
    /// Cursor to continue from; 0 when the iteration is complete.
    pub cursor: u64,
    /// Keys visited in this page that passed the filter.
    pub keys: Vec<Vec<u8>>,
}

impl Keyspace {
    /// A keyspace of `dbs` databases over `shards` lock stripes (rounded up to a power of two).
    pub fn new(dbs: usize, shards: usize) -> Self {
        let shards = shards.max(1).next_power_of_two();
        let hasher = FixedState::with_seed(rand::random());
        let shift = if shards == 1 {
            64
        } else {
            64 - shards.trailing_zeros()
        };
        let dbs = dbs.max(1);
        let shards: Box<[Padded<Mutex<Shard>>]> = (0..shards)
            .map(|_| {
                Padded(Mutex::new(Shard {
                    dbs: (0..dbs).map(|_| Table::new(hasher)).collect(),
                }))
            })
            .collect();
        // A shard's `dbs` never grows or shrinks (tables are swapped and replaced in place),
        // so the addresses stay true for the keyspace's life.
        let hints = (0..dbs)
            .flat_map(|db| {
                shards.iter().map(move |s| {
                    let table = s.0.lock().table_ref(db).header_addr();
                    BucketHint(AtomicU64::new(0), table)
                })
            })
            .collect();
        Keyspace {
            shards,
            hints,
            shift,
            hasher,
            dbs,
            recording: AtomicU8::new(0),
        }
    }

    /// Chooses which key events guards taken from now on record (bits of
    /// [`events::RECORD_EXPIRED`] and [`events::RECORD_NEW`]; 0 = none).
    pub fn set_recording(&self, what: u8) {
        self.recording.store(what, Relaxed);
    }

    /// Number of logical databases.
    pub fn db_count(&self) -> usize {
        self.dbs
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The hash of `key` (also picks its shard).
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The index of the shard holding `key` (AOF rewrite bookkeeping).
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_index(self.hash(key))
    }

    #[inline]
    fn shard_index(&self, h: u64) -> usize {
        if self.shift >= 64 {
            0
        } else {
            (h >> self.shift) as usize
        }
    }

    /// Asks the CPU to start loading what a lock and lookup of `key` in `db` will touch
    /// (the shard's lock line, for writing, then the table's header, its first control
    /// group and bucket), without taking the lock: a pipelined batch calls it a few commands ahead,
    /// so the cache misses of its commands overlap instead of following one another.
    /// Returns the key's hash, for [`Keyspace::prefetch_value`].
    #[inline]
    pub fn prefetch(&self, db: usize, key: &[u8]) -> u64 {
        let h = self.hash(key);
        let i = self.shard_index(h);
        prefetch_line(&self.shards[i] as *const _ as usize, true);
        let hint = self.hint(i, db);
        prefetch_line(hint.1, false);
        if let Some((end, mask)) = hint.get() {
            let (ctrl, bucket) = crate::table::bucket_lines(end, mask, h);
            prefetch_line(ctrl, false);
            prefetch_line(bucket, false);
        }
        h
    }

    /// The second prefetch stage, a command or two after [`Keyspace::prefetch`] (whose
    /// lines have arrived by then): when the shard's lock is free, looks `key` up, without
    /// touching it, and asks the CPU to start loading the first bytes of its value's heap
    /// data (up to 256 of a string's, a collection's header), the miss a lookup alone
    /// leaves for the command. A busy lock (another worker's, or this thread's parked
    /// one) skips it: nothing waits. `h` is the key's hash, as [`Keyspace::prefetch`]
    /// returned it (another only finds nothing).
    pub fn prefetch_value(&self, db: usize, key: &[u8], h: u64) {
        let i = self.shard_index(h);
        let Some(shard) = self.shards[i].0.try_lock() else {
            return;
        };
        let span = shard.table_ref(db).value_span(h, key);
        drop(shard);
        if let Some((at, len)) = span {
            let end = at.saturating_add(len.min(256));
            let mut line = at & !63;
            while line < end {
                prefetch_line(line, false);
                line += 64;
            }
        }
    }

    /// Republishes the [`BucketHint`] of `db` in shard `i` after its map may have been
    /// reallocated (called under the shard's lock, with its table).
    #[inline]
    fn publish_hint(&self, i: usize, db: usize, t: &Table) {
        let hint = self.hint(i, db);
        if hint
            .get()
            .is_some_and(|(_, mask)| mask + 1 == t.num_buckets())
        {
            return;
        }
        hint.set(t.bucket_hint());
    }

    /// The [`BucketHint`] of database `db` in shard `i`.
    #[inline]
    fn hint(&self, i: usize, db: usize) -> &BucketHint {
        &self.hints[db.min(self.dbs - 1) * self.shards.len() + i]
    }

    /// Locks the shard of `key` in database `db`.
    pub fn lock<'a, 'k>(&'a self, db: usize, key: &'k [u8], now: u64) -> KeyGuard<'a, 'k> {
        let hash = self.hash(key);
        let idx = self.shard_index(hash);
        KeyGuard {
            ks: self,
            idx,
            shard: ShardLock {
                guard: ManuallyDrop::new(self.shards[idx].0.lock()),
                park: None,
            },
            db,
            hash,
            key,
            now,
            rec: self.recording.load(Relaxed),
        }
    }

    /// As [`Keyspace::lock`], taking over the shard `park` keeps locked when it is the
    /// key's (no atomic operation at all) and releasing it otherwise; when the guard is
    /// dropped its shard stays locked, kept by `park` for the next command.
    pub fn lock_parked<'a, 'k>(
        &'a self,
        park: &'a Parked<'a>,
        db: usize,
        key: &'k [u8],
        now: u64,
    ) -> KeyGuard<'a, 'k> {
        debug_assert!(std::ptr::eq(park.ks, self), "a Parked of another keyspace");
        let hash = self.hash(key);
        let i = self.shard_index(hash);
        let m = &self.shards[i].0;
        let guard = if park.shard.get() == i {
            park.shard.set(NONE);
            // SAFETY: `park` held shard `i` locked: a guard of this thread was dropped
            // without unlocking it (`ShardLock::drop`) and nothing unlocked it since
            // (`Parked::release` clears the index). Its ownership passes to this guard.
            unsafe { m.make_guard_unchecked() }
        } else {
            park.release();
            m.lock()
        };
        KeyGuard {
            ks: self,
            idx: i,
            shard: ShardLock {
                guard: ManuallyDrop::new(guard),
                park: Some((park, i)),
            },
            db,
            hash,
            key,
            now,
            rec: self.recording.load(Relaxed),
        }
    }

    /// Locks every shard holding one of `keys`, in ascending shard order (deadlock-free).
    pub fn lock_keys<'a, 'k>(
        &'a self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        now: u64,
    ) -> MultiGuard<'a> {
        let mut idx: Vec<usize> = keys
            .into_iter()
            .map(|k| self.shard_index(self.hash(k)))
            .collect();
        idx.sort_unstable();
        idx.dedup();
        self.lock_indices(idx, now)
    }

    /// Locks every shard, in ascending order.
    pub fn lock_all(&self, now: u64) -> MultiGuard<'_> {
        self.lock_indices((0..self.shards.len()).collect(), now)
    }

    fn lock_indices(&self, idx: Vec<usize>, now: u64) -> MultiGuard<'_> {
        let guards = idx.iter().map(|&i| self.shards[i].0.lock()).collect();
        MultiGuard {
            ks: self,
            idx,
            guards,
            now,
            rec: self.recording.load(Relaxed),
        }
    }

    /// Runs `f` on shard `i` under its lock (snapshots visit the shards one at a time, so
    /// no lock is held for long and commands keep running meanwhile).
    pub fn with_shard<R>(&self, i: usize, f: impl FnOnce(&Shard) -> R) -> R {
        f(&self.shards[i].0.lock())
    }

    /// Runs `f` on the table of `db` in shard `i` under the shard's lock (tag commands
    /// visit the shards one at a time).
    pub fn with_table<R>(&self, i: usize, db: usize, f: impl FnOnce(&mut Table) -> R) -> R {
        f(self.shards[i].0.lock().table(db))
    }

    /// Number of keys in `db` (may include expired keys not yet reaped).
    pub fn db_size(&self, db: usize) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().table_ref(db).len())
            .sum()
    }

    /// (keys, volatile keys, average ttl in ms) for `db`, as INFO keyspace reports.
    pub fn db_stats(&self, db: usize, now: u64) -> (usize, usize, u64) {
        let (mut keys, mut vol, mut sum, mut n) = (0, 0, 0u128, 0usize);
        for s in self.shards.iter() {
            let g = s.0.lock();
            let t = g.table_ref(db);
            keys += t.len();
            vol += t.volatile_len();
            let (s, c) = t.ttl_sample(now, 16);
            sum += s;
            n += c;
        }
        let avg = if n == 0 {
            0
        } else {
            (sum / n as u128 / 1_000_000) as u64
        };
        (keys, vol, avg)
    }

    /// Keys removed because their deadline passed, over every database (INFO
    /// `expired_keys`; see [`Table::expired_count`]).
    pub fn expired_count(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.0.lock().dbs.iter().map(Table::expired_count).sum::<u64>())
            .sum()
    }

    /// One step of a hash-ordered scan of `db` from `cursor`, visiting about `count` keys
    /// and returning those for which `keep` is true.
    pub fn scan(
        &self,
        db: usize,
        cursor: u64,
        count: usize,
        now: u64,
        mut keep: impl FnMut(&[u8], &Entry) -> bool,
    ) -> ScanPage {
        let count = count.max(1);
        let mut page = ScanPage::default();
        let mut visited = 0usize;
        let mut from = cursor;
        let mut shard = self.shard_index(from);
        while shard < self.shards.len() {
            let shard_end = self.shard_end(shard);
            let g = self.shards[shard].0.lock();
            let items = g.table_ref(db).keys_in_hash_range(from, shard_end, now);
            let mut taken = 0;
            while taken < items.len() && visited < count {
                let h = items[taken].0;
                // Take every key with this hash together so the cursor can move past it.
                while taken < items.len() && items[taken].0 == h {
                    let (_, k, e) = items[taken];
                    if keep(k, e) {
                        page.keys.push(k.to_vec());
                    }
                    taken += 1;
                    visited += 1;
                }
            }
            if taken < items.len() {
                page.cursor = items[taken].0;
                return page;
            }
            if shard_end == u64::MAX {
                break;
            }
            from = shard_end + 1;
            shard += 1;
            if visited >= count {
                page.cursor = from;
                return page;
            }
        }
        page.cursor = 0;
        page
    }

    fn shard_end(&self, shard: usize) -> u64 {
        if self.shift >= 64 {
            u64::MAX
        } else {
            (((shard as u64) + 1) << self.shift).wrapping_sub(1)
        }
    }

    /// Every live key of `db` for which `keep` is true (KEYS).
    pub fn collect_keys(
        &self,
        db: usize,
        now: u64,
        mut keep: impl FnMut(&[u8], &Entry) -> bool,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let g = s.0.lock();
            g.table_ref(db).for_each_live(now, |k, e| {
                if keep(k, e) {
                    out.push(k.to_vec());
                }
            });
        }
        out
    }

    /// A key of `db` picked at random (RANDOMKEY), None when it has no live key. As
    /// Redis picks random buckets until one holds a key: random shards until one holds a
    /// live key of `db`, then a random key of that shard, so with few keys each is as
    /// likely as the others (the key after a random hash, as before, favoured the keys
    /// after long empty stretches: with two keys one could be picked 98% of the time).
    /// After 4 tries per shard (a nearly empty keyspace) the shards are walked in order
    /// from a random one.
    pub fn random_key(&self, db: usize, now: u64) -> Option<Vec<u8>> {
        let n = self.shards.len();
        for _ in 0..n.saturating_mul(4) {
            let shard = (rand::random::<u64>() % n as u64) as usize;
            let g = self.shards[shard].0.lock();
            let t = g.table_ref(db);
            if t.is_empty() {
                continue;
            }
            let mut found = None;
            t.sample(1, &mut |k, e| {
                if !e.expired(now) {
                    found = Some(k.to_vec());
                }
            });
            if found.is_some() {
                return found;
            }
        }
        let first = (rand::random::<u64>() % n as u64) as usize;
        for step in 0..n {
            let g = self.shards[(first + step) % n].0.lock();
            let t = g.table_ref(db);
            if let Some((_, k, _)) = t.keys_in_hash_range(0, u64::MAX, now).first() {
                return Some(k.to_vec());
            }
        }
        None
    }

    /// One round of active expiry: removes up to `budget` due keys per shard; returns how
    /// many keys were removed in total.
    pub fn expire_cycle(&self, now: u64, budget: usize) -> usize {
        self.expire_cycle_with(now, budget, &mut |_, _| {})
    }

    /// As [`Keyspace::expire_cycle`], calling `on_expired(db, key)` for each removed key
    /// (client-side caching invalidations).
    pub fn expire_cycle_with(
        &self,
        now: u64,
        budget: usize,
        on_expired: &mut dyn FnMut(usize, &[u8]),
    ) -> usize {
        let mut removed = 0;
        for s in self.shards.iter() {
            let mut g = s.0.lock();
            for (db, t) in g.dbs.iter_mut().enumerate() {
                if t.volatile_len() > 0 {
                    removed += t.expire_due_with(now, budget, &mut |k| on_expired(db, k));
                }
            }
        }
        removed
    }
}

/// Starts loading the cache line at `addr` (for writing when `write`): a hint that may
/// be dropped, to any address at all.
#[inline(always)]
fn prefetch_line(addr: usize, write: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if write && prefetchw_works() {
            // SAFETY: PREFETCHW, on a CPU that reports it (CPUID PRFCHW), never faults and
            // changes nothing the program can observe, whatever the address; it touches no
            // stack or flags. Tested by `tests::prefetch_takes_any_hint`.
            unsafe {
                std::arch::asm!(
                    "prefetchw byte ptr [{0}]",
                    in(reg) addr,
                    options(nostack, preserves_flags, readonly)
                );
            }
            return;
        }
        // SAFETY: a prefetch instruction never faults and changes nothing the program can
        // observe, whatever the address (a stale or bogus hint included); `x86_64` always
        // has SSE. Tested by `tests::prefetch_takes_any_hint`.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, write);
}

/// Whether this CPU has PREFETCHW (a prefetch that asks for the line exclusive, as a
/// write will need it: the lock a command takes next). A generic x86-64 build cannot
/// emit it (`_MM_HINT_ET0` becomes a plain prefetch), so it is asked of CPUID once.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetchw_works() -> bool {
    use std::sync::atomic::AtomicU8;
    /// 0: not asked yet, 1: no, 2: yes.
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Relaxed) {
        0 => {
            // Extended leaf 0x8000_0001, ECX bit 8: PRFCHW (PREFETCHW).
            let max = std::arch::x86_64::__cpuid(0x8000_0000).eax;
            let yes =
                max >= 0x8000_0001 && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            KNOWN.store(if yes { 2 } else { 1 }, Relaxed);
            yes
        }
        k => k == 2,
    }
}

/// No shard kept locked ([`Parked`]).
const NONE: usize = usize::MAX;

/// A shard lock kept taken between the commands of one pipelined batch: a pipeline of
/// commands on one hot key (LPUSH to a queue, HSET to one hash) locks its shard once, and
/// the key's lines stay in this core's cache, instead of a lock, an unlock and cache-line
/// transfers per command. Guards from [`Keyspace::lock_parked`] leave their shard locked
/// here when dropped; the next such lock of the same shard takes it over, another shard
/// releases it first, and [`Parked::release`] (or dropping the `Parked`) unlocks it.
///
/// The holder must release it before it takes any other lock that another thread may hold
/// while waiting for a shard, and before it waits for anything.
pub struct Parked<'a> {
    ks: &'a Keyspace,
    shard: Cell<usize>,
}

impl<'a> Parked<'a> {
    /// Nothing kept locked yet.
    pub fn new(ks: &'a Keyspace) -> Self {
        Parked {
            ks,
            shard: Cell::new(NONE),
        }
    }

    /// Unlocks the shard kept locked, if any.
    #[inline]
    pub fn release(&self) {
        let i = self.shard.replace(NONE);
        if i != NONE {
            // SAFETY: shard `i` is locked by a guard whose drop left it locked for this
            // `Parked` (`ShardLock::drop`); no guard owns it now and the index was cleared
            // above, so it is unlocked exactly once.
            unsafe { self.ks.shards[i].0.force_unlock() }
        }
    }

    /// Whether a shard is kept locked.
    pub fn holds(&self) -> bool {
        self.shard.get() != NONE
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// A shard's lock that, taken for a [`Parked`], stays locked for it when dropped.
struct ShardLock<'a> {
    guard: ManuallyDrop<MutexGuard<'a, Shard>>,
    park: Option<(&'a Parked<'a>, usize)>,
}

impl Deref for ShardLock<'_> {
    type Target = Shard;
    #[inline]
    fn deref(&self) -> &Shard {
        &self.guard
    }
}

impl DerefMut for ShardLock<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Shard {
        &mut self.guard
    }
}

impl Drop for ShardLock<'_> {
    #[inline]
    fn drop(&mut self) {
        match self.park {
            // The lock stays taken: `park` owns it now (a guard it already keeps is
            // released first, though `lock_parked` never leaves one behind).
            Some((park, i)) => {
                park.release();
                park.shard.set(i);
            }
            // SAFETY: the guard is dropped once, here, and never used after.
            None => unsafe { ManuallyDrop::drop(&mut self.guard) },
        }
    }
}

/// The lock on one key's shard, bound to that key and a database.
pub struct KeyGuard<'a, 'k> {
    ks: &'a Keyspace,
    idx: usize,
    shard: ShardLock<'a>,
    db: usize,
    hash: u64,
    key: &'k [u8],
    now: u64,
    rec: u8,
}

/// Runs `op` on `t`, recording (per `rec`) a lazy expiry of `key` in `db` it caused.
#[inline]
fn watched<R>(
    rec: u8,
    db: usize,
    key: &[u8],
    t: &mut Table,
    op: impl FnOnce(&mut Table) -> R,
) -> R {
    if rec & RECORD_EXPIRED == 0 {
        return op(t);
    }
    let before = t.expired_count();
    let r = op(t);
    if t.expired_count() != before {
        events::record(KeyEvent::Expired, db, key);
    }
    r
}

/// Before a lookup that returns a borrow: removes `key` first if its deadline passed,
/// recording it (per `rec`), so the lookup itself finds it absent.
#[inline]
fn probe(rec: u8, db: usize, key: &[u8], h: u64, now: u64, t: &mut Table) {
    if rec & RECORD_EXPIRED != 0 {
        watched(rec, db, key, t, |t| t.contains(h, key, now));
    }
}

/// Records, per `rec`, what a store of `key` in `db` that replaced `old` means.
#[inline]
fn note_store(rec: u8, db: usize, key: &[u8], old: &Option<Entry>) {
    if rec & RECORD_NEW != 0 && old.is_none() {
        events::record(KeyEvent::New, db, key);
    }
}

/// Records, per `rec`, that a live `key` in `db` was removed.
#[inline]
fn note_remove(rec: u8, db: usize, key: &[u8], old: &Option<Entry>) {
    if rec & RECORD_NEW != 0 && old.is_some() {
        events::record(KeyEvent::Removed, db, key);
    }
}

impl<'a, 'k> KeyGuard<'a, 'k> {
    /// The live entry, touching its access time.
    pub fn get(&mut self) -> Option<&mut Entry> {
        let (h, k, now, db) = (self.hash, self.key, self.now, self.db);
        let t = self.shard.table(db);
        probe(self.rec, db, k, h, now, t);
        t.get(h, k, now)
    }

    /// The live entry without touching its access time.
    pub fn peek(&mut self) -> Option<&mut Entry> {
        let (h, k, now, db) = (self.hash, self.key, self.now, self.db);
        let t = self.shard.table(db);
        probe(self.rec, db, k, h, now, t);
        t.get_no_touch(h, k, now)
    }

    /// Stores a value with deadline `expire_at` (0: none); returns the old live entry.
    pub fn insert(&mut self, value: Value, expire_at: u64) -> Option<Entry> {
        let (h, k, now, db, rec) = (self.hash, self.key, self.now, self.db, self.rec);
        let old = watched(rec, db, k, self.shard.table(db), |t| {
            t.insert(h, k, value, expire_at, now)
        });
        self.ks.publish_hint(self.idx, db, self.shard.table(db));
        note_store(rec, db, k, &old);
        old
    }

    /// Removes the key; returns its live entry.
    pub fn remove(&mut self) -> Option<Entry> {
        let (h, k, now, db, rec) = (self.hash, self.key, self.now, self.db, self.rec);
        let old = watched(rec, db, k, self.shard.table(db), |t| t.remove(h, k, now));
        self.ks.publish_hint(self.idx, db, self.shard.table(db));
        note_remove(rec, db, k, &old);
        old
    }

    /// Sets (`at > 0`) or clears (`at == 0`) the deadline; false when there is no key.
    pub fn set_expire(&mut self, at: u64) -> bool {
        let (h, k, now, db) = (self.hash, self.key, self.now, self.db);
        watched(self.rec, db, k, self.shard.table(db), |t| {
            t.set_expire(h, k, at, now)
        })
    }

    /// The same key in another database of the same shard (MOVE).
    pub fn table_of(&mut self, db: usize) -> &mut Table {
        self.shard.table(db)
    }

    /// The key's hash.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The time this guard evaluates expiry against (ns).
    pub fn now(&self) -> u64 {
        self.now
    }
}

/// Locks on several shards, taken in ascending order.
pub struct MultiGuard<'a> {
    ks: &'a Keyspace,
    idx: Vec<usize>,
    guards: Vec<MutexGuard<'a, Shard>>,
    now: u64,
    rec: u8,
}

impl<'a> MultiGuard<'a> {
    fn table(&mut self, db: usize, key: &[u8]) -> (&mut Table, u64) {
        let h = self.ks.hash(key);
        let si = self.ks.shard_index(h);
        // Callers only pass keys they locked; fall back to the first guard defensively.
        let pos = self.idx.binary_search(&si).unwrap_or(0);
        (self.guards[pos].table(db), h)
    }

    /// The live entry of `key` in `db`, touching it.
    pub fn get(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let (now, rec) = (self.now, self.rec);
        let (t, h) = self.table(db, key);
        probe(rec, db, key, h, now, t);
        t.get(h, key, now)
    }

    /// The live entry of `key` in `db` without touching it.
    pub fn peek(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let (now, rec) = (self.now, self.rec);
        let (t, h) = self.table(db, key);
        probe(rec, db, key, h, now, t);
        t.get_no_touch(h, key, now)
    }

    /// Stores `value` under `key` in `db`; returns the old live entry.
    pub fn insert(&mut self, db: usize, key: &[u8], value: Value, expire_at: u64) -> Option<Entry> {
        let (now, rec) = (self.now, self.rec);
        let (t, h) = self.table(db, key);
        let old = watched(rec, db, key, t, |t| t.insert(h, key, value, expire_at, now));
        note_store(rec, db, key, &old);
        old
    }

    /// Removes `key` from `db`; returns its live entry.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        let (now, rec) = (self.now, self.rec);
        let (t, h) = self.table(db, key);
        let old = watched(rec, db, key, t, |t| t.remove(h, key, now));
        note_remove(rec, db, key, &old);
        old
    }

    /// Sets or clears the deadline of `key` in `db`.
    pub fn set_expire(&mut self, db: usize, key: &[u8], at: u64) -> bool {
        let (now, rec) = (self.now, self.rec);
        let (t, h) = self.table(db, key);
        watched(rec, db, key, t, |t| t.set_expire(h, key, at, now))
    }

    /// Takes the tags off `key` in `db` (the key stays) to move them with it (RENAME).
    pub fn take_tags(&mut self, db: usize, key: &[u8]) -> Vec<Box<[u8]>> {
        let (t, h) = self.table(db, key);
        t.take_tags(h, key)
    }

    /// Replaces the tags of `key` in `db` (see [`Table::set_tags`]).
    pub fn set_tags(&mut self, db: usize, key: &[u8], tags: Vec<Box<[u8]>>) -> bool {
        let (t, _) = self.table(db, key);
        t.set_tags(key, tags)
    }

    /// Every locked shard (FLUSHDB, FLUSHALL, SWAPDB).
    pub fn shards_mut(&mut self) -> impl Iterator<Item = &mut Shard> + use<'_, 'a> {
        self.guards.iter_mut().map(|g| &mut **g)
    }

    /// The time this guard evaluates expiry against (ns).
    pub fn now(&self) -> u64 {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::RString;
    use std::collections::HashSet;

    fn sv(v: &str) -> Value {
        Value::String(RString::from_bytes(v.as_bytes()))
    }

    /// The value prefetch looks keys up and never waits for a lock: with the key's shard
    /// held (as a parked shard is), it returns at once.
    #[test]
    fn prefetch_value_skips_a_busy_shard() {
        let ks = Keyspace::new(2, 16);
        ks.prefetch_value(0, b"missing", ks.hash(b"missing"));
        ks.lock(0, b"s", 1).insert(sv(&"v".repeat(300)), 0);
        ks.lock(0, b"n", 1).insert(sv("12"), 0);
        ks.lock(1, b"l", 1).insert(Value::List(Box::default()), 0);
        for (db, k) in [(0, &b"s"[..]), (0, b"n"), (1, b"l"), (1, b"s")] {
            let h = ks.prefetch(db, k);
            assert_eq!(h, ks.hash(k));
            ks.prefetch_value(db, k, h);
            ks.prefetch_value(db, k, h ^ 1);
        }
        let held = ks.lock(0, b"s", 1);
        ks.prefetch_value(0, b"s", ks.hash(b"s"));
        drop(held);
        assert!(ks.lock(0, b"s", 1).get().is_some(), "the key is untouched");
    }

    /// Two keys of different shards.
    fn two_shards(ks: &Keyspace) -> (Vec<u8>, Vec<u8>) {
        let a = b"k0".to_vec();
        let b = (1..)
            .map(|i| format!("k{i}").into_bytes())
            .find(|k| ks.shard_of(k) != ks.shard_of(&a))
            .unwrap();
        (a, b)
    }

    fn locked(ks: &Keyspace, key: &[u8]) -> bool {
        ks.shards[ks.shard_of(key)].0.is_locked()
    }

    #[test]
    fn parked_shard_stays_locked_until_another_shard_or_release() {
        let ks = Keyspace::new(1, 16);
        let (a, b) = two_shards(&ks);
        let park = Parked::new(&ks);
        ks.lock_parked(&park, 0, &a, 1).insert(sv("1"), 0);
        assert!(locked(&ks, &a) && park.holds());
        // The same shard again: taken over, not locked twice (that would deadlock).
        for i in 0..3 {
            let mut g = ks.lock_parked(&park, 0, &a, 1);
            assert!(!park.holds());
            g.insert(sv(&i.to_string()), 0);
        }
        assert!(locked(&ks, &a));
        // Another shard: the first is released before the second is locked.
        ks.lock_parked(&park, 0, &b, 1).insert(sv("b"), 0);
        assert!(!locked(&ks, &a) && locked(&ks, &b));
        // A plain lock from another thread waits for the release, then sees the writes.
        std::thread::scope(|s| {
            let t = s.spawn(|| ks.lock(0, &b, 1).get().map(|e| e.value.clone()));
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!t.is_finished());
            park.release();
            assert!(matches!(t.join().unwrap(), Some(Value::String(_))));
        });
        assert!(!locked(&ks, &a) && !locked(&ks, &b) && !park.holds());
        assert!(ks.lock(0, &a, 1).get().is_some());
        // Dropping the Parked releases too.
        drop(ks.lock_parked(&park, 0, &a, 1));
        assert!(locked(&ks, &a));
        drop(park);
        assert!(!locked(&ks, &a));
    }

    #[test]
    fn parked_shard_is_released_when_a_panic_unwinds() {
        let ks = Keyspace::new(1, 16);
        let (a, b) = two_shards(&ks);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let park = Parked::new(&ks);
            drop(ks.lock_parked(&park, 0, &a, 1));
            let _g = ks.lock_parked(&park, 0, &b, 1);
            panic!("handler panicked");
        }));
        assert!(r.is_err());
        assert!(!locked(&ks, &a) && !locked(&ks, &b));
    }

    #[test]
    fn prefetch_takes_any_hint() {
        let ks = Keyspace::new(2, 16);
        ks.prefetch(0, b"missing");
        for n in 0..2000 {
            let k = format!("k{n}");
            ks.lock(n % 2, k.as_bytes(), 1).insert(sv("v"), 0);
        }
        // Inserts published where each table's buckets are.
        let i = ks.shard_of(b"k1");
        let hint = ks.hint(i, 1);
        let (end, mask) = ks.shards[i].0.lock().table(1).bucket_hint().unwrap();
        assert_eq!(hint.get(), Some((end, mask)));
        // The table's own address, for every database, also after a swap (in place).
        for db in 0..2 {
            let at = ks.shards[i].0.lock().table(db).header_addr();
            assert_eq!(ks.hint(i, db).1, at);
        }
        ks.shards[i].0.lock().swap_dbs(0, 1);
        assert_eq!(
            ks.hint(i, 1).1,
            ks.shards[i].0.lock().table(1).header_addr()
        );
        ks.shards[i].0.lock().swap_dbs(0, 1);
        for n in 0..2000 {
            ks.prefetch(n % 3, format!("k{n}").as_bytes());
        }
        // Stale and bogus hints only make prefetches miss.
        for bogus in [1, u64::MAX, 4096 | 63 << 48, 0xffff_ffff_ffff] {
            for h in ks.hints.iter() {
                h.0.store(bogus, Relaxed);
            }
            ks.prefetch(0, b"k1");
            ks.prefetch(1, b"k2");
        }
        // Any address at all, for reading and for writing (PREFETCHW where the CPU has it).
        for addr in [0, 1, 4096, usize::MAX, 0xffff_ffff_ffff, 1 << 63] {
            prefetch_line(addr, false);
            prefetch_line(addr, true);
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(prefetchw_works(), prefetchw_works(), "asked once, kept");
        // The next insert republishes the real one.
        ks.lock(1, b"k1", 1).insert(sv("w"), 0);
        assert_eq!(hint.get(), Some((end, mask)));
        // Hints that do not pack are not published.
        hint.set(Some((1 << 50, 1023)));
        assert_eq!(hint.get(), None);
    }

    #[test]
    fn parked_guards_alive_together_leave_one_shard_locked() {
        let ks = Keyspace::new(1, 16);
        let (a, b) = two_shards(&ks);
        let park = Parked::new(&ks);
        let ga = ks.lock_parked(&park, 0, &a, 1);
        let gb = ks.lock_parked(&park, 0, &b, 1);
        drop(ga);
        assert!(locked(&ks, &a) && locked(&ks, &b));
        drop(gb);
        assert!(!locked(&ks, &a) && locked(&ks, &b));
        park.release();
        assert!(!locked(&ks, &b));
    }

    #[test]
    fn scan_visits_every_key_once() {
        for shards in [1, 4, 64] {
            let ks = Keyspace::new(2, shards);
            for i in 0..1000 {
                let k = format!("key:{i}");
                ks.lock(0, k.as_bytes(), 1).insert(sv("v"), 0);
            }
            let mut seen = HashSet::new();
            let mut cursor = 0;
            let mut calls = 0;
            loop {
                let page = ks.scan(0, cursor, 7, 1, |_, _| true);
                for k in page.keys {
                    assert!(seen.insert(k), "duplicate key");
                }
                calls += 1;
                cursor = page.cursor;
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(seen.len(), 1000);
            assert!(calls > 100);
            assert_eq!(ks.db_size(0), 1000);
            assert_eq!(ks.db_size(1), 0);
        }
    }

    #[test]
    fn scan_keeps_keys_present_throughout_while_others_change() {
        let ks = Keyspace::new(1, 16);
        for i in 0..500 {
            ks.lock(0, format!("stable:{i}").as_bytes(), 1)
                .insert(sv("v"), 0);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let page = ks.scan(0, cursor, 10, 1, |_, _| true);
            seen.extend(page.keys);
            // Churn: add and remove other keys between calls (forces table growth).
            for j in 0..50 {
                let k = format!("churn:{round}:{j}");
                ks.lock(0, k.as_bytes(), 1).insert(sv("x"), 0);
            }
            round += 1;
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(seen.contains(format!("stable:{i}").as_bytes()));
        }
    }

    #[test]
    fn multi_guard_and_expiry_cycle() {
        let ks = Keyspace::new(2, 8);
        {
            let mut g = ks.lock_keys([&b"a"[..], b"b", b"c"], 1);
            g.insert(0, b"a", sv("1"), 0);
            g.insert(0, b"b", sv("2"), 100);
            g.insert(1, b"c", sv("3"), 50);
        }
        assert_eq!(ks.db_stats(0, 1), (2, 1, 0));
        assert_eq!(ks.expire_cycle(60, 10), 1);
        assert_eq!(ks.expired_count(), 1);
        assert_eq!(ks.db_size(1), 0);
        assert!(ks.lock(0, b"b", 99).get().is_some());
        assert!(ks.lock(0, b"b", 100).get().is_none());
        let mut all = ks.lock_all(1);
        for s in all.shards_mut() {
            s.swap_dbs(0, 1);
        }
        drop(all);
        assert_eq!(ks.db_size(1), 1);
        assert!(ks.random_key(1, 1).is_some());
        assert!(ks.random_key(0, 1).is_none());
    }

    #[test]
    fn random_key_picks_each_of_few_keys_alike() {
        // unit/keyspace "RANDOMKEY": two keys, and 100 picks must see both. Picking the
        // key after a random hash saw one of them far more often than the other.
        let ks = Keyspace::new(1, 1024);
        for k in [&b"foo"[..], b"bar"] {
            ks.lock(0, k, 0)
                .insert(Value::String(RString::from_bytes(b"x")), 0);
        }
        let mut foo = 0;
        for _ in 0..1000 {
            if ks.random_key(0, 0).as_deref() == Some(&b"foo"[..]) {
                foo += 1;
            }
        }
        // Binomial(1000, 0.5): 300..700 is more than 12 standard deviations wide.
        assert!((300..700).contains(&foo), "foo picked {foo} times of 1000");
        // An expired key is never picked.
        ks.lock(0, b"gone", 0)
            .insert(Value::String(RString::from_bytes(b"x")), 5);
        for _ in 0..200 {
            assert_ne!(ks.random_key(0, 10).as_deref(), Some(&b"gone"[..]));
        }
    }
}
