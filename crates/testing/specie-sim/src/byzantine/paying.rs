//! Payments as the world's users make them: each slot is driven by one
//! `specie_committee::Payment` (fast path, slow path through a lock, recovery rounds), the same
//! state machine the embedded pipeline and the HTTP client run, over the world's lossy network.
//!
//! The world adds what a caller on a lossy network must: the current call again to the
//! authorities that have not answered, each time the party wakes; transient refusals
//! (the account not funded there yet, a full channel, a busy account, a balance short of the
//! certificates that paid this user) are answered by waiting or pushing certificates, not fed
//! to the payment, which would count them against the round. A lagging authority is brought up
//! to date (§5) with the party's certificates. And it checks what honest authorities answer: a
//! correct user's payment is never refused by an honest authority for a reason a correct user
//! could have avoided.

use specie_authority::{Refusal, Reply};
use specie_committee::{Call, Heard, Payment, PaymentOptions, Step};
use specie_fastpay::{AccountKey, AuthorityIndex, Certificate, SignedOrder, VoteKind, VoteStatement};

use super::{Asked, Party, ShardRole, World, AUTHORITIES};
use crate::world::Violation;

/// Recovery rounds a payment may try before it fails (and its party starts it again): far more
/// than a run needs, so that failing is rare and a failure is a liveness problem to look at.
const ROUNDS_MAX: u32 = 1_000;
/// After a quorum of round-0 prepares, how long the rest may take before the slow path.
const FAST_PATH_WAIT_MS: u64 = 25;

/// A party's payment in progress, numbered so that late answers to an earlier payment (of the
/// slot before, or one that failed) are not taken for this one's.
pub(super) struct Paying {
    pub id: u64,
    pub payment: Payment,
}

impl Paying {
    pub fn slot(&self) -> (AccountKey, u64) {
        let order = &self.payment.order().order;
        (order.sender, order.sequence)
    }
}

/// The slot a payment's call is about.
fn call_slot(call: &Call) -> (AccountKey, u64) {
    match call {
        Call::Transfer(order) | Call::Propose { order, .. } => (order.order.sender, order.order.sequence),
        Call::Confirm(certificate) | Call::Lock(certificate) => {
            (certificate.order.order.sender, certificate.order.order.sequence)
        }
        Call::RoundChange(request) => (request.request.account, request.request.sequence),
        Call::Account { account, from_sequence } => (*account, *from_sequence),
        Call::Fund(funding) => (funding.account, 0),
        Call::Books { .. } | Call::EnterEpoch { .. } | Call::Epochs { .. } => {
            unreachable!("a payment asks about its slot only: {call:?}")
        }
    }
}

/// The vote an honest authority answers `call` with, when it answers with a vote.
pub(super) fn expected_vote(committee_id: [u8; 32], asked: &Asked) -> Option<VoteStatement> {
    let (kind, round, order) = match asked {
        Asked::Transfer(order)
        | Asked::Payment {
            call: Call::Transfer(order),
            ..
        } => (VoteKind::Prepare, 0, order),
        Asked::Payment {
            call: Call::Propose { order, round, .. },
            ..
        } => (VoteKind::Prepare, *round, order),
        Asked::Payment {
            call: Call::Lock(lock), ..
        } => (VoteKind::Commit, lock.round, &lock.order),
        _ => return None,
    };
    Some(VoteStatement {
        committee_id,
        kind,
        round,
        order_digest: order.order.digest(),
    })
}

impl<R: ShardRole> World<R> {
    fn payment_options(&self) -> PaymentOptions {
        PaymentOptions {
            fast_path_wait_ms: FAST_PATH_WAIT_MS,
            round_timeout_ms: self.options.round_timeout_ms,
            rounds_max: ROUNDS_MAX,
        }
    }

    pub(super) fn paying(&mut self, party: Party) -> &mut Option<Paying> {
        match party {
            Party::Client(i) => &mut self.clients[i].paying,
            Party::ByzantineUser(i) => &mut self.byzantine_users[i].paying,
            _ => unreachable!("only users pay"),
        }
    }

    /// The committee whose votes the party's current payment counts.
    fn payment_committee(&mut self, party: Party) -> std::sync::Arc<specie_fastpay::Committee> {
        let paying = self.paying(party).as_ref().expect("a payment in progress");
        paying.payment.committee().clone()
    }

    /// When some payment's time-out is due next.
    pub(super) fn payment_timeouts(&self) -> impl Iterator<Item = u64> + '_ {
        let clients = self.clients.iter().map(|c| &c.paying);
        let users = self.byzantine_users.iter().map(|u| &u.paying);
        clients
            .chain(users)
            .filter_map(|paying| paying.as_ref()?.payment.poll_timeout())
    }

    /// Starts a payment of `orders[0]` by a party who signed all of `orders` for its slot.
    pub(super) fn start_paying(&mut self, party: Party, orders: Vec<SignedOrder>) -> Result<(), Violation> {
        let id = self.payments_started;
        self.payments_started += 1;
        let options = self.payment_options();
        let owner = match party {
            Party::Client(i) => self.clients[i].key.clone(),
            Party::ByzantineUser(i) => self.byzantine_users[i].key.clone(),
            _ => unreachable!("only users pay"),
        };
        let committee = self.view(party);
        let (payment, step) = Payment::with_orders(committee, &owner, orders, options, self.now_ms);
        let payment = payment.with_earlier_epochs(self.earlier_epochs(party));
        let (account, sequence) = (payment.order().order.sender, payment.order().order.sequence);
        *self.paying(party) = Some(Paying { id, payment });
        let prefix = u64::from_le_bytes(account.0[..8].try_into().expect("8 bytes"));
        self.record("payment", &[id, prefix, sequence]);
        self.follow_step(party, step)
    }

    /// Fires the payment's time-out if it is due.
    pub(super) fn payment_timeout(&mut self, party: Party) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        let Some(paying) = self.paying(party).as_mut() else {
            return Ok(());
        };
        if paying.payment.poll_timeout().is_none_or(|at| at > now_ms) {
            return Ok(());
        }
        let step = paying.payment.handle_timeout(now_ms);
        self.follow_step(party, step)
    }

    /// The payment's current call again, to the authorities that have not answered it (every
    /// call is idempotent at an authority).
    pub(super) fn retransmit_payment(&mut self, party: Party) {
        let Some(paying) = self.paying(party).as_ref() else {
            return;
        };
        let payment = paying.id;
        let Some((call, attempt, missing)) = paying.payment.unanswered_call() else {
            return;
        };
        let account = call.account().expect("a payment's calls name its account");
        for authority in missing {
            let call = call.clone();
            self.request(party, authority, &account, Asked::Payment { payment, attempt, call });
        }
    }

    /// Does what the payment says.
    fn follow_step(&mut self, party: Party, step: Step) -> Result<(), Violation> {
        let Some(paying) = self.paying(party).as_ref() else {
            return Ok(());
        };
        let (payment, (account, sequence)) = (paying.id, paying.slot());
        match step {
            Step::Wait | Step::Settled => {}
            Step::Broadcast { call, attempt } => {
                for authority in 0..AUTHORITIES as AuthorityIndex {
                    let call = call.clone();
                    self.request(party, authority, &account, Asked::Payment { payment, attempt, call });
                }
            }
            Step::CatchUp {
                authority,
                from_sequence,
                then,
                attempt,
            } => {
                self.bring_up_to_date(party, authority, account, from_sequence, sequence);
                let asked = Asked::Payment {
                    payment,
                    attempt,
                    call: then,
                };
                self.request(party, authority, &account, asked);
            }
            Step::Certified { certificate, .. } => {
                let paying = self.paying(party).take().expect("paying");
                return self.payment_certified(party, paying, *certificate);
            }
            Step::Failed(error) => {
                let paying = self.paying(party).take().expect("paying");
                self.record("payment-failed", &[payment]);
                if self.print_trace {
                    eprintln!("TRACE {party:?}'s payment {payment} failed: {error}");
                }
                // A correct user pays again; a Byzantine user starts over when it next wakes.
                if let Party::Client(_) = party {
                    return self.start_paying(party, vec![paying.payment.order().clone()]);
                }
            }
        }
        Ok(())
    }

    fn payment_certified(&mut self, party: Party, paying: Paying, certificate: Certificate) -> Result<(), Violation> {
        if let Err(error) = self.check_final(&certificate) {
            return Err(self.violation(format!(
                "{party:?}'s payment {} yielded an invalid final certificate: {error}",
                paying.id
            )));
        }
        self.report.commit_certificates += u64::from(certificate.kind == VoteKind::Commit);
        self.report.recovery_rounds_used += u64::from(certificate.round > 0);
        match party {
            Party::Client(i) if certificate.order != *paying.payment.order() => Err(self.violation(format!(
                "client {i}'s slot {} settled on an order it never signed",
                certificate.order.order.sequence
            ))),
            Party::Client(i) => self.client_certifies(i, certificate),
            Party::ByzantineUser(i) => self.byzantine_user_certifies(i, certificate),
            _ => unreachable!("only users pay"),
        }
    }

    /// An answer to a call of payment `payment`: to the payment if it is the party's current
    /// one, unless the refusal is transient.
    pub(super) fn payment_answer(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        (payment, attempt, call): (u64, u32, Call),
        reply: Reply,
    ) -> Result<(), Violation> {
        if self.paying(party).as_ref().is_none_or(|p| p.id != payment) {
            return Ok(());
        }
        let honest = !self.is_byzantine(authority);
        let heard = match reply {
            Reply::Voted(vote) => {
                let asked = Asked::Payment {
                    payment,
                    attempt,
                    call: call.clone(),
                };
                let committee = self.payment_committee(party);
                let expected = expected_vote(committee.id(), &asked);
                let valid = vote.authority == authority
                    && expected.is_some_and(|expected| vote.check(&committee, &expected).is_ok());
                if !valid && !self.knows_committee(party, &vote.statement.committee_id) {
                    // A vote in the name of a committee the payer does not know: it asks for
                    // the epochs after its own (a liar's answer is checked, and refused).
                    self.learn_epochs(party, authority);
                }
                // An honest authority's votes were checked as they left it.
                self.report.forged_votes_ignored += u64::from(!honest && !valid);
                Heard::Vote(vote)
            }
            reply @ (Reply::RoundChanged(_) | Reply::Final(_) | Reply::Confirmed { .. }) => Heard::from(reply),
            Reply::Refused(refusal) => match self.payment_refused(party, authority, &call, refusal)? {
                Some(heard) => heard,
                None => return Ok(()),
            },
            reply if honest => {
                return Err(self.violation(format!(
                    "honest authority {authority} answered {party:?}'s {call:?} with {reply:?}"
                )));
            }
            _ => {
                self.report.false_answers_ignored += 1;
                return Ok(());
            }
        };
        let now_ms = self.now_ms;
        if self.print_trace {
            eprintln!("TRACE {party:?} hears from {authority} on payment {payment}: {heard:?}");
        }
        let paying = self.paying(party).as_mut().expect("current");
        let held = paying.payment.broken_promises().len();
        let step = paying.payment.on_answer(now_ms, authority, attempt, heard);
        let fresh = paying.payment.broken_promises()[held..].to_vec();
        if !fresh.is_empty() {
            // What a payer holds against an authority must convict it, and never an honest one.
            self.report.broken_promises += fresh.len() as u64;
            let context = format!("a payer's evidence against authority {authority}");
            let committee = self.payment_committee(party);
            self.check_evidence(self.evidence(&committee, Vec::new(), fresh), &context)?;
        }
        self.follow_step(party, step)
    }

    /// What the payment hears of a refusal, if anything: transient ones are waited out (the
    /// call goes again when the party wakes), a lagging authority is brought up to date first.
    fn payment_refused(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        call: &Call,
        refusal: Refusal,
    ) -> Result<Option<Heard>, Violation> {
        let (account, sequence) = call_slot(call);
        let honest = !self.is_byzantine(authority);
        match refusal {
            Refusal::InsufficientBalance { .. } if matches!(party, Party::Client(_)) => {
                self.push_received(party, authority);
                Ok(None)
            }
            Refusal::UnknownAccount | Refusal::ChannelFull { .. } | Refusal::Busy => Ok(None),
            Refusal::WrongSequence { expected, got } if expected < got => {
                self.bring_up_to_date(party, authority, account, expected, got);
                Ok(Some(Heard::from(refusal)))
            }
            Refusal::OtherOrderPending { sequence: next } if next < sequence => {
                self.bring_up_to_date(party, authority, account, next, sequence);
                Ok(Some(Heard::from(refusal)))
            }
            // A round this payment has not reached yet: the next one will.
            Refusal::RoundPassed { .. } => Ok(Some(Heard::from(refusal))),
            // A Byzantine user's own split (two orders pending, locked on the other…) or an
            // order it cannot pay for: the payment weighs it.
            refusal if matches!(party, Party::ByzantineUser(_)) => Ok(Some(Heard::from(refusal))),
            refusal if honest => Err(self.violation(format!(
                "honest authority {authority} refused {party:?}'s {call:?}: {refusal}"
            ))),
            refusal => {
                self.report.false_answers_ignored += 1;
                Ok(Some(Heard::from(refusal)))
            }
        }
    }
}
