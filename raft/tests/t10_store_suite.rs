//! openraft's own storage test suite on the RocksDB log store and the state-machine
//! adapter: the acceptance test of the store.

use raft::openraft::testing::StoreBuilder;
use raft::openraft::testing::Suite;
use raft::GroupId;
use raft::GroupStateMachine;
use raft::MemKv;
use raft::RaftDb;
use raft::RocksLogStore;
use raft::StorageError;
use raft::TypeConfig;
use tempfile::TempDir;

/// A fresh store per suite case: a new directory, group 7 (not 0, to exercise the prefix).
struct RocksBuilder;

impl StoreBuilder<TypeConfig, RocksLogStore, GroupStateMachine<MemKv>, TempDir> for RocksBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, RocksLogStore, GroupStateMachine<MemKv>), StorageError> {
        let dir = TempDir::new().expect("temp dir");
        let db = RaftDb::open(dir.path()).expect("open db");
        let group = GroupId(7);
        let log = RocksLogStore::new(db.clone(), group);
        let sm = GroupStateMachine::open(db, group, MemKv::default()).expect("open sm");
        Ok((dir, log, sm))
    }
}

#[test]
fn t10_openraft_storage_suite() {
    if let Err(e) = Suite::test_all(RocksBuilder) {
        panic!("storage suite failed: {e}");
    }
}
