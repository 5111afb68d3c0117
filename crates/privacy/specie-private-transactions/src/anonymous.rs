//! Anonymous transactions (Fabric CBDC's *anonymous* privacy level, seed 003 App. B.1 and C, and
//! *anonymous and confidential*): the owner of an anonymous output is a hiding commitment to its
//! owner's enrolment id (`specie_credential::OwnerCommitment`, a fresh blinding per output), and it
//! is spent with a signature of knowledge of a registration authority's credential for that id
//! (`specie_credential::SpendProof`, bound to the txid), not with a key anyone can link.
//!
//! The values are either in clear (*anonymous*) or hidden in Pedersen commitments with a
//! `specie_confidential::ConfidentialTransfer`, exactly as kind `0x07` hides them (*anonymous and
//! confidential*). Value enters from ordinary outputs (transparent inputs, p2pk witnesses) and may
//! leave to ordinary outputs, so the issuer's mints and redeems stay public and the supply exact.
//!
//! Format (kind `0x08`): `header ‖ 0x08 ‖ vec<Input> ‖ vec<AnonymousInput> ‖ vec<owner> ‖
//! vec<Output> ‖ values ‖ vec<OwnerAudit> ‖ vec<Witness> ‖ vec<SpendProof>`, where `values` is
//! `0x00 ‖ vec<u64>` (clear, one per anonymous output) or `0x01 ‖ byte_vec(ConfidentialTransfer)`.
//! Outputs are numbered transparent first, then anonymous. The owner audits are output-major: for
//! each anonymous output, one per owner auditor in ascending key order.
//!
//! - The context (what the value proof and the owner audits are bound to) hashes
//!   [`ANONYMOUS_CONTEXT_DOMAIN`] and every part before `values`, then the values' tag and, in
//!   clear, the values.
//! - The txid hashes every part but the witnesses and the spend proofs; each p2pk witness signs it
//!   and each spend proof takes it as its message, so a proof cannot be replayed in another
//!   transaction.
//! - An anonymous output's UHS id is SHA-256([`ANONYMOUS_OUTPUT_DOMAIN`] ‖ txid ‖ u64(index) ‖
//!   owner ‖ value), the value as its tag and its 8 or 32 bytes: it can never equal a transparent
//!   or a confidential output's id, which hash other domains and lengths.

use rand::{CryptoRng, RngCore};
use secp256k1::Keypair;
use specie_codec::{put_byte_vec, put_vec, Decode, DecodeError, Encode, Reader};
use specie_confidential::{ConfidentialTransfer, Opening, TransferLimits, TransferPlan, TRANSFER_BYTES_MAX};
use specie_credential::{
    AuditorKey as OwnerAuditorKey, Identity, OwnerAudit, OwnerCommitment, OwnerOpening, RaPublicKey, SpendProof,
    OWNER_AUDIT_BYTES, OWNER_COMMITMENT_BYTES,
};

use specie_transaction::extension::{put_header, read_header};
use specie_transaction::hash::{sha256, Sha256Writer};
use specie_transaction::limits::{DecodeLimits, OUT_POINT_BYTES};
use specie_transaction::signing::{NonceMode, SignError};
use specie_transaction::transaction::{read_inputs, read_outputs, read_witnesses};
use specie_transaction::{Input, OutPoint, Output, Txid, UhsId, Witness};

use crate::KIND_ANONYMOUS;

pub const ANONYMOUS_OUTPUT_DOMAIN: &[u8; 26] = b"specie/anonymous-output/v1";
pub const ANONYMOUS_CONTEXT_DOMAIN: &[u8; 27] = b"specie/anonymous-context/v1";
/// Anonymous inputs, and anonymous outputs, in one transaction: the confidential transfer's own
/// limits, so that either value mode allows the same shapes.
pub const ANONYMOUS_INPUTS_MAX: usize = specie_confidential::INPUTS_MAX;
pub const ANONYMOUS_OUTPUTS_MAX: usize = specie_confidential::OUTPUTS_MAX;
/// Owner auditors one transaction may address.
pub const OWNER_AUDITORS_MAX: usize = specie_credential::AUDITORS_MAX;

const VALUE_CLEAR: u8 = 0x00;
const VALUE_HIDDEN: u8 = 0x01;
const VALUE_BYTES_MIN: usize = 1 + 8;

/// An anonymous output's value: in clear, or a Pedersen commitment (compressed Ristretto).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AnonymousValue {
    Clear(u64),
    Hidden([u8; 32]),
}

impl Encode for AnonymousValue {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            AnonymousValue::Clear(value) => {
                out.push(VALUE_CLEAR);
                out.extend_from_slice(&value.to_le_bytes());
            }
            AnonymousValue::Hidden(commitment) => {
                out.push(VALUE_HIDDEN);
                out.extend_from_slice(commitment);
            }
        }
    }
}

impl Decode for AnonymousValue {
    type Limits = ();
    const WHAT: &'static str = "anonymous value";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        match reader.read_u8("anonymous value tag")? {
            VALUE_CLEAR => Ok(AnonymousValue::Clear(reader.read_u64("anonymous value")?)),
            VALUE_HIDDEN => Ok(AnonymousValue::Hidden(reader.read_array("anonymous value commitment")?)),
            kind => Err(DecodeError::UnknownKind {
                what: "anonymous value tag",
                kind,
            }),
        }
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        1 + 32
    }
}

/// The UHS id of anonymous output `outpoint`, owned by `owner`, of value `value`.
pub fn anonymous_uhs_id(outpoint: &OutPoint, owner: &OwnerCommitment, value: &AnonymousValue) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(ANONYMOUS_OUTPUT_DOMAIN);
    hasher.update(&outpoint.txid.0);
    hasher.update(&outpoint.index.to_le_bytes());
    hasher.update(&owner.to_bytes());
    hasher.update(&value.encode());
    UhsId(hasher.finish())
}

/// An anonymous output as its spender names it: what it was, so a sentinel validates without
/// state and the UHS id proves the data honest.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AnonymousInput {
    pub prevout: OutPoint,
    pub owner: OwnerCommitment,
    pub value: AnonymousValue,
}

impl AnonymousInput {
    pub fn uhs_id(&self) -> UhsId {
        anonymous_uhs_id(&self.prevout, &self.owner, &self.value)
    }
}

impl Encode for AnonymousInput {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.prevout.encode_to(out);
        self.owner.encode_to(out);
        self.value.encode_to(out);
    }
}

impl Decode for AnonymousInput {
    type Limits = ();
    const WHAT: &'static str = "anonymous input";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        Ok(AnonymousInput {
            prevout: OutPoint::decode_from(reader, &())?,
            owner: OwnerCommitment::decode_from(reader, &())?,
            value: AnonymousValue::decode_from(reader, &())?,
        })
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        OUT_POINT_BYTES + OWNER_COMMITMENT_BYTES + 1 + 32
    }
}

/// The values of the anonymous outputs: in clear, or proven by a confidential transfer.
// One per transaction, which `SpecieTransaction` already boxes: the size gap costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum AnonymousValues {
    Clear(Vec<u64>),
    Hidden(ConfidentialTransfer),
}

impl AnonymousValues {
    /// The values in clear, if they are.
    pub fn clear(&self) -> Option<&[u64]> {
        match self {
            AnonymousValues::Clear(values) => Some(values),
            AnonymousValues::Hidden(_) => None,
        }
    }

    fn decode_from(reader: &mut Reader<'_>) -> Result<AnonymousValues, DecodeError> {
        match reader.read_u8("anonymous values tag")? {
            VALUE_CLEAR => Ok(AnonymousValues::Clear(reader.read_vec(
                "anonymous values",
                ANONYMOUS_OUTPUTS_MAX as u64,
                8,
                |r| r.read_u64("anonymous value"),
            )?)),
            VALUE_HIDDEN => {
                let len = reader.read_count("anonymous value proof", TRANSFER_BYTES_MAX as u64, 1)?;
                let bytes = reader.read_bytes("anonymous value proof", len)?;
                Ok(AnonymousValues::Hidden(ConfidentialTransfer::decode_exact_with(
                    bytes,
                    &TransferLimits::default(),
                )?))
            }
            kind => Err(DecodeError::UnknownKind {
                what: "anonymous values tag",
                kind,
            }),
        }
    }
}

/// The tag, and in clear the values: what the context commits to.
fn put_values_statement(out: &mut Vec<u8>, clear: Option<&[u64]>) {
    match clear {
        Some(values) => {
            out.push(VALUE_CLEAR);
            put_vec(out, values);
        }
        None => out.push(VALUE_HIDDEN),
    }
}

impl Encode for AnonymousValues {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_values_statement(out, self.clear());
        if let AnonymousValues::Hidden(proof) = self {
            put_byte_vec(out, &proof.encode());
        }
    }
}

/// An anonymous output the transaction creates.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CreatedAnonymousOutput {
    pub outpoint: OutPoint,
    pub owner: OwnerCommitment,
    pub value: AnonymousValue,
    pub uhs_id: UhsId,
}

impl CreatedAnonymousOutput {
    /// The input that spends this output.
    pub fn to_input(&self) -> AnonymousInput {
        AnonymousInput {
            prevout: self.outpoint,
            owner: self.owner,
            value: self.value,
        }
    }
}

/// An anonymous transaction. See the module documentation for its format and rules.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AnonymousTransaction {
    /// Ordinary outputs spent, with p2pk witnesses; their values enter in clear.
    pub transparent_inputs: Vec<Input>,
    pub anonymous_inputs: Vec<AnonymousInput>,
    /// The owner of each anonymous output, in order.
    pub owners: Vec<OwnerCommitment>,
    /// Ordinary outputs created; their values leave in clear.
    pub transparent_outputs: Vec<Output>,
    pub values: AnonymousValues,
    /// For each anonymous output, its owner's id encrypted to each owner auditor, proven.
    pub owner_audits: Vec<OwnerAudit>,
    /// One p2pk witness per transparent input, signing the txid.
    pub witnesses: Vec<Witness>,
    /// One per anonymous input, for the txid.
    pub spend_proofs: Vec<SpendProof>,
}

fn put_statement_parts(
    out: &mut Vec<u8>,
    transparent_inputs: &[Input],
    anonymous_inputs: &[AnonymousInput],
    owners: &[OwnerCommitment],
    transparent_outputs: &[Output],
) {
    put_header(out, KIND_ANONYMOUS);
    put_vec(out, transparent_inputs);
    put_vec(out, anonymous_inputs);
    put_vec(out, owners);
    put_vec(out, transparent_outputs);
}

impl AnonymousTransaction {
    /// What the value proof and the owner audits are bound to: a function of the parts alone
    /// (`clear` is the values in clear, `None` if hidden), so a wallet computes it before proving.
    pub fn context_of(
        transparent_inputs: &[Input],
        anonymous_inputs: &[AnonymousInput],
        owners: &[OwnerCommitment],
        transparent_outputs: &[Output],
        clear: Option<&[u64]>,
    ) -> [u8; 32] {
        let mut preimage = ANONYMOUS_CONTEXT_DOMAIN.to_vec();
        put_statement_parts(
            &mut preimage,
            transparent_inputs,
            anonymous_inputs,
            owners,
            transparent_outputs,
        );
        put_values_statement(&mut preimage, clear);
        sha256(&preimage)
    }

    pub fn context(&self) -> [u8; 32] {
        Self::context_of(
            &self.transparent_inputs,
            &self.anonymous_inputs,
            &self.owners,
            &self.transparent_outputs,
            self.values.clear(),
        )
    }

    fn put_signed_parts(&self, out: &mut Vec<u8>) {
        put_statement_parts(
            out,
            &self.transparent_inputs,
            &self.anonymous_inputs,
            &self.owners,
            &self.transparent_outputs,
        );
        self.values.encode_to(out);
        put_vec(out, &self.owner_audits);
    }

    pub fn txid(&self) -> Txid {
        let mut preimage = Vec::new();
        self.put_signed_parts(&mut preimage);
        Txid(sha256(&preimage))
    }

    /// The value of each anonymous output, in order: the clear values, or the proof's commitments.
    pub fn output_values(&self) -> Vec<AnonymousValue> {
        match &self.values {
            AnonymousValues::Clear(values) => values.iter().map(|v| AnonymousValue::Clear(*v)).collect(),
            AnonymousValues::Hidden(proof) => proof
                .output_commitments()
                .iter()
                .map(|c| AnonymousValue::Hidden(c.to_bytes()))
                .collect(),
        }
    }

    /// The anonymous outputs, numbered after the transparent ones. Pairs owners with values; a
    /// transaction with a count mismatch is invalid (the sentinel says so) and lists only the
    /// pairs it has.
    pub fn created_anonymous_outputs(&self) -> Vec<CreatedAnonymousOutput> {
        self.created_anonymous_outputs_of(self.txid())
    }

    /// [`Self::created_anonymous_outputs`] for this transaction's txid, already hashed.
    fn created_anonymous_outputs_of(&self, txid: Txid) -> Vec<CreatedAnonymousOutput> {
        let first = self.transparent_outputs.len() as u64;
        self.owners
            .iter()
            .zip(self.output_values())
            .enumerate()
            .map(|(i, (owner, value))| {
                let outpoint = OutPoint {
                    txid,
                    index: first + i as u64,
                };
                CreatedAnonymousOutput {
                    outpoint,
                    owner: *owner,
                    value,
                    uhs_id: anonymous_uhs_id(&outpoint, owner, &value),
                }
            })
            .collect()
    }

    /// The UHS ids it spends (transparent inputs, then anonymous) and creates (transparent
    /// outputs, then anonymous).
    pub fn uhs_ids(&self) -> (Vec<UhsId>, Vec<UhsId>) {
        self.uhs_ids_of(self.txid())
    }

    /// [`Self::uhs_ids`] for this transaction's txid, already hashed.
    pub(crate) fn uhs_ids_of(&self, txid: Txid) -> (Vec<UhsId>, Vec<UhsId>) {
        let spent = self.anonymous_inputs.iter().map(AnonymousInput::uhs_id);
        let created = self.created_anonymous_outputs_of(txid).into_iter().map(|c| c.uhs_id);
        crate::kinds::private_uhs_ids(
            &txid,
            &self.transparent_inputs,
            spent,
            &self.transparent_outputs,
            created,
        )
    }

    /// Whether the owner audits have the canonical shape (the same number for every anonymous
    /// output, output-major) and each is proven for its output and `context`. Which auditors
    /// they address is the verifier's policy; this checks only that what is there holds.
    pub fn owner_audits_hold(&self, context: &[u8; 32]) -> bool {
        let per_output = self.owner_audits.len().checked_div(self.owners.len()).unwrap_or(0);
        self.owner_audits.len() == per_output * self.owners.len()
            && self
                .owner_audits
                .chunks(per_output.max(1))
                .zip(&self.owners)
                .all(|(audits, owner)| audits.iter().all(|audit| audit.verify(owner, context).is_ok()))
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let transparent_inputs = read_inputs(reader, limits)?;
        let anonymous_inputs = reader.read_vec(
            "anonymous inputs",
            ANONYMOUS_INPUTS_MAX as u64,
            OUT_POINT_BYTES + OWNER_COMMITMENT_BYTES + VALUE_BYTES_MIN,
            |r| AnonymousInput::decode_from(r, &()),
        )?;
        let owners = reader.read_vec(
            "anonymous owners",
            ANONYMOUS_OUTPUTS_MAX as u64,
            OWNER_COMMITMENT_BYTES,
            |r| OwnerCommitment::decode_from(r, &()),
        )?;
        let transparent_outputs = read_outputs(reader, limits)?;
        let values = AnonymousValues::decode_from(reader)?;
        let owner_audits = reader.read_vec(
            "owner audits",
            (ANONYMOUS_OUTPUTS_MAX * OWNER_AUDITORS_MAX) as u64,
            OWNER_AUDIT_BYTES,
            |r| OwnerAudit::decode_from(r, &()),
        )?;
        let witnesses = read_witnesses(reader, limits)?;
        let spend_proofs = reader.read_vec(
            "spend proofs",
            ANONYMOUS_INPUTS_MAX as u64,
            specie_credential::spend_proof_bytes(0),
            |r| SpendProof::decode_from(r, &()),
        )?;
        Ok(AnonymousTransaction {
            transparent_inputs,
            anonymous_inputs,
            owners,
            transparent_outputs,
            values,
            owner_audits,
            witnesses,
            spend_proofs,
        })
    }
}

impl Encode for AnonymousTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.put_signed_parts(out);
        put_vec(out, &self.witnesses);
        put_vec(out, &self.spend_proofs);
    }
}

impl Decode for AnonymousTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "anonymous transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_ANONYMOUS))?;
        Self::decode_body(reader, limits)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

/// An anonymous output being spent, with what its owner holds.
#[derive(Clone, Debug)]
pub struct AnonymousSpend {
    pub input: AnonymousInput,
    pub owner: OwnerOpening,
    /// The value's opening, for a hidden value.
    pub value: Option<Opening>,
}

/// What a wallet wants an anonymous transaction to do; [`AnonymousPlan::prove_and_sign`] makes it.
#[derive(Clone, Debug)]
pub struct AnonymousPlan {
    pub transparent_inputs: Vec<Input>,
    /// Anonymous outputs spent, all owned by the identity that proves the plan.
    pub anonymous_inputs: Vec<AnonymousSpend>,
    /// Anonymous outputs to create: the owner's opening (the payee's enrolment id, a fresh
    /// blinding: [`OwnerOpening::random`]) and the value.
    pub outputs: Vec<(OwnerOpening, u64)>,
    pub transparent_outputs: Vec<Output>,
    /// Values hidden (anonymous and confidential) or in clear (anonymous).
    pub hide_values: bool,
    /// The value auditors with jurisdiction (hidden values only).
    pub value_auditors: Vec<specie_confidential::AuditorKey>,
    /// The owner auditors with jurisdiction, strictly ascending.
    pub owner_auditors: Vec<OwnerAuditorKey>,
}

/// Why an anonymous transaction could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AnonymousBuildError {
    #[error("cannot prove the values: {0}")]
    Values(#[from] specie_confidential::ProveError),
    #[error("cannot prove a spend: {0}")]
    Spend(#[from] specie_credential::ProveError),
    #[error("cannot sign: {0}")]
    Sign(#[from] SignError),
    #[error("the clear values overflow a u64")]
    Overflow,
    #[error("anonymous input {index} has a hidden value but no opening for it")]
    MissingValueOpening { index: usize },
    #[error("a hidden anonymous input cannot be spent with values in clear")]
    HiddenInputInClear,
    #[error("anonymous inputs need an enrolled identity to prove their spends")]
    NoIdentity,
}

/// The value and proofs of a plan, before signing.
type ProvenValues = (AnonymousValues, Vec<Option<Opening>>);

impl AnonymousPlan {
    /// Proves the plan (values, owner audits, one spend proof per anonymous input under
    /// `authority`'s credential held by `identity`) and signs every transparent input with
    /// `keys[i]`. Returns the transaction and each anonymous output's value opening (hidden
    /// values), in order: with the owner's blinding, what its payee needs.
    pub fn prove_and_sign(
        &self,
        keys: &[Keypair],
        identity: Option<&Identity>,
        authority: &RaPublicKey,
        mode: NonceMode,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(AnonymousTransaction, Vec<Option<Opening>>), AnonymousBuildError> {
        let anonymous_inputs: Vec<AnonymousInput> = self.anonymous_inputs.iter().map(|s| s.input).collect();
        let owners: Vec<OwnerCommitment> = self.outputs.iter().map(|(owner, _)| owner.commitment()).collect();
        let (values, openings) = self.prove_values(&anonymous_inputs, &owners, rng)?;
        let context = AnonymousTransaction::context_of(
            &self.transparent_inputs,
            &anonymous_inputs,
            &owners,
            &self.transparent_outputs,
            values.clear(),
        );
        let owner_audits = self
            .outputs
            .iter()
            .flat_map(|(owner, _)| self.owner_auditors.iter().map(move |auditor| (owner, *auditor)))
            .map(|(owner, auditor)| OwnerAudit::prove(owner, auditor, &context, rng))
            .collect();
        let mut tx = AnonymousTransaction {
            transparent_inputs: self.transparent_inputs.clone(),
            anonymous_inputs,
            owners,
            transparent_outputs: self.transparent_outputs.clone(),
            values,
            owner_audits,
            witnesses: vec![],
            spend_proofs: vec![],
        };
        tx.sign_transparent(keys, mode)?;
        let txid = tx.txid();
        if !self.anonymous_inputs.is_empty() {
            let identity = identity.ok_or(AnonymousBuildError::NoIdentity)?;
            tx.spend_proofs = self
                .anonymous_inputs
                .iter()
                .map(|spend| identity.prove_spend(authority, &spend.owner, &txid.0, &self.owner_auditors, rng))
                .collect::<Result<_, _>>()?;
        }
        Ok((tx, openings))
    }

    fn prove_values(
        &self,
        anonymous_inputs: &[AnonymousInput],
        owners: &[OwnerCommitment],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<ProvenValues, AnonymousBuildError> {
        let clear_in = self
            .anonymous_inputs
            .iter()
            .filter_map(|spend| match spend.input.value {
                AnonymousValue::Clear(value) => Some(value),
                AnonymousValue::Hidden(_) => None,
            });
        let public_in = clear_total(self.transparent_inputs.iter().map(|i| i.data.value).chain(clear_in))?;
        if !self.hide_values {
            if self
                .anonymous_inputs
                .iter()
                .any(|s| matches!(s.input.value, AnonymousValue::Hidden(_)))
            {
                return Err(AnonymousBuildError::HiddenInputInClear);
            }
            let values = self.outputs.iter().map(|(_, value)| *value).collect();
            return Ok((AnonymousValues::Clear(values), vec![None; self.outputs.len()]));
        }
        let mut hidden_inputs = vec![];
        for (index, spend) in self.anonymous_inputs.iter().enumerate() {
            if let AnonymousValue::Hidden(_) = spend.input.value {
                hidden_inputs.push(spend.value.ok_or(AnonymousBuildError::MissingValueOpening { index })?);
            }
        }
        let plan = TransferPlan {
            context: AnonymousTransaction::context_of(
                &self.transparent_inputs,
                anonymous_inputs,
                owners,
                &self.transparent_outputs,
                None,
            ),
            inputs: hidden_inputs,
            outputs: self.outputs.iter().map(|(_, value)| *value).collect(),
            public_in,
            public_out: clear_total(self.transparent_outputs.iter().map(|o| o.value))?,
            auditors: self.value_auditors.clone(),
        };
        let (proof, openings) = ConfidentialTransfer::prove(&plan, rng)?;
        Ok((AnonymousValues::Hidden(proof), openings.into_iter().map(Some).collect()))
    }
}

impl AnonymousTransaction {
    /// Signs the txid with `keys[i]` for transparent input `i`, replacing the witnesses.
    pub fn sign_transparent(&mut self, keys: &[Keypair], mode: NonceMode) -> Result<(), SignError> {
        self.witnesses = crate::kinds::sign_transparent_inputs(&self.transparent_inputs, keys, &self.txid(), mode)?;
        Ok(())
    }
}

fn clear_total(values: impl Iterator<Item = u64>) -> Result<u64, AnonymousBuildError> {
    let mut values = values;
    values
        .try_fold(0u64, |sum, value| sum.checked_add(value))
        .ok_or(AnonymousBuildError::Overflow)
}
