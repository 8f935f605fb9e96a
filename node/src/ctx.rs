//! The context a command handler runs in: the server, the calling client, the reply
//! writer and the command's timestamp.

use std::sync::Arc;

use resp::{Args, ReplyWriter};
use storage::{KeyGuard, Keyspace, MultiGuard, Parked};

use crate::blocking::{BlockRequest, TimeoutReply};
use crate::client::{BlockMode, Client};
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags, CommandSpec};
use crate::server::Server;
use crate::stats::WorkerStats;

/// Everything a handler may touch.
pub struct Ctx<'a> {
    /// The node.
    pub server: &'a Arc<Server>,
    /// The calling connection.
    pub client: &'a mut Client,
    /// Where the reply goes.
    pub out: &'a mut ReplyWriter,
    /// This worker's counters.
    pub stats: &'a WorkerStats,
    /// The command's time, ns since the epoch (expiry is evaluated against it).
    pub now: u64,
    /// Where the command's random choices come from (SPOP, SRANDMEMBER, HRANDFIELD,
    /// ZRANDMEMBER): the thread RNG on a single node, a leader-chosen seed in a Raft apply.
    pub rng: CmdRng,
    /// Where [`Ctx::lock`] keeps its shard locked after the guard is dropped, for the next
    /// command of the batch (a BATCH_LOCK command in a single-node batch; see
    /// [`Parked`]); None everywhere else.
    pub park: Option<&'a Parked<'a>>,
}

/// The random source of one command (and of the commands a script or EXEC runs for it).
///
/// A single node draws from the thread RNG, as before; a replicated write draws from a
/// sequence fixed by the seed the leader put in its log entry, so every replica makes the
/// same choices (see DESIGN.md, "Determinism of writes").
#[derive(Debug, Clone)]
pub enum CmdRng {
    /// `rand::rng()`, the thread's RNG.
    Thread,
    /// SplitMix64 from a seed: its own algorithm here, so the sequence a seed gives never
    /// changes with a `rand` upgrade (replicas on different builds still agree).
    Seeded(u64),
}

impl CmdRng {
    /// A deterministic source for `seed`.
    pub fn seeded(seed: u64) -> Self {
        CmdRng::Seeded(seed)
    }
}

impl rand::RngCore for CmdRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        match self {
            CmdRng::Thread => rand::rng().next_u64(),
            CmdRng::Seeded(state) => {
                *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            }
        }
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

impl<'a> Ctx<'a> {
    /// The keyspace (borrowed from the server, not from the context).
    pub fn ks(&self) -> &'a Keyspace {
        &self.server.keyspace
    }

    /// Locks `key` in the client's database.
    pub fn lock<'k>(&self, key: &'k [u8]) -> KeyGuard<'a, 'k> {
        match self.park {
            Some(p) => self
                .server
                .keyspace
                .lock_parked(p, self.client.db, key, self.now),
            None => self.server.keyspace.lock(self.client.db, key, self.now),
        }
    }

    /// Locks the shards of all `keys` (ascending order) for an atomic multi-key command.
    pub fn lock_keys<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> MultiGuard<'a> {
        if let Some(p) = self.park {
            p.release();
        }
        self.server.keyspace.lock_keys(keys, self.now)
    }

    /// The client's database.
    pub fn db(&self) -> usize {
        self.client.db
    }

    /// Asks to block on `keys` until `deadline` (a blocking command found nothing to take).
    /// Inside MULTI/EXEC or a script it answers `on_timeout` at once, as Redis does.
    pub fn block(
        &mut self,
        keys: Vec<Vec<u8>>,
        deadline: Option<std::time::Instant>,
        on_timeout: TimeoutReply,
    ) {
        if self.client.block_mode == BlockMode::NoBlock {
            on_timeout.write(self.out);
            self.client.fx.nothing();
            return;
        }
        self.client.block_request = Some(BlockRequest {
            keys,
            deadline,
            on_timeout,
            rewrite: None,
            serve_errors: false,
        });
    }

    /// As [`Ctx::block`], with the arguments to run again (`rewrite`) and whether an error
    /// from such a run is delivered rather than kept blocked (`serve_errors`). Returns false
    /// (after answering `on_timeout`) inside MULTI/EXEC or a script.
    pub fn block_with(&mut self, req: BlockRequest) -> bool {
        if self.client.block_mode == BlockMode::NoBlock {
            req.on_timeout.write(self.out);
            self.client.fx.nothing();
            return false;
        }
        self.client.block_request = Some(req);
        true
    }

    /// Marks `key` in `db` as written (see [`note_key_written`]) for keys beyond the
    /// command's own key arguments, which the dispatcher handles: MOVE's and COPY's target
    /// database. Also declared as an effect ([`crate::effects::Effects::wrote`]).
    pub fn touched(&mut self, db: usize, key: &[u8]) {
        self.client.fx.wrote(db, key);
        note_key_written(self.server, self.client, db, key);
    }

    /// Publishes keyspace event `event` of `class` (see [`crate::notify`]) on `key` in the
    /// client's database, after the lazy expiries and new keys this command caused so far.
    /// One atomic load while the class is off.
    #[inline]
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.notify_db(class, event, key, self.client.db);
    }

    /// As [`Ctx::notify`] for a key in database `db` (MOVE, COPY ... DB).
    pub fn notify_db(&self, class: u32, event: &str, key: &[u8], db: usize) {
        if self.server.notify.wants(class) {
            crate::notify::flush_recorded(self.server);
            self.server
                .notify
                .publish(self.server, class, event, key, db);
        }
    }

    /// Counts a lookup of `key` by a read command: a hit, or a miss (with its `keymiss`
    /// event, as Redis's lookupKeyRead).
    pub fn hit_key(&self, found: bool, key: &[u8]) {
        self.hit(found);
        if !found {
            self.keymiss(key);
        }
    }

    /// Publishes the `keymiss` event of a read lookup of `key` that found nothing.
    pub fn keymiss(&self, key: &[u8]) {
        self.notify(crate::notify::KEY_MISS, "keymiss", key);
    }

    /// Counts a keyspace hit or miss (INFO keyspace_hits / keyspace_misses).
    pub fn hit(&self, found: bool) {
        WorkerStats::add(
            if found {
                &self.stats.hits
            } else {
                &self.stats.misses
            },
            1,
        );
    }
}

/// Runs registry entry `idx` with `args` in `ctx` (the command's checks already done),
/// counts it, records the keys a successful write touched (see [`note_writes`]) and, with
/// the AOF on, appends what it did (see [`crate::aof`]).
pub fn run_command(ctx: &mut Ctx<'_>, idx: usize, args: Args<'_>) -> CmdResult {
    run_command_since(ctx, idx, args, storage::clock::now_ns()).0
}

/// As [`run_command`] for a command whose time `t0` (ns since the epoch) was read just
/// before it: the top level passes the reading its `ctx.now` came from, so one clock read
/// serves both. Also returns the clock reading taken when the command finished (its time
/// in INFO commandstats runs from `t0` to there), which the caller may reuse as the next
/// command's time while nothing else ran in between.
pub fn run_command_since(
    ctx: &mut Ctx<'_>,
    idx: usize,
    args: Args<'_>,
    t0: u64,
) -> (CmdResult, u64) {
    run_command_inline(ctx, idx, args, t0)
}

/// [`run_command_since`], inlined where the connection loop runs a command (a call less,
/// and its register saves, per command).
#[inline(always)]
pub(crate) fn run_command_inline(
    ctx: &mut Ctx<'_>,
    idx: usize,
    args: Args<'_>,
    t0: u64,
) -> (CmdResult, u64) {
    let spec = ctx.server.registry.entry(idx).spec;
    let cstat = &ctx.stats.cmd[idx];
    // The command's BCAST invalidations leave together when it ends.
    let server = ctx.server;
    let _bcast = server.tracking.batch();
    let r = if ctx.server.aof.on() {
        match run_logged(ctx, idx, args, spec) {
            Ok(r) => r,
            Err(e) => return (Err(e), t0),
        }
    } else {
        run_handler(ctx, args, spec)
    };
    crate::notify::flush_recorded(ctx.server);
    WorkerStats::add(&cstat.calls, 1);
    let t1 = storage::clock::now_ns();
    WorkerStats::add(&cstat.nsec, t1.saturating_sub(t0));
    WorkerStats::add(&ctx.stats.commands, 1);
    if r.is_err() {
        WorkerStats::add(&cstat.failed, 1);
    } else {
        note_writes(ctx.server, ctx.client, spec, &args);
        note_reads(ctx.server, ctx.client, spec, &args);
    }
    (r, t1)
}

/// Calls `spec`'s handler.
#[inline(always)]
fn run_handler(ctx: &mut Ctx<'_>, args: Args<'_>, spec: &CommandSpec) -> CmdResult {
    match spec.handler {
        Some(h) => h(ctx, args),
        None => Err(CmdError::err("no handler")),
    }
}

/// The handler call of [`run_command_inline`] with the AOF on, out of line: the command
/// is appended to the AOF (see [`crate::aof`]); Err when it may not run (MISCONF).
#[inline(never)]
fn run_logged(
    ctx: &mut Ctx<'_>,
    idx: usize,
    args: Args<'_>,
    spec: &CommandSpec,
) -> Result<CmdResult, CmdError> {
    let aof = crate::aof::begin(ctx.server, &mut ctx.now, spec)?;
    if aof.as_ref().is_some_and(|s| s.records()) {
        ctx.client.fx.start();
    }
    let r = run_handler(ctx, args, spec);
    if let Some(scope) = aof {
        crate::aof::end(ctx, scope, idx, args, r.is_ok());
    }
    Ok(r)
}

/// After a successful read-only command of a tracking client (default mode): remembers its
/// keys, unless OPTIN without CLIENT CACHING YES or OPTOUT with CLIENT CACHING NO. Inline
/// as far as the check for tracking.
#[inline(always)]
fn note_reads(server: &Server, client: &Client, spec: &CommandSpec, args: &Args<'_>) {
    if client.tracking.is_some() {
        note_tracked_read(server, client, spec, args);
    }
}

/// [`note_reads`] for a tracking client, out of line.
#[inline(never)]
fn note_tracked_read(server: &Server, client: &Client, spec: &CommandSpec, args: &Args<'_>) {
    let Some(t) = &client.tracking else {
        return;
    };
    if !spec.has(flags::READONLY) || t.opts.bcast {
        return;
    }
    if (t.opts.optin && !t.caching) || (t.opts.optout && t.caching) {
        return;
    }
    // A script's read tracks the keys the script declared, not the ones it read; the
    // read-only script commands themselves track nothing (Redis 7.0).
    if let Some(keys) = &client.script_keys {
        if !keys.is_empty() {
            server.tracking.remember(client.id(), keys.iter().cloned());
        }
        return;
    }
    if spec.group == crate::registry::Group::Scripting {
        return;
    }
    let keys = spec.key_positions(args);
    if !keys.is_empty() {
        server
            .tracking
            .remember(client.id(), keys.into_iter().map(|p| args.arg(p).to_vec()));
    }
}

/// After a successful write: its key arguments are ready for blocked clients and touched
/// for WATCH (one atomic load each when nobody blocks or watches). A command that asked to
/// block wrote nothing.
#[inline]
pub fn note_writes(server: &Server, client: &mut Client, spec: &CommandSpec, args: &Args<'_>) {
    if spec.has(flags::WRITE) && client.block_request.is_none() {
        note_written(server, client, spec, args);
    }
}

/// [`note_writes`] for a write that ran, out of line (reads skip it).
#[inline(never)]
fn note_written(server: &Server, client: &mut Client, spec: &CommandSpec, args: &Args<'_>) {
    if !server.blocking.active()
        && !server.watches.active()
        && !server.tracking.active()
        && !cluster_pops_wait(server)
    {
        return;
    }
    let db = client.db;
    for p in spec.key_positions(args) {
        note_key_written(server, client, db, args.arg(p));
    }
}

/// Whether a cluster-mode connection waits in a blocking pop ([`crate::cluster::block`]).
fn cluster_pops_wait(server: &Server) -> bool {
    server.cluster.get().is_some_and(|cl| cl.waiters.active())
}

/// `client` wrote `key` in `db`: it is ready for clients blocked on it (single-node waiters,
/// and cluster-mode pops waiting on this node, which applies every write of its groups),
/// touched for WATCH and invalidated for client-side caching (each one atomic load while
/// unused).
pub fn note_key_written(server: &Server, client: &mut Client, db: usize, key: &[u8]) {
    if server.blocking.active() {
        client.ready_keys.push((db, key.to_vec()));
    }
    if let Some(cl) = server.cluster.get().filter(|cl| cl.waiters.active()) {
        cl.waiters.written(key);
    }
    server.watches.touch(db, key);
    server.tracking.invalidate(client.id(), key);
}
