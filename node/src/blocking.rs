//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN, ...), served the way Redis 7.2 does.
//!
//! A blocking command first tries to serve itself. When it cannot, its handler calls
//! [`Ctx::block`](crate::ctx::Ctx::block) and the connection registers a [`Waiter`]: the
//! command's own arguments, kept to run again later. Every write command marks its keys
//! *ready* (only while someone is blocked: one atomic load otherwise); once the write has
//! released its locks, the writing thread runs the waiters of each ready key again, in FIFO
//! order, on their behalf (so a push is handed to the longest-waiting client before any
//! other command can take it, on whatever thread either client lives). A waiter that is
//! served gets its reply bytes through a oneshot channel; the rest stay blocked.
//!
//! Lock order: the registry mutex, then key shards (handlers run under the registry lock).
//! Nothing takes the registry lock while holding a shard lock.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use resp::{Args, OwnedArgs, Protocol, ReplyWriter};
use storage::clock;
use tokio::sync::oneshot;

use crate::client::{BlockMode, Client, ClientInfo};
use crate::ctx::{CmdRng, Ctx};
use crate::exec::run_command;
use crate::server::Server;
use crate::stats::WorkerStats;

/// What a blocked command answers when it times out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// A null array (BLPOP, BZPOPMIN, BLMPOP, ...).
    NullArray,
    /// A null bulk string (BLMOVE, BRPOPLPUSH).
    Null,
}

impl TimeoutReply {
    /// Writes the reply.
    pub fn write(self, out: &mut ReplyWriter) {
        match self {
            TimeoutReply::NullArray => out.null_array(),
            TimeoutReply::Null => out.null(),
        }
    }
}

/// A handler's request to block: the keys to wait on and when to give up.
#[derive(Debug)]
pub struct BlockRequest {
    /// Keys in the client's database.
    pub keys: Vec<Vec<u8>>,
    /// When to time out; `None` waits forever.
    pub deadline: Option<Instant>,
    /// The reply on timeout.
    pub on_timeout: TimeoutReply,
    /// Arguments to run again instead of the original ones (XREAD turns `$` into the
    /// stream's last id at the time it blocks).
    pub rewrite: Option<Vec<Vec<u8>>>,
    /// Deliver an error the command gives when run again (XREADGROUP on a deleted stream
    /// or group) instead of staying blocked.
    pub serve_errors: bool,
}

/// How a blocked client is woken.
#[derive(Debug)]
pub enum Wake {
    /// Served: the encoded reply.
    Served(Vec<u8>),
    /// CLIENT UNBLOCK ... TIMEOUT: answer as on timeout.
    Timeout,
    /// CLIENT UNBLOCK ... ERROR.
    Error,
}

/// The command a blocked client will run again, with everything needed to run it.
pub struct Waiter {
    /// The client's shared info.
    pub info: Arc<ClientInfo>,
    /// The client's database.
    pub db: usize,
    /// The client's protocol.
    pub proto: Protocol,
    /// Registry index of the command.
    pub cmd_index: usize,
    /// The command's arguments (or the rewrite it asked for).
    pub args: OwnedArgs,
    /// Keys waited on.
    pub keys: Vec<Vec<u8>>,
    /// Where the reply goes.
    pub tx: oneshot::Sender<Wake>,
    /// Whether an error from a run is delivered (see [`BlockRequest::serve_errors`]).
    pub serve_errors: bool,
}

impl Waiter {
    /// A waiter for the command in `args` (or `req.rewrite`), blocked as `req` asks.
    pub fn new(
        client: &Client,
        proto: Protocol,
        cmd_index: usize,
        args: Args<'_>,
        req: BlockRequest,
        tx: oneshot::Sender<Wake>,
    ) -> Self {
        let args = match &req.rewrite {
            Some(r) => {
                let mut o = OwnedArgs::default();
                r.iter().for_each(|a| o.push(a));
                o
            }
            None => OwnedArgs::from_args(args),
        };
        let (keys, serve_errors) = (req.keys, req.serve_errors);
        Waiter {
            info: client.info.clone(),
            db: client.db,
            proto,
            cmd_index,
            args,
            keys,
            tx,
            serve_errors,
        }
    }
}

#[derive(Default)]
struct State {
    /// Waiters by client id.
    waiters: HashMap<u64, Waiter>,
    /// Client ids waiting on each (db, key), oldest first.
    by_key: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
}

impl State {
    fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        for k in &w.keys {
            let slot = (w.db, k.clone());
            if let Some(q) = self.by_key.get_mut(&slot) {
                q.retain(|&x| x != id);
                if q.is_empty() {
                    self.by_key.remove(&slot);
                }
            }
        }
        Some(w)
    }
}

/// The registry of blocked clients.
#[derive(Default)]
pub struct Blocking {
    state: Mutex<State>,
    count: AtomicUsize,
}

/// Keys written by a command, to check for waiters: (db, key).
pub type ReadyKeys = Vec<(usize, Vec<u8>)>;

impl Blocking {
    /// True while any client is blocked (the write path's fast check).
    pub fn active(&self) -> bool {
        self.count.load(SeqCst) > 0
    }

    /// Number of blocked clients (INFO blocked_clients).
    pub fn blocked(&self) -> usize {
        self.count.load(SeqCst)
    }

    /// True when client `id` is blocked.
    pub fn is_blocked(&self, id: u64) -> bool {
        self.active() && self.state.lock().waiters.contains_key(&id)
    }

    /// Registers `w`, then runs its command once more under the registry lock, so that a
    /// write racing with the registration is never missed. Returns the reply when that run
    /// serves it (the waiter is then not kept).
    pub fn block(&self, server: &Arc<Server>, stats: &WorkerStats, w: Waiter) -> Option<Vec<u8>> {
        let mut st = self.state.lock();
        let id = w.info.id;
        for k in &w.keys {
            let q = st.by_key.entry((w.db, k.clone())).or_default();
            if !q.contains(&id) {
                q.push_back(id);
            }
        }
        st.waiters.insert(id, w);
        self.count.fetch_add(1, SeqCst);
        let w = st.waiters.get(&id)?;
        let (reply, _) = run_waiter(server, stats, w)?;
        st.remove(id);
        self.count.fetch_sub(1, SeqCst);
        Some(reply)
    }

    /// Forgets client `id` (timeout, disconnect, kill); false when it was no longer
    /// registered (it has been served or unblocked and its [`Wake`] is on the way).
    pub fn cancel(&self, id: u64) -> bool {
        let mut st = self.state.lock();
        let found = st.remove(id).is_some();
        if found {
            self.count.fetch_sub(1, SeqCst);
        }
        found
    }

    /// CLIENT UNBLOCK: wakes client `id` with a timeout or an error; false when it is not
    /// blocked.
    pub fn unblock(&self, id: u64, error: bool) -> bool {
        let mut st = self.state.lock();
        let Some(w) = st.remove(id) else {
            return false;
        };
        self.count.fetch_sub(1, SeqCst);
        let _ = w.tx.send(if error { Wake::Error } else { Wake::Timeout });
        true
    }

    /// Runs the waiters of every key in `ready` (and of keys their commands write in
    /// turn), oldest first, serving those whose command now succeeds.
    pub fn serve(&self, server: &Arc<Server>, stats: &WorkerStats, ready: &mut ReadyKeys) {
        if !self.active() {
            ready.clear();
            return;
        }
        let mut st = self.state.lock();
        let mut i = 0;
        while i < ready.len() {
            let slot = std::mem::take(&mut ready[i]);
            i += 1;
            let Some(q) = st.by_key.get(&slot) else {
                continue;
            };
            let ids: Vec<u64> = q.iter().copied().collect();
            for id in ids {
                let Some(w) = st.waiters.get(&id) else {
                    continue;
                };
                let Some((reply, mut more)) = run_waiter(server, stats, w) else {
                    continue;
                };
                if let Some(w) = st.remove(id) {
                    self.count.fetch_sub(1, SeqCst);
                    let _ = w.tx.send(Wake::Served(reply));
                }
                ready.append(&mut more);
            }
        }
        ready.clear();
    }

    /// Marks every key waited on in `db` ready (MOVE into `db`, SWAPDB).
    pub fn ready_db(&self, db: usize, ready: &mut ReadyKeys) {
        if !self.active() {
            return;
        }
        let st = self.state.lock();
        ready.extend(st.by_key.keys().filter(|(d, _)| *d == db).cloned());
    }
}

/// Runs a waiter's command on its behalf; the reply and the keys it wrote when it was
/// served, `None` when it would block again.
fn run_waiter(
    server: &Arc<Server>,
    stats: &WorkerStats,
    w: &Waiter,
) -> Option<(Vec<u8>, ReadyKeys)> {
    let mut client = Client::new(w.info.clone(), true);
    client.db = w.db;
    client.block_mode = BlockMode::Retry;
    let mut out = ReplyWriter::new(w.proto);
    let args = w.args.args();
    let result = {
        let mut ctx = Ctx {
            server,
            client: &mut client,
            out: &mut out,
            stats,
            now: clock::now_ns(),
            rng: CmdRng::Thread,
            park: None,
        };
        run_command(&mut ctx, w.cmd_index, args)
    };
    // Still nothing to take, or a key now of another type: stay blocked (Redis serves a
    // waiter only when a ready key holds the type it waits for).
    if client.block_request.is_some() || (result.is_err() && !w.serve_errors) {
        return None;
    }
    if let Err(e) = result {
        out.clear();
        out.error(&e.to_string());
        stats.count_errors(&mut out);
    }
    let ready = std::mem::take(&mut client.ready_keys);
    Some((out.buffer().to_vec(), ready))
}

/// The blocking half of a handler's context.
impl Ctx<'_> {
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
}
