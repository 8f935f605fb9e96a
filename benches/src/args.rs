//! Command-line options of `ember-load` (hand-rolled, `--name value` pairs).

use crate::workload::Command;

/// Usage text printed on `--help` and on a bad option.
pub const USAGE: &str = "\
ember-load: a memtier_benchmark-like RESP load generator

usage: ember-load [options]
  --host H           server address (127.0.0.1)
  --port P           server port (6379)
  --clients N        connections (50)
  --threads N        generator worker threads (1; 1 = single-threaded runtime)
  --pipeline N       requests in flight per connection (30)
  --duration S       seconds to measure (5; 0 = only cleanup/prefill, then exit)
  --requests N       send exactly N requests in all, then stop, however long it takes
                     (0 = until --duration; for deterministic instruction counts)
  --command C        SET|GET|MGET|SETNX|APPEND|INCR|LPUSH|RPUSH|SADD|HSET|MSET|PING (SET)
  --data-size B      value size in bytes (256)
  --keyspace N       keys key:0..N-1 (1000000)
  --collections N    collection keys list:/set:/hash:0..N-1 (1000)
  --mget-keys N      keys per MGET (8)
  --mset-pairs N     pairs per MSET (4)
  --prefill N        first SET key:0..N-1 to data-size values (0)
  --cleanup          first DEL every list:/set:/hash:<c>, c < collections
  --seed N           PRNG seed; client i uses seed + i (1)
  --json             print one JSON object line instead of text
exit status: 0 ok, 1 failure, 2 bad usage, 3 command unsupported by the server";

/// Parsed options.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// Server host.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// Number of connections.
    pub clients: usize,
    /// Generator worker threads.
    pub threads: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// Seconds to measure; 0 means setup only.
    pub duration: f64,
    /// Requests to send in all, ignoring the deadline; 0 means until the deadline.
    pub requests: u64,
    /// Command to send.
    pub command: Command,
    /// Value size in bytes.
    pub data_size: usize,
    /// Range of key numbers.
    pub keyspace: u64,
    /// Range of collection key numbers.
    pub collections: u64,
    /// Keys per MGET.
    pub mget_keys: usize,
    /// Pairs per MSET.
    pub mset_pairs: usize,
    /// Keys to SET before measuring.
    pub prefill: u64,
    /// Delete the collection keys before measuring.
    pub cleanup: bool,
    /// PRNG seed.
    pub seed: u64,
    /// Print JSON.
    pub json: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            host: "127.0.0.1".into(),
            port: 6379,
            clients: 50,
            threads: 1,
            pipeline: 30,
            duration: 5.0,
            requests: 0,
            command: Command::Set,
            data_size: 256,
            keyspace: 1_000_000,
            collections: 1000,
            mget_keys: 8,
            mset_pairs: 4,
            prefill: 0,
            cleanup: false,
            seed: 1,
            json: false,
        }
    }
}

/// What the command line asked for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// Run with these options.
    Run(Args),
    /// Print usage and exit successfully.
    Help,
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{name}: not a valid number: {v:?}"))
}

/// Parses the arguments (without the program name).
pub fn parse<I: IntoIterator<Item = String>>(argv: I) -> Result<Parsed, String> {
    let mut a = Args::default();
    let mut it = argv.into_iter();
    while let Some(opt) = it.next() {
        let (name, inline) = match opt.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (opt.clone(), None),
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--json" => a.json = true,
            "--cleanup" => a.cleanup = true,
            _ => {
                let v = match inline {
                    Some(v) => v,
                    None => it.next().ok_or_else(|| format!("{name} needs a value"))?,
                };
                match name.as_str() {
                    "--host" => a.host = v,
                    "--port" => a.port = num(&name, &v)?,
                    "--clients" => a.clients = num(&name, &v)?,
                    "--threads" => a.threads = num(&name, &v)?,
                    "--pipeline" => a.pipeline = num(&name, &v)?,
                    "--duration" => a.duration = num(&name, &v)?,
                    "--requests" => a.requests = num(&name, &v)?,
                    "--command" => {
                        a.command =
                            Command::parse(&v).ok_or_else(|| format!("unknown command {v:?}"))?
                    }
                    "--data-size" => a.data_size = num(&name, &v)?,
                    "--keyspace" => a.keyspace = num(&name, &v)?,
                    "--collections" => a.collections = num(&name, &v)?,
                    "--mget-keys" => a.mget_keys = num(&name, &v)?,
                    "--mset-pairs" => a.mset_pairs = num(&name, &v)?,
                    "--prefill" => a.prefill = num(&name, &v)?,
                    "--seed" => a.seed = num(&name, &v)?,
                    _ => return Err(format!("unknown option {name:?}")),
                }
            }
        }
    }
    if a.clients == 0 || a.threads == 0 || a.pipeline == 0 {
        return Err("--clients, --threads and --pipeline must be at least 1".into());
    }
    if a.keyspace == 0 || a.collections == 0 || a.mget_keys == 0 || a.mset_pairs == 0 {
        return Err(
            "--keyspace, --collections, --mget-keys and --mset-pairs must be at least 1".into(),
        );
    }
    if !(a.duration >= 0.0 && a.duration.is_finite()) {
        return Err("--duration must be a finite number of seconds >= 0".into());
    }
    Ok(Parsed::Run(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Parsed, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn defaults() {
        assert_eq!(p("").unwrap(), Parsed::Run(Args::default()));
        assert_eq!(p("--help").unwrap(), Parsed::Help);
    }

    #[test]
    fn every_option() {
        let Parsed::Run(a) = p(
            "--host ::1 --port 7000 --clients 4 --threads 2 --pipeline 1 \
             --duration 0.5 --requests 77 --command mget --data-size 10 --keyspace 99 --collections 7 \
             --mget-keys 3 --mset-pairs 2 --prefill 50 --cleanup --seed 9 --json",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            a,
            Args {
                host: "::1".into(),
                port: 7000,
                clients: 4,
                threads: 2,
                pipeline: 1,
                duration: 0.5,
                requests: 77,
                command: Command::Mget,
                data_size: 10,
                keyspace: 99,
                collections: 7,
                mget_keys: 3,
                mset_pairs: 2,
                prefill: 50,
                cleanup: true,
                seed: 9,
                json: true,
            }
        );
        let Parsed::Run(b) = p("--port=7001 --command=PING").unwrap() else {
            panic!()
        };
        assert_eq!((b.port, b.command), (7001, Command::Ping));
    }

    #[test]
    fn bad_input() {
        assert!(p("--port").unwrap_err().contains("needs a value"));
        assert!(p("--port x").unwrap_err().contains("not a valid number"));
        assert!(p("--command FLY").unwrap_err().contains("unknown command"));
        assert!(p("--bogus 1").unwrap_err().contains("unknown option"));
        assert!(p("--clients 0").is_err());
        assert!(p("--duration -1").is_err());
    }
}
