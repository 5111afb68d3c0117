//! The registration authority and anonymous credentials of Fabric CBDC's "anonymous" privacy level
//! (§2.1 registration, Appendix B.1 and C): the RA signs a user's (secret, enrolment id,
//! jurisdiction) with BBS after a proof of possession of the secret; an output's owner is a hiding
//! commitment to the enrolment id; a spend is authorised by a signature of knowledge of a credential
//! whose id is the committed one, bound to the transaction digest; passive auditors can be given
//! the owner's id encrypted to them, proven to be the committed one. The format, the protocols and
//! what each party learns: `docs/credential-format.md`; vectors: `docs/credential-vectors.json`.
//!
//! Sans-IO: provers and the RA take their randomness as an argument; verifiers need none (batch
//! weights are hashed from the batch). No clocks, no I/O, no threads.
//!
//! Cost (`examples/credential_timing.rs`, release, one core of the 2-core development machine):
//! enrol 0.43 ms for the user's request and 0.64 ms for the RA's checks and signature; a spend proof
//! of 387 bytes (+272 per auditor) takes 1.6 ms to prove and 2.7 ms to verify alone, 1.25 ms per
//! proof in a batch of 32 (the pairings folded into one); with one auditor 2.3, 3.3 and 2.0 ms.

mod authority;
mod batch;
mod codec;
mod error;
mod group;
mod owner;
mod spend;
mod text;
pub mod unlinkable;

pub use authority::{
    Credential, EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Identity, Jurisdiction, RaPublicKey,
    RegistrationAuthority, UserPublicKey, UserSecret, DOMAIN_ENROL, DOMAIN_KEY_EPOCH, DOMAIN_KEY_SEED,
};
pub use codec::*;
pub use error::{AuditError, BatchError, CredentialError, EnrolError, ProveError, VerifyError};
pub use group::{
    generator_encodings, CREDENTIAL_ATTRIBUTES, DOMAIN_AUDITOR_GENERATOR, DOMAIN_BBS_GENERATORS,
    DOMAIN_OWNER_BLINDING_GENERATOR, DOMAIN_OWNER_ID_GENERATOR, G1_BYTES, G2_BYTES, SCALAR_BYTES,
};
pub use owner::{
    AuditDirectory, AuditTag, AuditorKey, AuditorSecret, OwnerAudit, OwnerCiphertext, OwnerCommitment, OwnerOpening,
    DOMAIN_AUDITOR_KEY, DOMAIN_OWNER_AUDIT,
};
pub use spend::{
    verify_batch, verify_batch_with_audits, AuditItem, SpendItem, SpendProof, DOMAIN_BATCH_WEIGHTS, DOMAIN_SPEND,
};
pub use text::{TextError, Textual, CHALLENGE_PREFIX, CREDENTIAL_PREFIX, REQUEST_PREFIX};

/// The format version, the first byte of every encoding.
pub const FORMAT_VERSION: u8 = 1;

/// Auditors one spend proof may address.
pub const AUDITORS_MAX: usize = 4;

#[cfg(test)]
mod soundness;
