//! The atomizer: asks the shards to attest each transaction's ids, checks the attestations
//! against the blocks sealed since, and orders the transactions that hold into blocks.

use std::collections::{BTreeMap, HashSet, VecDeque};

use specie_codec::{Decode, Encode};
use specie_coordinator::{SubmitError, TxOutcome, TxResult};
use specie_role::{Durable, Output, Role, Ticket};
use specie_shard::{ShardRange, Vote};
use specie_transaction::{CompactTransaction, DecodeLimits, UhsId, TRANSACTION_LOG};

use crate::block::{AtomizerBlock, AtomizerLimits, AtomizerSnapshotError, AtomizerState};
use crate::shard::{attested_ids_digest, AttestRequest, ShardAnswer, ShardMessage};

/// The atomizer's deployment: its shards and its limits.
#[derive(Clone, Debug)]
pub struct AtomizerConfig {
    pub shards: Vec<ShardRange>,
    pub block_transactions_max: usize,
    /// Submissions admitted and not yet in a durable block; beyond this they are answered busy.
    pub queue_transactions_max: usize,
    /// Blocks whose ids the atomizer remembers (Hamilton's STXO cache): an attestation older
    /// than this is asked again, and no shard may lag by more than half of it.
    pub window_blocks: u64,
    /// A shard's attestation or block acknowledgement missing for this long is asked again.
    pub resend_after_ms: u64,
    /// Attestations asked again for one transaction (they went stale) before it is dropped.
    pub attest_tries_max: u32,
    pub transaction_limits: DecodeLimits,
}

impl AtomizerConfig {
    pub fn with_shards(shards: Vec<ShardRange>) -> AtomizerConfig {
        AtomizerConfig {
            shards,
            block_transactions_max: 2000,
            queue_transactions_max: 200_000,
            window_blocks: 64,
            resend_after_ms: 200,
            attest_tries_max: 4,
            transaction_limits: DecodeLimits::default(),
        }
    }
}

/// What callers and shards hand the atomizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AtomizerInput {
    Submit {
        ticket: Ticket,
        tx: CompactTransaction,
    },
    /// Shard `shard`'s answer (untrusted: checked before use).
    ShardAnswer {
        shard: usize,
        answer: ShardAnswer,
    },
}

/// What the atomizer tells the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AtomizerReport {
    /// A transaction of a block no caller here waits for (an earlier leader's).
    Settled(TxOutcome),
    /// An answer no honest shard gives (a height beyond the atomizer's, a wrong count); dropped.
    ShardMisbehaved { shard: usize, answer: ShardAnswer },
    /// A shard needs a block the window no longer holds: it must be restored from a snapshot.
    ShardTooFarBehind { shard: usize, height: u64 },
    /// A round of attestations is in: its transactions, and how long the shards took from its
    /// first asking (milliseconds, by the atomizer's clock).
    Attested { transactions: usize, took_ms: u64 },
    /// A block this leader proposed is confirmed to its callers, every shard having applied it:
    /// its transactions, the time from its proposal to its being durable (`order_ms`) and from
    /// then to the last shard's applying it (`confirm_ms`).
    Finished {
        transactions: usize,
        order_ms: u64,
        confirm_ms: u64,
    },
}

/// A transaction and who waits for its outcome (`None`: an earlier leader's caller).
type Caller = (Option<Ticket>, CompactTransaction);

struct Waiting {
    ticket: Option<Ticket>,
    tx: CompactTransaction,
    tries: u32,
}

/// One batch of transactions whose ids the shards are attesting.
struct AttestRound {
    txs: Vec<Waiting>,
    /// Per shard, the ids asked (each transaction's owned spent then created ids, in order);
    /// empty for a shard not involved.
    asked: Vec<Vec<UhsId>>,
    /// Per shard, the digest of the ids asked, which its answer must name.
    asked_digests: Vec<[u8; 32]>,
    answers: Vec<Option<(u64, Vec<bool>)>>,
    /// When it was last asked (resends move it) and when it was first asked.
    sent_ms: u64,
    cut_ms: u64,
}

/// A durable block of this leader's, whose callers are told once every shard has applied it.
struct Confirming {
    height: u64,
    callers: Vec<Caller>,
    /// When it was applied here, and how long it took from its proposal to that.
    applied_ms: u64,
    order_ms: u64,
}

/// Transactions whose attestations held, for a block not yet proposed or not yet durable.
#[derive(Default)]
struct Pending {
    height: u64,
    /// When it was proposed (once it is).
    proposed_ms: u64,
    tickets: Vec<Option<Ticket>>,
    txs: Vec<CompactTransaction>,
    spent: HashSet<UhsId>,
    created: HashSet<UhsId>,
}

impl Pending {
    fn spends(&self, id: &UhsId) -> bool {
        self.spent.contains(id)
    }

    fn creates(&self, id: &UhsId) -> bool {
        self.created.contains(id)
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct ShardProgress {
    /// Every block up to here is durable at the shard.
    acked: u64,
    /// Blocks up to here were sent.
    sent: u64,
    sent_ms: u64,
    /// False until the shard answers after this atomizer began to lead.
    known: bool,
}

/// Hamilton's atomizer as a pure role; see the crate documentation.
pub struct Atomizer {
    config: AtomizerConfig,
    limits: AtomizerLimits,
    state: AtomizerState,
    leading: bool,
    now_ms: u64,
    queue: VecDeque<Waiting>,
    rounds: BTreeMap<u64, AttestRound>,
    next_round: u64,
    building: Pending,
    proposed: Option<Pending>,
    /// Durable blocks' callers, told once every shard has applied the block: a transaction
    /// reported confirmed is then visible to every read of the UHS, as in two-phase commit.
    confirming: VecDeque<Confirming>,
    shards: Vec<ShardProgress>,
    outputs: VecDeque<Output<Self>>,
}

impl Atomizer {
    pub fn new(config: AtomizerConfig) -> Atomizer {
        ShardRange::check_cover(&config.shards).expect("the atomizer's shards cover every id once");
        let limits = AtomizerLimits {
            block_transactions_max: config.block_transactions_max as u64,
            window_blocks_max: config.window_blocks,
            transaction: config.transaction_limits.clone(),
            ..AtomizerLimits::default()
        };
        Atomizer {
            state: AtomizerState::new(config.window_blocks),
            shards: vec![ShardProgress::default(); config.shards.len()],
            config,
            limits,
            leading: false,
            now_ms: 0,
            queue: VecDeque::new(),
            rounds: BTreeMap::new(),
            next_round: 0,
            building: Pending::default(),
            proposed: None,
            confirming: VecDeque::new(),
            outputs: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &AtomizerConfig {
        &self.config
    }

    pub fn state(&self) -> &AtomizerState {
        &self.state
    }

    pub fn height(&self) -> u64 {
        self.state.height()
    }

    /// Every shard has answered since this atomizer began to lead, and holds every block.
    pub fn shards_caught_up(&self) -> bool {
        let height = self.state.height();
        self.shards.iter().all(|s| s.known && s.acked == height)
    }

    /// Transactions admitted and not yet in a durable block.
    pub fn admitted(&self) -> usize {
        let in_rounds: usize = self.rounds.values().map(|r| r.txs.len()).sum();
        self.queue.len() + in_rounds + self.building.txs.len() + self.proposed.as_ref().map_or(0, |p| p.txs.len())
    }

    fn outcome(&mut self, ticket: Option<Ticket>, tx: &CompactTransaction, result: TxResult) {
        tracing::debug!(target: TRANSACTION_LOG, txid = %tx.txid, outcome = ?result, "settled");
        let outcome = TxOutcome { txid: tx.txid, result };
        self.outputs.push_back(match ticket {
            Some(ticket) => Output::Reply { ticket, reply: outcome },
            None => Output::Report(AtomizerReport::Settled(outcome)),
        });
    }

    fn submit(&mut self, ticket: Ticket, mut tx: CompactTransaction) -> Result<(), SubmitError> {
        if !self.leading {
            return Err(SubmitError::NotLeader);
        }
        SubmitError::check_shape(&tx, &self.config.transaction_limits)?;
        let queued = self.admitted();
        if queued >= self.config.queue_transactions_max {
            return Err(SubmitError::Busy { queued });
        }
        // The shards' attestations replace the sentinels' here; blocks carry neither.
        tx.attestations.clear();
        self.queue.push_back(Waiting {
            ticket: Some(ticket),
            tx,
            tries: 0,
        });
        Ok(())
    }

    fn send(&mut self, shard: usize, message: ShardMessage) {
        self.outputs.push_back(Output::Send { to: shard, message });
    }

    /// Asks the shards to attest the queue's transactions, one request per shard involved.
    fn cut_round(&mut self) {
        let count = self.queue.len().min(self.config.block_transactions_max);
        if count == 0 {
            return;
        }
        let txs: Vec<Waiting> = self.queue.drain(..count).collect();
        let mut asked = vec![vec![]; self.config.shards.len()];
        for waiting in &txs {
            for id in waiting.tx.spent.iter().chain(&waiting.tx.created) {
                asked[ShardRange::owner(&self.config.shards, id)].push(*id);
            }
        }
        let round = self.next_round;
        self.next_round = self.next_round.wrapping_add(1);
        let answers = asked.iter().map(|_| None).collect();
        let asked_digests = asked.iter().map(|ids| attested_ids_digest(ids)).collect();
        let attest = AttestRound {
            txs,
            asked,
            asked_digests,
            answers,
            sent_ms: self.now_ms,
            cut_ms: self.now_ms,
        };
        self.ask(round, &attest);
        self.rounds.insert(round, attest);
    }

    /// Sends the round's requests to every involved shard that has not answered.
    fn ask(&mut self, round: u64, attest: &AttestRound) {
        for (shard, ids) in attest.asked.iter().enumerate() {
            if !ids.is_empty() && attest.answers[shard].is_none() {
                let ids = ids.clone();
                self.send(shard, ShardMessage::Attest(AttestRequest { round, ids }));
            }
        }
    }

    fn on_attested(&mut self, shard: usize, round: u64, asked: [u8; 32], height: u64, present: Vec<bool>) {
        let Some(attest) = self.rounds.get_mut(&round) else {
            return; // A late or duplicated answer to a round already resolved.
        };
        // Answered already, or an answer about other ids (from before a restart).
        if attest.answers[shard].is_some() || attest.asked_digests[shard] != asked {
            return;
        }
        attest.answers[shard] = Some((height, present));
        if attest
            .answers
            .iter()
            .zip(&attest.asked)
            .all(|(a, ids)| a.is_some() || ids.is_empty())
        {
            let attest = self.rounds.remove(&round).expect("the round was just found");
            self.outputs.push_back(Output::Report(AtomizerReport::Attested {
                transactions: attest.txs.len(),
                took_ms: self.now_ms.saturating_sub(attest.cut_ms),
            }));
            self.resolve(attest);
        }
    }

    /// Decides every transaction of a fully attested round: into the block being built, refused,
    /// or asked again if an attestation is older than the window.
    fn resolve(&mut self, attest: AttestRound) {
        let mut cursors = vec![0usize; self.config.shards.len()];
        for mut waiting in attest.txs {
            match self.verdict(&waiting.tx, &attest.answers, &mut cursors) {
                Verdict::Holds => {
                    let pending = &mut self.building;
                    pending.spent.extend(waiting.tx.spent.iter().copied());
                    pending.created.extend(waiting.tx.created.iter().copied());
                    pending.tickets.push(waiting.ticket);
                    pending.txs.push(waiting.tx);
                }
                Verdict::Refused(vote) => self.outcome(waiting.ticket, &waiting.tx, TxResult::Rejected(vote)),
                Verdict::Stale if waiting.tries < self.config.attest_tries_max => {
                    waiting.tries += 1;
                    self.queue.push_back(waiting);
                }
                Verdict::Stale => self.outcome(waiting.ticket, &waiting.tx, TxResult::Dropped),
            }
        }
    }

    /// Whether `tx`'s ids, as attested and changed by every block since, allow it now.
    fn verdict(&self, tx: &CompactTransaction, answers: &[Option<(u64, Vec<bool>)>], cursors: &mut [usize]) -> Verdict {
        let window_start = self.state.window_start();
        let mut attested = |id: &UhsId| {
            let shard = ShardRange::owner(&self.config.shards, id);
            let (height, present) = answers[shard].as_ref().expect("every involved shard answered");
            let bit = present[cursors[shard]];
            cursors[shard] += 1;
            (*height, bit)
        };
        let (mut stale, mut vote) = (false, None);
        let mut seen = HashSet::with_capacity(tx.spent.len() + tx.created.len());
        for id in &tx.spent {
            let (height, present) = attested(id);
            stale |= height + 1 < window_start;
            let spent_since = self.state.spent_at(id).is_some_and(|h| h > height);
            let created_since = self.state.created_at(id).is_some_and(|h| h > height);
            let pending = self.building.spends(id) || self.proposed.as_ref().is_some_and(|p| p.spends(id));
            if !(present || created_since) || spent_since || pending || !seen.insert(*id) {
                vote = vote.or(Some(Vote::InputMissing));
            }
        }
        for id in &tx.created {
            let (height, present) = attested(id);
            stale |= height + 1 < window_start;
            let created_since = self.state.created_at(id).is_some_and(|h| h > height);
            // The window's caches hold one spend and one creation per id, and the shards check a
            // block against the blocks they have not yet applied: an id spent within the window
            // comes back (a replayed mint) only once that spend has left it.
            let spent_in_window = self.state.spent_at(id).is_some();
            let pending = self.building.creates(id) || self.proposed.as_ref().is_some_and(|p| p.creates(id));
            if present || created_since || spent_in_window || pending || !seen.insert(*id) {
                vote = vote.or(Some(Vote::OutputExists));
            }
        }
        match (stale, vote) {
            (true, _) => Verdict::Stale,
            (false, Some(vote)) => Verdict::Refused(vote),
            (false, None) => Verdict::Holds,
        }
    }

    /// Proposes the next block, unless one is on its way to durability or a shard lags by half
    /// the window (backpressure, so every block a shard may still need stays in the window).
    fn propose(&mut self) {
        if self.proposed.is_some() || self.building.txs.is_empty() {
            return;
        }
        let height = self.state.height() + 1;
        let lag_max = self.config.window_blocks / 2;
        if self.shards.iter().any(|s| !s.known || s.acked + lag_max < height) {
            return;
        }
        let mut pending = std::mem::take(&mut self.building);
        if pending.txs.len() > self.config.block_transactions_max {
            let rest_txs = pending.txs.split_off(self.config.block_transactions_max);
            let rest_tickets = pending.tickets.split_off(self.config.block_transactions_max);
            for (ticket, tx) in rest_tickets.into_iter().zip(rest_txs) {
                self.building.spent.extend(tx.spent.iter().copied());
                self.building.created.extend(tx.created.iter().copied());
                self.building.tickets.push(ticket);
                self.building.txs.push(tx);
            }
            pending.spent.retain(|id| !self.building.spent.contains(id));
            pending.created.retain(|id| !self.building.created.contains(id));
        }
        pending.height = height;
        pending.proposed_ms = self.now_ms;
        self.outputs.push_back(Output::Propose(AtomizerBlock {
            height,
            txs: pending.txs.clone(),
        }));
        self.proposed = Some(pending);
    }

    /// Sends shard `shard` every block after the last one sent, from the window.
    fn stream(&mut self, shard: usize) {
        let range = self.config.shards[shard];
        while self.shards[shard].sent < self.state.height() {
            let next = self.shards[shard].sent + 1;
            let Some(block) = self.state.block(next) else {
                self.outputs
                    .push_back(Output::Report(AtomizerReport::ShardTooFarBehind {
                        shard,
                        height: next - 1,
                    }));
                return;
            };
            let share = block.for_shard(|id| range.contains(id));
            self.send(shard, ShardMessage::Block(share));
            self.shards[shard].sent = next;
            self.shards[shard].sent_ms = self.now_ms;
        }
    }

    fn on_shard_answer(&mut self, shard: usize, answer: ShardAnswer) {
        let height = self.state.height();
        let honest = shard < self.shards.len()
            && match &answer {
                ShardAnswer::Attested {
                    round,
                    height: h,
                    present,
                    ..
                } => {
                    *h <= height
                        && self
                            .rounds
                            .get(round)
                            .is_none_or(|r| r.asked[shard].len() == present.len())
                        && self.rounds.get(round).is_none_or(|r| !r.asked[shard].is_empty())
                }
                ShardAnswer::Applied { height: h } | ShardAnswer::Behind { height: h } => *h <= height,
            };
        if !honest {
            self.outputs
                .push_back(Output::Report(AtomizerReport::ShardMisbehaved { shard, answer }));
            return;
        }
        match answer {
            ShardAnswer::Attested {
                round,
                asked,
                height,
                present,
            } => self.on_attested(shard, round, asked, height, present),
            ShardAnswer::Applied { height } => {
                let progress = &mut self.shards[shard];
                progress.acked = progress.acked.max(height);
                progress.sent = progress.sent.max(progress.acked);
                progress.known = true;
                self.release_confirmed(false);
            }
            ShardAnswer::Behind { height } => {
                let progress = &mut self.shards[shard];
                progress.sent = height;
                progress.known = true;
                self.stream(shard);
            }
        }
    }

    /// The lead is lost: every caller whose transaction is in no proposed block is told it was
    /// dropped (nothing of it was applied). A proposed block's callers are told nothing: the
    /// next leader may still commit that block, so the log decides, and their host tells them
    /// the outcome is unknown. (Found by `specie sim --world atomizer-cluster`, seed 133: an
    /// embedded host makes every proposal durable at once, so only a replicated one shows it.)
    fn drop_waiting(&mut self) {
        let mut waiting: Vec<(Option<Ticket>, CompactTransaction)> =
            self.queue.drain(..).map(|w| (w.ticket, w.tx)).collect();
        for (_, round) in std::mem::take(&mut self.rounds) {
            waiting.extend(round.txs.into_iter().map(|w| (w.ticket, w.tx)));
        }
        // Cleared, not kept: another leader's block may land at its height.
        self.proposed = None;
        let building = std::mem::take(&mut self.building);
        waiting.extend(building.tickets.into_iter().zip(building.txs));
        for (ticket, tx) in waiting {
            if ticket.is_some() {
                self.outcome(ticket, &tx, TxResult::Dropped);
            }
        }
    }

    /// Tells the callers of every block all shards have applied that it is confirmed; all of
    /// them if `everyone`, since every block in `confirming` is durable.
    fn release_confirmed(&mut self, everyone: bool) {
        let applied_everywhere = self
            .shards
            .iter()
            .map(|s| if s.known { s.acked } else { 0 })
            .min()
            .unwrap_or(0);
        while let Some(front) = self.confirming.front() {
            let applied = front.height <= applied_everywhere;
            if !applied && !everyone {
                return;
            }
            let confirming = self.confirming.pop_front().expect("a block to confirm");
            if applied {
                self.outputs.push_back(Output::Report(AtomizerReport::Finished {
                    transactions: confirming.callers.len(),
                    order_ms: confirming.order_ms,
                    confirm_ms: self.now_ms.saturating_sub(confirming.applied_ms),
                }));
            }
            for (ticket, tx) in confirming.callers {
                self.outcome(ticket, &tx, TxResult::Confirmed);
            }
        }
    }

    /// After every input: the cheap invariants. The window's caches (O(window) to check) are
    /// checked by the hosts after recovery and after every round in debug builds
    /// (`Durable::check_invariants`), and here in debug builds.
    fn check(&self) {
        #[cfg(debug_assertions)]
        if let Err(violation) = self.state.check_invariants() {
            panic!("atomizer invariant broken: {violation}");
        }
        if let Some(proposed) = &self.proposed {
            assert_eq!(
                proposed.height,
                self.state.height() + 1,
                "the proposed block is the next"
            );
        }
        assert!(
            self.shards.iter().all(|s| s.acked <= self.state.height()),
            "no shard holds a block the atomizer does not"
        );
    }
}

enum Verdict {
    Holds,
    Refused(Vote),
    Stale,
}

impl Role for Atomizer {
    type Command = AtomizerBlock;
    type Input = AtomizerInput;
    /// A shard's index in the atomizer's shard ranges.
    type Peer = usize;
    type Message = ShardMessage;
    type Reply = TxOutcome;
    type Report = AtomizerReport;

    fn lead(&mut self, now_ms: u64) {
        self.leading = true;
        self.now_ms = now_ms;
        let height = self.state.height();
        for shard in 0..self.shards.len() {
            // A shard answers the newest block with how far it got; nothing to ask at genesis.
            self.shards[shard] = ShardProgress {
                acked: 0,
                sent: height.saturating_sub(1),
                sent_ms: now_ms,
                known: height == 0,
            };
            self.stream(shard);
        }
    }

    fn follow(&mut self) {
        self.drop_waiting();
        self.release_confirmed(true);
        self.leading = false;
    }

    fn handle(&mut self, now_ms: u64, input: AtomizerInput) {
        self.now_ms = now_ms;
        match input {
            AtomizerInput::Submit { ticket, tx } => {
                let txid = tx.txid;
                if let Err(error) = self.submit(ticket, tx) {
                    let outcome = TxOutcome {
                        txid,
                        result: TxResult::Refused(error),
                    };
                    self.outputs.push_back(Output::Reply { ticket, reply: outcome });
                }
            }
            AtomizerInput::ShardAnswer { shard, answer } if self.leading => self.on_shard_answer(shard, answer),
            AtomizerInput::ShardAnswer { .. } => {}
        }
        self.check();
    }

    fn apply(&mut self, now_ms: u64, block: &AtomizerBlock) {
        self.now_ms = now_ms;
        self.state.apply(block);
        match self.proposed.take() {
            Some(proposed) if proposed.height == block.height => {
                self.confirming.push_back(Confirming {
                    height: block.height,
                    callers: proposed.tickets.into_iter().zip(proposed.txs).collect(),
                    applied_ms: now_ms,
                    order_ms: now_ms.saturating_sub(proposed.proposed_ms),
                });
            }
            other => {
                self.proposed = other;
                if self.leading {
                    block
                        .txs
                        .iter()
                        .for_each(|tx| self.outcome(None, tx, TxResult::Confirmed));
                }
            }
        }
        if self.leading {
            for shard in 0..self.shards.len() {
                if self.shards[shard].sent + 1 == block.height {
                    self.stream(shard);
                }
            }
        }
        self.check();
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        let resend_after_ms = self.config.resend_after_ms;
        let due = |sent_ms: u64| sent_ms + resend_after_ms <= now_ms;
        let late: Vec<u64> = self
            .rounds
            .iter()
            .filter(|(_, r)| due(r.sent_ms))
            .map(|(k, _)| *k)
            .collect();
        for round in late {
            let mut attest = self.rounds.remove(&round).expect("a late round");
            attest.sent_ms = now_ms;
            self.ask(round, &attest);
            self.rounds.insert(round, attest);
        }
        for shard in 0..self.shards.len() {
            let progress = self.shards[shard];
            let lagging = !progress.known || progress.acked < self.state.height();
            if lagging && due(progress.sent_ms) {
                // Unknown since the lead began, or known only from a `Behind` (which leaves
                // `acked` at 0 after a restart, below the window): ask with the newest block, as
                // `lead` did, and let the shard say where it is.
                let height = self.state.height();
                let next_in_window = self.state.block(progress.acked + 1).is_some();
                self.shards[shard].sent = if progress.known && next_in_window {
                    progress.acked
                } else {
                    height.saturating_sub(1)
                };
                self.stream(shard);
            }
        }
        self.check();
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        if self.outputs.is_empty() && self.leading {
            // Here rather than per input, so one host turn's submissions share a round.
            self.cut_round();
            self.propose();
        }
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        if !self.leading {
            return None;
        }
        let height = self.state.height();
        let rounds = self.rounds.values().map(|r| r.sent_ms);
        let shards = self
            .shards
            .iter()
            .filter(|s| !s.known || s.acked < height)
            .map(|s| s.sent_ms);
        rounds
            .chain(shards)
            .min()
            .map(|sent_ms| sent_ms + self.config.resend_after_ms)
    }
}

/// Why the atomizer's log or snapshot bytes were refused.
#[derive(Debug, thiserror::Error)]
pub enum AtomizerStateError {
    #[error("does not decode: {0}")]
    Decode(#[from] specie_codec::DecodeError),
    #[error(transparent)]
    Snapshot(#[from] AtomizerSnapshotError),
}

impl Durable for Atomizer {
    type StateError = AtomizerStateError;

    fn encode_command(block: &AtomizerBlock) -> Vec<u8> {
        block.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<AtomizerBlock, AtomizerStateError> {
        Ok(AtomizerBlock::decode_exact_with(bytes, &self.limits)?)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode_snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), AtomizerStateError> {
        let state = AtomizerState::decode_snapshot(snapshot, &self.limits)?;
        self.state = state;
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), AtomizerStateError> {
        self.state
            .check_invariants()
            .map_err(|violation| AtomizerSnapshotError::from(violation).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_role::Round;
    use specie_transaction::Txid;

    fn id(n: u8) -> UhsId {
        UhsId([n; 32])
    }

    fn tx(n: u8, spent: &[u8], created: &[u8]) -> CompactTransaction {
        CompactTransaction {
            txid: Txid([n; 32]),
            spent: spent.iter().map(|b| id(*b)).collect(),
            created: created.iter().map(|b| id(*b)).collect(),
            attestations: Default::default(),
        }
    }

    fn one_shard() -> Atomizer {
        Atomizer::new(AtomizerConfig::with_shards(ShardRange::partition(1).unwrap()))
    }

    /// Settles the atomizer as a host does (every proposal durable, then applied); what it
    /// sent and answered.
    fn settle(atomizer: &mut Atomizer, now_ms: u64) -> (Vec<ShardMessage>, Vec<TxOutcome>) {
        let (mut sends, mut replies) = (vec![], vec![]);
        loop {
            let round = Round::take(atomizer);
            sends.extend(round.sends.into_iter().map(|(_, message)| message));
            replies.extend(round.replies.into_iter().map(|(_, reply)| reply));
            if round.proposals.is_empty() {
                return (sends, replies);
            }
            round.proposals.iter().for_each(|block| atomizer.apply(now_ms, block));
        }
    }

    /// Submits `tx` and answers its one attestation request with `present` at `height`, then
    /// has the shard apply any block sent; the answer, and what the atomizer then answered its
    /// caller.
    fn attest(
        atomizer: &mut Atomizer,
        now_ms: u64,
        tx: CompactTransaction,
        height: u64,
        present: Vec<bool>,
    ) -> (ShardAnswer, Vec<TxOutcome>) {
        atomizer.handle(now_ms, AtomizerInput::Submit { ticket: 1, tx });
        let (sends, _) = settle(atomizer, now_ms);
        let [ShardMessage::Attest(request)] = sends.as_slice() else {
            panic!("one attestation request expected, got {sends:?}");
        };
        let answer = ShardAnswer::Attested {
            round: request.round,
            asked: crate::shard::attested_ids_digest(&request.ids),
            height,
            present,
        };
        let shard_answer = AtomizerInput::ShardAnswer {
            shard: 0,
            answer: answer.clone(),
        };
        atomizer.handle(now_ms, shard_answer);
        let (sends, mut outcomes) = settle(atomizer, now_ms);
        for message in sends {
            if let ShardMessage::Block(block) = message {
                let applied = ShardAnswer::Applied { height: block.height };
                atomizer.handle(
                    now_ms,
                    AtomizerInput::ShardAnswer {
                        shard: 0,
                        answer: applied,
                    },
                );
                outcomes.extend(settle(atomizer, now_ms).1);
            }
        }
        (answer, outcomes)
    }

    fn confirmed(outcomes: &[TxOutcome]) -> bool {
        outcomes.iter().any(|o| o.result == TxResult::Confirmed)
    }

    /// Found by the atomizer world: a restarted atomizer numbers its rounds from 0 again, so an
    /// attestation delayed across the restart answered a new round about other ids, and a
    /// double spend was sealed. An answer now names the digest of the ids it attests, and one
    /// about other ids is dropped.
    #[test]
    fn an_attestation_from_before_a_restart_answers_no_round_after_it() {
        let mut before = one_shard();
        before.lead(0);
        let (_, outcomes) = attest(&mut before, 0, tx(1, &[1], &[3]), 0, vec![true, false]);
        assert!(confirmed(&outcomes));
        let block = before.state().block(1).unwrap().clone();
        let (delayed, _) = attest(&mut before, 0, tx(2, &[2], &[4]), 1, vec![true, false]);
        let mut after = one_shard();
        after.apply(0, &block);
        after.lead(1000);
        settle(&mut after, 1000);
        after.handle(
            1000,
            AtomizerInput::ShardAnswer {
                shard: 0,
                answer: ShardAnswer::Applied { height: 1 },
            },
        );
        let (_, outcomes) = attest(&mut after, 1000, tx(5, &[], &[5]), 1, vec![false]);
        assert!(confirmed(&outcomes));
        after.handle(
            1000,
            AtomizerInput::Submit {
                ticket: 2,
                tx: tx(6, &[1], &[6]),
            },
        );
        settle(&mut after, 1000);
        after.handle(
            1000,
            AtomizerInput::ShardAnswer {
                shard: 0,
                answer: delayed,
            },
        );
        let (_, outcomes) = settle(&mut after, 1000);
        assert!(!confirmed(&outcomes), "id 1 was spent in block 1: {outcomes:?}");
        assert_eq!(after.height(), 2);
    }

    /// Found by the atomizer world: a restarted atomizer learns a lagging shard's height from
    /// its `Behind` answer, which leaves the shard's acknowledged height at 0; when the blocks
    /// streamed then were lost, the resend began at block 1, long gone from the window, and the
    /// shard was declared too far behind for good.
    #[test]
    fn a_resend_after_a_restart_asks_the_shard_where_it_is() {
        let mut config = AtomizerConfig::with_shards(ShardRange::partition(1).unwrap());
        config.window_blocks = 4;
        let mut atomizer = Atomizer::new(config);
        for height in 1..=6 {
            atomizer.apply(0, &AtomizerBlock { height, txs: vec![] });
        }
        atomizer.lead(0);
        settle(&mut atomizer, 0);
        let behind = ShardAnswer::Behind { height: 4 };
        atomizer.handle(
            0,
            AtomizerInput::ShardAnswer {
                shard: 0,
                answer: behind,
            },
        );
        let (lost, _) = settle(&mut atomizer, 0);
        assert_eq!(lost.len(), 2, "blocks 5 and 6 streamed (and lost): {lost:?}");
        let resend_ms = atomizer.poll_timeout().unwrap();
        atomizer.handle_timeout(resend_ms);
        let round = Round::take(&mut atomizer);
        assert!(round.reports.is_empty(), "{:?}", round.reports);
        assert!(matches!(round.sends.as_slice(), [(0, ShardMessage::Block(b))] if b.height == 6));
    }

    /// Found by the atomizer world: a mint re-creating an id spent within the window, then a
    /// spend of it, broke the window's one-spend-per-id cache and panicked the atomizer.
    #[test]
    fn an_id_spent_within_the_window_is_not_created_again() {
        let mut atomizer = one_shard();
        atomizer.lead(0);
        let (_, outcomes) = attest(&mut atomizer, 0, tx(1, &[1], &[2]), 0, vec![true, false]);
        assert!(confirmed(&outcomes));
        let (_, outcomes) = attest(&mut atomizer, 0, tx(2, &[], &[1]), 1, vec![false]);
        assert_eq!(outcomes[0].result, TxResult::Rejected(Vote::OutputExists));
        assert_eq!(atomizer.height(), 1);
    }
}
