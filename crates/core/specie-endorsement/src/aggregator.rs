//! The endorsement aggregator: gathers transactions into batches and has k endorsers sign each
//! batch's Merkle root with FROST's two rounds. Pure and deterministic. (The FROST signature
//! aggregator; not to be confused with the 2PC coordinator of `specie-coordinator`, which checks
//! the signatures it produces.)
//!
//! One signing attempt is one session: round 1 asks k endorsers for nonce commitments, round 2
//! sends them the batch and the signing package, and k shares aggregate into one BIP340
//! signature. An attempt ends when each chosen endorser has answered or its round's time-out
//! passes. If it ended without k shares, the endorsers that stayed silent, refused or sent a
//! share that does not verify become suspects for this batch, and the next attempt (a new
//! session) picks another k-subset without them. A transaction refused as invalid by n − k + 1
//! endorsers can never gather k signers, so it leaves the batch, answered with their reasons;
//! a transaction refused by fewer stays, and is signed by endorsers that accept it: k − 1
//! colluding endorsers cannot censor it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;

use frost::keys::PublicKeyPackage;
use frost::round1::SigningCommitments;
use frost::round2::SignatureShare;
use frost::{Identifier, SigningPackage};
use frost_secp256k1_tr as frost;
use specie_role::{Output, Role, Ticket};

use crate::format::{Endorsement, GroupKey, SIGNATURE_BYTES};
use crate::keys::{group_key, EndorserId, KeyError, Threshold};
use crate::merkle::{MerkleTree, BATCH_TRANSACTIONS_MAX};
use crate::messages::{AggregatorId, AggregatorMessage, BatchItem, EndorserMessage, Reason, Refusal, SessionId};

/// An aggregator's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggregatorConfig {
    /// The most transactions one batch (one signature) holds.
    pub batch_transactions_max: usize,
    /// How long the oldest queued transaction waits for its batch to fill, in milliseconds.
    pub batch_delay_ms: u64,
    /// Transactions waiting for a batch; past it, submissions are answered `Busy`.
    pub queue_transactions_max: usize,
    /// Batches being signed at once.
    pub batches_in_flight_max: usize,
    /// How long one FROST round waits for the chosen endorsers, in milliseconds.
    pub round_timeout_ms: u64,
    /// Signing attempts per batch before its transactions are answered `Failed`.
    pub attempts_max: u32,
    /// Endorsers asked for commitments beyond the k needed: round 2 goes to the first k that
    /// answer, so one slow or silent endorser does not cost an attempt.
    pub spare_endorsers: u16,
}

impl Default for AggregatorConfig {
    fn default() -> Self {
        AggregatorConfig {
            batch_transactions_max: 1000,
            batch_delay_ms: 5,
            queue_transactions_max: 100_000,
            batches_in_flight_max: 8,
            round_timeout_ms: 500,
            attempts_max: 8,
            spare_endorsers: 1,
        }
    }
}

/// What an aggregator receives.
#[derive(Clone, Debug, PartialEq)]
pub enum AggregatorInput<I, R> {
    /// A caller's transaction to endorse; answered on `ticket`.
    Submit { ticket: Ticket, item: I },
    /// An endorser's answer, authenticated by the host.
    FromEndorser {
        from: EndorserId,
        message: EndorserMessage<R>,
    },
}

/// The answer to one submitted transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum EndorseReply<R> {
    Endorsed(Endorsement),
    /// Refused as invalid by at least n − k + 1 endorsers, with their reasons.
    Refused {
        reasons: Vec<(EndorserId, R)>,
    },
    /// The queue is full (`queue_transactions_max`); submit again later.
    Busy,
    /// `attempts_max` attempts did not gather k valid shares.
    Failed,
    /// This aggregator is not leading (or stopped leading before the batch was signed).
    NotLeading,
}

/// What the aggregator tells its operator.
#[derive(Clone, Debug, PartialEq)]
pub enum AggregatorReport<R> {
    Endorsed {
        session: SessionId,
        transactions: usize,
        attempts: u32,
    },
    /// Chosen endorsers that did not answer a round in time.
    Unresponsive {
        session: SessionId,
        endorsers: Vec<EndorserId>,
    },
    /// Endorsers whose signature share did not verify (FROST names them).
    BadShares {
        session: SessionId,
        endorsers: Vec<EndorserId>,
    },
    Refused {
        session: SessionId,
        endorser: EndorserId,
        refusal: Refusal<R>,
    },
    /// A batch gave up after `attempts_max` attempts.
    Failed { session: SessionId, transactions: usize },
}

enum Phase {
    Committing(BTreeMap<Identifier, SigningCommitments>),
    Signing {
        package: SigningPackage,
        shares: BTreeMap<Identifier, SignatureShare>,
    },
}

struct Batch<I, R> {
    tickets: Vec<Ticket>,
    items: Vec<I>,
    tree: MerkleTree,
    attempts: u32,
    signers: BTreeSet<EndorserId>,
    /// Chosen endorsers that refused this attempt (they count as answered).
    refused: BTreeSet<EndorserId>,
    /// Endorsers left out of this batch's next attempts.
    suspects: BTreeSet<EndorserId>,
    /// Item index → endorser → why it refused the item.
    invalid: BTreeMap<u32, BTreeMap<EndorserId, R>>,
    phase: Phase,
    deadline_ms: u64,
}

impl<I: BatchItem, R> Batch<I, R> {
    fn new(entries: Vec<(Ticket, I)>) -> Batch<I, R> {
        let (tickets, items): (Vec<_>, Vec<_>) = entries.into_iter().unzip();
        let digests: Vec<_> = items.iter().map(BatchItem::digest).collect();
        Batch {
            tickets,
            items,
            tree: MerkleTree::new(&digests),
            attempts: 0,
            signers: BTreeSet::new(),
            refused: BTreeSet::new(),
            suspects: BTreeSet::new(),
            invalid: BTreeMap::new(),
            phase: Phase::Committing(BTreeMap::new()),
            deadline_ms: 0,
        }
    }

    /// Chosen endorsers that have not answered the current round.
    fn silent(&self) -> Vec<EndorserId> {
        let answered = |id: &EndorserId| {
            self.refused.contains(id)
                || match &self.phase {
                    Phase::Committing(commitments) => commitments.contains_key(&id.identifier()),
                    Phase::Signing { shares, .. } => shares.contains_key(&id.identifier()),
                }
        };
        self.signers.iter().copied().filter(|id| !answered(id)).collect()
    }
}

/// The endorsement aggregator of one endorser group.
pub struct Aggregator<I: BatchItem, R: Reason> {
    id: AggregatorId,
    threshold: Threshold,
    public: PublicKeyPackage,
    group_key: GroupKey,
    config: AggregatorConfig,
    leading: bool,
    queue: VecDeque<(Ticket, I)>,
    /// When the oldest queued transaction arrived.
    queued_since_ms: Option<u64>,
    /// Batches being signed, by their current session.
    batches: BTreeMap<SessionId, Batch<I, R>>,
    next_session: SessionId,
    /// Where the next k-subset starts, so that load spreads over the group.
    rotation: u16,
    outputs: VecDeque<Output<Aggregator<I, R>>>,
}

impl<I: BatchItem, R: Reason> Aggregator<I, R> {
    /// An aggregator for the group whose public shares are `public`. `first_session` must exceed
    /// every session this aggregator id used before (a restarted aggregator starts above them,
    /// e.g. from the host's clock), so endorsers never see one session id twice.
    pub fn new(
        id: AggregatorId,
        public: PublicKeyPackage,
        config: AggregatorConfig,
        first_session: SessionId,
    ) -> Result<Aggregator<I, R>, KeyError> {
        assert!(
            (1..=BATCH_TRANSACTIONS_MAX).contains(&config.batch_transactions_max)
                && config.batches_in_flight_max >= 1
                && config.attempts_max >= 1,
            "aggregator limits out of range: {config:?}"
        );
        let k = *public
            .min_signers()
            .as_ref()
            .ok_or(KeyError::BadThreshold { k: 0, n: 0 })?;
        let n =
            u16::try_from(public.verifying_shares().len()).map_err(|_| KeyError::BadThreshold { k, n: u16::MAX })?;
        let threshold = Threshold::new(k, n)?;
        let expected: Vec<_> = threshold.endorsers().map(EndorserId::identifier).collect();
        if !public.verifying_shares().keys().eq(expected.iter()) {
            return Err(KeyError::BadThreshold { k, n });
        }
        Ok(Aggregator {
            id,
            threshold,
            group_key: group_key(&public)?,
            public,
            config,
            leading: false,
            queue: VecDeque::new(),
            queued_since_ms: None,
            batches: BTreeMap::new(),
            next_session: first_session,
            rotation: 0,
            outputs: VecDeque::new(),
        })
    }

    pub fn id(&self) -> AggregatorId {
        self.id
    }

    pub fn group_key(&self) -> GroupKey {
        self.group_key
    }

    /// Opens the batches the queue allows: full ones, and a partial one whose oldest transaction
    /// has waited `batch_delay_ms`. Run after every input, since a finished batch frees room.
    fn refill(&mut self, now_ms: u64) {
        let delay_ms = self.config.batch_delay_ms;
        let flush = self
            .queued_since_ms
            .is_some_and(|since| since.saturating_add(delay_ms) <= now_ms);
        self.start_batches(now_ms, flush);
    }

    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// Transactions queued or being signed.
    pub fn pending_transactions(&self) -> usize {
        self.queue.len() + self.batches.values().map(|b| b.items.len()).sum::<usize>()
    }

    fn reply(&mut self, ticket: Ticket, reply: EndorseReply<R>) {
        self.outputs.push_back(Output::Reply { ticket, reply });
    }

    fn report(&mut self, report: AggregatorReport<R>) {
        self.outputs.push_back(Output::Report(report));
    }

    fn submit(&mut self, now_ms: u64, ticket: Ticket, item: I) {
        if !self.leading {
            return self.reply(ticket, EndorseReply::NotLeading);
        }
        if self.queue.len() >= self.config.queue_transactions_max {
            return self.reply(ticket, EndorseReply::Busy);
        }
        self.queue.push_back((ticket, item));
        self.queued_since_ms.get_or_insert(now_ms);
        self.start_batches(now_ms, false);
    }

    /// Opens batches from the queue while there is room in flight: full ones always, a partial
    /// one when `flush` (its oldest transaction has waited `batch_delay_ms`).
    fn start_batches(&mut self, now_ms: u64, flush: bool) {
        while self.batches.len() < self.config.batches_in_flight_max
            && (self.queue.len() >= self.config.batch_transactions_max || (flush && !self.queue.is_empty()))
        {
            let take = self.queue.len().min(self.config.batch_transactions_max);
            let entries: Vec<_> = self.queue.drain(..take).collect();
            self.queued_since_ms = (!self.queue.is_empty()).then_some(now_ms);
            self.begin_attempt(now_ms, Batch::new(entries));
        }
    }

    /// Picks the k (plus spares) endorsers asked in a batch's next attempt, leaving out its
    /// suspects while at least k others remain, starting at a rotating position.
    fn choose_signers(&mut self, suspects: &BTreeSet<EndorserId>) -> BTreeSet<EndorserId> {
        let n = self.threshold.n;
        let k = usize::from(self.threshold.k);
        let asked = usize::from(self.threshold.k.saturating_add(self.config.spare_endorsers).min(n));
        let rotated: Vec<EndorserId> = (0..n).map(|i| EndorserId((self.rotation + i) % n + 1)).collect();
        self.rotation = (self.rotation + 1) % n;
        let trusted: Vec<EndorserId> = rotated.iter().copied().filter(|id| !suspects.contains(id)).collect();
        let pool = if trusted.len() >= k { trusted } else { rotated };
        let signers: BTreeSet<_> = pool.into_iter().take(asked).collect();
        assert!(signers.len() >= k, "a group has at least k endorsers");
        signers
    }

    /// Starts a batch's next attempt under a new session, or gives up after `attempts_max`.
    fn begin_attempt(&mut self, now_ms: u64, mut batch: Batch<I, R>) {
        let session = self.next_session;
        self.next_session += 1;
        if batch.attempts >= self.config.attempts_max {
            self.report(AggregatorReport::Failed {
                session,
                transactions: batch.items.len(),
            });
            for ticket in batch.tickets {
                self.reply(ticket, EndorseReply::Failed);
            }
            return;
        }
        batch.attempts += 1;
        if self.threshold.n - (batch.suspects.len() as u16) < self.threshold.k {
            // Too many suspects to pick k others: they may only have been slow. Try everyone.
            batch.suspects.clear();
        }
        batch.signers = self.choose_signers(&batch.suspects);
        batch.refused.clear();
        batch.phase = Phase::Committing(BTreeMap::new());
        batch.deadline_ms = now_ms.saturating_add(self.config.round_timeout_ms);
        for &to in &batch.signers {
            self.outputs.push_back(Output::Send {
                to,
                message: AggregatorMessage::Commit { session },
            });
        }
        self.batches.insert(session, batch);
    }

    fn on_endorser(&mut self, now_ms: u64, from: EndorserId, message: EndorserMessage<R>) {
        let session = message.session();
        // Answers to finished or superseded sessions, and from endorsers not chosen, are moot.
        let Some(batch) = self.batches.get_mut(&session) else {
            return;
        };
        if !batch.signers.contains(&from) || batch.refused.contains(&from) {
            return;
        }
        let identifier = from.identifier();
        match (message, &mut batch.phase) {
            (EndorserMessage::Commitments { commitments, .. }, Phase::Committing(gathered)) => {
                gathered.entry(identifier).or_insert(*commitments);
            }
            (EndorserMessage::Share { share, .. }, Phase::Signing { shares, .. }) => {
                shares.entry(identifier).or_insert(share);
            }
            (EndorserMessage::Refused { refusal, .. }, _) => {
                batch.refused.insert(from);
                if let Refusal::Invalid { items } = &refusal {
                    let count = batch.items.len() as u32;
                    for (index, reason) in items.iter().filter(|(index, _)| *index < count) {
                        batch.invalid.entry(*index).or_default().insert(from, reason.clone());
                    }
                }
                self.report(AggregatorReport::Refused {
                    session,
                    endorser: from,
                    refusal,
                });
            }
            // An answer for the other round: out of order or forged; the time-out deals with it.
            _ => return,
        }
        self.advance(now_ms, session);
    }

    /// Moves a session on once k endorsers committed, or every chosen endorser has answered.
    fn advance(&mut self, now_ms: u64, session: SessionId) {
        let batch = self.batches.get(&session).expect("advance is called on a live session");
        let committed = matches!(&batch.phase, Phase::Committing(c) if c.len() == usize::from(self.threshold.k));
        if !committed && !batch.silent().is_empty() {
            return;
        }
        let batch = self.batches.remove(&session).expect("present");
        self.conclude_round(now_ms, session, batch);
    }

    /// Ends a round whose chosen endorsers have all answered or timed out.
    fn conclude_round(&mut self, now_ms: u64, session: SessionId, mut batch: Batch<I, R>) {
        let k = usize::from(self.threshold.k);
        if let Phase::Committing(commitments) = &batch.phase {
            if commitments.len() == k {
                // Round 2 goes to the k that committed; spares still thinking are not suspects.
                batch.signers.retain(|id| commitments.contains_key(&id.identifier()));
            }
        }
        let silent = batch.silent();
        if !silent.is_empty() {
            self.report(AggregatorReport::Unresponsive {
                session,
                endorsers: silent.clone(),
            });
        }
        batch.suspects.extend(silent);
        batch.suspects.extend(batch.refused.iter().copied());
        match std::mem::replace(&mut batch.phase, Phase::Committing(BTreeMap::new())) {
            Phase::Committing(commitments) if commitments.len() == k => {
                let package = SigningPackage::new(commitments, &batch.tree.message());
                batch.deadline_ms = now_ms.saturating_add(self.config.round_timeout_ms);
                for &to in &batch.signers {
                    let message = AggregatorMessage::Sign {
                        session,
                        items: batch.items.clone(),
                        package: package.clone(),
                    };
                    self.outputs.push_back(Output::Send { to, message });
                }
                batch.phase = Phase::Signing {
                    package,
                    shares: BTreeMap::new(),
                };
                self.batches.insert(session, batch);
            }
            Phase::Signing { package, shares } if shares.len() == k => {
                self.aggregate(now_ms, session, batch, &package, &shares)
            }
            _ => self.retry(now_ms, batch),
        }
    }

    fn aggregate(
        &mut self,
        now_ms: u64,
        session: SessionId,
        mut batch: Batch<I, R>,
        package: &SigningPackage,
        shares: &BTreeMap<Identifier, SignatureShare>,
    ) {
        match frost::aggregate(package, shares, &self.public) {
            Ok(signature) => self.deliver(session, batch, &signature),
            Err(frost::Error::InvalidSignatureShare { culprits }) => {
                let endorsers: Vec<_> = culprits.iter().filter_map(EndorserId::from_identifier).collect();
                batch.suspects.extend(endorsers.iter().copied());
                self.report(AggregatorReport::BadShares { session, endorsers });
                self.retry(now_ms, batch);
            }
            Err(_) => {
                // Any other failure names no one: suspect the whole subset, so the next attempt
                // tries another.
                batch.suspects.extend(batch.signers.iter().copied());
                self.retry(now_ms, batch);
            }
        }
    }

    /// Hands every transaction of a signed batch its endorsement.
    fn deliver(&mut self, session: SessionId, batch: Batch<I, R>, signature: &frost::Signature) {
        let bytes = signature.serialize().expect("an aggregated signature has a valid R");
        let signature: [u8; SIGNATURE_BYTES] = bytes.as_slice().try_into().expect("BIP340 signatures are 64 bytes");
        let leaf_count = batch.tree.leaf_count();
        for (index, ticket) in (0..leaf_count).zip(batch.tickets.iter().copied()) {
            let endorsement = Endorsement {
                signature,
                leaf_count,
                index,
                siblings: batch.tree.path(index),
            };
            if index == 0 {
                // Checked in release too: a signature that libsecp256k1 refuses would be handed to
                // every transaction of the batch. One verification per batch.
                let digest = batch.items[0].digest();
                assert!(
                    endorsement.verify(&self.group_key, &digest).is_ok(),
                    "FROST's aggregate is a BIP340 signature under the group key"
                );
            }
            self.reply(ticket, EndorseReply::Endorsed(endorsement));
        }
        let transactions = batch.items.len();
        self.report(AggregatorReport::Endorsed {
            session,
            transactions,
            attempts: batch.attempts,
        });
    }

    /// After a failed attempt: answers the transactions no k endorsers would sign, then tries
    /// the rest again with another subset.
    fn retry(&mut self, now_ms: u64, batch: Batch<I, R>) {
        let refusers_max = usize::from(self.threshold.n - self.threshold.k);
        let doomed: BTreeSet<u32> = batch
            .invalid
            .iter()
            .filter(|(_, by)| by.len() > refusers_max)
            .map(|(index, _)| *index)
            .collect();
        if doomed.is_empty() {
            return self.begin_attempt(now_ms, batch);
        }
        let mut invalid = batch.invalid;
        let mut kept = Vec::with_capacity(batch.items.len() - doomed.len());
        for (index, (ticket, item)) in batch.tickets.into_iter().zip(batch.items).enumerate() {
            match invalid
                .remove(&(index as u32))
                .filter(|_| doomed.contains(&(index as u32)))
            {
                Some(by) => self.reply(
                    ticket,
                    EndorseReply::Refused {
                        reasons: by.into_iter().collect(),
                    },
                ),
                None => kept.push((ticket, item)),
            }
        }
        if kept.is_empty() {
            return;
        }
        // A new tree over what is left; its refusals start afresh (the indices changed), and so do
        // its suspects (they refused, rightly, what just left).
        let mut rest = Batch::new(kept);
        rest.attempts = batch.attempts;
        self.begin_attempt(now_ms, rest);
    }
}

impl<I: BatchItem, R: Reason> Role for Aggregator<I, R> {
    type Command = Infallible;
    type Input = AggregatorInput<I, R>;
    type Peer = EndorserId;
    type Message = AggregatorMessage<I>;
    type Reply = EndorseReply<R>;
    type Report = AggregatorReport<R>;

    fn lead(&mut self, _now_ms: u64) {
        self.leading = true;
    }

    /// Nothing here is durable: queued and in-flight transactions are answered `NotLeading`, and
    /// their callers submit them to the new leader.
    fn follow(&mut self) {
        self.leading = false;
        let queued = self.queue.drain(..).map(|(ticket, _)| ticket);
        let signing = std::mem::take(&mut self.batches).into_values().flat_map(|b| b.tickets);
        let tickets: Vec<_> = queued.chain(signing).collect();
        for ticket in tickets {
            self.reply(ticket, EndorseReply::NotLeading);
        }
        self.queued_since_ms = None;
    }

    fn handle(&mut self, now_ms: u64, input: Self::Input) {
        match input {
            AggregatorInput::Submit { ticket, item } => self.submit(now_ms, ticket, item),
            AggregatorInput::FromEndorser { from, message } => self.on_endorser(now_ms, from, message),
        }
        self.refill(now_ms);
    }

    fn apply(&mut self, _now_ms: u64, command: &Infallible) {
        match *command {}
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        let due: Vec<SessionId> = self
            .batches
            .iter()
            .filter(|(_, b)| b.deadline_ms <= now_ms)
            .map(|(session, _)| *session)
            .collect();
        for session in due {
            let batch = self.batches.remove(&session).expect("listed above");
            self.conclude_round(now_ms, session, batch);
        }
        self.refill(now_ms);
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        let rounds = self.batches.values().map(|b| b.deadline_ms);
        let room = self.batches.len() < self.config.batches_in_flight_max;
        let flush = self
            .queued_since_ms
            .filter(|_| room)
            .map(|since| since.saturating_add(self.config.batch_delay_ms));
        rounds.chain(flush).min()
    }
}
