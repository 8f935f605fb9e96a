//! The RDB loader and the DUMP / FUNCTION RESTORE payload decoders on arbitrary bytes:
//! every input is either loaded or rejected with an error, never a panic. The first byte
//! picks the entry point; payload inputs get a valid version and CRC64 trailer appended
//! so the decoder itself is exercised, not only the checksum check.

#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::rdb::{self, CRC64};

fn with_trailer(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        // A whole file as given.
        0 => {
            let _ = rdb::load(rest, |_| Ok(()));
        }
        // A file body after a valid header (the checksum fails at the end, if reached).
        1 => {
            let mut f = b"REDIS0010".to_vec();
            f.extend_from_slice(rest);
            let _ = rdb::load(&f[..], |_| Ok(()));
        }
        // A DUMP payload: decoded values must dump again.
        2 => {
            if let Ok(Some(v)) = rdb::restore_payload(&with_trailer(rest)) {
                let again = rdb::dump_payload(&v);
                assert!(rdb::restore_payload(&again).is_ok());
            }
        }
        // A FUNCTION DUMP payload.
        _ => {
            let _ = rdb::functions_from_payload(&with_trailer(rest));
        }
    }
});
