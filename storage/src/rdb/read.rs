//! Decoding: whole files ([`load`]) and DUMP payloads ([`restore_payload`]).
//!
//! Nothing read is trusted: lengths never pre-allocate more than the data actually holds,
//! packed encodings are validated before use, and every failure names its byte offset.

use std::io::{self, Read};

use crc::{Digest, Table};

use super::packed::{self, Elem};
use super::{
    lzf, op, ty, KeyExt, RdbError, CRC64, EXT_AUX, EXT_LAYOUT, FORMAT_AUX, FORMAT_VERSION,
    MAX_READ_VERSION,
};
use crate::hash::Hash;
use crate::list::List;
use crate::set::Set;
use crate::stream::{Consumer, ConsumerGroup, PendingEntry, Stream, StreamId};
use crate::value::{RString, Value};
use crate::zset::ZSet;

type Result<T> = std::result::Result<T, RdbError>;

/// One thing read from a file.
#[derive(Debug)]
pub enum Loaded {
    /// A key.
    Key {
        /// Database number.
        db: usize,
        /// The key.
        key: Vec<u8>,
        /// Its value.
        value: Value,
        /// Absolute deadline in ns since the epoch, 0 for none.
        expire_at_ns: u64,
        /// Ember-only tags.
        tags: Vec<Vec<u8>>,
    },
    /// A function library's source code.
    Function(Vec<u8>),
}

/// What a file held.
#[derive(Debug, Default, Clone)]
pub struct LoadStats {
    /// RDB version of the file.
    pub version: u16,
    /// Version of Ember's extensions the file declares (`ember-fmt`; 1 when it has none).
    pub ember_format: u16,
    /// Keys read.
    pub keys: u64,
    /// AUX fields (name, value), Ember's own excluded.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// Bytes read.
    pub bytes: u64,
}

/// A byte source that counts its offset and checksums what it reads.
struct Src<R> {
    r: R,
    pos: u64,
    digest: Digest<'static, u64, Table<16>>,
}

impl<R: Read> Src<R> {
    fn corrupt<T>(&self, msg: impl Into<String>) -> Result<T> {
        Err(RdbError::Corrupt {
            offset: self.pos,
            msg: msg.into(),
        })
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        match self.r.read_exact(buf) {
            Ok(()) => {
                self.digest.update(buf);
                self.pos += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(RdbError::Truncated(self.pos))
            }
            Err(e) => Err(RdbError::Io {
                offset: self.pos,
                source: e,
            }),
        }
    }

    fn byte(&mut self) -> Result<u8> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// `n` bytes, allocated as they arrive (a bogus huge length fails on EOF, not OOM).
    fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        const CHUNK: u64 = 1 << 20;
        let mut v = Vec::with_capacity(n.min(CHUNK) as usize);
        let mut left = n;
        while left > 0 {
            let take = left.min(CHUNK) as usize;
            let at = v.len();
            v.resize(at + take, 0);
            self.fill(&mut v[at..])?;
            left -= take as u64;
        }
        Ok(v)
    }

    /// A length; `Ok((n, true))` for the special string encodings (n = the kind).
    fn len_enc(&mut self) -> Result<(u64, bool)> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => (u64::from(b & 0x3F), false),
            1 => (u64::from(b & 0x3F) << 8 | u64::from(self.byte()?), false),
            2 => match b {
                0x80 => (u64::from(u32::from_be_bytes(self.array()?)), false),
                0x81 => (u64::from_be_bytes(self.array()?), false),
                _ => return self.corrupt(format!("unknown length encoding {b:#x}")),
            },
            _ => (u64::from(b & 0x3F), true),
        })
    }

    fn len(&mut self) -> Result<u64> {
        match self.len_enc()? {
            (n, false) => Ok(n),
            _ => self.corrupt("string encoding where a length was expected"),
        }
    }

    /// A length used as a count of things to read.
    fn count(&mut self) -> Result<usize> {
        let n = self.len()?;
        usize::try_from(n).or_else(|_| self.corrupt("count too large"))
    }

    fn string(&mut self) -> Result<Vec<u8>> {
        let (n, special) = self.len_enc()?;
        if !special {
            return self.bytes(n);
        }
        match n {
            0 => Ok((self.byte()? as i8).to_string().into_bytes()),
            1 => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            2 => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            3 => {
                let clen = self.len()?;
                let len = self.len()?;
                if len > 1 << 32 {
                    return self.corrupt("LZF string too long");
                }
                let c = self.bytes(clen)?;
                match lzf::decompress(&c, len as usize) {
                    Some(v) => Ok(v),
                    None => self.corrupt("bad LZF data"),
                }
            }
            _ => self.corrupt(format!("unknown string encoding {n}")),
        }
    }

    fn ms(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn id(&mut self) -> Result<StreamId> {
        let b: [u8; 16] = self.array()?;
        Ok(id_from(&b))
    }

    /// A score in the old text form (`RDB_TYPE_ZSET`).
    fn text_double(&mut self) -> Result<f64> {
        let n = self.byte()?;
        match n {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            _ => {
                let b = self.bytes(u64::from(n))?;
                match std::str::from_utf8(&b).ok().and_then(|s| s.parse().ok()) {
                    Some(v) => Ok(v),
                    None => self.corrupt("bad score"),
                }
            }
        }
    }
}

fn id_from(b: &[u8; 16]) -> StreamId {
    let mut ms = [0u8; 8];
    let mut seq = [0u8; 8];
    ms.copy_from_slice(&b[..8]);
    seq.copy_from_slice(&b[8..]);
    StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq))
}

fn elems_to_list(e: &[Elem<'_>], list: &mut List) {
    for x in e {
        match x {
            Elem::Str(s) => list.push_back(s),
            Elem::Int(i) => list.push_back(i.to_string().as_bytes()),
        }
    }
}

fn set_from(members: impl IntoIterator<Item = Vec<u8>>, hint: usize) -> Option<Set> {
    let mut it = members.into_iter();
    let first = it.next()?;
    let mut s = Set::for_member(&first, hint);
    s.reserve_hint(hint);
    s.insert(&first);
    for m in it {
        s.insert(&m);
    }
    Some(s)
}

/// Reads one value of type `t`; `Ok(None)` for an empty collection (skipped, as Redis does).
fn read_value<R: Read>(src: &mut Src<R>, t: u8) -> Result<Option<Value>> {
    let v = match t {
        ty::STRING => Value::String(RString::from_vec(src.string()?)),
        ty::LIST => {
            let n = src.count()?;
            let mut l = List::new();
            for _ in 0..n {
                l.push_back(&src.string()?);
            }
            Value::List(Box::new(l))
        }
        ty::SET => {
            let n = src.count()?;
            let mut v = Vec::with_capacity(n.min(1 << 16));
            for _ in 0..n {
                v.push(src.string()?);
            }
            match set_from(v, n) {
                Some(s) => Value::Set(Box::new(s)),
                None => return Ok(None),
            }
        }
        ty::ZSET | ty::ZSET_2 => {
            let n = src.count()?;
            let mut z = ZSet::new();
            for _ in 0..n {
                let m = src.string()?;
                let score = if t == ty::ZSET_2 {
                    f64::from_le_bytes(src.array()?)
                } else {
                    src.text_double()?
                };
                if score.is_nan() {
                    return src.corrupt("NaN score");
                }
                z.add(&m, score);
            }
            Value::ZSet(Box::new(z))
        }
        ty::HASH => {
            let n = src.count()?;
            let mut h = Hash::new();
            for _ in 0..n {
                let f = src.string()?;
                let v = src.string()?;
                h.insert(&f, &v);
            }
            Value::Hash(Box::new(h))
        }
        ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2 => {
            let n = src.count()?;
            let mut l = List::new();
            for _ in 0..n {
                let container = if t == ty::LIST_QUICKLIST_2 {
                    src.len()?
                } else {
                    2
                };
                let blob = src.string()?;
                match container {
                    1 => l.push_back(&blob),
                    2 => {
                        let e = if t == ty::LIST_QUICKLIST {
                            packed::ziplist(&blob)
                        } else {
                            packed::listpack(&blob)
                        };
                        match e {
                            Some(e) => elems_to_list(&e, &mut l),
                            None => return src.corrupt("bad quicklist node"),
                        }
                    }
                    _ => return src.corrupt("unknown quicklist container"),
                }
            }
            Value::List(Box::new(l))
        }
        ty::LIST_ZIPLIST => {
            let blob = src.string()?;
            let Some(e) = packed::ziplist(&blob) else {
                return src.corrupt("bad ziplist");
            };
            let mut l = List::new();
            elems_to_list(&e, &mut l);
            Value::List(Box::new(l))
        }
        ty::SET_INTSET => {
            let blob = src.string()?;
            let Some(ints) = packed::intset(&blob) else {
                return src.corrupt("bad intset");
            };
            let n = ints.len();
            match set_from(ints.into_iter().map(|i| i.to_string().into_bytes()), n) {
                Some(s) => Value::Set(Box::new(s)),
                None => return Ok(None),
            }
        }
        ty::SET_LISTPACK => {
            let blob = src.string()?;
            let Some(e) = packed::listpack(&blob) else {
                return src.corrupt("bad set listpack");
            };
            let n = e.len();
            match set_from(e.into_iter().map(Elem::to_vec), n) {
                Some(s) => Value::Set(Box::new(s)),
                None => return Ok(None),
            }
        }
        ty::ZSET_ZIPLIST | ty::ZSET_LISTPACK | ty::HASH_ZIPLIST | ty::HASH_LISTPACK => {
            let blob = src.string()?;
            let e = if t == ty::ZSET_ZIPLIST || t == ty::HASH_ZIPLIST {
                packed::ziplist(&blob)
            } else {
                packed::listpack(&blob)
            };
            let Some(e) = e.filter(|e| e.len() % 2 == 0) else {
                return src.corrupt("bad packed pairs");
            };
            if t == ty::ZSET_ZIPLIST || t == ty::ZSET_LISTPACK {
                let mut z = ZSet::new();
                for p in e.chunks_exact(2) {
                    let score = match p[1] {
                        Elem::Int(i) => i as f64,
                        Elem::Str(s) => match std::str::from_utf8(s)
                            .ok()
                            .and_then(|s| s.parse::<f64>().ok())
                        {
                            Some(f) if !f.is_nan() => f,
                            _ => return src.corrupt("bad score"),
                        },
                    };
                    z.add(&p[0].to_vec(), score);
                }
                Value::ZSet(Box::new(z))
            } else {
                let mut h = Hash::new();
                for p in e.chunks_exact(2) {
                    h.insert(&p[0].to_vec(), &p[1].to_vec());
                }
                Value::Hash(Box::new(h))
            }
        }
        ty::STREAM_LISTPACKS | ty::STREAM_LISTPACKS_2 | ty::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(read_stream(src, t)?))
        }
        ty::EMBER_VECTOR_SET => {
            let b = src.string()?;
            match vector::VectorIndex::from_bytes(&b) {
                Ok(i) => Value::VectorSet(crate::vset::VectorSet::new(i)),
                Err(e) => return src.corrupt(e.to_string()),
            }
        }
        ty::HASH_ZIPMAP => return src.corrupt("zipmap hashes (Redis < 2.6) are not supported"),
        ty::MODULE_PRE_GA | ty::MODULE_2 => return src.corrupt("module values are not supported"),
        _ => return src.corrupt(format!("unknown value type {t}")),
    };
    let empty = match &v {
        Value::String(_) | Value::Stream(_) => false,
        Value::VectorSet(v) => v.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
    };
    Ok((!empty).then_some(v))
}

fn read_stream<R: Read>(src: &mut Src<R>, t: u8) -> Result<Stream> {
    let mut s = Stream::default();
    let nodes = src.count()?;
    let mut last_added: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = src.string()?;
        let Ok(key) = <[u8; 16]>::try_from(&key[..]) else {
            return src.corrupt("stream node key is not 16 bytes");
        };
        let master_id = id_from(&key);
        let blob = src.string()?;
        let Some(e) = packed::listpack(&blob) else {
            return src.corrupt("bad stream listpack");
        };
        if e.is_empty() {
            return src.corrupt("empty stream listpack");
        }
        if decode_node(master_id, &e, &mut s, &mut last_added).is_none() {
            return src.corrupt("bad stream node");
        }
    }
    let _len = src.len()?;
    s.last_id = StreamId::new(src.len()?, src.len()?);
    if t >= ty::STREAM_LISTPACKS_2 {
        let _first = StreamId::new(src.len()?, src.len()?);
        s.max_deleted_id = StreamId::new(src.len()?, src.len()?);
        s.entries_added = src.len()?;
    } else {
        s.entries_added = s.len() as u64;
    }
    if last_added.is_some_and(|l| l > s.last_id) {
        return src.corrupt("stream entry after the stream's last id");
    }
    let groups = src.count()?;
    for _ in 0..groups {
        let name = src.string()?;
        let last = StreamId::new(src.len()?, src.len()?);
        let entries_read = if t >= ty::STREAM_LISTPACKS_2 {
            src.len()? as i64
        } else {
            crate::stream::INVALID_ENTRIES_READ
        };
        let mut g = ConsumerGroup::new(last, entries_read);
        let pel = src.count()?;
        for _ in 0..pel {
            let id = src.id()?;
            let delivery_time = src.ms()?;
            let delivery_count = src.len()?;
            g.pel.insert(
                id,
                PendingEntry {
                    consumer: Vec::new(),
                    delivery_time,
                    delivery_count,
                },
            );
        }
        let consumers = src.count()?;
        for _ in 0..consumers {
            let cname = src.string()?;
            let seen = src.ms()?;
            let active = if t >= ty::STREAM_LISTPACKS_3 {
                src.ms()? as i64
            } else {
                seen as i64
            };
            let mut c = Consumer::new(seen);
            c.active_time = active;
            let n = src.count()?;
            for _ in 0..n {
                let id = src.id()?;
                match g.pel.get_mut(&id) {
                    Some(p) if p.consumer.is_empty() => p.consumer = cname.clone(),
                    _ => return src.corrupt("consumer PEL entry not in the group PEL"),
                }
                c.pel.insert(id);
            }
            g.consumers.insert(cname, c);
        }
        if g.pel.values().any(|p| p.consumer.is_empty()) {
            return src.corrupt("group PEL entry without a consumer");
        }
        if s.groups.insert(name, g).is_some() {
            return src.corrupt("duplicate consumer group");
        }
    }
    Ok(s)
}

/// Appends the live entries of one stream listpack node to `s`.
fn decode_node(
    master: StreamId,
    e: &[Elem<'_>],
    s: &mut Stream,
    last: &mut Option<StreamId>,
) -> Option<()> {
    let int = |i: usize| e.get(i).and_then(|x| x.as_int());
    let count = int(0)?;
    let deleted = int(1)?;
    let nmaster = usize::try_from(int(2)?).ok()?;
    let fields: Vec<Vec<u8>> = e.get(3..3 + nmaster)?.iter().map(|x| x.to_vec()).collect();
    let mut p = 3 + nmaster;
    if int(p)? != 0 {
        return None;
    }
    p += 1;
    let (mut live, mut dead) = (0i64, 0i64);
    while p < e.len() {
        let flags = int(p)?;
        let ms = master.ms.wrapping_add(int(p + 1)? as u64);
        let seq = master.seq.wrapping_add(int(p + 2)? as u64);
        let id = StreamId::new(ms, seq);
        p += 3;
        let mut items: Vec<Vec<u8>> = Vec::new();
        if flags & 2 != 0 {
            for (i, f) in fields.iter().enumerate() {
                items.push(f.clone());
                items.push(e.get(p + i)?.to_vec());
            }
            p += fields.len();
        } else {
            let n = usize::try_from(int(p)?).ok()?;
            p += 1;
            for i in 0..2 * n {
                items.push(e.get(p + i)?.to_vec());
            }
            p += 2 * n;
        }
        p += 1; // lp-count
        if p > e.len() {
            return None;
        }
        if flags & 1 != 0 {
            dead += 1;
            continue;
        }
        live += 1;
        if last.is_some_and(|l| id <= l) || items.is_empty() {
            return None;
        }
        *last = Some(id);
        let refs: Vec<&[u8]> = items.iter().map(|v| &v[..]).collect();
        s.append(id, &refs);
    }
    (live == count && dead == deleted).then_some(())
}

/// Reads an RDB file from `r`, calling `f` with each key and function library in file
/// order. A checksum of 0 in the file means "not computed" (`rdbchecksum no`), as in Redis.
pub fn load<R: Read>(r: R, mut f: impl FnMut(Loaded) -> Result<()>) -> Result<LoadStats> {
    let mut src = Src {
        r,
        pos: 0,
        digest: CRC64.digest(),
    };
    let magic: [u8; 9] = src.array()?;
    if &magic[..5] != b"REDIS" {
        return Err(RdbError::Corrupt {
            offset: 0,
            msg: "wrong signature trying to load DB from file".into(),
        });
    }
    let version = std::str::from_utf8(&magic[5..])
        .ok()
        .and_then(|v| v.parse::<u16>().ok())
        .filter(|v| (1..=MAX_READ_VERSION).contains(v));
    let Some(version) = version else {
        return Err(RdbError::Corrupt {
            offset: 5,
            msg: "can't handle this RDB format version".into(),
        });
    };
    let mut stats = LoadStats {
        version,
        ember_format: 1,
        ..LoadStats::default()
    };
    let mut db = 0usize;
    let mut expire_ns = 0u64;
    let mut ext = KeyExt::default();
    loop {
        let t = src.byte()?;
        match t {
            op::EXPIRETIME_MS => expire_ns = src.ms()?.saturating_mul(1_000_000),
            op::EXPIRETIME => {
                expire_ns =
                    u64::from(u32::from_le_bytes(src.array()?)).saturating_mul(1_000_000_000)
            }
            op::FREQ => {
                src.byte()?;
            }
            op::IDLE => {
                src.len()?;
            }
            op::EOF => break,
            op::SELECTDB => {
                db = src.count()?;
            }
            op::RESIZEDB => {
                src.len()?;
                src.len()?;
            }
            op::AUX => {
                let k = src.string()?;
                let v = src.string()?;
                if k == EXT_AUX {
                    ext = match parse_ext(&v) {
                        Ok(e) => e,
                        Err(why) => return src.corrupt(why),
                    };
                } else if k == FORMAT_AUX {
                    stats.ember_format = check_format(&v).or_else(|e| match e {
                        Some(e) => Err(e),
                        None => src.corrupt(format!(
                            "bad ember-fmt field {:?}",
                            String::from_utf8_lossy(&v)
                        )),
                    })?;
                } else {
                    stats.aux.push((k, v));
                }
            }
            op::MODULE_AUX => return src.corrupt("module data is not supported"),
            op::FUNCTION_PRE_GA => return src.corrupt("pre-GA function format is not supported"),
            op::FUNCTION2 => {
                let code = src.string()?;
                f(Loaded::Function(code))?;
            }
            _ => {
                let key = src.string()?;
                let value = read_value(&mut src, t)?;
                let e = std::mem::take(&mut ext);
                if let Some(value) = value {
                    let at = if expire_ns != 0 {
                        expire_ns + u64::from(e.sub_ms_ns)
                    } else {
                        0
                    };
                    stats.keys += 1;
                    f(Loaded::Key {
                        db,
                        key,
                        value,
                        expire_at_ns: at,
                        tags: e.tags,
                    })?;
                }
                expire_ns = 0;
            }
        }
    }
    if version >= 5 {
        let actual = src.digest.clone().finalize();
        let expected = u64::from_le_bytes(src.array()?);
        if expected != 0 && expected != actual {
            return Err(RdbError::Checksum { expected, actual });
        }
    }
    stats.bytes = src.pos;
    Ok(stats)
}

/// The version in an `ember-fmt` field: `Err(Some(_))` for a version newer than this build
/// reads, `Err(None)` for a value that is not a version (not decimal, or 0).
fn check_format(v: &[u8]) -> std::result::Result<u16, Option<RdbError>> {
    let found: u64 = std::str::from_utf8(v)
        .ok()
        .filter(|t| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|t| t.parse().ok())
        .filter(|&n| n != 0)
        .ok_or(None)?;
    match u16::try_from(found) {
        Ok(n) if n <= FORMAT_VERSION => Ok(n),
        _ => Err(Some(RdbError::NewerFormat {
            found,
            max: FORMAT_VERSION,
        })),
    }
}

/// Decodes an `ember-ext` payload; the error says what is wrong.
fn parse_ext(v: &[u8]) -> std::result::Result<KeyExt, String> {
    let mut src = Src {
        r: v,
        pos: 0,
        digest: CRC64.digest(),
    };
    let bad = || "bad ember-ext field".to_string();
    let layout = src.byte().map_err(|_| bad())?;
    if layout != EXT_LAYOUT {
        return Err(format!(
            "ember-ext field of layout {layout}; this build reads layout {EXT_LAYOUT} (written by a newer Ember?)"
        ));
    }
    let sub = src.len().map_err(|_| bad())?;
    if sub >= 1_000_000 {
        return Err(bad());
    }
    let n = src.count().map_err(|_| bad())?;
    let mut tags = Vec::new();
    for _ in 0..n {
        let l = src.len().map_err(|_| bad())?;
        tags.push(src.bytes(l).map_err(|_| bad())?);
    }
    Ok(KeyExt {
        sub_ms_ns: sub as u32,
        tags,
    })
}

/// Why a DUMP payload was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Version too new or checksum wrong (`ERR DUMP payload version or checksum are wrong`).
    VersionOrChecksum,
    /// The body is malformed (`ERR Bad data format`).
    BadData,
}

/// The body of a DUMP-style payload (`body, version u16 LE, CRC64 LE`) once its version
/// and checksum are checked; `None` when either is wrong or the payload is too short.
fn payload_body(p: &[u8]) -> Option<Src<&[u8]>> {
    let body_len = p.len().checked_sub(10)?;
    let version = u16::from_le_bytes([p[body_len], p[body_len + 1]]);
    let crc = u64::from_le_bytes(p[body_len + 2..].try_into().ok()?);
    if version > MAX_READ_VERSION || CRC64.checksum(&p[..body_len + 2]) != crc {
        return None;
    }
    Some(Src {
        r: &p[..body_len],
        pos: 0,
        digest: CRC64.digest(),
    })
}

/// Decodes a DUMP payload (checksum and version checked first); `Ok(None)` for an empty
/// collection.
pub fn restore_payload(p: &[u8]) -> std::result::Result<Option<Value>, PayloadError> {
    let mut src = payload_body(p).ok_or(PayloadError::VersionOrChecksum)?;
    let t = src.byte().map_err(|_| PayloadError::BadData)?;
    let v = read_value(&mut src, t).map_err(|_| PayloadError::BadData)?;
    if src.r.is_empty() {
        Ok(v)
    } else {
        Err(PayloadError::BadData)
    }
}

/// Why a FUNCTION RESTORE payload was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum FunctionPayloadError {
    /// Version too new or checksum wrong.
    VersionOrChecksum,
    /// A record is not a function library.
    NotAFunction,
    /// The payload is malformed.
    BadData,
}

/// The library sources in a FUNCTION DUMP payload.
pub fn functions_from_payload(p: &[u8]) -> std::result::Result<Vec<Vec<u8>>, FunctionPayloadError> {
    let mut src = payload_body(p).ok_or(FunctionPayloadError::VersionOrChecksum)?;
    let mut out = Vec::new();
    while !src.r.is_empty() {
        let t = src.byte().map_err(|_| FunctionPayloadError::BadData)?;
        if t != op::FUNCTION2 {
            return Err(FunctionPayloadError::NotAFunction);
        }
        out.push(src.string().map_err(|_| FunctionPayloadError::BadData)?);
    }
    Ok(out)
}
