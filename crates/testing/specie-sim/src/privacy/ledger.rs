//! The ledger of record's reconciliation after crashes, as the embedded node runs it
//! (`specie-node`'s `archive.rs`): every record is written ahead before the shards see it, the
//! shards' outcomes reach the archiver later and are never written down, blocks are sealed from
//! the committed records, and a restart replays the blocks, then decides the records written
//! ahead but in no block by the UHS (`specie_archiver::committed`) and seals the committed ones.
//! The node's host logic (the undecided copies, the pending log's compaction) is mirrored here
//! on in-memory "disks"; the decisions themselves are the archiver crate's own functions.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use specie_archiver::{committed, created_ids, Block, LedgerLimits, LedgerOfRecord, Offered, Record, RecordError};
use specie_transaction::{
    CompactTransaction, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction, Transaction, Txid, UhsId,
};

use super::{chance, violation, PrivacyOptions, PrivacyReport};
use crate::Violation;

const MINT_OUTPUTS: u64 = 4;
const COIN_VALUE: u64 = 1_000;

/// The shards as one model UHS: transactions are decided in the order the coordinator got them;
/// a spend of what is not unspent, or the creation of an id that ever existed, is refused.
#[derive(Default)]
pub(super) struct ModelUhs {
    pub(super) unspent: BTreeSet<UhsId>,
    ever_created: BTreeSet<UhsId>,
    /// Handed to the coordinator, not yet decided.
    queue: VecDeque<Record>,
    pub(super) committed: BTreeSet<Txid>,
}

impl ModelUhs {
    /// Decides `tx`, the compact form the shards apply (for an honest sentinel, its record's).
    pub(super) fn decide(&mut self, tx: &CompactTransaction) -> bool {
        let distinct: BTreeSet<&UhsId> = tx.spent.iter().collect();
        let spendable = distinct.len() == tx.spent.len() && distinct.iter().all(|id| self.unspent.contains(id));
        let fresh = tx.created.iter().all(|id| !self.ever_created.contains(id));
        if !(spendable && fresh) {
            return false;
        }
        for id in &tx.spent {
            self.unspent.remove(id);
        }
        self.unspent.extend(tx.created.iter().copied());
        self.ever_created.extend(tx.created.iter().copied());
        self.committed.insert(tx.txid);
        true
    }

    /// The digest `LedgerOfRecord::uhs_digest` gives for the same set: its count, and SHA-256
    /// over its ids in ascending order.
    pub(super) fn digest(&self) -> (u64, [u8; 32]) {
        let mut hasher = Sha256::new();
        for id in &self.unspent {
            hasher.update(id.0);
        }
        (self.unspent.len() as u64, hasher.finalize().into())
    }
}

/// The archiver's memory, lost in a crash.
struct Archiver {
    ledger: LedgerOfRecord,
    /// Written ahead, outcome unknown, with how many copies were submitted.
    undecided: BTreeMap<Txid, (Record, u32)>,
    /// Outcomes the shards sent that have not reached the archiver yet.
    inbox: VecDeque<(Txid, bool)>,
}

/// Payers spending coins: the coins of every transaction submitted (committed or not, so
/// descendants of a refused transaction are refused too), and coins spent already, to spend again.
pub(super) struct Payers {
    issuer: secp256k1::Keypair,
    coins: Vec<CreatedOutput>,
    spent_coins: Vec<CreatedOutput>,
    mints: u64,
    outputs: u64,
}

struct World<'a> {
    options: &'a PrivacyOptions,
    report: &'a mut PrivacyReport,
    trace: &'a mut Sha256,
    rng: StdRng,
    step: u64,
    limits: LedgerLimits,
    /// Durable: the blocks log and the pending log.
    blocks: Vec<Block>,
    pending_log: Vec<Record>,
    archiver: Archiver,
    uhs: ModelUhs,
    payers: Payers,
    /// Every transaction in a block, each in exactly one.
    sealed: BTreeSet<Txid>,
}

pub(super) fn run(options: &PrivacyOptions, report: &mut PrivacyReport, trace: &mut Sha256) -> Result<(), Violation> {
    let limits = LedgerLimits {
        block_records_max: options.block_records_max,
        ..LedgerLimits::default()
    };
    let mut world = World {
        options,
        report,
        trace,
        rng: StdRng::seed_from_u64(options.seed ^ 0x1ed9_e500),
        step: 0,
        limits,
        blocks: Vec::new(),
        pending_log: Vec::new(),
        archiver: Archiver {
            ledger: LedgerOfRecord::new(limits),
            undecided: BTreeMap::new(),
            inbox: VecDeque::new(),
        },
        uhs: ModelUhs::default(),
        payers: Payers::new(),
        sealed: BTreeSet::new(),
    };
    while world.step < options.ledger_steps {
        world.step += 1;
        world.act()?;
    }
    // The last restart: everything the coordinator holds is finished, and the node recovers.
    world.step += 1;
    world.crash_and_recover(true)
}

impl World<'_> {
    fn violation(&self, message: impl Into<String>) -> Violation {
        violation(self.options, self.step, format!("ledger of record: {}", message.into()))
    }

    fn act(&mut self) -> Result<(), Violation> {
        for _ in 0..self.rng.gen_range(1..=3) {
            let record = self.next_transaction()?;
            let copies = if chance(&mut self.rng, self.options.submitted_twice_per_mille) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                self.write_ahead(record.clone());
                self.uhs.queue.push_back(record.clone());
            }
        }
        let decided = self.rng.gen_range(0..=self.uhs.queue.len());
        self.shards_decide(decided);
        let delivered = self.rng.gen_range(0..=self.archiver.inbox.len());
        let outcomes: Vec<(Txid, bool)> = self.archiver.inbox.drain(..delivered).collect();
        self.decide(outcomes);
        if chance(&mut self.rng, self.options.seal_per_mille) {
            self.seal_all()?;
            if self.rng.gen_bool(0.5) {
                self.compact_pending_log();
            }
        }
        if chance(&mut self.rng, self.options.crash_per_mille) {
            self.crash_and_recover(false)?;
        }
        Ok(())
    }

    fn next_transaction(&mut self) -> Result<Record, Violation> {
        self.payers
            .next_record(&mut self.rng, self.options.double_spend_per_mille)
            .map_err(|e| self.violation(e.to_string()))
    }

    /// The node's write-ahead: durable before the coordinator sees the transaction.
    fn write_ahead(&mut self, record: Record) {
        self.pending_log.push(record.clone());
        self.archiver.undecided.entry(record.txid()).or_insert((record, 0)).1 += 1;
    }

    /// The shards decide the first `count` transactions the coordinator holds.
    fn shards_decide(&mut self, count: usize) {
        for record in self.uhs.queue.drain(..count).collect::<Vec<_>>() {
            let committed = self.uhs.decide(record.compact());
            if committed {
                self.report.committed += 1;
            } else {
                self.report.refused += 1;
                self.payers.forget_coins_of(&record);
            }
            self.trace.update(record.txid().0);
            self.trace.update([u8::from(committed)]);
            self.archiver.inbox.push_back((record.txid(), committed));
        }
    }

    /// The node's `Archive::decide`: a committed transaction waits for a block; a transaction
    /// sent twice is forgotten once both copies are decided, or once one is committed.
    fn decide(&mut self, outcomes: Vec<(Txid, bool)>) {
        for (txid, committed) in outcomes {
            let Some((_, copies)) = self.archiver.undecided.get_mut(&txid) else {
                continue;
            };
            *copies -= 1;
            if committed {
                let (record, _) = self.archiver.undecided.remove(&txid).expect("present");
                let offered = self.archiver.ledger.offer(record);
                assert_eq!(offered, Offered::Waiting, "the waiting room holds the whole run");
            } else if *copies == 0 {
                self.archiver.undecided.remove(&txid);
            }
        }
    }

    /// Seals every block the waiting records make; each must hold only committed transactions,
    /// none of them in an earlier block.
    fn seal_all(&mut self) -> Result<(), Violation> {
        while let Some(block) = self.archiver.ledger.seal() {
            self.archiver
                .ledger
                .apply(&block)
                .map_err(|e| self.violation(format!("a sealed block does not extend the ledger: {e}")))?;
            for record in &block.records {
                let txid = record.txid();
                if !self.uhs.committed.contains(&txid) {
                    return Err(self.violation(format!(
                        "transaction {txid} is in a block, but the shards never committed it"
                    )));
                }
                if !self.sealed.insert(txid) {
                    return Err(self.violation(format!("transaction {txid} is in two blocks")));
                }
            }
            self.trace.update(block.header.hash());
            self.report.blocks += 1;
            self.blocks.push(block);
        }
        Ok(())
    }

    /// The node's compaction: the pending log keeps only what is undecided or not yet sealed.
    fn compact_pending_log(&mut self) {
        let mut keep: Vec<Record> = self
            .archiver
            .undecided
            .values()
            .map(|(record, _)| record.clone())
            .collect();
        keep.extend(self.archiver.ledger.waiting_records().cloned());
        self.pending_log = keep;
    }

    /// A crash: the coordinator finishes some of what it holds (all of it when `finish_all`) and
    /// never sees the rest; the archiver's memory is gone. The node restarts from its logs.
    fn crash_and_recover(&mut self, finish_all: bool) -> Result<(), Violation> {
        let finished = if finish_all {
            self.uhs.queue.len()
        } else {
            self.report.crashes += 1;
            self.rng.gen_range(0..=self.uhs.queue.len())
        };
        self.shards_decide(finished);
        self.report.lost_in_crash += self.uhs.queue.len() as u64;
        for record in std::mem::take(&mut self.uhs.queue) {
            self.payers.forget_coins_of(&record);
        }
        self.trace.update(b"crash");
        let ledger = LedgerOfRecord::replay(self.limits, &self.blocks)
            .map_err(|e| self.violation(format!("the blocks do not replay from genesis: {e}")))?;
        self.archiver = Archiver {
            ledger,
            undecided: BTreeMap::new(),
            inbox: VecDeque::new(),
        };
        self.reconcile();
        self.seal_all()?;
        self.compact_pending_log();
        self.check_recovered()
    }

    /// The node's `Archive::open` and `reconcile`: the records written ahead and in no block
    /// (once each) are decided by which of the ids they create the UHS holds.
    fn reconcile(&mut self) {
        let ledger = &self.archiver.ledger;
        let mut seen = HashSet::new();
        let written: Vec<Record> = self
            .pending_log
            .iter()
            .filter(|record| ledger.locate(&record.txid()).is_none() && seen.insert(record.txid()))
            .cloned()
            .collect();
        if self.options.skip_reconciliation {
            return;
        }
        let in_uhs: HashSet<UhsId> = created_ids(&written)
            .into_iter()
            .filter(|id| self.uhs.unspent.contains(id))
            .collect();
        let decided = committed(&written, &in_uhs);
        for (record, committed) in written.into_iter().zip(decided) {
            if committed {
                self.report.reconciled += 1;
                let offered = self.archiver.ledger.offer(record);
                assert_eq!(offered, Offered::Waiting, "distinct, and in no block");
            }
        }
    }

    /// After a recovery the shards are at rest: the ledger holds exactly what they committed.
    fn check_recovered(&self) -> Result<(), Violation> {
        if let Some(missing) = self.uhs.committed.difference(&self.sealed).next() {
            return Err(self.violation(format!("committed transaction {missing} is in no block after recovery")));
        }
        let model = self.uhs.digest();
        let replayed = LedgerOfRecord::replay(self.limits, &self.blocks)
            .map_err(|e| self.violation(format!("the blocks do not replay from genesis: {e}")))?;
        for (what, ledger) in [
            ("the recovered ledger", &self.archiver.ledger),
            ("a replay from genesis", &replayed),
        ] {
            let (count, digest) = ledger.uhs_digest();
            if (count, digest) != model {
                return Err(self.violation(format!(
                    "after recovery {what} gives UHS digest {} over {count} ids, the shards {} over {}",
                    hex::encode(&digest[..8]),
                    hex::encode(&model.1[..8]),
                    model.0
                )));
            }
            if !ledger.supply().balanced() {
                return Err(self.violation(format!(
                    "after recovery {what}'s supply tallies disagree: {:?}",
                    ledger.supply()
                )));
            }
        }
        if replayed.supply() != self.archiver.ledger.supply() {
            return Err(self.violation("the recovered ledger's supply is not a replay's from genesis".to_string()));
        }
        Ok(())
    }
}

impl Payers {
    pub(super) fn new() -> Payers {
        Payers {
            issuer: secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[0x1e; 32]).expect("a valid key"),
            coins: Vec::new(),
            spent_coins: Vec::new(),
            mints: 0,
            outputs: 0,
        }
    }

    /// A payment of one or two coins, sometimes of a coin spent already; a mint when coins run
    /// short.
    pub(super) fn next_record(&mut self, rng: &mut StdRng, double_spend_per_mille: u32) -> Result<Record, RecordError> {
        let transaction = if self.coins.len() < 2 {
            self.mints += 1;
            let mut nonce = [0u8; 32];
            nonce[..8].copy_from_slice(&self.mints.to_le_bytes());
            let outputs = (0..MINT_OUTPUTS).map(|_| self.output(COIN_VALUE)).collect();
            SpecieTransaction::Mint(MintTransaction::new_signed(
                nonce,
                outputs,
                &self.issuer,
                NonceMode::Deterministic,
            ))
        } else {
            let mut inputs = Vec::new();
            let spend_again = chance(rng, double_spend_per_mille);
            if let (true, Some(coin)) = (spend_again, self.spent_coins.choose(rng)) {
                inputs.push(coin.to_input());
            } else {
                let coin = self.coins.swap_remove(rng.gen_range(0..self.coins.len()));
                inputs.push(coin.to_input());
                self.spent_coins.push(coin);
            }
            if rng.gen_bool(0.5) && !self.coins.is_empty() {
                let coin = self.coins.swap_remove(rng.gen_range(0..self.coins.len()));
                inputs.push(coin.to_input());
                self.spent_coins.push(coin);
            }
            let total: u64 = inputs.iter().map(|input| input.data.value).sum();
            let outputs = vec![self.output(total / 2), self.output(total - total / 2)];
            SpecieTransaction::Transfer(Transaction {
                inputs,
                outputs,
                witnesses: vec![],
            })
        };
        self.coins.extend(transaction.created_outputs());
        Record::new(transaction.clone(), &transaction.compact())
    }

    /// A payer told that its transaction failed does not spend what it would have created.
    pub(super) fn forget_coins_of(&mut self, record: &Record) {
        self.coins.retain(|coin| !record.created().contains(&coin.uhs_id));
    }

    fn output(&mut self, value: u64) -> Output {
        self.outputs += 1;
        let mut owner = [0u8; 32];
        // Distinct owners keep every output, so every transaction, apart.
        owner[..8].copy_from_slice(&self.outputs.to_le_bytes());
        Output {
            witness_program_commitment: owner,
            value,
        }
    }
}
