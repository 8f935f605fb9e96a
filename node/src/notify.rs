//! Keyspace notifications (`notify-keyspace-events`), as Redis 7.2: the event classes,
//! their text form, and publishing `__keyspace@<db>__:<key>` / `__keyevent@<db>__:<event>`
//! through pub/sub.
//!
//! While notifications are off, [`Notifier::wants`] is one relaxed atomic load.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::ctx::Ctx;
use crate::server::Server;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: keys removed because their deadline passed.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: keys evicted for maxmemory.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses of read commands.
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module key types.
pub const MODULE: u32 = 1 << 12;
/// `n`: new keys.
pub const NEW: u32 = 1 << 13;
/// `A`: alias for `g$lshzxetd`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The CONFIG SET error for an unknown class character.
pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Parses a class string (`"KEA"`); `None` when a character is not a class.
pub fn parse_flags(s: &str) -> Option<u32> {
    let mut f = 0;
    for c in s.chars() {
        f |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(f)
}

/// The canonical text of `flags`, as CONFIG GET shows it.
pub fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// The configured classes, read on every would-be event.
#[derive(Default)]
pub struct Notifier {
    flags: AtomicU32,
}

impl Notifier {
    /// Sets the configured classes.
    pub fn set(&self, flags: u32) {
        self.flags.store(flags, Relaxed);
    }

    /// True when an event of `class` would be published (the class is on and so is K or E).
    #[inline]
    pub fn wants(&self, class: u32) -> bool {
        let f = self.flags.load(Relaxed);
        f & class != 0 && f & (KEYSPACE | KEYEVENT) != 0
    }

    /// Publishes `event` on `key` in `db` if `class` is wanted.
    pub fn publish(&self, server: &Server, class: u32, event: &str, key: &[u8], db: usize) {
        let f = self.flags.load(Relaxed);
        if f & class == 0 {
            return;
        }
        let mut dbs = itoa::Buffer::new();
        let dbs = dbs.format(db).as_bytes();
        if f & KEYSPACE != 0 {
            let mut chan = Vec::with_capacity(16 + dbs.len() + key.len());
            chan.extend_from_slice(b"__keyspace@");
            chan.extend_from_slice(dbs);
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(key);
            server.pubsub.publish(false, &chan, event.as_bytes());
        }
        if f & KEYEVENT != 0 {
            let mut chan = Vec::with_capacity(16 + dbs.len() + event.len());
            chan.extend_from_slice(b"__keyevent@");
            chan.extend_from_slice(dbs);
            chan.extend_from_slice(b"__:");
            chan.extend_from_slice(event.as_bytes());
            server.pubsub.publish(false, &chan, key);
        }
    }
}

/// Which key events the keyspace should record for `flags` (see [`storage::events`]).
pub fn recording_for(flags: u32) -> u8 {
    if flags & (KEYSPACE | KEYEVENT) == 0 {
        return 0;
    }
    let mut r = 0;
    if flags & EXPIRED != 0 {
        r |= storage::events::RECORD_EXPIRED;
    }
    if flags & NEW != 0 {
        r |= storage::events::RECORD_NEW;
    }
    r
}

/// Publishes the key events this thread's keyspace accesses recorded (lazy expiries, new
/// keys), in order.
#[inline]
pub fn flush_recorded(server: &Server) {
    if storage::events::pending() {
        publish_recorded(server);
    }
}

/// [`flush_recorded`]'s work, out of line: most commands record nothing.
#[cold]
#[inline(never)]
fn publish_recorded(server: &Server) {
    for (ev, db, key) in storage::events::take() {
        let (class, name) = match ev {
            storage::events::KeyEvent::Expired => (EXPIRED, "expired"),
            storage::events::KeyEvent::New => (NEW, "new"),
            storage::events::KeyEvent::Removed => continue,
        };
        server.notify.publish(server, class, name, &key, db);
    }
}

/// Keyspace events as a handler publishes them.
impl Ctx<'_> {
    /// Publishes keyspace event `event` of `class` (see [`crate::notify`]) on `key` in the
    /// client's database, after the lazy expiries and new keys this command caused so far.
    /// One atomic load while the class is off.
    #[inline]
    pub fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.notify_db(class, event, key, self.client.db);
    }

    /// As [`Ctx::notify`] for a key in database `db` (MOVE, COPY ... DB).
    pub fn notify_db(&self, class: u32, event: &str, key: &[u8], db: usize) {
        if self.server.notify.wants(class) {
            crate::notify::flush_recorded(self.server);
            self.server
                .notify
                .publish(self.server, class, event, key, db);
        }
    }

    /// Counts a lookup of `key` by a read command: a hit, or a miss (with its `keymiss`
    /// event, as Redis's lookupKeyRead).
    pub fn hit_key(&self, found: bool, key: &[u8]) {
        self.hit(found);
        if !found {
            self.keymiss(key);
        }
    }

    /// Publishes the `keymiss` event of a read lookup of `key` that found nothing.
    pub fn keymiss(&self, key: &[u8]) {
        self.notify(crate::notify::KEY_MISS, "keymiss", key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trip() {
        for (input, canon) in [
            ("", ""),
            ("KEA", "AKE"),
            ("AKE", "AKE"),
            ("Elg", "glE"),
            ("Kx", "xK"),
            ("Em", "Em"),
            ("g$lshzxetdKE", "AKE"),
        ] {
            let f = parse_flags(input).unwrap();
            assert_eq!(flags_to_string(f), canon, "{input}");
        }
        // 'A' does not include n or m; with 'A', Redis does not print n.
        assert_eq!(flags_to_string(parse_flags("nKAm").unwrap()), "AKm");
        assert_eq!(flags_to_string(parse_flags("nK").unwrap()), "nK");
        assert!(parse_flags("KEX").is_none());
        assert!(parse_flags("a").is_none());
    }
}
