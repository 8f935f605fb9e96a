//! [`Cluster`]: a node's membership in an Ember cluster: its peers, its Raft groups, the
//! runtime that drives them and the bus that connects them.
//!
//! # Bootstrap
//! Every node of a new cluster is started with the same `cluster-bootstrap` list
//! (`host:port[@busport]`, comma-separated). The list's order gives node ids (1, 2, ...); a
//! node finds itself by its announce address and port. The slots are split into
//! `cluster-groups` groups; group `g` is replicated on `cluster-replicas` nodes starting at
//! node `((g-1) mod N) + 1`, and that first member initializes the group (once: a group
//! with state on disk is not initialized again). Its first election usually makes it the
//! leader, so leaders start spread evenly. Node 1 initializes the metadata group (group 0,
//! voters: the first `cluster-replicas` nodes) and, as its leader, proposes this bootstrap
//! topology as its first entry. No coordinator: each node opens its groups, serves the
//! bus, and the groups elect.
//!
//! # Joining, leaving, moving groups
//! A node started with `cluster-join host:port` (any member's client address) asks it for
//! an id (`CLUSTER JOIN`, proposed to the metadata group, which also moves replicas to the
//! new node until every node holds its share) and keeps the id in its Raft directory. The
//! metadata group's leader adds every node to group 0 (a learner beyond its voters), so
//! every node applies the topology ([`super::meta`]) and follows it ([`maintain`]): it
//! opens the groups placed on it, each group's leader adds new members as learners, waits
//! until they have caught up, then replaces the voters; a member moved away learns it is
//! a learner now, closes the group and deletes its keys and Raft state. `CLUSTER FORGET`
//! moves a node's replicas away the same way and drops it from the topology.
//!
//! # Threads
//! openraft's tasks (one core task per group, replication, apply) run on a small
//! multi-threaded tokio runtime of their own (`ember-raft`); client connections on the
//! workers talk to it through channels only (proposals, read checks, metrics).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cluster_bus::{BusConfig, BusCounters, BusServer, BusTransport, RunningBus};
use parking_lot::RwLock;
use raft::openraft::{
    ChangeMembers, Config as RaftConfig, RaftMetrics, ServerState, SnapshotPolicy,
};
use raft::{DbOptions, GroupId, MultiRaft, Node, NodeId, Raft, RaftDb, Request, SLOTS};
use tokio::sync::watch;

use super::meta::{GroupMachine, MetaStateMachine, Topology};
use super::ClusterStateMachine;
use crate::config::Config;
use crate::server::Server;

/// The Raft manager of a node in cluster mode.
pub type Multi = MultiRaft<GroupMachine, BusTransport>;

/// How reads on a group's leader prove the leader is still the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// A quorum round (ReadIndex) confirms leadership, then reads stay local for a lease
    /// shorter than the followers' election timeout.
    Lease,
    /// Every read (one per batch and group) waits for a quorum round (ReadIndex).
    ReadIndex,
}

/// One node of the cluster, as the topology records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Raft node id (1-based position in the bootstrap list, then in order of joining).
    pub id: NodeId,
    /// The 40-hex-digit name CLUSTER NODES / MYID show (the same on every node).
    pub name: String,
    /// The address clients connect to.
    pub ip: String,
    /// The client port.
    pub port: u16,
    /// The cluster bus port.
    pub bus_port: u16,
}

impl Peer {
    /// `ip:port`, the address in `-MOVED` redirects.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// openraft's record of the node.
    fn raft_node(&self) -> Node {
        Node::new(self.addr(), format!("{}:{}", self.ip, self.bus_port))
    }
}

/// This node's member of one group.
pub struct GroupHandle {
    /// The group.
    pub id: GroupId,
    /// The Raft member (proposals, read checks).
    pub raft: Raft,
    /// The member's metrics (leader, term, state).
    pub metrics: watch::Receiver<RaftMetrics<NodeId, Node>>,
    /// Until when (ns since [`Cluster`]'s epoch) reads on this leader need no quorum round.
    lease_until: AtomicU64,
    /// The term the lease was proven in.
    lease_term: AtomicU64,
    /// What this node proposed to the group (WATCH's check); proposals number their entries
    /// under this lock.
    pub track: tokio::sync::Mutex<super::watch::WriteTrack>,
    /// A membership change of the group is under way from this node (its leader).
    changing: AtomicBool,
    /// Unix ms since when the topology no longer places this node in the group (0: it
    /// does).
    unplaced_since: AtomicU64,
}

impl GroupHandle {
    fn new(id: GroupId, raft: Raft) -> Self {
        GroupHandle {
            id,
            metrics: raft.metrics(),
            raft,
            lease_until: AtomicU64::new(0),
            lease_term: AtomicU64::new(0),
            track: Default::default(),
            changing: AtomicBool::new(false),
            unplaced_since: AtomicU64::new(0),
        }
    }
}

/// Leadership of one group as this node sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// The known leader, if any.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// Whether this node is the leader.
    pub is_me: bool,
}

/// A node's view of the cluster and its running groups.
pub struct Cluster {
    /// This node's id.
    pub me: NodeId,
    /// Number of data groups the slots are split into.
    pub groups: u32,
    /// Replicas per group.
    pub replicas: usize,
    /// Read linearizability mode.
    pub read_mode: ReadMode,
    /// How long a proposal or read check may take before the client gets an error.
    pub op_timeout: Duration,
    /// Lease length after a confirmed quorum round.
    lease: Duration,
    /// This node's addresses and name.
    myself: Peer,
    /// The topology the metadata group applied (before its first entry: this node's
    /// reading of `cluster-bootstrap`).
    topology: watch::Receiver<Arc<Topology>>,
    /// This node's groups, by group id (index 0: the metadata group).
    handles: RwLock<Vec<Option<Arc<GroupHandle>>>>,
    /// The bootstrap topology, on nodes started from `cluster-bootstrap`: what the
    /// metadata group is initialized with.
    genesis: Option<Arc<Topology>>,
    /// The node whose keyspace the data groups hold.
    server: Weak<Server>,
    /// The groups' manager (kept alive; the bus serves it).
    multi: Arc<Multi>,
    /// The bus server (kept alive).
    _bus: RunningBus,
    /// What the bus server has served.
    bus_counters: Arc<BusCounters>,
    /// The clock lease times are measured on.
    epoch: Instant,
    /// Seeds of proposals (mixed with the time).
    seeds: AtomicU64,
    /// Per other node: Unix ms of the last answered bus ping (0: never).
    pongs: RwLock<BTreeMap<NodeId, Arc<AtomicU64>>>,
    /// The node timeout (ms): a peer silent for longer is marked failing.
    pub node_timeout: u64,
    /// Per other node: the queue of PUBLISH messages to send, and its pinger task.
    links: parking_lot::Mutex<BTreeMap<NodeId, Link>>,
    /// Connections waiting in a blocking write (a pop, XREADGROUP ... BLOCK), woken by
    /// applied writes to their keys and by CLIENT UNBLOCK.
    pub waiters: super::block::KeyWaiters,
    /// The runtime of the groups and the bus; dropped last.
    rt: tokio::runtime::Runtime,
}

/// This node's tasks toward one other node.
struct Link {
    /// Where the node's bus is (a moved node gets new tasks).
    bus_addr: String,
    /// PUBLISH messages for it.
    publish: tokio::sync::mpsc::Sender<(Bytes, Bytes)>,
    /// Its pinger and publish forwarder.
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for Link {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The bootstrap list parsed: (ip, port, bus port) per node.
fn parse_bootstrap(text: &str) -> Result<Vec<(String, u16, u16)>, String> {
    let mut out = Vec::new();
    for item in text.split([',', ' ']).filter(|s| !s.is_empty()) {
        let (addr, bus) = match item.split_once('@') {
            Some((a, b)) => (a, Some(b)),
            None => (item, None),
        };
        let (ip, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("cluster-bootstrap: '{item}' is not host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("cluster-bootstrap: bad port in '{item}'"))?;
        let bus_port = match bus {
            Some(b) => b
                .parse()
                .map_err(|_| format!("cluster-bootstrap: bad bus port in '{item}'"))?,
            None => port
                .checked_add(10000)
                .ok_or_else(|| format!("cluster-bootstrap: no bus port for '{item}'"))?,
        };
        if out.iter().any(|(i, p, _)| i == ip && *p == port) {
            return Err(format!("cluster-bootstrap: '{addr}' is listed twice"));
        }
        out.push((ip.to_string(), port, bus_port));
    }
    Ok(out)
}

/// The file (in the Raft database's directory) where a node that joined keeps its id.
const NODE_ID_FILE: &str = "EMBER-NODE-ID";

/// How long a joining node waits for the cluster to take it in.
const JOIN_WAIT: Duration = Duration::from_secs(60);

impl Cluster {
    /// Joins the cluster configured in `config`: opens the Raft database under the working
    /// directory, the metadata group, this node's data groups over `server`'s keyspace, the
    /// bus listener; initializes the groups this node starts. Returns once all of that is
    /// running (elections go on). With `cluster-join`, first asks that node for an id
    /// and waits until the metadata group has reached this node.
    pub fn start(server: &Arc<Server>, config: &Config) -> Result<Arc<Cluster>, String> {
        let port = config.get_u64("port") as u16;
        let announce = match config.get("cluster-announce-ip") {
            "" => "127.0.0.1".to_string(),
            ip => ip.to_string(),
        };
        let text = config.get("cluster-bootstrap").to_string();
        let join = config.get("cluster-join").to_string();
        let own_bus = match config.get_u64("cluster-port") {
            0 => port.checked_add(10000).ok_or("no cluster bus port")?,
            p => p as u16,
        };
        let mut list = parse_bootstrap(&text)?;
        if !join.is_empty() && !list.is_empty() {
            return Err("cluster-join and cluster-bootstrap exclude each other".into());
        }
        if list.is_empty() && join.is_empty() {
            list.push((announce.clone(), port, own_bus));
        }
        let timeout = config.get_u64("cluster-node-timeout").max(100);
        let read_mode = match config.get("cluster-read-mode") {
            "readindex" => ReadMode::ReadIndex,
            _ => ReadMode::Lease,
        };
        // A follower that heard from its leader waits the leader lease (its own
        // election_timeout_max) plus its election timeout before it stands: ~0.75-0.98 s
        // with the default node timeout of 1000 ms. openraft draws each group's timeout
        // once per process from [min, max); when the two survivors of a dead leader drew
        // timeouts within a message's latency of each other, they split the vote, and
        // with fixed timeouts again and again (2-3 s failovers, about one kill in ten).
        // So each node draws from its own window, by id mod 3 (350-390, 400-440, 450-490
        // ms), and the first survivor's request reaches the other before it stands. Every
        // window ends by half the node timeout, and reads' lease below stays shorter than
        // every node's leader lease.
        let election_min = timeout * 35 / 100;
        let heartbeat_interval = (timeout / 10).max(10);
        let raft_config = |me: NodeId| {
            let window = (me.max(1) - 1) % 3;
            let min = election_min + window * timeout / 20;
            RaftConfig {
                cluster_name: "ember".into(),
                heartbeat_interval,
                election_timeout_min: min,
                election_timeout_max: min + (timeout / 25).max(1),
                install_snapshot_timeout: timeout.max(1000),
                snapshot_policy: SnapshotPolicy::LogsSinceLast(10_000),
                max_in_snapshot_log_to_keep: 1000,
                // One node-wide timer sends every led group's heartbeats at once
                // (`send_heartbeats`), and the bus puts them in one RPC per peer.
                enable_heartbeat: false,
                ..Default::default()
            }
        };
        let bus_config = BusConfig {
            connect_timeout: Duration::from_millis(timeout / 2),
            keep_alive_interval: Duration::from_millis(timeout / 2),
            keep_alive_timeout: Duration::from_millis(timeout / 2),
            backoff: Duration::from_millis(timeout / 10),
            ..BusConfig::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ember-raft")
            .enable_all()
            .build()
            .map_err(|e| format!("can't start the raft runtime: {e}"))?;
        let dir = config.get("cluster-config-file").to_string();
        let sync = config.get_bool("cluster-fsync");

        // Who this node is: its place in the bootstrap list, or the id the cluster gave it.
        let (me, genesis) = if join.is_empty() {
            let me = list
                .iter()
                .position(|(ip, p, _)| *ip == announce && *p == port)
                .ok_or_else(|| {
                    format!("this node ({announce}:{port}) is not in cluster-bootstrap ({text}); set cluster-announce-ip")
                })?;
            let configured = config.get_u64("cluster-port") as u16;
            if configured != 0 && configured != list[me].2 {
                return Err(format!(
                    "cluster-port {configured} disagrees with cluster-bootstrap's bus port {}",
                    list[me].2
                ));
            }
            let peers: Vec<Peer> = list
                .iter()
                .enumerate()
                .map(|(i, (ip, p, b))| Peer {
                    id: i as u64 + 1,
                    name: super::meta::node_name(&text, i as u64 + 1),
                    ip: ip.clone(),
                    port: *p,
                    bus_port: *b,
                })
                .collect();
            let groups = config.get_u64("cluster-groups") as u32;
            let replicas = config.get_u64("cluster-replicas") as usize;
            let genesis = Topology::genesis(groups, replicas, peers);
            (me as u64 + 1, Some(Arc::new(genesis)))
        } else {
            let id_file = std::path::Path::new(&dir).join(NODE_ID_FILE);
            let me = match std::fs::read_to_string(&id_file) {
                Ok(t) => t
                    .trim()
                    .parse::<NodeId>()
                    .map_err(|_| format!("bad node id in {}", id_file.display()))?,
                Err(_) => {
                    let me = rt.block_on(ask_to_join(
                        &join,
                        (&announce, port, own_bus),
                        &PeerAuth::from_config(config),
                        timeout,
                    ))?;
                    std::fs::create_dir_all(&dir)
                        .and_then(|_| std::fs::write(&id_file, format!("{me}\n")))
                        .map_err(|e| format!("can't write {}: {e}", id_file.display()))?;
                    me
                }
            };
            (me, None)
        };
        let myself = match &genesis {
            Some(g) => g.nodes[&me].clone(),
            None => Peer {
                id: me,
                name: String::new(),
                ip: announce.clone(),
                port,
                bus_port: own_bus,
            },
        };
        let bus_addr: SocketAddr = format!("{}:{}", myself.ip, myself.bus_port)
            .parse()
            .map_err(|e| format!("bad cluster bus address: {e}"))?;
        let (topo_tx, topo_rx) = watch::channel(genesis.clone().unwrap_or_default());
        let (multi, bus, meta) = rt.block_on(async {
            let db = RaftDb::open_with(
                &dir,
                DbOptions {
                    sync,
                    group_commit: true,
                },
            )
            .map_err(|e| format!("can't open the raft database '{dir}': {e}"))?;
            let transport = BusTransport::new(me, bus_config);
            let multi = Arc::new(
                MultiRaft::new(me, db, raft_config(me), transport).map_err(|e| e.to_string())?,
            );
            let meta = multi
                .open_group(
                    GroupId::META,
                    GroupMachine::Meta(MetaStateMachine::new(
                        topo_tx,
                        Some(Arc::downgrade(server)),
                    )),
                )
                .await
                .map_err(|e| format!("can't open the metadata group: {e}"))?;
            let listener = tokio::net::TcpListener::bind(bus_addr)
                .await
                .map_err(|e| format!("can't listen on the cluster bus {bus_addr}: {e}"))?;
            let weak = Arc::downgrade(server);
            let bus = BusServer::for_multi(&multi).with_publish(move |channel, message| {
                weak.upgrade()
                    .map_or(0, |s| s.pubsub.publish(false, channel, message) as u64)
            });
            let bus_counters = bus.counters();
            let bus = bus.spawn(listener).map_err(|e| e.to_string())?;
            if let Some(g) = &genesis {
                let voters = g.members(0);
                if voters.first() == Some(&me)
                    && !meta
                        .raft
                        .is_initialized()
                        .await
                        .map_err(|e| e.to_string())?
                {
                    meta.raft
                        .initialize(raft_nodes(g, voters))
                        .await
                        .map_err(|e| format!("can't initialize the metadata group: {e}"))?;
                }
            }
            Ok::<_, String>((multi, (bus, bus_counters), meta))
        })?;
        let (bus, bus_counters) = bus;
        // What the metadata group says: a restarted node first replays what it had
        // committed (so it opens the groups placed on it now, not at bootstrap); a joining
        // node waits until the cluster has sent it the topology that has it.
        let committed = multi
            .db()
            .committed_index(GroupId::META)
            .map_err(|e| e.to_string())?
            .unwrap_or(0);
        let mut topo_wait = topo_rx.clone();
        let topo = rt.block_on(async {
            let replayed = async {
                while meta.state.last_applied().map_or(0, |l| l.index) < committed {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if genesis.is_none() {
                    let _ = topo_wait.wait_for(|t| t.nodes.contains_key(&me)).await;
                }
            };
            let _ = tokio::time::timeout(JOIN_WAIT, replayed).await;
            topo_wait.borrow().clone()
        });
        if !topo.nodes.contains_key(&me) && genesis.is_none() {
            return Err(format!(
                "the cluster at {join} did not send its topology within {} s",
                JOIN_WAIT.as_secs()
            ));
        }
        let groups = topo.groups;
        let myself = topo.nodes.get(&me).cloned().unwrap_or(myself);
        let mut handles: Vec<Option<Arc<GroupHandle>>> = (0..=groups).map(|_| None).collect();
        handles[0] = Some(Arc::new(GroupHandle::new(GroupId::META, meta.raft)));
        let cl = Arc::new(Cluster {
            me,
            groups,
            replicas: topo.replicas,
            read_mode,
            op_timeout: Duration::from_millis(timeout.max(1000) * 2),
            lease: Duration::from_millis(election_min.saturating_sub(timeout / 10)),
            myself,
            topology: topo_rx,
            handles: RwLock::new(handles),
            genesis,
            server: Arc::downgrade(server),
            multi,
            _bus: bus,
            bus_counters,
            epoch: Instant::now(),
            seeds: AtomicU64::new(rand::random()),
            pongs: RwLock::new(BTreeMap::new()),
            node_timeout: timeout,
            links: parking_lot::Mutex::new(BTreeMap::new()),
            waiters: Default::default(),
            rt,
        });
        // Open the data groups placed here; the bootstrap's first members initialize theirs
        // while the placement is still the bootstrap's.
        cl.rt.block_on(cl.open_placed(&topo))?;
        cl.sync_links(&topo);
        let weak = Arc::downgrade(&cl);
        cl.rt.spawn(send_heartbeats(
            weak.clone(),
            Duration::from_millis(heartbeat_interval),
        ));
        cl.rt
            .spawn(maintain(weak.clone(), Duration::from_millis(timeout / 5)));
        if config.get_bool("cluster-rebalance") {
            cl.rt.spawn(rebalance(weak, Duration::from_millis(timeout)));
        }
        tracing::info!(
            node = me,
            nodes = topo.nodes.len(),
            groups,
            replicas = topo.replicas,
            bus = %bus_addr,
            "cluster mode: groups open"
        );
        Ok(cl)
    }

    /// Opens every data group `topo` places on this node that is not open yet (no
    /// initialization: the group's leader adds this node), and initializes, while `topo`
    /// is still the bootstrap placement, the groups whose first member this node is.
    async fn open_placed(&self, topo: &Topology) -> Result<(), String> {
        let Some(server) = self.server.upgrade() else {
            return Ok(());
        };
        for g in 1..=self.groups {
            if !topo.members(g).contains(&self.me) || self.handle(GroupId(g)).is_some() {
                continue;
            }
            let gid = GroupId(g);
            let sm =
                ClusterStateMachine::new(server.clone(), gid, self.groups).ok_or("bad group")?;
            let group = self
                .multi
                .open_group(gid, GroupMachine::Data(sm))
                .await
                .map_err(|e| format!("can't open {gid}: {e}"))?;
            let bootstrap = self
                .genesis
                .as_ref()
                .filter(|g0| topo.epoch <= 1 && g0.members(g) == topo.members(g));
            if let Some(g0) = bootstrap {
                let members = g0.members(g);
                if members.first() == Some(&self.me)
                    && !group
                        .raft
                        .is_initialized()
                        .await
                        .map_err(|e| e.to_string())?
                {
                    group
                        .raft
                        .initialize(raft_nodes(g0, members))
                        .await
                        .map_err(|e| format!("can't initialize {gid}: {e}"))?;
                }
            }
            self.handles.write()[g as usize] = Some(Arc::new(GroupHandle::new(gid, group.raft)));
        }
        Ok(())
    }

    /// Starts the pinger and PUBLISH forwarder of every other node in `topo` that has
    /// none (or whose bus moved), and stops those of nodes that left.
    fn sync_links(&self, topo: &Topology) {
        let mut links = self.links.lock();
        links.retain(|id, l| {
            topo.nodes
                .get(id)
                .is_some_and(|p| format!("{}:{}", p.ip, p.bus_port) == l.bus_addr)
        });
        for p in topo.nodes.values() {
            if p.id == self.me || links.contains_key(&p.id) {
                continue;
            }
            let addr = format!("{}:{}", p.ip, p.bus_port);
            let pong = self
                .pongs
                .write()
                .entry(p.id)
                .or_insert_with(|| Arc::new(AtomicU64::new(0)))
                .clone();
            let (tx, rx) = tokio::sync::mpsc::channel(PUBLISH_QUEUE);
            let tasks = [
                self.rt.spawn(ping_peer(
                    self.me,
                    p.id,
                    addr.clone(),
                    pong,
                    self.node_timeout,
                )),
                self.rt.spawn(forward_publishes(
                    self.me,
                    addr.clone(),
                    rx,
                    self.node_timeout,
                )),
            ];
            links.insert(
                p.id,
                Link {
                    bus_addr: addr,
                    publish: tx,
                    tasks,
                },
            );
        }
    }

    /// This node.
    pub fn myself(&self) -> &Peer {
        &self.myself
    }

    /// The topology as this node knows it now.
    pub fn topology(&self) -> Arc<Topology> {
        self.topology.borrow().clone()
    }

    /// Every node of the cluster, by id.
    pub fn nodes(&self) -> Vec<Peer> {
        self.topology().nodes.values().cloned().collect()
    }

    /// Node `id`, if it is one.
    pub fn peer(&self, id: NodeId) -> Option<Peer> {
        if id == self.me {
            return Some(self.myself.clone());
        }
        self.topology.borrow().nodes.get(&id).cloned()
    }

    /// The data group owning `slot`.
    pub fn slot_group(&self, slot: u16) -> GroupId {
        raft::slot_group(slot, self.groups)
    }

    /// The slots of group `g`.
    pub fn group_slots(&self, g: GroupId) -> std::ops::RangeInclusive<u16> {
        raft::group_slots(g, self.groups).unwrap_or(0..=SLOTS - 1)
    }

    /// Members of group `g` as the topology places them.
    pub fn members(&self, g: GroupId) -> Vec<NodeId> {
        self.topology.borrow().members(g.0).to_vec()
    }

    /// This node's member of group `g`, if it has one open.
    pub fn handle(&self, g: GroupId) -> Option<Arc<GroupHandle>> {
        self.handles.read().get(g.0 as usize).and_then(Clone::clone)
    }

    /// This node's open data groups.
    fn data_handles(&self) -> Vec<Arc<GroupHandle>> {
        self.handles
            .read()
            .iter()
            .skip(1)
            .flatten()
            .cloned()
            .collect()
    }

    /// Leadership of group `g` as seen here; for a group this node is not in, nobody.
    pub fn leadership(&self, g: GroupId) -> Leadership {
        match self.handle(g) {
            Some(h) => {
                let m = h.metrics.borrow();
                let leader = m.current_leader;
                Leadership {
                    leader,
                    term: m.current_term,
                    is_me: leader == Some(self.me) && m.state == ServerState::Leader,
                }
            }
            None => Leadership {
                leader: None,
                term: 0,
                is_me: false,
            },
        }
    }

    /// The node to send clients to for group `g`: its leader, or (when this node is not a
    /// member) the group's first member, which knows better.
    pub fn redirect_target(&self, g: GroupId) -> Option<NodeId> {
        match self.handle(g) {
            Some(_) => self.leadership(g).leader,
            None => self.members(g).first().copied(),
        }
    }

    /// What this node's bus server has served.
    pub fn bus_counters(&self) -> &BusCounters {
        &self.bus_counters
    }

    /// Queues a PUBLISH made here for every other node's subscribers (Redis Cluster
    /// broadcasts PUBLISH over its bus too); a full queue drops it for that peer.
    pub fn publish_to_peers(&self, channel: &[u8], message: &[u8]) {
        let (channel, message) = (
            Bytes::copy_from_slice(channel),
            Bytes::copy_from_slice(message),
        );
        for l in self.links.lock().values() {
            let _ = l.publish.try_send((channel.clone(), message.clone()));
        }
    }

    /// A fresh proposal seed.
    pub fn next_seed(&self) -> u64 {
        let n = self.seeds.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed);
        n ^ storage::clock::now_ns().rotate_left(17)
    }

    /// Runs a cluster-changing client command (`CLUSTER JOIN`, `CLUSTER FORGET`, FUNCTION
    /// LOAD / DELETE / FLUSH / RESTORE) through the metadata group: proposed here when this node leads it, else sent to its leader
    /// as the same client command. The reply's RESP bytes, or an error's text.
    pub async fn meta_command(
        &self,
        client_args: Vec<Vec<u8>>,
        cluster_verb: bool,
    ) -> Result<Bytes, String> {
        let meta = self.handle(GroupId::META).ok_or("no metadata group here")?;
        let command = self.meta_entry(&client_args, cluster_verb)?;
        let deadline = Instant::now() + self.op_timeout;
        loop {
            let request = Request::new(command.clone(), storage::clock::now_ns(), 0);
            let res = tokio::time::timeout_at(deadline.into(), meta.raft.client_write(request))
                .await
                .map_err(|_| "TRYAGAIN the metadata group did not answer in time".to_string())?;
            match res {
                Ok(r) => return Ok(r.data.0),
                Err(raft::openraft::error::RaftError::APIError(
                    raft::openraft::error::ClientWriteError::ForwardToLeader(f),
                )) => {
                    if let Some(node) = f.leader_node.filter(|_| f.leader_id != Some(self.me)) {
                        let args: Vec<&[u8]> = client_args.iter().map(Vec::as_slice).collect();
                        let left = deadline.saturating_duration_since(Instant::now());
                        let auth = self
                            .server
                            .upgrade()
                            .map(|s| PeerAuth::from_config(&s.config.read()))
                            .unwrap_or_default();
                        return match resp_call(&node.addr, &args, &auth, left).await? {
                            resp::Frame::Error(e) => Err(e),
                            f => {
                                let mut out = Vec::new();
                                resp::encode_frame(&f, resp::Protocol::Resp2, &mut out);
                                Ok(out.into())
                            }
                        };
                    }
                    if Instant::now() >= deadline {
                        return Err("CLUSTERDOWN the metadata group has no leader".into());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(format!("ERR {e}")),
            }
        }
    }

    /// The metadata entry of a client command routed through the metadata group: a
    /// `cluster_verb` (CLUSTER JOIN / FORGET) becomes the group's own verb; any other
    /// (FUNCTION writes) goes as it is.
    fn meta_entry(&self, args: &[Vec<u8>], cluster_verb: bool) -> Result<Bytes, String> {
        if !cluster_verb {
            return Ok(super::encode_command(args));
        }
        let sub = args
            .get(1)
            .map(|a| a.to_ascii_lowercase())
            .unwrap_or_default();
        match (sub.as_slice(), args.len()) {
            (b"join", 5) => Ok(super::encode_command(&[
                b"ADDNODE".as_slice(),
                &args[2],
                &args[3],
                &args[4],
            ])),
            (b"forget", 3) => {
                let topo = self.topology();
                let id = topo
                    .nodes
                    .values()
                    .find(|p| p.name.as_bytes() == args[2].as_slice())
                    .map(|p| p.id)
                    .ok_or_else(|| {
                        format!("ERR Unknown node {}", String::from_utf8_lossy(&args[2]))
                    })?;
                Ok(super::encode_command(&[
                    b"FORGET".as_slice(),
                    id.to_string().as_bytes(),
                ]))
            }
            _ => Err("ERR syntax error".into()),
        }
    }

    /// True while reads on group `g` may skip the quorum round (lease mode, a lease proven in
    /// the current `term`).
    pub fn lease_valid(&self, h: &GroupHandle, term: u64) -> bool {
        self.read_mode == ReadMode::Lease
            && h.lease_term.load(Relaxed) == term
            && (self.epoch.elapsed().as_nanos() as u64) < h.lease_until.load(Relaxed)
    }

    /// Confirms this node still leads `h`'s group and has applied everything committed
    /// before now (ReadIndex); on success, starts a lease (lease mode).
    pub async fn confirm_leader(&self, h: &GroupHandle, term: u64) -> Result<(), ReadCheck> {
        let started = self.epoch.elapsed();
        match tokio::time::timeout(self.op_timeout, h.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => {
                let until = started + self.lease;
                h.lease_term.store(term, Relaxed);
                h.lease_until.store(until.as_nanos() as u64, Relaxed);
                Ok(())
            }
            Ok(Err(raft::openraft::error::RaftError::APIError(
                raft::openraft::error::CheckIsLeaderError::ForwardToLeader(f),
            ))) => Err(ReadCheck::NotLeader(f.leader_id)),
            Ok(Err(_)) => Err(ReadCheck::Down),
            Err(_) => Err(ReadCheck::Timeout),
        }
    }

    /// The largest term among this node's groups (the cluster's "current epoch").
    pub fn current_epoch(&self) -> u64 {
        self.handles
            .read()
            .iter()
            .flatten()
            .map(|h| h.metrics.borrow().current_term)
            .max()
            .unwrap_or(0)
    }

    /// The largest term among data groups this node leads ("my epoch").
    pub fn my_epoch(&self) -> u64 {
        self.data_handles()
            .iter()
            .filter_map(|h| {
                let m = h.metrics.borrow();
                (m.current_leader == Some(self.me)).then_some(m.current_term)
            })
            .max()
            .unwrap_or(0)
    }

    /// Unix ms of the last bus ping node `id` answered (this node: now; 0: never).
    pub fn last_pong(&self, id: NodeId) -> u64 {
        if id == self.me {
            return storage::clock::now_ns() / 1_000_000;
        }
        self.pongs.read().get(&id).map_or(0, |p| p.load(Relaxed))
    }

    /// True when node `id` answered a bus ping within the node timeout.
    pub fn is_reachable(&self, id: NodeId) -> bool {
        let now = storage::clock::now_ns() / 1_000_000;
        now.saturating_sub(self.last_pong(id)) <= self.node_timeout
    }

    /// The Raft manager.
    pub fn multi(&self) -> &Arc<Multi> {
        &self.multi
    }

    /// The runtime the groups run on.
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        self.rt.handle()
    }
}

/// Every `every`, has each group this node leads send its heartbeats, all at once, so
/// that the bus batches them into one RPC per peer (openraft's own per-group heartbeat
/// timers are off: hundreds of groups would cost hundreds of timers and RPCs per peer).
async fn send_heartbeats(cl: Weak<Cluster>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(handles) = cl.upgrade().map(|c| {
            c.handles
                .read()
                .iter()
                .flatten()
                .cloned()
                .collect::<Vec<_>>()
        }) else {
            return;
        };
        for h in handles {
            if h.metrics.borrow().state == ServerState::Leader {
                let _ = h.raft.trigger().heartbeat().await;
            }
        }
    }
}

/// Keeps the node in line with the topology (on each change, and every `every`): links
/// to the nodes, the data groups placed here opened and those moved away closed, and in
/// each group this node leads, the Raft membership changed to the placement. As leader of
/// the metadata group, it also proposes the bootstrap topology (once) and makes every node
/// a member of group 0 (a learner when not one of its voters).
async fn maintain(cl: Weak<Cluster>, every: Duration) {
    let Some(mut changes) = cl.upgrade().map(|c| c.topology.clone()) else {
        return;
    };
    // The links follow the topology only (start() made the first ones).
    let mut linked_epoch = None;
    loop {
        // A closed channel (the group is shutting down): pace the loop anyway.
        if let Ok(Err(_)) = tokio::time::timeout(every, changes.changed()).await {
            tokio::time::sleep(every).await;
        }
        let Some(cl) = cl.upgrade() else { return };
        let topo = cl.topology();
        if topo.epoch == 0 {
            cl.initialize_meta();
            continue;
        }
        if linked_epoch != Some(topo.epoch) {
            cl.sync_links(&topo);
            linked_epoch = Some(topo.epoch);
        }
        if let Err(e) = cl.open_placed(&topo).await {
            tracing::warn!(error = %e, "cluster: can't open a group placed here");
        }
        cl.close_unplaced(&topo).await;
        let handles: Vec<Arc<GroupHandle>> = cl.handles.read().iter().flatten().cloned().collect();
        for h in handles {
            if membership_differs(&h, &topo, cl.me) && !h.changing.swap(true, Relaxed) {
                let settle = Duration::from_millis(cl.node_timeout * 2);
                cl.rt.spawn(change_members(h, topo.clone(), settle));
            }
        }
    }
}

impl Cluster {
    /// As leader of an uninitialized metadata group on a bootstrap node: proposes the
    /// bootstrap topology.
    fn initialize_meta(&self) {
        let (Some(genesis), Some(h)) = (self.genesis.clone(), self.handle(GroupId::META)) else {
            return;
        };
        if h.metrics.borrow().state != ServerState::Leader || h.changing.swap(true, Relaxed) {
            return;
        }
        let command = super::encode_command(&[b"INIT".as_slice(), &genesis.encode()]);
        self.rt.spawn(async move {
            let request = Request::new(command, storage::clock::now_ns(), 0);
            if let Err(e) = h.raft.client_write(request).await {
                tracing::warn!(error = %e, "cluster: can't propose the bootstrap topology");
            }
            h.changing.store(false, Relaxed);
        });
    }

    /// Closes this node's member of each data group the topology moved away from it,
    /// once the member knows it is no longer a voter (the leader made it a learner; it is
    /// removed after) or, failing that, a minute after the move; deletes what it held.
    async fn close_unplaced(&self, topo: &Topology) {
        let now = storage::clock::now_ns() / 1_000_000;
        for h in self.data_handles() {
            if topo.members(h.id.0).contains(&self.me) {
                h.unplaced_since.store(0, Relaxed);
                continue;
            }
            let since = match h.unplaced_since.load(Relaxed) {
                0 => {
                    h.unplaced_since.store(now, Relaxed);
                    now
                }
                t => t,
            };
            let (voter, leader) = {
                let m = h.metrics.borrow();
                (
                    m.membership_config
                        .membership()
                        .voter_ids()
                        .any(|v| v == self.me),
                    m.state == ServerState::Leader,
                )
            };
            let waited = now.saturating_sub(since) >= JOIN_WAIT.as_millis() as u64;
            if leader || (voter && !waited) {
                continue;
            }
            self.handles.write()[h.id.0 as usize] = None;
            if let Err(e) = self.multi.remove_group(h.id).await {
                tracing::warn!(group = %h.id, error = %e, "cluster: can't remove a moved group");
            }
            if let Some(server) = self.server.upgrade() {
                if let Some(sm) = ClusterStateMachine::new(server, h.id, self.groups) {
                    sm.clear();
                }
            }
            tracing::info!(group = %h.id, "cluster: group moved away from this node");
        }
    }
}

/// Whether group `h`'s Raft membership (as its leader, this node, sees it) differs from
/// what `topo` places: voters, and for the metadata group every other node a learner.
fn membership_differs(h: &GroupHandle, topo: &Topology, me: NodeId) -> bool {
    {
        let m = h.metrics.borrow();
        if m.state != ServerState::Leader || m.current_leader != Some(me) {
            return false;
        }
    }
    let (voters, all) = wanted_members(h.id, topo);
    !voters.is_empty() && current_members(h) != (voters, all)
}

/// Group `h`'s voters and all its members (voters and learners), as this node knows them.
fn current_members(h: &GroupHandle) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    let m = h.metrics.borrow();
    let mem = m.membership_config.membership();
    (
        mem.voter_ids().collect(),
        mem.nodes().map(|(id, _)| *id).collect(),
    )
}

/// The voters and all members `topo` wants for group `g`.
fn wanted_members(g: GroupId, topo: &Topology) -> (BTreeSet<NodeId>, BTreeSet<NodeId>) {
    let voters: BTreeSet<NodeId> = topo.members(g.0).iter().copied().collect();
    let all = if g.is_meta() {
        topo.nodes.keys().copied().collect()
    } else {
        voters.clone()
    };
    (voters, all)
}

/// Changes group `h`'s membership to what `topo` places, as its leader: new members join
/// as learners (a data group's wait until they have caught up), then the voters are
/// replaced (old ones kept as learners, so they learn that they left), and `settle` later
/// the learners no longer wanted are removed. Clears `h.changing` when done.
async fn change_members(h: Arc<GroupHandle>, topo: Arc<Topology>, settle: Duration) {
    let run = async {
        let (voters, all) = wanted_members(h.id, &topo);
        let (_, present) = current_members(&h);
        for &n in all.difference(&present) {
            let Some(p) = topo.nodes.get(&n) else {
                continue;
            };
            tracing::info!(group = %h.id, node = n, "cluster: adding a learner");
            h.raft
                .add_learner(n, p.raft_node(), voters.contains(&n))
                .await
                .map_err(|e| e.to_string())?;
        }
        let (have, _) = current_members(&h);
        if have != voters {
            tracing::info!(group = %h.id, from = ?have, to = ?voters, "cluster: changing voters");
            h.raft
                .change_membership(voters.clone(), true)
                .await
                .map_err(|e| e.to_string())?;
        }
        let extra: BTreeSet<NodeId> = current_members(&h).1.difference(&all).copied().collect();
        if !extra.is_empty() {
            tokio::time::sleep(settle).await;
            tracing::info!(group = %h.id, nodes = ?extra, "cluster: removing learners");
            h.raft
                .change_membership(ChangeMembers::RemoveNodes(extra), false)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    };
    match tokio::time::timeout(JOIN_WAIT, run).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(group = %h.id, error = %e, "cluster: membership change failed")
        }
        Err(_) => tracing::warn!(group = %h.id, "cluster: membership change timed out"),
    }
    h.changing.store(false, Relaxed);
}

/// openraft's records of `ids` in `topo`.
fn raft_nodes(topo: &Topology, ids: &[NodeId]) -> BTreeMap<NodeId, Node> {
    ids.iter()
        .filter_map(|id| topo.nodes.get(id).map(|p| (*id, p.raft_node())))
        .collect()
}

/// How a node logs in to another node's client port: `masteruser` and `masterauth`.
#[derive(Debug, Clone, Default)]
struct PeerAuth {
    user: String,
    pass: String,
}

impl PeerAuth {
    fn from_config(config: &Config) -> Self {
        PeerAuth {
            user: config.get("masteruser").to_string(),
            pass: config.get("masterauth").to_string(),
        }
    }
}

/// Sends one command to the Redis listener at `addr` (after AUTH when `auth` has a
/// password) and reads its reply.
async fn resp_call(
    addr: &str,
    args: &[&[u8]],
    auth: &PeerAuth,
    limit: Duration,
) -> Result<resp::Frame, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let run = async {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("can't connect to {addr}: {e}"))?;
        let mut request = Vec::new();
        let login = !auth.pass.is_empty();
        if login {
            let mut a: Vec<&[u8]> = vec![b"AUTH"];
            if !auth.user.is_empty() {
                a.push(auth.user.as_bytes());
            }
            a.push(auth.pass.as_bytes());
            request.extend_from_slice(&super::encode_command(&a));
        }
        request.extend_from_slice(&super::encode_command(args));
        s.write_all(&request)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        let mut buf = Vec::new();
        let limits = resp::Limits::default();
        let mut skip = login;
        loop {
            if let Some((f, used)) = resp::parse_frame(&buf, &limits).map_err(|e| e.to_string())? {
                if !skip {
                    return Ok(f);
                }
                if let resp::Frame::Error(e) = f {
                    return Err(format!("{addr}: AUTH: {e}"));
                }
                skip = false;
                buf.drain(..used);
                continue;
            }
            let mut chunk = [0u8; 4096];
            let n = s
                .read(&mut chunk)
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
            if n == 0 {
                return Err(format!("{addr} closed the connection"));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(limit, run)
        .await
        .map_err(|_| format!("{addr} did not answer in time"))?
}

/// Asks the cluster node at `seed` (its client address) to add this node, reachable at
/// `ip:port` (bus `bus`); retries for [`JOIN_WAIT`]. This node's id.
async fn ask_to_join(
    seed: &str,
    (ip, port, bus): (&str, u16, u16),
    auth: &PeerAuth,
    timeout_ms: u64,
) -> Result<NodeId, String> {
    let deadline = Instant::now() + JOIN_WAIT;
    let (port, bus) = (port.to_string(), bus.to_string());
    let args: [&[u8]; 5] = [
        b"CLUSTER",
        b"JOIN",
        ip.as_bytes(),
        port.as_bytes(),
        bus.as_bytes(),
    ];
    loop {
        let why = match resp_call(seed, &args, auth, Duration::from_millis(timeout_ms * 4)).await {
            Ok(resp::Frame::Integer(id)) if id > 0 => return Ok(id as NodeId),
            Ok(other) => format!("{other:?}"),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(format!("can't join the cluster at {seed}: {why}"));
        }
        tracing::info!(seed, reason = %why, "cluster-join: retrying");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Spreads leadership back after failovers: every `timeout / 10` or so, when another node
/// leads at least two more of this node's groups than this node does, this node asks for
/// some of them (half the difference, at most 4 at a time) by starting a Raft election in
/// each (openraft 0.9 has no leader transfer).
///
/// The old leader grants the vote (a leader's own lease ends `election_timeout_max` after
/// its election) when this node's log is as long as its own, and steps down; this node
/// and the old leader make a quorum. So only a group whose log this node has fully
/// applied and that took no entry since the previous look is asked for: one idle for a
/// moment, whose leader has nothing newer. Were the vote refused anyway, the higher term
/// ends the old leadership and the group elects as after a failure (one election timeout
/// without writes). The elections settle before the next count. Groups that move to
/// this node (a join) count from when they are open here.
async fn rebalance(cl: Weak<Cluster>, timeout: Duration) {
    // Short looks: under a light write load a group is often idle for one of them.
    let every = timeout / 10;
    // Settle first: the initial elections, or a restart's catching up.
    tokio::time::sleep(timeout * 3).await;
    let mut seen: BTreeMap<GroupId, Option<u64>> = BTreeMap::new();
    loop {
        let jitter = Duration::from_millis(rand::random::<u64>() % (every.as_millis() as u64 + 1));
        tokio::time::sleep(every + jitter).await;
        let Some((me, groups)) = cl.upgrade().map(|c| (c.me, c.data_handles())) else {
            return;
        };
        let metrics: Vec<RaftMetrics<NodeId, Node>> =
            groups.iter().map(|h| h.metrics.borrow().clone()).collect();
        let views: Vec<GroupView> = metrics
            .iter()
            .zip(&groups)
            .map(|(m, h)| GroupView {
                leader: m.current_leader,
                can_take: m.state == ServerState::Follower
                    && m.membership_config
                        .membership()
                        .voter_ids()
                        .any(|v| v == me),
                idle: m.last_log_index.is_some()
                    && m.last_applied.map(|l| l.index) == m.last_log_index
                    && seen.get(&h.id).copied().flatten() == m.last_log_index,
            })
            .collect();
        seen = groups
            .iter()
            .zip(&metrics)
            .map(|(h, m)| (h.id, m.last_log_index))
            .collect();
        for i in rebalance_picks(me, &views) {
            let m = &metrics[i];
            tracing::info!(
                group = %groups[i].id,
                from = ?m.current_leader,
                term = m.current_term,
                "rebalance: asking for leadership"
            );
            let _ = groups[i].raft.trigger().elect().await;
        }
    }
}

/// One group as [`rebalance`] sees it.
#[derive(Debug, Clone, Copy)]
struct GroupView {
    /// Its leader as this node knows it.
    leader: Option<NodeId>,
    /// This node is a voting follower of it.
    can_take: bool,
    /// This node applied its whole log and it took no entry since the last look.
    idle: bool,
}

/// The groups `me` asks for: when the busiest other leader leads two or more groups than
/// `me` does, half the difference (at most 4) of its idle groups that `me` can take.
fn rebalance_picks(me: NodeId, views: &[GroupView]) -> Vec<usize> {
    let mut led: BTreeMap<NodeId, usize> = BTreeMap::new();
    for l in views.iter().filter_map(|v| v.leader) {
        *led.entry(l).or_default() += 1;
    }
    let mine = led.get(&me).copied().unwrap_or(0);
    let Some((&busiest, &n)) = led
        .iter()
        .filter(|(&l, _)| l != me)
        .max_by_key(|(&l, &n)| (n, std::cmp::Reverse(l)))
    else {
        return Vec::new();
    };
    if n < mine + 2 {
        return Vec::new();
    }
    views
        .iter()
        .enumerate()
        .filter(|(_, v)| v.idle && v.can_take && v.leader == Some(busiest))
        .map(|(i, _)| i)
        .take(((n - mine) / 2).min(4))
        .collect()
}

/// PUBLISH messages waiting for one peer; more are dropped (pub/sub is at most once).
const PUBLISH_QUEUE: usize = 4096;

/// Sends the PUBLISH messages queued for the peer at `addr`, in order; a message the peer
/// does not take within half the node timeout is dropped.
async fn forward_publishes(
    me: NodeId,
    addr: String,
    mut rx: tokio::sync::mpsc::Receiver<(Bytes, Bytes)>,
    timeout: u64,
) {
    let bus = BusTransport::new(
        me,
        BusConfig {
            connect_timeout: Duration::from_millis(timeout / 2),
            ..BusConfig::default()
        },
    );
    while let Some((channel, message)) = rx.recv().await {
        let _ = bus
            .publish(
                &addr,
                &channel,
                &message,
                Duration::from_millis(timeout / 2),
            )
            .await;
    }
}

/// Pings node `id`'s bus at `addr` every `timeout / 4` ms and records the answers in
/// `pong` (node health for CLUSTER NODES / SHARDS / LINKS; Raft does not depend on it).
/// Each peer has its own task, so a peer that is down (a connect that waits out its
/// timeout) does not delay the pings of the others.
async fn ping_peer(me: NodeId, id: NodeId, addr: String, pong: Arc<AtomicU64>, timeout: u64) {
    let every = Duration::from_millis((timeout / 4).max(25));
    let bus = BusTransport::new(
        me,
        BusConfig {
            connect_timeout: Duration::from_millis(timeout / 2),
            ..BusConfig::default()
        },
    );
    loop {
        if let Ok(got) = bus.ping(&addr, Duration::from_millis(timeout / 2)).await {
            if got == id {
                pong.store(storage::clock::now_ns() / 1_000_000, Relaxed);
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Why a read could not be confirmed on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadCheck {
    /// Another node (or nobody known) leads the group now.
    NotLeader(Option<NodeId>),
    /// The group cannot reach a quorum.
    Down,
    /// The check did not finish within the operation timeout.
    Timeout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebalance_takes_half_the_gap_from_the_busiest() {
        let v = |leader, idle| GroupView {
            leader: Some(leader),
            can_take: leader != 1,
            idle,
        };
        // Node 1 came back: 2 leads 5, 3 leads 3, 1 leads none.
        let views = [
            v(2, true),
            v(3, true),
            v(2, false),
            v(2, true),
            v(3, true),
            v(2, true),
            v(2, true),
            v(3, true),
        ];
        // Half of (5 - 0), among the idle ones.
        assert_eq!(rebalance_picks(1, &views), vec![0, 3]);
        // Node 3 (3 groups) asks 2 (5 groups) for one.
        assert_eq!(rebalance_picks(3, &views), vec![0]);
        // Balanced within one: nobody asks.
        let even = [v(1, true), v(2, true), v(3, true), v(2, true)];
        for me in 1..=3 {
            assert!(rebalance_picks(me, &even).is_empty());
        }
        // At most 4 at once; busy groups are left alone.
        let many: Vec<GroupView> = (0..20).map(|i| v(2, i % 2 == 0)).collect();
        assert_eq!(rebalance_picks(1, &many), vec![0, 2, 4, 6]);
        assert!(rebalance_picks(1, &[v(2, false), v(2, false)]).is_empty());
    }

    #[test]
    fn bootstrap_list_parses() {
        let l = parse_bootstrap("127.0.0.1:7000,127.0.0.1:7001@17101 127.0.0.1:7002").unwrap();
        assert_eq!(
            l,
            vec![
                ("127.0.0.1".into(), 7000, 17000),
                ("127.0.0.1".into(), 7001, 17101),
                ("127.0.0.1".into(), 7002, 17002)
            ]
        );
        assert!(parse_bootstrap("127.0.0.1").is_err());
        assert!(parse_bootstrap("127.0.0.1:x").is_err());
        assert!(parse_bootstrap("a:1,a:1").is_err());
        assert!(parse_bootstrap("a:60000").is_err());
    }
}
