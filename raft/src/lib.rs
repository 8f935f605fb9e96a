//! openraft glue for Ember: the type config, a RocksDB log store, snapshots, and a
//! multi-group manager, generic over the data ([`StateMachine`]) and the network
//! ([`GroupTransport`]). No gRPC here: `cluster-bus` implements the transport, `node`
//! implements the state machine.
//!
//! # Layout
//!
//! - `typ.rs`: [`TypeConfig`], [`GroupId`], [`NodeId`], [`Node`], [`Request`],
//!   [`Response`] and aliases of openraft's generic types.
//! - `state_machine.rs`: the [`StateMachine`] trait the node implements.
//! - `db.rs`: [`RaftDb`], one RocksDB per node; column families `logs` and `meta`, every
//!   key prefixed by its group id (big-endian), so all groups share one DB and one WAL.
//! - `codec.rs`: key layout, postcard value encoding, zstd snapshot compression, and the
//!   format versions of entries, snapshots and the database ([`ENTRY_FORMAT`],
//!   [`SNAPSHOT_FORMAT`], [`DB_FORMAT`]; the rule is in that module's docs).
//! - `log_store.rs`: [`RocksLogStore`], openraft's `RaftLogStorage` for one group (log,
//!   vote, committed, last purged); passes `openraft::testing::Suite`.
//! - `sm_store.rs`: [`GroupStateMachine`], openraft's `RaftStateMachine` over a user
//!   [`StateMachine`] (last applied, membership, snapshots stored in the DB);
//!   [`StateHandle`] reads the state.
//! - `network.rs`: [`GroupTransport`] (send a group's RPC to a node) and openraft's
//!   network factory over it.
//! - `local.rs`: [`LocalRouter`], an in-process transport for tests: isolation faults, and
//!   optionally every RPC round-tripped through the wire encoding.
//! - `multi.rs`: [`MultiRaft`], a node's groups: open, look up, slot to group, close.
//! - `slots.rs`: 16,384 slots to contiguous group ranges; [`key_slot`], key to slot.
//! - `kv.rs`: [`MemKv`], a tiny key-value state machine for tests.
//! - `error.rs`: [`Error`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod codec;
mod db;
mod error;
pub mod kv;
pub mod local;
mod log_store;
mod multi;
mod network;
pub mod slots;
mod sm_store;
mod state_machine;
mod typ;

pub use codec::DB_FORMAT;
pub use codec::DB_FORMAT_KEY;
pub use codec::ENTRY_FORMAT;
pub use codec::SNAPSHOT_FORMAT;
pub use codec::SNAPSHOT_MAGIC;
pub use db::DbOptions;
pub use db::RaftDb;
pub use error::Error;
pub use kv::MemKv;
pub use local::LocalRouter;
pub use local::LocalTransport;
pub use log_store::RocksLogStore;
pub use multi::Group;
pub use multi::MultiRaft;
pub use network::GroupNetwork;
pub use network::GroupNetworkFactory;
pub use network::GroupTransport;
pub use slots::group_slots;
pub use slots::key_slot;
pub use slots::slot_group;
pub use slots::SLOTS;
pub use sm_store::GroupStateMachine;
pub use sm_store::StateHandle;
pub use state_machine::StateMachine;
pub use typ::*;

/// openraft itself, for its config, metrics and error types.
pub use openraft;
