//! Pay-to-pubkey addresses, as in the reference wallet: bech32 with the BIP-173 checksum (not
//! bech32m), a configurable human-readable part (the reference uses `usd`), and data
//! `0x00 ‖ x-only pubkey` (the witness program type byte, then the key).

use bech32::primitives::decode::{CheckedHrpstring, CheckedHrpstringError, ChecksumError};
use bech32::{Bech32, Hrp};
use secp256k1::XOnlyPublicKey;
use thiserror::Error;

use crate::limits::{P2PK_WITNESS_PROGRAM_BYTES, XONLY_PUBKEY_BYTES};
use crate::signing::{witness_program_commitment_of, WITNESS_PROGRAM_TYPE_P2PK};
use crate::Hash32;

/// The reference implementation's human-readable part.
pub const DEFAULT_HRP: &str = "usd";

/// BIP-173 caps a bech32 string at 90 characters; a p2pk address with a 3-letter HRP is 63.
pub const ADDRESS_CHARS_MAX: usize = 90;

/// Why a string is not an address (or an HRP is unusable).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum AddressError {
    #[error("address is {chars} characters, more than the bech32 maximum of {chars_max}")]
    TooLong { chars: usize, chars_max: usize },
    #[error("human-readable part {hrp:?} is not valid bech32")]
    InvalidHrp { hrp: String },
    #[error("address is not a bech32 string: {reason}")]
    Malformed { reason: String },
    #[error("address checksum is wrong (a typo, or a bech32m string where bech32 is required)")]
    BadChecksum,
    #[error("address is for {found:?}, expected {expected:?}")]
    WrongHrp { expected: String, found: String },
    #[error("address carries {bytes} data bytes; a pay-to-pubkey address carries 33")]
    WrongLength { bytes: usize },
    #[error("address version byte is {version:#04x}; only 0x00 (pay-to-pubkey) exists")]
    WrongVersion { version: u8 },
    #[error("address is not in canonical form (non-zero padding bits)")]
    NonCanonical,
    #[error("address data is not a valid x-only public key")]
    InvalidPublicKey,
}

/// A pay-to-pubkey address: the owner's x-only public key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    pubkey: XOnlyPublicKey,
}

fn parse_hrp(hrp: &str) -> Result<Hrp, AddressError> {
    Hrp::parse(hrp).map_err(|_| AddressError::InvalidHrp { hrp: hrp.to_owned() })
}

impl Address {
    pub fn from_pubkey(pubkey: XOnlyPublicKey) -> Self {
        Address { pubkey }
    }

    pub fn pubkey(&self) -> XOnlyPublicKey {
        self.pubkey
    }

    /// The commitment an output paying this address stores.
    pub fn witness_program_commitment(&self) -> Hash32 {
        witness_program_commitment_of(&self.pubkey)
    }

    fn data(&self) -> [u8; P2PK_WITNESS_PROGRAM_BYTES] {
        let mut data = [0u8; P2PK_WITNESS_PROGRAM_BYTES];
        data[0] = WITNESS_PROGRAM_TYPE_P2PK;
        data[1..].copy_from_slice(&self.pubkey.serialize());
        data
    }

    /// The lowercase bech32 string for this address under `hrp`.
    pub fn encode(&self, hrp: &str) -> Result<String, AddressError> {
        let hrp = parse_hrp(hrp)?;
        // 33 data bytes and an HRP of at most 83 characters stay far below bech32's code length,
        // so the library cannot fail here; map it anyway rather than panic.
        bech32::encode_lower::<Bech32>(hrp, &self.data()).map_err(|error| AddressError::Malformed {
            reason: error.to_string(),
        })
    }

    /// Parses `address`, requiring the BIP-173 checksum and the HRP `expected_hrp`.
    pub fn parse(address: &str, expected_hrp: &str) -> Result<Self, AddressError> {
        let chars = address.chars().count();
        if chars > ADDRESS_CHARS_MAX {
            return Err(AddressError::TooLong {
                chars,
                chars_max: ADDRESS_CHARS_MAX,
            });
        }
        let expected = parse_hrp(expected_hrp)?;
        let checked = CheckedHrpstring::new::<Bech32>(address).map_err(|error| match error {
            CheckedHrpstringError::Checksum(ChecksumError::InvalidResidue) => AddressError::BadChecksum,
            other => AddressError::Malformed {
                reason: other.to_string(),
            },
        })?;
        let found = checked.hrp();
        if found.to_lowercase() != expected.to_lowercase() {
            return Err(AddressError::WrongHrp {
                expected: expected.to_lowercase(),
                found: found.to_lowercase(),
            });
        }
        // Bounded by ADDRESS_CHARS_MAX: at most 56 bytes.
        let data: Vec<u8> = checked.byte_iter().collect();
        if data.len() != P2PK_WITNESS_PROGRAM_BYTES {
            return Err(AddressError::WrongLength { bytes: data.len() });
        }
        if data[0] != WITNESS_PROGRAM_TYPE_P2PK {
            return Err(AddressError::WrongVersion { version: data[0] });
        }
        let mut key = [0u8; XONLY_PUBKEY_BYTES];
        key.copy_from_slice(&data[1..]);
        let pubkey = XOnlyPublicKey::from_byte_array(&key).map_err(|_| AddressError::InvalidPublicKey)?;
        let parsed = Address { pubkey };
        // One string per address: reject leftover padding bits that the byte iterator ignores.
        if parsed.encode(&found.to_lowercase())? != address.to_lowercase() {
            return Err(AddressError::NonCanonical);
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::keypair_from_secret;

    fn alice() -> Address {
        Address::from_pubkey(keypair_from_secret(&[1; 32]).unwrap().x_only_public_key().0)
    }

    #[test]
    fn typed_errors() {
        let text = alice().encode("usd").unwrap();
        assert_eq!(Address::parse(&text, "usd"), Ok(alice()));
        assert_eq!(Address::parse(&text.to_uppercase(), "usd"), Ok(alice()));
        assert!(matches!(
            Address::parse(&text, "eur"),
            Err(AddressError::WrongHrp { .. })
        ));
        // Flip one data character.
        let mut chars: Vec<char> = text.chars().collect();
        chars[10] = if chars[10] == 'q' { 'p' } else { 'q' };
        let typo: String = chars.into_iter().collect();
        assert_eq!(Address::parse(&typo, "usd"), Err(AddressError::BadChecksum));
        // The same data under bech32m must be refused: wrong checksum variant.
        let bech32m = bech32::encode::<bech32::Bech32m>(Hrp::parse("usd").unwrap(), &alice().data()).unwrap();
        assert_eq!(Address::parse(&bech32m, "usd"), Err(AddressError::BadChecksum));
        // Version byte 1.
        let mut data = alice().data();
        data[0] = 1;
        let wrong_version = bech32::encode::<Bech32>(Hrp::parse("usd").unwrap(), &data).unwrap();
        assert_eq!(
            Address::parse(&wrong_version, "usd"),
            Err(AddressError::WrongVersion { version: 1 })
        );
        let short = bech32::encode::<Bech32>(Hrp::parse("usd").unwrap(), &data[..20]).unwrap();
        assert_eq!(
            Address::parse(&short, "usd"),
            Err(AddressError::WrongLength { bytes: 20 })
        );
        // 0xFF.. is above the field size: not an x coordinate.
        let mut bad_key = [0xFFu8; 33];
        bad_key[0] = 0;
        let bad = bech32::encode::<Bech32>(Hrp::parse("usd").unwrap(), &bad_key).unwrap();
        assert_eq!(Address::parse(&bad, "usd"), Err(AddressError::InvalidPublicKey));
        assert!(matches!(
            Address::parse("no separator", "usd"),
            Err(AddressError::Malformed { .. })
        ));
        assert!(matches!(
            Address::parse(&"q".repeat(91), "usd"),
            Err(AddressError::TooLong { .. })
        ));
        assert!(matches!(alice().encode(""), Err(AddressError::InvalidHrp { .. })));
    }
}
