//! General RESP2/RESP3 frames, for clients, tools, tests and fuzzing.
//!
//! [`parse_frame`] decodes one complete frame (iteratively: deep nesting
//! cannot overflow the stack) and [`encode_frame`] writes one in either
//! protocol, downgrading RESP3 types for RESP2 the way Redis does.

use bytes::Bytes;
use memchr::memchr;

use crate::reply::{
    write_bulk, write_double_reply, write_error, write_header, write_int, write_line,
    write_verbatim,
};
use crate::{Limits, Protocol, ProtocolError};

/// Deepest aggregate nesting [`parse_frame`] accepts.
pub const MAX_DEPTH: usize = 512;

/// Largest number of elements reserved up front for one aggregate.
const RESERVE_CAP: usize = 1024;

/// One RESP value.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+text`.
    Simple(String),
    /// `-text` (the text includes the code, e.g. `ERR ...`).
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$len` + bytes.
    Bulk(Bytes),
    /// RESP3 `_`, RESP2 `$-1` / `*-1`.
    Null,
    /// `*n` + elements.
    Array(Vec<Frame>),
    /// RESP3 `,x`.
    Double(f64),
    /// RESP3 `#t` / `#f`.
    Boolean(bool),
    /// RESP3 `(digits`.
    BigNumber(String),
    /// RESP3 `!len` + bytes.
    BlobError(Bytes),
    /// RESP3 `=len` + `fmt:text`.
    Verbatim {
        /// Three-character format, e.g. `txt` or `mkd`.
        format: String,
        /// The text after `fmt:`.
        text: Bytes,
    },
    /// RESP3 `%n` + key/value pairs.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n` + elements.
    Set(Vec<Frame>),
    /// RESP3 `|n` + key/value pairs, then the frame they describe.
    Attribute {
        /// The attribute pairs.
        attrs: Vec<(Frame, Frame)>,
        /// The frame the attributes belong to.
        data: Box<Frame>,
    },
    /// RESP3 `>n` + elements (out-of-band data such as pub/sub messages).
    Push(Vec<Frame>),
}

/// An aggregate being filled by the iterative parser.
enum Partial {
    Array(Vec<Frame>, usize),
    Set(Vec<Frame>, usize),
    Push(Vec<Frame>, usize),
    /// Pairs so far, a pending key, pairs still to read.
    Map(Vec<(Frame, Frame)>, Option<Frame>, usize),
    /// Pairs so far, a pending key, pairs still to read; once none remain,
    /// the next frame is the attributed data.
    Attr(Vec<(Frame, Frame)>, Option<Frame>, usize),
}

impl Partial {
    /// Adds a completed child; returns the finished aggregate when full.
    fn feed(&mut self, child: Frame) -> Option<Frame> {
        match self {
            Partial::Array(v, n) | Partial::Set(v, n) | Partial::Push(v, n) => {
                v.push(child);
                *n -= 1;
                if *n > 0 {
                    return None;
                }
                let items = std::mem::take(v);
                Some(match self {
                    Partial::Set(..) => Frame::Set(items),
                    Partial::Push(..) => Frame::Push(items),
                    _ => Frame::Array(items),
                })
            }
            Partial::Map(pairs, key, n) => {
                match key.take() {
                    None => {
                        *key = Some(child);
                        return None;
                    }
                    Some(k) => pairs.push((k, child)),
                }
                *n -= 1;
                (*n == 0).then(|| Frame::Map(std::mem::take(pairs)))
            }
            Partial::Attr(pairs, key, n) => {
                if *n == 0 {
                    return Some(Frame::Attribute {
                        attrs: std::mem::take(pairs),
                        data: Box::new(child),
                    });
                }
                match key.take() {
                    None => *key = Some(child),
                    Some(k) => {
                        pairs.push((k, child));
                        *n -= 1;
                    }
                }
                None
            }
        }
    }
}

/// One parsed header: a finished scalar or the start of an aggregate.
enum Item {
    Frame(Frame),
    Start(Partial),
}

/// Result of reading a protocol line: content range and the offset after it.
type LineResult = Result<Option<(usize, usize, usize)>, ProtocolError>;

/// Reads the CRLF-terminated line starting at `start`.
fn read_line(buf: &[u8], start: usize, limits: &Limits) -> LineResult {
    let max = limits.max_inline_len;
    let rest = buf.get(start..).unwrap_or(&[]);
    let window = &rest[..rest.len().min(max.saturating_add(1))];
    match memchr(b'\r', window) {
        Some(i) => match rest.get(i + 1) {
            None => Ok(None),
            Some(b'\n') => Ok(Some((start, start + i, start + i + 2))),
            Some(_) => Err(ProtocolError::ExpectedCrlf),
        },
        None if rest.len() > max => Err(ProtocolError::LineTooLong),
        None => Ok(None),
    }
}

/// Lenient integer parsing for frames: optional sign, 1 to 19 digits.
fn parse_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}

/// Parses a length line: `Some(-1)` for null, `Err` for anything invalid or
/// over `max`.
fn parse_len(s: &[u8], max: usize, err: ProtocolError) -> Result<i64, ProtocolError> {
    if s == b"?" {
        return Err(ProtocolError::StreamedNotSupported);
    }
    let n = parse_int(s).ok_or(err.clone())?;
    if n < -1 || (n >= 0 && n as u64 > max as u64) {
        return Err(err);
    }
    Ok(n)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Reads one header (and, for strings, its payload) at `pos`.
fn parse_item(
    buf: &[u8],
    pos: usize,
    limits: &Limits,
) -> Result<Option<(Item, usize)>, ProtocolError> {
    let Some(&t) = buf.get(pos) else {
        return Ok(None);
    };
    if !matches!(
        t,
        b'+' | b'-'
            | b':'
            | b'$'
            | b'*'
            | b'_'
            | b','
            | b'#'
            | b'('
            | b'!'
            | b'='
            | b'%'
            | b'~'
            | b'|'
            | b'>'
    ) {
        return Err(ProtocolError::InvalidFrameType(t));
    }
    let Some((start, end, next)) = read_line(buf, pos + 1, limits)? else {
        return Ok(None);
    };
    let line = buf.get(start..end).unwrap_or(&[]);
    let scalar = |f: Frame| Ok(Some((Item::Frame(f), next)));
    match t {
        b'+' => scalar(Frame::Simple(lossy(line))),
        b'-' => scalar(Frame::Error(lossy(line))),
        b':' => scalar(Frame::Integer(
            parse_int(line).ok_or(ProtocolError::InvalidInteger)?,
        )),
        b'_' => {
            if line.is_empty() {
                scalar(Frame::Null)
            } else {
                Err(ProtocolError::InvalidNull)
            }
        }
        b'#' => match line {
            b"t" => scalar(Frame::Boolean(true)),
            b"f" => scalar(Frame::Boolean(false)),
            _ => Err(ProtocolError::InvalidBoolean),
        },
        b',' => {
            let v = std::str::from_utf8(line)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_graphic()))
                .and_then(|s| s.parse::<f64>().ok())
                .ok_or(ProtocolError::InvalidDouble)?;
            scalar(Frame::Double(v))
        }
        b'(' => {
            let digits = line.strip_prefix(b"-").unwrap_or(line);
            let digits = digits.strip_prefix(b"+").unwrap_or(digits);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(ProtocolError::InvalidBigNumber);
            }
            scalar(Frame::BigNumber(lossy(line)))
        }
        b'$' | b'!' | b'=' => {
            let n = parse_len(line, limits.max_bulk_len, ProtocolError::InvalidBulkLength)?;
            if n == -1 {
                return if t == b'$' {
                    scalar(Frame::Null)
                } else {
                    Err(ProtocolError::InvalidBulkLength)
                };
            }
            let n = n as usize; // 0..=max_bulk_len
            let avail = buf.len().saturating_sub(next);
            if avail < n.saturating_add(2) {
                return Ok(None);
            }
            let data = buf.get(next..next + n).unwrap_or(&[]);
            if buf.get(next + n..next + n + 2) != Some(b"\r\n") {
                return Err(ProtocolError::ExpectedCrlf);
            }
            let after = next + n + 2;
            let frame = match t {
                b'$' => Frame::Bulk(Bytes::copy_from_slice(data)),
                b'!' => Frame::BlobError(Bytes::copy_from_slice(data)),
                _ => {
                    if data.get(3) != Some(&b':') {
                        return Err(ProtocolError::InvalidVerbatim);
                    }
                    Frame::Verbatim {
                        format: lossy(data.get(..3).unwrap_or(&[])),
                        text: Bytes::copy_from_slice(data.get(4..).unwrap_or(&[])),
                    }
                }
            };
            Ok(Some((Item::Frame(frame), after)))
        }
        _ => {
            // Aggregates: * % ~ | >
            let n = parse_len(
                line,
                limits.max_multibulk_len,
                ProtocolError::InvalidMultibulkLength,
            )?;
            if n == -1 {
                return if t == b'*' {
                    scalar(Frame::Null)
                } else {
                    Err(ProtocolError::InvalidMultibulkLength)
                };
            }
            let n = n as usize;
            // Every element takes at least 3 bytes ("_\r\n"): never reserve
            // more than the buffer could hold.
            let cap = n.min(RESERVE_CAP).min(buf.len().saturating_sub(next) / 3);
            let item = match t {
                b'*' if n == 0 => Item::Frame(Frame::Array(Vec::new())),
                b'~' if n == 0 => Item::Frame(Frame::Set(Vec::new())),
                b'>' if n == 0 => Item::Frame(Frame::Push(Vec::new())),
                b'%' if n == 0 => Item::Frame(Frame::Map(Vec::new())),
                b'*' => Item::Start(Partial::Array(Vec::with_capacity(cap), n)),
                b'~' => Item::Start(Partial::Set(Vec::with_capacity(cap), n)),
                b'>' => Item::Start(Partial::Push(Vec::with_capacity(cap), n)),
                b'%' => Item::Start(Partial::Map(Vec::with_capacity(cap), None, n)),
                _ => Item::Start(Partial::Attr(Vec::with_capacity(cap), None, n)),
            };
            Ok(Some((item, next)))
        }
    }
}

/// Parses one complete frame at the start of `buf`.
///
/// Returns `Ok(Some((frame, consumed)))`, or `Ok(None)` if more bytes are
/// needed. RESP2 `$-1` / `*-1` and RESP3 `_` all give [`Frame::Null`].
/// Streamed strings and aggregates (`$?`, `*?`) are rejected, as is nesting
/// deeper than [`MAX_DEPTH`]. `limits` bounds bulk sizes, aggregate counts
/// and line lengths.
pub fn parse_frame(buf: &[u8], limits: &Limits) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let mut stack: Vec<Partial> = Vec::new();
    let mut pos = 0;
    loop {
        let Some((item, next)) = parse_item(buf, pos, limits)? else {
            return Ok(None);
        };
        pos = next;
        let mut done = match item {
            Item::Frame(f) => f,
            Item::Start(p) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(ProtocolError::NestingTooDeep);
                }
                stack.push(p);
                continue;
            }
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return Ok(Some((done, pos)));
            };
            match top.feed(done) {
                None => break,
                Some(finished) => {
                    stack.pop();
                    done = finished;
                }
            }
        }
    }
}

/// Encodes `frame` in `proto`, appending to `out`.
///
/// RESP2 downgrades follow Redis: maps become flat arrays of 2n elements,
/// sets and pushes become arrays, doubles and big numbers become bulk
/// strings, booleans become `:1` / `:0`, verbatim strings become a bulk of
/// their text, blob errors become simple errors, null is `$-1`, and
/// attributes are dropped (only their data is written). CR/LF inside simple
/// strings and errors are replaced by spaces so the stream stays in sync.
pub fn encode_frame(frame: &Frame, proto: Protocol, out: &mut Vec<u8>) {
    // Iterative, so user-built frames of any depth cannot overflow the stack.
    let mut stack: Vec<&Frame> = vec![frame];
    while let Some(f) = stack.pop() {
        match f {
            Frame::Simple(s) => write_line(out, b'+', s.as_bytes()),
            Frame::Error(s) => write_line(out, b'-', s.as_bytes()),
            Frame::Integer(v) => write_int(out, *v),
            Frame::Bulk(b) => write_bulk(out, b),
            Frame::Null => out.extend_from_slice(proto.null()),
            Frame::Double(v) => write_double_reply(out, proto, *v),
            Frame::Boolean(v) => out.extend_from_slice(match (proto, v) {
                (Protocol::Resp2, true) => b":1\r\n",
                (Protocol::Resp2, false) => b":0\r\n",
                (Protocol::Resp3, true) => b"#t\r\n",
                (Protocol::Resp3, false) => b"#f\r\n",
            }),
            Frame::BigNumber(s) => match proto {
                Protocol::Resp2 => write_bulk(out, s.as_bytes()),
                Protocol::Resp3 => write_line(out, b'(', s.as_bytes()),
            },
            Frame::BlobError(b) => match proto {
                Protocol::Resp2 => write_error(out, b),
                Protocol::Resp3 => {
                    write_header(out, b'!', b.len());
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                }
            },
            Frame::Verbatim { format, text } => write_verbatim(out, proto, format.as_bytes(), text),
            Frame::Array(items) => {
                write_header(out, b'*', items.len());
                stack.extend(items.iter().rev());
            }
            Frame::Set(items) => {
                let prefix = if proto == Protocol::Resp3 { b'~' } else { b'*' };
                write_header(out, prefix, items.len());
                stack.extend(items.iter().rev());
            }
            Frame::Push(items) => {
                let prefix = if proto == Protocol::Resp3 { b'>' } else { b'*' };
                write_header(out, prefix, items.len());
                stack.extend(items.iter().rev());
            }
            Frame::Map(pairs) => {
                match proto {
                    Protocol::Resp2 => write_header(out, b'*', pairs.len().saturating_mul(2)),
                    Protocol::Resp3 => write_header(out, b'%', pairs.len()),
                }
                for (k, v) in pairs.iter().rev() {
                    stack.push(v);
                    stack.push(k);
                }
            }
            Frame::Attribute { attrs, data } => {
                stack.push(data);
                if proto == Protocol::Resp3 {
                    write_header(out, b'|', attrs.len());
                    for (k, v) in attrs.iter().rev() {
                        stack.push(v);
                        stack.push(k);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits::default()
    }

    fn parse(b: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
        parse_frame(b, &lim())
    }

    fn parse_ok(b: &[u8]) -> Frame {
        let (f, n) = parse(b).unwrap().unwrap();
        assert_eq!(
            n,
            b.len(),
            "consumed all of {:?}",
            String::from_utf8_lossy(b)
        );
        f
    }

    fn enc(f: &Frame, p: Protocol) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(f, p, &mut out);
        out
    }

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[track_caller]
    fn check(f: Frame, resp2: &str, resp3: &str) {
        assert_eq!(String::from_utf8_lossy(&enc(&f, Protocol::Resp2)), resp2);
        assert_eq!(String::from_utf8_lossy(&enc(&f, Protocol::Resp3)), resp3);
        assert_eq!(parse_ok(resp3.as_bytes()), f);
        // Every strict prefix is incomplete.
        for i in 0..resp3.len() {
            assert_eq!(parse(&resp3.as_bytes()[..i]), Ok(None), "prefix {i}");
        }
    }

    #[test]
    fn every_type_both_protocols() {
        check(Frame::Simple("OK".into()), "+OK\r\n", "+OK\r\n");
        check(Frame::Error("ERR x".into()), "-ERR x\r\n", "-ERR x\r\n");
        check(Frame::Integer(-5), ":-5\r\n", ":-5\r\n");
        check(
            Frame::Integer(i64::MIN),
            ":-9223372036854775808\r\n",
            ":-9223372036854775808\r\n",
        );
        check(bulk("foo"), "$3\r\nfoo\r\n", "$3\r\nfoo\r\n");
        check(bulk(""), "$0\r\n\r\n", "$0\r\n\r\n");
        check(Frame::Null, "$-1\r\n", "_\r\n");
        check(
            Frame::Array(vec![Frame::Integer(1), bulk("a")]),
            "*2\r\n:1\r\n$1\r\na\r\n",
            "*2\r\n:1\r\n$1\r\na\r\n",
        );
        check(Frame::Array(vec![]), "*0\r\n", "*0\r\n");
        check(Frame::Double(1.5), "$3\r\n1.5\r\n", ",1.5\r\n");
        check(Frame::Double(f64::INFINITY), "$3\r\ninf\r\n", ",inf\r\n");
        check(Frame::Double(-1e20), "$6\r\n-1e+20\r\n", ",-1e+20\r\n");
        check(Frame::Boolean(true), ":1\r\n", "#t\r\n");
        check(Frame::Boolean(false), ":0\r\n", "#f\r\n");
        check(
            Frame::BigNumber("-123456789012345678901234".into()),
            "$25\r\n-123456789012345678901234\r\n",
            "(-123456789012345678901234\r\n",
        );
        check(
            Frame::BlobError(Bytes::from_static(b"SYNTAX x\r\ny")),
            "-SYNTAX x  y\r\n",
            "!11\r\nSYNTAX x\r\ny\r\n",
        );
        check(
            Frame::Verbatim {
                format: "txt".into(),
                text: Bytes::from_static(b"Some string"),
            },
            "$11\r\nSome string\r\n",
            "=15\r\ntxt:Some string\r\n",
        );
        check(
            Frame::Map(vec![(Frame::Simple("a".into()), Frame::Integer(1))]),
            "*2\r\n+a\r\n:1\r\n",
            "%1\r\n+a\r\n:1\r\n",
        );
        check(Frame::Map(vec![]), "*0\r\n", "%0\r\n");
        check(
            Frame::Set(vec![Frame::Boolean(false)]),
            "*1\r\n:0\r\n",
            "~1\r\n#f\r\n",
        );
        check(Frame::Set(vec![]), "*0\r\n", "~0\r\n");
        check(
            Frame::Push(vec![bulk("message"), bulk("ch")]),
            "*2\r\n$7\r\nmessage\r\n$2\r\nch\r\n",
            ">2\r\n$7\r\nmessage\r\n$2\r\nch\r\n",
        );
        check(Frame::Push(vec![]), "*0\r\n", ">0\r\n");
        check(
            Frame::Attribute {
                attrs: vec![(Frame::Simple("ttl".into()), Frame::Integer(3))],
                data: Box::new(Frame::Array(vec![Frame::Integer(1)])),
            },
            "*1\r\n:1\r\n",
            "|1\r\n+ttl\r\n:3\r\n*1\r\n:1\r\n",
        );
        check(
            Frame::Attribute {
                attrs: vec![],
                data: Box::new(Frame::Null),
            },
            "$-1\r\n",
            "|0\r\n_\r\n",
        );
    }

    #[test]
    fn resp2_nulls_and_aliases() {
        assert_eq!(parse_ok(b"$-1\r\n"), Frame::Null);
        assert_eq!(parse_ok(b"*-1\r\n"), Frame::Null);
        assert_eq!(parse_ok(b":+7\r\n"), Frame::Integer(7));
        assert_eq!(parse_ok(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
        assert!(matches!(parse_ok(b",nan\r\n"), Frame::Double(v) if v.is_nan()));
        assert_eq!(parse_ok(b",1e-7\r\n"), Frame::Double(1e-7));
        assert_eq!(
            parse_ok(b"+caf\xc3\xa9 \xff\r\n"),
            Frame::Simple("café \u{fffd}".into())
        );
    }

    #[test]
    fn nested_and_pipelined() {
        let b = b"*2\r\n%1\r\n~1\r\n:1\r\n>0\r\n|1\r\n+k\r\n+v\r\n#t\r\n+next\r\n";
        let (f, n) = parse(b).unwrap().unwrap();
        assert_eq!(
            f,
            Frame::Array(vec![
                Frame::Map(vec![(
                    Frame::Set(vec![Frame::Integer(1)]),
                    Frame::Push(vec![])
                )]),
                Frame::Attribute {
                    attrs: vec![(Frame::Simple("k".into()), Frame::Simple("v".into()))],
                    data: Box::new(Frame::Boolean(true)),
                },
            ])
        );
        assert_eq!(&b[n..], b"+next\r\n");
    }

    #[test]
    fn errors() {
        use ProtocolError as E;
        let cases: &[(&[u8], E)] = &[
            (b"x\r\n", E::InvalidFrameType(b'x')),
            (b"x", E::InvalidFrameType(b'x')),
            (b";3\r\n", E::InvalidFrameType(b';')),
            (b":12a\r\n", E::InvalidInteger),
            (b":\r\n", E::InvalidInteger),
            (b":99999999999999999999\r\n", E::InvalidInteger),
            (b",\r\n", E::InvalidDouble),
            (b",abc\r\n", E::InvalidDouble),
            (b",1 \r\n", E::InvalidDouble),
            (b"#x\r\n", E::InvalidBoolean),
            (b"#\r\n", E::InvalidBoolean),
            (b"(12a\r\n", E::InvalidBigNumber),
            (b"(\r\n", E::InvalidBigNumber),
            (b"=3\r\ntxt\r\n", E::InvalidVerbatim),
            (b"=5\r\ntxt-x\r\n", E::InvalidVerbatim),
            (b"_x\r\n", E::InvalidNull),
            (b"$-2\r\n", E::InvalidBulkLength),
            (b"$x\r\n", E::InvalidBulkLength),
            (b"!-1\r\n", E::InvalidBulkLength),
            (b"=-1\r\n", E::InvalidBulkLength),
            (b"$3\r\nfooXY", E::ExpectedCrlf),
            (b"+a\rb\r\n", E::ExpectedCrlf),
            (b"*-2\r\n", E::InvalidMultibulkLength),
            (b"%-1\r\n", E::InvalidMultibulkLength),
            (b"*x\r\n", E::InvalidMultibulkLength),
            (b"$?\r\n", E::StreamedNotSupported),
            (b"*?\r\n", E::StreamedNotSupported),
            (b"~?\r\n", E::StreamedNotSupported),
        ];
        for (input, err) in cases {
            assert_eq!(
                parse(input),
                Err(err.clone()),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn limits_apply() {
        let l = Limits {
            max_bulk_len: 3,
            max_multibulk_len: 2,
            max_inline_len: 8,
        };
        assert!(parse_frame(b"$3\r\nabc\r\n", &l).unwrap().is_some());
        assert_eq!(
            parse_frame(b"$4\r\nabcd\r\n", &l),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert!(parse_frame(b"*2\r\n:1\r\n:2\r\n", &l).unwrap().is_some());
        assert_eq!(
            parse_frame(b"*3\r\n", &l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse_frame(b"%3\r\n", &l),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(parse_frame(b"+12345678", &l), Ok(None));
        assert_eq!(
            parse_frame(b"+123456789", &l),
            Err(ProtocolError::LineTooLong)
        );
    }

    #[test]
    fn nesting_limit() {
        let mut ok = b"*1\r\n".repeat(MAX_DEPTH);
        ok.extend_from_slice(b":1\r\n");
        let (f, _) = parse(&ok).unwrap().unwrap();
        let mut depth = 0;
        let mut cur = &f;
        while let Frame::Array(v) = cur {
            depth += 1;
            cur = &v[0];
        }
        assert_eq!(depth, MAX_DEPTH);

        let deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&deep), Err(ProtocolError::NestingTooDeep));
        let deep = b"|1\r\n".repeat(100_000);
        assert_eq!(parse(&deep), Err(ProtocolError::NestingTooDeep));
        // Huge announced counts do not allocate up front.
        let huge = b"*2147483647\r\n".repeat(MAX_DEPTH);
        assert_eq!(parse(&huge), Ok(None));
    }

    #[test]
    fn encode_sanitizes_and_is_iterative() {
        assert_eq!(
            enc(&Frame::Simple("a\r\nb".into()), Protocol::Resp3),
            b"+a  b\r\n"
        );
        assert_eq!(
            enc(&Frame::Error("E\n".into()), Protocol::Resp2),
            b"-E \r\n"
        );
        let mut f = Frame::Integer(0);
        for _ in 0..50_000 {
            f = Frame::Array(vec![f]);
        }
        let out = enc(&f, Protocol::Resp3);
        assert_eq!(out.len(), 50_000 * 4 + 4);
        // Tear down without recursion in the (derived) Drop.
        let mut cur = f;
        while let Frame::Array(mut v) = cur {
            cur = v.pop().unwrap_or(Frame::Null);
        }
    }
}
