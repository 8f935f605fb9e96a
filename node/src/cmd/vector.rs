//! Vector sets: Redis 8's VADD, VSIM, VREM, VCARD, VDIM, VEMB, VINFO, VGETATTR, VSETATTR,
//! VRANDMEMBER, VLINKS and VISMEMBER (reply shapes, scores and error texts of
//! `modules/vector-sets/vset.c`), and Ember's VSIM.CREATEINDEX / VSIM.SET / VSIM.SEARCH /
//! VSIM.DEL / VSIM.GET / VSIM.INFO / VSIM.DROP / VSIM.CARD.
//!
//! Values are [`storage::vset::VectorSet`]: an `Arc<vector::VectorIndex>` (Ember's HNSW graph).
//! A command holds the shard lock only to find the set and clone the `Arc` (and to create
//! or delete the key); searches and inserts into an existing set run after the lock is
//! released, so they never block the other keys of the shard, run in parallel with each
//! other, and an insert racing a DEL lands in the deleted set (as if it ran first, like
//! Redis's threaded VADD CAS). Scores are Redis's: `1 - distance / 2`, the cosine
//! similarity mapped to [0, 1].

use std::sync::Arc;

use resp::{Args, Protocol};
use storage::vset::VectorSet;
use storage::Value;
use vector::{AttrUpdate, Filter, Hit, IndexConfig, Metric, Quant, SearchOpts, VectorIndex};

use crate::cmd::util::{is, parse_float};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Generic;
/// Vector sets have no data-type ACL category of their own in Ember.
const CATS: &[&str] = &[];

/// Largest VRANDMEMBER reply with repetitions (negative count).
const MAX_RANDOM_REPLY: u64 = 1 << 24;
/// Default VSIM COUNT.
const DEFAULT_COUNT: usize = 10;
/// Default EF when a set is created (Redis `VSET_DEFAULT_C_EF`).
const DEFAULT_EF_CONSTRUCTION: usize = 200;

/// Vector set commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("vadd", -5, WRITE | DENYOOM, (1, 1, 1), G, vadd)
        .doc(
            "Add one or more elements to a vector set, or update its vector if it already exists",
            "8.0.0",
        )
        .categories(CATS),
    CommandSpec::new("vsim", -4, READONLY, (1, 1, 1), G, vsim)
        .doc("Return elements by vector similarity", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vrem", 3, WRITE, (1, 1, 1), G, vrem)
        .doc("Remove an element from a vector set", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vcard", 2, READONLY | FAST, (1, 1, 1), G, vcard)
        .doc("Return the number of elements in a vector set", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vdim", 2, READONLY | FAST, (1, 1, 1), G, vdim)
        .doc("Return the dimension of vectors in the vector set", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vemb", -3, READONLY | FAST, (1, 1, 1), G, vemb)
        .doc("Return the vector associated with an element", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vinfo", 2, READONLY | FAST, (1, 1, 1), G, vinfo)
        .doc("Return information about a vector set", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vgetattr", 3, READONLY | FAST, (1, 1, 1), G, vgetattr)
        .doc("Retrieve the JSON attributes of elements", "8.0.0")
        .categories(CATS),
    CommandSpec::new("vsetattr", 4, WRITE | FAST, (1, 1, 1), G, vsetattr)
        .doc(
            "Associate or remove the JSON attributes of elements",
            "8.0.0",
        )
        .categories(CATS),
    CommandSpec::new("vrandmember", -2, READONLY, (1, 1, 1), G, vrandmember)
        .doc(
            "Return one or multiple random members from a vector set",
            "8.0.0",
        )
        .categories(CATS),
    CommandSpec::new("vlinks", -3, READONLY | FAST, (1, 1, 1), G, vlinks)
        .doc(
            "Return the neighbors of an element at each layer in the HNSW graph",
            "8.0.0",
        )
        .categories(CATS),
    CommandSpec::new("vismember", 3, READONLY, (1, 1, 1), G, vismember)
        .doc("Check if an element exists in a vector set", "8.2.0")
        .categories(CATS),
    CommandSpec::new(
        "vsim.createindex",
        -4,
        WRITE | DENYOOM,
        (1, 1, 1),
        G,
        vsim_createindex,
    )
    .doc("Creates an empty vector index (Ember).", "0.1.0")
    .categories(CATS),
    CommandSpec::new("vsim.set", -4, WRITE | DENYOOM, (1, 1, 1), G, vsim_set)
        .doc(
            "Adds or replaces an element of a vector index (Ember).",
            "0.1.0",
        )
        .categories(CATS),
    CommandSpec::new("vsim.search", -4, READONLY, (1, 1, 1), G, vsim_search)
        .doc(
            "Returns the K nearest elements of a vector index (Ember).",
            "0.1.0",
        )
        .categories(CATS),
    CommandSpec::new("vsim.del", 3, WRITE, (1, 1, 1), G, vsim_del)
        .doc("Removes an element from a vector index (Ember).", "0.1.0")
        .categories(CATS),
    CommandSpec::new("vsim.get", 3, READONLY, (1, 1, 1), G, vsim_get)
        .doc(
            "Returns an element's vector and attributes (Ember).",
            "0.1.0",
        )
        .categories(CATS),
    CommandSpec::new("vsim.info", 2, READONLY, (1, 1, 1), G, vsim_info)
        .doc(
            "Returns a vector index's parameters and size (Ember).",
            "0.1.0",
        )
        .categories(CATS),
    CommandSpec::new("vsim.drop", 2, WRITE, (1, 1, 1), G, vsim_drop)
        .doc("Deletes a vector index (Ember).", "0.1.0")
        .categories(CATS),
    CommandSpec::new("vsim.card", 2, READONLY | FAST, (1, 1, 1), G, vsim_card)
        .doc(
            "Returns the number of elements of a vector index (Ember).",
            "0.1.0",
        )
        .categories(CATS),
];

// ------------------------------------------------------------------------------------------
// Shared helpers

/// The set at `key` (its index `Arc` and uid), cloned under the shard lock; `None` when the
/// key is missing; WRONGTYPE for another type.
fn open(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<(Arc<VectorIndex>, u64)>, CmdError> {
    let mut g = ctx.lock(key);
    match g.get() {
        Some(e) => match &e.value {
            Value::VectorSet(v) => {
                let r = (v.index.clone(), v.uid);
                drop(g);
                ctx.hit(true);
                Ok(Some(r))
            }
            _ => Err(CmdError::WrongType),
        },
        None => {
            drop(g);
            ctx.hit_key(false, key);
            Ok(None)
        }
    }
}

/// Redis's score for a distance: `1 - d / 2` (cosine similarity in [0, 1]).
fn score(d: f32) -> f64 {
    1.0 - f64::from(d) / 2.0
}

fn vec_error() -> CmdError {
    CmdError::err("invalid vector specification")
}

fn dim_mismatch(got: usize, want: usize) -> CmdError {
    CmdError::err(format!(
        "Vector dimension mismatch - got {got} but set has {want}"
    ))
}

fn engine_error(e: vector::Error) -> CmdError {
    match e {
        vector::Error::Dimension { got, want } => dim_mismatch(got, want),
        other => CmdError::err(other),
    }
}

/// An FP32 blob (little-endian floats) as a vector.
fn fp32_blob(b: &[u8]) -> Option<Vec<f32>> {
    if b.is_empty() || !b.len().is_multiple_of(4) || b.len() / 4 > vector::MAX_DIM {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Parses Redis's vector forms at `args[at..]`: `[REDUCE dim] FP32 blob | VALUES n v...`.
/// Returns (vector, reduce dimension or 0, arguments consumed).
fn parse_vector(
    args: &Args<'_>,
    at: usize,
    allow_reduce: bool,
) -> Option<(Vec<f32>, usize, usize)> {
    let mut i = at;
    let mut reduce = 0usize;
    if allow_reduce && args.len() > i + 2 && is(args.arg(i), "reduce") {
        let r = storage::value::parse_canonical_i64(args.arg(i + 1))?;
        if r <= 0 {
            return None;
        }
        reduce = usize::try_from(r).ok()?;
        i += 2;
    }
    let kind = args.get(i)?;
    let v = if is(kind, "fp32") {
        let v = fp32_blob(args.get(i + 1)?)?;
        i += 2;
        v
    } else if is(kind, "values") {
        let n = storage::value::parse_canonical_i64(args.get(i + 1)?)?;
        if n < 1 || n as usize > vector::MAX_DIM {
            return None;
        }
        let n = n as usize;
        if args.len() < i + 2 + n {
            return None;
        }
        let mut v = Vec::with_capacity(n);
        for j in 0..n {
            v.push(parse_float(args.arg(i + 2 + j))? as f32);
        }
        i += 2 + n;
        v
    } else {
        return None;
    };
    if reduce > v.len() {
        return None;
    }
    Some((v, reduce, i - at))
}

// ------------------------------------------------------------------------------------------
// VADD

fn vadd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(1);
    let (vec, reduce, used) = parse_vector(&args, 2, true).ok_or_else(vec_error)?;
    let ele_at = 2 + used;
    if ele_at >= args.len() {
        return Err(CmdError::Arity("vadd".into()));
    }
    let ele = args.arg(ele_at);
    let mut quant = Quant::I8; // Redis's default is Q8.
    let mut ef = DEFAULT_EF_CONSTRUCTION;
    let mut m = 16usize;
    let mut attrs: Option<&[u8]> = None;
    let mut j = ele_at + 1;
    while j < args.len() {
        let opt = args.arg(j);
        let has_arg = j + 1 < args.len();
        if is(opt, "cas") {
        } else if is(opt, "ef") && has_arg {
            ef = match storage::value::parse_canonical_i64(args.arg(j + 1)) {
                Some(v) if (1..=1_000_000).contains(&v) => v as usize,
                _ => return Err(CmdError::err("invalid EF")),
            };
            j += 1;
        } else if is(opt, "m") && has_arg {
            m = match storage::value::parse_canonical_i64(args.arg(j + 1)) {
                Some(v) if (vector::MIN_M as i64..=vector::MAX_M as i64).contains(&v) => v as usize,
                _ => return Err(CmdError::err("invalid M")),
            };
            j += 1;
        } else if is(opt, "setattr") && has_arg {
            attrs = Some(args.arg(j + 1));
            j += 1;
        } else if is(opt, "noquant") {
            quant = Quant::F32;
        } else if is(opt, "bin") {
            quant = Quant::B1;
        } else if is(opt, "q8") {
            quant = Quant::I8;
        } else {
            return Err(CmdError::err("invalid option after element"));
        }
        j += 1;
    }
    if vec.iter().any(|x| !x.is_finite()) {
        return Err(vec_error());
    }
    let attr_update = attrs.map_or(AttrUpdate::Keep, AttrUpdate::Set);

    let mut g = ctx.lock(key);
    let index = match g.get() {
        Some(e) => {
            let Value::VectorSet(v) = &e.value else {
                return Err(CmdError::WrongType);
            };
            let c = v.index.config();
            if c.quant != quant {
                return Err(CmdError::err(
                    "asked quantization mismatch with existing vector set",
                ));
            }
            if c.m != m {
                return Err(CmdError::err(
                    "asked M value mismatch with existing vector set",
                ));
            }
            if (c.projection_from == 0 && c.dim != vec.len())
                || (c.projection_from != 0 && c.dim != reduce && reduce != 0)
            {
                return Err(dim_mismatch(vec.len(), c.dim));
            }
            if reduce != 0 && c.projection_from == 0 {
                return Err(CmdError::err(
                    "cannot add projection to existing set without projection",
                ));
            }
            if c.projection_from != 0 && vec.len() != c.projection_from {
                return Err(CmdError::err(format!(
                    "Input dimension mismatch for projection - got {} but projection expects {}",
                    vec.len(),
                    c.projection_from
                )));
            }
            v.index.clone()
        }
        None => {
            // Create the set and insert the first element under the lock, so nobody sees
            // it empty.
            let cfg = IndexConfig {
                dim: if reduce != 0 { reduce } else { vec.len() },
                metric: Metric::Cosine,
                quant,
                m,
                ef_construction: ef,
                projection_from: if reduce != 0 { vec.len() } else { 0 },
            };
            let index = VectorIndex::new(cfg).map_err(engine_error)?;
            let v = index.prepare(&vec).map_err(engine_error)?;
            index.upsert(ele, &v, attr_update).map_err(engine_error)?;
            g.insert(Value::VectorSet(VectorSet::new(index)), 0);
            drop(g);
            ctx.out.boolean(true);
            return Ok(());
        }
    };
    drop(g);
    let v = index.prepare(&vec).map_err(engine_error)?;
    let added = index.upsert(ele, &v, attr_update).map_err(engine_error)?;
    ctx.out.boolean(added);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// VSIM

/// Options of VSIM (and VSIM.SEARCH).
struct SimOpts {
    with_scores: bool,
    with_attrs: bool,
    count: usize,
    epsilon: f64,
    ef: usize,
    filter: Option<Filter>,
    filter_ef: usize,
    truth: bool,
}

fn filter_error(expr: &[u8], pos: usize) -> CmdError {
    let pos = if pos >= expr.len() { 0 } else { pos };
    CmdError::err(format!(
        "syntax error in FILTER expression near: {}",
        String::from_utf8_lossy(&expr[pos..])
    ))
}

fn vsim(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(1);
    let Some((index, _)) = open(ctx, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let kind = args.arg(2);
    let (query, used) = if is(kind, "ele") {
        let Some(v) = index.get_vector(args.arg(3)) else {
            return Err(CmdError::err("element not found in set"));
        };
        // Stored vectors are in the index's space already.
        (v, 2)
    } else {
        let Some((v, _, used)) = parse_vector(&args, 2, false) else {
            return Err(vec_error());
        };
        if !is(kind, "fp32") && !is(kind, "values") {
            return Err(CmdError::err("vector type must be ELE, FP32 or VALUES"));
        }
        let v = index.prepare(&v).map_err(|e| match e {
            vector::Error::Dimension { got, want } if index.config().projection_from != 0 => {
                CmdError::err(format!(
                    "Input dimension mismatch for projection - got {got} but projection expects {}",
                    index.config().projection_from.max(want)
                ))
            }
            e => engine_error(e),
        })?;
        (v, used)
    };
    let mut o = SimOpts {
        with_scores: false,
        with_attrs: false,
        count: DEFAULT_COUNT,
        epsilon: 2.0,
        ef: 0,
        filter: None,
        filter_ef: 0,
        truth: false,
    };
    let mut j = 2 + used;
    while j < args.len() {
        let opt = args.arg(j);
        let val = args.get(j + 1);
        if is(opt, "withscores") {
            o.with_scores = true;
        } else if is(opt, "withattribs") {
            o.with_attrs = true;
        } else if is(opt, "truth") {
            o.truth = true;
        } else if is(opt, "nothread") {
        } else if let (true, Some(val)) = (is(opt, "count"), val) {
            o.count = match storage::value::parse_canonical_i64(val) {
                Some(c) if c > 0 => c as usize,
                _ => return Err(CmdError::err("invalid COUNT")),
            };
            j += 1;
        } else if let (true, Some(val)) = (is(opt, "epsilon"), val) {
            o.epsilon = match parse_float(val) {
                Some(e) if e > 0.0 => e,
                _ => return Err(CmdError::err("invalid EPSILON")),
            };
            j += 1;
        } else if let (true, Some(val)) = (is(opt, "ef"), val) {
            o.ef = match storage::value::parse_canonical_i64(val) {
                Some(e) if (1..=1_000_000).contains(&e) => e as usize,
                _ => return Err(CmdError::err("invalid EF")),
            };
            j += 1;
        } else if let (true, Some(val)) = (is(opt, "filter-ef"), val) {
            o.filter_ef = match storage::value::parse_canonical_i64(val) {
                Some(e) if e > 0 => e as usize,
                _ => return Err(CmdError::err("invalid FILTER-EF")),
            };
            j += 1;
        } else if let (true, Some(val)) = (is(opt, "filter"), val) {
            o.filter = Some(Filter::compile(val).map_err(|e| filter_error(val, e.pos))?);
            j += 1;
        } else {
            return Err(CmdError::err("syntax error in VSIM command"));
        }
        j += 1;
    }
    let hits = run_search(&index, &query, &o)?;
    reply_hits(ctx, &hits, &o, score);
    Ok(())
}

fn run_search(index: &VectorIndex, q: &[f32], o: &SimOpts) -> Result<Vec<Hit>, CmdError> {
    let len = index.len();
    let ef = if o.ef == 0 { 100 } else { o.ef }
        .max(o.count)
        .min(len.max(1));
    let mut hits = index
        .search(
            q,
            &SearchOpts {
                k: o.count.min(len.max(1)),
                ef,
                filter: o.filter.as_ref(),
                filter_ef: o.filter_ef,
                exact: o.truth,
                with_attrs: o.with_attrs,
            },
        )
        .map_err(engine_error)?;
    if o.epsilon < 2.0 {
        if let Some(cut) = hits
            .iter()
            .position(|h| f64::from(h.distance) / 2.0 > o.epsilon)
        {
            hits.truncate(cut);
        }
    }
    Ok(hits)
}

/// VSIM's reply: names, then per name the score and/or attributes (RESP2 flat; RESP3 a map
/// to the score, the attributes, or a [score, attributes] pair).
fn reply_hits(ctx: &mut Ctx<'_>, hits: &[Hit], o: &SimOpts, to_score: fn(f32) -> f64) {
    let resp3 = ctx.out.protocol() == Protocol::Resp3;
    let out = &mut *ctx.out;
    if resp3 && (o.with_scores || o.with_attrs) {
        out.map(hits.len());
    } else {
        out.array(hits.len() * (1 + usize::from(o.with_scores) + usize::from(o.with_attrs)));
    }
    for h in hits {
        out.bulk(&h.name);
        if resp3 && o.with_scores && o.with_attrs {
            out.array(2);
        }
        if o.with_scores {
            out.double(to_score(h.distance));
        }
        if o.with_attrs {
            match &h.attrs {
                Some(a) => out.bulk(a),
                None => out.null(),
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// VREM VCARD VDIM VEMB VINFO VGETATTR VSETATTR VRANDMEMBER VLINKS VISMEMBER

/// Removes `ele` from the set at `key`, deleting the key when it empties; `None` when the
/// key is missing.
fn remove_element(ctx: &mut Ctx<'_>, key: &[u8], ele: &[u8]) -> Result<Option<bool>, CmdError> {
    let mut g = ctx.lock(key);
    let Some(e) = g.get() else { return Ok(None) };
    let Value::VectorSet(v) = &e.value else {
        return Err(CmdError::WrongType);
    };
    let removed = v.index.remove(ele);
    if removed && v.index.is_empty() {
        g.remove();
    }
    Ok(Some(removed))
}

fn vrem(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let r = remove_element(ctx, args.arg(1), args.arg(2))?;
    ctx.out.boolean(r == Some(true));
    Ok(())
}

fn vcard(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let n = open(ctx, args.arg(1))?.map_or(0, |(i, _)| i.len());
    ctx.out.int(n as i64);
    Ok(())
}

fn vdim(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let Some((i, _)) = open(ctx, args.arg(1))? else {
        return Err(CmdError::err("key does not exist"));
    };
    ctx.out.int(i.config().dim as i64);
    Ok(())
}

fn vemb(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut raw = false;
    for a in args.iter().skip(3) {
        if is(a, "raw") {
            raw = true;
        } else {
            return Err(CmdError::err("invalid option"));
        }
    }
    let Some((i, _)) = open(ctx, args.arg(1))? else {
        ctx.out.null();
        return Ok(());
    };
    let ele = args.arg(2);
    if raw {
        let Some((bytes, norm)) = i.get_raw(ele) else {
            ctx.out.null();
            return Ok(());
        };
        let q8 = i.config().quant == Quant::I8;
        ctx.out.array(3 + usize::from(q8));
        ctx.out.simple(i.config().quant.redis_name().as_bytes());
        ctx.out.bulk(&bytes);
        ctx.out.double(f64::from(norm));
        if q8 {
            // Components are round(127 * x / |x|): the range of the normalized vector is 1.
            ctx.out.double(1.0);
        }
        return Ok(());
    }
    match i.get_vector(ele) {
        Some(v) => {
            ctx.out.array(v.len());
            for x in v {
                ctx.out.double(f64::from(x));
            }
        }
        None => ctx.out.null(),
    }
    Ok(())
}

fn vinfo(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let Some((i, uid)) = open(ctx, args.arg(1))? else {
        ctx.out.null_array();
        return Ok(());
    };
    let c = i.config();
    let out = &mut *ctx.out;
    out.map(9);
    out.simple(b"quant-type");
    out.simple(c.quant.redis_name().as_bytes());
    out.simple(b"hnsw-m");
    out.int(c.m as i64);
    out.simple(b"vector-dim");
    out.int(c.dim as i64);
    out.simple(b"projection-input-dim");
    out.int(c.projection_from as i64);
    out.simple(b"size");
    out.int(i.len() as i64);
    out.simple(b"max-level");
    out.int(i.max_level() as i64);
    out.simple(b"attributes-count");
    out.int(i.attrs_count() as i64);
    out.simple(b"vset-uid");
    out.int(uid as i64);
    out.simple(b"hnsw-max-node-uid");
    out.int(i.max_node_uid() as i64);
    Ok(())
}

fn vgetattr(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    match open(ctx, args.arg(1))?.and_then(|(i, _)| i.get_attrs(args.arg(2))) {
        Some(Some(a)) => ctx.out.bulk(&a),
        _ => ctx.out.null(),
    }
    Ok(())
}

fn vsetattr(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let set = open(ctx, args.arg(1))?.is_some_and(|(i, _)| i.set_attrs(args.arg(2), args.arg(3)));
    ctx.out.boolean(set);
    Ok(())
}

fn vrandmember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Arity("vrandmember".into()));
    }
    let count = match args.get(2) {
        Some(c) => {
            let c = storage::value::parse_canonical_i64(c)
                .ok_or_else(|| CmdError::err("COUNT value is not an integer"))?;
            if c == 0 {
                ctx.out.array(0);
                return Ok(());
            }
            Some(c)
        }
        None => None,
    };
    let set = open(ctx, args.arg(1))?.filter(|(i, _)| !i.is_empty());
    let Some((i, _)) = set else {
        if count.is_some() {
            ctx.out.array(0);
        } else {
            ctx.out.null();
        }
        return Ok(());
    };
    let Some(count) = count else {
        match i.random(1, true).first() {
            Some(n) => ctx.out.bulk(n),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    let dups = count < 0;
    let n = count.unsigned_abs();
    if dups && n > MAX_RANDOM_REPLY {
        return Err(CmdError::err("value is out of range"));
    }
    let picks = i.random(n.min(usize::MAX as u64) as usize, !dups);
    ctx.out.array(picks.len());
    for p in &picks {
        ctx.out.bulk(p);
    }
    Ok(())
}

fn vlinks(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::Arity("vlinks".into()));
    }
    let with_scores = match args.get(3) {
        Some(a) if is(a, "withscores") => true,
        Some(_) => return Err(CmdError::Arity("vlinks".into())),
        None => false,
    };
    let Some(layers) = open(ctx, args.arg(1))?.and_then(|(i, _)| i.links(args.arg(2))) else {
        ctx.out.null();
        return Ok(());
    };
    ctx.out.array(layers.len());
    for layer in &layers {
        if with_scores {
            ctx.out.map(layer.len());
        } else {
            ctx.out.array(layer.len());
        }
        for (name, d) in layer {
            ctx.out.bulk(name);
            if with_scores {
                ctx.out.double(score(*d));
            }
        }
    }
    Ok(())
}

fn vismember(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let found = open(ctx, args.arg(1))?.is_some_and(|(i, _)| i.contains(args.arg(2)));
    ctx.out.boolean(found);
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Ember's VSIM.* commands

fn no_index() -> CmdError {
    CmdError::err("no such vector index")
}

/// The index at `key`, or "no such vector index".
fn open_index(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Arc<VectorIndex>, CmdError> {
    open(ctx, key)?.map(|(i, _)| i).ok_or_else(no_index)
}

fn parse_count(b: &[u8], what: &str, min: i64, max: i64) -> Result<usize, CmdError> {
    match storage::value::parse_canonical_i64(b) {
        Some(v) if (min..=max).contains(&v) => Ok(v as usize),
        _ => Err(CmdError::err(format!(
            "{what} must be an integer between {min} and {max}"
        ))),
    }
}

fn vsim_createindex(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(1);
    let mut cfg = IndexConfig::new(0);
    let mut have_dim = false;
    let mut j = 2;
    while j < args.len() {
        let opt = args.arg(j);
        let Some(val) = args.get(j + 1) else {
            return Err(CmdError::Syntax);
        };
        if is(opt, "dim") {
            cfg.dim = parse_count(val, "DIM", 1, vector::MAX_DIM as i64)?;
            have_dim = true;
        } else if is(opt, "metric") {
            cfg.metric = if is(val, "cosine") || is(val, "cos") {
                Metric::Cosine
            } else if is(val, "l2") {
                Metric::L2
            } else if is(val, "ip") {
                Metric::Ip
            } else {
                return Err(CmdError::err("METRIC must be cosine, l2 or ip"));
            };
        } else if is(opt, "m") {
            cfg.m = parse_count(val, "M", vector::MIN_M as i64, vector::MAX_M as i64)?;
        } else if is(opt, "ef_construction") {
            cfg.ef_construction = parse_count(val, "EF_CONSTRUCTION", 1, 1_000_000)?;
        } else if is(opt, "quant") {
            cfg.quant = if is(val, "f32") {
                Quant::F32
            } else if is(val, "f16") {
                Quant::F16
            } else if is(val, "i8") {
                Quant::I8
            } else if is(val, "b1") {
                Quant::B1
            } else {
                return Err(CmdError::err("QUANT must be f32, f16, i8 or b1"));
            };
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    if !have_dim {
        return Err(CmdError::err("DIM is required"));
    }
    let index = VectorIndex::new(cfg).map_err(engine_error)?;
    let mut g = ctx.lock(key);
    if g.get().is_some() {
        return Err(CmdError::err("index already exists"));
    }
    g.insert(Value::VectorSet(VectorSet::new(index)), 0);
    drop(g);
    ctx.out.ok();
    Ok(())
}

/// A vector given as one argument: an FP32 blob of exactly `dim * 4` bytes, or numbers
/// separated by commas and/or spaces, optionally in brackets (`[0.1, 0.2]`).
fn one_arg_vector(b: &[u8], dim: usize) -> Option<Vec<f32>> {
    if let Some(v) = text_vector(b) {
        return Some(v);
    }
    if b.len() == dim * 4 {
        return fp32_blob(b);
    }
    None
}

fn text_vector(b: &[u8]) -> Option<Vec<f32>> {
    let s = std::str::from_utf8(b).ok()?.trim();
    let s = s
        .strip_prefix('[')
        .map_or(s, |s| s.strip_suffix(']').unwrap_or(s));
    let v: Option<Vec<f32>> = s
        .split(|c: char| c == ',' || c.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| parse_float(t.as_bytes()).map(|f| f as f32))
        .collect();
    v.filter(|v| !v.is_empty())
}

fn vsim_set(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let index = open_index(ctx, args.arg(1))?;
    let id = args.arg(2);
    let dim = index.input_dim();
    // The vector: arguments up to ATTR (or the end).
    let mut end = args.len();
    let mut attrs = None;
    if args.len() >= 6 && is(args.arg(args.len() - 2), "attr") {
        end = args.len() - 2;
        attrs = Some(args.arg(args.len() - 1));
    }
    let parts = args.slice(3);
    let n = end - 3;
    let vec = if n == 1 {
        one_arg_vector(parts.arg(0), dim)
    } else {
        (0..n)
            .map(|i| parse_float(parts.arg(i)).map(|f| f as f32))
            .collect::<Option<Vec<f32>>>()
    }
    .ok_or_else(|| CmdError::err("vector must be an FP32 blob or a list of numbers"))?;
    if vec.iter().any(|x| !x.is_finite()) {
        return Err(CmdError::err("vector components must be finite numbers"));
    }
    let v = index.prepare(&vec).map_err(engine_error)?;
    let upd = attrs.map_or(AttrUpdate::Keep, AttrUpdate::Set);
    if let Some(a) = attrs {
        if !a.is_empty() && serde_json_valid(a).is_none() {
            return Err(CmdError::err("ATTR must be a JSON object"));
        }
    }
    let added = index.upsert(id, &v, upd).map_err(engine_error)?;
    ctx.out.int(i64::from(added));
    Ok(())
}

/// `Some(())` when `b` is a JSON object.
fn serde_json_valid(b: &[u8]) -> Option<()> {
    let s = std::str::from_utf8(b).ok()?;
    vector::filter::is_json_object(s).then_some(())
}

fn vsim_search(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let index = open_index(ctx, args.arg(1))?;
    let vec = one_arg_vector(args.arg(2), index.input_dim())
        .ok_or_else(|| CmdError::err("vector must be an FP32 blob or a list of numbers"))?;
    let q = index.prepare(&vec).map_err(engine_error)?;
    let k = parse_count(args.arg(3), "K", 1, 1_000_000)?;
    let mut o = SimOpts {
        with_scores: false,
        with_attrs: false,
        count: k,
        epsilon: 2.0,
        ef: 0,
        filter: None,
        filter_ef: 0,
        truth: false,
    };
    let mut j = 4;
    while j < args.len() {
        let opt = args.arg(j);
        if is(opt, "withscores") {
            o.with_scores = true;
        } else if is(opt, "withattrs") || is(opt, "withattribs") {
            o.with_attrs = true;
        } else if let (true, Some(val)) = (is(opt, "ef"), args.get(j + 1)) {
            o.ef = parse_count(val, "EF", 1, 1_000_000)?;
            j += 1;
        } else if let (true, Some(val)) = (is(opt, "filter"), args.get(j + 1)) {
            o.filter = Some(Filter::compile(val).map_err(|e| filter_error(val, e.pos))?);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let hits = run_search(&index, &q, &o)?;
    reply_hits(ctx, &hits, &o, f64::from);
    Ok(())
}

fn vsim_del(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    // Unlike VREM, an index that empties stays (it was created explicitly).
    let index = open_index(ctx, args.arg(1))?;
    ctx.out.int(i64::from(index.remove(args.arg(2))));
    Ok(())
}

fn vsim_get(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let index = open_index(ctx, args.arg(1))?;
    let id = args.arg(2);
    let (Some(v), Some(attrs)) = (index.get_vector(id), index.get_attrs(id)) else {
        ctx.out.null();
        return Ok(());
    };
    ctx.out.array(2);
    ctx.out.array(v.len());
    for x in v {
        ctx.out.double(f64::from(x));
    }
    match attrs {
        Some(a) => ctx.out.bulk(&a),
        None => ctx.out.null(),
    }
    Ok(())
}

fn vsim_info(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let index = open_index(ctx, args.arg(1))?;
    let c = *index.config();
    let out = &mut *ctx.out;
    out.map(9);
    out.bulk(b"dim");
    out.int(c.dim as i64);
    out.bulk(b"metric");
    out.bulk(c.metric.name().as_bytes());
    out.bulk(b"quant");
    out.bulk(c.quant.name().as_bytes());
    out.bulk(b"m");
    out.int(c.m as i64);
    out.bulk(b"ef_construction");
    out.int(c.ef_construction as i64);
    out.bulk(b"size");
    out.int(index.len() as i64);
    out.bulk(b"attributes");
    out.int(index.attrs_count() as i64);
    out.bulk(b"max_level");
    out.int(index.max_level() as i64);
    out.bulk(b"memory");
    out.int(index.memory_usage() as i64);
    Ok(())
}

fn vsim_drop(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    match g.get().map(|e| matches!(e.value, Value::VectorSet(_))) {
        None => return Err(no_index()),
        Some(false) => return Err(CmdError::WrongType),
        Some(true) => {}
    }
    let old = g.remove();
    drop(g);
    drop(old);
    ctx.out.ok();
    Ok(())
}

fn vsim_card(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let index = open_index(ctx, args.arg(1))?;
    ctx.out.int(index.len() as i64);
    Ok(())
}
