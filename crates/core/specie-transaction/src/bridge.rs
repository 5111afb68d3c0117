//! The online core as a bridge's bank (docs/transaction-format.md §5.7–5.8). A bridge is a
//! service that holds value outside core circulation under its own bridge key: the offline
//! authority (offline cash) or the SPEEDEX exchange. A *bridge funding* moves value out of core
//! circulation to the bridge, which issues it (as offline tokens to the one-time keys the funding
//! names, or as an exchange deposit); a *bridge payout* brings value back (a deposited token's, a
//! withdrawal's) as a core output, signed by the bridge key.
//!
//! * Bridge funding (kind `0x05`): `header ‖ kind ‖ authority(32) ‖ owners_digest(32) ‖
//!   amount(u64) ‖ vec<Input> ‖ vec<Output> (change) ‖ vec<Witness>`, txid = SHA-256(everything
//!   but the witnesses), signed by every input owner. `authority` is the bridge key (e.g.
//!   the offline authority's); `owners_digest` is what the bridge commits the value to, carried
//!   but never read by the core (the offline authority's: the digest of the one-time keys that
//!   get the tokens, `specie_offline::funding_owners_digest`). It creates the change plus
//!   [`bridge_funding_marker`]`(txid)`, which the authority finds in the UHS before issuing, once.
//! * Bridge payout (kind `0x06`): `header ‖ kind ‖ authority(32) ‖ serial(16) ‖ address(32) ‖
//!   amount(u64) ‖ signature(64)`; txid = SHA-256(all but the signature); the signature is the
//!   authority's Ed25519 signature over `"specie/offline-payout/v1" ‖ txid`. It creates output 0
//!   `{ address, amount }` and [`bridge_payout_marker`]`(authority, serial)`: a token's value
//!   comes back at most once, whoever presents the payout and however often.
//!
//! Markers are never spendable and never collide with other kinds' (docs/transaction-format.md
//! §5 explains why: a marker's preimage is never an encoded input's 80 bytes): the preimages are
//! 25 + 32 = 57 bytes (funding, another domain than FastPay's 57-byte one) and 24 + 32 + 16 = 72
//! bytes (payout).
//!
//! The core trusts a bridge (e.g. an offline authority) less than an issuer: its payouts need its signature,
//! but what it could pay out wrongly is only what was funded to it, as the supply audit shows
//! (docs/offline-cash.md, "Trust").

use crate::extension::{put_header, KIND_BRIDGE_FUND, KIND_BRIDGE_PAYOUT};
use crate::hash::{sha256, Sha256Writer};
use crate::limits::{DecodeLimits, HASH_BYTES, INPUT_BYTES, OUTPUT_BYTES};
use crate::signing::{sign_inputs, NonceMode, SignError};
use crate::transaction::{read_inputs, read_outputs, read_witnesses, Input, Output, Witness};
use crate::{Txid, UhsId};
use ed25519_dalek::ed25519::signature::Keypair as Ed25519Keypair;
use ed25519_dalek::{Signature, Signer, VerifyingKey};
use secp256k1::Keypair;
use specie_codec::{put_u64, put_vec, DecodeError, Encode, Reader};

pub const BRIDGE_FUNDING_MARKER_DOMAIN: &[u8; 25] = b"specie/offline-funding/v1";
pub const BRIDGE_PAYOUT_MARKER_DOMAIN: &[u8; 24] = b"specie/offline-payout/v1";
/// What the authority's payout signature signs before the txid (the marker's domain: a
/// signature over a payout can be nothing else).
pub const BRIDGE_PAYOUT_SIGNING_DOMAIN: &[u8; 24] = BRIDGE_PAYOUT_MARKER_DOMAIN;
pub const BRIDGE_SERIAL_BYTES: usize = 16;
/// A payout's encoding: header, kind, authority, serial, address, amount, signature.
pub const BRIDGE_PAYOUT_BYTES: usize = 9 + 32 + BRIDGE_SERIAL_BYTES + 32 + 8 + 64;

const _: () = assert!(BRIDGE_FUNDING_MARKER_DOMAIN.len() + HASH_BYTES != INPUT_BYTES);
const _: () = assert!(BRIDGE_PAYOUT_MARKER_DOMAIN.len() + 32 + BRIDGE_SERIAL_BYTES == 72);
const _: () = assert!(BRIDGE_PAYOUT_MARKER_DOMAIN.len() + 32 + BRIDGE_SERIAL_BYTES != INPUT_BYTES);

/// SHA-256("specie/offline-funding/v1" ‖ txid): what the authority looks for in the UHS.
pub fn bridge_funding_marker(txid: &Txid) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(BRIDGE_FUNDING_MARKER_DOMAIN);
    hasher.update(&txid.0);
    UhsId(hasher.finish())
}

/// SHA-256("specie/offline-payout/v1" ‖ authority ‖ serial): one payout per token serial.
pub fn bridge_payout_marker(authority: &[u8; 32], serial: &[u8; BRIDGE_SERIAL_BYTES]) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(BRIDGE_PAYOUT_MARKER_DOMAIN);
    hasher.update(authority);
    hasher.update(serial);
    UhsId(hasher.finish())
}

/// Value leaves core circulation for the bridge `authority` (e.g. the offline authority, which
/// issues it as tokens to the keys whose digest is `owners_digest`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BridgeFunding {
    pub authority: [u8; 32],
    pub owners_digest: [u8; 32],
    pub amount: u64,
    pub inputs: Vec<Input>,
    /// Change outputs; may be empty.
    pub outputs: Vec<Output>,
    /// One p2pk witness per input, signing the txid.
    pub witnesses: Vec<Witness>,
}

impl BridgeFunding {
    fn txid_preimage(&self) -> Vec<u8> {
        funding_preimage(
            KIND_BRIDGE_FUND,
            &self.authority,
            &self.owners_digest,
            self.amount,
            &self.inputs,
            &self.outputs,
        )
    }

    pub fn txid(&self) -> Txid {
        Txid(sha256(&self.txid_preimage()))
    }

    pub fn marker(&self) -> UhsId {
        bridge_funding_marker(&self.txid())
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
        let mut funding = BridgeFunding {
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
        Ok(BridgeFunding {
            authority: destination,
            owners_digest: beneficiary,
            amount,
            inputs,
            outputs,
            witnesses,
        })
    }
}

impl Encode for BridgeFunding {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.txid_preimage());
        put_vec(out, &self.witnesses);
    }
}

/// Value back to the core from a bridge (e.g. a deposited token's): `amount` to `address`,
/// authorised by the bridge key's signature, at most once per serial.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BridgePayout {
    pub authority: [u8; 32],
    pub serial: [u8; BRIDGE_SERIAL_BYTES],
    outputs: [Output; 1],
    pub signature: [u8; 64],
}

impl BridgePayout {
    /// A payout of `amount` to `address` (a witness program commitment) for the token `serial`,
    /// signed by the authority's bridge key (a `SigningKey`, or one expanded once:
    /// `specie_ed25519::ExpandedSigningKey`).
    pub fn new_signed<K>(bridge: &K, serial: [u8; BRIDGE_SERIAL_BYTES], address: [u8; 32], amount: u64) -> BridgePayout
    where
        K: Signer<Signature> + Ed25519Keypair<VerifyingKey = VerifyingKey>,
    {
        let mut payout = BridgePayout {
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
        let mut preimage = Vec::with_capacity(BRIDGE_PAYOUT_BYTES - 64);
        put_header(&mut preimage, KIND_BRIDGE_PAYOUT);
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
        let mut message = BRIDGE_PAYOUT_SIGNING_DOMAIN.to_vec();
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
        bridge_payout_marker(&self.authority, &self.serial)
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let authority = reader.read_array("payout authority")?;
        let serial = reader.read_array("payout serial")?;
        let address = reader.read_array("payout address")?;
        let amount = reader.read_u64("payout amount")?;
        let signature = reader.read_array("payout signature")?;
        Ok(BridgePayout {
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

impl Encode for BridgePayout {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.txid_preimage());
        out.extend_from_slice(&self.signature);
    }
}

/// A funding's fields after its kind, whichever mode it funds (FastPay's and offline cash's
/// fundings are laid out alike): the mode's 32-byte destination and beneficiary, the amount,
/// inputs, change and witnesses.
pub struct FundingBody {
    pub destination: [u8; 32],
    pub beneficiary: [u8; 32],
    pub amount: u64,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub witnesses: Vec<Witness>,
}

/// A funding's signed part, whichever mode it funds: header ‖ kind ‖ destination ‖ beneficiary ‖
/// u64le(amount) ‖ ser(vec<Input>) ‖ ser(vec<Output>) (the txid preimage; the encoding adds the
/// witnesses).
pub fn funding_preimage(
    kind: u8,
    destination: &[u8; 32],
    beneficiary: &[u8; 32],
    amount: u64,
    inputs: &[Input],
    outputs: &[Output],
) -> Vec<u8> {
    let mut preimage =
        Vec::with_capacity(9 + 32 + 32 + 8 + 16 + inputs.len() * INPUT_BYTES + outputs.len() * OUTPUT_BYTES);
    put_header(&mut preimage, kind);
    preimage.extend_from_slice(destination);
    preimage.extend_from_slice(beneficiary);
    put_u64(&mut preimage, amount);
    put_vec(&mut preimage, inputs);
    put_vec(&mut preimage, outputs);
    preimage
}

pub fn read_funding_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<FundingBody, DecodeError> {
    Ok(FundingBody {
        destination: reader.read_array("funding destination")?,
        beneficiary: reader.read_array("funding beneficiary")?,
        amount: reader.read_u64("funding amount")?,
        inputs: read_inputs(reader, limits)?,
        outputs: read_outputs(reader, limits)?,
        witnesses: read_witnesses(reader, limits)?,
    })
}
