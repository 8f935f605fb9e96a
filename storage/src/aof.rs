//! The append-only file format, as Redis 7 writes it.
//!
//! - [`Manifest`]: the `<appendfilename>.manifest` file of a multi-part AOF directory, one
//!   line per file (`file appendonly.aof.1.base.rdb seq 1 type b`), parsed with Redis's
//!   rules (`sdssplitargs` quoting, `#` comment lines, one base, increasing incr sequence
//!   numbers, names without a path).
//! - [`CommandReader`]: reads the commands of an incr (or AOF-format base) file, in RESP
//!   multibulk form, with the byte offset of each one, and tells a file that ends in the
//!   middle of a command ([`ReadError::Truncated`], with the offset of the last complete
//!   one) from a malformed one ([`ReadError::Corrupt`], with the offset of the bad line).
//!   Lines starting with `#` are annotations (Redis's `#TS:` and Ember's [`NOW_ANNOTATION`]).
//! - [`encode_command`]: a command as RESP, the way it is appended.
//!
//! # Format version of Ember's extensions
//! What Ember adds to Redis's AOF (the [`NOW_ANNOTATION`] lines, Ember-only commands such
//! as `NEXPIREAT` and `TAG.SET`, Ember-only types in `RESTORE` payloads) has a version,
//! [`FORMAT_VERSION`]. A writer puts the annotation `#ember-fmt:<version>`
//! ([`encode_format`]) before the first thing it appends to a file, including a file it
//! goes on appending to: the version holds for what follows it in that file. Redis skips
//! it like any annotation. A file or part of a file without it (Redis's, or Ember's before
//! the annotation existed) is version 1. [`CommandReader`] refuses a version newer than
//! [`FORMAT_VERSION`] with [`ReadError::NewerFormat`] where it meets the annotation, so an
//! older Ember stops instead of replaying commands it would run differently.

use std::io::{BufRead, Read};

/// Ember's time annotation: `#NOW:<ns since the epoch>` before a command gives the time it
/// ran at, so a replay evaluates expiry (and stream IDs, idle times) exactly as the original
/// run did. Redis skips annotation lines.
pub const NOW_ANNOTATION: &[u8] = b"#NOW:";

/// Ember's format annotation: `#ember-fmt:<version>` gives the version of Ember's
/// extensions used by what follows it in the file (see the module docs).
pub const FORMAT_ANNOTATION: &[u8] = b"#ember-fmt:";

/// The version of Ember's AOF extensions this build writes, and the newest it reads.
/// Files (and parts of files) without a [`FORMAT_ANNOTATION`] are version 1.
pub const FORMAT_VERSION: u16 = 1;

/// Longest annotation line Redis accepts (`AOF_ANNOTATION_LINE_MAX_LEN`).
pub const ANNOTATION_MAX: usize = 1024;

/// What a manifest line describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// The base: an RDB (or AOF-format) image the incr files apply to (`b`).
    Base,
    /// A former base or incr file waiting to be deleted (`h`).
    History,
    /// Commands appended after the base (`i`).
    Incr,
}

impl FileKind {
    fn letter(self) -> char {
        match self {
            FileKind::Base => 'b',
            FileKind::History => 'h',
            FileKind::Incr => 'i',
        }
    }
}

/// One file of a multi-part AOF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AofFile {
    /// File name inside the AOF directory.
    pub name: String,
    /// Sequence number.
    pub seq: u64,
    /// Base, history or incr.
    pub kind: FileKind,
}

/// A parsed manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file, if any.
    pub base: Option<AofFile>,
    /// Files to delete.
    pub history: Vec<AofFile>,
    /// Incr files, in replay order.
    pub incrs: Vec<AofFile>,
}

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg} (manifest line {line})")]
pub struct ManifestError {
    /// 1-based line number (0: the whole file).
    pub line: usize,
    /// Redis's message for the problem.
    pub msg: String,
}

/// `<prefix>.<seq>.base.rdb` (or `.base.aof` without the RDB preamble).
pub fn base_name(prefix: &str, seq: u64, rdb: bool) -> String {
    format!("{prefix}.{seq}.base.{}", if rdb { "rdb" } else { "aof" })
}

/// `<prefix>.<seq>.incr.aof`.
pub fn incr_name(prefix: &str, seq: u64) -> String {
    format!("{prefix}.{seq}.incr.aof")
}

/// `<prefix>.manifest`.
pub fn manifest_name(prefix: &str) -> String {
    format!("{prefix}.manifest")
}

impl Manifest {
    /// Parses manifest text with Redis's rules.
    pub fn parse(text: &[u8]) -> Result<Manifest, ManifestError> {
        let mut m = Manifest::default();
        let mut maxseq = 0u64;
        let mut lines = 0usize;
        for (i, raw) in text.split_inclusive(|&b| b == b'\n').enumerate() {
            let line_no = i + 1;
            lines += 1;
            let err = |msg: &str| ManifestError {
                line: line_no,
                msg: msg.to_string(),
            };
            if raw.first() == Some(&b'#') {
                continue;
            }
            if raw.len() > 1024 {
                return Err(err("The AOF manifest file contains too long line"));
            }
            let line = trim(raw);
            if line.is_empty() {
                return Err(err("Invalid AOF manifest file format"));
            }
            let argv = split_args(line).ok_or_else(|| err("Invalid AOF manifest file format"))?;
            if argv.len() < 6 || argv.len() % 2 != 0 {
                return Err(err("Invalid AOF manifest file format"));
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            for pair in argv.chunks_exact(2) {
                let (k, v) = (&pair[0], &pair[1]);
                if k.eq_ignore_ascii_case(b"file") {
                    if v.contains(&b'/') {
                        return Err(err("File can't be a path, just a filename"));
                    }
                    name = Some(String::from_utf8_lossy(v).into_owned());
                } else if k.eq_ignore_ascii_case(b"seq") {
                    seq = atoll(v);
                } else if k.eq_ignore_ascii_case(b"type") {
                    kind = v.first().copied();
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return Err(err("Invalid AOF manifest file format"));
            };
            if seq == 0 || name.is_empty() {
                return Err(err("Invalid AOF manifest file format"));
            }
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err(err("Found duplicate base file information"));
                    }
                    m.base = Some(AofFile {
                        name,
                        seq,
                        kind: FileKind::Base,
                    });
                }
                b'h' => m.history.push(AofFile {
                    name,
                    seq,
                    kind: FileKind::History,
                }),
                b'i' => {
                    if seq <= maxseq {
                        return Err(err("Found a non-monotonic sequence number"));
                    }
                    maxseq = seq;
                    m.incrs.push(AofFile {
                        name,
                        seq,
                        kind: FileKind::Incr,
                    });
                }
                _ => return Err(err("Unknown AOF file type")),
            }
        }
        if lines == 0 {
            return Err(ManifestError {
                line: 0,
                msg: "Found an empty AOF manifest".into(),
            });
        }
        Ok(m)
    }

    /// The manifest text: base first, then history, then incr files (Redis's order).
    pub fn render(&self) -> String {
        let mut s = String::new();
        for f in self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incrs.iter())
        {
            s.push_str(&format!(
                "file {} seq {} type {}\n",
                repr_if_needed(&f.name),
                f.seq,
                f.kind.letter()
            ));
        }
        s
    }

    /// Sequence number of the last incr file (0 when none).
    pub fn last_incr_seq(&self) -> u64 {
        self.incrs.last().map_or(0, |f| f.seq)
    }

    /// Sequence number of the base (0 when none).
    pub fn base_seq(&self) -> u64 {
        self.base.as_ref().map_or(0, |f| f.seq)
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

/// C `atoll`: leading digits (after an optional sign), 0 when none; negative values give 0.
fn atoll(v: &[u8]) -> u64 {
    let mut n: u64 = 0;
    let digits = v.strip_prefix(b"+").unwrap_or(v);
    if digits.first() == Some(&b'-') {
        return 0;
    }
    for &c in digits {
        if !c.is_ascii_digit() {
            break;
        }
        n = n.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    n
}

/// Redis's `sdssplitargs`: words separated by spaces, `"..."` with `\n \r \t \b \a \\ \"`
/// and `\xHH` escapes, `'...'` with `\'`; a closing quote must end the word. None when
/// quotes are unbalanced.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    let hex = |h: u8| (h as char).to_digit(16).unwrap_or(0) as u8;
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        out.push(cur);
    }
}

/// The name as Redis writes it in a manifest: bare, or quoted (`sdscatrepr`) when it holds
/// spaces, quotes, backslashes or unprintable bytes.
fn repr_if_needed(name: &str) -> String {
    let needs = name
        .bytes()
        .any(|c| !c.is_ascii_graphic() || c == b'"' || c == b'\'' || c == b'\\');
    if !needs {
        return name.to_string();
    }
    let mut s = Vec::with_capacity(name.len() + 2);
    repr(&mut s, name.as_bytes());
    String::from_utf8_lossy(&s).into_owned()
}

/// Appends `a` quoted as Redis's `sdscatrepr` writes it: printable bytes as they are,
/// `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, and `\xNN` for the rest (manifest names,
/// MONITOR lines).
pub fn repr(s: &mut Vec<u8>, a: &[u8]) {
    s.push(b'"');
    for &c in a {
        match c {
            b'\\' => s.extend_from_slice(b"\\\\"),
            b'"' => s.extend_from_slice(b"\\\""),
            b'\n' => s.extend_from_slice(b"\\n"),
            b'\r' => s.extend_from_slice(b"\\r"),
            b'\t' => s.extend_from_slice(b"\\t"),
            7 => s.extend_from_slice(b"\\a"),
            8 => s.extend_from_slice(b"\\b"),
            0x20..=0x7e => s.push(c),
            c => s.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    s.push(b'"');
}

/// Appends `args` as a RESP multibulk command.
pub fn encode_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    let mut b = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(b.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.push(b'$');
        out.extend_from_slice(b.format(a.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends Ember's time annotation for `now_ns`.
pub fn encode_now(out: &mut Vec<u8>, now_ns: u64) {
    out.extend_from_slice(NOW_ANNOTATION);
    out.extend_from_slice(itoa::Buffer::new().format(now_ns).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends Ember's format annotation for [`FORMAT_VERSION`].
pub fn encode_format(out: &mut Vec<u8>) {
    out.extend_from_slice(FORMAT_ANNOTATION);
    out.extend_from_slice(itoa::Buffer::new().format(FORMAT_VERSION).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// One element of an AOF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An annotation line, without the `#` and the line end.
    Annotation(Vec<u8>),
    /// A command's arguments.
    Command(Vec<Vec<u8>>),
}

impl Item {
    /// The time of a [`NOW_ANNOTATION`] line, if this is one.
    pub fn now_ns(&self) -> Option<u64> {
        match self {
            Item::Annotation(a) => {
                let v = a.strip_prefix(&NOW_ANNOTATION[1..])?;
                std::str::from_utf8(v).ok()?.parse().ok()
            }
            Item::Command(_) => None,
        }
    }

    /// The version of a [`FORMAT_ANNOTATION`] line, if this is one: `Some(None)` when the
    /// version is not a number from 1 up.
    pub fn format_version(&self) -> Option<Option<u64>> {
        match self {
            Item::Annotation(a) => {
                let v = a.strip_prefix(&FORMAT_ANNOTATION[1..])?;
                Some(
                    std::str::from_utf8(v)
                        .ok()
                        .filter(|t| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
                        .and_then(|t| t.parse().ok())
                        .filter(|&n| n != 0),
                )
            }
            Item::Command(_) => None,
        }
    }
}

/// Why reading an AOF stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file ends inside a command; `offset` is where that command starts (the end of
    /// the last complete one).
    #[error("unexpected end of file (last complete command ends at offset {offset})")]
    Truncated {
        /// End of the last complete item.
        offset: u64,
    },
    /// A malformed line.
    #[error("bad file format at offset {offset}: {msg}")]
    Corrupt {
        /// Offset of the bad line.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// A format annotation declares a version of Ember's extensions newer than this build
    /// reads (the file was written by a newer Ember).
    #[error("the file uses Ember AOF format version {found} (annotation #ember-fmt at offset {offset}); this build reads Ember AOF format versions 1 to {max}: it was written by a newer Ember")]
    NewerFormat {
        /// Offset of the annotation.
        offset: u64,
        /// The version it declares.
        found: u64,
        /// The newest version this build reads ([`FORMAT_VERSION`]).
        max: u16,
    },
    /// Reading failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the items of an AOF file one at a time, keeping the byte offset.
pub struct CommandReader<R> {
    r: R,
    pos: u64,
    max_bulk: u64,
    line: Vec<u8>,
    /// The format version of what is being read (the last format annotation's, else 1).
    format: u16,
}

/// Most arguments one command may have.
const MAX_ARGS: u64 = i32::MAX as u64;

impl<R: BufRead> CommandReader<R> {
    /// A reader over `r`; arguments longer than `max_bulk` bytes are corruption.
    pub fn new(r: R, max_bulk: u64) -> Self {
        CommandReader {
            r,
            pos: 0,
            max_bulk,
            line: Vec::new(),
            format: 1,
        }
    }

    /// A reader whose offsets start at `pos` (after bytes already consumed from `r`).
    pub fn with_offset(r: R, max_bulk: u64, pos: u64) -> Self {
        let mut me = Self::new(r, max_bulk);
        me.pos = pos;
        me
    }

    /// The offset just past the last complete item.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// The version of Ember's extensions in effect: the last format annotation's, or 1
    /// before any.
    pub fn format(&self) -> u16 {
        self.format
    }

    /// Reads one line (with its `\n`) of at most `max` bytes into `self.line`. Ok(false) at
    /// a clean end of file (nothing read).
    fn read_line(&mut self, max: usize) -> Result<LineEnd, ReadError> {
        self.line.clear();
        let n = (&mut self.r)
            .take(max as u64 + 1)
            .read_until(b'\n', &mut self.line)?;
        if n == 0 {
            return Ok(LineEnd::Eof);
        }
        if self.line.last() != Some(&b'\n') {
            if n > max {
                return Ok(LineEnd::TooLong);
            }
            return Ok(LineEnd::Partial);
        }
        Ok(LineEnd::Line)
    }

    /// The next item; `Ok(None)` at a clean end of file.
    pub fn next_item(&mut self) -> Result<Option<Item>, ReadError> {
        let start = self.pos;
        let truncated = ReadError::Truncated { offset: start };
        match self.read_line(ANNOTATION_MAX)? {
            LineEnd::Eof => return Ok(None),
            LineEnd::Partial => return Err(truncated),
            LineEnd::TooLong => {
                return Err(ReadError::Corrupt {
                    offset: start,
                    msg: "line too long".into(),
                })
            }
            LineEnd::Line => {}
        }
        let mut cur = start + self.line.len() as u64;
        if self.line[0] == b'#' {
            let item = Item::Annotation(strip_eol(&self.line[1..]).to_vec());
            if let Some(version) = item.format_version() {
                let Some(found) = version else {
                    return Err(ReadError::Corrupt {
                        offset: start,
                        msg: format!("bad format annotation {}", show(&self.line)),
                    });
                };
                match u16::try_from(found) {
                    Ok(v) if v <= FORMAT_VERSION => self.format = v,
                    _ => {
                        return Err(ReadError::NewerFormat {
                            offset: start,
                            found,
                            max: FORMAT_VERSION,
                        })
                    }
                }
            }
            self.pos = cur;
            return Ok(Some(item));
        }
        let argc = match header(&self.line, b'*') {
            Some(n) if (1..=MAX_ARGS).contains(&n) => n,
            _ => {
                return Err(ReadError::Corrupt {
                    offset: start,
                    msg: format!("expected '*<count>', got {}", show(&self.line)),
                })
            }
        };
        let mut args = Vec::with_capacity(argc.min(1024) as usize);
        for _ in 0..argc {
            let at = cur;
            match self.read_line(64)? {
                LineEnd::Eof | LineEnd::Partial => return Err(truncated),
                LineEnd::TooLong => {
                    return Err(ReadError::Corrupt {
                        offset: at,
                        msg: "argument length line too long".into(),
                    })
                }
                LineEnd::Line => {}
            }
            cur += self.line.len() as u64;
            let len = match header(&self.line, b'$') {
                Some(n) if n <= self.max_bulk => n,
                _ => {
                    return Err(ReadError::Corrupt {
                        offset: at,
                        msg: format!("expected '$<length>', got {}", show(&self.line)),
                    })
                }
            };
            let mut arg = Vec::new();
            let got = (&mut self.r).take(len).read_to_end(&mut arg)?;
            if (got as u64) < len {
                return Err(truncated);
            }
            cur += len;
            let mut crlf = [0u8; 2];
            let mut have = 0;
            while have < 2 {
                let k = self.r.read(&mut crlf[have..])?;
                if k == 0 {
                    return Err(truncated);
                }
                have += k;
            }
            if &crlf != b"\r\n" {
                return Err(ReadError::Corrupt {
                    offset: cur,
                    msg: "argument not followed by CRLF".into(),
                });
            }
            cur += 2;
            args.push(arg);
        }
        self.pos = cur;
        Ok(Some(Item::Command(args)))
    }
}

enum LineEnd {
    Eof,
    Partial,
    TooLong,
    Line,
}

fn strip_eol(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// `<prefix><digits>\r\n` → the number.
fn header(line: &[u8], prefix: u8) -> Option<u64> {
    let body = line.strip_prefix(&[prefix])?.strip_suffix(b"\r\n")?;
    if body.is_empty() || body.len() > 19 || !body.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(body).ok()?.parse().ok()
}

fn show(line: &[u8]) -> String {
    let l = &line[..line.len().min(32)];
    format!("{:?}", String::from_utf8_lossy(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(b: &[u8]) -> (Vec<Item>, Option<ReadError>, u64) {
        let mut r = CommandReader::new(b, 1 << 20);
        let mut v = Vec::new();
        loop {
            match r.next_item() {
                Ok(Some(i)) => v.push(i),
                Ok(None) => return (v, None, r.offset()),
                Err(e) => return (v, Some(e), r.offset()),
            }
        }
    }

    #[test]
    fn manifest_round_trip_and_redis_rules() {
        let text = b"file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.3.incr.aof seq 3 type i\nfile appendonly.aof.4.incr.aof seq 4 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.base.as_ref().unwrap().name, "appendonly.aof.2.base.rdb");
        assert_eq!(m.history.len(), 1);
        assert_eq!(m.incrs.len(), 2);
        assert_eq!(m.last_incr_seq(), 4);
        assert_eq!(m.render().as_bytes(), &text[..]);
        // Comments skipped, keys in any order and case, last line without newline.
        let m2 = Manifest::parse(b"# hi\nTYPE b SEQ 1 FILE x.rdb").unwrap();
        assert_eq!(m2.base.unwrap().name, "x.rdb");
        for (bad, msg) in [
            (&b""[..], "empty"),
            (
                b"file a seq 1 type b\nfile b seq 2 type b\n",
                "duplicate base",
            ),
            (
                b"file a seq 2 type i\nfile b seq 2 type i\n",
                "non-monotonic",
            ),
            (b"file a/b seq 1 type i\n", "path"),
            (b"file a seq 1 type z\n", "Unknown"),
            (b"file a seq 1\n", "Invalid"),
            (b"file a seq 0 type i\n", "Invalid"),
            (b"\n", "Invalid"),
            (b"file \"a seq 1 type i\n", "Invalid"),
        ] {
            let e = Manifest::parse(bad).unwrap_err();
            assert!(
                e.msg.contains(msg),
                "{:?}: {e}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn manifest_quotes_odd_names() {
        let m = Manifest {
            base: None,
            history: vec![],
            incrs: vec![AofFile {
                name: "my file\".1.incr.aof".into(),
                seq: 1,
                kind: FileKind::Incr,
            }],
        };
        let text = m.render();
        assert_eq!(text, "file \"my file\\\".1.incr.aof\" seq 1 type i\n");
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m);
        assert_eq!(
            split_args(b"a 'b c' \"\\x41\\n\"").unwrap(),
            vec![b"a".to_vec(), b"b c".to_vec(), b"A\n".to_vec()]
        );
        assert!(split_args(b"\"a\"b").is_none());
    }

    #[test]
    fn commands_annotations_and_offsets() {
        let mut f = Vec::new();
        encode_now(&mut f, 42);
        encode_command(&mut f, &[&b"SET"[..], b"k", b"v\r\nx"]);
        let first_end = f.len() as u64;
        encode_command(&mut f, &["DEL", "k"]);
        let (items, err, off) = read_all(&f);
        assert!(err.is_none());
        assert_eq!(off, f.len() as u64);
        assert_eq!(items[0].now_ns(), Some(42));
        assert_eq!(
            items[1],
            Item::Command(vec![b"SET".to_vec(), b"k".to_vec(), b"v\r\nx".to_vec()])
        );
        // Every cut inside the last command is a truncation at the end of the first.
        for cut in first_end as usize + 1..f.len() {
            let (items, err, _) = read_all(&f[..cut]);
            assert_eq!(items.len(), 2, "cut {cut}");
            match err {
                Some(ReadError::Truncated { offset }) => assert_eq!(offset, first_end),
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn corruption_names_the_offset() {
        let mut f = Vec::new();
        encode_command(&mut f, &["SET", "a", "1"]);
        let at = f.len() as u64;
        f.extend_from_slice(b"garbage\r\n");
        encode_command(&mut f, &["SET", "b", "2"]);
        let (items, err, _) = read_all(&f);
        assert_eq!(items.len(), 1);
        match err {
            Some(ReadError::Corrupt { offset, .. }) => assert_eq!(offset, at),
            other => panic!("{other:?}"),
        }
        // A bad CRLF after an argument.
        let (_, err, _) = read_all(b"*1\r\n$1\r\nAxx");
        assert!(matches!(err, Some(ReadError::Corrupt { .. })));
        // Oversized argument.
        let (_, err, _) = read_all(b"*1\r\n$99999999999\r\n");
        assert!(matches!(err, Some(ReadError::Corrupt { .. })));
        let (_, err, _) = read_all(b"*0\r\n");
        assert!(matches!(err, Some(ReadError::Corrupt { .. })));
    }

    #[test]
    fn format_version_1_round_trip() {
        let mut f = Vec::new();
        encode_format(&mut f);
        assert_eq!(f, b"#ember-fmt:1\r\n");
        encode_now(&mut f, 7);
        encode_command(&mut f, &["NEXPIREAT", "k", "123"]);
        let mut r = CommandReader::new(&f[..], 1 << 20);
        let first = r.next_item().unwrap().unwrap();
        assert_eq!(first.format_version(), Some(Some(1)));
        assert_eq!(r.format(), 1);
        let (items, err, off) = read_all(&f);
        assert!(err.is_none());
        assert_eq!((items.len(), off), (3, f.len() as u64));
    }

    #[test]
    fn format_legacy_file_without_annotation_reads_as_version_1() {
        let mut f = Vec::new();
        encode_now(&mut f, 7);
        encode_command(&mut f, &["SET", "k", "v"]);
        let mut r = CommandReader::new(&f[..], 1 << 20);
        while r.next_item().unwrap().is_some() {}
        assert_eq!(r.format(), 1);
    }

    #[test]
    fn format_version_2_is_refused_with_a_clear_error() {
        let mut f = Vec::new();
        encode_command(&mut f, &["SET", "a", "1"]);
        let at = f.len() as u64;
        f.extend_from_slice(b"#ember-fmt:2\r\n");
        encode_command(&mut f, &["SET", "b", "2"]);
        let (items, err, off) = read_all(&f);
        assert_eq!((items.len(), off), (1, at));
        let e = err.unwrap();
        assert!(
            matches!(e, ReadError::NewerFormat { offset, found: 2, max: 1 } if offset == at),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("the file uses Ember AOF format version 2 (annotation #ember-fmt at offset {at}); this build reads Ember AOF format versions 1 to 1: it was written by a newer Ember")
        );
        // Not a version: corruption at the annotation.
        for bad in [
            &b"#ember-fmt:\r\n"[..],
            b"#ember-fmt:0\r\n",
            b"#ember-fmt:x\r\n",
        ] {
            let (_, err, _) = read_all(bad);
            assert!(
                matches!(err, Some(ReadError::Corrupt { offset: 0, .. })),
                "{err:?}"
            );
        }
        // Other annotations are still just annotations.
        let (items, err, _) = read_all(b"#ember-fmtx\r\n#TS:1\r\n");
        assert!(err.is_none());
        assert_eq!(items.len(), 2);
    }
}
