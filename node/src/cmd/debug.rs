//! DEBUG: HELP, SLEEP, SPREAD (Ember), SET-ACTIVE-EXPIRE, OBJECT, DIGEST and DIGEST-VALUE.
//!
//! # Digests
//!
//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE` compute the same SHA1-based signatures as Redis
//! 7.0 (`src/debug.c`: `xorDigest`, `mixDigest`, `xorObjectDigest`,
//! `computeDatasetDigest`), so a dataset can be compared with redis-server's, or with
//! itself after an AOF or RDB round trip:
//!
//! - *xor* (`xorDigest`): `d ^= SHA1(data)`, for unordered elements (set members, hash
//!   fields, zset members, keys). Where the data xored is itself a 20-byte digest (a hash
//!   field's, a zset member's, a key's), it is hashed again, as Redis's
//!   `xorDigest(digest, eledigest, 20)` does.
//! - *mix* (`mixDigest`): `d = SHA1(d ^ SHA1(data))`, for ordered ones.
//! - A value: mix the type code as a big-endian `u32` (string 0, list 1, set 2, zset 3,
//!   hash 4, module 5, stream 6), then per type: a string mixes its bytes (integers as
//!   their decimal text); a list mixes each element head to tail; a set xors each member;
//!   a hash xors, per field, `mix(mix(0, field), value)`; a zset xors, per member,
//!   `mix(mix(0, member), score)` with the score formatted as C's `%.17g`; a stream mixes,
//!   per entry in ID order, the ID as `<ms>.<seq>` and then each field and value (consumer
//!   groups are left out, as in Redis). These use only the logical content, so Ember's
//!   streams digest exactly as Redis's do although their blocks differ from Redis's
//!   listpacks. Last, a key with a deadline xors the 10 bytes `!!expire!!`: only the
//!   presence of an expiry counts, never its time, so nanosecond deadlines digest as the
//!   millisecond ones Redis would see.
//! - The dataset: for each non-empty database in index order, mix its index (big-endian
//!   `u32`) into the result, then xor in, per key, `mix(0, key)` followed by the value's
//!   digest. An empty dataset is 40 zeros; so is `DIGEST-VALUE` of a missing key.
//!
//! Where Ember differs, on purpose:
//! - Vector sets (Ember and Redis 8 only; a module type there, whose digest Redis 7.0 does
//!   not define): type code 5, then per element `mix(mix(mix(mix(0, name), raw vector
//!   bytes as stored), norm as little-endian f32), attributes JSON or "")`, xored. The
//!   content hashed is what the AOF or RDB restores bit for bit.
//! - Only live keys count. Redis also hashes keys that expired logically but are not yet
//!   reclaimed, which depends on the timing of its expiry cycle.
//! - Key tags (Ember only) are not part of any digest: Redis has no such data.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use resp::Args;
use storage::clock::NS_PER_SEC;
use storage::stream::StreamId;
use storage::value::parse_canonical_i64;
use storage::Value;

use crate::cmd::server::LRU_CLOCK_MAX;
use crate::cmd::util::{is, lossy, parse_float, reply_help};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};
use crate::script::conv::fmt_g17;

/// The DEBUG command.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "debug",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE,
    (0, 0, 0),
    Group::Server,
    debug,
)
.doc("A container for debugging commands.", "1.0.0")];

// ------------------------------------------------------------------------------------------
// The handler
// ------------------------------------------------------------------------------------------

fn debug(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let sub = args.arg(1);
    if args.len() == 2 && is(sub, "help") {
        reply_help(
            ctx.out,
            args.arg(0),
            &[
                "DIGEST",
                "    Output a hex signature representing the current DB content.",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of all the specified keys.",
                "OBJECT <key>",
                "    Show low level info about `key` and associated value.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not",
                "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                "    default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
                "SPREAD <workers>",
                "    Ember: serve connections on <workers> worker threads from now on, moving",
                "    connections as needed (0: as many as pay for the load, the default).",
            ],
        );
        Ok(())
    } else if args.len() == 2 && is(sub, "digest") {
        let d = dataset_digest(ctx);
        ctx.out.simple(hex(&d).as_bytes());
        Ok(())
    } else if is(sub, "digest-value") {
        digest_values(ctx, args);
        Ok(())
    } else if args.len() == 3 && is(sub, "sleep") {
        // Like Redis (strtod), text that is not a number sleeps for 0 seconds. The calling
        // worker really blocks, as the whole of Redis does.
        let secs = parse_float(args.arg(2)).unwrap_or(0.0);
        if secs > 0.0 {
            if let Ok(d) = Duration::try_from_secs_f64(secs) {
                std::thread::sleep(d);
            }
        }
        ctx.out.ok();
        Ok(())
    } else if args.len() == 3 && is(sub, "spread") {
        let n = std::str::from_utf8(args.arg(2))
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .ok_or(CmdError::NotInteger)?;
        ctx.server.balance.pin(n);
        ctx.out.ok();
        Ok(())
    } else if args.len() == 3 && is(sub, "set-active-expire") {
        // Redis reads the flag with atoi: anything but a non-zero number turns it off.
        let on = std::str::from_utf8(args.arg(2))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(0);
        ctx.server.active_expire_off.store(on == 0, Relaxed);
        ctx.out.ok();
        Ok(())
    } else if args.len() == 3 && is(sub, "object") {
        debug_object(ctx, args.arg(2))
    } else {
        Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            lossy(sub, 128)
        )))
    }
}

// ------------------------------------------------------------------------------------------
// DEBUG OBJECT
// ------------------------------------------------------------------------------------------

/// Bytes of an RDB length prefix for `n`.
fn rdb_len_size(n: usize) -> usize {
    if n < 1 << 6 {
        1
    } else if n < 1 << 14 {
        2
    } else if u32::try_from(n).is_ok() {
        5
    } else {
        9
    }
}

/// Bytes a string takes in an RDB file without LZF compression: short integer-looking
/// strings use the integer encodings, the rest a length prefix plus the bytes.
pub fn rdb_string_len(b: &[u8]) -> usize {
    if b.len() <= 11 {
        if let Some(v) = parse_canonical_i64(b) {
            if i8::try_from(v).is_ok() {
                return 2;
            } else if i16::try_from(v).is_ok() {
                return 3;
            } else if i32::try_from(v).is_ok() {
                return 5;
            }
        }
    }
    rdb_len_size(b.len()) + b.len()
}

fn debug_object(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult {
    let now = ctx.now;
    let mut g = ctx.lock(key);
    let Some(e) = g.peek() else {
        return Err(CmdError::NoSuchKey);
    };
    // Only strings have a serialized length computed here so far.
    let serialized = match &e.value {
        Value::String(s) => format!(" serializedlength:{}", s.with_bytes(rdb_string_len)),
        _ => String::new(),
    };
    let idle = e.idle_secs(now);
    let lru = (now / NS_PER_SEC).wrapping_sub(idle) & LRU_CLOCK_MAX;
    let line = format!(
        "Value at:{:p} refcount:1 encoding:{}{serialized} lru:{lru} lru_seconds_idle:{idle}",
        &e.value,
        e.value.encoding()
    );
    drop(g);
    ctx.out.simple(line.as_bytes());
    Ok(())
}

// ------------------------------------------------------------------------------------------
// DEBUG DIGEST, DEBUG DIGEST-VALUE
// ------------------------------------------------------------------------------------------

/// A SHA1-sized digest, as Redis's `unsigned char digest[20]`.
type Digest = [u8; 20];

/// Redis's object type codes (`OBJ_STRING` ... `OBJ_STREAM`), mixed in first.
mod obj {
    pub const STRING: u32 = 0;
    pub const LIST: u32 = 1;
    pub const SET: u32 = 2;
    pub const ZSET: u32 = 3;
    pub const HASH: u32 = 4;
    pub const MODULE: u32 = 5;
    pub const STREAM: u32 = 6;
}

/// SHA1 of `data` (Redis's `SHA1Init`/`SHA1Update`/`SHA1Final`).
fn sha1(data: &[u8]) -> Digest {
    let mut h = sha1_smol::Sha1::new();
    h.update(data);
    h.digest().bytes()
}

/// `d ^= b`, byte by byte, without hashing `b` (unlike [`xor_digest`]).
fn xor_into(d: &mut Digest, b: &Digest) {
    for (x, y) in d.iter_mut().zip(b) {
        *x ^= y;
    }
}

/// Redis's `xorDigest`: `d ^= SHA1(data)` (order-independent accumulation).
fn xor_digest(d: &mut Digest, data: &[u8]) {
    xor_into(d, &sha1(data));
}

/// Redis's `mixDigest`: `d = SHA1(d ^ SHA1(data))` (order-dependent accumulation).
fn mix_digest(d: &mut Digest, data: &[u8]) {
    xor_digest(d, data);
    *d = sha1(d);
}

/// Lower-case hex, as Redis prints a digest.
fn hex(d: &Digest) -> String {
    use std::fmt::Write as _;
    d.iter().fold(String::with_capacity(40), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Redis's `xorObjectDigest`: mixes `value` (and whether it has a deadline) into `d`.
fn value_digest(d: &mut Digest, value: &Value, has_expire: bool) {
    let ty = match value {
        Value::String(_) => obj::STRING,
        Value::List(_) => obj::LIST,
        Value::Set(_) => obj::SET,
        Value::ZSet(_) => obj::ZSET,
        Value::Hash(_) => obj::HASH,
        Value::Stream(_) => obj::STREAM,
        Value::VectorSet(_) => obj::MODULE,
    };
    mix_digest(d, &ty.to_be_bytes());
    match value {
        Value::String(s) => s.with_bytes(|b| mix_digest(d, b)),
        Value::List(l) => {
            for e in l.iter() {
                mix_digest(d, e);
            }
        }
        Value::Set(s) => {
            for m in s.iter() {
                m.with_bytes(|b| xor_digest(d, b));
            }
        }
        Value::ZSet(z) => {
            for (m, score) in z.iter() {
                let mut e = Digest::default();
                mix_digest(&mut e, m);
                mix_digest(&mut e, fmt_g17(score).as_bytes());
                xor_digest(d, &e);
            }
        }
        Value::Hash(h) => {
            for (f, v) in h.iter() {
                let mut e = Digest::default();
                mix_digest(&mut e, f);
                mix_digest(&mut e, v);
                xor_digest(d, &e);
            }
        }
        Value::Stream(s) => {
            for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false, 0) {
                mix_digest(d, format!("{}.{}", id.ms, id.seq).as_bytes());
                for item in fields.iter() {
                    mix_digest(d, item);
                }
            }
        }
        Value::VectorSet(v) => {
            for name in v.index.names() {
                let Some((raw, norm)) = v.index.get_raw(&name) else {
                    continue;
                };
                let attrs = v.index.get_attrs(&name).flatten().unwrap_or_default();
                let mut e = Digest::default();
                mix_digest(&mut e, &name);
                mix_digest(&mut e, &raw);
                mix_digest(&mut e, &norm.to_le_bytes());
                mix_digest(&mut e, &attrs);
                xor_digest(d, &e);
            }
        }
    }
    if has_expire {
        xor_digest(d, b"!!expire!!");
    }
}

/// The digest of one key and its value, as `computeDatasetDigest` xors it in.
fn key_digest(key: &[u8], value: &Value, has_expire: bool) -> Digest {
    let mut d = Digest::default();
    mix_digest(&mut d, key);
    value_digest(&mut d, value, has_expire);
    d
}

/// Redis's `computeDatasetDigest`, over every database, with every shard locked so the
/// result is one consistent state.
fn dataset_digest(ctx: &Ctx<'_>) -> Digest {
    if let Some(p) = ctx.park {
        p.release();
    }
    let ks = ctx.ks();
    let now = ctx.now;
    let mut all = ks.lock_all(now);
    let mut fin = Digest::default();
    for db in 0..ks.db_count() {
        let mut keys = Digest::default();
        let mut any = false;
        for shard in all.shards_mut() {
            shard.table_ref(db).for_each_live(now, |k, e| {
                any = true;
                xor_digest(&mut keys, &key_digest(k, &e.value, e.expire_at().is_some()));
            });
        }
        if any {
            mix_digest(&mut fin, &(db as u32).to_be_bytes());
            xor_into(&mut fin, &keys);
        }
    }
    fin
}

/// `DEBUG DIGEST-VALUE key ...`: one status reply per key, zeros for a missing key.
fn digest_values(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let keys: Vec<&[u8]> = (2..args.len()).map(|i| args.arg(i)).collect();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let mut d = Digest::default();
        let mut g = ctx.lock(key);
        if let Some(e) = g.peek() {
            let has_expire = e.expire_at().is_some();
            value_digest(&mut d, &e.value, has_expire);
        }
        drop(g);
        out.push(hex(&d));
    }
    ctx.out.array(out.len());
    for h in out {
        ctx.out.simple(h.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::hash::Hash;
    use storage::list::List;
    use storage::set::Set;
    use storage::stream::Stream;
    use storage::zset::ZSet;
    use storage::RString;

    fn hexof(d: &Digest) -> String {
        hex(d)
    }

    #[test]
    fn rdb_lengths() {
        assert_eq!(rdb_string_len(b"12"), 2);
        assert_eq!(rdb_string_len(b"-128"), 2);
        assert_eq!(rdb_string_len(b"1000"), 3);
        assert_eq!(rdb_string_len(b"100000"), 5);
        assert_eq!(rdb_string_len(b"10000000000"), 12);
        assert_eq!(rdb_string_len(b"012"), 4);
        assert_eq!(rdb_string_len(b"hello"), 6);
        assert_eq!(rdb_string_len(&[b'x'; 100]), 102);
        assert_eq!(rdb_string_len(&[b'x'; 20_000]), 20_005);
    }

    #[test]
    fn sha1_known_values() {
        // FIPS 180 test vectors.
        assert_eq!(
            hexof(&sha1(b"")),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            hexof(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
    }

    #[test]
    fn xor_and_mix_primitives() {
        // xor into zeros is plain SHA1; twice cancels out; order does not matter.
        let mut d = Digest::default();
        xor_digest(&mut d, b"abc");
        assert_eq!(hexof(&d), "a9993e364706816aba3e25717850c26c9cd0d89d");
        xor_digest(&mut d, b"abc");
        assert_eq!(d, Digest::default());
        let (mut a, mut b) = (Digest::default(), Digest::default());
        xor_digest(&mut a, b"x");
        xor_digest(&mut a, b"y");
        xor_digest(&mut b, b"y");
        xor_digest(&mut b, b"x");
        assert_eq!(a, b);
        // mix from zeros: SHA1(SHA1(data)).
        let mut m = Digest::default();
        mix_digest(&mut m, b"abc");
        assert_eq!(m, sha1(&sha1(b"abc")));
        assert_eq!(hexof(&m), "0d3ced9bec10a777aec23ccc353a8c08a633045e");
        // Order matters for mix.
        let (mut p, mut q) = (Digest::default(), Digest::default());
        mix_digest(&mut p, b"x");
        mix_digest(&mut p, b"y");
        mix_digest(&mut q, b"y");
        mix_digest(&mut q, b"x");
        assert_ne!(p, q);
    }

    /// Values redis-server 7.0.15 answers for `DEBUG DIGEST-VALUE` (checked by hand and
    /// by tests/python/test_digest.py).
    #[test]
    fn value_digests_match_redis() {
        let s = Value::String(RString::from_bytes(b"hello"));
        let i = Value::String(RString::from_int(12345));
        let t = Value::String(RString::from_bytes(b"12345"));
        let mut ds = Digest::default();
        value_digest(&mut ds, &s, false);
        let mut di = Digest::default();
        value_digest(&mut di, &i, false);
        let mut dt = Digest::default();
        value_digest(&mut dt, &t, false);
        // An integer string digests as its decimal text.
        assert_eq!(di, dt);
        assert_eq!(hexof(&ds), REDIS_HELLO);
        let mut de = Digest::default();
        value_digest(&mut de, &s, true);
        let mut expect = ds;
        xor_digest(&mut expect, b"!!expire!!");
        assert_eq!(de, expect);

        let mut l = List::new();
        for e in [&b"a"[..], b"b", b"c"] {
            l.push_back(e);
        }
        let mut dl = Digest::default();
        value_digest(&mut dl, &Value::List(Box::new(l)), false);
        assert_eq!(hexof(&dl), REDIS_LIST_ABC);

        let mut set = Set::default();
        for m in [&b"1"[..], b"2", b"3"] {
            set.insert(m);
        }
        let mut dset = Digest::default();
        value_digest(&mut dset, &Value::Set(Box::new(set)), false);
        assert_eq!(hexof(&dset), REDIS_SET_123);

        let mut z = ZSet::new();
        z.add(b"a", 1.0);
        z.add(b"b", 2.5);
        let mut dz = Digest::default();
        value_digest(&mut dz, &Value::ZSet(Box::new(z)), false);
        assert_eq!(hexof(&dz), REDIS_ZSET_A1_B25);

        let mut h = Hash::new();
        h.insert(b"f", b"v");
        let mut dh = Digest::default();
        value_digest(&mut dh, &Value::Hash(Box::new(h)), false);
        assert_eq!(hexof(&dh), REDIS_HASH_FV);

        let mut x = Stream::default();
        x.append(StreamId { ms: 1, seq: 1 }, &[b"f", b"v"]);
        let mut dx = Digest::default();
        value_digest(&mut dx, &Value::Stream(Box::new(x)), false);
        assert_eq!(hexof(&dx), REDIS_STREAM_1_1_FV);
    }

    // `redis-cli DEBUG DIGEST-VALUE k` against redis-server 7.0.15 after:
    /// `SET k hello`
    const REDIS_HELLO: &str = "36b23a1456b2dce2c3ed252c456761301dba8060";
    /// `RPUSH k a b c`
    const REDIS_LIST_ABC: &str = "8bf72d812571eea9b927f3c11beb0c4165a6ff89";
    /// `SADD k 1 2 3`
    const REDIS_SET_123: &str = "2a462a3f51a1db89738ebbeef0c47ce1bbc85246";
    /// `ZADD k 1 a 2.5 b`
    const REDIS_ZSET_A1_B25: &str = "c45c5b051acd64070e5ed1a949939d5145f806c5";
    /// `HSET k f v`
    const REDIS_HASH_FV: &str = "90c76e9e9f4c62d642a34fc97c7dad503b51f906";
    /// `XADD k 1-1 f v`
    const REDIS_STREAM_1_1_FV: &str = "2ed9a7a81688084b1f7eae33456ef7727d357031";

    #[test]
    fn dataset_digest_of_one_key() {
        // `SET k hello` in db 0: mix(0, be32(0)) then xor (mix(0, "k") + value).
        let v = Value::String(RString::from_bytes(b"hello"));
        let mut fin = Digest::default();
        mix_digest(&mut fin, &0u32.to_be_bytes());
        xor_digest(&mut fin, &key_digest(b"k", &v, false));
        assert_eq!(hexof(&fin), REDIS_DATASET_K_HELLO);
    }

    /// `DEBUG DIGEST` of redis-server 7.0.15 holding only `SET k hello`.
    const REDIS_DATASET_K_HELLO: &str = "d101db227d1e3b31616b18b0b8700f84c3ffa5e9";
}
