//! Redis Cluster slots to Raft groups: 16,384 slots split into `groups` contiguous ranges of
//! near-equal size (sizes differ by at most one). Range `i` (0-based) is data group `i + 1`;
//! group 0 is the metadata group and owns no slots. [`key_slot`] is Redis Cluster's key to
//! slot function, shared by the node's state machine and its router.

use std::ops::RangeInclusive;

use crate::typ::GroupId;

/// Number of Redis Cluster hash slots.
pub const SLOTS: u16 = 16_384;

/// The Redis Cluster hash slot of `key`: CRC16-XMODEM of the key modulo 16,384, where a
/// key holding `{...}` with at least one byte between the first `{` and the next `}` hashes
/// only those bytes (the hash tag), so `{user1}.a` and `{user1}.b` share a slot. An empty
/// tag (`{}`) or a `{` without a later `}` hashes the whole key, as Redis's `keyHashSlot`.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses.
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// The byte-at-a-time table of [`crc16`], built at compile time.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

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
    fn key_slot_matches_redis_cluster() {
        // The check value of CRC16-XMODEM, and values redis-server's CLUSTER KEYSLOT gives.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 12_739);
        assert_eq!(key_slot(b"foo"), 12_182);
        assert_eq!(key_slot(b"bar"), 5_061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b""), 0);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{bar}"), key_slot(b"bar"));
        // Only the first `{` counts, up to the first `}` after it.
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        // An empty tag, or no closing brace, hashes the whole key.
        assert_eq!(key_slot(b"{}foo"), crc16(b"{}foo") % SLOTS);
        assert_ne!(key_slot(b"{}foo"), key_slot(b""));
        assert_eq!(key_slot(b"{foo"), crc16(b"{foo") % SLOTS);
        assert!(key_slot(&[0xff; 64]) < SLOTS);
    }

    #[test]
    fn out_of_range_input_is_clamped() {
        assert_eq!(slot_group(u16::MAX, 64), GroupId(64));
        assert_eq!(slot_group(5, 0), GroupId(1));
        assert_eq!(slot_group(5, u32::MAX), GroupId(6));
    }
}
