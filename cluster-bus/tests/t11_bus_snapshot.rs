//! InstallSnapshot over the bus: a node that was down while the others snapshotted and
//! purged their logs comes back and is sent the snapshot, in many small chunks.

mod common;

use common::Cluster;
use raft::GroupId;
use raft::MemKv;

const G: GroupId = GroupId(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t11_restarted_node_catches_up_by_snapshot() {
    common::init_tracing();
    let mut config = common::test_config();
    // Purge everything a snapshot covers, and send snapshots in many chunks.
    config.max_in_snapshot_log_to_keep = 0;
    config.snapshot_max_chunk_size = 64;
    let mut c = Cluster::start_with(3, &[G], config).await;

    tracing::info!("--- write 10; stop a follower");
    let mut last = 0;
    for i in 0..10 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await;
    }
    let leader = c.leader(G).await;
    let down = if leader == 3 { 2 } else { 3 };
    c.wait_applied(down, G, last).await;
    let dir = c.stop_node(down).await;

    tracing::info!("--- write 30 more; snapshot and purge on the running nodes");
    for i in 10..40 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await;
    }
    let running: Vec<_> = c.nodes.keys().copied().collect();
    for id in running {
        c.wait_applied(id, G, last).await;
        let raft = c.raft(id, G);
        raft.trigger().snapshot().await.unwrap();
        raft.wait(Some(common::WAIT))
            .metrics(|m| m.snapshot.map(|s| s.index) >= Some(last), "snapshot")
            .await
            .unwrap();
        raft.trigger().purge_log(last).await.unwrap();
        raft.wait(Some(common::WAIT))
            .metrics(|m| m.purged.map(|p| p.index) >= Some(last), "purged")
            .await
            .unwrap();
    }

    tracing::info!("--- restart {down}: it is sent the snapshot");
    c.restart_node(down, dir).await;
    c.wait_applied(down, G, last).await;
    c.raft(down, G)
        .wait(Some(common::WAIT))
        .metrics(
            |m| m.snapshot.map(|s| s.index) >= Some(last),
            "installed snapshot",
        )
        .await
        .unwrap();
    let kv = c.kv(down, G);
    for i in 0..40 {
        assert_eq!(kv.get(format!("k{i}")), Some(format!("v{i}").as_bytes()));
    }
    let leader = c.leader(G).await;
    assert_eq!(kv.map, c.kv(leader, G).map);
    for id in [1, 2, 3] {
        c.stop_node(id).await;
    }
}
