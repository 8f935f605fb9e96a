//! A test cluster over the real bus: N nodes in this process, each with its own RocksDB
//! directory, `MultiRaft<MemKv, BusTransport>`, and `BusServer` on a 127.0.0.1 port. A
//! crash is a node's bus server and Rafts stopped; a restart reopens its directory and
//! listens on the same port again.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cluster_bus::BusConfig;
use cluster_bus::BusServer;
use cluster_bus::BusTransport;
use cluster_bus::RunningBus;
use raft::openraft::Config;
use raft::openraft::ServerState;
use raft::GroupId;
use raft::MemKv;
use raft::MultiRaft;
use raft::Node;
use raft::NodeId;
use raft::RaftDb;
use raft::Request;
use tokio::net::TcpListener;

/// Upper bound of every wait (real time); reached only on a bug.
pub const WAIT: Duration = Duration::from_secs(30);

/// Logs to the test's output, once per process (`RUST_LOG` to see openraft's own logs).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,t=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Raft timing for tests: heartbeat 50 ms, elections after 150-300 ms, no automatic
/// snapshots.
pub fn test_config() -> Config {
    Config {
        cluster_name: "ember-bus-test".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        snapshot_policy: raft::openraft::SnapshotPolicy::Never,
        ..Default::default()
    }
}

/// Bus timing for tests: quick backoff so a restarted node is found again soon.
pub fn bus_config() -> BusConfig {
    BusConfig {
        backoff: Duration::from_millis(50),
        ..BusConfig::default()
    }
}

/// A running node.
pub struct BusNode {
    /// Its groups (held weakly by its bus server).
    pub multi: Arc<MultiRaft<MemKv, BusTransport>>,
    /// Its bus server.
    pub bus: RunningBus,
    /// Its transport (shared with its groups).
    pub transport: BusTransport,
    /// Its RocksDB directory.
    pub dir: PathBuf,
}

/// The cluster under test.
pub struct Cluster {
    /// Running nodes by id.
    pub nodes: BTreeMap<NodeId, BusNode>,
    /// Every node's bus address, kept across restarts (the membership stores it).
    pub addrs: BTreeMap<NodeId, SocketAddr>,
    /// The groups every node runs.
    pub groups: Vec<GroupId>,
    /// Raft config of every node.
    pub config: Config,
    /// The leader clock handed to requests (a counter: deterministic).
    clock_ns: u64,
    /// Holds every node's directory.
    tmp: tempfile::TempDir,
}

/// Binds `addr`, retrying briefly while the old socket lets go of the port.
async fn bind(addr: SocketAddr) -> TcpListener {
    let mut waited = Duration::ZERO;
    loop {
        match TcpListener::bind(addr).await {
            Ok(l) => return l,
            Err(e) => {
                assert!(waited < WAIT, "cannot bind {addr}: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                waited += Duration::from_millis(20);
            }
        }
    }
}

impl Cluster {
    /// Starts nodes `1..=n` on ports chosen by the OS, each running `groups`, and
    /// initializes every group with all nodes as voters.
    pub async fn start(n: u64, groups: &[GroupId]) -> Cluster {
        Self::start_with(n, groups, test_config()).await
    }

    /// [`Cluster::start`] with Raft config `config`.
    pub async fn start_with(n: u64, groups: &[GroupId], config: Config) -> Cluster {
        let mut cluster = Cluster {
            nodes: BTreeMap::new(),
            addrs: BTreeMap::new(),
            groups: groups.to_vec(),
            config,
            clock_ns: 1_700_000_000_000_000_000,
            tmp: tempfile::tempdir().unwrap(),
        };
        let mut listeners = Vec::new();
        for id in 1..=n {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            cluster.addrs.insert(id, l.local_addr().unwrap());
            listeners.push((id, l));
        }
        for (id, l) in listeners {
            let dir = cluster.tmp.path().join(format!("node-{id}"));
            cluster.open_node(id, dir, l).await;
        }
        let members: BTreeMap<NodeId, Node> = (1..=n).map(|id| (id, cluster.member(id))).collect();
        for &g in groups {
            cluster
                .raft(1, g)
                .initialize(members.clone())
                .await
                .unwrap();
        }
        cluster
    }

    /// Node `id` as group memberships store it.
    pub fn member(&self, id: NodeId) -> Node {
        Node::new(
            format!("127.0.0.1:{}", 7000 + id),
            self.addrs[&id].to_string(),
        )
    }

    /// Opens node `id` from `dir` (new or existing), serving its bus on `listener`.
    async fn open_node(&mut self, id: NodeId, dir: PathBuf, listener: TcpListener) {
        let db = RaftDb::open(&dir).unwrap();
        let transport = BusTransport::new(id, bus_config());
        let multi =
            Arc::new(MultiRaft::new(id, db, self.config.clone(), transport.clone()).unwrap());
        let bus = BusServer::for_multi(&multi).spawn(listener).unwrap();
        for &g in &self.groups {
            multi.open_group(g, MemKv::default()).await.unwrap();
        }
        self.nodes.insert(
            id,
            BusNode {
                multi,
                bus,
                transport,
                dir,
            },
        );
    }

    /// Stops node `id` as a crash would: its bus server, then its Rafts; releases its
    /// database and returns its directory.
    pub async fn stop_node(&mut self, id: NodeId) -> PathBuf {
        let node = self.nodes.remove(&id).unwrap();
        node.bus.shutdown().await.unwrap();
        node.multi.shutdown().await.unwrap();
        drop(node.transport);
        let mut multi = node.multi;
        let mut waited = Duration::ZERO;
        let multi = loop {
            match Arc::try_unwrap(multi) {
                Ok(m) => break m,
                Err(m) => {
                    assert!(waited < WAIT, "node {id}'s groups still referenced");
                    multi = m;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    waited += Duration::from_millis(10);
                }
            }
        };
        multi.close().await.unwrap();
        node.dir
    }

    /// Starts node `id` again from `dir`, on its old bus address.
    pub async fn restart_node(&mut self, id: NodeId, dir: PathBuf) {
        let listener = bind(self.addrs[&id]).await;
        self.open_node(id, dir, listener).await;
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

    /// Waits for a running node that leads group `g` (in its own view) and returns it.
    pub async fn leader(&self, g: GroupId) -> NodeId {
        let step = Duration::from_millis(10);
        let mut waited = Duration::ZERO;
        loop {
            for &id in self.nodes.keys() {
                let m = self.raft(id, g).metrics().borrow().clone();
                if m.state == ServerState::Leader && m.current_leader == Some(id) {
                    return id;
                }
            }
            assert!(waited < WAIT, "no leader of {g} among running nodes");
            tokio::time::sleep(step).await;
            waited += step;
        }
    }

    /// A request as the leader proposes it.
    fn request(&mut self, command: Bytes) -> Request {
        self.clock_ns += 1_000_000;
        Request::new(command, self.clock_ns, self.clock_ns ^ 0x5eed)
    }

    /// Writes through group `g`'s leader until acknowledged; returns the entry's log index.
    /// A failed try waits a little: a restarted node may report itself leader (its old
    /// committed vote) until it hears the new term, and refuses writes meanwhile.
    pub async fn write(&mut self, g: GroupId, command: Bytes) -> u64 {
        let request = self.request(command);
        for _ in 0..250 {
            let leader = self.leader(g).await;
            let raft = self.raft(leader, g);
            match tokio::time::timeout(Duration::from_secs(5), raft.client_write(request.clone()))
                .await
            {
                Ok(Ok(resp)) => return resp.log_id.index,
                Ok(Err(e)) => tracing::info!("write via {leader} failed: {e}; retrying"),
                Err(_) => tracing::info!("write via {leader} timed out; retrying"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
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
