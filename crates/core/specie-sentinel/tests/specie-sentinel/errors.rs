//! One test per error code, each triggering exactly that error (the transaction is otherwise
//! valid and re-signed after the change), plus first-failure-wins order tests.

use crate::common;

use common::*;
use specie_sentinel::{
    validate, validate_transfer, InputErrorCode, OutputErrorCode, SpecieErrorCode, TrustedKeys, TxErrorCode,
    ValidationError, WitnessErrorCode,
};
use specie_transaction::signing::{schnorr_sign, xonly_bytes};
use specie_transaction::{witness_program_commitment, NonceMode, P2pkWitness, SpecieTransaction, Transaction, Witness};

fn tx_error(code: TxErrorCode) -> ValidationError {
    ValidationError::Transaction(code)
}

fn witness_error(index: u64, code: WitnessErrorCode) -> ValidationError {
    ValidationError::Witness { index, code }
}

fn specie_error(code: SpecieErrorCode) -> ValidationError {
    ValidationError::Specie(code)
}

fn check_transfer(tx: &Transaction) -> Result<(), ValidationError> {
    // The transfer path and the SpecieTransaction path must agree.
    let direct = validate_transfer(tx);
    assert_eq!(direct, validate(&SpecieTransaction::Transfer(tx.clone()), &trusted()));
    direct
}

#[test]
fn valid_transactions_pass() {
    assert_eq!(check_transfer(&valid_transfer()), Ok(()));
    assert_eq!(check_transfer(&valid_two_input_transfer()), Ok(()));
    let minted = SpecieTransaction::Mint(mint(&[(key(1), 100), (key(2), 50)]));
    assert_eq!(validate(&minted, &trusted()), Ok(()));
    let redeemed = SpecieTransaction::Redeem(redeem(30, &[(key(2), 50)], &[(key(2), 20)]));
    assert_eq!(validate(&redeemed, &trusted()), Ok(()));
    // Redeeming everything: no change outputs is fine for a redeem.
    let redeem_all = SpecieTransaction::Redeem(redeem(50, &[(key(2), 50)], &[]));
    assert_eq!(validate(&redeem_all, &trusted()), Ok(()));
}

// ---- tx_error_code ----

#[test]
fn no_inputs() {
    let tx = Transaction {
        inputs: vec![],
        outputs: vec![pays(&key(1), 5)],
        witnesses: vec![],
    };
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, tx_error(TxErrorCode::NoInputs));
    assert_eq!(err.code(), "no_inputs");
    assert_eq!(err.to_string(), "transaction has no inputs");
}

#[test]
fn no_outputs() {
    let mut tx = valid_transfer();
    tx.outputs.clear();
    resign(&mut tx, &[key(1)]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, tx_error(TxErrorCode::NoOutputs));
    assert_eq!(err.code(), "no_outputs");
}

#[test]
fn missing_witness() {
    let mut tx = valid_two_input_transfer();
    tx.witnesses.pop();
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, tx_error(TxErrorCode::MissingWitness));
    assert_eq!(err.code(), "missing_witness");
    // More witnesses than inputs is the same error (the reference compares the counts).
    let mut tx = valid_transfer();
    tx.witnesses.push(tx.witnesses[0].clone());
    assert_eq!(check_transfer(&tx), Err(tx_error(TxErrorCode::MissingWitness)));
}

#[test]
fn asymmetric_values() {
    let tx = transfer(&[(key(1), 100)], &[(key(2), 99)]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, tx_error(TxErrorCode::AsymmetricValues));
    assert_eq!(err.code(), "asymmetric_values");
}

#[test]
fn value_overflow() {
    // Input total overflows.
    let tx = transfer(&[(key(1), u64::MAX), (key(2), 1)], &[(key(3), 1)]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, tx_error(TxErrorCode::ValueOverflow));
    assert_eq!(err.code(), "value_overflow");
    // Output total overflows.
    let tx = transfer(&[(key(1), 5)], &[(key(3), u64::MAX), (key(3), 1)]);
    assert_eq!(check_transfer(&tx), Err(tx_error(TxErrorCode::ValueOverflow)));
}

// ---- input_error_code ----

#[test]
fn duplicate() {
    let mut tx = transfer(&[(key(1), 50), (key(1), 50)], &[(key(2), 100)]);
    tx.inputs[1] = tx.inputs[0];
    resign(&mut tx, &[key(1), key(1)]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(
        err,
        ValidationError::Input {
            index: 1,
            code: InputErrorCode::Duplicate,
            data_error: None
        }
    );
    assert_eq!(err.code(), "duplicate");
    assert_eq!(err.index(), Some(1));
    assert_eq!(err.to_string(), "input 1: spends the same outpoint as an earlier input");
}

#[test]
fn data_error_zero_value() {
    let tx = transfer(&[(key(1), 100), (key(2), 0)], &[(key(3), 100)]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(
        err,
        ValidationError::Input {
            index: 1,
            code: InputErrorCode::DataError,
            data_error: Some(OutputErrorCode::ZeroValue)
        }
    );
    assert_eq!(err.code(), "data_error");
    assert_eq!(err.category(), "input");
    assert_eq!(err.to_string(), "input 1: the output it spends has zero value");
}

// ---- output_error_code ----

#[test]
fn zero_value() {
    let tx = transfer(&[(key(1), 100)], &[(key(2), 100), (key(3), 0)]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(
        err,
        ValidationError::Output {
            index: 1,
            code: OutputErrorCode::ZeroValue
        }
    );
    assert_eq!(err.code(), "zero_value");
    assert_eq!(err.to_string(), "output 1: value is zero");
}

// ---- witness_error_code ----

#[test]
fn missing_witness_program_type() {
    let mut tx = valid_two_input_transfer();
    tx.witnesses[1] = Witness(vec![]);
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, witness_error(1, WitnessErrorCode::MissingWitnessProgramType));
    assert_eq!(err.code(), "missing_witness_program_type");
}

#[test]
fn unknown_witness_program_type() {
    let mut tx = valid_transfer();
    tx.witnesses[0].0[0] = 0x01;
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, witness_error(0, WitnessErrorCode::UnknownWitnessProgramType));
    assert_eq!(err.code(), "unknown_witness_program_type");
}

#[test]
fn malformed() {
    let mut tx = valid_transfer();
    tx.witnesses[0].0.pop();
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, witness_error(0, WitnessErrorCode::Malformed));
    assert_eq!(err.code(), "malformed");
    let mut tx = valid_transfer();
    tx.witnesses[0].0.push(0);
    assert_eq!(check_transfer(&tx), Err(witness_error(0, WitnessErrorCode::Malformed)));
}

#[test]
fn program_mismatch() {
    // A valid signature by bob over the right txid, for an input alice owns.
    let mut tx = valid_transfer();
    let txid = tx.txid();
    tx.witnesses[0] = P2pkWitness::sign(&key(2), &txid.0, NonceMode::Deterministic).to_witness();
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, witness_error(0, WitnessErrorCode::ProgramMismatch));
    assert_eq!(err.code(), "program_mismatch");
}

#[test]
fn invalid_public_key() {
    // The spent output commits to 32 bytes that are not an x coordinate (above the field size),
    // so the commitment matches but the key cannot be parsed.
    let bad_key = [0xFF; 32];
    let mut tx = valid_transfer();
    tx.inputs[0].data.witness_program_commitment = witness_program_commitment(&bad_key);
    tx.witnesses[0] = P2pkWitness {
        pubkey: bad_key,
        signature: [1; 64],
    }
    .to_witness();
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, witness_error(0, WitnessErrorCode::InvalidPublicKey));
    assert_eq!(err.code(), "invalid_public_key");
}

#[test]
fn invalid_signature() {
    let mut tx = valid_two_input_transfer();
    tx.witnesses[1].0[96] ^= 0x01;
    let err = check_transfer(&tx).unwrap_err();
    assert_eq!(err, witness_error(1, WitnessErrorCode::InvalidSignature));
    assert_eq!(err.code(), "invalid_signature");
    assert_eq!(
        err.to_string(),
        "input 1: signature does not verify against the input's public key"
    );
    // A signature over another message is just as invalid.
    let mut tx = valid_transfer();
    tx.witnesses[0] = P2pkWitness::sign(&key(1), &[0; 32], NonceMode::Deterministic).to_witness();
    assert_eq!(
        check_transfer(&tx),
        Err(witness_error(0, WitnessErrorCode::InvalidSignature))
    );
}

// ---- mint ----

#[test]
fn mint_errors() {
    let trusted = trusted();
    let check = |mint: specie_transaction::MintTransaction| validate(&SpecieTransaction::Mint(mint), &trusted);

    assert_eq!(check(mint(&[])), Err(tx_error(TxErrorCode::NoOutputs)));
    assert_eq!(
        check(mint(&[(key(1), 5), (key(1), 0)])),
        Err(ValidationError::Output {
            index: 1,
            code: OutputErrorCode::ZeroValue
        })
    );
    assert_eq!(
        check(mint(&[(key(1), u64::MAX), (key(1), 1)])),
        Err(tx_error(TxErrorCode::ValueOverflow))
    );

    let mut unknown = mint(&[(key(1), 5)]);
    unknown.sign(&key(9), NonceMode::Deterministic);
    let err = check(unknown).unwrap_err();
    assert_eq!(err, specie_error(SpecieErrorCode::UnknownIssuer));
    assert_eq!(err.code(), "unknown_issuer");
    assert_eq!(err.category(), "specie");

    let mut forged = mint(&[(key(1), 5)]);
    forged.issuer_signature[10] ^= 0x40;
    let err = check(forged).unwrap_err();
    assert_eq!(err, specie_error(SpecieErrorCode::InvalidIssuerSignature));
    assert_eq!(err.code(), "invalid_issuer_signature");

    // Changing what was signed (an output) also invalidates the issuer signature.
    let mut changed = mint(&[(key(1), 5)]);
    changed.outputs[0].value = 6;
    assert_eq!(
        check(changed),
        Err(specie_error(SpecieErrorCode::InvalidIssuerSignature))
    );

    // With no configured issuer, every mint is from an unknown issuer.
    assert_eq!(
        validate(&SpecieTransaction::Mint(mint(&[(key(1), 5)])), &TrustedKeys::default()),
        Err(specie_error(SpecieErrorCode::UnknownIssuer))
    );
}

// ---- redeem ----

#[test]
fn redeem_errors() {
    let trusted = trusted();
    let check = |redeem: specie_transaction::RedeemTransaction| validate(&SpecieTransaction::Redeem(redeem), &trusted);

    assert_eq!(check(redeem(5, &[], &[])), Err(tx_error(TxErrorCode::NoInputs)));

    let mut missing = redeem(30, &[(key(2), 50)], &[(key(2), 20)]);
    missing.witnesses.clear();
    assert_eq!(check(missing), Err(tx_error(TxErrorCode::MissingWitness)));

    let mut duplicate = redeem(60, &[(key(2), 50), (key(2), 50)], &[(key(2), 40)]);
    duplicate.inputs[1] = duplicate.inputs[0];
    resign_redeem(&mut duplicate, &[key(2), key(2)]);
    assert_eq!(
        check(duplicate),
        Err(ValidationError::Input {
            index: 1,
            code: InputErrorCode::Duplicate,
            data_error: None
        })
    );

    assert_eq!(
        check(redeem(30, &[(key(2), 0)], &[])),
        Err(ValidationError::Input {
            index: 0,
            code: InputErrorCode::DataError,
            data_error: Some(OutputErrorCode::ZeroValue)
        })
    );
    assert_eq!(
        check(redeem(30, &[(key(2), 50)], &[(key(2), 0)])),
        Err(ValidationError::Output {
            index: 0,
            code: OutputErrorCode::ZeroValue
        })
    );

    let err = check(redeem(0, &[(key(2), 50)], &[(key(2), 50)])).unwrap_err();
    assert_eq!(err, specie_error(SpecieErrorCode::ZeroRedeemAmount));
    assert_eq!(err.code(), "zero_redeem_amount");
    assert_eq!(err.to_string(), "redeem amount is zero");

    // Change plus amount overflows.
    assert_eq!(
        check(redeem(u64::MAX, &[(key(2), 50)], &[(key(2), 1)])),
        Err(tx_error(TxErrorCode::ValueOverflow))
    );
    assert_eq!(
        check(redeem(31, &[(key(2), 50)], &[(key(2), 20)])),
        Err(tx_error(TxErrorCode::AsymmetricValues))
    );

    let mut bad_owner = redeem(30, &[(key(2), 50)], &[(key(2), 20)]);
    bad_owner.witnesses[0].0[40] ^= 1;
    assert_eq!(
        check(bad_owner),
        Err(witness_error(0, WitnessErrorCode::InvalidSignature))
    );

    let mut unknown = redeem(30, &[(key(2), 50)], &[(key(2), 20)]);
    unknown.issuer_pubkey = xonly_bytes(&key(9));
    unknown.issuer_signature = schnorr_sign(&key(9), &unknown.txid().0, NonceMode::Deterministic);
    assert_eq!(check(unknown), Err(specie_error(SpecieErrorCode::UnknownIssuer)));

    let mut forged = redeem(30, &[(key(2), 50)], &[(key(2), 20)]);
    forged.issuer_signature[63] ^= 1;
    assert_eq!(
        check(forged),
        Err(specie_error(SpecieErrorCode::InvalidIssuerSignature))
    );
}

// ---- first failure wins, in the reference's order ----

#[test]
fn first_failure_wins() {
    // no_inputs before no_outputs.
    let empty = Transaction::default();
    assert_eq!(check_transfer(&empty), Err(tx_error(TxErrorCode::NoInputs)));

    // no_outputs before missing_witness.
    let mut tx = valid_transfer();
    tx.outputs.clear();
    tx.witnesses.clear();
    assert_eq!(check_transfer(&tx), Err(tx_error(TxErrorCode::NoOutputs)));

    // missing_witness before duplicate.
    let mut tx = transfer(&[(key(1), 50), (key(1), 50)], &[(key(2), 100)]);
    tx.inputs[1] = tx.inputs[0];
    tx.witnesses.pop();
    assert_eq!(check_transfer(&tx), Err(tx_error(TxErrorCode::MissingWitness)));

    // duplicate (structure) before a zero-valued input (input structure).
    let mut tx = transfer(&[(key(1), 0), (key(1), 0)], &[(key(2), 100)]);
    tx.inputs[1] = tx.inputs[0];
    assert_eq!(check_transfer(&tx).unwrap_err().code(), "duplicate");

    // Zero input value before zero output value.
    let tx = transfer(&[(key(1), 0)], &[(key(2), 0)]);
    assert_eq!(check_transfer(&tx).unwrap_err().code(), "data_error");

    // Zero output value before imbalance.
    let tx = transfer(&[(key(1), 100)], &[(key(2), 0)]);
    assert_eq!(check_transfer(&tx).unwrap_err().code(), "zero_value");

    // value_overflow before asymmetric_values, and inputs are summed before outputs.
    let tx = transfer(&[(key(1), u64::MAX), (key(1), 1)], &[(key(2), 3)]);
    assert_eq!(check_transfer(&tx), Err(tx_error(TxErrorCode::ValueOverflow)));

    // Balance before signatures.
    let mut tx = transfer(&[(key(1), 100)], &[(key(2), 99)]);
    tx.witnesses[0].0[50] ^= 1;
    assert_eq!(check_transfer(&tx), Err(tx_error(TxErrorCode::AsymmetricValues)));

    // Witnesses in index order: witness 0's bad signature before witness 1's malformation.
    let mut tx = valid_two_input_transfer();
    tx.witnesses[0].0[90] ^= 1;
    tx.witnesses[1].0.pop();
    assert_eq!(
        check_transfer(&tx),
        Err(witness_error(0, WitnessErrorCode::InvalidSignature))
    );

    // Within a witness: program type before length.
    let mut tx = valid_transfer();
    tx.witnesses[0] = Witness(vec![0x05; 10]);
    assert_eq!(
        check_transfer(&tx),
        Err(witness_error(0, WitnessErrorCode::UnknownWitnessProgramType))
    );

    // Within a witness: commitment before key parsing.
    let mut tx = valid_transfer();
    tx.witnesses[0] = P2pkWitness {
        pubkey: [0xFF; 32],
        signature: [0; 64],
    }
    .to_witness();
    assert_eq!(
        check_transfer(&tx),
        Err(witness_error(0, WitnessErrorCode::ProgramMismatch))
    );

    // Mint: output checks before the issuer.
    let mut tx = mint(&[(key(1), 0)]);
    tx.sign(&key(9), NonceMode::Deterministic);
    assert_eq!(
        validate(&SpecieTransaction::Mint(tx), &trusted()).unwrap_err().code(),
        "zero_value"
    );

    // Redeem: zero amount before imbalance; owner witnesses before the issuer.
    let tx = redeem(0, &[(key(2), 50)], &[(key(2), 20)]);
    assert_eq!(
        validate(&SpecieTransaction::Redeem(tx), &trusted()).unwrap_err().code(),
        "zero_redeem_amount"
    );
    let mut tx = redeem(30, &[(key(2), 50)], &[(key(2), 20)]);
    tx.witnesses[0].0[70] ^= 1;
    tx.issuer_pubkey = xonly_bytes(&key(9));
    assert_eq!(
        validate(&SpecieTransaction::Redeem(tx), &trusted()).unwrap_err().code(),
        "invalid_signature"
    );
}

// ---- specie-only codes, one test each (also covered per kind above) ----

#[test]
fn zero_redeem_amount() {
    let tx = SpecieTransaction::Redeem(redeem(0, &[(key(2), 50)], &[(key(2), 50)]));
    let err = validate(&tx, &trusted()).unwrap_err();
    assert_eq!(err, specie_error(SpecieErrorCode::ZeroRedeemAmount));
    assert_eq!((err.code(), err.index()), ("zero_redeem_amount", None));
}

#[test]
fn unknown_issuer() {
    let mut minted = mint(&[(key(1), 5)]);
    minted.sign(&key(9), NonceMode::Deterministic);
    let err = validate(&SpecieTransaction::Mint(minted), &trusted()).unwrap_err();
    assert_eq!(err, specie_error(SpecieErrorCode::UnknownIssuer));
    assert_eq!(
        err.to_string(),
        "issuer public key is not one of the configured issuer keys"
    );
}

#[test]
fn invalid_issuer_signature() {
    let mut redeemed = redeem(30, &[(key(2), 50)], &[(key(2), 20)]);
    redeemed.issuer_signature[0] ^= 0x80;
    let err = validate(&SpecieTransaction::Redeem(redeemed), &trusted()).unwrap_err();
    assert_eq!(err, specie_error(SpecieErrorCode::InvalidIssuerSignature));
    assert_eq!(err.to_string(), "issuer signature does not verify over the txid");
}
