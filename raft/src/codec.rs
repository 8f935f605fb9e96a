//! Byte layouts: RocksDB keys, value encoding (postcard) and snapshot compression (zstd).
//!
//! Keys carry the group id in front (big-endian), so one column family holds every
//! group's data and a group's keys sort together:
//! - `logs` CF: `group: u32 BE | index: u64 BE` -> postcard(`Entry`)
//! - `meta` CF: `group: u32 BE | name` -> postcard(value), names below.
//! - default CF: [`DB_FORMAT_KEY`] -> the database's format version (decimal text).
//!
//! # Format versions
//! Three things this crate stores or sends have a version, each the newest this build
//! writes and reads:
//! - [`ENTRY_FORMAT`], one log entry's [`Request`](crate::Request): its layout and the
//!   meaning of its command bytes to the node's state machines. It travels in the
//!   request (`Request::format`, set by [`Request::new`](crate::Request::new)) and is
//!   checked when the entry is applied: a newer one stops the group's state machine
//!   with [`Error::NewerFormat`] (logged), so an older node never applies an entry it
//!   would read differently; it still stores and forwards the entry unchanged.
//! - [`SNAPSHOT_FORMAT`], a snapshot's bytes (the compressed container and the meaning
//!   of the [`StateMachine::snapshot`](crate::StateMachine::snapshot) bytes in it),
//!   checked when a snapshot is opened (a node's start, an install from the leader).
//! - [`DB_FORMAT`], the RocksDB layout (keys, postcard values of the log, vote, marks and
//!   stored snapshot), stored under [`DB_FORMAT_KEY`] and checked when the database opens.
//!
//! Version 1 of entries and snapshots is written exactly as before versions existed (a
//! postcard `Request` whose command does not start with byte 0; a bare zstd frame), so
//! nodes of the release before versions (which check nothing) apply this release's
//! entries and snapshots correctly in a mixed cluster or after a downgrade, and this
//! release reads theirs as version 1. Any other version is written in an envelope that
//! release would refuse or this one recognises: a command starting with byte 0 then the
//! version (u16 big-endian) then the command; a snapshot starting with [`SNAPSHOT_MAGIC`]
//! then the version (u16 big-endian) then the payload. A database without
//! [`DB_FORMAT_KEY`] is version 1 (the key is added when it opens). A change that a node
//! of this release would read wrongly bumps the version; a rolling upgrade then needs the
//! new release to keep writing the old version until every node runs it.

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

/// The newest log entry format (see the module docs) this build writes and applies.
pub const ENTRY_FORMAT: u16 = 1;
/// The newest snapshot format (see the module docs) this build writes and reads.
pub const SNAPSHOT_FORMAT: u16 = 1;
/// The newest database layout (see the module docs) this build writes and reads.
pub const DB_FORMAT: u16 = 1;
/// The key (default column family) of the database's format version.
pub const DB_FORMAT_KEY: &[u8] = b"ember-raft-format";
/// The first bytes of a snapshot of a format other than 1 (then the version, u16 BE).
pub const SNAPSHOT_MAGIC: &[u8; 4] = b"EMBS";
/// The first bytes of every zstd frame: a version-1 snapshot.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

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

/// Compresses snapshot bytes into a snapshot of [`SNAPSHOT_FORMAT`].
pub(crate) fn compress(data: &[u8]) -> Result<Vec<u8>, Error> {
    let z =
        zstd::stream::encode_all(data, ZSTD_LEVEL).map_err(|e| Error::corrupt("snapshot", e))?;
    Ok(seal_snapshot(SNAPSHOT_FORMAT, z))
}

/// A snapshot of format `version` holding `payload`: the payload itself for version 1, else
/// [`SNAPSHOT_MAGIC`], the version and the payload.
pub(crate) fn seal_snapshot(version: u16, payload: Vec<u8>) -> Vec<u8> {
    if version == 1 {
        return payload;
    }
    let mut out = Vec::with_capacity(payload.len() + 6);
    out.extend_from_slice(SNAPSHOT_MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The format version of snapshot bytes (from disk or a peer) and its payload; a version
/// newer than [`SNAPSHOT_FORMAT`] is [`Error::NewerFormat`].
pub(crate) fn open_snapshot(data: &[u8]) -> Result<(u16, &[u8]), Error> {
    if data.starts_with(&ZSTD_MAGIC) {
        return Ok((1, data));
    }
    let Some(rest) = data.strip_prefix(SNAPSHOT_MAGIC) else {
        return Err(Error::corrupt(
            "snapshot",
            "neither a zstd frame nor a versioned snapshot",
        ));
    };
    let (Some(&hi), Some(&lo)) = (rest.first(), rest.get(1)) else {
        return Err(Error::corrupt("snapshot", "truncated format version"));
    };
    match u16::from_be_bytes([hi, lo]) {
        0 => Err(Error::corrupt("snapshot", "format version 0")),
        v if v > SNAPSHOT_FORMAT => Err(Error::NewerFormat {
            what: "Raft snapshot",
            found: u64::from(v),
            max: SNAPSHOT_FORMAT,
        }),
        v => Ok((v, &rest[2..])),
    }
}

/// Decompresses snapshot bytes from [`compress`] (from disk or a peer), checking their
/// format version first.
pub(crate) fn decompress(data: &[u8]) -> Result<Vec<u8>, Error> {
    let (_, payload) = open_snapshot(data)?;
    zstd::stream::decode_all(payload).map_err(|e| Error::corrupt("snapshot", e))
}

/// A request's command bytes as they are serialized for entry format `version`: the
/// command itself for version 1 (unless it starts with byte 0), else byte 0, the version
/// (u16 BE) and the command.
pub(crate) fn seal_command(version: u16, command: &bytes::Bytes) -> bytes::Bytes {
    if version == 1 && command.first() != Some(&0) {
        return command.clone();
    }
    let mut out = Vec::with_capacity(command.len() + 3);
    out.push(0);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(command);
    out.into()
}

/// The entry format version and the command of serialized command bytes
/// ([`seal_command`]). Any version is returned (applying checks it); an envelope too short
/// or of version 0 is an error.
pub(crate) fn open_command(bytes: bytes::Bytes) -> Result<(u16, bytes::Bytes), &'static str> {
    if bytes.first() != Some(&0) {
        return Ok((1, bytes));
    }
    match bytes.get(1..3) {
        None => Err("truncated entry format envelope"),
        Some([0, 0]) => Err("entry format version 0"),
        Some(&[hi, lo]) => Ok((u16::from_be_bytes([hi, lo]), bytes.slice(3..))),
        Some(_) => Err("truncated entry format envelope"),
    }
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

    /// A `Request` as the release before format versions serialized it.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct LegacyRequest {
        command: bytes::Bytes,
        time_ns: u64,
        seed: u64,
    }

    #[test]
    fn entry_format_1_round_trips_in_the_legacy_layout() {
        let req = crate::Request::new(&b"*1\r\n$4\r\nPING\r\n"[..], 5, 6);
        assert_eq!(req.format, ENTRY_FORMAT);
        let bytes = encode("t", &req).unwrap();
        let legacy = LegacyRequest {
            command: req.command.clone(),
            time_ns: 5,
            seed: 6,
        };
        // Version 1 is byte for byte what the previous release wrote (and applies).
        assert_eq!(bytes, encode("t", &legacy).unwrap());
        assert_eq!(decode::<crate::Request>("t", &bytes).unwrap(), req);
        // A command that starts with byte 0 goes in the envelope, and comes back the same.
        let odd = crate::Request::new(&b"\x00odd"[..], 1, 2);
        let bytes = encode("t", &odd).unwrap();
        let raw: LegacyRequest = decode("t", &bytes).unwrap();
        assert_eq!(&raw.command[..], b"\x00\x00\x01\x00odd");
        assert_eq!(decode::<crate::Request>("t", &bytes).unwrap(), odd);
    }

    #[test]
    fn entry_format_legacy_bytes_read_as_version_1() {
        let legacy = LegacyRequest {
            command: bytes::Bytes::from_static(b"S\x00\x00\x00\x01ab"),
            time_ns: 7,
            seed: 8,
        };
        let req: crate::Request = decode("t", &encode("t", &legacy).unwrap()).unwrap();
        assert_eq!(req, crate::Request::new(legacy.command.clone(), 7, 8));
        assert_eq!(req.format, 1);
        // An empty command too.
        let empty = LegacyRequest {
            command: bytes::Bytes::new(),
            time_ns: 0,
            seed: 0,
        };
        let req: crate::Request = decode("t", &encode("t", &empty).unwrap()).unwrap();
        assert_eq!((req.format, req.command.len()), (1, 0));
    }

    #[test]
    fn entry_format_2_is_kept_for_apply_to_refuse() {
        let mut req = crate::Request::new(&b"cmd"[..], 1, 2);
        req.format = 2;
        let bytes = encode("t", &req).unwrap();
        let raw: LegacyRequest = decode("t", &bytes).unwrap();
        assert_eq!(&raw.command[..], b"\x00\x00\x02cmd");
        // Decoding keeps the version (the entry is stored and forwarded as it is) ...
        let back: crate::Request = decode("t", &bytes).unwrap();
        assert_eq!(back, req);
        // ... and broken envelopes are errors, not version-1 commands.
        for bad in [&b"\x00"[..], b"\x00\x01", b"\x00\x00\x00cmd"] {
            let raw = LegacyRequest {
                command: bytes::Bytes::copy_from_slice(bad),
                time_ns: 0,
                seed: 0,
            };
            assert!(decode::<crate::Request>("t", &encode("t", &raw).unwrap()).is_err());
        }
    }

    #[test]
    fn snapshot_format_1_is_a_bare_zstd_frame_and_legacy_reads() {
        let sealed = compress(b"state").unwrap();
        // What the previous release wrote and reads: a zstd frame, nothing around it.
        assert!(sealed.starts_with(&ZSTD_MAGIC));
        assert_eq!(open_snapshot(&sealed).unwrap().0, 1);
        let legacy = zstd::stream::encode_all(&b"old state"[..], 3).unwrap();
        assert_eq!(decompress(&legacy).unwrap(), b"old state");
        // Version 1 in the envelope reads too.
        let mut explicit = seal_snapshot(2, legacy);
        explicit[5] = 1;
        assert_eq!(decompress(&explicit).unwrap(), b"old state");
    }

    #[test]
    fn snapshot_format_2_is_refused_with_a_clear_error() {
        let z = zstd::stream::encode_all(&b"new state"[..], 3).unwrap();
        let v2 = seal_snapshot(2, z);
        assert!(v2.starts_with(b"EMBS\x00\x02"));
        let e = decompress(&v2).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NewerFormat {
                    found: 2,
                    max: SNAPSHOT_FORMAT,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "Raft snapshot format version 2 is newer than this build of Ember reads (versions 1 to 1): it was written by a newer Ember"
        );
        assert!(decompress(b"EMBS").is_err());
        assert!(decompress(b"EMBS\x00\x00").is_err());
    }
}
