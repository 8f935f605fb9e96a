//! The receiving side: hands each incoming Raft RPC to the named group's `Raft`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Weak;

use bytes::Bytes;
use raft::AppendEntriesRequest;
use raft::GroupId;
use raft::GroupTransport;
use raft::InstallSnapshotRequest;
use raft::MultiRaft;
use raft::NodeId;
use raft::Raft;
use raft::StateMachine;
use raft::VoteRequest;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::net::TcpListener;
use tokio_stream::Stream;
use tokio_stream::StreamExt;
use tonic::transport::Server;

use crate::connect::Accepted;
use crate::error::Error;
use crate::pb;
use crate::pb::raft_bus_server::RaftBus;
use crate::pb::raft_bus_server::RaftBusServer;
use crate::pb::raft_reply::Reply;
use crate::pb::BusErrorCode;
use crate::pb::RaftKind;
use crate::wire;
use crate::MAX_MESSAGE_SIZE;

/// Finds this node's running member of a group.
type Lookup = dyn Fn(GroupId) -> Option<Raft> + Send + Sync;

/// Delivers a peer's PUBLISH (channel, message) to this node's subscribers; how many.
type Publish = dyn Fn(&[u8], &[u8]) -> u64 + Send + Sync;

/// What a bus server has served (for tests and INFO).
#[derive(Debug, Default)]
pub struct BusCounters {
    /// `Raft` RPCs (one Raft request each).
    pub raft: std::sync::atomic::AtomicU64,
    /// `RaftBatch` RPCs.
    pub batches: std::sync::atomic::AtomicU64,
    /// Raft requests that came in `RaftBatch` RPCs.
    pub batched: std::sync::atomic::AtomicU64,
}

/// The `RaftBus` service implementation (the generated server's handler). Cheap to clone.
#[derive(Clone)]
pub struct BusService {
    /// What it has served.
    counters: Arc<BusCounters>,
    /// This node's id (answered by `Ping`).
    node_id: NodeId,
    /// The group lookup.
    lookup: Arc<Lookup>,
    /// The PUBLISH handler (`None`: Publish is unimplemented here).
    publish: Option<Arc<Publish>>,
}

impl BusService {
    /// Runs one Raft RPC: decodes it, finds the group, calls its `Raft`, encodes the result
    /// (`Result<response, RaftError>`, so the peer sees Raft's own errors).
    async fn handle(&self, req: pb::RaftRequest) -> Result<Bytes, Error> {
        let group = GroupId(req.group_id);
        let kind = RaftKind::try_from(req.kind)
            .map_err(|_| Error::malformed("raft request kind", req.kind))?;
        let raft = || (self.lookup)(group).ok_or(Error::UnknownGroup(group));
        match kind {
            RaftKind::AppendEntries => {
                let rpc: AppendEntriesRequest = wire::decode("append_entries", &req.payload)?;
                let res = raft()?.append_entries(rpc).await;
                wire::encode("append_entries result", &res)
            }
            RaftKind::Vote => {
                let rpc: VoteRequest = wire::decode("vote", &req.payload)?;
                let res = raft()?.vote(rpc).await;
                wire::encode("vote result", &res)
            }
            RaftKind::InstallSnapshot => {
                let rpc: InstallSnapshotRequest = wire::decode("install_snapshot", &req.payload)?;
                let res = raft()?.install_snapshot(rpc).await;
                wire::encode("install_snapshot result", &res)
            }
            RaftKind::Unspecified => Err(Error::malformed("raft request kind", "unspecified")),
        }
    }
}

impl BusService {
    /// The reply to one Raft RPC: Raft's result, or why it did not reach Raft.
    async fn answer(&self, req: pb::RaftRequest) -> pb::RaftReply {
        let (group, kind) = (req.group_id, req.kind);
        let reply = match self.handle(req).await {
            Ok(result) => Reply::Result(result),
            Err(e) => {
                tracing::debug!(node = self.node_id, group, kind, "bus rpc refused: {e}");
                Reply::Error(error_reply(&e))
            }
        };
        pb::RaftReply { reply: Some(reply) }
    }
}

/// The reply carrying `err`.
fn error_reply(err: &Error) -> pb::BusError {
    let code = match err {
        Error::UnknownGroup(_) => BusErrorCode::UnknownGroup,
        Error::Malformed { .. } => BusErrorCode::Malformed,
        _ => BusErrorCode::Internal,
    };
    pb::BusError {
        code: code.into(),
        message: err.to_string(),
    }
}

#[tonic::async_trait]
impl RaftBus for BusService {
    async fn raft(
        &self,
        request: tonic::Request<pb::RaftRequest>,
    ) -> Result<tonic::Response<pb::RaftReply>, tonic::Status> {
        self.counters
            .raft
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(tonic::Response::new(
            self.answer(request.into_inner()).await,
        ))
    }

    async fn raft_batch(
        &self,
        request: tonic::Request<pb::RaftBatchRequest>,
    ) -> Result<tonic::Response<pb::RaftBatchReply>, tonic::Status> {
        let requests = request.into_inner().requests;
        use std::sync::atomic::Ordering::Relaxed;
        self.counters.batches.fetch_add(1, Relaxed);
        self.counters
            .batched
            .fetch_add(requests.len() as u64, Relaxed);
        // Every group's RPC runs at once (one slow group must not hold up the others).
        let tasks: Vec<_> = requests
            .into_iter()
            .map(|req| {
                let this = self.clone();
                tokio::spawn(async move { this.answer(req).await })
            })
            .collect();
        let mut replies = Vec::with_capacity(tasks.len());
        for t in tasks {
            replies.push(t.await.unwrap_or_else(|e| pb::RaftReply {
                reply: Some(Reply::Error(error_reply(&Error::Task(e.to_string())))),
            }));
        }
        Ok(tonic::Response::new(pb::RaftBatchReply { replies }))
    }

    async fn ping(
        &self,
        _request: tonic::Request<pb::PingRequest>,
    ) -> Result<tonic::Response<pb::PingReply>, tonic::Status> {
        Ok(tonic::Response::new(pb::PingReply {
            node_id: self.node_id,
        }))
    }

    async fn publish(
        &self,
        request: tonic::Request<pb::PublishRequest>,
    ) -> Result<tonic::Response<pb::PublishReply>, tonic::Status> {
        let Some(publish) = &self.publish else {
            return Err(tonic::Status::unimplemented(
                "no PUBLISH handler on this node",
            ));
        };
        let req = request.into_inner();
        let receivers = publish(&req.channel, &req.message);
        Ok(tonic::Response::new(pb::PublishReply { receivers }))
    }
}

/// A node's bus server: serves `RaftBus` for the node's groups.
#[derive(Clone)]
pub struct BusServer {
    /// The handler.
    service: BusService,
}

impl BusServer {
    /// A server of node `node_id` finding groups with `lookup` (`None`: not running here).
    pub fn new(
        node_id: NodeId,
        lookup: impl Fn(GroupId) -> Option<Raft> + Send + Sync + 'static,
    ) -> Self {
        BusServer {
            service: BusService {
                counters: Arc::default(),
                node_id,
                lookup: Arc::new(lookup),
                publish: None,
            },
        }
    }

    /// What this server (and every clone, and the spawned server) has served.
    pub fn counters(&self) -> Arc<BusCounters> {
        self.service.counters.clone()
    }

    /// Delivers peers' PUBLISH messages with `publish(channel, message)` (which answers
    /// how many subscribers got it).
    pub fn with_publish(
        mut self,
        publish: impl Fn(&[u8], &[u8]) -> u64 + Send + Sync + 'static,
    ) -> Self {
        self.service.publish = Some(Arc::new(publish));
        self
    }

    /// A server for the groups open in `multi`. It holds `multi` weakly, so the node can
    /// still [`MultiRaft::close`] it (after stopping this server).
    pub fn for_multi<S: StateMachine, T: GroupTransport>(multi: &Arc<MultiRaft<S, T>>) -> Self {
        let weak: Weak<MultiRaft<S, T>> = Arc::downgrade(multi);
        Self::new(multi.node_id(), move |g| {
            weak.upgrade().and_then(|m| m.group(g)).map(|g| g.raft)
        })
    }

    /// Answers `request` as a peer's RPC would be answered, without a socket (tests, fuzzing).
    pub async fn handle(&self, request: pb::RaftRequest) -> pb::RaftReply {
        let reply = match self.service.handle(request).await {
            Ok(result) => Reply::Result(result),
            Err(e) => Reply::Error(error_reply(&e)),
        };
        pb::RaftReply { reply: Some(reply) }
    }

    /// The generated tonic service, to mount next to other services.
    pub fn into_service(self) -> RaftBusServer<BusService> {
        RaftBusServer::new(self.service)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE)
    }

    /// Serves the connections `incoming` yields until `shutdown` completes, then finishes
    /// the RPCs in flight. Any byte stream will do: a simulation passes the accepted
    /// streams of e.g. a `turmoil::net::TcpListener`.
    pub async fn serve_with_incoming_shutdown<I, IO, IE, F>(
        self,
        incoming: I,
        shutdown: F,
    ) -> Result<(), Error>
    where
        I: Stream<Item = Result<IO, IE>>,
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        IE: Into<Box<dyn std::error::Error + Send + Sync>>,
        F: Future<Output = ()>,
    {
        let incoming = incoming.map(|conn| conn.map(Accepted));
        Server::builder()
            .serve_with_incoming_shutdown(self.into_service(), incoming, shutdown)
            .await?;
        Ok(())
    }

    /// Serves TCP connections accepted on `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), Error> {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|s| {
            let s = s?;
            s.set_nodelay(true)?;
            Ok::<_, std::io::Error>(s)
        });
        self.serve_with_incoming_shutdown(incoming, shutdown).await
    }

    /// Serves `listener` on a new task until [`RunningBus::shutdown`].
    pub fn spawn(self, listener: TcpListener) -> Result<RunningBus, Error> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(self.serve(listener, async {
            let _ = stopped.await;
        }));
        Ok(RunningBus { addr, stop, task })
    }
}

/// A bus server running on its own task ([`BusServer::spawn`]).
pub struct RunningBus {
    /// Where it listens.
    addr: SocketAddr,
    /// Tells it to stop.
    stop: tokio::sync::oneshot::Sender<()>,
    /// The serving task.
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl RunningBus {
    /// The listening address (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes the connections once their RPCs in flight are answered, and
    /// waits for the server to end.
    pub async fn shutdown(self) -> Result<(), Error> {
        let _ = self.stop.send(());
        self.task.await.map_err(|e| Error::Task(e.to_string()))?
    }
}
