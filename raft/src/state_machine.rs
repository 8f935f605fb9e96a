//! The seam between Raft and the data: what the node implements for each group.

use crate::error::Error;
use crate::typ::Request;
use crate::typ::Response;

/// A group's replicated data. openraft calls it, through [`crate::GroupStateMachine`], in
/// log order on every replica.
///
/// Implementations must be deterministic: `apply` may read only its arguments and its own
/// state (the leader's time and seed travel in the [`Request`]), so every replica reaches the
/// same state.
pub trait StateMachine: Send + Sync + 'static {
    /// Applies the committed entry at log `index`; the response goes back to the proposer.
    /// A command that fails (wrong type, bad arguments) answers an error response; it must
    /// not panic, whatever the bytes.
    fn apply(&mut self, index: u64, request: &Request) -> Response;

    /// Serializes the whole state (uncompressed; the adapter zstd-compresses it). Called
    /// under the state's read lock, so applies wait until it returns.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with a snapshot made by [`StateMachine::snapshot`], possibly
    /// on another node. Bytes that do not decode answer [`Error::InvalidSnapshot`] and must
    /// leave the state unchanged.
    fn install(&mut self, data: &[u8]) -> Result<(), Error>;
}
