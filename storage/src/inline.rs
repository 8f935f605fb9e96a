//! [`InlineBytes`]: an owned byte string that keeps up to 22 bytes inside its own 24
//! bytes and only longer ones on the heap. List elements, hash fields and set members are
//! mostly short: inline, they cost no allocation and no pointer chase when compared.

use std::ops::Deref;

/// Longest string stored inline, with no allocation of its own.
const INLINE: usize = 22;

/// An owned byte string: short ones inline (24 bytes, no allocation), longer ones boxed.
#[derive(Clone)]
pub struct InlineBytes(Repr);

#[derive(Clone)]
enum Repr {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
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
            InlineBytes(Repr::Heap(v.into()))
        }
    }

    /// The bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(n, buf) => &buf[..usize::from(*n)],
            Repr::Heap(b) => b,
        }
    }

    /// Heap bytes owned (0 when inline).
    #[inline]
    pub fn heap_len(&self) -> usize {
        match &self.0 {
            Repr::Inline(..) => 0,
            Repr::Heap(b) => b.len(),
        }
    }

    /// The bytes as a vector (the heap copy is reused when there is one).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Inline(n, buf) => buf[..usize::from(n)].to_vec(),
            Repr::Heap(b) => b.into_vec(),
        }
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
            assert_eq!(b.into_vec(), v);
        }
    }
}
