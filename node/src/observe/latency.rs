//! The latency monitor (LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR), as Redis's
//! latency.c: while `latency-monitor-threshold` is set (ms), every event at least that long
//! is kept as a sample of its class, one per second (the worst of that second), the last
//! 160 per class, with the class's all-time high. Classes Ember records: `command` and
//! `fast-command` (the pipeline), `expire-cycle` (active expiry) and `eviction-cycle`
//! (maxmemory).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

/// Samples kept per event class.
pub const SAMPLES: usize = 160;

/// One second's worst latency of a class.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix time (s); 0: unused slot.
    pub time: i64,
    /// Milliseconds.
    pub latency: u64,
}

/// The samples of one event class: a ring, oldest first from `idx`.
#[derive(Clone, Debug)]
pub struct Series {
    samples: [Sample; SAMPLES],
    idx: usize,
    /// The all-time high (ms).
    pub max: u64,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            samples: [Sample::default(); SAMPLES],
            idx: 0,
            max: 0,
        }
    }
}

impl Series {
    fn add(&mut self, now: i64, ms: u64) {
        self.max = self.max.max(ms);
        let prev = (self.idx + SAMPLES - 1) % SAMPLES;
        if self.samples[prev].time == now {
            self.samples[prev].latency = self.samples[prev].latency.max(ms);
            return;
        }
        self.samples[self.idx] = Sample {
            time: now,
            latency: ms,
        };
        self.idx = (self.idx + 1) % SAMPLES;
    }

    /// The samples held, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        (0..SAMPLES)
            .map(|j| self.samples[(self.idx + j) % SAMPLES])
            .filter(|s| s.time != 0)
            .collect()
    }

    /// The newest sample.
    pub fn latest(&self) -> Sample {
        self.samples[(self.idx + SAMPLES - 1) % SAMPLES]
    }
}

/// Every event class seen.
pub struct LatencyMonitor {
    /// `latency-monitor-threshold` in ns (u64::MAX: off).
    threshold: AtomicU64,
    events: Mutex<BTreeMap<String, Series>>,
}

impl Default for LatencyMonitor {
    fn default() -> Self {
        LatencyMonitor {
            threshold: AtomicU64::new(u64::MAX),
            events: Mutex::new(BTreeMap::new()),
        }
    }
}

impl LatencyMonitor {
    /// The shortest event (ns) recorded; u64::MAX while off.
    #[inline]
    pub fn threshold_ns(&self) -> u64 {
        self.threshold.load(Relaxed)
    }

    /// `latency-monitor-threshold` in ms (0: off).
    pub fn configure(&self, ms: u64) {
        let t = if ms == 0 {
            u64::MAX
        } else {
            ms.saturating_mul(1_000_000)
        };
        self.threshold.store(t, Relaxed);
    }

    /// The threshold in ms (0: off).
    pub fn threshold_ms(&self) -> u64 {
        match self.threshold_ns() {
            u64::MAX => 0,
            t => t / 1_000_000,
        }
    }

    /// Records `event` of `ns` when the monitor is on and it is long enough (Redis's
    /// latencyAddSampleIfNeeded).
    pub fn add_if_needed(&self, event: &str, ns: u64) {
        if ns >= self.threshold_ns() {
            self.add(event, ns / 1_000_000);
        }
    }

    /// Records a sample of `ms` for `event` (the caller checked the threshold).
    pub fn add(&self, event: &str, ms: u64) {
        let now = storage::clock::now_ns() as i64 / 1_000_000_000;
        let mut e = self.events.lock();
        match e.get_mut(event) {
            Some(s) => s.add(now, ms),
            None => {
                let mut s = Series::default();
                s.add(now, ms);
                e.insert(event.to_string(), s);
            }
        }
    }

    /// `event`'s samples, if it has any.
    pub fn series(&self, event: &[u8]) -> Option<Series> {
        let e = self.events.lock();
        std::str::from_utf8(event)
            .ok()
            .and_then(|n| e.get(n).cloned())
    }

    /// Every class with its series, by name.
    pub fn all(&self) -> Vec<(String, Series)> {
        let e = self.events.lock();
        e.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Forgets `event` (every class with None); how many were forgotten.
    pub fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut e = self.events.lock();
        match event {
            None => {
                let n = e.len();
                e.clear();
                n
            }
            Some(name) => std::str::from_utf8(name)
                .ok()
                .and_then(|n| e.remove(n))
                .map_or(0, |_| 1),
        }
    }
}

/// What LATENCY DOCTOR computes of one class (Redis's analyzeLatencyForEvent).
struct Stats {
    samples: u64,
    avg: u64,
    mad: u64,
    period: i64,
}

fn analyze(s: &Series, now: i64) -> Stats {
    let all = s.samples();
    let n = all.len() as u64;
    if n == 0 {
        return Stats {
            samples: 0,
            avg: 0,
            mad: 0,
            period: 0,
        };
    }
    let avg = all.iter().map(|x| x.latency).sum::<u64>() / n;
    let oldest = all.iter().map(|x| x.time).min().unwrap_or(now);
    let mad = all.iter().map(|x| avg.abs_diff(x.latency)).sum::<u64>() / n;
    Stats {
        samples: n,
        avg,
        mad,
        period: (now - oldest).max(1),
    }
}

/// The settings LATENCY DOCTOR's advice depends on.
pub struct DoctorInput {
    /// `slowlog-log-slower-than` (µs).
    pub slowlog_slower_than: i64,
    /// `appendfsync` is `always`.
    pub fsync_always: bool,
    /// `hz`.
    pub hz: u64,
}

/// LATENCY DOCTOR's report, worded as Redis's createLatencyReport.
pub fn doctor(mon: &LatencyMonitor, input: &DoctorInput, now: i64) -> String {
    let events = mon.all();
    let threshold = mon.threshold_ms();
    if events.is_empty() && threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".to_string();
    }
    let mut r = String::new();
    let (mut slowlog_enable, mut slowlog_tune, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut hz, mut large, mut mass_eviction, mut relax_fsync) =
        (false, false, false, false, false);
    let mut advices = 0;
    for (i, (event, s)) in events.iter().enumerate() {
        if i == 0 {
            r.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let st = analyze(s, now);
        let _ = write!(
            r,
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            i + 1,
            event,
            st.samples,
            st.avg,
            st.mad,
            st.period as f64 / st.samples.max(1) as f64,
            s.max
        );
        match event.as_str() {
            "command" => {
                if input.slowlog_slower_than < 0 {
                    slowlog_enable = true;
                    advices += 1;
                } else if input.slowlog_slower_than as u64 / 1000 > threshold {
                    slowlog_tune = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "aof-fsync-always" => {
                relax_fsync = true;
                advices += 1;
            }
            "expire-cycle" => {
                hz = true;
                large = true;
                advices += 2;
            }
            e if e.starts_with("eviction") => {
                large = true;
                mass_eviction = true;
                advices += 2;
            }
            _ => {}
        }
        r.push('\n');
    }
    if events.is_empty() {
        r.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    } else if advices == 0 {
        r.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    } else {
        r.push_str("\nI have a few advices for you:\n\n");
        if slowlog_enable {
            let _ = writeln!(r, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.", threshold * 1000);
        }
        if slowlog_tune {
            let _ = writeln!(r, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.", threshold * 1000);
        }
        if slowlog_inspect {
            r.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
        }
        if scheduler {
            r.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
        }
        if relax_fsync && input.fsync_always {
            r.push_str("- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n");
        }
        if hz && input.hz < 100 {
            r.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
        }
        if large {
            r.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
        }
        if mass_eviction {
            r.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
        }
    }
    r
}

/// LATENCY GRAPH's text: a header with the highs and lows and Redis's sparkline of the
/// samples (80 columns, 4 rows, filled), each labelled with how long ago it was.
pub fn graph(event: &str, s: &Series, now: i64) -> String {
    let samples = s.samples();
    let (min, max) = samples.iter().fold((u64::MAX, 0), |(lo, hi), x| {
        (lo.min(x.latency), hi.max(x.latency))
    });
    let min = if samples.is_empty() { 0 } else { min };
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        s.max
    );
    out.push_str(&"-".repeat(80));
    out.push('\n');
    let seq: Vec<(f64, String)> = samples
        .iter()
        .map(|x| {
            let ago = now - x.time;
            let label = if ago < 60 {
                format!("{ago}s")
            } else if ago < 3600 {
                format!("{}m", ago / 60)
            } else if ago < 86_400 {
                format!("{}h", ago / 3600)
            } else {
                format!("{}d", ago / 86_400)
            };
            (x.latency as f64, label)
        })
        .collect();
    sparkline(&mut out, &seq, 80, 4);
    out
}

/// Redis's sparklineRender with SPARKLINE_FILL: `rows` rows of `_o#` (and `|` below the
/// top), then the labels written downwards, `columns` samples per block.
fn sparkline(out: &mut String, seq: &[(f64, String)], columns: usize, rows: usize) {
    const FILL: &[u8] = b"_o#";
    let (min, max) = seq.iter().fold((f64::MAX, f64::MIN), |(lo, hi), (v, _)| {
        (lo.min(*v), hi.max(*v))
    });
    let mut relmax = max - min;
    if relmax == 0.0 {
        relmax = 1.0;
    }
    let steps = (FILL.len() * rows) as i64;
    let mut start = 0;
    while start < seq.len() {
        if start != 0 {
            out.push('\n');
        }
        let block = &seq[start..(start + columns).min(seq.len())];
        let mut row = 0;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; block.len()];
            for (j, (v, label)) in block.iter().enumerate() {
                let step = (((v - min) * steps as f64) / relmax) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    let idx = step - ((rows - row - 1) * FILL.len()) as i64;
                    more = true;
                    if idx >= 0 && (idx as usize) < FILL.len() {
                        chars[j] = FILL[idx as usize];
                    } else if idx >= FILL.len() as i64 {
                        chars[j] = b'|';
                    }
                } else {
                    // One empty row between the graph and the labels.
                    if row - rows < 1 {
                        more = true;
                        break;
                    }
                    let at = row - rows - 1;
                    if label.len() > at {
                        more = true;
                        chars[j] = label.as_bytes()[at];
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
        start += columns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst_and_the_ring_keeps_160() {
        let mut s = Series::default();
        s.add(100, 5);
        s.add(100, 9);
        s.add(100, 3);
        assert_eq!(
            s.samples(),
            vec![Sample {
                time: 100,
                latency: 9
            }]
        );
        for t in 101..400 {
            s.add(t, (t % 7) as u64);
        }
        let all = s.samples();
        assert_eq!(all.len(), SAMPLES);
        assert_eq!(all[0].time, 400 - SAMPLES as i64);
        assert_eq!(s.latest().time, 399);
        assert_eq!(s.max, 9);
    }

    #[test]
    fn the_monitor_is_off_at_zero_and_reset_counts_what_it_forgot() {
        let m = LatencyMonitor::default();
        m.add_if_needed("command", 500_000_000);
        assert!(m.all().is_empty());
        m.configure(100);
        m.add_if_needed("command", 50_000_000);
        assert!(m.all().is_empty());
        m.add_if_needed("command", 150_000_000);
        m.add("expire-cycle", 30);
        assert_eq!(m.series(b"command").unwrap().latest().latency, 150);
        assert_eq!(m.reset(Some(b"nope")), 0);
        assert_eq!(m.reset(Some(b"command")), 1);
        assert_eq!(m.reset(None), 1);
    }

    #[test]
    fn the_graph_has_redis_layout() {
        let mut s = Series::default();
        s.add(10, 100);
        s.add(11, 300);
        let g = graph("command", &s, 12);
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(
            lines[0],
            "command - high 300 ms, low 100 ms (all time high 300 ms)"
        );
        assert_eq!(lines[1], "-".repeat(80));
        // Four graph rows (the low sample's mark on the bottom one, the high one's on
        // top), an empty row, then the labels downwards ("2s", "1s").
        assert_eq!(lines[2], " #");
        assert_eq!(lines[5], "_|");
        assert_eq!(lines[6], "  ");
        assert_eq!(lines[7], "21");
        assert_eq!(lines[8], "ss");
    }
}
