//! A coordinator group member (Hamilton §4.2). Every replica applies the group's durable
//! commands to a [`CoordinatorState`]; the leader alone runs the 2PC engine. When a replica
//! becomes leader (after applying every entry of earlier terms), it builds the engine from the
//! replicated state and resumes every dtxn in flight from its last phase; shards answer re-sent
//! phases from memory. On losing the lead it stops at once: its unproposed work is dropped and
//! the callers are told so.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use specie_codec::{Decode, Encode};
use specie_coordinator::{
    Applied, CommandLimits, Coordinator, CoordinatorCommand, CoordinatorConfig, CoordinatorInput, CoordinatorReport,
    CoordinatorState, TxResult,
};
use specie_raft::{Leadership, ReplicatedStateMachine};
use specie_role::{Role, Round, Ticket};
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::CompactTransaction;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::time::Instant;

use crate::credentials;
use crate::group_client::GroupClient;
use crate::host::{serve_replica, wire_limits, Caller, Hosted};
use crate::identity::{GroupRole, Identity};
use crate::protocol::{RoleRequest, RoleResponse, SentinelKeys, SubmitOutcome};
use crate::topology::Topology;

/// How long the engine sleeps when neither an input nor a deadline is due (inputs wake it at
/// once; this only bounds how long a lost wake-up could go unnoticed).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// Submissions waiting for the engine; beyond this callers wait (backpressure).
const JOBS_QUEUED_MAX: usize = 1024;

pub struct CoordinatorMachine {
    pub state: CoordinatorState,
    limits: CommandLimits,
}

impl CoordinatorMachine {
    /// The initial state, the same on every replica.
    pub fn new() -> Self {
        CoordinatorMachine {
            state: CoordinatorState::default(),
            limits: CommandLimits::default(),
        }
    }
}

impl Default for CoordinatorMachine {
    fn default() -> Self {
        Self::new()
    }
}

/// The future of one [`ShardGroups::call`].
pub type ShardCall = Pin<Box<dyn Future<Output = Result<Vec<ShardResponse>, String>> + Send>>;

/// How the leading engine reaches the shard groups: one batch of requests to the leader of shard
/// group `shard` (an index into the coordinator's shard ranges). An error means no answer; the
/// engine's timer sends again, and shards answer a re-sent phase as they did the first time.
/// Over the network this is a [`GroupClient`] per group; the simulator supplies its own.
pub trait ShardGroups: Send + Sync + 'static {
    fn call(&self, shard: usize, requests: Vec<ShardRequest>) -> ShardCall;
}

struct WireShardGroups {
    clients: Vec<GroupClient>,
    timeout: Duration,
}

impl ShardGroups for WireShardGroups {
    fn call(&self, shard: usize, requests: Vec<ShardRequest>) -> ShardCall {
        let (client, timeout) = (self.clients[shard].clone(), self.timeout);
        Box::pin(async move {
            match client.call(&RoleRequest::ShardBatch(requests), timeout).await {
                Ok(RoleResponse::ShardBatch(answers)) => Ok(answers),
                Ok(other) => Err(format!("unexpected shard reply {other:?}")),
                Err(error) => Err(error.to_string()),
            }
        })
    }
}

impl ReplicatedStateMachine for CoordinatorMachine {
    fn apply(&mut self, command: &[u8]) -> Vec<u8> {
        match CoordinatorCommand::decode_exact_with(command, &self.limits) {
            Ok(command) => vec![u8::from(self.state.apply(&command) == Applied::Changed)],
            Err(_) => vec![],
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode_snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.state = CoordinatorState::decode_snapshot(snapshot, &self.limits).map_err(|e| e.to_string())?;
        Ok(())
    }
}

struct Job {
    txs: Vec<CompactTransaction>,
    reply: oneshot::Sender<RoleResponse>,
}

struct PendingBatch {
    outcomes: Vec<SubmitOutcome>,
    remaining: usize,
    reply: oneshot::Sender<RoleResponse>,
}

/// The coordinator role of one replica, in front of its engine: callers submit here, and the
/// engine (started once the replica runs) takes the work whenever the replica leads.
pub struct CoordinatorFront {
    jobs: mpsc::Sender<Job>,
    /// The engine takes the receiver when it starts.
    jobs_rx: Mutex<mpsc::Receiver<Job>>,
    /// Whose attestations a submission needs: the sending sentinel's key.
    sentinel_keys: SentinelKeys,
}

impl CoordinatorFront {
    pub fn new(sentinel_keys: SentinelKeys) -> Arc<CoordinatorFront> {
        let (jobs, jobs_rx) = mpsc::channel(JOBS_QUEUED_MAX);
        Arc::new(CoordinatorFront {
            jobs,
            jobs_rx: Mutex::new(jobs_rx),
            sentinel_keys,
        })
    }

    /// Runs the engine on its own task until the replica stops: it leads whenever the replica
    /// does.
    pub fn start_engine(
        self: &Arc<Self>,
        hosted: Arc<Hosted<CoordinatorMachine>>,
        config: CoordinatorConfig,
        shards: Arc<dyn ShardGroups>,
    ) {
        tokio::spawn(engine(hosted, self.clone(), config, shards));
    }

    /// Serves one role request: `Submit` runs the transactions through 2PC and answers one
    /// outcome code each; a replica that does not lead answers `NotLeader`. A submission is
    /// acted on only with a valid attestation by the sending sentinel's key (by any sentinel's
    /// key when the transport authenticates no one).
    pub async fn serve(
        &self,
        hosted: Arc<Hosted<CoordinatorMachine>>,
        caller: Caller,
        request: RoleRequest,
    ) -> Result<RoleResponse, String> {
        match request {
            RoleRequest::Submit(submission) => {
                if !hosted.is_leader() {
                    return Ok(hosted.not_leader());
                }
                let trusted: Vec<&[u8; 32]> = match caller.as_deref() {
                    None => self.sentinel_keys.values().collect(),
                    Some(Identity::Sentinel { name }) => self.sentinel_keys.get(name).into_iter().collect(),
                    Some(_) => vec![],
                };
                if let Err(error) = submission.verify(trusted.into_iter()) {
                    return Err(hosted.refuse(&caller, error));
                }
                let txs = submission.txs;
                let (reply, answer) = oneshot::channel();
                self.jobs
                    .send(Job { txs, reply })
                    .await
                    .map_err(|_| "the coordinator is stopping")?;
                answer
                    .await
                    .map_err(|_| "the coordinator stopped before answering".to_string())
            }
            other => Err(hosted.refuse(&caller, format_args!("a coordinator does not serve {}", other.kind()))),
        }
    }
}

/// Runs replica `id` of coordinator group `group` until stopped.
pub async fn run(topology: Topology, group: String, id: u64) -> anyhow::Result<()> {
    let coordinator_group = topology.coordinator_group(&group).map_err(anyhow::Error::msg)?.clone();
    let me = Identity::coordinator(&group, id);
    let limits = wire_limits(&topology);
    let transport = credentials::transport(&topology, &me)?;
    let clients = topology
        .shard_groups
        .iter()
        .map(|g| GroupClient::new(GroupRole::Shard, &g.name, &g.replicas, &limits, &transport))
        .collect::<Result<Vec<_>, String>>()
        .map_err(anyhow::Error::msg)?;
    let shards: Arc<dyn ShardGroups> = Arc::new(WireShardGroups {
        clients,
        timeout: Duration::from_millis(topology.limits.request_timeout_ms),
    });
    let mut config = CoordinatorConfig::with_shards(topology.shard_ranges());
    config.batch_transactions_max = topology.limits.batch_transactions_max as usize;
    config.dtxns_in_flight_max = topology.limits.dtxns_in_flight_max as usize;
    config.retry_timeout_ms = topology.limits.request_timeout_ms;
    let front = CoordinatorFront::new(topology.sentinel_keys());
    let engine_front = front.clone();
    let start_engine = move |hosted: Arc<Hosted<CoordinatorMachine>>| engine_front.start_engine(hosted, config, shards);
    let handler = move |hosted, caller, request| {
        let front = front.clone();
        async move { front.serve(hosted, caller, request).await }
    };
    serve_replica(
        &topology,
        me,
        &coordinator_group.replicas,
        CoordinatorMachine::new(),
        start_engine,
        handler,
    )
    .await
}

/// Waits to lead, leads until the lead is lost, and again.
async fn engine(
    hosted: Arc<Hosted<CoordinatorMachine>>,
    front: Arc<CoordinatorFront>,
    config: CoordinatorConfig,
    shards: Arc<dyn ShardGroups>,
) {
    let mut leadership = hosted.replica.leadership();
    let mut jobs = front.jobs_rx.lock().await;
    loop {
        loop {
            if matches!(*leadership.borrow_and_update(), Leadership::Leader { .. }) {
                break;
            }
            tokio::select! {
                changed = leadership.changed() => if changed.is_err() { return },
                job = jobs.recv() => match job {
                    Some(job) => { let _ = job.reply.send(hosted.not_leader()); }
                    None => return,
                },
            }
        }
        if let Leadership::Stopped = *leadership.borrow() {
            return;
        }
        lead(&hosted, &config, &shards, &mut jobs, &mut leadership).await;
    }
}

async fn lead(
    hosted: &Arc<Hosted<CoordinatorMachine>>,
    config: &CoordinatorConfig,
    shards: &Arc<dyn ShardGroups>,
    jobs: &mut mpsc::Receiver<Job>,
    leadership: &mut tokio::sync::watch::Receiver<Leadership>,
) {
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_millis() as u64;
    let state = hosted.replica.with_state(|machine| machine.state.clone());
    let resumed = state.active().len();
    let mut coordinator = Coordinator::new(config.clone(), state);
    coordinator.lead(now());
    tracing::info!(group = hosted.group, resumed, "leading: resuming dtxns in flight");
    let (responses_tx, mut responses_rx) = mpsc::unbounded_channel::<(usize, Vec<ShardResponse>)>();
    // Ordered maps: when the lead is lost, the waiting callers are told in submission order
    // (a hash order would make the simulator's runs differ).
    let mut batches: BTreeMap<u64, PendingBatch> = BTreeMap::new();
    let mut tickets: BTreeMap<Ticket, (u64, usize)> = BTreeMap::new();
    let mut next_ticket: Ticket = 0;
    let mut next_batch: u64 = 0;
    loop {
        // Hand every output on: requests to shards, outcomes to callers, decisions to Raft.
        loop {
            let round = Round::take(&mut coordinator);
            let mut sends: Vec<Vec<ShardRequest>> = vec![vec![]; config.shards.len()];
            for (shard, request) in round.sends {
                sends[shard].push(request);
            }
            for (ticket, outcome) in round.replies {
                if let Some((batch, index)) = tickets.remove(&ticket) {
                    settle(&mut batches, batch, index, SubmitOutcome::from(outcome.result));
                }
            }
            for report in round.reports {
                if let CoordinatorReport::ShardRefused { shard, response } = report {
                    tracing::error!(shard, ?response, "a shard refused a request: protocol bug");
                }
            }
            for (shard, requests) in sends.into_iter().enumerate().filter(|(_, r)| !r.is_empty()) {
                let (call, responses) = (shards.call(shard, requests), responses_tx.clone());
                tokio::spawn(async move {
                    // A failed call is simply retried by the engine's timer; shards are idempotent.
                    match call.await {
                        Ok(answers) => {
                            let _ = responses.send((shard, answers));
                        }
                        Err(error) => tracing::debug!(shard, %error, "shard call failed; will retry"),
                    }
                });
            }
            if round.proposals.is_empty() {
                break;
            }
            let commands: Vec<Vec<u8>> = round.proposals.iter().map(Encode::encode).collect();
            if let Err(error) = hosted.replica.propose(commands).await {
                // Lost the lead, or the outcome is unknown: the replicated state decides what
                // happened, and the next leader (perhaps this replica again) resumes from it.
                tracing::warn!(%error, "stepping down: a decision could not be made durable");
                return step_down(coordinator, &mut batches, &tickets);
            }
            for command in &round.proposals {
                Role::apply(&mut coordinator, now(), command);
            }
        }
        // Sleep until an input arrives or the engine's own deadline passes.
        let deadline = coordinator
            .poll_timeout()
            .map_or(Instant::now() + IDLE_WAIT, |at| epoch + Duration::from_millis(at));
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                let now = now();
                if coordinator.poll_timeout().is_some_and(|at| at <= now) {
                    coordinator.handle_timeout(now);
                }
            }
            Some((shard, answers)) = responses_rx.recv() => {
                for response in answers {
                    coordinator.handle(now(), CoordinatorInput::ShardAnswer { shard, response });
                }
            }
            job = jobs.recv() => {
                let Some(job) = job else { return step_down(coordinator, &mut batches, &tickets) };
                let batch = next_batch;
                next_batch += 1;
                let count = job.txs.len();
                batches.insert(batch, PendingBatch { outcomes: vec![SubmitOutcome::Dropped; count], remaining: count, reply: job.reply });
                for (index, tx) in job.txs.into_iter().enumerate() {
                    let ticket = next_ticket;
                    next_ticket += 1;
                    tickets.insert(ticket, (batch, index));
                    coordinator.handle(now(), CoordinatorInput::Submit { ticket, tx });
                }
                if count == 0 {
                    settle_empty(&mut batches, batch);
                }
            }
            changed = leadership.changed() => {
                let still_leading = changed.is_ok() && matches!(*leadership.borrow(), Leadership::Leader { .. });
                if !still_leading {
                    tracing::info!(group = hosted.group, "lost the lead");
                    return step_down(coordinator, &mut batches, &tickets);
                }
            }
        }
    }
}

fn settle(batches: &mut BTreeMap<u64, PendingBatch>, batch: u64, index: usize, outcome: SubmitOutcome) {
    let Some(pending) = batches.get_mut(&batch) else { return };
    pending.outcomes[index] = outcome;
    pending.remaining -= 1;
    if pending.remaining == 0 {
        let pending = batches.remove(&batch).expect("present");
        let _ = pending.reply.send(RoleResponse::Submitted(pending.outcomes));
    }
}

fn settle_empty(batches: &mut BTreeMap<u64, PendingBatch>, batch: u64) {
    if let Some(pending) = batches.remove(&batch) {
        let _ = pending.reply.send(RoleResponse::Submitted(vec![]));
    }
}

/// Callers of transactions that were proposed but not known final get `Dropped` only if they
/// were never durable; the rest are left unanswered (their connection sees the error and they
/// query the UHS), because their fate is decided by whoever leads next.
fn step_down(
    mut coordinator: Coordinator,
    batches: &mut BTreeMap<u64, PendingBatch>,
    tickets: &BTreeMap<Ticket, (u64, usize)>,
) {
    coordinator.follow();
    for (ticket, outcome) in Round::take(&mut coordinator).replies {
        if outcome.result == TxResult::Dropped {
            if let Some((batch, index)) = tickets.get(&ticket) {
                settle(batches, *batch, *index, SubmitOutcome::Dropped);
            }
        }
    }
    // Whatever is still pending was durable: dropping the reply senders tells those callers the
    // outcome is unknown to this replica.
    batches.clear();
}
