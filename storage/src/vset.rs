//! Vector sets (Redis 8 `vectorset`, and Ember's VSIM.* indexes): a key holding a
//! [`vector::VectorIndex`].
//!
//! The index sits behind an `Arc` with its own locking, so a command clones the `Arc` under
//! the shard lock and searches (or adds) after releasing it: a long search never blocks the
//! other keys of its shard. Cloning a [`VectorSet`] (COPY) copies the index.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use vector::VectorIndex;

static NEXT_UID: AtomicU64 = AtomicU64::new(0);

/// Every live index (weakly), for [`total_memory`].
static LIVE: Mutex<Vec<Weak<VectorIndex>>> = Mutex::new(Vec::new());

fn register(index: &Arc<VectorIndex>) {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(index));
}

/// Approximate bytes of every vector set in the process (usearch allocates them with the
/// C++ allocator, so jemalloc's `allocated` does not see them): for INFO's `used_memory`.
pub fn total_memory() -> usize {
    let live: Vec<Arc<VectorIndex>> = {
        let mut l = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        l.retain(|w| w.strong_count() > 0);
        l.iter().filter_map(Weak::upgrade).collect()
    };
    live.iter().map(|i| i.memory_usage()).sum()
}

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
        let index = Arc::new(index);
        register(&index);
        VectorSet {
            index,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_memory_counts_live_sets_only() {
        let idx = VectorIndex::new(vector::IndexConfig::new(4)).unwrap();
        idx.upsert(b"a", &[1.0, 2.0, 3.0, 4.0], vector::AttrUpdate::Keep)
            .unwrap();
        let v = VectorSet::new(idx);
        // Other tests may hold sets too: the total includes at least this one.
        assert!(total_memory() >= v.heap_size());
        let weak = Arc::downgrade(&v.index);
        drop(v);
        let _ = total_memory();
        let live = LIVE.lock().unwrap();
        assert!(
            !live.iter().any(|w| w.ptr_eq(&weak)),
            "a dropped set is pruned"
        );
    }
}
