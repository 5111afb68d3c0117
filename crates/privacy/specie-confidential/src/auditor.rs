//! Auditors' keys and decryption (twisted ElGamal, as in Solana's confidential transfers).
//!
//! An auditor's secret is a scalar `s`; its public key is `P = s⁻¹·H`. Each 16-bit limb of an
//! output is committed as `C = v·G + r·H` and carries, for every auditor, a decryption handle
//! `D = r·P`. Then `C − s·D = v·G + r·H − r·H = v·G`, and `v < 2¹⁶` is found by a small discrete
//! log (baby-step giant-step, 256 + 256 steps). The commitment is the ciphertext's message part, so
//! a limb costs each auditor 32 bytes, and the validity proof (`sigma.rs`) shows that every handle
//! uses the commitment's own `r`: what an auditor decrypts is what was committed and range-proven.

use std::collections::HashMap;
use std::sync::OnceLock;

use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use rand_core::CryptoRngCore;

use crate::group::{generators, hash_to_scalar, Point, ELEMENT_BYTES};
use crate::{LIMBS, LIMB_BITS};

/// Domain of [`AuditorSecret::from_seed`].
pub const DOMAIN_AUDITOR_KEY: &[u8] = b"specie/confidential/auditor-key/v1";

/// Baby steps of the limb discrete log: `2^(LIMB_BITS/2)`.
const BABY_STEPS: u32 = 1 << (LIMB_BITS / 2);

/// An auditor's public key `P = s⁻¹·H`, never the identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditorKey(pub(crate) Point);

impl AuditorKey {
    /// The key these bytes encode: a canonical Ristretto point other than the identity.
    pub fn from_bytes(bytes: [u8; ELEMENT_BYTES]) -> Option<AuditorKey> {
        Point::from_bytes(bytes).filter(|p| !p.is_identity()).map(AuditorKey)
    }

    pub fn to_bytes(&self) -> [u8; ELEMENT_BYTES] {
        self.0.bytes
    }
}

/// An auditor's secret scalar `s` (nonzero).
#[derive(Clone)]
pub struct AuditorSecret {
    secret: Scalar,
    public: AuditorKey,
}

impl std::fmt::Debug for AuditorSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        write!(f, "AuditorSecret(public {:02x?})", &self.public.to_bytes()[..4])
    }
}

impl AuditorSecret {
    /// The secret derived from a 32-byte seed: `s = SHA-512(domain ‖ seed) mod ℓ`.
    pub fn from_seed(seed: &[u8; 32]) -> AuditorSecret {
        AuditorSecret::from_scalar(hash_to_scalar(DOMAIN_AUDITOR_KEY, &[seed]))
    }

    pub fn random(rng: &mut impl CryptoRngCore) -> AuditorSecret {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        AuditorSecret::from_seed(&seed)
    }

    fn from_scalar(secret: Scalar) -> AuditorSecret {
        // A zero secret has probability 2⁻²⁵²; it would make the key the identity.
        assert_ne!(secret, Scalar::ZERO, "auditor secret is zero");
        let public = AuditorKey(Point::new(secret.invert() * generators().blinding));
        AuditorSecret { secret, public }
    }

    #[cfg(test)]
    pub(crate) fn secret_for_tests(&self) -> Scalar {
        self.secret
    }

    pub fn public(&self) -> AuditorKey {
        self.public
    }

    /// The limb value `v` of ciphertext `(commitment, handle)`, or `None` if `C − s·D` is not
    /// `v·G` for any `v < 2¹⁶` (impossible for a transfer that verified).
    pub fn decrypt_limb(&self, commitment: &Point, handle: &Point) -> Option<u16> {
        small_discrete_log(commitment.point - self.secret * handle.point)
    }

    /// The value `Σ 2^(16j)·v_j` of one output's limbs, decrypted with the handles of this auditor.
    pub fn decrypt_value(&self, limbs: &[Point; LIMBS], handles: &[Point; LIMBS]) -> Option<u64> {
        let mut value = 0u64;
        for (j, (limb, handle)) in limbs.iter().zip(handles).enumerate() {
            value |= u64::from(self.decrypt_limb(limb, handle)?) << (LIMB_BITS * j as u32);
        }
        Some(value)
    }
}

/// Compressed `i·G` → `i` for the baby steps `i < 256`.
fn baby_table() -> &'static HashMap<[u8; 32], u32> {
    static TABLE: OnceLock<HashMap<[u8; 32], u32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let g = generators().value;
        let mut table = HashMap::with_capacity(BABY_STEPS as usize);
        let mut point = RistrettoPoint::default();
        for i in 0..BABY_STEPS {
            table.insert(point.compress().to_bytes(), i);
            point += g;
        }
        table
    })
}

/// `v < 2¹⁶` with `v·G == target`: giant steps of `256·G` down from the target.
fn small_discrete_log(target: RistrettoPoint) -> Option<u16> {
    let table = baby_table();
    let giant = Scalar::from(BABY_STEPS) * generators().value;
    let mut point = target;
    for k in 0..BABY_STEPS {
        if let Some(i) = table.get(&point.compress().to_bytes()) {
            return u16::try_from(k * BABY_STEPS + i).ok();
        }
        point -= giant;
    }
    None
}
