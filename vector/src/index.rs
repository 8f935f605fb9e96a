//! [`VectorIndex`]: the HNSW graph ([`crate::hnsw`]) plus the element table (name,
//! attributes, norm, graph slot).
//!
//! Locking: `graph` is a read-write lock around the graph. Adds, searches and reads take it
//! shared (the graph links concurrently under per-node locks); growing the capacity,
//! removing and serializing take it exclusively. `meta` (names, attributes) is a separate
//! lock held only for map lookups and updates, never across a graph operation except a
//! filtered search's predicate calls; the order is always graph, then table.

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use parking_lot::RwLock;
use rand::Rng;

use crate::filter::Filter;
use crate::hnsw::{Graph, NodeParts, NodeView, Space, Vector, Verdict};
use crate::Error;

/// Largest vector dimension (Redis's `VSET_MAX_VECTOR_DIM`).
pub const MAX_DIM: usize = 1 << 16;
/// Smallest HNSW M (Redis's `HNSW_MIN_M`).
pub const MIN_M: usize = 4;
/// Largest HNSW M (Redis's `HNSW_MAX_M`).
pub const MAX_M: usize = 4096;

/// Largest projection matrix (input x output floats, 64 MiB) a REDUCE may ask for.
pub const MAX_PROJECTION: usize = 1 << 24;

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

    fn space(&self) -> Space {
        Space {
            metric: self.metric,
            quant: self.quant,
            dim: self.dim,
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
    /// Redis's node uid: unique among the index's elements, never handed out twice.
    key: u64,
    name: Box<[u8]>,
    attrs: Option<Box<[u8]>>,
    /// L2 norm of the vector as given (cosine indexes store the normalized vector).
    norm: f32,
    /// Position in `Meta::order`.
    pos: u32,
}

/// The element table: elements by graph slot, and a name index over them.
#[derive(Default)]
struct Meta {
    /// Elements by graph slot.
    elems: Vec<Option<Elem>>,
    /// Slots by element name (the names themselves live in `elems`).
    by_name: HashTable<u32>,
    hasher: RandomState,
    /// Slots of the elements, for uniform random picks (swap-remove keeps it dense).
    order: Vec<u32>,
    next_key: u64,
    with_attrs: usize,
    /// Bytes of names and attributes.
    bytes: usize,
}

fn elem_at(elems: &[Option<Elem>], slot: u32) -> Option<&Elem> {
    elems.get(slot as usize)?.as_ref()
}

impl Meta {
    fn get(&self, slot: u32) -> Option<&Elem> {
        elem_at(&self.elems, slot)
    }

    fn hash(&self, name: &[u8]) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The slot of the element called `name`.
    fn find(&self, name: &[u8]) -> Option<u32> {
        self.by_name
            .find(self.hash(name), |&s| {
                self.get(s).is_some_and(|e| &*e.name == name)
            })
            .copied()
    }

    /// Adds an element in graph slot `slot` (which holds none).
    fn insert(&mut self, slot: u32, key: u64, name: &[u8], attrs: Option<Box<[u8]>>, norm: f32) {
        self.bytes += name.len() + attrs.as_ref().map_or(0, |a| a.len());
        self.with_attrs += usize::from(attrs.is_some());
        let pos = self.order.len() as u32;
        self.order.push(slot);
        if self.elems.len() <= slot as usize {
            self.elems.resize_with(slot as usize + 1, || None);
        }
        self.elems[slot as usize] = Some(Elem {
            key,
            name: name.into(),
            attrs,
            norm,
            pos,
        });
        let h = self.hash(name);
        let Meta {
            by_name,
            elems,
            hasher,
            ..
        } = self;
        by_name.insert_unique(h, slot, |&s| {
            hasher.hash_one(elem_at(elems, s).map_or(&[][..], |e| &e.name[..]))
        });
    }

    /// Takes out the element called `name`: its slot and entry.
    fn remove(&mut self, name: &[u8]) -> Option<(u32, Elem)> {
        let h = self.hash(name);
        let Meta { by_name, elems, .. } = self;
        let entry = by_name
            .find_entry(h, |&s| elem_at(elems, s).is_some_and(|e| &*e.name == name))
            .ok()?;
        let (slot, _) = entry.remove();
        let e = self.elems.get_mut(slot as usize)?.take()?;
        self.bytes -= e.name.len() + e.attrs.as_ref().map_or(0, |a| a.len());
        self.with_attrs -= usize::from(e.attrs.is_some());
        self.order.swap_remove(e.pos as usize);
        if let Some(&moved) = self.order.get(e.pos as usize) {
            if let Some(Some(m)) = self.elems.get_mut(moved as usize) {
                m.pos = e.pos;
            }
        }
        Some((slot, e))
    }

    fn set_attrs(&mut self, slot: u32, attrs: Option<Box<[u8]>>) {
        if let Some(Some(e)) = self.elems.get_mut(slot as usize) {
            self.bytes -= e.attrs.as_ref().map_or(0, |a| a.len());
            self.with_attrs -= usize::from(e.attrs.is_some());
            self.bytes += attrs.as_ref().map_or(0, |a| a.len());
            self.with_attrs += usize::from(attrs.is_some());
            e.attrs = attrs;
        }
    }
}

/// An HNSW vector index with named elements and JSON attributes. Share it as
/// `Arc<VectorIndex>`; every method takes `&self`.
pub struct VectorIndex {
    cfg: IndexConfig,
    graph: RwLock<Graph>,
    meta: RwLock<Meta>,
    /// Projection matrix (`dim` rows of `projection_from` columns), when reducing.
    projection: Option<Vec<f32>>,
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
        Ok(Self::with_graph(
            cfg,
            Graph::new(cfg.space(), cfg.m, cfg.ef_construction, 64),
        ))
    }

    fn with_graph(cfg: IndexConfig, graph: Graph) -> Self {
        VectorIndex {
            projection: (cfg.projection_from != 0)
                .then(|| projection_matrix(cfg.projection_from, cfg.dim)),
            cfg,
            graph: RwLock::new(graph),
            meta: RwLock::new(Meta::default()),
        }
    }

    /// The creation parameters.
    pub fn config(&self) -> &IndexConfig {
        &self.cfg
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.meta.read().order.len()
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
        self.meta.read().find(name).is_some()
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
        let stored = self.normalized(v, norm);
        let new_attrs = |old: Option<Box<[u8]>>| match attrs {
            AttrUpdate::Keep => old,
            AttrUpdate::Set([]) => None,
            AttrUpdate::Set(b) => Some(b.into()),
        };
        // Replace: drop the old node first, keep its key.
        let (key, old) = {
            let mut meta = self.meta.write();
            match meta.remove(name) {
                Some((slot, e)) => (e.key, Some((slot, e))),
                None => {
                    let key = meta.next_key;
                    meta.next_key += 1;
                    (key, None)
                }
            }
        };
        let existed = old.is_some();
        let old_attrs = old.and_then(|(slot, e)| {
            self.remove_slot(slot);
            e.attrs
        });
        let slot = self.add_node(&stored);
        // A concurrent upsert of the same name may have finished meanwhile: last one wins.
        let displaced = {
            let mut meta = self.meta.write();
            let displaced = meta.remove(name);
            meta.insert(slot, key, name, new_attrs(old_attrs), norm);
            displaced
        };
        if let Some((other, _)) = displaced {
            self.remove_slot(other);
        }
        Ok(!existed && displaced.is_none())
    }

    /// `v` as the graph holds it: unit length for cosine (a zero vector stays zero).
    fn normalized(&self, v: &[f32], norm: f32) -> Vec<f32> {
        if self.cfg.metric == Metric::Cosine && norm > 0.0 {
            v.iter().map(|x| x / norm).collect()
        } else {
            v.to_vec()
        }
    }

    /// Inserts `v` into the graph, growing the capacity when full; returns its slot.
    fn add_node(&self, v: &[f32]) -> u32 {
        let space = self.cfg.space();
        let query = space.query(v);
        let vector = Vector::quantize(self.cfg.quant, v);
        loop {
            {
                let g = self.graph.read();
                if let Some(slot) = g.alloc() {
                    g.insert(slot, vector, &query);
                    return slot;
                }
            }
            let mut g = self.graph.write();
            if g.is_full() {
                let want = (g.capacity() * 2).max(64);
                g.reserve(want);
            }
        }
    }

    /// Removes `name`; true when it was there.
    pub fn remove(&self, name: &[u8]) -> bool {
        let Some((slot, _)) = self.meta.write().remove(name) else {
            return false;
        };
        self.remove_slot(slot);
        true
    }

    /// Takes the node in `slot` out of the graph: the search for the nodes that link to it
    /// under the read lock (searches go on meanwhile), the relinking under the write lock.
    fn remove_slot(&self, slot: u32) {
        let near = self.graph.read().near_slot(slot);
        self.graph.write().remove_with(slot, &near);
    }

    /// The element's slot and norm.
    fn slot_norm(&self, name: &[u8]) -> Option<(u32, f32)> {
        let meta = self.meta.read();
        let slot = meta.find(name)?;
        Some((slot, meta.get(slot)?.norm))
    }

    /// The element's vector as given (denormalized for cosine; dequantized, so
    /// approximate for f16/i8/b1).
    pub fn get_vector(&self, name: &[u8]) -> Option<Vec<f32>> {
        let (slot, norm) = self.slot_norm(name)?;
        let mut v = self.graph.read().vector(slot)?.to_f32(self.cfg.dim);
        if self.cfg.metric == Metric::Cosine && self.cfg.quant != Quant::B1 {
            // i8 is stored as round(127 * x / |x|): dequantized it is already unit length.
            for x in &mut v {
                *x *= norm;
            }
        }
        Some(v)
    }

    /// The element's stored vector bytes and its norm (Redis `VEMB ... RAW`).
    pub fn get_raw(&self, name: &[u8]) -> Option<(Vec<u8>, f32)> {
        let (slot, norm) = self.slot_norm(name)?;
        let bytes = self.graph.read().vector(slot)?.raw_bytes();
        Some((bytes, norm))
    }

    /// The element's attributes: `None` when there is no such element, `Some(None)` when it
    /// has none.
    pub fn get_attrs(&self, name: &[u8]) -> Option<Option<Vec<u8>>> {
        let meta = self.meta.read();
        let e = meta.get(meta.find(name)?)?;
        Some(e.attrs.as_ref().map(|a| a.to_vec()))
    }

    /// Sets (or, with an empty string, removes) the element's attributes; false when there
    /// is no such element.
    pub fn set_attrs(&self, name: &[u8], attrs: &[u8]) -> bool {
        let mut meta = self.meta.write();
        let Some(slot) = meta.find(name) else {
            return false;
        };
        meta.set_attrs(slot, (!attrs.is_empty()).then(|| attrs.into()));
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
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt();
        let query = self.cfg.space().query(&self.normalized(q, norm));
        let g = self.graph.read();
        let meta = self.meta.read();
        let passes = |f: &Filter, slot: u32| {
            meta.get(slot)
                .is_some_and(|e| f.matches_bytes(e.attrs.as_deref()))
        };
        let matches = match (o.exact, o.filter) {
            (true, None) => g.exact(&query, k, |_| true),
            (true, Some(f)) => g.exact(&query, k, |slot| passes(f, slot)),
            (false, None) => {
                let ef = if o.ef == 0 { DEFAULT_EF } else { o.ef };
                g.search(&query, k, ef, |_| Verdict::Keep)
            }
            (false, Some(f)) => {
                let ef = if o.ef == 0 { DEFAULT_EF } else { o.ef };
                let budget = if o.filter_ef == 0 {
                    k.saturating_mul(100)
                } else {
                    o.filter_ef
                };
                let mut seen = 0usize;
                g.search(&query, k, ef, |slot| {
                    if seen >= budget {
                        return Verdict::Stop;
                    }
                    seen += 1;
                    if passes(f, slot) {
                        Verdict::Keep
                    } else {
                        Verdict::Skip
                    }
                })
            }
        };
        drop(g);
        let scale = self.distance_scale();
        Ok(matches
            .into_iter()
            .filter_map(|(slot, d)| {
                let e = meta.get(slot)?;
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

    /// Factor turning a graph distance into the reported one (b1: Hamming bits to [0, 2]).
    fn distance_scale(&self) -> f32 {
        if self.cfg.quant == Quant::B1 {
            2.0 / self.cfg.dim as f32
        } else {
            1.0
        }
    }

    /// The element's graph neighbours per layer, top layer first, each with its distance
    /// (as [`Hit::distance`]). `None` when there is no such element.
    pub fn links(&self, name: &[u8]) -> Option<Vec<Layer>> {
        let (slot, _) = self.slot_norm(name)?;
        let g = self.graph.read();
        let v = g.vector(slot)?;
        let layers = g.links(slot)?;
        let meta = self.meta.read();
        let scale = self.distance_scale();
        Some(
            layers
                .into_iter()
                .map(|layer| {
                    layer
                        .into_iter()
                        .filter_map(|n| {
                            let e = meta.get(n)?;
                            let d = g.space().between(v, g.vector(n)?);
                            Some((e.name.to_vec(), (d * scale).max(0.0)))
                        })
                        .collect()
                })
                .collect(),
        )
    }

    /// Highest layer of the graph.
    pub fn max_level(&self) -> usize {
        self.graph.read().max_level()
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
        let name = |s: &u32| meta.get(*s).map(|e| e.name.to_vec());
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
            .filter_map(|s| meta.get(*s).map(|e| e.name.to_vec()))
            .collect()
    }

    /// Approximate bytes used: the graph (slots, vectors, links), plus names, attributes
    /// and the lookup tables.
    pub fn memory_usage(&self) -> usize {
        let graph = self.graph.read().memory();
        let meta = self.meta.read();
        let tables = meta.by_name.capacity() * (std::mem::size_of::<u32>() + 1)
            + meta.elems.capacity() * std::mem::size_of::<Option<Elem>>()
            + meta.order.capacity() * std::mem::size_of::<u32>();
        graph + tables + meta.bytes + self.projection.as_ref().map_or(0, |p| p.len() * 4)
    }

    /// Serializes the index (configuration, elements, graph).
    pub fn to_bytes(&self) -> Vec<u8> {
        let g = self.graph.write();
        let meta = self.meta.read();
        // Nodes are written in element order and links name that order's index, so the
        // reader gets a dense graph; links to emptied slots are dropped here.
        let mut by_slot: Vec<Option<NodeView<'_>>> = (0..g.capacity()).map(|_| None).collect();
        for (slot, level, v, links) in g.nodes() {
            by_slot[slot as usize] = Some((level, v, links));
        }
        let mut index_of = vec![u32::MAX; g.capacity()];
        let mut rows = Vec::with_capacity(meta.order.len());
        for &slot in &meta.order {
            let (Some(e), Some(node)) = (meta.get(slot), by_slot[slot as usize].take()) else {
                continue;
            };
            index_of[slot as usize] = rows.len() as u32;
            rows.push((e, node));
        }
        let live = |s: &u32| Some(index_of[*s as usize]).filter(|i| *i != u32::MAX);
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
        out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
        for (e, (level, v, links)) in &rows {
            out.extend_from_slice(&e.key.to_le_bytes());
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
            out.push(*level as u8);
            out.extend_from_slice(&v.raw_bytes());
            for list in links {
                let kept: Vec<u32> = list.iter().filter_map(live).collect();
                out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
                for i in kept {
                    out.extend_from_slice(&i.to_le_bytes());
                }
            }
        }
        let entry = g
            .entry()
            .as_ref()
            .and_then(live)
            .map_or(u64::MAX, u64::from);
        out.extend_from_slice(&entry.to_le_bytes());
        let sum = CRC.checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Reads an index written by [`VectorIndex::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        let body_len = b.len().checked_sub(8).ok_or_else(|| corrupt("truncated"))?;
        let (body, sum) = b.split_at(body_len);
        let mut r = Reader { b: body, p: 0 };
        if r.take(MAGIC.len())? != MAGIC || r.u8()? != VERSION {
            return Err(Error::Corrupt("bad header".into()));
        }
        if CRC.checksum(body).to_le_bytes() != sum {
            return Err(corrupt("checksum"));
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
        let next_key = r.u64()?;
        let n = r.u64()?;
        let mut meta = Meta {
            next_key,
            ..Meta::default()
        };
        let mut nodes: Vec<NodeParts> = Vec::new();
        for i in 0..n {
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
            if meta.find(name).is_some() {
                return Err(corrupt("duplicate element"));
            }
            let level = r.u8()? as usize;
            if level > crate::hnsw::MAX_LEVEL {
                return Err(corrupt("level"));
            }
            let v = Vector::from_raw(quant, dim, r.take(quant.vector_bytes(dim))?);
            if !v.is_finite() {
                return Err(corrupt("vector component"));
            }
            let mut links = Vec::with_capacity(level + 1);
            for _ in 0..=level {
                let c = r.u32()? as usize;
                let raw = r.take(c.checked_mul(4).ok_or_else(|| corrupt("links"))?)?;
                links.push(
                    raw.chunks_exact(4)
                        .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                        .collect(),
                );
            }
            meta.insert(i as u32, key, name, attrs, norm);
            nodes.push((level, v, links));
        }
        let entry = match r.u64()? {
            u64::MAX => None,
            e => Some(u32::try_from(e).map_err(|_| corrupt("entry"))?),
        };
        if r.p != body.len() {
            return Err(corrupt("trailing bytes"));
        }
        let graph = Graph::from_parts(cfg.space(), cfg.m, cfg.ef_construction, nodes, entry)
            .ok_or_else(|| corrupt("graph"))?;
        let idx = Self::with_graph(cfg, graph);
        *idx.meta.write() = meta;
        Ok(idx)
    }

    /// An independent copy (COPY, RESTORE of a dump).
    pub fn deep_clone(&self) -> Result<Self, Error> {
        Self::from_bytes(&self.to_bytes())
    }
}

const MAGIC: &[u8] = b"EMBV";
const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);
/// Version 2: Ember's own graph (version 1 held a usearch blob).
const VERSION: u8 = 2;

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
