//! Unlinkable transactions (Fabric CBDC's *unlinkable* privacy level, seed 003 §5.2 and App.
//! B.3): a transfer spends certified tokens without naming them, revealing their serial numbers
//! instead, and creates fresh tokens; its proof (`specie_credential::unlinkable`) shows the
//! inputs certified, the serial numbers theirs, the values balanced and the spender the owner.
//!
//! Value enters from ordinary outputs (transparent inputs, p2pk witnesses; the proof's `issued`)
//! and leaves to ordinary outputs (the proof's `redeemed`), so the issuer's mints and redeems stay
//! public and the supply exact.
//!
//! Format (kind `0x0a`): `header ‖ 0x0a ‖ vec<Input> ‖ vec<Output> ‖ byte_vec(UnlinkableTransfer)
//! ‖ vec<Witness>`.
//!
//! - The context, the message the proof is bound to, hashes [`UNLINKABLE_CONTEXT_DOMAIN`] and the
//!   parts before the proof, so a proof cannot be moved to other transparent parts.
//! - The txid hashes every part but the witnesses; each p2pk witness signs it.
//! - The ids: spent, the transparent inputs'; created, the transparent outputs', then each new
//!   token's `SHA-256(`[`UNLINKABLE_TOKEN_DOMAIN`]` ‖ txid ‖ u64(index) ‖ token)` (indices after
//!   the transparent outputs), then each serial number's `SHA-256(`[`UNLINKABLE_SERIAL_DOMAIN`]`
//!   ‖ sn)`. A serial number is created once and never spent, so the shards refuse a second spend
//!   of a token as an id that already exists; a token's id says that the token is in the ledger,
//!   which is what the certifiers check before they certify it. Neither is ever spent by id: that
//!   would link.

use rand::{CryptoRng, RngCore};
use secp256k1::Keypair;
use specie_codec::{put_byte_vec, put_vec, Decode, DecodeError, Encode, Reader};
use specie_credential::unlinkable::{
    unlinkable_transfer_bytes_max, CertificateShare, CertifierSecret, PublicAmounts, SerialNumber, SpentToken, Token,
    TokenOpening, TransferPlan, UnlinkableKeys, UnlinkableProveError, UnlinkableTransfer,
};
use specie_credential::{AuditorKey as OwnerAuditorKey, Identity};
use specie_transaction::extension::{put_header, read_header};
use specie_transaction::hash::{sha256, Sha256Writer};
use specie_transaction::limits::DecodeLimits;
use specie_transaction::signing::{NonceMode, SignError};
use specie_transaction::transaction::{read_inputs, read_outputs, read_witnesses};
use specie_transaction::{Input, OutPoint, Output, Txid, UhsId, Witness};

use crate::KIND_UNLINKABLE;

pub const UNLINKABLE_CONTEXT_DOMAIN: &[u8; 28] = b"specie/unlinkable-context/v1";
pub const UNLINKABLE_TOKEN_DOMAIN: &[u8; 26] = b"specie/unlinkable-token/v1";
pub const UNLINKABLE_SERIAL_DOMAIN: &[u8; 27] = b"specie/unlinkable-serial/v1";

/// The UHS id of the token at `outpoint`.
pub fn token_uhs_id(outpoint: &OutPoint, token: &Token) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(UNLINKABLE_TOKEN_DOMAIN);
    hasher.update(&outpoint.txid.0);
    hasher.update(&outpoint.index.to_le_bytes());
    hasher.update(&token.encode());
    UhsId(hasher.finish())
}

/// The UHS id a serial number occupies once its token is spent.
pub fn serial_uhs_id(serial: &SerialNumber) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(UNLINKABLE_SERIAL_DOMAIN);
    hasher.update(&serial.to_bytes());
    UhsId(hasher.finish())
}

/// Why a certifier did not certify a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertificationRefused {
    /// The ledger holds no such token at that place (never created, or another token there).
    #[error(
        "the ledger holds no such token at output {index} of transaction {txid} (its id {id} is not in the UHS)",
        index = .outpoint.index,
        txid = hex::encode(.outpoint.txid.0),
        id = hex::encode(.uhs_id.0)
    )]
    NotInLedger { outpoint: OutPoint, uhs_id: UhsId },
}

/// A certifier's answer to a request to certify `token` at `outpoint` (Figure 5, steps 5–6):
/// its blind signature, only if the ledger holds that token there. `in_ledger` answers whether
/// the UHS holds an id (the certification service asks its shards). The certifier learns which
/// token is asked about, not its owner, value or serial number.
pub fn certify_if_in_ledger(
    certifier: &CertifierSecret,
    outpoint: &OutPoint,
    token: &Token,
    in_ledger: impl FnOnce(&UhsId) -> bool,
) -> Result<CertificateShare, CertificationRefused> {
    let uhs_id = token_uhs_id(outpoint, token);
    if !in_ledger(&uhs_id) {
        return Err(CertificationRefused::NotInLedger {
            outpoint: *outpoint,
            uhs_id,
        });
    }
    Ok(certifier.certify(token))
}

/// A token the transaction creates, where the ledger holds it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CreatedToken {
    pub outpoint: OutPoint,
    pub token: Token,
    pub uhs_id: UhsId,
}

/// An unlinkable transaction. See the module documentation for its format and rules.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UnlinkableTransaction {
    /// Ordinary outputs spent, with p2pk witnesses; their values enter in clear (`issued`).
    pub transparent_inputs: Vec<Input>,
    /// Ordinary outputs created; their values leave in clear (`redeemed`).
    pub transparent_outputs: Vec<Output>,
    pub proof: UnlinkableTransfer,
    /// One p2pk witness per transparent input, signing the txid (then the active auditors').
    pub witnesses: Vec<Witness>,
}

fn put_statement_parts(out: &mut Vec<u8>, transparent_inputs: &[Input], transparent_outputs: &[Output]) {
    put_header(out, KIND_UNLINKABLE);
    put_vec(out, transparent_inputs);
    put_vec(out, transparent_outputs);
}

impl UnlinkableTransaction {
    /// What the proof is bound to: a function of the transparent parts alone, so a wallet computes
    /// it before proving.
    pub fn context_of(transparent_inputs: &[Input], transparent_outputs: &[Output]) -> [u8; 32] {
        let mut preimage = UNLINKABLE_CONTEXT_DOMAIN.to_vec();
        put_statement_parts(&mut preimage, transparent_inputs, transparent_outputs);
        sha256(&preimage)
    }

    pub fn context(&self) -> [u8; 32] {
        Self::context_of(&self.transparent_inputs, &self.transparent_outputs)
    }

    fn put_signed_parts(&self, out: &mut Vec<u8>) {
        put_statement_parts(out, &self.transparent_inputs, &self.transparent_outputs);
        put_byte_vec(out, &self.proof.encode());
    }

    pub fn txid(&self) -> Txid {
        let mut preimage = Vec::new();
        self.put_signed_parts(&mut preimage);
        Txid(sha256(&preimage))
    }

    /// The tokens it creates, numbered after the transparent outputs.
    pub fn created_tokens(&self) -> Vec<CreatedToken> {
        self.created_tokens_of(self.txid())
    }

    fn created_tokens_of(&self, txid: Txid) -> Vec<CreatedToken> {
        let first = self.transparent_outputs.len() as u64;
        self.proof
            .output_tokens()
            .enumerate()
            .map(|(i, token)| {
                let outpoint = OutPoint {
                    txid,
                    index: first + i as u64,
                };
                CreatedToken {
                    outpoint,
                    token: *token,
                    uhs_id: token_uhs_id(&outpoint, token),
                }
            })
            .collect()
    }

    /// The UHS ids it spends (transparent inputs) and creates (transparent outputs, tokens,
    /// serial numbers).
    pub fn uhs_ids(&self) -> (Vec<UhsId>, Vec<UhsId>) {
        self.uhs_ids_of(self.txid())
    }

    pub(crate) fn uhs_ids_of(&self, txid: Txid) -> (Vec<UhsId>, Vec<UhsId>) {
        let tokens = self.created_tokens_of(txid).into_iter().map(|c| c.uhs_id);
        let serials: Vec<UhsId> = self.proof.serial_numbers().map(serial_uhs_id).collect();
        crate::kinds::private_uhs_ids(
            &txid,
            &self.transparent_inputs,
            std::iter::empty(),
            &self.transparent_outputs,
            tokens.chain(serials),
        )
    }

    /// Signs the txid with `keys[i]` for transparent input `i`, replacing the witnesses.
    pub fn sign_transparent(&mut self, keys: &[Keypair], mode: NonceMode) -> Result<(), SignError> {
        self.witnesses = crate::kinds::sign_transparent_inputs(&self.transparent_inputs, keys, &self.txid(), mode)?;
        Ok(())
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let transparent_inputs = read_inputs(reader, limits)?;
        let transparent_outputs = read_outputs(reader, limits)?;
        let len = reader.read_count("unlinkable proof", unlinkable_transfer_bytes_max() as u64, 1)?;
        let proof = UnlinkableTransfer::decode_exact(reader.read_bytes("unlinkable proof", len)?)?;
        let witnesses = read_witnesses(reader, limits)?;
        Ok(UnlinkableTransaction {
            transparent_inputs,
            transparent_outputs,
            proof,
            witnesses,
        })
    }
}

impl Encode for UnlinkableTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.put_signed_parts(out);
        put_vec(out, &self.witnesses);
    }
}

impl Decode for UnlinkableTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "unlinkable transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_UNLINKABLE))?;
        Self::decode_body(reader, limits)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

/// What a wallet wants an unlinkable transaction to do; [`UnlinkableBuild::prove_and_sign`] makes it.
#[derive(Clone, Debug)]
pub struct UnlinkableBuild<'a> {
    /// Ordinary outputs spent (shielded), signed with `keys`.
    pub transparent_inputs: Vec<Input>,
    /// Certified tokens spent, all the proving identity's.
    pub spent: Vec<SpentToken<'a>>,
    /// Tokens to create: their openings, made for their payees ([`TokenOpening::random`]).
    pub outputs: Vec<TokenOpening>,
    /// Ordinary outputs created (unshielded).
    pub transparent_outputs: Vec<Output>,
    /// The owner auditors with jurisdiction, strictly ascending.
    pub owner_auditors: Vec<OwnerAuditorKey>,
}

/// Why an unlinkable transaction could not be made.
#[derive(Debug, thiserror::Error)]
pub enum UnlinkableBuildError {
    #[error("cannot prove the transfer: {0}")]
    Prove(#[from] UnlinkableProveError),
    #[error("cannot sign: {0}")]
    Sign(#[from] SignError),
    #[error("the clear values overflow a u64")]
    Overflow,
}

impl UnlinkableBuild<'_> {
    /// Proves the transfer under `keys` with `identity`'s credential and signs every transparent
    /// input with `signers[i]`.
    pub fn prove_and_sign(
        &self,
        signers: &[Keypair],
        identity: &Identity,
        keys: &UnlinkableKeys<'_>,
        mode: NonceMode,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<UnlinkableTransaction, UnlinkableBuildError> {
        let amounts = PublicAmounts {
            issued: clear_total(self.transparent_inputs.iter().map(|i| i.data.value))?,
            redeemed: clear_total(self.transparent_outputs.iter().map(|o| o.value))?,
        };
        let plan = TransferPlan {
            inputs: &self.spent,
            outputs: &self.outputs,
            amounts,
            auditors: &self.owner_auditors,
        };
        let context = UnlinkableTransaction::context_of(&self.transparent_inputs, &self.transparent_outputs);
        let proof = identity.prove_unlinkable(keys, &plan, &context, rng)?;
        let mut tx = UnlinkableTransaction {
            transparent_inputs: self.transparent_inputs.clone(),
            transparent_outputs: self.transparent_outputs.clone(),
            proof,
            witnesses: vec![],
        };
        tx.sign_transparent(signers, mode)?;
        Ok(tx)
    }
}

fn clear_total(mut values: impl Iterator<Item = u64>) -> Result<u64, UnlinkableBuildError> {
    values
        .try_fold(0u64, |sum, value| sum.checked_add(value))
        .ok_or(UnlinkableBuildError::Overflow)
}
