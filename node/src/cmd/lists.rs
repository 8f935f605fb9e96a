//! List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET,
//! LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH and LMPOP, and the blocking BLPOP, BRPOP,
//! BLMOVE, BRPOPLPUSH and BLMPOP (see [`crate::blocking`]), with Redis 7.2's replies and
//! error texts.
//!
//! Lists are [`storage::List`] values; a list that becomes empty is deleted, a missing key
//! reads as an empty list, and multi-key commands (LMOVE, RPOPLPUSH, LMPOP) lock all their
//! shards at once so they are atomic.

use resp::{Args, ReplyWriter};
use storage::list::List;
use storage::Value;

use crate::blocking::{BlockRequest, TimeoutReply};
use crate::client::BlockMode;
use crate::cmd::util::{is, parse_i64, parse_timeout};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::notify::{GENERIC, LIST};
use crate::registry::{flags::*, CommandSpec, Group, Timeout};

const L: Group = Group::List;

/// List commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("lpush", -3, WRITE | DENYOOM | FAST | BATCH_LOCK, (1, 1, 1), L, lpush)
        .doc("Prepends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"),
    CommandSpec::new("rpush", -3, WRITE | DENYOOM | FAST | BATCH_LOCK, (1, 1, 1), L, rpush)
        .doc("Appends one or more elements to a list. Creates the key if it doesn't exist.", "1.0.0"),
    CommandSpec::new("lpushx", -3, WRITE | DENYOOM | FAST | BATCH_LOCK, (1, 1, 1), L, lpushx)
        .doc("Prepends one or more elements to a list only when the list exists.", "2.2.0"),
    CommandSpec::new("rpushx", -3, WRITE | DENYOOM | FAST | BATCH_LOCK, (1, 1, 1), L, rpushx)
        .doc("Appends an element to a list only when the list exists.", "2.2.0"),
    CommandSpec::new("lpop", -2, WRITE | FAST, (1, 1, 1), L, lpop)
        .doc("Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "1.0.0"),
    CommandSpec::new("rpop", -2, WRITE | FAST, (1, 1, 1), L, rpop)
        .doc("Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "1.0.0"),
    CommandSpec::new("llen", 2, READONLY | FAST, (1, 1, 1), L, llen).doc("Returns the length of a list.", "1.0.0"),
    CommandSpec::new("lrange", 4, READONLY, (1, 1, 1), L, lrange).doc("Returns a range of elements from a list.", "1.0.0"),
    CommandSpec::new("lindex", 3, READONLY, (1, 1, 1), L, lindex).doc("Returns an element from a list by its index.", "1.0.0"),
    CommandSpec::new("lset", 4, WRITE | DENYOOM, (1, 1, 1), L, lset)
        .doc("Sets the value of an element in a list by its index.", "1.0.0"),
    CommandSpec::new("linsert", 5, WRITE | DENYOOM, (1, 1, 1), L, linsert)
        .doc("Inserts an element before or after another element in a list.", "2.2.0"),
    CommandSpec::new("lrem", 4, WRITE, (1, 1, 1), L, lrem)
        .doc("Removes elements from a list. Deletes the list if the last element was removed.", "1.0.0"),
    CommandSpec::new("ltrim", 4, WRITE, (1, 1, 1), L, ltrim)
        .doc("Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "1.0.0"),
    CommandSpec::new("lpos", -3, READONLY, (1, 1, 1), L, lpos).doc("Returns the index of matching elements in a list.", "6.0.6"),
    CommandSpec::new("lmove", 5, WRITE | DENYOOM, (1, 2, 1), L, lmove).doc(
        "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.",
        "6.2.0",
    ),
    CommandSpec::new("rpoplpush", 3, WRITE | DENYOOM, (1, 2, 1), L, rpoplpush).doc(
        "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.",
        "1.2.0",
    ),
    CommandSpec::new("lmpop", -4, WRITE | MOVABLE_KEYS, (0, 0, 0), L, lmpop).doc(
        "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.",
        "7.0.0",
    )
    .numkeys(1),
    CommandSpec::new("blpop", -3, WRITE | BLOCKING, (1, -2, 1), L, blpop).doc(
        "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        "2.0.0",
    )
    .timeout_at(Timeout::LastSecs),
    CommandSpec::new("brpop", -3, WRITE | BLOCKING, (1, -2, 1), L, brpop).doc(
        "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        "2.0.0",
    )
    .timeout_at(Timeout::LastSecs),
    CommandSpec::new("blmove", 6, WRITE | DENYOOM | BLOCKING, (1, 2, 1), L, blmove).doc(
        "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.",
        "6.2.0",
    )
    .timeout_at(Timeout::LastSecs),
    CommandSpec::new("brpoplpush", 4, WRITE | DENYOOM | BLOCKING, (1, 2, 1), L, brpoplpush).doc(
        "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.",
        "2.2.0",
    )
    .timeout_at(Timeout::LastSecs),
    CommandSpec::new("blmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, (0, 0, 0), L, blmpop).doc(
        "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        "7.0.0",
    )
    .numkeys(2)
    .timeout_at(Timeout::ArgSecs(1)),
];

// ------------------------------------------------------------------------------------------
// Shared helpers

/// The list held by `v`, or WRONGTYPE.
fn as_list(v: &Value) -> Result<&List, CmdError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(CmdError::WrongType),
    }
}

/// Mutable access to the list held by `v`, or WRONGTYPE.
fn as_list_mut(v: &mut Value) -> Result<&mut List, CmdError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(CmdError::WrongType),
    }
}

/// Parses LEFT or RIGHT; true for RIGHT (the tail).
fn parse_side(b: &[u8]) -> Result<bool, CmdError> {
    if is(b, "left") {
        Ok(false)
    } else if is(b, "right") {
        Ok(true)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Parses an integer that must lie in `1..=i64::MAX`; `msg` is the error for anything else
/// (Redis's `getRangeLongFromObjectOrReply` with a message).
fn parse_positive(b: &[u8], msg: &str) -> Result<usize, CmdError> {
    let v = parse_i64(b).map_err(|_| CmdError::err(msg))?;
    if v < 1 {
        return Err(CmdError::err(msg));
    }
    Ok(usize::try_from(v).unwrap_or(usize::MAX))
}

/// Resolves a Redis `start..=end` range (negative counts from the tail) against `len`;
/// `None` when it selects nothing.
fn resolve_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let llen = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = if start < 0 { start + llen } else { start };
    let mut end = if end < 0 { end + llen } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some((start as usize, end as usize))
}

/// Resolves an index (negative counts from the tail) against `len`.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let llen = i64::try_from(len).unwrap_or(i64::MAX);
    let i = if index < 0 { index + llen } else { index };
    if (0..llen).contains(&i) {
        Some(i as usize)
    } else {
        None
    }
}

/// Writes `n` elements popped from `list` (tail first when `tail`) as an array.
fn pop_n_reply(out: &mut ReplyWriter, list: &mut List, n: usize, tail: bool) {
    let n = n.min(list.len());
    out.array(n);
    for _ in 0..n {
        if let Some(v) = list.pop(tail) {
            out.bulk(&v);
        }
    }
}

// ------------------------------------------------------------------------------------------
// Push and pop

/// The events of a pop from `key`: `lpop`/`rpop`, then `del` when the list went away.
fn pop_events(ctx: &Ctx<'_>, key: &[u8], tail: bool, deleted: bool) {
    ctx.notify(LIST, if tail { "rpop" } else { "lpop" }, key);
    if deleted {
        ctx.notify(GENERIC, "del", key);
    }
}

/// LPUSH / RPUSH / LPUSHX / RPUSHX.
fn push_generic(ctx: &mut Ctx<'_>, args: Args<'_>, tail: bool, only_existing: bool) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let len = match g.get() {
        Some(e) => {
            let l = as_list_mut(&mut e.value)?;
            for v in args.iter().skip(2) {
                if tail {
                    l.push_back(v);
                } else {
                    l.push_front(v);
                }
            }
            l.len()
        }
        None if only_existing => {
            drop(g);
            ctx.out.int(0);
            return Ok(());
        }
        None => {
            let mut l = List::with_capacity(args.len() - 2);
            for v in args.iter().skip(2) {
                if tail {
                    l.push_back(v);
                } else {
                    l.push_front(v);
                }
            }
            let n = l.len();
            g.insert(Value::List(Box::new(l)), 0);
            n
        }
    };
    drop(g);
    ctx.notify(LIST, if tail { "rpush" } else { "lpush" }, args.arg(1));
    ctx.out.int(len as i64);
    Ok(())
}

fn lpush(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    push_generic(ctx, args, false, false)
}

fn rpush(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    push_generic(ctx, args, true, false)
}

fn lpushx(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    push_generic(ctx, args, false, true)
}

fn rpushx(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    push_generic(ctx, args, true, true)
}

/// LPOP / RPOP with an optional count.
fn pop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, tail: bool) -> CmdResult {
    if args.len() > 3 {
        let name = String::from_utf8_lossy(args.arg(0)).to_ascii_lowercase();
        return Err(CmdError::Arity(name));
    }
    let count = match args.get(2) {
        Some(c) => {
            // Redis's getPositiveLongFromObjectOrReply: one text for both failures.
            let range = || CmdError::err("value is out of range, must be positive");
            let v = parse_i64(c).map_err(|_| range())?;
            if v < 0 {
                return Err(range());
            }
            Some(usize::try_from(v).unwrap_or(usize::MAX))
        }
        None => None,
    };
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        match count {
            Some(_) => ctx.out.null_array(),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    let l = as_list_mut(&mut e.value)?;
    let out = &mut *ctx.out;
    let popped = count != Some(0) && !l.is_empty();
    match count {
        None => match l.pop(tail) {
            Some(v) => out.bulk(&v),
            None => out.null(),
        },
        Some(n) => pop_n_reply(out, l, n, tail),
    }
    let removed = if l.is_empty() { g.remove() } else { None };
    drop(g);
    if popped {
        pop_events(ctx, args.arg(1), tail, removed.is_some());
    }
    drop(removed);
    Ok(())
}

fn lpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    pop_generic(ctx, args, false)
}

fn rpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    pop_generic(ctx, args, true)
}

// ------------------------------------------------------------------------------------------
// Reads

fn llen(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let n = match g.get() {
        Some(e) => {
            ctx.hit(true);
            as_list(&e.value)?.len()
        }
        None => {
            ctx.hit_key(false, args.arg(1));
            0
        }
    };
    drop(g);
    ctx.out.int(n as i64);
    Ok(())
}

fn lrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let start = parse_i64(args.arg(2))?;
    let end = parse_i64(args.arg(3))?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        ctx.out.array(0);
        return Ok(());
    };
    ctx.hit(true);
    let l = as_list(&e.value)?;
    let out = &mut *ctx.out;
    match resolve_range(start, end, l.len()) {
        Some((s, e)) => {
            out.array(e - s + 1);
            for v in l.range(s, e) {
                out.bulk(v);
            }
        }
        None => out.array(0),
    }
    Ok(())
}

fn lindex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let index = parse_i64(args.arg(2))?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        ctx.out.null();
        return Ok(());
    };
    ctx.hit(true);
    let l = as_list(&e.value)?;
    let out = &mut *ctx.out;
    match resolve_index(index, l.len()).and_then(|i| l.get(i)) {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    Ok(())
}

fn lpos(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let ele = args.arg(2);
    let mut rank: i64 = 1;
    let mut count: Option<usize> = None;
    let mut maxlen: usize = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = args.arg(j);
        let more = j + 1 < args.len();
        if is(opt, "rank") && more {
            let v = parse_i64(args.arg(j + 1))?;
            if v == i64::MIN {
                return Err(CmdError::err(format!(
                    "value is out of range, must be between {} and {}",
                    -i64::MAX,
                    i64::MAX
                )));
            }
            if v == 0 {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
            rank = v;
        } else if is(opt, "count") && more {
            let v = parse_i64(args.arg(j + 1))?;
            if v < 0 {
                return Err(CmdError::err("COUNT can't be negative"));
            }
            count = Some(usize::try_from(v).unwrap_or(usize::MAX));
        } else if is(opt, "maxlen") && more {
            let v = parse_i64(args.arg(j + 1))?;
            if v < 0 {
                return Err(CmdError::err("MAXLEN can't be negative"));
            }
            maxlen = usize::try_from(v).unwrap_or(usize::MAX);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        match count {
            Some(_) => ctx.out.array(0),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    ctx.hit(true);
    let l = as_list(&e.value)?;
    let from_tail = rank < 0;
    let skip = usize::try_from(rank.unsigned_abs() - 1).unwrap_or(usize::MAX);
    let len = l.len();
    let limit = if maxlen == 0 { len } else { maxlen.min(len) };
    // Matching indexes, in scan order, after skipping the first `rank - 1` matches.
    let want = match count {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => 1,
    };
    let mut found: Vec<i64> = Vec::new();
    let mut matches = 0usize;
    let mut scan = |i: usize, v: &[u8]| -> bool {
        if v == ele {
            matches += 1;
            if matches > skip {
                found.push(i as i64);
                if found.len() >= want {
                    return true;
                }
            }
        }
        false
    };
    if from_tail {
        for (k, v) in l.iter().rev().take(limit).enumerate() {
            if scan(len - 1 - k, v) {
                break;
            }
        }
    } else {
        for (i, v) in l.iter().take(limit).enumerate() {
            if scan(i, v) {
                break;
            }
        }
    }
    drop(g);
    let out = &mut *ctx.out;
    match count {
        Some(_) => {
            out.array(found.len());
            for i in found {
                out.int(i);
            }
        }
        None => match found.first() {
            Some(&i) => out.int(i),
            None => out.null(),
        },
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// In-place edits

fn lset(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let l = as_list_mut(&mut e.value)?;
    let index = parse_i64(args.arg(2))?;
    match resolve_index(index, l.len()) {
        Some(i) if l.set(i, args.arg(3)) => {
            drop(g);
            ctx.notify(LIST, "lset", args.arg(1));
            ctx.out.ok();
            Ok(())
        }
        _ => Err(CmdError::err("index out of range")),
    }
}

fn linsert(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let after = if is(args.arg(2), "after") {
        true
    } else if is(args.arg(2), "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let l = as_list_mut(&mut e.value)?;
    let n = match l.position(args.arg(3)) {
        Some(i) => {
            l.insert(if after { i + 1 } else { i }, args.arg(4));
            l.len() as i64
        }
        None => -1,
    };
    drop(g);
    if n > 0 {
        ctx.notify(LIST, "linsert", args.arg(1));
    }
    ctx.out.int(n);
    Ok(())
}

fn lrem(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let count = parse_i64(args.arg(2))?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let l = as_list_mut(&mut e.value)?;
    let n = l.remove_matching(args.arg(3), count);
    let removed = if l.is_empty() { g.remove() } else { None };
    drop(g);
    if n > 0 {
        ctx.notify(LIST, "lrem", args.arg(1));
        if removed.is_some() {
            ctx.notify(GENERIC, "del", args.arg(1));
        }
    }
    drop(removed);
    ctx.out.int(n as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let start = parse_i64(args.arg(2))?;
    let end = parse_i64(args.arg(3))?;
    let mut g = ctx.lock(args.arg(1));
    if let Some(e) = g.get() {
        let l = as_list_mut(&mut e.value)?;
        match resolve_range(start, end, l.len()) {
            Some((s, e)) => l.trim(s, e),
            None => l.trim(1, 0),
        }
        let removed = if l.is_empty() { g.remove() } else { None };
        drop(g);
        ctx.notify(LIST, "ltrim", args.arg(1));
        if removed.is_some() {
            ctx.notify(GENERIC, "del", args.arg(1));
        }
        drop(removed);
    }
    ctx.out.ok();
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Multi-key moves and pops

/// LMOVE / RPOPLPUSH: pops from `src` (tail when `from_tail`) and pushes onto `dst`,
/// replying with the element; false (nothing written) when `src` is empty, or, when
/// `src_must_be_list`, holds another type (a blocked BLMOVE run again keeps waiting on a
/// source of the wrong type, as Redis serves only list keys to it).
fn move_generic(
    ctx: &mut Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from_tail: bool,
    to_tail: bool,
    src_must_be_list: bool,
) -> Result<bool, CmdError> {
    let db = ctx.db();
    let mut g = ctx.lock_keys([src, dst]);
    let value = {
        let Some(se) = g.get(db, src) else {
            return Ok(false);
        };
        let sl = match as_list(&se.value) {
            Ok(l) => l,
            Err(_) if src_must_be_list => return Ok(false),
            Err(e) => return Err(e),
        };
        if sl.is_empty() {
            return Ok(false);
        }
        if src != dst {
            if let Some(de) = g.get(db, dst) {
                as_list(&de.value)?;
            }
        }
        let Some(se) = g.get(db, src) else {
            return Err(CmdError::err("internal error: source vanished"));
        };
        let sl = as_list_mut(&mut se.value)?;
        let Some(v) = sl.pop(from_tail) else {
            return Ok(false);
        };
        v
    };
    ctx.out.bulk(&value);
    let mut removed = None;
    if src != dst {
        let empty = match g.get(db, src) {
            Some(se) => as_list(&se.value)?.is_empty(),
            None => false,
        };
        if empty {
            removed = g.remove(db, src);
        }
    }
    match g.get(db, dst) {
        Some(de) => as_list_mut(&mut de.value)?.push_owned(value, to_tail),
        None => {
            let mut l = List::new();
            l.push_owned(value, to_tail);
            g.insert(db, dst, Value::List(Box::new(l)), 0);
        }
    }
    drop(g);
    ctx.notify(LIST, if to_tail { "rpush" } else { "lpush" }, dst);
    pop_events(ctx, src, from_tail, removed.is_some());
    drop(removed);
    Ok(true)
}

fn lmove(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let from_tail = parse_side(args.arg(3))?;
    let to_tail = parse_side(args.arg(4))?;
    if !move_generic(ctx, args.arg(1), args.arg(2), from_tail, to_tail, false)? {
        ctx.out.null();
    }
    Ok(())
}

fn rpoplpush(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if !move_generic(ctx, args.arg(1), args.arg(2), true, false, false)? {
        ctx.out.null();
    }
    Ok(())
}

fn lmpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let keys = mpop_generic(ctx, args, 1)?;
    if !keys.is_empty() {
        ctx.out.null_array();
    }
    Ok(())
}

/// Where BLMPOP's `numkeys` is (LMPOP's is at 1).
const BLMPOP_NUMKEYS_AT: usize = 2;

/// LMPOP / BLMPOP from `numkeys` at `at`: pops and replies, or returns the keys to wait on
/// (nothing written) when every list is empty.
fn mpop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, at: usize) -> Result<Vec<Vec<u8>>, CmdError> {
    let numkeys = parse_positive(args.arg(at), "numkeys should be greater than 0")?;
    let first = at + 1;
    let where_idx = match numkeys.checked_add(first) {
        Some(w) if w < args.len() => w,
        _ => return Err(CmdError::Syntax),
    };
    let tail = parse_side(args.arg(where_idx))?;
    let mut count: Option<usize> = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(args.arg(j), "count") && j + 1 < args.len() {
            count = Some(parse_positive(
                args.arg(j + 1),
                "count should be greater than 0",
            )?);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let count = count.unwrap_or(1);
    let db = ctx.db();
    let keys = (first..where_idx).map(|i| args.arg(i));
    let mut g = ctx.lock_keys(keys.clone());
    for key in keys.clone() {
        let Some(e) = g.get(db, key) else {
            continue;
        };
        let l = as_list_mut(&mut e.value)?;
        if l.is_empty() {
            continue;
        }
        let n = count.min(l.len());
        let out = &mut *ctx.out;
        out.array(2);
        out.bulk(key);
        pop_n_reply(out, l, n, tail);
        if at == BLMPOP_NUMKEYS_AT {
            // BLMPOP propagates as the pop it became.
            let n = itoa::Buffer::new().format(n).as_bytes().to_vec();
            let op: &[u8] = if tail { b"RPOP" } else { b"LPOP" };
            ctx.client.fx.record(&[op, key, &n]);
        }
        let removed = if l.is_empty() {
            g.remove(db, key)
        } else {
            None
        };
        drop(g);
        pop_events(ctx, key, tail, removed.is_some());
        drop(removed);
        return Ok(Vec::new());
    }
    drop(g);
    Ok(keys.map(<[u8]>::to_vec).collect())
}

// ------------------------------------------------------------------------------------------
// Blocking variants

/// BLPOP / BRPOP: pops from the first non-empty list, or blocks on all of them.
fn bpop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, tail: bool) -> CmdResult {
    let last = args.len() - 1;
    let deadline = parse_timeout(args.arg(last))?;
    let db = ctx.db();
    let keys = (1..last).map(|i| args.arg(i));
    let mut g = ctx.lock_keys(keys.clone());
    for key in keys.clone() {
        let Some(e) = g.get(db, key) else {
            continue;
        };
        let l = as_list_mut(&mut e.value)?;
        let Some(v) = l.pop(tail) else {
            continue;
        };
        let removed = if l.is_empty() {
            g.remove(db, key)
        } else {
            None
        };
        drop(g);
        pop_events(ctx, key, tail, removed.is_some());
        drop(removed);
        // Propagated as the pop it became.
        let op: &[u8] = if tail { b"RPOP" } else { b"LPOP" };
        ctx.client.fx.record(&[op, key]);
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.bulk(&v);
        return Ok(());
    }
    drop(g);
    ctx.block(
        keys.map(<[u8]>::to_vec).collect(),
        deadline,
        TimeoutReply::NullArray,
    );
    Ok(())
}

fn blpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    bpop_generic(ctx, args, false)
}

fn brpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    bpop_generic(ctx, args, true)
}

/// BLMOVE / BRPOPLPUSH: as LMOVE, blocking on `src` while it is empty. Served, it
/// propagates as `served_as` (the non-blocking move it became).
fn bmove_generic(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    from_tail: bool,
    to_tail: bool,
    timeout: &[u8],
    served_as: &[&[u8]],
) -> CmdResult {
    let deadline = parse_timeout(timeout)?;
    let (src, dst) = (args.arg(1), args.arg(2));
    // Run again for a blocked client, a source of another type keeps it waiting, but a
    // destination of another type is its answer: -WRONGTYPE, the element left in the
    // source (Redis's serveClientBlockedOnList).
    let retry = ctx.client.block_mode == BlockMode::Retry;
    if move_generic(ctx, src, dst, from_tail, to_tail, retry)? {
        ctx.client.fx.record(served_as);
    } else {
        ctx.block_with(BlockRequest {
            keys: vec![src.to_vec()],
            deadline,
            on_timeout: TimeoutReply::Null,
            rewrite: None,
            serve_errors: true,
        });
    }
    Ok(())
}

fn blmove(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let from_tail = parse_side(args.arg(3))?;
    let to_tail = parse_side(args.arg(4))?;
    let served_as: [&[u8]; 5] = [b"LMOVE", args.arg(1), args.arg(2), args.arg(3), args.arg(4)];
    bmove_generic(ctx, args, from_tail, to_tail, args.arg(5), &served_as)
}

fn brpoplpush(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let served_as: [&[u8]; 3] = [b"RPOPLPUSH", args.arg(1), args.arg(2)];
    bmove_generic(ctx, args, true, false, args.arg(3), &served_as)
}

fn blmpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let deadline = parse_timeout(args.arg(1))?;
    let keys = mpop_generic(ctx, args, BLMPOP_NUMKEYS_AT)?;
    if !keys.is_empty() {
        ctx.block(keys, deadline, TimeoutReply::NullArray);
    }
    Ok(())
}
