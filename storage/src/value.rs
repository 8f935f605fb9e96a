//! Value types stored in the keyspace.
//!
//! Strings live here; the collection types live in their own modules.

use crate::compress::{self, Packed, Policy};
use crate::hash::Hash;
use crate::list::List;
use crate::set::Set;
use crate::stream::Stream;
use crate::vset::VectorSet;
use crate::zset::ZSet;

/// Longest string kept in the compact `embstr` form (Redis's `OBJ_ENCODING_EMBSTR_SIZE_LIMIT`).
pub const EMBSTR_LIMIT: usize = 44;

/// A value held by a key.
#[derive(Clone, Debug)]
pub enum Value {
    /// A Redis string (also used by bitmaps and HyperLogLog).
    String(RString),
    /// A list (boxed, like every collection, so a key's slot stays small: strings are the
    /// common case and keep [`Value`] at 32 bytes).
    List(Box<List>),
    /// A hash.
    Hash(Box<Hash>),
    /// A set.
    Set(Box<Set>),
    /// A sorted set.
    ZSet(Box<ZSet>),
    /// A stream.
    Stream(Box<Stream>),
    /// A vector set (Redis 8 `vectorset`; also Ember's VSIM.* indexes).
    VectorSet(VectorSet),
}

impl Value {
    /// Where the value's own heap bytes start and how many a command reads first (a
    /// string's bytes, a collection's header), for [`crate::Keyspace::prefetch_value`];
    /// `None` when it has none (an integer string, a vector set).
    #[inline]
    pub(crate) fn heap_span(&self) -> Option<(usize, usize)> {
        fn header<T>(b: &T) -> Option<(usize, usize)> {
            Some((b as *const T as usize, std::mem::size_of::<T>()))
        }
        match self {
            Value::String(s) => s.heap_span(),
            Value::List(b) => header::<List>(b),
            Value::Hash(b) => header::<Hash>(b),
            Value::Set(b) => header::<Set>(b),
            Value::ZSet(b) => header::<ZSet>(b),
            Value::Stream(b) => header::<Stream>(b),
            Value::VectorSet(_) => None,
        }
    }

    /// Redis type name, as TYPE reports it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
            Value::VectorSet(_) => "vectorset",
        }
    }

    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::String(s) => s.encoding(),
            Value::List(l) => l.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(x) => x.encoding(),
            Value::VectorSet(v) => v.encoding(),
        }
    }

    /// Number of allocations freeing the value costs, roughly (Redis's
    /// `lazyfreeGetFreeEffort`): 1 for strings, the element count for collections, for a
    /// stream its nodes and consumer groups.
    pub fn free_effort(&self) -> usize {
        match self {
            Value::String(_) => 1,
            Value::List(l) => l.len(),
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            // As Redis estimates it: one allocation per node of entries, and per consumer
            // group one plus its pending entries (the first group's count for all).
            Value::Stream(x) => {
                let groups = x.groups.len();
                let pel = x.groups.values().next().map_or(0, |g| g.pel.len());
                x.block_count() + groups * (1 + pel)
            }
            Value::VectorSet(v) => v.len(),
        }
    }

    /// Approximate heap bytes owned by the value (for MEMORY USAGE and INFO estimates).
    pub fn heap_size(&self) -> usize {
        match self {
            Value::String(s) => s.heap_size(),
            Value::List(l) => l.heap_size(),
            Value::Hash(h) => h.heap_size(),
            Value::Set(s) => s.heap_size(),
            Value::ZSet(z) => z.heap_size(),
            Value::Stream(x) => x.heap_size(),
            Value::VectorSet(v) => v.heap_size(),
        }
    }
}

/// A Redis string: binary-safe bytes, kept as an integer when it is the canonical text of one,
/// and zstd-compressed when the [`crate::compress`] policy asks for it (transparently: every
/// accessor sees the original bytes).
#[derive(Clone, Debug)]
pub struct RString(Repr);

#[derive(Clone, Debug)]
enum Repr {
    /// The canonical decimal text of this integer.
    Int(i64),
    /// A short string that has not been modified in place (Redis `embstr`).
    Emb(Box<[u8]>),
    /// A string that is long or has been modified in place (Redis `raw`).
    Raw(Vec<u8>),
    /// A compressed string (boxed so the string stays 24 bytes).
    Packed(Box<Packed>),
}

/// Parses `b` as an i64 only when `b` is exactly the canonical text of that integer
/// (no sign `+`, no leading zeros, no spaces), as Redis's `string2ll` does.
pub fn parse_canonical_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

impl RString {
    /// Where the string's heap bytes are and how many ([`Value::heap_span`]).
    #[inline]
    fn heap_span(&self) -> Option<(usize, usize)> {
        match &self.0 {
            Repr::Int(_) => None,
            Repr::Emb(b) => Some((b.as_ptr() as usize, b.len())),
            Repr::Raw(v) => Some((v.as_ptr() as usize, v.len())),
            Repr::Packed(p) => Some((
                &**p as *const Packed as usize,
                std::mem::size_of::<Packed>(),
            )),
        }
    }

    /// A string holding a copy of `b`, in the most compact form that fits.
    pub fn from_bytes(b: &[u8]) -> Self {
        Self::from_bytes_with(b, compress::policy())
    }

    /// [`RString::from_bytes`] under an explicit compression policy.
    pub fn from_bytes_with(b: &[u8], policy: Policy) -> Self {
        if let Some(i) = parse_canonical_i64(b) {
            RString(Repr::Int(i))
        } else if let Some(p) = Packed::try_new(b, policy, true) {
            RString(Repr::Packed(Box::new(p)))
        } else if b.len() <= EMBSTR_LIMIT {
            RString(Repr::Emb(b.into()))
        } else {
            RString(Repr::Raw(b.to_vec()))
        }
    }

    /// A string holding the decimal text of `i`.
    pub fn from_int(i: i64) -> Self {
        RString(Repr::Int(i))
    }

    /// A string taking ownership of `v`, in the most compact form that fits.
    pub fn from_vec(v: Vec<u8>) -> Self {
        Self::from_vec_with(v, compress::policy())
    }

    /// [`RString::from_vec`] under an explicit compression policy.
    pub fn from_vec_with(v: Vec<u8>, policy: Policy) -> Self {
        if v.len() <= EMBSTR_LIMIT {
            Self::from_bytes_with(&v, policy)
        } else if let Some(p) = Packed::try_new(&v, policy, true) {
            RString(Repr::Packed(Box::new(p)))
        } else {
            RString(Repr::Raw(v))
        }
    }

    /// A `raw`-encoded string taking ownership of `v` (as Redis creates for SETRANGE or
    /// SETBIT on a missing key, and for HyperLogLogs), compressed if the policy asks.
    pub fn raw_from_vec(v: Vec<u8>) -> Self {
        let mut s = RString(Repr::Raw(v));
        s.repack(compress::policy());
        s
    }

    /// The integer this string holds, if it is stored as one.
    pub fn as_int(&self) -> Option<i64> {
        match &self.0 {
            Repr::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// Length in bytes of the string's text (no decompression needed).
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Int(i) => {
                let mut b = itoa_buf();
                b.format(*i).len()
            }
            Repr::Emb(b) => b.len(),
            Repr::Raw(v) => v.len(),
            Repr::Packed(p) => p.len(),
        }
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the string is stored compressed.
    pub fn is_compressed(&self) -> bool {
        matches!(self.0, Repr::Packed(_))
    }

    /// Calls `f` with the string's bytes (integers are formatted on a stack buffer,
    /// compressed strings decompressed into a temporary buffer).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match &self.0 {
            Repr::Int(i) => {
                let mut b = itoa_buf();
                f(b.format(*i).as_bytes())
            }
            Repr::Emb(b) => f(b),
            Repr::Raw(v) => f(v),
            Repr::Packed(p) => f(&p.unpack()),
        }
    }

    /// A copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        match &self.0 {
            Repr::Packed(p) => p.unpack(),
            _ => self.with_bytes(|b| b.to_vec()),
        }
    }

    /// Mutable access to the bytes for in-place edits (APPEND, SETRANGE, SETBIT, PFADD):
    /// the string becomes `raw`, as in Redis. A compressed string is decompressed first;
    /// when the returned guard is dropped the result is stored again under the compression
    /// policy.
    pub fn make_raw(&mut self) -> RawMut<'_> {
        self.make_raw_with(compress::policy())
    }

    /// [`RString::make_raw`] under an explicit compression policy.
    pub fn make_raw_with(&mut self, policy: Policy) -> RawMut<'_> {
        if !matches!(self.0, Repr::Raw(_)) {
            let v = self.to_vec();
            self.0 = Repr::Raw(v);
        }
        RawMut { s: self, policy }
    }

    /// Compresses a `raw` string if `policy` asks for it.
    fn repack(&mut self, policy: Policy) {
        if let Repr::Raw(v) = &self.0 {
            if let Some(p) = Packed::try_new(v, policy, false) {
                self.0 = Repr::Packed(Box::new(p));
            }
        }
    }

    /// Redis encoding name: `int`, `embstr` or `raw`. A compressed string reports what the
    /// uncompressed one would.
    pub fn encoding(&self) -> &'static str {
        match &self.0 {
            Repr::Int(_) => "int",
            Repr::Emb(_) => "embstr",
            Repr::Raw(_) => "raw",
            Repr::Packed(p) if p.emb() && p.len() <= EMBSTR_LIMIT => "embstr",
            Repr::Packed(_) => "raw",
        }
    }

    /// Heap bytes owned (the compressed size for a compressed string).
    pub fn heap_size(&self) -> usize {
        match &self.0 {
            Repr::Int(_) => 0,
            Repr::Emb(b) => b.len(),
            Repr::Raw(v) => v.capacity(),
            Repr::Packed(p) => std::mem::size_of::<Packed>() + p.compressed_len(),
        }
    }
}

impl PartialEq for RString {
    /// Equal when the texts are equal, whatever the representations.
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Int(a), Repr::Int(b)) => a == b,
            _ => self.len() == other.len() && self.with_bytes(|a| other.with_bytes(|b| a == b)),
        }
    }
}

impl Eq for RString {}

/// Write access to a `raw` string's bytes from [`RString::make_raw`]; on drop the string is
/// stored again under the compression policy.
pub struct RawMut<'a> {
    s: &'a mut RString,
    policy: Policy,
}

impl std::ops::Deref for RawMut<'_> {
    type Target = Vec<u8>;

    fn deref(&self) -> &Vec<u8> {
        match &self.s.0 {
            Repr::Raw(v) => v,
            // `make_raw` converted it and only `drop` changes it back.
            _ => unreachable!("string made raw"),
        }
    }
}

impl std::ops::DerefMut for RawMut<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        match &mut self.s.0 {
            Repr::Raw(v) => v,
            // `make_raw` converted it and only `drop` changes it back.
            _ => unreachable!("string made raw"),
        }
    }
}

impl RawMut<'_> {
    /// Appends `add`, doubling the capacity when it must grow (as `Vec` does), but by a
    /// fresh allocation, a copy and a sized free instead of `realloc`: jemalloc's `rallocx`
    /// looks the old block's size up in its radix tree, a cache miss per call on a big
    /// keyspace, which a sized free skips.
    pub fn append(&mut self, add: &[u8]) {
        let v: &mut Vec<u8> = self;
        if v.capacity() - v.len() < add.len() {
            let cap = (v.len() + add.len()).max(v.capacity().saturating_mul(2));
            let mut grown = Vec::with_capacity(cap);
            grown.extend_from_slice(v);
            *v = grown;
        }
        v.extend_from_slice(add);
    }
}

impl Drop for RawMut<'_> {
    fn drop(&mut self) {
        self.s.repack(self.policy);
    }
}

fn itoa_buf() -> itoa::Buffer {
    itoa::Buffer::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The span a prefetch loads is the string's own bytes, or the collection's header.
    #[test]
    fn heap_span_points_at_the_bytes_a_command_reads() {
        let s = RString::from_bytes(&[b'x'; 256]);
        let at = s.with_bytes(|b| b.as_ptr() as usize);
        assert_eq!(Value::String(s).heap_span(), Some((at, 256)));
        let short = RString::from_bytes(b"abc");
        let at = short.with_bytes(|b| b.as_ptr() as usize);
        assert_eq!(Value::String(short).heap_span(), Some((at, 3)));
        assert_eq!(
            Value::String(RString::from_bytes(b"12345")).heap_span(),
            None
        );
        let l = Box::new(List::default());
        let at = &*l as *const List as usize;
        assert_eq!(
            Value::List(l).heap_span(),
            Some((at, std::mem::size_of::<List>()))
        );
    }

    #[test]
    fn raw_append_grows_by_doubling_and_keeps_the_bytes() {
        let mut s = RString::from_bytes(&[b'a'; 256]);
        let mut want = vec![b'a'; 256];
        for i in 0..40u8 {
            let add = vec![i; 100 + usize::from(i)];
            let mut raw = s.make_raw_with(Policy {
                enabled: false,
                threshold: 0,
            });
            let before = raw.capacity();
            raw.append(&add);
            want.extend_from_slice(&add);
            assert_eq!(&raw[..], &want[..]);
            assert!(raw.capacity() >= raw.len());
            if before < raw.len() {
                assert!(
                    raw.capacity() >= 2 * before,
                    "{before} -> {}",
                    raw.capacity()
                );
            } else {
                assert_eq!(raw.capacity(), before);
            }
        }
        assert_eq!(s.to_vec(), want);
    }

    #[test]
    fn canonical_ints() {
        assert_eq!(parse_canonical_i64(b"0"), Some(0));
        assert_eq!(parse_canonical_i64(b"-1"), Some(-1));
        assert_eq!(parse_canonical_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_canonical_i64(b"9223372036854775808"), None);
        assert_eq!(parse_canonical_i64(b"01"), None);
        assert_eq!(parse_canonical_i64(b"-0"), None);
        assert_eq!(parse_canonical_i64(b"+1"), None);
        assert_eq!(parse_canonical_i64(b" 1"), None);
        assert_eq!(parse_canonical_i64(b""), None);
    }

    #[test]
    fn encodings_and_bytes() {
        let s = RString::from_bytes(b"12345");
        assert_eq!(s.encoding(), "int");
        assert_eq!(s.to_vec(), b"12345");
        assert_eq!(s.len(), 5);
        let mut e = RString::from_bytes(b"hello");
        assert_eq!(e.encoding(), "embstr");
        e.make_raw().extend_from_slice(b" world");
        assert_eq!(e.encoding(), "raw");
        assert_eq!(e.to_vec(), b"hello world");
        let big = RString::from_bytes(&[b'x'; 45]);
        assert_eq!(big.encoding(), "raw");
    }
}

#[cfg(test)]
mod size_tests {
    /// Every key's table slot holds a Value: keep it as small as a string's.
    #[test]
    fn value_stays_small() {
        assert!(std::mem::size_of::<super::Value>() <= 32);
    }
}
