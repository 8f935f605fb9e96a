//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! While a client is in MULTI the connection queues its commands (see `conn.rs`); errors
//! found while queueing (unknown command, arity, a command not allowed in a transaction)
//! make EXEC answer EXECABORT. EXEC runs the queue holding every worker's gate
//! ([`crate::server::Server::lock_gates`]), so no command of any other client on any thread
//! runs in between; runtime errors are replied in place and do not stop the rest. A
//! watched key touched since WATCH (or expired since) makes EXEC answer a null reply.

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;

use crate::client::BlockMode;
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::exec::run_command;
use crate::registry::{flags::*, BusyAnswer, ClusterRoute, CommandSpec, Group, TxAnswer, TxChange};
use crate::watch::Watched;

const T: Group = Group::Transactions;

/// Transaction commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL,
        (0, 0, 0),
        T,
        multi,
    )
    .doc("Starts a transaction.", "1.2.0")
    .when_busy(|_, _| BusyAnswer::Transaction(multi_beside_busy)),
    CommandSpec::new(
        "exec",
        1,
        NOSCRIPT
            | LOADING
            | STALE
            | SKIP_SLOWLOG
            | TX_CONTROL
            | EXCLUSIVE
            | RUNS_QUEUED
            | OOM_OK_IN_MULTI,
        (0, 0, 0),
        T,
        exec,
    )
    .doc("Executes all commands in a transaction.", "1.2.0")
    .routed(ClusterRoute::Transaction)
    .when_busy(|_, _| BusyAnswer::Transaction(exec_beside_busy)),
    CommandSpec::new(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL | OOM_OK_IN_MULTI,
        (0, 0, 0),
        T,
        discard,
    )
    .doc("Discards a transaction.", "2.0.0")
    .routed(ClusterRoute::EndWatch)
    .when_busy(|_, _| BusyAnswer::Transaction(discard_beside_busy)),
    CommandSpec::new(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | TX_CONTROL,
        (1, -1, 1),
        T,
        watch,
    )
    .doc(
        "Monitors changes to keys to determine the execution of a transaction.",
        "2.2.0",
    )
    .routed(ClusterRoute::Watch)
    .when_busy(|_, _| BusyAnswer::Transaction(watch_beside_busy)),
    CommandSpec::new(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        (0, 0, 0),
        T,
        unwatch,
    )
    .doc("Forgets about watched keys of a transaction.", "2.2.0")
    .routed(ClusterRoute::EndWatch),
];

// Beside a busy script (see `crate::busy`), given whether the connection is in MULTI:
// what Redis answers, and what it does to the transaction.

fn multi_beside_busy(in_multi: bool, _busy: CmdError) -> TxAnswer {
    if in_multi {
        TxAnswer::Reply(Err(nested()), TxChange::Keep)
    } else {
        TxAnswer::Reply(Ok(()), TxChange::Open)
    }
}

/// EXEC is refused, and the refusal ends the transaction (Redis's execCommandAbort).
fn exec_beside_busy(in_multi: bool, busy: CmdError) -> TxAnswer {
    if in_multi {
        TxAnswer::Reply(Err(exec_abort(&busy)), TxChange::Close)
    } else {
        TxAnswer::Reply(Err(CmdError::err("EXEC without MULTI")), TxChange::Keep)
    }
}

fn discard_beside_busy(in_multi: bool, _busy: CmdError) -> TxAnswer {
    if in_multi {
        TxAnswer::Reply(Ok(()), TxChange::Close)
    } else {
        TxAnswer::Reply(Err(CmdError::err("DISCARD without MULTI")), TxChange::Keep)
    }
}

/// WATCH outside MULTI needs the connection's own state: it waits for the script.
fn watch_beside_busy(in_multi: bool, _busy: CmdError) -> TxAnswer {
    if in_multi {
        TxAnswer::Reply(Err(watch_in_multi()), TxChange::Keep)
    } else {
        TxAnswer::Wait
    }
}

/// The error of an EXEC refused for `why`.
fn exec_abort(why: &CmdError) -> CmdError {
    let why = why.to_string();
    CmdError::raw(format!(
        "EXECABORT Transaction discarded because of: {}",
        why.strip_prefix('-').unwrap_or(&why)
    ))
}

fn watch_in_multi() -> CmdError {
    CmdError::err("WATCH inside MULTI is not allowed")
}

fn nested() -> CmdError {
    CmdError::err("MULTI calls can not be nested")
}

fn multi(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(nested());
    }
    ctx.client.begin_multi();
    ctx.out.ok();
    Ok(())
}

fn discard(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.client.end_multi();
    unwatch_all(ctx);
    ctx.out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(watch_in_multi());
    }
    let db = ctx.db();
    for key in args.iter().skip(1) {
        if ctx
            .client
            .watched
            .iter()
            .any(|w| w.db == db && w.key == key)
        {
            continue;
        }
        let deadline = {
            let mut g = ctx.lock(key);
            g.peek().and_then(|e| e.expire_at())
        };
        ctx.server.watches.watch(&ctx.client.info, db, key);
        ctx.client.watched.push(Watched {
            db,
            key: key.to_vec(),
            deadline,
        });
    }
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    unwatch_all(ctx);
    ctx.out.ok();
    Ok(())
}

/// Forgets every watched key of the client.
pub fn unwatch_all(ctx: &mut Ctx<'_>) {
    ctx.client.unwatch_all(&ctx.server.watches);
}

fn exec(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let Some(multi) = ctx.client.end_multi() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    // Beside a busy script EXEC is refused before anything else, as Redis refuses it.
    let busy = ctx.server.busy.load(Relaxed);
    if busy != 0 {
        unwatch_all(ctx);
        return Err(exec_abort(&crate::server::busy_error(busy)));
    }
    if multi.dirty {
        unwatch_all(ctx);
        return Err(CmdError::raw(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let server = ctx.server;
    // Beside a busy script the transaction is refused and ends (Redis's execCommandAbort).
    let gates = match server.lock_gates_or_busy() {
        Ok(g) => g,
        Err(busy) => {
            unwatch_all(ctx);
            return Err(exec_abort(&busy));
        }
    };
    let now = ctx.now;
    let aborted = ctx.client.info.watch_dirty.load(Relaxed)
        || ctx
            .client
            .watched
            .iter()
            .any(|w| w.deadline.is_some_and(|d| d <= now));
    unwatch_all(ctx);
    if aborted {
        drop(gates);
        ctx.out.null_array();
        return Ok(());
    }
    ctx.out.array(multi.queued.len());
    let saved = ctx.client.block_mode;
    ctx.client.block_mode = BlockMode::NoBlock;
    for q in &multi.queued {
        let args = q.args.args();
        let mark = ctx.out.len();
        if let Err(e) = run_command(ctx, q.cmd_index, args) {
            ctx.out.truncate(mark);
            ctx.out.error(&e.to_string());
        }
    }
    ctx.client.block_mode = saved;
    drop(gates);
    Ok(())
}
