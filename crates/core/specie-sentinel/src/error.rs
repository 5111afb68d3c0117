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
    /// A capability kind's rules refused it (FastPay's funding and redeem: category `fastpay`;
    /// the private kinds: `confidential`, `anonymous`).
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
            ValidationError::Capability(error) => error.category,
        }
    }
}
