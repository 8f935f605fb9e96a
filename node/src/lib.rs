//! The `ember` node: a Redis-compatible server.
//!
//! # Layout
//! - [`config`]: directives from redis.conf-style files and `--flags`; CONFIG GET/SET rules.
//! - [`server`]: shared state, listeners, worker threads, active expiry, shutdown.
//! - [`conn`]: one connection: read, parse every complete command, execute, write once.
//! - [`balance`]: how many workers serve connections, and moving connections between them.
//! - [`registry`]: the static command table ([`registry::CommandSpec`]) used for dispatch,
//!   arity, COMMAND, key positions and statistics.
//! - [`cmd`]: command families, one file each, each exporting its `COMMANDS` table.
//! - [`exec`]: the run stage every command goes through: handler, AOF, stats, observers.
//! - [`observe`]: SLOWLOG, LATENCY and MONITOR, fed by [`exec`].
//! - [`effects`]: what a write did, declared by its handler (SPOP as SREM ...), for the AOF.
//! - [`blocking`]: clients blocked on keys (BLPOP ...), served by the writer's thread.
//! - [`busy`]: `-BUSY` (and SCRIPT KILL) for the connections beside a busy script.
//! - [`pubsub`]: channels, patterns and mailboxes.
//! - [`obuf`]: `client-output-buffer-limit`: the three client classes and their limits.
//! - [`notify`]: keyspace notifications (notify-keyspace-events) published through pub/sub.
//! - [`tracking`]: client-side caching invalidations (CLIENT TRACKING).
//! - [`watch`]: WATCH bookkeeping; EXEC runs alone behind every worker's gate.
//! - [`evict`]: maxmemory: used-memory gauge, eviction policies and pool, `-OOM`.
//! - [`snapshot`]: fork-less RDB snapshots (SAVE, BGSAVE, save points, load at start-up).
//! - [`script`]: Lua scripting (EVAL, FCALL): sandboxed Lua 5.1 engines, `redis.*`, cjson/bit/cmsgpack.
//! - [`cluster`]: Raft groups over the keyspace: [`cluster::ClusterStateMachine`], key slots.
//! - [`ctx`], [`client`], [`stats`], [`error`]: what handlers see and report.
#![deny(missing_docs)]

pub mod aof;
pub mod balance;
pub mod blocking;
pub mod busy;
pub mod client;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod ctx;
pub mod effects;
pub mod error;
pub mod evict;
pub mod exec;
pub mod notify;
pub mod observe;
pub mod obuf;
pub mod pubsub;
pub mod registry;
pub mod script;
pub mod server;
pub mod snapshot;
pub mod stats;
pub mod tracking;
pub mod watch;
