//! A FastPay client of a committee whose authorities run as processes: the client's side of
//! FastPay (§4.1, §4.5, §5) over the authorities' HTTP API ([`crate::http_api`]).
//!
//! A payment is driven by [`Payment`], the same state machine the embedded committee's pipeline
//! uses: the fast path, the slow path through a lock, recovery rounds, and settlement at the
//! first quorum of confirmations, so a slow, dead or lying authority never holds it up. An
//! authority that lags behind the payer's earlier certificates is brought up to date on the
//! side: the client fetches the certificates it lacks from an authority that has them and sends
//! them first, in order (§5).
//!
//! Blocking: each authority has a few worker threads that make its HTTP calls (following
//! `not_leader` answers to the leader of the shard's replica group), so a call never waits
//! behind another authority's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Sender, TrySendError};
use specie_authority::{shard_of, AccountState, ShardIndex, RECORDS_PER_ANSWER_MAX};
use specie_fastpay::{
    decode_exact, AccountKey, AuthorityIndex, BrokenPromise, Certificate, Committee, CommitteeChain, CommitteeRecord,
    RecordError, SignedOrder, SignedRoundChange, SignedRoundRequest, SigningKey, Vote, CERTIFICATE_BYTES_MAX,
    SIGNED_ORDER_BYTES_MAX, SIGNED_ROUND_CHANGE_BYTES_MAX,
};
use specie_service::client::{Body, CallError, LeaderSearch, Replicas};
use thiserror::Error;

use crate::call::{Call, Heard};
use crate::http_api::{
    AccountBody, ConfirmedBody, EpochBody, EpochsBody, FundedBody, Proposal, RefusalFields, ACCOUNTS_PATH,
    CERTIFICATES_PATH, CODE_REFUSED, CODE_SETTLED, EPOCHS_PATH, FUNDINGS_PATH, LOCKS_PATH, ORDERS_PATH, PROPOSALS_PATH,
    ROUND_CHANGES_PATH,
};
use crate::payment::{Payment, PaymentError, PaymentOptions, Step};

/// The largest vote a client reads (a vote is 135 bytes).
const VOTE_BYTES_MAX: usize = 1024;

/// Where one authority's shards answer: per shard, the base URL of each replica of its group
/// (`http://127.0.0.1:18501`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorityAddresses {
    pub shards: Vec<Vec<String>>,
}

/// How the client calls the authorities.
#[derive(Clone, Debug)]
pub struct HttpCommitteeOptions {
    /// One HTTP call, leader search included.
    pub request_timeout: Duration,
    /// A payment from its order to its settlement, catch-ups included.
    pub payment_timeout: Duration,
    /// Calls in progress at once per authority.
    pub workers_per_authority: usize,
    /// Calls waiting per authority; beyond, a call fails at once (as from a dead authority).
    pub queued_per_authority_max: usize,
    /// Every answer any authority gives, late ones included (for audits and tests).
    pub observer: Option<Sender<Observed>>,
}

impl Default for HttpCommitteeOptions {
    fn default() -> Self {
        HttpCommitteeOptions {
            request_timeout: Duration::from_secs(5),
            payment_timeout: Duration::from_secs(30),
            workers_per_authority: 8,
            queued_per_authority_max: 4096,
            observer: None,
        }
    }
}

/// Why a client cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HttpCommitteeError {
    #[error("{addresses} authorities' addresses for a committee of {members}")]
    AuthorityCount { addresses: usize, members: usize },
    #[error("authority {authority}: no shards, or a shard without replicas")]
    NoReplicas { authority: AuthorityIndex },
    #[error("at least one worker per authority")]
    NoWorkers,
    #[error("cannot start a worker thread: {0}")]
    Thread(String),
}

/// What a client asks one authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Transfer(SignedOrder),
    Lock(Certificate),
    RoundChange(SignedRoundRequest),
    Propose(Box<Proposal>),
    /// Certificates of one payer, confirmed one after another (catching an authority up): the
    /// answer is the last one's, or the first that is not `Confirmed`.
    Confirm(Vec<Certificate>),
    Account {
        account: AccountKey,
        from_sequence: u64,
    },
    /// A FastPay funding transaction's canonical bytes, for `account`.
    Fund {
        account: AccountKey,
        transaction: Arc<Vec<u8>>,
    },
    /// Shard `shard` enters the epoch of this record.
    EnterEpoch {
        shard: ShardIndex,
        record: Box<CommitteeRecord>,
    },
    /// The records shard `shard` holds of the epochs after `after`.
    Epochs {
        shard: ShardIndex,
        after: u64,
    },
}

impl Request {
    /// The shard of `shards` that answers: its account's, or the one named.
    fn shard(&self, shards: u32) -> ShardIndex {
        let account = match self {
            Request::EnterEpoch { shard, .. } | Request::Epochs { shard, .. } => return *shard,
            Request::Transfer(order) => order.order.sender,
            Request::Lock(certificate) => certificate.order.order.sender,
            Request::RoundChange(request) => request.request.account,
            Request::Propose(proposal) => proposal.order.order.sender,
            Request::Confirm(certificates) => certificates
                .first()
                .map_or(AccountKey([0; 32]), |c| c.order.order.sender),
            Request::Account { account, .. } | Request::Fund { account, .. } => *account,
        };
        shard_of(&account, shards)
    }

    /// The request that carries a payment's call.
    fn of_payment(call: Call) -> Request {
        match call {
            Call::Transfer(order) => Request::Transfer(order),
            Call::Confirm(certificate) => Request::Confirm(vec![certificate]),
            Call::Lock(certificate) => Request::Lock(certificate),
            Call::RoundChange(request) => Request::RoundChange(request),
            Call::Propose {
                order,
                round,
                justification,
            } => Request::Propose(Box::new(Proposal {
                order,
                round,
                justification: *justification,
            })),
            Call::Account { account, from_sequence } => Request::Account { account, from_sequence },
            Call::Fund(funding) => unreachable!("a payment never funds: {funding:?}"),
            Call::Books { .. } | Call::EnterEpoch { .. } | Call::Epochs { .. } => {
                unreachable!("a payment asks about its account only: {call:?}")
            }
        }
    }
}

/// One authority's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorityReply {
    Voted(Vote),
    RoundChanged(Box<SignedRoundChange>),
    /// The slot is settled: its final certificate.
    Final(Box<Certificate>),
    Confirmed {
        sender: AccountKey,
        sequence: u64,
    },
    Account(Box<AccountState>),
    Funded {
        id: [u8; 32],
    },
    /// The shard is in this epoch.
    Epoch {
        epoch: u64,
    },
    /// Records of the epochs after the one asked about, oldest first (unchecked: the caller
    /// checks each against the epoch before).
    Epochs(Vec<CommitteeRecord>),
    /// The authority's role refused: `refusal` names why (`OtherOrderPending`, …).
    Refused {
        refusal: String,
        message: String,
        next_sequence: Option<u64>,
        /// With `RoundPassed`: the round the authority says it is in.
        round: Option<u32>,
    },
    /// No usable answer: down, no leader, a time-out, a malformed or unexpected answer.
    Unavailable(String),
}

impl From<AuthorityReply> for Heard {
    fn from(reply: AuthorityReply) -> Heard {
        match reply {
            AuthorityReply::Voted(vote) => Heard::Vote(vote),
            AuthorityReply::RoundChanged(change) => Heard::RoundChange(change),
            AuthorityReply::Final(certificate) => Heard::Final(certificate),
            AuthorityReply::Confirmed { sender, sequence } => Heard::Confirmed { sender, sequence },
            AuthorityReply::Refused {
                refusal,
                next_sequence: Some(next_sequence),
                ..
            } if LAGGING.contains(&refusal.as_str()) => Heard::Lagging { next_sequence },
            AuthorityReply::Refused {
                refusal,
                round: Some(round),
                ..
            } if refusal == "RoundPassed" => Heard::RoundPassed { round },
            AuthorityReply::Refused { refusal, message, .. } if CONTESTED.contains(&refusal.as_str()) => {
                Heard::Contested(message)
            }
            AuthorityReply::Refused { message, .. } => Heard::Refused(message),
            other => Heard::Refused(format!("{other:?}")),
        }
    }
}

/// Refusals, by name, whose sequence number tells where the authority stands for the payer:
/// below the payment's, it lags (see [`Heard::Lagging`]).
const LAGGING: [&str; 3] = ["WrongSequence", "OtherOrderPending", "MissingEarlier"];
/// Refusals, by name, that a recovery round can get past ([`Heard::Contested`]).
const CONTESTED: [&str; 4] = ["LockedOnOther", "RoundPassed", "ConflictingCertificate", "Busy"];

/// An answer as the observer sees it.
#[derive(Clone, Debug)]
pub struct Observed {
    pub authority: AuthorityIndex,
    pub request: Request,
    pub reply: AuthorityReply,
}

/// A settled payment.
#[derive(Clone, Debug)]
pub struct HttpSettlement {
    /// Final: all round-0 prepares, or a quorum's commits.
    pub certificate: Certificate,
    /// The round it settled in: 0, or the recovery round that settled a contested slot.
    pub round: u32,
    /// The authorities whose confirmation counted (a quorum).
    pub confirmed_by: BTreeSet<AuthorityIndex>,
    /// From sending the order to holding the certificate (final from here).
    pub to_certificate: Duration,
    /// From sending the order to a quorum having settled it.
    pub to_settlement: Duration,
    /// Round changes the payment saw contradicted by the same authorities' votes to it: each
    /// convicts a Byzantine authority (`specie byzantine check-evidence`, with the committee).
    pub broken_promises: Vec<BrokenPromise>,
}

/// Why a payment did not settle.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PayError {
    #[error(transparent)]
    Payment(#[from] PaymentError),
    #[error("no outcome within {timeout_ms} ms")]
    TimedOut {
        timeout_ms: u64,
        /// The final certificate, if there was one by then (the payment is final: send it again).
        certificate: Option<Box<Certificate>>,
    },
}

/// How long a funding waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FundWait {
    /// Until a quorum credited it (enough to pay from it).
    Quorum,
    /// Until every authority answered (or the request timed out).
    All,
}

/// In which epoch an authority answered a payment's call.
enum AnswerEpoch {
    /// The payment's (or the answer names no committee): the payment weighs it.
    Payment,
    /// In the name of a committee of an earlier epoch: the authority has not entered the
    /// payment's yet.
    Earlier(u64),
    /// In the name of a committee this client does not know (a later epoch's, or a forgery), or
    /// a refusal to sign from a seat replaced.
    LaterOrReplaced,
}

/// The epochs a client knows, and the current one's committee shared with its payments.
struct Epochs {
    chain: CommitteeChain,
    current: Arc<Committee>,
}

impl Epochs {
    fn new(first: &Committee) -> Epochs {
        Epochs {
            chain: CommitteeChain::new(first.clone()),
            current: Arc::new(first.clone()),
        }
    }

    fn learn(&mut self, records: Vec<CommitteeRecord>) -> Result<bool, RecordError> {
        let learned = self.chain.learn(records);
        if self.chain.current().epoch() > self.current.epoch() {
            self.current = Arc::new(self.chain.current().clone());
        }
        learned
    }

    /// The committees before the current one, newest first.
    fn earlier(&self) -> Vec<Committee> {
        self.chain.committees().rev().skip(1).cloned().collect()
    }
}

/// Everything the worker threads share.
struct Endpoints {
    /// Per authority, per shard: the replicas of the shard's group.
    authorities: Vec<Vec<Replicas>>,
    observer: Option<Sender<Observed>>,
}

/// A job for an authority's workers: the request and where its answer goes.
type Job = (Request, u32, Answers);

/// Where answers go: the authority, the attempt of the payment the request belongs to (0
/// outside payments), and the reply.
type Answers = Sender<(AuthorityIndex, u32, AuthorityReply)>;

/// A client of a committee whose authorities serve the HTTP API. Cheap to clone; its worker
/// threads end when the last clone is dropped.
#[derive(Clone)]
pub struct HttpCommittee {
    /// The first epoch's committee: the committee's identity (fundings name it).
    committee: Arc<Committee>,
    /// Every epoch the client knows: new orders go to the current one's committee.
    epochs: Arc<RwLock<Epochs>>,
    endpoints: Arc<Endpoints>,
    queues: Arc<Vec<Sender<Job>>>,
    payment_timeout: Duration,
}

impl HttpCommittee {
    /// A client of `committee`, whose authority `i` answers at `addresses[i]`.
    pub fn new(
        committee: Arc<Committee>,
        addresses: Vec<AuthorityAddresses>,
        options: HttpCommitteeOptions,
    ) -> Result<HttpCommittee, HttpCommitteeError> {
        if addresses.len() != committee.size() {
            return Err(HttpCommitteeError::AuthorityCount {
                addresses: addresses.len(),
                members: committee.size(),
            });
        }
        if options.workers_per_authority == 0 {
            return Err(HttpCommitteeError::NoWorkers);
        }
        let agent = ureq::AgentBuilder::new()
            .timeout(options.request_timeout)
            .timeout_connect(options.request_timeout.min(Duration::from_secs(1)))
            .max_idle_connections_per_host(options.workers_per_authority)
            .build();
        // One call, leader search included, within the request time-out; a group none of whose
        // replicas can be reached is given up on at once: it is down, and waiting for it would
        // only hold up this authority's other calls. Only the committee's listed replicas are
        // asked.
        let search = LeaderSearch {
            rounds_max: u32::MAX,
            pause: LEADER_SEARCH_PAUSE,
            deadline: Some(options.request_timeout),
            wait_while_down: false,
            follow_unlisted: false,
        };
        let mut authorities = vec![];
        for (authority, address) in addresses.into_iter().enumerate() {
            if address.shards.is_empty() || address.shards.iter().any(Vec::is_empty) {
                return Err(HttpCommitteeError::NoReplicas {
                    authority: authority as AuthorityIndex,
                });
            }
            authorities.push(
                address
                    .shards
                    .into_iter()
                    .map(|replicas| Replicas::of(replicas, agent.clone(), search.clone()))
                    .collect(),
            );
        }
        let endpoints = Arc::new(Endpoints {
            authorities,
            observer: options.observer,
        });
        let mut queues = vec![];
        for authority in 0..committee.size() {
            let (jobs, work) = bounded::<Job>(options.queued_per_authority_max);
            for worker in 0..options.workers_per_authority {
                let (endpoints, work) = (endpoints.clone(), work.clone());
                std::thread::Builder::new()
                    .name(format!("fastpay-a{authority}-{worker}"))
                    .spawn(move || {
                        for (request, attempt, answer) in work {
                            let reply = endpoints.execute(authority as AuthorityIndex, &request);
                            let _ = answer.send((authority as AuthorityIndex, attempt, reply));
                        }
                    })
                    .map_err(|error| HttpCommitteeError::Thread(error.to_string()))?;
            }
            queues.push(jobs);
        }
        Ok(HttpCommittee {
            epochs: Arc::new(RwLock::new(Epochs::new(&committee))),
            committee,
            endpoints,
            queues: Arc::new(queues),
            payment_timeout: options.payment_timeout,
        })
    }

    /// The first epoch's committee (the committee's identity; fundings name it).
    pub fn committee(&self) -> &Arc<Committee> {
        &self.committee
    }

    /// The committee of the latest epoch this client knows: new orders are paid in its name.
    pub fn current(&self) -> Arc<Committee> {
        self.epochs.read().expect("not poisoned").current.clone()
    }

    /// Every epoch this client knows, from the first.
    pub fn chain(&self) -> CommitteeChain {
        self.epochs.read().expect("not poisoned").chain.clone()
    }

    /// Takes in records of later epochs (from the cluster file, or an authority), each checked
    /// against the epoch before; returns whether the current epoch moved. A record of an epoch
    /// known already is skipped; the first that does not follow is refused, and those before it
    /// are kept.
    pub fn learn(&self, records: Vec<CommitteeRecord>) -> Result<bool, RecordError> {
        self.epochs.write().expect("not poisoned").learn(records)
    }

    /// Whether this client knows an epoch after `payment`'s: already (another payment learned
    /// it), or once `authority` (its shard of the payer's account; asked once per epoch) gives
    /// the records after the current one. A Byzantine authority's forged record is refused (it
    /// does not follow the epoch before).
    fn later_epoch_known(
        &self,
        payment: &Payment,
        authority: AuthorityIndex,
        asked: &mut BTreeSet<(u64, AuthorityIndex)>,
    ) -> bool {
        let epoch = payment.committee().epoch();
        if self.current().epoch() > epoch {
            return true;
        }
        if !asked.insert((epoch, authority)) {
            return false;
        }
        let shards = self.endpoints.authorities[usize::from(authority)].len() as u32;
        let request = Request::Epochs {
            shard: shard_of(&payment.order().order.sender, shards),
            after: epoch,
        };
        if let AuthorityReply::Epochs(records) = self.endpoints.execute(authority, &request) {
            if let Err(error) = self.learn(records) {
                tracing::warn!(authority, %error, "an authority's committee record does not follow: ignored");
            }
        }
        self.current().epoch() > epoch
    }

    /// Queues `request` for `authority`; its answer goes to `answers`.
    fn send(&self, authority: AuthorityIndex, request: Request, attempt: u32, answers: &Answers) {
        match self.queues[usize::from(authority)].try_send((request, attempt, answers.clone())) {
            Ok(()) => {}
            Err(TrySendError::Full((request, _, answers)) | TrySendError::Disconnected((request, _, answers))) => {
                let reply = AuthorityReply::Unavailable("the client's queue for this authority is full".into());
                self.endpoints.observe(authority, &request, &reply);
                let _ = answers.send((authority, attempt, reply));
            }
        }
    }

    fn broadcast(&self, request: &Request, attempt: u32, answers: &Answers) {
        for authority in 0..self.committee.size() {
            self.send(authority as AuthorityIndex, request.clone(), attempt, answers);
        }
    }

    /// Asks one authority and waits for its answer.
    pub fn ask(&self, authority: AuthorityIndex, request: Request) -> AuthorityReply {
        self.endpoints.execute(authority, &request)
    }

    /// Pays `order` of `owner` (see the module documentation) within the payment time-out.
    pub fn pay(&self, owner: &SigningKey, order: SignedOrder) -> Result<HttpSettlement, PayError> {
        self.pay_orders(owner, vec![order])
    }

    /// Pays `orders[0]` for an `owner` who signed every one of `orders` for the same slot (it
    /// equivocated): the recovery rounds settle one of them.
    pub fn pay_orders(&self, owner: &SigningKey, orders: Vec<SignedOrder>) -> Result<HttpSettlement, PayError> {
        let started = Instant::now();
        let now_ms = || started.elapsed().as_millis() as u64;
        let deadline = started + self.payment_timeout;
        // Calls queued for each authority: one far behind the others is silent.
        let backlogs = self.queues.iter().map(|queue| queue.len() as u64);
        let options = PaymentOptions::default().given_backlogs(backlogs);
        let (mut payment, mut step) = self.start_payment(owner, orders, options);
        let mut certified = None;
        // Per epoch, the authorities asked for later ones (once each).
        let mut asked = BTreeSet::new();
        let (mut answers_tx, mut answers) = unbounded();
        loop {
            match step {
                Step::Wait => {}
                Step::Broadcast { call, attempt } => self.broadcast(&Request::of_payment(call), attempt, &answers_tx),
                Step::Certified { certificate, attempt } => {
                    certified = Some(started.elapsed());
                    self.broadcast(&Request::Confirm(vec![*certificate]), attempt, &answers_tx);
                }
                Step::CatchUp {
                    authority,
                    from_sequence,
                    then,
                    attempt,
                } => self.catch_up(&payment, authority, from_sequence, then, attempt, &answers_tx),
                Step::Settled => {
                    return Ok(HttpSettlement {
                        certificate: payment.certificate().expect("settled").clone(),
                        confirmed_by: payment.settled_by().expect("settled").clone(),
                        round: payment.round(),
                        to_certificate: certified.expect("certified before settled"),
                        to_settlement: started.elapsed(),
                        broken_promises: payment.broken_promises().to_vec(),
                    })
                }
                Step::Failed(error) => return Err(error.into()),
            }
            let wake = payment
                .poll_timeout()
                .map_or(deadline, |ms| deadline.min(started + Duration::from_millis(ms)));
            step = match answers.recv_deadline(wake) {
                Ok((authority, attempt, reply)) => match self.answer_epoch(&payment, &reply) {
                    AnswerEpoch::Payment => payment.on_answer(now_ms(), authority, attempt, Heard::from(reply)),
                    AnswerEpoch::LaterOrReplaced if self.later_epoch_known(&payment, authority, &mut asked) => {
                        // Paid again in the new epoch's name, with the same orders (the
                        // authorities carried their votes over); answers to the old epoch's
                        // calls go to a channel no longer read.
                        (answers_tx, answers) = unbounded();
                        (payment, step) = self.start_payment(owner, payment.orders().to_vec(), options);
                        continue;
                    }
                    AnswerEpoch::Earlier(behind) => {
                        if asked.insert((behind, authority)) {
                            let (call, attempt) = payment.current_call();
                            let then = (Request::of_payment(call.clone()), attempt);
                            self.bring_along(authority, payment.order().order.sender, behind, then, &answers_tx);
                        }
                        Step::Wait
                    }
                    // A seat replaced and not yet handed over, or an answer in the name of a
                    // committee no record leads to: silence for this payment, which the other
                    // authorities settle (or which is asked again at its next retry).
                    AnswerEpoch::LaterOrReplaced => Step::Wait,
                },
                Err(_) if Instant::now() < deadline => payment.handle_timeout(now_ms()),
                Err(_) => {
                    return Err(PayError::TimedOut {
                        timeout_ms: self.payment_timeout.as_millis() as u64,
                        certificate: payment.certificate().cloned().map(Box::new),
                    })
                }
            };
        }
    }

    /// A payment of `orders` in the name of the current epoch's committee, with the earlier
    /// epochs' for the locks it may be told of.
    fn start_payment(&self, owner: &SigningKey, orders: Vec<SignedOrder>, options: PaymentOptions) -> (Payment, Step) {
        let (current, earlier) = {
            let epochs = self.epochs.read().expect("not poisoned");
            (epochs.current.clone(), epochs.earlier())
        };
        let (payment, step) = Payment::with_orders(current, owner, orders, options, 0);
        (payment.with_earlier_epochs(earlier), step)
    }

    /// In which epoch an authority answered, as against the payment's.
    fn answer_epoch(&self, payment: &Payment, reply: &AuthorityReply) -> AnswerEpoch {
        let id = match reply {
            AuthorityReply::Voted(vote) => vote.statement.committee_id,
            AuthorityReply::RoundChanged(change) => change.change.committee_id,
            AuthorityReply::Refused { refusal, .. } if refusal == "NotSeated" => return AnswerEpoch::LaterOrReplaced,
            _ => return AnswerEpoch::Payment,
        };
        if id == payment.committee().id() {
            return AnswerEpoch::Payment;
        }
        let epoch = payment.committee().epoch();
        match self.epochs.read().expect("not poisoned").chain.committee(&id) {
            Some(committee) if committee.epoch() == epoch => AnswerEpoch::Payment,
            Some(committee) if committee.epoch() < epoch => AnswerEpoch::Earlier(committee.epoch()),
            _ => AnswerEpoch::LaterOrReplaced,
        }
    }

    /// On a thread of its own: brings `authority` (its shard of `account`) the records of the
    /// epochs after `behind`, oldest first (anyone may: a quorum of each epoch's seats signed
    /// the next), so that it votes in the current epoch's name again; then sends it the
    /// payment's call `then` again (under its attempt), whose answer counts for the payment.
    fn bring_along(
        &self,
        authority: AuthorityIndex,
        account: AccountKey,
        behind: u64,
        (then, attempt): (Request, u32),
        answers: &Answers,
    ) {
        let answers = answers.clone();
        let records: Vec<CommitteeRecord> = self.chain().records_after(behind).to_vec();
        let endpoints = self.endpoints.clone();
        let shards = endpoints.authorities[usize::from(authority)].len() as u32;
        let shard = shard_of(&account, shards);
        let spawned = std::thread::Builder::new()
            .name(format!("fastpay-epoch-a{authority}"))
            .spawn(move || {
                for record in records {
                    let reply = endpoints.execute(
                        authority,
                        &Request::EnterEpoch {
                            shard,
                            record: Box::new(record),
                        },
                    );
                    if !matches!(reply, AuthorityReply::Epoch { .. }) {
                        tracing::debug!(authority, ?reply, "an authority did not take a committee record");
                        return;
                    }
                }
                let _ = answers.send((authority, attempt, endpoints.execute(authority, &then)));
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start a thread to bring an authority into the current epoch");
        }
    }

    /// On a thread of its own, so the payment goes on at the other authorities meanwhile:
    /// fetches the payer's certificates from `from_sequence` on from an authority that has them,
    /// sends them to `lagging` in order, then `then`; the last answer counts for the payment.
    fn catch_up(
        &self,
        payment: &Payment,
        lagging: AuthorityIndex,
        from_sequence: u64,
        then: Call,
        attempt: u32,
        answers: &Answers,
    ) {
        let (endpoints, answers, fallback) = (self.endpoints.clone(), answers.clone(), answers.clone());
        let chain = self.chain();
        let order = payment.order().order.clone();
        let sources: Vec<AuthorityIndex> = (0..self.committee.size() as AuthorityIndex)
            .filter(|a| *a != lagging)
            .collect();
        let spawned = std::thread::Builder::new()
            .name(format!("fastpay-catch-up-a{lagging}"))
            .spawn(move || {
                let history = endpoints.history(&chain, &sources, order.sender, from_sequence, order.sequence);
                let Some(mut earlier) = history else {
                    let reply = AuthorityReply::Unavailable("no authority had the certificates it lacks".into());
                    let _ = answers.send((lagging, attempt, reply));
                    return;
                };
                let reply = match Request::of_payment(then) {
                    Request::Confirm(certificate) => {
                        earlier.extend(certificate);
                        endpoints.execute(lagging, &Request::Confirm(earlier))
                    }
                    then => match endpoints.execute(lagging, &Request::Confirm(earlier)) {
                        AuthorityReply::Confirmed { .. } => endpoints.execute(lagging, &then),
                        other => other,
                    },
                };
                let _ = answers.send((lagging, attempt, reply));
            });
        if let Err(error) = spawned {
            let reply = AuthorityReply::Unavailable(format!("cannot start a catch-up thread: {error}"));
            let _ = fallback.send((lagging, attempt, reply));
        }
    }

    /// Sends a funding (a FastPay funding transaction the core confirmed) to every authority;
    /// each checks the core's UHS itself before crediting it. Returns every answer received by
    /// the time `wait` is met.
    pub fn fund(
        &self,
        account: AccountKey,
        transaction: Vec<u8>,
        wait: FundWait,
    ) -> BTreeMap<AuthorityIndex, AuthorityReply> {
        let (answers_tx, answers) = unbounded();
        let request = Request::Fund {
            account,
            transaction: Arc::new(transaction),
        };
        self.broadcast(&request, 0, &answers_tx);
        let deadline = Instant::now() + self.payment_timeout;
        let mut replies = BTreeMap::new();
        while replies.len() < self.committee.size() {
            let funded = replies
                .values()
                .filter(|r| matches!(r, AuthorityReply::Funded { .. }))
                .count();
            if wait == FundWait::Quorum && funded >= self.committee.quorum() {
                break;
            }
            let Ok((authority, _, reply)) = answers.recv_deadline(deadline) else {
                break;
            };
            replies.insert(authority, reply);
        }
        replies
    }
}

impl Endpoints {
    fn observe(&self, authority: AuthorityIndex, request: &Request, reply: &AuthorityReply) {
        if let Some(observer) = &self.observer {
            let _ = observer.send(Observed {
                authority,
                request: request.clone(),
                reply: reply.clone(),
            });
        }
    }

    /// Makes one request of one authority (a sequence of certificates one by one).
    fn execute(&self, authority: AuthorityIndex, request: &Request) -> AuthorityReply {
        let Some(shards) = self.authorities.get(usize::from(authority)) else {
            return AuthorityReply::Unavailable(format!("no authority {authority}"));
        };
        let shard = match shards.get(request.shard(shards.len() as u32) as usize) {
            Some(shard) => shard,
            None => return AuthorityReply::Unavailable(format!("authority {authority} has no such shard")),
        };
        let reply = match request {
            Request::Confirm(certificates) => {
                let mut last = AuthorityReply::Unavailable("no certificate to confirm".into());
                for certificate in certificates {
                    let mut body = vec![];
                    certificate.encode_to(&mut body);
                    last = self.call(shard, HttpCall::Post(CERTIFICATES_PATH.into(), body), confirmed);
                    if !matches!(last, AuthorityReply::Confirmed { .. }) {
                        break;
                    }
                }
                last
            }
            Request::Transfer(order) => {
                let mut body = vec![];
                order.encode_to(&mut body);
                self.call(shard, HttpCall::Post(ORDERS_PATH.into(), body), voted)
            }
            Request::Lock(certificate) => {
                let mut body = vec![];
                certificate.encode_to(&mut body);
                self.call(shard, HttpCall::Post(LOCKS_PATH.into(), body), voted)
            }
            Request::RoundChange(request) => {
                let mut body = vec![];
                request.encode_to(&mut body);
                self.call(shard, HttpCall::Post(ROUND_CHANGES_PATH.into(), body), round_changed)
            }
            Request::Propose(proposal) => {
                self.call(shard, HttpCall::Post(PROPOSALS_PATH.into(), proposal.encode()), voted)
            }
            Request::Account { account, from_sequence } => {
                let path = format!(
                    "{ACCOUNTS_PATH}/{}?from_sequence={from_sequence}",
                    hex::encode(account.0)
                );
                self.call(shard, HttpCall::Get(path), account_state)
            }
            Request::Fund { transaction, .. } => self.call(
                shard,
                HttpCall::Post(FUNDINGS_PATH.into(), transaction.to_vec()),
                funded,
            ),
            Request::EnterEpoch { record, .. } => {
                let mut body = vec![];
                record.encode_to(&mut body);
                self.call(shard, HttpCall::Post(EPOCHS_PATH.into(), body), entered)
            }
            Request::Epochs { after, .. } => {
                self.call(shard, HttpCall::Get(format!("{EPOCHS_PATH}?after={after}")), epochs)
            }
        };
        self.observe(authority, request, &reply);
        reply
    }

    /// The payer's certificates from `from_sequence` up to `below`, from the first of `sources`
    /// that has them all. A source is believed only as far as its certificates prove: each must
    /// be final for its epoch's committee of `chain` and the payer's next sequence number, or a lying source (asked
    /// first, say) would have the lagging authority sent certificates it refuses, and a payment
    /// that needs that authority would fail.
    fn history(
        &self,
        chain: &CommitteeChain,
        sources: &[AuthorityIndex],
        account: AccountKey,
        from_sequence: u64,
        below: u64,
    ) -> Option<Vec<Certificate>> {
        'source: for &source in sources {
            let mut certificates: Vec<Certificate> = vec![];
            while from_sequence + (certificates.len() as u64) < below {
                let request = Request::Account {
                    account,
                    from_sequence: from_sequence + certificates.len() as u64,
                };
                let AuthorityReply::Account(state) = self.execute(source, &request) else {
                    continue 'source;
                };
                if state.confirmed.is_empty() {
                    continue 'source;
                }
                let needed = (below - from_sequence) as usize - certificates.len();
                for certificate in state.confirmed.into_iter().take(needed) {
                    let expected = (account, from_sequence + certificates.len() as u64);
                    let order = &certificate.order.order;
                    let final_in_its_epoch = chain
                        .committee(&certificate.committee_id)
                        .is_some_and(|committee| certificate.check(committee).is_ok());
                    if (order.sender, order.sequence) != expected || !final_in_its_epoch {
                        continue 'source;
                    }
                    certificates.push(certificate);
                }
            }
            return Some(certificates);
        }
        None
    }

    /// One HTTP call to the shard's replica group ([`Replicas`]: the leader search), and what
    /// its answer amounts to.
    fn call(&self, shard: &Replicas, call: HttpCall, parse: fn(Vec<u8>) -> AuthorityReply) -> AuthorityReply {
        let answer = match &call {
            HttpCall::Get(path) => shard.call::<RefusalFields>("GET", path, Body::Empty),
            HttpCall::Post(path, bytes) => shard.call("POST", path, Body::Bytes(bytes)),
        };
        match answer {
            Ok(bytes) => parse(bytes),
            Err(CallError::Refused { error, .. }) if error.code == CODE_SETTLED => {
                settled(error.more.certificate.as_deref())
            }
            Err(CallError::Refused { error, .. }) if error.code == CODE_REFUSED => AuthorityReply::Refused {
                refusal: error.more.refusal.unwrap_or_default(),
                message: error.message,
                next_sequence: error.more.next_sequence,
                round: error.more.round,
            },
            Err(CallError::Refused { url, status, error }) if error.code.is_empty() => {
                AuthorityReply::Unavailable(format!("{url}: {status} {}", error.message))
            }
            Err(CallError::Refused { url, status, error }) => {
                AuthorityReply::Unavailable(format!("{url}: {status} {}: {}", error.code, error.message))
            }
            Err(CallError::BadAnswer { reason, .. }) => malformed("answer", reason),
            Err(other) => AuthorityReply::Unavailable(other.to_string()),
        }
    }
}

/// How long a client pauses after a round of replicas none of which led.
const LEADER_SEARCH_PAUSE: Duration = Duration::from_millis(50);

enum HttpCall {
    Get(String),
    Post(String, Vec<u8>),
}

/// Why an authority's answer could not be used.
#[derive(Debug, Error)]
enum MalformedAnswer {
    #[error("not JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not hex: {0}")]
    Hex(#[from] hex::FromHexError),
    #[error(transparent)]
    Decode(#[from] specie_codec::DecodeError),
    #[error("no {0}")]
    Missing(&'static str),
}

fn malformed(what: &str, error: impl std::fmt::Display) -> AuthorityReply {
    AuthorityReply::Unavailable(format!("malformed {what}: {error}"))
}

fn voted(bytes: Vec<u8>) -> AuthorityReply {
    match decode_exact("vote", &bytes, VOTE_BYTES_MAX, Vote::decode_from) {
        Ok(vote) => AuthorityReply::Voted(vote),
        Err(error) => malformed("vote", error),
    }
}

fn round_changed(bytes: Vec<u8>) -> AuthorityReply {
    match decode_exact(
        "round change",
        &bytes,
        SIGNED_ROUND_CHANGE_BYTES_MAX,
        SignedRoundChange::decode_from,
    ) {
        Ok(change) => AuthorityReply::RoundChanged(Box::new(change)),
        Err(error) => malformed("round change", error),
    }
}

/// A `settled` answer: the slot's final certificate (which the payment checks before using).
fn settled(certificate_hex: Option<&str>) -> AuthorityReply {
    let decoded = certificate_hex
        .ok_or(MalformedAnswer::Missing("certificate"))
        .and_then(|text| Ok(hex::decode(text)?))
        .and_then(|bytes| {
            Ok(decode_exact(
                "certificate",
                &bytes,
                CERTIFICATE_BYTES_MAX,
                Certificate::decode_from,
            )?)
        });
    match decoded {
        Ok(certificate) => AuthorityReply::Final(Box::new(certificate)),
        Err(error) => malformed("settled answer", error),
    }
}

fn account_key(hex_text: &str) -> Option<AccountKey> {
    Some(AccountKey(hex::decode(hex_text).ok()?.try_into().ok()?))
}

fn confirmed(bytes: Vec<u8>) -> AuthorityReply {
    match serde_json::from_slice::<ConfirmedBody>(&bytes) {
        Ok(body) => match account_key(&body.sender) {
            Some(sender) => AuthorityReply::Confirmed {
                sender,
                sequence: body.sequence,
            },
            None => malformed("confirmation", "the sender is not a hex key"),
        },
        Err(error) => malformed("confirmation", error),
    }
}

fn funded(bytes: Vec<u8>) -> AuthorityReply {
    let id = serde_json::from_slice::<FundedBody>(&bytes)
        .ok()
        .and_then(|body| <[u8; 32]>::try_from(hex::decode(body.funded).ok()?).ok());
    match id {
        Some(id) => AuthorityReply::Funded { id },
        None => malformed("funding answer", "no 32-byte hex id"),
    }
}

fn entered(bytes: Vec<u8>) -> AuthorityReply {
    match serde_json::from_slice::<EpochBody>(&bytes) {
        Ok(body) => AuthorityReply::Epoch { epoch: body.epoch },
        Err(error) => malformed("epoch answer", error),
    }
}

fn epochs(bytes: Vec<u8>) -> AuthorityReply {
    let parse = || -> Result<Vec<CommitteeRecord>, MalformedAnswer> {
        let body: EpochsBody = serde_json::from_slice(&bytes)?;
        if body.records.len() > RECORDS_PER_ANSWER_MAX {
            return Err(MalformedAnswer::Missing("answer within the records limit"));
        }
        Ok(body
            .records
            .iter()
            .map(|text| CommitteeRecord::from_hex(text))
            .collect::<Result<_, _>>()?)
    };
    match parse() {
        Ok(records) => AuthorityReply::Epochs(records),
        Err(error) => malformed("records answer", error),
    }
}

fn account_state(bytes: Vec<u8>) -> AuthorityReply {
    let parse = || -> Result<AccountState, MalformedAnswer> {
        let body: AccountBody = serde_json::from_slice(&bytes)?;
        let certificate = |text: &String| -> Result<Certificate, MalformedAnswer> {
            let bytes = hex::decode(text)?;
            Ok(decode_exact(
                "certificate",
                &bytes,
                CERTIFICATE_BYTES_MAX,
                Certificate::decode_from,
            )?)
        };
        let pending = match body.pending {
            None => None,
            Some(pending) => Some((
                decode_exact(
                    "order",
                    &hex::decode(&pending.order)?,
                    SIGNED_ORDER_BYTES_MAX,
                    SignedOrder::decode_from,
                )?,
                decode_exact("vote", &hex::decode(&pending.vote)?, VOTE_BYTES_MAX, Vote::decode_from)?,
            )),
        };
        Ok(AccountState {
            balance: body.balance,
            next_sequence: body.next_sequence,
            pending,
            confirmed: body.confirmed.iter().map(certificate).collect::<Result<_, _>>()?,
        })
    };
    match parse() {
        Ok(state) => AuthorityReply::Account(Box::new(state)),
        Err(error) => malformed("account", error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_api::{CODE_NOT_LEADER, CODE_OUTCOME_UNKNOWN, CODE_STOPPING};

    fn refused(refusal: &str, next_sequence: Option<u64>) -> AuthorityReply {
        AuthorityReply::Refused {
            refusal: refusal.into(),
            message: format!("{refusal} here"),
            next_sequence,
            round: None,
        }
    }

    /// The payment logic is tested in `payment`; here, what an HTTP answer amounts to for it.
    #[test]
    fn http_answers_weigh_as_the_roles_refusals_do() {
        for lagging in ["WrongSequence", "OtherOrderPending", "MissingEarlier"] {
            assert_eq!(
                Heard::from(refused(lagging, Some(3))),
                Heard::Lagging { next_sequence: 3 }
            );
        }
        assert_eq!(
            Heard::from(refused("WrongSequence", None)),
            Heard::Refused("WrongSequence here".into()),
            "without a sequence number there is nothing to catch up from"
        );
        for contested in ["LockedOnOther", "RoundPassed", "ConflictingCertificate", "Busy"] {
            assert_eq!(
                Heard::from(refused(contested, None)),
                Heard::Contested(format!("{contested} here"))
            );
        }
        let passed = AuthorityReply::Refused {
            refusal: "RoundPassed".into(),
            message: "in round 9 already".into(),
            next_sequence: None,
            round: Some(9),
        };
        assert_eq!(Heard::from(passed), Heard::RoundPassed { round: 9 });
        assert_eq!(
            Heard::from(refused("InsufficientBalance", None)),
            Heard::Refused("InsufficientBalance here".into())
        );
        assert!(matches!(
            Heard::from(AuthorityReply::Unavailable("down".into())),
            Heard::Refused(why) if why.contains("down")
        ));
        assert!(matches!(settled(None), AuthorityReply::Unavailable(why) if why.contains("no certificate")));
        assert!(matches!(settled(Some("zz")), AuthorityReply::Unavailable(_)));
        assert!(matches!(settled(Some("00")), AuthorityReply::Unavailable(_)));
        // The answers with which the authorities' replicas send a client elsewhere are the ones
        // the shared client follows.
        for code in [CODE_NOT_LEADER, CODE_OUTCOME_UNKNOWN, CODE_STOPPING] {
            assert!(specie_service::client::ASK_ELSEWHERE.contains(&code), "{code}");
        }
    }
}
