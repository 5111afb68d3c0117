//! The keys of offline cash: one-time keys that own tokens, each certified by the authority for a
//! period and bound by its device to a registered identity (docs/offline-mode.md, "Privacy"), and
//! the key ring a verifier trusts (issuing keys with their denominations, certifying keys by
//! period).

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::Digest;
use specie_codec::{put_u32, DecodeError, Reader};
use specie_ed25519::PublicKeyError;
use thiserror::Error;

use crate::{ENCODING_VERSION, PUBLIC_KEY_BYTES, SIGNATURE_BYTES};

/// A public key as it travels: the 32 bytes of a compressed Ed25519 point. The bytes as given,
/// not the point, are what is signed, hashed and compared.
pub type PublicKey = [u8; PUBLIC_KEY_BYTES];

/// Signed by the authority's certifying key: a one-time key of a registered device.
const KEY_CERTIFICATE_DOMAIN: &[u8] = b"specie/offline/key-certificate/v1";
/// Signed by a device's identity key: this one-time key is mine.
const KEY_BINDING_DOMAIN: &[u8] = b"specie/offline/key-binding/v1";

/// Hashed with a key ring's encoding: its fingerprint.
const KEY_RING_DOMAIN: &[u8] = b"specie/offline/key-ring/v1";
/// Most keys of each kind (issuing, certifying) a key ring's encoding holds.
pub const KEY_RING_KEYS_MAX: usize = 255;
/// The longest canonical key ring.
pub const KEY_RING_BYTES_MAX: usize =
    1 + 1 + KEY_RING_KEYS_MAX * (PUBLIC_KEY_BYTES + 8) + 1 + KEY_RING_KEYS_MAX * (4 + PUBLIC_KEY_BYTES);
/// A key binding's encoding: the identity, the key, the identity's signature.
pub const KEY_BINDING_BYTES: usize = 2 * PUBLIC_KEY_BYTES + SIGNATURE_BYTES;
/// A key certificate's encoding: the key, the period, the certifying key's signature.
pub const CERTIFIED_KEY_BYTES: usize = PUBLIC_KEY_BYTES + 4 + SIGNATURE_BYTES;

/// Why a key, a certificate or a binding is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum KeyError {
    #[error("not a valid Ed25519 public key")]
    BadKey,
    #[error("a weak (small-order) Ed25519 public key")]
    WeakKey,
    #[error("no certifying key is known for period {period}")]
    UnknownPeriod { period: u32 },
    #[error("the key certificate's signature does not verify")]
    BadCertificate,
    #[error("the key binding's signature does not verify")]
    BadBinding,
    #[error("issuing key already in the ring")]
    DuplicateIssuingKey,
    #[error("a certifying key for period {period} is already in the ring")]
    DuplicatePeriod { period: u32 },
}

/// The key `bytes` encode, refused if it does not decompress or is of small order.
pub fn check_public_key(bytes: &PublicKey) -> Result<VerifyingKey, KeyError> {
    specie_ed25519::check_public_key(bytes).map_err(|error| match error {
        PublicKeyError::NotAPoint => KeyError::BadKey,
        PublicKeyError::Weak => KeyError::WeakKey,
    })
}

/// The authority's statement that `key` is a one-time key of a registered device, good for
/// `period` (the key ring names the certifying key of each period). A payee offers its key with
/// this certificate; every hop of a token carries its new owner's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyCertificate {
    pub key: PublicKey,
    pub period: u32,
    pub signature: [u8; SIGNATURE_BYTES],
}

impl KeyCertificate {
    /// What the certifying key signs: the domain, the version, the certifying key itself, the
    /// certified key and the period.
    pub fn signing_bytes(certifying_key: &PublicKey, key: &PublicKey, period: u32) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(KEY_CERTIFICATE_DOMAIN.len() + 1 + 2 * PUBLIC_KEY_BYTES + 4);
        bytes.extend_from_slice(KEY_CERTIFICATE_DOMAIN);
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(certifying_key);
        bytes.extend_from_slice(key);
        put_u32(&mut bytes, period);
        bytes
    }

    pub fn sign(key: PublicKey, period: u32, certifying: &SigningKey) -> KeyCertificate {
        let message = Self::signing_bytes(&certifying.verifying_key().to_bytes(), &key, period);
        KeyCertificate {
            key,
            period,
            signature: certifying.sign(&message).to_bytes(),
        }
    }

    /// Checks the certificate against the ring's certifying key for its period; returns the
    /// certified key, ready to verify with.
    pub fn check(&self, ring: &KeyRing) -> Result<VerifyingKey, KeyError> {
        let (certifying_bytes, certifying) = ring
            .certifying_key(self.period)
            .ok_or(KeyError::UnknownPeriod { period: self.period })?;
        let key = check_public_key(&self.key)?;
        let message = Self::signing_bytes(certifying_bytes, &self.key, self.period);
        certifying
            .verify_strict(&message, &Signature::from_bytes(&self.signature))
            .map_err(|_| KeyError::BadCertificate)?;
        Ok(key)
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key);
        put_u32(out, self.period);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<KeyCertificate, DecodeError> {
        Ok(KeyCertificate {
            key: reader.read_array("certified key")?,
            period: reader.read_u32("certificate period")?,
            signature: reader.read_array("certificate signature")?,
        })
    }
}

/// A device's signature, under its registered identity key, that a one-time key is its own: what
/// ties a double spender's one-time key to a person in evidence, without trusting the authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyBinding {
    pub identity: PublicKey,
    pub key: PublicKey,
    pub signature: [u8; SIGNATURE_BYTES],
}

impl KeyBinding {
    pub fn signing_bytes(identity: &PublicKey, key: &PublicKey) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(KEY_BINDING_DOMAIN.len() + 1 + 2 * PUBLIC_KEY_BYTES);
        bytes.extend_from_slice(KEY_BINDING_DOMAIN);
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(identity);
        bytes.extend_from_slice(key);
        bytes
    }

    pub fn sign(identity: &SigningKey, key: PublicKey) -> KeyBinding {
        let identity_bytes = identity.verifying_key().to_bytes();
        KeyBinding {
            identity: identity_bytes,
            key,
            signature: identity.sign(&Self::signing_bytes(&identity_bytes, &key)).to_bytes(),
        }
    }

    /// Identity, key, signature.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.identity);
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<KeyBinding, DecodeError> {
        Ok(KeyBinding {
            identity: reader.read_array("binding identity")?,
            key: reader.read_array("binding key")?,
            signature: reader.read_array("binding signature")?,
        })
    }

    /// Both keys are sound, and the identity signed the binding.
    pub fn check(&self) -> Result<(), KeyError> {
        let identity = check_public_key(&self.identity)?;
        check_public_key(&self.key)?;
        identity
            .verify_strict(
                &Self::signing_bytes(&self.identity, &self.key),
                &Signature::from_bytes(&self.signature),
            )
            .map_err(|_| KeyError::BadBinding)
    }
}

/// What a verifier trusts, from the authority's key set: issuing keys with the denomination of
/// their tokens, and the certifying key of each period. Keys are kept decompressed, so that a
/// verifier pays for decompression once, not per token.
#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    issuing: BTreeMap<PublicKey, (u64, VerifyingKey)>,
    certifying: BTreeMap<u32, (PublicKey, VerifyingKey)>,
}

impl KeyRing {
    pub fn add_issuing_key(&mut self, key: PublicKey, denomination: u64) -> Result<(), KeyError> {
        let verifying = check_public_key(&key)?;
        if self.issuing.contains_key(&key) {
            return Err(KeyError::DuplicateIssuingKey);
        }
        self.issuing.insert(key, (denomination, verifying));
        Ok(())
    }

    pub fn add_certifying_key(&mut self, period: u32, key: PublicKey) -> Result<(), KeyError> {
        let verifying = check_public_key(&key)?;
        if self.certifying.contains_key(&period) {
            return Err(KeyError::DuplicatePeriod { period });
        }
        self.certifying.insert(period, (key, verifying));
        Ok(())
    }

    /// Version, issuing-key count (`u8`) and (key, denomination `u64`) each in key order,
    /// certifying-key count (`u8`) and (period `u32`, key) each in period order.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        assert!(
            self.issuing.len() <= KEY_RING_KEYS_MAX && self.certifying.len() <= KEY_RING_KEYS_MAX,
            "a key ring holds at most KEY_RING_KEYS_MAX keys of each kind"
        );
        out.push(ENCODING_VERSION);
        out.push(self.issuing.len() as u8);
        for (key, (denomination, _)) in &self.issuing {
            out.extend_from_slice(key);
            out.extend_from_slice(&denomination.to_le_bytes());
        }
        out.push(self.certifying.len() as u8);
        for (period, (key, _)) in &self.certifying {
            put_u32(out, *period);
            out.extend_from_slice(key);
        }
    }

    /// A ring in canonical form: keys valid, each once, in order.
    pub fn decode_from(reader: &mut Reader<'_>) -> Result<KeyRing, DecodeError> {
        crate::read_version(reader, "key ring")?;
        let invalid = |reason: String| DecodeError::Invalid {
            what: "key ring",
            reason,
        };
        let mut ring = KeyRing::default();
        let issuing = reader.read_u8("issuing key count")?;
        let mut last = None;
        for _ in 0..issuing {
            let key: PublicKey = reader.read_array("issuing key")?;
            let denomination = reader.read_u64("denomination")?;
            if last.is_some_and(|last| last >= key) {
                return Err(DecodeError::NonCanonical {
                    what: "key ring",
                    reason: "issuing keys not in increasing order",
                });
            }
            last = Some(key);
            ring.add_issuing_key(key, denomination)
                .map_err(|error| invalid(format!("issuing key: {error}")))?;
        }
        let certifying = reader.read_u8("certifying key count")?;
        let mut last = None;
        for _ in 0..certifying {
            let period = reader.read_u32("period")?;
            let key: PublicKey = reader.read_array("certifying key")?;
            if last.is_some_and(|last| last >= period) {
                return Err(DecodeError::NonCanonical {
                    what: "key ring",
                    reason: "periods not in increasing order",
                });
            }
            last = Some(period);
            ring.add_certifying_key(period, key)
                .map_err(|error| invalid(format!("certifying key: {error}")))?;
        }
        Ok(ring)
    }

    /// SHA-256 of the domain and the ring's encoding: what a verifier compares with the key set
    /// the authority publishes before it trusts a ring that came with evidence.
    pub fn fingerprint(&self) -> [u8; 32] {
        let mut bytes = KEY_RING_DOMAIN.to_vec();
        self.encode_to(&mut bytes);
        sha2::Sha256::digest(bytes).into()
    }

    /// The denomination of tokens `key` issues and the key itself, if it is a known issuing key.
    pub fn issuing_key(&self, key: &PublicKey) -> Option<(u64, &VerifyingKey)> {
        self.issuing.get(key).map(|(denomination, key)| (*denomination, key))
    }

    pub fn certifying_key(&self, period: u32) -> Option<(&PublicKey, &VerifyingKey)> {
        self.certifying.get(&period).map(|(bytes, key)| (bytes, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    #[test]
    fn a_certificate_holds_only_for_its_key_and_period_under_that_periods_key() {
        let (authority, other) = (key(1), key(2));
        let mut ring = KeyRing::default();
        ring.add_certifying_key(7, authority.verifying_key().to_bytes())
            .unwrap();
        ring.add_certifying_key(8, other.verifying_key().to_bytes()).unwrap();
        let one_time = key(3).verifying_key().to_bytes();
        let certificate = KeyCertificate::sign(one_time, 7, &authority);
        assert_eq!(certificate.check(&ring).map(|k| k.to_bytes()), Ok(one_time));

        let moved = KeyCertificate {
            period: 8,
            ..certificate
        };
        assert_eq!(moved.check(&ring), Err(KeyError::BadCertificate));
        let unknown = KeyCertificate {
            period: 9,
            ..certificate
        };
        assert_eq!(unknown.check(&ring), Err(KeyError::UnknownPeriod { period: 9 }));
        let swapped = KeyCertificate {
            key: key(4).verifying_key().to_bytes(),
            ..certificate
        };
        assert_eq!(swapped.check(&ring), Err(KeyError::BadCertificate));
        let mut identity_point = [0u8; 32];
        identity_point[0] = 1;
        let weak = KeyCertificate::sign(identity_point, 7, &authority);
        assert_eq!(weak.check(&ring), Err(KeyError::WeakKey));
        assert_eq!(
            ring.add_certifying_key(7, other.verifying_key().to_bytes()),
            Err(KeyError::DuplicatePeriod { period: 7 })
        );
    }

    #[test]
    fn a_binding_holds_only_signed_by_its_identity_over_its_key() {
        let (identity, one_time) = (key(5), key(6).verifying_key().to_bytes());
        let binding = KeyBinding::sign(&identity, one_time);
        assert_eq!(binding.check(), Ok(()));
        let other_key = KeyBinding {
            key: key(7).verifying_key().to_bytes(),
            ..binding
        };
        assert_eq!(other_key.check(), Err(KeyError::BadBinding));
        let other_identity = KeyBinding {
            identity: key(8).verifying_key().to_bytes(),
            ..binding
        };
        assert_eq!(other_identity.check(), Err(KeyError::BadBinding));
    }
}
