//! Optional zstd compression of string values.
//!
//! The node sets a process-wide [`Policy`] (directives `compression` and
//! `compression-threshold`); string constructors in [`crate::value`] read it, so no
//! configuration has to be passed down. A string at least `threshold` bytes long is stored
//! compressed when compression is on and the compressed form is at most 7/8 of the original
//! ([`Packed`]). Live compressed values and the bytes they save are counted for INFO
//! ([`stats`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// zstd level used for values. Level 1 and 3 give nearly the same ratio on typical JSON-like
/// values, and level 1 writes faster (see benches/compression.py).
pub const LEVEL: i32 = 1;

/// Default for `compression-threshold`.
pub const DEFAULT_THRESHOLD: usize = 512;

static ENABLED: AtomicBool = AtomicBool::new(false);
static THRESHOLD: AtomicUsize = AtomicUsize::new(DEFAULT_THRESHOLD);
static VALUES: AtomicU64 = AtomicU64::new(0);
static SAVED: AtomicU64 = AtomicU64::new(0);

/// When a string is stored compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Whether compression is on at all.
    pub enabled: bool,
    /// Shortest string (in bytes) that is tried.
    pub threshold: usize,
}

impl Policy {
    /// Whether a string of `len` bytes should be tried.
    pub fn wants(&self, len: usize) -> bool {
        self.enabled && len >= self.threshold
    }
}

/// Sets the process-wide policy; strings written afterwards follow it.
pub fn set_policy(p: Policy) {
    THRESHOLD.store(p.threshold, Relaxed);
    ENABLED.store(p.enabled, Relaxed);
}

/// The process-wide policy.
pub fn policy() -> Policy {
    Policy {
        enabled: ENABLED.load(Relaxed),
        threshold: THRESHOLD.load(Relaxed),
    }
}

/// Live compressed values and the bytes they save (original minus compressed lengths).
pub fn stats() -> (u64, u64) {
    (VALUES.load(Relaxed), SAVED.load(Relaxed))
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A compressed string: the zstd frame and the original length (so STRLEN needs no
/// decompression). Creating and dropping one updates the [`stats`] counters.
#[derive(Debug)]
pub(crate) struct Packed {
    len: usize,
    /// Whether it was stored whole from a client value (reported as `embstr` when short)
    /// rather than produced by an in-place edit (`raw`).
    emb: bool,
    data: Box<[u8]>,
}

impl Packed {
    /// Compresses `b` if `policy` asks for it and it saves at least 1/8.
    pub(crate) fn try_new(b: &[u8], policy: Policy, emb: bool) -> Option<Packed> {
        if !policy.wants(b.len()) {
            return None;
        }
        let data: Box<[u8]> = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            scratch.clear();
            scratch.reserve(zstd::zstd_safe::compress_bound(b.len()));
            let n = COMPRESSOR.with(|c| {
                let mut c = c.borrow_mut();
                if c.is_none() {
                    *c = zstd::bulk::Compressor::new(LEVEL).ok();
                }
                c.as_mut()?.compress_to_buffer(b, &mut *scratch).ok()
            })?;
            // Keep it only when it saves at least an eighth.
            (n.saturating_mul(8) <= b.len().saturating_mul(7)).then(|| Box::from(&scratch[..n]))
        })?;
        VALUES.fetch_add(1, Relaxed);
        SAVED.fetch_add((b.len() - data.len()) as u64, Relaxed);
        // Don't keep a huge scratch buffer around after a huge value.
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            if s.capacity() > 1 << 20 {
                *s = Vec::new();
            }
        });
        Some(Packed {
            len: b.len(),
            emb,
            data,
        })
    }

    /// Length of the original string.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether this came from a whole client value rather than an in-place edit.
    pub(crate) fn emb(&self) -> bool {
        self.emb
    }

    /// Bytes of the compressed frame.
    pub(crate) fn compressed_len(&self) -> usize {
        self.data.len()
    }

    /// The original bytes.
    pub(crate) fn unpack(&self) -> Vec<u8> {
        let out = DECOMPRESSOR.with(|d| {
            let mut d = d.borrow_mut();
            if d.is_none() {
                *d = zstd::bulk::Decompressor::new().ok();
            }
            let mut out = Vec::with_capacity(self.len);
            d.as_mut()?
                .decompress_to_buffer(&self.data, &mut out)
                .ok()
                .map(|_| out)
        });
        match out {
            Some(v) if v.len() == self.len => v,
            // Only a bug or memory corruption gets here: the frame was made by `try_new`.
            _ => panic!("corrupt compressed string value"),
        }
    }
}

impl Clone for Packed {
    fn clone(&self) -> Self {
        VALUES.fetch_add(1, Relaxed);
        SAVED.fetch_add((self.len - self.data.len()) as u64, Relaxed);
        Packed {
            len: self.len,
            emb: self.emb,
            data: self.data.clone(),
        }
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        VALUES.fetch_sub(1, Relaxed);
        SAVED.fetch_sub((self.len - self.data.len()) as u64, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{RString, Value};
    use parking_lot::Mutex;

    /// Serialises the tests that create compressed values, so counter deltas are exact.
    static LOCK: Mutex<()> = Mutex::new(());

    fn on(threshold: usize) -> Policy {
        Policy {
            enabled: true,
            threshold,
        }
    }

    /// JSON-like text of `n` bytes.
    fn json(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0u32;
        while v.len() < n {
            v.extend_from_slice(
                format!(
                    "{{\"id\":{i},\"name\":\"user{i}\",\"active\":true,\"tags\":[\"a\",\"b\"]}},"
                )
                .as_bytes(),
            );
            i += 1;
        }
        v.truncate(n);
        v
    }

    fn random(n: usize) -> Vec<u8> {
        (0..n).map(|_| rand::random::<u8>()).collect()
    }

    #[test]
    fn round_trip() {
        let _g = LOCK.lock();
        let text = json(4096);
        let s = RString::from_bytes_with(&text, on(512));
        assert!(s.is_compressed());
        assert_eq!(s.len(), 4096);
        assert_eq!(s.to_vec(), text);
        assert!(s.with_bytes(|b| b == text.as_slice()));
        assert_eq!(s.encoding(), "raw");
        assert!(s.heap_size() < 4096 / 2, "heap {}", s.heap_size());
        assert_eq!(
            s,
            RString::from_bytes_with(
                &text,
                Policy {
                    enabled: false,
                    threshold: 0
                }
            )
        );
        let v = RString::from_vec_with(text.clone(), on(512));
        assert!(v.is_compressed());
        assert_eq!(v.to_vec(), text);
    }

    #[test]
    fn threshold_boundary() {
        let _g = LOCK.lock();
        let text = json(200);
        assert!(!RString::from_bytes_with(&text[..99], on(100)).is_compressed());
        assert!(RString::from_bytes_with(&text[..100], on(100)).is_compressed());
        assert!(RString::from_bytes_with(&text[..101], on(100)).is_compressed());
        let off = Policy {
            enabled: false,
            threshold: 0,
        };
        assert!(!RString::from_bytes_with(&text, off).is_compressed());
        // Integers stay integers.
        assert_eq!(
            RString::from_bytes_with(b"1234567", on(1)).encoding(),
            "int"
        );
    }

    #[test]
    fn incompressible_stays_plain() {
        let _g = LOCK.lock();
        let before = stats();
        let r = random(4096);
        let s = RString::from_bytes_with(&r, on(16));
        assert!(!s.is_compressed());
        assert_eq!(s.to_vec(), r);
        assert_eq!(s.heap_size(), 4096);
        assert_eq!(stats(), before);
    }

    #[test]
    fn short_strings_keep_their_encoding() {
        let _g = LOCK.lock();
        let mut s = RString::from_bytes_with(&[b'a'; 40], on(16));
        assert!(s.is_compressed());
        assert_eq!(s.encoding(), "embstr");
        s.make_raw_with(on(16)).push(b'b');
        assert!(s.is_compressed());
        assert_eq!(s.encoding(), "raw");
        assert_eq!(s.len(), 41);
        let mut want = vec![b'a'; 40];
        want.push(b'b');
        assert_eq!(s.to_vec(), want);
    }

    #[test]
    fn edits_repack() {
        let _g = LOCK.lock();
        let text = json(2000);
        let mut s = RString::from_bytes_with(&text, on(512));
        assert!(s.is_compressed());
        {
            let mut raw = s.make_raw_with(on(512));
            raw.extend_from_slice(b"tail");
            raw[0] = b'[';
        }
        assert!(s.is_compressed());
        let mut want = text.clone();
        want.extend_from_slice(b"tail");
        want[0] = b'[';
        assert_eq!(s.to_vec(), want);
        // Edited into something incompressible: stays plain.
        s.make_raw_with(on(512)).copy_from_slice(&random(2004));
        assert!(!s.is_compressed());
        // Compression turned off: edits store plain.
        let mut t = RString::from_bytes_with(&text, on(512));
        t.make_raw_with(Policy {
            enabled: false,
            threshold: 512,
        })
        .push(b'x');
        assert!(!t.is_compressed());
        assert_eq!(t.len(), 2001);
    }

    #[test]
    fn counters_follow_live_values() {
        let _g = LOCK.lock();
        let (n0, saved0) = stats();
        let text = json(4096);
        let a = RString::from_bytes_with(&text, on(512));
        let saved = (4096 - (a.heap_size() - std::mem::size_of::<Packed>())) as u64;
        assert_eq!(stats(), (n0 + 1, saved0 + saved));
        let b = Value::String(a.clone());
        assert_eq!(stats(), (n0 + 2, saved0 + 2 * saved));
        drop(a);
        assert_eq!(stats(), (n0 + 1, saved0 + saved));
        let Value::String(mut b) = b else {
            unreachable!()
        };
        // Decompressed for an edit that makes it incompressible: no longer counted.
        b.make_raw_with(on(512)).copy_from_slice(&random(4096));
        assert_eq!(stats(), (n0, saved0));
    }

    #[test]
    fn default_policy_is_off() {
        let p = policy();
        assert!(!p.enabled);
        assert_eq!(p.threshold, DEFAULT_THRESHOLD);
        assert!(on(10).wants(10));
        assert!(!on(10).wants(9));
    }

    #[test]
    fn sizes_stay_small() {
        assert!(std::mem::size_of::<RString>() <= 24);
        assert!(std::mem::size_of::<Value>() <= 32);
    }
}
