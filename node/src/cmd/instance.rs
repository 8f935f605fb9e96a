//! What the instance says about itself: ROLE, MODULE (HELP, LIST, LOAD, LOADEX, UNLOAD)
//! and LOLWUT, with Redis 7's reply shapes.
//!
//! Ember has no Redis replication yet, so ROLE answers as a master without replicas, as a
//! standalone redis-server does (cluster mode's Raft groups are not Redis replicas). It
//! loads no Redis modules: MODULE LIST is empty and MODULE LOAD fails as a load that
//! failed does in Redis.

use resp::Args;
use tracing::warn;

use crate::cmd::connection::REDIS_COMPAT_VERSION;
use crate::cmd::util::{is, parse_i64, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const S: Group = Group::Server;
const MODULE_ADMIN: u32 = ADMIN | NOSCRIPT;

/// ROLE, MODULE, LOLWUT.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "role",
        1,
        NOSCRIPT | LOADING | STALE | FAST,
        (0, 0, 0),
        S,
        role,
    )
    .doc("Returns the replication role.", "2.8.12"),
    CommandSpec::container("module", S, MODULE_SUBCOMMANDS)
        .doc("A container for module commands.", "4.0.0"),
    CommandSpec::new("lolwut", -1, READONLY | FAST, (0, 0, 0), S, lolwut)
        .doc("Displays computer art and the Redis version", "5.0.0"),
];

static MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, module_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
    CommandSpec::new("list", 2, MODULE_ADMIN, (0, 0, 0), S, module_list)
        .doc("Returns all loaded modules.", "4.0.0"),
    CommandSpec::new("load", -3, MODULE_ADMIN, (0, 0, 0), S, module_load)
        .doc("Loads a module.", "4.0.0"),
    CommandSpec::new("loadex", -3, MODULE_ADMIN, (0, 0, 0), S, module_load)
        .doc("Loads a module using extended parameters.", "7.0.0"),
    CommandSpec::new("unload", 3, MODULE_ADMIN, (0, 0, 0), S, module_unload)
        .doc("Unloads a module.", "4.0.0"),
];

fn role(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.out.array(3);
    ctx.out.bulk(b"master");
    ctx.out.int(0);
    ctx.out.array(0);
    Ok(())
}

fn module_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}

fn module_list(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    ctx.out.array(0);
    Ok(())
}

fn module_load(_ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    warn!(
        "Module {} failed to load: Ember does not load Redis modules",
        String::from_utf8_lossy(args.arg(2))
    );
    Err(CmdError::err(
        "Error loading the extension. Please check the server logs.",
    ))
}

fn module_unload(_ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    Err(CmdError::err(
        "Error unloading module: no such module with that name",
    ))
}

/// LOLWUT [VERSION v]: Redis 7's own answer (its version line). The generative art of
/// versions 5 and 6 is not drawn.
fn lolwut(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    if args.len() >= 3 && is(args.arg(1), "version") {
        let v = parse_i64(args.arg(2))?;
        if v == 5 || v == 6 {
            return Err(CmdError::err(format!(
                "LOLWUT VERSION {v} (generative art) is not implemented in Ember"
            )));
        }
    }
    ctx.out.verbatim(
        "txt",
        format!("Redis ver. {REDIS_COMPAT_VERSION}\n").as_bytes(),
    );
    Ok(())
}
