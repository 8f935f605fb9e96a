//! Property tests: frame round trips, incremental parsing at every split
//! point, and robustness against arbitrary bytes.

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use resp::{encode_frame, parse_frame, Args, Frame, Limits, Protocol, RequestKind, RequestParser};

// ---------------------------------------------------------------- frames

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("NaN never compares equal", |v| !v.is_nan()),
        (-100_000i64..100_000).prop_map(|x| x as f64 / 64.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.1),
        Just(1e20),
        Just(1.5e-7),
    ]
}

fn leaf() -> impl Strategy<Value = Frame> {
    prop_oneof![
        "[^\r\n]{0,12}".prop_map(Frame::Simple),
        "[^\r\n]{0,12}".prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        vec(any::<u8>(), 0..24).prop_map(|v| Frame::Bulk(Bytes::from(v))),
        Just(Frame::Null),
        double().prop_map(Frame::Double),
        any::<bool>().prop_map(Frame::Boolean),
        "-?[1-9][0-9]{0,40}|0".prop_map(Frame::BigNumber),
        vec(any::<u8>(), 0..24).prop_map(|v| Frame::BlobError(Bytes::from(v))),
        ("[a-z]{3}", vec(any::<u8>(), 0..24)).prop_map(|(format, text)| Frame::Verbatim {
            format,
            text: Bytes::from(text),
        }),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Frame::Array),
            vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            vec(inner.clone(), 0..5).prop_map(Frame::Set),
            vec(inner.clone(), 0..5).prop_map(Frame::Push),
            (vec((inner.clone(), inner.clone()), 0..3), inner).prop_map(|(attrs, data)| {
                Frame::Attribute {
                    attrs,
                    data: Box::new(data),
                }
            }),
        ]
    })
}

fn encode(f: &Frame, p: Protocol) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(f, p, &mut out);
    out
}

// -------------------------------------------------------------- requests

/// One command of a pipeline: its wire bytes and the arguments it must
/// parse to.
#[derive(Clone, Debug)]
struct Cmd {
    wire: Vec<u8>,
    args: Vec<Vec<u8>>,
    kind: RequestKind,
}

fn multibulk_cmd() -> impl Strategy<Value = Cmd> {
    vec(vec(any::<u8>(), 0..20), 1..6).prop_map(|args| {
        let mut wire = format!("*{}\r\n", args.len()).into_bytes();
        for a in &args {
            wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            wire.extend_from_slice(a);
            wire.extend_from_slice(b"\r\n");
        }
        Cmd {
            wire,
            args,
            kind: RequestKind::Multibulk,
        }
    })
}

/// An inline argument: its encoded text and its value.
fn inline_arg() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    prop_oneof![
        "[a-zA-Z0-9_.:-]{1,8}".prop_map(|s| (s.clone().into_bytes(), s.into_bytes())),
        vec(any::<u8>(), 0..8).prop_map(|raw| {
            let mut enc = b"\"".to_vec();
            for &b in &raw {
                match b {
                    b'"' => enc.extend_from_slice(b"\\\""),
                    b'\\' => enc.extend_from_slice(b"\\\\"),
                    b'\n' => enc.extend_from_slice(b"\\n"),
                    b'\t' => enc.extend_from_slice(b"\\t"),
                    c if c.is_ascii_alphanumeric() || c == b' ' => enc.push(c),
                    c => enc.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
                }
            }
            enc.push(b'"');
            (enc, raw)
        }),
        "[a-z \"']{0,8}".prop_map(|s| {
            let mut enc = b"'".to_vec();
            for b in s.bytes() {
                if b == b'\'' {
                    enc.extend_from_slice(b"\\'");
                } else {
                    enc.push(b);
                }
            }
            enc.push(b'\'');
            (enc, s.into_bytes())
        }),
    ]
}

fn inline_cmd() -> impl Strategy<Value = Cmd> {
    (
        "[a-zA-Z]{1,8}",
        vec(
            (prop_oneof![Just(" "), Just("\t"), Just("  ")], inline_arg()),
            0..5,
        ),
        prop_oneof![Just("\r\n"), Just("\n"), Just(" \r\n")],
    )
        .prop_map(|(name, rest, eol)| {
            let mut wire = name.clone().into_bytes();
            let mut args = vec![name.into_bytes()];
            for (sep, (enc, val)) in rest {
                wire.extend_from_slice(sep.as_bytes());
                wire.extend_from_slice(&enc);
                args.push(val);
            }
            wire.extend_from_slice(eol.as_bytes());
            Cmd {
                wire,
                args,
                kind: RequestKind::Inline,
            }
        })
}

fn pipeline() -> impl Strategy<Value = Vec<Cmd>> {
    vec(prop_oneof![3 => multibulk_cmd(), 1 => inline_cmd()], 1..8)
}

fn collect_args(
    p: &RequestParser,
    buf: &[u8],
    spans: &[(usize, usize)],
    kind: RequestKind,
) -> Vec<Vec<u8>> {
    let data = match kind {
        RequestKind::Multibulk => buf,
        RequestKind::Inline => p.inline_buf(),
    };
    Args::new(data, spans).iter().map(<[u8]>::to_vec).collect()
}

/// Feeds `wire` in chunks of the given sizes, like a connection would,
/// returning every parsed command's arguments (empty commands skipped).
fn feed_chunked(wire: &[u8], chunks: &[usize]) -> Vec<Vec<Vec<u8>>> {
    let mut parser = RequestParser::default();
    let mut spans = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let mut fed = 0;
    let mut i = 0;
    while fed < wire.len() {
        let n = chunks[i % chunks.len()].min(wire.len() - fed);
        i += 1;
        buf.extend_from_slice(&wire[fed..fed + n]);
        fed += n;
        while let Some((consumed, kind)) = parser.parse(&buf, &mut spans).expect("valid pipeline") {
            assert!(consumed > 0 && consumed <= buf.len());
            let args = collect_args(&parser, &buf, &spans, kind);
            if !args.is_empty() {
                out.push(args);
            }
            buf.drain(..consumed);
        }
    }
    assert!(buf.is_empty());
    out
}

/// Runs both parsers over arbitrary bytes, checking invariants; they must
/// never panic.
fn hammer(data: &[u8], limits: Limits) {
    let mut parser = RequestParser::new(limits);
    let mut spans = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let buf = &data[start..];
        match parser.parse(buf, &mut spans) {
            Ok(Some((n, kind))) => {
                assert!(n > 0 && n <= buf.len());
                let bound = match kind {
                    RequestKind::Multibulk => buf.len(),
                    RequestKind::Inline => parser.inline_buf().len(),
                };
                for &(s, e) in &spans {
                    assert!(s <= e && e <= bound);
                }
                start += n;
            }
            Ok(None) | Err(_) => break,
        }
    }
    let mut pos = 0;
    while pos < data.len() {
        match parse_frame(&data[pos..], &limits) {
            Ok(Some((f, n))) => {
                assert!(n > 0 && n <= data.len() - pos);
                let _ = encode(&f, Protocol::Resp2);
                let _ = encode(&f, Protocol::Resp3);
                pos += n;
            }
            Ok(None) | Err(_) => break,
        }
    }
}

/// Bytes built from protocol-ish tokens, to get past the first byte.
fn token_soup() -> impl Strategy<Value = Vec<u8>> {
    let tokens: &[&[u8]] = &[
        b"*", b"$", b"\r\n", b"\r", b"\n", b"0", b"1", b"2", b"3", b"-1", b"-", b"?", b"\"", b"'",
        b"\\", b"\\x4", b"a", b" ", b"%", b"~", b">", b"|", b"=", b"!", b"_", b",", b"#", b"(",
        b":", b"+", b"txt:", b"inf", b"t", b"f", b"\0", b"\xff",
    ];
    vec(proptest::sample::select(tokens), 0..64).prop_map(|ts| ts.concat())
}

fn small_limits() -> Limits {
    Limits {
        max_bulk_len: 8,
        max_multibulk_len: 4,
        max_inline_len: 12,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn frame_round_trip_resp3(f in frame()) {
        let wire = encode(&f, Protocol::Resp3);
        let (back, n) = parse_frame(&wire, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(n, wire.len());
        prop_assert_eq!(&back, &f);
        // Re-encoding is byte-identical.
        prop_assert_eq!(encode(&back, Protocol::Resp3), wire);
    }

    #[test]
    fn frame_resp2_encoding_parses(f in frame()) {
        let wire = encode(&f, Protocol::Resp2);
        let (back, n) = parse_frame(&wire, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(n, wire.len());
        // RESP2 has nothing left to downgrade: after one pass (which may
        // make blob-error text lossy UTF-8) encoding is stable.
        let again = encode(&back, Protocol::Resp2);
        let (back2, _) = parse_frame(&again, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(encode(&back2, Protocol::Resp2), again);
    }

    #[test]
    fn frame_every_prefix_incomplete(frames in vec(frame(), 1..4)) {
        let mut wire = Vec::new();
        for f in &frames {
            encode_frame(f, Protocol::Resp3, &mut wire);
        }
        let mut pos = 0;
        for f in &frames {
            let one = encode(f, Protocol::Resp3);
            for i in 0..one.len() {
                prop_assert_eq!(parse_frame(&one[..i], &Limits::default()), Ok(None));
            }
            let (back, n) = parse_frame(&wire[pos..], &Limits::default()).unwrap().unwrap();
            prop_assert_eq!(&back, f);
            prop_assert_eq!(n, one.len());
            pos += n;
        }
        prop_assert_eq!(pos, wire.len());
    }

    #[test]
    fn request_every_prefix(cmds in pipeline()) {
        let mut resumed = RequestParser::default();
        let mut spans = Vec::new();
        for cmd in &cmds {
            let w = &cmd.wire;
            for i in 0..w.len() {
                // Fresh parser and resumed parser agree: incomplete.
                let mut fresh = RequestParser::default();
                prop_assert_eq!(fresh.parse(&w[..i], &mut spans), Ok(None));
                prop_assert!(spans.is_empty());
                prop_assert_eq!(resumed.parse(&w[..i], &mut spans), Ok(None));
                prop_assert!(spans.is_empty());
            }
            prop_assert_eq!(resumed.parse(w, &mut spans), Ok(Some((w.len(), cmd.kind))));
            prop_assert_eq!(collect_args(&resumed, w, &spans, cmd.kind), cmd.args.clone());
        }
    }

    #[test]
    fn request_chunked_pipeline(cmds in pipeline(), chunks in vec(1usize..24, 1..16)) {
        let wire: Vec<u8> = cmds.iter().flat_map(|c| c.wire.iter().copied()).collect();
        let expected: Vec<Vec<Vec<u8>>> = cmds.iter().map(|c| c.args.clone()).collect();
        prop_assert_eq!(feed_chunked(&wire, &chunks), expected.clone());
        prop_assert_eq!(feed_chunked(&wire, &[1]), expected.clone());
        prop_assert_eq!(feed_chunked(&wire, &[wire.len()]), expected);
    }

    #[test]
    fn random_bytes_never_panic(data in vec(any::<u8>(), 0..256)) {
        hammer(&data, Limits::default());
        hammer(&data, small_limits());
    }

    #[test]
    fn token_soup_never_panics(data in token_soup()) {
        hammer(&data, Limits::default());
        hammer(&data, small_limits());
        // Incrementally too: every prefix, with resume state.
        let mut parser = RequestParser::new(small_limits());
        let mut spans = Vec::new();
        for i in 0..=data.len() {
            if parser.parse(&data[..i], &mut spans).is_err() {
                parser.reset();
            }
        }
    }
}
