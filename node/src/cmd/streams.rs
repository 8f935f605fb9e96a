//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XGROUP (CREATE,
//! SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XREADGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM, XINFO (STREAM, GROUPS, CONSUMERS, HELP) and XSETID, with Redis 7.2's
//! replies and error texts (`t_stream.c`).
//!
//! Streams are [`storage::stream::Stream`] values. Unlike other collections, a stream that
//! becomes empty is kept. XREAD and XREADGROUP with BLOCK use the generic blocking registry
//! ([`crate::blocking`]): XREAD turns each `$` into the stream's last id before blocking, so
//! that a re-run only returns newer entries; XREADGROUP delivers errors from a re-run (a
//! deleted group answers `NOGROUP`, a deleted stream `UNBLOCKED ...`).

use std::time::{Duration, Instant};

use resp::{Args, Protocol, ReplyWriter};
use storage::stream::{
    Consumer, ConsumerGroup, Fields, PendingEntry, Stream, StreamId, Trim, INVALID_ENTRIES_READ,
};
use storage::Value;

use crate::blocking::{BlockRequest, TimeoutReply};
use crate::client::BlockMode;
use crate::cmd::util::{is, parse_i64, parse_i64_or, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::notify::STREAM;
use crate::registry::{flags::*, CommandSpec, Group, Timeout};

const S: Group = Group::Stream;

/// Stream commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("xadd", -5, WRITE | DENYOOM | FAST, (1, 1, 1), S, xadd)
        .doc("Appends a new message to a stream. Creates the key if it doesn't exist.", "5.0.0"),
    CommandSpec::new("xlen", 2, READONLY | FAST, (1, 1, 1), S, xlen)
        .doc("Return the number of messages in a stream.", "5.0.0"),
    CommandSpec::new("xrange", -4, READONLY, (1, 1, 1), S, xrange)
        .doc("Returns the messages from a stream within a range of IDs.", "5.0.0"),
    CommandSpec::new("xrevrange", -4, READONLY, (1, 1, 1), S, xrevrange).doc(
        "Returns the messages from a stream within a range of IDs in reverse order.",
        "5.0.0",
    ),
    CommandSpec::new("xdel", -3, WRITE | FAST, (1, 1, 1), S, xdel)
        .doc("Returns the number of messages after removing them from a stream.", "5.0.0"),
    CommandSpec::new("xtrim", -4, WRITE, (1, 1, 1), S, xtrim)
        .doc("Deletes messages from the beginning of a stream.", "5.0.0"),
    CommandSpec::new("xread", -4, READONLY | BLOCKING | MOVABLE_KEYS, (0, 0, 0), S, xread)
        .doc(
            "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
            "5.0.0",
        )
        .keys_by(xread_keys)
        .timeout_at(Timeout::MsOption(block_option_at)),
    CommandSpec::new(
        "xreadgroup",
        -7,
        WRITE | BLOCKING | MOVABLE_KEYS,
        (0, 0, 0),
        S,
        xreadgroup,
    )
    .doc(
        "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.",
        "5.0.0",
    )
    .keys_by(xread_keys)
    .timeout_at(Timeout::MsOption(block_option_at)),
    CommandSpec::new("xack", -4, WRITE | FAST, (1, 1, 1), S, xack).doc(
        "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.",
        "5.0.0",
    ),
    CommandSpec::new("xpending", -3, READONLY, (1, 1, 1), S, xpending).doc(
        "Returns the information and entries from a stream consumer group's pending entries list.",
        "5.0.0",
    ),
    CommandSpec::new("xclaim", -6, WRITE | FAST, (1, 1, 1), S, xclaim).doc(
        "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.",
        "5.0.0",
    ),
    CommandSpec::new("xautoclaim", -6, WRITE | FAST, (1, 1, 1), S, xautoclaim).doc(
        "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.",
        "6.2.0",
    ),
    CommandSpec::new("xsetid", -3, WRITE | DENYOOM | FAST, (1, 1, 1), S, xsetid)
        .doc("An internal command for replicating stream values.", "5.0.0"),
    CommandSpec::container("xgroup", S, XGROUP_SUBCOMMANDS)
        .doc("A container for consumer groups commands.", "5.0.0"),
    CommandSpec::container("xinfo", S, XINFO_SUBCOMMANDS)
        .doc("A container for stream introspection commands.", "5.0.0"),
];

static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("create", -5, WRITE | DENYOOM, (2, 2, 1), S, xgroup_create)
        .doc("Creates a consumer group.", "5.0.0"),
    CommandSpec::new("setid", -5, WRITE, (2, 2, 1), S, xgroup_setid)
        .doc("Sets the last-delivered ID of a consumer group.", "5.0.0"),
    CommandSpec::new("destroy", 4, WRITE, (2, 2, 1), S, xgroup_destroy)
        .doc("Destroys a consumer group.", "5.0.0"),
    CommandSpec::new(
        "createconsumer",
        5,
        WRITE | DENYOOM,
        (2, 2, 1),
        S,
        xgroup_createconsumer,
    )
    .doc("Creates a consumer in a consumer group.", "6.2.0"),
    CommandSpec::new("delconsumer", 5, WRITE, (2, 2, 1), S, xgroup_delconsumer)
        .doc("Deletes a consumer from a consumer group.", "5.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, xgroup_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("consumers", 4, READONLY, (2, 2, 1), S, xinfo_consumers).doc(
        "Returns a list of the consumers in a consumer group.",
        "5.0.0",
    ),
    CommandSpec::new("groups", 3, READONLY, (2, 2, 1), S, xinfo_groups).doc(
        "Returns a list of the consumer groups of a stream.",
        "5.0.0",
    ),
    CommandSpec::new("stream", -3, READONLY, (2, 2, 1), S, xinfo_stream)
        .doc("Returns information about a stream.", "5.0.0"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, xinfo_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

// ------------------------------------------------------------------------------------------
// Shared helpers

/// The stream held by `v`, or WRONGTYPE.
fn as_stream(v: &Value) -> Result<&Stream, CmdError> {
    match v {
        Value::Stream(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// Mutable access to the stream held by `v`, or WRONGTYPE.
fn as_stream_mut(v: &mut Value) -> Result<&mut Stream, CmdError> {
    match v {
        Value::Stream(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

/// The command time in milliseconds.
fn now_ms(ctx: &Ctx<'_>) -> u64 {
    ctx.now / 1_000_000
}

/// Redis's `string2ull`: a canonical non-negative integer, else what `strtoull` accepts
/// (leading spaces, a sign, leading zeros; a negative value wraps), with no trailing text.
fn parse_u64(b: &[u8]) -> Option<u64> {
    if let Some(v) = storage::value::parse_canonical_i64(b) {
        return u64::try_from(v).ok();
    }
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits = &b[i..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's `streamGenericParseIDOrReply`: `-`, `+` (unless `strict`), `ms`, `ms-seq`, and
/// `ms-*` when `star` (the bool is then false: the sequence was not given).
fn parse_id_full(
    b: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> Result<(StreamId, bool), CmdError> {
    if b.len() > 127 || b.contains(&0) {
        return Err(invalid_id());
    }
    if b == b"-" || b == b"+" {
        if strict {
            return Err(invalid_id());
        }
        return Ok((
            if b == b"-" {
                StreamId::MIN
            } else {
                StreamId::MAX
            },
            true,
        ));
    }
    let (ms_part, seq_part) = match b.iter().position(|&c| c == b'-') {
        Some(p) => (&b[..p], Some(&b[p + 1..])),
        None => (b, None),
    };
    let ms = parse_u64(ms_part).ok_or_else(invalid_id)?;
    match seq_part {
        Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((
            StreamId::new(ms, parse_u64(s).ok_or_else(invalid_id)?),
            true,
        )),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

/// An id where `-` and `+` are allowed.
fn parse_id(b: &[u8], missing_seq: u64) -> Result<StreamId, CmdError> {
    parse_id_full(b, missing_seq, false, false).map(|r| r.0)
}

/// An id where `-` and `+` are not allowed.
fn parse_strict_id(b: &[u8]) -> Result<StreamId, CmdError> {
    parse_id_full(b, 0, true, false).map(|r| r.0)
}

/// Redis's `streamParseIntervalIDOrReply`: an id, exclusive when prefixed with `(`.
fn parse_interval(b: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if b.len() > 1 && b[0] == b'(' {
        Ok((parse_id_full(&b[1..], missing_seq, true, false)?.0, true))
    } else {
        Ok((parse_id(b, missing_seq)?, false))
    }
}

/// A start bound: exclusive ids move to the next one.
fn parse_start(b: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = parse_interval(b, 0)?;
    if ex {
        id.next()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval"))
    } else {
        Ok(id)
    }
}

/// An end bound: exclusive ids move to the previous one.
fn parse_end(b: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = parse_interval(b, u64::MAX)?;
    if ex {
        id.prev()
            .ok_or_else(|| CmdError::err("invalid end ID for the interval"))
    } else {
        Ok(id)
    }
}

fn reply_id(out: &mut ReplyWriter, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

fn reply_entry(out: &mut ReplyWriter, id: StreamId, f: Fields<'_>) {
    out.array(2);
    reply_id(out, id);
    out.array(f.len());
    for it in f.iter() {
        out.bulk(it);
    }
}

fn reply_entries(out: &mut ReplyWriter, entries: &[(StreamId, Fields<'_>)]) {
    out.array(entries.len());
    for (id, f) in entries {
        reply_entry(out, *id, *f);
    }
}

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try <CMD> HELP.`
fn subcommand_syntax(args: &Args<'_>) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&args.arg(1)[..args.arg(1).len().min(128)]),
        String::from_utf8_lossy(args.arg(0)).to_ascii_uppercase()
    ))
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn no_group_err(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::raw(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    ))
}

fn no_group_for_key(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::raw(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        lossy(group),
        lossy(key)
    ))
}

/// Looks up (or creates) `name` in `g`, refreshing its seen time.
fn touch_consumer<'g>(g: &'g mut ConsumerGroup, name: &[u8], now: u64) -> &'g mut Consumer {
    let c = g
        .consumers
        .entry(name.to_vec())
        .or_insert_with(|| Consumer::new(now));
    c.seen_time = now;
    c
}

// ------------------------------------------------------------------------------------------
// XADD / XTRIM

/// Parsed trimming options (Redis's `streamAddTrimArgs`).
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: usize,
    nomkstream: bool,
    /// The id and whether its sequence was given (XADD only; `None`: `*`).
    id: Option<(StreamId, bool)>,
}

/// Redis's `streamParseAddOrTrimArgsOrReply`; returns the options and the index where
/// parsing stopped (the id position for XADD).
fn parse_add_or_trim(args: &Args<'_>, xadd: bool) -> Result<(TrimArgs, usize), CmdError> {
    let mut t = TrimArgs {
        how: None,
        approx: false,
        limit: 0,
        nomkstream: false,
        id: None,
    };
    let argc = args.len();
    let mut limit_given = false;
    let mut i = 2;
    while i < argc {
        let moreargs = argc - 1 - i;
        let opt = args.arg(i);
        if xadd && opt == b"*" {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && moreargs > 0 {
            if t.how.is_some() {
                return Err(CmdError::err(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            t.approx = false;
            let next = args.arg(i + 1);
            if moreargs >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if moreargs >= 2 && next == b"=" {
                i += 1;
            }
            if is(opt, "maxlen") {
                let n = parse_i64(args.arg(i + 1))?;
                if n < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                t.how = Some(Trim::MaxLen(n as u64));
            } else {
                t.how = Some(Trim::MinId(parse_strict_id(args.arg(i + 1))?));
            }
            i += 1;
        } else if is(opt, "limit") && moreargs > 0 {
            let n = parse_i64(args.arg(i + 1))?;
            if n < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            t.limit = usize::try_from(n).unwrap_or(usize::MAX);
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if limit_given && t.how.is_none() {
        return Err(CmdError::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(CmdError::err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(CmdError::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else {
        t.limit = if t.approx {
            100 * storage::stream::NODE_MAX_ENTRIES
        } else {
            0
        };
    }
    Ok((t, i))
}

fn xadd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (t, idpos) = parse_add_or_trim(&args, true)?;
    let field_pos = idpos + 1;
    let nitems = args.len().saturating_sub(field_pos);
    if nitems < 2 || nitems % 2 == 1 {
        return Err(CmdError::Arity("xadd".into()));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(CmdError::err(
                "The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let now = now_ms(ctx);
    let key = args.arg(1);
    let mut g = ctx.lock(key);
    if g.get().is_none() {
        if t.nomkstream {
            drop(g);
            ctx.client.fx.nothing();
            ctx.out.null();
            return Ok(());
        }
        g.insert(Value::Stream(Box::default()), 0);
    }
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let s = as_stream_mut(&mut e.value)?;
    if s.last_id == StreamId::MAX {
        return Err(CmdError::err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let smaller = || {
        CmdError::err(
            "The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let last = s.last_id;
    let id = match t.id {
        Some((id, true)) => id,
        Some((id, false)) => {
            if last.ms == id.ms {
                if last.seq == u64::MAX {
                    return Err(smaller());
                }
                StreamId::new(last.ms, last.seq + 1)
            } else {
                id
            }
        }
        None => {
            if now > last.ms {
                StreamId::new(now, 0)
            } else {
                last.next().ok_or_else(smaller)?
            }
        }
    };
    if id <= last {
        return Err(smaller());
    }
    let items: Vec<&[u8]> = (field_pos..args.len()).map(|i| args.arg(i)).collect();
    s.append(id, &items);
    let trimmed = match t.how {
        Some(how) => s.trim(how, t.approx, t.limit),
        None => 0,
    };
    drop(g);
    ctx.notify(STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(STREAM, "xtrim", key);
    }
    if ctx.client.fx.on() {
        // Propagated with the ID it chose.
        let chosen = id.to_string();
        let v: Vec<&[u8]> = args
            .iter()
            .enumerate()
            .map(|(i, a)| if i == idpos { chosen.as_bytes() } else { a })
            .collect();
        ctx.client.fx.record(&v);
    }
    reply_id(ctx.out, id);
    Ok(())
}

fn xtrim(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (t, _) = parse_add_or_trim(&args, false)?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let s = as_stream_mut(&mut e.value)?;
    let n = match t.how {
        Some(how) => s.trim(how, t.approx, t.limit),
        None => 0,
    };
    drop(g);
    if n > 0 {
        ctx.notify(STREAM, "xtrim", args.arg(1));
    }
    ctx.out.int(n as i64);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// XLEN / XRANGE / XREVRANGE / XDEL

fn xlen(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let n = match g.get() {
        Some(e) => as_stream(&e.value)?.len(),
        None => {
            ctx.keymiss(args.arg(1));
            0
        }
    };
    drop(g);
    ctx.out.int(n as i64);
    Ok(())
}

fn xrange_generic(ctx: &mut Ctx<'_>, args: Args<'_>, rev: bool) -> CmdResult {
    let (sa, ea) = if rev { (3, 2) } else { (2, 3) };
    let start = parse_start(args.arg(sa))?;
    let end = parse_end(args.arg(ea))?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(args.arg(j), "count") && j + 1 < args.len() {
            count = parse_i64(args.arg(j + 1))?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.hit_key(false, args.arg(1));
        ctx.out.array(0);
        return Ok(());
    };
    let s = as_stream(&e.value)?;
    if count == 0 {
        drop(g);
        ctx.hit(true);
        ctx.out.null_array();
        return Ok(());
    }
    let n = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
    let entries = s.range(start, end, rev, n);
    reply_entries(ctx.out, &entries);
    drop(g);
    ctx.hit(true);
    Ok(())
}

fn xrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    xrange_generic(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    xrange_generic(ctx, args, true)
}

fn xdel(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let s = as_stream_mut(&mut e.value)?;
    let ids = (2..args.len())
        .map(|j| parse_strict_id(args.arg(j)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut deleted = 0;
    for id in ids {
        if s.delete(id) {
            if id > s.max_deleted_id {
                s.max_deleted_id = id;
            }
            deleted += 1;
        }
    }
    drop(g);
    if deleted > 0 {
        ctx.notify(STREAM, "xdel", args.arg(1));
    }
    ctx.out.int(deleted);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// XREAD / XREADGROUP

/// What walking the options of XREAD / XREADGROUP finds (as Redis's `xreadGetKeys` walks
/// them: up to STREAMS, stopping at anything that is not an option).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct XreadOptions {
    /// Position of BLOCK's milliseconds, when the command blocks.
    pub block: Option<usize>,
    /// Position of STREAMS.
    pub streams: Option<usize>,
}

/// Where XREAD's or XREADGROUP's `BLOCK <ms>` value is, if it has one.
fn block_option_at(args: Args<'_>) -> Option<usize> {
    xread_options(args.len(), |i| args.arg(i)).block
}

/// Walks the options of an XREAD / XREADGROUP of `argc` arguments (`arg(i)` is the i-th).
pub fn xread_options<'a>(argc: usize, arg: impl Fn(usize) -> &'a [u8]) -> XreadOptions {
    let mut found = XreadOptions::default();
    let mut i = 1;
    while i < argc {
        let a = arg(i);
        if is(a, "block") || is(a, "count") {
            if is(a, "block") && i + 1 < argc {
                found.block = Some(i + 1);
            }
            i += 1;
        } else if is(a, "group") {
            i += 2;
        } else if is(a, "noack") {
        } else if is(a, "streams") {
            found.streams = Some(i);
            break;
        } else {
            break;
        }
        i += 1;
    }
    found
}

/// Key positions of XREAD / XREADGROUP (Redis's `xreadGetKeys`).
fn xread_keys(args: &Args<'_>) -> Vec<usize> {
    let argc = args.len();
    let Some(p) = xread_options(argc, |i| args.arg(i)).streams else {
        return Vec::new();
    };
    let num = argc - p - 1;
    if num == 0 || !num.is_multiple_of(2) {
        return Vec::new();
    }
    (p + 1..p + 1 + num / 2).collect()
}

/// What to serve from one stream.
#[derive(Clone, Copy)]
enum Serve {
    /// Nothing (missing stream or no newer entries).
    Nothing,
    /// Entries after this id (XREAD, or XREADGROUP `>` after the group's last id).
    After(StreamId),
    /// The consumer's pending entries after this id (XREADGROUP with an id).
    History(StreamId),
}

fn xread(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    xread_generic(ctx, args, false)
}

fn xreadgroup(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    xread_generic(ctx, args, true)?;
    if ctx.client.fx.on() && ctx.client.block_request.is_none() {
        // Served (or run) without blocking: propagated without BLOCK <ms>, which replays
        // to the same reads of the group and the same consumers created.
        let mut v: Vec<&[u8]> = Vec::with_capacity(args.len());
        let mut i = 0;
        let mut streams = false;
        while i < args.len() {
            let a = args.arg(i);
            if !streams && is(a, "block") {
                i += 2;
                continue;
            }
            streams |= is(a, "streams");
            v.push(a);
            i += 1;
        }
        ctx.client.fx.record(&v);
    }
    Ok(())
}

fn xread_generic(ctx: &mut Ctx<'_>, args: Args<'_>, group_mode: bool) -> CmdResult {
    let argc = args.len();
    let mut timeout: Option<i64> = None;
    let mut count: usize = 0;
    let mut streams_arg = 0;
    let mut streams_count = 0;
    let mut noack = false;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut i = 1;
    while i < argc {
        let moreargs = argc - i - 1;
        let o = args.arg(i);
        if is(o, "block") && moreargs > 0 {
            i += 1;
            let t = parse_i64_or(args.arg(i), "timeout is not an integer or out of range")?;
            if t < 0 {
                return Err(CmdError::err("timeout is negative"));
            }
            timeout = Some(t);
        } else if is(o, "count") && moreargs > 0 {
            i += 1;
            let n = parse_i64(args.arg(i))?;
            count = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        } else if is(o, "streams") && moreargs > 0 {
            streams_arg = i + 1;
            streams_count = argc - streams_arg;
            if streams_count % 2 != 0 {
                return Err(CmdError::err(format!(
                    "Unbalanced '{}' list of streams: for each stream key an ID or '{}' must be specified.",
                    if group_mode { "xreadgroup" } else { "xread" },
                    if group_mode { '>' } else { '$' }
                )));
            }
            streams_count /= 2;
            break;
        } else if is(o, "group") && moreargs >= 2 {
            if !group_mode {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((args.arg(i + 1), args.arg(i + 2)));
            i += 2;
        } else if is(o, "noack") {
            if !group_mode {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if streams_arg == 0 {
        return Err(CmdError::Syntax);
    }
    if group_mode && group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    let retry = ctx.client.block_mode == BlockMode::Retry;
    let db = ctx.db();
    let now = now_ms(ctx);
    let keys: Vec<&[u8]> = (0..streams_count)
        .map(|k| args.arg(streams_arg + k))
        .collect();
    let mut g = ctx.lock_keys(keys.iter().copied());

    // Resolve ids (and `$`) and check types and groups, stream by stream, as Redis.
    let mut plan = Vec::with_capacity(streams_count);
    let mut dollar_ids: Vec<Option<StreamId>> = Vec::with_capacity(streams_count);
    // Streams that do not exist: Redis looks each up twice (resolving ids, then serving),
    // so each gets two `keymiss` events.
    let mut missing: Vec<&[u8]> = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let idarg = args.arg(streams_arg + streams_count + k);
        let s = match g.get(db, key) {
            Some(e) => match as_stream(&e.value) {
                Ok(s) => Some(s),
                Err(err) => {
                    if retry && group_mode {
                        return Err(CmdError::raw("UNBLOCKED the stream key no longer exists"));
                    }
                    return Err(err);
                }
            },
            None => None,
        };
        if let Some((gname, _)) = group {
            let found = s.and_then(|s| s.groups.get(gname));
            if found.is_none() {
                if retry && s.is_none() {
                    return Err(CmdError::raw("UNBLOCKED the stream key no longer exists"));
                }
                return Err(CmdError::raw(format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    lossy(key),
                    lossy(gname)
                )));
            }
        }
        let mut dollar = None;
        let gt = if idarg == b"$" {
            if group_mode {
                return Err(CmdError::err(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            let id = s.map_or(StreamId::MIN, |s| s.last_id);
            dollar = Some(id);
            Some(id)
        } else if idarg == b">" {
            if !group_mode {
                return Err(CmdError::err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            None
        } else {
            Some(parse_strict_id(idarg)?)
        };
        dollar_ids.push(dollar);
        if s.is_none() {
            missing.push(key);
        }
        let serve = match (s, gt) {
            (None, _) => Serve::Nothing,
            (Some(_), Some(id)) if group_mode => Serve::History(id),
            (Some(s), Some(id)) => {
                let maxid = s.last_entry_id().unwrap_or(StreamId::MIN);
                if maxid > id {
                    Serve::After(id)
                } else {
                    Serve::Nothing
                }
            }
            (Some(s), None) => {
                let last = group
                    .and_then(|(gn, _)| s.groups.get(gn))
                    .map_or(StreamId::MIN, |g| g.last_id);
                let maxid = s.last_entry_id().unwrap_or(StreamId::MIN);
                if maxid > last {
                    Serve::After(last)
                } else {
                    Serve::Nothing
                }
            }
        };
        plan.push(serve);
    }

    // Consumers created by serving (as Redis 7.0: only where something is served).
    let mut created: Vec<&[u8]> = Vec::new();
    let served = plan.iter().filter(|p| !matches!(p, Serve::Nothing)).count();
    if served > 0 {
        let resp3 = ctx.out.protocol() == Protocol::Resp3;
        if resp3 {
            ctx.out.map(served);
        } else {
            ctx.out.array(served);
        }
        for (k, p) in plan.iter().enumerate() {
            let key = keys[k];
            if matches!(p, Serve::Nothing) {
                continue;
            }
            if !resp3 {
                ctx.out.array(2);
            }
            ctx.out.bulk(key);
            let Some(e) = g.get(db, key) else {
                ctx.out.array(0);
                continue;
            };
            let s = as_stream_mut(&mut e.value)?;
            if let Some((gname, cname)) = group {
                if s.groups
                    .get(gname)
                    .is_some_and(|g| !g.consumers.contains_key(cname))
                {
                    created.push(key);
                }
            }
            match (*p, group) {
                (Serve::After(after), None) => {
                    let start = after.next().unwrap_or(StreamId::MAX);
                    let entries = s.range(start, StreamId::MAX, false, count);
                    reply_entries(ctx.out, &entries);
                }
                (Serve::After(after), Some((gname, cname))) => {
                    serve_group_new(ctx.out, s, gname, cname, after, count, noack, now);
                }
                (Serve::History(after), Some((gname, cname))) => {
                    serve_group_history(ctx.out, s, gname, cname, after, count, now);
                }
                _ => ctx.out.array(0),
            }
        }
        drop(g);
        report_lookups(ctx, &missing, &created);
        ctx.hit(true);
        return Ok(());
    }
    drop(g);
    report_lookups(ctx, &missing, &created);
    ctx.hit(false);
    let Some(ms) = timeout else {
        ctx.out.null_array();
        return Ok(());
    };
    let deadline = (ms > 0).then(|| {
        let ms = u64::try_from(ms).unwrap_or(0).min(365 * 24 * 3600 * 1000);
        Instant::now() + Duration::from_millis(ms)
    });
    let rewrite = dollar_ids.iter().any(Option::is_some).then(|| {
        let mut v: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
        for (k, d) in dollar_ids.iter().enumerate() {
            if let Some(id) = d {
                v[streams_arg + streams_count + k] = id.to_string().into_bytes();
            }
        }
        v
    });
    ctx.block_with(BlockRequest {
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        deadline,
        on_timeout: TimeoutReply::NullArray,
        rewrite,
        serve_errors: group_mode,
    });
    Ok(())
}

/// XREAD/XREADGROUP's events in Redis's order: per stream key, the misses of its two
/// lookups, then the consumers created.
fn report_lookups(ctx: &Ctx<'_>, missing: &[&[u8]], created: &[&[u8]]) {
    for key in missing {
        ctx.keymiss(key);
    }
    for key in missing {
        ctx.keymiss(key);
    }
    for key in created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
}

/// Delivers entries after `after` to consumer `cname` of group `gname` (Redis's
/// `streamReplyWithRange` with a group): advances the group's last id and read counter and
/// records the entries as pending (unless `noack`).
#[allow(clippy::too_many_arguments)]
fn serve_group_new(
    out: &mut ReplyWriter,
    s: &mut Stream,
    gname: &[u8],
    cname: &[u8],
    after: StreamId,
    count: usize,
    noack: bool,
    now: u64,
) {
    let Some(mut grp) = s.groups.remove(gname) else {
        out.array(0);
        return;
    };
    touch_consumer(&mut grp, cname, now);
    let start = after.next().unwrap_or(StreamId::MAX);
    let ids: Vec<StreamId> = {
        let entries = s.range(start, StreamId::MAX, false, count);
        out.array(entries.len());
        for (id, f) in &entries {
            reply_entry(out, *id, *f);
        }
        entries.iter().map(|e| e.0).collect()
    };
    for id in &ids {
        let id = *id;
        if id > grp.last_id {
            if grp.entries_read != INVALID_ENTRIES_READ && !s.has_tombstones_from(id) {
                grp.entries_read = grp.entries_read.saturating_add(1);
            } else if s.entries_added != 0 {
                grp.entries_read = s.estimate_distance(id);
            }
            grp.last_id = id;
        }
        if !noack {
            deliver(&mut grp, id, cname, now);
        }
    }
    if !ids.is_empty() {
        if let Some(c) = grp.consumers.get_mut(cname) {
            c.active_time = now as i64;
        }
    }
    s.groups.insert(gname.to_vec(), grp);
}

/// Records `id` as delivered to `cname` now (a new PEL entry, or one moved from another
/// consumer with its delivery count reset).
fn deliver(grp: &mut ConsumerGroup, id: StreamId, cname: &[u8], now: u64) {
    if let Some(p) = grp.pel.get_mut(&id) {
        let old = std::mem::replace(&mut p.consumer, cname.to_vec());
        p.delivery_time = now;
        p.delivery_count = 1;
        if let Some(c) = grp.consumers.get_mut(&old) {
            c.pel.remove(&id);
        }
    } else {
        grp.pel.insert(
            id,
            PendingEntry {
                consumer: cname.to_vec(),
                delivery_time: now,
                delivery_count: 1,
            },
        );
    }
    if let Some(c) = grp.consumers.get_mut(cname) {
        c.pel.insert(id);
    }
}

/// Replies with the consumer's pending entries after `after` (Redis's
/// `streamReplyWithRangeFromConsumerPEL`); a deleted entry comes as `[id, nil]`.
fn serve_group_history(
    out: &mut ReplyWriter,
    s: &mut Stream,
    gname: &[u8],
    cname: &[u8],
    after: StreamId,
    count: usize,
    now: u64,
) {
    let Some(mut grp) = s.groups.remove(gname) else {
        out.array(0);
        return;
    };
    touch_consumer(&mut grp, cname, now);
    let limit = if count == 0 { usize::MAX } else { count };
    let ids: Vec<StreamId> = match after.next() {
        Some(start) => grp
            .consumers
            .get(cname)
            .map(|c| c.pel.range(start..).take(limit).copied().collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    out.array(ids.len());
    for id in ids {
        match s.get(id) {
            Some(f) => {
                reply_entry(out, id, f);
                if let Some(p) = grp.pel.get_mut(&id) {
                    p.delivery_time = now;
                    p.delivery_count += 1;
                }
            }
            None => {
                out.array(2);
                reply_id(out, id);
                out.null_array();
            }
        }
    }
    s.groups.insert(gname.to_vec(), grp);
}

// ------------------------------------------------------------------------------------------
// XACK / XPENDING / XCLAIM / XAUTOCLAIM

fn xack(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let s = as_stream_mut(&mut e.value)?;
    let Some(grp) = s.groups.get_mut(args.arg(2)) else {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    };
    let ids = (3..args.len())
        .map(|j| parse_strict_id(args.arg(j)))
        .collect::<Result<Vec<_>, _>>()?;
    let acked = ids.into_iter().filter(|id| grp.ack(*id)).count();
    drop(g);
    ctx.out.int(acked as i64);
    Ok(())
}

fn xpending(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let argc = args.len();
    let justinfo = argc == 3;
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut minidle: i64 = 0;
    let (mut start, mut end, mut count) = (StreamId::MIN, StreamId::MAX, 0usize);
    let mut consumer: Option<&[u8]> = None;
    if argc >= 6 {
        let mut startidx = 3;
        if is(args.arg(3), "idle") {
            minidle = parse_i64(args.arg(4))?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            startidx += 2;
        }
        let c = parse_i64(args.arg(startidx + 2))?;
        count = usize::try_from(c.max(0)).unwrap_or(usize::MAX);
        start = parse_start(args.arg(startidx))?;
        end = parse_end(args.arg(startidx + 1))?;
        if startidx + 3 < argc {
            consumer = Some(args.arg(startidx + 3));
        }
    }
    let (key, gname) = (args.arg(1), args.arg(2));
    let now = now_ms(ctx);
    let mut g = ctx.lock(key);
    let s = match g.get() {
        Some(e) => as_stream(&e.value)?,
        None => return Err(no_group_err(key, gname)),
    };
    let Some(grp) = s.groups.get(gname) else {
        return Err(no_group_err(key, gname));
    };
    let out = &mut *ctx.out;
    if justinfo {
        out.array(4);
        if grp.pel.is_empty() {
            out.int(0);
            out.null();
            out.null();
            out.null_array();
        } else {
            out.int(grp.pel.len() as i64);
            let first = grp.pel.keys().next().copied().unwrap_or_default();
            let last = grp.pel.keys().next_back().copied().unwrap_or_default();
            reply_id(out, first);
            reply_id(out, last);
            let with: Vec<(&Vec<u8>, &Consumer)> = grp
                .consumers
                .iter()
                .filter(|(_, c)| !c.pel.is_empty())
                .collect();
            out.array(with.len());
            for (name, c) in with {
                out.array(2);
                out.bulk(name);
                out.bulk_int(c.pel.len() as i64);
            }
        }
        drop(g);
        return Ok(());
    }
    let mut rows: Vec<(StreamId, &PendingEntry)> = Vec::new();
    if start <= end && count > 0 {
        match consumer {
            Some(cname) => {
                if let Some(c) = grp.consumers.get(cname) {
                    for id in c.pel.range(start..=end) {
                        if rows.len() >= count {
                            break;
                        }
                        if let Some(p) = grp.pel.get(id) {
                            if minidle > 0 && (now.saturating_sub(p.delivery_time) as i64) < minidle
                            {
                                continue;
                            }
                            rows.push((*id, p));
                        }
                    }
                }
            }
            None => {
                for (id, p) in grp.pel.range(start..=end) {
                    if rows.len() >= count {
                        break;
                    }
                    if minidle > 0 && (now.saturating_sub(p.delivery_time) as i64) < minidle {
                        continue;
                    }
                    rows.push((*id, p));
                }
            }
        }
    }
    out.array(rows.len());
    for (id, p) in rows {
        out.array(4);
        reply_id(out, id);
        out.bulk(&p.consumer);
        out.int(now.saturating_sub(p.delivery_time) as i64);
        out.int(i64::try_from(p.delivery_count).unwrap_or(i64::MAX));
    }
    drop(g);
    Ok(())
}

/// Moves pending entry `id` to consumer `cname` (created when missing) with the given
/// delivery time and delivery-count rule (RETRYCOUNT, else +1 unless JUSTID).
fn claim_one(
    grp: &mut ConsumerGroup,
    id: StreamId,
    cname: &[u8],
    delivery_time: u64,
    retrycount: Option<u64>,
    justid: bool,
    now: u64,
) {
    if !grp.consumers.contains_key(cname) {
        grp.consumers.insert(cname.to_vec(), Consumer::new(now));
    }
    let Some(p) = grp.pel.get_mut(&id) else {
        return;
    };
    let old = std::mem::replace(&mut p.consumer, cname.to_vec());
    p.delivery_time = delivery_time;
    match retrycount {
        Some(n) => p.delivery_count = n,
        None if !justid => p.delivery_count += 1,
        None => {}
    }
    if old != cname {
        if let Some(c) = grp.consumers.get_mut(&old) {
            c.pel.remove(&id);
        }
    }
    if let Some(c) = grp.consumers.get_mut(cname) {
        c.pel.insert(id);
        c.active_time = now as i64;
    }
}

fn xclaim(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, gname, cname) = (args.arg(1), args.arg(2), args.arg(3));
    let now = now_ms(ctx);
    let mut g = ctx.lock(key);
    let s = match g.get() {
        Some(e) => as_stream_mut(&mut e.value)?,
        None => return Err(no_group_err(key, gname)),
    };
    if !s.groups.contains_key(gname) {
        return Err(no_group_err(key, gname));
    }
    let minidle = parse_i64_or(args.arg(4), "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        match parse_strict_id(args.arg(j)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let (mut force, mut justid) = (false, false);
    let mut deliverytime: Option<i64> = None;
    let mut retrycount: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    let nowi = now as i64;
    while j < args.len() {
        let moreargs = args.len() - 1 - j;
        let opt = args.arg(j);
        if is(opt, "force") {
            force = true;
        } else if is(opt, "justid") {
            justid = true;
        } else if is(opt, "idle") && moreargs > 0 {
            j += 1;
            let v = parse_i64_or(args.arg(j), "Invalid IDLE option argument for XCLAIM")?;
            deliverytime = Some(nowi.saturating_sub(v));
        } else if is(opt, "time") && moreargs > 0 {
            j += 1;
            deliverytime = Some(parse_i64_or(
                args.arg(j),
                "Invalid TIME option argument for XCLAIM",
            )?);
        } else if is(opt, "retrycount") && moreargs > 0 {
            j += 1;
            retrycount = Some(parse_i64_or(
                args.arg(j),
                "Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if is(opt, "lastid") && moreargs > 0 {
            j += 1;
            last_id = parse_strict_id(args.arg(j))?;
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized XCLAIM option '{}'",
                lossy(opt)
            )));
        }
        j += 1;
    }
    let dt = match deliverytime {
        Some(d) if d >= 0 && d <= nowi => d as u64,
        _ => now,
    };
    // A negative RETRYCOUNT is ignored, as Redis's `retrycount >= 0` test.
    let retrycount = retrycount.and_then(|r| u64::try_from(r).ok());
    let Some(mut grp) = s.groups.remove(gname) else {
        return Err(no_group_err(key, gname));
    };
    let had_consumer = grp.consumers.contains_key(cname);
    if last_id > grp.last_id {
        grp.last_id = last_id;
    }
    let mut claimed: Vec<StreamId> = Vec::new();
    for id in ids {
        let exists = s.contains(id);
        if !exists {
            grp.ack(id);
            continue;
        }
        let mut fresh = false;
        if force && !grp.pel.contains_key(&id) {
            grp.pel.insert(
                id,
                PendingEntry {
                    consumer: Vec::new(),
                    delivery_time: now,
                    delivery_count: 1,
                },
            );
            fresh = true;
        }
        let Some(p) = grp.pel.get(&id) else {
            continue;
        };
        if !fresh && minidle > 0 && (nowi - p.delivery_time as i64) < minidle {
            continue;
        }
        claim_one(&mut grp, id, cname, dt, retrycount, justid, now);
        claimed.push(id);
    }
    if let Some(c) = grp.consumers.get_mut(cname) {
        c.seen_time = now;
    }
    let out = &mut *ctx.out;
    out.array(claimed.len());
    for id in claimed {
        if justid {
            reply_id(out, id);
        } else if let Some(f) = s.get(id) {
            reply_entry(out, id, f);
        } else {
            out.null();
        }
    }
    let created = !had_consumer && grp.consumers.contains_key(cname);
    s.groups.insert(gname.to_vec(), grp);
    drop(g);
    if created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
    Ok(())
}

fn xautoclaim(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, gname, cname) = (args.arg(1), args.arg(2), args.arg(3));
    let minidle =
        parse_i64_or(args.arg(4), "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = parse_start(args.arg(5))?;
    let mut count: usize = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let moreargs = args.len() - 1 - j;
        let opt = args.arg(j);
        if is(opt, "count") && moreargs > 0 {
            let n = parse_i64_or(args.arg(j + 1), "COUNT must be > 0")?;
            if !(1..=i64::MAX / 16).contains(&n) {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
            j += 1;
        } else if is(opt, "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = now_ms(ctx);
    let nowi = now as i64;
    let mut g = ctx.lock(key);
    let s = match g.get() {
        Some(e) => as_stream_mut(&mut e.value)?,
        None => return Err(no_group_err(key, gname)),
    };
    let Some(mut grp) = s.groups.remove(gname) else {
        return Err(no_group_err(key, gname));
    };
    let had_consumer = grp.consumers.contains_key(cname);
    let mut attempts = count.saturating_mul(10);
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut cursor = Some(start);
    while let Some(cur) = cursor {
        if attempts == 0 || count == 0 {
            break;
        }
        attempts -= 1;
        let Some((&id, p)) = grp.pel.range(cur..).next() else {
            cursor = None;
            break;
        };
        cursor = id.next();
        if !s.contains(id) {
            grp.ack(id);
            deleted.push(id);
            count -= 1;
            continue;
        }
        if minidle > 0 && (nowi - p.delivery_time as i64) < minidle {
            continue;
        }
        claim_one(&mut grp, id, cname, now, None, justid, now);
        claimed.push(id);
        count -= 1;
    }
    let next = cursor
        .and_then(|c| grp.pel.range(c..).next().map(|(id, _)| *id))
        .unwrap_or(StreamId::MIN);
    if let Some(c) = grp.consumers.get_mut(cname) {
        c.seen_time = now;
    }
    let out = &mut *ctx.out;
    out.array(3);
    reply_id(out, next);
    out.array(claimed.len());
    for id in claimed {
        if justid {
            reply_id(out, id);
        } else if let Some(f) = s.get(id) {
            reply_entry(out, id, f);
        } else {
            out.null();
        }
    }
    out.array(deleted.len());
    for id in deleted {
        reply_id(out, id);
    }
    let created = !had_consumer && grp.consumers.contains_key(cname);
    s.groups.insert(gname.to_vec(), grp);
    drop(g);
    if created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// XGROUP

/// Parses `[MKSTREAM] [ENTRIESREAD n]` of CREATE (from index 5).
fn parse_entries_read(b: &[u8]) -> Result<i64, CmdError> {
    let n = parse_i64(b)?;
    if n < 0 && n != INVALID_ENTRIES_READ {
        return Err(CmdError::err(
            "value for ENTRIESREAD must be positive or -1",
        ));
    }
    Ok(n)
}

/// The common XGROUP checks: the stream must exist (unless `mkstream`).
fn missing_key_err() -> CmdError {
    CmdError::err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
}

fn xgroup_create(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < args.len() {
        if is(args.arg(i), "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(args.arg(i), "entriesread") && i + 1 < args.len() {
            entries_read = parse_entries_read(args.arg(i + 1))?;
            i += 2;
        } else {
            return Err(subcommand_syntax(&args));
        }
    }
    let (key, gname) = (args.arg(2), args.arg(3));
    let mut g = ctx.lock(key);
    let exists = match g.get() {
        Some(e) => {
            as_stream(&e.value)?;
            true
        }
        None => false,
    };
    if !exists && !mkstream {
        return Err(missing_key_err());
    }
    if args.len() > 8 {
        return Err(subcommand_syntax(&args));
    }
    let idarg = args.arg(4);
    let id = if idarg == b"$" {
        match g.get() {
            Some(e) => as_stream(&e.value)?.last_id,
            None => StreamId::MIN,
        }
    } else {
        parse_strict_id(idarg)?
    };
    if !exists {
        g.insert(Value::Stream(Box::default()), 0);
    }
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let s = as_stream_mut(&mut e.value)?;
    if s.groups.contains_key(gname) {
        return Err(CmdError::raw(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    s.groups
        .insert(gname.to_vec(), ConsumerGroup::new(id, entries_read));
    drop(g);
    ctx.notify(STREAM, "xgroup-create", key);
    ctx.out.ok();
    Ok(())
}

fn xgroup_setid(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut entries_read = INVALID_ENTRIES_READ;
    if args.len() == 7 {
        if is(args.arg(5), "entriesread") {
            entries_read = parse_entries_read(args.arg(6))?;
        } else {
            return Err(subcommand_syntax(&args));
        }
    } else if args.len() != 5 {
        return Err(subcommand_syntax(&args));
    }
    let (key, gname) = (args.arg(2), args.arg(3));
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(missing_key_err());
    };
    let s = as_stream_mut(&mut e.value)?;
    if !s.groups.contains_key(gname) {
        return Err(no_group_for_key(key, gname));
    }
    let idarg = args.arg(4);
    let id = if idarg == b"$" {
        s.last_id
    } else {
        parse_id(idarg, 0)?
    };
    if let Some(grp) = s.groups.get_mut(gname) {
        grp.last_id = id;
        grp.entries_read = entries_read;
    }
    drop(g);
    ctx.notify(STREAM, "xgroup-setid", key);
    ctx.out.ok();
    Ok(())
}

fn xgroup_destroy(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, gname) = (args.arg(2), args.arg(3));
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(missing_key_err());
    };
    let s = as_stream_mut(&mut e.value)?;
    let removed = s.groups.remove(gname).is_some();
    drop(g);
    if removed {
        ctx.notify(STREAM, "xgroup-destroy", key);
    }
    ctx.out.int(i64::from(removed));
    Ok(())
}

fn xgroup_createconsumer(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, gname, cname) = (args.arg(2), args.arg(3), args.arg(4));
    let now = now_ms(ctx);
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(missing_key_err());
    };
    let s = as_stream_mut(&mut e.value)?;
    let Some(grp) = s.groups.get_mut(gname) else {
        return Err(no_group_for_key(key, gname));
    };
    let created = if grp.consumers.contains_key(cname) {
        false
    } else {
        grp.consumers.insert(cname.to_vec(), Consumer::new(now));
        true
    };
    drop(g);
    if created {
        ctx.notify(STREAM, "xgroup-createconsumer", key);
    }
    ctx.out.int(i64::from(created));
    Ok(())
}

fn xgroup_delconsumer(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, gname, cname) = (args.arg(2), args.arg(3), args.arg(4));
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(missing_key_err());
    };
    let s = as_stream_mut(&mut e.value)?;
    let Some(grp) = s.groups.get_mut(gname) else {
        return Err(no_group_for_key(key, gname));
    };
    let mut existed = false;
    let pending = match grp.consumers.remove(cname) {
        Some(c) => {
            existed = true;
            for id in &c.pel {
                grp.pel.remove(id);
            }
            c.pel.len()
        }
        None => 0,
    };
    drop(g);
    if existed {
        ctx.notify(STREAM, "xgroup-delconsumer", key);
    }
    ctx.out.int(pending as i64);
    Ok(())
}

fn xgroup_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    const LINES: &[&str] = &[
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
    ];
    reply_help(ctx.out, args.arg(0), LINES);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// XINFO

fn xinfo_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    const LINES: &[&str] = &[
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ];
    reply_help(ctx.out, args.arg(0), LINES);
    Ok(())
}

fn reply_opt_int(out: &mut ReplyWriter, v: Option<i64>) {
    match v {
        Some(v) => out.int(v),
        None => out.null(),
    }
}

fn entries_read_of(g: &ConsumerGroup) -> Option<i64> {
    (g.entries_read != INVALID_ENTRIES_READ).then_some(g.entries_read)
}

fn xinfo_consumers(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, gname) = (args.arg(2), args.arg(3));
    let now = now_ms(ctx) as i64;
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let s = as_stream(&e.value)?;
    let Some(grp) = s.groups.get(gname) else {
        return Err(no_group_for_key(key, gname));
    };
    let out = &mut *ctx.out;
    out.array(grp.consumers.len());
    for (name, c) in &grp.consumers {
        out.map(4);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(c.pel.len() as i64);
        out.bulk(b"idle");
        out.int((now - c.seen_time as i64).max(0));
        out.bulk(b"inactive");
        out.int(if c.active_time == -1 {
            -1
        } else {
            (now - c.active_time).max(0)
        });
    }
    drop(g);
    Ok(())
}

fn xinfo_groups(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(2);
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let s = as_stream(&e.value)?;
    let out = &mut *ctx.out;
    out.array(s.groups.len());
    for (name, grp) in &s.groups {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(grp.consumers.len() as i64);
        out.bulk(b"pending");
        out.int(grp.pel.len() as i64);
        out.bulk(b"last-delivered-id");
        reply_id(out, grp.last_id);
        out.bulk(b"entries-read");
        reply_opt_int(out, entries_read_of(grp));
        out.bulk(b"lag");
        reply_opt_int(out, s.group_lag(grp));
    }
    drop(g);
    Ok(())
}

fn xinfo_stream(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(2);
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let s = as_stream(&e.value)?;
    let argc = args.len();
    let mut full = false;
    let mut count: usize = 10;
    if argc > 3 {
        if argc > 6 || !is(args.arg(3), "full") {
            return Err(subcommand_syntax(&args));
        }
        full = true;
        if argc == 6 {
            if !is(args.arg(4), "count") {
                return Err(subcommand_syntax(&args));
            }
            let n = parse_i64(args.arg(5))?;
            count = if n < 0 {
                10
            } else {
                usize::try_from(n).unwrap_or(usize::MAX)
            };
        } else if argc != 4 {
            return Err(subcommand_syntax(&args));
        }
    }
    let out = &mut *ctx.out;
    let keys = s.block_count();
    out.map(if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(s.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(keys as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(if keys == 0 { 1 } else { (keys * 2) as i64 });
    out.bulk(b"last-generated-id");
    reply_id(out, s.last_id);
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, s.max_deleted_id);
    out.bulk(b"entries-added");
    out.int(i64::try_from(s.entries_added).unwrap_or(i64::MAX));
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, s.first_id().unwrap_or_default());
    if !full {
        out.bulk(b"groups");
        out.int(s.groups.len() as i64);
        let first = s.range(StreamId::MIN, StreamId::MAX, false, 1);
        out.bulk(b"first-entry");
        match first.first() {
            Some((id, f)) => reply_entry(out, *id, *f),
            None => out.null(),
        }
        let last = s.range(StreamId::MIN, StreamId::MAX, true, 1);
        out.bulk(b"last-entry");
        match last.first() {
            Some((id, f)) => reply_entry(out, *id, *f),
            None => out.null(),
        }
        drop(g);
        return Ok(());
    }
    let limit = if count == 0 { usize::MAX } else { count };
    out.bulk(b"entries");
    let entries = s.range(StreamId::MIN, StreamId::MAX, false, count);
    reply_entries(out, &entries);
    out.bulk(b"groups");
    out.array(s.groups.len());
    for (name, grp) in &s.groups {
        out.map(7);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"last-delivered-id");
        reply_id(out, grp.last_id);
        out.bulk(b"entries-read");
        reply_opt_int(out, entries_read_of(grp));
        out.bulk(b"lag");
        reply_opt_int(out, s.group_lag(grp));
        out.bulk(b"pel-count");
        out.int(grp.pel.len() as i64);
        out.bulk(b"pending");
        let pel: Vec<_> = grp.pel.iter().take(limit).collect();
        out.array(pel.len());
        for (id, p) in pel {
            out.array(4);
            reply_id(out, *id);
            out.bulk(&p.consumer);
            out.int(p.delivery_time as i64);
            out.int(i64::try_from(p.delivery_count).unwrap_or(i64::MAX));
        }
        out.bulk(b"consumers");
        out.array(grp.consumers.len());
        for (cname, c) in &grp.consumers {
            out.map(5);
            out.bulk(b"name");
            out.bulk(cname);
            out.bulk(b"seen-time");
            out.int(c.seen_time as i64);
            out.bulk(b"active-time");
            out.int(c.active_time);
            out.bulk(b"pel-count");
            out.int(c.pel.len() as i64);
            out.bulk(b"pending");
            let ids: Vec<_> = c.pel.iter().take(limit).collect();
            out.array(ids.len());
            for id in ids {
                out.array(3);
                reply_id(out, *id);
                let p = grp.pel.get(id);
                out.int(p.map_or(0, |p| p.delivery_time as i64));
                out.int(p.map_or(0, |p| i64::try_from(p.delivery_count).unwrap_or(i64::MAX)));
            }
        }
    }
    drop(g);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// XSETID

fn xsetid(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let id = parse_strict_id(args.arg(2))?;
    let mut entries_added: Option<u64> = None;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let moreargs = args.len() - 1 - i;
        let opt = args.arg(i);
        if is(opt, "entriesadded") && moreargs > 0 {
            let n = parse_i64(args.arg(i + 1))?;
            if n < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            entries_added = Some(n as u64);
            i += 2;
        } else if is(opt, "maxdeletedid") && moreargs > 0 {
            max_xdel = parse_strict_id(args.arg(i + 1))?;
            if id < max_xdel {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        return Err(CmdError::NoSuchKey);
    };
    let s = as_stream_mut(&mut e.value)?;
    if id < s.max_deleted_id {
        return Err(CmdError::err(
            "The ID specified in XSETID is smaller than current max_deleted_entry_id",
        ));
    }
    if !s.is_empty() {
        let maxid = s.last_entry_id().unwrap_or_default();
        if id < maxid {
            return Err(CmdError::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if let Some(n) = entries_added {
            if (s.len() as u64) > n {
                return Err(CmdError::err(
                    "The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if !max_xdel.is_zero() {
        s.max_deleted_id = max_xdel;
    }
    drop(g);
    ctx.notify(STREAM, "xsetid", args.arg(1));
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xread_option_walk() {
        let at = |s: &str| {
            let args: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
            xread_options(args.len(), |i| args[i])
        };
        let found = |block, streams| XreadOptions { block, streams };
        assert_eq!(
            at("XREAD COUNT 2 BLOCK 100 STREAMS s $"),
            found(Some(4), Some(5))
        );
        assert_eq!(
            at("XREADGROUP GROUP g c BLOCK 0 STREAMS s >"),
            found(Some(5), Some(6))
        );
        assert_eq!(at("XREAD STREAMS block 0"), found(None, Some(1)));
        assert_eq!(
            at("XREADGROUP GROUP block c STREAMS s >"),
            found(None, Some(4))
        );
        assert_eq!(at("XREAD COUNT 1 STREAMS s 0"), found(None, Some(3)));
        assert_eq!(
            at("XREADGROUP GROUP g c NOACK STREAMS s >"),
            found(None, Some(5))
        );
        assert_eq!(at("XREAD BLOCK"), found(None, None));
    }
}
