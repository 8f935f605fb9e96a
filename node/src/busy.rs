//! Clients beside a busy script. A script (or function) runs on its connection's worker
//! thread, so the other connections that worker serves cannot run their loop until it
//! ends. Past `busy-reply-threshold` the script's hook calls [`answer`] every few
//! milliseconds instead, as Redis's `processEventsWhileBlocked` does: for each connection
//! of this worker at rest (nothing buffered, every reply written, waiting for input), it
//! peeks at the socket and answers the complete commands there, in order:
//!
//! - `-BUSY ... You can only call SCRIPT KILL or SHUTDOWN NOSAVE.` for a command that may
//!   not run meanwhile (Redis's earlier errors first: unknown command, wrong arity, and in
//!   cluster mode MOVED or CROSSSLOT for keys this node does not lead);
//! - SCRIPT KILL, FUNCTION KILL and FUNCTION STATS run; SHUTDOWN NOSAVE shuts down.
//!
//! - MULTI, EXEC, DISCARD and WATCH answer as Redis's do beside a busy script: MULTI opens
//!   a transaction, a refused command inside one makes its EXEC abort, EXEC itself is
//!   refused with `-EXECABORT ... BUSY ...` and ends it, DISCARD ends it. What they do to
//!   the transaction is left in [`ClientInfo::busy_tx`], which the connection applies
//!   before it runs anything else.
//!
//! Only the answered commands' bytes are taken from the socket. The first command it does
//! not answer this way (AUTH, CLIENT, ... the other `allow-busy` ones, which a connection
//! in MULTI would queue), an incomplete one, and all after them wait for the connection's
//! own loop, after the script. So do connections not authenticated, with CLIENT REPLY
//! OFF/SKIP, subscribed, or (cluster mode) with READONLY or ASKING set.
//! Connections on the other workers get `-BUSY` from their own loop (their gate is held).
//!
//! A connection that ran its commands yields before it writes the replies (so a worker's
//! replies leave in a burst): one caught there when a script starts would hold its replies
//! until the script ends. So a script (any EXCLUSIVE command) first lets the connections of
//! its worker that hold replies write them ([`settle`]).

use std::cell::Cell;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;

use resp::{Args, Limits, Protocol, ReplyWriter, RequestKind, RequestParser};

use crate::client::{ClientInfo, BUSY_TX_CLOSED, BUSY_TX_DIRTY, BUSY_TX_OPEN};
use crate::error::CmdError;
use crate::registry::{flags, BusyAnswer, TxAnswer, TxChange};
use crate::server::Server;
use crate::stats::WorkerStats;

/// Most bytes of a connection's input looked at in one pass.
const PEEK: usize = 16 * 1024;

/// Most turns [`settle`] gives the other connections.
const SETTLE_ROUNDS: usize = 4;

thread_local! {
    /// Connections of this worker holding replies they have not written ([`Holding`]).
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// Counts a connection of this worker as holding unwritten replies while it lives.
pub struct Holding(());

impl Holding {
    /// Starts holding (the connection is about to yield before it writes).
    #[inline]
    pub fn new() -> Self {
        HELD.with(|h| h.set(h.get() + 1));
        Holding(())
    }
}

impl Default for Holding {
    fn default() -> Self {
        Holding::new()
    }
}

impl Drop for Holding {
    #[inline]
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get().saturating_sub(1)));
    }
}

/// True when another connection of this worker holds unwritten replies.
#[inline]
pub fn others_hold() -> bool {
    HELD.with(|h| h.get()) > 0
}

/// Gives the connections of this worker that hold replies turns to write them (a few at
/// most: one that keeps getting input keeps yielding).
pub async fn settle() {
    for _ in 0..SETTLE_ROUNDS {
        if !others_hold() {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Answers what the at-rest connections of `worker` sent while a script of `kind`
/// ([`crate::server::BUSY_SCRIPT`] or [`crate::server::BUSY_FUNCTION`]) runs on it: called
/// from the script's hook, on that worker's thread, so none of those connections runs.
pub fn answer(server: &Server, worker: usize, kind: u8) {
    let Some(stats) = server.workers.get(worker) else {
        return;
    };
    let mut buf = Vec::new();
    for info in server.clients.all() {
        // `rest` is stored (Release) after `worker`: seen set, the worker is current.
        if info.rest.load(Acquire)
            && info.worker.load(Relaxed) == worker
            && !info.killed.load(Relaxed)
        {
            if buf.is_empty() {
                buf = vec![0u8; PEEK];
            }
            answer_one(server, stats, &info, kind, &mut buf);
        }
    }
}

/// What the hook does with one complete command.
enum Action {
    /// Reply this and go on with the next command.
    Reply(Result<(), CmdError>),
    /// FUNCTION STATS: its reply, and go on with the next command.
    Stats,
    /// SHUTDOWN NOSAVE: no reply; the server shuts down.
    Shutdown,
    /// A transaction control command: its reply and what it does to the transaction.
    Tx(Result<(), CmdError>, TxChange),
    /// Leave it (and everything after it) to the connection's loop.
    Leave,
}

/// [`answer`] for one connection; `buf` ([`PEEK`] bytes) is scratch space.
fn answer_one(
    server: &Server,
    stats: &WorkerStats,
    info: &Arc<ClientInfo>,
    kind: u8,
    buf: &mut [u8],
) {
    let Some(n) = recv(info.fd, buf, libc::MSG_PEEK) else {
        return;
    };
    let mut parser = RequestParser::new(Limits::default());
    let mut spans = Vec::new();
    let proto = if info.resp.load(Relaxed) == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    };
    let mut out = ReplyWriter::new(proto);
    let mut taken = 0;
    let mut shutdown = false;
    let mut tx = info.busy_tx.load(Relaxed);
    while taken < n && !shutdown {
        let in_multi = (info.multi_len.load(Relaxed) >= 0 && tx & BUSY_TX_CLOSED == 0)
            || tx & BUSY_TX_OPEN != 0;
        let Ok(Some((consumed, how))) = parser.parse(&buf[taken..n], &mut spans) else {
            break;
        };
        if !spans.is_empty() {
            let data = match how {
                RequestKind::Inline => parser.inline_buf(),
                RequestKind::Multibulk => &buf[taken..n],
            };
            match decide(server, Args::new(data, &spans), kind, in_multi) {
                Action::Reply(r) => {
                    // A command refused inside MULTI makes its EXEC abort (Redis's
                    // flagTransaction).
                    if r.is_err() && in_multi {
                        tx |= BUSY_TX_DIRTY;
                    }
                    write_result(&mut out, stats, r);
                }
                Action::Stats => crate::cmd::scripting::write_stats(server, &mut out),
                Action::Tx(r, change) => {
                    write_result(&mut out, stats, r);
                    match change {
                        TxChange::Keep => {}
                        TxChange::Open => tx = (tx & BUSY_TX_CLOSED) | BUSY_TX_OPEN,
                        TxChange::Close => tx = BUSY_TX_CLOSED,
                    }
                }
                Action::Shutdown => shutdown = true,
                Action::Leave => break,
            }
        }
        taken += consumed;
    }
    if taken == 0 {
        return;
    }
    info.busy_tx.store(tx, Relaxed);
    // The bytes answered leave the socket (they are there: the peek saw them).
    let mut left = taken;
    while left > 0 {
        match recv(info.fd, &mut buf[..left], 0) {
            Some(k) if k > 0 => left -= k,
            _ => break,
        }
    }
    info.touch();
    if shutdown {
        server.snapshots.saved_for_shutdown.store(true, Relaxed);
        server.request_shutdown();
    }
    let reply = out.buffer();
    let sent = send(info.fd, reply);
    if sent < reply.len() {
        // The client does not read: the rest goes out first when its loop runs again, and
        // until then it is not answered here.
        info.rest.store(false, Relaxed);
        info.busy_out.lock().extend_from_slice(&reply[sent..]);
        info.busy_pending.store(true, Relaxed);
        // It waits for input, which may not come before these replies do: wake it (it
        // runs once the script ends).
        info.waker.wake();
    }
}

/// Writes `r` as the reply (+OK or the error, counted).
fn write_result(out: &mut ReplyWriter, stats: &WorkerStats, r: Result<(), CmdError>) {
    match r {
        Ok(()) => out.ok(),
        Err(e) => {
            out.error(&e.to_string());
            stats.count_errors(out);
        }
    }
}

/// How the hook handles `args` while a script of `kind` is busy (`in_multi`: its
/// connection is in a transaction).
fn decide(server: &Server, args: Args<'_>, kind: u8, in_multi: bool) -> Action {
    let reg = &server.registry;
    let idx = match crate::conn::resolve(server, args) {
        Ok(i) => i,
        Err(e) => return Action::Reply(Err(e)),
    };
    let entry = reg.entry(idx);
    if !entry.spec.arity_ok(args.len()) {
        return Action::Reply(Err(CmdError::Arity(entry.full_name.clone())));
    }
    // Redis redirects (MOVED, CROSSSLOT) before it answers -BUSY.
    if let Some(cl) = server.cluster.get() {
        if let Some(e) = crate::cluster::route::redirect_now(cl, entry.spec, args) {
            return Action::Reply(Err(e));
        }
    }
    let answer = entry.spec.on_busy.map(|f| f(server, args));
    if let Some(BusyAnswer::Transaction(f)) = answer {
        return match f(in_multi, crate::server::busy_error(kind)) {
            TxAnswer::Reply(r, change) => Action::Tx(r, change),
            TxAnswer::Wait => Action::Leave,
        };
    }
    if !entry.spec.has(flags::ALLOW_BUSY) {
        return Action::Reply(Err(crate::server::busy_error(kind)));
    }
    if in_multi {
        // Queued by the connection, after the script.
        return Action::Leave;
    }
    match answer {
        Some(BusyAnswer::Reply(r)) => Action::Reply(r),
        Some(BusyAnswer::Refuse) => Action::Reply(Err(crate::server::busy_error(kind))),
        Some(BusyAnswer::Stats) => Action::Stats,
        Some(BusyAnswer::Shutdown) => Action::Shutdown,
        Some(BusyAnswer::Wait) | Some(BusyAnswer::Transaction(_)) | None => Action::Leave,
    }
}

/// `recv(2)` without waiting: the bytes read, or `None` on end of input, error or nothing.
fn recv(fd: i32, buf: &mut [u8], flags: i32) -> Option<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call;
    // `fd` is the connection's socket, open while its `rest` flag is set (the connection's
    // task, on this thread, clears it before it closes the socket).
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            flags | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

/// `send(2)` without waiting: the bytes sent (0 on error or a full socket buffer).
fn send(fd: i32, buf: &[u8]) -> usize {
    if buf.is_empty() {
        return 0;
    }
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes; `fd` as in [`recv`].
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// What a nonblocking socket holds now.
    fn read_all(mut r: &UnixStream) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    /// The replies a socket cannot take at once are kept for the connection, which stops
    /// being answered here: every answered command has its reply, written or kept, in
    /// order, and the commands after them stay in the socket.
    #[test]
    fn replies_the_socket_cannot_take_are_kept() {
        let server = Arc::new(Server::new(crate::config::Config::default(), 1, None, None));
        let (ours, mut theirs) = UnixStream::pair().expect("socketpair");
        ours.set_nonblocking(true).expect("nonblocking");
        theirs.set_nonblocking(true).expect("nonblocking");
        // A small send buffer on the server's side: a few -BUSY replies fill it.
        let small: libc::c_int = 4096;
        // SAFETY: `ours` is an open socket; the option value is a c_int of the given size.
        let rc = unsafe {
            libc::setsockopt(
                ours.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let mut sent = 0;
        for _ in 0..1000 {
            match theirs.write(ping) {
                Ok(n) => {
                    assert_eq!(n, ping.len());
                    sent += 1;
                }
                Err(_) => break,
            }
        }
        assert!(sent > 200, "{sent} commands written");
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let info = Arc::new(ClientInfo::new(7, addr, addr, ours.as_raw_fd()));
        info.worker.store(0, Relaxed);
        info.rest.store(true, Relaxed);
        server.clients.add(info.clone());
        answer(&server, 0, crate::server::BUSY_SCRIPT);
        assert!(info.busy_pending.load(Relaxed), "replies were kept");
        assert!(!info.rest.load(Relaxed), "no longer answered here");
        let kept = info.busy_out.lock().clone();
        assert!(!kept.is_empty());
        // What the socket took, then what was kept: whole -BUSY replies, one per command
        // taken from the socket.
        let all = [read_all(&theirs), kept.clone()].concat();
        let text = String::from_utf8(all).expect("text");
        let replies: Vec<&str> = text.split_terminator("\r\n").collect();
        assert!(
            replies.iter().all(|r| r.starts_with("-BUSY ")),
            "{replies:?}"
        );
        let left = read_all(&ours);
        assert_eq!(left.len() % ping.len(), 0, "whole commands stay");
        assert_eq!(replies.len() + left.len() / ping.len(), sent);
        // A second pass leaves the connection alone.
        theirs.write_all(ping).expect("write");
        answer(&server, 0, crate::server::BUSY_SCRIPT);
        assert_eq!(*info.busy_out.lock(), kept);
        server.clients.remove(7);
    }
}
