//! Why a certification, an unlinkable proof or its verification failed.

use thiserror::Error;

/// Why certifiers could not be dealt or a certificate not assembled.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CertifyError {
    #[error(
        "a {threshold}-of-{members} certifier group is not possible (1 ≤ threshold ≤ members ≤ {})",
        crate::unlinkable::CERTIFIERS_MAX
    )]
    BadThreshold { threshold: u16, members: u16 },
    #[error("only {valid} certifiers' shares verify; {threshold} are needed")]
    TooFewShares { valid: usize, threshold: u16 },
    #[error("the certificate does not verify for this token under the certifiers' key")]
    InvalidCertificate,
    #[error("the Coconut library refused: {0}")]
    Library(String),
}

/// Why an unlinkable transfer could not be proven.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum UnlinkableProveError {
    #[error(
        "between 1 and {} outputs, and at most {} inputs",
        crate::unlinkable::OUTPUTS_MAX,
        crate::unlinkable::INPUTS_MAX
    )]
    Shape,
    #[error("input {index} is not owned by this identity")]
    NotTheOwner { index: usize },
    #[error("input {index}'s certificate does not verify for its token")]
    Uncertified { index: usize },
    #[error("inputs and issued ({inputs}) differ from outputs and redeemed ({outputs})")]
    Unbalanced { inputs: u128, outputs: u128 },
    #[error("auditor keys must be strictly ascending and at most {}", crate::AUDITORS_MAX)]
    Auditors,
    #[error("a proof library refused: {0}")]
    Library(String),
}

/// Why an unlinkable transfer does not verify.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum UnlinkableVerifyError {
    #[error(
        "between 1 and {} outputs, and at most {} inputs",
        crate::unlinkable::OUTPUTS_MAX,
        crate::unlinkable::INPUTS_MAX
    )]
    Shape,
    #[error("input {index}'s proof of the owner's credential does not hold")]
    Credential { index: usize },
    #[error("input {index}'s proof of a certified token does not hold")]
    Token { index: usize },
    #[error("input {index}'s credential and token name different owners")]
    Owner { index: usize },
    #[error("two inputs reveal the same serial number")]
    RepeatedSerialNumber,
    #[error("the range proof of the output values does not hold")]
    Range,
    #[error("auditor keys are not strictly ascending, or more than {}", crate::AUDITORS_MAX)]
    Auditors,
    #[error("auditor ciphertext {index} does not encrypt the party it names")]
    AuditorLink { index: usize },
    #[error("output {index}'s value ciphertexts are not one pair per auditor of halves that make its value")]
    ValueHalves { index: usize },
    #[error("the values do not balance: inputs and issued differ from outputs and redeemed")]
    Unbalanced,
    #[error("the proof's equations do not hold for this statement (a wrong serial number, a token never certified, a forged credential, another transaction's proof, or a changed byte)")]
    Equations,
}
