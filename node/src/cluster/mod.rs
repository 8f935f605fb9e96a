//! Cluster mode: the pieces that make one node's keyspace a set of Raft-replicated groups.
//!
//! The 16,384 Redis Cluster hash slots ([`key_slot`]) are split into contiguous ranges, one
//! per data group (`raft::group_slots`). Each group on a node is a
//! [`ClusterStateMachine`] over the node's one [`crate::server::Server`] keyspace: it
//! applies the group's committed writes through the same command table single-node mode
//! uses, and snapshots or replaces only the keys whose slot is in its range.
//!
//! # Layout
//! - `state_machine.rs`: [`ClusterStateMachine`] (`raft::StateMachine`), [`run_at`] (one
//!   command at a given time and seed, as apply runs it), [`encode_command`].
//!
//! - `meta.rs`: the metadata group (group 0): [`meta::Topology`] (nodes, placements,
//!   epoch), its state machine, and the enum of a group's state machine.
//! - `node.rs`: [`Cluster`], the node's peers, groups, Raft runtime and bus (cluster mode
//!   started from `cluster-enabled yes` and `cluster-bootstrap` or `cluster-join`), and
//!   the task that follows the topology (groups opened, moved, closed).
//! - `route.rs`: where a client's command runs: `-CROSSSLOT`, `-MOVED`, proposals of
//!   writes, leader-checked reads.
//! - `script_keys.rs`: the keys a script may touch (those of its group).
//! - `watch.rs`: WATCH, checked by the group's leader against what it proposed.
//! - `block.rs`: blocking pops, proposed again when an applied write readies their keys.

pub mod block;
pub mod meta;
pub mod node;
pub mod route;
pub mod script_keys;
mod state_machine;
pub mod watch;

pub use node::Cluster;

pub use raft::key_slot;
pub use state_machine::encode_command;
pub use state_machine::run_at;
pub use state_machine::ClusterStateMachine;
pub use state_machine::{
    encode_batch, encode_fcall, encode_resp3, encode_tx, split_batch_reply, BATCH_MARKER,
};

/// The keys a connection's KEYS, SCAN and DBSIZE show in cluster mode: those of the groups
/// this node leads, as a Redis Cluster master shows its own slots (so a client that asks
/// every master sees each key once). A READONLY connection sees every key held here.
pub struct ServedKeys {
    /// Number of data groups.
    groups: u32,
    /// Led here, by group id.
    led: Vec<bool>,
}

impl ServedKeys {
    /// `None` outside cluster mode and for READONLY connections: every key.
    pub fn for_client(
        server: &crate::server::Server,
        client: &crate::client::Client,
    ) -> Option<ServedKeys> {
        let cl = server.cluster.get()?;
        if client.cluster.readonly {
            return None;
        }
        let led = (0..=cl.groups)
            .map(|g| g > 0 && cl.leadership(raft::GroupId(g)).is_me)
            .collect();
        Some(ServedKeys {
            groups: cl.groups,
            led,
        })
    }

    /// Whether `key` is shown.
    pub fn contains(&self, key: &[u8]) -> bool {
        let g = raft::slot_group(key_slot(key), self.groups);
        self.led.get(g.0 as usize).copied().unwrap_or(false)
    }
}
