//! `ember-load`: a memtier_benchmark-like load generator for RESP servers.
//!
//! Each client is one TCP connection that keeps `--pipeline` requests in flight: it
//! writes a batch of that many requests, reads that many replies, and repeats until
//! `--duration` has passed. Keys are drawn uniformly by a per-client PRNG (seed + client
//! index); see [`workload`] for the key patterns. Replies are not decoded, only walked
//! by a skipper ([`skip`]) that finds their ends and notices errors, so the generator
//! stays cheaper than the server it measures.
//!
//! Latency is per request: from the moment its batch is handed to the socket to the
//! return of the `read` that completed its reply (all replies completed by one read
//! share that time). At pipeline 30 it therefore includes waiting behind the earlier
//! requests of the batch, as memtier_benchmark's does.
//!
//! Exit status: 0 ok, 1 failure, 2 bad usage, 3 the server does not know the command
//! (`ERR unknown command`), so a driver can print "n/a".

mod args;
mod cpu;
mod hist;
mod skip;
mod workload;

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use args::{Args, Parsed, USAGE};
use hist::Histogram;
use workload::{Rng, Workload};

/// Exit status when the server answers the command with `ERR unknown command`.
const EXIT_UNSUPPORTED: i32 = 3;

/// What one connection saw.
struct ConnStats {
    /// Replies received.
    ops: u64,
    /// Error replies among them.
    errors: u64,
    /// Text of the first error reply.
    first_error: Option<String>,
    /// Whether an error said the command is unknown.
    unknown_command: bool,
    /// Per-request latency in nanoseconds (empty unless asked for).
    hist: Histogram,
    /// When the last reply arrived.
    end: Instant,
}

impl ConnStats {
    fn new() -> Self {
        ConnStats {
            ops: 0,
            errors: 0,
            first_error: None,
            unknown_command: false,
            hist: Histogram::new(),
            end: Instant::now(),
        }
    }

    fn merge(&mut self, o: ConnStats) {
        self.ops += o.ops;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
        self.unknown_command |= o.unknown_command;
        self.hist.merge(&o.hist);
        self.end = self.end.max(o.end);
    }
}

/// Whether an error message says the server does not know the command.
fn is_unknown_command(msg: &str) -> bool {
    msg.to_ascii_lowercase().contains("unknown command")
}

async fn connect(a: &Args) -> Result<TcpStream, String> {
    let s = TcpStream::connect((a.host.as_str(), a.port))
        .await
        .map_err(|e| format!("connect {}:{}: {e}", a.host, a.port))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Runs batches on one connection until `fill` writes nothing or `deadline` passes.
///
/// `fill(out, max)` appends at most `max` requests to the empty `out` and returns how
/// many it wrote. Latency is recorded only when `latency` is set.
async fn drive<F>(
    stream: &mut TcpStream,
    pipeline: usize,
    deadline: Option<Instant>,
    latency: bool,
    mut fill: F,
) -> Result<ConnStats, String>
where
    F: FnMut(&mut Vec<u8>, usize) -> usize,
{
    let mut st = ConnStats::new();
    let mut out = Vec::with_capacity(64 * 1024);
    let mut rbuf = vec![0u8; 64 * 1024];
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        out.clear();
        let batch = fill(&mut out, pipeline);
        if batch == 0 {
            break;
        }
        let sent = Instant::now();
        stream
            .write_all(&out)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut remaining = batch;
        loop {
            // Walk every complete reply already buffered.
            let mut done = 0u64;
            while remaining > 0 {
                match skip::skip_reply(&rbuf[start..end]) {
                    Ok(Some(r)) => {
                        if let Some((a, b)) = r.error {
                            st.errors += 1;
                            let msg = String::from_utf8_lossy(&rbuf[start + a..start + b]);
                            if is_unknown_command(&msg) {
                                st.unknown_command = true;
                            }
                            if st.first_error.is_none() {
                                st.first_error = Some(msg.into_owned());
                            }
                        }
                        start += r.len;
                        remaining -= 1;
                        done += 1;
                    }
                    Ok(None) => break,
                    Err(e) => return Err(format!("bad reply from server: {e}")),
                }
            }
            if done > 0 {
                st.ops += done;
                if latency {
                    st.hist
                        .record_n(sent.elapsed().as_nanos().min(u64::MAX as u128) as u64, done);
                }
            }
            if start == end {
                start = 0;
                end = 0;
            }
            if remaining == 0 {
                break;
            }
            // Keep the partial reply at the front and make room for more.
            if start > 0 {
                rbuf.copy_within(start..end, 0);
                end -= start;
                start = 0;
            }
            if end == rbuf.len() {
                rbuf.resize(rbuf.len() * 2, 0);
            }
            let n = stream
                .read(&mut rbuf[end..])
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("server closed the connection".into());
            }
            end += n;
        }
        st.end = Instant::now();
    }
    Ok(st)
}

/// `DEL`s every `list:<c>`, `set:<c>`, `hash:<c>`; returns the error count.
async fn cleanup(a: &Args, wl: &Workload) -> Result<ConnStats, String> {
    let mut s = connect(a).await?;
    let mut next = 0u64;
    let total = a.collections;
    drive(&mut s, 100, None, false, |out, max| {
        let mut n = 0;
        while n < max && next < total {
            wl.write_del_collections(next, out);
            next += 1;
            n += 1;
        }
        n
    })
    .await
}

/// SETs `key:0..prefill-1` over up to `clients` connections, at least 100 deep.
async fn prefill(a: &Args, wl: &Workload) -> Result<ConnStats, String> {
    let conns = (a.clients as u64).min(a.prefill).max(1);
    let mut tasks = Vec::new();
    for i in 0..conns {
        let mut s = connect(a).await?;
        let wl = wl.clone();
        let total = a.prefill;
        let depth = a.pipeline.max(100);
        tasks.push(tokio::spawn(async move {
            let mut next = i;
            drive(&mut s, depth, None, false, move |out, max| {
                let mut n = 0;
                while n < max && next < total {
                    wl.write_set(next, out);
                    next += conns;
                    n += 1;
                }
                n
            })
            .await
        }));
    }
    join_all(tasks).await
}

async fn join_all(
    tasks: Vec<tokio::task::JoinHandle<Result<ConnStats, String>>>,
) -> Result<ConnStats, String> {
    let mut total = ConnStats::new();
    let mut first_err = None;
    for t in tasks {
        match t.await {
            Ok(Ok(st)) => total.merge(st),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(format!("client task failed: {e}"));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

/// Results of a measured run.
struct Measured {
    elapsed: Duration,
    stats: ConnStats,
    cpu_s: Option<f64>,
}

/// Results of the whole invocation.
struct Report {
    cleanup_s: Option<f64>,
    prefill: Option<(f64, u64)>,
    setup_errors: u64,
    setup_first_error: Option<String>,
    unsupported: bool,
    probe_error: Option<String>,
    measured: Option<Measured>,
}

async fn run(a: &Args) -> Result<Report, String> {
    let wl = Workload::new(
        a.command,
        a.keyspace,
        a.collections,
        a.mget_keys,
        a.mset_pairs,
        a.data_size,
        a.seed,
    );
    let mut rep = Report {
        cleanup_s: None,
        prefill: None,
        setup_errors: 0,
        setup_first_error: None,
        unsupported: false,
        probe_error: None,
        measured: None,
    };
    if a.cleanup {
        let t = Instant::now();
        let st = cleanup(a, &wl).await?;
        rep.cleanup_s = Some(t.elapsed().as_secs_f64());
        rep.setup_errors += st.errors;
        rep.setup_first_error = rep.setup_first_error.or(st.first_error);
    }
    if a.prefill > 0 {
        let t = Instant::now();
        let st = prefill(a, &wl).await?;
        rep.prefill = Some((t.elapsed().as_secs_f64(), st.ops));
        rep.setup_errors += st.errors;
        rep.setup_first_error = rep.setup_first_error.or(st.first_error);
    }
    if a.duration == 0.0 {
        return Ok(rep);
    }

    // Probe: one request, to learn whether the server knows the command at all.
    let mut probe = connect(a).await?;
    let probe_st = probe_once(&mut probe, &wl, a.seed).await?;
    if probe_st.unknown_command {
        rep.unsupported = true;
        rep.probe_error = probe_st.first_error;
        return Ok(rep);
    }
    rep.probe_error = probe_st.first_error;
    drop(probe);

    let mut streams = Vec::with_capacity(a.clients);
    for _ in 0..a.clients {
        streams.push(connect(a).await?);
    }
    let cpu0 = cpu::process_cpu_seconds();
    let start = Instant::now();
    let deadline = (a.requests == 0).then(|| start + Duration::from_secs_f64(a.duration));
    let mut tasks = Vec::with_capacity(a.clients);
    for (i, mut s) in streams.into_iter().enumerate() {
        let wl = wl.clone();
        let mut rng = Rng::new(a.seed.wrapping_add(i as u64));
        let pipeline = a.pipeline;
        // With --requests, client i sends its share of exactly that many requests.
        let clients = a.clients as u64;
        let mut left = match a.requests {
            0 => u64::MAX,
            n => n / clients + u64::from((i as u64) < n % clients),
        };
        tasks.push(tokio::spawn(async move {
            drive(&mut s, pipeline, deadline, true, move |out, max| {
                let n = (max as u64).min(left) as usize;
                left -= n as u64;
                for _ in 0..n {
                    wl.write_request(&mut rng, out);
                }
                n
            })
            .await
        }));
    }
    let stats = join_all(tasks).await?;
    let cpu1 = cpu::process_cpu_seconds();
    rep.unsupported = stats.unknown_command;
    rep.measured = Some(Measured {
        elapsed: stats.end.saturating_duration_since(start),
        cpu_s: cpu0.zip(cpu1).map(|(x, y)| y - x),
        stats,
    });
    Ok(rep)
}

/// Sends exactly one request of the workload and reads its reply.
async fn probe_once(s: &mut TcpStream, wl: &Workload, seed: u64) -> Result<ConnStats, String> {
    let mut rng = Rng::new(seed.wrapping_add(u64::MAX / 2));
    let mut sent = false;
    drive(s, 1, None, false, |out, _| {
        if sent {
            return 0;
        }
        sent = true;
        wl.write_request(&mut rng, out);
        1
    })
    .await
}

/// Escapes `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn opt_json<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

fn print_report(a: &Args, rep: &Report) {
    let us = |ns: u64| ns as f64 / 1000.0;
    if a.json {
        let mut f: Vec<String> = vec![
            format!("\"command\":{}", json_str(a.command.name())),
            format!("\"clients\":{}", a.clients),
            format!("\"threads\":{}", a.threads),
            format!("\"pipeline\":{}", a.pipeline),
            format!("\"data_size\":{}", a.data_size),
            format!("\"keyspace\":{}", a.keyspace),
            format!("\"unsupported\":{}", rep.unsupported),
            format!("\"cleanup_s\":{}", opt_json(rep.cleanup_s)),
            format!("\"prefill_keys\":{}", opt_json(rep.prefill.map(|p| p.1))),
            format!("\"prefill_s\":{}", opt_json(rep.prefill.map(|p| p.0))),
            format!("\"setup_errors\":{}", rep.setup_errors),
        ];
        if let Some(e) = &rep.setup_first_error {
            f.push(format!("\"setup_first_error\":{}", json_str(e)));
        }
        if let Some(e) = &rep.probe_error {
            f.push(format!("\"probe_error\":{}", json_str(e)));
        }
        if let Some(m) = &rep.measured {
            let secs = m.elapsed.as_secs_f64();
            let h = &m.stats.hist;
            f.push(format!("\"duration_s\":{secs:.6}"));
            f.push(format!("\"ops\":{}", m.stats.ops));
            f.push(format!(
                "\"ops_per_sec\":{:.1}",
                m.stats.ops as f64 / secs.max(1e-9)
            ));
            f.push(format!("\"errors\":{}", m.stats.errors));
            f.push(format!(
                "\"first_error\":{}",
                m.stats
                    .first_error
                    .as_deref()
                    .map_or("null".into(), json_str)
            ));
            f.push(format!("\"latency_samples\":{}", h.count()));
            f.push(format!("\"p50_us\":{:.1}", us(h.percentile(50.0))));
            f.push(format!("\"p99_us\":{:.1}", us(h.percentile(99.0))));
            f.push(format!("\"p999_us\":{:.1}", us(h.percentile(99.9))));
            f.push(format!("\"max_us\":{:.1}", us(h.max())));
            f.push(format!("\"mean_us\":{:.1}", h.mean() / 1000.0));
            f.push(format!("\"gen_cpu_s\":{}", opt_json(m.cpu_s)));
            f.push(format!(
                "\"gen_cpu_pct\":{}",
                opt_json(
                    m.cpu_s
                        .map(|c| format!("{:.1}", 100.0 * c / secs.max(1e-9)))
                )
            ));
        }
        println!("{{{}}}", f.join(","));
        return;
    }
    if let Some(c) = rep.cleanup_s {
        println!("cleanup: {} collection keys in {c:.2} s", a.collections);
    }
    if let Some((s, n)) = rep.prefill {
        println!(
            "prefill: {n} keys of {} bytes in {s:.2} s ({:.0} keys/s)",
            a.data_size,
            n as f64 / s.max(1e-9)
        );
    }
    if rep.setup_errors > 0 {
        println!(
            "setup errors: {} (first: {})",
            rep.setup_errors,
            rep.setup_first_error.as_deref().unwrap_or("")
        );
    }
    if rep.unsupported {
        println!(
            "{}: unsupported by the server ({})",
            a.command.name(),
            rep.probe_error.as_deref().unwrap_or("unknown command")
        );
    }
    if let Some(m) = &rep.measured {
        let secs = m.elapsed.as_secs_f64();
        let h = &m.stats.hist;
        println!(
            "{}: {} ops in {secs:.2} s = {:.0} ops/s, {} errors{}",
            a.command.name(),
            m.stats.ops,
            m.stats.ops as f64 / secs.max(1e-9),
            m.stats.errors,
            m.stats
                .first_error
                .as_deref()
                .map_or(String::new(), |e| format!(" (first: {e})"))
        );
        println!(
            "latency per request (us): p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            us(h.percentile(50.0)),
            us(h.percentile(99.0)),
            us(h.percentile(99.9)),
            us(h.max()),
            h.mean() / 1000.0
        );
        if let Some(c) = m.cpu_s {
            println!(
                "generator: {c:.2} CPU-s ({:.0}% of a core), {} thread(s), {} clients, pipeline {}",
                100.0 * c / secs.max(1e-9),
                a.threads,
                a.clients,
                a.pipeline
            );
        }
    }
}

fn main() {
    let a = match args::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(a)) => a,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("ember-load: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let mut builder = if a.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(a.threads);
        b
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ember-load: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    match rt.block_on(run(&a)) {
        Ok(rep) => {
            print_report(&a, &rep);
            if let Some(m) = rep.measured.as_ref().filter(|m| m.stats.errors > 0) {
                eprintln!(
                    "ember-load: {} of {} replies were errors",
                    m.stats.errors, m.stats.ops
                );
            }
            if rep.unsupported {
                std::process::exit(EXIT_UNSUPPORTED);
            }
        }
        Err(e) => {
            eprintln!("ember-load: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }

    #[test]
    fn unknown_command_detection() {
        assert!(is_unknown_command(
            "ERR unknown command 'FOO', with args beginning with: "
        ));
        assert!(!is_unknown_command("WRONGTYPE Operation against a key"));
    }
}
