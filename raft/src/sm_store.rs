//! openraft's `RaftStateMachine` over a user [`StateMachine`]: last applied log id,
//! membership, and zstd-compressed snapshots kept in the node's [`RaftDb`].
//!
//! The current snapshot is stored under the group's `snapshot` meta key (meta plus
//! compressed bytes), so a restarted node installs it and replays only the log after it.
//!
//! A received snapshot that does not decompress or that the [`StateMachine`] refuses leaves
//! the state as it was and answers a storage error; openraft then stops that group's Raft
//! (an error, never a panic or a half-installed state).
//!
//! Format versions (see `codec`): a snapshot of a newer format is refused the same way
//! (and a stored one fails [`GroupStateMachine::open`]); an entry of a newer format is not
//! applied: the entries before it are, then apply answers [`Error::NewerFormat`], which is
//! logged and stops the group's Raft, so nothing after it is applied either.

use std::io::Cursor;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::AnyError;
use openraft::EntryPayload;
use openraft::ErrorSubject;
use openraft::ErrorVerb;
use openraft::OptionalSend;
use openraft::RaftSnapshotBuilder;
use openraft::StorageIOError;
use parking_lot::RwLock;
use rocksdb::WriteBatch;
use serde::Deserialize;
use serde::Serialize;

use crate::codec;
use crate::codec::ENTRY_FORMAT;
use crate::db::RaftDb;
use crate::error::Error;
use crate::state_machine::StateMachine;
use crate::typ::Entry;
use crate::typ::GroupId;
use crate::typ::LogId;
use crate::typ::Response;
use crate::typ::Snapshot;
use crate::typ::SnapshotMeta;
use crate::typ::StorageError;
use crate::typ::StoredMembership;
use crate::typ::TypeConfig;

/// A snapshot as stored in the meta column family.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    /// Last log id and membership the snapshot covers.
    meta: SnapshotMeta,
    /// zstd-compressed [`StateMachine::snapshot`] bytes.
    data: Vec<u8>,
}

/// The user state plus what openraft needs to know about it.
struct Applied<S> {
    /// The user's state machine.
    sm: S,
    /// The last entry applied to `sm` (or covered by the installed snapshot).
    last_applied: Option<LogId>,
    /// The last membership applied.
    membership: StoredMembership,
}

/// A read handle on a group's state machine, for the node's read path and for tests.
pub struct StateHandle<S> {
    /// Shared with the group's [`GroupStateMachine`].
    inner: Arc<RwLock<Applied<S>>>,
}

impl<S> Clone for StateHandle<S> {
    fn clone(&self) -> Self {
        StateHandle {
            inner: self.inner.clone(),
        }
    }
}

impl<S> StateHandle<S> {
    /// Runs `f` on the state machine under its read lock (apply waits meanwhile).
    pub fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        f(&self.inner.read().sm)
    }

    /// The last log id applied to the state machine.
    pub fn last_applied(&self) -> Option<LogId> {
        self.inner.read().last_applied
    }
}

/// openraft's state machine for one group: wraps the user [`StateMachine`]. Clones share
/// the state; openraft uses a clone as its snapshot builder.
pub struct GroupStateMachine<S> {
    /// The node's database (snapshots live in it).
    db: RaftDb,
    /// Which group this is.
    group: GroupId,
    /// The state, shared with every [`StateHandle`].
    state: StateHandle<S>,
    /// Makes snapshot ids unique among snapshots of the same log id.
    snapshot_seq: Arc<AtomicU64>,
}

impl<S> Clone for GroupStateMachine<S> {
    fn clone(&self) -> Self {
        GroupStateMachine {
            db: self.db.clone(),
            group: self.group,
            state: self.state.clone(),
            snapshot_seq: self.snapshot_seq.clone(),
        }
    }
}

/// Wraps a crate error as openraft's storage error about `subject`.
fn storage_err(subject: ErrorSubject<u64>, verb: ErrorVerb, e: Error) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(&e)).into()
}

impl<S: StateMachine> GroupStateMachine<S> {
    /// The state machine of `group`, starting from `sm` (empty) or, when `db` holds a
    /// snapshot of the group, from that snapshot.
    pub fn open(db: RaftDb, group: GroupId, mut sm: S) -> Result<Self, Error> {
        let stored: Option<StoredSnapshot> =
            db.get_meta(group, codec::META_SNAPSHOT, "snapshot")?;
        let (last_applied, membership) = match stored {
            Some(snap) => {
                sm.install(&codec::decompress(&snap.data)?)?;
                (snap.meta.last_log_id, snap.meta.last_membership)
            }
            None => (None, StoredMembership::default()),
        };
        let applied = Applied {
            sm,
            last_applied,
            membership,
        };
        Ok(GroupStateMachine {
            db,
            group,
            state: StateHandle {
                inner: Arc::new(RwLock::new(applied)),
            },
            snapshot_seq: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A read handle on the state.
    pub fn handle(&self) -> StateHandle<S> {
        self.state.clone()
    }

    /// Serializes, compresses and stores a snapshot of the current state.
    fn build(&self) -> Result<Snapshot, Error> {
        let (bytes, last_log_id, last_membership) = {
            let st = self.state.inner.read();
            (st.sm.snapshot(), st.last_applied, st.membership.clone())
        };
        let data = codec::compress(&bytes)?;
        let seq = self.snapshot_seq.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match last_log_id {
            Some(id) => format!("{}-{}-{}-{seq}", self.group, id.leader_id, id.index),
            None => format!("{}-none-{seq}", self.group),
        };
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id,
        };
        self.store_snapshot(&meta, &data)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }

    /// Persists a snapshot as the group's current one.
    fn store_snapshot(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<(), Error> {
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.to_vec(),
        };
        let mut batch = WriteBatch::default();
        self.db.put_meta(
            &mut batch,
            self.group,
            codec::META_SNAPSHOT,
            "snapshot",
            &stored,
        )?;
        self.db.write(batch)
    }

    /// Installs a received snapshot: decode first, then replace the state, then persist.
    fn install(&self, meta: &SnapshotMeta, data: Vec<u8>) -> Result<(), Error> {
        let bytes = codec::decompress(&data)?;
        {
            let mut st = self.state.inner.write();
            st.sm.install(&bytes)?;
            st.last_applied = meta.last_log_id;
            st.membership = meta.last_membership.clone();
        }
        self.store_snapshot(meta, &data)
    }

    /// Applies entries in order under one write lock; stops at an entry of a format newer
    /// than [`ENTRY_FORMAT`] (not applied) with [`Error::NewerFormat`].
    fn apply_entries(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<Response>, (LogId, Error)> {
        let mut st = self.state.inner.write();
        let mut out = Vec::new();
        for entry in entries {
            if let EntryPayload::Normal(request) = &entry.payload {
                if request.format > ENTRY_FORMAT {
                    let e = Error::NewerFormat {
                        what: "Raft log entry",
                        found: u64::from(request.format),
                        max: ENTRY_FORMAT,
                    };
                    tracing::error!(
                        group = %self.group,
                        log_id = %entry.log_id,
                        "can't apply the entry: {e}; the group stops applying its log"
                    );
                    return Err((entry.log_id, e));
                }
            }
            st.last_applied = Some(entry.log_id);
            let response = match entry.payload {
                EntryPayload::Blank => Response::default(),
                EntryPayload::Normal(ref request) => st.sm.apply(entry.log_id.index, request),
                EntryPayload::Membership(membership) => {
                    st.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Response::default()
                }
            };
            out.push(response);
        }
        Ok(out)
    }
}

impl<S: StateMachine> RaftSnapshotBuilder<TypeConfig> for GroupStateMachine<S> {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        self.build()
            .map_err(|e| storage_err(ErrorSubject::StateMachine, ErrorVerb::Write, e))
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for GroupStateMachine<S> {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let st = self.state.inner.read();
        Ok((st.last_applied, st.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.apply_entries(entries).map_err(|(log_id, e)| {
            StorageIOError::new(
                ErrorSubject::Apply(log_id),
                ErrorVerb::Write,
                AnyError::new(&e),
            )
            .into()
        })
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        tracing::info!(group = %self.group, snapshot = %meta, "install snapshot");
        self.install(meta, snapshot.into_inner()).map_err(|e| {
            let sig = Some(meta.signature());
            StorageIOError::new(
                ErrorSubject::Snapshot(sig),
                ErrorVerb::Write,
                AnyError::new(&e),
            )
            .into()
        })
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let stored: Option<StoredSnapshot> = self
            .db
            .get_meta(self.group, codec::META_SNAPSHOT, "snapshot")
            .map_err(|e| storage_err(ErrorSubject::Snapshot(None), ErrorVerb::Read, e))?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;
    use openraft::EntryPayload;

    use super::*;
    use crate::kv::MemKv;
    use crate::typ::Request;

    fn normal(index: u64, command: bytes::Bytes) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(Request::new(command, 0, 0)),
        }
    }

    #[test]
    fn snapshot_round_trips_and_garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = RaftDb::open(dir.path()).unwrap();
        let sm = GroupStateMachine::open(db.clone(), GroupId(3), MemKv::default()).unwrap();
        sm.apply_entries([normal(1, MemKv::set("a", "1")), normal(2, MemKv::incr("a"))])
            .unwrap();
        let snap = sm.build().unwrap();
        assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(2));

        // Reopening the group installs the stored snapshot.
        let again = GroupStateMachine::open(db.clone(), GroupId(3), MemKv::default()).unwrap();
        assert_eq!(
            again.handle().read(|kv| kv.get("a").map(<[u8]>::to_vec)),
            Some(b"2".to_vec())
        );
        assert_eq!(again.handle().last_applied(), snap.meta.last_log_id);

        // Bytes that are not zstd, or zstd of garbage, leave the state as it was.
        let before = again.handle().read(MemKv::clone);
        assert!(again.install(&snap.meta, b"not zstd".to_vec()).is_err());
        let garbage = codec::compress(b"\xff\xff\xff").unwrap();
        assert!(matches!(
            again.install(&snap.meta, garbage),
            Err(Error::InvalidSnapshot(_))
        ));
        assert_eq!(again.handle().read(MemKv::clone), before);
    }

    #[test]
    fn an_entry_of_a_newer_format_is_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let db = RaftDb::open(dir.path()).unwrap();
        let sm = GroupStateMachine::open(db, GroupId(1), MemKv::default()).unwrap();
        let mut newer = normal(2, MemKv::set("b", "2"));
        if let EntryPayload::Normal(r) = &mut newer.payload {
            r.format = ENTRY_FORMAT + 1;
        }
        let (log_id, e) = sm
            .apply_entries([
                normal(1, MemKv::set("a", "1")),
                newer,
                normal(3, MemKv::set("c", "3")),
            ])
            .unwrap_err();
        assert_eq!(log_id.index, 2);
        assert_eq!(
            e.to_string(),
            "Raft log entry format version 2 is newer than this build of Ember reads (versions 1 to 1): it was written by a newer Ember"
        );
        // The entry before it is applied; it and the ones after are not.
        let kv = sm.handle().read(MemKv::clone);
        assert_eq!(kv.get("a"), Some(&b"1"[..]));
        assert_eq!((kv.get("b"), kv.get("c")), (None, None));
        assert_eq!(sm.handle().last_applied().map(|l| l.index), Some(1));
    }

    #[test]
    fn a_snapshot_of_a_newer_format_is_refused_at_open_and_install() {
        let dir = tempfile::tempdir().unwrap();
        let db = RaftDb::open(dir.path()).unwrap();
        let sm = GroupStateMachine::open(db.clone(), GroupId(4), MemKv::default()).unwrap();
        sm.apply_entries([normal(1, MemKv::set("a", "1"))]).unwrap();
        let snap = sm.build().unwrap();
        let z = zstd::stream::encode_all(&MemKv::default().snapshot()[..], 3).unwrap();
        let v2 = codec::seal_snapshot(crate::SNAPSHOT_FORMAT + 1, z);
        assert!(matches!(
            sm.install(&snap.meta, v2.clone()),
            Err(Error::NewerFormat { found: 2, .. })
        ));
        assert_eq!(
            sm.handle().read(|kv| kv.get("a").map(<[u8]>::to_vec)),
            Some(b"1".to_vec())
        );
        // The same bytes stored as the group's snapshot stop the group from opening.
        sm.store_snapshot(&snap.meta, &v2).unwrap();
        let e = GroupStateMachine::open(db, GroupId(4), MemKv::default())
            .err()
            .unwrap();
        assert!(
            e.to_string().starts_with("Raft snapshot format version 2"),
            "{e}"
        );
    }
}
