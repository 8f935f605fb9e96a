//! A tiny in-memory key-value [`StateMachine`] for tests and examples: SET, GET, INCR and
//! DEL encoded as bytes. Not the node's data model; just enough to check replication.
//!
//! Command layout: one op byte (`S`, `G`, `I`, `D`), key length as u32 big-endian, key,
//! then (SET only) the value. Replies: `OK`, the value, the new integer in decimal, `1`/`0`,
//! `nil`, or `ERR ...` for a malformed command.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::codec;
use crate::error::Error;
use crate::state_machine::StateMachine;
use crate::typ::Request;
use crate::typ::Response;

/// The in-memory key-value state machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemKv {
    /// The data.
    pub map: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The log index of the last applied command (0 before any).
    pub last_index: u64,
}

/// A decoded command.
enum Cmd<'a> {
    /// Stores `value` at `key`.
    Set(&'a [u8], &'a [u8]),
    /// Reads `key`.
    Get(&'a [u8]),
    /// Adds one to the integer at `key` (missing counts as 0).
    Incr(&'a [u8]),
    /// Removes `key`.
    Del(&'a [u8]),
}

/// Encodes `op key [value]`.
fn encode(op: u8, key: &[u8], value: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(5 + key.len() + value.len());
    out.push(op);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    Bytes::from(out)
}

/// Decodes a command; `None` when malformed.
fn decode(bytes: &[u8]) -> Option<Cmd<'_>> {
    let (&op, rest) = bytes.split_first()?;
    let len: [u8; 4] = rest.get(..4)?.try_into().ok()?;
    let len = u32::from_be_bytes(len) as usize;
    let key = rest.get(4..4usize.checked_add(len)?)?;
    let value = &rest[4 + len..];
    match (op, value.is_empty()) {
        (b'S', _) => Some(Cmd::Set(key, value)),
        (b'G', true) => Some(Cmd::Get(key)),
        (b'I', true) => Some(Cmd::Incr(key)),
        (b'D', true) => Some(Cmd::Del(key)),
        _ => None,
    }
}

impl MemKv {
    /// The command bytes of `SET key value`.
    pub fn set(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Bytes {
        encode(b'S', key.as_ref(), value.as_ref())
    }

    /// The command bytes of `GET key`.
    pub fn get_cmd(key: impl AsRef<[u8]>) -> Bytes {
        encode(b'G', key.as_ref(), b"")
    }

    /// The command bytes of `INCR key`.
    pub fn incr(key: impl AsRef<[u8]>) -> Bytes {
        encode(b'I', key.as_ref(), b"")
    }

    /// The command bytes of `DEL key`.
    pub fn del(key: impl AsRef<[u8]>) -> Bytes {
        encode(b'D', key.as_ref(), b"")
    }

    /// The value at `key`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Option<&[u8]> {
        self.map.get(key.as_ref()).map(Vec::as_slice)
    }
}

impl StateMachine for MemKv {
    fn apply(&mut self, index: u64, request: &Request) -> Response {
        self.last_index = index;
        let reply: Bytes = match decode(&request.command) {
            None => Bytes::from_static(b"ERR malformed command"),
            Some(Cmd::Set(k, v)) => {
                self.map.insert(k.to_vec(), v.to_vec());
                Bytes::from_static(b"OK")
            }
            Some(Cmd::Get(k)) => match self.map.get(k) {
                Some(v) => Bytes::copy_from_slice(v),
                None => Bytes::from_static(b"nil"),
            },
            Some(Cmd::Incr(k)) => {
                let current = match self.map.get(k) {
                    None => Some(0),
                    Some(v) => std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok()),
                };
                match current.map(|n| n.checked_add(1)) {
                    None => Bytes::from_static(b"ERR value is not an integer"),
                    Some(None) => Bytes::from_static(b"ERR increment would overflow"),
                    Some(Some(n)) => {
                        let s = n.to_string();
                        self.map.insert(k.to_vec(), s.clone().into_bytes());
                        Bytes::from(s)
                    }
                }
            }
            Some(Cmd::Del(k)) => match self.map.remove(k) {
                Some(_) => Bytes::from_static(b"1"),
                None => Bytes::from_static(b"0"),
            },
        };
        Response(reply)
    }

    fn snapshot(&self) -> Vec<u8> {
        // Encoding a map of byte strings cannot fail.
        codec::encode("kv snapshot", &(&self.map, self.last_index)).unwrap_or_default()
    }

    fn install(&mut self, data: &[u8]) -> Result<(), Error> {
        let (map, last_index) = codec::decode("kv snapshot", data)
            .map_err(|e| Error::InvalidSnapshot(e.to_string()))?;
        self.map = map;
        self.last_index = last_index;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kv: &mut MemKv, index: u64, cmd: Bytes) -> Vec<u8> {
        kv.apply(index, &Request::new(cmd, 0, 0)).0.to_vec()
    }

    #[test]
    fn commands_apply_and_snapshot_round_trips() {
        let mut kv = MemKv::default();
        assert_eq!(run(&mut kv, 1, MemKv::set("a", "1")), b"OK");
        assert_eq!(run(&mut kv, 2, MemKv::incr("a")), b"2");
        assert_eq!(run(&mut kv, 3, MemKv::get_cmd("a")), b"2");
        assert_eq!(run(&mut kv, 4, MemKv::set("s", "x")), b"OK");
        assert_eq!(
            run(&mut kv, 5, MemKv::incr("s")),
            b"ERR value is not an integer"
        );
        assert_eq!(run(&mut kv, 6, MemKv::del("s")), b"1");
        assert_eq!(run(&mut kv, 7, MemKv::get_cmd("s")), b"nil");
        let mut other = MemKv::default();
        other.install(&kv.snapshot()).unwrap();
        assert_eq!(other, kv);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        let mut kv = MemKv::default();
        for bad in [
            &b""[..],
            b"S",
            b"S\0\0\0\x09ab",
            b"G\0\0\0\x01ab",
            b"X\0\0\0\0",
            b"S\xff\xff\xff\xff",
        ] {
            assert_eq!(
                run(&mut kv, 1, Bytes::copy_from_slice(bad)),
                b"ERR malformed command"
            );
        }
        let before = kv.clone();
        assert!(kv.install(b"\xff\xff garbage").is_err());
        assert_eq!(kv, before);
    }
}
