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
const KEY_RING_DOMAIN: &[u8] = b"specie/offline/key-ring/v2";
/// Signed by the authority's bridge key (its long-term public identity, which the core banks
/// for): this key ring is mine.
const SIGNED_KEY_RING_DOMAIN: &[u8] = b"specie/offline/signed-key-ring/v1";
/// The key ring's own version: 2 since it carries the key lifecycle (periods, windows,
/// revocations).
pub const KEY_RING_VERSION: u8 = 2;
/// Most keys of each kind (issuing, certifying) a key ring's encoding holds.
pub const KEY_RING_KEYS_MAX: usize = 255;
/// An issuing key's entry: key, denomination, period, flags.
const ISSUING_ENTRY_BYTES: usize = PUBLIC_KEY_BYTES + 8 + 4 + 1;
/// The flag of a revoked issuing key.
const FLAG_REVOKED: u8 = 1;
/// The longest canonical key ring.
pub const KEY_RING_BYTES_MAX: usize =
    1 + 3 * 4 + 1 + KEY_RING_KEYS_MAX * ISSUING_ENTRY_BYTES + 1 + KEY_RING_KEYS_MAX * (4 + PUBLIC_KEY_BYTES);
/// The longest canonical signed key ring: the authority's key, its signature, the ring.
pub const SIGNED_KEY_RING_BYTES_MAX: usize = PUBLIC_KEY_BYTES + SIGNATURE_BYTES + KEY_RING_BYTES_MAX;
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
    #[error("an issuing key of period {period}, after the ring's next period")]
    FuturePeriod { period: u32 },
    #[error("not an issuing key of this ring")]
    UnknownIssuingKey,
    #[error("the key ring's signature does not verify")]
    BadRingSignature,
    #[error("the key ring is signed by another authority than the one this device trusts")]
    OtherAuthority { expected: PublicKey, found: PublicKey },
}

/// The key lifecycle (docs/offline-mode.md, "Key lifecycle"): the authority issues with the keys
/// of the current period; a token stays spendable offline through `spend_periods` periods after
/// its key's, and may be deposited through `deposit_periods` periods after it. The authority
/// moves to the next period when its operator rotates (a logged command, so every replica agrees
/// on it); devices learn the current period when they sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifecycle {
    pub current_period: u32,
    pub spend_periods: u32,
    pub deposit_periods: u32,
}

impl Default for Lifecycle {
    /// Three periods to spend, twelve to deposit (with monthly rotation: a quarter and a year).
    fn default() -> Lifecycle {
        Lifecycle {
            current_period: 0,
            spend_periods: 3,
            deposit_periods: 12,
        }
    }
}

/// Where a token of an issuing key stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyStatus {
    /// Its tokens may pass from device to device.
    Spendable,
    /// Past its spend window (through `spendable_through`): its tokens may only be deposited.
    SpendExpired { spendable_through: u32 },
    /// Past its deposit window too: its tokens are worth nothing any more, like destroyed cash.
    Expired { depositable_through: u32 },
    /// Revoked (compromised): its tokens may only be deposited, where the authority pays those
    /// its issuance log holds (recoup) and nothing else.
    Revoked,
}

impl Lifecycle {
    /// The status of a key of `period` that is (or is not) `revoked`.
    pub fn status(&self, period: u32, revoked: bool) -> KeyStatus {
        let spendable_through = period.saturating_add(self.spend_periods);
        let depositable_through = period.saturating_add(self.deposit_periods);
        match () {
            _ if self.current_period > depositable_through => KeyStatus::Expired { depositable_through },
            _ if revoked => KeyStatus::Revoked,
            _ if self.current_period > spendable_through => KeyStatus::SpendExpired { spendable_through },
            _ => KeyStatus::Spendable,
        }
    }

    /// The oldest period whose issuing keys still matter (their tokens may be deposited).
    pub fn oldest_live_period(&self) -> u32 {
        self.current_period.saturating_sub(self.deposit_periods)
    }

    /// Whether a one-time key certified in `period` may still be paid to: through the spend
    /// window of its period, as a token of that period's keys.
    pub fn certificate_receivable(&self, period: u32) -> bool {
        self.current_period <= period.saturating_add(self.spend_periods)
    }

    /// The oldest period whose certifying key still matters: a key certified then received
    /// tokens at most `spend_periods` later, and those are depositable `deposit_periods` after
    /// their own key's period, so their chains must verify that long.
    pub fn oldest_certifying_period(&self) -> u32 {
        self.current_period
            .saturating_sub(self.spend_periods)
            .saturating_sub(self.deposit_periods)
    }
}

/// An issuing key as the ring holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IssuingKey {
    denomination: u64,
    period: u32,
    revoked: bool,
    verifying: VerifyingKey,
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyRing {
    issuing: BTreeMap<PublicKey, IssuingKey>,
    certifying: BTreeMap<u32, (PublicKey, VerifyingKey)>,
    lifecycle: Lifecycle,
}

impl KeyRing {
    /// An empty ring under `lifecycle`.
    pub fn new(lifecycle: Lifecycle) -> KeyRing {
        KeyRing {
            lifecycle,
            ..KeyRing::default()
        }
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// Adds an issuing key of the ring's current period.
    pub fn add_issuing_key(&mut self, key: PublicKey, denomination: u64) -> Result<(), KeyError> {
        self.add_issuing_key_of(key, denomination, self.lifecycle.current_period)
    }

    /// Adds an issuing key of `period` (at most the next one: keys are announced before use).
    pub fn add_issuing_key_of(&mut self, key: PublicKey, denomination: u64, period: u32) -> Result<(), KeyError> {
        let verifying = check_public_key(&key)?;
        if period > self.lifecycle.current_period.saturating_add(1) {
            return Err(KeyError::FuturePeriod { period });
        }
        if self.issuing.contains_key(&key) {
            return Err(KeyError::DuplicateIssuingKey);
        }
        let entry = IssuingKey {
            denomination,
            period,
            revoked: false,
            verifying,
        };
        self.issuing.insert(key, entry);
        Ok(())
    }

    /// Marks an issuing key revoked: devices refuse its tokens, which go back to the authority.
    pub fn revoke_issuing_key(&mut self, key: &PublicKey) -> Result<(), KeyError> {
        let entry = self.issuing.get_mut(key).ok_or(KeyError::UnknownIssuingKey)?;
        entry.revoked = true;
        Ok(())
    }

    /// Where the tokens of issuing key `key` stand, if the ring knows it.
    pub fn key_status(&self, key: &PublicKey) -> Option<KeyStatus> {
        let entry = self.issuing.get(key)?;
        Some(self.lifecycle.status(entry.period, entry.revoked))
    }

    /// Every issuing key the ring holds, in key order.
    pub fn issuing_keys(&self) -> impl Iterator<Item = &PublicKey> {
        self.issuing.keys()
    }

    /// The period of issuing key `key`, if the ring knows it.
    pub fn key_period(&self, key: &PublicKey) -> Option<u32> {
        self.issuing.get(key).map(|entry| entry.period)
    }

    pub fn add_certifying_key(&mut self, period: u32, key: PublicKey) -> Result<(), KeyError> {
        let verifying = check_public_key(&key)?;
        if self.certifying.contains_key(&period) {
            return Err(KeyError::DuplicatePeriod { period });
        }
        self.certifying.insert(period, (key, verifying));
        Ok(())
    }

    /// Version 2, the lifecycle (current period, spend periods, deposit periods: `u32` each),
    /// issuing-key count (`u8`) and (key, denomination `u64`, period `u32`, flags `u8`: 1 if
    /// revoked) each in key order, certifying-key count (`u8`) and (period `u32`, key) each in
    /// period order.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        assert!(
            self.issuing.len() <= KEY_RING_KEYS_MAX && self.certifying.len() <= KEY_RING_KEYS_MAX,
            "a key ring holds at most KEY_RING_KEYS_MAX keys of each kind"
        );
        out.push(KEY_RING_VERSION);
        put_u32(out, self.lifecycle.current_period);
        put_u32(out, self.lifecycle.spend_periods);
        put_u32(out, self.lifecycle.deposit_periods);
        out.push(self.issuing.len() as u8);
        for (key, entry) in &self.issuing {
            out.extend_from_slice(key);
            out.extend_from_slice(&entry.denomination.to_le_bytes());
            put_u32(out, entry.period);
            out.push(if entry.revoked { FLAG_REVOKED } else { 0 });
        }
        out.push(self.certifying.len() as u8);
        for (period, (key, _)) in &self.certifying {
            put_u32(out, *period);
            out.extend_from_slice(key);
        }
    }

    /// A ring in canonical form: keys valid, each once, in order.
    pub fn decode_from(reader: &mut Reader<'_>) -> Result<KeyRing, DecodeError> {
        reader.read_version("key ring", KEY_RING_VERSION)?;
        let invalid = |reason: String| DecodeError::Invalid {
            what: "key ring",
            reason,
        };
        let lifecycle = Lifecycle {
            current_period: reader.read_u32("current period")?,
            spend_periods: reader.read_u32("spend periods")?,
            deposit_periods: reader.read_u32("deposit periods")?,
        };
        if lifecycle.deposit_periods < lifecycle.spend_periods {
            return Err(invalid("deposit window shorter than the spend window".into()));
        }
        let mut ring = KeyRing::new(lifecycle);
        let issuing = reader.read_u8("issuing key count")?;
        let mut last = None;
        for _ in 0..issuing {
            let key: PublicKey = reader.read_array("issuing key")?;
            let denomination = reader.read_u64("denomination")?;
            let period = reader.read_u32("issuing key period")?;
            let flags = reader.read_u8("issuing key flags")?;
            if last.is_some_and(|last| last >= key) {
                return Err(DecodeError::NonCanonical {
                    what: "key ring",
                    reason: "issuing keys not in increasing order",
                });
            }
            if flags & !FLAG_REVOKED != 0 {
                return Err(invalid(format!("unknown issuing key flags {flags:#04x}")));
            }
            last = Some(key);
            ring.add_issuing_key_of(key, denomination, period)
                .map_err(|error| invalid(format!("issuing key: {error}")))?;
            if flags & FLAG_REVOKED != 0 {
                ring.revoke_issuing_key(&key).expect("just added");
            }
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
        self.issuing
            .get(key)
            .map(|entry| (entry.denomination, &entry.verifying))
    }

    pub fn certifying_key(&self, period: u32) -> Option<(&PublicKey, &VerifyingKey)> {
        self.certifying.get(&period).map(|(bytes, key)| (bytes, key))
    }
}

/// A key ring as the authority publishes it: signed by its bridge key, so a device that pinned
/// that key (on enrolment, or given out of band) takes no ring from anyone else, whoever answers
/// at the authority's address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedKeyRing {
    /// The authority's bridge key.
    pub authority: PublicKey,
    pub signature: [u8; SIGNATURE_BYTES],
    pub ring: KeyRing,
}

impl SignedKeyRing {
    /// The domain, the version, the authority's key and the ring's fingerprint.
    pub fn signing_bytes(authority: &PublicKey, ring: &KeyRing) -> Vec<u8> {
        let mut bytes = SIGNED_KEY_RING_DOMAIN.to_vec();
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(authority);
        bytes.extend_from_slice(&ring.fingerprint());
        bytes
    }

    pub fn sign(ring: KeyRing, authority: &SigningKey) -> SignedKeyRing {
        let authority_bytes = authority.verifying_key().to_bytes();
        SignedKeyRing {
            authority: authority_bytes,
            signature: authority.sign(&Self::signing_bytes(&authority_bytes, &ring)).to_bytes(),
            ring,
        }
    }

    /// The signature verifies under the ring's authority key, and that key is `pinned` if one is
    /// given.
    pub fn check(&self, pinned: Option<&PublicKey>) -> Result<(), KeyError> {
        if let Some(pinned) = pinned.filter(|pinned| **pinned != self.authority) {
            return Err(KeyError::OtherAuthority {
                expected: *pinned,
                found: self.authority,
            });
        }
        let authority = check_public_key(&self.authority)?;
        authority
            .verify_strict(
                &Self::signing_bytes(&self.authority, &self.ring),
                &Signature::from_bytes(&self.signature),
            )
            .map_err(|_| KeyError::BadRingSignature)
    }

    /// The authority's key, the signature, then the ring.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.authority);
        out.extend_from_slice(&self.signature);
        self.ring.encode_to(out);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<SignedKeyRing, DecodeError> {
        Ok(SignedKeyRing {
            authority: reader.read_array("key ring authority")?,
            signature: reader.read_array("key ring signature")?,
            ring: KeyRing::decode_from(reader)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    #[test]
    fn a_signed_key_ring_verifies_only_unchanged_and_only_under_its_authority() {
        let mut ring = KeyRing::new(Lifecycle::default());
        ring.add_issuing_key(key(1).verifying_key().to_bytes(), 100).unwrap();
        ring.add_certifying_key(0, key(2).verifying_key().to_bytes()).unwrap();
        let authority = key(3);
        let signed = SignedKeyRing::sign(ring.clone(), &authority);
        let authority_bytes = authority.verifying_key().to_bytes();
        assert_eq!(signed.check(None), Ok(()));
        assert_eq!(signed.check(Some(&authority_bytes)), Ok(()));
        let other = key(4).verifying_key().to_bytes();
        assert_eq!(
            signed.check(Some(&other)),
            Err(KeyError::OtherAuthority {
                expected: other,
                found: authority_bytes
            })
        );
        // Another ring under the same signature, or the signature claimed by another key: refused.
        let mut changed = signed.clone();
        changed
            .ring
            .add_issuing_key(key(5).verifying_key().to_bytes(), 200)
            .unwrap();
        assert_eq!(changed.check(None), Err(KeyError::BadRingSignature));
        let mut claimed = signed.clone();
        claimed.authority = other;
        assert_eq!(claimed.check(None), Err(KeyError::BadRingSignature));
        // A re-signed ring of an impostor verifies on its own, but not for a device that pinned.
        let impostor = SignedKeyRing::sign(ring, &key(4));
        assert_eq!(impostor.check(None), Ok(()));
        assert!(impostor.check(Some(&authority_bytes)).is_err());
        let mut bytes = Vec::new();
        signed.encode_to(&mut bytes);
        let decoded = specie_codec::decode_bounded(
            "signed key ring",
            &bytes,
            SIGNED_KEY_RING_BYTES_MAX,
            SignedKeyRing::decode_from,
        )
        .unwrap();
        assert_eq!(decoded, signed);
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

    #[test]
    fn a_key_is_spendable_then_deposit_only_then_worthless_and_revoked_keys_are_deposit_only() {
        let at = |current_period| Lifecycle {
            current_period,
            spend_periods: 2,
            deposit_periods: 5,
        };
        assert_eq!(at(3).status(3, false), KeyStatus::Spendable);
        assert_eq!(at(5).status(3, false), KeyStatus::Spendable);
        assert_eq!(at(6).status(3, false), KeyStatus::SpendExpired { spendable_through: 5 });
        assert_eq!(at(8).status(3, false), KeyStatus::SpendExpired { spendable_through: 5 });
        assert_eq!(at(9).status(3, false), KeyStatus::Expired { depositable_through: 8 });
        assert_eq!(at(3).status(3, true), KeyStatus::Revoked);
        assert_eq!(at(9).status(3, true), KeyStatus::Expired { depositable_through: 8 });
        assert_eq!(at(9).oldest_live_period(), 4);
        assert_eq!(
            at(u32::MAX).status(u32::MAX - 1, false),
            KeyStatus::Spendable,
            "no overflow"
        );
    }

    #[test]
    fn a_ring_with_periods_and_a_revoked_key_round_trips_and_its_canonical_form_is_enforced() {
        let lifecycle = Lifecycle {
            current_period: 4,
            spend_periods: 1,
            deposit_periods: 3,
        };
        let mut ring = KeyRing::new(lifecycle);
        ring.add_issuing_key_of(key(1).verifying_key().to_bytes(), 10, 2)
            .unwrap();
        ring.add_issuing_key(key(2).verifying_key().to_bytes(), 10).unwrap();
        ring.add_issuing_key_of(key(3).verifying_key().to_bytes(), 10, 5)
            .unwrap();
        assert_eq!(
            ring.add_issuing_key_of(key(4).verifying_key().to_bytes(), 10, 6),
            Err(KeyError::FuturePeriod { period: 6 })
        );
        ring.revoke_issuing_key(&key(2).verifying_key().to_bytes()).unwrap();
        ring.add_certifying_key(4, key(5).verifying_key().to_bytes()).unwrap();
        let mut bytes = Vec::new();
        ring.encode_to(&mut bytes);
        let decoded = KeyRing::decode_from(&mut Reader::new(&bytes)).unwrap();
        assert_eq!(decoded.fingerprint(), ring.fingerprint());
        assert_eq!(decoded.lifecycle(), lifecycle);
        let status = |n: u8| decoded.key_status(&key(n).verifying_key().to_bytes());
        assert_eq!(status(1), Some(KeyStatus::SpendExpired { spendable_through: 3 }));
        assert_eq!(status(2), Some(KeyStatus::Revoked));
        assert_eq!(status(3), Some(KeyStatus::Spendable));
        assert_eq!(status(4), None);

        // A flag byte other than 0 or 1, and a deposit window shorter than the spend window.
        let first_flags = 1 + 12 + 1 + PUBLIC_KEY_BYTES + 8 + 4;
        let mut flagged = bytes.clone();
        flagged[first_flags] = 2;
        assert!(KeyRing::decode_from(&mut Reader::new(&flagged)).is_err());
        let mut short = bytes.clone();
        short[9..13].copy_from_slice(&0u32.to_le_bytes());
        assert!(KeyRing::decode_from(&mut Reader::new(&short)).is_err());
        let mut old = bytes;
        old[0] = 1;
        assert!(
            KeyRing::decode_from(&mut Reader::new(&old)).is_err(),
            "version 1 rings are refused"
        );
    }
}
