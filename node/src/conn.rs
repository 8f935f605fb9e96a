//! One client connection: read, parse every complete command in the buffer, execute each,
//! write all replies at once (a pipeline is one batch, one write).

use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use resp::{Args, Batch, Limits, OwnedArgs, Protocol, ReplyWriter, RequestKind, RequestParser};
use storage::{clock, Parked};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tracing::debug;

use crate::blocking::{TimeoutReply, Waiter, Wake};
use crate::client::{Client, ClientInfo, Queued, ReplyMode};
use crate::cluster::route::Routed;
use crate::ctx::{CmdRng, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags, CommandSpec, Unresolved};
use crate::server::Server;
use crate::stats::WorkerStats;

/// Replies are flushed early once the output buffer passes this size.
const FLUSH_AT: usize = 1 << 20;
/// Read buffer headroom.
const READ_CHUNK: usize = 16 * 1024;
/// How many commands ahead of the one running a batch prefetches keys.
const PREFETCH_AHEAD: usize = 4;
/// How many commands ahead it prefetches their values (the second stage, once the first
/// stage's lines have arrived: `Keyspace::prefetch_value`).
const PREFETCH_VALUE_AHEAD: usize = 2;
/// Most commands of one read buffer parsed ahead of running them ([`Batch`]).
const BATCH_MAX: usize = 128;
/// Most keys of one command the first prefetch stage takes (a DEL of thousands of keys
/// would evict its first keys' lines before they are used).
const PREFETCH_KEYS: usize = 16;

/// Serves one accepted connection until it closes.
pub async fn serve(
    server: Arc<Server>,
    stats: Arc<WorkerStats>,
    worker: usize,
    stream: std::net::TcpStream,
    id: u64,
) {
    let _ = stream.set_nodelay(true);
    let keepalive = server.live.tcp_keepalive.load(Relaxed);
    if keepalive > 0 {
        let ka = socket2::TcpKeepalive::new().with_time(Duration::from_secs(keepalive));
        let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&ka);
    }
    let (Ok(addr), Ok(laddr)) = (stream.peer_addr(), stream.local_addr()) else {
        server.connected.fetch_sub(1, Relaxed);
        return;
    };
    let fd = {
        use std::os::fd::AsRawFd;
        stream.as_raw_fd()
    };
    let stream = match TcpStream::from_std(stream) {
        Ok(s) => s,
        Err(_) => {
            server.connected.fetch_sub(1, Relaxed);
            return;
        }
    };
    let info = Arc::new(ClientInfo::new(id, addr, laddr, fd));
    server.clients.add(info.clone());
    WorkerStats::add(&stats.connections, 1);
    let authenticated = !server.live.auth_required.load(Relaxed);
    let mut conn = Conn {
        client: Client::new(info, authenticated),
        out: ReplyWriter::new(Protocol::Resp2),
        parser: RequestParser::new(limits(&server)),
        limits_epoch: server.live.epoch.load(Relaxed),
        spans: Vec::with_capacity(16),
        rbuf: Vec::with_capacity(READ_CHUNK),
        clock: None,
        last_cmd: LastCommand::default(),
        batch: Batch::default(),
        hashes: KeyHashes::default(),
        server,
        stats,
        worker,
        obuf_soft: Default::default(),
    };
    conn.arrive();
    drive(conn, stream).await;
}

/// A connection on its way to another worker ([`crate::balance`]): its whole state and
/// its socket, out of the old worker's reactor.
pub struct Moving {
    conn: Conn,
    stream: std::net::TcpStream,
}

/// Goes on serving a connection another worker handed over.
pub async fn resume(stats: Arc<WorkerStats>, worker: usize, m: Box<Moving>) {
    let Moving { mut conn, stream } = *m;
    conn.stats = stats;
    conn.worker = worker;
    conn.arrive();
    match TcpStream::from_std(stream) {
        Ok(s) => drive(conn, s).await,
        Err(e) => {
            debug!(client = conn.client.info.id, "connection lost moving: {e}");
            conn.close();
        }
    }
}

/// Serves `conn` on this worker until it closes (and cleans up) or moves away.
async fn drive(mut conn: Conn, stream: TcpStream) {
    match conn.run(stream).await {
        Ok(Ended::Moved(stream, to)) => {
            let (server, from) = (conn.server.clone(), conn.worker);
            let m = Box::new(Moving { conn, stream });
            match server.balance.send(to, crate::balance::Arrival::Moved(m)) {
                Ok(()) => server.balance.left(from),
                // The other worker is gone (shutting down): the connection ends here.
                Err(a) => {
                    if let crate::balance::Arrival::Moved(mut m) = a {
                        m.conn.close();
                    }
                }
            }
            return;
        }
        Ok(Ended::Closed) => {}
        Err(e) => debug!(client = conn.client.info.id, "connection closed: {e}"),
    }
    conn.close();
}

/// Where a connection's unwritten replies stand against its output-buffer limit.
enum OutputLimit {
    /// Under the soft limit (or no limit).
    Within,
    /// Past the hard limit, or past the soft one for too long: the client is closed.
    Over(crate::obuf::Class),
    /// Over the soft limit for less than its seconds: this much time is left.
    Soft(crate::obuf::Class, Duration),
}

/// How [`Conn::run`] ended.
enum Ended {
    /// The connection is done.
    Closed,
    /// The connection goes on on worker `.1`.
    Moved(std::net::TcpStream, usize),
}

fn limits(server: &Server) -> Limits {
    Limits {
        max_bulk_len: server.live.proto_max_bulk_len.load(Relaxed) as usize,
        ..Limits::default()
    }
}

struct Conn {
    server: Arc<Server>,
    stats: Arc<WorkerStats>,
    client: Client,
    out: ReplyWriter,
    parser: RequestParser,
    limits_epoch: u64,
    spans: Vec<(usize, usize)>,
    rbuf: Vec<u8>,
    /// The clock reading taken when the previous command finished, reused as the next
    /// command's time (one clock read per command) while nothing came between them: it is
    /// cleared whenever the connection waits (for input, a flush, a block, a pause).
    clock: Option<u64>,
    /// The command this connection named last, so a repeat skips the registry lookup.
    last_cmd: LastCommand,
    /// The commands of the read buffer, parsed before the first runs (for prefetching).
    batch: Batch,
    /// The key hashes the first prefetch stage computed, for the second: slot `i % 8`
    /// holds command `i`'s as `(i + 1, hash)` (0: none).
    hashes: KeyHashes,
    /// The worker serving the connection now.
    worker: usize,
    /// How long the unwritten replies have been over the soft output-buffer limit.
    obuf_soft: crate::obuf::SoftClock,
}

/// The exact bytes of the last command name a connection sent (up to 16) and the registry
/// index they resolved to. Only names that resolve on their own (a top-level command with
/// a handler and no subcommands) are kept; the registry does not change while the server
/// runs.
#[derive(Default)]
struct LastCommand {
    len: u8,
    /// The kept command has [`flags::PREFETCH_VALUE`].
    prefetch_value: bool,
    /// The step between the kept command's keys when they run from its first argument to
    /// its last (MGET and DEL 1, MSET 2), for the first prefetch stage; 0 for any other.
    key_step: u8,
    name: [u8; 16],
    idx: u32,
}

impl LastCommand {
    /// Whether `name` is the kept name (`self.len != 0`): two overlapping word loads from
    /// each side instead of a `memcmp` call.
    #[inline(always)]
    fn same(&self, name: &[u8]) -> bool {
        let n = usize::from(self.len);
        let Some(kept) = self.name.get(..n) else {
            return false;
        };
        if name.len() != n {
            return false;
        }
        fn word<const W: usize>(b: &[u8], at: usize) -> [u8; W] {
            let mut w = [0u8; W];
            w.copy_from_slice(&b[at..at + W]);
            w
        }
        match n {
            8..=16 => {
                word::<8>(name, 0) == word::<8>(kept, 0)
                    && word::<8>(name, n - 8) == word::<8>(kept, n - 8)
            }
            4..=7 => {
                word::<4>(name, 0) == word::<4>(kept, 0)
                    && word::<4>(name, n - 4) == word::<4>(kept, n - 4)
            }
            1..=3 => name[0] == kept[0] && name[n / 2] == kept[n / 2] && name[n - 1] == kept[n - 1],
            _ => name == kept,
        }
    }

    /// The index of `args`'s command, from the cache when its name is the same bytes.
    #[inline]
    fn resolve(&mut self, server: &Server, args: Args<'_>) -> Result<usize, CmdError> {
        let name = args.arg(0);
        if self.len != 0 && self.same(name) {
            return Ok(self.idx as usize);
        }
        // A top-level command with a handler and no subcommands is what the name alone
        // resolves to (`Registry::resolve`'s first case), so it may be kept; anything else
        // (CONFIG GET resolves to config|get, which the next CONFIG SET must not reuse)
        // goes through the full resolution every time.
        let reg = &server.registry;
        if let Some(idx) = reg.lookup(name) {
            let spec = reg.entry(idx).spec;
            if spec.handler.is_some() && spec.subcommands.is_empty() {
                if name.len() <= self.name.len() {
                    self.name[..name.len()].copy_from_slice(name);
                    self.len = name.len() as u8;
                    self.idx = idx as u32;
                    self.prefetch_value = spec.has(flags::PREFETCH_VALUE);
                    self.key_step = match (spec.first_key, spec.last_key, spec.key_step) {
                        (1, -1, step @ 1..=2) => step as u8,
                        _ => 0,
                    };
                }
                return Ok(idx);
            }
        }
        resolve(server, args)
    }
}

impl Conn {
    /// Starts being served by `self.worker`: counted there, shown by CLIENT LIST.
    fn arrive(&mut self) {
        self.client.info.worker.store(self.worker, Relaxed);
        self.server.balance.joined(self.worker);
    }

    /// The cleanup of a connection that is done (and no longer served by its worker).
    fn close(&mut self) {
        let server = &self.server;
        let id = self.client.info.id;
        server.balance.left(self.worker);
        crate::cmd::pubsub::unsubscribe_all(server, &mut self.client);
        if self.client.info.monitor.load(Relaxed) {
            server.observe.remove_monitor(id);
        }
        server.tracking.remove_client(id);
        self.client.unwatch_all(&server.watches);
        server.clients.remove(id);
        server.connected.fetch_sub(1, Relaxed);
    }

    async fn run(&mut self, mut stream: TcpStream) -> std::io::Result<Ended> {
        // Its own handle (one reference count a connection): batches keep a shard locked
        // through it ([`Parked`]) while `self` is borrowed mutably.
        let server = self.server.clone();
        loop {
            // A quiet point: every command read has run and its reply is written. A
            // subscriber stays where its messages are delivered.
            if self.rbuf.is_empty() && self.client.sub_rx.is_none() {
                if let Some(to) = server.balance.take_move(self.worker) {
                    return Ok(Ended::Moved(stream.into_std()?, to));
                }
            }
            if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
                self.rbuf.reserve(READ_CHUNK);
            }
            let timeout = self.server.live.timeout_secs.load(Relaxed);
            let info = self.client.info.clone();
            let subscribed = self.client.sub_rx.is_some();
            // At rest: a busy script on this worker may answer what arrives ([`crate::busy`];
            // its redirections are those of a client without cluster READONLY or ASKING).
            let _rest = Rest::new(
                &info,
                self.rbuf.is_empty()
                    && !subscribed
                    && self.client.authenticated
                    && matches!(self.client.reply_mode, ReplyMode::On)
                    && !self.client.cluster.readonly
                    && !self.client.cluster.asking,
            );
            let input = if timeout == 0 && !subscribed {
                // The usual wait: input, or a kill or busy replies.
                match until_signalled(&info, true, stream.read_buf(&mut self.rbuf)).await {
                    Some(r) => Input::Read(r?),
                    None => Input::Signal,
                }
            } else {
                tokio::select! {
                    r = stream.read_buf(&mut self.rbuf) => Input::Read(r?),
                    _ = signalled(&info, true) => Input::Signal,
                    // An async block: select! builds every branch's future, also a disabled
                    // one, and `sleep` itself reads the clock and sets up a timer entry.
                    _ = async { tokio::time::sleep(Duration::from_secs(timeout)).await },
                        if timeout > 0 && !subscribed => return Ok(Ended::Closed),
                    m = recv_message(&mut self.client.sub_rx), if subscribed => Input::Message(m),
                }
            };
            let n = match input {
                Input::Read(n) => n,
                Input::Signal => {
                    if info.killed.load(Relaxed) {
                        return Ok(Ended::Closed);
                    }
                    if info.adopt_pending.load(Relaxed) {
                        // Another client made this one a REDIRECT target: its mailbox.
                        drop(_rest);
                        crate::pubsub::adopt(&mut self.client);
                        continue;
                    }
                    if !info.busy_pending.load(Relaxed) {
                        return Ok(Ended::Closed);
                    }
                    // Woken by a busy script's hook: write the replies it held.
                    drop(_rest);
                    self.apply_busy_tx();
                    self.take_busy_replies();
                    self.flush(&mut stream).await?;
                    continue;
                }
                Input::Message(m) => {
                    if let Some(m) = m {
                        self.deliver(&mut stream, m).await?;
                    }
                    continue;
                }
            };
            drop(_rest);
            self.apply_busy_tx();
            if n == 0 || info.killed.load(Relaxed) {
                return Ok(Ended::Closed);
            }
            if info.busy_pending.load(Relaxed) {
                self.take_busy_replies();
            }
            WorkerStats::add(&self.stats.net_input, n as u64);
            info.touch();
            let epoch = self.server.live.epoch.load(Relaxed);
            if epoch != self.limits_epoch {
                self.limits_epoch = epoch;
                self.parser.set_limits(limits(&self.server));
            }
            // While its commands run, the batch is in the query buffer (CLIENT LIST
            // `qbuf` of a client listing itself counts its own command, as in Redis).
            info.qbuf.store(self.rbuf.len(), Relaxed);
            let close = self.process(&server, &mut stream).await?;
            if !self.out.is_empty() {
                // Let the worker's other ready connections run their commands first, so
                // the replies leave in a burst: a reply written to a loopback peer that
                // sleeps in epoll wakes it (an IPI on a VM, paid by this thread), and a
                // burst wakes it once. With no other task ready this returns at once.
                // Measured: 1 thread, INCR P30 50 clients, 1.22M -> 1.78M/s and 31% less
                // CPU per command (benches/results/2026-12-05-perf.md).
                let _held = crate::busy::Holding::new();
                tokio::task::yield_now().await;
            }
            self.flush(&mut stream).await?;
            if close {
                return Ok(Ended::Closed);
            }
            let pending = self.rbuf.len() as u64;
            info.qbuf.store(self.rbuf.len(), Relaxed);
            if pending > self.server.live.query_buffer_limit.load(Relaxed) {
                tracing::warn!(
                    client = info.id,
                    "Closing client that reached max query buffer length"
                );
                return Ok(Ended::Closed);
            }
        }
    }

    /// Applies what the commands a busy script's hook answered did to this connection's
    /// transaction ([`crate::busy`]): before the connection runs anything else. One load
    /// when there is nothing.
    #[inline]
    fn apply_busy_tx(&mut self) {
        if self.client.info.busy_tx.load(Relaxed) != 0 {
            self.apply_busy_tx_now();
        }
    }

    #[inline(never)]
    fn apply_busy_tx_now(&mut self) {
        use crate::client::{BUSY_TX_CLOSED, BUSY_TX_DIRTY, BUSY_TX_OPEN};
        let tx = self.client.info.busy_tx.swap(0, Relaxed);
        if tx & BUSY_TX_CLOSED != 0 {
            self.client.end_multi();
            self.client.unwatch_all(&self.server.watches);
        }
        if tx & BUSY_TX_OPEN != 0 {
            self.client.begin_multi();
        }
        if tx & BUSY_TX_DIRTY != 0 {
            if let Some(m) = self.client.multi.as_mut() {
                m.dirty = true;
            }
        }
    }

    /// Puts the replies a busy script's hook answered but could not write
    /// ([`crate::busy`]) first in the output.
    fn take_busy_replies(&mut self) {
        let info = &self.client.info;
        info.busy_pending.store(false, Relaxed);
        let held = std::mem::take(&mut *info.busy_out.lock());
        self.out.buffer_mut().extend_from_slice(&held);
    }

    /// Writes a pub/sub message and any others already waiting.
    async fn deliver(&mut self, stream: &mut TcpStream, first: Vec<u8>) -> std::io::Result<()> {
        if self.client.info.killed.load(Relaxed) {
            return Err(std::io::ErrorKind::ConnectionAborted.into());
        }
        let mut n = first.len();
        self.out.buffer_mut().extend_from_slice(&first);
        if let Some(rx) = self.client.sub_rx.as_mut() {
            while self.out.len() < FLUSH_AT {
                let Ok(m) = rx.try_recv() else { break };
                n += m.len();
                self.out.buffer_mut().extend_from_slice(&m);
            }
        }
        self.write_out(stream, false).await?;
        if let Some(m) = &self.client.mailbox {
            m.written(n);
        }
        Ok(())
    }

    /// Writes the buffered replies; a client killed meanwhile (CLIENT KILL, output-buffer
    /// limit) is dropped even if its socket never drains.
    async fn flush(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        self.write_out(stream, true).await
    }

    /// [`Conn::flush`]; `limited`: the output-buffer limit applies (pub/sub deliveries,
    /// counted in the mailbox already, write without it).
    async fn write_out(&mut self, stream: &mut TcpStream, limited: bool) -> std::io::Result<()> {
        // Cluster mode: replies of writes still in consensus go in first, in order.
        crate::cluster::route::drain(&mut self.client, &mut self.out).await;
        if !self.out.is_empty() {
            // Commands reach the AOF (and, with appendfsync always, the disk) before any
            // reply that could acknowledge them.
            self.server.aof.before_reply();
            let info = &self.client.info;
            let limit = if limited {
                self.output_limit()
            } else {
                OutputLimit::Within
            };
            let written = match limit {
                OutputLimit::Within => {
                    until_signalled(info, false, stream.write_all(self.out.buffer())).await
                }
                OutputLimit::Over(class) => {
                    crate::obuf::close_client(info, class);
                    None
                }
                // Over the soft limit: the write may wait only until the soft time is out.
                OutputLimit::Soft(class, left) => {
                    let write = tokio::time::timeout(left, stream.write_all(self.out.buffer()));
                    match until_signalled(info, false, write).await {
                        Some(Ok(r)) => {
                            // All written: the buffer is empty, under the soft limit.
                            self.obuf_soft.clear();
                            Some(r)
                        }
                        Some(Err(_)) => {
                            crate::obuf::close_client(info, class);
                            None
                        }
                        None => None,
                    }
                }
            };
            if written.transpose()?.is_none() {
                return Err(std::io::ErrorKind::ConnectionAborted.into());
            }
            WorkerStats::add(&self.stats.net_output, self.out.len() as u64);
            self.out.clear();
        }
        Ok(())
    }

    /// Where the replies waiting to be written stand against the connection's
    /// `client-output-buffer-limit` ([`crate::obuf`]).
    fn output_limit(&self) -> OutputLimit {
        let info = &self.client.info;
        let class = crate::obuf::class_of(info);
        let limit = self.server.live.obuf.get(class);
        if limit.is_unlimited() {
            return OutputLimit::Within;
        }
        let now = crate::obuf::client_ms(info);
        if self.obuf_soft.over(limit, self.out.len() as u64, now) {
            return OutputLimit::Over(class);
        }
        match self.obuf_soft.since_ms() {
            Some(since) => {
                let end = since + limit.soft_secs.saturating_mul(1000) + 1;
                OutputLimit::Soft(class, Duration::from_millis(end.saturating_sub(now)))
            }
            None => OutputLimit::Within,
        }
    }

    /// Executes every complete command in the read buffer; true when the connection must close.
    async fn process(
        &mut self,
        srv: &Arc<Server>,
        stream: &mut TcpStream,
    ) -> std::io::Result<bool> {
        let mut start = 0;
        let mut close = false;
        // The worker's gate, held from one command of the batch to the next while none of
        // them waits (two atomic instructions a command less): dropped before anything
        // that waits and before EXCLUSIVE commands (they take every gate); admission
        // evicts under it.
        let stats = self.stats.clone();
        let mut gate = None;
        // The shard lock a BATCH_LOCK command left taken for the next one of the batch
        // (same key, or same shard: no lock, no unlock, warm cache lines). Kept only while
        // the gate is: released wherever the gate is dropped, before anything waits, and
        // before any command without the flag runs.
        let parked = Parked::new(&srv.keyspace);
        // The batch is parsed first (the commands' limits do not change within it), so
        // that each command's key, a few commands ahead, has its lock line and first
        // bucket loading while the commands before it run: their cache misses overlap
        // (Keyspace::prefetch). What the batch parse leaves (an incomplete, inline or
        // malformed command) is parsed where the loop reaches it, as before. A batch whose
        // first two commands have no key (PINGs) is parsed one command at a time.
        let mut batch = std::mem::take(&mut self.batch);
        // Before AUTH, Redis's tighter limits (10 arguments, 16 KiB bulks) bound what an
        // unauthenticated client can make the server buffer; the batch parse leaves such a
        // client's commands to the loop below, which syncs the flag before each one.
        self.parser.set_auth_required(!self.client.authenticated);
        batch.fill(&mut self.parser, &self.rbuf, 2, &mut self.spans);
        // A lone command (pipeline 1) gets no prefetch from the batch: it would run at once,
        // its key's lines missing. When another connection of this worker has run its
        // commands and holds the replies (a round of ready connections is under way,
        // `crate::busy::Holding`), its key's lines are prefetched and the connection lets
        // the rest of the round run first: the round's misses overlap instead of coming
        // one after another. A lone client (nobody holding) runs at once, as before.
        if batch.len() == 1 && crate::busy::others_hold() && batch.key(&self.rbuf, 0).is_some() {
            let (db, buf) = (self.client.db, &self.rbuf);
            prefetch_key(srv, db, buf, &batch, &self.last_cmd, &mut self.hashes, 0);
            tokio::task::yield_now().await;
        }
        if batch.len() == 2 && (0..2).any(|c| batch.key(&self.rbuf, c).is_some()) {
            batch.extend(&mut self.parser, &self.rbuf, BATCH_MAX, &mut self.spans);
            for c in 0..PREFETCH_AHEAD {
                let (db, buf) = (self.client.db, &self.rbuf);
                prefetch_key(srv, db, buf, &batch, &self.last_cmd, &mut self.hashes, c);
            }
        }
        let mut cmd_no = 0;
        self.clock = None;
        self.client.cluster.confirmed.clear();
        while start < self.rbuf.len() {
            let ready = batch.get(cmd_no);
            let parsed = match ready {
                Some((at, end, _)) => {
                    debug_assert_eq!(at, start, "the loop runs the batch in order");
                    Ok(Some((end - at, RequestKind::Multibulk)))
                }
                None => {
                    // A command before this one may have authenticated (AUTH, HELLO) or
                    // dropped it (RESET).
                    self.parser.set_auth_required(!self.client.authenticated);
                    self.parser.parse(&self.rbuf[start..], &mut self.spans)
                }
            };
            match parsed {
                Ok(Some((consumed, kind))) => {
                    let spans: &[(usize, usize)] = match ready {
                        Some((_, _, spans)) => spans,
                        None => &self.spans,
                    };
                    cmd_no += 1;
                    if !spans.is_empty() {
                        prefetch_key(
                            srv,
                            self.client.db,
                            &self.rbuf,
                            &batch,
                            &self.last_cmd,
                            &mut self.hashes,
                            cmd_no - 1 + PREFETCH_AHEAD,
                        );
                        if self.last_cmd.prefetch_value {
                            prefetch_value(
                                srv,
                                self.client.db,
                                &self.rbuf,
                                &batch,
                                &self.last_cmd,
                                &self.hashes,
                                cmd_no - 1 + PREFETCH_VALUE_AHEAD,
                            );
                        }
                        let data: &[u8] = match kind {
                            RequestKind::Inline => self.parser.inline_buf(),
                            RequestKind::Multibulk => &self.rbuf[start..],
                        };
                        let args = Args::new(data, spans);
                        let server = &self.server;
                        let reuse = self.clock.take();
                        let step = prepare(
                            server,
                            &stats,
                            &mut self.client,
                            &mut self.out,
                            args,
                            &mut self.last_cmd,
                            gate.is_some(),
                            &parked,
                        );
                        let blocked = match step {
                            Step::Done => None,
                            Step::Run(idx, mark)
                                if server.cluster.get().is_none() && !server.pause.active() =>
                            {
                                let mut reuse = reuse;
                                if crate::busy::others_hold()
                                    && server.registry.entry(idx).spec.has(flags::EXCLUSIVE)
                                {
                                    // A script may run long: the replies other connections
                                    // of this worker hold go out first (crate::busy).
                                    parked.release();
                                    gate = None;
                                    reuse = None;
                                    crate::busy::settle().await;
                                }
                                run_now(
                                    server,
                                    &stats,
                                    &mut self.client,
                                    &mut self.out,
                                    args,
                                    &mut self.clock,
                                    reuse,
                                    idx,
                                    mark,
                                    &mut gate,
                                    Some(&parked),
                                )
                            }
                            Step::Run(idx, mark) => {
                                parked.release();
                                gate = None;
                                route_and_run(
                                    server,
                                    &stats,
                                    &mut self.client,
                                    &mut self.out,
                                    args,
                                    &mut self.clock,
                                    reuse,
                                    idx,
                                    mark,
                                )
                                .await
                            }
                        };
                        if let Some(b) = blocked {
                            start += consumed;
                            self.clock = None;
                            parked.release();
                            gate = None;
                            if self.wait_blocked(stream, b).await? {
                                close = true;
                                break;
                            }
                            continue;
                        }
                    }
                    start += consumed;
                    if self.client.close_after_reply || self.client.info.killed.load(Relaxed) {
                        close = true;
                        break;
                    }
                    if self.out.len() >= FLUSH_AT {
                        parked.release();
                        gate = None;
                        self.flush(stream).await?;
                        self.clock = None;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.out.error(&format!("ERR {e}"));
                    self.stats.count_errors(&mut self.out);
                    close = true;
                    break;
                }
            }
        }
        drop(parked);
        drop(gate);
        self.batch = batch;
        if start >= self.rbuf.len() {
            self.rbuf.clear();
        } else if start > 0 {
            self.rbuf.drain(..start);
        }
        Ok(close)
    }
}

/// A connection's [`ClientInfo::rest`] flag, set while it waits for input (when it may be
/// answered by a busy script's hook) and cleared when dropped: before the connection does
/// anything else, closes its socket included.
struct Rest<'a>(Option<&'a ClientInfo>);

impl<'a> Rest<'a> {
    #[inline]
    fn new(info: &'a ClientInfo, at_rest: bool) -> Self {
        if at_rest {
            // Release: a hook that sees the flag sees the connection's current worker.
            info.rest.store(true, std::sync::atomic::Ordering::Release);
            Rest(Some(info))
        } else {
            Rest(None)
        }
    }
}

impl Drop for Rest<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(info) = self.0 {
            info.rest.store(false, Relaxed);
        }
    }
}

/// What ended a connection's wait for input.
enum Input {
    /// This many bytes were read (0: the peer closed).
    Read(usize),
    /// Killed, or handed busy replies ([`ClientInfo::signalled`]).
    Signal,
    /// A pub/sub message (None: the mailbox closed).
    Message(Option<Vec<u8>>),
}

/// `fut`'s output, or None once the connection is [signalled](ClientInfo::signalled)
/// first. While `fut` is pending it registers the task's waker with the connection
/// ([`ClientInfo::waker`]) and then reads the flags, so a kill is never missed: a waker
/// swap and two loads, where a `Notify` waiter takes a lock to enter its list and another
/// to leave it (a tenth of PING's instructions outside the commands).
async fn until_signalled<F: Future>(info: &ClientInfo, busy: bool, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut signal = std::pin::pin!(signalled(info, busy));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        signal.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// Completes once the connection is [signalled](ClientInfo::signalled) (a `select!`
/// branch; see [`until_signalled`]).
fn signalled(info: &ClientInfo, busy: bool) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |cx| {
        if info.signalled(busy) {
            return Poll::Ready(());
        }
        info.waker.register(cx.waker());
        if info.signalled(busy) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
}

/// The next pub/sub message, or never when the client has no mailbox.
async fn recv_message(
    rx: &mut Option<tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>>,
) -> Option<Vec<u8>> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Key hashes by command number, from the first prefetch stage to the second (a ring of
/// 8: the second stage reads command `i`'s a few commands after the first wrote it).
#[derive(Default)]
struct KeyHashes([(usize, u64); 8]);

impl KeyHashes {
    #[inline]
    fn put(&mut self, i: usize, h: u64) {
        self.0[i % 8] = (i + 1, h);
    }

    /// Forgets command `i`'s slot (its command has no key): what an earlier batch left
    /// there must not pass for this one's.
    #[inline]
    fn clear(&mut self, i: usize) {
        self.0[i % 8] = (0, 0);
    }

    /// Command `i`'s hash, if the first stage saw its key.
    #[inline]
    fn get(&self, i: usize) -> Option<u64> {
        let (tag, h) = self.0[i % 8];
        (tag == i + 1).then_some(h)
    }
}

/// Prefetches the key of command `i` of `batch` (parsed from `buf`), if it has one,
/// and its other keys when it is the kept command `last` and that has several (MGET,
/// MSET, DEL: [`prefetch_more_keys`]). The bounds check is inline (a batch of PINGs
/// holds two commands, so most have none to prefetch), the lookup and the prefetch out
/// of line.
#[inline(always)]
fn prefetch_key(
    server: &Server,
    db: usize,
    buf: &[u8],
    batch: &Batch,
    last: &LastCommand,
    hashes: &mut KeyHashes,
    i: usize,
) {
    if i < batch.len() {
        prefetch_parsed(server, db, buf, batch, hashes, i);
        if last.key_step != 0 {
            prefetch_more_keys(server, db, buf, batch, last, i);
        }
    }
}

/// [`prefetch_key`] for a command of the batch; its key's hash goes to `hashes`.
#[inline(never)]
fn prefetch_parsed(
    server: &Server,
    db: usize,
    buf: &[u8],
    batch: &Batch,
    hashes: &mut KeyHashes,
    i: usize,
) {
    match batch.key(buf, i).filter(|k| !k.is_empty()) {
        Some(key) => hashes.put(i, server.keyspace.prefetch(db, key)),
        None => hashes.clear(i),
    }
}

/// The keys after the first of command `i`, when it is the kept command `last` (whose
/// keys run to its last argument, `last.key_step` apart), up to [`PREFETCH_KEYS`] in all:
/// without them, each further key of an MSET or MGET waited for its own cache misses.
#[inline(never)]
fn prefetch_more_keys(
    server: &Server,
    db: usize,
    buf: &[u8],
    batch: &Batch,
    last: &LastCommand,
    i: usize,
) {
    let Some((start, _, spans)) = batch.get(i) else {
        return;
    };
    let Some(&(ns, ne)) = spans.first() else {
        return;
    };
    if !buf
        .get(start + ns..start + ne)
        .is_some_and(|n| last.same(n))
    {
        return;
    }
    let step = usize::from(last.key_step);
    for &(ks, ke) in spans
        .iter()
        .skip(1 + step)
        .step_by(step)
        .take(PREFETCH_KEYS - 1)
    {
        if let Some(key) = buf.get(start + ks..start + ke).filter(|k| !k.is_empty()) {
            server.keyspace.prefetch(db, key);
        }
    }
}

/// The value of command `i`'s key, as [`prefetch_key`] its lines (the second stage),
/// when command `i` is the kept command `last` (a [`flags::PREFETCH_VALUE`] one).
#[inline(always)]
fn prefetch_value(
    server: &Server,
    db: usize,
    buf: &[u8],
    batch: &Batch,
    last: &LastCommand,
    hashes: &KeyHashes,
    i: usize,
) {
    if let Some(h) = hashes.get(i) {
        prefetch_parsed_value(server, db, buf, batch, last, h, i);
    }
}

/// [`prefetch_value`] for a command of the batch whose key hashes to `h`.
#[inline(never)]
fn prefetch_parsed_value(
    server: &Server,
    db: usize,
    buf: &[u8],
    batch: &Batch,
    last: &LastCommand,
    h: u64,
    i: usize,
) {
    if let Some((name, key)) = batch.name_and_key(buf, i) {
        if last.same(name) {
            server.keyspace.prefetch_value(db, key, h);
        }
    }
}

/// A command that asked to block, registered or about to be.
enum Blocked {
    /// Registered with the node's blocking state (single-node mode).
    Local(LocalBlock),
    /// A cluster-mode blocking write, proposed again when its keys are written.
    Cluster(crate::cluster::route::ClusterBlock),
}

/// A single-node blocked command.
struct LocalBlock {
    waiter: Waiter,
    rx: oneshot::Receiver<Wake>,
    deadline: Option<Instant>,
    on_timeout: TimeoutReply,
}

impl Conn {
    /// Blocks the connection until its command is served, times out, is unblocked, or the
    /// client goes away (true: close). Input that arrives meanwhile is buffered.
    async fn wait_blocked(&mut self, stream: &mut TcpStream, b: Blocked) -> std::io::Result<bool> {
        let b = match b {
            Blocked::Local(b) => b,
            Blocked::Cluster(b) => return self.wait_pop(stream, b).await,
        };
        self.flush(stream).await?;
        let server = self.server.clone();
        let id = self.client.id();
        let LocalBlock {
            waiter,
            mut rx,
            deadline,
            on_timeout,
        } = b;
        let first = {
            let _gate = self.stats.gate.lock();
            server.blocking.block(&server, &self.stats, waiter)
        };
        if let Some(reply) = first {
            self.out.buffer_mut().extend_from_slice(&reply);
            self.after_block(&server);
            return Ok(false);
        }
        let info = self.client.info.clone();
        enum Ev {
            Woken(Option<Wake>),
            Timeout,
            Gone,
            Input,
        }
        loop {
            let ev = {
                let sleep = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    w = &mut rx => Ev::Woken(w.ok()),
                    _ = sleep => Ev::Timeout,
                    _ = signalled(&info, false) => Ev::Gone,
                    r = stream.read_buf(&mut self.rbuf) => match r {
                        Ok(0) | Err(_) => Ev::Gone,
                        Ok(_) => Ev::Input,
                    },
                }
            };
            let wake = match ev {
                Ev::Input => {
                    // Input buffered while blocked still counts against the query buffer
                    // limit, as in Redis.
                    let over =
                        self.rbuf.len() as u64 > server.live.query_buffer_limit.load(Relaxed);
                    if info.killed.load(Relaxed) || over {
                        if !server.blocking.cancel(id) {
                            let _ = rx.await;
                        }
                        return Ok(true);
                    }
                    continue;
                }
                Ev::Gone => {
                    if !server.blocking.cancel(id) {
                        let _ = rx.await;
                    }
                    return Ok(true);
                }
                Ev::Timeout => {
                    if server.blocking.cancel(id) {
                        Wake::Timeout
                    } else {
                        match rx.await {
                            Ok(w) => w,
                            Err(_) => Wake::Timeout,
                        }
                    }
                }
                Ev::Woken(Some(w)) => w,
                Ev::Woken(None) => Wake::Timeout,
            };
            match wake {
                Wake::Served(reply) => self.out.buffer_mut().extend_from_slice(&reply),
                Wake::Timeout => on_timeout.write(&mut self.out),
                Wake::Error => self.reply_unblocked(),
            }
            self.after_block(&server);
            return Ok(false);
        }
    }

    /// The reply of a blocked command that CLIENT UNBLOCK ... ERROR ended.
    fn reply_unblocked(&mut self) {
        self.out
            .error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
        self.stats.count_errors(&mut self.out);
    }

    /// Waits for a cluster-mode blocking write's keys to be written and proposes it again,
    /// until it takes something, times out, is unblocked, or the client goes away (true:
    /// close).
    async fn wait_pop(
        &mut self,
        stream: &mut TcpStream,
        b: crate::cluster::route::ClusterBlock,
    ) -> std::io::Result<bool> {
        self.flush(stream).await?;
        let info = self.client.info.clone();
        let limit = &self.server.live.query_buffer_limit;
        loop {
            let sleep = async {
                match b.deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = b.notify.notified() => {
                    match b.unblocked.load(Relaxed) {
                        crate::cluster::block::UNBLOCK_TIMEOUT => {
                            self.out.buffer_mut().extend_from_slice(&b.on_timeout);
                            return Ok(false);
                        }
                        crate::cluster::block::UNBLOCK_ERROR => {
                            self.reply_unblocked();
                            return Ok(false);
                        }
                        _ => {}
                    }
                    if let Some(reply) = b.retry().await {
                        self.out.buffer_mut().extend_from_slice(&reply);
                        return Ok(false);
                    }
                }
                _ = sleep => {
                    self.out.buffer_mut().extend_from_slice(&b.on_timeout);
                    return Ok(false);
                }
                _ = signalled(&info, false) => return Ok(true),
                r = stream.read_buf(&mut self.rbuf) => match r {
                    Ok(0) | Err(_) => return Ok(true),
                    Ok(_) => {
                        if info.killed.load(Relaxed) || self.rbuf.len() as u64 > limit.load(Relaxed) {
                            return Ok(true);
                        }
                    }
                },
            }
        }
    }

    /// Serves clients blocked on keys written by this client's served command.
    fn after_block(&mut self, server: &Arc<Server>) {
        if !self.client.ready_keys.is_empty() {
            let _gate = self.stats.gate.lock();
            server
                .blocking
                .serve(server, &self.stats, &mut self.client.ready_keys);
        }
    }
}

/// What [`prepare`] decided about a command.
enum Step {
    /// Answered already (an error before it ran, or QUEUED inside MULTI).
    Done,
    /// To be run: its registry index and the output position its reply starts at.
    Run(usize, usize),
}

/// The first half of a command, which never waits: applies CLIENT REPLY SKIP, looks the
/// command up, checks arity, auth, the pub/sub context and eviction, and queues it inside
/// MULTI. Errors found here make a transaction being queued fail at EXEC (Redis's
/// flagTransaction); errors of MULTI/WATCH themselves do not. `gate_held`: the caller holds
/// this worker's gate (eviction must not take it again).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn prepare(
    server: &Server,
    stats: &WorkerStats,
    client: &mut Client,
    out: &mut ReplyWriter,
    args: Args<'_>,
    last_cmd: &mut LastCommand,
    gate_held: bool,
    parked: &Parked<'_>,
) -> Step {
    // CLIENT REPLY SKIP applies to the command after the SKIP.
    if !matches!(client.reply_mode, ReplyMode::On) {
        match client.reply_mode {
            ReplyMode::SkipNext => client.reply_mode = ReplyMode::Skipping,
            ReplyMode::Skipping => client.reply_mode = ReplyMode::On,
            _ => {}
        }
    }
    let mark = out.len();
    let reg = &server.registry;
    let result = match last_cmd.resolve(server, args) {
        Err(e) => Err(e),
        Ok(idx) => {
            let spec = reg.entry(idx).spec;
            // Only the rejections count here (the index is bounds-checked where used).
            let rejected = || WorkerStats::add(&stats.cmd[idx].rejected, 1);
            if !spec.arity_ok(args.len()) {
                rejected();
                Err(CmdError::Arity(reg.entry(idx).full_name.clone()))
            } else if !client.authenticated && !spec.has(flags::NO_AUTH) {
                rejected();
                Err(CmdError::raw("NOAUTH Authentication required."))
            } else if !spec.has(flags::SUB_OK) && client.in_resp2_pubsub(out.protocol()) {
                Err(CmdError::err(format!(
                    "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                    reg.entry(idx).full_name
                )))
            } else if let Err(e) =
                crate::evict::admit(server, stats, client, spec, gate_held, parked)
            {
                rejected();
                Err(e)
            } else if client.multi.is_some() && !spec.has(flags::TX_CONTROL) {
                let busy = server.busy.load(Relaxed);
                if spec.has(flags::NO_MULTI) {
                    Err(CmdError::err("Command not allowed inside a transaction"))
                } else if busy != 0 && !spec.has(flags::ALLOW_BUSY) {
                    // Beside a busy script (on another worker) a command is refused, not
                    // queued, and the transaction then aborts, as in Redis.
                    rejected();
                    Err(crate::server::busy_error(busy))
                } else {
                    if let Some(m) = client.multi.as_mut() {
                        m.queued.push(Queued {
                            cmd_index: idx,
                            args: OwnedArgs::from_args(args),
                        });
                        client.info.multi_len.store(m.queued.len() as i64, Relaxed);
                    }
                    out.simple(b"QUEUED");
                    Ok(())
                }
            } else {
                return Step::Run(idx, mark);
            }
        }
    };
    finish(stats, client, out, mark, result, true);
    Step::Done
}

/// The half of a command that may wait, for a command [`prepare`] let through in cluster
/// mode or while CLIENT PAUSE is set: routes it (cluster mode), waits out the pause, then
/// runs it with [`run_now`]. Returns the block request of a command that found nothing to
/// take. Only built when needed: a future moved by value twice a command cost a tenth of
/// PING's instructions.
///
/// `reuse` is the clock reading the previous command of this batch ended at (see
/// `Conn::clock`): the command's time when it runs without waiting.
#[allow(clippy::too_many_arguments)]
async fn route_and_run(
    server: &Arc<Server>,
    stats: &WorkerStats,
    client: &mut Client,
    out: &mut ReplyWriter,
    args: Args<'_>,
    clock: &mut Option<u64>,
    mut reuse: Option<u64>,
    idx: usize,
    mut mark: usize,
) -> Option<Blocked> {
    let spec = server.registry.entry(idx).spec;
    if let Some(cl) = server.cluster.get() {
        let routed =
            crate::cluster::route::route(cl, server, client, out, idx, spec, args, &mut mark).await;
        match routed {
            Routed::Local => {
                if !client.cluster.pending.is_empty() {
                    reuse = None;
                    crate::cluster::route::drain(client, out).await;
                    mark = out.len();
                }
            }
            Routed::Done(r) => {
                client.info.last_cmd.store(idx + 1, Relaxed);
                // It ran through its group's log (the apply shows nothing to MONITOR, scripts
                // included): shown here, for the client that sent it. Redirections and
                // refusals ran nothing.
                if r.is_ok() && server.observe.monitors.active() && !spec.has(flags::ADMIN) {
                    server.observe.monitors.feed(client, args, false);
                }
                return finish(stats, client, out, mark, r, false);
            }
            Routed::Block(b) => {
                client.info.last_cmd.store(idx + 1, Relaxed);
                return Some(Blocked::Cluster(b));
            }
        }
    }
    if server.pause.active() {
        let writes = crate::server::pause_writes(server, client, idx, args);
        let mut waiting = None;
        loop {
            // Registered before the pause is looked at: an UNPAUSE in between still wakes it.
            let unpaused = server.pause.notify.notified();
            tokio::pin!(unpaused);
            unpaused.as_mut().enable();
            let Some(wait) = server.pause.wait_for(writes) else {
                break;
            };
            reuse = None;
            waiting.get_or_insert_with(|| server.pause.wait_guard());
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = unpaused => {}
            }
        }
    }
    let mut gate = None;
    run_now(
        server, stats, client, out, args, clock, reuse, idx, mark, &mut gate, None,
    )
}

/// The second half of a command, once routing and CLIENT PAUSE let it run here: takes the
/// worker's gate into `gate` (unless it holds it already; an EXCLUSIVE command empties it
/// instead), runs it, accounts for it and serves clients its writes unblocked. The caller
/// drops the gate before it waits for anything.
///
/// `parked` (single-node batches): a BATCH_LOCK command locks through it and leaves its
/// shard locked for the next; any other command releases it first. Never with the AOF on
/// (its order token is taken after the shard otherwise; turning it on takes every gate,
/// so it cannot start while a shard is kept).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn run_now<'s>(
    server: &Arc<Server>,
    stats: &'s WorkerStats,
    client: &mut Client,
    out: &mut ReplyWriter,
    args: Args<'_>,
    clock: &mut Option<u64>,
    mut reuse: Option<u64>,
    idx: usize,
    mark: usize,
    gate: &mut Option<parking_lot::MutexGuard<'s, ()>>,
    parked: Option<&Parked<'_>>,
) -> Option<Blocked> {
    let reg = &server.registry;
    let spec = reg.entry(idx).spec;
    client.info.last_cmd.store(idx + 1, Relaxed);
    let batch_lock = spec.has(flags::BATCH_LOCK);
    if !batch_lock {
        if let Some(p) = parked {
            p.release();
        }
    }
    if spec.has(flags::EXCLUSIVE) {
        // EXEC (and scripts) take every worker's gate themselves.
        *gate = None;
    } else if gate.is_none() {
        match acquire_gate(server, stats, spec, &mut reuse) {
            Ok(g) => *gate = g,
            Err(e) => return finish(stats, client, out, mark, Err(e), false),
        }
    }
    // Eviction (before the command) may have taken a while.
    let now = match reuse {
        Some(t) if !server.evict.enabled() => t,
        _ => clock::now_ns(),
    };
    let park = match parked {
        Some(p) if batch_lock && gate.is_some() && !server.aof.on() => Some(p),
        Some(p) => {
            p.release();
            None
        }
        None => None,
    };
    let mut ctx = Ctx {
        server,
        client,
        out,
        stats,
        now,
        rng: CmdRng::Thread,
        park,
    };
    let (r, ended) = crate::exec::run_command_inline(&mut ctx, idx, args, now);
    *clock = Some(ended);
    if let Some(req) = client.block_request.take() {
        if r.is_ok() {
            let (tx, rx) = oneshot::channel();
            let (deadline, on_timeout) = (req.deadline, req.on_timeout);
            let waiter = Waiter::new(client, out.protocol(), idx, args, req, tx);
            return Some(Blocked::Local(LocalBlock {
                waiter,
                rx,
                deadline,
                on_timeout,
            }));
        }
    }
    if !client.ready_keys.is_empty() {
        // Serving blocked clients locks their keys' shards.
        if let Some(p) = parked {
            p.release();
        }
        let _gate = gate.is_none().then(|| stats.gate.lock());
        server.blocking.serve(server, stats, &mut client.ready_keys);
    }
    // CLIENT CACHING applies to the next command (or transaction) only.
    if let Some(t) = client.tracking.as_mut() {
        if client.multi.is_none() && !std::mem::take(&mut t.keep_caching) {
            t.caching = false;
        }
    }
    finish(stats, client, out, mark, r, false)
}

/// Writes a command's error (flagging a transaction being queued when the command was
/// `rejected` before running) and applies CLIENT REPLY OFF/SKIP.
#[inline(always)]
fn finish(
    stats: &WorkerStats,
    client: &mut Client,
    out: &mut ReplyWriter,
    mark: usize,
    result: CmdResult,
    rejected: bool,
) -> Option<Blocked> {
    if let Err(e) = result {
        error_reply(stats, client, out, mark, e, rejected);
    }
    // Pub/sub confirmations are sent whatever CLIENT REPLY says (Redis's CLIENT_PUSHING).
    let pushing = std::mem::take(&mut client.pushing);
    if matches!(client.reply_mode, ReplyMode::Off | ReplyMode::Skipping) && !pushing {
        out.truncate(mark);
    }
    None
}

/// [`finish`]'s error case, out of line: the reply from `mark` on becomes the error.
#[inline(never)]
fn error_reply(
    stats: &WorkerStats,
    client: &mut Client,
    out: &mut ReplyWriter,
    mark: usize,
    e: CmdError,
    rejected: bool,
) {
    if let Some(m) = client.multi.as_mut() {
        m.dirty |= rejected;
    }
    out.truncate(mark);
    out.error(&e.to_string());
    stats.count_errors(out);
}

/// Takes this worker's gate for a command. While a script or function has run past
/// `busy-reply-threshold` (it holds every gate), commands get `-BUSY`, and ALLOW_BUSY ones
/// (SCRIPT KILL, SHUTDOWN NOSAVE, ...) run without the gate.
/// A wait makes the `clock` reading kept from the previous command stale: it is cleared.
fn acquire_gate<'s>(
    server: &Server,
    stats: &'s WorkerStats,
    spec: &CommandSpec,
    clock: &mut Option<u64>,
) -> Result<Option<parking_lot::MutexGuard<'s, ()>>, CmdError> {
    if let Some(g) = stats.gate.try_lock() {
        return Ok(Some(g));
    }
    *clock = None;
    match server.wait_gate(&stats.gate) {
        Ok(g) => Ok(Some(g)),
        Err(_) if spec.has(flags::ALLOW_BUSY) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The registry index of the command (or subcommand) named by `args`, or the error a
/// client gets for an unknown one (also the Raft apply's, [`crate::cluster`]).
pub(crate) fn resolve(server: &Server, args: Args<'_>) -> Result<usize, CmdError> {
    let reg = &server.registry;
    reg.resolve(&args).map_err(|why| match why {
        Unresolved::Unknown => unknown_command(args),
        Unresolved::MissingSubcommand(idx) => CmdError::Arity(reg.entry(idx).full_name.clone()),
        Unresolved::UnknownSubcommand(idx) => CmdError::err(format!(
            "unknown subcommand '{}'. Try {} HELP.",
            lossy(args.arg(1), 128),
            reg.entry(idx).spec.name.to_ascii_uppercase()
        )),
    })
}

fn lossy(b: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(max)]);
    s.replace(['\r', '\n'], " ")
}

fn unknown_command(args: Args<'_>) -> CmdError {
    let mut rest = String::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push('\'');
        rest.push_str(&lossy(a, room));
        rest.push_str("' ");
    }
    CmdError::err(format!(
        "unknown command '{}', with args beginning with: {}",
        lossy(args.arg(0), 128),
        rest
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_command_compares_every_byte_and_the_length() {
        let names: Vec<Vec<u8>> = (1..=16u8)
            .map(|n| (0..n).map(|i| b'a' + i).collect())
            .collect();
        for name in &names {
            let mut last = LastCommand {
                len: name.len() as u8,
                idx: 7,
                ..Default::default()
            };
            last.name[..name.len()].copy_from_slice(name);
            assert!(last.same(name));
            for other in &names {
                assert_eq!(last.same(other), other == name, "{name:?} {other:?}");
            }
            for i in 0..name.len() {
                let mut changed = name.clone();
                changed[i] ^= 0x20;
                assert!(!last.same(&changed), "{name:?} byte {i}");
            }
        }
        // A name longer than the kept bytes never matches.
        let last = LastCommand {
            len: 16,
            name: *b"abcdefghijklmnop",
            idx: 1,
            prefetch_value: false,
            key_step: 0,
        };
        assert!(!last.same(b"abcdefghijklmnopq"));
    }

    /// The kept command carries its PREFETCH_VALUE flag: GET's batches prefetch values,
    /// SET's and SETNX's do not.
    #[test]
    fn the_kept_command_says_whether_values_are_prefetched() {
        let server = Server::new(crate::config::Config::default(), 1, None, None);
        let mut last = LastCommand::default();
        for (name, want) in [
            ("GET", true),
            ("SET", false),
            ("mget", true),
            ("SETNX", false),
            ("getrange", true),
            ("LPUSH", false),
        ] {
            let spans = [(0, name.len()), (name.len(), name.len() + 1)];
            let data = format!("{name}k");
            let args = Args::new(data.as_bytes(), &spans);
            let idx = last.resolve(&server, args).expect("a command");
            assert_eq!(last.idx as usize, idx);
            assert_eq!(last.prefetch_value, want, "{name}");
        }
        let reg = &server.registry;
        let flagged: Vec<&str> = (0..reg.len())
            .map(|i| reg.entry(i).spec)
            .filter(|s| s.has(flags::PREFETCH_VALUE))
            .map(|s| s.name)
            .collect();
        assert_eq!(
            flagged,
            ["get", "getset", "getdel", "getex", "mget", "getrange", "substr"]
        );
    }

    /// The kept command carries the step between its keys when they run to its last
    /// argument (the first prefetch stage then takes them all); single-key commands and
    /// commands with other key layouts get 0.
    #[test]
    fn the_kept_command_says_where_its_keys_are() {
        let server = Server::new(crate::config::Config::default(), 1, None, None);
        let mut last = LastCommand::default();
        for (name, want) in [
            ("MGET", 1),
            ("GET", 0),
            ("mset", 2),
            ("MSETNX", 2),
            ("del", 1),
            ("EXISTS", 1),
            ("LPUSH", 0),
            ("BLPOP", 0),
            ("SINTER", 1),
        ] {
            let spans = [(0, name.len()), (name.len(), name.len() + 1)];
            let data = format!("{name}k");
            let args = Args::new(data.as_bytes(), &spans);
            last.resolve(&server, args).expect("a command");
            assert_eq!(last.key_step, want, "{name}");
        }
    }

    #[test]
    fn key_hashes_answer_only_for_their_command() {
        let mut h = KeyHashes::default();
        assert_eq!(h.get(0), None, "nothing yet, not a zero hash");
        h.put(3, 33);
        assert_eq!(h.get(3), Some(33));
        assert_eq!(h.get(11), None, "same slot, another command");
        h.put(11, 0);
        assert_eq!((h.get(3), h.get(11)), (None, Some(0)));
        h.clear(11);
        assert_eq!(h.get(11), None);
    }

    fn info() -> Arc<ClientInfo> {
        let addr = "127.0.0.1:1".parse().unwrap();
        Arc::new(ClientInfo::new(1, addr, addr, -1))
    }

    #[tokio::test]
    async fn until_signalled_gives_the_output_or_stops_at_a_kill() {
        let i = info();
        assert_eq!(until_signalled(&i, false, async { 5 }).await, Some(5));
        // Pending, then killed from another thread: woken, and None.
        let killer = {
            let i = i.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                i.kill();
            })
        };
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            until_signalled(&i, false, std::future::pending::<()>()),
        )
        .await;
        killer.join().unwrap();
        assert_eq!(r, Ok(None));
        // Killed before the wait: at once.
        assert_eq!(
            until_signalled(&i, false, std::future::pending::<()>()).await,
            None
        );
    }

    #[tokio::test]
    async fn busy_replies_signal_only_the_input_wait() {
        let i = info();
        i.busy_pending.store(true, Relaxed);
        assert_eq!(
            until_signalled(&i, true, std::future::pending::<()>()).await,
            None
        );
        let waited = tokio::time::timeout(
            Duration::from_millis(50),
            until_signalled(&i, false, std::future::pending::<()>()),
        )
        .await;
        assert!(
            waited.is_err(),
            "a flush or a block does not stop for busy replies"
        );
        // The select! branch: woken by a later kill.
        let j = info();
        let killer = {
            let j = j.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                j.kill();
            })
        };
        tokio::time::timeout(Duration::from_secs(10), signalled(&j, false))
            .await
            .expect("woken by the kill");
        killer.join().unwrap();
    }
}
