//! One RocksDB per node, shared by all of the node's groups (key layout: [`crate::codec`]).

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use rocksdb::ColumnFamily;
use rocksdb::ColumnFamilyDescriptor;
use rocksdb::Direction;
use rocksdb::IteratorMode;
use rocksdb::Options;
use rocksdb::WriteBatch;
use rocksdb::WriteOptions;
use rocksdb::DB;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec;
use crate::error::Error;
use crate::typ::GroupId;

/// Column family of log entries.
pub(crate) const CF_LOGS: &str = "logs";
/// Column family of per-group metadata (vote, committed, purged, snapshot).
pub(crate) const CF_META: &str = "meta";

/// How the node's Raft database is opened.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// fsync the WAL on every write (vote, append, purge). Raft's safety needs it; turn it
    /// off only for throw-away tests.
    pub sync: bool,
    /// With `sync`: log appends are written at once and fsynced by a background thread,
    /// one fsync for every append (of any group) that arrived meanwhile (group commit);
    /// openraft hears that an append is durable only after that fsync. Without it every
    /// append fsyncs inline, on the group's task (what paused-clock tests need: no
    /// thread outside the runtime).
    pub group_commit: bool,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            sync: true,
            group_commit: false,
        }
    }
}

/// Called once an append is durable (or failed to be).
pub(crate) type Durable = Box<dyn FnOnce(Result<(), std::io::Error>) + Send>;

/// The group-commit queue: appends written but not yet fsynced.
#[derive(Default)]
struct Flusher {
    /// Callbacks of appends waiting for the next fsync.
    waiting: Mutex<Vec<Durable>>,
    /// Wakes the flusher thread.
    wake: Condvar,
}

/// The flusher thread: fsyncs the WAL once per batch of waiting appends and calls them
/// back; ends once the database is dropped.
fn flush_loop(flusher: Weak<Flusher>, db: Weak<DB>) {
    loop {
        let batch = {
            let Some(f) = flusher.upgrade() else { return };
            let mut waiting = f.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if waiting.is_empty() {
                waiting = f
                    .wake
                    .wait_timeout(waiting, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            std::mem::take(&mut *waiting)
        };
        if batch.is_empty() {
            continue;
        }
        let result = match db.upgrade() {
            Some(db) => db.flush_wal(true).map_err(|e| e.to_string()),
            None => Err("the raft database was closed".to_string()),
        };
        for done in batch {
            done(result.clone().map_err(std::io::Error::other));
        }
    }
}

/// Checks the database's format version ([`codec::DB_FORMAT_KEY`]): a version newer than
/// [`codec::DB_FORMAT`] is [`Error::NewerFormat`]; a database without one (new, or written
/// before versions existed) is version 1 and gets the key, durably.
fn check_format(db: &DB) -> Result<(), Error> {
    match db.get(codec::DB_FORMAT_KEY)? {
        Some(v) => {
            let found: u64 = std::str::from_utf8(&v)
                .ok()
                .and_then(|t| t.parse().ok())
                .filter(|&n| n != 0)
                .ok_or_else(|| {
                    Error::corrupt(
                        "raft database format",
                        format!("{:?}", String::from_utf8_lossy(&v)),
                    )
                })?;
            if found > u64::from(codec::DB_FORMAT) {
                return Err(Error::NewerFormat {
                    what: "Raft database",
                    found,
                    max: codec::DB_FORMAT,
                });
            }
        }
        None => {
            let mut opts = WriteOptions::default();
            opts.set_sync(true);
            db.put_opt(codec::DB_FORMAT_KEY, codec::DB_FORMAT.to_string(), &opts)?;
        }
    }
    Ok(())
}

/// A node's Raft database: column families `logs` and `meta`, every key prefixed by its
/// group id. Cheap to clone (one shared handle).
#[derive(Clone)]
pub struct RaftDb {
    /// The open database.
    db: Arc<DB>,
    /// Whether writes fsync the WAL.
    sync: bool,
    /// The group-commit queue, when `DbOptions::group_commit` is on.
    flusher: Option<Arc<Flusher>>,
}

impl std::fmt::Debug for RaftDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftDb")
            .field("path", &self.db.path())
            .field("sync", &self.sync)
            .finish()
    }
}

impl RaftDb {
    /// Opens (or creates) the database in directory `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, DbOptions::default())
    }

    /// Opens (or creates) the database in directory `path`.
    pub fn open_with(path: impl AsRef<Path>, options: DbOptions) -> Result<Self, Error> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let cfs =
            [CF_LOGS, CF_META].map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = Arc::new(DB::open_cf_descriptors(&opts, path, cfs)?);
        check_format(&db)?;
        let flusher = (options.sync && options.group_commit).then(|| {
            let f = Arc::new(Flusher::default());
            let (weak_f, weak_db) = (Arc::downgrade(&f), Arc::downgrade(&db));
            std::thread::Builder::new()
                .name("raft-fsync".into())
                .spawn(move || flush_loop(weak_f, weak_db))
                .map(|_| f)
        });
        let flusher = match flusher {
            None => None,
            Some(Ok(f)) => Some(f),
            Some(Err(e)) => return Err(Error::Task(format!("can't start the fsync thread: {e}"))),
        };
        Ok(RaftDb {
            db,
            sync: options.sync,
            flusher,
        })
    }

    /// The groups that have anything stored (a vote, a purge mark or a snapshot), ascending.
    pub fn groups(&self) -> Result<Vec<GroupId>, Error> {
        let cf = self.cf(CF_META)?;
        let mut groups: Vec<GroupId> = Vec::new();
        let mut from = codec::meta_key(GroupId(0), b"");
        loop {
            let mut it = self
                .db
                .iterator_cf(cf, IteratorMode::From(&from, Direction::Forward));
            let Some(item) = it.next() else { break };
            let (key, _) = item?;
            let group =
                codec::meta_key_group(&key).ok_or_else(|| Error::corrupt("meta key", "short"))?;
            groups.push(group);
            match group.0.checked_add(1) {
                Some(next) => from = codec::meta_key(GroupId(next), b""),
                None => break,
            }
        }
        Ok(groups)
    }

    /// The index of the last entry of `group` known committed when it was last stored (the
    /// committed hint openraft applies up to when the group opens), if any.
    pub fn committed_index(&self, group: GroupId) -> Result<Option<u64>, Error> {
        let committed: Option<Option<crate::typ::LogId>> =
            self.get_meta(group, codec::META_COMMITTED, "committed log id")?;
        Ok(committed.flatten().map(|l| l.index))
    }

    /// Deletes everything stored for `group` (log, vote, snapshot, marks), durably: a node
    /// that no longer holds a replica of the group forgets it, and a later replica on this
    /// node starts empty.
    pub fn delete_group(&self, group: GroupId) -> Result<(), Error> {
        let from = group.0.to_be_bytes().to_vec();
        // Past every key of the group: the next prefix, or for the last group id a key
        // longer than any it has.
        let to = match group.0.checked_add(1) {
            Some(next) => next.to_be_bytes().to_vec(),
            None => vec![0xff; 64],
        };
        let mut batch = WriteBatch::default();
        for name in [CF_LOGS, CF_META] {
            batch.delete_range_cf(self.cf(name)?, &from, &to);
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(batch, &opts)?;
        Ok(())
    }

    /// The filesystem path of the database.
    pub fn path(&self) -> &Path {
        self.db.path()
    }

    /// How many handles share the database (1 once every group has let go of it).
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.db)
    }

    /// The underlying database.
    pub(crate) fn db(&self) -> &DB {
        &self.db
    }

    /// A column family opened by [`RaftDb::open_with`].
    pub(crate) fn cf(&self, name: &'static str) -> Result<&ColumnFamily, Error> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| Error::corrupt("column family", format!("{name} missing")))
    }

    /// Reads and decodes meta value `name` of `group`.
    pub(crate) fn get_meta<T: DeserializeOwned>(
        &self,
        group: GroupId,
        name: &[u8],
        what: &'static str,
    ) -> Result<Option<T>, Error> {
        let cf = self.cf(CF_META)?;
        match self.db.get_pinned_cf(cf, codec::meta_key(group, name))? {
            None => Ok(None),
            Some(bytes) => codec::decode(what, &bytes).map(Some),
        }
    }

    /// Adds meta value `name` of `group` to a batch.
    pub(crate) fn put_meta<T: Serialize>(
        &self,
        batch: &mut WriteBatch,
        group: GroupId,
        name: &[u8],
        what: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let cf = self.cf(CF_META)?;
        batch.put_cf(
            cf,
            codec::meta_key(group, name),
            codec::encode(what, value)?,
        );
        Ok(())
    }

    /// Writes a batch atomically now and calls `done` once it is durable: after the next
    /// group fsync with `group_commit`, else right after this (fsynced with `sync`) write.
    pub(crate) fn write_durable(&self, batch: WriteBatch, done: Durable) -> Result<(), Error> {
        let Some(flusher) = &self.flusher else {
            let res = self.write(batch);
            done(
                res.as_ref()
                    .map(|_| ())
                    .map_err(|e| std::io::Error::other(e.to_string())),
            );
            return res;
        };
        if let Err(e) = self.db.write(batch) {
            done(Err(std::io::Error::other(e.to_string())));
            return Err(e.into());
        }
        flusher
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(done);
        flusher.wake.notify_one();
        Ok(())
    }

    /// Writes a batch atomically (fsynced when the database was opened with `sync`).
    pub(crate) fn write(&self, batch: WriteBatch) -> Result<(), Error> {
        let mut opts = WriteOptions::default();
        opts.set_sync(self.sync);
        self.db.write_opt(batch, &opts)?;
        Ok(())
    }

    /// Writes a batch atomically without waiting for an fsync: it survives a process crash
    /// (it is in the WAL, in the OS's page cache) and reaches the disk with the next
    /// fsync. The WAL keeps write order, so after a power loss what survives is a prefix
    /// of the writes: this one is never on disk without every write before it.
    pub(crate) fn write_lazy(&self, batch: WriteBatch) -> Result<(), Error> {
        self.db.write_opt(batch, &WriteOptions::default())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_key_is_written_legacy_reads_as_1_and_newer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let read_key = |db: &RaftDb| db.db().get(codec::DB_FORMAT_KEY).unwrap();
        {
            let db = RaftDb::open(dir.path()).unwrap();
            assert_eq!(read_key(&db).as_deref(), Some(&b"1"[..]));
            // A database of the release before versions has no key.
            db.db().delete(codec::DB_FORMAT_KEY).unwrap();
        }
        {
            let db = RaftDb::open(dir.path()).unwrap();
            assert_eq!(read_key(&db).as_deref(), Some(&b"1"[..]));
            db.db().put(codec::DB_FORMAT_KEY, b"2").unwrap();
        }
        let e = RaftDb::open(dir.path()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Raft database format version 2 is newer than this build of Ember reads (versions 1 to 1): it was written by a newer Ember"
        );
    }
}
