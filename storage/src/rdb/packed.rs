//! Redis's packed encodings inside RDB strings: listpack (written and read), ziplist and
//! intset (read only: Redis 7 writes listpacks, older versions wrote ziplists).

use crate::value::parse_canonical_i64;

/// One element of a listpack or ziplist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    /// An integer element.
    Int(i64),
    /// A string element.
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The element as bytes (integers as decimal text).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(i) => i.to_string().into_bytes(),
            Elem::Str(s) => s.to_vec(),
        }
    }

    /// The element as an integer, if it is one (or a string holding one).
    pub fn as_int(self) -> Option<i64> {
        match self {
            Elem::Int(i) => Some(i),
            Elem::Str(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        }
    }
}

/// Builds a listpack.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl ListpackWriter {
    /// An empty listpack.
    pub fn new() -> Self {
        ListpackWriter {
            buf: vec![0; 6],
            count: 0,
        }
    }

    /// Number of elements so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes so far (header included).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    /// Appends a string, stored as an integer when it is the canonical text of one (as
    /// Redis's `lpAppend` does).
    pub fn push_str(&mut self, s: &[u8]) {
        if s.len() <= 20 {
            if let Some(v) = parse_canonical_i64(s) {
                self.push_int(v);
                return;
            }
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.push(0xE0 | (n >> 8) as u8);
            self.buf.push(n as u8);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.backlen(start);
    }

    /// Appends an integer.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = if v < 0 { (1i64 << 13) + v } else { v } as u16;
            self.buf.push(0xC0 | (u >> 8) as u8);
            self.buf.push(u as u8);
        } else if i64::from(v as i16) == v {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i64::from(v as i32) == v {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.backlen(start);
    }

    fn backlen(&mut self, start: usize) {
        let l = (self.buf.len() - start) as u64;
        if l <= 127 {
            self.buf.push(l as u8);
        } else if l < 16383 {
            self.buf.push((l >> 7) as u8);
            self.buf.push((l & 127) as u8 | 128);
        } else if l < 2_097_151 {
            self.buf.push((l >> 14) as u8);
            self.buf.push(((l >> 7) & 127) as u8 | 128);
            self.buf.push((l & 127) as u8 | 128);
        } else if l < 268_435_455 {
            self.buf.push((l >> 21) as u8);
            self.buf.push(((l >> 14) & 127) as u8 | 128);
            self.buf.push(((l >> 7) & 127) as u8 | 128);
            self.buf.push((l & 127) as u8 | 128);
        } else {
            self.buf.push((l >> 28) as u8);
            self.buf.push(((l >> 21) & 127) as u8 | 128);
            self.buf.push(((l >> 14) & 127) as u8 | 128);
            self.buf.push(((l >> 7) & 127) as u8 | 128);
            self.buf.push((l & 127) as u8 | 128);
        }
        self.count += 1;
    }

    /// The finished listpack bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xFF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let n = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

/// Bytes of a listpack entry's back-length field for an entry of `l` bytes (Redis's
/// `lpEncodeBacklen`).
pub(crate) fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

fn sign_extend(u: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((u << shift) as i64) >> shift
}

/// Decodes every element of listpack `lp`; `None` when it is malformed (header sizes,
/// element bounds, back-lengths and the terminator are all checked).
pub fn listpack(lp: &[u8]) -> Option<Vec<Elem<'_>>> {
    if lp.len() < 7 {
        return None;
    }
    let total = u32::from_le_bytes(lp[0..4].try_into().ok()?) as usize;
    let declared = u16::from_le_bytes(lp[4..6].try_into().ok()?);
    if total != lp.len() || lp[total - 1] != 0xFF {
        return None;
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let b = *lp.get(p)?;
        if b == 0xFF {
            break;
        }
        let (elem, len) = if b & 0x80 == 0 {
            (Elem::Int(i64::from(b)), 1)
        } else if b & 0xC0 == 0x80 {
            let n = usize::from(b & 0x3F);
            (Elem::Str(lp.get(p + 1..p + 1 + n)?), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let u = (u64::from(b & 0x1F) << 8) | u64::from(*lp.get(p + 1)?);
            (Elem::Int(sign_extend(u, 13)), 2)
        } else if b & 0xF0 == 0xE0 {
            let n = (usize::from(b & 0x0F) << 8) | usize::from(*lp.get(p + 1)?);
            (Elem::Str(lp.get(p + 2..p + 2 + n)?), 2 + n)
        } else {
            match b {
                0xF0 => {
                    let n = u32::from_le_bytes(lp.get(p + 1..p + 5)?.try_into().ok()?) as usize;
                    let end = (p + 5).checked_add(n)?;
                    (Elem::Str(lp.get(p + 5..end)?), 5 + n)
                }
                0xF1..=0xF4 => {
                    let w = match b {
                        0xF1 => 2,
                        0xF2 => 3,
                        0xF3 => 4,
                        _ => 8,
                    };
                    let mut raw = [0u8; 8];
                    raw[..w].copy_from_slice(lp.get(p + 1..p + 1 + w)?);
                    let u = u64::from_le_bytes(raw);
                    (Elem::Int(sign_extend(u, (w * 8) as u32)), 1 + w)
                }
                _ => return None,
            }
        };
        out.push(elem);
        p = p.checked_add(len + backlen_size(len))?;
        if p >= lp.len() {
            return None;
        }
    }
    if p != lp.len() - 1 || (declared != u16::MAX && usize::from(declared) != out.len()) {
        return None;
    }
    Some(out)
}

/// Decodes every element of ziplist `zl`; `None` when it is malformed.
pub fn ziplist(zl: &[u8]) -> Option<Vec<Elem<'_>>> {
    if zl.len() < 11 {
        return None;
    }
    let total = u32::from_le_bytes(zl[0..4].try_into().ok()?) as usize;
    if total != zl.len() || zl[total - 1] != 0xFF {
        return None;
    }
    let mut out = Vec::new();
    let mut p = 10;
    loop {
        let b = *zl.get(p)?;
        if b == 0xFF {
            break;
        }
        // prevlen
        p += if b < 254 { 1 } else { 5 };
        let e = *zl.get(p)?;
        let (elem, len) = match e >> 6 {
            0 => {
                let n = usize::from(e & 0x3F);
                (Elem::Str(zl.get(p + 1..p + 1 + n)?), 1 + n)
            }
            1 => {
                let n = (usize::from(e & 0x3F) << 8) | usize::from(*zl.get(p + 1)?);
                (Elem::Str(zl.get(p + 2..p + 2 + n)?), 2 + n)
            }
            2 => {
                let n = u32::from_be_bytes(zl.get(p + 1..p + 5)?.try_into().ok()?) as usize;
                let end = (p + 5).checked_add(n)?;
                (Elem::Str(zl.get(p + 5..end)?), 5 + n)
            }
            _ => {
                let (w, signed_bits) = match e {
                    0xC0 => (2, 16),
                    0xD0 => (4, 32),
                    0xE0 => (8, 64),
                    0xF0 => (3, 24),
                    0xFE => (1, 8),
                    0xF1..=0xFD => {
                        out.push(Elem::Int(i64::from(e & 0x0F) - 1));
                        p += 1;
                        continue;
                    }
                    _ => return None,
                };
                let mut raw = [0u8; 8];
                raw[..w].copy_from_slice(zl.get(p + 1..p + 1 + w)?);
                (
                    Elem::Int(sign_extend(u64::from_le_bytes(raw), signed_bits)),
                    1 + w,
                )
            }
        };
        out.push(elem);
        p = p.checked_add(len)?;
    }
    (p == zl.len() - 1).then_some(out)
}

/// Decodes an intset's members; `None` when it is malformed.
pub fn intset(is: &[u8]) -> Option<Vec<i64>> {
    let enc = u32::from_le_bytes(is.get(0..4)?.try_into().ok()?) as usize;
    let n = u32::from_le_bytes(is.get(4..8)?.try_into().ok()?) as usize;
    if !matches!(enc, 2 | 4 | 8) || is.len() != 8 + enc.checked_mul(n)? {
        return None;
    }
    Some(
        is[8..]
            .chunks_exact(enc)
            .map(|c| {
                let mut raw = [0u8; 8];
                raw[..enc].copy_from_slice(c);
                sign_extend(u64::from_le_bytes(raw), (enc * 8) as u32)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_round_trip() {
        let big = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let items: Vec<&[u8]> = vec![
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"4096",
            b"-32768",
            b"32767",
            b"8388607",
            b"-8388608",
            b"2147483647",
            b"-2147483648",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"hello",
            b"",
            b"01",
            b"1.5",
            &mid,
            &big,
        ];
        let mut w = ListpackWriter::new();
        for i in &items {
            w.push_str(i);
        }
        let lp = w.finish();
        let back = listpack(&lp).unwrap();
        assert_eq!(back.len(), items.len());
        for (e, i) in back.iter().zip(&items) {
            assert_eq!(&e.to_vec()[..], *i);
        }
        assert!(matches!(back[0], Elem::Int(0)));
        assert!(matches!(back[17], Elem::Str(_)));
    }

    #[test]
    fn listpack_rejects_damage() {
        let mut w = ListpackWriter::new();
        w.push_str(b"abc");
        w.push_int(1000);
        let lp = w.finish();
        for cut in 0..lp.len() {
            assert!(listpack(&lp[..cut]).is_none());
        }
        let mut bad = lp.clone();
        bad[6] = 0xF9; // unknown encoding
        assert!(listpack(&bad).is_none());
        let mut bad = lp.clone();
        bad[4] = 5; // wrong count
        assert!(listpack(&bad).is_none());
    }

    #[test]
    fn intset_and_ziplist() {
        let mut is = vec![4, 0, 0, 0, 2, 0, 0, 0];
        is.extend_from_slice(&(-5i32).to_le_bytes());
        is.extend_from_slice(&70000i32.to_le_bytes());
        assert_eq!(intset(&is).unwrap(), vec![-5, 70000]);
        assert!(intset(&is[..11]).is_none());

        // A ziplist with "ab", 7 (immediate) and -2 (int8).
        let mut zl = vec![0u8; 10];
        zl.extend_from_slice(&[0, 0x02, b'a', b'b']);
        zl.extend_from_slice(&[4, 0xF8]);
        zl.extend_from_slice(&[2, 0xFE, 0xFE]);
        zl.push(0xFF);
        let n = zl.len() as u32;
        zl[0..4].copy_from_slice(&n.to_le_bytes());
        let e = ziplist(&zl).unwrap();
        assert_eq!(e, vec![Elem::Str(b"ab"), Elem::Int(7), Elem::Int(-2)]);
    }
}
