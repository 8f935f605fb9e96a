//! Encoding: lengths, strings, values and keys in RDB form; DUMP payloads; whole files.

use std::io::{self, Write};

use crc::{Digest, Table};

use super::packed::ListpackWriter;
use super::{
    lzf, op, ty, KeyExt, CRC64, EXT_AUX, EXT_LAYOUT, FORMAT_AUX, FORMAT_VERSION, RDB_VERSION,
};
use crate::stream::{Stream, StreamId};
use crate::value::{parse_canonical_i64, Value};

/// Largest listpack node of a list (Redis's default `list-max-listpack-size -2`: 8 KB).
const LIST_NODE_BYTES: usize = 8192;
/// Quicklist node container: packed (a listpack).
const QUICKLIST_PACKED: u64 = 2;

/// Appends an RDB length.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a string: integer-encoded when it is the canonical text of a 32-bit integer,
/// LZF-compressed when `compress` and longer than 20 bytes and it shrinks (as Redis's
/// `rdbSaveRawString`), plain otherwise.
pub fn put_str(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = parse_canonical_i64(s) {
            if let Ok(b) = i8::try_from(v) {
                out.push(0xC0);
                out.push(b as u8);
                return;
            } else if let Ok(h) = i16::try_from(v) {
                out.push(0xC1);
                out.extend_from_slice(&h.to_le_bytes());
                return;
            } else if let Ok(w) = i32::try_from(v) {
                out.push(0xC2);
                out.extend_from_slice(&w.to_le_bytes());
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(c) = lzf::compress(s) {
            if c.len() + 4 <= s.len() {
                out.push(0xC3);
                put_len(out, c.len() as u64);
                put_len(out, s.len() as u64);
                out.extend_from_slice(&c);
                return;
            }
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Appends a millisecond time (8 bytes, little-endian).
pub fn put_ms(out: &mut Vec<u8>, ms: u64) {
    out.extend_from_slice(&ms.to_le_bytes());
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    out.extend_from_slice(&id.ms.to_be_bytes());
    out.extend_from_slice(&id.seq.to_be_bytes());
}

/// The type byte Ember writes for `v`.
pub fn value_type(v: &Value) -> u8 {
    match v {
        Value::String(_) => ty::STRING,
        Value::List(_) => ty::LIST_QUICKLIST_2,
        Value::Set(_) => ty::SET,
        Value::Hash(_) => ty::HASH,
        Value::ZSet(_) => ty::ZSET_2,
        Value::Stream(_) => ty::STREAM_LISTPACKS_2,
        Value::VectorSet(_) => ty::EMBER_VECTOR_SET,
    }
}

/// Appends the body of `v` (after its type byte).
pub fn put_value(out: &mut Vec<u8>, v: &Value, compress: bool) {
    match v {
        Value::String(s) => s.with_bytes(|b| put_str(out, b, compress)),
        Value::List(l) => {
            let mut nodes: Vec<Vec<u8>> = Vec::new();
            let mut lp = ListpackWriter::new();
            for e in l.iter() {
                if !lp.is_empty() && lp.bytes() + e.len() + 10 > LIST_NODE_BYTES {
                    nodes.push(std::mem::take(&mut lp).finish());
                }
                lp.push_str(e);
            }
            if !lp.is_empty() {
                nodes.push(lp.finish());
            }
            put_len(out, nodes.len() as u64);
            for n in nodes {
                put_len(out, QUICKLIST_PACKED);
                put_str(out, &n, compress);
            }
        }
        Value::Set(s) => {
            put_len(out, s.len() as u64);
            for m in s.iter() {
                m.with_bytes(|b| put_str(out, b, compress));
            }
        }
        Value::Hash(h) => {
            put_len(out, h.len() as u64);
            for (f, v) in h.iter() {
                put_str(out, f, compress);
                put_str(out, v, compress);
            }
        }
        Value::ZSet(z) => {
            put_len(out, z.len() as u64);
            for (m, score) in z.iter() {
                put_str(out, m, compress);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        Value::Stream(s) => put_stream(out, s, compress),
        // Float vectors do not compress: never LZF the (large) index bytes.
        Value::VectorSet(v) => put_str(out, &v.index.to_bytes(), false),
    }
}

/// Stream as `RDB_TYPE_STREAM_LISTPACKS_2`: one listpack per block (live entries only),
/// then the metadata and consumer groups.
fn put_stream(out: &mut Vec<u8>, s: &Stream, compress: bool) {
    let nodes: Vec<_> = s.nodes().filter(|n| !n.entries.is_empty()).collect();
    put_len(out, nodes.len() as u64);
    for n in &nodes {
        let mut key = Vec::with_capacity(16);
        put_id(&mut key, n.key);
        put_len(out, 16);
        out.extend_from_slice(&key);
        let mut lp = ListpackWriter::new();
        lp.push_int(n.entries.len() as i64);
        lp.push_int(0);
        lp.push_int(n.master.len() as i64);
        for f in n.master {
            lp.push_str(f);
        }
        lp.push_int(0);
        for (id, fields) in &n.entries {
            let items: Vec<&[u8]> = fields.iter().collect();
            let same = items.len() == 2 * n.master.len()
                && items
                    .iter()
                    .step_by(2)
                    .zip(n.master)
                    .all(|(f, m)| *f == &m[..]);
            lp.push_int(if same { 2 } else { 0 });
            lp.push_int(id.ms.wrapping_sub(n.key.ms) as i64);
            lp.push_int(id.seq.wrapping_sub(n.key.seq) as i64);
            let pairs = items.len() / 2;
            if same {
                for v in items.iter().skip(1).step_by(2) {
                    lp.push_str(v);
                }
                lp.push_int(pairs as i64 + 3);
            } else {
                lp.push_int(pairs as i64);
                for it in &items {
                    lp.push_str(it);
                }
                lp.push_int(2 * pairs as i64 + 4);
            }
        }
        put_str(out, &lp.finish(), compress);
    }
    put_len(out, s.len() as u64);
    put_len(out, s.last_id.ms);
    put_len(out, s.last_id.seq);
    let first = s.first_id().unwrap_or(StreamId::MIN);
    put_len(out, first.ms);
    put_len(out, first.seq);
    put_len(out, s.max_deleted_id.ms);
    put_len(out, s.max_deleted_id.seq);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_str(out, name, compress);
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        put_len(out, g.entries_read as u64);
        put_len(out, g.pel.len() as u64);
        for (id, p) in &g.pel {
            put_id(out, *id);
            put_ms(out, p.delivery_time);
            put_len(out, p.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_str(out, cname, compress);
            put_ms(out, c.seen_time);
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                put_id(out, *id);
            }
        }
    }
}

/// Appends one key as a file stores it: the `ember-ext` AUX field when there is Ember-only
/// metadata, the expiry (ms) when `expire_at_ns` is not 0, the type, the key and the value.
pub fn encode_key(
    out: &mut Vec<u8>,
    key: &[u8],
    value: &Value,
    expire_at_ns: u64,
    tags: &[&[u8]],
    compress: bool,
) {
    let ext = KeyExt {
        sub_ms_ns: (expire_at_ns % 1_000_000) as u32,
        tags: tags.iter().map(|t| t.to_vec()).collect(),
    };
    if !ext.is_empty() {
        let mut payload = vec![EXT_LAYOUT];
        put_len(&mut payload, u64::from(ext.sub_ms_ns));
        put_len(&mut payload, ext.tags.len() as u64);
        for t in &ext.tags {
            put_len(&mut payload, t.len() as u64);
            payload.extend_from_slice(t);
        }
        out.push(op::AUX);
        put_str(out, EXT_AUX, false);
        put_str(out, &payload, compress);
    }
    if expire_at_ns != 0 {
        out.push(op::EXPIRETIME_MS);
        put_ms(out, expire_at_ns / 1_000_000);
    }
    out.push(value_type(value));
    put_str(out, key, compress);
    put_value(out, value, compress);
}

/// The DUMP payload of `v`: type, value, RDB version (2 bytes) and CRC64 (8 bytes), all
/// little-endian, as Redis's `createDumpPayload`.
pub fn dump_payload(v: &Value) -> Vec<u8> {
    let mut out = vec![value_type(v)];
    put_value(&mut out, v, true);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Writes an RDB file: header and the `ember-fmt` AUX field, then AUX fields, databases
/// and keys in the order given, then the EOF marker and checksum ([`Writer::finish`]).
pub struct Writer<W: Write> {
    w: W,
    digest: Digest<'static, u64, Table<16>>,
    written: u64,
    /// LZF-compress long strings (`rdbcompression`).
    pub compress: bool,
}

impl<W: Write> Writer<W> {
    /// Starts a file on `w`: the `REDIS0010` header, then the version of Ember's
    /// extensions as the AUX field `ember-fmt` (see the module docs).
    pub fn new(w: W, compress: bool) -> io::Result<Self> {
        let mut me = Writer {
            w,
            digest: CRC64.digest(),
            written: 0,
            compress,
        };
        me.write_raw(format!("REDIS{RDB_VERSION:04}").as_bytes())?;
        me.aux(FORMAT_AUX, FORMAT_VERSION.to_string().as_bytes())?;
        Ok(me)
    }

    /// Writes bytes already in RDB form (e.g. from [`encode_key`]).
    pub fn write_raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.digest.update(b);
        self.written += b.len() as u64;
        self.w.write_all(b)
    }

    /// Writes an AUX field.
    pub fn aux(&mut self, k: &[u8], v: &[u8]) -> io::Result<()> {
        let mut b = vec![op::AUX];
        put_str(&mut b, k, false);
        put_str(&mut b, v, false);
        self.write_raw(&b)
    }

    /// Starts database `db`, announcing about `keys` keys of which `expires` have a TTL.
    pub fn select_db(&mut self, db: usize, keys: u64, expires: u64) -> io::Result<()> {
        let mut b = vec![op::SELECTDB];
        put_len(&mut b, db as u64);
        b.push(op::RESIZEDB);
        put_len(&mut b, keys);
        put_len(&mut b, expires);
        self.write_raw(&b)
    }

    /// Writes a function library (its source code), as Redis's `RDB_OPCODE_FUNCTION2`.
    pub fn function(&mut self, code: &[u8]) -> io::Result<()> {
        let mut b = vec![op::FUNCTION2];
        put_str(&mut b, code, self.compress);
        self.write_raw(&b)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Writes the EOF marker and the checksum, flushes, and returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_raw(&[op::EOF])?;
        let crc = self.digest.finalize();
        self.w.write_all(&crc.to_le_bytes())?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// The FUNCTION DUMP payload of libraries with source `codes`: one
/// `RDB_OPCODE_FUNCTION2` record each, then the version and CRC64 as in [`dump_payload`].
pub fn functions_payload<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for c in codes {
        out.push(op::FUNCTION2);
        put_str(&mut out, c, true);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}
