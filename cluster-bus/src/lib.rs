//! The cluster bus: tonic (gRPC over HTTP/2) services between Ember nodes. Every Raft RPC
//! of every group two nodes share travels over one connection, each message naming its
//! group; payloads are openraft's own types encoded with postcard.
//!
//! # Layout
//!
//! - `proto/bus.proto`: the `RaftBus` service (`Raft`, `Ping`), compiled by `build.rs`
//!   with protox (no protoc) and tonic-prost-build into [`pb`].
//! - `wire.rs`: postcard encoding of the payloads; decoding rejects trailing bytes.
//! - `server.rs`: [`BusServer`], which hands each incoming RPC to the named group's
//!   `Raft` (a lookup closure or a node's [`raft::MultiRaft`]) and answers an error for
//!   an unknown group or bytes that do not decode; serves a `TcpListener` or any stream of
//!   connections ([`BusServer::serve_with_incoming_shutdown`], for turmoil);
//!   [`RunningBus`] is a spawned server.
//! - `transport.rs`: [`BusTransport`], raft's [`raft::GroupTransport`] over one lazily
//!   made tonic `Channel` per peer address, dropped and made anew after a timeout or a
//!   transport error; [`BusConfig`] holds its timeouts.
//! - `connect.rs`: [`Connect`], the injectable connector (how a byte stream to
//!   `host:port` is opened), and [`TcpConnector`], the default.
//! - `error.rs`: [`Error`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod connect;
mod error;
mod server;
mod transport;
mod wire;

/// The generated protobuf messages, client and server of `proto/bus.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("ember.bus.v1");
}

pub use connect::Connect;
pub use connect::TcpConnector;
pub use error::Error;
pub use server::BusCounters;
pub use server::BusServer;
pub use server::BusService;
pub use server::RunningBus;
pub use transport::BusConfig;
pub use transport::BusTransport;

/// The largest message the bus sends or accepts (AppendEntries batches, snapshot chunks).
pub const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;
