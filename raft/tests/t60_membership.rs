//! Moving a group between nodes as rebalancing will: a new node joins as a learner and
//! catches up, becomes a voter while an old one is removed, and takes the leadership
//! (openraft 0.9 has no leader transfer; the new node triggers an election instead).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::Cluster;
use raft::openraft::ServerState;
use raft::GroupId;
use raft::MemKv;

const G: GroupId = GroupId(1);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t60_learner_then_voter_then_leader() {
    common::init_tracing();
    let mut c = Cluster::start(3, &[G], common::test_config(), 60).await;
    for i in 0..10 {
        c.write(G, MemKv::set(format!("k{i}"), "before")).await;
    }

    tracing::info!("--- node 4 starts empty and joins as a learner");
    let dir = c.nodes[&1].dir.with_file_name("node-4");
    c.open_node(4, dir).await;
    let leader = c.leader(G).await;
    let added = c
        .raft(leader, G)
        .add_learner(4, common::node_addr(4), true)
        .await
        .unwrap();
    c.wait_applied(4, G, added.log_id.index).await;
    assert_eq!(c.kv(4, G).map, c.kv(leader, G).map, "learner caught up");

    tracing::info!("--- voters become {{1, 2, 4}}: node 3 leaves");
    let voters: BTreeSet<u64> = [1, 2, 4].into();
    let changed = c
        .raft(c.leader(G).await, G)
        .change_membership(voters.clone(), false)
        .await
        .unwrap();
    for id in [1, 2, 4] {
        c.wait_applied(id, G, changed.log_id.index).await;
    }
    let m = c.raft(4, G).metrics().borrow().clone();
    let now: BTreeSet<u64> = m.membership_config.membership().voter_ids().collect();
    assert_eq!(now, voters);
    c.stop_node(3).await;

    tracing::info!("--- node 4 takes the leadership");
    // While the leader's lease holds, voters refuse; the refused candidate's higher term
    // then deposes the leader and whoever times out first wins. Try until node 4 does.
    let mut attempts = 0;
    loop {
        c.raft(4, G).trigger().elect().await.unwrap();
        let won = c
            .raft(4, G)
            .wait(Some(Duration::from_secs(2)))
            .state(ServerState::Leader, "node 4 leads")
            .await;
        if won.is_ok() {
            break;
        }
        attempts += 1;
        assert!(attempts < 20, "node 4 never won an election");
    }
    let (_, last) = c.write(G, MemKv::set("after", "move")).await;
    for id in [1, 2, 4] {
        c.wait_applied(id, G, last).await;
        let kv = c.kv(id, G);
        assert_eq!(kv.get("after"), Some(&b"move"[..]));
        for i in 0..10 {
            assert_eq!(
                kv.get(format!("k{i}")),
                Some(&b"before"[..]),
                "node {id} k{i}"
            );
        }
    }
}
