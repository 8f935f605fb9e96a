//! WATCH in cluster mode.
//!
//! A group's leader is the only node that proposes the group's writes, so it alone can tell
//! whether a watched key was written after WATCH, with no replica's help and no state in
//! the log: every entry it proposes gets a sequence number under the group's
//! [`WriteTrack`] lock, recorded against the hash buckets of the entry's keys, and the
//! highest number known applied is kept. WATCH (after a ReadIndex round, so that entries of
//! earlier terms are applied) remembers that applied number. EXEC, under the same lock and
//! right before its transaction is handed to Raft, aborts (a nil reply, nothing proposed)
//! when a bucket of a watched key was written with a higher number, when the term changed,
//! or when a watched volatile key's deadline passed. An entry proposed after the check
//! takes the lock after the transaction was handed to Raft, so it is ordered after the
//! transaction in the log: no write slips between check and transaction.
//!
//! A write to another key of the same bucket, and a script in the group (its keys are not
//! all declared), abort a watch too: false conflicts, never a missed one.

use std::hash::BuildHasher;

/// Hash buckets of a group's keys.
const BUCKETS: usize = 4096;

/// The bucket of `key`.
pub fn bucket(key: &[u8]) -> u32 {
    (foldhash::fast::FixedState::with_seed(0x6a09_e667).hash_one(key) % BUCKETS as u64) as u32
}

/// What a group's leader proposed, for WATCH.
pub struct WriteTrack {
    /// The last sequence number handed out.
    seq: u64,
    /// The highest sequence number whose entry was applied (answered).
    applied: u64,
    /// The last entry that may have written any key (FLUSHALL, scripts).
    any: u64,
    /// Per bucket, the last entry that wrote one of its keys.
    buckets: Vec<u64>,
}

impl Default for WriteTrack {
    fn default() -> Self {
        WriteTrack {
            seq: 0,
            applied: 0,
            any: 0,
            buckets: vec![0; BUCKETS],
        }
    }
}

/// The keys an entry writes.
#[derive(Clone, Debug)]
pub enum Touches {
    /// These buckets.
    Buckets(Vec<u32>),
    /// Possibly any key of the group.
    Any,
}

impl WriteTrack {
    /// Numbers an entry about to be proposed that writes `touches`.
    pub fn propose<'a>(&mut self, touches: impl IntoIterator<Item = &'a Touches>) -> u64 {
        self.seq += 1;
        for t in touches {
            match t {
                Touches::Buckets(b) => {
                    for &i in b {
                        self.buckets[i as usize] = self.seq;
                    }
                }
                Touches::Any => self.any = self.seq,
            }
        }
        self.seq
    }

    /// Entry `seq` was applied (and every entry before it).
    pub fn applied(&mut self, seq: u64) {
        self.applied = self.applied.max(seq);
    }

    /// The highest sequence number known applied: WATCH's starting point.
    pub fn applied_seq(&self) -> u64 {
        self.applied
    }

    /// Whether an entry numbered above `since` may have written a key of `buckets`.
    pub fn written_since(&self, buckets: &[u32], since: u64) -> bool {
        self.any > since || buckets.iter().any(|&b| self.buckets[b as usize] > since)
    }
}

/// A connection's watched keys in cluster mode (all in one slot).
#[derive(Clone, Debug)]
pub struct ClusterWatch {
    /// The keys' slot.
    pub slot: u16,
    /// The group's term at WATCH.
    pub term: u64,
    /// The group's applied sequence number at (the first) WATCH.
    pub since: u64,
    /// The watched keys' buckets.
    pub buckets: Vec<u32>,
    /// The earliest deadline of a watched key that was live and volatile at WATCH.
    pub deadline: Option<u64>,
}

impl ClusterWatch {
    /// Whether EXEC must abort: a watched key may have been written since WATCH, the term
    /// changed, or a watched key expired (`now`, ns).
    pub fn broken(&self, track: &WriteTrack, term: u64, now: u64) -> bool {
        term != self.term
            || self.deadline.is_some_and(|d| d <= now)
            || track.written_since(&self.buckets, self.since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(keys: &[&[u8]], since: u64) -> ClusterWatch {
        ClusterWatch {
            slot: 0,
            term: 3,
            since,
            buckets: keys.iter().map(|k| bucket(k)).collect(),
            deadline: None,
        }
    }

    #[test]
    fn writes_after_the_watch_point_break_it() {
        let mut t = WriteTrack::default();
        let before = t.propose([&Touches::Buckets(vec![bucket(b"k")])]);
        // Proposed but not applied at WATCH: it lands after WATCH, so it counts.
        let w = watch(&[b"k"], t.applied_seq());
        assert!(w.broken(&t, 3, 0));
        t.applied(before);
        let w = watch(&[b"k"], t.applied_seq());
        assert!(!w.broken(&t, 3, 0));
        t.propose([&Touches::Buckets(vec![bucket(b"other")])]);
        assert_eq!(w.broken(&t, 3, 0), bucket(b"other") == bucket(b"k"));
        assert!(w.broken(&t, 4, 0), "a new term breaks it");
        t.propose([&Touches::Buckets(vec![bucket(b"k")])]);
        assert!(w.broken(&t, 3, 0));
    }

    #[test]
    fn flushes_and_deadlines_break_it() {
        let mut t = WriteTrack::default();
        let mut w = watch(&[b"k"], t.applied_seq());
        w.deadline = Some(100);
        assert!(!w.broken(&t, 3, 99));
        assert!(w.broken(&t, 3, 100));
        w.deadline = None;
        t.propose([&Touches::Any]);
        assert!(w.broken(&t, 3, 0));
    }
}
