//! specie's durable swap throughput *with replication on*, for `specie bench postgres`: a
//! throwaway local cluster (`specie cluster up`) driven by `specie bench cluster`, each in its own
//! process, exactly as an operator would run them. The cluster is stopped and its directory
//! deleted when the measurement ends or fails.

// The measurement serves only `specie bench postgres`, which is built with the `postgres` feature;
// without it only `free_port_range` (geo's) is used, and the rest stays compiled and unit-tested.
#![cfg_attr(not(feature = "postgres"), allow(dead_code))]

use std::net::TcpListener;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::ensure_that;
use crate::error::{BenchResult, StepContext};

/// The figures `bench postgres` reports for the replicated cluster.
#[derive(Debug)]
pub(crate) struct ReplicatedReport {
    pub tps: f64,
    pub confirmed: u64,
    pub latency_ms_p50: f64,
    pub latency_ms_p99: f64,
}

pub(crate) struct ReplicatedParams {
    pub seconds: f64,
    pub shard_groups: usize,
    pub replicas: usize,
    pub preload: usize,
    pub window: usize,
}

/// A local cluster in a temporary directory, stopped (`cluster down`) when dropped.
struct TempCluster {
    exe: PathBuf,
    dir: PathBuf,
    /// Last field: deleted after `drop` has stopped the processes.
    _temp: tempfile::TempDir,
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let down = Command::new(&self.exe)
            .arg("cluster")
            .arg("down")
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
        if !down.is_ok_and(|s| s.success()) {
            eprintln!(
                "warning: could not stop the benchmark cluster in {}; stop it with `specie cluster down --dir {}`",
                self.dir.display(),
                self.dir.display()
            );
        }
    }
}

/// `count` consecutive TCP ports on 127.0.0.1 that were all free a moment ago.
pub(crate) fn free_port_range(count: usize) -> BenchResult<u16> {
    let count = u16::try_from(count).step("too many cluster members")?;
    // Probe from an ephemeral port the kernel hands out, then the ranges just above it.
    let start = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port().min(60_000);
    (0..50u16)
        .map(|i| 20_000 + (start.wrapping_add(i * 97) % 40_000))
        .find(|&base| (0..count).all(|p| TcpListener::bind(("127.0.0.1", base + p)).is_ok()))
        .step("cannot find free consecutive ports on 127.0.0.1")
}

/// Runs one `specie` step with its output on our stderr (stdout may carry `--json`).
fn run_step(exe: &Path, args: &[&str], what: &str) -> BenchResult<()> {
    let stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
    let status = Command::new(exe)
        .args(args)
        .stdout(Stdio::from(stderr))
        .status()
        .with_step(|| format!("cannot run {what}"))?;
    ensure_that!(status.success(), "{what} failed ({status})");
    Ok(())
}

pub(crate) fn measure_replicated(params: &ReplicatedParams) -> BenchResult<ReplicatedReport> {
    ensure_that!(params.replicas > 0, "--replicas must be positive");
    let exe = std::env::current_exe().step("cannot locate the specie binary")?;
    let temp = tempfile::Builder::new().prefix("specie-bench-replicated-").tempdir()?;
    let dir = temp.path().join("cluster");
    let out = temp.path().join("bench");
    let cluster = TempCluster {
        exe: exe.clone(),
        dir: dir.clone(),
        _temp: temp,
    };
    let dir_text = dir.to_str().step("temporary directory is not UTF-8")?;
    // Replicas of the shard groups and of the coordinator group, and one sentinel.
    let base = free_port_range(params.shard_groups * params.replicas + params.replicas + 1)?;
    run_step(
        &exe,
        &[
            "cluster",
            "up",
            "--dir",
            dir_text,
            "--base-port",
            &base.to_string(),
            "--shard-groups",
            &params.shard_groups.to_string(),
            "--replicas",
            &params.replicas.to_string(),
            "--sentinels",
            "1",
        ],
        "specie cluster up",
    )?;
    run_step(
        &exe,
        &[
            "bench",
            "cluster",
            "--dir",
            dir_text,
            "--seconds",
            &params.seconds.to_string(),
            "--preload",
            &params.preload.to_string(),
            "--window",
            &params.window.to_string(),
            "--out",
            out.to_str().step("temporary directory is not UTF-8")?,
        ],
        "specie bench cluster",
    )?;
    let result_file = out.join("result.json");
    let result: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&result_file).with_step(|| format!("cannot read {}", result_file.display()))?,
    )?;
    drop(cluster);
    parse_result(&result)
}

/// The figures from `bench cluster`'s result.json, refusing a run that lost ids.
fn parse_result(result: &serde_json::Value) -> BenchResult<ReplicatedReport> {
    let number = |pointer: &str| {
        result
            .pointer(pointer)
            .and_then(serde_json::Value::as_f64)
            .with_step(|| format!("bench cluster's result.json has no number at {pointer}"))
    };
    let missing = number("/pool_check/missing")?;
    ensure_that!(
        missing == 0.0,
        "the replicated run lost {missing} unspent ids: not a valid measurement"
    );
    Ok(ReplicatedReport {
        tps: number("/throughput/mean_tps")?,
        confirmed: number("/totals/confirmed_during_load")? as u64,
        latency_ms_p50: number("/latency_ms/p50")?,
        latency_ms_p99: number("/latency_ms/p99")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_figures_are_read_and_a_lossy_run_is_refused() {
        let good = serde_json::json!({
            "throughput": {"mean_tps": 61000.5},
            "totals": {"confirmed_during_load": 610005},
            "latency_ms": {"p50": 120.0, "p99": 400.0},
            "pool_check": {"ids": 10, "missing": 0},
        });
        let report = parse_result(&good).unwrap();
        assert_eq!(report.tps, 61000.5);
        assert_eq!(report.confirmed, 610005);
        assert_eq!((report.latency_ms_p50, report.latency_ms_p99), (120.0, 400.0));

        let mut lossy = good.clone();
        lossy["pool_check"]["missing"] = 3.into();
        assert!(parse_result(&lossy).unwrap_err().to_string().contains("lost 3"));

        let mut unreadable = good;
        unreadable["pool_check"] = serde_json::json!({"ids": 10, "error": "no leader"});
        assert!(parse_result(&unreadable).is_err());
    }
}
