//! Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER,
//! SMOVE, SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE and
//! SSCAN, with Redis 7.2's replies (RESP3 sets where Redis sends them) and error texts.
//!
//! Values are [`storage::set::Set`] (intset / listpack / hashtable forms). Multi-key
//! commands lock every shard they touch at once, so each one is atomic; a set that
//! becomes empty is deleted; missing keys read as empty sets.

use resp::Args;
use storage::pattern::glob_match;
use storage::set::Set;
use storage::Value;

use crate::cmd::util::{is, parse_cursor, parse_i64, parse_scan_opts, ScanOpts};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::notify::{GENERIC, SET};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Set;

/// Largest SRANDMEMBER reply with repetitions (negative count) Ember builds; Redis would
/// try to send any size and exhaust memory.
const MAX_RANDOM_REPLY: u64 = 1 << 24;

/// Set commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sadd", -3, WRITE | DENYOOM | FAST | BATCH_LOCK, (1, 1, 1), G, sadd)
        .doc("Adds one or more members to a set. Creates the key if it doesn't exist.", "1.0.0"),
    CommandSpec::new("srem", -3, WRITE | FAST, (1, 1, 1), G, srem)
        .doc("Removes one or more members from a set. Deletes the set if the last member was removed.", "1.0.0"),
    CommandSpec::new("smembers", 2, READONLY, (1, 1, 1), G, smembers).doc("Returns all members of a set.", "1.0.0"),
    CommandSpec::new("sismember", 3, READONLY | FAST, (1, 1, 1), G, sismember)
        .doc("Determines whether a member belongs to a set.", "1.0.0"),
    CommandSpec::new("smismember", -3, READONLY | FAST, (1, 1, 1), G, smismember)
        .doc("Determines whether multiple members belong to a set.", "6.2.0"),
    CommandSpec::new("scard", 2, READONLY | FAST, (1, 1, 1), G, scard).doc("Returns the number of members in a set.", "1.0.0"),
    CommandSpec::new("spop", -2, WRITE | FAST, (1, 1, 1), G, spop)
        .doc("Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "1.0.0"),
    CommandSpec::new("srandmember", -2, READONLY, (1, 1, 1), G, srandmember)
        .doc("Get one or multiple random members from a set", "1.0.0"),
    CommandSpec::new("smove", 4, WRITE | FAST, (1, 2, 1), G, smove).doc("Moves a member from one set to another.", "1.0.0"),
    CommandSpec::new("sinter", -2, READONLY, (1, -1, 1), G, sinter).doc("Returns the intersect of multiple sets.", "1.0.0"),
    CommandSpec::new("sintercard", -3, READONLY | MOVABLE_KEYS, (0, 0, 0), G, sintercard)
        .doc("Returns the number of members of the intersect of multiple sets.", "7.0.0")
    .numkeys(1),
    CommandSpec::new("sinterstore", -3, WRITE | DENYOOM, (1, -1, 1), G, sinterstore)
        .doc("Stores the intersect of multiple sets in a key.", "1.0.0"),
    CommandSpec::new("sunion", -2, READONLY, (1, -1, 1), G, sunion).doc("Returns the union of multiple sets.", "1.0.0"),
    CommandSpec::new("sunionstore", -3, WRITE | DENYOOM, (1, -1, 1), G, sunionstore)
        .doc("Stores the union of multiple sets in a key.", "1.0.0"),
    CommandSpec::new("sdiff", -2, READONLY, (1, -1, 1), G, sdiff).doc("Returns the difference of multiple sets.", "1.0.0"),
    CommandSpec::new("sdiffstore", -3, WRITE | DENYOOM, (1, -1, 1), G, sdiffstore)
        .doc("Stores the difference of multiple sets in a key.", "1.0.0"),
    CommandSpec::new("sscan", -3, READONLY, (1, 1, 1), G, sscan).doc("Iterates over members of a set.", "2.8.0"),
];

/// The set in `v`, or WRONGTYPE.
fn as_set(v: &mut Value) -> Result<&mut Set, CmdError> {
    match v {
        Value::Set(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// Writes `s` as a RESP3 set (array in RESP2).
fn reply_set(ctx: &mut Ctx<'_>, s: &Set) {
    ctx.out.set(s.len());
    for e in s.iter() {
        e.with_bytes(|b| ctx.out.bulk(b));
    }
}

fn sadd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let members = args.slice(2);
    let mut g = ctx.lock(args.arg(1));
    let added = match g.get() {
        Some(e) => {
            let s = as_set(&mut e.value)?;
            s.reserve_hint(members.len());
            members.iter().filter(|m| s.insert(m)).count()
        }
        None => {
            let mut s = Set::for_member(args.arg(2), members.len());
            let n = members.iter().filter(|m| s.insert(m)).count();
            g.insert(Value::Set(Box::new(s)), 0);
            n
        }
    };
    drop(g);
    if added > 0 {
        ctx.notify(SET, "sadd", args.arg(1));
    }
    ctx.out.int(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    let n = args.slice(2).iter().filter(|m| s.remove(m)).count();
    let empty = s.is_empty();
    if empty {
        g.remove();
    }
    drop(g);
    if n > 0 {
        ctx.notify(SET, "srem", args.arg(1));
        if empty {
            ctx.notify(GENERIC, "del", args.arg(1));
        }
    }
    ctx.out.int(n as i64);
    Ok(())
}

/// Runs `f` on the set at `key` (None when missing), counting a hit or miss.
fn read<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Ctx<'_>, Option<&Set>) -> R,
) -> Result<R, CmdError> {
    let ks = ctx.ks();
    let mut g = ks.lock(ctx.db(), key, ctx.now);
    let found = match g.get() {
        Some(e) => Some(as_set(&mut e.value)?),
        None => None,
    };
    ctx.hit_key(found.is_some(), key);
    Ok(f(ctx, found.as_deref()))
}

fn smembers(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read(ctx, args.arg(1), |ctx, s| match s {
        Some(s) => reply_set(ctx, s),
        None => ctx.out.set(0),
    })
}

fn sismember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let m = args.arg(2);
    read(ctx, args.arg(1), |ctx, s| {
        ctx.out.int(i64::from(s.is_some_and(|s| s.contains(m))));
    })
}

fn smismember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let ms = args.slice(2);
    read(ctx, args.arg(1), |ctx, s| {
        ctx.out.array(ms.len());
        for m in ms {
            ctx.out.int(i64::from(s.is_some_and(|s| s.contains(m))));
        }
    })
}

fn scard(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read(ctx, args.arg(1), |ctx, s| {
        ctx.out.int(s.map_or(0, Set::len) as i64);
    })
}

fn spop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let count = match args.len() {
        2 => None,
        3 => {
            let n = parse_i64(args.arg(2))
                .map_err(|_| CmdError::err("value is out of range, must be positive"))?;
            if n < 0 {
                return Err(CmdError::err("value is out of range, must be positive"));
            }
            Some(n as u64)
        }
        _ => return Err(CmdError::Syntax),
    };
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.client.fx.nothing();
        match count {
            None => ctx.out.null(),
            Some(_) => ctx.out.set(0),
        }
        return Ok(());
    };
    let s = as_set(&mut e.value)?;
    let rng = &mut ctx.rng;
    match count {
        None => {
            let m = s.pop_random(&mut *rng).unwrap_or_default();
            let empty = s.is_empty();
            if empty {
                g.remove();
            }
            drop(g);
            spop_events(ctx, args.arg(1), empty);
            declare_popped(ctx, args.arg(1), [&m[..]].into_iter());
            ctx.out.bulk(&m);
        }
        Some(n) if n >= s.len() as u64 => {
            let Some(Value::Set(all)) = g.remove().map(|e| e.value) else {
                return Ok(());
            };
            drop(g);
            spop_events(ctx, args.arg(1), true);
            if ctx.client.fx.on() {
                let members: Vec<Vec<u8>> =
                    all.iter().map(|m| m.with_bytes(<[u8]>::to_vec)).collect();
                declare_popped(ctx, args.arg(1), members.iter().map(Vec::as_slice));
            }
            reply_set(ctx, &all);
        }
        Some(n) => {
            let popped: Vec<Vec<u8>> = (0..n).filter_map(|_| s.pop_random(&mut *rng)).collect();
            drop(g);
            if n > 0 {
                spop_events(ctx, args.arg(1), false);
            }
            declare_popped(ctx, args.arg(1), popped.iter().map(Vec::as_slice));
            ctx.out.set(popped.len());
            for m in &popped {
                ctx.out.bulk(m);
            }
        }
    }
    Ok(())
}

/// Declares ([`crate::effects`]) an SPOP as the SREM of the `members` it popped (nothing
/// when it popped none).
fn declare_popped<'m>(ctx: &mut Ctx<'_>, key: &'m [u8], members: impl Iterator<Item = &'m [u8]>) {
    if !ctx.client.fx.on() {
        return;
    }
    let mut v: Vec<&[u8]> = vec![b"SREM", key];
    v.extend(members);
    if v.len() == 2 {
        ctx.client.fx.nothing();
    } else {
        ctx.client.fx.record(&v);
    }
}

/// The events of SPOP on `key`: `spop`, then `del` when the set went away.
fn spop_events(ctx: &Ctx<'_>, key: &[u8], deleted: bool) {
    ctx.notify(SET, "spop", key);
    if deleted {
        ctx.notify(GENERIC, "del", key);
    }
}

fn srandmember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let count = match args.len() {
        2 => None,
        3 => {
            let n = parse_i64(args.arg(2))?;
            if n == i64::MIN {
                return Err(CmdError::err(
                    "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ));
            }
            Some(n)
        }
        _ => return Err(CmdError::Syntax),
    };
    if let Some(n) = count {
        if n < 0 && n.unsigned_abs() > MAX_RANDOM_REPLY {
            return Err(CmdError::err("value is out of range"));
        }
    }
    read(ctx, args.arg(1), |ctx, s| {
        let rng = &mut ctx.rng;
        let Some(n) = count else {
            match s.and_then(|s| s.random_index(&mut *rng).map(|i| s.at(i))) {
                Some(e) => e.with_bytes(|b| ctx.out.bulk(b)),
                None => ctx.out.null(),
            }
            return;
        };
        let Some(s) = s.filter(|s| !s.is_empty()) else {
            ctx.out.array(0);
            return;
        };
        let len = s.len();
        if n < 0 {
            let k = n.unsigned_abs() as usize;
            ctx.out.array(k);
            for _ in 0..k {
                let i = rand::Rng::random_range(&mut *rng, 0..len);
                s.at(i).with_bytes(|b| ctx.out.bulk(b));
            }
            return;
        }
        let k = n as u64;
        if k >= len as u64 {
            ctx.out.array(len);
            for e in s.iter() {
                e.with_bytes(|b| ctx.out.bulk(b));
            }
            return;
        }
        let k = k as usize;
        let picks: Vec<usize> = if k * 3 > len {
            // Partial Fisher-Yates over all positions.
            let mut idx: Vec<usize> = (0..len).collect();
            for j in 0..k {
                let r = rand::Rng::random_range(&mut *rng, j..len);
                idx.swap(j, r);
            }
            idx.truncate(k);
            idx
        } else {
            let mut seen = std::collections::HashSet::with_capacity(k);
            let mut out = Vec::with_capacity(k);
            while out.len() < k {
                let i = rand::Rng::random_range(&mut *rng, 0..len);
                if seen.insert(i) {
                    out.push(i);
                }
            }
            out
        };
        ctx.out.array(k);
        for i in picks {
            s.at(i).with_bytes(|b| ctx.out.bulk(b));
        }
    })
}

fn smove(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (src, dst, m) = (args.arg(1), args.arg(2), args.arg(3));
    let db = ctx.db();
    let mut g = ctx.lock_keys([src, dst]);
    // A missing source answers 0 before any type check, as in Redis.
    match g.get(db, src) {
        None => {
            drop(g);
            ctx.out.int(0);
            return Ok(());
        }
        Some(e) => {
            as_set(&mut e.value)?;
        }
    }
    let dst_exists = match g.get(db, dst) {
        None => false,
        Some(e) => {
            as_set(&mut e.value)?;
            true
        }
    };
    let moved = if src == dst {
        g.get(db, src)
            .is_some_and(|e| matches!(&e.value, Value::Set(s) if s.contains(m)))
    } else {
        let mut removed = false;
        let mut now_empty = false;
        if let Some(Value::Set(s)) = g.get(db, src).map(|e| &mut e.value) {
            removed = s.remove(m);
            now_empty = s.is_empty();
        }
        if now_empty {
            g.remove(db, src);
        }
        if removed {
            // Redis's order: the source's events, then the destination's (created first).
            ctx.notify(SET, "srem", src);
            if now_empty {
                ctx.notify(GENERIC, "del", src);
            }
            let mut added = true;
            if dst_exists {
                if let Some(Value::Set(d)) = g.get(db, dst).map(|e| &mut e.value) {
                    added = d.insert(m);
                }
            } else {
                let mut d = Set::for_member(m, 1);
                d.insert(m);
                g.insert(db, dst, Value::Set(Box::new(d)), 0);
            }
            if added {
                ctx.notify(SET, "sadd", dst);
            }
        }
        removed
    };
    drop(g);
    ctx.out.int(i64::from(moved));
    Ok(())
}

/// The operation of SINTER/SUNION/SDIFF and their variants.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Computes `op` over `keys` under one multi-shard lock; `dst` (STORE variants) receives
/// the result in the same lock. Read variants count hits and misses.
fn combine(ctx: &mut Ctx<'_>, keys: Args<'_>, op: Op, dst: Option<&[u8]>) -> Result<Set, CmdError> {
    let db = ctx.db();
    let ks = ctx.ks();
    let mut g = ks.lock_keys(keys.iter().chain(dst), ctx.now);
    // Type checks and sizes first: WRONGTYPE wins over a missing key, as in Redis.
    let mut sizes: Vec<Option<usize>> = Vec::with_capacity(keys.len());
    for k in keys {
        let size = match g.get(db, k) {
            Some(e) => Some(as_set(&mut e.value)?.len()),
            None => None,
        };
        if dst.is_none() {
            ctx.hit_key(size.is_some(), k);
        } else if size.is_none() {
            ctx.keymiss(k);
        }
        sizes.push(size);
    }
    let result = match op {
        Op::Inter => {
            if sizes.iter().any(Option::is_none) {
                Set::default()
            } else {
                // Start from the smallest set and filter by the others.
                let (first, _) = sizes
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| s.unwrap_or(0))
                    .unwrap_or((0, &None));
                let mut acc = match g.peek(db, keys.arg(first)).map(|e| &e.value) {
                    Some(Value::Set(s)) => Set::clone(s),
                    _ => Set::default(),
                };
                for (j, k) in keys.iter().enumerate() {
                    if j == first || acc.is_empty() {
                        continue;
                    }
                    if let Some(Value::Set(o)) = g.peek(db, k).map(|e| &e.value) {
                        acc.retain(|e| o.contains_elem(e));
                    }
                }
                acc
            }
        }
        Op::Union => {
            let mut acc = Set::default();
            for k in keys {
                if let Some(Value::Set(o)) = g.peek(db, k).map(|e| &e.value) {
                    for e in o.iter() {
                        acc.insert_elem(e);
                    }
                }
            }
            acc
        }
        Op::Diff => {
            let mut acc = match g.peek(db, keys.arg(0)).map(|e| &e.value) {
                Some(Value::Set(s)) => Set::clone(s),
                _ => Set::default(),
            };
            for k in keys.slice(1) {
                if acc.is_empty() {
                    break;
                }
                if let Some(Value::Set(o)) = g.peek(db, k).map(|e| &e.value) {
                    acc.retain(|e| !o.contains_elem(e));
                }
            }
            acc
        }
    };
    if let Some(d) = dst {
        let n = result.len();
        if n == 0 {
            if g.remove(db, d).is_some() {
                ctx.notify(GENERIC, "del", d);
            }
        } else {
            // Built member by member from an empty set, so the stored form is the one
            // Redis would pick for this content.
            let mut stored = Set::default();
            for e in result.iter() {
                stored.insert_elem(e);
            }
            g.insert(db, d, Value::Set(Box::new(stored)), 0);
            let event = match op {
                Op::Inter => "sinterstore",
                Op::Union => "sunionstore",
                Op::Diff => "sdiffstore",
            };
            ctx.notify(SET, event, d);
        }
        drop(g);
        ctx.out.int(n as i64);
        return Ok(Set::default());
    }
    Ok(result)
}

/// SINTER, SUNION, SDIFF: the result as a RESP3 set.
fn read_combine(ctx: &mut Ctx<'_>, args: Args<'_>, op: Op) -> CmdResult {
    let s = combine(ctx, args.slice(1), op, None)?;
    reply_set(ctx, &s);
    Ok(())
}

fn store_combine(ctx: &mut Ctx<'_>, args: Args<'_>, op: Op) -> CmdResult {
    combine(ctx, args.slice(2), op, Some(args.arg(1)))?;
    Ok(())
}

fn sinter(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read_combine(ctx, args, Op::Inter)
}

fn sunion(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read_combine(ctx, args, Op::Union)
}

fn sdiff(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read_combine(ctx, args, Op::Diff)
}

fn sinterstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    store_combine(ctx, args, Op::Inter)
}

fn sunionstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    store_combine(ctx, args, Op::Union)
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    store_combine(ctx, args, Op::Diff)
}

fn sintercard(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let numkeys =
        parse_i64(args.arg(1)).map_err(|_| CmdError::err("numkeys should be greater than 0"))?;
    if numkeys <= 0 {
        return Err(CmdError::err("numkeys should be greater than 0"));
    }
    let numkeys = numkeys as u64;
    if numkeys > (args.len() - 2) as u64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let numkeys = numkeys as usize;
    let mut limit = 0usize;
    let mut i = 2 + numkeys;
    while i < args.len() {
        if is(args.arg(i), "limit") && i + 1 < args.len() {
            let l = parse_i64(args.arg(i + 1)).unwrap_or(-1);
            if l < 0 {
                return Err(CmdError::err("LIMIT can't be negative"));
            }
            limit = usize::try_from(l).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let keys = Args::slice(&args, 2);
    let keys: Vec<&[u8]> = keys.iter().take(numkeys).collect();
    let db = ctx.db();
    let ks = ctx.ks();
    let mut g = ks.lock_keys(keys.iter().copied(), ctx.now);
    let mut sizes = Vec::with_capacity(keys.len());
    for k in &keys {
        let size = match g.get(db, k) {
            Some(e) => Some(as_set(&mut e.value)?.len()),
            None => None,
        };
        ctx.hit_key(size.is_some(), k);
        sizes.push(size);
    }
    if sizes.iter().any(Option::is_none) {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    }
    let first = sizes
        .iter()
        .enumerate()
        .min_by_key(|(_, s)| s.unwrap_or(0))
        .map_or(0, |(i, _)| i);
    let mut acc = match g.peek(db, keys[first]).map(|e| &e.value) {
        Some(Value::Set(s)) => Set::clone(s),
        _ => Set::default(),
    };
    for (j, k) in keys.iter().enumerate() {
        if j == first || acc.is_empty() {
            continue;
        }
        if let Some(Value::Set(o)) = g.peek(db, k).map(|e| &e.value) {
            acc.retain(|e| o.contains_elem(e));
        }
    }
    drop(g);
    let n = if limit > 0 {
        acc.len().min(limit)
    } else {
        acc.len()
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// SSCAN. Compact forms are returned whole with cursor 0, as Redis does. A `hashtable`
/// set is walked by position from the end down: a cursor `c` means positions `0..c` are
/// still to visit; removals move the last member into the freed slot, so a member never
/// leaves the unvisited range and every member present throughout is returned.
fn sscan(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let cursor = parse_cursor(args.arg(2))?;
    let key = args.arg(1);
    // Type check comes before the options, as in Redis.
    {
        let mut g = ctx.lock(key);
        if let Some(e) = g.get() {
            as_set(&mut e.value)?;
        }
    }
    let ScanOpts { count, pattern, .. } = parse_scan_opts(&args, 3, false)?;
    read(ctx, key, |ctx, s| {
        let keep = |b: &[u8]| pattern.is_none_or(|p| glob_match(p, b, false));
        let mut found: Vec<Vec<u8>> = Vec::new();
        let mut next = 0u64;
        if let Some(s) = s {
            if s.encoding() != "hashtable" {
                for e in s.iter() {
                    e.with_bytes(|b| {
                        if keep(b) {
                            found.push(b.to_vec());
                        }
                    });
                }
            } else {
                let len = s.len() as u64;
                let mut pos = if cursor == 0 { len } else { cursor.min(len) };
                let mut visited = 0;
                while pos > 0 && visited < count {
                    pos -= 1;
                    visited += 1;
                    s.at(pos as usize).with_bytes(|b| {
                        if keep(b) {
                            found.push(b.to_vec());
                        }
                    });
                }
                next = pos;
            }
        }
        ctx.out.array(2);
        ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
        ctx.out.array(found.len());
        for m in &found {
            ctx.out.bulk(m);
        }
    })
}
