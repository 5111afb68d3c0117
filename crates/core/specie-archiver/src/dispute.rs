//! Dispute resolution (the Fabric CBDC framework, §1–§2): given a txid and a height, a proof that
//! anyone can check with no trust in whoever made it that the transaction is, or is not, in the
//! ledger of record up to that height.
//!
//! The proof carries the chain of headers from genesis to that height; the checker compares the
//! last header's hash with the head it trusts (from its own replay, an auditor's, or a published
//! one). Inclusion is the record with its Merkle path to the block's records root. Absence is, for
//! every block, the two adjacent txids around it in the block's ascending txids tree (or one at an
//! end, or none in an empty block): each header commits to that tree (`txids_root`), and every
//! replay of a block checks the tree is of its txids in ascending order.

use specie_codec::{put_count, put_u64, Decode, DecodeError, Encode, Reader};
use specie_merkle::InclusionProof;
use specie_transaction::Txid;

use crate::block::{txid_leaf, BlockHeader, TXIDS_DOMAIN};
use crate::ledger::Located;
use crate::query::LedgerEntry;
use crate::record::{Record, RecordLimits};

const DISPUTE_VERSION: u8 = 1;
const HEADER_BYTES: usize = 1 + 8 + 32 + 4 + 32 + 32;

/// A block's txids in ascending order with their tree, every level kept, so that a proof of
/// absence takes O(log n) per block and not a rebuild of the tree (about 100 bytes a
/// transaction in memory).
#[derive(Clone, Debug)]
pub struct SortedTxids {
    txids: Vec<Txid>,
    tree: specie_merkle::Tree,
}

impl SortedTxids {
    pub fn new(records: &[crate::record::Record]) -> SortedTxids {
        let txids = crate::block::sorted_txids(records);
        let leaves = txids.iter().map(txid_leaf).collect();
        SortedTxids {
            tree: specie_merkle::Tree::new(TXIDS_DOMAIN, leaves),
            txids,
        }
    }

    /// The root its block's header commits to.
    pub fn root(&self) -> [u8; 32] {
        self.tree.root()
    }
}

/// A txid of a block's txids tree with its path to the tree's root.
pub type TxidLeaf = (Txid, InclusionProof);

/// Why a transaction is in no block: its neighbours in the block's ascending txids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockAbsence {
    pub below: Option<TxidLeaf>,
    pub above: Option<TxidLeaf>,
}

impl BlockAbsence {
    /// The absence of `txid` from the block whose ascending txids are `sorted`; `None` if it is
    /// there.
    pub fn of(sorted: &SortedTxids, txid: &Txid) -> Option<BlockAbsence> {
        let at = sorted.txids.binary_search(txid).err()?;
        let leaf = |index: usize| {
            let proof = sorted.tree.prove(index).expect("an index of the block");
            (sorted.txids[index], proof)
        };
        Some(BlockAbsence {
            below: at.checked_sub(1).map(leaf),
            above: (at < sorted.txids.len()).then(|| leaf(at)),
        })
    }

    /// Whether this shows `txid` is not in the block of `header`.
    pub fn shows(&self, txid: &Txid, header: &BlockHeader) -> bool {
        let count = u64::from(header.records);
        let at = |(leaf, proof): &TxidLeaf, index: u64| {
            proof.index == index
                && proof.leaves == count
                && proof.verify(TXIDS_DOMAIN, &txid_leaf(leaf), &header.txids_root).is_ok()
        };
        match (&self.below, &self.above) {
            (None, None) => count == 0,
            (Some(below), None) => below.0 < *txid && count > 0 && at(below, count - 1),
            (None, Some(above)) => *txid < above.0 && at(above, 0),
            (Some(below), Some(above)) => {
                let index = below.1.index;
                below.0 < *txid && *txid < above.0 && at(below, index) && at(above, index + 1)
            }
        }
    }
}

/// What a dispute proof shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    Included(Box<LedgerEntry>),
    /// One absence per block, from block 1.
    Absent(Vec<BlockAbsence>),
}

/// A transaction's presence in, or absence from, the ledger up to a height, with the chain of
/// headers to that height.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisputeProof {
    pub txid: Txid,
    /// Headers 1 to the height the proof is for (none for the empty ledger).
    pub headers: Vec<BlockHeader>,
    pub finding: Finding,
}

/// What a checked dispute proof establishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Where the transaction is, if it is in the ledger.
    pub located: Option<Located>,
    /// The height the proof is for.
    pub height: u64,
    /// The hash of the header at that height (zero for the empty ledger): what the checker
    /// compares with the head it trusts.
    pub head: [u8; 32],
}

/// Why a dispute proof is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DisputeError {
    #[error("header {height} does not follow the one before it")]
    BrokenChain { height: u64 },
    #[error("the record is of another transaction, or its path does not lead to block {height}'s records")]
    NotIncluded { height: u64 },
    #[error("the proof has {blocks} absences for {headers} blocks")]
    AbsenceCount { blocks: usize, headers: usize },
    #[error("block {height}'s absence does not hold")]
    NotAbsent { height: u64 },
}

impl DisputeProof {
    /// Checks the proof on its own; the caller then compares `Verdict::head` with a trusted head.
    pub fn check(&self) -> Result<Verdict, DisputeError> {
        let mut previous = [0; 32];
        for (index, header) in self.headers.iter().enumerate() {
            if header.height != index as u64 + 1 || header.previous != previous {
                return Err(DisputeError::BrokenChain {
                    height: index as u64 + 1,
                });
            }
            previous = header.hash();
        }
        let located = match &self.finding {
            Finding::Included(entry) => {
                let height = entry.located.height;
                let header = height.checked_sub(1).and_then(|i| self.headers.get(i as usize));
                let holds = header == Some(&entry.header) && entry.record.txid() == self.txid && entry.verifies();
                if !holds {
                    return Err(DisputeError::NotIncluded { height });
                }
                Some(entry.located)
            }
            Finding::Absent(blocks) => {
                if blocks.len() != self.headers.len() {
                    return Err(DisputeError::AbsenceCount {
                        blocks: blocks.len(),
                        headers: self.headers.len(),
                    });
                }
                if let Some((header, _)) = self
                    .headers
                    .iter()
                    .zip(blocks)
                    .find(|(header, absence)| !absence.shows(&self.txid, header))
                {
                    return Err(DisputeError::NotAbsent { height: header.height });
                }
                None
            }
        };
        Ok(Verdict {
            located,
            height: self.headers.len() as u64,
            head: previous,
        })
    }
}

/// Bounds on a decoded dispute proof.
#[derive(Clone, Debug)]
pub struct DisputeLimits {
    pub headers_max: u64,
    pub record: RecordLimits,
}

impl Default for DisputeLimits {
    fn default() -> Self {
        DisputeLimits {
            headers_max: 1 << 20,
            record: RecordLimits::default(),
        }
    }
}

const FINDING_INCLUDED: u8 = 0;
const FINDING_ABSENT: u8 = 1;

fn put_leaf(out: &mut Vec<u8>, leaf: &Option<TxidLeaf>) {
    if let Some((txid, proof)) = leaf {
        out.extend_from_slice(&txid.0);
        proof.encode_to(out);
    }
}

/// `version (0x01) ‖ txid ‖ count ‖ headers ‖ 0x00 ‖ height ‖ position (u32) ‖ record ‖ proof`,
/// or `… ‖ 0x01 ‖ count ‖ per block: flags (bit 0: below, bit 1: above) ‖ [txid ‖ proof]…`.
impl Encode for DisputeProof {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(DISPUTE_VERSION);
        out.extend_from_slice(&self.txid.0);
        put_count(out, self.headers.len());
        self.headers.iter().for_each(|header| header.encode_to(out));
        match &self.finding {
            Finding::Included(entry) => {
                out.push(FINDING_INCLUDED);
                put_u64(out, entry.located.height);
                out.extend_from_slice(&entry.located.position.to_le_bytes());
                entry.record.encode_to(out);
                entry.proof.encode_to(out);
            }
            Finding::Absent(blocks) => {
                out.push(FINDING_ABSENT);
                put_count(out, blocks.len());
                for absence in blocks {
                    out.push(u8::from(absence.below.is_some()) | (u8::from(absence.above.is_some()) << 1));
                    put_leaf(out, &absence.below);
                    put_leaf(out, &absence.above);
                }
            }
        }
    }
}

fn read_leaf(reader: &mut Reader<'_>, present: bool) -> Result<Option<TxidLeaf>, DecodeError> {
    if !present {
        return Ok(None);
    }
    let txid = Txid(reader.read_array("neighbour txid")?);
    Ok(Some((txid, InclusionProof::decode_from(reader, &())?)))
}

impl Decode for DisputeProof {
    type Limits = DisputeLimits;
    const WHAT: &'static str = "dispute proof";

    fn decode_from(reader: &mut Reader<'_>, limits: &DisputeLimits) -> Result<Self, DecodeError> {
        reader.read_version("dispute proof version", DISPUTE_VERSION)?;
        let txid = Txid(reader.read_array("txid")?);
        let headers = reader.read_vec("headers", limits.headers_max, HEADER_BYTES, |r| {
            BlockHeader::decode_from(r, &())
        })?;
        let finding = match reader.read_u8("finding")? {
            FINDING_INCLUDED => {
                let height = reader.read_u64("height")?;
                let position = u32::from_le_bytes(reader.read_array("position")?);
                let record = Record::decode_from(reader, &limits.record)?;
                let proof = InclusionProof::decode_from(reader, &())?;
                let header = height
                    .checked_sub(1)
                    .and_then(|i| headers.get(usize::try_from(i).ok()?))
                    .copied()
                    .ok_or(DecodeError::NonCanonical {
                        what: "dispute proof",
                        reason: "the record's height is beyond the headers",
                    })?;
                Finding::Included(Box::new(LedgerEntry {
                    located: Located { height, position },
                    header,
                    record,
                    proof,
                }))
            }
            FINDING_ABSENT => Finding::Absent(reader.read_vec("absences", limits.headers_max, 1, |r| {
                let flags = r.read_u8("absence flags")?;
                if flags > 3 {
                    return Err(DecodeError::NonCanonical {
                        what: "absence flags",
                        reason: "only bits 0 and 1 are defined",
                    });
                }
                Ok(BlockAbsence {
                    below: read_leaf(r, flags & 1 != 0)?,
                    above: read_leaf(r, flags & 2 != 0)?,
                })
            })?),
            _ => {
                return Err(DecodeError::NonCanonical {
                    what: "dispute finding",
                    reason: "0 (included) or 1 (absent)",
                })
            }
        };
        Ok(DisputeProof { txid, headers, finding })
    }

    fn encoded_bytes_max(limits: &DisputeLimits) -> usize {
        // Each header's absence: flags and two txids with the deepest paths.
        let per_block = HEADER_BYTES + 1 + 2 * (32 + 8 + 8 + 8 + 32 * specie_merkle::PROOF_HASHES_MAX);
        (limits.headers_max as usize)
            .saturating_mul(per_block)
            .saturating_add(64 + Record::encoded_bytes_max(&limits.record) + 24 + 32 * specie_merkle::PROOF_HASHES_MAX)
    }
}
