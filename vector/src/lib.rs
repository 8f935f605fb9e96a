//! Vector indexes for Ember: Ember's own HNSW graph (f32, f16, i8 or 1-bit vectors) with
//! string element names, JSON attributes, FILTER expressions and a byte serialization.
//!
//! [`VectorIndex`] is safe to share between threads (`Arc<VectorIndex>`): searches run in
//! parallel, adds run concurrently with searches, and only removals, capacity growth and
//! serialization take the index exclusively.

pub mod filter;
mod hnsw;
mod index;

pub use filter::{Filter, SyntaxError};
pub use index::{
    AttrUpdate, Hit, IndexConfig, Layer, Metric, Quant, SearchOpts, VectorIndex, MAX_DIM, MAX_M,
    MIN_M,
};

/// Errors of the vector crate.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// The vector's length differs from the index's dimension.
    #[error("Vector dimension mismatch - got {got} but set has {want}")]
    Dimension {
        /// Length of the vector given.
        got: usize,
        /// Dimension of the index.
        want: usize,
    },
    /// A parameter is out of range or inconsistent.
    #[error("{0}")]
    Invalid(String),
    /// A serialized index is malformed.
    #[error("corrupt vector index: {0}")]
    Corrupt(String),
}
