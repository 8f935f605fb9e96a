//! A 3-node group over the in-process network: election, replication, leader loss,
//! re-election, catch-up; every acknowledged write ends up on every replica.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Cluster;
use raft::GroupId;
use raft::MemKv;

const G: GroupId = GroupId(1);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t20_failover_and_catch_up() {
    common::init_tracing();
    tracing::info!("--- start 3 nodes, initialize, elect");
    let mut c = Cluster::start(3, &[G], common::test_config(), 20).await;
    let first = c.leader(G).await;

    let mut acked: BTreeMap<String, String> = BTreeMap::new();
    let mut last = 0;
    tracing::info!("--- write 10 through leader {first}");
    for i in 0..10 {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        let (resp, index) = c.write(G, MemKv::set(&k, &v)).await;
        assert_eq!(&resp.0[..], b"OK");
        acked.insert(k, v);
        last = index;
    }
    let (resp, index) = c.write(G, MemKv::incr("counter")).await;
    assert_eq!(&resp.0[..], b"1");
    acked.insert("counter".into(), "1".into());
    last = last.max(index);

    tracing::info!("--- every replica applies them");
    for id in 1..=3 {
        c.wait_applied(id, G, last).await;
        let kv = c.kv(id, G);
        for (k, v) in &acked {
            assert_eq!(kv.get(k), Some(v.as_bytes()), "node {id} key {k}");
        }
    }

    tracing::info!("--- isolate leader {first}; a new leader is elected");
    c.isolate(first);
    let second = c.leader(G).await;
    assert_ne!(second, first);

    tracing::info!("--- a write to the cut-off old leader is never acknowledged");
    let stale = c.request(MemKv::set("lost", "never acked"));
    let old = c.raft(first, G);
    let res = tokio::time::timeout(Duration::from_secs(2), old.client_write(stale)).await;
    assert!(
        !matches!(res, Ok(Ok(_))),
        "isolated leader acknowledged a write"
    );

    tracing::info!("--- write 10 more through {second}");
    for i in 10..20 {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        let (_, index) = c.write(G, MemKv::set(&k, &v)).await;
        acked.insert(k, v);
        last = index;
    }
    let (resp, index) = c.write(G, MemKv::incr("counter")).await;
    assert_eq!(&resp.0[..], b"2");
    acked.insert("counter".into(), "2".into());
    last = last.max(index);

    tracing::info!("--- heal {first}; it catches up");
    c.heal(first);
    for id in 1..=3 {
        c.wait_applied(id, G, last).await;
    }

    tracing::info!("--- every acknowledged write is on every replica, replicas agree");
    let reference = c.kv(1, G);
    for id in 1..=3 {
        let kv = c.kv(id, G);
        for (k, v) in &acked {
            assert_eq!(kv.get(k), Some(v.as_bytes()), "node {id} key {k}");
        }
        assert_eq!(kv, reference, "node {id} diverged");
        // The old leader's unreplicated entry was truncated away by the new leader's log.
        assert_eq!(kv.get("lost"), None, "node {id}");
    }
    let m = c.raft(first, G).metrics().borrow().clone();
    assert_eq!(m.current_leader, Some(c.leader(G).await));
}
