//! A sentinel in front of a cluster: validates transactions on all cores (Hamilton §3.5),
//! forwards the compact ones to a coordinator group (or, in the atomizer shape, to the atomizer
//! group), and serves the wallets' HTTP API
//! (docs/api.md) exactly as the embedded node does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use specie_api::{Backend, BackendError, Completion, CompletionSender, NodeInfo, TxStatus};
use specie_archiver::{Block, DisputeProof, LedgerEntry, LedgerHead, LedgerRead, LedgerReply, Record, SupplyCut};
use specie_endorsement::{CeremonyKind, EndorseReply, Endorsement};
use specie_fastpay_primary::FastpayRules;
use specie_private_transactions::PrivacyRules;
use specie_sentinel::endorsement::Candidate;
use specie_sentinel::{IssuerKeys, IssuerKeysError, SpecieErrorCode, TrustedKeys, ValidationError};
use specie_transaction::{CompactTransaction, SpecieTransaction, Txid, UhsId};
use specie_wire::InvalidWireLimits;

use crate::core_uhs::{other_kind, CoreUhs};
use crate::credentials::{self, CredentialsError};
use crate::endorsing::{self, EndorsementClient, EndorserServer, EndorserService, EndorsingError};
use crate::group_client::{GroupClient, GroupError};
use crate::host::{wait_for_stop_signal, wire_limits};
use crate::identity::Identity;
use crate::protocol::{RoleRequest, RoleResponse, Submission};
use crate::topology::{FastpayCommitteeConfig, InvalidTopology, Topology, ARCHIVER_GROUP};

/// How long a submission may take end to end before its fate is reported unknown.
const SUBMIT_TIMEOUT_MS: u64 = 30_000;

/// Why a sentinel (or a process acting as one) could not start, or its API server failed.
#[derive(Debug, thiserror::Error)]
pub enum SentinelError {
    #[error("the cluster file has no sentinel named '{name}'")]
    UnknownSentinel { name: String },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
    #[error("the cluster file lists an invalid issuer: {0}")]
    Issuers(#[source] IssuerKeysError),
    #[error("the cluster file's FastPay committee is invalid: {0}")]
    FastpayCommittee(#[source] InvalidTopology),
    #[error("the cluster file's privacy keys are invalid: {0}")]
    Privacy(#[source] InvalidTopology),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the API server failed: {0}")]
    Server(#[source] std::io::Error),
    #[error("threshold endorsement: {0}")]
    Endorsing(#[from] EndorsingError),
}

struct Inner {
    runtime: tokio::runtime::Handle,
    hrp: String,
    /// The cluster's identity, served at `/v1/info` (`Topology::network_id`).
    network_id: Option<String>,
    /// The offline authority's and the exchange's bridge keys, served at `/v1/info`.
    bridges: (Option<String>, Option<String>),
    issuers_hex: Vec<String>,
    trusted: TrustedKeys,
    /// The private kinds' rules, the same `trusted` holds, whose keys `/v1/info` lists.
    privacy: Arc<PrivacyRules>,
    /// `2pc` or `atomizer`: how the cluster's core orders transactions.
    shape: &'static str,
    /// The coordinator groups (2PC), or the atomizer group (the atomizer shape).
    ordering_groups: Vec<GroupClient>,
    core: CoreUhs,
    /// The archiver group, when the cluster keeps a ledger of record.
    archiver: Option<GroupClient>,
    next_ordering_group: AtomicUsize,
    request_timeout: Duration,
    /// Signs every submission, so coordinators know a sentinel validated it.
    attestation_key: secp256k1::Keypair,
    /// The sentinels' endorsement group, when the cluster requires k of them to sign.
    endorsement: Option<EndorsementClient>,
    /// Compromised (fault tests, demonstrations): passes whatever it is sent on to the group.
    compromised: bool,
}

/// The cluster seen as one node. Cheap to clone. Blocking methods must not be called on an
/// async worker thread of `runtime`.
#[derive(Clone)]
pub struct ClusterBackend {
    inner: Arc<Inner>,
}

impl ClusterBackend {
    /// The cluster as seen by sentinel `name`, with its credentials from the PKI directory
    /// (`specie demo --cluster` and the benchmarks act as a sentinel too).
    pub fn new(
        topology: &Topology,
        runtime: tokio::runtime::Handle,
        name: &str,
    ) -> Result<ClusterBackend, SentinelError> {
        let trusted = trusted_keys(topology)?;
        let endorser = (topology.endorsement.is_some())
            .then(|| endorsing::endorser_service(topology, name, trusted, false))
            .transpose()?;
        ClusterBackend::with_endorser(topology, runtime, name, endorser, false)
    }

    /// The cluster as seen by sentinel `name`, with its own endorser `endorser` (when the
    /// cluster's sentinels endorse); a `compromised` sentinel validates nothing it is sent.
    pub fn with_endorser(
        topology: &Topology,
        runtime: tokio::runtime::Handle,
        name: &str,
        endorser: Option<Arc<EndorserService>>,
        compromised: bool,
    ) -> Result<ClusterBackend, SentinelError> {
        let limits = wire_limits(topology);
        let transport = credentials::transport(topology, &Identity::sentinel(name))?;
        let attestation_key = credentials::attestation_key(topology, name)?;
        let ordering_groups = (topology.ordering_groups().iter())
            .map(|(role, group, replicas)| GroupClient::new(*role, group, replicas, &limits, &transport))
            .collect::<Result<Vec<_>, InvalidWireLimits>>()?;
        let archiver = GroupClient::archiver(topology, &limits, &transport)?;
        let privacy = Arc::new(privacy_rules(topology)?);
        let trusted = trusted_keys_with(topology, privacy.clone())?;
        let endorsement = match endorser {
            Some(local) => Some(EndorsementClient::start(topology, name, local, &transport, &runtime)?),
            None => None,
        };
        Ok(ClusterBackend {
            inner: Arc::new(Inner {
                runtime,
                hrp: topology.hrp.clone(),
                network_id: topology.network_id.clone(),
                bridges: (
                    (topology.offline_authority.as_ref()).map(|offline| offline.bridge.to_ascii_lowercase()),
                    (topology.exchange.as_ref()).map(|exchange| exchange.bridge.to_ascii_lowercase()),
                ),
                issuers_hex: topology.issuers.clone(),
                trusted,
                privacy,
                shape: topology.shape_name(),
                ordering_groups,
                core: CoreUhs::new(topology, &limits, &transport)?,
                archiver,
                next_ordering_group: AtomicUsize::new(0),
                request_timeout: Duration::from_millis(topology.limits.request_timeout_ms),
                attestation_key,
                endorsement,
                compromised,
            }),
        })
    }

    async fn shard_ids(&self) -> Result<Vec<Vec<UhsId>>, BackendError> {
        self.inner
            .core
            .all_ids()
            .await
            .map_err(|error| core_unavailable(&error))
    }

    /// The ledger of record's answer to `read`, from the archiver group's leader.
    fn ledger_read(&self, read: LedgerRead) -> Result<LedgerReply, BackendError> {
        let archiver = self.inner.archiver.as_ref().ok_or(BackendError::NoLedger)?;
        let request = RoleRequest::LedgerRead(read);
        match self
            .inner
            .runtime
            .block_on(archiver.call(&request, self.inner.request_timeout * 5))
            .map_err(|error| unavailable(archiver, error))?
        {
            RoleResponse::Ledger(reply) => match *reply {
                LedgerReply::Failed(reason) => Err(unavailable(archiver, reason)),
                reply => Ok(reply),
            },
            other => Err(unavailable(archiver, format_args!("answered {}", other_kind(&other)))),
        }
    }
}

fn core_unavailable(error: &GroupError) -> BackendError {
    BackendError::Unavailable {
        role: "the shard groups".into(),
        reason: error.to_string(),
    }
}

/// What the sentinels of `topology` trust: its issuers, the groups it banks for, its privacy keys.
fn trusted_keys(topology: &Topology) -> Result<TrustedKeys, SentinelError> {
    trusted_keys_with(topology, Arc::new(privacy_rules(topology)?))
}

/// [`trusted_keys`], with `privacy`'s rules for the private kinds (which `/v1/info` lists).
fn trusted_keys_with(topology: &Topology, privacy: Arc<PrivacyRules>) -> Result<TrustedKeys, SentinelError> {
    let issuers = IssuerKeys::from_hex(&topology.issuers).map_err(SentinelError::Issuers)?;
    let fastpay_chain = topology
        .fastpay_committee
        .as_ref()
        .map(FastpayCommitteeConfig::chain)
        .transpose()
        .map_err(SentinelError::FastpayCommittee)?;
    // The capabilities' kinds a sentinel decodes, and the rules it judges them by.
    specie_fastpay_primary::install();
    specie_private_transactions::install();
    let fastpay = fastpay_chain.map_or_else(FastpayRules::none, FastpayRules::of);
    follow_epochs(&fastpay);
    let trusted = TrustedKeys::new(issuers)
        .with_capability(Arc::new(fastpay))
        .with_capability(privacy)
        .with_offline_authority(topology.offline_authority.as_ref().and_then(|o| o.bridge_key()))
        .with_exchange(topology.exchange.as_ref().and_then(|e| e.bridge_key()));
    Ok(trusted)
}

/// Has `fastpay` learn the committee's later epochs as the cluster file gains their records
/// (`specie cluster rotate-authority`), in a process that follows its file.
fn follow_epochs(fastpay: &FastpayRules) {
    let (Some(mut changes), Ok(runtime)) = (crate::live::subscribe(), tokio::runtime::Handle::try_current()) else {
        return;
    };
    let fastpay = fastpay.clone();
    runtime.spawn(async move {
        loop {
            let records = (changes.borrow_and_update().fastpay_committee.as_ref())
                .map(|committee| committee.chain().map(|chain| chain.records().to_vec()));
            match records {
                Some(Ok(records)) => match fastpay.learn(records) {
                    Ok(true) => tracing::info!(epoch = ?fastpay.epoch(), "the FastPay committee entered a new epoch"),
                    Ok(false) => {}
                    Err(error) => tracing::warn!(%error, "a FastPay committee record in the cluster file does not follow this sentinel's epochs: ignored"),
                },
                Some(Err(error)) => tracing::warn!(%error, "the cluster file's FastPay committee records: ignored"),
                None => {}
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    });
}

/// What the sentinels of `topology` require of private transactions (none of them accepted
/// without a `[privacy]` section but confidential ones addressing no auditor).
fn privacy_rules(topology: &Topology) -> Result<PrivacyRules, SentinelError> {
    match &topology.privacy {
        Some(privacy) => privacy.rules().map_err(SentinelError::Privacy),
        None => Ok(PrivacyRules::default()),
    }
}

fn unavailable(group: &GroupClient, reason: impl std::fmt::Display) -> BackendError {
    BackendError::Unavailable {
        role: format!("group {}", group.name()),
        reason: reason.to_string(),
    }
}

impl ClusterBackend {
    /// Hands compact transactions to a coordinator group, skipping validation: only for
    /// benchmarks of the replicated 2PC engine (Hamilton §6.1 measured swap without sentinels).
    /// A cluster that keeps a ledger of record takes nothing this way: it could not be ledgered.
    pub fn submit_compact(&self, accepted: Vec<(u64, CompactTransaction)>, reply: &CompletionSender) {
        if self.inner.archiver.is_some() {
            tracing::error!("a cluster with a ledger of record takes only full transactions");
            for (client_ref, compact) in accepted {
                let _ = reply.send(Completion {
                    client_ref,
                    txid: compact.txid,
                    status: TxStatus::Dropped,
                });
            }
            return;
        }
        let (refs, compacts): (Vec<u64>, Vec<CompactTransaction>) = accepted.into_iter().unzip();
        self.submit_batch(
            refs,
            vec![],
            Submission::attest(compacts, &self.inner.attestation_key),
            reply,
        );
    }

    /// Validated transactions to a coordinator group, their records written ahead first.
    fn submit_validated(&self, accepted: Vec<(u64, SpecieTransaction, CompactTransaction)>, reply: &CompletionSender) {
        let mut refs = Vec::with_capacity(accepted.len());
        let mut records = vec![];
        let mut compacts = Vec::with_capacity(accepted.len());
        for (client_ref, tx, compact) in accepted {
            refs.push(client_ref);
            if self.inner.archiver.is_some() {
                records.push(Record::from_sentinel(tx, compact.clone()));
            }
            compacts.push(compact);
        }
        self.submit_batch(
            refs,
            records,
            Submission::attest(compacts, &self.inner.attestation_key),
            reply,
        );
    }

    fn submit_batch(&self, refs: Vec<u64>, records: Vec<Record>, submission: Submission, reply: &CompletionSender) {
        if refs.is_empty() {
            return;
        }
        let (inner, reply) = (self.inner.clone(), reply.clone());
        self.inner
            .runtime
            .spawn(async move { submit_ledgered(&inner, refs, records, submission, &reply).await });
    }

    /// Has the sentinels endorse `accepted` (k of them signing), then hands the endorsed ones to
    /// a coordinator group; the others are answered at once.
    fn endorse_and_submit(&self, group: EndorsementClient, accepted: Vec<(u64, Candidate)>, reply: &CompletionSender) {
        if accepted.is_empty() {
            return;
        }
        let (inner, reply) = (self.inner.clone(), reply.clone());
        self.inner.runtime.spawn(async move {
            let (refs, candidates): (Vec<u64>, Vec<Candidate>) = accepted.into_iter().unzip();
            let count = candidates.len();
            let replies =
                (group.endorse(candidates.clone()).await).unwrap_or_else(|| vec![EndorseReply::Failed; count]);
            let mut endorsed: Vec<(u64, Candidate, Endorsement)> = vec![];
            for ((client_ref, candidate), answer) in refs.into_iter().zip(candidates).zip(replies) {
                let status = match answer {
                    EndorseReply::Endorsed(endorsement) => {
                        endorsed.push((client_ref, candidate, endorsement));
                        continue;
                    }
                    EndorseReply::Refused { reasons } => {
                        tracing::info!(txid = %candidate.compact.txid, ?reasons, "endorsers refused a transaction");
                        TxStatus::Invalid(ValidationError::Specie(SpecieErrorCode::NotEndorsed))
                    }
                    EndorseReply::Busy => TxStatus::Busy,
                    // Nothing was signed, so nothing reaches the core.
                    EndorseReply::Failed | EndorseReply::NotLeading => TxStatus::Dropped,
                };
                let txid = candidate.compact.txid;
                let _ = reply.send(Completion {
                    client_ref,
                    txid,
                    status,
                });
            }
            if endorsed.is_empty() {
                return;
            }
            let mut refs = Vec::with_capacity(endorsed.len());
            let mut records = vec![];
            let mut submitted = Vec::with_capacity(endorsed.len());
            for (client_ref, candidate, endorsement) in endorsed {
                refs.push(client_ref);
                if inner.archiver.is_some() {
                    let tx = Arc::unwrap_or_clone(candidate.tx);
                    records.push(
                        Record::from_sentinel(tx, candidate.compact.clone()).with_endorsement(endorsement.clone()),
                    );
                }
                submitted.push((candidate.compact, endorsement));
            }
            let submission = Submission::attest_endorsed(submitted, &inner.attestation_key);
            submit_ledgered(&inner, refs, records, submission, &reply).await;
        });
    }
}

/// Writes the batch's records ahead to the ledger of record (when the cluster keeps one: a
/// transaction reaches a coordinator only once its record is durable, and the coordinator checks
/// that it is), hands the batch to an ordering group and answers its callers. What the ordering
/// group decided, it reports to the ledger itself.
async fn submit_ledgered(
    inner: &Inner,
    refs: Vec<u64>,
    records: Vec<Record>,
    submission: Submission,
    reply: &CompletionSender,
) {
    let Some(archiver) = &inner.archiver else {
        send_submission(inner, refs, submission, reply).await;
        return;
    };
    let timeout = Duration::from_millis(SUBMIT_TIMEOUT_MS);
    let written = archiver.call_once(&RoleRequest::ArchiveWrite(records), timeout).await;
    if !matches!(written, Ok(RoleResponse::Taken)) {
        let status = match written {
            Ok(RoleResponse::ArchiveBusy) | Err(GroupError::NoLeader { .. }) => TxStatus::Busy,
            other => {
                tracing::warn!(
                    ?other,
                    "ledger of record: write-ahead failed; the batch goes no further"
                );
                TxStatus::Dropped
            }
        };
        for (client_ref, tx) in refs.into_iter().zip(&submission.txs) {
            let _ = reply.send(Completion {
                client_ref,
                txid: tx.txid,
                status: status.clone(),
            });
        }
        return;
    }
    send_submission(inner, refs, submission, reply).await;
}

/// Sends one submission to the next ordering group and answers its transactions' callers.
async fn send_submission(inner: &Inner, refs: Vec<u64>, submission: Submission, reply: &CompletionSender) {
    let next = inner.next_ordering_group.fetch_add(1, Ordering::Relaxed);
    let group = &inner.ordering_groups[next % inner.ordering_groups.len()];
    let txids: Vec<_> = submission.txs.iter().map(|c| c.txid).collect();
    let count = txids.len();
    let submit = RoleRequest::Submit(submission);
    let statuses: Vec<TxStatus> = match group.call_once(&submit, Duration::from_millis(SUBMIT_TIMEOUT_MS)).await {
        Ok(RoleResponse::Submitted(outcomes)) if outcomes.len() == count => {
            outcomes.into_iter().map(TxStatus::from).collect()
        }
        Err(GroupError::NoLeader { .. }) => vec![TxStatus::Busy; count],
        other => {
            tracing::warn!(?other, "submission outcome unknown");
            vec![TxStatus::Unknown; count]
        }
    };
    for ((client_ref, txid), status) in refs.into_iter().zip(txids).zip(statuses) {
        let _ = reply.send(Completion {
            client_ref,
            txid,
            status,
        });
    }
}

impl Backend for ClusterBackend {
    /// An empty submission is answered only by a coordinator whose engine leads: it has applied
    /// its group's whole log and resumed every dtxn its predecessors left in flight.
    fn wait_for_leaders(&self, timeout: Duration) -> Result<(), BackendError> {
        let deadline = std::time::Instant::now() + timeout;
        let empty = RoleRequest::Submit(Submission::attest(vec![], &self.inner.attestation_key));
        let head = RoleRequest::LedgerRead(LedgerRead::Head);
        // Every ordering group (coordinators or the atomizer), and the archiver group when the
        // cluster keeps a ledger.
        let waits = (self.inner.ordering_groups.iter())
            .map(|group| (group, &empty, "ordering group"))
            .chain(self.inner.archiver.iter().map(|group| (group, &head, "archiver group")));
        for (group, request, what) in waits {
            loop {
                let answer = self
                    .inner
                    .runtime
                    .block_on(group.call(request, Duration::from_millis(SUBMIT_TIMEOUT_MS)));
                if matches!(answer, Ok(RoleResponse::Submitted(_) | RoleResponse::Ledger(_))) {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    return Err(BackendError::NoLeader {
                        role: format!("{what} {}", group.name()),
                        timeout_ms: timeout.as_millis() as u64,
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    fn submit(&self, txs: Vec<(u64, SpecieTransaction)>, reply: &CompletionSender) {
        let (refs, txs): (Vec<u64>, Vec<SpecieTransaction>) = txs.into_iter().unzip();
        let started = std::time::Instant::now();
        let (verdicts, kinds) = if self.inner.compromised {
            (txs.iter().map(|tx| Ok(tx.compact())).collect(), Default::default())
        } else {
            specie_sentinel::validate_batch_timed(&txs, &self.inner.trusted, &|| started.elapsed())
        };
        specie_metrics::transactions::validated(txs.len(), started.elapsed(), kinds.kinds());
        let mut accepted = vec![];
        for ((client_ref, tx), verdict) in refs.into_iter().zip(txs).zip(verdicts) {
            match verdict {
                Ok(compact) => accepted.push((client_ref, tx, compact)),
                Err(error) => {
                    let _ = reply.send(Completion {
                        client_ref,
                        txid: tx.txid(),
                        status: TxStatus::Invalid(error),
                    });
                }
            }
        }
        match &self.inner.endorsement {
            None => self.submit_validated(accepted, reply),
            Some(group) => {
                let candidates = (accepted.into_iter())
                    .map(|(r, tx, compact)| (r, Candidate::validated(tx, compact)))
                    .collect();
                self.endorse_and_submit(group.clone(), candidates, reply);
            }
        }
    }

    fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, BackendError> {
        self.inner
            .runtime
            .block_on(self.inner.core.holds(ids))
            .map_err(|error| core_unavailable(&error))
    }

    fn info(&self) -> Result<NodeInfo, BackendError> {
        let ids = self.inner.runtime.block_on(self.shard_ids())?;
        Ok(NodeInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            hrp: self.inner.hrp.clone(),
            network_id: self.inner.network_id.clone(),
            shards: self.inner.core.groups() as u64,
            issuers: self.inner.issuers_hex.clone(),
            uhs_ids: ids.iter().map(|ids| ids.len() as u64).sum(),
            auditors: self.inner.privacy.auditors.iter().map(hex::encode).collect(),
            registration_authority: (self.inner.privacy.registration_authority.as_ref())
                .map(|key| hex::encode(specie_codec::Encode::encode(key))),
            // A cluster's file names one RA; its operator keeps earlier keys for auditors.
            former_registration_authorities: vec![],
            owner_auditors: (self.inner.privacy.owner_auditors().iter())
                .map(|key| hex::encode(specie_codec::Encode::encode(key)))
                .collect(),
            active_auditors: self.inner.privacy.active_auditors.iter().map(hex::encode).collect(),
            endorsement_group_key: (self.inner.endorsement.as_ref()).map(|group| hex::encode(group.group_key().0)),
            offline_authority: self.inner.bridges.0.clone(),
            exchange: self.inner.bridges.1.clone(),
            certifiers: (self.inner.privacy.certifiers.as_ref())
                .map(|group| hex::encode(specie_codec::Encode::encode(group))),
            shape: self.inner.shape.to_string(),
        })
    }

    fn uhs_digest(&self) -> Result<(u64, [u8; 32]), BackendError> {
        // Shard groups own ascending ranges, so their sorted ids concatenate into one sorted list:
        // the same digest the embedded node computes for the same set.
        let ids = self.inner.runtime.block_on(self.shard_ids())?;
        Ok(specie_transaction::hash::uhs_digest(ids.iter().flatten()))
    }

    fn ledger_head(&self) -> Result<LedgerHead, BackendError> {
        match self.ledger_read(LedgerRead::Head)? {
            LedgerReply::Head(head) => Ok(head),
            other => Err(wrong_ledger_reply(&other)),
        }
    }

    fn ledger_supply(&self) -> Result<SupplyCut, BackendError> {
        match self.ledger_read(LedgerRead::Supply)? {
            LedgerReply::Supply(cut) => Ok(*cut),
            other => Err(wrong_ledger_reply(&other)),
        }
    }

    fn ledger_block(&self, height: u64) -> Result<Option<Block>, BackendError> {
        match self.ledger_read(LedgerRead::Block(height))? {
            LedgerReply::Block(block) => Ok(block),
            other => Err(wrong_ledger_reply(&other)),
        }
    }

    fn ledger_transaction(&self, txid: Txid) -> Result<Option<LedgerEntry>, BackendError> {
        match self.ledger_read(LedgerRead::Transaction(txid))? {
            LedgerReply::Transaction(entry) => Ok(entry.map(|entry| *entry)),
            other => Err(wrong_ledger_reply(&other)),
        }
    }

    fn ledger_dispute(&self, txid: Txid, height: Option<u64>) -> Result<Option<DisputeProof>, BackendError> {
        match self.ledger_read(LedgerRead::Dispute(txid, height))? {
            LedgerReply::Dispute(proof) => Ok(proof.map(|proof| *proof)),
            other => Err(wrong_ledger_reply(&other)),
        }
    }
}

fn wrong_ledger_reply(reply: &LedgerReply) -> BackendError {
    BackendError::Unavailable {
        role: format!("group {ARCHIVER_GROUP}"),
        reason: format!("answered another read: {reply:?}").chars().take(200).collect(),
    }
}

/// Serves this sentinel's endorser to the others, first running the key generation ceremony
/// with them if it holds no share yet (the share is kept before it endorses anything).
async fn start_endorser(
    topology: &Topology,
    sentinel: &crate::topology::Sentinel,
    compromised: bool,
) -> Result<Arc<EndorserService>, SentinelError> {
    let name = &sentinel.name;
    let address = (sentinel.endorser).ok_or_else(|| EndorsingError::NotAnEndorser { name: name.clone() })?;
    let me = Identity::sentinel(name);
    let server = Arc::new(EndorserServer::default());
    // The share, or the ceremony that makes it (its inbox open before the server starts): the
    // key generation, or the refresh the operator asked for (`cluster refresh-endorsement`).
    let refresh = credentials::refresh_marker_path(topology, name);
    let share = match credentials::endorser_keys(topology, name)? {
        Some(old) if refresh.exists() => Err((server.open_ceremony(), CeremonyKind::Refresh { old: Box::new(old) })),
        Some(keys) => Ok(keys),
        None => Err((server.open_ceremony(), CeremonyKind::Generate)),
    };
    let served = tokio::spawn(endorsing::serve_endorser(
        topology.clone(),
        me.clone(),
        address,
        server.clone(),
    ));
    let watched = name.clone();
    tokio::spawn(async move {
        if let Ok(Err(error)) = served.await {
            tracing::error!(%error, sentinel = %watched, "the endorser server stopped");
            std::process::exit(1);
        }
    });
    let keys = match share {
        Ok(keys) => keys,
        Err((inbox, kind)) => {
            let refreshing = matches!(kind, CeremonyKind::Refresh { .. });
            let what = if refreshing {
                "refresh of its share"
            } else {
                "key generation"
            };
            specie_service::announce::announce(format_args!("{name}: {what} with the other sentinels on {address}…"));
            let transport = credentials::transport(topology, &me)?;
            let keys = endorsing::generate_keys(topology, name, inbox, kind, &transport).await?;
            credentials::save_endorser_keys(topology, name, &keys, refreshing)?;
            if refreshing {
                let _ = std::fs::remove_file(&refresh);
            }
            specie_service::announce::announce(format_args!("{name}: group key {}", hex::encode(keys.group_key().0)));
            keys
        }
    };
    let service = Arc::new(EndorserService::new(keys, trusted_keys(topology)?, compromised));
    specie_service::announce::announce(format_args!("{name}: endorser {} on {address}", service.id().0));
    server.serve(service.clone());
    Ok(service)
}

/// Runs sentinel `name` (the wallets' HTTP API, and its endorser when the cluster's sentinels
/// endorse) until stopped. A `compromised` sentinel validates nothing and endorses everything:
/// only for fault tests and demonstrations of what one such sentinel can do.
pub async fn run(topology: Topology, name: String, compromised: bool) -> Result<(), SentinelError> {
    let Some(sentinel) = topology.sentinels.iter().find(|s| s.name == name).cloned() else {
        return Err(SentinelError::UnknownSentinel { name });
    };
    let runtime = tokio::runtime::Handle::current();
    let endorser = match topology.endorsement {
        Some(_) => Some(start_endorser(&topology, &sentinel, compromised).await?),
        None => None,
    };
    if compromised {
        tracing::warn!(sentinel = %name, "compromised: this sentinel validates nothing and endorses everything");
    }
    let backend = ClusterBackend::with_endorser(&topology, runtime, &name, endorser, compromised)?;
    let listener = tokio::net::TcpListener::bind(crate::host::listen_address(sentinel.http))
        .await
        .map_err(|source| SentinelError::Listen {
            address: sentinel.http,
            source,
        })?;
    specie_service::announce::announce(format_args!("{name}: API on http://{}", sentinel.http));
    specie_service::server::serve(
        listener,
        specie_api::api::router(backend),
        topology.http,
        wait_for_stop_signal(),
    )
    .await
    .map_err(SentinelError::Server)
}
