//! The node: shared state ([`Server`]), listeners, worker threads, the active-expiry
//! thread and shutdown.
//!
//! One acceptor thread accepts connections and hands them in turn to the active worker
//! threads ([`crate::balance`]); each worker runs a single-threaded tokio runtime that
//! serves its connections until they close or move to another worker.
//! Nothing on the command path takes a global lock: commands lock only their keys' shards.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use resp::Args;
use storage::{clock, Keyspace};
use tokio::sync::{mpsc, Notify};
use tracing::{error, info, warn};

use crate::client::ClientTable;
use crate::config::Config;
use crate::error::CmdError;
use crate::registry::{flags, Registry};
use crate::stats::WorkerStats;

/// Frees large values on a background thread (UNLINK, FLUSH* ASYNC), so a command never
/// stalls its worker's other connections while a big collection is dropped.
pub struct LazyFree {
    tx: Mutex<Option<std::sync::mpsc::Sender<Box<dyn Send>>>>,
    /// Objects handed over and not yet freed (INFO lazyfree_pending_objects).
    pub pending: Arc<AtomicU64>,
    /// Objects freed by the background thread (INFO lazyfreed_objects).
    pub freed: Arc<AtomicU64>,
}

impl Default for LazyFree {
    fn default() -> Self {
        LazyFree {
            tx: Mutex::new(None),
            pending: Arc::new(AtomicU64::new(0)),
            freed: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// Values whose free effort passes this are freed in the background (Redis's
/// `LAZYFREE_THRESHOLD`).
pub const LAZYFREE_THRESHOLD: usize = 64;

impl LazyFree {
    /// Drops `obj` on the lazy-free thread (started on first use), or here if it can't run.
    pub fn free(&self, obj: Box<dyn Send>) {
        let mut tx = self.tx.lock();
        if tx.is_none() {
            let (s, r) = std::sync::mpsc::channel::<Box<dyn Send>>();
            let (pending, freed) = (self.pending.clone(), self.freed.clone());
            let started = std::thread::Builder::new()
                .name("ember-lazyfree".into())
                .spawn(move || {
                    for obj in r {
                        drop(obj);
                        pending.fetch_sub(1, Relaxed);
                        freed.fetch_add(1, Relaxed);
                    }
                });
            if started.is_err() {
                return;
            }
            *tx = Some(s);
        }
        if let Some(t) = tx.as_ref() {
            self.pending.fetch_add(1, Relaxed);
            if let Err(e) = t.send(obj) {
                self.pending.fetch_sub(1, Relaxed);
                drop(e);
            }
        }
    }
}

/// [`Server::busy`]: a script (EVAL) is past its busy threshold.
pub const BUSY_SCRIPT: u8 = 1;
/// [`Server::busy`]: a function (FCALL) is past its busy threshold.
pub const BUSY_FUNCTION: u8 = 2;

/// The `-BUSY` error a command gets while a script ([`BUSY_SCRIPT`]) or function runs past
/// `busy-reply-threshold`.
pub fn busy_error(kind: u8) -> CmdError {
    CmdError::raw(if kind == BUSY_FUNCTION {
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    } else {
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
    })
}

/// CLIENT PAUSE state.
#[derive(Default)]
pub struct Pause {
    /// Deadline in ms since the epoch; 0 when not paused.
    until_ms: AtomicU64,
    /// True for PAUSE ALL, false for PAUSE WRITE.
    all: AtomicBool,
    /// Woken on CLIENT UNPAUSE.
    pub notify: Notify,
    /// Clients waiting out the pause now (counted in INFO's blocked_clients, as Redis
    /// counts its postponed clients).
    waiting: AtomicUsize,
}

/// Counts a client as waiting out a pause while it lives ([`Pause::waiting`]).
pub struct PauseWait<'a>(&'a Pause);

impl Drop for PauseWait<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Relaxed);
    }
}

impl Pause {
    /// Pauses clients until `until_ms` (ms since epoch), all commands or only writes.
    pub fn pause(&self, until_ms: u64, all: bool) {
        // A new pause may only extend or strengthen the current one, as in Redis.
        let cur = self.until_ms.load(Relaxed);
        if cur != 0 && cur > until_ms && self.all.load(Relaxed) && !all {
            return;
        }
        self.all.store(
            all || (cur > clock::now_ms() && self.all.load(Relaxed)),
            Relaxed,
        );
        self.until_ms.store(until_ms.max(cur), Relaxed);
    }

    /// Ends any pause.
    pub fn unpause(&self) {
        self.until_ms.store(0, Relaxed);
        self.notify.notify_waiters();
    }

    /// True while a pause is set (it may have run out already: [`Pause::wait_for`] tells).
    #[inline]
    pub fn active(&self) -> bool {
        self.until_ms.load(Relaxed) != 0
    }

    /// How long a command must still wait, if it is paused; `writes` tells whether it
    /// counts as a write ([`pause_writes`]), which PAUSE WRITE holds back.
    pub fn wait_for(&self, writes: bool) -> Option<Duration> {
        let until = self.until_ms.load(Relaxed);
        if until == 0 {
            return None;
        }
        let now = clock::now_ms();
        if now >= until {
            return None;
        }
        (self.all.load(Relaxed) || writes).then(|| Duration::from_millis(until - now))
    }

    /// Counts the caller as a client waiting out the pause until the guard drops.
    pub fn wait_guard(&self) -> PauseWait<'_> {
        self.waiting.fetch_add(1, Relaxed);
        PauseWait(self)
    }

    /// Clients waiting out the pause now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Relaxed)
    }
}

/// Whether command `idx` with `args`, sent by `client`, counts as a write for CLIENT PAUSE
/// WRITE, as Redis decides: a `write` or `may-replicate` command, except the scripts and
/// functions declared `no-writes` (and EVAL_RO, EVALSHA_RO, FCALL_RO); EXEC when a queued
/// command counts as one.
pub fn pause_writes(
    server: &Server,
    client: &crate::client::Client,
    idx: usize,
    args: Args<'_>,
) -> bool {
    let spec = server.registry.entry(idx).spec;
    if spec.has(flags::RUNS_QUEUED) {
        return client.multi.as_ref().is_some_and(|m| {
            m.queued
                .iter()
                .any(|q| command_writes(server, q.cmd_index, q.args.args()))
        });
    }
    command_writes(server, idx, args)
}

/// [`pause_writes`] for one command: what its spec says, or its [`may_write`] hook
/// (scripts, by their flags).
///
/// [`may_write`]: crate::registry::CommandSpec::may_write
pub fn command_writes(server: &Server, idx: usize, args: Args<'_>) -> bool {
    let spec = server.registry.entry(idx).spec;
    match spec.may_write {
        Some(f) => f(server, args),
        None => spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE),
    }
}

/// Configuration values read on hot paths, kept as atomics.
#[derive(Default)]
pub struct Live {
    /// proto-max-bulk-len.
    pub proto_max_bulk_len: AtomicU64,
    /// client-query-buffer-limit.
    pub query_buffer_limit: AtomicU64,
    /// timeout (seconds; 0 = never).
    pub timeout_secs: AtomicU64,
    /// maxclients.
    pub maxclients: AtomicU64,
    /// tcp-keepalive (seconds).
    pub tcp_keepalive: AtomicU64,
    /// protected-mode.
    pub protected_mode: AtomicBool,
    /// Whether requirepass is set.
    pub auth_required: AtomicBool,
    /// Bumped on every CONFIG SET so connections refresh cached limits.
    pub epoch: AtomicU64,
    /// client-output-buffer-limit (shared with every mailbox).
    pub obuf: Arc<crate::obuf::Limits>,
    /// latency-tracking: per-command latency histograms (LATENCY HISTOGRAM, INFO
    /// latencystats).
    pub latency_tracking: AtomicBool,
}

/// Changes the log level at run time (CONFIG SET loglevel).
pub type LogReload = Box<dyn Fn(&str) + Send + Sync>;

/// The node's shared state.
pub struct Server {
    /// The keyspace.
    pub keyspace: Keyspace,
    /// Current configuration.
    pub config: RwLock<Config>,
    /// Hot copies of some configuration values.
    pub live: Live,
    /// Every command.
    pub registry: Registry,
    /// Connected clients.
    pub clients: ClientTable,
    /// Per-worker counters.
    pub workers: Vec<Arc<WorkerStats>>,
    /// Number of worker threads.
    pub threads: usize,
    /// TCP port.
    pub port: u16,
    /// Path of the config file, if any.
    pub config_file: Option<String>,
    /// Process start.
    pub started: Instant,
    /// Random 40-hex-digit run id.
    pub run_id: String,
    /// Next client id.
    pub next_client_id: AtomicU64,
    /// Number of connected clients (maxclients check).
    pub connected: AtomicUsize,
    /// Connections refused by maxclients.
    pub rejected_conns: AtomicU64,
    /// The keyspace's expired-key total at the last CONFIG RESETSTAT.
    pub expired_base: AtomicU64,
    /// CLIENT PAUSE.
    pub pause: Pause,
    /// Clients blocked on keys.
    pub blocking: crate::blocking::Blocking,
    /// Set while a script ([`BUSY_SCRIPT`]) or function ([`BUSY_FUNCTION`]) holding every
    /// gate has run past `busy-reply-threshold`: other commands then answer `-BUSY`.
    pub busy: std::sync::atomic::AtomicU8,
    /// Lua scripting: script cache, function libraries, the running script (kill flag).
    pub scripting: crate::script::Scripting,
    /// Keys watched by clients (WATCH).
    pub watches: crate::watch::Watches,
    /// Pub/sub subscriptions.
    pub pubsub: crate::pubsub::PubSub,
    /// Client-side caching (CLIENT TRACKING).
    pub tracking: crate::tracking::Tracking,
    /// Background freeing of large values.
    pub lazyfree: LazyFree,
    /// RDB snapshots: SAVE/BGSAVE state and save points.
    pub snapshots: crate::snapshot::Snapshots,
    /// The append-only file.
    pub aof: crate::aof::Aof,
    /// Set when SHUTDOWN or a signal asks the node to stop.
    pub shutting_down: AtomicBool,
    /// Wakes the acceptor to shut down.
    pub shutdown: Notify,
    /// Applies log level changes.
    pub log_reload: Option<LogReload>,
    /// Keyspace notifications (notify-keyspace-events).
    pub notify: crate::notify::Notifier,
    /// DEBUG SET-ACTIVE-EXPIRE 0: the active expiry cycle is paused.
    pub active_expire_off: AtomicBool,
    /// maxmemory and eviction.
    pub evict: crate::evict::Evictor,
    /// Cluster mode: the node's groups and peers (set once at startup).
    pub cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
    /// Which workers take connections, and connections on their way between workers.
    pub balance: crate::balance::Balance,
    /// SLOWLOG, LATENCY and MONITOR.
    pub observe: crate::observe::Observers,
}

impl Server {
    /// A node with `config`, its command registry and `threads` workers' counters.
    pub fn new(
        config: Config,
        threads: usize,
        config_file: Option<String>,
        log_reload: Option<LogReload>,
    ) -> Self {
        let registry = Registry::new(&crate::cmd::families());
        let dbs = config.get_u64("databases") as usize;
        let shards = (threads * 64).max(1024);
        let workers = (0..threads)
            .map(|_| Arc::new(WorkerStats::new(registry.len())))
            .collect();
        let port = config.get_u64("port") as u16;
        let run_id = (0..40)
            .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
            .collect();
        let s = Server {
            keyspace: Keyspace::new(dbs, shards),
            config: RwLock::new(config),
            live: Live::default(),
            registry,
            clients: ClientTable::default(),
            workers,
            threads,
            port,
            config_file,
            started: Instant::now(),
            run_id,
            next_client_id: AtomicU64::new(1),
            connected: AtomicUsize::new(0),
            rejected_conns: AtomicU64::new(0),
            expired_base: AtomicU64::new(0),
            pause: Pause::default(),
            blocking: Default::default(),
            busy: Default::default(),
            scripting: crate::script::Scripting::new(),
            watches: Default::default(),
            pubsub: Default::default(),
            tracking: Default::default(),
            lazyfree: Default::default(),
            snapshots: Default::default(),
            aof: Default::default(),
            shutting_down: AtomicBool::new(false),
            shutdown: Notify::new(),
            log_reload,
            notify: Default::default(),
            active_expire_off: AtomicBool::new(false),
            evict: Default::default(),
            cluster: Default::default(),
            balance: crate::balance::Balance::new(threads),
            observe: Default::default(),
        };
        s.apply_config();
        s
    }

    /// Takes every worker's gate, in order: no other command runs until they are dropped
    /// (EXEC, scripts). The caller must not hold its own worker's gate.
    pub fn lock_gates(&self) -> Vec<parking_lot::MutexGuard<'_, ()>> {
        self.workers.iter().map(|w| w.gate.lock()).collect()
    }

    /// As [`Server::lock_gates`], but gives up with `-BUSY` while a script or function is
    /// past its busy threshold (a script sent meanwhile, as Redis answers it).
    pub fn lock_gates_or_busy(&self) -> Result<Vec<parking_lot::MutexGuard<'_, ()>>, CmdError> {
        self.workers
            .iter()
            .map(|w| self.wait_gate(&w.gate))
            .collect()
    }

    /// Waits for `gate`, or returns the `-BUSY` error once a script or function holding
    /// every gate is past its busy threshold.
    pub fn wait_gate<'g>(
        &self,
        gate: &'g Mutex<()>,
    ) -> Result<parking_lot::MutexGuard<'g, ()>, CmdError> {
        loop {
            if let Some(g) = gate.try_lock_for(Duration::from_millis(2)) {
                return Ok(g);
            }
            match self.busy.load(Relaxed) {
                0 => continue,
                kind => return Err(busy_error(kind)),
            }
        }
    }

    /// Copies configuration values into [`Live`] and applies side effects.
    pub fn apply_config(&self) {
        let c = self.config.read();
        let l = &self.live;
        l.proto_max_bulk_len
            .store(c.get_u64("proto-max-bulk-len"), Relaxed);
        l.query_buffer_limit
            .store(c.get_u64("client-query-buffer-limit"), Relaxed);
        l.timeout_secs.store(c.get_u64("timeout"), Relaxed);
        l.maxclients.store(c.get_u64("maxclients"), Relaxed);
        l.tcp_keepalive.store(c.get_u64("tcp-keepalive"), Relaxed);
        l.protected_mode
            .store(c.get_bool("protected-mode"), Relaxed);
        l.auth_required
            .store(!c.get("requirepass").is_empty(), Relaxed);
        l.obuf.set_text(c.get("client-output-buffer-limit"));
        l.latency_tracking
            .store(c.get_bool("latency-tracking"), Relaxed);
        self.observe.configure(
            c.get("slowlog-log-slower-than").parse().unwrap_or(10_000),
            c.get_u64("slowlog-max-len"),
            c.get_u64("latency-monitor-threshold"),
        );
        self.tracking.set_max_keys(
            usize::try_from(c.get_u64("tracking-table-max-keys")).unwrap_or(usize::MAX),
        );
        storage::compress::set_policy(storage::compress::Policy {
            enabled: c.get_bool("compression"),
            threshold: usize::try_from(c.get_u64("compression-threshold")).unwrap_or(usize::MAX),
        });
        self.evict.configure(&c);
        set_jemalloc_bg_thread(c.get_bool("jemalloc-bg-thread"));
        let events = crate::notify::parse_flags(c.get("notify-keyspace-events")).unwrap_or(0);
        self.notify.set(events);
        self.keyspace
            .set_recording(crate::notify::recording_for(events));
        l.epoch.fetch_add(1, Relaxed);
        if let Some(f) = &self.log_reload {
            f(c.get("loglevel"));
        }
    }

    /// Asks the node to stop.
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Relaxed);
        self.shutdown.notify_one();
    }

    /// Seconds since start.
    pub fn uptime(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}

/// Starts the node and blocks until it shuts down.
pub fn run(
    config: Config,
    config_file: Option<String>,
    log_reload: Option<LogReload>,
) -> Result<(), String> {
    let threads = match config.get_u64("threads") {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n => n as usize,
    };
    if config.get_bool("disable-thp") {
        disable_thp();
    }
    let listeners = bind_all(&config)?;
    // The config file path must survive the chdir below (CONFIG REWRITE, INFO config_file).
    let config_file = config_file.map(|f| {
        std::fs::canonicalize(&f)
            .map(|p| p.display().to_string())
            .unwrap_or(f)
    });
    let dir = config.get("dir");
    if !dir.is_empty() {
        std::env::set_current_dir(dir).map_err(|e| format!("Can't chdir to '{dir}': {e}"))?;
    }
    let cluster = config.get_bool("cluster-enabled");
    if cluster && config.get_bool("appendonly") {
        return Err(
            "cluster-enabled yes needs appendonly no: the Raft log is the durability".into(),
        );
    }
    let server = Arc::new(Server::new(
        config.clone(),
        threads,
        config_file,
        log_reload,
    ));
    if cluster {
        // The keyspace comes back from each group's snapshot and log, not from an RDB.
        let c = crate::cluster::Cluster::start(&server, &config)?;
        let _ = server.cluster.set(c);
    } else {
        if !crate::aof::load_at_startup(&server)? {
            crate::snapshot::load_at_startup(&server)?;
        }
        crate::aof::start(&server)?;
    }

    let mut handoffs = Vec::with_capacity(threads);
    let mut inboxes = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = mpsc::unbounded_channel();
        handoffs.push(tx);
        inboxes.push(rx);
    }
    // Set before any worker runs: a worker may hand a connection to another at once.
    server.balance.set_handoffs(handoffs);
    for (i, rx) in inboxes.into_iter().enumerate() {
        let server = server.clone();
        let stats = server.workers[i].clone();
        std::thread::Builder::new()
            .name(format!("ember-worker-{i}"))
            .spawn(move || worker_main(server, stats, i, rx))
            .map_err(|e| format!("can't start worker thread: {e}"))?;
    }
    crate::balance::spawn(server.clone())?;
    spawn_expiry(server.clone())?;
    spawn_cron(server.clone())?;
    crate::cmd::server::spawn_sampler(server.clone())?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        for l in listeners {
            let l = tokio::net::TcpListener::from_std(l).map_err(|e| e.to_string())?;
            tokio::spawn(accept_loop(server.clone(), l));
        }
        info!(
            port = server.port,
            threads,
            version = env!("CARGO_PKG_VERSION"),
            "Ready to accept connections tcp"
        );
        wait_for_stop(&server).await;
        crate::aof::shutdown(&server);
        info!("Ember is now ready to exit, bye bye...");
        Ok::<(), String>(())
    })
}

async fn wait_for_stop(server: &Server) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            error!("can't install SIGTERM handler: {e}");
            server.shutdown.notified().await;
            return;
        }
    };
    loop {
        let signal = tokio::select! {
            _ = server.shutdown.notified() => {
                info!("User requested shutdown...");
                None
            }
            _ = term.recv() => Some("SIGTERM"),
            _ = tokio::signal::ctrl_c() => Some("SIGINT"),
        };
        if let Some(sig) = signal {
            info!("Received {sig} scheduling shutdown...");
            // As SHUTDOWN without arguments: save when save points are configured, and
            // keep running (as Redis does) if that fails.
            let points =
                !crate::snapshot::parse_save_points(server.config.read().get("save")).is_empty();
            if points && !server.snapshots.saved_for_shutdown.load(Relaxed) {
                info!("Saving the final RDB snapshot before exiting.");
                if let Err(e) = crate::snapshot::save(server) {
                    error!("{sig} received but errors trying to shut down the server: {e}");
                    continue;
                }
            }
        }
        break;
    }
    server.shutting_down.store(true, Relaxed);
}

fn bind_all(config: &Config) -> Result<Vec<std::net::TcpListener>, String> {
    let port = config.get_u64("port") as u16;
    let backlog = config.get_u64("tcp-backlog") as i32;
    let mut out = Vec::new();
    for word in config.get("bind").split_whitespace() {
        let (optional, addr) = match word.strip_prefix('-') {
            Some(a) => (true, a),
            None => (false, word),
        };
        let ips: Vec<IpAddr> = match addr {
            "*" => vec![IpAddr::from([0, 0, 0, 0])],
            "::*" => vec![IpAddr::from([0u16; 8])],
            a => match a.parse() {
                Ok(ip) => vec![ip],
                Err(_) => return Err(format!("Invalid bind address '{a}'")),
            },
        };
        for ip in ips {
            match listen(SocketAddr::new(ip, port), backlog) {
                Ok(l) => out.push(l),
                Err(e) if optional => warn!("Could not create server TCP listening socket {ip}:{port}: {e} (optional, skipped)"),
                Err(e) => {
                    return Err(format!(
                        "Warning: Could not create server TCP listening socket {ip}:{port}: {e}"
                    ))
                }
            }
        }
    }
    if out.is_empty() {
        return Err("Failed listening on port (tcp), aborting.".into());
    }
    Ok(out)
}

fn listen(addr: SocketAddr, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.bind(&addr.into())?;
    sock.listen(backlog.max(1))?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

const DENIED: &[u8] = b"-DENIED Ember is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers, either set a password (requirepass), or disable protected mode (CONFIG SET protected-mode no or --protected-mode no).\r\n";

async fn accept_loop(server: Arc<Server>, listener: tokio::net::TcpListener) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let live = &server.live;
        let refuse: Option<&[u8]> =
            if server.connected.load(Relaxed) as u64 >= live.maxclients.load(Relaxed) {
                server.rejected_conns.fetch_add(1, Relaxed);
                Some(b"-ERR max number of clients reached\r\n")
            } else if live.protected_mode.load(Relaxed)
                && !live.auth_required.load(Relaxed)
                && !peer.ip().is_loopback()
            {
                Some(DENIED)
            } else {
                None
            };
        if let Some(msg) = refuse {
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let mut s = stream;
                let _ = s.write_all(msg).await;
            });
            continue;
        }
        let std = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                warn!("can't hand off connection: {e}");
                continue;
            }
        };
        server.connected.fetch_add(1, Relaxed);
        let id = server.next_client_id.fetch_add(1, Relaxed);
        let b = &server.balance;
        if b.send(b.pick(), crate::balance::Arrival::New(std, id))
            .is_err()
        {
            server.connected.fetch_sub(1, Relaxed);
        }
    }
}

/// `jemalloc-bg-thread`: jemalloc's background thread on or off (written only on a
/// change). It purges the freed pages of every arena as their decay time passes; without
/// it an arena purges only when a thread allocates or frees through it, so the elements'
/// arena (`storage::arena`) kept the pages of deleted collections until the next
/// collection write: 3.2-3.5 GB of RSS for 527 MB used after the benchmark's pipelined
/// runs, 0.7 GB with it (`benches/results/2026-12-07-perf-16.md`).
fn set_jemalloc_bg_thread(on: bool) {
    use tikv_jemalloc_ctl::background_thread;
    match background_thread::read() {
        Ok(now) if now == on => {}
        _ => {
            if let Err(e) = background_thread::write(on) {
                warn!("jemalloc-bg-thread: {e}");
            }
        }
    }
}

/// `disable-thp yes`: no transparent huge pages for this process from now on, as Redis's
/// directive does (pages jemalloc asked for with `thp:always` fall back to 4 KiB pages).
fn disable_thp() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        warn!(
            "disable-thp: prctl failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn worker_main(
    server: Arc<Server>,
    stats: Arc<WorkerStats>,
    worker: usize,
    mut rx: mpsc::UnboundedReceiver<crate::balance::Arrival>,
) {
    server.balance.register_thread(worker);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("worker runtime failed to start: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        while let Some(a) = rx.recv().await {
            match a {
                crate::balance::Arrival::New(stream, id) => tokio::task::spawn_local(
                    crate::conn::serve(server.clone(), stats.clone(), worker, stream, id),
                ),
                crate::balance::Arrival::Moved(m) => {
                    tokio::task::spawn_local(crate::conn::resume(stats.clone(), worker, m))
                }
            };
        }
    });
}

/// Once a second: `save` points.
fn spawn_cron(server: Arc<Server>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("ember-cron".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            crate::snapshot::cron(&server);
        })
        .map(|_| ())
        .map_err(|e| format!("can't start cron thread: {e}"))
}

fn spawn_expiry(server: Arc<Server>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("ember-expiry".into())
        .spawn(move || loop {
            let hz = server.config.read().get_u64("hz").clamp(1, 500);
            std::thread::sleep(Duration::from_millis(1000 / hz));
            if server.active_expire_off.load(Relaxed) {
                continue;
            }
            // Keep reaping while a round hits its budget, so a burst of expiries clears fast
            // without holding any one shard lock for long.
            let cycle = Instant::now();
            for _ in 0..10 {
                let tracking = &server.tracking;
                let n = if server.notify.wants(crate::notify::EXPIRED) {
                    // Published after the shard locks are released.
                    let mut expired = Vec::new();
                    let n = server
                        .keyspace
                        .expire_cycle_with(clock::now_ns(), 64, &mut |db, k| {
                            tracking.invalidate(0, k);
                            expired.push((db, k.to_vec()));
                        });
                    for (db, k) in expired {
                        server
                            .notify
                            .publish(&server, crate::notify::EXPIRED, "expired", &k, db);
                    }
                    n
                } else if tracking.active() {
                    server
                        .keyspace
                        .expire_cycle_with(clock::now_ns(), 64, &mut |_, k| {
                            tracking.invalidate(0, k)
                        })
                } else {
                    server.keyspace.expire_cycle(clock::now_ns(), 64)
                };
                if n < server.keyspace.shard_count() {
                    break;
                }
            }
            server
                .observe
                .latency
                .add_if_needed("expire-cycle", cycle.elapsed().as_nanos() as u64);
        })
        .map(|_| ())
        .map_err(|e| format!("can't start expiry thread: {e}"))
}
