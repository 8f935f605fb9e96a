//! The crate's one error type.

use crate::typ::GroupId;
use crate::typ::NodeId;
use crate::typ::StorageError;

/// Everything that can go wrong in the raft crate outside openraft's own RPC errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// RocksDB failed (I/O, corruption it detected, lock held by another process).
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// Bytes on disk or from a peer did not decode.
    #[error("corrupt {what}: {reason}")]
    Corrupt {
        /// What was being decoded (a log entry, a vote, a snapshot, ...).
        what: &'static str,
        /// Why it did not decode.
        reason: String,
    },
    /// Stored or received data declares a format version newer than this build reads (it
    /// was written by a newer Ember); see [`crate::ENTRY_FORMAT`] and its siblings.
    #[error("{what} format version {found} is newer than this build of Ember reads (versions 1 to {max}): it was written by a newer Ember")]
    NewerFormat {
        /// What declares the version (a Raft log entry, a Raft snapshot, the Raft database).
        what: &'static str,
        /// The version found.
        found: u64,
        /// The newest version this build reads.
        max: u16,
    },
    /// A state machine rejected snapshot bytes in [`crate::StateMachine::install`].
    #[error("invalid snapshot: {0}")]
    InvalidSnapshot(String),
    /// openraft's storage error (surfaced by the store when used outside openraft).
    #[error("raft storage: {0}")]
    Storage(Box<StorageError>),
    /// The Raft core stopped (shutdown or a storage failure).
    #[error("raft stopped: {0}")]
    Fatal(Box<openraft::error::Fatal<NodeId>>),
    /// openraft rejected the configuration.
    #[error("raft config: {0}")]
    Config(Box<openraft::ConfigError>),
    /// [`crate::MultiRaft::open_group`] was called twice for one group.
    #[error("group {0} is already open")]
    GroupOpen(GroupId),
    /// A message was dropped on the way to or from a node (the in-process network's
    /// partition), or the target is not running.
    #[error("node {0} unreachable")]
    Unreachable(NodeId),
    /// A Raft task ended abnormally while shutting down.
    #[error("raft task failed: {0}")]
    Task(String),
    /// [`crate::MultiRaft::close`] found the database still referenced after shutdown.
    #[error("database still in use after shutdown")]
    DbBusy,
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Storage(Box::new(e))
    }
}

impl From<openraft::error::Fatal<NodeId>> for Error {
    fn from(e: openraft::error::Fatal<NodeId>) -> Self {
        Error::Fatal(Box::new(e))
    }
}

impl From<openraft::ConfigError> for Error {
    fn from(e: openraft::ConfigError) -> Self {
        Error::Config(Box::new(e))
    }
}

impl Error {
    /// A decode failure of `what`.
    pub(crate) fn corrupt(what: &'static str, reason: impl ToString) -> Self {
        Error::Corrupt {
            what,
            reason: reason.to_string(),
        }
    }
}
