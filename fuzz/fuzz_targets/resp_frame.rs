//! Parses arbitrary bytes as RESP frames; any parsed frame is re-encoded in
//! both protocols, and the RESP3 encoding must parse back to the same frame.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{encode_frame, parse_frame, Frame, Limits, Protocol};

/// Equality that treats NaN doubles as equal to each other.
fn same(a: &Frame, b: &Frame) -> bool {
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    encode_frame(a, Protocol::Resp3, &mut ea);
    encode_frame(b, Protocol::Resp3, &mut eb);
    ea == eb
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    // Re-encoding may lengthen lines (lossy UTF-8, RESP2 blob errors become
    // simple errors), so re-parse without a line limit.
    let relaxed = Limits {
        max_inline_len: usize::MAX,
        ..limits
    };
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        let (frame, consumed) = match parse_frame(rest, &limits) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return,
            Err(err) => {
                let _ = err.to_string();
                return;
            }
        };
        assert!(consumed > 0 && consumed <= rest.len());

        let mut resp2 = Vec::new();
        encode_frame(&frame, Protocol::Resp2, &mut resp2);
        assert!(
            matches!(parse_frame(&resp2, &relaxed), Ok(Some((_, n))) if n == resp2.len()),
            "RESP2 encoding must parse"
        );

        let mut resp3 = Vec::new();
        encode_frame(&frame, Protocol::Resp3, &mut resp3);
        match parse_frame(&resp3, &relaxed) {
            Ok(Some((back, n))) => {
                assert_eq!(n, resp3.len());
                assert!(same(&back, &frame), "RESP3 round trip changed the frame");
            }
            other => panic!("RESP3 re-parse failed: {other:?}"),
        }
        pos += consumed;
    }
});
