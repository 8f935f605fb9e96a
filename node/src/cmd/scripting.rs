//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL/HELP,
//! FCALL, FCALL_RO and FUNCTION LOAD/DELETE/FLUSH/LIST/STATS/KILL/DUMP/RESTORE/HELP.
//!
//! Scripts and functions run alone: they are flagged `EXCLUSIVE` so the dispatcher does
//! not take the worker's gate, and take every worker's gate themselves for the whole run
//! (inside EXEC the gates are already held). The Lua side is in [`crate::script`].
//! FUNCTION DUMP / RESTORE use Redis's payload format (see [`storage::rdb`]).

use std::sync::atomic::Ordering::Relaxed;

use resp::{Args, ReplyWriter};

use crate::client::BlockMode;
use crate::cluster::script_keys::{self, ScriptKeys};
use crate::cmd::util::{is, parse_i64, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, BusyAnswer, ClusterRoute, CommandSpec, Group, Proposal};
use crate::script::{self, Engine, RunOpts, Script, FLAG_NAMES, FLAG_NO_WRITES};
use crate::server::{Server, BUSY_FUNCTION, BUSY_SCRIPT};

const S: Group = Group::Scripting;

/// Scripting commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "eval",
        -3,
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | MOVABLE_KEYS | EXCLUSIVE,
        (0, 0, 0),
        S,
        eval,
    )
    .numkeys(2)
    .writes_if(eval_may_write)
    .doc("Executes a server-side Lua script.", "2.6.0"),
    CommandSpec::new(
        "evalsha",
        -3,
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | MOVABLE_KEYS | EXCLUSIVE,
        (0, 0, 0),
        S,
        evalsha,
    )
    .numkeys(2)
    .proposed_as(evalsha_proposal)
    .writes_if(evalsha_may_write)
    .doc("Executes a server-side Lua script by SHA1 digest.", "2.6.0"),
    CommandSpec::new(
        "eval_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR | STALE | READONLY | MOVABLE_KEYS | EXCLUSIVE,
        (0, 0, 0),
        S,
        eval_ro,
    )
    .numkeys(2)
    .doc("Executes a read-only server-side Lua script.", "7.0.0"),
    CommandSpec::new(
        "evalsha_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR | STALE | READONLY | MOVABLE_KEYS | EXCLUSIVE,
        (0, 0, 0),
        S,
        evalsha_ro,
    )
    .numkeys(2)
    .doc(
        "Executes a read-only server-side Lua script by SHA1 digest.",
        "7.0.0",
    ),
    CommandSpec::new(
        "fcall",
        -3,
        NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | MOVABLE_KEYS | EXCLUSIVE,
        (0, 0, 0),
        S,
        fcall,
    )
    .numkeys(2)
    .routed(ClusterRoute::NamedFunction)
    .proposed_as(fcall_proposal)
    .writes_if(fcall_may_write)
    .doc("Invokes a function.", "7.0.0"),
    CommandSpec::new(
        "fcall_ro",
        -3,
        NOSCRIPT | SKIP_MONITOR | STALE | READONLY | MOVABLE_KEYS | EXCLUSIVE,
        (0, 0, 0),
        S,
        fcall_ro,
    )
    .numkeys(2)
    .routed(ClusterRoute::NamedFunction)
    .doc("Invokes a read-only function.", "7.0.0"),
    CommandSpec::container("script", S, SCRIPT_SUBS)
        .doc("A container for Lua scripts management commands.", "2.6.0"),
    CommandSpec::container("function", S, FUNCTION_SUBS)
        .doc("A container for function commands.", "7.0.0"),
];

static SCRIPT_SUBS: &[CommandSpec] = &[
    CommandSpec::new("load", 3, NOSCRIPT | STALE, (0, 0, 0), S, script_load).doc(
        "Loads a server-side Lua script to the script cache.",
        "2.6.0",
    ),
    CommandSpec::new("exists", -3, NOSCRIPT | STALE, (0, 0, 0), S, script_exists).doc(
        "Determines whether server-side Lua scripts exist in the script cache.",
        "2.6.0",
    ),
    CommandSpec::new("flush", -2, NOSCRIPT | STALE, (0, 0, 0), S, script_flush).doc(
        "Removes all server-side Lua scripts from the script cache.",
        "2.6.0",
    ),
    CommandSpec::new("kill", 2, NOSCRIPT | ALLOW_BUSY, (0, 0, 0), S, script_kill)
        .doc(
            "Terminates a server-side Lua script during execution.",
            "2.6.0",
        )
        .when_busy(kill_script_when_busy),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, script_help).doc(
        "Returns helpful text about the different subcommands.",
        "5.0.0",
    ),
];

static FUNCTION_SUBS: &[CommandSpec] = &[
    CommandSpec::new(
        "load",
        -3,
        WRITE | DENYOOM | NOSCRIPT | OUTSIDE_KEYSPACE,
        (0, 0, 0),
        S,
        function_load,
    )
    .doc("Creates a library.", "7.0.0")
    .routed(ClusterRoute::Meta),
    CommandSpec::new(
        "delete",
        3,
        WRITE | NOSCRIPT | OUTSIDE_KEYSPACE,
        (0, 0, 0),
        S,
        function_delete,
    )
    .routed(ClusterRoute::Meta)
    .doc("Deletes a library and its functions.", "7.0.0"),
    CommandSpec::new(
        "flush",
        -2,
        WRITE | NOSCRIPT | OUTSIDE_KEYSPACE,
        (0, 0, 0),
        S,
        function_flush,
    )
    .routed(ClusterRoute::Meta)
    .doc("Deletes all libraries and functions.", "7.0.0"),
    CommandSpec::new("dump", 2, NOSCRIPT, (0, 0, 0), S, function_dump).doc(
        "Dumps all libraries into a serialized binary payload.",
        "7.0.0",
    ),
    CommandSpec::new(
        "restore",
        -3,
        WRITE | DENYOOM | NOSCRIPT | OUTSIDE_KEYSPACE,
        (0, 0, 0),
        S,
        function_restore,
    )
    .doc("Restores all libraries from a payload.", "7.0.0")
    .routed(ClusterRoute::Meta),
    CommandSpec::new("list", -2, NOSCRIPT, (0, 0, 0), S, function_list)
        .doc("Returns information about all libraries.", "7.0.0"),
    CommandSpec::new(
        "stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        (0, 0, 0),
        S,
        function_stats,
    )
    .doc(
        "Returns information about a function during execution.",
        "7.0.0",
    )
    .when_busy(|_, _| BusyAnswer::Stats),
    CommandSpec::new(
        "kill",
        2,
        NOSCRIPT | ALLOW_BUSY,
        (0, 0, 0),
        S,
        function_kill,
    )
    .doc("Terminates a function during execution.", "7.0.0")
    .when_busy(kill_function_when_busy),
    CommandSpec::new("help", 2, LOADING | STALE, (0, 0, 0), S, function_help).doc(
        "Returns helpful text about the different subcommands.",
        "7.0.0",
    ),
];

/// Key arguments and other arguments of a script call.
type KeysAndArgs<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

/// Parses numkeys and splits the rest into keys and arguments.
fn split_keys(args: Args<'_>) -> Result<KeysAndArgs<'_>, CmdError> {
    let n = parse_i64(args.arg(2))?;
    let rest = args.len() - 3;
    if n > rest as i64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let n = n as usize;
    let keys = (3..3 + n).map(|i| args.arg(i)).collect();
    let argv = (3 + n..args.len()).map(|i| args.arg(i)).collect();
    Ok((keys, argv))
}

fn eval(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

fn evalsha(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

/// Compiles `body` into the cache of `eng` (if not there yet); returns its sha.
fn cache_script(eng: &mut Engine, body: &[u8]) -> Result<String, CmdError> {
    let sha = script::sha1_hex(body);
    if eng.scripts.contains_key(&sha) {
        return Ok(sha);
    }
    let (flags, stripped, _) = script::parse_shebang(body, false).map_err(CmdError::raw)?;
    let func = eng
        .compile(stripped.as_deref().unwrap_or(body))
        .map_err(|e| CmdError::err(format!("Error compiling script (new function): {e}")))?;
    eng.scripts.insert(
        sha.clone(),
        Script {
            func,
            flags,
            body: body.to_vec(),
        },
    );
    Ok(sha)
}

fn eval_generic(ctx: &mut Ctx<'_>, args: Args<'_>, by_sha: bool, ro: bool) -> CmdResult {
    // Shown before the commands the script runs (these commands are `skip_monitor`).
    ctx.show_to_monitors(args);
    if by_sha && args.arg(1).len() != 40 {
        return Err(CmdError::raw(
            "NOSCRIPT No matching script. Please use EVAL.",
        ));
    }
    let (keys, argv) = split_keys(args)?;
    let server = ctx.server.clone();
    // Inside EXEC every gate is already held (and the client does not block).
    let _gates = if ctx.client.block_mode == BlockMode::NoBlock {
        None
    } else {
        Some(server.lock_gates_or_busy()?)
    };
    let mut eng = server.scripting.eval.lock();
    let sha = if by_sha {
        let sha = String::from_utf8_lossy(args.arg(1)).to_ascii_lowercase();
        if !eng.scripts.contains_key(&sha) {
            return Err(CmdError::raw(
                "NOSCRIPT No matching script. Please use EVAL.",
            ));
        }
        sha
    } else {
        cache_script(&mut eng, args.arg(1))?
    };
    let Some(s) = eng.scripts.get(&sha) else {
        return Err(CmdError::raw(
            "NOSCRIPT No matching script. Please use EVAL.",
        ));
    };
    let func = s.func.clone();
    let read_only = ro || s.flags & FLAG_NO_WRITES != 0;
    let allow_oom = read_only || s.flags & script::FLAG_ALLOW_OOM != 0;
    // A script that declared flags may grow memory unless it says otherwise (Redis's
    // scriptFlagsToCmdFlags): refused up front while nothing can be evicted.
    if s.flags & script::FLAG_EVAL_COMPAT == 0 && !allow_oom && crate::evict::script_oom(&server) {
        return Err(crate::evict::oom_error());
    }
    let cluster = ScriptKeys::for_script(&server, ctx.client, &keys, s.flags);
    if cluster.is_some() && s.flags & script::FLAG_NO_CLUSTER != 0 {
        return Err(CmdError::err(script_keys::NO_CLUSTER));
    }
    let opts = RunOpts {
        funcname: sha.clone(),
        eval_mode: true,
        read_only,
        allow_oom,
        kind: BUSY_SCRIPT,
        keys,
        args: argv,
        cluster,
    };
    script::run(&eng, ctx, &func, opts)
}

fn script_load(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut eng = ctx.server.scripting.eval.lock();
    let sha = cache_script(&mut eng, args.arg(2))?;
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

fn script_exists(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let eng = ctx.server.scripting.eval.lock();
    ctx.out.array(args.len() - 2);
    for a in args.iter().skip(2) {
        let sha = String::from_utf8_lossy(a).to_ascii_lowercase();
        ctx.out.int(eng.scripts.contains_key(&sha) as i64);
    }
    Ok(())
}

/// Checks the optional ASYNC|SYNC argument of SCRIPT FLUSH / FUNCTION FLUSH.
fn flush_mode(args: Args<'_>, what: &str) -> CmdResult {
    match args.len() {
        2 => Ok(()),
        3 if is(args.arg(2), "async") || is(args.arg(2), "sync") => Ok(()),
        _ => Err(CmdError::err(format!(
            "{what} FLUSH only support SYNC|ASYNC option"
        ))),
    }
}

fn script_flush(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    flush_mode(args, "SCRIPT")?;
    *ctx.server.scripting.eval.lock() = Engine::new("@user_script");
    ctx.out.ok();
    Ok(())
}

fn kill_generic(ctx: &mut Ctx<'_>, is_eval: bool) -> CmdResult {
    kill(ctx.server, is_eval)?;
    ctx.out.ok();
    Ok(())
}

/// SCRIPT KILL beside a busy script: answered at once.
fn kill_script_when_busy(server: &Server, _args: Args<'_>) -> BusyAnswer {
    BusyAnswer::Reply(kill(server, true))
}

/// FUNCTION KILL beside a busy function: answered at once.
fn kill_function_when_busy(server: &Server, _args: Args<'_>) -> BusyAnswer {
    BusyAnswer::Reply(kill(server, false))
}

/// [`CommandSpec::propose_as`] of EVALSHA: the EVAL of the cached body, so replicas need
/// not have loaded the script.
fn evalsha_proposal(server: &Server, args: Args<'_>) -> Result<Proposal, CmdError> {
    let sha = String::from_utf8_lossy(args.arg(1)).to_ascii_lowercase();
    let body = server
        .scripting
        .eval
        .lock()
        .scripts
        .get(&sha)
        .map(|s| s.body.clone());
    match body {
        Some(b) => {
            let mut v: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), b];
            v.extend(args.iter().skip(2).map(<[u8]>::to_vec));
            Ok(Proposal::Command(v))
        }
        None => Err(CmdError::raw(
            "NOSCRIPT No matching script. Please use EVAL.",
        )),
    }
}

/// [`CommandSpec::propose_as`] of FCALL: the call with its library's code.
fn fcall_proposal(server: &Server, args: Args<'_>) -> Result<Proposal, CmdError> {
    function_code(server, args.arg(1))
        .map(Proposal::WithLibrary)
        .ok_or_else(|| CmdError::err("Function not found"))
}

/// [`CommandSpec::may_write`] of EVAL.
fn eval_may_write(server: &Server, args: Args<'_>) -> bool {
    may_write(server, "eval", args)
}

/// [`CommandSpec::may_write`] of EVALSHA.
fn evalsha_may_write(server: &Server, args: Args<'_>) -> bool {
    may_write(server, "evalsha", args)
}

/// [`CommandSpec::may_write`] of FCALL.
fn fcall_may_write(server: &Server, args: Args<'_>) -> bool {
    may_write(server, "fcall", args)
}

/// SCRIPT KILL (`is_eval`) or FUNCTION KILL: asks the running script to stop (its hook
/// raises the error). Also run by [`crate::busy`] for a client beside the script.
pub fn kill(server: &Server, is_eval: bool) -> CmdResult {
    let run = &server.scripting.run;
    let running = run.running.load(Relaxed);
    let mine = if is_eval { BUSY_SCRIPT } else { BUSY_FUNCTION };
    if running == 0 {
        return Err(CmdError::raw("NOTBUSY No scripts in execution right now."));
    }
    if running != mine {
        // The other kind runs: the error names its KILL.
        return Err(crate::server::busy_error(running));
    }
    if run.wrote.load(Relaxed) {
        return Err(CmdError::raw(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
        ));
    }
    run.kill.store(true, Relaxed);
    Ok(())
}

fn script_kill(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    kill_generic(ctx, true)
}

fn script_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

/// Whether EVAL, EVALSHA or FCALL (`name`, its registry name) with `args` may write, as
/// CLIENT PAUSE WRITE sees it (Redis's evalGetCommandFlags / fcallGetCommandFlags): a
/// script or function without the `no-writes` flag does. A script not cached, a function
/// not found, or a cache or library held by a running script count as writing.
pub fn may_write(server: &Server, name: &str, args: Args<'_>) -> bool {
    /// A script without a shebang may write; one with a shebang unless `no-writes`.
    fn flags_may_write(flags: u32) -> bool {
        flags & script::FLAG_EVAL_COMPAT != 0 || flags & FLAG_NO_WRITES == 0
    }
    match name {
        "eval" => match script::parse_shebang(args.arg(1), false) {
            Ok((flags, _, _)) => flags_may_write(flags),
            Err(_) => true,
        },
        "evalsha" => {
            let sha = String::from_utf8_lossy(args.arg(1)).to_ascii_lowercase();
            let Some(eng) = server.scripting.eval.try_lock() else {
                return true;
            };
            eng.scripts
                .get(&sha)
                .is_none_or(|s| flags_may_write(s.flags))
        }
        "fcall" => {
            let name = String::from_utf8_lossy(args.arg(1));
            let Some(store) = server.scripting.func.try_lock() else {
                return true;
            };
            store
                .index
                .get(name.as_ref())
                .and_then(|lib| store.libraries.get(lib))
                .and_then(|lib| lib.functions.get(name.as_ref()))
                .is_none_or(|f| f.flags & FLAG_NO_WRITES == 0)
        }
        _ => false,
    }
}

fn fcall(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: Args<'_>, ro: bool) -> CmdResult {
    ctx.show_to_monitors(args);
    let server = ctx.server.clone();
    let _gates = if ctx.client.block_mode == BlockMode::NoBlock {
        None
    } else {
        Some(server.lock_gates_or_busy()?)
    };
    let store = server.scripting.func.lock();
    fcall_in(ctx, args, ro, &store)
}

/// FCALL / FCALL_RO (`ro`) of a function of `store`, the caller holding what it must (the
/// gates, unless it never blocks).
pub(crate) fn fcall_in(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    ro: bool,
    store: &script::FunctionStore,
) -> CmdResult {
    let server = ctx.server.clone();
    let name = String::from_utf8_lossy(args.arg(1)).into_owned();
    let info = store
        .index
        .get(&name)
        .and_then(|lib| store.libraries.get(lib))
        .and_then(|lib| lib.functions.get(&name));
    let Some(info) = info else {
        return Err(CmdError::err("Function not found"));
    };
    let (keys, argv) = split_keys(args)?;
    if ro && info.flags & FLAG_NO_WRITES == 0 {
        return Err(CmdError::err(
            "Can not execute a script with write flag using *_ro command.",
        ));
    }
    let func = info.func.clone();
    let read_only = ro || info.flags & FLAG_NO_WRITES != 0;
    let allow_oom = read_only || info.flags & script::FLAG_ALLOW_OOM != 0;
    if !allow_oom && crate::evict::script_oom(&server) {
        return Err(crate::evict::oom_error());
    }
    let cluster = ScriptKeys::for_script(&server, ctx.client, &keys, info.flags);
    if cluster.is_some() && info.flags & script::FLAG_NO_CLUSTER != 0 {
        return Err(CmdError::err(script_keys::NO_CLUSTER));
    }
    *server.scripting.run.current.lock() = Some((
        name.clone(),
        args.iter().map(|a| a.to_vec()).collect::<Vec<_>>(),
    ));
    let opts = RunOpts {
        funcname: name,
        eval_mode: false,
        read_only,
        allow_oom,
        kind: BUSY_FUNCTION,
        keys,
        args: argv,
        cluster,
    };
    let r = script::run(&store.engine, ctx, &func, opts);
    *server.scripting.run.current.lock() = None;
    r
}

/// Whether function `name` is loaded.
pub(crate) fn has_function(server: &crate::server::Server, name: &[u8]) -> bool {
    std::str::from_utf8(name).is_ok_and(|n| server.scripting.func.lock().index.contains_key(n))
}

/// The code of the library holding function `name`, if one does (cluster mode puts it in
/// a replicated FCALL).
pub(crate) fn function_code(server: &crate::server::Server, name: &[u8]) -> Option<Vec<u8>> {
    let store = server.scripting.func.lock();
    let lib = store.index.get(std::str::from_utf8(name).ok()?)?;
    store.libraries.get(lib).map(|l| l.code.clone())
}

fn function_load(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i + 1 < args.len() {
        if is(args.arg(i), "replace") {
            replace = true;
            i += 1;
        } else {
            return Err(CmdError::err(format!(
                "Unknown option given: {}",
                String::from_utf8_lossy(args.arg(i))
            )));
        }
    }
    if i + 1 != args.len() {
        return Err(CmdError::err("Function code is missing"));
    }
    let code = args.arg(i);
    let mut store = ctx.server.scripting.func.lock();
    if ctx.client.cluster.from_log && !replace {
        // In cluster mode a client sends FUNCTION LOAD to every master and each of them
        // proposes it: the same code again answers the library's name.
        if let Ok((_, _, Some(name))) = script::parse_shebang(code, true) {
            if store.libraries.get(&name).is_some_and(|l| l.code == code) {
                ctx.out.bulk(name.as_bytes());
                return Ok(());
            }
        }
    }
    let name = store.load(code, replace)?;
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn function_delete(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut store = ctx.server.scripting.func.lock();
    let name = String::from_utf8_lossy(args.arg(2)).into_owned();
    let Some(lib) = store.libraries.remove(&name) else {
        return Err(CmdError::err("Library not found"));
    };
    for f in lib.functions.keys() {
        store.index.remove(f);
    }
    ctx.out.ok();
    Ok(())
}

fn function_flush(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    flush_mode(args, "FUNCTION")?;
    *ctx.server.scripting.func.lock() = script::FunctionStore::new();
    ctx.out.ok();
    Ok(())
}

fn function_dump(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    let payload = {
        let store = ctx.server.scripting.func.lock();
        storage::rdb::functions_payload(store.libraries.values().map(|l| &l.code[..]))
    };
    ctx.out.bulk(&payload);
    Ok(())
}

/// FUNCTION RESTORE payload [FLUSH | APPEND | REPLACE]: every library is compiled and
/// checked for name clashes before any is installed, so a refused restore changes nothing.
fn function_restore(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    use storage::rdb::read::FunctionPayloadError as E;
    let (mut flush, mut replace) = (false, false);
    match args.len() {
        3 => {}
        4 if is(args.arg(3), "flush") => flush = true,
        4 if is(args.arg(3), "append") => {}
        4 if is(args.arg(3), "replace") => replace = true,
        4 => {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
        _ => return Err(CmdError::Syntax),
    }
    let codes = match storage::rdb::functions_from_payload(args.arg(2)) {
        Ok(c) => c,
        Err(E::VersionOrChecksum) => {
            return Err(CmdError::err("payload version or checksum are wrong"))
        }
        Err(E::NotAFunction) => return Err(CmdError::err("given type is not a function")),
        Err(E::BadData) => return Err(CmdError::err("Bad data format")),
    };
    // Compile everything in a scratch store first (also validates the payload).
    let scratch = script::FunctionStore::from_codes(&codes)?;
    let mut store = ctx.server.scripting.func.lock();
    if flush {
        *store = scratch;
        ctx.out.ok();
        return Ok(());
    }
    for (name, lib) in &scratch.libraries {
        if store.libraries.contains_key(name) && !replace {
            return Err(CmdError::err(format!("Library {name} already exists")));
        }
        for f in lib.functions.keys() {
            if let Some(owner) = store.index.get(f) {
                if owner != name || !replace {
                    return Err(CmdError::err(format!("Function {f} already exists")));
                }
            }
        }
    }
    for c in &codes {
        store.load(c, replace)?;
    }
    ctx.out.ok();
    Ok(())
}

fn function_list(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let a = args.arg(i);
        if is(a, "withcode") {
            if with_code {
                return Err(CmdError::err("Unknown argument withcode"));
            }
            with_code = true;
            i += 1;
        } else if is(a, "libraryname") {
            if pattern.is_some() {
                return Err(CmdError::err("library name argument was already given"));
            }
            if i + 1 >= args.len() {
                return Err(CmdError::err("library name argument was not given"));
            }
            pattern = Some(args.arg(i + 1));
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(a)
            )));
        }
    }
    let store = ctx.server.scripting.func.lock();
    let libs: Vec<_> = store
        .libraries
        .iter()
        .filter(|(name, _)| {
            pattern.is_none_or(|p| storage::pattern::glob_match(p, name.as_bytes(), false))
        })
        .collect();
    let out = &mut *ctx.out;
    out.array(libs.len());
    for (name, lib) in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for (fname, info) in &lib.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(fname.as_bytes());
            out.bulk(b"description");
            match &info.description {
                Some(d) => out.bulk(d.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names: Vec<&str> = FLAG_NAMES
                .iter()
                .filter(|(_, f)| info.flags & f != 0)
                .map(|(n, _)| *n)
                .collect();
            out.set(names.len());
            for n in names {
                out.bulk(n.as_bytes());
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

fn function_stats(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    write_stats(ctx.server, ctx.out);
    Ok(())
}

/// FUNCTION STATS's reply. Also written by [`crate::busy`] for a client beside a busy
/// script (Redis answers FUNCTION STATS meanwhile: it is how a client finds what to kill).
pub fn write_stats(server: &Server, out: &mut ReplyWriter) {
    let run = &server.scripting.run;
    let counts = server
        .scripting
        .func
        .try_lock()
        .map(|s| (s.libraries.len(), s.index.len()));
    let current = run.current.lock().clone();
    out.map(2);
    out.bulk(b"running_script");
    match current {
        Some((name, argv)) if run.running.load(Relaxed) == BUSY_FUNCTION => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"command");
            out.array(argv.len());
            for a in &argv {
                out.bulk(a);
            }
            out.bulk(b"duration_ms");
            out.int(0);
        }
        _ => out.null(),
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    let (libs, funcs) = counts.unwrap_or((0, 0));
    out.bulk(b"libraries_count");
    out.int(libs as i64);
    out.bulk(b"functions_count");
    out.int(funcs as i64);
}

fn function_kill(ctx: &mut Ctx<'_>, _args: Args<'_>) -> CmdResult {
    kill_generic(ctx, false)
}

fn function_help(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    reply_help(
        ctx.out,
        args.arg(0),
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "FCALL <FUNCTION NAME> <NUMKEYS> <KEY1> ... <KEYN> <ARG1> ... <ARGN>",
            "    Call a function.",
            "FCALL_RO <FUNCTION NAME> <NUMKEYS> <KEY1> ... <KEYN> <ARG1> ... <ARGN>",
            "    Call a function that is marked read-only (no-writes flag).",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}
