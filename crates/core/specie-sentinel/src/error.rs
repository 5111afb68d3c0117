//! Validation errors: the reference's error enums (mit-dci/opencbdc-tx,
//! `src/uhs/transaction/validation.hpp`: `tx_error_code`, `input_error_code`,
//! `output_error_code`, `witness_error_code`, combined there as the variant `tx_error`), with the
//! reference's names, plus specie's issuer checks, its bridges' and the private kinds', and
//! whatever the rules of a capability's kinds refuse ([`CapabilityError`]).
//!
//! [`ValidationError::code`] is a stable snake_case string for machines (APIs, metrics): the
//! reference's enumerator name, which is unique across its four enums, or a specie-only name.
//! `Display` is a sentence for people and names the offending input/output where there is one.

use thiserror::Error;

pub use crate::capability::CapabilityError;

/// The reference's `tx_error_code`: whole-transaction errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxErrorCode {
    /// `no_inputs`: there are no inputs.
    NoInputs,
    /// `no_outputs`: there are no outputs.
    NoOutputs,
    /// `missing_witness`: the number of witnesses differs from the number of inputs.
    MissingWitness,
    /// `asymmetric_values`: input values do not add up to output values (plus the redeemed
    /// amount, for a redeem).
    AsymmetricValues,
    /// `value_overflow`: a total overflows a u64.
    ValueOverflow,
}

/// The reference's `input_error_code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputErrorCode {
    /// `duplicate`: the input spends the same outpoint as an earlier input.
    Duplicate,
    /// `data_error`: the output the input spends is invalid (see the attached output code).
    DataError,
}

/// The reference's `output_error_code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutputErrorCode {
    /// `zero_value`: the output's value is 0.
    ZeroValue,
}

/// The reference's `witness_error_code`, in the order `check_witness` tests them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WitnessErrorCode {
    /// `missing_witness_program_type`: the witness is empty.
    MissingWitnessProgramType,
    /// `unknown_witness_program_type`: the type byte is not 0x00 (p2pk).
    UnknownWitnessProgramType,
    /// `malformed`: a p2pk witness that is not 97 bytes.
    Malformed,
    /// `program_mismatch`: SHA-256(type ‖ pubkey) differs from the input's commitment.
    ProgramMismatch,
    /// `invalid_public_key`: the 32 key bytes are not an x-only public key.
    InvalidPublicKey,
    /// `invalid_signature`: the signature does not verify over the txid.
    InvalidSignature,
}

/// specie-only errors: the reference has no issuer and no redeem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecieErrorCode {
    /// `zero_redeem_amount`: a redeem must take at least 1 unit out of circulation.
    ZeroRedeemAmount,
    /// `unknown_issuer`: the mint/redeem names an issuer key this sentinel is not configured with.
    UnknownIssuer,
    /// `invalid_issuer_signature`: the issuer signature does not verify over the txid.
    InvalidIssuerSignature,
    /// `not_endorsed`: the core requires a threshold endorsement and the transaction carries
    /// none that verifies under the endorsers' group key (fewer than k signed, another key set
    /// signed, or the endorsement is another transaction's).
    NotEndorsed,
}

/// Why a bridge funding or payout is refused (specie-only: the online core as the bank of a
/// bridge, the offline authority or the exchange, which share the two kinds; the codes keep
/// the offline names they were given first, the sentences name both modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BridgeErrorCode {
    /// `zero_offline_amount`: a funding or payout must move at least 1 unit.
    ZeroAmount,
    /// `no_offline_authority`: this sentinel banks for no bridge (no offline authority, no
    /// exchange).
    NoAuthority,
    /// `other_offline_authority`: the funding or payout names a bridge key other than the
    /// configured ones.
    OtherAuthority,
    /// `invalid_payout_signature`: the payout's signature does not verify under the authority.
    InvalidPayoutSignature,
}

/// Why a confidential transaction is refused (specie-only: Fabric CBDC's confidential level).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfidentialErrorCode {
    /// `confidential_public_in_mismatch`: the proof's `public_in` is not the transparent inputs' total.
    PublicInMismatch,
    /// `confidential_public_out_mismatch`: the proof's `public_out` is not the transparent outputs' total.
    PublicOutMismatch,
    /// `confidential_input_mismatch`: the proof's input commitments are not the spent outputs'.
    InputCommitmentMismatch,
    /// `confidential_owner_count`: the owners listed are not one per output the proof commits to.
    OwnerCount,
    /// `auditor_missing`: an auditor with jurisdiction cannot read the values.
    AuditorMissing,
    /// `invalid_confidential_proof`: a range, balance or auditor-validity proof fails.
    InvalidProof,
    /// `active_auditor_missing`: a private transaction lacks the co-signature of an active
    /// auditor with jurisdiction.
    ActiveAuditorMissing,
    /// `invalid_cosignature`: an active auditor's co-signature is not its signature of the txid.
    InvalidCosignature,
}

impl ConfidentialErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            ConfidentialErrorCode::PublicInMismatch => "confidential_public_in_mismatch",
            ConfidentialErrorCode::PublicOutMismatch => "confidential_public_out_mismatch",
            ConfidentialErrorCode::InputCommitmentMismatch => "confidential_input_mismatch",
            ConfidentialErrorCode::OwnerCount => "confidential_owner_count",
            ConfidentialErrorCode::AuditorMissing => "auditor_missing",
            ConfidentialErrorCode::InvalidProof => "invalid_confidential_proof",
            ConfidentialErrorCode::ActiveAuditorMissing => "active_auditor_missing",
            ConfidentialErrorCode::InvalidCosignature => "invalid_cosignature",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ConfidentialErrorCode::PublicInMismatch => {
                "the proof's clear input value is not the total of the transparent inputs"
            }
            ConfidentialErrorCode::PublicOutMismatch => {
                "the proof's clear output value is not the total of the transparent outputs"
            }
            ConfidentialErrorCode::InputCommitmentMismatch => {
                "the proof's input commitments are not those of the confidential outputs spent"
            }
            ConfidentialErrorCode::OwnerCount => "there is not one owner per confidential output",
            ConfidentialErrorCode::AuditorMissing => "an auditor with jurisdiction is not given the values",
            ConfidentialErrorCode::InvalidProof => "the confidential transfer's proofs do not verify",
            ConfidentialErrorCode::ActiveAuditorMissing => "an active auditor with jurisdiction has not co-signed it",
            ConfidentialErrorCode::InvalidCosignature => "an active auditor's co-signature does not verify",
        }
    }
}

/// Why an anonymous transaction is refused (specie-only: Fabric CBDC's anonymous level).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnonymousErrorCode {
    /// `no_registration_authority`: the node trusts no registration authority, so it takes no
    /// anonymous transaction.
    NoRegistrationAuthority,
    /// `anonymous_spend_proof_count`: there is not one spend proof per anonymous input.
    SpendProofCount,
    /// `anonymous_owner_count`: there is not one value per anonymous output.
    OwnerCount,
    /// `anonymous_zero_value`: an anonymous output's clear value is zero.
    ZeroValue,
    /// `anonymous_hidden_input_in_clear`: values in clear cannot spend a hidden value.
    HiddenInputInClear,
    /// `owner_auditor_missing`: an owner auditor with jurisdiction cannot read an owner.
    OwnerAuditorMissing,
    /// `invalid_owner_audit`: an owner's ciphertext is not proven to be the committed owner.
    InvalidOwnerAudit,
    /// `invalid_spend_proof`: a spend is not authorised by a credential for the committed owner.
    InvalidSpendProof,
}

impl AnonymousErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            AnonymousErrorCode::NoRegistrationAuthority => "no_registration_authority",
            AnonymousErrorCode::SpendProofCount => "anonymous_spend_proof_count",
            AnonymousErrorCode::OwnerCount => "anonymous_owner_count",
            AnonymousErrorCode::ZeroValue => "anonymous_zero_value",
            AnonymousErrorCode::HiddenInputInClear => "anonymous_hidden_input_in_clear",
            AnonymousErrorCode::OwnerAuditorMissing => "owner_auditor_missing",
            AnonymousErrorCode::InvalidOwnerAudit => "invalid_owner_audit",
            AnonymousErrorCode::InvalidSpendProof => "invalid_spend_proof",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            AnonymousErrorCode::NoRegistrationAuthority => "this node trusts no registration authority",
            AnonymousErrorCode::SpendProofCount => "there is not one spend proof per anonymous input",
            AnonymousErrorCode::OwnerCount => "there is not one value per anonymous output",
            AnonymousErrorCode::ZeroValue => "an anonymous output's value is zero",
            AnonymousErrorCode::HiddenInputInClear => "a transaction with values in clear spends a hidden value",
            AnonymousErrorCode::OwnerAuditorMissing => "an owner auditor with jurisdiction is not given the owners",
            AnonymousErrorCode::InvalidOwnerAudit => "an owner audit does not verify",
            AnonymousErrorCode::InvalidSpendProof => "a spend proof does not verify under the registration authority",
        }
    }
}

impl BridgeErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            BridgeErrorCode::ZeroAmount => "zero_offline_amount",
            BridgeErrorCode::NoAuthority => "no_offline_authority",
            BridgeErrorCode::OtherAuthority => "other_offline_authority",
            BridgeErrorCode::InvalidPayoutSignature => "invalid_payout_signature",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            BridgeErrorCode::ZeroAmount => {
                "a funding or payout of zero (to or from a bridge: the offline authority or the exchange)"
            }
            BridgeErrorCode::NoAuthority => {
                "this node banks for no bridge: neither an offline authority (`--offline-authority`) nor an exchange (`--exchange`)"
            }
            BridgeErrorCode::OtherAuthority => {
                "it names a bridge key this node does not bank for (neither its offline authority's nor its exchange's)"
            }
            BridgeErrorCode::InvalidPayoutSignature => {
                "the payout's signature does not verify under the bridge key it names (the offline authority's or the exchange's)"
            }
        }
    }
}

impl TxErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            TxErrorCode::NoInputs => "no_inputs",
            TxErrorCode::NoOutputs => "no_outputs",
            TxErrorCode::MissingWitness => "missing_witness",
            TxErrorCode::AsymmetricValues => "asymmetric_values",
            TxErrorCode::ValueOverflow => "value_overflow",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            TxErrorCode::NoInputs => "transaction has no inputs",
            TxErrorCode::NoOutputs => "transaction has no outputs",
            TxErrorCode::MissingWitness => "the number of witnesses does not equal the number of inputs",
            TxErrorCode::AsymmetricValues => {
                "input values do not add up to output values (plus the redeemed amount, for a redeem)"
            }
            TxErrorCode::ValueOverflow => "total value of inputs or outputs overflows a 64-bit integer",
        }
    }
}

impl InputErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            InputErrorCode::Duplicate => "duplicate",
            InputErrorCode::DataError => "data_error",
        }
    }
}

impl OutputErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            OutputErrorCode::ZeroValue => "zero_value",
        }
    }
}

impl WitnessErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            WitnessErrorCode::MissingWitnessProgramType => "missing_witness_program_type",
            WitnessErrorCode::UnknownWitnessProgramType => "unknown_witness_program_type",
            WitnessErrorCode::Malformed => "malformed",
            WitnessErrorCode::ProgramMismatch => "program_mismatch",
            WitnessErrorCode::InvalidPublicKey => "invalid_public_key",
            WitnessErrorCode::InvalidSignature => "invalid_signature",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            WitnessErrorCode::MissingWitnessProgramType => "witness is empty (it has no witness program type)",
            WitnessErrorCode::UnknownWitnessProgramType => {
                "witness program type is unknown (only 0x00, pay-to-pubkey, exists)"
            }
            WitnessErrorCode::Malformed => "pay-to-pubkey witness is not exactly 97 bytes",
            WitnessErrorCode::ProgramMismatch => {
                "witness public key does not match the commitment of the output being spent"
            }
            WitnessErrorCode::InvalidPublicKey => "witness public key is not a valid x-only public key",
            WitnessErrorCode::InvalidSignature => "signature does not verify against the input's public key",
        }
    }
}

impl SpecieErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            SpecieErrorCode::ZeroRedeemAmount => "zero_redeem_amount",
            SpecieErrorCode::UnknownIssuer => "unknown_issuer",
            SpecieErrorCode::InvalidIssuerSignature => "invalid_issuer_signature",
            SpecieErrorCode::NotEndorsed => "not_endorsed",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            SpecieErrorCode::ZeroRedeemAmount => "redeem amount is zero",
            SpecieErrorCode::UnknownIssuer => "issuer public key is not one of the configured issuer keys",
            SpecieErrorCode::InvalidIssuerSignature => "issuer signature does not verify over the txid",
            SpecieErrorCode::NotEndorsed => {
                "no threshold endorsement by the endorsers' group verifies for this transaction"
            }
        }
    }
}

fn describe_input(code: InputErrorCode, data_error: Option<OutputErrorCode>) -> &'static str {
    match (code, data_error) {
        (InputErrorCode::Duplicate, _) => "spends the same outpoint as an earlier input",
        (InputErrorCode::DataError, Some(OutputErrorCode::ZeroValue)) => "the output it spends has zero value",
        (InputErrorCode::DataError, None) => "the output it spends is invalid",
    }
}

/// Why a transaction failed transaction-local validation (the reference's `tx_error`, plus
/// specie's issuer, bridge and private kinds' errors, and the capability kinds' own). Indices are
/// positions in the transaction's input, output or witness list; witness `i` belongs to input `i`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Error)]
pub enum ValidationError {
    #[error("{}", .0.describe())]
    Transaction(TxErrorCode),
    #[error("input {index}: {}", describe_input(*.code, *.data_error))]
    Input {
        index: u64,
        code: InputErrorCode,
        /// For `data_error`: what is wrong with the spent output (the reference's `m_data_err`).
        data_error: Option<OutputErrorCode>,
    },
    #[error("output {index}: value is zero")]
    Output { index: u64, code: OutputErrorCode },
    #[error("input {index}: {}", .code.describe())]
    Witness { index: u64, code: WitnessErrorCode },
    #[error("{}", .0.describe())]
    Specie(SpecieErrorCode),
    #[error("{}", .0.describe())]
    Bridge(BridgeErrorCode),
    #[error("{}", .0.describe())]
    Confidential(ConfidentialErrorCode),
    #[error("{}", .0.describe())]
    Anonymous(AnonymousErrorCode),
    /// A capability kind's rules refused it (FastPay's funding and redeem: category `fastpay`).
    #[error("{}", .0.message)]
    Capability(CapabilityError),
}

impl ValidationError {
    /// Stable machine-readable code (see the module docs).
    pub fn code(&self) -> &'static str {
        match self {
            ValidationError::Transaction(code) => code.code(),
            ValidationError::Input { code, .. } => code.code(),
            ValidationError::Output { code, .. } => code.code(),
            ValidationError::Witness { code, .. } => code.code(),
            ValidationError::Specie(code) => code.code(),
            ValidationError::Bridge(code) => code.code(),
            ValidationError::Confidential(code) => code.code(),
            ValidationError::Anonymous(code) => code.code(),
            ValidationError::Capability(error) => error.code,
        }
    }

    /// The index of the offending input, output or witness, where the reference reports one.
    pub fn index(&self) -> Option<u64> {
        match self {
            ValidationError::Input { index, .. }
            | ValidationError::Output { index, .. }
            | ValidationError::Witness { index, .. } => Some(*index),
            ValidationError::Transaction(_)
            | ValidationError::Specie(_)
            | ValidationError::Bridge(_)
            | ValidationError::Confidential(_)
            | ValidationError::Anonymous(_)
            | ValidationError::Capability(_) => None,
        }
    }

    /// Which of the reference's error groups this is: `tx`, `input`, `output`, `witness`,
    /// `specie` for the issuer and redeem errors the reference does not have, a capability's own
    /// (`fastpay` for FastPay fundings and redeems), or `offline` (the name it was given first) for bridge fundings and payouts.
    pub fn category(&self) -> &'static str {
        match self {
            ValidationError::Transaction(_) => "tx",
            ValidationError::Input { .. } => "input",
            ValidationError::Output { .. } => "output",
            ValidationError::Witness { .. } => "witness",
            ValidationError::Specie(_) => "specie",
            ValidationError::Bridge(_) => "offline",
            ValidationError::Confidential(_) => "confidential",
            ValidationError::Anonymous(_) => "anonymous",
            ValidationError::Capability(error) => error.category,
        }
    }
}
