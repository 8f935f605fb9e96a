//! Snapshots in Redis RDB format, without fork.
//!
//! A save walks the shards one at a time: each shard is locked just long enough to encode
//! its keys into a buffer, which is then written out with no lock held. Commands keep
//! running meanwhile, and memory grows by one shard's encoding, not by a copy of the
//! data. The snapshot is therefore not a point-in-time image: each key is saved as the
//! walk reaches it (a key written after its shard was visited is in the next snapshot).
//!
//! The file is written to `temp-<pid>.rdb` in the working directory (`dir`), fsynced and
//! renamed over `dbfilename`, so a crash never leaves a half-written `dump.rdb`.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use storage::clock;
use storage::rdb::{self, Loaded, Writer};
use tracing::{info, warn};

use crate::registry::flags;
use crate::server::Server;

/// Seconds to wait before retrying a failed automatic save (Redis's
/// `CONFIG_BGSAVE_RETRY_DELAY`).
const RETRY_DELAY_S: u64 = 5;

/// Snapshot bookkeeping (INFO persistence, LASTSAVE, save points).
pub struct Snapshots {
    /// Held by whoever is writing a snapshot (one at a time).
    writing: Mutex<()>,
    /// A background save is running.
    pub in_progress: AtomicBool,
    /// Unix seconds of the last successful save (or of start-up).
    pub last_save: AtomicU64,
    /// Whether the last save succeeded.
    pub last_ok: AtomicBool,
    /// Seconds the last background save took; -1 before the first.
    pub last_duration: AtomicI64,
    /// Unix seconds the running background save started.
    pub started: AtomicU64,
    /// Unix seconds of the last failed attempt (retry delay).
    pub last_try: AtomicU64,
    /// Successful saves since start-up.
    pub saves: AtomicU64,
    /// Write count (see [`Server::write_count`]) covered by the last successful save.
    pub dirty_base: AtomicU64,
    /// Keys in the last saved file.
    pub last_keys: AtomicU64,
    /// Keys loaded at start-up.
    pub loaded_keys: AtomicU64,
    /// BGSAVE SCHEDULE came while a save ran: start one when it ends.
    pub scheduled: AtomicBool,
    /// SHUTDOWN already saved (or chose not to): the exit path must not save again.
    pub saved_for_shutdown: AtomicBool,
}

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots {
            writing: Mutex::new(()),
            in_progress: AtomicBool::new(false),
            last_save: AtomicU64::new(clock::now_ns() / clock::NS_PER_SEC),
            last_ok: AtomicBool::new(true),
            last_duration: AtomicI64::new(-1),
            started: AtomicU64::new(0),
            last_try: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            dirty_base: AtomicU64::new(0),
            last_keys: AtomicU64::new(0),
            loaded_keys: AtomicU64::new(0),
            saved_for_shutdown: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
        }
    }
}

fn now_s() -> u64 {
    clock::now_ns() / clock::NS_PER_SEC
}

impl Server {
    /// Successful write commands since start-up, summed over the workers' counters (no
    /// shared counter on the hot path). `rdb_changes_since_last_save` is this minus the
    /// count covered by the last save.
    pub fn write_count(&self) -> u64 {
        let mut n = 0u64;
        for i in 0..self.registry.len() {
            if !self.registry.entry(i).spec.has(flags::WRITE) {
                continue;
            }
            for w in &self.workers {
                let c = &w.cmd[i];
                n += c.calls.load(Relaxed).saturating_sub(c.failed.load(Relaxed));
            }
        }
        n
    }

    /// Writes since the last successful save.
    pub fn dirty(&self) -> u64 {
        self.write_count()
            .saturating_sub(self.snapshots.dirty_base.load(Relaxed))
    }
}

/// Writes a snapshot to `dbfilename` now, in the calling thread (SAVE, SHUTDOWN, FLUSHALL).
/// Returns the number of keys saved.
pub fn save(server: &Server) -> Result<u64, String> {
    let _w = server.snapshots.writing.lock();
    save_locked(server)
}

fn save_locked(server: &Server) -> Result<u64, String> {
    let s = &server.snapshots;
    let dirty = server.write_count();
    let (file, compress) = {
        let c = server.config.read();
        (
            c.get("dbfilename").to_string(),
            c.get_bool("rdbcompression"),
        )
    };
    let tmp = format!("temp-{}.rdb", std::process::id());
    let res = write_file(server, &tmp, compress)
        .and_then(|keys| {
            std::fs::rename(&tmp, &file)?;
            if let Ok(d) = File::open(".") {
                let _ = d.sync_all();
            }
            Ok(keys)
        })
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("Failed opening or writing the .rdb for saving: {e}")
        });
    match &res {
        Ok(keys) => {
            s.last_save.store(now_s(), Relaxed);
            s.dirty_base.store(dirty, Relaxed);
            s.last_ok.store(true, Relaxed);
            s.saves.fetch_add(1, Relaxed);
            s.last_keys.store(*keys, Relaxed);
            info!("DB saved on disk ({keys} keys)");
        }
        Err(e) => {
            s.last_ok.store(false, Relaxed);
            s.last_try.store(now_s(), Relaxed);
            warn!("{e}");
        }
    }
    res
}

/// Starts a background save on its own thread; false when one is already running.
pub fn bgsave(server: &Arc<Server>) -> bool {
    let s = &server.snapshots;
    if s.in_progress.swap(true, Relaxed) {
        return false;
    }
    s.started.store(now_s(), Relaxed);
    info!("Background saving started");
    let srv = server.clone();
    let spawned = std::thread::Builder::new()
        .name("ember-bgsave".into())
        .spawn(move || {
            let t0 = Instant::now();
            let r = save(&srv);
            let ss = &srv.snapshots;
            ss.last_duration
                .store(t0.elapsed().as_secs() as i64, Relaxed);
            ss.in_progress.store(false, Relaxed);
            if r.is_ok() {
                info!("Background saving terminated with success");
            }
        });
    if spawned.is_err() {
        s.in_progress.store(false, Relaxed);
        s.last_ok.store(false, Relaxed);
        return false;
    }
    true
}

/// Encodes every live key, database by database and shard by shard, into `path`.
fn write_file(server: &Server, path: &str, compress: bool) -> std::io::Result<u64> {
    let f = File::create(path)?;
    let mut w = Writer::new(BufWriter::with_capacity(1 << 20, f), compress)?;
    w.aux(
        b"redis-ver",
        crate::cmd::connection::REDIS_COMPAT_VERSION.as_bytes(),
    )?;
    w.aux(b"redis-bits", b"64")?;
    w.aux(b"ctime", now_s().to_string().as_bytes())?;
    w.aux(b"used-mem", b"0")?;
    w.aux(b"aof-base", b"0")?;
    let libs: Vec<Vec<u8>> = server.scripting.func.lock().library_codes();
    for code in libs {
        w.function(&code)?;
    }
    let ks = &server.keyspace;
    let mut keys = 0u64;
    let mut buf = Vec::with_capacity(1 << 16);
    for db in 0..ks.db_count() {
        let now = clock::now_ns();
        let (n, vol, _) = ks.db_stats(db, now);
        if n == 0 {
            continue;
        }
        w.select_db(db, n as u64, vol as u64)?;
        for shard in 0..ks.shard_count() {
            buf.clear();
            let now = clock::now_ns();
            ks.with_shard(shard, |sh| {
                let t = sh.table_ref(db);
                t.for_each_live(now, |k, e| {
                    let tags = t.tags_of(k);
                    let tags: Vec<&[u8]> = tags.iter().map(|t| &t[..]).collect();
                    rdb::encode_key(
                        &mut buf,
                        k,
                        &e.value,
                        e.expire_at().unwrap_or(0),
                        &tags,
                        compress,
                    );
                    keys += 1;
                });
            });
            if !buf.is_empty() {
                w.write_raw(&buf)?;
            }
        }
    }
    let out = w.finish()?;
    let f = out.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    Ok(keys)
}

/// Loads `dbfilename` if it exists (start-up, before clients connect). A damaged file is an
/// error naming its offset; nothing is half-loaded silently (the node refuses to start).
pub fn load_at_startup(server: &Server) -> Result<(), String> {
    let file = server.config.read().get("dbfilename").to_string();
    let f = match File::open(&file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("Can't open {file}: {e}")),
    };
    let t0 = Instant::now();
    let keys = load_from(server, std::io::BufReader::with_capacity(1 << 20, f))
        .map_err(|e| format!("Fatal error loading the DB from {file}: {e}. Exiting."))?;
    server.snapshots.loaded_keys.store(keys, Relaxed);
    info!(
        "DB loaded from disk: {:.3} seconds ({keys} keys)",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads an RDB stream into the (empty) keyspace and function store; returns keys loaded.
pub fn load_from(server: &Server, r: impl std::io::Read) -> Result<u64, rdb::RdbError> {
    load_from_opts(server, r, false)
}

/// As [`load_from`]; `keep_expired` keeps keys already past their deadline (an AOF base,
/// as Redis: the incr files replayed after it may still reach them at their own times).
pub fn load_from_opts(
    server: &Server,
    r: impl std::io::Read,
    keep_expired: bool,
) -> Result<u64, rdb::RdbError> {
    let ks = &server.keyspace;
    let dbs = ks.db_count();
    let mut loaded = 0u64;
    let corrupt = |msg: String| rdb::RdbError::Corrupt { offset: 0, msg };
    rdb::load(r, |item| {
        match item {
            Loaded::Key {
                db,
                key,
                value,
                expire_at_ns,
                tags,
            } => {
                if db >= dbs {
                    return Err(corrupt(format!(
                        "database {db} out of range (databases is {dbs})"
                    )));
                }
                let now = clock::now_ns();
                if !keep_expired && expire_at_ns != 0 && expire_at_ns <= now {
                    return Ok(());
                }
                insert_loaded(ks, db, &key, value, expire_at_ns, tags, now);
                loaded += 1;
            }
            Loaded::Function(code) => {
                server
                    .scripting
                    .func
                    .lock()
                    .load(&code, false)
                    .map_err(|e| corrupt(format!("can't load function library: {e:?}")))?;
            }
        }
        Ok(())
    })?;
    Ok(loaded)
}

/// Stores a key read from an RDB stream (replacing any key of that name), with its
/// deadline (0 for none) and Ember tags; the key is locked at time `now`.
pub(crate) fn insert_loaded(
    ks: &storage::Keyspace,
    db: usize,
    key: &[u8],
    value: storage::value::Value,
    expire_at_ns: u64,
    tags: Vec<Vec<u8>>,
    now: u64,
) {
    let mut g = ks.lock(db, key, now);
    g.insert(value, expire_at_ns);
    if !tags.is_empty() {
        g.table_of(db).set_tags(key, tags);
    }
}

/// Called about once a second: starts a background save when a `save` point is reached
/// (`save <seconds> <changes>`: at least `changes` writes and `seconds` since the last save).
pub fn cron(server: &Arc<Server>) {
    let s = &server.snapshots;
    if s.in_progress.load(Relaxed) {
        return;
    }
    if s.scheduled.load(Relaxed) && bgsave(server) {
        s.scheduled.store(false, Relaxed);
        return;
    }
    let points = parse_save_points(server.config.read().get("save"));
    if points.is_empty() {
        return;
    }
    let now = now_s();
    if !s.last_ok.load(Relaxed) && now.saturating_sub(s.last_try.load(Relaxed)) < RETRY_DELAY_S {
        return;
    }
    let dirty = server.dirty();
    let since = now.saturating_sub(s.last_save.load(Relaxed));
    if points
        .iter()
        .any(|&(secs, changes)| dirty >= changes && since >= secs)
    {
        info!("{dirty} changes in {since} seconds. Saving...");
        bgsave(server);
    }
}

/// `save` directive value as (seconds, changes) pairs.
pub fn parse_save_points(v: &str) -> Vec<(u64, u64)> {
    let w: Vec<u64> = v
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    w.chunks_exact(2).map(|c| (c[0], c[1])).collect()
}
