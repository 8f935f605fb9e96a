//! Command families. Each file declares its commands in a `COMMANDS` table (name, arity,
//! flags, key positions, group, handler) next to the handlers; [`families`] is the only
//! list that names them.

pub mod bitmaps;
pub mod cluster;
pub mod connection;
pub mod debug;
pub mod expiry;
pub mod geo;
pub mod hashes;
pub mod hll;
pub mod instance;
pub mod keys;
pub mod lists;
pub mod memory;
pub mod observe;
pub mod persist;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod tags;
pub mod tx;
pub mod util;
pub mod vector;
pub mod zsets;

use crate::registry::CommandSpec;

/// Every family's table, in the order COMMAND lists them.
pub fn families() -> Vec<&'static [CommandSpec]> {
    vec![
        connection::COMMANDS,
        strings::COMMANDS,
        keys::COMMANDS,
        persist::COMMANDS,
        expiry::COMMANDS,
        server::COMMANDS,
        debug::COMMANDS,
        observe::COMMANDS,
        instance::COMMANDS,
        memory::COMMANDS,
        lists::COMMANDS,
        hashes::COMMANDS,
        sets::COMMANDS,
        zsets::COMMANDS,
        bitmaps::COMMANDS,
        hll::COMMANDS,
        geo::COMMANDS,
        sort::COMMANDS,
        streams::COMMANDS,
        tags::COMMANDS,
        tx::COMMANDS,
        scripting::COMMANDS,
        pubsub::COMMANDS,
        vector::COMMANDS,
        cluster::COMMANDS,
    ]
}
