//! The ledger of record as a cluster's archiver group runs it: the real replicated role
//! ([`specie_archiver::Archiver`]) on the simulated host, which crashes (losing the role's memory)
//! and restarts from its durable log as a new leader.
//!
//! Simulated sentinels take payments from the same workload as [`super::ledger`] (double spends
//! among them, and transactions submitted twice, in one batch or by another sentinel later), write
//! each batch ahead, and hand it to the ordering group only once the archiver answered `Written`. A
//! compromised sentinel submits, right after a write-ahead, a forged compact form of one of its
//! transactions: under the written txid (same inputs, other outputs) or under a txid never written.
//! The ordering leader (`specie-cluster`'s `LedgerGate`) asks the role which transactions are
//! written ahead in the very compact form submitted (`Archiver::written_ahead`, read from the
//! applied state as the archiver replica does), orders only those (a forgery is submitted alone,
//! and an honest batch must pass whole), has the model UHS decide them in order, and reports the
//! outcomes. It may die before reporting, report only some (the others dropped in a failover), or
//! report late. The archiver leader's driver asks for the stale records, reads the model UHS for
//! the ids they create and hands the evidence back, each at its own random moment, as
//! `archiver_replica`'s `reconcile` does; time advances and seals come from the role's timer.
//!
//! Checked at every step: an honest batch written ahead passes the gate, a forgery never does; the
//! role's invariants; the blocks (read from the role) chain from genesis, hold only transactions
//! the UHS committed, each in one block only, and none is lost across a restart; every record
//! waiting for a block was committed. Once the run settles (every outcome delivered, time past
//! `decide_after_ms`, the stale records decided, time past `seal_interval_ms`): nothing is
//! undecided or waiting, the ledger replays to the model UHS, every committed transaction is in
//! exactly one block, and a replica restored from the role's snapshot has the same head.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use specie_archiver::{
    Archiver, ArchiverConfig, ArchiverInput, ArchiverReply, ArchiverReport, Block, BlockHeader, LedgerLimits,
    LedgerRead, LedgerReply, Record,
};
use specie_host::{SimEvent, SimHost};
use specie_role::Durable;
use specie_transaction::{CompactTransaction, Txid, UhsId};

use super::ledger::{ModelUhs, Payers};
use super::{chance, violation, PrivacyOptions, PrivacyReport};
use crate::Violation;

/// The most simulated time one step takes.
const STEP_MS_MAX: u64 = 150;
/// Transactions one sentinel batch takes from the payers at most (each may be sent twice).
const BATCH_TRANSACTIONS_MAX: usize = 4;
/// Reconciliation rounds the settled run may take before what is left undecided is a violation.
const SETTLE_ROUNDS_MAX: usize = 64;

/// The leader's driver: between its questions, the world goes on.
enum Driver {
    Idle,
    /// The leader answered which records are stale.
    Asked(Vec<(Txid, Vec<UhsId>)>),
    /// The shards answered which of the ids those records create they hold.
    Read {
        asked: Vec<Txid>,
        present: Vec<UhsId>,
    },
}

struct World<'a> {
    options: &'a PrivacyOptions,
    report: &'a mut PrivacyReport,
    trace: &'a mut Sha256,
    rng: StdRng,
    step: u64,
    now_ms: u64,
    config: ArchiverConfig,
    host: SimHost<Archiver>,
    uhs: ModelUhs,
    payers: Payers,
    /// The compromised sentinel's own randomness, so that a run whose forgeries are all refused
    /// is the run of the same seed without them.
    adversary: StdRng,
    /// Transactions another sentinel submits again later.
    resubmit: Vec<Record>,
    /// Ordering leaders' reports on their way, delivered at a later step.
    late: Vec<Vec<(Txid, bool)>>,
    driver: Driver,
    next_ticket: u64,
    /// The blocks read from the role so far, and every transaction in one, with its height.
    headers: Vec<BlockHeader>,
    sealed: BTreeMap<Txid, u64>,
}

/// The role's configuration for this seed.
fn config(options: &PrivacyOptions) -> ArchiverConfig {
    ArchiverConfig {
        ledger: LedgerLimits {
            block_records_max: options.block_records_max,
            waiting_records_max: options.archiver_waiting_records_max,
        },
        seal_interval_ms: options.archiver_seal_interval_ms,
        decide_after_ms: options.archiver_decide_after_ms,
        undecided_max: options.archiver_undecided_max,
        batch_records_max: options.archiver_batch_records_max,
    }
}

pub(super) fn run(options: &PrivacyOptions, report: &mut PrivacyReport, trace: &mut Sha256) -> Result<(), Violation> {
    let config = config(options);
    let mut world = World {
        options,
        report,
        trace,
        rng: StdRng::seed_from_u64(options.seed ^ 0xa2c1_1e55),
        step: 0,
        now_ms: 0,
        config,
        host: SimHost::start("archiver", move || Archiver::new(config)),
        uhs: ModelUhs::default(),
        payers: Payers::new(),
        adversary: StdRng::seed_from_u64(options.seed ^ 0xf0e9_ed00),
        resubmit: Vec::new(),
        late: Vec::new(),
        driver: Driver::Idle,
        next_ticket: 0,
        headers: Vec::new(),
        sealed: BTreeMap::new(),
    };
    while world.step < options.archiver_steps {
        world.step += 1;
        world.act()?;
    }
    world.step += 1;
    world.settle()
}

impl World<'_> {
    fn violation(&self, message: impl Into<String>) -> Violation {
        violation(
            self.options,
            self.step,
            format!("replicated archiver: {}", message.into()),
        )
    }

    fn act(&mut self) -> Result<(), Violation> {
        self.now_ms += self.rng.gen_range(0..=STEP_MS_MAX);
        if !self.host.is_up() && self.rng.gen_bool(0.5) {
            self.restart()?;
        }
        let events = self.host.tick(self.now_ms);
        self.absorb(events);
        for _ in 0..self.rng.gen_range(1..=2) {
            self.sentinel()?;
        }
        if !self.late.is_empty() && self.rng.gen_bool(0.5) {
            let index = self.rng.gen_range(0..self.late.len());
            let outcomes = self.late.swap_remove(index);
            self.report_outcomes(outcomes);
        }
        if chance(&mut self.rng, self.options.archiver_reconcile_per_mille) {
            let at_once = self.rng.gen_bool(0.5);
            self.drive(at_once);
        }
        if chance(&mut self.rng, self.options.archiver_crash_per_mille) && self.host.crash() {
            // The driver runs beside the leader, and dies with it.
            self.driver = Driver::Idle;
            self.report.archiver_crashes += 1;
            self.trace.update(b"archiver crash");
        }
        self.check_step()
    }

    fn restart(&mut self) -> Result<(), Violation> {
        let events = self
            .host
            .restart(self.now_ms)
            .map_err(|e| self.violation(format!("the restart failed: {e}")))?;
        self.absorb(events);
        self.trace.update(b"archiver restart");
        Ok(())
    }

    /// Hands the role one input built around a fresh ticket; its reply, `None` while it is down.
    fn ask(&mut self, input: impl FnOnce(u64) -> ArchiverInput) -> Option<ArchiverReply> {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        let events = self.host.handle(self.now_ms, input(ticket));
        let mut answer = None;
        for event in events {
            match event {
                SimEvent::Reply { ticket: t, reply } if t == ticket => answer = Some(reply),
                other => self.absorb([other]),
            }
        }
        answer
    }

    fn absorb(&mut self, events: impl IntoIterator<Item = SimEvent<Archiver>>) {
        for event in events {
            match event {
                SimEvent::Report(ArchiverReport::Settled {
                    committed,
                    not_committed,
                }) => {
                    self.report.archiver_settled_committed += committed as u64;
                    self.report.archiver_settled_not_committed += not_committed as u64;
                }
                SimEvent::Report(ArchiverReport::WaitingRoomFull { .. }) => self.report.archiver_waiting_room_full += 1,
                SimEvent::Durable(bytes) => self.trace.update(&bytes),
                SimEvent::Reply { .. } | SimEvent::Send { .. } => {}
            }
        }
    }

    /// One sentinel's batch: written ahead, maybe followed by a compromised sentinel's forgery,
    /// ordered through the ledger's gate, and reported (or not).
    fn sentinel(&mut self) -> Result<(), Violation> {
        let batch = self.next_batch()?;
        let records = batch.clone();
        let written = self.ask(|ticket| ArchiverInput::WriteAhead { ticket, records });
        if !matches!(written, Some(ArchiverReply::Written)) {
            // Busy, or no leader: the batch goes no further, and its payers are told so.
            self.report.archiver_not_written += batch.len() as u64;
            for record in &batch {
                self.payers.forget_coins_of(record);
            }
            return Ok(());
        }
        if chance(&mut self.adversary, self.options.sentinel_forges_per_mille) {
            self.forge(&batch)?;
        }
        let submission: Vec<CompactTransaction> = batch.iter().map(|record| record.compact().clone()).collect();
        let Some(mut outcomes) = self.order(&submission) else {
            return Err(self.violation("a batch written ahead is refused at the ledger's gate"));
        };
        let fate = self.rng.gen_range(0..1000);
        if fate < self.options.ordering_leader_dies_per_mille {
            // Dead before answering anyone: the sentinel's payers spend what refused transactions
            // would have created, and are refused again.
            self.report.archiver_outcomes_lost += outcomes.len() as u64;
            return Ok(());
        }
        for (record, (_, committed)) in batch.iter().zip(&outcomes) {
            if !committed {
                self.payers.forget_coins_of(record);
            }
        }
        if fate < self.options.ordering_leader_dies_per_mille + self.options.ordering_leader_partial_per_mille {
            // Some were dropped in a failover: their outcomes are the UHS's to tell.
            let before = outcomes.len();
            outcomes.retain(|_| self.rng.gen_bool(0.5));
            self.report.archiver_outcomes_lost += (before - outcomes.len()) as u64;
        }
        if chance(&mut self.rng, self.options.report_late_per_mille) {
            self.late.push(outcomes);
        } else {
            self.report_outcomes(outcomes);
        }
        Ok(())
    }

    /// A batch of fresh payments, double spends among them, some twice (in the batch, or kept
    /// for another sentinel to submit later).
    fn next_batch(&mut self) -> Result<Vec<Record>, Violation> {
        let mut batch = Vec::new();
        if !self.resubmit.is_empty() && self.rng.gen_bool(0.5) {
            let index = self.rng.gen_range(0..self.resubmit.len());
            batch.push(self.resubmit.swap_remove(index));
        }
        for _ in 0..self.rng.gen_range(1..=BATCH_TRANSACTIONS_MAX) {
            let record = self
                .payers
                .next_record(&mut self.rng, self.options.double_spend_per_mille)
                .map_err(|e| self.violation(e.to_string()))?;
            if chance(&mut self.rng, self.options.submitted_twice_per_mille) {
                if self.rng.gen_bool(0.5) {
                    batch.push(record.clone());
                } else {
                    self.resubmit.push(record.clone());
                }
            }
            batch.push(record);
        }
        Ok(batch)
    }

    /// A compromised sentinel, holding a valid attestation key, submits a compact form of one of
    /// `batch`'s transactions paying itself instead: the shards would apply it, and the ledger
    /// holds (or will hold) the record of another.
    fn forge(&mut self, batch: &[Record]) -> Result<(), Violation> {
        let record = &batch[self.adversary.gen_range(0..batch.len())];
        let mut forged = record.compact().clone();
        let retag = |tag: &[u8], bytes: &[u8; 32]| -> [u8; 32] {
            Sha256::new().chain_update(tag).chain_update(bytes).finalize().into()
        };
        forged.created = (forged.created.iter())
            .map(|id| UhsId(retag(b"forged output", &id.0)))
            .collect();
        if self.adversary.gen_bool(0.5) {
            forged.txid = Txid(retag(b"forged txid", &forged.txid.0));
        }
        self.trace.update(forged.txid.0);
        match self.order(std::slice::from_ref(&forged)) {
            None => {
                self.report.archiver_forgeries_refused += 1;
                Ok(())
            }
            Some(_) if self.options.ordering_skips_ledger_gate => Ok(()),
            Some(_) => Err(self.violation(format!(
                "a forged compact form of {} passes the ledger's gate",
                record.txid()
            ))),
        }
    }

    /// The ordering group's leader takes a submission: unless the archiver says every
    /// transaction is written ahead in this very compact form, nothing is ordered (`None`);
    /// otherwise the UHS decides each in order.
    fn order(&mut self, submission: &[CompactTransaction]) -> Option<Vec<(Txid, bool)>> {
        if !self.options.ordering_skips_ledger_gate {
            let asked: Vec<(Txid, [u8; 32])> = (submission.iter())
                .map(|tx| (tx.txid, tx.attestation_message()))
                .collect();
            let written = self.role().map(|role| role.written_ahead(&asked));
            if !written.is_some_and(|written| written.iter().all(|w| *w)) {
                self.trace.update(b"refused at the gate");
                return None;
            }
        }
        let mut outcomes = Vec::with_capacity(submission.len());
        for tx in submission {
            let committed = self.uhs.decide(tx);
            if committed {
                self.report.archiver_committed += 1;
            } else {
                self.report.archiver_refused += 1;
            }
            self.trace.update(tx.txid.0);
            self.trace.update([u8::from(committed)]);
            outcomes.push((tx.txid, committed));
        }
        Some(outcomes)
    }

    /// An ordering leader's report reaches the archiver's leader, at most once: it never sends
    /// again a report that may have been applied (a cluster's replica answers one it dropped as of
    /// unknown outcome, never as "not the leader").
    fn report_outcomes(&mut self, outcomes: Vec<(Txid, bool)>) {
        let count = outcomes.len() as u64;
        let reply = self.ask(|ticket| ArchiverInput::Outcomes { ticket, outcomes });
        if !matches!(reply, Some(ArchiverReply::Decided)) {
            self.report.archiver_outcomes_lost += count;
        }
    }

    /// The leader's driver takes its next step (all of them when `at_once`): the stale records,
    /// the shards' answer, the evidence.
    fn drive(&mut self, at_once: bool) {
        loop {
            match std::mem::replace(&mut self.driver, Driver::Idle) {
                Driver::Idle => {
                    let Some(ArchiverReply::Stale(stale)) = self.ask(|ticket| ArchiverInput::Stale { ticket }) else {
                        return;
                    };
                    if stale.is_empty() {
                        return;
                    }
                    self.driver = Driver::Asked(stale);
                }
                Driver::Asked(stale) => {
                    let asked: Vec<Txid> = stale.iter().map(|(txid, _)| *txid).collect();
                    let present: Vec<UhsId> = if self.options.archiver_ignores_evidence {
                        Vec::new()
                    } else {
                        (stale.into_iter())
                            .flat_map(|(_, ids)| ids)
                            .filter(|id| self.uhs.unspent.contains(id))
                            .collect()
                    };
                    self.driver = Driver::Read { asked, present };
                }
                Driver::Read { asked, present } => {
                    self.trace.update((asked.len() as u64).to_le_bytes());
                    self.ask(|ticket| ArchiverInput::Evidence { ticket, asked, present });
                    self.report.archiver_evidence_rounds += 1;
                    return;
                }
            }
            if !at_once {
                return;
            }
        }
    }

    fn role(&self) -> Option<&Archiver> {
        self.host.role()
    }

    /// What must hold after every step.
    fn check_step(&mut self) -> Result<(), Violation> {
        let Some(role) = self.role() else {
            return Ok(());
        };
        if let Err(e) = role.check_invariants() {
            return Err(self.violation(format!("the role's invariants fail: {e}")));
        }
        if let Some(record) = (role.ledger().waiting_records()).find(|r| !self.uhs.committed.contains(&r.txid())) {
            return Err(self.violation(format!(
                "transaction {} waits for a block, but the shards never committed it",
                record.txid()
            )));
        }
        self.read_blocks()
    }

    /// Reads the blocks sealed since the last look, through the role, and checks each.
    fn read_blocks(&mut self) -> Result<(), Violation> {
        let Some(height) = self.role().map(|role| role.ledger().height()) else {
            return Ok(());
        };
        let known = self.headers.len() as u64;
        if height < known {
            return Err(self.violation(format!("the ledger is at height {height}, it was at {known}")));
        }
        for at in known + 1..=height {
            let block = match self.ask(|ticket| ArchiverInput::Read {
                ticket,
                read: LedgerRead::Block(at),
            }) {
                Some(ArchiverReply::Read(LedgerReply::Block(Some(block)))) => block,
                other => return Err(self.violation(format!("block {at} is not served: {other:?}"))),
            };
            self.check_block(at, &block)?;
        }
        Ok(())
    }

    fn check_block(&mut self, height: u64, block: &Block) -> Result<(), Violation> {
        let previous = self.headers.last().map_or([0; 32], BlockHeader::hash);
        if block.header.height != height || block.header.previous != previous || !block.commits_to_records_in_order() {
            return Err(self.violation(format!("block {height} does not follow the chain read so far")));
        }
        for record in &block.records {
            let txid = record.txid();
            if !self.uhs.committed.contains(&txid) {
                return Err(self.violation(format!(
                    "transaction {txid} is in block {height}, but the shards never committed it"
                )));
            }
            if let Some(earlier) = self.sealed.insert(txid, height) {
                return Err(self.violation(format!("transaction {txid} is in blocks {earlier} and {height}")));
            }
        }
        self.trace.update(block.header.hash());
        self.report.archiver_blocks += 1;
        self.headers.push(block.header);
        Ok(())
    }

    /// The run settles: the leader is up, every report on its way arrives, the stale records are
    /// decided and what waits is sealed. Then the ledger must be exactly what the UHS committed.
    fn settle(&mut self) -> Result<(), Violation> {
        if !self.host.is_up() {
            self.restart()?;
        }
        for outcomes in std::mem::take(&mut self.late) {
            self.report_outcomes(outcomes);
        }
        self.driver = Driver::Idle;
        self.now_ms += self.config.decide_after_ms;
        let events = self.host.tick(self.now_ms);
        self.absorb(events);
        for _ in 0..SETTLE_ROUNDS_MAX {
            self.drive(true);
            if self.role().map_or(0, Archiver::undecided) == 0 {
                break;
            }
        }
        self.now_ms += self.config.seal_interval_ms;
        let events = self.host.tick(self.now_ms);
        self.absorb(events);
        self.check_step()?;
        self.check_settled()
    }

    fn check_settled(&self) -> Result<(), Violation> {
        let role = self.role().expect("up once settled");
        let head = role.head();
        if let Some(missing) = self.uhs.committed.iter().find(|txid| !self.sealed.contains_key(txid)) {
            return Err(self.violation(format!(
                "committed transaction {missing} is in no block once settled ({} records undecided, {} waiting)",
                head.undecided, head.waiting
            )));
        }
        if head.undecided > 0 || head.waiting > 0 {
            return Err(self.violation(format!(
                "settled, the role still has {} records undecided and {} waiting for a block",
                head.undecided, head.waiting
            )));
        }
        if let Some((txid, height)) =
            (self.sealed.iter()).find(|(txid, height)| role.ledger().locate(txid).map(|at| at.height) != Some(**height))
        {
            return Err(self.violation(format!(
                "transaction {txid} is in block {height}, the ledger locates it elsewhere"
            )));
        }
        let model = self.uhs.digest();
        let (count, digest) = role.ledger().uhs_digest();
        if (count, digest) != model {
            return Err(self.violation(format!(
                "settled, the ledger replays to UHS digest {} over {count} ids, the shards {} over {}",
                hex::encode(&digest[..8]),
                hex::encode(&model.1[..8]),
                model.0
            )));
        }
        let mut restored = Archiver::new(self.config);
        restored
            .restore(&role.snapshot())
            .map_err(|e| self.violation(format!("the role's snapshot is refused: {e}")))?;
        if restored.head() != head {
            return Err(self.violation("a replica restored from the role's snapshot has another head"));
        }
        Ok(())
    }
}
