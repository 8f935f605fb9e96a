//! Snapshots: build on the leader, purge the log behind it, and a lagging follower that
//! needs purged entries catches up by receiving the (zstd-compressed) snapshot. A node
//! restarted after purge comes back from its stored snapshot plus the log after it.

mod common;

use common::Cluster;
use raft::GroupId;
use raft::MemKv;

const G: GroupId = GroupId(1);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t40_lagging_node_catches_up_by_snapshot() {
    common::init_tracing();
    let mut config = common::test_config();
    // Purge everything a snapshot covers, so the lagging node cannot be sent the log.
    config.max_in_snapshot_log_to_keep = 0;
    let mut c = Cluster::start(3, &[G], config, 40).await;

    tracing::info!("--- write 10; everyone has them");
    let mut last = 0;
    for i in 0..10 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await
            .1;
    }
    let leader = c.leader(G).await;
    let lagging = if leader == 3 { 2 } else { 3 };
    c.wait_applied(lagging, G, last).await;

    tracing::info!("--- isolate {lagging}; write 30 more; snapshot and purge on {leader}");
    c.isolate(lagging);
    for i in 10..40 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await
            .1;
    }
    let raft = c.raft(leader, G);
    raft.trigger().snapshot().await.unwrap();
    raft.wait(Some(common::WAIT))
        .metrics(
            |m| m.snapshot.map(|s| s.index) >= Some(last),
            "leader snapshot",
        )
        .await
        .unwrap();
    raft.trigger().purge_log(last).await.unwrap();
    raft.wait(Some(common::WAIT))
        .metrics(|m| m.purged.map(|p| p.index) >= Some(last), "leader purged")
        .await
        .unwrap();

    tracing::info!("--- heal {lagging}: it gets the snapshot");
    c.heal(lagging);
    c.wait_applied(lagging, G, last).await;
    let lag = c.raft(lagging, G);
    lag.wait(Some(common::WAIT))
        .metrics(
            |m| m.snapshot.map(|s| s.index) >= Some(last),
            "follower installed snapshot",
        )
        .await
        .unwrap();
    let kv = c.kv(lagging, G);
    for i in 0..40 {
        assert_eq!(
            kv.get(format!("k{i}")),
            Some(format!("v{i}").as_bytes()),
            "k{i}"
        );
    }
    assert_eq!(kv.map, c.kv(leader, G).map);

    tracing::info!("--- writes continue after the snapshot; restart {leader} from snapshot + log");
    for i in 40..45 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await
            .1;
    }
    for id in 1..=3 {
        c.wait_applied(id, G, last).await;
    }
    let expected = c.kv(leader, G);
    let dir = c.stop_node(leader).await;
    c.isolate(leader);
    c.open_node(leader, dir).await;
    c.wait_applied(leader, G, last).await;
    let back = c.kv(leader, G);
    assert_eq!(back, expected, "snapshot + log replay restore the state");
}
