//! [`ThinKey`]: a key's bytes in 16 bytes: inside the key itself when the key has at most
//! [`INLINE_MAX`] (15) bytes, else behind one pointer.
//!
//! A lookup that finds a key compares its bytes: a key behind a pointer costs one more
//! cache miss than the slot itself (measured: under INCR over 100,000 keys the key-table
//! lookup was 44% of the CPU, most of it on the two misses), so short keys, the usual
//! case (`user:1234`, `session:abcdef`), live in the slot. A long key's allocation holds a
//! 4-byte length and then the bytes (keys of 4 GiB or more, which only a raised
//! `proto-max-bulk-len` allows, store a marker and an 8-byte length).

use std::alloc::{self, Layout};
use std::borrow::Borrow;
use std::fmt;
use std::ptr::NonNull;

/// Header value that says "the real length follows as a u64".
const LONG: u32 = u32::MAX;

/// Keys shorter than this keep their length in the 4-byte header (low in tests, so that
/// the long form is exercised without a 4 GiB key).
const SHORT_MAX: usize = if cfg!(test) { 300 } else { u32::MAX as usize };

/// Keys of at most this many bytes are stored inline.
pub const INLINE_MAX: usize = 15;

/// The last byte of a key on the heap (an inline key's last byte is its length, <= 15).
const HEAP: u8 = 0xFF;

/// An inline key: its bytes, then its length.
#[derive(Clone, Copy)]
#[repr(C)]
struct Inline {
    bytes: [u8; INLINE_MAX],
    len: u8,
}

/// A key on the heap: the allocation, zeros, then [`HEAP`].
#[derive(Clone, Copy)]
#[repr(C)]
struct Heap {
    ptr: NonNull<u8>,
    pad: [u8; 7],
    tag: u8,
}

/// The two forms; byte 15 (`Inline::len`, `Heap::tag`) says which, and is always set.
#[repr(C)]
union Repr {
    inline: Inline,
    heap: Heap,
}

/// An owned, immutable byte string of 16 bytes (see the module docs).
pub struct ThinKey(Repr);

// SAFETY: a ThinKey uniquely owns its heap allocation, if any (like `Box<[u8]>`), never
// hands out mutable access to it and has no interior mutability, so moving it to or
// sharing it with another thread is as safe as for `Box<[u8]>`.
unsafe impl Send for ThinKey {}
// SAFETY: see `Send`: shared access is read-only.
unsafe impl Sync for ThinKey {}

impl ThinKey {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_MAX {
            let mut inline = Inline {
                bytes: [0; INLINE_MAX],
                len: bytes.len() as u8,
            };
            inline.bytes[..bytes.len()].copy_from_slice(bytes);
            return ThinKey(Repr { inline });
        }
        let (header, layout) = Self::layout(bytes.len());
        // SAFETY: the layout's size is at least 4 (never zero).
        let p = unsafe { alloc::alloc(layout) };
        let Some(p) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: `p` points to `layout.size()` = header + len writable bytes; the writes
        // are unaligned-safe and stay inside, and `bytes` cannot overlap a fresh block.
        unsafe {
            if header == 4 {
                p.as_ptr().cast::<u32>().write_unaligned(bytes.len() as u32);
            } else {
                p.as_ptr().cast::<u32>().write_unaligned(LONG);
                p.as_ptr()
                    .add(4)
                    .cast::<u64>()
                    .write_unaligned(bytes.len() as u64);
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.as_ptr().add(header), bytes.len());
        }
        ThinKey(Repr {
            heap: Heap {
                ptr: p,
                pad: [0; 7],
                tag: HEAP,
            },
        })
    }

    /// Bytes a key of `len` bytes allocates (header included) before the allocator rounds
    /// it up to a size class: 0 for an inline key.
    pub fn alloc_len(len: usize) -> usize {
        if len <= INLINE_MAX {
            0
        } else {
            Self::layout(len).1.size()
        }
    }

    /// Header size and allocation layout for a heap key of `len` bytes.
    fn layout(len: usize) -> (usize, Layout) {
        let header = if len < SHORT_MAX { 4 } else { 12 };
        let size = len.checked_add(header).expect("key size overflows usize");
        (
            header,
            Layout::from_size_align(size, 1).expect("key layout"),
        )
    }

    /// The heap allocation, for a key that is not inline.
    #[inline]
    fn heap_ptr(&self) -> Option<NonNull<u8>> {
        // SAFETY: byte 15 is initialized in both forms (`new` writes `len` or `tag`), and
        // `tag` is HEAP only in the heap form, whose `ptr` is then initialized.
        unsafe {
            if self.0.inline.len == HEAP {
                Some(self.0.heap.ptr)
            } else {
                None
            }
        }
    }

    /// Header size and length of a heap key at `p`.
    #[inline]
    fn header_len(p: NonNull<u8>) -> (usize, usize) {
        // SAFETY: every heap key starts with a 4-byte header written by `new`, and a LONG
        // header is followed by the 8-byte length (the allocation is at least 12 bytes).
        unsafe {
            let h = p.as_ptr().cast::<u32>().read_unaligned();
            if h != LONG {
                (4, h as usize)
            } else {
                (
                    12,
                    p.as_ptr().add(4).cast::<u64>().read_unaligned() as usize,
                )
            }
        }
    }

    /// The key's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self.heap_ptr() {
            None => {
                // SAFETY: not on the heap, so the inline form was written by `new`, all
                // 15 bytes initialized, and `len` <= 15.
                let inline = unsafe { &self.0.inline };
                &inline.bytes[..usize::from(inline.len)]
            }
            Some(p) => {
                let (header, len) = Self::header_len(p);
                // SAFETY: `new` copied exactly `len` initialized bytes after the header,
                // and the allocation lives (immutably) as long as `self`.
                unsafe { std::slice::from_raw_parts(p.as_ptr().add(header), len) }
            }
        }
    }
}

impl Drop for ThinKey {
    fn drop(&mut self) {
        if let Some(p) = self.heap_ptr() {
            let (_, len) = Self::header_len(p);
            let (_, layout) = Self::layout(len);
            // SAFETY: allocated by `new` with this same layout (recomputed from the same
            // length), and dropped once.
            unsafe { alloc::dealloc(p.as_ptr(), layout) }
        }
    }
}

impl std::ops::Deref for ThinKey {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<[u8]> for ThinKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for ThinKey {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl From<&[u8]> for ThinKey {
    fn from(b: &[u8]) -> Self {
        ThinKey::new(b)
    }
}

impl Clone for ThinKey {
    fn clone(&self) -> Self {
        ThinKey::new(self)
    }
}

impl Default for ThinKey {
    fn default() -> Self {
        ThinKey::new(&[])
    }
}

impl PartialEq for ThinKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ThinKey {}

impl PartialOrd for ThinKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ThinKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl std::hash::Hash for ThinKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl fmt::Debug for ThinKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_bytes(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_two_words() {
        assert_eq!(std::mem::size_of::<ThinKey>(), 16);
    }

    #[test]
    fn round_trips_every_length_across_both_header_forms() {
        for len in (0..40)
            .chain(SHORT_MAX - 3..SHORT_MAX + 3)
            .chain([1000, 70_000])
        {
            let b: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let k = ThinKey::new(&b);
            assert_eq!(&k[..], &b[..], "len {len}");
            assert_eq!(k.len(), len);
            let expect = match len {
                0..=INLINE_MAX => 0,
                _ if len < SHORT_MAX => len + 4,
                _ => len + 12,
            };
            assert_eq!(ThinKey::alloc_len(len), expect);
            assert_eq!(k.heap_ptr().is_none(), len <= INLINE_MAX, "len {len}");
            let c = k.clone();
            drop(k);
            assert_eq!(&c[..], &b[..], "clone, len {len}");
        }
        assert!(ThinKey::default().is_empty());
    }

    #[test]
    fn orders_and_compares_as_bytes() {
        let mut v: Vec<ThinKey> = ["b", "a", "ab", "", "ba"]
            .iter()
            .map(|s| ThinKey::from(s.as_bytes()))
            .collect();
        v.sort();
        let got: Vec<&[u8]> = v.iter().map(|k| &k[..]).collect();
        assert_eq!(got, [&b""[..], b"a", b"ab", b"b", b"ba"]);
        assert_eq!(ThinKey::from(&b"x"[..]), ThinKey::from(&b"x"[..]));
        assert_ne!(ThinKey::from(&b"x"[..]), ThinKey::from(&b"xy"[..]));
        let set: std::collections::BTreeSet<(u64, ThinKey)> =
            [(2, ThinKey::from(&b"k"[..])), (1, ThinKey::from(&b"z"[..]))].into();
        assert_eq!(&set.first().unwrap().1[..], b"z");
        assert_eq!(format!("{:?}", ThinKey::from(&b"ab"[..])), "[97, 98]");
    }

    #[test]
    fn moves_between_threads() {
        let k = ThinKey::from(&b"shared"[..]);
        let k = std::thread::spawn(move || {
            assert_eq!(&k[..], b"shared");
            k
        })
        .join()
        .unwrap();
        let r = &k;
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(&r[..], b"shared"));
        });
    }
}
