//! What a ledger of record answers: its head, and a transaction's place with the proof of it.

use specie_merkle::InclusionProof;

use crate::block::{Block, BlockHeader, RECORDS_DOMAIN};
use crate::ledger::Located;
use crate::record::Record;

/// The ledger's head and how far it is behind the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerHead {
    pub height: u64,
    pub head: Option<BlockHeader>,
    /// The UHS the blocks replay to: count and digest (as the shards' `uhs_digest`).
    pub uhs: (u64, [u8; 32]),
    /// Confirmed transactions not in a block yet.
    pub waiting: usize,
    /// Written-ahead transactions whose outcome is not known yet.
    pub undecided: usize,
}

/// A transaction's place in the ledger, with what anyone needs to check it: the record (whose
/// leaf the proof starts from), the inclusion proof and the block's header.
#[derive(Clone, Debug)]
pub struct LedgerEntry {
    pub located: Located,
    pub header: BlockHeader,
    pub record: Record,
    pub proof: InclusionProof,
}

impl LedgerEntry {
    /// The record at `located` in `block` (which must be the block at that height), with its
    /// proof.
    ///
    /// # Panics
    /// If the block has no record at that position.
    pub fn of(block: &Block, located: Located) -> LedgerEntry {
        let position = located.position as usize;
        LedgerEntry {
            located,
            header: block.header,
            record: block.records[position].clone(),
            proof: block.prove(position).expect("a located record is in its block"),
        }
    }

    /// Whether the proof takes the record's leaf to the header's records root at the stated
    /// height. That the header is the ledger's at that height is checked against the chain of
    /// headers (each names the hash of the one before), which the checker gets elsewhere.
    pub fn verifies(&self) -> bool {
        self.header.height == self.located.height
            && self.proof.index == u64::from(self.located.position)
            && self.proof.leaves == u64::from(self.header.records)
            && self
                .proof
                .verify(RECORDS_DOMAIN, &self.record.leaf(), &self.header.records_root)
                == Ok(())
    }
}
