//! Simulated clients: turmoil clients that send puts, increments and reads to the nodes'
//! client port (following redirects to the group's leader) and record each operation,
//! with its virtual invocation and response times, into the [`History`].

use std::collections::BTreeMap;
use std::time::Duration;

use raft::GroupId;
use raft::NodeId;
use rand::rngs::SmallRng;
use rand::Rng;
use rand::SeedableRng;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;

use crate::history::History;
use crate::history::Op;
use crate::history::OpKind;
use crate::history::Outcome;
use crate::node::host_name;
use crate::node::CLIENT_PORT;

/// How long a client waits for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
/// How long a client waits for a reply before the outcome is unknown.
const REPLY_TIMEOUT: Duration = Duration::from_millis(1500);

/// The keys of a simulation and the group each belongs to.
#[derive(Debug, Clone)]
pub struct Keyspace {
    /// Register keys (put and get).
    pub registers: Vec<String>,
    /// Counter keys (incr and get).
    pub counters: Vec<String>,
    /// The number of data groups (groups are `1..=groups`).
    pub groups: u32,
}

impl Keyspace {
    /// `registers` register keys and `counters` counter keys over `groups` groups.
    pub fn new(registers: usize, counters: usize, groups: u32) -> Self {
        Keyspace {
            registers: (0..registers).map(|i| format!("r{i}")).collect(),
            counters: (0..counters).map(|i| format!("c{i}")).collect(),
            groups,
        }
    }

    /// The group of `key` (keys are spread round-robin by their number).
    pub fn group(&self, key: &str) -> GroupId {
        let n: u32 = key[1..].parse().unwrap_or(0);
        let salt = u32::from(key.starts_with('c'));
        GroupId(1 + (n + salt) % self.groups)
    }

    /// Every key.
    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.registers.iter().chain(self.counters.iter())
    }
}

/// How one client runs.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// The client's number (its host is `c<id>`).
    pub id: u32,
    /// Seeds the client's choices (derived from the simulation's seed).
    pub seed: u64,
    /// The nodes to talk to.
    pub nodes: Vec<NodeId>,
    /// The keys.
    pub keys: Keyspace,
    /// The client starts no operation after this virtual time.
    pub stop_at: Duration,
}

/// What one attempt at one node gave.
enum Attempt {
    /// The request was executed: its reply.
    Done(Option<String>),
    /// Not executed there; try `Some(node)` (the leader) or any node.
    Elsewhere(Option<NodeId>),
    /// Sent but no definite answer: a write may have been applied.
    Unknown,
}

/// The simulation's virtual time.
fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

/// Sends one request line to `node` and reads the reply line.
async fn attempt(node: NodeId, line: &str) -> Attempt {
    let addr = (host_name(node), CLIENT_PORT);
    let stream = match tokio::time::timeout(
        CONNECT_TIMEOUT,
        turmoil::net::TcpStream::connect((addr.0.as_str(), addr.1)),
    )
    .await
    {
        Ok(Ok(s)) => s,
        // Nothing was sent.
        _ => return Attempt::Elsewhere(None),
    };
    let (read, mut write) = stream.into_split();
    if write
        .write_all(format!("{line}\n").as_bytes())
        .await
        .is_err()
    {
        return Attempt::Unknown;
    }
    let mut lines = BufReader::new(read).lines();
    let reply = match tokio::time::timeout(REPLY_TIMEOUT, lines.next_line()).await {
        Ok(Ok(Some(reply))) => reply,
        _ => return Attempt::Unknown,
    };
    let (word, rest) = reply.split_once(' ').unwrap_or((reply.as_str(), ""));
    match word {
        "OK" if rest.starts_with("ERR") => Attempt::Done(Some("ERR".into())),
        "OK" | "VAL" => Attempt::Done(Some(rest.to_string())),
        "NIL" => Attempt::Done(None),
        "REDIRECT" => Attempt::Elsewhere(rest.parse().ok()),
        "FAIL" => Attempt::Elsewhere(None),
        _ => Attempt::Unknown,
    }
}

/// One client's connection state: who it is, where it sends, what it has learned.
struct Session {
    /// The client's number.
    client: u32,
    /// The nodes to talk to.
    nodes: Vec<NodeId>,
    /// The last known leader of each group.
    leaders: BTreeMap<GroupId, NodeId>,
    /// The client's choices.
    rng: SmallRng,
}

impl Session {
    /// A random node.
    fn any_node(&mut self) -> NodeId {
        self.nodes[self.rng.random_range(0..self.nodes.len())]
    }

    /// Runs `kind` on `key` until it has a definite outcome, the attempts run out, or a
    /// write's outcome becomes unknown; returns the operation to record (`None`: refused
    /// everywhere, so it never took effect and the history can ignore it).
    async fn run_op(
        &mut self,
        key: &str,
        kind: OpKind,
        group: GroupId,
        max_attempts: u32,
    ) -> Option<Op> {
        let line = match &kind {
            OpKind::Put(v) => format!("PUT {} {key} {v}", group.0),
            OpKind::Get => format!("GET {} {key}", group.0),
            OpKind::Incr => format!("INCR {} {key}", group.0),
        };
        let invoke = now();
        let mut target = match self.leaders.get(&group) {
            Some(&leader) => leader,
            None => self.any_node(),
        };
        let client = self.client;
        let op = |kind: OpKind, outcome| Op {
            client,
            key: key.to_string(),
            kind,
            invoke,
            complete: now(),
            outcome,
        };
        for _ in 0..max_attempts {
            match attempt(target, &line).await {
                Attempt::Done(reply) => {
                    self.leaders.insert(group, target);
                    return Some(op(kind, Outcome::Done(reply)));
                }
                Attempt::Elsewhere(hint) => {
                    self.leaders.remove(&group);
                    target = match hint {
                        Some(leader) if self.nodes.contains(&leader) => leader,
                        _ => {
                            let pause = self.rng.random_range(20..120);
                            tokio::time::sleep(Duration::from_millis(pause)).await;
                            self.any_node()
                        }
                    };
                }
                Attempt::Unknown => {
                    self.leaders.remove(&group);
                    if matches!(kind, OpKind::Get) {
                        target = self.any_node();
                        continue;
                    }
                    return Some(op(kind, Outcome::Unknown));
                }
            }
        }
        None
    }
}

/// A client of the chaos phase: random operations on random keys until `stop_at`.
pub async fn run_client(spec: ClientSpec, history: History) -> turmoil::Result {
    let mut session = Session {
        client: spec.id,
        nodes: spec.nodes.clone(),
        leaders: BTreeMap::new(),
        rng: SmallRng::seed_from_u64(spec.seed),
    };
    let mut n = 0u64;
    while now() < spec.stop_at {
        let counter = session.rng.random_bool(0.4);
        let (key, kind) = if counter {
            let key = &spec.keys.counters[session.rng.random_range(0..spec.keys.counters.len())];
            let kind = if session.rng.random_bool(0.6) {
                OpKind::Incr
            } else {
                OpKind::Get
            };
            (key.clone(), kind)
        } else {
            let key = &spec.keys.registers[session.rng.random_range(0..spec.keys.registers.len())];
            n += 1;
            let kind = if session.rng.random_bool(0.5) {
                OpKind::Put(format!("v{}-{n}", spec.id))
            } else {
                OpKind::Get
            };
            (key.clone(), kind)
        };
        let group = spec.keys.group(&key);
        let op = session.run_op(&key, kind, group, 8).await;
        if let Some(op) = op {
            history.record(op);
        }
        tokio::time::sleep(Duration::from_millis(session.rng.random_range(0..40))).await;
    }
    Ok(())
}

/// The calm phase's reader: from `start_at`, reads every key until it gets an answer, so
/// every acknowledged write must show in the history's last reads. Fails when a key stays
/// unreadable.
pub async fn run_final_reader(
    spec: ClientSpec,
    start_at: Duration,
    history: History,
) -> turmoil::Result {
    let mut session = Session {
        client: spec.id,
        nodes: spec.nodes.clone(),
        leaders: BTreeMap::new(),
        rng: SmallRng::seed_from_u64(spec.seed),
    };
    tokio::time::sleep(start_at.saturating_sub(now())).await;
    for key in spec.keys.all() {
        let group = spec.keys.group(key);
        let op = session.run_op(key, OpKind::Get, group, 200).await;
        match op {
            Some(op) => history.record(op),
            None => return Err(format!("final read of {key} never answered").into()),
        }
    }
    Ok(())
}
