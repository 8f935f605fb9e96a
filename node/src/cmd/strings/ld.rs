//! Software x87 80-bit `long double` arithmetic for INCRBYFLOAT.
//!
//! Redis computes INCRBYFLOAT in `long double` (on x86-64: 64-bit mantissa, 15-bit exponent),
//! parses with `strtold` and prints with `%.17Lf`. Plain `f64` gives visibly different text
//! (`10.5 + 0.1` prints `10.59999999999999964` instead of `10.6`), so this module reproduces
//! the three steps exactly with a small big-integer helper: correctly rounded parsing
//! (decimal, hexadecimal, `inf`), round-to-nearest-even addition and exact `%.17Lf`
//! formatting with Redis's trailing-zero trimming.

use std::cmp::Ordering;

/// Longest input `string2ld` accepts (`MAX_LONG_DOUBLE_CHARS` is 5 KiB, NUL included).
const MAX_CHARS: usize = 5 * 1024;

/// Largest binary exponent of a normalised mantissa (`mant * 2^exp < 2^16384`).
const EXP_MAX: i64 = 16383 - 63;
/// Smallest binary exponent of a normalised mantissa (`2^63 * 2^EXP_MIN` is the least normal).
const EXP_MIN: i64 = -16382 - 63;

/// A `long double` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ld {
    /// Zero; `true` for `-0`.
    Zero(bool),
    /// `(-1)^neg * mant * 2^exp`: `mant` has its top bit set, except for a subnormal
    /// value, whose `exp` is the least one.
    Finite {
        /// Sign.
        neg: bool,
        /// 64-bit mantissa.
        mant: u64,
        /// Binary exponent of the mantissa's lowest bit.
        exp: i32,
    },
    /// An infinity; `true` for `-inf`.
    Inf(bool),
}

impl Ld {
    /// The exact value of `v` (every i64 fits a 64-bit mantissa).
    pub fn from_i64(v: i64) -> Ld {
        if v == 0 {
            return Ld::Zero(false);
        }
        let m = v.unsigned_abs();
        let z = m.leading_zeros();
        Ld::Finite {
            neg: v < 0,
            mant: m << z,
            exp: -(z as i32),
        }
    }

    /// Parses `b` as Redis's `string2ld` does (`strtold` over the whole input, no leading
    /// space, no NaN, no overflow or underflow). `None` when it is not a valid float.
    pub fn parse(b: &[u8]) -> Option<Ld> {
        if b.is_empty() || b.len() >= MAX_CHARS {
            return None;
        }
        let (neg, rest) = match b[0] {
            b'-' => (true, &b[1..]),
            b'+' => (false, &b[1..]),
            _ => (false, b),
        };
        if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
            return Some(Ld::Inf(neg));
        }
        if rest.len() > 1 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
            parse_hex(neg, &rest[2..])
        } else {
            parse_dec(neg, rest)
        }
    }

    /// `self + other` rounded to nearest-even; `None` when the sum is NaN or infinite.
    pub fn add(self, other: Ld) -> Option<Ld> {
        match (self, other) {
            (Ld::Inf(_), _) | (_, Ld::Inf(_)) => None,
            (Ld::Zero(a), Ld::Zero(b)) => Some(Ld::Zero(a && b)),
            (Ld::Zero(_), x) | (x, Ld::Zero(_)) => Some(x),
            (
                Ld::Finite {
                    neg: na,
                    mant: ma,
                    exp: ea,
                },
                Ld::Finite {
                    neg: nb,
                    mant: mb,
                    exp: eb,
                },
            ) => {
                // Put the operand with the larger exponent first.
                let ((na, ma, ea), (nb, mb, eb)) = if ea >= eb {
                    ((na, ma, ea), (nb, mb, eb))
                } else {
                    ((nb, mb, eb), (na, ma, ea))
                };
                let (ea, eb) = (i64::from(ea), i64::from(eb));
                // Far below the larger operand's rounding point the smaller one only
                // matters as "something non-zero": stand it in by one low unit.
                const GAP: i64 = 130;
                let (big_a, big_b, base) = if ea - eb > GAP {
                    (
                        Big::from_u128(u128::from(ma)).shl((GAP + 1) as u64),
                        Big::from_u128(1),
                        ea - GAP - 1,
                    )
                } else {
                    (
                        Big::from_u128(u128::from(ma)).shl((ea - eb) as u64),
                        Big::from_u128(u128::from(mb)),
                        eb,
                    )
                };
                let (neg, mag) = if na == nb {
                    (na, big_a.add(&big_b))
                } else {
                    match big_a.cmp(&big_b) {
                        Ordering::Equal => return Some(Ld::Zero(false)),
                        Ordering::Greater => (na, big_a.sub(&big_b)),
                        Ordering::Less => (nb, big_b.sub(&big_a)),
                    }
                };
                match round(mag, false, base, neg) {
                    Ok(v) => Some(v),
                    Err(Range::Overflow) => None,
                    Err(Range::Underflow) => Some(Ld::Zero(neg)),
                }
            }
        }
    }

    /// True for a finite value.
    pub fn is_finite(self) -> bool {
        !matches!(self, Ld::Inf(_))
    }

    /// Redis's human-friendly text (`ld2string(.., LD_STR_HUMAN)`): `%.17Lf`, then trailing
    /// zeros and a trailing dot removed, and `-0` printed as `0`.
    pub fn to_human(self) -> Vec<u8> {
        let (neg, mant, exp) = match self {
            Ld::Zero(_) => return b"0".to_vec(),
            Ld::Inf(neg) => {
                return if neg {
                    b"-inf".to_vec()
                } else {
                    b"inf".to_vec()
                }
            }
            Ld::Finite { neg, mant, exp } => (neg, mant, i64::from(exp)),
        };
        let mut out = Vec::new();
        if neg {
            out.push(b'-');
        }
        if exp >= 0 {
            // An integer: the 17 zero decimals are trimmed away.
            out.extend(
                Big::from_u128(u128::from(mant))
                    .shl(exp as u64)
                    .to_decimal(),
            );
        } else {
            // round(value * 10^17), ties to even, as glibc's printf does.
            let mut n = Big::from_u128(u128::from(mant));
            n.mul_pow10(17);
            let sh = exp.unsigned_abs();
            let mut q = n.shr(sh);
            let half = n.bit(sh - 1);
            let rest = n.any_below(sh - 1);
            if half && (rest || q.bit(0)) {
                q.add_small(1);
            }
            let mut digits = q.to_decimal();
            if digits.len() < 18 {
                let mut padded = vec![b'0'; 18 - digits.len()];
                padded.extend(digits);
                digits = padded;
            }
            let (int, frac) = digits.split_at(digits.len() - 17);
            out.extend_from_slice(int);
            let kept = frac.iter().rposition(|&c| c != b'0').map_or(0, |p| p + 1);
            if kept > 0 {
                out.push(b'.');
                out.extend_from_slice(&frac[..kept]);
            }
        }
        if out == b"-0" {
            out.remove(0);
        }
        out
    }
}

enum Range {
    Overflow,
    Underflow,
}

/// Rounds `(m + sticky·ε) · 2^e` (0 < ε < 1 unit) to a 64-bit mantissa, nearest-even,
/// with gradual underflow: below the least normal exponent the mantissa keeps fewer bits.
/// With `sticky`, `m` must have at least 66 bits so the guard bits are exact.
fn round(m: Big, sticky: bool, e: i64, neg: bool) -> Result<Ld, Range> {
    if m.is_zero() {
        return if sticky {
            Err(Range::Underflow)
        } else {
            Ok(Ld::Zero(neg))
        };
    }
    // Shift right by `k` to keep 64 bits, or fewer for a subnormal result.
    let mut k = m.bits() as i64 - 64;
    if e + k < EXP_MIN {
        k = EXP_MIN - e;
    }
    let mut mant;
    if k <= 0 {
        debug_assert!(!sticky, "sticky rounding needs guard bits");
        mant = m.shl(k.unsigned_abs()).low_u128() as u64;
    } else {
        let sh = k.unsigned_abs();
        mant = m.shr(sh).low_u128() as u64;
        let half = m.bit(sh - 1);
        let rest = sticky || m.any_below(sh - 1);
        if half && (rest || mant & 1 == 1) {
            mant = mant.wrapping_add(1);
            if mant == 0 {
                mant = 1 << 63;
                k += 1;
            }
        }
    }
    let e = e + k;
    if mant == 0 {
        Err(Range::Underflow)
    } else if e > EXP_MAX {
        Err(Range::Overflow)
    } else {
        Ok(Ld::Finite {
            neg,
            mant,
            exp: e as i32,
        })
    }
}

/// Turns a rounding outcome into what `string2ld` accepts: overflow, and a non-zero input
/// that rounds to zero, are rejected (strtold's ERANGE); subnormal results are kept.
fn accept(r: Result<Ld, Range>) -> Option<Ld> {
    r.ok()
}

/// Parses an optional exponent `[eEpP][+-]digits` at the start of `b` (the marker already
/// checked by the caller); saturates far beyond any representable range. `None` when the
/// exponent has no digits (strtold would stop before the marker, leaving trailing text).
fn parse_exp(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        v = (v * 10 + i64::from(c - b'0')).min(1_000_000_000);
    }
    Some(if neg { -v } else { v })
}

fn parse_dec(neg: bool, b: &[u8]) -> Option<Ld> {
    let mut i = 0;
    let mut big = Big::default();
    let mut chunk: u32 = 0;
    let mut chunk_len = 0;
    let mut any_digit = false;
    let mut sig_digits: i64 = 0;
    let mut frac_digits: i64 = 0;
    let mut seen_dot = false;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() {
            any_digit = true;
            if seen_dot {
                frac_digits += 1;
            }
            if sig_digits > 0 || c != b'0' {
                sig_digits += 1;
                chunk = chunk * 10 + u32::from(c - b'0');
                chunk_len += 1;
                if chunk_len == 9 {
                    big.mul_small(1_000_000_000);
                    big.add_small(chunk);
                    chunk = 0;
                    chunk_len = 0;
                }
            }
        } else if c == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            break;
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if chunk_len > 0 {
        big.mul_small(10u32.pow(chunk_len));
        big.add_small(chunk);
    }
    let mut e10 = -frac_digits;
    if i < b.len() {
        if b[i] | 0x20 != b'e' {
            return None;
        }
        e10 += parse_exp(&b[i + 1..])?;
    }
    if big.is_zero() {
        return Some(Ld::Zero(neg));
    }
    // The value lies in [10^(mag-1), 10^mag).
    let mag = sig_digits + e10;
    if mag > 4934 {
        return None;
    }
    // Below half the least subnormal (about 1.8e-4951) everything rounds to zero.
    if mag < -4952 {
        return None;
    }
    if e10 >= 0 {
        let mut x = big;
        x.mul_pow10(e10 as u64);
        accept(round(x, false, 0, neg))
    } else {
        let mut p = Big::from_u128(1);
        p.mul_pow10(e10.unsigned_abs());
        // Scale so the quotient has 66-67 bits, then divide.
        let s = (p.bits() + 66) as i64 - big.bits() as i64;
        let (n, mut sticky) = if s >= 0 {
            (big.shl(s as u64), false)
        } else {
            let sh = s.unsigned_abs();
            (big.shr(sh), big.any_below(sh))
        };
        let (q, rem) = div_quotient(&n, &p);
        sticky |= rem;
        accept(round(Big::from_u128(q), sticky, -s, neg))
    }
}

fn parse_hex(neg: bool, b: &[u8]) -> Option<Ld> {
    let mut i = 0;
    let mut big = Big::default();
    let mut any_digit = false;
    let mut frac_digits: i64 = 0;
    let mut seen_dot = false;
    let mut sticky = false;
    while i < b.len() {
        let c = b[i];
        if let Some(d) = (c as char).to_digit(16) {
            any_digit = true;
            if seen_dot {
                frac_digits += 1;
            }
            // Beyond ~160 significant bits only "non-zero" matters.
            if big.bits() < 160 {
                big.mul_small(16);
                big.add_small(d);
            } else {
                // Dropped digit: before the dot it scales the kept value by 16; after it,
                // it undoes the count taken above. Either way one fewer fraction digit.
                sticky |= d != 0;
                frac_digits -= 1;
            }
        } else if c == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            break;
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    let mut e2 = -4 * frac_digits;
    if i < b.len() {
        if b[i] | 0x20 != b'p' {
            return None;
        }
        e2 += parse_exp(&b[i + 1..])?;
    }
    if big.is_zero() {
        return Some(Ld::Zero(neg));
    }
    let bits = big.bits() as i64;
    if bits + e2 > EXP_MAX + 70 || bits + e2 < EXP_MIN - 2 {
        return None;
    }
    accept(round(big, sticky, e2, neg))
}

/// `(n / d, n % d != 0)` for a quotient below 2^127.
fn div_quotient(n: &Big, d: &Big) -> (u128, bool) {
    let mut r = n.clone();
    let mut q: u128 = 0;
    let top = n.bits().saturating_sub(d.bits()).min(126);
    for i in (0..=top).rev() {
        let t = d.shl(i);
        if r.cmp(&t) != Ordering::Less {
            r = r.sub(&t);
            q |= 1u128 << i;
        }
    }
    (q, !r.is_zero())
}

/// A minimal unsigned big integer: little-endian 32-bit limbs, no high zero limbs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut v: u128) -> Big {
        let mut limbs = Vec::new();
        while v != 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        Big(limbs)
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        self.0.get(limb).is_some_and(|&l| (l >> (i % 32)) & 1 == 1)
    }

    /// True when any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = ((i / 32) as usize).min(self.0.len());
        if self.0[..full].iter().any(|&l| l != 0) {
            return true;
        }
        let part = i % 32;
        part > 0
            && self
                .0
                .get(full)
                .is_some_and(|&l| l & ((1u32 << part) - 1) != 0)
    }

    fn low_u128(&self) -> u128 {
        self.0
            .iter()
            .take(4)
            .enumerate()
            .fold(0u128, |acc, (i, &l)| acc | (u128::from(l) << (32 * i)))
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry: u64 = 0;
        for l in self.0.iter_mut() {
            let v = u64::from(*l) * u64::from(m) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn mul_pow10(&mut self, mut e: u64) {
        while e >= 9 {
            self.mul_small(1_000_000_000);
            e -= 9;
        }
        if e > 0 {
            self.mul_small(10u32.pow(e as u32));
        }
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = u64::from(a);
        for l in self.0.iter_mut() {
            if carry == 0 {
                break;
            }
            let v = u64::from(*l) + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = u64::from(self.0.get(i).copied().unwrap_or(0))
                + u64::from(o.0.get(i).copied().unwrap_or(0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    /// `self - o`; requires `self >= o`.
    fn sub(&self, o: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for (i, &l) in self.0.iter().enumerate() {
            let mut v = i64::from(l) - i64::from(o.0.get(i).copied().unwrap_or(0)) - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            out.push(v as u32);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let limbs = (n / 32) as usize;
        let bits = (n % 32) as u32;
        let mut out = vec![0u32; limbs];
        out.reserve(self.0.len() + 1);
        if bits == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &l in &self.0 {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
            if carry != 0 {
                out.push(carry);
            }
        }
        Big(out)
    }

    fn shr(&self, n: u64) -> Big {
        let limbs = (n / 32) as usize;
        if limbs >= self.0.len() {
            return Big::default();
        }
        let bits = (n % 32) as u32;
        let src = &self.0[limbs..];
        let mut out = Vec::with_capacity(src.len());
        for (i, &l) in src.iter().enumerate() {
            let hi = if bits == 0 {
                0
            } else {
                src.get(i + 1).map_or(0, |&h| h << (32 - bits))
            };
            out.push((l >> bits) | hi);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    /// Decimal digits (`0` for zero).
    fn to_decimal(&self) -> Vec<u8> {
        if self.is_zero() {
            return b"0".to_vec();
        }
        let mut limbs = self.0.clone();
        let mut chunks = Vec::new();
        while !limbs.is_empty() {
            let mut rem = 0u64;
            for l in limbs.iter_mut().rev() {
                let v = (rem << 32) | u64::from(*l);
                *l = (v / 1_000_000_000) as u32;
                rem = v % 1_000_000_000;
            }
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
            chunks.push(rem as u32);
        }
        let mut out = Vec::with_capacity(chunks.len() * 9);
        let mut first = true;
        for c in chunks.iter().rev() {
            if first {
                out.extend_from_slice(itoa::Buffer::new().format(*c).as_bytes());
                first = false;
            } else {
                out.extend_from_slice(format!("{c:09}").as_bytes());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> Option<String> {
        let x = Ld::parse(a.as_bytes())?;
        let y = Ld::parse(b.as_bytes())?;
        let s = x.add(y)?;
        Some(String::from_utf8(s.to_human()).unwrap())
    }

    #[test]
    fn sums_print_like_redis_on_x86_64() {
        // Every expectation below is redis-server's own output.
        assert_eq!(incr("10.5", "0.1").as_deref(), Some("10.6"));
        assert_eq!(incr("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(
            incr("10000000000", "0.1").as_deref(),
            Some("10000000000.09999999962747097")
        );
        assert_eq!(
            incr("0", "123456789.123456789").as_deref(),
            Some("123456789.12345678899873747")
        );
        assert_eq!(incr("0", "3.0e3").as_deref(), Some("3000"));
        assert_eq!(incr("0", "1e-20").as_deref(), Some("0"));
        assert_eq!(incr("0", "0x10").as_deref(), Some("16"));
        assert_eq!(incr("0", "-0.0").as_deref(), Some("0"));
        assert_eq!(incr("0", "+5").as_deref(), Some("5"));
        assert_eq!(incr("5.25", "-10").as_deref(), Some("-4.75"));
        assert_eq!(incr("0", ".5").as_deref(), Some("0.5"));
        assert_eq!(incr("0", "5.").as_deref(), Some("5"));
        assert_eq!(incr("0", "1e17").as_deref(), Some("100000000000000000"));
        assert_eq!(incr("0", "0.0000001").as_deref(), Some("0.0000001"));
        assert_eq!(incr("0", "5e-18").as_deref(), Some("0"));
        assert_eq!(
            incr("1e308", "1e308").as_deref(),
            Some(concat!(
                "19999999999999999999337175931169129132112019969483113441559409598984346973767612",
                "37442002538437770786408934944501080264463042694991879211671948416288603928375359",
                "18200039206381557326219209014213335878306791577877829121087126122536729803237260",
                "434173178506889763247582601711514636284849020905456510092687857156096"
            ))
        );
    }

    #[test]
    fn parse_rules() {
        for bad in [
            "", " 1", "1 ", "abc", "1.5.5", "nan", "-nan", "1e", "1e+", "0x", "0x1p", ".", "e5",
            "1e5000", "1e-5000", "1e-4952", "1\u{0}2",
        ] {
            assert_eq!(Ld::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(Ld::parse(b"inf"), Some(Ld::Inf(false)));
        assert_eq!(Ld::parse(b"-Infinity"), Some(Ld::Inf(true)));
        assert_eq!(Ld::parse(b"0e-99999"), Some(Ld::Zero(false)));
        assert_eq!(Ld::parse(b"7"), Some(Ld::from_i64(7)));
        assert_eq!(Ld::parse(b"0x1.8p1"), Some(Ld::from_i64(3)));
        assert_eq!(Ld::parse(&[b'1'; MAX_CHARS]), None);
        assert!(Ld::parse(b"1.18e4932").is_some());
        // Subnormals are accepted, down to the least one (about 3.6e-4951).
        assert!(Ld::parse(b"1e-4940").is_some());
        assert!(Ld::parse(b"4e-4951").is_some());
        assert!(Ld::parse(b"1e-4951").is_none());
        assert!(Ld::parse(b"1.19e4932").is_none());
        assert_eq!(Ld::from_i64(i64::MIN).to_human(), b"-9223372036854775808");
    }

    #[test]
    fn infinities_and_overflow_are_not_finite_sums() {
        assert!(Ld::parse(b"1")
            .unwrap()
            .add(Ld::parse(b"inf").unwrap())
            .is_none());
        let big = Ld::parse(b"1.1e4932").unwrap();
        assert!(big.add(big).is_none());
        let x = Ld::parse(b"2.5").unwrap();
        let y = Ld::parse(b"-2.5").unwrap();
        assert_eq!(x.add(y), Some(Ld::Zero(false)));
    }
}
