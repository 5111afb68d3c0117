//! Offline cash's signed vocabulary (docs/offline-mode.md; the offline digital euro prototype,
//! seed 001): tokens that pass from device to device as a chain of owner statements, the one-time
//! keys that own them, certified by the authority and bound to a registered identity. No I/O and
//! no state: the offline authority and the device wallet build on these.
//!
//! Every signed thing has one canonical, versioned encoding and is signed under its own domain
//! prefix. Statements are rebuilt from decoded fields before they are verified or hashed, never
//! taken as received. Decoders take untrusted bytes: every count is bounded before allocation and
//! nothing panics.

mod denominations;
mod evidence;
mod history;
mod instruction;
mod keys;
mod token;

pub use denominations::{Denominations, DenominationsError, DENOMINATIONS_MAX};
pub use evidence::{
    Convicted, DoubleSpend, EvidenceBundle, EvidenceError, BUNDLE_DOUBLE_SPENDS_MAX, DOUBLE_SPEND_BYTES_MAX,
    EVIDENCE_BUNDLE_BYTES_MAX,
};
pub use history::{Conflict, History, Move, OtherIssuance, Recorded, SignedMove, SIGNED_MOVE_BYTES_MAX};
pub use instruction::{Instruction, INSTRUCTION_BYTES_MAX, REISSUE_OUTPUTS_MAX};
pub use keys::{
    check_public_key, KeyBinding, KeyCertificate, KeyError, KeyRing, KeyStatus, Lifecycle, PublicKey, SignedKeyRing,
    CERTIFIED_KEY_BYTES, KEY_BINDING_BYTES, KEY_RING_BYTES_MAX, KEY_RING_KEYS_MAX, KEY_RING_VERSION,
    SIGNED_KEY_RING_BYTES_MAX,
};
pub use token::{
    Hop, Issuance, Link, Token, TokenError, Verified, HOPS_MAX, HOP_BYTES, ISSUANCE_BYTES, TOKEN_BYTES_MAX,
};

pub use ed25519_dalek::{SigningKey, VerifyingKey};
/// Decodes exactly one value from all of some bytes, refusing more than a bound up front.
pub use specie_codec::decode_bounded as decode_exact;

use sha2::{Digest, Sha256};
use specie_codec::{DecodeError, Reader};

/// The first byte of every encoding in this crate.
pub const ENCODING_VERSION: u8 = 1;
pub const PUBLIC_KEY_BYTES: usize = 32;
pub const SIGNATURE_BYTES: usize = 64;
/// A token's serial number: fresh for every issuance.
pub const SERIAL_BYTES: usize = 16;
/// A payee's handshake nonce, which the payer's statement signs (seed 001, §IV-G).
pub const NONCE_BYTES: usize = 16;

fn read_version(reader: &mut Reader<'_>, what: &'static str) -> Result<(), DecodeError> {
    reader.read_version(what, ENCODING_VERSION)
}

/// What a core bridge funding commits its tokens to (its `owners_digest`, which the core carries
/// but never reads): SHA-256 of the one-time keys that get the tokens, concatenated in order. The
/// authority issues a funding only to exactly these keys, so whoever sees the funding confirmed
/// cannot claim its tokens for keys of their own.
pub fn funding_owners_digest(owners: &[PublicKey]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for owner in owners {
        hasher.update(owner);
    }
    hasher.finalize().into()
}

/// A signing key derived from a label and a number: for demos, simulations and tests, where
/// every run must produce the same keys (docs/offline-format.md, "Deterministic keys"). Never for
/// real issuing, certifying, identity or one-time keys: anyone can derive these.
pub fn deterministic_key(label: &str, n: u64) -> SigningKey {
    specie_ed25519::deterministic_key(b"specie/offline/deterministic-key/", label, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest a core funding carries is SHA-256 over the keys' bytes, concatenated in order
    /// (the bytes the core's bridge fundings have carried since the offline bridge's first one).
    #[test]
    fn a_fundings_owners_digest_is_sha256_of_the_keys_in_order() {
        assert_eq!(
            funding_owners_digest(&[]),
            hex_array("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        let (a, b) = ([1; 32], [2; 32]);
        let concatenated: [u8; 32] = Sha256::digest([a, b].concat()).into();
        assert_eq!(funding_owners_digest(&[a, b]), concatenated);
        assert_ne!(funding_owners_digest(&[b, a]), concatenated, "the order counts");
    }

    fn hex_array(text: &str) -> [u8; 32] {
        hex::decode(text).unwrap().try_into().unwrap()
    }
}
