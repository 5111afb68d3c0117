//! The checks, one function per reference check, composed in the reference's order.
//!
//! Reference: mit-dci/opencbdc-tx `src/uhs/transaction/validation.cpp`. `check_tx` runs
//! `check_tx_structure` (`check_input_count`, `check_output_count`, `check_witness_count`,
//! `check_input_set`), then `check_input_structure` per input, `check_output_value` per output,
//! `check_in_out_set`, and `check_witness` per witness (`check_p2pk_witness_len`,
//! `check_p2pk_witness_commitment`, `check_p2pk_witness_signature`). The first failure wins.

use std::collections::BTreeSet;

use secp256k1::XOnlyPublicKey;
use specie_transaction::signing::{parse_xonly, schnorr_verify};
use specie_transaction::{
    BridgeFunding, BridgePayout, Input, MintTransaction, OutPoint, Output, P2pkParseError, P2pkWitness,
    RedeemTransaction, SpecieTransaction, Transaction, Txid, Witness,
};

use crate::error::{
    BridgeErrorCode, InputErrorCode, OutputErrorCode, SpecieErrorCode, TxErrorCode, ValidationError, WitnessErrorCode,
};
use crate::issuer::IssuerKeys;
use crate::trusted::TrustedKeys;

pub(crate) type Check = Result<(), ValidationError>;

/// `check_input_count`.
fn check_input_count(inputs: &[Input]) -> Check {
    if inputs.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoInputs));
    }
    Ok(())
}

/// `check_output_count`.
fn check_output_count(outputs: &[Output]) -> Check {
    if outputs.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoOutputs));
    }
    Ok(())
}

/// `check_witness_count`: exactly one witness per input (more witnesses is the same error).
fn check_witness_count(inputs: &[Input], witnesses: &[Witness]) -> Check {
    if inputs.len() != witnesses.len() {
        return Err(ValidationError::Transaction(TxErrorCode::MissingWitness));
    }
    Ok(())
}

/// `check_input_set`: the second input naming an outpoint is reported, with its index.
fn check_input_set(inputs: &[Input]) -> Check {
    let mut seen: BTreeSet<&OutPoint> = BTreeSet::new();
    for (index, input) in inputs.iter().enumerate() {
        if !seen.insert(&input.prevout) {
            return Err(ValidationError::Input {
                index: index as u64,
                code: InputErrorCode::Duplicate,
                data_error: None,
            });
        }
    }
    Ok(())
}

/// `check_output_value`.
fn check_output_value(output: &Output) -> Result<(), OutputErrorCode> {
    if output.value < 1 {
        return Err(OutputErrorCode::ZeroValue);
    }
    Ok(())
}

/// `check_input_structure` for every input.
pub fn check_inputs_structure(inputs: &[Input]) -> Check {
    for (index, input) in inputs.iter().enumerate() {
        if let Err(data_error) = check_output_value(&input.data) {
            return Err(ValidationError::Input {
                index: index as u64,
                code: InputErrorCode::DataError,
                data_error: Some(data_error),
            });
        }
    }
    Ok(())
}

/// `check_output_value` for every output.
pub fn check_outputs_value(outputs: &[Output]) -> Check {
    for (index, output) in outputs.iter().enumerate() {
        if let Err(code) = check_output_value(output) {
            return Err(ValidationError::Output {
                index: index as u64,
                code,
            });
        }
    }
    Ok(())
}

fn overflow() -> ValidationError {
    ValidationError::Transaction(TxErrorCode::ValueOverflow)
}

/// Sums values as `check_in_out_set` does: overflow is an error, not a wrap.
pub fn total(mut values: impl Iterator<Item = u64>) -> Result<u64, ValidationError> {
    values.try_fold(0u64, |sum, value| sum.checked_add(value).ok_or_else(overflow))
}

/// `check_in_out_set`, generalised with the amount a redeem or funding takes out of circulation
/// (0 for a transfer): inputs are summed first, then outputs plus amount, then compared.
fn check_in_out_set(inputs: &[Input], outputs: &[Output], redeemed: u64) -> Check {
    let input_total = total(inputs.iter().map(|input| input.data.value))?;
    let output_total = total(outputs.iter().map(|output| output.value).chain([redeemed]))?;
    if input_total != output_total {
        return Err(ValidationError::Transaction(TxErrorCode::AsymmetricValues));
    }
    Ok(())
}

/// `check_witness` → `check_p2pk_witness` for witness `index`, over `txid`.
pub fn check_witness(owner: &[u8; 32], witness: &Witness, txid: &Txid) -> Result<(), WitnessErrorCode> {
    let p2pk = P2pkWitness::parse(witness).map_err(|error| match error {
        P2pkParseError::MissingProgramType => WitnessErrorCode::MissingWitnessProgramType,
        P2pkParseError::UnknownProgramType(_) => WitnessErrorCode::UnknownWitnessProgramType,
        P2pkParseError::WrongLength(_) => WitnessErrorCode::Malformed,
    })?;
    // check_p2pk_witness_commitment
    if p2pk.program_commitment() != *owner {
        return Err(WitnessErrorCode::ProgramMismatch);
    }
    // check_p2pk_witness_signature
    let pubkey = parse_xonly(&p2pk.pubkey).ok_or(WitnessErrorCode::InvalidPublicKey)?;
    if !schnorr_verify(&pubkey, &txid.0, &p2pk.signature) {
        return Err(WitnessErrorCode::InvalidSignature);
    }
    Ok(())
}

fn check_witnesses(inputs: &[Input], witnesses: &[Witness], txid: &Txid) -> Check {
    let owners: Vec<[u8; 32]> = inputs.iter().map(|i| i.data.witness_program_commitment).collect();
    check_owner_witnesses(&owners, witnesses, txid)
}

/// Witness `i` is the p2pk witness of `owners[i]` over the txid.
pub fn check_owner_witnesses(owners: &[[u8; 32]], witnesses: &[Witness], txid: &Txid) -> Check {
    // check_witness_count ran first, so the lists pair up exactly.
    assert_eq!(owners.len(), witnesses.len(), "witness count checked before witnesses");
    for (index, (owner, witness)) in owners.iter().zip(witnesses).enumerate() {
        check_witness(owner, witness, txid).map_err(|code| ValidationError::Witness {
            index: index as u64,
            code,
        })?;
    }
    Ok(())
}

/// The issuer checks shared by mint and redeem: configured key, then signature over the txid.
fn check_issuer(issuers: &IssuerKeys, pubkey: &[u8; 32], signature: &[u8; 64], txid: &Txid) -> Check {
    let key: &XOnlyPublicKey = issuers
        .get(pubkey)
        .ok_or(ValidationError::Specie(SpecieErrorCode::UnknownIssuer))?;
    if !schnorr_verify(key, &txid.0, signature) {
        return Err(ValidationError::Specie(SpecieErrorCode::InvalidIssuerSignature));
    }
    Ok(())
}

/// The reference's `check_tx`, for a transfer whose txid is already known.
pub(crate) fn check_transfer(tx: &Transaction, txid: &Txid) -> Check {
    debug_assert_eq!(*txid, tx.txid());
    // check_tx_structure
    check_input_count(&tx.inputs)?;
    check_output_count(&tx.outputs)?;
    check_witness_count(&tx.inputs, &tx.witnesses)?;
    check_input_set(&tx.inputs)?;
    // check_input_structure, check_output_value, check_in_out_set, check_witness
    check_inputs_structure(&tx.inputs)?;
    check_outputs_value(&tx.outputs)?;
    check_in_out_set(&tx.inputs, &tx.outputs, 0)?;
    check_witnesses(&tx.inputs, &tx.witnesses, txid)
}

/// Mint: `no_outputs`, output `zero_value`, `value_overflow`, `unknown_issuer`,
/// `invalid_issuer_signature`. No inputs, no witnesses, nothing to balance.
pub(crate) fn check_mint(mint: &MintTransaction, txid: &Txid, issuers: &IssuerKeys) -> Check {
    check_output_count(&mint.outputs)?;
    check_outputs_value(&mint.outputs)?;
    total(mint.outputs.iter().map(|output| output.value))?;
    check_issuer(issuers, &mint.issuer_pubkey, &mint.issuer_signature, txid)
}

/// Redeem: the transfer checks in the reference's order, with `no_outputs` dropped (change may
/// be empty), `zero_redeem_amount` after the output values, and the balance including the
/// amount; then, as specie's additions always come after the reference's checks, the issuer.
pub(crate) fn check_redeem(redeem: &RedeemTransaction, txid: &Txid, issuers: &IssuerKeys) -> Check {
    check_input_count(&redeem.inputs)?;
    check_witness_count(&redeem.inputs, &redeem.witnesses)?;
    check_input_set(&redeem.inputs)?;
    check_inputs_structure(&redeem.inputs)?;
    check_outputs_value(&redeem.outputs)?;
    if redeem.amount < 1 {
        return Err(ValidationError::Specie(SpecieErrorCode::ZeroRedeemAmount));
    }
    check_in_out_set(&redeem.inputs, &redeem.outputs, redeem.amount)?;
    check_witnesses(&redeem.inputs, &redeem.witnesses, txid)?;
    check_issuer(issuers, &redeem.issuer_pubkey, &redeem.issuer_signature, txid)
}

fn bridge_error(code: BridgeErrorCode) -> ValidationError {
    ValidationError::Bridge(code)
}

/// A configured bridge (the offline authority or the exchange), and that `named` is one.
fn check_bridge(named: &[u8; 32], trusted: &TrustedKeys) -> Check {
    match () {
        _ if !trusted.has_bridge() => Err(bridge_error(BridgeErrorCode::NoAuthority)),
        _ if !trusted.is_bridge(named) => Err(bridge_error(BridgeErrorCode::OtherAuthority)),
        _ => Ok(()),
    }
}

/// Bridge funding: a funding's input, value and witness checks, then the configured
/// authority. Whether the owners' digest matches the keys the tokens go to is the authority's
/// check (the core never sees those keys).
pub(crate) fn check_bridge_funding(funding: &BridgeFunding, txid: &Txid, trusted: &TrustedKeys) -> Check {
    let zero = bridge_error(BridgeErrorCode::ZeroAmount);
    check_funding_value(
        &funding.inputs,
        &funding.outputs,
        &funding.witnesses,
        funding.amount,
        zero,
        txid,
    )?;
    check_bridge(&funding.authority, trusted)
}

/// A funding's inputs, change and witnesses, in the redeem's order of checks, with `zero` for an
/// amount of nothing: whichever mode it funds (a bridge, or a capability's own kind).
pub fn check_funding_value(
    inputs: &[Input],
    outputs: &[Output],
    witnesses: &[Witness],
    amount: u64,
    zero: ValidationError,
    txid: &Txid,
) -> Check {
    check_input_count(inputs)?;
    check_witness_count(inputs, witnesses)?;
    check_input_set(inputs)?;
    check_inputs_structure(inputs)?;
    check_outputs_value(outputs)?;
    if amount < 1 {
        return Err(zero);
    }
    check_in_out_set(inputs, outputs, amount)?;
    check_witnesses(inputs, witnesses, txid)
}

/// Bridge payout: the configured bridge key signed it, for at least 1 unit. That a token's
/// value comes back at most once is the shards' business: the payout's marker.
pub(crate) fn check_bridge_payout(payout: &BridgePayout, trusted: &TrustedKeys) -> Check {
    check_bridge(&payout.authority, trusted)?;
    if payout.amount() < 1 {
        return Err(bridge_error(BridgeErrorCode::ZeroAmount));
    }
    if !payout.signature_valid() {
        return Err(bridge_error(BridgeErrorCode::InvalidPayoutSignature));
    }
    Ok(())
}

/// No output spent twice by one transaction (its inputs of every list, in order).
pub fn check_distinct_prevouts<'a>(prevouts: impl Iterator<Item = &'a OutPoint>) -> Check {
    let mut seen: BTreeSet<&OutPoint> = BTreeSet::new();
    for (index, prevout) in prevouts.enumerate() {
        if !seen.insert(prevout) {
            return Err(ValidationError::Input {
                index: index as u64,
                code: InputErrorCode::Duplicate,
                data_error: None,
            });
        }
    }
    Ok(())
}

/// Validates any transaction whose txid is already known.
pub(crate) fn check(tx: &SpecieTransaction, txid: &Txid, trusted: &TrustedKeys) -> Check {
    match tx {
        SpecieTransaction::Transfer(transfer) => check_transfer(transfer, txid),
        SpecieTransaction::Mint(mint) => check_mint(mint, txid, &trusted.issuers),
        SpecieTransaction::Redeem(redeem) => check_redeem(redeem, txid, &trusted.issuers),
        SpecieTransaction::BridgeFunding(funding) => check_bridge_funding(funding, txid, trusted),
        SpecieTransaction::BridgePayout(payout) => check_bridge_payout(payout, trusted),
        SpecieTransaction::Capability(tx) => match trusted.capabilities.for_kind(tx.kind()) {
            Some(rules) => rules.check(&**tx, txid),
            None => Err(crate::capability::not_accepted(&**tx)),
        },
    }
}
