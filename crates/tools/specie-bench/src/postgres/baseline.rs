//! The PostgreSQL half of `specie bench postgres` (built with the `postgres` feature): the
//! throwaway server, the swap load, and the report beside specie's own figures.

mod server;
mod swap_load;

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use super::PostgresOptions;
use crate::error::{BenchError, BenchResult, StepContext};
use crate::{ensure_that, fail};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, Statement};

use crate::replicated::{measure_replicated, ReplicatedParams, ReplicatedReport};
use crate::swap::{measure_swap, SwapParams, SwapReport};

use self::{server::*, swap_load::*};

/// A UHS id as stored in PostgreSQL (`bytea`, always 32 bytes here).
pub(crate) type Id = [u8; 32];

/// The superuser role `initdb` creates and the clients connect as (trust authentication, local only).
pub(crate) const ROLE: &str = "specie";
/// Where Debian and Ubuntu install the server binaries, one directory per major version.
pub(crate) const DEBIAN_PG_LIB: &str = "/usr/lib/postgresql";
pub(crate) const INSTALL: &str =
    "install PostgreSQL first (Debian/Ubuntu, as root): `apt-get update && apt-get install -y \
     postgresql`, or pass --pg-bin DIR naming the directory that holds initdb, pg_ctl and postgres";
pub(crate) const SPECIE_EMBEDDED_REPLICATION: &str = "none (embedded, single copy)";

/// `swap` as a stored function: spends every id in `spent` (all must be present and distinct, or
/// the whole transaction is refused with SQLSTATE P0002 and nothing changes) and creates `created`
/// (an id already present is refused with 23505, unique_violation).
pub(crate) const SCHEMA: &str = "
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

pub(super) fn run(args: PostgresOptions) -> BenchResult<ExitCode> {
    ensure_that!(args.seconds > 0.0, "--seconds must be positive");
    ensure_that!(args.warmup >= 0.0, "--warmup must not be negative");
    let levels = args.clients.0.clone();
    let max_clients = *levels.iter().max().step("--clients is empty")?;
    ensure_that!(
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
    ensure_that!(!interrupted, "interrupted");
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
            _ = sigint.recv() => fail!("interrupted"),
            _ = sigterm.recv() => fail!("terminated"),
            report = postgres_phase(&config, args.preload, &levels, args.seconds, args.warmup) => report,
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(cluster);
    let postgres = outcome?;
    report(&args, &specie, replicated.as_ref(), &postgres, &settings);
    Ok(ExitCode::SUCCESS)
}

/// specie's headline figures beside PostgreSQL's best level.
struct Headline {
    replication: String,
    specie_tps: f64,
    specie_p50: f64,
    specie_p99: f64,
    specie_confirmed: u64,
    ratio: f64,
    ratio_embedded: f64,
}

/// The headline compares PostgreSQL with specie replicated three ways (Hamilton's comparison)
/// when that was measured, else with the embedded node; both specie figures are printed.
pub(crate) fn report(
    args: &PostgresOptions,
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
    let h = Headline {
        replication,
        specie_tps,
        specie_p50,
        specie_p99,
        specie_confirmed,
        ratio: specie_tps / best.tps,
        ratio_embedded: embedded.tps / best.tps,
    };
    if args.json {
        report_json(args, embedded, postgres, settings, best, &h);
    } else {
        report_text(args, embedded, replicated, postgres, best, &h);
    }
}

fn report_json(
    args: &PostgresOptions,
    embedded: &SwapReport,
    postgres: &PostgresReport,
    settings: &[(&str, String)],
    best: &Level,
    h: &Headline,
) {
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
            "specie_tps": h.specie_tps,
            "postgres_tps": best.tps,
            "ratio": h.ratio,
            "specie_replication": h.replication,
            "specie_replicas": args.replicas,
            "specie_shards": args.shards,
            "specie_window": args.window,
            "specie_confirmed": h.specie_confirmed,
            "specie_latency_ms_p50": h.specie_p50,
            "specie_latency_ms_p99": h.specie_p99,
            "specie_embedded_tps": embedded.tps,
            "specie_embedded_latency_ms_p50": embedded.latency_ms_p50,
            "specie_embedded_latency_ms_p99": embedded.latency_ms_p99,
            "ratio_embedded": h.ratio_embedded,
            "postgres_best_clients": best.clients,
            "postgres_levels": levels,
            "postgres_version": postgres.version,
            "postgres_settings": settings,
            "postgres_replication": "none (single server)",
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        })
    );
}

fn report_text(
    args: &PostgresOptions,
    embedded: &SwapReport,
    replicated: Option<&ReplicatedReport>,
    postgres: &PostgresReport,
    best: &Level,
    h: &Headline,
) {
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
        "  ratio specie / PostgreSQL = {:.1}x ({:.0} / {:.0} tx/s at {} clients); specie replication: {}",
        h.ratio, h.specie_tps, best.tps, best.clients, h.replication
    );
    if replicated.is_some() {
        println!(
            "  ratio with specie embedded (no replication) = {:.1}x",
            h.ratio_embedded
        );
    }
    println!(
        "  PostgreSQL: a single server, no replication; Hamilton's 26x (target >= 30x) is with three-way replication"
    );
}
