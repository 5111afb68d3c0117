//! `specie bench byzantine`: specie's Byzantine mode (FastPay, seed 002) measured on this machine
//! with persistence on, beside the signature work that bounds it and the reference
//! implementation's figures (in memory, no persistence) on a machine of this kind.
//!
//! One run measures, in this order:
//! 1. the ceilings, on one core: Ed25519 signatures, strict single verifications and certificate
//!    checks (one batch verification of a quorum of authority signatures and the owner's) per
//!    second of the measuring thread's CPU time ([`ceilings`]);
//! 2. a committee of 4 authorities × `--shards` shards, each shard on its own embedded host over
//!    its own log (fsync per round, group commit), under a closed loop of `--window` transfer
//!    orders from distinct funded accounts (signed beforehand), each sent to all 4 authorities and
//!    done when all 4 votes are back; then the certificates made from those votes, sent the same
//!    way ([`load`]). Orders per second, and CPU per order per authority from `getrusage` (the
//!    process's CPU less the driving thread's) beside the signature work each order needs;
//! 3. end-to-end payment latency through the client's pipeline at a moderate window, with every
//!    authority up and with one silent ([`latency`]).
//!
//! Each committee's books are audited when it stops: a run whose books do not balance fails.

mod ceilings;
mod latency;
mod load;
mod report;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use specie_committee::Behaviour;

use self::ceilings::Ceilings;
use self::latency::{measure_latency, Latency};
use self::load::{measure_load, CommitteeSetup, LoadFigures, AUTHORITIES};
use crate::ensure_that;
use crate::error::BenchResult;

/// What `specie bench byzantine` runs (see its command-line help).
/// Shards per authority unless told: the machine's cores divided among the authorities, at
/// least 2. A shard is one thread (its host), so the committee can use every core only with
/// at least one shard per core.
pub fn default_shards() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    u32::try_from(cores.div_ceil(AUTHORITIES).max(2)).unwrap_or(u32::MAX)
}

#[derive(Clone, Debug)]
pub struct ByzantineOptions {
    /// Shards per authority.
    pub shards: u32,
    /// Transfer orders (one per funded account), then as many confirmation orders.
    pub orders: usize,
    /// Orders in flight during the throughput phases.
    pub window: usize,
    /// CPU seconds to measure each ceiling.
    pub ceiling_seconds: f64,
    /// Payments per latency run.
    pub latency_payments: usize,
    /// Payments in flight during the latency runs.
    pub latency_window: usize,
    /// Measure without fsync (never in production; to see what persistence costs).
    pub no_fsync: bool,
    pub json: bool,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub(crate) struct ByzantineReport {
    pub options: ByzantineOptions,
    /// The 1-minute load average when the run started: other processes share the cores.
    pub load_average: Option<f64>,
    pub cores: usize,
    pub ceilings: Ceilings,
    pub load: LoadFigures,
    pub all_up: Latency,
    pub one_silent: Latency,
    pub seconds: f64,
}

/// `specie bench byzantine`.
pub fn run(options: ByzantineOptions) -> BenchResult<ExitCode> {
    let report = measure(&options, |step| {
        if !options.json {
            eprintln!("{step}");
        }
    })?;
    if options.json {
        println!("{}", report::json(&report));
    } else {
        print!("{}", report::text(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs every measurement, telling `progress` what it starts.
pub(crate) fn measure(options: &ByzantineOptions, progress: impl Fn(&str)) -> BenchResult<ByzantineReport> {
    ensure_that!(options.shards > 0, "--shards must be positive");
    ensure_that!(options.orders >= 2, "--orders must be at least 2");
    ensure_that!(options.latency_payments >= 2, "--latency-payments must be at least 2");
    ensure_that!(
        options.window > 0 && options.latency_window > 0,
        "the windows must be positive"
    );
    ensure_that!(options.ceiling_seconds > 0.0, "--ceiling-seconds must be positive");
    let started = Instant::now();
    let load_average = load_average();
    progress("measuring the signature ceilings on one core…");
    let ceilings = ceilings::measure(options.ceiling_seconds);
    let dir = tempfile::Builder::new().prefix("specie-bench-byzantine-").tempdir()?;
    let setup = CommitteeSetup {
        shards: options.shards,
        fsync: !options.no_fsync,
    };
    progress(&format!(
        "committee throughput: funding {} accounts, then transfer and confirmation orders…",
        options.orders
    ));
    let load = measure_load(&setup, &dir.path().join("load"), options.orders, options.window)?;
    progress("payment latency, every authority up…");
    let all_up = latency_run(options, &setup, &dir.path().join("all-up"), None)?;
    progress("payment latency, one authority silent…");
    let one_silent = latency_run(options, &setup, &dir.path().join("one-silent"), Some(AUTHORITIES - 1))?;
    Ok(ByzantineReport {
        options: options.clone(),
        load_average,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ceilings,
        load,
        all_up,
        one_silent,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn latency_run(
    options: &ByzantineOptions,
    setup: &CommitteeSetup,
    dir: &Path,
    silent: Option<usize>,
) -> BenchResult<Latency> {
    let behaviours = (0..AUTHORITIES)
        .map(|a| match Some(a) == silent {
            true => Behaviour::Silent,
            false => Behaviour::Honest,
        })
        .collect();
    measure_latency(setup, dir, options.latency_payments, options.latency_window, behaviours)
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole bench at a toy size: every phase runs, every count adds up and every figure is a
    /// positive, finite number (no timing is asserted: this machine is shared).
    #[test]
    fn the_bench_runs_every_phase_at_a_toy_size_and_reports_sane_figures() {
        let options = ByzantineOptions {
            shards: 2,
            orders: 300,
            window: 64,
            ceiling_seconds: 0.02,
            latency_payments: 200,
            latency_window: 16,
            no_fsync: false,
            json: true,
        };
        let report = measure(&options, |_| {}).unwrap();
        let positive = |what: &str, x: f64| assert!(x.is_finite() && x > 0.0, "{what} = {x}");
        let c = &report.ceilings;
        positive("sign/s", c.sign_per_s);
        positive("verify_strict/s", c.verify_strict_per_s);
        positive("certificate checks/s", c.certificate_check_per_s);
        assert!(c.transfer_work_us() > 1e6 / c.sign_per_s);
        for phase in [&report.load.transfer, &report.load.confirm] {
            assert_eq!(phase.orders, 300);
            positive("orders/s", phase.orders_per_s());
            positive("CPU per order", phase.cpu_us_per_order_per_authority());
            positive("driver CPU per order", phase.driver_cpu_us_per_order());
            assert!(phase.cpu.process_s >= phase.cpu.this_thread_s);
        }
        for latency in [&report.all_up, &report.one_silent] {
            assert_eq!(latency.payments, 200);
            positive("payments/s", latency.payments_per_s());
            positive("p50 to certificate", latency.to_certificate.p50_ms);
            assert!(latency.to_certificate.p50_ms <= latency.to_certificate.p99_ms);
            assert!(latency.to_certificate.p50_ms <= latency.to_settlement.p50_ms);
            assert!(latency.to_settlement.p50_ms <= latency.to_settlement.p99_ms);
        }

        let json = report::json(&report);
        for pointer in [
            "/ceilings_per_core_second/sign",
            "/transfer/committee_orders_per_s",
            "/transfer/cpu_to_signature_work",
            "/transfer/committee_orders_per_s_at_full_cpu",
            "/confirmation/machine_share",
            "/confirmation/per_authority_equivalent_per_s",
            "/latency/one_silent/to_settlement_ms/p99",
            "/latency/p99_ratio_silent_to_all_up/to_certificate",
            "/against_reference/committee_transfer_per_s/ratio",
        ] {
            assert!(
                json.pointer(pointer).is_some_and(|v| v.is_number()),
                "{pointer} in {json}"
            );
        }
        let text = report::text(&report);
        let verdicts = text.matches("meets target").count() + text.matches("below target").count();
        assert_eq!(verdicts, 6, "one verdict per target:\n{text}");
    }
}
