//! The node's Raft state machine ([`node::cluster::ClusterStateMachine`]): three in-process
//! nodes (one `Server` each) run two data groups over raft's `LocalRouter`; real commands
//! written through a group's leader answer what redis-server answers and leave every
//! replica's keyspace equal; snapshots carry exactly one group's keys.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use node::cluster::{
    encode_batch, encode_command, encode_fcall, encode_resp3, encode_tx, key_slot, run_at,
    split_batch_reply, ClusterStateMachine, BATCH_MARKER,
};
use node::config::Config;
use node::server::Server;
use raft::openraft::{Config as RaftConfig, ServerState, SnapshotPolicy};
use raft::StateMachine;
use raft::{GroupId, LocalRouter, LocalTransport, MultiRaft, Node, NodeId, RaftDb, Request};

/// Data groups of the test cluster: slots 0-8191 and 8192-16383.
const GROUPS: u32 = 2;
const G1: GroupId = GroupId(1);
const G2: GroupId = GroupId(2);
/// Upper bound of every wait (virtual time); reached only on a bug.
const WAIT: Duration = Duration::from_secs(30);

/// One simulated node: its keyspace and its Raft groups.
struct TestNode {
    server: Arc<Server>,
    multi: MultiRaft<ClusterStateMachine, LocalTransport>,
}

/// Three nodes running both groups.
struct Cluster {
    router: LocalRouter,
    nodes: BTreeMap<NodeId, TestNode>,
    /// The leader's clock handed to requests: a counter, 1 ms per write.
    clock_ns: u64,
    _tmp: tempfile::TempDir,
}

fn raft_config() -> RaftConfig {
    RaftConfig {
        cluster_name: "ember-node-test".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        ..Default::default()
    }
}

fn new_server() -> Arc<Server> {
    Arc::new(Server::new(Config::default(), 1, None, None))
}

impl Cluster {
    async fn start() -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let router = LocalRouter::new();
        router.encode_messages(true);
        let mut nodes = BTreeMap::new();
        for id in 1..=3u64 {
            let server = new_server();
            let db = RaftDb::open(tmp.path().join(format!("node-{id}"))).unwrap();
            let multi = MultiRaft::new(id, db, raft_config(), router.transport(id)).unwrap();
            for g in [G1, G2] {
                let sm = ClusterStateMachine::new(server.clone(), g, GROUPS).unwrap();
                let group = multi.open_group(g, sm).await.unwrap();
                router.register(id, g, group.raft.clone());
            }
            nodes.insert(id, TestNode { server, multi });
        }
        let members: BTreeMap<NodeId, Node> = (1..=3u64)
            .map(|id| {
                let addr = Node::new(format!("127.0.0.1:{}", 7000 + id), format!("b:{id}"));
                (id, addr)
            })
            .collect();
        for g in [G1, G2] {
            let raft = nodes[&1].multi.group(g).unwrap().raft;
            raft.initialize(members.clone()).await.unwrap();
        }
        Cluster {
            router,
            nodes,
            clock_ns: 1_700_000_000_000_000_000,
            _tmp: tmp,
        }
    }

    fn raft(&self, id: NodeId, g: GroupId) -> raft::Raft {
        self.nodes[&id].multi.group(g).unwrap().raft
    }

    async fn leader(&self, g: GroupId) -> NodeId {
        let mut waited = Duration::ZERO;
        loop {
            for &id in self.nodes.keys() {
                let m = self.raft(id, g).metrics().borrow().clone();
                if m.state == ServerState::Leader && m.current_leader == Some(id) {
                    return id;
                }
            }
            assert!(waited < WAIT, "no leader of {g}");
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited += Duration::from_millis(10);
        }
    }

    /// Proposes `args` to group `g` through its leader at the next clock tick with `seed`;
    /// returns the reply bytes, the request's time and the entry's index.
    async fn write_seeded(&mut self, g: GroupId, args: &[&[u8]], seed: u64) -> (Bytes, u64, u64) {
        let (reply, index) = self.write_raw(g, encode_command(args), seed).await;
        (reply, self.clock_ns, index)
    }

    /// Proposes the entry bytes `entry` as they are (a command, batch, transaction or
    /// garbage) on `g`'s leader, 1 ms after the previous write: (reply, log index).
    async fn write_raw(&mut self, g: GroupId, entry: Bytes, seed: u64) -> (Bytes, u64) {
        self.clock_ns += 1_000_000;
        let req = Request::new(entry, self.clock_ns, seed);
        let leader = self.leader(g).await;
        let resp = self.raft(leader, g).client_write(req).await.unwrap();
        (resp.data.0, resp.log_id.index)
    }

    async fn write(&mut self, g: GroupId, args: &[&[u8]]) -> (Bytes, u64, u64) {
        let seed = self.clock_ns.rotate_left(17) ^ 0x5eed;
        self.write_seeded(g, args, seed).await
    }

    /// Waits until every node has applied `index` of `g`.
    async fn wait_all(&self, g: GroupId, index: u64) {
        for &id in self.nodes.keys() {
            self.raft(id, g)
                .wait(Some(WAIT))
                .applied_index_at_least(Some(index), format!("{id} applies {g}@{index}"))
                .await
                .unwrap();
        }
    }

    /// Group `g`'s snapshot on node `id` (its keys, sorted, RDB-encoded).
    fn group_bytes(&self, id: NodeId, g: GroupId) -> Vec<u8> {
        let group = self.nodes[&id].multi.group(g).unwrap();
        group.state.read(|sm| sm.snapshot())
    }

    /// Runs a read on node `id` at time `now`.
    fn read(&self, id: NodeId, args: &[&[u8]], now: u64) -> Bytes {
        run_at(&self.nodes[&id].server, &encode_command(args), now, 0)
    }

    async fn close(self) {
        for (_, n) in self.nodes {
            n.multi.close().await.unwrap();
        }
    }
}

/// A key named after `base` whose slot is in group `g`'s range (a hash tag picks it).
fn key_in(g: GroupId, base: &str) -> Vec<u8> {
    let slots = raft::group_slots(g, GROUPS).unwrap();
    (0..)
        .map(|i| format!("{{t{i}}}{base}").into_bytes())
        .find(|k| slots.contains(&key_slot(k)))
        .unwrap()
}

/// A command's RESP encoding (non-generic, so mixed byte strings coerce).
fn cmd(args: &[&[u8]]) -> Bytes {
    encode_command(args)
}

fn bulk(b: &[u8]) -> Vec<u8> {
    let mut v = format!("${}\r\n", b.len()).into_bytes();
    v.extend_from_slice(b);
    v.extend_from_slice(b"\r\n");
    v
}

#[test]
fn t00_key_slot_is_redis_cluster_s() {
    assert_eq!(key_slot(b"foo"), 12_182);
    assert_eq!(key_slot(b"123456789"), 12_739);
    assert_eq!(
        key_slot(b"{user1000}.following"),
        key_slot(b"{user1000}.followers")
    );
    assert_ne!(key_slot(b"{}a"), key_slot(b"{}b"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t10_writes_replicate_with_redis_replies_and_equal_keyspaces() {
    let mut c = Cluster::start().await;
    let (s, n, l, st, h, z, x, e1, e2) = (
        key_in(G1, "str"),
        key_in(G1, "counter"),
        key_in(G2, "list"),
        key_in(G1, "set"),
        key_in(G2, "hash"),
        key_in(G2, "zset"),
        key_in(G1, "stream"),
        key_in(G2, "e1"),
        key_in(G2, "e2"),
    );

    // SET with a relative expiry: the deadline is the leader's time plus 100 s everywhere.
    let (r, t_set, _) = c.write(G1, &[b"SET", &s, b"hello", b"EX", b"100"]).await;
    assert_eq!(&r[..], b"+OK\r\n");
    let (r, _, _) = c.write(G1, &[b"INCR", &n]).await;
    assert_eq!(&r[..], b":1\r\n");
    let (r, _, _) = c.write(G1, &[b"INCRBY", &n, b"41"]).await;
    assert_eq!(&r[..], b":42\r\n");
    let (r, _, _) = c.write(G2, &[b"RPUSH", &l, b"a", b"b", b"c"]).await;
    assert_eq!(&r[..], b":3\r\n");
    let members: Vec<Vec<u8>> = (0..40).map(|i| format!("m{i}").into_bytes()).collect();
    let mut sadd: Vec<&[u8]> = vec![b"SADD", &st];
    sadd.extend(members.iter().map(|m| m.as_slice()));
    let (r, _, _) = c.write(G1, &sadd).await;
    assert_eq!(&r[..], b":40\r\n");
    let (popped, _, _) = c.write(G1, &[b"SPOP", &st, b"5"]).await;
    assert!(popped.starts_with(b"*5\r\n"), "{popped:?}");
    let (one, _, _) = c.write(G1, &[b"SPOP", &st]).await;
    assert!(one.starts_with(b"$"), "{one:?}");
    let (r, _, _) = c
        .write(G2, &[b"HSET", &h, b"f1", b"v1", b"f2", b"v2"])
        .await;
    assert_eq!(&r[..], b":2\r\n");
    let (r, _, _) = c.write(G2, &[b"ZADD", &z, b"1", b"a", b"2.5", b"b"]).await;
    assert_eq!(&r[..], b":2\r\n");
    let (r, t_x, _) = c.write(G1, &[b"XADD", &x, b"*", b"f", b"v"]).await;
    let id = format!("{}-0", t_x / 1_000_000);
    assert_eq!(&r[..], &bulk(id.as_bytes())[..]);
    let script = b"redis.call('SET', KEYS[1], ARGV[1]); \
                   redis.call('PEXPIRE', KEYS[1], 5000); \
                   return redis.call('RPUSH', KEYS[2], ARGV[1], ARGV[1])";
    let (r, t_eval, _) = c.write(G2, &[b"EVAL", script, b"2", &e1, &e2, b"x"]).await;
    assert_eq!(&r[..], b":2\r\n");
    let (r, _, i1) = c.write(G1, &[b"GET", &s]).await;
    assert_eq!(&r[..], &bulk(b"hello")[..]);
    let (_, t_last, i2) = c.write(G2, &[b"LRANGE", &l, b"0", b"-1"]).await;

    c.wait_all(G1, i1).await;
    c.wait_all(G2, i2).await;
    for g in [G1, G2] {
        let leader_bytes = c.group_bytes(1, g);
        for id in [2, 3] {
            assert_eq!(c.group_bytes(id, g), leader_bytes, "{g} on node {id}");
        }
    }
    let deadline = format!(":{}\r\n", t_set / 1_000_000 + 100_000);
    let e1_deadline = format!(":{}\r\n", t_eval / 1_000_000 + 5_000);
    let smembers = c.read(1, &[b"SMEMBERS", &st], t_last);
    assert!(smembers.starts_with(b"*34\r\n"), "{smembers:?}");
    for id in 1..=3 {
        let now = t_last;
        assert_eq!(
            &c.read(id, &[b"PEXPIRETIME", &s], now)[..],
            deadline.as_bytes()
        );
        assert_eq!(&c.read(id, &[b"GET", &n], now)[..], b"$2\r\n42\r\n");
        assert_eq!(
            &c.read(id, &[b"LRANGE", &l, b"0", b"-1"], now)[..],
            b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(c.read(id, &[b"SMEMBERS", &st], now), smembers);
        assert_eq!(&c.read(id, &[b"SCARD", &st], now)[..], b":34\r\n");
        assert_eq!(&c.read(id, &[b"HGET", &h, b"f2"], now)[..], b"$2\r\nv2\r\n");
        assert_eq!(
            &c.read(id, &[b"ZSCORE", &z, b"b"], now)[..],
            b"$3\r\n2.5\r\n"
        );
        assert_eq!(&c.read(id, &[b"XLEN", &x], now)[..], b":1\r\n");
        assert_eq!(&c.read(id, &[b"GET", &e1], now)[..], b"$1\r\nx\r\n");
        assert_eq!(
            &c.read(id, &[b"PEXPIRETIME", &e1], now)[..],
            e1_deadline.as_bytes()
        );
        // The popped members are gone everywhere.
        let member = &one[one.iter().position(|&b| b == b'\n').unwrap() + 1..one.len() - 2];
        assert_eq!(
            &c.read(id, &[b"SISMEMBER", &st, member], now)[..],
            b":0\r\n"
        );
        // Past the leader-given deadline the key is gone on every replica.
        let later = t_set + 101 * 1_000_000_000;
        assert_eq!(&c.read(id, &[b"GET", &s], later)[..], b"$-1\r\n");
    }
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t20_same_seed_same_pops_other_seed_other_pops() {
    // SPOP's choice comes from the request's seed: the same seed on two fresh nodes pops
    // the same members, so it does not depend on the replica.
    let k = key_in(G1, "s");
    let mut add: Vec<Vec<u8>> = vec![b"SADD".to_vec(), k.clone()];
    add.extend((0..100).map(|i| format!("m{i}").into_bytes()));
    let pop = cmd(&[b"SPOP", &k, b"10"]);
    let run = |seed: u64| {
        let s = new_server();
        run_at(&s, &encode_command(&add), 1, 0);
        run_at(&s, &pop, 2, seed)
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    let srand = |seed: u64| {
        let s = new_server();
        run_at(&s, &encode_command(&add), 1, 0);
        run_at(&s, &cmd(&[b"SRANDMEMBER", &k, b"-5"]), 2, seed)
    };
    assert_eq!(srand(3), srand(3));
    let hrand = |seed: u64| {
        let s = new_server();
        run_at(
            &s,
            &cmd(&[b"HSET", &k, b"a", b"1", b"b", b"2", b"c", b"3"]),
            1,
            0,
        );
        run_at(&s, &cmd(&[b"HRANDFIELD", &k, b"-8"]), 2, seed)
    };
    assert_eq!(hrand(5), hrand(5));
    // A script's math.random restarts from the seed: what other scripts drew on this
    // replica before does not matter.
    let script = cmd(&[
        b"EVAL",
        b"return {math.random(1000000), math.random(1000000)}",
        b"0",
    ]);
    let draw = |seed: u64, warm_up: usize| {
        let s = new_server();
        for _ in 0..warm_up {
            run_at(&s, &cmd(&[b"EVAL", b"return math.random()", b"0"]), 1, 0);
        }
        run_at(&s, &script, 2, seed)
    };
    assert_eq!(draw(11, 0), draw(11, 3));
    assert_ne!(draw(11, 0), draw(12, 0));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t30_garbage_and_foreign_commands_answer_errors_and_replicas_stay_equal() {
    let mut c = Cluster::start().await;
    let k = key_in(G1, "k");
    let (r, _, _) = c.write(G1, &[b"SET", &k, b"1"]).await;
    assert_eq!(&r[..], b"+OK\r\n");
    let mut last = 0;
    for bad in [
        &b""[..],
        b"\xff\x00garbage",
        b"*2\r\n$3\r\nGET\r\n",
        b"*1\r\n$3\r\nGET\r\nextra",
        b"PING\r\n",
        b"*-1\r\n",
        b"*1\r\n$-5\r\n",
    ] {
        let (reply, index) = c.write_raw(G1, Bytes::copy_from_slice(bad), 1).await;
        assert!(
            reply.starts_with(b"-ERR Protocol error"),
            "{bad:?} -> {reply:?}"
        );
        last = index;
    }
    let (r, _, _) = c.write(G1, &[b"NOSUCHCMD", b"a"]).await;
    assert_eq!(
        &r[..],
        b"-ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' \r\n"
    );
    let (r, _, _) = c.write(G1, &[b"GET"]).await;
    assert_eq!(
        &r[..],
        b"-ERR wrong number of arguments for 'get' command\r\n"
    );
    let (r, _, _) = c.write(G1, &[b"INCR", &k, b"2"]).await;
    assert!(r.starts_with(b"-ERR wrong number"), "{r:?}");
    let (r, _, _) = c.write(G1, &[b"LPUSH", &k, b"x"]).await;
    assert!(r.starts_with(b"-WRONGTYPE"), "{r:?}");
    // A key of the other group, and writes that reach every group, are refused.
    let other = key_in(G2, "k");
    let (r, _, _) = c.write(G1, &[b"SET", &other, b"1"]).await;
    assert!(r.starts_with(b"-ERR key '"), "{r:?}");
    let (r, _, _) = c.write(G1, &[b"MSET", &k, b"2", &other, b"2"]).await;
    assert!(r.starts_with(b"-ERR key '"), "{r:?}");
    let (r, _, _) = c.write(G1, &[b"FLUSHALL", b"NOW"]).await;
    assert!(r.starts_with(b"-ERR "), "{r:?}");
    // FLUSHALL in a group empties that group's slots only.
    let (r, _, i2) = c.write(G2, &[b"SET", &other, b"1"]).await;
    assert_eq!(&r[..], b"+OK\r\n");
    c.wait_all(G2, i2).await;
    let (r, _, _) = c.write(G1, &[b"FLUSHALL"]).await;
    assert_eq!(&r[..], b"+OK\r\n");
    let (r, _, _) = c.write(G1, &[b"GET", &k]).await;
    assert_eq!(&r[..], b"$-1\r\n");
    let (r, _, _) = c.write(G1, &[b"SET", &k, b"1"]).await;
    assert_eq!(&r[..], b"+OK\r\n");
    let (r, _, i) = c.write(G1, &[b"GET", &k]).await;
    assert_eq!(&r[..], b"$1\r\n1\r\n");
    assert!(i > last);
    c.wait_all(G1, i).await;
    let bytes = c.group_bytes(1, G1);
    for id in [2, 3] {
        assert_eq!(c.group_bytes(id, G1), bytes);
        assert_eq!(&c.read(id, &[b"GET", &k], 1)[..], b"$1\r\n1\r\n");
        assert_eq!(&c.read(id, &[b"EXISTS", &other], 1)[..], b":1\r\n");
    }
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t40_snapshot_installs_one_group_and_leaves_the_others() {
    let mut c = Cluster::start().await;
    let mut i = 0;
    for n in 0..20 {
        let k = key_in(G1, &format!("k{n}"));
        i = c.write(G1, &[b"SET", &k, b"v", b"PX", b"600000"]).await.2;
    }
    let tagged = key_in(G1, "tagged");
    c.write(G1, &[b"RPUSH", &tagged, b"a"]).await;
    i = i.max(c.write(G1, &[b"TAG.SET", &tagged, b"blue"]).await.2);
    let g2key = key_in(G2, "stays");
    let i2 = c.write(G2, &[b"SET", &g2key, b"g2"]).await.2;
    c.wait_all(G1, i).await;
    c.wait_all(G2, i2).await;
    let snap = c.group_bytes(2, G1);

    // A fresh node with a stale key of group 1 and a key of group 2.
    let fresh = new_server();
    let stale = key_in(G1, "stale");
    let kept = key_in(G2, "kept");
    run_at(&fresh, &cmd(&[b"SET", &stale, b"old"]), 1, 0);
    run_at(&fresh, &cmd(&[b"SET", &kept, b"mine"]), 1, 0);
    let mut sm = ClusterStateMachine::new(fresh.clone(), G1, GROUPS).unwrap();
    let before = sm.snapshot();
    assert!(sm.install(b"REDIS0010 not really").is_err());
    assert!(sm.install(&snap[..snap.len() - 1]).is_err());
    assert_eq!(sm.snapshot(), before, "a bad snapshot changes nothing");
    // A snapshot of the other group is refused too.
    let g2snap = c.group_bytes(1, G2);
    assert!(sm.install(&g2snap).is_err());

    sm.install(&snap).unwrap();
    assert_eq!(sm.snapshot(), snap);
    let at = c.clock_ns;
    let get = |k: &[u8]| run_at(&fresh, &cmd(&[b"GET", k]), at, 0);
    assert_eq!(&get(&stale)[..], b"$-1\r\n");
    assert_eq!(&get(&kept)[..], b"$4\r\nmine\r\n");
    assert_eq!(&get(&key_in(G1, "k7"))[..], b"$1\r\nv\r\n");
    let tags = run_at(&fresh, &cmd(&[b"TAG.GET", &tagged]), at, 0);
    assert_eq!(&tags[..], b"*1\r\n$4\r\nblue\r\n");
    let g2 = ClusterStateMachine::new(fresh.clone(), G2, GROUPS).unwrap();
    assert_eq!(&run_at(&fresh, &cmd(&[b"DBSIZE"]), at, 0)[..], b":22\r\n");
    assert!(g2.owns(&kept) && !g2.owns(&stale));
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t50_lagging_replica_catches_up_by_raft_snapshot() {
    let mut c = Cluster::start().await;
    let mut last = 0;
    for n in 0..5 {
        last = c
            .write(G1, &[b"RPUSH", &key_in(G1, "l"), format!("{n}").as_bytes()])
            .await
            .2;
    }
    c.wait_all(G1, last).await;
    let leader = c.leader(G1).await;
    let lagging = if leader == 3 { 2 } else { 3 };
    c.router.isolate(lagging);
    let set = key_in(G1, "s");
    let mut add: Vec<&[u8]> = vec![b"SADD", &set];
    let members: Vec<Vec<u8>> = (0..30).map(|i| format!("{i}").into_bytes()).collect();
    add.extend(members.iter().map(|m| m.as_slice()));
    c.write(G1, &add).await;
    for _ in 0..5 {
        c.write(G1, &[b"SPOP", &set, b"2"]).await;
    }
    last = c.write(G1, &[b"INCR", &key_in(G1, "n")]).await.2;
    let raft = c.raft(leader, G1);
    raft.trigger().snapshot().await.unwrap();
    raft.wait(Some(WAIT))
        .metrics(|m| m.snapshot.map(|s| s.index) >= Some(last), "snapshot")
        .await
        .unwrap();
    raft.trigger().purge_log(last).await.unwrap();
    raft.wait(Some(WAIT))
        .metrics(|m| m.purged.map(|p| p.index) >= Some(last), "purged")
        .await
        .unwrap();
    c.router.heal(lagging);
    c.wait_all(G1, last).await;
    let lag = c.raft(lagging, G1);
    let snap = lag.metrics().borrow().snapshot;
    assert!(snap.map(|s| s.index) >= Some(last), "caught up by snapshot");
    assert_eq!(c.group_bytes(lagging, G1), c.group_bytes(leader, G1));
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t60_a_batch_entry_applies_its_commands_in_order_on_every_replica() {
    let mut c = Cluster::start().await;
    let (a, b) = (key_in(G1, "ba"), key_in(G1, "bb"));
    let cmds: Vec<Bytes> = [
        &[&b"SET"[..], &a, b"1"][..],
        &[b"INCR", &a],
        &[b"LPUSH", &a, b"x"],
        &[b"SADD", &b, b"m1", b"m2", b"m3"],
        &[b"SPOP", &b],
        &[b"GET", &a],
    ]
    .iter()
    .map(|c| encode_command(c))
    .collect();
    let batch = encode_batch(&cmds);
    assert!(batch.starts_with(BATCH_MARKER));
    let (reply, index) = c.write_raw(G1, batch, 7).await;
    let replies = split_batch_reply(&reply, cmds.len());
    assert_eq!(&replies[0][..], b"+OK\r\n");
    assert_eq!(&replies[1][..], b":2\r\n");
    assert!(replies[2].starts_with(b"-WRONGTYPE"), "{:?}", replies[2]);
    assert_eq!(&replies[3][..], b":3\r\n");
    assert!(replies[4].starts_with(b"$2\r\nm"), "{:?}", replies[4]);
    assert_eq!(&replies[5][..], b"$1\r\n2\r\n");
    c.wait_all(G1, index).await;
    let bytes = c.group_bytes(1, G1);
    for id in [2, 3] {
        assert_eq!(c.group_bytes(id, G1), bytes);
    }
    // A batch cut short by bytes that do not decode answers the rest with errors.
    let mut bad = encode_batch(&cmds[..1]).to_vec();
    bad.extend_from_slice(b"*1\r\n$4\r\nPI");
    let (reply, _) = c.write_raw(G1, Bytes::from(bad), 8).await;
    let replies = split_batch_reply(&reply, 2);
    assert_eq!(&replies[0][..], b"+OK\r\n");
    assert!(
        replies[1].starts_with(b"-ERR Protocol error"),
        "{:?}",
        replies[1]
    );
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t70_a_transaction_entry_runs_as_exec_on_every_replica() {
    let mut c = Cluster::start().await;
    let (a, b) = (key_in(G1, "ta"), key_in(G1, "tb"));
    let tx = |cmds: &[&[&[u8]]]| {
        let cmds: Vec<Bytes> = cmds.iter().map(|c| encode_command(c)).collect();
        encode_tx(&cmds)
    };
    let ok = tx(&[
        &[b"SET", &a, b"1"],
        &[b"INCR", &a],
        &[b"LPUSH", &a, b"x"],
        &[b"RPUSH", &b, b"y"],
    ]);
    let (r, index) = c.write_raw(G1, ok, 3).await;
    assert!(r.starts_with(b"*4\r\n+OK\r\n:2\r\n-WRONGTYPE"), "{r:?}");
    assert!(r.ends_with(b":1\r\n"), "{r:?}");
    c.wait_all(G1, index).await;
    let bytes = c.group_bytes(1, G1);
    for id in [2, 3] {
        assert_eq!(c.group_bytes(id, G1), bytes);
        assert_eq!(&c.read(id, &[b"GET", &a], 1)[..], b"$1\r\n2\r\n");
    }
    // A key of another group, an unknown command or bytes that are not a command abort it
    // all, and nothing of it applies.
    let other = key_in(G2, "t");
    let bad_cmd: &[u8] = b"*1\r\n$4\r\nPI";
    for bad in [
        tx(&[&[b"SET", &a, b"9"], &[b"SET", &other, b"1"]]),
        tx(&[&[b"SET", &a, b"9"], &[b"NOSUCH", &a]]),
        tx(&[&[b"SET", &a, b"9"], &[b"GET"]]),
        encode_command(&[
            &b"EMBER.TX"[..],
            &encode_command(&[&b"SET"[..], &a, b"9"]),
            bad_cmd,
        ]),
    ] {
        let (reply, index) = c.write_raw(G1, bad, 4).await;
        assert!(reply.starts_with(b"-EXECABORT"), "{reply:?}");
        c.wait_all(G1, index).await;
        assert_eq!(&c.read(1, &[b"GET", &a], 1)[..], b"$1\r\n2\r\n");
    }
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t80_a_resp3_entry_answers_in_resp3_and_changes_the_same() {
    let mut c = Cluster::start().await;
    let z = key_in(G1, "z3");
    let zincr = encode_command(&[&b"ZINCRBY"[..], &z, b"1.5", b"m"]);
    let (reply, _) = c.write_raw(G1, encode_resp3(&zincr), 1).await;
    assert_eq!(&reply[..], b",1.5\r\n");
    let (reply, index) = c.write_raw(G1, zincr, 2).await;
    assert_eq!(&reply[..], b"$1\r\n3\r\n");
    c.wait_all(G1, index).await;
    let bytes = c.group_bytes(1, G1);
    for id in [2, 3] {
        assert_eq!(c.group_bytes(id, G1), bytes);
    }
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t90_a_replicated_fcall_runs_its_own_library_on_every_replica() {
    let mut c = Cluster::start().await;
    let lib = |step: &str| {
        format!(
            "#!lua name=lib\nredis.register_function('bump', function(keys, args) \
             return redis.call('INCRBY', keys[1], {step}) end)"
        )
        .into_bytes()
    };
    // Node 1 has version 1 loaded, node 2 a different version, node 3 nothing.
    let load = |code: &[u8]| encode_command(&[&b"FUNCTION"[..], b"LOAD", code]);
    run_at(&c.nodes[&1].server, &load(&lib("1")), 1, 0);
    run_at(&c.nodes[&2].server, &load(&lib("100")), 1, 0);
    let k = key_in(G1, "fc");
    let call: [&[u8]; 4] = [b"FCALL", b"bump", b"1", &k];
    let mut index = 0;
    for want in [b":1\r\n", b":2\r\n"] {
        let (reply, i) = c.write_raw(G1, encode_fcall(&lib("1"), &call), 7).await;
        assert_eq!(&reply[..], want);
        index = i;
    }
    c.wait_all(G1, index).await;
    let bytes = c.group_bytes(1, G1);
    for id in [2, 3] {
        assert_eq!(c.group_bytes(id, G1), bytes, "node {id}");
        assert_eq!(&c.read(id, &[b"GET", &k], 1)[..], b"$1\r\n2\r\n");
    }
    // Bad code, a key of another group, or no FCALL in it: errors everywhere, no change.
    let other = key_in(G2, "fc");
    let foreign: [&[u8]; 4] = [b"FCALL", b"bump", b"1", &other];
    let not_fcall: [&[u8]; 3] = [b"SET", &k, b"9"];
    for (entry, err) in [
        (
            encode_fcall(b"return 1", &call),
            &b"-ERR Missing library metadata"[..],
        ),
        (encode_fcall(&lib("1"), &foreign), b"-ERR key"),
        (encode_fcall(&lib("1"), &not_fcall), b"-ERR Protocol error"),
    ] {
        let (reply, i) = c.write_raw(G1, entry, 8).await;
        assert!(reply.starts_with(err), "{reply:?}");
        index = i;
    }
    c.wait_all(G1, index).await;
    for id in 1..=3 {
        assert_eq!(&c.read(id, &[b"GET", &k], 1)[..], b"$1\r\n2\r\n");
    }
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t95_a_script_touches_only_its_groups_keys_on_every_replica() {
    // Scripts applied in G1 that touch a key of G2 get Redis Cluster's error inside the
    // script on every replica (the client applying the entry carries G1's slots): what
    // they wrote before stays, and G2's key exists nowhere.
    let mut c = Cluster::start().await;
    let k = key_in(G1, "sk");
    let other = key_in(G2, "sk");
    const NON_LOCAL: &[u8] = b"-ERR Script attempted to access a non local key in a cluster node";
    let set_other: &[u8] = b"redis.call('SET', KEYS[1], 'before') \
                            return redis.call('SET', ARGV[1], 'boom')";
    let (r, _, _) = c.write(G1, &[b"EVAL", set_other, b"1", &k, &other]).await;
    assert!(r.starts_with(NON_LOCAL), "{r:?}");
    assert_eq!(&c.read(1, &[b"GET", &k], 1)[..], &bulk(b"before")[..]);
    // redis.pcall gets the error as a value.
    let pcall: &[u8] = b"return redis.pcall('SET', ARGV[1], 'boom')['err']";
    let (r, _, _) = c.write(G1, &[b"EVAL", pcall, b"1", &k, &other]).await;
    assert!(r.windows(20).any(|w| w == b"a non local key in a"), "{r:?}");
    // A function, and a script inside a transaction entry.
    let lib = b"#!lua name=sk\nredis.register_function('setarg', function(keys, args) \
                return redis.call('SET', args[1], 'boom') end)";
    let call: [&[u8]; 5] = [b"FCALL", b"setarg", b"1", &k, &other];
    let (r, _) = c.write_raw(G1, encode_fcall(lib, &call), 5).await;
    assert!(r.starts_with(NON_LOCAL), "{r:?}");
    let tx = encode_tx(&[
        cmd(&[b"SET", &k, b"tx"]),
        cmd(&[
            b"EVAL",
            b"return redis.call('SET', ARGV[1], 'boom')",
            b"1",
            &k,
            &other,
        ]),
    ]);
    let (r, _) = c.write_raw(G1, tx, 6).await;
    assert!(r.starts_with(b"*2\r\n+OK\r\n-ERR Script attempted to access a non local key"));
    // Without keys, even the group's own key is not local.
    let keyless: &[u8] = b"return redis.call('SET', ARGV[1], 'boom')";
    let (r, _, i) = c.write(G1, &[b"EVAL", keyless, b"0", &k]).await;
    assert!(r.starts_with(NON_LOCAL), "{r:?}");
    c.wait_all(G1, i).await;
    let bytes = c.group_bytes(1, G1);
    for id in 1..=3 {
        assert_eq!(c.group_bytes(id, G1), bytes, "node {id}");
        assert_eq!(&c.read(id, &[b"GET", &k], 1)[..], &bulk(b"tx")[..]);
        assert_eq!(&c.read(id, &[b"EXISTS", &other], 1)[..], b":0\r\n");
    }
    c.close().await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn t97_format_an_entry_of_a_newer_format_stops_every_replica_applying() {
    // A leader of a newer release proposes an entry of the next format: no replica of this
    // release applies it (nor anything after it); each group member stops its Raft with
    // the format error instead. The other group goes on.
    let mut c = Cluster::start().await;
    let k = key_in(G1, "before");
    let (_, _, i) = c.write(G1, &[b"SET", &k, b"1"]).await;
    c.wait_all(G1, i).await;
    let leader = c.leader(G1).await;
    let mut newer = Request::new(cmd(&[b"SET", &key_in(G1, "newer"), b"2"]), c.clock_ns, 1);
    newer.format = raft::ENTRY_FORMAT + 1;
    let e = c.raft(leader, G1).client_write(newer).await.unwrap_err();
    assert!(e.to_string().contains("format version 2"), "{e}");
    for id in 1..=3 {
        let raft = c.raft(id, G1);
        raft.wait(Some(WAIT))
            .metrics(|m| m.running_state.is_err(), "group 1 stops")
            .await
            .unwrap();
        let stopped = raft.metrics().borrow().running_state.clone().unwrap_err();
        assert!(
            stopped.to_string().contains("Raft log entry format version 2 is newer than this build of Ember reads (versions 1 to 1)"),
            "node {id}: {stopped}"
        );
        assert_eq!(
            raft.metrics().borrow().last_applied.map(|l| l.index),
            Some(i)
        );
        assert_eq!(&c.read(id, &[b"GET", &k], 1)[..], b"$1\r\n1\r\n");
        assert_eq!(
            &c.read(id, &[b"EXISTS", &key_in(G1, "newer")], 1)[..],
            b":0\r\n"
        );
    }
    let (r, _, _) = c.write(G2, &[b"SET", &key_in(G2, "other"), b"ok"]).await;
    assert_eq!(&r[..], b"+OK\r\n");
    for (_, n) in c.nodes {
        let _ = n.multi.close().await;
    }
}

#[test]
fn t98_format_group_snapshots_carry_the_rdb_format_and_refuse_a_newer_one() {
    let server = new_server();
    let k = key_in(G1, "k");
    run_at(&server, &cmd(&[b"SET", &k, b"v"]), 1, 0);
    let sm = ClusterStateMachine::new(server, G1, GROUPS).unwrap();
    let snap = sm.snapshot();
    // The RDB stream starts with storage's format field: AUX "ember-fmt" = 1.
    assert!(
        snap.starts_with(b"REDIS0010\xfa\x09ember-fmt\xc0\x01"),
        "{snap:?}"
    );
    let mut fresh = ClusterStateMachine::new(new_server(), G1, GROUPS).unwrap();
    fresh.install(&snap).unwrap();
    assert_eq!(fresh.snapshot(), snap);
    // The same stream claiming format 2 (checksum 0: not checked) is refused, naming it.
    let mut newer = snap.clone();
    newer[21] = 2;
    let n = newer.len();
    newer[n - 8..].fill(0);
    let before = fresh.snapshot();
    let e = fresh.install(&newer).unwrap_err();
    assert!(
        e.to_string()
            .contains("Ember format version 2 (AUX field ember-fmt)"),
        "{e}"
    );
    assert_eq!(fresh.snapshot(), before);
}
