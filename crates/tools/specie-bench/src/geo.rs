//! `specie bench geo`: the cluster as Hamilton ran it (§6), one Raft replica of every group in
//! each of three regions, on one machine. Replica `i` of every group is in region `i`; sentinels
//! and the load generator are in region 0. Each region's members see the other regions' members
//! through in-process relays ([`relay`]) that hold every byte for half the round trip between
//! the two regions, each way (Hamilton's 12, 62 and 51 ms by default).
//!
//! One command makes two fresh clusters of the same shape and limits (`specie cluster up`). On
//! the first it runs `specie bench cluster`'s closed-loop swap load over loopback (the baseline).
//! The second is stopped as soon as it is up and every member restarted with its region's copy
//! of the cluster file (the other regions' addresses replaced by their relays'); the same load
//! runs on it. Both are reported beside Hamilton's latency (p50 < 500 ms, p99 < 1 s). See
//! docs/bench-cluster.md, "Geo-distributed run".

mod regions;
mod relay;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use specie_cluster::supervisor::{self, UpOptions};
use specie_cluster::{operator, Limits, Shape, Topology};

use crate::cluster::load::{run_load, LoadRun};
use crate::cluster::{shape_text, ClusterBenchOptions, LoadMode};
use crate::error::{BenchResult, StepContext};
use crate::{ensure_that, fail};

use self::regions::{region_topology, Placement, LOAD_REGION, REGIONS};
pub use self::regions::{RoundTrips, RoundTripsError};
use self::relay::{Relay, RelayLimits};

/// Hamilton's latency at its peak (§6.1): p50 under 500 ms, p99 under 1 s.
pub const HAMILTON_P50_MS: f64 = 500.0;
pub const HAMILTON_P99_MS: f64 = 1_000.0;

/// The smallest default window: `specie bench cluster`'s, which saturates the loopback cluster on
/// this machine.
pub const WINDOW_MIN_DEFAULT: usize = 20_000;
/// The throughput the default window's round-trip share is sized for (above the loopback
/// cluster's on 2 cores).
pub const WINDOW_TARGET_TPS: u64 = 100_000;
/// The largest window `--window` takes.
pub const WINDOW_MAX: usize = 1_000_000;
/// How long the members restarted behind the relays have to elect every group's leader.
const LEADERS_TIMEOUT: Duration = Duration::from_secs(60);
/// A member holding more memory than this stops the run: on a shared machine, a cluster that
/// cannot keep up must not take the machine's memory (Raft retries piled up to 5 GiB a member).
pub const MEMBER_RSS_BYTES_MAX: u64 = 2 << 30;
/// The deepest coordinator pipeline `--dtxns-in-flight` sets.
pub const DTXNS_IN_FLIGHT_MAX: u32 = 256;
/// Threads of the relays' runtime.
const RELAY_THREADS: usize = 2;

/// What `specie bench geo` runs.
#[derive(Clone, Debug)]
pub struct GeoOptions {
    /// Where to make the two clusters (`DIR/loopback`, `DIR/geo`: neither may exist); none: a
    /// temporary directory.
    pub dir: Option<PathBuf>,
    /// Keep the temporary directory at the end (it is removed otherwise).
    pub keep: bool,
    /// Seconds of load in each run, after its preload.
    pub seconds: f64,
    pub round_trips: RoundTrips,
    /// Transactions in flight in both runs; none: [`default_window`] of the cluster's limits.
    pub window: Option<usize>,
    pub shard_groups: usize,
    /// First port of each cluster (they run one after the other); none: a free range each.
    pub base_port: Option<u16>,
    /// Transactions per submission to the coordinator group.
    pub batch: usize,
    /// The cluster's `limits.dtxns_in_flight_max` (the coordinator's pipeline depth) in both
    /// runs; none: the cluster's default.
    pub dtxns_in_flight: Option<u32>,
    /// Place each group so that its leader (elected when the geo cluster first came up, and
    /// kept across the restart) is in this region; none: replica `i` in region `i`.
    pub leader_region: Option<usize>,
    /// Where each run's result.json and charts go [default: DIR/bench].
    pub out: Option<PathBuf>,
    pub json: bool,
}

/// The window that keeps the cluster busy across the regions, by Little's law: the swaps the
/// coordinators can hold in their dtxns (`dtxns_in_flight_max` × `batch_transactions_max`, per
/// coordinator group), plus what [`WINDOW_TARGET_TPS`] puts on the way during two of the longest
/// round trips (to a coordinator leader in the farthest region and back), rounded up to a
/// thousand and at least [`WINDOW_MIN_DEFAULT`]. More would only queue at the coordinator,
/// adding latency and no throughput.
pub fn default_window(round_trips: &RoundTrips, limits: &Limits, coordinator_groups: usize) -> usize {
    let pipeline = u64::from(limits.dtxns_in_flight_max) * u64::from(limits.batch_transactions_max);
    let on_the_way = WINDOW_TARGET_TPS * 2 * u64::from(round_trips.max_ms()) / 1_000;
    let window = (pipeline * coordinator_groups.max(1) as u64 + on_the_way).div_ceil(1_000) * 1_000;
    usize::try_from(window)
        .unwrap_or(WINDOW_MAX)
        .clamp(WINDOW_MIN_DEFAULT, WINDOW_MAX)
}

/// Set by SIGINT or SIGTERM: the load stops, and the cluster is stopped before the process exits.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// While it lives, SIGINT and SIGTERM only set [`INTERRUPTED`] (cleared at the start), so a
/// bench that started a cluster stops it before exiting; dropped, the previous dispositions
/// come back.
pub(crate) struct CaughtInterrupts {
    previous: [libc::sighandler_t; 2],
}

impl CaughtInterrupts {
    pub(crate) fn start() -> CaughtInterrupts {
        INTERRUPTED.store(false, Ordering::Relaxed);
        let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let previous = unsafe {
            [
                libc::signal(libc::SIGINT, handler),
                libc::signal(libc::SIGTERM, handler),
            ]
        };
        CaughtInterrupts { previous }
    }

    pub(crate) fn interrupted(&self) -> bool {
        INTERRUPTED.load(Ordering::Relaxed)
    }
}

impl Drop for CaughtInterrupts {
    fn drop(&mut self) {
        // SAFETY: puts back the dispositions `signal` returned in `start`.
        unsafe {
            libc::signal(libc::SIGINT, self.previous[0]);
            libc::signal(libc::SIGTERM, self.previous[1]);
        }
    }
}

/// One run's figures, as reported.
struct RunReport {
    run: LoadRun,
    /// The cluster's and the bench's CPU seconds during the load (the relays run in the bench).
    cluster_cpu_s: Option<f64>,
    bench_cpu_s: Option<f64>,
    /// Members not running when the run ended (killed, e.g. out of memory): an invalid run.
    members_died: Vec<String>,
}

impl RunReport {
    /// `run` on the cluster in `dir`, whose members are checked now.
    fn of(run: LoadRun, dir: &Path, path: &Path, topology: &Topology) -> RunReport {
        let cpu = run.cpu.as_ref();
        let members_died = members_died(dir, path, topology);
        if !members_died.is_empty() {
            eprintln!(
                "  WARNING: not running at the end of the run: {}",
                members_died.join(", ")
            );
        }
        RunReport {
            cluster_cpu_s: cpu.map(|c| c.by_role.values().sum()),
            bench_cpu_s: cpu.map(|c| c.bench_s),
            members_died,
            run,
        }
    }

    fn json(&self) -> serde_json::Value {
        let run = &self.run;
        serde_json::json!({
            "mean_tps": run.mean_tps, "peak_tps": run.peak_tps, "p50_ms": run.p50_ms, "p99_ms": run.p99_ms,
            "confirmed": run.confirmed_in_load, "preload_s": run.preload_s, "pool_missing": run.pool_missing,
            "cluster_cpu_s": self.cluster_cpu_s, "bench_cpu_s": self.bench_cpu_s,
            "other_processes_cpu_s": run.cpu.as_ref().map(|c| c.other_s),
            "per_second": run.confirmed_series, "result_file": run.result_file.display().to_string(),
            "members_died": self.members_died,
        })
    }
}

/// What the relays carried during the geo run.
struct RelayReport {
    relays: usize,
    connections: u64,
    refused: u64,
    bytes: u64,
}

/// The directory the two clusters live in (`ROOT/loopback`, `ROOT/geo`); the one running is
/// stopped (`cluster down`) when this is dropped, and a temporary root removed unless kept.
struct Clusters {
    root: PathBuf,
    /// The directory of the cluster that runs now.
    running: Option<PathBuf>,
    /// Last: removed after the processes stopped.
    _temporary: Option<tempfile::TempDir>,
}

impl Clusters {
    const NAMES: [&'static str; 2] = ["loopback", "geo"];

    fn new(root: Option<&Path>, keep: bool) -> BenchResult<Clusters> {
        let (root, temporary) = match root {
            Some(root) => {
                std::fs::create_dir_all(root).with_step(|| format!("cannot create {}", root.display()))?;
                (root.to_path_buf(), None)
            }
            None => {
                let mut temporary = tempfile::Builder::new().prefix("specie-bench-geo-").tempdir()?;
                temporary.disable_cleanup(keep);
                (temporary.path().to_path_buf(), Some(temporary))
            }
        };
        for name in Clusters::NAMES {
            let topology_file = root.join(name).join(supervisor::TOPOLOGY_FILE);
            ensure_that!(
                !topology_file.exists(),
                "{} exists: specie bench geo makes fresh clusters; give a new --dir",
                topology_file.display()
            );
        }
        Ok(Clusters {
            root,
            running: None,
            _temporary: temporary,
        })
    }

    fn stop(&mut self) -> BenchResult<()> {
        if let Some(dir) = self.running.take() {
            supervisor::down(&dir).step("`specie cluster down` failed")?;
        }
        Ok(())
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        let running = self.running.clone();
        if let Err(error) = self.stop() {
            eprintln!(
                "warning: {error}; stop the cluster with `specie cluster down --dir {}`",
                running.unwrap_or_default().display()
            );
        }
    }
}

pub fn run(options: GeoOptions) -> BenchResult<ExitCode> {
    ensure_that!(
        options.seconds > 0.0 && options.seconds <= 3_600.0,
        "--seconds must be above 0 and at most 3600"
    );
    ensure_that!(options.batch > 0, "--batch must be positive");
    ensure_that!(
        (1..=16).contains(&options.shard_groups),
        "--shard-groups must be 1 to 16"
    );
    ensure_that!(
        options.leader_region.is_none_or(|region| region < REGIONS),
        "--leader-region must be 0, 1 or 2"
    );
    ensure_that!(
        options.window.is_none_or(|window| (1..=WINDOW_MAX).contains(&window)),
        "--window must be 1 to {WINDOW_MAX}"
    );
    let mut clusters = Clusters::new(options.dir.as_deref(), options.keep)?;
    let out = options.out.clone().unwrap_or_else(|| clusters.root.join("bench"));
    // With --json, stdout carries only the object: the progress goes to stderr meanwhile.
    let redirected = options.json.then(StdoutToStderr::start).transpose()?;
    let caught = CaughtInterrupts::start();
    let measured = measure(&options, &mut clusters, &out);
    let stopped = clusters.stop();
    drop(redirected);
    drop(caught);
    let measured = measured?;
    stopped?;
    let report = Report {
        options: &options,
        root: &clusters.root,
        measured: &measured,
    };
    let json = report.json();
    std::fs::create_dir_all(&out).with_step(|| format!("cannot create {}", out.display()))?;
    std::fs::write(out.join("geo.json"), serde_json::to_string_pretty(&json)? + "\n")?;
    if options.json {
        println!("{json}");
    } else {
        report.print(&out);
        if options.keep || options.dir.is_some() {
            println!("  clusters kept in {}", clusters.root.display());
        } else if options.out.is_none() {
            println!("  (removed with the temporary directory now: give --out DIR or --keep to keep the files)");
        }
    }
    let runs = [&measured.loopback, &measured.geo];
    let valid = runs
        .iter()
        .all(|r| r.run.pool_missing == Some(0) && r.members_died.is_empty());
    Ok(if valid { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// What the two runs measured.
struct Measured {
    topology: Topology,
    /// Transactions in flight in both runs.
    window: usize,
    loopback: RunReport,
    geo: RunReport,
    /// Each group's leader's region when the geo run started.
    leaders: BTreeMap<String, usize>,
    relays: RelayReport,
}

/// Runs the load on a fresh cluster over loopback, then on another fresh cluster whose members
/// were restarted behind the relays.
fn measure(options: &GeoOptions, clusters: &mut Clusters, out: &Path) -> BenchResult<Measured> {
    let (dir, path, topology) = make_cluster(options, clusters, "loopback")?;
    let coordinator_groups = topology.coordinator_groups.len();
    let window =
        (options.window).unwrap_or_else(|| default_window(&options.round_trips, &topology.limits, coordinator_groups));
    println!(
        "\nspecie bench geo: {}; window {window}; {} s per run; limits.dtxns_in_flight_max {}\n  round trips {} \
         (Hamilton §6: Virginia–Ohio, Virginia–Oregon, Ohio–Oregon)\n\nloopback (the baseline, no relays):",
        shape_text(&topology),
        options.seconds,
        topology.limits.dtxns_in_flight_max,
        options.round_trips
    );
    let load = load_options(options, window, &dir, &out.join("loopback"));
    let loopback = RunReport::of(one_run(&load, &topology, &path)?, &dir, &path, &topology);
    clusters.stop()?;
    ensure_that!(!INTERRUPTED.load(Ordering::Relaxed), "interrupted");
    // A fresh cluster for the geo run, stopped as soon as it is up (its logs then hold only the
    // elections) and restarted behind the relays: no follower has a backlog to catch up on.
    // A restarted replica keeps a leadership it had (openraft restores its committed vote), so
    // the leaders elected now lead the geo run: --leader-region places them.
    let (dir, _, topology) = make_cluster(options, clusters, "geo")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RELAY_THREADS)
        .thread_name("geo-relay")
        .enable_all()
        .build()?;
    let elected = leader_ids(&runtime, &topology)?.step("a group of the new cluster has no leader")?;
    clusters.stop()?;
    let rotation = match options.leader_region {
        Some(region) => Placement::rotation_to(&replica_indexes(&topology, &elected), region),
        None => BTreeMap::new(),
    };
    let placement = Placement::of(&topology, &rotation)?;
    let relays = Relays::start(runtime, &placement, &options.round_trips)?;
    clusters.running = Some(dir.clone());
    let region_paths = write_region_files(&dir, &topology, &placement, &relays)?;
    let spawned = spawn_in_regions(&dir, &placement, &region_paths)?;
    let (near_path, near) = &region_paths[LOAD_REGION];
    let leaders = wait_for_leaders(&relays.runtime, near, &placement, &spawned)?;
    println!(
        "\ngeo ({} relays; leaders: {}):",
        relays.relays.len(),
        leaders_text(&leaders)
    );
    let load = load_options(options, window, &dir, &out.join("geo"));
    let geo = RunReport::of(one_run(&load, near, near_path)?, &dir, near_path, near);
    clusters.stop()?;
    let carried = relays.report();
    drop(relays);
    Ok(Measured {
        topology,
        window,
        loopback,
        geo,
        leaders,
        relays: carried,
    })
}

/// Makes and starts the fresh cluster `ROOT/NAME` (its `limits.dtxns_in_flight_max` set as
/// asked); returns its directory, cluster file and topology.
fn make_cluster(
    options: &GeoOptions,
    clusters: &mut Clusters,
    name: &str,
) -> BenchResult<(PathBuf, PathBuf, Topology)> {
    let dir = clusters.root.join(name);
    let mut shape = Shape {
        shard_groups: options.shard_groups,
        replicas: REGIONS,
        ..Shape::default()
    };
    shape.base_port = match options.base_port {
        Some(port) => port,
        None => crate::replicated::free_port_range(shape_processes(&shape))?,
    };
    clusters.running = Some(dir.clone());
    supervisor::up(&UpOptions {
        shape,
        ..UpOptions::with_defaults(&dir)
    })
    .step("`specie cluster up` failed")?;
    let (path, topology) = supervisor::load(&dir).step("cannot read the new cluster")?;
    let (path, topology) = match options.dtxns_in_flight {
        Some(depth) if depth != topology.limits.dtxns_in_flight_max => {
            set_dtxns_in_flight(&dir, &path, depth)?;
            supervisor::load(&dir).step("cannot read the new cluster")?
        }
        _ => (path, topology),
    };
    let heartbeat_ms = topology.limits.raft_heartbeat_ms;
    ensure_that!(
        u64::from(options.round_trips.max_ms()) * 2 < heartbeat_ms,
        "the longest round trip ({} ms) must be under half raft_heartbeat_ms ({heartbeat_ms} ms), Raft's \
         append time-out",
        options.round_trips.max_ms()
    );
    Ok((dir, path, topology))
}

/// The members of the cluster in `dir` that are not running (any that died during a run).
fn members_died(dir: &Path, path: &Path, topology: &Topology) -> Vec<String> {
    supervisor::members(path, topology)
        .into_iter()
        .filter(|m| !supervisor::read_pid(dir, &m.name).is_some_and(supervisor::is_alive))
        .map(|m| m.name)
        .collect()
}

/// Sets the cluster file's `limits.dtxns_in_flight_max` and restarts the cluster with it.
fn set_dtxns_in_flight(dir: &Path, path: &Path, depth: u32) -> BenchResult<()> {
    ensure_that!(
        (1..=DTXNS_IN_FLIGHT_MAX).contains(&depth),
        "--dtxns-in-flight must be 1 to {DTXNS_IN_FLIGHT_MAX}"
    );
    supervisor::down(dir).step("`specie cluster down` failed")?;
    let mut topology = Topology::load(path)?;
    topology.limits.dtxns_in_flight_max = depth;
    std::fs::write(path, topology.to_toml()).with_step(|| format!("cannot write {}", path.display()))?;
    println!("limits.dtxns_in_flight_max = {depth}: restarting the cluster");
    supervisor::up(&UpOptions::with_defaults(dir)).step("`specie cluster up` failed")?;
    Ok(())
}

/// Processes of a local cluster of `shape`: its replicas and sentinels (one port each).
pub(crate) fn shape_processes(shape: &Shape) -> usize {
    (shape.shard_groups + shape.coordinator_groups) * shape.replicas + shape.sentinels
}

/// `specie bench cluster`'s options for one closed-loop run of `window`, its files in `out`.
fn load_options(options: &GeoOptions, window: usize, dir: &Path, out: &Path) -> ClusterBenchOptions {
    ClusterBenchOptions {
        dir: dir.to_path_buf(),
        seconds: options.seconds,
        mode: LoadMode::Closed,
        window,
        rate: None,
        in_flight_max: window,
        kill_leader: vec![],
        restart_after: 0.0,
        // The generator's pool: at least twice what is in flight, as `bench cluster` requires.
        preload: (2 * window).max(200_000),
        batch: options.batch,
        out: Some(out.to_path_buf()),
        compare_transport: false,
        rounds: 2,
        settle: 0.0,
    }
}

/// One load on the running cluster of `topology`, its members' memory watched throughout.
fn one_run(load: &ClusterBenchOptions, topology: &Topology, path: &Path) -> BenchResult<LoadRun> {
    let out = load.out.as_deref().expect("set by load_options");
    std::fs::create_dir_all(out).with_step(|| format!("cannot create {}", out.display()))?;
    let pids: Vec<(String, u32)> = supervisor::members(path, topology)
        .into_iter()
        .filter_map(|m| supervisor::read_pid(&load.dir, &m.name).map(|pid| (m.name, pid)))
        .collect();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || watch_memory(&pids, &done))
    };
    let run = run_load(load, topology, path, out, Some(&INTERRUPTED));
    done.store(true, Ordering::Relaxed);
    let over = watcher.join().ok().flatten();
    if let Some((name, bytes)) = over {
        fail!(
            "{name} held {} MiB of memory, over the {} MiB this bench allows a member: run stopped (the cluster \
             could not keep up: see its logs)",
            bytes >> 20,
            MEMBER_RSS_BYTES_MAX >> 20
        );
    }
    run
}

/// Until `done`, checks every member's resident memory; the first over
/// [`MEMBER_RSS_BYTES_MAX`] stops the run (as Ctrl-C does) and is returned with its size.
fn watch_memory(pids: &[(String, u32)], done: &AtomicBool) -> Option<(String, u64)> {
    while !done.load(Ordering::Relaxed) {
        for (name, pid) in pids {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let rss_kib: u64 = status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            if rss_kib * 1024 > MEMBER_RSS_BYTES_MAX {
                INTERRUPTED.store(true, Ordering::Relaxed);
                return Some((name.clone(), rss_kib * 1024));
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    None
}

/// Every relay of the geo run, on their own runtime; dropping it closes them.
struct Relays {
    /// (target, region it serves) → relay.
    relays: HashMap<(SocketAddr, usize), Relay>,
    /// Last: shut down after the relays' tasks were aborted.
    runtime: tokio::runtime::Runtime,
}

impl Relays {
    /// Starts every relay `placement` needs on `runtime`.
    fn start(runtime: tokio::runtime::Runtime, placement: &Placement, round_trips: &RoundTrips) -> BenchResult<Relays> {
        let mut relays = HashMap::new();
        for (target, region, from) in placement.relays_needed() {
            let delay = round_trips.one_way_delay(region, from);
            let relay = runtime
                .block_on(Relay::start(target, delay, RelayLimits::default()))
                .with_step(|| format!("cannot start the relay to {target} for region {from}"))?;
            assert_eq!((relay.target, relay.delay), (target, delay));
            relays.insert((target, from), relay);
        }
        Ok(Relays { relays, runtime })
    }

    fn addresses(&self) -> HashMap<(SocketAddr, usize), SocketAddr> {
        self.relays.iter().map(|(&key, relay)| (key, relay.address)).collect()
    }

    fn report(&self) -> RelayReport {
        let sum = |count: fn(&Relay) -> u64| self.relays.values().map(count).sum();
        RelayReport {
            relays: self.relays.len(),
            connections: sum(|r| r.counters.connections_accepted.load(Ordering::Relaxed)),
            refused: sum(|r| r.counters.connections_refused.load(Ordering::Relaxed)),
            bytes: sum(|r| r.counters.bytes_relayed.load(Ordering::Relaxed)),
        }
    }
}

/// Writes `DIR/cluster-region-R.toml` for each region; returns each one's path and topology.
fn write_region_files(
    dir: &Path,
    topology: &Topology,
    placement: &Placement,
    relays: &Relays,
) -> BenchResult<Vec<(PathBuf, Topology)>> {
    let relay_of = relays.addresses();
    let mut files = Vec::with_capacity(REGIONS);
    for region in 0..REGIONS {
        let copy = region_topology(topology, placement, region, &relay_of)?;
        let path = dir.join(format!("cluster-region-{region}.toml"));
        std::fs::write(&path, copy.to_toml()).with_step(|| format!("cannot write {}", path.display()))?;
        // What the members will read: it must load, and be what was written.
        let loaded = Topology::load(&path)?;
        assert_eq!(loaded, copy);
        files.push((std::fs::canonicalize(&path)?, copy));
    }
    Ok(files)
}

/// Starts each region's members with its region's cluster file; returns (name, pid) of each.
fn spawn_in_regions(
    dir: &Path,
    placement: &Placement,
    region_paths: &[(PathBuf, Topology)],
) -> BenchResult<Vec<(String, u32)>> {
    let mut spawned = vec![];
    for (region, (path, topology)) in region_paths.iter().enumerate() {
        for member in supervisor::members(path, topology) {
            if placement.region_of(&member)? == region {
                let pid =
                    supervisor::spawn_member(dir, &member).with_step(|| format!("cannot start {}", member.name))?;
                spawned.push((member.name, pid));
            }
        }
    }
    assert_eq!(spawned.len(), placement.member_region.len());
    Ok(spawned)
}

/// Each group's leader's replica id, asking `topology`'s replicas; none unless every group has
/// one.
fn leader_ids(runtime: &tokio::runtime::Runtime, topology: &Topology) -> BenchResult<Option<BTreeMap<String, u64>>> {
    let statuses = runtime
        .block_on(operator::replica_statuses(topology, None, Duration::from_secs(1)))
        .step("cannot ask the replicas for their status")?;
    let groups: BTreeSet<&String> = statuses.iter().map(|s| &s.group).collect();
    let leaders: BTreeMap<String, u64> = (statuses.iter().filter(|s| s.is_leader()))
        .map(|s| (s.group.clone(), s.id))
        .collect();
    Ok((leaders.len() == groups.len()).then_some(leaders))
}

/// The index in its group's list of each group's replica `ids[group]`.
fn replica_indexes(topology: &Topology, ids: &BTreeMap<String, u64>) -> BTreeMap<String, usize> {
    let groups = (topology.shard_groups.iter().map(|g| (&g.name, &g.replicas)))
        .chain(topology.coordinator_groups.iter().map(|g| (&g.name, &g.replicas)));
    groups
        .filter_map(|(name, replicas)| {
            let id = ids.get(name)?;
            Some((name.clone(), replicas.iter().position(|r| r.id == *id)?))
        })
        .collect()
}

/// Waits until every group has a leader (asking through region 0's relays); returns each
/// group's leader's region.
fn wait_for_leaders(
    runtime: &tokio::runtime::Runtime,
    topology: &Topology,
    placement: &Placement,
    spawned: &[(String, u32)],
) -> BenchResult<BTreeMap<String, usize>> {
    let started = Instant::now();
    loop {
        if let Some((name, _)) = spawned.iter().find(|(_, pid)| !supervisor::is_alive(*pid)) {
            fail!("{name} exited as it started behind the relays; see its log in the cluster's logs/");
        }
        ensure_that!(!INTERRUPTED.load(Ordering::Relaxed), "interrupted");
        if let Some(leaders) = leader_ids(runtime, topology)? {
            println!(
                "every group has a leader {:.1} s after the restart",
                started.elapsed().as_secs_f64()
            );
            let region =
                |group: &String, id: &u64| placement.replica_region.get(group).and_then(|r| r.get(id)).copied();
            return Ok((leaders.iter())
                .map(|(group, id)| (group.clone(), region(group, id).unwrap_or(usize::MAX)))
                .collect());
        }
        ensure_that!(
            started.elapsed() < LEADERS_TIMEOUT,
            "not every group has a leader {} s after the restart behind the relays",
            LEADERS_TIMEOUT.as_secs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn leaders_text(leaders: &BTreeMap<String, usize>) -> String {
    let each: Vec<String> = leaders
        .iter()
        .map(|(group, region)| format!("{group} in r{region}"))
        .collect();
    each.join(", ")
}

/// What `specie bench geo` prints and writes.
struct Report<'a> {
    options: &'a GeoOptions,
    root: &'a Path,
    measured: &'a Measured,
}

impl Report<'_> {
    fn ratio(&self) -> Option<f64> {
        let (loopback, geo) = (&self.measured.loopback.run, &self.measured.geo.run);
        (loopback.mean_tps > 0.0).then(|| geo.mean_tps / loopback.mean_tps)
    }

    fn print(&self, out: &Path) {
        let measured = self.measured;
        let (loopback, geo) = (&measured.loopback.run, &measured.geo.run);
        let limits = &measured.topology.limits;
        println!(
            "\nspecie bench geo: {}, one replica of each group in each region ({}), the load in region 0",
            shape_text(&measured.topology),
            match self.options.leader_region {
                Some(region) => format!("rotated to put the leaders in r{region}"),
                None => "replica i in region i".to_string(),
            }
        );
        println!(
            "  round trips: {}; closed loop, window {}, {} s per run; limits.dtxns_in_flight_max {} × \
             batch_transactions_max {}",
            self.options.round_trips,
            self.measured.window,
            self.options.seconds,
            limits.dtxns_in_flight_max,
            limits.batch_transactions_max
        );
        let row =
            |what: &str, a: String, b: String, hamilton: &str| println!("  {what:<24} {a:>12} {b:>12} {hamilton:>14}");
        row("", "loopback".into(), "geo".into(), "Hamilton §6.1");
        row(
            "mean tx/s",
            format!("{:.0}", loopback.mean_tps),
            format!("{:.0}", geo.mean_tps),
            "",
        );
        row("peak tx/s", loopback.peak_tps.to_string(), geo.peak_tps.to_string(), "");
        row(
            "p50 latency, ms",
            format!("{:.0}", loopback.p50_ms),
            format!("{:.0}", geo.p50_ms),
            "< 500",
        );
        row(
            "p99 latency, ms",
            format!("{:.0}", loopback.p99_ms),
            format!("{:.0}", geo.p99_ms),
            "< 1000",
        );
        let little = |tps: f64| match tps > 0.0 {
            true => format!("{:.0}", 1_000.0 * self.measured.window as f64 / tps),
            false => "-".into(),
        };
        row("window ÷ tx/s, ms", little(loopback.mean_tps), little(geo.mean_tps), "");
        let cpu = |report: &RunReport| {
            (report.cluster_cpu_s.zip(report.bench_cpu_s)).map_or("-".into(), |(c, b)| format!("{c:.1} + {b:.1}"))
        };
        row(
            "CPU s, cluster + bench",
            cpu(&measured.loopback),
            cpu(&measured.geo),
            "",
        );
        match self.ratio() {
            Some(ratio) => println!("  geo / loopback throughput: {ratio:.2}"),
            None => println!("  geo / loopback throughput: - (nothing confirmed over loopback)"),
        }
        println!(
            "  geo: p50 {} {HAMILTON_P50_MS:.0} ms, p99 {} {HAMILTON_P99_MS:.0} ms (Hamilton's bounds)",
            if geo.p50_ms < HAMILTON_P50_MS {
                "under"
            } else {
                "NOT under"
            },
            if geo.p99_ms < HAMILTON_P99_MS {
                "under"
            } else {
                "NOT under"
            }
        );
        println!("  leaders in the geo run: {}", leaders_text(&measured.leaders));
        let relays = &measured.relays;
        println!(
            "  relays: {}, {} connections ({} refused), {:.1} MB carried",
            relays.relays,
            relays.connections,
            relays.refused,
            relays.bytes as f64 / 1e6
        );
        for (name, run) in [("loopback", &measured.loopback), ("geo", &measured.geo)] {
            if !run.members_died.is_empty() {
                println!(
                    "  INVALID {name} run: not running at its end: {}",
                    run.members_died.join(", ")
                );
            }
        }
        println!("  wrote {}", out.join("geo.json").display());
    }

    fn json(&self) -> serde_json::Value {
        let measured = self.measured;
        let trips = &self.options.round_trips;
        let relays = &measured.relays;
        let geo = &measured.geo.run;
        serde_json::json!({
            "cluster": crate::cluster::load::cluster_json(self.root, &measured.topology),
            "dtxns_in_flight_max": measured.topology.limits.dtxns_in_flight_max,
            "regions": REGIONS,
            "rtt_ms": {"r0_r1": trips.r0_r1_ms, "r0_r2": trips.r0_r2_ms, "r1_r2": trips.r1_r2_ms},
            "seconds": self.options.seconds,
            "window": self.measured.window,
            "loopback": measured.loopback.json(),
            "geo": measured.geo.json(),
            "geo_over_loopback": self.ratio(),
            "leader_region": measured.leaders,
            "leader_region_asked": self.options.leader_region,
            "relays": {"count": relays.relays, "connections": relays.connections, "refused": relays.refused, "bytes": relays.bytes},
            "hamilton": {"p50_ms_max": HAMILTON_P50_MS, "p99_ms_max": HAMILTON_P99_MS},
            "within_hamilton": geo.p50_ms < HAMILTON_P50_MS && geo.p99_ms < HAMILTON_P99_MS,
            "machine_threads": std::thread::available_parallelism().map_or(0, |n| n.get()),
        })
    }
}

/// While alive, what this process writes to stdout goes to stderr (with `--json`, stdout then
/// carries only the object). Restores stdout when dropped.
struct StdoutToStderr {
    saved: libc::c_int,
}

impl StdoutToStderr {
    fn start() -> BenchResult<StdoutToStderr> {
        std::io::stdout().flush()?;
        // SAFETY: dup has no preconditions; a negative result is checked.
        let saved = unsafe { libc::dup(libc::STDOUT_FILENO) };
        if saved < 0 {
            return Err(std::io::Error::last_os_error()).step("cannot save stdout");
        }
        // SAFETY: both descriptors are open; dup2 replaces descriptor 1 atomically.
        if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
            let error = std::io::Error::last_os_error();
            // SAFETY: `saved` is the descriptor dup returned above, closed once.
            unsafe { libc::close(saved) };
            return Err(error).step("cannot send stdout to stderr");
        }
        Ok(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        // SAFETY: `saved` is open (from dup in `start`) and closed only here, after it is put back.
        unsafe {
            libc::dup2(self.saved, libc::STDOUT_FILENO);
            libc::close(self.saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_window_grows_with_the_longest_round_trip_and_the_pipeline() {
        let limits = Limits::default();
        let hamilton = default_window(&RoundTrips::HAMILTON, &limits, 1);
        assert_eq!(hamilton % 1_000, 0);
        let near: RoundTrips = "1,1,1".parse().unwrap();
        let far: RoundTrips = "400,400,400".parse().unwrap();
        assert_eq!(default_window(&near, &limits, 1), WINDOW_MIN_DEFAULT);
        assert!(hamilton < default_window(&far, &limits, 1));
        let deeper = Limits {
            dtxns_in_flight_max: 4 * limits.dtxns_in_flight_max,
            ..limits.clone()
        };
        assert!(hamilton < default_window(&RoundTrips::HAMILTON, &deeper, 1));
        assert!(default_window(&RoundTrips::HAMILTON, &deeper, 1) < default_window(&RoundTrips::HAMILTON, &deeper, 2));
        let huge = Limits {
            dtxns_in_flight_max: u32::MAX,
            ..limits
        };
        assert_eq!(default_window(&far, &huge, 64), WINDOW_MAX);
    }
}
