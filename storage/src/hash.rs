//! The hash value type: a map from fields to values, both binary strings.
//!
//! Like Redis, a hash has two encodings. A small hash (at most [`MAX_LISTPACK_ENTRIES`]
//! fields, none of its fields or values longer than [`MAX_LISTPACK_VALUE`] bytes) is a
//! plain vector of pairs kept in insertion order and searched linearly (Redis's
//! `listpack`: compact, cache friendly, and iterated in the same order as Redis's). A hash
//! that outgrows either limit gains an index (a `hashbrown` table of positions into the
//! vector, Redis's `hashtable`) and never goes back, as in Redis. With the index, lookups,
//! inserts and deletes are O(1); deletion then swaps the last pair into the hole, so random
//! picks (HRANDFIELD) stay O(1) too.
//!
//! Scanning an indexed hash uses the field's 64-bit hash as the cursor: every call returns
//! the fields with the smallest hashes at or above the cursor, so a field present for the
//! whole iteration is returned exactly once, whatever is inserted or removed between calls.

use crate::inline::InlineBytes;
use crate::posindex::PosIndex;

/// Largest number of fields kept in the compact form (`hash-max-listpack-entries`).
pub const MAX_LISTPACK_ENTRIES: usize = 128;
/// Longest field or value kept in the compact form (`hash-max-listpack-value`).
pub const MAX_LISTPACK_VALUE: usize = 64;

/// One field (inline when short) and its value.
type Pair = (InlineBytes, Box<[u8]>);

/// A Redis hash.
#[derive(Clone, Debug, Default)]
pub struct Hash {
    pairs: Vec<Pair>,
    index: Option<Box<PosIndex>>,
}

/// One page of an HSCAN over an indexed hash.
#[derive(Debug, Default)]
pub struct HashScan<'a> {
    /// Cursor to continue from; 0 when the iteration is complete.
    pub cursor: u64,
    /// The (field, value) pairs of this page.
    pub pairs: Vec<(&'a [u8], &'a [u8])>,
}

impl Hash {
    /// An empty hash in the compact form.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of fields.
    #[inline]
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// True when the hash has no fields.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// True while the hash is in the compact (`listpack`) form.
    #[inline]
    pub fn is_compact(&self) -> bool {
        self.index.is_none()
    }

    /// Position of `field` in the pair vector.
    #[inline]
    fn position(&self, field: &[u8]) -> Option<usize> {
        match &self.index {
            None => self.pairs.iter().position(|(f, _)| &**f == field),
            Some(ix) => ix.find(field, |i| self.pairs[i].0.as_bytes()),
        }
    }

    /// The value of `field`.
    #[inline]
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.position(field).map(|i| &*self.pairs[i].1)
    }

    /// True when `field` exists.
    #[inline]
    pub fn contains(&self, field: &[u8]) -> bool {
        self.position(field).is_some()
    }

    /// Sets `field` to `value`; returns true when the field is new.
    #[inline]
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.insert_owned(field, value.into())
    }

    /// Sets `field` to the owned `value`; returns true when the field is new.
    pub fn insert_owned(&mut self, field: &[u8], value: Box<[u8]>) -> bool {
        if self.index.is_none()
            && (field.len() > MAX_LISTPACK_VALUE || value.len() > MAX_LISTPACK_VALUE)
        {
            self.convert();
        }
        match &mut self.index {
            Some(ix) => {
                let pos = self.pairs.len();
                if let Err(i) = ix.insert(field, pos, |i| self.pairs[i].0.as_bytes()) {
                    self.pairs[i].1 = value;
                    return false;
                }
                self.pairs.push((InlineBytes::new(field), value));
            }
            None => {
                if let Some(i) = self.pairs.iter().position(|(f, _)| &**f == field) {
                    self.pairs[i].1 = value;
                    return false;
                }
                self.pairs.push((InlineBytes::new(field), value));
                if self.pairs.len() > MAX_LISTPACK_ENTRIES {
                    self.convert();
                }
            }
        }
        true
    }

    /// Removes `field`; returns true when it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.index {
            None => match self.pairs.iter().position(|(f, _)| &**f == field) {
                Some(i) => {
                    // Keeps insertion order, as a listpack does.
                    self.pairs.remove(i);
                    true
                }
                None => false,
            },
            Some(ix) => {
                let Some(pos) = ix.remove(field, |i| self.pairs[i].0.as_bytes()) else {
                    return false;
                };
                let last = self.pairs.len() - 1;
                if pos != last {
                    // The last pair moves into the hole.
                    ix.moved(&self.pairs[last].0, last, pos);
                }
                self.pairs.swap_remove(pos);
                if self.pairs.capacity() > 64 && self.pairs.len() < self.pairs.capacity() / 4 {
                    self.pairs.shrink_to(self.pairs.len() * 2);
                    ix.shrink_to(self.pairs.len() * 2);
                }
                true
            }
        }
    }

    /// Builds the index (the switch to the `hashtable` encoding).
    fn convert(&mut self) {
        if self.index.is_some() {
            return;
        }
        let mut ix = PosIndex::with_capacity(self.pairs.len() + 1);
        for (i, (f, _)) in self.pairs.iter().enumerate() {
            ix.insert_new(f, i);
        }
        self.index = Some(Box::new(ix));
    }

    /// Every (field, value) pair: insertion order in the compact form.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> + '_ {
        self.pairs.iter().map(|(f, v)| (&**f, &**v))
    }

    /// The pair at position `i` (`i < len()`), for random picks.
    pub fn pair_at(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.pairs.get(i).map(|(f, v)| (&**f, &**v))
    }

    /// One HSCAN step over an indexed hash: the pairs whose field hash is the smallest at or
    /// above `cursor`, about `count` of them (fields sharing a hash come together). A compact
    /// hash returns everything with cursor 0, as Redis does for a listpack.
    pub fn scan(&self, cursor: u64, count: usize) -> HashScan<'_> {
        let Some(ix) = &self.index else {
            return HashScan {
                cursor: 0,
                pairs: self.iter().collect(),
            };
        };
        let count = count.max(1);
        let mut cands: Vec<(u64, u32)> = self
            .pairs
            .iter()
            .enumerate()
            .filter_map(|(i, (f, _))| {
                let h = ix.hash(f);
                (h >= cursor).then_some((h, i as u32))
            })
            .collect();
        let pair = |i: u32| {
            let (f, v) = &self.pairs[i as usize];
            (&**f, &**v)
        };
        if cands.len() <= count {
            cands.sort_unstable();
            return HashScan {
                cursor: 0,
                pairs: cands.into_iter().map(|(_, i)| pair(i)).collect(),
            };
        }
        cands.select_nth_unstable(count);
        let next = cands[count].0;
        let mut page: Vec<(u64, u32)> = cands[..count]
            .iter()
            .copied()
            .filter(|&(h, _)| h < next)
            .collect();
        let cursor = if page.is_empty() {
            // Every candidate so far shares one hash: take that whole group.
            page = cands.iter().copied().filter(|&(h, _)| h == next).collect();
            next.checked_add(1).unwrap_or(0)
        } else {
            next
        };
        page.sort_unstable();
        HashScan {
            cursor,
            pairs: page.into_iter().map(|(_, i)| pair(i)).collect(),
        }
    }

    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        if self.index.is_none() {
            "listpack"
        } else {
            "hashtable"
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        let data: usize = self.pairs.iter().map(|(f, v)| f.heap_len() + v.len()).sum();
        let slots = self.pairs.capacity() * std::mem::size_of::<Pair>();
        let index = self.index.as_ref().map_or(0, |ix| {
            ix.capacity() * PosIndex::BUCKET_BYTES + std::mem::size_of::<PosIndex>()
        });
        data + slots + index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    #[test]
    fn compact_basics_keep_order() {
        let mut h = Hash::new();
        assert!(h.insert(b"a", b"1"));
        assert!(h.insert(b"b", b"2"));
        assert!(h.insert(b"c", b"3"));
        assert!(!h.insert(b"a", b"10"));
        assert_eq!(h.get(b"a"), Some(&b"10"[..]));
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        let fields: Vec<&[u8]> = h.iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec![&b"a"[..], b"c"]);
        assert_eq!(h.encoding(), "listpack");
        let s = h.scan(0, 1);
        assert_eq!((s.cursor, s.pairs.len()), (0, 2));
    }

    #[test]
    fn converts_on_size_and_length() {
        let mut h = Hash::new();
        for i in 0..128 {
            h.insert(format!("f{i}").as_bytes(), b"v");
        }
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"f128", b"v");
        assert_eq!(h.encoding(), "hashtable");
        let mut h = Hash::new();
        h.insert(b"f", &[b'x'; 64]);
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"g", &[b'x'; 65]);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f").map(<[u8]>::len), Some(64));
    }

    #[test]
    fn indexed_matches_model() {
        let mut h = Hash::new();
        let mut model = BTreeMap::new();
        let mut x: u64 = 42;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("k{}", (x >> 33) % 700).into_bytes();
            if (x >> 20).is_multiple_of(3) {
                assert_eq!(h.remove(&k), model.remove(&k).is_some());
            } else {
                let v = format!("{x}").into_bytes();
                assert_eq!(h.insert(&k, &v), model.insert(k, v).is_none());
            }
            assert_eq!(h.len(), model.len());
        }
        for (k, v) in &model {
            assert_eq!(h.get(k), Some(&v[..]));
        }
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn scan_returns_stable_fields_once() {
        let mut h = Hash::new();
        for i in 0..1000 {
            h.insert(format!("stable{i}").as_bytes(), b"v");
        }
        let mut seen = HashSet::new();
        let (mut cursor, mut round) = (0, 0);
        loop {
            let page = h.scan(cursor, 7);
            let next = page.cursor;
            let fields: Vec<Vec<u8>> = page.pairs.iter().map(|(f, _)| f.to_vec()).collect();
            for f in fields {
                assert!(seen.insert(f), "duplicate field");
            }
            for j in 0..5 {
                h.insert(format!("churn{round}:{j}").as_bytes(), b"x");
                h.remove(format!("churn{}:{j}", round / 2).as_bytes());
            }
            round += 1;
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("stable{i}").as_bytes()));
        }
    }
}
