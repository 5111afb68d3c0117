use std::process::ExitCode;

use clap::Args;
use specie_sim::{run, run_cluster, run_replication, ClusterOptions, ReplicationOptions, SimOptions};

/// Deterministic simulation, three worlds per seed: the 2PC protocol (shards and coordinator over
/// modelled replicated logs, thousands of steps), the replication layer (real Raft replicas of
/// one group, with snapshots and whole-group restarts), and the whole cluster (shard groups and
/// a coordinator group of real Raft replicas running the cluster's roles), each under crashes,
/// restarts, partitions and a network that drops, duplicates, delays and reorders messages.
/// Invariants are checked as the run goes and once it settles; a failing seed replays exactly
/// with `--seed N`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Number of seeds to run (a soak), starting at --start.
    #[arg(long, default_value_t = 1000, conflicts_with = "seed")]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Run just this seed and print its report (to replay a failure).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one line per seed.
    #[arg(long)]
    pub verbose: bool,
}

pub fn run_sim(args: SimArgs) -> anyhow::Result<ExitCode> {
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.start..args.start.saturating_add(args.seeds)).collect(),
    };
    let started = std::time::Instant::now();
    let (mut confirmed, mut crashes, mut steps) = (0u64, 0u64, 0u64);
    let (mut acknowledged, mut elections, mut cluster_confirmed) = (0u64, 0u64, 0u64);
    for seed in &seeds {
        let options = SimOptions::from_seed(*seed);
        match run(options.clone()) {
            Ok(report) => {
                confirmed += report.confirmed;
                crashes += report.crashes;
                steps += report.steps;
                if args.verbose || args.seed.is_some() {
                    println!(
                        "seed {seed}: ok — {} shards, {} steps, {} submitted, {} confirmed, {} rejected, {} crashes, {} dropped, {} duplicated, trace {}",
                        options.shards,
                        report.steps,
                        report.submitted,
                        report.confirmed,
                        report.rejected,
                        report.crashes,
                        report.messages_dropped,
                        report.messages_duplicated,
                        hex::encode(&report.trace_digest[..8])
                    );
                }
            }
            Err(violation) => {
                eprintln!("FAILED {violation}");
                return Ok(ExitCode::FAILURE);
            }
        }
        let options = ReplicationOptions::from_seed(*seed);
        match run_replication(options.clone()) {
            Ok(report) => {
                acknowledged += report.acknowledged;
                elections += report.term.saturating_sub(1);
                crashes += report.crashes;
                steps += report.steps;
                if args.verbose || args.seed.is_some() {
                    println!(
                        "seed {seed}: ok — raft group of {}, {} steps ({} ms virtual), {} proposed, {} acknowledged, {} unknown, {} applied, term {}, {} crashes, {} whole-group restarts, {} partitions, {} dropped, {} duplicated, trace {}",
                        options.replicas,
                        report.steps,
                        report.virtual_ms,
                        report.proposed,
                        report.acknowledged,
                        report.unknown,
                        report.applied,
                        report.term,
                        report.crashes,
                        report.full_restarts,
                        report.partitions,
                        report.messages_dropped,
                        report.messages_duplicated,
                        hex::encode(&report.trace_digest[..8])
                    );
                }
            }
            Err(violation) => {
                eprintln!("FAILED {violation}");
                return Ok(ExitCode::FAILURE);
            }
        }
        let options = ClusterOptions::from_seed(*seed);
        match run_cluster(options.clone()) {
            Ok(report) => {
                cluster_confirmed += report.confirmed;
                elections += report.elections;
                crashes += report.crashes;
                steps += report.steps;
                if args.verbose || args.seed.is_some() {
                    println!(
                        "seed {seed}: ok — cluster of {} shard group(s) + coordinator group, 3 replicas each, {} steps, {} submitted, {} confirmed, {} rejected, {} unknown ({} applied), {} elections, {} crashes, {} whole-group restarts, {} partitions, {} dropped, {} duplicated, trace {}",
                        options.shard_groups,
                        report.steps,
                        report.submitted,
                        report.confirmed,
                        report.rejected,
                        report.unknown,
                        report.unknown_applied,
                        report.elections,
                        report.crashes,
                        report.full_restarts,
                        report.partitions,
                        report.messages_dropped,
                        report.messages_duplicated,
                        hex::encode(&report.trace_digest[..8])
                    );
                }
            }
            Err(violation) => {
                eprintln!("FAILED {violation}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    println!(
        "{} seeds passed in {:.1} s: {steps} steps, {confirmed} transactions confirmed (2PC), {acknowledged} commands acknowledged (Raft), {cluster_confirmed} transactions confirmed (cluster), {elections} elections, {crashes} crashes injected",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
