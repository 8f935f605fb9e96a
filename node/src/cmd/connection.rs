//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET and CLIENT.

use std::sync::atomic::Ordering::Relaxed;

use resp::{Args, Protocol};
use storage::clock;

use crate::client::{ClientInfo, ReplyMode};
use crate::cmd::util::{is, parse_i64, parse_i64_or, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, ClusterRoute, CommandSpec, Group};
use crate::server::Server;

/// The Redis version whose behaviour Ember reports (HELLO, INFO redis_version).
pub const REDIS_COMPAT_VERSION: &str = "7.2.0";

const C: Group = Group::Connection;

/// The flags QUIT and RESET share: allowed in every state a connection can be in (before
/// AUTH, subscribed, while a script is busy, queueing a transaction with memory full).
const ENDS_CONNECTION_STATE: u32 = NOSCRIPT
    | LOADING
    | STALE
    | FAST
    | NO_AUTH
    | ALLOW_BUSY
    | TX_CONTROL
    | SUB_OK
    | OOM_OK_IN_MULTI;

/// Connection commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("ping", -1, FAST | SUB_OK, (0, 0, 0), C, ping)
        .doc("Returns the server's liveliness response.", "1.0.0"),
    CommandSpec::new("echo", 2, FAST, (0, 0, 0), C, echo).doc("Returns the given string.", "1.0.0"),
    CommandSpec::new(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        (0, 0, 0),
        C,
        hello,
    )
    .doc("Handshakes with the Redis server.", "6.0.0"),
    CommandSpec::new(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        (0, 0, 0),
        C,
        auth,
    )
    .doc("Authenticates the connection.", "1.0.0"),
    CommandSpec::new("select", 2, LOADING | STALE | FAST, (0, 0, 0), C, select)
        .doc("Changes the selected database.", "1.0.0")
        .routed(ClusterRoute::DbZeroOnly),
    CommandSpec::new("quit", -1, ENDS_CONNECTION_STATE, (0, 0, 0), C, quit)
        .doc("Closes the connection.", "1.0.0"),
    CommandSpec::new("reset", 1, ENDS_CONNECTION_STATE, (0, 0, 0), C, reset)
        .doc("Resets the connection.", "6.2.0")
        .routed(ClusterRoute::EndWatch),
    CommandSpec::container("client", C, CLIENT_SUBCOMMANDS)
        .doc("A container for client connection commands.", "2.4.0"),
];

static CLIENT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("id", 2, NOSCRIPT | LOADING | STALE, (0, 0, 0), C, client_id)
        .doc("Returns the unique client ID of the connection.", "5.0.0"),
    CommandSpec::new(
        "setname",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_setname,
    )
    .doc("Sets the connection name.", "2.6.9"),
    CommandSpec::new(
        "getname",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_getname,
    )
    .doc("Returns the name of the connection.", "2.6.9"),
    CommandSpec::new(
        "list",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_list,
    )
    .doc("Lists open connections.", "2.4.0"),
    CommandSpec::new(
        "info",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_info,
    )
    .doc("Returns information about the connection.", "6.2.0"),
    CommandSpec::new(
        "kill",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_kill,
    )
    .doc("Terminates open connections.", "2.4.0"),
    CommandSpec::new(
        "setinfo",
        4,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_setinfo,
    )
    .doc(
        "Sets information specific to the client or connection.",
        "7.2.0",
    ),
    CommandSpec::new(
        "no-evict",
        3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_no_evict,
    )
    .doc("Sets the client eviction mode of the connection.", "7.0.0"),
    CommandSpec::new(
        "reply",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_reply,
    )
    .doc(
        "Instructs the server whether to reply to commands.",
        "3.2.0",
    ),
    CommandSpec::new(
        "pause",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_pause,
    )
    .doc("Suspends commands processing.", "3.0.0"),
    CommandSpec::new(
        "unpause",
        2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_unpause,
    )
    .doc("Resumes processing commands from paused clients.", "6.2.0"),
    CommandSpec::new(
        "tracking",
        -3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_tracking,
    )
    .doc(
        "Controls server-assisted client-side caching for the connection.",
        "6.0.0",
    ),
    CommandSpec::new(
        "caching",
        3,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_caching,
    )
    .doc(
        "Instructs the server whether to track the keys in the next request.",
        "6.0.0",
    ),
    CommandSpec::new(
        "getredir",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_getredir,
    )
    .doc(
        "Returns the client ID to which the connection's tracking notifications are redirected.",
        "6.0.0",
    ),
    CommandSpec::new(
        "trackinginfo",
        2,
        NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_trackinginfo,
    )
    .doc(
        "Returns information about server-assisted client-side caching for the connection.",
        "6.2.0",
    ),
    CommandSpec::new(
        "unblock",
        -3,
        ADMIN | NOSCRIPT | LOADING | STALE,
        (0, 0, 0),
        C,
        client_unblock,
    )
    .doc(
        "Unblocks a client blocked by a blocking command from a different connection.",
        "5.0.0",
    ),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), C, client_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

fn ping(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() <= 2 && ctx.client.in_resp2_pubsub(ctx.out.protocol()) {
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(args.get(1).unwrap_or(b""));
        return Ok(());
    }
    match args.len() {
        1 => ctx.out.pong(),
        2 => ctx.out.bulk(args.arg(1)),
        _ => return Err(CmdError::Arity("ping".into())),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ctx.out.bulk(args.arg(1));
    Ok(())
}

/// Checks a username/password pair against the default user.
fn check_password(server: &Server, user: Option<&[u8]>, pass: &[u8]) -> bool {
    if let Some(u) = user {
        if u != b"default" {
            return false;
        }
    }
    let cfg = server.config.read();
    let required = cfg.get("requirepass");
    required.is_empty() || required.as_bytes() == pass
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn auth(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (user, pass) = match args.len() {
        2 => (None, args.arg(1)),
        3 => (Some(args.arg(1)), args.arg(2)),
        _ => return Err(CmdError::Syntax),
    };
    // Never shown to SLOWLOG or MONITOR, valid or not.
    for i in 1..args.len() {
        ctx.redact(i);
    }
    if user.is_none() && !ctx.server.live.auth_required.load(Relaxed) {
        return Err(CmdError::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    if !check_password(ctx.server, user, pass) {
        return Err(CmdError::raw(WRONGPASS));
    }
    ctx.client.authenticated = true;
    ctx.out.ok();
    Ok(())
}

fn hello(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut proto = ctx.out.protocol();
    let mut i = 1;
    if args.len() > 1 {
        let v = parse_i64_or(
            args.arg(1),
            "Protocol version is not an integer or out of range",
        )?;
        proto = match v {
            2 => Protocol::Resp2,
            3 => Protocol::Resp3,
            _ => return Err(CmdError::raw("NOPROTO unsupported protocol version")),
        };
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(args.arg(i), "auth") && more >= 2 {
            ctx.redact(i + 1);
            ctx.redact(i + 2);
            if !check_password(ctx.server, Some(args.arg(i + 1)), args.arg(i + 2)) {
                return Err(CmdError::raw(WRONGPASS));
            }
            ctx.client.authenticated = true;
            i += 3;
        } else if is(args.arg(i), "setname") && more >= 1 {
            let n = args.arg(i + 1);
            validate_name(n)?;
            name = Some(n);
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(args.arg(i))
            )));
        }
    }
    if !ctx.client.authenticated {
        return Err(CmdError::raw(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(n) = name {
        *ctx.client.info.name.lock() = n.to_vec();
    }
    ctx.out.set_protocol(proto);
    if let Some(m) = &ctx.client.mailbox {
        m.set_protocol(proto);
    }
    ctx.client.set_resp(proto);
    let out = &mut *ctx.out;
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_COMPAT_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(if proto == Protocol::Resp3 { 3 } else { 2 });
    out.bulk(b"id");
    out.int(ctx.client.id() as i64);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let db = parse_i64(args.arg(1))?;
    if db < 0 || db as usize >= ctx.ks().db_count() {
        return Err(CmdError::DbIndex);
    }
    ctx.client.select(db as usize);
    ctx.out.ok();
    Ok(())
}

fn quit(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.client.close_after_reply = true;
    ctx.out.ok();
    Ok(())
}

fn reset(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    crate::cmd::pubsub::unsubscribe_all(ctx.server, ctx.client);
    if ctx.client.info.monitor.load(Relaxed) {
        ctx.server.observe.remove_monitor(ctx.client.id());
    }
    ctx.server.tracking.disable(ctx.client.id());
    ctx.client.tracking = None;
    ctx.client.end_multi();
    crate::cmd::tx::unwatch_all(ctx);
    ctx.client.select(0);
    ctx.client.reply_mode = ReplyMode::On;
    ctx.client.authenticated = !ctx.server.live.auth_required.load(Relaxed);
    ctx.client.info.name.lock().clear();
    ctx.out.set_protocol(Protocol::Resp2);
    ctx.client.set_resp(Protocol::Resp2);
    ctx.out.simple(b"RESET");
    Ok(())
}

fn client_id(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.out.int(ctx.client.id() as i64);
    Ok(())
}

fn validate_name(n: &[u8]) -> CmdResult {
    if n.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn client_setname(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let n = args.arg(2);
    validate_name(n)?;
    *ctx.client.info.name.lock() = n.to_vec();
    ctx.out.ok();
    Ok(())
}

fn client_getname(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let name = ctx.client.info.name.lock().clone();
    if name.is_empty() {
        ctx.out.null();
    } else {
        ctx.out.bulk(&name);
    }
    Ok(())
}

/// CLIENT LIST `flags=`: b (blocked), P (subscribed), O (MONITOR), e (NO-EVICT), x (in MULTI), d (watched key touched), N (none).
fn client_flags(server: &Server, c: &ClientInfo) -> String {
    let mut f = String::new();
    if server.blocking.is_blocked(c.id) {
        f.push('b');
    }
    if c.sub_counts.iter().any(|n| n.load(Relaxed) > 0) {
        f.push('P');
    }
    if c.monitor.load(Relaxed) {
        f.push('O');
    }
    if c.no_evict.load(Relaxed) {
        f.push('e');
    }
    if c.multi_len.load(Relaxed) >= 0 {
        f.push('x');
    }
    if c.watch_dirty.load(Relaxed) {
        f.push('d');
    }
    if f.is_empty() {
        f.push('N');
    }
    f
}

/// One CLIENT LIST line, Redis 7.2 layout plus Redis 8's `io-thread` (here the worker
/// serving the connection).
fn describe(server: &Server, c: &ClientInfo) -> String {
    let last = c.last_cmd.load(Relaxed);
    let cmd = if last == 0 {
        "NULL".to_string()
    } else {
        server.registry.entry(last - 1).full_name.clone()
    };
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={} io-thread={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        String::from_utf8_lossy(&c.name.lock()),
        c.created.elapsed().as_secs(),
        c.idle_secs(),
        client_flags(server, c),
        c.db.load(Relaxed),
        c.sub_counts[0].load(Relaxed),
        c.sub_counts[1].load(Relaxed),
        c.sub_counts[2].load(Relaxed),
        c.multi_len.load(Relaxed),
        c.qbuf.load(Relaxed),
        cmd,
        c.resp.load(Relaxed),
        String::from_utf8_lossy(&c.lib_name.lock()),
        String::from_utf8_lossy(&c.lib_ver.lock()),
        c.worker.load(Relaxed),
    )
}

fn client_list(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < args.len() {
        if is(args.arg(i), "type") && i + 1 < args.len() {
            let t = args.arg(i + 1);
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|n| is(t, n))
            {
                return Err(CmdError::err(format!(
                    "Unknown client type '{}'",
                    String::from_utf8_lossy(t)
                )));
            }
            if !is(t, "normal") {
                ids = Some(Vec::new());
            }
            i += 2;
        } else if is(args.arg(i), "id") && i + 1 < args.len() {
            let mut v = ids.take().unwrap_or_default();
            i += 1;
            while i < args.len() {
                let id = parse_i64(args.arg(i))
                    .ok()
                    .filter(|&x| x > 0)
                    .ok_or_else(|| CmdError::err("Invalid client ID"))?;
                v.push(id as u64);
                i += 1;
            }
            ids = Some(v);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut text = String::new();
    for c in ctx.server.clients.all() {
        if ids.as_ref().is_some_and(|v| !v.contains(&c.id)) {
            continue;
        }
        text.push_str(&describe(ctx.server, &c));
        text.push('\n');
    }
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

fn client_info(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let mut line = describe(ctx.server, &ctx.client.info);
    line.push('\n');
    ctx.out.verbatim("txt", line.as_bytes());
    Ok(())
}

fn client_tracking(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    use crate::tracking::Options;
    let mut o = Options::default();
    let mut redirect: Option<u64> = None;
    let mut j = 3;
    while j < args.len() {
        let a = args.arg(j);
        let more = j + 1 < args.len();
        if is(a, "redirect") && more {
            j += 1;
            if redirect.is_some() {
                return Err(CmdError::err(
                    "A client can only redirect to a single other client",
                ));
            }
            let id = parse_i64(args.arg(j))?;
            let exists = u64::try_from(id)
                .ok()
                .filter(|&id| ctx.server.clients.get(id).is_some());
            match exists {
                Some(id) => {
                    if id != ctx.client.id() {
                        if let Some(target) = ctx.server.clients.get(id) {
                            crate::pubsub::mailbox_for(ctx.server, &target);
                        }
                    }
                    redirect = Some(id)
                }
                None => {
                    return Err(CmdError::err(
                        "The client ID you want redirect to does not exist",
                    ))
                }
            }
        } else if is(a, "bcast") {
            o.bcast = true;
        } else if is(a, "optin") {
            o.optin = true;
        } else if is(a, "optout") {
            o.optout = true;
        } else if is(a, "noloop") {
            o.noloop = true;
        } else if is(a, "prefix") && more {
            j += 1;
            o.prefixes.push(args.arg(j).to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    o.redirect = redirect.unwrap_or(0);
    let on = args.arg(2);
    if is(on, "off") {
        ctx.server.tracking.disable(ctx.client.id());
        ctx.client.tracking = None;
        ctx.out.ok();
        return Ok(());
    }
    if !is(on, "on") {
        return Err(CmdError::Syntax);
    }
    if !o.bcast && !o.prefixes.is_empty() {
        return Err(CmdError::err(
            "PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if let Some(old) = &ctx.client.tracking {
        if old.opts.bcast != o.bcast {
            return Err(CmdError::err("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
    }
    if o.bcast && (o.optin || o.optout) {
        return Err(CmdError::err(
            "OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if o.optin && o.optout {
        return Err(CmdError::err(
            "You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if let Some(old) = &ctx.client.tracking {
        if (o.optin && old.opts.optout) || (o.optout && old.opts.optin) {
            return Err(CmdError::err("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
        }
    }
    if o.bcast {
        // Redis checks new prefixes against each other and against the client's current ones.
        let existing: Vec<Vec<u8>> = ctx
            .client
            .tracking
            .as_ref()
            .map(|t| t.opts.prefixes.clone())
            .unwrap_or_default();
        for (i, p) in o.prefixes.iter().enumerate() {
            for q in &existing {
                if p != q && (p.starts_with(q) || q.starts_with(p)) {
                    return Err(CmdError::err(format!(
                        "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(q)
                    )));
                }
            }
            for q in &o.prefixes[i + 1..] {
                if p.starts_with(q) || q.starts_with(p) {
                    return Err(CmdError::err(format!(
                        "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(q)
                    )));
                }
            }
        }
        for q in existing {
            if !o.prefixes.contains(&q) {
                o.prefixes.push(q);
            }
        }
    }
    let mailbox = crate::pubsub::ensure_mailbox(ctx.server, ctx.client, ctx.out.protocol());
    ctx.server
        .tracking
        .enable(ctx.client.id(), mailbox, o.clone());
    ctx.client.tracking = Some(crate::client::ClientTracking {
        opts: o,
        caching: false,
        keep_caching: false,
    });
    ctx.out.ok();
    Ok(())
}

fn client_caching(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    // Whatever it answers, the command after it keeps CLIENT CACHING's setting (Redis
    // clears it after any other top-level command); inside EXEC it applies to the rest of
    // the transaction only.
    let top_level = ctx.client.block_mode != crate::client::BlockMode::NoBlock;
    if let Some(t) = ctx.client.tracking.as_mut() {
        t.keep_caching = top_level;
    }
    let Some(t) = ctx.client.tracking.as_mut() else {
        return Err(CmdError::err("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    let a = args.arg(2);
    if is(a, "yes") {
        if !t.opts.optin {
            return Err(CmdError::err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(a, "no") {
        if !t.opts.optout {
            return Err(CmdError::err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    t.caching = true;
    ctx.out.ok();
    Ok(())
}

fn client_getredir(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let v = match &ctx.client.tracking {
        Some(t) => t.opts.redirect as i64,
        None => -1,
    };
    ctx.out.int(v);
    Ok(())
}

fn client_trackinginfo(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let info = ctx.server.tracking.info(ctx.client.id());
    let caching = ctx.client.tracking.as_ref().is_some_and(|t| t.caching);
    let out = &mut *ctx.out;
    out.map(3);
    out.bulk(b"flags");
    match &info {
        None => {
            out.set(1);
            out.bulk(b"off");
        }
        Some((o, broken)) => {
            let mut f: Vec<&[u8]> = vec![b"on"];
            if o.bcast {
                f.push(b"bcast");
            }
            if o.optin {
                f.push(b"optin");
                if caching {
                    f.push(b"caching-yes");
                }
            }
            if o.optout {
                f.push(b"optout");
                if caching {
                    f.push(b"caching-no");
                }
            }
            if o.noloop {
                f.push(b"noloop");
            }
            if *broken {
                f.push(b"broken_redirect");
            }
            out.set(f.len());
            for x in f {
                out.bulk(x);
            }
        }
    }
    out.bulk(b"redirect");
    out.int(match &info {
        None => -1,
        Some((o, _)) => o.redirect as i64,
    });
    out.bulk(b"prefixes");
    let prefixes = info.map(|(o, _)| o.prefixes).unwrap_or_default();
    out.array(prefixes.len());
    for p in &prefixes {
        out.bulk(p);
    }
    Ok(())
}

fn client_unblock(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let id = parse_i64(args.arg(2))?;
    let error = match args.get(3) {
        None => false,
        Some(r) if is(r, "timeout") => false,
        Some(r) if is(r, "error") => true,
        Some(_) => {
            return Err(CmdError::err(
                "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    if args.len() > 4 {
        return Err(CmdError::Syntax);
    }
    // A cluster-mode pop or XREADGROUP waits in the router (`cluster::block`), not here.
    let cluster_unblock = |id| {
        let reason = if error {
            crate::cluster::block::UNBLOCK_ERROR
        } else {
            crate::cluster::block::UNBLOCK_TIMEOUT
        };
        ctx.server
            .cluster
            .get()
            .is_some_and(|cl| cl.waiters.unblock(id, reason))
    };
    let done = u64::try_from(id)
        .is_ok_and(|id| ctx.server.blocking.unblock(id, error) || cluster_unblock(id));
    ctx.out.int(i64::from(done));
    Ok(())
}

fn client_kill(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let all = ctx.server.clients.all();
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(args.arg(2)).into_owned();
        let Some(c) = all.iter().find(|c| c.addr.to_string() == addr) else {
            return Err(CmdError::err("No such client"));
        };
        c.kill();
        ctx.out.ok();
        return Ok(());
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut ctype = None;
    let mut user = None;
    let mut maxage = None;
    let mut skipme = true;
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        let (opt, val) = (args.arg(i), args.arg(i + 1));
        let text = String::from_utf8_lossy(val).into_owned();
        if is(opt, "id") {
            id = Some(
                parse_i64(val)
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| CmdError::err("client-id should be greater than 0"))?
                    as u64,
            );
        } else if is(opt, "addr") {
            addr = Some(text);
        } else if is(opt, "laddr") {
            laddr = Some(text);
        } else if is(opt, "type") {
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|n| is(val, n))
            {
                return Err(CmdError::err(format!("Unknown client type '{text}'")));
            }
            ctype = Some(text.to_ascii_lowercase());
        } else if is(opt, "user") {
            // Without ACL the only user is `default`.
            if text != "default" {
                return Err(CmdError::err(format!("No such user '{text}'")));
            }
            user = Some(text);
        } else if is(opt, "skipme") {
            skipme = if is(val, "yes") {
                true
            } else if is(val, "no") {
                false
            } else {
                return Err(CmdError::Syntax);
            };
        } else if is(opt, "maxage") {
            maxage = Some(parse_i64(val)?.max(0) as u64);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let me = ctx.client.id();
    let mut killed = 0;
    for c in all {
        if skipme && c.id == me {
            continue;
        }
        let matches = id.is_none_or(|v| v == c.id)
            && addr.as_ref().is_none_or(|a| *a == c.addr.to_string())
            && laddr.as_ref().is_none_or(|a| *a == c.laddr.to_string())
            && ctype.as_ref().is_none_or(|t| t == "normal")
            && user.as_ref().is_none_or(|u| u == "default")
            && maxage.is_none_or(|m| c.created.elapsed().as_secs() >= m);
        if matches {
            c.kill();
            killed += 1;
        }
    }
    ctx.out.int(killed);
    Ok(())
}

fn client_setinfo(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let (attr, val) = (args.arg(2), args.arg(3));
    if val.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(format!(
            "{} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr).to_ascii_lowercase()
        )));
    }
    let slot = if is(attr, "lib-name") {
        &ctx.client.info.lib_name
    } else if is(attr, "lib-ver") {
        &ctx.client.info.lib_ver
    } else {
        return Err(CmdError::err(format!(
            "Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        )));
    };
    *slot.lock() = val.to_vec();
    ctx.out.ok();
    Ok(())
}

/// CLIENT NO-EVICT ON|OFF: the flag (CLIENT LIST `e`). Ember never evicts clients for
/// memory (`maxmemory-clients` is accepted and has no effect), so every client is kept
/// either way.
fn client_no_evict(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let v = args.arg(2);
    let on = if is(v, "on") {
        true
    } else if is(v, "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.client.info.no_evict.store(on, Relaxed);
    ctx.out.ok();
    Ok(())
}

fn client_reply(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let v = args.arg(2);
    if is(v, "on") {
        ctx.client.reply_mode = ReplyMode::On;
        ctx.out.ok();
    } else if is(v, "off") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if is(v, "skip") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

fn client_pause(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let ms = parse_i64_or(args.arg(2), "timeout is not an integer or out of range")?;
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let all = match args.len() {
        3 => true,
        4 if is(args.arg(3), "all") => true,
        4 if is(args.arg(3), "write") => false,
        4 => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
        _ => return Err(CmdError::Syntax),
    };
    let until = clock::now_ms().saturating_add(ms as u64);
    ctx.server.pause.pause(until, all);
    ctx.out.ok();
    Ok(())
}

fn client_unpause(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.server.pause.unpause();
    ctx.out.ok();
    Ok(())
}

fn client_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    const LINES: &[&str] = &[
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are: ID, ADDR, LADDR, TYPE, USER, SKIPME, MAXAGE.",
        "LIST [options ...]",
        "    Return information about client connections. Options: TYPE, ID.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
    ];
    reply_help(ctx.out, args.arg(0), LINES);
    Ok(())
}
