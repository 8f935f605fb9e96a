//! The list value type: a ring-buffer deque of owned byte strings, with O(1) push and pop
//! at both ends and O(1) access by index.
//!
//! Redis 7.2 reports a small list as `listpack` and a large one as `quicklist`; [`List`]
//! tracks the same thresholds (more than 128 entries or about 8 KB of payload turns it
//! into a "quicklist", and it turns back once it shrinks to half of both limits, as
//! Redis's `listTypeTryConvertQuicklist` does) so OBJECT ENCODING answers alike.

use std::collections::VecDeque;

/// One list element: short ones live inline in the deque slot, longer ones on the heap.
pub use crate::inline::InlineBytes as Elem;

/// Most entries a list may hold and still be reported as `listpack`.
pub const LISTPACK_MAX_ENTRIES: usize = 128;
/// Most payload bytes (with per-entry overhead) a `listpack` list may hold.
pub const LISTPACK_MAX_BYTES: usize = 8192;
/// Per-entry overhead counted towards [`LISTPACK_MAX_BYTES`] (listpack header + backlen).
const ENTRY_OVERHEAD: usize = 2;

/// A Redis list. Aligned to a cache line: its header (48 bytes) is rewritten by every
/// push and pop, and a header straddling two lines cost two transfers between cores
/// whenever the other worker had pushed last.
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
pub struct List {
    items: VecDeque<Elem>,
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
            items: VecDeque::with_capacity(n.min(1024)),
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
        self.items.is_empty()
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
        self.items.push_front(Elem::new(v));
        self.grew(v.len());
    }

    /// Pushes a copy of `v` at the tail.
    #[inline]
    pub fn push_back(&mut self, v: &[u8]) {
        self.items.push_back(Elem::new(v));
        self.grew(v.len());
    }

    /// Pushes an owned element at the head or (`tail`) at the tail.
    pub fn push_owned(&mut self, v: Elem, tail: bool) {
        let n = v.len();
        if tail {
            self.items.push_back(v);
        } else {
            self.items.push_front(v);
        }
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
        self.items.range(start..=end).map(|b| &**b)
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
}
