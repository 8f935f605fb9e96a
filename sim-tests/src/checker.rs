//! A linearizability checker in the style of Wing & Gong and porcupine: for each key, a
//! depth-first search for an order of the operations that respects real time (an operation
//! that completed before another was invoked comes first) and that a sequential model of
//! the key (a register that also counts: put, get, incr) explains. Operations with an
//! unknown outcome have no response time: they may be placed anywhere after their
//! invocation, or left out (they never took effect). Visited (placed set, state) pairs are
//! memoized, so the search is polynomial on the histories clients produce.

use std::collections::BTreeMap;
use std::collections::HashSet;

use crate::history::Op;
use crate::history::OpKind;
use crate::history::Outcome;

/// How many search states one key may visit before the check gives up.
const BUDGET: usize = 2_000_000;

/// Why a history is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// No linearization exists for the key; the operations are listed by invocation.
    NotLinearizable {
        /// The key.
        key: String,
        /// Its operations, one per line.
        ops: String,
    },
    /// The search for the key exceeded its budget (neither proven nor refuted).
    TooComplex {
        /// The key.
        key: String,
    },
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::NotLinearizable { key, ops } => {
                write!(f, "history of key {key} is not linearizable:\n{ops}")
            }
            CheckError::TooComplex { key } => write!(f, "check of key {key} exceeded its budget"),
        }
    }
}

/// The model's reply to `kind` from `state` and the state after it.
fn step(state: &Option<String>, kind: &OpKind) -> (Option<String>, Option<String>) {
    match kind {
        OpKind::Put(v) => (Some(v.clone()), Some("OK".to_string())),
        OpKind::Get => (state.clone(), state.clone()),
        OpKind::Incr => {
            let current = match state {
                None => Some(0i64),
                Some(s) => s.parse::<i64>().ok(),
            };
            match current.and_then(|n| n.checked_add(1)) {
                Some(n) => (Some(n.to_string()), Some(n.to_string())),
                None => (state.clone(), Some("ERR".to_string())),
            }
        }
    }
}

/// Checks every key of `history`; the first failing key (by name) is reported.
pub fn check(history: &[Op]) -> Result<(), CheckError> {
    let mut by_key: BTreeMap<&str, Vec<Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(op.key.as_str()).or_default().push(op.clone());
    }
    for (key, ops) in by_key {
        check_key(key, ops)?;
    }
    Ok(())
}

/// The search over one key's operations.
struct Search {
    /// The operations, sorted by invocation; reads with unknown outcome removed.
    ops: Vec<Op>,
    /// Placed-set and state pairs already known to lead nowhere.
    dead: HashSet<(Vec<u64>, Option<String>)>,
    /// States visited so far.
    visited: usize,
}

/// Checks the operations of one key.
pub fn check_key(key: &str, ops: Vec<Op>) -> Result<(), CheckError> {
    let mut ops: Vec<Op> = ops
        .into_iter()
        .filter(|op| op.is_write() || op.outcome != Outcome::Unknown)
        .collect();
    ops.sort_by_key(|op| (op.invoke, op.complete));
    let words = ops.len().div_ceil(64).max(1);
    let mut search = Search {
        ops,
        dead: HashSet::new(),
        visited: 0,
    };
    let mut placed = vec![0u64; words];
    match search.run(&mut placed, &None) {
        Some(true) => Ok(()),
        Some(false) => Err(CheckError::NotLinearizable {
            key: key.to_string(),
            ops: search
                .ops
                .iter()
                .map(|op| format!("  {op}\n"))
                .collect::<String>(),
        }),
        None => Err(CheckError::TooComplex {
            key: key.to_string(),
        }),
    }
}

impl Search {
    /// True when the operations not in `placed` can be linearized from `state`; `None` when
    /// the budget ran out.
    fn run(&mut self, placed: &mut [u64], state: &Option<String>) -> Option<bool> {
        let is_placed = |placed: &[u64], i: usize| placed[i / 64] & (1 << (i % 64)) != 0;
        // The earliest response among the known operations still to place: whatever goes
        // next must have been invoked by then.
        let deadline = self
            .ops
            .iter()
            .enumerate()
            .filter(|(i, op)| !is_placed(placed, *i) && op.outcome != Outcome::Unknown)
            .map(|(_, op)| op.complete)
            .min();
        let Some(deadline) = deadline else {
            return Some(true);
        };
        if self.dead.contains(&(placed.to_vec(), state.clone())) {
            return Some(false);
        }
        self.visited += 1;
        if self.visited > BUDGET {
            return None;
        }
        for i in 0..self.ops.len() {
            if self.ops[i].invoke > deadline {
                break;
            }
            if is_placed(placed, i) {
                continue;
            }
            let (next, reply) = step(state, &self.ops[i].kind);
            let fits = match &self.ops[i].outcome {
                Outcome::Unknown => true,
                Outcome::Done(r) => *r == reply,
            };
            if !fits {
                continue;
            }
            placed[i / 64] |= 1 << (i % 64);
            let found = self.run(placed, &next);
            placed[i / 64] &= !(1 << (i % 64));
            match found {
                Some(false) => {}
                other => return other,
            }
        }
        self.dead.insert((placed.to_vec(), state.clone()));
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Op;

    fn put(c: u32, v: &str, a: u64, b: u64) -> Op {
        Op::done(c, "k", OpKind::Put(v.into()), a, b, Some("OK"))
    }

    fn get(c: u32, v: Option<&str>, a: u64, b: u64) -> Op {
        Op::done(c, "k", OpKind::Get, a, b, v)
    }

    fn incr(c: u32, v: &str, a: u64, b: u64) -> Op {
        Op::done(c, "k", OpKind::Incr, a, b, Some(v))
    }

    #[test]
    fn sequential_and_concurrent_histories_pass() {
        let h = vec![
            get(1, None, 0, 5),
            put(1, "1", 10, 20),
            get(2, Some("1"), 15, 25),
            put(2, "2", 30, 40),
            // Concurrent with the put of 2: may see either value.
            get(3, Some("1"), 29, 35),
            get(1, Some("2"), 41, 50),
        ];
        assert_eq!(check(&h), Ok(()));
    }

    #[test]
    fn stale_read_fails() {
        let h = vec![
            put(1, "1", 0, 10),
            put(1, "2", 11, 20),
            get(2, Some("1"), 21, 30),
        ];
        assert!(matches!(check(&h), Err(CheckError::NotLinearizable { .. })));
    }

    #[test]
    fn lost_acknowledged_write_fails() {
        let h = vec![
            incr(1, "1", 0, 10),
            incr(2, "2", 11, 20),
            get(3, Some("1"), 21, 30),
        ];
        assert!(check(&h).is_err());
        let h = vec![put(1, "x", 0, 10), get(2, None, 11, 20)];
        assert!(check(&h).is_err());
    }

    #[test]
    fn duplicate_counter_value_fails() {
        let h = vec![incr(1, "1", 0, 10), incr(2, "1", 11, 20)];
        assert!(check(&h).is_err());
        // Concurrent increments answering 1 and 2 in either order are fine.
        let h = vec![incr(1, "2", 0, 10), incr(2, "1", 5, 20)];
        assert_eq!(check(&h), Ok(()));
    }

    #[test]
    fn unknown_writes_may_or_may_not_apply() {
        let unknown = Op::unknown(1, "k", OpKind::Put("1".into()), 0, 5);
        // Not applied yet, then applied: fine.
        let h = vec![
            unknown.clone(),
            get(2, None, 6, 8),
            get(2, Some("1"), 9, 12),
        ];
        assert_eq!(check(&h), Ok(()));
        // Never applied: fine.
        let h = vec![unknown.clone(), get(2, None, 100, 120)];
        assert_eq!(check(&h), Ok(()));
        // Applied, then gone: not linearizable.
        let h = vec![unknown, get(2, Some("1"), 6, 8), get(2, None, 9, 12)];
        assert!(check(&h).is_err());
        // An unknown increment counts at most once.
        let u = Op::unknown(1, "k", OpKind::Incr, 0, 5);
        let h = vec![u, incr(2, "2", 10, 20)];
        assert_eq!(check(&h), Ok(()));
        let u = Op::unknown(1, "k", OpKind::Incr, 0, 5);
        let h = vec![u, incr(2, "3", 10, 20)];
        assert!(check(&h).is_err());
    }

    #[test]
    fn unknown_reads_are_ignored_and_keys_are_independent() {
        let mut h = vec![Op::unknown(1, "k", OpKind::Get, 0, 5), put(1, "1", 10, 20)];
        h.push(Op::done(2, "other", OpKind::Get, 0, 100, None));
        assert_eq!(check(&h), Ok(()));
    }
}
