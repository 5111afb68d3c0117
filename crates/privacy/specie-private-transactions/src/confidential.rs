//! Confidential transactions (Fabric CBDC's *confidential* privacy level, seed 003 App. B–C): the
//! values of their confidential outputs are Pedersen commitments, proven in range and balanced by
//! a `specie_confidential::ConfidentialTransfer`, with each value encrypted to the auditors with
//! jurisdiction. Owners stay visible (witness program commitments, as in a transfer).
//!
//! One kind covers shielding, paying and unshielding: a confidential transaction may spend
//! ordinary outputs (their values enter in clear, the proof's `public_in`) and confidential ones,
//! and may create ordinary outputs (leaving in clear, `public_out`) and confidential ones. The
//! issuer's mints and redeems stay transparent, so the supply is known exactly even when every
//! payment is confidential.
//!
//! Format (kind `0x07`): `header ‖ 0x07 ‖ vec<Input> (transparent) ‖ vec<ConfidentialInput> ‖
//! vec<owner (32)> (one per confidential output) ‖ vec<Output> (transparent) ‖ byte_vec(proof) ‖
//! vec<Witness>`. Outputs are numbered transparent first (0..k), then confidential (k..k+m): the
//! transparent ones are ordinary outputs any transfer can spend.
//!
//! - The proof is bound to the transaction by its context: SHA-256 over
//!   [`CONFIDENTIAL_CONTEXT_DOMAIN`] and every part but the proof and the witnesses.
//! - The txid hashes every part but the witnesses, the proof included; one p2pk witness per input
//!   (transparent inputs first) signs it.
//! - A confidential output's UHS id is SHA-256([`CONFIDENTIAL_OUTPUT_DOMAIN`] ‖ txid ‖ u64(index)
//!   ‖ owner ‖ commitment), a 133-byte preimage: it can never equal a transparent output's id
//!   (80 bytes) or a marker.

use rand::{CryptoRng, RngCore};
use secp256k1::Keypair;
use specie_codec::{put_byte_vec, put_vec, Decode, DecodeError, Encode, Reader};
use specie_confidential::{
    AuditorKey, ConfidentialTransfer, Opening, ProveError, TransferLimits, TransferPlan, TRANSFER_BYTES_MAX,
};

use specie_transaction::extension::{put_header, read_header};
use specie_transaction::hash::{sha256, Sha256Writer};
use specie_transaction::limits::{DecodeLimits, OUT_POINT_BYTES};
use specie_transaction::signing::{NonceMode, P2pkWitness, SignError};
use specie_transaction::transaction::{read_inputs, read_outputs, read_witnesses};
use specie_transaction::{Input, OutPoint, Output, Txid, UhsId, Witness};

use crate::KIND_CONFIDENTIAL;

pub const CONFIDENTIAL_OUTPUT_DOMAIN: &[u8; 29] = b"specie/confidential-output/v1";
pub const CONFIDENTIAL_CONTEXT_DOMAIN: &[u8; 30] = b"specie/confidential-context/v1";
/// A confidential input on the wire: outpoint, owner, commitment.
pub const CONFIDENTIAL_INPUT_BYTES: usize = OUT_POINT_BYTES + 32 + 32;

/// The UHS id of confidential output `index` of `txid`, owned by `owner`, committing to
/// `commitment` (compressed Ristretto).
pub fn confidential_uhs_id(outpoint: &OutPoint, owner: &[u8; 32], commitment: &[u8; 32]) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(CONFIDENTIAL_OUTPUT_DOMAIN);
    hasher.update(&outpoint.txid.0);
    hasher.update(&outpoint.index.to_le_bytes());
    hasher.update(owner);
    hasher.update(commitment);
    UhsId(hasher.finish())
}

/// A confidential output as its spender names it. Like a transparent input it carries what the
/// output was, so a sentinel validates without state and the UHS id proves the data honest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ConfidentialInput {
    pub prevout: OutPoint,
    /// The witness program commitment of the output's owner.
    pub owner: [u8; 32],
    /// The output's Pedersen commitment, compressed.
    pub commitment: [u8; 32],
}

impl ConfidentialInput {
    pub fn uhs_id(&self) -> UhsId {
        confidential_uhs_id(&self.prevout, &self.owner, &self.commitment)
    }
}

impl Encode for ConfidentialInput {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.prevout.encode_to(out);
        out.extend_from_slice(&self.owner);
        out.extend_from_slice(&self.commitment);
    }
}

impl Decode for ConfidentialInput {
    type Limits = ();
    const WHAT: &'static str = "confidential input";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        Ok(ConfidentialInput {
            prevout: OutPoint::decode_from(reader, &())?,
            owner: reader.read_array("confidential input owner")?,
            commitment: reader.read_array("confidential input commitment")?,
        })
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        CONFIDENTIAL_INPUT_BYTES
    }
}

/// A confidential output the transaction creates, with what its owner needs to spend it (and,
/// with the opening the payer hands over, to know its value).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CreatedConfidentialOutput {
    pub outpoint: OutPoint,
    pub owner: [u8; 32],
    pub commitment: [u8; 32],
    pub uhs_id: UhsId,
}

impl CreatedConfidentialOutput {
    /// The input that spends this output.
    pub fn to_input(&self) -> ConfidentialInput {
        ConfidentialInput {
            prevout: self.outpoint,
            owner: self.owner,
            commitment: self.commitment,
        }
    }
}

/// A confidential transaction. See the module documentation for its format and rules.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ConfidentialTransaction {
    /// Ordinary outputs spent; their values are the proof's `public_in`.
    pub transparent_inputs: Vec<Input>,
    pub confidential_inputs: Vec<ConfidentialInput>,
    /// The owner of each confidential output, in the proof's output order.
    pub owners: Vec<[u8; 32]>,
    /// Ordinary outputs created; their values are the proof's `public_out`.
    pub transparent_outputs: Vec<Output>,
    pub proof: ConfidentialTransfer,
    /// One p2pk witness per input, transparent inputs first, each signing the txid.
    pub witnesses: Vec<Witness>,
}

impl ConfidentialTransaction {
    fn put_parts(&self, out: &mut Vec<u8>) {
        put_header(out, KIND_CONFIDENTIAL);
        put_vec(out, &self.transparent_inputs);
        put_vec(out, &self.confidential_inputs);
        put_vec(out, &self.owners);
        put_vec(out, &self.transparent_outputs);
    }

    /// What the proof is bound to: every part but the proof and the witnesses. A function of the
    /// parts alone, so a wallet computes it before proving.
    pub fn context_of(
        transparent_inputs: &[Input],
        confidential_inputs: &[ConfidentialInput],
        owners: &[[u8; 32]],
        transparent_outputs: &[Output],
    ) -> [u8; 32] {
        let mut preimage = CONFIDENTIAL_CONTEXT_DOMAIN.to_vec();
        put_header(&mut preimage, KIND_CONFIDENTIAL);
        put_vec(&mut preimage, transparent_inputs);
        put_vec(&mut preimage, confidential_inputs);
        put_vec(&mut preimage, owners);
        put_vec(&mut preimage, transparent_outputs);
        sha256(&preimage)
    }

    pub fn context(&self) -> [u8; 32] {
        Self::context_of(
            &self.transparent_inputs,
            &self.confidential_inputs,
            &self.owners,
            &self.transparent_outputs,
        )
    }

    pub fn txid(&self) -> Txid {
        let mut preimage = Vec::new();
        self.put_parts(&mut preimage);
        put_byte_vec(&mut preimage, &self.proof.encode());
        Txid(sha256(&preimage))
    }

    /// The commitments of the confidential outputs, compressed, in order.
    pub fn output_commitments(&self) -> Vec<[u8; 32]> {
        self.proof.output_commitments().iter().map(|c| c.to_bytes()).collect()
    }

    /// The confidential outputs, numbered after the transparent ones. Pairs owners with the
    /// proof's commitments; a transaction with a count mismatch is invalid (the sentinel says
    /// so) and lists only the pairs it has.
    pub fn created_confidential_outputs(&self) -> Vec<CreatedConfidentialOutput> {
        self.created_confidential_outputs_of(self.txid())
    }

    /// [`Self::created_confidential_outputs`] for this transaction's txid, already hashed.
    fn created_confidential_outputs_of(&self, txid: Txid) -> Vec<CreatedConfidentialOutput> {
        let first = self.transparent_outputs.len() as u64;
        self.owners
            .iter()
            .zip(self.output_commitments())
            .enumerate()
            .map(|(i, (owner, commitment))| {
                let outpoint = OutPoint {
                    txid,
                    index: first + i as u64,
                };
                CreatedConfidentialOutput {
                    outpoint,
                    owner: *owner,
                    commitment,
                    uhs_id: confidential_uhs_id(&outpoint, owner, &commitment),
                }
            })
            .collect()
    }

    /// The UHS ids it spends (transparent inputs, then confidential) and creates (transparent
    /// outputs, then confidential).
    pub fn uhs_ids(&self) -> (Vec<UhsId>, Vec<UhsId>) {
        self.uhs_ids_of(self.txid())
    }

    /// [`Self::uhs_ids`] for this transaction's txid, already hashed.
    pub(crate) fn uhs_ids_of(&self, txid: Txid) -> (Vec<UhsId>, Vec<UhsId>) {
        let spent = self.confidential_inputs.iter().map(ConfidentialInput::uhs_id);
        let created = self.created_confidential_outputs_of(txid).into_iter().map(|c| c.uhs_id);
        crate::kinds::private_uhs_ids(
            &txid,
            &self.transparent_inputs,
            spent,
            &self.transparent_outputs,
            created,
        )
    }

    /// The owner commitment each witness must match, in witness order.
    pub fn input_owners(&self) -> Vec<[u8; 32]> {
        self.transparent_inputs
            .iter()
            .map(|input| input.data.witness_program_commitment)
            .chain(self.confidential_inputs.iter().map(|input| input.owner))
            .collect()
    }

    /// Signs the txid with `keys[i]` for input `i` (transparent inputs first), replacing the
    /// witnesses.
    pub fn sign(&mut self, keys: &[Keypair], mode: NonceMode) -> Result<(), SignError> {
        let owners = self.input_owners();
        if keys.len() != owners.len() {
            return Err(SignError::KeypairCount {
                keypairs: keys.len(),
                inputs: owners.len(),
            });
        }
        let txid = self.txid();
        self.witnesses = owners
            .iter()
            .zip(keys)
            .enumerate()
            .map(|(index, (owner, key))| {
                let witness = P2pkWitness::sign(key, &txid.0, mode);
                if witness.program_commitment() != *owner {
                    return Err(SignError::KeyMismatch { index });
                }
                Ok(witness.to_witness())
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let transfer_limits = TransferLimits::default();
        let transparent_inputs = read_inputs(reader, limits)?;
        let confidential_inputs = reader.read_vec(
            "confidential inputs",
            transfer_limits.inputs_max as u64,
            CONFIDENTIAL_INPUT_BYTES,
            |r| ConfidentialInput::decode_from(r, &()),
        )?;
        let owners = reader.read_vec("owners", transfer_limits.outputs_max as u64, 32, |r| {
            r.read_array("owner")
        })?;
        let transparent_outputs = read_outputs(reader, limits)?;
        let proof_bytes_len = reader.read_count("confidential proof", TRANSFER_BYTES_MAX as u64, 1)?;
        let proof_bytes = reader.read_bytes("confidential proof", proof_bytes_len)?;
        let proof = ConfidentialTransfer::decode_exact_with(proof_bytes, &transfer_limits)?;
        let witnesses = read_witnesses(reader, limits)?;
        Ok(ConfidentialTransaction {
            transparent_inputs,
            confidential_inputs,
            owners,
            transparent_outputs,
            proof,
            witnesses,
        })
    }
}

impl Encode for ConfidentialTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.put_parts(out);
        put_byte_vec(out, &self.proof.encode());
        put_vec(out, &self.witnesses);
    }
}

impl Decode for ConfidentialTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "confidential transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_CONFIDENTIAL))?;
        Self::decode_body(reader, limits)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

/// What a wallet wants a confidential transaction to do; [`ConfidentialPlan::prove_and_sign`]
/// makes it.
#[derive(Clone, Debug)]
pub struct ConfidentialPlan {
    pub transparent_inputs: Vec<Input>,
    /// Confidential outputs spent, each with the opening its owner holds.
    pub confidential_inputs: Vec<(ConfidentialInput, Opening)>,
    /// Confidential outputs to create: owner and value.
    pub outputs: Vec<([u8; 32], u64)>,
    pub transparent_outputs: Vec<Output>,
    /// The auditors with jurisdiction: each can read every output's value.
    pub auditors: Vec<AuditorKey>,
}

/// Why a confidential transaction could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot prove the transfer: {0}")]
    Prove(#[from] ProveError),
    #[error("cannot sign: {0}")]
    Sign(#[from] SignError),
    #[error("the transparent values overflow a u64")]
    Overflow,
}

impl ConfidentialPlan {
    /// Proves the plan (range, balance and auditor proofs bound to the transaction) and signs
    /// every input with `keys[i]` (transparent inputs first). Returns the transaction and each
    /// confidential output's opening, in order: what its payee needs to know and spend it.
    pub fn prove_and_sign(
        &self,
        keys: &[Keypair],
        mode: NonceMode,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(ConfidentialTransaction, Vec<Opening>), BuildError> {
        let public_in = clear_total(self.transparent_inputs.iter().map(|i| i.data.value))?;
        let public_out = clear_total(self.transparent_outputs.iter().map(|o| o.value))?;
        let confidential_inputs: Vec<ConfidentialInput> = self.confidential_inputs.iter().map(|(i, _)| *i).collect();
        let owners: Vec<[u8; 32]> = self.outputs.iter().map(|(owner, _)| *owner).collect();
        let context = ConfidentialTransaction::context_of(
            &self.transparent_inputs,
            &confidential_inputs,
            &owners,
            &self.transparent_outputs,
        );
        let plan = TransferPlan {
            context,
            inputs: self.confidential_inputs.iter().map(|(_, opening)| *opening).collect(),
            outputs: self.outputs.iter().map(|(_, value)| *value).collect(),
            public_in,
            public_out,
            auditors: self.auditors.clone(),
        };
        let (proof, openings) = ConfidentialTransfer::prove(&plan, rng)?;
        let mut tx = ConfidentialTransaction {
            transparent_inputs: self.transparent_inputs.clone(),
            confidential_inputs,
            owners,
            transparent_outputs: self.transparent_outputs.clone(),
            proof,
            witnesses: vec![],
        };
        tx.sign(keys, mode)?;
        Ok((tx, openings))
    }
}

fn clear_total(values: impl Iterator<Item = u64>) -> Result<u64, BuildError> {
    let mut values = values;
    values
        .try_fold(0u64, |sum, value| sum.checked_add(value))
        .ok_or(BuildError::Overflow)
}
