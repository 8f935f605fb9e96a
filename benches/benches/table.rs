//! Keyspace micro-benchmarks: the sharded hash table's insert, lookup and overwrite of
//! string keys (what SET and GET do under the shard lock).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use storage::value::RString;
use storage::{Keyspace, Value};

const KEYS: usize = 100_000;

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS).map(|i| format!("key:{i}").into_bytes()).collect()
}

fn filled(keys: &[Vec<u8>]) -> Keyspace {
    let ks = Keyspace::new(16, 1024);
    let v = vec![b'x'; 256];
    for k in keys {
        ks.lock(0, k, 0)
            .insert(Value::String(RString::from_bytes(&v)), 0);
    }
    ks
}

fn table(c: &mut Criterion) {
    let keys = keys();
    let mut g = c.benchmark_group("keyspace");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.sample_size(20);
    g.bench_function("insert 100k new keys", |b| b.iter(|| filled(&keys)));
    let ks = filled(&keys);
    g.bench_function("get 100k hits", |b| {
        b.iter(|| {
            let mut n = 0;
            for k in &keys {
                n += usize::from(ks.lock(0, k, 0).get().is_some());
            }
            assert_eq!(n, KEYS);
        })
    });
    let v = vec![b'y'; 256];
    g.bench_function("overwrite 100k keys", |b| {
        b.iter(|| {
            for k in &keys {
                ks.lock(0, k, 0)
                    .insert(Value::String(RString::from_bytes(&v)), 0);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, table);
criterion_main!(benches);
