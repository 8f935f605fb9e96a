//! The sorted-set value type.
//!
//! Small sets (at most [`MAX_LISTPACK_ENTRIES`] members, none longer than
//! [`MAX_LISTPACK_VALUE`] bytes) are one sorted `Vec`, like Redis's listpack: compact, and
//! every operation is a short linear or binary search. Larger sets keep a member -> score
//! hash map for O(1) lookups plus an order-statistics structure: a sorted sequence of
//! blocks (each a sorted `Vec` of at most [`BLOCK_MAX`] items) with a Fenwick tree over the
//! block sizes, so rank, select-by-rank and score/lex bounds are O(log n) and inserts and
//! removals are O(log n + block size). Items are ordered by (score, member bytes).

use std::cmp::Ordering;

use foldhash::fast::RandomState;
use hashbrown::HashMap;

/// Redis's `zset-max-listpack-entries` default.
pub const MAX_LISTPACK_ENTRIES: usize = 128;
/// Redis's `zset-max-listpack-value` default.
pub const MAX_LISTPACK_VALUE: usize = 64;
/// Largest block of the big encoding.
pub const BLOCK_MAX: usize = 256;

/// One member with its score.
pub type Item = (f64, Box<[u8]>);

fn cmp_item(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> Ordering {
    a_score
        .partial_cmp(&b_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a_member.cmp(b_member))
}

/// A Redis sorted set.
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    Small(Vec<Item>),
    Big(Big),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

#[derive(Clone, Debug, Default)]
struct Big {
    map: HashMap<Box<[u8]>, f64, RandomState>,
    blocks: Vec<Vec<Item>>,
    /// Fenwick tree over `blocks[i].len()`.
    fen: Vec<usize>,
    len: usize,
    heap: usize,
}

impl Big {
    fn rebuild_fen(&mut self) {
        let n = self.blocks.len();
        self.fen = vec![0; n];
        for i in 0..n {
            self.fen[i] += self.blocks[i].len();
            let j = i | (i + 1);
            if j < n {
                let v = self.fen[i];
                self.fen[j] += v;
            }
        }
    }

    fn fen_add(&mut self, mut i: usize, delta: isize) {
        while i < self.fen.len() {
            self.fen[i] = self.fen[i].wrapping_add_signed(delta);
            i |= i + 1;
        }
    }

    /// Number of items in blocks `0..i`.
    fn prefix(&self, i: usize) -> usize {
        let mut s = 0;
        let mut i = i;
        while i > 0 {
            s += self.fen[i - 1];
            i &= i - 1;
        }
        s
    }

    /// (block, offset) of the item with rank `r` (< len).
    fn locate(&self, r: usize) -> (usize, usize) {
        let n = self.fen.len();
        let mut pos = 0usize;
        let mut rem = r;
        let mut step = n.next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= n && self.fen[next - 1] <= rem {
                pos = next;
                rem -= self.fen[next - 1];
            }
            step >>= 1;
        }
        (pos, rem)
    }

    /// Rank of the first item for which `before` is false (`before` is true on a prefix).
    fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let bi = self.blocks.partition_point(|b| {
            let (s, m) = b.last().map(|(s, m)| (*s, &m[..])).unwrap_or((0.0, &[]));
            before(s, m)
        });
        if bi == self.blocks.len() {
            return self.len;
        }
        let off = self.blocks[bi].partition_point(|(s, m)| before(*s, m));
        self.prefix(bi) + off
    }

    fn insert_sorted(&mut self, score: f64, member: Box<[u8]>) {
        let mut bi = self.blocks.partition_point(|b| {
            b.last()
                .is_some_and(|(s, m)| cmp_item(*s, m, score, &member) == Ordering::Less)
        });
        if self.blocks.is_empty() {
            self.blocks.push(Vec::new());
            self.rebuild_fen();
        }
        if bi == self.blocks.len() {
            bi -= 1;
        }
        let b = &mut self.blocks[bi];
        let off = b.partition_point(|(s, m)| cmp_item(*s, m, score, &member) == Ordering::Less);
        b.insert(off, (score, member));
        self.len += 1;
        if b.len() > BLOCK_MAX {
            let tail = b.split_off(b.len() / 2);
            self.blocks.insert(bi + 1, tail);
            self.rebuild_fen();
        } else {
            self.fen_add(bi, 1);
        }
    }

    fn remove_sorted(&mut self, score: f64, member: &[u8]) {
        let bi = self.blocks.partition_point(|b| {
            b.last()
                .is_some_and(|(s, m)| cmp_item(*s, m, score, member) == Ordering::Less)
        });
        let Some(b) = self.blocks.get_mut(bi) else {
            return;
        };
        let off = b.partition_point(|(s, m)| cmp_item(*s, m, score, member) == Ordering::Less);
        if off >= b.len() || &b[off].1[..] != member {
            return;
        }
        b.remove(off);
        self.len -= 1;
        let small = b.len();
        if small == 0 {
            self.blocks.remove(bi);
            self.rebuild_fen();
        } else if small < BLOCK_MAX / 8
            && bi + 1 < self.blocks.len()
            && small + self.blocks[bi + 1].len() <= BLOCK_MAX / 2
        {
            let next = self.blocks.remove(bi + 1);
            self.blocks[bi].extend(next);
            self.rebuild_fen();
        } else {
            self.fen_add(bi, -1);
        }
    }
}

/// Where [`ZSet::add`] left a member.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddResult {
    /// A new member.
    Added,
    /// An existing member whose score changed (from the given old score).
    Updated(f64),
    /// An existing member with the same score.
    Unchanged,
}

impl ZSet {
    /// An empty sorted set.
    pub fn new() -> Self {
        ZSet::default()
    }

    /// An empty sorted set that will hold about `n` members whose longest has `max_len`
    /// bytes (picks the encoding up front, as Redis's `zsetTypeCreate`).
    pub fn with_hint(n: usize, max_len: usize) -> Self {
        if n > MAX_LISTPACK_ENTRIES || max_len > MAX_LISTPACK_VALUE {
            ZSet {
                repr: Repr::Big(Big::default()),
            }
        } else {
            ZSet::default()
        }
    }

    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Small(_) => "listpack",
            Repr::Big(_) => "skiplist",
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Small(v) => {
                v.capacity() * std::mem::size_of::<Item>()
                    + v.iter().map(|(_, m)| m.len()).sum::<usize>()
            }
            Repr::Big(b) => {
                b.heap
                    + b.map.capacity() * (std::mem::size_of::<(Box<[u8]>, f64)>() + 1)
                    + b.blocks
                        .iter()
                        .map(|x| x.capacity() * std::mem::size_of::<Item>())
                        .sum::<usize>()
                    + b.fen.capacity() * 8
            }
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(v) => v.len(),
            Repr::Big(b) => b.len,
        }
    }

    /// True when there is no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Small(v) => v.iter().find(|(_, m)| &m[..] == member).map(|(s, _)| *s),
            Repr::Big(b) => b.map.get(member).copied(),
        }
    }

    fn convert(&mut self) {
        if let Repr::Small(v) = &mut self.repr {
            let items = std::mem::take(v);
            let mut big = Big::default();
            for (s, m) in items {
                big.heap += 2 * m.len();
                big.map.insert(m.clone(), s);
                big.insert_sorted(s, m);
            }
            self.repr = Repr::Big(big);
        }
    }

    /// Sets `member`'s score to `score` (never NaN), adding it when new.
    pub fn add(&mut self, member: &[u8], score: f64) -> AddResult {
        // -0 is stored as 0, as Redis's listpack does (it keeps "-0" as the integer 0).
        let score = if score == 0.0 { 0.0 } else { score };
        if let Repr::Small(v) = &self.repr {
            let new = !v.iter().any(|(_, m)| &m[..] == member);
            if new && (v.len() >= MAX_LISTPACK_ENTRIES || member.len() > MAX_LISTPACK_VALUE) {
                self.convert();
            }
        }
        match &mut self.repr {
            Repr::Small(v) => {
                let res = match v.iter().position(|(_, m)| &m[..] == member) {
                    Some(i) => {
                        let old = v[i].0;
                        if old == score {
                            return AddResult::Unchanged;
                        }
                        v.remove(i);
                        AddResult::Updated(old)
                    }
                    None => AddResult::Added,
                };
                let off =
                    v.partition_point(|(s, m)| cmp_item(*s, m, score, member) == Ordering::Less);
                v.insert(off, (score, member.into()));
                res
            }
            Repr::Big(b) => match b.map.get_mut(member) {
                Some(s) => {
                    let old = *s;
                    if old == score {
                        return AddResult::Unchanged;
                    }
                    *s = score;
                    b.remove_sorted(old, member);
                    b.insert_sorted(score, member.into());
                    AddResult::Updated(old)
                }
                None => {
                    b.map.insert(member.into(), score);
                    b.heap += 2 * member.len();
                    b.insert_sorted(score, member.into());
                    AddResult::Added
                }
            },
        }
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Small(v) => {
                let i = v.iter().position(|(_, m)| &m[..] == member)?;
                Some(v.remove(i).0)
            }
            Repr::Big(b) => {
                let s = b.map.remove(member)?;
                b.heap -= 2 * member.len();
                b.remove_sorted(s, member);
                Some(s)
            }
        }
    }

    /// 0-based ascending rank of `member`, with its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.repr {
            Repr::Small(v) => v
                .iter()
                .position(|(_, m)| &m[..] == member)
                .map(|i| (i, v[i].0)),
            Repr::Big(b) => {
                let s = *b.map.get(member)?;
                let r = b.partition_point(|bs, bm| cmp_item(bs, bm, s, member) == Ordering::Less);
                Some((r, s))
            }
        }
    }

    /// The item of ascending rank `r`.
    pub fn get(&self, r: usize) -> Option<(&[u8], f64)> {
        if r >= self.len() {
            return None;
        }
        match &self.repr {
            Repr::Small(v) => v.get(r).map(|(s, m)| (&m[..], *s)),
            Repr::Big(b) => {
                let (bi, off) = b.locate(r);
                b.blocks
                    .get(bi)
                    .and_then(|x| x.get(off))
                    .map(|(s, m)| (&m[..], *s))
            }
        }
    }

    /// Rank of the first item for which `before(score, member)` is false; `before` must be
    /// true exactly on a prefix of the ascending order.
    pub fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Small(v) => v.partition_point(|(s, m)| before(*s, m)),
            Repr::Big(b) => b.partition_point(before),
        }
    }

    /// Items of ascending ranks `start..end` (clamped), in ascending order; reversible.
    pub fn range(
        &self,
        start: usize,
        end: usize,
    ) -> Box<dyn DoubleEndedIterator<Item = (&[u8], f64)> + '_> {
        let end = end.min(self.len());
        if start >= end {
            return Box::new(std::iter::empty());
        }
        match &self.repr {
            Repr::Small(v) => Box::new(v[start..end].iter().map(|(s, m)| (&m[..], *s))),
            Repr::Big(b) => {
                let (b0, o0) = b.locate(start);
                let (b1, o1) = b.locate(end - 1);
                let last = b1 - b0;
                Box::new(
                    b.blocks[b0..=b1]
                        .iter()
                        .enumerate()
                        .flat_map(move |(k, blk)| {
                            let lo = if k == 0 { o0 } else { 0 };
                            let hi = if k == last { o1 + 1 } else { blk.len() };
                            blk[lo..hi].iter()
                        })
                        .map(|(s, m)| (&m[..], *s)),
                )
            }
        }
    }

    /// One ZSCAN page from `cursor`. The small form comes back whole with cursor 0 (as
    /// Redis does for a listpack); the big form is walked in member-hash order, so a member
    /// present for the whole scan is returned exactly once however others are added,
    /// removed or re-scored. Returns (next cursor, 0 when done; members with scores).
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(&[u8], f64)>) {
        let Repr::Big(big) = &self.repr else {
            return (0, self.iter().collect());
        };
        use std::hash::BuildHasher;
        let hasher = big.map.hasher();
        let mut found: Vec<(u64, &[u8], f64)> = big
            .map
            .iter()
            .filter_map(|(m, &s)| {
                let h = hasher.hash_one(&**m);
                (h >= cursor).then_some((h, &**m, s))
            })
            .collect();
        found.sort_unstable_by_key(|x| x.0);
        let mut end = count.max(1).min(found.len());
        // Members sharing a hash go in the same page so the cursor can move past them.
        while end > 0 && end < found.len() && found[end].0 == found[end - 1].0 {
            end += 1;
        }
        let next = found.get(end).map_or(0, |x| x.0);
        found.truncate(end);
        (next, found.into_iter().map(|(_, m, s)| (m, s)).collect())
    }

    /// All items in ascending order.
    pub fn iter(&self) -> Box<dyn DoubleEndedIterator<Item = (&[u8], f64)> + '_> {
        self.range(0, self.len())
    }

    /// Removes the items of ascending ranks `start..end` (clamped); returns them in order.
    pub fn remove_range(&mut self, start: usize, end: usize) -> Vec<Item> {
        let end = end.min(self.len());
        if start >= end {
            return Vec::new();
        }
        match &mut self.repr {
            Repr::Small(v) => v.drain(start..end).collect(),
            Repr::Big(_) => {
                let items: Vec<Item> = self
                    .range(start, end)
                    .map(|(m, s)| (s, Box::from(m)))
                    .collect();
                for (_, m) in &items {
                    self.remove(m);
                }
                items
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_returns_members_present_throughout_despite_churn() {
        let mut z = ZSet::new();
        for i in 0..1000 {
            z.add(format!("stable:{i}").as_bytes(), i as f64);
        }
        assert_eq!(z.encoding(), "skiplist");
        let mut seen = std::collections::HashSet::new();
        let (mut cursor, mut round) = (0u64, 0);
        loop {
            let (next, page) = z.scan(cursor, 10);
            for (m, _) in page {
                assert!(seen.insert(m.to_vec()), "member returned twice");
            }
            // Churn between calls: remove low-ranked members and add new ones.
            for j in 0..5 {
                z.remove(format!("churn:{}:{j}", round.max(1) - 1).as_bytes());
                z.add(format!("churn:{round}:{j}").as_bytes(), -1.0);
            }
            round += 1;
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("stable:{i}").as_bytes()));
        }
    }

    #[test]
    fn small_and_big_agree() {
        let mut z = ZSet::new();
        let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
        let mut x: u64 = 12345;
        for i in 0..5000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = format!("m{}", x % 700).into_bytes();
            let s = (x % 50) as f64;
            if i % 3 == 0 {
                let a = z.remove(&m);
                let pos = model.iter().position(|(_, mm)| *mm == m);
                assert_eq!(a.is_some(), pos.is_some());
                if let Some(p) = pos {
                    model.remove(p);
                }
            } else {
                z.add(&m, s);
                model.retain(|(_, mm)| *mm != m);
                model.push((s, m));
            }
            if i % 97 == 0 {
                model.sort_by(|a, b| cmp_item(a.0, &a.1, b.0, &b.1));
                assert_eq!(z.len(), model.len());
                let got: Vec<(f64, Vec<u8>)> = z.iter().map(|(m, s)| (s, m.to_vec())).collect();
                assert_eq!(got, model);
                for (r, (s, m)) in model.iter().enumerate() {
                    assert_eq!(z.rank(m), Some((r, *s)));
                    assert_eq!(z.get(r).map(|(m, _)| m.to_vec()), Some(m.clone()));
                }
                if model.len() > 10 {
                    let rev: Vec<Vec<u8>> = z.range(3, 9).rev().map(|(m, _)| m.to_vec()).collect();
                    let want: Vec<Vec<u8>> =
                        model[3..9].iter().rev().map(|x| x.1.clone()).collect();
                    assert_eq!(rev, want);
                }
            }
        }
        assert_eq!(z.encoding(), "skiplist");
        let n = z.len();
        let gone = z.remove_range(10, 100);
        assert_eq!(gone.len(), 90);
        assert_eq!(z.len(), n - 90);
    }
}
