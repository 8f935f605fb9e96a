//! What the generator sends: the commands, their key patterns, and RESP encoding.
//!
//! Key patterns (all keys uniform at random over their range, per request):
//!
//! | command | request |
//! |---|---|
//! | SET, SETNX, APPEND | `key:<n>` + the fixed value, n < keyspace |
//! | GET | `key:<n>` |
//! | MGET | `--mget-keys` independent `key:<n>` |
//! | MSET | `--mset-pairs` pairs of `key:<n>` + value |
//! | INCR | `counter:<n>`, n < keyspace (apart from `key:*`, whose values are not integers) |
//! | LPUSH, RPUSH | `list:<c>` + value, c < `--collections` |
//! | SADD | `set:<c>` + member `m:<n>`, n < keyspace |
//! | HSET | `hash:<c>` + field `f:<n>` + value, n < keyspace |
//! | PING | no key |
//!
//! The value is one fixed string of `--data-size` random alphanumeric bytes, drawn
//! once from `--seed`.

/// A fast non-cryptographic PRNG (wyrand): one multiply per draw.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value, including 0, is fine).
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xA076_1D64_78BD_642F);
        let t = (self.0 as u128).wrapping_mul((self.0 ^ 0xE703_7ED1_A0B4_28DB) as u128);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// A uniform draw in `0..n` (multiply-high; `n` must be > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The commands the generator can send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `SET key:<n> value`
    Set,
    /// `GET key:<n>`
    Get,
    /// `MGET key:<n>...`
    Mget,
    /// `SETNX key:<n> value`
    Setnx,
    /// `APPEND key:<n> value`
    Append,
    /// `INCR counter:<n>`
    Incr,
    /// `LPUSH list:<c> value`
    Lpush,
    /// `RPUSH list:<c> value`
    Rpush,
    /// `SADD set:<c> m:<n>`
    Sadd,
    /// `HSET hash:<c> f:<n> value`
    Hset,
    /// `MSET key:<n> value ...`
    Mset,
    /// `PING`
    Ping,
}

impl Command {
    /// Every command, in the benchmark's order.
    pub const ALL: [Command; 12] = [
        Command::Set,
        Command::Get,
        Command::Mget,
        Command::Setnx,
        Command::Append,
        Command::Incr,
        Command::Lpush,
        Command::Rpush,
        Command::Sadd,
        Command::Hset,
        Command::Mset,
        Command::Ping,
    ];

    /// The command's name as sent on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Command::Set => "SET",
            Command::Get => "GET",
            Command::Mget => "MGET",
            Command::Setnx => "SETNX",
            Command::Append => "APPEND",
            Command::Incr => "INCR",
            Command::Lpush => "LPUSH",
            Command::Rpush => "RPUSH",
            Command::Sadd => "SADD",
            Command::Hset => "HSET",
            Command::Mset => "MSET",
            Command::Ping => "PING",
        }
    }

    /// Parses a command name, case-insensitively.
    pub fn parse(s: &str) -> Option<Command> {
        Command::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
    }
}

/// Appends the decimal digits of `n` to `out`.
#[inline]
fn put_u64(out: &mut Vec<u8>, n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut n = n;
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Number of decimal digits of `n`.
#[inline]
fn digits(n: u64) -> usize {
    n.checked_ilog10().unwrap_or(0) as usize + 1
}

/// Appends the bulk string `<prefix><n>`.
#[inline]
fn put_key(out: &mut Vec<u8>, prefix: &[u8], n: u64) {
    out.push(b'$');
    put_u64(out, (prefix.len() + digits(n)) as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(prefix);
    put_u64(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends a RESP array header `*<n>` followed by the bulk string `name`.
fn put_head(out: &mut Vec<u8>, argc: usize, name: &str) {
    out.push(b'*');
    put_u64(out, argc as u64);
    out.extend_from_slice(b"\r\n$");
    put_u64(out, name.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A fully described load: the command, its key ranges, and the pre-encoded value.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The command sent by every request.
    pub command: Command,
    /// Range of `key:<n>`, `counter:<n>` and member/field numbers.
    pub keyspace: u64,
    /// Range of `list:<c>`, `set:<c>`, `hash:<c>`.
    pub collections: u64,
    /// Keys per MGET.
    pub mget_keys: usize,
    /// Pairs per MSET.
    pub mset_pairs: usize,
    /// The request prefix for commands that do not vary (`*<argc>\r\n$<len>\r\n<NAME>\r\n`).
    head: Vec<u8>,
    /// The value, already encoded as a bulk string.
    value_bulk: Vec<u8>,
}

impl Workload {
    /// Builds a workload; the value is `data_size` random alphanumeric bytes from `seed`.
    pub fn new(
        command: Command,
        keyspace: u64,
        collections: u64,
        mget_keys: usize,
        mset_pairs: usize,
        data_size: usize,
        seed: u64,
    ) -> Self {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
        let value: Vec<u8> = (0..data_size)
            .map(|_| ALNUM[rng.below(ALNUM.len() as u64) as usize])
            .collect();
        let mut value_bulk = Vec::with_capacity(data_size + 16);
        value_bulk.push(b'$');
        put_u64(&mut value_bulk, data_size as u64);
        value_bulk.extend_from_slice(b"\r\n");
        value_bulk.extend_from_slice(&value);
        value_bulk.extend_from_slice(b"\r\n");
        let argc = match command {
            Command::Ping => 1,
            Command::Get | Command::Incr => 2,
            Command::Set | Command::Setnx | Command::Append => 3,
            Command::Lpush | Command::Rpush | Command::Sadd => 3,
            Command::Hset => 4,
            Command::Mget => 1 + mget_keys,
            Command::Mset => 1 + 2 * mset_pairs,
        };
        let mut head = Vec::new();
        put_head(&mut head, argc, command.name());
        Workload {
            command,
            keyspace: keyspace.max(1),
            collections: collections.max(1),
            mget_keys,
            mset_pairs,
            head,
            value_bulk,
        }
    }

    /// Appends one request, with keys drawn from `rng`, to `out`.
    #[inline]
    pub fn write_request(&self, rng: &mut Rng, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        let ks = self.keyspace;
        match self.command {
            Command::Ping => {}
            Command::Get => put_key(out, b"key:", rng.below(ks)),
            Command::Incr => put_key(out, b"counter:", rng.below(ks)),
            Command::Set | Command::Setnx | Command::Append => {
                put_key(out, b"key:", rng.below(ks));
                out.extend_from_slice(&self.value_bulk);
            }
            Command::Lpush | Command::Rpush => {
                put_key(out, b"list:", rng.below(self.collections));
                out.extend_from_slice(&self.value_bulk);
            }
            Command::Sadd => {
                put_key(out, b"set:", rng.below(self.collections));
                put_key(out, b"m:", rng.below(ks));
            }
            Command::Hset => {
                put_key(out, b"hash:", rng.below(self.collections));
                put_key(out, b"f:", rng.below(ks));
                out.extend_from_slice(&self.value_bulk);
            }
            Command::Mget => {
                for _ in 0..self.mget_keys {
                    put_key(out, b"key:", rng.below(ks));
                }
            }
            Command::Mset => {
                for _ in 0..self.mset_pairs {
                    put_key(out, b"key:", rng.below(ks));
                    out.extend_from_slice(&self.value_bulk);
                }
            }
        }
    }

    /// Appends `SET key:<n> value` (used by the prefill).
    pub fn write_set(&self, n: u64, out: &mut Vec<u8>) {
        put_head(out, 3, "SET");
        put_key(out, b"key:", n);
        out.extend_from_slice(&self.value_bulk);
    }

    /// Appends `DEL list:<c> set:<c> hash:<c>` (used by `--cleanup`).
    pub fn write_del_collections(&self, c: u64, out: &mut Vec<u8>) {
        put_head(out, 4, "DEL");
        put_key(out, b"list:", c);
        put_key(out, b"set:", c);
        put_key(out, b"hash:", c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_set_and_get() {
        let w = Workload::new(Command::Set, 10, 5, 2, 2, 4, 1);
        let mut out = Vec::new();
        w.write_set(7, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.starts_with("*3\r\n$3\r\nSET\r\n$5\r\nkey:7\r\n$4\r\n"),
            "{s:?}"
        );
        assert_eq!(
            s.len(),
            "*3\r\n$3\r\nSET\r\n$5\r\nkey:7\r\n$4\r\n".len() + 6
        );

        let w = Workload::new(Command::Mget, 1_000_000, 5, 3, 2, 4, 1);
        let mut rng = Rng::new(3);
        let mut out = Vec::new();
        w.write_request(&mut rng, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("*4\r\n$4\r\nMGET\r\n$"), "{s:?}");
        assert_eq!(s.matches("key:").count(), 3);
        // every argument's declared length matches its bytes
        let parts: Vec<&str> = s.split("\r\n").collect();
        for pair in parts[1..parts.len() - 1].chunks(2) {
            let n: usize = pair[0][1..].parse().unwrap();
            assert_eq!(pair[1].len(), n, "{s:?}");
        }
    }

    #[test]
    fn digits_and_below() {
        for n in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
            assert_eq!(digits(n), n.to_string().len());
        }
        let mut rng = Rng::new(0);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[rng.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }

    #[test]
    fn parse_names() {
        assert_eq!(Command::parse("mget"), Some(Command::Mget));
        assert_eq!(Command::parse("HSET"), Some(Command::Hset));
        assert_eq!(Command::parse("DEL"), None);
    }
}
