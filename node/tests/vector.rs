//! Vector sets against the real binary: Redis 8's VADD/VSIM/... reply shapes, scores and
//! errors, Ember's VSIM.* commands, key semantics (TYPE, DEL, RENAME, COPY, expiry) and
//! the snapshot round trip.

mod common;

use common::{cmd, err, int, ok, temp_dir, Ember};
use redis::Value;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn names(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                other => panic!("not a bulk string: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn num(v: &Value) -> f64 {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        Value::Double(d) => *d,
        other => panic!("not a number: {other:?}"),
    }
}

/// Three elements on the unit axes plus one near `a`.
fn sample(c: &mut redis::Connection, extra: &[&str]) {
    for (name, v, attr) in [
        ("a", ["1", "0", "0"], r#"{"year": 1990, "genre": "drama"}"#),
        (
            "b",
            ["0.9", "0.1", "0"],
            r#"{"year": 2005, "genre": "comedy"}"#,
        ),
        ("c", ["0", "1", "0"], ""),
        ("d", ["0", "0", "1"], r#"{"year": 2010, "genre": "drama"}"#),
    ] {
        let mut args = vec!["VADD", "s", "VALUES", "3", v[0], v[1], v[2], name];
        args.extend_from_slice(extra);
        if !attr.is_empty() {
            args.extend_from_slice(&["SETATTR", attr]);
        }
        // RESP2 answers :1, RESP3 #t (Redis's ReplyWithBool).
        let r = ok(c, &args);
        assert!(matches!(r, Value::Int(1) | Value::Boolean(true)), "{r:?}");
    }
}

#[test]
fn vadd_vsim_scores_and_shapes() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    sample(&mut c, &["NOQUANT"]);
    assert_eq!(
        ok(&mut c, &["TYPE", "s"]),
        Value::SimpleString("vectorset".into())
    );
    assert_eq!(int(&mut c, &["VCARD", "s"]), 4);
    assert_eq!(int(&mut c, &["VDIM", "s"]), 3);
    // Update: 0, and the vector changes.
    assert_eq!(
        int(
            &mut c,
            &["VADD", "s", "VALUES", "3", "0", "1", "0", "c", "NOQUANT"]
        ),
        0
    );

    let r = names(ok(&mut c, &["VSIM", "s", "VALUES", "3", "1", "0", "0"]));
    assert_eq!(r[..2], ["a", "b"]);
    assert_eq!(r.len(), 4);
    // WITHSCORES: 1 - cosine_distance / 2.
    let v = ok(
        &mut c,
        &["VSIM", "s", "ELE", "a", "WITHSCORES", "COUNT", "2"],
    );
    let Value::Array(items) = v else { panic!() };
    assert_eq!(items.len(), 4);
    assert_eq!(items[0], bulk("a"));
    assert!((num(&items[1]) - 1.0).abs() < 1e-6);
    let cos = 0.9 / (0.82f64).sqrt();
    assert!((num(&items[3]) - (1.0 - (1.0 - cos) / 2.0)).abs() < 1e-5);
    // c is orthogonal: 0.5; d too.
    let v = ok(
        &mut c,
        &["VSIM", "s", "ELE", "a", "WITHSCORES", "WITHATTRIBS"],
    );
    let Value::Array(items) = v else { panic!() };
    assert_eq!(items.len(), 12);
    assert_eq!(items[2], bulk(r#"{"year": 1990, "genre": "drama"}"#));
    let c_at = items.iter().position(|x| *x == bulk("c")).unwrap();
    assert!((num(&items[c_at + 1]) - 0.5).abs() < 1e-6);
    assert_eq!(items[c_at + 2], Value::Nil);
    // EPSILON keeps distances / 2 <= eps.
    let r = names(ok(&mut c, &["VSIM", "s", "ELE", "a", "EPSILON", "0.1"]));
    assert_eq!(r, ["a", "b"]);
    // FILTER.
    let r = names(ok(
        &mut c,
        &["VSIM", "s", "ELE", "a", "FILTER", ".genre == \"drama\""],
    ));
    assert_eq!(r, ["a", "d"]);
    let r = names(ok(
        &mut c,
        &[
            "VSIM",
            "s",
            "ELE",
            "a",
            "FILTER",
            ".year > 2000 and .genre == 'drama'",
            "FILTER-EF",
            "50",
        ],
    ));
    assert_eq!(r, ["d"]);
    let r = names(ok(
        &mut c,
        &[
            "VSIM",
            "s",
            "ELE",
            "a",
            "FILTER",
            ".genre in ['comedy']",
            "TRUTH",
            "NOTHREAD",
            "EF",
            "10",
        ],
    ));
    assert_eq!(r, ["b"]);
    // FP32 blob query.
    let blob: Vec<u8> = [0f32, 1.0, 0.0]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .collect();
    let v = redis::cmd("VSIM")
        .arg("s")
        .arg("FP32")
        .arg(blob)
        .arg("COUNT")
        .arg(1)
        .query::<Value>(&mut c)
        .unwrap();
    assert_eq!(names(v), ["c"]);
    // Missing key: empty array.
    assert_eq!(
        ok(&mut c, &["VSIM", "nokey", "VALUES", "3", "1", "0", "0"]),
        Value::Array(vec![])
    );
}

#[test]
fn errors_match_redis() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    sample(&mut c, &[]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["VADD", "s", "VALUES", "x", "1", "e"],
            "ERR invalid vector specification",
        ),
        (
            &["VADD", "s", "VALUES", "3", "1", "0", "x", "e"],
            "ERR invalid vector specification",
        ),
        (
            &["VADD", "s", "FP32", "abc", "e"],
            "ERR invalid vector specification",
        ),
        (
            &["VADD", "s", "BLOB", "abc", "e"],
            "ERR invalid vector specification",
        ),
        (
            &["VADD", "s", "VALUES", "2", "1", "0"],
            "ERR wrong number of arguments for 'vadd' command",
        ),
        (
            &["VADD", "s", "VALUES", "2", "1", "0", "e"],
            "ERR Vector dimension mismatch - got 2 but set has 3",
        ),
        (
            &["VADD", "s", "VALUES", "3", "1", "0", "0", "e", "NOQUANT"],
            "ERR asked quantization mismatch with existing vector set",
        ),
        (
            &["VADD", "s", "VALUES", "3", "1", "0", "0", "e", "M", "32"],
            "ERR asked M value mismatch with existing vector set",
        ),
        (
            &["VADD", "s", "VALUES", "3", "1", "0", "0", "e", "M", "1"],
            "ERR invalid M",
        ),
        (
            &["VADD", "s", "VALUES", "3", "1", "0", "0", "e", "EF", "0"],
            "ERR invalid EF",
        ),
        (
            &["VADD", "s", "VALUES", "3", "1", "0", "0", "e", "BOGUS"],
            "ERR invalid option after element",
        ),
        (
            &["VSIM", "s", "VALUES", "2", "1", "0"],
            "ERR Vector dimension mismatch - got 2 but set has 3",
        ),
        (&["VSIM", "s", "ELE", "zz"], "ERR element not found in set"),
        (
            &["VSIM", "s", "ELE", "a", "COUNT", "0"],
            "ERR invalid COUNT",
        ),
        (&["VSIM", "s", "ELE", "a", "EF", "0"], "ERR invalid EF"),
        (
            &["VSIM", "s", "ELE", "a", "EPSILON", "-1"],
            "ERR invalid EPSILON",
        ),
        (
            &["VSIM", "s", "ELE", "a", "FILTER-EF", "0"],
            "ERR invalid FILTER-EF",
        ),
        (
            &["VSIM", "s", "ELE", "a", "FILTER", ".year >"],
            "ERR syntax error in FILTER expression near: .year >",
        ),
        (
            &["VSIM", "s", "ELE", "a", "WHAT"],
            "ERR syntax error in VSIM command",
        ),
        (&["VDIM", "nokey"], "ERR key does not exist"),
        (&["VEMB", "s", "a", "bogus"], "ERR invalid option"),
        (
            &["VRANDMEMBER", "s", "x"],
            "ERR COUNT value is not an integer",
        ),
        (
            &["VLINKS", "s", "a", "x"],
            "ERR wrong number of arguments for 'vlinks' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(err(&mut c, args), *want, "{args:?}");
    }
    ok(&mut c, &["SET", "str", "x"]);
    for args in [
        &["VADD", "str", "VALUES", "1", "1", "e"][..],
        &["VSIM", "str", "VALUES", "1", "1"],
        &["VCARD", "str"],
        &["VREM", "str", "e"],
        &["VEMB", "str", "e"],
        &["VINFO", "str"],
        &["VGETATTR", "str", "e"],
        &["VSETATTR", "str", "e", "{}"],
        &["VRANDMEMBER", "str"],
        &["VLINKS", "str", "e"],
        &["VSIM.SEARCH", "str", "1", "1"],
    ] {
        assert!(err(&mut c, args).starts_with("WRONGTYPE"), "{args:?}");
    }
}

#[test]
fn read_commands_and_attributes() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    sample(&mut c, &[]);
    // VEMB: Q8 stores the normalized vector in int8; it reads back close to the input.
    let Value::Array(v) = ok(&mut c, &["VEMB", "s", "b"]) else {
        panic!()
    };
    assert_eq!(v.len(), 3);
    assert!((num(&v[0]) - 0.9).abs() < 0.01 && (num(&v[1]) - 0.1).abs() < 0.01);
    let Value::Array(raw) = ok(&mut c, &["VEMB", "s", "b", "RAW"]) else {
        panic!()
    };
    assert_eq!(raw.len(), 4);
    assert_eq!(raw[0], Value::SimpleString("int8".into()));
    assert!(matches!(&raw[1], Value::BulkString(b) if b.len() == 3));
    assert_eq!(ok(&mut c, &["VEMB", "s", "zz"]), Value::Nil);
    assert_eq!(ok(&mut c, &["VEMB", "nokey", "a"]), Value::Nil);

    // VINFO: 9 fields, Redis names.
    let Value::Array(info) = ok(&mut c, &["VINFO", "s"]) else {
        panic!()
    };
    let keys: Vec<String> = info
        .iter()
        .step_by(2)
        .map(|k| match k {
            Value::SimpleString(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        keys,
        [
            "quant-type",
            "hnsw-m",
            "vector-dim",
            "projection-input-dim",
            "size",
            "max-level",
            "attributes-count",
            "vset-uid",
            "hnsw-max-node-uid"
        ]
    );
    assert_eq!(info[1], Value::SimpleString("int8".into()));
    assert_eq!(info[3], Value::Int(16));
    assert_eq!(info[9], Value::Int(4));
    assert_eq!(info[13], Value::Int(3));
    assert_eq!(ok(&mut c, &["VINFO", "nokey"]), Value::Nil);

    // Attributes.
    assert_eq!(
        ok(&mut c, &["VGETATTR", "s", "a"]),
        bulk(r#"{"year": 1990, "genre": "drama"}"#)
    );
    assert_eq!(ok(&mut c, &["VGETATTR", "s", "c"]), Value::Nil);
    assert_eq!(ok(&mut c, &["VGETATTR", "s", "zz"]), Value::Nil);
    assert_eq!(int(&mut c, &["VSETATTR", "s", "c", r#"{"year": 1}"#]), 1);
    assert_eq!(int(&mut c, &["VSETATTR", "s", "zz", "{}"]), 0);
    assert_eq!(int(&mut c, &["VSETATTR", "nokey", "zz", "{}"]), 0);
    assert_eq!(ok(&mut c, &["VGETATTR", "s", "c"]), bulk(r#"{"year": 1}"#));
    assert_eq!(int(&mut c, &["VSETATTR", "s", "c", ""]), 1);
    assert_eq!(ok(&mut c, &["VGETATTR", "s", "c"]), Value::Nil);
    // VADD ... SETATTR on update replaces; without it keeps.
    assert_eq!(
        int(&mut c, &["VADD", "s", "VALUES", "3", "1", "0", "0", "a"]),
        0
    );
    assert_eq!(
        ok(&mut c, &["VGETATTR", "s", "a"]),
        bulk(r#"{"year": 1990, "genre": "drama"}"#)
    );

    // VRANDMEMBER.
    let one = ok(&mut c, &["VRANDMEMBER", "s"]);
    assert!(matches!(one, Value::BulkString(_)));
    let two = names(ok(&mut c, &["VRANDMEMBER", "s", "2"]));
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
    assert_eq!(names(ok(&mut c, &["VRANDMEMBER", "s", "10"])).len(), 4);
    assert_eq!(names(ok(&mut c, &["VRANDMEMBER", "s", "-10"])).len(), 10);
    assert_eq!(ok(&mut c, &["VRANDMEMBER", "s", "0"]), Value::Array(vec![]));
    assert_eq!(ok(&mut c, &["VRANDMEMBER", "nokey"]), Value::Nil);
    assert_eq!(
        ok(&mut c, &["VRANDMEMBER", "nokey", "3"]),
        Value::Array(vec![])
    );

    // VLINKS: one array per layer, top first; WITHSCORES pairs names with scores.
    let Value::Array(layers) = ok(&mut c, &["VLINKS", "s", "a"]) else {
        panic!()
    };
    let base = names(layers.last().unwrap().clone());
    assert!(!base.is_empty() && !base.contains(&"a".to_string()));
    let Value::Array(layers) = ok(&mut c, &["VLINKS", "s", "a", "WITHSCORES"]) else {
        panic!()
    };
    let Value::Array(pairs) = layers.last().unwrap().clone() else {
        panic!()
    };
    assert_eq!(pairs.len(), base.len() * 2);
    assert_eq!(ok(&mut c, &["VLINKS", "s", "zz"]), Value::Nil);

    assert_eq!(int(&mut c, &["VISMEMBER", "s", "a"]), 1);
    assert_eq!(int(&mut c, &["VISMEMBER", "s", "zz"]), 0);
}

#[test]
fn vrem_deletes_empty_set_and_key_semantics() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["VADD", "v", "VALUES", "2", "1", "0", "x"]), 1);
    assert_eq!(int(&mut c, &["VADD", "v", "VALUES", "2", "0", "1", "y"]), 1);
    assert_eq!(int(&mut c, &["VREM", "v", "zz"]), 0);
    assert_eq!(int(&mut c, &["VREM", "nokey", "zz"]), 0);
    assert_eq!(int(&mut c, &["VREM", "v", "x"]), 1);
    assert_eq!(int(&mut c, &["VCARD", "v"]), 1);
    assert_eq!(int(&mut c, &["VREM", "v", "y"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "v"]), 0);
    assert_eq!(int(&mut c, &["VCARD", "v"]), 0);

    // RENAME, COPY (independent), EXPIRE, DEL.
    int(&mut c, &["VADD", "v", "VALUES", "2", "1", "0", "x"]);
    ok(&mut c, &["RENAME", "v", "w"]);
    assert_eq!(int(&mut c, &["VCARD", "w"]), 1);
    assert_eq!(int(&mut c, &["COPY", "w", "w2"]), 1);
    int(&mut c, &["VADD", "w2", "VALUES", "2", "0", "1", "y"]);
    assert_eq!(int(&mut c, &["VCARD", "w"]), 1);
    assert_eq!(int(&mut c, &["VCARD", "w2"]), 2);
    assert_eq!(ok(&mut c, &["OBJECT", "ENCODING", "w"]), bulk("hnsw"));
    assert_eq!(int(&mut c, &["PEXPIRE", "w2", "50"]), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while int(&mut c, &["EXISTS", "w2"]) == 1 {
        assert!(std::time::Instant::now() < deadline, "w2 never expired");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(int(&mut c, &["DEL", "w"]), 1);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn reduce_and_bin() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    // REDUCE 2: 4-dimensional input projected to 2.
    assert_eq!(
        int(
            &mut c,
            &["VADD", "r", "REDUCE", "2", "VALUES", "4", "1", "2", "3", "4", "a"]
        ),
        1
    );
    assert_eq!(int(&mut c, &["VDIM", "r"]), 2);
    assert_eq!(
        int(
            &mut c,
            &["VADD", "r", "VALUES", "4", "4", "3", "2", "1", "b"]
        ),
        1
    );
    let Value::Array(info) = ok(&mut c, &["VINFO", "r"]) else {
        panic!()
    };
    assert_eq!(info[7], Value::Int(4), "projection-input-dim");
    assert_eq!(
        names(ok(
            &mut c,
            &["VSIM", "r", "VALUES", "4", "1", "2", "3", "4", "COUNT", "1"]
        )),
        ["a"]
    );
    assert_eq!(
        err(&mut c, &["VADD", "r", "VALUES", "3", "1", "2", "3", "z"]),
        "ERR Input dimension mismatch for projection - got 3 but projection expects 4"
    );
    // A projection matrix is bounded (64 MiB of floats).
    let mut big = vec!["VADD", "r2", "REDUCE", "8192", "VALUES", "8193"];
    big.extend(std::iter::repeat_n("1", 8193));
    big.push("e");
    assert!(err(&mut c, &big).starts_with("ERR projection matrix too large"));
    // BIN.
    int(
        &mut c,
        &["VADD", "b", "VALUES", "4", "1", "-1", "1", "-1", "x", "BIN"],
    );
    int(
        &mut c,
        &["VADD", "b", "VALUES", "4", "-1", "1", "-1", "1", "y", "BIN"],
    );
    // Sign bits compared by Hamming distance: identical 1, all bits differ 0.
    let Value::Array(items) = ok(
        &mut c,
        &[
            "VSIM",
            "b",
            "VALUES",
            "4",
            "1",
            "-1",
            "1",
            "-1",
            "WITHSCORES",
        ],
    ) else {
        panic!()
    };
    assert_eq!(items[0], bulk("x"));
    assert!((num(&items[1]) - 1.0).abs() < 1e-6);
    assert_eq!(items[2], bulk("y"));
    assert!(num(&items[3]).abs() < 1e-6);
    let Value::Array(info) = ok(&mut c, &["VINFO", "b"]) else {
        panic!()
    };
    assert_eq!(info[1], Value::SimpleString("bin".into()));
}

#[test]
fn ember_vsim_commands() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(
        ok(
            &mut c,
            &[
                "VSIM.CREATEINDEX",
                "idx",
                "DIM",
                "3",
                "METRIC",
                "l2",
                "M",
                "8",
                "EF_CONSTRUCTION",
                "100",
                "QUANT",
                "f16"
            ]
        ),
        Value::Okay
    );
    assert_eq!(
        err(&mut c, &["VSIM.CREATEINDEX", "idx", "DIM", "3"]),
        "ERR index already exists"
    );
    assert_eq!(
        err(&mut c, &["VSIM.CREATEINDEX", "x", "METRIC", "l2"]),
        "ERR DIM is required"
    );
    assert_eq!(
        err(&mut c, &["VSIM.CREATEINDEX", "x", "DIM", "0"]),
        "ERR DIM must be an integer between 1 and 65536"
    );
    assert_eq!(
        err(
            &mut c,
            &["VSIM.CREATEINDEX", "x", "DIM", "2", "METRIC", "hamming"]
        ),
        "ERR METRIC must be cosine, l2 or ip"
    );
    assert_eq!(
        err(
            &mut c,
            &["VSIM.CREATEINDEX", "x", "DIM", "2", "QUANT", "i4"]
        ),
        "ERR QUANT must be f32, f16, i8 or b1"
    );
    assert_eq!(
        err(
            &mut c,
            &[
                "VSIM.CREATEINDEX",
                "x",
                "DIM",
                "2",
                "QUANT",
                "i8",
                "METRIC",
                "l2"
            ]
        ),
        "ERR i8 quantization needs the cosine metric"
    );
    assert_eq!(int(&mut c, &["VSIM.CARD", "idx"]), 0);
    assert_eq!(
        ok(&mut c, &["TYPE", "idx"]),
        Value::SimpleString("vectorset".into())
    );

    assert_eq!(
        int(
            &mut c,
            &["VSIM.SET", "idx", "a", "1", "0", "0", "ATTR", r#"{"k": 1}"#]
        ),
        1
    );
    assert_eq!(int(&mut c, &["VSIM.SET", "idx", "b", "[0, 1, 0]"]), 1);
    assert_eq!(int(&mut c, &["VSIM.SET", "idx", "c", "0,0,1"]), 1);
    let blob: Vec<u8> = [0f32, 0.0, 2.0]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .collect();
    let r: i64 = redis::cmd("VSIM.SET")
        .arg("idx")
        .arg("c")
        .arg(blob)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, 0, "upsert");
    assert_eq!(
        err(&mut c, &["VSIM.SET", "idx", "d", "1", "2"]),
        "ERR Vector dimension mismatch - got 2 but set has 3"
    );
    assert_eq!(
        err(&mut c, &["VSIM.SET", "idx", "d", "1", "x", "2"]),
        "ERR vector must be an FP32 blob or a list of numbers"
    );
    assert_eq!(
        err(
            &mut c,
            &["VSIM.SET", "idx", "d", "1", "1", "2", "ATTR", "[1]"]
        ),
        "ERR ATTR must be a JSON object"
    );
    assert_eq!(
        err(&mut c, &["VSIM.SET", "nope", "d", "1", "1", "2"]),
        "ERR no such vector index"
    );
    assert_eq!(int(&mut c, &["VSIM.CARD", "idx"]), 3);

    // Scores are distances (squared L2 here).
    let Value::Array(r) = ok(
        &mut c,
        &[
            "VSIM.SEARCH",
            "idx",
            "1,0,0",
            "2",
            "WITHSCORES",
            "WITHATTRS",
        ],
    ) else {
        panic!()
    };
    assert_eq!(r[0], bulk("a"));
    assert!(num(&r[1]).abs() < 1e-6);
    assert_eq!(r[2], bulk(r#"{"k": 1}"#));
    assert_eq!(r[3], bulk("b"));
    assert!((num(&r[4]) - 2.0).abs() < 1e-3);
    assert_eq!(r[5], Value::Nil);
    assert_eq!(
        names(ok(
            &mut c,
            &[
                "VSIM.SEARCH",
                "idx",
                "1 0 0",
                "3",
                "EF",
                "50",
                "FILTER",
                ".k == 1"
            ]
        )),
        ["a"]
    );
    assert_eq!(
        err(&mut c, &["VSIM.SEARCH", "idx", "1,0", "3"]),
        "ERR Vector dimension mismatch - got 2 but set has 3"
    );
    assert_eq!(
        err(&mut c, &["VSIM.SEARCH", "idx", "1,0,0", "0"]),
        "ERR K must be an integer between 1 and 1000000"
    );
    assert_eq!(
        err(&mut c, &["VSIM.SEARCH", "idx", "1,0,0", "x"]),
        "ERR K must be an integer between 1 and 1000000"
    );
    assert_eq!(
        err(
            &mut c,
            &["VSIM.SEARCH", "idx", "1,0,0", "2", "FILTER", "(("]
        ),
        "ERR syntax error in FILTER expression near: (("
    );
    assert_eq!(
        err(&mut c, &["VSIM.SEARCH", "idx", "1,0,0", "2", "BOGUS"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["VSIM.SEARCH", "nope", "1,0,0", "2"]),
        "ERR no such vector index"
    );

    assert_eq!(
        ok(&mut c, &["VSIM.GET", "idx", "c"]),
        Value::Array(vec![
            Value::Array(vec![bulk("0"), bulk("0"), bulk("2")]),
            Value::Nil
        ])
    );
    assert_eq!(ok(&mut c, &["VSIM.GET", "idx", "zz"]), Value::Nil);
    let Value::Array(info) = ok(&mut c, &["VSIM.INFO", "idx"]) else {
        panic!()
    };
    assert_eq!(info[0], bulk("dim"));
    assert_eq!(info[3], bulk("l2"));
    assert_eq!(info[5], bulk("f16"));
    assert_eq!(info[7], Value::Int(8));
    assert_eq!(info[11], Value::Int(3));
    assert_eq!(int(&mut c, &["VSIM.DEL", "idx", "a"]), 1);
    assert_eq!(int(&mut c, &["VSIM.DEL", "idx", "a"]), 0);
    assert_eq!(ok(&mut c, &["VSIM.DROP", "idx"]), Value::Okay);
    assert_eq!(
        err(&mut c, &["VSIM.DROP", "idx"]),
        "ERR no such vector index"
    );
    assert_eq!(
        err(&mut c, &["VSIM.CARD", "idx"]),
        "ERR no such vector index"
    );
    assert_eq!(
        err(&mut c, &["VSIM.INFO", "idx"]),
        "ERR no such vector index"
    );
}

#[test]
fn resp3_shapes() {
    let e = Ember::start(&[]);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", e.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    sample(&mut c, &["NOQUANT"]);
    assert_eq!(
        ok(
            &mut c,
            &["VADD", "s", "VALUES", "3", "1", "0", "0", "a", "NOQUANT"]
        ),
        Value::Boolean(false)
    );
    let Value::Map(m) = ok(
        &mut c,
        &["VSIM", "s", "ELE", "a", "WITHSCORES", "COUNT", "2"],
    ) else {
        panic!()
    };
    assert_eq!(m[0].0, bulk("a"));
    assert!(matches!(m[0].1, Value::Double(d) if (d - 1.0).abs() < 1e-6));
    let Value::Map(m) = ok(
        &mut c,
        &[
            "VSIM",
            "s",
            "ELE",
            "a",
            "WITHSCORES",
            "WITHATTRIBS",
            "COUNT",
            "1",
        ],
    ) else {
        panic!()
    };
    assert!(matches!(&m[0].1, Value::Array(p) if p.len() == 2));
    assert!(matches!(ok(&mut c, &["VINFO", "s"]), Value::Map(ref m) if m.len() == 9));
    assert_eq!(ok(&mut c, &["VISMEMBER", "s", "a"]), Value::Boolean(true));
}

#[test]
fn snapshot_round_trip() {
    let dir = temp_dir("vector-snap");
    {
        let e = Ember::start_in(&dir, None, &["--save", ""]);
        let mut c = e.conn();
        sample(&mut c, &["NOQUANT"]);
        ok(
            &mut c,
            &["VSIM.CREATEINDEX", "idx", "DIM", "2", "QUANT", "i8"],
        );
        int(
            &mut c,
            &["VSIM.SET", "idx", "p", "1,2", "ATTR", r#"{"a": 1}"#],
        );
        ok(&mut c, &["SAVE"]);
        let _ = cmd(&mut c, &["SHUTDOWN", "NOSAVE"]);
    }
    let e = Ember::start_in(&dir, None, &["--save", ""]);
    let mut c = e.conn();
    assert_eq!(int(&mut c, &["VCARD", "s"]), 4);
    assert_eq!(
        ok(&mut c, &["VGETATTR", "s", "d"]),
        bulk(r#"{"year": 2010, "genre": "drama"}"#)
    );
    assert_eq!(
        names(ok(
            &mut c,
            &["VSIM", "s", "VALUES", "3", "1", "0", "0", "COUNT", "2"]
        )),
        ["a", "b"]
    );
    assert_eq!(int(&mut c, &["VSIM.CARD", "idx"]), 1);
    assert_eq!(
        names(ok(
            &mut c,
            &["VSIM.SEARCH", "idx", "1,2", "1", "FILTER", ".a == 1"]
        )),
        ["p"]
    );
    // DUMP / RESTORE carry the whole set.
    let dump: Vec<u8> = redis::cmd("DUMP").arg("s").query(&mut c).unwrap();
    let r: Value = redis::cmd("RESTORE")
        .arg("s2")
        .arg(0)
        .arg(dump)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, Value::Okay);
    assert_eq!(int(&mut c, &["VCARD", "s2"]), 4);
    let _ = std::fs::remove_dir_all(&dir);
}
