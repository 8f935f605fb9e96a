//! The context a command handler runs in: the server, the calling client, the reply
//! writer and the command's timestamp.

use std::sync::Arc;

use resp::ReplyWriter;
use storage::{KeyGuard, Keyspace, MultiGuard, Parked};

use crate::client::Client;
use crate::server::Server;
use crate::stats::WorkerStats;

/// Everything a handler may touch.
pub struct Ctx<'a> {
    /// The node.
    pub server: &'a Arc<Server>,
    /// The calling connection.
    pub client: &'a mut Client,
    /// Where the reply goes.
    pub out: &'a mut ReplyWriter,
    /// This worker's counters.
    pub stats: &'a WorkerStats,
    /// The command's time, ns since the epoch (expiry is evaluated against it).
    pub now: u64,
    /// Where the command's random choices come from (SPOP, SRANDMEMBER, HRANDFIELD,
    /// ZRANDMEMBER): the thread RNG on a single node, a leader-chosen seed in a Raft apply.
    pub rng: CmdRng,
    /// Where [`Ctx::lock`] keeps its shard locked after the guard is dropped, for the next
    /// command of the batch (a BATCH_LOCK command in a single-node batch; see
    /// [`Parked`]); None everywhere else.
    pub park: Option<&'a Parked<'a>>,
}

/// The random source of one command (and of the commands a script or EXEC runs for it).
///
/// A single node draws from the thread RNG, as before; a replicated write draws from a
/// sequence fixed by the seed the leader put in its log entry, so every replica makes the
/// same choices (see DESIGN.md, "Determinism of writes").
#[derive(Debug, Clone)]
pub enum CmdRng {
    /// `rand::rng()`, the thread's RNG.
    Thread,
    /// SplitMix64 from a seed: its own algorithm here, so the sequence a seed gives never
    /// changes with a `rand` upgrade (replicas on different builds still agree).
    Seeded(u64),
}

impl CmdRng {
    /// A deterministic source for `seed`.
    pub fn seeded(seed: u64) -> Self {
        CmdRng::Seeded(seed)
    }
}

impl rand::RngCore for CmdRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        match self {
            CmdRng::Thread => rand::rng().next_u64(),
            CmdRng::Seeded(state) => {
                *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            }
        }
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

impl<'a> Ctx<'a> {
    /// The keyspace (borrowed from the server, not from the context).
    pub fn ks(&self) -> &'a Keyspace {
        &self.server.keyspace
    }

    /// Locks `key` in the client's database.
    pub fn lock<'k>(&self, key: &'k [u8]) -> KeyGuard<'a, 'k> {
        match self.park {
            Some(p) => self
                .server
                .keyspace
                .lock_parked(p, self.client.db, key, self.now),
            None => self.server.keyspace.lock(self.client.db, key, self.now),
        }
    }

    /// Locks the shards of all `keys` (ascending order) for an atomic multi-key command.
    pub fn lock_keys<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> MultiGuard<'a> {
        if let Some(p) = self.park {
            p.release();
        }
        self.server.keyspace.lock_keys(keys, self.now)
    }

    /// The client's database.
    pub fn db(&self) -> usize {
        self.client.db
    }

    /// Argument `i` of this command is secret (a password): SLOWLOG and MONITOR show it
    /// as `(redacted)` (Redis's redactClientCommandArgument).
    pub fn redact(&mut self, i: usize) {
        self.client.redacted.push(i as u32);
    }

    /// Counts a keyspace hit or miss (INFO keyspace_hits / keyspace_misses).
    pub fn hit(&self, found: bool) {
        WorkerStats::add(
            if found {
                &self.stats.hits
            } else {
                &self.stats.misses
            },
            1,
        );
    }
}
