//! The archiver as a role of the role contract: the ledger of record kept by a replicated group
//! (a Raft group of `specie cluster`), where the embedded node keeps it in its own thread.
//!
//! ```text
//! sentinel ─ write ahead (records) ─▶ archiver
//!          ─ submit ─▶ coordinator ─ written ahead? ─▶ archiver
//!                      coordinator ─▶ shards
//!                      coordinator ─ outcomes (txid, committed?): hints ─▶ archiver
//! leader's driver: records ready ─▶ shards (created ids in the UHS?) ─▶ evidence ─▶ settled
//!                                   committed records ─▶ blocks
//! ```
//!
//! A sentinel writes every batch's records ahead before a coordinator sees it: one command,
//! made durable by the group before it is answered, and the coordinator orders only what the
//! archiver says is written ahead ([`Archiver::written_ahead`]), so no transaction the core
//! commits can be missing from the ledger. What becomes of each record is decided by the UHS
//! alone ([`crate::committed`]), never by a reporter's word: the outcomes reported (by the
//! ordering group in a cluster) only make records ready to be asked about at once. The leader's
//! driver asks the shards which of the ready records' created ids they hold and hands the answer
//! back as evidence; a record nobody reported (its reporter died between the decision and the
//! report) is ready once it has been undecided for `decide_after_ms` under one leader.
//!
//! Everything applied is deterministic (no clock, no map iteration order), so every replica seals
//! the same blocks; the blocks are part of the replicated state and of its snapshots.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::convert::Infallible;

use specie_codec::{put_count, put_u32, Decode, DecodeError, Encode, Reader};
use specie_role::{Durable, Output, Role, Ticket};
use specie_transaction::{Txid, UhsId};

use crate::block::{Block, BlockError, BlockHeader, BlockLimits};
use crate::ledger::{LedgerLimits, LedgerOfRecord, Offered};
use crate::query::{LedgerHead, LedgerRead, LedgerReply};
use crate::reconcile::committed;
use crate::record::{Record, RecordLimits};

/// How the archiver cuts blocks and bounds what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchiverConfig {
    pub ledger: LedgerLimits,
    /// The leader seals what is waiting at least this often.
    pub seal_interval_ms: u64,
    /// A record undecided this long under one leader is decided from the UHS.
    pub decide_after_ms: u64,
    /// Written-ahead records whose outcome is unknown; beyond it, writes are refused (`Busy`).
    pub undecided_max: usize,
    /// Records in one write-ahead command, one outcome command, one evidence round.
    pub batch_records_max: usize,
}

impl Default for ArchiverConfig {
    fn default() -> Self {
        ArchiverConfig {
            ledger: LedgerLimits::default(),
            seal_interval_ms: 200,
            decide_after_ms: 30_000,
            undecided_max: 1 << 20,
            batch_records_max: 100_000,
        }
    }
}

pub enum ArchiverInput {
    /// Make these records durable before their transactions reach a coordinator.
    WriteAhead {
        ticket: Ticket,
        records: Vec<Record>,
    },
    /// What the core decided of written-ahead transactions (`true` for committed), as the
    /// ordering group reports it in a cluster. A hint, never a decision: it makes the records
    /// ready for the UHS to decide at once (a `true`, or a `false` from every copy of a
    /// transaction written twice), where unreported ones wait `decide_after_ms`. So a false
    /// report cannot put into the ledger what the core did not commit; one sent before the
    /// commit could keep out what it did, which is why, in a cluster, only what orders the
    /// transactions may report. Held by the leader only: a new leader waits `decide_after_ms`
    /// for what its predecessor was told.
    Outcomes {
        ticket: Ticket,
        outcomes: Vec<(Txid, bool)>,
    },
    Read {
        ticket: Ticket,
        read: LedgerRead,
    },
    /// Which records are ready for the UHS to decide (reported, or undecided for
    /// `decide_after_ms` under this leader), with the ids they create.
    Stale {
        ticket: Ticket,
    },
    /// Which of the ids created by the records `asked` the shards hold now.
    Evidence {
        ticket: Ticket,
        asked: Vec<Txid>,
        present: Vec<UhsId>,
    },
}

/// What the archiver makes durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchiverCommand {
    WriteAhead(Vec<Record>),
    /// Outcomes read off the UHS: final, whatever copies there were.
    Settle(Vec<(Txid, bool)>),
    /// Seal every block the waiting records make.
    Seal,
}

#[derive(Clone, Debug)]
pub enum ArchiverReply {
    /// The records are durable: their transactions may go to a coordinator.
    Written,
    /// Taken (outcomes, evidence).
    Decided,
    /// Too much undecided, or too large a batch: send again later.
    Busy,
    /// The replica stopped leading before this was durable.
    Dropped,
    Read(LedgerReply),
    Stale(Vec<(Txid, Vec<UhsId>)>),
}

/// What an operator must see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchiverReport {
    /// Records the UHS decided that nobody had reported.
    Settled { committed: usize, not_committed: usize },
    /// A confirmed record had no room to wait for its block; it stays undecided until the UHS
    /// decides it again.
    WaitingRoomFull { txid: Txid },
}

impl std::fmt::Display for ArchiverReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiverReport::Settled {
                committed,
                not_committed,
            } => write!(
                f,
                "ledger of record: the UHS decided {committed} committed and {not_committed} not committed of the records nobody reported"
            ),
            ArchiverReport::WaitingRoomFull { txid } => {
                write!(f, "ledger of record: waiting room full; {txid} waits to be decided again")
            }
        }
    }
}

/// A written-ahead record and how many copies of it were written (a transaction sent twice is
/// committed once and refused once, in either order).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Undecided {
    record: Record,
    copies: u32,
}

/// How many verdicts a replica proposed while it led, by whether the record was reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    pub reported: u64,
    pub unreported: u64,
}

/// What the leader was told of one undecided record.
#[derive(Clone, Copy, Debug, Default)]
struct Reported {
    committed: bool,
    refusals: u32,
}

/// The ledger of record as a replicated role.
pub struct Archiver {
    config: ArchiverConfig,
    // Replicated state.
    ledger: LedgerOfRecord,
    blocks: Vec<Block>,
    undecided: BTreeMap<Txid, Undecided>,
    // The leader's own.
    leading: bool,
    /// The tickets of this leader's proposals, in proposal order (`None`: nobody waits).
    proposed: VecDeque<Option<Ticket>>,
    /// Records written ahead and not yet applied, counted against `undecided_max`.
    proposed_records: usize,
    /// When this leader first knew each undecided record.
    first_seen_ms: HashMap<Txid, u64>,
    /// What sentinels told this leader of undecided records.
    reports: HashMap<Txid, Reported>,
    next_seal_ms: Option<u64>,
    /// A seal proposed and not yet applied: one at a time is enough, it seals whatever waits.
    sealing: bool,
    /// Records were offered since the last seal this leader proposed: only then can a new seal
    /// make a block (one that waits for a missing parent stays unsealable until one arrives).
    offered_since_seal: bool,
    /// The last txid asked about in a stale question: the next question goes on after it, so
    /// records left open (their spender not yet decided) never crowd out the others.
    stale_cursor: Option<Txid>,
    /// Verdicts this replica's leadership proposed since the process started: on records someone
    /// reported, and on records nobody did. Many unreported verdicts mean lost reports.
    verdicts: Verdicts,
    outputs: VecDeque<Output<Archiver>>,
}

impl Archiver {
    pub fn new(config: ArchiverConfig) -> Archiver {
        assert!(config.batch_records_max > 0 && config.undecided_max > 0);
        // Admission bounds undecided and waiting records together by `undecided_max`, and every
        // waiting record was undecided first: with a room at least that large no committed
        // record is ever refused a place (one refused could hold up every record after it).
        let config = ArchiverConfig {
            ledger: LedgerLimits {
                waiting_records_max: config.ledger.waiting_records_max.max(config.undecided_max),
                ..config.ledger
            },
            ..config
        };
        Archiver {
            config,
            ledger: LedgerOfRecord::new(config.ledger),
            blocks: Vec::new(),
            undecided: BTreeMap::new(),
            leading: false,
            proposed: VecDeque::new(),
            proposed_records: 0,
            first_seen_ms: HashMap::new(),
            reports: HashMap::new(),
            next_seal_ms: None,
            sealing: false,
            offered_since_seal: false,
            stale_cursor: None,
            verdicts: Verdicts::default(),
            outputs: VecDeque::new(),
        }
    }

    pub fn ledger(&self) -> &LedgerOfRecord {
        &self.ledger
    }

    pub fn undecided(&self) -> usize {
        self.undecided.len()
    }

    pub fn verdicts(&self) -> Verdicts {
        self.verdicts
    }

    pub fn head(&self) -> LedgerHead {
        LedgerHead::of(&self.ledger, self.undecided.len())
    }

    fn reply(&mut self, ticket: Ticket, reply: ArchiverReply) {
        self.outputs.push_back(Output::Reply { ticket, reply });
    }

    fn propose(&mut self, ticket: Option<Ticket>, command: ArchiverCommand) {
        self.proposed.push_back(ticket);
        self.outputs.push_back(Output::Propose(command));
    }

    fn read(&self, read: LedgerRead) -> LedgerReply {
        let block = |height: u64| -> Option<&Block> { self.blocks.get(usize::try_from(height.checked_sub(1)?).ok()?) };
        match read {
            LedgerRead::Head => LedgerReply::Head(self.head()),
            LedgerRead::Block(height) => LedgerReply::Block(block(height).cloned()),
            LedgerRead::Transaction(txid) => LedgerReply::Transaction(self.ledger.locate(&txid).map(|located| {
                let block = block(located.height).expect("a located transaction's block is kept");
                Box::new(crate::query::LedgerEntry::of(block, located))
            })),
            LedgerRead::Dispute(txid, height) => {
                let proof = self.ledger.dispute(txid, height, |height| {
                    Ok::<_, Infallible>(block(height).expect("the ledger's blocks are kept").clone())
                });
                LedgerReply::Dispute(proof.unwrap_or_else(|never| match never {}).map(Box::new))
            }
            LedgerRead::Supply => LedgerReply::Supply(Box::new(crate::query::SupplyCut {
                head: self.head(),
                supply: self.ledger.supply().clone(),
            })),
        }
    }

    /// An ordering group's question before it orders a submission: whether each transaction,
    /// by txid and the digest of the compact form submitted (its attestation message), is an
    /// undecided record of that very compact form. Read from the replicated state (a host asks
    /// it of the applied state, so a `true` means the record is durable in the group); a
    /// `false` keeps the transaction from the core, which is what makes the ledger of record
    /// impossible to bypass, and a record written for one compact form admits no other.
    pub fn written_ahead(&self, asked: &[(Txid, [u8; 32])]) -> Vec<bool> {
        (asked.iter())
            .map(|(txid, digest)| {
                (self.undecided.get(txid)).is_some_and(|u| u.record.compact().attestation_message() == *digest)
            })
            .collect()
    }

    /// Up to a batch of the undecided records ready for the UHS to decide, in txid order from
    /// after the last question's, wrapping around.
    fn stale(&mut self, now_ms: u64) -> Vec<(Txid, Vec<UhsId>)> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let (from, wrapped) = match self.stale_cursor {
            Some(cursor) => (
                Excluded(cursor),
                Some(self.undecided.range((Unbounded, Included(cursor)))),
            ),
            None => (Unbounded, None),
        };
        let ready = |txid: &Txid, undecided: &Undecided| {
            let reported = self
                .reports
                .get(txid)
                .is_some_and(|r| r.committed || r.refusals >= undecided.copies);
            reported
                || self
                    .first_seen_ms
                    .get(txid)
                    .is_some_and(|seen| now_ms.saturating_sub(*seen) >= self.config.decide_after_ms)
        };
        let stale: Vec<(Txid, Vec<UhsId>)> = (self.undecided.range((from, Unbounded)))
            .chain(wrapped.into_iter().flatten())
            .filter(|(txid, undecided)| ready(txid, undecided))
            .take(self.config.batch_records_max)
            .map(|(txid, undecided)| (*txid, undecided.record.created().to_vec()))
            .collect();
        self.stale_cursor = stale.last().map(|(txid, _)| *txid);
        stale
    }

    /// What the UHS says of the records `asked`: committed if one of their created ids is there,
    /// or is spent by a committed record (waiting for its block, or asked too). A record with no
    /// such evidence whose ids another undecided record spends is left for that record's outcome.
    fn settle(&self, asked: &[Txid], present: &[UhsId]) -> Vec<(Txid, bool)> {
        let asked: Vec<&Record> = asked
            .iter()
            .filter_map(|txid| self.undecided.get(txid).map(|u| &u.record))
            .collect();
        let asked_ids: HashSet<Txid> = asked.iter().map(|r| r.txid()).collect();
        let mut records: Vec<Record> = asked.iter().map(|r| (*r).clone()).collect();
        records.extend(self.ledger.waiting_records().cloned());
        // Waiting records were committed: their outputs count as present.
        let mut in_uhs: HashSet<UhsId> = present.iter().copied().collect();
        in_uhs.extend(self.ledger.waiting_records().flat_map(|r| r.created().iter().copied()));
        let verdicts = committed(&records, &in_uhs);
        // What a record that may still commit spends: those of the undecided not asked, then
        // of every asked record left waiting for one of them, back along the spends.
        let mut spent_by_open: HashSet<UhsId> = (self.undecided.iter())
            .filter(|(txid, _)| !asked_ids.contains(txid))
            .flat_map(|(_, u)| u.record.spent().iter().copied())
            .collect();
        let mut open = vec![false; asked.len()];
        loop {
            let mut changed = false;
            for (index, record) in asked.iter().enumerate() {
                if !verdicts[index] && !open[index] && record.created().iter().any(|id| spent_by_open.contains(id)) {
                    open[index] = true;
                    spent_by_open.extend(record.spent().iter().copied());
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        asked
            .iter()
            .zip(verdicts)
            .zip(open)
            .filter(|(_, open)| !open)
            .map(|((record, committed), _)| (record.txid(), committed))
            .collect()
    }

    fn write_ahead(&mut self, ticket: Ticket, records: Vec<Record>) {
        if records.is_empty() {
            return self.reply(ticket, ArchiverReply::Written);
        }
        let held = self.undecided.len() + self.ledger.waiting() + self.proposed_records;
        let too_many = held + records.len() > self.config.undecided_max;
        if records.len() > self.config.batch_records_max || too_many {
            return self.reply(ticket, ArchiverReply::Busy);
        }
        self.proposed_records += records.len();
        self.propose(Some(ticket), ArchiverCommand::WriteAhead(records));
    }

    /// Offers a committed record to the ledger. Admission keeps the room from filling; should it
    /// fill all the same, the record goes back to undecided, for the UHS to decide again.
    fn offer(&mut self, now_ms: u64, record: Record) {
        let txid = record.txid();
        match self.ledger.offer(record.clone()) {
            Offered::Waiting => self.offered_since_seal = true,
            Offered::Known => {}
            Offered::Full => {
                self.outputs
                    .push_back(Output::Report(ArchiverReport::WaitingRoomFull { txid }));
                self.undecided.entry(txid).or_insert(Undecided { record, copies: 1 });
                if self.leading {
                    self.first_seen_ms.insert(txid, now_ms);
                }
            }
        }
    }

    fn decide(&mut self, now_ms: u64, outcomes: &[(Txid, bool)]) {
        for &(txid, was_committed) in outcomes {
            // Absent: decided already (asked twice before the first answer applied).
            let Some(undecided) = self.undecided.remove(&txid) else {
                continue;
            };
            self.first_seen_ms.remove(&txid);
            self.reports.remove(&txid);
            if was_committed {
                self.offer(now_ms, undecided.record);
            }
        }
    }

    /// Takes sentinels' reports as hints (see [`ArchiverInput::Outcomes`]).
    fn hear(&mut self, outcomes: Vec<(Txid, bool)>) {
        for (txid, committed) in outcomes {
            if !self.undecided.contains_key(&txid) {
                continue;
            }
            let reported = self.reports.entry(txid).or_default();
            if committed {
                reported.committed = true;
            } else {
                reported.refusals = reported.refusals.saturating_add(1);
            }
        }
    }

    /// Seals and appends every block the waiting records make (`full_only`: only while a full
    /// block's worth waits).
    fn seal(&mut self, full_only: bool) {
        while !full_only || self.ledger.waiting() >= self.config.ledger.block_records_max {
            let Some(block) = self.ledger.seal() else { break };
            self.ledger.apply(&block).expect("a sealed block extends the ledger");
            self.blocks.push(block);
        }
    }

    fn apply_command(&mut self, now_ms: u64, command: &ArchiverCommand) {
        match command {
            ArchiverCommand::WriteAhead(records) => {
                for record in records {
                    let txid = record.txid();
                    let undecided = self.undecided.entry(txid).or_insert_with(|| Undecided {
                        record: record.clone(),
                        copies: 0,
                    });
                    // Saturates: four billion copies of one transaction are not a count to keep.
                    undecided.copies = undecided.copies.saturating_add(1);
                    if self.leading {
                        self.first_seen_ms.entry(txid).or_insert(now_ms);
                    }
                }
            }
            ArchiverCommand::Settle(outcomes) => self.decide(now_ms, outcomes),
            ArchiverCommand::Seal => self.seal(false),
        }
        self.seal(true);
    }
}

impl Role for Archiver {
    type Command = ArchiverCommand;
    type Input = ArchiverInput;
    type Peer = Infallible;
    type Message = Infallible;
    type Reply = ArchiverReply;
    type Report = ArchiverReport;

    fn lead(&mut self, now_ms: u64) {
        self.leading = true;
        self.first_seen_ms = self.undecided.keys().map(|txid| (*txid, now_ms)).collect();
        self.offered_since_seal = self.ledger.waiting() > 0;
        self.next_seal_ms = Some(now_ms + self.config.seal_interval_ms);
    }

    fn follow(&mut self) {
        self.leading = false;
        self.first_seen_ms.clear();
        self.reports.clear();
        self.next_seal_ms = None;
        self.sealing = false;
        self.offered_since_seal = false;
        self.stale_cursor = None;
        self.proposed_records = 0;
        for ticket in std::mem::take(&mut self.proposed).into_iter().flatten() {
            self.reply(ticket, ArchiverReply::Dropped);
        }
    }

    fn handle(&mut self, now_ms: u64, input: ArchiverInput) {
        match input {
            ArchiverInput::Read { ticket, read } => {
                let reply = self.read(read);
                self.reply(ticket, ArchiverReply::Read(reply));
            }
            ArchiverInput::WriteAhead { ticket, .. }
            | ArchiverInput::Outcomes { ticket, .. }
            | ArchiverInput::Stale { ticket }
            | ArchiverInput::Evidence { ticket, .. }
                if !self.leading =>
            {
                self.reply(ticket, ArchiverReply::Dropped)
            }
            ArchiverInput::WriteAhead { ticket, records } => self.write_ahead(ticket, records),
            ArchiverInput::Outcomes { ticket, outcomes } if outcomes.len() > self.config.batch_records_max => {
                self.reply(ticket, ArchiverReply::Busy)
            }
            ArchiverInput::Outcomes { ticket, outcomes } => {
                self.hear(outcomes);
                self.reply(ticket, ArchiverReply::Decided);
            }
            ArchiverInput::Stale { ticket } => {
                let stale = self.stale(now_ms);
                self.reply(ticket, ArchiverReply::Stale(stale));
            }
            ArchiverInput::Evidence { ticket, asked, present } => {
                let settled = self.settle(&asked, &present);
                // Each verdict on a record nobody reported, for the operator.
                let unreported: Vec<bool> = (settled.iter())
                    .filter(|(txid, _)| !self.reports.contains_key(txid))
                    .map(|(_, committed)| *committed)
                    .collect();
                let committed = unreported.iter().filter(|committed| **committed).count();
                let not_committed = unreported.len() - committed;
                self.verdicts.unreported += unreported.len() as u64;
                self.verdicts.reported += (settled.len() - unreported.len()) as u64;
                if committed + not_committed > 0 {
                    self.outputs.push_back(Output::Report(ArchiverReport::Settled {
                        committed,
                        not_committed,
                    }));
                }
                if !settled.is_empty() {
                    self.propose(None, ArchiverCommand::Settle(settled));
                }
                self.reply(ticket, ArchiverReply::Decided);
            }
        }
    }

    fn apply(&mut self, now_ms: u64, command: &ArchiverCommand) {
        self.apply_command(now_ms, command);
        if !self.leading {
            return;
        }
        match command {
            ArchiverCommand::WriteAhead(records) => {
                self.proposed_records = self.proposed_records.saturating_sub(records.len());
            }
            ArchiverCommand::Seal => self.sealing = false,
            ArchiverCommand::Settle(_) => {}
        }
        if let Some(Some(ticket)) = self.proposed.pop_front() {
            let reply = match command {
                ArchiverCommand::WriteAhead(_) => ArchiverReply::Written,
                _ => ArchiverReply::Decided,
            };
            self.reply(ticket, reply);
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        if !self.leading {
            return;
        }
        self.next_seal_ms = Some(now_ms + self.config.seal_interval_ms);
        // One seal in flight at a time is enough: it seals whatever waits when it applies.
        let sealing = self
            .outputs
            .iter()
            .any(|o| matches!(o, Output::Propose(ArchiverCommand::Seal)));
        if self.ledger.waiting() > 0 && !sealing {
            self.propose(None, ArchiverCommand::Seal);
        }
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.next_seal_ms
    }
}

/// Why a command or snapshot is refused, or the state is inconsistent.
#[derive(Debug, thiserror::Error)]
pub enum ArchiverStateError {
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("the snapshot's blocks do not replay: {0}")]
    Replay(#[from] BlockError),
    #[error("the ledger is at height {ledger} but {blocks} blocks are kept")]
    Blocks { ledger: u64, blocks: usize },
    #[error("undecided transaction {txid} has no copy left")]
    NoCopies { txid: Txid },
    #[error("waiting transaction {txid} is in the ledger already, twice in the room, or has no room")]
    Waiting { txid: Txid },
    #[error("undecided transaction {txid} is out of order or repeated")]
    UndecidedOrder { txid: Txid },
}

const COMMAND_WRITE_AHEAD: u8 = 1;
// 2 is not used (it was the sentinels' outcomes, before they became hints).
const COMMAND_SETTLE: u8 = 3;
const COMMAND_SEAL: u8 = 4;
const SNAPSHOT_VERSION: u8 = 1;
/// A record is at least its transaction's three counts and its endorsements' count and flag.
const RECORD_BYTES_MIN: usize = 33;

/// Outcomes as the archiver's commands and the sentinels' reports (wire tag 15) carry them:
/// `count ‖ (txid ‖ 0x00 | 0x01)*`.
pub fn put_outcomes(out: &mut Vec<u8>, outcomes: &[(Txid, bool)]) {
    put_count(out, outcomes.len());
    for (txid, committed) in outcomes {
        out.extend_from_slice(&txid.0);
        out.push(u8::from(*committed));
    }
}

/// Reads what [`put_outcomes`] writes, at most `max` outcomes.
pub fn read_outcomes(reader: &mut Reader<'_>, max: usize) -> Result<Vec<(Txid, bool)>, DecodeError> {
    reader.read_vec("outcomes", max as u64, 33, |r| {
        Ok((Txid(r.read_array("txid")?), r.read_bool("committed")?))
    })
}

fn read_records(reader: &mut Reader<'_>, max: usize) -> Result<Vec<Record>, DecodeError> {
    let limits = RecordLimits::default();
    reader.read_vec("records", max as u64, RECORD_BYTES_MIN, |r| {
        Record::decode_from(r, &limits)
    })
}

impl Archiver {
    fn block_limits(&self) -> BlockLimits {
        BlockLimits {
            records_max: self.config.ledger.block_records_max,
            ..BlockLimits::default()
        }
    }
}

impl Durable for Archiver {
    type StateError = ArchiverStateError;

    /// `0x01 ‖ records` (write ahead) | `0x03 ‖ outcomes` (settle) |
    /// `0x04` (seal); an outcome is `txid ‖ 0x00 | 0x01` (committed).
    fn encode_command(command: &ArchiverCommand) -> Vec<u8> {
        let mut out = Vec::new();
        match command {
            ArchiverCommand::WriteAhead(records) => {
                out.push(COMMAND_WRITE_AHEAD);
                specie_codec::put_vec(&mut out, records);
            }
            ArchiverCommand::Settle(outcomes) => {
                out.push(COMMAND_SETTLE);
                put_outcomes(&mut out, outcomes);
            }
            ArchiverCommand::Seal => out.push(COMMAND_SEAL),
        }
        out
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<ArchiverCommand, ArchiverStateError> {
        let max = self.config.batch_records_max;
        let command = specie_codec::decode_bounded("archiver command", bytes, bytes.len(), |reader| {
            Ok(match reader.read_u8("archiver command")? {
                COMMAND_WRITE_AHEAD => ArchiverCommand::WriteAhead(read_records(reader, max)?),
                COMMAND_SETTLE => ArchiverCommand::Settle(read_outcomes(reader, max)?),
                COMMAND_SEAL => ArchiverCommand::Seal,
                kind => {
                    return Err(DecodeError::UnknownKind {
                        what: "archiver command",
                        kind,
                    })
                }
            })
        })?;
        Ok(command)
    }

    /// `version ‖ blocks ‖ waiting records ‖ count ‖ (record ‖ copies (u32))*`, undecided
    /// records in txid order.
    fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![SNAPSHOT_VERSION];
        specie_codec::put_vec(&mut out, &self.blocks);
        let waiting: Vec<Record> = self.ledger.waiting_records().cloned().collect();
        specie_codec::put_vec(&mut out, &waiting);
        put_count(&mut out, self.undecided.len());
        for undecided in self.undecided.values() {
            undecided.record.encode_to(&mut out);
            put_u32(&mut out, undecided.copies);
        }
        out
    }

    /// Refuses, and changes nothing, unless the snapshot is canonical: its blocks replay from
    /// genesis, its waiting records each find a place, its undecided records come in strictly
    /// ascending txid order with at least one copy each.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), ArchiverStateError> {
        let limits = self.block_limits();
        // A block is at least its header and its record count.
        let block_bytes_min = BlockHeader::encoded_bytes_max(&()) + 8;
        let (blocks, waiting, undecided) =
            specie_codec::decode_bounded("archiver snapshot", snapshot, snapshot.len(), |r| {
                r.read_version("archiver snapshot", SNAPSHOT_VERSION)?;
                let blocks = r.read_vec("blocks", u64::MAX, block_bytes_min, |r| Block::decode_from(r, &limits))?;
                let waiting = read_records(r, usize::MAX)?;
                let undecided = r.read_vec("undecided", u64::MAX, RECORD_BYTES_MIN + 4, |r| {
                    let record = Record::decode_from(r, &RecordLimits::default())?;
                    Ok(Undecided {
                        record,
                        copies: r.read_u32("copies")?,
                    })
                })?;
                Ok((blocks, waiting, undecided))
            })?;
        let mut ledger = LedgerOfRecord::replay(self.config.ledger, &blocks)?;
        for record in waiting {
            let txid = record.txid();
            if ledger.offer(record) != Offered::Waiting {
                return Err(ArchiverStateError::Waiting { txid });
            }
        }
        let mut undecided_by_txid = BTreeMap::new();
        for undecided in undecided {
            let txid = undecided.record.txid();
            if undecided_by_txid
                .last_key_value()
                .is_some_and(|(last, _)| *last >= txid)
            {
                return Err(ArchiverStateError::UndecidedOrder { txid });
            }
            if undecided.copies == 0 {
                return Err(ArchiverStateError::NoCopies { txid });
            }
            undecided_by_txid.insert(txid, undecided);
        }
        self.ledger = ledger;
        self.blocks = blocks;
        self.undecided = undecided_by_txid;
        self.first_seen_ms.clear();
        self.check_invariants()
    }

    fn check_invariants(&self) -> Result<(), ArchiverStateError> {
        if self.ledger.height() != self.blocks.len() as u64 {
            return Err(ArchiverStateError::Blocks {
                ledger: self.ledger.height(),
                blocks: self.blocks.len(),
            });
        }
        if let Some((txid, _)) = self.undecided.iter().find(|(_, u)| u.copies == 0) {
            return Err(ArchiverStateError::NoCopies { txid: *txid });
        }
        Ok(())
    }
}
