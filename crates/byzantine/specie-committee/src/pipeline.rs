//! Many payments in flight against an embedded committee, each driven by its [`Payment`].

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use specie_fastpay::{AccountKey, Certificate, SignedOrder};

use crate::embedded::{Answer, Call, EmbeddedCommittee};
use crate::payment::{Payment, PaymentError, Step};

/// A settled payment and its two latencies (FastPay's confirmation and settlement).
#[derive(Clone, Debug)]
pub struct Settlement {
    pub certificate: Certificate,
    /// From sending the order to holding the certificate (the payee may trust it from here).
    pub to_certificate: Duration,
    /// From sending the order to a quorum having settled it.
    pub to_settlement: Duration,
}

/// How a payment ended.
pub type Outcome = Result<Settlement, PaymentError>;

struct InFlight {
    payment: Payment,
    started: Instant,
    certified: Option<Instant>,
}

/// Payments in flight; answers of all of them arrive on one channel.
pub struct Pipeline<'c> {
    committee: &'c EmbeddedCommittee,
    answers_tx: Sender<Answer>,
    answers: Receiver<Answer>,
    in_flight: HashMap<u64, InFlight>,
    next_tag: u64,
    /// Every certificate each sender settled, by sequence number: what a lagging authority
    /// needs first (§5). A real wallet keeps its own; here the pipeline keeps every account's.
    history: HashMap<AccountKey, BTreeMap<u64, Certificate>>,
}

impl<'c> Pipeline<'c> {
    pub fn new(committee: &'c EmbeddedCommittee) -> Pipeline<'c> {
        let (answers_tx, answers) = unbounded();
        Pipeline {
            committee,
            answers_tx,
            answers,
            in_flight: HashMap::new(),
            next_tag: 0,
            history: HashMap::new(),
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Sends the order to every authority; returns the tag its outcome will carry.
    pub fn submit(&mut self, order: SignedOrder) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.committee
            .broadcast(&Call::Transfer(order.clone()), tag, &self.answers_tx);
        let payment = Payment::new(self.committee.committee().clone(), order);
        self.in_flight.insert(
            tag,
            InFlight {
                payment,
                started: Instant::now(),
                certified: None,
            },
        );
        tag
    }

    /// Takes the answers that arrive within `wait` and returns the payments that ended.
    pub fn poll(&mut self, wait: Duration) -> Vec<(u64, Outcome)> {
        let mut ended = Vec::new();
        let Ok(first) = self.answers.recv_timeout(wait) else {
            return ended;
        };
        let mut next = Some(first);
        while let Some(answer) = next {
            if let Some(outcome) = self.take(answer.tag, answer) {
                ended.push(outcome);
            }
            next = self.answers.try_recv().ok();
        }
        ended
    }

    fn take(&mut self, tag: u64, answer: Answer) -> Option<(u64, Outcome)> {
        let flight = self.in_flight.get_mut(&tag)?;
        let step = match flight.certified {
            None => flight.payment.on_vote(answer.authority, answer.reply),
            Some(_) => flight.payment.on_confirm(answer.authority, answer.reply),
        };
        match step {
            Step::Wait => None,
            Step::Certified(certificate) => {
                flight.certified = Some(Instant::now());
                self.committee
                    .broadcast(&Call::Confirm(*certificate), tag, &self.answers_tx);
                None
            }
            Step::CatchUp {
                authority,
                from_sequence,
            } => {
                let order = &flight.payment.order().order;
                let certificate = flight.payment.certificate().expect("confirming").clone();
                let earlier = self
                    .history
                    .get(&order.sender)
                    .into_iter()
                    .flat_map(|h| h.range(from_sequence..order.sequence));
                // Earlier certificates first, in order; their answers (under this tag) are
                // confirmations of other sequence numbers, which the payment ignores.
                for (_, missing) in earlier {
                    self.committee
                        .call(authority, Call::Confirm(missing.clone()), u64::MAX, &self.answers_tx);
                }
                self.committee
                    .call(authority, Call::Confirm(certificate), tag, &self.answers_tx);
                None
            }
            Step::Settled => {
                let flight = self.in_flight.remove(&tag).expect("in flight");
                let certificate = flight.payment.certificate().expect("settled").clone();
                let order = &certificate.order.order;
                self.history
                    .entry(order.sender)
                    .or_default()
                    .insert(order.sequence, certificate.clone());
                let settlement = Settlement {
                    certificate,
                    to_certificate: flight.certified.expect("certified") - flight.started,
                    to_settlement: flight.started.elapsed(),
                };
                Some((tag, Ok(settlement)))
            }
            Step::Failed(error) => {
                self.in_flight.remove(&tag);
                Some((tag, Err(error)))
            }
        }
    }

    /// Submits one order and waits for its outcome (or `timeout`: `None`).
    pub fn settle(&mut self, order: SignedOrder, timeout: Duration) -> Option<Outcome> {
        let tag = self.submit(order);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let wait = deadline.saturating_duration_since(Instant::now());
            if let Some((_, outcome)) = self.poll(wait).into_iter().find(|(t, _)| *t == tag) {
                return Some(outcome);
            }
        }
        self.in_flight.remove(&tag);
        None
    }
}
