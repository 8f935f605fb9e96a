//! Redis Cluster commands: CLUSTER (every subcommand of Redis 7.0), READONLY, READWRITE and
//! ASKING.
//!
//! A single node is a server with cluster support disabled, so each of them answers what
//! redis-server answers then: `-ERR This instance has cluster support disabled` (arity and
//! unknown subcommands are checked first, by the registry, as Redis does). Clients rely on
//! that text: redis-py's `RedisCluster` reports "Cluster mode is not enabled on this node"
//! when it sees it.
//!
//! In cluster mode (`cluster-enabled yes`) the read side is real: MYID, KEYSLOT,
//! COUNTKEYSINSLOT, GETKEYSINSLOT, INFO, SLOTS, SHARDS, NODES, LINKS describe the Raft
//! groups as this node sees them (a group's leader is its slots' master, its other members
//! the replicas); READONLY, READWRITE and ASKING set the connection's flags. FORGET removes
//! a node from the whole cluster (its replicas move to the others first), and Ember's own
//! JOIN adds one (what `cluster-join` sends); both go through the metadata group. Commands
//! that move slots or nodes by hand (ADDSLOTS, MEET, FAILOVER, SETSLOT, ...) answer an
//! error: Ember places slots in Raft groups and fails over by election.

use std::fmt::Write as _;
use std::sync::Arc;

use raft::{GroupId, NodeId};
use resp::Args;

use crate::cluster::Cluster;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, ClusterRoute, CommandSpec, Group};

const G: Group = Group::Cluster;

/// Flags of the CLUSTER subcommands that change the cluster (Redis's `admin stale
/// no_async_loading`; Ember has no async loading).
const CHANGE: u32 = ADMIN | STALE;

/// One CLUSTER subcommand.
const fn sub(name: &'static str, arity: i32, flags: u32, summary: &'static str) -> CommandSpec {
    CommandSpec::new(name, arity, flags, (0, 0, 0), G, unsupported).doc(summary, "3.0.0")
}

/// A CLUSTER subcommand Ember implements in cluster mode.
const fn real(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
    handler: crate::registry::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, (0, 0, 0), G, handler).doc(summary, "3.0.0")
}

/// CLUSTER's subcommands, as Redis 7.0 has them.
static CLUSTER: &[CommandSpec] = &[
    sub(
        "addslots",
        -3,
        CHANGE,
        "Assign new hash slots to receiving node",
    ),
    sub(
        "addslotsrange",
        -4,
        CHANGE,
        "Assign new hash slots to receiving node",
    ),
    sub("bumpepoch", 2, CHANGE, "Advance the cluster config epoch"),
    sub(
        "count-failure-reports",
        3,
        CHANGE,
        "Return the number of failure reports active for a given node",
    ),
    real(
        "countkeysinslot",
        3,
        STALE,
        "Return the number of local keys in the specified hash slot",
        countkeysinslot,
    ),
    sub(
        "delslots",
        -3,
        CHANGE,
        "Set hash slots as unbound in receiving node",
    ),
    sub(
        "delslotsrange",
        -4,
        CHANGE,
        "Set hash slots as unbound in receiving node",
    ),
    sub(
        "failover",
        -2,
        CHANGE,
        "Forces a replica to perform a manual failover of its master.",
    ),
    sub(
        "flushslots",
        2,
        CHANGE,
        "Delete a node's own slots information",
    ),
    real(
        "forget",
        3,
        CHANGE,
        "Remove a node from the nodes table",
        through_meta,
    )
    .routed(ClusterRoute::Meta),
    real(
        "getkeysinslot",
        4,
        STALE,
        "Return local key names in the specified hash slot",
        getkeysinslot,
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
    ),
    real(
        "info",
        2,
        STALE,
        "Provides info about Redis Cluster node state",
        info,
    ),
    real(
        "join",
        5,
        CHANGE,
        "Add the node at ip port bus-port to the cluster and return its id (Ember)",
        through_meta,
    )
    .routed(ClusterRoute::Meta),
    real(
        "keyslot",
        3,
        STALE,
        "Returns the hash slot of the specified key",
        keyslot,
    ),
    real(
        "links",
        2,
        STALE,
        "Returns a list of all TCP links to and from peer nodes in cluster",
        links,
    ),
    sub(
        "meet",
        -4,
        CHANGE,
        "Force a node cluster to handshake with another node",
    ),
    real("myid", 2, STALE, "Return the node id", myid),
    real("nodes", 2, STALE, "Get Cluster config for the node", nodes),
    sub(
        "replicas",
        3,
        CHANGE,
        "List replica nodes of the specified master node",
    ),
    sub(
        "replicate",
        3,
        CHANGE,
        "Reconfigure a node as a replica of the specified master node",
    ),
    sub("reset", -2, CHANGE | NOSCRIPT, "Reset a Redis Cluster node"),
    sub(
        "saveconfig",
        2,
        CHANGE,
        "Forces the node to save cluster state on disk",
    ),
    sub(
        "set-config-epoch",
        3,
        CHANGE,
        "Set the configuration epoch in a new node",
    ),
    sub("setslot", -4, CHANGE, "Bind a hash slot to a specific node"),
    real(
        "shards",
        2,
        STALE,
        "Get array of cluster slots to node mappings",
        shards,
    ),
    sub(
        "slaves",
        3,
        CHANGE,
        "List replica nodes of the specified master node",
    ),
    real(
        "slots",
        2,
        STALE,
        "Get array of Cluster slot to node mappings",
        slots,
    ),
];

/// Cluster commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::container("cluster", G, CLUSTER).doc("A container for cluster commands", "3.0.0"),
    CommandSpec::new(
        "readonly",
        1,
        LOADING | STALE | FAST,
        (0, 0, 0),
        G,
        readonly,
    )
    .categories(&["connection"])
    .doc(
        "Enables read queries for a connection to a cluster replica node",
        "3.0.0",
    ),
    CommandSpec::new(
        "readwrite",
        1,
        LOADING | STALE | FAST,
        (0, 0, 0),
        G,
        readwrite,
    )
    .categories(&["connection"])
    .doc(
        "Disables read queries for a connection to a cluster replica node",
        "3.0.0",
    ),
    CommandSpec::new("asking", 1, FAST, (0, 0, 0), G, asking)
        .categories(&["connection"])
        .doc("Sent by cluster clients after an -ASK redirect", "3.0.0"),
];

/// The cluster this node is in, or the "disabled" error of a single node.
fn cluster<'a>(ctx: &Ctx<'a>) -> Result<&'a Arc<Cluster>, CmdError> {
    let server: &'a Arc<crate::server::Server> = ctx.server;
    server
        .cluster
        .get()
        .ok_or_else(|| CmdError::err("This instance has cluster support disabled"))
}

/// A subcommand Ember does not implement: the single-node error, or in cluster mode why.
fn unsupported(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    Err(CmdError::err(format!(
        "CLUSTER {} is not supported: Ember places slots in Raft groups and fails over by election",
        String::from_utf8_lossy(args.arg(1)).to_ascii_uppercase()
    )))
}

/// CLUSTER JOIN / FORGET: run by the cluster router (`cluster::route`), which awaits the
/// metadata group; here only where that cannot happen.
fn through_meta(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    Err(CmdError::err(format!(
        "CLUSTER {} can't run inside MULTI or a script",
        String::from_utf8_lossy(args.arg(1)).to_ascii_uppercase()
    )))
}

/// READONLY: reads on this connection may be served by a replica.
fn readonly(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster.readonly = true;
    ctx.out.ok();
    Ok(())
}

/// READWRITE: reads go to the leader again.
fn readwrite(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster.readonly = false;
    ctx.out.ok();
    Ok(())
}

/// ASKING: the next command is the target of an `-ASK` redirect.
fn asking(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    ctx.client.cluster.asking = true;
    ctx.out.ok();
    Ok(())
}

fn myid(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let cl = cluster(ctx)?;
    ctx.out.bulk(cl.myself().name.as_bytes());
    Ok(())
}

fn keyslot(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    ctx.out.int(i64::from(raft::key_slot(args.arg(2))));
    Ok(())
}

/// A slot argument: 0..16383, else Redis's error.
fn slot_arg(b: &[u8]) -> Result<u16, CmdError> {
    match crate::cmd::util::parse_i64(b) {
        Ok(n) if (0..i64::from(raft::SLOTS)).contains(&n) => Ok(n as u16),
        _ => Err(CmdError::err("Invalid slot")),
    }
}

/// Calls `f` with each live key of database 0 in `slot` until it returns false.
fn keys_in_slot(ctx: &Ctx<'_>, slot: u16, mut f: impl FnMut(&[u8]) -> bool) {
    let ks = &ctx.server.keyspace;
    let mut go = true;
    for shard in 0..ks.shard_count() {
        if !go {
            break;
        }
        ks.with_shard(shard, |sh| {
            sh.table_ref(0).for_each_live(ctx.now, |k, _| {
                if go && raft::key_slot(k) == slot {
                    go = f(k);
                }
            })
        });
    }
}

/// CLUSTER COUNTKEYSINSLOT: keys of the slot held here (a scan of the keyspace: Ember keeps
/// no per-slot index).
fn countkeysinslot(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    let slot = slot_arg(args.arg(2))?;
    let mut n = 0i64;
    keys_in_slot(ctx, slot, |_| {
        n += 1;
        true
    });
    ctx.out.int(n);
    Ok(())
}

/// CLUSTER GETKEYSINSLOT slot count.
fn getkeysinslot(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    cluster(ctx)?;
    let slot = slot_arg(args.arg(2))?;
    let count = match crate::cmd::util::parse_i64(args.arg(3)) {
        Ok(n) if n >= 0 => n as usize,
        _ => return Err(CmdError::err("Invalid number of keys")),
    };
    let mut keys = Vec::new();
    keys_in_slot(ctx, slot, |k| {
        if keys.len() < count {
            keys.push(k.to_vec());
        }
        keys.len() < count
    });
    keys.sort();
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// One run of contiguous slots served by the same nodes (leader first).
struct Range {
    start: u16,
    end: u16,
    nodes: Vec<NodeId>,
    /// Whether the range's group has a known leader.
    led: bool,
}

/// The slot map as this node sees it: each group's range, its leader first (as master),
/// then its other members; adjacent ranges with the same nodes merged.
fn slot_map(cl: &Cluster) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    for g in 1..=cl.groups {
        let g = GroupId(g);
        let slots = cl.group_slots(g);
        let members = cl.members(g);
        let leader = cl.leadership(g).leader.filter(|l| members.contains(l));
        let mut nodes: Vec<NodeId> = Vec::with_capacity(members.len());
        nodes.extend(leader);
        nodes.extend(members.iter().filter(|&&m| Some(m) != leader));
        let led = leader.is_some() || cl.handle(g).is_none();
        match out.last_mut() {
            Some(r) if r.nodes == nodes && r.led == led && r.end + 1 == *slots.start() => {
                r.end = *slots.end();
            }
            _ => out.push(Range {
                start: *slots.start(),
                end: *slots.end(),
                nodes,
                led,
            }),
        }
    }
    out
}

/// The slot map with each range's first node only (its master), adjacent ranges merged.
fn masters(map: Vec<Range>) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::with_capacity(map.len());
    for mut r in map {
        r.nodes.truncate(1);
        match out.last_mut() {
            Some(l) if l.nodes == r.nodes && l.led == r.led && l.end + 1 == r.start => {
                l.end = r.end;
            }
            _ => out.push(r),
        }
    }
    out
}

/// CLUSTER SLOTS: per range, its master (the group leader) only.
///
/// Every Ember node leads some groups and follows others, which Redis Cluster's one role
/// per node cannot say: a client reading SLOTS marks a node listed as a replica anywhere as
/// a replica everywhere (redis-py then leaves it out of KEYS, SCAN, DBSIZE and FLUSHALL
/// fan-outs). So SLOTS, SHARDS and NODES show every node as the master of the ranges it
/// leads, and nothing as a replica.
fn slots(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let cl = cluster(ctx)?;
    let map = masters(slot_map(cl));
    let out = &mut *ctx.out;
    out.array(map.len());
    for r in &map {
        out.array(2 + r.nodes.len());
        out.int(i64::from(r.start));
        out.int(i64::from(r.end));
        for &n in &r.nodes {
            let Some(p) = cl.peer(n) else { continue };
            out.array(4);
            out.bulk(p.ip.as_bytes());
            out.int(i64::from(p.port));
            out.bulk(p.name.as_bytes());
            out.map(0);
        }
    }
    Ok(())
}

/// One shard: its nodes (master first) and its slot ranges.
type Shard = (Vec<NodeId>, Vec<(u16, u16)>);

/// CLUSTER SHARDS: one shard per master (see [`slots`]), with the ranges it leads.
fn shards(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let cl = cluster(ctx)?;
    let map = masters(slot_map(cl));
    let mut shards: Vec<Shard> = Vec::new();
    for r in &map {
        match shards.iter_mut().find(|(n, _)| *n == r.nodes) {
            Some((_, s)) => s.push((r.start, r.end)),
            None => shards.push((r.nodes.clone(), vec![(r.start, r.end)])),
        }
    }
    let out = &mut *ctx.out;
    out.array(shards.len());
    for (nodes, ranges) in &shards {
        out.map(2);
        out.bulk(b"slots");
        out.array(ranges.len() * 2);
        for &(a, b) in ranges {
            out.int(i64::from(a));
            out.int(i64::from(b));
        }
        out.bulk(b"nodes");
        out.array(nodes.len());
        for (i, &n) in nodes.iter().enumerate() {
            let Some(p) = cl.peer(n) else {
                out.map(0);
                continue;
            };
            out.map(7);
            out.bulk(b"id");
            out.bulk(p.name.as_bytes());
            out.bulk(b"port");
            out.int(i64::from(p.port));
            out.bulk(b"ip");
            out.bulk(p.ip.as_bytes());
            out.bulk(b"endpoint");
            out.bulk(p.ip.as_bytes());
            out.bulk(b"role");
            out.bulk(if i == 0 { b"master" } else { b"replica" });
            out.bulk(b"replication-offset");
            out.int(0);
            out.bulk(b"health");
            out.bulk(if cl.is_reachable(n) {
                b"online"
            } else {
                b"failed"
            });
        }
    }
    Ok(())
}

/// CLUSTER NODES: every node as a master of the ranges it leads.
fn nodes(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let cl = cluster(ctx)?;
    let map = slot_map(cl);
    let mut text = String::new();
    for p in &cl.nodes() {
        let mut flags = String::new();
        if p.id == cl.me {
            flags.push_str("myself,");
        }
        flags.push_str("master");
        let up = cl.is_reachable(p.id);
        if !up {
            flags.push_str(",fail");
        }
        let _ = write!(
            text,
            "{} {}:{}@{} {} - 0 {} {} {}",
            p.name,
            p.ip,
            p.port,
            p.bus_port,
            flags,
            cl.last_pong(p.id),
            cl.current_epoch(),
            if up { "connected" } else { "disconnected" }
        );
        for r in map
            .iter()
            .filter(|r| r.led && r.nodes.first() == Some(&p.id))
        {
            if r.start == r.end {
                let _ = write!(text, " {}", r.start);
            } else {
                let _ = write!(text, " {}-{}", r.start, r.end);
            }
        }
        text.push('\n');
    }
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// CLUSTER INFO: state, slot counts, nodes, epochs (Raft terms).
fn info(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let cl = cluster(ctx)?;
    let map = slot_map(cl);
    let ok: u32 = map
        .iter()
        .filter(|r| r.led)
        .map(|r| u32::from(r.end - r.start) + 1)
        .sum();
    let nodes = cl.nodes();
    let size = nodes
        .iter()
        .filter(|p| map.iter().any(|r| r.led && r.nodes.first() == Some(&p.id)))
        .count();
    let mut t = String::new();
    let state = if ok == u32::from(raft::SLOTS) {
        "ok"
    } else {
        "fail"
    };
    let _ = write!(
        t,
        "cluster_state:{state}\r\ncluster_slots_assigned:{}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:{}\r\ncluster_known_nodes:{}\r\ncluster_size:{size}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\ncluster_groups:{}\r\ncluster_replicas:{}\r\ncluster_topology_epoch:{}\r\n",
        raft::SLOTS,
        u32::from(raft::SLOTS) - ok,
        nodes.len(),
        cl.current_epoch(),
        cl.my_epoch(),
        cl.groups,
        cl.replicas,
        cl.topology().epoch,
    );
    let bus = cl.bus_counters();
    let _ = write!(
        t,
        "cluster_bus_raft_rpcs_received:{}\r\ncluster_bus_batch_rpcs_received:{}\r\ncluster_bus_batched_requests_received:{}\r\n",
        bus.raft.load(std::sync::atomic::Ordering::Relaxed),
        bus.batches.load(std::sync::atomic::Ordering::Relaxed),
        bus.batched.load(std::sync::atomic::Ordering::Relaxed),
    );
    ctx.out.verbatim("txt", t.as_bytes());
    Ok(())
}

/// CLUSTER LINKS: the bus link to each other node, as the health pings see it.
fn links(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let cl = cluster(ctx)?;
    let others: Vec<crate::cluster::node::Peer> =
        cl.nodes().into_iter().filter(|p| p.id != cl.me).collect();
    let out = &mut *ctx.out;
    out.array(others.len());
    for p in &others {
        out.map(6);
        out.bulk(b"direction");
        out.bulk(b"to");
        out.bulk(b"node");
        out.bulk(p.name.as_bytes());
        out.bulk(b"create-time");
        out.int(cl.last_pong(p.id) as i64);
        out.bulk(b"events");
        out.bulk(if cl.is_reachable(p.id) { b"rw" } else { b"" });
        out.bulk(b"send-buffer-allocated");
        out.int(0);
        out.bulk(b"send-buffer-used");
        out.int(0);
    }
    Ok(())
}
