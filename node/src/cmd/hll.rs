//! HyperLogLog commands (PFADD, PFCOUNT, PFMERGE), in Redis's sparse and dense string
//! formats, byte for byte as Redis 7.2's `hyperloglog.c` writes them.
//!
//! An HLL is a plain string: a 16-byte header (`HYLL`, the encoding byte, three unused
//! bytes, the cached cardinality as 8 little-endian bytes whose top bit flags the cache as
//! stale), then either 16384 6-bit registers packed LSB first (dense) or a run-length code
//! of ZERO / XZERO / VAL opcodes (sparse). Elements are hashed with MurmurHash64A (seed
//! `0xadc83b19`); the low 14 bits pick the register, the run of zeros in the next 50 bits
//! gives its value. The cardinality is Ertl's improved estimator, as in Redis 7.
//!
//! The codec below works on `Vec<u8>` buffers and never panics on corrupted input: reads
//! past the end see a zero byte (Redis relies on the sds terminator there).

use resp::Args;
use storage::{RString, Value};

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const H: Group = Group::HyperLogLog;

/// HyperLogLog commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("pfadd", -2, WRITE | DENYOOM | FAST, (1, 1, 1), H, pfadd).doc(
        "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
        "2.8.9",
    ),
    CommandSpec::new(
        "pfcount",
        -2,
        READONLY | MAY_REPLICATE,
        (1, -1, 1),
        H,
        pfcount,
    )
    .doc(
        "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
        "2.8.9",
    ),
    CommandSpec::new("pfmerge", -2, WRITE | DENYOOM, (1, -1, 1), H, pfmerge).doc(
        "Merges one or more HyperLogLog values into a single key.",
        "2.8.9",
    ),
    CommandSpec::new("pfdebug", 3, WRITE | DENYOOM | ADMIN, (2, 2, 1), H, pfdebug).doc(
        "Internal commands for debugging HyperLogLog values.",
        "2.8.9",
    ),
    CommandSpec::new("pfselftest", 1, ADMIN, (0, 0, 0), H, pfselftest).doc(
        "An internal command for testing HyperLogLog values.",
        "2.8.9",
    ),
];

// ------------------------------------------------------------------------------------------
// Format constants

/// Bits of the hash used as register index.
const P: u32 = 14;
/// Bits of the hash used for the zero run.
const Q: usize = 64 - P as usize;
/// Number of registers.
const REGISTERS: usize = 1 << P;
/// Mask of the register index.
const P_MASK: u64 = REGISTERS as u64 - 1;
/// Bits per dense register.
const BITS: usize = 6;
/// Largest dense register value.
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// Header size.
const HDR: usize = 16;
/// Total size of a dense HLL.
const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
/// Encoding byte of the dense form.
const DENSE: u8 = 0;
/// Encoding byte of the sparse form.
const SPARSE: u8 = 1;
/// Highest valid encoding byte.
const MAX_ENCODING: u8 = 1;
/// Largest value a sparse VAL opcode holds.
const SPARSE_VAL_MAX_VALUE: u8 = 32;
/// Longest run a sparse VAL opcode holds.
const SPARSE_VAL_MAX_LEN: usize = 4;
/// Longest run a sparse ZERO opcode holds.
const SPARSE_ZERO_MAX_LEN: usize = 64;
/// Longest run a sparse XZERO opcode holds.
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// hll-sparse-max-bytes: a sparse HLL growing beyond this becomes dense.
const SPARSE_MAX_BYTES: usize = 3000;
/// 0.5 / ln(2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

const WRONG_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const INVALID_HLL: &str = "INVALIDOBJ Corrupted HLL object detected";

/// A sparse representation that does not cover exactly the 16384 registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Corrupt;

// ------------------------------------------------------------------------------------------
// Hashing

/// MurmurHash2, 64-bit version (MurmurHash64A), endian-neutral as in Redis.
fn murmurhash64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Redis's `hllPatLen`: the register index of `ele` and the length of its `000..1` run.
fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(ele, 0xadc8_3b19);
    let index = (hash & P_MASK) as usize;
    let bits = (hash >> P) | (1u64 << Q);
    // At most Q + 1 = 51.
    (index, bits.trailing_zeros() as u8 + 1)
}

// ------------------------------------------------------------------------------------------
// Dense registers

/// Register `i` of the dense register area `regs`.
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = u32::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u32::from(REGISTER_MAX)) as u8
}

/// Sets register `i` of `regs` to `val` (at most 63).
fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v = u32::from(val & REGISTER_MAX);
    let max = u32::from(REGISTER_MAX);
    if let Some(b) = regs.get_mut(byte) {
        *b = ((u32::from(*b) & !(max << fb)) | (v << fb)) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b = ((u32::from(*b) & !(max >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// Redis's `hllDenseSet`: raises register `i` to `count`; true if it changed.
fn dense_set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

// ------------------------------------------------------------------------------------------
// Sparse opcodes

fn is_zero(op: u8) -> bool {
    op & 0xc0 == 0
}

fn is_xzero(op: u8) -> bool {
    op & 0xc0 == 0x40
}

fn is_val(op: u8) -> bool {
    op & 0x80 != 0
}

fn zero_len(op: u8) -> usize {
    usize::from(op & 0x3f) + 1
}

fn xzero_len(op: u8, next: u8) -> usize {
    ((usize::from(op & 0x3f) << 8) | usize::from(next)) + 1
}

fn val_value(op: u8) -> u8 {
    ((op >> 2) & 0x1f) + 1
}

fn val_len(op: u8) -> usize {
    usize::from(op & 0x3) + 1
}

fn val_op(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) << 2) | (len - 1) as u8
}

fn zero_op(len: usize) -> u8 {
    (len - 1) as u8
}

fn xzero_op(len: usize) -> [u8; 2] {
    let l = len - 1;
    [0x40 | (l >> 8) as u8, (l & 0xff) as u8]
}

/// The byte at `i`, or 0 past the end (the sds terminator Redis reads there).
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// One decoded sparse opcode: its size in bytes, its run length and its value (0: zeros).
fn decode_op(b: &[u8], p: usize) -> (usize, usize, u8) {
    let op = b[p];
    if is_zero(op) {
        (1, zero_len(op), 0)
    } else if is_xzero(op) {
        (2, xzero_len(op, at(b, p + 1)), 0)
    } else {
        (1, val_len(op), val_value(op))
    }
}

/// A new, empty HLL in the sparse form (Redis's `createHLLObject`).
fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.resize(HDR, 0);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(SPARSE_XZERO_MAX_LEN);
        v.extend_from_slice(&xzero_op(n));
        left -= n;
    }
    v
}

/// Redis's `hllSparseToDense`: converts `hll` to the dense form in place (a no-op when it
/// already is dense), keeping the header; fails on a corrupted sparse code.
fn sparse_to_dense(hll: &mut Vec<u8>) -> Result<(), Corrupt> {
    if hll.get(4) == Some(&DENSE) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    let hdr_len = hll.len().min(HDR);
    dense[..hdr_len].copy_from_slice(&hll[..hdr_len]);
    dense[4] = DENSE;
    let mut idx = 0usize;
    let mut p = HDR;
    while p < hll.len() {
        let (oplen, run, val) = decode_op(hll, p);
        if val != 0 {
            if run + idx > REGISTERS {
                return Err(Corrupt);
            }
            for i in idx..idx + run {
                dense_put(&mut dense[HDR..], i, val);
            }
        }
        idx += run;
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *hll = dense;
    Ok(())
}

/// Redis's `hllSparseSet`: raises register `index` to `count` in the sparse `hll`,
/// promoting it to dense when the value does not fit a VAL opcode or the code would grow
/// beyond hll-sparse-max-bytes. True when a register changed.
fn sparse_set(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(hll, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let mut p = HDR;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut span = 0usize;
    while p < hll.len() {
        let (oplen, run, _) = decode_op(hll, p);
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= hll.len() {
        return Err(Corrupt);
    }
    let op = hll[p];
    let (zero, xzero) = (is_zero(op), is_xzero(op));
    let runlen = span;

    // Step 2: the trivial in-place cases.
    let mut done = false;
    if is_val(op) {
        if val_value(op) >= count {
            return Ok(false);
        }
        if runlen == 1 {
            hll[p] = val_op(count, 1);
            done = true;
        }
    }
    if !done && zero && runlen == 1 {
        hll[p] = val_op(count, 1);
        done = true;
    }

    if !done {
        // The general case: split the opcode into up to three.
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        let last = first + span - 1;
        if zero || xzero {
            let zeros = |seq: &mut Vec<u8>, len: usize| {
                if len > SPARSE_ZERO_MAX_LEN {
                    seq.extend_from_slice(&xzero_op(len));
                } else {
                    seq.push(zero_op(len));
                }
            };
            if index != first {
                zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                zeros(&mut seq, last - index);
            }
        } else {
            let cur = val_value(op);
            if index != first {
                seq.push(val_op(cur, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(cur, last - index));
            }
        }
        // Step 3: substitute the new sequence for the old opcode.
        let oldlen = if xzero { 2 } else { 1 };
        if seq.len() > oldlen && hll.len() + (seq.len() - oldlen) > SPARSE_MAX_BYTES {
            return promote(hll, index, count);
        }
        let end = (p + oldlen).min(hll.len());
        hll.splice(p..end, seq);
    }

    // Step 4: merge adjacent VAL opcodes of the same value, scanning up to 5 opcodes
    // from the one before the change.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5i32;
    while p < hll.len() && scan > 0 {
        scan -= 1;
        let op = hll[p];
        if is_xzero(op) {
            p += 2;
            continue;
        } else if is_zero(op) {
            p += 1;
            continue;
        }
        if p + 1 < hll.len() && is_val(hll[p + 1]) {
            let (v1, v2) = (val_value(op), val_value(hll[p + 1]));
            if v1 == v2 {
                let len = val_len(op) + val_len(hll[p + 1]);
                if len <= SPARSE_VAL_MAX_LEN {
                    hll[p + 1] = val_op(v1, len);
                    hll.remove(p);
                    continue;
                }
            }
        }
        p += 1;
    }
    invalidate(hll);
    Ok(true)
}

/// The promotion path of `hllSparseSet`: converts to dense, then sets the register.
fn promote(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    sparse_to_dense(hll)?;
    Ok(dense_set(&mut hll[HDR..], index, count))
}

/// Redis's `hllAdd`: adds `ele` to `hll` (either form); true when a register changed.
fn add(hll: &mut Vec<u8>, ele: &[u8]) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    match hll.get(4) {
        Some(&DENSE) if hll.len() == DENSE_SIZE => Ok(dense_set(&mut hll[HDR..], index, count)),
        Some(&SPARSE) => sparse_set(hll, index, count),
        _ => Err(Corrupt),
    }
}

/// Marks the cached cardinality stale.
fn invalidate(hll: &mut [u8]) {
    if let Some(b) = hll.get_mut(HDR - 1) {
        *b |= 0x80;
    }
}

/// Redis's `hllMerge`: `max[i] = MAX(max[i], hll[i])`; fails on a corrupted sparse code.
fn merge(max: &mut [u8], hll: &[u8]) -> Result<(), Corrupt> {
    if hll[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&hll[HDR..], i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = HDR;
    while p < hll.len() {
        let (oplen, run, val) = decode_op(hll, p);
        if val != 0 {
            if run + i > REGISTERS {
                return Err(Corrupt);
            }
            for m in &mut max[i..i + run] {
                *m = (*m).max(val);
            }
        }
        i += run;
        p += oplen;
    }
    if i != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Estimation

/// The register histogram of an HLL (either form); sparse codes that do not cover
/// exactly the 16384 registers are corrupt.
fn histogram(hll: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut h = [0u32; 64];
    if hll[4] == DENSE {
        for i in 0..REGISTERS {
            h[usize::from(dense_get(&hll[HDR..], i))] += 1;
        }
        return Ok(h);
    }
    let mut idx = 0usize;
    let mut p = HDR;
    while p < hll.len() {
        let (oplen, run, val) = decode_op(hll, p);
        idx += run;
        h[usize::from(val)] = h[usize::from(val)].saturating_add(run as u32);
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(h)
}

/// The histogram of a raw register array (one byte per register).
fn raw_histogram(regs: &[u8]) -> [u32; 64] {
    let mut h = [0u32; 64];
    for &r in regs {
        h[usize::from(r & 63)] += 1;
    }
    h
}

/// Ertl's sigma function.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    // Converges in well under a hundred rounds for x in [0, 1).
    for _ in 0..10_000 {
        x *= x;
        let z_prime = z;
        z += x * y;
        y += y;
        if z_prime == z {
            break;
        }
    }
    z
}

/// Ertl's tau function.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    for _ in 0..10_000 {
        x = x.sqrt();
        let z_prime = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if z_prime == z {
            break;
        }
    }
    z / 3.0
}

/// Redis's `hllCount` estimator over a register histogram.
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(h[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(h[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(h[0]) / m);
    let e = ALPHA_INF * m * m / z;
    // `llroundl` answers LLONG_MIN for values it cannot represent (all registers maxed
    // out in a crafted dense string): Redis then caches and replies 1 << 63.
    if e.is_finite() && e < 9_223_372_036_854_775_808.0 {
        e.round() as u64
    } else {
        1 << 63
    }
}

// ------------------------------------------------------------------------------------------
// Commands

/// Redis's `isHLLObjectOrReply`: WRONGTYPE for other types and for strings that are not
/// HLLs (bad magic, unknown encoding, dense of the wrong size).
#[allow(unreachable_patterns)]
fn hll_string(v: &Value) -> Result<&RString, CmdError> {
    let s = match v {
        Value::String(s) => s,
        _ => return Err(CmdError::WrongType),
    };
    if s.with_bytes(is_hll) {
        Ok(s)
    } else {
        Err(CmdError::raw(WRONG_HLL))
    }
}

/// Mutable form of [`hll_string`].
#[allow(unreachable_patterns)]
fn hll_string_mut(v: &mut Value) -> Result<&mut RString, CmdError> {
    hll_string(v)?;
    match v {
        Value::String(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// Whether `b` passes Redis's HLL header checks.
fn is_hll(b: &[u8]) -> bool {
    b.len() >= HDR
        && &b[..4] == b"HYLL"
        && b[4] <= MAX_ENCODING
        && (b[4] != DENSE || b.len() == DENSE_SIZE)
}

fn corrupt(_: Corrupt) -> CmdError {
    CmdError::raw(INVALID_HLL)
}

/// Stores a freshly built HLL as a `raw` string, as Redis does.
fn raw_string(v: Vec<u8>) -> RString {
    RString::raw_from_vec(v)
}

fn pfadd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let elements = args.slice(2);
    let updated = match g.get() {
        None => {
            let mut hll = new_sparse();
            for ele in elements.iter() {
                add(&mut hll, ele).map_err(corrupt)?;
            }
            invalidate(&mut hll);
            g.insert(Value::String(raw_string(hll)), 0);
            true
        }
        Some(e) => {
            let mut hll = hll_string_mut(&mut e.value)?.make_raw();
            let mut updated = false;
            for ele in elements.iter() {
                updated |= add(&mut hll, ele).map_err(corrupt)?;
            }
            if updated {
                invalidate(&mut hll);
            }
            updated
        }
    };
    drop(g);
    if updated {
        ctx.notify(crate::notify::STRING, "pfadd", args.arg(1));
    }
    ctx.out.int(i64::from(updated));
    Ok(())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key, as Redis's pfdebugCommand: GETREG and
/// TODENSE turn a sparse value dense (a write), DECODE lists a sparse value's opcodes.
fn pfdebug(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let sub = args.arg(1);
    let mut g = ctx.lock(args.arg(2));
    let Some(e) = g.get() else {
        return Err(CmdError::err("The specified key does not exist"));
    };
    let s = hll_string_mut(&mut e.value)?;
    let name = String::from_utf8_lossy(sub).to_ascii_lowercase();
    match name.as_str() {
        "getreg" => {
            let mut hll = s.make_raw();
            sparse_to_dense(&mut hll).map_err(corrupt)?;
            let regs: Vec<u8> = (0..REGISTERS).map(|i| dense_get(&hll[HDR..], i)).collect();
            drop(hll);
            drop(g);
            ctx.out.array(REGISTERS);
            for r in regs {
                ctx.out.int(i64::from(r));
            }
        }
        "decode" => {
            let text = s.with_bytes(|b| {
                if b[4] != SPARSE {
                    return Err(CmdError::err("HLL encoding is not sparse"));
                }
                let mut parts = Vec::new();
                let mut p = HDR;
                while p < b.len() {
                    let op = b[p];
                    let (oplen, run, val) = decode_op(b, p);
                    parts.push(if is_zero(op) {
                        format!("z:{run}")
                    } else if is_xzero(op) {
                        format!("Z:{run}")
                    } else {
                        format!("v:{val},{run}")
                    });
                    p += oplen;
                }
                Ok(parts.join(" "))
            })?;
            drop(g);
            ctx.out.bulk(text.as_bytes());
        }
        "encoding" => {
            let dense = s.with_bytes(|b| b[4] == DENSE);
            drop(g);
            ctx.out
                .simple(if dense { &b"dense"[..] } else { &b"sparse"[..] });
        }
        "todense" => {
            let mut hll = s.make_raw();
            let converted = hll[4] == SPARSE;
            sparse_to_dense(&mut hll).map_err(corrupt)?;
            drop(hll);
            drop(g);
            ctx.out.int(i64::from(converted));
        }
        _ => {
            return Err(CmdError::err(format!(
                "Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(sub)
            )))
        }
    }
    Ok(())
}

/// PFSELFTEST, as Redis's pfselftestCommand: dense registers keep what is written to them
/// without disturbing their neighbours, and the estimate of up to 10,000,000 distinct
/// elements stays within 6 standard errors, the sparse and dense forms agreeing while the
/// sparse one is in use.
fn pfselftest(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    match selftest() {
        Ok(()) => {
            ctx.out.ok();
            Ok(())
        }
        Err(e) => Err(CmdError::raw(format!("TESTFAILED {e}"))),
    }
}

/// The checks behind [`pfselftest`].
fn selftest() -> Result<(), String> {
    use rand::Rng as _;
    let mut rng = rand::rng();
    let mut dense = vec![0u8; DENSE_SIZE - HDR];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = rng.random::<u8>() & REGISTER_MAX;
            dense_put(&mut dense, i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let v = dense_get(&dense, i);
            if v != b {
                return Err(format!("Register {i} should be {b} but is {v}"));
            }
        }
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    dense[4] = DENSE;
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed: u64 = rng.random();
    let mut checkpoint = 1u64;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        add(&mut dense, &ele).map_err(|_| "dense add failed".to_string())?;
        add(&mut sparse, &ele).map_err(|_| "sparse add failed".to_string())?;
        if j != checkpoint {
            continue;
        }
        let count = |h: &[u8]| histogram(h).map(|h| estimate(&h));
        let est = count(&dense).map_err(|_| "corrupt dense".to_string())?;
        if (j as usize) < SPARSE_MAX_BYTES / 2 && sparse[4] != SPARSE {
            return Err("sparse encoding not used".into());
        }
        if count(&sparse).map_err(|_| "corrupt sparse".to_string())? != est {
            return Err("dense/sparse disagree".into());
        }
        let abserr = checkpoint.abs_diff(est);
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!("Too big error. card:{checkpoint} abserr:{abserr}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

fn pfcount(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() > 2 {
        return pfcount_union(ctx, args);
    }
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        ctx.out.int(0);
        return Ok(());
    };
    ctx.hit(true);
    let s = hll_string_mut(&mut e.value)?;
    let cached = s.with_bytes(|b| {
        let mut card = [0u8; 8];
        card.copy_from_slice(&b[8..HDR]);
        (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
    });
    let card = match cached {
        Some(c) => c,
        None => {
            let c = s
                .with_bytes(histogram)
                .map(|h| estimate(&h))
                .map_err(corrupt)?;
            s.make_raw()[8..HDR].copy_from_slice(&c.to_le_bytes());
            c
        }
    };
    drop(g);
    ctx.out.int(card as i64);
    Ok(())
}

/// PFCOUNT with several keys: the cardinality of their union, keys left untouched.
fn pfcount_union(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let keys: Vec<&[u8]> = args.slice(1).iter().collect();
    let db = ctx.db();
    let mut g = ctx.lock_keys(keys.iter().copied());
    let mut max = vec![0u8; REGISTERS];
    for k in &keys {
        let Some(e) = g.get(db, k) else {
            ctx.hit_key(false, k);
            continue;
        };
        ctx.hit(true);
        hll_string(&e.value)?
            .with_bytes(|b| merge(&mut max, b))
            .map_err(corrupt)?;
    }
    drop(g);
    ctx.out.int(estimate(&raw_histogram(&max)) as i64);
    Ok(())
}

fn pfmerge(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let keys: Vec<&[u8]> = args.slice(1).iter().collect();
    let dest = args.arg(1);
    let db = ctx.db();
    let mut g = ctx.lock_keys(keys.iter().copied());
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    // The destination is a source too.
    for k in &keys {
        let Some(e) = g.get(db, k) else {
            ctx.hit_key(false, k);
            continue;
        };
        ctx.hit(true);
        hll_string(&e.value)?
            .with_bytes(|b| {
                use_dense |= b[4] == DENSE;
                merge(&mut max, b)
            })
            .map_err(corrupt)?;
    }
    if g.get(db, dest).is_none() {
        g.insert(db, dest, Value::String(raw_string(new_sparse())), 0);
    }
    let Some(e) = g.get(db, dest) else {
        return Err(CmdError::raw(INVALID_HLL));
    };
    let mut hll = hll_string_mut(&mut e.value)?.make_raw();
    if use_dense {
        sparse_to_dense(&mut hll).map_err(corrupt)?;
    }
    for (j, &m) in max.iter().enumerate() {
        if m == 0 {
            continue;
        }
        if hll[4] == DENSE {
            dense_set(&mut hll[HDR..], j, m);
        } else {
            // As in Redis, a failure here (impossible: the destination was validated as a
            // source) is ignored.
            let _ = sparse_set(&mut hll, j, m);
        }
    }
    invalidate(&mut hll);
    drop(hll);
    drop(g);
    ctx.notify(crate::notify::STRING, "pfadd", dest);
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simple, slow reference decoder of the sparse form.
    fn decode_sparse(b: &[u8]) -> Option<Vec<u8>> {
        let mut regs = Vec::new();
        let mut p = HDR;
        while p < b.len() {
            let (oplen, run, val) = decode_op(b, p);
            regs.extend(std::iter::repeat_n(val, run));
            p += oplen;
        }
        (regs.len() == REGISTERS).then_some(regs)
    }

    fn registers(b: &[u8]) -> Vec<u8> {
        if b[4] == DENSE {
            (0..REGISTERS).map(|i| dense_get(&b[HDR..], i)).collect()
        } else {
            decode_sparse(b).expect("valid sparse")
        }
    }

    #[test]
    fn murmur_vectors() {
        // Reference values from the C implementation in Redis.
        assert_eq!(murmurhash64a(b"", 0xadc83b19), 0xd8df_ea65_85bc_9732);
        assert_eq!(murmurhash64a(b"a", 0xadc83b19), 0x53d2_470a_9b43_b1a7);
        assert_eq!(murmurhash64a(b"hello", 0xadc83b19), 0x0f65_6f01_eecf_e400);
        assert_eq!(
            murmurhash64a(b"0123456789abcdef!", 0xadc83b19),
            0xb917_c99b_031f_7674
        );
        assert_eq!(murmurhash64a(b"hello", 0), 0x1e68_d17c_457b_f117);
    }

    #[test]
    fn pat_len_bounds() {
        for i in 0..10_000u32 {
            let (idx, count) = pat_len(&i.to_le_bytes());
            assert!(idx < REGISTERS);
            assert!((1..=(Q as u8 + 1)).contains(&count));
        }
    }

    #[test]
    fn dense_registers_roundtrip() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        let mut expect = vec![0u8; REGISTERS];
        let mut x = 12345u64;
        for _ in 0..3 {
            for (i, e) in expect.iter_mut().enumerate() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = (x >> 33) as u8 & 63;
                *e = v;
                dense_put(&mut regs, i, v);
            }
            for (i, &e) in expect.iter().enumerate() {
                assert_eq!(dense_get(&regs, i), e, "register {i}");
            }
        }
    }

    #[test]
    fn empty_sparse_layout() {
        let h = new_sparse();
        assert_eq!(h, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert_eq!(estimate(&histogram(&h).unwrap()), 0);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        sparse_to_dense(&mut dense).unwrap();
        assert_eq!(dense.len(), DENSE_SIZE);
        for i in 0..5000u32 {
            let ele = format!("ele:{i}");
            let a = add(&mut sparse, ele.as_bytes()).unwrap();
            let b = add(&mut dense, ele.as_bytes()).unwrap();
            assert_eq!(a, b, "element {i}");
            assert_eq!(registers(&sparse), registers(&dense), "after {i}");
            if sparse[4] == SPARSE {
                assert!(sparse.len() <= SPARSE_MAX_BYTES);
            }
        }
        assert_eq!(sparse[4], DENSE, "promoted");
        assert_eq!(sparse[HDR..], dense[HDR..]);
        let c = estimate(&histogram(&dense).unwrap());
        assert!((4800..5200).contains(&c), "{c}");
    }

    #[test]
    fn sparse_val_merging() {
        let mut h = new_sparse();
        for i in [10usize, 11, 12, 13] {
            sparse_set(&mut h, i, 3).unwrap();
        }
        // Z:10 v:3,4 Z:16370 (XZERO since > 64).
        assert_eq!(&h[HDR..], &[zero_op(10), val_op(3, 4), 0x40 | 0x3f, 0xf1]);
        assert_eq!(sparse_set(&mut h, 11, 2), Ok(false));
        assert_eq!(sparse_set(&mut h, 11, 5), Ok(true));
        assert_eq!(
            &h[HDR..],
            &[
                zero_op(10),
                val_op(3, 1),
                val_op(5, 1),
                val_op(3, 2),
                0x7f,
                0xf1
            ]
        );
        // Large values promote.
        assert_eq!(sparse_set(&mut h, 0, 40), Ok(true));
        assert_eq!(h[4], DENSE);
        assert_eq!(dense_get(&h[HDR..], 0), 40);
        assert_eq!(dense_get(&h[HDR..], 11), 5);
    }

    #[test]
    fn corrupt_sparse_is_detected() {
        let mut h = new_sparse();
        h.truncate(HDR + 1);
        assert!(histogram(&h).is_err());
        let mut bad = new_sparse();
        bad.push(val_op(1, 1));
        assert!(histogram(&bad).is_err());
        let mut max = vec![0u8; REGISTERS];
        assert!(merge(&mut max, &bad).is_err());
        assert!(sparse_to_dense(&mut bad.clone()).is_err());
        let mut bad = new_sparse();
        bad.push(zero_op(3));
        assert!(histogram(&bad).is_err());
        assert!(merge(&mut max, &bad).is_err());
        assert!(sparse_to_dense(&mut bad).is_err());
        let mut short = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
        assert_eq!(sparse_set(&mut short, 5, 1), Err(Corrupt));
        // A truncated XZERO reads a zero byte past the end and never panics.
        let mut t = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f".to_vec();
        let _ = sparse_set(&mut t, 100, 1);
        let _ = add(&mut t, b"x");
    }

    #[test]
    fn estimator_overflow_matches_redis() {
        let mut h = [0u32; 64];
        h[63] = REGISTERS as u32;
        assert_eq!(estimate(&h), 1 << 63);
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(estimate(&h), 0);
    }

    #[test]
    fn estimator_small_counts() {
        let mut h = new_sparse();
        for i in 0..10 {
            add(&mut h, format!("{i}").as_bytes()).unwrap();
        }
        assert_eq!(estimate(&histogram(&h).unwrap()), 10);
    }
}
