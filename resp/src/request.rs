//! Server-side request parser (the hot path of every connection).
//!
//! [`RequestParser::parse`] recognises one command at the start of a buffer,
//! following Redis 7's `processMultibulkBuffer` / `processInlineBuffer`:
//! a buffer starting with `*` is a multibulk request, anything else is an
//! inline request split like `sdssplitargs`. Arguments are reported as byte
//! ranges so nothing is copied or allocated per command in steady state;
//! [`Args`] turns the ranges back into slices.

use memchr::memchr;

use crate::ProtocolError;

/// Largest number of spans reserved up front for one command, whatever count
/// the client announces.
const SPAN_RESERVE_CAP: usize = 1024;

/// Most arguments an unauthenticated client may announce (Redis: 10).
const UNAUTH_MAX_MULTIBULK: usize = 10;

/// Longest bulk an unauthenticated client may announce (Redis 7: 16 KiB).
const UNAUTH_MAX_BULK: u64 = 16384;

/// Parser limits (Redis defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted bulk string (`proto-max-bulk-len`, 512 MiB).
    pub max_bulk_len: usize,
    /// Largest accepted multibulk / aggregate count (`i32::MAX`).
    pub max_multibulk_len: usize,
    /// Longest inline request or protocol line (64 KiB).
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            max_inline_len: 64 * 1024,
        }
    }
}

/// How the last command was framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `*<n>` followed by `n` bulk strings; spans index the input buffer.
    Multibulk,
    /// A plain text line; spans index [`RequestParser::inline_buf`].
    Inline,
}

/// Where an unfinished command stopped, so the next call resumes there.
#[derive(Clone, Copy, Debug, Default)]
enum State {
    /// No command in progress.
    #[default]
    Idle,
    /// Inside a multibulk command.
    Multibulk {
        /// Offset of the next element header, or of the pending bulk data.
        pos: usize,
        /// Elements still to read.
        remaining: usize,
        /// Length of the bulk whose header was read but whose data is missing.
        bulk: Option<usize>,
    },
    /// Inside an inline command whose first `scanned` bytes hold no newline.
    Inline {
        /// Bytes already searched for the newline.
        scanned: usize,
    },
}

/// Incremental, allocation-free (in steady state) command parser.
#[derive(Debug, Default)]
pub struct RequestParser {
    limits: Limits,
    /// Whether the client still has to authenticate (tighter limits).
    auth_required: bool,
    state: State,
    /// Spans of a multibulk command that is not complete yet.
    saved: Vec<(usize, usize)>,
    /// Unescaped arguments of the last inline command.
    inline: Vec<u8>,
}

/// Outcome of looking for the CR that ends a protocol line.
enum Line {
    /// The CR is at this offset and at least one byte follows it.
    At(usize),
    /// More bytes are needed.
    Incomplete,
    /// No CR within the line limit.
    TooLong,
}

/// Finds the `\r` ending the line that starts at `start`, looking at most
/// `max + 1` bytes ahead (Redis errors once more than `max` bytes are
/// buffered without one).
#[inline]
fn find_cr(buf: &[u8], start: usize, max: usize) -> Line {
    let rest = buf.get(start..).unwrap_or(&[]);
    let window = &rest[..rest.len().min(max.saturating_add(1))];
    match memchr(b'\r', window) {
        Some(i) if i + 1 < rest.len() => Line::At(start + i),
        Some(_) => Line::Incomplete,
        None if rest.len() > max => Line::TooLong,
        None => Line::Incomplete,
    }
}

/// Redis's `string2ll`: optional `-`, no leading zeros, no `+`, at most 20
/// characters, must fit an `i64`.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &c in rest {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some(0i64.wrapping_sub(v as i64))
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Fast path for a complete, well-formed `<prefix><digits>\r\n` header at
/// `pos`: returns the number and the offset just past the CRLF. Anything
/// unusual (signs, leading zeros, long numbers, missing bytes) returns `None`
/// and is left to the general path, which has the exact Redis semantics.
#[inline(always)]
fn fast_header(buf: &[u8], pos: usize, prefix: u8) -> Option<(u64, usize)> {
    let rest = buf.get(pos..)?;
    // One or two digits (argument counts, command names, most keys): no loop.
    if let Some(&[p, d0, d1, d2, d3]) = rest.get(..5) {
        if p != prefix {
            return None;
        }
        let (a, b) = (d0.wrapping_sub(b'0'), d1.wrapping_sub(b'0'));
        if a < 10 && d1 == b'\r' && d2 == b'\n' {
            return Some((u64::from(a), pos + 4));
        }
        if (1..10).contains(&a) && b < 10 && d2 == b'\r' && d3 == b'\n' {
            return Some((u64::from(a) * 10 + u64::from(b), pos + 5));
        }
    }
    if rest.first() != Some(&prefix) {
        return None;
    }
    let mut v: u64 = 0;
    let mut i = 1;
    while let Some(&c) = rest.get(i) {
        if c.is_ascii_digit() {
            if i > 18 || (i == 2 && v == 0) {
                return None;
            }
            v = v * 10 + u64::from(c - b'0');
            i += 1;
        } else {
            break;
        }
    }
    if i > 1 && rest.get(i) == Some(&b'\r') && rest.get(i + 1) == Some(&b'\n') {
        Some((v, pos + i + 2))
    } else {
        None
    }
}

#[inline]
fn is_space(c: u8) -> bool {
    // C's isspace in the "C" locale.
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

#[inline]
fn hex_val(c: Option<&u8>) -> Option<u8> {
    match c? {
        c @ b'0'..=b'9' => Some(c - b'0'),
        c @ b'a'..=b'f' => Some(c - b'a' + 10),
        c @ b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline request line like Redis's `sdssplitargs`, appending the
/// unescaped arguments to `out` and their ranges to `spans`.
///
/// Unlike C, a NUL byte is an ordinary character here (Redis never hands
/// such a line to `sdssplitargs`).
fn split_inline(
    line: &[u8],
    out: &mut Vec<u8>,
    spans: &mut Vec<(usize, usize)>,
) -> Result<(), ProtocolError> {
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|&c| is_space(c)) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(());
        }
        let start = out.len();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            let c = line.get(i).copied();
            if in_dq {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') => {
                        let next = line.get(i + 1).copied();
                        if next == Some(b'x') {
                            if let (Some(h), Some(l)) =
                                (hex_val(line.get(i + 2)), hex_val(line.get(i + 3)))
                            {
                                out.push(h * 16 + l);
                                i += 4;
                                continue;
                            }
                        }
                        match next {
                            Some(n) => {
                                out.push(match n {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => b'\x08',
                                    b'a' => b'\x07',
                                    other => other,
                                });
                                i += 2;
                            }
                            None => {
                                // A lone trailing backslash: kept, and the
                                // quote is then unterminated.
                                out.push(b'\\');
                                i += 1;
                            }
                        }
                    }
                    Some(b'"') => {
                        if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        out.push(other);
                        i += 1;
                    }
                }
            } else if in_sq {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        out.push(b'\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        out.push(other);
                        i += 1;
                    }
                }
            } else {
                match c {
                    None => break,
                    Some(b' ' | b'\n' | b'\r' | b'\t') => {
                        i += 1;
                        break;
                    }
                    Some(b'"') => {
                        in_dq = true;
                        i += 1;
                    }
                    Some(b'\'') => {
                        in_sq = true;
                        i += 1;
                    }
                    Some(other) => {
                        out.push(other);
                        i += 1;
                    }
                }
            }
        }
        spans.push((start, out.len()));
    }
}

impl RequestParser {
    /// Creates a parser enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            auth_required: false,
            state: State::Idle,
            saved: Vec::new(),
            inline: Vec::new(),
        }
    }

    /// Replaces the limits (applies to lines and bulks not yet parsed).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// While `true` (client not yet authenticated), multibulk counts above
    /// 10 and bulk lengths above 16384 are refused with Redis's
    /// `unauthenticated ... length` errors. Off by default.
    pub fn set_auth_required(&mut self, required: bool) {
        self.auth_required = required;
    }

    /// The unescaped arguments of the last inline command; the spans of an
    /// [`RequestKind::Inline`] result index into this buffer.
    pub fn inline_buf(&self) -> &[u8] {
        &self.inline
    }

    /// Forgets resume state (after the caller dropped the buffer).
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.saved.clear();
    }

    /// Parses one command from the start of `buf`.
    ///
    /// * `Ok(Some((consumed, kind)))`: a complete command occupies
    ///   `buf[..consumed]`; `spans` (cleared first) holds one `(start, end)`
    ///   range per argument, indexing `buf` for [`RequestKind::Multibulk`]
    ///   and [`RequestParser::inline_buf`] for [`RequestKind::Inline`]. A
    ///   command with no arguments (empty line, `*0`, `*-1`) gives empty
    ///   spans and should be skipped.
    /// * `Ok(None)`: incomplete; call again with the same bytes plus more
    ///   (the parser resumes where it stopped instead of rescanning).
    /// * `Err(e)`: protocol error; reply `-ERR {e}` and close.
    ///
    /// Inlined into the caller: the one-pass case costs no call; the rest is out of line.
    #[inline]
    pub fn parse(
        &mut self,
        buf: &[u8],
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<Option<(usize, RequestKind)>, ProtocolError> {
        spans.clear();
        if matches!(self.state, State::Idle) {
            if let Some(consumed) = self.complete_multibulk(buf, spans) {
                return Ok(Some((consumed, RequestKind::Multibulk)));
            }
            spans.clear();
        }
        self.parse_general(buf, spans)
    }

    /// [`RequestParser::parse`] without its one-pass case (`spans` already cleared).
    #[inline(never)]
    fn parse_general(
        &mut self,
        buf: &[u8],
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<Option<(usize, RequestKind)>, ProtocolError> {
        let first = match buf.first() {
            Some(&c) => c,
            None => {
                self.reset();
                return Ok(None);
            }
        };
        let state = std::mem::take(&mut self.state);
        let result = match state {
            State::Multibulk {
                pos,
                remaining,
                bulk,
            } if first == b'*' && pos <= buf.len() => {
                std::mem::swap(spans, &mut self.saved);
                self.multibulk_elements(buf, pos, remaining, bulk, spans)
            }
            State::Inline { scanned } if first != b'*' => self.inline(buf, scanned, spans),
            _ => {
                // Idle, or the caller broke the resume contract: start over.
                self.saved.clear();
                if first == b'*' {
                    self.multibulk_start(buf, spans)
                } else {
                    self.inline(buf, 0, spans)
                }
            }
        };
        if result.is_err() {
            self.reset();
            spans.clear();
        }
        result
    }

    /// The common case in one pass: a whole, well-formed multibulk command with at least
    /// one argument, within the limits, from an authenticated client. Its length, with
    /// `spans` filled; `None` (`spans` partly filled) leaves the command to the general
    /// path, which gives exactly what it would have given without this one.
    #[inline(always)]
    fn complete_multibulk(&self, buf: &[u8], spans: &mut Vec<(usize, usize)>) -> Option<usize> {
        let (count, mut pos) = fast_header(buf, 0, b'*')?;
        if count == 0 || count > self.limits.max_multibulk_len as u64 || self.auth_required {
            return None;
        }
        let max_bulk = self.limits.max_bulk_len as u64;
        for _ in 0..count {
            let (len, next) = fast_header(buf, pos, b'$')?;
            if len > max_bulk {
                return None;
            }
            let end = next.checked_add(len as usize)?;
            if buf.get(end..end.checked_add(2)?) != Some(b"\r\n") {
                return None;
            }
            spans.push((next, end));
            pos = end + 2;
        }
        Some(pos)
    }

    fn multibulk_start(
        &mut self,
        buf: &[u8],
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<Option<(usize, RequestKind)>, ProtocolError> {
        let (count, pos) = match fast_header(buf, 0, b'*') {
            Some((count, pos)) => (count, pos),
            None => {
                let cr = match find_cr(buf, 0, self.limits.max_inline_len) {
                    Line::At(cr) => cr,
                    Line::Incomplete => return Ok(None),
                    Line::TooLong => return Err(ProtocolError::TooBigMbulkCountString),
                };
                if buf.get(cr + 1) != Some(&b'\n') {
                    return Err(ProtocolError::InvalidMultibulkLength);
                }
                let count = buf
                    .get(1..cr)
                    .and_then(string2ll)
                    .ok_or(ProtocolError::InvalidMultibulkLength)?;
                // Zero or negative: an empty command.
                (u64::try_from(count).unwrap_or(0), cr + 2)
            }
        };
        if count == 0 {
            return Ok(Some((pos, RequestKind::Multibulk)));
        }
        let count = usize::try_from(count).map_err(|_| ProtocolError::InvalidMultibulkLength)?;
        if count > self.limits.max_multibulk_len {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        if self.auth_required && count > UNAUTH_MAX_MULTIBULK {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        spans.reserve(count.min(SPAN_RESERVE_CAP));
        self.multibulk_elements(buf, pos, count, None, spans)
    }

    fn multibulk_elements(
        &mut self,
        buf: &[u8],
        mut pos: usize,
        mut remaining: usize,
        mut bulk: Option<usize>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<Option<(usize, RequestKind)>, ProtocolError> {
        let limits = self.limits;
        while remaining > 0 {
            let len = match bulk.take() {
                Some(len) => len,
                None => {
                    let (len, next) = match fast_header(buf, pos, b'$') {
                        Some(h) => h,
                        None => match self.bulk_header(buf, pos)? {
                            Some(h) => h,
                            None => {
                                self.suspend(pos, remaining, None, spans);
                                return Ok(None);
                            }
                        },
                    };
                    if len > limits.max_bulk_len as u64 {
                        return Err(ProtocolError::InvalidBulkLength);
                    }
                    if self.auth_required && len > UNAUTH_MAX_BULK {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    pos = next;
                    // Fits: it is no larger than max_bulk_len, a usize.
                    len as usize
                }
            };
            let avail = buf.len().saturating_sub(pos);
            if avail < len.saturating_add(2) {
                self.suspend(pos, remaining, Some(len), spans);
                return Ok(None);
            }
            let end = pos + len;
            if buf.get(end..end + 2) != Some(b"\r\n") {
                return Err(ProtocolError::ExpectedCrlf);
            }
            spans.push((pos, end));
            pos = end + 2;
            remaining -= 1;
        }
        Ok(Some((pos, RequestKind::Multibulk)))
    }

    /// The general (exact Redis) path for a `$<len>` header at `pos`.
    fn bulk_header(&self, buf: &[u8], pos: usize) -> Result<Option<(u64, usize)>, ProtocolError> {
        let cr = match find_cr(buf, pos, self.limits.max_inline_len) {
            Line::At(cr) => cr,
            Line::Incomplete => return Ok(None),
            Line::TooLong => return Err(ProtocolError::TooBigBulkCountString),
        };
        match buf.get(pos) {
            Some(b'$') => {}
            Some(&c) => return Err(ProtocolError::ExpectedDollar(c)),
            None => return Ok(None),
        }
        if buf.get(cr + 1) != Some(&b'\n') {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let len = buf
            .get(pos + 1..cr)
            .and_then(string2ll)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        let len = u64::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
        Ok(Some((len, cr + 2)))
    }

    /// Records where an incomplete multibulk command stopped; the spans read
    /// so far move into `saved` (an O(1) swap) and `spans` is left empty.
    fn suspend(
        &mut self,
        pos: usize,
        remaining: usize,
        bulk: Option<usize>,
        spans: &mut Vec<(usize, usize)>,
    ) {
        self.state = State::Multibulk {
            pos,
            remaining,
            bulk,
        };
        self.saved.clear();
        std::mem::swap(spans, &mut self.saved);
    }

    fn inline(
        &mut self,
        buf: &[u8],
        scanned: usize,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<Option<(usize, RequestKind)>, ProtocolError> {
        let max = self.limits.max_inline_len;
        let window_end = buf.len().min(max.saturating_add(1));
        let from = scanned.min(window_end);
        let Some(i) = memchr(b'\n', &buf[from..window_end]) else {
            if buf.len() > max {
                return Err(ProtocolError::TooBigInlineRequest);
            }
            self.state = State::Inline {
                scanned: window_end,
            };
            return Ok(None);
        };
        let nl = from + i;
        let line = &buf[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.inline.clear();
        split_inline(line, &mut self.inline, spans)?;
        Ok(Some((nl + 1, RequestKind::Inline)))
    }
}

/// A parsed command's arguments, borrowed.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    data: &'a [u8],
    spans: &'a [(usize, usize)],
}

impl<'a> Args<'a> {
    /// Wraps the spans reported by [`RequestParser::parse`] and the buffer
    /// they index.
    pub fn new(data: &'a [u8], spans: &'a [(usize, usize)]) -> Self {
        Args { data, spans }
    }

    /// Number of arguments (the command name included).
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`, if present.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        let &(start, end) = self.spans.get(i)?;
        self.data.get(start..end)
    }

    /// Argument `i`, or `b""` when out of range (never panics).
    #[inline]
    pub fn arg(&self, i: usize) -> &'a [u8] {
        self.get(i).unwrap_or(b"")
    }

    /// Iterates over the arguments.
    pub fn iter(&self) -> ArgsIter<'a> {
        ArgsIter {
            data: self.data,
            spans: self.spans.iter(),
        }
    }

    /// The arguments from index `from` on (empty if `from > len`).
    pub fn slice(&self, from: usize) -> Args<'a> {
        Args {
            data: self.data,
            spans: self.spans.get(from..).unwrap_or(&[]),
        }
    }
}

/// Arguments kept beyond the read buffer they were parsed from (a queued MULTI command, a
/// blocked client's command, a script's `redis.call`): one byte buffer plus spans.
#[derive(Clone, Debug, Default)]
pub struct OwnedArgs {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl OwnedArgs {
    /// A copy of `args`.
    pub fn from_args(args: Args<'_>) -> Self {
        let mut o = OwnedArgs::default();
        for a in args.iter() {
            o.push(a);
        }
        o
    }

    /// Appends one argument.
    pub fn push(&mut self, arg: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(arg);
        self.spans.push((start, self.data.len()));
    }

    /// Borrowed view, as the parser gives it.
    pub fn args(&self) -> Args<'_> {
        Args::new(&self.data, &self.spans)
    }
}

impl std::fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl<'a> IntoIterator for Args<'a> {
    type Item = &'a [u8];
    type IntoIter = ArgsIter<'a>;

    fn into_iter(self) -> ArgsIter<'a> {
        self.iter()
    }
}

/// Iterator over the arguments of an [`Args`].
#[derive(Clone, Debug)]
pub struct ArgsIter<'a> {
    data: &'a [u8],
    spans: std::slice::Iter<'a, (usize, usize)>,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let &(start, end) = self.spans.next()?;
        Some(self.data.get(start..end).unwrap_or(b""))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl DoubleEndedIterator for ArgsIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let &(start, end) = self.spans.next_back()?;
        Some(self.data.get(start..end).unwrap_or(b""))
    }
}

impl ExactSizeIterator for ArgsIter<'_> {}

/// Commands of a read buffer parsed ahead of running them: a connection parses its
/// whole batch first, so it can prefetch each command's key a few commands ahead (the
/// cache misses then overlap) from the parser's own spans, with no second scan of the
/// bytes. [`Batch::fill`] stops where [`RequestParser::parse`] would not give a complete
/// multibulk command (incomplete, inline or malformed): the caller parses on from
/// [`Batch::end`] as it would have, and gets the same results.
#[derive(Debug, Default)]
pub struct Batch {
    /// Per command: its end offset in the buffer and the end of its spans in `spans`.
    cmds: Vec<(usize, usize)>,
    /// Every command's spans, each relative to its command's start.
    spans: Vec<(usize, usize)>,
}

/// One command of a [`Batch`]: its start and end offsets in the buffer and its spans.
pub type BatchCommand<'a> = (usize, usize, &'a [(usize, usize)]);

impl Batch {
    /// Parses up to `max` complete multibulk commands from the start of `buf` with
    /// `parser` (`scratch` is its spans buffer). What parsing would not give as one (an
    /// incomplete command, an inline one, an error) is left at [`Batch::end`], with the
    /// parser in the state that parsing from there expects.
    pub fn fill(
        &mut self,
        parser: &mut RequestParser,
        buf: &[u8],
        max: usize,
        scratch: &mut Vec<(usize, usize)>,
    ) {
        self.cmds.clear();
        self.spans.clear();
        self.extend(parser, buf, max, scratch);
    }

    /// Like [`Batch::fill`], going on from [`Batch::end`] (the same `buf`, and `parser`
    /// untouched since) until the batch holds `max` commands.
    pub fn extend(
        &mut self,
        parser: &mut RequestParser,
        buf: &[u8],
        max: usize,
        scratch: &mut Vec<(usize, usize)>,
    ) {
        let mut at = self.end();
        while self.cmds.len() < max && at < buf.len() {
            match parser.parse(&buf[at..], scratch) {
                Ok(Some((n, RequestKind::Multibulk))) => {
                    self.spans.extend_from_slice(scratch);
                    at += n;
                    self.cmds.push((at, self.spans.len()));
                }
                // An inline command leaves the parser idle, and an error resets it: both
                // are parsed again, and come out the same, from `end`. An incomplete
                // command leaves the parser waiting for exactly these bytes and more.
                _ => break,
            }
        }
    }

    /// Number of commands parsed.
    #[inline]
    pub fn len(&self) -> usize {
        self.cmds.len()
    }

    /// True when no command was parsed.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// Where the parsed commands end in the buffer (0 when none was).
    #[inline]
    pub fn end(&self) -> usize {
        self.cmds.last().map_or(0, |&(end, _)| end)
    }

    /// Command `i`: its start and end offsets in the buffer and its spans (relative to
    /// its start, as [`RequestParser::parse`] gives them; empty for `*0`).
    #[inline]
    pub fn get(&self, i: usize) -> Option<BatchCommand<'_>> {
        let &(end, spans_end) = self.cmds.get(i)?;
        let (start, spans_start) = match i.checked_sub(1) {
            Some(p) => self.cmds[p],
            None => (0, 0),
        };
        Some((start, end, &self.spans[spans_start..spans_end]))
    }

    /// The command name and the second argument (the key of most commands) of command
    /// `i`, if it has both.
    #[inline]
    pub fn name_and_key<'a>(&self, buf: &'a [u8], i: usize) -> Option<(&'a [u8], &'a [u8])> {
        let (start, _, spans) = self.get(i)?;
        let (&(ns, ne), &(ks, ke)) = (spans.first()?, spans.get(1)?);
        Some((
            buf.get(start + ns..start + ne)?,
            buf.get(start + ks..start + ke)?,
        ))
    }

    /// The second argument of command `i` (the key of most commands), if it has one.
    #[inline]
    pub fn key<'a>(&self, buf: &'a [u8], i: usize) -> Option<&'a [u8]> {
        let (start, _, spans) = self.get(i)?;
        let &(s, e) = spans.get(1)?;
        buf.get(start + s..start + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProtocolError as E;

    /// [`fast_header`] as it was before its one- and two-digit cases: the digit loop alone.
    fn header_by_loop(buf: &[u8], pos: usize, prefix: u8) -> Option<(u64, usize)> {
        let rest = buf.get(pos..)?;
        if rest.first() != Some(&prefix) {
            return None;
        }
        let mut v: u64 = 0;
        let mut i = 1;
        while let Some(&c) = rest.get(i) {
            if !c.is_ascii_digit() {
                break;
            }
            if i > 18 || (i == 2 && v == 0) {
                return None;
            }
            v = v * 10 + u64::from(c - b'0');
            i += 1;
        }
        (i > 1 && rest.get(i) == Some(&b'\r') && rest.get(i + 1) == Some(&b'\n'))
            .then_some((v, pos + i + 2))
    }

    #[test]
    fn fast_header_agrees_with_the_digit_loop() {
        // Every string of up to 6 bytes after the prefix over these bytes, at two offsets.
        let alphabet = b"0159\r\n-x$";
        let mut bodies: Vec<Vec<u8>> = vec![Vec::new()];
        let mut all = Vec::new();
        for _ in 0..6 {
            let mut next = Vec::new();
            for b in &bodies {
                for &c in alphabet {
                    let mut n = b.clone();
                    n.push(c);
                    next.push(n);
                }
            }
            all.extend(bodies);
            bodies = next;
        }
        all.extend(bodies);
        let mut checked = 0;
        for body in &all {
            for lead in [&b""[..], b"ab"] {
                for prefix in [b'$', b'*'] {
                    let buf = [lead, &[prefix], body].concat();
                    for want in [b'$', b'*'] {
                        assert_eq!(
                            fast_header(&buf, lead.len(), want),
                            header_by_loop(&buf, lead.len(), want),
                            "{:?}",
                            String::from_utf8_lossy(&buf)
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1_000_000, "{checked}");
        assert_eq!(fast_header(b"$7\r\n", 0, b'$'), Some((7, 4)));
        assert_eq!(fast_header(b"$42\r\nx", 0, b'$'), Some((42, 5)));
        assert_eq!(fast_header(b"$256\r\n", 0, b'$'), Some((256, 6)));
        assert_eq!(fast_header(b"$05\r\n", 0, b'$'), None);
    }

    /// One parse result: (consumed, kind, args), `None` for incomplete.
    type Step = Result<Option<(usize, RequestKind, Vec<Vec<u8>>)>, ProtocolError>;

    /// One way to parse a command: [`RequestParser::parse`] or its general path alone.
    type ParseFn = fn(
        &mut RequestParser,
        &[u8],
        &mut Vec<(usize, usize)>,
    ) -> Result<Option<(usize, RequestKind)>, ProtocolError>;

    /// Every command `parser` finds in `buf` from `at`, one call at a time, until one is
    /// incomplete (`None` last) or an error (`Err` last).
    fn one_by_one(parser: &mut RequestParser, buf: &[u8], at: usize) -> Vec<Step> {
        one_by_one_with(parser, buf, at, RequestParser::parse)
    }

    /// [`one_by_one`] from 0 with the general path alone (no one-pass case).
    fn one_by_one_general(parser: &mut RequestParser, buf: &[u8]) -> Vec<Step> {
        one_by_one_with(parser, buf, 0, |p, b, spans| {
            spans.clear();
            p.parse_general(b, spans)
        })
    }

    /// [`one_by_one`], each command parsed by `parse`.
    fn one_by_one_with(
        parser: &mut RequestParser,
        buf: &[u8],
        mut at: usize,
        parse: ParseFn,
    ) -> Vec<Step> {
        let mut spans = Vec::new();
        let mut out = Vec::new();
        loop {
            match parse(parser, &buf[at..], &mut spans) {
                Ok(Some((n, kind))) => {
                    let data = match kind {
                        RequestKind::Multibulk => &buf[at..],
                        RequestKind::Inline => parser.inline_buf(),
                    };
                    let args = Args::new(data, &spans).iter().map(<[u8]>::to_vec).collect();
                    out.push(Ok(Some((n, kind, args))));
                    at += n;
                }
                other => {
                    out.push(other.map(|_| None));
                    return out;
                }
            }
        }
    }

    #[test]
    fn one_pass_case_gives_what_the_general_path_gives() {
        // Whole and cut-short commands, odd headers, and each limit's edge, two at a time,
        // every prefix, under default and small limits, authenticated or not.
        let long = |n: usize| {
            let mut v = format!("*1\r\n${n}\r\n").into_bytes();
            v.extend(std::iter::repeat_n(b'x', n));
            v.extend_from_slice(b"\r\n");
            v
        };
        let many = |n: usize| {
            let mut v = format!("*{n}\r\n").into_bytes();
            for _ in 0..n {
                v.extend_from_slice(b"$1\r\na\r\n");
            }
            v
        };
        let mut corpus: Vec<Vec<u8>> = [
            &b"*1\r\n$4\r\nPING\r\n"[..],
            b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
            b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
            b"*0\r\n",
            b"*-1\r\n",
            b"*01\r\n$4\r\nPING\r\n",
            b"*1\r\n$04\r\nPING\r\n",
            b"*+1\r\n$4\r\nPING\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$4\r\nPINGxx",
            b"*1\r\n$4\r\nPING\n\n",
            b"*2\r\n$1\r\na\r\n+x\r\n",
            b"*1\r\n$4 \r\nPING\r\n",
            b"*1 \r\n$4\r\nPING\r\n",
            b"*1\n$4\r\nPING\r\n",
            b"*1\r\n$99999999999999999999\r\n",
            b"*99999999999999999999\r\n",
            b"*\r\n",
            b"*1\r\n$\r\n",
            b"PING\r\n",
            b"SET a 'b c'\n",
            b"\r\n",
        ]
        .iter()
        .map(|c| c.to_vec())
        .collect();
        corpus.extend([long(16), long(17), many(8), many(9), many(10), many(11)]);
        corpus.push(long(2001));
        let small = Limits {
            max_bulk_len: 16,
            max_multibulk_len: 8,
            max_inline_len: 32,
        };
        let mut checked = 0;
        for a in &corpus {
            for b in &corpus {
                let both = [&a[..], &b[..]].concat();
                for cut in 0..=both.len() {
                    // Every prefix of the short pairs; of the long ones, the edges.
                    if both.len() > 200 && cut > 40 && cut + 40 < both.len() {
                        continue;
                    }
                    let buf = &both[..cut];
                    for limits in [Limits::default(), small] {
                        for auth in [false, true] {
                            let mut fast = RequestParser::new(limits);
                            fast.set_auth_required(auth);
                            let mut general = RequestParser::new(limits);
                            general.set_auth_required(auth);
                            assert_eq!(
                                one_by_one(&mut fast, buf, 0),
                                one_by_one_general(&mut general, buf),
                                "{:?} (limits {limits:?}, auth {auth})",
                                String::from_utf8_lossy(buf)
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    /// [`Batch::fill`] (at most `max`), then the parser on from [`Batch::end`]: the same
    /// commands as the parser alone.
    fn check_batch(limits: Limits, buf: &[u8], max: usize) -> usize {
        let mut parser = RequestParser::new(limits);
        let mut batch = Batch::default();
        let mut scratch = Vec::new();
        batch.fill(&mut parser, buf, max / 2, &mut scratch);
        batch.extend(&mut parser, buf, max, &mut scratch);
        assert!(batch.len() <= max);
        let mut steps = Vec::new();
        let mut at = 0;
        for i in 0..batch.len() {
            let (start, end, spans) = batch.get(i).expect("in range");
            assert_eq!(start, at);
            let args = Args::new(&buf[start..], spans)
                .iter()
                .map(<[u8]>::to_vec)
                .collect();
            steps.push(Ok(Some((end - start, RequestKind::Multibulk, args))));
            if let Some(key) = batch.key(buf, i) {
                assert_eq!(Some(key), Args::new(&buf[start..], spans).get(1));
            }
            at = end;
        }
        assert_eq!(at, batch.end());
        steps.extend(one_by_one(&mut parser, buf, at));
        let alone = one_by_one(&mut RequestParser::new(limits), buf, 0);
        assert_eq!(steps, alone, "{:?}", String::from_utf8_lossy(buf));
        batch.len()
    }

    #[test]
    fn batch_parses_what_the_parser_parses() {
        let pipeline = b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n*1\r\n$4\r\nPING\r\n*0\r\n\
*3\r\n$3\r\nSET\r\n$0\r\n\r\n$2\r\nvv\r\n*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n";
        let d = Limits::default();
        assert_eq!(
            check_batch(d, pipeline, 100),
            5,
            "the empty command counts too"
        );
        assert_eq!(check_batch(d, pipeline, 2), 2);
        let mut parser = RequestParser::new(d);
        let mut batch = Batch::default();
        batch.fill(&mut parser, pipeline, 100, &mut Vec::new());
        assert_eq!(batch.key(pipeline, 0), Some(&b"key:1"[..]));
        assert_eq!(
            batch.name_and_key(pipeline, 0),
            Some((&b"GET"[..], &b"key:1"[..]))
        );
        assert_eq!(batch.key(pipeline, 1), None, "PING has no key");
        assert_eq!(batch.name_and_key(pipeline, 1), None);
        assert_eq!(batch.key(pipeline, 2), None, "*0 has no arguments");
        assert_eq!(batch.key(pipeline, 3), Some(&b""[..]));
        assert!(batch.get(5).is_none());
        // Stops at an incomplete command, an inline one, or anything malformed.
        for (bytes, n) in [
            (
                &b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n*2\r\n$3\r\nGET\r\n$5\r\nke"[..],
                1,
            ),
            (
                b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*1\r\n$4\r\nPING\r\n",
                1,
            ),
            (b"*2\r\n$3\r\nGET\r\n$-1\r\n", 0),
            (b"*2\r\n$3\r\nGET\r\n$+1\r\nk\r\n", 0),
            (b"*99999999999999999999\r\n", 0),
            (b"*4000000000\r\n$1\r\na\r\n", 0),
            (b"*1\r\n$99999999999\r\nx\r\n", 0),
            (b"*1\r\n$1\r\nab\r\n", 0),
            (b"", 0),
        ] {
            assert_eq!(
                check_batch(d, bytes, 100),
                n,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        // Mutated and cut pipelines, with default and tight limits.
        let tight = Limits {
            max_bulk_len: 3,
            max_multibulk_len: 2,
            max_inline_len: 8,
        };
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..5000 {
            let mut b = pipeline.to_vec();
            for _ in 0..next() % 3 {
                let i = next() as usize % b.len();
                b[i] = b"*$\r\n0123456789x "[next() as usize % 16];
            }
            b.truncate(next() as usize % (b.len() + 1));
            let limits = if round % 2 == 0 { d } else { tight };
            check_batch(limits, &b, (next() % 7) as usize);
        }
    }

    type Parsed = Result<Option<(usize, RequestKind, Vec<Vec<u8>>)>, ProtocolError>;

    /// Parses one command with a fresh parser; returns (consumed, kind, args).
    fn one_with(limits: Limits, buf: &[u8]) -> Parsed {
        let mut p = RequestParser::new(limits);
        let mut spans = Vec::new();
        Ok(p.parse(buf, &mut spans)?.map(|(n, kind)| {
            let data = match kind {
                RequestKind::Multibulk => buf,
                RequestKind::Inline => p.inline_buf(),
            };
            let args = Args::new(data, &spans).iter().map(<[u8]>::to_vec).collect();
            (n, kind, args)
        }))
    }

    fn one(buf: &[u8]) -> Parsed {
        one_with(Limits::default(), buf)
    }

    #[track_caller]
    fn inline_args(line: &[u8]) -> Vec<Vec<u8>> {
        let (n, kind, args) = one(line).unwrap().unwrap();
        assert_eq!(n, line.len());
        assert_eq!(kind, RequestKind::Inline);
        args
    }

    fn v(args: &[&[u8]]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.to_vec()).collect()
    }

    #[test]
    fn multibulk_basic() {
        let b = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva\r\nl\r\n*1\r\n";
        let (n, kind, args) = one(b).unwrap().unwrap();
        assert_eq!(kind, RequestKind::Multibulk);
        assert_eq!(&b[n..], b"*1\r\n");
        assert_eq!(args, v(&[b"SET", b"k", b"va\r\nl"]));
        // Binary and empty arguments.
        let (_, _, args) = one(b"*2\r\n$0\r\n\r\n$3\r\n\0\xff\n\r\n").unwrap().unwrap();
        assert_eq!(args, v(&[b"", b"\0\xff\n"]));
        // 19-digit header: the general path.
        let big = Limits {
            max_bulk_len: usize::MAX,
            ..Limits::default()
        };
        assert_eq!(one_with(big, b"*1\r\n$1000000000000000000\r\nab"), Ok(None));
        assert_eq!(
            one(b"*1\r\n$0000000000000000003\r\nabc\r\n"),
            Err(E::InvalidBulkLength)
        );
    }

    #[test]
    fn multibulk_empty_commands() {
        for b in [&b"*0\r\n"[..], b"*-1\r\n", b"*-7\r\n"] {
            let (n, kind, args) = one(b).unwrap().unwrap();
            assert_eq!((n, kind), (b.len(), RequestKind::Multibulk));
            assert!(args.is_empty());
        }
    }

    #[test]
    fn multibulk_errors() {
        let cases: &[(&[u8], E)] = &[
            (b"*x\r\n", E::InvalidMultibulkLength),
            (b"*\r\n", E::InvalidMultibulkLength),
            (b"*01\r\n", E::InvalidMultibulkLength),
            (b"*+1\r\n", E::InvalidMultibulkLength),
            (b"*-0\r\n", E::InvalidMultibulkLength),
            (b"*1 \r\n", E::InvalidMultibulkLength),
            (b"*1\rx", E::InvalidMultibulkLength),
            (b"*2147483648\r\n", E::InvalidMultibulkLength),
            (b"*99999999999999999999\r\n", E::InvalidMultibulkLength),
            (b"*1\r\nx\r\n", E::ExpectedDollar(b'x')),
            (b"*1\r\n\r\n", E::ExpectedDollar(b'\r')),
            (b"*2\r\n$1\r\na\r\n:1\r\n", E::ExpectedDollar(b':')),
            (b"*1\r\n$-1\r\n", E::InvalidBulkLength),
            (b"*1\r\n$x\r\n", E::InvalidBulkLength),
            (b"*1\r\n$\r\n", E::InvalidBulkLength),
            (b"*1\r\n$01\r\n", E::InvalidBulkLength),
            (b"*1\r\n$1\rx", E::InvalidBulkLength),
            (b"*1\r\n$536870913\r\n", E::InvalidBulkLength),
            (b"*1\r\n$99999999999999999999\r\n", E::InvalidBulkLength),
            (b"*1\r\n$3\r\nfooXY", E::ExpectedCrlf),
            (b"*1\r\n$3\r\nfoo\n\r", E::ExpectedCrlf),
        ];
        for (input, err) in cases {
            assert_eq!(
                one(input),
                Err(err.clone()),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        assert_eq!(
            E::ExpectedDollar(b'x').to_string(),
            "Protocol error: expected '$', got 'x'"
        );
        // Max bulk length itself is accepted (header-wise).
        assert_eq!(one(b"*1\r\n$536870912\r\n"), Ok(None));
    }

    #[test]
    fn line_length_limits() {
        let l = Limits {
            max_bulk_len: 10,
            max_multibulk_len: 3,
            max_inline_len: 16,
        };
        let mut b = b"*".to_vec();
        b.extend_from_slice(&[b'1'; 15]);
        assert_eq!(one_with(l, &b), Ok(None));
        b.push(b'1');
        assert_eq!(one_with(l, &b), Err(E::TooBigMbulkCountString));

        let mut b = b"*1\r\n$".to_vec();
        b.extend_from_slice(&[b'1'; 15]);
        assert_eq!(one_with(l, &b), Ok(None));
        b.push(b'1');
        assert_eq!(one_with(l, &b), Err(E::TooBigBulkCountString));

        let line = [b'a'; 16];
        assert_eq!(one_with(l, &line), Ok(None));
        let mut ok = line.to_vec();
        ok.push(b'\n');
        assert_eq!(one_with(l, &ok).unwrap().unwrap().2, v(&[&line]));
        assert_eq!(one_with(l, &[b'a'; 17]), Err(E::TooBigInlineRequest));

        assert_eq!(one_with(l, b"*4\r\n"), Err(E::InvalidMultibulkLength));
        assert!(one_with(l, b"*3\r\n").unwrap().is_none());
        assert_eq!(one_with(l, b"*1\r\n$11\r\n"), Err(E::InvalidBulkLength));
        assert!(one_with(l, b"*1\r\n$10\r\n").unwrap().is_none());
    }

    #[test]
    fn unauthenticated_limits() {
        let mut p = RequestParser::default();
        let mut spans = Vec::new();
        p.set_auth_required(true);
        assert_eq!(
            p.parse(b"*11\r\n", &mut spans),
            Err(E::UnauthenticatedMultibulkLength)
        );
        assert_eq!(
            p.parse(b"*2147483648\r\n", &mut spans),
            Err(E::InvalidMultibulkLength)
        );
        assert_eq!(p.parse(b"*10\r\n", &mut spans), Ok(None));
        p.reset();
        assert_eq!(
            p.parse(b"*1\r\n$16385\r\n", &mut spans),
            Err(E::UnauthenticatedBulkLength)
        );
        assert_eq!(p.parse(b"*1\r\n$16384\r\n", &mut spans), Ok(None));
        p.reset();
        p.set_auth_required(false);
        assert_eq!(p.parse(b"*11\r\n$2001\r\n", &mut spans), Ok(None));
    }

    #[test]
    fn set_limits_takes_effect() {
        let mut p = RequestParser::default();
        assert_eq!(p.limits(), Limits::default());
        let mut spans = Vec::new();
        p.set_limits(Limits {
            max_bulk_len: 1,
            ..Limits::default()
        });
        assert_eq!(
            p.parse(b"*1\r\n$2\r\nab\r\n", &mut spans),
            Err(E::InvalidBulkLength)
        );
    }

    #[test]
    fn inline_splitting() {
        assert_eq!(inline_args(b"PING\r\n"), v(&[b"PING"]));
        assert_eq!(inline_args(b"PING\n"), v(&[b"PING"]));
        assert_eq!(
            inline_args(b"  set  k \t v  \r\n"),
            v(&[b"set", b"k", b"v"])
        );
        assert_eq!(inline_args(b"a\rb\r\n"), v(&[b"a", b"b"]));
        assert_eq!(inline_args(b"a\x0bb\n"), v(&[b"a\x0bb"]));
        assert_eq!(inline_args(b"\x0b\x0ca\n"), v(&[b"a"]));
        assert_eq!(
            inline_args(b"set \"a b\" 'c d'\n"),
            v(&[b"set", b"a b", b"c d"])
        );
        assert_eq!(
            inline_args(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n"),
            v(&[b"\n\r\t\x08\x07\\\"q"])
        );
        assert_eq!(
            inline_args(b"\"\\x41\\x7a\\xff\\x00\\xg1\"\n"),
            v(&[b"Az\xff\0xg1"])
        );
        assert_eq!(inline_args(b"'it\\'s' '\\n'\n"), v(&[b"it's", b"\\n"]));
        assert_eq!(inline_args(b"foo\"bar\" x\n"), v(&[b"foobar", b"x"]));
        assert_eq!(inline_args(b"\"\" ''\n"), v(&[b"", b""]));
        assert_eq!(
            inline_args(b"\"a\"\t'b'\x0b\"c\"\n"),
            v(&[b"a", b"b", b"c"])
        );
        assert_eq!(inline_args(b"a\0b\n"), v(&[b"a\0b"]));
        assert_eq!(inline_args(b"\"a\"\r\n"), v(&[b"a"]));
    }

    #[test]
    fn inline_empty_lines() {
        for b in [&b"\n"[..], b"\r\n", b"   \r\n", b"\t\n"] {
            let (n, kind, args) = one(b).unwrap().unwrap();
            assert_eq!((n, kind), (b.len(), RequestKind::Inline));
            assert!(args.is_empty());
        }
    }

    #[test]
    fn inline_unbalanced_quotes() {
        for b in [
            &b"\"abc\n"[..],
            b"'abc\n",
            b"\"abc\"def\n",
            b"'abc'def\n",
            b"\"a\\\"\n",
            b"\"a\\\n",
            b"'a\\'\n",
            b"set \"k\n",
        ] {
            assert_eq!(
                one(b),
                Err(E::UnbalancedQuotes),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
    }

    #[test]
    fn incremental_and_resumed() {
        let cmd = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$10\r\n0123456789\r\n";
        let mut p = RequestParser::default();
        let mut spans = vec![(99, 99)];
        for i in 0..cmd.len() {
            assert_eq!(p.parse(&cmd[..i], &mut spans), Ok(None), "prefix {i}");
            assert!(spans.is_empty());
        }
        let (n, kind) = p.parse(cmd, &mut spans).unwrap().unwrap();
        assert_eq!((n, kind), (cmd.len(), RequestKind::Multibulk));
        let args: Vec<_> = Args::new(cmd, &spans).iter().collect();
        assert_eq!(args, vec![&b"SET"[..], b"key", b"0123456789"]);

        // Inline, byte by byte.
        let line = b"GET \"a b\"\r\n";
        for i in 0..line.len() {
            assert_eq!(p.parse(&line[..i], &mut spans), Ok(None));
        }
        assert_eq!(
            p.parse(line, &mut spans),
            Ok(Some((line.len(), RequestKind::Inline)))
        );
        assert_eq!(
            Args::new(p.inline_buf(), &spans).iter().collect::<Vec<_>>(),
            vec![&b"GET"[..], b"a b"]
        );
    }

    #[test]
    fn reset_and_contract_violations() {
        let mut p = RequestParser::default();
        let mut spans = Vec::new();
        assert_eq!(p.parse(b"*2\r\n$1\r\na\r\n$1", &mut spans), Ok(None));
        // A different (shorter) buffer: the parser starts over safely.
        assert_eq!(
            p.parse(b"*1\r\n$0\r\n\r\n", &mut spans),
            Ok(Some((10, RequestKind::Multibulk)))
        );
        assert_eq!(spans, vec![(8, 8)]);
        assert_eq!(p.parse(b"*2\r\n$1\r\na\r\n$1", &mut spans), Ok(None));
        p.reset();
        assert_eq!(
            p.parse(b"PING\r\n", &mut spans),
            Ok(Some((6, RequestKind::Inline)))
        );
        // An error clears the resume state too.
        assert_eq!(
            p.parse(b"*1\r\nx\r\n", &mut spans),
            Err(E::ExpectedDollar(b'x'))
        );
        assert_eq!(p.parse(b"", &mut spans), Ok(None));
        assert_eq!(
            p.parse(b"*0\r\n", &mut spans),
            Ok(Some((4, RequestKind::Multibulk)))
        );
    }

    #[test]
    fn huge_counts_do_not_preallocate() {
        let mut p = RequestParser::default();
        let mut spans = Vec::new();
        assert_eq!(p.parse(b"*2147483647\r\n", &mut spans), Ok(None));
        assert!(p.saved.capacity() <= SPAN_RESERVE_CAP);
    }

    #[test]
    fn string2ll_matches_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"123"), Some(123));
        assert_eq!(string2ll(b"-123"), Some(-123));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn args_accessors() {
        let data = b"SETkeyval";
        let spans = [(0, 3), (3, 6), (6, 9), (7, 100)];
        let a = Args::new(data, &spans);
        assert_eq!(a.len(), 4);
        assert!(!a.is_empty());
        assert_eq!(a.get(0), Some(&b"SET"[..]));
        assert_eq!(a.get(3), None);
        assert_eq!(a.arg(3), b"");
        assert_eq!(a.arg(99), b"");
        assert_eq!(a.slice(1).arg(0), b"key");
        assert_eq!(a.slice(1).len(), 3);
        assert!(a.slice(4).is_empty());
        assert!(a.slice(50).is_empty());
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![&b"SET"[..], b"key", b"val", b""]
        );
        assert_eq!(a.iter().len(), 4);
        assert_eq!(a.iter().next_back(), Some(&b""[..]));
        assert_eq!(a.into_iter().count(), 4);
        assert_eq!(format!("{:?}", a.slice(2)), "[\"val\", \"\"]");
    }

    #[test]
    fn owned_args_round_trip() {
        let spans = [(0, 3), (3, 3), (3, 8)];
        let src = Args::new(b"GETa b c", &spans);
        let owned = OwnedArgs::from_args(src);
        let back = owned.args();
        assert_eq!(back.len(), 3);
        assert_eq!(back.arg(0), b"GET");
        assert_eq!(back.arg(1), b"");
        assert_eq!(back.arg(2), b"a b c");
        let mut built = OwnedArgs::default();
        built.push(b"SET");
        built.push(b"k");
        assert_eq!(built.args().iter().collect::<Vec<_>>(), [&b"SET"[..], b"k"]);
    }
}
