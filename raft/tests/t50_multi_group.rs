//! Several groups on the same 3 nodes: one RocksDB per node shared by all groups, one
//! transport; slots route keys to groups and groups stay independent.

mod common;

use common::Cluster;
use raft::slots;
use raft::GroupId;
use raft::MemKv;

/// Four data groups plus the metadata group.
const DATA_GROUPS: u32 = 4;

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t50_groups_share_a_db_and_stay_independent() {
    common::init_tracing();
    let mut groups = vec![GroupId::META];
    groups.extend(slots::data_groups(DATA_GROUPS));
    let mut c = Cluster::start(3, &groups, common::test_config(), 50).await;

    tracing::info!("--- one key per slot range, written to the group its slot maps to");
    let mut last = std::collections::BTreeMap::new();
    for slot in [0u16, 4095, 4096, 8191, 8192, 12_288, 16_383] {
        let g = slots::slot_group(slot, DATA_GROUPS);
        let (_, index) = c
            .write(g, MemKv::set(format!("slot{slot}"), format!("{g}")))
            .await;
        last.insert(g, index);
    }
    let (_, meta_index) = c.write(GroupId::META, MemKv::set("nodes", "1,2,3")).await;
    last.insert(GroupId::META, meta_index);

    tracing::info!("--- every node applies every group; each group holds only its keys");
    for id in 1..=3 {
        for (&g, &index) in &last {
            c.wait_applied(id, g, index).await;
        }
        for slot in [0u16, 4095, 4096, 8191, 8192, 12_288, 16_383] {
            let owner = slots::slot_group(slot, DATA_GROUPS);
            let group = c.nodes[&id].multi.slot_group(slot, DATA_GROUPS).unwrap();
            assert_eq!(group.id, owner);
            for g in slots::data_groups(DATA_GROUPS) {
                let has = c.kv(id, g).get(format!("slot{slot}")).is_some();
                assert_eq!(has, g == owner, "node {id} slot {slot} in {g}");
            }
        }
        assert_eq!(c.kv(id, GroupId::META).get("nodes"), Some(&b"1,2,3"[..]));
        assert_eq!(
            c.nodes[&id].multi.db().groups().unwrap(),
            groups,
            "node {id} db groups"
        );
    }

    tracing::info!("--- opening a group twice is refused");
    let err = c.nodes[&1]
        .multi
        .open_group(GroupId(1), MemKv::default())
        .await;
    assert!(matches!(err, Err(raft::Error::GroupOpen(GroupId(1)))));

    tracing::info!("--- removing a group deletes its state only");
    let db = c.nodes[&3].multi.db().clone();
    let committed = |g: u32| db.committed_index(GroupId(g)).unwrap();
    assert!(committed(2).is_some());
    c.nodes[&3].multi.remove_group(GroupId(2)).await.unwrap();
    assert!(c.nodes[&3].multi.group(GroupId(2)).is_none());
    let left: Vec<GroupId> = groups
        .iter()
        .copied()
        .filter(|&g| g != GroupId(2))
        .collect();
    assert_eq!(db.groups().unwrap(), left);
    assert_eq!(committed(2), None);
    assert!(committed(3).is_some());
}
