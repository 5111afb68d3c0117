//! The measurement behind a design decision: should embedded mode run as one-replica Raft groups
//! through the replicated host, as TigerBeetle runs a single replica through its consensus path?
//! `specie bench swap --also-one-replica-raft` answers it in one run: the embedded node (roles on
//! `EmbeddedHost` over `specie-log`), then the very same roles as the cluster hosts them
//! (`ShardReplica`, `CoordinatorReplica` on `ReplicatedHost` inside openraft) in one-replica
//! groups in this process, with the same coordinator limits, fsync on in both. Only the sockets
//! and TLS of a real cluster are left out, so the difference is what the Raft path costs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use specie_api::{Completion, CompletionSender, TxStatus};
use specie_cluster::coordinator_replica::{
    coordinator_machine, shard_answers, Admission, CoordinatorReplica, ShardGroupCall, ShardGroups,
};
use specie_cluster::protocol::{RoleRequest, RoleResponse, Submission};
use specie_cluster::shard_replica::{shard_machine, ShardReplica};
use specie_cluster::{Caller, Hosted, Identity};
use specie_host::SnapshotPlan;
use specie_node::NodeOptions;
use specie_raft::{
    NodeId, RaftTransport, Replica, ReplicaConfig, ReplicatedStateMachine, RpcFuture, Start, TransportError,
};
use specie_shard::{ShardRange, ShardRequest};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{CompactTransaction, Txid};
use tokio::runtime::Runtime;

use crate::ensure_that;
use crate::error::{BenchResult, StepContext};
use crate::swap::{check_swap_params, drive_swaps, SwapParams, SwapReport};

/// As the cluster's default `raft_snapshot_entries`.
const SNAPSHOT_EVERY_ENTRIES: u64 = 1_000;
/// How long a one-replica group may take to elect itself and its role to lead.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const SENTINEL: &str = "bench-sentinel";

/// A group of one never sends a Raft message; if it ever tried, the peer does not exist.
struct NoPeers;

impl RaftTransport for NoPeers {
    fn call(&self, target: NodeId, _request: Vec<u8>) -> RpcFuture<'_> {
        Box::pin(async move {
            Err(TransportError::Unreachable {
                node: target,
                reason: "a one-replica group has no peers".into(),
            })
        })
    }
}

/// The coordinator reaches the shard replicas in this process directly.
struct LocalShards(Vec<Arc<ShardReplica>>);

impl ShardGroups for LocalShards {
    fn call(&self, shard: usize, requests: Vec<ShardRequest>) -> ShardGroupCall {
        let replica = self.0[shard].clone();
        Box::pin(async move {
            let caller: Caller = Some(Arc::new(Identity::coordinator("coordinator", 1)));
            shard_answers(replica.serve(caller, RoleRequest::ShardBatch(requests)).await?)
        })
    }
}

async fn one_replica<S: ReplicatedStateMachine>(
    dir: &std::path::Path,
    group: &str,
    machine: S,
) -> BenchResult<Arc<Hosted<S>>> {
    let config = ReplicaConfig {
        snapshot_every_entries: 0,
        ..ReplicaConfig::default()
    };
    let replica = Replica::start(
        config,
        &dir.join(group),
        1,
        Start::Found(BTreeSet::from([1])),
        Arc::new(NoPeers),
        machine,
    )
    .await
    .with_step(|| format!("cannot start the one-replica group {group}"))?;
    Ok(Arc::new(Hosted {
        snapshots: Some(SnapshotPlan::every(SNAPSHOT_EVERY_ENTRIES)),
        ..Hosted::new(group, replica)
    }))
}

/// The swap workload through one-replica Raft groups (see the module's comment).
pub(crate) fn measure_one_replica_raft(args: &SwapParams) -> BenchResult<SwapReport> {
    check_swap_params(args)?;
    ensure_that!(args.fsync, "one-replica Raft groups are measured with fsync on only");
    let dir = tempfile::Builder::new().prefix("specie-bench-raft1-").tempdir()?;
    let runtime = Runtime::new()?;
    let sentinel = secp256k1::Keypair::new(secp256k1::SECP256K1, &mut rand::rngs::StdRng::seed_from_u64(13));
    let coordinator = runtime.block_on(async {
        let ranges = ShardRange::partition(args.shards).step("bad --shards")?;
        let mut shards = vec![];
        for (index, range) in ranges.iter().enumerate() {
            let hosted = one_replica(dir.path(), &format!("shard-{index}"), shard_machine(*range)).await?;
            let (shard, _host) = ShardReplica::start(hosted, vec!["coordinator".to_string()]);
            shards.push(shard);
        }
        // The embedded node's coordinator limits, so only the host differs.
        let config = NodeOptions::new(dir.path()).coordinator_config(ranges);
        let hosted = one_replica(dir.path(), "coordinator", coordinator_machine(config)).await?;
        let keys = [(SENTINEL.to_string(), xonly_bytes(&sentinel))].into();
        let (coordinator, _host) =
            CoordinatorReplica::start(hosted, Arc::new(LocalShards(shards.clone())), Admission::attested(keys));
        wait_until_leading(&coordinator, &sentinel).await?;
        BenchResult::Ok(coordinator)
    })?;
    let handle = runtime.handle().clone();
    let report = drive_swaps(args, |batch, reply| {
        let (coordinator, reply, sentinel) = (coordinator.clone(), reply.clone(), sentinel);
        handle.spawn(submit(coordinator, batch, reply, sentinel));
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    report
}

/// One batch, attested as the cluster's sentinels do (one signature per batch), answered per
/// transaction.
async fn submit(
    coordinator: Arc<CoordinatorReplica>,
    batch: Vec<(u64, CompactTransaction)>,
    reply: CompletionSender,
    sentinel: secp256k1::Keypair,
) {
    let (refs, txs): (Vec<(u64, Txid)>, Vec<CompactTransaction>) = batch
        .into_iter()
        .map(|(client_ref, tx)| ((client_ref, tx.txid), tx))
        .unzip();
    let statuses: Vec<TxStatus> = match coordinator
        .serve(None, RoleRequest::Submit(Submission::attest(txs, &sentinel)))
        .await
    {
        Ok(RoleResponse::Submitted(outcomes)) if outcomes.len() == refs.len() => {
            outcomes.into_iter().map(TxStatus::from).collect()
        }
        _ => vec![TxStatus::Unknown; refs.len()],
    };
    for ((client_ref, txid), status) in refs.into_iter().zip(statuses) {
        let _ = reply.send(Completion {
            client_ref,
            txid,
            status,
        });
    }
}

/// Waits until the coordinator group has elected itself and its role confirms a mint.
async fn wait_until_leading(coordinator: &CoordinatorReplica, sentinel: &secp256k1::Keypair) -> BenchResult<()> {
    let started = Instant::now();
    loop {
        let probe = CompactTransaction {
            txid: Txid(rand::random()),
            created: vec![specie_transaction::UhsId(rand::random())],
            ..Default::default()
        };
        let submission = Submission::attest(vec![probe], sentinel);
        if let Ok(RoleResponse::Submitted(outcomes)) = coordinator.serve(None, RoleRequest::Submit(submission)).await {
            if outcomes
                .first()
                .is_some_and(|o| TxStatus::from(*o) == TxStatus::Confirmed)
            {
                return Ok(());
            }
        }
        ensure_that!(
            started.elapsed() < READY_TIMEOUT,
            "the one-replica groups did not start leading within {READY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
