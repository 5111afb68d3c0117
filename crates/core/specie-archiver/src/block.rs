//! Blocks of the ledger of record and their headers.

use sha2::{Digest, Sha256};
use specie_codec::{put_count, put_u64, Decode, DecodeError, Encode, Reader};

use specie_transaction::Txid;

use crate::record::{Record, RecordLimits};

/// The domain of a block's records tree (its leaves are records).
pub const RECORDS_DOMAIN: &[u8] = b"specie/ledger-of-record/records/v1";
/// The domain of a block's txids tree (its leaves are the txids, in ascending order), from which
/// a transaction's absence from the block is proven.
pub const TXIDS_DOMAIN: &[u8] = b"specie/ledger-of-record/txids/v1";
/// The domain of a header's hash.
pub const BLOCK_DOMAIN: &[u8] = b"specie/ledger-of-record/block/v1";

/// 2: the header commits to the block's txids in ascending order too (`txids_root`).
const HEADER_VERSION: u8 = 2;
pub(crate) const HEADER_BYTES: usize = 1 + 8 + 32 + 4 + 32 + 32;

/// What a block commits to: its height, the header before it, and its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// 1 for the first block.
    pub height: u64,
    /// The hash of the previous header; zero for the first block.
    pub previous: [u8; 32],
    pub records: u32,
    /// The Merkle root (`specie-merkle`, [`RECORDS_DOMAIN`]) over the records' leaves, in order.
    pub records_root: [u8; 32],
    /// The Merkle root ([`TXIDS_DOMAIN`]) over the leaves of the records' txids, ascending: two
    /// adjacent leaves around a txid prove it is not in the block.
    pub txids_root: [u8; 32],
}

/// The leaf of `txid` in a block's txids tree.
pub fn txid_leaf(txid: &Txid) -> [u8; 32] {
    specie_merkle::leaf_hash(TXIDS_DOMAIN, &txid.0)
}

/// The txids of `records`, ascending.
pub fn sorted_txids(records: &[Record]) -> Vec<Txid> {
    let mut txids: Vec<Txid> = records.iter().map(Record::txid).collect();
    txids.sort_unstable();
    txids
}

fn txids_root(sorted: &[Txid]) -> [u8; 32] {
    let leaves: Vec<[u8; 32]> = sorted.iter().map(txid_leaf).collect();
    specie_merkle::root(TXIDS_DOMAIN, &leaves)
}

impl BlockHeader {
    /// SHA-256 of the domain and the header's encoding: what the next header names.
    pub fn hash(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(BLOCK_DOMAIN);
        hasher.update(self.encode());
        hasher.finalize().into()
    }
}

/// `version (0x02) ‖ height (u64) ‖ previous (32) ‖ records (u32) ‖ records_root (32) ‖
/// txids_root (32)`.
impl Encode for BlockHeader {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(HEADER_VERSION);
        put_u64(out, self.height);
        out.extend_from_slice(&self.previous);
        out.extend_from_slice(&self.records.to_le_bytes());
        out.extend_from_slice(&self.records_root);
        out.extend_from_slice(&self.txids_root);
    }
}

impl Decode for BlockHeader {
    type Limits = ();
    const WHAT: &'static str = "block header";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        let version = reader.read_u8("header version")?;
        if version != HEADER_VERSION {
            return Err(DecodeError::NonCanonical {
                what: "header version",
                reason: "only version 2 is defined",
            });
        }
        Ok(BlockHeader {
            height: reader.read_u64("height")?,
            previous: reader.read_array("previous header")?,
            records: u32::from_le_bytes(reader.read_array("record count")?),
            records_root: reader.read_array("records root")?,
            txids_root: reader.read_array("txids root")?,
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        HEADER_BYTES
    }
}

/// A header and its records, in ledger order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub header: BlockHeader,
    pub records: Vec<Record>,
}

/// Why a block does not extend the ledger.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("block {got} does not follow block {head}")]
    Height { head: u64, got: u64 },
    #[error("block {height} names another previous header")]
    Previous { height: u64 },
    #[error("block {height}'s header does not commit to its records")]
    Records { height: u64 },
    #[error("block {height} holds more than {records_max} records")]
    TooLarge { height: u64, records_max: usize },
    #[error("block {height}, record {position}: transaction {txid} is in the ledger already")]
    Repeated { height: u64, position: usize, txid: String },
    #[error("block {height}, record {position}: spends {uhs_id}, which is not unspent at that point")]
    SpendsUnknown {
        height: u64,
        position: usize,
        uhs_id: String,
    },
    #[error("block {height}, record {position}: creates {uhs_id}, which exists at that point")]
    CreatesExisting {
        height: u64,
        position: usize,
        uhs_id: String,
    },
}

impl Block {
    /// The block of `records` after `previous` (the header it follows, if any).
    pub fn seal(previous: Option<&BlockHeader>, records: Vec<Record>) -> Block {
        let leaves: Vec<[u8; 32]> = records.iter().map(Record::leaf).collect();
        let header = BlockHeader {
            height: previous.map_or(1, |p| p.height + 1),
            previous: previous.map_or([0; 32], BlockHeader::hash),
            records: u32::try_from(records.len()).expect("a block holds fewer than 2^32 records"),
            records_root: specie_merkle::root(RECORDS_DOMAIN, &leaves),
            txids_root: txids_root(&sorted_txids(&records)),
        };
        Block { header, records }
    }

    /// Whether the header commits to exactly these records, in this order, and to their txids.
    pub fn commits_to_records(&self) -> bool {
        self.commits_to_records_in_order() && txids_root(&sorted_txids(&self.records)) == self.header.txids_root
    }

    /// Whether the header's count and records root are these records' (not its txids root).
    pub fn commits_to_records_in_order(&self) -> bool {
        let leaves: Vec<[u8; 32]> = self.records.iter().map(Record::leaf).collect();
        self.header.records as usize == self.records.len()
            && specie_merkle::root(RECORDS_DOMAIN, &leaves) == self.header.records_root
    }

    /// The inclusion proof of record `position` against the header's records root.
    pub fn prove(&self, position: usize) -> Option<specie_merkle::InclusionProof> {
        let leaves: Vec<[u8; 32]> = self.records.iter().map(Record::leaf).collect();
        specie_merkle::prove(RECORDS_DOMAIN, &leaves, position)
    }
}

/// `header ‖ count ‖ records`.
impl Encode for Block {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.header.encode_to(out);
        put_count(out, self.records.len());
        for record in &self.records {
            record.encode_to(out);
        }
    }
}

/// Bounds of a block's decoder.
#[derive(Clone, Debug)]
pub struct BlockLimits {
    pub records_max: usize,
    pub record: RecordLimits,
}

impl Default for BlockLimits {
    fn default() -> Self {
        BlockLimits {
            records_max: 10_000,
            record: RecordLimits::default(),
        }
    }
}

impl Decode for Block {
    type Limits = BlockLimits;
    const WHAT: &'static str = "block";

    fn decode_from(reader: &mut Reader<'_>, limits: &BlockLimits) -> Result<Self, DecodeError> {
        let header = BlockHeader::decode_from(reader, &())?;
        // Every transaction the core confirms moves an output (40 bytes and more) and carries a
        // signature (64): 64 bytes is a floor for a record, checked against what is left.
        let records = reader.read_vec("records", limits.records_max as u64, 64, |r| {
            Record::decode_from(r, &limits.record)
        })?;
        Ok(Block { header, records })
    }

    fn encoded_bytes_max(limits: &BlockLimits) -> usize {
        HEADER_BYTES + 9 + limits.records_max * Record::encoded_bytes_max(&limits.record)
    }
}
