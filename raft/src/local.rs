//! An in-process [`GroupTransport`] for tests: a router of running groups, direct calls
//! instead of sockets, and faults as filters (isolate a node: every message to or from it
//! is dropped, as in a partition or a crash). Optionally every message makes a trip through
//! the wire encoding, to prove the RPC types serialize.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::NetworkError;
use openraft::error::RPCError;
use openraft::error::RemoteError;
use openraft::error::Unreachable;
use openraft::network::RPCOption;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec;
use crate::error::Error;
use crate::network::GroupTransport;
use crate::typ::AppendEntriesRequest;
use crate::typ::AppendEntriesResponse;
use crate::typ::GroupId;
use crate::typ::InstallSnapshotError;
use crate::typ::InstallSnapshotRequest;
use crate::typ::InstallSnapshotResponse;
use crate::typ::Node;
use crate::typ::NodeId;
use crate::typ::Raft;
use crate::typ::RaftError;
use crate::typ::RpcError;
use crate::typ::VoteRequest;
use crate::typ::VoteResponse;

/// What the router knows: the running groups and the faults in force.
#[derive(Default)]
struct RouterState {
    /// Running Raft instances by (node, group).
    rafts: HashMap<(NodeId, GroupId), Raft>,
    /// Nodes cut off from everyone.
    isolated: HashSet<NodeId>,
    /// Round-trip every request and reply through the wire encoding (postcard), as a real
    /// transport would, so a type that does not survive serialization fails the test.
    wire: bool,
}

/// The in-process network: every node's groups register here, and transports made by
/// [`LocalRouter::transport`] deliver RPCs by calling the target's `Raft` directly.
#[derive(Clone, Default)]
pub struct LocalRouter {
    /// Shared by every transport.
    state: Arc<Mutex<RouterState>>,
}

impl LocalRouter {
    /// An empty router.
    pub fn new() -> Self {
        Self::default()
    }

    /// The transport of node `from` (its messages are dropped while `from` is isolated).
    pub fn transport(&self, from: NodeId) -> LocalTransport {
        LocalTransport {
            router: self.clone(),
            from,
        }
    }

    /// Makes `raft`, node `node`'s member of `group`, reachable.
    pub fn register(&self, node: NodeId, group: GroupId, raft: Raft) {
        self.state.lock().rafts.insert((node, group), raft);
    }

    /// Removes node `node`'s member of `group` (it stopped); messages to it are dropped.
    pub fn unregister(&self, node: NodeId, group: GroupId) {
        self.state.lock().rafts.remove(&(node, group));
    }

    /// Encodes and decodes every request and reply (and the peer's Raft error) on the way,
    /// as a transport that serializes would.
    pub fn encode_messages(&self, on: bool) {
        self.state.lock().wire = on;
    }

    /// Whether messages are encoded on the way.
    fn wire(&self) -> bool {
        self.state.lock().wire
    }

    /// Drops every message to or from `node` until [`LocalRouter::heal`].
    pub fn isolate(&self, node: NodeId) {
        tracing::info!(node, "isolate");
        self.state.lock().isolated.insert(node);
    }

    /// Ends the isolation of `node`.
    pub fn heal(&self, node: NodeId) {
        tracing::info!(node, "heal");
        self.state.lock().isolated.remove(&node);
    }

    /// The target's Raft, or the reason the message is dropped.
    fn route(&self, from: NodeId, to: NodeId, group: GroupId) -> Result<Raft, Unreachable> {
        let st = self.state.lock();
        if st.isolated.contains(&from) {
            return Err(Unreachable::new(&Error::Unreachable(from)));
        }
        if st.isolated.contains(&to) {
            return Err(Unreachable::new(&Error::Unreachable(to)));
        }
        st.rafts
            .get(&(to, group))
            .cloned()
            .ok_or_else(|| Unreachable::new(&Error::Unreachable(to)))
    }
}

/// One node's end of a [`LocalRouter`].
#[derive(Clone)]
pub struct LocalTransport {
    /// The router delivering the messages.
    router: LocalRouter,
    /// The sending node.
    from: NodeId,
}

/// A value after a trip through the wire encoding (when `on`); a value that does not
/// survive is a network error, as a transport would report it.
fn wire<T: Serialize + DeserializeOwned>(on: bool, value: T) -> Result<T, NetworkError> {
    if !on {
        return Ok(value);
    }
    codec::encode("rpc", &value)
        .and_then(|bytes| codec::decode("rpc", &bytes))
        .map_err(|e| NetworkError::new(&e))
}

/// Maps the target's answer to what the sender sees (through the wire encoding when `on`).
// The error type is openraft's, fixed by `RaftNetwork`.
#[allow(clippy::result_large_err)]
fn reply<T, E>(on: bool, to: NodeId, res: Result<T, RaftError<E>>) -> Result<T, RpcError<E>>
where
    T: Serialize + DeserializeOwned,
    E: std::error::Error + Serialize + DeserializeOwned,
{
    match wire(on, res)? {
        Ok(reply) => Ok(reply),
        Err(e) => Err(RPCError::RemoteError(RemoteError::new(to, e))),
    }
}

impl GroupTransport for LocalTransport {
    async fn append_entries(
        &self,
        group: GroupId,
        target: NodeId,
        _node: &Node,
        rpc: AppendEntriesRequest,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse, RpcError> {
        let raft = self.router.route(self.from, target, group)?;
        let on = self.router.wire();
        let res = raft.append_entries(wire(on, rpc)?).await;
        // A reply from a node isolated meanwhile is lost too.
        self.router.route(self.from, target, group)?;
        reply(on, target, res)
    }

    async fn vote(
        &self,
        group: GroupId,
        target: NodeId,
        _node: &Node,
        rpc: VoteRequest,
        _option: RPCOption,
    ) -> Result<VoteResponse, RpcError> {
        let raft = self.router.route(self.from, target, group)?;
        let on = self.router.wire();
        let res = raft.vote(wire(on, rpc)?).await;
        self.router.route(self.from, target, group)?;
        reply(on, target, res)
    }

    async fn install_snapshot(
        &self,
        group: GroupId,
        target: NodeId,
        _node: &Node,
        rpc: InstallSnapshotRequest,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse, RpcError<InstallSnapshotError>> {
        let raft = self
            .router
            .route(self.from, target, group)
            .map_err(RPCError::Unreachable)?;
        let on = self.router.wire();
        let res = raft.install_snapshot(wire(on, rpc)?).await;
        self.router
            .route(self.from, target, group)
            .map_err(RPCError::Unreachable)?;
        reply(on, target, res)
    }

    fn backoff(&self) -> Duration {
        Duration::from_millis(50)
    }
}
