//! What a peer node can send: bus RPC bytes and Raft log entries. The first byte picks the
//! entry point; none may panic.
//! - a protobuf `RaftRequest` as tonic would decode it off the wire, handed to a
//!   `BusServer` (with no groups, so only the decoding of the kind and payload runs);
//! - a `RaftRequest` with the kind and payload taken from the input directly;
//! - a log entry applied by a group's `ClusterStateMachine` (plain, batch or transaction
//!   entry bytes), whose response then goes through the batch reply splitter;
//! - a metadata group entry (INIT, ADDNODE, FORGET, FUNCTION ...) applied by a
//!   `MetaStateMachine`, or a metadata snapshot it installs (a bad one changes nothing).

#![no_main]

use std::sync::{Arc, OnceLock};

use cluster_bus::{pb, BusServer};
use libfuzzer_sys::fuzz_target;
use node::cluster::meta::{MetaStateMachine, Topology};
use node::cluster::{split_batch_reply, ClusterStateMachine, BATCH_MARKER};
use node::config::Config;
use node::server::Server;
use prost::Message;
use raft::{GroupId, Request, StateMachine};

fn server() -> &'static Arc<Server> {
    static S: OnceLock<Arc<Server>> = OnceLock::new();
    S.get_or_init(|| Arc::new(Server::new(Config::default(), 1, None, None)))
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static R: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    R.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bus = BusServer::new(1, |_| None);
    match mode % 6 {
        4 | 5 => {
            let (tx, _rx) = tokio::sync::watch::channel(Arc::new(Topology::default()));
            let mut sm = MetaStateMachine::new(tx, Some(Arc::downgrade(server())));
            if mode % 6 == 4 {
                sm.apply(1, &Request::new(rest.to_vec(), 1_000_000_000, 7));
            } else {
                let before = sm.snapshot();
                if sm.install(rest).is_err() {
                    assert_eq!(sm.snapshot(), before);
                }
            }
        }
        0 => {
            if let Ok(req) = pb::RaftRequest::decode(rest) {
                let reply = runtime().block_on(bus.handle(req));
                assert!(reply.reply.is_some());
            }
        }
        1 => {
            let Some((&kind, payload)) = rest.split_first() else {
                return;
            };
            let req = pb::RaftRequest {
                group_id: 1,
                kind: i32::from(kind % 5),
                payload: payload.to_vec().into(),
            };
            let reply = runtime().block_on(bus.handle(req));
            // No group runs here: whatever decodes, the answer is an error.
            assert!(matches!(reply.reply, Some(pb::raft_reply::Reply::Error(_))));
        }
        m => {
            let Some((&n, body)) = rest.split_first() else {
                return;
            };
            let mut command = Vec::new();
            if m == 2 {
                command.extend_from_slice(BATCH_MARKER);
            }
            command.extend_from_slice(body);
            let mut sm = ClusterStateMachine::new(server().clone(), GroupId(1), 1)
                .expect("group 1 of 1");
            let resp = sm.apply(1, &Request::new(command, 1_000_000_000, 7));
            let n = usize::from(n % 16);
            assert_eq!(split_batch_reply(&resp.0, n).len(), n);
        }
    }
});
