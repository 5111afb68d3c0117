//! One run of the load: the preload, the generator (closed or open loop), completions binned by second, unknown outcomes resolved against the UHS, and `result.json`.

use super::*;

/// One swap in flight: what it spends and creates, and when it was sent.
pub(crate) struct Flight {
    pub(crate) sent: Instant,
    pub(crate) spent: [UhsId; 2],
    pub(crate) created: [UhsId; 2],
}

/// Counts for one second of the run (by completion time; `submitted` by send time).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct SecondCounts {
    pub(crate) submitted: u64,
    pub(crate) confirmed: u64,
    pub(crate) busy: u64,
    pub(crate) unknown: u64,
    /// Dropped, rejected or invalid.
    pub(crate) other: u64,
}

/// Per-second series: bin `i` holds events at `i ≤ t < i + 1` seconds after the load started.
pub(crate) struct PerSecond {
    pub(crate) counts: Vec<SecondCounts>,
    pub(crate) latency: Vec<Histogram<u64>>,
}

impl PerSecond {
    pub(crate) fn new() -> PerSecond {
        PerSecond {
            counts: vec![],
            latency: vec![],
        }
    }

    /// The bin of an event `elapsed` after the start, growing the series as needed.
    pub(crate) fn at(&mut self, elapsed: Duration) -> (&mut SecondCounts, &mut Histogram<u64>) {
        let second = elapsed.as_secs() as usize;
        while self.counts.len() <= second {
            self.counts.push(SecondCounts::default());
            self.latency.push(latency_histogram());
        }
        (&mut self.counts[second], &mut self.latency[second])
    }

    pub(crate) fn confirmed(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.confirmed).collect()
    }
}

pub(crate) fn latency_histogram() -> Histogram<u64> {
    // Microseconds, 1 µs to 1 hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// What one run of the load measured (the whole result is in `result`, as in `result.json`).
pub(crate) struct LoadRun {
    pub(crate) mean_tps: f64,
    pub(crate) peak_tps: u64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) confirmed_in_load: u64,
    pub(crate) preload_s: f64,
    /// Generator ids missing from the UHS afterwards (none if every outcome was reported truly).
    pub(crate) pool_missing: Option<usize>,
    pub(crate) cpu: Option<CpuUsage>,
    pub(crate) confirmed_series: Vec<u64>,
    pub(crate) result_file: PathBuf,
}

/// Preloads, runs the load on `topology` (a running cluster) and writes `result.json` and the
/// charts to `out`. The load stops early once `interrupted` is set.
pub(crate) fn run_load(
    args: &ClusterBenchOptions,
    topology: &Topology,
    topology_path: &Path,
    out: &Path,
    interrupted: Option<&AtomicBool>,
) -> BenchResult<LoadRun> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Loads the sentinel's credentials for the transport the cluster file names.
    let backend = ClusterBackend::new(topology, runtime.handle().clone(), &topology.sentinels[0].name)
        .step("cannot reach the cluster")?;
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    // Fresh ids every run: a cluster keeps its UHS across runs (and restarts).
    let mut rng = StdRng::from_entropy();

    // Preload: compact transactions that only create ids.
    let preload_started = Instant::now();
    let pool = preload(&runtime, &backend, &reply, &mut completions, &mut rng, args)?;
    let preload_s = preload_started.elapsed().as_secs_f64();
    println!("  preloaded {} ids in {preload_s:.1} s", pool.len());

    // Load, with the fault schedule on its own thread.
    let cpu_start = CpuSnapshot::take(&args.dir, topology_path, topology);
    let started = Instant::now();
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
    let mut load = Load {
        args,
        runtime: &runtime,
        backend: &backend,
        reply: &reply,
        rng,
        pool,
        started,
        tally: Tally::new(),
    };
    let cpu_end = load.run(&mut completions, topology, topology_path, interrupted);
    let Load { pool, tally, .. } = load;
    let outstanding = tally.in_flight.len();
    stop.store(true, Ordering::Relaxed);
    let faults = fault_thread
        .join()
        .map_err(|_| BenchError::Failed("the fault injection thread panicked".to_string()))?;
    if interrupted.is_some_and(|i| i.load(Ordering::Relaxed)) {
        runtime.shutdown_timeout(Duration::from_secs(1));
        fail!("interrupted during the load");
    }
    let aftermath = Aftermath {
        outstanding,
        cpu: cpu_start.zip(cpu_end.flatten()).map(|(start, end)| end.since(&start)),
        unknown_resolution: resolve_unknown(&backend, &tally.unknown),
        pool_check: check_pool(&backend, &pool),
        pool_ids: pool.len(),
        preload_s,
        recovery_of: recoveries_by_fault(args, &tally, &faults),
        faults,
    };
    runtime.shutdown_timeout(Duration::from_secs(1));
    print_summary(args, &tally, &aftermath);
    let result_file = write_results(args, topology, out, &tally, &aftermath)?;
    let confirmed_series = tally.series.confirmed();
    let (_, peak_tps) = peak(args, &confirmed_series);
    Ok(LoadRun {
        mean_tps: tally.confirmed_in_load as f64 / args.seconds,
        peak_tps,
        p50_ms: quantile_ms(&tally.latency, 0.5),
        p99_ms: quantile_ms(&tally.latency, 0.99),
        confirmed_in_load: tally.confirmed_in_load,
        preload_s,
        pool_missing: aftermath.pool_check.as_ref().ok().copied(),
        cpu: aftermath.cpu,
        confirmed_series,
        result_file,
    })
}

/// What the generator sent and what became of it.
struct Tally {
    series: PerSecond,
    /// Latency of every confirmed swap.
    latency: Histogram<u64>,
    by_status: BTreeMap<String, u64>,
    in_flight: HashMap<u64, Flight>,
    /// Swaps answered `Unknown`, set aside to be resolved after the run.
    unknown: Vec<Flight>,
    next_ref: u64,
    submitted: u64,
    /// Open loop: swaps due at `--rate` so far, and those of them not sent for want of room.
    due_total: u64,
    not_sent: u64,
    /// Confirmed before the load's duration ended.
    confirmed_in_load: u64,
    peak_in_flight: usize,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            series: PerSecond::new(),
            latency: latency_histogram(),
            by_status: BTreeMap::new(),
            in_flight: HashMap::new(),
            unknown: vec![],
            next_ref: 0,
            submitted: 0,
            due_total: 0,
            not_sent: 0,
            confirmed_in_load: 0,
            peak_in_flight: 0,
        }
    }
}

/// The swap generator: sends swaps spending ids of its pool, and returns ids to the pool as
/// their outcomes allow.
struct Load<'a> {
    args: &'a ClusterBenchOptions,
    runtime: &'a tokio::runtime::Runtime,
    backend: &'a ClusterBackend,
    reply: &'a specie_api::CompletionSender,
    rng: StdRng,
    /// Ids the generator knows to be unspent.
    pool: Vec<UhsId>,
    started: Instant,
    tally: Tally,
}

impl Load<'_> {
    /// Sends swaps for `--seconds` (or until `interrupted`), then waits for the answers still
    /// outstanding for up to [`DRAIN_MAX`]. Returns the CPU snapshot taken when the load stopped.
    fn run(
        &mut self,
        completions: &mut tokio::sync::mpsc::UnboundedReceiver<Completion>,
        topology: &Topology,
        topology_path: &Path,
        interrupted: Option<&AtomicBool>,
    ) -> Option<Option<CpuSnapshot>> {
        let args = self.args;
        let duration = Duration::from_secs_f64(args.seconds);
        let mut cpu_end: Option<Option<CpuSnapshot>> = None;
        loop {
            let elapsed = self.started.elapsed();
            let loading = elapsed < duration && !interrupted.is_some_and(|i| i.load(Ordering::Relaxed));
            if !loading && cpu_end.is_none() {
                cpu_end = Some(CpuSnapshot::take(&args.dir, topology_path, topology));
            }
            if loading {
                let count = self.due_now(elapsed);
                if count > 0 {
                    self.send(count);
                }
            } else if self.tally.in_flight.is_empty() || elapsed > duration + DRAIN_MAX {
                break;
            }
            // Wait for completions: until the next open-loop tick, or briefly.
            let wait = match (loading, args.mode) {
                (true, LoadMode::Open) => OPEN_TICK.saturating_sub(self.started.elapsed().saturating_sub(elapsed)),
                (true, LoadMode::Closed) => Duration::from_millis(20).min(duration.saturating_sub(elapsed)),
                (false, _) => Duration::from_millis(100),
            };
            let first = self
                .runtime
                .block_on(async { tokio::time::timeout(wait, completions.recv()).await });
            let Ok(Some(first)) = first else { continue };
            let received_at = self.started.elapsed();
            for completion in std::iter::once(first).chain(std::iter::from_fn(|| completions.try_recv().ok())) {
                self.complete(completion, received_at, duration);
            }
        }
        cpu_end
    }

    /// How many swaps to send now: enough to refill the window (closed loop, once a batch
    /// fits), or those due at `--rate` that the in-flight limit allows (open loop).
    fn due_now(&mut self, elapsed: Duration) -> usize {
        let (args, tally) = (self.args, &mut self.tally);
        match args.mode {
            LoadMode::Closed => {
                let room = args
                    .window
                    .saturating_sub(tally.in_flight.len())
                    .min(self.pool.len() / 2);
                if room >= args.batch.min(args.window) {
                    room
                } else {
                    0
                }
            }
            LoadMode::Open => {
                let rate = args.rate.unwrap_or(0.0);
                let due = ((rate * elapsed.as_secs_f64()) as u64).saturating_sub(tally.due_total);
                tally.due_total += due;
                let room = args
                    .in_flight_max
                    .saturating_sub(tally.in_flight.len())
                    .min(self.pool.len() / 2);
                let count = (due as usize).min(room);
                tally.not_sent += due - count as u64;
                count
            }
        }
    }

    /// Sends `count` swaps from the pool, in batches of `--batch`.
    fn send(&mut self, count: usize) {
        let now = Instant::now();
        let tally = &mut self.tally;
        tally.series.at(now - self.started).0.submitted += count as u64;
        tally.submitted += count as u64;
        let mut left = count;
        while left > 0 {
            let size = left.min(self.args.batch);
            let mut batch = Vec::with_capacity(size);
            for _ in 0..size {
                let swap = specie_workload::compact::swap_from_pool(&mut self.pool, &mut self.rng);
                let spent = [swap.spent[0], swap.spent[1]];
                let created = [swap.created[0], swap.created[1]];
                batch.push((tally.next_ref, swap));
                tally.in_flight.insert(
                    tally.next_ref,
                    Flight {
                        sent: now,
                        spent,
                        created,
                    },
                );
                tally.next_ref += 1;
            }
            self.backend.submit_compact(batch, self.reply);
            left -= size;
        }
        tally.peak_in_flight = tally.peak_in_flight.max(tally.in_flight.len());
    }

    /// Counts one answer (received `received_at` into the run) and gives its swap's ids back to
    /// the pool when they are certainly unspent.
    fn complete(&mut self, completion: Completion, received_at: Duration, duration: Duration) {
        let tally = &mut self.tally;
        let Some(flight) = tally.in_flight.remove(&completion.client_ref) else {
            return;
        };
        *tally.by_status.entry(completion.status.code().to_string()).or_default() += 1;
        let (counts, second_latency) = tally.series.at(received_at);
        match completion.status {
            TxStatus::Confirmed => {
                counts.confirmed += 1;
                let micros = flight.sent.elapsed().as_micros() as u64;
                second_latency.saturating_record(micros);
                tally.latency.saturating_record(micros);
                if received_at < duration {
                    tally.confirmed_in_load += 1;
                }
                self.pool.extend(flight.created);
            }
            // Nothing was applied: the inputs are still unspent.
            TxStatus::Busy | TxStatus::Dropped => {
                if completion.status == TxStatus::Busy {
                    counts.busy += 1;
                } else {
                    counts.other += 1;
                }
                self.pool.extend(flight.spent);
            }
            // May or may not be applied: set aside (resolved after the run), never reused.
            TxStatus::Unknown => {
                counts.unknown += 1;
                tally.unknown.push(flight);
            }
            TxStatus::Rejected(_) | TxStatus::Invalid(_) => counts.other += 1,
        }
    }
}

/// What was learnt once the load stopped.
struct Aftermath {
    /// Swaps still unanswered when the generator gave up waiting.
    outstanding: usize,
    faults: Vec<FaultRecord>,
    /// The recovery after each fault that was injected, by fault.
    recovery_of: Vec<Option<Recovery>>,
    cpu: Option<CpuUsage>,
    unknown_resolution: UnknownResolution,
    /// How many of the generator's unspent ids are missing from the UHS.
    pool_check: BenchResult<usize>,
    pool_ids: usize,
    preload_s: f64,
}

/// A latency histogram's quantile `q`, in milliseconds (0 when empty).
fn quantile_ms(histogram: &Histogram<u64>, q: f64) -> f64 {
    if histogram.is_empty() {
        0.0
    } else {
        histogram.value_at_quantile(q) as f64 / 1000.0
    }
}

/// The busiest second of the load (not of the drain) and its confirmed swaps.
fn peak(args: &ClusterBenchOptions, confirmed_series: &[u64]) -> (usize, u64) {
    let load_seconds = args.seconds.floor() as usize;
    confirmed_series
        .iter()
        .take(load_seconds.max(1))
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map_or((0, 0), |(s, c)| (s, *c))
}

/// How throughput recovered after each fault that was injected, by fault.
fn recoveries_by_fault(args: &ClusterBenchOptions, tally: &Tally, faults: &[FaultRecord]) -> Vec<Option<Recovery>> {
    let kills: Vec<(usize, f64)> = faults
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.killed_at_s.map(|t| (i, t)))
        .collect();
    let recovery = recoveries(
        &tally.series.confirmed(),
        &kills.iter().map(|(_, t)| *t).collect::<Vec<_>>(),
        args.seconds.floor() as usize,
    );
    let mut recovery_of: Vec<Option<Recovery>> = vec![None; faults.len()];
    for ((i, _), r) in kills.iter().zip(recovery) {
        recovery_of[*i] = Some(r);
    }
    recovery_of
}

/// Prints what the run measured: throughput, latency, CPU, outcomes, the UHS check, faults.
fn print_summary(args: &ClusterBenchOptions, tally: &Tally, aftermath: &Aftermath) {
    let latency = &tally.latency;
    let confirmed_in_load = tally.confirmed_in_load;
    let mean_tps = confirmed_in_load as f64 / args.seconds;
    let (peak_second, peak_tps) = peak(args, &tally.series.confirmed());
    println!(
        "  confirmed {confirmed_in_load} in {:.1} s: mean {mean_tps:.0} tx/s, peak {peak_tps} tx/s (second {peak_second})",
        args.seconds
    );
    println!(
        "  latency of confirmed swaps: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        quantile_ms(latency, 0.5),
        quantile_ms(latency, 0.9),
        quantile_ms(latency, 0.99),
        quantile_ms(latency, 1.0)
    );
    if let Some(cpu) = &aftermath.cpu {
        println!("  CPU during the load: {}", cpu.summary(confirmed_in_load));
    }
    let statuses: Vec<String> = tally.by_status.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "  outcomes: {}; submitted {}, not sent {}, still in flight at the end {}",
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        },
        tally.submitted,
        tally.not_sent,
        aftermath.outstanding
    );
    match &aftermath.pool_check {
        Ok(missing) => println!(
            "  check: {} of the generator's {} unspent ids are in the UHS{}",
            aftermath.pool_ids - missing,
            aftermath.pool_ids,
            if *missing == 0 { "" } else { " — SOME ARE MISSING" }
        ),
        Err(error) => println!("  check: cannot query the UHS: {error:#}"),
    }
    if !tally.unknown.is_empty() {
        println!(
            "  unknown outcomes, resolved afterwards from the UHS: {}",
            aftermath.unknown_resolution
        );
    }
    for (fault, recovery) in aftermath.faults.iter().zip(&aftermath.recovery_of) {
        print_fault(fault, recovery.as_ref());
    }
}

/// One fault: when its leader was killed, who led next, and how throughput recovered.
fn print_fault(fault: &FaultRecord, recovery: Option<&Recovery>) {
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

/// The throughput chart's markers: each kill, election and restart, and the end of the load.
fn fault_markers(faults: &[FaultRecord], seconds: f64) -> Vec<Marker> {
    let mut markers = vec![];
    for fault in faults {
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
        at_s: seconds,
        label: "load stops".into(),
        kind: MarkerKind::End,
    });
    markers
}

/// Writes the throughput and latency charts and `result.json` to `out`; returns the latter.
fn write_results(
    args: &ClusterBenchOptions,
    topology: &Topology,
    out: &Path,
    tally: &Tally,
    aftermath: &Aftermath,
) -> BenchResult<PathBuf> {
    let title = format!(
        "{}; {}, {} s; {}",
        shape_text(topology),
        load_text(args),
        args.seconds,
        transport_name(topology.transport)
    );
    let curve = percentile_curve(&tally.latency);
    let throughput_file = out.join("throughput.svg");
    let latency_file = out.join("latency.svg");
    let result_file = out.join("result.json");
    let markers = fault_markers(&aftermath.faults, args.seconds);
    std::fs::write(
        &throughput_file,
        throughput_svg(&title, &tally.series.confirmed(), &markers),
    )?;
    std::fs::write(&latency_file, latency_svg(&title, &curve, tally.latency.len()))?;
    let mut result = result_json(args, topology, tally, aftermath, &curve);
    result["files"] = serde_json::json!({
        "throughput_svg": throughput_file.display().to_string(),
        "latency_svg": latency_file.display().to_string(),
    });
    std::fs::write(&result_file, serde_json::to_string_pretty(&result)? + "\n")?;
    println!(
        "  wrote {}, {}, {}",
        result_file.display(),
        throughput_file.display(),
        latency_file.display()
    );
    Ok(result_file)
}

/// `result.json` without its `files`.
fn result_json(
    args: &ClusterBenchOptions,
    topology: &Topology,
    tally: &Tally,
    aftermath: &Aftermath,
    curve: &[(f64, f64)],
) -> serde_json::Value {
    let latency = &tally.latency;
    let (peak_second, peak_tps) = peak(args, &tally.series.confirmed());
    let percentiles: Vec<(f64, f64)> = [0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0]
        .iter()
        .map(|&q| (100.0 * q, quantile_ms(latency, q)))
        .collect();
    let per_second: Vec<serde_json::Value> = tally
        .series
        .counts
        .iter()
        .zip(&tally.series.latency)
        .enumerate()
        .map(|(second, (c, h))| {
            serde_json::json!({
                "second": second, "submitted": c.submitted, "confirmed": c.confirmed, "busy": c.busy,
                "unknown": c.unknown, "other": c.other,
                "latency_ms_p50": quantile_ms(h, 0.5), "latency_ms_p99": quantile_ms(h, 0.99),
            })
        })
        .collect();
    serde_json::json!({
        "cluster": cluster_json(&args.dir, topology),
        "config": {
            "transport": topology.transport,
            "mode": args.mode, "seconds": args.seconds, "window": args.window, "rate": args.rate,
            "in_flight_max": args.in_flight_max, "preload": args.preload, "batch": args.batch,
            "restart_after": args.restart_after,
            "kill_leader": args.kill_leader.iter().map(|f| format!("{}@{}", f.group, f.at_s)).collect::<Vec<_>>(),
            "threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
        },
        "preload": { "ids": args.preload, "transactions": args.preload.div_ceil(PRELOAD_IDS_PER_TX), "seconds": aftermath.preload_s },
        "totals": {
            "submitted": tally.submitted, "not_sent": tally.not_sent, "outstanding": aftermath.outstanding,
            "peak_in_flight": tally.peak_in_flight, "confirmed": tally.by_status.get("confirmed").copied().unwrap_or(0),
            "confirmed_during_load": tally.confirmed_in_load, "by_status": tally.by_status,
        },
        "throughput": {
            "mean_tps": tally.confirmed_in_load as f64 / args.seconds, "peak_tps": peak_tps, "peak_second": peak_second,
            "per_second": per_second,
        },
        "latency_ms": {
            "count": latency.len(),
            "mean": if latency.is_empty() { 0.0 } else { latency.mean() / 1000.0 },
            "p50": quantile_ms(latency, 0.5), "p90": quantile_ms(latency, 0.9),
            "p99": quantile_ms(latency, 0.99), "p999": quantile_ms(latency, 0.999),
            "max": quantile_ms(latency, 1.0),
            "percentiles": percentiles.iter().map(|(p, v)| serde_json::json!({"percentile": p, "ms": v})).collect::<Vec<_>>(),
            "curve": curve.iter().map(|(p, v)| serde_json::json!({"percentile": 100.0 * p, "ms": v})).collect::<Vec<_>>(),
        },
        "faults": aftermath.faults.iter().zip(&aftermath.recovery_of).map(|(f, r)| serde_json::json!({"fault": f, "recovery": r})).collect::<Vec<_>>(),
        "unknown_resolution": aftermath.unknown_resolution.json(),
        "cpu": aftermath.cpu.as_ref().map(|c| c.json(tally.confirmed_in_load)),
        "pool_check": match &aftermath.pool_check {
            Ok(missing) => serde_json::json!({"ids": aftermath.pool_ids, "missing": missing}),
            Err(error) => serde_json::json!({"ids": aftermath.pool_ids, "error": format!("{error:#}")}),
        },
    })
}

/// The cluster a result was measured on, as its JSON files record it.
pub(crate) fn cluster_json(dir: &Path, topology: &Topology) -> serde_json::Value {
    serde_json::json!({
        "dir": dir.display().to_string(),
        "shard_groups": topology.shard_groups.len(),
        "coordinator_groups": topology.coordinator_groups.len(),
        "shape": topology.shape_name(),
        "replicas": topology.shard_groups.first().map_or(0, |g| g.replicas.len()),
    })
}

/// Creates `--preload` ids (100 per transaction), resubmitting what the cluster was too busy
/// for, and returns them as the generator's pool. A transaction answered `unknown` (a leader
/// changed under it) is resubmitted as it is: the shards never create an id twice, so at most one
/// attempt applies, and "output already exists" then means an earlier attempt did.
pub(crate) fn preload(
    runtime: &tokio::runtime::Runtime,
    backend: &ClusterBackend,
    reply: &specie_api::CompletionSender,
    completions: &mut tokio::sync::mpsc::UnboundedReceiver<Completion>,
    rng: &mut StdRng,
    args: &ClusterBenchOptions,
) -> BenchResult<Vec<UhsId>> {
    let pool: Vec<UhsId> = (0..args.preload).map(|_| UhsId(rng.gen())).collect();
    let mut pending: HashMap<u64, CompactTransaction> =
        specie_workload::compact::preload_transactions(&pool, PRELOAD_IDS_PER_TX, rng)
            .into_iter()
            .collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut to_send: Vec<u64> = pending.keys().copied().collect();
    let mut maybe_applied: HashSet<u64> = HashSet::new();
    while !pending.is_empty() {
        ensure_that!(
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
                .step("no answer from the cluster for 60 s during the preload")?
                .step("the completion channel closed")?;
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
                other => fail!("a preload transaction failed: {other:?} (is the cluster healthy?)"),
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
pub(crate) struct UnknownResolution {
    pub(crate) applied: u64,
    pub(crate) not_applied: u64,
    pub(crate) undetermined: u64,
    pub(crate) error: Option<String>,
}

impl UnknownResolution {
    pub(crate) fn json(&self) -> serde_json::Value {
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
pub(crate) fn resolve_unknown(backend: &ClusterBackend, unknown: &[Flight]) -> UnknownResolution {
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
pub(crate) fn check_pool(backend: &ClusterBackend, pool: &[UhsId]) -> BenchResult<usize> {
    let mut missing = 0;
    for chunk in pool.chunks(20_000) {
        missing += backend.query_uhs(chunk)?.iter().filter(|present| !**present).count();
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
