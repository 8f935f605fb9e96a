//! The network seam: openraft's `RaftNetworkFactory` over a small transport trait that
//! carries a group id, so one connection between two nodes serves all their groups.
//!
//! `cluster-bus` implements [`GroupTransport`] with tonic (and turmoil in simulations);
//! [`crate::local`] implements it in-process for tests.

use std::future::Future;
use std::time::Duration;

use openraft::network::Backoff;
use openraft::network::RPCOption;
use openraft::RaftNetwork;
use openraft::RaftNetworkFactory;

use crate::typ::AppendEntriesRequest;
use crate::typ::AppendEntriesResponse;
use crate::typ::GroupId;
use crate::typ::InstallSnapshotError;
use crate::typ::InstallSnapshotRequest;
use crate::typ::InstallSnapshotResponse;
use crate::typ::Node;
use crate::typ::NodeId;
use crate::typ::RpcError;
use crate::typ::TypeConfig;
use crate::typ::VoteRequest;
use crate::typ::VoteResponse;

/// Sends one group's Raft RPCs to a peer and returns its reply. One value serves every group
/// of a node (clone it per group); the receiving side hands each message to
/// `Raft::{append_entries, vote, install_snapshot}` of the group it names.
///
/// Errors: `RpcError::Unreachable` when the peer cannot be reached (openraft backs off for
/// [`GroupTransport::backoff`]), `RpcError::Network` for a failure worth retrying at once,
/// `RpcError::RemoteError` for the peer's own Raft error.
pub trait GroupTransport: Clone + Send + Sync + 'static {
    /// Sends AppendEntries (also heartbeats) of `group` to `target`, reachable at `node`.
    fn append_entries(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        rpc: AppendEntriesRequest,
        option: RPCOption,
    ) -> impl Future<Output = Result<AppendEntriesResponse, RpcError>> + Send;

    /// Sends RequestVote of `group` to `target`.
    fn vote(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        rpc: VoteRequest,
        option: RPCOption,
    ) -> impl Future<Output = Result<VoteResponse, RpcError>> + Send;

    /// Sends one InstallSnapshot chunk of `group` to `target`.
    fn install_snapshot(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        rpc: InstallSnapshotRequest,
        option: RPCOption,
    ) -> impl Future<Output = Result<InstallSnapshotResponse, RpcError<InstallSnapshotError>>> + Send;

    /// How long replication to an unreachable peer waits before it tries again.
    fn backoff(&self) -> Duration {
        Duration::from_millis(500)
    }
}

/// openraft's network factory of one group.
#[derive(Debug, Clone)]
pub struct GroupNetworkFactory<T> {
    /// The group whose RPCs this factory's clients send.
    group: GroupId,
    /// The node's transport.
    transport: T,
}

impl<T: GroupTransport> GroupNetworkFactory<T> {
    /// A factory sending `group`'s RPCs over `transport`.
    pub fn new(group: GroupId, transport: T) -> Self {
        GroupNetworkFactory { group, transport }
    }
}

/// openraft's client to one peer in one group.
#[derive(Debug, Clone)]
pub struct GroupNetwork<T> {
    /// The group of every RPC sent.
    group: GroupId,
    /// The peer.
    target: NodeId,
    /// The peer's addresses, as the group's membership stores them.
    node: Node,
    /// The node's transport.
    transport: T,
}

impl<T: GroupTransport> RaftNetworkFactory<TypeConfig> for GroupNetworkFactory<T> {
    type Network = GroupNetwork<T>;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Self::Network {
        GroupNetwork {
            group: self.group,
            target,
            node: node.clone(),
            transport: self.transport.clone(),
        }
    }
}

impl<T: GroupTransport> RaftNetwork<TypeConfig> for GroupNetwork<T> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse, RpcError> {
        self.transport
            .append_entries(self.group, self.target, &self.node, rpc, option)
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse, RpcError<InstallSnapshotError>> {
        self.transport
            .install_snapshot(self.group, self.target, &self.node, rpc, option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest,
        option: RPCOption,
    ) -> Result<VoteResponse, RpcError> {
        self.transport
            .vote(self.group, self.target, &self.node, rpc, option)
            .await
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.transport.backoff()))
    }
}
