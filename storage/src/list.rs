//! The list value type: a deque of owned byte strings, with O(1) push and pop at both ends
//! and O(1) access by index. Up to [`BLOCK`] elements it is one ring buffer; past that, a
//! ring of fixed blocks of [`BLOCK`] slots, so a long list grows by one small allocation per
//! [`BLOCK`] elements instead of doubling (and copying) one ring: measured under RPUSH, the
//! doubling's `realloc` took 9% of the server's CPU, mostly the kernel zeroing the new
//! ring's pages.
//!
//! Redis 7.2 reports a small list as `listpack` and a large one as `quicklist`; [`List`]
//! tracks the same thresholds (more than 128 entries or about 8 KB of payload turns it
//! into a "quicklist", and it turns back once it shrinks to half of both limits, as
//! Redis's `listTypeTryConvertQuicklist` does) so OBJECT ENCODING answers alike.

use std::collections::{vec_deque, VecDeque};
use std::iter::{FlatMap, Flatten};

/// One list element: short ones live inline in the deque slot, longer ones on the heap.
pub use crate::inline::InlineBytes as Elem;

/// Most entries a list may hold and still be reported as `listpack`.
pub const LISTPACK_MAX_ENTRIES: usize = 128;
/// Most payload bytes (with per-entry overhead) a `listpack` list may hold.
pub const LISTPACK_MAX_BYTES: usize = 8192;
/// Per-entry overhead counted towards [`LISTPACK_MAX_BYTES`] (listpack header + backlen).
const ENTRY_OVERHEAD: usize = 2;

/// Slots per block of a long list (24 bytes each: 3 KiB, a jemalloc size class), and the
/// most elements a list keeps in one ring buffer.
pub const BLOCK: usize = 128;

/// A list with fewer elements than this goes back to one ring buffer.
const SMALL_AGAIN: usize = BLOCK / 2;

/// One slot of a block: `None` outside the elements.
type Slot = Option<Elem>;

/// The elements: one ring buffer up to [`BLOCK`] of them, blocks past that.
#[derive(Clone, Debug)]
enum Items {
    Small(VecDeque<Elem>),
    Big(Blocks),
}

/// A ring of blocks of [`BLOCK`] slots. Element `i` lives in slot `head + i` counted
/// across the blocks; every slot outside the elements is `None`, so a block holds
/// elements in one run (the first block up to its end, the last from its start).
#[derive(Clone, Debug)]
struct Blocks {
    blocks: VecDeque<Box<[Slot; BLOCK]>>,
    len: usize,
    /// The first element's slot in the first block (`< BLOCK`).
    head: usize,
}

fn new_block() -> Box<[Slot; BLOCK]> {
    Box::new(std::array::from_fn(|_| None))
}

/// Puts `e` into a slot outside the elements (so `None`) without reading the slot first:
/// `*slot = Some(e)` would load it to drop the old value, and that load waited for the
/// line from the core that pushed last (perf: two thirds of `push_front`'s cycles under
/// LPUSH). The forgotten value is `None`, which owns nothing.
#[inline]
fn fill(slot: &mut Slot, e: Elem) {
    debug_assert!(slot.is_none(), "a slot outside the elements holds one");
    std::mem::forget(slot.replace(e));
}

/// The elements of a block, in order.
fn block_elems(b: &[Slot; BLOCK]) -> Flatten<std::slice::Iter<'_, Slot>> {
    b.iter().flatten()
}

type BlockIter<'a> = FlatMap<
    vec_deque::Iter<'a, Box<[Slot; BLOCK]>>,
    Flatten<std::slice::Iter<'a, Slot>>,
    fn(&'a Box<[Slot; BLOCK]>) -> Flatten<std::slice::Iter<'a, Slot>>,
>;

impl Blocks {
    /// `v` (more than [`BLOCK`] elements or not) in blocks, from slot 0.
    fn from_vec(v: Vec<Elem>) -> Self {
        let len = v.len();
        let mut blocks = VecDeque::with_capacity(len.div_ceil(BLOCK));
        let mut it = v.into_iter();
        while it.len() > 0 {
            let mut b = new_block();
            for (slot, e) in b.iter_mut().zip(it.by_ref()) {
                *slot = Some(e);
            }
            blocks.push_back(b);
        }
        Blocks {
            blocks,
            len,
            head: 0,
        }
    }

    fn slot(&self, i: usize) -> Option<&Elem> {
        if i >= self.len {
            return None;
        }
        let p = self.head + i;
        self.blocks.get(p / BLOCK)?[p % BLOCK].as_ref()
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut Elem> {
        if i >= self.len {
            return None;
        }
        let p = self.head + i;
        self.blocks.get_mut(p / BLOCK)?[p % BLOCK].as_mut()
    }

    fn push_back(&mut self, e: Elem) {
        let p = self.head + self.len;
        if p / BLOCK >= self.blocks.len() {
            self.blocks.push_back(new_block());
        }
        if let Some(b) = self.blocks.get_mut(p / BLOCK) {
            fill(&mut b[p % BLOCK], e);
            self.len += 1;
        }
    }

    fn push_front(&mut self, e: Elem) {
        if self.head == 0 {
            self.blocks.push_front(new_block());
            self.head = BLOCK;
        }
        self.head -= 1;
        if let Some(b) = self.blocks.front_mut() {
            fill(&mut b[self.head], e);
            self.len += 1;
        }
    }

    fn pop_front(&mut self) -> Option<Elem> {
        if self.len == 0 {
            return None;
        }
        let e = self.blocks.front_mut()?[self.head].take();
        self.len -= 1;
        self.head += 1;
        if self.head == BLOCK || self.len == 0 {
            self.blocks.pop_front();
            self.head = 0;
        }
        e
    }

    fn pop_back(&mut self) -> Option<Elem> {
        if self.len == 0 {
            return None;
        }
        let p = self.head + self.len - 1;
        let e = self.blocks.get_mut(p / BLOCK)?[p % BLOCK].take();
        self.len -= 1;
        if p.is_multiple_of(BLOCK) || self.len == 0 {
            self.blocks.pop_back();
            if self.blocks.is_empty() {
                self.head = 0;
            }
        }
        e
    }

    /// Every element, in order (the `None` slots fall out).
    fn all(&self) -> BlockIter<'_> {
        let f: fn(&Box<[Slot; BLOCK]>) -> Flatten<std::slice::Iter<'_, Slot>> = |b| block_elems(b);
        self.blocks.iter().flat_map(f)
    }

    /// Elements `start..` (`start <= len`), from the block that holds `start`.
    fn iter_from(&self, start: usize) -> std::iter::Skip<BlockIter<'_>> {
        let p = self.head + start;
        let bi = (p / BLOCK).min(self.blocks.len());
        // Elements in the blocks before `bi`.
        let before = if bi == 0 { 0 } else { bi * BLOCK - self.head };
        let f: fn(&Box<[Slot; BLOCK]>) -> Flatten<std::slice::Iter<'_, Slot>> = |b| block_elems(b);
        self.blocks.range(bi..).flat_map(f).skip(start - before)
    }
}

impl Default for Items {
    fn default() -> Self {
        Items::Small(VecDeque::new())
    }
}

impl Items {
    #[inline]
    fn len(&self) -> usize {
        match self {
            Items::Small(d) => d.len(),
            Items::Big(b) => b.len,
        }
    }

    /// Moves a full ring buffer into blocks.
    #[cold]
    fn spill(&mut self) {
        if let Items::Small(d) = self {
            let v: Vec<Elem> = std::mem::take(d).into();
            *self = Items::Big(Blocks::from_vec(v));
        }
    }

    /// Back to one ring buffer once blocks hold few elements.
    fn maybe_small(&mut self) {
        if matches!(self, Items::Big(b) if b.len < SMALL_AGAIN) {
            let v = self.take_vec();
            *self = Items::Small(v.into());
        }
    }

    fn from_vec(v: Vec<Elem>) -> Self {
        if v.len() <= BLOCK {
            Items::Small(v.into())
        } else {
            Items::Big(Blocks::from_vec(v))
        }
    }

    /// Pushes `e` at the tail (`tail`) or the head, spilling a full ring into blocks.
    #[inline]
    fn push(&mut self, e: Elem, tail: bool) {
        if let Items::Small(d) = self {
            if d.len() < BLOCK {
                if tail {
                    d.push_back(e);
                } else {
                    d.push_front(e);
                }
                return;
            }
            self.spill();
        }
        if let Items::Big(b) = self {
            if tail {
                b.push_back(e);
            } else {
                b.push_front(e);
            }
        }
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Elem> {
        match self {
            Items::Small(d) => d.pop_front(),
            Items::Big(b) => {
                let e = b.pop_front();
                self.maybe_small();
                e
            }
        }
    }

    #[inline]
    fn pop_back(&mut self) -> Option<Elem> {
        match self {
            Items::Small(d) => d.pop_back(),
            Items::Big(b) => {
                let e = b.pop_back();
                self.maybe_small();
                e
            }
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Option<&Elem> {
        match self {
            Items::Small(d) => d.get(i),
            Items::Big(b) => b.slot(i),
        }
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut Elem> {
        match self {
            Items::Small(d) => d.get_mut(i),
            Items::Big(b) => b.slot_mut(i),
        }
    }

    fn insert(&mut self, i: usize, e: Elem) {
        match self {
            Items::Small(d) if d.len() < BLOCK => d.insert(i, e),
            _ => {
                let mut v = self.take_vec();
                v.insert(i.min(v.len()), e);
                *self = Items::from_vec(v);
            }
        }
    }

    /// Every element, in order, leaving the list empty.
    fn take_vec(&mut self) -> Vec<Elem> {
        match std::mem::take(self) {
            Items::Small(d) => d.into(),
            Items::Big(mut b) => {
                let mut v = Vec::with_capacity(b.len);
                while let Some(e) = b.pop_front() {
                    v.push(e);
                }
                v
            }
        }
    }

    fn retain(&mut self, f: impl FnMut(&Elem) -> bool) {
        match self {
            Items::Small(d) => d.retain(f),
            Items::Big(_) => {
                let mut v = self.take_vec();
                v.retain(f);
                *self = Items::from_vec(v);
            }
        }
    }

    fn clear(&mut self) {
        *self = Items::default();
    }

    fn iter(&self) -> Iter<'_> {
        match self {
            Items::Small(d) => Iter::Small(d.iter()),
            Items::Big(b) => Iter::Big {
                inner: b.all(),
                left: b.len,
            },
        }
    }

    /// Element slots held (for memory estimates).
    fn capacity(&self) -> usize {
        match self {
            Items::Small(d) => d.capacity(),
            Items::Big(b) => b.blocks.len() * BLOCK + b.blocks.capacity(),
        }
    }
}

/// The elements of a list, head to tail.
enum Iter<'a> {
    Small(vec_deque::Iter<'a, Elem>),
    Big { inner: BlockIter<'a>, left: usize },
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Elem;

    #[inline]
    fn next(&mut self) -> Option<&'a Elem> {
        match self {
            Iter::Small(it) => it.next(),
            Iter::Big { inner, left } => {
                let e = inner.next()?;
                *left -= 1;
                Some(e)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            Iter::Small(it) => it.len(),
            Iter::Big { left, .. } => *left,
        };
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next_back(),
            Iter::Big { inner, left } => {
                let e = inner.next_back()?;
                *left -= 1;
                Some(e)
            }
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// A Redis list. Aligned to a cache line: its header (48 bytes) is rewritten by every
/// push and pop, and a header straddling two lines cost two transfers between cores
/// whenever the other worker had pushed last.
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
pub struct List {
    items: Items,
    /// Sum of element lengths plus per-entry overhead.
    bytes: usize,
    /// True once the list has grown past the listpack limits (reported as `quicklist`).
    big: bool,
}

impl List {
    /// An empty list.
    pub fn new() -> Self {
        List::default()
    }

    /// An empty list with room for `n` elements (capped: `n` may come from a client).
    pub fn with_capacity(n: usize) -> Self {
        List {
            items: Items::Small(VecDeque::with_capacity(n.min(BLOCK))),
            bytes: 0,
            big: false,
        }
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when the list holds no element.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.len() == 0
    }

    #[inline]
    fn grew(&mut self, added: usize) {
        self.bytes += added + ENTRY_OVERHEAD;
        if !self.big && (self.items.len() > LISTPACK_MAX_ENTRIES || self.bytes > LISTPACK_MAX_BYTES)
        {
            self.big = true;
        }
    }

    #[inline]
    fn shrank(&mut self, removed: usize) {
        self.bytes -= removed + ENTRY_OVERHEAD;
        if self.big
            && self.items.len() * 2 <= LISTPACK_MAX_ENTRIES
            && self.bytes * 2 <= LISTPACK_MAX_BYTES
        {
            self.big = false;
        }
    }

    /// Pushes a copy of `v` at the head.
    #[inline]
    pub fn push_front(&mut self, v: &[u8]) {
        self.items.push(Elem::new(v), false);
        self.grew(v.len());
    }

    /// Pushes a copy of `v` at the tail.
    #[inline]
    pub fn push_back(&mut self, v: &[u8]) {
        self.items.push(Elem::new(v), true);
        self.grew(v.len());
    }

    /// Pushes an owned element at the head or (`tail`) at the tail.
    pub fn push_owned(&mut self, v: Elem, tail: bool) {
        let n = v.len();
        self.items.push(v, tail);
        self.grew(n);
    }

    /// Removes and returns the head element.
    #[inline]
    pub fn pop_front(&mut self) -> Option<Elem> {
        let v = self.items.pop_front()?;
        self.shrank(v.len());
        Some(v)
    }

    /// Removes and returns the tail element.
    #[inline]
    pub fn pop_back(&mut self) -> Option<Elem> {
        let v = self.items.pop_back()?;
        self.shrank(v.len());
        Some(v)
    }

    /// Removes and returns the tail (`tail`) or head element.
    #[inline]
    pub fn pop(&mut self, tail: bool) -> Option<Elem> {
        if tail {
            self.pop_back()
        } else {
            self.pop_front()
        }
    }

    /// The element at `i` (0 = head).
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.items.get(i).map(|b| &**b)
    }

    /// Replaces the element at `i`; false when `i` is out of range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some(slot) = self.items.get_mut(i) else {
            return false;
        };
        let old = std::mem::replace(slot, Elem::new(v));
        self.bytes = self.bytes - old.len() + v.len();
        if self.bytes > LISTPACK_MAX_BYTES {
            self.big = true;
        }
        self.shrank_check();
        true
    }

    fn shrank_check(&mut self) {
        if self.big
            && self.items.len() * 2 <= LISTPACK_MAX_ENTRIES
            && self.bytes * 2 <= LISTPACK_MAX_BYTES
        {
            self.big = false;
        }
    }

    /// Inserts a copy of `v` so that it becomes the element at `i` (`i <= len`).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        self.items.insert(i, Elem::new(v));
        self.grew(v.len());
    }

    /// Index of the first element equal to `v`.
    pub fn position(&self, v: &[u8]) -> Option<usize> {
        self.items.iter().position(|e| **e == *v)
    }

    /// Iterates over the elements from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        self.items.iter().map(|b| &**b)
    }

    /// Iterates over the elements at indexes `start..=end` (both in range, `start <= end`).
    pub fn range(&self, start: usize, end: usize) -> impl Iterator<Item = &[u8]> {
        let n = (end + 1).saturating_sub(start);
        let (small, big) = match &self.items {
            Items::Small(d) => (Some(d.range(start..=end)), None),
            Items::Big(b) => (None, Some(b.iter_from(start.min(b.len)).take(n))),
        };
        small
            .into_iter()
            .flatten()
            .chain(big.into_iter().flatten())
            .map(|b| &**b)
    }

    /// Keeps only the elements at indexes `start..=end`; an empty range (`start > end` or
    /// `start >= len`) empties the list.
    pub fn trim(&mut self, start: usize, end: usize) {
        let len = self.items.len();
        if start > end || start >= len {
            self.items.clear();
            self.bytes = 0;
            self.big = false;
            return;
        }
        let end = end.min(len - 1);
        for _ in (end + 1)..len {
            if let Some(v) = self.items.pop_back() {
                self.bytes -= v.len() + ENTRY_OVERHEAD;
            }
        }
        for _ in 0..start {
            if let Some(v) = self.items.pop_front() {
                self.bytes -= v.len() + ENTRY_OVERHEAD;
            }
        }
        self.shrank_check();
    }

    /// Removes elements equal to `v`: the first `count` from the head (`count > 0`), the
    /// last `-count` from the tail (`count < 0`) or all (`count == 0`); returns how many.
    pub fn remove_matching(&mut self, v: &[u8], count: i64) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        // For a removal from the tail, find the lowest index that may still be removed.
        let mut from = 0usize;
        if count < 0 {
            let mut seen = 0usize;
            for (i, e) in self.items.iter().enumerate().rev() {
                if **e == *v {
                    seen += 1;
                    from = i;
                    if seen == limit {
                        break;
                    }
                }
            }
            if seen == 0 {
                return 0;
            }
        }
        let mut removed = 0usize;
        let mut freed = 0usize;
        let mut idx = 0usize;
        self.items.retain(|e| {
            let i = idx;
            idx += 1;
            if i >= from && removed < limit && **e == *v {
                removed += 1;
                freed += e.len() + ENTRY_OVERHEAD;
                false
            } else {
                true
            }
        });
        self.bytes -= freed;
        self.shrank_check();
        removed
    }

    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        if self.big {
            "quicklist"
        } else {
            "listpack"
        }
    }

    /// Approximate heap bytes owned.
    pub fn heap_size(&self) -> usize {
        // O(1) estimate: slots plus payload (inline payload is counted twice at most).
        self.items.capacity() * std::mem::size_of::<Elem>() + self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(|b| b.to_vec()).collect()
    }

    #[test]
    fn push_pop_and_encoding() {
        let mut l = List::new();
        for i in 0..200u32 {
            l.push_back(i.to_string().as_bytes());
        }
        assert_eq!(l.len(), 200);
        assert_eq!(l.encoding(), "quicklist");
        while l.len() > 64 {
            l.pop_front();
        }
        assert_eq!(l.encoding(), "listpack");
        l.push_front(b"x");
        assert_eq!(l.get(0), Some(&b"x"[..]));
        assert_eq!(l.pop_back().as_deref(), Some(&b"199"[..]));
        let mut big = List::new();
        big.push_back(&[b'a'; 9000]);
        assert_eq!(big.encoding(), "quicklist");
        big.set(0, b"a");
        assert_eq!(big.encoding(), "listpack");
    }

    #[test]
    fn remove_and_trim() {
        let mut l = List::new();
        for v in [b"a", b"b", b"a", b"c", b"a"] {
            l.push_back(v);
        }
        assert_eq!(l.remove_matching(b"a", -2), 2);
        assert_eq!(items(&l), vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(l.remove_matching(b"a", 5), 1);
        l.trim(1, 10);
        assert_eq!(items(&l), vec![b"c".to_vec()]);
        l.trim(3, 1);
        assert!(l.is_empty());
        assert_eq!(l.bytes, 0);
    }

    #[test]
    fn header_fits_a_line_and_slots_stay_small() {
        assert_eq!(std::mem::size_of::<List>(), 64);
        assert_eq!(std::mem::size_of::<Slot>(), std::mem::size_of::<Elem>());
    }

    /// Random operations against a `VecDeque` model, across the switch between one ring
    /// and blocks in both directions.
    #[test]
    fn blocks_match_a_plain_deque() {
        let mut seed = 0x5851_f42d_4c95_7f2du64;
        let mut rnd = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut l = List::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        let mut counter = 0u32;
        let (mut was_big, mut switches) = (false, [0; 2]);
        for step in 0..40_000 {
            counter += 1;
            let v = if counter.is_multiple_of(7) {
                vec![b'x'; 40 + (counter % 50) as usize]
            } else {
                counter.to_string().into_bytes()
            };
            // Phases: grow past several blocks, then shrink, then grow again.
            let grow = (step / 5000) % 2 == 0;
            match rnd(if grow { 10 } else { 30 }) {
                0..=2 => {
                    l.push_back(&v);
                    m.push_back(v);
                }
                3..=5 => {
                    l.push_front(&v);
                    m.push_front(v);
                }
                6 | 10..=19 => assert_eq!(l.pop_front().map(|e| e.to_vec()), m.pop_front()),
                7 | 20..=29 => assert_eq!(l.pop_back().map(|e| e.to_vec()), m.pop_back()),
                8 => {
                    if !m.is_empty() {
                        let i = rnd(m.len());
                        assert!(l.set(i, &v));
                        m[i] = v;
                    }
                    assert!(!l.set(m.len(), b"no"));
                }
                _ => {
                    if rnd(50) == 0 {
                        let i = rnd(m.len() + 1);
                        l.insert(i, &v);
                        m.insert(i, v);
                    } else if rnd(200) == 0 && !m.is_empty() {
                        let victim = m[rnd(m.len())].clone();
                        let count = rnd(5) as i64 - 2;
                        let mut left = if count == 0 {
                            usize::MAX
                        } else {
                            count.unsigned_abs() as usize
                        };
                        let before = m.len();
                        if count >= 0 {
                            m.retain(|e| {
                                !(e == &victim && left > 0 && {
                                    left -= 1;
                                    true
                                })
                            });
                        } else {
                            let mut keep: Vec<Vec<u8>> = Vec::new();
                            for e in m.drain(..).rev() {
                                if e == victim && left > 0 {
                                    left -= 1;
                                } else {
                                    keep.push(e);
                                }
                            }
                            m = keep.into_iter().rev().collect();
                        }
                        assert_eq!(l.remove_matching(&victim, count), before - m.len());
                    }
                }
            }
            assert_eq!(l.len(), m.len());
            let big = matches!(l.items, Items::Big(_));
            if big != was_big {
                switches[usize::from(big)] += 1;
                was_big = big;
            }
            if step % 97 == 0 && !m.is_empty() {
                let i = rnd(m.len());
                assert_eq!(l.get(i), Some(&m[i][..]));
                assert_eq!(l.get(m.len()), None);
                let j = i + rnd(m.len() - i);
                let got: Vec<&[u8]> = l.range(i, j).collect();
                let want: Vec<&[u8]> = m.range(i..=j).map(|e| &e[..]).collect();
                assert_eq!(got, want, "range {i}..={j} of {}", m.len());
                assert_eq!(l.position(&m[i]), m.iter().position(|e| *e == m[i]));
            }
            if step % 1001 == 0 {
                assert!(l.iter().eq(m.iter().map(|e| &e[..])));
                assert!(l.iter().rev().eq(m.iter().rev().map(|e| &e[..])));
                assert_eq!(l.iter().len(), m.len());
                let bytes: usize = m.iter().map(|e| e.len() + ENTRY_OVERHEAD).sum();
                assert_eq!(l.bytes, bytes);
            }
            if step == 20_000 {
                // Trim a long list to its middle, then to nothing.
                let n = m.len();
                if n > 10 {
                    l.trim(3, n - 4);
                    m = m.drain(..).skip(3).take(n - 6).collect();
                    assert!(l.iter().eq(m.iter().map(|e| &e[..])));
                }
            }
        }
        assert!(switches[0] >= 2 && switches[1] >= 2, "{switches:?}");
        let c = l.clone();
        assert!(c.iter().eq(l.iter()));
        l.trim(5, 1);
        assert!(l.is_empty());
    }
}
