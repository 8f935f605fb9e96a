//! [`PosIndex`]: the index of a dense vector of byte strings (a big set's members, a big
//! hash's fields) by content.
//!
//! It is a hash table of positions, each kept with the high half of its string's hash (its
//! tag). The table's hash of a slot derives from the tag alone, so growing the table reads
//! no string, and a probe compares bytes only when the tags match. The owner keeps the
//! vector: a call that must compare strings gets `at`, the string at a position. Positions
//! fit in `u32`: a set or hash holds at most 2^32 - 1 members or fields, Redis's documented
//! limit.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

/// One indexed string: its position and the high half of its hash.
#[derive(Clone, Copy, Debug)]
struct Slot {
    pos: u32,
    tag: u32,
}

/// The table hash of a slot whose string hashed to `tag` (spread over 64 bits).
#[inline]
fn table_hash(tag: u32) -> u64 {
    u64::from(tag).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Positions of the strings of a dense vector, found by content (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct PosIndex {
    table: HashTable<Slot>,
    state: RandomState,
}

impl PosIndex {
    /// Heap bytes one table bucket takes (the slot and its control byte).
    pub const BUCKET_BYTES: usize = 1 + std::mem::size_of::<Slot>();

    /// An empty index with room for `n` strings.
    pub fn with_capacity(n: usize) -> Self {
        PosIndex {
            table: HashTable::with_capacity(n),
            state: RandomState::default(),
        }
    }

    /// The 64-bit hash of `s` (HSCAN's cursor order).
    #[inline]
    pub fn hash(&self, s: &[u8]) -> u64 {
        self.state.hash_one(s)
    }

    #[inline]
    fn tag(&self, s: &[u8]) -> u32 {
        (self.hash(s) >> 32) as u32
    }

    /// The position of `s`, if it is indexed.
    #[inline]
    pub fn find<'a>(&self, s: &[u8], at: impl Fn(usize) -> &'a [u8]) -> Option<usize> {
        let t = self.tag(s);
        self.table
            .find(table_hash(t), |x| x.tag == t && at(x.pos as usize) == s)
            .map(|x| x.pos as usize)
    }

    /// Indexes `s` at `pos`, unless it is indexed already: then nothing changes and the
    /// error is its position.
    pub fn insert<'a>(
        &mut self,
        s: &[u8],
        pos: usize,
        at: impl Fn(usize) -> &'a [u8],
    ) -> Result<(), usize> {
        let t = self.tag(s);
        let eq = |x: &Slot| x.tag == t && at(x.pos as usize) == s;
        match self.table.entry(table_hash(t), eq, |x| table_hash(x.tag)) {
            Entry::Occupied(o) => Err(o.get().pos as usize),
            Entry::Vacant(v) => {
                v.insert(Slot {
                    pos: pos as u32,
                    tag: t,
                });
                Ok(())
            }
        }
    }

    /// Indexes `s`, known not to be indexed, at `pos`.
    pub fn insert_new(&mut self, s: &[u8], pos: usize) {
        let t = self.tag(s);
        let slot = Slot {
            pos: pos as u32,
            tag: t,
        };
        self.table
            .insert_unique(table_hash(t), slot, |x| table_hash(x.tag));
    }

    /// Removes `s`; the position it had.
    pub fn remove<'a>(&mut self, s: &[u8], at: impl Fn(usize) -> &'a [u8]) -> Option<usize> {
        let t = self.tag(s);
        let eq = |x: &Slot| x.tag == t && at(x.pos as usize) == s;
        let found = self.table.find_entry(table_hash(t), eq).ok()?;
        Some(found.remove().0.pos as usize)
    }

    /// Removes the entry of `s`, which is at `pos`.
    pub fn remove_at(&mut self, s: &[u8], pos: usize) {
        let p = pos as u32;
        if let Ok(e) = self
            .table
            .find_entry(table_hash(self.tag(s)), |x| x.pos == p)
        {
            e.remove();
        }
    }

    /// `s` moved from position `from` to `to` (a swap-remove filled a hole with it).
    pub fn moved(&mut self, s: &[u8], from: usize, to: usize) {
        let f = from as u32;
        if let Some(x) = self.table.find_mut(table_hash(self.tag(s)), |x| x.pos == f) {
            x.pos = to as u32;
        }
    }

    /// Shrinks the table to hold at least `n` strings.
    pub fn shrink_to(&mut self, n: usize) {
        self.table.shrink_to(n, |x| table_hash(x.tag));
    }

    /// Number of buckets the table has room for.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_moves_and_removes_by_content() {
        let mut v: Vec<Vec<u8>> = Vec::new();
        let mut ix = PosIndex::with_capacity(0);
        for i in 0..1000 {
            let s = format!("s{i}").into_bytes();
            assert_eq!(ix.insert(&s, v.len(), |p| &v[p]), Ok(()));
            v.push(s);
        }
        assert_eq!(ix.insert(b"s7", 1000, |p| &v[p]), Err(7));
        assert_eq!(ix.find(b"s500", |p| &v[p]), Some(500));
        assert_eq!(ix.find(b"nope", |p| &v[p]), None);
        // Swap-remove s10: the last string takes its place.
        assert_eq!(ix.remove(b"s10", |p| &v[p]), Some(10));
        v.swap_remove(10);
        ix.moved(&v[10], 999, 10);
        assert_eq!(ix.find(b"s999", |p| &v[p]), Some(10));
        assert_eq!(ix.find(b"s10", |p| &v[p]), None);
        ix.remove_at(&v[3], 3);
        assert_eq!(ix.find(b"s3", |p| &v[p]), None);
        ix.insert_new(b"s3", 3);
        assert_eq!(ix.find(b"s3", |p| &v[p]), Some(3));
        ix.shrink_to(10);
        assert_eq!(ix.find(b"s999", |p| &v[p]), Some(10));
    }
}
