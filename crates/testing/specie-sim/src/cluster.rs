//! Deterministic simulation of the whole online core as deployed: shard groups and an ordering
//! group, each a Raft group of real `specie-raft` replicas running the roles exactly as the
//! cluster's processes do (`specie-cluster`'s ordering and shard replicas, the ordering role's
//! leader engine with its resume-on-failover, the shards' request handling), on the seeded
//! single-threaded runtime of [`crate::replication`], in either shape of the core
//! ([`ClusterShape`]): a coordinator group over 2PC shard groups, or an atomizer group over UHS
//! shard groups. Only the sockets are replaced: Raft messages, ordering group → shard calls and
//! client submissions cross simulated links that drop, duplicate, delay and reorder. Replicas of
//! every group crash and restart, leaders especially; sometimes a whole group restarts at once;
//! replicas are cut off from their peers.
//!
//! The workload is specie-workload's compact ledger, shared with the 2PC world: mints, swaps of
//! known unspent ids, replays of spent ids, inputs that never existed and conflicting pairs (here
//! the twin sometimes goes in the next submission, so the two race through different dtxns).
//! Every id has a value in the ledger, and a swap's outputs carry its inputs' total, so value is
//! conserved exactly when every transaction applies all or nothing, once. Checked as outcomes
//! arrive:
//! - no id is spent by two confirmed transactions;
//! - a transaction whose inputs the ledger vouches for is never refused as "input missing" (a
//!   confirmed output never vanishes), and no fresh output "already exists";
//!
//! and once faults stop and the cluster settles (every submission answered; no dtxn active at
//! the coordinator and no lock held, or nothing admitted at the atomizer and every shard holding
//! its last block; every replica equal to its leader):
//! - every transaction answered `unknown` applied all or nothing, and not beside a confirmed
//!   transaction that spent one of its inputs (its inputs are never planned again);
//! - every confirmed transaction's inputs are gone, and every id in the UHS is one the ledger
//!   created;
//! - the values in the UHS add up to exactly what the applied mints created;
//! - the UHS holds exactly the ids the applied transactions left unspent.
//!
//! With [`ClusterOptions::ledger_of_record`], the ordering replicas pass every submission through
//! the ledger of record's gate to a model archiver group, and the sentinel skips writing a few
//! transactions ahead ([`ledger_link`]). Checked once at rest: none of those applied, and every
//! outcome the ordering group reported to the archiver is what the UHS did.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_atomizer::{Atomizer, AtomizerConfig};
use specie_cluster::coordinator_replica::{Admission, ShardCallError, ShardGroupCall, ShardGroups};
use specie_cluster::ordering_replica::OrderingReplica;
use specie_cluster::protocol::{self, RoleRequest, RoleResponse, SubmitOutcome};
use specie_cluster::shard_replica::ShardReplica;
use specie_cluster::{Caller, Hosted, Identity};
use specie_coordinator::{Coordinator, CoordinatorConfig};
use specie_faultnet::FaultNetwork;
use specie_host::HostStopped;
use specie_raft::{NodeId, Replica, ReplicaConfig, ReplicatedStateMachine, Start};
use specie_shard::{ShardRange, Vote};
use specie_transaction::hash::Sha256Writer;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{CompactTransaction, Txid, UhsId};
use specie_workload::{roll, CompactLedger, CompactMix, CompactPlanned};
use tokio::task::JoinHandle;

use crate::replication::{run_seeded, sim_replica_config, ReplicationFaults};
use crate::world::Violation;

mod ledger_link;
mod membership;
mod shape;

use ledger_link::SimLedger;
use shape::SimShape;

/// Which shape of the core the cluster world deploys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterShape {
    /// Two-phase commit: a coordinator group over shard groups of `specie_shard::Shard`.
    TwoPhaseCommit,
    /// Hamilton's atomizer: an atomizer group over shard groups of `specie_atomizer::UhsShard`.
    Atomizer(AtomizerShape),
}

/// The atomizer's limits in the atomizer shape: small, so that attestations go stale, blocks
/// wait for lagging shards and submissions meet a full queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtomizerShape {
    pub window_blocks: u64,
    pub block_transactions_max: usize,
    pub queue_transactions_max: usize,
    pub attest_tries_max: u32,
    pub resend_after_ms: u64,
}

#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub seed: u64,
    pub shard_groups: usize,
    pub replicas: u64,
    pub steps: u64,
    pub step_ms: u64,
    /// Most submissions (of up to 4 transactions) started per step.
    pub submissions_per_step_max: u32,
    pub snapshot_every_entries: u64,
    pub faults: ReplicationFaults,
    pub mix: CompactMix,
    pub settle_ms_max: u64,
    pub shape: ClusterShape,
    /// The ordering replicas pass every submission through the ledger of record's gate, to a
    /// model archiver group ([`ledger_link`]). Off in the seeds' options, so that every seed
    /// without it runs as it always did.
    pub ledger_of_record: bool,
    /// Coordinator groups (2PC; the atomizer shape has one atomizer group). Submissions go to
    /// each in turn, as sentinels send them; every shard serves all of them at once.
    pub ordering_groups: usize,
    /// A planted bug: the shard groups cannot tell coordinator groups apart (every group's
    /// rounds reach them as the first group's), as before shards kept each coordinator's dtxns
    /// apart. With two or more groups the world must report it.
    pub shards_confuse_coordinators: bool,
    /// A membership change begins (a replica added to a group, removed, or replaced), when none
    /// is under way.
    pub membership_per_mille: u32,
}

impl ClusterOptions {
    pub fn from_seed(seed: u64) -> ClusterOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xC105_7312);
        ClusterOptions {
            seed,
            shard_groups: rng.gen_range(1..=3),
            replicas: 3,
            steps: rng.gen_range(120..240),
            step_ms: 25,
            submissions_per_step_max: rng.gen_range(1..3),
            snapshot_every_entries: rng.gen_range(10..40),
            faults: ReplicationFaults {
                drop_per_mille: rng.gen_range(0..50),
                duplicate_per_mille: rng.gen_range(0..50),
                delay_ms_max: rng.gen_range(1..30),
                crash_per_mille: rng.gen_range(5..30),
                restart_per_mille: 60,
                full_restart_per_mille: rng.gen_range(0..5),
                partition_per_mille: rng.gen_range(0..15),
                heal_per_mille: 50,
                membership_per_mille: 0,
                wipe_per_mille: 0,
            },
            mix: CompactMix {
                mint_per_mille: 150,
                replay_per_mille: 50,
                conflict_per_mille: 50,
                unknown_input_per_mille: 20,
            },
            settle_ms_max: 60_000,
            shape: ClusterShape::TwoPhaseCommit,
            ledger_of_record: false,
            // Drawn apart, so that the rest of a seed's options stay what they were.
            ordering_groups: StdRng::seed_from_u64(seed ^ 0xC00_4D5).gen_range(1..=4),
            shards_confuse_coordinators: false,
            membership_per_mille: StdRng::seed_from_u64(seed ^ 0x3E3B_E125).gen_range(0..30),
        }
    }

    /// The atomizer shape under the faults and workload of 2PC's seed `seed`, its limits drawn
    /// apart so that 2PC's seeds run as they always did.
    pub fn atomizer_from_seed(seed: u64) -> ClusterOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xA70_C105);
        let shape = AtomizerShape {
            window_blocks: rng.gen_range(4..=16),
            block_transactions_max: rng.gen_range(1..=8),
            queue_transactions_max: rng.gen_range(16..=64),
            attest_tries_max: rng.gen_range(0..=3),
            resend_after_ms: rng.gen_range(100..=400),
        };
        ClusterOptions {
            shape: ClusterShape::Atomizer(shape),
            ordering_groups: 1,
            ..ClusterOptions::from_seed(seed)
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ClusterReport {
    pub seed: u64,
    pub steps: u64,
    pub submitted: u64,
    pub confirmed: u64,
    pub rejected: u64,
    /// Answered `unknown` (or not at all): resolved from the UHS at the end.
    pub unknown: u64,
    pub unknown_applied: u64,
    pub crashes: u64,
    pub full_restarts: u64,
    pub partitions: u64,
    /// Replicas that joined a group (caught up and voting) and that left one.
    pub joined: u64,
    pub left: u64,
    pub messages_dropped: u64,
    pub messages_duplicated: u64,
    /// Elections after the first, summed over groups.
    pub elections: u64,
    /// The atomizer's height once at rest (the atomizer shape only).
    pub blocks: u64,
    /// With the ledger of record: transactions the sentinel submitted without writing them
    /// ahead, the outcomes the ordering group reported, and those of them the client never
    /// heard (settled by a later leader, or answered on a lost link).
    pub not_written_ahead: u64,
    pub ledger_reports: u64,
    pub ledger_reports_of_unknown: u64,
    pub trace_digest: [u8; 32],
}

/// Where a group's replicas live: the shard groups first, then the ordering groups.
type GroupIndex = usize;

/// The running replicas of every shard group, shared with the ordering replicas' [`SimShards`].
type RunningShards<R> = Arc<Mutex<Vec<BTreeMap<NodeId, Arc<ShardReplica<<R as SimShape>::Shard>>>>>>;

/// The simulated clients submit as this sentinel, attesting every submission with its key.
const SENTINEL: &str = "sim-sentinel";

/// With the ledger of record, the transactions the sentinel submits without writing them ahead.
const NOT_WRITTEN_AHEAD_PER_MILLE: u32 = 50;

/// The name of ordering group `index`: the shape's group name, numbered after the first.
fn ordering_group_name<R: SimShape>(index: usize) -> String {
    match index {
        0 => R::GROUP.to_string(),
        _ => format!("{}-{index}", R::GROUP),
    }
}

struct SimShards<R: SimShape> {
    running: RunningShards<R>,
    network: FaultNetwork,
    /// Who the ordering group is to the shards (its certificate's identity).
    caller: Caller,
}

impl<R: SimShape> ShardGroups<R> for SimShards<R> {
    fn call(&self, shard: usize, messages: Vec<R::Message>) -> ShardGroupCall<R::Answer> {
        let (running, network, caller) = (self.running.clone(), self.network.clone(), self.caller.clone());
        let request = R::request(messages);
        Box::pin(async move {
            let there = network.fate();
            there.in_transit().await;
            if there.dropped {
                return Err(ShardCallError::Lost);
            }
            // A GroupClient finds the leader by asking around; here, whoever reports leading.
            let leader = running.lock()[shard].values().find(|s| s.hosted.is_leader()).cloned();
            let leader = leader.ok_or(ShardCallError::NoLeader)?;
            if let Some(after) = there.duplicate_after {
                let (leader, request, caller) = (leader.clone(), request.clone(), caller.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let _ = leader.serve(caller, request).await;
                });
            }
            let response = leader.serve(caller, request).await?;
            let back = network.fate();
            back.in_transit().await;
            if back.dropped {
                return Err(ShardCallError::Lost);
            }
            R::answers(response)
        })
    }
}

/// What the client learned about one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Confirmed,
    Rejected(Vote),
    /// Never applied: busy, dropped, or refused by a replica that does not lead.
    NotApplied,
    Unknown,
}

struct Submission {
    number: u64,
    answers: Vec<Answer>,
}

/// A running replica of the ordering group.
struct Orderer<R: SimShape> {
    replica: Arc<OrderingReplica<R>>,
    host: JoinHandle<Result<(), HostStopped>>,
}

struct World<R: SimShape> {
    options: ClusterOptions,
    /// What every replica of the ordering group starts from.
    ordering: R::Config,
    rng: StdRng,
    /// The key the simulated sentinel attests submissions with.
    sentinel: secp256k1::Keypair,
    config: ReplicaConfig,
    ranges: Vec<ShardRange>,
    /// Each group's replicas as the world runs them: voters, and a learner being added.
    members: Vec<BTreeSet<NodeId>>,
    /// The id each group's next replica gets: ids are never reused.
    next_id: Vec<NodeId>,
    /// The steps of the change under way, and whether a leader is taking one.
    plan: VecDeque<(GroupIndex, crate::replication::membership::Step)>,
    change_in_flight: bool,
    change_answers_tx: tokio::sync::mpsc::UnboundedSender<membership::GroupStepOutcome>,
    change_answers: tokio::sync::mpsc::UnboundedReceiver<membership::GroupStepOutcome>,
    root: PathBuf,
    /// One Raft network per group, and one for role calls.
    networks: Vec<FaultNetwork>,
    roles: FaultNetwork,
    shards: RunningShards<R>,
    /// The running replicas of each ordering group.
    orderers: Vec<BTreeMap<NodeId, Orderer<R>>>,
    ledger_of_record: Option<SimLedger>,
    /// Whether each transaction applied, once known.
    fates: BTreeMap<Txid, bool>,
    not_written_ahead: BTreeSet<Txid>,
    /// The shard replicas' host tasks, to stop with their replicas.
    shard_hosts: BTreeMap<(GroupIndex, NodeId), JoinHandle<Result<(), HostStopped>>>,
    answers_tx: tokio::sync::mpsc::UnboundedSender<Submission>,
    answers: tokio::sync::mpsc::UnboundedReceiver<Submission>,
    ledger: CompactLedger,
    /// A conflicting twin held back for the next submission.
    deferred: Option<CompactPlanned>,
    in_flight: BTreeMap<u64, Vec<CompactPlanned>>,
    next_submission: u64,
    /// Answered `unknown`: left unsettled in the ledger (so their inputs are never planned
    /// again) until the end resolves them from the UHS.
    unknown: Vec<CompactTransaction>,
    step: u64,
    trace: Sha256Writer,
    report: ClusterReport,
}

/// Runs one seed of the cluster world, in the shape `options` name. Returns the first invariant
/// violated, if any.
pub fn run_cluster(options: ClusterOptions) -> Result<ClusterReport, Violation> {
    let ranges = ShardRange::partition(options.shard_groups).expect("1 to 3 shard groups");
    match options.shape.clone() {
        ClusterShape::TwoPhaseCommit => {
            let mut config = CoordinatorConfig::with_shards(ranges.clone());
            config.batch_transactions_max = 16;
            config.retry_timeout_ms = 400;
            run_shape::<Coordinator>(options, ranges, config)
        }
        ClusterShape::Atomizer(shape) => {
            let config = AtomizerConfig {
                window_blocks: shape.window_blocks,
                block_transactions_max: shape.block_transactions_max,
                queue_transactions_max: shape.queue_transactions_max,
                attest_tries_max: shape.attest_tries_max,
                resend_after_ms: shape.resend_after_ms,
                ..AtomizerConfig::with_shards(ranges.clone())
            };
            run_shape::<Atomizer>(options, ranges, config)
        }
    }
}

fn run_shape<R: SimShape>(
    options: ClusterOptions,
    ranges: Vec<ShardRange>,
    ordering: R::Config,
) -> Result<ClusterReport, Violation> {
    run_seeded(options.seed, "specie-sim-cluster-", |root| async move {
        World::<R>::new(options, ranges, ordering, root).run().await
    })
}

impl<R: SimShape> World<R> {
    fn new(options: ClusterOptions, ranges: Vec<ShardRange>, ordering: R::Config, root: PathBuf) -> World<R> {
        assert!(options.ordering_groups >= 1, "at least one ordering group");
        let groups = options.shard_groups + options.ordering_groups;
        let (answers_tx, answers) = tokio::sync::mpsc::unbounded_channel();
        let (change_answers_tx, change_answers) = tokio::sync::mpsc::unbounded_channel();
        World {
            next_id: vec![options.replicas + 1; groups],
            plan: VecDeque::new(),
            change_in_flight: false,
            change_answers_tx,
            change_answers,
            rng: StdRng::seed_from_u64(options.seed),
            sentinel: keypair_from_secret(&[0x5e; 32]).expect("a valid secret key"),
            config: sim_replica_config(options.snapshot_every_entries),
            ordering,
            ranges,
            members: vec![(1..=options.replicas).collect(); groups],
            root,
            networks: (0..groups)
                .map(|g| FaultNetwork::new(options.seed ^ (0x6E70 + g as u64), options.faults.link()))
                .collect(),
            roles: FaultNetwork::new(options.seed ^ 0x524F_4C45, options.faults.link()),
            shards: Arc::new(Mutex::new(vec![BTreeMap::new(); options.shard_groups])),
            orderers: (0..options.ordering_groups).map(|_| BTreeMap::new()).collect(),
            ledger_of_record: options
                .ledger_of_record
                .then(|| SimLedger::new(FaultNetwork::new(options.seed ^ 0x1ED6_E700, options.faults.link()))),
            fates: BTreeMap::new(),
            not_written_ahead: BTreeSet::new(),
            shard_hosts: BTreeMap::new(),
            answers_tx,
            answers,
            ledger: CompactLedger::new(),
            deferred: None,
            in_flight: BTreeMap::new(),
            next_submission: 0,
            unknown: vec![],
            step: 0,
            trace: Sha256Writer::new(),
            report: ClusterReport {
                seed: options.seed,
                ..ClusterReport::default()
            },
            options,
        }
    }

    /// Where replica `id` of `group` keeps its files.
    fn dir(&self, group: GroupIndex, id: NodeId) -> PathBuf {
        self.root.join(format!("group-{group}-replica-{id}"))
    }

    /// Which ordering group `group` is, if it is one.
    fn ordering(&self, group: GroupIndex) -> Option<usize> {
        group.checked_sub(self.options.shard_groups)
    }

    /// Every group: the shard groups, then the ordering groups.
    fn groups(&self) -> std::ops::Range<GroupIndex> {
        0..self.options.shard_groups + self.options.ordering_groups
    }

    fn violation(&self, message: String) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: format!("{}: {message}", R::WORLD),
        }
    }

    fn record(&mut self, event: &str, values: &[u64]) {
        if std::env::var_os("SPECIE_SIM_TRACE").is_some() {
            eprintln!("TRACE {} {event} {values:?}", self.step);
        }
        self.trace.update(&self.step.to_le_bytes());
        self.trace.update(event.as_bytes());
        for value in values {
            self.trace.update(&value.to_le_bytes());
        }
    }

    fn running(&self, group: GroupIndex) -> Vec<NodeId> {
        if let Some(ordering) = self.ordering(group) {
            self.orderers[ordering].keys().copied().collect()
        } else {
            self.shards.lock()[group].keys().copied().collect()
        }
    }

    fn leader(&self, group: GroupIndex) -> Option<NodeId> {
        if let Some(ordering) = self.ordering(group) {
            self.orderers[ordering]
                .iter()
                .find(|(_, o)| o.replica.hosted.is_leader())
                .map(|(&id, _)| id)
        } else {
            self.shards.lock()[group]
                .iter()
                .find(|(_, h)| h.hosted.is_leader())
                .map(|(&id, _)| id)
        }
    }

    async fn open<S: ReplicatedStateMachine>(
        &self,
        group: GroupIndex,
        id: NodeId,
        machine: S,
    ) -> Result<Replica<S>, Violation> {
        let dir = self.dir(group, id);
        let network = &self.networks[group];
        let replica = Replica::start(
            self.config.clone(),
            &dir,
            id,
            Start::Prepared,
            network.transport(id),
            machine,
        )
        .await
        .map_err(|e| self.violation(format!("group {group} replica {id} does not start: {e}")))?;
        network.register(id, replica.rpc_handler());
        Ok(replica)
    }

    async fn start(&mut self, group: GroupIndex, id: NodeId) -> Result<(), Violation> {
        if let Some(ordering) = self.ordering(group) {
            let replica = self.open(group, id, R::machine(self.ordering.clone())).await?;
            let name = ordering_group_name::<R>(ordering);
            let hosted = Arc::new(Hosted::new(name.clone(), replica));
            let sentinel_keys = [(SENTINEL.to_string(), xonly_bytes(&self.sentinel))].into();
            // The planted bug: every group reaches the shards as the first.
            let seen_as = if self.options.shards_confuse_coordinators {
                ordering_group_name::<R>(0)
            } else {
                name
            };
            let shards: Arc<dyn ShardGroups<R>> = Arc::new(SimShards::<R> {
                running: self.shards.clone(),
                network: self.roles.clone(),
                caller: Some(Arc::new(R::identity(&seen_as))),
            });
            let admission = Admission {
                ledger: self.ledger_of_record.as_ref().map(SimLedger::gate),
                ..Admission::attested(sentinel_keys)
            };
            let (replica, host) = OrderingReplica::start(hosted, shards, admission);
            self.orderers[ordering].insert(id, Orderer { replica, host });
        } else {
            let replica = self.open(group, id, R::shard_machine(self.ranges[group])).await?;
            let hosted = Arc::new(Hosted::new(format!("shard-{group}"), replica));
            let names = (0..self.options.ordering_groups)
                .map(ordering_group_name::<R>)
                .collect();
            let (shard, host) = ShardReplica::start(hosted, names);
            self.shards.lock()[group].insert(id, shard);
            self.shard_hosts.insert((group, id), host);
        }
        self.record("start", &[group as u64, id]);
        Ok(())
    }

    async fn crash(&mut self, group: GroupIndex, id: NodeId) {
        self.networks[group].unregister(id);
        if let Some(ordering) = self.ordering(group) {
            if let Some(orderer) = self.orderers[ordering].remove(&id) {
                orderer.host.abort();
                orderer.replica.hosted.replica.shutdown().await;
            }
        } else {
            let shard = self.shards.lock()[group].remove(&id);
            if let Some(host) = self.shard_hosts.remove(&(group, id)) {
                host.abort();
            }
            if let Some(shard) = shard {
                shard.hosted.replica.shutdown().await;
            }
        }
        self.report.crashes += 1;
        self.record("crash", &[group as u64, id]);
    }

    /// A few transactions from the ledger, after the twin held back from the last submission.
    fn plan_submission(&mut self) -> Vec<CompactPlanned> {
        let mut planned: Vec<CompactPlanned> = self.deferred.take().into_iter().collect();
        for _ in 0..self.rng.gen_range(1..=4) {
            let mut next = self.ledger.plan(&mut self.rng, &self.options.mix);
            if next.len() == 2 && self.deferred.is_none() && self.rng.gen_bool(0.5) {
                self.deferred = next.pop();
            }
            planned.extend(next);
        }
        planned
    }

    /// Sends a few transactions to whichever replica of the next ordering group (in turn, as
    /// sentinels do) reports leading.
    fn submit(&mut self) {
        let sent = self.plan_submission();
        let number = self.next_submission;
        self.next_submission += 1;
        self.report.submitted += sent.len() as u64;
        self.record("submit", &[number, sent.len() as u64]);
        let txs: Vec<CompactTransaction> = sent.iter().map(|s| s.tx.clone()).collect();
        self.write_ahead(&txs);
        self.in_flight.insert(number, sent);
        let ordering = number as usize % self.options.ordering_groups;
        let group = self.options.shard_groups + ordering;
        let target = match self.leader(group) {
            Some(id) => Some(id),
            None => {
                let ids = self.running(group);
                (!ids.is_empty()).then(|| ids[self.rng.gen_range(0..ids.len())])
            }
        };
        let target = target.map(|id| self.orderers[ordering][&id].replica.clone());
        let (network, answers) = (self.roles.clone(), self.answers_tx.clone());
        let count = txs.len();
        let submission = protocol::Submission::attest(txs, &self.sentinel);
        tokio::spawn(async move {
            let unknown = || vec![Answer::Unknown; count];
            let result = async {
                let Some(orderer) = target else {
                    return vec![Answer::NotApplied; count];
                };
                let there = network.fate();
                there.in_transit().await;
                if there.dropped {
                    // The client cannot tell a lost request from a lost reply.
                    return unknown();
                }
                let sentinel = Some(Arc::new(Identity::sentinel(SENTINEL)));
                let serve = orderer.serve(sentinel, RoleRequest::Submit(submission));
                let response = tokio::time::timeout(Duration::from_secs(10), serve).await;
                let back = network.fate();
                back.in_transit().await;
                if back.dropped {
                    return unknown();
                }
                match response {
                    Ok(Ok(RoleResponse::Submitted(outcomes))) if outcomes.len() == count => outcomes
                        .iter()
                        .map(|outcome| match *outcome {
                            SubmitOutcome::Confirmed => Answer::Confirmed,
                            SubmitOutcome::Busy | SubmitOutcome::Dropped => Answer::NotApplied,
                            SubmitOutcome::Rejected(vote) => Answer::Rejected(vote),
                        })
                        .collect(),
                    Ok(Ok(RoleResponse::NotLeader(_))) => vec![Answer::NotApplied; count],
                    _ => unknown(),
                }
            }
            .await;
            let _ = answers.send(Submission {
                number,
                answers: result,
            });
        });
    }

    /// With the ledger of record, the sentinel writes `txs` ahead, but for a few it skips, as a
    /// compromised one would: the ordering group must not order those.
    fn write_ahead(&mut self, txs: &[CompactTransaction]) {
        let Some(ledger) = &self.ledger_of_record else {
            return;
        };
        for tx in txs {
            if self.rng.gen_bool(NOT_WRITTEN_AHEAD_PER_MILLE as f64 / 1000.0) {
                self.not_written_ahead.insert(tx.txid);
            } else {
                ledger.write_ahead(tx.txid, tx.attestation_message());
            }
        }
    }

    fn collect_answers(&mut self) -> Result<(), Violation> {
        while let Ok(submission) = self.answers.try_recv() {
            let sent = self.in_flight.remove(&submission.number).expect("submitted");
            for (sent, answer) in sent.into_iter().zip(submission.answers) {
                let tx = sent.tx;
                let code = match answer {
                    Answer::Confirmed => 0,
                    Answer::Rejected(vote) => u64::from(vote as u8),
                    Answer::NotApplied => 0x100,
                    Answer::Unknown => 0x101,
                };
                self.record("answer", &[submission.number, code]);
                match answer {
                    Answer::Confirmed => {
                        self.report.confirmed += 1;
                        self.settle_answered(&tx, true)?;
                    }
                    Answer::Rejected(vote) => {
                        self.report.rejected += 1;
                        if sent.clean && vote == Vote::InputMissing {
                            return Err(self.violation(format!(
                                "transaction {} refused for a missing input, though every input was created and never spent",
                                hex::encode(&tx.txid.0[..8])
                            )));
                        }
                        // The ledger's outputs are fresh, a mint's as much as a swap's: without this,
                        // a shard that refused every mint would pass, having nothing to spend.
                        if vote == Vote::OutputExists {
                            return Err(self.violation(format!(
                                "transaction {} refused because a fresh output already exists",
                                hex::encode(&tx.txid.0[..8])
                            )));
                        }
                        self.settle_answered(&tx, false)?;
                    }
                    Answer::NotApplied => self.settle_answered(&tx, false)?,
                    Answer::Unknown => {
                        self.report.unknown += 1;
                        self.unknown.push(tx);
                    }
                }
            }
        }
        Ok(())
    }

    /// Settles `tx` in the world's ledger as its client heard it, and keeps its fate.
    fn settle_answered(&mut self, tx: &CompactTransaction, applied: bool) -> Result<(), Violation> {
        self.fates.insert(tx.txid, applied);
        self.ledger
            .settle(tx, applied)
            .map_err(|violation| self.violation(violation.to_string()))
    }

    fn victim(&mut self, group: GroupIndex, ids: &[NodeId]) -> NodeId {
        match self.leader(group) {
            Some(leader) if ids.contains(&leader) && self.rng.gen_bool(0.5) => leader,
            _ => ids[self.rng.gen_range(0..ids.len())],
        }
    }

    async fn step(&mut self) -> Result<(), Violation> {
        let faults = self.options.faults.clone();
        for group in self.groups() {
            let quorum = self.members[group].len() / 2 + 1;
            if roll(&mut self.rng, faults.full_restart_per_mille) {
                for id in self.running(group) {
                    self.crash(group, id).await;
                }
                self.report.full_restarts += 1;
                for id in self.members[group].clone() {
                    self.start(group, id).await?;
                }
            }
            let running = self.running(group);
            if running.len() > quorum && roll(&mut self.rng, faults.crash_per_mille) {
                let id = self.victim(group, &running);
                self.crash(group, id).await;
            }
            for id in self.members[group].clone() {
                if !self.running(group).contains(&id) && roll(&mut self.rng, faults.restart_per_mille) {
                    self.start(group, id).await?;
                }
            }
            let partitioned = self.networks[group].is_partitioned();
            if !partitioned && roll(&mut self.rng, faults.partition_per_mille) {
                let ids: Vec<NodeId> = self.members[group].iter().copied().collect();
                let victim = self.victim(group, &ids);
                self.networks[group].isolate(victim, ids.iter().copied());
                self.report.partitions += 1;
                self.record("partition", &[group as u64, victim]);
            } else if partitioned && roll(&mut self.rng, faults.heal_per_mille) {
                self.networks[group].heal_all();
                self.record("heal", &[group as u64]);
            }
        }
        self.plan_change();
        self.advance_change().await?;
        for _ in 0..self.rng.gen_range(0..=self.options.submissions_per_step_max) {
            self.submit();
        }
        tokio::time::sleep(Duration::from_millis(self.options.step_ms)).await;
        self.collect_answers()?;
        self.observe();
        Ok(())
    }

    /// Folds every replica's role, term and applied index into the trace.
    fn observe(&mut self) {
        let mut seen = vec![];
        for group in self.groups() {
            let metrics: Vec<_> = if let Some(ordering) = self.ordering(group) {
                self.orderers[ordering]
                    .values()
                    .map(|o| o.replica.hosted.replica.metrics())
                    .collect()
            } else {
                self.shards.lock()[group]
                    .values()
                    .map(|h| h.hosted.replica.metrics())
                    .collect()
            };
            for m in metrics {
                seen.extend([
                    group as u64,
                    m.id,
                    m.role as u64,
                    m.term,
                    m.applied_index.map_or(0, |i| i + 1),
                ]);
            }
        }
        self.record("observe", &seen);
    }

    async fn run(&mut self) -> Result<ClusterReport, Violation> {
        for group in self.groups() {
            // As `cluster up` makes a new group's directories: each founder knows the founders.
            let founding = specie_raft::Origin::Founding(self.members[group].clone());
            for id in self.members[group].clone() {
                specie_raft::prepare(&self.dir(group, id), id, &founding, specie_log::SyncMode::None)
                    .map_err(|e| self.violation(format!("preparing group {group} replica {id}: {e}")))?;
                self.start(group, id).await?;
            }
        }
        for step in 0..self.options.steps {
            self.step = step;
            self.step().await?;
        }
        self.settle().await?;
        for network in self.networks.iter().chain([&self.roles]) {
            let stats = network.stats();
            self.report.messages_dropped += stats.dropped;
            self.report.messages_duplicated += stats.duplicated;
        }
        self.report.steps = self.options.steps;
        self.report.trace_digest = std::mem::take(&mut self.trace).finish();
        for orderer in std::mem::take(&mut self.orderers)
            .into_iter()
            .flat_map(BTreeMap::into_values)
        {
            orderer.replica.hosted.replica.shutdown().await;
        }
        let shards: Vec<_> = std::mem::take(&mut *self.shards.lock());
        for shard in shards.into_iter().flat_map(BTreeMap::into_values) {
            shard.hosted.replica.shutdown().await;
        }
        Ok(self.report.clone())
    }

    /// Whether the cluster has come to rest: every submission answered, a leader of every ordering
    /// group with nothing left to do, every shard group led and holding nothing for an undecided
    /// transaction, its replicas equal. (A 2PC shard may still remember the answers of dtxns
    /// whose discard was lost: the next discard it receives carries the coordinator's watermark
    /// and drops them, as designed.)
    fn at_rest(&self) -> bool {
        if !self.in_flight.is_empty() {
            return false;
        }
        for (ordering, orderers) in self.orderers.iter().enumerate() {
            let Some(leader) = self.leader(self.options.shard_groups + ordering) else {
                return false;
            };
            if !orderers[&leader].replica.hosted.replica.with_state(|m| m.role().idle()) {
                return false;
            }
        }
        let shards = self.shards.lock();
        shards.iter().all(|group| {
            let Some(leader) = group.values().find(|h| h.hosted.is_leader()) else {
                return false;
            };
            let (idle, view) = leader
                .hosted
                .replica
                .with_state(|m| (R::shard_idle(m.role()), R::shard_view(m.role())));
            idle && group
                .values()
                .all(|h| h.hosted.replica.with_state(|m| R::shard_view(m.role())) == view)
        })
    }

    /// Every replica's role and state, for a violation's message.
    fn describe(&self) -> String {
        let mut parts = vec![];
        let orderers = self.orderers.iter().enumerate();
        for (ordering, id, o) in orderers.flat_map(|(ordering, g)| g.iter().map(move |(id, o)| (ordering, id, o))) {
            let m = o.replica.hosted.replica.metrics();
            let state = o.replica.hosted.replica.with_state(|s| s.role().describe());
            parts.push(format!(
                "{} {id}: {:?} term {} applied {:?}, {state}",
                ordering_group_name::<R>(ordering),
                m.role,
                m.term,
                m.applied_index
            ));
        }
        for (group, replicas) in self.shards.lock().iter().enumerate() {
            for (id, h) in replicas {
                let m = h.hosted.replica.metrics();
                let state = h.hosted.replica.with_state(|s| R::shard_describe(s.role()));
                parts.push(format!(
                    "shard-{group} {id}: {:?} term {} applied {:?}, {state}",
                    m.role, m.term, m.applied_index
                ));
            }
        }
        if !self.changes_done() {
            parts.push(format!("membership change under way: {:?}", self.plan));
        }
        parts.join("; ")
    }

    async fn settle(&mut self) -> Result<(), Violation> {
        self.step = self.options.steps;
        for network in self.networks.iter().chain([&self.roles]) {
            network.make_reliable();
        }
        for group in self.groups() {
            for id in self.members[group].clone() {
                if !self.running(group).contains(&id) {
                    self.start(group, id).await?;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.options.settle_ms_max);
        loop {
            tokio::time::sleep(Duration::from_millis(self.options.step_ms)).await;
            self.collect_answers()?;
            // The change under way completes.
            self.advance_change().await?;
            if self.at_rest() && self.changes_done() {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(self.violation(format!(
                    "not at rest {} ms after faults stopped: {} submissions unanswered; {}",
                    self.options.settle_ms_max,
                    self.in_flight.len(),
                    self.describe()
                )));
            }
        }
        for group in self.groups() {
            let term = if let Some(ordering) = self.ordering(group) {
                self.orderers[ordering]
                    .values()
                    .map(|o| o.replica.hosted.replica.metrics().term)
                    .max()
            } else {
                self.shards.lock()[group]
                    .values()
                    .map(|h| h.hosted.replica.metrics().term)
                    .max()
            };
            self.report.elections += term.unwrap_or(1).saturating_sub(1);
        }
        self.check_final()
    }

    /// Nothing the sentinel skipped writing ahead applied, and every report the ordering group
    /// sent the archiver is the truth. `unknown`: the transactions whose client heard nothing.
    fn check_ledger_of_record(&mut self, unknown: &BTreeSet<Txid>) -> Result<(), Violation> {
        let Some(ledger) = &self.ledger_of_record else {
            return Ok(());
        };
        if let Some(txid) = (self.not_written_ahead.iter()).find(|txid| self.fates.get(*txid) != Some(&false)) {
            return Err(self.violation(format!(
                "transaction {} applied, though it was never written ahead to the ledger of record",
                hex::encode(&txid.0[..8])
            )));
        }
        if let Some(false_report) = ledger.false_report(&self.fates) {
            return Err(self.violation(false_report));
        }
        let reports = std::mem::take(&mut ledger.model.lock().reports);
        self.report.not_written_ahead = self.not_written_ahead.len() as u64;
        self.report.ledger_reports = reports.len() as u64;
        self.report.ledger_reports_of_unknown =
            (reports.iter()).filter(|(txid, _)| unknown.contains(txid)).count() as u64;
        Ok(())
    }

    fn check_final(&mut self) -> Result<(), Violation> {
        let uhs: BTreeSet<UhsId> = self
            .shards
            .lock()
            .iter()
            .flat_map(|group| {
                let leader = group.values().find(|h| h.hosted.is_leader()).expect("at rest");
                leader.hosted.replica.with_state(|m| R::shard_view(m.role()).ids)
            })
            .collect();
        let unknown: BTreeSet<Txid> = self.unknown.iter().map(|tx| tx.txid).collect();
        for tx in std::mem::take(&mut self.unknown) {
            match self.ledger.resolve(&tx, &uhs) {
                Ok(applied) => {
                    self.report.unknown_applied += u64::from(applied);
                    self.fates.insert(tx.txid, applied);
                }
                Err(violation) => return Err(self.violation(violation.to_string())),
            }
        }
        self.check_ledger_of_record(&unknown)?;
        self.ledger
            .audit(uhs.iter().copied())
            .map_err(|violation| self.violation(violation.to_string()))?;
        // The audit counts value, and a swap's twin carries an output of value 0: only the ids
        // themselves show such an output lost.
        let unspent: BTreeSet<UhsId> = self.ledger.spendable().copied().collect();
        if unspent != uhs {
            return Err(self.violation(format!(
                "the UHS holds {} ids, the applied transactions leave {}: {} of theirs missing",
                uhs.len(),
                unspent.len(),
                unspent.difference(&uhs).count()
            )));
        }
        // The atomizer shape has one ordering group; 2PC makes no blocks.
        let leader = self.leader(self.options.shard_groups).expect("at rest");
        self.report.blocks = self.orderers[0][&leader]
            .replica
            .hosted
            .replica
            .with_state(|m| m.role().blocks());
        Ok(())
    }
}
