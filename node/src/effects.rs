//! Effects: what a write command did, declared by its handler as it does it, in the form
//! that replays to the same state.
//!
//! Most writes are deterministic: replaying the command's own arguments at the time it ran
//! gives the same state, and their handlers declare nothing. A handler whose arguments do
//! not say what happened declares the commands that do, with [`Effects::record`]:
//! `SPOP` as the `SREM` of what it popped, `XADD *` with the ID it chose, a relative expiry
//! as the absolute one the key ended with, a served blocking pop as the pop it became. A
//! command that changed nothing it must propagate (a blocking pop that timed out inside
//! MULTI) declares [`Effects::nothing`]. Keys written beyond the command's key arguments
//! (MOVE's and COPY's target database) are declared with [`Effects::wrote`].
//!
//! The recorder lives on the client ([`crate::client::Client::fx`]), so a command run by
//! EXEC, a script or a blocked client being served records on the client that runs it.
//! It is on only while a consumer wants the command's effects ([`Effects::start`], by the
//! execution path when the AOF is on); a handler checks [`Effects::on`] (one bool) before
//! building what it would record. The consumers read the result with [`Effects::finish`]:
//! today the AOF ([`crate::aof`]), which appends the declared commands (or the arguments)
//! and uses the keys for its rewrite's filter.

/// The effects one command declared (see the module documentation).
#[derive(Default, Debug)]
pub struct Effects {
    on: bool,
    replaced: bool,
    cmds: Vec<Vec<Vec<u8>>>,
    keys: Vec<(usize, Vec<u8>)>,
}

/// What a command declared, taken by the consumer when it ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// The commands replacing the command's own arguments (None: the arguments as given;
    /// Some(empty): nothing to propagate).
    pub cmds: Option<Vec<Vec<Vec<u8>>>>,
    /// Keys written beyond the command's key arguments, as (db, key).
    pub keys: Vec<(usize, Vec<u8>)>,
}

impl Effects {
    /// Whether the running command's effects are wanted: a handler builds what it would
    /// record only then.
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.on
    }

    /// Turns recording on for the command about to run, forgetting anything left.
    pub fn start(&mut self) {
        self.on = true;
        self.replaced = false;
        self.cmds.clear();
        self.keys.clear();
    }

    /// Turns recording off and returns what the command declared.
    pub fn finish(&mut self) -> Declared {
        self.on = false;
        let cmds = if self.replaced {
            self.replaced = false;
            Some(std::mem::take(&mut self.cmds))
        } else {
            None
        };
        Declared {
            cmds,
            keys: std::mem::take(&mut self.keys),
        }
    }

    /// Declares one command of the command's deterministic form (several calls: several
    /// commands, in order). No-op while recording is off.
    pub fn record<A: AsRef<[u8]>>(&mut self, cmd: &[A]) {
        if self.on {
            self.replaced = true;
            self.cmds
                .push(cmd.iter().map(|a| a.as_ref().to_vec()).collect());
        }
    }

    /// Declares that the command propagates nothing (it changed nothing), unless it
    /// recorded commands already.
    pub fn nothing(&mut self) {
        if self.on {
            self.replaced = true;
        }
    }

    /// Declares a key written beyond the command's key arguments (MOVE's, COPY's target
    /// database).
    pub fn wrote(&mut self, db: usize, key: &[u8]) {
        if self.on {
            self.keys.push((db, key.to_vec()));
        }
    }
}

// ------------------------------------------------------------------------------------------
// The propagation vocabulary
//
// The commands a consumer writes on its own account, beyond what handlers declare: the
// framing of a stream (SELECT, MULTI/EXEC, as Redis's AOF and replication stream), the
// deletion of an evicted key, and the commands that rebuild a key or the function
// libraries from their state (an AOF rewrite without an RDB preamble). They live here, the
// one module outside `cmd/` that names commands, so that the AOF (and next, replication)
// share one spelling of them.

/// `SELECT db`: the following commands apply to database `db`.
pub fn select(db: usize) -> [Vec<u8>; 2] {
    [
        b"SELECT".to_vec(),
        itoa::Buffer::new().format(db).as_bytes().to_vec(),
    ]
}

/// `MULTI`: the commands up to [`exec`] apply atomically.
pub fn multi() -> [&'static [u8]; 1] {
    [b"MULTI"]
}

/// `EXEC`: the end of a [`multi`] block.
pub fn exec() -> [&'static [u8]; 1] {
    [b"EXEC"]
}

/// Whether `name` opens a MULTI block in a stream being replayed.
pub fn opens_block(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"multi")
}

/// Whether `name` closes a MULTI block in a stream being replayed.
pub fn closes_block(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"exec")
}

/// `DEL key`: the key is gone (evicted, or its state is rebuilt next).
pub fn deletion(key: &[u8]) -> [Vec<u8>; 2] {
    [b"DEL".to_vec(), key.to_vec()]
}

/// `RESTORE key ttl payload [ABSTTL]`: the key rebuilt from a DUMP `payload`, with
/// absolute deadline `abs_ms` (0: none).
pub fn restore(key: &[u8], abs_ms: u64, payload: Vec<u8>) -> Vec<Vec<u8>> {
    let mut v = vec![
        b"RESTORE".to_vec(),
        key.to_vec(),
        itoa::Buffer::new().format(abs_ms).as_bytes().to_vec(),
        payload,
    ];
    if abs_ms != 0 {
        v.push(b"ABSTTL".to_vec());
    }
    v
}

/// `TAG.SET key tag...`: the key's tags.
pub fn tags<T: AsRef<[u8]>>(key: &[u8], tags: &[T]) -> Vec<Vec<u8>> {
    let mut v = vec![b"TAG.SET".to_vec(), key.to_vec()];
    v.extend(tags.iter().map(|t| t.as_ref().to_vec()));
    v
}

/// `FUNCTION LOAD code`: a function library.
pub fn function_load(code: &[u8]) -> [Vec<u8>; 3] {
    [b"FUNCTION".to_vec(), b"LOAD".to_vec(), code.to_vec()]
}

/// The command that sets `key`'s deadline to `at` (ns since the epoch): Redis's
/// `PEXPIREAT` when it is a whole millisecond, Ember's `NEXPIREAT` otherwise.
pub fn deadline_cmd(key: &[u8], at: u64) -> [Vec<u8>; 3] {
    const NS_PER_MS: u64 = 1_000_000;
    let mut b = itoa::Buffer::new();
    if at.is_multiple_of(NS_PER_MS) {
        [
            b"PEXPIREAT".to_vec(),
            key.to_vec(),
            b.format(at / NS_PER_MS).as_bytes().to_vec(),
        ]
    } else {
        [
            b"NEXPIREAT".to_vec(),
            key.to_vec(),
            b.format(at).as_bytes().to_vec(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_in_ms_when_whole() {
        assert_eq!(
            deadline_cmd(b"k", 5_000_000),
            [b"PEXPIREAT".to_vec(), b"k".to_vec(), b"5".to_vec()]
        );
        assert_eq!(
            deadline_cmd(b"k", 5_000_001),
            [b"NEXPIREAT".to_vec(), b"k".to_vec(), b"5000001".to_vec()]
        );
    }

    #[test]
    fn off_records_nothing() {
        let mut fx = Effects::default();
        fx.record(&[b"SREM".as_slice(), b"k", b"a"]);
        fx.nothing();
        fx.wrote(1, b"k");
        assert!(!fx.on());
        fx.start();
        assert_eq!(fx.finish(), Declared::default());
    }

    #[test]
    fn undeclared_means_the_arguments() {
        let mut fx = Effects::default();
        fx.start();
        assert!(fx.on());
        let d = fx.finish();
        assert_eq!(d.cmds, None);
        assert!(!fx.on());
    }

    #[test]
    fn records_in_order_and_nothing_keeps_them() {
        let mut fx = Effects::default();
        fx.start();
        fx.record(&["SET", "k", "v"]);
        fx.record(&["PEXPIREAT", "k", "5"]);
        fx.nothing();
        fx.wrote(2, b"k");
        let d = fx.finish();
        assert_eq!(
            d.cmds,
            Some(vec![
                vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()],
                vec![b"PEXPIREAT".to_vec(), b"k".to_vec(), b"5".to_vec()],
            ])
        );
        assert_eq!(d.keys, vec![(2, b"k".to_vec())]);
    }

    #[test]
    fn nothing_alone_is_an_empty_form_and_start_forgets() {
        let mut fx = Effects::default();
        fx.start();
        fx.nothing();
        assert_eq!(fx.finish().cmds, Some(vec![]));
        fx.start();
        fx.record(&["DEL", "k"]);
        fx.start();
        assert_eq!(fx.finish().cmds, None);
    }
}
