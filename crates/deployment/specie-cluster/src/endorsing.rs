//! The sentinels as a threshold group of endorsers (issue 12; docs/endorsement-format.md): in a
//! cluster with an `[endorsement]` section, a transaction reaches a coordinator only with one
//! FROST signature of k of the n sentinels, each having validated it itself.
//!
//! ```text
//! wallet ─▶ sentinel S: validates ─▶ S's endorsement aggregator ⇄ k endorsers (sentinels, mutual TLS)
//!                                      ─▶ coordinator group: attestation + endorsement verified ─▶ 2PC
//! ```
//!
//! Every sentinel runs both roles of `specie-endorsement`: an [`Endorser`] serving the other
//! sentinels on its `endorser` address ([`EndorserService`], [`serve_endorser`]), and an
//! [`Aggregator`] for the transactions its own wallets submit ([`EndorsementClient`]). The
//! roles are the same sans-IO state machines the embedded node and the simulator run; this
//! module only moves their messages. A sentinel's endorser is its own first signer: it is reached
//! in-process, the others over the wire.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use specie_codec::Encode;
use specie_endorsement::{
    Aggregator, AggregatorConfig, AggregatorId, AggregatorInput, AggregatorMessage, BatchItem, Ceremony, CeremonyInput,
    CeremonyKind, CeremonyMessage, CeremonyReport, EndorseReply, Endorser, EndorserConfig, EndorserId, EndorserInput,
    EndorserKeys, EndorserMessage, GroupKey, Hash, RefusalCode, Replies, Validator,
};
use specie_role::{Role, Round};
use specie_sentinel::endorsement::{Candidate, SentinelChecks};
use specie_sentinel::TrustedKeys;
use specie_wire::{handler_fn, Admit, Client, InvalidWireLimits, Peer, ServerCounters, ServerSetup, Transport};
use tokio::sync::{mpsc, oneshot, watch};

use crate::credentials::{self, CredentialsError};
use crate::host::{wait_for_stop_signal, wire_limits};
use crate::identity::{authorize, Identity};
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

/// Endorsement requests waiting for a sentinel's aggregator; beyond this submitters wait.
const CALLS_QUEUED_MAX: usize = 1024;
/// Endorsers' answers waiting for the aggregator.
const ANSWERS_QUEUED_MAX: usize = 4096;
/// A refusal reason that is not a valid code (never, for the sentinel's own codes).
const FALLBACK_REFUSAL: &str = "invalid";

/// The reply to one transaction submitted for endorsement, with endorsers' refusal codes.
pub type Reply = EndorseReply<RefusalCode>;

/// An endorser's checks with the verdicts computed before it runs: a batch is validated on all
/// cores (`specie_sentinel::validate_batch`, which also batches signature checks) outside the
/// endorser's lock, and the endorser takes the verdicts in the batch's order. A digest does not
/// commit to a transaction's witnesses, so verdicts go by position, never by digest.
struct PrevalidatedChecks {
    /// Set and consumed under the endorser's lock, for the one `Sign` being handled.
    verdicts: VecDeque<(Hash, Result<(), RefusalCode>)>,
    /// For an item without its verdict (none: every batch is prevalidated).
    checks: SentinelChecks,
}

fn refusal_code(error: &specie_sentinel::ValidationError) -> RefusalCode {
    RefusalCode::new(error.code())
        .or_else(|| RefusalCode::new(FALLBACK_REFUSAL))
        .expect("a valid code")
}

impl Validator for PrevalidatedChecks {
    type Item = Candidate;
    type Reason = RefusalCode;

    fn validate(&mut self, item: &Candidate) -> Result<(), RefusalCode> {
        match self.verdicts.pop_front() {
            Some((digest, verdict)) if digest == item.digest() => verdict,
            _ => {
                self.verdicts.clear();
                self.checks.validate(item).map_err(|error| refusal_code(&error))
            }
        }
    }
}

/// A sentinel's endorser, shared by the connections of the sentinels that ask it to sign.
pub struct EndorserService {
    endorser: Mutex<Endorser<PrevalidatedChecks>>,
    trusted: TrustedKeys,
    compromised: bool,
    started: Instant,
}

impl EndorserService {
    /// The endorser holding `keys`; `compromised` makes it sign whatever it is sent (fault
    /// tests and demonstrations of what fewer than k such sentinels can do).
    pub fn new(keys: EndorserKeys, trusted: TrustedKeys, compromised: bool) -> EndorserService {
        let checks = PrevalidatedChecks {
            verdicts: VecDeque::new(),
            checks: SentinelChecks {
                trusted: trusted.clone(),
                compromised,
            },
        };
        let config = EndorserConfig {
            batch_transactions_max: specie_endorsement::BATCH_TRANSACTIONS_MAX,
            ..EndorserConfig::default()
        };
        // Fresh nonce randomness at every start: a restarted endorser never repeats a nonce.
        let endorser = Endorser::new(keys, checks, config, rand::random());
        EndorserService {
            endorser: Mutex::new(endorser),
            trusted,
            compromised,
            started: Instant::now(),
        }
    }

    pub fn id(&self) -> EndorserId {
        self.lock().keys().id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Endorser<PrevalidatedChecks>> {
        self.endorser.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Aggregator `from`'s request, answered (blocking: it validates a whole batch, so call it
    /// off the async workers). `None` if the endorser has nothing to say (it never happens for
    /// a well-formed request; the aggregator times the round out).
    pub fn handle(
        &self,
        from: AggregatorId,
        message: AggregatorMessage<Candidate>,
    ) -> Option<EndorserMessage<RefusalCode>> {
        let verdicts = match &message {
            AggregatorMessage::Sign { items, .. } => self.prevalidate(items),
            AggregatorMessage::Commit { .. } => VecDeque::new(),
        };
        let mut endorser = self.lock();
        // Under the lock, so another aggregator's batch cannot slip its verdicts in between.
        endorser.validator_mut().verdicts = verdicts;
        let now_ms = self.started.elapsed().as_millis() as u64;
        if endorser.poll_timeout().is_some_and(|at| at <= now_ms) {
            endorser.handle_timeout(now_ms);
        }
        endorser.handle(now_ms, EndorserInput { from, message });
        let answer = Round::take(&mut *endorser)
            .sends
            .into_iter()
            .find_map(|(to, message)| (to == from).then_some(message));
        endorser.validator_mut().verdicts.clear();
        answer
    }

    fn prevalidate(&self, items: &[Candidate]) -> VecDeque<(Hash, Result<(), RefusalCode>)> {
        if self.compromised {
            return items.iter().map(|item| (item.digest(), Ok(()))).collect();
        }
        // What this sentinel's front door validated is not validated twice; every item from
        // another sentinel is (a decoded candidate is never `validated_here`).
        let unchecked: Vec<_> = items
            .iter()
            .filter(|item| !item.validated_here())
            .map(|item| (*item.tx).clone())
            .collect();
        let mut verdicts = specie_sentinel::validate_batch(&unchecked, &self.trusted).into_iter();
        items
            .iter()
            .map(|item| {
                let verdict = match item.validated_here() {
                    true => Ok(()),
                    false => match verdicts.next() {
                        Some(verdict) => verdict.map(drop).map_err(|error| refusal_code(&error)),
                        None => Err(RefusalCode::new(FALLBACK_REFUSAL).expect("a valid code")),
                    },
                };
                (item.digest(), verdict)
            })
            .collect()
    }
}

/// Sentinel `index` of the cluster file is endorser `index + 1`, and aggregator `index + 1`
/// when it asks the others to sign.
fn endorser_number(topology: &Topology, sentinel: &str) -> Option<u16> {
    let index = topology.sentinels.iter().position(|s| s.name == sentinel)?;
    u16::try_from(index + 1).ok()
}

/// What a sentinel serves the other sentinels: its endorser once it holds a share, and its key
/// generation ceremony while it runs one.
#[derive(Default)]
pub struct EndorserServer {
    service: OnceLock<Arc<EndorserService>>,
    ceremony: Mutex<Option<mpsc::Sender<(EndorserId, CeremonyMessage)>>>,
}

impl EndorserServer {
    /// Endorses from now on with `service`.
    pub fn serve(&self, service: Arc<EndorserService>) {
        let _ = self.service.set(service);
    }

    /// Passes the other sentinels' ceremony messages to the receiver returned, for
    /// [`generate_keys`]. Called before the server starts, so that no early message is taken and
    /// lost (a sender stops resending what was taken).
    pub fn open_ceremony(&self) -> CeremonyInbox {
        let (sender, inbox) = mpsc::channel(CEREMONY_INBOX_MAX);
        *self.ceremony.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sender);
        CeremonyInbox(inbox)
    }

    async fn answer(&self, from: EndorserId, request: RoleRequest) -> Result<RoleResponse, EndorserRefusal> {
        match request {
            RoleRequest::Endorse(message) => {
                let service = self.service.get().cloned().ok_or(EndorserRefusal::NoShare)?;
                let answer = tokio::task::spawn_blocking(move || service.handle(u32::from(from.0), *message))
                    .await
                    .map_err(|_| EndorserRefusal::Stopped)?
                    .ok_or(EndorserRefusal::NoAnswer)?;
                Ok(RoleResponse::Endorser(Box::new(answer)))
            }
            RoleRequest::Ceremony(message) => {
                let ceremony = self
                    .ceremony
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                // Taken whether or not a ceremony still runs here: a finished one needs nothing more,
                // and the sender stops resending.
                if let Some(ceremony) = ceremony {
                    let _ = ceremony.send((from, *message)).await;
                }
                Ok(RoleResponse::Taken)
            }
            other => Err(EndorserRefusal::NotServed { request: other.kind() }),
        }
    }
}

/// Why a sentinel's endorser did not answer a request (what the asking sentinel reads).
#[derive(Debug, thiserror::Error)]
pub enum EndorserRefusal {
    #[error("this endorser holds no share yet")]
    NoShare,
    #[error("the endorser stopped")]
    Stopped,
    #[error("the endorser had no answer")]
    NoAnswer,
    #[error("an endorser does not serve {request}")]
    NotServed { request: &'static str },
}

/// Serves `server` to the other sentinels on `address` until the process is told to stop. Only
/// members of the cluster are admitted, and only a sentinel's `endorse` and `ceremony` requests
/// are served; which sentinel asks is the sender's certificate.
pub async fn serve_endorser(
    topology: Topology,
    me: Identity,
    address: std::net::SocketAddr,
    server: Arc<EndorserServer>,
) -> Result<(), std::io::Error> {
    let transport = credentials::transport(&topology, &me).map_err(std::io::Error::other)?;
    let limits = wire_limits(&topology);
    let listener = tokio::net::TcpListener::bind(crate::host::listen_address(address)).await?;
    let counters: Arc<ServerCounters> = Arc::default();
    let admit = admit_sentinels(Arc::new(topology), Arc::new(me), server, counters.clone());
    let setup = ServerSetup {
        limits,
        transport,
        counters,
    };
    let (stop, stopped) = watch::channel(false);
    let server = tokio::spawn(specie_wire::serve(listener, admit, setup, stopped));
    wait_for_stop_signal().await;
    let _ = stop.send(true);
    let _ = server.await;
    Ok(())
}

fn admit_sentinels(
    topology: Arc<Topology>,
    me: Arc<Identity>,
    server: Arc<EndorserServer>,
    counters: Arc<ServerCounters>,
) -> Admit {
    Arc::new(move |peer: &Peer| {
        let Some(name) = &peer.name else {
            return Err("an endorser answers authenticated sentinels only".to_string());
        };
        let caller = Identity::parse(name).ok_or_else(|| format!("'{name}' is not a specie identity"))?;
        let Identity::Sentinel { name: sentinel } = &caller else {
            return Err(format!("{caller} is not a sentinel"));
        };
        let from = endorser_number(&topology, sentinel)
            .map(EndorserId)
            .ok_or_else(|| format!("{caller} is not a member of this cluster"))?;
        let (topology, me, server, counters) = (topology.clone(), me.clone(), server.clone(), counters.clone());
        Ok(handler_fn(move |bytes: Vec<u8>| {
            let (topology, me, server, counters, caller) = (
                topology.clone(),
                me.clone(),
                server.clone(),
                counters.clone(),
                caller.clone(),
            );
            async move {
                let refused = |reason: String| {
                    counters
                        .requests_refused
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!(peer = %caller, %reason, "request to the endorser refused");
                    reason
                };
                let request_tag = *bytes.first().ok_or_else(|| refused("empty request".into()))?;
                // Decided on the tag alone: a refused request is never decoded.
                authorize(&topology, &me, &caller, request_tag).map_err(|e| refused(format!("not authorised: {e}")))?;
                let request = RoleRequest::decode(&bytes).map_err(|e| refused(format!("malformed request: {e}")))?;
                let answer = server.answer(from, request).await;
                Ok(answer.map_err(|refusal| refused(refusal.to_string()))?.encode())
            }
        }))
    })
}

/// How long the sentinels' key generation may take: every sentinel must be up within it.
const CEREMONY_ROUND_TIMEOUT_MS: u64 = 120_000;
/// Pause between two deliveries of a ceremony message to a sentinel that did not take it.
const CEREMONY_RESEND_MS: u64 = 250;
/// Ceremony messages from the other sentinels waiting for this one's ceremony.
const CEREMONY_INBOX_MAX: usize = 256;

/// The other sentinels' ceremony messages, as this sentinel's endorser server takes them.
pub struct CeremonyInbox(mpsc::Receiver<(EndorserId, CeremonyMessage)>);

/// Why the sentinels' key generation failed here.
#[derive(Debug, thiserror::Error)]
pub enum CeremonyFailed {
    #[error(transparent)]
    Ceremony(#[from] specie_endorsement::CeremonyError),
    #[error("the ceremony's inbox closed")]
    Stopped,
}

/// Runs sentinel `name`'s part of the distributed key generation (or, with
/// `CeremonyKind::Refresh`, the proactive refresh of its share) with the other sentinels, over
/// the wire protocol's mutual TLS (round 2 carries secret shares), and returns its key material
/// once every participant confirmed the same transcript and group key. No process ever sees
/// another's share, and none holds the group secret.
pub async fn generate_keys(
    topology: &Topology,
    name: &str,
    CeremonyInbox(mut inbox): CeremonyInbox,
    kind: CeremonyKind,
    transport: &Transport,
) -> Result<EndorserKeys, EndorsingError> {
    let not_an_endorser = || EndorsingError::NotAnEndorser { name: name.to_string() };
    let me = EndorserId(endorser_number(topology, name).ok_or_else(not_an_endorser)?);
    let threshold = (topology.endorsement.as_ref())
        .and_then(|config| config.threshold(topology.sentinels.len()))
        .ok_or_else(not_an_endorser)?;
    let peers = endorser_clients(topology, me, transport)?;
    let mut ceremony = Ceremony::new(me, threshold, kind, CEREMONY_ROUND_TIMEOUT_MS, rand::random());
    let started = Instant::now();
    let now_ms = || started.elapsed().as_millis() as u64;
    let timeout = Duration::from_millis(topology.limits.request_timeout_ms);
    ceremony.handle(now_ms(), CeremonyInput::Start);
    loop {
        let round = Round::take(&mut ceremony);
        for (to, message) in round.sends {
            if let Some(client) = peers.get(&to).cloned() {
                tokio::spawn(deliver(client, message, timeout));
            }
        }
        // A ceremony reports once, when it finishes or fails.
        match round.reports.into_iter().next() {
            Some(CeremonyReport::Finished { .. }) => {
                return ceremony.outcome().cloned().ok_or(CeremonyFailed::Stopped.into());
            }
            Some(CeremonyReport::Failed(error)) => return Err(CeremonyFailed::from(error).into()),
            None => {}
        }
        let wake = (ceremony.poll_timeout()).map_or(Duration::from_secs(3600), |at| {
            Duration::from_millis(at.saturating_sub(now_ms()))
        });
        tokio::select! {
            received = inbox.recv() => {
                let (from, message) = received.ok_or(CeremonyFailed::Stopped)?;
                ceremony.handle(now_ms(), CeremonyInput::FromPeer { from, message });
            }
            () = tokio::time::sleep(wake) => {
                if ceremony.poll_timeout().is_some_and(|at| at <= now_ms()) {
                    ceremony.handle_timeout(now_ms());
                }
            }
        }
    }
}

/// Sends `message` to a sentinel until it takes it (it may not be up yet), for as long as a
/// ceremony may last.
async fn deliver(client: Client, message: CeremonyMessage, timeout: Duration) {
    let request = RoleRequest::Ceremony(Box::new(message)).encode();
    let deadline = Instant::now() + Duration::from_millis(CEREMONY_ROUND_TIMEOUT_MS * 3);
    while Instant::now() < deadline {
        match client
            .call(request.clone(), timeout)
            .await
            .map(|bytes| RoleResponse::decode(&bytes))
        {
            Ok(Ok(RoleResponse::Taken)) => return,
            other => tracing::debug!(sentinel = client.addr(), ?other, "ceremony message not taken yet"),
        }
        tokio::time::sleep(Duration::from_millis(CEREMONY_RESEND_MS)).await;
    }
}

/// A client for every other sentinel's endorser address, each of which must prove it is that
/// sentinel.
fn endorser_clients(
    topology: &Topology,
    me: EndorserId,
    transport: &Transport,
) -> Result<BTreeMap<EndorserId, Client>, EndorsingError> {
    let limits = wire_limits(topology);
    let mut clients = BTreeMap::new();
    for (index, sentinel) in topology.sentinels.iter().enumerate() {
        let id = EndorserId(u16::try_from(index + 1).unwrap_or(u16::MAX));
        if id == me {
            continue;
        }
        let address = (sentinel.endorser).ok_or_else(|| EndorsingError::NotAnEndorser {
            name: sentinel.name.clone(),
        })?;
        let identity = Identity::sentinel(&sentinel.name).to_string();
        clients.insert(
            id,
            Client::new(address.to_string(), identity, limits.clone(), transport.clone())?,
        );
    }
    Ok(clients)
}

/// How a sentinel's aggregator reaches an endorser.
#[derive(Clone)]
enum EndorserLink {
    /// This sentinel's own endorser.
    Local(Arc<EndorserService>),
    Remote(Client),
}

impl EndorserLink {
    /// One round's request to the endorser; `None` when it did not answer usefully (the
    /// aggregator times the round out and picks other endorsers).
    async fn call(
        &self,
        me: AggregatorId,
        message: AggregatorMessage<Candidate>,
        timeout: Duration,
    ) -> Option<EndorserMessage<RefusalCode>> {
        match self {
            EndorserLink::Local(service) => {
                let service = service.clone();
                tokio::task::spawn_blocking(move || service.handle(me, message))
                    .await
                    .ok()
                    .flatten()
            }
            EndorserLink::Remote(client) => {
                let request = RoleRequest::Endorse(Box::new(message)).encode();
                match client
                    .call(request, timeout)
                    .await
                    .map(|bytes| RoleResponse::decode(&bytes))
                {
                    Ok(Ok(RoleResponse::Endorser(answer))) => Some(*answer),
                    other => {
                        tracing::debug!(endorser = client.addr(), ?other, "no endorsement answer");
                        None
                    }
                }
            }
        }
    }
}

/// Why a sentinel could not join its cluster's endorsement group.
#[derive(Debug, thiserror::Error)]
pub enum EndorsingError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
    #[error("the endorsement keys do not make a coordinator: {0}")]
    Keys(#[from] specie_endorsement::KeyError),
    #[error("the cluster file lists no sentinel '{name}' with an endorser address")]
    NotAnEndorser { name: String },
    #[error("sentinel '{name}' holds no endorsement share yet: start it (`cluster up`) to run the key generation")]
    NoShare { name: String },
    #[error("the key generation ceremony failed: {0} (remove every sentinel's endorser.key and start them again)")]
    Ceremony(#[from] CeremonyFailed),
}

/// A sentinel's way to have transactions endorsed by the group. Cheap to clone.
#[derive(Clone)]
pub struct EndorsementClient {
    calls: mpsc::Sender<(Vec<Candidate>, oneshot::Sender<Vec<Reply>>)>,
    group_key: GroupKey,
}

impl EndorsementClient {
    /// Starts sentinel `name`'s aggregator on the current runtime, with `local` as its own
    /// endorser and the other sentinels' endorsers over the wire.
    pub fn start(
        topology: &Topology,
        name: &str,
        local: Arc<EndorserService>,
        transport: &Transport,
        runtime: &tokio::runtime::Handle,
    ) -> Result<EndorsementClient, EndorsingError> {
        let not_an_endorser = || EndorsingError::NotAnEndorser { name: name.to_string() };
        let me = endorser_number(topology, name).ok_or_else(not_an_endorser)?;
        let limits = wire_limits(topology);
        let mut links = BTreeMap::new();
        for (index, sentinel) in topology.sentinels.iter().enumerate() {
            let id = EndorserId(u16::try_from(index + 1).map_err(|_| not_an_endorser())?);
            let link = if id.0 == me {
                EndorserLink::Local(local.clone())
            } else {
                let address = sentinel.endorser.ok_or_else(not_an_endorser)?;
                let identity = Identity::sentinel(&sentinel.name).to_string();
                EndorserLink::Remote(Client::new(
                    address.to_string(),
                    identity,
                    limits.clone(),
                    transport.clone(),
                )?)
            };
            links.insert(id, link);
        }
        let public = local.lock().keys().public.clone();
        let config = AggregatorConfig {
            batch_transactions_max: topology.limits.batch_transactions_max as usize,
            round_timeout_ms: topology.limits.request_timeout_ms,
            ..AggregatorConfig::default()
        };
        // Session ids from the clock: above every session an earlier run of this sentinel used.
        let first_session = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |since| since.as_nanos() as u64);
        let mut aggregator = Aggregator::new(u32::from(me), public, config, first_session)?;
        aggregator.lead(0);
        let group_key = aggregator.group_key();
        let (calls, inbox) = mpsc::channel(CALLS_QUEUED_MAX);
        let timeout = Duration::from_millis(topology.limits.request_timeout_ms);
        runtime.spawn(run_aggregator(aggregator, links, inbox, timeout));
        Ok(EndorsementClient { calls, group_key })
    }

    pub fn group_key(&self) -> GroupKey {
        self.group_key
    }

    /// Has the group endorse `candidates`: one reply each, in order; `None` if the aggregator
    /// stopped.
    pub async fn endorse(&self, candidates: Vec<Candidate>) -> Option<Vec<Reply>> {
        let (reply, replies) = oneshot::channel();
        self.calls.send((candidates, reply)).await.ok()?;
        replies.await.ok()
    }
}

/// Drives a sentinel's aggregator: takes submissions, sends each round's messages to the chosen
/// endorsers (each call its own task, so a slow endorser delays no one), feeds their answers
/// back, fires time-outs, and answers submitters. Ends when every client is gone.
async fn run_aggregator(
    mut aggregator: Aggregator<Candidate, RefusalCode>,
    links: BTreeMap<EndorserId, EndorserLink>,
    mut calls: mpsc::Receiver<(Vec<Candidate>, oneshot::Sender<Vec<Reply>>)>,
    timeout: Duration,
) {
    let started = Instant::now();
    let now_ms = || started.elapsed().as_millis() as u64;
    let me = aggregator.id();
    let (answers, mut answered) = mpsc::channel::<(EndorserId, EndorserMessage<RefusalCode>)>(ANSWERS_QUEUED_MAX);
    let mut waiting: Replies<RefusalCode, oneshot::Sender<Vec<Reply>>> = Replies::default();
    let answer = |answered: Option<specie_endorsement::Answered<RefusalCode, oneshot::Sender<Vec<Reply>>>>| {
        if let Some((to, replies)) = answered {
            let _ = to.send(replies);
        }
    };
    loop {
        let round = Round::take(&mut aggregator);
        for (ticket, reply) in round.replies {
            answer(waiting.answer(ticket, reply));
        }
        for report in round.reports {
            tracing::debug!(?report, "endorsement coordinator");
        }
        for (to, message) in round.sends {
            let (Some(link), answers) = (links.get(&to).cloned(), answers.clone()) else {
                continue;
            };
            tokio::spawn(async move {
                if let Some(answer) = link.call(me, message, timeout).await {
                    let _ = answers.send((to, answer)).await;
                }
            });
        }
        let wake = aggregator.poll_timeout().map_or(Duration::from_secs(3600), |at| {
            Duration::from_millis(at.saturating_sub(now_ms()))
        });
        tokio::select! {
            call = calls.recv() => {
                let Some((candidates, reply)) = call else { return };
                let (tickets, answered) = waiting.open(candidates.len(), reply);
                for (ticket, item) in tickets.into_iter().zip(candidates) {
                    aggregator.handle(now_ms(), AggregatorInput::Submit { ticket, item });
                }
                answer(answered);
            }
            Some((from, message)) = answered.recv() => {
                aggregator.handle(now_ms(), AggregatorInput::FromEndorser { from, message });
            }
            () = tokio::time::sleep(wake) => {
                if aggregator.poll_timeout().is_some_and(|at| at <= now_ms()) {
                    aggregator.handle_timeout(now_ms());
                }
            }
        }
    }
}

/// Sentinel `name`'s endorser, from the share its ceremony made.
pub fn endorser_service(
    topology: &Topology,
    name: &str,
    trusted: TrustedKeys,
    compromised: bool,
) -> Result<Arc<EndorserService>, EndorsingError> {
    let keys = credentials::endorser_keys(topology, name)?
        .ok_or_else(|| EndorsingError::NoShare { name: name.to_string() })?;
    Ok(Arc::new(EndorserService::new(keys, trusted, compromised)))
}

#[cfg(test)]
mod tests {
    use specie_endorsement::{deal, Threshold};
    use specie_sentinel::IssuerKeys;
    use specie_transaction::signing::{keypair_from_secret, xonly_bytes, NonceMode};
    use specie_transaction::{MintTransaction, Output, SpecieTransaction};

    use super::*;

    /// Runs one aggregator against `endorsers` in memory until every submission is answered.
    fn endorse(endorsers: &[(EndorserId, EndorserService)], candidates: Vec<Candidate>) -> Vec<Reply> {
        let public = endorsers[0].1.lock().keys().public.clone();
        let mut aggregator: Aggregator<Candidate, RefusalCode> =
            Aggregator::new(7, public, AggregatorConfig::default(), 1).unwrap();
        aggregator.lead(0);
        let count = candidates.len();
        for (ticket, item) in candidates.into_iter().enumerate() {
            aggregator.handle(
                0,
                AggregatorInput::Submit {
                    ticket: ticket as u64,
                    item,
                },
            );
        }
        let mut replies = vec![None; count];
        for now_ms in (0..100).map(|step| step * 10) {
            if aggregator.poll_timeout().is_some_and(|at| at <= now_ms) {
                aggregator.handle_timeout(now_ms);
            }
            let round = Round::take(&mut aggregator);
            for (ticket, reply) in round.replies {
                replies[ticket as usize] = Some(reply);
            }
            for (to, message) in round.sends {
                let (_, service) = endorsers.iter().find(|(id, _)| *id == to).unwrap();
                if let Some(answer) = service.handle(7, message) {
                    aggregator.handle(
                        now_ms,
                        AggregatorInput::FromEndorser {
                            from: to,
                            message: answer,
                        },
                    );
                }
            }
            if replies.iter().all(Option::is_some) {
                break;
            }
        }
        replies
            .into_iter()
            .map(|r| r.expect("every submission answered"))
            .collect()
    }

    /// A 2-of-2 group whose endorser 1 is compromised or not, and a valid mint and its twin with
    /// a broken issuer signature: the same digest (a digest does not cover signatures).
    fn group_and_mints(compromised: bool) -> (Vec<(EndorserId, EndorserService)>, Candidate, Candidate) {
        let issuer = keypair_from_secret(&[3; 32]).unwrap();
        let issuers = IssuerKeys::from_hex(&[hex::encode(xonly_bytes(&issuer))]).unwrap();
        let trusted = TrustedKeys::new(issuers);
        let (keys, _) = deal(Threshold::new(2, 2).unwrap(), 5).unwrap();
        let endorsers = keys
            .into_iter()
            .map(|(id, keys)| {
                (
                    id,
                    EndorserService::new(keys, trusted.clone(), compromised && id.0 == 1),
                )
            })
            .collect();
        let output = Output {
            witness_program_commitment: [9; 32],
            value: 50,
        };
        let mint = MintTransaction::new_signed([1; 32], vec![output], &issuer, NonceMode::Deterministic);
        let mut forged = mint.clone();
        forged.issuer_signature[0] ^= 1;
        let (valid, forged) = (
            Candidate::new(SpecieTransaction::Mint(mint)),
            Candidate::new(SpecieTransaction::Mint(forged)),
        );
        assert_eq!(valid.digest(), forged.digest());
        (endorsers, valid, forged)
    }

    #[test]
    fn each_transaction_gets_its_own_verdict_even_beside_a_twin_with_the_same_digest() {
        let (endorsers, valid, forged) = group_and_mints(false);
        let replies = endorse(&endorsers, vec![valid.clone(), forged.clone()]);
        assert!(
            matches!(&replies[0], EndorseReply::Endorsed(e) if e.verify(&endorsers[0].1.lock().keys().group_key(), &valid.digest()).is_ok()),
            "{replies:?}"
        );
        assert!(
            matches!(&replies[1], EndorseReply::Refused { reasons } if reasons.iter().all(|(_, code)| code.as_str() == "invalid_issuer_signature")),
            "{replies:?}"
        );
        // The forgery first, then the valid one: still each its own verdict.
        let replies = endorse(&endorsers, vec![forged, valid]);
        assert!(matches!(replies[0], EndorseReply::Refused { .. }), "{replies:?}");
        assert!(matches!(replies[1], EndorseReply::Endorsed(_)), "{replies:?}");
    }

    #[test]
    fn only_what_this_process_validated_skips_its_endorsers_checks() {
        use specie_codec::Decode;
        let (endorsers, valid, forged) = group_and_mints(false);
        let vouched = Candidate::validated((*valid.tx).clone(), valid.compact.clone());
        // A candidate from the wire is never vouched for, whatever its sender did.
        let decoded = Candidate::decode_exact(&vouched.encode()).unwrap();
        assert!(vouched.validated_here() && !decoded.validated_here());
        let replies = endorse(&endorsers, vec![vouched.clone(), forged, decoded]);
        assert!(matches!(replies[0], EndorseReply::Endorsed(_)), "{replies:?}");
        assert!(matches!(replies[1], EndorseReply::Refused { .. }), "{replies:?}");
        assert!(matches!(replies[2], EndorseReply::Endorsed(_)), "{replies:?}");
    }

    #[test]
    fn a_compromised_endorser_alone_cannot_endorse_a_forgery() {
        let (endorsers, valid, forged) = group_and_mints(true);
        let replies = endorse(&endorsers, vec![forged, valid]);
        assert!(
            matches!(replies[0], EndorseReply::Refused { .. } | EndorseReply::Failed),
            "{replies:?}"
        );
        assert!(matches!(replies[1], EndorseReply::Endorsed(_)), "{replies:?}");
    }
}
