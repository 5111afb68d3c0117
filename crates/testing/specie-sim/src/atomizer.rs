//! The atomizer's world: the real atomizer and UHS shard roles (`specie_atomizer`) on the
//! simulated host, joined by a network that drops, duplicates, delays and reorders their
//! messages, with the atomizer and the shards crashing and restarting from their logs. Clients
//! submit valid spends, double spends (two at once, or of an id already spent), mints and
//! replayed mints. A small window and small blocks make attestations go stale, backpressure
//! hold blocks back and resends fire. Checked:
//! - every durable block, replayed in order on a model UHS from genesis, spends only ids present
//!   and creates only ids absent (no id spent twice, none created while it exists);
//! - a transaction answered confirmed is in exactly one durable block, one answered otherwise
//!   (or whose caller was lost to a crash) is in none, and none is in two;
//! - every shard that is up holds exactly the model UHS at its height, within its range;
//! - once the network heals and crashes stop: every shard applies every block before the
//!   atomizer goes quiet, and every transaction then submitted that spends confirmed unspent ids
//!   and conflicts with nothing is confirmed.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{DefaultHasher, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use specie_atomizer::{
    Atomizer, AtomizerBlock, AtomizerConfig, AtomizerInput, AtomizerLimits, AtomizerReport, ShardAnswer, ShardMessage,
    UhsShard, UhsShardInput, UhsShardReply,
};
use specie_codec::Decode;
use specie_coordinator::{SubmitError, TxOutcome, TxResult};
use specie_host::{SimEvent, SimHost};
use specie_role::Role;
use specie_shard::ShardRange;
use specie_transaction::{CompactTransaction, Txid, UhsId};

use crate::Violation;

/// Virtual time the healed phase may take to go quiet before the world calls it stuck.
const HEALED_MS_MAX: u64 = 30_000;
/// Attestations the replaying network keeps (the latest) to deliver again after a restart.
const REPLAYED_ANSWERS_MAX: usize = 256;

/// A fault the world plants on purpose, to show what the checks catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomizerPlantedFault {
    None,
    /// A hostile network: after every restart of the atomizer, every attestation an earlier
    /// incarnation heard is delivered again. Harmless to a correct atomizer (those answers are
    /// to rounds it never asked), so the world must pass.
    ReplayAttestations,
    /// A lying shard: after the atomizer's first restart, shard 0 attests every id as present.
    /// Outside the trust model (the atomizer believes its shards), so the double spends it lets
    /// through must be caught by the world.
    LyingShard,
}

#[derive(Clone, Debug)]
pub struct AtomizerWorldOptions {
    pub seed: u64,
    pub shards: usize,
    pub window_blocks: u64,
    pub block_transactions_max: usize,
    pub queue_transactions_max: usize,
    pub attest_tries_max: u32,
    pub resend_after_ms: u64,
    pub genesis_ids: usize,
    pub faulty_steps: u64,
    /// Transactions submitted once the world is healed and quiet (at most the queue's bound).
    pub healed_transactions: usize,
    pub delay_ms_max: u64,
    pub drop_per_mille: u32,
    pub duplicate_per_mille: u32,
    /// Per step and per role that is up.
    pub crash_per_mille: u32,
    /// Per step and per role that is down.
    pub restart_per_mille: u32,
    pub submit_per_mille: u32,
    pub planted: AtomizerPlantedFault,
}

impl AtomizerWorldOptions {
    pub fn from_seed(seed: u64) -> AtomizerWorldOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xa70_312e);
        AtomizerWorldOptions {
            seed,
            shards: rng.gen_range(1..=4),
            window_blocks: rng.gen_range(4..=16),
            block_transactions_max: rng.gen_range(1..=6),
            queue_transactions_max: rng.gen_range(8..=40),
            attest_tries_max: rng.gen_range(0..=3),
            resend_after_ms: rng.gen_range(10..=60),
            genesis_ids: rng.gen_range(8..=40),
            faulty_steps: rng.gen_range(100..=300),
            healed_transactions: rng.gen_range(4..=8),
            delay_ms_max: rng.gen_range(1..=150),
            drop_per_mille: rng.gen_range(0..=150),
            duplicate_per_mille: rng.gen_range(0..=200),
            crash_per_mille: rng.gen_range(0..=40),
            restart_per_mille: rng.gen_range(100..=500),
            submit_per_mille: rng.gen_range(200..=800),
            planted: AtomizerPlantedFault::None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AtomizerWorldReport {
    pub blocks: u64,
    pub submitted: u64,
    pub confirmed: u64,
    pub rejected: u64,
    pub dropped: u64,
    pub busy: u64,
    /// Callers the atomizer forgot when it crashed (allowed: they get no answer).
    pub lost_to_crashes: u64,
    pub double_spends: u64,
    pub replayed_mints: u64,
    /// Attestations that reached the atomizer older than its window.
    pub stale_attestations: u64,
    /// Requests and blocks the atomizer sent again on a time-out.
    pub resends: u64,
    pub misbehaving_answers: u64,
    pub too_far_behind: u64,
    /// The leader's reports of its rounds attested and its blocks confirmed (for its metrics).
    pub rounds_attested: u64,
    pub blocks_finished: u64,
    pub transactions_finished: u64,
    pub healed_confirmed: u64,
    pub atomizer_crashes: u64,
    pub shard_crashes: u64,
    pub messages_dropped: u64,
    pub messages_duplicated: u64,
    pub trace_digest: u64,
}

#[derive(Clone, Debug)]
enum Packet {
    ToShard { shard: usize, message: ShardMessage },
    ToAtomizer { shard: usize, answer: ShardAnswer },
}

struct Submitted {
    tx: CompactTransaction,
    /// Submitted healed, spending confirmed unspent ids and conflicting with nothing.
    must_confirm: bool,
}

struct World {
    options: AtomizerWorldOptions,
    rng: StdRng,
    step: u64,
    now_ms: u64,
    faulty: bool,
    atomizer: SimHost<Atomizer>,
    shards: Vec<SimHost<UhsShard>>,
    /// In flight, by delivery time then sending order.
    network: BTreeMap<(u64, u64), Packet>,
    next_packet: u64,
    next_ticket: u64,
    /// The model UHS after each durable block (index: height; 0 is genesis).
    history: Vec<BTreeSet<UhsId>>,
    ever_spent: Vec<UhsId>,
    block_of: HashMap<Txid, u64>,
    /// Answered as anything but confirmed, or forgotten by a crash: never in a block.
    kept_out: HashSet<Txid>,
    waiting: BTreeMap<u64, Submitted>,
    /// Ids spent by transactions still waiting, with how many of them spend each.
    reserved: HashMap<UhsId, u32>,
    heard: Vec<(usize, ShardAnswer)>,
    lying: bool,
    report: AtomizerWorldReport,
    trace: DefaultHasher,
}

pub fn run_atomizer(options: AtomizerWorldOptions) -> Result<AtomizerWorldReport, Violation> {
    let mut world = World::new(options);
    while world.step < world.options.faulty_steps {
        world.step += 1;
        world.faulty_step()?;
    }
    world.heal()?;
    world.report.trace_digest = world.trace.finish();
    Ok(world.report)
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(message), _) => message.clone(),
        (None, Some(message)) => (*message).to_string(),
        (None, None) => "(no message)".to_string(),
    }
}

fn random_id(rng: &mut StdRng) -> UhsId {
    UhsId(rng.gen())
}

impl World {
    fn new(options: AtomizerWorldOptions) -> World {
        let mut rng = StdRng::seed_from_u64(options.seed);
        let ranges = ShardRange::partition(options.shards).expect("1 to 4 shards");
        let genesis: BTreeSet<UhsId> = (0..options.genesis_ids).map(|_| random_id(&mut rng)).collect();
        let shards = ranges
            .iter()
            .enumerate()
            .map(|(index, range)| {
                let (range, owned) = (*range, genesis.clone());
                SimHost::start(format!("uhs shard {index}"), move || {
                    UhsShard::with_unspent(range, owned.iter().filter(|id| range.contains(id)).copied())
                })
            })
            .collect();
        let config = AtomizerConfig {
            block_transactions_max: options.block_transactions_max,
            queue_transactions_max: options.queue_transactions_max,
            window_blocks: options.window_blocks,
            resend_after_ms: options.resend_after_ms,
            attest_tries_max: options.attest_tries_max,
            ..AtomizerConfig::with_shards(ranges)
        };
        World {
            rng,
            step: 0,
            now_ms: 0,
            faulty: true,
            atomizer: SimHost::start("atomizer", move || Atomizer::new(config.clone())),
            shards,
            network: BTreeMap::new(),
            next_packet: 0,
            next_ticket: 0,
            history: vec![genesis],
            ever_spent: Vec::new(),
            block_of: HashMap::new(),
            kept_out: HashSet::new(),
            waiting: BTreeMap::new(),
            reserved: HashMap::new(),
            heard: Vec::new(),
            lying: false,
            report: AtomizerWorldReport::default(),
            trace: DefaultHasher::new(),
            options,
        }
    }

    fn violation(&self, message: impl Into<String>) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: format!("atomizer world (t = {} ms): {}", self.now_ms, message.into()),
        }
    }

    fn panicked(&self, who: &str, panic: &(dyn Any + Send)) -> Violation {
        self.violation(format!("{who} panicked: {}", panic_message(panic)))
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        self.rng.gen_range(0..1000) < per_mille
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    fn uhs(&self) -> &BTreeSet<UhsId> {
        self.history.last().expect("genesis is always there")
    }

    fn faulty_step(&mut self) -> Result<(), Violation> {
        if self.atomizer.is_up() && self.chance(self.options.submit_per_mille) {
            let txs = self.workload();
            self.submit(txs, false)?;
        }
        self.deliver_due()?;
        self.tick()?;
        self.crash_or_restart()?;
        self.check_shards()?;
        self.now_ms += self.rng.gen_range(1..=self.options.resend_after_ms);
        Ok(())
    }

    /// Ids of the model UHS that no waiting transaction spends, in a seeded order.
    fn available(&mut self) -> Vec<UhsId> {
        let mut ids: Vec<UhsId> = self
            .uhs()
            .iter()
            .filter(|id| !self.reserved.contains_key(id))
            .copied()
            .collect();
        ids.shuffle(&mut self.rng);
        ids
    }

    fn transaction(&mut self, spent: Vec<UhsId>, created: Vec<UhsId>) -> CompactTransaction {
        CompactTransaction {
            txid: Txid(self.rng.gen()),
            spent,
            created,
            attestations: Default::default(),
        }
    }

    fn fresh_ids(&mut self) -> Vec<UhsId> {
        let count = self.rng.gen_range(1..=2);
        (0..count).map(|_| random_id(&mut self.rng)).collect()
    }

    /// One turn's submissions: valid spends, double spends, mints and replayed mints.
    fn workload(&mut self) -> Vec<CompactTransaction> {
        let mut available = self.available();
        let mut txs = Vec::new();
        for _ in 0..self.rng.gen_range(1..=4) {
            let created = self.fresh_ids();
            match self.rng.gen_range(0..10) {
                0..=4 if !available.is_empty() => {
                    let take = self.rng.gen_range(1..=2).min(available.len());
                    let spent = available.split_off(available.len() - take);
                    txs.push(self.transaction(spent, created));
                }
                5 if !available.is_empty() => {
                    let id = available.pop().expect("not empty");
                    let other = self.fresh_ids();
                    txs.push(self.transaction(vec![id], created));
                    txs.push(self.transaction(vec![id], other));
                    self.report.double_spends += 1;
                }
                6 if !self.ever_spent.is_empty() => {
                    let id = *self.ever_spent.choose(&mut self.rng).expect("not empty");
                    txs.push(self.transaction(vec![id], created));
                    self.report.double_spends += 1;
                }
                7 if !self.uhs().is_empty() => {
                    let existing: Vec<UhsId> = self.uhs().iter().copied().collect();
                    let id = *existing.choose(&mut self.rng).expect("not empty");
                    txs.push(self.transaction(vec![], vec![id]));
                    self.report.replayed_mints += 1;
                }
                _ => txs.push(self.transaction(vec![], created)),
            }
        }
        txs
    }

    fn submit(&mut self, txs: Vec<CompactTransaction>, must_confirm: bool) -> Result<(), Violation> {
        let mut inputs = Vec::with_capacity(txs.len());
        for tx in txs {
            let ticket = self.ticket();
            tx.spent
                .iter()
                .for_each(|id| *self.reserved.entry(*id).or_default() += 1);
            inputs.push(AtomizerInput::Submit { ticket, tx: tx.clone() });
            self.waiting.insert(ticket, Submitted { tx, must_confirm });
            self.report.submitted += 1;
        }
        self.hand_atomizer(inputs)
    }

    fn release(&mut self, tx: &CompactTransaction) {
        for id in &tx.spent {
            if let Some(count) = self.reserved.get_mut(id) {
                *count -= 1;
                if *count == 0 {
                    self.reserved.remove(id);
                }
            }
        }
    }

    fn send(&mut self, packet: Packet) {
        if self.faulty && self.chance(self.options.drop_per_mille) {
            self.report.messages_dropped += 1;
            return;
        }
        let copies = if self.faulty && self.chance(self.options.duplicate_per_mille) {
            self.report.messages_duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay_ms_max = if self.faulty { self.options.delay_ms_max } else { 3 };
            let delay = self.rng.gen_range(1..=delay_ms_max);
            self.next_packet += 1;
            self.network
                .insert((self.now_ms + delay, self.next_packet), packet.clone());
        }
    }

    fn deliver_due(&mut self) -> Result<(), Violation> {
        while let Some(entry) = self.network.first_entry() {
            if entry.key().0 > self.now_ms {
                break;
            }
            let ((_, order), packet) = entry.remove_entry();
            self.trace.write_u64(order);
            match packet {
                Packet::ToShard { shard, message } => self.deliver_to_shard(shard, message)?,
                Packet::ToAtomizer { shard, answer } => self.answer_atomizer(shard, answer)?,
            }
        }
        Ok(())
    }

    fn deliver_to_shard(&mut self, shard: usize, message: ShardMessage) -> Result<(), Violation> {
        let (ticket, now_ms) = (self.ticket(), self.now_ms);
        let host = &mut self.shards[shard];
        let events = catch_unwind(AssertUnwindSafe(|| {
            host.handle(now_ms, UhsShardInput::Atomizer { ticket, message })
        }))
        .map_err(|panic| self.panicked(&format!("shard {shard}"), panic.as_ref()))?;
        self.take_shard_events(shard, events)
    }

    fn take_shard_events(&mut self, shard: usize, events: Vec<SimEvent<UhsShard>>) -> Result<(), Violation> {
        for event in events {
            match event {
                SimEvent::Durable(bytes) => self.trace.write(&bytes),
                SimEvent::Reply {
                    reply: UhsShardReply::Answer(answer),
                    ..
                } => self.send(Packet::ToAtomizer { shard, answer }),
                SimEvent::Reply { reply, .. } => {
                    return Err(self.violation(format!("shard {shard} answered a read nobody made: {reply:?}")))
                }
                SimEvent::Report(report) => return Err(self.violation(format!("shard {shard} reported {report:?}"))),
                SimEvent::Send { to, .. } => match to {},
            }
        }
        Ok(())
    }

    /// A shard's answer reaching the atomizer, through the planted faults if any.
    fn answer_atomizer(&mut self, shard: usize, mut answer: ShardAnswer) -> Result<(), Violation> {
        if let ShardAnswer::Attested { height, present, .. } = &mut answer {
            if self.lying && shard == 0 {
                present.iter_mut().for_each(|bit| *bit = true);
            }
            let window_start = self.atomizer.role().map(|a| a.state().window_start());
            if window_start.is_some_and(|start| *height + 1 < start) {
                self.report.stale_attestations += 1;
            }
            let replaying = self.options.planted == AtomizerPlantedFault::ReplayAttestations;
            if replaying && !self.heard.iter().any(|(_, heard)| *heard == answer) {
                if self.heard.len() == REPLAYED_ANSWERS_MAX {
                    self.heard.remove(0);
                }
                self.heard.push((shard, answer.clone()));
            }
        }
        self.hand_atomizer(vec![AtomizerInput::ShardAnswer { shard, answer }])
    }

    fn hand_atomizer(&mut self, inputs: Vec<AtomizerInput>) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        let host = &mut self.atomizer;
        let events = catch_unwind(AssertUnwindSafe(|| host.handle_all(now_ms, inputs)))
            .map_err(|panic| self.panicked("the atomizer", panic.as_ref()))?;
        self.take_atomizer_events(events, false)
    }

    fn take_atomizer_events(&mut self, events: Vec<SimEvent<Atomizer>>, resending: bool) -> Result<(), Violation> {
        for event in events {
            match event {
                SimEvent::Durable(bytes) => self.on_block(&bytes)?,
                SimEvent::Send { to, message } => {
                    self.report.resends += u64::from(resending);
                    self.send(Packet::ToShard { shard: to, message });
                }
                SimEvent::Reply { ticket, reply } => self.on_outcome(ticket, reply)?,
                SimEvent::Report(AtomizerReport::ShardMisbehaved { .. }) => self.report.misbehaving_answers += 1,
                SimEvent::Report(AtomizerReport::ShardTooFarBehind { .. }) => self.report.too_far_behind += 1,
                SimEvent::Report(AtomizerReport::Attested { .. }) => self.report.rounds_attested += 1,
                SimEvent::Report(AtomizerReport::Finished { transactions, .. }) => {
                    self.report.blocks_finished += 1;
                    self.report.transactions_finished += transactions as u64;
                }
                SimEvent::Report(AtomizerReport::Settled(outcome)) => {
                    return Err(self.violation(format!("an outcome for no caller, with no lead lost: {outcome:?}")))
                }
            }
        }
        Ok(())
    }

    /// Check 1 and half of check 2: the block is the next, and it fits the model UHS.
    fn on_block(&mut self, bytes: &[u8]) -> Result<(), Violation> {
        self.trace.write(bytes);
        let block = AtomizerBlock::decode_exact_with(bytes, &AtomizerLimits::default())
            .map_err(|e| self.violation(format!("a durable block does not decode: {e}")))?;
        let expected = self.history.len() as u64;
        if block.height != expected {
            return Err(self.violation(format!("block {} made durable, {expected} expected", block.height)));
        }
        let mut uhs = self.uhs().clone();
        for tx in &block.txs {
            if let Some(earlier) = self.block_of.insert(tx.txid, block.height) {
                return Err(self.violation(format!("{:?} is in blocks {earlier} and {}", tx.txid, block.height)));
            }
            if self.kept_out.contains(&tx.txid) {
                return Err(self.violation(format!(
                    "{:?} is in block {}, but was answered unconfirmed or forgotten",
                    tx.txid, block.height
                )));
            }
            if let Some(id) = tx.spent.iter().find(|id| !uhs.remove(id)) {
                return Err(self.violation(format!("block {} spends {id}, which is not in the UHS", block.height)));
            }
            if let Some(id) = tx.created.iter().find(|id| !uhs.insert(**id)) {
                return Err(self.violation(format!("block {} creates {id}, which is in the UHS", block.height)));
            }
            self.ever_spent.extend(tx.spent.iter().copied());
        }
        self.history.push(uhs);
        self.report.blocks += 1;
        Ok(())
    }

    /// The rest of check 2, and check 4's confirmations.
    fn on_outcome(&mut self, ticket: u64, outcome: TxOutcome) -> Result<(), Violation> {
        self.trace.write_u64(ticket);
        let Some(submitted) = self.waiting.remove(&ticket) else {
            return Err(self.violation(format!("an answer to ticket {ticket}, which waits for none")));
        };
        if submitted.tx.txid != outcome.txid {
            return Err(self.violation(format!("ticket {ticket} answered for another transaction")));
        }
        self.release(&submitted.tx);
        let in_block = self.block_of.get(&outcome.txid).copied();
        match (&outcome.result, in_block) {
            (TxResult::Confirmed, Some(_)) => {
                self.report.confirmed += 1;
                self.report.healed_confirmed += u64::from(submitted.must_confirm);
                return Ok(());
            }
            (TxResult::Confirmed, None) => {
                return Err(self.violation(format!("{:?} confirmed, but in no durable block", outcome.txid)))
            }
            (result, Some(height)) => {
                return Err(self.violation(format!(
                    "{:?} answered {result:?}, but is in block {height}",
                    outcome.txid
                )))
            }
            (_, None) if submitted.must_confirm => {
                let result = &outcome.result;
                return Err(self.violation(format!("a healed valid transaction was answered {result:?}")));
            }
            (TxResult::Rejected(_), None) => self.report.rejected += 1,
            (TxResult::Dropped, None) => self.report.dropped += 1,
            (TxResult::Refused(SubmitError::Busy { .. }), None) => self.report.busy += 1,
            (TxResult::Refused(error), None) => {
                return Err(self.violation(format!("a well-formed transaction was refused: {error}")))
            }
        }
        self.kept_out.insert(outcome.txid);
        Ok(())
    }

    fn tick(&mut self) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        let resending = self
            .atomizer
            .role()
            .and_then(Role::poll_timeout)
            .is_some_and(|deadline| deadline <= now_ms);
        let host = &mut self.atomizer;
        let events = catch_unwind(AssertUnwindSafe(|| host.tick(now_ms)))
            .map_err(|panic| self.panicked("the atomizer", panic.as_ref()))?;
        self.take_atomizer_events(events, resending)
    }

    fn crash_or_restart(&mut self) -> Result<(), Violation> {
        if !self.atomizer.is_up() {
            if self.chance(self.options.restart_per_mille) {
                self.restart_atomizer()?;
            }
        } else if self.chance(self.options.crash_per_mille) && self.atomizer.crash() {
            self.report.atomizer_crashes += 1;
            self.forget_callers();
        }
        for shard in 0..self.shards.len() {
            if !self.shards[shard].is_up() {
                if self.chance(self.options.restart_per_mille) {
                    self.restart_shard(shard)?;
                }
            } else if self.chance(self.options.crash_per_mille) && self.shards[shard].crash() {
                self.report.shard_crashes += 1;
            }
        }
        Ok(())
    }

    /// A crashed atomizer forgets its callers: they never hear, and their transactions must
    /// never appear in a block.
    fn forget_callers(&mut self) {
        for (_, submitted) in std::mem::take(&mut self.waiting) {
            self.release(&submitted.tx);
            self.kept_out.insert(submitted.tx.txid);
            self.report.lost_to_crashes += 1;
        }
    }

    fn restart_atomizer(&mut self) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        let host = &mut self.atomizer;
        let restarted = catch_unwind(AssertUnwindSafe(|| host.restart(now_ms)))
            .map_err(|panic| self.panicked("the restarted atomizer", panic.as_ref()))?;
        let events = restarted.map_err(|e| self.violation(e.to_string()))?;
        self.take_atomizer_events(events, false)?;
        if self.options.planted == AtomizerPlantedFault::LyingShard {
            self.lying = true;
        }
        // Spread over the next few resend periods, so that they meet the rounds the new
        // incarnation asks.
        for (shard, answer) in self.heard.clone() {
            let delay = self.rng.gen_range(1..=4 * self.options.resend_after_ms);
            self.next_packet += 1;
            let packet = Packet::ToAtomizer { shard, answer };
            self.network.insert((self.now_ms + delay, self.next_packet), packet);
        }
        Ok(())
    }

    fn restart_shard(&mut self, shard: usize) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        let host = &mut self.shards[shard];
        let restarted = catch_unwind(AssertUnwindSafe(|| host.restart(now_ms)))
            .map_err(|panic| self.panicked(&format!("restarted shard {shard}"), panic.as_ref()))?;
        let events = restarted.map_err(|e| self.violation(e.to_string()))?;
        self.take_shard_events(shard, events)
    }

    /// Check 3: every shard that is up holds the model UHS at its height, within its range.
    fn check_shards(&self) -> Result<(), Violation> {
        for (index, host) in self.shards.iter().enumerate() {
            let Some(shard) = host.role() else {
                continue;
            };
            let Some(uhs) = self.history.get(shard.height() as usize) else {
                let height = shard.height();
                return Err(self.violation(format!("shard {index} is at height {height}, beyond the blocks")));
            };
            let range = shard.range();
            let expected: Vec<UhsId> = uhs.iter().filter(|id| range.contains(id)).copied().collect();
            if shard.sorted_ids() != expected {
                let height = shard.height();
                return Err(self.violation(format!("shard {index} differs from the model UHS at height {height}")));
            }
        }
        Ok(())
    }

    /// Check 4: heal everything, let the world go quiet, then submit valid transactions that
    /// conflict with nothing; every one must be confirmed and every shard must hold every block.
    fn heal(&mut self) -> Result<(), Violation> {
        self.faulty = false;
        self.lying = false;
        self.step += 1;
        if !self.atomizer.is_up() {
            self.restart_atomizer()?;
        }
        for shard in 0..self.shards.len() {
            if !self.shards[shard].is_up() {
                self.restart_shard(shard)?;
            }
        }
        self.settle("the healed world")?;
        let mut available = self.available();
        let mut txs = Vec::new();
        for _ in 0..self.options.healed_transactions {
            let created = self.fresh_ids();
            let take = self.rng.gen_range(0..=2).min(available.len());
            let spent = available.split_off(available.len() - take);
            txs.push(self.transaction(spent, created));
        }
        self.submit(txs, true)?;
        self.step += 1;
        self.settle("the healed transactions")
    }

    /// Runs without faults until nothing is in flight, no caller waits and the atomizer has no
    /// time-out set; then every shard must hold every block.
    fn settle(&mut self, what: &str) -> Result<(), Violation> {
        let deadline = self.now_ms + HEALED_MS_MAX;
        loop {
            self.deliver_due()?;
            self.tick()?;
            self.check_shards()?;
            let atomizer = self.atomizer.role().expect("up once healed");
            if self.network.is_empty() && self.waiting.is_empty() && atomizer.poll_timeout().is_none() {
                break;
            }
            if self.now_ms > deadline {
                let (waiting, in_flight) = (self.waiting.len(), self.network.len());
                return Err(self.violation(format!(
                    "{what} is not quiet after {HEALED_MS_MAX} ms: {waiting} callers waiting, {in_flight} messages in flight, atomizer at height {}",
                    atomizer.height()
                )));
            }
            self.now_ms += 1;
        }
        let atomizer = self.atomizer.role().expect("up once healed");
        let height = atomizer.height();
        let behind = self
            .shards
            .iter()
            .position(|s| s.role().map(UhsShard::height) != Some(height));
        if !atomizer.shards_caught_up() || behind.is_some() {
            return Err(self.violation(format!(
                "{what} went quiet at height {height} with shard {behind:?} behind"
            )));
        }
        Ok(())
    }
}
