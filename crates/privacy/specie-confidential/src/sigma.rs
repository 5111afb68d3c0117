//! The two sigma proofs, made non-interactive with Fiat–Shamir over the statement digest (which
//! covers the context, every commitment, every auditor key and every handle), so a proof made for
//! one transaction does not verify for any other.
//!
//! - **Balance**: Schnorr proof of knowledge of `x` with `E = x·H`, where
//!   `E = Σ C_in + public_in·G − Σ C_out − public_out·G`. If the values did not balance, `E` would
//!   have a `G` component and `x` would be a discrete log of `G` to base `H`, which nobody knows.
//! - **Validity** of the auditors' handles (Solana's batched grouped ciphertext validity proof):
//!   the limbs are folded with powers of a challenge `t`, `C* = Σ tⁱ·Cᵢ`, `D*ₐ = Σ tⁱ·Dₐ,ᵢ`, and one
//!   proof shows knowledge of `(v*, r*)` with `C* = v*·G + r*·H` and `D*ₐ = r*·Pₐ` for every auditor
//!   `a`. A handle with another `r` than its commitment survives the folding with probability
//!   ≤ (limbs)/ℓ.

use curve25519_dalek::scalar::Scalar;
use rand_core::CryptoRngCore;

use crate::auditor::AuditorKey;
use crate::group::{generators, hash_to_scalar, Equation, Point};

pub const DOMAIN_BALANCE: &[u8] = b"specie/confidential/balance/v1";
pub const DOMAIN_VALIDITY_FOLD: &[u8] = b"specie/confidential/validity-fold/v1";
pub const DOMAIN_VALIDITY: &[u8] = b"specie/confidential/validity/v1";

/// Schnorr proof that the balance excess is a multiple of `H` alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BalanceProof {
    /// `R = k·H`.
    pub(crate) nonce: Point,
    /// `s = k + c·x`.
    pub(crate) response: Scalar,
}

impl BalanceProof {
    /// Proves knowledge of `excess_blinding` (`x` with `E = x·H`) for the statement `digest`.
    pub fn prove(digest: &[u8; 32], excess_blinding: Scalar, rng: &mut impl CryptoRngCore) -> BalanceProof {
        let k = Scalar::random(rng);
        let nonce = Point::new(k * generators().blinding);
        let c = balance_challenge(digest, &nonce);
        BalanceProof {
            nonce,
            response: k + c * excess_blinding,
        }
    }

    /// Adds `w·(s·H − R − c·E)` to `equation`, with `E` spelt out by the caller through `add_excess`,
    /// which receives the factor (`−w·c`) to put on each term of `E`.
    pub fn add_terms(&self, digest: &[u8; 32], weight: Scalar, equation: &mut Equation) -> Scalar {
        let c = balance_challenge(digest, &self.nonce);
        equation.add_h(weight * self.response);
        equation.add(-weight, &self.nonce);
        -weight * c
    }
}

fn balance_challenge(digest: &[u8; 32], nonce: &Point) -> Scalar {
    hash_to_scalar(DOMAIN_BALANCE, &[digest, &nonce.bytes])
}

/// Proof that every auditor's handles use the blindings of the limb commitments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidityProof {
    /// `Y₀ = k_v·G + k_r·H`.
    pub(crate) nonce: Point,
    /// `Yₐ = k_r·Pₐ`, one per auditor, in the transfer's auditor order.
    pub(crate) auditor_nonces: Vec<Point>,
    /// `z_v = k_v + c·v*`.
    pub(crate) value_response: Scalar,
    /// `z_r = k_r + c·r*`.
    pub(crate) blinding_response: Scalar,
}

/// The folding challenge `t` and its powers `1, t, t², …` for `count` limbs.
pub fn fold_powers(digest: &[u8; 32], count: usize) -> Vec<Scalar> {
    let t = hash_to_scalar(DOMAIN_VALIDITY_FOLD, &[digest]);
    let mut powers = Vec::with_capacity(count);
    let mut power = Scalar::ONE;
    for _ in 0..count {
        powers.push(power);
        power *= t;
    }
    powers
}

impl ValidityProof {
    /// Proves validity for limbs with `values` and `blindings` (every limb of every output, in order).
    pub fn prove(
        digest: &[u8; 32],
        values: &[Scalar],
        blindings: &[Scalar],
        auditors: &[AuditorKey],
        rng: &mut impl CryptoRngCore,
    ) -> ValidityProof {
        assert_eq!(values.len(), blindings.len(), "one blinding per limb");
        let powers = fold_powers(digest, values.len());
        let folded_value: Scalar = values.iter().zip(&powers).map(|(v, t)| v * t).sum();
        let folded_blinding: Scalar = blindings.iter().zip(&powers).map(|(r, t)| r * t).sum();
        let (k_v, k_r) = (Scalar::random(rng), Scalar::random(rng));
        let nonce = Point::new(crate::group::commit(k_v, k_r));
        let auditor_nonces: Vec<Point> = auditors.iter().map(|a| Point::new(k_r * a.0.point)).collect();
        let c = validity_challenge(digest, &nonce, &auditor_nonces);
        ValidityProof {
            nonce,
            auditor_nonces,
            value_response: k_v + c * folded_value,
            blinding_response: k_r + c * folded_blinding,
        }
    }

    /// Adds the weighted validity equations to `equation`:
    /// `w₀·(z_v·G + z_r·H − Y₀ − c·C*)` and, per auditor, `wₐ·(z_r·Pₐ − Yₐ − c·D*ₐ)`.
    /// The limb terms `−w₀·c·tⁱ` are added to `limb_factors` (the caller merges them with the
    /// balance proof's factors on the same limbs); `handles[a]` are auditor `a`'s handles, limb order.
    pub fn add_terms(
        &self,
        digest: &[u8; 32],
        weights: &[Scalar],
        auditors: &[AuditorKey],
        handles: &[&[Point]],
        limb_factors: &mut [Scalar],
        equation: &mut Equation,
    ) {
        assert_eq!(weights.len(), auditors.len() + 1, "one weight per equation");
        assert_eq!(auditors.len(), self.auditor_nonces.len(), "one nonce per auditor");
        assert_eq!(auditors.len(), handles.len(), "one set of handles per auditor");
        let powers = fold_powers(digest, limb_factors.len());
        let c = validity_challenge(digest, &self.nonce, &self.auditor_nonces);
        equation.add_g(weights[0] * self.value_response);
        equation.add_h(weights[0] * self.blinding_response);
        equation.add(-weights[0], &self.nonce);
        for (factor, t) in limb_factors.iter_mut().zip(&powers) {
            *factor -= weights[0] * c * t;
        }
        for (a, auditor) in auditors.iter().enumerate() {
            let w = weights[a + 1];
            assert_eq!(handles[a].len(), powers.len(), "one handle per limb");
            equation.add(w * self.blinding_response, &auditor.0);
            equation.add(-w, &self.auditor_nonces[a]);
            for (handle, t) in handles[a].iter().zip(&powers) {
                equation.add(-w * c * t, handle);
            }
        }
    }
}

fn validity_challenge(digest: &[u8; 32], nonce: &Point, auditor_nonces: &[Point]) -> Scalar {
    let mut parts: Vec<&[u8]> = Vec::with_capacity(2 + auditor_nonces.len());
    parts.push(digest);
    parts.push(&nonce.bytes);
    parts.extend(auditor_nonces.iter().map(|p| &p.bytes[..]));
    hash_to_scalar(DOMAIN_VALIDITY, &parts)
}
