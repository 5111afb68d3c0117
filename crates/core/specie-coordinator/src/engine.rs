use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use specie_shard::{DtxnId, ShardRange, ShardRequest, ShardResponse, ShardTx, Vote};
use specie_transaction::{CompactTransaction, DecodeLimits, Txid, TRANSACTION_LOG};

use crate::state::{Applied, CoordinatorCommand, CoordinatorState, InvariantViolation};

/// Opaque handle the driver attaches to a submission to route its outcome back.
pub type Tag = u64;

#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    pub shards: Vec<ShardRange>,
    /// Hamilton capped dtxns at 2000 compact transactions.
    pub batch_transactions_max: usize,
    /// How long a lone transaction may wait for company. 0 = start a dtxn as soon as a slot is
    /// free (Hamilton's policy); batches still grow naturally while earlier dtxns are in flight.
    pub batch_wait_ms: u64,
    pub dtxns_in_flight_max: usize,
    /// Submissions beyond this are refused with [`SubmitError::Busy`] (backpressure).
    pub queue_transactions_max: usize,
    /// A shard that has not answered a phase within this time is asked again.
    pub retry_timeout_ms: u64,
    /// Submissions with more ids than these allow are refused with [`SubmitError::TooLarge`]:
    /// neither the command log nor the shards could decode them back.
    pub transaction_limits: DecodeLimits,
}

impl CoordinatorConfig {
    pub fn with_shards(shards: Vec<ShardRange>) -> Self {
        CoordinatorConfig {
            shards,
            batch_transactions_max: 2000,
            batch_wait_ms: 0,
            dtxns_in_flight_max: 4,
            queue_transactions_max: 200_000,
            retry_timeout_ms: 1000,
            transaction_limits: DecodeLimits::default(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TxResult {
    Confirmed,
    /// A shard refused it; the vote says why (spent input, concurrent conflict, replayed mint).
    Rejected(Vote),
    /// Leadership was lost before the transaction was made durable; it was never applied.
    Dropped,
    /// The coordinator did not take it (not leader, queue full, empty or too large); it was
    /// never applied.
    Refused(SubmitError),
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CoordinatorOutput {
    /// Make this durable, then pass it to [`Coordinator::apply`].
    Propose(CoordinatorCommand),
    Send {
        shard: usize,
        request: ShardRequest,
    },
    /// `tag` is `None` for transactions a previous leader accepted.
    Outcome {
        tag: Option<Tag>,
        txid: Txid,
        result: TxResult,
    },
    /// A shard refused a request, or answered in a way no honest shard does (a shard index or a
    /// dtxn it was never asked about, the wrong number of votes): a protocol bug or a forged
    /// answer. The answer is dropped; the dtxn stays in flight; an operator must look.
    ShardRefused {
        shard: usize,
        response: ShardResponse,
    },
    /// Every shard acknowledged a dtxn's commit: its size and its phases' times, for metrics.
    Finished(DtxnTimes),
}

/// A finished dtxn's size and how long its phases took, by the coordinator's clock (ms).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct DtxnTimes {
    pub transactions: usize,
    /// Prepares sent to the last vote in; `None` when this leader took the dtxn over decided.
    pub prepare_ms: Option<u64>,
    /// The last vote in to the decision applied (made durable through Raft); `None` likewise.
    pub decide_ms: Option<u64>,
    /// Commits sent to the last acknowledgement in.
    pub commit_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("this coordinator is not the leader")]
    NotLeader,
    #[error("the coordinator queue is full ({queued} transactions); retry later")]
    Busy { queued: usize },
    #[error("the transaction spends and creates nothing")]
    Empty,
    #[error("the transaction spends {spent} and creates {created} ids, more than the limits allow")]
    TooLarge { spent: usize, created: usize },
}

impl SubmitError {
    /// Whether `tx` may be ordered at all: it spends or creates something, within the limits.
    pub fn check_shape(tx: &CompactTransaction, limits: &DecodeLimits) -> Result<(), SubmitError> {
        if tx.spent.is_empty() && tx.created.is_empty() {
            return Err(SubmitError::Empty);
        }
        if tx.spent.len() as u64 > limits.compact_spent_max || tx.created.len() as u64 > limits.compact_created_max {
            return Err(SubmitError::TooLarge {
                spent: tx.spent.len(),
                created: tx.created.len(),
            });
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Preparing,
    /// All votes are in and the decision is proposed but not yet durable.
    Deciding,
    Committing,
    /// All commits answered; `Finish` proposed but not yet durable.
    Finishing,
}

/// One shard's part in a dtxn.
#[derive(Clone, Debug)]
struct Participant {
    shard: usize,
    prepare: Vec<ShardTx>,
}

#[derive(Clone, Debug)]
struct Flight {
    phase: Phase,
    txids: Vec<Txid>,
    participants: Vec<Participant>,
    /// Participants (indexes into `participants`) yet to answer the current phase.
    waiting: BTreeSet<usize>,
    /// Per transaction: Yes until some shard refuses it.
    votes: Vec<Vote>,
    tags: Option<Vec<Tag>>,
    sent_ms: u64,
    /// When this leader sent the prepares and when the last vote came in (`None` for a dtxn it
    /// took over in its commit phase), and when it sent the commits: the phases' times.
    prepare_sent_ms: Option<u64>,
    votes_in_ms: Option<u64>,
    commit_sent_ms: u64,
}

struct Queued {
    tag: Tag,
    tx: CompactTransaction,
    enqueued_ms: u64,
}

struct Leader {
    queue: VecDeque<Queued>,
    /// Tags (and txids, to recognise the proposal) of dtxns proposed but not yet applied.
    proposed_tags: HashMap<DtxnId, Vec<(Tag, Txid)>>,
    next_proposal: DtxnId,
    flights: BTreeMap<DtxnId, Flight>,
}

/// A coordinator replica: the replicated state, plus the engine when it leads.
pub struct Coordinator {
    config: CoordinatorConfig,
    state: CoordinatorState,
    leader: Option<Leader>,
    outputs: VecDeque<CoordinatorOutput>,
}

impl Coordinator {
    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    pub fn new(config: CoordinatorConfig, state: CoordinatorState) -> Self {
        ShardRange::check_cover(&config.shards).expect("coordinator shard ranges must cover the id space");
        assert!(config.batch_transactions_max > 0 && config.dtxns_in_flight_max > 0);
        assert!(config.queue_transactions_max >= config.batch_transactions_max);
        Coordinator {
            config,
            state,
            leader: None,
            outputs: VecDeque::new(),
        }
    }

    pub fn state(&self) -> &CoordinatorState {
        &self.state
    }

    /// Replaces the replicated state with a snapshot's: a follower catching up.
    pub fn replace_state(&mut self, state: CoordinatorState) {
        assert!(
            self.leader.is_none(),
            "a leader's state changes only through its own log"
        );
        self.state = state;
    }

    /// The replicated state's invariants and the engine's: the queue within its limit, the next
    /// proposal never behind the durable state, every flight a durable active dtxn whose phase
    /// matches its durable decision, one vote per transaction, waiting only on participants.
    /// O(dtxns in flight): hosts check it after every input.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.state.check_invariants()?;
        let Some(leader) = &self.leader else {
            return Ok(());
        };
        let engine = |holds: bool, what: &'static str| {
            if holds {
                Ok(())
            } else {
                Err(InvariantViolation::Engine(what))
            }
        };
        engine(
            leader.queue.len() <= self.config.queue_transactions_max,
            "the queue is over its limit",
        )?;
        engine(
            leader.next_proposal >= self.state.next_dtxn(),
            "the next proposal is behind the durable state",
        )?;
        for (dtxn, flight) in &leader.flights {
            let Some(active) = self.state.active().get(dtxn) else {
                return Err(InvariantViolation::Engine("a flight is not an active dtxn"));
            };
            let decided = matches!(flight.phase, Phase::Committing | Phase::Finishing);
            engine(
                decided == active.outcomes.is_some(),
                "a flight's phase disagrees with its durable decision",
            )?;
            engine(
                flight.votes.len() == flight.txids.len(),
                "votes and transactions differ in number",
            )?;
            engine(
                flight.waiting.last().is_none_or(|p| *p < flight.participants.len()),
                "a flight waits on a participant it does not have",
            )?;
        }
        Ok(())
    }

    pub fn is_leader(&self) -> bool {
        self.leader.is_some()
    }

    pub fn queued(&self) -> usize {
        self.leader.as_ref().map_or(0, |l| l.queue.len())
    }

    /// Dtxns this leader has proposed and not finished: applied and active, or proposed and not
    /// yet applied (0 while following).
    pub fn dtxns_in_flight(&self) -> usize {
        let Some(leader) = self.leader.as_ref() else { return 0 };
        let unapplied = leader.next_proposal.saturating_sub(self.state.next_dtxn());
        (self.state.active().len()).saturating_add(usize::try_from(unapplied).unwrap_or(usize::MAX))
    }

    /// Takes the lead: every dtxn in the durable state resumes from the start of its last phase.
    /// Call only once the state holds every command the log has committed.
    pub fn become_leader(&mut self, now_ms: u64) {
        let mut leader = Leader {
            queue: VecDeque::new(),
            proposed_tags: HashMap::new(),
            next_proposal: self.state.next_dtxn(),
            flights: BTreeMap::new(),
        };
        for (&dtxn, active) in self.state.active() {
            let mut flight = plan_flight(&self.config.shards, &active.txs, None, now_ms);
            match &active.outcomes {
                None => send_phase(&mut self.outputs, dtxn, &mut flight, Phase::Preparing, now_ms),
                Some(outcomes) => {
                    flight.votes = outcomes.clone();
                    send_phase(&mut self.outputs, dtxn, &mut flight, Phase::Committing, now_ms);
                }
            }
            leader.flights.insert(dtxn, flight);
        }
        self.leader = Some(leader);
    }

    /// Gives up the lead: queued transactions are reported dropped (they were never durable).
    pub fn step_down(&mut self) {
        if let Some(leader) = self.leader.take() {
            for queued in leader.queue {
                self.outputs.push_back(CoordinatorOutput::Outcome {
                    tag: Some(queued.tag),
                    txid: queued.tx.txid,
                    result: TxResult::Dropped,
                });
            }
            // Proposed but unapplied dtxns are not reported: if the log commits them, the next
            // leader finishes them; their clients learn the outcome by querying the UHS.
        }
    }

    /// Queues a refused submission's outcome, for hosts that learn it only from the outputs.
    pub(crate) fn refuse(&mut self, tag: Tag, txid: Txid, error: SubmitError) {
        tracing::debug!(target: TRANSACTION_LOG, %txid, ?error, "refused");
        self.outputs.push_back(CoordinatorOutput::Outcome {
            tag: Some(tag),
            txid,
            result: TxResult::Refused(error),
        });
    }

    pub fn submit(&mut self, tag: Tag, mut tx: CompactTransaction, now_ms: u64) -> Result<(), SubmitError> {
        let Some(leader) = self.leader.as_mut() else {
            return Err(SubmitError::NotLeader);
        };
        SubmitError::check_shape(&tx, &self.config.transaction_limits)?;
        if leader.queue.len() >= self.config.queue_transactions_max {
            return Err(SubmitError::Busy {
                queued: leader.queue.len(),
            });
        }
        tx.attestations.clear();
        leader.queue.push_back(Queued {
            tag,
            tx,
            enqueued_ms: now_ms,
        });
        self.cut_batches(now_ms);
        Ok(())
    }

    /// Cuts due batches and re-sends phases to shards that have been silent too long.
    pub fn tick(&mut self, now_ms: u64) {
        self.cut_batches(now_ms);
        let Some(leader) = self.leader.as_mut() else {
            return;
        };
        for (&dtxn, flight) in leader.flights.iter_mut() {
            let resend = matches!(flight.phase, Phase::Preparing | Phase::Committing)
                && !flight.waiting.is_empty()
                && now_ms.saturating_sub(flight.sent_ms) >= self.config.retry_timeout_ms;
            if resend {
                for &participant in &flight.waiting {
                    let request = phase_request(dtxn, flight, participant);
                    self.outputs.push_back(CoordinatorOutput::Send {
                        shard: flight.participants[participant].shard,
                        request,
                    });
                }
                flight.sent_ms = now_ms;
            }
        }
    }

    fn cut_batches(&mut self, now_ms: u64) {
        let Some(leader) = self.leader.as_mut() else {
            return;
        };
        loop {
            // Saturating: commands applied from another leader may have moved `next_dtxn` past
            // this leader's proposals.
            let unapplied = leader.next_proposal.saturating_sub(self.state.next_dtxn());
            let unapplied = usize::try_from(unapplied).unwrap_or(usize::MAX);
            let in_flight = self.state.active().len().saturating_add(unapplied);
            let Some(oldest) = leader.queue.front() else {
                break;
            };
            let full = leader.queue.len() >= self.config.batch_transactions_max;
            let waited = now_ms.saturating_sub(oldest.enqueued_ms) >= self.config.batch_wait_ms;
            if in_flight >= self.config.dtxns_in_flight_max || !(full || waited) {
                break;
            }
            // The state never applies the last id (see `CoordinatorState::apply`): stop before it.
            let Some(after) = leader.next_proposal.checked_add(1) else {
                break;
            };
            let take = leader.queue.len().min(self.config.batch_transactions_max);
            let mut txs = Vec::with_capacity(take);
            let mut tags = Vec::with_capacity(take);
            for queued in leader.queue.drain(..take) {
                tags.push((queued.tag, queued.tx.txid));
                txs.push(queued.tx);
            }
            let dtxn = leader.next_proposal;
            leader.next_proposal = after;
            leader.proposed_tags.insert(dtxn, tags);
            self.outputs
                .push_back(CoordinatorOutput::Propose(CoordinatorCommand::Prepare { dtxn, txs }));
        }
    }

    /// Applies a durable command; on the leader, starts the phase it records.
    pub fn apply(&mut self, command: &CoordinatorCommand, now_ms: u64) {
        let applied = self.state.apply(command);
        let Some(leader) = self.leader.as_mut() else {
            return;
        };
        if applied == Applied::Ignored {
            return;
        }
        match command {
            CoordinatorCommand::Prepare { dtxn, txs } => {
                leader.next_proposal = leader.next_proposal.max(self.state.next_dtxn());
                let tags = match leader.proposed_tags.remove(dtxn) {
                    Some(proposed)
                        if proposed.len() == txs.len()
                            && proposed.iter().zip(txs).all(|((_, txid), tx)| *txid == tx.txid) =>
                    {
                        Some(proposed.into_iter().map(|(tag, _)| tag).collect())
                    }
                    Some(proposed) => {
                        // Another leader's dtxn took the id: this leader's proposal for it will be
                        // ignored when it applies, so its transactions were never applied.
                        tracing::warn!(dtxn, "another leader's dtxn took an id this leader proposed");
                        for (tag, txid) in proposed {
                            self.outputs.push_back(CoordinatorOutput::Outcome {
                                tag: Some(tag),
                                txid,
                                result: TxResult::Dropped,
                            });
                        }
                        None
                    }
                    None => None,
                };
                let mut flight = plan_flight(&self.config.shards, txs, tags, now_ms);
                send_phase(&mut self.outputs, *dtxn, &mut flight, Phase::Preparing, now_ms);
                leader.flights.insert(*dtxn, flight);
            }
            CoordinatorCommand::Commit { dtxn, outcomes } => {
                if let Some(flight) = leader.flights.get_mut(dtxn) {
                    flight.votes = outcomes.clone();
                    send_phase(&mut self.outputs, *dtxn, flight, Phase::Committing, now_ms);
                }
            }
            CoordinatorCommand::Finish { dtxns } => {
                let finished_below = self.state.finished_below();
                for dtxn in dtxns {
                    if let Some(flight) = leader.flights.remove(dtxn) {
                        for participant in &flight.participants {
                            let request = ShardRequest::Discard {
                                dtxn: *dtxn,
                                finished_below,
                            };
                            self.outputs.push_back(CoordinatorOutput::Send {
                                shard: participant.shard,
                                request,
                            });
                        }
                    }
                }
            }
        }
        self.cut_batches(now_ms);
    }

    /// Takes a shard's answer. Answers come from the network, so nothing in them is trusted:
    /// duplicates and late answers to earlier phases are ignored; an answer no honest shard
    /// gives (an unknown shard index, a dtxn or shard that was never asked, the wrong number of
    /// votes, a refusal) is dropped with a warning and reported as
    /// [`CoordinatorOutput::ShardRefused`]. None of them changes a dtxn's course.
    pub fn on_shard_response(&mut self, shard: usize, response: ShardResponse, now_ms: u64) {
        let Some(leader) = self.leader.as_mut() else {
            return;
        };
        let dtxn = response.dtxn();
        if shard >= self.config.shards.len() {
            tracing::warn!(shard, ?response, "dropped an answer from a shard that does not exist");
            self.outputs
                .push_back(CoordinatorOutput::ShardRefused { shard, response });
            return;
        }
        let Some(flight) = leader.flights.get_mut(&dtxn) else {
            if matches!(response, ShardResponse::Refused { .. }) {
                tracing::warn!(
                    shard,
                    ?response,
                    "a shard refused a request of a dtxn no longer in flight"
                );
                self.outputs
                    .push_back(CoordinatorOutput::ShardRefused { shard, response });
            } else if dtxn >= leader.next_proposal.max(self.state.next_dtxn()) {
                tracing::warn!(shard, ?response, "dropped an answer for a dtxn that was never started");
                self.outputs
                    .push_back(CoordinatorOutput::ShardRefused { shard, response });
            }
            // Otherwise a late or duplicated answer for a finished dtxn (or a discard's answer).
            return;
        };
        let Some(participant) = flight.participants.iter().position(|p| p.shard == shard) else {
            tracing::warn!(
                shard,
                ?response,
                "dropped an answer from a shard that takes no part in the dtxn"
            );
            self.outputs
                .push_back(CoordinatorOutput::ShardRefused { shard, response });
            return;
        };
        // False for a duplicate, or a commit acknowledgement while other shards are still to commit.
        let progressed = match (&response, flight.phase) {
            (ShardResponse::Prepared { votes, .. }, phase) => {
                let prepared = &flight.participants[participant].prepare;
                if votes.len() != prepared.len() {
                    tracing::warn!(
                        shard,
                        dtxn,
                        votes = votes.len(),
                        transactions = prepared.len(),
                        "dropped a prepare answer with the wrong number of votes"
                    );
                    self.outputs
                        .push_back(CoordinatorOutput::ShardRefused { shard, response });
                    return;
                }
                record_votes(&mut self.outputs, dtxn, flight, (participant, phase), votes, now_ms)
            }
            // Stale while committing: the shard committed and was already told to discard.
            (ShardResponse::Committed { .. } | ShardResponse::Stale { .. }, Phase::Committing) => {
                record_committed(&mut self.outputs, dtxn, flight, participant, now_ms)
            }
            (ShardResponse::Refused { .. }, _) => {
                tracing::warn!(shard, ?response, "a shard refused a request");
                self.outputs
                    .push_back(CoordinatorOutput::ShardRefused { shard, response });
                true
            }
            _ => true, // Late answer to an earlier phase.
        };
        if progressed {
            self.cut_batches(now_ms);
        }
    }

    pub fn poll(&mut self) -> Option<CoordinatorOutput> {
        self.outputs.pop_front()
    }

    /// When [`Coordinator::tick`] next has work: the oldest queued transaction's batch wait
    /// ends (if a dtxn slot is free to cut it into), or a phase's answers are overdue. `None`
    /// when only an input can make progress.
    pub fn deadline_ms(&self) -> Option<u64> {
        let leader = self.leader.as_ref()?;
        let in_flight = self.dtxns_in_flight();
        let cut = leader
            .queue
            .front()
            .filter(|_| in_flight < self.config.dtxns_in_flight_max)
            .map(|oldest| oldest.enqueued_ms.saturating_add(self.config.batch_wait_ms));
        let retry = leader
            .flights
            .values()
            .filter(|f| matches!(f.phase, Phase::Preparing | Phase::Committing) && !f.waiting.is_empty())
            .map(|f| f.sent_ms.saturating_add(self.config.retry_timeout_ms))
            .min();
        cut.into_iter().chain(retry).min()
    }
}

/// Takes `participant`'s prepare votes (as many as it was asked about); once every participant
/// has voted, proposes the decision. Returns false for a duplicate, or a late answer to an
/// earlier phase, which changes nothing.
fn record_votes(
    outputs: &mut VecDeque<CoordinatorOutput>,
    dtxn: DtxnId,
    flight: &mut Flight,
    (participant, phase): (usize, Phase),
    votes: &[Vote],
    now_ms: u64,
) -> bool {
    if phase != Phase::Preparing || !flight.waiting.remove(&participant) {
        return false;
    }
    for (tx, vote) in flight.participants[participant].prepare.iter().zip(votes) {
        // Indexes come from this leader's own plan of the dtxn, never from the answer.
        let decided = &mut flight.votes[tx.index as usize];
        // Keep the most telling refusal, whatever order the shards answer in, so the
        // reason a client sees never depends on message timing.
        if refusal_rank(*vote) > refusal_rank(*decided) {
            *decided = *vote;
        }
    }
    if flight.waiting.is_empty() {
        flight.phase = Phase::Deciding;
        flight.votes_in_ms = Some(now_ms);
        let outcomes = flight.votes.clone();
        outputs.push_back(CoordinatorOutput::Propose(CoordinatorCommand::Commit {
            dtxn,
            outcomes,
        }));
    }
    true
}

/// Takes `participant`'s commit acknowledgement; once every participant has committed, answers
/// every transaction's outcome and proposes to finish the dtxn. Returns false while others are
/// still to commit, and for a duplicate.
fn record_committed(
    outputs: &mut VecDeque<CoordinatorOutput>,
    dtxn: DtxnId,
    flight: &mut Flight,
    participant: usize,
    now_ms: u64,
) -> bool {
    if !flight.waiting.remove(&participant) || !flight.waiting.is_empty() {
        return false;
    }
    flight.phase = Phase::Finishing;
    let tags = flight.tags.take();
    for (i, (txid, vote)) in flight.txids.iter().zip(&flight.votes).enumerate() {
        let result = if *vote == Vote::Yes {
            TxResult::Confirmed
        } else {
            TxResult::Rejected(*vote)
        };
        let tag = tags.as_ref().and_then(|t| t.get(i).copied());
        tracing::debug!(target: TRANSACTION_LOG, %txid, dtxn, index = i, outcome = ?result, "settled");
        outputs.push_back(CoordinatorOutput::Outcome {
            tag,
            txid: *txid,
            result,
        });
    }
    outputs.push_back(CoordinatorOutput::Propose(CoordinatorCommand::Finish {
        dtxns: vec![dtxn],
    }));
    let voting = flight.prepare_sent_ms.zip(flight.votes_in_ms);
    outputs.push_back(CoordinatorOutput::Finished(DtxnTimes {
        transactions: flight.txids.len(),
        prepare_ms: voting.map(|(sent, voted)| voted.saturating_sub(sent)),
        decide_ms: voting.map(|(_, voted)| flight.commit_sent_ms.saturating_sub(voted)),
        commit_ms: now_ms.saturating_sub(flight.commit_sent_ms),
    }));
    true
}

/// Which refusal to report when shards disagree: a spent input says most (a double spend), an
/// existing output next (a replayed mint), then the transient conflicts.
fn refusal_rank(vote: Vote) -> u8 {
    match vote {
        Vote::Yes => 0,
        Vote::OutputLocked => 1,
        Vote::InputLocked => 2,
        Vote::OutputExists => 3,
        Vote::InputMissing => 4,
    }
}

/// Splits each transaction's ids by owning shard.
fn plan_flight(shards: &[ShardRange], txs: &[CompactTransaction], tags: Option<Vec<Tag>>, now_ms: u64) -> Flight {
    let mut by_shard: BTreeMap<usize, Vec<ShardTx>> = BTreeMap::new();
    for (index, tx) in txs.iter().enumerate() {
        let mut touched: BTreeMap<usize, ShardTx> = BTreeMap::new();
        let empty = || ShardTx {
            index: index as u32,
            spent: vec![],
            created: vec![],
        };
        for id in &tx.spent {
            touched
                .entry(ShardRange::owner(shards, id))
                .or_insert_with(empty)
                .spent
                .push(*id);
        }
        for id in &tx.created {
            touched
                .entry(ShardRange::owner(shards, id))
                .or_insert_with(empty)
                .created
                .push(*id);
        }
        for (shard, shard_tx) in touched {
            by_shard.entry(shard).or_default().push(shard_tx);
        }
    }
    // The caller passes tags only for the transactions they were proposed with.
    debug_assert!(tags.as_ref().is_none_or(|tags| tags.len() == txs.len()));
    Flight {
        phase: Phase::Preparing,
        txids: txs.iter().map(|tx| tx.txid).collect(),
        participants: by_shard
            .into_iter()
            .map(|(shard, prepare)| Participant { shard, prepare })
            .collect(),
        waiting: BTreeSet::new(),
        votes: vec![Vote::Yes; txs.len()],
        tags,
        sent_ms: now_ms,
        prepare_sent_ms: None,
        votes_in_ms: None,
        commit_sent_ms: now_ms,
    }
}

fn phase_request(dtxn: DtxnId, flight: &Flight, participant: usize) -> ShardRequest {
    let prepare = &flight.participants[participant].prepare;
    match flight.phase {
        Phase::Preparing => ShardRequest::Prepare {
            dtxn,
            txs: prepare.clone(),
        },
        Phase::Committing => ShardRequest::Commit {
            dtxn,
            complete: prepare
                .iter()
                .map(|tx| flight.votes[tx.index as usize] == Vote::Yes)
                .collect(),
        },
        Phase::Deciding | Phase::Finishing => {
            unreachable!("no request is sent while a proposal is pending")
        }
    }
}

fn send_phase(outputs: &mut VecDeque<CoordinatorOutput>, dtxn: DtxnId, flight: &mut Flight, phase: Phase, now_ms: u64) {
    flight.phase = phase;
    flight.sent_ms = now_ms;
    match phase {
        Phase::Preparing => flight.prepare_sent_ms = Some(now_ms),
        Phase::Committing => flight.commit_sent_ms = now_ms,
        Phase::Deciding | Phase::Finishing => unreachable!("no requests are sent while {phase:?}"),
    }
    flight.waiting = (0..flight.participants.len()).collect();
    for participant in 0..flight.participants.len() {
        let request = phase_request(dtxn, flight, participant);
        outputs.push_back(CoordinatorOutput::Send {
            shard: flight.participants[participant].shard,
            request,
        });
    }
}

#[cfg(test)]
mod tests {
    use specie_transaction::UhsId;

    use super::*;

    fn coordinator() -> Coordinator {
        let mut config = CoordinatorConfig::with_shards(ShardRange::partition(2).unwrap());
        config.batch_wait_ms = 10;
        config.batch_transactions_max = 3;
        config.queue_transactions_max = 4;
        config.dtxns_in_flight_max = 1;
        Coordinator::new(config, CoordinatorState::default())
    }

    fn tx(n: u8) -> CompactTransaction {
        CompactTransaction {
            txid: Txid([n; 32]),
            created: vec![UhsId([n; 32])],
            ..Default::default()
        }
    }

    fn proposals(coordinator: &mut Coordinator) -> Vec<CoordinatorCommand> {
        std::iter::from_fn(|| coordinator.poll())
            .filter_map(|o| match o {
                CoordinatorOutput::Propose(command) => Some(command),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn only_a_leader_accepts_and_a_full_queue_pushes_back() {
        let mut c = coordinator();
        assert_eq!(c.submit(0, tx(1), 0), Err(SubmitError::NotLeader));
        c.become_leader(0);
        assert_eq!(c.submit(0, CompactTransaction::default(), 0), Err(SubmitError::Empty));
        // The first three fill a batch, which takes the only dtxn slot; the next four wait.
        for tag in 0..7 {
            c.submit(tag, tx(tag as u8 + 1), 0).unwrap();
        }
        assert_eq!(proposals(&mut c).len(), 1);
        assert_eq!(c.queued(), 4);
        assert_eq!(c.submit(9, tx(9), 0), Err(SubmitError::Busy { queued: 4 }));
    }

    #[test]
    fn batches_cut_on_size_or_wait() {
        let mut c = coordinator();
        c.become_leader(0);
        c.submit(0, tx(1), 0).unwrap();
        c.tick(5);
        assert!(
            proposals(&mut c).is_empty(),
            "a lone transaction waits up to batch_wait_ms"
        );
        c.tick(10);
        assert!(matches!(&proposals(&mut c)[..], [CoordinatorCommand::Prepare { dtxn: 0, txs }] if txs.len() == 1));
        // Its dtxn holds the only slot until applied and finished; apply it so the slot frees up.
        c.apply(
            &CoordinatorCommand::Prepare {
                dtxn: 0,
                txs: vec![tx(1)],
            },
            10,
        );
        c.apply(
            &CoordinatorCommand::Commit {
                dtxn: 0,
                outcomes: vec![Vote::Yes],
            },
            10,
        );
        c.apply(&CoordinatorCommand::Finish { dtxns: vec![0] }, 10);
        for tag in 1..4 {
            c.submit(tag, tx(tag as u8 + 1), 10).unwrap();
        }
        assert!(
            matches!(&proposals(&mut c)[..], [CoordinatorCommand::Prepare { dtxn: 1, txs }] if txs.len() == 3),
            "a full batch is cut at once"
        );
    }

    /// The deadline a host sleeps until is exactly when `tick` next has work: a lone
    /// transaction's batch wait, then (once its dtxn's prepares are out) the retry time-out; and
    /// nothing at all while the only dtxn slot is taken and no phase is overdue.
    #[test]
    fn the_deadline_is_when_tick_next_has_work() {
        let mut c = coordinator();
        assert_eq!(c.deadline_ms(), None, "a follower has no timers");
        c.become_leader(0);
        assert_eq!(c.deadline_ms(), None, "an idle leader waits for input");
        c.submit(0, tx(1), 3).unwrap();
        assert_eq!(c.deadline_ms(), Some(13), "enqueued at 3, batch_wait_ms 10");
        c.tick(12);
        assert!(proposals(&mut c).is_empty(), "nothing due before the deadline");
        c.tick(13);
        assert_eq!(proposals(&mut c).len(), 1, "the batch is cut at the deadline");
        // Proposed, not yet durable: the slot is taken and no phase runs, so no timer.
        c.submit(1, tx(2), 13).unwrap();
        assert_eq!(c.deadline_ms(), None);
        c.apply(
            &CoordinatorCommand::Prepare {
                dtxn: 0,
                txs: vec![tx(1)],
            },
            20,
        );
        let retry = c.config.retry_timeout_ms;
        assert_eq!(
            c.deadline_ms(),
            Some(20 + retry),
            "prepares sent at 20 are retried then"
        );
        let resent = |c: &mut Coordinator| {
            std::iter::from_fn(|| c.poll())
                .filter(|o| matches!(o, CoordinatorOutput::Send { .. }))
                .count()
        };
        assert!(resent(&mut c) > 0, "the prepares went out on apply");
        c.tick(20 + retry - 1);
        assert_eq!(resent(&mut c), 0, "no retry before the deadline");
        c.tick(20 + retry);
        assert!(resent(&mut c) > 0, "the silent shards are asked again at the deadline");
        assert_eq!(c.deadline_ms(), Some(20 + 2 * retry));
    }

    #[test]
    fn stepping_down_drops_what_was_never_durable() {
        let mut c = coordinator();
        c.become_leader(0);
        c.submit(7, tx(1), 0).unwrap();
        c.step_down();
        let outcomes: Vec<_> = std::iter::from_fn(|| c.poll()).collect();
        assert_eq!(
            outcomes,
            vec![CoordinatorOutput::Outcome {
                tag: Some(7),
                txid: Txid([1; 32]),
                result: TxResult::Dropped
            }]
        );
        assert!(!c.is_leader());
        assert_eq!(c.submit(8, tx(2), 0), Err(SubmitError::NotLeader));
    }

    /// Two shards; one transaction touching both, prepared and sent: returns the coordinator
    /// with both prepares outstanding.
    fn preparing() -> Coordinator {
        let mut c = coordinator();
        c.become_leader(0);
        let tx = CompactTransaction {
            txid: Txid([1; 32]),
            spent: vec![UhsId([0x01; 32])],
            created: vec![UhsId([0xf0; 32])],
            ..Default::default()
        };
        c.submit(1, tx, 0).unwrap();
        c.tick(10);
        for command in proposals(&mut c) {
            c.apply(&command, 10);
        }
        let sends: Vec<_> = std::iter::from_fn(|| c.poll()).collect();
        assert_eq!(sends.len(), 2, "{sends:?}");
        c
    }

    fn refused(c: &mut Coordinator, shard: usize, response: ShardResponse) {
        c.on_shard_response(shard, response.clone(), 20);
        let outputs: Vec<_> = std::iter::from_fn(|| c.poll()).collect();
        assert_eq!(outputs, vec![CoordinatorOutput::ShardRefused { shard, response }]);
    }

    fn ignored(c: &mut Coordinator, shard: usize, response: ShardResponse) {
        c.on_shard_response(shard, response.clone(), 20);
        let outputs: Vec<_> = std::iter::from_fn(|| c.poll()).collect();
        assert_eq!(outputs, vec![], "{response:?} from shard {shard}");
    }

    #[test]
    fn answers_no_honest_shard_gives_are_dropped_and_reported() {
        let mut c = preparing();
        let yes = |dtxn| ShardResponse::Prepared {
            dtxn,
            votes: vec![Vote::Yes],
        };
        refused(&mut c, 2, yes(0));
        refused(&mut c, usize::MAX, yes(0));
        refused(&mut c, 0, yes(1));
        refused(&mut c, 0, yes(u64::MAX));
        refused(&mut c, 0, ShardResponse::Prepared { dtxn: 0, votes: vec![] });
        refused(
            &mut c,
            1,
            ShardResponse::Prepared {
                dtxn: 0,
                votes: vec![Vote::Yes; 3],
            },
        );
        refused(
            &mut c,
            0,
            ShardResponse::Refused {
                dtxn: 0,
                reason: specie_shard::Refusal::NotOwned,
            },
        );
        refused(
            &mut c,
            1,
            ShardResponse::Refused {
                dtxn: 7,
                reason: specie_shard::Refusal::WatermarkPassesUncommitted,
            },
        );
        // Answers to a later phase, or for a dtxn already finished: nothing to do.
        ignored(&mut c, 0, ShardResponse::Committed { dtxn: 0 });
        ignored(&mut c, 0, ShardResponse::Stale { dtxn: 0 });
        ignored(&mut c, 0, ShardResponse::Discarded { dtxn: 0 });
        // None of that moved the dtxn: the real answers still decide it, duplicates change nothing.
        ignored(&mut c, 0, yes(0));
        ignored(&mut c, 0, yes(0));
        c.on_shard_response(
            1,
            ShardResponse::Prepared {
                dtxn: 0,
                votes: vec![Vote::InputMissing],
            },
            20,
        );
        assert_eq!(
            proposals(&mut c),
            vec![CoordinatorCommand::Commit {
                dtxn: 0,
                outcomes: vec![Vote::InputMissing]
            }]
        );
        // Deciding, then committing: prepare answers (even forged, well-formed ones) are late.
        ignored(&mut c, 1, yes(0));
        c.apply(
            &CoordinatorCommand::Commit {
                dtxn: 0,
                outcomes: vec![Vote::InputMissing],
            },
            20,
        );
        let sends = std::iter::from_fn(|| c.poll()).count();
        assert_eq!(sends, 2);
        ignored(&mut c, 1, yes(0));
        ignored(&mut c, 0, ShardResponse::Committed { dtxn: 0 });
        ignored(&mut c, 0, ShardResponse::Committed { dtxn: 0 });
        c.on_shard_response(1, ShardResponse::Stale { dtxn: 0 }, 30);
        let outputs: Vec<_> = std::iter::from_fn(|| c.poll()).collect();
        assert_eq!(
            outputs,
            vec![
                CoordinatorOutput::Outcome {
                    tag: Some(1),
                    txid: Txid([1; 32]),
                    result: TxResult::Rejected(Vote::InputMissing)
                },
                CoordinatorOutput::Propose(CoordinatorCommand::Finish { dtxns: vec![0] }),
                // Prepares sent at 10, the last vote at 20, the decision applied (and the
                // commits sent) at 20, the last acknowledgement at 30.
                CoordinatorOutput::Finished(DtxnTimes {
                    transactions: 1,
                    prepare_ms: Some(10),
                    decide_ms: Some(0),
                    commit_ms: 10,
                }),
            ]
        );
        // Finished: later answers for dtxn 0 are late, not forged.
        ignored(&mut c, 1, ShardResponse::Committed { dtxn: 0 });
        ignored(&mut c, 1, yes(0));
    }

    #[test]
    fn followers_ignore_shard_answers() {
        let mut c = coordinator();
        c.on_shard_response(usize::MAX, ShardResponse::Stale { dtxn: u64::MAX }, 0);
        assert_eq!(c.poll(), None);
    }

    #[test]
    fn another_leaders_dtxn_under_a_proposed_id_drops_the_proposal() {
        let mut c = coordinator();
        c.become_leader(0);
        c.submit(5, tx(1), 0).unwrap();
        c.tick(10);
        let ours = proposals(&mut c);
        assert!(matches!(&ours[..], [CoordinatorCommand::Prepare { dtxn: 0, .. }]));
        // The log commits a rival's dtxn 0 (two transactions) before ours.
        let theirs = CoordinatorCommand::Prepare {
            dtxn: 0,
            txs: vec![tx(7), tx(8)],
        };
        c.apply(&theirs, 11);
        let outputs: Vec<_> = std::iter::from_fn(|| c.poll()).collect();
        assert!(outputs.contains(&CoordinatorOutput::Outcome {
            tag: Some(5),
            txid: Txid([1; 32]),
            result: TxResult::Dropped
        }));
        c.apply(&ours[0], 12);
        assert_eq!(c.poll(), None, "ours is ignored: the id is taken");
        assert_eq!(c.state().next_dtxn(), 1);
        // The rival's dtxn runs to its end without tags, and this leader proposes from dtxn 1 on.
        c.submit(6, tx(2), 12).unwrap();
        c.tick(30);
        assert!(proposals(&mut c).is_empty(), "the only slot is taken by dtxn 0");
    }

    #[test]
    fn foreign_prepares_beyond_the_next_proposal_do_not_underflow() {
        let mut c = coordinator();
        c.become_leader(0);
        for dtxn in 0..3 {
            c.apply(
                &CoordinatorCommand::Prepare {
                    dtxn,
                    txs: vec![tx(dtxn as u8 + 1)],
                },
                0,
            );
        }
        c.submit(1, tx(9), 0).unwrap();
        c.tick(100);
        c.tick(100);
        assert_eq!(c.state().next_dtxn(), 3);
    }

    #[test]
    fn the_last_dtxn_id_is_never_proposed() {
        let mut config = CoordinatorConfig::with_shards(ShardRange::partition(2).unwrap());
        config.batch_transactions_max = 1;
        config.queue_transactions_max = 4;
        let state = CoordinatorState::from_parts(u64::MAX - 1, BTreeMap::new());
        let mut c = Coordinator::new(config, state);
        c.become_leader(0);
        c.submit(1, tx(1), 0).unwrap();
        c.submit(2, tx(2), 0).unwrap();
        let ours = proposals(&mut c);
        assert!(
            matches!(&ours[..], [CoordinatorCommand::Prepare { dtxn, .. }] if *dtxn == u64::MAX - 1),
            "{ours:?}"
        );
        c.apply(&ours[0], 0);
        c.tick(1);
        assert!(proposals(&mut c).is_empty());
        assert_eq!(c.queued(), 1, "waits: there is no id left for it");
    }

    #[test]
    fn oversized_transactions_are_refused_at_submit() {
        let mut c = coordinator();
        c.become_leader(0);
        let limits = DecodeLimits::default();
        let spent = (limits.compact_spent_max + 1) as usize;
        let big = CompactTransaction {
            txid: Txid([1; 32]),
            spent: vec![UhsId([1; 32]); spent],
            ..Default::default()
        };
        assert_eq!(c.submit(0, big, 0), Err(SubmitError::TooLarge { spent, created: 0 }));
        let created = (limits.compact_created_max + 1) as usize;
        let big = CompactTransaction {
            txid: Txid([1; 32]),
            created: vec![UhsId([1; 32]); created],
            ..Default::default()
        };
        assert_eq!(c.submit(0, big, 0), Err(SubmitError::TooLarge { spent: 0, created }));
        assert_eq!(c.queued(), 0);
    }
}
