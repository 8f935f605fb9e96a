//! Which keys a script may touch in cluster mode.
//!
//! A script runs in one Raft group: the group of its declared keys' slot (the router sends
//! it there, and the group's replicas apply it). Only that group's keys are local to it, as
//! only the slots a Redis Cluster node serves are local to a script there: `redis.call`
//! of a command with a key of another group, or with keys of two slots, fails with Redis's
//! `Script attempted to access a non local key in a cluster node`. Within the group Redis's
//! slot rule holds too: a script with a shebang, or a function, stays in one slot (the
//! declared keys', else that of the first key it touches) unless it has the
//! `allow-cross-slot-keys` flag (`Script attempted to access keys that do not hash to the
//! same slot`); a script without a shebang may touch any key of the group.
//!
//! A script without keys (`numkeys` 0) has no group: it runs on the node that got it, and
//! every key is non local to it. A write without keys (FLUSHALL, SWAPDB, ...) would reach
//! keys of every group the node holds, so a script may not run one either.
//!
//! The decision depends only on the group's slot range (fixed when the cluster was
//! created), the declared keys and the script's flags, never on who leads what, so the
//! leader and every replica applying the same entry refuse the same call, and the writes
//! the script made before it are the same everywhere. As in Redis the error is raised into
//! the script (`redis.pcall` gets it as a value).

use std::ops::RangeInclusive;

use crate::script::{FLAG_CROSS_SLOT, FLAG_EVAL_COMPAT};

/// A key outside the script's group, or one command's keys of two slots.
pub const NON_LOCAL: &str = "ERR Script attempted to access a non local key in a cluster node";

/// A key of another slot than the script's, for a script that must stay in one slot.
pub const CROSS_SLOT: &str =
    "ERR Script attempted to access keys that do not hash to the same slot";

/// A write without keys, which no one group can run.
pub const KEYLESS_WRITE: &str = "ERR Script attempted to execute a write command without keys, \
     which Ember cluster mode can't run in one group";

/// The `no-cluster` flag in cluster mode (Redis's text).
pub const NO_CLUSTER: &str = "Can not run script on cluster, 'no-cluster' flag is set.";

/// The keys one script run may touch ([`Self::check`] before each `redis.call`).
#[derive(Debug, Clone)]
pub struct ScriptKeys {
    /// The slots of the script's group; `None` for a script without keys (no group).
    local: Option<RangeInclusive<u16>>,
    /// The one slot the script's keys hash to so far (the declared keys', else the first
    /// key's it touched).
    slot: Option<u16>,
    /// Keys of several slots of the group are allowed (no shebang, or
    /// `allow-cross-slot-keys`).
    cross_slot: bool,
}

impl ScriptKeys {
    /// The scope of a script with `flags` in the group of slots `group` (`None` without
    /// declared keys), whose declared keys hash to `declared`.
    pub fn new(group: Option<RangeInclusive<u16>>, declared: Option<u16>, flags: u32) -> Self {
        ScriptKeys {
            local: group,
            slot: declared,
            cross_slot: flags & (FLAG_EVAL_COMPAT | FLAG_CROSS_SLOT) != 0,
        }
    }

    /// The scope of a script with `flags` and declared `keys` about to run for `client`;
    /// `None` outside cluster mode. The client applying a group's log entry carries that
    /// group's slots; any other client is in the group of the declared keys' slot (the
    /// router ran it here because that group is led, or held for READONLY, here).
    pub fn for_script(
        server: &crate::server::Server,
        client: &crate::client::Client,
        keys: &[&[u8]],
        flags: u32,
    ) -> Option<ScriptKeys> {
        let declared = keys.first().map(|k| raft::key_slot(k));
        let group = match &client.cluster.applying {
            Some(slots) => declared.map(|_| slots.clone()),
            None => {
                let cl = server.cluster.get()?;
                declared.map(|slot| cl.group_slots(cl.slot_group(slot)))
            }
        };
        Some(ScriptKeys::new(group, declared, flags))
    }

    /// Whether the script may run a command whose keys hash to `slots` (a write when
    /// `write`); the error `redis.call` raises when it may not. The first key of a script
    /// that must stay in one slot fixes that slot.
    pub fn check(&mut self, slots: &[u16], write: bool) -> Result<(), &'static str> {
        let Some(&first) = slots.first() else {
            return if write { Err(KEYLESS_WRITE) } else { Ok(()) };
        };
        let local = self.local.as_ref().is_some_and(|g| g.contains(&first));
        if !local || slots.iter().any(|&s| s != first) {
            return Err(NON_LOCAL);
        }
        if !self.cross_slot {
            match self.slot {
                Some(s) if s != first => return Err(CROSS_SLOT),
                _ => self.slot = Some(first),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::FLAG_NO_WRITES;

    #[test]
    fn eval_without_shebang_may_touch_any_slot_of_its_group() {
        let mut k = ScriptKeys::new(Some(100..=199), Some(150), FLAG_EVAL_COMPAT);
        assert_eq!(k.check(&[150], true), Ok(()));
        assert_eq!(k.check(&[100], true), Ok(()));
        assert_eq!(k.check(&[199, 199], false), Ok(()));
        assert_eq!(k.check(&[], false), Ok(()));
    }

    #[test]
    fn keys_of_another_group_are_not_local() {
        let mut k = ScriptKeys::new(Some(100..=199), Some(150), FLAG_EVAL_COMPAT);
        assert_eq!(k.check(&[200], true), Err(NON_LOCAL));
        assert_eq!(k.check(&[99], false), Err(NON_LOCAL));
        // One command's keys of two slots, even both in the group (Redis: CROSSSLOT).
        assert_eq!(k.check(&[150, 151], false), Err(NON_LOCAL));
        assert_eq!(k.check(&[150, 300], false), Err(NON_LOCAL));
    }

    #[test]
    fn shebang_scripts_and_functions_stay_in_one_slot() {
        let mut k = ScriptKeys::new(Some(100..=199), Some(150), FLAG_NO_WRITES);
        assert_eq!(k.check(&[150], false), Ok(()));
        assert_eq!(k.check(&[151], false), Err(CROSS_SLOT));
        assert_eq!(k.check(&[250], false), Err(NON_LOCAL));
        let mut k = ScriptKeys::new(Some(100..=199), Some(150), FLAG_CROSS_SLOT);
        assert_eq!(k.check(&[151], true), Ok(()));
        assert_eq!(k.check(&[250], true), Err(NON_LOCAL));
    }

    #[test]
    fn without_declared_slot_the_first_key_fixes_it() {
        let mut k = ScriptKeys::new(Some(100..=199), None, 0);
        assert_eq!(k.check(&[120], true), Ok(()));
        assert_eq!(k.check(&[120], false), Ok(()));
        assert_eq!(k.check(&[121], false), Err(CROSS_SLOT));
    }

    #[test]
    fn keyless_scripts_have_no_local_key_and_no_keyless_write() {
        let mut k = ScriptKeys::new(None, None, FLAG_EVAL_COMPAT);
        assert_eq!(k.check(&[], false), Ok(()));
        assert_eq!(k.check(&[0], false), Err(NON_LOCAL));
        assert_eq!(k.check(&[5000], true), Err(NON_LOCAL));
        assert_eq!(k.check(&[], true), Err(KEYLESS_WRITE));
        let mut k = ScriptKeys::new(Some(0..=99), Some(5), FLAG_EVAL_COMPAT);
        assert_eq!(k.check(&[], true), Err(KEYLESS_WRITE));
    }
}
