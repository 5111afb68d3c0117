//! A member of the core's ordering group, in either shape: 2PC's coordinator
//! ([`specie_coordinator::Coordinator`], Hamilton §4.2) or Hamilton's atomizer
//! ([`specie_atomizer::Atomizer`], §5), on the shared replicated host
//! (`specie_host::ReplicatedHost`). Every replica applies the group's durable commands to its
//! role; while its replica leads (after applying every entry of earlier terms) the role talks to
//! the shard groups, resuming whatever it had in flight (shards answer a message sent again as
//! they did the first time). On losing the lead it follows at once: its unproposed work is
//! answered as dropped. Both shapes take the same submissions from sentinels, under the same
//! admission (attestation, threshold endorsement when the cluster requires it, and the ledger
//! of record's word that every transaction is written ahead when the cluster keeps one).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use specie_coordinator::{Coordinator, TxOutcome};
use specie_endorsement::EndorsementVerifier;
use specie_host::{Calls, Gather, HostStopped, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_role::{Durable, Ticket};
use specie_shard::ShardResponse;
use specie_transaction::{CompactTransaction, Txid};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::credentials;
use crate::group_client::{GroupClient, GroupError};
use crate::host::{
    call_host, serve_replica, wire_limits, Caller, Hosted, ReplicaError, RoleStatus, ServeError, ROLE_CALLS_QUEUED_MAX,
};
use crate::identity::{GroupRole, Identity};
use crate::protocol::{RoleRequest, RoleResponse, SentinelKeys, Submission, SubmitOutcome};
use crate::topology::{EndorsementConfig, Replica as ReplicaAddress, Topology};

/// A role that orders the core's compact transactions by talking to the shard groups: what an
/// [`OrderingReplica`] needs of it beyond the role contract.
pub trait OrderingRole:
    Durable<
        Peer = usize,
        Reply = TxOutcome,
        Command: Send + Sync + 'static,
        Input: Send + 'static,
        Message: Send + 'static,
        Report: Send + 'static,
    > + Send
    + Sync
    + 'static
{
    /// A shard group's answer to one of the role's messages.
    type Answer: Send + 'static;
    fn submit(ticket: Ticket, tx: CompactTransaction) -> Self::Input;
    fn answer(shard: usize, answer: Self::Answer) -> Self::Input;
    /// How many shard groups the role talks to.
    fn shard_count(&self) -> usize;
    /// One round of messages to one shard group, as a request on the wire.
    fn request(messages: Vec<Self::Message>) -> RoleRequest;
    /// The shard group's response to [`OrderingRole::request`], as the role takes it.
    fn answers(response: RoleResponse) -> Result<Vec<Self::Answer>, ShardCallError>;
    /// Tells the operator (the log) what the role reports.
    fn log_report(report: Self::Report);
    /// The outcome `report` gives of a transaction an earlier leader took (resumed after a
    /// failover or a restart), which no caller waits for.
    fn settled(report: &Self::Report) -> Option<&TxOutcome>;
}

/// Shard answers waiting for the ordering role's host; beyond this the calls that carry them wait.
const SHARD_ANSWERS_QUEUED_MAX: usize = 1024;

/// The future of one [`ShardGroups::call`].
pub type ShardGroupCall<A = ShardResponse> = Pin<Box<dyn Future<Output = Result<Vec<A>, ShardCallError>> + Send>>;

/// Why a shard group gave no answer to one round (the ordering role's timer sends it again).
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

/// How the leading role reaches the shard groups: one round of messages to the leader of shard
/// group `shard` (an index into the role's shard ranges). An error means no answer; the role's
/// timer sends again, and shards answer a message sent again as they did the first time.
/// Over the network this is a [`GroupClient`] per group; the simulator supplies its own.
pub trait ShardGroups<R: OrderingRole = Coordinator>: Send + Sync + 'static {
    fn call(&self, shard: usize, messages: Vec<R::Message>) -> ShardGroupCall<R::Answer>;
}

struct WireShardGroups {
    clients: Vec<GroupClient>,
    timeout: Duration,
}

impl<R: OrderingRole> ShardGroups<R> for WireShardGroups {
    fn call(&self, shard: usize, messages: Vec<R::Message>) -> ShardGroupCall<R::Answer> {
        let (client, timeout) = (self.clients[shard].clone(), self.timeout);
        Box::pin(async move { R::answers(client.call(&R::request(messages), timeout).await?) })
    }
}

/// Messages go to the shard groups (one call per group per round); their answers come back as
/// the role's inputs; outcomes fill the callers' slots. With a ledger of record, the outcomes of
/// transactions an earlier leader took go to the archiver once a round, as the callers' do.
struct OrderingReplicaWiring<R: OrderingRole> {
    shards: Arc<dyn ShardGroups<R>>,
    answers: mpsc::Sender<Vec<R::Input>>,
    /// Messages of the current round, per shard.
    messages: Vec<Vec<R::Message>>,
    ledger: Option<LedgerGate>,
    /// Earlier leaders' transactions settled this round, for the ledger of record.
    settled: Vec<(Txid, SubmitOutcome)>,
}

impl<R: OrderingRole> Wiring<R> for OrderingReplicaWiring<R> {
    type Call = CompactTransaction;
    type ReplyTo = Slot<SubmitOutcome>;

    fn input(tx: CompactTransaction, ticket: Ticket) -> R::Input {
        R::submit(ticket, tx)
    }

    fn send(&mut self, shard: usize, message: R::Message) {
        self.messages[shard].push(message);
    }

    fn reply(&mut self, slot: Slot<SubmitOutcome>, outcome: TxOutcome) {
        slot.fill(SubmitOutcome::from(outcome.result));
    }

    fn report(&mut self, report: R::Report) {
        if let (Some(_), Some(outcome)) = (&self.ledger, R::settled(&report)) {
            self.settled.push((outcome.txid, SubmitOutcome::from(outcome.result)));
        }
        R::log_report(report);
    }

    fn flush(&mut self) {
        if let (Some(ledger), false) = (&self.ledger, self.settled.is_empty()) {
            let (txids, outcomes): (Vec<Txid>, Vec<SubmitOutcome>) = self.settled.drain(..).unzip();
            ledger.report(txids, &outcomes);
        }
        for (shard, messages) in self.messages.iter_mut().enumerate() {
            if messages.is_empty() {
                continue;
            }
            let (call, answers) = (self.shards.call(shard, std::mem::take(messages)), self.answers.clone());
            tokio::spawn(async move {
                // A failed call is simply retried by the role's timer; shards are idempotent.
                match call.await {
                    Ok(responses) => {
                        let inputs = responses.into_iter().map(|answer| R::answer(shard, answer)).collect();
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
    /// In a cluster that keeps a ledger of record: the archiver group, which must hold every
    /// transaction written ahead before it is ordered.
    pub ledger: Option<LedgerGate>,
}

/// The ledger of record's gate: a transaction is ordered only once the archiver group says it
/// is written ahead, undecided, in the very compact form submitted. So a sentinel (or k
/// endorsers) cannot have the core commit what the ledger never took. What the role then
/// decided is reported to the archiver from here, not by the sentinel: the report only hurries
/// the UHS's decision, and a sentinel's false "refused" sent before the commit could have had it
/// decide too early.
#[derive(Clone)]
pub struct LedgerGate {
    link: Arc<dyn LedgerLink>,
}

/// How an ordering replica reaches the ledger of record: the archiver group over the cluster's
/// transport ([`LedgerGate::archiver_group`]), or the simulator's model of it.
pub trait LedgerLink: Send + Sync + 'static {
    /// For each transaction, by txid and the digest of the compact form submitted, whether it
    /// is written ahead in that form.
    fn written_ahead(&self, asked: Vec<(Txid, [u8; 32])>) -> LedgerCall<Vec<bool>>;
    /// Tells the archiver, in the background, what became of these transactions for certain.
    fn report(&self, decided: Vec<(Txid, bool)>);
}

/// The future of one [`LedgerLink::written_ahead`].
pub type LedgerCall<T> = Pin<Box<dyn Future<Output = Result<T, LedgerRefusal>> + Send>>;

/// Why a submission does not pass the ledger's gate.
#[derive(Debug, thiserror::Error)]
pub enum LedgerRefusal {
    #[error("transaction {index} ({txid}) is not written ahead to the ledger of record in this compact form")]
    NotWrittenAhead { index: usize, txid: Txid },
    #[error("the ledger of record cannot say what is written ahead: {0}")]
    Unavailable(#[from] GroupError),
    #[error("the ledger of record answered {answered} flags for {asked} transactions")]
    WrongCount { asked: usize, answered: usize },
    #[error("the ledger of record answered a written-ahead question with another kind of response")]
    WrongReply,
    /// The question or its answer was lost (the simulator's network).
    #[error("the written-ahead question or its answer was lost")]
    Lost,
}

/// The archiver group, over the cluster's transport.
struct ArchiverGroup {
    archiver: GroupClient,
    timeout: Duration,
}

impl LedgerLink for ArchiverGroup {
    fn written_ahead(&self, asked: Vec<(Txid, [u8; 32])>) -> LedgerCall<Vec<bool>> {
        let (archiver, timeout) = (self.archiver.clone(), self.timeout);
        Box::pin(async move {
            match archiver.call(&RoleRequest::WrittenAhead(asked), timeout).await? {
                RoleResponse::WrittenAhead(written) => Ok(written),
                _ => Err(LedgerRefusal::WrongReply),
            }
        })
    }

    fn report(&self, decided: Vec<(Txid, bool)>) {
        let (archiver, timeout) = (self.archiver.clone(), self.timeout);
        tokio::spawn(async move {
            if let Err(error) = archiver
                .call_once(&RoleRequest::ArchiveOutcomes(decided), timeout)
                .await
            {
                tracing::warn!(%error, "ledger of record: outcomes not reported; the archiver reads them off the UHS later");
            }
        });
    }
}

impl LedgerGate {
    pub fn new(link: Arc<dyn LedgerLink>) -> LedgerGate {
        LedgerGate { link }
    }

    /// The gate to the archiver group `archiver`, each call given `timeout`.
    pub fn archiver_group(archiver: GroupClient, timeout: Duration) -> LedgerGate {
        LedgerGate::new(Arc::new(ArchiverGroup { archiver, timeout }))
    }

    /// Tells the archiver, in the background, what became of `txids` for certain: a dropped
    /// transaction may still be committed by the next leader, so only the UHS decides it.
    fn report(&self, txids: Vec<Txid>, outcomes: &[SubmitOutcome]) {
        let decided: Vec<(Txid, bool)> = (txids.into_iter().zip(outcomes))
            .filter_map(|(txid, outcome)| match outcome {
                SubmitOutcome::Confirmed => Some((txid, true)),
                SubmitOutcome::Rejected(_) | SubmitOutcome::Busy => Some((txid, false)),
                SubmitOutcome::Dropped => None,
            })
            .collect();
        if !decided.is_empty() {
            self.link.report(decided);
        }
    }

    /// For each transaction of `txs` (whose attestation messages are `digests`), whether it is
    /// written ahead in this compact form.
    async fn written_ahead(
        &self,
        txs: &[CompactTransaction],
        digests: &[[u8; 32]],
    ) -> Result<Vec<bool>, LedgerRefusal> {
        let asked = txs.iter().zip(digests).map(|(tx, digest)| (tx.txid, *digest)).collect();
        let written = self.link.written_ahead(asked).await?;
        if written.len() != txs.len() {
            return Err(LedgerRefusal::WrongCount {
                asked: txs.len(),
                answered: written.len(),
            });
        }
        Ok(written)
    }
}

/// The outcomes of a submission of which only the transactions flagged in `ordered` were
/// ordered (`outcomes`, in their order): the others are answered busy, as nothing of them was
/// applied and a sentinel that writes them ahead may submit them again.
fn outcomes_beside_the_unordered(ordered: &[bool], outcomes: Vec<SubmitOutcome>) -> Vec<SubmitOutcome> {
    assert_eq!(ordered.iter().filter(|o| **o).count(), outcomes.len());
    let mut outcomes = outcomes.into_iter();
    let merged: Vec<SubmitOutcome> = (ordered.iter())
        .map(|ordered| match ordered {
            true => outcomes.next().expect("one outcome per ordered transaction"),
            false => SubmitOutcome::Busy,
        })
        .collect();
    assert!(outcomes.next().is_none());
    merged
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
            ledger: None,
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
            ledger: None,
        }
    }

    /// Whether the transactions of `submission` carry the endorsements the cluster requires: one
    /// each, verifying over the transaction's attestation message (the digest the endorsers'
    /// batch tree commits to).
    fn check_endorsements(&self, submission: &Submission, digests: &[[u8; 32]]) -> Result<(), EndorsementRefusal> {
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
        let endorsed = submission.txs.iter().zip(&submission.endorsements).zip(digests);
        for (index, ((tx, endorsement), digest)) in endorsed.enumerate() {
            if let Err(source) = verifier.verify(endorsement, digest) {
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

/// A running replica of the ordering group: its Raft replica, the way into its host, and what a
/// submission needs.
pub struct OrderingReplica<R: OrderingRole = Coordinator> {
    pub hosted: Arc<Hosted<RoleMachine<R>>>,
    calls: mpsc::Sender<Calls<OrderingReplicaWiring<R>, R>>,
    admission: Admission,
}

impl<R: OrderingRole> OrderingReplica<R> {
    /// Starts the role's host on `hosted`, reaching the shard groups through `shards`; the task
    /// ends when the replica stops.
    pub fn start(
        hosted: Arc<Hosted<RoleMachine<R>>>,
        shards: Arc<dyn ShardGroups<R>>,
        admission: Admission,
    ) -> (Arc<OrderingReplica<R>>, JoinHandle<Result<(), HostStopped>>) {
        let (calls, calls_rx) = mpsc::channel(ROLE_CALLS_QUEUED_MAX);
        let (answers, answers_rx) = mpsc::channel(SHARD_ANSWERS_QUEUED_MAX);
        let shard_count = hosted.replica.with_state(|machine| machine.role().shard_count());
        let wiring = OrderingReplicaWiring {
            shards,
            answers,
            messages: (0..shard_count).map(|_| vec![]).collect(),
            ledger: admission.ledger.clone(),
            settled: vec![],
        };
        let mut host = ReplicatedHost::new(hosted.group.clone(), hosted.replica.clone(), wiring);
        if let Some(plan) = hosted.snapshots {
            host = host.with_snapshots(plan);
        }
        let task = tokio::spawn(host.run(calls_rx, answers_rx));
        let replica = OrderingReplica {
            hosted,
            calls,
            admission,
        };
        (Arc::new(replica), task)
    }

    /// Serves one role request: `Submit` has the role order the transactions (2PC, or the
    /// atomizer's blocks) and answers one outcome each; a replica that does not lead answers
    /// `NotLeader`. A submission is acted on only with a valid attestation by the sending
    /// sentinel's key (by any sentinel's key when the transport authenticates no one) and, in a
    /// cluster whose sentinels endorse, with every transaction's threshold endorsement: a
    /// sentinel alone cannot have anything committed. With a ledger of record, only what it
    /// holds written ahead is ordered ([`LedgerGate`]).
    pub async fn serve(&self, caller: Caller, request: RoleRequest) -> Result<RoleResponse, ServeError> {
        let RoleRequest::Submit(submission) = request else {
            return Err(self.hosted.refuse(
                &caller,
                format_args!("an ordering group does not serve {}", request.kind()),
            ));
        };
        if !self.hosted.is_leader() {
            return Ok(self.hosted.not_leader());
        }
        let trusted: Vec<&[u8; 32]> = match caller.as_deref() {
            None => self.admission.sentinel_keys.values().collect(),
            Some(Identity::Sentinel { name }) => self.admission.sentinel_keys.get(name).into_iter().collect(),
            Some(_) => vec![],
        };
        // Each transaction's attestation message, hashed once: the attestation, the
        // endorsements and the ledger's gate are all over it.
        let digests = submission.digests();
        if let Err(error) = submission.verify_digests(trusted.into_iter(), &digests) {
            return Err(self.hosted.refuse(&caller, error));
        }
        if let Err(error) = self.admission.check_endorsements(&submission, &digests) {
            return Err(self.hosted.refuse(&caller, error));
        }
        if submission.txs.is_empty() {
            return Ok(RoleResponse::Submitted(vec![]));
        }
        // Which transactions the ledger of record holds written ahead: only those are ordered.
        let written = match &self.admission.ledger {
            None => None,
            Some(ledger) => match ledger.written_ahead(&submission.txs, &digests).await {
                Ok(written) => Some(written),
                Err(unavailable) => {
                    // Nothing was ordered: the sentinel may submit again once the ledger answers.
                    tracing::warn!(%unavailable, "a submission waits for the ledger of record");
                    return Ok(RoleResponse::Submitted(vec![SubmitOutcome::Busy; submission.txs.len()]));
                }
            },
        };
        if let Some(index) = written.as_ref().and_then(|written| written.iter().position(|w| !w)) {
            let refusal = LedgerRefusal::NotWrittenAhead {
                index,
                txid: submission.txs[index].txid,
            };
            // None written: a sentinel that skipped the ledger, refused outright. Some: another
            // copy of a transaction may have been decided since its write-ahead (a client that
            // sent it to two sentinels), so the rest of the batch goes on.
            let error = self.hosted.refuse(&caller, refusal);
            if !written.as_ref().is_some_and(|written| written.contains(&true)) {
                return Err(error);
            }
        }
        let ordered = written.unwrap_or_else(|| vec![true; submission.txs.len()]);
        let txs: Vec<CompactTransaction> = (submission.txs.into_iter().zip(&ordered))
            .filter_map(|(tx, ordered)| ordered.then_some(tx))
            .collect();
        let txids: Vec<Txid> = txs.iter().map(|tx| tx.txid).collect();
        let (slots, gathered) = Gather::slots(txs.len());
        let calls = txs.into_iter().zip(slots).collect();
        let response = call_host(&self.hosted, &self.calls, calls, gathered, "a submission", |outcomes| {
            Some(RoleResponse::Submitted(outcomes_beside_the_unordered(
                &ordered, outcomes,
            )))
        })
        .await?;
        if let (Some(ledger), RoleResponse::Submitted(outcomes)) = (&self.admission.ledger, &response) {
            let reported = (outcomes.iter().zip(&ordered)).filter_map(|(outcome, ordered)| ordered.then_some(*outcome));
            ledger.report(txids, &reported.collect::<Vec<_>>());
        }
        Ok(response)
    }
}

/// Runs replica `me` (of group `replicas`) with the ordering role `machine`, reaching every
/// shard group of the topology over the cluster's transport, until stopped.
pub(crate) async fn run<R: OrderingRole>(
    topology: Topology,
    me: Identity,
    replicas: &[ReplicaAddress],
    machine: RoleMachine<R>,
) -> Result<(), ReplicaError>
where
    RoleMachine<R>: RoleStatus,
{
    let limits = wire_limits(&topology);
    let transport = credentials::transport(&topology, &me)?;
    let timeout = Duration::from_millis(topology.limits.request_timeout_ms);
    let clients = topology
        .shard_groups
        .iter()
        .map(|g| GroupClient::new(GroupRole::Shard, &g.name, &g.replicas, &limits, &transport))
        .collect::<Result<Vec<_>, _>>()?;
    let shards: Arc<dyn ShardGroups<R>> = Arc::new(WireShardGroups { clients, timeout });
    let ledger = GroupClient::archiver(&topology, &limits, &transport)?
        .map(|archiver| LedgerGate::archiver_group(archiver, timeout));
    let admission = Admission {
        ledger,
        ..Admission::of(&topology)
    };
    serve_replica(
        &topology,
        me,
        replicas,
        machine,
        move |hosted| OrderingReplica::start(hosted, shards, admission),
        |replica: Arc<OrderingReplica<R>>, caller, request| async move { replica.serve(caller, request).await },
    )
    .await
}
