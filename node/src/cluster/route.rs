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
//! - Keyless commands run locally (PING, INFO, CLUSTER ...); keyless writes cannot be
//!   replicated by one group and are refused, except FLUSHALL/FLUSHDB, proposed to every
//!   group this node leads.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use raft::{GroupId, Request};
use resp::{Args, ReplyWriter};

use super::node::{Cluster, ReadCheck};
use crate::client::{Client, ReplyMode};
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags, CommandSpec, Group};
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
}

/// What the router decided.
pub enum Routed {
    /// Run the command here, now.
    Local,
    /// Done: the reply is written (or pending); the result is the command's.
    Done(CmdResult),
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

/// Scripts that may write, proposed like writes.
fn is_script_write(name: &str) -> bool {
    matches!(name, "eval" | "evalsha" | "fcall")
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
    if spec.group == Group::Cluster {
        return Routed::Local;
    }
    if name == "select" && args.arg(1) != b"0" {
        return Routed::Done(Err(CmdError::err("SELECT is not allowed in cluster mode")));
    }
    if name == "watch" {
        return Routed::Done(Err(CmdError::err(
            "WATCH is not supported in Ember cluster mode yet",
        )));
    }
    if name == "exec" && client.multi.as_ref().is_some_and(|m| !m.dirty) {
        return route_exec(cl, server, client, out);
    }
    let keys = spec.key_positions(&args);
    let write = spec.has(flags::WRITE) || is_script_write(name);
    let Some((&first, rest)) = keys.split_first() else {
        if !write {
            return Routed::Local;
        }
        if matches!(name, "flushall" | "flushdb") {
            drain(client, out).await;
            *mark = out.len();
            return Routed::Done(flush_led_groups(cl, out, args).await);
        }
        return Routed::Done(Err(CmdError::err(format!(
            "'{}' has no key to route by: Ember cluster mode runs writes in the group of their keys",
            name
        ))));
    };
    let slot = raft::key_slot(args.arg(first));
    if rest.iter().any(|&p| raft::key_slot(args.arg(p)) != slot) {
        return Routed::Done(Err(CmdError::raw(
            "CROSSSLOT Keys in request don't hash to the same slot",
        )));
    }
    if write && spec.has(flags::BLOCKING) {
        return Routed::Done(Err(CmdError::err(format!(
            "blocking command '{name}' is not supported in Ember cluster mode yet"
        ))));
    }
    let g = cl.slot_group(slot);
    let lead = cl.leadership(g);
    let Some(h) = cl.handle(g) else {
        return Routed::Done(Err(moved(cl, slot, cl.redirect_target(g))));
    };
    if write {
        if !lead.is_me {
            return Routed::Done(Err(moved(cl, slot, lead.leader)));
        }
        let command = match script_body(server, name, args) {
            Ok(c) => c,
            Err(e) => return Routed::Done(Err(e)),
        };
        queue_write(server, client, out, slot, g, command);
        return Routed::Done(Ok(()));
    }
    if client.cluster.readonly && !asking {
        return Routed::Local;
    }
    if !lead.is_me {
        return Routed::Done(Err(moved(cl, slot, lead.leader)));
    }
    if cl.lease_valid(h, lead.term) || client.cluster.confirmed.contains(&(g, lead.term)) {
        return Routed::Local;
    }
    // The read must see this connection's own writes: answer them first.
    drain(client, out).await;
    *mark = out.len();
    match cl.confirm_leader(h, lead.term).await {
        Ok(()) => {
            client.cluster.confirmed.push((g, lead.term));
            Routed::Local
        }
        Err(ReadCheck::NotLeader(l)) => Routed::Done(Err(moved(cl, slot, l))),
        Err(ReadCheck::Down) => Routed::Done(Err(down())),
        Err(ReadCheck::Timeout) => Routed::Done(Err(CmdError::raw(
            "TRYAGAIN leadership could not be confirmed in time",
        ))),
    }
}

/// The command to propose: `args` as sent, except EVALSHA, which becomes EVAL of the
/// cached body (replicas need not have loaded the script).
fn script_body(server: &Server, name: &str, args: Args<'_>) -> Result<Bytes, CmdError> {
    let all: Vec<&[u8]> = args.iter().collect();
    if name != "evalsha" {
        return Ok(super::encode_command(&all));
    }
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
            let mut v: Vec<&[u8]> = vec![b"EVAL", &b];
            v.extend_from_slice(&all[2..]);
            Ok(super::encode_command(&v))
        }
        None => Err(CmdError::raw(
            "NOSCRIPT No matching script. Please use EVAL.",
        )),
    }
}

/// FLUSHALL / FLUSHDB in cluster mode: proposed to every group this node leads (as Redis
/// Cluster flushes one primary's slots); answered once all of them applied it.
async fn flush_led_groups(cl: &Cluster, out: &mut ReplyWriter, args: Args<'_>) -> CmdResult {
    let all: Vec<&[u8]> = args.iter().collect();
    let command = super::encode_command(&all);
    let mut waits = Vec::new();
    for g in 1..=cl.groups {
        let g = GroupId(g);
        if !cl.leadership(g).is_me {
            continue;
        }
        if let Some(h) = cl.handle(g) {
            let req = Request::new(command.clone(), storage::clock::now_ns(), cl.next_seed());
            waits.push(h.raft.client_write(req));
        }
    }
    let results = tokio::time::timeout(cl.op_timeout, futures_join(waits)).await;
    match results {
        Ok(rs) if rs.iter().all(Result::is_ok) => {
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

/// EXEC of a clean transaction: its commands' keys must share one slot, led here; the
/// transaction is proposed as one entry (the state machine queues and EXECs it on every
/// replica) and answered with EXEC's reply. A transaction without keys runs here.
fn route_exec(cl: &Cluster, server: &Server, client: &mut Client, out: &mut ReplyWriter) -> Routed {
    let reg = &server.registry;
    let mut slot: Option<u16> = None;
    let mut commands = Vec::new();
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
            }
            if keys.is_empty() && entry.spec.has(flags::WRITE) {
                error.get_or_insert(CmdError::err(format!(
                    "'{}' has no key to route by: Ember cluster mode runs writes in the group of their keys",
                    entry.full_name
                )));
            }
            match script_body(server, &entry.full_name, args) {
                Ok(c) => commands.push(c),
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
    }
    let Some(slot) = slot.filter(|_| error.is_none()) else {
        if error.is_none() {
            return Routed::Local;
        }
        // The transaction ends here, as Redis discards it on EXECABORT.
        client.multi = None;
        client
            .info
            .multi_len
            .store(-1, std::sync::atomic::Ordering::Relaxed);
        return Routed::Done(Err(error.unwrap_or_else(down)));
    };
    client.multi = None;
    client
        .info
        .multi_len
        .store(-1, std::sync::atomic::Ordering::Relaxed);
    let g = cl.slot_group(slot);
    let lead = cl.leadership(g);
    if cl.handle(g).is_none() || !lead.is_me {
        let target = if cl.handle(g).is_none() {
            cl.redirect_target(g)
        } else {
            lead.leader
        };
        return Routed::Done(Err(moved(cl, slot, target)));
    }
    let command = super::state_machine::encode_tx(&commands);
    queue_write(server, client, out, slot, g, command);
    Routed::Done(Ok(()))
}

/// Queues `command` (a write of `slot` in group `g`, led here) for [`drain`]; its reply
/// goes at the output's current end.
fn queue_write(
    server: &Server,
    client: &mut Client,
    out: &ReplyWriter,
    slot: u16,
    g: GroupId,
    command: Bytes,
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

/// Proposes one group's writes as one entry (a batch entry when there are several) and
/// waits for their replies, in order.
async fn propose(cl: Arc<Cluster>, group: GroupId, writes: Vec<(u16, Bytes)>) -> Vec<Vec<u8>> {
    let n = writes.len();
    let all = |reply: Vec<u8>| vec![reply; n];
    let slot = writes[0].0;
    let Some(h) = cl.handle(group) else {
        return all(moved_bytes(&cl, slot, cl.redirect_target(group)));
    };
    let command = if n == 1 {
        writes[0].1.clone()
    } else {
        let commands: Vec<Bytes> = writes.iter().map(|(_, c)| c.clone()).collect();
        super::state_machine::encode_batch(&commands)
    };
    let req = Request::new(command, storage::clock::now_ns(), cl.next_seed());
    let Ok(rx) = h.raft.client_write_ff(req).await else {
        return all(b"-CLUSTERDOWN The cluster is down\r\n".to_vec());
    };
    match tokio::time::timeout(cl.op_timeout, rx).await {
        Ok(Ok(Ok(r))) if n == 1 => vec![r.data.0.to_vec()],
        Ok(Ok(Ok(r))) => super::state_machine::split_batch_reply(&r.data.0, n),
        // Not appended (or truncated): each command goes where the leader is now.
        Ok(Ok(Err(raft::openraft::error::ClientWriteError::ForwardToLeader(f)))) => writes
            .iter()
            .map(|(slot, _)| moved_bytes(&cl, *slot, f.leader_id))
            .collect(),
        Ok(Ok(Err(e))) => all(format!("-CLUSTERDOWN {e}\r\n").into_bytes()),
        // The entry may be in the log already: the outcome is unknown, so these are not
        // TRYAGAIN (which clients retry on their own, applying it twice).
        Ok(Err(_)) => all(
            b"-ERR the node stopped before the write was confirmed; it may still apply\r\n"
                .to_vec(),
        ),
        Err(_) => {
            all(b"-TIMEOUT the write was not confirmed in time; it may still apply\r\n".to_vec())
        }
    }
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
    let pending = std::mem::take(&mut client.cluster.pending);
    let Some(cl) = client.cluster.cluster.clone() else {
        return;
    };
    // Which groups, in first-seen order, and each write's place in its group's batch.
    let mut groups: Vec<(GroupId, Vec<(u16, Bytes)>)> = Vec::new();
    let mut place = Vec::with_capacity(pending.len());
    for p in &pending {
        let gi = match groups.iter().position(|(g, _)| *g == p.group) {
            Some(i) => i,
            None => {
                groups.push((p.group, Vec::new()));
                groups.len() - 1
            }
        };
        place.push((gi, groups[gi].1.len()));
        groups[gi].1.push((p.slot, p.command.clone()));
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
