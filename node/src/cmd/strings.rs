//! String commands: GET, SET and its variants (SETNX, SETEX, PSETEX, GETSET, GETDEL,
//! GETEX), MGET, MSET, MSETNX, APPEND, STRLEN, the INCR family, INCRBYFLOAT, GETRANGE,
//! SUBSTR, SETRANGE and LCS, with Redis 7.2's replies and error texts.
//!
//! Values are stored as [`RString`]: canonical integers in the `int` encoding (so INCR never
//! re-parses text), short strings as `embstr`, and strings edited in place (APPEND,
//! SETRANGE) as `raw`. Relative expiry times become absolute nanosecond deadlines.
//! INCRBYFLOAT reproduces Redis's x86-64 `long double` arithmetic and text (submodule `ld`).

pub(crate) mod ld;

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;
use storage::value::parse_canonical_i64;
use storage::{RString, Value};

use crate::cmd::expiry::{declare_expiry, Form};
use crate::cmd::util::{deadline, is, parse_i64, TimeUnit};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::notify::{GENERIC, STRING};
use crate::registry::{flags::*, CommandSpec, Group};

use self::ld::Ld;

const S: Group = Group::String;

/// String commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("get", 2, READONLY | FAST | PREFETCH_VALUE, (1, 1, 1), S, get).doc("Returns the string value of a key.", "1.0.0"),
    CommandSpec::new("set", -3, WRITE | DENYOOM, (1, 1, 1), S, set)
        .doc("Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", "1.0.0"),
    CommandSpec::new("setnx", 3, WRITE | DENYOOM | FAST, (1, 1, 1), S, setnx)
        .doc("Set the string value of a key only when the key doesn't exist.", "1.0.0"),
    CommandSpec::new("setex", 4, WRITE | DENYOOM, (1, 1, 1), S, setex)
        .doc("Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "2.0.0"),
    CommandSpec::new("psetex", 4, WRITE | DENYOOM, (1, 1, 1), S, psetex).doc(
        "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.",
        "2.6.0",
    ),
    CommandSpec::new("getset", 3, WRITE | DENYOOM | FAST | PREFETCH_VALUE, (1, 1, 1), S, getset)
        .doc("Returns the previous string value of a key after setting it to a new value.", "1.0.0"),
    CommandSpec::new("getdel", 2, WRITE | FAST | PREFETCH_VALUE, (1, 1, 1), S, getdel)
        .doc("Returns the string value of a key after deleting the key.", "6.2.0"),
    CommandSpec::new("getex", -2, WRITE | FAST | PREFETCH_VALUE, (1, 1, 1), S, getex)
        .doc("Returns the string value of a key after setting its expiration time.", "6.2.0"),
    CommandSpec::new("mget", -2, READONLY | FAST | PREFETCH_VALUE, (1, -1, 1), S, mget)
        .doc("Atomically returns the string values of one or more keys.", "1.0.0"),
    CommandSpec::new("mset", -3, WRITE | DENYOOM, (1, -1, 2), S, mset)
        .doc("Atomically creates or modifies the string values of one or more keys.", "1.0.1"),
    CommandSpec::new("msetnx", -3, WRITE | DENYOOM, (1, -1, 2), S, msetnx)
        .doc("Atomically modifies the string values of one or more keys only when all keys don't exist.", "1.0.1"),
    CommandSpec::new("append", 3, WRITE | DENYOOM | FAST, (1, 1, 1), S, append)
        .doc("Appends a string to the value of a key. Creates the key if it doesn't exist.", "2.0.0"),
    CommandSpec::new("strlen", 2, READONLY | FAST, (1, 1, 1), S, strlen).doc("Returns the length of a string value.", "2.2.0"),
    CommandSpec::new("incr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), S, incr)
        .doc("Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "1.0.0"),
    CommandSpec::new("decr", 2, WRITE | DENYOOM | FAST, (1, 1, 1), S, decr)
        .doc("Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "1.0.0"),
    CommandSpec::new("incrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), S, incrby).doc(
        "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        "1.0.0",
    ),
    CommandSpec::new("decrby", 3, WRITE | DENYOOM | FAST, (1, 1, 1), S, decrby).doc(
        "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
        "1.0.0",
    ),
    CommandSpec::new("incrbyfloat", 3, WRITE | DENYOOM | FAST, (1, 1, 1), S, incrbyfloat).doc(
        "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        "2.6.0",
    ),
    CommandSpec::new("getrange", 4, READONLY | PREFETCH_VALUE, (1, 1, 1), S, getrange)
        .doc("Returns a substring of the string stored at a key.", "2.4.0"),
    CommandSpec::new("substr", 4, READONLY | PREFETCH_VALUE, (1, 1, 1), S, getrange).doc("Returns a substring from a string value.", "1.0.0"),
    CommandSpec::new("setrange", 4, WRITE | DENYOOM, (1, 1, 1), S, setrange).doc(
        "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.",
        "2.2.0",
    ),
    CommandSpec::new("lcs", -3, READONLY, (1, 2, 1), S, lcs).doc("Finds the longest common substring.", "7.0.0"),
];

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

/// proto-max-bulk-len, the largest string APPEND and SETRANGE may build.
fn max_bulk(ctx: &Ctx<'_>) -> u64 {
    ctx.server.live.proto_max_bulk_len.load(Relaxed)
}

/// Redis's `checkStringLength`: `size + append` must not exceed proto-max-bulk-len.
fn check_string_length(ctx: &Ctx<'_>, size: u64, append: u64) -> CmdResult {
    match size.checked_add(append) {
        Some(total) if total <= max_bulk(ctx) => Ok(()),
        _ => Err(CmdError::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

// Options of SET (NX XX GET KEEPTTL EX PX EXAT PXAT) and GETEX (PERSIST EX PX EXAT PXAT).
const OPT_NX: u16 = 1;
const OPT_XX: u16 = 1 << 1;
const OPT_GET: u16 = 1 << 2;
const OPT_KEEPTTL: u16 = 1 << 3;
const OPT_PERSIST: u16 = 1 << 4;
const OPT_EX: u16 = 1 << 5;
const OPT_PX: u16 = 1 << 6;
const OPT_EXAT: u16 = 1 << 7;
const OPT_PXAT: u16 = 1 << 8;

/// Parses SET's (`set`) or GETEX's options from argument `from` on, with the exact
/// exclusions of Redis's `parseExtendedStringArgumentsOrReply`; returns the flags and the
/// expire argument, if any (the last one given).
fn parse_ext_opts<'a>(
    args: Args<'a>,
    from: usize,
    set: bool,
) -> Result<(u16, Option<&'a [u8]>), CmdError> {
    let mut flags = 0u16;
    let mut expire = None;
    let mut j = from;
    while j < args.len() {
        let opt = args.arg(j);
        let next = args.get(j + 1);
        let none_of = |mask: u16| flags & mask == 0;
        let timed = |own: u16| {
            let others = (OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT) & !own;
            flags & (OPT_KEEPTTL | OPT_PERSIST | others) == 0 && next.is_some()
        };
        let with_time = if is(opt, "ex") && timed(OPT_EX) {
            Some(OPT_EX)
        } else if is(opt, "px") && timed(OPT_PX) {
            Some(OPT_PX)
        } else if is(opt, "exat") && timed(OPT_EXAT) {
            Some(OPT_EXAT)
        } else if is(opt, "pxat") && timed(OPT_PXAT) {
            Some(OPT_PXAT)
        } else {
            None
        };
        if let Some(f) = with_time {
            flags |= f;
            expire = next;
            j += 2;
            continue;
        }
        if set && is(opt, "nx") && none_of(OPT_XX) {
            flags |= OPT_NX;
        } else if set && is(opt, "xx") && none_of(OPT_NX) {
            flags |= OPT_XX;
        } else if set && is(opt, "get") {
            flags |= OPT_GET;
        } else if set
            && is(opt, "keepttl")
            && none_of(OPT_PERSIST | OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT)
        {
            flags |= OPT_KEEPTTL;
        } else if !set
            && is(opt, "persist")
            && none_of(OPT_KEEPTTL | OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT)
        {
            flags |= OPT_PERSIST;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok((flags, expire))
}

fn invalid_expire(cmd: &str) -> CmdError {
    CmdError::err(format!("invalid expire time in '{cmd}' command"))
}

/// Turns an EX/PX/EXAT/PXAT argument into an absolute deadline (ns), as Redis's
/// `getExpireMillisecondsOrReply`: not an integer, zero or negative, or overflowing is an
/// error. `Ok(None)`: an absolute time already in the past (the key must go).
fn resolve_expire(
    ctx: &Ctx<'_>,
    raw: &[u8],
    flags: u16,
    cmd: &str,
) -> Result<Option<u64>, CmdError> {
    let v = parse_i64(raw)?;
    if v <= 0 {
        return Err(invalid_expire(cmd));
    }
    let unit = if flags & (OPT_PX | OPT_PXAT) != 0 {
        TimeUnit::Millis
    } else {
        TimeUnit::Secs
    };
    let relative = flags & (OPT_EX | OPT_PX) != 0;
    deadline(v, unit, relative, ctx.now, cmd)
}

// ------------------------------------------------------------------------------------------
// GET and the SET family

fn get(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    match g.get() {
        Some(e) => {
            ctx.hit(true);
            let out = &mut *ctx.out;
            as_string(&e.value)?.with_bytes(|b| out.bulk(b));
        }
        None => {
            ctx.hit_key(false, args.arg(1));
            ctx.out.null();
        }
    }
    Ok(())
}

/// How a SET-family command answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetReply {
    /// `+OK` when set, null when NX/XX aborted (SET, SETEX, PSETEX).
    Ok,
    /// `:1` when set, `:0` when aborted (SETNX).
    Int,
}

/// Redis's `setGenericCommand`: SET with `flags` (NX XX GET KEEPTTL and one expire kind)
/// and the expire argument, for SET, SETNX, SETEX, PSETEX and GETSET.
fn set_generic(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    val: &[u8],
    flags: u16,
    expire: Option<&[u8]>,
    cmd: &str,
    reply: SetReply,
) -> CmdResult {
    let at = match expire {
        Some(raw) => Some(resolve_expire(ctx, raw, flags, cmd)?),
        None => None,
    };
    let value = Value::String(RString::from_bytes(val));
    let with_get = flags & OPT_GET != 0;
    let mut g = ctx.lock(key);
    let old = g.get();
    if with_get {
        ctx.hit_key(old.is_some(), key);
        match &old {
            Some(e) => {
                let out = &mut *ctx.out;
                as_string(&e.value)?.with_bytes(|b| out.bulk(b));
            }
            None => ctx.out.null(),
        }
    }
    let found = old.is_some();
    if (flags & OPT_NX != 0 && found) || (flags & OPT_XX != 0 && !found) {
        drop(g);
        if !with_get {
            match reply {
                SetReply::Ok => ctx.out.null(),
                SetReply::Int => ctx.out.int(0),
            }
        }
        return Ok(());
    }
    // Old values are dropped after the shard lock is released.
    match (at, old) {
        // An absolute deadline already past: the key is set and expires at once.
        (Some(None), old) => {
            let found = old.is_some();
            let removed = if found { g.remove() } else { None };
            drop(g);
            drop(removed);
            if !found {
                ctx.notify(crate::notify::NEW, "new", key);
            }
            ctx.notify(STRING, "set", key);
            ctx.notify(GENERIC, "expire", key);
            ctx.notify(crate::notify::EXPIRED, "expired", key);
        }
        (at, Some(e)) => {
            let current = e.expire_at().unwrap_or(0);
            let new_at = match at {
                Some(Some(t)) => t,
                _ if flags & OPT_KEEPTTL != 0 => current,
                _ => 0,
            };
            let prev = std::mem::replace(&mut e.value, value);
            if new_at != current {
                g.set_expire(new_at);
            }
            drop(g);
            drop(prev);
            set_events(ctx, key, at.is_some());
        }
        (at, None) => {
            g.insert(value, at.flatten().unwrap_or(0));
            drop(g);
            set_events(ctx, key, at.is_some());
        }
    }
    if !with_get {
        match reply {
            SetReply::Ok => ctx.out.ok(),
            SetReply::Int => ctx.out.int(1),
        }
    }
    Ok(())
}

/// The events of a SET-family store: `set`, and `expire` when it gave a deadline.
fn set_events(ctx: &Ctx<'_>, key: &[u8], expire: bool) {
    ctx.notify(STRING, "set", key);
    if expire {
        ctx.notify(GENERIC, "expire", key);
    }
}

fn set(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (flags, expire) = parse_ext_opts(args, 3, true)?;
    set_generic(
        ctx,
        args.arg(1),
        args.arg(2),
        flags,
        expire,
        "set",
        SetReply::Ok,
    )?;
    if expire.is_some() && ctx.client.fx.on() {
        // Propagated with the deadline the key ended with, not the relative one.
        let mut base: Vec<&[u8]> = Vec::with_capacity(args.len());
        let mut i = 0;
        while i < args.len() {
            let a = args.arg(i);
            if i >= 3 && ["ex", "px", "exat", "pxat"].iter().any(|o| is(a, o)) {
                i += 2;
                continue;
            }
            base.push(a);
            i += 1;
        }
        base[0] = b"SET";
        declare_expiry(ctx, args.arg(1), Form::Set(&base));
    }
    Ok(())
}

fn setnx(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    set_generic(
        ctx,
        args.arg(1),
        args.arg(2),
        OPT_NX,
        None,
        "setnx",
        SetReply::Int,
    )
}

fn setex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    set_generic(
        ctx,
        args.arg(1),
        args.arg(3),
        OPT_EX,
        Some(args.arg(2)),
        "setex",
        SetReply::Ok,
    )?;
    let base: [&[u8]; 3] = [b"SET", args.arg(1), args.arg(3)];
    declare_expiry(ctx, args.arg(1), Form::Set(&base));
    Ok(())
}

fn psetex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    set_generic(
        ctx,
        args.arg(1),
        args.arg(3),
        OPT_PX,
        Some(args.arg(2)),
        "psetex",
        SetReply::Ok,
    )?;
    let base: [&[u8]; 3] = [b"SET", args.arg(1), args.arg(3)];
    declare_expiry(ctx, args.arg(1), Form::Set(&base));
    Ok(())
}

fn getset(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    set_generic(
        ctx,
        args.arg(1),
        args.arg(2),
        OPT_GET,
        None,
        "getset",
        SetReply::Ok,
    )
}

fn getdel(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        ctx.out.null();
        return Ok(());
    };
    ctx.hit(true);
    as_string(&e.value)?;
    let removed = g.remove();
    drop(g);
    if let Some(e) = removed {
        ctx.notify(GENERIC, "del", args.arg(1));
        let out = &mut *ctx.out;
        as_string(&e.value)?.with_bytes(|b| out.bulk(b));
    }
    Ok(())
}

fn getex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    getex_run(ctx, args)?;
    if args.len() > 2 {
        declare_expiry(ctx, args.arg(1), Form::Getex);
    } else {
        // Without options GETEX changes nothing.
        ctx.client.fx.nothing();
    }
    Ok(())
}

/// GETEX itself; [`getex`] declares its effect.
fn getex_run(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (flags, expire) = parse_ext_opts(args, 2, false)?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        ctx.out.null();
        return Ok(());
    };
    ctx.hit(true);
    let s = as_string(&e.value)?;
    // The expire argument is only checked once the key is known to hold a string.
    let at = match expire {
        Some(raw) => Some(resolve_expire(ctx, raw, flags, "getex")?),
        None => None,
    };
    let had_ttl = e.expire_at().is_some();
    let out = &mut *ctx.out;
    s.with_bytes(|b| out.bulk(b));
    let key = args.arg(1);
    match at {
        Some(None) => {
            drop(g.remove());
            ctx.notify(GENERIC, "del", key);
        }
        Some(Some(t)) => {
            g.set_expire(t);
            drop(g);
            ctx.notify(GENERIC, "expire", key);
        }
        None if flags & OPT_PERSIST != 0 && had_ttl => {
            g.set_expire(0);
            drop(g);
            ctx.notify(GENERIC, "persist", key);
        }
        None => {}
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// MGET MSET MSETNX

fn mget(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let keys = args.slice(1);
    let db = ctx.db();
    let mut g = ctx.lock_keys(keys.iter());
    ctx.out.array(keys.len());
    for k in keys.iter() {
        let found = g.get(db, k);
        ctx.hit_key(found.is_some(), k);
        // MGET answers nil for keys of other types.
        match found.map(|e| as_string(&e.value)) {
            Some(Ok(s)) => {
                let out = &mut *ctx.out;
                s.with_bytes(|b| out.bulk(b));
            }
            _ => ctx.out.null(),
        }
    }
    Ok(())
}

/// MSET and MSETNX: an odd number of arguments, pairs after the name.
fn mset_generic(ctx: &mut Ctx<'_>, args: Args<'_>, nx: bool) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Arity(if nx { "msetnx" } else { "mset" }.into()));
    }
    let pairs = args.slice(1);
    let values: Vec<Value> = pairs
        .iter()
        .skip(1)
        .step_by(2)
        .map(|v| Value::String(RString::from_bytes(v)))
        .collect();
    let db = ctx.db();
    let mut g = ctx.lock_keys(pairs.iter().step_by(2));
    if nx && pairs.iter().step_by(2).any(|k| g.get(db, k).is_some()) {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    }
    let mut old = Vec::new();
    for (k, v) in pairs.iter().step_by(2).zip(values) {
        if let Some(e) = g.insert(db, k, v, 0) {
            old.push(e);
        }
        ctx.notify(STRING, "set", k);
    }
    drop(g);
    drop(old);
    if nx {
        ctx.out.int(1);
    } else {
        ctx.out.ok();
    }
    Ok(())
}

fn mset(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    mset_generic(ctx, args, false)
}

fn msetnx(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    mset_generic(ctx, args, true)
}

// ------------------------------------------------------------------------------------------
// APPEND STRLEN

fn append(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let add = args.arg(2);
    let mut g = ctx.lock(args.arg(1));
    let total = match g.get() {
        None => {
            let v = RString::from_bytes(add);
            let n = v.len();
            g.insert(Value::String(v), 0);
            n
        }
        Some(e) => {
            let s = as_string_mut(&mut e.value)?;
            check_string_length(ctx, s.len() as u64, add.len() as u64)?;
            let mut raw = s.make_raw();
            raw.append(add);
            raw.len()
        }
    };
    drop(g);
    ctx.notify(STRING, "append", args.arg(1));
    ctx.out.int(total as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let n = match g.get() {
        Some(e) => {
            ctx.hit(true);
            as_string(&e.value)?.len()
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

// ------------------------------------------------------------------------------------------
// INCR DECR INCRBY DECRBY INCRBYFLOAT

/// Adds `delta` to the integer at `key` (0 when missing), keeping its TTL.
fn incr_decr(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> CmdResult {
    let mut g = ctx.lock(key);
    let new = match g.get() {
        Some(e) => {
            let s = as_string_mut(&mut e.value)?;
            let cur = match s.as_int() {
                Some(i) => i,
                None => s
                    .with_bytes(parse_canonical_i64)
                    .ok_or(CmdError::NotInteger)?,
            };
            let v = cur.checked_add(delta).ok_or(CmdError::Overflow)?;
            *s = RString::from_int(v);
            v
        }
        None => {
            g.insert(Value::String(RString::from_int(delta)), 0);
            delta
        }
    };
    drop(g);
    ctx.notify(STRING, "incrby", key);
    ctx.out.int(new);
    Ok(())
}

fn incr(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    incr_decr(ctx, args.arg(1), 1)
}

fn decr(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    incr_decr(ctx, args.arg(1), -1)
}

fn incrby(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let by = parse_i64(args.arg(2))?;
    incr_decr(ctx, args.arg(1), by)
}

fn decrby(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let by = parse_i64(args.arg(2))?;
    // Negating i64::MIN overflows.
    let neg = by
        .checked_neg()
        .ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_decr(ctx, args.arg(1), neg)
}

/// The text INCRBYFLOAT stores for `cur + incr` (`cur` from the key, `None` when missing):
/// Redis's `long double` sum printed by `ld2string(.., LD_STR_HUMAN)`.
fn incrbyfloat_text(cur: Option<&RString>, incr: Option<Ld>) -> Result<Vec<u8>, CmdError> {
    let value = match cur {
        None => Ld::Zero(false),
        Some(s) => match s.as_int() {
            Some(i) => Ld::from_i64(i),
            None => s.with_bytes(Ld::parse).ok_or(CmdError::NotFloat)?,
        },
    };
    let incr = incr.ok_or(CmdError::NotFloat)?;
    match value.add(incr) {
        Some(sum) if sum.is_finite() => Ok(sum.to_human()),
        _ => Err(CmdError::err("increment would produce NaN or Infinity")),
    }
}

fn incrbyfloat(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    // Parsed before locking; its error is reported only after the key's own checks.
    let incr = Ld::parse(args.arg(2));
    let mut g = ctx.lock(args.arg(1));
    match g.get() {
        Some(e) => {
            let s = as_string_mut(&mut e.value)?;
            let text = incrbyfloat_text(Some(&*s), incr)?;
            ctx.out.bulk(&text);
            // The TTL stays.
            *s = RString::from_vec(text);
        }
        None => {
            let text = incrbyfloat_text(None, incr)?;
            ctx.out.bulk(&text);
            g.insert(Value::String(RString::from_vec(text)), 0);
        }
    }
    drop(g);
    ctx.notify(STRING, "incrbyfloat", args.arg(1));
    Ok(())
}

// ------------------------------------------------------------------------------------------
// GETRANGE SUBSTR SETRANGE

/// The byte range GETRANGE returns for `start..=end` of a `len`-byte string, with Redis's
/// negative indexes and clamping; `None` for the empty string.
fn range_of(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let n = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(n)
    } else {
        start
    };
    let mut end = if end < 0 { end.saturating_add(n) } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= n {
        end = n - 1;
    }
    if start > end || n == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

fn getrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let start = parse_i64(args.arg(2))?;
    let end = parse_i64(args.arg(3))?;
    let mut g = ctx.lock(args.arg(1));
    match g.get() {
        None => {
            ctx.hit_key(false, args.arg(1));
            ctx.out.bulk(b"");
        }
        Some(e) => {
            ctx.hit(true);
            let out = &mut *ctx.out;
            as_string(&e.value)?.with_bytes(|b| {
                match range_of(start, end, b.len()).and_then(|(s, e)| b.get(s..=e)) {
                    Some(sub) => out.bulk(sub),
                    None => out.bulk(b""),
                }
            });
        }
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let offset = parse_i64(args.arg(2))?;
    let value = args.arg(3);
    let Ok(offset) = usize::try_from(offset) else {
        return Err(CmdError::err("offset is out of range"));
    };
    let mut g = ctx.lock(args.arg(1));
    let changed = !value.is_empty();
    let total = match g.get() {
        None => {
            // Setting nothing on a missing key creates nothing.
            if value.is_empty() {
                0
            } else {
                check_string_length(ctx, offset as u64, value.len() as u64)?;
                let end = offset + value.len();
                let mut raw = vec![0; end];
                raw[offset..end].copy_from_slice(value);
                g.insert(Value::String(RString::raw_from_vec(raw)), 0);
                end
            }
        }
        Some(e) => {
            let s = as_string_mut(&mut e.value)?;
            if value.is_empty() {
                s.len()
            } else {
                check_string_length(ctx, offset as u64, value.len() as u64)?;
                let end = offset + value.len();
                let mut raw = s.make_raw();
                if raw.len() < end {
                    raw.resize(end, 0);
                }
                raw[offset..end].copy_from_slice(value);
                raw.len()
            }
        }
    };
    drop(g);
    if changed {
        ctx.notify(STRING, "setrange", args.arg(1));
    }
    ctx.out.int(total as i64);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// LCS

/// One run of matching bytes found by LCS IDX: inclusive ranges in both strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LcsMatch {
    a: (usize, usize),
    b: (usize, usize),
    len: usize,
}

/// The outcome of [`lcs_compute`].
#[derive(Debug, Default, PartialEq, Eq)]
struct LcsResult {
    /// Length of the longest common subsequence.
    len: usize,
    /// The subsequence itself (when asked for).
    text: Vec<u8>,
    /// Matching runs, last first, at least `min_len` long (when asked for).
    matches: Vec<LcsMatch>,
}

/// Bytes of the dynamic-programming table for strings of `alen` and `blen` bytes (Redis
/// uses one u32 per cell); `None` on overflow.
fn lcs_table_bytes(alen: usize, blen: usize) -> Option<u64> {
    let cells = (alen as u64)
        .checked_add(1)?
        .checked_mul((blen as u64).checked_add(1)?)?;
    cells.checked_mul(4)
}

/// Redis's LCS: fills the table, then walks back from the end collecting the subsequence
/// (`text`) and the runs (`runs`, keeping those at least `min_len` long; 0 keeps all).
/// `None` when the table cannot be allocated.
fn lcs_compute(a: &[u8], b: &[u8], text: bool, runs: bool, min_len: usize) -> Option<LcsResult> {
    let (alen, blen) = (a.len(), b.len());
    let width = blen + 1;
    let cells = (alen + 1).checked_mul(width)?;
    let mut t: Vec<u32> = Vec::new();
    t.try_reserve_exact(cells).ok()?;
    t.resize(cells, 0);
    for i in 1..=alen {
        let (prev, cur) = t.split_at_mut(i * width);
        let prev = &prev[(i - 1) * width..];
        let cur = &mut cur[..width];
        let ai = a[i - 1];
        for j in 1..=blen {
            cur[j] = if ai == b[j - 1] {
                prev[j - 1] + 1
            } else {
                prev[j].max(cur[j - 1])
            };
        }
    }
    let at = |i: usize, j: usize| t[i * width + j];
    let len = at(alen, blen) as usize;
    let mut res = LcsResult {
        len,
        ..LcsResult::default()
    };
    if !text && !runs {
        return Some(res);
    }
    let mut out = vec![0u8; len];
    let mut idx = len;
    // `alen` marks "no run in progress", as in Redis.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            if let Some(slot) = idx.checked_sub(1).and_then(|k| out.get_mut(k)) {
                *slot = a[i - 1];
            }
            if a_start == alen {
                a_start = i - 1;
                a_end = i - 1;
                b_start = j - 1;
                b_end = j - 1;
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx = idx.saturating_sub(1);
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        if emit {
            let run = a_end - a_start + 1;
            if runs && (min_len == 0 || run >= min_len) {
                res.matches.push(LcsMatch {
                    a: (a_start, a_end),
                    b: (b_start, b_end),
                    len: run,
                });
            }
            a_start = alen;
        }
    }
    if text {
        res.text = out;
    }
    Some(res)
}

fn lcs(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (ka, kb) = (args.arg(1), args.arg(2));
    let db = ctx.db();
    let mut g = ctx.lock_keys([ka, kb]);
    let ea = g
        .get(db, ka)
        .map(|e| as_string(&e.value).map(RString::len).map_err(|_| ()));
    ctx.hit_key(ea.is_some(), ka);
    let eb = g
        .get(db, kb)
        .map(|e| as_string(&e.value).map(RString::len).map_err(|_| ()));
    ctx.hit_key(eb.is_some(), kb);
    if matches!(ea, Some(Err(()))) || matches!(eb, Some(Err(()))) {
        return Err(CmdError::err(
            "The specified keys must contain string values",
        ));
    }
    let (alen, blen) = (
        ea.and_then(Result::ok).unwrap_or(0),
        eb.and_then(Result::ok).unwrap_or(0),
    );

    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = args.arg(j);
        if is(opt, "idx") {
            getidx = true;
        } else if is(opt, "len") {
            getlen = true;
        } else if is(opt, "withmatchlen") {
            withmatchlen = true;
        } else if is(opt, "minmatchlen") && j + 1 < args.len() {
            minmatchlen = parse_i64(args.arg(j + 1))?.max(0);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if getlen && getidx {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    if alen as u64 >= u64::from(u32::MAX - 1) || blen as u64 >= u64::from(u32::MAX - 1) {
        return Err(CmdError::err("String too long for LCS"));
    }
    match lcs_table_bytes(alen, blen) {
        Some(n) if n <= max_bulk(ctx) => {}
        Some(_) => {
            return Err(CmdError::err(
                "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ))
        }
        None => {
            return Err(CmdError::err(
                "Insufficient memory, failed allocating transient memory for LCS",
            ))
        }
    }
    let copy = |e: Option<&mut storage::Entry>| {
        e.and_then(|e| as_string(&e.value).ok().map(RString::to_vec))
    };
    let a = copy(g.get(db, ka)).unwrap_or_default();
    let b = copy(g.get(db, kb)).unwrap_or_default();
    drop(g);

    let min_len = usize::try_from(minmatchlen).unwrap_or(usize::MAX);
    let Some(res) = lcs_compute(&a, &b, !getlen && !getidx, getidx, min_len) else {
        return Err(CmdError::err(
            "Insufficient memory, failed allocating transient memory for LCS",
        ));
    };
    let out = &mut *ctx.out;
    if getidx {
        out.map(2);
        out.bulk(b"matches");
        out.array(res.matches.len());
        for m in &res.matches {
            out.array(if withmatchlen { 3 } else { 2 });
            out.array(2);
            out.int(m.a.0 as i64);
            out.int(m.a.1 as i64);
            out.array(2);
            out.int(m.b.0 as i64);
            out.int(m.b.1 as i64);
            if withmatchlen {
                out.int(m.len as i64);
            }
        }
        out.bulk(b"len");
        out.int(res.len as i64);
    } else if getlen {
        out.int(res.len as i64);
    } else {
        out.bulk(&res.text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn human(a: &str, b: &str) -> String {
        let cur = RString::from_bytes(a.as_bytes());
        String::from_utf8(incrbyfloat_text(Some(&cur), Ld::parse(b.as_bytes())).unwrap()).unwrap()
    }

    #[test]
    fn incrbyfloat_formatter() {
        assert_eq!(human("10.5", "0.1"), "10.6");
        assert_eq!(human("10.50", "0.1"), "10.6");
        assert_eq!(human("0", "3.0e3"), "3000");
        assert_eq!(human("5.0e3", "2.0e2"), "5200");
        assert_eq!(human("10", "1.5"), "11.5");
        assert_eq!(human("7", "3"), "10");
        assert_eq!(human("5.25", "-10"), "-4.75");
        assert_eq!(human("0", "1e17"), "100000000000000000");
        assert_eq!(human("0", "0.0000001"), "0.0000001");
        assert_eq!(human("-1", "1"), "0");
        assert_eq!(human("9223372036854775807", "1"), "9223372036854775808");
        let missing = incrbyfloat_text(None, Ld::parse(b"2.5")).unwrap();
        assert_eq!(missing, b"2.5");
        let bad = |v: &str, i: &str| {
            incrbyfloat_text(
                Some(&RString::from_bytes(v.as_bytes())),
                Ld::parse(i.as_bytes()),
            )
            .unwrap_err()
        };
        assert_eq!(bad("abc", "1"), CmdError::NotFloat);
        assert_eq!(bad("1", "nan"), CmdError::NotFloat);
        assert_eq!(
            bad("1", "inf"),
            CmdError::err("increment would produce NaN or Infinity")
        );
        assert_eq!(
            bad("1.1e4932", "1.1e4932"),
            CmdError::err("increment would produce NaN or Infinity")
        );
    }

    #[test]
    fn lcs_core() {
        let r = lcs_compute(b"ohmytext", b"mynewtext", true, true, 0).unwrap();
        assert_eq!(r.len, 6);
        assert_eq!(r.text, b"mytext");
        let m = |a: (usize, usize), b: (usize, usize), len| LcsMatch { a, b, len };
        assert_eq!(r.matches, vec![m((4, 7), (5, 8), 4), m((2, 3), (0, 1), 2)]);
        let r = lcs_compute(b"ohmytext", b"mynewtext", false, true, 4).unwrap();
        assert_eq!(r.matches, vec![m((4, 7), (5, 8), 4)]);
        assert!(r.text.is_empty());
        let r = lcs_compute(b"", b"abc", true, true, 0).unwrap();
        assert_eq!((r.len, r.text.len(), r.matches.len()), (0, 0, 0));
        let r = lcs_compute(b"abc", b"abc", true, true, 0).unwrap();
        assert_eq!(r.matches, vec![m((0, 2), (0, 2), 3)]);
        let r = lcs_compute(b"abcdef", b"xyz", false, false, 0).unwrap();
        assert_eq!(r.len, 0);
        assert_eq!(lcs_table_bytes(1, 1), Some(16));
        assert_eq!(lcs_table_bytes(usize::MAX, 2), None);
    }

    #[test]
    fn getrange_clamping() {
        let s = "This is a string";
        let sub = |a, b| range_of(a, b, s.len()).map(|(x, y)| &s[x..=y]);
        assert_eq!(sub(0, 3), Some("This"));
        assert_eq!(sub(-3, -1), Some("ing"));
        assert_eq!(sub(0, -100), Some("T"));
        assert_eq!(sub(-100, -200), None);
        assert_eq!(sub(5, 3), None);
        assert_eq!(sub(100, 200), None);
        assert_eq!(sub(i64::MIN, i64::MAX), Some(s));
        assert_eq!(range_of(0, -1, 0), None);
    }

    #[test]
    fn command_table_matches_redis_command_info() {
        // (name, arity, flags, first key, last key, step) as Redis 7.2's COMMAND INFO.
        let want: &[(&str, i32, u32, i32, i32, i32)] = &[
            ("get", 2, READONLY | FAST, 1, 1, 1),
            ("set", -3, WRITE | DENYOOM, 1, 1, 1),
            ("setnx", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("setex", 4, WRITE | DENYOOM, 1, 1, 1),
            ("psetex", 4, WRITE | DENYOOM, 1, 1, 1),
            ("getset", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("getdel", 2, WRITE | FAST, 1, 1, 1),
            ("getex", -2, WRITE | FAST, 1, 1, 1),
            ("mget", -2, READONLY | FAST, 1, -1, 1),
            ("mset", -3, WRITE | DENYOOM, 1, -1, 2),
            ("msetnx", -3, WRITE | DENYOOM, 1, -1, 2),
            ("append", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("strlen", 2, READONLY | FAST, 1, 1, 1),
            ("incr", 2, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("decr", 2, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("incrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("decrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("incrbyfloat", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
            ("getrange", 4, READONLY, 1, 1, 1),
            ("substr", 4, READONLY, 1, 1, 1),
            ("setrange", 4, WRITE | DENYOOM, 1, 1, 1),
            ("lcs", -3, READONLY, 1, 2, 1),
        ];
        assert_eq!(COMMANDS.len(), want.len());
        for (spec, &(name, arity, flags, first, last, step)) in COMMANDS.iter().zip(want) {
            assert_eq!(spec.name, name);
            // PREFETCH_VALUE is Ember's own (COMMAND INFO does not show it).
            let redis_flags = spec.flags & !PREFETCH_VALUE;
            assert_eq!((spec.arity, redis_flags), (arity, flags), "{name}");
            assert_eq!(
                (spec.first_key, spec.last_key, spec.key_step),
                (first, last, step),
                "{name}"
            );
            assert_eq!(spec.group, Group::String);
            assert!(!spec.summary.is_empty(), "{name}");
        }
        let mset = &COMMANDS[9];
        let (data, spans) = crate::registry::tests::split(b"MSET a 1 b 2 c 3");
        assert_eq!(
            mset.key_positions(&resp::Args::new(&data, &spans)),
            vec![1, 3, 5]
        );
    }

    #[test]
    fn extended_options() {
        let data = b"SETkvEX10NXGET";
        let spans = vec![(0, 3), (3, 4), (4, 5), (5, 7), (7, 9), (9, 11), (11, 14)];
        let args = Args::new(data, &spans);
        let (flags, exp) = parse_ext_opts(args, 3, true).unwrap();
        assert_eq!(flags, OPT_EX | OPT_NX | OPT_GET);
        assert_eq!(exp, Some(&b"10"[..]));
        assert!(
            parse_ext_opts(args, 3, false).is_err(),
            "NX is not a GETEX option"
        );
    }
}
