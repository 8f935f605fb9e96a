//! Client connections as the rest of the server sees them: per-connection state owned by
//! the connection task ([`Client`]) and the shared, thread-safe part ([`ClientInfo`]) kept
//! in the [`ClientTable`] for CLIENT LIST / KILL / INFO.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use atomic_waker::AtomicWaker;
use parking_lot::Mutex;
use resp::Protocol;

/// [`ClientInfo::busy_tx`]: the transaction ended (its watched keys forgotten); applied first.
pub const BUSY_TX_CLOSED: u8 = 1;
/// [`ClientInfo::busy_tx`]: a transaction started.
pub const BUSY_TX_OPEN: u8 = 2;
/// [`ClientInfo::busy_tx`]: a command was refused inside the transaction (EXEC aborts).
pub const BUSY_TX_DIRTY: u8 = 4;

/// The part of a client other threads may read or signal.
pub struct ClientInfo {
    /// Unique, increasing client id.
    pub id: u64,
    /// Peer address.
    pub addr: SocketAddr,
    /// Local address.
    pub laddr: SocketAddr,
    /// Socket file descriptor.
    pub fd: i32,
    /// When the connection was accepted.
    pub created: Instant,
    /// Milliseconds since `created` of the last command.
    pub last_active_ms: AtomicU64,
    /// Selected database.
    pub db: AtomicUsize,
    /// Registry index of the last command (+1; 0 = none).
    pub last_cmd: AtomicUsize,
    /// 2 or 3.
    pub resp: AtomicU8,
    /// Connection name (CLIENT SETNAME).
    pub name: Mutex<Vec<u8>>,
    /// CLIENT SETINFO lib-name.
    pub lib_name: Mutex<Vec<u8>>,
    /// CLIENT SETINFO lib-ver.
    pub lib_ver: Mutex<Vec<u8>>,
    /// Bytes waiting in the query buffer after the last read.
    pub qbuf: AtomicUsize,
    /// Set by CLIENT KILL; the connection closes at its next wake-up.
    pub killed: AtomicBool,
    /// The connection task's waker, woken when `killed` is set or `busy_pending` raised:
    /// the task registers it, then reads the flags ([`ClientInfo::signalled`]).
    pub waker: AtomicWaker,
    /// Set when a key this client watches is written (EXEC then aborts).
    pub watch_dirty: AtomicBool,
    /// Commands queued in MULTI; -1 outside MULTI (CLIENT LIST `multi=`).
    pub multi_len: std::sync::atomic::AtomicI64,
    /// Channels, patterns and shard channels subscribed (CLIENT LIST `sub= psub= ssub=`).
    pub sub_counts: [AtomicUsize; 3],
    /// The worker serving the connection now (CLIENT LIST `io-thread=`).
    pub worker: AtomicUsize,
    /// Set while the connection waits for input with nothing buffered and may be answered
    /// by its worker's busy script ([`crate::busy`]).
    pub rest: AtomicBool,
    /// Replies [`crate::busy`] could not write at once; they go out first.
    pub busy_out: Mutex<Vec<u8>>,
    /// `busy_out` holds bytes.
    pub busy_pending: AtomicBool,
    /// A mailbox another client made for this one (a CLIENT TRACKING REDIRECT to a client
    /// without one), waiting for the connection to take it ([`crate::pubsub::mailbox_for`]);
    /// its lock also orders creating this client's mailbox.
    pub adopt: Mutex<Option<crate::pubsub::Adoptable>>,
    /// `adopt` holds a mailbox.
    pub adopt_pending: AtomicBool,
    /// In MONITOR mode (CLIENT LIST flag `O`; output-buffer class `replica`).
    pub monitor: AtomicBool,
    /// CLIENT NO-EVICT ON (CLIENT LIST flag `e`).
    pub no_evict: AtomicBool,
    /// What commands a busy script's hook answered did to this connection's transaction
    /// ([`BUSY_TX_CLOSED`], [`BUSY_TX_OPEN`], [`BUSY_TX_DIRTY`]), applied by the connection
    /// before it runs anything else.
    pub busy_tx: std::sync::atomic::AtomicU8,
}

impl ClientInfo {
    /// Info for a new connection.
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, fd: i32) -> Self {
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created: Instant::now(),
            last_active_ms: AtomicU64::new(0),
            db: AtomicUsize::new(0),
            last_cmd: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            name: Mutex::new(Vec::new()),
            lib_name: Mutex::new(Vec::new()),
            lib_ver: Mutex::new(Vec::new()),
            qbuf: AtomicUsize::new(0),
            killed: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            watch_dirty: AtomicBool::new(false),
            multi_len: std::sync::atomic::AtomicI64::new(-1),
            sub_counts: Default::default(),
            worker: AtomicUsize::new(0),
            rest: AtomicBool::new(false),
            busy_out: Mutex::new(Vec::new()),
            busy_pending: AtomicBool::new(false),
            adopt: Mutex::new(None),
            adopt_pending: AtomicBool::new(false),
            monitor: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            busy_tx: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Whether the connection was killed or, with `busy`, handed replies by a busy
    /// script's hook (`busy_pending`) or a mailbox to adopt (`adopt_pending`).
    #[inline]
    pub fn signalled(&self, busy: bool) -> bool {
        self.killed.load(Relaxed)
            || (busy && (self.busy_pending.load(Relaxed) || self.adopt_pending.load(Relaxed)))
    }

    /// Asks the connection to close.
    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.waker.wake();
    }

    /// Like [`ClientInfo::kill`]; true only for the call that killed it (the others found
    /// it killed already), so a reason is logged once.
    pub fn kill_once(&self) -> bool {
        let first = !self.killed.swap(true, Relaxed);
        self.waker.wake();
        first
    }

    /// Marks activity now.
    pub fn touch(&self) {
        self.last_active_ms
            .store(self.created.elapsed().as_millis() as u64, Relaxed);
    }

    /// Seconds since the last command.
    pub fn idle_secs(&self) -> u64 {
        let now = self.created.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_active_ms.load(Relaxed)) / 1000
    }
}

/// Every connected client, by id.
#[derive(Default)]
pub struct ClientTable {
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl ClientTable {
    /// Registers a connection.
    pub fn add(&self, c: Arc<ClientInfo>) {
        self.clients.lock().insert(c.id, c);
    }

    /// Forgets a connection.
    pub fn remove(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    /// Number of connected clients.
    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    /// True when no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of all clients, by id.
    pub fn all(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }

    /// The client with `id`.
    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.clients.lock().get(&id).cloned()
    }
}

/// CLIENT REPLY mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    On,
    /// Replies are dropped.
    Off,
    /// The next command's reply is dropped.
    SkipNext,
    /// This command's reply is dropped, then back to On.
    Skipping,
}

/// Per-connection state, owned by the connection task.
pub struct Client {
    /// Shared part.
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: usize,
    /// Whether AUTH succeeded (or no password is required).
    pub authenticated: bool,
    /// CLIENT REPLY state.
    pub reply_mode: ReplyMode,
    /// Close the connection once the current reply is written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// What a blocking command does when it finds nothing.
    pub block_mode: BlockMode,
    /// Set by a handler that asks to block.
    pub block_request: Option<crate::blocking::BlockRequest>,
    /// Set by a command whose reply is pub/sub traffic ((P|S)(UN)SUBSCRIBE's
    /// confirmations): sent whatever CLIENT REPLY says, as Redis's `CLIENT_PUSHING`.
    pub pushing: bool,
    /// While a script of a tracking client runs: the keys it declared, which a read
    /// command it calls makes tracked (Redis 7.0's trackingRememberKeys of the caller).
    pub script_keys: Option<Vec<Vec<u8>>>,
    /// Set while a script or function of this client runs (its commands are shown to
    /// MONITOR as `lua`).
    pub in_script: bool,
    /// Arguments of the running command that are secret ([`crate::ctx::Ctx::redact`]).
    pub redacted: Vec<u32>,
    /// Keys written that blocked clients may wait on, beyond the command's own keys.
    pub ready_keys: crate::blocking::ReadyKeys,
    /// The transaction being queued (between MULTI and EXEC/DISCARD).
    pub multi: Option<Multi>,
    /// Keys this client watches.
    pub watched: Vec<crate::watch::Watched>,
    /// Pub/sub subscriptions, once the client subscribed to something.
    pub subs: Option<Box<Subscriptions>>,
    /// Messages for this client (read by the connection loop).
    pub sub_rx: Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>,
    /// Where pub/sub messages and invalidations for this client go, once it needs one.
    pub mailbox: Option<Arc<crate::pubsub::Mailbox>>,
    /// CLIENT TRACKING state, while on.
    pub tracking: Option<ClientTracking>,
    /// Cluster mode: READONLY, ASKING and writes in flight.
    pub cluster: crate::cluster::route::ClusterConn,
    /// What the running command declares it did ([`crate::effects`]).
    pub fx: crate::effects::Effects,
}

/// A tracking client's own view of its options.
#[derive(Debug, Clone)]
pub struct ClientTracking {
    /// The options given to CLIENT TRACKING ON.
    pub opts: crate::tracking::Options,
    /// CLIENT CACHING YES/NO given for the next command.
    pub caching: bool,
    /// Set by CLIENT CACHING at the top level: the connection keeps `caching` past that
    /// command, for the one after it.
    pub keep_caching: bool,
}

/// A client's pub/sub subscriptions and its mailbox.
pub struct Subscriptions {
    /// Where publishers deliver.
    pub mailbox: Arc<crate::pubsub::Mailbox>,
    channels: std::collections::HashSet<Vec<u8>>,
    patterns: std::collections::HashSet<Vec<u8>>,
    shards: std::collections::HashSet<Vec<u8>>,
}

impl Subscriptions {
    /// No subscriptions yet.
    pub fn new(mailbox: Arc<crate::pubsub::Mailbox>) -> Self {
        Subscriptions {
            mailbox,
            channels: Default::default(),
            patterns: Default::default(),
            shards: Default::default(),
        }
    }

    /// The names subscribed in `kind`.
    pub fn set(&self, kind: crate::pubsub::Kind) -> &std::collections::HashSet<Vec<u8>> {
        use crate::pubsub::Kind;
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shards,
        }
    }

    /// The names subscribed in `kind`, mutably.
    pub fn set_mut(
        &mut self,
        kind: crate::pubsub::Kind,
    ) -> &mut std::collections::HashSet<Vec<u8>> {
        use crate::pubsub::Kind;
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shards,
        }
    }

    /// The count a (un)subscribe confirmation reports: channels + patterns, or shard
    /// channels.
    pub fn count(&self, kind: crate::pubsub::Kind) -> usize {
        match kind {
            crate::pubsub::Kind::Shard => self.shards.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    /// Total subscriptions of every kind (RESP2 subscribed mode while > 0).
    pub fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shards.len()
    }

    /// Copies the counts into the shared client info.
    pub fn publish_counts(&self) {
        let c = &self.mailbox.info.sub_counts;
        c[0].store(self.channels.len(), Relaxed);
        c[1].store(self.patterns.len(), Relaxed);
        c[2].store(self.shards.len(), Relaxed);
    }
}

/// A transaction being queued.
#[derive(Default)]
pub struct Multi {
    /// Queued commands.
    pub queued: Vec<Queued>,
    /// Set by an error while queueing: EXEC answers EXECABORT.
    pub dirty: bool,
}

/// One queued command: its registry index and its arguments.
pub struct Queued {
    /// Registry index.
    pub cmd_index: usize,
    /// The arguments, copied out of the read buffer.
    pub args: resp::OwnedArgs,
}

/// What a blocking command does when there is nothing to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockMode {
    /// Block (a normal client).
    Normal,
    /// Answer as on timeout at once (inside MULTI/EXEC or a script).
    NoBlock,
    /// Run again for a blocked client: ask to block again, the registry keeps it waiting.
    Retry,
}

impl Client {
    /// State for a new connection.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> Self {
        Client {
            info,
            db: 0,
            authenticated,
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            block_mode: BlockMode::Normal,
            block_request: None,
            pushing: false,
            script_keys: None,
            ready_keys: Vec::new(),
            multi: None,
            watched: Vec::new(),
            subs: None,
            sub_rx: None,
            mailbox: None,
            in_script: false,
            redacted: Vec::new(),
            tracking: None,
            cluster: Default::default(),
            fx: Default::default(),
        }
    }

    /// Enters MULTI: an empty transaction (CLIENT LIST `multi=0`).
    pub fn begin_multi(&mut self) {
        self.multi = Some(Multi::default());
        self.info.multi_len.store(0, Relaxed);
    }

    /// Leaves MULTI, returning the transaction it held (CLIENT LIST `multi=-1`).
    pub fn end_multi(&mut self) -> Option<Multi> {
        self.info.multi_len.store(-1, Relaxed);
        self.multi.take()
    }

    /// Forgets every key this client watches.
    pub fn unwatch_all(&mut self, watches: &crate::watch::Watches) {
        let keys = std::mem::take(&mut self.watched);
        watches.unwatch_all(&self.info, &keys);
    }

    /// The client id.
    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// True in RESP2 while subscribed to anything (only some commands may run).
    pub fn in_resp2_pubsub(&self, proto: Protocol) -> bool {
        proto == Protocol::Resp2 && self.subs.as_ref().is_some_and(|s| s.total() > 0)
    }

    /// Selects database `db`.
    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db, Relaxed);
    }

    /// Records the protocol version for CLIENT LIST.
    pub fn set_resp(&self, proto: Protocol) {
        self.info
            .resp
            .store(if proto == Protocol::Resp3 { 3 } else { 2 }, Relaxed);
    }
}
