//! The multi-group manager: all of one node's Raft groups over one [`RaftDb`] and one
//! [`GroupTransport`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use crate::db::RaftDb;
use crate::error::Error;
use crate::log_store::RocksLogStore;
use crate::network::GroupNetworkFactory;
use crate::network::GroupTransport;
use crate::slots;
use crate::sm_store::GroupStateMachine;
use crate::sm_store::StateHandle;
use crate::state_machine::StateMachine;
use crate::typ::GroupId;
use crate::typ::NodeId;
use crate::typ::Raft;

/// How long [`MultiRaft::close`] waits for the groups' tasks to let go of the database.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// One open group on this node: its Raft handle and its state machine.
pub struct Group<S> {
    /// The group's id.
    pub id: GroupId,
    /// The running Raft member (client_write, metrics, membership changes, RPC handlers).
    pub raft: Raft,
    /// Read access to the group's state machine.
    pub state: StateHandle<S>,
}

impl<S> Clone for Group<S> {
    fn clone(&self) -> Self {
        Group {
            id: self.id,
            raft: self.raft.clone(),
            state: self.state.clone(),
        }
    }
}

/// All Raft groups of one node. Groups share the node's database (one key prefix each) and
/// its transport (RPCs carry the group id).
pub struct MultiRaft<S, T> {
    /// This node's id in every group.
    node_id: NodeId,
    /// The node's Raft database.
    db: RaftDb,
    /// Raft timing and snapshot policy, the same for every group.
    config: Arc<openraft::Config>,
    /// The node's transport, cloned into every group.
    transport: T,
    /// The open groups.
    groups: RwLock<BTreeMap<GroupId, Group<S>>>,
    /// Serializes [`MultiRaft::open_group`] so a group cannot be opened twice.
    open_lock: tokio::sync::Mutex<()>,
}

impl<S: StateMachine, T: GroupTransport> MultiRaft<S, T> {
    /// A manager for node `node_id` with no group open yet; `config` is validated.
    pub fn new(
        node_id: NodeId,
        db: RaftDb,
        config: openraft::Config,
        transport: T,
    ) -> Result<Self, Error> {
        Ok(MultiRaft {
            node_id,
            db,
            config: Arc::new(config.validate()?),
            transport,
            groups: RwLock::new(BTreeMap::new()),
            open_lock: tokio::sync::Mutex::new(()),
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The node's Raft database.
    pub fn db(&self) -> &RaftDb {
        &self.db
    }

    /// Starts this node's member of `group` with `sm` as its (empty) state machine. A group
    /// with data on disk comes back from it: its snapshot is installed into `sm`, its vote
    /// and log are read, and committed entries after the snapshot are applied again.
    pub async fn open_group(&self, group: GroupId, sm: S) -> Result<Group<S>, Error> {
        let _open = self.open_lock.lock().await;
        if self.groups.read().contains_key(&group) {
            return Err(Error::GroupOpen(group));
        }
        let log = RocksLogStore::new(self.db.clone(), group);
        let sm = GroupStateMachine::open(self.db.clone(), group, sm)?;
        let state = sm.handle();
        let network = GroupNetworkFactory::new(group, self.transport.clone());
        let raft = Raft::new(self.node_id, self.config.clone(), network, log, sm).await?;
        let opened = Group {
            id: group,
            raft,
            state,
        };
        self.groups.write().insert(group, opened.clone());
        tracing::info!(node = self.node_id, %group, "group open");
        Ok(opened)
    }

    /// The open group `group`.
    pub fn group(&self, group: GroupId) -> Option<Group<S>> {
        self.groups.read().get(&group).cloned()
    }

    /// The open data group owning `slot` when the slots are split into `groups` ranges.
    pub fn slot_group(&self, slot: u16, groups: u32) -> Option<Group<S>> {
        self.group(slots::slot_group(slot, groups))
    }

    /// The ids of the open groups, ascending.
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.groups.read().keys().copied().collect()
    }

    /// Stops this node's member of `group` (its data stays on disk).
    pub async fn close_group(&self, group: GroupId) -> Result<(), Error> {
        let removed = self.groups.write().remove(&group);
        if let Some(g) = removed {
            g.raft
                .shutdown()
                .await
                .map_err(|e| Error::Task(e.to_string()))?;
        }
        Ok(())
    }

    /// Stops this node's member of `group` and deletes what the node stored for it (a
    /// replica moved to another node). The group's state machine data is the caller's.
    pub async fn remove_group(&self, group: GroupId) -> Result<(), Error> {
        self.close_group(group).await?;
        self.db.delete_group(group)
    }

    /// Stops every group (their data stays on disk).
    pub async fn shutdown(&self) -> Result<(), Error> {
        let groups: Vec<Group<S>> = std::mem::take(&mut *self.groups.write())
            .into_values()
            .collect();
        for g in groups {
            g.raft
                .shutdown()
                .await
                .map_err(|e| Error::Task(e.to_string()))?;
        }
        Ok(())
    }

    /// Stops every group and waits until their tasks have released the database, so the
    /// same directory can be opened again (a restart).
    pub async fn close(self) -> Result<(), Error> {
        self.shutdown().await?;
        let db = self.db.clone();
        drop(self);
        let step = Duration::from_millis(10);
        let mut waited = Duration::ZERO;
        while db.handles() > 1 {
            if waited >= CLOSE_WAIT {
                return Err(Error::DbBusy);
            }
            tokio::time::sleep(step).await;
            waited += step;
        }
        Ok(())
    }
}
