//! `specie bench cluster`: swap load against a running cluster (`specie cluster up`), closed loop
//! (a fixed window in flight) or open loop (a target rate), with optional leader kills at given
//! times. Measures confirmed transactions per second, second by second, and an HDR histogram of
//! latency; writes `result.json`, `throughput.svg` (faults marked, as in Hamilton's Figure 5)
//! and `latency.svg`. See docs/bench-cluster.md.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_api::Backend;
use specie_api::{Completion, TxStatus};
use specie_cluster::operator;
use specie_cluster::sentinel::ClusterBackend;
use specie_cluster::{Topology, TransportMode};
use specie_shard::Vote;
use specie_transaction::{CompactTransaction, Txid, UhsId};

use crate::cluster_cmd;

/// Ids created by one preload transaction.
const PRELOAD_IDS_PER_TX: usize = 100;
/// How long to wait for the last completions once the load stops (a submission times out after
/// 30 s in the sentinel, so every one is answered by then).
const DRAIN_MAX: Duration = Duration::from_secs(40);
/// Open loop: how often the generator submits what is due.
const OPEN_TICK: Duration = Duration::from_millis(10);
/// Throughput counts as recovered once a second reaches this share of the pre-fault mean.
const RECOVERED_SHARE: f64 = 0.5;
/// A fault whose throughput does not fall below the threshold within this many seconds caused no dip.
const DIP_SEARCH_SECONDS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Keep `--window` transactions in flight.
    Closed,
    /// Submit `--rate` transactions per second whatever the completions.
    Open,
}

/// `GROUP@SECONDS`: kill the group's leader that many seconds into the load.
#[derive(Clone, Debug)]
pub struct FaultSpec {
    pub group: String,
    pub at_s: f64,
}

fn parse_fault(text: &str) -> Result<FaultSpec, String> {
    let (group, at) = text
        .rsplit_once('@')
        .ok_or_else(|| format!("expected GROUP@SECONDS, e.g. shard-0@8, not '{text}'"))?;
    let at_s: f64 = at.parse().map_err(|_| format!("'{at}' is not a number of seconds"))?;
    if group.is_empty() || !at_s.is_finite() || at_s < 0.0 {
        return Err(format!("expected GROUP@SECONDS with SECONDS ≥ 0, not '{text}'"));
    }
    Ok(FaultSpec {
        group: group.to_string(),
        at_s,
    })
}

#[derive(Args, Debug)]
pub struct ClusterBenchArgs {
    /// The running cluster's directory (as given to `specie cluster up --dir`).
    #[arg(long, default_value = "./specie-cluster")]
    pub dir: PathBuf,
    /// Seconds of load (after the preload).
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    #[arg(long, value_enum, default_value_t = Mode::Closed)]
    pub mode: Mode,
    /// Closed loop: transactions kept in flight.
    #[arg(long, default_value_t = 20_000)]
    pub window: usize,
    /// Open loop: transactions submitted per second (required with --mode open).
    #[arg(long, value_name = "TPS")]
    pub rate: Option<f64>,
    /// Open loop: hard cap on transactions in flight; what is due beyond it is counted as not sent.
    #[arg(long, default_value_t = 100_000)]
    pub in_flight_max: usize,
    /// Kill -9 the current leader of GROUP at SECONDS into the load, and restart it
    /// --restart-after seconds later (repeatable), e.g. --kill-leader shard-0@8.
    #[arg(long = "kill-leader", value_name = "GROUP@SECONDS", value_parser = parse_fault)]
    pub kill_leader: Vec<FaultSpec>,
    /// Seconds between a kill and the restart of the killed replica.
    #[arg(long, default_value_t = 4.0)]
    pub restart_after: f64,
    /// UHS ids created before the load starts (the generator's pool; at least twice --window).
    #[arg(long, default_value_t = 200_000)]
    pub preload: usize,
    /// Transactions per submission to the coordinator group.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Where to write result.json, throughput.svg and latency.svg [default: DIR/bench].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Measure what mutual TLS costs: run the load once per round, restarting the cluster before
    /// each round with `transport = "mutual-tls"` and `"insecure-plaintext"` in turn (TLS,
    /// plaintext, TLS, …), and report each transport's median and the cost. The cluster file is
    /// set back to mutual-tls at the end, even on error, and the cluster restarted with it.
    #[arg(long, conflicts_with = "kill_leader")]
    pub compare_transport: bool,
    /// With --compare-transport: rounds per transport (at least 2).
    #[arg(long, default_value_t = 2, requires = "compare_transport")]
    pub rounds: usize,
    /// With --compare-transport: seconds to wait after each restart, before the preload.
    #[arg(long, default_value_t = 2.0, requires = "compare_transport")]
    pub settle: f64,
}

/// One swap in flight: what it spends and creates, and when it was sent.
struct Flight {
    sent: Instant,
    spent: [UhsId; 2],
    created: [UhsId; 2],
}

/// Counts for one second of the run (by completion time; `submitted` by send time).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct SecondCounts {
    pub submitted: u64,
    pub confirmed: u64,
    pub busy: u64,
    pub unknown: u64,
    /// Dropped, rejected or invalid.
    pub other: u64,
}

/// Per-second series: bin `i` holds events at `i ≤ t < i + 1` seconds after the load started.
pub(crate) struct PerSecond {
    pub counts: Vec<SecondCounts>,
    pub latency: Vec<Histogram<u64>>,
}

impl PerSecond {
    pub fn new() -> PerSecond {
        PerSecond {
            counts: vec![],
            latency: vec![],
        }
    }

    /// The bin of an event `elapsed` after the start, growing the series as needed.
    pub fn at(&mut self, elapsed: Duration) -> (&mut SecondCounts, &mut Histogram<u64>) {
        let second = elapsed.as_secs() as usize;
        while self.counts.len() <= second {
            self.counts.push(SecondCounts::default());
            self.latency.push(latency_histogram());
        }
        (&mut self.counts[second], &mut self.latency[second])
    }

    pub fn confirmed(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.confirmed).collect()
    }
}

fn latency_histogram() -> Histogram<u64> {
    // Microseconds, 1 µs to 1 hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// How throughput behaved around one fault.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Recovery {
    /// Mean confirmed/s over the full seconds before the fault (since the previous recovery).
    pub baseline_tps: f64,
    /// First second at or after the fault below half the baseline (none: no dip).
    pub dip_second: Option<usize>,
    /// First second after the dip back at half the baseline or more.
    pub recovered_second: Option<usize>,
    /// From the fault to the start of `recovered_second` (0 without a dip; none if throughput
    /// had not recovered when the load stopped).
    pub recovery_s: Option<f64>,
}

/// Recovery after each fault (`fault_s`: seconds into the load, ascending), from the confirmed
/// counts per second; only the first `load_seconds` (full) seconds are considered.
pub(crate) fn recoveries(confirmed: &[u64], fault_s: &[f64], load_seconds: usize) -> Vec<Recovery> {
    let limit = load_seconds.min(confirmed.len());
    let mean = |from: usize, to: usize| {
        let bins = &confirmed[from.min(to)..to];
        (!bins.is_empty()).then(|| bins.iter().sum::<u64>() as f64 / bins.len() as f64)
    };
    let mut results: Vec<Recovery> = vec![];
    // Second 0 holds the ramp-up; baselines start after it, and after the previous recovery.
    let mut baseline_from = 1usize;
    for &fault in fault_s {
        let k = fault.max(0.0).floor() as usize;
        let k_limited = k.min(limit);
        let baseline_tps = mean(baseline_from, k_limited)
            .or_else(|| mean(1, k_limited))
            .or_else(|| mean(0, k_limited))
            .unwrap_or(0.0);
        let threshold = RECOVERED_SHARE * baseline_tps;
        let dip_second = (k..(k + DIP_SEARCH_SECONDS).min(limit)).find(|&s| (confirmed[s] as f64) < threshold);
        let (recovered_second, recovery_s) = match dip_second {
            None => (None, Some(0.0)),
            Some(dip) => match (dip + 1..limit).find(|&s| confirmed[s] as f64 >= threshold) {
                Some(m) => (Some(m), Some(m as f64 - fault)),
                None => (None, None),
            },
        };
        baseline_from = match (dip_second, recovered_second) {
            (Some(_), Some(m)) => m,
            (Some(_), None) => limit,
            (None, _) => k + 1,
        };
        results.push(Recovery {
            baseline_tps,
            dip_second,
            recovered_second,
            recovery_s,
        });
    }
    results
}

/// What the fault thread did for one `--kill-leader`.
#[derive(Clone, Debug, Default, serde::Serialize)]
struct FaultRecord {
    group: String,
    planned_s: f64,
    replica: Option<u64>,
    pid: Option<u32>,
    killed_at_s: Option<f64>,
    /// When another replica of the group first said it leads (polled every 50 ms until the restart).
    new_leader_at_s: Option<f64>,
    new_leader: Option<u64>,
    restarted_at_s: Option<f64>,
    new_pid: Option<u32>,
    error: Option<String>,
}

pub fn run(args: ClusterBenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.seconds > 0.0, "--seconds must be positive");
    anyhow::ensure!(args.batch > 0, "--batch must be positive");
    anyhow::ensure!(args.restart_after >= 0.0, "--restart-after must not be negative");
    if args.mode == Mode::Open && !args.rate.is_some_and(|rate| rate > 0.0) {
        bail!("--mode open needs --rate TPS (positive)");
    }
    let cap = match args.mode {
        Mode::Closed => args.window,
        Mode::Open => args.in_flight_max,
    };
    anyhow::ensure!(
        cap > 0 && args.preload >= 2 * cap,
        "--preload must be at least twice the transactions in flight (--window, or --in-flight-max in open loop)"
    );
    let topology_file = args.dir.join("cluster.toml");
    if !topology_file.exists() {
        bail!(
            "{} does not exist: start a cluster first with `specie cluster up --dir {}`",
            topology_file.display(),
            args.dir.display()
        );
    }
    let topology = Topology::load(&topology_file)?;
    let topology_path = std::fs::canonicalize(&topology_file)?;
    for fault in &args.kill_leader {
        anyhow::ensure!(
            group_replicas(&topology, &fault.group).is_some(),
            "--kill-leader {}: the cluster has no group named '{}'",
            fault.group,
            fault.group
        );
    }
    let out = args.out.clone().unwrap_or_else(|| args.dir.join("bench"));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    if args.compare_transport {
        return compare_transport(&args, &topology_path, &out);
    }
    println!(
        "specie bench cluster: {}; {}; {} s",
        shape_text(&topology),
        load_text(&args),
        args.seconds
    );
    run_load(&args, &topology, &topology_path, &out, None)?;
    Ok(ExitCode::SUCCESS)
}

fn shape_text(topology: &Topology) -> String {
    format!(
        "{} shard group{}, {} coordinator group{}, {} replicas each",
        topology.shard_groups.len(),
        if topology.shard_groups.len() == 1 { "" } else { "s" },
        topology.coordinator_groups.len(),
        if topology.coordinator_groups.len() == 1 {
            ""
        } else {
            "s"
        },
        topology.shard_groups.first().map_or(0, |g| g.replicas.len())
    )
}

fn load_text(args: &ClusterBenchArgs) -> String {
    match args.mode {
        Mode::Closed => format!("closed loop, window {}", args.window),
        Mode::Open => format!(
            "open loop, {:.0} tx/s (in flight ≤ {})",
            args.rate.unwrap_or(0.0),
            args.in_flight_max
        ),
    }
}

/// What one run of the load measured (the whole result is in `result`, as in `result.json`).
struct LoadRun {
    mean_tps: f64,
    peak_tps: u64,
    p50_ms: f64,
    p99_ms: f64,
    confirmed_in_load: u64,
    preload_s: f64,
    /// Generator ids missing from the UHS afterwards (none if every outcome was reported truly).
    pool_missing: Option<usize>,
    cpu: Option<CpuUsage>,
    confirmed_series: Vec<u64>,
    result_file: PathBuf,
}

/// Preloads, runs the load on `topology` (a running cluster) and writes `result.json` and the
/// charts to `out`. The load stops early once `interrupted` is set.
fn run_load(
    args: &ClusterBenchArgs,
    topology: &Topology,
    topology_path: &Path,
    out: &Path,
    interrupted: Option<&AtomicBool>,
) -> anyhow::Result<LoadRun> {
    let rate = args.rate.unwrap_or(0.0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Loads the sentinel's credentials for the transport the cluster file names.
    let backend = ClusterBackend::new(topology, runtime.handle().clone(), &topology.sentinels[0].name)?;
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    // Fresh ids every run: a cluster keeps its UHS across runs (and restarts).
    let mut rng = StdRng::from_entropy();
    let (shape, load_text) = (shape_text(topology), load_text(args));

    // Preload: compact transactions that only create ids.
    let preload_started = Instant::now();
    let mut pool = preload(&runtime, &backend, &reply, &mut completions, &mut rng, args)?;
    let preload_s = preload_started.elapsed().as_secs_f64();
    println!("  preloaded {} ids in {preload_s:.1} s", pool.len());

    // Load, with the fault schedule on its own thread.
    let duration = Duration::from_secs_f64(args.seconds);
    let cpu_start = CpuSnapshot::take(&args.dir, topology_path, topology);
    let started = Instant::now();
    let mut cpu_end: Option<Option<CpuSnapshot>> = None;
    let stop = Arc::new(AtomicBool::new(false));
    let fault_thread = {
        let (dir, topology, topology_path) = (args.dir.clone(), topology.clone(), topology_path.to_path_buf());
        let (faults, restart_after, stop) = (args.kill_leader.clone(), args.restart_after, stop.clone());
        std::thread::spawn(move || {
            inject_faults(
                &dir,
                &topology_path,
                &topology,
                faults,
                Duration::from_secs_f64(restart_after),
                started,
                &stop,
            )
        })
    };
    let mut series = PerSecond::new();
    let mut latency = latency_histogram();
    let mut by_status: BTreeMap<String, u64> = BTreeMap::new();
    let mut in_flight: HashMap<u64, Flight> = HashMap::new();
    let mut unknown: Vec<Flight> = vec![];
    let (mut next_ref, mut submitted, mut due_total, mut not_sent, mut confirmed_in_load) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut peak_in_flight = 0usize;
    loop {
        let elapsed = started.elapsed();
        let loading = elapsed < duration && !interrupted.is_some_and(|i| i.load(Ordering::Relaxed));
        if !loading && cpu_end.is_none() {
            cpu_end = Some(CpuSnapshot::take(&args.dir, topology_path, topology));
        }
        if loading {
            let count = match args.mode {
                Mode::Closed => {
                    let room = args.window.saturating_sub(in_flight.len()).min(pool.len() / 2);
                    if room >= args.batch.min(args.window) {
                        room
                    } else {
                        0
                    }
                }
                Mode::Open => {
                    let due = ((rate * elapsed.as_secs_f64()) as u64).saturating_sub(due_total);
                    due_total += due;
                    let room = args.in_flight_max.saturating_sub(in_flight.len()).min(pool.len() / 2);
                    let count = (due as usize).min(room);
                    not_sent += due - count as u64;
                    count
                }
            };
            if count > 0 {
                let now = Instant::now();
                series.at(now - started).0.submitted += count as u64;
                submitted += count as u64;
                let mut left = count;
                while left > 0 {
                    let size = left.min(args.batch);
                    let mut batch = Vec::with_capacity(size);
                    for _ in 0..size {
                        let mut take = || pool.swap_remove(rng.gen_range(0..pool.len()));
                        let spent = [take(), take()];
                        let created = [UhsId(rng.gen()), UhsId(rng.gen())];
                        batch.push((
                            next_ref,
                            CompactTransaction {
                                txid: Txid(rng.gen()),
                                spent: spent.to_vec(),
                                created: created.to_vec(),
                                ..Default::default()
                            },
                        ));
                        in_flight.insert(
                            next_ref,
                            Flight {
                                sent: now,
                                spent,
                                created,
                            },
                        );
                        next_ref += 1;
                    }
                    backend.submit_compact(batch, &reply);
                    left -= size;
                }
                peak_in_flight = peak_in_flight.max(in_flight.len());
            }
        } else if in_flight.is_empty() || elapsed > duration + DRAIN_MAX {
            break;
        }
        // Wait for completions: until the next open-loop tick, or briefly.
        let wait = match (loading, args.mode) {
            (true, Mode::Open) => OPEN_TICK.saturating_sub(started.elapsed().saturating_sub(elapsed)),
            (true, Mode::Closed) => Duration::from_millis(20).min(duration.saturating_sub(elapsed)),
            (false, _) => Duration::from_millis(100),
        };
        let first = runtime.block_on(async { tokio::time::timeout(wait, completions.recv()).await });
        let Ok(Some(first)) = first else { continue };
        let received_at = started.elapsed();
        for completion in std::iter::once(first).chain(std::iter::from_fn(|| completions.try_recv().ok())) {
            let Some(flight) = in_flight.remove(&completion.client_ref) else {
                continue;
            };
            *by_status.entry(completion.status.code().to_string()).or_default() += 1;
            let (counts, second_latency) = series.at(received_at);
            match completion.status {
                TxStatus::Confirmed => {
                    counts.confirmed += 1;
                    let micros = flight.sent.elapsed().as_micros() as u64;
                    second_latency.saturating_record(micros);
                    latency.saturating_record(micros);
                    if received_at < duration {
                        confirmed_in_load += 1;
                    }
                    pool.extend(flight.created);
                }
                // Nothing was applied: the inputs are still unspent.
                TxStatus::Busy | TxStatus::Dropped => {
                    if completion.status == TxStatus::Busy {
                        counts.busy += 1;
                    } else {
                        counts.other += 1;
                    }
                    pool.extend(flight.spent);
                }
                // May or may not be applied: set aside (resolved after the run), never reused.
                TxStatus::Unknown => {
                    counts.unknown += 1;
                    unknown.push(flight);
                }
                TxStatus::Rejected(_) | TxStatus::Invalid(_) => counts.other += 1,
            }
        }
    }
    let outstanding = in_flight.len();
    stop.store(true, Ordering::Relaxed);
    let faults = fault_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the fault injection thread panicked"))?;
    if interrupted.is_some_and(|i| i.load(Ordering::Relaxed)) {
        runtime.shutdown_timeout(Duration::from_secs(1));
        bail!("interrupted during the load");
    }
    let cpu = cpu_start.zip(cpu_end.flatten()).map(|(start, end)| end.since(&start));

    let unknown_resolution = resolve_unknown(&backend, &unknown);
    let pool_check = check_pool(&backend, &pool);
    runtime.shutdown_timeout(Duration::from_secs(1));

    // Figures.
    let load_seconds = args.seconds.floor() as usize;
    let confirmed_series = series.confirmed();
    let mean_tps = confirmed_in_load as f64 / args.seconds;
    let (peak_second, peak_tps) = confirmed_series
        .iter()
        .take(load_seconds.max(1))
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map_or((0, 0), |(s, c)| (s, *c));
    let kills: Vec<(usize, f64)> = faults
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.killed_at_s.map(|t| (i, t)))
        .collect();
    let recovery = recoveries(
        &confirmed_series,
        &kills.iter().map(|(_, t)| *t).collect::<Vec<_>>(),
        load_seconds,
    );
    let mut recovery_of: Vec<Option<Recovery>> = vec![None; faults.len()];
    for ((i, _), r) in kills.iter().zip(recovery) {
        recovery_of[*i] = Some(r);
    }
    let ms = |micros: u64| micros as f64 / 1000.0;
    let quantile_ms = |h: &Histogram<u64>, q: f64| if h.is_empty() { 0.0 } else { ms(h.value_at_quantile(q)) };
    let percentiles: Vec<(f64, f64)> = [0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0]
        .iter()
        .map(|&q| (100.0 * q, quantile_ms(&latency, q)))
        .collect();
    let curve = percentile_curve(&latency);

    // Summary.
    let confirmed_total = by_status.get("confirmed").copied().unwrap_or(0);
    println!(
        "  confirmed {confirmed_in_load} in {:.1} s: mean {mean_tps:.0} tx/s, peak {peak_tps} tx/s (second {peak_second})",
        args.seconds
    );
    println!(
        "  latency of confirmed swaps: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        quantile_ms(&latency, 0.5),
        quantile_ms(&latency, 0.9),
        quantile_ms(&latency, 0.99),
        quantile_ms(&latency, 1.0)
    );
    if let Some(cpu) = &cpu {
        println!("  CPU during the load: {}", cpu.summary(confirmed_in_load));
    }
    let statuses: Vec<String> = by_status.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "  outcomes: {}; submitted {submitted}, not sent {not_sent}, still in flight at the end {outstanding}",
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        }
    );
    match &pool_check {
        Ok(missing) => println!(
            "  check: {} of the generator's {} unspent ids are in the UHS{}",
            pool.len() - missing,
            pool.len(),
            if *missing == 0 { "" } else { " — SOME ARE MISSING" }
        ),
        Err(error) => println!("  check: cannot query the UHS: {error:#}"),
    }
    if !unknown.is_empty() {
        println!("  unknown outcomes, resolved afterwards from the UHS: {unknown_resolution}");
    }
    for (fault, recovery) in faults.iter().zip(&recovery_of) {
        match (&fault.error, fault.killed_at_s, recovery) {
            (Some(error), _, _) => println!("  fault {}@{}: {error}", fault.group, fault.planned_s),
            (None, Some(at), Some(r)) => {
                let back = match (r.dip_second, r.recovery_s) {
                    (None, _) => "no second below 50% of it".to_string(),
                    (Some(_), Some(s)) => format!(
                        "back above 50% from second {} = {s:.1} s after the kill",
                        r.recovered_second.unwrap_or(0)
                    ),
                    (Some(dip), None) => format!("below 50% from second {dip}, not recovered when the load stopped"),
                };
                let elected = match (fault.new_leader, fault.new_leader_at_s) {
                    (Some(leader), Some(t)) => format!(", replica {leader} led {:.2} s later", t - at),
                    _ => ", no other replica led before the restart".to_string(),
                };
                println!(
                    "  kill -9 {} leader (replica {}, pid {}) at {at:.2} s{elected}{}: baseline {:.0} tx/s, {back}",
                    fault.group,
                    fault.replica.unwrap_or(0),
                    fault.pid.unwrap_or(0),
                    fault
                        .restarted_at_s
                        .map_or(String::new(), |t| format!(", restarted at {t:.2} s")),
                    r.baseline_tps
                );
            }
            _ => println!("  fault {}@{}: not injected", fault.group, fault.planned_s),
        }
    }

    // Files.
    let title = format!(
        "{shape}; {load_text}, {} s; {}",
        args.seconds,
        transport_name(topology.transport)
    );
    let mut markers = vec![];
    for fault in &faults {
        if let Some(t) = fault.killed_at_s {
            markers.push(Marker {
                at_s: t,
                label: format!("kill {} leader r{}", fault.group, fault.replica.unwrap_or(0)),
                kind: MarkerKind::Fault,
            });
        }
        if let (Some(t), Some(leader)) = (fault.new_leader_at_s, fault.new_leader) {
            markers.push(Marker {
                at_s: t,
                label: format!("{} r{leader} leads", fault.group),
                kind: MarkerKind::Elected,
            });
        }
        if let Some(t) = fault.restarted_at_s {
            markers.push(Marker {
                at_s: t,
                label: format!("restart {}-{}", fault.group, fault.replica.unwrap_or(0)),
                kind: MarkerKind::Restart,
            });
        }
    }
    markers.push(Marker {
        at_s: args.seconds,
        label: "load stops".into(),
        kind: MarkerKind::End,
    });
    let throughput_file = out.join("throughput.svg");
    let latency_file = out.join("latency.svg");
    let result_file = out.join("result.json");
    std::fs::write(&throughput_file, throughput_svg(&title, &confirmed_series, &markers))?;
    std::fs::write(&latency_file, latency_svg(&title, &curve, latency.len()))?;
    let per_second: Vec<serde_json::Value> = series
        .counts
        .iter()
        .zip(&series.latency)
        .enumerate()
        .map(|(second, (c, h))| {
            serde_json::json!({
                "second": second, "submitted": c.submitted, "confirmed": c.confirmed, "busy": c.busy,
                "unknown": c.unknown, "other": c.other,
                "latency_ms_p50": quantile_ms(h, 0.5), "latency_ms_p99": quantile_ms(h, 0.99),
            })
        })
        .collect();
    let result = serde_json::json!({
        "cluster": cluster_json(&args.dir, topology),
        "config": {
            "transport": topology.transport,
            "mode": args.mode, "seconds": args.seconds, "window": args.window, "rate": args.rate,
            "in_flight_max": args.in_flight_max, "preload": args.preload, "batch": args.batch,
            "restart_after": args.restart_after,
            "kill_leader": args.kill_leader.iter().map(|f| format!("{}@{}", f.group, f.at_s)).collect::<Vec<_>>(),
            "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
        },
        "preload": { "ids": args.preload, "transactions": args.preload.div_ceil(PRELOAD_IDS_PER_TX), "seconds": preload_s },
        "totals": {
            "submitted": submitted, "not_sent": not_sent, "outstanding": outstanding,
            "peak_in_flight": peak_in_flight, "confirmed": confirmed_total,
            "confirmed_during_load": confirmed_in_load, "by_status": by_status,
        },
        "throughput": {
            "mean_tps": mean_tps, "peak_tps": peak_tps, "peak_second": peak_second,
            "per_second": per_second,
        },
        "latency_ms": {
            "count": latency.len(),
            "mean": if latency.is_empty() { 0.0 } else { latency.mean() / 1000.0 },
            "p50": quantile_ms(&latency, 0.5), "p90": quantile_ms(&latency, 0.9),
            "p99": quantile_ms(&latency, 0.99), "p999": quantile_ms(&latency, 0.999),
            "max": quantile_ms(&latency, 1.0),
            "percentiles": percentiles.iter().map(|(p, v)| serde_json::json!({"percentile": p, "ms": v})).collect::<Vec<_>>(),
            "curve": curve.iter().map(|(p, v)| serde_json::json!({"percentile": 100.0 * p, "ms": v})).collect::<Vec<_>>(),
        },
        "faults": faults.iter().zip(&recovery_of).map(|(f, r)| serde_json::json!({"fault": f, "recovery": r})).collect::<Vec<_>>(),
        "unknown_resolution": unknown_resolution.json(),
        "cpu": cpu.as_ref().map(|c| c.json(confirmed_in_load)),
        "pool_check": match &pool_check {
            Ok(missing) => serde_json::json!({"ids": pool.len(), "missing": missing}),
            Err(error) => serde_json::json!({"ids": pool.len(), "error": format!("{error:#}")}),
        },
        "files": {
            "throughput_svg": throughput_file.display().to_string(),
            "latency_svg": latency_file.display().to_string(),
        },
    });
    std::fs::write(&result_file, serde_json::to_string_pretty(&result)? + "\n")?;
    println!(
        "  wrote {}, {}, {}",
        result_file.display(),
        throughput_file.display(),
        latency_file.display()
    );
    Ok(LoadRun {
        mean_tps,
        peak_tps,
        p50_ms: quantile_ms(&latency, 0.5),
        p99_ms: quantile_ms(&latency, 0.99),
        confirmed_in_load,
        preload_s,
        pool_missing: pool_check.as_ref().ok().copied(),
        cpu,
        confirmed_series,
        result_file,
    })
}

// ---------------------------------------------------------------------------------------------
/// The cluster a result was measured on, as its JSON files record it.
fn cluster_json(dir: &Path, topology: &Topology) -> serde_json::Value {
    serde_json::json!({
        "dir": dir.display().to_string(),
        "shard_groups": topology.shard_groups.len(),
        "coordinator_groups": topology.coordinator_groups.len(),
        "replicas": topology.shard_groups.first().map_or(0, |g| g.replicas.len()),
    })
}

// --compare-transport: the same load with mutual TLS and with plaintext, in alternate rounds.

/// The issue's bound on what mutual TLS may cost: this share of plaintext throughput.
const TLS_COST_TARGET_PERCENT: f64 = 15.0;

/// Set by SIGINT or SIGTERM during `--compare-transport`: the load stops, and the cluster file is
/// set back to mutual TLS before the process exits.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn transport_name(mode: TransportMode) -> &'static str {
    match mode {
        TransportMode::MutualTls => "mutual-tls",
        TransportMode::InsecurePlaintext => "insecure-plaintext",
    }
}

/// One measured round of `--compare-transport`.
struct Round {
    number: usize,
    transport: TransportMode,
    run: LoadRun,
}

/// What the rounds did to the running cluster, so that the end can put it back.
#[derive(Default)]
struct ClusterState {
    /// A restart was attempted.
    restarted: bool,
    /// The transport the running cluster was last started with (none while a restart is under way).
    running: Option<TransportMode>,
}

/// The rounds' schedule: mutual TLS first, then alternating, `rounds` of each.
fn transport_schedule(rounds: usize) -> Vec<TransportMode> {
    (0..2 * rounds)
        .map(|i| {
            if i.is_multiple_of(2) {
                TransportMode::MutualTls
            } else {
                TransportMode::InsecurePlaintext
            }
        })
        .collect()
}

fn compare_transport(args: &ClusterBenchArgs, topology_path: &Path, out: &Path) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.rounds >= 2, "--rounds must be at least 2 (rounds per transport)");
    anyhow::ensure!(
        args.settle.is_finite() && args.settle >= 0.0,
        "--settle must not be negative"
    );
    let topology = Topology::load(topology_path)?;
    println!(
        "specie bench cluster --compare-transport: {}; {}; {} s per round, {} rounds per transport \
         (mutual-tls, insecure-plaintext, …), the cluster restarted before each",
        shape_text(&topology),
        load_text(args),
        args.seconds,
        args.rounds
    );
    println!(
        "  the cluster file is set back to transport = \"mutual-tls\" at the end; if this process is \
         killed -9, do it by hand in {} and restart the cluster",
        topology_path.display()
    );
    INTERRUPTED.store(false, Ordering::Relaxed);
    let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    let previous = unsafe {
        [
            libc::signal(libc::SIGINT, handler),
            libc::signal(libc::SIGTERM, handler),
        ]
    };
    let mut rounds: Vec<Round> = vec![];
    let mut state = ClusterState::default();
    let outcome = compare_rounds(args, topology_path, out, &mut rounds, &mut state);
    if let Err(error) = &outcome {
        eprintln!("round failed: {error:#}");
    }
    let restored = restore_mutual_tls(&args.dir, topology_path, &state);
    // SAFETY: puts back the dispositions `signal` returned above.
    unsafe {
        libc::signal(libc::SIGINT, previous[0]);
        libc::signal(libc::SIGTERM, previous[1]);
    }
    match &restored {
        Ok(true) => println!("restored: transport = \"mutual-tls\", the cluster restarted with it"),
        Ok(false) => println!("restored: transport = \"mutual-tls\" (the cluster already runs with it)"),
        Err(error) => eprintln!(
            "COULD NOT RESTORE mutual TLS: {error:#}; set transport = \"mutual-tls\" in {} and run \
             `specie cluster down --dir {dir}` and `specie cluster up --dir {dir}`",
            topology_path.display(),
            dir = args.dir.display()
        ),
    }
    if !rounds.is_empty() {
        report_comparison(args, &topology, &rounds, out, outcome.is_ok() && restored.is_ok())?;
    }
    outcome?;
    restored?;
    Ok(ExitCode::SUCCESS)
}

fn compare_rounds(
    args: &ClusterBenchArgs,
    topology_path: &Path,
    out: &Path,
    rounds: &mut Vec<Round>,
    state: &mut ClusterState,
) -> anyhow::Result<()> {
    let schedule = transport_schedule(args.rounds);
    for (i, &transport) in schedule.iter().enumerate() {
        anyhow::ensure!(!INTERRUPTED.load(Ordering::Relaxed), "interrupted");
        let number = i + 1;
        let name = transport_name(transport);
        println!(
            "\nround {number}/{}: transport = \"{name}\"; restarting the cluster",
            schedule.len()
        );
        set_transport(topology_path, transport)?;
        state.restarted = true;
        state.running = None;
        restart_cluster(&args.dir)?;
        state.running = Some(transport);
        std::thread::sleep(Duration::from_secs_f64(args.settle));
        let topology = Topology::load(topology_path)?;
        anyhow::ensure!(
            topology.transport == transport,
            "{} changed under the benchmark",
            topology_path.display()
        );
        let round_out = out.join(format!("round-{number}-{name}"));
        std::fs::create_dir_all(&round_out).with_context(|| format!("cannot create {}", round_out.display()))?;
        // A new backend per round: it loads the credentials (or none) for this transport. The
        // preload makes fresh random ids each round, as the UHS keeps what earlier rounds spent.
        let run = run_load(args, &topology, topology_path, &round_out, Some(&INTERRUPTED))
            .with_context(|| format!("round {number} ({name})"))?;
        rounds.push(Round { number, transport, run });
    }
    Ok(())
}

/// Rewrites the cluster file's `transport` (the whole file, from the parsed topology), atomically.
fn set_transport(topology_path: &Path, transport: TransportMode) -> anyhow::Result<()> {
    let mut topology = Topology::load(topology_path)?;
    if topology.transport == transport {
        return Ok(());
    }
    topology.transport = transport;
    let temporary = topology_path.with_extension("toml.bench-tmp");
    std::fs::write(&temporary, topology.to_toml()).with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, topology_path)
        .with_context(|| format!("cannot replace {}", topology_path.display()))?;
    Ok(())
}

/// `specie cluster down` then `specie cluster up` (which waits for every group's leader).
fn restart_cluster(dir: &Path) -> anyhow::Result<()> {
    #[derive(clap::Parser)]
    struct Up {
        #[command(flatten)]
        up: cluster_cmd::UpArgs,
    }
    cluster_cmd::down(dir)?;
    let up = <Up as clap::Parser>::try_parse_from([
        std::ffi::OsStr::new("up"),
        std::ffi::OsStr::new("--dir"),
        dir.as_os_str(),
    ])?;
    let code = cluster_cmd::up(up.up)?;
    anyhow::ensure!(code == ExitCode::SUCCESS, "`specie cluster up` failed");
    Ok(())
}

/// Sets the cluster file back to mutual TLS and, if a round restarted the cluster with another
/// transport (or a restart failed half-way), restarts it. Returns whether it restarted.
fn restore_mutual_tls(dir: &Path, topology_path: &Path, state: &ClusterState) -> anyhow::Result<bool> {
    set_transport(topology_path, TransportMode::MutualTls)?;
    if state.restarted && state.running != Some(TransportMode::MutualTls) {
        println!("\nrestoring transport = \"mutual-tls\": restarting the cluster");
        restart_cluster(dir)?;
        return Ok(true);
    }
    Ok(false)
}

/// The median (the mean of the middle two for an even count); none for no values.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    })
}

/// What TLS costs, in percent of plaintext throughput: 1 − tls / plaintext.
pub(crate) fn tls_cost_percent(tls_tps: f64, plaintext_tps: f64) -> Option<f64> {
    (plaintext_tps > 0.0).then(|| 100.0 * (1.0 - tls_tps / plaintext_tps))
}

/// CPU microseconds per confirmed transaction of one role ("shard", "coordinator", "sentinel",
/// "bench", or "cluster" for shards and coordinators and sentinels together).
fn cpu_us_per_tx(run: &LoadRun, role: &str) -> Option<f64> {
    let cpu = run.cpu.as_ref()?;
    let seconds = match role {
        "bench" => cpu.bench_s,
        "cluster" => cpu.by_role.values().sum(),
        role => cpu.by_role.get(role).copied().unwrap_or(0.0),
    };
    (run.confirmed_in_load > 0).then(|| seconds * 1e6 / run.confirmed_in_load as f64)
}

/// Prints the comparison and writes `transport.json` and `transport.svg` to `out`.
fn report_comparison(
    args: &ClusterBenchArgs,
    topology: &Topology,
    rounds: &[Round],
    out: &Path,
    complete: bool,
) -> anyhow::Result<()> {
    const ROLES: [&str; 4] = ["shard", "coordinator", "bench", "cluster"];
    let show = |v: Option<f64>, decimals: usize| v.map_or("-".to_string(), |v| format!("{v:.decimals$}"));
    println!(
        "\ntransport comparison: {}; {}; {} s per round{}",
        shape_text(topology),
        load_text(args),
        args.seconds,
        if complete { "" } else { " (INCOMPLETE: a round failed)" }
    );
    println!(
        "  {:>5}  {:<18}  {:>9}  {:>8}  {:>8}  {:>27}  {:>6}  {:>7}  {:>9}",
        "round",
        "transport",
        "mean tx/s",
        "p50 ms",
        "p99 ms",
        "CPU µs/tx shard/coord/bench",
        "busy",
        "other s",
        "TCP opens"
    );
    for round in rounds {
        let run = &round.run;
        let per_tx = ROLES[..3]
            .iter()
            .map(|role| show(cpu_us_per_tx(run, role), 1))
            .collect::<Vec<_>>()
            .join(" / ");
        println!(
            "  {:>5}  {:<18}  {:>9.0}  {:>8.1}  {:>8.1}  {:>27}  {:>5}%  {:>7}  {:>9}",
            round.number,
            transport_name(round.transport),
            run.mean_tps,
            run.p50_ms,
            run.p99_ms,
            per_tx,
            show(run.cpu.as_ref().map(|c| c.machine_busy_percent), 0),
            show(run.cpu.as_ref().map(|c| c.other_s), 1),
            run.cpu
                .as_ref()
                .and_then(|c| c.tcp_connections_opened)
                .map_or("-".to_string(), |n| n.to_string()),
        );
    }
    let mut medians = serde_json::Map::new();
    let mut median_tps = BTreeMap::new();
    for transport in [TransportMode::MutualTls, TransportMode::InsecurePlaintext] {
        let runs: Vec<&LoadRun> = rounds
            .iter()
            .filter(|r| r.transport == transport)
            .map(|r| &r.run)
            .collect();
        let of = |f: &dyn Fn(&LoadRun) -> Option<f64>| median(&runs.iter().filter_map(|r| f(r)).collect::<Vec<_>>());
        let tps = of(&|r| Some(r.mean_tps));
        let (p50, p99) = (of(&|r| Some(r.p50_ms)), of(&|r| Some(r.p99_ms)));
        let per_tx: BTreeMap<&str, Option<f64>> = ROLES
            .iter()
            .map(|role| (*role, of(&|r| cpu_us_per_tx(r, role))))
            .collect();
        println!(
            "  median {:<18} {:>9}  {:>8}  {:>8}  cluster CPU {} µs/tx ({} rounds)",
            transport_name(transport),
            show(tps, 0),
            show(p50, 1),
            show(p99, 1),
            show(per_tx["cluster"], 1),
            runs.len()
        );
        median_tps.insert(transport_name(transport), tps);
        medians.insert(
            transport_name(transport).to_string(),
            serde_json::json!({
                "rounds": runs.len(), "mean_tps": tps, "latency_ms_p50": p50, "latency_ms_p99": p99,
                "cpu_us_per_tx": per_tx,
            }),
        );
    }
    let (tls, plaintext) = (median_tps["mutual-tls"], median_tps["insecure-plaintext"]);
    let cost = tls.zip(plaintext).and_then(|(t, p)| tls_cost_percent(t, p));
    match cost {
        Some(cost) => println!(
            "TLS cost: {cost:.1}% (target < {TLS_COST_TARGET_PERCENT:.0}%){}",
            if cost < TLS_COST_TARGET_PERCENT {
                ""
            } else {
                " — ABOVE THE TARGET"
            }
        ),
        None => println!("TLS cost: not measured (no round of each transport completed)"),
    }

    let load_seconds = args.seconds.ceil() as usize;
    let series: Vec<RoundSeries> = rounds
        .iter()
        .map(|r| RoundSeries {
            label: format!(
                "round {} {}: {:.0} tx/s",
                r.number,
                transport_name(r.transport),
                r.run.mean_tps
            ),
            tls: r.transport == TransportMode::MutualTls,
            confirmed: r.run.confirmed_series.iter().copied().take(load_seconds).collect(),
        })
        .collect();
    let median_lines: Vec<(String, bool, f64)> = [("mutual-tls", true, tls), ("insecure-plaintext", false, plaintext)]
        .into_iter()
        .filter_map(|(name, is_tls, tps)| Some((format!("median {name}: {:.0} tx/s", tps?), is_tls, tps?)))
        .collect();
    let subtitle = format!(
        "{}; {}, {} s per round; TLS cost {}",
        shape_text(topology),
        load_text(args),
        args.seconds,
        cost.map_or("not measured".to_string(), |c| format!("{c:.1}%"))
    );
    let chart_file = out.join("transport.svg");
    let result_file = out.join("transport.json");
    std::fs::write(&chart_file, transport_svg(&subtitle, &series, &median_lines))?;
    let result = serde_json::json!({
        "cluster": cluster_json(&args.dir, topology),
        "config": {
            "mode": args.mode, "seconds": args.seconds, "window": args.window, "rate": args.rate,
            "in_flight_max": args.in_flight_max, "preload": args.preload, "batch": args.batch,
            "rounds_per_transport": args.rounds, "settle": args.settle,
            "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
        },
        "complete": complete,
        "rounds": rounds.iter().map(|r| serde_json::json!({
            "round": r.number,
            "transport": r.transport,
            "mean_tps": r.run.mean_tps,
            "peak_tps": r.run.peak_tps,
            "confirmed_during_load": r.run.confirmed_in_load,
            "latency_ms_p50": r.run.p50_ms,
            "latency_ms_p99": r.run.p99_ms,
            "preload_seconds": r.run.preload_s,
            "pool_missing": r.run.pool_missing,
            "cpu": r.run.cpu.as_ref().map(|c| c.json(r.run.confirmed_in_load)),
            "confirmed_per_second": r.run.confirmed_series,
            "result": r.run.result_file.display().to_string(),
        })).collect::<Vec<_>>(),
        "median": medians,
        "tls_cost_percent": cost,
        "target_percent": TLS_COST_TARGET_PERCENT,
        "within_target": cost.map(|c| c < TLS_COST_TARGET_PERCENT),
        "files": { "transport_svg": chart_file.display().to_string() },
    });
    std::fs::write(&result_file, serde_json::to_string_pretty(&result)? + "\n")?;
    println!("  wrote {}, {}", result_file.display(), chart_file.display());
    let missing: usize = rounds.iter().filter_map(|r| r.run.pool_missing).sum();
    anyhow::ensure!(
        missing == 0,
        "{missing} of the generator's unspent ids are missing from the UHS (see the rounds' result.json)"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// CPU time from /proc: where the time of a run goes.

/// CPU ticks (user + system) of the cluster's processes, of this process and of the machine.
struct CpuSnapshot {
    at: Instant,
    /// pid → (role, ticks).
    processes: HashMap<u32, (String, u64)>,
    own: u64,
    machine_busy: u64,
    machine_total: u64,
    tcp_active_opens: Option<u64>,
}

/// CPU seconds used between two snapshots.
#[derive(Clone, Debug, serde::Serialize)]
struct CpuUsage {
    wall_s: f64,
    cores: usize,
    /// By role of the cluster's processes ("shard", "coordinator", "sentinel"), those alive at
    /// both snapshots.
    by_role: BTreeMap<String, f64>,
    /// This process: the load generator and the cluster client acting as a sentinel.
    bench_s: f64,
    machine_busy_s: f64,
    machine_busy_percent: f64,
    /// Everything else on the machine (other users, compilers, the kernel's own threads).
    other_s: f64,
    /// TCP connections opened on the machine (`ActiveOpens` in /proc/net/snmp, every process):
    /// about zero when the cluster keeps its connections, whatever the load.
    tcp_connections_opened: Option<u64>,
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// utime + stime from the text of `/proc/PID/stat` (fields 14 and 15; the name in parentheses
/// may hold spaces).
pub(crate) fn parse_process_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// `ActiveOpens` (TCP connections this host opened) from the text of `/proc/net/snmp`, whose
/// `Tcp:` lines are a header and then the values.
pub(crate) fn parse_tcp_active_opens(snmp: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (header, values) = (lines.next()?, lines.next()?);
    let column = header.split_whitespace().position(|name| name == "ActiveOpens")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// (busy, total) ticks of all cores from the text of `/proc/stat` (idle and iowait are not busy).
pub(crate) fn parse_machine_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = values.iter().sum();
    let idle = values.get(3)? + values.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

impl CpuSnapshot {
    fn take(dir: &Path, topology_path: &Path, topology: &Topology) -> Option<CpuSnapshot> {
        let (machine_busy, machine_total) = parse_machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let own = parse_process_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        let mut processes = HashMap::new();
        for member in cluster_cmd::members(topology_path, topology) {
            let Some(pid) = cluster_cmd::read_pid(dir, &member.name) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(ticks) = parse_process_ticks(&stat) {
                processes.insert(pid, (member.args.first().cloned().unwrap_or_default(), ticks));
            }
        }
        let tcp_active_opens = std::fs::read_to_string("/proc/net/snmp")
            .ok()
            .and_then(|snmp| parse_tcp_active_opens(&snmp));
        Some(CpuSnapshot {
            at: Instant::now(),
            processes,
            own,
            machine_busy,
            machine_total,
            tcp_active_opens,
        })
    }

    fn since(&self, start: &CpuSnapshot) -> CpuUsage {
        let tick = clock_ticks_per_second();
        let mut by_role: BTreeMap<String, f64> = BTreeMap::new();
        for (pid, (role, ticks)) in &self.processes {
            if let Some((_, before)) = start.processes.get(pid) {
                *by_role.entry(role.clone()).or_default() += ticks.saturating_sub(*before) as f64 / tick;
            }
        }
        let bench_s = self.own.saturating_sub(start.own) as f64 / tick;
        let machine_busy_s = self.machine_busy.saturating_sub(start.machine_busy) as f64 / tick;
        let machine_total = self.machine_total.saturating_sub(start.machine_total) as f64;
        let ours: f64 = by_role.values().sum::<f64>() + bench_s;
        CpuUsage {
            wall_s: self.at.duration_since(start.at).as_secs_f64(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            by_role,
            bench_s,
            machine_busy_s,
            machine_busy_percent: if machine_total > 0.0 {
                100.0 * machine_busy_s * tick / machine_total
            } else {
                0.0
            },
            other_s: (machine_busy_s - ours).max(0.0),
            tcp_connections_opened: self
                .tcp_active_opens
                .zip(start.tcp_active_opens)
                .map(|(end, start)| end.saturating_sub(start)),
        }
    }
}

impl CpuUsage {
    fn role(&self, role: &str) -> f64 {
        self.by_role.get(role).copied().unwrap_or(0.0)
    }

    fn summary(&self, confirmed: u64) -> String {
        let cluster: f64 = self.by_role.values().sum();
        format!(
            "shards {:.1} s, coordinators {:.1} s, sentinels {:.1} s, bench {:.1} s, other processes {:.1} s \
             (machine {:.0}% busy over {:.1} s × {} cores); cluster {} µs CPU per confirmed tx; {} TCP \
             connections opened on the machine",
            self.role("shard"),
            self.role("coordinator"),
            self.role("sentinel"),
            self.bench_s,
            self.other_s,
            self.machine_busy_percent,
            self.wall_s,
            self.cores,
            if confirmed == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", cluster * 1e6 / confirmed as f64)
            },
            self.tcp_connections_opened.map_or("?".to_string(), |n| n.to_string())
        )
    }

    fn json(&self, confirmed: u64) -> serde_json::Value {
        let per_tx = |seconds: f64| (confirmed > 0).then(|| seconds * 1e6 / confirmed as f64);
        let mut value = serde_json::to_value(self).unwrap_or_default();
        value["us_per_confirmed_tx"] = serde_json::json!({
            "shard": per_tx(self.role("shard")),
            "coordinator": per_tx(self.role("coordinator")),
            "sentinel": per_tx(self.role("sentinel")),
            "bench": per_tx(self.bench_s),
            "cluster": per_tx(self.by_role.values().sum()),
        });
        value
    }
}

/// Creates `--preload` ids (100 per transaction), resubmitting what the cluster was too busy
/// for, and returns them as the generator's pool. A transaction answered `unknown` (a leader
/// changed under it) is resubmitted as it is: the shards never create an id twice, so at most one
/// attempt applies, and "output already exists" then means an earlier attempt did.
fn preload(
    runtime: &tokio::runtime::Runtime,
    backend: &ClusterBackend,
    reply: &specie_api::CompletionSender,
    completions: &mut tokio::sync::mpsc::UnboundedReceiver<Completion>,
    rng: &mut StdRng,
    args: &ClusterBenchArgs,
) -> anyhow::Result<Vec<UhsId>> {
    let pool: Vec<UhsId> = (0..args.preload).map(|_| UhsId(rng.gen())).collect();
    let mut pending: HashMap<u64, CompactTransaction> =
        crate::bench::preload_transactions(&pool, PRELOAD_IDS_PER_TX, rng)
            .into_iter()
            .collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut to_send: Vec<u64> = pending.keys().copied().collect();
    let mut maybe_applied: HashSet<u64> = HashSet::new();
    while !pending.is_empty() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the preload did not finish in 300 s; is the cluster up? (`specie cluster status --dir {}`)",
            args.dir.display()
        );
        let batch: Vec<(u64, CompactTransaction)> = to_send.drain(..).map(|r| (r, pending[&r].clone())).collect();
        for chunk in batch.chunks(100) {
            backend.submit_compact(chunk.to_vec(), reply);
        }
        let mut outstanding = batch.len();
        while outstanding > 0 {
            let completion = runtime
                .block_on(async { tokio::time::timeout(Duration::from_secs(60), completions.recv()).await })
                .context("no answer from the cluster for 60 s during the preload")?
                .context("the completion channel closed")?;
            outstanding -= 1;
            let reference = completion.client_ref;
            match completion.status {
                TxStatus::Confirmed => {
                    pending.remove(&reference);
                }
                TxStatus::Rejected(Vote::OutputExists) if maybe_applied.contains(&reference) => {
                    pending.remove(&reference);
                }
                TxStatus::Busy | TxStatus::Dropped => to_send.push(reference),
                TxStatus::Rejected(Vote::OutputLocked) if maybe_applied.contains(&reference) => to_send.push(reference),
                TxStatus::Unknown => {
                    maybe_applied.insert(reference);
                    to_send.push(reference);
                }
                other => bail!("a preload transaction failed: {other:?} (is the cluster healthy?)"),
            }
        }
        if !to_send.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(pool)
}

/// The fate of swaps answered `Unknown`, read from the UHS once the run is over.
#[derive(Debug, Default)]
struct UnknownResolution {
    applied: u64,
    not_applied: u64,
    undetermined: u64,
    error: Option<String>,
}

impl UnknownResolution {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({"applied": self.applied, "not_applied": self.not_applied, "undetermined": self.undetermined, "error": self.error})
    }
}

impl std::fmt::Display for UnknownResolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} applied, {} not applied, {} undetermined",
            self.applied, self.not_applied, self.undetermined
        )?;
        if let Some(error) = &self.error {
            write!(f, " (query failed: {error})")?;
        }
        Ok(())
    }
}

/// A swap's created ids are in the UHS exactly when it was applied (the generator never spends
/// them: an unknown swap leaves the pool); otherwise its inputs are still there.
fn resolve_unknown(backend: &ClusterBackend, unknown: &[Flight]) -> UnknownResolution {
    let mut resolution = UnknownResolution::default();
    if unknown.is_empty() {
        return resolution;
    }
    // Let a new coordinator leader finish the dtxns it resumed.
    std::thread::sleep(Duration::from_secs(2));
    for chunk in unknown.chunks(5000) {
        let ids: Vec<UhsId> = chunk
            .iter()
            .flat_map(|f| f.created.iter().chain(&f.spent).copied())
            .collect();
        match backend.query_uhs(&ids) {
            Ok(present) => {
                for answer in present.chunks(4) {
                    match answer {
                        [true, true, _, _] => resolution.applied += 1,
                        [false, false, true, true] => resolution.not_applied += 1,
                        _ => resolution.undetermined += 1,
                    }
                }
            }
            Err(error) => {
                resolution.undetermined += chunk.len() as u64;
                resolution.error = Some(format!("{error:#}"));
            }
        }
    }
    resolution
}

/// How many of the ids the generator holds as unspent (preloaded or created by confirmed swaps,
/// or inputs of swaps answered busy or dropped) are missing from the UHS: none, if every outcome
/// was reported truthfully.
fn check_pool(backend: &ClusterBackend, pool: &[UhsId]) -> anyhow::Result<usize> {
    let mut missing = 0;
    for chunk in pool.chunks(20_000) {
        missing += backend.query_uhs(chunk)?.iter().filter(|present| !**present).count();
    }
    Ok(missing)
}

fn group_replicas<'a>(topology: &'a Topology, group: &str) -> Option<&'a [specie_cluster::Replica]> {
    topology
        .shard_groups
        .iter()
        .map(|g| (&g.name, &g.replicas))
        .chain(topology.coordinator_groups.iter().map(|g| (&g.name, &g.replicas)))
        .find(|(name, _)| *name == group)
        .map(|(_, replicas)| replicas.as_slice())
}

/// The replica of `group` that says it leads (the highest term if several do).
fn find_leader(runtime: &tokio::runtime::Runtime, topology: &Topology, group: &str) -> anyhow::Result<Option<u64>> {
    let statuses = runtime.block_on(operator::replica_statuses(
        topology,
        Some(group),
        Duration::from_millis(1000),
    ))?;
    let leader = statuses
        .iter()
        .filter(|s| s.is_leader())
        .filter_map(|s| Some((s.status.as_ref().ok()?["term"].as_u64().unwrap_or(0), s.id)))
        .max();
    Ok(leader.map(|(_, id)| id))
}

enum Action {
    Kill(usize),
    Restart(usize),
}

/// Runs the fault schedule relative to `started`: kills each leader at its time and restarts it
/// `restart_after` later (with `cluster up`'s own mechanism). Once `stop` is set, kills not yet
/// done are skipped and pending restarts happen at once, so the cluster ends at full size.
fn inject_faults(
    dir: &Path,
    topology_path: &Path,
    topology: &Topology,
    faults: Vec<FaultSpec>,
    restart_after: Duration,
    started: Instant,
    stop: &AtomicBool,
) -> Vec<FaultRecord> {
    let mut records: Vec<FaultRecord> = faults
        .iter()
        .map(|f| FaultRecord {
            group: f.group.clone(),
            planned_s: f.at_s,
            ..Default::default()
        })
        .collect();
    if faults.is_empty() {
        return records;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            for record in &mut records {
                record.error = Some(format!("cannot start a runtime: {error}"));
            }
            return records;
        }
    };
    let mut actions: Vec<(Duration, Action)> = faults
        .iter()
        .enumerate()
        .map(|(i, f)| (Duration::from_secs_f64(f.at_s), Action::Kill(i)))
        .collect();
    loop {
        actions.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let Some((at, action)) = actions.pop() else { break };
        while started.elapsed() < at && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10).min(at.saturating_sub(started.elapsed())));
        }
        let stopping = stop.load(Ordering::Relaxed);
        match action {
            Action::Kill(i) if stopping => records[i].error = Some("the load stopped before this fault".into()),
            Action::Kill(i) => {
                let group = records[i].group.clone();
                let killed = (|| -> anyhow::Result<(u64, u32)> {
                    let searching = Instant::now();
                    let replica = loop {
                        if let Some(replica) = find_leader(&runtime, topology, &group)? {
                            break replica;
                        }
                        anyhow::ensure!(searching.elapsed() < Duration::from_secs(10), "no leader for 10 s");
                        std::thread::sleep(Duration::from_millis(100));
                    };
                    let name = format!("{group}-{replica}");
                    let pid = cluster_cmd::read_pid(dir, &name)
                        .filter(|p| cluster_cmd::is_alive(*p))
                        .with_context(|| format!("no live process for {name} in {}/pids", dir.display()))?;
                    let status = Process::new("kill").args(["-KILL", &pid.to_string()]).status()?;
                    anyhow::ensure!(status.success(), "kill -KILL {pid} failed");
                    Ok((replica, pid))
                })();
                match killed {
                    Ok((replica, pid)) => {
                        let killed_at = started.elapsed();
                        records[i].replica = Some(replica);
                        records[i].pid = Some(pid);
                        records[i].killed_at_s = Some(killed_at.as_secs_f64());
                        actions.push((killed_at + restart_after, Action::Restart(i)));
                        // Time the election, until the restart is due.
                        while started.elapsed() < killed_at + restart_after {
                            if let Ok(Some(leader)) = find_leader(&runtime, topology, &group) {
                                if leader != replica {
                                    records[i].new_leader = Some(leader);
                                    records[i].new_leader_at_s = Some(started.elapsed().as_secs_f64());
                                    break;
                                }
                            }
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    Err(error) => records[i].error = Some(format!("{error:#}")),
                }
            }
            Action::Restart(i) => {
                let name = format!("{}-{}", records[i].group, records[i].replica.unwrap_or(0));
                let member = cluster_cmd::members(topology_path, topology)
                    .into_iter()
                    .find(|m| m.name == name);
                let restarted = match member {
                    Some(member) => cluster_cmd::spawn_member(dir, &member),
                    None => Err(anyhow::anyhow!("{name} is not a member of the cluster")),
                };
                match restarted {
                    Ok(pid) => {
                        records[i].new_pid = Some(pid);
                        records[i].restarted_at_s = Some(started.elapsed().as_secs_f64());
                    }
                    Err(error) => records[i].error = Some(format!("restart failed: {error:#}")),
                }
            }
        }
    }
    records
}

/// Latency by percentile for the chart: `(quantile, ms)` from 0 up to 99.99% (or as far as the
/// sample count supports), evenly spaced on a log scale of 1 / (1 - q), then the maximum.
fn percentile_curve(latency: &Histogram<u64>) -> Vec<(f64, f64)> {
    if latency.is_empty() {
        return vec![];
    }
    let decades = (latency.len() as f64).log10().clamp(1.0, 4.0);
    let steps = 200;
    let mut curve: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let q = 1.0 - 10f64.powf(-decades * i as f64 / steps as f64);
            (q, latency.value_at_quantile(q) as f64 / 1000.0)
        })
        .collect();
    // The named percentiles exactly, for the chart's labels.
    for q in [0.5, 0.9, 0.99, 0.999] {
        curve.push((q, latency.value_at_quantile(q) as f64 / 1000.0));
    }
    curve.sort_by(|a, b| a.0.total_cmp(&b.0));
    curve.push((1.0, latency.max() as f64 / 1000.0));
    curve
}

// ---------------------------------------------------------------------------------------------
// SVG charts, written by hand (no plotting dependency).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerKind {
    Fault,
    Elected,
    Restart,
    End,
}

/// A vertical line on the throughput chart.
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    pub at_s: f64,
    pub label: String,
    pub kind: MarkerKind,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 70.0;
const BOTTOM: f64 = 60.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step (1, 2 or 5 × 10^k) giving about `target` intervals up to `max`.
fn nice_step(max: f64, target: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    step.max(1e-9)
}

fn number(value: f64) -> String {
    if value == value.round() && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn svg_open(svg: &mut String, title: &str, subtitle: &str) {
    let _ = write!(
        svg,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>
<text x="{0}" y="26" text-anchor="middle" font-size="16" font-weight="bold">{1}</text>
<text x="{0}" y="46" text-anchor="middle" font-size="12" fill="#444">{2}</text>
"##,
        WIDTH / 2.0,
        escape(title),
        escape(subtitle)
    );
}

fn axis_labels(svg: &mut String, x_label: &str, y_label: &str) {
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/>
<text x="{}" y="{}" text-anchor="middle" font-size="13">{}</text>
<text x="20" y="{}" text-anchor="middle" font-size="13" transform="rotate(-90 20 {})">{}</text>"##,
        WIDTH - LEFT - RIGHT,
        HEIGHT - TOP - BOTTOM,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        HEIGHT - 15.0,
        escape(x_label),
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        TOP + (HEIGHT - TOP - BOTTOM) / 2.0,
        escape(y_label)
    );
}

/// Horizontal grid lines and y labels up to `y_max`, and x ticks (seconds) up to `x_max`.
fn time_grid(svg: &mut String, x_max: f64, y_max: f64, y_step: f64) {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;
    // Grid and ticks.
    let mut tick = 0.0;
    while tick <= y_max + y_step / 2.0 {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#e3e3e3"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            y(tick),
            LEFT + plot_w,
            LEFT - 6.0,
            y(tick) + 4.0,
            number(tick)
        );
        tick += y_step;
    }
    let x_step = nice_step(x_max, 12).max(1.0);
    let mut tick = 0.0;
    while tick <= x_max + 1e-9 {
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="#333"/><text x="{0:.1}" y="{3:.1}" text-anchor="middle">{4}</text>"##,
            x(tick),
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 19.0,
            number(tick)
        );
        tick += x_step;
    }
}

/// An SVG path of one horizontal step per second.
fn step_path(confirmed: &[u64], x: impl Fn(f64) -> f64, y: impl Fn(f64) -> f64) -> String {
    let mut path = String::new();
    for (second, count) in confirmed.iter().enumerate() {
        let (x0, x1, level) = (x(second as f64), x(second as f64 + 1.0), y(*count as f64));
        let _ = write!(
            path,
            "{}{x0:.1},{level:.1} L{x1:.1},{level:.1} ",
            if second == 0 { "M" } else { "L" }
        );
    }
    path.trim_end().to_string()
}

/// Confirmed transactions per second as a step line over time, with a vertical line at each
/// marker (kills red and dashed, new leaders purple, restarts green, the end of the load grey).
pub(crate) fn throughput_svg(subtitle: &str, confirmed: &[u64], markers: &[Marker]) -> String {
    let x_max = markers
        .iter()
        .map(|m| m.at_s)
        .fold(confirmed.len() as f64, f64::max)
        .max(1.0)
        .ceil();
    let peak = confirmed.iter().copied().max().unwrap_or(0) as f64;
    // Headroom above the peak for the marker labels.
    let y_step = nice_step(peak * 1.25, 6);
    let y_max = ((peak * 1.25) / y_step).ceil().max(1.0) * y_step;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;

    let mut svg = String::new();
    svg_open(&mut svg, "specie cluster: confirmed transactions per second", subtitle);
    time_grid(&mut svg, x_max, y_max, y_step);
    axis_labels(
        &mut svg,
        "time since the load started (s)",
        "confirmed transactions per second",
    );
    // The series: one horizontal step per second.
    let path = step_path(confirmed, x, y);
    if !path.is_empty() {
        let _ = writeln!(
            svg,
            r##"<path d="{path}" fill="none" stroke="#1f5fbf" stroke-width="2"/>"##
        );
    }
    // Markers, labels staggered so that close ones do not overlap.
    let mut markers = markers.to_vec();
    markers.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    for (i, marker) in markers.iter().enumerate() {
        let (colour, dash, class) = match marker.kind {
            MarkerKind::Fault => ("#d62728", "6,4", "fault"),
            MarkerKind::Elected => ("#9467bd", "1,3", "elected"),
            MarkerKind::Restart => ("#2ca02c", "2,3", "restart"),
            MarkerKind::End => ("#888888", "4,4", "end"),
        };
        let mx = x(marker.at_s);
        let label_y = TOP + 14.0 + 14.0 * (i % 4) as f64;
        let anchor = if mx > LEFT + plot_w * 0.8 { "end" } else { "start" };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        let _ = writeln!(
            svg,
            r##"<g class="{class}"><line x1="{mx:.1}" y1="{TOP}" x2="{mx:.1}" y2="{:.1}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}"/><text x="{:.1}" y="{label_y:.1}" fill="{colour}" text-anchor="{anchor}" paint-order="stroke" stroke="white" stroke-width="3">{} @ {:.1} s</text></g>"##,
            TOP + plot_h,
            mx + dx,
            escape(&marker.label),
            marker.at_s
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// One round's confirmed transactions per second, for [`transport_svg`].
pub(crate) struct RoundSeries {
    pub label: String,
    pub tls: bool,
    pub confirmed: Vec<u64>,
}

/// `--compare-transport`: confirmed transactions per second of every round as step lines
/// (mutual TLS blue and solid, plaintext orange and dashed), and each transport's median of the
/// rounds' mean throughput as a dotted horizontal line (`medians`: label, TLS or not, tx/s).
pub(crate) fn transport_svg(subtitle: &str, rounds: &[RoundSeries], medians: &[(String, bool, f64)]) -> String {
    const TLS_COLOURS: [&str; 4] = ["#1f5fbf", "#6b9be0", "#0b3d91", "#9ec0ee"];
    const PLAINTEXT_COLOURS: [&str; 4] = ["#e6550d", "#f59a55", "#a63603", "#f7bf8f"];
    let x_max = rounds.iter().map(|r| r.confirmed.len()).max().unwrap_or(0).max(1) as f64;
    let peak = rounds
        .iter()
        .flat_map(|r| r.confirmed.iter().copied())
        .max()
        .unwrap_or(0) as f64;
    // Headroom above the peak for the legend.
    let legend_rows = rounds
        .iter()
        .filter(|r| r.tls)
        .count()
        .max(rounds.iter().filter(|r| !r.tls).count())
        + 1;
    let headroom = 1.15 + 0.06 * legend_rows as f64;
    let y_step = nice_step(peak * headroom, 6);
    let y_max = ((peak * headroom) / y_step).ceil().max(1.0) * y_step;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;

    let mut svg = String::new();
    svg_open(
        &mut svg,
        "specie cluster: mutual TLS against plaintext, confirmed transactions per second",
        subtitle,
    );
    time_grid(&mut svg, x_max, y_max, y_step);
    axis_labels(
        &mut svg,
        "time since the round's load started (s)",
        "confirmed transactions per second",
    );
    // Legend: TLS in the left column, plaintext in the right one, each ending with its median.
    let mut rows = [0usize; 2];
    let mut legend = |svg: &mut String, tls: bool, label: &str, colour: &str, dash: &str| {
        let column = usize::from(!tls);
        let (lx, ly) = (
            LEFT + 12.0 + column as f64 * plot_w / 2.0,
            TOP + 16.0 + 15.0 * rows[column] as f64,
        );
        rows[column] += 1;
        let _ = writeln!(
            svg,
            r##"<line x1="{lx:.1}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/><text x="{2:.1}" y="{3:.1}" paint-order="stroke" stroke="white" stroke-width="3">{4}</text>"##,
            ly - 4.0,
            lx + 28.0,
            lx + 34.0,
            ly,
            escape(label)
        );
    };
    let mut used = [0usize; 2];
    for round in rounds {
        let column = usize::from(!round.tls);
        let (colour, dash) = if round.tls {
            (TLS_COLOURS[used[0] % TLS_COLOURS.len()], "none")
        } else {
            (PLAINTEXT_COLOURS[used[1] % PLAINTEXT_COLOURS.len()], "7,4")
        };
        used[column] += 1;
        let path = step_path(&round.confirmed, x, y);
        if !path.is_empty() {
            let _ = writeln!(
                svg,
                r##"<path class="{}" d="{path}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"##,
                if round.tls { "tls" } else { "plaintext" }
            );
        }
        legend(&mut svg, round.tls, &round.label, colour, dash);
    }
    for (label, tls, tps) in medians {
        let colour = if *tls { TLS_COLOURS[2] } else { PLAINTEXT_COLOURS[2] };
        let _ = writeln!(
            svg,
            r##"<line class="median" x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{colour}" stroke-width="1.5" stroke-dasharray="1,3"/>"##,
            y(*tps),
            LEFT + plot_w
        );
        legend(&mut svg, *tls, label, colour, "1,3");
    }
    svg.push_str("</svg>\n");
    svg
}

/// Latency by percentile (`curve`: ascending `(quantile, ms)`), both axes on log scales: the
/// x axis as 1 / (1 - q), so 90%, 99%, 99.9% and 99.99% are equally spaced.
pub(crate) fn latency_svg(subtitle: &str, curve: &[(f64, f64)], count: u64) -> String {
    let mut svg = String::new();
    svg_open(&mut svg, "specie cluster: latency of confirmed swaps", subtitle);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    if curve.is_empty() {
        axis_labels(&mut svg, "percentile", "latency (ms)");
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle">no confirmed transactions</text>"##,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        svg.push_str("</svg>\n");
        return svg;
    }
    let decades = (count.max(10) as f64).log10().clamp(1.0, 4.0).ceil();
    let nines = |q: f64| (1.0 / (1.0 - q).max(10f64.powf(-decades))).log10();
    let lo = curve.iter().map(|p| p.1).fold(f64::MAX, f64::min).max(0.001);
    let hi = curve.iter().map(|p| p.1).fold(0.0, f64::max).max(lo * 1.01);
    let (y_lo, y_hi) = (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
    let x = |q: f64| LEFT + nines(q) / decades * plot_w;
    let y = |ms: f64| TOP + plot_h - (ms.max(0.001).log10() - y_lo) / (y_hi - y_lo) * plot_h;
    for decade in 0..=decades as i32 {
        let q = 1.0 - 10f64.powi(-decade);
        let label = if decade == 0 {
            "0%".to_string()
        } else {
            format!("{}%", number((100.0 * q * 100.0).round() / 100.0))
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#e3e3e3"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
            x(q),
            TOP + plot_h,
            TOP + plot_h + 19.0,
            label
        );
    }
    for exponent in y_lo as i32..=y_hi as i32 {
        for mantissa in [1.0, 2.0, 5.0] {
            let ms = mantissa * 10f64.powi(exponent);
            if ms < 10f64.powf(y_lo) * 0.999 || ms > 10f64.powf(y_hi) * 1.001 {
                continue;
            }
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{2}"/><text x="{3:.1}" y="{4:.1}" text-anchor="end">{5}</text>"##,
                y(ms),
                LEFT + plot_w,
                if mantissa == 1.0 { "#cfcfcf" } else { "#eeeeee" },
                LEFT - 6.0,
                y(ms) + 4.0,
                number(ms)
            );
        }
    }
    axis_labels(
        &mut svg,
        "percentile (log scale of 1/(1-p))",
        "latency, submission to completion (ms, log scale)",
    );
    let points: Vec<String> = curve
        .iter()
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, ms)| format!("{:.1},{:.1}", x(*q), y(*ms)))
        .collect();
    let _ = writeln!(
        svg,
        r##"<polyline points="{}" fill="none" stroke="#1f5fbf" stroke-width="2"/>"##,
        points.join(" ")
    );
    // Named percentiles, and the maximum at the right edge.
    let at = |q: f64| {
        curve
            .iter()
            .find(|(p, _)| *p >= q - 1e-12)
            .map_or(curve[curve.len() - 1].1, |p| p.1)
    };
    let mut named: Vec<(String, f64, f64)> = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")]
        .into_iter()
        .filter(|(q, _)| nines(*q) <= decades)
        .map(|(q, name)| (name.to_string(), q, at(q)))
        .collect();
    named.push(("max".into(), 1.0, curve[curve.len() - 1].1));
    // Labels alternate above and below the curve, so that equal neighbours do not collide.
    for (i, (name, q, ms)) in named.into_iter().enumerate() {
        let (px, py) = (x(q.min(1.0 - 10f64.powf(-decades))), y(ms));
        let anchor = if px > LEFT + plot_w * 0.85 { "end" } else { "start" };
        let dx = if anchor == "end" { -6.0 } else { 6.0 };
        let _ = writeln!(
            svg,
            r##"<circle cx="{px:.1}" cy="{py:.1}" r="3.5" fill="#d62728"/><text x="{:.1}" y="{:.1}" text-anchor="{anchor}" paint-order="stroke" stroke="white" stroke-width="3">{name} {} ms</text>"##,
            px + dx,
            if i % 2 == 0 { py - 7.0 } else { py + 17.0 },
            number((ms * 10.0).round() / 10.0)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small well-formedness check: tags nest and close, attributes are quoted, text holds no
    /// raw `<` and every `&` starts an entity.
    fn well_formed(xml: &str) -> Result<(), String> {
        let mut stack: Vec<String> = vec![];
        let mut rest = xml;
        let mut roots = 0;
        while let Some(open) = rest.find('<') {
            let text = &rest[..open];
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                if !["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| entity.starts_with(e))
                {
                    return Err(format!("bare & in {text:?}"));
                }
            }
            let close = rest[open..].find('>').ok_or("unclosed tag")? + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            if tag.starts_with('?') {
                continue;
            }
            if tag.contains('<') || tag.matches('"').count() % 2 == 1 {
                return Err(format!("malformed tag <{tag}>"));
            }
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let name = tag.split_whitespace().next().ok_or("empty tag")?.trim_end_matches('/');
                if stack.is_empty() {
                    roots += 1;
                }
                if !tag.ends_with('/') {
                    stack.push(name.to_string());
                }
            }
        }
        if !stack.is_empty() || roots != 1 || !rest.trim().is_empty() {
            return Err(format!("unbalanced: {stack:?}, {roots} roots"));
        }
        Ok(())
    }

    #[test]
    fn events_are_binned_by_whole_seconds() {
        let mut series = PerSecond::new();
        for ms in [0, 200, 999, 1000, 3500] {
            series.at(Duration::from_millis(ms)).0.confirmed += 1;
        }
        series.at(Duration::from_millis(3999)).0.busy += 1;
        series.at(Duration::from_millis(1500)).1.saturating_record(2000);
        assert_eq!(series.confirmed(), vec![3, 1, 0, 1]);
        assert_eq!(series.counts[3].busy, 1);
        assert_eq!(series.latency.len(), 4);
        assert_eq!(series.latency[1].len(), 1);
    }

    #[test]
    fn recovery_is_the_first_second_back_above_half_the_baseline() {
        //               0    1     2     3     4     5     6    7    8     9     10    11    12   13    14
        let series = [
            300, 1000, 1000, 1000, 1000, 1000, 900, 100, 400, 800, 1000, 1000, 1000, 200, 1000,
        ];
        let r = recoveries(&series, &[6.4, 12.5], 15);
        assert_eq!(r[0].baseline_tps, 1000.0);
        assert_eq!(r[0].dip_second, Some(7));
        assert_eq!(r[0].recovered_second, Some(9));
        assert!((r[0].recovery_s.unwrap() - 2.6).abs() < 1e-9);
        // The second baseline starts where the first fault recovered: seconds 9..12.
        assert!((r[1].baseline_tps - 2800.0 / 3.0).abs() < 1e-9);
        assert_eq!(r[1].dip_second, Some(13));
        assert_eq!(r[1].recovered_second, Some(14));
        assert!((r[1].recovery_s.unwrap() - 1.5).abs() < 1e-9);

        // No dip: recovered at once. Never recovered: none.
        let flat = [500, 1000, 1000, 1000, 900, 1000];
        assert_eq!(recoveries(&flat, &[3.0], 6)[0].recovery_s, Some(0.0));
        let dead = [500, 1000, 1000, 1000, 0, 0];
        let r = recoveries(&dead, &[3.2], 6);
        assert_eq!((r[0].dip_second, r[0].recovery_s), (Some(4), None));
        // A fault at the very start has only the ramp-up second as baseline.
        assert_eq!(recoveries(&[10, 0, 10], &[1.0], 3)[0].baseline_tps, 10.0);
    }

    #[test]
    fn charts_are_well_formed_and_mark_the_faults() {
        let series = [300, 1000, 1000, 0, 0, 800, 1000];
        let markers = vec![
            Marker {
                at_s: 2.5,
                label: "kill shard-0 leader (r2) <&>".into(),
                kind: MarkerKind::Fault,
            },
            Marker {
                at_s: 4.5,
                label: "restart shard-0-2".into(),
                kind: MarkerKind::Restart,
            },
            Marker {
                at_s: 7.0,
                label: "load stops".into(),
                kind: MarkerKind::End,
            },
        ];
        let svg = throughput_svg("2 shard groups & 1 coordinator", &series, &markers);
        well_formed(&svg).unwrap();
        assert!(svg.contains(r#"class="fault""#), "{svg}");
        assert!(svg.contains("kill shard-0 leader (r2) &lt;&amp;&gt; @ 2.5 s"), "{svg}");
        assert!(svg.contains(r#"class="restart""#));
        assert!(svg.contains("confirmed transactions per second"));
        assert!(svg.contains("time since the load started (s)"));

        let mut latency = latency_histogram();
        for micros in 1..=20_000u64 {
            latency.saturating_record(micros * 50);
        }
        let curve = percentile_curve(&latency);
        assert!(curve.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let svg = latency_svg("latency", &curve, latency.len());
        well_formed(&svg).unwrap();
        assert!(
            svg.contains("99.99%") && svg.contains("p99 ") && svg.contains("max 100"),
            "{svg}"
        );
        well_formed(&latency_svg("empty", &[], 0)).unwrap();
        assert!(well_formed("<svg><g></svg>").is_err());
    }

    #[test]
    fn medians_and_the_tls_cost() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        let cost = tls_cost_percent(62_000.0, 66_000.0).unwrap();
        assert!((cost - 6.0606).abs() < 1e-3, "{cost}");
        assert!(tls_cost_percent(70_000.0, 66_000.0).unwrap() < 0.0);
        assert_eq!(tls_cost_percent(1.0, 0.0), None);
        assert_eq!(
            transport_schedule(2),
            vec![
                TransportMode::MutualTls,
                TransportMode::InsecurePlaintext,
                TransportMode::MutualTls,
                TransportMode::InsecurePlaintext
            ]
        );
    }

    #[test]
    fn cpu_ticks_parse_from_proc() {
        let stat = "4242 (specie shard (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_process_ticks(stat), Some(1234 + 567));
        assert_eq!(parse_process_ticks("garbage"), None);
        let machine = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(parse_machine_ticks(machine), Some((161, 1181)));
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens\nTcp: 1 200 120000 -1 4321 17\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(parse_tcp_active_opens(snmp), Some(4321));
        assert_eq!(parse_tcp_active_opens("Tcp: ActiveOpens\n"), None);
    }

    #[test]
    fn the_transport_chart_is_well_formed() {
        let rounds = vec![
            RoundSeries {
                label: "round 1 mutual-tls: 900 tx/s".into(),
                tls: true,
                confirmed: vec![300, 1000, 950],
            },
            RoundSeries {
                label: "round 2 insecure-plaintext: 1000 tx/s <&>".into(),
                tls: false,
                confirmed: vec![400, 1100, 1000],
            },
        ];
        let medians = vec![
            ("median mutual-tls: 900 tx/s".to_string(), true, 900.0),
            ("median insecure-plaintext: 1000 tx/s".to_string(), false, 1000.0),
        ];
        let svg = transport_svg("2 shard groups; TLS cost 10.0%", &rounds, &medians);
        well_formed(&svg).unwrap();
        assert!(
            svg.contains(r#"class="tls""#) && svg.contains(r#"class="plaintext""#),
            "{svg}"
        );
        assert_eq!(svg.matches(r#"class="median""#).count(), 2);
        assert!(svg.contains("&lt;&amp;&gt;"));
        well_formed(&transport_svg("empty", &[], &[])).unwrap();
    }

    #[test]
    fn fault_specs_parse() {
        let f = parse_fault("coordinator-0@12.5").unwrap();
        assert_eq!((f.group.as_str(), f.at_s), ("coordinator-0", 12.5));
        assert!(parse_fault("shard-0").is_err());
        assert!(parse_fault("@3").is_err());
        assert!(parse_fault("shard-0@-1").is_err());
    }
}
