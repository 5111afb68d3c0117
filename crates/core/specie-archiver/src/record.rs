//! One confirmed transaction as the ledger keeps it.

use std::collections::BTreeMap;

use specie_codec::{put_count, Decode, DecodeError, Encode, Reader};
use specie_transaction::limits::ATTESTATION_BYTES;
use specie_transaction::{CompactTransaction, DecodeLimits, SpecieTransaction, Txid, UhsId};

/// A confirmed transaction: the full transaction as its payer (or issuer) signed it, and the
/// endorsements (sentinel attestations over its compact form) under which the core accepted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    transaction: SpecieTransaction,
    /// Derived from `transaction` once (what the ledger spends and creates), with the
    /// endorsements as its attestations.
    compact: CompactTransaction,
}

/// Why a record is not what it claims to be.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the compact transaction is not this transaction's: {what} differ")]
    NotItsCompact { what: &'static str },
}

/// Bounds of a record's decoder.
#[derive(Clone, Debug, Default)]
pub struct RecordLimits {
    pub transaction: DecodeLimits,
}

impl Record {
    /// The record of `transaction`, confirmed under the endorsements of `compact` (which must be
    /// this transaction's compact form).
    pub fn new(transaction: SpecieTransaction, compact: &CompactTransaction) -> Result<Record, RecordError> {
        let own = transaction.compact();
        let differing = if own.txid != compact.txid {
            Some("txids")
        } else if own.spent != compact.spent {
            Some("spent UHS ids")
        } else if own.created != compact.created {
            Some("created UHS ids")
        } else {
            None
        };
        if let Some(what) = differing {
            return Err(RecordError::NotItsCompact { what });
        }
        Ok(Record::from_parts(transaction, compact.attestations.clone()))
    }

    /// The record of `transaction` from the compact form a sentinel derived from it while
    /// validating it, so the hashing is not done twice on the data plane.
    pub fn from_sentinel(transaction: SpecieTransaction, compact: CompactTransaction) -> Record {
        debug_assert_eq!(
            transaction.compact().txid,
            compact.txid,
            "the sentinel's compact form is its own"
        );
        Record { transaction, compact }
    }

    fn from_parts(transaction: SpecieTransaction, endorsements: BTreeMap<[u8; 32], [u8; 64]>) -> Record {
        let mut compact = transaction.compact();
        compact.attestations = endorsements;
        Record { transaction, compact }
    }

    pub fn txid(&self) -> Txid {
        self.compact.txid
    }

    pub fn transaction(&self) -> &SpecieTransaction {
        &self.transaction
    }

    /// Its compact form with its endorsements: what the shards applied.
    pub fn compact(&self) -> &CompactTransaction {
        &self.compact
    }

    pub fn spent(&self) -> &[UhsId] {
        &self.compact.spent
    }

    pub fn created(&self) -> &[UhsId] {
        &self.compact.created
    }

    /// Its leaf in its block's records tree.
    pub fn leaf(&self) -> [u8; 32] {
        specie_merkle::leaf_hash(crate::RECORDS_DOMAIN, &self.encode())
    }
}

/// `transaction ‖ count ‖ (x-only key ‖ BIP-340 signature)*`, keys strictly ascending.
impl Encode for Record {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.transaction.encode_to(out);
        put_count(out, self.compact.attestations.len());
        for (key, signature) in &self.compact.attestations {
            out.extend_from_slice(key);
            out.extend_from_slice(signature);
        }
    }
}

impl Decode for Record {
    type Limits = RecordLimits;
    const WHAT: &'static str = "record";

    fn decode_from(reader: &mut Reader<'_>, limits: &RecordLimits) -> Result<Self, DecodeError> {
        let transaction = SpecieTransaction::decode_from(reader, &limits.transaction)?;
        let count = reader.read_count("endorsements", limits.transaction.attestations_max, ATTESTATION_BYTES)?;
        let mut endorsements = BTreeMap::new();
        for _ in 0..count {
            let key: [u8; 32] = reader.read_array("endorsement key")?;
            let signature: [u8; 64] = reader.read_array("endorsement signature")?;
            if endorsements.last_key_value().is_some_and(|(last, _)| *last >= key) {
                return Err(DecodeError::NonCanonical {
                    what: "endorsements",
                    reason: "keys must be strictly ascending (no duplicates)",
                });
            }
            endorsements.insert(key, signature);
        }
        Ok(Record::from_parts(transaction, endorsements))
    }

    fn encoded_bytes_max(limits: &RecordLimits) -> usize {
        SpecieTransaction::encoded_bytes_max(&limits.transaction)
            + 9
            + limits.transaction.attestations_max as usize * ATTESTATION_BYTES
    }
}
