//! `specie bench postgres`: the PostgreSQL baseline of Hamilton §6.1, beside specie's own swap
//! throughput measured in the same run.
//!
//! PostgreSQL gets the workload of `specie bench swap`: compact 2-in/2-out swaps over a set of
//! 32-byte UHS ids, no signature checks, every commit durable (fsync, synchronous commit and full
//! page writes on). Each swap is one call of a stored function, one transaction, issued closed-loop
//! by C client connections that each spend only ids they own, so no two transactions conflict. The
//! server is a throwaway cluster in a temporary directory, stopped and deleted when the command
//! ends, fails or is interrupted. docs/bench-postgres.md describes the settings and the results.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::Args;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};

use crate::bench::{measure_swap, SwapParams, SwapReport};
use crate::bench_replicated::{measure_replicated, ReplicatedParams, ReplicatedReport};

/// A UHS id as stored in PostgreSQL (`bytea`, always 32 bytes here).
type Id = [u8; 32];

/// Most client connections one level may open.
const MAX_CLIENTS: usize = 1000;
/// The superuser role `initdb` creates and the clients connect as (trust authentication, local only).
const ROLE: &str = "specie";
/// Where Debian and Ubuntu install the server binaries, one directory per major version.
const DEBIAN_PG_LIB: &str = "/usr/lib/postgresql";
const INSTALL: &str = "install PostgreSQL first (Debian/Ubuntu, as root): `apt-get update && apt-get install -y \
     postgresql`, or pass --pg-bin DIR naming the directory that holds initdb, pg_ctl and postgres";
const SPECIE_EMBEDDED_REPLICATION: &str = "none (embedded, single copy)";

/// `swap` as a stored function: spends every id in `spent` (all must be present and distinct, or
/// the whole transaction is refused with SQLSTATE P0002 and nothing changes) and creates `created`
/// (an id already present is refused with 23505, unique_violation).
const SCHEMA: &str = "
CREATE TABLE uhs (id bytea NOT NULL);
CREATE FUNCTION swap(spent bytea[], created bytea[]) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    removed bigint;
BEGIN
    DELETE FROM uhs WHERE id = ANY (spent);
    GET DIAGNOSTICS removed = ROW_COUNT;
    IF removed IS DISTINCT FROM cardinality(spent) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'no_data_found',
            MESSAGE = format('swap refused: %s of %s spent ids are not in the UHS',
                             coalesce(cardinality(spent), 0) - removed, cardinality(spent));
    END IF;
    INSERT INTO uhs (id) SELECT unnest(created);
    RETURN true;
END
$$;
";

/// Client connection counts to try, ascending, without repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientLevels(pub Vec<usize>);

#[derive(Args, Debug)]
pub struct PostgresArgs {
    /// Seconds to measure specie, and PostgreSQL at each client count (after a short warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// UHS ids preloaded into each system before measuring.
    #[arg(long, default_value_t = 1_000_000)]
    pub preload: usize,
    /// PostgreSQL client connections to try, comma-separated; the best level is the figure.
    #[arg(long, default_value = "16,32,64,128,256", value_parser = parse_clients)]
    pub clients: ClientLevels,
    /// Seconds of uncounted swaps at the largest client count before the first level: they
    /// absorb the full-page images PostgreSQL logs on each page's first change after the
    /// preload's checkpoint, which would otherwise all be charged to the first level.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Directory holding initdb, pg_ctl and postgres [default: the one on PATH, else the newest
    /// /usr/lib/postgresql/*/bin].
    #[arg(long)]
    pub pg_bin: Option<PathBuf>,
    /// System user the throwaway server runs as when this command runs as root (PostgreSQL
    /// refuses to run as root).
    #[arg(long, default_value = "postgres")]
    pub pg_user: String,
    /// PostgreSQL commit_delay in microseconds (group commit: durability unchanged).
    #[arg(long, default_value_t = 0)]
    pub commit_delay: u32,
    /// Shards of specie's embedded node (as `bench swap --shards`), and shard groups of the
    /// replicated cluster.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Replicas per group of the replicated cluster (3 = three-way replication, as Hamilton's
    /// comparison); 0 measures the embedded node only.
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    /// specie compact transactions in flight, as `bench swap --window` and `bench cluster --window`.
    #[arg(long, default_value_t = 20_000)]
    pub window: usize,
    #[arg(long)]
    pub json: bool,
}

/// Parses `--clients`: a comma-separated list of connection counts, each 1..=MAX_CLIENTS.
pub fn parse_clients(text: &str) -> Result<ClientLevels, String> {
    let mut levels = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let count: usize = part
            .parse()
            .map_err(|_| format!("`{part}` is not a client count (expected e.g. 8,16,32,64)"))?;
        if count == 0 || count > MAX_CLIENTS {
            return Err(format!(
                "client counts must be between 1 and {MAX_CLIENTS}, not {count}"
            ));
        }
        levels.push(count);
    }
    levels.sort_unstable();
    levels.dedup();
    Ok(ClientLevels(levels))
}

/// Deals `items` round-robin into `parts` disjoint sets whose sizes differ by at most one.
pub fn partition<T>(items: Vec<T>, parts: usize) -> Vec<Vec<T>> {
    assert!(parts > 0, "partition into no parts");
    let mut out: Vec<Vec<T>> = (0..parts)
        .map(|_| Vec::with_capacity(items.len() / parts + 1))
        .collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % parts].push(item);
    }
    out
}

/// The directory name with the highest version number (`15` > `9.6`); others are ignored.
fn newest_version(names: impl IntoIterator<Item = String>) -> Option<String> {
    names
        .into_iter()
        .filter_map(|name| {
            let key: Option<Vec<u32>> = name.split('.').map(|part| part.parse().ok()).collect();
            Some((key?, name))
        })
        .max()
        .map(|(_, name)| name)
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// postgresql.conf settings: the usual benchmarking recommendations (memory sized to the machine,
/// no checkpoint inside a measurement), every durability setting left on.
fn server_settings(max_clients: usize, ram_bytes: Option<u64>, commit_delay_us: u32) -> Vec<(&'static str, String)> {
    const MIB: u64 = 1 << 20;
    let ram = ram_bytes.unwrap_or(4096 * MIB);
    let shared_buffers_mib = (ram / 4 / MIB).clamp(128, 16 * 1024);
    let effective_cache_mib = (ram / 2 / MIB).max(256);
    vec![
        // Durability: every commit reaches the disk before the client hears of it.
        ("fsync", "on".into()),
        ("synchronous_commit", "on".into()),
        ("full_page_writes", "on".into()),
        // Group commit: a committing backend may wait this long for others to share its WAL flush.
        ("commit_delay", commit_delay_us.to_string()),
        ("commit_siblings", "5".into()),
        // Memory and connections.
        ("max_connections", (max_clients + 10).to_string()),
        ("shared_buffers", format!("{shared_buffers_mib}MB")),
        ("effective_cache_size", format!("{effective_cache_mib}MB")),
        ("wal_buffers", "64MB".into()),
        ("maintenance_work_mem", "1GB".into()),
        // No checkpoint forced inside a measurement (one runs after the preload).
        ("max_wal_size", "16GB".into()),
        ("min_wal_size", "1GB".into()),
        ("checkpoint_timeout", "30min".into()),
        ("checkpoint_completion_target", "0.9".into()),
        // A single server without replicas or archiving: minimal WAL (still crash safe) lets the
        // preload skip the WAL.
        ("wal_level", "minimal".into()),
        ("max_wal_senders", "0".into()),
        // Single-row plans: never worth compiling.
        ("jit", "off".into()),
    ]
}

pub fn run(args: PostgresArgs) -> anyhow::Result<ExitCode> {
    ensure!(args.seconds > 0.0, "--seconds must be positive");
    ensure!(args.warmup >= 0.0, "--warmup must not be negative");
    let levels = args.clients.0.clone();
    let max_clients = *levels.iter().max().context("--clients is empty")?;
    ensure!(
        args.preload >= (2 * max_clients).max(4),
        "--preload must give every client at least two ids: at least {}",
        (2 * max_clients).max(4)
    );
    // Fail fast, before the specie half runs, if PostgreSQL cannot be started here.
    let bin = locate_binaries(args.pg_bin.as_deref())?;
    let run_as = RunAs::detect(&args.pg_user)?;

    eprintln!(
        "specie: preloading {} ids, then {} s of 2-in/2-out swaps ({} shards, fsync on)",
        args.preload, args.seconds, args.shards
    );
    let specie = measure_swap(&SwapParams {
        seconds: args.seconds,
        shards: args.shards,
        preload: args.preload,
        window: args.window,
        fsync: true,
    })?;
    eprintln!("specie embedded: {:.0} tx/s", specie.tps);

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // From here on SIGINT and SIGTERM end the command through the error path, so the clusters
    // are stopped and deleted. The PostgreSQL server runs in its own process group: a terminal's
    // Ctrl-C does not reach it directly. specie's benchmark cluster does get it, ends its run
    // with an error, and is stopped the same way.
    let (mut sigint, mut sigterm) = {
        use tokio::signal::unix::{signal, SignalKind};
        let _entered = runtime.enter();
        (signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?)
    };
    let replicated = if args.replicas == 0 {
        None
    } else {
        eprintln!(
            "specie replicated: a local cluster of {} shard groups and 1 coordinator group, {} replicas each (Raft, fsync on)",
            args.shards, args.replicas
        );
        let report = measure_replicated(&ReplicatedParams {
            seconds: args.seconds,
            shard_groups: args.shards,
            replicas: args.replicas,
            preload: args.preload,
            window: args.window,
        })?;
        eprintln!("specie replicated: {:.0} tx/s", report.tps);
        Some(report)
    };
    let interrupted = runtime.block_on(async {
        tokio::select! {
            biased;
            _ = sigint.recv() => true,
            _ = sigterm.recv() => true,
            () = std::future::ready(()) => false,
        }
    });
    ensure!(!interrupted, "interrupted");
    let ram = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .as_deref()
        .and_then(mem_total);
    let settings = server_settings(max_clients, ram, args.commit_delay);
    eprintln!(
        "postgres: starting a throwaway cluster ({}, {})",
        bin.display(),
        run_as.describe()
    );
    let cluster = Cluster::start(&bin, run_as, &settings)?;
    let mut config = tokio_postgres::Config::new();
    config
        .host_path(&cluster.socket_dir)
        .port(cluster.port)
        .user(ROLE)
        .dbname("postgres");
    let outcome = runtime.block_on(async {
        tokio::select! {
            biased;
            _ = sigint.recv() => bail!("interrupted"),
            _ = sigterm.recv() => bail!("terminated"),
            report = postgres_phase(&config, args.preload, &levels, args.seconds, args.warmup) => report,
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(cluster);
    let postgres = outcome?;
    report(&args, &specie, replicated.as_ref(), &postgres, &settings);
    Ok(ExitCode::SUCCESS)
}

/// The headline compares PostgreSQL with specie replicated three ways (Hamilton's comparison)
/// when that was measured, else with the embedded node; both specie figures are printed.
fn report(
    args: &PostgresArgs,
    embedded: &SwapReport,
    replicated: Option<&ReplicatedReport>,
    postgres: &PostgresReport,
    settings: &[(&str, String)],
) {
    let best = postgres
        .levels
        .iter()
        .max_by(|a, b| a.tps.total_cmp(&b.tps))
        .expect("at least one level");
    let replication = match replicated {
        Some(_) => format!(
            "{}-way Raft per group ({} shard groups, 1 coordinator group), fsync on every replica",
            args.replicas, args.shards
        ),
        None => SPECIE_EMBEDDED_REPLICATION.to_string(),
    };
    let (specie_tps, specie_p50, specie_p99, specie_confirmed) = match replicated {
        Some(r) => (r.tps, r.latency_ms_p50, r.latency_ms_p99, r.confirmed),
        None => (
            embedded.tps,
            embedded.latency_ms_p50,
            embedded.latency_ms_p99,
            embedded.confirmed,
        ),
    };
    let ratio = specie_tps / best.tps;
    let ratio_embedded = embedded.tps / best.tps;
    if args.json {
        let levels: Vec<_> = postgres
            .levels
            .iter()
            .map(|level| {
                serde_json::json!({
                    "clients": level.clients,
                    "tps": level.tps,
                    "swaps": level.swaps,
                    "latency_ms_p50": level.latency_ms_p50,
                    "latency_ms_p99": level.latency_ms_p99,
                })
            })
            .collect();
        let settings: serde_json::Map<String, serde_json::Value> = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone().into()))
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "workload": "compact 2-in/2-out swaps, no signature checks, non-conflicting, fsync on",
                "preload": args.preload,
                "seconds": args.seconds,
                "postgres_warmup_s": args.warmup,
                "postgres_level_warmup_s": level_warmup(args.seconds).as_secs_f64(),
                "specie_tps": specie_tps,
                "postgres_tps": best.tps,
                "ratio": ratio,
                "specie_replication": replication,
                "specie_replicas": args.replicas,
                "specie_shards": args.shards,
                "specie_window": args.window,
                "specie_confirmed": specie_confirmed,
                "specie_latency_ms_p50": specie_p50,
                "specie_latency_ms_p99": specie_p99,
                "specie_embedded_tps": embedded.tps,
                "specie_embedded_latency_ms_p50": embedded.latency_ms_p50,
                "specie_embedded_latency_ms_p99": embedded.latency_ms_p99,
                "ratio_embedded": ratio_embedded,
                "postgres_best_clients": best.clients,
                "postgres_levels": levels,
                "postgres_version": postgres.version,
                "postgres_settings": settings,
                "postgres_replication": "none (single server)",
                "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            })
        );
        return;
    }
    println!(
        "swap throughput: compact 2-in/2-out, no signature checks, {} ids preloaded, fsync on, {} s per figure",
        args.preload, args.seconds
    );
    println!(
        "  specie 2PC, {} shards, embedded          {:>9.0} tx/s   p50 {:.1} ms, p99 {:.1} ms",
        args.shards, embedded.tps, embedded.latency_ms_p50, embedded.latency_ms_p99
    );
    if let Some(r) = replicated {
        println!(
            "  specie 2PC, {} shard groups, {}-way Raft  {:>9.0} tx/s   p50 {:.1} ms, p99 {:.1} ms",
            args.shards, args.replicas, r.tps, r.latency_ms_p50, r.latency_ms_p99
        );
    }
    println!(
        "  PostgreSQL {}, stored function swap(), one call per transaction:",
        postgres.version
    );
    for level in &postgres.levels {
        println!(
            "    {:>4} clients                           {:>9.0} tx/s   p50 {:.1} ms, p99 {:.1} ms{}",
            level.clients,
            level.tps,
            level.latency_ms_p50,
            level.latency_ms_p99,
            if level.clients == best.clients { "  <- best" } else { "" }
        );
    }
    println!(
        "  ratio specie / PostgreSQL = {ratio:.1}x ({specie_tps:.0} / {:.0} tx/s at {} clients); specie replication: {replication}",
        best.tps, best.clients
    );
    if replicated.is_some() {
        println!("  ratio with specie embedded (no replication) = {ratio_embedded:.1}x");
    }
    println!(
        "  PostgreSQL: a single server, no replication; Hamilton's 26x (target >= 30x) is with three-way replication"
    );
}

/// Finds initdb, pg_ctl and postgres: `--pg-bin`, else PATH, else the newest Debian/Ubuntu install.
fn locate_binaries(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        ensure!(
            has_server_binaries(dir),
            "--pg-bin {} does not hold initdb, pg_ctl and postgres: {INSTALL}",
            dir.display()
        );
        return Ok(dir.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            // pg_ctl starts the postgres beside its real path: follow symbolic links.
            let Ok(initdb) = dir.join("initdb").canonicalize() else {
                continue;
            };
            if let Some(real_dir) = initdb.parent().filter(|d| has_server_binaries(d)) {
                return Ok(real_dir.to_path_buf());
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(DEBIAN_PG_LIB) {
        let versions = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| has_server_binaries(&Path::new(DEBIAN_PG_LIB).join(name).join("bin")));
        if let Some(newest) = newest_version(versions) {
            return Ok(Path::new(DEBIAN_PG_LIB).join(newest).join("bin"));
        }
    }
    bail!("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or in {DEBIAN_PG_LIB}/*/bin: {INSTALL}")
}

fn has_server_binaries(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"]
        .iter()
        .all(|name| dir.join(name).is_file())
}

/// Numeric output of `id ARGS`.
fn id(args: &[&str]) -> anyhow::Result<u32> {
    let output = Command::new("id")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run `id`")?;
    ensure!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().parse()?)
}

/// Who runs the server's programs: this process's user, or (as root) another one through runuser.
struct RunAs {
    user: Option<SystemUser>,
}

struct SystemUser {
    name: String,
    uid: u32,
    gid: u32,
    runuser: PathBuf,
}

/// `name` on PATH, else in the system directories (which a root PATH may leave out).
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

impl RunAs {
    fn detect(pg_user: &str) -> anyhow::Result<RunAs> {
        if id(&["-u"])? != 0 {
            return Ok(RunAs { user: None });
        }
        let lookup = |flag: &str| {
            id(&[flag, pg_user]).with_context(|| {
                format!(
                    "this command runs as root, PostgreSQL refuses to, so the throwaway server runs as the system \
                     user `{pg_user}` (--pg-user), which was not found; create it (the postgresql package does) with \
                     `useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {pg_user}`, \
                     pass --pg-user NAME, or run as a user other than root"
                )
            })
        };
        let (uid, gid) = (lookup("-u")?, lookup("-g")?);
        ensure!(
            uid != 0,
            "--pg-user {pg_user} is root: PostgreSQL refuses to run as root"
        );
        let runuser = find_program("runuser").context(
            "this command runs as root and needs runuser (util-linux) to start PostgreSQL as --pg-user: not found",
        )?;
        Ok(RunAs {
            user: Some(SystemUser {
                name: pg_user.to_string(),
                uid,
                gid,
                runuser,
            }),
        })
    }

    fn command(&self, program: &Path) -> Command {
        let mut command = match &self.user {
            Some(user) => {
                let mut command = Command::new(&user.runuser);
                command.args(["-u", &user.name, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        };
        command.stdin(Stdio::null()).process_group(0);
        command
    }

    fn describe(&self) -> String {
        match &self.user {
            Some(user) => format!("as user {} through runuser", user.name),
            None => "as the current user".to_string(),
        }
    }
}

/// Runs `command` to completion; its output becomes the error if it fails.
fn run_checked(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command.output().with_context(|| format!("cannot run {what}"))?;
    ensure!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// A throwaway PostgreSQL cluster in a temporary directory: stopped, then deleted, when dropped.
struct Cluster {
    bin: PathBuf,
    run_as: RunAs,
    data: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    /// A start was attempted, so drop must stop the server.
    started: bool,
    /// Last field: removed after `Drop::drop` has stopped the server.
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start(bin: &Path, run_as: RunAs, settings: &[(&str, String)]) -> anyhow::Result<Cluster> {
        let dir = tempfile::Builder::new()
            .prefix("specie-bench-pg-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        if let Some(user) = &run_as.user {
            std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))
                .with_context(|| format!("cannot give {} to {}", dir.path().display(), user.name))?;
        }
        let mut cluster = Cluster {
            bin: bin.to_path_buf(),
            run_as,
            data: dir.path().join("data"),
            socket_dir: dir.path().to_path_buf(),
            port: 0,
            started: false,
            dir,
        };
        run_checked(
            cluster.command("initdb").arg("-D").arg(&cluster.data).args([
                "-U",
                ROLE,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ]),
            "initdb",
        )?;
        cluster.port = free_port()?;
        let conf_path = cluster.data.join("postgresql.conf");
        let mut conf = OpenOptions::new()
            .append(true)
            .open(&conf_path)
            .with_context(|| format!("cannot open {}", conf_path.display()))?;
        writeln!(conf, "\n# specie bench postgres")?;
        let socket_dir = cluster.socket_dir.display().to_string();
        let local = [
            ("listen_addresses", "127.0.0.1".to_string()),
            ("port", cluster.port.to_string()),
            ("unix_socket_directories", socket_dir),
        ];
        for (name, value) in settings.iter().cloned().chain(local) {
            writeln!(conf, "{name} = '{}'", value.replace('\'', "''"))?;
        }
        drop(conf);
        cluster.started = true;
        let log = cluster.dir.path().join("postgres.log");
        let started = run_checked(
            cluster
                .command("pg_ctl")
                .arg("-D")
                .arg(&cluster.data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "120", "start"]),
            "pg_ctl start",
        );
        if let Err(error) = started {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(error.context(format!("the server did not start; its log:\n{log}")));
        }
        Ok(cluster)
    }

    fn command(&self, program: &str) -> Command {
        let mut command = self.run_as.command(&self.bin.join(program));
        command.current_dir(self.dir.path());
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        // Immediate: the data is deleted next, so no shutdown checkpoint is worth waiting for.
        let stopped = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "-t", "60", "stop"])
            .output()
            .is_ok_and(|output| output.status.success());
        let pid_file = self.data.join("postmaster.pid");
        if !stopped && pid_file.exists() {
            let pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
            let pid = pid.lines().next().unwrap_or("").trim().to_string();
            eprintln!("warning: pg_ctl stop failed; killing postmaster {pid}");
            if !pid.is_empty() {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

struct PostgresReport {
    version: String,
    levels: Vec<Level>,
}

struct Level {
    clients: usize,
    tps: f64,
    swaps: u64,
    latency_ms_p50: f64,
    latency_ms_p99: f64,
}

async fn connect(config: &tokio_postgres::Config) -> anyhow::Result<Client> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .context("cannot connect to the benchmark server")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Schema and preload, a check of `swap`'s refusals, then one measurement per client count.
async fn postgres_phase(
    config: &tokio_postgres::Config,
    preload: usize,
    levels: &[usize],
    seconds: f64,
    warmup: f64,
) -> anyhow::Result<PostgresReport> {
    let mut admin = connect(config).await?;
    let version: String = admin.query_one("SHOW server_version", &[]).await?.get(0);
    // Fresh entropy for every generator: fixed seeds could make two of them produce the same ids.
    let mut rng = StdRng::from_entropy();
    eprintln!("postgres {version}: preloading {preload} ids");
    let mut ids = load(&mut admin, preload, &mut rng).await?;
    check_swap(&admin, &mut ids, &mut rng).await?;

    let mut report = PostgresReport {
        version,
        levels: Vec::new(),
    };
    let max_clients = levels.iter().copied().max().unwrap_or(1);
    if warmup > 0.0 {
        eprintln!("postgres: warming up for {warmup} s with {max_clients} clients");
        let owned = partition(std::mem::take(&mut ids), max_clients);
        let warmup = Duration::from_secs_f64(warmup);
        let (_, owned) = run_level(config, owned, warmup, Duration::ZERO).await?;
        ids = owned.into_iter().flatten().collect();
    }
    let measured = Duration::from_secs_f64(seconds);
    for &clients in levels {
        let owned = partition(std::mem::take(&mut ids), clients);
        let (level, owned) = run_level(config, owned, level_warmup(seconds), measured).await?;
        eprintln!(
            "postgres: {clients} clients: {:.0} tx/s, p50 {:.1} ms, p99 {:.1} ms",
            level.tps, level.latency_ms_p50, level.latency_ms_p99
        );
        report.levels.push(level);
        ids = owned.into_iter().flatten().collect();
    }
    // Every swap spends two ids and creates two: the table must hold exactly what the clients own.
    let count: i64 = admin.query_one("SELECT count(*) FROM uhs", &[]).await?.get(0);
    ensure!(
        count as usize == ids.len() && ids.len() == preload,
        "the UHS holds {count} ids, the clients own {}, {preload} were preloaded",
        ids.len()
    );
    Ok(report)
}

/// Creates the schema and loads `count` random ids with a binary COPY, then indexes, vacuums and
/// checkpoints so that the measurements start from a clean state.
async fn load(client: &mut Client, count: usize, rng: &mut StdRng) -> anyhow::Result<Vec<Id>> {
    let ids: Vec<Id> = (0..count).map(|_| rng.gen()).collect();
    let transaction = client.transaction().await?;
    transaction
        .batch_execute(SCHEMA)
        .await
        .context("cannot create the schema")?;
    let sink = transaction.copy_in("COPY uhs (id) FROM STDIN (FORMAT binary)").await?;
    let mut writer = std::pin::pin!(BinaryCopyInWriter::new(sink, &[Type::BYTEA]));
    for id in &ids {
        writer.as_mut().write(&[&id.as_slice()]).await.context("COPY failed")?;
    }
    writer.as_mut().finish().await.context("COPY failed")?;
    transaction.commit().await?;
    client.batch_execute("ALTER TABLE uhs ADD PRIMARY KEY (id)").await?;
    client.batch_execute("VACUUM (ANALYZE) uhs").await?;
    client.batch_execute("CHECKPOINT").await?;
    Ok(ids)
}

async fn call_swap(client: &Client, spent: &[Id], created: &[Id]) -> Result<bool, tokio_postgres::Error> {
    let spent: Vec<&[u8]> = spent.iter().map(|id| id.as_slice()).collect();
    let created: Vec<&[u8]> = created.iter().map(|id| id.as_slice()).collect();
    let row = client.query_one("SELECT swap($1, $2)", &[&spent, &created]).await?;
    Ok(row.get(0))
}

/// Checks that `swap` refuses a missing id, a repeated id and an existing output without changing
/// anything, and that a valid swap moves ids; keeps `ids` in step with the table.
async fn check_swap(client: &Client, ids: &mut Vec<Id>, rng: &mut StdRng) -> anyhow::Result<()> {
    async fn present(client: &Client, ids: &[Id]) -> anyhow::Result<i64> {
        let ids: Vec<&[u8]> = ids.iter().map(|id| id.as_slice()).collect();
        Ok(client
            .query_one("SELECT count(*) FROM uhs WHERE id = ANY ($1)", &[&ids])
            .await?
            .get(0))
    }
    let (a, b, other) = (ids[0], ids[1], ids[2]);
    let (missing, c, d): (Id, Id, Id) = (rng.gen(), rng.gen(), rng.gen());
    let refusals: [(&str, [Id; 2], [Id; 2], SqlState); 3] = [
        ("an id not in the UHS", [a, missing], [c, d], SqlState::NO_DATA_FOUND),
        ("the same id twice", [a, a], [c, d], SqlState::NO_DATA_FOUND),
        (
            "an output already in the UHS",
            [a, b],
            [c, other],
            SqlState::UNIQUE_VIOLATION,
        ),
    ];
    for (what, spent, created, code) in refusals {
        match call_swap(client, &spent, &created).await {
            Ok(_) => bail!("swap() accepted spending {what}"),
            Err(error) if error.code() == Some(&code) => {}
            Err(error) => return Err(anyhow::Error::new(error).context(format!("swap() spending {what}"))),
        }
        ensure!(
            present(client, &[a, b, other]).await? == 3 && present(client, &[c, d]).await? == 0,
            "a refused swap() ({what}) changed the UHS"
        );
    }
    ensure!(call_swap(client, &[a, b], &[c, d]).await?, "swap() returned false");
    ensure!(
        present(client, &[a, b]).await? == 0 && present(client, &[c, d]).await? == 2,
        "swap() did not move the ids"
    );
    ids.retain(|id| *id != a && *id != b);
    ids.extend([c, d]);
    Ok(())
}

struct ClientOutcome {
    ids: Vec<Id>,
    swaps: u64,
    latency: Histogram<u64>,
}

/// The uncounted start of each level: connections settle, and the previous level's tail drains.
fn level_warmup(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds / 5.0).min(1.0))
}

/// `owned.len()` clients, connected before the clock starts, swapping closed-loop: `warmup`, then
/// `measured` in which completed swaps are counted.
async fn run_level(
    config: &tokio_postgres::Config,
    owned: Vec<Vec<Id>>,
    warmup: Duration,
    measured: Duration,
) -> anyhow::Result<(Level, Vec<Vec<Id>>)> {
    let clients = owned.len();
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        let client = connect(config).await?;
        let statement = client
            .prepare_typed("SELECT swap($1, $2)", &[Type::BYTEA_ARRAY, Type::BYTEA_ARRAY])
            .await?;
        connections.push((client, statement));
    }
    let from = Instant::now() + warmup;
    let until = from + measured;
    let tasks: Vec<_> = connections
        .into_iter()
        .zip(owned)
        .map(|((client, statement), ids)| tokio::spawn(swap_loop(client, statement, ids, from, until)))
        .collect();
    let mut swaps = 0;
    let mut latency = Histogram::<u64>::new(3)?;
    let mut owned = Vec::with_capacity(clients);
    for task in tasks {
        let outcome = task.await.context("a client task failed")??;
        swaps += outcome.swaps;
        latency.add(&outcome.latency)?;
        owned.push(outcome.ids);
    }
    let level = Level {
        clients,
        tps: if measured.is_zero() {
            0.0
        } else {
            swaps as f64 / measured.as_secs_f64()
        },
        swaps,
        latency_ms_p50: latency.value_at_quantile(0.5) as f64 / 1000.0,
        latency_ms_p99: latency.value_at_quantile(0.99) as f64 / 1000.0,
    };
    Ok((level, owned))
}

/// One client: spends two random ids it owns and creates two, one transaction at a time, until
/// `until`; counts the swaps completed in `[from, until)`.
async fn swap_loop(
    client: Client,
    statement: Statement,
    mut ids: Vec<Id>,
    from: Instant,
    until: Instant,
) -> anyhow::Result<ClientOutcome> {
    let mut rng = StdRng::from_entropy();
    let mut latency = Histogram::<u64>::new(3)?;
    let mut swaps = 0;
    loop {
        let sent = Instant::now();
        if sent >= until {
            break;
        }
        let a = ids.swap_remove(rng.gen_range(0..ids.len()));
        let b = ids.swap_remove(rng.gen_range(0..ids.len()));
        let created: [Id; 2] = [rng.gen(), rng.gen()];
        let spent_param: Vec<&[u8]> = vec![&a, &b];
        let created_param: Vec<&[u8]> = vec![&created[0], &created[1]];
        let row = client
            .query_one(&statement, &[&spent_param, &created_param])
            .await
            .context("swap() failed")?;
        ensure!(row.get::<_, bool>(0), "swap() returned false");
        let done = Instant::now();
        if done >= from && done < until {
            swaps += 1;
            let _ = latency.record(done.duration_since(sent).as_micros() as u64);
        }
        ids.extend(created);
    }
    Ok(ClientOutcome { ids, swaps, latency })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_list_is_parsed_sorted_and_bounded() {
        assert_eq!(parse_clients("8,16,32,64"), Ok(ClientLevels(vec![8, 16, 32, 64])));
        assert_eq!(parse_clients(" 32, 8 ,32"), Ok(ClientLevels(vec![8, 32])));
        assert_eq!(parse_clients("1"), Ok(ClientLevels(vec![1])));
        for bad in ["", "8,", "0", "x", "-4", "8;16", "1001"] {
            assert!(parse_clients(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn partition_deals_every_id_to_exactly_one_client() {
        let ids: Vec<u32> = (0..10).collect();
        let parts = partition(ids.clone(), 3);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [4, 3, 3]);
        let mut all: Vec<u32> = parts.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, ids);
        assert_eq!(partition(vec![1, 2], 4), [vec![1], vec![2], vec![], vec![]]);
        assert_eq!(partition(Vec::<u8>::new(), 1), [Vec::<u8>::new()]);
    }

    #[test]
    fn newest_server_version_is_chosen_numerically() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(newest_version(names(&["9.6", "13", "15", "README"])), Some("15".into()));
        assert_eq!(newest_version(names(&["9.6", "10"])), Some("10".into()));
        assert_eq!(newest_version(names(&["lib", ""])), None);
    }

    #[test]
    fn meminfo_total_is_read_in_bytes() {
        assert_eq!(
            mem_total("MemFree: 5 kB\nMemTotal:       24000000 kB\n"),
            Some(24_000_000 * 1024)
        );
        assert_eq!(mem_total("MemFree: 5 kB\n"), None);
    }

    #[test]
    fn settings_keep_every_commit_durable() {
        let settings = server_settings(64, Some(24 << 30), 0);
        let get = |name: &str| settings.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str());
        for name in ["fsync", "synchronous_commit", "full_page_writes"] {
            assert_eq!(get(name), Some("on"), "{name}");
        }
        assert_eq!(get("max_connections"), Some("74"));
        assert_eq!(get("shared_buffers"), Some("6144MB"));
        let small = server_settings(8, Some(256 << 20), 0);
        assert!(small.contains(&("shared_buffers", "128MB".to_string())));
    }
}
