//! `specie bench cluster`: swap load against a running cluster (`specie cluster up`), closed loop
//! (a fixed window in flight) or open loop (a target rate), with optional leader kills at given
//! times. Measures confirmed transactions per second, second by second, and an HDR histogram of
//! latency; writes `result.json`, `throughput.svg` (faults marked, as in Hamilton's Figure 5)
//! and `latency.svg`. See docs/bench-cluster.md.

pub(crate) mod chart;
mod cpu;
mod faults;
pub(crate) mod load;
mod recovery;
mod transport;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{BenchError, BenchResult, StepContext};
use crate::{ensure_that, fail};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_api::Backend;
use specie_api::{Completion, TxStatus};
use specie_cluster::operator;
use specie_cluster::sentinel::ClusterBackend;
use specie_cluster::{Topology, TransportMode};
use specie_shard::Vote;
use specie_transaction::{CompactTransaction, UhsId};

use specie_cluster::supervisor;

use self::{chart::*, cpu::*, faults::*, load::*, recovery::*, transport::*};

/// Ids created by one preload transaction.
pub(crate) const PRELOAD_IDS_PER_TX: usize = 100;
/// How long to wait for the last completions once the load stops (a submission times out after
/// 30 s in the sentinel, so every one is answered by then).
pub(crate) const DRAIN_MAX: Duration = Duration::from_secs(40);
/// Open loop: how often the generator submits what is due.
pub(crate) const OPEN_TICK: Duration = Duration::from_millis(10);
/// Throughput counts as recovered once a second reaches this share of the pre-fault mean.
pub(crate) const RECOVERED_SHARE: f64 = 0.5;
/// A fault whose throughput does not fall below the threshold within this many seconds caused no dip.
pub(crate) const DIP_SEARCH_SECONDS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
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

/// Why a `GROUP@SECONDS` fault was not understood.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FaultSpecError(String);

impl std::str::FromStr for FaultSpec {
    type Err = FaultSpecError;

    fn from_str(text: &str) -> Result<FaultSpec, FaultSpecError> {
        let (group, at) = text
            .rsplit_once('@')
            .ok_or_else(|| FaultSpecError(format!("expected GROUP@SECONDS, e.g. shard-0@8, not '{text}'")))?;
        let at_s: f64 = at
            .parse()
            .map_err(|_| FaultSpecError(format!("'{at}' is not a number of seconds")))?;
        if group.is_empty() || !at_s.is_finite() || at_s < 0.0 {
            return Err(FaultSpecError(format!(
                "expected GROUP@SECONDS with SECONDS ≥ 0, not '{text}'"
            )));
        }
        Ok(FaultSpec {
            group: group.to_string(),
            at_s,
        })
    }
}

#[derive(Clone, Debug)]
pub struct ClusterBenchOptions {
    /// The running cluster's directory (as given to `specie cluster up --dir`).
    pub dir: PathBuf,
    /// Seconds of load (after the preload).
    pub seconds: f64,
    pub mode: LoadMode,
    /// Closed loop: transactions kept in flight.
    pub window: usize,
    /// Open loop: transactions submitted per second (required with --mode open).
    pub rate: Option<f64>,
    /// Open loop: hard cap on transactions in flight; what is due beyond it is counted as not sent.
    pub in_flight_max: usize,
    /// Kill -9 the current leader of GROUP at SECONDS into the load, and restart it
    /// --restart-after seconds later (repeatable), e.g. --kill-leader shard-0@8.
    pub kill_leader: Vec<FaultSpec>,
    /// Seconds between a kill and the restart of the killed replica.
    pub restart_after: f64,
    /// UHS ids created before the load starts (the generator's pool; at least twice --window).
    pub preload: usize,
    /// Transactions per submission to the coordinator group.
    pub batch: usize,
    /// Where to write result.json, throughput.svg and latency.svg [default: DIR/bench].
    pub out: Option<PathBuf>,
    /// Measure what mutual TLS costs: run the load once per round, restarting the cluster before
    /// each round with `transport = "mutual-tls"` and `"insecure-plaintext"` in turn (TLS,
    /// plaintext, TLS, …), and report each transport's median and the cost. The cluster file is
    /// set back to mutual-tls at the end, even on error, and the cluster restarted with it.
    pub compare_transport: bool,
    /// With --compare-transport: rounds per transport (at least 2).
    pub rounds: usize,
    /// With --compare-transport: seconds to wait after each restart, before the preload.
    pub settle: f64,
}

pub fn run(args: ClusterBenchOptions) -> BenchResult<ExitCode> {
    ensure_that!(args.seconds > 0.0, "--seconds must be positive");
    ensure_that!(args.batch > 0, "--batch must be positive");
    ensure_that!(args.restart_after >= 0.0, "--restart-after must not be negative");
    if args.mode == LoadMode::Open && !args.rate.is_some_and(|rate| rate > 0.0) {
        fail!("--mode open needs --rate TPS (positive)");
    }
    let cap = match args.mode {
        LoadMode::Closed => args.window,
        LoadMode::Open => args.in_flight_max,
    };
    ensure_that!(
        cap > 0 && args.preload >= 2 * cap,
        "--preload must be at least twice the transactions in flight (--window, or --in-flight-max in open loop)"
    );
    let topology_file = args.dir.join("cluster.toml");
    if !topology_file.exists() {
        fail!(
            "{} does not exist: start a cluster first with `specie cluster up --dir {}`",
            topology_file.display(),
            args.dir.display()
        );
    }
    let topology = Topology::load(&topology_file)?;
    if let Some(reason) = takes_no_compact_load(&topology) {
        fail!(
            "specie bench cluster submits compact transactions (as Hamilton's benchmark does), but {reason}; \
             measure this cluster with `specie demo --cluster {}`, or bench one started without it",
            args.dir.display()
        );
    }
    let topology_path = std::fs::canonicalize(&topology_file)?;
    for fault in &args.kill_leader {
        ensure_that!(
            group_replicas(&topology, &fault.group).is_some(),
            "--kill-leader {}: the cluster has no group named '{}'",
            fault.group,
            fault.group
        );
    }
    let out = args.out.clone().unwrap_or_else(|| args.dir.join("bench"));
    std::fs::create_dir_all(&out).with_step(|| format!("cannot create {}", out.display()))?;
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

/// Why `topology` cannot take the bench's compact transactions, if it cannot: a cluster that
/// keeps a ledger of record takes only full transactions (the ledger records them), and one whose
/// sentinels endorse takes only what k of them endorsed.
fn takes_no_compact_load(topology: &Topology) -> Option<&'static str> {
    if topology.ledger_of_record.is_some() {
        return Some("this cluster keeps a ledger of record ([ledger_of_record]), which takes only full transactions");
    }
    if topology.endorsement.is_some() {
        return Some("this cluster's sentinels endorse every transaction ([endorsement]), from full transactions only");
    }
    None
}

pub(crate) fn shape_text(topology: &Topology) -> String {
    let ordering = match topology.atomizer {
        Some(_) => "an atomizer group".to_string(),
        None => match topology.coordinator_groups.len() {
            1 => "1 coordinator group".to_string(),
            n => format!("{n} coordinator groups"),
        },
    };
    format!(
        "{} shard group{}, {ordering}, {} replicas each",
        topology.shard_groups.len(),
        if topology.shard_groups.len() == 1 { "" } else { "s" },
        topology.shard_groups.first().map_or(0, |g| g.replicas.len())
    )
}

pub(crate) fn load_text(args: &ClusterBenchOptions) -> String {
    match args.mode {
        LoadMode::Closed => format!("closed loop, window {}", args.window),
        LoadMode::Open => format!(
            "open loop, {:.0} tx/s (in flight ≤ {})",
            args.rate.unwrap_or(0.0),
            args.in_flight_max
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    /// What `specie cluster up` makes by default takes the bench's compact load; with a ledger of
    /// record it does not, and the bench says so before it starts.
    #[test]
    fn a_cluster_with_a_ledger_of_record_is_refused_a_compact_load() {
        use specie_cluster::{GroupBridges, LedgerOfRecordConfig, Shape};
        let keys = [[1u8; 32], [2; 32]]
            .map(|secret| {
                let key = specie_transaction::signing::keypair_from_secret(&secret).unwrap();
                hex::encode(specie_transaction::signing::xonly_bytes(&key))
            })
            .to_vec();
        let mut topology = Topology::local(
            Shape::default(),
            Path::new("/tmp/x"),
            vec![],
            keys,
            vec![],
            GroupBridges::default(),
        )
        .unwrap();
        assert_eq!(takes_no_compact_load(&topology), None);
        topology.ledger_of_record = Some(LedgerOfRecordConfig::new(vec![]));
        assert!(takes_no_compact_load(&topology).is_some_and(|reason| reason.contains("ledger of record")));
    }

    #[test]
    fn fault_specs_parse() {
        let f = FaultSpec::from_str("coordinator-0@12.5").unwrap();
        assert_eq!((f.group.as_str(), f.at_s), ("coordinator-0", 12.5));
        assert!(FaultSpec::from_str("shard-0").is_err());
        assert!(FaultSpec::from_str("@3").is_err());
        assert!(FaultSpec::from_str("shard-0@-1").is_err());
    }
}
