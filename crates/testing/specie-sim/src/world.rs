use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_codec::Encode;
use specie_coordinator::{
    Coordinator, CoordinatorConfig, CoordinatorInput, CoordinatorReport, CoordinatorState, DtxnId, SubmitError,
    TxOutcome, TxResult,
};
use specie_host::{SimEvent, SimHost};
use specie_shard::{Shard, ShardCommand, ShardInput, ShardRange, ShardReply, ShardRequest, ShardResponse, ShardTx};
use specie_transaction::hash::Sha256Writer;
use specie_transaction::{CompactTransaction, Txid, UhsId};
use specie_workload::{CompactLedger, CompactMix};

/// Fault rates while faults are on, in parts per thousand.
#[derive(Clone, Debug)]
pub struct Faults {
    pub drop_per_mille: u32,
    pub duplicate_per_mille: u32,
    /// Each message is delayed by 0..=this many simulated milliseconds.
    pub delay_ms_max: u64,
    /// Chance per step that some role crashes.
    pub crash_per_mille: u32,
    /// A crashed role restarts after this many simulated milliseconds (at most).
    pub restart_ms_max: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            drop_per_mille: 50,
            duplicate_per_mille: 50,
            delay_ms_max: 40,
            crash_per_mille: 4,
            restart_ms_max: 300,
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub shards: usize,
    /// Transactions the workload submits (mints, transfers, double spends, conflicts).
    pub transactions: usize,
    pub faults: Faults,
    /// Safety net: a run that has not settled after this many steps is a liveness failure.
    pub steps_max: u64,
}

impl SimOptions {
    /// Options derived from the seed alone, so `specie sim --seed N` needs nothing else.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        SimOptions {
            seed,
            shards: rng.gen_range(1..=4),
            transactions: rng.gen_range(20..=120),
            faults: Faults::default(),
            steps_max: 2_000_000,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct SimReport {
    pub seed: u64,
    pub steps: u64,
    pub submitted: u64,
    pub confirmed: u64,
    pub rejected: u64,
    pub crashes: u64,
    pub messages_dropped: u64,
    pub messages_duplicated: u64,
    /// SHA-256 over every event of the run: equal digests mean identical runs.
    pub trace_digest: [u8; 32],
}

#[derive(Clone, Debug, thiserror::Error)]
#[error("seed {seed}, step {step}: {message} (replay: specie sim --seed {seed} --verbose)")]
pub struct Violation {
    pub seed: u64,
    pub step: u64,
    pub message: String,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Node {
    Coordinator,
    Shard(usize),
}

#[derive(Clone, Debug)]
enum Payload {
    Request(ShardRequest),
    Response(usize, ShardResponse),
}

struct Message {
    deliver_at_ms: u64,
    to: Node,
    payload: Payload,
}

/// A shard on the simulated host, and when it comes back if it is down.
struct SimShard {
    host: SimHost<Shard>,
    restart_at_ms: Option<u64>,
}

struct World {
    options: SimOptions,
    rng: StdRng,
    now_ms: u64,
    step: u64,
    faults_on: bool,
    config: CoordinatorConfig,
    coordinator: SimHost<Coordinator>,
    coordinator_restart_at_ms: Option<u64>,
    shards: Vec<SimShard>,
    network: Vec<Message>,
    trace: Sha256Writer,
    report: SimReport,
    // What the protocol did, observed from outside.
    prepared: BTreeMap<(usize, DtxnId), Vec<ShardTx>>,
    committed: BTreeSet<(usize, DtxnId)>,
    created_ever: BTreeSet<UhsId>,
    spent_ever: BTreeSet<UhsId>,
    // The workload (specie-workload's compact ledger, shared with the cluster world), the
    // replay markers this world adds to mints, and the mints it replays whole.
    ledger: CompactLedger,
    markers: BTreeSet<UhsId>,
    mints: Vec<CompactTransaction>,
    /// Planned and not yet settled with the ledger, as planned (without markers), by txid.
    unsettled: BTreeMap<Txid, CompactTransaction>,
    submitted: BTreeMap<u64, CompactTransaction>,
    confirmed: Vec<CompactTransaction>,
    next_tag: u64,
}

/// Runs one seeded simulation to completion.
pub fn run(options: SimOptions) -> Result<SimReport, Violation> {
    let mut world = World::new(options);
    world.run()?;
    world.report.trace_digest = world.trace.finish();
    Ok(world.report)
}

impl World {
    fn new(options: SimOptions) -> World {
        let ranges = ShardRange::partition(options.shards).expect("1..=1024 shards");
        let mut config = CoordinatorConfig::with_shards(ranges.clone());
        config.batch_transactions_max = 8;
        config.dtxns_in_flight_max = 3;
        config.retry_timeout_ms = 100;
        let coordinator_config = config.clone();
        let coordinator = SimHost::start("coordinator", move || {
            Coordinator::new(coordinator_config.clone(), CoordinatorState::default())
        });
        World {
            rng: StdRng::seed_from_u64(options.seed),
            report: SimReport {
                seed: options.seed,
                ..SimReport::default()
            },
            options,
            now_ms: 0,
            step: 0,
            faults_on: true,
            config,
            coordinator,
            coordinator_restart_at_ms: None,
            shards: ranges
                .into_iter()
                .enumerate()
                .map(|(index, range)| SimShard {
                    host: SimHost::start(format!("shard {index}"), move || Shard::empty(range)),
                    restart_at_ms: None,
                })
                .collect(),
            network: vec![],
            trace: Sha256Writer::new(),
            prepared: BTreeMap::new(),
            committed: BTreeSet::new(),
            created_ever: BTreeSet::new(),
            spent_ever: BTreeSet::new(),
            ledger: CompactLedger::new(),
            markers: BTreeSet::new(),
            mints: vec![],
            unsettled: BTreeMap::new(),
            submitted: BTreeMap::new(),
            confirmed: vec![],
            next_tag: 0,
        }
    }

    fn violation(&self, message: impl Into<String>) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: message.into(),
        }
    }

    fn record(&mut self, event: &str, bytes: &[u8]) {
        self.trace.update(&self.now_ms.to_le_bytes());
        self.trace.update(event.as_bytes());
        self.trace.update(bytes);
    }

    fn run(&mut self) -> Result<(), Violation> {
        loop {
            self.step += 1;
            if self.step > self.options.steps_max {
                return Err(self.violation("no quiescence: some dtxn never finished"));
            }
            let workload_left = (self.report.submitted as usize) < self.options.transactions;
            if self.faults_on && !workload_left && self.rng.gen_bool(0.001) {
                // Faults stop a while after the last submission; from now on the system must settle.
                self.faults_on = false;
                self.record("faults-off", &[]);
            }
            if workload_left && self.coordinator.is_up() && self.rng.gen_bool(0.05) {
                self.submit_some()?;
            }
            if self.faults_on && self.rng.gen_range(0..1000) < self.options.faults.crash_per_mille {
                self.crash_someone();
            }
            self.restart_due()?;
            if !self.deliver_one()? {
                if !workload_left && !self.faults_on && self.is_quiescent() {
                    return self.final_checks();
                }
                self.now_ms += 1;
            }
            let events = self.coordinator.tick(self.now_ms);
            self.coordinator_events(events)?;
            self.check_step()?;
        }
    }

    fn is_quiescent(&self) -> bool {
        let restarts_pending =
            self.coordinator_restart_at_ms.is_some() || self.shards.iter().any(|s| s.restart_at_ms.is_some());
        let coordinator_idle = self
            .coordinator
            .role()
            .is_some_and(|c| c.state().active().is_empty() && c.queued() == 0);
        self.network.is_empty() && !restarts_pending && coordinator_idle
    }

    fn send(&mut self, to: Node, payload: Payload) {
        if self.faults_on && self.rng.gen_range(0..1000) < self.options.faults.drop_per_mille {
            self.report.messages_dropped += 1;
            return;
        }
        let copies = if self.faults_on && self.rng.gen_range(0..1000) < self.options.faults.duplicate_per_mille {
            self.report.messages_duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if self.faults_on {
                self.rng.gen_range(0..=self.options.faults.delay_ms_max)
            } else {
                0
            };
            self.network.push(Message {
                deliver_at_ms: self.now_ms + delay,
                to,
                payload: payload.clone(),
            });
        }
    }

    /// Delivers one message that is due, chosen at random among them (reordering).
    fn deliver_one(&mut self) -> Result<bool, Violation> {
        let due: Vec<usize> = (0..self.network.len())
            .filter(|i| self.network[*i].deliver_at_ms <= self.now_ms)
            .collect();
        if due.is_empty() {
            return Ok(false);
        }
        let message = self.network.swap_remove(due[self.rng.gen_range(0..due.len())]);
        match (message.to, message.payload) {
            (Node::Shard(shard), Payload::Request(request)) => self.shard_receives(shard, request)?,
            (Node::Coordinator, Payload::Response(shard, response)) => {
                self.record("to-coordinator", &response.encode());
                let events = (self.coordinator).handle(self.now_ms, CoordinatorInput::ShardAnswer { shard, response });
                self.coordinator_events(events)?;
            }
            _ => unreachable!("requests go to shards, responses to the coordinator"),
        }
        Ok(true)
    }

    fn shard_receives(&mut self, index: usize, request: ShardRequest) -> Result<(), Violation> {
        self.record("to-shard", &request.encode());
        // A crashed shard loses the message (no events); a running one makes the request durable,
        // applies it and answers it.
        let input = ShardInput::Request {
            ticket: self.step,
            command: ShardCommand {
                coordinator: 0,
                request: request.clone(),
            },
        };
        for event in self.shards[index].host.handle(self.now_ms, input) {
            match event {
                SimEvent::Durable(_) => {}
                SimEvent::Reply {
                    reply: ShardReply::Response(response),
                    ..
                } => self.shard_answered(index, &request, response)?,
                other => return Err(self.violation(format!("shard {index} did what no shard does: {other:?}"))),
            }
        }
        Ok(())
    }

    /// Checks what a shard answered against the model, and sends the answer back.
    fn shard_answered(
        &mut self,
        index: usize,
        request: &ShardRequest,
        response: ShardResponse,
    ) -> Result<(), Violation> {
        match (request, &response) {
            (ShardRequest::Prepare { dtxn, txs }, ShardResponse::Prepared { .. }) => {
                self.prepared.entry((index, *dtxn)).or_insert_with(|| txs.clone());
            }
            // Only the first commit of a dtxn changes anything; re-sent ones are answered from memory.
            (ShardRequest::Commit { dtxn, complete }, ShardResponse::Committed { .. })
                if self.committed.insert((index, *dtxn)) =>
            {
                let txs = self.prepared.get(&(index, *dtxn)).cloned().unwrap_or_default();
                for (tx, done) in txs.iter().zip(complete) {
                    if !*done {
                        continue;
                    }
                    for id in &tx.spent {
                        if !self.spent_ever.insert(*id) {
                            return Err(self.violation(format!("UHS id {} spent twice", hex::encode(id.0))));
                        }
                    }
                    for id in &tx.created {
                        if !self.created_ever.insert(*id) {
                            return Err(self.violation(format!("UHS id {} created twice", hex::encode(id.0))));
                        }
                    }
                }
            }
            (_, ShardResponse::Refused { reason, .. }) => {
                return Err(self.violation(format!("shard {index} refused {request:?}: {reason}")));
            }
            _ => {}
        }
        if !matches!(response, ShardResponse::Discarded { .. }) {
            self.send(Node::Coordinator, Payload::Response(index, response));
        }
        Ok(())
    }

    /// Routes what the coordinator did: its durable commands to the trace, its requests to the
    /// network, its outcomes to the model.
    fn coordinator_events(&mut self, events: Vec<SimEvent<Coordinator>>) -> Result<(), Violation> {
        for event in events {
            match event {
                SimEvent::Durable(bytes) => self.record("durable", &bytes),
                SimEvent::Send { to, message } => self.send(Node::Shard(to), Payload::Request(message)),
                SimEvent::Reply { ticket, reply } => {
                    let tx = self.submitted.remove(&ticket);
                    self.settled(reply, tx)?;
                }
                SimEvent::Report(CoordinatorReport::Settled(outcome)) => self.settled(outcome, None)?,
                SimEvent::Report(CoordinatorReport::ShardRefused { shard, response }) => {
                    return Err(self.violation(format!("shard {shard} refused: {response:?}")));
                }
                SimEvent::Report(CoordinatorReport::Finished(times)) if times.transactions == 0 => {
                    return Err(self.violation(format!("an empty dtxn finished: {times:?}")));
                }
                SimEvent::Report(CoordinatorReport::Finished(_)) => {}
            }
        }
        Ok(())
    }

    /// Counts an outcome; `tx` when its submitter still waits for it.
    fn settled(&mut self, outcome: TxOutcome, tx: Option<CompactTransaction>) -> Result<(), Violation> {
        self.record("outcome", &outcome.txid.0);
        // The first final outcome of a planned transaction is its fate, and an outcome reported
        // again after a restart changes nothing. A mint's whole replays share its txid, so only
        // its confirmation settles it (a mint spends nothing: unsettled, it simply never counts).
        let applied = outcome.result == TxResult::Confirmed;
        let is_mint = self.unsettled.get(&outcome.txid).is_some_and(|tx| tx.spent.is_empty());
        let is_final = matches!(outcome.result, TxResult::Rejected(_) | TxResult::Dropped);
        if applied || (is_final && !is_mint) {
            if let Some(planned) = self.unsettled.remove(&outcome.txid) {
                if let Err(violation) = self.ledger.settle(&planned, applied) {
                    return Err(self.violation(violation.to_string()));
                }
            }
        }
        match outcome.result {
            TxResult::Confirmed => {
                self.report.confirmed += 1;
                if let Some(tx) = tx {
                    self.confirmed.push(tx);
                }
            }
            TxResult::Rejected(_) => self.report.rejected += 1,
            TxResult::Dropped => {}
            // Turned away at the door (its queue full): it was never submitted.
            TxResult::Refused(SubmitError::Busy { .. }) => self.report.submitted -= 1,
            TxResult::Refused(error) => {
                return Err(self.violation(format!("coordinator refused a submission: {error}")))
            }
        }
        Ok(())
    }

    fn crash_someone(&mut self) {
        let target = self.rng.gen_range(0..=self.shards.len());
        let restart_at = self.now_ms + self.rng.gen_range(1..=self.options.faults.restart_ms_max);
        if target == self.shards.len() {
            if self.coordinator.crash() {
                // The leader's memory, its unsent outputs and its clients' pending replies die.
                self.coordinator_restart_at_ms = Some(restart_at);
                self.network.retain(|m| m.to != Node::Coordinator);
                self.report.crashes += 1;
                self.record("crash-coordinator", &[]);
            }
        } else if self.shards[target].host.crash() {
            self.shards[target].restart_at_ms = Some(restart_at);
            self.network.retain(|m| m.to != Node::Shard(target));
            self.report.crashes += 1;
            self.record("crash-shard", &(target as u64).to_le_bytes());
        }
    }

    /// Restarts roles whose time has come (all of them once faults are off), from their logs.
    fn restart_due(&mut self) -> Result<(), Violation> {
        let due = |at: Option<u64>, now: u64, faults_on: bool| at.is_some_and(|at| at <= now || !faults_on);
        if due(self.coordinator_restart_at_ms, self.now_ms, self.faults_on) {
            self.coordinator_restart_at_ms = None;
            let events = self
                .coordinator
                .restart(self.now_ms)
                .map_err(|error| self.violation(error.to_string()))?;
            self.record("restart-coordinator", &[]);
            self.coordinator_events(events)?;
        }
        for index in 0..self.shards.len() {
            if !due(self.shards[index].restart_at_ms, self.now_ms, self.faults_on) {
                continue;
            }
            self.shards[index].restart_at_ms = None;
            let resumed = self.shards[index]
                .host
                .restart(self.now_ms)
                .map_err(|error| self.violation(error.to_string()))?;
            if !resumed.is_empty() {
                return Err(self.violation(format!("shard {index} acted on its own after a restart")));
            }
            self.record("restart-shard", &(index as u64).to_le_bytes());
        }
        Ok(())
    }

    fn check_step(&self) -> Result<(), Violation> {
        for (index, shard) in self.shards.iter().enumerate() {
            if let Some(shard) = shard.host.role() {
                shard
                    .state()
                    .check_invariants()
                    .map_err(|e| self.violation(format!("shard {index}: {e}")))?;
            }
        }
        // Durability: a confirmed transaction's outputs exist, unless a later one spent them.
        for tx in &self.confirmed {
            for id in &tx.created {
                if !self.created_ever.contains(id) {
                    return Err(self.violation(format!("confirmed {} but its output was never created", tx.txid)));
                }
                let owner = ShardRange::owner(&self.config.shards, id);
                let present = self.shards[owner]
                    .host
                    .role()
                    .is_none_or(|shard| shard.state().contains(id));
                if !present && !self.spent_ever.contains(id) {
                    return Err(self.violation(format!("confirmed output of {} vanished", tx.txid)));
                }
            }
        }
        Ok(())
    }

    fn final_checks(&mut self) -> Result<(), Violation> {
        let mut uhs = Vec::new();
        for (index, shard) in self.shards.iter().enumerate() {
            let state = shard.host.role().expect("all restarted").state();
            if state.stats().locked_ids != 0 {
                return Err(self.violation(format!("shard {index} still holds locks after every dtxn finished")));
            }
            for id in state.sorted_ids() {
                if !self.created_ever.contains(&id) || self.spent_ever.contains(&id) {
                    return Err(self.violation(format!("shard {index} holds an id the protocol never created")));
                }
                uhs.push(id);
            }
        }
        // The model's view (every outcome the coordinator reported) must match the UHS: no
        // unknown or spent id, and exactly the value the applied mints created.
        let without_markers = uhs.into_iter().filter(|id| !self.markers.contains(id));
        if let Err(violation) = self.ledger.audit(without_markers) {
            return Err(self.violation(violation.to_string()));
        }
        self.report.steps = self.step;
        Ok(())
    }

    /// A few transactions from the shared workload (mints, transfers, replays of spent ids,
    /// conflicting pairs, unknown inputs), plus replays of whole earlier mints; every mint gets a
    /// never-spendable marker beside its outputs, so that its replay cannot apply.
    fn submit_some(&mut self) -> Result<(), Violation> {
        const MIX: CompactMix = CompactMix {
            mint_per_mille: 150,
            replay_per_mille: 100,
            conflict_per_mille: 70,
            unknown_input_per_mille: 30,
        };
        let mut txs: Vec<CompactTransaction> = vec![];
        for _ in 0..self.rng.gen_range(1..=4) {
            if self.rng.gen_range(0..100) < 5 && !self.mints.is_empty() {
                txs.push(self.mints[self.rng.gen_range(0..self.mints.len())].clone());
                continue;
            }
            for planned in self.ledger.plan(&mut self.rng, &MIX) {
                self.unsettled.insert(planned.tx.txid, planned.tx.clone());
                let mut tx = planned.tx;
                if tx.spent.is_empty() {
                    let marker = UhsId(self.rng.gen());
                    self.markers.insert(marker);
                    tx.created.push(marker);
                    self.mints.push(tx.clone());
                }
                txs.push(tx);
            }
        }
        for tx in txs {
            let ticket = self.next_tag;
            self.next_tag += 1;
            self.trace.update(&tx.encode());
            self.submitted.insert(ticket, tx.clone());
            self.report.submitted += 1;
            let events = self
                .coordinator
                .handle(self.now_ms, CoordinatorInput::Submit { ticket, tx });
            self.coordinator_events(events)?;
        }
        Ok(())
    }
}
