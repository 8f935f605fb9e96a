//! How many workers serve connections: as few as carry the load as fast as more would.
//!
//! Workers `0..active` take new connections; the rest keep only the connections they had.
//! A controller thread looks at the commands run every [`TICK`] and, while the load is
//! steady, tries a neighbour: twice the workers when the active ones are busy, half when
//! more are active. A trial is kept when it pays (at least [`UP_GAIN`] times the commands
//! per second with more workers; at least [`DOWN_KEEP`] times with fewer), else undone and
//! tried again after a wait that doubles each time it fails, up to [`MAX_WAIT`].
//!
//! Why: on a small machine shared with the clients, a request-response load (pipeline 1)
//! is no faster on two workers than on one, and two workers sleeping and waking beside the
//! clients' own threads wait for a CPU far more often (a worse p99); a pipelined load runs
//! 1.4-2x faster on two. Only trying tells them apart.
//!
//! Connections move between workers at a quiet point ([`Balance::take_move`]: everything
//! read has run, every reply is written); the connection's state travels whole to the
//! other worker ([`Arrival::Moved`]), which registers the socket with its own reactor.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::server::Server;

/// How often the controller looks.
pub const TICK: Duration = Duration::from_millis(100);
/// Ticks a trial waits for connections to move before measuring.
const SETTLE: u32 = 1;
/// Ticks a trial measures.
const MEASURE: u32 = 2;
/// A trial with more workers is kept at this many times the commands per second.
pub const UP_GAIN: f64 = 1.10;
/// A trial with fewer workers is kept when it still runs this share of the commands.
pub const DOWN_KEEP: f64 = 0.95;
/// Mean CPU share of the active workers from which more workers are worth a trial.
const BUSY_UP: f64 = 0.75;
/// More workers are worth a trial only while the machine has this many idle CPUs per
/// added worker: with the clients on the same cores (a request-response load here leaves
/// 0.2-0.3 of a core idle, pipelined ones 0.7-0.9) more workers only take turns.
const IDLE_UP: f64 = 0.5;
/// Fewer workers are worth a trial when the active ones use at most this many of the
/// fewer workers' CPUs (the active workers' CPU is partly waking up and sleeping, which
/// fewer and busier workers do less of).
const FIT_DOWN: f64 = 1.2;
/// Below this many commands per second the load is idle: one worker serves it.
const IDLE_RATE: f64 = 1000.0;
/// The shortest wait between trials of one direction, in ticks.
const MIN_WAIT: u64 = 20;
/// The longest wait between trials of one direction, in ticks.
pub const MAX_WAIT: u64 = 300;
/// Two successive ticks whose rates differ by more than this share are not a steady load.
const STEADY: f64 = 0.15;

/// A connection for a worker: a new one (with the client id the acceptor gave it) or one
/// moving in from another worker.
pub enum Arrival {
    /// Just accepted.
    New(std::net::TcpStream, u64),
    /// Moved from another worker with its whole state.
    Moved(Box<crate::conn::Moving>),
}

/// What the workers read: the active count, and per worker the connections to move away.
pub struct Balance {
    active: AtomicUsize,
    /// DEBUG SPREAD: a fixed active count (0: the controller decides).
    pinned: AtomicUsize,
    shed: Box<[Shed]>,
    live: Box<[AtomicUsize]>,
    tids: Box<[AtomicU64]>,
    next: AtomicUsize,
    moved: AtomicU64,
    /// The worker running a script ([`Balance::stall_here`]), or [`NONE`].
    stalled: AtomicUsize,
    handoffs: OnceLock<Vec<mpsc::UnboundedSender<Arrival>>>,
}

/// No worker.
const NONE: usize = usize::MAX;

thread_local! {
    /// The worker this thread is ([`Balance::register_thread`]), or [`NONE`].
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(NONE) };
}

/// Marks a worker as running a script until dropped ([`Balance::stall_here`]).
pub struct Stall<'a> {
    balance: &'a Balance,
    worker: usize,
}

impl Stall<'_> {
    /// The worker running the script (`None` on a thread that is not a worker).
    pub fn worker(&self) -> Option<usize> {
        (self.worker != NONE).then_some(self.worker)
    }
}

impl Drop for Stall<'_> {
    fn drop(&mut self) {
        if self.worker != NONE {
            let _ = self
                .balance
                .stalled
                .compare_exchange(self.worker, NONE, Relaxed, Relaxed);
        }
    }
}

/// Connections a worker is asked to hand to others, in turn to workers `base..base + span`
/// (its own cache line: every batch of that worker reads it).
#[repr(align(64))]
#[derive(Default)]
struct Shed {
    count: AtomicUsize,
    base: AtomicUsize,
    span: AtomicUsize,
}

impl Balance {
    /// `workers` workers, one of them active.
    pub fn new(workers: usize) -> Self {
        let workers = workers.max(1);
        Balance {
            active: AtomicUsize::new(1),
            pinned: AtomicUsize::new(0),
            shed: (0..workers).map(|_| Shed::default()).collect(),
            live: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            tids: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            next: AtomicUsize::new(0),
            moved: AtomicU64::new(0),
            stalled: AtomicUsize::new(NONE),
            handoffs: OnceLock::new(),
        }
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.shed.len()
    }

    /// Workers taking new connections now.
    pub fn active(&self) -> usize {
        self.active.load(Relaxed)
    }

    /// Connections moved between workers since start.
    pub fn moved(&self) -> u64 {
        self.moved.load(Relaxed)
    }

    /// Connections served by each worker now.
    pub fn live(&self) -> Vec<usize> {
        self.live.iter().map(|l| l.load(Relaxed)).collect()
    }

    /// The channels to the workers (set once, when they start).
    pub fn set_handoffs(&self, h: Vec<mpsc::UnboundedSender<Arrival>>) {
        let _ = self.handoffs.set(h);
    }

    /// Hands `a` to `worker`; gives it back when that worker is gone.
    pub fn send(&self, worker: usize, a: Arrival) -> Result<(), Arrival> {
        match self.handoffs.get().and_then(|h| h.get(worker)) {
            Some(tx) => tx.send(a).map_err(|e| e.0),
            None => Err(a),
        }
    }

    /// The worker for a new connection: the active ones in turn, passing over one that runs
    /// a script (its connections wait for the script: a new one must be able to kill it).
    pub fn pick(&self) -> usize {
        let w = self.next.fetch_add(1, Relaxed) % self.active().max(1);
        if w == self.stalled.load(Relaxed) {
            (w + 1) % self.workers()
        } else {
            w
        }
    }

    /// Marks the calling worker as running a script until the guard drops: new
    /// connections go to another worker, and none moves onto this one. Nothing on a thread
    /// that is not a worker.
    pub fn stall_here(&self) -> Stall<'_> {
        let worker = WORKER.with(|w| w.get());
        if worker != NONE {
            self.stalled.store(worker, Relaxed);
        }
        Stall {
            balance: self,
            worker,
        }
    }

    /// A connection starts being served by `worker`.
    pub fn joined(&self, worker: usize) {
        if let Some(l) = self.live.get(worker) {
            l.fetch_add(1, Relaxed);
        }
    }

    /// A connection stops being served by `worker` (closed or moved away).
    pub fn left(&self, worker: usize) {
        if let Some(l) = self.live.get(worker) {
            let _ = l.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Where a connection of `worker`, at a quiet point, should go now, if anywhere. One
    /// relaxed load when nothing moves.
    #[inline]
    pub fn take_move(&self, worker: usize) -> Option<usize> {
        let s = self.shed.get(worker)?;
        if s.count.load(Relaxed) == 0 {
            return None;
        }
        let n = s
            .count
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
            .ok()?;
        let to = s.base.load(Relaxed) + n % s.span.load(Relaxed).max(1);
        if to == worker || to >= self.workers() || to == self.stalled.load(Relaxed) {
            return None;
        }
        self.moved.fetch_add(1, Relaxed);
        Some(to)
    }

    /// Makes `to` workers active (at least 1, at most all) and asks the others' connections
    /// to move, so the active ones serve about as many each.
    pub fn set_active(&self, to: usize) {
        let to = to.clamp(1, self.workers());
        let from = self.active.swap(to, Relaxed);
        let live = self.live();
        for (s, m) in self.shed.iter().zip(plan(&live, from, to)) {
            s.count.store(0, Relaxed);
            s.base.store(m.base, Relaxed);
            s.span.store(m.span, Relaxed);
            s.count.store(m.count, Relaxed);
        }
    }

    /// DEBUG SPREAD: `n` workers from now on, whatever the load (0: the controller decides
    /// again).
    pub fn pin(&self, n: usize) {
        self.pinned.store(n.min(self.workers()), Relaxed);
        if n > 0 {
            self.set_active(n);
        }
    }

    /// The fixed active count DEBUG SPREAD set, if any.
    pub fn pinned(&self) -> Option<usize> {
        Some(self.pinned.load(Relaxed)).filter(|&n| n > 0)
    }

    /// Called by each worker thread as it starts: which worker the thread is, and where to
    /// read its CPU time.
    pub fn register_thread(&self, worker: usize) {
        WORKER.with(|w| w.set(worker));
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse::<u64>().ok());
        if let (Some(t), Some(slot)) = (tid, self.tids.get(worker)) {
            slot.store(t, Relaxed);
        }
    }

    /// CPU nanoseconds `worker`'s thread has run, if the system says.
    fn cpu_ns(&self, worker: usize) -> Option<u64> {
        let tid = self.tids.get(worker)?.load(Relaxed);
        if tid == 0 {
            return None;
        }
        let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        s.split_ascii_whitespace().next()?.parse().ok()
    }
}

/// One worker's part of a [`plan`]: move `count` connections, in turn to workers
/// `base..base + span`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moves {
    /// How many.
    pub count: usize,
    /// The first worker they go to.
    pub base: usize,
    /// How many workers they go to.
    pub span: usize,
}

/// Per worker, the connections to move for `from` -> `to` active workers with `live[i]`
/// connections on worker `i`. Growing, each old worker gives what it has above an even
/// share to the new ones in turn; shrinking, the workers left out give all (`usize::MAX`:
/// also those that wake up later) to the remaining ones in turn.
pub fn plan(live: &[usize], from: usize, to: usize) -> Vec<Moves> {
    let none = Moves {
        count: 0,
        base: 0,
        span: 1,
    };
    let mut out = vec![none; live.len()];
    if to == 0 {
        return out;
    }
    if to > from {
        let total: usize = live.iter().sum();
        let share = total.div_ceil(to);
        for (o, &l) in out.iter_mut().zip(live).take(from) {
            *o = Moves {
                count: l.saturating_sub(share),
                base: from,
                span: to - from,
            };
        }
    } else {
        for o in out.iter_mut().skip(to) {
            *o = Moves {
                count: usize::MAX,
                base: 0,
                span: to,
            };
        }
    }
    out
}

/// One tick's reading: commands run and CPU used by the active workers.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Commands run during the tick.
    pub ops: u64,
    /// Seconds the tick lasted.
    pub secs: f64,
    /// Mean CPU share of the active workers during the tick (None: unknown).
    pub busy: Option<f64>,
    /// Idle CPUs of the machine during the tick (None: unknown).
    pub idle: Option<f64>,
}

#[derive(Clone, Copy, Debug)]
struct Trial {
    from: usize,
    to: usize,
    base: f64,
    settle: u32,
    ops: u64,
    secs: f64,
    ticks: u32,
}

/// When to try one direction again (in ticks), and the wait after the next failure.
#[derive(Debug)]
struct Backoff {
    wait: u64,
    next: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::now(0)
    }
}

impl Backoff {
    /// Tried at `now`, the shortest wait after.
    fn now(now: u64) -> Self {
        Backoff {
            wait: MIN_WAIT,
            next: now,
        }
    }

    /// A trial this way paid: again soon.
    fn paid(&mut self, now: u64) {
        self.wait = MIN_WAIT;
        self.next = now + MIN_WAIT;
    }

    /// A trial this way did not pay: wait, and twice as long after the next failure.
    fn failed(&mut self, now: u64) {
        self.next = now + self.wait;
        self.wait = (self.wait * 2).min(MAX_WAIT);
    }

    /// A trial the other way paid: not before the current wait.
    fn later(&mut self, now: u64) {
        self.next = now + self.wait;
    }
}

/// The decisions, apart from any clock or thread: fed one [`Sample`] a tick, answers the
/// active count to set when it changes.
#[derive(Debug)]
pub struct Controller {
    workers: usize,
    active: usize,
    now: u64,
    trial: Option<Trial>,
    last: Option<f64>,
    prev: Option<f64>,
    idle: Option<f64>,
    up: Backoff,
    down: Backoff,
    /// The rate the waits were last set at: a load twice or half as fast is a new load,
    /// and trials start again without waiting.
    reference: f64,
}

impl Controller {
    /// `workers` workers, `active` of them active.
    pub fn new(workers: usize, active: usize) -> Self {
        Controller {
            workers: workers.max(1),
            active: active.clamp(1, workers.max(1)),
            now: 0,
            trial: None,
            last: None,
            prev: None,
            idle: None,
            up: Backoff::default(),
            down: Backoff::default(),
            reference: 0.0,
        }
    }

    /// The active count the controller has set.
    pub fn active(&self) -> usize {
        self.active
    }

    /// Takes the active count set from outside (DEBUG SPREAD), dropping any trial.
    pub fn adopt(&mut self, active: usize) {
        self.active = active.clamp(1, self.workers);
        self.trial = None;
    }

    fn restart(&mut self, rate: f64) {
        self.up = Backoff::now(self.now);
        self.down = Backoff::now(self.now);
        self.reference = rate;
    }

    /// One tick: the new active count, when it changes.
    pub fn tick(&mut self, s: Sample) -> Option<usize> {
        self.now += 1;
        let rate = per_sec(s.ops, s.secs);
        self.prev = self.last.replace(rate);
        // Two ticks of idle CPU (a tick is a few clock ticks of /proc/stat per CPU).
        let idle = match (s.idle, self.idle) {
            (Some(a), Some(b)) => Some((a + b) / 2.0),
            (a, _) => a,
        };
        self.idle = s.idle;
        if let Some(mut t) = self.trial.take() {
            return self.judge(&mut t, s);
        }
        if rate < IDLE_RATE {
            // The waits stay: a load back at about the same rate is taken for the same
            // load (a benchmark's next run, a client's next burst).
            return self.set(1);
        }
        let prev = self.prev.unwrap_or(0.0);
        let steady = (rate - prev).abs() <= STEADY * rate.max(prev);
        if !steady {
            // Ramps and gaps (a client's run starting or ending) say nothing.
            return None;
        }
        let base = (rate + prev) / 2.0;
        if base > 2.0 * self.reference || base < 0.5 * self.reference {
            self.restart(base);
        }
        let busy = s.busy.unwrap_or(1.0);
        let more = self.active.saturating_mul(2).min(self.workers);
        let room = idle.is_none_or(|i| i >= IDLE_UP * (more - self.active) as f64);
        if more > self.active && self.now >= self.up.next && busy >= BUSY_UP && room {
            return self.start(more, base);
        }
        let fewer = self.active / 2;
        // Fewer workers are tried only when the CPU the load takes could fit in them.
        let fits = busy * self.active as f64 <= FIT_DOWN * fewer as f64;
        if self.active > 1 && self.now >= self.down.next && fits {
            return self.start(fewer, base);
        }
        None
    }

    fn set(&mut self, to: usize) -> Option<usize> {
        let to = to.clamp(1, self.workers);
        (to != self.active).then(|| {
            self.active = to;
            to
        })
    }

    fn start(&mut self, to: usize, base: f64) -> Option<usize> {
        self.trial = Some(Trial {
            from: self.active,
            to,
            base,
            settle: SETTLE,
            ops: 0,
            secs: 0.0,
            ticks: 0,
        });
        self.set(to)
    }

    fn judge(&mut self, t: &mut Trial, s: Sample) -> Option<usize> {
        if t.settle > 0 {
            t.settle -= 1;
            self.trial = Some(*t);
            return None;
        }
        t.ops += s.ops;
        t.secs += s.secs;
        t.ticks += 1;
        if t.ticks < MEASURE {
            self.trial = Some(*t);
            return None;
        }
        let rate = per_sec(t.ops, t.secs);
        let up = t.to > t.from;
        let kept = if up {
            rate >= t.base * UP_GAIN
        } else {
            rate >= t.base * DOWN_KEEP
        };
        // Ask again soon in the direction that paid; back off in the one that did not.
        let now = self.now;
        let (this, other) = if up {
            (&mut self.up, &mut self.down)
        } else {
            (&mut self.down, &mut self.up)
        };
        if kept {
            this.paid(now);
            other.later(now);
        } else {
            this.failed(now);
        }
        self.reference = rate.max(t.base);
        self.last = Some(rate);
        self.prev = Some(rate);
        if kept {
            None
        } else {
            self.set(t.from)
        }
    }
}

/// `ops` over `secs`, 0 for no time.
fn per_sec(ops: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        ops as f64 / secs
    } else {
        0.0
    }
}

/// Starts the controller thread (nothing to decide with one worker).
pub fn spawn(server: Arc<Server>) -> Result<(), String> {
    if server.balance.workers() < 2 {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("ember-balance".into())
        .spawn(move || {
            let b = &server.balance;
            let mut ctl = Controller::new(b.workers(), b.active());
            let mut at = Instant::now();
            let mut ops = commands(&server);
            let mut cpu: Vec<Option<u64>> = (0..b.workers()).map(|w| b.cpu_ns(w)).collect();
            let mut idle = idle_ticks();
            while !server.shutting_down.load(Relaxed) {
                std::thread::sleep(TICK);
                let now = Instant::now();
                let secs = now.duration_since(at).as_secs_f64();
                at = now;
                let total = commands(&server);
                let done = total.saturating_sub(ops);
                ops = total;
                let active = b.active();
                let mut used = 0.0;
                let mut known = true;
                for (w, c) in cpu.iter_mut().enumerate() {
                    let v = b.cpu_ns(w);
                    if w < active {
                        match (*c, v) {
                            (Some(a), Some(z)) => used += z.saturating_sub(a) as f64 / 1e9,
                            _ => known = false,
                        }
                    }
                    *c = v;
                }
                if b.pinned().is_some() || active != ctl.active() {
                    ctl.adopt(active);
                    continue;
                }
                let busy = (known && secs > 0.0).then(|| used / secs / active as f64);
                let now_idle = idle_ticks();
                let idle_cpus = match (idle, now_idle) {
                    (Some(a), Some(z)) if secs > 0.0 => {
                        Some(z.saturating_sub(a) as f64 / USER_HZ / secs)
                    }
                    _ => None,
                };
                idle = now_idle;
                let sample = Sample {
                    ops: done,
                    secs,
                    busy,
                    idle: idle_cpus,
                };
                if let Some(n) = ctl.tick(sample) {
                    tracing::debug!(from = active, to = n, "active workers");
                    b.set_active(n);
                }
            }
        })
        .map(|_| ())
        .map_err(|e| format!("can't start balance thread: {e}"))
}

/// Clock ticks per second in /proc/stat (USER_HZ, fixed by the kernel's ABI).
const USER_HZ: f64 = 100.0;

/// Idle and I/O-wait clock ticks of all CPUs so far (/proc/stat), if the system says.
fn idle_ticks() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = s.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = cpu
        .split_ascii_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    Some(f.get(3)? + f.get(4).copied().unwrap_or(0))
}

/// Commands run by every worker so far.
fn commands(server: &Server) -> u64 {
    server
        .workers
        .iter()
        .map(|w| w.commands.load(Relaxed))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `ticks` ticks whose rate and busy share follow the active count; answers the
    /// changes the controller made.
    fn run(
        c: &mut Controller,
        mut load: impl FnMut(usize) -> (f64, f64),
        ticks: usize,
    ) -> Vec<usize> {
        run_idle(c, |a| (load(a), 4.0), ticks)
    }

    /// As [`run`], with the machine's idle CPUs too.
    fn run_idle(
        c: &mut Controller,
        mut load: impl FnMut(usize) -> ((f64, f64), f64),
        ticks: usize,
    ) -> Vec<usize> {
        let mut changes = Vec::new();
        for _ in 0..ticks {
            let ((rate, busy), idle) = load(c.active());
            if let Some(n) = c.tick(Sample {
                ops: (rate * 0.1) as u64,
                secs: 0.1,
                busy: Some(busy),
                idle: Some(idle),
            }) {
                changes.push(n);
            }
        }
        changes
    }

    /// A pipelined load as measured here: 1.3M/s on one worker (saturated), 1.9M/s on two
    /// (76% busy each).
    fn pipelined(a: usize) -> (f64, f64) {
        if a == 2 {
            (1.9e6, 0.76)
        } else {
            (1.3e6, 0.99)
        }
    }

    /// A request-response load as measured here: 160k/s on one worker (saturated), 155k/s
    /// on two (half busy each).
    fn request_response(a: usize) -> (f64, f64) {
        if a == 2 {
            (155e3, 0.5)
        } else {
            (160e3, 0.98)
        }
    }

    #[test]
    fn spreads_when_more_workers_pay_and_stays() {
        let mut c = Controller::new(2, 1);
        // Kept at once; fewer workers are never tried: the load does not fit in one.
        assert_eq!(run(&mut c, pipelined, 600), vec![2]);
    }

    #[test]
    fn stays_on_one_worker_when_two_do_not_pay() {
        let mut c = Controller::new(2, 1);
        let ch = run(&mut c, request_response, 600);
        assert_eq!(c.active(), 1);
        // Each trial is undone; the waits double (2, 4, 8, 16, 30 s), so few trials.
        let ups = ch.iter().filter(|&&n| n == 2).count();
        assert!((3..=6).contains(&ups), "{ch:?}");
        // Time spent on two workers: 3 ticks a trial.
        let mut c = Controller::new(2, 1);
        let mut on_two = 0;
        for _ in 0..600 {
            on_two += usize::from(c.active() == 2);
            run(&mut c, request_response, 1);
        }
        assert!(on_two <= 20, "{on_two} ticks of 600 on two workers");
    }

    #[test]
    fn no_trial_without_idle_cpus() {
        // Measured here on one worker: a request-response load leaves 0.2-0.3 CPUs of two
        // idle (the clients take the rest), a pipelined one 0.7-0.9.
        let mut c = Controller::new(2, 1);
        assert!(run_idle(&mut c, |a| (request_response(a), 0.25), 600).is_empty());
        assert_eq!(run_idle(&mut c, |a| (pipelined(a), 0.7), 10), vec![2]);
        // Four workers more need two idle CPUs.
        let mut c = Controller::new(8, 4);
        c.restart(0.0);
        let scales = |a: usize| (2.5e5 * a as f64, 0.9);
        assert!(run_idle(&mut c, |a| (scales(a), 1.5), 100).is_empty());
        assert_eq!(run_idle(&mut c, |a| (scales(a), 2.5), 10), vec![8]);
    }

    #[test]
    fn gaps_between_runs_do_not_restart_the_waits() {
        let mut c = Controller::new(2, 1);
        let mut ups = 0;
        for i in 0..600 {
            // A client's 5-s runs, with a tick at half rate between them.
            let gap = i % 50 == 49;
            ups += run(
                &mut c,
                |a| {
                    let (r, b) = request_response(a);
                    if gap {
                        (r / 3.0, b / 3.0)
                    } else {
                        (r, b)
                    }
                },
                1,
            )
            .iter()
            .filter(|&&n| n == 2)
            .count();
        }
        assert!(ups <= 6, "{ups} trials");
    }

    #[test]
    fn gathers_when_fewer_workers_run_as_fast() {
        let mut c = Controller::new(4, 4);
        // One core's worth of work, however many workers share it.
        run(&mut c, |a| (100e3, 1.0 / a as f64), 100);
        assert_eq!(c.active(), 1);
        // And on two workers after a request-response load got there.
        let mut c = Controller::new(2, 2);
        run(&mut c, request_response, 100);
        assert_eq!(c.active(), 1);
    }

    #[test]
    fn grows_step_by_step_while_it_pays() {
        let mut c = Controller::new(8, 1);
        run(&mut c, |a| (1e5 * a as f64, 0.95), 200);
        assert_eq!(c.active(), 8);
    }

    #[test]
    fn idle_goes_to_one_worker_at_once() {
        let mut c = Controller::new(4, 4);
        assert_eq!(run(&mut c, |_| (0.0, 0.0), 1), vec![1]);
    }

    #[test]
    fn a_load_that_is_not_steady_is_not_tried() {
        let mut c = Controller::new(2, 1);
        let mut i = 0;
        let ch = run(
            &mut c,
            |_| {
                i += 1;
                (if i % 2 == 0 { 100e3 } else { 200e3 }, 1.0)
            },
            100,
        );
        assert!(ch.is_empty(), "{ch:?}");
    }

    #[test]
    fn idle_workers_are_not_spread_to() {
        let mut c = Controller::new(2, 1);
        assert!(run(&mut c, |_| (100e3, 0.3), 100).is_empty());
    }

    #[test]
    fn a_new_load_is_tried_without_the_old_wait() {
        let mut c = Controller::new(2, 1);
        // A request-response load: trials fail and the wait grows.
        run(&mut c, request_response, 400);
        assert_eq!(c.active(), 1);
        // A pipelined load, 8x the rate: spread within a few ticks.
        assert_eq!(run(&mut c, pipelined, 5), vec![2]);
        assert_eq!(c.active(), 2);
    }

    fn m(count: usize, base: usize, span: usize) -> Moves {
        Moves { count, base, span }
    }

    #[test]
    fn plan_grows_and_shrinks() {
        let none = m(0, 0, 1);
        // 1 -> 2: worker 0 gives half of its 50.
        assert_eq!(plan(&[50, 0], 1, 2), vec![m(25, 1, 1), none]);
        // 1 -> 4: 36 of 48 go to workers 1, 2 and 3 in turn.
        assert_eq!(plan(&[48, 0, 0, 0], 1, 4)[0], m(36, 1, 3));
        // 2 -> 4.
        assert_eq!(
            plan(&[30, 30, 0, 0], 2, 4),
            vec![m(15, 2, 2), m(15, 2, 2), none, none]
        );
        // 2 -> 1: worker 1 gives everything to worker 0.
        assert_eq!(plan(&[25, 25], 2, 1), vec![none, m(usize::MAX, 0, 1)]);
        // 4 -> 2.
        assert_eq!(
            plan(&[5, 5, 5, 5], 4, 2),
            vec![none, none, m(usize::MAX, 0, 2), m(usize::MAX, 0, 2)]
        );
        // 3 workers, 2 -> 3.
        assert_eq!(plan(&[9, 9, 0], 2, 3), vec![m(3, 2, 1), m(3, 2, 1), none]);
    }

    #[test]
    fn moves_go_to_the_new_workers_in_turn() {
        let b = Balance::new(4);
        for _ in 0..48 {
            b.joined(0);
        }
        b.pin(4);
        let mut to = [0; 4];
        while let Some(w) = b.take_move(0) {
            to[w] += 1;
        }
        assert_eq!(to, [0, 12, 12, 12]);
    }

    #[test]
    fn take_move_counts_down() {
        let b = Balance::new(2);
        for _ in 0..10 {
            b.joined(0);
        }
        assert_eq!(b.take_move(0), None);
        b.set_active(2);
        let moved = (0..10).filter_map(|_| b.take_move(0)).collect::<Vec<_>>();
        assert_eq!(moved, vec![1; 5]);
        assert_eq!(b.moved(), 5);
        b.set_active(1);
        assert_eq!(b.take_move(0), None);
        assert_eq!(b.take_move(1), Some(0));
        assert_eq!(b.pick(), 0);
        b.pin(2);
        assert_eq!(b.pinned(), Some(2));
        assert_eq!(b.active(), 2);
        let picks: Vec<usize> = (0..4).map(|_| b.pick()).collect();
        assert!(picks.contains(&0) && picks.contains(&1));
        b.pin(0);
        assert_eq!(b.pinned(), None);
    }

    #[test]
    fn a_worker_running_a_script_gets_no_connections() {
        let b = Balance::new(2);
        b.set_active(1);
        // Not a worker thread: nothing changes.
        drop(b.stall_here());
        assert_eq!(b.pick(), 0);
        std::thread::scope(|s| {
            s.spawn(|| {
                b.register_thread(0);
                let stall = b.stall_here();
                assert_eq!((0..4).map(|_| b.pick()).collect::<Vec<_>>(), vec![1; 4]);
                // Nothing moves onto it either.
                b.joined(1);
                b.pin(1);
                assert_eq!(b.take_move(1), None);
                drop(stall);
                assert_eq!(b.pick(), 0);
                assert_eq!(b.take_move(1), Some(0));
            });
        });
    }
}
