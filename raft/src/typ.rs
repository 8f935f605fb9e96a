//! The openraft type configuration and the types every group shares.

use std::fmt;
use std::io::Cursor;

use bytes::Bytes;
use serde::Deserialize;
use serde::Serialize;

/// A node's id in the cluster (openraft's `NodeId`).
pub type NodeId = u64;

/// The id of one Raft group. Group 0 is the metadata group (nodes and placements); data
/// groups are numbered from 1 (see [`crate::slots`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct GroupId(pub u32);

impl GroupId {
    /// The metadata group: cluster nodes and group placements.
    pub const META: GroupId = GroupId(0);

    /// True for the metadata group.
    pub fn is_meta(self) -> bool {
        self == Self::META
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "g{}", self.0)
    }
}

/// What a group's membership stores about a node: where clients and peers reach it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Node {
    /// The Redis listener (`host:port`) that clients are redirected to (`-MOVED`).
    pub addr: String,
    /// The cluster bus address (`host:port`) that peers send Raft RPCs to.
    pub bus_addr: String,
}

impl Node {
    /// A node reachable at `addr` (clients) and `bus_addr` (peers).
    pub fn new(addr: impl Into<String>, bus_addr: impl Into<String>) -> Self {
        Node {
            addr: addr.into(),
            bus_addr: bus_addr.into(),
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{addr: {}, bus: {}}}", self.addr, self.bus_addr)
    }
}

/// One replicated write: opaque command bytes plus what makes applying them deterministic.
///
/// The leader fills `time_ns` and `seed` when it proposes the write, so every replica sees
/// the same clock (relative expiries become absolute) and the same random choices (SPOP,
/// scripts), however late it applies the entry.
///
/// `format` is the entry format version ([`crate::ENTRY_FORMAT`] for a request made by
/// [`Request::new`]); it is serialized with the command (see `codec`'s format versions)
/// and a replica refuses to apply a version newer than it knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The command, encoded by the state machine's owner (e.g. a RESP frame).
    pub command: Bytes,
    /// The leader's wall clock at proposal time, in Unix nanoseconds.
    pub time_ns: u64,
    /// A seed chosen by the leader for any random choice the command makes.
    pub seed: u64,
    /// The entry format version the command is written in.
    pub format: u16,
}

impl Default for Request {
    fn default() -> Self {
        Request::new(Bytes::new(), 0, 0)
    }
}

impl Request {
    /// A request of the current entry format with the given command, leader time and seed.
    pub fn new(command: impl Into<Bytes>, time_ns: u64, seed: u64) -> Self {
        Request {
            command: command.into(),
            time_ns,
            seed,
            format: crate::codec::ENTRY_FORMAT,
        }
    }
}

/// How a [`Request`] is serialized: the fields of the release before format versions,
/// with the version folded into the command bytes (`codec::seal_command`).
#[derive(Serialize, Deserialize)]
#[serde(rename = "Request")]
struct RequestRepr {
    /// The sealed command.
    command: Bytes,
    /// [`Request::time_ns`].
    time_ns: u64,
    /// [`Request::seed`].
    seed: u64,
}

impl Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RequestRepr {
            command: crate::codec::seal_command(self.format, &self.command),
            time_ns: self.time_ns,
            seed: self.seed,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let repr = RequestRepr::deserialize(d)?;
        let (format, command) =
            crate::codec::open_command(repr.command).map_err(serde::de::Error::custom)?;
        Ok(Request {
            command,
            time_ns: repr.time_ns,
            seed: repr.seed,
            format,
        })
    }
}

/// The result of applying one [`Request`]: opaque bytes (e.g. an encoded RESP reply).
/// Blank and membership entries answer an empty response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Response(pub Bytes);

openraft::declare_raft_types!(
    /// The openraft type configuration of every Ember group.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A running Raft group member.
pub type Raft = openraft::Raft<TypeConfig>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id (leader id + index).
pub type LogId = openraft::LogId<NodeId>;
/// A vote (term, candidate, committed).
pub type Vote = openraft::Vote<NodeId>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A snapshot: metadata and the (zstd-compressed) state-machine bytes.
pub type Snapshot = openraft::storage::Snapshot<TypeConfig>;
/// A membership with the log id that introduced it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// openraft's storage error.
pub type StorageError = openraft::StorageError<NodeId>;
/// The AppendEntries RPC request.
pub type AppendEntriesRequest = openraft::raft::AppendEntriesRequest<TypeConfig>;
/// The AppendEntries RPC reply.
pub type AppendEntriesResponse = openraft::raft::AppendEntriesResponse<NodeId>;
/// The RequestVote RPC request.
pub type VoteRequest = openraft::raft::VoteRequest<NodeId>;
/// The RequestVote RPC reply.
pub type VoteResponse = openraft::raft::VoteResponse<NodeId>;
/// One chunk of an InstallSnapshot RPC.
pub type InstallSnapshotRequest = openraft::raft::InstallSnapshotRequest<TypeConfig>;
/// The InstallSnapshot RPC reply.
pub type InstallSnapshotResponse = openraft::raft::InstallSnapshotResponse<NodeId>;
/// An error a Raft RPC handler answers with (`E` is the RPC-specific part).
pub type RaftError<E = openraft::error::Infallible> = openraft::error::RaftError<NodeId, E>;
/// The error of sending one Raft RPC: unreachable, network, timeout or the peer's error.
pub type RpcError<E = openraft::error::Infallible> =
    openraft::error::RPCError<NodeId, Node, RaftError<E>>;
/// The peer-side error of InstallSnapshot.
pub type InstallSnapshotError = openraft::error::InstallSnapshotError;
/// The error `client_write` answers with (e.g. forward to leader).
pub type ClientWriteError = RaftError<openraft::error::ClientWriteError<NodeId, Node>>;
