//! One confirmed transaction as the ledger keeps it.

use std::collections::BTreeMap;

use specie_codec::{put_count, Decode, DecodeError, Encode, Reader};
use specie_endorsement::{Endorsement, ENDORSEMENT_BYTES_MAX};
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
    /// The endorsers' threshold signature over the transaction's batch, where the core requires
    /// one: k of n endorsers vouched for it, and anyone can check it against the group key.
    endorsement: Option<Endorsement>,
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
        Record {
            transaction,
            compact,
            endorsement: None,
        }
    }

    /// This record, with the endorsers' threshold signature it was committed under.
    pub fn with_endorsement(self, endorsement: Endorsement) -> Record {
        Record {
            endorsement: Some(endorsement),
            ..self
        }
    }

    pub fn endorsement(&self) -> Option<&Endorsement> {
        self.endorsement.as_ref()
    }

    fn from_parts(transaction: SpecieTransaction, endorsements: BTreeMap<[u8; 32], [u8; 64]>) -> Record {
        let mut compact = transaction.compact();
        compact.attestations = endorsements;
        Record {
            transaction,
            compact,
            endorsement: None,
        }
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

/// `transaction ‖ count ‖ (x-only key ‖ BIP-340 signature)* ‖ 0x00` (no threshold endorsement)
/// or `… ‖ 0x01 ‖ endorsement`; attestation keys strictly ascending.
impl Encode for Record {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.transaction.encode_to(out);
        put_count(out, self.compact.attestations.len());
        for (key, signature) in &self.compact.attestations {
            out.extend_from_slice(key);
            out.extend_from_slice(signature);
        }
        match &self.endorsement {
            None => out.push(0),
            Some(endorsement) => {
                out.push(1);
                endorsement.encode_to(out);
            }
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
        let endorsement = match reader.read_u8("endorsement flag")? {
            0 => None,
            1 => Some(Endorsement::decode_from(reader, &())?),
            _ => {
                return Err(DecodeError::NonCanonical {
                    what: "endorsement flag",
                    reason: "must be 0 (none) or 1 (one follows)",
                })
            }
        };
        let record = Record::from_parts(transaction, endorsements);
        Ok(Record { endorsement, ..record })
    }

    fn encoded_bytes_max(limits: &RecordLimits) -> usize {
        SpecieTransaction::encoded_bytes_max(&limits.transaction)
            + 9
            + limits.transaction.attestations_max as usize * ATTESTATION_BYTES
            + 1
            + ENDORSEMENT_BYTES_MAX
    }
}
