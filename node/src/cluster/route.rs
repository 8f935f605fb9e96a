//! Routing a client's command in cluster mode: to the group of its keys' slot, proposed
//! there when it writes, read locally once leadership is proven.
//!
//! - All keys of a command must hash to one slot (`-CROSSSLOT`).
//! - A write goes to the slot's group leader: elsewhere the client gets `-MOVED slot
//!   ip:port` (`-CLUSTERDOWN` while the group has no leader). On the leader the command is
//!   proposed ([`raft::Request`] with the leader's time and a seed) and the reply is the
//!   applied entry's reply. Proposals do not wait for each other: a pipeline of writes is in
//!   flight together and openraft commits them in batches; replies are put back in order
//!   ([`drain`]) before anything else runs on the connection or the replies are written.
//! - A read runs on the leader once it has proven leadership: a quorum round (ReadIndex,
//!   one per batch and group) or, in lease mode, a lease taken from the last round. On a
//!   `READONLY` connection reads run on any replica (possibly stale, as in Redis).
//! - A proposal not answered within twice the node timeout gets `-TIMEOUT ... it may still
//!   apply`, not `-TRYAGAIN`: the entry may already be in the log, and clients retry
//!   TRYAGAIN on their own. Only openraft's ForwardToLeader (not appended, or truncated)
//!   becomes `-MOVED`.
//! - Scripts (EVAL, EVALSHA, FCALL and their `_RO` forms) go to the group of their
//!   declared keys like any command; one without keys runs locally, and inside it every
//!   key is non local ([`super::script_keys`]).
//! - Keyless commands run locally (PING, INFO, CLUSTER ...); keyless writes cannot be
//!   replicated by one group and are refused, except FLUSHALL/FLUSHDB, proposed to every
//!   group this node leads, and FUNCTION LOAD/DELETE/FLUSH/RESTORE, CLUSTER JOIN/FORGET,
//!   proposed to the metadata group (applied on every node).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use raft::{GroupId, Request};
use resp::{Args, ReplyWriter};

use super::node::{Cluster, ReadCheck};
use super::watch::{bucket, ClusterWatch, Touches};
use crate::client::{Client, ReplyMode};
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags, ClusterRoute, CommandSpec, Group, Proposal as Proposed, Timeout};
use crate::server::Server;

/// A write to propose, led here when it was routed; its reply is not in yet.
pub struct PendingWrite {
    /// Where the reply goes in the connection's output.
    pos: usize,
    /// Whether the client wants the reply (CLIENT REPLY).
    keep: bool,
    /// The key's slot (for a MOVED reply).
    slot: u16,
    /// The slot's group.
    group: GroupId,
    /// The command to propose (a RESP array).
    command: Bytes,
    /// The keys it writes (for WATCH).
    touches: Touches,
    /// For EXEC after WATCH: the watch, checked right before proposing.
    watch: Option<ClusterWatch>,
    /// EXEC's reply when the watch aborts it (nil in the connection's protocol).
    nil: &'static [u8],
}

/// A connection's cluster state.
#[derive(Default)]
pub struct ClusterConn {
    /// READONLY: reads may run on a replica.
    pub readonly: bool,
    /// ASKING was sent (for the next command).
    pub asking: bool,
    /// Writes routed and not answered yet, in order; [`drain`] proposes them, one log
    /// entry per group.
    pub pending: Vec<PendingWrite>,
    /// The node's cluster, once a write was routed.
    cluster: Option<Arc<Cluster>>,
    /// Groups (and terms) whose leadership a quorum round confirmed during this batch.
    pub confirmed: Vec<(GroupId, u64)>,
    /// Keys watched (WATCH), checked at EXEC by the slot's leader.
    pub watch: Option<ClusterWatch>,
    /// On the client that applies a data group's log entry: that group's slots, the only
    /// keys a script the entry runs may touch ([`super::script_keys`]).
    pub applying: Option<std::ops::RangeInclusive<u16>>,
    /// On a client that applies entries of a Raft log: every node (each master, for
    /// FUNCTION LOAD) may have proposed the same command, so a command may answer a
    /// repeat as done.
    pub from_log: bool,
}

/// What the router decided.
pub enum Routed {
    /// Run the command here, now.
    Local,
    /// Done: the reply is written (or pending); the result is the command's.
    Done(CmdResult),
    /// A blocking write found nothing: wait for its keys ([`wait_pop`]).
    Block(ClusterBlock),
}

/// A blocking write (a pop, XREADGROUP ... BLOCK) waiting on its keys (registered in
/// [`Cluster::waiters`]).
pub struct ClusterBlock {
    cl: Arc<Cluster>,
    /// The waiting client's id (for CLIENT UNBLOCK).
    id: u64,
    keys: Vec<Vec<u8>>,
    /// Woken by a write to one of `keys`, or by CLIENT UNBLOCK.
    pub notify: Arc<tokio::sync::Notify>,
    /// Set by CLIENT UNBLOCK (`block::UNBLOCK_TIMEOUT` or `UNBLOCK_ERROR`), else 0.
    pub unblocked: Arc<std::sync::atomic::AtomicU8>,
    /// When to give up (`None`: never).
    pub deadline: Option<std::time::Instant>,
    /// The reply then: the command's own reply when it found nothing.
    pub on_timeout: Vec<u8>,
    /// Nil in the connection's protocol.
    nil: &'static [u8],
    slot: u16,
    group: GroupId,
    command: Bytes,
    touches: Touches,
}

impl ClusterBlock {
    /// Proposes the pop again: its reply, or `None` while there is still nothing to pop.
    pub async fn retry(&self) -> Option<Vec<u8>> {
        let reply = propose_one(self).await;
        (!super::block::is_nil(&reply)).then_some(reply)
    }
}

impl Drop for ClusterBlock {
    fn drop(&mut self) {
        self.cl
            .waiters
            .unregister(self.id, &self.keys, &self.notify);
    }
}

/// Proposes `b`'s command alone and returns its reply.
async fn propose_one(b: &ClusterBlock) -> Vec<u8> {
    let mut r = propose(
        b.cl.clone(),
        b.group,
        vec![Proposal {
            slot: b.slot,
            command: b.command.clone(),
            touches: b.touches.clone(),
            watch: None,
            nil: b.nil,
        }],
    )
    .await;
    r.pop().unwrap_or_default()
}

/// The error a client gets when the cluster cannot serve a slot.
fn down() -> CmdError {
    CmdError::raw("CLUSTERDOWN The cluster is down")
}

/// The redirect for `slot` to node `leader` (or CLUSTERDOWN when nobody leads).
fn moved(cl: &Cluster, slot: u16, leader: Option<raft::NodeId>) -> CmdError {
    match leader.and_then(|l| cl.peer(l)) {
        Some(p) => CmdError::raw(format!("MOVED {slot} {}", p.addr())),
        None => down(),
    }
}

/// The slot of the keys at positions `first` and `rest` of `args`, or CROSSSLOT when they
/// hash to more than one.
fn one_slot(args: Args<'_>, first: usize, rest: &[usize]) -> Result<u16, CmdError> {
    let slot = raft::key_slot(args.arg(first));
    if rest.iter().any(|&p| raft::key_slot(args.arg(p)) != slot) {
        return Err(CmdError::raw(
            "CROSSSLOT Keys in request don't hash to the same slot",
        ));
    }
    Ok(slot)
}

/// The redirection [`route`] answers `args` with, decided without waiting, for a client
/// without READONLY or ASKING: CROSSSLOT for keys of two slots, MOVED (or CLUSTERDOWN)
/// for a slot this node does not lead; `None` for a command without keys, a cluster
/// command, or keys led here. A busy script's hook answers it before `-BUSY`, as Redis
/// checks redirection first ([`crate::busy`]).
pub(crate) fn redirect_now(cl: &Cluster, spec: &CommandSpec, args: Args<'_>) -> Option<CmdError> {
    if spec.group == Group::Cluster {
        return None;
    }
    let keys = spec.key_positions(&args);
    let (&first, rest) = keys.split_first()?;
    let slot = match one_slot(args, first, rest) {
        Ok(slot) => slot,
        Err(e) => return Some(e),
    };
    let g = cl.slot_group(slot);
    if cl.handle(g).is_none() {
        return Some(moved(cl, slot, cl.redirect_target(g)));
    }
    let lead = cl.leadership(g);
    (!lead.is_me).then(|| moved(cl, slot, lead.leader))
}

/// Commands that decide per call whether they write (scripts, by their flags): proposed
/// like writes, whatever they touch.
fn is_script_write(spec: &CommandSpec) -> bool {
    spec.may_write.is_some()
}

/// Decides where the command runs; proposes it when it is a write led here.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn route(
    cl: &Cluster,
    server: &Server,
    client: &mut Client,
    out: &mut ReplyWriter,
    idx: usize,
    spec: &CommandSpec,
    args: Args<'_>,
    mark: &mut usize,
) -> Routed {
    let name = server.registry.entry(idx).full_name.as_str();
    let asking = std::mem::take(&mut client.cluster.asking);
    match spec.route {
        ClusterRoute::Meta => {
            drain(client, out).await;
            *mark = out.len();
            let args: Vec<Vec<u8>> = (0..args.len()).map(|i| args.arg(i).to_vec()).collect();
            let cluster_verb = spec.group == Group::Cluster;
            return Routed::Done(match cl.meta_command(args, cluster_verb).await {
                Ok(reply) => {
                    out.buffer_mut().extend_from_slice(&reply);
                    Ok(())
                }
                Err(e) => Err(CmdError::raw(e)),
            });
        }
        _ if spec.group == Group::Cluster => return Routed::Local,
        ClusterRoute::DbZeroOnly if args.arg(1) != b"0" => {
            return Routed::Done(Err(CmdError::err("SELECT is not allowed in cluster mode")));
        }
        ClusterRoute::Watch => {
            return Routed::Done(route_watch(cl, server, client, out, args, mark).await);
        }
        ClusterRoute::EndWatch => {
            client.cluster.watch = None;
            return Routed::Local;
        }
        ClusterRoute::Transaction => {
            let watch = client.cluster.watch.take();
            if client.multi.as_ref().is_some_and(|m| !m.dirty) {
                return route_exec(cl, server, client, out, watch, mark).await;
            }
            return Routed::Local;
        }
        ClusterRoute::NamedFunction => wait_for_function(server, args.arg(1)).await,
        _ => {}
    }
    let keys = spec.key_positions(&args);
    let write = spec.has(flags::WRITE) || is_script_write(spec);
    let Some((&first, rest)) = keys.split_first() else {
        // A script without keys has no group: it runs here, and every key is non local
        // to it (`super::script_keys`), so it changes nothing any group holds.
        if !write || is_script_write(spec) {
            return Routed::Local;
        }
        if spec.route == ClusterRoute::LedGroups {
            drain(client, out).await;
            *mark = out.len();
            return Routed::Done(flush_led_groups(cl, out, args).await);
        }
        return Routed::Done(Err(CmdError::err(format!(
            "'{}' has no key to route by: Ember cluster mode runs writes in the group of their keys",
            name
        ))));
    };
    let slot = match one_slot(args, first, rest) {
        Ok(slot) => slot,
        Err(e) => return Routed::Done(Err(e)),
    };
    // A blocking write's timeout: (argument, in milliseconds?). Pops take seconds;
    // XREADGROUP blocks only with a BLOCK option (before STREAMS). XREAD ... BLOCK is a
    // read: it blocks on this node's keyspace, served by the writes this node applies.
    let wait_arg = match spec.timeout {
        Timeout::None if spec.has(flags::BLOCKING) => {
            return Routed::Done(Err(CmdError::err(format!(
                "blocking command '{name}' is not supported in Ember cluster mode yet"
            ))));
        }
        Timeout::None => None,
        Timeout::LastSecs => Some((args.len() - 1, false)),
        Timeout::ArgSecs(at) => Some((at, false)),
        Timeout::MsOption(find) => find(args).map(|at| (at, true)),
    };
    let g = cl.slot_group(slot);
    let lead = cl.leadership(g);
    let Some(h) = cl.handle(g) else {
        return Routed::Done(Err(moved(cl, slot, cl.redirect_target(g))));
    };
    if write {
        if !lead.is_me {
            return Routed::Done(Err(moved(cl, slot, lead.leader)));
        }
        let command = match proposal(server, spec, args) {
            Ok(c) => c,
            Err(e) => return Routed::Done(Err(e)),
        };
        let touches = if is_script_write(spec) {
            Touches::Any
        } else {
            Touches::Buckets(keys.iter().map(|&p| bucket(args.arg(p))).collect())
        };
        if let Some(wait) = wait_arg {
            return route_pop(
                server, client, out, mark, args, &keys, wait, slot, g, command, touches,
            )
            .await;
        }
        queue_write(server, client, out, slot, g, command, touches, None);
        return Routed::Done(Ok(()));
    }
    if client.cluster.readonly && !asking {
        return Routed::Local;
    }
    if !lead.is_me {
        return Routed::Done(Err(moved(cl, slot, lead.leader)));
    }
    if cl.lease_valid(&h, lead.term) || client.cluster.confirmed.contains(&(g, lead.term)) {
        return Routed::Local;
    }
    // The read must see this connection's own writes: answer them first.
    drain(client, out).await;
    *mark = out.len();
    match cl.confirm_leader(&h, lead.term).await {
        Ok(()) => {
            client.cluster.confirmed.push((g, lead.term));
            Routed::Local
        }
        Err(e) => Routed::Done(Err(read_check_error(cl, slot, e))),
    }
}

/// The error a client gets when this node could not confirm it still leads `slot`'s
/// group (reads and WATCH).
fn read_check_error(cl: &Cluster, slot: u16, e: ReadCheck) -> CmdError {
    match e {
        ReadCheck::NotLeader(l) => moved(cl, slot, l),
        ReadCheck::Down => down(),
        ReadCheck::Timeout => CmdError::raw("TRYAGAIN leadership could not be confirmed in time"),
    }
}

/// A blocking write (a pop, XREADGROUP ... BLOCK) on the leader of its keys: registered
/// on its keys, then proposed (after this connection's earlier writes); answered at once
/// when it took something (or failed), else it waits ([`Routed::Block`]). `wait` is its
/// timeout argument and whether that is in milliseconds (else seconds).
#[allow(clippy::too_many_arguments)]
async fn route_pop(
    server: &Server,
    client: &mut Client,
    out: &mut ReplyWriter,
    mark: &mut usize,
    args: Args<'_>,
    keys: &[usize],
    wait: (usize, bool),
    slot: u16,
    g: GroupId,
    command: Bytes,
    touches: Touches,
) -> Routed {
    drain(client, out).await;
    *mark = out.len();
    let Some(cl) = server.cluster.get().cloned() else {
        return Routed::Done(Err(down()));
    };
    let keys: Vec<Vec<u8>> = keys.iter().map(|&p| args.arg(p).to_vec()).collect();
    let notify = Arc::new(tokio::sync::Notify::new());
    let unblocked = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let id = client.id();
    cl.waiters.register(id, &keys, &notify, &unblocked);
    let nil = out.protocol().null_array();
    let mut b = ClusterBlock {
        cl,
        id,
        keys,
        notify,
        unblocked,
        deadline: None,
        on_timeout: Vec::new(),
        nil,
        slot,
        group: g,
        command: for_protocol(out, command),
        touches,
    };
    let reply = propose_one(&b).await;
    let deadline = match wait {
        (at, true) => super::block::deadline_ms(args.arg(at)),
        (at, false) => super::block::deadline(args.arg(at)),
    };
    match deadline {
        Some(d) if super::block::is_nil(&reply) => {
            b.deadline = d;
            b.on_timeout = reply;
            Routed::Block(b)
        }
        _ => {
            out.buffer_mut().extend_from_slice(&reply);
            Routed::Done(Ok(()))
        }
    }
}

/// How long an FCALL waits for its function to appear here: FUNCTION LOAD answers once
/// the metadata group's leader applied it, and the other nodes apply it a heartbeat later.
const FUNCTION_WAIT: std::time::Duration = std::time::Duration::from_millis(300);

/// Waits (up to [`FUNCTION_WAIT`]) until function `name` is loaded on this node.
async fn wait_for_function(server: &Server, name: &[u8]) {
    let deadline = std::time::Instant::now() + FUNCTION_WAIT;
    while !crate::cmd::scripting::has_function(server, name) && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The command to propose: `args` as sent, or what the command's spec says
/// ([`CommandSpec::propose_as`]: EVALSHA as the EVAL of its body, FCALL with its library's
/// code, [`super::encode_fcall`]).
fn proposal(server: &Server, spec: &CommandSpec, args: Args<'_>) -> Result<Bytes, CmdError> {
    let all: Vec<&[u8]> = args.iter().collect();
    match spec.propose_as.map(|f| f(server, args)).transpose()? {
        None => Ok(super::encode_command(&all)),
        Some(Proposed::Command(v)) => Ok(super::encode_command(&v)),
        Some(Proposed::WithLibrary(code)) => Ok(super::encode_fcall(&code, &all)),
    }
}

/// FLUSHALL / FLUSHDB in cluster mode: proposed to every group this node leads (as Redis
/// Cluster flushes one primary's slots); answered once all of them applied it.
async fn flush_led_groups(cl: &Cluster, out: &mut ReplyWriter, args: Args<'_>) -> CmdResult {
    let all: Vec<&[u8]> = args.iter().collect();
    let command = super::encode_command(&all);
    let mut waits = Vec::new();
    let mut numbered = Vec::new();
    for g in 1..=cl.groups {
        let g = GroupId(g);
        if !cl.leadership(g).is_me {
            continue;
        }
        if let Some(h) = cl.handle(g) {
            let seq = h.track.lock().await.propose([&Touches::Any]);
            let req = Request::new(command.clone(), storage::clock::now_ns(), cl.next_seed());
            let raft = h.raft.clone();
            waits.push(async move { raft.client_write(req).await });
            numbered.push((h, seq));
        }
    }
    let results = tokio::time::timeout(cl.op_timeout, futures_join(waits)).await;
    match results {
        Ok(rs) if rs.iter().all(Result::is_ok) => {
            for (h, seq) in numbered {
                h.track.lock().await.applied(seq);
            }
            out.ok();
            Ok(())
        }
        Ok(_) => Err(down()),
        Err(_) => Err(CmdError::raw(
            "TRYAGAIN the flush was not confirmed in time; it may still apply",
        )),
    }
}

/// Awaits every future, in order.
async fn futures_join<F: Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(fs.len());
    for f in fs {
        out.push(f.await);
    }
    out
}

/// WATCH in cluster mode: the keys must share one slot (that of earlier WATCHes too), led
/// here. After a ReadIndex round (entries of earlier terms applied), the connection keeps
/// the group's applied sequence number, term, the keys' buckets and deadlines; EXEC checks
/// them ([`super::watch`]).
async fn route_watch(
    cl: &Cluster,
    server: &Server,
    client: &mut Client,
    out: &mut ReplyWriter,
    args: Args<'_>,
    mark: &mut usize,
) -> CmdResult {
    let keys: Vec<&[u8]> = args.iter().skip(1).collect();
    let slot = raft::key_slot(keys[0]);
    if keys.iter().any(|k| raft::key_slot(k) != slot)
        || client
            .cluster
            .watch
            .as_ref()
            .is_some_and(|w| w.slot != slot)
    {
        return Err(CmdError::raw(
            "CROSSSLOT Keys in request don't hash to the same slot",
        ));
    }
    let g = cl.slot_group(slot);
    let lead = cl.leadership(g);
    let Some(h) = cl.handle(g) else {
        return Err(moved(cl, slot, cl.redirect_target(g)));
    };
    if !lead.is_me {
        return Err(moved(cl, slot, lead.leader));
    }
    // This connection's own earlier writes come before the watch point.
    drain(client, out).await;
    *mark = out.len();
    cl.confirm_leader(&h, lead.term)
        .await
        .map_err(|e| read_check_error(cl, slot, e))?;
    let since = h.track.lock().await.applied_seq();
    let now = storage::clock::now_ns();
    let deadline = keys
        .iter()
        .filter_map(|k| {
            server
                .keyspace
                .lock(0, k, now)
                .peek()
                .and_then(|e| e.expire_at())
        })
        .min();
    let buckets = keys.iter().map(|k| bucket(k));
    match &mut client.cluster.watch {
        Some(w) if w.term == lead.term => {
            w.buckets.extend(buckets);
            w.deadline = w.deadline.into_iter().chain(deadline).min();
        }
        w => {
            *w = Some(ClusterWatch {
                slot,
                term: lead.term,
                since,
                buckets: buckets.collect(),
                deadline,
            })
        }
    }
    out.ok();
    Ok(())
}

/// EXEC of a clean transaction: its commands' keys must share one slot (that of the
/// watched keys too), led here; the transaction is proposed as one entry (the state
/// machine queues and EXECs it on every replica) and answered with EXEC's reply, or nil
/// when the watch broke. A transaction without keys runs here.
async fn route_exec(
    cl: &Cluster,
    server: &Server,
    client: &mut Client,
    out: &mut ReplyWriter,
    watch: Option<ClusterWatch>,
    mark: &mut usize,
) -> Routed {
    let reg = &server.registry;
    let mut slot: Option<u16> = watch.as_ref().map(|w| w.slot);
    let mut commands = Vec::new();
    let mut buckets = Vec::new();
    let mut any = false;
    let mut error = None;
    if let Some(m) = client.multi.as_ref() {
        for q in &m.queued {
            let args = q.args.args();
            let entry = reg.entry(q.cmd_index);
            let keys = entry.spec.key_positions(&args);
            for &p in &keys {
                let s = raft::key_slot(args.arg(p));
                if slot.is_some_and(|x| x != s) {
                    error.get_or_insert(CmdError::raw(
                        "CROSSSLOT Keys in request don't hash to the same slot",
                    ));
                }
                slot = Some(s);
                buckets.push(bucket(args.arg(p)));
            }
            if keys.is_empty() && entry.spec.has(flags::WRITE) {
                error.get_or_insert(CmdError::err(format!(
                    "'{}' has no key to route by: Ember cluster mode runs writes in the group of their keys",
                    entry.full_name
                )));
            }
            any |= is_script_write(entry.spec);
            if entry.spec.route == ClusterRoute::NamedFunction && entry.spec.propose_as.is_some() {
                error.get_or_insert(CmdError::err(format!(
                    "{} inside MULTI is not supported in Ember cluster mode yet",
                    entry.full_name.to_ascii_uppercase()
                )));
            }
            match proposal(server, entry.spec, args) {
                Ok(c) => commands.push(c),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
    }
    let keyless = buckets.is_empty();
    let Some(slot) = slot.filter(|_| error.is_none()) else {
        if error.is_none() {
            return Routed::Local;
        }
        // The transaction ends here, as Redis discards it on EXECABORT.
        client.end_multi();
        return Routed::Done(Err(error.unwrap_or_else(down)));
    };
    let g = cl.slot_group(slot);
    let lead = cl.leadership(g);
    let Some(h) = cl.handle(g).filter(|_| lead.is_me) else {
        client.end_multi();
        let target = if cl.handle(g).is_none() {
            cl.redirect_target(g)
        } else {
            lead.leader
        };
        return Routed::Done(Err(moved(cl, slot, target)));
    };
    if keyless {
        // Only watched keys: nothing to propose. The check still runs after this
        // connection's writes are in, under the group's lock.
        let Some(w) = watch else {
            return Routed::Local;
        };
        drain(client, out).await;
        *mark = out.len();
        let broken = w.broken(&*h.track.lock().await, lead.term, storage::clock::now_ns());
        if broken {
            client.end_multi();
            out.null_array();
            return Routed::Done(Ok(()));
        }
        return Routed::Local;
    }
    client.end_multi();
    let command = super::state_machine::encode_tx(&commands);
    let touches = if any {
        Touches::Any
    } else {
        Touches::Buckets(buckets)
    };
    queue_write(server, client, out, slot, g, command, touches, watch);
    Routed::Done(Ok(()))
}

/// Queues `command` (a write of `slot` in group `g`, led here) for [`drain`]; its reply
/// goes at the output's current end.
#[allow(clippy::too_many_arguments)]
fn queue_write(
    server: &Server,
    client: &mut Client,
    out: &ReplyWriter,
    slot: u16,
    g: GroupId,
    command: Bytes,
    touches: Touches,
    watch: Option<ClusterWatch>,
) {
    if client.cluster.cluster.is_none() {
        client.cluster.cluster = server.cluster.get().cloned();
    }
    client.cluster.pending.push(PendingWrite {
        pos: out.len(),
        keep: !matches!(client.reply_mode, ReplyMode::Off | ReplyMode::Skipping),
        slot,
        group: g,
        command: for_protocol(out, command),
        touches,
        watch,
        nil: out.protocol().null_array(),
    });
}

/// `command` as proposed for a connection speaking `out`'s protocol (RESP3: wrapped, so
/// the applied entry answers in RESP3).
fn for_protocol(out: &ReplyWriter, command: Bytes) -> Bytes {
    match out.protocol() {
        resp::Protocol::Resp3 => super::state_machine::encode_resp3(&command),
        _ => command,
    }
}

/// One write of a connection's batch for one group, as [`propose`] takes it.
struct Proposal {
    slot: u16,
    command: Bytes,
    touches: Touches,
    watch: Option<ClusterWatch>,
    nil: &'static [u8],
}

/// Proposes `writes` to `group` as one entry and returns their replies in order. Under the
/// group's [`super::watch::WriteTrack`] lock, an EXEC whose watch broke is answered nil
/// and left out, and the entry is numbered and handed to Raft.
async fn propose(cl: Arc<Cluster>, group: GroupId, writes: Vec<Proposal>) -> Vec<Vec<u8>> {
    let n = writes.len();
    let slot = writes[0].slot;
    let Some(h) = cl.handle(group) else {
        return vec![moved_bytes(&cl, slot, cl.redirect_target(group)); n];
    };
    let mut replies: Vec<Option<Vec<u8>>> = vec![None; n];
    let mut track = h.track.lock().await;
    let term = cl.leadership(group).term;
    let now = storage::clock::now_ns();
    let mut live = Vec::with_capacity(n);
    for (i, w) in writes.iter().enumerate() {
        match &w.watch {
            Some(watch) if watch.broken(&track, term, now) => replies[i] = Some(w.nil.to_vec()),
            _ => live.push(i),
        }
    }
    if !live.is_empty() {
        let seq = track.propose(live.iter().map(|&i| &writes[i].touches));
        let command = if live.len() == 1 {
            writes[live[0]].command.clone()
        } else {
            let commands: Vec<Bytes> = live.iter().map(|&i| writes[i].command.clone()).collect();
            super::state_machine::encode_batch(&commands)
        };
        let req = Request::new(command, now, cl.next_seed());
        let sent = h.raft.client_write_ff(req).await;
        drop(track);
        let got: Vec<Vec<u8>> = match sent {
            Err(_) => vec![b"-CLUSTERDOWN The cluster is down\r\n".to_vec(); live.len()],
            Ok(rx) => match tokio::time::timeout(cl.op_timeout, rx).await {
                Ok(Ok(Ok(r))) => {
                    h.track.lock().await.applied(seq);
                    if live.len() == 1 {
                        vec![r.data.0.to_vec()]
                    } else {
                        super::state_machine::split_batch_reply(&r.data.0, live.len())
                    }
                }
                // Not appended (or truncated): each command goes where the leader is now.
                Ok(Ok(Err(raft::openraft::error::ClientWriteError::ForwardToLeader(f)))) => live
                    .iter()
                    .map(|&i| moved_bytes(&cl, writes[i].slot, f.leader_id))
                    .collect(),
                Ok(Ok(Err(e))) => vec![format!("-CLUSTERDOWN {e}\r\n").into_bytes(); live.len()],
                // The entry may be in the log already: the outcome is unknown, so these are
                // not TRYAGAIN (which clients retry on their own, applying it twice).
                Ok(Err(_)) => vec![
                    b"-ERR the node stopped before the write was confirmed; it may still apply\r\n"
                        .to_vec();
                    live.len()
                ],
                Err(_) => vec![
                    b"-TIMEOUT the write was not confirmed in time; it may still apply\r\n"
                        .to_vec();
                    live.len()
                ],
            },
        };
        for (&i, r) in live.iter().zip(got) {
            replies[i] = Some(r);
        }
    }
    replies
        .into_iter()
        .map(|r| r.unwrap_or_else(|| b"-ERR the write task failed\r\n".to_vec()))
        .collect()
}

/// [`moved`] as reply bytes.
fn moved_bytes(cl: &Cluster, slot: u16, leader: Option<raft::NodeId>) -> Vec<u8> {
    format!("-{}\r\n", moved(cl, slot, leader)).into_bytes()
}

/// Proposes this connection's routed writes (one entry per group, all groups at once),
/// waits for them and puts their replies in place, in order.
pub(crate) async fn drain(client: &mut Client, out: &mut ReplyWriter) {
    if client.cluster.pending.is_empty() {
        return;
    }
    let mut pending = std::mem::take(&mut client.cluster.pending);
    let Some(cl) = client.cluster.cluster.clone() else {
        return;
    };
    // Which groups, in first-seen order, and each write's place in its group's batch.
    let mut groups: Vec<(GroupId, Vec<Proposal>)> = Vec::new();
    let mut place = Vec::with_capacity(pending.len());
    for p in &mut pending {
        let gi = match groups.iter().position(|(g, _)| *g == p.group) {
            Some(i) => i,
            None => {
                groups.push((p.group, Vec::new()));
                groups.len() - 1
            }
        };
        place.push((gi, groups[gi].1.len()));
        groups[gi].1.push(Proposal {
            slot: p.slot,
            command: p.command.clone(),
            touches: std::mem::replace(&mut p.touches, Touches::Any),
            watch: p.watch.take(),
            nil: p.nil,
        });
    }
    // Proposing only queues the entry, so every group's entry is in flight before the
    // first reply is awaited.
    let mut waits = Vec::with_capacity(groups.len());
    for (g, writes) in groups {
        waits.push(tokio::spawn(propose(cl.clone(), g, writes)));
    }
    let mut replies: Vec<Vec<Vec<u8>>> = Vec::with_capacity(waits.len());
    for w in waits {
        replies.push(
            w.await
                .unwrap_or_else(|_| vec![b"-ERR the write task failed\r\n".to_vec()]),
        );
    }
    let first = pending[0].pos;
    let tail = out.buffer_mut().split_off(first);
    let mut last = first;
    for (p, (gi, k)) in pending.iter().zip(place) {
        let buf = out.buffer_mut();
        buf.extend_from_slice(&tail[last - first..p.pos - first]);
        if p.keep {
            let reply = replies[gi].get(k).map(Vec::as_slice);
            buf.extend_from_slice(reply.unwrap_or(b"-ERR the write task failed\r\n"));
        }
        last = p.pos;
    }
    out.buffer_mut().extend_from_slice(&tail[last - first..]);
}
