//! The append-only file (AOF), Redis 7 multi-part layout, without fork.
//!
//! # Layout
//! `<dir>/<appenddirname>/` holds `<appendfilename>.<seq>.base.rdb` (or `.base.aof` with
//! `aof-use-rdb-preamble no`), `<appendfilename>.<seq>.incr.aof` and the manifest
//! `<appendfilename>.manifest` in Redis's syntax, so redis-server 7 loads Ember's directory and
//! Ember loads redis-server's. The file formats are in [`storage::aof`].
//!
//! # What is appended
//! Every successful write command, after it ran, as it must be replayed to give the same
//! state ([`build`]): relative expiries as absolute ones (`SET .. PXAT`, `PEXPIREAT`, or
//! Ember's `NEXPIREAT` when the deadline is not a whole millisecond), `SPOP` as `SREM` of
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

thread_local! {
    static TL: RefCell<Tl> = const { RefCell::new(Tl { depth: 0, holding: false, capture: Vec::new() }) };
}

/// Per-thread propagation state: nesting of run_command, whether this thread holds the
/// order token, and the effects of commands run inside EXEC or a script.
struct Tl {
    depth: u32,
    holding: bool,
    capture: Vec<Effect>,
}

/// A command being propagated (from [`begin`] to [`end`]).
pub struct Scope<'a> {
    aof: &'a Aof,
    outer: bool,
    writes: bool,
    container: bool,
    done: bool,
}

impl Scope<'_> {
    /// Whether the command's own effects are propagated (a write that is not a container
    /// of other commands): its handler records them ([`crate::effects`]).
    pub fn records(&self) -> bool {
        self.writes && !self.container
    }
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // A handler unwound: keep the nesting count right and never leave the token held.
        let release = TL.with(|tl| {
            let mut tl = tl.borrow_mut();
            tl.depth = tl.depth.saturating_sub(1);
            if self.outer {
                tl.capture.clear();
                std::mem::replace(&mut tl.holding, false)
            } else {
                false
            }
        });
        if release {
            self.aof.release();
        }
    }
}

fn now_s() -> u64 {
    clock::now_ns() / clock::NS_PER_SEC
}

/// Whether a command's own arguments are propagated (as opposed to the commands it runs).
fn is_write(spec: &CommandSpec) -> bool {
    spec.has(flags::WRITE) && !spec.has(flags::EXCLUSIVE)
}

/// Before a command runs: with the AOF on, takes the order token for a write (refreshing
/// the command's time) and refuses writes after a failed AOF write. One relaxed load
/// when the AOF is off.
#[inline]
pub fn begin<'a>(
    server: &'a Arc<Server>,
    ctx_now: &mut u64,
    spec: &CommandSpec,
) -> Result<Option<Scope<'a>>, CmdError> {
    let aof = &server.aof;
    if !aof.on.load(Relaxed) {
        return Ok(None);
    }
    begin_slow(aof, ctx_now, spec).map(Some)
}

fn begin_slow<'a>(
    aof: &'a Aof,
    ctx_now: &mut u64,
    spec: &CommandSpec,
) -> Result<Scope<'a>, CmdError> {
    let writes = is_write(spec);
    let container = spec.has(flags::EXCLUSIVE);
    if writes && aof.write_failed.load(Relaxed) {
        return Err(CmdError::raw(
            "MISCONF Errors writing to the AOF file: see the server log",
        ));
    }
    let (outer, acquire) = TL.with(|tl| {
        let mut tl = tl.borrow_mut();
        let outer = tl.depth == 0;
        tl.depth += 1;
        // EXEC and scripts take every gate first; their inner writes take the token.
        let acquire = writes && !tl.holding;
        if acquire {
            tl.holding = true;
        }
        (outer, acquire)
    });
    if acquire {
        aof.acquire();
        if outer {
            *ctx_now = clock::now_ns();
        }
    }
    Ok(Scope {
        aof,
        outer,
        writes,
        container,
        done: false,
    })
}

/// After a command ran: builds its effects; the outermost command appends them (with those
/// of the commands it ran) and gives the order token back.
pub fn end(ctx: &mut Ctx<'_>, mut scope: Scope<'_>, idx: usize, args: Args<'_>, ok: bool) {
    scope.done = true;
    let eff = if scope.records() {
        let declared = ctx.client.fx.finish();
        if ok && ctx.client.block_request.is_none() {
            build(ctx, idx, args, declared)
        } else {
            None
        }
    } else {
        None
    };
    let effects = TL.with(|tl| {
        let mut tl = tl.borrow_mut();
        tl.depth = tl.depth.saturating_sub(1);
        if !scope.outer {
            tl.capture.extend(eff);
            return None;
        }
        let mut v = std::mem::take(&mut tl.capture);
        v.extend(eff);
        Some(v)
    });
    let Some(effects) = effects else {
        return;
    };
    let aof = scope.aof;
    if !effects.is_empty() {
        aof.append(ctx.server, &effects);
    }
    let release = TL.with(|tl| std::mem::replace(&mut tl.borrow_mut().holding, false));
    if release {
        aof.release();
    }
}

/// Runs `remove` (the deletion of an evicted key) and, with the AOF on, appends `DEL key`
/// in order with the writes around it, as Redis propagates evictions: a replay must not
/// bring back keys that were evicted. Takes the order token unless this thread holds it.
pub fn evicted<R>(
    server: &Server,
    db: usize,
    key: &[u8],
    remove: impl FnOnce() -> Option<R>,
) -> Option<R> {
    let aof = &server.aof;
    if !aof.on.load(Relaxed) {
        return remove();
    }
    let holding = TL.with(|tl| tl.borrow().holding);
    if !holding {
        aof.acquire();
    }
    let r = remove();
    if r.is_some() {
        let mut e = Effect::new(db, clock::now_ns());
        e.cmd(&effects::deletion(key));
        if aof.rewriting.load(Relaxed) {
            e.keys.push((db, key.to_vec()));
        }
        aof.append(server, &[e]);
    }
    if !holding {
        aof.release();
    }
    r
}

// ------------------------------------------------------------------------------------------
// What a command appends

/// The effects of one successful write command (None: nothing to log): what its handler
/// declared ([`crate::effects`]), or its own arguments; with the keys it reached while a
/// rewrite runs.
fn build(ctx: &Ctx<'_>, idx: usize, args: Args<'_>, declared: Declared) -> Option<Effect> {
    let server = ctx.server;
    let db = ctx.client.db;
    let mut e = Effect::new(db, ctx.now);
    match &declared.cmds {
        None => e.args(args),
        Some(cmds) if cmds.is_empty() => return None,
        Some(cmds) => cmds.iter().for_each(|c| e.cmd(c)),
    }
    if server.aof.rewriting.load(Relaxed) {
        let spec = server.registry.entry(idx).spec;
        let pos = spec.key_positions(&args);
        if pos.is_empty() && declared.keys.is_empty() {
            e.scope = if spec.has(flags::OUTSIDE_KEYSPACE) {
                Reach::Meta
            } else {
                Reach::Global
            };
        }
        for p in pos {
            e.keys.push((db, args.arg(p).to_vec()));
        }
        e.keys.extend(declared.keys);
    }
    Some(e)
}

/// The command setting `key`'s deadline to `at` (ns), appended to `e`.
fn ttl_cmd(e: &mut Effect, key: &[u8], at: u64) {
    e.cmd(&crate::effects::deadline_cmd(key, at));
}

/// Commands that put `key` in `db` back to its current state: DEL, then RESTORE with its
/// deadline and tags (a rewrite's answer to a command reaching both visited and unvisited
/// shards).
fn restore_state(server: &Server, e: &mut Effect, db: usize, key: &[u8]) {
    let now = e.now;
    let mut g = server.keyspace.lock(db, key, now);
    let mut cmds: Vec<Vec<Vec<u8>>> = vec![effects::deletion(key).to_vec()];
    let mut at = None;
    if let Some(ent) = g.peek() {
        at = ent.expire_at();
        cmds.push(effects::restore(key, 0, rdb::dump_payload(&ent.value)));
        let tags: Vec<Vec<u8>> = g
            .table_of(db)
            .tags_of(key)
            .iter()
            .map(|t| t.to_vec())
            .collect();
        if !tags.is_empty() {
            cmds.push(effects::tags(key, &tags));
        }
    }
    drop(g);
    let mut sub = Effect::new(db, now);
    for c in &cmds {
        sub.cmd(c);
    }
    if let Some(at) = at {
        ttl_cmd(&mut sub, key, at);
    }
    if e.db != db {
        e.cmd(&effects::select(db));
    }
    e.resp.extend_from_slice(&sub.resp);
    e.ncmds += sub.ncmds;
    if e.db != db {
        e.cmd(&effects::select(e.db));
    }
}

// ------------------------------------------------------------------------------------------
// Appending and writing

impl Aof {
    /// Whether commands are being appended.
    pub fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// Takes the order token (blocks while another thread holds it).
    fn acquire(&self) {
        let mut held = self.token.lock();
        while *held {
            self.token_cv.wait(&mut held);
        }
        *held = true;
    }

    /// Gives the order token back.
    fn release(&self) {
        *self.token.lock() = false;
        self.token_cv.notify_one();
    }

    /// Appends one command's effects (or those of an EXEC/script) to the buffers. Called
    /// with the order token held.
    fn append(&self, server: &Server, effects: &[Effect]) {
        let refs: Vec<&Effect> = effects.iter().collect();
        let class = {
            let mut b = self.buf.lock();
            if b.main_on {
                let before = b.main.data.len();
                b.main.emit(&refs);
                let added = (b.main.data.len() - before) as u64;
                self.appended.fetch_add(added, Release);
            }
            match b.rewrite.as_mut() {
                None => return,
                Some(rw) => classify(server, rw, effects),
            }
        };
        // The token is held: the walk cannot move on while the state is read.
        let extra = match class {
            Class::Skip => return,
            Class::Include => None,
            Class::Restore(keys) => {
                let mut e = Effect::new(effects[0].db, effects[0].now);
                for (db, k) in &keys {
                    restore_state(server, &mut e, *db, k);
                }
                Some(e)
            }
        };
        let mut b = self.buf.lock();
        if let Some(rw) = b.rewrite.as_mut() {
            match &extra {
                None => rw.out.emit(&refs),
                Some(e) => rw.out.emit(&[e]),
            }
        }
    }

    /// Before replies are sent: writes what was appended (and, with `appendfsync always`,
    /// fsyncs it). One relaxed load when the AOF is off.
    #[inline]
    pub fn before_reply(&self) {
        if !self.on.load(Relaxed) {
            return;
        }
        let target = self.appended.load(Acquire);
        if self.policy.load(Relaxed) == FSYNC_ALWAYS {
            if self.synced.load(Acquire) < target {
                self.sync_to(target);
            }
        } else if self.written.load(Acquire) < target {
            let mut f = self.files.lock();
            if self.written.load(Acquire) < target {
                self.write_locked(&mut f);
            }
        }
    }

    /// Writes and fsyncs everything appended up to at least `target` (group commit).
    fn sync_to(&self, target: u64) {
        let mut f = self.files.lock();
        if self.synced.load(Acquire) >= target {
            return;
        }
        let upto = self.write_locked(&mut f);
        if let Some(file) = &f.incr {
            if let Err(e) = file.sync_data() {
                // As Redis: an acknowledged write could not be made durable.
                tracing::error!(
                    "Can't persist AOF for fsync error when the AOF fsync policy is 'always': {e}. Exiting..."
                );
                std::process::exit(1);
            }
        }
        self.synced.fetch_max(upto, Release);
    }

    /// Moves the buffers to the files (caller holds `files`); returns the main-stream
    /// offset now written.
    fn write_locked(&self, f: &mut Files) -> u64 {
        let (main, next, upto) = {
            let mut b = self.buf.lock();
            let main = std::mem::take(&mut b.main.data);
            let next = b
                .rewrite
                .as_mut()
                .map(|rw| std::mem::take(&mut rw.out.data))
                .unwrap_or_default();
            (main, next, self.appended.load(Acquire))
        };
        if !next.is_empty() {
            if let Some((file, _, _)) = f.next.as_mut() {
                if let Err(e) = file.write_all(&next) {
                    warn!("Error writing the AOF rewrite's incr file: {e}");
                    if let Some(rw) = self.buf.lock().rewrite.as_mut() {
                        rw.failed = Some(format!("can't write the new incr file: {e}"));
                    }
                }
            }
        }
        if !main.is_empty() {
            if let Some(file) = f.incr.as_mut() {
                match file.write_all(&main) {
                    Ok(()) => {
                        f.incr_len += main.len() as u64;
                        self.current_size.fetch_add(main.len() as u64, Relaxed);
                        if self.write_failed.swap(false, Relaxed) {
                            warn!("AOF write error looks solved, Ember can write again.");
                        }
                    }
                    Err(e) => {
                        warn!("Error writing to the AOF file: {e}");
                        // Drop a partial write, keep the data for the next try.
                        let _ = file.set_len(f.incr_len);
                        let mut b = self.buf.lock();
                        let rest = std::mem::take(&mut b.main.data);
                        b.main.data = main;
                        b.main.data.extend_from_slice(&rest);
                        self.write_failed.store(true, Relaxed);
                        if self.policy.load(Relaxed) == FSYNC_ALWAYS {
                            tracing::error!("Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting...");
                            std::process::exit(1);
                        }
                        return self.written.load(Acquire);
                    }
                }
            }
        }
        self.written.fetch_max(upto, Release);
        upto
    }

    /// Writes the buffers and fsyncs the incr file (everysec tick, shutdown).
    fn flush_and_sync(&self) {
        let (upto, file) = {
            let mut f = self.files.lock();
            let upto = self.write_locked(&mut f);
            (upto, f.incr.as_ref().and_then(|f| f.try_clone().ok()))
        };
        if let Some(file) = file {
            match file.sync_data() {
                Ok(()) => {
                    self.synced.fetch_max(upto, Release);
                }
                Err(e) => warn!("AOF fsync failed: {e}"),
            }
        }
    }
}

enum Class {
    Include,
    Skip,
    Restore(Vec<(usize, Vec<u8>)>),
}

/// Where a command goes during a rewrite (see the module documentation).
fn classify(server: &Server, rw: &mut RewriteBuf, effects: &[Effect]) -> Class {
    let total = rw.visited.len();
    let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut meta = false;
    for e in effects {
        match e.scope {
            Reach::Global => {
                if rw.nvisited == 0 {
                    return Class::Skip;
                }
                if rw.nvisited == total {
                    return Class::Include;
                }
                rw.failed = Some("a keyspace-wide write ran during the rewrite".into());
                return Class::Skip;
            }
            Reach::Meta => meta = true,
            Reach::Keys => keys.extend(e.keys.iter().cloned()),
        }
    }
    if keys.is_empty() {
        return Class::Include;
    }
    let ks = &server.keyspace;
    let (seen, unseen): (Vec<_>, Vec<_>) = keys
        .into_iter()
        .partition(|(_, k)| rw.visited[ks.shard_of(k)]);
    if unseen.is_empty() {
        Class::Include
    } else if seen.is_empty() && !meta {
        Class::Skip
    } else if meta {
        // FUNCTION LOAD in a transaction that also reaches unvisited keys: rare enough
        // to start over.
        rw.failed = Some("a function change ran in a transaction during the rewrite".into());
        Class::Skip
    } else {
        let mut seen = seen;
        seen.sort();
        seen.dedup();
        Class::Restore(seen)
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
// Start-up: loading and opening

/// With `appendonly yes` and an AOF manifest present, loads the AOF (base, then incr files)
/// into the empty keyspace; true when it did (the RDB is then not loaded). A damaged file
/// is an error naming the file and offset; a torn last command is cut off with a warning
/// when `aof-load-truncated` is yes.
pub fn load_at_startup(server: &Arc<Server>) -> Result<bool, String> {
    let (on, truncated_ok, max_bulk) = {
        let c = server.config.read();
        (
            c.get_bool("appendonly"),
            c.get_bool("aof-load-truncated"),
            c.get_u64("proto-max-bulk-len"),
        )
    };
    if !on {
        return Ok(false);
    }
    let (dir, prefix) = aof_dir(server);
    let mpath = dir.join(manifest_name(&prefix));
    let text = match std::fs::read(&mpath) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest {} for reading: {e}",
                mpath.display()
            ))
        }
    };
    let m = Manifest::parse(&text).map_err(|e| {
        format!(
            "*** FATAL AOF MANIFEST FILE ERROR *** {}: {e}",
            mpath.display()
        )
    })?;
    let t0 = Instant::now();
    let files: Vec<&AofFile> = m.base.iter().chain(m.incrs.iter()).collect();
    for f in &files {
        if !dir.join(&f.name).exists() {
            return Err(format!(
                "The append log file {} doesn't exist (listed in the manifest)",
                f.name
            ));
        }
    }
    let mut total = 0u64;
    let mut base_size = 0u64;
    for (i, f) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let path = dir.join(&f.name);
        let size = load_file(server, &path, &f.name, last, truncated_ok, max_bulk)?;
        if f.kind == FileKind::Base {
            base_size = size;
            info!("DB loaded from base file {}", f.name);
        } else {
            info!("DB loaded from incr file {}", f.name);
        }
        total += size;
    }
    let aof = &server.aof;
    aof.current_size.store(total, Relaxed);
    aof.base_size.store(base_size, Relaxed);
    aof.rewrite_base_size.store(base_size, Relaxed);
    *aof.files.lock() = Files {
        dir,
        prefix,
        manifest: m,
        ..Files::default()
    };
    info!(
        "DB loaded from append only file: {:.3} seconds",
        t0.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// Loads one AOF file (RDB or commands); returns its size after any truncation.
fn load_file(
    server: &Arc<Server>,
    path: &Path,
    name: &str,
    last: bool,
    truncated_ok: bool,
    max_bulk: u64,
) -> Result<u64, String> {
    let mut f = File::open(path).map_err(|e| {
        format!("Fatal error: can't open the append log file {name} for reading: {e}")
    })?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        return Ok(0);
    }
    let mut sig = [0u8; 5];
    let is_rdb = f.read_exact(&mut sig).is_ok() && &sig == b"REDIS";
    drop(f);
    let f = File::open(path).map_err(|e| format!("can't open {name}: {e}"))?;
    if is_rdb {
        crate::snapshot::load_from_opts(server, BufReader::with_capacity(1 << 20, f), true)
            .map_err(|e| {
                format!("Error reading the RDB base file {name}: {e}. AOF loading aborted")
            })?;
        return Ok(len);
    }
    let mut reader = CommandReader::new(BufReader::with_capacity(1 << 20, f), max_bulk);
    let mut rep = Replayer::new(server);
    let cut = loop {
        let at = reader.offset();
        match reader.next_item() {
            Ok(None) => {
                if rep.in_multi() {
                    warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
                    break Some(rep.multi_start);
                }
                break None;
            }
            Ok(Some(item)) => {
                if let Some(t) = item.now_ns() {
                    rep.now = t;
                } else if let Item::Command(args) = item {
                    rep.command(args, at).map_err(|e| {
                        format!("{e} reading the append only file {name} at offset {at}")
                    })?;
                }
            }
            Err(ReadError::Truncated { offset }) => {
                break Some(if rep.in_multi() {
                    rep.multi_start
                } else {
                    offset
                });
            }
            Err(ReadError::Corrupt { offset, msg }) => {
                return Err(format!(
                    "Bad file format reading the append only file {name} at offset {offset}: {msg}. Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>"
                ));
            }
            Err(e @ ReadError::NewerFormat { .. }) => {
                return Err(format!(
                    "Can't load the append only file {name}: {e}. Exiting."
                ))
            }
            Err(ReadError::Io(e)) => {
                return Err(format!(
                    "Unrecoverable error reading the append only file {name}: {e}"
                ))
            }
        }
    };
    let Some(valid) = cut else {
        return Ok(len);
    };
    if !last {
        return Err(format!(
            "Unexpected end of file reading the append only file {name} at offset {valid}: only the last file may be truncated"
        ));
    }
    if !truncated_ok {
        return Err(format!(
            "Unexpected end of file reading the append only file {name} (last complete command ends at offset {valid} of {len}). You can: 1) Make a backup of your AOF file, then use redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
        ));
    }
    warn!("!!! Warning: short read while loading the AOF file {name}!!!");
    warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(valid))
        .map_err(|e| format!("Error truncating the AOF file {name}: {e}"))?;
    warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
    Ok(valid)
}

/// Runs an AOF's commands as a client that never blocks and whose replies are dropped,
/// each at the time its annotation gives (0, where nothing expires, before any).
struct Replayer<'s> {
    server: &'s Arc<Server>,
    client: Client,
    now: u64,
    multi: Option<Vec<(Vec<Vec<u8>>, u64)>>,
    multi_start: u64,
}

impl<'s> Replayer<'s> {
    fn new(server: &'s Arc<Server>) -> Self {
        let addr: std::net::SocketAddr = ([0, 0, 0, 0], 0).into();
        let mut client = Client::new(Arc::new(ClientInfo::new(0, addr, addr, -1)), true);
        client.block_mode = BlockMode::NoBlock;
        Replayer {
            server,
            client,
            now: 0,
            multi: None,
            multi_start: 0,
        }
    }

    fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    fn command(&mut self, args: Vec<Vec<u8>>, at: u64) -> Result<(), String> {
        if effects::opens_block(&args[0]) {
            self.multi = Some(Vec::new());
            self.multi_start = at;
            return Ok(());
        }
        if effects::closes_block(&args[0]) {
            for (a, at) in self.multi.take().unwrap_or_default() {
                self.run(a, at)?;
            }
            return Ok(());
        }
        if let Some(q) = self.multi.as_mut() {
            q.push((args, at));
            return Ok(());
        }
        self.run(args, at)
    }

    fn run(&mut self, args: Vec<Vec<u8>>, _at: u64) -> Result<(), String> {
        let mut owned = OwnedArgs::default();
        for a in &args {
            owned.push(a);
        }
        let a = owned.args();
        let reg = &self.server.registry;
        let show = || String::from_utf8_lossy(&args[0]).into_owned();
        let idx = reg.resolve(&a).map_err(|why| match why {
            Unresolved::Unknown => format!("Unknown command '{}'", show()),
            _ => format!("Unknown subcommand of '{}'", show()),
        })?;
        let spec = reg.entry(idx).spec;
        if !spec.arity_ok(a.len()) {
            return Err(format!("Wrong number of arguments for '{}'", show()));
        }
        let Some(h) = spec.handler else {
            return Ok(());
        };
        let mut out = ReplyWriter::new(Protocol::Resp2);
        let mut ctx = Ctx {
            server: self.server,
            client: &mut self.client,
            out: &mut out,
            stats: &self.server.workers[0],
            now: self.now,
            rng: CmdRng::Thread,
            park: None,
        };
        // Errors are ignored, as Redis ignores the replies of AOF commands.
        let _ = h(&mut ctx, a);
        self.client.block_request = None;
        self.client.ready_keys.clear();
        drop(storage::events::take());
        Ok(())
    }
}

/// After loading: with `appendonly yes`, opens the AOF for appending (creating the base,
/// an incr file and the manifest when there is none yet) and turns propagation on, before
/// any client connects. Starts the background thread either way.
pub fn start(server: &Arc<Server>) -> Result<(), String> {
    let (on, policy) = {
        let c = server.config.read();
        (c.get_bool("appendonly"), policy_of(c.get("appendfsync")))
    };
    let aof = &server.aof;
    aof.policy.store(policy, Relaxed);
    spawn_thread(server)?;
    if !on {
        return Ok(());
    }
    let (dir, prefix) = aof_dir(server);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
    let has_manifest = aof.files.lock().manifest != Manifest::default();
    if has_manifest {
        open_for_append(server).map_err(|e| format!("Can't open the append-only file: {e}"))?;
        aof.on.store(true, Relaxed);
        return Ok(());
    }
    // No AOF yet: write a base of what is loaded (nothing runs concurrently yet).
    {
        let mut f = aof.files.lock();
        f.dir = dir;
        f.prefix = prefix;
    }
    aof.on.store(true, Relaxed);
    info!("Creating AOF base file on server start");
    rewrite(server).map_err(|e| format!("Can't create the AOF base file: {e}"))
}

/// Opens the last incr file of the loaded manifest for appending (creating one when the
/// manifest has none).
fn open_for_append(server: &Server) -> std::io::Result<()> {
    let aof = &server.aof;
    let mut f = aof.files.lock();
    let f = &mut *f;
    if f.manifest.incrs.is_empty() {
        let seq = f.manifest.last_incr_seq().max(f.manifest.base_seq()) + 1;
        let name = incr_name(&f.prefix, seq);
        File::create(f.dir.join(&name))?;
        f.manifest.incrs.push(AofFile {
            name,
            seq,
            kind: FileKind::Incr,
        });
        write_manifest(&f.dir, &f.prefix, &f.manifest)?;
    }
    let last = f
        .manifest
        .incrs
        .last()
        .map(|i| i.name.clone())
        .unwrap_or_default();
    let path = f.dir.join(&last);
    let file = OpenOptions::new().append(true).create(true).open(&path)?;
    f.incr_len = file_len(&path);
    f.incr = Some(file);
    let mut b = aof.buf.lock();
    b.main = Stream::fresh();
    b.main_on = true;
    Ok(())
}

// ------------------------------------------------------------------------------------------
// Rewrite

/// How BGREWRITEAOF was answered.
pub enum Bg {
    /// Started.
    Started,
    /// One is already running.
    Running,
}

/// Starts a rewrite on its own thread (BGREWRITEAOF, `appendonly yes` at run time,
/// automatic rewrite).
pub fn bgrewrite(server: &Arc<Server>) -> Result<Bg, String> {
    let aof = &server.aof;
    if aof.rewriting.swap(true, Relaxed) {
        return Ok(Bg::Running);
    }
    let srv = server.clone();
    let spawned = std::thread::Builder::new()
        .name("ember-aofrw".into())
        .spawn(move || {
            // Turning the AOF on at run time: propagation starts with every worker
            // stopped between commands, so no write escapes both the log and the base.
            let want = srv.config.read().get_bool("appendonly");
            if want && !srv.aof.on.load(Relaxed) {
                let gates = srv.lock_gates();
                srv.aof.on.store(true, Relaxed);
                drop(gates);
            }
            let _ = rewrite_marked(&srv);
        });
    if let Err(e) = spawned {
        aof.rewriting.store(false, Relaxed);
        return Err(format!("can't start the rewrite thread: {e}"));
    }
    Ok(Bg::Started)
}

fn fail(aof: &Aof) {
    aof.last_rewrite_ok.store(false, Relaxed);
    aof.failures.fetch_add(1, Relaxed);
    aof.last_rewrite_fail.store(now_s(), Relaxed);
}

/// A rewrite in the calling thread (start-up).
fn rewrite(server: &Arc<Server>) -> Result<(), String> {
    if server.aof.rewriting.swap(true, Relaxed) {
        return Err("a rewrite is already running".into());
    }
    rewrite_marked(server)
}

/// The rewrite itself; `rewriting` is already set and is cleared here.
fn rewrite_marked(server: &Arc<Server>) -> Result<(), String> {
    let aof = &server.aof;
    aof.abort.store(false, Relaxed);
    aof.rewrite_started.store(now_s(), Relaxed);
    let t0 = Instant::now();
    info!("Background append only file rewriting started");
    let r = rewrite_inner(server);
    aof.last_rewrite_secs
        .store(t0.elapsed().as_secs() as i64, Relaxed);
    match &r {
        Ok(()) => {
            aof.last_rewrite_ok.store(true, Relaxed);
            aof.rewrites.fetch_add(1, Relaxed);
            aof.failures.store(0, Relaxed);
            info!("Background AOF rewrite finished successfully");
        }
        Err(e) => {
            warn!("Background AOF rewrite failed: {e}");
            fail(aof);
        }
    }
    aof.rewriting.store(false, Relaxed);
    r
}

/// Undoes a rewrite that did not finish: forgets the next incr file and the temp base.
fn cleanup(aof: &Aof, tmp: &Path) {
    aof.acquire();
    let next = {
        let mut f = aof.files.lock();
        aof.buf.lock().rewrite = None;
        f.next.take()
    };
    aof.release();
    if let Some((_, name, _)) = next {
        let dir = aof.files.lock().dir.clone();
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_file(tmp);
}

fn rewrite_inner(server: &Arc<Server>) -> Result<(), String> {
    let aof = &server.aof;
    let (preamble, compress) = {
        let c = server.config.read();
        (
            c.get_bool("aof-use-rdb-preamble"),
            c.get_bool("rdbcompression"),
        )
    };
    let ks = &server.keyspace;
    let shards = ks.shard_count();
    // With `appendonly no` (BGREWRITEAOF), only a base and a manifest naming it are written.
    let live = aof.on.load(Relaxed);
    let dir = {
        let mut f = aof.files.lock();
        if f.prefix.is_empty() {
            (f.dir, f.prefix) = aof_dir(server);
        }
        f.dir.clone()
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("Can't create the AOF directory {}: {e}", dir.display()))?;
    let tmp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    // Start: drain the old incr file, open the next one, start the filtered stream.
    aof.acquire();
    let started = (|| -> std::io::Result<Vec<Vec<u8>>> {
        let mut f = aof.files.lock();
        aof.write_locked(&mut f);
        let seq = f.manifest.last_incr_seq().max(f.manifest.base_seq()) + 1;
        let name = incr_name(&f.prefix, seq);
        let file = File::create(f.dir.join(&name))?;
        f.next = Some((file, name, seq));
        aof.buf.lock().rewrite = Some(RewriteBuf {
            out: Stream::fresh(),
            visited: vec![false; shards],
            nvisited: 0,
            failed: None,
        });
        Ok(server.scripting.func.lock().library_codes())
    })();
    aof.release();
    let libs = match started {
        Ok(l) => l,
        Err(e) => {
            cleanup(aof, &tmp);
            return Err(format!("can't open the new incr file: {e}"));
        }
    };
    let walked = walk(server, &tmp, &libs, preamble, compress);
    if let Err(e) = walked {
        cleanup(aof, &tmp);
        return Err(e);
    }
    // Finish: swap the files under the token.
    aof.acquire();
    let done = (|| -> Result<Vec<String>, String> {
        if aof.abort.load(Relaxed) {
            return Err("rewrite aborted".into());
        }
        if let Some(why) = aof
            .buf
            .lock()
            .rewrite
            .as_ref()
            .and_then(|r| r.failed.clone())
        {
            return Err(why);
        }
        let mut f = aof.files.lock();
        aof.write_locked(&mut f);
        let f = &mut *f;
        let Some((next, next_name, incr_seq)) = f.next.take() else {
            return Err("the new incr file is gone".into());
        };
        next.sync_all()
            .map_err(|e| format!("fsync of the new incr file: {e}"))?;
        let base_seq = f.manifest.base_seq() + 1;
        let bname = base_name(&f.prefix, base_seq, preamble);
        std::fs::rename(&tmp, f.dir.join(&bname))
            .map_err(|e| format!("can't rename the new base: {e}"))?;
        let mut m = Manifest {
            base: Some(AofFile {
                name: bname.clone(),
                seq: base_seq,
                kind: FileKind::Base,
            }),
            history: Vec::new(),
            incrs: if live {
                vec![AofFile {
                    name: next_name.clone(),
                    seq: incr_seq,
                    kind: FileKind::Incr,
                }]
            } else {
                Vec::new()
            },
        };
        if let Err(e) = write_manifest(&f.dir, &f.prefix, &m) {
            let _ = std::fs::remove_file(f.dir.join(&bname));
            f.next = Some((next, next_name, incr_seq));
            return Err(format!("can't write the manifest: {e}"));
        }
        let old: Vec<String> = f
            .manifest
            .base
            .iter()
            .chain(f.manifest.history.iter())
            .chain(f.manifest.incrs.iter())
            .map(|x| x.name.clone())
            .filter(|n| *n != bname && *n != next_name)
            .collect();
        std::mem::swap(&mut f.manifest, &mut m);
        let base_len = file_len(&f.dir.join(&bname));
        aof.base_size.store(base_len, Relaxed);
        if !live {
            drop(next);
            let _ = std::fs::remove_file(f.dir.join(&next_name));
            aof.buf.lock().rewrite = None;
            return Ok(old);
        }
        let next_len = file_len(&f.dir.join(&next_name));
        f.incr = Some(next);
        f.incr_len = next_len;
        let mut b = aof.buf.lock();
        let rw = b.rewrite.take();
        b.main = Stream {
            data: Vec::new(),
            db: rw.as_ref().and_then(|r| r.out.db),
            now: rw.as_ref().map_or(0, |r| r.out.now),
            marked: rw.as_ref().is_some_and(|r| r.out.marked),
        };
        b.main_on = true;
        aof.current_size.store(base_len + next_len, Relaxed);
        aof.rewrite_base_size.store(base_len + next_len, Relaxed);
        Ok(old)
    })();
    aof.release();
    match done {
        Ok(old) => {
            for n in old {
                let _ = std::fs::remove_file(dir.join(n));
            }
            Ok(())
        }
        Err(e) => {
            cleanup(aof, &tmp);
            Err(e)
        }
    }
}

/// Where the new base goes.
enum Sink {
    Rdb(rdb::Writer<std::io::BufWriter<File>>),
    Text(std::io::BufWriter<File>),
}

/// Writes the new base to `tmp`: functions, then each shard under the order token.
fn walk(
    server: &Server,
    tmp: &Path,
    libs: &[Vec<u8>],
    preamble: bool,
    compress: bool,
) -> Result<(), String> {
    let aof = &server.aof;
    let ks = &server.keyspace;
    let io = |e: std::io::Error| format!("can't write the new base: {e}");
    let file = File::create(tmp).map_err(io)?;
    let out = std::io::BufWriter::with_capacity(1 << 20, file);
    // The RDB preamble, or RESTORE commands (`aof-use-rdb-preamble no`).
    let mut text = Vec::new();
    let mut w = if preamble {
        let mut w = rdb::Writer::new(out, compress).map_err(io)?;
        w.aux(
            b"redis-ver",
            crate::cmd::connection::REDIS_COMPAT_VERSION.as_bytes(),
        )
        .map_err(io)?;
        w.aux(b"redis-bits", b"64").map_err(io)?;
        w.aux(b"ctime", now_s().to_string().as_bytes())
            .map_err(io)?;
        w.aux(b"used-mem", b"0").map_err(io)?;
        w.aux(b"aof-base", b"1").map_err(io)?;
        for code in libs {
            w.function(code).map_err(io)?;
        }
        Sink::Rdb(w)
    } else {
        encode_format(&mut text);
        for code in libs {
            encode_command(&mut text, &effects::function_load(code));
        }
        Sink::Text(out)
    };
    let mut text_db: Option<usize> = None;
    for shard in 0..ks.shard_count() {
        if aof.abort.load(Relaxed) {
            return Err("rewrite aborted".into());
        }
        let mut parts: Vec<(usize, u64, u64, Vec<u8>)> = Vec::new();
        aof.acquire();
        ks.with_shard(shard, |sh| {
            for db in 0..ks.db_count() {
                let t = sh.table_ref(db);
                if t.is_empty() {
                    continue;
                }
                let mut buf = Vec::new();
                // Every key physically present, expired or not: the keys' state as the
                // commands after this visit see it (see `load_from_opts`).
                t.for_each_live(0, |k, e| {
                    let tags = t.tags_of(k);
                    let at = e.expire_at().unwrap_or(0);
                    if preamble {
                        let tags: Vec<&[u8]> = tags.iter().map(|t| &t[..]).collect();
                        rdb::encode_key(&mut buf, k, &e.value, at, &tags, compress);
                    } else {
                        let mut eff = Effect::new(db, 0);
                        let ms = if at.is_multiple_of(NS_PER_MS) {
                            at / NS_PER_MS
                        } else {
                            0
                        };
                        eff.cmd(&effects::restore(k, ms, rdb::dump_payload(&e.value)));
                        if at != 0 && ms == 0 {
                            ttl_cmd(&mut eff, k, at);
                        }
                        if !tags.is_empty() {
                            eff.cmd(&effects::tags(k, tags));
                        }
                        buf.extend_from_slice(&eff.resp);
                    }
                });
                parts.push((db, t.len() as u64, t.volatile_len() as u64, buf));
            }
        });
        if let Some(rw) = aof.buf.lock().rewrite.as_mut() {
            rw.visited[shard] = true;
            rw.nvisited += 1;
        }
        aof.release();
        for (db, n, vol, bytes) in parts {
            match &mut w {
                Sink::Rdb(w) => {
                    w.select_db(db, n, vol).map_err(io)?;
                    w.write_raw(&bytes).map_err(io)?;
                }
                Sink::Text(out) => {
                    if text_db != Some(db) {
                        encode_command(&mut text, &effects::select(db));
                        text_db = Some(db);
                    }
                    text.extend_from_slice(&bytes);
                    if text.len() > 1 << 20 {
                        out.write_all(&text).map_err(io)?;
                        text.clear();
                    }
                }
            }
        }
    }
    let out = match w {
        Sink::Rdb(w) => w.finish().map_err(io)?,
        Sink::Text(mut out) => {
            out.write_all(&text).map_err(io)?;
            out
        }
    };
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(())
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
