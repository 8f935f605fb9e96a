//! Feeds arbitrary bytes to the request parser in chunks, like a connection
//! would, checking that it never panics and that every result is in bounds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{Args, Limits, RequestKind, RequestParser};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size and the limits.
    let Some((&ctl, data)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(ctl & 0x1f) + 1;
    let limits = if ctl & 0x80 != 0 {
        Limits {
            max_bulk_len: 16,
            max_multibulk_len: 8,
            max_inline_len: 32,
        }
    } else {
        Limits::default()
    };
    let mut parser = RequestParser::new(limits);
    let mut spans = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    'feed: while fed < data.len() {
        let n = chunk.min(data.len() - fed);
        buf.extend_from_slice(&data[fed..fed + n]);
        fed += n;
        loop {
            match parser.parse(&buf, &mut spans) {
                Ok(Some((consumed, kind))) => {
                    assert!(consumed > 0, "a command consumes bytes");
                    assert!(consumed <= buf.len(), "consumed past the buffer");
                    let source = match kind {
                        RequestKind::Multibulk => &buf[..consumed],
                        RequestKind::Inline => parser.inline_buf(),
                    };
                    for &(start, end) in &spans {
                        assert!(start <= end && end <= source.len(), "span out of bounds");
                    }
                    let args = Args::new(source, &spans);
                    assert_eq!(args.iter().count(), args.len());
                    buf.drain(..consumed);
                }
                Ok(None) => break,
                Err(err) => {
                    let _ = err.to_string();
                    break 'feed;
                }
            }
        }
    }
});
