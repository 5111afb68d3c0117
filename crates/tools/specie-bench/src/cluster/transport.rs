//! `--compare-transport`: what mutual TLS costs, over alternating rounds.

use super::*;

/// The bound on what mutual TLS may cost: this share of plaintext throughput.
pub(crate) const TLS_COST_TARGET_PERCENT: f64 = 15.0;

/// Set by SIGINT or SIGTERM during `--compare-transport`: the load stops, and the cluster file is
/// set back to mutual TLS before the process exits.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

pub(crate) fn transport_name(mode: TransportMode) -> &'static str {
    match mode {
        TransportMode::MutualTls => "mutual-tls",
        TransportMode::InsecurePlaintext => "insecure-plaintext",
    }
}

/// One measured round of `--compare-transport`.
pub(crate) struct Round {
    pub(crate) number: usize,
    pub(crate) transport: TransportMode,
    pub(crate) run: LoadRun,
}

/// What the rounds did to the running cluster, so that the end can put it back.
#[derive(Default)]
pub(crate) struct ClusterState {
    /// A restart was attempted.
    pub(crate) restarted: bool,
    /// The transport the running cluster was last started with (none while a restart is under way).
    pub(crate) running: Option<TransportMode>,
}

/// The rounds' schedule: mutual TLS first, then alternating, `rounds` of each.
pub(crate) fn transport_schedule(rounds: usize) -> Vec<TransportMode> {
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

pub(crate) fn compare_transport(args: &ClusterBenchOptions, topology_path: &Path, out: &Path) -> BenchResult<ExitCode> {
    ensure_that!(args.rounds >= 2, "--rounds must be at least 2 (rounds per transport)");
    ensure_that!(
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

pub(crate) fn compare_rounds(
    args: &ClusterBenchOptions,
    topology_path: &Path,
    out: &Path,
    rounds: &mut Vec<Round>,
    state: &mut ClusterState,
) -> BenchResult<()> {
    let schedule = transport_schedule(args.rounds);
    for (i, &transport) in schedule.iter().enumerate() {
        ensure_that!(!INTERRUPTED.load(Ordering::Relaxed), "interrupted");
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
        ensure_that!(
            topology.transport == transport,
            "{} changed under the benchmark",
            topology_path.display()
        );
        let round_out = out.join(format!("round-{number}-{name}"));
        std::fs::create_dir_all(&round_out).with_step(|| format!("cannot create {}", round_out.display()))?;
        // A new backend per round: it loads the credentials (or none) for this transport. The
        // preload makes fresh random ids each round, as the UHS keeps what earlier rounds spent.
        let run = run_load(args, &topology, topology_path, &round_out, Some(&INTERRUPTED))
            .with_step(|| format!("round {number} ({name})"))?;
        rounds.push(Round { number, transport, run });
    }
    Ok(())
}

/// Rewrites the cluster file's `transport` (the whole file, from the parsed topology), atomically.
pub(crate) fn set_transport(topology_path: &Path, transport: TransportMode) -> BenchResult<()> {
    let mut topology = Topology::load(topology_path)?;
    if topology.transport == transport {
        return Ok(());
    }
    topology.transport = transport;
    let temporary = topology_path.with_extension("toml.bench-tmp");
    std::fs::write(&temporary, topology.to_toml()).with_step(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, topology_path).with_step(|| format!("cannot replace {}", topology_path.display()))?;
    Ok(())
}

/// `specie cluster down` then `specie cluster up` (which waits for every group's leader).
pub(crate) fn restart_cluster(dir: &Path) -> BenchResult<()> {
    supervisor::down(dir).step("`specie cluster down` failed")?;
    supervisor::up(&supervisor::UpOptions::with_defaults(dir)).step("`specie cluster up` failed")?;
    Ok(())
}

/// Sets the cluster file back to mutual TLS and, if a round restarted the cluster with another
/// transport (or a restart failed half-way), restarts it. Returns whether it restarted.
pub(crate) fn restore_mutual_tls(dir: &Path, topology_path: &Path, state: &ClusterState) -> BenchResult<bool> {
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
pub(crate) fn cpu_us_per_tx(run: &LoadRun, role: &str) -> Option<f64> {
    let cpu = run.cpu.as_ref()?;
    let seconds = match role {
        "bench" => cpu.bench_s,
        "cluster" => cpu.by_role.values().sum(),
        role => cpu.by_role.get(role).copied().unwrap_or(0.0),
    };
    (run.confirmed_in_load > 0).then(|| seconds * 1e6 / run.confirmed_in_load as f64)
}

/// Prints the comparison and writes `transport.json` and `transport.svg` to `out`.
pub(crate) fn report_comparison(
    args: &ClusterBenchOptions,
    topology: &Topology,
    rounds: &[Round],
    out: &Path,
    complete: bool,
) -> BenchResult<()> {
    println!(
        "\ntransport comparison: {}; {}; {} s per round{}",
        shape_text(topology),
        load_text(args),
        args.seconds,
        if complete { "" } else { " (INCOMPLETE: a round failed)" }
    );
    print_round_table(rounds);
    let (medians, tls, plaintext) = print_medians(rounds);
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
    ensure_that!(
        missing == 0,
        "{missing} of the generator's unspent ids are missing from the UHS (see the rounds' result.json)"
    );
    Ok(())
}

/// Each transport's medians over its rounds, printed; returns them as JSON, and the median
/// throughput with mutual TLS and with plaintext.
fn print_medians(rounds: &[Round]) -> (serde_json::Map<String, serde_json::Value>, Option<f64>, Option<f64>) {
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
    (medians, tls, plaintext)
}

/// The roles whose CPU time per transaction the comparison reports.
const ROLES: [&str; 4] = ["shard", "coordinator", "bench", "cluster"];

fn show(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.decimals$}"))
}

/// One line per round: throughput, latency, CPU per transaction, machine load.
fn print_round_table(rounds: &[Round]) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
