//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS /
//! SHARDNUMSUB / HELP. Delivery is in [`crate::pubsub`]; RESP2's subscribed-mode rule
//! (only the commands flagged `SUB_OK` run) is enforced by the dispatcher.

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;

use crate::client::Subscriptions;
use crate::cmd::util::reply_help;
use crate::ctx::Ctx;
use crate::error::CmdResult;
use crate::pubsub::{ensure_mailbox, Kind};
use crate::registry::{flags::*, CommandSpec, Group};

const P: Group = Group::PubSub;
const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | SUB_OK;

/// Pub/sub commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("subscribe", -2, SUB, (0, 0, 0), P, subscribe)
        .doc("Listens for messages published to channels.", "2.0.0"),
    CommandSpec::new("unsubscribe", -1, SUB, (0, 0, 0), P, unsubscribe)
        .doc("Stops listening to messages posted to channels.", "2.0.0"),
    CommandSpec::new("psubscribe", -2, SUB, (0, 0, 0), P, psubscribe).doc(
        "Listens for messages published to channels that match one or more patterns.",
        "2.0.0",
    ),
    CommandSpec::new("punsubscribe", -1, SUB, (0, 0, 0), P, punsubscribe).doc(
        "Stops listening to messages published to channels that match one or more patterns.",
        "2.0.0",
    ),
    CommandSpec::new("ssubscribe", -2, SUB, (1, -1, 1), P, ssubscribe)
        .doc("Listens for messages published to shard channels.", "7.0.0"),
    CommandSpec::new("sunsubscribe", -1, SUB, (1, -1, 1), P, sunsubscribe).doc(
        "Stops listening to messages posted to shard channels.",
        "7.0.0",
    ),
    CommandSpec::new(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        (0, 0, 0),
        P,
        publish,
    )
    .doc("Posts a message to a channel.", "2.0.0"),
    CommandSpec::new(
        "spublish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        (1, 1, 1),
        P,
        spublish,
    )
    .doc("Post a message to a shard channel", "7.0.0"),
    CommandSpec::container("pubsub", P, PUBSUB_SUBCOMMANDS)
        .doc("A container for Pub/Sub commands.", "2.8.0"),
];

const INTRO: u32 = PUBSUB | LOADING | STALE;

static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("channels", -2, INTRO, (0, 0, 0), P, pubsub_channels)
        .doc("Returns the active channels.", "2.8.0"),
    CommandSpec::new("numsub", -2, INTRO, (0, 0, 0), P, pubsub_numsub)
        .doc("Returns a count of subscribers to channels.", "2.8.0"),
    CommandSpec::new("numpat", 2, INTRO, (0, 0, 0), P, pubsub_numpat)
        .doc("Returns a count of unique pattern subscriptions.", "2.8.0"),
    CommandSpec::new(
        "shardchannels",
        -2,
        INTRO,
        (0, 0, 0),
        P,
        pubsub_shardchannels,
    )
    .doc("Returns the active shard channels.", "7.0.0"),
    CommandSpec::new("shardnumsub", -2, INTRO, (0, 0, 0), P, pubsub_shardnumsub).doc(
        "Returns the count of subscribers of shard channels.",
        "7.0.0",
    ),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), P, pubsub_help).doc(
        "Returns helpful text about the different subcommands.",
        "6.2.0",
    ),
];

/// The client's subscriptions, created (with its mailbox) on first use.
fn subs<'c>(ctx: &'c mut Ctx<'_>) -> &'c mut Subscriptions {
    if ctx.client.subs.is_none() {
        let mailbox = ensure_mailbox(ctx.server, ctx.client, ctx.out.protocol());
        ctx.client.subs = Some(Box::new(Subscriptions::new(mailbox)));
    }
    ctx.client.subs.as_mut().expect("just created")
}

fn confirm(ctx: &mut Ctx<'_>, word: &[u8], name: Option<&[u8]>, count: usize) {
    ctx.client.pushing = true;
    ctx.out.push(3);
    ctx.out.bulk(word);
    match name {
        Some(n) => ctx.out.bulk(n),
        None => ctx.out.null(),
    }
    ctx.out.int(count as i64);
}

fn sub_generic(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind, word: &[u8]) -> CmdResult {
    let server = ctx.server;
    for name in args.iter().skip(1) {
        let s = subs(ctx);
        if s.set_mut(kind).insert(name.to_vec()) {
            server.pubsub.subscribe(kind, name, &s.mailbox);
        }
        let count = s.count(kind);
        s.publish_counts();
        confirm(ctx, word, Some(name), count);
    }
    Ok(())
}

fn unsub_generic(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind, word: &[u8]) -> CmdResult {
    let server = ctx.server;
    let id = ctx.client.id();
    let names: Vec<Vec<u8>> = if args.len() > 1 {
        args.iter().skip(1).map(<[u8]>::to_vec).collect()
    } else {
        ctx.client
            .subs
            .as_ref()
            .map(|s| s.set(kind).iter().cloned().collect())
            .unwrap_or_default()
    };
    if names.is_empty() {
        let count = ctx.client.subs.as_ref().map_or(0, |s| s.count(kind));
        confirm(ctx, word, None, count);
        return Ok(());
    }
    for name in names {
        let count = match ctx.client.subs.as_mut() {
            Some(s) => {
                if s.set_mut(kind).remove(&name) {
                    server.pubsub.unsubscribe(kind, &name, id);
                }
                s.publish_counts();
                s.count(kind)
            }
            None => 0,
        };
        confirm(ctx, word, Some(&name), count);
    }
    Ok(())
}

fn subscribe(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    sub_generic(ctx, args, Kind::Channel, b"subscribe")
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    unsub_generic(ctx, args, Kind::Channel, b"unsubscribe")
}

fn psubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    sub_generic(ctx, args, Kind::Pattern, b"psubscribe")
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    unsub_generic(ctx, args, Kind::Pattern, b"punsubscribe")
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    sub_generic(ctx, args, Kind::Shard, b"ssubscribe")
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    unsub_generic(ctx, args, Kind::Shard, b"sunsubscribe")
}

fn publish(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let n = ctx.server.pubsub.publish(false, args.arg(1), args.arg(2));
    // Cluster mode: subscribers on other nodes get it too (the count stays this node's,
    // as in Redis Cluster). Not from a Raft entry being applied (client id 0): every
    // replica applies it, so each delivers it to its own subscribers.
    if let Some(cl) = ctx.server.cluster.get().filter(|_| ctx.client.info.id != 0) {
        cl.publish_to_peers(args.arg(1), args.arg(2));
    }
    ctx.out.int(n as i64);
    Ok(())
}

fn spublish(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let n = ctx.server.pubsub.publish(true, args.arg(1), args.arg(2));
    ctx.out.int(n as i64);
    Ok(())
}

fn names_reply(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) -> CmdResult {
    if args.len() > 3 {
        return Err(crate::error::CmdError::Arity(format!(
            "pubsub|{}",
            String::from_utf8_lossy(args.arg(1)).to_ascii_lowercase()
        )));
    }
    let mut names = ctx.server.pubsub.names(kind, args.get(2));
    names.sort();
    ctx.out.array(names.len());
    for n in &names {
        ctx.out.bulk(n);
    }
    Ok(())
}

fn pubsub_channels(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    names_reply(ctx, args, Kind::Channel)
}

fn pubsub_shardchannels(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    names_reply(ctx, args, Kind::Shard)
}

fn numsub_reply(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Kind) -> CmdResult {
    let chans: Vec<&[u8]> = args.iter().skip(2).collect();
    ctx.out.map(chans.len());
    for c in chans {
        ctx.out.bulk(c);
        ctx.out.int(ctx.server.pubsub.count(kind, c) as i64);
    }
    Ok(())
}

fn pubsub_numsub(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    numsub_reply(ctx, args, Kind::Channel)
}

fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    numsub_reply(ctx, args, Kind::Shard)
}

fn pubsub_numpat(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.out.int(ctx.server.pubsub.num_patterns() as i64);
    Ok(())
}

fn pubsub_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    const LINES: &[&str] = &[
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
    ];
    reply_help(ctx.out, args.arg(0), LINES);
    Ok(())
}

/// Drops every subscription of the client (RESET, disconnect).
pub fn unsubscribe_all(server: &crate::server::Server, client: &mut crate::client::Client) {
    if let Some(s) = client.subs.take() {
        let id = client.id();
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in s.set(kind) {
                server.pubsub.unsubscribe(kind, name, id);
            }
        }
        for c in &client.info.sub_counts {
            c.store(0, Relaxed);
        }
    }
}
