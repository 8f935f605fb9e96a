//! In-process benchmark of [`vector::VectorIndex`] on a `.npy` dataset (float32, 2-D):
//! build time, then recall@10 and single-thread QPS at EF 40/80/150.
//!
//! `cargo run --release -p ember-vector --example ann -- DATA_DIR [N]` where DATA_DIR has
//! base.npy, queries.npy (and gt.npy for the full base; a subset computes its own truth).

use std::time::Instant;

use vector::{AttrUpdate, IndexConfig, SearchOpts, VectorIndex};

/// Reads a little-endian float32 (or int64) 2-D `.npy`: (rows, cols, raw bytes).
fn npy(path: &str) -> (usize, usize, Vec<u8>) {
    let b = std::fs::read(path).expect("read npy");
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = std::str::from_utf8(&b[10..10 + hl]).expect("header");
    let shape = &header[header.find("'shape': (").expect("shape") + 10..];
    let shape = &shape[..shape.find(')').expect("shape end")];
    let dims: Vec<usize> = shape
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("dim"))
        .collect();
    (dims[0], dims[1], b[10 + hl..].to_vec())
}

fn floats(raw: &[u8]) -> Vec<f32> {
    raw.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("DATA_DIR");
    let (rows, dim, raw) = npy(&format!("{dir}/base.npy"));
    let n = args
        .get(2)
        .map_or(rows, |s| s.parse().expect("N"))
        .min(rows);
    let base = floats(&raw[..n * dim * 4]);
    let (nq, _, qraw) = npy(&format!("{dir}/queries.npy"));
    let queries = floats(&qraw);
    let truth: Vec<Vec<usize>> = (0..nq)
        .map(|i| {
            let q = &queries[i * dim..(i + 1) * dim];
            let mut d: Vec<(f32, usize)> = (0..n)
                .map(|j| {
                    let v = &base[j * dim..(j + 1) * dim];
                    (-q.iter().zip(v).map(|(a, b)| a * b).sum::<f32>(), j)
                })
                .collect();
            d.select_nth_unstable_by(10, |a, b| a.0.total_cmp(&b.0));
            d.truncate(10);
            d.into_iter().map(|x| x.1).collect()
        })
        .collect();
    let idx = VectorIndex::new(IndexConfig::new(dim)).expect("index");
    let t0 = Instant::now();
    for j in 0..n {
        idx.upsert(
            j.to_string().as_bytes(),
            &base[j * dim..(j + 1) * dim],
            AttrUpdate::Keep,
        )
        .expect("add");
    }
    println!(
        "n={n} dim={dim} build {:.1}s (1 thread)",
        t0.elapsed().as_secs_f64()
    );
    for ef in [40, 80, 150] {
        let t0 = Instant::now();
        let mut hits = 0;
        for (i, t) in truth.iter().enumerate() {
            let q = &queries[i * dim..(i + 1) * dim];
            let r = idx
                .search(
                    q,
                    &SearchOpts {
                        k: 10,
                        ef,
                        ..SearchOpts::default()
                    },
                )
                .expect("search");
            hits += r
                .iter()
                .filter(|h| t.contains(&std::str::from_utf8(&h.name).unwrap().parse().unwrap()))
                .count();
        }
        let s = t0.elapsed().as_secs_f64();
        println!(
            "ef={ef}: recall {:.4}, {:.0} QPS (1 thread)",
            hits as f64 / (nq * 10) as f64,
            nq as f64 / s
        );
    }
}
