//! Streams: entries keyed by (ms, seq) ids, consumer groups and their pending lists.
//!
//! # Layout
//! Entries live in *blocks* of up to [`NODE_MAX_ENTRIES`] entries (like Redis's listpacks
//! under a radix tree), kept in a `BTreeMap` keyed by the id of each block's first entry.
//! A block is a sorted `Vec` of `(id, fields)`; a deleted entry stays as a tombstone
//! (`None`) until its whole block is empty, as in Redis, so block boundaries (and thus
//! `XTRIM ~` / `MAXLEN ~` results and `radix-tree-keys`) follow Redis's rules: a new block
//! starts when the tail one holds 100 entries (live or deleted) or its estimated listpack
//! size would reach 4096 bytes.
//!
//! A block stores a 4-byte offset per entry and one byte buffer with each entry as a flags
//! byte, its id as two varints (milliseconds after the block's first id, then the
//! sequence: usually 2 bytes) and its length-prefixed items; as in Redis's listpacks, an
//! entry whose field names equal the block's master entry stores only its values. Finding
//! an id in a block is a binary search that decodes the probed ids. An entry thus costs
//! about `7 + sum(len + 1)` bytes over its values (Redis 7's listpack entry is of the same
//! order); a block adds its map node and master field names, amortised over up to 100
//! entries.
//!
//! Consumer groups keep Redis's structure: the group's pending entries list (PEL) maps an
//! id to its owner and delivery data; each consumer keeps the set of ids it owns.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::rdb::packed::backlen_size;

/// Most entries (live or deleted) in one block (Redis's `stream-node-max-entries`).
pub const NODE_MAX_ENTRIES: usize = 100;
/// Estimated listpack bytes at which a new block starts (`stream-node-max-bytes`).
pub const NODE_MAX_BYTES: usize = 4096;

/// A stream entry id: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest id.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An id from its parts.
    pub const fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }

    /// True for `0-0`.
    pub fn is_zero(self) -> bool {
        self == Self::MIN
    }

    /// The next id (Redis's `streamIncrID`); `None` after the maximum.
    pub fn next(self) -> Option<Self> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous id (Redis's `streamDecrID`); `None` before `0-0`.
    pub fn prev(self) -> Option<Self> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at the start of `b`: (value, bytes used).
fn get_varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut v = 0usize;
    let mut shift = 0;
    for (i, &c) in b.iter().enumerate().take(10) {
        v |= usize::from(c & 0x7f) << shift;
        if c & 0x80 == 0 {
            return Some((v, i + 1));
        }
        shift += 7;
    }
    None
}

/// Reads one length-prefixed item at the start of `b`: (item, rest).
fn get_item(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, n) = get_varint(b)?;
    let end = n.checked_add(len)?;
    Some((b.get(n..end)?, b.get(end..)?))
}

/// Entry flag: deleted (a tombstone).
const FLAG_DELETED: u8 = 1;
/// Entry flag: same field names as the block's master entry (only values are stored).
const FLAG_SAMEFIELDS: u8 = 2;

/// A view of an entry's field-value pairs inside its block.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a> {
    master: &'a [Box<[u8]>],
    /// Encoded body (after the flags byte).
    body: &'a [u8],
    same: bool,
}

impl<'a> Fields<'a> {
    /// Number of items (twice the number of pairs).
    pub fn len(&self) -> usize {
        if self.same {
            self.master.len() * 2
        } else {
            get_varint(self.body).map_or(0, |(n, _)| n)
        }
    }

    /// True when there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The items in order: field, value, field, value, ...
    pub fn iter(&self) -> FieldsIter<'a> {
        let (rest, total) = if self.same {
            (self.body, self.master.len() * 2)
        } else {
            match get_varint(self.body) {
                Some((n, used)) => (&self.body[used..], n),
                None => (&[][..], 0),
            }
        };
        FieldsIter {
            master: if self.same { self.master } else { &[] },
            rest,
            idx: 0,
            total,
        }
    }
}

/// Iterator over the items of [`Fields`].
pub struct FieldsIter<'a> {
    master: &'a [Box<[u8]>],
    rest: &'a [u8],
    idx: usize,
    total: usize,
}

impl<'a> Iterator for FieldsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.idx >= self.total {
            return None;
        }
        let i = self.idx;
        self.idx += 1;
        if !self.master.is_empty() && i.is_multiple_of(2) {
            return self.master.get(i / 2).map(|b| &b[..]);
        }
        let (item, rest) = get_item(self.rest)?;
        self.rest = rest;
        Some(item)
    }
}

/// Bytes a listpack element takes for `s` (integers are stored compactly, as Redis does).
fn lp_elem_size(s: &[u8]) -> usize {
    if s.len() <= 20 {
        if let Some(v) = crate::value::parse_canonical_i64(s) {
            return lp_int_size(v);
        }
    }
    let l = s.len();
    let hdr = if l < 64 {
        1
    } else if l < 4096 {
        2
    } else {
        5
    };
    hdr + l + backlen_size(hdr + l)
}

fn lp_int_size(v: i64) -> usize {
    let enc = if (0..=127).contains(&v) {
        1
    } else if (-4096..4096).contains(&v) {
        2
    } else if (-32768..32768).contains(&v) {
        3
    } else if (-8_388_608..8_388_608).contains(&v) {
        4
    } else if (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&v) {
        5
    } else {
        9
    };
    enc + 1
}

fn lp_u64_size(v: u64) -> usize {
    i64::try_from(v).map_or(10, lp_int_size)
}

/// A block of entries (Redis's listpack node): offsets into one byte buffer holding each
/// entry as a flags byte, its id as varint deltas from the block's first id (ms) and its
/// sequence, then its items (values only when the field names are the master's).
#[derive(Clone, Debug, Default)]
struct Block {
    /// Id of the block's first entry (its key in the stream's map).
    base: StreamId,
    /// Start of each entry in `data`, ascending by id (deleted ones included).
    offs: Vec<u32>,
    /// Encoded entries.
    data: Vec<u8>,
    /// Live entries.
    live: usize,
    /// Master field names (those of the block's first entry).
    master: Vec<Box<[u8]>>,
    /// Estimated listpack bytes.
    lp_bytes: usize,
}

impl Block {
    /// Entries held, deleted ones included.
    fn len(&self) -> usize {
        self.offs.len()
    }

    /// The id of entry `i` and where its body starts in `data`.
    fn id_at(&self, i: usize) -> (StreamId, usize) {
        let o = self.offs[i] as usize + 1;
        let rest = self.data.get(o..).unwrap_or(&[]);
        let (dms, a) = get_varint(rest).unwrap_or((0, 0));
        let (seq, b) = get_varint(rest.get(a..).unwrap_or(&[])).unwrap_or((0, 0));
        (
            StreamId::new(self.base.ms.wrapping_add(dms as u64), seq as u64),
            o + a + b,
        )
    }

    /// The id of entry `i`.
    fn id(&self, i: usize) -> StreamId {
        self.id_at(i).0
    }

    /// The id of the last entry (live or deleted).
    fn last_id(&self) -> Option<StreamId> {
        self.len().checked_sub(1).map(|i| self.id(i))
    }

    /// Binary search for `id` among the entries (as `slice::binary_search`).
    fn find(&self, id: StreamId) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.id(mid).cmp(&id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn flags(&self, i: usize) -> u8 {
        self.data
            .get(self.offs[i] as usize)
            .copied()
            .unwrap_or(FLAG_DELETED)
    }

    fn is_live(&self, i: usize) -> bool {
        self.flags(i) & FLAG_DELETED == 0
    }

    /// The fields of entry `i`, `None` when deleted.
    fn fields(&self, i: usize) -> Option<Fields<'_>> {
        let flags = self.flags(i);
        if flags & FLAG_DELETED != 0 {
            return None;
        }
        let start = self.id_at(i).1;
        let end = self
            .offs
            .get(i + 1)
            .map_or(self.data.len(), |&o| o as usize);
        Some(Fields {
            master: &self.master,
            body: self.data.get(start..end)?,
            same: flags & FLAG_SAMEFIELDS != 0,
        })
    }

    /// Marks entry `i` deleted; true when it was live.
    fn kill(&mut self, i: usize) -> bool {
        let o = self.offs[i] as usize;
        match self.data.get_mut(o) {
            Some(f) if *f & FLAG_DELETED == 0 => {
                *f |= FLAG_DELETED;
                self.live -= 1;
                true
            }
            _ => false,
        }
    }

    fn heap(&self) -> usize {
        self.offs.capacity() * 4
            + self.data.capacity()
            + self.master.iter().map(|m| m.len() + 16).sum::<usize>()
            + 96
    }
}

/// One block of a stream (see [`Stream::nodes`]).
pub struct StreamNode<'a> {
    /// Id of the block's first entry (live or deleted).
    pub key: StreamId,
    /// Field names of the block's master entry.
    pub master: &'a [Box<[u8]>],
    /// The block's live entries.
    pub entries: Vec<(StreamId, Fields<'a>)>,
}

/// A pending (delivered, not yet acknowledged) entry of a consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEntry {
    /// Consumer that owns it.
    pub consumer: Vec<u8>,
    /// Last delivery, ms since the epoch.
    pub delivery_time: u64,
    /// Number of deliveries.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Last interaction attempt, ms since the epoch.
    pub seen_time: u64,
    /// Last successful interaction, ms since the epoch; -1 for never.
    pub active_time: i64,
    /// Ids this consumer owns in the group's PEL.
    pub pel: BTreeSet<StreamId>,
}

impl Consumer {
    /// A new consumer seen at `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        Consumer {
            seen_time: now_ms,
            active_time: -1,
            pel: BTreeSet::new(),
        }
    }
}

/// The value of `entries_read` when the group's counter is unknown.
pub const INVALID_ENTRIES_READ: i64 = -1;

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// Last delivered id.
    pub last_id: StreamId,
    /// Logical read counter; [`INVALID_ENTRIES_READ`] when unknown.
    pub entries_read: i64,
    /// Pending entries of all consumers.
    pub pel: BTreeMap<StreamId, PendingEntry>,
    /// Consumers by name.
    pub consumers: BTreeMap<Vec<u8>, Consumer>,
}

impl ConsumerGroup {
    /// A group whose last delivered id is `last_id`.
    pub fn new(last_id: StreamId, entries_read: i64) -> Self {
        ConsumerGroup {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Removes `id` from the PEL and from its owner's set; true when it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(p) => {
                if let Some(c) = self.consumers.get_mut(&p.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }
}

/// How XADD/XTRIM trims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Remove entries with an id below this one.
    MinId(StreamId),
}

/// A stream value.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    blocks: BTreeMap<StreamId, Block>,
    len: usize,
    /// Last id ever generated or set (XSETID).
    pub last_id: StreamId,
    /// Largest id ever deleted by XDEL (or set by XSETID).
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups by name.
    pub groups: BTreeMap<Vec<u8>, ConsumerGroup>,
}

impl Stream {
    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    /// Approximate heap bytes owned by the stream.
    pub fn heap_size(&self) -> usize {
        let groups: usize = self
            .groups
            .iter()
            .map(|(n, g)| {
                n.len()
                    + 96
                    + g.pel.values().map(|p| 64 + p.consumer.len()).sum::<usize>()
                    + g.consumers.keys().map(|k| 64 + k.len()).sum::<usize>()
                    + g.pel.len() * 24
            })
            .sum();
        self.blocks.values().map(Block::heap).sum::<usize>() + groups
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no live entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of blocks (Redis's `radix-tree-keys`).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// Id of the first live entry.
    pub fn first_id(&self) -> Option<StreamId> {
        let b = self.blocks.values().next()?;
        (0..b.len()).find(|&i| b.is_live(i)).map(|i| b.id(i))
    }

    /// Id of the last live entry.
    pub fn last_entry_id(&self) -> Option<StreamId> {
        let b = self.blocks.values().next_back()?;
        (0..b.len()).rev().find(|&i| b.is_live(i)).map(|i| b.id(i))
    }

    /// The stream's blocks in id order, as (first id, master field names, live entries):
    /// what RDB files store as one listpack node each.
    pub fn nodes(&self) -> impl Iterator<Item = StreamNode<'_>> + '_ {
        self.blocks.iter().map(|(&key, b)| StreamNode {
            key,
            master: &b.master,
            entries: (0..b.len())
                .filter_map(|i| b.fields(i).map(|f| (b.id(i), f)))
                .collect(),
        })
    }

    /// The fields of entry `id`.
    pub fn get(&self, id: StreamId) -> Option<Fields<'_>> {
        let (_, b) = self.blocks.range(..=id).next_back()?;
        let i = b.find(id).ok()?;
        b.fields(i)
    }

    /// True when entry `id` exists.
    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// Appends an entry (`items` = field, value, ...); the caller made sure
    /// `id > last_id`. Updates `last_id` and `entries_added`.
    pub fn append(&mut self, id: StreamId, items: &[&[u8]]) {
        let totelelen: usize = items.iter().map(|i| i.len()).sum();
        let fields: Vec<&[u8]> = items.iter().step_by(2).copied().collect();
        let need_new = match self.blocks.values().next_back() {
            None => true,
            Some(b) => b.lp_bytes + totelelen >= NODE_MAX_BYTES || b.len() >= NODE_MAX_ENTRIES,
        };
        if need_new {
            if let Some(tail) = self.blocks.values_mut().next_back() {
                tail.offs.shrink_to_fit();
                tail.data.shrink_to_fit();
            }
            let mut b = Block {
                base: id,
                master: fields.iter().map(|f| Box::<[u8]>::from(*f)).collect(),
                ..Block::default()
            };
            // listpack header + count + deleted + numfields + fields + terminator.
            b.lp_bytes = 7
                + 2
                + 2
                + lp_int_size(fields.len() as i64)
                + fields.iter().map(|f| lp_elem_size(f)).sum::<usize>()
                + 2;
            self.blocks.insert(id, b);
        }
        let Some((&master_id, b)) = self.blocks.iter_mut().next_back() else {
            return;
        };
        let same = b.master.len() == fields.len()
            && b.master.iter().zip(&fields).all(|(m, f)| &m[..] == *f);
        let mut lp = 2 + lp_u64_size(id.ms - master_id.ms) + 2;
        lp += lp_u64_size(id.seq.wrapping_sub(master_id.seq));
        if !same {
            lp += lp_int_size(fields.len() as i64);
            lp += fields.iter().map(|f| lp_elem_size(f)).sum::<usize>();
        }
        lp += items
            .iter()
            .skip(1)
            .step_by(2)
            .map(|v| lp_elem_size(v))
            .sum::<usize>();
        b.lp_bytes += lp;
        b.offs.push(u32::try_from(b.data.len()).unwrap_or(u32::MAX));
        let flags = if same { FLAG_SAMEFIELDS } else { 0 };
        b.data.push(flags);
        put_varint(&mut b.data, (id.ms - b.base.ms) as usize);
        put_varint(&mut b.data, id.seq as usize);
        if same {
            for v in items.iter().skip(1).step_by(2) {
                put_varint(&mut b.data, v.len());
                b.data.extend_from_slice(v);
            }
        } else {
            put_varint(&mut b.data, items.len());
            for it in items {
                put_varint(&mut b.data, it.len());
                b.data.extend_from_slice(it);
            }
        }
        b.live += 1;
        self.len += 1;
        self.entries_added += 1;
        self.last_id = id;
    }

    /// Deletes entry `id` (a tombstone until its block empties); true when it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&key, b)) = self.blocks.range_mut(..=id).next_back() else {
            return false;
        };
        let Ok(i) = b.find(id) else {
            return false;
        };
        if !b.kill(i) {
            return false;
        }
        self.len -= 1;
        if b.live == 0 {
            self.blocks.remove(&key);
        }
        true
    }

    /// Entries with ids in `start..=end`, ascending (or descending when `rev`), at most
    /// `count` of them (0: all).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> Vec<(StreamId, Fields<'_>)> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        let limit = if count == 0 { usize::MAX } else { count };
        // The block holding `start` may begin before it.
        let first_key = self
            .blocks
            .range(..=start)
            .next_back()
            .map_or(start, |(k, _)| *k);
        let blocks = self.blocks.range(first_key..=end);
        if rev {
            for (_, b) in blocks.rev() {
                for i in (0..b.len()).rev() {
                    let id = b.id(i);
                    if id > end {
                        continue;
                    }
                    if id < start || out.len() >= limit {
                        return out;
                    }
                    if let Some(f) = b.fields(i) {
                        out.push((id, f));
                    }
                }
            }
        } else {
            for (_, b) in blocks {
                let from = b.find(start).unwrap_or_else(|i| i);
                for i in from..b.len() {
                    let id = b.id(i);
                    if id > end || out.len() >= limit {
                        return out;
                    }
                    if let Some(f) = b.fields(i) {
                        out.push((id, f));
                    }
                }
            }
        }
        out
    }

    /// Trims as Redis's `streamTrim`: whole blocks first; with `approx` only whole blocks;
    /// at most `limit` entries (0: no limit). Returns the number of entries removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: usize) -> usize {
        let mut deleted = 0usize;
        loop {
            if let Trim::MaxLen(m) = how {
                if self.len as u64 <= m {
                    break;
                }
            }
            let Some((&key, b)) = self.blocks.iter_mut().next() else {
                break;
            };
            let entries = b.live;
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match how {
                Trim::MaxLen(m) => (self.len - entries) as u64 >= m,
                Trim::MinId(min) => b.last_id().is_some_and(|l| l < min),
            };
            if remove_node {
                self.blocks.remove(&key);
                self.len -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            for i in 0..b.len() {
                if !b.is_live(i) {
                    continue;
                }
                let stop = match how {
                    Trim::MaxLen(m) => self.len as u64 <= m,
                    Trim::MinId(min) => b.id(i) >= min,
                };
                if stop {
                    break;
                }
                b.kill(i);
                self.len -= 1;
                deleted += 1;
            }
            if b.live == 0 {
                self.blocks.remove(&key);
            }
            break;
        }
        deleted
    }

    /// Redis's `streamRangeHasTombstones` for `start..` (to the end).
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.len == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id().is_some_and(|f| f > self.max_deleted_id) {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical read counter of
    /// `id`, or [`INVALID_ENTRIES_READ`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = i64::try_from(self.entries_added).unwrap_or(i64::MAX);
        if self.entries_added == 0 {
            return 0;
        }
        if self.len == 0 && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return INVALID_ENTRIES_READ;
        }
        let first = self.first_id().unwrap_or_default();
        if self.max_deleted_id.is_zero() || self.max_deleted_id < first {
            let len = self.len as i64;
            if id < first {
                return added - len;
            } else if id == first {
                return added - len + 1;
            }
        }
        INVALID_ENTRIES_READ
    }

    /// The consumer-group lag as XINFO reports it (`None`: unknown).
    pub fn group_lag(&self, g: &ConsumerGroup) -> Option<i64> {
        let added = i64::try_from(self.entries_added).unwrap_or(i64::MAX);
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_ENTRIES_READ && !self.has_tombstones_from(g.last_id) {
            return Some(added - g.entries_read);
        }
        let r = self.estimate_distance(g.last_id);
        (r != INVALID_ENTRIES_READ).then(|| added - r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn append_range_delete() {
        let mut s = Stream::default();
        for i in 1..=250u64 {
            s.append(id(i, 0), &[b"f", b"v"]);
        }
        assert_eq!(s.len(), 250);
        assert_eq!(s.block_count(), 3);
        let r = s.range(id(10, 0), id(12, 0), false, 0);
        assert_eq!(r.len(), 3);
        let r = s.range(StreamId::MIN, StreamId::MAX, true, 2);
        assert_eq!(r[0].0, id(250, 0));
        assert!(s.delete(id(11, 0)));
        assert!(!s.delete(id(11, 0)));
        assert_eq!(s.range(id(10, 0), id(12, 0), false, 0).len(), 2);
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 99);
        assert_eq!(s.trim(Trim::MaxLen(120), false, 0), 30);
        assert_eq!(s.len(), 120);
        assert_eq!(s.first_id(), Some(id(131, 0)));
        assert_eq!(s.trim(Trim::MinId(id(200, 0)), false, 0), 69);
        let f = s.get(id(200, 0)).map(|f| f.iter().collect::<Vec<_>>());
        assert_eq!(f, Some(vec![&b"f"[..], &b"v"[..]]));
    }
}
