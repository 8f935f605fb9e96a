//! Redis Cluster slots to Raft groups: 16,384 slots split into `groups` contiguous ranges of
//! near-equal size (sizes differ by at most one). Range `i` (0-based) is data group `i + 1`;
//! group 0 is the metadata group and owns no slots.

use std::ops::RangeInclusive;

use crate::typ::GroupId;

/// Number of Redis Cluster hash slots.
pub const SLOTS: u16 = 16_384;

/// The data group owning `slot` when the slots are split into `groups` ranges.
/// `groups` is clamped to `1..=SLOTS` and `slot` to `0..SLOTS`, so any input gives a group.
pub fn slot_group(slot: u16, groups: u32) -> GroupId {
    let g = clamp_groups(groups);
    let slot = u64::from(slot.min(SLOTS - 1));
    // Range i holds the slots s with i * SLOTS <= s * g < (i + 1) * SLOTS.
    let index = slot * u64::from(g) / u64::from(SLOTS);
    GroupId(index as u32 + 1)
}

/// The slots of data group `group` (1-based) out of `groups`, or `None` for group 0 or a
/// group past `groups`.
pub fn group_slots(group: GroupId, groups: u32) -> Option<RangeInclusive<u16>> {
    let g = u64::from(clamp_groups(groups));
    let index = u64::from(group.0.checked_sub(1)?);
    if index >= g {
        return None;
    }
    let start = range_start(index, g);
    let end = range_start(index + 1, g) - 1;
    Some(start as u16..=end as u16)
}

/// The data groups of a cluster with `groups` ranges: `1..=groups`.
pub fn data_groups(groups: u32) -> impl Iterator<Item = GroupId> {
    (1..=clamp_groups(groups)).map(GroupId)
}

/// The first slot of range `index` of `g`: ceil(index * SLOTS / g).
fn range_start(index: u64, g: u64) -> u64 {
    (index * u64::from(SLOTS)).div_ceil(g)
}

/// A usable number of groups: at least one, at most one per slot.
fn clamp_groups(groups: u32) -> u32 {
    groups.clamp(1, u32::from(SLOTS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(groups: u32) {
        let mut next = 0u32;
        let (mut min, mut max) = (u32::MAX, 0);
        for group in data_groups(groups) {
            let range = group_slots(group, groups).unwrap();
            assert_eq!(u32::from(*range.start()), next, "contiguous at {group}");
            for slot in range.clone() {
                assert_eq!(slot_group(slot, groups), group, "slot {slot}");
            }
            let size = u32::from(*range.end()) - u32::from(*range.start()) + 1;
            min = min.min(size);
            max = max.max(size);
            next = u32::from(*range.end()) + 1;
        }
        assert_eq!(
            next,
            u32::from(SLOTS),
            "every slot covered for {groups} groups"
        );
        assert!(max - min <= 1, "sizes {min}..{max} for {groups} groups");
        assert_eq!(group_slots(GroupId::META, groups), None);
        assert_eq!(group_slots(GroupId(groups + 1), groups), None);
    }

    #[test]
    fn every_slot_in_exactly_one_contiguous_even_range() {
        for groups in [1, 2, 3, 7, 16, 64, 100, 1000, 16_383, 16_384] {
            check(groups);
        }
    }

    #[test]
    fn sixty_four_groups_of_256() {
        assert_eq!(group_slots(GroupId(1), 64), Some(0..=255));
        assert_eq!(group_slots(GroupId(64), 64), Some(16_128..=16_383));
        assert_eq!(slot_group(256, 64), GroupId(2));
    }

    #[test]
    fn out_of_range_input_is_clamped() {
        assert_eq!(slot_group(u16::MAX, 64), GroupId(64));
        assert_eq!(slot_group(5, 0), GroupId(1));
        assert_eq!(slot_group(5, u32::MAX), GroupId(6));
    }
}
