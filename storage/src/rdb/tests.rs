//! Round trips of every type through DUMP payloads and files, and known Redis bytes.

use super::read::PayloadError;
use super::*;
use crate::hash::Hash;
use crate::list::List;
use crate::set::Set;
use crate::stream::{Consumer, ConsumerGroup, PendingEntry, Stream, StreamId};
use crate::value::{RString, Value};
use crate::zset::ZSet;

fn sample_values() -> Vec<Value> {
    let mut out = vec![
        Value::String(RString::from_bytes(b"hello")),
        Value::String(RString::from_int(-123456789012)),
        Value::String(RString::from_int(42)),
        Value::String(RString::from_vec(b"abc".repeat(200))),
    ];
    let mut l = List::new();
    for i in 0..3000 {
        l.push_back(format!("item-{i}").as_bytes());
    }
    l.push_back(&[b'z'; 9000]);
    l.push_back(b"17");
    out.push(Value::List(Box::new(l)));
    let mut s = Set::for_member(b"1", 3);
    for m in [&b"1"[..], b"2", b"-7"] {
        s.insert(m);
    }
    out.push(Value::Set(Box::new(s)));
    let mut s = Set::for_member(b"a", 1000);
    for i in 0..1000 {
        s.insert(format!("m{i}").as_bytes());
    }
    out.push(Value::Set(Box::new(s)));
    let mut h = Hash::new();
    for i in 0..300 {
        h.insert(format!("f{i}").as_bytes(), format!("{i}").as_bytes());
    }
    out.push(Value::Hash(Box::new(h)));
    let mut z = ZSet::new();
    for i in 0..200 {
        z.add(format!("m{i}").as_bytes(), f64::from(i) / 3.0);
    }
    z.add(b"inf", f64::INFINITY);
    z.add(b"ninf", f64::NEG_INFINITY);
    out.push(Value::ZSet(Box::new(z)));
    out.push(Value::Stream(Box::new(sample_stream())));
    let vs = vector::VectorIndex::new(vector::IndexConfig::new(3)).expect("index");
    for i in 0..40u8 {
        let v = [f32::from(i), 1.0, f32::from(i % 3)];
        let attrs = format!(r#"{{"i": {i}}}"#);
        let a = if i % 2 == 0 {
            vector::AttrUpdate::Set(attrs.as_bytes())
        } else {
            vector::AttrUpdate::Keep
        };
        vs.upsert(format!("e{i}").as_bytes(), &v, a).expect("add");
    }
    out.push(Value::VectorSet(crate::vset::VectorSet::new(vs)));
    out
}

fn sample_stream() -> Stream {
    let mut x = Stream::default();
    for i in 0..250u64 {
        let v = i.to_string();
        if i % 7 == 0 {
            x.append(
                StreamId::new(1000 + i, i),
                &[b"other", v.as_bytes(), b"x", b"y"],
            );
        } else {
            x.append(StreamId::new(1000 + i, 0), &[b"temp", v.as_bytes()]);
        }
    }
    x.delete(StreamId::new(1003, 0));
    x.max_deleted_id = StreamId::new(1003, 0);
    let mut g = ConsumerGroup::new(StreamId::new(1010, 0), 11);
    let mut c = Consumer::new(5000);
    c.active_time = 5000;
    for id in [StreamId::new(1001, 0), StreamId::new(1002, 0)] {
        g.pel.insert(
            id,
            PendingEntry {
                consumer: b"alice".to_vec(),
                delivery_time: 4000,
                delivery_count: 2,
            },
        );
        c.pel.insert(id);
    }
    g.consumers.insert(b"alice".to_vec(), c);
    g.consumers.insert(b"bob".to_vec(), Consumer::new(6000));
    x.groups.insert(b"g1".to_vec(), g);
    x.groups
        .insert(b"g2".to_vec(), ConsumerGroup::new(StreamId::MIN, -1));
    x
}

/// A canonical text form of a value, for comparisons.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("str {:?}", s.to_vec()),
        Value::List(l) => format!("list {:?}", l.iter().collect::<Vec<_>>()),
        Value::Set(s) => {
            let mut m: Vec<Vec<u8>> = s.iter().map(|e| e.to_vec()).collect();
            m.sort();
            format!("set {m:?}")
        }
        Value::Hash(h) => {
            let mut m: Vec<(Vec<u8>, Vec<u8>)> =
                h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            m.sort();
            format!("hash {m:?}")
        }
        Value::ZSet(z) => format!("zset {:?}", z.iter().collect::<Vec<_>>()),
        Value::VectorSet(v) => {
            let mut names = v.index.names();
            names.sort();
            let elems: Vec<_> = names
                .iter()
                .map(|n| (n.clone(), v.index.get_vector(n), v.index.get_attrs(n)))
                .collect();
            format!("vectorset {:?} {elems:?}", v.index.config())
        }
        Value::Stream(x) => {
            let entries: Vec<(StreamId, Vec<Vec<u8>>)> = x
                .range(StreamId::MIN, StreamId::MAX, false, 0)
                .into_iter()
                .map(|(id, f)| (id, f.iter().map(|b| b.to_vec()).collect()))
                .collect();
            format!(
                "stream {entries:?} last={} maxdel={} added={} groups={:?}",
                x.last_id,
                x.max_deleted_id,
                x.entries_added,
                x.groups
                    .iter()
                    .map(|(n, g)| (
                        n.clone(),
                        g.last_id,
                        g.entries_read,
                        g.pel.clone(),
                        g.consumers
                            .iter()
                            .map(|(c, v)| (c.clone(), v.seen_time, v.pel.clone()))
                            .collect::<Vec<_>>()
                    ))
                    .collect::<Vec<_>>()
            )
        }
    }
}

#[test]
fn dump_restore_round_trip_every_type() {
    for v in sample_values() {
        let p = dump_payload(&v);
        let back = restore_payload(&p).unwrap().unwrap();
        assert_eq!(show(&back), show(&v));
    }
}

#[test]
fn redis_dump_bytes() {
    // `DUMP mykey` after `SET mykey 10` on Redis 7.0 (from the DUMP command page).
    let redis = b"\x00\xc0\n\n\x00n\x9fWE\x0e\xaec\xbb";
    let v = restore_payload(redis).unwrap().unwrap();
    assert_eq!(show(&v), show(&Value::String(RString::from_int(10))));
    assert_eq!(dump_payload(&v), redis.to_vec());
}

#[test]
fn bad_payloads() {
    let mut p = dump_payload(&Value::String(RString::from_bytes(b"hello")));
    assert_eq!(
        restore_payload(&p[..5]).err(),
        Some(PayloadError::VersionOrChecksum)
    );
    let n = p.len();
    p[n - 1] ^= 1;
    assert_eq!(
        restore_payload(&p).err(),
        Some(PayloadError::VersionOrChecksum)
    );
    // Right checksum, garbage body.
    let mut q = vec![ty::LIST_QUICKLIST_2, 1, 2, 5, 1, 2, 3, 4, 5];
    q.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&q);
    q.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore_payload(&q).err(), Some(PayloadError::BadData));
    // Version too new.
    let mut q = vec![ty::STRING, 1, b'a'];
    q.extend_from_slice(&(MAX_READ_VERSION + 1).to_le_bytes());
    let crc = CRC64.checksum(&q);
    q.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(
        restore_payload(&q).err(),
        Some(PayloadError::VersionOrChecksum)
    );
}

/// One key for [`write_file`]: db, name, value, expiry (ns), tags.
type FileKey<'a> = (usize, Vec<u8>, Value, u64, Vec<&'a [u8]>);

fn write_file(keys: &[FileKey]) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), true).unwrap();
    w.aux(b"redis-ver", b"7.0.15").unwrap();
    let mut db = usize::MAX;
    for (d, k, v, exp, tags) in keys {
        if *d != db {
            db = *d;
            w.select_db(db, 10, 1).unwrap();
        }
        let mut buf = Vec::new();
        encode_key(&mut buf, k, v, *exp, tags, true);
        w.write_raw(&buf).unwrap();
    }
    w.function(b"#!lua name=lib\nredis.register_function('f', function() return 1 end)")
        .unwrap();
    w.finish().unwrap()
}

#[test]
fn file_round_trip_with_expiry_tags_and_functions() {
    let vals = sample_values();
    let mut keys = Vec::new();
    for (i, v) in vals.into_iter().enumerate() {
        let exp = if i % 3 == 0 {
            4_000_000_000_000_000_123 + i as u64
        } else {
            0
        };
        let tags: Vec<&[u8]> = if i % 2 == 0 {
            vec![b"t1", b"t2"]
        } else {
            vec![]
        };
        keys.push((i % 2, format!("key{i}").into_bytes(), v, exp, tags));
    }
    let file = write_file(&keys);
    assert_eq!(&file[..9], b"REDIS0010");
    let mut got = Vec::new();
    let mut funcs = Vec::new();
    let stats = load(&file[..], |l| {
        match l {
            Loaded::Key {
                db,
                key,
                value,
                expire_at_ns,
                tags,
            } => got.push((db, key, show(&value), expire_at_ns, tags)),
            Loaded::Function(code) => funcs.push(code),
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(stats.version, 10);
    assert_eq!(stats.keys as usize, keys.len());
    assert_eq!(stats.aux, vec![(b"redis-ver".to_vec(), b"7.0.15".to_vec())]);
    assert_eq!(funcs.len(), 1);
    for ((d, k, v, exp, tags), g) in keys.iter().zip(&got) {
        assert_eq!(g.0, *d);
        assert_eq!(&g.1, k);
        assert_eq!(g.2, show(v));
        assert_eq!(g.3, *exp);
        let t: Vec<Vec<u8>> = tags.iter().map(|t| t.to_vec()).collect();
        assert_eq!(g.4, t);
    }
}

#[test]
fn damaged_files_are_reported_with_offsets() {
    let keys = vec![(
        0,
        b"k".to_vec(),
        Value::String(RString::from_bytes(b"value")),
        0,
        vec![],
    )];
    let file = write_file(&keys);
    // Every truncation fails (never a silent partial load).
    for cut in 0..file.len() {
        let r = load(&file[..cut], |_| Ok(()));
        assert!(r.is_err(), "cut at {cut} loaded");
    }
    // A flipped byte in the body is caught (by a parse error or the checksum).
    for i in 9..file.len() - 8 {
        let mut f = file.clone();
        f[i] ^= 0x55;
        assert!(load(&f[..], |_| Ok(())).is_err(), "flip at {i} loaded");
    }
    match load(&file[..20], |_| Ok(())) {
        Err(RdbError::Truncated(off)) => assert_eq!(off, 20),
        other => panic!("{other:?}"),
    }
}

#[test]
fn crc64_check_value() {
    assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
}

/// A file by hand: header, the given AUX fields, one string key `k` = `v`, EOF, CRC64.
fn file_with_aux(aux: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut f = b"REDIS0010".to_vec();
    for (k, v) in aux {
        f.push(op::AUX);
        write::put_str(&mut f, k, false);
        write::put_str(&mut f, v, false);
    }
    f.push(ty::STRING);
    write::put_str(&mut f, b"k", false);
    write::put_str(&mut f, b"v", false);
    f.push(op::EOF);
    let crc = CRC64.checksum(&f);
    f.extend_from_slice(&crc.to_le_bytes());
    f
}

fn keys_of(file: &[u8]) -> Result<(LoadStats, Vec<Vec<u8>>), RdbError> {
    let mut keys = Vec::new();
    let stats = load(file, |l| {
        if let Loaded::Key { key, .. } = l {
            keys.push(key);
        }
        Ok(())
    })?;
    Ok((stats, keys))
}

#[test]
fn format_version_1_is_written_and_read_back() {
    let file = write_file(&[(
        0,
        b"k".to_vec(),
        Value::String(RString::from_bytes(b"v")),
        0,
        vec![],
    )]);
    // Right after the header: AUX "ember-fmt" = 1 (integer-encoded, as Redis writes "1").
    let mut head = b"REDIS0010".to_vec();
    head.push(op::AUX);
    write::put_str(&mut head, FORMAT_AUX, false);
    write::put_str(&mut head, b"1", false);
    assert!(file.starts_with(&head));
    let (stats, keys) = keys_of(&file).unwrap();
    assert_eq!(stats.ember_format, 1);
    assert_eq!(keys, vec![b"k".to_vec()]);
    // Ember's own field is not reported among the file's AUX fields.
    assert!(stats.aux.iter().all(|(k, _)| k != FORMAT_AUX));
}

#[test]
fn format_legacy_file_without_the_field_reads_as_version_1() {
    // What Ember wrote before the field existed (and what Redis writes).
    let (stats, keys) = keys_of(&file_with_aux(&[(b"redis-ver", b"7.0.15")])).unwrap();
    assert_eq!(stats.ember_format, 1);
    assert_eq!(keys, vec![b"k".to_vec()]);
    // An explicit "1" as text reads the same.
    let (stats, _) = keys_of(&file_with_aux(&[(FORMAT_AUX, b"1")])).unwrap();
    assert_eq!(stats.ember_format, 1);
}

#[test]
fn format_version_2_is_refused_with_a_clear_error() {
    let e = keys_of(&file_with_aux(&[(FORMAT_AUX, b"2")])).unwrap_err();
    assert!(
        matches!(
            e,
            RdbError::NewerFormat {
                found: 2,
                max: FORMAT_VERSION
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "the RDB file uses Ember format version 2 (AUX field ember-fmt); this build reads Ember format versions 1 to 1: it was written by a newer Ember"
    );
    // Refused before any key is handed out.
    let mut seen = 0;
    assert!(
        load(&file_with_aux(&[(FORMAT_AUX, b"99999999999")])[..], |_| {
            seen += 1;
            Ok(())
        })
        .is_err()
    );
    assert_eq!(seen, 0);
    // Not a version at all: corrupt, not "newer".
    for bad in [&b""[..], b"0", b"x", b"-1", b" 1"] {
        let e = keys_of(&file_with_aux(&[(FORMAT_AUX, bad)])).unwrap_err();
        assert!(matches!(e, RdbError::Corrupt { .. }), "{bad:?}: {e:?}");
    }
    // An ember-ext payload of an unknown layout is refused, naming it.
    let mut ext = vec![EXT_LAYOUT + 1];
    write::put_len(&mut ext, 0);
    write::put_len(&mut ext, 0);
    let e = keys_of(&file_with_aux(&[(EXT_AUX, &ext)])).unwrap_err();
    assert!(e.to_string().contains("ember-ext field of layout 2"), "{e}");
}
