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
//!
//! # One seed, one run
//!
//! The seed drives turmoil (`Builder::rng_seed`: message latencies, host order), the
//! fault injector, every client's choices and each node's Raft election timeout.
//! openraft draws election timeouts from `rand::thread_rng`, which cannot be seeded, so
//! each node gets a one-millisecond-wide range whose start comes from the seed (and the
//! node's boot count). The same seed gives the same history and final logs across runs
//! and processes (`tests/sim.rs` checks it; `sim --reproduce` prints a fingerprint).
//! One source is left unseeded: tokio's `select!` fairness RNG (seedable only under
//! `tokio_unstable`), which matters only when two branches are ready in one poll.
//!
//! # What is checked
//!
//! After every step: no two replicas apply different entries at one index, and no
//! replica's applied index goes back while it runs. After the calm phase: every node is
//! running, every group has one leader all nodes follow, every replica applied the same
//! log to the same state, the history is linearizable per key, and the final reads show
//! the replicas' state. openraft 0.9 identifies leaders by (term, node), so several
//! leaders in one term are allowed and not reported.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod checker;
pub mod client;
pub mod faults;
pub mod history;
pub mod net;
pub mod node;
pub mod sim;
