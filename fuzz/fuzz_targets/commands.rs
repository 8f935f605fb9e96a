//! Runs arbitrary command sequences through the real command table against one in-process
//! node (no sockets): every command parser (numbers, ranges, stream ids, BITFIELD types,
//! geo units, SORT options, HyperLogLog strings given by SET ...) must answer or return an
//! error, never panic. Commands that stop, sleep, reconfigure the process or run Lua are
//! left out.

#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use node::client::{BlockMode, Client, ClientInfo};
use node::config::Config;
use node::ctx::{run_command, Ctx};
use node::server::Server;
use resp::{Args, Limits, Protocol, ReplyWriter, RequestKind, RequestParser};

const SKIP: &[&str] = &[
    "shutdown",
    "debug",
    "config|set",
    "config|rewrite",
    "client|pause",
    "client|kill",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "function",
    "script",
];

fn server() -> &'static Arc<Server> {
    static S: OnceLock<Arc<Server>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Server::new(Config::default(), 1, None, None)))
}

fn run(server: &Arc<Server>, client: &mut Client, out: &mut ReplyWriter, args: Args<'_>) {
    let reg = &server.registry;
    let Ok(idx) = reg.resolve(&args) else {
        return;
    };
    let entry = reg.entry(idx);
    if entry.spec.handler.is_none() || !entry.spec.arity_ok(args.len()) {
        return;
    }
    let name = entry.full_name.as_str();
    if SKIP.iter().any(|s| name == *s || name.starts_with(&format!("{s}|"))) {
        return;
    }
    let stats = server.workers[0].clone();
    let mut ctx = Ctx {
        server,
        client,
        out,
        stats: &stats,
        now: storage::clock::now_ns(),
        rng: node::ctx::CmdRng::Thread,
        park: None,
    };
    let _ = run_command(&mut ctx, idx, args);
    // Nothing may stay asked-for: no client waits here.
    client.block_request = None;
    client.ready_keys.clear();
}

fuzz_target!(|data: &[u8]| {
    let server = server();
    let info = Arc::new(ClientInfo::new(
        1,
        "127.0.0.1:1".parse().expect("addr"),
        "127.0.0.1:2".parse().expect("addr"),
        -1,
    ));
    let mut client = Client::new(info, true);
    client.block_mode = BlockMode::NoBlock;
    let mut out = ReplyWriter::new(Protocol::Resp2);
    let mut parser = RequestParser::new(Limits::default());
    let mut spans = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        match parser.parse(&data[pos..], &mut spans) {
            Ok(Some((consumed, kind))) => {
                if !spans.is_empty() {
                    let buf: &[u8] = match kind {
                        RequestKind::Inline => parser.inline_buf(),
                        RequestKind::Multibulk => &data[pos..],
                    };
                    run(server, &mut client, &mut out, Args::new(buf, &spans));
                }
                pos += consumed.max(1);
                out.clear();
            }
            _ => break,
        }
    }
    // What a closing connection releases (conn.rs `serve`), then an empty keyspace.
    node::cmd::pubsub::unsubscribe_all(server, &mut client);
    server.tracking.remove_client(1);
    let watched = std::mem::take(&mut client.watched);
    server.watches.unwatch_all(&client.info, &watched);
    // Every input starts from an empty keyspace.
    let mut all = server.keyspace.lock_all(0);
    for shard in all.shards_mut() {
        for db in 0..server.keyspace.db_count() {
            let _ = shard.table(db).take();
        }
    }
});
