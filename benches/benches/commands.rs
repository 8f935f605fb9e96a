//! Hot-command micro-benchmarks: SET, GET, INCR, LPUSH, SADD, HSET, MGET, MSET and PING
//! run through the real command table (`run_command`) on an in-process node, no sockets:
//! what one command costs between the parser and the socket write.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use node::client::{BlockMode, Client, ClientInfo};
use node::config::Config;
use node::ctx::Ctx;
use node::exec::run_command;
use node::server::Server;
use resp::{Args, Limits, Protocol, ReplyWriter, RequestParser};

/// One parsed request, owned.
struct Req {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

fn req(args: &[&[u8]]) -> Req {
    let mut data = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        data.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        data.extend_from_slice(a);
        data.extend_from_slice(b"\r\n");
    }
    let mut spans = Vec::new();
    let mut p = RequestParser::new(Limits::default());
    p.parse(&data, &mut spans)
        .expect("valid request")
        .expect("complete request");
    Req { data, spans }
}

/// The in-process node and one client of it.
struct Node {
    server: Arc<Server>,
    client: Client,
    out: ReplyWriter,
}

impl Node {
    fn new() -> Node {
        let server = Arc::new(Server::new(Config::default(), 1, None, None));
        let info = Arc::new(ClientInfo::new(
            1,
            "127.0.0.1:1".parse().expect("addr"),
            "127.0.0.1:2".parse().expect("addr"),
            -1,
        ));
        let mut client = Client::new(info, true);
        client.block_mode = BlockMode::NoBlock;
        Node {
            server,
            client,
            out: ReplyWriter::new(Protocol::Resp2),
        }
    }

    fn run(&mut self, r: &Req) {
        let args = Args::new(&r.data, &r.spans);
        let idx = self.server.registry.resolve(&args).expect("known command");
        let stats = self.server.workers[0].clone();
        let mut ctx = Ctx {
            server: &self.server,
            client: &mut self.client,
            out: &mut self.out,
            stats: &stats,
            now: storage::clock::now_ns(),
            rng: node::ctx::CmdRng::Thread,
            park: None,
        };
        run_command(&mut ctx, idx, args).expect("command succeeds");
        self.out.clear();
    }
}

const KEYS: usize = 10_000;

fn commands(c: &mut Criterion) {
    let mut node = Node::new();
    let value = vec![b'v'; 256];
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| format!("key:{i}").into_bytes()).collect();
    for k in &keys {
        node.run(&req(&[b"SET", k, &value]));
    }
    let mut g = c.benchmark_group("commands");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.sample_size(20);
    {
        let mut bench = |name: &str, reqs: Vec<Req>| {
            g.bench_function(name, |b| {
                b.iter(|| {
                    for r in &reqs {
                        node.run(r);
                    }
                })
            });
        };
        let each = |f: &dyn Fn(usize, &[u8]) -> Req| -> Vec<Req> {
            keys.iter().enumerate().map(|(i, k)| f(i, k)).collect()
        };
        bench("SET 256B", each(&|_, k| req(&[b"SET", k, &value])));
        bench("GET hit", each(&|_, k| req(&[b"GET", k])));
        bench(
            "INCR",
            each(&|i, _| req(&[b"INCR", format!("counter:{i}").as_bytes()])),
        );
        bench(
            "LPUSH",
            each(&|i, _| req(&[b"LPUSH", format!("list:{}", i % 100).as_bytes(), &value])),
        );
        bench(
            "SADD",
            each(&|i, _| {
                req(&[
                    b"SADD",
                    format!("set:{}", i % 100).as_bytes(),
                    format!("m:{i}").as_bytes(),
                ])
            }),
        );
        bench(
            "HSET",
            each(&|i, _| {
                req(&[
                    b"HSET",
                    format!("hash:{}", i % 100).as_bytes(),
                    format!("f:{i}").as_bytes(),
                    &value,
                ])
            }),
        );
        bench(
            "MGET 8 keys",
            each(&|i, _| {
                let ks: Vec<Vec<u8>> = (0..8)
                    .map(|j| format!("key:{}", (i * 8 + j) % KEYS).into_bytes())
                    .collect();
                let mut a: Vec<&[u8]> = vec![b"MGET"];
                a.extend(ks.iter().map(|k| &k[..]));
                req(&a)
            }),
        );
        bench(
            "MSET 4 pairs",
            each(&|i, _| {
                let ks: Vec<Vec<u8>> = (0..4)
                    .map(|j| format!("key:{}", (i * 4 + j) % KEYS).into_bytes())
                    .collect();
                let mut a: Vec<&[u8]> = vec![b"MSET"];
                for k in &ks {
                    a.push(k);
                    a.push(&value);
                }
                req(&a)
            }),
        );
        bench("PING", each(&|_, _| req(&[b"PING"])));
    }
    g.finish();
}

criterion_group!(benches, commands);
criterion_main!(benches);
