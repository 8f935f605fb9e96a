//! What a command appends: the order token's scope around a write ([`begin`], [`end`]), the effects it declared turned into the commands appended ([`build`]), evictions.

use super::*;

thread_local! {
    pub(super) static TL: RefCell<Tl> = const { RefCell::new(Tl { depth: 0, holding: false, capture: Vec::new() }) };
}

/// Per-thread propagation state: nesting of run_command, whether this thread holds the
/// order token, and the effects of commands run inside EXEC or a script.
pub(super) struct Tl {
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

pub(super) fn now_s() -> u64 {
    clock::now_ns() / clock::NS_PER_SEC
}

/// Whether a command's own arguments are propagated (as opposed to the commands it runs).
pub(super) fn is_write(spec: &CommandSpec) -> bool {
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

pub(super) fn begin_slow<'a>(
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
pub(super) fn build(
    ctx: &Ctx<'_>,
    idx: usize,
    args: Args<'_>,
    declared: Declared,
) -> Option<Effect> {
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
pub(super) fn ttl_cmd(e: &mut Effect, key: &[u8], at: u64) {
    e.cmd(&crate::effects::deadline_cmd(key, at));
}

/// Commands that put `key` in `db` back to its current state: DEL, then RESTORE with its
/// deadline and tags (a rewrite's answer to a command reaching both visited and unvisited
/// shards).
pub(super) fn restore_state(server: &Server, e: &mut Effect, db: usize, key: &[u8]) {
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
