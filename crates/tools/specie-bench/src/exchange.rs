//! `specie bench exchange`: the SPEEDEX exchange (seed 004, §6, §7 and Appendix K) measured on
//! this machine, beside the reference implementation's figures and the ceiling that bounds it,
//! measured in the same run.
//!
//! One run measures, in this order:
//! 1. **clearing** ([`clearing`]): for each (assets, offers) cell, books drawn from the synthetic
//!    workload (offers around drifting valuations), cleared by `specie_clearing::compute_with_report`
//!    with the exchange's own parameters, several runs: time (median, p99, max), Tâtonnement
//!    time-outs, clearings refused by the exact `check` (must be 0), and the approximation quality.
//!    Book preparation (what `Ledger::supply` does) and `check` are timed apart;
//! 2. **the ceiling**: Ed25519 strict single verifications per second of one core's CPU time and
//!    on all cores by the wall clock (the exchange verifies every transaction's signature);
//! 3. **execution** ([`execution`]): blocks of payments and blocks of crossing offers applied with
//!    `Ledger::apply` (signatures in batches, screen, clearing check, effects, trades, the Merkle
//!    state hash rehashed where the block touched it) to a ledger of `--accounts` accounts, each block then appended to a real log with
//!    fdatasync, on a rayon pool of one thread and on all cores; the time of a block broken down
//!    into its steps.

mod clearing;
mod execution;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::Serialize;

use crate::ceiling::per_cpu_second;
use crate::error::{BenchError, BenchResult};

pub use clearing::CellReport;
pub use execution::{ExecutionReport, KindReport};

/// The SPEEDEX reference implementation clearing 50-asset books on a 2-core machine of this kind
/// (issue 11, item 9, measured for this comparison): median milliseconds by open offers. At 500
/// offers 1 of its 5 runs timed out; its clearing linear program alone takes 0.5–1 ms (GLPK).
pub const REFERENCE_MEDIAN_MS_50_ASSETS: [(usize, f64); 4] =
    [(500, 1_500.0), (10_000, 123.0), (100_000, 198.0), (500_000, 275.0)];
/// Signatures per batch in the batch-verification ceiling.
const CEILING_BATCH: usize = 64;
/// The assets of the reference figures.
pub const REFERENCE_ASSETS: usize = 50;
/// SPEEDEX's payments per second per thread: seed 004 §7 (payments only, 10M accounts, 50 assets,
/// persistence off): 60k/s on 6 threads, 5.6x its single-thread figure, so about 10k/s a thread.
pub const PAPER_PAYMENTS_PER_S_PER_THREAD: f64 = 10_000.0;
/// specie's targets: clearing p99 under this for 50 assets, at every size from 1k to 500k offers
/// and on empty or tiny books…
pub const TARGET_CLEARING_P99_MS: f64 = 50.0;
/// …and this multiple of the paper's per-thread execution rate.
pub const TARGET_EXECUTION_RATIO: f64 = 2.0;

/// What `specie bench exchange` runs.
#[derive(Clone, Debug)]
pub struct ExchangeBenchOptions {
    /// Asset counts of the clearing cells.
    pub assets: Vec<usize>,
    /// Open offers of the clearing cells.
    pub offers: Vec<usize>,
    /// Clearing runs per cell up to 10k offers; half as many at 100k, a quarter at 500k and
    /// above (at least one).
    pub runs: usize,
    /// Accounts of the execution ledger.
    pub accounts: usize,
    /// Assets of the execution ledger.
    pub execution_assets: usize,
    /// Transactions per block in the execution phase.
    pub block_transactions: usize,
    /// Blocks of each kind (payments, offers) on each thread count.
    pub blocks: usize,
    /// Threads of the "all cores" pool.
    pub threads: usize,
    /// Seconds of CPU time to measure the ceiling.
    pub ceiling_seconds: f64,
    pub seed: u64,
    pub json: bool,
}

/// The Ed25519 ceiling the execution is bounded by.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Ceiling {
    /// Strict single verifications per second of one core's CPU time.
    pub verify_strict_per_core_per_s: f64,
    /// The same on every thread of the all-cores pool at once, by the wall clock.
    pub verify_strict_all_cores_per_s: f64,
    /// Strict verifications per CPU second with the public key decompressed from its 32 bytes
    /// each time, as `Ledger::apply` does.
    pub verify_strict_decompressing_per_core_per_s: f64,
    /// Signatures per CPU second verified in batches of 64 (`ed25519_dalek::verify_batch`): what a
    /// batched check would allow (its acceptance rule is not `verify_strict`'s).
    pub batch_verify_per_core_per_s: f64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct ExchangeBenchReport {
    pub cores: usize,
    pub clearing: Vec<CellReport>,
    pub clearing_summary: clearing::Summary,
    pub ceiling: Ceiling,
    pub execution: ExecutionReport,
}

/// `specie bench exchange`.
pub fn run(options: ExchangeBenchOptions) -> BenchResult<ExitCode> {
    let started = Instant::now();
    let report = measure(&options, |step| {
        if !options.json {
            eprintln!("[{:5.1} s] {step}", started.elapsed().as_secs_f64());
        }
    })?;
    match options.json {
        true => println!("{}", serde_json::to_string_pretty(&report)?),
        false => print!("{}", table(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

fn validate(options: &ExchangeBenchOptions) -> BenchResult<()> {
    let bad = |what: &str| Err(BenchError::InvalidOptions(what.to_string()));
    if options
        .assets
        .iter()
        .any(|a| !(2..=specie_clearing::ASSETS_MAX).contains(a))
    {
        return bad("--assets: each between 2 and 64");
    }
    if !(2..=specie_clearing::ASSETS_MAX).contains(&options.execution_assets) {
        return bad("--execution-assets: between 2 and 64");
    }
    if options.runs == 0 || options.blocks == 0 || options.threads == 0 {
        return bad("--runs, --blocks and --threads must be positive");
    }
    if options.accounts < 2 || options.block_transactions == 0 {
        return bad("--accounts must be at least 2 and --block-transactions positive");
    }
    // Sequence numbers: a block holds at most 64 of one account's transactions (the window).
    if options.block_transactions > options.accounts.saturating_mul(8) {
        return bad("--block-transactions at most 8 per account (the sequence window is 64)");
    }
    if !(options.ceiling_seconds > 0.0 && options.ceiling_seconds.is_finite()) {
        return bad("--ceiling-seconds must be positive");
    }
    Ok(())
}

fn measure(options: &ExchangeBenchOptions, say: impl Fn(&str)) -> BenchResult<ExchangeBenchReport> {
    validate(options)?;
    let cells = clearing::measure(options, &say);
    let clearing_summary = clearing::summarise(&cells);
    say("the Ed25519 ceiling …");
    let ceiling = measure_ceiling(options.ceiling_seconds, options.threads);
    let execution = execution::measure(options, &ceiling, &say)?;
    Ok(ExchangeBenchReport {
        cores: options.threads,
        clearing: cells,
        clearing_summary,
        ceiling,
        execution,
    })
}

/// Strict verifications of a signature over a message the size of a transaction's signing bytes;
/// the same with the key decompressed from its bytes each time (as `apply` does); batches of 64.
fn measure_ceiling(seconds: f64, threads: usize) -> Ceiling {
    let duration = Duration::from_secs_f64(seconds);
    let keys: Vec<SigningKey> = (0..CEILING_BATCH as u8)
        .map(|n| SigningKey::from_bytes(&[n; 32]))
        .collect();
    let verifying: Vec<VerifyingKey> = keys.iter().map(SigningKey::verifying_key).collect();
    let messages: Vec<Vec<u8>> = (0..CEILING_BATCH).map(|n| vec![n as u8; 110]).collect();
    let signatures: Vec<Signature> = keys.iter().zip(&messages).map(|(k, m)| k.sign(m)).collect();
    let verify = || assert!(verifying[0].verify_strict(&messages[0], &signatures[0]).is_ok());
    let started = Instant::now();
    let verified: usize = std::thread::scope(|scope| {
        let running: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut count = 0usize;
                    while started.elapsed() < duration {
                        verify();
                        count += 1;
                    }
                    count
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().expect("a verifying thread")).sum()
    });
    let all_cores = verified as f64 / started.elapsed().as_secs_f64();
    let key_bytes = verifying[0].to_bytes();
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    Ceiling {
        verify_strict_per_core_per_s: per_cpu_second(duration, verify),
        verify_strict_all_cores_per_s: all_cores,
        verify_strict_decompressing_per_core_per_s: per_cpu_second(duration, || {
            let key = VerifyingKey::from_bytes(&key_bytes).expect("a valid key");
            assert!(key.verify_strict(&messages[0], &signatures[0]).is_ok());
        }),
        batch_verify_per_core_per_s: per_cpu_second(duration, || {
            assert!(ed25519_dalek::verify_batch(&slices, &signatures, &verifying).is_ok());
        }) * CEILING_BATCH as f64,
    }
}

/// Median, p99 (nearest rank) and max of some figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(mut values: Vec<f64>) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        values.sort_by(f64::total_cmp);
        let rank = |q: f64| values[((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1];
        Spread {
            median: rank(0.5),
            p99: rank(0.99),
            max: values[values.len() - 1],
        }
    }
}

/// Milliseconds since `started`.
fn ms_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

fn verdict(meets: bool) -> &'static str {
    if meets {
        "meets target"
    } else {
        "below target"
    }
}

fn table(report: &ExchangeBenchReport) -> String {
    let mut out = clearing::table(&report.clearing, &report.clearing_summary);
    out.push('\n');
    out.push_str(&execution::table(&report.execution, &report.ceiling, report.cores));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole bench at a toy size: every phase runs, no clearing is invalid, the JSON has
    /// every figure (no timing is asserted).
    #[test]
    fn the_bench_runs_every_phase_at_a_toy_size_and_reports_its_figures() {
        let options = ExchangeBenchOptions {
            assets: vec![2],
            offers: vec![0, 300],
            runs: 1,
            accounts: 300,
            execution_assets: 3,
            block_transactions: 200,
            blocks: 1,
            threads: 2,
            ceiling_seconds: 0.02,
            seed: 1,
            json: true,
        };
        let report = measure(&options, |_| {}).unwrap();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json.pointer("/clearing_summary/invalid"), Some(&serde_json::json!(0)));
        assert_eq!(json["clearing"].as_array().map(Vec::len), Some(2));
        for pointer in [
            "/clearing/1/compute_ms/median",
            "/clearing/1/compute_ms/p99",
            "/clearing/1/supply_ms/median",
            "/clearing/1/check_ms/median",
            "/clearing/1/volume_cleared_share/median",
            "/ceiling/verify_strict_per_core_per_s",
            "/ceiling/verify_strict_all_cores_per_s",
            "/ceiling/verify_strict_decompressing_per_core_per_s",
            "/ceiling/batch_verify_per_core_per_s",
            "/execution/kinds/0/applied_per_s",
            "/execution/kinds/0/durable_per_s",
            "/execution/kinds/0/per_cpu_s",
            "/execution/kinds/0/per_block_ms/signatures/cpu",
            "/execution/kinds/0/per_block_ms/empty_block_apply/wall",
            "/execution/kinds/0/per_block_ms/log/wall",
            "/execution/kinds/3/durable_per_s",
            "/execution/one_thread_payments_vs_paper",
        ] {
            let value = json.pointer(pointer).and_then(serde_json::Value::as_f64);
            assert!(value.is_some_and(|v| v.is_finite() && v > 0.0), "{pointer} in {json:#}");
        }
        assert!(json.pointer("/clearing/1/unrealized_utility_ratio/median").is_some());
        let traded = json
            .pointer("/execution/kinds/1/offers_traded")
            .and_then(serde_json::Value::as_u64);
        assert!(traded.is_some_and(|t| t > 0), "crossing offers trade: {json:#}");
        let text = table(&report);
        assert!(text.contains("clearing") && text.contains("execution"), "{text}");
    }
}
