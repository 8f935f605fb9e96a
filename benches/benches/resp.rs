//! RESP micro-benchmarks: parsing a pipelined batch of requests (as a connection does)
//! and encoding replies.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use resp::{Limits, Protocol, ReplyWriter, RequestParser};

/// `n` pipelined `SET key:<i> <256 bytes>` requests.
fn set_batch(n: usize) -> Vec<u8> {
    let v = vec![b'x'; 256];
    let mut out = Vec::new();
    for i in 0..n {
        let k = format!("key:{i}");
        out.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$256\r\n", k.len()).as_bytes(),
        );
        out.extend_from_slice(&v);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn parse_all(p: &mut RequestParser, data: &[u8], spans: &mut Vec<(usize, usize)>) -> usize {
    let (mut pos, mut n) = (0, 0);
    while pos < data.len() {
        match p.parse(&data[pos..], spans) {
            Ok(Some((used, _))) => {
                pos += used;
                n += 1;
            }
            _ => break,
        }
    }
    n
}

fn parser(c: &mut Criterion) {
    let mut g = c.benchmark_group("resp");
    let batch = set_batch(30);
    g.throughput(Throughput::Elements(30));
    g.bench_function("parse 30 pipelined SET 256B", |b| {
        let mut p = RequestParser::new(Limits::default());
        let mut spans = Vec::new();
        b.iter(|| assert_eq!(parse_all(&mut p, &batch, &mut spans), 30));
    });
    let gets: Vec<u8> = (0..30)
        .flat_map(|i| {
            let k = format!("key:{i}");
            format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).into_bytes()
        })
        .collect();
    g.bench_function("parse 30 pipelined GET", |b| {
        let mut p = RequestParser::new(Limits::default());
        let mut spans = Vec::new();
        b.iter(|| assert_eq!(parse_all(&mut p, &gets, &mut spans), 30));
    });
    let value = vec![b'v'; 256];
    g.bench_function("encode 30 bulk replies 256B", |b| {
        b.iter_batched_ref(
            || ReplyWriter::new(Protocol::Resp2),
            |w| {
                for _ in 0..30 {
                    w.bulk(&value);
                }
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

criterion_group!(benches, parser);
criterion_main!(benches);
