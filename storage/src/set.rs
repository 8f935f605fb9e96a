//! The set value type, in three encodings as Redis 7.2 keeps them:
//!
//! * `intset`: a sorted `Vec<i64>` for sets whose members are all canonical integers, up
//!   to [`MAX_INTSET_ENTRIES`] members (binary-search membership);
//! * `listpack`: a small `Vec` of short members (up to [`MAX_LISTPACK_ENTRIES`] members of
//!   at most [`MAX_LISTPACK_VALUE`] bytes; linear membership over a few cache lines);
//! * `hashtable`: a dense `Vec` of members indexed by a hash table of positions, giving
//!   O(1) membership, O(1) removal (swap-remove) and O(1) uniform random picks.
//!
//! Every form is indexable by position `0..len`, which SPOP, SRANDMEMBER and SSCAN use.
//! Sets only grow into larger forms, as in Redis.

use std::borrow::Cow;

use rand::Rng;

use crate::inline::InlineBytes;
use crate::posindex::PosIndex;
use crate::value::parse_canonical_i64;

/// Most members an `intset` holds (Redis `set-max-intset-entries`).
pub const MAX_INTSET_ENTRIES: usize = 512;
/// Most members a `listpack` set holds (Redis `set-max-listpack-entries`).
pub const MAX_LISTPACK_ENTRIES: usize = 128;
/// Longest member a `listpack` set holds (Redis `set-max-listpack-value`).
pub const MAX_LISTPACK_VALUE: usize = 64;

/// A member as stored: an integer of an `intset` or the bytes of another form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    /// An `intset` member.
    Int(i64),
    /// A member's bytes.
    Bytes(&'a [u8]),
}

impl Elem<'_> {
    /// Calls `f` with the member's bytes (integers are formatted on the stack).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Int(i) => f(itoa::Buffer::new().format(*i).as_bytes()),
            Elem::Bytes(b) => f(b),
        }
    }

    /// The member's bytes, borrowed when possible.
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Elem::Int(i) => Cow::Owned(itoa::Buffer::new().format(*i).as_bytes().to_vec()),
            Elem::Bytes(b) => Cow::Borrowed(b),
        }
    }

    /// A copy of the member's bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }
}

/// The `hashtable` form: dense members plus their index.
#[derive(Clone, Default)]
struct Big {
    items: Vec<InlineBytes>,
    index: PosIndex,
}

impl std::fmt::Debug for Big {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(self.items.iter().map(|m| String::from_utf8_lossy(m)))
            .finish()
    }
}

impl Big {
    fn with_capacity(n: usize) -> Self {
        Big {
            items: Vec::with_capacity(n),
            index: PosIndex::with_capacity(n),
        }
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        self.index.find(m, |i| self.items[i].as_bytes())
    }

    fn insert(&mut self, m: &[u8]) -> bool {
        let pos = self.items.len();
        let added = self
            .index
            .insert(m, pos, |i| self.items[i].as_bytes())
            .is_ok();
        if added {
            self.items.push(InlineBytes::new(m));
        }
        added
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.index.remove(m, |i| self.items[i].as_bytes()) {
            Some(pos) => {
                self.remove_at_unindexed(pos);
                true
            }
            None => false,
        }
    }

    /// Removes the member at `pos` whose index entry is already gone; returns it.
    fn remove_at_unindexed(&mut self, pos: usize) -> InlineBytes {
        let last = self.items.len() - 1;
        let m = self.items.swap_remove(pos);
        if pos != last {
            self.index.moved(&self.items[pos], last, pos);
        }
        m
    }

    fn remove_at(&mut self, pos: usize) -> InlineBytes {
        self.index.remove_at(&self.items[pos], pos);
        self.remove_at_unindexed(pos)
    }
}

#[derive(Clone, Debug)]
enum Repr {
    Ints(Vec<i64>),
    Small(Vec<InlineBytes>),
    Big(Big),
}

/// A Redis set.
#[derive(Clone, Debug)]
pub struct Set(Repr);

impl Default for Set {
    fn default() -> Self {
        Set(Repr::Ints(Vec::new()))
    }
}

impl Set {
    /// An empty set in the form Redis's `setTypeCreate` picks for a first member `first`
    /// and about `hint` members to come.
    pub fn for_member(first: &[u8], hint: usize) -> Self {
        if hint <= MAX_INTSET_ENTRIES && parse_canonical_i64(first).is_some() {
            Set(Repr::Ints(Vec::with_capacity(hint)))
        } else if hint <= MAX_LISTPACK_ENTRIES {
            Set(Repr::Small(Vec::with_capacity(hint)))
        } else {
            Set(Repr::Big(Big::with_capacity(hint)))
        }
    }

    /// Converts to `hashtable` when `hint` more members would overflow the compact form
    /// (Redis's `setTypeMaybeConvert`, called by SADD with the argument count).
    pub fn reserve_hint(&mut self, hint: usize) {
        let convert = match &self.0 {
            Repr::Ints(_) => hint > MAX_INTSET_ENTRIES,
            Repr::Small(_) => hint > MAX_LISTPACK_ENTRIES,
            Repr::Big(_) => false,
        };
        if convert {
            self.convert_to_big(hint);
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Ints(v) => v.len(),
            Repr::Small(v) => v.len(),
            Repr::Big(b) => b.items.len(),
        }
    }

    /// True when the set has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The member at position `i` (`i < len`).
    pub fn at(&self, i: usize) -> Elem<'_> {
        match &self.0 {
            Repr::Ints(v) => Elem::Int(v[i]),
            Repr::Small(v) => Elem::Bytes(&v[i]),
            Repr::Big(b) => Elem::Bytes(&b.items[i]),
        }
    }

    /// Iterates over the members (in storage order).
    pub fn iter(&self) -> impl Iterator<Item = Elem<'_>> + '_ {
        (0..self.len()).map(move |i| self.at(i))
    }

    /// True when `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.0 {
            Repr::Ints(v) => parse_canonical_i64(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            Repr::Small(v) => v.iter().any(|x| &**x == m),
            Repr::Big(b) => b.find(m).is_some(),
        }
    }

    /// True when `e` (a member of another set) is a member of this one.
    pub fn contains_elem(&self, e: Elem<'_>) -> bool {
        match (e, &self.0) {
            (Elem::Int(i), Repr::Ints(v)) => v.binary_search(&i).is_ok(),
            (Elem::Bytes(b), _) => self.contains(b),
            (Elem::Int(_), _) => e.with_bytes(|b| self.contains(b)),
        }
    }

    fn convert_to_big(&mut self, extra: usize) {
        let mut big = Big::with_capacity(self.len() + extra);
        for e in self.iter() {
            e.with_bytes(|b| big.insert(b));
        }
        self.0 = Repr::Big(big);
    }

    /// Adds `m`; returns true when it was not a member. Converts to a larger form as
    /// Redis 7.2 does.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Ints(v) => {
                if let Some(i) = parse_canonical_i64(m) {
                    let Err(pos) = v.binary_search(&i) else {
                        return false;
                    };
                    v.insert(pos, i);
                    if v.len() > MAX_INTSET_ENTRIES {
                        self.convert_to_big(0);
                    }
                    return true;
                }
                if v.len() < MAX_LISTPACK_ENTRIES && m.len() <= MAX_LISTPACK_VALUE {
                    let mut small: Vec<InlineBytes> = Vec::with_capacity(v.len() + 1);
                    let mut buf = itoa::Buffer::new();
                    small.extend(
                        v.iter()
                            .map(|i| InlineBytes::new(buf.format(*i).as_bytes())),
                    );
                    small.push(InlineBytes::new(m));
                    self.0 = Repr::Small(small);
                } else {
                    self.convert_to_big(1);
                    if let Repr::Big(b) = &mut self.0 {
                        b.insert(m);
                    }
                }
                true
            }
            Repr::Small(v) => {
                if v.iter().any(|x| &**x == m) {
                    return false;
                }
                if v.len() < MAX_LISTPACK_ENTRIES && m.len() <= MAX_LISTPACK_VALUE {
                    v.push(InlineBytes::new(m));
                } else {
                    self.convert_to_big(1);
                    if let Repr::Big(b) = &mut self.0 {
                        b.insert(m);
                    }
                }
                true
            }
            Repr::Big(b) => b.insert(m),
        }
    }

    /// Adds a member of another set.
    pub fn insert_elem(&mut self, e: Elem<'_>) -> bool {
        e.with_bytes(|b| self.insert(b))
    }

    /// Removes `m`; returns true when it was a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Ints(v) => {
                let Some(i) = parse_canonical_i64(m) else {
                    return false;
                };
                match v.binary_search(&i) {
                    Ok(pos) => {
                        v.remove(pos);
                        true
                    }
                    Err(_) => false,
                }
            }
            Repr::Small(v) => match v.iter().position(|x| &**x == m) {
                Some(pos) => {
                    v.swap_remove(pos);
                    true
                }
                None => false,
            },
            Repr::Big(b) => b.remove(m),
        }
    }

    /// Removes and returns the member at position `i` (`i < len`).
    pub fn remove_at(&mut self, i: usize) -> Vec<u8> {
        match &mut self.0 {
            Repr::Ints(v) => itoa::Buffer::new().format(v.remove(i)).as_bytes().to_vec(),
            Repr::Small(v) => v.swap_remove(i).into_vec(),
            Repr::Big(b) => b.remove_at(i).into_vec(),
        }
    }

    /// A uniformly random position, if the set is not empty.
    pub fn random_index(&self, rng: &mut impl Rng) -> Option<usize> {
        let n = self.len();
        (n > 0).then(|| rng.random_range(0..n))
    }

    /// Removes and returns a uniformly random member.
    pub fn pop_random(&mut self, rng: &mut impl Rng) -> Option<Vec<u8>> {
        let i = self.random_index(rng)?;
        Some(self.remove_at(i))
    }

    /// Keeps only the members for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(Elem<'_>) -> bool) {
        match &mut self.0 {
            Repr::Ints(v) => v.retain(|i| keep(Elem::Int(*i))),
            Repr::Small(v) => v.retain(|m| keep(Elem::Bytes(m))),
            Repr::Big(b) => {
                let mut i = 0;
                while i < b.items.len() {
                    if keep(Elem::Bytes(&b.items[i])) {
                        i += 1;
                    } else {
                        b.remove_at(i);
                    }
                }
            }
        }
    }

    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        match &self.0 {
            Repr::Ints(_) => "intset",
            Repr::Small(_) => "listpack",
            Repr::Big(_) => "hashtable",
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Ints(v) => v.capacity() * 8,
            Repr::Small(v) => v.capacity() * 24 + v.iter().map(|m| m.heap_len()).sum::<usize>(),
            Repr::Big(b) => {
                b.items.capacity() * 24
                    + b.index.capacity() * PosIndex::BUCKET_BYTES
                    + b.items.iter().map(|m| m.heap_len()).sum::<usize>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(s: &Set) -> Vec<Vec<u8>> {
        let mut v: Vec<_> = s.iter().map(|e| e.to_vec()).collect();
        v.sort();
        v
    }

    #[test]
    fn encodings_grow() {
        let mut s = Set::for_member(b"1", 1);
        assert_eq!(s.encoding(), "intset");
        for i in 0..512 {
            assert!(s.insert(i.to_string().as_bytes()));
        }
        assert!(!s.insert(b"5"));
        assert_eq!(s.encoding(), "intset");
        s.insert(b"600");
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 513);
        assert!(s.contains(b"600") && s.contains(b"0") && !s.contains(b"-1"));

        let mut s = Set::for_member(b"1", 1);
        s.insert(b"1");
        s.insert(b"a");
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(members(&s), vec![b"1".to_vec(), b"a".to_vec()]);
        s.insert(&[b'x'; 65]);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn big_remove_and_pop_keep_index_consistent() {
        let mut s = Set::for_member(b"a", 1000);
        assert_eq!(s.encoding(), "hashtable");
        for i in 0..1000 {
            s.insert(format!("m{i}").as_bytes());
        }
        for i in (0..1000).step_by(3) {
            assert!(s.remove(format!("m{i}").as_bytes()));
        }
        assert!(!s.remove(b"m0"));
        let mut rng = rand::rng();
        let mut left = s.len();
        while let Some(m) = s.pop_random(&mut rng) {
            assert!(!s.contains(&m));
            left -= 1;
            assert_eq!(s.len(), left);
            for e in s.iter().take(3) {
                assert!(s.contains_elem(e));
            }
        }
        assert!(s.is_empty());
    }

    #[test]
    fn big_matches_model_with_short_and_long_members() {
        let mut s = Set::for_member(b"x", 200);
        let mut model = std::collections::HashSet::new();
        let mut x: u64 = 7;
        for _ in 0..30_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (x >> 33) % 900;
            // Short members are stored inline, long ones (over 22 bytes) on the heap.
            let m = if n.is_multiple_of(2) {
                format!("m{n}").into_bytes()
            } else {
                format!("a-long-member-name-{n:>30}").into_bytes()
            };
            match (x >> 20) % 4 {
                0 => assert_eq!(s.remove(&m), model.remove(&m)),
                1 if !model.is_empty() => {
                    let i = (x >> 40) as usize % s.len();
                    let got = s.remove_at(i);
                    assert!(model.remove(&got));
                }
                _ => assert_eq!(s.insert(&m), model.insert(m.clone())),
            }
            assert_eq!(s.len(), model.len());
        }
        for m in &model {
            assert!(s.contains(m));
        }
        let mut all = members(&s);
        all.sort();
        let mut want: Vec<Vec<u8>> = model.into_iter().collect();
        want.sort();
        assert_eq!(all, want);
    }

    #[test]
    fn retain_and_non_canonical_ints() {
        let mut s = Set::for_member(b"1", 3);
        s.insert(b"1");
        s.insert(b"2");
        s.insert(b"3");
        assert!(!s.contains(b"01"));
        s.insert(b"01");
        assert_eq!(s.encoding(), "listpack");
        s.retain(|e| e != Elem::Bytes(b"2"));
        assert_eq!(
            members(&s),
            vec![b"01".to_vec(), b"1".to_vec(), b"3".to_vec()]
        );
    }
}
