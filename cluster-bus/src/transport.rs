//! The sending side: raft's [`GroupTransport`] over tonic, one HTTP/2 channel per peer.
//!
//! A channel is made lazily on the first RPC to an address and shared by every group. After
//! a timeout or a transport error it is dropped and the next RPC makes a new one: a channel
//! that lived through a partition can otherwise hang forever.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use raft::openraft::error::NetworkError;
use raft::openraft::error::PayloadTooLarge;
use raft::openraft::error::RPCError;
use raft::openraft::error::RemoteError;
use raft::openraft::error::Timeout;
use raft::openraft::error::Unreachable;
use raft::openraft::network::RPCOption;
use raft::openraft::network::RPCTypes;
use raft::AppendEntriesRequest;
use raft::AppendEntriesResponse;
use raft::GroupId;
use raft::GroupTransport;
use raft::InstallSnapshotError;
use raft::InstallSnapshotRequest;
use raft::InstallSnapshotResponse;
use raft::Node;
use raft::NodeId;
use raft::RaftError;
use raft::RpcError;
use raft::VoteRequest;
use raft::VoteResponse;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::Channel;
use tonic::transport::Endpoint;

use crate::connect::Connect;
use crate::connect::ConnectService;
use crate::connect::TcpConnector;
use crate::error::Error;
use crate::pb;
use crate::pb::raft_bus_client::RaftBusClient;
use crate::pb::raft_reply::Reply;
use crate::pb::BusErrorCode;
use crate::pb::RaftKind;
use crate::wire;
use crate::MAX_MESSAGE_SIZE;

/// Timing of the client side.
#[derive(Debug, Clone)]
pub struct BusConfig {
    /// Limit on opening a connection to a peer.
    pub connect_timeout: Duration,
    /// HTTP/2 PING interval on every connection, idle or not.
    pub keep_alive_interval: Duration,
    /// A connection whose PING is not answered within this is closed.
    pub keep_alive_timeout: Duration,
    /// How long openraft waits before replicating again to an unreachable peer.
    pub backoff: Duration,
    /// The largest request sent (peers accept up to [`MAX_MESSAGE_SIZE`]); a larger
    /// AppendEntries answers openraft `PayloadTooLarge`, so it sends fewer entries.
    pub max_message_size: usize,
    /// How long an AppendEntries without entries (a heartbeat) waits for others to the
    /// same peer, so that they all go in one `RaftBatch` RPC (zero: each goes alone).
    pub heartbeat_linger: Duration,
}

impl Default for BusConfig {
    fn default() -> Self {
        BusConfig {
            connect_timeout: Duration::from_millis(500),
            keep_alive_interval: Duration::from_millis(500),
            keep_alive_timeout: Duration::from_millis(500),
            backoff: Duration::from_millis(200),
            max_message_size: MAX_MESSAGE_SIZE,
            heartbeat_linger: Duration::from_millis(2),
        }
    }
}

/// A request waiting for the next `RaftBatch` to its peer: it, its time limit, and where
/// its answer goes.
type Waiting = (
    pb::RaftRequest,
    Duration,
    tokio::sync::oneshot::Sender<Result<bytes::Bytes, Failure>>,
);

/// A peer's shared channel and the generation it was made in (so an RPC that failed on an
/// old channel does not drop a newer one).
struct Peer {
    /// Distinguishes this channel from its replacements.
    generation: u64,
    /// The client over the channel (cloning shares the channel).
    client: RaftBusClient<Channel>,
}

/// What every clone of a [`BusTransport`] shares.
struct Inner<C> {
    /// The sending node (named in openraft's timeout errors).
    node_id: NodeId,
    /// Opens connections.
    connector: C,
    /// Timing.
    config: BusConfig,
    /// Channels by peer bus address.
    peers: Mutex<HashMap<String, Peer>>,
    /// The next channel generation.
    next_generation: AtomicU64,
    /// Heartbeats waiting to go, by peer bus address.
    batches: Mutex<HashMap<String, Vec<Waiting>>>,
}

/// A node's cluster-bus client: raft's [`GroupTransport`] over one multiplexed HTTP/2
/// channel per peer address, opened with connector `C`. Clones share the channels.
pub struct BusTransport<C = TcpConnector> {
    /// Shared state.
    inner: Arc<Inner<C>>,
}

impl<C> Clone for BusTransport<C> {
    fn clone(&self) -> Self {
        BusTransport {
            inner: self.inner.clone(),
        }
    }
}

impl BusTransport<TcpConnector> {
    /// Node `node_id`'s transport over TCP.
    pub fn new(node_id: NodeId, config: BusConfig) -> Self {
        Self::with_connector(node_id, config, TcpConnector)
    }
}

/// How an RPC failed below Raft, before it is mapped to openraft's `RPCError`.
#[derive(Debug)]
enum Failure {
    /// No reply within the time limit.
    Timeout(Duration),
    /// The peer cannot be reached, or its bus refused the RPC (group not running there,
    /// bytes it cannot decode): retrying at once cannot help, so openraft backs off.
    Unreachable(Error),
    /// The connection failed mid-RPC: worth retrying at once on a new channel.
    Network(Error),
}

impl Failure {
    /// The same failure for another request of a failed batch.
    fn again(&self) -> Failure {
        match self {
            Failure::Timeout(d) => Failure::Timeout(*d),
            Failure::Unreachable(e) => Failure::Unreachable(Error::Task(e.to_string())),
            Failure::Network(e) => Failure::Network(Error::Task(e.to_string())),
        }
    }
}

/// The `result` bytes of a peer's reply, or why there are none.
fn reply_bytes(reply: pb::RaftReply) -> Result<bytes::Bytes, Failure> {
    match reply.reply {
        Some(Reply::Result(bytes)) => Ok(bytes),
        Some(Reply::Error(e)) => {
            let code = BusErrorCode::try_from(e.code).unwrap_or(BusErrorCode::Unspecified);
            Err(Failure::Unreachable(Error::Peer {
                code,
                message: e.message,
            }))
        }
        None => Err(Failure::Unreachable(Error::malformed(
            "raft reply",
            "empty",
        ))),
    }
}

impl<C: Connect> BusTransport<C> {
    /// Node `node_id`'s transport opening connections with `connector` (e.g. turmoil's).
    pub fn with_connector(node_id: NodeId, config: BusConfig, connector: C) -> Self {
        BusTransport {
            inner: Arc::new(Inner {
                node_id,
                connector,
                config,
                peers: Mutex::new(HashMap::new()),
                next_generation: AtomicU64::new(0),
                batches: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The shared client of `addr`, made (not yet connected) when there is none.
    fn client(&self, addr: &str) -> Result<(u64, RaftBusClient<Channel>), Error> {
        let mut peers = self.inner.peers.lock();
        if let Some(p) = peers.get(addr) {
            return Ok((p.generation, p.client.clone()));
        }
        let cfg = &self.inner.config;
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| Error::BadAddress {
                addr: addr.to_string(),
                reason: e.to_string(),
            })?
            .connect_timeout(cfg.connect_timeout)
            .http2_keep_alive_interval(cfg.keep_alive_interval)
            .keep_alive_timeout(cfg.keep_alive_timeout)
            .keep_alive_while_idle(true);
        let channel =
            endpoint.connect_with_connector_lazy(ConnectService(self.inner.connector.clone()));
        let client = RaftBusClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let generation = self.inner.next_generation.fetch_add(1, Ordering::Relaxed);
        peers.insert(
            addr.to_string(),
            Peer {
                generation,
                client: client.clone(),
            },
        );
        Ok((generation, client))
    }

    /// Drops the channel of `addr` made in `generation`, if it is still the current one.
    fn drop_channel(&self, addr: &str, generation: u64) {
        let mut peers = self.inner.peers.lock();
        if peers.get(addr).is_some_and(|p| p.generation == generation) {
            peers.remove(addr);
            tracing::debug!(node = self.inner.node_id, addr, "bus channel dropped");
        }
    }

    /// Sends one request to `addr` within `ttl` and returns the peer's `result` bytes.
    async fn send(
        &self,
        addr: &str,
        request: pb::RaftRequest,
        ttl: Duration,
    ) -> Result<bytes::Bytes, Failure> {
        let (generation, mut client) = self.client(addr).map_err(Failure::Unreachable)?;
        let reply = match tokio::time::timeout(ttl, client.raft(request)).await {
            Err(_) => {
                self.drop_channel(addr, generation);
                return Err(Failure::Timeout(ttl));
            }
            Ok(Err(status)) => return Err(self.status_failure(addr, generation, status)),
            Ok(Ok(reply)) => reply.into_inner(),
        };
        reply_bytes(reply)
    }

    /// Drops the channel after `status` and says how the RPC failed.
    fn status_failure(&self, addr: &str, generation: u64, status: tonic::Status) -> Failure {
        self.drop_channel(addr, generation);
        let unreachable = status.code() == tonic::Code::Unavailable;
        let e = Error::from(status);
        if unreachable {
            Failure::Unreachable(e)
        } else {
            Failure::Network(e)
        }
    }

    /// Sends `request` with the other heartbeats to `addr` queued within
    /// [`BusConfig::heartbeat_linger`], as one `RaftBatch`.
    async fn send_batched(
        &self,
        addr: &str,
        request: pb::RaftRequest,
        ttl: Duration,
    ) -> Result<bytes::Bytes, Failure>
    where
        C: 'static,
    {
        let linger = self.inner.config.heartbeat_linger;
        if linger.is_zero() {
            return self.send(addr, request, ttl).await;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let first = {
            let mut batches = self.inner.batches.lock();
            let q = batches.entry(addr.to_string()).or_default();
            q.push((request, ttl, tx));
            q.len() == 1
        };
        if first {
            let this = self.clone();
            let addr = addr.to_string();
            tokio::spawn(async move {
                tokio::time::sleep(linger).await;
                this.flush_batch(&addr).await;
            });
        }
        rx.await
            .unwrap_or_else(|_| Err(Failure::Network(Error::Task("batch dropped".into()))))
    }

    /// Sends the heartbeats queued for `addr` and hands each its answer.
    async fn flush_batch(&self, addr: &str) {
        let items = self.inner.batches.lock().remove(addr).unwrap_or_default();
        if items.len() <= 1 {
            for (req, ttl, tx) in items {
                let _ = tx.send(self.send(addr, req, ttl).await);
            }
            return;
        }
        let ttl = items.iter().map(|i| i.1).min().unwrap_or_default();
        let (requests, senders): (Vec<_>, Vec<_>) =
            items.into_iter().map(|(r, _, tx)| (r, tx)).unzip();
        let n = requests.len();
        let result = match self.client(addr) {
            Err(e) => Err(Failure::Unreachable(e)),
            Ok((generation, mut client)) => {
                let call = client.raft_batch(pb::RaftBatchRequest { requests });
                match tokio::time::timeout(ttl, call).await {
                    Err(_) => {
                        self.drop_channel(addr, generation);
                        Err(Failure::Timeout(ttl))
                    }
                    Ok(Err(status)) => Err(self.status_failure(addr, generation, status)),
                    Ok(Ok(reply)) => Ok(reply.into_inner().replies),
                }
            }
        };
        match result {
            Ok(replies) if replies.len() == n => {
                for (tx, r) in senders.into_iter().zip(replies) {
                    let _ = tx.send(reply_bytes(r));
                }
            }
            Ok(replies) => {
                let f = Failure::Unreachable(Error::malformed(
                    "raft batch reply",
                    format!("{} replies to {n} requests", replies.len()),
                ));
                for tx in senders {
                    let _ = tx.send(Err(f.again()));
                }
            }
            Err(f) => {
                for tx in senders {
                    let _ = tx.send(Err(f.again()));
                }
            }
        }
    }

    /// Sends one Raft RPC of `group` to `target` and maps every failure to openraft's
    /// `RPCError`: `Timeout`, `Unreachable` (openraft backs off), `Network` (retried at
    /// once), `PayloadTooLarge` (an AppendEntries of `entries` entries over
    /// [`BusConfig::max_message_size`]: openraft sends fewer) or `RemoteError` (the peer's Raft answered an error).
    #[allow(clippy::too_many_arguments, clippy::result_large_err)]
    async fn call<Req, Resp, E>(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        kind: RaftKind,
        action: RPCTypes,
        rpc: &Req,
        entries: Option<usize>,
        option: RPCOption,
    ) -> Result<Resp, RpcError<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let payload = wire::encode("raft request", rpc)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let limit = self.inner.config.max_message_size;
        if payload.len() > limit {
            let e = Error::Encode {
                what: "raft request",
                reason: format!("{} bytes > {limit}", payload.len()),
            };
            return Err(match entries {
                Some(n) if n > 1 => RPCError::PayloadTooLarge(
                    PayloadTooLarge::new_entries_hint((n / 2) as u64).with_source_error(&e),
                ),
                _ => RPCError::Unreachable(Unreachable::new(&e)),
            });
        }
        let request = pb::RaftRequest {
            group_id: group.0,
            kind: kind.into(),
            payload,
        };
        let ttl = option.hard_ttl();
        let sent = if kind == RaftKind::AppendEntries && entries == Some(0) {
            self.send_batched(&node.bus_addr, request, ttl).await
        } else {
            self.send(&node.bus_addr, request, ttl).await
        };
        let bytes = match sent {
            Ok(bytes) => bytes,
            Err(Failure::Timeout(timeout)) => {
                return Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.inner.node_id,
                    target,
                    timeout,
                }))
            }
            Err(Failure::Unreachable(e)) => {
                return Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(Failure::Network(e)) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        // A reply that does not decode (a peer of another version) would not decode again.
        let result: Result<Resp, RaftError<E>> = wire::decode("raft reply", &bytes)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(target, e)))
    }

    /// Awaits a unary `call` on the channel of `addr` made in `generation`, within
    /// `timeout`; a timeout or an error status drops the channel.
    async fn unary<T>(
        &self,
        addr: &str,
        generation: u64,
        timeout: Duration,
        call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(timeout, call).await {
            Err(_) => {
                self.drop_channel(addr, generation);
                Err(Error::Timeout(timeout))
            }
            Ok(Err(status)) => {
                self.drop_channel(addr, generation);
                Err(status.into())
            }
            Ok(Ok(reply)) => Ok(reply.into_inner()),
        }
    }

    /// Asks the bus at `addr` for its node id, within `timeout` (node health).
    pub async fn ping(&self, addr: &str, timeout: Duration) -> Result<NodeId, Error> {
        let (generation, mut client) = self.client(addr)?;
        let call = client.ping(pb::PingRequest {});
        Ok(self.unary(addr, generation, timeout, call).await?.node_id)
    }

    /// Hands a PUBLISH to the bus at `addr` for its node's subscribers, within `timeout`;
    /// how many received it there.
    pub async fn publish(
        &self,
        addr: &str,
        channel: &[u8],
        message: &[u8],
        timeout: Duration,
    ) -> Result<u64, Error> {
        let (generation, mut client) = self.client(addr)?;
        let call = client.publish(pb::PublishRequest {
            channel: channel.to_vec().into(),
            message: message.to_vec().into(),
        });
        Ok(self.unary(addr, generation, timeout, call).await?.receivers)
    }
}

impl<C: Connect> GroupTransport for BusTransport<C> {
    async fn append_entries(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        rpc: AppendEntriesRequest,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse, RpcError> {
        self.call(
            group,
            target,
            node,
            RaftKind::AppendEntries,
            RPCTypes::AppendEntries,
            &rpc,
            Some(rpc.entries.len()),
            option,
        )
        .await
    }

    async fn vote(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        rpc: VoteRequest,
        option: RPCOption,
    ) -> Result<VoteResponse, RpcError> {
        self.call(
            group,
            target,
            node,
            RaftKind::Vote,
            RPCTypes::Vote,
            &rpc,
            None,
            option,
        )
        .await
    }

    async fn install_snapshot(
        &self,
        group: GroupId,
        target: NodeId,
        node: &Node,
        rpc: InstallSnapshotRequest,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse, RpcError<InstallSnapshotError>> {
        self.call(
            group,
            target,
            node,
            RaftKind::InstallSnapshot,
            RPCTypes::InstallSnapshot,
            &rpc,
            None,
            option,
        )
        .await
    }

    fn backoff(&self) -> Duration {
        self.inner.config.backoff
    }
}
