//! The ledger's state: the chain's head, the UHS it replays to, where each transaction is, and
//! the confirmed transactions waiting for a block.

use std::collections::{HashMap, HashSet, VecDeque};

use sha2::{Digest, Sha256};
use specie_transaction::{Txid, UhsId};

use crate::block::{Block, BlockError, BlockHeader};
use crate::dispute::{BlockAbsence, DisputeProof, Finding, SortedTxids};
use crate::query::LedgerEntry;
use crate::record::Record;
use crate::supply::Supply;

/// How much the ledger holds back and seals at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerLimits {
    /// Records in one block.
    pub block_records_max: usize,
    /// Confirmed transactions waiting for a block (their inputs' transactions may not have
    /// arrived yet); beyond it, offers are refused and the caller must send them again.
    pub waiting_records_max: usize,
}

impl Default for LedgerLimits {
    fn default() -> Self {
        LedgerLimits {
            block_records_max: 10_000,
            waiting_records_max: 1 << 20,
        }
    }
}

/// Where a transaction is in the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Located {
    pub height: u64,
    pub position: u32,
}

/// What became of an offered record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offered {
    /// It waits for a block.
    Waiting,
    /// It is in the ledger, or waiting, already.
    Known,
    /// The waiting room is full: offer it again later.
    Full,
}

/// The ledger of record's state.
#[derive(Debug)]
pub struct LedgerOfRecord {
    limits: LedgerLimits,
    headers: Vec<BlockHeader>,
    /// Each block's txids, ascending, with their tree, for absence proofs.
    sorted_txids: Vec<SortedTxids>,
    uhs: HashSet<UhsId>,
    located: HashMap<Txid, Located>,
    waiting: VecDeque<Record>,
    waiting_ids: HashSet<Txid>,
    /// What the blocks did to the circulating supply.
    supply: Supply,
}

impl LedgerOfRecord {
    pub fn new(limits: LedgerLimits) -> LedgerOfRecord {
        assert!(limits.block_records_max > 0 && limits.waiting_records_max > 0);
        LedgerOfRecord {
            limits,
            headers: Vec::new(),
            sorted_txids: Vec::new(),
            uhs: HashSet::new(),
            located: HashMap::new(),
            waiting: VecDeque::new(),
            waiting_ids: HashSet::new(),
            supply: Supply::default(),
        }
    }

    /// The ledger `blocks` make, checked block by block from genesis.
    pub fn replay<'a>(
        limits: LedgerLimits,
        blocks: impl IntoIterator<Item = &'a Block>,
    ) -> Result<LedgerOfRecord, BlockError> {
        let mut ledger = LedgerOfRecord::new(limits);
        for block in blocks {
            ledger.apply(block)?;
        }
        Ok(ledger)
    }

    pub fn height(&self) -> u64 {
        self.headers.len() as u64
    }

    pub fn head(&self) -> Option<&BlockHeader> {
        self.headers.last()
    }

    pub fn header(&self, height: u64) -> Option<&BlockHeader> {
        let index = usize::try_from(height.checked_sub(1)?).ok()?;
        self.headers.get(index)
    }

    pub fn locate(&self, txid: &Txid) -> Option<Located> {
        self.located.get(txid).copied()
    }

    /// Headers 1 to `height` (all of them if the ledger is shorter).
    pub fn headers_through(&self, height: u64) -> &[BlockHeader] {
        let count = usize::try_from(height).unwrap_or(usize::MAX).min(self.headers.len());
        &self.headers[..count]
    }

    /// The dispute proof of `txid` up to `height` (the head if `None`); `None` if the height is
    /// beyond the head. `block` reads a block of this ledger (its host keeps them), for the record
    /// if the transaction is in one.
    pub fn dispute<E>(
        &self,
        txid: Txid,
        height: Option<u64>,
        block: impl FnOnce(u64) -> Result<Block, E>,
    ) -> Result<Option<DisputeProof>, E> {
        let height = height.unwrap_or(self.height());
        if height > self.height() {
            return Ok(None);
        }
        let finding = match self.locate(&txid).filter(|at| at.height <= height) {
            Some(located) => Finding::Included(Box::new(LedgerEntry::of(&block(located.height)?, located))),
            None => Finding::Absent(self.absence(&txid, height).expect("in no block up to the height")),
        };
        let headers = self.headers_through(height).to_vec();
        Ok(Some(DisputeProof { txid, headers, finding }))
    }

    /// The proof that `txid` is in no block up to `height`; `None` if it is in one.
    pub fn absence(&self, txid: &Txid, height: u64) -> Option<Vec<BlockAbsence>> {
        let count = self.headers_through(height).len();
        self.sorted_txids[..count]
            .iter()
            .map(|sorted| BlockAbsence::of(sorted, txid))
            .collect()
    }

    /// What the blocks up to the head did to the circulating supply.
    pub fn supply(&self) -> &Supply {
        &self.supply
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The confirmed records waiting for a block, in the order they came.
    pub fn waiting_records(&self) -> impl Iterator<Item = &Record> {
        self.waiting.iter()
    }

    /// The count of the UHS the ledger replays to, and SHA-256 over its ids in ascending order:
    /// the digest the core's shards give for theirs (`uhs_digest`).
    pub fn uhs_digest(&self) -> (u64, [u8; 32]) {
        let mut ids: Vec<&UhsId> = self.uhs.iter().collect();
        ids.sort_unstable_by_key(|id| id.0);
        let mut hasher = Sha256::new();
        for id in &ids {
            hasher.update(id.0);
        }
        (ids.len() as u64, hasher.finalize().into())
    }

    /// A confirmed transaction for a coming block.
    pub fn offer(&mut self, record: Record) -> Offered {
        let txid = record.txid();
        if self.located.contains_key(&txid) || self.waiting_ids.contains(&txid) {
            return Offered::Known;
        }
        if self.waiting.len() >= self.limits.waiting_records_max {
            return Offered::Full;
        }
        self.waiting_ids.insert(txid);
        self.waiting.push_back(record);
        Offered::Waiting
    }

    /// The next block: waiting records in the order they came, each once every output it spends
    /// exists (in the ledger, or earlier in this block), up to the block's limit; `None` if no
    /// record can go in yet. Changes nothing until the block is applied.
    pub fn seal(&self) -> Option<Block> {
        let mut unspent_here: HashSet<UhsId> = HashSet::new();
        let mut spent_here: HashSet<UhsId> = HashSet::new();
        let mut taken = vec![false; self.waiting.len()];
        let mut chosen: Vec<Record> = Vec::new();
        // Passes until one takes nothing: a record whose inputs a later-arrived record creates is
        // taken on the pass after that one.
        loop {
            let before = chosen.len();
            for (index, record) in self.waiting.iter().enumerate() {
                if taken[index] || chosen.len() == self.limits.block_records_max {
                    continue;
                }
                let spendable = record
                    .spent()
                    .iter()
                    .all(|id| !spent_here.contains(id) && (self.uhs.contains(id) || unspent_here.contains(id)));
                let fresh = record
                    .created()
                    .iter()
                    .all(|id| !self.uhs.contains(id) && !unspent_here.contains(id) && !spent_here.contains(id));
                if spendable && fresh {
                    taken[index] = true;
                    for id in record.spent() {
                        unspent_here.remove(id);
                        spent_here.insert(*id);
                    }
                    unspent_here.extend(record.created().iter().copied());
                    chosen.push(record.clone());
                }
            }
            if chosen.len() == before {
                break;
            }
        }
        (!chosen.is_empty()).then(|| Block::seal(self.head(), chosen))
    }

    /// Appends `block`, checked whole first: a block that does not follow the head, does not
    /// commit to its records, repeats a transaction, spends what is not unspent or creates what
    /// exists changes nothing.
    pub fn apply(&mut self, block: &Block) -> Result<(), BlockError> {
        let height = block.header.height;
        if height != self.height() + 1 {
            return Err(BlockError::Height {
                head: self.height(),
                got: height,
            });
        }
        if block.header.previous != self.head().map_or([0; 32], BlockHeader::hash) {
            return Err(BlockError::Previous { height });
        }
        if block.records.len() > self.limits.block_records_max {
            return Err(BlockError::TooLarge {
                height,
                records_max: self.limits.block_records_max,
            });
        }
        // The txids tree is built once, to check the header and to keep for absence proofs.
        let sorted = SortedTxids::new(&block.records);
        if !block.commits_to_records_in_order() || sorted.root() != block.header.txids_root {
            return Err(BlockError::Records { height });
        }
        self.check_replay(block)?;
        for (position, record) in block.records.iter().enumerate() {
            for id in record.spent() {
                let removed = self.uhs.remove(id);
                assert!(removed, "checked: every spent id is unspent");
            }
            for id in record.created() {
                let inserted = self.uhs.insert(*id);
                assert!(inserted, "checked: every created id is new");
            }
            self.supply.add(record.transaction());
            let position = u32::try_from(position).expect("a block holds fewer than 2^32 records");
            self.located.insert(record.txid(), Located { height, position });
        }
        self.headers.push(block.header);
        self.sorted_txids.push(sorted);
        if !self.waiting.is_empty() {
            self.waiting.retain(|record| !self.located.contains_key(&record.txid()));
            self.waiting_ids.retain(|txid| !self.located.contains_key(txid));
        }
        Ok(())
    }

    /// Whether `block`'s records replay in order on the ledger's UHS, without changing it.
    fn check_replay(&self, block: &Block) -> Result<(), BlockError> {
        let height = block.header.height;
        let mut removed: HashSet<UhsId> = HashSet::new();
        let mut added: HashSet<UhsId> = HashSet::new();
        let mut txids: HashSet<Txid> = HashSet::new();
        for (position, record) in block.records.iter().enumerate() {
            let txid = record.txid();
            if self.located.contains_key(&txid) || !txids.insert(txid) {
                return Err(BlockError::Repeated {
                    height,
                    position,
                    txid: txid.to_string(),
                });
            }
            for id in record.spent() {
                let unspent = (self.uhs.contains(id) && !removed.contains(id)) || added.contains(id);
                if !unspent {
                    return Err(BlockError::SpendsUnknown {
                        height,
                        position,
                        uhs_id: id.to_string(),
                    });
                }
                if !added.remove(id) {
                    removed.insert(*id);
                }
            }
            for id in record.created() {
                let exists = (self.uhs.contains(id) && !removed.contains(id)) || added.contains(id);
                if exists {
                    return Err(BlockError::CreatesExisting {
                        height,
                        position,
                        uhs_id: id.to_string(),
                    });
                }
                added.insert(*id);
            }
        }
        Ok(())
    }
}
