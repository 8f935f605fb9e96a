//! [`InlineBytes`]: an owned byte string that keeps up to 22 bytes inside its own 24
//! bytes and only longer ones on the heap. List elements, set members and hash fields are
//! mostly short: inline, they cost no allocation and no pointer chase when compared.
//! Longer ones live in the elements' own arena ([`crate::arena`]: base pages).

use std::ops::Deref;
use std::ptr::NonNull;

use crate::arena;

/// Longest string stored inline, with no allocation of its own.
const INLINE: usize = 22;

/// An owned byte string: short ones inline (24 bytes, no allocation), longer ones in the
/// elements' arena.
pub struct InlineBytes(Repr);

enum Repr {
    Inline(u8, [u8; INLINE]),
    Heap(Heap),
}

/// Bytes (more than [`INLINE`]) owned in [`arena`], freed on drop.
struct Heap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Heap` owns its bytes alone, as a `Box<[u8]>` does; any thread may free them
// (`arena::free`).
unsafe impl Send for Heap {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for Heap {}

impl Heap {
    #[inline]
    fn new(v: &[u8]) -> Self {
        Heap {
            ptr: arena::copy(v),
            len: v.len(),
        }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` holds `len` initialised bytes, owned by `self` until it drops.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Heap {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `arena::copy` with `len` bytes and is freed once, here.
        unsafe { arena::free(self.ptr, self.len) }
    }
}

impl Clone for InlineBytes {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Inline(n, buf) => InlineBytes(Repr::Inline(*n, *buf)),
            Repr::Heap(h) => InlineBytes(Repr::Heap(Heap::new(h.bytes()))),
        }
    }
}

impl InlineBytes {
    /// A copy of `v`.
    #[inline]
    pub fn new(v: &[u8]) -> Self {
        if v.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..v.len()].copy_from_slice(v);
            InlineBytes(Repr::Inline(v.len() as u8, buf))
        } else {
            InlineBytes(Repr::Heap(Heap::new(v)))
        }
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(n, buf) => &buf[..usize::from(*n)],
            Repr::Heap(h) => h.bytes(),
        }
    }

    /// Heap bytes owned (0 when inline).
    #[inline]
    pub fn heap_len(&self) -> usize {
        match &self.0 {
            Repr::Inline(..) => 0,
            Repr::Heap(h) => h.len,
        }
    }

    /// The bytes as a vector (a copy: the arena's bytes go back to it).
    pub fn into_vec(self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl Deref for InlineBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::fmt::Debug for InlineBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_forms() {
        assert_eq!(std::mem::size_of::<InlineBytes>(), 24);
        let long = vec![7u8; 100];
        for v in [&b""[..], b"abc", &[1u8; 22], &[2u8; 23], &long] {
            let b = InlineBytes::new(v);
            assert_eq!(b.as_bytes(), v);
            assert_eq!(b.heap_len(), if v.len() > INLINE { v.len() } else { 0 });
            assert_eq!(b.clone().as_bytes(), v);
            assert_eq!(b.into_vec(), v);
        }
    }
}
