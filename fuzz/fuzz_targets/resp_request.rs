//! Feeds arbitrary bytes to the request parser in chunks, like a connection
//! would, checking that it never panics and that every result is in bounds; and checks
//! that a [`Batch`] parse followed by the parser from where the batch ends gives what the
//! parser alone gives, command by command.

#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{Args, Batch, Limits, RequestKind, RequestParser};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size and the limits; the second, whether the client
    // is unauthenticated (Redis's tighter limits: 10 arguments, 16 KiB bulks).
    let Some((&ctl, data)) = data.split_first() else {
        return;
    };
    let Some((&ctl2, data)) = data.split_first() else {
        return;
    };
    let unauth = ctl2 & 1 != 0;
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
    check_batch(data, limits, usize::from(ctl >> 5), unauth);
    let mut parser = RequestParser::new(limits);
    parser.set_auth_required(unauth);
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

/// One parse result: (consumed, kind, args), `None` for incomplete.
type Step = Result<Option<(usize, RequestKind, Vec<Vec<u8>>)>, resp::ProtocolError>;

/// Every command `parser` finds in `data` from `at`, until one is incomplete or an error.
fn one_by_one(parser: &mut RequestParser, data: &[u8], mut at: usize, out: &mut Vec<Step>) {
    let mut spans = Vec::new();
    loop {
        match parser.parse(&data[at..], &mut spans) {
            Ok(Some((n, kind))) => {
                let source = match kind {
                    RequestKind::Multibulk => &data[at..],
                    RequestKind::Inline => parser.inline_buf(),
                };
                let args = Args::new(source, &spans).iter().map(<[u8]>::to_vec).collect();
                out.push(Ok(Some((n, kind, args))));
                at += n;
            }
            other => {
                out.push(other.map(|_| None));
                return;
            }
        }
    }
}

/// A batch of up to `max` commands (filled in two steps), then the parser from its end,
/// against the parser alone on the whole input.
fn check_batch(data: &[u8], limits: Limits, max: usize, unauth: bool) {
    let mut parser = RequestParser::new(limits);
    parser.set_auth_required(unauth);
    let mut batch = Batch::default();
    let mut scratch = Vec::new();
    batch.fill(&mut parser, data, max / 2, &mut scratch);
    batch.extend(&mut parser, data, max, &mut scratch);
    assert!(batch.len() <= max);
    let mut steps = Vec::new();
    for i in 0..batch.len() {
        let (start, end, spans) = batch.get(i).expect("in range");
        assert!(start < end && end <= data.len(), "command out of bounds");
        let args = Args::new(&data[start..], spans).iter().map(<[u8]>::to_vec).collect();
        steps.push(Ok(Some((end - start, RequestKind::Multibulk, args))));
        let args = Args::new(&data[start..], spans);
        assert_eq!(batch.key(data, i), args.get(1));
        let both = args.get(0).zip(args.get(1));
        assert_eq!(batch.name_and_key(data, i), both);
    }
    one_by_one(&mut parser, data, batch.end(), &mut steps);
    let mut alone = Vec::new();
    let mut fresh = RequestParser::new(limits);
    fresh.set_auth_required(unauth);
    one_by_one(&mut fresh, data, 0, &mut alone);
    assert_eq!(steps, alone, "the batch disagrees with the parser");
}
