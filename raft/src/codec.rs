//! Byte layouts: RocksDB keys, value encoding (postcard) and snapshot compression (zstd).
//!
//! Keys carry the group id in front (big-endian), so one column family holds every
//! group's data and a group's keys sort together:
//! - `logs` CF: `group: u32 BE | index: u64 BE` -> postcard(`Entry`)
//! - `meta` CF: `group: u32 BE | name` -> postcard(value), names below.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::typ::GroupId;

/// Meta key name of the vote.
pub(crate) const META_VOTE: &[u8] = b"vote";
/// Meta key name of the last committed log id.
pub(crate) const META_COMMITTED: &[u8] = b"committed";
/// Meta key name of the last purged log id.
pub(crate) const META_PURGED: &[u8] = b"purged";
/// Meta key name of the current snapshot (meta + compressed data).
pub(crate) const META_SNAPSHOT: &[u8] = b"snapshot";

/// zstd level of snapshot compression (fast; snapshots are rebuilt often).
const ZSTD_LEVEL: i32 = 3;

/// The key of log entry `index` of `group`.
pub(crate) fn log_key(group: GroupId, index: u64) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&group.0.to_be_bytes());
    k[4..].copy_from_slice(&index.to_be_bytes());
    k
}

/// Splits a log key into group and index.
pub(crate) fn parse_log_key(key: &[u8]) -> Result<(GroupId, u64), Error> {
    let k: &[u8; 12] = key
        .try_into()
        .map_err(|_| Error::corrupt("log key", format!("length {}", key.len())))?;
    let mut g = [0u8; 4];
    g.copy_from_slice(&k[..4]);
    let mut i = [0u8; 8];
    i.copy_from_slice(&k[4..]);
    Ok((GroupId(u32::from_be_bytes(g)), u64::from_be_bytes(i)))
}

/// The key of meta value `name` of `group`.
pub(crate) fn meta_key(group: GroupId, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + name.len());
    k.extend_from_slice(&group.0.to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// The group a meta key belongs to.
pub(crate) fn meta_key_group(key: &[u8]) -> Option<GroupId> {
    let g: [u8; 4] = key.get(..4)?.try_into().ok()?;
    Some(GroupId(u32::from_be_bytes(g)))
}

/// Encodes a value for RocksDB or the wire.
pub(crate) fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, Error> {
    postcard::to_stdvec(value).map_err(|e| Error::corrupt(what, e))
}

/// Decodes a value written by [`encode`]; trailing bytes are an error.
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, Error> {
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| Error::corrupt(what, e))?;
    if !rest.is_empty() {
        return Err(Error::corrupt(
            what,
            format!("{} trailing bytes", rest.len()),
        ));
    }
    Ok(value)
}

/// Compresses snapshot bytes.
pub(crate) fn compress(data: &[u8]) -> Result<Vec<u8>, Error> {
    zstd::stream::encode_all(data, ZSTD_LEVEL).map_err(|e| Error::corrupt("snapshot", e))
}

/// Decompresses snapshot bytes from [`compress`] (from disk or a peer).
pub(crate) fn decompress(data: &[u8]) -> Result<Vec<u8>, Error> {
    zstd::stream::decode_all(data).map_err(|e| Error::corrupt("snapshot", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_sort_by_group_then_index() {
        let a = log_key(GroupId(1), u64::MAX);
        let b = log_key(GroupId(2), 0);
        let c = log_key(GroupId(2), 1);
        assert!(a < b && b < c);
        assert_eq!(parse_log_key(&c).unwrap(), (GroupId(2), 1));
        assert!(parse_log_key(&c[..11]).is_err());
    }

    #[test]
    fn decode_rejects_garbage_and_trailing_bytes() {
        let bytes = encode("t", &(7u64, String::from("x"))).unwrap();
        let back: (u64, String) = decode("t", &bytes).unwrap();
        assert_eq!(back, (7, "x".into()));
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode::<(u64, String)>("t", &long).is_err());
        assert!(decode::<(u64, String)>("t", &[0xff]).is_err());
        assert!(decompress(b"not zstd").is_err());
        assert_eq!(decompress(&compress(b"abc").unwrap()).unwrap(), b"abc");
    }
}
