//! The crate's one error type.

use raft::GroupId;

/// Everything that can go wrong on the cluster bus. Raft RPC failures reach openraft as
/// its own `RPCError` (see [`crate::BusTransport`]); this type says why underneath.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bytes from a peer did not decode (the request or reply of a Raft RPC).
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// Why it did not decode.
        reason: String,
    },
    /// A value did not encode (postcard).
    #[error("cannot encode {what}: {reason}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// Why it did not encode.
        reason: String,
    },
    /// The receiving node does not run this group (not open yet, or closed).
    #[error("group {0} is not running on this node")]
    UnknownGroup(GroupId),
    /// The peer's bus refused the RPC before it reached Raft (its [`crate::pb::BusError`]).
    #[error("peer bus error ({code:?}): {message}")]
    Peer {
        /// The peer's error code.
        code: crate::pb::BusErrorCode,
        /// The peer's message.
        message: String,
    },
    /// A peer address is not a valid `host:port`.
    #[error("bad peer address {addr:?}: {reason}")]
    BadAddress {
        /// The address as the membership stores it.
        addr: String,
        /// Why it is not usable.
        reason: String,
    },
    /// The RPC failed underneath (connection refused or reset, HTTP/2 error).
    #[error("rpc failed: {0}")]
    Status(Box<tonic::Status>),
    /// No answer within the RPC's time limit.
    #[error("rpc timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The server failed (bind, accept, HTTP/2).
    #[error("bus server: {0}")]
    Server(#[from] tonic::transport::Error),
    /// Socket I/O outside tonic (local address of a listener).
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A spawned server task ended abnormally.
    #[error("bus server task failed: {0}")]
    Task(String),
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Error::Status(Box::new(s))
    }
}

impl Error {
    /// A decode failure of `what`.
    pub(crate) fn malformed(what: &'static str, reason: impl ToString) -> Self {
        Error::Malformed {
            what,
            reason: reason.to_string(),
        }
    }
}
