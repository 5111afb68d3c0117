//! The sentinel as a threshold endorser (docs/endorsement-format.md): what a batch carries, and
//! the checks an endorser runs on it. The embedded node's endorsers and a cluster's sentinels
//! use the same two.

use std::sync::Arc;

use specie_codec::{Decode, DecodeError, Encode, Reader};
use specie_endorsement::{BatchItem, Hash, Validator};
use specie_transaction::{CompactTransaction, DecodeLimits, SpecieTransaction};

use crate::{TrustedKeys, ValidationError};

/// A transaction to endorse, with its compact form and the digest its batch's tree commits to
/// (the compact form's attestation message), computed once. On the wire it is the transaction
/// alone: a receiver recomputes the rest from it, never trusting a digest it was sent.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub tx: Arc<SpecieTransaction>,
    pub compact: CompactTransaction,
    digest: Hash,
    /// Validated by this process's own sentinel checks before it became a candidate. Never
    /// encoded, never set by a decoder: only the process that validated it can vouch for it.
    validated_here: bool,
}

impl Candidate {
    pub fn new(tx: SpecieTransaction) -> Candidate {
        let compact = tx.compact();
        let digest = compact.attestation_message();
        Candidate {
            tx: Arc::new(tx),
            compact,
            digest,
            validated_here: false,
        }
    }

    /// A candidate this process's sentinel checks accepted (`compact` is what they returned), so
    /// that this process's own endorser need not check it again.
    pub fn validated(tx: SpecieTransaction, compact: CompactTransaction) -> Candidate {
        let digest = compact.attestation_message();
        Candidate {
            tx: Arc::new(tx),
            compact,
            digest,
            validated_here: true,
        }
    }

    pub fn validated_here(&self) -> bool {
        self.validated_here
    }
}

impl BatchItem for Candidate {
    fn digest(&self) -> Hash {
        self.digest
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Candidate) -> bool {
        self.tx == other.tx
    }
}

impl Encode for Candidate {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.tx.encode_to(out);
    }
}

impl Decode for Candidate {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "transaction to endorse";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        Ok(Candidate::new(SpecieTransaction::decode_from(reader, limits)?))
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        SpecieTransaction::encoded_bytes_max(limits)
    }
}

/// An endorser's validation: the sentinel's checks, on the transaction it was sent (never on a
/// digest the aggregator computed). A compromised endorser's accept everything: for
/// demonstrations and fault tests of what fewer than k of them can do.
pub struct SentinelChecks {
    pub trusted: TrustedKeys,
    pub compromised: bool,
}

impl Validator for SentinelChecks {
    type Item = Candidate;
    type Reason = ValidationError;

    fn validate(&mut self, item: &Candidate) -> Result<(), ValidationError> {
        if self.compromised {
            return Ok(());
        }
        crate::validate(&item.tx, &self.trusted)
    }
}
