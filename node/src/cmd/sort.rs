//! SORT and SORT_RO, as Redis 7.2's `sort.c`.
//!
//! The source is a list, a set or a sorted set (a missing key sorts as an empty list).
//! Elements sort numerically by default (each value read with C `strtod` rules), or by
//! bytes with ALPHA; `BY pattern` sorts by the values of other keys (`*` replaced by the
//! element, `key->field` for a hash field) and `BY` without `*` (e.g. `nosort`) keeps the
//! native order of lists and sorted sets. `GET pattern` (repeatable, `#` = the element)
//! projects the output, LIMIT selects a range and STORE writes the result as a list.
//!
//! Atomicity: the keys that BY/GET patterns read are only known while sorting, so a
//! command with a pattern that can name another key locks every shard
//! ([`storage::Keyspace::lock_all`]); that keeps the whole command atomic with respect to
//! every other command at the cost of serialising it with the node. Without such a
//! pattern only the source and the STORE destination are locked.
//!
//! Known divergence: ALPHA compares bytes (Redis uses `strcoll`, which equals byte order
//! in the C locale except for elements containing NUL bytes).

use std::cmp::Ordering;

use resp::Args;
use storage::{MultiGuard, Value};

use crate::cmd::util::{is, parse_i64};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "sort",
        -2,
        WRITE | DENYOOM | MOVABLE_KEYS,
        (1, 1, 1),
        Group::Generic,
        sort,
    )
    .doc(
        "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.",
        "1.0.0",
    )
    .keys_by(store_key)
    .categories(CATEGORIES),
    CommandSpec::new(
        "sort_ro",
        -2,
        READONLY | MOVABLE_KEYS,
        (1, 1, 1),
        Group::Generic,
        sort_ro,
    )
    .doc(
        "Returns the sorted elements of a list, a set, or a sorted set.",
        "7.0.0",
    )
    .categories(CATEGORIES),
];

/// SORT's ACL data-type categories (it reads lists, sets and sorted sets).
const CATEGORIES: &[&str] = &["set", "sortedset", "list", "dangerous"];

/// The STORE destination's position, found as Redis's `sortGetKeys` does (LIMIT skips two
/// arguments, GET and BY one; the last STORE wins).
fn store_key(args: &Args<'_>) -> Vec<usize> {
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.arg(i);
        if is(a, "limit") {
            i += 2;
        } else if is(a, "get") || is(a, "by") {
            i += 1;
        } else if is(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    store.into_iter().collect()
}

fn sort(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// The part of `b` a C string function sees (up to the first NUL byte).
fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// True when `pattern` makes Redis's `lookupKeyByPattern` read a key.
fn reads_keys(pattern: &[u8]) -> bool {
    let c = cstr(pattern);
    c != b"#" && c.contains(&b'*')
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` is
/// replaced by the element and a `->field` suffix after it reads a hash field. `None`
/// when the pattern has no `*`, or the key is missing or of the wrong type. Each key read
/// is counted in `seen` (keyspace hits and misses, `keymiss` events).
fn lookup(
    g: &mut MultiGuard<'_>,
    db: usize,
    pattern: &[u8],
    elem: &[u8],
    seen: &mut Lookups,
) -> Option<Vec<u8>> {
    let c = cstr(pattern);
    if c == b"#" {
        return Some(elem.to_vec());
    }
    let star = c.iter().position(|&b| b == b'*')?;
    let after = cstr(&pattern[star + 1..]);
    let field = after
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| pattern.get(f + 2).is_some_and(|&b| b != 0));
    let key_end = field.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    let Some(entry) = g.get(db, &key) else {
        seen.misses.push(key);
        return None;
    };
    seen.hits += 1;
    match (field, &entry.value) {
        (Some(f), Value::Hash(h)) => h.get(&pattern[f + 2..]).map(<[u8]>::to_vec),
        (None, Value::String(s)) => Some(s.to_vec()),
        _ => None,
    }
}

/// The keys SORT's BY and GET patterns read: found ones counted, missing ones kept for
/// their `keymiss` events (published once the shard locks are released).
#[derive(Default)]
struct Lookups {
    hits: u64,
    misses: Vec<Vec<u8>>,
}

impl Lookups {
    /// Counts the lookups and publishes the misses.
    fn report(&mut self, ctx: &Ctx<'_>) {
        for _ in 0..std::mem::take(&mut self.hits) {
            ctx.hit(true);
        }
        for k in std::mem::take(&mut self.misses) {
            ctx.hit_key(false, &k);
        }
    }
}

/// C `strtod` on a whole value, as SORT reads scores: `None` when characters are left
/// over, on overflow/underflow (`ERANGE`) or for NaN. An empty value reads as 0.
fn strtod_full(b: &[u8]) -> Option<f64> {
    let s = cstr(b);
    let mut i = s
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(s.len());
    let neg = match s.get(i) {
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
    let rest = &s[i..];
    let lower: Vec<u8> = rest.iter().take(8).map(u8::to_ascii_lowercase).collect();
    let value = if lower.starts_with(b"inf") {
        let n = if lower.starts_with(b"infinity") { 8 } else { 3 };
        if rest.len() != n {
            return None;
        }
        f64::INFINITY
    } else if lower.starts_with(b"nan") {
        return None; // NaN, or garbage after it: an error either way.
    } else if lower.len() >= 2
        && lower[0] == b'0'
        && lower[1] == b'x'
        && rest
            .get(2)
            .is_some_and(|c| c.is_ascii_hexdigit() || *c == b'.')
    {
        parse_hex(&rest[2..])?
    } else {
        let mut j = 0;
        let mut digits = 0;
        let mut nonzero = false;
        while j < rest.len() && rest[j].is_ascii_digit() {
            nonzero |= rest[j] != b'0';
            j += 1;
            digits += 1;
        }
        if j < rest.len() && rest[j] == b'.' {
            j += 1;
            while j < rest.len() && rest[j].is_ascii_digit() {
                nonzero |= rest[j] != b'0';
                j += 1;
                digits += 1;
            }
        }
        if digits == 0 {
            // No conversion: strtod leaves the end pointer at the very start.
            return if s.is_empty() { Some(0.0) } else { None };
        }
        if j < rest.len() && (rest[j] == b'e' || rest[j] == b'E') {
            let mut k = j + 1;
            if k < rest.len() && (rest[k] == b'+' || rest[k] == b'-') {
                k += 1;
            }
            if k < rest.len() && rest[k].is_ascii_digit() {
                while k < rest.len() && rest[k].is_ascii_digit() {
                    k += 1;
                }
                j = k;
            }
        }
        if j != rest.len() {
            return None;
        }
        let text = std::str::from_utf8(rest).ok()?;
        let v: f64 = text.parse().ok()?;
        if v.is_infinite() || (nonzero && v.abs() < f64::MIN_POSITIVE) {
            return None; // ERANGE
        }
        v
    };
    Some(if neg { -value } else { value })
}

/// The mantissa and exponent of a C hexadecimal float after `0x`; the whole input must be
/// consumed.
fn parse_hex(s: &[u8]) -> Option<f64> {
    let mut j = 0;
    let mut mant = 0f64;
    let mut exp: i64 = 0;
    let mut digits = 0;
    while j < s.len() && s[j].is_ascii_hexdigit() {
        mant = mant * 16.0 + f64::from((s[j] as char).to_digit(16)?);
        j += 1;
        digits += 1;
    }
    if j < s.len() && s[j] == b'.' {
        j += 1;
        while j < s.len() && s[j].is_ascii_hexdigit() {
            mant = mant * 16.0 + f64::from((s[j] as char).to_digit(16)?);
            exp -= 4;
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if j < s.len() && (s[j] == b'p' || s[j] == b'P') {
        let mut k = j + 1;
        let mut eneg = false;
        if k < s.len() && (s[k] == b'+' || s[k] == b'-') {
            eneg = s[k] == b'-';
            k += 1;
        }
        if k < s.len() && s[k].is_ascii_digit() {
            let mut e: i64 = 0;
            while k < s.len() && s[k].is_ascii_digit() {
                e = (e * 10 + i64::from(s[k] - b'0')).min(1 << 20);
                k += 1;
            }
            exp += if eneg { -e } else { e };
            j = k;
        }
    }
    if j != s.len() {
        return None;
    }
    let v = mant * 2f64.powi(exp.clamp(-4000, 4000) as i32);
    if v.is_infinite() || (mant != 0.0 && v.abs() < f64::MIN_POSITIVE) {
        return None;
    }
    Some(v)
}

/// One element of the sorting vector (Redis's `redisSortObject`).
struct Item {
    obj: Vec<u8>,
    score: f64,
    cmp: Option<Vec<u8>>,
}

fn sort_generic(ctx: &mut Ctx<'_>, args: Args<'_>, readonly: bool) -> CmdResult {
    let argc = args.len();
    let mut desc = false;
    let mut alpha = false;
    let mut limit_start: i64 = 0;
    let mut limit_count: i64 = -1;
    let mut store: Option<&[u8]> = None;
    let mut sortby: Option<&[u8]> = None;
    let mut dontsort = false;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut j = 2;
    while j < argc {
        let left = argc - j - 1;
        let a = args.arg(j);
        if is(a, "asc") {
            desc = false;
        } else if is(a, "desc") {
            desc = true;
        } else if is(a, "alpha") {
            alpha = true;
        } else if is(a, "limit") && left >= 2 {
            limit_start = parse_i64(args.arg(j + 1))?;
            limit_count = parse_i64(args.arg(j + 2))?;
            j += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            store = Some(args.arg(j + 1));
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = args.arg(j + 1);
            sortby = Some(p);
            dontsort = !cstr(p).contains(&b'*');
            j += 1;
        } else if is(a, "get") && left >= 1 {
            gets.push(args.arg(j + 1));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }

    let db = ctx.db();
    let src_key = args.arg(1);
    let patterns =
        sortby.is_some_and(|p| !dontsort && reads_keys(p)) || gets.iter().any(|p| reads_keys(p));
    let mut g = if patterns {
        // BY/GET read keys named by the elements: lock everything (see the module doc).
        ctx.ks().lock_all(ctx.now)
    } else {
        ctx.lock_keys(std::iter::once(src_key).chain(store))
    };

    // Load the source (a missing key sorts as an empty list).
    enum Kind {
        List,
        Set,
        ZSet,
    }
    let entry = g.get(db, src_key);
    ctx.hit_key(entry.is_some(), src_key);
    let (kind, len) = match entry.map(|e| &e.value) {
        None => (Kind::List, 0usize),
        Some(Value::List(l)) => (Kind::List, l.len()),
        Some(Value::Set(s)) => (Kind::Set, s.len()),
        Some(Value::ZSet(z)) => (Kind::ZSet, z.len()),
        Some(_) => return Err(CmdError::WrongType),
    };
    if dontsort && matches!(kind, Kind::Set) && store.is_some() {
        // A set has no native order: force a deterministic ALPHA sort for STORE.
        dontsort = false;
        alpha = true;
        sortby = None;
    }

    // LIMIT sanity checks, as Redis (start/end inclusive; end < start: nothing).
    let vlen = len as i64;
    let mut start = limit_start.max(0).min(vlen);
    let limit_count = limit_count.max(-1).min(vlen);
    let mut end = if limit_count < 0 {
        vlen - 1
    } else {
        start + limit_count - 1
    };
    if start >= vlen {
        start = vlen - 1;
        end = vlen - 2;
    }
    if end >= vlen {
        end = vlen - 1;
    }

    let mut vector: Vec<Item> = Vec::new();
    {
        let value = g.get(db, src_key).map(|e| &e.value);
        let item = |obj: Vec<u8>| Item {
            obj,
            score: 0.0,
            cmp: None,
        };
        match value {
            Some(Value::List(l)) if dontsort => {
                // Native order, only the LIMIT range (reversed for DESC).
                let n = (end - start + 1).max(0) as usize;
                let s = start.max(0) as usize;
                if desc {
                    vector.extend(l.iter().rev().skip(s).take(n).map(|e| item(e.to_vec())));
                } else {
                    vector.extend(l.iter().skip(s).take(n).map(|e| item(e.to_vec())));
                }
                end -= start;
                start = 0;
            }
            Some(Value::ZSet(z)) if dontsort => {
                let n = (end - start + 1).max(0) as usize;
                let s = start.max(0) as usize;
                if desc {
                    vector.extend(
                        z.iter()
                            .rev()
                            .skip(s)
                            .take(n)
                            .map(|(m, _)| item(m.to_vec())),
                    );
                } else {
                    vector.extend(z.iter().skip(s).take(n).map(|(m, _)| item(m.to_vec())));
                }
                end -= start;
                start = 0;
            }
            Some(Value::List(l)) => vector.extend(l.iter().map(|e| item(e.to_vec()))),
            Some(Value::Set(s)) => vector.extend(s.iter().map(|e| item(e.to_vec()))),
            Some(Value::ZSet(z)) => vector.extend(z.iter().map(|(m, _)| item(m.to_vec()))),
            _ => {}
        }
    }

    let mut seen = Lookups::default();
    let mut conversion_error = false;
    if !dontsort {
        for it in vector.iter_mut() {
            let byval = match sortby {
                Some(p) => match lookup(&mut g, db, p, &it.obj, &mut seen) {
                    Some(v) => v,
                    None => continue,
                },
                None => {
                    if alpha {
                        continue;
                    }
                    it.obj.clone()
                }
            };
            if alpha {
                it.cmp = Some(byval);
            } else {
                match strtod_full(&byval) {
                    Some(v) => it.score = v,
                    None => conversion_error = true,
                }
            }
        }
        let by_pattern = sortby.is_some();
        vector.sort_by(|a, b| {
            let cmp = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.obj.cmp(&b.obj))
            } else if by_pattern {
                match (&a.cmp, &b.cmp) {
                    (Some(x), Some(y)) => x.cmp(y),
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                }
            } else {
                a.obj.cmp(&b.obj)
            };
            if desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
    }

    if conversion_error {
        drop(g);
        seen.report(ctx);
        return Err(CmdError::err(
            "One or more scores can't be converted into double",
        ));
    }
    let count = (end - start + 1).max(0) as usize;
    let range = || vector.iter().skip(start.max(0) as usize).take(count);
    let outputlen = if gets.is_empty() {
        count
    } else {
        gets.len() * count
    };
    match store {
        None => {
            let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(outputlen);
            for it in range() {
                if gets.is_empty() {
                    out.push(Some(it.obj.clone()));
                }
                for p in &gets {
                    out.push(lookup(&mut g, db, p, &it.obj, &mut seen));
                }
            }
            drop(g);
            seen.report(ctx);
            ctx.out.array(out.len());
            for v in &out {
                match v {
                    Some(b) => ctx.out.bulk(b),
                    None => ctx.out.null(),
                }
            }
        }
        Some(dst) => {
            let mut list = storage::list::List::with_capacity(outputlen);
            for it in range() {
                if gets.is_empty() {
                    list.push_back(&it.obj);
                }
                for p in &gets {
                    let v = lookup(&mut g, db, p, &it.obj, &mut seen);
                    list.push_back(v.as_deref().unwrap_or(b""));
                }
            }
            seen.report(ctx);
            if outputlen > 0 {
                g.insert(db, dst, Value::List(Box::new(list)), 0);
                ctx.notify(crate::notify::LIST, "sortstore", dst);
            } else if g.remove(db, dst).is_some() {
                ctx.notify(crate::notify::GENERIC, "del", dst);
            }
            drop(g);
            ctx.out.int(outputlen as i64);
        }
    }
    Ok(())
}
