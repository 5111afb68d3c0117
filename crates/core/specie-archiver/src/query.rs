//! What a ledger of record answers: its head, and a transaction's place with the proof of it.

use specie_codec::{put_byte_vec, put_count, put_u64, Decode, DecodeError, Encode, Reader};
use specie_merkle::InclusionProof;
use specie_transaction::Txid;

use crate::block::{Block, BlockHeader, BlockLimits, RECORDS_DOMAIN};
use crate::dispute::{DisputeLimits, DisputeProof};
use crate::ledger::Located;
use crate::record::Record;
use crate::supply::Supply;

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

impl LedgerHead {
    /// `ledger`'s head, with `undecided` written-ahead records its host holds.
    pub fn of(ledger: &crate::ledger::LedgerOfRecord, undecided: usize) -> LedgerHead {
        LedgerHead {
            height: ledger.height(),
            head: ledger.head().copied(),
            uhs: ledger.uhs_digest(),
            waiting: ledger.waiting(),
            undecided,
        }
    }
}

/// The supply at one cut of the ledger: its head (with the UHS the blocks replay to) and what
/// those blocks did to the circulating supply, read at the same moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupplyCut {
    pub head: LedgerHead,
    pub supply: Supply,
}

/// A transaction's place in the ledger, with what anyone needs to check it: the record (whose
/// leaf the proof starts from), the inclusion proof and the block's header.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// What a ledger of record is asked (by its host's API, or over the wire by a sentinel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerRead {
    Head,
    Block(u64),
    Transaction(Txid),
    /// The dispute proof of a txid at a height (`None`: the head).
    Dispute(Txid, Option<u64>),
    /// The head and the supply at it.
    Supply,
}

/// A ledger of record's answer to a [`LedgerRead`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerReply {
    Head(LedgerHead),
    Block(Option<Block>),
    Transaction(Option<Box<LedgerEntry>>),
    /// `None`: the height is beyond the head.
    Dispute(Option<Box<DisputeProof>>),
    Supply(Box<SupplyCut>),
    /// The ledger could not read what it holds (a host's disk); the text says why.
    Failed(String),
}

const READ_HEAD: u8 = 1;
const READ_BLOCK: u8 = 2;
const READ_TRANSACTION: u8 = 3;
const READ_DISPUTE: u8 = 4;
const REPLY_FAILED: u8 = 5;
const READ_SUPPLY: u8 = 6;
/// A failure's text is cut to this many bytes on the wire.
pub const FAILURE_BYTES_MAX: usize = 1024;

/// `0x01` (head) | `0x02 ‖ height` | `0x03 ‖ txid` | `0x04 ‖ txid ‖ 0x00 | 0x01 ‖ height` |
/// `0x06` (supply).
impl Encode for LedgerRead {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            LedgerRead::Head => out.push(READ_HEAD),
            LedgerRead::Block(height) => {
                out.push(READ_BLOCK);
                put_u64(out, *height);
            }
            LedgerRead::Transaction(txid) => {
                out.push(READ_TRANSACTION);
                out.extend_from_slice(&txid.0);
            }
            LedgerRead::Dispute(txid, height) => {
                out.push(READ_DISPUTE);
                out.extend_from_slice(&txid.0);
                put_option(out, height.as_ref(), |out, height| put_u64(out, *height));
            }
            LedgerRead::Supply => out.push(READ_SUPPLY),
        }
    }
}

impl Decode for LedgerRead {
    type Limits = ();
    const WHAT: &'static str = "ledger read";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        Ok(match reader.read_u8("ledger read")? {
            READ_HEAD => LedgerRead::Head,
            READ_BLOCK => LedgerRead::Block(reader.read_u64("height")?),
            READ_TRANSACTION => LedgerRead::Transaction(Txid(reader.read_array("txid")?)),
            READ_DISPUTE => {
                let txid = Txid(reader.read_array("txid")?);
                LedgerRead::Dispute(txid, read_option(reader, "height", |r| r.read_u64("height"))?)
            }
            READ_SUPPLY => LedgerRead::Supply,
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "ledger read",
                    kind,
                })
            }
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        1 + 32 + 1 + 8
    }
}

fn put_option<T>(out: &mut Vec<u8>, value: Option<&T>, put: impl FnOnce(&mut Vec<u8>, &T)) {
    match value {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            put(out, value);
        }
    }
}

fn read_option<T>(
    reader: &mut Reader<'_>,
    what: &'static str,
    read: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    match reader.read_u8(what)? {
        0 => Ok(None),
        1 => read(reader).map(Some),
        _ => Err(DecodeError::NonCanonical {
            what,
            reason: "the presence flag must be 0 or 1",
        }),
    }
}

/// The reply's kind is its read's (`0x01`–`0x04`, `0x06`), or `0x05` for a failure; then:
/// head: `height ‖ 0x00 | 0x01 ‖ header ‖ uhs count ‖ uhs digest ‖ waiting ‖ undecided`;
/// supply: the head, then the supply (`Supply`'s encoding);
/// block, transaction, dispute: `0x00` (none) or `0x01 ‖ value`, where a transaction is
/// `height ‖ position (u32) ‖ header ‖ record ‖ proof`; failure: the text as a byte vector.
impl Encode for LedgerReply {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            LedgerReply::Head(head) => {
                out.push(READ_HEAD);
                put_head(out, head);
            }
            LedgerReply::Supply(cut) => {
                out.push(READ_SUPPLY);
                put_head(out, &cut.head);
                cut.supply.encode_to(out);
            }
            LedgerReply::Block(block) => {
                out.push(READ_BLOCK);
                put_option(out, block.as_ref(), |out, block| block.encode_to(out));
            }
            LedgerReply::Transaction(entry) => {
                out.push(READ_TRANSACTION);
                put_option(out, entry.as_deref(), |out, entry| {
                    put_u64(out, entry.located.height);
                    out.extend_from_slice(&entry.located.position.to_le_bytes());
                    entry.header.encode_to(out);
                    entry.record.encode_to(out);
                    entry.proof.encode_to(out);
                });
            }
            LedgerReply::Dispute(proof) => {
                out.push(READ_DISPUTE);
                put_option(out, proof.as_deref(), |out, proof| proof.encode_to(out));
            }
            LedgerReply::Failed(reason) => {
                out.push(REPLY_FAILED);
                let mut end = reason.len().min(FAILURE_BYTES_MAX);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                put_byte_vec(out, &reason.as_bytes()[..end]);
            }
        }
    }
}

/// Bounds of a decoded [`LedgerReply`]: its blocks' and proofs'.
#[derive(Clone, Debug, Default)]
pub struct LedgerReplyLimits {
    pub block: BlockLimits,
    pub dispute: DisputeLimits,
}

impl Decode for LedgerReply {
    type Limits = LedgerReplyLimits;
    const WHAT: &'static str = "ledger reply";

    fn decode_from(reader: &mut Reader<'_>, limits: &LedgerReplyLimits) -> Result<Self, DecodeError> {
        Ok(match reader.read_u8("ledger reply")? {
            READ_HEAD => LedgerReply::Head(read_head(reader)?),
            READ_SUPPLY => LedgerReply::Supply(Box::new(SupplyCut {
                head: read_head(reader)?,
                supply: Supply::decode_from(reader)?,
            })),
            READ_BLOCK => LedgerReply::Block(read_option(reader, "block", |r| Block::decode_from(r, &limits.block))?),
            READ_TRANSACTION => LedgerReply::Transaction(read_option(reader, "entry", |r| {
                let located = Located {
                    height: r.read_u64("height")?,
                    position: r.read_u32("position")?,
                };
                Ok(Box::new(LedgerEntry {
                    located,
                    header: BlockHeader::decode_from(r, &())?,
                    record: Record::decode_from(r, &limits.dispute.record)?,
                    proof: InclusionProof::decode_from(r, &())?,
                }))
            })?),
            READ_DISPUTE => LedgerReply::Dispute(read_option(reader, "dispute proof", |r| {
                DisputeProof::decode_from(r, &limits.dispute).map(Box::new)
            })?),
            REPLY_FAILED => {
                let bytes = reader.read_byte_vec("failure", FAILURE_BYTES_MAX as u64)?;
                LedgerReply::Failed(
                    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NonCanonical {
                        what: "failure",
                        reason: "not UTF-8",
                    })?,
                )
            }
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "ledger reply",
                    kind,
                })
            }
        })
    }

    fn encoded_bytes_max(limits: &LedgerReplyLimits) -> usize {
        1 + Block::encoded_bytes_max(&limits.block)
            .max(DisputeProof::encoded_bytes_max(&limits.dispute))
            .max(HEAD_BYTES_MAX + Supply::encoded_bytes_max())
    }
}

/// A head's encoding: `height ‖ 0x00 | 0x01 ‖ header ‖ uhs count ‖ uhs digest ‖ waiting ‖
/// undecided`.
fn put_head(out: &mut Vec<u8>, head: &LedgerHead) {
    put_u64(out, head.height);
    put_option(out, head.head.as_ref(), |out, header| header.encode_to(out));
    put_u64(out, head.uhs.0);
    out.extend_from_slice(&head.uhs.1);
    put_count(out, head.waiting);
    put_count(out, head.undecided);
}

const HEAD_BYTES_MAX: usize = 8 + 1 + crate::block::HEADER_BYTES + 8 + 32 + 8 + 8;

fn read_head(reader: &mut Reader<'_>) -> Result<LedgerHead, DecodeError> {
    let height = reader.read_u64("height")?;
    let head = read_option(reader, "head", |r| BlockHeader::decode_from(r, &()))?;
    // The head is the header at the height: present exactly when there is a block.
    if head.map_or(0, |header| header.height) != height {
        return Err(DecodeError::NonCanonical {
            what: "ledger head",
            reason: "the head's header is not at the ledger's height",
        });
    }
    Ok(LedgerHead {
        height,
        head,
        uhs: (reader.read_u64("uhs count")?, reader.read_array("uhs digest")?),
        waiting: read_usize(reader, "waiting")?,
        undecided: read_usize(reader, "undecided")?,
    })
}

fn read_usize(reader: &mut Reader<'_>, what: &'static str) -> Result<usize, DecodeError> {
    usize::try_from(reader.read_u64(what)?).map_err(|_| DecodeError::NonCanonical {
        what,
        reason: "larger than this machine's addresses",
    })
}
