//! `client-output-buffer-limit`: Redis's three client classes (`normal`, `replica` — also
//! spelled `slave` — and `pubsub`), each with a hard limit, a soft limit and the seconds a
//! client may stay over the soft one. A client past either is closed, and the closing is
//! logged once per client.
//!
//! What counts as a client's output buffer here: the replies its connection has built and
//! not yet written (the connection checks after each command and while a write waits on a
//! client that does not read), and the pub/sub messages and invalidations queued in its
//! mailbox ([`crate::pubsub::Mailbox`]). A subscribed client is of the `pubsub` class, any
//! other of `normal`. The `replica` class is kept and shown as Redis does; nothing uses it
//! until Ember serves replicas.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A client class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Ordinary clients.
    Normal = 0,
    /// Replicas.
    Replica = 1,
    /// Clients subscribed to channels, patterns or shard channels.
    Pubsub = 2,
}

impl Class {
    /// The class named `s` (`slave` is Redis's older name for `replica`).
    pub fn parse(s: &str) -> Option<Class> {
        match s.to_ascii_lowercase().as_str() {
            "normal" => Some(Class::Normal),
            "replica" | "slave" => Some(Class::Replica),
            "pubsub" => Some(Class::Pubsub),
            _ => None,
        }
    }

    /// The name CONFIG GET shows (Redis 7 still shows `slave`).
    fn config_name(self) -> &'static str {
        match self {
            Class::Normal => "normal",
            Class::Replica => "slave",
            Class::Pubsub => "pubsub",
        }
    }

    const ALL: [Class; 3] = [Class::Normal, Class::Replica, Class::Pubsub];
}

/// One class's limits; 0 disables a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Limit {
    /// Bytes at which the client is closed at once.
    pub hard: u64,
    /// Bytes at which the client is closed once it stayed over them `soft_secs`.
    pub soft: u64,
    /// Seconds over the soft limit before closing.
    pub soft_secs: u64,
}

impl Limit {
    /// True when neither limit is set.
    pub fn is_unlimited(&self) -> bool {
        self.hard == 0 && self.soft == 0
    }
}

/// Redis's default: `normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60`.
pub const DEFAULT: &str = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// Redis's error texts for a malformed value.
const WRONG_COUNT: &str = "Wrong number of arguments in buffer limit configuration.";
const BAD_CLASS: &str = "Invalid client class specified in buffer limit configuration.";
const BAD_VALUE: &str =
    "Error in hard, soft or soft_seconds setting in buffer limit configuration.";

/// Parses `class hard soft seconds [class hard soft seconds ...]` (sizes take memory units)
/// over `current`, Redis's normalised text of all three classes: classes not named keep
/// their limits. Returns the normalised text of all three.
pub fn merge(current: &str, words: &[&str]) -> Result<String, String> {
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err(WRONG_COUNT.into());
    }
    // A copy: an error anywhere in the value leaves the setting as it was (all or nothing,
    // as Redis).
    let mut limits = parse_all(current).unwrap_or_else(|| parse_all(DEFAULT).unwrap_or_default());
    let mem = |s: &str| crate::config::parse_memory(s).ok_or_else(|| BAD_VALUE.to_string());
    for w in words.chunks(4) {
        let class = Class::parse(w[0]).ok_or_else(|| BAD_CLASS.to_string())?;
        limits[class as usize] = Limit {
            hard: mem(w[1])?,
            soft: mem(w[2])?,
            soft_secs: w[3].parse().map_err(|_| BAD_VALUE.to_string())?,
        };
    }
    Ok(format_all(&limits))
}

/// The three classes of a normalised text (`None` if it is not one).
fn parse_all(text: &str) -> Option<[Limit; 3]> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = [Limit::default(); 3];
    for w in words.chunks(4) {
        let [c, h, s, t] = w else { return None };
        out[Class::parse(c)? as usize] = Limit {
            hard: h.parse().ok()?,
            soft: s.parse().ok()?,
            soft_secs: t.parse().ok()?,
        };
    }
    Some(out)
}

fn format_all(limits: &[Limit; 3]) -> String {
    Class::ALL
        .iter()
        .map(|&c| {
            let l = limits[c as usize];
            format!("{} {} {} {}", c.config_name(), l.hard, l.soft, l.soft_secs)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The limits in force, read on the delivery and reply paths (relaxed atomics).
pub struct Limits {
    /// Per class: hard, soft, seconds.
    values: [[AtomicU64; 3]; 3],
}

impl Default for Limits {
    fn default() -> Self {
        let l = Limits {
            values: Default::default(),
        };
        l.set_text(DEFAULT);
        l
    }
}

impl Limits {
    /// Takes the normalised text of the `client-output-buffer-limit` directive.
    pub fn set_text(&self, text: &str) {
        if let Some(all) = parse_all(text) {
            for c in Class::ALL {
                let v = &self.values[c as usize];
                let l = all[c as usize];
                v[0].store(l.hard, Relaxed);
                v[1].store(l.soft, Relaxed);
                v[2].store(l.soft_secs, Relaxed);
            }
        }
    }

    /// The limits of `class`.
    pub fn get(&self, class: Class) -> Limit {
        let v = &self.values[class as usize];
        Limit {
            hard: v[0].load(Relaxed),
            soft: v[1].load(Relaxed),
            soft_secs: v[2].load(Relaxed),
        }
    }
}

/// One client's standing against its soft limit: when it went over (ms on its own clock,
/// 0: not over). Shared by the threads that queue to the client.
#[derive(Default)]
pub struct SoftClock {
    since_ms: AtomicU64,
}

impl SoftClock {
    /// Whether a client holding `pending` bytes now (at `now_ms`, never 0) is past `limit`:
    /// over the hard limit, or over the soft limit for more than its seconds. Below the
    /// soft limit the clock starts again.
    pub fn over(&self, limit: Limit, pending: u64, now_ms: u64) -> bool {
        if limit.hard != 0 && pending >= limit.hard {
            return true;
        }
        if limit.soft != 0 && pending >= limit.soft {
            let since = self.since_ms.load(Relaxed);
            if since == 0 {
                // First time over (never closes, as in Redis): whoever stores first starts
                // the clock.
                let _ = self.since_ms.compare_exchange(0, now_ms, Relaxed, Relaxed);
                return false;
            }
            return now_ms.saturating_sub(since) > limit.soft_secs.saturating_mul(1000);
        }
        self.since_ms.store(0, Relaxed);
        false
    }

    /// The client's buffer was emptied: it is under the soft limit again.
    pub fn clear(&self) {
        self.since_ms.store(0, Relaxed);
    }

    /// When the client went over the soft limit (ms), if it is over.
    pub fn since_ms(&self) -> Option<u64> {
        match self.since_ms.load(Relaxed) {
            0 => None,
            t => Some(t),
        }
    }
}

/// The class of a client: `pubsub` while it holds a subscription, else `normal`.
pub fn class_of(info: &crate::client::ClientInfo) -> Class {
    if info.monitor.load(Relaxed) {
        Class::Replica
    } else if info.sub_counts.iter().any(|c| c.load(Relaxed) > 0) {
        Class::Pubsub
    } else {
        Class::Normal
    }
}

/// Milliseconds on `info`'s own clock (never 0), for its [`SoftClock`]s.
pub fn client_ms(info: &crate::client::ClientInfo) -> u64 {
    info.created.elapsed().as_millis() as u64 + 1
}

/// Closes `info`'s connection for passing its output-buffer limit, logging it the first
/// time only (a client that keeps being queued to after that is not logged again).
pub fn close_client(info: &crate::client::ClientInfo, class: Class) {
    if info.kill_once() {
        tracing::warn!(
            client = info.id,
            addr = %info.addr,
            class = class.config_name(),
            "Client scheduled to be closed ASAP for overcoming of output buffer limits."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_redis() {
        assert_eq!(
            merge(DEFAULT, &["normal", "0", "0", "0"]).unwrap(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        let l = Limits::default();
        assert_eq!(
            l.get(Class::Pubsub),
            Limit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_secs: 60
            }
        );
        assert!(l.get(Class::Normal).is_unlimited());
    }

    #[test]
    fn merge_keeps_unnamed_classes_and_takes_units() {
        let v = merge(
            DEFAULT,
            &["pubsub", "1mb", "512kb", "10", "replica", "1", "2", "3"],
        )
        .unwrap();
        assert_eq!(v, "normal 0 0 0 slave 1 2 3 pubsub 1048576 524288 10");
        let l = Limits::default();
        l.set_text(&v);
        assert_eq!(l.get(Class::Replica).hard, 1);
        assert_eq!(l.get(Class::Pubsub).soft_secs, 10);
    }

    #[test]
    fn merge_errors_are_redis_texts_and_change_nothing() {
        assert_eq!(
            merge(DEFAULT, &["normal", "0", "0"]),
            Err(WRONG_COUNT.into())
        );
        assert_eq!(merge(DEFAULT, &[]), Err(WRONG_COUNT.into()));
        assert_eq!(
            merge(DEFAULT, &["master", "0", "0", "0"]),
            Err(BAD_CLASS.into())
        );
        assert_eq!(
            merge(DEFAULT, &["normal", "x", "0", "0"]),
            Err(BAD_VALUE.into())
        );
        assert_eq!(
            merge(
                DEFAULT,
                &["normal", "1", "1", "1", "pubsub", "1", "1", "-1"]
            ),
            Err(BAD_VALUE.into())
        );
    }

    #[test]
    fn soft_clock() {
        let c = SoftClock::default();
        let limit = Limit {
            hard: 100,
            soft: 50,
            soft_secs: 2,
        };
        assert!(!c.over(limit, 10, 1));
        assert!(c.over(limit, 100, 1), "hard");
        assert!(!c.over(limit, 60, 1000), "soft, just started");
        assert_eq!(c.since_ms(), Some(1000));
        assert!(!c.over(limit, 60, 3000));
        assert!(c.over(limit, 60, 3001), "soft for more than 2 s");
        assert!(!c.over(limit, 40, 3002), "under again");
        assert_eq!(c.since_ms(), None);
        let zero = Limit {
            hard: 0,
            soft: 50,
            soft_secs: 0,
        };
        assert!(!c.over(zero, 60, 5), "the first time over never closes");
        assert!(c.over(zero, 60, 6), "soft with 0 seconds: the next time");
    }
}
