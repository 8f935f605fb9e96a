//! Hash commands: HSET, HGET, HMGET, HMSET, HGETALL, HDEL, HLEN, HEXISTS, HKEYS, HVALS,
//! HSETNX, HINCRBY, HINCRBYFLOAT, HSTRLEN, HRANDFIELD and HSCAN, with Redis 7.2's replies
//! (HGETALL is a RESP3 map; HRANDFIELD WITHVALUES gives RESP3 pairs) and error texts.
//!
//! Values are [`storage::hash::Hash`]: a compact pair vector (`listpack`) that gains a hash
//! index (`hashtable`) past 128 fields or 64-byte fields/values. A hash emptied by HDEL is
//! deleted. HINCRBYFLOAT computes in x87 `long double` like Redis, with the arithmetic of
//! the string family's `ld` module (exact Redis `long double` results).

use resp::{Args, Protocol};
use storage::hash::Hash;
use storage::pattern::glob_match;
use storage::value::parse_canonical_i64;
use storage::Value;

use crate::cmd::util::{is, parse_cursor, parse_i64, parse_scan_opts, ScanOpts};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::notify::{GENERIC, HASH};
use crate::registry::{flags::*, CommandSpec, Group};

use crate::cmd::strings::ld::Ld;

const H: Group = Group::Hash;

/// Largest number of picks HRANDFIELD with a negative count answers (the reply is built in
/// memory; Redis has no such bound).
const MAX_RANDOM_PICKS: u64 = 10_000_000;

/// Hash commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("hset", -4, WRITE | DENYOOM | FAST | BATCH_LOCK, (1, 1, 1), H, hset)
        .doc("Creates or modifies the value of a field in a hash.", "2.0.0"),
    CommandSpec::new("hsetnx", 4, WRITE | DENYOOM | FAST, (1, 1, 1), H, hsetnx)
        .doc("Sets the value of a field in a hash only when the field doesn't exist.", "2.0.0"),
    CommandSpec::new("hget", 3, READONLY | FAST, (1, 1, 1), H, hget)
        .doc("Returns the value of a field in a hash.", "2.0.0"),
    CommandSpec::new("hmset", -4, WRITE | DENYOOM | FAST, (1, 1, 1), H, hmset)
        .doc("Sets the values of multiple fields.", "2.0.0"),
    CommandSpec::new("hmget", -3, READONLY | FAST, (1, 1, 1), H, hmget)
        .doc("Returns the values of all fields in a hash.", "2.0.0"),
    CommandSpec::new("hdel", -3, WRITE | FAST, (1, 1, 1), H, hdel)
        .doc("Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "2.0.0"),
    CommandSpec::new("hlen", 2, READONLY | FAST, (1, 1, 1), H, hlen)
        .doc("Returns the number of fields in a hash.", "2.0.0"),
    CommandSpec::new("hstrlen", 3, READONLY | FAST, (1, 1, 1), H, hstrlen)
        .doc("Returns the length of the value of a field.", "3.2.0"),
    CommandSpec::new("hexists", 3, READONLY | FAST, (1, 1, 1), H, hexists)
        .doc("Determines whether a field exists in a hash.", "2.0.0"),
    CommandSpec::new("hkeys", 2, READONLY, (1, 1, 1), H, hkeys)
        .doc("Returns all fields in a hash.", "2.0.0"),
    CommandSpec::new("hvals", 2, READONLY, (1, 1, 1), H, hvals)
        .doc("Returns all values in a hash.", "2.0.0"),
    CommandSpec::new("hgetall", 2, READONLY, (1, 1, 1), H, hgetall)
        .doc("Returns all fields and values in a hash.", "2.0.0"),
    CommandSpec::new("hincrby", 4, WRITE | DENYOOM | FAST, (1, 1, 1), H, hincrby).doc(
        "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.",
        "2.0.0",
    ),
    CommandSpec::new("hincrbyfloat", 4, WRITE | DENYOOM | FAST, (1, 1, 1), H, hincrbyfloat).doc(
        "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.",
        "2.6.0",
    ),
    CommandSpec::new("hrandfield", -2, READONLY, (1, 1, 1), H, hrandfield)
        .doc("Returns one or more random fields from a hash.", "6.2.0"),
    CommandSpec::new("hscan", -3, READONLY, (1, 1, 1), H, hscan)
        .doc("Iterates over fields and values of a hash.", "2.8.0"),
];

// ------------------------------------------------------------------------------------------
// Shared helpers

/// The hash held by `v`, or WRONGTYPE for any other type.
#[inline]
fn as_hash(v: &Value) -> Result<&Hash, CmdError> {
    match v {
        Value::Hash(h) => Ok(h),
        _ => Err(CmdError::WrongType),
    }
}

/// Mutable access to the hash held by `v`, or WRONGTYPE.
#[inline]
fn as_hash_mut(v: &mut Value) -> Result<&mut Hash, CmdError> {
    match v {
        Value::Hash(h) => Ok(h),
        _ => Err(CmdError::WrongType),
    }
}

/// Runs `f` on the hash at `key` (counting a keyspace hit or miss); `None` when the key
/// is missing. WRONGTYPE for another type.
fn read<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&Hash, &mut resp::ReplyWriter) -> R,
) -> Result<Option<R>, CmdError> {
    let mut g = ctx.lock(key);
    match g.get() {
        Some(e) => {
            ctx.hit(true);
            let h = as_hash(&e.value)?;
            Ok(Some(f(h, ctx.out)))
        }
        None => {
            ctx.hit_key(false, key);
            Ok(None)
        }
    }
}

/// Runs `f` on the hash at `key`, creating an empty one when the key is missing (the new
/// hash is stored only when `f` succeeds and leaves it non-empty).
fn write<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Hash) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let mut g = ctx.lock(key);
    match g.get() {
        Some(e) => f(as_hash_mut(&mut e.value)?),
        None => {
            let mut h = Hash::new();
            let r = f(&mut h)?;
            if !h.is_empty() {
                g.insert(Value::Hash(Box::new(h)), 0);
            }
            Ok(r)
        }
    }
}

// ------------------------------------------------------------------------------------------
// HSET HMSET HSETNX

/// Sets every field/value pair from argument 2 on; the number of new fields.
fn set_pairs(ctx: &mut Ctx<'_>, args: Args<'_>, name: &str) -> Result<i64, CmdError> {
    if args.len() % 2 == 1 {
        return Err(CmdError::Arity(name.to_string()));
    }
    write(ctx, args.arg(1), |h| {
        let mut added = 0;
        let mut i = 2;
        while i + 1 < args.len() {
            added += i64::from(h.insert(args.arg(i), args.arg(i + 1)));
            i += 2;
        }
        Ok(added)
    })
}

fn hset(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let added = set_pairs(ctx, args, "hset")?;
    ctx.notify(HASH, "hset", args.arg(1));
    ctx.out.int(added);
    Ok(())
}

fn hmset(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    set_pairs(ctx, args, "hmset")?;
    ctx.notify(HASH, "hset", args.arg(1));
    ctx.out.ok();
    Ok(())
}

fn hsetnx(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (field, value) = (args.arg(2), args.arg(3));
    let set = write(ctx, args.arg(1), |h| {
        Ok(if h.contains(field) {
            false
        } else {
            h.insert(field, value)
        })
    })?;
    if set {
        ctx.notify(HASH, "hset", args.arg(1));
    }
    ctx.out.int(i64::from(set));
    Ok(())
}

// ------------------------------------------------------------------------------------------
// HGET HMGET HLEN HSTRLEN HEXISTS HKEYS HVALS HGETALL

fn hget(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let field = args.arg(2);
    let found = read(ctx, args.arg(1), |h, out| match h.get(field) {
        Some(v) => out.bulk(v),
        None => out.null(),
    })?;
    if found.is_none() {
        ctx.out.null();
    }
    Ok(())
}

fn hmget(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let fields = args.slice(2);
    let found = read(ctx, args.arg(1), |h, out| {
        out.array(fields.len());
        for f in fields.iter() {
            match h.get(f) {
                Some(v) => out.bulk(v),
                None => out.null(),
            }
        }
    })?;
    if found.is_none() {
        ctx.out.array(fields.len());
        for _ in 0..fields.len() {
            ctx.out.null();
        }
    }
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let n = read(ctx, args.arg(1), |h, _| h.len())?.unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let field = args.arg(2);
    let n = read(ctx, args.arg(1), |h, _| h.get(field).map_or(0, <[u8]>::len))?.unwrap_or(0);
    ctx.out.int(n as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let field = args.arg(2);
    let found = read(ctx, args.arg(1), |h, _| h.contains(field))?.unwrap_or(false);
    ctx.out.int(i64::from(found));
    Ok(())
}

/// HKEYS (`keys`), HVALS (`vals`) or HGETALL (both, as a map).
fn get_all(ctx: &mut Ctx<'_>, args: Args<'_>, keys: bool, vals: bool) -> CmdResult {
    let found = read(ctx, args.arg(1), |h, out| {
        if keys && vals {
            out.map(h.len());
        } else {
            out.array(h.len());
        }
        for (f, v) in h.iter() {
            if keys {
                out.bulk(f);
            }
            if vals {
                out.bulk(v);
            }
        }
    })?;
    if found.is_none() {
        if keys && vals {
            ctx.out.map(0);
        } else {
            ctx.out.array(0);
        }
    }
    Ok(())
}

fn hkeys(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    get_all(ctx, args, true, false)
}

fn hvals(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    get_all(ctx, args, false, true)
}

fn hgetall(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    get_all(ctx, args, true, true)
}

// ------------------------------------------------------------------------------------------
// HDEL

fn hdel(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let mut removed = 0i64;
    let mut empty = false;
    if let Some(e) = g.get() {
        let h = as_hash_mut(&mut e.value)?;
        for f in args.slice(2).iter() {
            removed += i64::from(h.remove(f));
            if h.is_empty() {
                empty = true;
                break;
            }
        }
    }
    if empty {
        g.remove();
    }
    drop(g);
    if removed > 0 {
        ctx.notify(HASH, "hdel", args.arg(1));
        if empty {
            ctx.notify(GENERIC, "del", args.arg(1));
        }
    }
    ctx.out.int(removed);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// HINCRBY HINCRBYFLOAT

fn hincrby(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let by = parse_i64(args.arg(3))?;
    let field = args.arg(2);
    let new = write(ctx, args.arg(1), |h| {
        let cur = match h.get(field) {
            Some(v) => parse_canonical_i64(v)
                .ok_or_else(|| CmdError::err("hash value is not an integer"))?,
            None => 0,
        };
        let new = cur.checked_add(by).ok_or(CmdError::Overflow)?;
        let mut buf = itoa::Buffer::new();
        h.insert(field, buf.format(new).as_bytes());
        Ok(new)
    })?;
    ctx.notify(HASH, "hincrby", args.arg(1));
    ctx.out.int(new);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let incr = Ld::parse(args.arg(3)).ok_or(CmdError::NotFloat)?;
    if !incr.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let field = args.arg(2);
    let text = write(ctx, args.arg(1), |h| {
        let cur = match h.get(field) {
            Some(v) => match parse_canonical_i64(v) {
                Some(i) => Ld::from_i64(i),
                None => Ld::parse(v).ok_or_else(|| CmdError::err("hash value is not a float"))?,
            },
            None => Ld::Zero(false),
        };
        let text = match cur.add(incr) {
            Some(sum) if sum.is_finite() => sum.to_human(),
            _ => return Err(CmdError::err("increment would produce NaN or Infinity")),
        };
        h.insert(field, &text);
        Ok(text)
    })?;
    ctx.notify(HASH, "hincrbyfloat", args.arg(1));
    ctx.out.bulk(&text);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// HRANDFIELD

/// Writes the HRANDFIELD reply for `picks` (positions in `h`): fields, or with `withvalues`
/// a flat field/value array (RESP2) or an array of pairs (RESP3).
fn reply_picks(
    out: &mut resp::ReplyWriter,
    h: &Hash,
    picks: impl ExactSizeIterator<Item = usize>,
    withvalues: bool,
) {
    let resp3 = out.protocol() == Protocol::Resp3;
    let n = picks.len();
    out.array(if withvalues && !resp3 { n * 2 } else { n });
    for i in picks {
        let Some((f, v)) = h.pair_at(i) else { continue };
        if withvalues {
            if resp3 {
                out.array(2);
            }
            out.bulk(f);
            out.bulk(v);
        } else {
            out.bulk(f);
        }
    }
}

fn hrandfield(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    // The command's random source, lent to the closures below (see `Ctx::rng`).
    let mut rng = std::mem::replace(&mut ctx.rng, crate::ctx::CmdRng::Thread);
    let r = hrandfield_with(ctx, args, &mut rng);
    ctx.rng = rng;
    r
}

fn hrandfield_with(ctx: &mut Ctx<'_>, args: Args<'_>, rng: &mut crate::ctx::CmdRng) -> CmdResult {
    if args.len() == 2 {
        let found = read(ctx, args.arg(1), |h, out| {
            let i = rand::Rng::random_range(&mut *rng, 0..h.len().max(1));
            match h.pair_at(i) {
                Some((f, _)) => out.bulk(f),
                None => out.null(),
            }
        })?;
        if found.is_none() {
            ctx.out.null();
        }
        return Ok(());
    }
    let l = parse_i64(args.arg(2))?;
    if l == i64::MIN {
        return Err(CmdError::err(format!(
            "value is out of range, must be between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    let withvalues = match args.len() {
        3 => false,
        4 if is(args.arg(3), "withvalues") => true,
        _ => return Err(CmdError::Syntax),
    };
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Err(CmdError::err("value is out of range"));
    }
    let (count, uniq) = (l.unsigned_abs(), l >= 0);
    if !uniq && count > MAX_RANDOM_PICKS {
        return Err(CmdError::err("value is out of range"));
    }
    let found = read(ctx, args.arg(1), |h, out| {
        let len = h.len();
        if count == 0 || len == 0 {
            out.array(0);
        } else if !uniq {
            let picks = (0..count).map(|_| rand::Rng::random_range(&mut *rng, 0..len));
            let picks: Vec<usize> = picks.collect();
            reply_picks(out, h, picks.into_iter(), withvalues);
        } else if count >= len as u64 {
            reply_picks(out, h, 0..len, withvalues);
        } else {
            let mut picks = rand::seq::index::sample(&mut *rng, len, count as usize).into_vec();
            if h.is_compact() {
                // A listpack answers in its own order.
                picks.sort_unstable();
            }
            reply_picks(out, h, picks.into_iter(), withvalues);
        }
    })?;
    if found.is_none() {
        ctx.out.array(0);
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// HSCAN

fn hscan(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let cursor = parse_cursor(args.arg(2))?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        ctx.hit_key(false, args.arg(1));
        drop(g);
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    ctx.hit(true);
    let h = as_hash(&e.value)?;
    let ScanOpts { count, pattern, .. } = parse_scan_opts(&args, 3, false)?;
    let page = h.scan(cursor, count);
    let keep = |f: &[u8]| pattern.is_none_or(|p| glob_match(p, f, false));
    let n = page.pairs.iter().filter(|(f, _)| keep(f)).count();
    let out = &mut *ctx.out;
    out.array(2);
    out.bulk(itoa::Buffer::new().format(page.cursor).as_bytes());
    out.array(n * 2);
    for (f, v) in page.pairs.iter().filter(|(f, _)| keep(f)) {
        out.bulk(f);
        out.bulk(v);
    }
    Ok(())
}
