//! The oracle's record: every client operation with its invocation and response times
//! (turmoil's virtual time) and its result, or "unknown" when the client gave up (timeout,
//! broken connection) without learning whether it took effect.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

/// What a client asked for, on one key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Stores the value.
    Put(String),
    /// Reads the value (linearizable read on the leader).
    Get,
    /// Adds one to the integer value (missing counts as 0).
    Incr,
}

/// What a client learned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The reply: `OK` for a put, the value (`None`: missing) for a get, the new integer
    /// for an incr, `ERR` for a refused command.
    Done(Option<String>),
    /// No reply: the operation may or may not have taken effect (writes), or is ignored
    /// (reads).
    Unknown,
}

/// One operation of the history.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Op {
    /// The client that ran it.
    pub client: u32,
    /// The key it touched.
    pub key: String,
    /// What it did.
    pub kind: OpKind,
    /// When the client invoked it (virtual time since the simulation started).
    pub invoke: Duration,
    /// When the client got the reply or gave up.
    pub complete: Duration,
    /// The result.
    pub outcome: Outcome,
}

impl Op {
    /// An operation with a known result.
    pub fn done(
        client: u32,
        key: &str,
        kind: OpKind,
        invoke_ms: u64,
        complete_ms: u64,
        reply: Option<&str>,
    ) -> Op {
        Op {
            client,
            key: key.to_string(),
            kind,
            invoke: Duration::from_millis(invoke_ms),
            complete: Duration::from_millis(complete_ms),
            outcome: Outcome::Done(reply.map(str::to_string)),
        }
    }

    /// An operation whose result the client never learned.
    pub fn unknown(client: u32, key: &str, kind: OpKind, invoke_ms: u64, gave_up_ms: u64) -> Op {
        Op {
            client,
            key: key.to_string(),
            kind,
            invoke: Duration::from_millis(invoke_ms),
            complete: Duration::from_millis(gave_up_ms),
            outcome: Outcome::Unknown,
        }
    }

    /// True for a put or an incr.
    pub fn is_write(&self) -> bool {
        !matches!(self.kind, OpKind::Get)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            OpKind::Put(v) => format!("put {} {v}", self.key),
            OpKind::Get => format!("get {}", self.key),
            OpKind::Incr => format!("incr {}", self.key),
        };
        let outcome = match &self.outcome {
            Outcome::Done(Some(r)) => r.clone(),
            Outcome::Done(None) => "nil".to_string(),
            Outcome::Unknown => "unknown".to_string(),
        };
        write!(
            f,
            "[{:>7}ms {:>7}ms] c{} {kind} -> {outcome}",
            self.invoke.as_millis(),
            self.complete.as_millis(),
            self.client
        )
    }
}

/// The shared history every client appends to (one simulation runs on one thread).
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The operations, in completion order.
    ops: Rc<RefCell<Vec<Op>>>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `op`.
    pub fn record(&self, op: Op) {
        self.ops.borrow_mut().push(op);
    }

    /// A copy of the operations, in completion order.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.borrow().clone()
    }
}
