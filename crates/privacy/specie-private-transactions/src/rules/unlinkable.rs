//! What a sentinel checks of an unlinkable transaction (kind `0x0a`, docs/unlinkable-format.md):
//! a registration authority and a certifier group trusted; the transparent parts' structure; the
//! proof's clear amounts against the transparent inputs' and outputs' totals; every owner auditor
//! with jurisdiction addressed, and no other; the witnesses and active auditors' co-signatures;
//! then the proof, verified for a whole parallel task in one batch. Category `unlinkable`.

use specie_credential::unlinkable::{verify_unlinkable_batch, UnlinkableKeys};
use specie_sentinel::checks::{check_distinct_prevouts, check_inputs_structure, check_outputs_value, total};
use specie_sentinel::{TxErrorCode, ValidationError};
use specie_transaction::Txid;

use super::{anonymous, check_transparent_witnesses, own_witnesses, refusal, AnonymousErrorCode, PrivacyRules};
use crate::unlinkable::UnlinkableTransaction;

/// Why an unlinkable transaction is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnlinkableErrorCode {
    /// `no_certifiers`: the node trusts no certifier group, so it takes no unlinkable transaction.
    NoCertifiers,
    /// `unlinkable_issued_mismatch`: the proof's `issued` is not the transparent inputs' total.
    IssuedMismatch,
    /// `unlinkable_redeemed_mismatch`: the proof's `redeemed` is not the transparent outputs' total.
    RedeemedMismatch,
    /// `unlinkable_owner_auditors`: the proof does not address exactly the owner auditors with
    /// jurisdiction.
    OwnerAuditors,
    /// `invalid_unlinkable_proof`: the transfer's proof does not verify (an uncertified token, a
    /// wrong serial number, an unbalanced transfer, a forged credential, another transaction's proof).
    InvalidProof,
}

impl UnlinkableErrorCode {
    pub fn code(self) -> &'static str {
        match self {
            UnlinkableErrorCode::NoCertifiers => "no_certifiers",
            UnlinkableErrorCode::IssuedMismatch => "unlinkable_issued_mismatch",
            UnlinkableErrorCode::RedeemedMismatch => "unlinkable_redeemed_mismatch",
            UnlinkableErrorCode::OwnerAuditors => "unlinkable_owner_auditors",
            UnlinkableErrorCode::InvalidProof => "invalid_unlinkable_proof",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            UnlinkableErrorCode::NoCertifiers => "this node trusts no certifier group",
            UnlinkableErrorCode::IssuedMismatch => {
                "the proof's clear input value is not the total of the transparent inputs"
            }
            UnlinkableErrorCode::RedeemedMismatch => {
                "the proof's clear output value is not the total of the transparent outputs"
            }
            UnlinkableErrorCode::OwnerAuditors => {
                "the transfer does not give exactly the owner auditors with jurisdiction every party"
            }
            UnlinkableErrorCode::InvalidProof => "the unlinkable transfer's proof does not verify",
        }
    }

    /// The sentinel's error for this code (category `unlinkable`).
    pub fn into_error(self) -> ValidationError {
        refusal("unlinkable", self.code(), self.describe())
    }
}

/// Every check but the proof; returns the context the proof is verified against.
pub(super) fn check_unlinkable_but_proof(
    tx: &UnlinkableTransaction,
    txid: &Txid,
    rules: &PrivacyRules,
) -> Result<[u8; 32], ValidationError> {
    if rules.registration_authority.is_none() {
        return Err(anonymous(AnonymousErrorCode::NoRegistrationAuthority));
    }
    if rules.certifiers.is_none() {
        return Err(UnlinkableErrorCode::NoCertifiers.into_error());
    }
    if tx.transparent_inputs.is_empty() && tx.proof.serial_numbers().next().is_none() {
        return Err(ValidationError::Transaction(TxErrorCode::NoInputs));
    }
    let own = own_witnesses(&tx.witnesses, tx.transparent_inputs.len(), txid, rules)?;
    check_distinct_prevouts(tx.transparent_inputs.iter().map(|i| &i.prevout))?;
    check_inputs_structure(&tx.transparent_inputs)?;
    check_outputs_value(&tx.transparent_outputs)?;
    let amounts = tx.proof.amounts();
    if total(tx.transparent_inputs.iter().map(|i| i.data.value))? != amounts.issued {
        return Err(UnlinkableErrorCode::IssuedMismatch.into_error());
    }
    if total(tx.transparent_outputs.iter().map(|o| o.value))? != amounts.redeemed {
        return Err(UnlinkableErrorCode::RedeemedMismatch.into_error());
    }
    if tx.proof.auditors() != rules.owner_auditors() {
        return Err(UnlinkableErrorCode::OwnerAuditors.into_error());
    }
    check_transparent_witnesses(&tx.transparent_inputs, own, txid)?;
    Ok(tx.context())
}

/// Every check of an unlinkable transaction, the proof last.
pub(super) fn check_unlinkable(
    tx: &UnlinkableTransaction,
    txid: &Txid,
    rules: &PrivacyRules,
) -> Result<(), ValidationError> {
    let context = check_unlinkable_but_proof(tx, txid, rules)?;
    let mut verdict = [Ok(())];
    verify_proofs(rules, &[(0, tx, context)], &mut verdict);
    let [verdict] = verdict;
    verdict
}

/// The proofs of the transactions that passed every other check, in one batch; if it fails, one
/// by one, so each gets its own verdict. `verdicts` is indexed by the items' positions.
pub(super) fn verify_proofs(
    rules: &PrivacyRules,
    items: &[(usize, &UnlinkableTransaction, [u8; 32])],
    verdicts: &mut [Result<(), ValidationError>],
) {
    let (Some(authority), Some(certifiers)) = (&rules.registration_authority, &rules.certifiers) else {
        return;
    };
    if items.is_empty() {
        return;
    }
    let keys = UnlinkableKeys { authority, certifiers };
    let batch: Vec<_> = items.iter().map(|(_, tx, context)| (&tx.proof, context)).collect();
    if verify_unlinkable_batch(&keys, &batch).is_ok() {
        return;
    }
    for (position, tx, context) in items {
        if tx.proof.verify(&keys, context).is_err() {
            verdicts[*position] = Err(UnlinkableErrorCode::InvalidProof.into_error());
        }
    }
}
