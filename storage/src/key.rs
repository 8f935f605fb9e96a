//! [`ThinKey`]: a key's bytes behind one thin pointer, so a key table slot spends 8 bytes
//! on its key instead of a `Box<[u8]>`'s 16 (pointer and length).
//!
//! One allocation holds a 4-byte length and then the bytes (keys of 4 GiB or more, which
//! only a raised `proto-max-bulk-len` allows, store a marker and an 8-byte length). For a
//! typical short key this is the same jemalloc size class as the boxed slice it replaces
//! (`key:123456`: 14 bytes, class 16), and the length sits in the same cache line as the
//! bytes that a lookup compares anyway.

use std::alloc::{self, Layout};
use std::borrow::Borrow;
use std::fmt;
use std::ptr::NonNull;

/// Header value that says "the real length follows as a u64".
const LONG: u32 = u32::MAX;

/// Keys shorter than this keep their length in the 4-byte header (low in tests, so that
/// the long form is exercised without a 4 GiB key).
const SHORT_MAX: usize = if cfg!(test) { 300 } else { u32::MAX as usize };

/// An owned, immutable byte string behind a thin pointer (see the module docs).
pub struct ThinKey(NonNull<u8>);

// SAFETY: a ThinKey uniquely owns its allocation (like `Box<[u8]>`), never hands out
// mutable access to it and has no interior mutability, so moving it to or sharing it with
// another thread is as safe as for `Box<[u8]>`.
unsafe impl Send for ThinKey {}
// SAFETY: see `Send`: shared access is read-only.
unsafe impl Sync for ThinKey {}

impl ThinKey {
    /// A copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Self {
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
        ThinKey(p)
    }

    /// Bytes the allocation of a key of `len` bytes asks for (header included), before the
    /// allocator rounds it up to a size class.
    pub fn alloc_len(len: usize) -> usize {
        Self::layout(len).1.size()
    }

    /// Header size and allocation layout for a key of `len` bytes.
    fn layout(len: usize) -> (usize, Layout) {
        let header = if len < SHORT_MAX { 4 } else { 12 };
        let size = len.checked_add(header).expect("key size overflows usize");
        (
            header,
            Layout::from_size_align(size, 1).expect("key layout"),
        )
    }

    /// Header size and length of the key.
    #[inline]
    fn header_len(&self) -> (usize, usize) {
        // SAFETY: every ThinKey starts with a 4-byte header written by `new`, and a LONG
        // header is followed by the 8-byte length (the allocation is at least 12 bytes).
        unsafe {
            let h = self.0.as_ptr().cast::<u32>().read_unaligned();
            if h != LONG {
                (4, h as usize)
            } else {
                (
                    12,
                    self.0.as_ptr().add(4).cast::<u64>().read_unaligned() as usize,
                )
            }
        }
    }

    /// The key's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        let (header, len) = self.header_len();
        // SAFETY: `new` copied exactly `len` initialized bytes after the header, and the
        // allocation lives (immutably) as long as `self`.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(header), len) }
    }
}

impl Drop for ThinKey {
    fn drop(&mut self) {
        let (_, len) = self.header_len();
        let (_, layout) = Self::layout(len);
        // SAFETY: allocated by `new` with this same layout (recomputed from the same length).
        unsafe { alloc::dealloc(self.0.as_ptr(), layout) }
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
    fn is_one_pointer() {
        assert_eq!(std::mem::size_of::<ThinKey>(), 8);
        assert_eq!(std::mem::size_of::<Option<ThinKey>>(), 8);
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
            assert_eq!(
                ThinKey::alloc_len(len),
                len + if len < SHORT_MAX { 4 } else { 12 }
            );
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
