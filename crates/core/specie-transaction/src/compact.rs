//! Compact transactions (the reference's `compact_tx`) and sentinel attestations.
//!
//! Encoding: `txid(32) ‖ vec<UhsId> spent ‖ vec<UhsId> created ‖ map<pubkey(32), sig(64)>`.
//! The attestation message is SHA-256 of that encoding with an empty map, so attestations never
//! cover each other.
//!
//! One deviation from the reference, for canonical encoding: the reference keeps attestations
//! in a hash map and writes them in hash-table order; specie writes them in ascending key order
//! (a `BTreeMap`) and its decoder rejects keys that are not strictly ascending, so every compact
//! transaction has exactly one encoding. With zero or one attestation the bytes are identical.

use std::collections::{BTreeMap, BTreeSet};

use secp256k1::Keypair;
use thiserror::Error;

use crate::hash::sha256;
use crate::limits::{DecodeLimits, ATTESTATION_BYTES, HASH_BYTES};
use crate::signing::{parse_xonly, schnorr_sign, schnorr_verify, xonly_bytes, NonceMode};
use crate::{CompactTransaction, Hash32, Txid, UhsId};
use specie_codec::{put_count, put_vec, Decode, DecodeError, Encode, Reader};

/// Why an attestation does not check out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum AttestationError {
    #[error("attestation public key is not a valid x-only public key")]
    InvalidPublicKey,
    #[error("attestation signature does not verify over the compact transaction")]
    InvalidSignature,
}

fn put_uhs_ids(out: &mut Vec<u8>, ids: &[UhsId]) {
    put_vec(out, ids);
}

impl CompactTransaction {
    fn encode_without_attestations_to(&self, out: &mut Vec<u8>) {
        self.txid.encode_to(out);
        put_uhs_ids(out, &self.spent);
        put_uhs_ids(out, &self.created);
    }

    /// SHA-256(ser(self with an empty attestation map)): what sentinels sign.
    pub fn attestation_message(&self) -> Hash32 {
        let mut bytes = Vec::with_capacity(HASH_BYTES + 24 + (self.spent.len() + self.created.len()) * HASH_BYTES);
        self.encode_without_attestations_to(&mut bytes);
        put_count(&mut bytes, 0);
        sha256(&bytes)
    }

    /// A sentinel's signature over [`CompactTransaction::attestation_message`].
    pub fn sign_attestation(&self, sentinel: &Keypair, mode: NonceMode) -> ([u8; 32], [u8; 64]) {
        (
            xonly_bytes(sentinel),
            schnorr_sign(sentinel, &self.attestation_message(), mode),
        )
    }

    /// Adds (or replaces) `sentinel`'s attestation.
    pub fn attest(&mut self, sentinel: &Keypair, mode: NonceMode) {
        let (pubkey, signature) = self.sign_attestation(sentinel, mode);
        self.attestations.insert(pubkey, signature);
    }

    /// Checks one attestation against this compact transaction.
    pub fn verify_attestation(&self, pubkey: &[u8; 32], signature: &[u8; 64]) -> Result<(), AttestationError> {
        let key = parse_xonly(pubkey).ok_or(AttestationError::InvalidPublicKey)?;
        if schnorr_verify(&key, &self.attestation_message(), signature) {
            Ok(())
        } else {
            Err(AttestationError::InvalidSignature)
        }
    }

    /// The reference's `check_attestations`: true if at least `threshold` attestations come from
    /// `trusted` keys and verify. Unknown keys and bad signatures just don't count.
    pub fn check_attestations(&self, trusted: &BTreeSet<[u8; 32]>, threshold: usize) -> bool {
        let message = self.attestation_message();
        let valid = self
            .attestations
            .iter()
            .filter(|(pubkey, _)| trusted.contains(*pubkey))
            .filter(|(pubkey, signature)| {
                parse_xonly(pubkey).is_some_and(|key| schnorr_verify(&key, &message, signature))
            })
            .count();
        valid >= threshold
    }
}

impl Encode for CompactTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.encode_without_attestations_to(out);
        put_count(out, self.attestations.len());
        // BTreeMap iterates in ascending key order: the canonical order.
        for (pubkey, signature) in &self.attestations {
            out.extend_from_slice(pubkey);
            out.extend_from_slice(signature);
        }
    }
}

impl Decode for CompactTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "compact transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let txid = Txid(reader.read_array("compact transaction txid")?);
        let spent = reader.read_vec("spent uhs ids", limits.compact_spent_max, HASH_BYTES, |r| {
            UhsId::decode_from(r, &())
        })?;
        let created = reader.read_vec("created uhs ids", limits.compact_created_max, HASH_BYTES, |r| {
            UhsId::decode_from(r, &())
        })?;
        let count = reader.read_count("attestations", limits.attestations_max, ATTESTATION_BYTES)?;
        let mut attestations = BTreeMap::new();
        let mut previous: Option<[u8; 32]> = None;
        for _ in 0..count {
            let pubkey: [u8; 32] = reader.read_array("attestation public key")?;
            let signature: [u8; 64] = reader.read_array("attestation signature")?;
            if previous.is_some_and(|previous| previous >= pubkey) {
                return Err(DecodeError::NonCanonical {
                    what: "attestations",
                    reason: "public keys must be strictly ascending (no duplicates)",
                });
            }
            previous = Some(pubkey);
            attestations.insert(pubkey, signature);
        }
        debug_assert_eq!(attestations.len(), count);
        Ok(CompactTransaction {
            txid,
            spent,
            created,
            attestations,
        })
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.compact_transaction_bytes_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::keypair_from_secret;

    #[test]
    fn attestations_sign_verify_and_stay_canonical() {
        let mut compact = CompactTransaction {
            txid: Txid([1; 32]),
            spent: vec![UhsId([2; 32])],
            created: vec![UhsId([3; 32]), UhsId([4; 32])],
            attestations: BTreeMap::new(),
        };
        let message = compact.attestation_message();
        let a = keypair_from_secret(&[5; 32]).unwrap();
        let b = keypair_from_secret(&[6; 32]).unwrap();
        compact.attest(&a, NonceMode::Deterministic);
        compact.attest(&b, NonceMode::Randomized);
        // Attestations are not part of the message they sign.
        assert_eq!(compact.attestation_message(), message);
        for (pubkey, signature) in &compact.attestations {
            assert_eq!(compact.verify_attestation(pubkey, signature), Ok(()));
        }
        let trusted: BTreeSet<[u8; 32]> = [xonly_bytes(&a)].into();
        assert!(compact.check_attestations(&trusted, 1));
        assert!(!compact.check_attestations(&trusted, 2));

        let bytes = compact.encode();
        assert_eq!(CompactTransaction::decode_exact(&bytes), Ok(compact.clone()));

        // Swap the two entries: same content, non-canonical order.
        let entries_start = bytes.len() - 2 * ATTESTATION_BYTES;
        let mut swapped = bytes[..entries_start].to_vec();
        swapped.extend_from_slice(&bytes[entries_start + ATTESTATION_BYTES..]);
        swapped.extend_from_slice(&bytes[entries_start..entries_start + ATTESTATION_BYTES]);
        assert!(matches!(
            CompactTransaction::decode_exact(&swapped),
            Err(DecodeError::NonCanonical { .. })
        ));

        let (pubkey, mut signature) = compact.sign_attestation(&a, NonceMode::Deterministic);
        signature[0] ^= 1;
        assert_eq!(
            compact.verify_attestation(&pubkey, &signature),
            Err(AttestationError::InvalidSignature)
        );
        assert_eq!(
            compact.verify_attestation(&[0xFF; 32], &signature),
            Err(AttestationError::InvalidPublicKey)
        );
    }
}
