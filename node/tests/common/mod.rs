//! Test harness: starts the real `ember` binary on a free port and connects real clients.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running ember process, killed on drop.
pub struct Ember {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    child: Child,
    /// Its working directory (where `dump.rdb` goes); removed on drop when `own_dir`.
    pub dir: std::path::PathBuf,
    own_dir: bool,
}

/// A fresh empty directory under the system temp dir.
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "ember-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Ember {
    /// Starts ember with default settings plus `extra` flags.
    pub fn start(extra: &[&str]) -> Ember {
        Ember::start_with_config(None, extra)
    }

    /// Starts ember with a config file (which comes first on the command line, as with
    /// redis-server), then the test's port and bind, then `extra` flags.
    pub fn start_with_config(config: Option<&std::path::Path>, extra: &[&str]) -> Ember {
        let mut e = Ember::start_in(&temp_dir("srv"), config, extra);
        e.own_dir = true;
        e
    }

    /// Starts ember with `dir` as its working directory (it loads and saves `dump.rdb`
    /// there); the directory is kept on drop.
    pub fn start_in(
        dir: &std::path::Path,
        config: Option<&std::path::Path>,
        extra: &[&str],
    ) -> Ember {
        // Another test may take the same free port between our probe and ember's bind: then
        // our ember exits (or the port answers with someone else's pid) and we try again.
        for _ in 0..10 {
            let port = free_port();
            let child = Command::new(env!("CARGO_BIN_EXE_ember"))
                .args(config)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--loglevel",
                    "warning",
                ])
                .args(extra)
                .current_dir(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn ember");
            let mut e = Ember {
                port,
                child,
                dir: dir.to_path_buf(),
                own_dir: false,
            };
            if e.wait_ready() {
                return e;
            }
        }
        panic!("ember did not start");
    }

    /// Waits until this process answers on its port; false if it exited or another process
    /// holds the port.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                let probe = self
                    .client()
                    .get_connection()
                    .ok()
                    .map(|mut c| redis::cmd("INFO").arg("server").query::<String>(&mut c));
                match probe {
                    // An error reply (NOAUTH with requirepass): it answers and ours is alive.
                    Some(Err(e)) if e.kind() != redis::ErrorKind::Io => return true,
                    Some(Ok(info)) => {
                        let pid = info
                            .lines()
                            .find_map(|l| l.strip_prefix("process_id:"))
                            .and_then(|v| v.trim().parse::<u32>().ok());
                        if pid == Some(self.child.id()) {
                            return true;
                        }
                        let _ = self.child.kill();
                        let _ = self.child.wait();
                        return false;
                    }
                    _ => {}
                }
            }
            assert!(
                Instant::now() < deadline,
                "ember did not start on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A `redis` crate client.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("client")
    }

    /// A synchronous `redis` crate connection.
    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("connect")
    }

    /// A raw TCP connection (for protocol-level tests).
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit on its own; returns its exit status success.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<bool> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st.success());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Ember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.own_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Sends raw bytes and reads until `expect_len` bytes arrived or the peer closed.
pub fn raw_roundtrip(s: &mut TcpStream, input: &[u8], expect_len: usize) -> Vec<u8> {
    s.write_all(input).expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while out.len() < expect_len {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

/// Runs one command on a connection and returns the reply as a `redis::Value`.
pub fn cmd(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Runs a command that must succeed and returns its reply.
pub fn ok(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    cmd(c, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs a command that must reply with an integer.
pub fn int(c: &mut redis::Connection, args: &[&str]) -> i64 {
    match ok(c, args) {
        redis::Value::Int(i) => i,
        v => panic!("{args:?}: expected an integer, got {v:?}"),
    }
}

/// Runs a command that must fail; returns the error text as `CODE detail`.
pub fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    match cmd(c, args) {
        Ok(v) => panic!("{args:?}: expected an error, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
    }
}

/// Which of `keys` exist.
pub fn existing(c: &mut redis::Connection, keys: &[String]) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    for chunk in keys.chunks(1000) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("EXISTS").arg(k);
        }
        let v: Vec<i64> = p.query(c).expect("exists");
        out.extend(
            chunk
                .iter()
                .zip(v)
                .filter(|(_, n)| *n == 1)
                .map(|(k, _)| k.clone()),
        );
    }
    out
}
