//! Why a registration, a proof or an audit failed.

use thiserror::Error;

use crate::authority::EnrolmentId;

/// Why the RA refused an enrolment request.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EnrolError {
    #[error("no outstanding challenge for enrolment {enrolment_id:?}")]
    NoChallenge { enrolment_id: EnrolmentId },
    #[error("the request answers another challenge than the outstanding one for enrolment {enrolment_id:?}")]
    ChallengeMismatch { enrolment_id: EnrolmentId },
    #[error("the proof of possession of the user secret for enrolment {enrolment_id:?} does not hold")]
    PossessionProofInvalid { enrolment_id: EnrolmentId },
    #[error("enrolment {enrolment_id:?} is already enrolled with another key")]
    AlreadyEnrolled { enrolment_id: EnrolmentId },
    #[error("the key is already enrolled for {holder:?}")]
    KeyAlreadyEnrolled { holder: EnrolmentId },
    #[error("BBS signing failed: {0}")]
    Signing(String),
}

/// Why a credential does not hold for a secret.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CredentialError {
    #[error("the credential is not the RA's signature over this secret and these attributes")]
    InvalidSignature,
}

/// Why a spend proof could not be made.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProveError {
    #[error("the output's owner is another enrolment id than the credential's")]
    NotTheOwner,
    #[error("auditor keys must be strictly ascending and at most {}", crate::AUDITORS_MAX)]
    Auditors,
    #[error("the BBS proof of knowledge failed: {0}")]
    Library(String),
}

/// Why a spend proof or an owner audit does not verify.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    #[error("the proof of knowledge of the RA's credential does not hold")]
    Signature,
    #[error("the credential's enrolment id is not the one in the owner commitment")]
    OwnerLink,
    #[error("auditor ciphertext {index} does not encrypt the owner's enrolment id")]
    AuditorLink { index: usize },
    #[error("more than {} auditors", crate::AUDITORS_MAX)]
    TooManyAuditors,
    #[error("auditor keys are not strictly ascending")]
    AuditorsNotAscending,
}

/// Which proof of a batch failed, and why.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BatchError {
    #[error("spend proof {index} of the batch: {source}")]
    Proof { index: usize, source: VerifyError },
    #[error("owner audit {index} of the batch: {source}")]
    Audit { index: usize, source: VerifyError },
}

/// Why an auditor could not read a ciphertext.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum AuditError {
    #[error("the ciphertext is addressed to another auditor")]
    NotAddressedToThisAuditor,
    #[error("the owner is not in the auditor's directory")]
    UnknownOwner,
    #[error(
        "the value's halves do not decrypt to 32-bit numbers: its payer encrypted something else (the proof binds \
         the halves to the value only modulo the group order)"
    )]
    UnreadableValue,
}
