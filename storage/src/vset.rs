//! Vector sets (Redis 8 `vectorset`, and Ember's VSIM.* indexes): a key holding a
//! [`vector::VectorIndex`].
//!
//! The index sits behind an `Arc` with its own locking, so a command clones the `Arc` under
//! the shard lock and searches (or adds) after releasing it: a long search never blocks the
//! other keys of its shard. Cloning a [`VectorSet`] (COPY) copies the index.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use vector::VectorIndex;

static NEXT_UID: AtomicU64 = AtomicU64::new(0);

/// A vector set value.
#[derive(Debug)]
pub struct VectorSet {
    /// The index, shared with commands running outside the shard lock.
    pub index: Arc<VectorIndex>,
    /// Unique id of this set in the process (Redis's `vset-uid`).
    pub uid: u64,
}

impl VectorSet {
    /// A set over `index`.
    pub fn new(index: VectorIndex) -> Self {
        VectorSet {
            index: Arc::new(index),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when the set has no element.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Approximate bytes used by the index.
    pub fn heap_size(&self) -> usize {
        self.index.memory_usage()
    }

    /// OBJECT ENCODING: `hnsw`.
    pub fn encoding(&self) -> &'static str {
        "hnsw"
    }
}

impl Clone for VectorSet {
    /// An independent copy of the index (COPY must not share it). Should the copy fail
    /// (it serializes and reloads the graph), the copy shares the index instead.
    fn clone(&self) -> Self {
        match self.index.deep_clone() {
            Ok(i) => VectorSet::new(i),
            Err(_) => VectorSet {
                index: self.index.clone(),
                uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            },
        }
    }
}
