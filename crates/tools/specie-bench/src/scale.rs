//! `specie bench scale`: one workload at 1, 2, 4, … cores, each run a fresh `specie` process
//! pinned to the first k cores (`sched_setaffinity` before it starts, so its thread pools size
//! themselves to k), with its own ceiling measured inside the same pinned run. While it runs, the
//! CPU time of each of its threads is read from `/proc/PID/task/*/stat`; the busiest thread's CPU
//! per transaction is the serial stage's cost, and `1 / that` the throughput no core count can
//! pass while that thread does the work alone. On a 2-core machine the curve is short, but the
//! busiest thread and its cap still name the bottleneck.
//!
//! Thread CPU covers the whole run (start-up, key generation and the ceiling's measurement
//! included), so per-transaction figures are upper bounds: a cap derived from them is
//! conservative.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::error::StepContext as _;
use crate::{BenchError, BenchResult};

/// How often the running workload's threads are read.
const SAMPLE_INTERVAL_MS: u64 = 50;
/// Thread groups printed per row (all of them go to the JSON).
const THREAD_GROUPS_SHOWN: usize = 5;

/// What `specie bench scale` runs at each core count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleWorkload {
    /// `specie demo`: the embedded node (ledger of record on), signed payments, the audit.
    Demo,
    /// `specie bench swap`: the 2PC engine alone (coordinator and shards, fsync on).
    Swap,
    /// `specie bench validate`: the sentinel's validation of 2-in/2-out transactions.
    Validate,
    /// `specie cluster up` then `specie bench cluster`: the replicated cluster (3-way Raft,
    /// fsync, mutual TLS, its default groups for the cores it is given), closed-loop swaps.
    Cluster,
    /// `specie bench byzantine`: a FastPay committee of 4 authorities, transfer orders.
    Byzantine,
    /// `specie bench offline`: the offline authority's deposits on every core it is given.
    Offline,
    /// `specie bench exchange`: SPEEDEX's execution phase, payments on every core.
    Exchange,
    /// `specie bench privacy`: confidential 2-in/2-out validation on every core.
    Privacy,
}

/// How one run at one core count goes: commands before and after the measured one (all pinned
/// alike), where the measured figures are, and which processes' threads count.
struct Plan {
    setup: Vec<Vec<String>>,
    measured: Vec<String>,
    teardown: Vec<Vec<String>>,
    /// The measured command's JSON summary is in this file, not on its standard output.
    result_file: Option<PathBuf>,
    /// A cluster's directory: the threads of every process in its `pids/` count too.
    cluster_dir: Option<PathBuf>,
    /// JSON pointers into the summary: throughput, transactions counted, the same-run ceiling.
    tps: &'static str,
    transactions: Option<&'static str>,
    ceiling: Option<&'static str>,
}

impl ScaleWorkload {
    pub fn name(self) -> &'static str {
        match self {
            ScaleWorkload::Demo => "demo",
            ScaleWorkload::Swap => "swap",
            ScaleWorkload::Validate => "validate",
            ScaleWorkload::Cluster => "cluster",
            ScaleWorkload::Byzantine => "byzantine",
            ScaleWorkload::Offline => "offline",
            ScaleWorkload::Exchange => "exchange",
            ScaleWorkload::Privacy => "privacy",
        }
    }

    /// The run at one core count; `work` is a fresh directory the run may use.
    fn plan(self, options: &ScaleOptions, work: &Path) -> Plan {
        let seconds = format!("{}", options.seconds);
        let payments = options.payments.to_string();
        let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let single = |args: &[&str], tps, transactions, ceiling| Plan {
            setup: vec![],
            measured: owned(args),
            teardown: vec![],
            result_file: None,
            cluster_dir: None,
            tps,
            transactions,
            ceiling,
        };
        match self {
            ScaleWorkload::Demo => single(
                &["demo", "--json", "--payments", &payments],
                "/throughput_tps",
                Some("/confirmed"),
                Some("/sign_verify_ceiling_tps"),
            ),
            ScaleWorkload::Swap => single(
                &["bench", "swap", "--json", "--seconds", &seconds],
                "/swap_tps",
                Some("/confirmed"),
                None,
            ),
            ScaleWorkload::Validate => single(
                &["bench", "validate", "--json", "--seconds", &seconds],
                "/validate_tps",
                None,
                Some("/ceiling_tps"),
            ),
            ScaleWorkload::Byzantine => single(
                &[
                    "bench",
                    "byzantine",
                    "--json",
                    "--orders",
                    &payments,
                    "--latency-payments",
                    "500",
                ],
                "/transfer/committee_orders_per_s",
                Some("/transfer/orders"),
                Some("/transfer/committee_orders_per_s_signature_bound"),
            ),
            ScaleWorkload::Offline => single(
                &[
                    "bench",
                    "offline",
                    "--json",
                    "--tokens",
                    &payments,
                    "--payments",
                    "200",
                    "--ceiling-seconds",
                    "1",
                ],
                "/all_cores/defunded_per_s",
                None,
                Some("/all_cores/ceiling_defunded_per_s"),
            ),
            ScaleWorkload::Exchange => single(
                &[
                    "bench",
                    "exchange",
                    "--json",
                    "--offers",
                    "1000",
                    "--runs",
                    "1",
                    "--accounts",
                    "100000",
                    "--blocks",
                    "2",
                    "--ceiling-seconds",
                    "1",
                ],
                // One thread's payments, then offers; all cores' payments, then offers.
                "/execution/kinds/2/durable_per_s",
                Some("/execution/kinds/2/transactions"),
                None,
            ),
            ScaleWorkload::Privacy => single(
                &["bench", "privacy", "--json", "--payments", "100"],
                "/confidential_validate_all_cores_per_s",
                None,
                None,
            ),
            ScaleWorkload::Cluster => cluster_plan(options, work),
        }
    }
}

/// The first port of the cluster a run starts: the one asked for, or a free range as large as a
/// default cluster's processes (past 18470, `specie cluster up`'s default, if none is found).
fn cluster_base_port(options: &ScaleOptions) -> u16 {
    let processes = crate::geo::shape_processes(&specie_cluster::Shape::default());
    options
        .base_port
        .unwrap_or_else(|| crate::replicated::free_port_range(processes).unwrap_or(38_470))
}

/// A fresh cluster in `work`, swaps against it, then it stops.
fn cluster_plan(options: &ScaleOptions, work: &Path) -> Plan {
    let dir = work.join("cluster");
    let dir_text = dir.display().to_string();
    let out = work.join("bench");
    let args = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    Plan {
        setup: vec![args(&[
            "cluster",
            "up",
            "--dir",
            &dir_text,
            "--base-port",
            &cluster_base_port(options).to_string(),
        ])],
        measured: args(&[
            "bench",
            "cluster",
            "--dir",
            &dir_text,
            "--seconds",
            &format!("{}", options.seconds),
            "--preload",
            "50000",
            "--out",
            &out.display().to_string(),
        ]),
        teardown: vec![args(&["cluster", "down", "--dir", &dir_text])],
        result_file: Some(out.join("result.json")),
        cluster_dir: Some(dir),
        tps: "/throughput/mean_tps",
        transactions: Some("/totals/confirmed"),
        ceiling: None,
    }
}

#[derive(Clone, Debug)]
pub struct ScaleOptions {
    pub workload: ScaleWorkload,
    /// Core counts to run at; empty: 1, 2, 4, … and the machine's count.
    pub cores: Vec<usize>,
    /// Payments per demo run; orders per byzantine run; tokens per offline run.
    pub payments: u64,
    /// Seconds per swap, validate or cluster run.
    pub seconds: f64,
    pub json: bool,
    /// Where to write the curve as SVG.
    pub chart: Option<PathBuf>,
    /// First port of the cluster a cluster run starts; none: a free range, found as
    /// `specie bench geo` and `replicated` find theirs (a fixed port could be an ephemeral port
    /// another program's connection holds).
    pub base_port: Option<u16>,
}

impl ScaleOptions {
    pub fn new(workload: ScaleWorkload, cores: Vec<usize>, payments: u64, seconds: f64) -> ScaleOptions {
        ScaleOptions {
            workload,
            cores,
            payments,
            seconds,
            json: false,
            chart: None,
            base_port: None,
        }
    }
}

/// One thread of a run: its name (as the kernel keeps it, 15 bytes at most) and its CPU time.
#[derive(Clone, Debug, PartialEq)]
struct ThreadCpu {
    name: String,
    cpu_s: f64,
}

/// One run at one core count.
#[derive(Clone, Debug)]
struct Point {
    cores: usize,
    tps: f64,
    ceiling_tps: Option<f64>,
    transactions: f64,
    wall_s: f64,
    threads: Vec<ThreadCpu>,
}

impl Point {
    fn cpu_s(&self) -> f64 {
        self.threads.iter().map(|t| t.cpu_s).sum()
    }

    fn busiest(&self) -> Option<&ThreadCpu> {
        self.threads.iter().max_by(|a, b| a.cpu_s.total_cmp(&b.cpu_s))
    }

    /// CPU µs the busiest thread spent per transaction, and the throughput that caps.
    fn busiest_cost(&self) -> Option<(f64, f64)> {
        let busiest = self.busiest()?;
        (self.transactions > 0.0 && busiest.cpu_s > 0.0).then(|| {
            (
                busiest.cpu_s * 1e6 / self.transactions,
                self.transactions / busiest.cpu_s,
            )
        })
    }

    /// CPU by thread name with digits taken out (a pool's workers together), largest first.
    fn groups(&self) -> Vec<(String, usize, f64)> {
        let mut groups: BTreeMap<String, (usize, f64)> = BTreeMap::new();
        for thread in &self.threads {
            let name: String = thread.name.chars().filter(|c| !c.is_ascii_digit()).collect();
            let entry = groups.entry(name).or_default();
            entry.0 += 1;
            entry.1 += thread.cpu_s;
        }
        let mut groups: Vec<_> = groups
            .into_iter()
            .map(|(name, (count, cpu))| (name, count, cpu))
            .collect();
        groups.sort_by(|a, b| b.2.total_cmp(&a.2));
        groups
    }
}

/// The core counts to run: those asked, else 1, 2, 4, … below the machine's count, and it.
fn core_counts(asked: &[usize], machine: usize) -> Vec<usize> {
    if !asked.is_empty() {
        return asked.iter().copied().filter(|&c| (1..=machine).contains(&c)).collect();
    }
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |c| c.checked_mul(2))
        .take_while(|&c| c < machine)
        .collect();
    counts.push(machine);
    counts
}

/// `specie bench scale`.
pub fn run(options: &ScaleOptions) -> BenchResult<()> {
    let machine = std::thread::available_parallelism().map_or(1, usize::from);
    let counts = core_counts(&options.cores, machine);
    if counts.is_empty() {
        return Err(BenchError::InvalidOptions(format!(
            "--cores {:?}: this machine has {machine} cores; give counts from 1 to {machine}",
            options.cores
        )));
    }
    let exe = std::env::current_exe().step("cannot find this program")?;
    let mut points = vec![];
    for &cores in &counts {
        if !options.json {
            eprintln!("{} on {cores} core(s)…", options.workload.name());
        }
        points.push(run_pinned(&exe, options, cores)?);
    }
    if let Some(path) = &options.chart {
        std::fs::write(path, chart(options.workload, machine, &points))
            .with_step(|| format!("cannot write {}", path.display()))?;
    }
    if options.json {
        println!("{}", report_json(options.workload, machine, &points));
    } else {
        print!(
            "{}",
            report_text(options.workload, machine, &points, options.chart.as_deref())
        );
    }
    Ok(())
}

/// Runs the workload pinned to cores `0..cores` (set-up and tear-down too), reading the threads
/// of the measured process, and of the cluster's processes if it has some, as it runs.
fn run_pinned(exe: &Path, options: &ScaleOptions, cores: usize) -> BenchResult<Point> {
    let work = tempfile::tempdir().step("cannot create a working directory")?;
    let plan = options.workload.plan(options, work.path());
    // A run that starts a cluster stops it even on Ctrl-C: the interrupt reaches the measured
    // child (same process group), not this process, and the tear-down below still runs.
    let caught = (!plan.teardown.is_empty()).then(crate::geo::CaughtInterrupts::start);
    for args in &plan.setup {
        if let Err(error) = run_to_end(exe, args, cores) {
            // A set-up that failed half-way (one member up) is torn down too.
            for args in &plan.teardown {
                let _ = run_to_end(exe, args, cores);
            }
            return Err(error);
        }
    }
    let measured = measure_pinned(exe, &plan, cores);
    // Tear down whatever happened: a cluster left running would hold its ports and cores.
    let mut teardown = Ok(());
    for args in &plan.teardown {
        teardown = teardown.and(run_to_end(exe, args, cores).map(drop));
    }
    if caught.as_ref().is_some_and(|c| c.interrupted()) {
        return Err(BenchError::Failed(
            "interrupted; the cluster it started is stopped".into(),
        ));
    }
    let (summary, threads, wall_s) = measured?;
    teardown?;
    let field = |pointer: &str| summary.pointer(pointer).and_then(Value::as_f64);
    let tps =
        field(plan.tps).ok_or_else(|| BenchError::Failed(format!("the summary has no {}: {summary}", plan.tps)))?;
    let seconds = field("/seconds")
        .or_else(|| field("/elapsed_s"))
        .unwrap_or(options.seconds);
    Ok(Point {
        cores,
        tps,
        ceiling_tps: plan.ceiling.and_then(field),
        transactions: plan.transactions.and_then(field).unwrap_or(tps * seconds),
        wall_s,
        threads: threads.into_values().collect(),
    })
}

/// The measured command: its JSON summary, the CPU of every thread seen, its wall time.
fn measure_pinned(exe: &Path, plan: &Plan, cores: usize) -> BenchResult<(Value, BTreeMap<u32, ThreadCpu>, f64)> {
    let mut command = Command::new(exe);
    command
        .args(&plan.measured)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    pin_to_first_cores(&mut command, cores);
    let started = Instant::now();
    let child = command
        .spawn()
        .with_step(|| format!("cannot start {}", exe.display()))?;
    let pid = child.id();
    // Read the pipes on their own threads: a child blocked on a full pipe would stall the run.
    let output = std::thread::spawn(move || child.wait_with_output());
    let mut threads: BTreeMap<u32, ThreadCpu> = BTreeMap::new();
    while !output.is_finished() {
        read_threads(pid, "", &mut threads);
        if let Some(dir) = &plan.cluster_dir {
            for (member, member_pid) in cluster_pids(dir) {
                read_threads(member_pid, &member, &mut threads);
            }
        }
        std::thread::sleep(Duration::from_millis(SAMPLE_INTERVAL_MS));
    }
    let wall_s = started.elapsed().as_secs_f64();
    let output = (output.join())
        .map_err(|_| BenchError::Failed("the thread reading the workload's output panicked".into()))?
        .step("cannot read the workload's output")?;
    let shown = plan.measured.join(" ");
    if !output.status.success() {
        return Err(BenchError::Failed(format!(
            "`specie {shown}` on {cores} core(s) failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let summary: Value = match &plan.result_file {
        None => serde_json::from_slice(&output.stdout),
        Some(path) => {
            serde_json::from_slice(&std::fs::read(path).with_step(|| format!("cannot read {}", path.display()))?)
        }
    }
    .with_step(|| format!("`specie {shown}` left no JSON summary"))?;
    Ok((summary, threads, wall_s))
}

/// Runs a set-up or tear-down command pinned like the measured one, to its end.
fn run_to_end(exe: &Path, args: &[String], cores: usize) -> BenchResult<()> {
    let mut command = Command::new(exe);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    pin_to_first_cores(&mut command, cores);
    let output = command
        .output()
        .with_step(|| format!("cannot start {}", exe.display()))?;
    if !output.status.success() {
        return Err(BenchError::Failed(format!(
            "`specie {}` on {cores} core(s) failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// The members of the cluster in `dir` and their process ids, from its `pids/` files.
fn cluster_pids(dir: &Path) -> Vec<(String, u32)> {
    let Ok(entries) = std::fs::read_dir(dir.join("pids")) else {
        return vec![];
    };
    (entries.flatten())
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.strip_suffix(".pid")?.to_string();
            let pid = std::fs::read_to_string(entry.path()).ok()?.trim().parse().ok()?;
            Some((name, pid))
        })
        .collect()
}

/// Makes the child run on cores `0..cores` only, from before its first instruction.
fn pin_to_first_cores(command: &mut Command, cores: usize) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only async-signal-safe calls between fork and exec: CPU_ZERO/CPU_SET write the
    // local set, sched_setaffinity is a system call.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            for core in 0..cores {
                libc::CPU_SET(core, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Reads each thread's name and CPU time (user + system) from `/proc/PID/task/*/stat`, keeping
/// the last reading of threads that have ended. Names get `member:` in front when the process
/// is a cluster member (every member is a `specie` with the same thread names).
fn read_threads(pid: u32, member: &str, threads: &mut BTreeMap<u32, ThreadCpu>) {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        if let Some((name, ticks)) = parse_stat(&stat) {
            threads.insert(
                tid,
                ThreadCpu {
                    name: if member.is_empty() {
                        name
                    } else {
                        format!("{member}:{name}")
                    },
                    cpu_s: ticks as f64 / ticks_per_s,
                },
            );
        }
    }
}

/// A thread's name and its user + system ticks from its `stat` line: `tid (name) state …`, the
/// name in parentheses (it may hold spaces and parentheses itself), utime and stime the 12th and
/// 13th fields after it.
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// Speed-up over the first row and efficiency against linear from it.
fn scaling(points: &[Point], point: &Point) -> (f64, f64) {
    let first = &points[0];
    let speedup = if first.tps > 0.0 { point.tps / first.tps } else { 0.0 };
    let linear = point.cores as f64 / first.cores as f64;
    (speedup, speedup / linear)
}

fn report_text(workload: ScaleWorkload, machine: usize, points: &[Point], chart: Option<&Path>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "specie bench scale: {} on 1 to {machine} cores of this machine, each run pinned to its cores",
        workload.name()
    );
    let _ = writeln!(
        out,
        "cores       tx/s  speed-up  efficiency  ceiling tx/s  of ceiling  CPU used  busiest thread: share, CPU µs/tx, cap tx/s"
    );
    for point in points {
        let (speedup, efficiency) = scaling(points, point);
        let ceiling = point.ceiling_tps.map_or("—".to_string(), |c| format!("{c:.0}"));
        let of_ceiling = point
            .ceiling_tps
            .filter(|c| *c > 0.0)
            .map_or("—".to_string(), |c| format!("{:.0}%", 100.0 * point.tps / c));
        let busiest = match (point.busiest(), point.busiest_cost()) {
            (Some(thread), Some((us, cap))) => format!(
                "{} {:.0}%, {us:.1} µs, {cap:.0}",
                thread.name,
                100.0 * thread.cpu_s / point.cpu_s().max(f64::MIN_POSITIVE)
            ),
            _ => "—".to_string(),
        };
        let _ = writeln!(
            out,
            "{:>5} {:>10.0} {:>8.2}× {:>10.0}% {:>13} {:>11} {:>6.2} cores  {busiest}",
            point.cores,
            point.tps,
            speedup,
            100.0 * efficiency,
            ceiling,
            of_ceiling,
            point.cpu_s() / point.wall_s.max(f64::MIN_POSITIVE),
        );
        let groups: Vec<String> = (point.groups().into_iter().take(THREAD_GROUPS_SHOWN))
            .map(|(name, count, cpu)| {
                format!(
                    "{name}{} {:.0}%",
                    if count > 1 {
                        format!(" ×{count}")
                    } else {
                        String::new()
                    },
                    100.0 * cpu / point.cpu_s().max(f64::MIN_POSITIVE)
                )
            })
            .collect();
        let _ = writeln!(out, "      threads by CPU: {}", groups.join(", "));
    }
    let _ = writeln!(
        out,
        "thread CPU covers the whole run (start-up and the ceiling's measurement included): the caps are conservative"
    );
    if let Some(path) = chart {
        let _ = writeln!(out, "chart: {}", path.display());
    }
    out
}

fn report_json(workload: ScaleWorkload, machine: usize, points: &[Point]) -> Value {
    let rows: Vec<Value> = points
        .iter()
        .map(|point| {
            let (speedup, efficiency) = scaling(points, point);
            let busiest = point.busiest();
            let cost = point.busiest_cost();
            json!({
                "cores": point.cores,
                "tps": point.tps,
                "speedup": speedup,
                "efficiency": efficiency,
                "ceiling_tps": point.ceiling_tps,
                "wall_s": point.wall_s,
                "cpu_s": point.cpu_s(),
                "busiest_thread": busiest.map(|t| t.name.clone()),
                "busiest_thread_cpu_s": busiest.map(|t| t.cpu_s),
                "busiest_thread_us_per_tx": cost.map(|c| c.0),
                "busiest_thread_cap_tps": cost.map(|c| c.1),
                "threads": point.threads.iter().map(|t| json!({"name": t.name, "cpu_s": t.cpu_s})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "workload": workload.name(), "machine_cores": machine, "points": rows })
}

/// Throughput against cores, beside the linear line through the first point and the ceilings.
fn chart(workload: ScaleWorkload, machine: usize, points: &[Point]) -> String {
    use crate::cluster::chart::{axis_labels, nice_step, number, svg_open, BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH};
    let mut svg = String::new();
    let first = &points[0];
    let x_max = points.iter().map(|p| p.cores).max().unwrap_or(1).max(2) as f64;
    let linear = |cores: f64| first.tps * cores / first.cores as f64;
    let y_top = (points.iter())
        .flat_map(|p| [p.tps, linear(p.cores as f64), p.ceiling_tps.unwrap_or(0.0)])
        .fold(1.0, f64::max);
    let y_step = nice_step(y_top, 6);
    let y_max = (y_top / y_step).ceil() * y_step;
    let x = |cores: f64| LEFT + (cores / x_max) * (WIDTH - LEFT - RIGHT);
    let y = |tps: f64| HEIGHT - BOTTOM - (tps / y_max) * (HEIGHT - TOP - BOTTOM);
    svg_open(
        &mut svg,
        &format!("specie bench scale: {}", workload.name()),
        &format!(
            "throughput (blue), linear from the first point (grey), same-run ceiling (orange); {machine}-core machine"
        ),
    );
    axis_labels(&mut svg, "cores", "transactions per second");
    let mut value = 0.0;
    while value <= y_max {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{0}" x2="{1}" y2="{0}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{4}</text>"##,
            y(value),
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(value) + 4.0,
            number(value)
        );
        value += y_step;
    }
    for point in points {
        let _ = writeln!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle">{}</text>"##,
            x(point.cores as f64),
            HEIGHT - BOTTOM + 18.0,
            point.cores
        );
    }
    let line = |values: &[(f64, f64)], colour: &str, dashed: bool| {
        let path: Vec<String> = values
            .iter()
            .map(|(c, t)| format!("{:.1},{:.1}", x(*c), y(*t)))
            .collect();
        format!(
            r##"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"{}/>"##,
            path.join(" "),
            if dashed { r#" stroke-dasharray="6 4""# } else { "" }
        )
    };
    let measured: Vec<(f64, f64)> = points.iter().map(|p| (p.cores as f64, p.tps)).collect();
    let straight: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.cores as f64, linear(p.cores as f64)))
        .collect();
    let ceilings: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| p.ceiling_tps.map(|c| (p.cores as f64, c)))
        .collect();
    let _ = writeln!(svg, "{}", line(&straight, "#999", true));
    if !ceilings.is_empty() {
        let _ = writeln!(svg, "{}", line(&ceilings, "#e67e22", true));
    }
    let _ = writeln!(svg, "{}", line(&measured, "#2c6fbb", false));
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_counts_double_up_to_the_machine() {
        assert_eq!(core_counts(&[], 16), [1, 2, 4, 8, 16]);
        assert_eq!(core_counts(&[], 12), [1, 2, 4, 8, 12]);
        assert_eq!(core_counts(&[], 2), [1, 2]);
        assert_eq!(core_counts(&[], 1), [1]);
        assert_eq!(
            core_counts(&[2, 64, 0, 1], 4),
            [2, 1],
            "counts the machine lacks are dropped"
        );
    }

    #[test]
    fn a_threads_stat_line_gives_its_name_and_cpu_ticks() {
        let stat = "4242 (shard) host (x)) S 1 4242 4242 0 -1 4194368 2010 0 0 0 150 25 0 0 20 0 9 0 1234 0 0";
        assert_eq!(parse_stat(stat), Some(("shard) host (x)".to_string(), 175)));
        assert_eq!(parse_stat("4242 (cut"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn the_busiest_thread_names_the_cap() {
        let point = Point {
            cores: 2,
            tps: 1000.0,
            ceiling_tps: Some(4000.0),
            transactions: 10_000.0,
            wall_s: 10.0,
            threads: vec![
                ThreadCpu {
                    name: "tokio-runtime-w".into(),
                    cpu_s: 2.0,
                },
                ThreadCpu {
                    name: "coordinator".into(),
                    cpu_s: 5.0,
                },
                ThreadCpu {
                    name: "tokio-runtime-w".into(),
                    cpu_s: 3.0,
                },
            ],
        };
        assert_eq!(point.busiest().unwrap().name, "coordinator");
        let (us, cap) = point.busiest_cost().unwrap();
        assert!((us - 500.0).abs() < 1e-9 && (cap - 2000.0).abs() < 1e-9, "{us} {cap}");
        assert_eq!(
            point.groups(),
            [
                ("coordinator".to_string(), 1, 5.0),
                ("tokio-runtime-w".to_string(), 2, 5.0)
            ]
        );
        let one = Point {
            cores: 1,
            tps: 600.0,
            ..point.clone()
        };
        let (speedup, efficiency) = scaling(&[one, point.clone()], &point);
        assert!((speedup - 1000.0 / 600.0).abs() < 1e-9 && (efficiency - 1000.0 / 1200.0).abs() < 1e-9);
    }
}
