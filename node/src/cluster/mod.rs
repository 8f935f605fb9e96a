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
//! Not here yet: routing a client's command to its group's leader, `-MOVED`/`-ASK`,
//! `CLUSTER SLOTS`/`SHARDS`/`NODES`, the cluster bus; see DESIGN.md, "The path of one
//! command", step 3.

mod state_machine;

pub use raft::key_slot;
pub use state_machine::encode_command;
pub use state_machine::run_at;
pub use state_machine::ClusterStateMachine;
