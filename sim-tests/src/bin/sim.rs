//! Runs many seeded simulations and prints the failing seeds, or reproduces one.
//!
//! ```text
//! cargo run -p ember-sim-tests --bin sim -- --seeds 1000 [--from 0] [--nodes 5] [--groups 3]
//!     [--reconfigure]   (groups' voters change during the chaos phase)
//!     [--clients 4] [--registers 6] [--counters 3] [--chaos-secs 8] [--snapshot-every 40|0]
//! cargo run -p ember-sim-tests --bin sim -- --reproduce 42 [--verbose]
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sim_tests::sim;
use sim_tests::sim::SimConfig;

/// Parsed command line.
struct Args {
    /// Seeds to run (`from..from + seeds`).
    seeds: u64,
    /// The first seed.
    from: u64,
    /// One seed to rerun with its full report.
    reproduce: Option<u64>,
    /// Print the history and the fault log.
    verbose: bool,
    /// The simulation's shape.
    cfg: SimConfig,
}

/// Parses `std::env::args`.
fn parse() -> Result<Args, String> {
    let mut args = Args {
        seeds: 100,
        from: 0,
        reproduce: None,
        verbose: false,
        cfg: SimConfig::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match flag.as_str() {
            "--seeds" => args.seeds = value("--seeds")?,
            "--from" => args.from = value("--from")?,
            "--reproduce" => args.reproduce = Some(value("--reproduce")?),
            "--nodes" => args.cfg.nodes = value("--nodes")?,
            "--groups" => args.cfg.groups = value("--groups")? as u32,
            "--clients" => args.cfg.clients = value("--clients")? as u32,
            "--registers" => args.cfg.keys.0 = value("--registers")? as usize,
            "--counters" => args.cfg.keys.1 = value("--counters")? as usize,
            "--chaos-secs" => {
                args.cfg.chaos = std::time::Duration::from_secs(value("--chaos-secs")?)
            }
            "--snapshot-every" => {
                args.cfg.snapshot_every = Some(value("--snapshot-every")?).filter(|&n| n > 0)
            }
            "--verbose" => args.verbose = true,
            "--reconfigure" => args.cfg.reconfigure = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(seed) = args.reproduce {
        let report = sim::run(seed, &args.cfg);
        if args.verbose {
            for f in &report.faults {
                println!("fault {f}");
            }
            for op in &report.history {
                println!("op {op}");
            }
            for ((g, n), r) in &report.replicas {
                println!(
                    "replica {g} n{n}: applied {:?}, snapshot {:?}, {} keys",
                    r.last_applied,
                    r.snapshot,
                    r.kv.map.len()
                );
            }
        }
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&report.fingerprint(), &mut hasher);
        println!(
            "seed {seed}: {} ops, {:?} virtual, fingerprint {:016x}, {}",
            report.history.len(),
            report.elapsed,
            std::hash::Hasher::finish(&hasher),
            if report.passed() { "ok" } else { "FAILED" }
        );
        for v in &report.violations {
            println!("violation: {v}");
        }
        return if report.passed() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let start = Instant::now();
    let mut failed = Vec::new();
    for seed in args.from..args.from + args.seeds {
        let t = Instant::now();
        let report = sim::run(seed, &args.cfg);
        if !report.passed() {
            println!("seed {seed} FAILED: {}", report.violations.join(" | "));
            failed.push(seed);
        } else if args.verbose {
            println!(
                "seed {seed} ok: {} ops in {:.1}s",
                report.history.len(),
                t.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{} seeds ({}..{}), {} failed {:?}, {:.1}s",
        args.seeds,
        args.from,
        args.from + args.seeds,
        failed.len(),
        failed,
        start.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
