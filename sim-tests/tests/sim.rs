//! Seeded simulations of whole clusters: a fixed set of CI seeds (3 nodes, 5 nodes), a
//! replay check (one seed twice gives the same run), a fault-free run, and a deliberately
//! broken node (stale reads) that the checker must catch.
//!
//! More seeds: `cargo run -p ember-sim-tests --bin sim -- --seeds 1000`; one seed:
//! `--reproduce <seed> --verbose`. A seed that ever found a bug gets its own test below.

use std::time::Duration;

use sim_tests::history::Outcome;
use sim_tests::node::Mutant;
use sim_tests::sim;
use sim_tests::sim::SimConfig;

/// Runs `seeds`, fails listing every seed that did not pass, and returns how many
/// crashes and operations of unknown outcome the seeds had (so a test can demand that
/// the faults really happened).
fn run_seeds(seeds: impl IntoIterator<Item = u64>, cfg: &SimConfig) -> (usize, usize) {
    let mut failed = Vec::new();
    let (mut crashes, mut unknown) = (0, 0);
    for seed in seeds {
        let report = sim::run(seed, cfg);
        assert!(!report.history.is_empty(), "seed {seed} recorded nothing");
        if !report.passed() {
            failed.push(format!("seed {seed}: {}", report.violations.join("\n")));
        }
        crashes += report.faults.iter().filter(|f| f.contains("crash")).count();
        unknown += report
            .history
            .iter()
            .filter(|op| op.outcome == Outcome::Unknown)
            .count();
    }
    assert!(failed.is_empty(), "failing seeds:\n{}", failed.join("\n"));
    (crashes, unknown)
}

#[test]
fn three_nodes_two_groups_ci_seeds() {
    let (crashes, unknown) = run_seeds(0..16, &SimConfig::default());
    assert!(crashes > 0, "no seed crashed a node");
    assert!(unknown > 0, "no operation had an unknown outcome");
}

#[test]
fn five_nodes_three_groups_ci_seeds() {
    let cfg = SimConfig {
        nodes: 5,
        groups: 3,
        clients: 4,
        keys: (6, 3),
        ..SimConfig::default()
    };
    // Seed 102 once looked like a bug: two nodes leading g1 in term 14. openraft 0.9's
    // default leader id is (term, node), so one term may have several leaders, each
    // with its own log ids; it is safe, and the checks here no longer assume one.
    run_seeds(100..106, &cfg);
}

#[test]
fn voters_change_under_faults_ci_seeds() {
    // Groups' voters change (joint consensus, removed voters kept as learners) while
    // the faults go on: as moving groups between nodes does.
    for nodes in [3, 5] {
        let cfg = SimConfig {
            nodes,
            groups: 2,
            reconfigure: true,
            ..SimConfig::default()
        };
        run_seeds(300..304, &cfg);
    }
}

#[test]
fn one_group_without_snapshots() {
    let cfg = SimConfig {
        groups: 1,
        snapshot_every: None,
        ..SimConfig::default()
    };
    run_seeds(200..203, &cfg);
}

#[test]
fn a_seed_replays_identically() {
    let cfg = SimConfig::default();
    let a = sim::run(7, &cfg);
    let b = sim::run(7, &cfg);
    assert!(a.passed(), "{:?}", a.violations);
    assert_eq!(a.faults, b.faults);
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.elapsed, b.elapsed);
}

#[test]
fn without_faults_every_operation_succeeds() {
    let cfg = SimConfig {
        faults: false,
        chaos: Duration::from_secs(4),
        ..SimConfig::default()
    };
    let report = sim::run(1, &cfg);
    assert!(report.passed(), "{:?}", report.violations);
    assert!(report.faults.iter().all(|f| f.contains("heal all")));
    assert!(report
        .history
        .iter()
        .all(|op| op.outcome != Outcome::Unknown));
}

/// True when some seed of `seeds` fails with `mutant` planted in the nodes.
fn caught(mutant: Mutant, seeds: std::ops::Range<u64>) -> bool {
    let cfg = SimConfig {
        mutant: Some(mutant),
        ..SimConfig::default()
    };
    seeds.into_iter().any(|seed| !sim::run(seed, &cfg).passed())
}

#[test]
fn stale_reads_are_caught() {
    assert!(
        caught(Mutant::StaleReads, 0..6),
        "reads served without ensure_linearizable went unnoticed"
    );
}

#[test]
fn writes_acknowledged_before_commit_are_caught() {
    assert!(
        caught(Mutant::AckBeforeCommit, 0..6),
        "puts acknowledged before commit went unnoticed"
    );
}
