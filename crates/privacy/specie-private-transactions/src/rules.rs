//! What a sentinel checks of the private kinds (`docs/transaction-format.md` §6,
//! `docs/privacy.md`): the reference's structure checks over every input list, the values'
//! statement (clear values balanced; hidden ones the confidential transfer's, every auditor with
//! jurisdiction addressed), the owner audits, the active auditors' co-signatures, the witnesses;
//! then the costly proofs, which [`PrivacyRules`] verifies for a whole parallel task at once
//! (the confidential transfers in one batch; the owner audits and spend proofs in another, every
//! Schnorr row in one multi-scalar multiplication and every pairing in one product; the
//! unlinkable transfers in a third, [`unlinkable`]), one by one only when a batch fails, so that
//! each transaction gets exactly its own verdict. The codes are categories `confidential`,
//! `anonymous` and `unlinkable`.

use specie_credential::unlinkable::CertifierGroup;
use specie_credential::{AuditItem, AuditorKey as OwnerAuditorKey, RaPublicKey, SpendItem};
use specie_sentinel::checks::{
    check_distinct_prevouts, check_inputs_structure, check_outputs_value, check_owner_witnesses, check_witness, total,
};
use specie_sentinel::{CapabilityError, CapabilityRules, TxErrorCode, ValidationError};
use specie_transaction::{witness_program_commitment, CapabilityTransaction, Input, Txid, Witness};

use crate::anonymous::{AnonymousTransaction, AnonymousValue, AnonymousValues};
use crate::confidential::ConfidentialTransaction;
use crate::unlinkable::UnlinkableTransaction;
use crate::{KIND_ANONYMOUS, KIND_CONFIDENTIAL, KIND_UNLINKABLE};

mod unlinkable;

pub use unlinkable::UnlinkableErrorCode;

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

    pub fn describe(self) -> &'static str {
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

    pub fn describe(self) -> &'static str {
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

impl ConfidentialErrorCode {
    /// The sentinel's error for this code (category `confidential`).
    pub fn into_error(self) -> ValidationError {
        refusal("confidential", self.code(), self.describe())
    }
}

impl AnonymousErrorCode {
    /// The sentinel's error for this code (category `anonymous`).
    pub fn into_error(self) -> ValidationError {
        refusal("anonymous", self.code(), self.describe())
    }
}

fn refusal(category: &'static str, code: &'static str, message: &str) -> ValidationError {
    ValidationError::Capability(CapabilityError {
        category,
        code,
        message: message.to_owned(),
    })
}

/// The keys a node's sentinels judge private transactions against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrivacyRules {
    /// The auditors with jurisdiction (Ristretto keys, compressed): every confidential
    /// transaction must give each of them its values (docs/privacy.md, "Auditors").
    pub auditors: Vec<[u8; 32]>,
    /// The registration authority whose credentials authorise anonymous spends. Without it,
    /// every anonymous transaction is invalid (`no_registration_authority`).
    pub registration_authority: Option<RaPublicKey>,
    /// The owner auditors with jurisdiction (BLS12-381 keys), strictly ascending: every
    /// anonymous transaction must give each of them every owner it names.
    owner_auditors: Vec<OwnerAuditorKey>,
    /// The active auditors (x-only BIP-340 keys), in order: every private transaction carries,
    /// after its own witnesses, one p2pk witness of each over its txid: their co-signatures,
    /// given before submission (docs/privacy.md, "Active auditors").
    pub active_auditors: Vec<[u8; 32]>,
    /// The certifier group whose certificates unlinkable spends prove. Without it, every
    /// unlinkable transaction is invalid (`no_certifiers`).
    pub certifiers: Option<CertifierGroup>,
}

impl PrivacyRules {
    /// Rules with these keys; the owner auditors sorted and deduplicated (their canonical
    /// order, in which every transaction addresses them).
    pub fn new(
        auditors: Vec<[u8; 32]>,
        registration_authority: Option<RaPublicKey>,
        mut owner_auditors: Vec<OwnerAuditorKey>,
        active_auditors: Vec<[u8; 32]>,
    ) -> Self {
        owner_auditors.sort();
        owner_auditors.dedup();
        PrivacyRules {
            auditors,
            registration_authority,
            owner_auditors,
            active_auditors,
            certifiers: None,
        }
    }

    /// These rules, trusting `certifiers` for unlinkable transactions.
    pub fn with_certifiers(mut self, certifiers: CertifierGroup) -> Self {
        self.certifiers = Some(certifiers);
        self
    }

    /// The owner auditors, in their canonical (ascending) order.
    pub fn owner_auditors(&self) -> &[OwnerAuditorKey] {
        &self.owner_auditors
    }
}

impl CapabilityRules for PrivacyRules {
    fn kinds(&self) -> &'static [u8] {
        &[KIND_CONFIDENTIAL, KIND_ANONYMOUS, KIND_UNLINKABLE]
    }

    fn check(&self, tx: &dyn CapabilityTransaction, txid: &Txid) -> Result<(), ValidationError> {
        if let Some(confidential) = tx.downcast_ref::<ConfidentialTransaction>() {
            return check_confidential(confidential, txid, self);
        }
        if let Some(anonymous) = tx.downcast_ref::<AnonymousTransaction>() {
            return check_anonymous(anonymous, txid, self);
        }
        if let Some(unlinkable) = tx.downcast_ref::<UnlinkableTransaction>() {
            return unlinkable::check_unlinkable(unlinkable, txid, self);
        }
        unreachable!(
            "the privacy rules are asked only about their kinds, got {}",
            tx.kind_name()
        )
    }

    /// The confidential transfers' proofs (of confidential and anonymous transactions) are
    /// verified together in one batch (a third of the cost each), and so are the anonymous
    /// transactions' spend proofs (their pairings folded into one) and the unlinkable transfers; if a batch fails, one by
    /// one, so each transaction gets exactly the verdict [`CapabilityRules::check`] gives it.
    fn check_batch(&self, txs: &[(&dyn CapabilityTransaction, Txid)]) -> Vec<Result<(), ValidationError>> {
        let mut verdicts = Vec::with_capacity(txs.len());
        let mut proofs = vec![];
        let mut spends = vec![];
        let mut unlinkable_proofs = vec![];
        for (position, (tx, txid)) in txs.iter().enumerate() {
            let verdict = if let Some(confidential) = tx.downcast_ref::<ConfidentialTransaction>() {
                check_confidential_but_proofs(confidential, txid, self).inspect(|()| {
                    proofs.push((position, &confidential.proof, confidential.context()));
                })
            } else if let Some(anonymous) = tx.downcast_ref::<AnonymousTransaction>() {
                check_anonymous_but_proofs(anonymous, txid, self).map(|context| {
                    if let AnonymousValues::Hidden(proof) = &anonymous.values {
                        proofs.push((position, proof, context));
                    }
                    spends.push((position, anonymous, *txid, context));
                })
            } else if let Some(tx) = tx.downcast_ref::<UnlinkableTransaction>() {
                unlinkable::check_unlinkable_but_proof(tx, txid, self)
                    .map(|context| unlinkable_proofs.push((position, tx, context)))
            } else {
                self.check(*tx, txid)
            };
            verdicts.push(verdict);
        }
        self.verify_transfers(proofs, &mut verdicts);
        self.verify_spends(&spends, &mut verdicts);
        unlinkable::verify_proofs(self, &unlinkable_proofs, &mut verdicts);
        verdicts
    }
}

impl PrivacyRules {
    /// The values' proofs of the transactions that passed every other check, in one batch.
    fn verify_transfers(
        &self,
        proofs: Vec<(usize, &specie_confidential::ConfidentialTransfer, [u8; 32])>,
        verdicts: &mut [Result<(), ValidationError>],
    ) {
        if proofs.is_empty() {
            return;
        }
        let batch: Vec<(&specie_confidential::ConfidentialTransfer, [u8; 32])> =
            proofs.iter().map(|(_, proof, context)| (*proof, *context)).collect();
        if specie_confidential::verify_batch(&batch).is_err() {
            for (position, proof, context) in proofs {
                if proof.verify(&context).is_err() {
                    verdicts[position] = Err(invalid_proof());
                }
            }
        }
    }

    /// The spend proofs and owner audits of the anonymous transactions that passed every other
    /// check, in one batch; a transaction whose values' proof failed keeps that first verdict.
    fn verify_spends(
        &self,
        spends: &[(usize, &AnonymousTransaction, Txid, [u8; 32])],
        verdicts: &mut [Result<(), ValidationError>],
    ) {
        let Some(authority) = &self.registration_authority else {
            return;
        };
        if spends.is_empty() {
            return;
        }
        let items: Vec<SpendItem<'_>> = (spends.iter())
            .flat_map(|(_, tx, txid, _)| spend_items(tx, txid))
            .collect();
        let audits: Vec<AuditItem<'_>> = (spends.iter())
            .flat_map(|(_, tx, _, context)| audit_items(tx, context))
            .collect();
        if specie_credential::verify_batch_with_audits(authority, &items, &audits).is_err() {
            for (position, tx, txid, context) in spends {
                if let Err(error) = anonymous_proofs_hold(tx, txid, context, self) {
                    if verdicts[*position].is_ok() {
                        verdicts[*position] = Err(error);
                    }
                }
            }
        }
    }
}

/// The witnesses of a private transaction's `signers` (its own), once the active auditors'
/// co-signatures that follow them check out: one p2pk witness of each active auditor, in the
/// trusted order, over the txid. Witnesses are outside the txid, so auditors co-sign a
/// transaction already signed, and their signatures change nothing else.
fn own_witnesses<'a>(
    witnesses: &'a [Witness],
    signers: usize,
    txid: &Txid,
    rules: &PrivacyRules,
) -> Result<&'a [Witness], ValidationError> {
    let active = &rules.active_auditors;
    if witnesses.len() == signers && !active.is_empty() {
        return Err(confidential(ConfidentialErrorCode::ActiveAuditorMissing));
    }
    if witnesses.len() != signers + active.len() {
        return Err(ValidationError::Transaction(TxErrorCode::MissingWitness));
    }
    let (own, cosignatures) = witnesses.split_at(signers);
    for (auditor, cosignature) in active.iter().zip(cosignatures) {
        let program = witness_program_commitment(auditor);
        if check_witness(&program, cosignature, txid).is_err() {
            return Err(confidential(ConfidentialErrorCode::InvalidCosignature));
        }
    }
    Ok(own)
}

fn confidential(code: ConfidentialErrorCode) -> ValidationError {
    code.into_error()
}

/// Confidential: the transfer's structure checks over both input lists (the transparent
/// inputs first), the clear values against the proof's, the spent commitments, the auditors
/// with jurisdiction, the witnesses. The proofs, the costliest, are left to the caller, who
/// may verify many transactions' together.
fn check_confidential_but_proofs(
    tx: &ConfidentialTransaction,
    txid: &Txid,
    rules: &PrivacyRules,
) -> Result<(), ValidationError> {
    let inputs = tx.transparent_inputs.len() + tx.confidential_inputs.len();
    if inputs == 0 {
        return Err(ValidationError::Transaction(TxErrorCode::NoInputs));
    }
    if tx.transparent_outputs.is_empty() && tx.owners.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoOutputs));
    }
    let own = own_witnesses(&tx.witnesses, inputs, txid, rules)?;
    let prevouts = tx
        .transparent_inputs
        .iter()
        .map(|i| &i.prevout)
        .chain(tx.confidential_inputs.iter().map(|i| &i.prevout));
    check_distinct_prevouts(prevouts)?;
    check_inputs_structure(&tx.transparent_inputs)?;
    check_outputs_value(&tx.transparent_outputs)?;
    check_confidential_statement(tx, rules)?;
    check_owner_witnesses(&tx.input_owners(), own, txid)
}

/// Every check of a confidential transaction, the proofs last.
fn check_confidential(tx: &ConfidentialTransaction, txid: &Txid, rules: &PrivacyRules) -> Result<(), ValidationError> {
    check_confidential_but_proofs(tx, txid, rules)?;
    tx.proof.verify(&tx.context()).map_err(|_| invalid_proof())
}

fn invalid_proof() -> ValidationError {
    confidential(ConfidentialErrorCode::InvalidProof)
}

/// What the proof states against the transaction: clear values, spent commitments, one owner
/// per output, every auditor with jurisdiction addressed.
fn check_confidential_statement(tx: &ConfidentialTransaction, rules: &PrivacyRules) -> Result<(), ValidationError> {
    let public_in = total(tx.transparent_inputs.iter().map(|i| i.data.value))?;
    if tx.proof.public_in() != public_in {
        return Err(confidential(ConfidentialErrorCode::PublicInMismatch));
    }
    let public_out = total(tx.transparent_outputs.iter().map(|o| o.value))?;
    if tx.proof.public_out() != public_out {
        return Err(confidential(ConfidentialErrorCode::PublicOutMismatch));
    }
    let spent = tx.confidential_inputs.iter().map(|i| i.commitment);
    let stated = tx.proof.input_commitments().iter().map(|c| c.to_bytes());
    if tx.proof.input_commitments().len() != tx.confidential_inputs.len() || !spent.eq(stated) {
        return Err(confidential(ConfidentialErrorCode::InputCommitmentMismatch));
    }
    if tx.proof.output_commitments().len() != tx.owners.len() {
        return Err(confidential(ConfidentialErrorCode::OwnerCount));
    }
    let addressed: Vec<[u8; 32]> = tx.proof.auditors().iter().map(|a| a.to_bytes()).collect();
    if !rules.auditors.iter().all(|a| addressed.contains(a)) {
        return Err(confidential(ConfidentialErrorCode::AuditorMissing));
    }
    Ok(())
}

/// The private kinds' own witnesses over their transparent inputs, one p2pk witness each, signing
/// the txid.
fn check_transparent_witnesses(inputs: &[Input], own: &[Witness], txid: &Txid) -> Result<(), ValidationError> {
    let owners: Vec<[u8; 32]> = inputs.iter().map(|i| i.data.witness_program_commitment).collect();
    check_owner_witnesses(&owners, own, txid)
}

fn anonymous(code: AnonymousErrorCode) -> ValidationError {
    code.into_error()
}

/// Every check but the values' proof and the spend proofs. Returns the transaction's context,
/// which the values' proof is verified against.
fn check_anonymous_but_proofs(
    tx: &AnonymousTransaction,
    txid: &Txid,
    rules: &PrivacyRules,
) -> Result<[u8; 32], ValidationError> {
    if rules.registration_authority.is_none() {
        return Err(anonymous(AnonymousErrorCode::NoRegistrationAuthority));
    }
    if tx.transparent_inputs.is_empty() && tx.anonymous_inputs.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoInputs));
    }
    if tx.transparent_outputs.is_empty() && tx.owners.is_empty() {
        return Err(ValidationError::Transaction(TxErrorCode::NoOutputs));
    }
    let own = own_witnesses(&tx.witnesses, tx.transparent_inputs.len(), txid, rules)?;
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
        AnonymousValues::Hidden(_) => check_hidden_statement(tx, rules)?,
    }
    let context = tx.context();
    check_owner_audits(tx, rules)?;
    check_transparent_witnesses(&tx.transparent_inputs, own, txid)?;
    Ok(context)
}

/// Values in clear: one per owner, none zero, every anonymous input in clear, balanced.
fn check_clear_values(tx: &AnonymousTransaction, values: &[u64]) -> Result<(), ValidationError> {
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
fn check_hidden_statement(tx: &AnonymousTransaction, rules: &PrivacyRules) -> Result<(), ValidationError> {
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
    if !rules.auditors.iter().all(|a| addressed.contains(a)) {
        return Err(confidential(ConfidentialErrorCode::AuditorMissing));
    }
    Ok(())
}

/// The owner audits' shape: one per owner and owner auditor with jurisdiction, in the
/// auditors' order, and each spend proof's ciphertexts addressed to exactly those auditors. The
/// audits' proofs are verified with the spend proofs, in batches ([`anonymous_proofs_hold`]).
fn check_owner_audits(tx: &AnonymousTransaction, rules: &PrivacyRules) -> Result<(), ValidationError> {
    let auditors = &rules.owner_auditors;
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
    let misaddressed = (tx.owner_audits.chunks(auditors.len())).any(|audits| {
        audits
            .iter()
            .zip(auditors)
            .any(|(audit, auditor)| audit.ciphertext().auditor() != *auditor)
    });
    if misaddressed {
        return Err(anonymous(AnonymousErrorCode::OwnerAuditorMissing));
    }
    Ok(())
}

/// The spend proofs of one transaction, for a batch.
fn spend_items<'a>(tx: &'a AnonymousTransaction, txid: &'a Txid) -> Vec<SpendItem<'a>> {
    tx.spend_proofs
        .iter()
        .zip(&tx.anonymous_inputs)
        .map(|(proof, input)| (proof, &input.owner, &txid.0))
        .collect()
}

/// The owner audits of one transaction, each with its owner and the context, for a batch.
fn audit_items<'a>(tx: &'a AnonymousTransaction, context: &'a [u8; 32]) -> Vec<AuditItem<'a>> {
    let per_owner = tx.owner_audits.len().checked_div(tx.owners.len()).unwrap_or(0);
    (tx.owners.iter())
        .zip(tx.owner_audits.chunks(per_owner.max(1)))
        .flat_map(|(owner, audits)| audits.iter().map(move |audit| (audit, owner, context)))
        .collect()
}

/// Every check of an anonymous transaction, the proofs last.
fn check_anonymous(tx: &AnonymousTransaction, txid: &Txid, rules: &PrivacyRules) -> Result<(), ValidationError> {
    let context = check_anonymous_but_proofs(tx, txid, rules)?;
    if let AnonymousValues::Hidden(proof) = &tx.values {
        proof.verify(&context).map_err(|_| invalid_proof())?;
    }
    anonymous_proofs_hold(tx, txid, &context, rules)
}

/// The transaction's owner audits and spend proofs (under the trusted RA, checked configured
/// before) verify, together; an audit that fails is named before a spend proof.
fn anonymous_proofs_hold(
    tx: &AnonymousTransaction,
    txid: &Txid,
    context: &[u8; 32],
    rules: &PrivacyRules,
) -> Result<(), ValidationError> {
    let authority = rules
        .registration_authority
        .as_ref()
        .ok_or(anonymous(AnonymousErrorCode::NoRegistrationAuthority))?;
    let audits = audit_items(tx, context);
    if specie_credential::verify_batch_with_audits(authority, &spend_items(tx, txid), &audits).is_ok() {
        return Ok(());
    }
    if audits
        .iter()
        .any(|(audit, owner, context)| audit.verify(owner, context).is_err())
    {
        return Err(anonymous(AnonymousErrorCode::InvalidOwnerAudit));
    }
    Err(anonymous(AnonymousErrorCode::InvalidSpendProof))
}
