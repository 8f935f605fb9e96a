//! Persistence commands: SAVE, BGSAVE, LASTSAVE (RDB snapshots, see [`crate::snapshot`]),
//! BGREWRITEAOF (see [`crate::aof`])
//! and DUMP / RESTORE (one value in Redis's DUMP payload format, interchangeable with
//! `redis-server`'s).

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;
use storage::clock::NS_PER_MS;
use storage::rdb::{self, read::PayloadError};

use super::util::{is, parse_i64};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

/// Persistence commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_MULTI,
        (0, 0, 0),
        Group::Server,
        save,
    )
    .doc("Synchronously saves the database(s) to disk.", "1.0.0"),
    CommandSpec::new(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT,
        (0, 0, 0),
        Group::Server,
        bgsave,
    )
    .doc("Asynchronously saves the database(s) to disk.", "1.0.0"),
    CommandSpec::new(
        "bgrewriteaof",
        1,
        ADMIN | NOSCRIPT,
        (0, 0, 0),
        Group::Server,
        bgrewriteaof,
    )
    .doc(
        "Asynchronously rewrites the append-only file to disk.",
        "1.0.0",
    ),
    CommandSpec::new(
        "lastsave",
        1,
        LOADING | STALE | FAST,
        (0, 0, 0),
        Group::Server,
        lastsave,
    )
    .doc(
        "Returns the Unix timestamp of the last successful save to disk.",
        "1.0.0",
    ),
    CommandSpec::new("dump", 2, READONLY, (1, 1, 1), Group::Generic, dump).doc(
        "Returns a serialized representation of the value stored at a key.",
        "2.6.0",
    ),
    CommandSpec::new(
        "restore",
        -4,
        WRITE | DENYOOM,
        (1, 1, 1),
        Group::Generic,
        restore,
    )
    .doc(
        "Creates a key from the serialized representation of a value.",
        "2.6.0",
    ),
];

fn save(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    if ctx.server.snapshots.in_progress.load(Relaxed) {
        return Err(CmdError::err("Background save already in progress"));
    }
    match crate::snapshot::save(ctx.server) {
        Ok(_) => {
            ctx.out.ok();
            Ok(())
        }
        Err(_) => Err(CmdError::raw("ERR")),
    }
}

fn bgsave(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let schedule = match args.len() {
        1 => false,
        2 if is(args.arg(1), "schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    if !crate::snapshot::bgsave(ctx.server) {
        if !schedule {
            return Err(CmdError::err("Background save already in progress"));
        }
        ctx.server.snapshots.scheduled.store(true, Relaxed);
        ctx.out.simple(b"Background saving scheduled");
        return Ok(());
    }
    ctx.out.simple(b"Background saving started");
    Ok(())
}

fn lastsave(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let t = ctx.server.snapshots.last_save.load(Relaxed);
    ctx.out.int(t as i64);
    Ok(())
}

fn dump(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let payload = {
        let mut g = ctx.lock(args.arg(1));
        g.get().map(|e| rdb::dump_payload(&e.value))
    };
    ctx.hit(payload.is_some());
    match payload {
        Some(p) => ctx.out.bulk(&p),
        None => ctx.out.null(),
    }
    Ok(())
}

fn restore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    restore_run(ctx, args)?;
    if args.arg(2) != b"0" {
        declare_restore(ctx, args);
    }
    Ok(())
}

/// Declares ([`crate::effects`]) a RESTORE with a TTL as one with the absolute deadline the
/// key ended with (`ABSTTL`, or Ember's `NEXPIREAT` after it for a deadline that is not a
/// whole millisecond), and as `DEL` when the TTL was already past.
fn declare_restore(ctx: &mut Ctx<'_>, args: Args<'_>) {
    if !ctx.client.fx.on() {
        return;
    }
    let key = args.arg(1);
    let Some(at) = ctx.lock(key).peek().map(|e| e.expire_at()) else {
        ctx.client.fx.record(&[&b"DEL"[..], key]);
        return;
    };
    let whole_ms = at.filter(|at| at.is_multiple_of(NS_PER_MS));
    let ms = whole_ms.map_or(0, |at| at / NS_PER_MS).to_string();
    let mut v: Vec<&[u8]> = vec![b"RESTORE", key, ms.as_bytes(), args.arg(3)];
    let mut i = 4;
    while i < args.len() {
        let a = args.arg(i);
        if is(a, "absttl") {
            i += 1;
            continue;
        }
        v.push(a);
        if is(a, "idletime") || is(a, "freq") {
            v.push(args.arg(i + 1));
            i += 1;
        }
        i += 1;
    }
    if whole_ms.is_some() {
        v.push(b"ABSTTL");
    }
    ctx.client.fx.record(&v);
    if let Some(at) = at.filter(|at| !at.is_multiple_of(NS_PER_MS)) {
        ctx.client.fx.record(&crate::effects::deadline_cmd(key, at));
    }
}

/// RESTORE itself; [`restore`] declares its effect.
fn restore_run(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let key = args.arg(1);
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let a = args.arg(j);
        let more = j + 1 < args.len();
        if is(a, "replace") {
            replace = true;
        } else if is(a, "absttl") {
            absttl = true;
        } else if is(a, "idletime") && more && freq.is_none() {
            let v = parse_i64(args.arg(j + 1))?;
            if v < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            j += 1;
        } else if is(a, "freq") && more && idle.is_none() {
            let v = parse_i64(args.arg(j + 1))?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let now = ctx.now;
    if !replace {
        let mut g = ctx.lock(key);
        if g.peek().is_some() {
            return Err(CmdError::raw("BUSYKEY Target key name already exists."));
        }
    }
    let ttl = parse_i64(args.arg(2))?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let value = match rdb::restore_payload(args.arg(3)) {
        Ok(Some(v)) => v,
        Ok(None) | Err(PayloadError::BadData) => return Err(CmdError::err("Bad data format")),
        Err(PayloadError::VersionOrChecksum) => {
            return Err(CmdError::err("DUMP payload version or checksum are wrong"))
        }
    };
    // Deadline in ns since the epoch; 0 for none.
    let at: u64 = if ttl == 0 {
        0
    } else if absttl {
        (ttl as u64).saturating_mul(1_000_000).max(1)
    } else {
        (now / 1_000_000)
            .saturating_add(ttl as u64)
            .saturating_mul(1_000_000)
    };
    let mut g = ctx.lock(key);
    if !replace && g.peek().is_some() {
        return Err(CmdError::raw("BUSYKEY Target key name already exists."));
    }
    if at != 0 && at <= now {
        // Already expired: the old key (REPLACE) is deleted and nothing is created.
        let old = g.remove();
        drop(g);
        if old.is_some() {
            ctx.notify(crate::notify::GENERIC, "del", key);
        }
        drop(old);
        ctx.out.ok();
        return Ok(());
    }
    let old = g.remove();
    g.insert(value, at);
    // As Redis's objectSetLRUOrLFU: FREQ under an LFU policy, IDLETIME under any other.
    let lfu = ctx.server.evict.policy().is_lfu();
    if let Some(e) = g.peek() {
        match (lfu, freq, idle) {
            (true, Some(f), _) => e.set_lfu_freq(f.clamp(0, 255) as u8, now),
            (false, _, Some(secs)) => e.set_idle(now, secs as u64),
            _ => {}
        }
    }
    drop(g);
    drop(old);
    ctx.notify(crate::notify::GENERIC, "restore", key);
    ctx.out.ok();
    Ok(())
}

fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    match crate::aof::bgrewrite(ctx.server).map_err(CmdError::err)? {
        crate::aof::Bg::Started => {
            ctx.out
                .simple(b"Background append only file rewriting started");
            Ok(())
        }
        crate::aof::Bg::Running => Err(CmdError::err(
            "Background append only file rewriting already in progress",
        )),
    }
}
