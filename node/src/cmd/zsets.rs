//! Sorted-set commands: ZADD, ZINCRBY, ZSCORE, ZMSCORE, ZCARD, ZRANK, ZREVRANK, ZCOUNT,
//! ZLEXCOUNT, ZRANGE and its legacy forms (ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE,
//! ZRANGEBYLEX, ZREVRANGEBYLEX), ZRANGESTORE, ZREM, ZREMRANGEBYRANK/BYSCORE/BYLEX,
//! ZPOPMIN, ZPOPMAX, ZMPOP, the blocking BZPOPMIN, BZPOPMAX and BZMPOP, ZRANDMEMBER, ZSCAN,
//! and the set algebra ZUNION, ZINTER, ZDIFF (and
//! their STORE forms) and ZINTERCARD, with Redis 7.2's replies and error texts. The set
//! algebra also accepts plain sets as inputs, each member scoring 1, as Redis does.
//!
//! The value type is [`storage::zset::ZSet`]. Scores are replied with
//! [`resp::ReplyWriter::double`] (a RESP3 double, or a bulk string in RESP2).

use std::cmp::Ordering;

use rand::Rng;
use resp::{Args, Protocol};
use storage::pattern::glob_match;
use storage::set::Elem;
use storage::zset::{AddResult, ZSet};
use storage::Value;

use crate::blocking::TimeoutReply;
use crate::cmd::util::{
    is, parse_cursor, parse_f64, parse_float, parse_i64, parse_scan_opts, parse_timeout, ScanOpts,
};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::notify::{GENERIC, ZSET};
use crate::registry::{flags::*, CommandSpec, Group, Timeout};

const Z: Group = Group::SortedSet;

/// Sorted-set commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("zadd", -4, WRITE | DENYOOM | FAST, (1, 1, 1), Z, zadd).doc(
        "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.",
        "1.2.0",
    ),
    CommandSpec::new("zincrby", 4, WRITE | DENYOOM | FAST, (1, 1, 1), Z, zincrby)
        .doc("Increments the score of a member in a sorted set.", "1.2.0"),
    CommandSpec::new("zscore", 3, READONLY | FAST, (1, 1, 1), Z, zscore)
        .doc("Returns the score of a member in a sorted set.", "1.2.0"),
    CommandSpec::new("zmscore", -3, READONLY | FAST, (1, 1, 1), Z, zmscore)
        .doc("Returns the score of one or more members in a sorted set.", "6.2.0"),
    CommandSpec::new("zcard", 2, READONLY | FAST, (1, 1, 1), Z, zcard)
        .doc("Returns the number of members in a sorted set.", "1.2.0"),
    CommandSpec::new("zrank", -3, READONLY | FAST, (1, 1, 1), Z, zrank)
        .doc("Returns the index of a member in a sorted set ordered by ascending scores.", "2.0.0"),
    CommandSpec::new("zrevrank", -3, READONLY | FAST, (1, 1, 1), Z, zrevrank)
        .doc("Returns the index of a member in a sorted set ordered by descending scores.", "2.0.0"),
    CommandSpec::new("zcount", 4, READONLY | FAST, (1, 1, 1), Z, zcount)
        .doc("Returns the count of members in a sorted set that have scores within a range.", "2.0.0"),
    CommandSpec::new("zlexcount", 4, READONLY | FAST, (1, 1, 1), Z, zlexcount)
        .doc("Returns the number of members in a sorted set within a lexicographical range.", "2.8.9"),
    CommandSpec::new("zrange", -4, READONLY, (1, 1, 1), Z, zrange)
        .doc("Returns members in a sorted set within a range of indexes.", "1.2.0"),
    CommandSpec::new("zrangestore", -5, WRITE | DENYOOM, (1, 2, 1), Z, zrangestore)
        .doc("Stores a range of members from sorted set in a key.", "6.2.0"),
    CommandSpec::new("zrevrange", -4, READONLY, (1, 1, 1), Z, zrevrange)
        .doc("Returns members in a sorted set within a range of indexes in reverse order.", "1.2.0"),
    CommandSpec::new("zrangebyscore", -4, READONLY, (1, 1, 1), Z, zrangebyscore)
        .doc("Returns members in a sorted set within a range of scores.", "1.0.5"),
    CommandSpec::new("zrevrangebyscore", -4, READONLY, (1, 1, 1), Z, zrevrangebyscore)
        .doc("Returns members in a sorted set within a range of scores in reverse order.", "2.2.0"),
    CommandSpec::new("zrangebylex", -4, READONLY, (1, 1, 1), Z, zrangebylex)
        .doc("Returns members in a sorted set within a lexicographical range.", "2.8.9"),
    CommandSpec::new("zrevrangebylex", -4, READONLY, (1, 1, 1), Z, zrevrangebylex).doc(
        "Returns members in a sorted set within a lexicographical range in reverse order.",
        "2.8.9",
    ),
    CommandSpec::new("zrem", -3, WRITE | FAST, (1, 1, 1), Z, zrem)
        .doc("Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "1.2.0"),
    CommandSpec::new("zremrangebyrank", 4, WRITE, (1, 1, 1), Z, zremrangebyrank).doc(
        "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.",
        "2.0.0",
    ),
    CommandSpec::new("zremrangebyscore", 4, WRITE, (1, 1, 1), Z, zremrangebyscore).doc(
        "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.",
        "1.2.0",
    ),
    CommandSpec::new("zremrangebylex", 4, WRITE, (1, 1, 1), Z, zremrangebylex).doc(
        "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.",
        "2.8.9",
    ),
    CommandSpec::new("zpopmin", -2, WRITE | FAST, (1, 1, 1), Z, zpopmin).doc(
        "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0",
    ),
    CommandSpec::new("zpopmax", -2, WRITE | FAST, (1, 1, 1), Z, zpopmax).doc(
        "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0",
    ),
    CommandSpec::new("zrandmember", -2, READONLY, (1, 1, 1), Z, zrandmember)
        .doc("Returns one or more random members from a sorted set.", "6.2.0"),
    CommandSpec::new("zscan", -3, READONLY, (1, 1, 1), Z, zscan)
        .doc("Iterates over members and scores of a sorted set.", "2.8.0"),
    CommandSpec::new("zunion", -3, READONLY | MOVABLE_KEYS, (0, 0, 0), Z, zunion)
        .doc("Returns the union of multiple sorted sets.", "6.2.0")
    .numkeys(1),
    CommandSpec::new("zunionstore", -4, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), Z, zunionstore)
        .doc("Stores the union of multiple sorted sets in a key.", "2.0.0")
    .numkeys(2),
    CommandSpec::new("zinter", -3, READONLY | MOVABLE_KEYS, (0, 0, 0), Z, zinter)
        .doc("Returns the intersect of multiple sorted sets.", "6.2.0")
    .numkeys(1),
    CommandSpec::new("zinterstore", -4, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), Z, zinterstore)
        .doc("Stores the intersect of multiple sorted sets in a key.", "2.0.0")
    .numkeys(2),
    CommandSpec::new("zdiff", -3, READONLY | MOVABLE_KEYS, (0, 0, 0), Z, zdiff)
        .doc("Returns the difference between multiple sorted sets.", "6.2.0")
    .numkeys(1),
    CommandSpec::new("zdiffstore", -4, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), Z, zdiffstore)
        .doc("Stores the difference of multiple sorted sets in a key.", "6.2.0")
    .numkeys(2),
    CommandSpec::new("zintercard", -3, READONLY | MOVABLE_KEYS, (0, 0, 0), Z, zintercard)
        .doc("Returns the number of members of the intersect of multiple sorted sets.", "7.0.0")
    .numkeys(1),
    CommandSpec::new("zmpop", -4, WRITE | MOVABLE_KEYS, (0, 0, 0), Z, zmpop).doc(
        "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.",
        "7.0.0",
    )
    .numkeys(1),
    CommandSpec::new("bzpopmin", -3, WRITE | FAST | BLOCKING, (1, -2, 1), Z, bzpopmin).doc(
        "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
        "5.0.0",
    )
    .timeout_at(Timeout::LastSecs),
    CommandSpec::new("bzpopmax", -3, WRITE | FAST | BLOCKING, (1, -2, 1), Z, bzpopmax).doc(
        "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise. Deletes the sorted set if the last element was popped.",
        "5.0.0",
    )
    .timeout_at(Timeout::LastSecs),
    CommandSpec::new("bzmpop", -5, WRITE | BLOCKING | MOVABLE_KEYS, (0, 0, 0), Z, bzmpop).doc(
        "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
        "7.0.0",
    )
    .numkeys(2)
    .timeout_at(Timeout::ArgSecs(1)),
];

// ------------------------------------------------------------------------------------------
// Shared helpers

/// The sorted set held by `v`, or WRONGTYPE.
#[allow(unreachable_patterns)]
pub(crate) fn as_zset(v: &Value) -> Result<&ZSet, CmdError> {
    match v {
        Value::ZSet(z) => Ok(z),
        _ => Err(CmdError::WrongType),
    }
}

/// Mutable access to the sorted set held by `v`, or WRONGTYPE.
#[allow(unreachable_patterns)]
fn as_zset_mut(v: &mut Value) -> Result<&mut ZSet, CmdError> {
    match v {
        Value::ZSet(z) => Ok(z),
        _ => Err(CmdError::WrongType),
    }
}

/// Runs `f` on the sorted set at `key` (None when missing), counting a hit or miss.
pub(crate) fn read<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Ctx<'_>, Option<&ZSet>) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let ks = ctx.ks();
    let mut g = ks.lock(ctx.db(), key, ctx.now);
    let found = match g.get() {
        Some(e) => Some(as_zset(&e.value)?),
        None => None,
    };
    ctx.hit_key(found.is_some(), key);
    f(ctx, found)
}

/// Runs `f` on the existing sorted set at `key` (None when missing); deletes the key when
/// `f` leaves the set empty.
fn modify<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&mut Ctx<'_>, Option<&mut ZSet>) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let ks = ctx.ks();
    let mut g = ks.lock(ctx.db(), key, ctx.now);
    let (res, empty) = match g.get() {
        Some(e) => {
            let z = as_zset_mut(&mut e.value)?;
            let r = f(ctx, Some(z));
            (r, z.is_empty())
        }
        None => (f(ctx, None), false),
    };
    if empty {
        g.remove();
    }
    res
}

/// A score argument as Redis's `getDoubleFromObject`: a float that does not overflow
/// (`1e400` is refused; `inf` is accepted).
fn parse_score(b: &[u8]) -> Result<f64, CmdError> {
    let v = parse_f64(b)?;
    if v.is_infinite() && !b.iter().any(|c| c.eq_ignore_ascii_case(&b'i')) {
        return Err(CmdError::NotFloat);
    }
    Ok(v)
}

fn resp3(ctx: &Ctx<'_>) -> bool {
    ctx.out.protocol() == Protocol::Resp3
}

/// A score bound of a range (`1.5`, `(1.5`, `-inf`, `+inf`).
#[derive(Clone, Copy, Debug)]
struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

fn parse_score_bound(b: &[u8]) -> Option<(f64, bool)> {
    // Redis parses with strtod and only checks that it consumed everything: leading
    // spaces are skipped and an empty string reads as 0.
    let num = |x: &[u8]| {
        let t = x.trim_ascii_start();
        if t.is_empty() {
            Some(0.0)
        } else {
            parse_float(t)
        }
    };
    match b.strip_prefix(b"(") {
        Some(rest) => num(rest).map(|v| (v, true)),
        None => num(b).map(|v| (v, false)),
    }
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    let bad = || CmdError::err("min or max is not a float");
    let (min, minex) = parse_score_bound(min).ok_or_else(bad)?;
    let (max, maxex) = parse_score_bound(max).ok_or_else(bad)?;
    Ok(ScoreRange {
        min,
        minex,
        max,
        maxex,
    })
}

impl ScoreRange {
    /// Ascending ranks `start..end` of the items in range.
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        if self.min > self.max || (self.min == self.max && (self.minex || self.maxex)) {
            return (0, 0);
        }
        let start = z.partition_point(|s, _| {
            if self.minex {
                s <= self.min
            } else {
                s < self.min
            }
        });
        let end = z.partition_point(|s, _| {
            if self.maxex {
                s < self.max
            } else {
                s <= self.max
            }
        });
        (start, end.max(start))
    }
}

/// A lexicographic bound.
#[derive(Clone, Debug)]
enum Lex<'a> {
    Min,
    Max,
    Incl(&'a [u8]),
    Excl(&'a [u8]),
}

fn parse_lex_bound(b: &[u8]) -> Option<Lex<'_>> {
    match b.first() {
        Some(b'-') if b.len() == 1 => Some(Lex::Min),
        Some(b'+') if b.len() == 1 => Some(Lex::Max),
        Some(b'[') => Some(Lex::Incl(&b[1..])),
        Some(b'(') => Some(Lex::Excl(&b[1..])),
        _ => None,
    }
}

struct LexRange<'a> {
    min: Lex<'a>,
    max: Lex<'a>,
}

fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Result<LexRange<'a>, CmdError> {
    let bad = || CmdError::err("min or max not valid string range item");
    Ok(LexRange {
        min: parse_lex_bound(min).ok_or_else(bad)?,
        max: parse_lex_bound(max).ok_or_else(bad)?,
    })
}

impl Lex<'_> {
    /// Order of two bounds as Redis's `sdscmplex` (`-` lowest, `+` highest).
    fn cmp_bound(&self, other: &Lex<'_>) -> Ordering {
        match (self, other) {
            (Lex::Min, Lex::Min) | (Lex::Max, Lex::Max) => Ordering::Equal,
            (Lex::Min, _) | (_, Lex::Max) => Ordering::Less,
            (Lex::Max, _) | (_, Lex::Min) => Ordering::Greater,
            (Lex::Incl(a) | Lex::Excl(a), Lex::Incl(b) | Lex::Excl(b)) => a.cmp(b),
        }
    }

    fn exclusive(&self) -> bool {
        !matches!(self, Lex::Incl(_))
    }
}

impl LexRange<'_> {
    fn gte_min(&self, m: &[u8]) -> bool {
        match self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Incl(v) => m >= v,
            Lex::Excl(v) => m > v,
        }
    }

    fn lte_max(&self, m: &[u8]) -> bool {
        match self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(v) => m <= v,
            Lex::Excl(v) => m < v,
        }
    }

    /// Ascending ranks `start..end` of the items in range, found as Redis's listpack walk
    /// does (forward from the head, or backward from the tail when `rev`). When all scores
    /// are equal (the documented use) members are sorted and binary searches give the
    /// same answer in O(log n); mixed scores fall back to the linear walk.
    fn ranks_dir(&self, z: &ZSet, rev: bool) -> (usize, usize) {
        let n = z.len();
        let c = self.min.cmp_bound(&self.max);
        if n == 0
            || c == Ordering::Greater
            || (c == Ordering::Equal && (self.min.exclusive() || self.max.exclusive()))
        {
            return (0, 0);
        }
        let (Some((first, fs)), Some((last, ls))) = (z.get(0), z.get(n - 1)) else {
            return (0, 0);
        };
        if !self.gte_min(last) || !self.lte_max(first) {
            return (0, 0);
        }
        if fs == ls {
            let start = z.partition_point(|_, m| !self.gte_min(m));
            let end = z.partition_point(|_, m| self.lte_max(m));
            return (start, end.max(start));
        }
        if !rev {
            let mut it = z.iter().enumerate();
            let Some((start, _)) = it.by_ref().find(|(_, (m, _))| self.gte_min(m)) else {
                return (0, 0);
            };
            let end = z
                .range(start, n)
                .position(|(m, _)| !self.lte_max(m))
                .map_or(n, |p| start + p);
            (start, end)
        } else {
            let Some(last_in) = z.iter().rev().position(|(m, _)| self.lte_max(m)) else {
                return (0, 0);
            };
            let end = n - last_in;
            let start = z
                .range(0, end)
                .rev()
                .position(|(m, _)| !self.gte_min(m))
                .map_or(0, |p| end - p);
            (start, end)
        }
    }

    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        self.ranks_dir(z, false)
    }
}

/// Redis's rank-range normalisation: ascending ranks `start..end` or empty.
fn rank_range(start: i64, end: i64, len: usize) -> (usize, usize) {
    let llen = len as i64;
    let mut s = if start < 0 { llen + start } else { start };
    let mut e = if end < 0 { llen + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= llen {
        return (0, 0);
    }
    if e >= llen {
        e = llen - 1;
    }
    (s as usize, e as usize + 1)
}

/// Writes `items` as a range reply: members only, or with scores (RESP2 flat, RESP3
/// pairs).
fn emit_items(ctx: &mut Ctx<'_>, items: &[(&[u8], f64)], withscores: bool) {
    if !withscores {
        ctx.out.array(items.len());
        for (m, _) in items {
            ctx.out.bulk(m);
        }
    } else if resp3(ctx) {
        ctx.out.array(items.len());
        for (m, s) in items {
            ctx.out.array(2);
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    } else {
        ctx.out.array(items.len() * 2);
        for (m, s) in items {
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    }
}

// ------------------------------------------------------------------------------------------
// ZADD, ZINCRBY

const NX: u8 = 1;
const XX: u8 = 2;
const GT: u8 = 4;
const LT: u8 = 8;

/// Redis's `zsetAdd` flag logic for one member. Returns the new score when the member was
/// added or changed, and what happened.
fn zset_add(
    z: &mut ZSet,
    member: &[u8],
    score: f64,
    flags: u8,
    incr: bool,
) -> Result<(Option<f64>, AddResult), CmdError> {
    match z.score(member) {
        Some(cur) => {
            if flags & NX != 0 {
                return Ok((None, AddResult::Unchanged));
            }
            let new = if incr {
                let v = cur + score;
                if v.is_nan() {
                    return Err(CmdError::err("resulting score is not a number (NaN)"));
                }
                v
            } else {
                score
            };
            if (flags & LT != 0 && new >= cur) || (flags & GT != 0 && new <= cur) {
                return Ok((None, AddResult::Unchanged));
            }
            let r = z.add(member, new);
            Ok((Some(new), r))
        }
        None => {
            if flags & XX != 0 {
                return Ok((None, AddResult::Unchanged));
            }
            Ok((Some(score), z.add(member, score)))
        }
    }
}

fn zadd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut flags = 0u8;
    let mut ch = false;
    let mut incr = false;
    let mut i = 2;
    while i < args.len() {
        let a = args.arg(i);
        if is(a, "nx") {
            flags |= NX;
        } else if is(a, "xx") {
            flags |= XX;
        } else if is(a, "gt") {
            flags |= GT;
        } else if is(a, "lt") {
            flags |= LT;
        } else if is(a, "ch") {
            ch = true;
        } else if is(a, "incr") {
            incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = args.len() - i;
    if elements == 0 || !elements.is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if flags & NX != 0 && flags & XX != 0 {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    let (nx, gt, lt) = (flags & NX != 0, flags & GT != 0, flags & LT != 0);
    if [gt, lt, nx].iter().filter(|x| **x).count() > 1 {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && elements > 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    let mut max_len = 0;
    for j in (i..args.len()).step_by(2) {
        let s = parse_score(args.arg(j))?;
        let m = args.arg(j + 1);
        max_len = max_len.max(m.len());
        pairs.push((s, m));
    }
    let key = args.arg(1);
    let ks = ctx.ks();
    let mut g = ks.lock(ctx.db(), key, ctx.now);
    let mut created = false;
    if let Some(e) = g.get() {
        as_zset(&e.value)?;
    } else {
        if flags & XX != 0 {
            drop(g);
            if incr {
                ctx.out.null();
            } else {
                ctx.out.int(0);
            }
            return Ok(());
        }
        g.insert(
            Value::ZSet(Box::new(ZSet::with_hint(pairs.len(), max_len))),
            0,
        );
        created = true;
    }
    let Some(e) = g.get() else {
        return Err(CmdError::err("internal error"));
    };
    let z = as_zset_mut(&mut e.value)?;
    let (mut added, mut updated) = (0i64, 0i64);
    let mut last = None;
    let mut failure = None;
    for (s, m) in pairs {
        match zset_add(z, m, s, flags, incr) {
            Ok((score, r)) => {
                last = score;
                match r {
                    AddResult::Added => added += 1,
                    AddResult::Updated(_) => updated += 1,
                    AddResult::Unchanged => {}
                }
            }
            Err(err) => {
                failure = Some(err);
                break;
            }
        }
    }
    let empty = z.is_empty();
    if empty && created {
        g.remove();
    }
    drop(g);
    if added + updated > 0 {
        ctx.notify(ZSET, if incr { "zincr" } else { "zadd" }, key);
    }
    if let Some(err) = failure {
        return Err(err);
    }
    if incr {
        match last {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    } else {
        ctx.out.int(if ch { added + updated } else { added });
    }
    Ok(())
}

fn zincrby(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let incr = parse_score(args.arg(2))?;
    let member = args.arg(3);
    let key = args.arg(1);
    let ks = ctx.ks();
    let mut g = ks.lock(ctx.db(), key, ctx.now);
    let created = match g.get() {
        Some(e) => {
            as_zset(&e.value)?;
            false
        }
        None => {
            g.insert(Value::ZSet(Box::new(ZSet::with_hint(1, member.len()))), 0);
            true
        }
    };
    let Some(e) = g.get() else {
        return Err(CmdError::err("internal error"));
    };
    let z = as_zset_mut(&mut e.value)?;
    let res = zset_add(z, member, incr, 0, true);
    if created && z.is_empty() {
        g.remove();
    }
    drop(g);
    let (score, r) = res?;
    if r != AddResult::Unchanged {
        ctx.notify(ZSET, "zincr", key);
    }
    match score {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Point reads

fn zscore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read(ctx, args.arg(1), |ctx, z| {
        match z.and_then(|z| z.score(args.arg(2))) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
        Ok(())
    })
}

fn zmscore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read(ctx, args.arg(1), |ctx, z| {
        ctx.out.array(args.len() - 2);
        for m in args.slice(2).iter() {
            match z.and_then(|z| z.score(m)) {
                Some(s) => ctx.out.double(s),
                None => ctx.out.null(),
            }
        }
        Ok(())
    })
}

fn zcard(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    read(ctx, args.arg(1), |ctx, z| {
        ctx.out.int(z.map_or(0, |z| z.len()) as i64);
        Ok(())
    })
}

fn rank_generic(ctx: &mut Ctx<'_>, args: Args<'_>, rev: bool) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let withscore = match args.get(3) {
        Some(a) if is(a, "withscore") => true,
        Some(_) => return Err(CmdError::Syntax),
        None => false,
    };
    read(ctx, args.arg(1), |ctx, z| {
        let found = z.and_then(|z| z.rank(args.arg(2)).map(|(r, s)| (r, s, z.len())));
        match found {
            Some((r, s, n)) => {
                let r = if rev { n - 1 - r } else { r };
                if withscore {
                    ctx.out.array(2);
                    ctx.out.int(r as i64);
                    ctx.out.double(s);
                } else {
                    ctx.out.int(r as i64);
                }
            }
            None if withscore => ctx.out.null_array(),
            None => ctx.out.null(),
        }
        Ok(())
    })
}

fn zrank(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    rank_generic(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    rank_generic(ctx, args, true)
}

fn zcount(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let r = parse_score_range(args.arg(2), args.arg(3))?;
    read(ctx, args.arg(1), |ctx, z| {
        let n = z.map_or(0, |z| {
            let (a, b) = r.ranks(z);
            b - a
        });
        ctx.out.int(n as i64);
        Ok(())
    })
}

fn zlexcount(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let r = parse_lex_range(args.arg(2), args.arg(3))?;
    read(ctx, args.arg(1), |ctx, z| {
        let n = z.map_or(0, |z| {
            let (a, b) = r.ranks(z);
            b - a
        });
        ctx.out.int(n as i64);
        Ok(())
    })
}

// ------------------------------------------------------------------------------------------
// ZRANGE and friends

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed range request (Redis's `zrangeGenericCommand` step 1 and 2).
struct RangeSpec<'a> {
    kind: RangeType,
    rev: bool,
    withscores: bool,
    offset: i64,
    limit: i64,
    rank: (i64, i64),
    score: Option<ScoreRange>,
    lex: Option<LexRange<'a>>,
}

fn parse_range<'a>(
    args: Args<'a>,
    start: usize,
    kind: RangeType,
    rev: Option<bool>,
    store: bool,
) -> Result<RangeSpec<'a>, CmdError> {
    let mut kind = kind;
    let mut dir = rev;
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = start + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args.arg(j);
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = parse_i64(args.arg(j + 1))?;
            limit = parse_i64(args.arg(j + 2))?;
            j += 2;
        } else if dir.is_none() && is(a, "rev") {
            dir = Some(true);
        } else if kind == RangeType::Auto && is(a, "bylex") {
            kind = RangeType::Lex;
        } else if kind == RangeType::Auto && is(a, "byscore") {
            kind = RangeType::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = dir.unwrap_or(false);
    if kind == RangeType::Auto {
        kind = RangeType::Rank;
    }
    if limit != -1 && kind == RangeType::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == RangeType::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (args.arg(start + 1), args.arg(start + 2));
    if rev && kind != RangeType::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let mut spec = RangeSpec {
        kind,
        rev,
        withscores,
        offset,
        limit,
        rank: (0, 0),
        score: None,
        lex: None,
    };
    match kind {
        RangeType::Score => spec.score = Some(parse_score_range(lo, hi)?),
        RangeType::Lex => spec.lex = Some(parse_lex_range(lo, hi)?),
        _ => spec.rank = (parse_i64(lo)?, parse_i64(hi)?),
    }
    Ok(spec)
}

impl RangeSpec<'_> {
    /// The selected items, in reply order.
    fn select<'z>(&self, z: &'z ZSet) -> Vec<(&'z [u8], f64)> {
        let n = z.len();
        let (a, b) = match self.kind {
            RangeType::Score => self.score.map_or((0, 0), |r| r.ranks(z)),
            RangeType::Lex => self
                .lex
                .as_ref()
                .map_or((0, 0), |r| r.ranks_dir(z, self.rev)),
            _ => {
                let (s, e) = rank_range(self.rank.0, self.rank.1, n);
                if self.rev {
                    // Ranks counted from the highest score.
                    (n - e, n - s)
                } else {
                    (s, e)
                }
            }
        };
        let (a, b) = if a >= b { (0, 0) } else { (a, b) };
        let (a, b) = if self.kind == RangeType::Rank {
            (a, b)
        } else {
            // LIMIT applies in iteration order.
            if self.offset < 0 {
                (0, 0)
            } else {
                let total = b - a;
                let off = usize::try_from(self.offset)
                    .unwrap_or(usize::MAX)
                    .min(total);
                let cnt = if self.limit < 0 {
                    total - off
                } else {
                    usize::try_from(self.limit)
                        .unwrap_or(usize::MAX)
                        .min(total - off)
                };
                if self.rev {
                    (b - off - cnt, b - off)
                } else {
                    (a + off, a + off + cnt)
                }
            }
        };
        if self.rev {
            z.range(a, b).rev().collect()
        } else {
            z.range(a, b).collect()
        }
    }
}

fn range_generic(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    kind: RangeType,
    rev: Option<bool>,
) -> CmdResult {
    let spec = parse_range(args, 1, kind, rev, false)?;
    read(ctx, args.arg(1), |ctx, z| {
        match z {
            Some(z) => {
                let items = spec.select(z);
                emit_items(ctx, &items, spec.withscores);
            }
            None => ctx.out.array(0),
        }
        Ok(())
    })
}

fn zrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    range_generic(ctx, args, RangeType::Auto, None)
}

fn zrevrange(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    range_generic(ctx, args, RangeType::Rank, Some(true))
}

fn zrangebyscore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    range_generic(ctx, args, RangeType::Score, Some(false))
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    range_generic(ctx, args, RangeType::Score, Some(true))
}

fn zrangebylex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    range_generic(ctx, args, RangeType::Lex, Some(false))
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    range_generic(ctx, args, RangeType::Lex, Some(true))
}

/// Builds a new sorted set from `items` (encoding chosen by size, as Redis does).
fn build(items: &[(Vec<u8>, f64)]) -> ZSet {
    let max_len = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = ZSet::with_hint(items.len(), max_len);
    for (m, s) in items {
        z.add(m, *s);
    }
    z
}

/// Replaces `dst` with `items` (deleting it when empty) under a multi-key guard, with
/// its keyspace event (`event`, or `del` when an existing key was deleted).
fn store(
    ctx: &Ctx<'_>,
    g: &mut storage::MultiGuard<'_>,
    dst: &[u8],
    items: &[(Vec<u8>, f64)],
    event: &str,
) {
    let db = ctx.db();
    if items.is_empty() {
        if g.remove(db, dst).is_some() {
            ctx.notify(GENERIC, "del", dst);
        }
    } else {
        g.insert(db, dst, Value::ZSet(Box::new(build(items))), 0);
        ctx.notify(ZSET, event, dst);
    }
}

/// The events of a removal from `key` (`event` when `n` members went), then `del` when
/// the set went away.
fn removal_events(ctx: &Ctx<'_>, key: &[u8], event: &str, n: usize, deleted: bool) {
    if n > 0 {
        ctx.notify(ZSET, event, key);
        if deleted {
            ctx.notify(GENERIC, "del", key);
        }
    }
}

fn zrangestore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let spec = parse_range(args, 2, RangeType::Auto, None, true)?;
    let (dst, src) = (args.arg(1), args.arg(2));
    let db = ctx.db();
    let mut g = ctx.lock_keys([dst, src]);
    let items: Vec<(Vec<u8>, f64)> = match g.get(db, src) {
        Some(e) => spec
            .select(as_zset(&e.value)?)
            .into_iter()
            .map(|(m, s)| (m.to_vec(), s))
            .collect(),
        None => {
            ctx.hit_key(false, src);
            Vec::new()
        }
    };
    store(ctx, &mut g, dst, &items, "zrangestore");
    drop(g);
    ctx.out.int(items.len() as i64);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Removal

fn zrem(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (n, empty) = modify(ctx, args.arg(1), |_, z| {
        let Some(z) = z else { return Ok((0, false)) };
        let mut n = 0i64;
        for m in args.slice(2).iter() {
            if z.remove(m).is_some() {
                n += 1;
                if z.is_empty() {
                    break;
                }
            }
        }
        Ok((n, z.is_empty()))
    })?;
    removal_events(ctx, args.arg(1), "zrem", n as usize, empty);
    ctx.out.int(n);
    Ok(())
}

fn remrange(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    event: &str,
    sel: impl Fn(&ZSet) -> (usize, usize),
) -> CmdResult {
    let (n, empty) = modify(ctx, args.arg(1), |_, z| {
        let Some(z) = z else { return Ok((0, false)) };
        let (a, b) = sel(z);
        let n = z.remove_range(a, b).len();
        Ok((n, z.is_empty()))
    })?;
    removal_events(ctx, args.arg(1), event, n, empty);
    ctx.out.int(n as i64);
    Ok(())
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (s, e) = (parse_i64(args.arg(2))?, parse_i64(args.arg(3))?);
    remrange(ctx, args, "zremrangebyrank", |z| rank_range(s, e, z.len()))
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let r = parse_score_range(args.arg(2), args.arg(3))?;
    remrange(ctx, args, "zremrangebyscore", |z| r.ranks(z))
}

fn zremrangebylex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let r = parse_lex_range(args.arg(2), args.arg(3))?;
    remrange(ctx, args, "zremrangebylex", |z| r.ranks(z))
}

fn pop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(a) => {
            let v = parse_i64(a)?;
            if v < 0 {
                return Err(CmdError::err("value is out of range, must be positive"));
            }
            Some(usize::try_from(v).unwrap_or(usize::MAX))
        }
        None => None,
    };
    let nested = resp3(ctx) && count.is_some();
    let (items, empty) = modify(ctx, args.arg(1), |_, z| {
        let Some(z) = z else {
            return Ok((Vec::new(), false));
        };
        let n = count.unwrap_or(1).min(z.len());
        let len = z.len();
        let mut items = if max {
            z.remove_range(len - n, len)
        } else {
            z.remove_range(0, n)
        };
        if max {
            items.reverse();
        }
        Ok((items, z.is_empty()))
    })?;
    let event = if max { "zpopmax" } else { "zpopmin" };
    removal_events(ctx, args.arg(1), event, items.len(), empty);
    ctx.out
        .array(if nested { items.len() } else { items.len() * 2 });
    for (s, m) in &items {
        if nested {
            ctx.out.array(2);
        }
        ctx.out.bulk(m);
        ctx.out.double(*s);
    }
    Ok(())
}

fn zpopmin(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    pop_generic(ctx, args, false)
}

fn zpopmax(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    pop_generic(ctx, args, true)
}

// ------------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN

/// Largest reply ZRANDMEMBER builds for a negative count (Redis would try to send any
/// count; Ember refuses counts that could exhaust memory).
const MAX_RAND_REPLY: u64 = 1 << 24;

fn zrandmember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::Syntax);
    }
    let Some(c) = args.get(2) else {
        return read(ctx, args.arg(1), |ctx, z| {
            match z.filter(|z| !z.is_empty()) {
                Some(z) => {
                    let r = ctx.rng.random_range(0..z.len());
                    match z.get(r) {
                        Some((m, _)) => ctx.out.bulk(m),
                        None => ctx.out.null(),
                    }
                }
                None => ctx.out.null(),
            }
            Ok(())
        });
    };
    let count = parse_i64(c)?;
    if count == i64::MIN {
        return Err(CmdError::err("value is out of range"));
    }
    let withscores = match args.get(3) {
        Some(a) if is(a, "withscores") => true,
        Some(_) => return Err(CmdError::Syntax),
        None => false,
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::err("value is out of range"));
    }
    read(ctx, args.arg(1), |ctx, z| {
        let Some(z) = z.filter(|z| !z.is_empty() && count != 0) else {
            ctx.out.array(0);
            return Ok(());
        };
        let n = z.len();
        let rng = &mut ctx.rng;
        let picks: Vec<usize> = if count < 0 {
            let want = count.unsigned_abs();
            if want > MAX_RAND_REPLY {
                return Err(CmdError::err("value is out of range"));
            }
            (0..want).map(|_| rng.random_range(0..n)).collect()
        } else if count as u64 >= n as u64 {
            // The whole set, highest score first, as Redis replies.
            (0..n).rev().collect()
        } else {
            rand::seq::index::sample(&mut *rng, n, count as usize).into_vec()
        };
        let items: Vec<(&[u8], f64)> = picks.into_iter().filter_map(|r| z.get(r)).collect();
        emit_items(ctx, &items, withscores);
        Ok(())
    })
}

fn zscan(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let cursor = parse_cursor(args.arg(2))?;
    let ScanOpts { count, pattern, .. } = parse_scan_opts(&args, 3, false)?;
    read(ctx, args.arg(1), |ctx, z| {
        let Some(z) = z else {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            ctx.out.array(0);
            return Ok(());
        };
        let (next, page) = z.scan(cursor, count);
        let items: Vec<(&[u8], f64)> = page
            .into_iter()
            .filter(|(m, _)| pattern.is_none_or(|p| glob_match(p, m, false)))
            .collect();
        ctx.out.array(2);
        ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
        ctx.out.array(items.len() * 2);
        for (m, s) in items {
            ctx.out.bulk(m);
            ctx.out.bulk(resp::reply::format_double(s).as_bytes());
        }
        Ok(())
    })
}

// ------------------------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (+STORE), ZINTERCARD

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(agg: Aggregate, target: &mut f64, val: f64) {
    match agg {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

/// An input of the set algebra: a sorted set, or a plain set whose members score 1.
enum Src {
    Z(ZSet),
    S(storage::set::Set),
}

impl Src {
    fn len(&self) -> usize {
        match self {
            Src::Z(z) => z.len(),
            Src::S(s) => s.len(),
        }
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Z(z) => z.score(m),
            Src::S(s) => s.contains(m).then_some(1.0),
        }
    }

    fn items(&self) -> Box<dyn Iterator<Item = (std::borrow::Cow<'_, [u8]>, f64)> + '_> {
        match self {
            Src::Z(z) => Box::new(z.iter().map(|(m, s)| (std::borrow::Cow::Borrowed(m), s))),
            Src::S(s) => Box::new(s.iter().map(|e| {
                let m = match e {
                    Elem::Bytes(b) => std::borrow::Cow::Borrowed(b),
                    Elem::Int(_) => std::borrow::Cow::Owned(e.to_vec()),
                };
                (m, 1.0)
            })),
        }
    }
}

/// Redis's `zunionInterDiffGenericCommand`. `dst`: the STORE form's destination;
/// `card_only`: ZINTERCARD.
fn setop_generic(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    dst: Option<&[u8]>,
    op: SetOp,
    card_only: bool,
) -> CmdResult {
    let numkeys_idx = if dst.is_some() { 2 } else { 1 };
    let name = String::from_utf8_lossy(args.arg(0)).to_ascii_lowercase();
    let setnum = parse_i64(args.arg(numkeys_idx))?;
    if setnum < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    let avail = args.len() - numkeys_idx - 1;
    if setnum as u64 > avail as u64 {
        return Err(CmdError::Syntax);
    }
    let setnum = setnum as usize;
    let keys: Vec<&[u8]> = (0..setnum).map(|i| args.arg(numkeys_idx + 1 + i)).collect();
    let db = ctx.db();
    let mut lock: Vec<&[u8]> = keys.clone();
    if let Some(d) = dst {
        lock.push(d);
    }
    let mut g = ctx.lock_keys(lock.iter().copied());
    // Type checks come before option parsing, as in Redis.
    for k in &keys {
        let found = match g.get(db, k) {
            Some(e) => {
                if !matches!(e.value, Value::ZSet(_) | Value::Set(_)) {
                    return Err(CmdError::WrongType);
                }
                true
            }
            None => false,
        };
        if dst.is_none() {
            ctx.hit_key(found, k);
        } else if !found {
            ctx.keymiss(k);
        }
    }
    let mut weights = vec![1.0f64; setnum];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = numkeys_idx + 1 + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        let a = args.arg(j);
        if op != SetOp::Diff && !card_only && remaining > setnum && is(a, "weights") {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = parse_float(args.arg(j + 1 + i))
                    .ok_or_else(|| CmdError::err("weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if op != SetOp::Diff && !card_only && remaining >= 2 && is(a, "aggregate") {
            let v = args.arg(j + 1);
            agg = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if dst.is_none() && !card_only && is(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && is(a, "limit") {
            let v =
                parse_i64(args.arg(j + 1)).map_err(|_| CmdError::err("LIMIT can't be negative"))?;
            if v < 0 {
                return Err(CmdError::err("LIMIT can't be negative"));
            }
            limit = usize::try_from(v).unwrap_or(usize::MAX);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    // Snapshot the inputs (cloned so the guard can be used again for the store).
    // Plain sets take part with every member scored 1, as in Redis.
    let mut srcs: Vec<(Option<Src>, f64)> = Vec::with_capacity(setnum);
    for (i, k) in keys.iter().enumerate() {
        let z = match g.get(db, k) {
            Some(e) => match &e.value {
                Value::ZSet(z) => Some(Src::Z((**z).clone())),
                Value::Set(s) => Some(Src::S((**s).clone())),
                _ => return Err(CmdError::WrongType),
            },
            None => None,
        };
        srcs.push((z, weights[i]));
    }
    let card = |s: &(Option<Src>, f64)| s.0.as_ref().map_or(0, |z| z.len());
    let mut result: Vec<(Vec<u8>, f64)> = Vec::new();
    match op {
        SetOp::Inter => {
            srcs.sort_by_key(card);
            if card(&srcs[0]) > 0 {
                let (first, w0) = (&srcs[0].0, srcs[0].1);
                if let Some(first) = first {
                    'outer: for (m, s) in first.items() {
                        let m = &m[..];
                        let mut score = w0 * s;
                        if score.is_nan() {
                            score = 0.0;
                        }
                        for (other, w) in &srcs[1..] {
                            match other.as_ref().and_then(|z| z.score(m)) {
                                Some(os) => {
                                    let mut v = w * os;
                                    if v.is_nan() {
                                        v = 0.0;
                                    }
                                    aggregate(agg, &mut score, v);
                                }
                                None => continue 'outer,
                            }
                        }
                        result.push((m.to_vec(), score));
                        if card_only && limit > 0 && result.len() >= limit {
                            break;
                        }
                    }
                }
            }
        }
        SetOp::Union => {
            srcs.sort_by_key(card);
            let mut acc: std::collections::HashMap<Vec<u8>, f64, foldhash::fast::RandomState> =
                std::collections::HashMap::default();
            for (z, w) in &srcs {
                let Some(z) = z else { continue };
                for (m, s) in z.items() {
                    let m = &m[..];
                    let mut v = w * s;
                    if v.is_nan() {
                        v = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(agg, t, v),
                        None => {
                            acc.insert(m.to_vec(), v);
                        }
                    }
                }
            }
            result = acc.into_iter().collect();
        }
        SetOp::Diff => {
            if let Some(first) = &srcs[0].0 {
                for (m, s) in first.items() {
                    let m = &m[..];
                    let gone = srcs[1..]
                        .iter()
                        .any(|(z, _)| z.as_ref().is_some_and(|z| z.score(m).is_some()));
                    if !gone {
                        result.push((m.to_vec(), s));
                    }
                }
            }
        }
    }
    if card_only {
        drop(g);
        ctx.out.int(result.len() as i64);
        return Ok(());
    }
    if let Some(d) = dst {
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        store(ctx, &mut g, d, &result, event);
        drop(g);
        ctx.out.int(result.len() as i64);
        return Ok(());
    }
    drop(g);
    result.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    let items: Vec<(&[u8], f64)> = result.iter().map(|(m, s)| (&m[..], *s)).collect();
    emit_items(ctx, &items, withscores);
    Ok(())
}

fn zunion(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, None, SetOp::Union, false)
}

fn zunionstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, Some(args.arg(1)), SetOp::Union, false)
}

fn zinter(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, None, SetOp::Inter, false)
}

fn zinterstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, Some(args.arg(1)), SetOp::Inter, false)
}

fn zdiff(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, None, SetOp::Diff, false)
}

fn zdiffstore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, Some(args.arg(1)), SetOp::Diff, false)
}

fn zintercard(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    setop_generic(ctx, args, None, SetOp::Inter, true)
}

// ------------------------------------------------------------------------------------------
// ZMPOP

fn zmpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if !zmpop_generic(ctx, args, 1)?.is_empty() {
        ctx.out.null_array();
    }
    Ok(())
}

/// Where BZMPOP's `numkeys` is (ZMPOP's is at 1).
const BZMPOP_NUMKEYS_AT: usize = 2;

/// ZMPOP / BZMPOP from `numkeys` at `at`: pops and replies, or returns the keys to wait on
/// (nothing written) when every sorted set is empty.
fn zmpop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, at: usize) -> Result<Vec<Vec<u8>>, CmdError> {
    let numkeys = parse_i64(args.arg(at))
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| CmdError::err("numkeys should be greater than 0"))?;
    let where_idx = match usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(at + 1))
    {
        Some(w) if w < args.len() => w,
        _ => return Err(CmdError::Syntax),
    };
    let w = args.arg(where_idx);
    let max = if is(w, "min") {
        false
    } else if is(w, "max") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count: Option<usize> = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(args.arg(j), "count") && j + 1 < args.len() {
            let c = parse_i64(args.arg(j + 1))
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| CmdError::err("count should be greater than 0"))?;
            count = Some(usize::try_from(c).unwrap_or(usize::MAX));
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let count = count.unwrap_or(1);
    let keys: Vec<&[u8]> = (at + 1..where_idx).map(|i| args.arg(i)).collect();
    let db = ctx.db();
    let mut g = ctx.lock_keys(keys.iter().copied());
    for &k in &keys {
        let Some(e) = g.get(db, k) else { continue };
        let z = as_zset_mut(&mut e.value)?;
        let len = z.len();
        let n = count.min(len);
        let mut items = if max {
            z.remove_range(len - n, len)
        } else {
            z.remove_range(0, n)
        };
        if max {
            items.reverse();
        }
        let empty = z.is_empty();
        if empty {
            g.remove(db, k);
        }
        drop(g);
        let event = if max { "zpopmax" } else { "zpopmin" };
        removal_events(ctx, k, event, items.len(), empty);
        if at == BZMPOP_NUMKEYS_AT {
            // BZMPOP propagates as the pop it became.
            let n = itoa::Buffer::new().format(items.len()).as_bytes().to_vec();
            let op: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            ctx.client.fx.record(&[op, k, &n]);
        }
        ctx.out.array(2);
        ctx.out.bulk(k);
        ctx.out.array(items.len());
        for (s, m) in &items {
            ctx.out.array(2);
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
        return Ok(Vec::new());
    }
    drop(g);
    Ok(keys.iter().map(|k| k.to_vec()).collect())
}

// ------------------------------------------------------------------------------------------
// Blocking pops

/// BZPOPMIN / BZPOPMAX: pops one member from the first non-empty sorted set, or blocks.
fn bzpop_generic(ctx: &mut Ctx<'_>, args: Args<'_>, max: bool) -> CmdResult {
    let last = args.len() - 1;
    let deadline = parse_timeout(args.arg(last))?;
    let keys: Vec<&[u8]> = (1..last).map(|i| args.arg(i)).collect();
    let db = ctx.db();
    let mut g = ctx.lock_keys(keys.iter().copied());
    for &k in &keys {
        let Some(e) = g.get(db, k) else { continue };
        let z = as_zset_mut(&mut e.value)?;
        let len = z.len();
        if len == 0 {
            continue;
        }
        let mut items = if max {
            z.remove_range(len - 1, len)
        } else {
            z.remove_range(0, 1)
        };
        let removed = if z.is_empty() { g.remove(db, k) } else { None };
        drop(g);
        let event = if max { "zpopmax" } else { "zpopmin" };
        removal_events(ctx, k, event, 1, removed.is_some());
        drop(removed);
        // Propagated as the pop it became.
        let op: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        ctx.client.fx.record(&[op, k]);
        let Some((score, member)) = items.pop() else {
            return Err(CmdError::err("internal error: empty pop"));
        };
        ctx.out.array(3);
        ctx.out.bulk(k);
        ctx.out.bulk(&member);
        ctx.out.double(score);
        return Ok(());
    }
    drop(g);
    ctx.block(
        keys.iter().map(|k| k.to_vec()).collect(),
        deadline,
        TimeoutReply::NullArray,
    );
    Ok(())
}

fn bzpopmin(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    bzpop_generic(ctx, args, false)
}

fn bzpopmax(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    bzpop_generic(ctx, args, true)
}

fn bzmpop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let deadline = parse_timeout(args.arg(1))?;
    let keys = zmpop_generic(ctx, args, BZMPOP_NUMKEYS_AT)?;
    if !keys.is_empty() {
        ctx.block(keys, deadline, TimeoutReply::NullArray);
    }
    Ok(())
}
