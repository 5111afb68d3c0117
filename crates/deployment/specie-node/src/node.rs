use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use specie_api::{
    Backend, BackendError, Completion, CompletionSender, NodeInfo, TxStatus, Watchtower, WATCHTOWER_CAPACITY_DEFAULT,
};
use specie_archiver::{Block, DisputeProof, LedgerEntry, LedgerHead, Record, SupplyCut};
use specie_codec::Encode;
use specie_coordinator::CoordinatorConfig;
use specie_endorsement::{BatchItem, EndorseReply, Endorsement, EndorsementVerifier, GroupKey};
use specie_fastpay::{Committee, CommitteeChain};
use specie_fastpay_primary::FastpayRules;
use specie_private_transactions::PrivacyRules;
use specie_sentinel::{IssuerKeys, IssuerKeysError, SpecieErrorCode, TrustedKeys, ValidationError};
use specie_shard::{ShardRange, ShardRangeError, ShardStateError};
use specie_transaction::{CompactTransaction, SpecieTransaction, Txid, UhsId};

use specie_atomizer::{Atomizer, AtomizerConfig, AtomizerStateError, UhsShard, UhsShardStateError};
use specie_coordinator::{Coordinator, CoordinatorState, CoordinatorStateError};
use specie_host::{EmbeddedHost, HostMessage, RecoverError};
use specie_shard::{CoordinatorIndex, Shard, ShardCall, ShardRead, ShardReply};

use specie_metrics::role::{Published, RoleFamily};

use crate::archive::{AfterWrite, Archive, ArchiveError, ArchiveMessage, ArchiveOptions};
use crate::endorsement::{Candidate, EndorsementGroup, EndorsementHandle, EndorsementOptions};
use crate::manifest::CoreShape;
use crate::manifest::{NodeManifest, NodeManifestError};
use crate::wiring::{OrdererWiring, ShardInboxes, ShardWiring, SubmissionMessage, UhsShardCall, UhsShardWiring};
use specie_archiver::{LedgerRead, LedgerReply};

/// How a node is started. Shard count and address prefix apply only when the data directory is
/// new; afterwards its manifest (`node.toml`) is authoritative.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub data_dir: PathBuf,
    pub shards: Option<usize>,
    pub hrp: Option<String>,
    /// Issuer x-only public keys (hex) to trust in addition to those in the manifest.
    pub issuers: Vec<String>,
    /// The FastPay committee this node is the Primary of: fundings to it and redeems of its
    /// certificates are valid. `None`: every FastPay funding and redeem is invalid
    /// (`no_fastpay_committee`). Kept in `node.toml` (`[settings]`); a node should keep the same
    /// committee for its life (committee changes are not built, and redeem markers name an
    /// account and sequence number, not a committee).
    pub fastpay_committee: Option<Committee>,
    /// The offline authority's bridge key this node banks for: bridge fundings to it and its
    /// signed payouts are valid. `None`: both are invalid (`no_offline_authority`). Given at
    /// every start, like the committee.
    pub offline_authority: Option<[u8; 32]>,
    /// The exchange's bridge key this node banks for: deposits to the exchange and its signed
    /// withdrawals are valid (the same two kinds as the offline authority's). Kept in node.toml.
    pub exchange: Option<[u8; 32]>,
    pub batch_transactions_max: usize,
    pub dtxns_in_flight_max: usize,
    /// Submissions waiting for a dtxn beyond this are answered `Busy`.
    pub queue_transactions_max: usize,
    /// A role snapshots its state and drops its old log once the log grows past this.
    pub snapshot_log_bytes: u64,
    /// Off only for benchmarks that measure everything but the disk.
    pub fsync: bool,
    /// The auditors with jurisdiction (compressed Ristretto keys): every confidential
    /// transaction must give each of them its values. Kept in node.toml.
    pub auditors: Vec<[u8; 32]>,
    /// The registration authority whose credentials authorise anonymous spends. `None`: every
    /// anonymous transaction is refused (`no_registration_authority`). Kept in node.toml.
    pub registration_authority: Option<specie_credential::RaPublicKey>,
    /// The owner auditors with jurisdiction: every anonymous transaction must give each of them
    /// every owner it names. Kept in node.toml.
    pub owner_auditors: Vec<specie_credential::AuditorKey>,
    /// The certifier group whose certificates unlinkable spends prove (docs/unlinkable-format.md).
    /// `None`: every unlinkable transaction is refused (`no_certifiers`). Kept in node.toml.
    pub certifiers: Option<specie_credential::unlinkable::CertifierGroup>,
    /// The active auditors (x-only BIP-340 keys): every private transaction must carry each
    /// one's co-signature. Kept in node.toml.
    pub active_auditors: Vec<[u8; 32]>,
    /// Threshold endorsement: a transaction reaches the coordinator only endorsed by k of n
    /// endorsers (each running the sentinel's checks). `None`: the node's sentinel validates
    /// alone. Kept in node.toml with its seed (the same seed keeps the same group key).
    pub endorsement: Option<EndorsementOptions>,
    /// Whether the node keeps the ledger of record (`<data dir>/ledger`): every confirmed
    /// transaction, in hash-chained blocks. Applies only when the data directory is new (the
    /// ledger must start at genesis to replay to the UHS); `None` means on for a new directory
    /// and whatever `node.toml` says for an existing one.
    pub ledger_of_record: Option<bool>,
    /// The core's shape: two-phase commit, or an atomizer ordering every transaction into
    /// blocks. Applies only when the data directory is new (`None`: two-phase commit).
    pub shape: Option<CoreShape>,
    /// Coordinators of the 2PC shape, each on its own thread and log; submissions go to them in
    /// turn. `None`: what the directory has, or for a new one one per 8 cores (at most one per
    /// shard). May grow between starts, never shrink. Kept in node.toml.
    pub coordinators: Option<usize>,
    /// Whether the keys given replace those `node.toml` keeps, and which kept ones to drop
    /// (`crate::settings`). By default a key other than the kept one is refused.
    pub settings_change: crate::settings::SettingsChange,
}

impl NodeOptions {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        NodeOptions {
            data_dir: data_dir.into(),
            shards: None,
            hrp: None,
            issuers: vec![],
            fastpay_committee: None,
            offline_authority: None,
            exchange: None,
            batch_transactions_max: 2000,
            dtxns_in_flight_max: 4,
            queue_transactions_max: 200_000,
            snapshot_log_bytes: 256 * 1024 * 1024,
            fsync: true,
            ledger_of_record: None,
            shape: None,
            coordinators: None,
            settings_change: Default::default(),
            auditors: vec![],
            registration_authority: None,
            owner_auditors: vec![],
            certifiers: None,
            active_auditors: vec![],
            endorsement: None,
        }
    }

    /// The coordinator's configuration over `ranges`, with these options' limits.
    pub fn coordinator_config(&self, ranges: Vec<ShardRange>) -> CoordinatorConfig {
        let mut config = CoordinatorConfig::with_shards(ranges);
        config.batch_transactions_max = self.batch_transactions_max;
        config.dtxns_in_flight_max = self.dtxns_in_flight_max;
        config.queue_transactions_max = self.queue_transactions_max.max(self.batch_transactions_max);
        config
    }
}

/// Why an embedded node could not open its data directory or start its roles.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another process holds the data directory (or cannot be told apart from one: an
    /// instance in this process that did not let go within [`specie_log::dir_lock::RESTART_WAIT_MS`]).
    #[error(transparent)]
    Locked(#[from] specie_log::DirLockError),
    #[error(transparent)]
    Manifest(#[from] NodeManifestError),
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error("node.toml lists an invalid issuer key: {0}")]
    Issuers(#[source] IssuerKeysError),
    #[error(transparent)]
    Shards(#[from] ShardRangeError),
    #[error(transparent)]
    RecoverShard(#[from] RecoverError<ShardStateError>),
    #[error(transparent)]
    RecoverCoordinator(#[from] RecoverError<CoordinatorStateError>),
    #[error(transparent)]
    RecoverAtomizer(#[from] RecoverError<AtomizerStateError>),
    #[error(transparent)]
    RecoverUhsShard(#[from] RecoverError<UhsShardStateError>),
    #[error("the shards had not caught up with the atomizer's {height} blocks after {limit_ms} ms")]
    CatchUpStalled { height: u64, limit_ms: u64 },
    #[error("cannot start the {name} thread: {source}")]
    Thread {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{dtxns} dtxns resumed from the log were still unfinished after {limit_ms} ms")]
    ResumeStalled { dtxns: usize, limit_ms: u64 },
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("cannot form the endorsement group: {0}")]
    Endorsement(#[from] specie_endorsement::KeyError),
    #[error("the ledger of record replays to {ledger_ids} UHS ids (digest {ledger_digest}) but the shards hold {shard_ids} (digest {shard_digest}): one of them lost or invented a transaction")]
    LedgerDiverged {
        ledger_ids: u64,
        ledger_digest: String,
        shard_ids: u64,
        shard_digest: String,
    },
}

/// Endorsed batches whose signature the core's gate keeps as checked (each batch's signature is
/// verified once, then only each transaction's path).
const VERIFIED_BATCHES_CACHED: usize = 4096;

/// How long opening may spend finishing the dtxns that were in flight at the last stop. Local
/// shards answer in microseconds; running out means a shard is wedged, not slow.
const RESUME_LIMIT_MS: u64 = 30_000;

/// Opens the ledger of record once the coordinator has finished every dtxn in flight, and
/// checks it against the shards: with nothing waiting for a block, the blocks must replay to
/// exactly the UHS the shards hold.
fn open_archive(handle: &NodeHandle, options: ArchiveOptions) -> Result<Archive, OpenError> {
    let archive = Archive::open(options, |ids| handle.query_uhs(ids).map_err(|error| error.to_string()))?;
    if archive.ledger().waiting() == 0 {
        let (ledger_ids, ledger_digest) = archive.ledger().uhs_digest();
        let (shard_ids, shard_digest) = handle
            .uhs_digest()
            .map_err(|error| ArchiveError::Uhs(error.to_string()))?;
        if (ledger_ids, ledger_digest) != (shard_ids, shard_digest) {
            return Err(OpenError::LedgerDiverged {
                ledger_ids,
                ledger_digest: hex::encode(ledger_digest),
                shard_ids,
                shard_digest: hex::encode(shard_digest),
            });
        }
    } else {
        tracing::error!(
            waiting = archive.ledger().waiting(),
            "ledger of record: confirmed transactions spend outputs no block creates"
        );
    }
    Ok(archive)
}

/// Where the callers of each shard put their calls, in shard order.
type Inboxes<C, T> = Vec<Sender<HostMessage<C, T>>>;

/// The core's threads, its shards' inboxes, its orderers' submission channels and what they
/// publish of their metric families.
type StartedCore = (
    Vec<JoinHandle<()>>,
    ShardInboxes,
    Vec<Sender<SubmissionMessage>>,
    Vec<Published>,
);

/// What starting the core, in either shape, needs.
struct CoreStart<'a> {
    options: &'a NodeOptions,
    ranges: &'a [ShardRange],
    log_options: specie_log::LogOptions,
    archive: Option<Sender<ArchiveMessage>>,
    watchtower: Arc<Mutex<Watchtower>>,
}

impl CoreStart<'_> {
    /// Recovers `role` from its log in `<data dir>/<dir>`.
    fn recover<R: specie_role::Durable, W: specie_host::Wiring<R>>(
        &self,
        name: String,
        dir: &str,
        role: R,
        wiring: W,
    ) -> Result<EmbeddedHost<R, W>, RecoverError<R::StateError>> {
        let path = self.options.data_dir.join(dir);
        EmbeddedHost::recover(
            name,
            role,
            wiring,
            &path,
            self.log_options.clone(),
            self.options.snapshot_log_bytes,
        )
    }

    /// Recovers one shard per range from `<data dir>/<dir>-<index>` and starts its thread; their
    /// inboxes, in shard order.
    fn start_shards<R, W>(
        &self,
        dir: &str,
        role: impl Fn(ShardRange) -> R,
        wiring: impl Fn(usize) -> W,
        threads: &mut Vec<JoinHandle<()>>,
    ) -> Result<Inboxes<W::Call, W::ReplyTo>, OpenError>
    where
        R: specie_role::Durable + Send + 'static,
        R::Input: Send,
        W: specie_host::Wiring<R> + Send + 'static,
        OpenError: From<RecoverError<R::StateError>>,
    {
        let mut inboxes = vec![];
        for (index, range) in self.ranges.iter().enumerate() {
            let host = self.recover(
                format!("{dir} {index}"),
                &format!("{dir}-{index}"),
                role(*range),
                wiring(index),
            )?;
            let (inbox_tx, inbox_rx) = unbounded();
            threads.push(spawn(format!("shard-{index}"), move || {
                host.run(inbox_rx, crossbeam_channel::never());
            })?);
            inboxes.push(inbox_tx);
        }
        Ok(inboxes)
    }

    /// Two-phase commit: the shards and the coordinators, each of which first finishes every
    /// dtxn that was in flight at the last stop.
    fn two_phase_commit(self, coordinators: usize) -> Result<StartedCore, OpenError> {
        let (answers, answers_rx): (Vec<_>, Vec<_>) = (0..coordinators).map(|_| unbounded()).unzip();
        let mut threads = vec![];
        let wiring = |index| ShardWiring::new(index, answers.clone());
        let inboxes = self.start_shards("shard", Shard::empty, wiring, &mut threads)?;
        let (mut submissions, mut gauges) = (vec![], vec![]);
        for (index, answers_rx) in answers_rx.into_iter().enumerate() {
            let coordinator_index = CoordinatorIndex::try_from(index).expect("at most COORDINATORS_MAX coordinators");
            let wiring = OrdererWiring::<ShardCall>::new(
                coordinator_index,
                inboxes.clone(),
                self.archive.clone(),
                self.watchtower.clone(),
            );
            gauges.push(wiring.gauges.clone());
            let config = self.options.coordinator_config(self.ranges.to_vec());
            let coordinator = Coordinator::new(config, CoordinatorState::default());
            // The first keeps the directory name of the days of one coordinator.
            let (name, dir) = match index {
                0 => ("coordinator".to_string(), "coordinator".to_string()),
                _ => (format!("coordinator-{index}"), format!("coordinator-{index}")),
            };
            let mut host = self.recover(name.clone(), &dir, coordinator, wiring)?;
            let resumed = host.role().state().active().len();
            if resumed > 0 {
                tracing::info!(
                    coordinator = index,
                    dtxns = resumed,
                    "finishing dtxns that were in flight"
                );
                // Before anyone is served: a reader must never see a resumed dtxn land under its feet.
                let finished = host.run_inputs_until(&answers_rx, |c| c.state().active().is_empty(), RESUME_LIMIT_MS);
                if !finished {
                    return Err(OpenError::ResumeStalled {
                        dtxns: host.role().state().active().len(),
                        limit_ms: RESUME_LIMIT_MS,
                    });
                }
            }
            submissions.push(serve_orderer(&name, host, answers_rx, &mut threads)?);
        }
        Ok((threads, ShardInboxes::TwoPhaseCommit(inboxes), submissions, gauges))
    }

    /// The atomizer shape: the shards and the atomizer, which first brings every shard up to
    /// its last block (a shard may have stopped before making the newest ones durable).
    fn atomizer(self) -> Result<StartedCore, OpenError> {
        let (answers_tx, answers_rx) = unbounded();
        let mut threads = vec![];
        let wiring = |index| UhsShardWiring {
            index,
            atomizer: answers_tx.clone(),
            answers: vec![],
        };
        let inboxes = self.start_shards("atomizer-shard", UhsShard::new, wiring, &mut threads)?;
        let mut config = AtomizerConfig::with_shards(self.ranges.to_vec());
        config.block_transactions_max = self.options.batch_transactions_max;
        config.queue_transactions_max = self.options.queue_transactions_max.max(config.block_transactions_max);
        let wiring =
            OrdererWiring::<UhsShardCall>::new(0, inboxes.clone(), self.archive.clone(), self.watchtower.clone());
        let gauges = vec![wiring.gauges.clone()];
        let mut host = self.recover("atomizer".into(), "atomizer", Atomizer::new(config), wiring)?;
        // Before anyone is served: a reader must see every block the atomizer made durable.
        if !host.run_inputs_until(&answers_rx, Atomizer::shards_caught_up, RESUME_LIMIT_MS) {
            return Err(OpenError::CatchUpStalled {
                height: host.role().height(),
                limit_ms: RESUME_LIMIT_MS,
            });
        }
        let submissions = serve_orderer("atomizer", host, answers_rx, &mut threads)?;
        Ok((threads, ShardInboxes::Atomizer(inboxes), vec![submissions], gauges))
    }
}

/// Starts the thread of the role that orders transactions; its submission channel.
fn serve_orderer<R, W>(
    name: &str,
    host: EmbeddedHost<R, W>,
    answers: Receiver<Vec<R::Input>>,
    threads: &mut Vec<JoinHandle<()>>,
) -> Result<Sender<SubmissionMessage>, OpenError>
where
    R: specie_role::Durable + Send + 'static,
    R::Input: Send,
    W: specie_host::Wiring<R, Call = CompactTransaction, ReplyTo = (u64, CompletionSender)> + Send + 'static,
{
    // Bounded: when the orderer falls behind, submitters wait here (backpressure).
    let (submissions_tx, submissions_rx) = bounded(1024);
    threads.push(spawn(name.into(), move || {
        host.run(submissions_rx, answers);
    })?);
    Ok(submissions_tx)
}

/// Starts the thread `name` running `run`.
fn spawn(name: String, run: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, OpenError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(run)
        .map_err(|source| OpenError::Thread { name, source })
}

/// What this node's sentinel trusts: `issuers`, the bridges and the capabilities' kinds, whose
/// decoders it installs (the private kinds' keys also returned, for `info` to list).
fn trusted_keys(issuers: IssuerKeys, options: &NodeOptions) -> (TrustedKeys, Arc<PrivacyRules>) {
    specie_fastpay_primary::install();
    specie_private_transactions::install();
    let fastpay = (options.fastpay_committee.clone()).map_or_else(FastpayRules::none, |committee| {
        FastpayRules::of(CommitteeChain::new(committee))
    });
    let mut privacy = PrivacyRules::new(
        options.auditors.clone(),
        options.registration_authority.clone(),
        options.owner_auditors.clone(),
        options.active_auditors.clone(),
    );
    privacy.certifiers = options.certifiers.clone();
    let privacy = Arc::new(privacy);
    let trusted = TrustedKeys::new(issuers)
        .with_capability(Arc::new(fastpay))
        .with_capability(privacy.clone())
        .with_offline_authority(options.offline_authority)
        .with_exchange(options.exchange);
    (trusted, privacy)
}

struct Shared {
    manifest: NodeManifest,
    /// The endorsement group, and the core's check of what it signs, if the node requires
    /// threshold endorsement.
    endorsement: Option<(EndorsementHandle, Mutex<EndorsementVerifier>)>,
    /// The archiver's inbox, if the node keeps the ledger of record.
    archive: Option<Sender<ArchiveMessage>>,
    /// What the archiver last published of the ledger's metric families (none without it).
    ledger_gauges: Published,
    /// What each orderer (each coordinator, or the atomizer) last published of its families.
    orderer_gauges: Vec<Published>,
    /// Recent outcomes, for clients that lost theirs (Hamilton's watchtower).
    watchtower: Arc<Mutex<Watchtower>>,
    trusted: TrustedKeys,
    /// The private kinds' keys, as `trusted` holds them, for `info` to list.
    privacy: Arc<PrivacyRules>,
    ranges: Vec<ShardRange>,
    /// The orderers' inboxes: the coordinators (batches go to them in turn), or the atomizer.
    submissions: Vec<Sender<SubmissionMessage>>,
    /// Which orderer the next batch goes to.
    next_orderer: std::sync::atomic::AtomicUsize,
    shards: ShardInboxes,
    /// One place per write-ahead batch in the archiver's hands ([`WRITE_AHEADS_IN_FLIGHT_MAX`]).
    write_aheads: (Sender<()>, Receiver<()>),
}

/// A cheap, cloneable way in: submit transactions, query the UHS.
#[derive(Clone)]
pub struct NodeHandle {
    shared: Arc<Shared>,
}

/// A running embedded node. Dropping it stops its threads (after they finish the batch at hand).
pub struct EmbeddedNode {
    handle: NodeHandle,
    threads: Vec<JoinHandle<()>>,
    /// The data directory's lock (`<data dir>/LOCK`), held until the threads above have stopped:
    /// a field after them, and `Drop` joins them first.
    _lock: specie_log::DirLock,
}

impl EmbeddedNode {
    /// Opens (or creates) and locks the data directory, recovers every role from its snapshot
    /// and log, and starts the drivers. The coordinator resumes any dtxn that was in flight at
    /// the last stop. A directory another process holds is refused; one that a node of this
    /// process is still letting go of is waited for, briefly.
    pub fn open(mut options: NodeOptions) -> Result<EmbeddedNode, OpenError> {
        let lock = specie_log::DirLock::acquire(&options.data_dir, specie_log::dir_lock::RESTART_WAIT_MS)?;
        let created = !options.data_dir.join(crate::manifest::MANIFEST_FILE).exists();
        if let Some(requested) = options.coordinators {
            // Before node.toml is written: a refused start leaves no directory half made.
            crate::manifest::check_coordinators(&options.data_dir, requested, options.shape.unwrap_or_default())?;
        }
        let mut manifest = NodeManifest::load_or_create(
            &options.data_dir,
            options.shards,
            options.hrp.as_deref(),
            &options.issuers,
            options.ledger_of_record,
            options.shape,
        )?;
        manifest.keep_settings(&options.data_dir.clone(), &mut options)?;
        manifest.settle_coordinators(&options.data_dir, options.coordinators, created)?;
        let issuers = IssuerKeys::from_hex(&manifest.issuers).map_err(OpenError::Issuers)?;
        let ranges = ShardRange::partition(manifest.shards)?;
        let log_options = specie_log::LogOptions {
            record_bytes_max: 256 * 1024 * 1024,
            sync: if options.fsync {
                specie_log::SyncMode::Fsync
            } else {
                specie_log::SyncMode::None
            },
            ..specie_log::LogOptions::default()
        };
        let archive_options = ArchiveOptions::new(&options.data_dir, log_options.sync);

        let (archive_tx, archive_rx) = unbounded();
        let archive_tx = manifest.ledger_of_record.then_some(archive_tx);
        let watchtower = Arc::new(Mutex::new(Watchtower::new(WATCHTOWER_CAPACITY_DEFAULT)));
        let core = CoreStart {
            options: &options,
            ranges: &ranges,
            log_options,
            archive: archive_tx.clone(),
            watchtower: watchtower.clone(),
        };
        let (mut threads, shard_inboxes, submissions_tx, orderer_gauges) = match manifest.shape {
            CoreShape::TwoPhaseCommit => core.two_phase_commit(manifest.coordinators)?,
            CoreShape::Atomizer => core.atomizer()?,
        };

        let (trusted, privacy) = trusted_keys(issuers, &options);
        let endorsement = match &options.endorsement {
            Some(endorsement_options) => {
                let (group, handle, inbox) = EndorsementGroup::new(endorsement_options, trusted.clone())?;
                threads.push(spawn("endorsement".into(), move || group.run(inbox))?);
                let verifier = EndorsementVerifier::new(&handle.group_key(), VERIFIED_BATCHES_CACHED)
                    .map_err(|_| specie_endorsement::KeyError::BadGroupKey)?;
                Some((handle, Mutex::new(verifier)))
            }
            None => None,
        };
        let shared = Shared {
            endorsement,
            archive: archive_tx,
            ledger_gauges: Default::default(),
            orderer_gauges,
            watchtower,
            manifest,
            trusted,
            privacy,
            ranges,
            submissions: submissions_tx,
            next_orderer: Default::default(),
            shards: shard_inboxes,
            write_aheads: bounded(WRITE_AHEADS_IN_FLIGHT_MAX),
        };
        let handle = NodeHandle {
            shared: Arc::new(shared),
        };
        // Built before the archive opens, so that a failure there stops the roles again.
        let mut node = EmbeddedNode {
            handle,
            threads,
            _lock: lock,
        };
        if node.handle.shared.manifest.ledger_of_record {
            let archive = open_archive(&node.handle, archive_options)?;
            let published = node.handle.shared.ledger_gauges.clone();
            node.threads
                .push(spawn("archiver".into(), move || archive.run(archive_rx, &published))?);
        }
        Ok(node)
    }

    pub fn handle(&self) -> NodeHandle {
        self.handle.clone()
    }

    /// Stops the drivers and waits for them. Everything reported confirmed is already durable.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        for submissions in &self.handle.shared.submissions {
            let _ = submissions.send(HostMessage::Stop);
        }
        if let Some((endorsement, _)) = &self.handle.shared.endorsement {
            endorsement.stop();
        }
        if let Some(archive) = &self.handle.shared.archive {
            let _ = archive.send(ArchiveMessage::Stop);
        }
        self.handle.shared.shards.stop();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for EmbeddedNode {
    fn drop(&mut self) {
        self.stop();
    }
}

impl NodeHandle {
    pub fn manifest(&self) -> &NodeManifest {
        &self.shared.manifest
    }

    /// What the node's roles hold, as their metric families, as their threads last published
    /// them: the orderers' (summed over the coordinators: the node's queue and dtxns in flight
    /// beside its limits) and the ledger of record's (none without it).
    pub fn role_gauges(&self) -> Vec<(RoleFamily, f64)> {
        let mut gauges: Vec<(RoleFamily, f64)> = vec![];
        for (family, value) in self.shared.orderer_gauges.iter().flat_map(Published::read) {
            match gauges.iter_mut().find(|(seen, _)| *seen == family) {
                Some((_, sum)) => *sum += value,
                None => gauges.push((family, value)),
            }
        }
        gauges.extend(self.shared.ledger_gauges.read());
        gauges
    }

    /// Validates `txs` in parallel on all cores (the sentinel), answers invalid ones at once, and
    /// hands the valid ones to the coordinator. Each gets exactly one [`Completion`] on `reply`.
    /// Blocks while the coordinator's inbox is full.
    pub fn submit(&self, txs: Vec<(u64, SpecieTransaction)>, reply: &CompletionSender) {
        if txs.is_empty() {
            return;
        }
        if let Some((endorsement, _)) = &self.shared.endorsement {
            return self.submit_through_endorsers(endorsement, txs, reply);
        }
        let (refs, txs): (Vec<u64>, Vec<SpecieTransaction>) = txs.into_iter().unzip();
        let started = std::time::Instant::now();
        let clock = || started.elapsed();
        let (verdicts, kinds) = specie_sentinel::validate_batch_timed(&txs, &self.shared.trusted, &clock);
        specie_metrics::transactions::validated(txs.len(), started.elapsed(), kinds.kinds());
        let mut accepted = Vec::with_capacity(txs.len());
        let mut records = vec![];
        let mut refused = vec![];
        for ((client_ref, tx), verdict) in refs.into_iter().zip(txs).zip(verdicts) {
            match verdict {
                Ok(compact) => {
                    if self.shared.archive.is_some() {
                        records.push(Record::from_sentinel(tx, compact.clone()));
                    }
                    accepted.push((compact, (client_ref, reply.clone())));
                }
                Err(error) => refused.push(Completion {
                    client_ref,
                    txid: tx.txid(),
                    status: TxStatus::Invalid(error),
                }),
            }
        }
        self.answer_now(refused, reply);
        if !records.is_empty() {
            return self.write_ahead_then_forward(records, accepted);
        }
        self.forward(accepted);
    }

    /// Has the endorsement group endorse `txs` (each endorser validates them), answers the ones
    /// it refuses, and admits the endorsed ones through the core's gate.
    fn submit_through_endorsers(
        &self,
        endorsement: &EndorsementHandle,
        txs: Vec<(u64, SpecieTransaction)>,
        reply: &CompletionSender,
    ) {
        let (refs, candidates): (Vec<u64>, Vec<Candidate>) = txs
            .into_iter()
            .map(|(client_ref, tx)| (client_ref, Candidate::new(tx)))
            .unzip();
        let Some(replies) = endorsement.endorse(candidates.clone()) else {
            let lost = candidates
                .into_iter()
                .zip(refs)
                .map(|(c, r)| (c.compact, (r, reply.clone())));
            return drop_all(lost.collect());
        };
        let mut endorsed = vec![];
        let mut refused = vec![];
        for ((client_ref, candidate), endorse_reply) in refs.into_iter().zip(candidates).zip(replies) {
            let status = match endorse_reply {
                EndorseReply::Endorsed(proof) => {
                    endorsed.push((client_ref, candidate, proof));
                    continue;
                }
                // The reason of the first honest endorser that refused it.
                EndorseReply::Refused { reasons } => TxStatus::Invalid(
                    reasons
                        .first()
                        .map_or(ValidationError::Specie(SpecieErrorCode::NotEndorsed), |(_, r)| {
                            r.clone()
                        }),
                ),
                EndorseReply::Busy => TxStatus::Busy,
                EndorseReply::Failed | EndorseReply::NotLeading => TxStatus::Dropped,
            };
            refused.push(Completion {
                client_ref,
                txid: candidate.compact.txid,
                status,
            });
        }
        self.answer_now(refused, reply);
        self.admit_endorsed(endorsed, reply);
    }

    /// The core's gate for endorsed transactions: each is admitted only if its endorsement
    /// verifies under the group key for its own digest; any other is `not_endorsed`. A node
    /// without an endorsement group admits none this way.
    pub fn submit_endorsed(&self, txs: Vec<(u64, SpecieTransaction, Endorsement)>, reply: &CompletionSender) {
        let items = txs
            .into_iter()
            .map(|(client_ref, tx, proof)| (client_ref, Candidate::new(tx), proof))
            .collect();
        self.admit_endorsed(items, reply);
    }

    fn admit_endorsed(&self, items: Vec<(u64, Candidate, Endorsement)>, reply: &CompletionSender) {
        let mut accepted = Vec::with_capacity(items.len());
        let mut records = vec![];
        // Locked once per batch, not per transaction: a batch's signature is checked once anyway.
        let mut verifier = self
            .shared
            .endorsement
            .as_ref()
            .map(|(_, verifier)| verifier.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let mut refused = vec![];
        for (client_ref, candidate, proof) in items {
            let verified = verifier
                .as_mut()
                .is_some_and(|verifier| verifier.verify(&proof, &candidate.digest()).is_ok());
            if !verified {
                refused.push(Completion {
                    client_ref,
                    txid: candidate.compact.txid,
                    status: TxStatus::Invalid(ValidationError::Specie(SpecieErrorCode::NotEndorsed)),
                });
                continue;
            }
            if self.shared.archive.is_some() {
                let tx = Arc::unwrap_or_clone(candidate.tx.clone());
                records.push(Record::from_sentinel(tx, candidate.compact.clone()).with_endorsement(proof));
            }
            accepted.push((candidate.compact, (client_ref, reply.clone())));
        }
        drop(verifier);
        self.answer_now(refused, reply);
        if !records.is_empty() {
            return self.write_ahead_then_forward(records, accepted);
        }
        self.forward(accepted);
    }

    /// Answers transactions refused before the core saw them, and tells the watchtower.
    fn answer_now(&self, refused: Vec<Completion>, reply: &CompletionSender) {
        if refused.is_empty() {
            return;
        }
        let mut watchtower = self
            .shared
            .watchtower
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for completion in refused {
            watchtower.record(completion.txid, completion.status.clone());
            let _ = reply.send(completion);
        }
    }

    /// The watchtower's outcome of `txid`, if this node decided it recently.
    pub fn transaction_status(&self, txid: Txid) -> Option<TxStatus> {
        let watchtower = self
            .shared
            .watchtower
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        watchtower.status(&txid).cloned()
    }

    /// The endorsers' group key, if the node requires threshold endorsement.
    pub fn endorsement_group_key(&self) -> Option<GroupKey> {
        self.shared.endorsement.as_ref().map(|(handle, _)| handle.group_key())
    }

    /// Makes the records durable in the ledger of record's pending log before the coordinator
    /// sees their transactions, so a transaction the shards commit is never missing from the
    /// ledger; then the archiver's thread hands `accepted` to the coordinator (or answers each
    /// `dropped` if the records could not be written). Returns without waiting for the fsync,
    /// once one of [`WRITE_AHEADS_IN_FLIGHT_MAX`] places is free (backpressure).
    fn write_ahead_then_forward(&self, records: Vec<Record>, accepted: Vec<Admitted>) {
        let archive = self
            .shared
            .archive
            .as_ref()
            .expect("records are made only for an archive");
        if self.shared.write_aheads.0.send(()).is_err() {
            return drop_all(accepted);
        }
        let waiting = AwaitingRecords {
            accepted,
            submissions: self.next_orderer().clone(),
            place: self.shared.write_aheads.1.clone(),
        };
        let then: AfterWrite = Box::new(move |durable| waiting.release(durable));
        // If the archiver has stopped, the message comes back and dropping it answers all.
        let _ = archive.send(ArchiveMessage::WriteAhead { records, then });
    }

    /// Hands compact transactions straight to the coordinator, skipping the sentinel. Only for
    /// benchmarks of the 2PC engine (Hamilton §6.1 measured swap without sentinels) and trusted
    /// tooling: nothing here checks signatures or balances.
    /// With the ledger of record on, every one is dropped: the ledger keeps full transactions,
    /// and a compact one bypassing it would leave it unable to replay to the UHS.
    pub fn submit_compact(&self, txs: Vec<(u64, CompactTransaction)>, reply: &CompletionSender) {
        let accepted = txs
            .into_iter()
            .map(|(client_ref, compact)| (compact, (client_ref, reply.clone())))
            .collect();
        if self.shared.archive.is_some() {
            tracing::warn!("compact transactions refused: this node keeps the ledger of record");
            drop_all(accepted);
            return;
        }
        self.forward(accepted);
    }

    fn forward(&self, accepted: Vec<Admitted>) {
        forward_to(self.next_orderer(), accepted);
    }

    /// The orderer the next batch goes to: the coordinators in turn (any coordinator may run
    /// any transaction; two that conflict are both refused and the wallet retries, Hamilton
    /// §4.1), or the atomizer.
    fn next_orderer(&self) -> &Sender<SubmissionMessage> {
        let submissions = &self.shared.submissions;
        let turn = self
            .shared
            .next_orderer
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &submissions[turn % submissions.len()]
    }

    /// Asks shard `shard` to read the UHS; the answer, on the returned channel, comes after every
    /// request sent to the shard before it.
    fn ask(&self, shard: usize, read: ShardRead) -> Result<Receiver<ShardReply>, BackendError> {
        let (tx, rx) = bounded(1);
        if !self.shared.shards.read(shard, read, tx) {
            return Err(BackendError::Stopping);
        }
        Ok(rx)
    }

    /// Whether each id is in the UHS now. Answered by the owning shards after every request they
    /// have already received, so a transaction reported confirmed is visible here.
    pub fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, BackendError> {
        let ranges = &self.shared.ranges;
        let mut by_shard: Vec<Vec<(usize, UhsId)>> = vec![vec![]; ranges.len()];
        for (position, id) in ids.iter().enumerate() {
            by_shard[ShardRange::owner(ranges, id)].push((position, *id));
        }
        let mut present = vec![false; ids.len()];
        let mut waiting = vec![];
        for (shard, asked) in by_shard.into_iter().enumerate().filter(|(_, asked)| !asked.is_empty()) {
            let (positions, shard_ids): (Vec<usize>, Vec<UhsId>) = asked.into_iter().unzip();
            waiting.push((positions, self.ask(shard, ShardRead::Contains(shard_ids))?));
        }
        for (positions, rx) in waiting {
            let Ok(ShardReply::Contains(answers)) = rx.recv() else {
                return Err(BackendError::Stopping);
            };
            for (position, answer) in positions.into_iter().zip(answers) {
                present[position] = answer;
            }
        }
        Ok(present)
    }

    pub fn info(&self) -> Result<NodeInfo, BackendError> {
        let mut uhs_ids = 0;
        for shard in 0..self.shared.shards.len() {
            let Ok(ShardReply::Stats(stats)) = self.ask(shard, ShardRead::Stats)?.recv() else {
                return Err(BackendError::Stopping);
            };
            uhs_ids += stats.uhs_ids;
        }
        let manifest = &self.shared.manifest;
        Ok(NodeInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            hrp: manifest.hrp.clone(),
            network_id: Some(manifest.network_id.clone()),
            shards: manifest.shards as u64,
            issuers: manifest.issuers.clone(),
            uhs_ids,
            auditors: self.shared.privacy.auditors.iter().map(hex::encode).collect(),
            active_auditors: self.shared.privacy.active_auditors.iter().map(hex::encode).collect(),
            registration_authority: (self.shared.privacy.registration_authority.as_ref())
                .map(|key| hex::encode(key.encode())),
            former_registration_authorities: manifest.settings.former_registration_authorities.clone(),
            owner_auditors: (self.shared.privacy.owner_auditors().iter())
                .map(|key| hex::encode(key.encode()))
                .collect(),
            endorsement_group_key: self.endorsement_group_key().map(|key| hex::encode(key.0)),
            offline_authority: manifest.settings.offline_authority.clone(),
            exchange: manifest.settings.exchange.clone(),
            certifiers: manifest.settings.certifiers.clone(),
            shape: manifest.shape.name().to_string(),
        })
    }

    /// SHA-256 over every UHS id in ascending order, and their count: equal digests mean equal
    /// sets, so replicas and restarts can be compared without shipping the set.
    pub fn uhs_digest(&self) -> Result<(u64, [u8; 32]), BackendError> {
        // Shards own ascending ranges, so concatenating their sorted ids is globally sorted.
        let mut all = vec![];
        for shard in 0..self.shared.shards.len() {
            let Ok(ShardReply::SortedIds(ids)) = self.ask(shard, ShardRead::SortedIds)?.recv() else {
                return Err(BackendError::Stopping);
            };
            all.push(ids);
        }
        Ok(specie_transaction::hash::uhs_digest(all.iter().flatten()))
    }
}

/// Answers every transaction `dropped`: nothing of it was applied.
/// A transaction the sentinel accepted, with where its completion goes.
type Admitted = (CompactTransaction, (u64, CompletionSender));

/// Write-ahead batches in the archiver's hands at once; a submitter past it waits. Enough to
/// keep the archiver's rounds full while submitters sign and validate the next batches.
const WRITE_AHEADS_IN_FLIGHT_MAX: usize = 64;

/// Transactions whose records are being written ahead. Released, they go to the coordinator (or
/// are answered `dropped`); dropped unreleased (a stopping archiver), each is answered
/// `dropped`: every transaction gets exactly one completion. Either way its place is freed.
struct AwaitingRecords {
    accepted: Vec<Admitted>,
    submissions: Sender<SubmissionMessage>,
    place: Receiver<()>,
}

impl AwaitingRecords {
    fn release(mut self, durable: bool) {
        let accepted = std::mem::take(&mut self.accepted);
        match durable {
            true => forward_to(&self.submissions, accepted),
            false => drop_all(accepted),
        }
    }
}

impl Drop for AwaitingRecords {
    fn drop(&mut self) {
        drop_all(std::mem::take(&mut self.accepted));
        let freed = self.place.try_recv();
        assert!(freed.is_ok(), "every write-ahead in flight holds a place");
    }
}

/// Hands accepted transactions to the coordinator (waiting while its inbox is full); if it has
/// stopped, answers each `dropped`.
fn forward_to(submissions: &Sender<SubmissionMessage>, accepted: Vec<Admitted>) {
    if accepted.is_empty() {
        return;
    }
    if let Err(crossbeam_channel::SendError(HostMessage::Calls(lost))) = submissions.send(HostMessage::Calls(accepted))
    {
        drop_all(lost);
    }
}

fn drop_all(transactions: Vec<Admitted>) {
    for (compact, (client_ref, reply)) in transactions {
        let _ = reply.send(Completion {
            client_ref,
            txid: compact.txid,
            status: TxStatus::Dropped,
        });
    }
}

impl NodeHandle {
    fn ask_archive(&self, read: LedgerRead) -> Result<LedgerReply, BackendError> {
        let archive = self.shared.archive.as_ref().ok_or(BackendError::NoLedger)?;
        let (tx, rx) = bounded(1);
        archive
            .send(ArchiveMessage::Read(read, tx))
            .map_err(|_| BackendError::Stopping)?;
        match rx.recv().map_err(|_| BackendError::Stopping)? {
            LedgerReply::Failed(reason) => Err(BackendError::Unavailable {
                role: "archiver".into(),
                reason,
            }),
            reply => Ok(reply),
        }
    }

    /// The ledger of record's head: its height and the UHS its blocks replay to.
    pub fn ledger_head(&self) -> Result<LedgerHead, BackendError> {
        match self.ask_archive(LedgerRead::Head)? {
            LedgerReply::Head(head) => Ok(head),
            other => unreachable!("the archiver answers a head read with a head, not {other:?}"),
        }
    }

    /// The supply at the ledger of record's head (see `specie_archiver::Supply`).
    pub fn ledger_supply(&self) -> Result<SupplyCut, BackendError> {
        match self.ask_archive(LedgerRead::Supply)? {
            LedgerReply::Supply(cut) => Ok(*cut),
            other => unreachable!("the archiver answers a supply read with a supply, not {other:?}"),
        }
    }

    pub fn ledger_block(&self, height: u64) -> Result<Option<Block>, BackendError> {
        match self.ask_archive(LedgerRead::Block(height))? {
            LedgerReply::Block(block) => Ok(block),
            other => unreachable!("the archiver answers a block read with a block, not {other:?}"),
        }
    }

    pub fn ledger_transaction(&self, txid: Txid) -> Result<Option<LedgerEntry>, BackendError> {
        match self.ask_archive(LedgerRead::Transaction(txid))? {
            LedgerReply::Transaction(entry) => Ok(entry.map(|entry| *entry)),
            other => unreachable!("the archiver answers a transaction read with an entry, not {other:?}"),
        }
    }

    /// The proof that `txid` is, or is not, in the ledger up to `height` (the head if `None`);
    /// `None` if the height is beyond the head.
    pub fn ledger_dispute(&self, txid: Txid, height: Option<u64>) -> Result<Option<DisputeProof>, BackendError> {
        match self.ask_archive(LedgerRead::Dispute(txid, height))? {
            LedgerReply::Dispute(proof) => Ok(proof.map(|proof| *proof)),
            other => unreachable!("the archiver answers a dispute read with a proof, not {other:?}"),
        }
    }
}

impl Backend for NodeHandle {
    fn submit(&self, txs: Vec<(u64, SpecieTransaction)>, reply: &CompletionSender) {
        NodeHandle::submit(self, txs, reply)
    }
    fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, BackendError> {
        NodeHandle::query_uhs(self, ids)
    }
    fn info(&self) -> Result<NodeInfo, BackendError> {
        NodeHandle::info(self)
    }
    fn uhs_digest(&self) -> Result<(u64, [u8; 32]), BackendError> {
        NodeHandle::uhs_digest(self)
    }
    fn ledger_head(&self) -> Result<LedgerHead, BackendError> {
        NodeHandle::ledger_head(self)
    }
    fn ledger_block(&self, height: u64) -> Result<Option<Block>, BackendError> {
        NodeHandle::ledger_block(self, height)
    }
    fn ledger_supply(&self) -> Result<SupplyCut, BackendError> {
        NodeHandle::ledger_supply(self)
    }
    fn ledger_transaction(&self, txid: Txid) -> Result<Option<LedgerEntry>, BackendError> {
        NodeHandle::ledger_transaction(self, txid)
    }
    fn ledger_dispute(&self, txid: Txid, height: Option<u64>) -> Result<Option<DisputeProof>, BackendError> {
        NodeHandle::ledger_dispute(self, txid, height)
    }
    fn transaction_status(&self, txid: Txid) -> Result<Option<TxStatus>, BackendError> {
        Ok(NodeHandle::transaction_status(self, txid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_with_another_shard_count_is_refused_with_the_manifest_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = NodeOptions::new(dir.path());
        options.shards = Some(2);
        EmbeddedNode::open(options.clone()).unwrap().shutdown();
        options.shards = Some(3);
        let error = EmbeddedNode::open(options).err().unwrap();
        assert!(
            matches!(
                error,
                OpenError::Manifest(NodeManifestError::ShardsChanged {
                    existing: 2,
                    requested: 3,
                    ..
                })
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("created with 2 shards"), "{error}");
    }

    /// A write-ahead batch gets exactly one answer per transaction whatever happens to it:
    /// durable, it reaches the coordinator; not written, or dropped unanswered by a stopping
    /// archiver, each is answered `dropped`. Every way frees its place.
    #[test]
    fn transactions_waiting_for_their_records_are_forwarded_or_answered_dropped_once() {
        let (submissions, coordinator) = bounded(4);
        let places = bounded(WRITE_AHEADS_IN_FLIGHT_MAX);
        let (reply, mut answers) = tokio::sync::mpsc::unbounded_channel();
        let waiting = |txid: u8| {
            places.0.send(()).unwrap();
            let compact = CompactTransaction {
                txid: Txid([txid; 32]),
                spent: vec![],
                created: vec![],
                attestations: Default::default(),
            };
            AwaitingRecords {
                accepted: vec![(compact, (u64::from(txid), reply.clone()))],
                submissions: submissions.clone(),
                place: places.1.clone(),
            }
        };
        waiting(1).release(true);
        match coordinator.try_recv() {
            Ok(HostMessage::Calls(calls)) => assert_eq!(calls[0].0.txid, Txid([1; 32])),
            _ => panic!("a durable batch goes to the coordinator"),
        }
        assert!(
            answers.try_recv().is_err(),
            "the coordinator answers it, not the write-ahead"
        );
        waiting(2).release(false);
        drop(waiting(3));
        for txid in [2, 3] {
            let answer = answers.try_recv().expect("answered");
            assert_eq!((answer.client_ref, answer.status), (txid, TxStatus::Dropped));
        }
        assert!(answers.try_recv().is_err() && coordinator.try_recv().is_err());
        assert!(places.1.is_empty(), "every place is freed");
    }
}
