//! Keys, pay-to-pubkey witnesses and BIP-340 signing.
//!
//! Every signature in specie is BIP-340 Schnorr over a 32-byte message (a txid or an attestation
//! message) with an x-only public key, made and checked with libsecp256k1's global context.
//!
//! Nonces: [`NonceMode::Randomized`] (the default of the helpers without a mode argument) feeds
//! 32 bytes of fresh randomness into the nonce derivation, which BIP-340 recommends as
//! protection against side-channel and fault attacks. [`NonceMode::Deterministic`] uses no
//! auxiliary randomness, so a signature is a function of key and message alone; it is safe too
//! (the nonce still depends on the secret key and the message) and it is what the documented
//! test vectors use. Verifiers cannot tell the two apart.

use secp256k1::{schnorr, Keypair, SecretKey, XOnlyPublicKey, SECP256K1};
use thiserror::Error;

use crate::hash::sha256;
use crate::limits::{P2PK_WITNESS_BYTES, P2PK_WITNESS_PROGRAM_BYTES, SIGNATURE_BYTES, XONLY_PUBKEY_BYTES};
use crate::transaction::{Input, Transaction, Witness};
use crate::Hash32;

/// Witness program type byte for pay-to-pubkey (the reference's `witness_program_type::p2pk`).
pub const WITNESS_PROGRAM_TYPE_P2PK: u8 = 0x00;

/// How the BIP-340 nonce's auxiliary randomness is chosen (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NonceMode {
    /// Fresh auxiliary randomness from the thread RNG (BIP-340's recommended default).
    #[default]
    Randomized,
    /// No auxiliary randomness: reproducible signatures, used for test vectors.
    Deterministic,
}

/// Signs a 32-byte message with BIP-340.
pub fn schnorr_sign(keypair: &Keypair, message: &[u8; 32], mode: NonceMode) -> [u8; SIGNATURE_BYTES] {
    let signature = match mode {
        NonceMode::Randomized => SECP256K1.sign_schnorr(message, keypair),
        NonceMode::Deterministic => SECP256K1.sign_schnorr_no_aux_rand(message, keypair),
    };
    signature.to_byte_array()
}

/// Verifies a BIP-340 signature over a 32-byte message.
pub fn schnorr_verify(pubkey: &XOnlyPublicKey, message: &[u8; 32], signature: &[u8; SIGNATURE_BYTES]) -> bool {
    let signature = schnorr::Signature::from_byte_array(*signature);
    SECP256K1.verify_schnorr(&signature, message, pubkey).is_ok()
}

/// A keypair from 32 secret-key bytes; `None` if they are zero or not below the curve order.
pub fn keypair_from_secret(secret: &[u8; 32]) -> Option<Keypair> {
    let secret_key = SecretKey::from_byte_array(secret).ok()?;
    Some(Keypair::from_secret_key(SECP256K1, &secret_key))
}

/// Parses 32 bytes as an x-only public key; `None` if they are not the x coordinate of a point.
pub fn parse_xonly(bytes: &[u8; XONLY_PUBKEY_BYTES]) -> Option<XOnlyPublicKey> {
    XOnlyPublicKey::from_byte_array(bytes).ok()
}

/// The x-only public key bytes of a keypair.
pub fn xonly_bytes(keypair: &Keypair) -> [u8; XONLY_PUBKEY_BYTES] {
    keypair.x_only_public_key().0.serialize()
}

/// SHA-256(0x00 ‖ x-only pubkey): the commitment an output stores for a p2pk owner
/// (the reference's `get_p2pk_witness_commitment`).
pub fn witness_program_commitment(pubkey: &[u8; XONLY_PUBKEY_BYTES]) -> Hash32 {
    let mut program = [0u8; P2PK_WITNESS_PROGRAM_BYTES];
    program[0] = WITNESS_PROGRAM_TYPE_P2PK;
    program[1..].copy_from_slice(pubkey);
    sha256(&program)
}

/// [`witness_program_commitment`] of a parsed key.
pub fn witness_program_commitment_of(pubkey: &XOnlyPublicKey) -> Hash32 {
    witness_program_commitment(&pubkey.serialize())
}

/// A pay-to-pubkey witness: `0x00 ‖ x-only pubkey(32) ‖ BIP-340 signature(64)` = 97 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct P2pkWitness {
    pub pubkey: [u8; XONLY_PUBKEY_BYTES],
    pub signature: [u8; SIGNATURE_BYTES],
}

/// Why bytes are not a p2pk witness. Mirrors the structural part of the reference's
/// `witness_error_code` (the key and signature checks live in the sentinel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum P2pkParseError {
    #[error("witness is empty: it has no witness program type byte")]
    MissingProgramType,
    #[error("witness program type {0:#04x} is unknown (only 0x00, pay-to-pubkey, exists)")]
    UnknownProgramType(u8),
    #[error("pay-to-pubkey witness is {0} bytes; it must be exactly 97")]
    WrongLength(usize),
}

impl P2pkWitness {
    pub fn to_witness(&self) -> Witness {
        let mut bytes = Vec::with_capacity(P2PK_WITNESS_BYTES);
        bytes.push(WITNESS_PROGRAM_TYPE_P2PK);
        bytes.extend_from_slice(&self.pubkey);
        bytes.extend_from_slice(&self.signature);
        debug_assert_eq!(bytes.len(), P2PK_WITNESS_BYTES);
        Witness(bytes)
    }

    /// Splits a witness into key and signature, in the reference's check order
    /// (empty → type → length).
    pub fn parse(witness: &Witness) -> Result<Self, P2pkParseError> {
        let bytes = &witness.0;
        let program_type = *bytes.first().ok_or(P2pkParseError::MissingProgramType)?;
        if program_type != WITNESS_PROGRAM_TYPE_P2PK {
            return Err(P2pkParseError::UnknownProgramType(program_type));
        }
        if bytes.len() != P2PK_WITNESS_BYTES {
            return Err(P2pkParseError::WrongLength(bytes.len()));
        }
        let mut pubkey = [0u8; XONLY_PUBKEY_BYTES];
        pubkey.copy_from_slice(&bytes[1..P2PK_WITNESS_PROGRAM_BYTES]);
        let mut signature = [0u8; SIGNATURE_BYTES];
        signature.copy_from_slice(&bytes[P2PK_WITNESS_PROGRAM_BYTES..]);
        Ok(P2pkWitness { pubkey, signature })
    }

    /// SHA-256 of the witness program (type byte ‖ pubkey), to compare with an input's commitment.
    pub fn program_commitment(&self) -> Hash32 {
        witness_program_commitment(&self.pubkey)
    }

    /// Signs `message` (a txid) with `keypair` into a witness.
    pub fn sign(keypair: &Keypair, message: &[u8; 32], mode: NonceMode) -> Self {
        P2pkWitness {
            pubkey: xonly_bytes(keypair),
            signature: schnorr_sign(keypair, message, mode),
        }
    }
}

/// Why inputs could not be signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum SignError {
    #[error("{keypairs} keypairs given for {inputs} inputs; exactly one per input is needed")]
    KeypairCount { keypairs: usize, inputs: usize },
    #[error("input {index}: the keypair's public key does not match the input's witness program commitment")]
    KeyMismatch { index: usize },
}

/// Builds one p2pk witness per input, each signing `message` with the input's keypair. Checks
/// each key against the input's commitment first, because a wrong key would only be caught
/// later by a sentinel, after the wallet had already sent the transaction.
pub fn sign_inputs(
    inputs: &[Input],
    message: &[u8; 32],
    keypairs: &[Keypair],
    mode: NonceMode,
) -> Result<Vec<Witness>, SignError> {
    if keypairs.len() != inputs.len() {
        return Err(SignError::KeypairCount {
            keypairs: keypairs.len(),
            inputs: inputs.len(),
        });
    }
    inputs
        .iter()
        .zip(keypairs)
        .enumerate()
        .map(|(index, (input, keypair))| {
            let witness = P2pkWitness::sign(keypair, message, mode);
            if witness.program_commitment() != input.data.witness_program_commitment {
                return Err(SignError::KeyMismatch { index });
            }
            Ok(witness.to_witness())
        })
        .collect()
}

impl Transaction {
    /// Replaces the witnesses with p2pk signatures over the txid, one keypair per input.
    pub fn sign(&mut self, keypairs: &[Keypair], mode: NonceMode) -> Result<(), SignError> {
        let txid = self.txid();
        self.witnesses = sign_inputs(&self.inputs, &txid.0, keypairs, mode)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_checks_in_reference_order() {
        assert_eq!(
            P2pkWitness::parse(&Witness(vec![])),
            Err(P2pkParseError::MissingProgramType)
        );
        assert_eq!(
            P2pkWitness::parse(&Witness(vec![1; 97])),
            Err(P2pkParseError::UnknownProgramType(1))
        );
        assert_eq!(
            P2pkWitness::parse(&Witness(vec![0; 96])),
            Err(P2pkParseError::WrongLength(96))
        );
        let witness = P2pkWitness {
            pubkey: [3; 32],
            signature: [4; 64],
        };
        assert_eq!(P2pkWitness::parse(&witness.to_witness()), Ok(witness));
    }

    #[test]
    fn deterministic_signatures_repeat_and_verify() {
        let keypair = keypair_from_secret(&[1; 32]).unwrap();
        assert!(keypair_from_secret(&[0; 32]).is_none());
        let message = [9u8; 32];
        let a = schnorr_sign(&keypair, &message, NonceMode::Deterministic);
        let b = schnorr_sign(&keypair, &message, NonceMode::Deterministic);
        assert_eq!(a, b);
        let randomized = schnorr_sign(&keypair, &message, NonceMode::Randomized);
        let pubkey = keypair.x_only_public_key().0;
        assert!(schnorr_verify(&pubkey, &message, &a));
        assert!(schnorr_verify(&pubkey, &message, &randomized));
        assert!(!schnorr_verify(&pubkey, &[8u8; 32], &a));
    }
}
