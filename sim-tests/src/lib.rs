//! Deterministic simulation of Ember Raft clusters with turmoil: real openraft groups,
//! real RocksDB logs and the real tonic cluster bus, on a simulated network and clock,
//! driven from one seed; faults, an oracle history and a linearizability check.
//!
//! # Layout
//!
//! - `net.rs`: [`net::TurmoilConnector`] (the bus's `Connect` over turmoil TCP) and
//!   [`net::serve_bus`] (a `BusServer` on a turmoil listener).
//! - `node.rs`: one node as a turmoil host: RocksDB dir kept across crashes, `MultiRaft`
//!   of `MemKv` groups, the bus, and a line protocol for clients (writes through
//!   `client_write`, reads through `ensure_linearizable`); [`node::Shared`] is what the
//!   driver sees of the hosts.
//! - `client.rs`: turmoil clients that follow redirects to the leader and record each
//!   operation into the history; the calm phase's final reader.
//! - `history.rs`: [`history::Op`] and the shared [`history::History`].
//! - `checker.rs`: per-key linearizability search (Wing & Gong with memoization) over a
//!   register/counter model; unknown outcomes may or may not have taken effect.
//! - `faults.rs`: seeded partitions (full, one-way, isolating a leader), held links,
//!   crashes with restart from the same disk; healing.
//! - `sim.rs`: [`sim::run`], one seed's chaos phase, calm phase, convergence check and
//!   [`sim::SimReport`].
//! - `bin/sim.rs`: the `sim` binary (`--seeds N`, `--reproduce SEED`).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod checker;
pub mod client;
pub mod faults;
pub mod history;
pub mod net;
pub mod node;
pub mod sim;
