//! A small in-process test cluster: N nodes, each a `MultiRaft<MemKv, LocalTransport>` over
//! its own RocksDB directory, joined by one `LocalRouter`. Faults are router filters.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use raft::openraft::Config;
use raft::openraft::ServerState;
use raft::GroupId;
use raft::LocalRouter;
use raft::LocalTransport;
use raft::MemKv;
use raft::MultiRaft;
use raft::Node;
use raft::NodeId;
use raft::RaftDb;
use raft::Request;
use raft::Response;
use rand::rngs::StdRng;
use rand::Rng;
use rand::SeedableRng;

/// Upper bound of every wait (virtual time under `start_paused`); reached only on a bug.
pub const WAIT: Duration = Duration::from_secs(30);

/// Logs to the test's output, once per process (`RUST_LOG` to see openraft's own logs).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Raft timing for tests: heartbeat 50 ms, elections after 150-300 ms, no automatic
/// snapshots.
pub fn test_config() -> Config {
    Config {
        cluster_name: "ember-test".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        snapshot_policy: raft::openraft::SnapshotPolicy::Never,
        ..Default::default()
    }
}

/// The node running as `id`.
pub struct TestNode {
    /// The node's groups.
    pub multi: MultiRaft<MemKv, LocalTransport>,
    /// Its RocksDB directory.
    pub dir: PathBuf,
}

/// The cluster under test.
pub struct Cluster {
    /// Delivers messages, drops them for isolated nodes.
    pub router: LocalRouter,
    /// Running nodes by id.
    pub nodes: BTreeMap<NodeId, TestNode>,
    /// Nodes currently isolated.
    pub isolated: BTreeSet<NodeId>,
    /// The groups every node runs.
    pub groups: Vec<GroupId>,
    /// Raft config of every node.
    pub config: Config,
    /// Seeds the leader's per-request seeds.
    rng: StdRng,
    /// The leader clock handed to requests (a counter: deterministic).
    clock_ns: u64,
    /// Holds every node's directory.
    _tmp: tempfile::TempDir,
}

/// The member description of node `id`.
pub fn node_addr(id: NodeId) -> Node {
    Node::new(
        format!("127.0.0.1:{}", 7000 + id),
        format!("127.0.0.1:{}", 17000 + id),
    )
}

impl Cluster {
    /// Starts nodes `1..=n`, each running `groups`, and initializes every group with all
    /// nodes as voters. Messages are encoded and decoded on the way.
    pub async fn start(n: u64, groups: &[GroupId], config: Config, seed: u64) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let mut cluster = Cluster {
            router: LocalRouter::new(),
            nodes: BTreeMap::new(),
            isolated: BTreeSet::new(),
            groups: groups.to_vec(),
            config,
            rng: StdRng::seed_from_u64(seed),
            clock_ns: 1_700_000_000_000_000_000,
            _tmp: tmp,
        };
        // Every RPC makes a trip through the wire encoding, as over cluster-bus.
        cluster.router.encode_messages(true);
        for id in 1..=n {
            let dir = cluster._tmp.path().join(format!("node-{id}"));
            cluster.open_node(id, dir).await;
        }
        let members: BTreeMap<NodeId, Node> = (1..=n).map(|id| (id, node_addr(id))).collect();
        for &g in groups {
            cluster
                .raft(1, g)
                .initialize(members.clone())
                .await
                .unwrap();
        }
        cluster
    }

    /// Opens node `id` from `dir` (new or existing) and registers its groups.
    pub async fn open_node(&mut self, id: NodeId, dir: PathBuf) {
        let db = RaftDb::open(&dir).unwrap();
        let multi = MultiRaft::new(id, db, self.config.clone(), self.router.transport(id)).unwrap();
        for &g in &self.groups {
            let group = multi.open_group(g, MemKv::default()).await.unwrap();
            self.router.register(id, g, group.raft.clone());
        }
        self.nodes.insert(id, TestNode { multi, dir });
    }

    /// Stops node `id` and releases its database (as a process exit would).
    pub async fn stop_node(&mut self, id: NodeId) -> PathBuf {
        let node = self.nodes.remove(&id).unwrap();
        for &g in &self.groups {
            self.router.unregister(id, g);
        }
        node.multi.close().await.unwrap();
        node.dir
    }

    /// Node `id`'s Raft in group `g`.
    pub fn raft(&self, id: NodeId, g: GroupId) -> raft::Raft {
        self.nodes[&id].multi.group(g).unwrap().raft
    }

    /// A copy of node `id`'s state machine in group `g`.
    pub fn kv(&self, id: NodeId, g: GroupId) -> MemKv {
        self.nodes[&id]
            .multi
            .group(g)
            .unwrap()
            .state
            .read(MemKv::clone)
    }

    /// Cuts node `id` off.
    pub fn isolate(&mut self, id: NodeId) {
        self.router.isolate(id);
        self.isolated.insert(id);
    }

    /// Reconnects node `id`.
    pub fn heal(&mut self, id: NodeId) {
        self.router.heal(id);
        self.isolated.remove(&id);
    }

    /// Waits for a connected node that leads group `g` (in its own view) and returns it.
    pub async fn leader(&self, g: GroupId) -> NodeId {
        let step = Duration::from_millis(10);
        let mut waited = Duration::ZERO;
        loop {
            for (&id, _) in self
                .nodes
                .iter()
                .filter(|(id, _)| !self.isolated.contains(id))
            {
                let m = self.raft(id, g).metrics().borrow().clone();
                if m.state == ServerState::Leader && m.current_leader == Some(id) {
                    return id;
                }
            }
            assert!(waited < WAIT, "no leader of {g} among connected nodes");
            tokio::time::sleep(step).await;
            waited += step;
        }
    }

    /// A request as the leader proposes it: the command plus leader time and a seed.
    pub fn request(&mut self, command: Bytes) -> Request {
        self.clock_ns += 1_000_000;
        Request::new(command, self.clock_ns, self.rng.random())
    }

    /// Writes through group `g`'s leader until acknowledged; returns the reply and the
    /// entry's log index.
    pub async fn write(&mut self, g: GroupId, command: Bytes) -> (Response, u64) {
        let request = self.request(command);
        for _ in 0..20 {
            let leader = self.leader(g).await;
            let raft = self.raft(leader, g);
            match tokio::time::timeout(Duration::from_secs(5), raft.client_write(request.clone()))
                .await
            {
                Ok(Ok(resp)) => return (resp.data, resp.log_id.index),
                Ok(Err(e)) => tracing::info!("write via {leader} failed: {e}; retrying"),
                Err(_) => tracing::info!("write via {leader} timed out; retrying"),
            }
        }
        panic!("write to {g} never acknowledged");
    }

    /// Waits until node `id` has applied index `index` of group `g`.
    pub async fn wait_applied(&self, id: NodeId, g: GroupId, index: u64) {
        self.raft(id, g)
            .wait(Some(WAIT))
            .applied_index_at_least(Some(index), format!("node {id} applies {g}@{index}"))
            .await
            .unwrap();
    }
}
