//! Loads arbitrary bytes as a serialized vector index (`VectorIndex::from_bytes`, what RDB
//! files and DUMP payloads hold for a vector set): as they are, and with a valid CRC-64
//! trailer appended, so that the element and graph decoders run past the checksum. An
//! index that loads must search, save and load back with the same elements, and take a
//! removal and an insert. No panic, no hang.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vector::{AttrUpdate, SearchOpts, VectorIndex};

const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);

fn exercise(idx: &VectorIndex) {
    let dim = idx.config().dim;
    if dim > 4096 {
        return;
    }
    let q: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.37).sin()).collect();
    for exact in [false, true] {
        let o = SearchOpts {
            k: 5,
            ef: 20,
            exact,
            ..SearchOpts::default()
        };
        let _ = idx.search(&q, &o);
    }
    let back = VectorIndex::from_bytes(&idx.to_bytes()).expect("an index's own bytes load");
    assert_eq!(back.len(), idx.len());
    let _ = idx.max_level();
    if let Some(name) = idx.names().first() {
        let _ = idx.links(name);
        let _ = idx.get_vector(name);
        assert!(idx.remove(name));
    }
    let _ = idx.upsert(b"fuzz", &q, AttrUpdate::Keep);
    let _ = idx.search(&q, &SearchOpts::default());
}

fuzz_target!(|data: &[u8]| {
    if let Ok(idx) = VectorIndex::from_bytes(data) {
        exercise(&idx);
    }
    let mut signed = data.to_vec();
    signed.extend_from_slice(&CRC.checksum(data).to_le_bytes());
    if let Ok(idx) = VectorIndex::from_bytes(&signed) {
        exercise(&idx);
    }
});
