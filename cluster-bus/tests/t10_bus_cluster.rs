//! Three nodes over the real cluster bus (tonic on 127.0.0.1): elections and writes in
//! several groups, a node crash (bus server and Rafts stopped) with failover, and a
//! restart from disk that catches up. Every acknowledged write ends on every replica.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Cluster;
use raft::GroupId;
use raft::MemKv;

const GROUPS: [GroupId; 3] = [GroupId(1), GroupId(2), GroupId(3)];

/// Every acknowledged write: group -> (key -> value), and the last acked index per group.
#[derive(Default)]
struct Acked {
    kv: BTreeMap<GroupId, BTreeMap<String, String>>,
    last: BTreeMap<GroupId, u64>,
}

impl Acked {
    async fn write(&mut self, c: &mut Cluster, g: GroupId, key: String, value: String) {
        let index = c.write(g, MemKv::set(&key, &value)).await;
        self.kv.entry(g).or_default().insert(key, value);
        let last = self.last.entry(g).or_default();
        *last = (*last).max(index);
    }

    /// Waits until every running node has applied every acked write, then checks them.
    async fn check_all(&self, c: &Cluster) {
        for (&g, &last) in &self.last {
            for &id in c.nodes.keys() {
                c.wait_applied(id, g, last).await;
                let kv = c.kv(id, g);
                for (k, v) in &self.kv[&g] {
                    assert_eq!(
                        kv.get(k),
                        Some(v.as_bytes()),
                        "node {id} {g} lost acked {k}"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn t10_three_nodes_failover_and_restart() {
    common::init_tracing();
    tracing::info!("--- start 3 nodes with {} groups", GROUPS.len());
    let mut c = Cluster::start(3, &GROUPS).await;
    let mut acked = Acked::default();

    tracing::info!("--- every group elects a leader and takes writes");
    for g in GROUPS {
        c.leader(g).await;
        for i in 0..5 {
            acked
                .write(&mut c, g, format!("{g}-k{i}"), format!("v{i}"))
                .await;
        }
    }
    acked.check_all(&c).await;

    tracing::info!("--- ping: each bus answers its node id");
    let t = c.nodes[&1].transport.clone();
    for (&id, addr) in &c.addrs {
        let got = t
            .ping(&addr.to_string(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got, id);
    }

    let victim = c.leader(GROUPS[0]).await;
    let mut led = Vec::new();
    for g in GROUPS {
        if c.leader(g).await == victim {
            led.push(g);
        }
    }
    tracing::info!("--- crash node {victim}, leader of {led:?}");
    let dir = c.stop_node(victim).await;
    assert!(t_ping_fails(&c, victim).await, "stopped bus still answers");

    tracing::info!("--- the other two elect new leaders and keep writing");
    for g in GROUPS {
        let leader = c.leader(g).await;
        assert_ne!(leader, victim);
        for i in 5..10 {
            acked
                .write(&mut c, g, format!("{g}-k{i}"), format!("v{i}"))
                .await;
        }
    }
    acked.check_all(&c).await;

    tracing::info!("--- restart node {victim} from {dir:?}; it catches up");
    c.restart_node(victim, dir).await;
    for g in GROUPS {
        for i in 10..12 {
            acked
                .write(&mut c, g, format!("{g}-k{i}"), format!("v{i}"))
                .await;
        }
    }
    acked.check_all(&c).await;
    assert_eq!(c.nodes.len(), 3);

    tracing::info!("--- stop all");
    for id in [1, 2, 3] {
        c.stop_node(id).await;
    }
}

/// True when node `victim`'s bus cannot be pinged from another running node.
async fn t_ping_fails(c: &Cluster, victim: raft::NodeId) -> bool {
    let (_, other) = c.nodes.iter().next().unwrap();
    other
        .transport
        .ping(&c.addrs[&victim].to_string(), Duration::from_secs(5))
        .await
        .is_err()
}
