//! A coordinator group member (Hamilton §4.2): the coordinator role
//! ([`specie_coordinator::Coordinator`]) on the shared replicated host
//! (`specie_host::ReplicatedHost`). Every replica applies the group's durable commands to it;
//! while its replica leads (after applying every entry of earlier terms) it runs 2PC, resuming
//! every dtxn in flight from its last phase (shards answer re-sent phases from memory). On losing
//! the lead it follows at once: its unproposed work is answered as dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use specie_coordinator::{
    Coordinator, CoordinatorConfig, CoordinatorInput, CoordinatorReport, CoordinatorState, TxOutcome,
};
use specie_endorsement::EndorsementVerifier;
use specie_host::{Calls, Gather, HostStopped, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_role::Ticket;
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::CompactTransaction;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::credentials;
use crate::group_client::{GroupClient, GroupError};
use crate::host::{
    call_host, serve_replica, wire_limits, Caller, Hosted, ReplicaError, ServeError, ROLE_CALLS_QUEUED_MAX,
};
use crate::identity::{GroupRole, Identity};
use crate::protocol::{RoleRequest, RoleResponse, SentinelKeys, Submission, SubmitOutcome};
use crate::topology::{EndorsementConfig, Topology};

/// Shard answers waiting for the coordinator's host; beyond this the calls that carry them wait.
const SHARD_ANSWERS_QUEUED_MAX: usize = 1024;

/// The coordinator role as Raft's state machine.
pub type CoordinatorMachine = RoleMachine<Coordinator>;

/// A coordinator's initial state, the same on every replica of its group.
pub fn coordinator_machine(config: CoordinatorConfig) -> CoordinatorMachine {
    RoleMachine::new(Coordinator::new(config, CoordinatorState::default()))
}

/// The future of one [`ShardGroups::call`].
pub type ShardGroupCall = Pin<Box<dyn Future<Output = Result<Vec<ShardResponse>, ShardCallError>> + Send>>;

/// Why a shard group gave no answer to one batch (the coordinator's timer sends it again).
#[derive(Debug, thiserror::Error)]
pub enum ShardCallError {
    /// Over the network: no replica of the group answered as leader.
    #[error(transparent)]
    Group(#[from] GroupError),
    /// In one process: the shard replica refused or could not serve the batch.
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("unexpected shard reply {0:?}")]
    UnexpectedReply(Box<RoleResponse>),
    #[error("no replica of the shard group leads")]
    NoLeader,
    /// The request or its reply was lost on the way (the simulator's network).
    #[error("the request or its reply was lost")]
    Lost,
}

/// A shard group's response to a batch, as the coordinator takes it: its answers, or why not.
pub fn shard_answers(response: RoleResponse) -> Result<Vec<ShardResponse>, ShardCallError> {
    match response {
        RoleResponse::ShardBatch(answers) => Ok(answers),
        other => Err(ShardCallError::UnexpectedReply(Box::new(other))),
    }
}

/// How the leading engine reaches the shard groups: one batch of requests to the leader of shard
/// group `shard` (an index into the coordinator's shard ranges). An error means no answer; the
/// engine's timer sends again, and shards answer a re-sent phase as they did the first time.
/// Over the network this is a [`GroupClient`] per group; the simulator supplies its own.
pub trait ShardGroups: Send + Sync + 'static {
    fn call(&self, shard: usize, requests: Vec<ShardRequest>) -> ShardGroupCall;
}

struct WireShardGroups {
    clients: Vec<GroupClient>,
    timeout: Duration,
}

impl ShardGroups for WireShardGroups {
    fn call(&self, shard: usize, requests: Vec<ShardRequest>) -> ShardGroupCall {
        let (client, timeout) = (self.clients[shard].clone(), self.timeout);
        Box::pin(async move { shard_answers(client.call(&RoleRequest::ShardBatch(requests), timeout).await?) })
    }
}

/// Requests go to the shard groups (one call per group per round); their answers come back as
/// the role's inputs; outcomes fill the callers' slots.
struct CoordinatorReplicaWiring {
    shards: Arc<dyn ShardGroups>,
    answers: mpsc::Sender<Vec<CoordinatorInput>>,
    /// Requests of the current round, per shard.
    requests: Vec<Vec<ShardRequest>>,
}

impl Wiring<Coordinator> for CoordinatorReplicaWiring {
    type Call = CompactTransaction;
    type ReplyTo = Slot<SubmitOutcome>;

    fn input(tx: CompactTransaction, ticket: Ticket) -> CoordinatorInput {
        CoordinatorInput::Submit { ticket, tx }
    }

    fn send(&mut self, shard: usize, request: ShardRequest) {
        self.requests[shard].push(request);
    }

    fn reply(&mut self, slot: Slot<SubmitOutcome>, outcome: TxOutcome) {
        slot.fill(SubmitOutcome::from(outcome.result));
    }

    fn report(&mut self, report: CoordinatorReport) {
        if let CoordinatorReport::ShardRefused { shard, response } = report {
            tracing::error!(shard, ?response, "a shard refused a request: protocol bug");
        }
    }

    fn flush(&mut self) {
        for (shard, requests) in self.requests.iter_mut().enumerate() {
            if requests.is_empty() {
                continue;
            }
            let (call, answers) = (self.shards.call(shard, std::mem::take(requests)), self.answers.clone());
            tokio::spawn(async move {
                // A failed call is simply retried by the role's timer; shards are idempotent.
                match call.await {
                    Ok(responses) => {
                        let inputs = responses
                            .into_iter()
                            .map(|response| CoordinatorInput::ShardAnswer { shard, response })
                            .collect();
                        let _ = answers.send(inputs).await;
                    }
                    Err(error) => tracing::debug!(shard, %error, "shard call failed; will retry"),
                }
            });
        }
    }
}

/// What a submission needs before a coordinator acts on it.
pub struct Admission {
    /// Whose attestation: the sending sentinel's key.
    pub sentinel_keys: SentinelKeys,
    /// Whether every transaction needs the sentinels' threshold endorsement, and under which
    /// group key.
    pub endorsement: EndorsementGate,
}

/// What a coordinator requires of a submission's endorsements.
pub enum EndorsementGate {
    NotRequired,
    /// Required, but the cluster file names no group key yet (the sentinels' ceremony has not
    /// finished): nothing passes.
    Unknown,
    /// Verified under the group key, verified batches cached (one signature check per batch).
    Verify(Mutex<EndorsementVerifier>),
}

/// Why a submission lacks the endorsements the cluster requires.
#[derive(Debug, thiserror::Error)]
pub enum EndorsementRefusal {
    #[error("the cluster requires a threshold endorsement of every transaction")]
    Missing,
    #[error("the cluster file names no endorsement group key yet: the sentinels' key generation has not finished")]
    NoGroupKey,
    #[error("transaction {index} ({txid}) is not endorsed: {source}")]
    Invalid {
        index: usize,
        txid: specie_transaction::Txid,
        #[source]
        source: specie_endorsement::VerifyError,
    },
}

/// Batches whose endorsement signature a coordinator remembers as verified.
const ENDORSED_BATCHES_CACHED_MAX: usize = 1024;

impl Admission {
    /// Attestation only.
    pub fn attested(sentinel_keys: SentinelKeys) -> Admission {
        Admission {
            sentinel_keys,
            endorsement: EndorsementGate::NotRequired,
        }
    }

    /// Attestation and, when the topology says so, threshold endorsement.
    pub fn of(topology: &Topology) -> Admission {
        let verifier = |config: &EndorsementConfig| {
            let key = config.group_key()?;
            EndorsementVerifier::new(&key, ENDORSED_BATCHES_CACHED_MAX).ok()
        };
        let endorsement = match &topology.endorsement {
            None => EndorsementGate::NotRequired,
            Some(config) => {
                verifier(config).map_or(EndorsementGate::Unknown, |v| EndorsementGate::Verify(Mutex::new(v)))
            }
        };
        Admission {
            sentinel_keys: topology.sentinel_keys(),
            endorsement,
        }
    }

    /// Whether the transactions of `submission` carry the endorsements the cluster requires: one
    /// each, verifying over the transaction's attestation message (the digest the endorsers'
    /// batch tree commits to).
    fn check_endorsements(&self, submission: &Submission) -> Result<(), EndorsementRefusal> {
        if submission.txs.is_empty() {
            return Ok(());
        }
        let verifier = match &self.endorsement {
            EndorsementGate::NotRequired => return Ok(()),
            EndorsementGate::Unknown => return Err(EndorsementRefusal::NoGroupKey),
            EndorsementGate::Verify(verifier) => verifier,
        };
        if submission.endorsements.len() != submission.txs.len() {
            return Err(EndorsementRefusal::Missing);
        }
        let mut verifier = verifier.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (index, (tx, endorsement)) in submission.txs.iter().zip(&submission.endorsements).enumerate() {
            if let Err(source) = verifier.verify(endorsement, &tx.attestation_message()) {
                return Err(EndorsementRefusal::Invalid {
                    index,
                    txid: tx.txid,
                    source,
                });
            }
        }
        Ok(())
    }
}

/// A running coordinator replica: its Raft replica, the way into its host, and what a
/// submission needs.
pub struct CoordinatorReplica {
    pub hosted: Arc<Hosted<CoordinatorMachine>>,
    calls: mpsc::Sender<Calls<CoordinatorReplicaWiring, Coordinator>>,
    admission: Admission,
}

impl CoordinatorReplica {
    /// Starts the coordinator's host on `hosted`, reaching the shard groups through `shards`;
    /// the task ends when the replica stops.
    pub fn start(
        hosted: Arc<Hosted<CoordinatorMachine>>,
        shards: Arc<dyn ShardGroups>,
        admission: Admission,
    ) -> (Arc<CoordinatorReplica>, JoinHandle<Result<(), HostStopped>>) {
        let (calls, calls_rx) = mpsc::channel(ROLE_CALLS_QUEUED_MAX);
        let (answers, answers_rx) = mpsc::channel(SHARD_ANSWERS_QUEUED_MAX);
        let shard_count = hosted
            .replica
            .with_state(|machine| machine.role().config().shards.len());
        let wiring = CoordinatorReplicaWiring {
            shards,
            answers,
            requests: vec![vec![]; shard_count],
        };
        let mut host = ReplicatedHost::new(hosted.group.clone(), hosted.replica.clone(), wiring);
        if let Some(plan) = hosted.snapshots {
            host = host.with_snapshots(plan);
        }
        let task = tokio::spawn(host.run(calls_rx, answers_rx));
        let replica = CoordinatorReplica {
            hosted,
            calls,
            admission,
        };
        (Arc::new(replica), task)
    }

    /// Serves one role request: `Submit` runs the transactions through 2PC and answers one
    /// outcome each; a replica that does not lead answers `NotLeader`. A submission is acted on
    /// only with a valid attestation by the sending sentinel's key (by any sentinel's key when
    /// the transport authenticates no one) and, in a cluster whose sentinels endorse, with every
    /// transaction's threshold endorsement: a sentinel alone cannot have anything committed.
    pub async fn serve(&self, caller: Caller, request: RoleRequest) -> Result<RoleResponse, ServeError> {
        let RoleRequest::Submit(submission) = request else {
            return Err(self
                .hosted
                .refuse(&caller, format_args!("a coordinator does not serve {}", request.kind())));
        };
        if !self.hosted.is_leader() {
            return Ok(self.hosted.not_leader());
        }
        let trusted: Vec<&[u8; 32]> = match caller.as_deref() {
            None => self.admission.sentinel_keys.values().collect(),
            Some(Identity::Sentinel { name }) => self.admission.sentinel_keys.get(name).into_iter().collect(),
            Some(_) => vec![],
        };
        if let Err(error) = submission.verify(trusted.into_iter()) {
            return Err(self.hosted.refuse(&caller, error));
        }
        if let Err(error) = self.admission.check_endorsements(&submission) {
            return Err(self.hosted.refuse(&caller, error));
        }
        if submission.txs.is_empty() {
            return Ok(RoleResponse::Submitted(vec![]));
        }
        let (slots, gathered) = Gather::slots(submission.txs.len());
        let calls = submission.txs.into_iter().zip(slots).collect();
        call_host(&self.hosted, &self.calls, calls, gathered, "a submission", |outcomes| {
            Some(RoleResponse::Submitted(outcomes))
        })
        .await
    }
}

/// Runs replica `id` of coordinator group `group` until stopped.
pub async fn run(topology: Topology, group: String, id: u64) -> Result<(), ReplicaError> {
    let coordinator_group = topology.coordinator_group(&group)?.clone();
    let me = Identity::coordinator(&group, id);
    let limits = wire_limits(&topology);
    let transport = credentials::transport(&topology, &me)?;
    let clients = topology
        .shard_groups
        .iter()
        .map(|g| GroupClient::new(GroupRole::Shard, &g.name, &g.replicas, &limits, &transport))
        .collect::<Result<Vec<_>, _>>()?;
    let shards: Arc<dyn ShardGroups> = Arc::new(WireShardGroups {
        clients,
        timeout: Duration::from_millis(topology.limits.request_timeout_ms),
    });
    let mut config = CoordinatorConfig::with_shards(topology.shard_ranges());
    config.batch_transactions_max = topology.limits.batch_transactions_max as usize;
    config.dtxns_in_flight_max = topology.limits.dtxns_in_flight_max as usize;
    config.retry_timeout_ms = topology.limits.request_timeout_ms;
    let admission = Admission::of(&topology);
    serve_replica(
        &topology,
        me,
        &coordinator_group.replicas,
        coordinator_machine(config),
        move |hosted| CoordinatorReplica::start(hosted, shards, admission),
        |coordinator: Arc<CoordinatorReplica>, caller, request| async move { coordinator.serve(caller, request).await },
    )
    .await
}
