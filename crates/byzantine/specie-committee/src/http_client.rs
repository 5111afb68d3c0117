//! A FastPay client of a committee whose authorities run as processes: the client's side of
//! FastPay (§4.1, §4.5, §5) over the authorities' HTTP API ([`crate::http_api`]).
//!
//! A payment sends its order to every authority at once (each to the shard of the payer's
//! account, [`shard_of`]), forms the certificate from the first quorum of valid votes, sends it
//! to every authority and is settled at the first quorum of confirmations: a slow, dead or lying
//! authority never delays it. An authority that lags behind the payer's earlier certificates
//! (it answers `WrongSequence` to the order or `MissingEarlier` to the certificate) is brought up
//! to date on the side: the client fetches the certificates it lacks from an authority that has
//! them and sends them first, in order (§5). (An authority that voted for an earlier order and
//! missed its certificate answers `OtherOrderPending` with that order's sequence number: the
//! same lag.)
//!
//! Blocking: each authority has a few worker threads that make its HTTP calls (following
//! `not_leader` answers to the leader of the shard's replica group), so a call never waits
//! behind another authority's.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Sender, TrySendError};
use specie_authority::{shard_of, AccountState};
use specie_fastpay::{
    decode_exact, AccountKey, AuthorityIndex, Certificate, Committee, SignedOrder, Vote, CERTIFICATE_BYTES_MAX,
    SIGNED_ORDER_BYTES_MAX,
};
use thiserror::Error;

use crate::http_api::{
    AccountBody, ConfirmedBody, ErrorBody, FundedBody, ACCOUNTS_PATH, CERTIFICATES_PATH, CODE_NOT_LEADER,
    CODE_OUTCOME_UNKNOWN, CODE_REFUSED, CODE_STOPPING, FUNDINGS_PATH, ORDERS_PATH,
};

/// The largest vote a client reads (a vote is 135 bytes).
const VOTE_BYTES_MAX: usize = 1024;
/// The largest JSON answer a client reads: an account with 64 certificates of a large committee.
const JSON_BYTES_MAX: u64 = 8 << 20;

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
}

impl Request {
    fn account(&self) -> AccountKey {
        match self {
            Request::Transfer(order) => order.order.sender,
            Request::Confirm(certificates) => certificates
                .first()
                .map_or(AccountKey([0; 32]), |c| c.order.order.sender),
            Request::Account { account, .. } | Request::Fund { account, .. } => *account,
        }
    }
}

/// One authority's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthorityReply {
    Voted(Vote),
    Confirmed {
        sender: AccountKey,
        sequence: u64,
    },
    Account(Box<AccountState>),
    Funded {
        id: [u8; 32],
    },
    /// The authority's role refused: `refusal` names why (`OtherOrderPending`, …).
    Refused {
        refusal: String,
        message: String,
        next_sequence: Option<u64>,
    },
    /// No usable answer: down, no leader, a time-out, a malformed or unexpected answer.
    Unavailable(String),
}

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
    pub certificate: Certificate,
    /// The authorities whose confirmation counted (a quorum).
    pub confirmed_by: BTreeSet<AuthorityIndex>,
    /// From sending the order to holding the certificate (final from here).
    pub to_certificate: Duration,
    /// From sending the order to a quorum having settled it.
    pub to_settlement: Duration,
}

/// Why a payment did not settle.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PayError {
    /// So many authorities refused (or answered with invalid votes, or not at all) that no quorum
    /// of votes can form.
    #[error("no quorum of votes possible: {refusals:?}")]
    NoQuorum { refusals: Vec<(AuthorityIndex, String)> },
    /// The certificate formed (the payment is final) but too few authorities confirmed it: send
    /// it again later.
    #[error("certified, but too few authorities confirmed: {failures:?}")]
    NotSettled {
        certificate: Box<Certificate>,
        failures: Vec<(AuthorityIndex, String)>,
    },
    #[error("no outcome within {timeout_ms} ms")]
    TimedOut {
        timeout_ms: u64,
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

/// What sending a certificate again to an authority that caught up means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Vote,
    Confirm,
}

/// What the payment's driver does next.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Wait,
    Certified(Box<Certificate>),
    CatchUp {
        authority: AuthorityIndex,
        from_sequence: u64,
        phase: Phase,
    },
    Settled,
    Failed(PayError),
}

/// One payment's quorums, as pure state: votes, then confirmations.
struct Gathering {
    committee: Arc<Committee>,
    order: SignedOrder,
    votes: BTreeMap<AuthorityIndex, Vote>,
    refusals: BTreeMap<AuthorityIndex, String>,
    certificate: Option<Certificate>,
    confirmed: BTreeSet<AuthorityIndex>,
    unconfirmed: BTreeMap<AuthorityIndex, String>,
    /// Authorities sent the certificates they lacked, per phase: once each.
    caught_up: BTreeSet<(AuthorityIndex, u8)>,
    done: bool,
}

impl Gathering {
    fn new(committee: Arc<Committee>, order: SignedOrder) -> Gathering {
        Gathering {
            committee,
            order,
            votes: BTreeMap::new(),
            refusals: BTreeMap::new(),
            certificate: None,
            confirmed: BTreeSet::new(),
            unconfirmed: BTreeMap::new(),
            caught_up: BTreeSet::new(),
            done: false,
        }
    }

    fn catch_up(&mut self, authority: AuthorityIndex, next: Option<u64>, phase: Phase) -> Option<Next> {
        let from_sequence = next.filter(|next| *next < self.order.order.sequence)?;
        self.caught_up
            .insert((authority, phase as u8))
            .then_some(Next::CatchUp {
                authority,
                from_sequence,
                phase,
            })
    }

    fn on_vote(&mut self, authority: AuthorityIndex, reply: AuthorityReply) -> Next {
        if self.done || self.certificate.is_some() || self.votes.contains_key(&authority) {
            return Next::Wait;
        }
        let why = match reply {
            AuthorityReply::Voted(vote) if vote.authority != authority => {
                format!("answered with authority {}'s vote", vote.authority)
            }
            AuthorityReply::Voted(vote) => match vote.check(&self.committee, &self.order) {
                Err(error) => format!("invalid vote: {error}"),
                Ok(()) => {
                    self.votes.insert(authority, vote);
                    self.refusals.remove(&authority);
                    if self.votes.len() < self.committee.quorum() {
                        return Next::Wait;
                    }
                    let votes: Vec<Vote> = self.votes.values().cloned().collect();
                    let certificate = Certificate::from_votes(self.order.clone(), &votes);
                    self.certificate = Some(certificate.clone());
                    return Next::Certified(Box::new(certificate));
                }
            },
            AuthorityReply::Refused {
                ref refusal,
                next_sequence,
                ..
            } if LAGGING.contains(&refusal.as_str()) => match self.catch_up(authority, next_sequence, Phase::Vote) {
                Some(next) => return next,
                None => format!("{reply:?}"),
            },
            other => format!("{other:?}"),
        };
        self.refusals.insert(authority, why);
        if self.committee.size() - self.refusals.len() < self.committee.quorum() {
            self.done = true;
            return Next::Failed(PayError::NoQuorum {
                refusals: self.refusals.iter().map(|(a, why)| (*a, why.clone())).collect(),
            });
        }
        Next::Wait
    }

    fn on_confirm(&mut self, authority: AuthorityIndex, reply: AuthorityReply) -> Next {
        if self.done || self.confirmed.contains(&authority) {
            return Next::Wait;
        }
        let (sender, sequence) = (self.order.order.sender, self.order.order.sequence);
        let why = match reply {
            AuthorityReply::Confirmed { sender: s, sequence: n } if s == sender && n == sequence => {
                self.confirmed.insert(authority);
                self.unconfirmed.remove(&authority);
                if self.confirmed.len() < self.committee.quorum() {
                    return Next::Wait;
                }
                self.done = true;
                return Next::Settled;
            }
            AuthorityReply::Refused {
                ref refusal,
                next_sequence,
                ..
            } if refusal == "MissingEarlier" => match self.catch_up(authority, next_sequence, Phase::Confirm) {
                Some(next) => return next,
                None => format!("{reply:?}"),
            },
            other => format!("{other:?}"),
        };
        self.unconfirmed.insert(authority, why);
        if self.committee.size() - self.unconfirmed.len() < self.committee.quorum() {
            self.done = true;
            return Next::Failed(PayError::NotSettled {
                certificate: Box::new(self.certificate.clone().expect("confirming")),
                failures: self.unconfirmed.iter().map(|(a, why)| (*a, why.clone())).collect(),
            });
        }
        Next::Wait
    }

    /// Authorities likely to hold the payer's certificates below this order's sequence number:
    /// those that voted for it or confirmed it first.
    fn sources(&self, lagging: AuthorityIndex) -> Vec<AuthorityIndex> {
        let mut sources: Vec<AuthorityIndex> = self.confirmed.iter().chain(self.votes.keys()).copied().collect();
        sources.extend(0..self.committee.size() as AuthorityIndex);
        let mut seen = BTreeSet::new();
        sources.retain(|a| *a != lagging && seen.insert(*a));
        sources
    }
}

/// Refusals of an order that mean the authority lags behind the payer when the sequence number
/// they carry is below the order's: it expects an earlier one, or holds a vote for an earlier
/// order that a certificate it has not seen settled.
const LAGGING: [&str; 2] = ["WrongSequence", "OtherOrderPending"];

/// The replicas of one authority shard and which of them leads, as far as the client knows.
struct ShardEndpoints {
    replicas: Vec<String>,
    leader: AtomicUsize,
}

/// Everything the worker threads share.
struct Endpoints {
    authorities: Vec<Vec<ShardEndpoints>>,
    agent: ureq::Agent,
    request_timeout: Duration,
    observer: Option<Sender<Observed>>,
}

/// A job for an authority's workers: the request and where its answer goes.
type Job = (Request, Sender<(AuthorityIndex, AuthorityReply)>);

/// A client of a committee whose authorities serve the HTTP API. Cheap to clone; its worker
/// threads end when the last clone is dropped.
#[derive(Clone)]
pub struct HttpCommittee {
    committee: Arc<Committee>,
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
                    .map(|replicas| ShardEndpoints {
                        replicas,
                        leader: AtomicUsize::new(0),
                    })
                    .collect(),
            );
        }
        let agent = ureq::AgentBuilder::new()
            .timeout(options.request_timeout)
            .timeout_connect(options.request_timeout.min(Duration::from_secs(1)))
            .max_idle_connections_per_host(options.workers_per_authority)
            .build();
        let endpoints = Arc::new(Endpoints {
            authorities,
            agent,
            request_timeout: options.request_timeout,
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
                        for (request, answer) in work {
                            let reply = endpoints.execute(authority as AuthorityIndex, &request);
                            let _ = answer.send((authority as AuthorityIndex, reply));
                        }
                    })
                    .map_err(|error| HttpCommitteeError::Thread(error.to_string()))?;
            }
            queues.push(jobs);
        }
        Ok(HttpCommittee {
            committee,
            endpoints,
            queues: Arc::new(queues),
            payment_timeout: options.payment_timeout,
        })
    }

    pub fn committee(&self) -> &Arc<Committee> {
        &self.committee
    }

    /// Queues `request` for `authority`; its answer goes to `answers`.
    fn send(&self, authority: AuthorityIndex, request: Request, answers: &Sender<(AuthorityIndex, AuthorityReply)>) {
        match self.queues[usize::from(authority)].try_send((request, answers.clone())) {
            Ok(()) => {}
            Err(TrySendError::Full((request, answers)) | TrySendError::Disconnected((request, answers))) => {
                let reply = AuthorityReply::Unavailable("the client's queue for this authority is full".into());
                self.endpoints.observe(authority, &request, &reply);
                let _ = answers.send((authority, reply));
            }
        }
    }

    fn broadcast(&self, request: &Request, answers: &Sender<(AuthorityIndex, AuthorityReply)>) {
        for authority in 0..self.committee.size() {
            self.send(authority as AuthorityIndex, request.clone(), answers);
        }
    }

    /// Asks one authority and waits for its answer.
    pub fn ask(&self, authority: AuthorityIndex, request: Request) -> AuthorityReply {
        self.endpoints.execute(authority, &request)
    }

    /// Pays: the order to every authority, the certificate at the first quorum of votes, settled
    /// at the first quorum of confirmations.
    pub fn pay(&self, order: SignedOrder) -> Result<HttpSettlement, PayError> {
        let started = Instant::now();
        let deadline = started + self.payment_timeout;
        let (answers_tx, answers) = unbounded();
        self.broadcast(&Request::Transfer(order.clone()), &answers_tx);
        let mut gathering = Gathering::new(self.committee.clone(), order);
        let mut certified = None;
        loop {
            let Ok((authority, reply)) = answers.recv_deadline(deadline) else {
                return Err(PayError::TimedOut {
                    timeout_ms: self.payment_timeout.as_millis() as u64,
                    certificate: gathering.certificate.clone().map(Box::new),
                });
            };
            let next = match (certified, &reply) {
                (None, _) => gathering.on_vote(authority, reply),
                // A vote that arrives after the certificate formed changes nothing.
                (Some(_), AuthorityReply::Voted(_)) => Next::Wait,
                (Some(_), _) => gathering.on_confirm(authority, reply),
            };
            match next {
                Next::Wait => {}
                Next::Certified(certificate) => {
                    certified = Some(started.elapsed());
                    self.broadcast(&Request::Confirm(vec![*certificate]), &answers_tx);
                }
                Next::CatchUp {
                    authority,
                    from_sequence,
                    phase,
                } => self.catch_up(&gathering, authority, from_sequence, phase, &answers_tx),
                Next::Settled => {
                    return Ok(HttpSettlement {
                        certificate: gathering.certificate.expect("settled"),
                        confirmed_by: gathering.confirmed,
                        to_certificate: certified.expect("certified"),
                        to_settlement: started.elapsed(),
                    })
                }
                Next::Failed(error) => return Err(error),
            }
        }
    }

    /// On a thread of its own, so the payment goes on at the other authorities meanwhile:
    /// fetches the payer's certificates from `from_sequence` on from an authority that has them,
    /// sends them to `lagging` in order, then the order or the certificate again; the last
    /// answer counts for the payment.
    fn catch_up(
        &self,
        gathering: &Gathering,
        lagging: AuthorityIndex,
        from_sequence: u64,
        phase: Phase,
        answers: &Sender<(AuthorityIndex, AuthorityReply)>,
    ) {
        let (endpoints, answers, fallback) = (self.endpoints.clone(), answers.clone(), answers.clone());
        let (order, certificate) = (gathering.order.clone(), gathering.certificate.clone());
        let sources = gathering.sources(lagging);
        let spawned = std::thread::Builder::new()
            .name(format!("fastpay-catch-up-a{lagging}"))
            .spawn(move || {
                let sequence = order.order.sequence;
                let Some(mut earlier) = endpoints.history(&sources, order.order.sender, from_sequence, sequence) else {
                    let reply = AuthorityReply::Unavailable("no authority had the certificates it lacks".into());
                    let _ = answers.send((lagging, reply));
                    return;
                };
                let reply = match (phase, certificate) {
                    (Phase::Confirm, Some(certificate)) => {
                        earlier.push(certificate);
                        endpoints.execute(lagging, &Request::Confirm(earlier))
                    }
                    _ => match endpoints.execute(lagging, &Request::Confirm(earlier)) {
                        AuthorityReply::Confirmed { .. } => endpoints.execute(lagging, &Request::Transfer(order)),
                        other => other,
                    },
                };
                let _ = answers.send((lagging, reply));
            });
        if let Err(error) = spawned {
            let reply = AuthorityReply::Unavailable(format!("cannot start a catch-up thread: {error}"));
            let _ = fallback.send((lagging, reply));
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
        self.broadcast(&request, &answers_tx);
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
            let Ok((authority, reply)) = answers.recv_deadline(deadline) else {
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
        let shard = &shards[shard_of(&request.account(), shards.len() as u32) as usize];
        let reply = match request {
            Request::Confirm(certificates) => {
                let mut last = AuthorityReply::Unavailable("no certificate to confirm".into());
                for certificate in certificates {
                    let mut body = vec![];
                    certificate.encode_to(&mut body);
                    last = self.call(shard, Call::Post(CERTIFICATES_PATH.into(), body), confirmed);
                    if !matches!(last, AuthorityReply::Confirmed { .. }) {
                        break;
                    }
                }
                last
            }
            Request::Transfer(order) => {
                let mut body = vec![];
                order.encode_to(&mut body);
                self.call(shard, Call::Post(ORDERS_PATH.into(), body), voted)
            }
            Request::Account { account, from_sequence } => {
                let path = format!(
                    "{ACCOUNTS_PATH}/{}?from_sequence={from_sequence}",
                    hex::encode(account.0)
                );
                self.call(shard, Call::Get(path), account_state)
            }
            Request::Fund { transaction, .. } => {
                self.call(shard, Call::Post(FUNDINGS_PATH.into(), transaction.to_vec()), funded)
            }
        };
        self.observe(authority, request, &reply);
        reply
    }

    /// The payer's certificates from `from_sequence` up to `below`, from the first of `sources`
    /// that has them all.
    fn history(
        &self,
        sources: &[AuthorityIndex],
        account: AccountKey,
        from_sequence: u64,
        below: u64,
    ) -> Option<Vec<Certificate>> {
        'source: for &source in sources {
            let mut certificates = vec![];
            while from_sequence + (certificates.len() as u64) < below {
                let request = Request::Account {
                    account,
                    from_sequence: from_sequence + certificates.len() as u64,
                };
                match self.execute(source, &request) {
                    AuthorityReply::Account(state) if !state.confirmed.is_empty() => {
                        certificates.extend(state.confirmed);
                    }
                    _ => continue 'source,
                }
            }
            certificates.truncate((below - from_sequence) as usize);
            return Some(certificates);
        }
        None
    }

    /// One HTTP call to the shard's replica group, within the request time-out: starts at the
    /// replica believed to lead, follows `not_leader` answers, passes over a replica it cannot
    /// reach, and pauses after each round of replicas that gave no answer (an election). A group
    /// none of whose replicas can be reached, one after another, is given up on at once: it is
    /// down, and waiting for it would only hold up this authority's other calls.
    fn call(&self, shard: &ShardEndpoints, call: Call, parse: fn(Vec<u8>) -> AuthorityReply) -> AuthorityReply {
        let deadline = Instant::now() + self.request_timeout;
        let count = shard.replicas.len();
        let mut last = String::from("no replica tried");
        let mut misses = 0usize;
        let mut unreachable = 0usize;
        loop {
            if unreachable >= count {
                return AuthorityReply::Unavailable(last);
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return AuthorityReply::Unavailable(last);
            }
            if misses > 0 && misses.is_multiple_of(count) {
                std::thread::sleep(LEADER_SEARCH_PAUSE.min(remaining));
            }
            let index = shard.leader.load(Ordering::Relaxed) % count;
            let url = format!("{}{}", shard.replicas[index], call.path());
            match self.attempt(&call, &url, remaining) {
                Attempt::Answered(Ok(bytes)) => return parse(bytes),
                Attempt::Answered(Err(reply)) => return reply,
                Attempt::Unreachable(why) => {
                    shard.leader.store((index + 1) % count, Ordering::Relaxed);
                    last = why;
                    misses += 1;
                    unreachable += 1;
                }
                Attempt::Elsewhere { leader_http, why } => {
                    unreachable = 0;
                    let hinted = leader_http.and_then(|http| {
                        shard
                            .replicas
                            .iter()
                            .position(|r| r.trim_start_matches("http://") == http)
                    });
                    shard
                        .leader
                        .store(hinted.unwrap_or((index + 1) % count), Ordering::Relaxed);
                    last = why;
                    misses += 1;
                }
            }
        }
    }

    /// One request to one replica.
    fn attempt(&self, call: &Call, url: &str, timeout: Duration) -> Attempt {
        let result = match call {
            Call::Get(_) => self.agent.get(url).timeout(timeout).call(),
            Call::Post(_, body) => self
                .agent
                .post(url)
                .timeout(timeout)
                .set("Content-Type", "application/octet-stream")
                .send_bytes(body),
        };
        let (status, response) = match result {
            Ok(response) => {
                return Attempt::Answered(read_body(response).map_err(|error| malformed("answer", error)));
            }
            Err(ureq::Error::Status(status, response)) => (status, response),
            Err(error) => return Attempt::Unreachable(format!("{url}: {error}")),
        };
        let error = read_body(response)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<ErrorBody>(&bytes).ok())
            .map(|body| body.error);
        let reply = match error {
            Some(error) if error.code == CODE_REFUSED => AuthorityReply::Refused {
                refusal: error.refusal.unwrap_or_default(),
                message: error.message,
                next_sequence: error.next_sequence,
            },
            Some(error) if RETRY_ELSEWHERE.contains(&error.code.as_str()) => {
                return Attempt::Elsewhere {
                    leader_http: error.leader_http,
                    why: format!("{url}: {}", error.message),
                }
            }
            Some(error) => AuthorityReply::Unavailable(format!("{url}: {status} {}: {}", error.code, error.message)),
            None => AuthorityReply::Unavailable(format!("{url}: HTTP {status}")),
        };
        Attempt::Answered(Err(reply))
    }
}

/// Answers after which the same request goes to (another) replica of the group: it did not lead,
/// lost the lead meanwhile (every request is idempotent), or was stopping.
const RETRY_ELSEWHERE: [&str; 3] = [CODE_NOT_LEADER, CODE_OUTCOME_UNKNOWN, CODE_STOPPING];

/// How long a client pauses after a round of replicas none of which led.
const LEADER_SEARCH_PAUSE: Duration = Duration::from_millis(50);

/// What one request to one replica came to.
enum Attempt {
    /// The body of a 200 answer, or the reply an error answer amounts to.
    Answered(Result<Vec<u8>, AuthorityReply>),
    /// Ask another replica (the leader, if the answer named it).
    Elsewhere { leader_http: Option<String>, why: String },
    /// No answer at all (refused, reset, timed out): ask another replica.
    Unreachable(String),
}

enum Call {
    Get(String),
    Post(String, Vec<u8>),
}

impl Call {
    fn path(&self) -> &str {
        match self {
            Call::Get(path) | Call::Post(path, _) => path,
        }
    }
}

/// Why an authority's answer could not be used.
#[derive(Debug, Error)]
enum MalformedAnswer {
    #[error("cannot read the answer: {0}")]
    Read(#[from] std::io::Error),
    #[error("not JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not hex: {0}")]
    Hex(#[from] hex::FromHexError),
    #[error(transparent)]
    Decode(#[from] specie_codec::DecodeError),
}

fn read_body(response: ureq::Response) -> Result<Vec<u8>, MalformedAnswer> {
    let mut bytes = vec![];
    response.into_reader().take(JSON_BYTES_MAX).read_to_end(&mut bytes)?;
    Ok(bytes)
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
    use specie_fastpay::{deterministic_key, Recipient, SigningKey, TransferOrder, VoteStatement};

    use super::*;

    fn setup() -> (Arc<Committee>, Vec<SigningKey>, SignedOrder) {
        let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
        let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
        let owner = deterministic_key("account", 0);
        let order = TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: Recipient::Account(AccountKey([3; 32])),
            amount: 1,
            sequence: 4,
            memo: Vec::new(),
        }
        .sign(&owner);
        (Arc::new(committee), keys, order)
    }

    fn vote(committee: &Committee, keys: &[SigningKey], authority: u16, order: &SignedOrder) -> AuthorityReply {
        let statement = VoteStatement {
            committee_id: committee.id(),
            round: 0,
            order_digest: order.order.digest(),
        };
        AuthorityReply::Voted(Vote {
            authority,
            statement,
            signature: statement.sign(&keys[usize::from(authority)]),
        })
    }

    fn refused(refusal: &str, next_sequence: Option<u64>) -> AuthorityReply {
        AuthorityReply::Refused {
            refusal: refusal.into(),
            message: String::new(),
            next_sequence,
        }
    }

    #[test]
    fn the_first_quorum_certifies_a_lagging_authority_is_caught_up_once_and_forgeries_never_count() {
        let (committee, keys, order) = setup();
        let mut gathering = Gathering::new(committee.clone(), order.clone());
        // A vote pending for an earlier order: the authority missed that order's certificate.
        assert_eq!(
            gathering.on_vote(1, refused("OtherOrderPending", Some(3))),
            Next::CatchUp {
                authority: 1,
                from_sequence: 3,
                phase: Phase::Vote
            }
        );
        let AuthorityReply::Voted(mut forged) = vote(&committee, &keys, 3, &order) else {
            unreachable!()
        };
        forged.signature[0] ^= 1;
        assert_eq!(gathering.on_vote(3, AuthorityReply::Voted(forged)), Next::Wait);
        assert_eq!(
            gathering.on_vote(2, refused("WrongSequence", Some(1))),
            Next::CatchUp {
                authority: 2,
                from_sequence: 1,
                phase: Phase::Vote
            }
        );
        assert_eq!(gathering.on_vote(0, vote(&committee, &keys, 0, &order)), Next::Wait);
        assert_eq!(gathering.on_vote(1, vote(&committee, &keys, 1, &order)), Next::Wait);
        let Next::Certified(certificate) = gathering.on_vote(2, vote(&committee, &keys, 2, &order)) else {
            panic!("three valid votes certify")
        };
        assert_eq!(certificate.check(&committee), Ok(()));
        assert_eq!(gathering.sources(2), vec![0, 1, 3]);

        let confirmed = AuthorityReply::Confirmed {
            sender: order.order.sender,
            sequence: 4,
        };
        assert_eq!(gathering.on_confirm(0, confirmed.clone()), Next::Wait);
        assert_eq!(
            gathering.on_confirm(3, refused("MissingEarlier", Some(2))),
            Next::CatchUp {
                authority: 3,
                from_sequence: 2,
                phase: Phase::Confirm
            }
        );
        assert_eq!(gathering.on_confirm(0, confirmed.clone()), Next::Wait, "counted once");
        assert_eq!(gathering.on_confirm(1, confirmed.clone()), Next::Wait);
        assert_eq!(gathering.on_confirm(3, confirmed.clone()), Next::Settled);
        assert_eq!(gathering.on_confirm(2, confirmed), Next::Wait, "settled once");
    }

    #[test]
    fn more_than_f_refusals_fail_a_payment_and_more_than_f_failed_confirmations_leave_it_unsettled() {
        let (committee, keys, order) = setup();
        let mut gathering = Gathering::new(committee.clone(), order.clone());
        // Another order pending at the order's own sequence number is a conflict, and a lag
        // behind it no lag: refusals.
        assert_eq!(gathering.on_vote(2, refused("OtherOrderPending", Some(4))), Next::Wait);
        assert!(matches!(
            gathering.on_vote(1, refused("WrongSequence", Some(9))),
            Next::Failed(PayError::NoQuorum { .. })
        ));
        let mut gathering = Gathering::new(committee.clone(), order.clone());
        assert_eq!(gathering.on_vote(0, refused("UnknownAccount", None)), Next::Wait);
        assert!(matches!(
            gathering.on_vote(3, refused("InsufficientBalance", None)),
            Next::Failed(PayError::NoQuorum { .. })
        ));

        // An authority is caught up once per phase: lagging again, it counts as a refusal.
        let mut gathering = Gathering::new(committee.clone(), order.clone());
        assert!(matches!(
            gathering.on_vote(2, refused("WrongSequence", Some(1))),
            Next::CatchUp { authority: 2, .. }
        ));
        assert_eq!(gathering.on_vote(2, refused("WrongSequence", Some(1))), Next::Wait);
        assert!(matches!(
            gathering.on_vote(0, AuthorityReply::Unavailable("down".into())),
            Next::Failed(PayError::NoQuorum { .. })
        ));

        let mut gathering = Gathering::new(committee.clone(), order.clone());
        for authority in 0..2 {
            assert_eq!(
                gathering.on_vote(authority, vote(&committee, &keys, authority, &order)),
                Next::Wait
            );
        }
        assert!(matches!(
            gathering.on_vote(3, vote(&committee, &keys, 3, &order)),
            Next::Certified(_)
        ));
        assert_eq!(
            gathering.on_confirm(0, AuthorityReply::Unavailable("down".into())),
            Next::Wait
        );
        assert!(matches!(
            gathering.on_confirm(1, refused("Busy", None)),
            Next::Failed(PayError::NotSettled { .. })
        ));
    }
}
