//! Restart from disk: a node's Raft is dropped, its RocksDB directory reopened; vote, log
//! and (by replaying committed entries) state come back before it hears from any peer.

mod common;

use common::Cluster;
use raft::openraft::storage::RaftLogStorage;
use raft::openraft::RaftLogReader;
use raft::GroupId;
use raft::MemKv;
use raft::RaftDb;
use raft::RocksLogStore;

const G: GroupId = GroupId(1);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t30_restart_one_node_from_disk() {
    common::init_tracing();
    tracing::info!("--- start 3 nodes, write 10");
    let mut c = Cluster::start(3, &[G], common::test_config(), 30).await;
    let mut last = 0;
    for i in 0..10 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await
            .1;
    }
    let leader = c.leader(G).await;
    let victim = if leader == 3 { 2 } else { 3 };
    c.wait_applied(victim, G, last).await;
    let before = c.raft(victim, G).metrics().borrow().clone();
    let kv_before = c.kv(victim, G);

    tracing::info!("--- stop node {victim}; the other two keep writing");
    let dir = c.stop_node(victim).await;
    for i in 10..15 {
        last = c
            .write(G, MemKv::set(format!("k{i}"), format!("v{i}")))
            .await
            .1;
    }

    tracing::info!("--- the stopped node's directory holds its vote and log");
    {
        let db = RaftDb::open(&dir).unwrap();
        let mut log = RocksLogStore::new(db, G);
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|l| l.index), before.last_log_index);
        assert_eq!(log.read_vote().await.unwrap(), Some(before.vote));
        let entries = log.try_get_log_entries(0..).await.unwrap();
        assert_eq!(
            entries.last().map(|e| e.log_id.index),
            before.last_log_index
        );
    }

    tracing::info!("--- reopen node {victim} from {dir:?}, still isolated");
    c.isolate(victim);
    c.open_node(victim, dir).await;
    let raft = c.raft(victim, G);
    let after = raft
        .wait(Some(common::WAIT))
        .log_index_at_least(before.last_log_index, "log back")
        .await
        .unwrap();
    assert_eq!(
        after.vote.leader_id.term, before.vote.leader_id.term,
        "vote back"
    );
    // Committed entries are applied again from the log, with no peer involved.
    let applied = before.last_applied.map(|l| l.index).unwrap_or(0);
    c.wait_applied(victim, G, applied).await;
    assert_eq!(c.kv(victim, G), kv_before, "state back from disk");

    tracing::info!("--- heal; it catches up with the writes it missed");
    c.heal(victim);
    c.wait_applied(victim, G, last).await;
    let kv = c.kv(victim, G);
    for i in 0..15 {
        assert_eq!(kv.get(format!("k{i}")), Some(format!("v{i}").as_bytes()));
    }
    assert_eq!(kv, c.kv(leader, G));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t31_restart_whole_cluster() {
    common::init_tracing();
    tracing::info!("--- start 3 nodes, write 5");
    let mut c = Cluster::start(3, &[G], common::test_config(), 31).await;
    for i in 0..5 {
        c.write(G, MemKv::set(format!("k{i}"), "x")).await;
    }
    tracing::info!("--- stop all, reopen all");
    let mut dirs = Vec::new();
    for id in 1..=3 {
        dirs.push((id, c.stop_node(id).await));
    }
    for (id, dir) in dirs {
        c.open_node(id, dir).await;
    }
    tracing::info!("--- a leader is elected again and writes continue");
    let (_, last) = c.write(G, MemKv::set("after", "restart")).await;
    for id in 1..=3 {
        c.wait_applied(id, G, last).await;
        let kv = c.kv(id, G);
        assert_eq!(kv.get("after"), Some(&b"restart"[..]));
        for i in 0..5 {
            assert_eq!(kv.get(format!("k{i}")), Some(&b"x"[..]), "node {id} k{i}");
        }
    }
}
