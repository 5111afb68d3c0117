//! The online core as the offline authority's bank (docs/transaction-format.md §5.7–5.8): an
//! *offline funding* moves value out of core circulation to the offline authority, which issues
//! tokens for it to the one-time keys the funding names; an *offline payout* brings a deposited
//! token's value back as a core output, signed by the authority's bridge key.
//!
//! * Offline funding (kind `0x05`): `header ‖ kind ‖ authority(32) ‖ owners_digest(32) ‖
//!   amount(u64) ‖ vec<Input> ‖ vec<Output> (change) ‖ vec<Witness>`, txid = SHA-256(everything
//!   but the witnesses), signed by every input owner. `authority` is the offline authority's
//!   bridge key; `owners_digest` = [`offline_owners_digest`] of the one-time keys that get the
//!   tokens, so nobody who sees the funding confirmed can claim its tokens for keys of their own.
//!   It creates the change plus [`offline_funding_marker`]`(txid)`, which the authority finds in
//!   the UHS before issuing, once.
//! * Offline payout (kind `0x06`): `header ‖ kind ‖ authority(32) ‖ serial(16) ‖ address(32) ‖
//!   amount(u64) ‖ signature(64)`; txid = SHA-256(all but the signature); the signature is the
//!   authority's Ed25519 signature over `"specie/offline-payout/v1" ‖ txid`. It creates output 0
//!   `{ address, amount }` and [`offline_payout_marker`]`(authority, serial)`: a token's value
//!   comes back at most once, whoever presents the payout and however often.
//!
//! Markers are never spendable and never collide with other kinds' (module [`crate::fastpay`]
//! explains why): the preimages are 25 + 32 = 57 bytes (funding, another domain than FastPay's
//! 57-byte one) and 24 + 32 + 16 = 72 bytes (payout).
//!
//! The core trusts an offline authority less than an issuer: its payouts need its signature,
//! but what it could pay out wrongly is only what was funded to it, as the supply audit shows
//! (docs/offline-cash.md, "Trust").

use crate::extension::{put_header, KIND_OFFLINE_FUND, KIND_OFFLINE_PAYOUT};
use crate::fastpay::{read_funding_body, FundingBody};
use crate::hash::{sha256, Sha256Writer};
use crate::limits::{DecodeLimits, HASH_BYTES, INPUT_BYTES, OUTPUT_BYTES};
use crate::signing::{sign_inputs, NonceMode, SignError};
use crate::transaction::{Input, Output, Witness};
use crate::{Txid, UhsId};
use ed25519_dalek::ed25519::signature::Keypair as Ed25519Keypair;
use ed25519_dalek::{Signature, Signer, VerifyingKey};
use secp256k1::Keypair;
use specie_codec::{put_u64, put_vec, DecodeError, Encode, Reader};

pub const OFFLINE_FUNDING_MARKER_DOMAIN: &[u8; 25] = b"specie/offline-funding/v1";
pub const OFFLINE_PAYOUT_MARKER_DOMAIN: &[u8; 24] = b"specie/offline-payout/v1";
/// What the authority's payout signature signs before the txid (the marker's domain: a
/// signature over a payout can be nothing else).
pub const OFFLINE_PAYOUT_SIGNING_DOMAIN: &[u8; 24] = OFFLINE_PAYOUT_MARKER_DOMAIN;
pub const OFFLINE_SERIAL_BYTES: usize = 16;
/// A payout's encoding: header, kind, authority, serial, address, amount, signature.
pub const OFFLINE_PAYOUT_BYTES: usize = 9 + 32 + OFFLINE_SERIAL_BYTES + 32 + 8 + 64;

const _: () = assert!(OFFLINE_FUNDING_MARKER_DOMAIN.len() + HASH_BYTES != INPUT_BYTES);
const _: () = assert!(OFFLINE_PAYOUT_MARKER_DOMAIN.len() + 32 + OFFLINE_SERIAL_BYTES == 72);
const _: () = assert!(OFFLINE_PAYOUT_MARKER_DOMAIN.len() + 32 + OFFLINE_SERIAL_BYTES != INPUT_BYTES);

/// SHA-256("specie/offline-funding/v1" ‖ txid): what the authority looks for in the UHS.
pub fn offline_funding_marker(txid: &Txid) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(OFFLINE_FUNDING_MARKER_DOMAIN);
    hasher.update(&txid.0);
    UhsId(hasher.finish())
}

/// SHA-256("specie/offline-payout/v1" ‖ authority ‖ serial): one payout per token serial.
pub fn offline_payout_marker(authority: &[u8; 32], serial: &[u8; OFFLINE_SERIAL_BYTES]) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(OFFLINE_PAYOUT_MARKER_DOMAIN);
    hasher.update(authority);
    hasher.update(serial);
    UhsId(hasher.finish())
}

/// SHA-256 of the one-time keys, concatenated in order, that a funding's tokens go to.
pub fn offline_owners_digest(owners: &[[u8; 32]]) -> [u8; 32] {
    let mut hasher = Sha256Writer::new();
    for owner in owners {
        hasher.update(owner);
    }
    hasher.finish()
}

/// Value leaves core circulation for the offline authority `authority`, which issues it as
/// tokens to the keys whose digest is `owners_digest`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OfflineFunding {
    pub authority: [u8; 32],
    pub owners_digest: [u8; 32],
    pub amount: u64,
    pub inputs: Vec<Input>,
    /// Change outputs; may be empty.
    pub outputs: Vec<Output>,
    /// One p2pk witness per input, signing the txid.
    pub witnesses: Vec<Witness>,
}

impl OfflineFunding {
    fn txid_preimage(&self) -> Vec<u8> {
        let mut preimage = Vec::with_capacity(
            9 + 32 + 32 + 8 + 16 + self.inputs.len() * INPUT_BYTES + self.outputs.len() * OUTPUT_BYTES,
        );
        put_header(&mut preimage, KIND_OFFLINE_FUND);
        preimage.extend_from_slice(&self.authority);
        preimage.extend_from_slice(&self.owners_digest);
        put_u64(&mut preimage, self.amount);
        put_vec(&mut preimage, &self.inputs);
        put_vec(&mut preimage, &self.outputs);
        preimage
    }

    pub fn txid(&self) -> Txid {
        Txid(sha256(&self.txid_preimage()))
    }

    pub fn marker(&self) -> UhsId {
        offline_funding_marker(&self.txid())
    }

    /// Builds a funding and signs it by every input owner (`owners[i]` for input `i`).
    pub fn new_signed(
        authority: [u8; 32],
        owners_digest: [u8; 32],
        amount: u64,
        inputs: Vec<Input>,
        outputs: Vec<Output>,
        owners: &[Keypair],
        mode: NonceMode,
    ) -> Result<Self, SignError> {
        let mut funding = OfflineFunding {
            authority,
            owners_digest,
            amount,
            inputs,
            outputs,
            witnesses: Vec::new(),
        };
        funding.witnesses = sign_inputs(&funding.inputs, &funding.txid().0, owners, mode)?;
        Ok(funding)
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let FundingBody {
            destination,
            beneficiary,
            amount,
            inputs,
            outputs,
            witnesses,
        } = read_funding_body(reader, limits)?;
        Ok(OfflineFunding {
            authority: destination,
            owners_digest: beneficiary,
            amount,
            inputs,
            outputs,
            witnesses,
        })
    }
}

impl Encode for OfflineFunding {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.txid_preimage());
        put_vec(out, &self.witnesses);
    }
}

/// A deposited token's value back to the core: `amount` to `address`, authorised by the offline
/// authority's signature, at most once per token serial.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OfflinePayout {
    pub authority: [u8; 32],
    pub serial: [u8; OFFLINE_SERIAL_BYTES],
    outputs: [Output; 1],
    pub signature: [u8; 64],
}

impl OfflinePayout {
    /// A payout of `amount` to `address` (a witness program commitment) for the token `serial`,
    /// signed by the authority's bridge key (a `SigningKey`, or one expanded once:
    /// `specie_ed25519::ExpandedSigningKey`).
    pub fn new_signed<K>(
        bridge: &K,
        serial: [u8; OFFLINE_SERIAL_BYTES],
        address: [u8; 32],
        amount: u64,
    ) -> OfflinePayout
    where
        K: Signer<Signature> + Ed25519Keypair<VerifyingKey = VerifyingKey>,
    {
        let mut payout = OfflinePayout {
            authority: bridge.verifying_key().to_bytes(),
            serial,
            outputs: [Output {
                witness_program_commitment: address,
                value: amount,
            }],
            signature: [0; 64],
        };
        payout.signature = bridge.sign(&payout.signed_message()).to_bytes();
        payout
    }

    pub fn address(&self) -> [u8; 32] {
        self.outputs[0].witness_program_commitment
    }

    pub fn amount(&self) -> u64 {
        self.outputs[0].value
    }

    /// The one output, at index 0 of the txid.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    fn txid_preimage(&self) -> Vec<u8> {
        let mut preimage = Vec::with_capacity(OFFLINE_PAYOUT_BYTES - 64);
        put_header(&mut preimage, KIND_OFFLINE_PAYOUT);
        preimage.extend_from_slice(&self.authority);
        preimage.extend_from_slice(&self.serial);
        preimage.extend_from_slice(&self.outputs[0].witness_program_commitment);
        put_u64(&mut preimage, self.outputs[0].value);
        preimage
    }

    pub fn txid(&self) -> Txid {
        Txid(sha256(&self.txid_preimage()))
    }

    /// What the authority signs: the signing domain ‖ txid.
    pub fn signed_message(&self) -> Vec<u8> {
        let mut message = OFFLINE_PAYOUT_SIGNING_DOMAIN.to_vec();
        message.extend_from_slice(&self.txid().0);
        message
    }

    /// Whether the signature verifies under `authority` (cofactored, as every specie mode's
    /// Ed25519 checks are).
    pub fn signature_valid(&self) -> bool {
        specie_ed25519::check_public_key(&self.authority)
            .is_ok_and(|key| specie_ed25519::verify_cofactored(&key, &self.signed_message(), &self.signature))
    }

    pub fn marker(&self) -> UhsId {
        offline_payout_marker(&self.authority, &self.serial)
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let authority = reader.read_array("payout authority")?;
        let serial = reader.read_array("payout serial")?;
        let address = reader.read_array("payout address")?;
        let amount = reader.read_u64("payout amount")?;
        let signature = reader.read_array("payout signature")?;
        Ok(OfflinePayout {
            authority,
            serial,
            outputs: [Output {
                witness_program_commitment: address,
                value: amount,
            }],
            signature,
        })
    }
}

impl Encode for OfflinePayout {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.txid_preimage());
        out.extend_from_slice(&self.signature);
    }
}
