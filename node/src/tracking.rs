//! Client-side caching (CLIENT TRACKING): which clients may hold which keys, and the
//! invalidation messages sent when those keys change.
//!
//! Default mode remembers the keys each tracking client read (read-only commands, subject
//! to OPTIN/OPTOUT and CLIENT CACHING); BCAST mode registers key prefixes instead. A write
//! (or an active expiry) invalidates the key: every client that may cache it gets an
//! `invalidate` push (RESP3) or, through REDIRECT, a `__redis__:invalidate` pub/sub message
//! on the redirect client (RESP2), via that client's [`Mailbox`]. Keys are not per
//! database, as in Redis. Past `tracking-table-max-keys` remembered keys, keys are
//! forgotten and invalidated as Redis does. Every path starts with one atomic load, so nothing is paid while
//! no client tracks.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

use std::cell::RefCell;

use parking_lot::Mutex;
use resp::{Protocol, ReplyWriter};

use crate::pubsub::Mailbox;

/// The pub/sub channel RESP2 clients receive invalidations on (through REDIRECT).
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// A tracking client's options (CLIENT TRACKING ON ...).
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// REDIRECT target (0: none).
    pub redirect: u64,
    /// BCAST mode.
    pub bcast: bool,
    /// OPTIN mode.
    pub optin: bool,
    /// OPTOUT mode.
    pub optout: bool,
    /// NOLOOP: no invalidations for the client's own writes.
    pub noloop: bool,
    /// BCAST prefixes (empty: every key).
    pub prefixes: Vec<Vec<u8>>,
}

/// A registered tracking client.
struct Tracker {
    opts: Options,
    /// The client's own mailbox (invalidations without REDIRECT, broken-redirect notices).
    mailbox: Arc<Mailbox>,
    /// Set once the redirect client went away.
    broken: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    trackers: HashMap<u64, Tracker>,
    /// Key -> clients that may cache it (default mode).
    table: HashMap<Vec<u8>, HashSet<u64>>,
    /// Prefix -> BCAST clients.
    prefixes: HashMap<Vec<u8>, HashSet<u64>>,
}

/// BCAST invalidations of the command running on this thread: (writer, key).
#[derive(Default)]
struct Pending {
    /// Nesting of [`Tracking::batch`] guards (EXEC and scripts run commands inside).
    depth: usize,
    /// Keys written meanwhile, with their writer.
    keys: Vec<(u64, Vec<u8>)>,
}

thread_local! {
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Gathers the BCAST invalidations of a command into one message per prefix per client
/// until dropped ([`Tracking::batch`]).
pub struct Batch<'a>(&'a Tracking);

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let keys = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            p.depth = p.depth.saturating_sub(1);
            if p.depth == 0 {
                std::mem::take(&mut p.keys)
            } else {
                Vec::new()
            }
        });
        if !keys.is_empty() {
            self.0.broadcast(&keys);
        }
    }
}

/// The tracking registry.
#[derive(Default)]
pub struct Tracking {
    state: Mutex<State>,
    /// Number of tracking clients (the fast path).
    clients: AtomicUsize,
    /// Every client's mailbox, by id (REDIRECT targets).
    mailboxes: Mutex<HashMap<u64, Arc<Mailbox>>>,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: AtomicUsize,
}

impl Tracking {
    /// True while any client tracks.
    #[inline]
    pub fn active(&self) -> bool {
        self.clients.load(SeqCst) > 0
    }

    /// Number of tracking clients (INFO tracking_clients).
    pub fn client_count(&self) -> usize {
        self.clients.load(SeqCst)
    }

    /// Makes `mb` reachable as a REDIRECT target.
    pub fn add_mailbox(&self, id: u64, mb: &Arc<Mailbox>) {
        self.mailboxes.lock().insert(id, mb.clone());
    }

    /// Whether client `id` is reachable as a REDIRECT target.
    pub fn has_mailbox(&self, id: u64) -> bool {
        self.mailboxes.lock().contains_key(&id)
    }

    /// The client went away: forget its mailbox and its tracking.
    pub fn remove_client(&self, id: u64) {
        self.mailboxes.lock().remove(&id);
        self.disable(id);
    }

    /// Enables (or re-enables) tracking for `id`.
    pub fn enable(&self, id: u64, mailbox: Arc<Mailbox>, opts: Options) {
        let mut st = self.state.lock();
        if let Some(old) = st.trackers.remove(&id) {
            remove_prefixes(&mut st, id, &old.opts.prefixes, old.opts.bcast);
        } else {
            self.clients.fetch_add(1, SeqCst);
        }
        if opts.bcast {
            if opts.prefixes.is_empty() {
                st.prefixes.entry(Vec::new()).or_default().insert(id);
            }
            for p in &opts.prefixes {
                st.prefixes.entry(p.clone()).or_default().insert(id);
            }
        }
        st.trackers.insert(
            id,
            Tracker {
                opts,
                mailbox,
                broken: Default::default(),
            },
        );
    }

    /// Disables tracking for `id` (its remembered keys are dropped lazily).
    pub fn disable(&self, id: u64) {
        let mut st = self.state.lock();
        if let Some(old) = st.trackers.remove(&id) {
            remove_prefixes(&mut st, id, &old.opts.prefixes, old.opts.bcast);
            self.clients.fetch_sub(1, SeqCst);
        }
    }

    /// Remembers that client `id` read `keys` (default mode).
    pub fn remember(&self, id: u64, keys: impl Iterator<Item = Vec<u8>>) {
        let mut st = self.state.lock();
        for k in keys {
            st.table.entry(k).or_default().insert(id);
        }
        self.limit(&mut st);
    }

    /// Sets `tracking-table-max-keys` (0: no limit); a table over the new limit shrinks
    /// at once.
    pub fn set_max_keys(&self, max: usize) {
        self.max_keys.store(max, Relaxed);
        let mut st = self.state.lock();
        self.limit(&mut st);
    }

    /// Keys remembered now (INFO `tracking_total_keys`).
    pub fn key_count(&self) -> usize {
        self.state.lock().table.len()
    }

    /// Redis's `trackingLimitUsedSlots`: while the table holds more keys than
    /// `tracking-table-max-keys`, one is forgotten and the clients that may cache it are
    /// told to drop it, as if it had been written.
    fn limit(&self, st: &mut State) {
        let max = self.max_keys.load(Relaxed);
        if max == 0 {
            return;
        }
        while st.table.len() > max {
            let Some(key) = st.table.keys().next().cloned() else {
                break;
            };
            for id in take_readers(st, &key) {
                if let Some(t) = st.trackers.get(&id) {
                    self.send(t, Some(&[key.as_slice()]));
                }
            }
        }
    }

    /// Starts gathering this thread's BCAST invalidations (a command runs): Redis sends
    /// them once per event loop, one message per prefix with every key written, so an
    /// MSET or a transaction gives one message, not one per key. `None` (one atomic load)
    /// while no client tracks.
    #[inline]
    pub fn batch(&self) -> Option<Batch<'_>> {
        if !self.active() {
            return None;
        }
        PENDING.with(|p| p.borrow_mut().depth += 1);
        Some(Batch(self))
    }

    /// Sends the gathered BCAST invalidations `keys`: per client, one message per prefix
    /// it registered that some key matches, leaving out (NOLOOP) the client's own writes.
    fn broadcast(&self, keys: &[(u64, Vec<u8>)]) {
        let st = self.state.lock();
        // (client, prefix) -> keys, in a stable order.
        let mut out: std::collections::BTreeMap<(u64, &[u8]), Vec<&[u8]>> = Default::default();
        for (p, ids) in &st.prefixes {
            for (writer, key) in keys {
                if !key.starts_with(p) {
                    continue;
                }
                for &id in ids {
                    let Some(t) = st.trackers.get(&id) else {
                        continue;
                    };
                    if t.opts.noloop && id == *writer {
                        continue;
                    }
                    let list = out.entry((id, p.as_slice())).or_default();
                    if !list.contains(&key.as_slice()) {
                        list.push(key);
                    }
                }
            }
        }
        for ((id, _), list) in out {
            if let Some(t) = st.trackers.get(&id) {
                self.send(t, Some(&list));
            }
        }
    }

    /// `key` was modified by client `writer` (0: the server, e.g. expiry): sends the
    /// invalidations it causes (BCAST ones when the command ends, inside a [`Batch`]).
    pub fn invalidate(&self, writer: u64, key: &[u8]) {
        if !self.active() {
            return;
        }
        let batching = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            if p.depth > 0 {
                p.keys.push((writer, key.to_vec()));
            }
            p.depth > 0
        });
        let mut st = self.state.lock();
        let mut targets = take_readers(&mut st, key);
        if !batching {
            for (p, ids) in &st.prefixes {
                if key.starts_with(p) {
                    targets.extend(ids.iter().copied());
                }
            }
        }
        targets.sort_unstable();
        targets.dedup();
        for id in targets {
            let Some(t) = st.trackers.get(&id) else {
                continue;
            };
            if t.opts.noloop && id == writer {
                continue;
            }
            self.send(t, Some(&[key]));
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told to drop everything.
    pub fn invalidate_all(&self) {
        if !self.active() {
            return;
        }
        let mut st = self.state.lock();
        st.table.clear();
        for t in st.trackers.values() {
            self.send(t, None);
        }
    }

    /// CLIENT TRACKINGINFO / GETREDIR data: options and whether the redirect broke.
    pub fn info(&self, id: u64) -> Option<(Options, bool)> {
        let st = self.state.lock();
        st.trackers
            .get(&id)
            .map(|t| (t.opts.clone(), t.broken.load(Relaxed)))
    }

    /// Sends one invalidation (`keys`, or all keys when `None`) for tracker `t`.
    fn send(&self, t: &Tracker, keys: Option<&[&[u8]]>) {
        let mut redirected = false;
        let target = if t.opts.redirect != 0 {
            match self.mailboxes.lock().get(&t.opts.redirect) {
                Some(m) if !m.info.killed.load(Relaxed) => {
                    redirected = true;
                    m.clone()
                }
                _ => {
                    if !t.broken.swap(true, Relaxed) && t.mailbox.is_resp3() {
                        let mut w = ReplyWriter::new(Protocol::Resp3);
                        w.push(2);
                        w.bulk(b"tracking-redir-broken");
                        w.int(t.opts.redirect as i64);
                        t.mailbox.send(w.buffer().to_vec());
                    }
                    return;
                }
            }
        } else {
            t.mailbox.clone()
        };
        let mut w;
        if target.is_resp3() {
            w = ReplyWriter::new(Protocol::Resp3);
            w.push(2);
            w.bulk(b"invalidate");
        } else if redirected && target.info.sub_counts.iter().any(|n| n.load(Relaxed) > 0) {
            w = ReplyWriter::new(Protocol::Resp2);
            w.array(3);
            w.bulk(b"message");
            w.bulk(CHANNEL);
        } else {
            return;
        }
        match keys {
            Some(ks) => {
                w.array(ks.len());
                for k in ks {
                    w.bulk(k);
                }
            }
            None => w.null(),
        }
        target.send(w.buffer().to_vec());
    }
}

/// Forgets `key`: the default-mode clients that read it, which must be told. Keys a client
/// read before it switched to BCAST are not its concern any more (Redis skips BCAST
/// clients here): its prefixes decide.
fn take_readers(st: &mut State, key: &[u8]) -> Vec<u64> {
    let Some(ids) = st.table.remove(key) else {
        return Vec::new();
    };
    ids.into_iter()
        .filter(|id| st.trackers.get(id).is_some_and(|t| !t.opts.bcast))
        .collect()
}

fn remove_prefixes(st: &mut State, id: u64, prefixes: &[Vec<u8>], bcast: bool) {
    if !bcast {
        return;
    }
    let all = [Vec::new()];
    let list: &[Vec<u8>] = if prefixes.is_empty() { &all } else { prefixes };
    for p in list {
        if let Some(set) = st.prefixes.get_mut(p) {
            set.remove(&id);
            if set.is_empty() {
                st.prefixes.remove(p);
            }
        }
    }
}
