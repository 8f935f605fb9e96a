//! The append-only file (AOF), Redis 7 multi-part layout, without fork.
//!
//! # Code
//! - this file: the shared state ([`Aof`]), the streams and files, the background
//!   thread, configuration changes, shutdown and INFO fields;
//! - [`propagate`]: around each write, the order token and what it appends (the effects
//!   its handler declared, [`crate::effects`]), evictions;
//! - [`append`]: appending to the streams and writing them before replies leave;
//! - [`load`]: loading at start-up and opening for appending;
//! - [`rewriter`]: BGREWRITEAOF without fork.
//!
//! # Layout
//! `<dir>/<appenddirname>/` holds `<appendfilename>.<seq>.base.rdb` (or `.base.aof` with
//! `aof-use-rdb-preamble no`), `<appendfilename>.<seq>.incr.aof` and the manifest
//! `<appendfilename>.manifest` in Redis's syntax, so redis-server 7 loads Ember's directory and
//! Ember loads redis-server's. The file formats are in [`storage::aof`].
//!
//! # What is appended
//! Every successful write command, after it ran, as it must be replayed to give the same
//! state: its arguments, or the form its handler declared ([`crate::effects`]): relative
//! expiries as absolute ones (`SET .. PXAT`, `PEXPIREAT`, or Ember's `NEXPIREAT` when the deadline is not a whole millisecond), `SPOP` as `SREM` of
//! what it popped, `XADD *` with the ID it chose, a served blocking pop as the non-blocking
//! pop it became, scripts, functions and MULTI/EXEC as the commands they ran wrapped in
//! `MULTI`/`EXEC`, `SELECT` when the database changes. Before a command whose time differs
//! from the previous one an annotation line `#NOW:<ns>` records the time it ran at (Redis
//! skips `#` lines): a replay runs each command at its original time, so lazy expiry, stream
//! IDs and idle times come out exactly as they did. Each file (and each time Ember opens a
//! file to go on appending to it) starts with the annotation `#ember-fmt:<version>`, the
//! version of Ember's extensions that follow (see [`storage::aof`]); a newer version than
//! this build knows stops the load. Expired keys removed by the expiry
//! cycle or on access are therefore not logged as `DEL` (a key past its deadline is absent
//! at any later time anyway); a file without annotations (redis-server's) replays at time
//! 0, where nothing expires, as Redis loads it.
//!
//! # Order
//! Workers run on many threads. A write command takes the AOF *order token* (a binary
//! semaphore, [`Aof::acquire`]) before its handler runs and gives it back after its effects
//! are appended to the in-memory buffer, so the file holds write commands in exactly the
//! order they executed: per key and across keys. Commands that only read never take it, so
//! with `appendonly no` the cost is one relaxed atomic load per command, and with `yes` reads
//! stay parallel while writes are serialised only for the handler and an append to a
//! buffer. EXEC and scripts take every worker's gate first and the token at their first
//! write, so lock order is always gates, token, shard locks, buffer.
//!
//! # Durability
//! The buffer is written to the incr file before any reply is sent ([`Aof::before_reply`],
//! called by the connection when it flushes replies), so an acknowledged write survives a
//! crash of the process in every mode. `appendfsync always` also fsyncs before replying
//! (group commit: one fsync covers every command appended so far); `everysec` fsyncs from
//! a background thread once a second; `no` leaves it to the OS.
//!
//! # Rewrite (BGREWRITEAOF) without fork
//! A rewrite opens a new incr file, then walks the shards like a snapshot, taking the order
//! token for each shard while it encodes it: each shard's part of the new base is exact as
//! of its visit. While the walk runs, commands keep going to the old incr file (the old
//! manifest stays valid until the swap) and also to the new incr file when every key they
//! touch is in an already visited shard; a command touching only unvisited shards is left
//! out (the base will hold its effect); a command touching both writes the resulting state
//! of its visited keys (`DEL` + `RESTORE`). A keyspace-wide write (FLUSHALL, SWAPDB ...)
//! halfway through the walk aborts the rewrite, which is retried. At the end the new
//! manifest is written to a temp file, fsynced and renamed over the old one, and the old
//! files are deleted.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use resp::{Args, OwnedArgs, Protocol, ReplyWriter};
use storage::aof::{
    base_name, encode_command, encode_format, encode_now, incr_name, manifest_name, AofFile,
    CommandReader, FileKind, Item, Manifest, ReadError,
};
use storage::clock::{self, NS_PER_MS};
use storage::rdb;
use tracing::{info, warn};

use crate::client::{BlockMode, Client, ClientInfo};
use crate::ctx::{CmdRng, Ctx};
use crate::effects::{self, Declared};
use crate::error::CmdError;
use crate::registry::{flags, CommandSpec, Unresolved};
use crate::server::Server;

mod append;
mod load;
mod propagate;
mod rewriter;

pub use load::{load_at_startup, start};
pub use propagate::{begin, end, evicted, Scope};
use propagate::{now_s, restore_state, ttl_cmd};
use rewriter::rewrite;
pub use rewriter::{bgrewrite, Bg};

/// `appendfsync no`.
const FSYNC_NO: u8 = 0;
/// `appendfsync everysec`.
const FSYNC_EVERYSEC: u8 = 1;
/// `appendfsync always`.
const FSYNC_ALWAYS: u8 = 2;

/// Seconds before an automatic rewrite is tried again after a failure.
const RETRY_DELAY_S: u64 = 5;

/// AOF state shared by the node (see the module documentation).
pub struct Aof {
    /// Propagation is on (the hot-path check).
    on: AtomicBool,
    /// `appendfsync` policy.
    policy: AtomicU8,
    /// The order token: true while some thread holds it.
    token: Mutex<bool>,
    token_cv: Condvar,
    /// Appended commands not yet written.
    buf: Mutex<Buf>,
    /// The open files (taken after `buf` is released: writers hold files, then buf briefly).
    files: Mutex<Files>,
    /// Bytes appended to the main stream since start-up.
    appended: AtomicU64,
    /// Of those, written to the incr file.
    written: AtomicU64,
    /// Of those, fsynced.
    synced: AtomicU64,
    /// A rewrite is running.
    rewriting: AtomicBool,
    /// A rewrite was asked for while one ran (or by `appendonly yes`): start one next.
    scheduled: AtomicBool,
    /// Ask the running rewrite to stop (appendonly no).
    abort: AtomicBool,
    /// Unix seconds the running rewrite started.
    rewrite_started: AtomicU64,
    /// Seconds the last rewrite took; -1 before the first.
    last_rewrite_secs: AtomicI64,
    /// Whether the last rewrite succeeded.
    last_rewrite_ok: AtomicBool,
    /// Unix seconds of the last failed rewrite.
    last_rewrite_fail: AtomicU64,
    /// Successful rewrites.
    rewrites: AtomicU64,
    /// Failed rewrites since the last success.
    failures: AtomicU64,
    /// The last write to the incr file failed (writes are refused with MISCONF).
    write_failed: AtomicBool,
    /// Base plus incr files, bytes.
    current_size: AtomicU64,
    /// Size after the last rewrite (or the base at start-up): automatic rewrite reference.
    rewrite_base_size: AtomicU64,
    /// Size of the base file.
    base_size: AtomicU64,
    /// The background thread is running.
    thread_started: AtomicBool,
}

impl Default for Aof {
    fn default() -> Self {
        Aof {
            on: AtomicBool::new(false),
            policy: AtomicU8::new(FSYNC_EVERYSEC),
            token: Mutex::new(false),
            token_cv: Condvar::new(),
            buf: Mutex::new(Buf::default()),
            files: Mutex::new(Files::default()),
            appended: AtomicU64::new(0),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            rewriting: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            rewrite_started: AtomicU64::new(0),
            last_rewrite_secs: AtomicI64::new(-1),
            last_rewrite_ok: AtomicBool::new(true),
            last_rewrite_fail: AtomicU64::new(0),
            rewrites: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            write_failed: AtomicBool::new(false),
            current_size: AtomicU64::new(0),
            rewrite_base_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            thread_started: AtomicBool::new(false),
        }
    }
}

/// One output stream: bytes waiting to be written, the database its reader has selected,
/// the time of its last annotation and whether its format annotation is written.
#[derive(Default)]
struct Stream {
    data: Vec<u8>,
    db: Option<usize>,
    now: u64,
    /// The `#ember-fmt:` annotation went out (before the first command of the stream).
    marked: bool,
}

impl Stream {
    /// A stream at the start of a new file (its reader starts in db 0 but a SELECT is
    /// written anyway, as Redis does).
    fn fresh() -> Self {
        Stream::default()
    }

    /// Appends `effects` (wrapped in MULTI/EXEC when they are more than one command).
    fn emit(&mut self, effects: &[&Effect]) {
        let Some(first) = effects.first() else {
            return;
        };
        let cmds: usize = effects.iter().map(|e| e.ncmds).sum();
        if cmds == 0 {
            return;
        }
        if !self.marked {
            encode_format(&mut self.data);
            self.marked = true;
        }
        if self.now != first.now {
            encode_now(&mut self.data, first.now);
            self.now = first.now;
        }
        let wrap = cmds > 1;
        if wrap {
            encode_command(&mut self.data, &effects::multi());
        }
        for e in effects {
            if e.ncmds == 0 {
                continue;
            }
            if self.db != Some(e.db) {
                encode_command(&mut self.data, &effects::select(e.db));
                self.db = Some(e.db);
            }
            self.data.extend_from_slice(&e.resp);
        }
        if wrap {
            encode_command(&mut self.data, &effects::exec());
        }
    }
}

#[derive(Default)]
struct Buf {
    /// Commands for the current incr file (dropped while there is none: `appendonly yes`
    /// at run time until its first rewrite ends).
    main: Stream,
    /// Whether `main` has a file to go to.
    main_on: bool,
    /// The filtered stream for the next incr file, while a rewrite runs.
    rewrite: Option<RewriteBuf>,
}

struct RewriteBuf {
    out: Stream,
    visited: Vec<bool>,
    nvisited: usize,
    /// Why the rewrite must be abandoned.
    failed: Option<String>,
}

#[derive(Default)]
struct Files {
    /// The AOF directory.
    dir: PathBuf,
    /// `appendfilename`.
    prefix: String,
    manifest: Manifest,
    /// The incr file being appended to.
    incr: Option<File>,
    /// Its size.
    incr_len: u64,
    /// The next incr file, while a rewrite runs.
    next: Option<(File, String, u64)>,
}

/// What one command did, ready to append.
pub struct Effect {
    db: usize,
    now: u64,
    /// RESP text of the commands.
    resp: Vec<u8>,
    ncmds: usize,
    /// The keys touched, (db, key), while a rewrite runs.
    keys: Vec<(usize, Vec<u8>)>,
    scope: Reach,
}

/// What part of the data a command reaches (for the rewrite's filter).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Its keys.
    Keys,
    /// The whole keyspace (FLUSHALL, SWAPDB ...).
    Global,
    /// Nothing in the keyspace (FUNCTION LOAD ...).
    Meta,
}

impl Effect {
    fn new(db: usize, now: u64) -> Self {
        Effect {
            db,
            now,
            resp: Vec::new(),
            ncmds: 0,
            keys: Vec::new(),
            scope: Reach::Keys,
        }
    }

    fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        encode_command(&mut self.resp, args);
        self.ncmds += 1;
    }

    fn args(&mut self, args: Args<'_>) {
        let v: Vec<&[u8]> = args.iter().collect();
        self.cmd(&v);
    }
}

// ------------------------------------------------------------------------------------------
// Files

/// The AOF directory (absolute: CONFIG SET dir may change the working directory later)
/// and `appendfilename`.
fn aof_dir(server: &Server) -> (PathBuf, String) {
    let c = server.config.read();
    let rel = PathBuf::from(c.get("appenddirname"));
    let dir = std::env::current_dir().map(|d| d.join(&rel)).unwrap_or(rel);
    (dir, c.get("appendfilename").to_string())
}

fn policy_of(v: &str) -> u8 {
    match v {
        "always" => FSYNC_ALWAYS,
        "no" => FSYNC_NO,
        _ => FSYNC_EVERYSEC,
    }
}

/// Writes `m` as the manifest of `dir`: temp file, fsync, rename, fsync of the directory.
fn write_manifest(dir: &Path, prefix: &str, m: &Manifest) -> std::io::Result<()> {
    let tmp = dir.join(format!("temp-{}", manifest_name(prefix)));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(m.render().as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(manifest_name(prefix)))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

// ------------------------------------------------------------------------------------------
// Background thread, configuration changes, shutdown, INFO

fn spawn_thread(server: &Arc<Server>) -> Result<(), String> {
    if server.aof.thread_started.swap(true, Relaxed) {
        return Ok(());
    }
    let srv = server.clone();
    std::thread::Builder::new()
        .name("ember-aof".into())
        .spawn(move || {
            let mut last_sync = Instant::now();
            loop {
                std::thread::sleep(Duration::from_millis(100));
                tick(&srv, &mut last_sync);
            }
        })
        .map(|_| ())
        .map_err(|e| format!("can't start the AOF thread: {e}"))
}

/// Every 100 ms: the everysec fsync, scheduled and automatic rewrites.
fn tick(server: &Arc<Server>, last_sync: &mut Instant) {
    let aof = &server.aof;
    if server.shutting_down.load(Relaxed) {
        return;
    }
    if aof.on.load(Relaxed) && last_sync.elapsed() >= Duration::from_secs(1) {
        *last_sync = Instant::now();
        if aof.policy.load(Relaxed) == FSYNC_NO {
            let mut f = aof.files.lock();
            aof.write_locked(&mut f);
        } else {
            aof.flush_and_sync();
        }
    }
    if aof.rewriting.load(Relaxed) {
        return;
    }
    if aof.scheduled.load(Relaxed) {
        if matches!(bgrewrite(server), Ok(Bg::Started)) {
            aof.scheduled.store(false, Relaxed);
        }
        return;
    }
    if !aof.on.load(Relaxed) {
        return;
    }
    // A failed rewrite (a keyspace-wide write mid-walk, a full disk) is retried.
    let retry = !aof.last_rewrite_ok.load(Relaxed)
        && now_s().saturating_sub(aof.last_rewrite_fail.load(Relaxed)) >= RETRY_DELAY_S;
    let (perc, min) = {
        let c = server.config.read();
        (
            c.get_u64("auto-aof-rewrite-percentage"),
            c.get_u64("auto-aof-rewrite-min-size"),
        )
    };
    let cur = aof.current_size.load(Relaxed);
    let base = aof.rewrite_base_size.load(Relaxed).max(1);
    let growth = (cur * 100 / base).saturating_sub(100);
    let auto = perc > 0 && cur > min && growth >= perc;
    // Until the first rewrite after `appendonly yes` succeeds there is no incr file.
    let unfinished = !aof.buf.lock().main_on;
    if (retry && (unfinished || auto)) || (auto && aof.last_rewrite_ok.load(Relaxed)) {
        if auto {
            info!("Starting automatic rewriting of AOF on {growth}% growth");
        }
        let _ = bgrewrite(server);
    }
}

/// After CONFIG SET: applies `appendfsync`, and `appendonly` yes (start: a rewrite writes
/// the base, as Redis) or no (flush, fsync and stop).
pub fn config_changed(server: &Arc<Server>) -> Result<(), String> {
    let (want, policy) = {
        let c = server.config.read();
        (c.get_bool("appendonly"), policy_of(c.get("appendfsync")))
    };
    let aof = &server.aof;
    aof.policy.store(policy, Relaxed);
    if want && !aof.on.load(Relaxed) {
        spawn_thread(server)?;
        if let Bg::Running = bgrewrite(server)? {
            // A rewrite of `appendonly no` (BGREWRITEAOF) is running: turn on after it.
            aof.scheduled.store(true, Relaxed);
        }
    } else if !want && aof.on.load(Relaxed) {
        stop(server);
    }
    Ok(())
}

/// `appendonly no`: stops appending (after a final write and fsync) and any rewrite.
fn stop(server: &Server) {
    let aof = &server.aof;
    aof.abort.store(true, Relaxed);
    aof.scheduled.store(false, Relaxed);
    aof.acquire();
    aof.flush_and_sync();
    aof.on.store(false, Relaxed);
    {
        let mut f = aof.files.lock();
        f.incr = None;
        let mut b = aof.buf.lock();
        b.main_on = false;
        b.main = Stream::fresh();
    }
    aof.release();
    info!("Background append only file turned off");
}

/// At exit (SHUTDOWN, SIGTERM): writes and fsyncs the AOF. The token is kept, so no write
/// can be appended (or acknowledged) after this.
pub fn shutdown(server: &Server) {
    let aof = &server.aof;
    if !aof.on.load(Relaxed) {
        return;
    }
    aof.acquire();
    aof.flush_and_sync();
    info!("AOF flushed and fsynced before exiting.");
}

/// INFO persistence's AOF fields, in Redis's order.
pub fn info_fields(server: &Server) -> Vec<(&'static str, String)> {
    let aof = &server.aof;
    let enabled = server.config.read().get_bool("appendonly");
    let rw = aof.rewriting.load(Relaxed);
    let ok = |b: bool| if b { "ok" } else { "err" }.to_string();
    let cur = if rw {
        now_s().saturating_sub(aof.rewrite_started.load(Relaxed)) as i64
    } else {
        -1
    };
    let mut v = vec![
        ("aof_enabled", u8::from(enabled).to_string()),
        ("aof_rewrite_in_progress", u8::from(rw).to_string()),
        (
            "aof_rewrite_scheduled",
            u8::from(aof.scheduled.load(Relaxed)).to_string(),
        ),
        (
            "aof_last_rewrite_time_sec",
            aof.last_rewrite_secs.load(Relaxed).to_string(),
        ),
        ("aof_current_rewrite_time_sec", cur.to_string()),
        (
            "aof_last_bgrewrite_status",
            ok(aof.last_rewrite_ok.load(Relaxed)),
        ),
        ("aof_rewrites", aof.rewrites.load(Relaxed).to_string()),
        (
            "aof_rewrites_consecutive_failures",
            aof.failures.load(Relaxed).to_string(),
        ),
        ("aof_last_write_status", ok(!aof.write_failed.load(Relaxed))),
        ("aof_last_cow_size", "0".into()),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
    ];
    if enabled {
        let pending = aof.buf.lock().main.data.len();
        v.extend([
            (
                "aof_current_size",
                aof.current_size.load(Relaxed).to_string(),
            ),
            ("aof_base_size", aof.base_size.load(Relaxed).to_string()),
            ("aof_pending_rewrite", "0".into()),
            ("aof_buffer_length", pending.to_string()),
            ("aof_pending_bio_fsync", "0".into()),
            ("aof_delayed_fsync", "0".into()),
        ]);
    }
    v
}
