//! [`Cluster`]: a node's membership in an Ember cluster: its peers, its Raft groups, the
//! runtime that drives them and the bus that connects them.
//!
//! # Bootstrap
//! Every node is started with the same `cluster-bootstrap` list (`host:port[@busport]`,
//! comma-separated). The list's order gives node ids (1, 2, ...); a node finds itself by its
//! announce address and port. The slots are split into `cluster-groups` groups; group `g`
//! is replicated on `cluster-replicas` nodes starting at node `((g-1) mod N) + 1`, and that
//! first member initializes the group (once: a group with state on disk is not initialized
//! again). Its first election usually makes it the leader, so leaders start spread evenly.
//! No coordinator: each node opens its groups, serves the bus, and the groups elect.
//!
//! # Threads
//! openraft's tasks (one core task per group, replication, apply) run on a small
//! multi-threaded tokio runtime of their own (`ember-raft`); client connections on the
//! workers talk to it through channels only (proposals, read checks, metrics).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cluster_bus::{BusConfig, BusCounters, BusServer, BusTransport, RunningBus};
use raft::openraft::{Config as RaftConfig, RaftMetrics, ServerState, SnapshotPolicy};
use raft::{DbOptions, GroupId, MultiRaft, Node, NodeId, Raft, RaftDb, SLOTS};
use tokio::sync::watch;

use super::ClusterStateMachine;
use crate::config::Config;
use crate::server::Server;

/// The Raft manager of a node in cluster mode.
pub type Multi = MultiRaft<ClusterStateMachine, BusTransport>;

/// How reads on a group's leader prove the leader is still the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// A quorum round (ReadIndex) confirms leadership, then reads stay local for a lease
    /// shorter than the followers' election timeout.
    Lease,
    /// Every read (one per batch and group) waits for a quorum round (ReadIndex).
    ReadIndex,
}

/// One node of the cluster, as every node knows it from the bootstrap list.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Raft node id (1-based position in the bootstrap list).
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

/// This node's member of one data group.
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
    /// Every node, by id - 1.
    pub peers: Vec<Peer>,
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
    /// Members of each group, by group id (index 0, the metadata group, unused).
    placement: Vec<Vec<NodeId>>,
    /// This node's groups, by group id (None where it is not a member).
    handles: Vec<Option<GroupHandle>>,
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
    /// Per peer (by id - 1): Unix ms of the last answered bus ping (0: never).
    pongs: Arc<Vec<AtomicU64>>,
    /// The node timeout (ms): a peer silent for longer is marked failing.
    pub node_timeout: u64,
    /// Per peer (by id - 1; `None` for this node): the queue of PUBLISH messages to send.
    publish_queues: Vec<Option<tokio::sync::mpsc::Sender<(Bytes, Bytes)>>>,
    /// Connections waiting in a blocking write (a pop, XREADGROUP ... BLOCK), woken by
    /// applied writes to their keys and by CLIENT UNBLOCK.
    pub waiters: super::block::KeyWaiters,
    /// The runtime of the groups and the bus; dropped last.
    rt: tokio::runtime::Runtime,
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

/// The members of group `g` out of `nodes` nodes with `replicas` replicas; the first
/// initializes it.
pub fn placement(g: u32, nodes: usize, replicas: usize) -> Vec<NodeId> {
    let n = nodes as u64;
    (0..replicas.min(nodes) as u64)
        .map(|i| ((u64::from(g) - 1 + i) % n) + 1)
        .collect()
}

/// The 40-hex name of node `id` in the cluster described by `bootstrap`.
fn node_name(bootstrap: &str, id: NodeId) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("ember-node\n{bootstrap}\n{id}").as_bytes());
    h.digest().to_string()
}

impl Cluster {
    /// Joins the cluster configured in `config`: opens the Raft database under the working
    /// directory, this node's groups over `server`'s keyspace, the bus listener; initializes
    /// the groups this node starts. Returns once all of that is running (elections go on).
    pub fn start(server: &Arc<Server>, config: &Config) -> Result<Arc<Cluster>, String> {
        let port = config.get_u64("port") as u16;
        let announce = match config.get("cluster-announce-ip") {
            "" => "127.0.0.1".to_string(),
            ip => ip.to_string(),
        };
        let text = config.get("cluster-bootstrap").to_string();
        let mut list = parse_bootstrap(&text)?;
        if list.is_empty() {
            let bus = match config.get_u64("cluster-port") {
                0 => port.checked_add(10000).ok_or("no cluster bus port")?,
                p => p as u16,
            };
            list.push((announce.clone(), port, bus));
        }
        let me = list
            .iter()
            .position(|(ip, p, _)| *ip == announce && *p == port)
            .ok_or_else(|| {
                format!("this node ({announce}:{port}) is not in cluster-bootstrap ({text}); set cluster-announce-ip")
            })?;
        let bus_port = list[me].2;
        let configured = config.get_u64("cluster-port") as u16;
        if configured != 0 && configured != bus_port {
            return Err(format!(
                "cluster-port {configured} disagrees with cluster-bootstrap's bus port {bus_port}"
            ));
        }
        let peers: Vec<Peer> = list
            .iter()
            .enumerate()
            .map(|(i, (ip, p, b))| Peer {
                id: i as u64 + 1,
                name: node_name(&text, i as u64 + 1),
                ip: ip.clone(),
                port: *p,
                bus_port: *b,
            })
            .collect();
        let me = me as u64 + 1;
        let groups = config.get_u64("cluster-groups") as u32;
        let replicas = config.get_u64("cluster-replicas") as usize;
        let timeout = config.get_u64("cluster-node-timeout").max(100);
        let read_mode = match config.get("cluster-read-mode") {
            "readindex" => ReadMode::ReadIndex,
            _ => ReadMode::Lease,
        };
        // Failover takes about the followers' leader lease (election_timeout_max) plus one
        // election timeout: ~0.85-1 s with the default node timeout of 1000 ms.
        let election_min = timeout * 35 / 100;
        let heartbeat_interval = (timeout / 10).max(10);
        let raft_config = RaftConfig {
            cluster_name: "ember".into(),
            heartbeat_interval,
            election_timeout_min: election_min,
            election_timeout_max: timeout / 2,
            install_snapshot_timeout: timeout.max(1000),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(10_000),
            max_in_snapshot_log_to_keep: 1000,
            // One node-wide timer sends every led group's heartbeats at once
            // (`send_heartbeats`), and the bus puts them in one RPC per peer.
            enable_heartbeat: false,
            ..Default::default()
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
        let placement: Vec<Vec<NodeId>> = (0..=groups)
            .map(|g| {
                if g == 0 {
                    Vec::new()
                } else {
                    placement(g, peers.len(), replicas)
                }
            })
            .collect();
        let bus_addr: SocketAddr = format!("{}:{}", peers[me as usize - 1].ip, bus_port)
            .parse()
            .map_err(|e| format!("bad cluster bus address: {e}"))?;
        let (multi, bus, handles) = rt.block_on(async {
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
                MultiRaft::new(me, db, raft_config, transport).map_err(|e| e.to_string())?,
            );
            let mut handles: Vec<Option<GroupHandle>> = (0..=groups).map(|_| None).collect();
            for g in 1..=groups {
                if !placement[g as usize].contains(&me) {
                    continue;
                }
                let gid = GroupId(g);
                let sm =
                    ClusterStateMachine::new(server.clone(), gid, groups).ok_or("bad group")?;
                let group = multi
                    .open_group(gid, sm)
                    .await
                    .map_err(|e| format!("can't open {gid}: {e}"))?;
                handles[g as usize] = Some(GroupHandle {
                    id: gid,
                    metrics: group.raft.metrics(),
                    raft: group.raft,
                    lease_until: AtomicU64::new(0),
                    lease_term: AtomicU64::new(0),
                    track: Default::default(),
                });
            }
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
            for h in handles.iter().flatten() {
                let members = &placement[h.id.0 as usize];
                if members[0] != me {
                    continue;
                }
                let init = h.raft.is_initialized().await.map_err(|e| e.to_string())?;
                if !init {
                    let nodes: BTreeMap<NodeId, Node> = members
                        .iter()
                        .map(|&id| (id, peers[id as usize - 1].raft_node()))
                        .collect();
                    h.raft
                        .initialize(nodes)
                        .await
                        .map_err(|e| format!("can't initialize {}: {e}", h.id))?;
                }
            }
            Ok::<_, String>((multi, (bus, bus_counters), handles))
        })?;
        let (bus, bus_counters) = bus;
        rt.spawn(send_heartbeats(
            handles
                .iter()
                .flatten()
                .map(|h| (h.raft.clone(), h.metrics.clone()))
                .collect(),
            Duration::from_millis(heartbeat_interval),
        ));
        if config.get_bool("cluster-rebalance") {
            rt.spawn(rebalance(
                me,
                handles
                    .iter()
                    .flatten()
                    .map(|h| (h.id, h.raft.clone(), h.metrics.clone()))
                    .collect(),
                Duration::from_millis(timeout),
            ));
        }
        let pongs: Arc<Vec<AtomicU64>> =
            Arc::new(peers.iter().map(|_| AtomicU64::new(0)).collect());
        rt.spawn(ping_peers(
            me,
            peers
                .iter()
                .map(|p| format!("{}:{}", p.ip, p.bus_port))
                .collect(),
            pongs.clone(),
            timeout,
        ));
        let publish_queues = peers
            .iter()
            .map(|p| {
                (p.id != me).then(|| {
                    let (tx, rx) = tokio::sync::mpsc::channel(PUBLISH_QUEUE);
                    rt.spawn(forward_publishes(
                        me,
                        format!("{}:{}", p.ip, p.bus_port),
                        rx,
                        timeout,
                    ));
                    tx
                })
            })
            .collect();
        tracing::info!(
            node = me,
            nodes = peers.len(),
            groups,
            replicas,
            bus = %bus_addr,
            "cluster mode: groups open"
        );
        Ok(Arc::new(Cluster {
            me,
            peers,
            groups,
            replicas,
            read_mode,
            op_timeout: Duration::from_millis(timeout.max(1000) * 2),
            lease: Duration::from_millis(election_min.saturating_sub(timeout / 10)),
            placement,
            handles,
            multi,
            _bus: bus,
            bus_counters,
            epoch: Instant::now(),
            seeds: AtomicU64::new(rand::random()),
            pongs,
            node_timeout: timeout,
            publish_queues,
            waiters: Default::default(),
            rt,
        }))
    }

    /// This node.
    pub fn myself(&self) -> &Peer {
        &self.peers[self.me as usize - 1]
    }

    /// Node `id`, if it is one.
    pub fn peer(&self, id: NodeId) -> Option<&Peer> {
        id.checked_sub(1).and_then(|i| self.peers.get(i as usize))
    }

    /// The data group owning `slot`.
    pub fn slot_group(&self, slot: u16) -> GroupId {
        raft::slot_group(slot, self.groups)
    }

    /// The slots of group `g`.
    pub fn group_slots(&self, g: GroupId) -> std::ops::RangeInclusive<u16> {
        raft::group_slots(g, self.groups).unwrap_or(0..=SLOTS - 1)
    }

    /// Members of group `g` (first: the node that initialized it).
    pub fn members(&self, g: GroupId) -> &[NodeId] {
        self.placement
            .get(g.0 as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// This node's member of group `g`, if it is a member.
    pub fn handle(&self, g: GroupId) -> Option<&GroupHandle> {
        self.handles.get(g.0 as usize).and_then(Option::as_ref)
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
        for tx in self.publish_queues.iter().flatten() {
            let _ = tx.try_send((channel.clone(), message.clone()));
        }
    }

    /// A fresh proposal seed.
    pub fn next_seed(&self) -> u64 {
        let n = self.seeds.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed);
        n ^ storage::clock::now_ns().rotate_left(17)
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
            .iter()
            .flatten()
            .map(|h| h.metrics.borrow().current_term)
            .max()
            .unwrap_or(0)
    }

    /// The largest term among groups this node leads ("my epoch").
    pub fn my_epoch(&self) -> u64 {
        self.handles
            .iter()
            .flatten()
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
        id.checked_sub(1)
            .and_then(|i| self.pongs.get(i as usize))
            .map_or(0, |p| p.load(Relaxed))
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
async fn send_heartbeats(
    groups: Vec<(Raft, watch::Receiver<RaftMetrics<NodeId, Node>>)>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for (raft, metrics) in &groups {
            if metrics.borrow().state == ServerState::Leader {
                let _ = raft.trigger().heartbeat().await;
            }
        }
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
/// without writes). The elections settle before the next count.
async fn rebalance(me: NodeId, groups: Vec<(GroupId, Raft, Metrics)>, timeout: Duration) {
    // Short looks: under a light write load a group is often idle for one of them.
    let every = timeout / 10;
    // Settle first: the initial elections, or a restart's catching up.
    tokio::time::sleep(timeout * 3).await;
    let mut seen: Vec<Option<u64>> = vec![None; groups.len()];
    loop {
        let jitter = Duration::from_millis(rand::random::<u64>() % (every.as_millis() as u64 + 1));
        tokio::time::sleep(every + jitter).await;
        let metrics: Vec<RaftMetrics<NodeId, Node>> =
            groups.iter().map(|(_, _, m)| m.borrow().clone()).collect();
        let views: Vec<GroupView> = metrics
            .iter()
            .zip(&seen)
            .map(|(m, prev)| GroupView {
                leader: m.current_leader,
                can_take: m.state == ServerState::Follower
                    && m.membership_config
                        .membership()
                        .voter_ids()
                        .any(|v| v == me),
                idle: m.last_log_index.is_some()
                    && m.last_applied.map(|l| l.index) == m.last_log_index
                    && *prev == m.last_log_index,
            })
            .collect();
        for (s, m) in seen.iter_mut().zip(&metrics) {
            *s = m.last_log_index;
        }
        for i in rebalance_picks(me, &views) {
            let m = &metrics[i];
            tracing::info!(
                group = %groups[i].0,
                from = ?m.current_leader,
                term = m.current_term,
                "rebalance: asking for leadership"
            );
            let _ = groups[i].1.trigger().elect().await;
        }
    }
}

/// A group's Raft metrics, as openraft publishes them.
type Metrics = watch::Receiver<RaftMetrics<NodeId, Node>>;

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

/// Pings every other node's bus every `timeout / 4` ms and records the answers (node
/// health for CLUSTER NODES / SHARDS / LINKS; Raft does not depend on it). Each peer has
/// its own task, so a peer that is down (a connect that waits out its timeout) does not
/// delay the pings of the others.
async fn ping_peers(me: NodeId, addrs: Vec<String>, pongs: Arc<Vec<AtomicU64>>, timeout: u64) {
    let every = Duration::from_millis((timeout / 4).max(25));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, addr) in addrs.into_iter().enumerate() {
        let id = i as u64 + 1;
        if id == me {
            continue;
        }
        let pongs = pongs.clone();
        tasks.spawn(async move {
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
                        pongs[i].store(storage::clock::now_ns() / 1_000_000, Relaxed);
                    }
                }
                tokio::time::sleep(every).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
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

    #[test]
    fn placement_spreads_first_members() {
        assert_eq!(placement(1, 3, 3), vec![1, 2, 3]);
        assert_eq!(placement(2, 3, 3), vec![2, 3, 1]);
        assert_eq!(placement(4, 3, 3), vec![1, 2, 3]);
        assert_eq!(placement(5, 5, 3), vec![5, 1, 2]);
        assert_eq!(placement(1, 1, 3), vec![1]);
        let firsts: Vec<u64> = (1..=64).map(|g| placement(g, 3, 3)[0]).collect();
        for n in 1..=3 {
            let c = firsts.iter().filter(|&&f| f == n).count();
            assert!((21..=22).contains(&c), "node {n} starts {c} groups");
        }
    }

    #[test]
    fn names_are_stable_and_distinct() {
        let a = node_name("x", 1);
        assert_eq!(a.len(), 40);
        assert_eq!(a, node_name("x", 1));
        assert_ne!(a, node_name("x", 2));
    }
}
