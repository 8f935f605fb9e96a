//! VectorIndex: recall against brute force, recall after deletions/updates/re-adds,
//! quantization, filters, concurrency and serialization.

use std::collections::HashSet;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use vector::{AttrUpdate, Filter, IndexConfig, Metric, Quant, SearchOpts, VectorIndex};

const DIM: usize = 48;

/// Clustered data: `n` points around 40 random centres.
fn dataset(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..40)
        .map(|_| (0..DIM).map(|_| rng.random_range(-1.0..1.0)).collect())
        .collect();
    (0..n)
        .map(|i| {
            let c = &centres[i % centres.len()];
            c.iter()
                .map(|x| x + rng.random_range(-0.35..0.35))
                .collect()
        })
        .collect()
}

fn cos_dist(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    1.0 - dot / (na * nb)
}

/// Exact top-k names by brute force over the live (name, vector) pairs.
fn truth(live: &[(String, Vec<f32>)], q: &[f32], k: usize) -> Vec<String> {
    let mut d: Vec<(f32, &String)> = live.iter().map(|(n, v)| (cos_dist(q, v), n)).collect();
    d.sort_by(|a, b| a.0.total_cmp(&b.0));
    d.into_iter().take(k).map(|(_, n)| n.clone()).collect()
}

fn recall(idx: &VectorIndex, live: &[(String, Vec<f32>)], queries: &[Vec<f32>], ef: usize) -> f64 {
    let k = 10;
    let mut found = 0usize;
    for q in queries {
        let gt: HashSet<String> = truth(live, q, k).into_iter().collect();
        let hits = idx
            .search(
                q,
                &SearchOpts {
                    k,
                    ef,
                    ..SearchOpts::default()
                },
            )
            .unwrap();
        assert!(hits
            .windows(2)
            .all(|w| w[0].distance <= w[1].distance + 1e-6));
        found += hits
            .iter()
            .filter(|h| gt.contains(std::str::from_utf8(&h.name).unwrap()))
            .count();
    }
    found as f64 / (queries.len() * k) as f64
}

fn build(cfg: IndexConfig, data: &[Vec<f32>]) -> (VectorIndex, Vec<(String, Vec<f32>)>) {
    let idx = VectorIndex::new(cfg).unwrap();
    let mut live = Vec::new();
    for (i, v) in data.iter().enumerate() {
        let name = format!("e{i}");
        assert!(idx.upsert(name.as_bytes(), v, AttrUpdate::Keep).unwrap());
        live.push((name, v.clone()));
    }
    (idx, live)
}

#[test]
fn recall_on_5000_vectors_then_after_deletes_updates_and_readds() {
    let data = dataset(5000, 1);
    let queries = dataset(100, 2);
    let (idx, mut live) = build(IndexConfig::new(DIM), &data);
    assert_eq!(idx.len(), 5000);
    let r = recall(&idx, &live, &queries, 100);
    assert!(r >= 0.95, "recall {r}");

    // Delete 1,000, update 1,000 with new vectors, re-add 500 of the deleted.
    let mut rng = StdRng::seed_from_u64(3);
    let fresh = dataset(1000, 4);
    let mut deleted = Vec::new();
    for _ in 0..1000 {
        let i = rng.random_range(0..live.len());
        let (name, v) = live.swap_remove(i);
        assert!(idx.remove(name.as_bytes()));
        assert!(!idx.remove(name.as_bytes()));
        deleted.push((name, v));
    }
    for (j, f) in fresh.iter().enumerate() {
        let i = (j * 3) % live.len();
        let name = live[i].0.clone();
        assert!(!idx.upsert(name.as_bytes(), f, AttrUpdate::Keep).unwrap());
        live[i].1 = f.clone();
    }
    for (name, v) in deleted.into_iter().take(500) {
        assert!(idx.upsert(name.as_bytes(), &v, AttrUpdate::Keep).unwrap());
        live.push((name, v));
    }
    assert_eq!(idx.len(), live.len());
    let r2 = recall(&idx, &live, &queries, 100);
    assert!(r2 >= 0.93, "recall after churn {r2}");

    // Every element's vector reads back (denormalized).
    for (name, v) in live.iter().take(50) {
        let got = idx.get_vector(name.as_bytes()).unwrap();
        for (a, b) in got.iter().zip(v) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }
}

#[test]
fn quantization_reduces_memory_and_keeps_recall() {
    let data = dataset(3000, 5);
    let queries = dataset(50, 6);
    let mut mem = Vec::new();
    for (quant, min_recall) in [
        (Quant::F32, 0.95),
        (Quant::F16, 0.94),
        (Quant::I8, 0.85),
        // Sign bits of 48 dimensions tie a lot inside a cluster: far above chance (0.003).
        (Quant::B1, 0.05),
    ] {
        let cfg = IndexConfig {
            quant,
            ..IndexConfig::new(DIM)
        };
        let (idx, live) = build(cfg, &data);
        let r = recall(&idx, &live, &queries, 200);
        assert!(r >= min_recall, "{quant:?} recall {r}");
        mem.push((quant, idx.memory_usage()));
        let raw = idx.get_raw(b"e1").unwrap();
        assert_eq!(raw.0.len(), quant.vector_bytes(DIM));
    }
    let f32m = mem[0].1;
    let i8m = mem[2].1;
    let b1m = mem[3].1;
    assert!(i8m < f32m, "{mem:?}");
    assert!(b1m < i8m, "{mem:?}");
}

#[test]
fn l2_and_ip_metrics_and_bad_configs() {
    let cfg = IndexConfig {
        metric: Metric::L2,
        ..IndexConfig::new(2)
    };
    let idx = VectorIndex::new(cfg).unwrap();
    idx.upsert(b"a", &[0.0, 0.0], AttrUpdate::Keep).unwrap();
    idx.upsert(b"b", &[3.0, 4.0], AttrUpdate::Keep).unwrap();
    let hits = idx.search(&[3.0, 4.0], &SearchOpts::default()).unwrap();
    assert_eq!(hits[0].name, b"b");
    assert!(hits[0].distance.abs() < 1e-6);
    assert!((hits[1].distance - 25.0).abs() < 1e-3, "squared L2");
    assert_eq!(idx.get_vector(b"b").unwrap(), vec![3.0, 4.0]);
    assert!(idx.upsert(b"c", &[1.0], AttrUpdate::Keep).is_err());
    assert!(idx
        .upsert(b"c", &[f32::NAN, 1.0], AttrUpdate::Keep)
        .is_err());
    assert!(idx.search(&[1.0], &SearchOpts::default()).is_err());

    for bad in [
        IndexConfig::new(0),
        IndexConfig {
            m: 2,
            ..IndexConfig::new(4)
        },
        IndexConfig {
            quant: Quant::I8,
            metric: Metric::L2,
            ..IndexConfig::new(4)
        },
        IndexConfig {
            ef_construction: 0,
            ..IndexConfig::new(4)
        },
    ] {
        assert!(VectorIndex::new(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn attributes_and_filtered_search() {
    let data = dataset(2000, 7);
    let idx = VectorIndex::new(IndexConfig::new(DIM)).unwrap();
    for (i, v) in data.iter().enumerate() {
        let attrs = format!(r#"{{"i": {i}, "even": {}}}"#, i % 2 == 0);
        let a = if i % 10 == 9 {
            AttrUpdate::Keep
        } else {
            AttrUpdate::Set(attrs.as_bytes())
        };
        idx.upsert(format!("e{i}").as_bytes(), v, a).unwrap();
    }
    assert_eq!(idx.attrs_count(), 1800);
    assert_eq!(
        idx.get_attrs(b"e4").unwrap().unwrap(),
        br#"{"i": 4, "even": true}"#
    );
    assert_eq!(idx.get_attrs(b"e9"), Some(None));
    assert_eq!(idx.get_attrs(b"nope"), None);

    let f = Filter::compile(b".even and .i < 1000").unwrap();
    for exact in [false, true] {
        let hits = idx
            .search(
                &data[3],
                &SearchOpts {
                    k: 20,
                    filter: Some(&f),
                    exact,
                    with_attrs: true,
                    ..SearchOpts::default()
                },
            )
            .unwrap();
        assert_eq!(hits.len(), 20, "exact={exact}");
        for h in &hits {
            let n: usize = std::str::from_utf8(&h.name[1..]).unwrap().parse().unwrap();
            assert!(n.is_multiple_of(2) && n < 1000 && n % 10 != 9, "{n}");
            assert!(h.attrs.is_some());
        }
    }
    // Nothing matches: empty, not a hang.
    let none = Filter::compile(b".i < 0").unwrap();
    let hits = idx
        .search(
            &data[0],
            &SearchOpts {
                filter: Some(&none),
                ..SearchOpts::default()
            },
        )
        .unwrap();
    assert!(hits.is_empty());

    // Update keeps attributes unless told; empty string removes them.
    idx.upsert(b"e4", &data[5], AttrUpdate::Keep).unwrap();
    assert!(idx.get_attrs(b"e4").unwrap().is_some());
    assert!(idx.set_attrs(b"e4", b""));
    assert_eq!(idx.get_attrs(b"e4"), Some(None));
    assert!(!idx.set_attrs(b"nope", b"{}"));
    assert_eq!(idx.attrs_count(), 1799);
}

#[test]
fn concurrent_searches_and_adds() {
    let data = Arc::new(dataset(4000, 8));
    let idx = Arc::new(VectorIndex::new(IndexConfig::new(DIM)).unwrap());
    for i in 0..500 {
        idx.upsert(format!("e{i}").as_bytes(), &data[i], AttrUpdate::Keep)
            .unwrap();
    }
    let mut handles = Vec::new();
    for t in 0..3 {
        let (idx, data) = (idx.clone(), data.clone());
        handles.push(std::thread::spawn(move || {
            let mut i = 500 + t;
            while i < 4000 {
                idx.upsert(format!("e{i}").as_bytes(), &data[i], AttrUpdate::Keep)
                    .unwrap();
                i += 3;
            }
        }));
    }
    for t in 0..20 {
        let (idx, data) = (idx.clone(), data.clone());
        handles.push(std::thread::spawn(move || {
            for j in 0..200 {
                let ef = [10, 40, 100][(t + j) % 3];
                let hits = idx
                    .search(
                        &data[(t * 7 + j) % 4000],
                        &SearchOpts {
                            ef,
                            ..SearchOpts::default()
                        },
                    )
                    .unwrap();
                assert!(!hits.is_empty());
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(idx.len(), 4000);
    let names: HashSet<Vec<u8>> = idx.names().into_iter().collect();
    assert_eq!(names.len(), 4000);
}

#[test]
fn serialization_round_trip_and_corruption() {
    let data = dataset(1500, 9);
    let cfg = IndexConfig {
        quant: Quant::I8,
        m: 8,
        ..IndexConfig::new(DIM)
    };
    let (idx, _) = build(cfg, &data);
    idx.set_attrs(b"e3", br#"{"a": 1}"#);
    idx.remove(b"e7");
    let bytes = idx.to_bytes();
    let back = VectorIndex::from_bytes(&bytes).unwrap();
    assert_eq!(back.config(), idx.config());
    assert_eq!(back.len(), idx.len());
    assert_eq!(back.get_attrs(b"e3").unwrap().unwrap(), br#"{"a": 1}"#);
    assert!(!back.contains(b"e7"));
    let q = SearchOpts {
        k: 5,
        ..SearchOpts::default()
    };
    assert_eq!(
        idx.search(&data[11], &q).unwrap(),
        back.search(&data[11], &q).unwrap()
    );
    // It keeps working: adds after load.
    assert!(back.upsert(b"new", &data[0], AttrUpdate::Keep).unwrap());
    assert_eq!(back.len(), idx.len() + 1);

    // Every truncation and a flipped byte anywhere are errors, never crashes.
    for cut in [0, 3, 5, 20, 40, bytes.len() / 2, bytes.len() - 1] {
        assert!(VectorIndex::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
    }
    for at in [4, 9, 30, bytes.len() / 3, bytes.len() - 12, bytes.len() - 3] {
        let mut b = bytes.clone();
        b[at] ^= 0x5a;
        let _ = VectorIndex::from_bytes(&b);
    }
    let copy = idx.deep_clone().unwrap();
    copy.remove(b"e1");
    assert!(idx.contains(b"e1"), "a deep clone is independent");
}

#[test]
fn random_links_projection() {
    let data = dataset(300, 10);
    let (idx, _) = build(IndexConfig::new(DIM), &data);
    let r = idx.random(50, true);
    assert_eq!(r.iter().collect::<HashSet<_>>().len(), 50);
    assert_eq!(idx.random(1000, true).len(), 300);
    assert_eq!(idx.random(1000, false).len(), 1000);
    let links = idx.links(b"e0").unwrap();
    assert!(!links.is_empty());
    assert!(!links.last().unwrap().is_empty(), "layer 0 has neighbours");
    assert!(idx.links(b"zzz").is_none());
    assert!(idx.max_level() >= links.len() - 1);

    let cfg = IndexConfig {
        projection_from: DIM,
        ..IndexConfig::new(16)
    };
    let p = VectorIndex::new(cfg).unwrap();
    let v = p.prepare(&data[0]).unwrap();
    assert_eq!(v.len(), 16);
    p.upsert(b"x", &v, AttrUpdate::Keep).unwrap();
    assert!(p.prepare(&data[0][..5]).is_err());
    let hits = p
        .search(&p.prepare(&data[0]).unwrap(), &SearchOpts::default())
        .unwrap();
    assert_eq!(hits[0].name, b"x");
}

/// Serialized indexes with a few bytes changed and a valid checksum recomputed (so the
/// element and graph decoders see the damage): each either loads and then searches,
/// relinks, saves and takes removals and inserts, or is refused; never a panic or a hang.
#[test]
fn damaged_graphs_with_valid_checksums_load_or_fail_cleanly() {
    const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);
    let data = dataset(120, 21);
    for quant in [Quant::F32, Quant::I8, Quant::B1] {
        let cfg = IndexConfig {
            quant,
            m: 4,
            ..IndexConfig::new(DIM)
        };
        let (idx, _) = build(cfg, &data);
        idx.remove(b"e5");
        let good = idx.to_bytes();
        let body = good.len() - 8;
        let mut rng = StdRng::seed_from_u64(77);
        let mut loaded = 0;
        for _ in 0..400 {
            let mut b = good[..body].to_vec();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(5..body);
                b[at] = match rng.random_range(0..3) {
                    0 => rng.random(),
                    1 => b[at].wrapping_add(1),
                    _ => 0xff,
                };
            }
            let sum = CRC.checksum(&b);
            b.extend_from_slice(&sum.to_le_bytes());
            let Ok(back) = VectorIndex::from_bytes(&b) else {
                continue;
            };
            loaded += 1;
            let q = &data[3];
            for exact in [false, true] {
                let o = SearchOpts {
                    k: 5,
                    exact,
                    ..SearchOpts::default()
                };
                let _ = back.search(q, &o);
            }
            let again = VectorIndex::from_bytes(&back.to_bytes()).unwrap();
            assert_eq!(again.len(), back.len());
            for name in back.names().iter().take(3) {
                let _ = back.links(name);
                assert!(back.remove(name));
            }
            assert!(back.upsert(b"new", &data[0], AttrUpdate::Keep).is_ok());
            let _ = back.search(q, &SearchOpts::default());
        }
        // Damage to vectors, names and attributes still loads: the loaded paths ran.
        assert!(loaded > 30, "{quant:?}: only {loaded} of 400 loaded");
    }
}
