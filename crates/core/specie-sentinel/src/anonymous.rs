//! The anonymous level's checks (kind `0x08`, docs/privacy.md "Anonymous payments"): the
//! structure, the values (in clear: balanced; hidden: the confidential transfer's statement), the
//! owner audits (every anonymous output's owner readable by every owner auditor with
//! jurisdiction), the transparent inputs' witnesses. The two costly proofs, the values' transfer
//! and the spend proofs, are left to the caller, who verifies a whole chunk's in two batches.

use specie_credential::SpendItem;
use specie_transaction::{AnonymousTransaction, AnonymousValue, AnonymousValues, Txid};

use crate::error::{AnonymousErrorCode, ConfidentialErrorCode, TxErrorCode, ValidationError};
use crate::trusted::TrustedKeys;
use crate::validate::{
    check_distinct_prevouts, check_inputs_structure, check_outputs_value, check_owner_witnesses, confidential,
    own_witnesses, total, Check,
};

fn anonymous(code: AnonymousErrorCode) -> ValidationError {
    ValidationError::Anonymous(code)
}

/// Every check but the values' proof and the spend proofs. Returns the transaction's context,
/// which the values' proof is verified against.
pub(crate) fn check_anonymous_but_proofs(
    tx: &AnonymousTransaction,
    txid: &Txid,
    trusted: &TrustedKeys,
) -> Result<[u8; 32], ValidationError> {
    if trusted.registration_authority.is_none() {
        return Err(anonymous(AnonymousErrorCode::NoRegistrationAuthority));
    }
    if tx.transparent_inputs.is_empty() && tx.anonymous_inputs.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoInputs));
    }
    if tx.transparent_outputs.is_empty() && tx.owners.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoOutputs));
    }
    let own = own_witnesses(&tx.witnesses, tx.transparent_inputs.len(), txid, trusted)?;
    if tx.spend_proofs.len() != tx.anonymous_inputs.len() {
        return Err(anonymous(AnonymousErrorCode::SpendProofCount));
    }
    let prevouts = tx
        .transparent_inputs
        .iter()
        .map(|i| &i.prevout)
        .chain(tx.anonymous_inputs.iter().map(|i| &i.prevout));
    check_distinct_prevouts(prevouts)?;
    check_inputs_structure(&tx.transparent_inputs)?;
    check_outputs_value(&tx.transparent_outputs)?;
    match &tx.values {
        AnonymousValues::Clear(values) => check_clear_values(tx, values)?,
        AnonymousValues::Hidden(_) => check_hidden_statement(tx, trusted)?,
    }
    let context = tx.context();
    check_owner_audits(tx, &context, trusted)?;
    let owners: Vec<[u8; 32]> = tx
        .transparent_inputs
        .iter()
        .map(|i| i.data.witness_program_commitment)
        .collect();
    check_owner_witnesses(&owners, own, txid)?;
    Ok(context)
}

/// Values in clear: one per owner, none zero, every anonymous input in clear, balanced.
fn check_clear_values(tx: &AnonymousTransaction, values: &[u64]) -> Check {
    if values.len() != tx.owners.len() {
        return Err(anonymous(AnonymousErrorCode::OwnerCount));
    }
    if values.contains(&0) {
        return Err(anonymous(AnonymousErrorCode::ZeroValue));
    }
    let mut spent = Vec::with_capacity(tx.anonymous_inputs.len());
    for input in &tx.anonymous_inputs {
        match input.value {
            AnonymousValue::Clear(value) => spent.push(value),
            AnonymousValue::Hidden(_) => return Err(anonymous(AnonymousErrorCode::HiddenInputInClear)),
        }
    }
    let inputs = total(tx.transparent_inputs.iter().map(|i| i.data.value).chain(spent))?;
    let outputs = total(
        tx.transparent_outputs
            .iter()
            .map(|o| o.value)
            .chain(values.iter().copied()),
    )?;
    if inputs != outputs {
        return Err(ValidationError::Transaction(TxErrorCode::AsymmetricValues));
    }
    Ok(())
}

/// Hidden values: the transfer's clear sides are the transparent inputs and the anonymous inputs
/// in clear, and the transparent outputs; it spends exactly the hidden inputs' commitments;
/// one owner per output; every value auditor addressed.
fn check_hidden_statement(tx: &AnonymousTransaction, trusted: &TrustedKeys) -> Check {
    let AnonymousValues::Hidden(proof) = &tx.values else {
        unreachable!("called for hidden values only");
    };
    let clear_in = tx.anonymous_inputs.iter().filter_map(|i| match i.value {
        AnonymousValue::Clear(value) => Some(value),
        AnonymousValue::Hidden(_) => None,
    });
    if proof.public_in() != total(tx.transparent_inputs.iter().map(|i| i.data.value).chain(clear_in))? {
        return Err(confidential(ConfidentialErrorCode::PublicInMismatch));
    }
    if proof.public_out() != total(tx.transparent_outputs.iter().map(|o| o.value))? {
        return Err(confidential(ConfidentialErrorCode::PublicOutMismatch));
    }
    let spent: Vec<[u8; 32]> = tx
        .anonymous_inputs
        .iter()
        .filter_map(|i| match i.value {
            AnonymousValue::Hidden(commitment) => Some(commitment),
            AnonymousValue::Clear(_) => None,
        })
        .collect();
    let stated: Vec<[u8; 32]> = proof.input_commitments().iter().map(|c| c.to_bytes()).collect();
    if spent != stated {
        return Err(confidential(ConfidentialErrorCode::InputCommitmentMismatch));
    }
    if proof.output_count() != tx.owners.len() {
        return Err(anonymous(AnonymousErrorCode::OwnerCount));
    }
    let addressed: Vec<[u8; 32]> = proof.auditors().iter().map(|a| a.to_bytes()).collect();
    if !trusted.auditors.iter().all(|a| addressed.contains(a)) {
        return Err(confidential(ConfidentialErrorCode::AuditorMissing));
    }
    Ok(())
}

/// Output-major, one audit per owner auditor in the trusted (ascending) order, each proven for
/// its output and this transaction; and every spend proof names the same auditors.
fn check_owner_audits(tx: &AnonymousTransaction, context: &[u8; 32], trusted: &TrustedKeys) -> Check {
    let auditors = &trusted.owner_auditors;
    if tx.owner_audits.len() != tx.owners.len() * auditors.len() {
        return Err(anonymous(AnonymousErrorCode::OwnerAuditorMissing));
    }
    for proof in &tx.spend_proofs {
        let named = proof.auditor_ciphertexts();
        if named.len() != auditors.len() || named.iter().zip(auditors).any(|(c, a)| c.auditor() != *a) {
            return Err(anonymous(AnonymousErrorCode::OwnerAuditorMissing));
        }
    }
    if auditors.is_empty() {
        return Ok(());
    }
    for (owner, audits) in tx.owners.iter().zip(tx.owner_audits.chunks(auditors.len())) {
        for (audit, auditor) in audits.iter().zip(auditors) {
            if audit.ciphertext().auditor() != *auditor {
                return Err(anonymous(AnonymousErrorCode::OwnerAuditorMissing));
            }
            if audit.verify(owner, context).is_err() {
                return Err(anonymous(AnonymousErrorCode::InvalidOwnerAudit));
            }
        }
    }
    Ok(())
}

/// The spend proofs of one transaction, for a batch.
pub(crate) fn spend_items<'a>(tx: &'a AnonymousTransaction, txid: &'a Txid) -> Vec<SpendItem<'a>> {
    tx.spend_proofs
        .iter()
        .zip(&tx.anonymous_inputs)
        .map(|(proof, input)| (proof, &input.owner, &txid.0))
        .collect()
}

/// Every check of an anonymous transaction, the proofs last.
pub(crate) fn check_anonymous(tx: &AnonymousTransaction, txid: &Txid, trusted: &TrustedKeys) -> Check {
    check_anonymous_but_proofs(tx, txid, trusted)?;
    if let AnonymousValues::Hidden(proof) = &tx.values {
        proof
            .verify(&tx.context())
            .map_err(|_| crate::validate::invalid_proof())?;
    }
    spend_proofs_hold(tx, txid, trusted)
}

/// The transaction's spend proofs verify under the trusted RA (checked configured before).
pub(crate) fn spend_proofs_hold(tx: &AnonymousTransaction, txid: &Txid, trusted: &TrustedKeys) -> Check {
    let authority = trusted
        .registration_authority
        .as_ref()
        .ok_or(anonymous(AnonymousErrorCode::NoRegistrationAuthority))?;
    specie_credential::verify_batch(authority, &spend_items(tx, txid))
        .map_err(|_| anonymous(AnonymousErrorCode::InvalidSpendProof))
}
