//! One payment from the payer's side, over the rounds of docs/byzantine-mode.md ("Rounds"), as a
//! pure state machine: the caller sends what it is told to, feeds back the answers with the
//! attempt they answer, and calls [`Payment::handle_timeout`] at [`Payment::poll_timeout`].
//!
//! - Fast path: the order to every authority (round 0); prepare votes of all of them are final.
//! - Slow path: once a quorum prepared but the rest is slow, down or lying, the quorum's votes
//!   are a lock; commit votes of a quorum on it are final.
//! - Recovery: when round 0 cannot reach a quorum (the owner signed two orders, or authorities
//!   refuse) or a round takes too long, the payer asks every authority to enter the next round,
//!   and proposes, with a quorum's round changes as justification, the order they allow.
//! - Settlement: the final certificate to every authority; settled at a quorum of confirmations.
//!   An authority behind the payer's earlier certificates is caught up first (§5).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use specie_fastpay::{
    Allowed, AuthorityIndex, BrokenPromise, Certificate, Committee, Justification, RoundRequest, SignedOrder,
    SignedRoundChange, SignedVote, SigningKey, TransferOrder, Vote, VoteKind, VoteStatement,
};
use thiserror::Error;

use crate::call::{Call, Heard};

/// How patient a payment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaymentOptions {
    /// After a quorum of round-0 prepares, the longest the rest may take before the slow path.
    /// The wait is also at most half the time the quorum took: the last honest authority is
    /// rarely much slower than the others, and a dead one should cost little.
    pub fast_path_wait_ms: u64,
    /// How long one round may take before the payer opens the next.
    pub round_timeout_ms: u64,
    /// Recovery rounds tried before the payment fails.
    pub rounds_max: u32,
}

impl Default for PaymentOptions {
    fn default() -> Self {
        PaymentOptions {
            fast_path_wait_ms: 25,
            round_timeout_ms: 2_000,
            rounds_max: 8,
        }
    }
}

impl PaymentOptions {
    /// Calls left unanswered beyond the most responsive authority's at which an authority is
    /// taken for silent (down, or cut off from this client).
    pub const SILENT_BACKLOG: u64 = 48;

    /// These options for a payment that starts while the authorities have `backlogs` calls of
    /// this client unanswered each: with one of them silent, no waiting for the fast path, which
    /// needs its vote too. Clients never wait on the slowest authority; an authority that is
    /// only slow loses nothing by this, as the fast path would have timed out on it anyway.
    pub fn given_backlogs(self, backlogs: impl IntoIterator<Item = u64>) -> PaymentOptions {
        let (mut least, mut most) = (u64::MAX, 0);
        for backlog in backlogs {
            least = least.min(backlog);
            most = most.max(backlog);
        }
        if most.saturating_sub(least) >= Self::SILENT_BACKLOG {
            return PaymentOptions {
                fast_path_wait_ms: 0,
                ..self
            };
        }
        self
    }
}

/// Why a payment cannot complete.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PaymentError {
    /// So many authorities refused for reasons no round changes (or answered with invalid votes)
    /// that no quorum is possible.
    #[error("no quorum possible: {refusals:?}")]
    Refused { refusals: Vec<(AuthorityIndex, String)> },
    /// The committee allows only an order this payer does not hold.
    #[error("round {round} allows only an order this payer did not give the payment")]
    UnknownOrder { round: u32 },
    #[error("no final certificate after {rounds} recovery rounds")]
    RoundsExhausted { rounds: u32 },
    /// Final, but too few authorities confirmed it: send the certificate again later.
    #[error("final, but too few authorities confirmed: {refusals:?}")]
    NotSettled {
        certificate: Box<Certificate>,
        refusals: Vec<(AuthorityIndex, String)>,
    },
}

/// What the caller must do next. Calls carry the payment's current attempt number; answers are
/// fed back with the attempt of the call they answer, so late answers to an earlier phase are
/// told apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Wait,
    /// Send this call to every authority.
    Broadcast {
        call: Call,
        attempt: u32,
    },
    /// Final: send this certificate to every authority (as [`Step::Broadcast`] of a confirm).
    Certified {
        certificate: Box<Certificate>,
        attempt: u32,
    },
    /// `authority` lacks the payer's certificates from `from_sequence` on: send them to it in
    /// order, then `then` (under `attempt`).
    CatchUp {
        authority: AuthorityIndex,
        from_sequence: u64,
        then: Call,
        attempt: u32,
    },
    /// A quorum settled the final certificate.
    Settled,
    Failed(PaymentError),
}

#[derive(Debug)]
enum Phase {
    /// Prepare votes for `order` in `round`; `fast_deadline_ms`: once round 0 has a quorum, when
    /// it stops waiting for the rest.
    Prepare {
        order: SignedOrder,
        votes: BTreeMap<AuthorityIndex, Vote>,
        fast_deadline_ms: Option<u64>,
    },
    /// Commit votes on `lock`.
    Commit {
        lock: Certificate,
        votes: BTreeMap<AuthorityIndex, Vote>,
    },
    /// Round changes into the current round.
    ChangeRound {
        changes: BTreeMap<AuthorityIndex, SignedRoundChange>,
    },
    Confirm {
        certificate: Certificate,
        confirmed: BTreeSet<AuthorityIndex>,
    },
    /// A quorum (`confirmed`) settled `certificate`.
    Settled {
        certificate: Certificate,
        confirmed: BTreeSet<AuthorityIndex>,
    },
    Failed,
}

/// A payment's progress.
#[derive(Debug)]
pub struct Payment {
    committee: Arc<Committee>,
    /// Committees of earlier epochs of the same seats, whose locks a round change may report
    /// (locks carry over an epoch change).
    earlier: Vec<Committee>,
    /// The payer's key, for the round requests only the account's owner may make.
    owner: SigningKey,
    options: PaymentOptions,
    /// The orders the payer signed for this slot, the one it wants first.
    orders: Vec<SignedOrder>,
    round: u32,
    started_ms: u64,
    /// The round each authority said it is in already.
    rounds_passed: BTreeMap<AuthorityIndex, u32>,
    round_deadline_ms: u64,
    phase: Phase,
    /// The call of the current attempt (what a caught-up authority is sent again).
    call: Call,
    attempt: u32,
    /// Refusals in the current attempt, and whether any says the slot is contested.
    refusals: BTreeMap<AuthorityIndex, String>,
    contested: bool,
    caught_up: BTreeSet<(AuthorityIndex, u32)>,
    /// Valid votes a later round change could contradict (round-0 prepares, commits), with
    /// their orders.
    promised: Vec<(Vote, TransferOrder)>,
    /// Round changes their signers' votes contradict: evidence against those authorities.
    broken_promises: Vec<BrokenPromise>,
}

impl Payment {
    /// A payment of `order` by its `owner`; the caller broadcasts the returned step.
    pub fn new(committee: Arc<Committee>, owner: &SigningKey, order: SignedOrder, now_ms: u64) -> (Payment, Step) {
        Payment::with_orders(committee, owner, vec![order], PaymentOptions::default(), now_ms)
    }

    /// A payment of `orders[0]` by an `owner` who signed all of `orders` for the same slot (an
    /// owner who equivocated): recovery may have to settle one of the others. `orders` must not
    /// be empty, and `owner` must be their sender's key.
    pub fn with_orders(
        committee: Arc<Committee>,
        owner: &SigningKey,
        orders: Vec<SignedOrder>,
        options: PaymentOptions,
        now_ms: u64,
    ) -> (Payment, Step) {
        let order = orders.first().expect("at least one order").clone();
        assert_eq!(
            owner.verifying_key().to_bytes(),
            order.order.sender.0,
            "a payment is made by the orders' sender"
        );
        let call = Call::Transfer(order.clone());
        let payment = Payment {
            committee,
            earlier: Vec::new(),
            owner: owner.clone(),
            options,
            orders,
            round: 0,
            started_ms: now_ms,
            rounds_passed: BTreeMap::new(),
            round_deadline_ms: now_ms + options.round_timeout_ms,
            phase: Phase::Prepare {
                order,
                votes: BTreeMap::new(),
                fast_deadline_ms: None,
            },
            call: call.clone(),
            attempt: 0,
            refusals: BTreeMap::new(),
            contested: false,
            caught_up: BTreeSet::new(),
            promised: Vec::new(),
            broken_promises: Vec::new(),
        };
        (payment, Step::Broadcast { call, attempt: 0 })
    }

    pub fn order(&self) -> &SignedOrder {
        &self.orders[0]
    }

    /// Tells the payment the committees of the epochs before its own: a lock of one of them,
    /// reported in a round change, binds the slot as one of the current epoch does.
    /// The call of the current attempt and the attempt's number: what an authority brought up
    /// to date is sent again.
    pub fn current_call(&self) -> (&Call, u32) {
        (&self.call, self.attempt)
    }

    pub fn with_earlier_epochs(mut self, earlier: Vec<Committee>) -> Payment {
        self.earlier = earlier;
        self
    }

    /// The committee of a lock a round change reports: this epoch's or an earlier one's.
    fn lock_committee(&self, id: &[u8; 32]) -> Option<&Committee> {
        std::iter::once(&*self.committee)
            .chain(&self.earlier)
            .find(|c| c.id() == *id)
    }

    /// Every order the payer gave the payment for its slot, the one it wants first.
    pub fn orders(&self) -> &[SignedOrder] {
        &self.orders
    }

    /// The committee whose votes this payment counts.
    pub fn committee(&self) -> &Arc<Committee> {
        &self.committee
    }

    /// The final certificate, once there is one (the payee may trust the payment from here).
    pub fn certificate(&self) -> Option<&Certificate> {
        match &self.phase {
            Phase::Confirm { certificate, .. } | Phase::Settled { certificate, .. } => Some(certificate),
            _ => None,
        }
    }

    /// The authorities whose confirmation settled the payment, once it settled.
    pub fn settled_by(&self) -> Option<&BTreeSet<AuthorityIndex>> {
        match &self.phase {
            Phase::Settled { confirmed, .. } => Some(confirmed),
            _ => None,
        }
    }

    /// Evidence this payment saw: round changes that the same authorities' votes to it
    /// contradict (specie_fastpay's `BrokenPromise`). Each convicts a Byzantine authority.
    pub fn broken_promises(&self) -> &[BrokenPromise] {
        &self.broken_promises
    }

    /// The round the payment is in (0 unless it had to recover).
    pub fn round(&self) -> u32 {
        self.round
    }

    fn slot(&self) -> (specie_fastpay::AccountKey, u64) {
        let order = &self.orders[0].order;
        (order.sender, order.sequence)
    }

    /// Starts a new attempt with `call` to every authority.
    fn broadcast(&mut self, phase: Phase, call: Call) -> Step {
        self.phase = phase;
        self.call = call.clone();
        self.attempt += 1;
        self.refusals.clear();
        self.contested = false;
        Step::Broadcast {
            call,
            attempt: self.attempt,
        }
    }

    fn finalize(&mut self, certificate: Certificate) -> Step {
        let step = self.broadcast(
            Phase::Confirm {
                certificate: certificate.clone(),
                confirmed: BTreeSet::new(),
            },
            Call::Confirm(certificate.clone()),
        );
        let Step::Broadcast { attempt, .. } = step else {
            unreachable!("broadcast returns a broadcast")
        };
        Step::Certified {
            certificate: Box::new(certificate),
            attempt,
        }
    }

    fn fail(&mut self, error: PaymentError) -> Step {
        self.phase = Phase::Failed;
        Step::Failed(error)
    }

    /// Opens the next round (above any an authority is in already), or fails if the rounds are
    /// used up.
    fn next_round(&mut self, now_ms: u64) -> Step {
        // A round more than f authorities are in already holds an honest one: start above it.
        // (A round only liars claim could make the payment skip its rounds.)
        let mut passed: Vec<u32> = self.rounds_passed.values().copied().collect();
        passed.sort_unstable_by(|a, b| b.cmp(a));
        let honest_passed = passed.get(self.committee.fault_tolerance()).copied().unwrap_or(0);
        let round = self.round.max(honest_passed).saturating_add(1);
        if round > self.options.rounds_max {
            return self.fail(PaymentError::RoundsExhausted {
                rounds: self.options.rounds_max,
            });
        }
        self.round = round;
        self.round_deadline_ms = now_ms + self.options.round_timeout_ms;
        let (account, sequence) = self.slot();
        let request = RoundRequest {
            committee_id: self.committee.id(),
            account,
            sequence,
            round: self.round,
        };
        let call = Call::RoundChange(request.sign(&self.owner));
        self.broadcast(
            Phase::ChangeRound {
                changes: BTreeMap::new(),
            },
            call,
        )
    }

    /// The lock formed by the current prepare votes: to every authority for commit votes.
    fn lock(&mut self) -> Step {
        let Phase::Prepare { order, votes, .. } = &self.phase else {
            unreachable!("locks form from prepare votes")
        };
        let votes: Vec<Vote> = votes.values().cloned().collect();
        let lock = Certificate::from_votes(order.clone(), &votes);
        let call = Call::Lock(lock.clone());
        self.broadcast(
            Phase::Commit {
                lock,
                votes: BTreeMap::new(),
            },
            call,
        )
    }

    /// An authority's answer to the call of attempt `attempt`.
    pub fn on_answer(&mut self, now_ms: u64, authority: AuthorityIndex, attempt: u32, heard: Heard) -> Step {
        let ended = matches!(self.phase, Phase::Settled { .. } | Phase::Failed);
        if ended || usize::from(authority) >= self.committee.size() {
            return Step::Wait;
        }
        // A final certificate settles the slot, whichever attempt it answers.
        if let Heard::Final(certificate) = heard {
            return self.on_final(authority, *certificate);
        }
        if attempt != self.attempt {
            return Step::Wait;
        }
        match heard {
            Heard::Vote(vote) => self.on_vote(now_ms, authority, vote),
            Heard::RoundChange(change) => self.on_round_change(now_ms, authority, *change),
            Heard::Confirmed { sender, sequence } if (sender, sequence) == self.slot() => self.on_confirmed(authority),
            Heard::Lagging { next_sequence } if next_sequence < self.slot().1 => {
                self.catch_up(authority, next_sequence)
            }
            Heard::Lagging { .. } => self.refuse(now_ms, authority, "holds another order for this slot".into(), true),
            Heard::Contested(why) => self.refuse(now_ms, authority, why, true),
            Heard::RoundPassed { round } => {
                self.rounds_passed.insert(authority, round);
                self.refuse(now_ms, authority, format!("in round {round} already"), true)
            }
            Heard::Refused(why) => self.refuse(now_ms, authority, why, false),
            other => self.refuse(now_ms, authority, format!("unexpected answer {other:?}"), false),
        }
    }

    fn on_final(&mut self, authority: AuthorityIndex, certificate: Certificate) -> Step {
        let order = &certificate.order.order;
        let valid = (order.sender, order.sequence) == self.slot() && certificate.check(&self.committee).is_ok();
        match (&self.phase, valid) {
            (Phase::Confirm { .. }, _) => Step::Wait,
            (_, true) => self.finalize(certificate),
            (_, false) => {
                self.refusals
                    .insert(authority, "answered with an invalid final certificate".into());
                Step::Wait
            }
        }
    }

    /// What a vote must state to count now: a prepare of this round's order, or a commit on the
    /// lock.
    fn expected_vote(&self) -> Option<VoteStatement> {
        let (kind, round, order) = match &self.phase {
            Phase::Prepare { order, .. } => (VoteKind::Prepare, self.round, order),
            Phase::Commit { lock, .. } => (VoteKind::Commit, lock.round, &lock.order),
            _ => return None,
        };
        Some(VoteStatement {
            committee_id: self.committee.id(),
            kind,
            round,
            order_digest: order.order.digest(),
        })
    }

    fn on_vote(&mut self, now_ms: u64, authority: AuthorityIndex, vote: Vote) -> Step {
        let Some(expected) = self.expected_vote() else {
            return self.refuse(now_ms, authority, "a vote out of turn".into(), false);
        };
        if vote.authority != authority {
            let why = format!("answered with authority {}'s vote", vote.authority);
            return self.refuse(now_ms, authority, why, false);
        }
        if let Err(error) = vote.check(&self.committee, &expected) {
            return self.refuse(now_ms, authority, format!("invalid vote: {error}"), false);
        }
        self.refusals.remove(&authority);
        let (order, votes) = match &mut self.phase {
            Phase::Prepare { order, votes, .. } => (&*order, votes),
            Phase::Commit { lock, votes } => (&lock.order, votes),
            _ => unreachable!("a vote is expected only while preparing or committing"),
        };
        if expected.kind == VoteKind::Commit || expected.round == 0 {
            self.promised.push((vote.clone(), order.order.clone()));
        }
        votes.insert(authority, vote);
        let counted = votes.len();
        let (quorum, size) = (self.committee.quorum(), self.committee.size());
        let unanswered = self.unanswered();
        match &mut self.phase {
            Phase::Prepare { order, votes, .. } if self.round == 0 && counted == size => {
                let certificate = Certificate::from_votes(order.clone(), &votes.values().cloned().collect::<Vec<_>>());
                self.finalize(certificate)
            }
            // Round 0 waits a little for the fast path, unless someone refused it already.
            Phase::Prepare { fast_deadline_ms, .. } if counted >= quorum => {
                if self.round > 0 || counted + unanswered < size {
                    return self.lock();
                }
                if self.options.fast_path_wait_ms == 0 {
                    return self.lock();
                }
                let took_ms = now_ms.saturating_sub(self.started_ms);
                let wait_ms = self.options.fast_path_wait_ms.min((took_ms / 2).max(1));
                fast_deadline_ms.get_or_insert(now_ms + wait_ms);
                Step::Wait
            }
            Phase::Commit { lock, votes } if counted >= quorum => {
                let certificate =
                    Certificate::from_votes(lock.order.clone(), &votes.values().cloned().collect::<Vec<_>>());
                self.finalize(certificate)
            }
            _ => Step::Wait,
        }
    }

    /// Authorities that have neither voted nor refused in this attempt.
    fn unanswered(&self) -> usize {
        let voted = match &self.phase {
            Phase::Prepare { votes, .. } | Phase::Commit { votes, .. } => votes.len(),
            Phase::ChangeRound { changes } => changes.len(),
            Phase::Confirm { confirmed, .. } | Phase::Settled { confirmed, .. } => confirmed.len(),
            Phase::Failed => 0,
        };
        self.committee.size() - voted - self.refusals.len()
    }

    fn on_round_change(&mut self, now_ms: u64, authority: AuthorityIndex, change: SignedRoundChange) -> Step {
        let (account, sequence) = self.slot();
        if !matches!(self.phase, Phase::ChangeRound { .. }) {
            return self.refuse(now_ms, authority, "a round change out of turn".into(), false);
        }
        if change.authority != authority {
            return Step::Wait;
        }
        let locks = |id: &[u8; 32]| self.lock_committee(id);
        if let Err(error) = change.check_in(&self.committee, &locks, &account, sequence, self.round) {
            return self.refuse(now_ms, authority, format!("invalid round change: {error}"), false);
        }
        let Phase::ChangeRound { changes } = &mut self.phase else {
            unreachable!("checked above");
        };
        let contradicting = self.promised.iter().filter(|(vote, _)| {
            let statement = &vote.statement;
            vote.authority == authority
                && change
                    .change
                    .contradicted_by(statement.kind, statement.round, &statement.order_digest)
        });
        self.broken_promises
            .extend(contradicting.map(|(vote, order)| BrokenPromise {
                authority,
                change: change.change,
                change_signature: change.signature,
                vote: SignedVote {
                    order: order.clone(),
                    kind: vote.statement.kind,
                    round: vote.statement.round,
                    signature: vote.signature,
                },
            }));
        changes.insert(authority, change);
        if changes.len() < self.committee.quorum() {
            return Step::Wait;
        }
        let justification = Justification {
            changes: changes.values().cloned().collect(),
        };
        let locks = |id: &[u8; 32]| self.lock_committee(id);
        let allowed = match justification.check_in(&self.committee, &locks, &account, sequence, self.round) {
            Ok(allowed) => allowed,
            Err(error) => unreachable!("each round change was checked: {error}"),
        };
        let order = match allowed {
            Allowed::Any => Some(self.orders[0].clone()),
            Allowed::Only { digest, .. } => self
                .orders
                .iter()
                .chain(
                    justification
                        .changes
                        .iter()
                        .filter_map(|c| c.lock_certificate.as_ref().map(|l| &l.order)),
                )
                .find(|order| order.order.digest() == digest)
                .cloned(),
        };
        let Some(order) = order else {
            return self.fail(PaymentError::UnknownOrder { round: self.round });
        };
        let call = Call::Propose {
            order: order.clone(),
            round: self.round,
            justification: Box::new(justification),
        };
        self.broadcast(
            Phase::Prepare {
                order,
                votes: BTreeMap::new(),
                fast_deadline_ms: None,
            },
            call,
        )
    }

    fn on_confirmed(&mut self, authority: AuthorityIndex) -> Step {
        let quorum = self.committee.quorum();
        let Phase::Confirm { certificate, confirmed } = &mut self.phase else {
            return Step::Wait;
        };
        confirmed.insert(authority);
        if confirmed.len() < quorum {
            return Step::Wait;
        }
        self.phase = Phase::Settled {
            certificate: certificate.clone(),
            confirmed: std::mem::take(confirmed),
        };
        Step::Settled
    }

    fn catch_up(&mut self, authority: AuthorityIndex, from_sequence: u64) -> Step {
        if !self.caught_up.insert((authority, self.attempt)) {
            return Step::Wait;
        }
        Step::CatchUp {
            authority,
            from_sequence,
            then: self.call.clone(),
            attempt: self.attempt,
        }
    }

    /// Counts a refusal; once the current attempt cannot reach a quorum, moves on: the slow path,
    /// the next round, or failure.
    fn refuse(&mut self, now_ms: u64, authority: AuthorityIndex, why: String, contested: bool) -> Step {
        let counted = match &self.phase {
            Phase::Prepare { votes, .. } | Phase::Commit { votes, .. } => votes.contains_key(&authority),
            Phase::ChangeRound { changes } => changes.contains_key(&authority),
            Phase::Confirm { confirmed, .. } => confirmed.contains(&authority),
            Phase::Settled { .. } | Phase::Failed => true,
        };
        if counted || self.refusals.contains_key(&authority) {
            return Step::Wait;
        }
        self.refusals.insert(authority, why);
        self.contested |= contested;
        let (quorum, size) = (self.committee.quorum(), self.committee.size());
        let possible = size - self.refusals.len();
        match &self.phase {
            // The fast path is out of reach: lock what a quorum prepared.
            Phase::Prepare { votes, .. } if self.round == 0 && votes.len() >= quorum => self.lock(),
            _ if possible >= quorum => Step::Wait,
            Phase::Confirm { certificate, .. } => {
                let error = PaymentError::NotSettled {
                    certificate: Box::new(certificate.clone()),
                    refusals: self.refusal_list(),
                };
                self.fail(error)
            }
            _ if self.contested || self.round > 0 => self.next_round(now_ms),
            _ => {
                let error = PaymentError::Refused {
                    refusals: self.refusal_list(),
                };
                self.fail(error)
            }
        }
    }

    fn refusal_list(&self) -> Vec<(AuthorityIndex, String)> {
        self.refusals.iter().map(|(a, why)| (*a, why.clone())).collect()
    }

    /// The current attempt's call and the authorities that have not answered it: what a caller
    /// on a lossy network sends again now and then (every call is idempotent at an authority).
    pub fn unanswered_call(&self) -> Option<(Call, u32, Vec<AuthorityIndex>)> {
        let answered = |authority: &AuthorityIndex| match &self.phase {
            Phase::Prepare { votes, .. } | Phase::Commit { votes, .. } => votes.contains_key(authority),
            Phase::ChangeRound { changes } => changes.contains_key(authority),
            Phase::Confirm { confirmed, .. } => confirmed.contains(authority),
            Phase::Settled { .. } | Phase::Failed => true,
        };
        let missing: Vec<AuthorityIndex> = (0..self.committee.size() as AuthorityIndex)
            .filter(|a| !answered(a) && !self.refusals.contains_key(a))
            .collect();
        (!missing.is_empty()).then(|| (self.call.clone(), self.attempt, missing))
    }

    /// When the caller must call [`Payment::handle_timeout`] next, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        match &self.phase {
            Phase::Confirm { .. } | Phase::Settled { .. } | Phase::Failed => None,
            Phase::Prepare {
                fast_deadline_ms: Some(at),
                ..
            } => Some((*at).min(self.round_deadline_ms)),
            _ => Some(self.round_deadline_ms),
        }
    }

    pub fn handle_timeout(&mut self, now_ms: u64) -> Step {
        if self.poll_timeout().is_none_or(|deadline| now_ms < deadline) {
            return Step::Wait;
        }
        match &self.phase {
            Phase::Prepare {
                fast_deadline_ms: Some(_),
                ..
            } => self.lock(),
            _ => self.next_round(now_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use specie_fastpay::{deterministic_key, AccountKey, Recipient, RoundChange, SigningKey, TransferOrder};

    use super::*;

    struct Setup {
        committee: Arc<Committee>,
        keys: Vec<SigningKey>,
        owner: SigningKey,
        /// Two orders of one owner for sequence number 4.
        a: SignedOrder,
        b: SignedOrder,
    }

    fn setup() -> Setup {
        let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
        let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
        let owner = deterministic_key("account", 0);
        let order = |amount| {
            TransferOrder {
                sender: AccountKey(owner.verifying_key().to_bytes()),
                recipient: Recipient::Account(AccountKey([3; 32])),
                amount,
                sequence: 4,
                memo: Vec::new(),
            }
            .sign(&owner)
        };
        Setup {
            committee: Arc::new(committee),
            keys,
            a: order(1),
            b: order(2),
            owner,
        }
    }

    impl Setup {
        fn vote(&self, authority: u16, kind: VoteKind, round: u32, order: &SignedOrder) -> Heard {
            let statement = VoteStatement {
                committee_id: self.committee.id(),
                kind,
                round,
                order_digest: order.order.digest(),
            };
            Heard::Vote(Vote {
                authority,
                statement,
                signature: statement.sign(&self.keys[usize::from(authority)]),
            })
        }

        fn round_change(&self, authority: u16, round: u32, prepared_first: &SignedOrder) -> Heard {
            let change = RoundChange {
                committee_id: self.committee.id(),
                account: self.a.order.sender,
                sequence: 4,
                round,
                prepared_first: Some(prepared_first.order.digest()),
                lock: None,
            };
            Heard::RoundChange(Box::new(change.sign(
                authority,
                &self.keys[usize::from(authority)],
                None,
            )))
        }

        fn confirmed(&self) -> Heard {
            Heard::Confirmed {
                sender: self.a.order.sender,
                sequence: 4,
            }
        }
    }

    /// The round a step asks the authorities to enter, checking the request is the owner's.
    fn round_asked(step: &Step) -> Option<u32> {
        let Step::Broadcast {
            call: Call::RoundChange(request),
            ..
        } = step
        else {
            return None;
        };
        assert_eq!(
            request.request.account.0,
            deterministic_key("account", 0).verifying_key().to_bytes()
        );
        Some(request.request.round)
    }

    fn attempt_of(step: &Step) -> u32 {
        match step {
            Step::Broadcast { attempt, .. } | Step::Certified { attempt, .. } => *attempt,
            other => panic!("not a broadcast: {other:?}"),
        }
    }

    #[test]
    fn every_prepare_is_final_at_once_forgeries_never_count_and_a_lagging_authority_is_caught_up_once() {
        let s = setup();
        let (mut payment, step) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        assert_eq!(
            step,
            Step::Broadcast {
                call: Call::Transfer(s.a.clone()),
                attempt: 0
            }
        );
        let Heard::Vote(mut forged) = s.vote(3, VoteKind::Prepare, 0, &s.a) else {
            unreachable!()
        };
        forged.signature[0] ^= 1;
        assert_eq!(payment.on_answer(1, 3, 0, Heard::Vote(forged)), Step::Wait);
        // Authority 3 relays authority 0's vote as its own: counted for neither.
        assert_eq!(
            payment.on_answer(1, 3, 0, s.vote(0, VoteKind::Prepare, 0, &s.a)),
            Step::Wait
        );
        assert_eq!(
            payment.on_answer(1, 0, 0, s.vote(0, VoteKind::Prepare, 0, &s.a)),
            Step::Wait
        );
        let lag = Heard::Lagging { next_sequence: 1 };
        assert_eq!(
            payment.on_answer(1, 2, 0, lag.clone()),
            Step::CatchUp {
                authority: 2,
                from_sequence: 1,
                then: Call::Transfer(s.a.clone()),
                attempt: 0
            }
        );
        assert_eq!(
            payment.on_answer(1, 2, 0, lag),
            Step::Wait,
            "caught up once per attempt"
        );
        // Authority 3 forged its vote, so the fast path is out of reach: the quorum locks at once.
        assert_eq!(
            payment.on_answer(1, 1, 0, s.vote(1, VoteKind::Prepare, 0, &s.a)),
            Step::Wait
        );
        let lock = payment.on_answer(2, 2, 0, s.vote(2, VoteKind::Prepare, 0, &s.a));
        assert!(
            matches!(&lock, Step::Broadcast { call: Call::Lock(c), attempt: 1 } if c.check_lock(&s.committee).is_ok())
        );

        // A payment that hears every authority is final without a lock.
        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        for authority in 0..3 {
            assert_eq!(
                payment.on_answer(1, authority, 0, s.vote(authority, VoteKind::Prepare, 0, &s.a)),
                Step::Wait
            );
        }
        assert_eq!(
            payment.poll_timeout(),
            Some(2),
            "the quorum took 1 ms: the rest get at most 1 ms more"
        );
        let Step::Certified { certificate, attempt } =
            payment.on_answer(2, 3, 0, s.vote(3, VoteKind::Prepare, 0, &s.a))
        else {
            panic!("all four prepares are final")
        };
        assert_eq!(certificate.check(&s.committee), Ok(()));
        assert_eq!(payment.poll_timeout(), None, "settlement has no round deadline");
        assert_eq!(payment.on_answer(3, 0, attempt, s.confirmed()), Step::Wait);
        assert_eq!(
            payment.on_answer(3, 3, attempt, Heard::Lagging { next_sequence: 2 }),
            Step::CatchUp {
                authority: 3,
                from_sequence: 2,
                then: Call::Confirm(*certificate.clone()),
                attempt
            }
        );
        assert_eq!(
            payment.on_answer(3, 0, attempt, s.confirmed()),
            Step::Wait,
            "counted once"
        );
        assert_eq!(payment.on_answer(3, 1, attempt, s.confirmed()), Step::Wait);
        assert_eq!(payment.on_answer(3, 3, attempt, s.confirmed()), Step::Settled);
        assert_eq!(
            payment.on_answer(3, 2, attempt, s.confirmed()),
            Step::Wait,
            "settled once"
        );
        assert_eq!(payment.settled_by().map(|c| c.len()), Some(3));
        assert_eq!(payment.certificate(), Some(&*certificate));
    }

    /// With one authority far behind the others in answering, a payment locks at the first
    /// quorum; an authority only a little behind changes nothing.
    #[test]
    fn a_silent_authority_known_from_its_backlog_costs_no_fast_path_wait() {
        let s = setup();
        let base = PaymentOptions::default();
        assert_eq!(base.given_backlogs([3, 5, 2, 3 + 12]), base);
        let options = base.given_backlogs([3, 5, 2, 2 + PaymentOptions::SILENT_BACKLOG]);
        assert_eq!(options.fast_path_wait_ms, 0);
        let (mut payment, _) = Payment::with_orders(s.committee.clone(), &s.owner, vec![s.a.clone()], options, 0);
        for authority in 0..2 {
            payment.on_answer(10, authority, 0, s.vote(authority, VoteKind::Prepare, 0, &s.a));
        }
        let lock = payment.on_answer(10, 2, 0, s.vote(2, VoteKind::Prepare, 0, &s.a));
        assert!(
            matches!(&lock, Step::Broadcast { call: Call::Lock(lock), .. } if lock.check_lock(&s.committee).is_ok()),
            "{lock:?}"
        );
    }

    #[test]
    fn a_silent_authority_costs_the_fast_path_wait_then_a_lock_and_commits_and_stale_answers_are_ignored() {
        let s = setup();
        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        for authority in 0..3 {
            assert_eq!(
                payment.on_answer(10, authority, 0, s.vote(authority, VoteKind::Prepare, 0, &s.a)),
                Step::Wait
            );
        }
        // The quorum took 10 ms: the fourth vote gets 5 ms more.
        assert_eq!(payment.poll_timeout(), Some(15));
        assert_eq!(payment.handle_timeout(14), Step::Wait, "not due yet");
        let lock = payment.handle_timeout(15);
        let attempt = attempt_of(&lock);
        // A round-0 prepare arriving late answers the earlier attempt: ignored.
        assert_eq!(
            payment.on_answer(40, 3, 0, s.vote(3, VoteKind::Prepare, 0, &s.a)),
            Step::Wait
        );
        // A prepare vote where a commit is due does not count.
        assert_eq!(
            payment.on_answer(40, 0, attempt, s.vote(0, VoteKind::Prepare, 0, &s.a)),
            Step::Wait
        );
        assert_eq!(
            payment.on_answer(40, 1, attempt, s.vote(1, VoteKind::Commit, 0, &s.a)),
            Step::Wait
        );
        assert_eq!(
            payment.on_answer(40, 2, attempt, s.vote(2, VoteKind::Commit, 0, &s.a)),
            Step::Wait
        );
        let Step::Certified { certificate, .. } =
            payment.on_answer(40, 3, attempt, s.vote(3, VoteKind::Commit, 0, &s.a))
        else {
            panic!("a quorum of commits is final")
        };
        assert_eq!(
            (certificate.kind, certificate.check(&s.committee)),
            (VoteKind::Commit, Ok(()))
        );
    }

    #[test]
    fn refusals_no_round_can_change_fail_the_payment_and_too_few_confirmations_leave_it_unsettled() {
        let s = setup();
        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        assert_eq!(
            payment.on_answer(1, 0, 0, Heard::Refused("insufficient balance".into())),
            Step::Wait
        );
        assert!(matches!(
            payment.on_answer(1, 3, 0, Heard::Refused("unknown account".into())),
            Step::Failed(PaymentError::Refused { refusals }) if refusals.len() == 2
        ));
        assert_eq!(
            payment.on_answer(1, 1, 0, s.vote(1, VoteKind::Prepare, 0, &s.a)),
            Step::Wait,
            "ended"
        );

        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        for authority in 0..3 {
            payment.on_answer(1, authority, 0, s.vote(authority, VoteKind::Prepare, 0, &s.a));
        }
        let attempt = attempt_of(&payment.on_answer(1, 3, 0, s.vote(3, VoteKind::Prepare, 0, &s.a)));
        assert_eq!(
            payment.on_answer(2, 0, attempt, Heard::Refused("down".into())),
            Step::Wait
        );
        assert!(matches!(
            payment.on_answer(2, 1, attempt, Heard::Contested("busy".into())),
            Step::Failed(PaymentError::NotSettled { .. })
        ));
    }

    #[test]
    fn an_owner_who_signed_two_orders_recovers_the_account_in_round_one() {
        let s = setup();
        let options = PaymentOptions::default();
        let (mut payment, _) = Payment::with_orders(
            s.committee.clone(),
            &s.owner,
            vec![s.a.clone(), s.b.clone()],
            options,
            0,
        );
        // Authorities 0 and 1 prepared A; 2 and 3 hold B for the same sequence number.
        payment.on_answer(1, 0, 0, s.vote(0, VoteKind::Prepare, 0, &s.a));
        payment.on_answer(1, 1, 0, s.vote(1, VoteKind::Prepare, 0, &s.a));
        assert_eq!(
            payment.on_answer(1, 2, 0, Heard::Lagging { next_sequence: 4 }),
            Step::Wait
        );
        let change = payment.on_answer(1, 3, 0, Heard::Contested("another order pending".into()));
        let request = RoundRequest {
            committee_id: s.committee.id(),
            account: s.a.order.sender,
            sequence: 4,
            round: 1,
        };
        let expected = Call::RoundChange(request.sign(&s.owner));
        assert!(matches!(&change, Step::Broadcast { call, .. } if *call == expected));
        let attempt = attempt_of(&change);
        // A round change for another round, or signed by another authority, does not count.
        assert_eq!(payment.on_answer(2, 0, attempt, s.round_change(0, 2, &s.a)), Step::Wait);
        assert_eq!(payment.on_answer(2, 0, attempt, s.round_change(0, 1, &s.a)), Step::Wait);
        assert_eq!(payment.on_answer(2, 2, attempt, s.round_change(2, 1, &s.b)), Step::Wait);
        // Reports A, B, B: B is reported by more than f, so only B may be prepared.
        let propose = payment.on_answer(2, 3, attempt, s.round_change(3, 1, &s.b));
        let Step::Broadcast {
            call:
                Call::Propose {
                    order,
                    round: 1,
                    justification,
                },
            attempt,
        } = propose
        else {
            panic!("a quorum of round changes opens round 1: {propose:?}")
        };
        assert_eq!(order, s.b);
        assert_eq!(
            justification.check(&s.committee, &s.a.order.sender, 4, 1),
            Ok(Allowed::Only {
                digest: s.b.order.digest(),
                lock_round: None
            })
        );
        for authority in 0..2 {
            assert_eq!(
                payment.on_answer(3, authority, attempt, s.vote(authority, VoteKind::Prepare, 1, &s.b)),
                Step::Wait
            );
        }
        let lock = payment.on_answer(3, 2, attempt, s.vote(2, VoteKind::Prepare, 1, &s.b));
        let attempt = attempt_of(&lock);
        for authority in 1..3 {
            payment.on_answer(4, authority, attempt, s.vote(authority, VoteKind::Commit, 1, &s.b));
        }
        let Step::Certified { certificate, .. } =
            payment.on_answer(4, 3, attempt, s.vote(3, VoteKind::Commit, 1, &s.b))
        else {
            panic!("commits of round 1 are final")
        };
        assert_eq!(
            (certificate.order.clone(), certificate.check(&s.committee)),
            (s.b.clone(), Ok(()))
        );
        assert_eq!(payment.round(), 1);

        // A payer who holds only A cannot propose the B the committee allows.
        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        let attempt = attempt_of(&payment.handle_timeout(options.round_timeout_ms));
        payment.on_answer(1, 1, attempt, s.round_change(1, 1, &s.b));
        payment.on_answer(1, 2, attempt, s.round_change(2, 1, &s.b));
        assert_eq!(
            payment.on_answer(1, 3, attempt, s.round_change(3, 1, &s.a)),
            Step::Failed(PaymentError::UnknownOrder { round: 1 })
        );
    }

    #[test]
    fn a_round_change_that_hides_a_vote_given_to_the_payer_is_kept_as_evidence() {
        let s = setup();
        let orders = vec![s.a.clone(), s.b.clone()];
        let (mut payment, _) =
            Payment::with_orders(s.committee.clone(), &s.owner, orders, PaymentOptions::default(), 0);
        payment.on_answer(1, 0, 0, s.vote(0, VoteKind::Prepare, 0, &s.a));
        payment.on_answer(1, 1, 0, s.vote(1, VoteKind::Prepare, 0, &s.a));
        payment.on_answer(1, 2, 0, Heard::Contested("another order pending".into()));
        let change = payment.on_answer(1, 3, 0, Heard::Contested("another order pending".into()));
        let attempt = attempt_of(&change);
        // 0 reports its prepare of A; 1 claims it prepared B, which its own vote disproves.
        payment.on_answer(2, 0, attempt, s.round_change(0, 1, &s.a));
        payment.on_answer(2, 1, attempt, s.round_change(1, 1, &s.b));
        payment.on_answer(2, 2, attempt, s.round_change(2, 1, &s.b));
        let broken = payment.broken_promises().to_vec();
        assert_eq!(broken.len(), 1, "{broken:?}");
        let evidence = specie_fastpay::Evidence {
            committee: (*s.committee).clone(),
            double_votes: Vec::new(),
            broken_promises: broken,
        };
        assert_eq!(evidence.convicted(), Ok(vec![1]));
    }

    #[test]
    fn a_final_certificate_from_anyone_settles_the_slot_and_rounds_are_bounded() {
        let s = setup();
        let options = PaymentOptions {
            rounds_max: 2,
            ..PaymentOptions::default()
        };
        let (mut payment, _) = Payment::with_orders(s.committee.clone(), &s.owner, vec![s.a.clone()], options, 0);
        let votes: Vec<Vote> = (0..3u16)
            .map(|a| match s.vote(a, VoteKind::Prepare, 0, &s.b) {
                Heard::Vote(vote) => vote,
                _ => unreachable!(),
            })
            .collect();
        let lock_only = Certificate::from_votes(s.b.clone(), &votes);
        assert_eq!(
            payment.on_answer(1, 0, 7, Heard::Final(Box::new(lock_only))),
            Step::Wait,
            "a lock is not final"
        );
        let timeout = options.round_timeout_ms;
        assert_eq!(round_asked(&payment.handle_timeout(timeout)), Some(1));
        assert_eq!(round_asked(&payment.handle_timeout(2 * timeout)), Some(2));
        assert_eq!(
            payment.handle_timeout(3 * timeout),
            Step::Failed(PaymentError::RoundsExhausted { rounds: 2 })
        );

        // One authority claiming a late round moves nothing; two (one of them honest) do.
        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        payment.on_answer(1, 0, 0, Heard::RoundPassed { round: 1_000 });
        let step = payment.on_answer(1, 1, 0, Heard::Contested("another order pending".into()));
        assert_eq!(round_asked(&step), Some(1));
        let attempt = attempt_of(&step);
        payment.on_answer(1, 2, attempt, Heard::RoundPassed { round: 5 });
        let step = payment.on_answer(1, 3, attempt, Heard::RoundPassed { round: 6 });
        assert_eq!(round_asked(&step), Some(7), "{step:?}");

        // Rounds reported at the very top end the payment, never overflow it.
        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        payment.on_answer(1, 0, 0, Heard::RoundPassed { round: u32::MAX });
        let step = payment.on_answer(1, 1, 0, Heard::RoundPassed { round: u32::MAX });
        assert!(
            matches!(step, Step::Failed(PaymentError::RoundsExhausted { .. })),
            "{step:?}"
        );

        let (mut payment, _) = Payment::new(s.committee.clone(), &s.owner, s.a.clone(), 0);
        let all: Vec<Vote> = (0..4u16)
            .map(|a| match s.vote(a, VoteKind::Prepare, 0, &s.b) {
                Heard::Vote(vote) => vote,
                _ => unreachable!(),
            })
            .collect();
        let final_b = Certificate::from_votes(s.b.clone(), &all);
        let step = payment.on_answer(1, 2, 0, Heard::Final(Box::new(final_b.clone())));
        assert!(
            matches!(step, Step::Certified { certificate, .. } if *certificate == final_b),
            "the slot settled on B"
        );
    }
}
