//! Redis RDB format: DUMP/RESTORE payloads and snapshot files.
//!
//! Ember writes RDB version 10 (what `redis-server` 7.0 writes and every Redis from 7.0 on
//! loads) and reads versions 1 to 11, every value type Redis 7.2 writes (listpack,
//! ziplist, intset and plain encodings, streams with consumer groups) plus LZF-compressed
//! strings. Files end with Redis's CRC64 of everything before it.
//!
//! Ember-only key metadata (the sub-millisecond part of a nanosecond TTL, key tags) goes in
//! an `ember-ext` AUX field just before the key it belongs to; Redis skips unknown AUX
//! fields, so such a file still loads in `redis-server` (without that metadata).
//!
//! # Format version of Ember's extensions
//! What Ember adds to Redis's RDB (the `ember-ext` AUX field, the vector-set type
//! byte `0xE0` and its bytes) has a version of its own, [`FORMAT_VERSION`].
//! [`Writer::new`] writes it right after the header as the AUX field `ember-fmt`
//! ([`FORMAT_AUX`], decimal text); Redis ignores it, so a file without Ember-only data
//! still loads in `redis-server`. [`load`] reads a file without that field (Redis's, or
//! one written by Ember before the field existed) as version 1, and refuses a version
//! newer than [`FORMAT_VERSION`] with [`RdbError::NewerFormat`] where it meets the field
//! (before any key, where Ember writes it). Any change that an older Ember would read
//! wrongly bumps the version, so the older Ember stops with that error instead of loading
//! something else. The `ember-ext` payload starts with its own layout byte
//! ([`EXT_LAYOUT`]) and a vector set's bytes with theirs (`EMBV`, version 2), both
//! checked on read.
//!
//! - [`write`]: encoding values and keys, [`Writer`] for files, [`dump_payload`].
//! - [`read`]: [`load`] for files, [`restore_payload`] for DUMP payloads.
//! - [`packed`]: listpack, ziplist and intset; [`lzf`]: LZF.

pub mod lzf;
pub mod packed;
pub mod read;
pub mod write;

pub use read::{functions_from_payload, load, restore_payload, LoadStats, Loaded};
pub use write::{dump_payload, encode_key, functions_payload, Writer};

use crc::{Crc, Table, CRC_64_REDIS};

/// The RDB version Ember writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version Ember reads (Redis 7.2's).
pub const MAX_READ_VERSION: u16 = 11;
/// AUX field carrying Ember-only metadata of the next key.
pub const EXT_AUX: &[u8] = b"ember-ext";
/// AUX field carrying the version of Ember's extensions used in the file (decimal text).
pub const FORMAT_AUX: &[u8] = b"ember-fmt";
/// The version of Ember's RDB extensions this build writes, and the newest it reads.
/// Files without a [`FORMAT_AUX`] field are version 1.
pub const FORMAT_VERSION: u16 = 1;
/// The layout byte that starts an `ember-ext` payload (the only one there is so far).
pub const EXT_LAYOUT: u8 = 1;

/// Redis's CRC64 (Jones polynomial, reflected), used for files and DUMP payloads.
pub static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// Value type bytes.
pub(crate) mod ty {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Ember only: a vector set, its `vector::VectorIndex` bytes as one string. Redis
    /// does not know this type and refuses a file holding one.
    pub const EMBER_VECTOR_SET: u8 = 0xE0;
}

/// Top-level opcodes of a file.
pub(crate) mod op {
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Why a file or payload could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RdbError {
    /// Reading failed.
    #[error("I/O error at offset {offset}: {source}")]
    Io {
        /// Byte offset reached.
        offset: u64,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The data ends early (a torn file).
    #[error("unexpected end of file at offset {0}")]
    Truncated(u64),
    /// The data is malformed.
    #[error("bad RDB data at offset {offset}: {msg}")]
    Corrupt {
        /// Byte offset of the problem.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// The file uses a version of Ember's extensions newer than this build reads
    /// (written by a newer Ember).
    #[error(
        "the RDB file uses Ember format version {found} (AUX field ember-fmt); this build reads Ember format versions 1 to {max}: it was written by a newer Ember"
    )]
    NewerFormat {
        /// The version the file declares.
        found: u64,
        /// The newest version this build reads ([`FORMAT_VERSION`]).
        max: u16,
    },
    /// The checksum does not match.
    #[error("RDB checksum mismatch: file says {expected:016x}, data gives {actual:016x}")]
    Checksum {
        /// Checksum stored in the file.
        expected: u64,
        /// Checksum of the data read.
        actual: u64,
    },
}

/// Ember-only metadata of one key, stored in the `ember-ext` AUX field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyExt {
    /// Nanoseconds of the deadline beyond its whole milliseconds (0..1,000,000).
    pub sub_ms_ns: u32,
    /// The key's tags.
    pub tags: Vec<Vec<u8>>,
}

impl KeyExt {
    /// True when there is nothing to store.
    pub fn is_empty(&self) -> bool {
        self.sub_ms_ns == 0 && self.tags.is_empty()
    }
}

#[cfg(test)]
mod tests;
