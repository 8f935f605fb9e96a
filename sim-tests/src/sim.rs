//! One seeded simulation: builds the turmoil world (nodes, clients, final reader), drives
//! it step by step through a chaos phase of faults and a calm phase that heals everything,
//! demands convergence, and checks the history.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use raft::openraft::ServerState;
use raft::GroupId;
use raft::LogId;
use raft::MemKv;
use raft::NodeId;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::checker;
use crate::client::run_client;
use crate::client::run_final_reader;
use crate::client::ClientSpec;
use crate::client::Keyspace;
use crate::faults::run_reconfigurer;
use crate::faults::Faults;
use crate::history::History;
use crate::history::Op;
use crate::history::Outcome;
use crate::node::host_name;
use crate::node::run_node;
use crate::node::Mutant;
use crate::node::NodeSpec;
use crate::node::Shared;

/// The shape of one simulation.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Nodes in the cluster (every node runs every group).
    pub nodes: u64,
    /// Data groups (`1..=groups`).
    pub groups: u32,
    /// Chaos-phase clients.
    pub clients: u32,
    /// Register keys and counter keys.
    pub keys: (usize, usize),
    /// Length of the chaos phase (faults and client operations).
    pub chaos: Duration,
    /// The calm phase's limit: by then everything must have converged.
    pub calm: Duration,
    /// Whether the chaos phase injects faults.
    pub faults: bool,
    /// Snapshot every this many entries (`None`: never).
    pub snapshot_every: Option<u64>,
    /// A deliberate bug planted in every node (to test the checks), or `None`.
    pub mutant: Option<Mutant>,
    /// Whether the chaos phase also changes the groups' voters ([`run_reconfigurer`]).
    pub reconfigure: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            nodes: 3,
            groups: 2,
            clients: 3,
            keys: (4, 2),
            chaos: Duration::from_secs(8),
            calm: Duration::from_secs(20),
            faults: true,
            snapshot_every: Some(40),
            mutant: None,
            reconfigure: false,
        }
    }
}

/// The final state of one replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// The last applied log id.
    pub last_applied: Option<LogId>,
    /// The state machine.
    pub kv: MemKv,
    /// The last log id covered by the replica's snapshot.
    pub snapshot: Option<LogId>,
}

/// What one simulation produced.
#[derive(Debug, Clone)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Every recorded operation, in completion order.
    pub history: Vec<Op>,
    /// Each replica's final state by (group, node), when the cluster converged.
    pub replicas: BTreeMap<(GroupId, NodeId), Replica>,
    /// The faults injected, in order.
    pub faults: Vec<String>,
    /// Everything that went wrong (empty: the seed passed).
    pub violations: Vec<String>,
    /// Virtual time at the end.
    pub elapsed: Duration,
}

impl SimReport {
    /// True when nothing went wrong.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// A digest of what the run did, equal for two runs of one seed.
    pub fn fingerprint(&self) -> String {
        let mut out = String::new();
        for op in &self.history {
            out.push_str(&op.to_string());
            out.push('\n');
        }
        for ((g, n), r) in &self.replicas {
            out.push_str(&format!("{g} n{n} {:?} {:?}\n", r.last_applied, r.kv));
        }
        out
    }
}

/// The state of every replica if the cluster has converged: every node running, each
/// group with one leader that all nodes agree on, and every replica having applied the
/// same log to the same state.
fn converged(shared: &Shared, nodes: u64) -> Option<BTreeMap<(GroupId, NodeId), Replica>> {
    let registry = shared.registry.borrow();
    if registry.len() as u64 != nodes {
        return None;
    }
    let groups = registry.values().next()?.group_ids();
    let mut out = BTreeMap::new();
    for g in groups {
        let mut leader = None;
        let mut first: Option<(Option<NodeId>, Option<LogId>, MemKv)> = None;
        for (&id, multi) in registry.iter() {
            let group = multi.group(g)?;
            let m = group.raft.metrics().borrow().clone();
            if m.state == ServerState::Leader {
                if leader.is_some() {
                    return None;
                }
                leader = Some(id);
            }
            if m.current_leader.is_none() || m.last_applied.map(|l| l.index) != m.last_log_index {
                return None;
            }
            let replica = Replica {
                last_applied: m.last_applied,
                kv: group.state.read(MemKv::clone),
                snapshot: m.snapshot,
            };
            // Snapshots are taken by each replica on its own schedule: not compared.
            let view = (m.current_leader, replica.last_applied, replica.kv.clone());
            match &first {
                None => first = Some(view),
                Some(f) if *f != view => return None,
                Some(_) => {}
            }
            out.insert((g, id), replica);
        }
        if leader.is_none() || first.and_then(|f| f.0) != leader {
            return None;
        }
    }
    Some(out)
}

/// Each replica's Raft view, for reports: state, term, leader, last log index, applied.
fn describe(shared: &Shared) -> String {
    let mut out = Vec::new();
    for (&id, multi) in shared.registry.borrow().iter() {
        for g in multi.group_ids() {
            if let Some(group) = multi.group(g) {
                let m = group.raft.metrics().borrow().clone();
                out.push(format!(
                    "{g} n{id}: {:?} vote {} leader {:?} log {:?} applied {:?}",
                    m.state,
                    m.vote,
                    m.current_leader,
                    m.last_log_index,
                    m.last_applied.map(|l| l.index)
                ));
            }
        }
    }
    out.join("; ")
}

/// What the per-step invariants remember.
#[derive(Default)]
struct Applied {
    /// The log id seen applied at each (group, index), on any node.
    at: BTreeMap<(GroupId, u64), LogId>,
    /// The last applied index seen on each (group, node, boot).
    last: BTreeMap<(GroupId, NodeId, u64), u64>,
}

/// State-machine safety, checked after every step: two replicas never apply different
/// entries at one index (an applied entry is committed, and a committed index holds one
/// entry), and a replica's applied index never goes back while it runs.
fn check_applied(shared: &Shared, seen: &mut Applied, now: Duration, violations: &mut Vec<String>) {
    let boots = shared.boots.borrow();
    for (&id, multi) in shared.registry.borrow().iter() {
        let boot = boots.get(&id).copied().unwrap_or(0);
        for g in multi.group_ids() {
            let Some(group) = multi.group(g) else {
                continue;
            };
            let Some(applied) = group.raft.metrics().borrow().last_applied else {
                continue;
            };
            let first = *seen.at.entry((g, applied.index)).or_insert(applied);
            if first != applied {
                violations.push(format!(
                    "{now:?}: {g} n{id} applied {applied} at index {}, another replica {first}",
                    applied.index
                ));
            }
            let last = seen.last.entry((g, id, boot)).or_insert(applied.index);
            if applied.index < *last {
                violations.push(format!(
                    "{now:?}: {g} n{id} applied index went back from {last} to {}",
                    applied.index
                ));
            }
            *last = applied.index;
        }
    }
}

/// Every key's last read by the final reader must show the converged state.
fn check_final_reads(
    history: &[Op],
    replicas: &BTreeMap<(GroupId, NodeId), Replica>,
    keys: &Keyspace,
    violations: &mut Vec<String>,
) {
    for key in keys.all() {
        let group = keys.group(key);
        let Some(replica) = replicas
            .iter()
            .find(|((g, _), _)| *g == group)
            .map(|(_, r)| r)
        else {
            continue;
        };
        let stored = replica
            .kv
            .get(key)
            .map(|v| String::from_utf8_lossy(v).into_owned());
        let read = history
            .iter()
            .rev()
            .find(|op| op.client == 0 && op.key == *key)
            .map(|op| op.outcome.clone());
        if read != Some(Outcome::Done(stored.clone())) {
            violations.push(format!(
                "final read of {key} gave {read:?}, replicas hold {stored:?}"
            ));
        }
    }
}

/// Runs the simulation of `seed`.
pub fn run(seed: u64, cfg: &SimConfig) -> SimReport {
    let tmp = tempfile::tempdir().expect("temp dir");
    let history = History::new();
    let shared = Rc::new(Shared::default());
    let total = cfg.chaos + cfg.calm;
    let mut sim = turmoil::Builder::new()
        .simulation_duration(total + Duration::from_secs(60))
        .tick_duration(Duration::from_millis(1))
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(8))
        .rng_seed(seed)
        .build();
    let members: Vec<NodeId> = (1..=cfg.nodes).collect();
    let groups: Vec<GroupId> = (1..=cfg.groups).map(GroupId).collect();
    for &id in &members {
        let spec = NodeSpec {
            id,
            members: members.clone(),
            groups: groups.clone(),
            dir: tmp.path().join(format!("node-{id}")),
            seed,
            snapshot_every: cfg.snapshot_every,
            mutant: cfg.mutant,
        };
        let shared = shared.clone();
        sim.host(host_name(id), move || {
            run_node(spec.clone(), shared.clone())
        });
    }
    let keys = Keyspace::new(cfg.keys.0, cfg.keys.1, cfg.groups);
    let client_seed = |c: u32| seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ u64::from(c);
    let mut client_hosts = Vec::new();
    for c in 1..=cfg.clients {
        let spec = ClientSpec {
            id: c,
            seed: client_seed(c),
            nodes: members.clone(),
            keys: keys.clone(),
            stop_at: cfg.chaos,
        };
        client_hosts.push(format!("c{c}"));
        sim.client(format!("c{c}"), run_client(spec, history.clone()));
    }
    let reader = ClientSpec {
        id: 0,
        seed: client_seed(0),
        nodes: members.clone(),
        keys: keys.clone(),
        stop_at: total,
    };
    let read_at = cfg.chaos + Duration::from_secs(3);
    sim.client("reader", run_final_reader(reader, read_at, history.clone()));
    let reconfigured = Rc::new(std::cell::RefCell::new(Vec::new()));
    if cfg.reconfigure {
        sim.client(
            "operator",
            run_reconfigurer(
                shared.clone(),
                seed,
                members.clone(),
                groups.clone(),
                cfg.chaos,
                reconfigured.clone(),
            ),
        );
    }

    let mut faults = Faults::new(
        SmallRng::seed_from_u64(seed ^ 0x000f_a017),
        members.clone(),
        client_hosts,
        Duration::from_millis(1000),
    );
    let mut violations = Vec::new();
    let mut replicas = BTreeMap::new();
    let mut healed = false;
    let mut applied = Applied::default();
    loop {
        let now = sim.elapsed();
        if now < cfg.chaos {
            if cfg.faults {
                faults.tick(&mut sim, &shared, now);
            }
        } else if !healed {
            faults.heal_all(&mut sim, now);
            healed = true;
        }
        let done = match sim.step() {
            Ok(done) => done,
            Err(e) => {
                violations.push(format!("simulation failed at {now:?}: {e}"));
                break;
            }
        };
        check_applied(&shared, &mut applied, now, &mut violations);
        if done && healed {
            if let Some(r) = converged(&shared, cfg.nodes) {
                replicas = r;
                break;
            }
        }
        if sim.elapsed() > total {
            violations.push(format!(
                "no convergence by {total:?} (clients done: {done}): {}",
                describe(&shared)
            ));
            break;
        }
    }
    let ops = history.ops();
    if let Err(e) = checker::check(&ops) {
        violations.push(e.to_string());
    }
    if !replicas.is_empty() {
        check_final_reads(&ops, &replicas, &keys, &mut violations);
    }
    violations.truncate(20);
    let elapsed = sim.elapsed();
    drop(sim);
    shared.registry.borrow_mut().clear();
    SimReport {
        seed,
        history: ops,
        replicas,
        faults: {
            let mut log = std::mem::take(&mut faults.log);
            log.extend(reconfigured.take());
            log
        },
        violations,
        elapsed,
    }
}
