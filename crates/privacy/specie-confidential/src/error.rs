//! Why proving, verifying or auditing failed.

use thiserror::Error;

/// Why a wallet could not prove a transfer.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProveError {
    #[error("{count} inputs, more than inputs_max {max}")]
    TooManyInputs { count: usize, max: usize },
    #[error("a transfer needs at least one output")]
    NoOutputs,
    #[error("{count} outputs, more than outputs_max {max}")]
    TooManyOutputs { count: usize, max: usize },
    #[error("{count} auditors, more than auditors_max {max}")]
    TooManyAuditors { count: usize, max: usize },
    #[error("an auditor is listed twice")]
    DuplicateAuditor,
    #[error("inputs + public_in = {incoming} but outputs + public_out = {outgoing}")]
    Unbalanced { incoming: u128, outgoing: u128 },
    #[error("range proof: {reason}")]
    RangeProof { reason: String },
}

/// Why a transfer does not verify.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    #[error(
        "the balance proof does not verify: inputs and outputs may not balance, or it was made for another transaction"
    )]
    Balance,
    #[error("the auditors' ciphertexts are not proven to encrypt the committed values")]
    AuditorValidity,
    #[error("the range proof does not verify: {reason}")]
    Range { reason: String },
}

/// The first transfer of a batch that does not verify.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("transfer {index} of the batch: {error}")]
pub struct BatchError {
    pub index: usize,
    pub error: VerifyError,
}

/// Why an auditor could not read a transfer.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum AuditError {
    #[error("the transfer has no ciphertexts for this auditor")]
    NotAddressed,
    #[error("output {output} does not decrypt to a 64-bit value (verify the transfer first)")]
    Undecryptable { output: usize },
}
