//! Many payments in flight against an embedded committee, each driven by its [`Payment`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use specie_fastpay::{AccountKey, Certificate, SignedOrder, SigningKey};

use crate::call::{Call, Heard};
use crate::embedded::{Answer, EmbeddedCommittee};
use crate::payment::{Payment, PaymentError, PaymentOptions, Step};

/// A settled payment and its two latencies (FastPay's confirmation and settlement).
#[derive(Clone, Debug)]
pub struct Settlement {
    /// Final: all round-0 prepares, or a quorum's commits.
    pub certificate: Certificate,
    /// The round it settled in: 0, or the recovery round that settled a contested slot.
    pub round: u32,
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
    /// The deadline a timer is set for.
    armed: Option<u64>,
}

/// Attempts per payment that answers can be told apart by: a payment makes a few per round.
const ATTEMPT_BITS: u32 = 12;

fn tag(id: u64, attempt: u32) -> u64 {
    assert!(
        attempt < 1 << ATTEMPT_BITS,
        "a payment's attempts are bounded by its rounds"
    );
    id << ATTEMPT_BITS | u64::from(attempt)
}

/// Answers tagged this belong to no payment (earlier certificates sent to catch an authority up).
const UNTAGGED: u64 = u64::MAX;

/// Payments in flight; answers of all of them arrive on one channel.
pub struct Pipeline<'c> {
    committee: &'c EmbeddedCommittee,
    options: PaymentOptions,
    answers_tx: Sender<Answer>,
    answers: Receiver<Answer>,
    in_flight: HashMap<u64, InFlight>,
    timers: BinaryHeap<Reverse<(u64, u64)>>,
    next_id: u64,
    epoch: Instant,
    /// Every certificate each sender settled, by sequence number: what a lagging authority
    /// needs first (§5). A real wallet keeps its own; here the pipeline keeps every account's.
    history: HashMap<AccountKey, BTreeMap<u64, Certificate>>,
    /// Calls each authority has not answered yet (`PaymentOptions::given_backlogs`).
    backlogs: Vec<u64>,
}

impl<'c> Pipeline<'c> {
    pub fn new(committee: &'c EmbeddedCommittee) -> Pipeline<'c> {
        Pipeline::with_options(committee, PaymentOptions::default())
    }

    pub fn with_options(committee: &'c EmbeddedCommittee, options: PaymentOptions) -> Pipeline<'c> {
        let (answers_tx, answers) = unbounded();
        Pipeline {
            committee,
            options,
            answers_tx,
            answers,
            in_flight: HashMap::new(),
            timers: BinaryHeap::new(),
            next_id: 0,
            epoch: Instant::now(),
            history: HashMap::new(),
            backlogs: vec![0; committee.committee().size()],
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Starts paying `order` of `owner`; returns the id its outcome will carry.
    pub fn submit(&mut self, owner: &SigningKey, order: SignedOrder) -> u64 {
        self.submit_orders(owner, vec![order])
    }

    /// Starts paying `orders[0]` for an `owner` who signed every one of `orders` for the same
    /// slot (it equivocated): recovery settles one of them.
    pub fn submit_orders(&mut self, owner: &SigningKey, orders: Vec<SignedOrder>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let committee = self.committee.committee().clone();
        let options = self.options.given_backlogs(self.backlogs.iter().copied());
        let (payment, step) = Payment::with_orders(committee, owner, orders, options, self.now_ms());
        let flight = InFlight {
            payment,
            started: Instant::now(),
            certified: None,
            armed: None,
        };
        self.in_flight.insert(id, flight);
        let ended = self.act(id, step);
        debug_assert!(ended.is_none(), "a payment starts by broadcasting");
        id
    }

    /// Takes the answers that arrive within `wait` and the timers due, and returns the payments
    /// that ended.
    pub fn poll(&mut self, wait: Duration) -> Vec<(u64, Outcome)> {
        let mut ended = Vec::new();
        let next_timer = self.timers.peek().map(|Reverse((deadline, _))| *deadline);
        let wait = next_timer.map_or(wait, |deadline| {
            wait.min(Duration::from_millis(deadline.saturating_sub(self.now_ms())))
        });
        let mut next = self.answers.recv_timeout(wait).ok();
        while let Some(answer) = next {
            if let Some(outcome) = self.take(answer) {
                ended.push(outcome);
            }
            next = self.answers.try_recv().ok();
        }
        let now = self.now_ms();
        while let Some(Reverse((deadline, id))) = self.timers.peek().copied() {
            if deadline > now {
                break;
            }
            self.timers.pop();
            let Some(flight) = self.in_flight.get_mut(&id) else {
                continue;
            };
            if flight.armed != Some(deadline) {
                continue;
            }
            flight.armed = None;
            let step = flight.payment.handle_timeout(now);
            ended.extend(self.act(id, step));
        }
        ended
    }

    fn take(&mut self, answer: Answer) -> Option<(u64, Outcome)> {
        let backlog = &mut self.backlogs[usize::from(answer.authority)];
        *backlog = backlog.saturating_sub(1);
        if answer.tag == UNTAGGED {
            return None;
        }
        let (id, attempt) = (
            answer.tag >> ATTEMPT_BITS,
            (answer.tag & ((1 << ATTEMPT_BITS) - 1)) as u32,
        );
        let now = self.now_ms();
        let flight = self.in_flight.get_mut(&id)?;
        let step = flight
            .payment
            .on_answer(now, answer.authority, attempt, Heard::from(answer.reply));
        self.act(id, step)
    }

    /// Does what the payment asked for and sets its timer; the outcome if it ended.
    fn act(&mut self, id: u64, step: Step) -> Option<(u64, Outcome)> {
        let flight = self.in_flight.get_mut(&id).expect("in flight");
        match step {
            Step::Wait => {}
            Step::Broadcast { call, attempt } => {
                self.committee.broadcast(&call, tag(id, attempt), &self.answers_tx);
                self.backlogs.iter_mut().for_each(|backlog| *backlog += 1);
            }
            Step::Certified { certificate, attempt } => {
                flight.certified = Some(Instant::now());
                self.committee
                    .broadcast(&Call::Confirm(*certificate), tag(id, attempt), &self.answers_tx);
                self.backlogs.iter_mut().for_each(|backlog| *backlog += 1);
            }
            Step::CatchUp {
                authority,
                from_sequence,
                then,
                attempt,
            } => {
                let order = &flight.payment.order().order;
                let earlier = self
                    .history
                    .get(&order.sender)
                    .into_iter()
                    .flat_map(|h| h.range(from_sequence..order.sequence));
                // Earlier certificates first, in order; their answers carry no payment's tag.
                for (_, missing) in earlier {
                    self.committee
                        .call(authority, Call::Confirm(missing.clone()), UNTAGGED, &self.answers_tx);
                    self.backlogs[usize::from(authority)] += 1;
                }
                self.committee.call(authority, then, tag(id, attempt), &self.answers_tx);
                self.backlogs[usize::from(authority)] += 1;
            }
            Step::Settled => {
                let flight = self.in_flight.remove(&id).expect("in flight");
                let certificate = flight.payment.certificate().expect("settled").clone();
                let order = &certificate.order.order;
                self.history
                    .entry(order.sender)
                    .or_default()
                    .insert(order.sequence, certificate.clone());
                let settlement = Settlement {
                    round: flight.payment.round(),
                    certificate,
                    to_certificate: flight.certified.expect("certified") - flight.started,
                    to_settlement: flight.started.elapsed(),
                };
                return Some((id, Ok(settlement)));
            }
            Step::Failed(error) => {
                self.in_flight.remove(&id);
                return Some((id, Err(error)));
            }
        }
        let deadline = flight.payment.poll_timeout();
        if deadline != flight.armed {
            flight.armed = deadline;
            if let Some(deadline) = deadline {
                self.timers.push(Reverse((deadline, id)));
            }
        }
        None
    }

    /// Submits one order of `owner` and waits for its outcome (or `timeout`: `None`).
    pub fn settle(&mut self, owner: &SigningKey, order: SignedOrder, timeout: Duration) -> Option<Outcome> {
        self.settle_orders(owner, vec![order], timeout)
    }

    /// As [`Pipeline::settle`], for an `owner` who signed every one of `orders` for one slot.
    pub fn settle_orders(
        &mut self,
        owner: &SigningKey,
        orders: Vec<SignedOrder>,
        timeout: Duration,
    ) -> Option<Outcome> {
        let id = self.submit_orders(owner, orders);
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let wait = deadline.saturating_duration_since(Instant::now());
            if let Some((_, outcome)) = self.poll(wait).into_iter().find(|(i, _)| *i == id) {
                return Some(outcome);
            }
        }
        self.in_flight.remove(&id);
        None
    }
}
