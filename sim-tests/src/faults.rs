//! The chaos phase's faults, drawn from the simulation's seed: full partitions between two
//! nodes, isolating a node (often a group's leader) from every other host, one-way
//! partitions, held links (messages delayed until released) and crashes with restart from
//! the same disk. Each fault lasts a drawn time and is then undone; [`Faults::heal_all`]
//! undoes whatever is left when the calm phase starts. [`run_reconfigurer`] changes the
//! groups' voters meanwhile (Raft membership changes, as moving a group between nodes
//! does).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use raft::openraft::ServerState;
use raft::GroupId;
use raft::NodeId;
use rand::rngs::SmallRng;
use rand::Rng;
use rand::SeedableRng;

use crate::node::host_name;
use crate::node::Shared;

/// How a link between two hosts is broken (turmoil cannot combine these on one pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Messages are dropped both ways.
    Partitioned,
    /// Messages from the first host of the pair to the second are dropped.
    OneWay,
    /// Messages wait until released.
    Held,
}

/// One fault in force, and how to undo it.
#[derive(Debug, Clone)]
enum Active {
    /// Links broken by one fault.
    Links(Vec<(String, String, Link)>),
    /// A crashed node.
    Crash(NodeId),
}

/// The fault injector of one simulation.
pub struct Faults {
    /// Draws every choice (seeded from the simulation's seed).
    rng: SmallRng,
    /// The nodes.
    nodes: Vec<NodeId>,
    /// The client hosts.
    clients: Vec<String>,
    /// Broken links by (from, to) host names.
    links: BTreeMap<(String, String), Link>,
    /// Crashed nodes.
    crashed: BTreeSet<NodeId>,
    /// Faults in force, by the virtual time they end.
    active: Vec<(Duration, Active)>,
    /// When the next fault starts.
    next_at: Duration,
    /// What was done, for reports.
    pub log: Vec<String>,
}

/// The sorted pair key of two hosts.
fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

impl Faults {
    /// An injector over `nodes` and client hosts `clients`, first fault at `first_at`.
    pub fn new(
        rng: SmallRng,
        nodes: Vec<NodeId>,
        clients: Vec<String>,
        first_at: Duration,
    ) -> Self {
        Faults {
            rng,
            nodes,
            clients,
            links: BTreeMap::new(),
            crashed: BTreeSet::new(),
            active: Vec::new(),
            next_at: first_at,
            log: Vec::new(),
        }
    }

    /// The nodes crashed now.
    pub fn crashed(&self) -> &BTreeSet<NodeId> {
        &self.crashed
    }

    /// Ends the faults due by `now` and starts the next one when it is due.
    pub fn tick(&mut self, sim: &mut turmoil::Sim<'_>, shared: &Shared, now: Duration) {
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(|(end, _)| *end <= now);
        self.active = rest;
        for (_, fault) in due {
            self.undo(sim, fault, now);
        }
        if now >= self.next_at {
            // A drawn fault may not fit (its links are broken already, too many nodes
            // down): draw again a few times.
            for _ in 0..4 {
                if self.start_one(sim, shared, now) {
                    break;
                }
            }
            self.next_at = now + Duration::from_millis(self.rng.random_range(150..900));
        }
    }

    /// Breaks the (from, to) link as `link` if it is whole; true when done.
    fn break_link(&mut self, sim: &turmoil::Sim<'_>, from: &str, to: &str, link: Link) -> bool {
        let key = pair(from, to);
        if self.links.contains_key(&key) {
            return false;
        }
        match link {
            Link::Partitioned => sim.partition(from, to),
            Link::OneWay => sim.partition_oneway(from, to),
            Link::Held => sim.hold(from, to),
        }
        self.links.insert(key, link);
        true
    }

    /// Repairs the (from, to) link broken as `link`.
    fn fix_link(&mut self, sim: &turmoil::Sim<'_>, from: &str, to: &str, link: Link) {
        match link {
            Link::Partitioned => sim.repair(from, to),
            Link::OneWay => sim.repair_oneway(from, to),
            Link::Held => sim.release(from, to),
        }
        self.links.remove(&pair(from, to));
    }

    /// The current leader of a random group, as some running node sees it.
    fn some_leader(&mut self, shared: &Shared) -> Option<NodeId> {
        let registry = shared.registry.borrow();
        let leaders: Vec<NodeId> = registry
            .iter()
            .filter(|(_, multi)| {
                multi.group_ids().iter().any(|&g| {
                    multi
                        .group(g)
                        .is_some_and(|g| g.raft.metrics().borrow().state == ServerState::Leader)
                })
            })
            .map(|(&id, _)| id)
            .collect();
        if leaders.is_empty() {
            None
        } else {
            Some(leaders[self.rng.random_range(0..leaders.len())])
        }
    }

    /// A random node.
    fn some_node(&mut self) -> NodeId {
        self.nodes[self.rng.random_range(0..self.nodes.len())]
    }

    /// Starts one random fault; false when the drawn one does not fit now.
    fn start_one(&mut self, sim: &mut turmoil::Sim<'_>, shared: &Shared, now: Duration) -> bool {
        let lasts = Duration::from_millis(self.rng.random_range(200..2500));
        let kind = self.rng.random_range(0..100);
        let fault = if kind < 15 {
            // Crash and later restart a node, keeping at most a minority down.
            let node = self.some_node();
            if self.crashed.contains(&node) || self.crashed.len() + 1 > (self.nodes.len() - 1) / 2 {
                return false;
            }
            sim.crash(host_name(node));
            shared.registry.borrow_mut().remove(&node);
            self.crashed.insert(node);
            self.log
                .push(format!("{now:?}: crash n{node} for {lasts:?}"));
            Active::Crash(node)
        } else {
            let mut broken = Vec::new();
            let (what, node) = if kind < 45 {
                let node = self.some_leader(shared).unwrap_or_else(|| self.some_node());
                ("isolate leader", node)
            } else if kind < 60 {
                ("isolate", self.some_node())
            } else {
                ("link", self.some_node())
            };
            if what == "link" {
                let other = self.some_node();
                if other == node {
                    return false;
                }
                let link = match self.rng.random_range(0..3) {
                    0 => Link::Partitioned,
                    1 => Link::OneWay,
                    _ => Link::Held,
                };
                let (a, b) = (host_name(node), host_name(other));
                if self.break_link(sim, &a, &b, link) {
                    broken.push((a, b, link));
                }
            } else {
                let a = host_name(node);
                let mut others: Vec<String> = self
                    .nodes
                    .iter()
                    .filter(|&&n| n != node)
                    .map(|&n| host_name(n))
                    .collect();
                if self.rng.random_bool(0.5) {
                    others.extend(self.clients.iter().cloned());
                }
                let link = if self.rng.random_bool(0.2) {
                    Link::OneWay
                } else {
                    Link::Partitioned
                };
                for b in others {
                    if self.break_link(sim, &a, &b, link) {
                        broken.push((a.clone(), b, link));
                    }
                }
            }
            if broken.is_empty() {
                return false;
            }
            self.log.push(format!(
                "{now:?}: {what} n{node} for {lasts:?}: {:?}",
                broken
                    .iter()
                    .map(|(a, b, l)| format!("{a}-{b} {l:?}"))
                    .collect::<Vec<_>>()
            ));
            Active::Links(broken)
        };
        self.active.push((now + lasts, fault));
        true
    }

    /// Undoes one fault.
    fn undo(&mut self, sim: &mut turmoil::Sim<'_>, fault: Active, now: Duration) {
        match fault {
            Active::Links(links) => {
                for (a, b, link) in links {
                    self.fix_link(sim, &a, &b, link);
                }
            }
            Active::Crash(node) => {
                sim.bounce(host_name(node));
                self.crashed.remove(&node);
                self.log.push(format!("{now:?}: restart n{node}"));
            }
        }
    }

    /// Undoes every fault in force and starts no more.
    pub fn heal_all(&mut self, sim: &mut turmoil::Sim<'_>, now: Duration) {
        for (_, fault) in std::mem::take(&mut self.active) {
            self.undo(sim, fault, now);
        }
        self.next_at = Duration::MAX;
        self.log.push(format!("{now:?}: heal all"));
    }
}

/// Changes group voters during the chaos phase, as an operator (or Ember's placement
/// follower) moving groups does: every 300-1500 ms, the leader of a random group is asked
/// to make a random subset of the nodes its voters (at least 3 of 4 or more nodes, at
/// least 2 of 3), keeping the others as learners, so the next change can bring them back.
/// A change that does not finish within 2 s (the leader lost its quorum or crashed) is
/// abandoned; openraft completes or discards it. What it asked goes into `log`.
pub async fn run_reconfigurer(
    shared: Rc<crate::node::Shared>,
    seed: u64,
    nodes: Vec<NodeId>,
    groups: Vec<GroupId>,
    stop_at: Duration,
    log: Rc<RefCell<Vec<String>>>,
) -> turmoil::Result {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x7ec0_4f16);
    let min = if nodes.len() >= 4 {
        3
    } else {
        2.min(nodes.len())
    };
    loop {
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..1500))).await;
        let now = turmoil::sim_elapsed().unwrap_or_default();
        if now >= stop_at {
            return Ok(());
        }
        let g = groups[rng.random_range(0..groups.len())];
        let size = rng.random_range(min..=nodes.len());
        let mut pool = nodes.clone();
        let mut voters = BTreeSet::new();
        while voters.len() < size {
            voters.insert(pool.swap_remove(rng.random_range(0..pool.len())));
        }
        let leader = shared.registry.borrow().iter().find_map(|(&id, multi)| {
            let group = multi.group(g)?;
            (group.raft.metrics().borrow().state == ServerState::Leader)
                .then(|| (id, group.raft.clone()))
        });
        let Some((id, raft)) = leader else { continue };
        let res = tokio::time::timeout(
            Duration::from_secs(2),
            raft.change_membership(voters.clone(), true),
        )
        .await;
        let outcome = match res {
            Ok(Ok(_)) => "done".to_string(),
            Ok(Err(e)) => format!("refused: {e}"),
            Err(_) => "abandoned".to_string(),
        };
        log.borrow_mut().push(format!(
            "{now:?}: {g} voters -> {voters:?} via n{id}: {outcome}"
        ));
    }
}
