//! Bitmap commands: bit-level operations on string values (SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD and BITFIELD_RO), with Redis 7.2's replies and error texts.
//!
//! Bits are numbered from the most significant bit of the first byte, as in Redis. Writes
//! grow the string with zero bytes as needed (bounded by proto-max-bulk-len through the
//! offset check) and edit it in place as a `raw` string.

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;
use storage::{RString, RawMut, Value};

use crate::cmd::util::{is, parse_i64};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const B: Group = Group::Bitmap;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("setbit", 4, WRITE | DENYOOM, (1, 1, 1), B, setbit).doc(
        "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
        "2.2.0",
    ),
    CommandSpec::new("getbit", 3, READONLY | FAST, (1, 1, 1), B, getbit)
        .doc("Returns a bit value by offset.", "2.2.0"),
    CommandSpec::new("bitcount", -2, READONLY, (1, 1, 1), B, bitcount)
        .doc("Counts the number of set bits (population counting) in a string.", "2.6.0"),
    CommandSpec::new("bitpos", -3, READONLY, (1, 1, 1), B, bitpos)
        .doc("Finds the first set (1) or clear (0) bit in a string.", "2.8.7"),
    CommandSpec::new("bitop", -4, WRITE | DENYOOM, (2, -1, 1), B, bitop).doc(
        "Performs bitwise operations on multiple strings, and stores the result.",
        "2.6.0",
    ),
    CommandSpec::new("bitfield", -2, WRITE | DENYOOM, (1, 1, 1), B, bitfield)
        .doc("Performs arbitrary bitfield integer operations on strings.", "3.2.0"),
    CommandSpec::new("bitfield_ro", -2, READONLY | FAST, (1, 1, 1), B, bitfield_ro)
        .doc("Performs arbitrary read-only bitfield integer operations on strings.", "6.0.0"),
];

// ------------------------------------------------------------------------------------------
// Bit helpers

/// Bit `offset` of `p` (0 past the end).
fn get_bit(p: &[u8], offset: u64) -> bool {
    let byte = offset >> 3;
    let Ok(byte) = usize::try_from(byte) else {
        return false;
    };
    p.get(byte)
        .is_some_and(|b| b & (1 << (7 - (offset & 7))) != 0)
}

/// The `bits`-wide (1..=64) unsigned field at bit `offset` of `p`, most significant bit
/// first; bytes past the end read as zero.
pub(crate) fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    let mut value = 0u64;
    for j in 0..u64::from(bits) {
        value = (value << 1) | u64::from(get_bit(p, offset + j));
    }
    value
}

/// The `bits`-wide (1..=64) two's complement field at bit `offset` of `p`.
pub(crate) fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut u = get_unsigned(p, offset, bits);
    if bits < 64 && u & (1u64 << (bits - 1)) != 0 {
        u |= u64::MAX << bits;
    }
    u as i64
}

/// Stores the low `bits` bits of `value` at bit `offset` of `p`, which must be long enough.
pub(crate) fn set_unsigned(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..bits {
        let bitval = ((value >> (bits - 1 - j)) & 1) as u8;
        let off = offset + u64::from(j);
        let Some(b) = usize::try_from(off >> 3).ok().and_then(|i| p.get_mut(i)) else {
            return;
        };
        let shift = 7 - (off & 7) as u8;
        *b = (*b & !(1 << shift)) | (bitval << shift);
    }
}

/// BITFIELD's OVERFLOW behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Wrap around (modular arithmetic; signed wraps to the most negative value).
    Wrap,
    /// Saturate at the type's minimum or maximum.
    Sat,
    /// Do nothing and report null.
    Fail,
}

/// Redis's `checkUnsignedBitfieldOverflow`: 0 when `value + incr` fits `bits` unsigned
/// bits, 1 on overflow, -1 on underflow, with the value to store under `ow` (`Fail`: 0).
pub(crate) fn check_unsigned_overflow(
    value: u64,
    incr: i64,
    bits: u32,
    ow: Overflow,
) -> (i32, u64) {
    let max = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !u64::MAX.checked_shl(bits).unwrap_or(0);
    if value > max || (incr > 0 && incr > maxincr) {
        match ow {
            Overflow::Wrap => (1, wrap()),
            Overflow::Sat => (1, max),
            Overflow::Fail => (1, 0),
        }
    } else if incr < 0 && incr < minincr {
        match ow {
            Overflow::Wrap => (-1, wrap()),
            Overflow::Sat => (-1, 0),
            Overflow::Fail => (-1, 0),
        }
    } else {
        (0, 0)
    }
}

/// Redis's `checkSignedBitfieldOverflow`, with its exact (wrapping) arithmetic.
pub(crate) fn check_signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (i32, i64) {
    let max: i64 = if bits >= 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = (-max) - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let msb = 1u64 << (bits - 1);
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & msb != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        match ow {
            Overflow::Wrap => (1, wrap()),
            Overflow::Sat => (1, max),
            Overflow::Fail => (1, 0),
        }
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        match ow {
            Overflow::Wrap => (-1, wrap()),
            Overflow::Sat => (-1, min),
            Overflow::Fail => (-1, 0),
        }
    } else {
        (0, 0)
    }
}

/// Number of set bits in `p`.
fn popcount(p: &[u8]) -> u64 {
    let mut chunks = p.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        n += u64::from(u64::from_ne_bytes(w).count_ones());
    }
    n + chunks
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>()
}

/// Number of set bits in the inclusive bit range `start..=end` of `p` (within bounds).
fn count_bits(p: &[u8], start: u64, end: u64) -> u64 {
    let (sb, eb) = ((start >> 3) as usize, (end >> 3) as usize);
    let mut n = popcount(&p[sb..=eb]);
    // Drop the bits of the edge bytes outside the range.
    let first_out = p[sb] & !(0xffu8 >> (start & 7));
    let last_out = p[eb] & (0xffu8.checked_shr(1 + (end & 7) as u32).unwrap_or(0));
    n -= u64::from(first_out.count_ones()) + u64::from(last_out.count_ones());
    n
}

/// Position of the first bit equal to `bit` in the inclusive bit range `start..=end` of
/// `p` (within bounds), if any.
fn find_bit(p: &[u8], start: u64, end: u64, bit: bool) -> Option<u64> {
    let (sb, eb) = ((start >> 3) as usize, (end >> 3) as usize);
    // The bits of byte `i` that equal `bit` and lie inside the range.
    let hits = |i: usize| {
        let mut m = 0xffu8 >> (start & 7).min(7) as u32;
        if i != sb {
            m = 0xff;
        }
        if i == eb {
            m &= !(0xffu8.checked_shr(1 + (end & 7) as u32).unwrap_or(0));
        }
        (if bit { p[i] } else { !p[i] }) & m
    };
    let skip = if bit { 0u8 } else { 0xff };
    let mut i = sb;
    while i <= eb {
        if i > sb && i < eb {
            // Skip interior bytes without a match.
            i += p[i..eb].iter().position(|&b| b != skip).unwrap_or(eb - i);
        }
        let h = hits(i);
        if h != 0 {
            return Some(i as u64 * 8 + u64::from(h.leading_zeros()));
        }
        i += 1;
    }
    None
}

// ------------------------------------------------------------------------------------------
// Shared helpers

/// The string held by `v`, or WRONGTYPE for any other type.
#[allow(unreachable_patterns)]
fn as_string(v: &Value) -> Result<&RString, CmdError> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// Mutable access to the string held by `v`, or WRONGTYPE.
#[allow(unreachable_patterns)]
fn as_string_mut(v: &mut Value) -> Result<&mut RString, CmdError> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

fn bad_offset() -> CmdError {
    CmdError::err("bit offset is not an integer or out of range")
}

/// Redis's `getBitOffsetFromArgument`: a non-negative bit offset whose byte is below
/// proto-max-bulk-len; with `hash_bits > 0`, `#n` means `n * hash_bits` (BITFIELD).
fn parse_offset(ctx: &Ctx<'_>, arg: &[u8], hash_bits: u32) -> Result<u64, CmdError> {
    let (digits, mul) = match arg.split_first() {
        Some((b'#', rest)) if hash_bits > 0 => (rest, Some(hash_bits)),
        _ => (arg, None),
    };
    let mut v = storage::value::parse_canonical_i64(digits).ok_or_else(bad_offset)?;
    if let Some(m) = mul {
        v = v.wrapping_mul(i64::from(m));
    }
    let max = ctx.server.live.proto_max_bulk_len.load(Relaxed);
    match u64::try_from(v) {
        Ok(off) if (off >> 3) < max => Ok(off),
        _ => Err(bad_offset()),
    }
}

/// Parses `BIT` / `BYTE` (true for BIT).
fn parse_unit(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Grows the raw bytes of `s` with zeros so that byte `byte` exists; returns them (stored
/// again under the compression policy when the guard drops).
fn grow_to(s: &mut RString, byte: usize) -> RawMut<'_> {
    let mut raw = s.make_raw();
    if raw.len() <= byte {
        raw.resize(byte + 1, 0);
    }
    raw
}

/// Redis's `lookupStringForBitCommand`: the string at `key` made long enough to address
/// bit `maxbit` (created when missing), handed to `f`.
fn with_string_for_write<R>(
    ctx: &Ctx<'_>,
    key: &[u8],
    maxbit: u64,
    f: impl FnOnce(&mut Vec<u8>) -> R,
) -> Result<R, CmdError> {
    let byte = usize::try_from(maxbit >> 3).map_err(|_| bad_offset())?;
    let mut g = ctx.lock(key);
    match g.get() {
        Some(e) => {
            let s = as_string_mut(&mut e.value)?;
            Ok(f(&mut grow_to(s, byte)))
        }
        None => {
            let mut raw = vec![0; byte + 1];
            let r = f(&mut raw);
            g.insert(Value::String(RString::raw_from_vec(raw)), 0);
            Ok(r)
        }
    }
}

// ------------------------------------------------------------------------------------------
// SETBIT GETBIT

fn setbit(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let offset = parse_offset(ctx, args.arg(2), 0)?;
    let bad_bit = || CmdError::err("bit is not an integer or out of range");
    let on = parse_i64(args.arg(3)).map_err(|_| bad_bit())?;
    if on & !1 != 0 {
        return Err(bad_bit());
    }
    let old = with_string_for_write(ctx, args.arg(1), offset, |raw| {
        let old = get_bit(raw, offset);
        set_unsigned(raw, offset, 1, on as u64);
        old
    })?;
    // Redis publishes only when the bit changed.
    if old != (on == 1) {
        ctx.notify(crate::notify::STRING, "setbit", args.arg(1));
    }
    ctx.out.int(i64::from(old));
    Ok(())
}

fn getbit(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let offset = parse_offset(ctx, args.arg(2), 0)?;
    let mut g = ctx.lock(args.arg(1));
    let bit = match g.get() {
        Some(e) => {
            ctx.hit(true);
            as_string(&e.value)?.with_bytes(|b| get_bit(b, offset))
        }
        None => {
            ctx.hit_key(false, args.arg(1));
            false
        }
    };
    drop(g);
    ctx.out.int(i64::from(bit));
    Ok(())
}

// ------------------------------------------------------------------------------------------
// BITCOUNT BITPOS

/// Clamps Redis-style (negative from the end) inclusive `start..=end` indexes to a string
/// of `total` units; `None` when the range is empty.
fn clamp_range(mut start: i64, mut end: i64, total: i64) -> Option<(u64, u64)> {
    if start < 0 {
        start = start.saturating_add(total);
    }
    if end < 0 {
        end = end.saturating_add(total);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    (start <= end).then_some((start as u64, end as u64))
}

fn bitcount(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let range = match args.len() {
        2 => None,
        4 | 5 => {
            let start = parse_i64(args.arg(2))?;
            let end = parse_i64(args.arg(3))?;
            let isbit = if args.len() == 5 {
                parse_unit(args.arg(4))?
            } else {
                false
            };
            Some((start, end, isbit))
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut g = ctx.lock(args.arg(1));
    let n = match g.get() {
        None => {
            ctx.hit_key(false, args.arg(1));
            0
        }
        Some(e) => {
            ctx.hit(true);
            as_string(&e.value)?.with_bytes(|p| {
                let len = p.len() as i64;
                let bits = match range {
                    None => clamp_range(0, len - 1, len).map(|(s, e)| (s * 8, e * 8 + 7)),
                    Some((s, e, _)) if s < 0 && e < 0 && s > e => None,
                    Some((s, e, true)) => clamp_range(s, e, len * 8),
                    Some((s, e, false)) => clamp_range(s, e, len).map(|(s, e)| (s * 8, e * 8 + 7)),
                };
                bits.map_or(0, |(s, e)| count_bits(p, s, e))
            })
        }
    };
    drop(g);
    ctx.out.int(n as i64);
    Ok(())
}

fn bitpos(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let bit = parse_i64(args.arg(2))?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("The bit argument must be 1 or 0."));
    }
    let bit = bit == 1;
    let (start, end, isbit) = match args.len() {
        3 => (0, None, false),
        4..=6 => {
            let start = parse_i64(args.arg(3))?;
            let isbit = if args.len() == 6 {
                parse_unit(args.arg(5))?
            } else {
                false
            };
            let end = if args.len() >= 5 {
                Some(parse_i64(args.arg(4))?)
            } else {
                None
            };
            (start, end, isbit)
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut g = ctx.lock(args.arg(1));
    let pos = match g.get() {
        None => {
            ctx.hit_key(false, args.arg(1));
            if bit {
                -1
            } else {
                0
            }
        }
        Some(e) => {
            ctx.hit(true);
            as_string(&e.value)?.with_bytes(|p| {
                let len = p.len() as i64;
                let bits = if isbit {
                    clamp_range(start, end.unwrap_or(-1), len * 8)
                } else {
                    clamp_range(start, end.unwrap_or(len - 1), len).map(|(s, e)| (s * 8, e * 8 + 7))
                };
                match bits {
                    None => -1,
                    Some((s, e)) => match find_bit(p, s, e, bit) {
                        Some(pos) => pos as i64,
                        // Without an explicit end the string is seen as padded with zeros.
                        None if !bit && end.is_none() => e as i64 + 1,
                        None => -1,
                    },
                }
            })
        }
    };
    drop(g);
    ctx.out.int(pos);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// BITOP

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let name = args.arg(1);
    let op = if is(name, "and") {
        BitOp::And
    } else if is(name, "or") {
        BitOp::Or
    } else if is(name, "xor") {
        BitOp::Xor
    } else if is(name, "not") {
        BitOp::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if op == BitOp::Not && args.len() != 4 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    let db = ctx.db();
    let dst = args.arg(2);
    let srcs = args.slice(3);
    let mut g = ctx.lock_keys(args.slice(2));
    // First pass: type checks and the longest source.
    let mut maxlen = 0usize;
    for k in srcs {
        match g.get(db, k) {
            Some(e) => {
                ctx.hit(true);
                maxlen = maxlen.max(as_string(&e.value)?.len());
            }
            None => ctx.hit_key(false, k),
        }
    }
    if maxlen == 0 {
        let old = g.remove(db, dst);
        drop(g);
        if old.is_some() {
            ctx.notify(crate::notify::GENERIC, "del", dst);
        }
        drop(old);
        ctx.out.int(0);
        return Ok(());
    }
    // Second pass: fold every source into the result (missing bytes are zeros).
    let mut res = vec![0u8; maxlen];
    for (i, k) in srcs.iter().enumerate() {
        let mut fold = |p: &[u8]| {
            if i == 0 {
                res[..p.len()].copy_from_slice(p);
                if op == BitOp::Not {
                    res.iter_mut().for_each(|b| *b = !*b);
                }
                return;
            }
            match op {
                BitOp::And => {
                    res.iter_mut().zip(p).for_each(|(r, b)| *r &= b);
                    res[p.len()..].fill(0);
                }
                BitOp::Or => res.iter_mut().zip(p).for_each(|(r, b)| *r |= b),
                BitOp::Xor => res.iter_mut().zip(p).for_each(|(r, b)| *r ^= b),
                BitOp::Not => {}
            }
        };
        match g.peek(db, k) {
            Some(e) => as_string(&e.value)?.with_bytes(fold),
            None => fold(b""),
        }
    }
    let old = g.insert(db, dst, Value::String(RString::from_vec(res)), 0);
    drop(g);
    ctx.notify(crate::notify::STRING, "set", dst);
    drop(old);
    ctx.out.int(maxlen as i64);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// BITFIELD BITFIELD_RO

/// One parsed BITFIELD operation.
#[derive(Clone, Copy, Debug)]
struct FieldOp {
    kind: FieldKind,
    offset: u64,
    bits: u32,
    signed: bool,
    value: i64,
    overflow: Overflow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldKind {
    Get,
    Set,
    IncrBy,
}

/// Redis's `getBitfieldTypeFromArgument`: `i1`..`i64` or `u1`..`u63`.
fn parse_field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let err = || {
        CmdError::err(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let (signed, rest) = match arg.split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(err()),
    };
    // Redis reads the width as a C string: it stops at a NUL byte.
    let rest = rest.split(|&c| c == 0).next().unwrap_or(b"");
    let bits = storage::value::parse_canonical_i64(rest).ok_or_else(err)?;
    let limit = if signed { 64 } else { 63 };
    if !(1..=limit).contains(&bits) {
        return Err(err());
    }
    Ok((signed, bits as u32))
}

/// Parses BITFIELD's operations (from argument 2 on).
fn parse_field_ops(ctx: &Ctx<'_>, args: Args<'_>) -> Result<Vec<FieldOp>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let sub = args.arg(j);
        let kind = if is(sub, "get") && remaining >= 2 {
            FieldKind::Get
        } else if is(sub, "set") && remaining >= 3 {
            FieldKind::Set
        } else if is(sub, "incrby") && remaining >= 3 {
            FieldKind::IncrBy
        } else if is(sub, "overflow") && remaining >= 1 {
            let t = args.arg(j + 1);
            overflow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = parse_field_type(args.arg(j + 1))?;
        let offset = parse_offset(ctx, args.arg(j + 2), bits)?;
        let value = if kind == FieldKind::Get {
            0
        } else {
            parse_i64(args.arg(j + 3))?
        };
        ops.push(FieldOp {
            kind,
            offset,
            bits,
            signed,
            value,
            overflow,
        });
        j += if kind == FieldKind::Get { 3 } else { 4 };
    }
    Ok(ops)
}

/// Result of one BITFIELD operation: a value, or null for a FAIL overflow.
fn run_field_op(p: &mut [u8], op: &FieldOp) -> Option<i64> {
    if op.kind == FieldKind::Get {
        return Some(read_field(p, op));
    }
    let (retval, newval) = if op.signed {
        let old = get_signed(p, op.offset, op.bits);
        let (ovf, lim, ret_new) = if op.kind == FieldKind::IncrBy {
            let (o, l) = check_signed_overflow(old, op.value, op.bits, op.overflow);
            (o, l, true)
        } else {
            let (o, l) = check_signed_overflow(op.value, 0, op.bits, op.overflow);
            (o, l, false)
        };
        if ovf != 0 && op.overflow == Overflow::Fail {
            return None;
        }
        let new = if ovf != 0 {
            lim
        } else if op.kind == FieldKind::IncrBy {
            old.wrapping_add(op.value)
        } else {
            op.value
        };
        (if ret_new { new } else { old }, new as u64)
    } else {
        let old = get_unsigned(p, op.offset, op.bits);
        let (ovf, lim) = if op.kind == FieldKind::IncrBy {
            check_unsigned_overflow(old, op.value, op.bits, op.overflow)
        } else {
            check_unsigned_overflow(op.value as u64, 0, op.bits, op.overflow)
        };
        if ovf != 0 && op.overflow == Overflow::Fail {
            return None;
        }
        let new = if ovf != 0 {
            lim
        } else if op.kind == FieldKind::IncrBy {
            old.wrapping_add(op.value as u64)
        } else {
            op.value as u64
        };
        let ret = if op.kind == FieldKind::IncrBy {
            new
        } else {
            old
        };
        (ret as i64, new)
    };
    set_unsigned(p, op.offset, op.bits, newval);
    Some(retval)
}

/// A GET: the field's value (zero-padded past the end of `p`).
fn read_field(p: &[u8], op: &FieldOp) -> i64 {
    if op.signed {
        get_signed(p, op.offset, op.bits)
    } else {
        get_unsigned(p, op.offset, op.bits) as i64
    }
}

fn write_field_results(ctx: &mut Ctx<'_>, results: &[Option<i64>]) {
    ctx.out.array(results.len());
    for r in results {
        match r {
            Some(v) => ctx.out.int(*v),
            None => ctx.out.null(),
        }
    }
}

fn bitfield_generic(ctx: &mut Ctx<'_>, args: Args<'_>, ro: bool) -> CmdResult {
    let ops = parse_field_ops(ctx, args)?;
    let highest = ops
        .iter()
        .filter(|o| o.kind != FieldKind::Get)
        .map(|o| o.offset + u64::from(o.bits) - 1)
        .max();
    let key = args.arg(1);
    let results: Vec<Option<i64>> = match highest {
        None => {
            let mut g = ctx.lock(key);
            match g.get() {
                None => {
                    ctx.hit_key(false, args.arg(1));
                    ops.iter().map(|o| Some(read_field(b"", o))).collect()
                }
                Some(e) => {
                    ctx.hit(true);
                    as_string(&e.value)?
                        .with_bytes(|p| ops.iter().map(|o| Some(read_field(p, o))).collect())
                }
            }
        }
        Some(_) if ro => {
            return Err(CmdError::err(
                "BITFIELD_RO only supports the GET subcommand",
            ))
        }
        Some(maxbit) => {
            let results: Vec<Option<i64>> = with_string_for_write(ctx, key, maxbit, |raw| {
                ops.iter().map(|o| run_field_op(raw, o)).collect()
            })?;
            // Redis counts a change for every SET / INCRBY that did not fail on overflow.
            let changed = ops
                .iter()
                .zip(&results)
                .any(|(o, r)| o.kind != FieldKind::Get && r.is_some());
            if changed {
                ctx.notify(crate::notify::STRING, "setbit", key);
            }
            results
        }
    };
    write_field_results(ctx, &results);
    Ok(())
}

fn bitfield(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_get_set() {
        let mut p = vec![0u8; 4];
        set_unsigned(&mut p, 3, 5, 0b10110);
        assert_eq!(p[0], 0b0001_0110);
        assert_eq!(get_unsigned(&p, 3, 5), 0b10110);
        set_unsigned(&mut p, 6, 8, 0xff);
        assert_eq!(p[..2], [0b0001_0111, 0b1111_1100]);
        assert_eq!(get_unsigned(&p, 6, 8), 0xff);
        // Past the end reads as zeros.
        assert_eq!(get_unsigned(&p, 30, 8), 0);
        assert_eq!(get_unsigned(&[0xff], 4, 8), 0xf0);
    }

    #[test]
    fn signed_get_set() {
        let mut p = vec![0u8; 9];
        set_unsigned(&mut p, 0, 8, -1i64 as u64);
        assert_eq!(get_signed(&p, 0, 8), -1);
        assert_eq!(get_unsigned(&p, 0, 8), 255);
        set_unsigned(&mut p, 5, 64, i64::MIN as u64);
        assert_eq!(get_signed(&p, 5, 64), i64::MIN);
        set_unsigned(&mut p, 0, 4, 0b1000);
        assert_eq!(get_signed(&p, 0, 4), -8);
        assert_eq!(get_signed(&p, 0, 1), -1);
    }

    #[test]
    fn unsigned_overflow() {
        use Overflow::*;
        assert_eq!(check_unsigned_overflow(250, 5, 8, Wrap), (0, 0));
        assert_eq!(check_unsigned_overflow(250, 10, 8, Wrap), (1, 4));
        assert_eq!(check_unsigned_overflow(250, 10, 8, Sat), (1, 255));
        assert_eq!(check_unsigned_overflow(5, -6, 8, Sat), (-1, 0));
        assert_eq!(check_unsigned_overflow(5, -6, 8, Wrap), (-1, 255));
        assert_eq!(check_unsigned_overflow(5, -6, 8, Fail).0, -1);
        // SET of a value that does not fit.
        assert_eq!(check_unsigned_overflow(-1i64 as u64, 0, 8, Sat), (1, 255));
        assert_eq!(check_unsigned_overflow(256, 0, 8, Wrap), (1, 0));
        assert_eq!(check_unsigned_overflow(0, i64::MAX, 63, Wrap), (0, 0));
        assert_eq!(check_unsigned_overflow(1, i64::MAX, 63, Wrap), (1, 0));
    }

    #[test]
    fn signed_overflow() {
        use Overflow::*;
        assert_eq!(check_signed_overflow(100, 27, 8, Wrap), (0, 0));
        assert_eq!(check_signed_overflow(100, 28, 8, Wrap), (1, -128));
        assert_eq!(check_signed_overflow(100, 28, 8, Sat), (1, 127));
        assert_eq!(check_signed_overflow(-100, -29, 8, Sat), (-1, -128));
        assert_eq!(check_signed_overflow(-100, -29, 8, Wrap), (-1, 127));
        assert_eq!(check_signed_overflow(i64::MAX, 1, 64, Wrap), (1, i64::MIN));
        assert_eq!(check_signed_overflow(i64::MIN, -1, 64, Sat), (-1, i64::MIN));
        assert_eq!(check_signed_overflow(i64::MIN, 0, 64, Sat), (0, 0));
        assert_eq!(check_signed_overflow(200, 0, 8, Wrap), (1, -56));
        assert_eq!(check_signed_overflow(-1, 0, 1, Wrap), (0, 0));
        assert_eq!(check_signed_overflow(1, 0, 1, Sat), (1, 0));
    }

    #[test]
    fn counting_and_searching() {
        let p = [0b0000_1111u8, 0xff, 0b1000_0000];
        assert_eq!(popcount(&p), 13);
        assert_eq!(count_bits(&p, 0, 23), 13);
        assert_eq!(count_bits(&p, 5, 9), 5);
        assert_eq!(count_bits(&p, 16, 16), 1);
        assert_eq!(count_bits(&p, 17, 23), 0);
        assert_eq!(find_bit(&p, 0, 23, true), Some(4));
        assert_eq!(find_bit(&p, 0, 23, false), Some(0));
        assert_eq!(find_bit(&p, 4, 16, false), None);
        assert_eq!(find_bit(&p, 4, 17, false), Some(17));
        assert_eq!(clamp_range(-3, -1, 10), Some((7, 9)));
        assert_eq!(clamp_range(5, 2, 10), None);
        assert_eq!(clamp_range(0, -1, 0), None);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 4), Some((0, 3)));
    }

    #[test]
    fn field_types() {
        assert_eq!(parse_field_type(b"i64").unwrap(), (true, 64));
        assert_eq!(parse_field_type(b"u63").unwrap(), (false, 63));
        assert!(parse_field_type(b"u64").is_err());
        assert!(parse_field_type(b"i0").is_err());
        assert!(parse_field_type(b"x8").is_err());
        assert!(parse_field_type(b"").is_err());
        assert!(parse_field_type(b"i+8").is_err());
    }
}
