//! Direct reply encoder (the server's output hot path).
//!
//! [`ReplyWriter`] appends RESP2 or RESP3 replies to a reusable buffer,
//! downgrading RESP3-only types the way Redis does for RESP2 clients.
//! [`format_double`] / [`write_double`] reproduce Redis 7.2's double text.

use crate::frame::{encode_frame, Frame};
use crate::Protocol;

/// Longest text [`write_double`] can produce (`-` + 17 digits + `.` +
/// `e-308`, or a padded small decimal) with room to spare.
const DOUBLE_CAP: usize = 40;

/// Fixed-size text buffer for one formatted double.
struct DoubleText {
    buf: [u8; DOUBLE_CAP],
    len: usize,
}

impl DoubleText {
    fn new() -> Self {
        DoubleText {
            buf: [0; DOUBLE_CAP],
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, c: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = c;
            self.len += 1;
        }
    }

    #[inline]
    fn extend(&mut self, s: &[u8]) {
        if let Some(dst) = self.buf.get_mut(self.len..self.len + s.len()) {
            dst.copy_from_slice(s);
            self.len += s.len();
        }
    }

    fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

/// Redis's `double2ll`: integral values within ±2^62 print as integers.
fn double_as_i64(v: f64) -> Option<i64> {
    let bound = (i64::MAX / 2) as f64;
    if !(-bound..=bound).contains(&v) {
        return None;
    }
    let l = v as i64;
    (l as f64 == v).then_some(l)
}

/// Formats `v` like Redis 7.2's `d2string` (grisu shortest digits laid out by
/// `fpconv_dtoa`'s `emit_digits`).
fn format_double_text(v: f64) -> DoubleText {
    let mut t = DoubleText::new();
    if v.is_nan() {
        t.extend(b"nan");
    } else if v.is_infinite() {
        t.extend(if v < 0.0 { b"-inf" } else { b"inf" });
    } else if v == 0.0 {
        t.extend(if v.is_sign_negative() { b"-0" } else { b"0" });
    } else if let Some(l) = double_as_i64(v) {
        t.extend(itoa::Buffer::new().format(l).as_bytes());
    } else {
        emit_shortest(v, &mut t);
    }
    t
}

/// Lays out the shortest round-tripping digits of finite, non-zero `v`.
fn emit_shortest(v: f64, t: &mut DoubleText) {
    const ZEROS: &[u8; 24] = b"000000000000000000000000";
    let mut ryu_buf = ryu::Buffer::new();
    let text = ryu_buf.format_finite(v).as_bytes();
    let (neg, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    // ryu writes `int.frac`, `d.ddde[-]x` or `de[-]x`.
    let (mantissa, mut k) = match text.iter().position(|&c| c == b'e') {
        Some(i) => {
            let (m, e) = text.split_at(i);
            let e = e.get(1..).unwrap_or(&[]);
            let (e_neg, e) = match e.split_first() {
                Some((b'-', rest)) => (true, rest),
                _ => (false, e),
            };
            let mut x: i32 = 0;
            for &c in e {
                x = x * 10 + i32::from(c.wrapping_sub(b'0'));
            }
            (m, if e_neg { -x } else { x })
        }
        None => (text, 0),
    };
    let (int_part, frac) = match mantissa.iter().position(|&c| c == b'.') {
        Some(i) => (
            mantissa.get(..i).unwrap_or(&[]),
            mantissa.get(i + 1..).unwrap_or(&[]),
        ),
        None => (mantissa, &b""[..]),
    };
    // Significant digits; value = digits * 10^k.
    let mut digits = [0u8; 32];
    let mut n = 0usize;
    for part in [int_part, frac] {
        if let Some(dst) = digits.get_mut(n..n + part.len()) {
            dst.copy_from_slice(part);
            n += part.len();
        }
    }
    k -= frac.len() as i32;
    let mut digits = digits.get(..n).unwrap_or(&[]);
    while let Some((b'0', rest)) = digits.split_first() {
        digits = rest;
    }
    while let Some((b'0', rest)) = digits.split_last() {
        digits = rest;
        k += 1;
    }
    let nd = digits.len() as i32;
    if neg {
        t.push(b'-');
    }
    let exp_abs = (k + nd - 1).abs();
    if k >= 0 && exp_abs < nd + 7 {
        // Plain integer.
        t.extend(digits);
        t.extend(ZEROS.get(..k as usize).unwrap_or(&[]));
    } else if k < 0 && (k > -7 || exp_abs < 4) {
        // Plain decimal.
        let offset = nd + k;
        if offset <= 0 {
            t.extend(b"0.");
            t.extend(ZEROS.get(..(-offset) as usize).unwrap_or(&[]));
            t.extend(digits);
        } else {
            let (int_part, frac) = digits.split_at((offset as usize).min(digits.len()));
            t.extend(int_part);
            t.push(b'.');
            t.extend(frac);
        }
    } else {
        // Scientific: d[.ddd]e±x (no zero padding of the exponent).
        if let Some((first, rest)) = digits.split_first() {
            t.push(*first);
            if !rest.is_empty() {
                t.push(b'.');
                t.extend(rest);
            }
        }
        t.push(b'e');
        t.push(if k + nd - 1 < 0 { b'-' } else { b'+' });
        t.extend(itoa::Buffer::new().format(exp_abs).as_bytes());
    }
}

/// Redis's double formatting (Redis 7.2 `addReplyDouble` / `d2string`):
/// `inf`, `-inf`, `nan`, `0`, `-0`; integral values within ±2^62 as plain
/// integers (`3`, `100000000000000000`); otherwise the shortest digits that
/// round-trip, written plain (`1.5`, `0.1`, `0.00001`) or in exponent form
/// (`1.5e-7`, `1e+20`, `1.2345678901234e+4`) following `fpconv_dtoa`.
pub fn format_double(v: f64) -> String {
    let t = format_double_text(v);
    String::from_utf8_lossy(t.as_bytes()).into_owned()
}

/// Appends [`format_double`]'s text to `out` without allocating.
pub fn write_double(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(format_double_text(v).as_bytes());
}

/// Appends `s` with every `\r` and `\n` replaced by a space.
#[inline]
fn extend_sanitized(out: &mut Vec<u8>, s: &[u8]) {
    // Short lines (OK, PONG, QUEUED ...): a plain scan beats memchr's setup.
    let clean = if s.len() <= 16 {
        !s.iter().any(|&c| c == b'\r' || c == b'\n')
    } else {
        memchr::memchr2(b'\r', b'\n', s).is_none()
    };
    if clean {
        out.extend_from_slice(s);
    } else {
        out.extend(s.iter().map(|&c| match c {
            b'\r' | b'\n' => b' ',
            c => c,
        }));
    }
}

/// Appends `<prefix><n>\r\n`.
#[inline]
pub(crate) fn write_header(out: &mut Vec<u8>, prefix: u8, n: usize) {
    out.push(prefix);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `$<len>\r\n<b>\r\n`.
#[inline]
pub(crate) fn write_bulk(out: &mut Vec<u8>, b: &[u8]) {
    write_header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends `<prefix><s>\r\n`, `s` sanitized of CR/LF.
#[inline]
pub(crate) fn write_line(out: &mut Vec<u8>, prefix: u8, s: &[u8]) {
    out.push(prefix);
    extend_sanitized(out, s);
    out.extend_from_slice(b"\r\n");
}

/// Appends `:<v>\r\n`.
#[inline]
pub(crate) fn write_int(out: &mut Vec<u8>, v: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a double in `proto`.
pub(crate) fn write_double_reply(out: &mut Vec<u8>, proto: Protocol, v: f64) {
    let t = format_double_text(v);
    match proto {
        Protocol::Resp2 => write_bulk(out, t.as_bytes()),
        Protocol::Resp3 => write_line(out, b',', t.as_bytes()),
    }
}

/// Appends a verbatim string in `proto`; `format` is written as exactly
/// three bytes (truncated, or padded with spaces).
pub(crate) fn write_verbatim(out: &mut Vec<u8>, proto: Protocol, format: &[u8], text: &[u8]) {
    match proto {
        Protocol::Resp2 => write_bulk(out, text),
        Protocol::Resp3 => {
            write_header(out, b'=', text.len() + 4);
            let mut fmt = [b' '; 3];
            for (slot, &c) in fmt.iter_mut().zip(format) {
                *slot = c;
            }
            out.extend_from_slice(&fmt);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends an error line: `-` then `msg` (not doubled if `msg` already
/// starts with `-`), CR/LF replaced by spaces.
pub(crate) fn write_error(out: &mut Vec<u8>, msg: &[u8]) {
    let msg = msg.strip_prefix(b"-").unwrap_or(msg);
    write_line(out, b'-', msg);
}

/// Encodes replies straight into an output buffer, in the connection's
/// protocol.
#[derive(Debug, Clone, Default)]
pub struct ReplyWriter {
    buf: Vec<u8>,
    proto: Protocol,
    /// Codes of the error replies written since [`ReplyWriter::take_errors`].
    errors: Vec<String>,
}

/// The code of error reply `msg` as Redis counts it in INFO errorstats: its first word
/// when one ends within its first 32 bytes (`WRONGTYPE`, `NOSCRIPT` ...), else `ERR`.
pub fn error_code(msg: &str) -> &str {
    let m = msg.strip_prefix('-').unwrap_or(msg);
    let head = &m.as_bytes()[..m.len().min(31)];
    match head.iter().position(|&c| c == b' ') {
        Some(i) if i > 0 => &m[..i],
        _ => "ERR",
    }
}

impl ReplyWriter {
    /// Creates an empty writer speaking `proto`.
    pub fn new(proto: Protocol) -> Self {
        ReplyWriter {
            buf: Vec::new(),
            proto,
            errors: Vec::new(),
        }
    }

    /// The protocol replies are encoded in.
    pub fn protocol(&self) -> Protocol {
        self.proto
    }

    /// Switches protocol (e.g. after `HELLO 3`).
    pub fn set_protocol(&mut self, p: Protocol) {
        self.proto = p;
    }

    /// The encoded bytes not yet taken.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Direct access to the output buffer.
    pub fn buffer_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Number of buffered bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops all buffered bytes (keeps the capacity).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Drops buffered bytes past `len` (e.g. to undo a partial reply).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// `+OK`.
    #[inline]
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// `+PONG`, in one copy (PING's reply: [`ReplyWriter::simple`] would scan it for CR/LF
    /// and grow the buffer three times).
    #[inline]
    pub fn pong(&mut self) {
        self.buf.extend_from_slice(b"+PONG\r\n");
    }

    /// Simple string `+s`; CR/LF in `s` become spaces.
    #[inline]
    pub fn simple(&mut self, s: &[u8]) {
        write_line(&mut self.buf, b'+', s);
    }

    /// Error `-msg`; `msg` carries its own code (`ERR ...`, `WRONGTYPE ...`),
    /// CR/LF become spaces, and a leading `-` in `msg` is not doubled.
    #[inline]
    pub fn error(&mut self, msg: &str) {
        write_error(&mut self.buf, msg.as_bytes());
        self.errors.push(error_code(msg).to_string());
    }

    /// True when error replies were written since the last [`ReplyWriter::take_errors`].
    #[inline]
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The codes of the error replies written since the last call (INFO errorstats), each
    /// once per reply, whether or not the reply was later truncated away.
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// Integer `:v`.
    #[inline]
    pub fn int(&mut self, v: i64) {
        write_int(&mut self.buf, v);
    }

    /// Bulk string `$len` + bytes.
    #[inline]
    pub fn bulk(&mut self, b: &[u8]) {
        write_bulk(&mut self.buf, b);
    }

    /// Bulk string holding the decimal text of `v` (no allocation).
    #[inline]
    pub fn bulk_int(&mut self, v: i64) {
        write_bulk(&mut self.buf, itoa::Buffer::new().format(v).as_bytes());
    }

    /// Null: RESP2 `$-1`, RESP3 `_`.
    #[inline]
    pub fn null(&mut self) {
        self.buf.extend_from_slice(self.proto.null());
    }

    /// Null array: RESP2 `*-1`, RESP3 `_`.
    #[inline]
    pub fn null_array(&mut self) {
        self.buf.extend_from_slice(self.proto.null_array());
    }

    /// Array header `*len`; `len` elements must follow.
    #[inline]
    pub fn array(&mut self, len: usize) {
        write_header(&mut self.buf, b'*', len);
    }

    /// Map header: RESP2 `*2n`, RESP3 `%n`; `pairs` key/value pairs follow.
    #[inline]
    pub fn map(&mut self, pairs: usize) {
        match self.proto {
            Protocol::Resp2 => write_header(&mut self.buf, b'*', pairs.saturating_mul(2)),
            Protocol::Resp3 => write_header(&mut self.buf, b'%', pairs),
        }
    }

    /// Set header: RESP2 `*n`, RESP3 `~n`.
    #[inline]
    pub fn set(&mut self, len: usize) {
        let prefix = match self.proto {
            Protocol::Resp2 => b'*',
            Protocol::Resp3 => b'~',
        };
        write_header(&mut self.buf, prefix, len);
    }

    /// Push header: RESP2 `*n`, RESP3 `>n`.
    #[inline]
    pub fn push(&mut self, len: usize) {
        let prefix = match self.proto {
            Protocol::Resp2 => b'*',
            Protocol::Resp3 => b'>',
        };
        write_header(&mut self.buf, prefix, len);
    }

    /// Double: RESP2 bulk string, RESP3 `,text`; text from [`format_double`].
    #[inline]
    pub fn double(&mut self, v: f64) {
        write_double_reply(&mut self.buf, self.proto, v);
    }

    /// Boolean: RESP2 `:1` / `:0`, RESP3 `#t` / `#f`.
    #[inline]
    pub fn boolean(&mut self, v: bool) {
        self.buf.extend_from_slice(match (self.proto, v) {
            (Protocol::Resp2, true) => b":1\r\n",
            (Protocol::Resp2, false) => b":0\r\n",
            (Protocol::Resp3, true) => b"#t\r\n",
            (Protocol::Resp3, false) => b"#f\r\n",
        });
    }

    /// Big number: RESP2 bulk string, RESP3 `(digits`.
    #[inline]
    pub fn big_number(&mut self, digits: &str) {
        match self.proto {
            Protocol::Resp2 => write_bulk(&mut self.buf, digits.as_bytes()),
            Protocol::Resp3 => write_line(&mut self.buf, b'(', digits.as_bytes()),
        }
    }

    /// Verbatim string: RESP2 bulk of `text`, RESP3 `=len\r\nfmt:text`;
    /// `format` is three characters such as `txt` (truncated or
    /// space-padded otherwise).
    #[inline]
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        write_verbatim(&mut self.buf, self.proto, format.as_bytes(), text);
    }

    /// Any [`Frame`], encoded in this writer's protocol.
    pub fn frame(&mut self, frame: &Frame) {
        encode_frame(frame, self.proto, &mut self.buf);
        if let Frame::Error(e) = frame {
            self.errors.push(error_code(e).to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w2() -> ReplyWriter {
        ReplyWriter::new(Protocol::Resp2)
    }

    #[test]
    fn error_codes_are_counted_as_redis_counts_them() {
        assert_eq!(error_code("WRONGTYPE Operation against a key"), "WRONGTYPE");
        assert_eq!(error_code("-NOSCRIPT No matching script"), "NOSCRIPT");
        assert_eq!(error_code("nospace"), "ERR");
        assert_eq!(error_code(&format!("{} x", "A".repeat(40))), "ERR");
        let mut w = w2();
        assert!(!w.has_errors());
        w.error("ERR bad");
        w.frame(&Frame::Error(
            "BUSYKEY Target key name already exists.".into(),
        ));
        w.truncate(0);
        assert!(w.has_errors());
        assert_eq!(
            w.take_errors(),
            vec!["ERR".to_string(), "BUSYKEY".to_string()]
        );
        assert!(!w.has_errors());
    }

    fn w3() -> ReplyWriter {
        ReplyWriter::new(Protocol::Resp3)
    }

    fn both(f: impl Fn(&mut ReplyWriter)) -> (Vec<u8>, Vec<u8>) {
        let mut a = w2();
        let mut b = w3();
        f(&mut a);
        f(&mut b);
        (a.buffer().to_vec(), b.buffer().to_vec())
    }

    #[track_caller]
    fn check(f: impl Fn(&mut ReplyWriter), resp2: &[u8], resp3: &[u8]) {
        let (a, b) = both(f);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(resp2),
            "resp2"
        );
        assert_eq!(
            String::from_utf8_lossy(&b),
            String::from_utf8_lossy(resp3),
            "resp3"
        );
    }

    #[test]
    fn scalars() {
        check(|w| w.ok(), b"+OK\r\n", b"+OK\r\n");
        check(|w| w.simple(b"PONG"), b"+PONG\r\n", b"+PONG\r\n");
        check(|w| w.pong(), b"+PONG\r\n", b"+PONG\r\n");
        check(|w| w.simple(b"a\r\nb"), b"+a  b\r\n", b"+a  b\r\n");
        check(|w| w.error("ERR bad"), b"-ERR bad\r\n", b"-ERR bad\r\n");
        check(
            |w| w.error("WRONGTYPE x\ny"),
            b"-WRONGTYPE x y\r\n",
            b"-WRONGTYPE x y\r\n",
        );
        check(|w| w.error("-ERR x"), b"-ERR x\r\n", b"-ERR x\r\n");
        check(|w| w.int(-42), b":-42\r\n", b":-42\r\n");
        check(
            |w| w.int(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        check(|w| w.bulk(b"foo"), b"$3\r\nfoo\r\n", b"$3\r\nfoo\r\n");
        check(|w| w.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
        check(|w| w.bulk_int(-17), b"$3\r\n-17\r\n", b"$3\r\n-17\r\n");
        check(|w| w.null(), b"$-1\r\n", b"_\r\n");
        check(|w| w.null_array(), b"*-1\r\n", b"_\r\n");
        check(|w| w.boolean(true), b":1\r\n", b"#t\r\n");
        check(|w| w.boolean(false), b":0\r\n", b"#f\r\n");
        check(|w| w.double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n");
        check(|w| w.double(3.0), b"$1\r\n3\r\n", b",3\r\n");
        check(
            |w| w.double(f64::NEG_INFINITY),
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
        check(|w| w.double(f64::NAN), b"$3\r\nnan\r\n", b",nan\r\n");
        check(
            |w| w.big_number("1234567890123456789012"),
            b"$22\r\n1234567890123456789012\r\n",
            b"(1234567890123456789012\r\n",
        );
        check(
            |w| w.verbatim("txt", b"hello"),
            b"$5\r\nhello\r\n",
            b"=9\r\ntxt:hello\r\n",
        );
        check(
            |w| w.verbatim("m", b"x"),
            b"$1\r\nx\r\n",
            b"=5\r\nm  :x\r\n",
        );
    }

    #[test]
    fn aggregates() {
        check(|w| w.array(3), b"*3\r\n", b"*3\r\n");
        check(|w| w.array(0), b"*0\r\n", b"*0\r\n");
        check(|w| w.map(2), b"*4\r\n", b"%2\r\n");
        check(|w| w.set(5), b"*5\r\n", b"~5\r\n");
        check(|w| w.push(3), b"*3\r\n", b">3\r\n");
    }

    #[test]
    fn buffer_management() {
        let mut w = w2();
        assert!(w.is_empty());
        w.ok();
        let mark = w.len();
        w.bulk(b"x");
        assert_eq!(w.buffer(), b"+OK\r\n$1\r\nx\r\n");
        w.truncate(mark);
        assert_eq!(w.buffer(), b"+OK\r\n");
        w.buffer_mut().extend_from_slice(b":1\r\n");
        assert_eq!(w.len(), 9);
        w.clear();
        assert!(w.is_empty());
        assert_eq!(w.protocol(), Protocol::Resp2);
        w.set_protocol(Protocol::Resp3);
        assert_eq!(w.protocol(), Protocol::Resp3);
        w.null();
        assert_eq!(w.buffer(), b"_\r\n");
        w.frame(&Frame::Boolean(true));
        assert_eq!(w.buffer(), b"_\r\n#t\r\n");
    }

    #[test]
    fn double_text_matches_redis() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (3.0, "3"),
            (-2.0, "-2"),
            (1.5, "1.5"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.3, "0.3"),
            (0.1 + 0.2, "0.30000000000000004"),
            (2.71, "2.71"),
            (10.5, "10.5"),
            (0.0001, "0.0001"),
            (0.00001, "0.00001"),
            (0.000001, "0.000001"),
            (1.5e-7, "1.5e-7"),
            (1e-7, "1e-7"),
            (2.5e-5, "0.000025"),
            (1.2345678e-5, "1.2345678e-5"),
            (0.123456789, "0.123456789"),
            (12345.678901234, "1.2345678901234e+4"),
            (123.456, "123.456"),
            (1e17, "100000000000000000"),
            (4611686018427387904.0, "4611686018427387904"),
            (1e20, "1e+20"),
            (1.5e20, "1.5e+20"),
            (-1e20, "-1e+20"),
            (1e100, "1e+100"),
            (1e300, "1e+300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (1e-10, "1e-10"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for &(v, text) in cases {
            assert_eq!(format_double(v), text, "{v:e}");
            let mut out = Vec::new();
            write_double(&mut out, v);
            assert_eq!(out, text.as_bytes());
        }
    }

    #[test]
    fn double_round_trips() {
        let mut x: u64 = 0x1234_5678_9abc_def1;
        for _ in 0..20_000 {
            // xorshift over raw bit patterns: covers every exponent.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_nan() {
                continue;
            }
            let s = format_double(v);
            let back: f64 = s.parse().unwrap();
            assert_eq!(back.to_bits(), v.to_bits(), "{s}");
            assert!(s.len() < DOUBLE_CAP);
        }
    }
}
