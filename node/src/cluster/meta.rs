//! The metadata group (group 0): the cluster's nodes, the placement of every group's
//! replicas and an epoch that counts their changes, replicated by Raft like the data.
//!
//! # Commands
//! A metadata entry is a RESP array, as data entries are:
//! - `INIT <topology>`: the bootstrap topology (every node of `cluster-bootstrap`, each
//!   group on `cluster-replicas` of them); applied once, on an empty state.
//! - `ADDNODE ip port bus-port`: a node joins (`cluster-join`); answers its id (the same id
//!   again for an address already known) and moves replicas to it until every node holds
//!   its share ([`Topology::rebalance`]).
//! - `FORGET id`: the node leaves; its replicas move to the others first.
//!
//! Applying is a pure function of the entry and the state, so every replica computes the
//! same placement. Each node watches the applied topology ([`MetaStateMachine::new`]'s
//! channel): it opens the groups placed on it and closes those moved away, and each group's
//! leader changes the group's Raft membership to match (see `node.rs`).
//!
//! - `FUNCTION LOAD | DELETE | FLUSH | RESTORE ...`: run on the node's function libraries
//!   (writes with no key, so no data group can carry them); every node applies them.
//!
//! # Snapshot
//! The topology in the same encoding as `INIT`'s argument, and the function libraries as
//! FUNCTION DUMP's payload.
//!
//! # Format versions
//! These commands and this snapshot are version [`raft::ENTRY_FORMAT`] and
//! [`raft::SNAPSHOT_FORMAT`] of Raft entries and snapshots, versioned and checked by the
//! raft crate (see `state_machine.rs`): a change a node of this release would apply or
//! install differently bumps them.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use raft::{NodeId, Request, Response};
use resp::Args;
use tokio::sync::watch;

use super::node::Peer;
use super::state_machine::{decode, encode_command};
use super::ClusterStateMachine;
use crate::server::Server;

/// The cluster as the metadata group holds it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Topology {
    /// Bumped by every change; 0 for a topology no metadata entry has confirmed yet (a
    /// node's own reading of `cluster-bootstrap` before `INIT` applies).
    pub epoch: u64,
    /// Number of data groups.
    pub groups: u32,
    /// Replicas per group (fewer while the cluster has fewer nodes).
    pub replicas: usize,
    /// Every node, by id.
    pub nodes: BTreeMap<NodeId, Peer>,
    /// Members of each group, by group id; index 0: the metadata group's voters (every
    /// other node follows it as a learner).
    pub placement: Vec<Vec<NodeId>>,
}

/// The 40-hex name of node `id` (CLUSTER NODES, MYID), from what names the cluster.
pub fn node_name(seed: &str, id: NodeId) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("ember-node\n{seed}\n{id}").as_bytes());
    h.digest().to_string()
}

impl Topology {
    /// True before any node is known (a joining node that has not heard from group 0).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The bootstrap topology: `peers` (ids 1..), `groups` groups on `replicas` nodes each,
    /// group `g` starting at node `((g-1) mod N) + 1`, so first members (and so the first
    /// leaders) are spread evenly. Epoch 0 until `INIT` confirms it.
    pub fn genesis(groups: u32, replicas: usize, peers: Vec<Peer>) -> Topology {
        let n = peers.len();
        let mut placement = vec![(1..=replicas.min(n) as NodeId).collect::<Vec<_>>()];
        placement.extend((1..=groups).map(|g| first_placement(g, n, replicas)));
        Topology {
            epoch: 0,
            groups,
            replicas,
            nodes: peers.into_iter().map(|p| (p.id, p)).collect(),
            placement,
        }
    }

    /// Members of group `g` (for a data group, the first is where a client that asks a
    /// non-member is sent).
    pub fn members(&self, g: u32) -> &[NodeId] {
        self.placement
            .get(g as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// How many data-group replicas each node holds.
    pub fn load(&self) -> BTreeMap<NodeId, usize> {
        let mut load: BTreeMap<NodeId, usize> = self.nodes.keys().map(|&id| (id, 0)).collect();
        for m in self.placement.iter().skip(1).flatten() {
            if let Some(l) = load.get_mut(m) {
                *l += 1;
            }
        }
        load
    }

    /// Adds the node at `ip:port` (bus `bus_port`) and returns its id; an address already
    /// known keeps its id (a retried join).
    fn add_node(&mut self, ip: &str, port: u16, bus_port: u16) -> NodeId {
        if let Some(p) = self.nodes.values().find(|p| p.ip == ip && p.port == port) {
            return p.id;
        }
        let id = self.nodes.keys().next_back().copied().unwrap_or(0) + 1;
        // Named by the first node's name, so names stay unique per cluster.
        let seed = self
            .nodes
            .values()
            .next()
            .map(|p| p.name.clone())
            .unwrap_or_default();
        self.nodes.insert(
            id,
            Peer {
                id,
                name: node_name(&seed, id),
                ip: ip.to_string(),
                port,
                bus_port,
            },
        );
        self.rebalance();
        id
    }

    /// Moves replicas so that every group has `min(replicas, nodes)` members, all of them
    /// known nodes, and no node holds two more replicas than another; the fewest moves
    /// that do it, decided the same way on every replica (ascending ids and groups). The
    /// metadata group's voters are the first `min(replicas, nodes)` nodes kept and filled
    /// by id.
    pub fn rebalance(&mut self) {
        let want = self.replicas.min(self.nodes.len());
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        if self.placement.len() < self.groups as usize + 1 {
            self.placement.resize(self.groups as usize + 1, Vec::new());
        }
        let voters = &mut self.placement[0];
        voters.retain(|v| ids.contains(v));
        for &id in &ids {
            if voters.len() >= want {
                break;
            }
            if !voters.contains(&id) {
                voters.push(id);
            }
        }
        for m in self.placement.iter_mut().skip(1) {
            m.retain(|id| ids.contains(id));
        }
        let mut load = self.load();
        for g in 1..self.placement.len() {
            while self.placement[g].len() < want {
                let Some((&id, _)) = load
                    .iter()
                    .filter(|(id, _)| !self.placement[g].contains(id))
                    .min_by_key(|(&id, &n)| (n, id))
                else {
                    break;
                };
                self.placement[g].push(id);
                *load.entry(id).or_default() += 1;
            }
        }
        while let (Some((&hi, &hi_n)), Some((&lo, &lo_n))) = (
            load.iter()
                .max_by_key(|(&id, &n)| (n, std::cmp::Reverse(id))),
            load.iter().min_by_key(|(&id, &n)| (n, id)),
        ) {
            if hi_n <= lo_n + 1 {
                break;
            }
            let Some(g) = (1..self.placement.len())
                .find(|&g| self.placement[g].contains(&hi) && !self.placement[g].contains(&lo))
            else {
                break;
            };
            for m in self.placement[g].iter_mut() {
                if *m == hi {
                    *m = lo;
                }
            }
            *load.entry(hi).or_default() -= 1;
            *load.entry(lo).or_default() += 1;
        }
    }

    /// The topology as one byte string (snapshots, `INIT`).
    pub fn encode(&self) -> Bytes {
        let mut args: Vec<Vec<u8>> = vec![
            b"TOPOLOGY".to_vec(),
            self.epoch.to_string().into_bytes(),
            self.groups.to_string().into_bytes(),
            self.replicas.to_string().into_bytes(),
            self.nodes.len().to_string().into_bytes(),
        ];
        for p in self.nodes.values() {
            args.push(p.id.to_string().into_bytes());
            args.push(p.name.clone().into_bytes());
            args.push(p.ip.clone().into_bytes());
            args.push(p.port.to_string().into_bytes());
            args.push(p.bus_port.to_string().into_bytes());
        }
        args.push(self.placement.len().to_string().into_bytes());
        for m in &self.placement {
            args.push(m.len().to_string().into_bytes());
            args.extend(m.iter().map(|id| id.to_string().into_bytes()));
        }
        encode_command(&args)
    }

    /// Decodes [`Topology::encode`]'s bytes; anything else is an error.
    pub fn decode(data: &[u8]) -> Result<Topology, String> {
        let mut spans = Vec::new();
        decode(data, &mut spans)?;
        let args = Args::new(data, &spans);
        let mut i = 0;
        let mut next = || -> Result<&[u8], String> {
            i += 1;
            (i <= args.len())
                .then(|| args.arg(i - 1))
                .ok_or_else(|| "topology: too short".to_string())
        };
        fn num<T: std::str::FromStr>(b: &[u8]) -> Result<T, String> {
            std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| "topology: bad number".to_string())
        }
        fn text(b: &[u8]) -> Result<String, String> {
            String::from_utf8(b.to_vec()).map_err(|_| "topology: bad text".to_string())
        }
        if next()? != b"TOPOLOGY" {
            return Err("not a topology".into());
        }
        let epoch = num(next()?)?;
        let groups: u32 = num(next()?)?;
        let replicas = num(next()?)?;
        let n: usize = num(next()?)?;
        let mut nodes = BTreeMap::new();
        for _ in 0..n.min(args.len()) {
            let p = Peer {
                id: num(next()?)?,
                name: text(next()?)?,
                ip: text(next()?)?,
                port: num(next()?)?,
                bus_port: num(next()?)?,
            };
            nodes.insert(p.id, p);
        }
        let rows: usize = num(next()?)?;
        if rows != groups as usize + 1 || nodes.len() != n {
            return Err("topology: bad counts".into());
        }
        let mut placement = Vec::with_capacity(rows);
        for _ in 0..rows {
            let k: usize = num(next()?)?;
            let mut m = Vec::with_capacity(k.min(16));
            for _ in 0..k.min(args.len()) {
                let id: NodeId = num(next()?)?;
                if !nodes.contains_key(&id) {
                    return Err("topology: unknown node in a placement".into());
                }
                m.push(id);
            }
            placement.push(m);
        }
        if i != args.len() {
            return Err("topology: trailing fields".into());
        }
        Ok(Topology {
            epoch,
            groups,
            replicas,
            nodes,
            placement,
        })
    }
}

/// The members of group `g` (1-based) out of `nodes` bootstrap nodes with `replicas`
/// replicas: consecutive ids from `((g-1) mod N) + 1`; the first initializes it.
pub fn first_placement(g: u32, nodes: usize, replicas: usize) -> Vec<NodeId> {
    let n = nodes.max(1) as u64;
    (0..replicas.min(nodes) as u64)
        .map(|i| ((u64::from(g.max(1)) - 1 + i) % n) + 1)
        .collect()
}

/// The metadata group's state machine: the topology, published to the node on every
/// change, and the node's function libraries (FUNCTION LOAD, DELETE, FLUSH, RESTORE are
/// cluster-wide writes with no key: they go through this group and apply on every node).
pub struct MetaStateMachine {
    /// The applied topology.
    topo: Topology,
    /// Where the node watches it.
    tx: watch::Sender<Arc<Topology>>,
    /// The node whose function libraries the group holds (`None` in unit tests).
    server: Option<Weak<Server>>,
}

impl MetaStateMachine {
    /// An empty state that publishes what it applies on `tx` and keeps `server`'s
    /// function libraries.
    pub fn new(tx: watch::Sender<Arc<Topology>>, server: Option<Weak<Server>>) -> Self {
        MetaStateMachine {
            topo: Topology::default(),
            tx,
            server,
        }
    }

    /// Applies a client command the router sent through this group (FUNCTION writes) on
    /// the node, as a data group applies a command; None when `args` names no command (or
    /// the group runs without a node, in tests): one of the group's own verbs.
    fn apply_client_command(
        &self,
        command: &[u8],
        args: Args<'_>,
        time_ns: u64,
        seed: u64,
    ) -> Option<Bytes> {
        let server = self.server.as_ref().and_then(Weak::upgrade)?;
        server.registry.resolve(&args).ok()?;
        Some(super::run_at(&server, command, time_ns, seed))
    }

    /// The node's function libraries as FUNCTION DUMP's payload (empty without a server).
    fn functions_payload(&self) -> Vec<u8> {
        let Some(server) = self.server.as_ref().and_then(Weak::upgrade) else {
            return Vec::new();
        };
        let store = server.scripting.func.lock();
        storage::rdb::functions_payload(store.libraries.values().map(|l| &l.code[..]))
    }

    fn publish(&self) {
        if !self.topo.is_empty() {
            self.tx.send_replace(Arc::new(self.topo.clone()));
        }
    }

    /// Applies one metadata command; the reply in RESP2.
    fn apply_command(&mut self, command: &[u8], time_ns: u64, seed: u64) -> Bytes {
        let mut spans = Vec::new();
        if let Err(e) = decode(command, &mut spans) {
            return err(&format!("ERR Protocol error: {e}"));
        }
        let args = Args::new(command, &spans);
        let arg = |i: usize| (i < args.len()).then(|| args.arg(i));
        let number = |i: usize| -> Option<u64> { std::str::from_utf8(arg(i)?).ok()?.parse().ok() };
        if let Some(reply) = self.apply_client_command(command, args, time_ns, seed) {
            return reply;
        }
        match args.arg(0) {
            b"INIT" if args.len() == 2 => {
                if !self.topo.is_empty() {
                    return err("ERR the cluster is initialized already");
                }
                match Topology::decode(args.arg(1)) {
                    Ok(t) if !t.is_empty() => {
                        self.topo = t;
                        self.topo.epoch = 1;
                        Bytes::from_static(b"+OK\r\n")
                    }
                    Ok(_) => err("ERR empty topology"),
                    Err(e) => err(&format!("ERR {e}")),
                }
            }
            b"ADDNODE" if args.len() == 4 => {
                let (Some(ip), Some(port), Some(bus)) = (
                    arg(1)
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok()),
                    number(2).and_then(|p| u16::try_from(p).ok()),
                    number(3).and_then(|p| u16::try_from(p).ok()),
                ) else {
                    return err("ERR Invalid node address specified: ADDNODE ip port bus-port");
                };
                if self.topo.is_empty() {
                    return err("CLUSTERDOWN the cluster is not initialized yet");
                }
                let known = self.topo.nodes.len();
                let id = self.topo.add_node(ip, port, bus);
                if self.topo.nodes.len() != known {
                    self.topo.epoch += 1;
                }
                Bytes::from(format!(":{id}\r\n"))
            }
            b"FORGET" if args.len() == 2 => {
                let Some(id) = number(1) else {
                    return err("ERR FORGET id");
                };
                if !self.topo.nodes.contains_key(&id) {
                    return err(&format!("ERR Unknown node {id}"));
                }
                if self.topo.nodes.len() == 1 {
                    return err("ERR can't forget the last node");
                }
                self.topo.nodes.remove(&id);
                self.topo.rebalance();
                self.topo.epoch += 1;
                Bytes::from_static(b"+OK\r\n")
            }
            _ => err("ERR unknown metadata command"),
        }
    }
}

/// An error reply's bytes.
fn err(msg: &str) -> Bytes {
    Bytes::from(format!("-{msg}\r\n"))
}

/// The first field of a metadata snapshot: then the topology ([`Topology::encode`]) and
/// the function libraries (FUNCTION DUMP's payload).
const SNAPSHOT_TAG: &[u8] = b"EMBER-META";

impl raft::StateMachine for MetaStateMachine {
    fn apply(&mut self, _index: u64, request: &Request) -> Response {
        // Every change of the topology bumps its epoch (INIT from 0 to 1).
        let epoch = self.topo.epoch;
        let reply = self.apply_command(&request.command, request.time_ns, request.seed);
        if self.topo.epoch != epoch {
            self.publish();
        }
        Response(reply)
    }

    fn snapshot(&self) -> Vec<u8> {
        let topo = if self.topo.is_empty() {
            Bytes::new()
        } else {
            self.topo.encode()
        };
        encode_command(&[SNAPSHOT_TAG, &topo, &self.functions_payload()]).to_vec()
    }

    fn install(&mut self, data: &[u8]) -> Result<(), raft::Error> {
        let invalid = |m: &str| raft::Error::InvalidSnapshot(format!("metadata: {m}"));
        let mut spans = Vec::new();
        decode(data, &mut spans).map_err(|e| invalid(&e))?;
        let args = Args::new(data, &spans);
        if args.len() != 3 || args.arg(0) != SNAPSHOT_TAG {
            return Err(invalid("not a metadata snapshot"));
        }
        let topo = if args.arg(1).is_empty() {
            Topology::default()
        } else {
            Topology::decode(args.arg(1)).map_err(|e| invalid(&e))?
        };
        let payload = args.arg(2);
        if let Some(server) = self.server.as_ref().and_then(Weak::upgrade) {
            let codes = if payload.is_empty() {
                Vec::new()
            } else {
                storage::rdb::functions_from_payload(payload)
                    .map_err(|_| invalid("bad function payload"))?
            };
            let scratch = crate::script::FunctionStore::from_codes(&codes)
                .map_err(|e| invalid(&e.to_string()))?;
            *server.scripting.func.lock() = scratch;
        }
        self.topo = topo;
        self.publish();
        Ok(())
    }
}

/// The state machine of one of a node's groups: the metadata group or a data group.
pub enum GroupMachine {
    /// Group 0.
    Meta(MetaStateMachine),
    /// A data group: its slots of the node's keyspace.
    Data(ClusterStateMachine),
}

impl raft::StateMachine for GroupMachine {
    fn apply(&mut self, index: u64, request: &Request) -> Response {
        match self {
            GroupMachine::Meta(m) => m.apply(index, request),
            GroupMachine::Data(d) => d.apply(index, request),
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        match self {
            GroupMachine::Meta(m) => m.snapshot(),
            GroupMachine::Data(d) => d.snapshot(),
        }
    }

    fn install(&mut self, data: &[u8]) -> Result<(), raft::Error> {
        match self {
            GroupMachine::Meta(m) => m.install(data),
            GroupMachine::Data(d) => d.install(data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::StateMachine;

    fn peer(id: NodeId) -> Peer {
        Peer {
            id,
            name: node_name("t", id),
            ip: "127.0.0.1".into(),
            port: 7000 + id as u16,
            bus_port: 17000 + id as u16,
        }
    }

    fn machine() -> (MetaStateMachine, watch::Receiver<Arc<Topology>>) {
        let (tx, rx) = watch::channel(Arc::new(Topology::default()));
        (MetaStateMachine::new(tx, None), rx)
    }

    fn apply(m: &mut MetaStateMachine, args: &[&[u8]]) -> Bytes {
        m.apply(1, &Request::new(encode_command(args), 0, 0)).0
    }

    fn balanced(t: &Topology) {
        let load = t.load();
        let (lo, hi) = (load.values().min().unwrap(), load.values().max().unwrap());
        assert!(hi - lo <= 1, "load {load:?}");
        let want = t.replicas.min(t.nodes.len());
        for g in 1..=t.groups {
            let m = t.members(g);
            assert_eq!(m.len(), want, "group {g}: {m:?}");
            let mut d = m.to_vec();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), m.len(), "group {g} repeats a node: {m:?}");
            assert!(m.iter().all(|id| t.nodes.contains_key(id)));
        }
    }

    #[test]
    fn genesis_spreads_first_members() {
        let t = Topology::genesis(64, 3, (1..=3).map(peer).collect());
        assert_eq!(t.members(1), &[1, 2, 3]);
        assert_eq!(t.members(2), &[2, 3, 1]);
        assert_eq!(t.members(0), &[1, 2, 3]);
        balanced(&t);
        let firsts: Vec<u64> = (1..=64).map(|g| t.members(g)[0]).collect();
        for n in 1..=3 {
            let c = firsts.iter().filter(|&&f| f == n).count();
            assert!((21..=22).contains(&c), "node {n} starts {c} groups");
        }
        assert_eq!(first_placement(5, 5, 3), vec![5, 1, 2]);
        assert_eq!(first_placement(1, 1, 3), vec![1]);
    }

    #[test]
    fn joins_and_forgets_rebalance_with_few_moves() {
        let (mut m, rx) = machine();
        let genesis = Topology::genesis(64, 3, (1..=3).map(peer).collect());
        let r = apply(&mut m, &[b"INIT", &genesis.encode()]);
        assert_eq!(&r[..], b"+OK\r\n");
        assert_eq!(rx.borrow().epoch, 1);
        // Once only.
        assert!(apply(&mut m, &[b"INIT", &genesis.encode()]).starts_with(b"-ERR"));
        let r = apply(&mut m, &[b"ADDNODE", b"127.0.0.1", b"7004", b"17004"]);
        assert_eq!(&r[..], b":4\r\n");
        let t = rx.borrow().clone();
        assert_eq!(t.epoch, 2);
        balanced(&t);
        // 192 replicas over 4 nodes; node 4 got its 48 by 48 single moves.
        assert_eq!(t.load()[&4], 48);
        let moved = (1..=64)
            .filter(|&g| t.members(g) != genesis.members(g))
            .count();
        assert_eq!(moved, 48);
        // A retried join keeps the id and changes nothing.
        let r = apply(&mut m, &[b"ADDNODE", b"127.0.0.1", b"7004", b"17004"]);
        assert_eq!(&r[..], b":4\r\n");
        assert_eq!(rx.borrow().epoch, 2);
        // Forget node 2: its replicas go to the others, still balanced.
        assert_eq!(&apply(&mut m, &[b"FORGET", b"2"])[..], b"+OK\r\n");
        let t = rx.borrow().clone();
        assert!(!t.nodes.contains_key(&2));
        assert!(!t.members(0).contains(&2));
        balanced(&t);
        assert_eq!(t.epoch, 3);
        // Garbage answers errors and changes nothing.
        for bad in [
            &[b"ADDNODE".as_slice(), b"x"][..],
            &[b"FORGET", b"99"],
            &[b"NOPE"],
            &[b"ADDNODE", b"127.0.0.1", b"70000", b"1"],
            &[b"ADDNODE", b"not-an-ip", b"7005", b"17005"],
        ] {
            assert!(apply(&mut m, bad).starts_with(b"-"), "{bad:?}");
        }
        assert_eq!(*rx.borrow().clone(), *t);
        let r = m.apply(1, &Request::new(Bytes::from_static(b"\x00garbage"), 0, 0));
        assert!(r.0.starts_with(b"-ERR"));
    }

    #[test]
    fn grows_a_one_node_cluster_to_three_replicas() {
        let mut t = Topology::genesis(8, 3, vec![peer(1)]);
        t.epoch = 1;
        assert_eq!(t.members(3), &[1]);
        t.add_node("127.0.0.1", 7002, 17002);
        t.add_node("127.0.0.1", 7003, 17003);
        balanced(&t);
        assert_eq!(t.members(0), &[1, 2, 3]);
        t.add_node("127.0.0.1", 7004, 17004);
        balanced(&t);
        assert_eq!(t.members(0), &[1, 2, 3]);
    }

    #[test]
    fn snapshot_round_trips_and_rejects_garbage() {
        let (mut m, rx) = machine();
        let (mut empty, _) = machine();
        empty.install(&m.snapshot()).unwrap();
        let genesis = Topology::genesis(16, 3, (1..=5).map(peer).collect());
        apply(&mut m, &[b"INIT", &genesis.encode()]);
        let snap = m.snapshot();
        let (mut other, rx2) = machine();
        other.install(&snap).unwrap();
        assert_eq!(*rx2.borrow().clone(), *rx.borrow().clone());
        assert_eq!(rx2.borrow().epoch, 1);
        let before = other.snapshot();
        for bad in [
            &b"garbage"[..],
            &snap[..snap.len() / 2],
            &encode_command(&[b"TOPOLOGY".as_slice(), b"1", b"1", b"1", b"5"])[..],
            &encode_command(&[SNAPSHOT_TAG, b"TOPOLOGY", b""])[..],
        ] {
            assert!(other.install(bad).is_err());
            assert_eq!(other.snapshot(), before);
        }
        // A placement naming an unknown node is refused.
        let mut t = genesis.clone();
        t.placement[3].push(99);
        assert!(Topology::decode(&t.encode()).is_err());
    }

    #[test]
    fn functions_apply_on_the_node_and_travel_in_snapshots() {
        let new_server = || Arc::new(Server::new(crate::config::Config::default(), 1, None, None));
        let (a, b) = (new_server(), new_server());
        let (tx, _rx) = watch::channel(Arc::new(Topology::default()));
        let mut m = MetaStateMachine::new(tx, Some(Arc::downgrade(&a)));
        let code: &[u8] = b"#!lua name=ml\nredis.register_function('f', function() return 1 end)";
        let load = [b"FUNCTION".as_slice(), b"LOAD", code];
        assert_eq!(&apply(&mut m, &load)[..], b"$2\r\nml\r\n");
        // The same code again (every master proposes it): its name, not an error.
        assert_eq!(&apply(&mut m, &load)[..], b"$2\r\nml\r\n");
        let other: &[u8] = b"#!lua name=ml\nredis.register_function('g', function() return 2 end)";
        assert!(apply(&mut m, &[b"FUNCTION", b"LOAD", other]).starts_with(b"-ERR Library"));
        assert_eq!(a.scripting.func.lock().libraries.len(), 1);
        let (tx, _rx) = watch::channel(Arc::new(Topology::default()));
        let mut copy = MetaStateMachine::new(tx, Some(Arc::downgrade(&b)));
        copy.install(&m.snapshot()).unwrap();
        let codes = b.scripting.func.lock().library_codes();
        assert_eq!(codes, vec![code.to_vec()]);
        assert_eq!(&apply(&mut m, &[b"FUNCTION", b"FLUSH"])[..], b"+OK\r\n");
        copy.install(&m.snapshot()).unwrap();
        assert!(b.scripting.func.lock().libraries.is_empty());
    }
}
