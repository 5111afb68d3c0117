//! `specie bench …`: throughput programs, each printed beside the ceiling measured in the same run.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use rand::{Rng, SeedableRng};
use secp256k1::Keypair;
use specie_api::TxStatus;
use specie_node::{EmbeddedNode, NodeOptions};
use specie_sentinel::IssuerKeys;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CompactTransaction, Input, NonceMode, OutPoint, Output, SpecieTransaction, Transaction,
    Txid, UhsId,
};

use crate::bench_postgres;
use crate::ceiling;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Sentinel validation of 2-in/2-out transactions on all cores, beside the raw BIP-340
    /// verification ceiling measured in the same run (target: at least 90% of it).
    Validate(ValidateArgs),
    /// Compact 2-in/2-out transactions per second through the 2PC engine (coordinator + shards,
    /// durable logs, fsync on), without sentinels, as in Hamilton §6.1.
    Swap(SwapArgs),
    /// The same swap workload against PostgreSQL (a stored function over a table of UHS ids, fsync
    /// on), beside specie's figure measured in the same run, as in Hamilton §6.1.
    Postgres(bench_postgres::PostgresArgs),
    /// Closed- or open-loop swap load against a running cluster (`specie cluster up`), with
    /// optional leader kills: per-second throughput, latency histogram, JSON and SVG charts.
    Cluster(crate::bench_cluster::ClusterBenchArgs),
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Seconds to measure each figure.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SwapArgs {
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// UHS ids created before measuring.
    #[arg(long, default_value_t = 500_000)]
    pub preload: usize,
    /// Compact transactions in flight.
    #[arg(long, default_value_t = 20_000)]
    pub window: usize,
    /// Measure without fsync (never in production).
    #[arg(long)]
    pub no_fsync: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BenchCommand::Validate(args) => validate(args),
        BenchCommand::Swap(args) => swap(args),
        BenchCommand::Postgres(args) => bench_postgres::run(args),
        BenchCommand::Cluster(args) => crate::bench_cluster::run(args),
    }
}

fn signed_2in2out(count: usize) -> Vec<SpecieTransaction> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let keypair = Keypair::new_global(&mut rng);
    let commitment = witness_program_commitment(&xonly_bytes(&keypair));
    (0..count)
        .map(|_| {
            let inputs: Vec<Input> = (0..2)
                .map(|_| Input {
                    prevout: OutPoint {
                        txid: Txid(rng.gen()),
                        index: 0,
                    },
                    data: Output {
                        witness_program_commitment: commitment,
                        value: 50,
                    },
                })
                .collect();
            let outputs = vec![
                Output {
                    witness_program_commitment: commitment,
                    value: 60,
                },
                Output {
                    witness_program_commitment: commitment,
                    value: 40,
                },
            ];
            let mut tx = Transaction {
                inputs,
                outputs,
                witnesses: vec![],
            };
            tx.sign(&[keypair, keypair], NonceMode::Randomized).expect("own key");
            SpecieTransaction::Transfer(tx)
        })
        .collect()
}

fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let duration = Duration::from_secs_f64(args.seconds);
    let txs = signed_2in2out(4096);
    let issuers = IssuerKeys::from_hex::<&str>(&[]).expect("empty");
    let verify_per_s = ceiling::verify_per_s(duration);
    let started = Instant::now();
    let mut validated = 0usize;
    while started.elapsed() < duration {
        let verdicts = specie_sentinel::validate_batch(&txs, &issuers);
        assert!(verdicts.iter().all(Result::is_ok));
        validated += verdicts.len();
    }
    let tps = validated as f64 / started.elapsed().as_secs_f64();
    let ceiling_tps = verify_per_s / 2.0;
    let ratio = tps / ceiling_tps;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"validate_tps": tps, "verify_per_s": verify_per_s, "ceiling_tps": ceiling_tps, "ratio": ratio, "threads": rayon::current_num_threads()})
        );
    } else {
        println!(
            "sentinel validation, 2-in/2-out, {} threads",
            rayon::current_num_threads()
        );
        println!("  raw BIP-340 verify   {verify_per_s:>10.0} verifications/s  = ceiling {ceiling_tps:.0} tx/s");
        println!(
            "  sentinel validate    {tps:>10.0} tx/s  = {:.1}% of the ceiling",
            100.0 * ratio
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What [`measure_swap`] runs: compact 2-in/2-out swaps through an embedded node.
pub(crate) struct SwapParams {
    pub seconds: f64,
    pub shards: usize,
    pub preload: usize,
    pub window: usize,
    pub fsync: bool,
}

/// What [`measure_swap`] measured.
pub(crate) struct SwapReport {
    pub tps: f64,
    pub confirmed: u64,
    pub seconds: f64,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
}

fn swap(args: SwapArgs) -> anyhow::Result<ExitCode> {
    let report = measure_swap(&SwapParams {
        seconds: args.seconds,
        shards: args.shards,
        preload: args.preload,
        window: args.window,
        fsync: !args.no_fsync,
    })?;
    let SwapReport {
        tps,
        confirmed,
        seconds: elapsed,
        latency_ms_p50: p50,
        latency_ms_p99: p99,
    } = report;
    if args.json {
        println!(
            "{}",
            serde_json::json!({"swap_tps": tps, "confirmed": confirmed, "seconds": elapsed, "shards": args.shards, "fsync": !args.no_fsync, "latency_ms_p50": p50, "latency_ms_p99": p99})
        );
    } else {
        println!(
            "2PC swap, 2-in/2-out compact transactions, {} shards, fsync {}",
            args.shards,
            if args.no_fsync { "OFF" } else { "on" }
        );
        println!("  {confirmed} confirmed in {elapsed:.1} s = {tps:.0} tx/s; latency p50 {p50:.1} ms, p99 {p99:.1} ms");
    }
    Ok(ExitCode::SUCCESS)
}

/// Preloads `preload` UHS ids into a fresh embedded node in a temporary directory, then keeps
/// `window` compact 2-in/2-out swaps in flight for `seconds` (`specie bench swap` and
/// `specie bench postgres` both measure with this).
pub(crate) fn measure_swap(args: &SwapParams) -> anyhow::Result<SwapReport> {
    anyhow::ensure!(
        args.window > 0 && args.preload >= 2 * args.window,
        "--preload must be at least twice --window"
    );
    let dir = tempfile::Builder::new().prefix("specie-bench-swap-").tempdir()?;
    let mut options = NodeOptions::new(dir.path());
    options.shards = Some(args.shards);
    options.fsync = args.fsync;
    let node = EmbeddedNode::open(options).context("cannot start the embedded node")?;
    let handle = node.handle();
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);

    // Preload: compact transactions that only create ids (the sentinel is bypassed throughout).
    let mut unspent: Vec<UhsId> = (0..args.preload).map(|_| UhsId(rng.gen())).collect();
    let preload = preload_transactions(&unspent, 100, &mut rng);
    let expected = preload.len();
    for chunk in preload.chunks(1000) {
        handle.submit_compact(chunk.to_vec(), &reply);
    }
    for _ in 0..expected {
        let completion = completions.blocking_recv().context("node stopped")?;
        anyhow::ensure!(
            completion.status == TxStatus::Confirmed,
            "preload failed: {:?}",
            completion.status
        );
    }

    let duration = Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let mut in_flight: std::collections::HashMap<u64, Vec<UhsId>> = std::collections::HashMap::new();
    let mut next_ref = 0u64;
    let mut confirmed = 0u64;
    let mut latency = hdrhistogram::Histogram::<u64>::new(3)?;
    let mut sent_at: std::collections::HashMap<u64, Instant> = std::collections::HashMap::new();
    while started.elapsed() < duration || !in_flight.is_empty() {
        if started.elapsed() < duration && in_flight.len() < args.window {
            let room = (args.window - in_flight.len()).min(2000).min(unspent.len() / 2);
            let mut batch = Vec::with_capacity(room);
            let now = Instant::now();
            for _ in 0..room {
                let spent = vec![
                    unspent.swap_remove(rng.gen_range(0..unspent.len())),
                    unspent.swap_remove(rng.gen_range(0..unspent.len())),
                ];
                let created = vec![UhsId(rng.gen()), UhsId(rng.gen())];
                in_flight.insert(next_ref, created.clone());
                sent_at.insert(next_ref, now);
                batch.push((
                    next_ref,
                    CompactTransaction {
                        txid: Txid(rng.gen()),
                        spent,
                        created,
                        ..Default::default()
                    },
                ));
                next_ref += 1;
            }
            handle.submit_compact(batch, &reply);
        }
        let Some(completion) = completions.blocking_recv() else {
            break;
        };
        for completion in std::iter::once(completion).chain(std::iter::from_fn(|| completions.try_recv().ok())) {
            let created = in_flight.remove(&completion.client_ref).context("unknown completion")?;
            anyhow::ensure!(
                completion.status == TxStatus::Confirmed,
                "a swap was refused: {:?}",
                completion.status
            );
            let _ = latency.record(
                sent_at
                    .remove(&completion.client_ref)
                    .expect("sent")
                    .elapsed()
                    .as_micros() as u64,
            );
            confirmed += 1;
            unspent.extend(created);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    node.shutdown();
    let tps = confirmed as f64 / elapsed;
    let (p50, p99) = (
        latency.value_at_quantile(0.5) as f64 / 1000.0,
        latency.value_at_quantile(0.99) as f64 / 1000.0,
    );
    Ok(SwapReport {
        tps,
        confirmed,
        seconds: elapsed,
        latency_ms_p50: p50,
        latency_ms_p99: p99,
    })
}

/// Compact transactions that only create `ids`, `per_tx` at a time, numbered from 0: how the
/// swap benchmarks fill the UHS before measuring (the sentinel is bypassed).
pub(crate) fn preload_transactions(ids: &[UhsId], per_tx: usize, rng: &mut impl Rng) -> Vec<(u64, CompactTransaction)> {
    ids.chunks(per_tx)
        .enumerate()
        .map(|(i, ids)| {
            (
                i as u64,
                CompactTransaction {
                    txid: Txid(rng.gen()),
                    created: ids.to_vec(),
                    ..Default::default()
                },
            )
        })
        .collect()
}
