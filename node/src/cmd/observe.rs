//! What the node shows about the commands it runs: SLOWLOG (GET, LEN, RESET, HELP),
//! LATENCY (LATEST, HISTORY, RESET, GRAPH, DOCTOR, HISTOGRAM, HELP) and MONITOR, with
//! Redis 7's reply shapes. The records themselves are kept by [`crate::observe`], fed by
//! the execution pipeline ([`crate::exec`]).

use std::sync::atomic::Ordering::Relaxed;

use resp::Args;

use crate::client::BlockMode;
use crate::cmd::util::{parse_i64_or, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::observe::latency;
use crate::registry::{flags::*, CommandSpec, Group};
use crate::server::Server;
use crate::stats::{Histogram, BUCKETS};

const S: Group = Group::Server;
const ADMIN_OBS: u32 = ADMIN | LOADING | STALE;
const ADMIN_LAT: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// SLOWLOG, LATENCY, MONITOR.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::container("slowlog", S, SLOWLOG_SUBCOMMANDS)
        .doc("A container for slow log commands.", "2.2.12"),
    CommandSpec::container("latency", S, LATENCY_SUBCOMMANDS)
        .doc("A container for latency diagnostics commands.", "2.8.13"),
    CommandSpec::new("monitor", 1, ADMIN_LAT, (0, 0, 0), S, monitor).doc(
        "Listens for all requests received by the server in real-time.",
        "1.0.0",
    ),
];

static SLOWLOG_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("get", -2, ADMIN_OBS, (0, 0, 0), S, slowlog_get)
        .doc("Returns the slow log's entries.", "2.2.12"),
    CommandSpec::new("len", 2, ADMIN_OBS, (0, 0, 0), S, slowlog_len)
        .doc("Returns the number of entries in the slow log.", "2.2.12"),
    CommandSpec::new("reset", 2, ADMIN_OBS, (0, 0, 0), S, slowlog_reset)
        .doc("Clears all entries from the slow log.", "2.2.12"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, slowlog_help)
        .doc("Show helpful text about the different subcommands", "6.2.0"),
];

static LATENCY_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("doctor", 2, ADMIN_LAT, (0, 0, 0), S, latency_doctor).doc(
        "Returns a human-readable latency analysis report.",
        "2.8.13",
    ),
    CommandSpec::new("graph", 3, ADMIN_LAT, (0, 0, 0), S, latency_graph)
        .doc("Returns a latency graph for an event.", "2.8.13"),
    CommandSpec::new("histogram", -2, ADMIN_LAT, (0, 0, 0), S, latency_histogram).doc(
        "Returns the cumulative distribution of latencies of a subset or all commands.",
        "7.0.0",
    ),
    CommandSpec::new("history", 3, ADMIN_LAT, (0, 0, 0), S, latency_history)
        .doc("Returns timestamp-latency samples for an event.", "2.8.13"),
    CommandSpec::new("latest", 2, ADMIN_LAT, (0, 0, 0), S, latency_latest).doc(
        "Returns the latest latency samples for all events.",
        "2.8.13",
    ),
    CommandSpec::new("reset", -2, ADMIN_LAT, (0, 0, 0), S, latency_reset)
        .doc("Resets the latency data for one or more events.", "2.8.13"),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, latency_help).doc(
        "Returns helpful text about the different subcommands.",
        "2.8.13",
    ),
];

fn now_secs() -> i64 {
    storage::clock::now_ns() as i64 / 1_000_000_000
}

// ------------------------------------------------------------------------------------------
// SLOWLOG
// ------------------------------------------------------------------------------------------

fn slowlog_get(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let count = if args.len() > 2 {
        // Redis answers a count that is no integer as one out of range.
        const BAD: &str = "count should be greater than or equal to -1";
        match parse_i64_or(args.arg(2), BAD)? {
            -1 => None,
            n if n < -1 => return Err(CmdError::err(BAD)),
            n => Some(n as usize),
        }
    } else {
        Some(10)
    };
    let entries = ctx.server.observe.slowlog.get(count);
    let out = &mut *ctx.out;
    out.array(entries.len());
    for e in entries {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time);
        out.int(e.duration_us as i64);
        out.array(e.args.len());
        for a in &e.args {
            out.bulk(a);
        }
        out.bulk(e.peer.as_bytes());
        out.bulk(&e.name);
    }
    Ok(())
}

fn slowlog_len(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.out.int(ctx.server.observe.slowlog.len() as i64);
    Ok(())
}

fn slowlog_reset(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.server.observe.slowlog.reset();
    ctx.out.ok();
    Ok(())
}

fn slowlog_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------
// LATENCY
// ------------------------------------------------------------------------------------------

fn latency_latest(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let all = ctx.server.observe.latency.all();
    ctx.out.array(all.len());
    for (event, s) in all {
        let last = s.latest();
        ctx.out.array(4);
        ctx.out.bulk(event.as_bytes());
        ctx.out.int(last.time);
        ctx.out.int(last.latency as i64);
        ctx.out.int(s.max as i64);
    }
    Ok(())
}

fn latency_history(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let samples = ctx
        .server
        .observe
        .latency
        .series(args.arg(2))
        .map(|s| s.samples())
        .unwrap_or_default();
    ctx.out.array(samples.len());
    for x in samples {
        ctx.out.array(2);
        ctx.out.int(x.time);
        ctx.out.int(x.latency as i64);
    }
    Ok(())
}

fn latency_reset(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mon = &ctx.server.observe.latency;
    let n = if args.len() == 2 {
        mon.reset(None)
    } else {
        args.iter().skip(2).map(|e| mon.reset(Some(e))).sum()
    };
    ctx.out.int(n as i64);
    Ok(())
}

fn latency_graph(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let event = args.arg(2);
    let Some(s) = ctx.server.observe.latency.series(event) else {
        return Err(CmdError::err(format!(
            "No samples available for event '{}'",
            String::from_utf8_lossy(event)
        )));
    };
    let g = latency::graph(&String::from_utf8_lossy(event), &s, now_secs());
    ctx.out.verbatim("txt", g.as_bytes());
    Ok(())
}

fn latency_doctor(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let input = {
        let c = ctx.server.config.read();
        latency::DoctorInput {
            slowlog_slower_than: c.get("slowlog-log-slower-than").parse().unwrap_or(0),
            fsync_always: c.get("appendfsync").eq_ignore_ascii_case("always"),
            hz: c.get_u64("hz"),
        }
    };
    let report = latency::doctor(&ctx.server.observe.latency, &input, now_secs());
    ctx.out.verbatim("txt", report.as_bytes());
    Ok(())
}

/// The merged latency histogram of registry entry `idx` over every worker (None: no
/// calls recorded since start or CONFIG RESETSTAT).
pub fn histogram_of(server: &Server, idx: usize) -> Option<[u64; BUCKETS]> {
    let mut counts = [0u64; BUCKETS];
    for w in &server.workers {
        if let Some(h) = w.cmd.get(idx).and_then(|c| c.hist.get()) {
            h.add_to(&mut counts);
        }
    }
    (counts.iter().sum::<u64>() > 0).then_some(counts)
}

/// One command's LATENCY HISTOGRAM entry (Redis's fillCommandCDF): its calls and the
/// cumulative count at each power of two of microseconds that adds any.
fn write_cdf(out: &mut resp::ReplyWriter, counts: &[u64; BUCKETS]) {
    let total: u64 = counts.iter().sum();
    // Octave k holds up to 1024 * 2^k - 1 ns, reported as that value in whole µs.
    let mut points: Vec<(u64, u64)> = Vec::new();
    let mut cumulative = 0u64;
    let mut previous = 0u64;
    let mut bound = 1024u64;
    let mut i = 0;
    while cumulative < total && bound != 0 {
        while i < BUCKETS && Histogram::upper(i) < bound {
            cumulative += counts[i];
            i += 1;
        }
        if cumulative > previous {
            points.push(((bound - 1) / 1000, cumulative));
        }
        previous = cumulative;
        bound = bound.checked_mul(2).unwrap_or(0);
    }
    out.map(2);
    out.bulk(b"calls");
    out.int(total as i64);
    out.bulk(b"histogram_usec");
    out.map(points.len());
    for (us, c) in points {
        out.int(us as i64);
        out.int(c as i64);
    }
}

fn latency_histogram(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let server = ctx.server;
    let reg = &server.registry;
    let mut picked: Vec<usize> = Vec::new();
    if args.len() == 2 {
        picked.extend(0..reg.len());
    } else {
        for a in args.iter().skip(2) {
            let mut parts = a.splitn(2, |&c| c == b'|');
            let Some(top) = parts.next().and_then(|n| reg.lookup(n)) else {
                continue;
            };
            match parts.next() {
                Some(sub) => picked.extend(reg.lookup_sub(top, sub)),
                None => {
                    picked.push(top);
                    picked.extend(reg.subcommands(top));
                }
            }
        }
    }
    let with_data: Vec<(usize, [u64; BUCKETS])> = picked
        .into_iter()
        .filter_map(|idx| histogram_of(server, idx).map(|h| (idx, h)))
        .collect();
    ctx.out.map(with_data.len());
    for (idx, h) in with_data {
        ctx.out.bulk(reg.entry(idx).full_name.as_bytes());
        write_cdf(ctx.out, &h);
    }
    Ok(())
}

fn latency_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------
// MONITOR
// ------------------------------------------------------------------------------------------

fn monitor(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    // Inside MULTI or a script a reply per command is expected (Redis's
    // CLIENT_DENY_BLOCKING).
    if ctx.client.block_mode == BlockMode::NoBlock {
        return Err(CmdError::err(
            "MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    // A client already monitoring gets no reply, as in Redis.
    if ctx.client.info.monitor.load(Relaxed) {
        return Ok(());
    }
    let proto = ctx.out.protocol();
    let mailbox = crate::pubsub::ensure_mailbox(ctx.server, ctx.client, proto);
    ctx.out.ok();
    ctx.server.observe.add_monitor(mailbox);
    Ok(())
}
