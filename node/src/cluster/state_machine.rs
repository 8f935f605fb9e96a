//! [`ClusterStateMachine`]: one Raft group's slice of a node's keyspace.
//!
//! # Apply
//! A log entry's command is a RESP array of bulk strings, as a client sends it. [`run_at`]
//! decodes it and runs it through the command table as a client that never blocks, at the
//! leader's time (`Request::time_ns`) and drawing random choices from the leader's seed
//! (`Request::seed`, see [`CmdRng`]); the RESP2 reply bytes are the entry's response. The
//! same entry therefore gives the same keyspace on every replica: relative expiries become
//! deadlines from the leader's time, SPOP pops the same members, XADD `*` picks the same ID,
//! scripts see the leader's clock. Each entry runs on a fresh client in database 0, so no
//! connection state (SELECT, MULTI, CLIENT REPLY) leaks from one entry into another.
//!
//! Commands a group must not run are refused with an error reply (deterministic, so every
//! replica refuses alike): a key outside the group's slots, and writes with no key argument
//! that would reach every group's keys (SWAPDB, FUNCTION LOAD, ...). FLUSHALL and FLUSHDB
//! (with no option, ASYNC or SYNC) empty the group's own slots only. Scripts
//! (not flagged as writes) run on a client that carries the group's slots: a key they
//! touch outside them is refused inside the script, alike on every replica
//! ([`super::script_keys`]).
//!
//! # Snapshot
//! An RDB stream (storage's writer) of exactly the group's keys, every database, sorted by
//! database and key so replicas with the same data give the same bytes. Keys past their
//! deadline are kept (as in an AOF base): the log after the snapshot replays at its own
//! times. Installing one deletes the group's keys and loads the stream's; other groups'
//! keys are not touched, and a stream that does not decode changes nothing.
//!
//! # Format versions
//! The entry encoding above (RESP arrays, [`BATCH_MARKER`], [`TX_COMMAND`],
//! [`RESP3_COMMAND`], [`FCALL_COMMAND`], and the metadata commands of [`super::meta`]) is
//! version [`raft::ENTRY_FORMAT`] of a Raft entry: the raft crate carries the version in
//! each request and refuses to apply a newer one (the group stops, logged). A change to
//! what an entry means that a node of this release would apply differently bumps it.
//! Likewise a group snapshot (this RDB stream, or the metadata group's `EMBER-META`
//! array) is version [`raft::SNAPSHOT_FORMAT`] of a Raft snapshot; the RDB stream also
//! carries storage's `ember-fmt` field, checked by [`rdb::load`] on install.
//!
//! # Requirements on the node
//! `appendonly no` (the Raft log is the durability; the AOF would stamp commands with the
//! local clock), and no background expiry or eviction deciding differently per replica on
//! the group's keys (a replica's active expiry only removes keys that are already dead at
//! any later leader time).

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::sync::Arc;

use bytes::Bytes;
use raft::GroupId;
use raft::Request;
use raft::Response;
use resp::{Args, Limits, Protocol, ReplyWriter, RequestKind, RequestParser};
use storage::rdb::{self, Loaded, Writer};

use crate::client::{BlockMode, Client, ClientInfo};
use crate::ctx::{CmdRng, Ctx};
use crate::error::CmdError;
use crate::exec::run_command;
use crate::registry::{flags, ClusterRoute};
use crate::server::Server;

/// One key as a group snapshot holds it: the key and its RDB encoding (expiry, tags,
/// type, key, value).
type EncodedKey = (Vec<u8>, Vec<u8>);

/// One Raft group's state machine over a node's keyspace: the keys whose hash slot is in
/// `slots`.
pub struct ClusterStateMachine {
    /// The node whose keyspace holds the group's keys (shared with its other groups).
    server: Arc<Server>,
    /// The group this state machine serves.
    group: GroupId,
    /// The group's hash slots.
    slots: RangeInclusive<u16>,
    /// The log index of the last applied entry (0 before any).
    last_index: u64,
}

impl ClusterStateMachine {
    /// The state machine of data group `group` out of `groups` on `server`; `None` for the
    /// metadata group or a group past `groups`.
    pub fn new(server: Arc<Server>, group: GroupId, groups: u32) -> Option<Self> {
        let slots = raft::group_slots(group, groups)?;
        Some(ClusterStateMachine {
            server,
            group,
            slots,
            last_index: 0,
        })
    }

    /// The group's id.
    pub fn group(&self) -> GroupId {
        self.group
    }

    /// The group's hash slots.
    pub fn slots(&self) -> RangeInclusive<u16> {
        self.slots.clone()
    }

    /// The node this group's keys live in.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }

    /// The log index of the last applied entry.
    pub fn last_index(&self) -> u64 {
        self.last_index
    }

    /// True when `key` hashes to one of the group's slots.
    pub fn owns(&self, key: &[u8]) -> bool {
        self.slots.contains(&raft::key_slot(key))
    }

    /// The group's keys of database `db`, sorted, and how many of them have a deadline.
    fn encoded_keys(&self, db: usize) -> (Vec<EncodedKey>, u64) {
        let ks = &self.server.keyspace;
        let mut keys = Vec::new();
        let mut volatile = 0;
        for shard in 0..ks.shard_count() {
            ks.with_shard(shard, |sh| {
                let t = sh.table_ref(db);
                // Time 0: every key, including those past their deadline (see the module doc).
                t.for_each_live(0, |k, e| {
                    if !self.owns(k) {
                        return;
                    }
                    let tags = t.tags_of(k);
                    let tags: Vec<&[u8]> = tags.iter().map(|t| &t[..]).collect();
                    let at = e.expire_at().unwrap_or(0);
                    volatile += u64::from(at != 0);
                    let mut buf = Vec::new();
                    rdb::encode_key(&mut buf, k, &e.value, at, &tags, false);
                    keys.push((k.to_vec(), buf));
                });
            });
        }
        keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        (keys, volatile)
    }

    /// Deletes every key of the group, in every database.
    pub fn clear(&self) {
        let ks = &self.server.keyspace;
        for db in 0..ks.db_count() {
            for shard in 0..ks.shard_count() {
                ks.with_table(shard, db, |t| {
                    let mut mine = Vec::new();
                    t.for_each_live(0, |k, _| {
                        if self.owns(k) {
                            mine.push(k.to_vec());
                        }
                    });
                    for k in mine {
                        t.remove(ks.hash(&k), &k, 0);
                    }
                });
            }
        }
    }

    /// Why `args` may not run in this group, if it may not.
    fn refusal(&self, args: Args<'_>) -> Option<CmdError> {
        let reg = &self.server.registry;
        let idx = crate::conn::resolve(&self.server, args).ok()?;
        let entry = reg.entry(idx);
        let spec = entry.spec;
        if !spec.arity_ok(args.len()) {
            return None;
        }
        let keys = spec.key_positions(&args);
        if let Some(&p) = keys.iter().find(|&&p| !self.owns(args.arg(p))) {
            let key = args.arg(p);
            return Some(CmdError::err(format!(
                "key '{}' (slot {}) is not in group {} (slots {}-{})",
                String::from_utf8_lossy(&key[..key.len().min(128)]),
                raft::key_slot(key),
                self.group,
                self.slots.start(),
                self.slots.end()
            )));
        }
        if keys.is_empty() && spec.has(flags::WRITE) {
            return Some(CmdError::err(format!(
                "'{}' writes no key of its own and can't run in one group",
                entry.full_name
            )));
        }
        None
    }
}

/// Encodes `args` as the RESP array of bulk strings a client would send (the
/// `Request::command` of a proposed write).
pub fn encode_command<A: AsRef<[u8]>>(args: &[A]) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    Bytes::from(out)
}

/// Decodes `command` (exactly one RESP array of bulk strings) into its argument spans.
pub(crate) fn decode(command: &[u8], spans: &mut Vec<(usize, usize)>) -> Result<(), String> {
    let mut parser = RequestParser::new(Limits::default());
    match parser.parse(command, spans) {
        Ok(Some((used, RequestKind::Multibulk))) if used == command.len() && !spans.is_empty() => {
            Ok(())
        }
        Ok(Some((_, RequestKind::Multibulk))) if spans.is_empty() => {
            Err("empty command".to_string())
        }
        Ok(Some((_, RequestKind::Multibulk))) => {
            Err("trailing bytes after the command".to_string())
        }
        Ok(Some((_, RequestKind::Inline))) => Err("not a RESP array".to_string()),
        Ok(None) => Err("incomplete command".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs the RESP-encoded `command` on `server` as a replicated write runs it: at time
/// `now` (Unix ns), random choices drawn from `seed`, on a fresh client in database 0 that
/// never blocks. Returns the RESP2 reply bytes; a command that does not decode answers
/// `-ERR Protocol error: ...`, never a panic.
pub fn run_at(server: &Arc<Server>, command: &[u8], now: u64, seed: u64) -> Bytes {
    run_as(server, command, now, seed, Protocol::Resp2, None)
}

/// [`run_at`] answering in `protocol`, for the data group of slots `group` (if any).
fn run_as(
    server: &Arc<Server>,
    command: &[u8],
    now: u64,
    seed: u64,
    protocol: Protocol,
    group: Option<RangeInclusive<u16>>,
) -> Bytes {
    let mut spans = Vec::new();
    let mut out = ReplyWriter::new(protocol);
    match decode(command, &mut spans) {
        Ok(()) => execute(
            server,
            Args::new(command, &spans),
            now,
            seed,
            &mut out,
            group,
        ),
        Err(why) => out.error(&format!("ERR Protocol error: {why}")),
    }
    Bytes::copy_from_slice(out.buffer())
}

/// Resolves, checks and runs `args` into `out`, as a connection does (errors replace
/// whatever the command wrote), as the client of data group `group` (its slots).
fn execute(
    server: &Arc<Server>,
    args: Args<'_>,
    now: u64,
    seed: u64,
    out: &mut ReplyWriter,
    group: Option<RangeInclusive<u16>>,
) {
    execute_on(server, &mut apply_client(group), args, now, seed, out, None);
}

/// A fresh client that never blocks, in database 0: what an entry runs as. `group`: the
/// slots of the data group whose entry it applies (the keys its scripts may touch).
fn apply_client(group: Option<RangeInclusive<u16>>) -> Client {
    let addr: SocketAddr = ([0, 0, 0, 0], 0).into();
    let mut client = Client::new(Arc::new(ClientInfo::new(0, addr, addr, -1)), true);
    client.block_mode = BlockMode::NoBlock;
    client.cluster.applying = group;
    client.cluster.from_log = true;
    client
}

/// [`execute`] as `client`.
///
/// With `functions`, the command is an FCALL or FCALL_RO of a function of that store
/// (a replicated FCALL, [`FCALL_COMMAND`]).
fn execute_on(
    server: &Arc<Server>,
    client: &mut Client,
    args: Args<'_>,
    now: u64,
    seed: u64,
    out: &mut ReplyWriter,
    functions: Option<&crate::script::FunctionStore>,
) {
    let reg = &server.registry;
    let stats = &server.workers[0];
    let result = match crate::conn::resolve(server, args) {
        Err(e) => Err(e),
        Ok(idx) if !reg.entry(idx).spec.arity_ok(args.len()) => {
            Err(CmdError::Arity(reg.entry(idx).full_name.clone()))
        }
        Ok(idx) => {
            // EXEC and scripts take every worker's gate themselves; others hold one, so
            // they never run inside someone's EXEC.
            let exclusive = reg.entry(idx).spec.has(flags::EXCLUSIVE);
            let _gate = (!exclusive).then(|| stats.gate.lock());
            let mut ctx = Ctx {
                server,
                client: &mut *client,
                out: &mut *out,
                stats,
                now,
                rng: CmdRng::seeded(seed),
                park: None,
            };
            match functions {
                Some(store) => {
                    let ro = reg.entry(idx).spec.has(flags::READONLY);
                    crate::cmd::scripting::fcall_in(&mut ctx, args, ro, store)
                }
                None => run_command(&mut ctx, idx, args),
            }
        }
    };
    if let Err(e) = result {
        out.clear();
        out.error(&e.to_string());
    }
    client.block_request = None;
    // The clients blocked on this node's keyspace are XREAD ... BLOCK reads (pops and
    // XREADGROUP are writes that wait in the router and propose themselves again; see
    // `cluster::block`): serve them the entries this write added.
    if !client.ready_keys.is_empty() {
        let _gate = stats.gate.lock();
        server.blocking.serve(server, stats, &mut client.ready_keys);
    }
    client.ready_keys.clear();
}

impl ClusterStateMachine {
    /// Applies one command (a RESP array) at `time_ns` with `seed`; the RESP2 reply, or
    /// the RESP3 reply of a command wrapped by [`encode_resp3`].
    fn apply_one(&mut self, command: &[u8], time_ns: u64, seed: u64) -> Bytes {
        let mut spans = Vec::new();
        if decode(command, &mut spans).is_ok() {
            let args = Args::new(command, &spans);
            if args.len() == 2 && args.arg(0) == RESP3_COMMAND {
                return self.apply_as(args.arg(1), time_ns, seed, Protocol::Resp3);
            }
        }
        self.apply_as(command, time_ns, seed, Protocol::Resp2)
    }

    /// How cluster mode routes the command `args` names (None: no such command).
    fn route_of(&self, args: Args<'_>) -> Option<ClusterRoute> {
        let reg = &self.server.registry;
        reg.resolve(&args).ok().map(|idx| reg.entry(idx).spec.route)
    }

    /// [`Self::apply_one`] of an unwrapped command, answering in `protocol`.
    fn apply_as(&mut self, command: &[u8], time_ns: u64, seed: u64, protocol: Protocol) -> Bytes {
        let mut spans = Vec::new();
        if decode(command, &mut spans).is_ok() {
            let args = Args::new(command, &spans);
            // FLUSHALL / FLUSHDB in a group empty the group's slots (cluster mode uses
            // database 0 only).
            if self.route_of(args) == Some(ClusterRoute::LedGroups)
                && (args.len() == 1
                    || (args.len() == 2
                        && (args.arg(1).eq_ignore_ascii_case(b"async")
                            || args.arg(1).eq_ignore_ascii_case(b"sync"))))
            {
                self.clear();
                return Bytes::from_static(b"+OK\r\n");
            }
            if args.arg(0) == TX_COMMAND {
                return self.apply_tx(args, time_ns, seed, protocol);
            }
            if args.arg(0) == FCALL_COMMAND && args.len() >= 3 {
                return self.apply_fcall(command, &spans, time_ns, seed, protocol);
            }
            if let Some(e) = self.refusal(args) {
                let mut out = ReplyWriter::new(protocol);
                out.error(&e.to_string());
                return Bytes::copy_from_slice(out.buffer());
            }
        }
        run_as(
            &self.server,
            command,
            time_ns,
            seed,
            protocol,
            Some(self.slots()),
        )
    }

    /// Applies a replicated FCALL ([`FCALL_COMMAND`]): the function runs from its
    /// library's code as the entry carries it.
    fn apply_fcall(
        &mut self,
        command: &[u8],
        spans: &[(usize, usize)],
        time_ns: u64,
        seed: u64,
        protocol: Protocol,
    ) -> Bytes {
        let mut out = ReplyWriter::new(protocol);
        let code = Args::new(command, spans).arg(1);
        let call = Args::new(command, &spans[2..]);
        let is_fcall = self.route_of(call) == Some(ClusterRoute::NamedFunction);
        if !is_fcall {
            out.error("ERR Protocol error: a replicated FCALL entry holds no FCALL");
        } else if let Some(e) = self.refusal(call) {
            out.error(&e.to_string());
        } else {
            match self.server.scripting.library_store(code) {
                Ok(store) => {
                    let store = store.lock();
                    execute_on(
                        &self.server,
                        &mut apply_client(Some(self.slots())),
                        call,
                        time_ns,
                        seed,
                        &mut out,
                        Some(&store),
                    );
                }
                Err(e) => out.error(&e.to_string()),
            }
        }
        Bytes::copy_from_slice(out.buffer())
    }

    /// Applies a transaction entry ([`encode_tx`]): its commands queued on one client and
    /// run by EXEC, atomically; the reply is EXEC's. A command that does not decode, is
    /// unknown, has a bad arity or a key outside the group aborts the whole transaction
    /// (the same way on every replica).
    fn apply_tx(&mut self, args: Args<'_>, time_ns: u64, seed: u64, protocol: Protocol) -> Bytes {
        let mut out = ReplyWriter::new(protocol);
        let mut queued = Vec::with_capacity(args.len().saturating_sub(1));
        for i in 1..args.len() {
            let command = args.arg(i);
            let mut spans = Vec::new();
            if let Err(why) = decode(command, &mut spans) {
                out.error(&format!(
                    "EXECABORT Transaction discarded: command {i}: {why}"
                ));
                return Bytes::copy_from_slice(out.buffer());
            }
            let cmd = Args::new(command, &spans);
            let reg = &self.server.registry;
            let checked = crate::conn::resolve(&self.server, cmd).and_then(|idx| {
                if !reg.entry(idx).spec.arity_ok(cmd.len()) {
                    return Err(CmdError::Arity(reg.entry(idx).full_name.clone()));
                }
                if reg.entry(idx).spec.has(flags::NO_MULTI) {
                    return Err(CmdError::err("Command not allowed inside a transaction"));
                }
                match self.refusal(cmd) {
                    Some(e) => Err(e),
                    None => Ok(idx),
                }
            });
            match checked {
                Ok(idx) => queued.push(crate::client::Queued {
                    cmd_index: idx,
                    args: resp::OwnedArgs::from_args(cmd),
                }),
                Err(e) => {
                    out.error(&format!("EXECABORT Transaction discarded: {e}"));
                    return Bytes::copy_from_slice(out.buffer());
                }
            }
        }
        let mut client = apply_client(Some(self.slots()));
        client.multi = Some(crate::client::Multi {
            queued,
            dirty: false,
        });
        // Run by the command that runs a client's queued transaction (EXEC).
        let reg = &self.server.registry;
        let Some(exec) = reg.find(|spec| spec.has(flags::RUNS_QUEUED)) else {
            out.error("ERR no transaction command");
            return Bytes::copy_from_slice(out.buffer());
        };
        let exec = encode_command(&[reg.entry(exec).full_name.as_bytes()]);
        let mut spans = Vec::new();
        if decode(&exec, &mut spans).is_ok() {
            execute_on(
                &self.server,
                &mut client,
                Args::new(&exec, &spans),
                time_ns,
                seed,
                &mut out,
                None,
            );
        }
        Bytes::copy_from_slice(out.buffer())
    }
}

/// The first argument of an entry whose command (the second and last argument) answers
/// in RESP3, for a client that said HELLO 3: the keyspace change is the same either way.
pub const RESP3_COMMAND: &[u8] = b"EMBER.RESP3";

/// `command` wrapped so that it answers in RESP3 ([`RESP3_COMMAND`]).
pub fn encode_resp3(command: &[u8]) -> Bytes {
    encode_command(&[RESP3_COMMAND, command])
}

/// The first argument of a transaction entry: not a command a client can send (the router
/// resolves names before it proposes anything).
pub const TX_COMMAND: &[u8] = b"EMBER.TX";

/// A transaction entry: one RESP array, [`TX_COMMAND`] and then each queued command's own
/// RESP array as one argument. Being an array, it can sit in a batch entry like any write.
pub fn encode_tx(commands: &[Bytes]) -> Bytes {
    let mut args: Vec<&[u8]> = Vec::with_capacity(commands.len() + 1);
    args.push(TX_COMMAND);
    args.extend(commands.iter().map(|c| c.as_ref()));
    encode_command(&args)
}

/// The first argument of a replicated FCALL: then the code of the function's library (as
/// the leader had it loaded), then the FCALL or FCALL_RO command. Every replica runs the
/// function from that code, so a replica whose FUNCTION LOAD state lags or differs
/// still applies the same write.
pub const FCALL_COMMAND: &[u8] = b"EMBER.FCALL";

/// A replicated FCALL entry ([`FCALL_COMMAND`]) of `call` (FCALL's arguments) with
/// library `code`.
pub fn encode_fcall(code: &[u8], call: &[&[u8]]) -> Bytes {
    let mut args: Vec<&[u8]> = Vec::with_capacity(call.len() + 2);
    args.push(FCALL_COMMAND);
    args.push(code);
    args.extend_from_slice(call);
    encode_command(&args)
}

/// Marks a log entry that holds several commands (one connection's pipelined writes to
/// one group, proposed together): the marker, then the commands' RESP arrays back to back.
/// Its response is every reply as a 4-byte little-endian length and the bytes, in order.
pub const BATCH_MARKER: &[u8] = b"EMBER-BATCH\n";

/// The seed of the `i`-th command of a batch entry proposed with `seed`.
fn batch_seed(seed: u64, i: u64) -> u64 {
    seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A batch entry's command: [`BATCH_MARKER`] and the commands.
pub fn encode_batch(commands: &[Bytes]) -> Bytes {
    let len = BATCH_MARKER.len() + commands.iter().map(|c| c.len()).sum::<usize>();
    let mut buf = Vec::with_capacity(len);
    buf.extend_from_slice(BATCH_MARKER);
    for c in commands {
        buf.extend_from_slice(c);
    }
    buf.into()
}

/// Splits a batch entry's response into `n` replies; a reply the response lacks (the
/// batch stopped at a command that did not decode) is a protocol error.
pub fn split_batch_reply(response: &[u8], n: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    let mut rest = response;
    while out.len() < n && rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let Some(reply) = rest.get(4..4 + len) else {
            break;
        };
        out.push(reply.to_vec());
        rest = &rest[4 + len..];
    }
    while out.len() < n {
        out.push(b"-ERR Protocol error: the batch entry stopped before this command\r\n".to_vec());
    }
    out
}

impl raft::StateMachine for ClusterStateMachine {
    fn apply(&mut self, index: u64, request: &Request) -> Response {
        self.last_index = index;
        let Some(mut rest) = request.command.strip_prefix(BATCH_MARKER) else {
            return Response(self.apply_one(&request.command, request.time_ns, request.seed));
        };
        let mut out = Vec::new();
        let mut i = 0u64;
        while !rest.is_empty() {
            let mut spans = Vec::new();
            let mut parser = RequestParser::new(Limits::default());
            let used = match parser.parse(rest, &mut spans) {
                Ok(Some((used, RequestKind::Multibulk))) if !spans.is_empty() => used,
                _ => break,
            };
            let reply = self.apply_one(&rest[..used], request.time_ns, batch_seed(request.seed, i));
            let Ok(len) = u32::try_from(reply.len()) else {
                break;
            };
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&reply);
            rest = &rest[used..];
            i += 1;
        }
        Response(out.into())
    }

    fn snapshot(&self) -> Vec<u8> {
        let encode = || -> std::io::Result<Vec<u8>> {
            let mut w = Writer::new(Vec::new(), false)?;
            w.aux(b"ember-group", self.group.0.to_string().as_bytes())?;
            for db in 0..self.server.keyspace.db_count() {
                let (keys, volatile) = self.encoded_keys(db);
                if keys.is_empty() {
                    continue;
                }
                w.select_db(db, keys.len() as u64, volatile)?;
                for (_, bytes) in keys {
                    w.write_raw(&bytes)?;
                }
            }
            w.finish()
        };
        // Writing into a Vec cannot fail.
        encode().unwrap_or_default()
    }

    fn install(&mut self, data: &[u8]) -> Result<(), raft::Error> {
        let invalid = |msg: String| raft::Error::InvalidSnapshot(msg);
        let dbs = self.server.keyspace.db_count();
        let mut items = Vec::new();
        rdb::load(data, |item| {
            items.push(item);
            Ok(())
        })
        .map_err(|e| invalid(e.to_string()))?;
        for item in &items {
            match item {
                Loaded::Key { db, key, .. } if *db >= dbs => {
                    return Err(invalid(format!(
                        "key '{}' in database {db} (databases is {dbs})",
                        String::from_utf8_lossy(key)
                    )));
                }
                Loaded::Key { key, .. } if !self.owns(key) => {
                    return Err(invalid(format!(
                        "key '{}' is not in group {}",
                        String::from_utf8_lossy(key),
                        self.group
                    )));
                }
                Loaded::Key { .. } => {}
                Loaded::Function(_) => {
                    return Err(invalid("a group snapshot holds no functions".into()));
                }
            }
        }
        self.clear();
        let ks = &self.server.keyspace;
        for item in items {
            if let Loaded::Key {
                db,
                key,
                value,
                expire_at_ns,
                tags,
            } = item
            {
                crate::snapshot::insert_loaded(ks, db, &key, value, expire_at_ns, tags, 0);
            }
        }
        Ok(())
    }
}
