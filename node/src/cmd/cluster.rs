//! Redis Cluster commands: CLUSTER (every subcommand of Redis 7.0), READONLY, READWRITE and
//! ASKING.
//!
//! A single node is a server with cluster support disabled, so each of them answers what
//! redis-server answers then: `-ERR This instance has cluster support disabled` (arity and
//! unknown subcommands are checked first, by the registry, as Redis does). Clients rely on
//! that text: redis-py's `RedisCluster` reports "Cluster mode is not enabled on this node"
//! when it sees it.

use resp::Args;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Cluster;

/// Flags of the CLUSTER subcommands that change the cluster (Redis's `admin stale
/// no_async_loading`; Ember has no async loading).
const CHANGE: u32 = ADMIN | STALE;

/// One CLUSTER subcommand.
const fn sub(name: &'static str, arity: i32, flags: u32, summary: &'static str) -> CommandSpec {
    CommandSpec::new(name, arity, flags, (0, 0, 0), G, disabled).doc(summary, "3.0.0")
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
    sub(
        "countkeysinslot",
        3,
        STALE,
        "Return the number of local keys in the specified hash slot",
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
    sub("forget", 3, CHANGE, "Remove a node from the nodes table"),
    sub(
        "getkeysinslot",
        4,
        STALE,
        "Return local key names in the specified hash slot",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
    ),
    sub(
        "info",
        2,
        STALE,
        "Provides info about Redis Cluster node state",
    ),
    sub(
        "keyslot",
        3,
        STALE,
        "Returns the hash slot of the specified key",
    ),
    sub(
        "links",
        2,
        STALE,
        "Returns a list of all TCP links to and from peer nodes in cluster",
    ),
    sub(
        "meet",
        -4,
        CHANGE,
        "Force a node cluster to handshake with another node",
    ),
    sub("myid", 2, STALE, "Return the node id"),
    sub("nodes", 2, STALE, "Get Cluster config for the node"),
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
    sub(
        "shards",
        2,
        STALE,
        "Get array of cluster slots to node mappings",
    ),
    sub(
        "slaves",
        3,
        CHANGE,
        "List replica nodes of the specified master node",
    ),
    sub(
        "slots",
        2,
        STALE,
        "Get array of Cluster slot to node mappings",
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
        disabled,
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
        disabled,
    )
    .categories(&["connection"])
    .doc(
        "Disables read queries for a connection to a cluster replica node",
        "3.0.0",
    ),
    CommandSpec::new("asking", 1, FAST, (0, 0, 0), G, disabled)
        .categories(&["connection"])
        .doc("Sent by cluster clients after an -ASK redirect", "3.0.0"),
];

/// What every cluster command answers on a node without cluster support.
fn disabled(_ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    Err(CmdError::err("This instance has cluster support disabled"))
}
