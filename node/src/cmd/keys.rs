//! Generic keyspace commands: DEL, UNLINK, EXISTS, TYPE, RENAME, RENAMENX, KEYS, SCAN,
//! RANDOMKEY, MOVE, COPY, TOUCH and OBJECT.
//!
//! Multi-key commands lock every shard they touch at once (ascending order), so each one
//! is atomic. Lookups follow Redis: read lookups count keyspace hits/misses, write
//! lookups do not; TYPE, EXISTS and OBJECT leave the access time alone.

use resp::Args;
use storage::pattern::glob_match;
use storage::{Entry, Value};

use crate::cmd::util::{is, parse_cursor, parse_i64, parse_scan_opts, reply_help, ScanOpts};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Generic;

/// Redis shares the integer objects 0..10000 (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;
/// The refcount Redis reports for a shared object (`OBJ_SHARED_REFCOUNT`, `INT_MAX`).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// Generic keyspace commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("del", -2, WRITE, (1, -1, 1), G, del).doc("Deletes one or more keys.", "1.0.0"),
    CommandSpec::new("unlink", -2, WRITE | FAST, (1, -1, 1), G, unlink)
        .doc("Asynchronously deletes one or more keys.", "4.0.0"),
    CommandSpec::new("exists", -2, READONLY | FAST, (1, -1, 1), G, exists)
        .doc("Determines whether one or more keys exist.", "1.0.0"),
    CommandSpec::new("type", 2, READONLY | FAST, (1, 1, 1), G, type_cmd)
        .doc("Determines the type of value stored at a key.", "1.0.0"),
    CommandSpec::new("rename", 3, WRITE, (1, 2, 1), G, rename)
        .doc("Renames a key and overwrites the destination.", "1.0.0"),
    CommandSpec::new("renamenx", 3, WRITE | FAST, (1, 2, 1), G, renamenx)
        .doc("Renames a key only when the target key name doesn't exist.", "1.0.0"),
    CommandSpec::new("keys", 2, READONLY, (0, 0, 0), G, keys)
        .doc("Returns all key names that match a pattern.", "1.0.0"),
    CommandSpec::new("scan", -2, READONLY, (0, 0, 0), G, scan)
        .doc("Iterates over the key names in the database.", "2.8.0"),
    CommandSpec::new("randomkey", 1, READONLY, (0, 0, 0), G, randomkey)
        .doc("Returns a random key name from the database.", "1.0.0"),
    CommandSpec::new("move", 3, WRITE | FAST, (1, 1, 1), G, move_cmd)
        .doc("Moves a key to another database.", "1.0.0"),
    CommandSpec::new("copy", -3, WRITE | DENYOOM, (1, 2, 1), G, copy)
        .doc("Copies the value of a key to a new key.", "6.2.0"),
    CommandSpec::new("touch", -2, READONLY | FAST, (1, -1, 1), G, touch).doc(
        "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        "3.2.1",
    ),
    CommandSpec::container("object", G, OBJECT_SUBCOMMANDS)
        .doc("A container for object introspection commands.", "2.2.3"),
];

static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("encoding", 3, READONLY, (2, 2, 1), G, object_encoding)
        .doc("Returns the internal encoding of a Redis object.", "2.2.3"),
    CommandSpec::new("freq", 3, READONLY, (2, 2, 1), G, object_freq).doc(
        "Returns the logarithmic access frequency counter of a Redis object.",
        "4.0.0",
    ),
    CommandSpec::new("idletime", 3, READONLY, (2, 2, 1), G, object_idletime).doc(
        "Returns the time since the last access to a Redis object.",
        "2.2.3",
    ),
    CommandSpec::new("refcount", 3, READONLY, (2, 2, 1), G, object_refcount)
        .doc("Returns the reference count of a value of a key.", "2.2.3"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), G, object_help).doc(
        "Returns helpful text about the different subcommands.",
        "6.2.0",
    ),
];

/// Removes every key named in `args[1..]`; the values are dropped after the locks are
/// released so freeing a large value never stalls the shard, and with `lazy` (UNLINK)
/// large values are freed on the lazy-free thread.
fn delete_keys(ctx: &mut Ctx<'_>, args: Args<'_>, lazy: bool) -> CmdResult {
    let db = ctx.db();
    let keys = args.slice(1);
    let mut removed: Vec<Entry> = Vec::new();
    {
        let mut g = ctx.lock_keys(keys);
        for k in keys {
            if let Some(e) = g.remove(db, k) {
                removed.push(e);
                ctx.notify(crate::notify::GENERIC, "del", k);
            }
        }
    }
    ctx.out.int(removed.len() as i64);
    if lazy {
        let big = crate::server::LAZYFREE_THRESHOLD;
        for e in removed {
            if e.value.free_effort() > big {
                ctx.server.lazyfree.free(Box::new(e));
            }
        }
    }
    Ok(())
}

fn del(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    delete_keys(ctx, args, false)
}

fn unlink(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    delete_keys(ctx, args, true)
}

fn exists(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let db = ctx.db();
    let keys = args.slice(1);
    let mut n = 0i64;
    {
        let mut g = ctx.lock_keys(keys);
        for k in keys {
            let found = g.peek(db, k).is_some();
            ctx.hit_key(found, k);
            n += i64::from(found);
        }
    }
    ctx.out.int(n);
    Ok(())
}

fn type_cmd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let name = g.peek().map_or("none", |e| e.value.type_name());
    drop(g);
    ctx.hit_key(name != "none", args.arg(1));
    ctx.out.simple(name.as_bytes());
    Ok(())
}

/// RENAME and RENAMENX; returns whether the key was renamed.
fn rename_generic(ctx: &mut Ctx<'_>, args: Args<'_>, nx: bool) -> Result<bool, CmdError> {
    let (src, dst) = (args.arg(1), args.arg(2));
    let db = ctx.db();
    let mut g = ctx.lock_keys([src, dst]);
    if g.get(db, src).is_none() {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        return Ok(false);
    }
    if nx && g.peek(db, dst).is_some() {
        return Ok(false);
    }
    // Tags move with the key and replace the overwritten destination's.
    let tags = g.take_tags(db, src);
    let Some(entry) = g.remove(db, src) else {
        return Err(CmdError::NoSuchKey);
    };
    let at = entry.expire_at().unwrap_or(0);
    let old = g.insert(db, dst, entry.value, at);
    g.set_tags(db, dst, tags);
    drop(g);
    if old.is_some() {
        // Redis deletes the target and adds it anew.
        ctx.notify(crate::notify::NEW, "new", dst);
    }
    drop(old);
    ctx.notify(crate::notify::GENERIC, "rename_from", src);
    ctx.notify(crate::notify::GENERIC, "rename_to", dst);
    Ok(true)
}

fn rename(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    rename_generic(ctx, args, false)?;
    ctx.out.ok();
    Ok(())
}

fn renamenx(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let done = rename_generic(ctx, args, true)?;
    ctx.out.int(i64::from(done));
    Ok(())
}

fn keys(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let pat = args.arg(1);
    let all = pat == b"*";
    let served = crate::cluster::ServedKeys::for_client(ctx.server, ctx.client);
    let found = ctx.ks().collect_keys(ctx.db(), ctx.now, |k, _| {
        (all || glob_match(pat, k, false)) && served.as_ref().is_none_or(|s| s.contains(k))
    });
    ctx.out.array(found.len());
    for k in &found {
        ctx.out.bulk(k);
    }
    Ok(())
}

fn scan(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let cursor = parse_cursor(args.arg(1))?;
    let ScanOpts {
        count,
        pattern,
        type_name,
    } = parse_scan_opts(&args, 2, true)?;
    let served = crate::cluster::ServedKeys::for_client(ctx.server, ctx.client);
    let page = ctx.ks().scan(ctx.db(), cursor, count, ctx.now, |k, e| {
        served.as_ref().is_none_or(|s| s.contains(k))
            && pattern.is_none_or(|p| glob_match(p, k, false))
            && type_name.is_none_or(|t| t.eq_ignore_ascii_case(e.value.type_name().as_bytes()))
    });
    ctx.out.array(2);
    ctx.out
        .bulk(itoa::Buffer::new().format(page.cursor).as_bytes());
    ctx.out.array(page.keys.len());
    for k in &page.keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

fn randomkey(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    match ctx.ks().random_key(ctx.db(), ctx.now) {
        Some(k) => ctx.out.bulk(&k),
        None => ctx.out.null(),
    }
    Ok(())
}

/// Parses a database index as Redis's `getIntFromObjectOrReply` + `selectDb` do.
fn parse_db(ctx: &Ctx<'_>, b: &[u8]) -> Result<usize, CmdError> {
    let v = parse_i64(b)?;
    let v = i32::try_from(v).map_err(|_| {
        CmdError::err("value is out of range, value must between -2147483648 and 2147483647")
    })?;
    match usize::try_from(v) {
        Ok(db) if db < ctx.ks().db_count() => Ok(db),
        _ => Err(CmdError::DbIndex),
    }
}

fn same_object() -> CmdError {
    CmdError::err("source and destination objects are the same")
}

fn move_cmd(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(1);
    let dst = parse_db(ctx, args.arg(2))?;
    let src = ctx.db();
    if src == dst {
        return Err(same_object());
    }
    let mut g = ctx.lock(key);
    let (h, now) = (g.hash(), g.now());
    let mut moved = false;
    if g.get().is_some() && !g.table_of(dst).contains(h, key, now) {
        let tags = g.table_of(src).take_tags(h, key);
        if let Some(e) = g.remove() {
            let at = e.expire_at().unwrap_or(0);
            let dst_table = g.table_of(dst);
            dst_table.insert(h, key, e.value, at, now);
            dst_table.set_tags(key, tags);
            moved = true;
        }
    }
    drop(g);
    if moved {
        ctx.touched(dst, key);
        ctx.notify_db(crate::notify::NEW, "new", key, dst);
        ctx.notify(crate::notify::GENERIC, "move_from", key);
        ctx.notify_db(crate::notify::GENERIC, "move_to", key, dst);
    }
    ctx.out.int(i64::from(moved));
    Ok(())
}

fn copy(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (src, dst) = (args.arg(1), args.arg(2));
    let src_db = ctx.db();
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let opt = args.arg(i);
        if is(opt, "replace") {
            replace = true;
        } else if is(opt, "db") && i + 1 < args.len() {
            dst_db = parse_db(ctx, args.arg(i + 1))?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src_db == dst_db && src == dst {
        return Err(same_object());
    }
    let mut g = ctx.lock_keys([src, dst]);
    let Some(e) = g.get(src_db, src) else {
        drop(g);
        ctx.hit_key(false, src);
        ctx.out.int(0);
        return Ok(());
    };
    let (value, at) = (e.value.clone(), e.expire_at().unwrap_or(0));
    ctx.hit(true);
    if !replace && g.peek(dst_db, dst).is_some() {
        drop(g);
        ctx.out.int(0);
        return Ok(());
    }
    let old = g.insert(dst_db, dst, value, at);
    drop(g);
    if old.is_some() {
        // Redis deletes the target and adds it anew.
        ctx.notify_db(crate::notify::NEW, "new", dst, dst_db);
    }
    drop(old);
    if dst_db != src_db {
        // A key in another database than the command's own key arguments.
        ctx.touched(dst_db, dst);
    }
    ctx.notify_db(crate::notify::GENERIC, "copy_to", dst, dst_db);
    ctx.out.int(1);
    Ok(())
}

fn touch(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let db = ctx.db();
    let keys = args.slice(1);
    let mut n = 0i64;
    {
        let mut g = ctx.lock_keys(keys);
        for k in keys {
            let found = g.get(db, k).is_some();
            ctx.hit_key(found, k);
            n += i64::from(found);
        }
    }
    ctx.out.int(n);
    Ok(())
}

/// Looks `args[2]` up without touching it (as Redis's `objectCommandLookup`) and returns
/// what `f` extracts; `None` when the key does not exist.
fn object_lookup<T>(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    f: impl FnOnce(&Entry, u64) -> T,
) -> Option<T> {
    let now = ctx.now;
    let mut g = ctx.lock(args.arg(2));
    let info = g.peek().map(|e| f(e, now));
    drop(g);
    ctx.hit(info.is_some());
    info
}

fn object_encoding(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    match object_lookup(ctx, args, |e, _| e.value.encoding()) {
        Some(enc) => ctx.out.bulk(enc.as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

/// The refcount Redis would report: small non-negative integers are shared objects.
fn refcount(e: &Entry) -> i64 {
    let shared = matches!(&e.value, Value::String(s)
        if s.as_int().is_some_and(|i| (0..SHARED_INTEGERS).contains(&i)));
    if shared {
        SHARED_REFCOUNT
    } else {
        1
    }
}

fn object_refcount(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    match object_lookup(ctx, args, |e, _| refcount(e)) {
        Some(n) => ctx.out.int(n),
        None => ctx.out.null(),
    }
    Ok(())
}

fn object_idletime(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let Some(s) = object_lookup(ctx, args, |e, now| e.idle_secs(now)) else {
        ctx.out.null();
        return Ok(());
    };
    // Under an LFU policy Redis keeps no access time (the field holds the counter).
    if ctx.server.evict.policy().is_lfu() {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    ctx.out.int(i64::try_from(s).unwrap_or(i64::MAX));
    Ok(())
}

fn object_freq(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let Some(freq) = object_lookup(ctx, args, |e, now| e.lfu_freq(now)) else {
        ctx.out.null();
        return Ok(());
    };
    if !ctx.server.evict.policy().is_lfu() {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    ctx.out.int(i64::from(freq));
    Ok(())
}

fn object_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    const LINES: &[&str] = &[
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of a <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
    ];
    reply_help(ctx.out, args.arg(0), LINES);
    Ok(())
}
