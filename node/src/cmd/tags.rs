//! Key tags (Ember only): TAG.SET, TAG.DEL, TAG.GET, TAG.MEMBERS, TAG.COUNT, TAG.LIST and
//! TAG.DELKEYS, per database.
//!
//! Tags are key metadata ([`storage::tags`]): they go away with the key (DEL, expiry, a
//! collection emptied, FLUSH, TAG.DELKEYS), move with it (RENAME, MOVE, SWAPDB) and survive
//! an overwrite of its value; COPY does not copy them. The database-wide commands visit the
//! shards one at a time, so they never stall the whole keyspace.

use resp::Args;

use crate::cmd::util::{is, parse_cursor, parse_i64};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Generic;

/// Version the TAG.* commands appeared in (Ember's own numbering).
const SINCE: &str = "0.1.0";

/// Key tag commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("tag.set", -3, WRITE | DENYOOM | FAST, (1, 1, 1), G, tag_set)
        .doc("Adds one or more tags to an existing key (Ember).", SINCE),
    CommandSpec::new("tag.del", -3, WRITE | FAST, (1, 1, 1), G, tag_del)
        .doc("Removes one or more tags from a key (Ember).", SINCE),
    CommandSpec::new("tag.get", 2, READONLY | FAST, (1, 1, 1), G, tag_get)
        .doc("Returns the tags of a key (Ember).", SINCE),
    CommandSpec::new("tag.members", -2, READONLY, (0, 0, 0), G, tag_members).doc(
        "Returns, or iterates with CURSOR, the keys that carry a tag (Ember).",
        SINCE,
    ),
    CommandSpec::new("tag.count", 2, READONLY, (0, 0, 0), G, tag_count).doc(
        "Returns the number of keys that carry a tag (Ember).",
        SINCE,
    ),
    CommandSpec::new("tag.list", 1, READONLY, (0, 0, 0), G, tag_list).doc(
        "Returns every tag that a key of the database carries (Ember).",
        SINCE,
    ),
    CommandSpec::new("tag.delkeys", 2, WRITE, (0, 0, 0), G, tag_delkeys)
        .doc("Deletes every key that carries a tag (Ember).", SINCE),
];

fn tag_set(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, db) = (args.arg(1), ctx.db());
    let mut g = ctx.lock(key);
    if g.peek().is_none() {
        return Err(CmdError::NoSuchKey);
    }
    let (h, now) = (g.hash(), g.now());
    let added = g
        .table_of(db)
        .add_tags(h, key, args.slice(2).iter(), now)
        .ok_or(CmdError::NoSuchKey)?;
    drop(g);
    ctx.out.int(added as i64);
    Ok(())
}

fn tag_del(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, db) = (args.arg(1), ctx.db());
    let mut g = ctx.lock(key);
    let removed = if g.peek().is_some() {
        let (h, now) = (g.hash(), g.now());
        g.table_of(db)
            .remove_tags(h, key, args.slice(2).iter(), now)
    } else {
        0
    };
    drop(g);
    ctx.out.int(removed as i64);
    Ok(())
}

fn tag_get(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (key, db) = (args.arg(1), ctx.db());
    let mut g = ctx.lock(key);
    let found = g.peek().is_some();
    let tags: Vec<Vec<u8>> = if found {
        g.table_of(db)
            .tags_of(key)
            .iter()
            .map(|t| t.to_vec())
            .collect()
    } else {
        Vec::new()
    };
    drop(g);
    ctx.hit_key(found, key);
    reply_list(ctx, &tags);
    Ok(())
}

/// `TAG.MEMBERS tag` or `TAG.MEMBERS tag CURSOR c [COUNT n]` (an SSCAN-shaped page whose
/// cursor is a shard index).
fn tag_members(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let tag = args.arg(1);
    let (db, now) = (ctx.db(), ctx.now);
    if args.len() == 2 {
        let keys = ctx.ks().tag_members(db, tag, now);
        reply_list(ctx, &keys);
        return Ok(());
    }
    if !is(args.arg(2), "cursor") || args.len() < 4 {
        return Err(CmdError::Syntax);
    }
    let cursor = parse_cursor(args.arg(3))?;
    let mut count = 10usize;
    let mut i = 4;
    while i < args.len() {
        if is(args.arg(i), "count") && i + 1 < args.len() {
            let n = parse_i64(args.arg(i + 1))?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let page = ctx.ks().tag_members_page(db, tag, cursor, count, now);
    ctx.out.array(2);
    ctx.out
        .bulk(itoa::Buffer::new().format(page.cursor).as_bytes());
    reply_list(ctx, &page.keys);
    Ok(())
}

fn tag_count(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let n = ctx.ks().tag_count(ctx.db(), args.arg(1), ctx.now);
    ctx.out.int(n as i64);
    Ok(())
}

fn tag_list(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let mut tags = ctx.ks().tag_names(ctx.db(), ctx.now);
    tags.sort_unstable();
    reply_list(ctx, &tags);
    Ok(())
}

/// Deletes every key carrying the tag; each deleted key is touched for WATCH, blocked
/// clients and client-side caching, and notified (`del`), as DEL's keys are.
fn tag_delkeys(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let db = ctx.db();
    let removed = ctx.ks().delete_tagged(db, args.arg(1), ctx.now);
    ctx.out.int(removed.len() as i64);
    for (key, _) in &removed {
        ctx.touched(db, key);
        ctx.notify(crate::notify::GENERIC, "del", key);
    }
    Ok(())
}

fn reply_list(ctx: &mut Ctx<'_>, items: &[Vec<u8>]) {
    ctx.out.array(items.len());
    for it in items {
        ctx.out.bulk(it);
    }
}
