//! Payload encoding: openraft's serde types as postcard bytes, the encoding the raft crate
//! also uses on disk.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;

/// Encodes `value` (a Raft RPC or its result) for the wire.
pub(crate) fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Bytes, Error> {
    postcard::to_stdvec(value)
        .map(Bytes::from)
        .map_err(|e| Error::Encode {
            what,
            reason: e.to_string(),
        })
}

/// Decodes bytes written by [`encode`] on a peer; garbage and trailing bytes are errors,
/// never panics.
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, Error> {
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| Error::malformed(what, e))?;
    if !rest.is_empty() {
        return Err(Error::malformed(
            what,
            format!("{} trailing bytes", rest.len()),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_garbage() {
        let b = encode("t", &(3u32, String::from("x"))).unwrap();
        assert_eq!(decode::<(u32, String)>("t", &b).unwrap(), (3, "x".into()));
        let mut long = b.to_vec();
        long.push(1);
        assert!(decode::<(u32, String)>("t", &long).is_err());
        assert!(decode::<(u32, String)>("t", &[0xff, 0xff, 0xff]).is_err());
    }
}
