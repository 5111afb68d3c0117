//! FastPay's signed vocabulary (Baudet, Danezis, Sonnino; seed 002), as specie's Byzantine mode
//! speaks it: the committee of 3f+1 authorities, transfer orders signed by account owners, votes
//! signed by authorities, certificates of a quorum of votes, and evidence of an authority that
//! signed two conflicting orders. No I/O and no state: the authority role (`specie-authority`)
//! and the client build on these.
//!
//! Every signed thing has one canonical, versioned encoding (`docs/byzantine-format.md`, with
//! vectors) and is signed under its own domain prefix. Decoders take untrusted bytes: every
//! count is bounded before allocation and nothing panics.

mod certificate;
mod committee;
mod epoch;
mod evidence;
mod order;
mod rounds;
#[cfg(feature = "testing")]
pub mod test_support;

pub use certificate::{Certificate, CertificateError, Vote, VoteError, VoteKind, VoteStatement, CERTIFICATE_BYTES_MAX};
pub use committee::{AuthorityIndex, Committee, CommitteeError, COMMITTEE_BYTES_MAX, COMMITTEE_MEMBERS_MAX};
pub use epoch::{CommitteeChain, CommitteeRecord, RecordError, CHAIN_RECORDS_MAX, COMMITTEE_RECORD_BYTES_MAX};
pub use evidence::{BrokenPromise, DoubleVote, Evidence, EvidenceError, SignedVote, EVIDENCE_VERSION};
pub use order::{
    AccountKey, CoreAddress, OrderError, Recipient, SignedOrder, TransferOrder, MEMO_BYTES_MAX, SIGNED_ORDER_BYTES_MAX,
};
pub use rounds::{
    decide, Allowed, Justification, JustificationError, RoundChange, RoundRequest, RoundRequestError,
    SignedRoundChange, SignedRoundRequest, JUSTIFICATION_BYTES_MAX, SIGNED_ROUND_CHANGE_BYTES_MAX,
};

pub use ed25519_dalek::{SigningKey, VerifyingKey};
/// Decodes exactly one value from all of some bytes, refusing more than a bound up front.
pub use specie_codec::decode_bounded as decode_exact;

use specie_codec::{DecodeError, Reader};

/// The first byte of every encoding in this crate.
/// 2: votes and certificates carry their phase ([`VoteKind`]) for the recovery rounds.
pub const ENCODING_VERSION: u8 = 2;
pub const PUBLIC_KEY_BYTES: usize = 32;
pub const SIGNATURE_BYTES: usize = 64;

fn read_version(reader: &mut Reader<'_>, what: &'static str) -> Result<(), DecodeError> {
    reader.read_version(what, ENCODING_VERSION)
}

/// A signing key derived from a label and a number: for demos, simulations and tests, where
/// every run must produce the same keys. Never for real accounts or authorities.
pub fn deterministic_key(label: &str, n: u64) -> SigningKey {
    specie_ed25519::deterministic_key(b"specie/fastpay/deterministic-key/", label, n)
}

#[cfg(test)]
mod test_keys {
    use super::*;

    pub fn authority_keys(n: usize) -> Vec<SigningKey> {
        (0..n as u64).map(|i| deterministic_key("authority", i)).collect()
    }

    pub fn account_key(n: u64) -> SigningKey {
        deterministic_key("account", n)
    }
}
