//! Pub/sub: channels, patterns and shard channels, and the per-connection mailbox messages
//! are delivered to.
//!
//! A subscriber owns a [`Mailbox`]: an unbounded channel of encoded messages plus a count
//! of bytes not yet written to its socket. PUBLISH on any thread encodes the message once
//! per protocol and pushes it into each receiving mailbox; the subscriber's connection
//! task (on its own thread) wakes and writes it. A mailbox whose pending bytes pass its
//! client's output-buffer limit ([`crate::obuf`]: hard, or soft for long enough) has its
//! client closed instead of growing without bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;
use resp::{Protocol, ReplyWriter};
use storage::pattern::glob_match;
use tokio::sync::mpsc;

use crate::client::ClientInfo;

/// Where a subscriber's messages go.
pub struct Mailbox {
    /// The subscriber.
    pub info: Arc<ClientInfo>,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    /// RESP3 subscribers get push frames.
    resp3: std::sync::atomic::AtomicBool,
    /// Bytes queued and not yet written.
    pub pending: AtomicUsize,
    /// `client-output-buffer-limit`, as in force.
    limits: Arc<crate::obuf::Limits>,
    /// How long the mailbox has been over its class's soft limit.
    soft: crate::obuf::SoftClock,
}

impl Mailbox {
    /// A mailbox for `info` and the receiver its connection reads.
    pub fn new(
        info: Arc<ClientInfo>,
        proto: Protocol,
        limits: Arc<crate::obuf::Limits>,
    ) -> (Arc<Mailbox>, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let m = Mailbox {
            info,
            tx,
            resp3: std::sync::atomic::AtomicBool::new(proto == Protocol::Resp3),
            pending: AtomicUsize::new(0),
            limits,
            soft: crate::obuf::SoftClock::default(),
        };
        (Arc::new(m), rx)
    }

    /// Follows the connection's protocol (HELLO while subscribed).
    pub fn set_protocol(&self, proto: Protocol) {
        self.resp3.store(proto == Protocol::Resp3, Relaxed);
    }

    fn proto(&self) -> Protocol {
        if self.resp3.load(Relaxed) {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        }
    }

    /// True when the owner speaks RESP3 (invalidations are pushes then).
    pub fn is_resp3(&self) -> bool {
        self.resp3.load(Relaxed)
    }

    /// Queues `bytes` for the owner (see [`Mailbox::deliver`]).
    pub fn send(&self, bytes: Vec<u8>) {
        self.deliver(bytes);
    }

    /// Queues `bytes`, or closes the client when that would pass its class's output-buffer
    /// limit (`pubsub` while it is subscribed, `normal` otherwise: tracking invalidations).
    /// A closed client's messages are dropped.
    fn deliver(&self, bytes: Vec<u8>) {
        if self.info.killed.load(Relaxed) {
            return;
        }
        let n = bytes.len();
        let pending = self.pending.fetch_add(n, Relaxed) + n;
        let class = crate::obuf::class_of(&self.info);
        let limit = self.limits.get(class);
        if !limit.is_unlimited() {
            let now = crate::obuf::client_ms(&self.info);
            if self.soft.over(limit, pending as u64, now) {
                self.pending.fetch_sub(n, Relaxed);
                crate::obuf::close_client(&self.info, class);
                return;
            }
        }
        if self.tx.send(bytes).is_err() {
            self.pending.fetch_sub(n, Relaxed);
        }
    }

    /// Called by the connection after writing `n` message bytes.
    pub fn written(&self, n: usize) {
        self.pending
            .fetch_sub(n.min(self.pending.load(Relaxed)), Relaxed);
    }
}

/// Which namespace a subscription lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE channels.
    Channel,
    /// PSUBSCRIBE patterns.
    Pattern,
    /// SSUBSCRIBE shard channels.
    Shard,
}

type Subs = HashMap<Vec<u8>, Vec<Arc<Mailbox>>>;

/// Every subscription of every client.
#[derive(Default)]
pub struct PubSub {
    channels: Mutex<Subs>,
    patterns: Mutex<Subs>,
    shards: Mutex<Subs>,
}

impl PubSub {
    fn map(&self, kind: Kind) -> &Mutex<Subs> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shards,
        }
    }

    /// Adds `mb` to `name`'s subscribers (the caller tracks what the client holds).
    pub fn subscribe(&self, kind: Kind, name: &[u8], mb: &Arc<Mailbox>) {
        self.map(kind)
            .lock()
            .entry(name.to_vec())
            .or_default()
            .push(mb.clone());
    }

    /// Removes client `id` from `name`'s subscribers.
    pub fn unsubscribe(&self, kind: Kind, name: &[u8], id: u64) {
        let mut m = self.map(kind).lock();
        if let Some(v) = m.get_mut(name) {
            v.retain(|s| s.info.id != id);
            if v.is_empty() {
                m.remove(name);
            }
        }
    }

    /// PUBLISH / SPUBLISH: delivers `msg` on `channel`; the number of receivers.
    pub fn publish(&self, shard: bool, channel: &[u8], msg: &[u8]) -> usize {
        let mut enc = Encoded::default();
        let mut n = 0;
        let (kind, word): (Kind, &[u8]) = if shard {
            (Kind::Shard, b"smessage")
        } else {
            (Kind::Channel, b"message")
        };
        if let Some(v) = self.map(kind).lock().get(channel) {
            for mb in v {
                mb.deliver(enc.get(mb.proto(), |w| {
                    w.push(3);
                    w.bulk(word);
                    w.bulk(channel);
                    w.bulk(msg);
                }));
                n += 1;
            }
        }
        if shard {
            return n;
        }
        let patterns = self.patterns.lock();
        for (pat, v) in patterns.iter() {
            if !glob_match(pat, channel, false) {
                continue;
            }
            let mut enc = Encoded::default();
            for mb in v {
                mb.deliver(enc.get(mb.proto(), |w| {
                    w.push(4);
                    w.bulk(b"pmessage");
                    w.bulk(pat);
                    w.bulk(channel);
                    w.bulk(msg);
                }));
                n += 1;
            }
        }
        n
    }

    /// Active channels (or shard channels) matching `pattern` (all when `None`).
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        self.map(kind)
            .lock()
            .keys()
            .filter(|k| pattern.is_none_or(|p| glob_match(p, k, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of `name`.
    pub fn count(&self, kind: Kind, name: &[u8]) -> usize {
        self.map(kind).lock().get(name).map_or(0, Vec::len)
    }

    /// Number of distinct patterns subscribed (PUBSUB NUMPAT).
    pub fn num_patterns(&self) -> usize {
        self.patterns.lock().len()
    }
}

/// A message encoded at most once per protocol.
#[derive(Default)]
struct Encoded {
    resp2: Option<Vec<u8>>,
    resp3: Option<Vec<u8>>,
}

impl Encoded {
    fn get(&mut self, proto: Protocol, f: impl Fn(&mut ReplyWriter)) -> Vec<u8> {
        let slot = match proto {
            Protocol::Resp3 => &mut self.resp3,
            _ => &mut self.resp2,
        };
        slot.get_or_insert_with(|| {
            let mut w = ReplyWriter::new(proto);
            f(&mut w);
            w.buffer().to_vec()
        })
        .clone()
    }
}

/// A mailbox made for a client by another one, with the receiver its connection takes.
pub type Adoptable = (Arc<Mailbox>, mpsc::UnboundedReceiver<Vec<u8>>);

/// The client's mailbox, created (and made reachable as a REDIRECT target) on first use,
/// or the one another client made for it ([`mailbox_for`]).
pub fn ensure_mailbox(
    server: &crate::server::Server,
    client: &mut crate::client::Client,
    proto: Protocol,
) -> Arc<Mailbox> {
    if let Some(m) = &client.mailbox {
        return m.clone();
    }
    let info = client.info.clone();
    let mut slot = info.adopt.lock();
    let (mailbox, rx) = slot
        .take()
        .unwrap_or_else(|| registered(server, &info, proto));
    info.adopt_pending.store(false, Relaxed);
    drop(slot);
    client.mailbox = Some(mailbox.clone());
    client.sub_rx = Some(rx);
    mailbox
}

/// Makes `target` reachable as a REDIRECT target when it has no mailbox yet (a client
/// that never subscribed nor tracked, as a RESP3 one needs not): the mailbox is made here,
/// registered, and handed to its connection, which takes it at its next wait for input
/// ([`adopt`]); messages sent meanwhile wait in it.
pub fn mailbox_for(server: &crate::server::Server, target: &Arc<ClientInfo>) {
    let mut slot = target.adopt.lock();
    if slot.is_some() || server.tracking.has_mailbox(target.id) {
        return;
    }
    let proto = if target.resp.load(Relaxed) == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    };
    *slot = Some(registered(server, target, proto));
    drop(slot);
    target.adopt_pending.store(true, Relaxed);
    target.waker.wake();
}

/// A new mailbox for `info`, reachable as a REDIRECT target at once (the caller holds
/// `info.adopt`, which orders making one).
fn registered(
    server: &crate::server::Server,
    info: &Arc<ClientInfo>,
    proto: Protocol,
) -> Adoptable {
    let (m, rx) = Mailbox::new(info.clone(), proto, server.live.obuf.clone());
    server.tracking.add_mailbox(info.id, &m);
    (m, rx)
}

/// Takes the mailbox another client made for this one, if any ([`mailbox_for`]).
pub fn adopt(client: &mut crate::client::Client) {
    let info = client.info.clone();
    let mut slot = info.adopt.lock();
    info.adopt_pending.store(false, Relaxed);
    if client.mailbox.is_none() {
        if let Some((m, rx)) = slot.take() {
            client.mailbox = Some(m);
            client.sub_rx = Some(rx);
        }
    }
}
