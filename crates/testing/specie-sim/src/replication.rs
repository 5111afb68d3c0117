//! Deterministic simulation of the replication layer: real `specie-raft` replicas (openraft, the
//! log store, snapshots and compaction, the leadership watch) of one group, on a
//! single-threaded tokio runtime with a paused clock, over the fault-injecting network of
//! `specie-faultnet` (the one specie-raft's tests use too), which drops, duplicates, delays and
//! reorders messages and cuts replicas off. Replicas crash and restart
//! from their directories; sometimes the whole group stops and restarts at once.
//!
//! Everything random comes from the seed: the workload and faults, the network's dice, and
//! openraft's election time-outs (through [`specie_raft::seed_thread_rng`]). Time is virtual and
//! tasks run one at a time in a fixed order, so a seed replays exactly; the trace digest proves it.
//!
//! The replicated state is the sequence of command ids applied, so every property Raft promises
//! the shard and coordinator state machines can be checked directly. After every step:
//! - **one order**: every replica's applied sequence is a prefix of one history (state-machine
//!   safety), and no command is applied twice;
//! - **acknowledged is durable**: the newest replica that reports itself leader has applied every
//!   command acknowledged by a leader of its term or earlier (what a coordinator resuming its
//!   dtxns, or a wallet reading the UHS, relies on).
//!
//! (openraft orders leaders by term *and* node id, so two replicas may lead the same term one
//! after the other; "newest" means the greatest such pair.)
//!
//! Once faults stop: the group elects a leader, accepts a new command, every proposal has an
//! outcome, every replica converges on the history, and the history holds every acknowledged
//! command exactly once.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_faultnet::{FaultNetwork, LinkFaults};
use specie_log::SyncMode;
use specie_raft::{
    NodeId, ProposeError, Proposer, Replica, ReplicaConfig, ReplicatedStateMachine, Role, SnapshotRefused, Start,
};
use specie_transaction::hash::Sha256Writer;

use crate::world::Violation;

pub(crate) mod membership;

/// Fault rates in parts per thousand, per message or per step.
#[derive(Clone, Debug)]
pub struct ReplicationFaults {
    pub drop_per_mille: u32,
    pub duplicate_per_mille: u32,
    /// Each message is delayed uniformly in `0..=delay_ms_max`, so messages overtake each other.
    pub delay_ms_max: u64,
    pub crash_per_mille: u32,
    pub restart_per_mille: u32,
    /// Stop every replica at once and start them again (the restart of a whole cluster).
    pub full_restart_per_mille: u32,
    pub partition_per_mille: u32,
    pub heal_per_mille: u32,
    /// A membership change begins (a replica added, removed or replaced), when none is under way.
    pub membership_per_mille: u32,
    /// A replica loses its directory (its disk dies): it is refused under its old id and
    /// replaced under a new one.
    pub wipe_per_mille: u32,
}

impl ReplicationFaults {
    /// What the network does to each message.
    pub(crate) fn link(&self) -> LinkFaults {
        LinkFaults {
            drop_per_mille: self.drop_per_mille,
            duplicate_per_mille: self.duplicate_per_mille,
            delay_ms_max: self.delay_ms_max,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReplicationOptions {
    pub seed: u64,
    pub replicas: u64,
    pub steps: u64,
    /// Virtual time between steps.
    pub step_ms: u64,
    /// Most proposals started per step.
    pub proposals_per_step_max: u32,
    pub snapshot_every_entries: u64,
    pub faults: ReplicationFaults,
    /// Virtual time allowed, once faults stop, for the group to converge.
    pub settle_ms_max: u64,
    /// The planted bug: a replica whose directory was lost restarts under its old id as if it
    /// founded the group, and votes having forgotten its votes and its log.
    pub planted_wiped_rejoin: bool,
}

impl ReplicationOptions {
    pub fn from_seed(seed: u64) -> ReplicationOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5EED_2AF7);
        ReplicationOptions {
            seed,
            replicas: if rng.gen_bool(0.2) { 5 } else { 3 },
            steps: rng.gen_range(150..300),
            step_ms: 25,
            proposals_per_step_max: rng.gen_range(1..4),
            snapshot_every_entries: rng.gen_range(10..40),
            faults: ReplicationFaults {
                drop_per_mille: rng.gen_range(0..60),
                duplicate_per_mille: rng.gen_range(0..60),
                delay_ms_max: rng.gen_range(1..40),
                crash_per_mille: rng.gen_range(5..25),
                restart_per_mille: 60,
                full_restart_per_mille: rng.gen_range(0..6),
                partition_per_mille: rng.gen_range(0..20),
                heal_per_mille: 50,
                membership_per_mille: rng.gen_range(0..40),
                wipe_per_mille: rng.gen_range(0..8),
            },
            settle_ms_max: 60_000,
            planted_wiped_rejoin: false,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ReplicationReport {
    pub seed: u64,
    pub steps: u64,
    pub proposed: u64,
    pub acknowledged: u64,
    /// Proposals whose outcome the proposer could not learn (they may or may not have applied).
    pub unknown: u64,
    pub crashes: u64,
    pub full_restarts: u64,
    pub partitions: u64,
    /// Replicas that joined (caught up and voting) and that left the group.
    pub joined: u64,
    pub left: u64,
    /// Replicas whose directory was lost, each refused under its old id.
    pub wiped: u64,
    pub messages_dropped: u64,
    pub messages_duplicated: u64,
    /// Highest term reached: how many elections the faults caused.
    pub term: u64,
    /// Commands in the final history.
    pub applied: u64,
    pub virtual_ms: u64,
    pub trace_digest: [u8; 32],
}

/// The replicated role: the command ids applied, in order. Its answer to a command is the
/// position it was applied at, so a proposer learns where its command landed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct History(Vec<u64>);

impl ReplicatedStateMachine for History {
    fn apply(&mut self, _proposer: Proposer, command: &[u8]) -> Vec<u8> {
        let id = u64::from_le_bytes(command.try_into().expect("8-byte command"));
        self.0.push(id);
        (self.0.len() as u64).to_le_bytes().to_vec()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.0.iter().flat_map(|id| id.to_le_bytes()).collect()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotRefused> {
        if !snapshot.len().is_multiple_of(8) {
            return Err(SnapshotRefused::new(format!("snapshot of {} bytes", snapshot.len())));
        }
        self.0 = snapshot
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        Ok(())
    }
}

/// Replica settings for simulated groups: fast timers, small segments, frequent snapshots.
pub(crate) fn sim_replica_config(snapshot_every_entries: u64) -> ReplicaConfig {
    ReplicaConfig {
        heartbeat_interval_ms: 50,
        election_timeout_min_ms: 300,
        election_timeout_max_ms: 600,
        snapshot_every_entries,
        entries_kept_after_snapshot: 5,
        segment_bytes_max: 4 * 1024,
        propose_timeout_ms: 3_000,
        unreachable_backoff_ms: 70,
        install_snapshot_timeout_ms: 1_000,
        // Writes go to the page cache inline: a crash here is a process crash, and the replicas
        // do no I/O beside their tasks, which keeps the run deterministic.
        sync: SyncMode::None,
        ..ReplicaConfig::default()
    }
}

/// A single-threaded runtime on a paused clock whose every random choice comes from `seed`
/// (openraft's election time-outs, and the order `select!` polls in).
pub(crate) fn seeded_runtime(seed: u64) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time().start_paused(true);
    // .cargo/config.toml sets the cfg.
    #[cfg(tokio_unstable)]
    builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&seed.to_le_bytes()));
    specie_raft::seed_thread_rng(seed);
    builder.build()
}

/// A proposal's outcome, as the proposer saw it.
struct Outcome {
    command: u64,
    proposer: NodeId,
    result: Result<u64, ProposeError>,
}

struct World {
    options: ReplicationOptions,
    rng: StdRng,
    network: FaultNetwork,
    config: ReplicaConfig,
    root: PathBuf,
    /// The replicas of the group as the world runs it: voters, and a learner being added.
    members: BTreeSet<NodeId>,
    /// Members whose directory was lost, refused under their id, waiting to be replaced.
    wiped: BTreeSet<NodeId>,
    /// The id the next replica to join gets: ids are never reused.
    next_id: NodeId,
    /// The steps of the change under way.
    plan: VecDeque<membership::Step>,
    change_in_flight: bool,
    change_answers_tx: tokio::sync::mpsc::UnboundedSender<membership::StepOutcome>,
    change_answers: tokio::sync::mpsc::UnboundedReceiver<membership::StepOutcome>,
    dirs: BTreeMap<NodeId, PathBuf>,
    running: BTreeMap<NodeId, Arc<Replica<History>>>,
    outcomes_tx: tokio::sync::mpsc::UnboundedSender<Outcome>,
    outcomes: tokio::sync::mpsc::UnboundedReceiver<Outcome>,
    next_command: u64,
    in_flight: BTreeSet<u64>,
    /// Acknowledged commands and the proposer's term when the answer came.
    acknowledged: BTreeMap<u64, u64>,
    /// The longest applied sequence any replica has shown.
    history: Vec<u64>,
    in_history: BTreeSet<u64>,
    step: u64,
    trace: Sha256Writer,
    report: ReplicationReport,
}

/// Runs one seed. Returns the first invariant violated, if any.
pub fn run_replication(options: ReplicationOptions) -> Result<ReplicationReport, Violation> {
    run_seeded(options.seed, "specie-sim-raft-", |root| async move {
        World::new(options, root).run().await
    })
}

/// Runs a world built on real replicas: in a temporary directory (the replicas' data), on the
/// seeded runtime, with the replicas given time to stop before the directory goes.
pub(crate) fn run_seeded<T, F, Fut>(seed: u64, prefix: &str, world: F) -> Result<T, Violation>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<T, Violation>>,
{
    let fail = |message: String| Violation { seed, step: 0, message };
    let root = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| fail(format!("temporary directory: {e}")))?;
    let runtime = seeded_runtime(seed).map_err(|e| fail(format!("runtime: {e}")))?;
    let result = runtime.block_on(world(root.path().to_path_buf()));
    // Replicas dropped rather than shut down stop in the background; let them finish.
    runtime.shutdown_timeout(Duration::from_secs(5));
    result
}

impl World {
    fn new(options: ReplicationOptions, root: PathBuf) -> World {
        let members: BTreeSet<NodeId> = (1..=options.replicas).collect();
        let (outcomes_tx, outcomes) = tokio::sync::mpsc::unbounded_channel();
        let (change_answers_tx, change_answers) = tokio::sync::mpsc::unbounded_channel();
        let network = FaultNetwork::new(options.seed ^ 0x4E45_5457, options.faults.link());
        World {
            next_id: options.replicas + 1,
            wiped: BTreeSet::new(),
            plan: VecDeque::new(),
            change_in_flight: false,
            change_answers_tx,
            change_answers,
            rng: StdRng::seed_from_u64(options.seed),
            config: sim_replica_config(options.snapshot_every_entries),
            dirs: members
                .iter()
                .map(|&id| (id, root.join(format!("replica-{id}"))))
                .collect(),
            root,
            members,
            network,
            running: BTreeMap::new(),
            outcomes_tx,
            outcomes,
            next_command: 1,
            in_flight: BTreeSet::new(),
            acknowledged: BTreeMap::new(),
            history: vec![],
            in_history: BTreeSet::new(),
            step: 0,
            trace: Sha256Writer::new(),
            report: ReplicationReport {
                seed: options.seed,
                ..ReplicationReport::default()
            },
            options,
        }
    }

    fn violation(&self, message: String) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: format!("replication: {message}"),
        }
    }

    fn record(&mut self, event: &str, values: &[u64]) {
        self.trace.update(&self.step.to_le_bytes());
        self.trace.update(event.as_bytes());
        for value in values {
            self.trace.update(&value.to_le_bytes());
        }
    }

    async fn start(&mut self, id: NodeId) -> Result<(), Violation> {
        self.open(id, self.start_mode())
            .await
            .map_err(|e| self.violation(format!("replica {id} does not start from its directory: {e}")))
    }

    async fn open(&mut self, id: NodeId, start: Start) -> Result<(), specie_raft::StartError> {
        let replica = Replica::start(
            self.config.clone(),
            &self.dirs[&id],
            id,
            start,
            self.network.transport(id),
            History::default(),
        )
        .await?;
        self.network.register(id, replica.rpc_handler());
        self.running.insert(id, Arc::new(replica));
        self.record("start", &[id]);
        Ok(())
    }

    async fn crash(&mut self, id: NodeId) {
        self.network.unregister(id);
        if let Some(replica) = self.running.remove(&id) {
            replica.shutdown().await;
        }
        self.report.crashes += 1;
        self.record("crash", &[id]);
    }

    fn propose(&mut self) {
        let leader = self
            .running
            .iter()
            .find(|(_, r)| r.is_leader())
            .map(|(&id, r)| (id, r.clone()));
        // Without a known leader, a random replica is asked (and refuses, or forwards nothing).
        let (proposer, replica) = match leader {
            Some(found) => found,
            None => {
                let ids: Vec<NodeId> = self.running.keys().copied().collect();
                if ids.is_empty() {
                    return;
                }
                let id = ids[self.rng.gen_range(0..ids.len())];
                (id, self.running[&id].clone())
            }
        };
        let command = self.next_command;
        self.next_command += 1;
        self.in_flight.insert(command);
        self.report.proposed += 1;
        self.record("propose", &[proposer, command]);
        let outcomes = self.outcomes_tx.clone();
        tokio::spawn(async move {
            let result = replica
                .propose(vec![command.to_le_bytes().to_vec()])
                .await
                .map(|answers| u64::from_le_bytes(answers[0].as_slice().try_into().expect("8-byte answer")));
            let _ = outcomes.send(Outcome {
                command,
                proposer,
                result,
            });
        });
    }

    /// Whom a fault hits: the leader half the time (failover is where the bugs live), else any of
    /// `ids`.
    fn victim(&mut self, ids: &[NodeId]) -> NodeId {
        let leader = self.running.iter().find(|(_, r)| r.is_leader()).map(|(&id, _)| id);
        match leader {
            Some(leader) if ids.contains(&leader) && self.rng.gen_bool(0.5) => leader,
            _ => ids[self.rng.gen_range(0..ids.len())],
        }
    }

    /// One step of faults and workload, then virtual time passes.
    async fn step(&mut self) -> Result<(), Violation> {
        let faults = self.options.faults.clone();
        let roll = |rng: &mut StdRng, per_mille: u32| rng.gen_range(0..1000) < per_mille;
        let quorum = self.members.len() / 2 + 1;
        if roll(&mut self.rng, faults.full_restart_per_mille) {
            let running: Vec<NodeId> = self.running.keys().copied().collect();
            for id in running {
                self.crash(id).await;
            }
            self.report.full_restarts += 1;
            for id in self.members.clone() {
                if !self.wiped.contains(&id) {
                    self.start(id).await?;
                }
            }
        }
        self.wipe().await?;
        self.plan_change();
        self.advance_change().await?;
        // Crash only while a quorum would stay up, so the group can always make progress.
        if self.running.len() > quorum && roll(&mut self.rng, faults.crash_per_mille) {
            let ids: Vec<NodeId> = self.running.keys().copied().collect();
            let id = self.victim(&ids);
            self.crash(id).await;
        }
        let down: Vec<NodeId> = self
            .members
            .iter()
            .copied()
            .filter(|id| !self.running.contains_key(id) && !self.wiped.contains(id))
            .collect();
        for id in down {
            if roll(&mut self.rng, faults.restart_per_mille) {
                self.start(id).await?;
            }
        }
        let partitioned = self.network.is_partitioned();
        if !partitioned && roll(&mut self.rng, faults.partition_per_mille) {
            let ids: Vec<NodeId> = self.members.iter().copied().collect();
            let victim = self.victim(&ids);
            self.network.isolate(victim, self.members.iter().copied());
            self.report.partitions += 1;
            self.record("partition", &[victim]);
        } else if partitioned && roll(&mut self.rng, faults.heal_per_mille) {
            self.network.heal_all();
            self.record("heal", &[]);
        }
        for _ in 0..self.rng.gen_range(0..=self.options.proposals_per_step_max) {
            self.propose();
        }
        tokio::time::sleep(Duration::from_millis(self.options.step_ms)).await;
        self.collect_outcomes()?;
        self.check()
    }

    fn collect_outcomes(&mut self) -> Result<(), Violation> {
        while let Ok(outcome) = self.outcomes.try_recv() {
            self.in_flight.remove(&outcome.command);
            match outcome.result {
                Ok(position) => {
                    let term = self.running.get(&outcome.proposer).map_or(0, |r| r.metrics().term);
                    self.record("acknowledged", &[outcome.command, position, term]);
                    self.report.acknowledged += 1;
                    // Where it landed must agree with the history once the history reaches it.
                    if let Some(&there) = self.history.get(position as usize - 1) {
                        if there != outcome.command {
                            return Err(self.violation(format!(
                                "command {} acknowledged at position {position}, which holds {there}",
                                outcome.command
                            )));
                        }
                    }
                    self.acknowledged.insert(outcome.command, term);
                }
                Err(error) => {
                    let refused_before_proposing = matches!(error, ProposeError::NotLeader { .. });
                    self.record("failed", &[outcome.command, u64::from(refused_before_proposing)]);
                    self.report.unknown += u64::from(!refused_before_proposing);
                }
            }
        }
        Ok(())
    }

    /// The safety invariants, over every running replica.
    fn check(&mut self) -> Result<(), Violation> {
        let mut reported_leader: Option<(NodeId, u64)> = None;
        for (&id, replica) in &self.running {
            let metrics = replica.metrics();
            self.trace.update(&[metrics.role as u8]);
            self.trace.update(&metrics.term.to_le_bytes());
            self.trace
                .update(&metrics.applied_index.map_or(0, |i| i + 1).to_le_bytes());
            self.report.term = self.report.term.max(metrics.term);
            if metrics.role == Role::Leader
                && replica.is_leader()
                && reported_leader.is_none_or(|(leader, term)| (metrics.term, id) > (term, leader))
            {
                reported_leader = Some((id, metrics.term));
            }
            let applied = replica.with_state(History::clone).0;
            let common = applied.len().min(self.history.len());
            if applied[..common] != self.history[..common] {
                let at = (0..common).find(|&i| applied[i] != self.history[i]).unwrap_or(0);
                return Err(self.violation(format!(
                    "replica {id} applied {} at position {}, another replica applied {}",
                    applied[at],
                    at + 1,
                    self.history[at]
                )));
            }
            for &command in &applied[common..] {
                if !self.in_history.insert(command) {
                    return Err(self.violation(format!("command {command} applied twice")));
                }
                self.history.push(command);
            }
        }
        if let Some((leader, term)) = reported_leader {
            let applied: BTreeSet<u64> = self.running[&leader].with_state(|h| h.0.iter().copied().collect());
            if let Some((&command, _)) = self
                .acknowledged
                .iter()
                .find(|(command, &acked_in)| acked_in <= term && !applied.contains(command))
            {
                return Err(self.violation(format!(
                    "replica {leader} reports itself leader of term {term} without acknowledged command {command}"
                )));
            }
        }
        Ok(())
    }

    async fn run(&mut self) -> Result<ReplicationReport, Violation> {
        // As `cluster up` makes a new group's directories: each founder knows the founders.
        let founding = specie_raft::Origin::Founding(self.members.clone());
        for id in self.members.clone() {
            specie_raft::prepare(&self.dirs[&id], id, &founding, SyncMode::None)
                .map_err(|e| self.violation(format!("preparing replica {id}: {e}")))?;
            self.start(id).await?;
        }
        for step in 0..self.options.steps {
            self.step = step;
            self.step().await?;
        }
        self.settle().await?;
        let stats = self.network.stats();
        (self.report.messages_dropped, self.report.messages_duplicated) = (stats.dropped, stats.duplicated);
        self.report.steps = self.options.steps;
        self.report.applied = self.history.len() as u64;
        self.report.virtual_ms = self.options.steps * self.options.step_ms;
        self.report.trace_digest = std::mem::take(&mut self.trace).finish();
        for replica in std::mem::take(&mut self.running).into_values() {
            replica.shutdown().await;
        }
        Ok(self.report.clone())
    }

    /// Faults stop: every replica runs, the network is whole and reliable. The group must elect
    /// a leader, accept a new command, resolve every proposal and converge.
    async fn settle(&mut self) -> Result<(), Violation> {
        self.step = self.options.steps;
        self.network.make_reliable();
        for id in self.members.clone() {
            if !self.running.contains_key(&id) && !self.wiped.contains(&id) {
                self.start(id).await?;
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.options.settle_ms_max);
        let mut final_command = None;
        loop {
            tokio::time::sleep(Duration::from_millis(self.options.step_ms)).await;
            self.collect_outcomes()?;
            self.check()?;
            // The change under way (a wiped replica's replacement above all) completes.
            self.advance_change().await?;
            if tokio::time::Instant::now() > deadline {
                return Err(self.violation(format!(
                    "no convergence {} ms after faults stopped: {} proposals without outcome, final command {final_command:?}, membership change {:?} (answer awaited: {}), replicas {:?}",
                    self.options.settle_ms_max,
                    self.in_flight.len(),
                    self.plan,
                    self.change_in_flight,
                    self.running.values().map(|r| r.metrics()).collect::<Vec<_>>()
                )));
            }
            let Some(command) = final_command else {
                if self.running.values().any(|r| r.is_leader()) {
                    final_command = Some(self.next_command);
                    self.propose();
                }
                continue;
            };
            if self.in_flight.contains(&command) {
                continue;
            }
            if !self.acknowledged.contains_key(&command) {
                // Refused (a leader change in between): try again.
                final_command = None;
                continue;
            }
            if !self.in_flight.is_empty() || !self.changes_done() {
                continue;
            }
            let converged = self
                .running
                .values()
                .all(|r| r.with_state(|h| h.0.len()) == self.history.len());
            if converged {
                break;
            }
        }
        if let Some(&command) = self.acknowledged.keys().find(|c| !self.in_history.contains(c)) {
            return Err(self.violation(format!("acknowledged command {command} was lost")));
        }
        Ok(())
    }
}
