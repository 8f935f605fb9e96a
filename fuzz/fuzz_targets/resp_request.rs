//! Feeds arbitrary bytes to the request parser in chunks, like a connection
//! would, checking that it never panics and that every result is in bounds; and checks
//! that `scan_keys` (the prefetch hint) finds, in the same bytes, the arguments the parser
//! finds, as far as both go.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{scan_keys, Args, Limits, RequestKind, RequestParser};

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
    check_scan_keys(data);
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

/// `scan_keys` on the whole input against the parser (default limits): argument 1 of
/// each multibulk command, offsets into `data`, until an inline command, an error or the
/// end; the scan may stop sooner, never disagree.
fn check_scan_keys(data: &[u8]) {
    let mut scanned = Vec::new();
    scan_keys(data, &mut scanned, 64);
    let mut parser = RequestParser::new(Limits::default());
    let (mut spans, mut at, mut parsed) = (Vec::new(), 0, Vec::new());
    while let Ok(Some((n, RequestKind::Multibulk))) = parser.parse(&data[at..], &mut spans) {
        if !spans.is_empty() {
            parsed.push(spans.get(1).map_or((0, 0), |&(s, e)| ((at + s) as u32, (e - s) as u32)));
        }
        at += n;
    }
    for &(start, len) in &scanned {
        assert!(start as usize + len as usize <= data.len(), "scan out of bounds");
    }
    let n = scanned.len().min(parsed.len());
    assert_eq!(scanned[..n], parsed[..n], "scan_keys disagrees with the parser");
}
