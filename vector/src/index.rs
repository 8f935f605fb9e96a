//! [`VectorIndex`]: usearch's HNSW plus the element table (name, attributes, norm).
//!
//! Locking: `hnsw` is a read-write lock around the usearch index and its current search
//! breadth. Adds and searches take it shared (usearch runs them concurrently, each on one
//! of its per-thread contexts, handed out by `slots`); growing the capacity, removing,
//! changing the search breadth, walking links and serializing take it exclusively.
//! `meta` (names, attributes) is a separate lock held only for map lookups and updates,
//! never across a graph operation except a filtered search's predicate calls.

use std::sync::atomic::{AtomicUsize, Ordering};

use foldhash::fast::RandomState;
use hashbrown::HashMap;
use parking_lot::{Condvar, Mutex, RwLock, RwLockUpgradableReadGuard};
use rand::Rng;
use usearch::{b1x8, Index, IndexOptions, MetricKind, ScalarKind};

use crate::filter::Filter;
use crate::Error;

/// Largest vector dimension (Redis's `VSET_MAX_VECTOR_DIM`).
pub const MAX_DIM: usize = 1 << 16;
/// Smallest HNSW M (Redis's `HNSW_MIN_M`).
pub const MIN_M: usize = 4;
/// Largest HNSW M (Redis's `HNSW_MAX_M`).
pub const MAX_M: usize = 4096;

/// Largest projection matrix (input x output floats, 64 MiB) a REDUCE may ask for.
pub const MAX_PROJECTION: usize = 1 << 24;

/// usearch per-thread contexts reserved per index: at most this many adds and searches run
/// inside usearch at once (callers beyond wait for a free one).
const THREADS: usize = 16;

/// Distance function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Cosine distance `1 - cos` (vectors are normalized on insert).
    Cosine,
    /// Squared Euclidean distance.
    L2,
    /// Inner-product distance `1 - a.b`.
    Ip,
}

impl Metric {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::L2 => "l2",
            Metric::Ip => "ip",
        }
    }

    fn code(self) -> u8 {
        match self {
            Metric::Cosine => 0,
            Metric::L2 => 1,
            Metric::Ip => 2,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => Metric::Cosine,
            1 => Metric::L2,
            2 => Metric::Ip,
            _ => return None,
        })
    }
}

/// How stored vectors are quantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quant {
    /// 32-bit floats (no quantization; Redis `NOQUANT`).
    F32,
    /// 16-bit floats.
    F16,
    /// 8-bit integers of the normalized vector (Redis `Q8`; cosine only).
    I8,
    /// One sign bit per component, compared by Hamming distance (Redis `BIN`; cosine only).
    B1,
}

impl Quant {
    /// Lower-case name (`f32`, `f16`, `i8`, `b1`).
    pub fn name(self) -> &'static str {
        match self {
            Quant::F32 => "f32",
            Quant::F16 => "f16",
            Quant::I8 => "i8",
            Quant::B1 => "b1",
        }
    }

    /// The name Redis 8's VINFO / VEMB RAW use (`f32`, `int8`, `bin`; `f16` for F16).
    pub fn redis_name(self) -> &'static str {
        match self {
            Quant::F32 => "f32",
            Quant::F16 => "f16",
            Quant::I8 => "int8",
            Quant::B1 => "bin",
        }
    }

    /// Bytes one stored vector of `dim` components takes.
    pub fn vector_bytes(self, dim: usize) -> usize {
        match self {
            Quant::F32 => dim * 4,
            Quant::F16 => dim * 2,
            Quant::I8 => dim,
            Quant::B1 => dim.div_ceil(8),
        }
    }

    fn code(self) -> u8 {
        match self {
            Quant::F32 => 0,
            Quant::F16 => 1,
            Quant::I8 => 2,
            Quant::B1 => 3,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => Quant::F32,
            1 => Quant::F16,
            2 => Quant::I8,
            3 => Quant::B1,
            _ => return None,
        })
    }
}

/// Parameters fixed when an index is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexConfig {
    /// Dimension of stored vectors (after any projection).
    pub dim: usize,
    /// Distance function.
    pub metric: Metric,
    /// Quantization of stored vectors.
    pub quant: Quant,
    /// HNSW connectivity (links per node per upper layer; twice that on layer 0).
    pub m: usize,
    /// Candidate list size while inserting.
    pub ef_construction: usize,
    /// Input dimension of a random projection down to `dim` (Redis `REDUCE`); 0: none.
    pub projection_from: usize,
}

impl IndexConfig {
    /// A configuration with the defaults of Redis 8 vector sets for `dim`: cosine, M 16,
    /// EF construction 200, f32.
    pub fn new(dim: usize) -> Self {
        IndexConfig {
            dim,
            metric: Metric::Cosine,
            quant: Quant::F32,
            m: 16,
            ef_construction: 200,
            projection_from: 0,
        }
    }

    fn validate(&self) -> Result<(), Error> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return Err(Error::Invalid(format!(
                "dimension must be between 1 and {MAX_DIM}"
            )));
        }
        if !(MIN_M..=MAX_M).contains(&self.m) {
            return Err(Error::Invalid(format!(
                "M must be between {MIN_M} and {MAX_M}"
            )));
        }
        if self.ef_construction == 0 || self.ef_construction > 1_000_000 {
            return Err(Error::Invalid(
                "EF construction must be between 1 and 1000000".into(),
            ));
        }
        if matches!(self.quant, Quant::I8 | Quant::B1) && self.metric != Metric::Cosine {
            return Err(Error::Invalid(format!(
                "{} quantization needs the cosine metric",
                self.quant.name()
            )));
        }
        if self.projection_from != 0
            && (self.projection_from < self.dim || self.projection_from > MAX_DIM)
        {
            return Err(Error::Invalid(
                "projection must reduce the dimension".into(),
            ));
        }
        if self.projection_from.saturating_mul(self.dim) > MAX_PROJECTION {
            return Err(Error::Invalid(format!(
                "projection matrix too large (input x output dimensions above {MAX_PROJECTION})"
            )));
        }
        Ok(())
    }

    fn options(&self) -> IndexOptions {
        IndexOptions {
            dimensions: self.dim,
            metric: match (self.quant, self.metric) {
                (Quant::B1, _) => MetricKind::Hamming,
                (_, Metric::Cosine) => MetricKind::Cos,
                (_, Metric::L2) => MetricKind::L2sq,
                (_, Metric::Ip) => MetricKind::IP,
            },
            quantization: match self.quant {
                Quant::F32 => ScalarKind::F32,
                Quant::F16 => ScalarKind::F16,
                Quant::I8 => ScalarKind::I8,
                Quant::B1 => ScalarKind::B1,
            },
            connectivity: self.m,
            expansion_add: self.ef_construction,
            expansion_search: DEFAULT_EF,
            multi: false,
        }
    }
}

/// Search breadth used when a search names none (Redis's `VSET_DEFAULT_SEARCH_EF`).
const DEFAULT_EF: usize = 100;

/// What an upsert does to the element's attributes.
#[derive(Clone, Copy, Debug)]
pub enum AttrUpdate<'a> {
    /// Keep them (a new element gets none).
    Keep,
    /// Replace them; an empty string removes them.
    Set(&'a [u8]),
}

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Element name.
    pub name: Vec<u8>,
    /// Distance under the index's metric (cosine: `1 - cos`, in [0, 2]; b1: Hamming distance
    /// scaled to [0, 2]).
    pub distance: f32,
    /// JSON attributes, when asked for and present.
    pub attrs: Option<Vec<u8>>,
}

/// One graph layer's links of an element: (neighbour name, distance).
pub type Layer = Vec<(Vec<u8>, f32)>;

/// Search parameters.
#[derive(Clone, Copy, Debug)]
pub struct SearchOpts<'a> {
    /// Results wanted.
    pub k: usize,
    /// Candidate list size (0: the default, 100); raised to `k` when smaller.
    pub ef: usize,
    /// Only elements whose attributes pass this expression.
    pub filter: Option<&'a Filter>,
    /// Most elements whose attributes a filtered search inspects (0: `k * 100`).
    pub filter_ef: usize,
    /// Exact linear scan instead of the graph.
    pub exact: bool,
    /// Also return each hit's attributes.
    pub with_attrs: bool,
}

impl Default for SearchOpts<'_> {
    fn default() -> Self {
        SearchOpts {
            k: 10,
            ef: 0,
            filter: None,
            filter_ef: 0,
            exact: false,
            with_attrs: false,
        }
    }
}

struct Elem {
    name: Box<[u8]>,
    attrs: Option<Box<[u8]>>,
    /// L2 norm of the vector as given (cosine indexes store the normalized vector).
    norm: f32,
    /// Position in `Meta::order`.
    pos: usize,
}

#[derive(Default)]
struct Meta {
    by_name: HashMap<Box<[u8]>, u64, RandomState>,
    elems: HashMap<u64, Elem, RandomState>,
    /// Live keys, for uniform random picks (swap-remove keeps it dense).
    order: Vec<u64>,
    next_key: u64,
    with_attrs: usize,
    /// Bytes of names and attributes.
    bytes: usize,
}

impl Meta {
    fn insert(&mut self, key: u64, name: &[u8], attrs: Option<Box<[u8]>>, norm: f32) {
        self.bytes += name.len() * 2 + attrs.as_ref().map_or(0, |a| a.len());
        self.with_attrs += usize::from(attrs.is_some());
        let pos = self.order.len();
        self.order.push(key);
        self.by_name.insert(name.into(), key);
        self.elems.insert(
            key,
            Elem {
                name: name.into(),
                attrs,
                norm,
                pos,
            },
        );
    }

    fn remove(&mut self, name: &[u8]) -> Option<(u64, Elem)> {
        let key = self.by_name.remove(name)?;
        let e = self.elems.remove(&key)?;
        self.bytes -= e.name.len() * 2 + e.attrs.as_ref().map_or(0, |a| a.len());
        self.with_attrs -= usize::from(e.attrs.is_some());
        self.order.swap_remove(e.pos);
        if let Some(&moved) = self.order.get(e.pos) {
            if let Some(m) = self.elems.get_mut(&moved) {
                m.pos = e.pos;
            }
        }
        Some((key, e))
    }

    fn set_attrs(&mut self, key: u64, attrs: Option<Box<[u8]>>) {
        if let Some(e) = self.elems.get_mut(&key) {
            self.bytes -= e.attrs.as_ref().map_or(0, |a| a.len());
            self.with_attrs -= usize::from(e.attrs.is_some());
            self.bytes += attrs.as_ref().map_or(0, |a| a.len());
            self.with_attrs += usize::from(attrs.is_some());
            e.attrs = attrs;
        }
    }
}

struct Hnsw {
    index: Index,
    /// The search breadth usearch is currently set to.
    ef: usize,
}

/// A counting semaphore over usearch's per-thread contexts.
struct Slots {
    free: Mutex<usize>,
    cv: Condvar,
}

struct SlotGuard<'a>(&'a Slots);

impl Slots {
    fn acquire(&self) -> SlotGuard<'_> {
        let mut n = self.free.lock();
        while *n == 0 {
            self.cv.wait(&mut n);
        }
        *n -= 1;
        SlotGuard(self)
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.cv.notify_one();
    }
}

/// An HNSW vector index with named elements and JSON attributes. Share it as
/// `Arc<VectorIndex>`; every method takes `&self`.
pub struct VectorIndex {
    cfg: IndexConfig,
    hnsw: RwLock<Hnsw>,
    meta: RwLock<Meta>,
    slots: Slots,
    /// Projection matrix (`dim` rows of `projection_from` columns), when reducing.
    projection: Option<Vec<f32>>,
    /// usearch's capacity, readable without the lock (for [`VectorIndex::memory_usage`]).
    capacity: AtomicUsize,
}

fn engine(e: impl std::fmt::Display) -> Error {
    Error::Engine(e.to_string())
}

/// Sign bits of `v`, most significant bit first (usearch's b1x8 layout).
fn pack_bits(v: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; v.len().div_ceil(8)];
    for (i, x) in v.iter().enumerate() {
        if *x > 0.0 {
            out[i / 8] |= 128 >> (i & 7);
        }
    }
    out
}

/// The packed sign bits of `key` in a b1 index. (The binding wants a buffer of `dim` bytes
/// per vector although it writes `dim / 8`.)
fn get_bits(index: &Index, key: u64, dim: usize) -> Option<Vec<u8>> {
    let mut raw = vec![0u8; dim];
    if index.get(key, b1x8::from_mut_u8s(&mut raw)).ok()? == 0 {
        return None;
    }
    raw.truncate(dim.div_ceil(8));
    Some(raw)
}

/// Redis 8's deterministic Hadamard-pattern projection (`createProjectionMatrix`).
fn projection_matrix(input: usize, output: usize) -> Vec<f32> {
    let scale = 1.0 / (input as f32).sqrt();
    let mut m = Vec::with_capacity(input * output);
    for i in 0..output {
        for j in 0..input {
            let v = if ((i & j) as u32).count_ones().is_multiple_of(2) {
                1.0
            } else {
                -1.0
            };
            m.push(v * scale);
        }
    }
    m
}

impl VectorIndex {
    /// An empty index.
    pub fn new(cfg: IndexConfig) -> Result<Self, Error> {
        cfg.validate()?;
        let index = Index::new(&cfg.options()).map_err(engine)?;
        index
            .reserve_capacity_and_threads(64, THREADS)
            .map_err(engine)?;
        let capacity = AtomicUsize::new(index.capacity());
        Ok(VectorIndex {
            projection: (cfg.projection_from != 0)
                .then(|| projection_matrix(cfg.projection_from, cfg.dim)),
            cfg,
            hnsw: RwLock::new(Hnsw {
                index,
                ef: DEFAULT_EF,
            }),
            meta: RwLock::new(Meta::default()),
            slots: Slots {
                free: Mutex::new(THREADS),
                cv: Condvar::new(),
            },
            capacity,
        })
    }

    /// The creation parameters.
    pub fn config(&self) -> &IndexConfig {
        &self.cfg
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.meta.read().elems.len()
    }

    /// True when the index has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One more than the largest graph key handed out so far (Redis's `hnsw-max-node-uid`).
    pub fn max_node_uid(&self) -> u64 {
        self.meta.read().next_key
    }

    /// Number of elements that have attributes.
    pub fn attrs_count(&self) -> usize {
        self.meta.read().with_attrs
    }

    /// Whether `name` is an element.
    pub fn contains(&self, name: &[u8]) -> bool {
        self.meta.read().by_name.contains_key(name)
    }

    /// Dimension a caller's vector must have: the projection's input dimension when the
    /// index reduces, else the index's.
    pub fn input_dim(&self) -> usize {
        if self.cfg.projection_from != 0 {
            self.cfg.projection_from
        } else {
            self.cfg.dim
        }
    }

    /// Turns a caller's vector into the index's space (projection), checking its length.
    /// A vector already of the index's dimension passes unchanged (Redis accepts both for
    /// queries on a reduced set).
    pub fn prepare(&self, v: &[f32]) -> Result<Vec<f32>, Error> {
        if let Some(p) = &self.projection {
            if v.len() == self.cfg.projection_from {
                let mut out = Vec::with_capacity(self.cfg.dim);
                for row in p.chunks_exact(self.cfg.projection_from) {
                    out.push(row.iter().zip(v).map(|(a, b)| a * b).sum());
                }
                return Ok(out);
            }
        }
        if v.len() != self.cfg.dim {
            return Err(Error::Dimension {
                got: v.len(),
                want: self.cfg.dim,
            });
        }
        Ok(v.to_vec())
    }

    /// Adds `name` with vector `v` (already [`VectorIndex::prepare`]d), or replaces its
    /// vector when it exists. True when the element is new.
    pub fn upsert(&self, name: &[u8], v: &[f32], attrs: AttrUpdate<'_>) -> Result<bool, Error> {
        if v.len() != self.cfg.dim {
            return Err(Error::Dimension {
                got: v.len(),
                want: self.cfg.dim,
            });
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::Invalid("vector components must be finite".into()));
        }
        let norm = v
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt() as f32;
        let stored: Vec<f32> = if self.cfg.metric == Metric::Cosine && norm > 0.0 {
            v.iter().map(|x| x / norm).collect()
        } else {
            v.to_vec()
        };
        let new_attrs = |old: Option<Box<[u8]>>| match attrs {
            AttrUpdate::Keep => old,
            AttrUpdate::Set([]) => None,
            AttrUpdate::Set(b) => Some(b.into()),
        };
        // Replace: drop the old node first (usearch keys are unique), keep its key.
        let (key, old_attrs, existed) = {
            let mut meta = self.meta.write();
            match meta.remove(name) {
                Some((key, e)) => (key, e.attrs, true),
                None => {
                    let key = meta.next_key;
                    meta.next_key += 1;
                    (key, None, false)
                }
            }
        };
        if existed {
            // usearch only fails a removal of a missing key.
            let _ = self.hnsw.write().index.remove(key);
        }
        self.add_node(key, &stored)?;
        // A concurrent upsert of the same name may have finished meanwhile: last one wins.
        let displaced = {
            let mut meta = self.meta.write();
            let displaced = meta.remove(name);
            meta.insert(key, name, new_attrs(old_attrs), norm);
            displaced
        };
        if let Some((other, _)) = &displaced {
            let _ = self.hnsw.write().index.remove(*other);
        }
        Ok(!existed && displaced.is_none())
    }

    /// Inserts `key` into the graph, growing the capacity when full.
    fn add_node(&self, key: u64, v: &[f32]) -> Result<(), Error> {
        loop {
            {
                let h = self.hnsw.read();
                if h.index.size() < h.index.capacity() {
                    let _slot = self.slots.acquire();
                    let r = if self.cfg.quant == Quant::B1 {
                        h.index.add(key, b1x8::from_u8s(&pack_bits(v)))
                    } else {
                        h.index.add(key, v)
                    };
                    match r {
                        Ok(()) => return Ok(()),
                        // Another thread took the last free place: grow and retry.
                        Err(_) if h.index.size() >= h.index.capacity() => {}
                        Err(e) => return Err(engine(e)),
                    }
                }
            }
            let h = self.hnsw.write();
            if h.index.size() >= h.index.capacity() {
                let want = (h.index.capacity() * 2).max(64);
                h.index
                    .reserve_capacity_and_threads(want, THREADS)
                    .map_err(engine)?;
                self.capacity.store(h.index.capacity(), Ordering::Relaxed);
            }
        }
    }

    /// Removes `name`; true when it was there.
    pub fn remove(&self, name: &[u8]) -> bool {
        let Some((key, _)) = self.meta.write().remove(name) else {
            return false;
        };
        // usearch only fails a removal of a missing key, which the table rules out.
        let _ = self.hnsw.write().index.remove(key);
        true
    }

    /// The element's vector as given (denormalized for cosine; dequantized, so
    /// approximate for f16/i8/b1).
    pub fn get_vector(&self, name: &[u8]) -> Option<Vec<f32>> {
        let (key, norm) = {
            let meta = self.meta.read();
            let key = *meta.by_name.get(name)?;
            (key, meta.elems.get(&key)?.norm)
        };
        let h = self.hnsw.read();
        let mut v = self.stored(&h.index, key)?;
        drop(h);
        if self.cfg.metric == Metric::Cosine && self.cfg.quant != Quant::B1 {
            // i8 is stored as round(127 * x / |x|): dequantized it is already unit length.
            for x in &mut v {
                *x *= norm;
            }
        }
        Some(v)
    }

    /// The stored vector of `key`, dequantized (b1: +1 / -1 per component).
    fn stored(&self, index: &Index, key: u64) -> Option<Vec<f32>> {
        let dim = self.cfg.dim;
        if self.cfg.quant == Quant::B1 {
            let raw = get_bits(index, key, dim)?;
            return Some(
                (0..dim)
                    .map(|i| {
                        if raw[i / 8] & (128 >> (i & 7)) != 0 {
                            1.0
                        } else {
                            -1.0
                        }
                    })
                    .collect(),
            );
        }
        let mut v = vec![0f32; dim];
        if index.get(key, &mut v).ok()? == 0 {
            return None;
        }
        Some(v)
    }

    /// The element's stored vector bytes and its norm (Redis `VEMB ... RAW`).
    pub fn get_raw(&self, name: &[u8]) -> Option<(Vec<u8>, f32)> {
        let (key, norm) = {
            let meta = self.meta.read();
            let key = *meta.by_name.get(name)?;
            (key, meta.elems.get(&key)?.norm)
        };
        let dim = self.cfg.dim;
        let h = self.hnsw.read();
        let bytes = match self.cfg.quant {
            Quant::F32 => {
                let mut v = vec![0f32; dim];
                h.index.get(key, &mut v).ok()?;
                v.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
            Quant::F16 => {
                let mut raw = vec![0i16; dim];
                h.index
                    .get(key, usearch::f16::from_mut_i16s(&mut raw))
                    .ok()?;
                raw.iter().flat_map(|x| x.to_le_bytes()).collect()
            }
            Quant::I8 => {
                let mut v = vec![0i8; dim];
                h.index.get(key, &mut v).ok()?;
                v.iter().map(|x| *x as u8).collect()
            }
            Quant::B1 => get_bits(&h.index, key, dim)?,
        };
        Some((bytes, norm))
    }

    /// The element's attributes: `None` when there is no such element, `Some(None)` when it
    /// has none.
    pub fn get_attrs(&self, name: &[u8]) -> Option<Option<Vec<u8>>> {
        let meta = self.meta.read();
        let key = meta.by_name.get(name)?;
        Some(meta.elems.get(key)?.attrs.as_ref().map(|a| a.to_vec()))
    }

    /// Sets (or, with an empty string, removes) the element's attributes; false when there
    /// is no such element.
    pub fn set_attrs(&self, name: &[u8], attrs: &[u8]) -> bool {
        let mut meta = self.meta.write();
        let Some(&key) = meta.by_name.get(name) else {
            return false;
        };
        meta.set_attrs(key, (!attrs.is_empty()).then(|| attrs.into()));
        true
    }

    /// Nearest elements to `q` (already [`VectorIndex::prepare`]d), closest first.
    pub fn search(&self, q: &[f32], o: &SearchOpts<'_>) -> Result<Vec<Hit>, Error> {
        if q.len() != self.cfg.dim {
            return Err(Error::Dimension {
                got: q.len(),
                want: self.cfg.dim,
            });
        }
        let k = o.k.max(1);
        let size = self.len();
        if size == 0 {
            return Ok(Vec::new());
        }
        let matches = if o.exact {
            self.exact_search(q, k, o.filter)?
        } else {
            let ef = if o.ef == 0 { DEFAULT_EF } else { o.ef }.max(k);
            let h = self.hnsw.upgradable_read();
            let h = if h.ef != ef {
                let mut w = RwLockUpgradableReadGuard::upgrade(h);
                w.index.change_expansion_search(ef);
                w.ef = ef;
                parking_lot::RwLockWriteGuard::downgrade(w)
            } else {
                parking_lot::RwLockUpgradableReadGuard::downgrade(h)
            };
            let _slot = self.slots.acquire();
            match o.filter {
                None => {
                    let m = if self.cfg.quant == Quant::B1 {
                        h.index.search(b1x8::from_u8s(&pack_bits(q)), k)
                    } else {
                        h.index.search(q, k)
                    }
                    .map_err(engine)?;
                    m.keys.into_iter().zip(m.distances).collect::<Vec<_>>()
                }
                Some(f) => {
                    let budget = if o.filter_ef == 0 {
                        k.saturating_mul(100)
                    } else {
                        o.filter_ef
                    };
                    let seen = std::cell::Cell::new(0usize);
                    let meta = self.meta.read();
                    let pred = |key: u64| {
                        if seen.get() >= budget {
                            return false;
                        }
                        seen.set(seen.get() + 1);
                        meta.elems
                            .get(&key)
                            .is_some_and(|e| f.matches_bytes(e.attrs.as_deref()))
                    };
                    let m = if self.cfg.quant == Quant::B1 {
                        h.index
                            .filtered_search(b1x8::from_u8s(&pack_bits(q)), k, pred)
                    } else {
                        h.index.filtered_search(q, k, pred)
                    }
                    .map_err(engine)?;
                    drop(meta);
                    m.keys.into_iter().zip(m.distances).collect::<Vec<_>>()
                }
            }
        };
        let meta = self.meta.read();
        let scale = self.distance_scale();
        Ok(matches
            .into_iter()
            .filter_map(|(key, d)| {
                let e = meta.elems.get(&key)?;
                Some(Hit {
                    name: e.name.to_vec(),
                    distance: (d * scale).max(0.0),
                    attrs: if o.with_attrs {
                        e.attrs.as_ref().map(|a| a.to_vec())
                    } else {
                        None
                    },
                })
            })
            .take(k)
            .collect())
    }

    /// Factor turning usearch's distance into the reported one (b1: Hamming bits to [0, 2]).
    fn distance_scale(&self) -> f32 {
        if self.cfg.quant == Quant::B1 {
            2.0 / self.cfg.dim as f32
        } else {
            1.0
        }
    }

    fn exact_search(
        &self,
        q: &[f32],
        k: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<(u64, f32)>, Error> {
        let h = self.hnsw.read();
        let _slot = self.slots.acquire();
        let want = if filter.is_some() { h.index.size() } else { k };
        let m = if self.cfg.quant == Quant::B1 {
            h.index
                .exact_search(b1x8::from_u8s(&pack_bits(q)), want.max(1))
        } else {
            h.index.exact_search(q, want.max(1))
        }
        .map_err(engine)?;
        drop(h);
        let mut out: Vec<(u64, f32)> = m.keys.into_iter().zip(m.distances).collect();
        if let Some(f) = filter {
            let meta = self.meta.read();
            out.retain(|(key, _)| {
                meta.elems
                    .get(key)
                    .is_some_and(|e| f.matches_bytes(e.attrs.as_deref()))
            });
            out.truncate(k);
        }
        Ok(out)
    }

    /// The element's graph neighbours per layer, top layer first, each with its distance
    /// (as [`Hit::distance`]). `None` when there is no such element.
    pub fn links(&self, name: &[u8]) -> Option<Vec<Layer>> {
        let key = *self.meta.read().by_name.get(name)?;
        let h = self.hnsw.write();
        let v = self.stored(&h.index, key)?;
        let level = h.index.level_of_key(key);
        let mut layers: Vec<Vec<u64>> = Vec::new();
        for l in (0..=level).rev() {
            layers.push(h.index.neighbors(key, l).collect());
        }
        // Distances: an exact search restricted to each neighbour would be costly; compute
        // them from the stored vectors.
        let mut out = Vec::with_capacity(layers.len());
        let meta = self.meta.read();
        for layer in layers {
            let mut row = Vec::with_capacity(layer.len());
            for n in layer {
                let Some(e) = meta.elems.get(&n) else {
                    continue;
                };
                let Some(w) = self.stored(&h.index, n) else {
                    continue;
                };
                row.push((e.name.to_vec(), self.distance(&v, &w)));
            }
            out.push(row);
        }
        Some(out)
    }

    /// Distance between two stored (dequantized) vectors, as a search reports it.
    fn distance(&self, a: &[f32], b: &[f32]) -> f32 {
        match (self.cfg.quant, self.cfg.metric) {
            (Quant::B1, _) => {
                let diff = a
                    .iter()
                    .zip(b)
                    .filter(|(x, y)| (**x > 0.0) != (**y > 0.0))
                    .count();
                diff as f32 * self.distance_scale()
            }
            (_, Metric::Cosine) => {
                let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
                let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
                if na == 0.0 || nb == 0.0 {
                    1.0
                } else {
                    (1.0 - dot / (na * nb)).max(0.0)
                }
            }
            (_, Metric::L2) => a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum(),
            (_, Metric::Ip) => 1.0 - a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>(),
        }
    }

    /// Highest layer of the graph.
    pub fn max_level(&self) -> usize {
        // Lock order is always graph, then table: never hold the table while waiting for
        // the graph.
        let h = self.hnsw.read();
        let meta = self.meta.read();
        meta.order
            .iter()
            .map(|k| h.index.level_of_key(*k))
            .max()
            .unwrap_or(0)
    }

    /// `count` random element names: distinct when `distinct` (at most [`VectorIndex::len`]),
    /// else with repetitions.
    pub fn random(&self, count: usize, distinct: bool) -> Vec<Vec<u8>> {
        let meta = self.meta.read();
        let n = meta.order.len();
        if n == 0 {
            return Vec::new();
        }
        let mut rng = rand::rng();
        let name = |k: &u64| meta.elems.get(k).map(|e| e.name.to_vec());
        if !distinct {
            return (0..count)
                .filter_map(|_| name(&meta.order[rng.random_range(0..n)]))
                .collect();
        }
        let count = count.min(n);
        let picks = rand::seq::index::sample(&mut rng, n, count);
        picks.iter().filter_map(|i| name(&meta.order[i])).collect()
    }

    /// Every element name (in no particular order).
    pub fn names(&self) -> Vec<Vec<u8>> {
        let meta = self.meta.read();
        meta.order
            .iter()
            .filter_map(|k| meta.elems.get(k).map(|e| e.name.to_vec()))
            .collect()
    }

    /// Approximate bytes used: the graph and vectors as usearch reports them (less the
    /// unwritten tail of its arenas), plus names, attributes and the lookup tables.
    pub fn memory_usage(&self) -> usize {
        let graph = {
            let h = self.hnsw.read();
            // usearch grows its tapes in doubling arenas (8 MiB first); the unused tail of
            // the last arena is never written, so it is address space, not resident memory.
            let s = h.index.memory_stats();
            h.index
                .memory_usage()
                .saturating_sub(s.graph_reserved + s.vectors_reserved)
        };
        let meta = self.meta.read();
        let tables = meta.by_name.capacity() * (std::mem::size_of::<Box<[u8]>>() + 9)
            + meta.elems.capacity() * (std::mem::size_of::<Elem>() + 9)
            + meta.order.capacity() * 8;
        graph + tables + meta.bytes + self.projection.as_ref().map_or(0, |p| p.len() * 4)
    }

    /// Serializes the index (configuration, elements, graph).
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let h = self.hnsw.write();
        let meta = self.meta.read();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&(self.cfg.dim as u32).to_le_bytes());
        out.push(self.cfg.metric.code());
        out.push(self.cfg.quant.code());
        out.extend_from_slice(&(self.cfg.m as u32).to_le_bytes());
        out.extend_from_slice(&(self.cfg.ef_construction as u32).to_le_bytes());
        out.extend_from_slice(&(self.cfg.projection_from as u32).to_le_bytes());
        out.extend_from_slice(&meta.next_key.to_le_bytes());
        out.extend_from_slice(&(meta.order.len() as u64).to_le_bytes());
        for k in &meta.order {
            let e = &meta.elems[k];
            out.extend_from_slice(&k.to_le_bytes());
            out.extend_from_slice(&e.norm.to_le_bytes());
            out.extend_from_slice(&(e.name.len() as u32).to_le_bytes());
            out.extend_from_slice(&e.name);
            match &e.attrs {
                Some(a) => {
                    out.push(1);
                    out.extend_from_slice(&(a.len() as u32).to_le_bytes());
                    out.extend_from_slice(a);
                }
                None => out.push(0),
            }
        }
        let len = h.index.serialized_length();
        out.extend_from_slice(&(len as u64).to_le_bytes());
        let at = out.len();
        out.resize(at + len, 0);
        h.index.save_to_buffer(&mut out[at..]).map_err(engine)?;
        // The graph blob goes to C++ on load: a checksum keeps damaged bytes away from it.
        let sum = CRC.checksum(&out[at..]);
        out.extend_from_slice(&sum.to_le_bytes());
        Ok(out)
    }

    /// Reads an index written by [`VectorIndex::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        let mut r = Reader { b, p: 0 };
        if r.take(MAGIC.len())? != MAGIC || r.u8()? != VERSION {
            return Err(Error::Corrupt("bad header".into()));
        }
        let dim = r.u32()? as usize;
        let metric = Metric::from_code(r.u8()?).ok_or_else(|| corrupt("metric"))?;
        let quant = Quant::from_code(r.u8()?).ok_or_else(|| corrupt("quantization"))?;
        let cfg = IndexConfig {
            dim,
            metric,
            quant,
            m: r.u32()? as usize,
            ef_construction: r.u32()? as usize,
            projection_from: r.u32()? as usize,
        };
        cfg.validate().map_err(|e| corrupt(&e.to_string()))?;
        let idx = VectorIndex::new(cfg)?;
        let next_key = r.u64()?;
        let n = r.u64()?;
        let mut meta = Meta {
            next_key,
            ..Meta::default()
        };
        for _ in 0..n {
            let key = r.u64()?;
            if key >= next_key {
                return Err(corrupt("element key"));
            }
            let norm = f32::from_le_bytes(r.take(4)?.try_into().map_err(|_| corrupt("norm"))?);
            let nl = r.u32()? as usize;
            let name = r.take(nl)?;
            let attrs = match r.u8()? {
                0 => None,
                1 => {
                    let al = r.u32()? as usize;
                    Some(Box::from(r.take(al)?))
                }
                _ => return Err(corrupt("attribute flag")),
            };
            if meta.by_name.contains_key(name) || meta.elems.contains_key(&key) {
                return Err(corrupt("duplicate element"));
            }
            meta.insert(key, name, attrs, norm);
        }
        let len = r.u64()? as usize;
        let blob = r.take(len)?;
        let sum = r.u64()?;
        if r.p != b.len() {
            return Err(corrupt("trailing bytes"));
        }
        if CRC.checksum(blob) != sum {
            return Err(corrupt("graph checksum"));
        }
        {
            let h = idx.hnsw.write();
            // usearch validates the header; element keys are checked against the table below.
            usearch::Index::metadata_from_buffer(blob).map_err(|e| corrupt(&e.to_string()))?;
            h.index
                .load_from_buffer(blob)
                .map_err(|e| corrupt(&e.to_string()))?;
            if h.index.dimensions() != dim || h.index.size() != meta.order.len() {
                return Err(corrupt("graph does not match the element table"));
            }
            for k in &meta.order {
                if !h.index.contains(*k) {
                    return Err(corrupt("element missing from the graph"));
                }
            }
            let cap = h.index.capacity().max(h.index.size() + 1).max(64);
            h.index
                .reserve_capacity_and_threads(cap, THREADS)
                .map_err(engine)?;
            h.index.change_expansion_search(DEFAULT_EF);
            h.index.change_expansion_add(cfg.ef_construction);
            idx.capacity.store(h.index.capacity(), Ordering::Relaxed);
        }
        *idx.meta.write() = meta;
        Ok(idx)
    }

    /// An independent copy (COPY, RESTORE of a dump).
    pub fn deep_clone(&self) -> Result<Self, Error> {
        Self::from_bytes(&self.to_bytes()?)
    }
}

const MAGIC: &[u8] = b"EMBV";
const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);
const VERSION: u8 = 1;

fn corrupt(what: &str) -> Error {
    Error::Corrupt(what.to_string())
}

struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.p.checked_add(n).ok_or_else(|| corrupt("length"))?;
        let s = self
            .b
            .get(self.p..end)
            .ok_or_else(|| corrupt("truncated"))?;
        self.p = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().map_err(|_| corrupt("u32"))?,
        ))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().map_err(|_| corrupt("u64"))?,
        ))
    }
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("cfg", &self.cfg)
            .field("len", &self.len())
            .finish()
    }
}
