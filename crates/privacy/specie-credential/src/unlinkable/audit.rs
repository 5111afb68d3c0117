//! Auditors reading the values of unlinkable outputs (docs/unlinkable-format.md §2.6): each output
//! encrypts its value to every owner auditor in two 32-bit halves, ElGamal in the exponent of
//! `G_id` (the owner ciphertexts' scheme), and the transfer proves `v = v_lo + 2^32·v_hi` against
//! the value its token commits to. The auditor takes the two discrete logarithms by baby-step
//! giant-step (a table of 2^16 points built once, at most 2^16 giant steps per half).
//!
//! The proof binds the halves to the value modulo the group order, not each half to 32 bits: a
//! payer who encrypts other halves makes the value unreadable (never wrong: two 32-bit halves that
//! decrypt are the value, which the range proof keeps below 2^64), and the auditor sees which
//! transaction did it and, from the owner ciphertexts, who paid.

use std::collections::HashMap;
use std::sync::OnceLock;

use ark_ec::{AffineRepr, CurveGroup};

use crate::error::AuditError;
use crate::group::{generators, Pairing, Scalar, G1};
use crate::owner::{AuditorSecret, OwnerCiphertext};

type G1Projective = <Pairing as ark_ec::pairing::Pairing>::G1;

/// The weight of the high half: `v = v_lo + 2^32·v_hi`.
pub(crate) fn high_weight() -> Scalar {
    Scalar::from(1u64 << 32)
}

/// A value's halves, low first.
pub(crate) fn halves(value: u64) -> [u64; 2] {
    [value & 0xffff_ffff, value >> 32]
}

/// An output's value encrypted to one auditor: its low and high 32-bit halves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueCiphertext {
    pub(crate) halves: [OwnerCiphertext; 2],
}

impl ValueCiphertext {
    pub fn auditor(&self) -> crate::AuditorKey {
        self.halves[0].auditor()
    }
}

impl AuditorSecret {
    /// The value `ciphertext` encrypts, if it is addressed to this auditor and both halves are
    /// 32-bit numbers.
    pub fn read_value(&self, ciphertext: &ValueCiphertext) -> Result<u64, AuditError> {
        let [low, high] = ciphertext.halves;
        let low = discrete_log_u32(&self.decrypt_point(&low)?).ok_or(AuditError::UnreadableValue)?;
        let high = discrete_log_u32(&self.decrypt_point(&high)?).ok_or(AuditError::UnreadableValue)?;
        Ok(u64::from(low) | (u64::from(high) << 32))
    }
}

const STEP_BITS: u32 = 16;
/// Giant steps normalised to affine together (one inversion for all of them).
const GIANT_CHUNK: usize = 256;

/// `j·G_id → j` for `j < 2^16`.
fn baby_steps() -> &'static HashMap<G1, u16> {
    static TABLE: OnceLock<HashMap<G1, u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let generator = generators().owner_id.into_group();
        let mut points = Vec::with_capacity(1 << STEP_BITS);
        let mut current = G1Projective::default();
        for _ in 0..(1u32 << STEP_BITS) {
            points.push(current);
            current += generator;
        }
        let affine = G1Projective::normalize_batch(&points);
        affine.into_iter().zip(0..=u16::MAX).collect()
    })
}

/// `x < 2^32` with `x·G_id = point`, if there is one.
fn discrete_log_u32(point: &G1) -> Option<u32> {
    let table = baby_steps();
    let giant = generators().owner_id * Scalar::from(1u64 << STEP_BITS);
    let mut current = point.into_group();
    let mut chunk = Vec::with_capacity(GIANT_CHUNK);
    for first in (0..1u32 << STEP_BITS).step_by(GIANT_CHUNK) {
        chunk.clear();
        for _ in 0..GIANT_CHUNK {
            chunk.push(current);
            current -= giant;
        }
        let affine = G1Projective::normalize_batch(&chunk);
        if let Some((i, j)) = (affine.iter().enumerate()).find_map(|(i, p)| table.get(p).map(|j| (i, *j))) {
            return Some(((first + i as u32) << STEP_BITS) | u32::from(j));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_32_bit_number_is_found_and_a_larger_one_is_not() {
        let g = generators().owner_id;
        for x in [0u32, 1, 65_535, 65_536, 0x1234_5678, u32::MAX] {
            assert_eq!(discrete_log_u32(&(g * Scalar::from(x)).into_affine()), Some(x), "{x}");
        }
        assert_eq!(discrete_log_u32(&(g * Scalar::from(1u64 << 32)).into_affine()), None);
        assert_eq!(discrete_log_u32(&(g * -Scalar::from(1u8)).into_affine()), None);
        assert_eq!(halves(0x0102_0304_0506_0708), [0x0506_0708, 0x0102_0304]);
    }
}
