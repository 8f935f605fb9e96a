//! Heartbeats (AppendEntries without entries) of many groups to one peer travel in one
//! `RaftBatch` RPC, each answered as if alone; other RPCs go alone.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use cluster_bus::{BusConfig, BusServer, BusTransport};
use raft::openraft::error::RPCError;
use raft::openraft::network::RPCOption;
use raft::{AppendEntriesRequest, GroupId, GroupTransport, Node, Vote, VoteRequest};
use tokio::net::TcpListener;

fn heartbeat() -> AppendEntriesRequest {
    AppendEntriesRequest {
        vote: Vote::new(1, 2),
        prev_log_id: None,
        leader_commit: None,
        entries: vec![],
    }
}

#[tokio::test]
async fn t30_heartbeats_of_many_groups_go_in_one_rpc() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // No group runs on the server: every request is answered "unknown group", which the
    // transport reports as unreachable, one answer per request.
    let server = BusServer::new(1, |_| None);
    let counters = server.counters();
    let bus = server.spawn(listener).unwrap();
    let transport = BusTransport::new(
        2,
        BusConfig {
            heartbeat_linger: Duration::from_millis(20),
            ..BusConfig::default()
        },
    );
    let node = Node::new("127.0.0.1:1", addr);
    let option = || RPCOption::new(Duration::from_secs(2));
    let sends = (1..=10u32).map(|g| {
        let (t, node) = (transport.clone(), node.clone());
        tokio::spawn(async move {
            t.append_entries(GroupId(g), 1, &node, heartbeat(), option())
                .await
        })
    });
    for s in sends.collect::<Vec<_>>() {
        let r = s.await.unwrap();
        assert!(matches!(r, Err(RPCError::Unreachable(_))), "{r:?}");
    }
    assert_eq!(counters.batches.load(Relaxed), 1);
    assert_eq!(counters.batched.load(Relaxed), 10);
    assert_eq!(counters.raft.load(Relaxed), 0);
    // A vote is not held back: it goes alone.
    let vote = VoteRequest::new(Vote::new(2, 2), None);
    let r = transport.vote(GroupId(1), 1, &node, vote, option()).await;
    assert!(matches!(r, Err(RPCError::Unreachable(_))), "{r:?}");
    assert_eq!(counters.raft.load(Relaxed), 1);
    // A lone heartbeat goes alone too.
    let r = transport
        .append_entries(GroupId(3), 1, &node, heartbeat(), option())
        .await;
    assert!(matches!(r, Err(RPCError::Unreachable(_))), "{r:?}");
    assert_eq!(counters.raft.load(Relaxed), 2);
    bus.shutdown().await.unwrap();
}
