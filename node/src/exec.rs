//! The execution pipeline's run stage: every command that runs (from a connection, inside
//! EXEC, from a script, a blocked command being served, a Raft entry being applied) runs
//! through [`run_command`] and its variants, which
//!
//! 1. call the handler, with the AOF's ordering and effects recording around it when the
//!    AOF is on ([`crate::aof`], [`crate::effects`]);
//! 2. publish the keyspace events it recorded ([`crate::notify`]);
//! 3. count it (INFO commandstats, the `latency-tracking` histogram);
//! 4. show it to the observers ([`crate::observe`]: SLOWLOG, LATENCY, MONITOR) when it took
//!    at least their gate, one atomic load otherwise;
//! 5. note the keys it wrote (blocked clients, WATCH, client-side caching) and the keys a
//!    tracking client read.
//!
//! The checks before it (arity, auth, pub/sub context, OOM, MULTI queueing) are made by
//! the caller today: `conn::prepare` for a connection, and again in their own way by EXEC,
//! scripts and Raft apply (issue 35 moves them here).

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;

use crate::client::{BlockMode, Client};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::observe::Origin;
use crate::registry::{flags, CommandSpec};
use crate::server::Server;
use crate::stats::WorkerStats;

/// What a handler tells the pipeline beyond its reply.
impl Ctx<'_> {
    /// Shows this command to MONITOR now, before what it runs (EVAL, FCALL and kin, flagged
    /// `skip_monitor` so the pipeline does not show them again after), as Redis does.
    pub fn show_to_monitors(&self, args: Args<'_>) {
        let server = self.server;
        if server.observe.monitors.active() && origin(self.client) == Origin::Client {
            server.observe.monitors.feed(self.client, args, false);
        }
    }

    /// Marks `key` in `db` as written (see [`note_key_written`]) for keys beyond the
    /// command's own key arguments, which the dispatcher handles: MOVE's and COPY's target
    /// database. Also declared as an effect ([`crate::effects::Effects::wrote`]).
    pub fn touched(&mut self, db: usize, key: &[u8]) {
        self.client.fx.wrote(db, key);
        note_key_written(self.server, self.client, db, key);
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
    ctx.stats.count_errors(ctx.out);
    WorkerStats::add(&cstat.calls, 1);
    let t1 = storage::clock::now_ns();
    let dur = t1.saturating_sub(t0);
    WorkerStats::add(&cstat.nsec, dur);
    WorkerStats::add(&ctx.stats.commands, 1);
    if server.live.latency_tracking.load(Relaxed) {
        cstat.record(dur);
    }
    if dur >= server.observe.gate() {
        observed(server, ctx.client, spec, args, dur);
    } else if !ctx.client.redacted.is_empty() {
        ctx.client.redacted.clear();
    }
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

/// Hands a command that took at least the observers' gate to them, and forgets which of
/// its arguments were secret.
#[inline(never)]
fn observed(server: &Server, client: &mut Client, spec: &CommandSpec, args: Args<'_>, dur: u64) {
    server
        .observe
        .after(client, spec, args, dur, origin(client));
    client.redacted.clear();
}

/// Where the command `client` runs came from.
fn origin(client: &Client) -> Origin {
    if client.cluster.from_log {
        Origin::Log
    } else if client.block_mode == BlockMode::Retry {
        Origin::Served
    } else if client.in_script {
        Origin::Script
    } else {
        Origin::Client
    }
}
