//! One simulated Ember node as a turmoil host: a RocksDB [`RaftDb`] in a directory that
//! outlives crashes, a [`MultiRaft`] of [`MemKv`] groups, the cluster bus (a [`BusServer`]
//! and a [`BusTransport`] over turmoil), and a small line protocol for clients.
//!
//! Client protocol, one request and one reply per line:
//! `PUT <group> <key> <value>`, `INCR <group> <key>` (both through Raft `client_write`),
//! `GET <group> <key>` (`ensure_linearizable`, then the state machine). Replies:
//! `OK <payload>` (a write's reply), `VAL <value>` / `NIL` (a read), `REDIRECT <node>|-`
//! and `FAIL <why>` (not executed, try elsewhere), `ERR <why>` (outcome unknown).

use std::cell::Cell;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use cluster_bus::BusConfig;
use cluster_bus::BusServer;
use cluster_bus::BusTransport;
use raft::openraft::error::CheckIsLeaderError;
use raft::openraft::error::ClientWriteError;
use raft::openraft::error::RaftError;
use raft::openraft::Config;
use raft::openraft::SnapshotPolicy;
use raft::DbOptions;
use raft::GroupId;
use raft::MemKv;
use raft::MultiRaft;
use raft::Node;
use raft::NodeId;
use raft::RaftDb;
use raft::Request;
use rand::rngs::SmallRng;
use rand::Rng;
use rand::SeedableRng;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;

use crate::net::serve_bus;
use crate::net::TurmoilConnector;

/// The port of every node's cluster bus.
pub const BUS_PORT: u16 = 7000;
/// The port of every node's client protocol.
pub const CLIENT_PORT: u16 = 6379;

/// A node's groups over the turmoil bus.
pub type SimMulti = MultiRaft<MemKv, BusTransport<TurmoilConnector>>;

/// The turmoil host name of node `id`.
pub fn host_name(id: NodeId) -> String {
    format!("n{id}")
}

/// What group memberships store about node `id`.
pub fn node_addr(id: NodeId) -> Node {
    Node::new(
        format!("{}:{CLIENT_PORT}", host_name(id)),
        format!("{}:{BUS_PORT}", host_name(id)),
    )
}

/// State shared by the simulation driver and every host (one thread runs a simulation).
#[derive(Default)]
pub struct Shared {
    /// The running nodes' groups; the driver removes a node when it crashes it, so its
    /// database can be opened again on restart.
    pub registry: RefCell<BTreeMap<NodeId, Arc<SimMulti>>>,
    /// How many times each node has started.
    pub boots: RefCell<BTreeMap<NodeId, u64>>,
    /// Whether node 1 has initialized the groups (done on its first start only).
    pub initialized: Cell<bool>,
}

/// How to run one node.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// The node's id.
    pub id: NodeId,
    /// Every node of the cluster (the initial voters of every group).
    pub members: Vec<NodeId>,
    /// The groups the node runs.
    pub groups: Vec<GroupId>,
    /// The node's RocksDB directory (kept across crashes).
    pub dir: PathBuf,
    /// The simulation's seed (Raft election timeouts derive from it).
    pub seed: u64,
    /// Snapshot every this many log entries (`None`: never).
    pub snapshot_every: Option<u64>,
    /// A deliberate bug to plant (shows that the checks catch it), or `None`.
    pub mutant: Option<Mutant>,
}

/// A deliberate bug in the node's client protocol, to show the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// Reads come from the local state machine of whichever node is asked, without
    /// `ensure_linearizable`.
    StaleReads,
    /// A put is acknowledged as soon as the node proposes it, before it commits (and on
    /// a node that is not the leader, where the proposal is refused).
    AckBeforeCommit,
}

/// Raft timing of node `id` at its `boot`-th start. openraft draws election timeouts from
/// `rand::thread_rng`, which a simulation cannot seed; so the range is one millisecond
/// wide and its start is drawn from the simulation's seed instead.
pub fn raft_config(spec: &NodeSpec, boot: u64) -> Config {
    let mut rng = SmallRng::seed_from_u64(
        spec.seed ^ spec.id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ boot.wrapping_mul(0xbf58_476d),
    );
    let election = rng.random_range(150..400);
    Config {
        cluster_name: "ember-sim".into(),
        heartbeat_interval: 50,
        election_timeout_min: election,
        election_timeout_max: election + 1,
        install_snapshot_timeout: 500,
        snapshot_policy: match spec.snapshot_every {
            Some(n) => SnapshotPolicy::LogsSinceLast(n),
            None => SnapshotPolicy::Never,
        },
        max_in_snapshot_log_to_keep: 5,
        ..Default::default()
    }
}

/// The bus timing of a simulated node (small, like its Raft timeouts).
pub fn bus_config() -> BusConfig {
    BusConfig {
        connect_timeout: Duration::from_millis(200),
        keep_alive_interval: Duration::from_millis(300),
        keep_alive_timeout: Duration::from_millis(300),
        backoff: Duration::from_millis(100),
        ..BusConfig::default()
    }
}

/// The host's software: opens the node from its directory, serves the bus and clients.
/// Runs until the simulation ends or crashes the host.
pub async fn run_node(spec: NodeSpec, shared: Rc<Shared>) -> turmoil::Result {
    let boot = {
        let mut boots = shared.boots.borrow_mut();
        let b = boots.entry(spec.id).or_insert(0);
        *b += 1;
        *b
    };
    // Crashes never lose the OS's page cache here, so fsync only costs time.
    let db = RaftDb::open_with(
        &spec.dir,
        DbOptions {
            sync: false,
            group_commit: false,
        },
    )?;
    let transport = BusTransport::with_connector(spec.id, bus_config(), TurmoilConnector);
    let multi = Arc::new(MultiRaft::new(
        spec.id,
        db,
        raft_config(&spec, boot),
        transport,
    )?);
    for &g in &spec.groups {
        multi.open_group(g, MemKv::default()).await?;
    }
    shared.registry.borrow_mut().insert(spec.id, multi.clone());
    tokio::task::spawn_local(serve_bus(BusServer::for_multi(&multi), BUS_PORT));
    if spec.id == spec.members[0] && !shared.initialized.get() {
        let members: BTreeMap<NodeId, Node> =
            spec.members.iter().map(|&id| (id, node_addr(id))).collect();
        for &g in &spec.groups {
            if let Some(group) = multi.group(g) {
                group.raft.initialize(members.clone()).await?;
            }
        }
        shared.initialized.set(true);
    }
    tracing::info!(node = spec.id, boot, "node up");
    serve_clients(multi, spec.mutant).await?;
    Ok(())
}

/// Accepts client connections forever.
async fn serve_clients(multi: Arc<SimMulti>, mutant: Option<Mutant>) -> std::io::Result<()> {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", CLIENT_PORT)).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::task::spawn_local(serve_connection(multi.clone(), stream, mutant));
    }
}

/// Answers one connection's requests in order.
async fn serve_connection(
    multi: Arc<SimMulti>,
    stream: turmoil::net::TcpStream,
    mutant: Option<Mutant>,
) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = execute(&multi, &line, mutant).await;
        if write
            .write_all(format!("{}\n", reply.replace('\n', " ")).as_bytes())
            .await
            .is_err()
        {
            break;
        }
    }
}

/// The reply line to request `line` (with the planted bug `mutant`, if any).
async fn execute(multi: &SimMulti, line: &str, mutant: Option<Mutant>) -> String {
    let parts: Vec<&str> = line.split(' ').collect();
    let (op, group, key, value) = match parts.as_slice() {
        [op, g, k] => (*op, *g, *k, None),
        [op, g, k, v] => (*op, *g, *k, Some(*v)),
        _ => return "FAIL malformed".into(),
    };
    let Some(group) = group.parse().ok().and_then(|g| multi.group(GroupId(g))) else {
        return "FAIL unknown group".into();
    };
    let command = match (op, value) {
        ("GET", None) => {
            let checked = match mutant {
                Some(Mutant::StaleReads) => Ok(None),
                _ => group.raft.ensure_linearizable().await,
            };
            return match checked {
                Ok(_) => match group.state.read(|kv| kv.get(key).map(<[u8]>::to_vec)) {
                    Some(v) => format!("VAL {}", String::from_utf8_lossy(&v)),
                    None => "NIL".into(),
                },
                Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                    redirect(f.leader_id)
                }
                Err(e) => format!("FAIL {e}"),
            };
        }
        ("PUT", Some(v)) => MemKv::set(key, v),
        ("INCR", None) => MemKv::incr(key),
        _ => return "FAIL malformed".into(),
    };
    let now = turmoil::since_epoch().unwrap_or_default().as_nanos() as u64;
    if op == "PUT" && mutant == Some(Mutant::AckBeforeCommit) {
        let raft = group.raft.clone();
        tokio::spawn(async move { raft.client_write(Request::new(command, now, 0)).await });
        return "OK OK".into();
    }
    match group.raft.client_write(Request::new(command, now, 0)).await {
        Ok(resp) => format!("OK {}", String::from_utf8_lossy(&resp.data.0)),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => redirect(f.leader_id),
        Err(e) => format!("ERR {e}"),
    }
}

/// A redirect to `leader`, or to anyone (`-`) when no leader is known.
fn redirect(leader: Option<NodeId>) -> String {
    match leader {
        Some(id) => format!("REDIRECT {id}"),
        None => "REDIRECT -".into(),
    }
}
