//! The static command table: one [`CommandSpec`] per command (and subcommand), declared in
//! its family file under `cmd/`, collected here into a [`Registry`] used for dispatch,
//! arity checks, COMMAND, key extraction and per-command statistics.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use resp::Args;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::server::Server;

/// A command handler: parses `args` (args[0] is the command name), does the work and
/// writes the reply through `ctx.out`.
pub type Handler = fn(&mut Ctx<'_>, Args<'_>) -> CmdResult;

/// Command flags (the names COMMAND INFO reports).
pub mod flags {
    /// May modify the keyspace.
    pub const WRITE: u32 = 1;
    /// Reads only.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory.
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while loading.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 8;
    /// O(1) or O(log n) and never blocks.
    pub const FAST: u32 = 1 << 9;
    /// Allowed before authentication.
    pub const NO_AUTH: u32 = 1 << 10;
    /// May be replicated.
    pub const MAY_REPLICATE: u32 = 1 << 11;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 12;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 13;
    /// Not shown in SLOWLOG.
    pub const SKIP_SLOWLOG: u32 = 1 << 14;
    /// Not shown in MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 15;
    /// Keys are found by a command-specific rule.
    pub const MOVABLE_KEYS: u32 = 1 << 16;
    /// Internal: not queued inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const TX_CONTROL: u32 = 1 << 17;
    /// Internal: runs alone, holding every worker's gate (EXEC, scripts).
    pub const EXCLUSIVE: u32 = 1 << 18;
    /// Internal: allowed in RESP2 subscribed mode ((P|S)(UN)SUBSCRIBE, PING, QUIT, RESET).
    pub const SUB_OK: u32 = 1 << 19;
    /// Internal: may leave its key's shard locked for the next command of a pipelined
    /// batch (`storage::Parked`). Only for single-key commands whose handler locks through
    /// `Ctx::lock` alone, never through the keyspace directly.
    pub const BATCH_LOCK: u32 = 1 << 20;
    /// Internal: reads its key's value bytes first thing (GET and kin), so a pipelined
    /// batch of it prefetches them a command or two ahead (`Keyspace::prefetch_value`).
    /// Not for commands that only test or replace a value: bytes nobody reads cost more
    /// to load than the lookup saves (SETNX measured 24% more CPU per command).
    pub const PREFETCH_VALUE: u32 = 1 << 21;
    /// Internal: a write of server state outside the keyspace (the function libraries):
    /// an AOF rewrite keeps it whatever part of the keyspace it has walked.
    pub const OUTSIDE_KEYSPACE: u32 = 1 << 22;
    /// Internal: runs the client's queued transaction (EXEC): whether it writes or may
    /// grow memory is decided by the commands queued.
    pub const RUNS_QUEUED: u32 = 1 << 23;
    /// Internal: accepted while a transaction is being queued even when memory is full and
    /// nothing can be evicted (EXEC, DISCARD, QUIT, RESET, as Redis's processCommand).
    pub const OOM_OK_IN_MULTI: u32 = 1 << 24;

    /// (flag, name) pairs in COMMAND INFO order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// The command group (COMMAND DOCS `group`), which also gives the data-type ACL category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// Generic keyspace commands.
    Generic,
    /// Strings.
    String,
    /// Connection management.
    Connection,
    /// Server management.
    Server,
    /// Lists.
    List,
    /// Hashes.
    Hash,
    /// Sets.
    Set,
    /// Sorted sets.
    SortedSet,
    /// Bitmaps (bit operations on strings).
    Bitmap,
    /// HyperLogLog.
    HyperLogLog,
    /// Geospatial indexes (sorted sets of geohashes).
    Geo,
    /// Streams.
    Stream,
    /// Transactions.
    Transactions,
    /// Pub/sub.
    PubSub,
    /// Scripting and functions.
    Scripting,
    /// Redis Cluster (CLUSTER, READONLY, READWRITE, ASKING).
    Cluster,
}

impl Group {
    /// The group name COMMAND DOCS reports.
    pub fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::String => "string",
            Group::Connection => "connection",
            Group::Server => "server",
            Group::List => "list",
            Group::Hash => "hash",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Bitmap => "bitmap",
            Group::HyperLogLog => "hyperloglog",
            Group::Geo => "geo",
            Group::Stream => "stream",
            Group::Transactions => "transactions",
            Group::PubSub => "pubsub",
            Group::Cluster => "cluster",
            Group::Scripting => "scripting",
        }
    }
}

/// Static description of one command or subcommand.
#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// Lower-case name (for a subcommand, the part after the container's name).
    pub name: &'static str,
    /// Redis arity: positive = exact argc, negative = at least -arity.
    pub arity: i32,
    /// Bitwise OR of [`flags`].
    pub flags: u32,
    /// Position of the first key (0: none).
    pub first_key: i32,
    /// Position of the last key (negative counts from the end).
    pub last_key: i32,
    /// Step between keys.
    pub key_step: i32,
    /// Position of a "numkeys" argument followed by that many keys (LMPOP, ZUNION ...);
    /// 0 when the command has none. These keys come after any fixed ones.
    pub numkeys_at: i32,
    /// Group / data-type category.
    pub group: Group,
    /// One-line summary (COMMAND DOCS).
    pub summary: &'static str,
    /// Redis version that introduced the command.
    pub since: &'static str,
    /// The handler; `None` for a container of subcommands.
    pub handler: Option<Handler>,
    /// Subcommands, for containers such as CLIENT and CONFIG.
    pub subcommands: &'static [CommandSpec],
    /// Extra key positions found by a command-specific rule (SORT ... STORE dst).
    pub extra_keys: Option<fn(&resp::Args<'_>) -> Vec<usize>>,
    /// Data-type ACL categories replacing the group's (SORT: set, sortedset, list).
    pub categories: Option<&'static [&'static str]>,
    /// For a command whose flags do not say whether a call writes (scripts and functions:
    /// their shebang or library flags do): whether this call may write (CLIENT PAUSE
    /// WRITE, cluster routing). None: `WRITE` or `MAY_REPLICATE` decide.
    pub may_write: Option<fn(&Server, Args<'_>) -> bool>,
    /// What the command does when it arrives while a script or function is busy on its
    /// worker (see [`crate::busy`]); None: it waits for the script, or gets `-BUSY`
    /// unless ALLOW_BUSY.
    pub on_busy: Option<fn(&Server, Args<'_>) -> BusyAnswer>,
    /// How cluster mode routes the command ([`crate::cluster::route`]).
    pub route: ClusterRoute,
    /// Where a blocking command's timeout is, for cluster mode's blocking writes.
    pub timeout: Timeout,
    /// What cluster mode proposes for a write not proposed as sent (EVALSHA: the EVAL of
    /// its body; FCALL: the call with its library's code). None: the arguments.
    pub propose_as: Option<ProposeAs>,
}

/// A command's [`CommandSpec::propose_as`] hook.
pub type ProposeAs = fn(&Server, Args<'_>) -> Result<Proposal, crate::error::CmdError>;

/// How cluster mode routes a command ([`CommandSpec::route`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterRoute {
    /// By its keys (the default): a write is proposed to the group of their slot, a read
    /// is served by that group's leader; a command without keys runs here.
    Keys,
    /// As `Keys`, after waiting a moment for the function its first argument names to be
    /// loaded on this node (FUNCTION LOAD reaches the other nodes a heartbeat later).
    NamedFunction,
    /// Runs on this node (CLUSTER subcommands).
    Here,
    /// Proposed to the metadata group and applied by every node (CLUSTER JOIN, FUNCTION
    /// LOAD ...).
    Meta,
    /// Proposed to every group this node leads, answered once all applied it (FLUSHALL).
    LedGroups,
    /// Only database 0 exists (SELECT).
    DbZeroOnly,
    /// Starts a cluster-wide watch of its keys with their group's leader (WATCH).
    Watch,
    /// Ends the connection's cluster watch, then runs here (UNWATCH, DISCARD, RESET).
    EndWatch,
    /// Proposes the queued transaction as one entry (EXEC).
    Transaction,
}

/// Where a blocking command's timeout argument is ([`CommandSpec::timeout`]).
#[derive(Clone, Copy)]
pub enum Timeout {
    /// Not a blocking command.
    None,
    /// The last argument, in seconds (BLPOP, BRPOPLPUSH ...).
    LastSecs,
    /// Argument `n`, in seconds (BLMPOP, BZMPOP).
    ArgSecs(usize),
    /// A `BLOCK <ms>` option (XREAD, XREADGROUP): the function gives its position (None
    /// when the call has none, and does not block).
    MsOption(fn(Args<'_>) -> Option<usize>),
}

/// What cluster mode proposes for a write ([`CommandSpec::propose_as`]).
pub enum Proposal {
    /// These arguments instead of the client's.
    Command(Vec<Vec<u8>>),
    /// The client's arguments with the code of the library of the function they call, so
    /// every replica runs the function from the same code.
    WithLibrary(Vec<u8>),
}

/// What a command arriving beside a busy script asks for ([`CommandSpec::on_busy`]).
pub enum BusyAnswer {
    /// Answered at once with this result.
    Reply(CmdResult),
    /// Refused with `-BUSY`.
    Refuse,
    /// Answered with FUNCTION STATS of the running script.
    Stats,
    /// The server shuts down without saving (SHUTDOWN NOSAVE).
    Shutdown,
    /// Left for after the script, as any other command.
    Wait,
    /// A transaction control command (MULTI, EXEC, DISCARD, WATCH): its answer given
    /// whether the connection is in MULTI and the `-BUSY` error a refused command gets.
    Transaction(fn(bool, CmdError) -> TxAnswer),
}

/// What a transaction control command does beside a busy script ([`BusyAnswer::Transaction`]).
pub enum TxAnswer {
    /// Answered now with this result, changing the connection's transaction so.
    Reply(CmdResult, TxChange),
    /// Left for after the script.
    Wait,
}

/// How a command answered beside a busy script changes its connection's transaction; the
/// connection applies it when it runs again ([`crate::client::ClientInfo::busy_tx`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TxChange {
    /// No change.
    Keep,
    /// A transaction starts (MULTI).
    Open,
    /// The transaction ends and the watched keys are forgotten (DISCARD, an aborted EXEC).
    Close,
}

impl CommandSpec {
    /// A command with a handler.
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: u32,
        keys: (i32, i32, i32),
        group: Group,
        handler: Handler,
    ) -> Self {
        CommandSpec {
            name,
            arity,
            flags,
            first_key: keys.0,
            last_key: keys.1,
            key_step: keys.2,
            numkeys_at: 0,
            group,
            summary: "",
            since: "1.0.0",
            handler: Some(handler),
            subcommands: &[],
            extra_keys: None,
            categories: None,
            may_write: None,
            on_busy: None,
            route: ClusterRoute::Keys,
            timeout: Timeout::None,
            propose_as: None,
        }
    }

    /// A container whose second argument names a subcommand.
    pub const fn container(
        name: &'static str,
        group: Group,
        subcommands: &'static [CommandSpec],
    ) -> Self {
        CommandSpec {
            name,
            arity: -2,
            flags: 0,
            first_key: 0,
            last_key: 0,
            key_step: 0,
            numkeys_at: 0,
            group,
            summary: "",
            since: "1.0.0",
            handler: None,
            subcommands,
            extra_keys: None,
            categories: None,
            may_write: None,
            on_busy: None,
            route: ClusterRoute::Keys,
            timeout: Timeout::None,
            propose_as: None,
        }
    }

    /// Adds COMMAND DOCS text.
    pub const fn doc(mut self, summary: &'static str, since: &'static str) -> Self {
        self.summary = summary;
        self.since = since;
        self
    }

    /// Declares a "numkeys" argument at `pos`, followed by that many keys.
    pub const fn numkeys(mut self, pos: i32) -> Self {
        self.numkeys_at = pos;
        self
    }

    /// Adds a command-specific key finder.
    pub const fn keys_by(mut self, f: fn(&resp::Args<'_>) -> Vec<usize>) -> Self {
        self.extra_keys = Some(f);
        self
    }

    /// Replaces the data-type ACL categories of the group (`dangerous` may be included).
    pub const fn categories(mut self, c: &'static [&'static str]) -> Self {
        self.categories = Some(c);
        self
    }

    /// Declares how a call decides whether it may write ([`CommandSpec::may_write`]).
    pub const fn writes_if(mut self, f: fn(&Server, Args<'_>) -> bool) -> Self {
        self.may_write = Some(f);
        self
    }

    /// Declares what the command does beside a busy script ([`CommandSpec::on_busy`]).
    pub const fn when_busy(mut self, f: fn(&Server, Args<'_>) -> BusyAnswer) -> Self {
        self.on_busy = Some(f);
        self
    }

    /// Declares how cluster mode routes the command ([`CommandSpec::route`]).
    pub const fn routed(mut self, r: ClusterRoute) -> Self {
        self.route = r;
        self
    }

    /// Declares where a blocking command's timeout is ([`CommandSpec::timeout`]).
    pub const fn timeout_at(mut self, t: Timeout) -> Self {
        self.timeout = t;
        self
    }

    /// Declares what cluster mode proposes for it ([`CommandSpec::propose_as`]).
    pub const fn proposed_as(mut self, f: ProposeAs) -> Self {
        self.propose_as = Some(f);
        self
    }

    /// True when the command has flag `f`.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// True when argc satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            argc == a as usize
        } else {
            argc >= a.unsigned_abs() as usize
        }
    }

    /// ACL categories (without `@`), derived from flags and group as Redis does.
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.has(flags::WRITE) {
            v.push("write");
        }
        if self.has(flags::READONLY) {
            v.push("read");
        }
        if self.has(flags::ADMIN) {
            v.push("admin");
            v.push("dangerous");
        }
        if self.has(flags::PUBSUB) {
            v.push("pubsub");
        }
        if self.has(flags::FAST) {
            v.push("fast");
        } else {
            v.push("slow");
        }
        if self.has(flags::BLOCKING) {
            v.push("blocking");
        }
        if let Some(c) = self.categories {
            v.extend_from_slice(c);
            return v;
        }
        match self.group {
            Group::Generic => v.push("keyspace"),
            Group::String => v.push("string"),
            Group::Connection => v.push("connection"),
            Group::Server => {}
            Group::List => v.push("list"),
            Group::Hash => v.push("hash"),
            Group::Set => v.push("set"),
            Group::SortedSet => v.push("sortedset"),
            Group::Bitmap => v.push("bitmap"),
            Group::HyperLogLog => v.push("hyperloglog"),
            Group::Geo => v.push("geo"),
            Group::Stream => v.push("stream"),
            Group::Transactions => v.push("transaction"),
            Group::PubSub => {}
            Group::Scripting => v.push("scripting"),
            Group::Cluster => {}
        }
        v
    }

    /// True when the command takes key arguments.
    pub fn has_keys(&self) -> bool {
        self.first_key > 0 || self.numkeys_at > 0 || self.extra_keys.is_some()
    }

    /// Positions of the key arguments in `args` (args[0] is the command name).
    pub fn key_positions(&self, args: &resp::Args<'_>) -> Vec<usize> {
        let argc = args.len();
        let mut v = Vec::new();
        if self.first_key > 0 && argc > 0 {
            let first = self.first_key as usize;
            let last = if self.last_key < 0 {
                argc.checked_sub(self.last_key.unsigned_abs() as usize)
            } else {
                Some(self.last_key as usize)
            };
            if let Some(last) = last {
                let step = self.key_step.max(1) as usize;
                v.extend((first..=last.min(argc - 1)).step_by(step));
            }
        }
        if self.numkeys_at > 0 {
            let at = self.numkeys_at as usize;
            let n = storage::value::parse_canonical_i64(args.arg(at))
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0);
            v.extend((at + 1..argc).take(n));
        }
        if let Some(f) = self.extra_keys {
            v.extend(f(args));
        }
        v
    }
}

/// Why [`Registry::resolve`] found nothing to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// No such command.
    Unknown,
    /// A container (entry index) named without a subcommand.
    MissingSubcommand(usize),
    /// A container (entry index) with an unknown subcommand.
    UnknownSubcommand(usize),
}

/// One registered command or subcommand.
pub struct Entry {
    /// Its static description.
    pub spec: &'static CommandSpec,
    /// `name` or `container|name`.
    pub full_name: String,
    /// Index of the container for a subcommand.
    pub parent: Option<usize>,
    subs: HashMap<Vec<u8>, usize, RandomState>,
}

/// Every command of this node, indexed for fast case-insensitive lookup.
pub struct Registry {
    entries: Vec<Entry>,
    by_name: NameIndex,
    top: Vec<usize>,
}

/// Open-addressing index of the top-level command names, looked up case-insensitively
/// without copying or lowercasing the name (every command pays for this lookup).
struct NameIndex {
    /// Entry index + 1 per slot; 0 is an empty slot. At most half full.
    slots: Box<[u32]>,
}

impl NameIndex {
    fn new() -> Self {
        NameIndex {
            slots: vec![0; 16].into_boxed_slice(),
        }
    }

    /// A hash of `name` that is the same for every ASCII case of it.
    #[inline]
    fn hash(name: &[u8]) -> usize {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = name.len() as u64;
        for &b in name {
            // Bit 5 set: the same for both cases of a letter (and a few other pairs of
            // bytes, which the comparison after the hash tells apart).
            h = (h ^ u64::from(b | 0x20)).wrapping_mul(K);
        }
        (h ^ (h >> 29)) as usize
    }

    /// Whether `name` is `stored` (lower case) in any ASCII case.
    #[inline]
    fn same(stored: &str, name: &[u8]) -> bool {
        let stored = stored.as_bytes();
        stored.len() == name.len()
            && stored
                .iter()
                .zip(name)
                .all(|(&s, &n)| s == n.to_ascii_lowercase())
    }

    /// The entry named `name` (any case), given how to read an entry's name.
    #[inline]
    fn get<'e>(&self, name: &[u8], name_of: impl Fn(usize) -> &'e str) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = Self::hash(name) & mask;
        loop {
            match self.slots[i] {
                0 => return None,
                s => {
                    let idx = s as usize - 1;
                    if Self::same(name_of(idx), name) {
                        return Some(idx);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Maps `name` to entry `idx`, replacing an entry of the same name.
    fn insert<'e>(&mut self, name: &[u8], idx: usize, name_of: impl Fn(usize) -> &'e str) {
        let used = self.slots.iter().filter(|&&s| s != 0).count();
        if (used + 1) * 2 > self.slots.len() {
            let bigger = vec![0; self.slots.len() * 2].into_boxed_slice();
            let old = std::mem::replace(&mut self.slots, bigger);
            for s in old.iter().filter(|&&s| s != 0) {
                let e = *s as usize - 1;
                self.place(name_of(e).as_bytes(), e, &name_of);
            }
        }
        self.place(name, idx, &name_of);
    }

    fn place<'e>(&mut self, name: &[u8], idx: usize, name_of: &impl Fn(usize) -> &'e str) {
        let mask = self.slots.len() - 1;
        let mut i = Self::hash(name) & mask;
        loop {
            let s = self.slots[i];
            if s == 0 || Self::same(name_of(s as usize - 1), name) {
                self.slots[i] = u32::try_from(idx + 1).expect("fewer than 2^32 commands");
                return;
            }
            i = (i + 1) & mask;
        }
    }
}

impl Registry {
    /// Builds the registry from family tables.
    pub fn new(families: &[&'static [CommandSpec]]) -> Self {
        let mut r = Registry {
            entries: Vec::new(),
            by_name: NameIndex::new(),
            top: Vec::new(),
        };
        for fam in families {
            for spec in fam.iter() {
                let idx = r.entries.len();
                r.entries.push(Entry {
                    spec,
                    full_name: spec.name.to_string(),
                    parent: None,
                    subs: HashMap::default(),
                });
                let entries = &r.entries;
                r.by_name
                    .insert(spec.name.as_bytes(), idx, |e| entries[e].spec.name);
                r.top.push(idx);
                for sub in spec.subcommands {
                    let sidx = r.entries.len();
                    r.entries.push(Entry {
                        spec: sub,
                        full_name: format!("{}|{}", spec.name, sub.name),
                        parent: Some(idx),
                        subs: HashMap::default(),
                    });
                    r.entries[idx]
                        .subs
                        .insert(sub.name.as_bytes().to_vec(), sidx);
                }
            }
        }
        r
    }

    /// Looks a top-level command up by name, case-insensitively.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        self.by_name.get(name, |e| self.entries[e].spec.name)
    }

    /// Looks a subcommand of container `parent` up by name.
    pub fn lookup_sub(&self, parent: usize, name: &[u8]) -> Option<usize> {
        with_lower(name, |n| self.entries[parent].subs.get(n).copied())
    }

    /// The command (or subcommand) `args` names, as Redis's `lookupCommand` finds it: a
    /// command with a handler runs itself unless it also has subcommands and one is named
    /// (COMMAND alone vs COMMAND INFO).
    pub fn resolve(&self, args: &resp::Args<'_>) -> Result<usize, Unresolved> {
        let idx = self.lookup(args.arg(0)).ok_or(Unresolved::Unknown)?;
        let spec = self.entries[idx].spec;
        if spec.handler.is_some() && (args.len() < 2 || spec.subcommands.is_empty()) {
            return Ok(idx);
        }
        if args.len() < 2 {
            return Err(Unresolved::MissingSubcommand(idx));
        }
        self.lookup_sub(idx, args.arg(1))
            .ok_or(Unresolved::UnknownSubcommand(idx))
    }

    /// The first command (or subcommand) whose spec satisfies `pred`: how a subsystem finds
    /// a command by what it declares, never by its name.
    pub fn find(&self, pred: impl Fn(&CommandSpec) -> bool) -> Option<usize> {
        self.entries.iter().position(|e| pred(e.spec))
    }

    /// The entry at `idx`.
    pub fn entry(&self, idx: usize) -> &Entry {
        &self.entries[idx]
    }

    /// Number of entries (commands and subcommands).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no command is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Indices of top-level commands.
    pub fn top_level(&self) -> &[usize] {
        &self.top
    }

    /// Indices of the subcommands of `idx`.
    pub fn subcommands(&self, idx: usize) -> Vec<usize> {
        let mut v: Vec<usize> = self.entries[idx].subs.values().copied().collect();
        v.sort_unstable();
        v
    }
}

fn with_lower<R>(name: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    let mut buf = [0u8; 32];
    if name.len() <= buf.len() {
        let b = &mut buf[..name.len()];
        b.copy_from_slice(name);
        b.make_ascii_lowercase();
        f(b)
    } else {
        f(&name.to_ascii_lowercase())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use resp::Args;

    /// Splits `line` on spaces into (data, spans) for building [`Args`] in tests.
    #[test]
    fn every_blocking_command_declares_its_timeout() {
        let reg = super::Registry::new(&crate::cmd::families());
        for i in 0..reg.len() {
            let e = reg.entry(i);
            if e.spec.has(super::flags::BLOCKING) {
                assert!(
                    !matches!(e.spec.timeout, super::Timeout::None),
                    "{} blocks but declares no timeout",
                    e.full_name
                );
            }
        }
    }

    #[test]
    fn lookup_any_case_and_only_exact_names() {
        let reg = super::Registry::new(&crate::cmd::families());
        let get = reg.lookup(b"get").expect("get");
        assert_eq!(reg.lookup(b"GET"), Some(get));
        assert_eq!(reg.lookup(b"gEt"), Some(get));
        assert_eq!(reg.entry(get).spec.name, "get");
        for bad in [&b"ge"[..], b"gett", b"g\xc5t", b"", b"get\0", b"GE\x14"] {
            assert_eq!(reg.lookup(bad), None, "{bad:?}");
        }
        for &idx in reg.top_level() {
            let name = reg.entry(idx).spec.name;
            assert_eq!(reg.lookup(name.as_bytes()), Some(idx), "{name}");
            assert_eq!(
                reg.lookup(name.to_ascii_uppercase().as_bytes()),
                Some(idx),
                "{name}"
            );
        }
    }

    pub(crate) fn split(line: &[u8]) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut spans = Vec::new();
        let mut start = 0;
        for (i, &c) in line.iter().enumerate() {
            if c == b' ' {
                spans.push((start, i));
                start = i + 1;
            }
        }
        spans.push((start, line.len()));
        (line.to_vec(), spans)
    }

    #[test]
    fn numkeys_key_positions() {
        let reg = super::Registry::new(&crate::cmd::families());
        let keys = |line: &[u8]| {
            let (data, spans) = split(line);
            let args = Args::new(&data, &spans);
            let idx = reg.lookup(args.arg(0)).expect("command");
            reg.entry(idx).spec.key_positions(&args)
        };
        assert_eq!(keys(b"ZUNIONSTORE dst 2 a b WEIGHTS 1 2"), vec![1, 3, 4]);
        assert_eq!(keys(b"ZUNION 3 a b c"), vec![2, 3, 4]);
        assert_eq!(keys(b"LMPOP 2 a b LEFT"), vec![2, 3]);
        assert_eq!(keys(b"SINTERCARD 5 a b"), vec![2, 3], "bounded by argc");
        assert_eq!(keys(b"ZUNION x a"), Vec::<usize>::new());
        assert_eq!(keys(b"MSET a 1 b 2"), vec![1, 3]);
    }
}
