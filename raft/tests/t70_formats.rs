//! Format versions on a running cluster: an entry of a newer format than this build knows
//! is replicated and stored like any other but applied by no replica; each stops its group
//! with the format error, again after a restart, and what came before stays applied.

mod common;

use common::Cluster;
use raft::GroupId;
use raft::MemKv;
use raft::MultiRaft;
use raft::RaftDb;

const G: GroupId = GroupId(1);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t70_an_entry_of_a_newer_format_stops_applying_on_every_node_and_after_restart() {
    common::init_tracing();
    let mut c = Cluster::start(3, &[G], common::test_config(), 70).await;
    let (_, last) = c.write(G, MemKv::set("a", "1")).await;
    for id in 1..=3 {
        c.wait_applied(id, G, last).await;
    }
    tracing::info!("--- the leader proposes an entry of the next format");
    let leader = c.leader(G).await;
    let mut newer = c.request(MemKv::set("b", "2"));
    newer.format = raft::ENTRY_FORMAT + 1;
    assert!(c.raft(leader, G).client_write(newer).await.is_err());
    let want = "Raft log entry format version 2 is newer than this build of Ember reads";
    for id in 1..=3 {
        let raft = c.raft(id, G);
        raft.wait(Some(common::WAIT))
            .metrics(|m| m.running_state.is_err(), "the group stops")
            .await
            .unwrap();
        let why = raft.metrics().borrow().running_state.clone().unwrap_err();
        assert!(why.to_string().contains(want), "node {id}: {why}");
        let kv = c.kv(id, G);
        assert_eq!(
            (kv.get("a"), kv.get("b")),
            (Some(&b"1"[..]), None),
            "node {id}"
        );
    }

    tracing::info!("--- a restarted node reads its log, and refuses the entry again");
    let victim = if leader == 1 { 2 } else { 1 };
    let node = c.nodes.remove(&victim).unwrap();
    c.router.unregister(victim, G);
    let _ = node.multi.close().await;
    let db = RaftDb::open(&node.dir).unwrap();
    let multi = MultiRaft::new(victim, db, c.config.clone(), c.router.transport(victim)).unwrap();
    // Opening applies the committed log: it stops at the entry, with the format error.
    let e = multi.open_group(G, MemKv::default()).await.err().unwrap();
    assert!(e.to_string().contains(want), "{e}");
    let _ = multi.close().await;
    for (_, n) in std::mem::take(&mut c.nodes) {
        let _ = n.multi.close().await;
    }
}
