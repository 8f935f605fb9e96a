//! openraft's `RaftLogStorage` for one group, over the node's shared [`RaftDb`].

use std::fmt::Debug;
use std::ops::Bound;
use std::ops::RangeBounds;

use openraft::storage::LogFlushed;
use openraft::storage::LogState;
use openraft::storage::RaftLogStorage;
use openraft::AnyError;
use openraft::ErrorSubject;
use openraft::ErrorVerb;
use openraft::OptionalSend;
use openraft::RaftLogReader;
use openraft::StorageIOError;
use rocksdb::Direction;
use rocksdb::IteratorMode;
use rocksdb::ReadOptions;
use rocksdb::WriteBatch;

use crate::codec;
use crate::db::Durable;
use crate::db::RaftDb;
use crate::db::CF_LOGS;
use crate::error::Error;
use crate::typ::Entry;
use crate::typ::GroupId;
use crate::typ::LogId;
use crate::typ::StorageError;
use crate::typ::TypeConfig;
use crate::typ::Vote;

/// The Raft log and hard state (vote, committed, last purged) of one group. Clones share
/// the database; openraft uses a clone as its log reader.
#[derive(Debug, Clone)]
pub struct RocksLogStore {
    /// The node's database.
    db: RaftDb,
    /// Which group's keys this store reads and writes.
    group: GroupId,
}

/// Wraps a crate error as openraft's storage error about `subject`.
fn storage_err(subject: ErrorSubject<u64>, verb: ErrorVerb, e: Error) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(&e)).into()
}

impl RocksLogStore {
    /// The log store of `group` in `db`.
    pub fn new(db: RaftDb, group: GroupId) -> Self {
        RocksLogStore { db, group }
    }

    /// The group this store belongs to.
    pub fn group(&self) -> GroupId {
        self.group
    }

    /// Entries whose index lies in `range`, ascending.
    fn read_range(&self, range: &impl RangeBounds<u64>) -> Result<Vec<Entry>, Error> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => match i.checked_add(1) {
                Some(i) => i,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        if start >= end {
            return Ok(Vec::new());
        }
        let cf = self.db.cf(CF_LOGS)?;
        let from = codec::log_key(self.group, start);
        // The upper bound keeps the iterator inside this group's range: without it, finding
        // "the next key" after the last entry walks into other groups' keys and tombstones.
        let mut opts = ReadOptions::default();
        opts.set_iterate_upper_bound(codec::log_key(self.group, end));
        let mut out = Vec::new();
        for item in
            self.db
                .db()
                .iterator_cf_opt(cf, opts, IteratorMode::From(&from, Direction::Forward))
        {
            let (key, value) = item?;
            let (group, index) = codec::parse_log_key(&key)?;
            if group != self.group || !range.contains(&index) {
                break;
            }
            let entry: Entry = codec::decode("log entry", &value)?;
            if entry.log_id.index != index {
                return Err(Error::corrupt(
                    "log entry",
                    format!("key index {index} holds entry {}", entry.log_id.index),
                ));
            }
            out.push(entry);
        }
        Ok(out)
    }

    /// The id of the last entry present, if any.
    fn last_entry_id(&self) -> Result<Option<LogId>, Error> {
        let cf = self.db.cf(CF_LOGS)?;
        let from = codec::log_key(self.group, u64::MAX);
        let mut opts = ReadOptions::default();
        opts.set_iterate_lower_bound(codec::log_key(self.group, 0));
        let mut it =
            self.db
                .db()
                .iterator_cf_opt(cf, opts, IteratorMode::From(&from, Direction::Reverse));
        let Some(item) = it.next() else {
            return Ok(None);
        };
        let (key, value) = item?;
        let (group, _) = codec::parse_log_key(&key)?;
        if group != self.group {
            return Ok(None);
        }
        let entry: Entry = codec::decode("log entry", &value)?;
        Ok(Some(entry.log_id))
    }

    /// Writes a meta value durably.
    fn save_meta<T: serde::Serialize>(
        &self,
        name: &[u8],
        what: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.db.write(self.meta_batch(name, what, value)?)
    }

    /// A batch that sets this group's metadata `name` to `value`.
    fn meta_batch<T: serde::Serialize>(
        &self,
        name: &[u8],
        what: &'static str,
        value: &T,
    ) -> Result<WriteBatch, Error> {
        let mut batch = WriteBatch::default();
        self.db
            .put_meta(&mut batch, self.group, name, what, value)?;
        Ok(batch)
    }

    /// Appends entries in one batch; `done` hears when it is durable.
    fn append_batch(
        &self,
        entries: impl IntoIterator<Item = Entry>,
        done: Durable,
    ) -> Result<(), Error> {
        let batch = (|| {
            let cf = self.db.cf(CF_LOGS)?;
            let mut batch = WriteBatch::default();
            for entry in entries {
                let key = codec::log_key(self.group, entry.log_id.index);
                batch.put_cf(cf, key, codec::encode("log entry", &entry)?);
            }
            Ok::<_, Error>(batch)
        })();
        match batch {
            Ok(batch) => self.db.write_durable(batch, done),
            Err(e) => {
                done(Err(std::io::Error::other(e.to_string())));
                Err(e)
            }
        }
    }

    /// Deletes entries with index in `from..to`, and records `purged` when given, atomically.
    fn delete_range(&self, from: u64, to: u64, purged: Option<&LogId>) -> Result<(), Error> {
        let cf = self.db.cf(CF_LOGS)?;
        let mut batch = WriteBatch::default();
        if let Some(purged) = purged {
            self.db.put_meta(
                &mut batch,
                self.group,
                codec::META_PURGED,
                "purged log id",
                purged,
            )?;
        }
        batch.delete_range_cf(
            cf,
            codec::log_key(self.group, from),
            codec::log_key(self.group, to),
        );
        self.db.write(batch)
    }
}

impl RaftLogReader<TypeConfig> for RocksLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        self.read_range(&range)
            .map_err(|e| storage_err(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

impl RaftLogStorage<TypeConfig> for RocksLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let read = |e| storage_err(ErrorSubject::Logs, ErrorVerb::Read, e);
        let last_purged_log_id: Option<LogId> = self
            .db
            .get_meta(self.group, codec::META_PURGED, "purged log id")
            .map_err(read)?;
        let last_log_id = self.last_entry_id().map_err(read)?.or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.save_meta(codec::META_VOTE, "vote", vote)
            .map_err(|e| storage_err(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.db
            .get_meta(self.group, codec::META_VOTE, "vote")
            .map_err(|e| storage_err(ErrorSubject::Vote, ErrorVerb::Read, e))
    }

    /// The committed log id is a hint (a restarted node applies up to it at once, before
    /// it hears a leader), not a promise Raft's safety rests on: it is written without an
    /// fsync of its own, which would stall the group's task on every commit. A hint lost
    /// in a power failure is an older one, and the entries it covers were written before it.
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.meta_batch(codec::META_COMMITTED, "committed log id", &committed)
            .and_then(|batch| self.db.write_lazy(batch))
            .map_err(|e| storage_err(ErrorSubject::Store, ErrorVerb::Write, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let committed: Option<Option<LogId>> = self
            .db
            .get_meta(self.group, codec::META_COMMITTED, "committed log id")
            .map_err(|e| storage_err(ErrorSubject::Store, ErrorVerb::Read, e))?;
        Ok(committed.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.append_batch(entries, Box::new(move |r| callback.log_io_completed(r)))
            .map_err(|e| storage_err(ErrorSubject::Logs, ErrorVerb::Write, e))
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(group = %self.group, %log_id, "truncate");
        self.delete_range(log_id.index, u64::MAX, None)
            .map_err(|e| storage_err(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        tracing::debug!(group = %self.group, %log_id, "purge");
        self.delete_range(0, log_id.index.saturating_add(1), Some(&log_id))
            .map_err(|e| storage_err(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;
    use openraft::EntryPayload;

    use super::*;

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn ignore() -> Durable {
        Box::new(|r| r.unwrap())
    }

    fn indexes(store: &RocksLogStore) -> Vec<u64> {
        store
            .read_range(&(..))
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect()
    }

    #[tokio::test]
    async fn groups_sharing_a_db_do_not_see_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let db = RaftDb::open(dir.path()).unwrap();
        let mut a = RocksLogStore::new(db.clone(), GroupId(1));
        let mut b = RocksLogStore::new(db.clone(), GroupId(2));
        a.append_batch((1..=5).map(entry), ignore()).unwrap();
        b.append_batch((1..=3).map(entry), ignore()).unwrap();
        a.save_vote(&Vote::new(3, 1)).await.unwrap();

        assert_eq!(indexes(&a), [1, 2, 3, 4, 5]);
        assert_eq!(indexes(&b), [1, 2, 3]);
        assert_eq!(b.read_vote().await.unwrap(), None);

        a.purge(entry(2).log_id).await.unwrap();
        b.truncate(entry(2).log_id).await.unwrap();
        assert_eq!(indexes(&a), [3, 4, 5]);
        assert_eq!(indexes(&b), [1]);
        let state = a.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(entry(2).log_id));
        assert_eq!(state.last_log_id, Some(entry(5).log_id));
        let state = b.get_log_state().await.unwrap();
        assert_eq!(
            (state.last_purged_log_id, state.last_log_id),
            (None, Some(entry(1).log_id))
        );
        assert_eq!(db.groups().unwrap(), [GroupId(1)]);
    }

    #[tokio::test]
    async fn a_corrupt_entry_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let db = RaftDb::open(dir.path()).unwrap();
        let mut store = RocksLogStore::new(db.clone(), GroupId(1));
        store.append_batch([entry(1)], ignore()).unwrap();
        let cf = db.cf(CF_LOGS).unwrap();
        db.db()
            .put_cf(cf, codec::log_key(GroupId(1), 2), b"\xff\xff\xff")
            .unwrap();
        assert!(store.try_get_log_entries(1..3).await.is_err());
        assert!(store.get_log_state().await.is_err());
        assert_eq!(store.try_get_log_entries(1..2).await.unwrap().len(), 1);
    }

    #[test]
    fn group_commit_calls_every_append_back_once_and_keeps_them() {
        use crate::db::DbOptions;
        let dir = tempfile::tempdir().unwrap();
        let opts = DbOptions {
            sync: true,
            group_commit: true,
        };
        {
            let db = RaftDb::open_with(dir.path(), opts.clone()).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            let threads: Vec<_> = (1..=4u32)
                .map(|g| {
                    let store = RocksLogStore::new(db.clone(), GroupId(g));
                    let tx = tx.clone();
                    std::thread::spawn(move || {
                        for i in 1..=50 {
                            let tx = tx.clone();
                            let done: Durable =
                                Box::new(move |r| tx.send((g, i, r.is_ok())).unwrap());
                            store.append_batch([entry(i)], done).unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            drop(tx);
            let mut heard: Vec<_> = rx.iter().collect();
            heard.sort();
            let want: Vec<_> = (1..=4u32)
                .flat_map(|g| (1..=50).map(move |i| (g, i, true)))
                .collect();
            assert_eq!(heard, want);
        }
        let db = RaftDb::open_with(dir.path(), opts).unwrap();
        for g in 1..=4 {
            let store = RocksLogStore::new(db.clone(), GroupId(g));
            assert_eq!(indexes(&store), (1..=50).collect::<Vec<_>>());
        }
    }
}
