//! `specie bench validate` and `specie bench swap`: throughput through an embedded node, each
//! printed beside the ceiling measured in the same run.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::ensure_that;
use crate::error::{BenchResult, StepContext};
use rand::{Rng, SeedableRng};
use specie_api::{CompletionSender, TxStatus};
use specie_node::{EmbeddedNode, NodeOptions};
use specie_sentinel::TrustedKeys;
use specie_transaction::{CompactTransaction, UhsId};

use crate::ceiling;

#[derive(Clone, Debug)]
pub struct ValidateOptions {
    /// Seconds to measure each figure.
    pub seconds: f64,
    pub json: bool,
}

#[derive(Clone, Debug)]
pub struct SwapOptions {
    pub seconds: f64,
    pub shards: usize,
    /// UHS ids created before measuring.
    pub preload: usize,
    /// Compact transactions in flight.
    pub window: usize,
    /// Measure without fsync (never in production).
    pub no_fsync: bool,
    /// Also measure one-replica Raft groups ([`crate::one_replica`]).
    pub also_one_replica_raft: bool,
    pub json: bool,
}

/// `specie bench validate`.
pub fn validate(args: ValidateOptions) -> BenchResult<ExitCode> {
    let duration = Duration::from_secs_f64(args.seconds);
    let txs = specie_workload::compact::signed_2in2out(4096, &mut rand::rngs::StdRng::seed_from_u64(7));
    // No issuer, no committee: the workload is transfers only.
    let trusted = TrustedKeys::default();
    let verify_per_s = ceiling::verify_per_s(duration);
    let started = Instant::now();
    let mut validated = 0usize;
    while started.elapsed() < duration {
        let verdicts = specie_sentinel::validate_batch(&txs, &trusted);
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
pub struct SwapParams {
    pub seconds: f64,
    pub shards: usize,
    pub preload: usize,
    pub window: usize,
    pub fsync: bool,
}

/// What [`measure_swap`] measured.
pub struct SwapReport {
    pub tps: f64,
    pub confirmed: u64,
    pub seconds: f64,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
}

/// `specie bench swap`.
pub fn swap(args: SwapOptions) -> BenchResult<ExitCode> {
    let params = SwapParams {
        seconds: args.seconds,
        shards: args.shards,
        preload: args.preload,
        window: args.window,
        fsync: !args.no_fsync,
    };
    let embedded = measure_swap(&params)?;
    let raft = if args.also_one_replica_raft {
        Some(crate::one_replica::measure_one_replica_raft(&params)?)
    } else {
        None
    };
    if args.json {
        let mut json = report_json(&embedded);
        json["shards"] = args.shards.into();
        json["fsync"] = (!args.no_fsync).into();
        if let Some(raft) = &raft {
            json["one_replica_raft"] = report_json(raft);
            json["one_replica_raft"]["ratio_to_embedded"] = (raft.tps / embedded.tps).into();
        }
        println!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "2PC swap, 2-in/2-out compact transactions, {} shards, fsync {}",
        args.shards,
        if args.no_fsync { "OFF" } else { "on" }
    );
    print_swap("embedded host", &embedded);
    if let Some(raft) = &raft {
        print_swap("one-replica Raft groups", raft);
        println!(
            "  one-replica Raft / embedded: {:.2}x throughput",
            raft.tps / embedded.tps
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn report_json(report: &SwapReport) -> serde_json::Value {
    serde_json::json!({"swap_tps": report.tps, "confirmed": report.confirmed, "seconds": report.seconds, "latency_ms_p50": report.latency_ms_p50, "latency_ms_p99": report.latency_ms_p99})
}

fn print_swap(label: &str, report: &SwapReport) {
    let SwapReport {
        tps,
        confirmed,
        seconds,
        latency_ms_p50: p50,
        latency_ms_p99: p99,
    } = report;
    println!("  {label:<24} {confirmed} confirmed in {seconds:.1} s = {tps:.0} tx/s; latency p50 {p50:.1} ms, p99 {p99:.1} ms");
}

/// Preloads `preload` UHS ids into a fresh embedded node in a temporary directory, then keeps
/// `window` compact 2-in/2-out swaps in flight for `seconds` (`specie bench swap` and
/// `specie bench postgres` both measure with this).
pub fn measure_swap(args: &SwapParams) -> BenchResult<SwapReport> {
    check_swap_params(args)?;
    let dir = tempfile::Builder::new().prefix("specie-bench-swap-").tempdir()?;
    let mut options = NodeOptions::new(dir.path());
    options.shards = Some(args.shards);
    options.fsync = args.fsync;
    // Compact transactions bypass the ledger of record, which keeps full ones.
    options.ledger_of_record = Some(false);
    let node = EmbeddedNode::open(options).step("cannot start the embedded node")?;
    let handle = node.handle();
    let report = drive_swaps(args, |batch, reply| handle.submit_compact(batch, reply));
    node.shutdown();
    report
}

pub(crate) fn check_swap_params(args: &SwapParams) -> BenchResult<()> {
    ensure_that!(
        args.window > 0 && args.preload >= 2 * args.window,
        "--preload must be at least twice --window"
    );
    Ok(())
}

/// The swap workload against any 2PC engine that takes compact transactions with a client
/// reference and answers each with a [`specie_api::Completion`]: preload, then a closed loop.
pub(crate) fn drive_swaps(
    args: &SwapParams,
    submit: impl Fn(Vec<(u64, CompactTransaction)>, &CompletionSender),
) -> BenchResult<SwapReport> {
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);

    // Preload: compact transactions that only create ids (the sentinel is bypassed throughout).
    let mut unspent: Vec<UhsId> = (0..args.preload).map(|_| UhsId(rng.gen())).collect();
    let preload = specie_workload::compact::preload_transactions(&unspent, 100, &mut rng);
    let expected = preload.len();
    for chunk in preload.chunks(1000) {
        submit(chunk.to_vec(), &reply);
    }
    for _ in 0..expected {
        let completion = completions.blocking_recv().step("node stopped")?;
        ensure_that!(
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
                let swap = specie_workload::compact::swap_from_pool(&mut unspent, &mut rng);
                in_flight.insert(next_ref, swap.created.clone());
                sent_at.insert(next_ref, now);
                batch.push((next_ref, swap));
                next_ref += 1;
            }
            submit(batch, &reply);
        }
        let Some(completion) = completions.blocking_recv() else {
            break;
        };
        for completion in std::iter::once(completion).chain(std::iter::from_fn(|| completions.try_recv().ok())) {
            let created = in_flight.remove(&completion.client_ref).step("unknown completion")?;
            ensure_that!(
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
