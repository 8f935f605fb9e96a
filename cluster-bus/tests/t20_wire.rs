//! The bus between two ends: what a peer can send that is wrong (garbage bytes, unknown
//! kinds, unknown groups: each answers an error reply, never a panic), how the transport
//! maps failures to openraft's errors (unknown group and dead peer: unreachable; silent
//! peer: timeout, then a new channel), and the seams a simulation plugs into (any
//! connector, any stream of accepted connections).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster_bus::pb;
use cluster_bus::pb::raft_bus_client::RaftBusClient;
use cluster_bus::pb::raft_reply::Reply;
use cluster_bus::pb::BusErrorCode;
use cluster_bus::pb::RaftKind;
use cluster_bus::BusServer;
use cluster_bus::BusTransport;
use raft::openraft::error::RPCError;
use raft::openraft::network::RPCOption;
use raft::GroupId;
use raft::GroupTransport;
use raft::MemKv;
use raft::MultiRaft;
use raft::Node;
use raft::RaftDb;
use raft::Vote;
use raft::VoteRequest;
use tokio::net::TcpListener;

/// A postcard-encoded vote request (what a real peer sends).
fn vote_bytes() -> Vec<u8> {
    postcard::to_stdvec(&VoteRequest::new(Vote::new(1, 2), None)).unwrap()
}

fn request(group: u32, kind: i32, payload: impl Into<bytes::Bytes>) -> pb::RaftRequest {
    pb::RaftRequest {
        group_id: group,
        kind,
        payload: payload.into(),
    }
}

fn error_code(reply: pb::RaftReply) -> BusErrorCode {
    match reply.reply {
        Some(Reply::Error(e)) => BusErrorCode::try_from(e.code).unwrap(),
        other => panic!("expected an error reply, got {other:?}"),
    }
}

#[tokio::test]
async fn t20_garbage_requests_answer_errors() {
    let server = BusServer::new(1, |_| None);
    let garbage: &[&[u8]] = &[b"", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"hello"];
    for kind in [
        RaftKind::AppendEntries,
        RaftKind::Vote,
        RaftKind::InstallSnapshot,
    ] {
        for g in garbage {
            let reply = server.handle(request(1, kind.into(), g.to_vec())).await;
            assert_eq!(error_code(reply), BusErrorCode::Malformed, "{kind:?} {g:?}");
        }
    }
    let mut trailing = vote_bytes();
    trailing.push(0);
    let reply = server
        .handle(request(1, RaftKind::Vote.into(), trailing))
        .await;
    assert_eq!(error_code(reply), BusErrorCode::Malformed);
    for kind in [0, 99, -1] {
        let reply = server.handle(request(1, kind, vote_bytes())).await;
        assert_eq!(error_code(reply), BusErrorCode::Malformed, "kind {kind}");
    }
    let reply = server
        .handle(request(7, RaftKind::Vote.into(), vote_bytes()))
        .await;
    assert_eq!(error_code(reply), BusErrorCode::UnknownGroup);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t21_over_the_wire() {
    common::init_tracing();
    let g = GroupId(1);
    let tmp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let db = RaftDb::open(tmp.path()).unwrap();
    let transport = BusTransport::new(1, common::bus_config());
    let multi = Arc::new(MultiRaft::new(1, db, common::test_config(), transport.clone()).unwrap());
    let bus = BusServer::for_multi(&multi).spawn(listener).unwrap();
    let group = multi.open_group(g, MemKv::default()).await.unwrap();
    group
        .raft
        .initialize(BTreeMap::from([(
            1,
            Node::new("127.0.0.1:1", addr.clone()),
        )]))
        .await
        .unwrap();

    tracing::info!("--- raw garbage through a real socket: error replies, server lives");
    let mut client = RaftBusClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    for kind in [
        RaftKind::AppendEntries,
        RaftKind::Vote,
        RaftKind::InstallSnapshot,
    ] {
        let reply = client
            .raft(request(1, kind.into(), b"\x05garbage".to_vec()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_code(reply), BusErrorCode::Malformed);
    }
    let reply = client
        .raft(request(1, RaftKind::Vote.into(), vote_bytes()))
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(reply.reply, Some(Reply::Result(_))), "{reply:?}");
    assert_eq!(
        transport.ping(&addr, Duration::from_secs(5)).await.unwrap(),
        1
    );

    tracing::info!("--- transport errors map to openraft's: unknown group, dead peer");
    let option = RPCOption::new(Duration::from_secs(2));
    let rpc = VoteRequest::new(Vote::new(1, 2), None);
    let here = Node::new("127.0.0.1:1", addr.clone());
    let res = transport
        .vote(GroupId(9), 1, &here, rpc.clone(), option.clone())
        .await;
    assert!(matches!(res, Err(RPCError::Unreachable(_))), "{res:?}");
    let res = transport
        .vote(g, 1, &here, rpc.clone(), option.clone())
        .await;
    assert!(res.is_ok(), "{res:?}");

    let dead = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let nowhere = Node::new("127.0.0.1:1", dead_addr);
    let res = transport
        .vote(g, 2, &nowhere, rpc.clone(), option.clone())
        .await;
    assert!(matches!(res, Err(RPCError::Unreachable(_))), "{res:?}");
    let bad = Node::new("127.0.0.1:1", "not an address");
    let res = transport.vote(g, 2, &bad, rpc, option).await;
    assert!(matches!(res, Err(RPCError::Unreachable(_))), "{res:?}");

    bus.shutdown().await.unwrap();
    multi.shutdown().await.unwrap();
}

/// Opens TCP connections like [`cluster_bus::TcpConnector`] and counts them.
#[derive(Clone, Default)]
struct CountingConnector(Arc<std::sync::atomic::AtomicUsize>);

impl cluster_bus::Connect for CountingConnector {
    type Io = tokio::net::TcpStream;

    async fn connect(&self, addr: &str) -> std::io::Result<Self::Io> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        cluster_bus::TcpConnector.connect(addr).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t22_silent_peer_times_out_and_the_channel_is_made_anew() {
    common::init_tracing();
    tracing::info!("--- a peer that accepts connections and never answers");
    let hole = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = hole.local_addr().unwrap().to_string();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((s, _)) = hole.accept().await {
            conns.push(s);
        }
    });
    let connector = CountingConnector::default();
    let connects = connector.0.clone();
    let transport = BusTransport::with_connector(1, common::bus_config(), connector);
    let node = Node::new("127.0.0.1:1", addr);
    let rpc = VoteRequest::new(Vote::new(1, 1), None);
    let ttl = Duration::from_millis(200);
    for _ in 0..2 {
        let res = transport
            .vote(GroupId(1), 2, &node, rpc.clone(), RPCOption::new(ttl))
            .await;
        match res {
            Err(RPCError::Timeout(t)) => {
                assert_eq!((t.id, t.target, t.timeout), (1, 2, ttl));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }
    // The first channel was dropped after its timeout; the second call connected again.
    assert!(connects.load(std::sync::atomic::Ordering::SeqCst) >= 2);
    held.abort();
}

/// Connects through in-memory pipes handed to a server's incoming stream: the shape of a
/// simulated network (turmoil) plugged into both seams.
#[derive(Clone)]
struct PipeConnector(tokio::sync::mpsc::UnboundedSender<tokio::io::DuplexStream>);

impl cluster_bus::Connect for PipeConnector {
    type Io = tokio::io::DuplexStream;

    async fn connect(&self, _addr: &str) -> std::io::Result<Self::Io> {
        let (client, server) = tokio::io::duplex(64 * 1024);
        self.0
            .send(server)
            .map_err(|_| std::io::Error::other("server gone"))?;
        Ok(client)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn t23_serves_any_stream_and_connects_through_any_connector() {
    use tokio_stream::StreamExt;

    common::init_tracing();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let incoming =
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(Ok::<_, std::io::Error>);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(BusServer::new(5, |_| None).serve_with_incoming_shutdown(
        incoming,
        async {
            let _ = stopped.await;
        },
    ));
    let transport = BusTransport::with_connector(1, common::bus_config(), PipeConnector(tx));
    assert_eq!(
        transport
            .ping("pipe:1", Duration::from_secs(5))
            .await
            .unwrap(),
        5
    );
    let node = Node::new("pipe:0", "pipe:1");
    let res = transport
        .vote(
            GroupId(1),
            5,
            &node,
            VoteRequest::new(Vote::new(1, 1), None),
            RPCOption::new(Duration::from_secs(5)),
        )
        .await;
    assert!(matches!(res, Err(RPCError::Unreachable(_))), "{res:?}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn t24_oversized_append_entries_asks_openraft_for_fewer_entries() {
    use raft::openraft::CommittedLeaderId;
    use raft::openraft::EntryPayload;
    use raft::openraft::LogId;

    let config = cluster_bus::BusConfig {
        max_message_size: 1000,
        ..common::bus_config()
    };
    // Nothing listens there: the size check comes before any connection.
    let transport = BusTransport::new(1, config);
    let node = Node::new("127.0.0.1:1", "127.0.0.1:1");
    let append = |n: u64| raft::AppendEntriesRequest {
        vote: Vote::new_committed(1, 1),
        prev_log_id: None,
        leader_commit: None,
        entries: (1..=n)
            .map(|i| raft::Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
                payload: EntryPayload::Normal(raft::Request::new(vec![b'x'; 400], 0, 0)),
            })
            .collect(),
    };
    let option = RPCOption::new(Duration::from_secs(1));
    let res = transport
        .append_entries(GroupId(1), 2, &node, append(8), option.clone())
        .await;
    match res {
        Err(RPCError::PayloadTooLarge(e)) => assert_eq!(e.entries_hint(), 4),
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    let res = transport
        .append_entries(GroupId(1), 2, &node, append(1), option.clone())
        .await;
    assert!(matches!(res, Err(RPCError::Unreachable(_))), "{res:?}");
}
