//! Ember's keyspace.
//!
//! # Layout
//! - [`keyspace`]: [`Keyspace`], many lock-striped shards; each shard holds one [`Table`]
//!   per logical database, so a command locks exactly the shard of its key.
//! - [`table`]: one database's slice of a shard: a hash table of [`Entry`] plus an ordered
//!   expiry index (nanosecond deadlines) used by lazy and active expiry.
//! - [`value`]: the value types ([`Value`], [`RString`]); [`list`], [`hash`], [`set`] and
//!   [`zset`] hold the collection types, [`stream`] the stream type.
//! - [`compress`]: the optional zstd compression of long string values.
//! - [`rdb`]: the Redis RDB format: DUMP/RESTORE payloads and snapshot files.
//! - [`aof`]: the append-only file format: Redis 7 manifest, RESP command reader.
//! - [`pattern`]: Redis glob matching (KEYS, SCAN MATCH, CONFIG GET).
//! - [`clock`]: wall-clock time in nanoseconds.
//! - [`inline`]: short byte strings kept inline (list elements, hash fields, set members).
//! - [`arena`]: the jemalloc arena of the longer ones, in base pages (no huge pages).
//! - [`posindex`]: the content index of a big set's members or a big hash's fields.
//! - [`tags`]: key tags (Ember only), kept beside each [`Table`].
//! - [`events`]: key events recorded for keyspace notifications (lazy expiry, new keys).
//! - [`vset`]: vector sets (an HNSW index from the `vector` crate behind an `Arc`).
#![deny(missing_docs)]

pub mod aof;
pub mod arena;
pub mod clock;
pub mod compress;
pub mod events;
pub mod hash;
pub mod inline;
pub mod key;
pub mod keyspace;
pub mod list;
pub mod pattern;
pub mod posindex;
pub mod rdb;
pub mod set;
pub mod stream;
pub mod table;
pub mod tags;
pub mod value;
pub mod vset;
pub mod zset;

pub use keyspace::{KeyGuard, Keyspace, MultiGuard, Parked, ScanPage};
pub use table::{Entry, Table};
pub use value::{RString, RawMut, Value};
