//! Lua scripting (EVAL and FCALL): the Lua 5.1 engines, the sandbox, `redis.*`, and
//! running one script while every worker's gate is held.
//!
//! Two engines live on the server ([`Scripting`]): one for EVAL scripts (recreated by
//! SCRIPT FLUSH) and one for function libraries (FUNCTION FLUSH). Each is a Lua state whose
//! scripts see a sandboxed global environment: reading a missing global raises `Script
//! attempted to access nonexistent global variable`, writing one (or a field of a library
//! table such as `redis` or `string`) raises `Attempt to modify a readonly table`.
//! `redis.call` runs a command through [`crate::exec::run_command`] into a private reply
//! buffer and converts the reply to Lua ([`conv`]); in cluster mode it first checks the
//! command's keys against the script's group ([`crate::cluster::script_keys`]). A count
//! hook watches the time: past `busy-reply-threshold` it marks the server busy (other
//! clients get `-BUSY`) and honours SCRIPT KILL / FUNCTION KILL.

pub mod conv;
pub mod libs;
pub mod structlib;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value, VmState};
use parking_lot::Mutex;
use resp::{Frame, Limits, OwnedArgs, Protocol, ReplyWriter};

use crate::client::BlockMode;
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::exec::run_command;
use crate::registry::{flags, Unresolved};
use crate::server::Server;

/// Default `busy-reply-threshold` (ms) when the configuration has no such directive.
pub const DEFAULT_BUSY_MS: u64 = 5000;

/// Instructions between two runs of the timeout hook.
const HOOK_EVERY: u32 = 10_000;
/// How often a busy script's hook answers the clients beside it ([`crate::busy`]).
const ANSWER_EVERY: Duration = Duration::from_millis(1);

/// Shebang flag `no-writes`.
pub const FLAG_NO_WRITES: u32 = 1;
/// Shebang flag `allow-oom`.
pub const FLAG_ALLOW_OOM: u32 = 2;
/// Shebang flag `allow-stale`.
pub const FLAG_ALLOW_STALE: u32 = 4;
/// Shebang flag `no-cluster`.
pub const FLAG_NO_CLUSTER: u32 = 8;
/// Shebang flag `allow-cross-slot-keys`.
pub const FLAG_CROSS_SLOT: u32 = 16;
/// A script without a shebang (EVAL compatibility mode).
pub const FLAG_EVAL_COMPAT: u32 = 32;

/// (name, flag) of the script / function flags.
pub const FLAG_NAMES: &[(&str, u32)] = &[
    ("no-writes", FLAG_NO_WRITES),
    ("allow-oom", FLAG_ALLOW_OOM),
    ("allow-stale", FLAG_ALLOW_STALE),
    ("no-cluster", FLAG_NO_CLUSTER),
    ("allow-cross-slot-keys", FLAG_CROSS_SLOT),
];

/// What is running now, for SCRIPT KILL / FUNCTION KILL (read without the engine locks).
#[derive(Default)]
pub struct RunState {
    /// 0: nothing; [`crate::server::BUSY_SCRIPT`] or [`crate::server::BUSY_FUNCTION`].
    pub running: AtomicU8,
    /// Set by SCRIPT KILL / FUNCTION KILL.
    pub kill: AtomicBool,
    /// The running script has written to the dataset (it can no longer be killed).
    pub wrote: AtomicBool,
    /// Name of the running function (FUNCTION STATS).
    pub current: Mutex<Option<(String, Vec<Vec<u8>>)>>,
}

/// Scripting state of the node.
pub struct Scripting {
    /// The EVAL engine and its script cache.
    pub eval: Mutex<Engine>,
    /// The function engine and its libraries.
    pub func: Mutex<FunctionStore>,
    /// The script running now.
    pub run: RunState,
    /// Cluster mode: the libraries of replicated FCALLs (an FCALL entry carries its
    /// library's code, so every replica runs the same code), by the code's SHA1.
    replicated: Mutex<HashMap<String, Arc<Mutex<FunctionStore>>>>,
}

/// How many libraries [`Scripting::library_store`] keeps compiled.
const REPLICATED_LIBRARIES: usize = 64;

impl Default for Scripting {
    fn default() -> Self {
        Self::new()
    }
}

impl Scripting {
    /// Fresh engines with no scripts and no libraries.
    pub fn new() -> Self {
        Scripting {
            eval: Mutex::new(Engine::new("@user_script")),
            func: Mutex::new(FunctionStore::new()),
            run: RunState::default(),
            replicated: Mutex::new(HashMap::new()),
        }
    }

    /// A function store holding exactly the library `code`, compiled on first use (a
    /// replicated FCALL runs its function from there, whatever this node's FUNCTION LOAD
    /// state is); the error of FUNCTION LOAD when the code does not load.
    pub fn library_store(&self, code: &[u8]) -> Result<Arc<Mutex<FunctionStore>>, CmdError> {
        let sha = sha1_hex(code);
        if let Some(s) = self.replicated.lock().get(&sha) {
            return Ok(s.clone());
        }
        let store = Arc::new(Mutex::new(FunctionStore::from_codes(&[code])?));
        let mut m = self.replicated.lock();
        if m.len() >= REPLICATED_LIBRARIES {
            m.clear();
        }
        m.insert(sha, store.clone());
        Ok(store)
    }
}

/// One cached EVAL script.
pub struct Script {
    /// The compiled chunk.
    pub func: Function,
    /// Shebang flags.
    pub flags: u32,
    /// Source text.
    pub body: Vec<u8>,
}

/// A Lua state with the Redis sandbox.
pub struct Engine {
    /// The state.
    pub lua: Lua,
    /// Hidden helpers (`errmsg`, `load_mode`, `lib_api`).
    imp: Table,
    /// The real `redis` table (scripts see a read-only view).
    redis: Table,
    /// Globals lookup table behind the environment.
    lookup: Table,
    /// The environment scripts run in.
    env: Table,
    /// `function(f, h, a, b) return xpcall(function() return f(a, b) end, h) end`.
    runner: Function,
    /// The error handler adding `source` and `line`.
    handler: Function,
    /// `redis.setresp` state: true for RESP3.
    resp3: Arc<AtomicBool>,
    /// Set once the running script was killed: `pcall` then re-raises.
    killed: Arc<AtomicBool>,
    /// `math.random`'s rand48 state. It carries on from script to script on a single node;
    /// a replicated write ([`crate::ctx::CmdRng::Seeded`]) resets it from its seed, so
    /// every replica's script draws the same numbers.
    random: Arc<Mutex<u64>>,
    /// Chunk name (`@user_script` or `@user_function`).
    chunk: &'static str,
    /// EVAL cache: sha1 hex -> script.
    pub scripts: HashMap<String, Script>,
    /// This state's share of [`crate::stats::lua_memory`] and its collection schedule.
    heap: HeapGauge,
}

/// Scripts between two incremental collection steps (Redis's `LUA_GC_CYCLE_PERIOD`).
const GC_PERIOD: u32 = 50;
/// Basic collector steps taken every [`GC_PERIOD`] scripts (each one about 2 KB of the
/// collector's work in Lua 5.1: together about what Redis's `lua_gc(LUA_GCSTEP, 50)` does).
const GC_STEPS: u32 = 50;
/// A heap past this size, and past twice its size after the last full collection, is
/// collected in full after the script: garbage a script left (one big table) would
/// otherwise stay until Lua's own collector reaches twice the peak.
const FULL_GC_MIN: u64 = 32 << 20;

/// One Lua state's share of the global heap figures and its collection schedule.
struct HeapGauge {
    /// [`crate::stats::LUA_EVAL_MEMORY`] or [`crate::stats::LUA_FUNCTIONS_MEMORY`].
    total: &'static AtomicU64,
    /// The heap size last added to `total`.
    reported: AtomicU64,
    /// Scripts since the last incremental step.
    runs: AtomicU32,
    /// Heap size right after the last full collection.
    floor: AtomicU64,
}

impl HeapGauge {
    fn new(total: &'static AtomicU64) -> Self {
        HeapGauge {
            total,
            reported: AtomicU64::new(0),
            runs: AtomicU32::new(0),
            floor: AtomicU64::new(0),
        }
    }

    /// Makes `total` count `bytes` for this state.
    fn set(&self, bytes: u64) {
        let old = self.reported.swap(bytes, Relaxed);
        // Wrapping: a shrink adds the two's complement of the difference.
        self.total.fetch_add(bytes.wrapping_sub(old), Relaxed);
    }

    /// After a script: an incremental step every [`GC_PERIOD`] scripts, a full collection
    /// when the heap has grown past [`FULL_GC_MIN`] and twice its last collected size;
    /// then the figure is brought up to date.
    fn after_run(&self, lua: &Lua) {
        if self.runs.fetch_add(1, Relaxed) + 1 >= GC_PERIOD {
            self.runs.store(0, Relaxed);
            for _ in 0..GC_STEPS {
                if !matches!(lua.gc_step(), Ok(false)) {
                    break;
                }
            }
        }
        let heap = lua.used_memory() as u64;
        if heap > FULL_GC_MIN.max(self.floor.load(Relaxed).saturating_mul(2)) {
            // Twice: the first call may only finish a cycle already under way.
            let _ = lua.gc_collect();
            let _ = lua.gc_collect();
            self.floor.store(lua.used_memory() as u64, Relaxed);
        }
        self.set(lua.used_memory() as u64);
    }
}

impl Drop for HeapGauge {
    fn drop(&mut self) {
        self.set(0);
    }
}

const PRELUDE: &str = r#"
local imp, R, L, E = ...
local error, rawget, rawset, setmetatable, type, select, unpack, tostring =
      error, rawget, rawset, setmetatable, type, select, unpack, tostring
local loadstring, load, setfenv, getfenv, pcall = loadstring, load, setfenv, getfenv, pcall
local G = _G
local readonly = setmetatable({}, {__mode = 'k'})
local function ro_err() error("Attempt to modify a readonly table", 2) end
local function protect(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_err, __metatable = false})
  readonly[p] = true
  return p
end
R.REPL_NONE = 0
R.REPL_AOF = 1
R.REPL_SLAVE = 2
R.REPL_REPLICA = 2
R.REPL_ALL = 3
R.LOG_DEBUG = 0
R.LOG_VERBOSE = 1
R.LOG_NOTICE = 2
R.LOG_WARNING = 3
R.REDIS_VERSION = "7.2.0"
R.REDIS_VERSION_NUM = 459264
local allowed = {"xpcall", "tostring", "setmetatable", "next", "assert", "tonumber",
  "rawequal", "collectgarbage", "getmetatable", "type", "select", "unpack", "gcinfo",
  "pairs", "rawget", "ipairs", "_VERSION", "error", "newproxy"}
for _, k in ipairs(allowed) do rawset(L, k, G[k]) end
for _, k in ipairs({"string", "math", "table", "coroutine", "cjson", "bit", "cmsgpack", "struct"}) do
  if G[k] ~= nil then rawset(L, k, protect(G[k])) end
end
rawset(L, "redis", protect(R))
rawset(L, "_G", E)
rawset(L, "rawset", function(t, k, v)
  if readonly[t] then error("Attempt to modify a readonly table", 0) end
  return rawset(t, k, v)
end)
rawset(L, "pcall", function(f, ...)
  local r = {pcall(f, ...)}
  if not r[1] then
    imp.check()
    local e = r[2]
    if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then
      return false, rawget(e, 'err')
    end
    if type(e) == 'userdata' then return false, imp.errmsg(e) end
  end
  return unpack(r, 1, table.maxn(r))
end)
rawset(L, "loadstring", function(s, name)
  local f, e = loadstring(s, name)
  if f then setfenv(f, E) end
  return f, e
end)
rawset(L, "load", function(fn, name)
  local f, e = load(fn, name)
  if f then setfenv(f, E) end
  return f, e
end)
rawset(L, "getfenv", function(f)
  local r = getfenv(f)
  if r == G then return E end
  return r
end)
rawset(L, "setfenv", setfenv)
setmetatable(L, {__index = function(t, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end, __newindex = ro_err, __metatable = false})
local EM = {__index = L, __newindex = ro_err, __metatable = false}
setmetatable(E, EM)
-- FUNCTION LOAD runs library code with only the library API visible.
local RL = {log = R.log, LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = R.REDIS_VERSION, REDIS_VERSION_NUM = R.REDIS_VERSION_NUM}
setmetatable(RL, {__index = function(t, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end})
local LL = setmetatable({redis = protect(RL)}, {__index = function(t, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end, __newindex = ro_err, __metatable = false})
imp.lib_api = RL
imp.load_mode = function(on)
  if on then EM.__index = LL else EM.__index = L end
end
readonly[E] = true
return function(f, h, a, b) return xpcall(function() return f(a, b) end, h) end
"#;

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// An error raised by the `redis.*` API: its text carries its code and becomes the
/// script's error reply as is (Redis raises these as `{err=...}` tables).
#[derive(Debug)]
struct ApiError(String);

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ApiError {}

/// A `redis.*` error `ERR <msg>`.
fn api(msg: &str) -> mlua::Error {
    mlua::Error::external(ApiError(format!("ERR {msg}")))
}

/// True for errors of the `redis.*` API.
fn is_api_error(e: &mlua::Error) -> bool {
    match e {
        mlua::Error::CallbackError { cause, .. } => is_api_error(cause),
        mlua::Error::ExternalError(x) => x.downcast_ref::<ApiError>().is_some(),
        _ => false,
    }
}

/// The error table text of a Rust-raised error: `redis.*` errors as they are, others
/// (cjson, bit, Lua API misuse) with `ERR ` in front.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::ExternalError(x) => match x.downcast_ref::<ApiError>() {
            Some(a) => a.0.clone(),
            None => format!("ERR {x}"),
        },
        other => format!("ERR {}", root_message(other)),
    }
}

/// The text of a Rust-raised Lua error, without mlua's wrapping.
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::ExternalError(x) => match x.downcast_ref::<ApiError>() {
            Some(a) => a.0.clone(),
            None => x.to_string(),
        },
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

impl Engine {
    /// A fresh sandboxed state whose chunks are named `chunk`.
    pub fn new(chunk: &'static str) -> Self {
        match Self::try_new(chunk) {
            Ok(e) => e,
            Err(e) => panic!("cannot create the Lua engine: {e}"),
        }
    }

    fn try_new(chunk: &'static str) -> mlua::Result<Self> {
        let lua = Lua::new();
        let heap = HeapGauge::new(if chunk == "@user_function" {
            &crate::stats::LUA_FUNCTIONS_MEMORY
        } else {
            &crate::stats::LUA_EVAL_MEMORY
        });
        let globals = lua.globals();
        libs::register(&lua, &globals)?;
        let imp = lua.create_table()?;
        let redis = lua.create_table()?;
        let lookup = lua.create_table()?;
        let env = lua.create_table()?;
        let resp3 = Arc::new(AtomicBool::new(false));
        let killed = Arc::new(AtomicBool::new(false));
        let k = killed.clone();
        imp.raw_set(
            "check",
            lua.create_function(move |_, ()| {
                if k.load(Relaxed) {
                    return Err(api("Script killed by user with SCRIPT KILL..."));
                }
                Ok(())
            })?,
        )?;
        redis.raw_set(
            "sha1hex",
            lua.create_function(|_, a: MultiValue| {
                if a.len() != 1 {
                    return Err(api("wrong number of arguments"));
                }
                let b = match a.front() {
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    Some(Value::Integer(i)) => i.to_string().into_bytes(),
                    Some(Value::Number(n)) => conv::fmt_g17(*n).into_bytes(),
                    _ => Vec::new(),
                };
                Ok(sha1_hex(&b))
            })?,
        )?;
        redis.raw_set(
            "error_reply",
            lua.create_function(|lua, a: MultiValue| {
                let msg = match (a.len(), a.front()) {
                    (1, Some(Value::String(s))) => s.to_string_lossy(),
                    _ => return conv::err_table(lua, "ERR wrong number or type of arguments"),
                };
                let msg = if msg.starts_with('-') {
                    msg
                } else {
                    format!("-{msg}")
                };
                conv::err_table(lua, &conv::normalize_error(&msg))
            })?,
        )?;
        redis.raw_set(
            "status_reply",
            lua.create_function(|lua, a: MultiValue| {
                let t = lua.create_table()?;
                match (a.len(), a.front()) {
                    (1, Some(Value::String(s))) => t.raw_set("ok", s.clone())?,
                    _ => t.raw_set("err", "ERR wrong number or type of arguments")?,
                }
                Ok(t)
            })?,
        )?;
        redis.raw_set(
            "log",
            lua.create_function(|_, a: MultiValue| {
                if a.len() < 2 {
                    return Err(api("redis.log() requires two arguments or more."));
                }
                let level = match a.front() {
                    Some(Value::Integer(i)) => *i,
                    Some(Value::Number(n)) => *n as i64,
                    _ => return Err(api("First argument must be a number (log level).")),
                };
                if !(0..=3).contains(&level) {
                    return Err(api("Invalid debug level."));
                }
                let mut msg = String::new();
                for (i, v) in a.iter().skip(1).enumerate() {
                    let s = match v {
                        Value::String(s) => s.to_string_lossy(),
                        Value::Integer(n) => n.to_string(),
                        Value::Number(n) => conv::fmt_g17(*n),
                        _ => continue,
                    };
                    if i > 0 {
                        msg.push(' ');
                    }
                    msg.push_str(&s);
                }
                match level {
                    0 | 1 => tracing::debug!("{msg}"),
                    2 => tracing::info!("{msg}"),
                    _ => tracing::warn!("{msg}"),
                }
                Ok(())
            })?,
        )?;
        // redisLrand48's unseeded initial state.
        let rng = Arc::new(Mutex::new(0x1234_abcd_330e_u64));
        let math: Table = globals.raw_get("math")?;
        let r = rng.clone();
        math.raw_set(
            "random",
            lua.create_function(move |_, a: MultiValue| {
                let v = rand48_next(&mut r.lock());
                let x = (v % i32::MAX as u64) as f64 / i32::MAX as f64;
                let int = |v: Option<&Value>| -> mlua::Result<i64> {
                    match v {
                        Some(Value::Integer(i)) => Ok(*i),
                        Some(Value::Number(n)) => Ok(*n as i64),
                        _ => Err(rt("bad argument to 'random' (number expected)")),
                    }
                };
                match a.len() {
                    0 => Ok(x),
                    1 => {
                        let u = int(a.front())?;
                        if u < 1 {
                            return Err(rt("bad argument #1 to 'random' (interval is empty)"));
                        }
                        Ok((x * u as f64).floor() + 1.0)
                    }
                    2 => {
                        let l = int(a.front())?;
                        let u = int(a.get(1))?;
                        if l > u {
                            return Err(rt("bad argument #2 to 'random' (interval is empty)"));
                        }
                        Ok((x * (u - l + 1) as f64).floor() + l as f64)
                    }
                    _ => Err(rt("wrong number of arguments")),
                }
            })?,
        )?;
        let r = rng.clone();
        math.raw_set(
            "randomseed",
            lua.create_function(move |_, a: Value| {
                let seed = match a {
                    Value::Integer(i) => i,
                    Value::Number(n) => n as i64,
                    _ => return Err(rt("bad argument #1 to 'randomseed' (number expected)")),
                };
                *r.lock() = rand48_seed(seed as i32 as u32);
                Ok(())
            })?,
        )?;
        let r3 = resp3.clone();
        redis.raw_set(
            "setresp",
            lua.create_function(move |_, a: MultiValue| {
                if a.len() != 1 {
                    return Err(api("redis.setresp() requires one argument."));
                }
                let v = match a.front() {
                    Some(Value::Integer(i)) => *i,
                    Some(Value::Number(n)) => *n as i64,
                    _ => 0,
                };
                match v {
                    2 => r3.store(false, Relaxed),
                    3 => r3.store(true, Relaxed),
                    _ => return Err(api("RESP version must be 2 or 3.")),
                }
                Ok(())
            })?,
        )?;
        redis.raw_set(
            "set_repl",
            lua.create_function(|_, a: MultiValue| {
                if a.len() != 1 {
                    return Err(api("redis.set_repl() requires two arguments."));
                }
                let v = match a.front() {
                    Some(Value::Integer(i)) => *i,
                    Some(Value::Number(n)) => *n as i64,
                    _ => 0,
                };
                if v & !3 != 0 {
                    return Err(api(
                        "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    ));
                }
                Ok(())
            })?,
        )?;
        imp.raw_set(
            "errmsg",
            lua.create_function(|lua, v: Value| match v {
                Value::Error(e) => Ok(Value::String(lua.create_string(error_text(&e))?)),
                other => Ok(other),
            })?,
        )?;
        let runner: Function = lua.load(PRELUDE).set_name("=prelude").call((
            imp.clone(),
            redis.clone(),
            lookup.clone(),
            env.clone(),
        ))?;
        let handler = lua.create_function(move |lua, err: Value| {
            let t = match err {
                Value::Table(t) if matches!(t.raw_get::<Value>("err"), Ok(Value::String(_))) => t,
                Value::Error(e) => {
                    let mut text = error_text(&e);
                    if !is_api_error(&e) {
                        // As luaL_error: the position of the Lua code that called the library.
                        let at = lua.inspect_stack(2, |d| {
                            let src = d.source();
                            (src.what != "C")
                                .then(|| (src.short_src.map(|s| s.into_owned()), d.current_line()))
                        });
                        if let Some(Some((Some(src), Some(line)))) = at {
                            text = format!(
                                "ERR {src}:{line}: {}",
                                text.strip_prefix("ERR ").unwrap_or(&text)
                            );
                        }
                    }
                    conv::err_table(lua, &text)?
                }
                Value::String(s) => conv::err_table(lua, &format!("ERR {}", s.to_string_lossy()))?,
                other => {
                    let s = lua
                        .coerce_string(other)
                        .ok()
                        .flatten()
                        .map(|s| s.to_string_lossy())
                        .unwrap_or_else(|| "execution failure".into());
                    conv::err_table(lua, &format!("ERR {s}"))?
                }
            };
            // The innermost frame of the script itself gives source and line.
            for level in 1..64 {
                let found = lua.inspect_stack(level, |d| {
                    let src = d.source();
                    let is_script =
                        src.what != "C" && src.source.as_deref().is_some_and(|s| s == chunk);
                    is_script.then(|| d.current_line())
                });
                match found {
                    None => break,
                    Some(None) => continue,
                    Some(Some(line)) => {
                        t.raw_set("source", chunk)?;
                        if let Some(l) = line {
                            t.raw_set("line", l)?;
                        }
                        break;
                    }
                }
            }
            Ok(t)
        })?;
        Ok(Engine {
            lua,
            imp,
            redis,
            lookup,
            env,
            runner,
            handler,
            resp3,
            killed,
            random: rng,
            chunk,
            scripts: HashMap::new(),
            heap,
        })
    }

    /// Brings this state's share of [`crate::stats::lua_memory`] up to date (after it compiled or ran
    /// something).
    pub fn note_heap(&self) {
        self.heap.set(self.lua.used_memory() as u64);
    }

    /// Compiles `body` (its shebang line already blanked) into a function of the sandbox.
    pub fn compile(&self, body: &[u8]) -> Result<Function, String> {
        let f = self
            .lua
            .load(body)
            .set_name(self.chunk)
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| root_message(&e));
        self.note_heap();
        f
    }

    /// The real `redis` table (for FUNCTION LOAD's `register_function`).
    pub fn redis_table(&self) -> &Table {
        &self.redis
    }
}

/// `srand48` state for `seed`.
fn rand48_seed(seed: u32) -> u64 {
    ((seed as u64) << 16) | 0x330e
}

/// `lrand48`: the next 31-bit value (Redis's portable `redisLrand48`).
fn rand48_next(x: &mut u64) -> u64 {
    *x = (x.wrapping_mul(0x5_deec_e66d).wrapping_add(0xb)) & ((1 << 48) - 1);
    *x >> 17
}

/// SHA1 of `b` in lower-case hex.
pub fn sha1_hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

/// A parsed shebang: flags, the body with the shebang line blanked (None without a
/// shebang) and the library name (`name=`, functions only).
pub type Shebang = (u32, Option<Vec<u8>>, Option<String>);

/// Parses a `#!lua ...` first line. Returns the flags and the body with the shebang line
/// blanked (so line numbers stay), or the error text.
pub fn parse_shebang(body: &[u8], for_function: bool) -> Result<Shebang, String> {
    if !body.starts_with(b"#!") {
        return Ok((FLAG_EVAL_COMPAT, None, None));
    }
    let end = memchr::memchr(b'\n', body).unwrap_or(body.len());
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("#!");
    // A library names its engine in any case (Redis looks engines up case-insensitively).
    let lua = if for_function {
        engine.eq_ignore_ascii_case("#!lua")
    } else {
        engine == "#!lua"
    };
    if !lua {
        let name = engine.trim_start_matches("#!");
        return Err(if for_function {
            format!("ERR Engine '{name}' not found")
        } else {
            format!("ERR Unexpected engine in script shebang: {engine}")
        });
    }
    let mut flags = 0;
    let mut name = None;
    for p in parts {
        if let Some(list) = p.strip_prefix("flags=") {
            if for_function {
                return Err(format!("ERR Invalid metadata value given: {p}"));
            }
            for f in list.split(',').filter(|f| !f.is_empty()) {
                match FLAG_NAMES.iter().find(|(n, _)| *n == f) {
                    Some((_, v)) => flags |= v,
                    None => return Err(format!("ERR Unexpected flag in script shebang: {f}")),
                }
            }
        } else if let (true, Some(n)) = (for_function, p.strip_prefix("name=")) {
            name = Some(n.to_string());
        } else if for_function {
            return Err(format!("ERR Invalid metadata value given: {p}"));
        } else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        }
    }
    let mut b = body.to_vec();
    b[..end].fill(b' ');
    b[0] = b'-';
    b[1] = b'-';
    Ok((flags, Some(b), name))
}

/// How one run behaves.
pub struct RunOpts<'a> {
    /// `f_<sha>` or the function name, for error texts.
    pub funcname: String,
    /// EVAL (KEYS/ARGV globals) or FCALL (keys and args passed to the callback).
    pub eval_mode: bool,
    /// Writes are refused.
    pub read_only: bool,
    /// Shebang `allow-oom` (or `no-writes`): may write while used memory is over maxmemory.
    pub allow_oom: bool,
    /// [`crate::server::BUSY_SCRIPT`] or [`crate::server::BUSY_FUNCTION`].
    pub kind: u8,
    /// Key arguments.
    pub keys: Vec<&'a [u8]>,
    /// Other arguments.
    pub args: Vec<&'a [u8]>,
    /// Cluster mode: the keys the script may touch (`None` in single-node mode).
    pub cluster: Option<crate::cluster::script_keys::ScriptKeys>,
}

struct CallState<'c, 'a> {
    ctx: &'c mut Ctx<'a>,
    read_only: bool,
    /// Cluster mode: the keys the script may touch, checked before each call.
    cluster: Option<crate::cluster::script_keys::ScriptKeys>,
    /// Memory was over maxmemory when the script started: its first write may not grow it.
    oom: bool,
    resp3: Arc<AtomicBool>,
    server: Arc<Server>,
    /// The running engine's heap figure, brought up to date before each command the
    /// script calls (so eviction that command does leaves the heap out as it is now).
    heap: &'c HeapGauge,
}

/// The busy threshold in ms (`busy-reply-threshold`, which `lua-time-limit` is an alias
/// of; 5000 if unreadable).
pub fn busy_threshold(server: &Server) -> u64 {
    let c = server.config.read();
    c.get("busy-reply-threshold")
        .parse()
        .unwrap_or(DEFAULT_BUSY_MS)
}

/// Runs `func` of `engine` for the client of `ctx` (the caller holds every gate) and
/// writes its reply.
pub fn run(engine: &Engine, ctx: &mut Ctx<'_>, func: &Function, opts: RunOpts<'_>) -> CmdResult {
    let server = ctx.server.clone();
    let run = &server.scripting.run;
    // New connections go to another worker meanwhile, so a SCRIPT KILL can get in.
    let stall = server.balance.stall_here();
    run.kill.store(false, Relaxed);
    run.wrote.store(false, Relaxed);
    run.running.store(opts.kind, Relaxed);
    engine.resp3.store(false, Relaxed);
    engine.killed.store(false, Relaxed);
    if matches!(ctx.rng, crate::ctx::CmdRng::Seeded(_)) {
        *engine.random.lock() = rand::RngCore::next_u64(&mut ctx.rng) & 0xffff_ffff_ffff;
    }
    let lua = &engine.lua;
    let result = (|| -> mlua::Result<Result<Value, Table>> {
        let keys = lua.create_table_with_capacity(opts.keys.len(), 0)?;
        for (i, k) in opts.keys.iter().enumerate() {
            keys.raw_set(i + 1, lua.create_string(k)?)?;
        }
        let argv = lua.create_table_with_capacity(opts.args.len(), 0)?;
        for (i, a) in opts.args.iter().enumerate() {
            argv.raw_set(i + 1, lua.create_string(a)?)?;
        }
        let (a, b) = if opts.eval_mode {
            engine.lookup.raw_set("KEYS", keys)?;
            engine.lookup.raw_set("ARGV", argv)?;
            (Value::Nil, Value::Nil)
        } else {
            (Value::Table(keys), Value::Table(argv))
        };
        let threshold = Duration::from_millis(busy_threshold(&server));
        let start = Instant::now();
        let hook_server = server.clone();
        let killed = engine.killed.clone();
        let kind = opts.kind;
        let here = stall.worker();
        let next_answer = std::cell::Cell::new(start);
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| {
                let s = &hook_server;
                if s.busy.load(Relaxed) == 0 {
                    if start.elapsed() >= threshold {
                        s.busy.store(kind, Relaxed);
                    }
                } else if let Some(w) = here {
                    // Busy: the clients this worker serves get their answers from here.
                    let now = Instant::now();
                    if now >= next_answer.get() {
                        next_answer.set(now + ANSWER_EVERY);
                        crate::busy::answer(s, w, kind);
                    }
                }
                if s.scripting.run.kill.load(Relaxed) {
                    killed.store(true, Relaxed);
                    return Err(api("Script killed by user with SCRIPT KILL..."));
                }
                Ok(VmState::Continue)
            },
        )?;
        let saved_db = ctx.client.db;
        let saved_block = ctx.client.block_mode;
        if ctx.client.tracking.is_some() {
            ctx.client.script_keys = Some(opts.keys.iter().map(|k| k.to_vec()).collect());
        }
        ctx.client.block_mode = BlockMode::NoBlock;
        let saved_in_script = std::mem::replace(&mut ctx.client.in_script, true);
        let oom = !opts.allow_oom && crate::evict::script_oom(&server);
        let state = RefCell::new(CallState {
            ctx: &mut *ctx,
            read_only: opts.read_only,
            cluster: opts.cluster.clone(),
            oom,
            resp3: engine.resp3.clone(),
            server: server.clone(),
            heap: &engine.heap,
        });
        let r = lua.scope(|scope| {
            let call = scope.create_function(|lua, a: MultiValue| {
                let (v, is_err) = redis_call(lua, &state, a)?;
                match (is_err, &v) {
                    (true, Value::Table(t)) => {
                        let msg: String = t.raw_get("err")?;
                        Err(mlua::Error::external(ApiError(msg)))
                    }
                    _ => Ok(v),
                }
            })?;
            let pcall =
                scope.create_function(|lua, a: MultiValue| Ok(redis_call(lua, &state, a)?.0))?;
            engine.redis.raw_set("call", call)?;
            engine.redis.raw_set("pcall", pcall)?;
            let r: MultiValue = engine
                .runner
                .call((func.clone(), engine.handler.clone(), a, b))?;
            engine.redis.raw_set("call", Value::Nil)?;
            engine.redis.raw_set("pcall", Value::Nil)?;
            let mut it = r.into_iter();
            let ok = matches!(it.next(), Some(Value::Boolean(true)));
            let v = it.next().unwrap_or(Value::Nil);
            if ok {
                Ok(Ok(v))
            } else {
                match v {
                    Value::Table(t) => Ok(Err(t)),
                    other => {
                        let t = conv::err_table(lua, "ERR execution failure")?;
                        if let Value::String(s) = other {
                            t.raw_set("err", format!("ERR {}", s.to_string_lossy()))?;
                        }
                        Ok(Err(t))
                    }
                }
            }
        });
        drop(state);
        lua.remove_hook();
        ctx.client.block_mode = saved_block;
        ctx.client.in_script = saved_in_script;
        ctx.client.script_keys = None;
        ctx.client.select(saved_db);
        r
    })();
    server.busy.store(0, Relaxed);
    run.running.store(0, Relaxed);
    run.kill.store(false, Relaxed);
    if opts.eval_mode {
        let _ = engine.lookup.raw_set("KEYS", Value::Nil);
        let _ = engine.lookup.raw_set("ARGV", Value::Nil);
    }
    engine.heap.after_run(&engine.lua);
    match result {
        Err(e) => Err(CmdError::err(format!(
            "Error running script {}, {}",
            opts.funcname,
            root_message(&e)
        ))),
        Ok(Ok(v)) => {
            conv::lua_to_reply(ctx.out, &v, engine.resp3.load(Relaxed));
            Ok(())
        }
        Ok(Err(t)) => {
            let msg: String = t
                .raw_get::<Option<String>>("err")
                .ok()
                .flatten()
                .unwrap_or_else(|| "ERR execution failure".into());
            let source: Option<String> = t.raw_get("source").ok().flatten();
            let line: Option<i64> = t.raw_get("line").ok().flatten();
            let text = match (source, line) {
                (Some(s), Some(l)) => format!("{msg} script: {}, on {s}:{l}.", opts.funcname),
                _ => msg,
            };
            Err(CmdError::raw(text))
        }
    }
}

/// `redis.call` / `redis.pcall`: returns the converted reply and whether it is an error
/// (which `redis.call` raises).
fn redis_call(
    lua: &Lua,
    state: &RefCell<CallState<'_, '_>>,
    a: MultiValue,
) -> mlua::Result<(Value, bool)> {
    let fail = |msg: &str| -> mlua::Result<(Value, bool)> {
        Ok((Value::Table(conv::err_table(lua, msg)?), true))
    };
    if a.is_empty() {
        return fail("ERR Please specify at least one argument for this redis lib call");
    }
    let mut owned = OwnedArgs::default();
    for v in a.iter() {
        match v {
            Value::String(s) => owned.push(&s.as_bytes()),
            Value::Integer(i) if i.unsigned_abs() < 100_000_000_000_000_000 => {
                owned.push(i.to_string().as_bytes())
            }
            Value::Integer(i) => owned.push(conv::fmt_g17(*i as f64).as_bytes()),
            Value::Number(n) => owned.push(conv::fmt_g17(*n).as_bytes()),
            _ => return fail("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    let args = owned.args();
    let Ok(mut st) = state.try_borrow_mut() else {
        return fail("ERR redis.call recursive call detected");
    };
    let server = st.server.clone();
    let reg = &server.registry;
    let idx = match reg.resolve(&args) {
        Ok(idx) => idx,
        Err(Unresolved::MissingSubcommand(_)) => {
            return fail("ERR Wrong number of args calling Redis command from script")
        }
        Err(_) => return fail("ERR Unknown Redis command called from script"),
    };
    let spec = reg.entry(idx).spec;
    if !spec.arity_ok(args.len()) {
        return fail("ERR Wrong number of args calling Redis command from script");
    }
    if spec.has(flags::NOSCRIPT) {
        return fail("ERR This Redis command is not allowed from script");
    }
    // May-replicate commands (PUBLISH, PFCOUNT) count as writes here, as in Redis: CLIENT
    // PAUSE WRITE lets read-only scripts run, so they must not publish.
    if (spec.has(flags::WRITE) || spec.has(flags::MAY_REPLICATE)) && st.read_only {
        return fail("ERR Write commands are not allowed from read-only scripts.");
    }
    // As Redis's scriptVerifyOOM: only a script that has not written yet is stopped.
    if st.oom && spec.has(flags::DENYOOM) && !server.scripting.run.wrote.load(Relaxed) {
        return fail(crate::evict::OOM);
    }
    if let Some(scope) = st.cluster.as_mut() {
        let slots: Vec<u16> = spec
            .key_positions(&args)
            .iter()
            .map(|&p| raft::key_slot(args.arg(p)))
            .collect();
        if let Err(e) = scope.check(&slots, spec.has(flags::WRITE)) {
            return fail(e);
        }
    }
    let resp3 = st.resp3.load(Relaxed);
    let mut w = ReplyWriter::new(if resp3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    });
    st.heap.set(lua.used_memory() as u64);
    std::mem::swap(st.ctx.out, &mut w);
    let r = run_command(st.ctx, idx, args);
    std::mem::swap(st.ctx.out, &mut w);
    if let Err(e) = r {
        return fail(&conv::normalize_error(&format!("-{e}")));
    }
    if spec.has(flags::WRITE) {
        server.scripting.run.wrote.store(true, Relaxed);
    }
    drop(st);
    let frame = match resp::parse_frame(w.buffer(), &Limits::default()) {
        Ok(Some((f, _))) => f,
        _ => Frame::Null,
    };
    let is_err = matches!(frame, Frame::Error(_) | Frame::BlobError(_));
    Ok((conv::frame_to_lua(lua, frame, resp3)?, is_err))
}

/// One function of a library.
pub struct FunctionInfo {
    /// The callback.
    pub func: Function,
    /// Flags.
    pub flags: u32,
    /// Description, if given.
    pub description: Option<String>,
}

/// One loaded library.
pub struct Library {
    /// Source code.
    pub code: Vec<u8>,
    /// Functions by name.
    pub functions: BTreeMap<String, FunctionInfo>,
}

/// The function engine and its libraries.
pub struct FunctionStore {
    /// The Lua state.
    pub engine: Engine,
    /// Libraries by name.
    pub libraries: BTreeMap<String, Library>,
    /// Function name -> library name.
    pub index: HashMap<String, String>,
}

impl Default for FunctionStore {
    fn default() -> Self {
        Self::new()
    }
}

impl FunctionStore {
    /// Every library's source, in name order (what snapshots and AOF rewrites save).
    pub fn library_codes(&self) -> Vec<Vec<u8>> {
        self.libraries.values().map(|l| l.code.clone()).collect()
    }

    /// No libraries.
    pub fn new() -> Self {
        FunctionStore {
            engine: Engine::new("@user_function"),
            libraries: BTreeMap::new(),
            index: HashMap::new(),
        }
    }

    /// A fresh store with the libraries `codes` loaded (FUNCTION RESTORE's scratch store,
    /// a metadata snapshot, a replicated FCALL's library); the first load error.
    pub fn from_codes<C: AsRef<[u8]>>(codes: &[C]) -> Result<Self, CmdError> {
        let mut store = FunctionStore::new();
        for c in codes {
            store.load(c.as_ref(), false)?;
        }
        Ok(store)
    }

    /// Loads a library (FUNCTION LOAD): returns its name.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, CmdError> {
        let (_, body, name) = parse_shebang(code, true).map_err(CmdError::raw)?;
        let Some(body) = body else {
            return Err(CmdError::err("Missing library metadata"));
        };
        let Some(name) = name else {
            return Err(CmdError::err("Library name was not given"));
        };
        if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return Err(CmdError::err(
                "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
            ));
        }
        if self.libraries.contains_key(&name) && !replace {
            return Err(CmdError::err(format!("Library '{name}' already exists")));
        }
        let func = self
            .engine
            .compile(&body)
            .map_err(|e| CmdError::err(format!("Error compiling function: {e}")))?;
        let lua = &self.engine.lua;
        let registered: RefCell<Vec<(String, FunctionInfo)>> = RefCell::new(Vec::new());
        let res = lua.scope(|scope| {
            let reg =
                scope.create_function(|_, a: MultiValue| register_function(&registered, a))?;
            let api: Table = self.engine.imp.raw_get("lib_api")?;
            let load_mode: Function = self.engine.imp.raw_get("load_mode")?;
            api.raw_set("register_function", reg)?;
            load_mode.call::<()>(true)?;
            let started = Instant::now();
            lua.set_hook(
                HookTriggers::new().every_nth_instruction(HOOK_EVERY),
                move |_, _| {
                    if started.elapsed() > Duration::from_millis(500) {
                        return Err(rt("FUNCTION LOAD timeout"));
                    }
                    Ok(VmState::Continue)
                },
            )?;
            let r: mlua::Result<MultiValue> = self.engine.runner.call((
                func,
                self.engine.handler.clone(),
                Value::Nil,
                Value::Nil,
            ));
            lua.remove_hook();
            load_mode.call::<()>(false)?;
            api.raw_set("register_function", Value::Nil)?;
            let r = r?;
            let mut it = r.into_iter();
            if matches!(it.next(), Some(Value::Boolean(true))) {
                Ok(None)
            } else {
                let msg = match it.next() {
                    Some(Value::Table(t)) => t
                        .raw_get::<Option<String>>("err")
                        .ok()
                        .flatten()
                        .unwrap_or_default(),
                    _ => "ERR execution failure".into(),
                };
                Ok(Some(msg))
            }
        });
        self.engine.note_heap();
        match res {
            Err(e) => {
                return Err(CmdError::err(format!(
                    "Error registering functions: {}",
                    root_message(&e)
                )))
            }
            Ok(Some(msg)) => {
                return Err(CmdError::err(format!("Error registering functions: {msg}")));
            }
            Ok(None) => {}
        }
        let funcs = registered.into_inner();
        if funcs.is_empty() {
            return Err(CmdError::err("No functions registered"));
        }
        for (f, _) in &funcs {
            if let Some(lib) = self.index.get(f) {
                if *lib != name {
                    return Err(CmdError::err(format!("Function {f} already exists")));
                }
            }
        }
        if let Some(old) = self.libraries.remove(&name) {
            for f in old.functions.keys() {
                self.index.remove(f);
            }
        }
        let mut functions = BTreeMap::new();
        for (f, info) in funcs {
            self.index.insert(f.clone(), name.clone());
            functions.insert(f, info);
        }
        self.libraries.insert(
            name.clone(),
            Library {
                code: code.to_vec(),
                functions,
            },
        );
        Ok(name)
    }
}

fn register_function(
    out: &RefCell<Vec<(String, FunctionInfo)>>,
    a: MultiValue,
) -> mlua::Result<()> {
    let (name, func, flags, description) = match (a.len(), a.front()) {
        (1, Some(Value::Table(t))) => {
            let mut name = None;
            let mut func = None;
            let mut flags = 0;
            let mut desc = None;
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Value::String(k) = k else {
                    return Err(api(
                        "named argument key given to register_function is not a string",
                    ));
                };
                match (&*k.to_string_lossy(), v) {
                    ("function_name", Value::String(s)) => name = Some(s.to_string_lossy()),
                    ("function_name", _) => {
                        return Err(api("function_name argument given to register_function must be a string"))
                    }
                    ("callback", Value::Function(f)) => func = Some(f),
                    ("callback", _) => {
                        return Err(api("callback argument given to register_function must be a function"))
                    }
                    ("description", Value::String(s)) => desc = Some(s.to_string_lossy()),
                    ("description", _) => {
                        return Err(api("description argument given to register_function must be a string"))
                    }
                    ("flags", Value::Table(ft)) => {
                        for f in ft.sequence_values::<Value>() {
                            let Value::String(f) = f? else {
                                return Err(api("unknown flag given"));
                            };
                            let f = f.to_string_lossy();
                            match FLAG_NAMES.iter().find(|(n, _)| *n == f) {
                                Some((_, v)) => flags |= v,
                                None => return Err(api("unknown flag given")),
                            }
                        }
                    }
                    ("flags", _) => {
                        return Err(api("flags argument to redis.register_function must be a table representing function flags"))
                    }
                    (other, _) => {
                        return Err(api(&format!(
                            "unknown argument given to register_function: {other}"
                        )))
                    }
                }
            }
            let Some(name) = name else {
                return Err(api(
                    "redis.register_function must get a function name argument",
                ));
            };
            let Some(func) = func else {
                return Err(api("redis.register_function must get a callback argument"));
            };
            (name, func, flags, desc)
        }
        (2, _) => {
            let mut it = a.into_iter();
            let name = match it.next() {
                Some(Value::String(s)) => s.to_string_lossy(),
                _ => {
                    return Err(api(
                        "first argument to redis.register_function must be a string",
                    ))
                }
            };
            let func = match it.next() {
                Some(Value::Function(f)) => f,
                _ => {
                    return Err(api(
                        "second argument to redis.register_function must be a function",
                    ))
                }
            };
            (name, func, 0, None)
        }
        _ => return Err(api("wrong number of arguments to redis.register_function")),
    };
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(api(
            "Function names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    let mut v = out.borrow_mut();
    if v.iter().any(|(n, _)| *n == name) {
        return Err(api("Function already exists in the library"));
    }
    v.push((
        name,
        FunctionInfo {
            func,
            flags,
            description,
        },
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_gauge_adds_and_removes_its_share() {
        let total: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
        let a = HeapGauge::new(total);
        a.set(100);
        a.set(40);
        assert_eq!(total.load(Relaxed), 40);
        {
            let b = HeapGauge::new(total);
            b.set(10);
            assert_eq!(total.load(Relaxed), 50);
        }
        assert_eq!(total.load(Relaxed), 40);
        drop(a);
        assert_eq!(total.load(Relaxed), 0);
    }

    #[test]
    fn a_scripts_big_garbage_is_collected_after_it() {
        let e = Engine::new("@user_script");
        e.lua
            .load("local t = {} for i = 1, 3e6 do t[i] = i end")
            .exec()
            .unwrap();
        let grown = e.lua.used_memory() as u64;
        assert!(grown > FULL_GC_MIN, "{grown}");
        e.heap.after_run(&e.lua);
        let left = e.heap.reported.load(Relaxed);
        assert!(
            left < 4 << 20,
            "heap after the run: {left} bytes (was {grown})"
        );
        assert_eq!(left, e.lua.used_memory() as u64);
    }

    #[test]
    fn small_heaps_are_left_to_the_incremental_steps() {
        let e = Engine::new("@user_script");
        let f = e
            .compile(b"local t = {} for i = 1, 1000 do t[i] = i end")
            .unwrap();
        for _ in 0..GC_PERIOD - 1 {
            f.call::<()>(()).unwrap();
            e.heap.after_run(&e.lua);
        }
        assert_eq!(e.heap.floor.load(Relaxed), 0, "no full collection");
        assert_eq!(e.heap.runs.load(Relaxed), GC_PERIOD - 1);
        e.heap.after_run(&e.lua);
        assert_eq!(e.heap.runs.load(Relaxed), 0, "the step was taken");
    }
}
