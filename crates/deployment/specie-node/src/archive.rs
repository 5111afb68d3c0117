//! The archiver: the embedded node's host for the ledger of record (`specie-archiver`).
//!
//! ```text
//! submit ─ sentinel ─▶ write ahead (ledger/pending, one fsync per group) ─▶ coordinator ─▶ shards
//!         (returns at once: the archiver hands the batch on once it is durable)
//!                                                         outcomes ◀────────────┘
//!                       archiver thread: confirmed records ─▶ blocks (ledger/blocks, one fsync per group)
//! ```
//!
//! A transaction's full record is durable before the coordinator sees it, so nothing the shards
//! commit can be missing from the ledger. Outcomes are not written down: after a crash, the
//! records written ahead but not in a block are matched against the UHS once the coordinator has
//! finished every dtxn in flight (`specie_archiver::committed`), then sealed. The pending log is
//! compacted by a snapshot of what is still undecided or unsealed, once every sealed block is
//! durable.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use specie_archiver::{
    Block, BlockLimits, LedgerEntry, LedgerHead, LedgerLimits, LedgerOfRecord, LedgerRead, LedgerReply, Located,
    Offered, Record, SupplyCut,
};
use specie_codec::{put_vec, Decode, DecodeError, Encode};
use specie_log::{Log, LogError, LogOptions, SyncMode};
use specie_metrics::role::{Published, RoleFamily};
use specie_transaction::{Txid, UhsId};

/// How the archiver keeps its files and cuts its blocks.
#[derive(Clone, Debug)]
pub struct ArchiveOptions {
    /// `<data dir>/ledger`: `blocks/` and `pending/` are logs under it.
    pub dir: PathBuf,
    pub sync: SyncMode,
    pub limits: LedgerLimits,
    /// A block is cut at most this long after its first record was confirmed (or when full).
    pub seal_interval_ms: u64,
    /// The pending log is compacted once it grows past this.
    pub pending_log_bytes_max: u64,
}

impl ArchiveOptions {
    pub fn new(data_dir: &Path, sync: SyncMode) -> ArchiveOptions {
        ArchiveOptions {
            dir: data_dir.join("ledger"),
            sync,
            limits: LedgerLimits::default(),
            seal_interval_ms: 100,
            pending_log_bytes_max: 64 * 1024 * 1024,
        }
    }
}

/// Why the ledger of record could not be opened or kept.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("ledger of record: {0}")]
    Log(#[from] LogError),
    #[error("ledger of record: block {height} does not decode: {source}")]
    BlockUndecodable {
        height: u64,
        #[source]
        source: DecodeError,
    },
    #[error("ledger of record: block {height} does not extend the chain: {source}")]
    BlockRefused {
        height: u64,
        #[source]
        source: specie_archiver::BlockError,
    },
    #[error("ledger of record: pending record batch {index} does not decode: {source}")]
    PendingUndecodable {
        index: u64,
        #[source]
        source: DecodeError,
    },
    #[error("ledger of record: the UHS could not be read to reconcile: {0}")]
    Uhs(String),
    #[error("ledger of record: the archiver stopped")]
    Stopped,
    #[error("ledger of record: block {height} is missing")]
    BlockMissing { height: u64 },
}

/// What to do once a write-ahead is decided: called with `true` once the records are durable,
/// `false` if they could not be written (the archiver's thread calls it; dropping it uncalled,
/// as a stopping archiver does, must answer its transactions too).
pub type AfterWrite = Box<dyn FnOnce(bool) + Send>;

/// What the archiver's thread is asked.
pub enum ArchiveMessage {
    /// Make these records durable, then call `then`: the submitter does not wait for the fsync,
    /// the archiver hands the transactions on (pipelined, so signing and validating the next
    /// batch overlap this one's write).
    WriteAhead {
        records: Vec<Record>,
        then: AfterWrite,
    },
    /// What became of written-ahead transactions: `true` for committed.
    Outcomes(Vec<(Txid, bool)>),
    Read(LedgerRead, Sender<LedgerReply>),
    Stop,
}

/// How many recent blocks are kept in memory to answer reads without going to disk.
const RECENT_BLOCKS: usize = 16;
/// Messages taken from the inbox per round: one pending-log write and one seal per round.
const ROUND_MESSAGES_MAX: usize = 1024;

/// The archiver's state, owned by its thread.
pub struct Archive {
    options: ArchiveOptions,
    ledger: LedgerOfRecord,
    blocks: Log,
    pending_log: Log,
    /// Written ahead, outcome unknown, with how many copies were submitted (a transaction sent
    /// twice is refused once and committed once, in either order).
    undecided: HashMap<Txid, (Record, u32)>,
    recent: VecDeque<Block>,
    /// Whether a block write failed: the ledger stops growing and the pending log keeps
    /// everything until a restart recovers it.
    broken: bool,
}

fn log_options(sync: SyncMode, segment_bytes_max: u64) -> LogOptions {
    LogOptions {
        segment_bytes_max,
        record_bytes_max: 256 * 1024 * 1024,
        sync,
        ..LogOptions::default()
    }
}

fn encode_records(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    put_vec(&mut out, records);
    out
}

fn decode_records(bytes: &[u8], index: u64) -> Result<Vec<Record>, ArchiveError> {
    let limits = specie_archiver::RecordLimits::default();
    // Written by this process: bounded by the log's own record limit, not by a wire limit.
    specie_codec::decode_bounded("pending records", bytes, bytes.len(), |reader| {
        reader.read_vec("records", u32::MAX as u64, 64, |r| Record::decode_from(r, &limits))
    })
    .map_err(|source| ArchiveError::PendingUndecodable { index, source })
}

impl Archive {
    /// Opens the ledger under `options.dir`: replays every block from genesis (checking the
    /// chain), then decides every written-ahead record not in a block by the UHS (`query`
    /// answers which ids are in it) and seals the committed ones. Call only once the coordinator
    /// has finished every dtxn that was in flight.
    pub fn open(
        options: ArchiveOptions,
        query: impl Fn(&[UhsId]) -> Result<Vec<bool>, String>,
    ) -> Result<Archive, ArchiveError> {
        let (blocks, recovered) = Log::open(&options.dir.join("blocks"), log_options(options.sync, 16 << 20))?;
        let block_limits = BlockLimits {
            records_max: options.limits.block_records_max,
            ..BlockLimits::default()
        };
        let mut ledger = LedgerOfRecord::new(options.limits);
        let mut recent = VecDeque::new();
        for (height, bytes) in recovered.records {
            let block = Block::decode_exact_with(&bytes, &block_limits)
                .map_err(|source| ArchiveError::BlockUndecodable { height, source })?;
            ledger
                .apply(&block)
                .map_err(|source| ArchiveError::BlockRefused { height, source })?;
            remember(&mut recent, block);
        }
        let (pending_log, recovered) = Log::open(&options.dir.join("pending"), log_options(options.sync, 64 << 20))?;
        let mut written: Vec<Record> = vec![];
        if let Some(snapshot) = &recovered.snapshot {
            written.extend(decode_records(&snapshot.bytes, snapshot.last_index)?);
        }
        for (index, bytes) in &recovered.records {
            written.extend(decode_records(bytes, *index)?);
        }
        let mut seen = HashSet::new();
        written.retain(|record| ledger.locate(&record.txid()).is_none() && seen.insert(record.txid()));
        let mut archive = Archive {
            options,
            ledger,
            blocks,
            pending_log,
            undecided: HashMap::new(),
            recent,
            broken: false,
        };
        archive.reconcile(written, query)?;
        Ok(archive)
    }

    /// Decides `written` (distinct, none in a block) by the UHS, seals the committed ones and
    /// compacts the pending log to what still waits.
    fn reconcile(
        &mut self,
        written: Vec<Record>,
        query: impl Fn(&[UhsId]) -> Result<Vec<bool>, String>,
    ) -> Result<(), ArchiveError> {
        let ids = specie_archiver::created_ids(&written);
        let present = query(&ids).map_err(ArchiveError::Uhs)?;
        let in_uhs: HashSet<UhsId> = ids
            .into_iter()
            .zip(present)
            .filter(|(_, p)| *p)
            .map(|(id, _)| id)
            .collect();
        let committed = specie_archiver::committed(&written, &in_uhs);
        let recovered = written.len();
        let mut confirmed = 0;
        for (record, committed) in written.into_iter().zip(committed) {
            if committed {
                confirmed += 1;
                let offered = self.ledger.offer(record);
                assert_eq!(
                    offered,
                    Offered::Waiting,
                    "distinct, not in a block, and the room holds a log's worth"
                );
            }
        }
        if recovered > 0 {
            tracing::info!(
                recovered,
                confirmed,
                "ledger of record: written-ahead records decided by the UHS"
            );
        }
        self.seal_all()?;
        self.compact_pending_log()
    }

    pub fn ledger(&self) -> &LedgerOfRecord {
        &self.ledger
    }

    /// The ledger's families for the metrics.
    fn gauges(&self) -> [(RoleFamily, f64); 5] {
        specie_api::observe::ledger_gauges(&self.ledger, self.undecided.len())
    }

    /// Runs until `Stop` or until every sender is gone, publishing its gauges to `published`
    /// after every round.
    pub fn run(mut self, inbox: Receiver<ArchiveMessage>, published: &Published) {
        published.publish(&self.gauges());
        let interval = Duration::from_millis(self.options.seal_interval_ms);
        let mut last_seal = Instant::now();
        loop {
            let first = match inbox.recv_timeout(interval) {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let mut round: Vec<ArchiveMessage> = first.into_iter().collect();
            while round.len() < ROUND_MESSAGES_MAX {
                match inbox.try_recv() {
                    Ok(message) => round.push(message),
                    Err(_) => break,
                }
            }
            let stop = round.iter().any(|m| matches!(m, ArchiveMessage::Stop));
            let reads = self.handle_round(round);
            let full = self.ledger.waiting() >= self.options.limits.block_records_max;
            if stop || full || last_seal.elapsed() >= interval {
                if let Err(error) = self.seal_all() {
                    tracing::error!(%error, "ledger of record: cannot write blocks; the ledger stops growing until a restart");
                    self.broken = true;
                }
                last_seal = Instant::now();
                if !self.broken && self.pending_log.bytes_since_snapshot() > self.options.pending_log_bytes_max {
                    if let Err(error) = self.compact_pending_log() {
                        tracing::error!(%error, "ledger of record: cannot compact the pending log");
                        self.broken = true;
                    }
                }
            }
            for (read, reply) in reads {
                let _ = reply.send(self.read(read));
            }
            published.publish(&self.gauges());
            if stop {
                return;
            }
        }
    }

    /// Writes ahead the round's records (one append, one fsync), applies the outcomes, and
    /// returns the reads to answer once the round's blocks are sealed.
    fn handle_round(&mut self, round: Vec<ArchiveMessage>) -> Vec<(LedgerRead, Sender<LedgerReply>)> {
        let mut batches: Vec<Vec<u8>> = vec![];
        let mut waiting_writers = vec![];
        let mut written_txids = vec![];
        let mut reads = vec![];
        for message in round {
            match message {
                ArchiveMessage::WriteAhead { records, then } => {
                    batches.push(encode_records(&records));
                    for record in records {
                        written_txids.push(record.txid());
                        self.undecided.entry(record.txid()).or_insert((record, 0)).1 += 1;
                    }
                    waiting_writers.push(then);
                }
                ArchiveMessage::Outcomes(outcomes) => self.decide(outcomes),
                ArchiveMessage::Read(read, reply) => reads.push((read, reply)),
                ArchiveMessage::Stop => {}
            }
        }
        if !batches.is_empty() {
            let durable = !self.broken
                && match self.pending_log.append_batch(&batches) {
                    Ok(_) => true,
                    Err(error) => {
                        tracing::error!(%error, "ledger of record: cannot write ahead; transactions are refused until a restart");
                        self.broken = true;
                        false
                    }
                };
            if !durable {
                // Their submitters answer `dropped`: they never reach the coordinator.
                self.decide(written_txids.into_iter().map(|txid| (txid, false)).collect());
            }
            for then in waiting_writers {
                then(durable);
            }
        }
        reads
    }

    fn decide(&mut self, outcomes: Vec<(Txid, bool)>) {
        for (txid, committed) in outcomes {
            let Some((_, copies)) = self.undecided.get_mut(&txid) else {
                // The other copy of a transaction sent twice was decided already.
                continue;
            };
            *copies -= 1;
            if committed {
                let (record, _) = self.undecided.remove(&txid).expect("present");
                if self.ledger.offer(record) == Offered::Full {
                    // Cannot happen while the room is larger than the coordinator's queue; if
                    // it does, the record stays in the pending log and a restart seals it.
                    tracing::error!(%txid, "ledger of record: waiting room full");
                }
            } else if *copies == 0 {
                self.undecided.remove(&txid);
            }
        }
    }

    /// Seals every block the waiting records make and appends them with one fsync.
    fn seal_all(&mut self) -> Result<(), ArchiveError> {
        let mut sealed = vec![];
        while let Some(block) = self.ledger.seal() {
            self.ledger.apply(&block).expect("a sealed block extends the ledger");
            sealed.push(block);
        }
        if sealed.is_empty() {
            return Ok(());
        }
        let encoded: Vec<Vec<u8>> = sealed.iter().map(Encode::encode).collect();
        let heights = self.blocks.append_batch(&encoded)?;
        assert_eq!(
            *heights.end(),
            self.ledger.height(),
            "the blocks log is indexed by height"
        );
        for block in sealed {
            remember(&mut self.recent, block);
        }
        Ok(())
    }

    /// Replaces the pending log by a snapshot of what it must still hold: records undecided
    /// and records confirmed but not sealed. Only after the blocks are durable.
    fn compact_pending_log(&mut self) -> Result<(), ArchiveError> {
        let mut keep: Vec<Record> = self.undecided.values().map(|(record, _)| record.clone()).collect();
        keep.extend(self.ledger.waiting_records().cloned());
        let last_index = self.pending_log.last_index();
        self.pending_log.install_snapshot(last_index, &encode_records(&keep))?;
        Ok(())
    }

    fn head(&self) -> LedgerHead {
        LedgerHead::of(&self.ledger, self.undecided.len())
    }

    fn read(&self, read: LedgerRead) -> LedgerReply {
        match read {
            LedgerRead::Head => LedgerReply::Head(self.head()),
            LedgerRead::Supply => LedgerReply::Supply(Box::new(SupplyCut {
                head: self.head(),
                supply: self.ledger.supply().clone(),
            })),
            LedgerRead::Block(height) => match self.block(height) {
                Ok(block) => LedgerReply::Block(block),
                Err(error) => LedgerReply::Failed(error.to_string()),
            },
            LedgerRead::Transaction(txid) => match self.ledger.locate(&txid).map(|located| self.entry(located)) {
                None => LedgerReply::Transaction(None),
                Some(Ok(entry)) => LedgerReply::Transaction(Some(Box::new(entry))),
                Some(Err(error)) => LedgerReply::Failed(error.to_string()),
            },
            LedgerRead::Dispute(txid, height) => match self.ledger.dispute(txid, height, |h| self.existing_block(h)) {
                Ok(proof) => LedgerReply::Dispute(proof.map(Box::new)),
                Err(error) => LedgerReply::Failed(error.to_string()),
            },
        }
    }

    /// The record at `located`, with its block's header and its inclusion proof.
    fn entry(&self, located: Located) -> Result<LedgerEntry, ArchiveError> {
        Ok(LedgerEntry::of(&self.existing_block(located.height)?, located))
    }

    /// Block `height`, which the ledger has.
    fn existing_block(&self, height: u64) -> Result<Block, ArchiveError> {
        self.block(height)?.ok_or(ArchiveError::BlockMissing { height })
    }

    fn block(&self, height: u64) -> Result<Option<Block>, ArchiveError> {
        if height == 0 || height > self.ledger.height() {
            return Ok(None);
        }
        if let Some(block) = self.recent.iter().find(|b| b.header.height == height) {
            return Ok(Some(block.clone()));
        }
        let bytes = self.blocks.read(height)?;
        let limits = BlockLimits {
            records_max: self.options.limits.block_records_max,
            ..BlockLimits::default()
        };
        Block::decode_exact_with(&bytes, &limits)
            .map(Some)
            .map_err(|source| ArchiveError::BlockUndecodable { height, source })
    }
}

fn remember(recent: &mut VecDeque<Block>, block: Block) {
    if recent.len() == RECENT_BLOCKS {
        recent.pop_front();
    }
    recent.push_back(block);
}
