//! The batch verifier's accumulator: every Schnorr row of every proof in a batch becomes one
//! multi-scalar multiplication per group, and every pairing equation one multi-pairing, each
//! check weighted by the next power of one scalar hashed from the whole batch (a random linear
//! combination: a batch with any false check passes with probability at most checks / r).
//! Terms on fixed generators are summed into one scalar each before the multiplication, and
//! pairings against a fixed G2 point share one Miller loop.

use ark_ec::pairing::{Pairing as _, PairingOutput};
use ark_ec::{AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{One, Zero};

use crate::group::{Pairing, Scalar, G1, G2};

type G1Projective = <Pairing as ark_ec::pairing::Pairing>::G1;
type G2Projective = <Pairing as ark_ec::pairing::Pairing>::G2;

/// Points with a scalar each; a fixed generator appears once, its scalars summed.
struct Terms<P: AffineRepr> {
    fixed: Vec<(P, Scalar)>,
    bases: Vec<P>,
    scalars: Vec<Scalar>,
}

impl<P: AffineRepr<ScalarField = Scalar>> Terms<P> {
    fn new() -> Self {
        Terms {
            fixed: Vec::new(),
            bases: Vec::new(),
            scalars: Vec::new(),
        }
    }

    fn add_fixed(&mut self, point: P, scalar: Scalar) {
        match self.fixed.iter_mut().find(|(p, _)| *p == point) {
            Some((_, sum)) => *sum += scalar,
            None => self.fixed.push((point, scalar)),
        }
    }

    fn is_zero(&self) -> bool {
        let mut bases = self.bases.clone();
        let mut scalars = self.scalars.clone();
        bases.extend(self.fixed.iter().map(|(p, _)| *p));
        scalars.extend(self.fixed.iter().map(|(_, s)| *s));
        P::Group::msm_unchecked(&bases, &scalars).is_zero()
    }
}

/// The checks of a batch, accumulated; [`Checks::hold`] decides them all at once.
pub(crate) struct Checks {
    weight: Scalar,
    step: Scalar,
    g1: Terms<G1>,
    g2: Terms<G2>,
    /// Pairings against a fixed G2 point: the weighted G1 points summed.
    fixed_pairs: Vec<(G2, G1Projective)>,
    pairs: Vec<(G1, G2)>,
}

impl Checks {
    pub fn new(step: Scalar) -> Checks {
        Checks {
            weight: Scalar::one(),
            step,
            g1: Terms::new(),
            g2: Terms::new(),
            fixed_pairs: Vec::new(),
            pairs: Vec::new(),
        }
    }

    fn next_weight(&mut self) -> Scalar {
        let weight = self.weight;
        self.weight *= self.step;
        weight
    }

    /// `Σ fixed + Σ variable = 0` in G1, each a point times a scalar.
    pub fn g1_row(&mut self, fixed: &[(G1, Scalar)], variable: &[(G1, Scalar)]) {
        let weight = self.next_weight();
        fixed.iter().for_each(|(p, s)| self.g1.add_fixed(*p, weight * s));
        for (p, s) in variable {
            self.g1.bases.push(*p);
            self.g1.scalars.push(weight * s);
        }
    }

    /// `Σ fixed + Σ variable = 0` in G2.
    pub fn g2_row(&mut self, fixed: &[(G2, Scalar)], variable: &[(G2, Scalar)]) {
        let weight = self.next_weight();
        fixed.iter().for_each(|(p, s)| self.g2.add_fixed(*p, weight * s));
        for (p, s) in variable {
            self.g2.bases.push(*p);
            self.g2.scalars.push(weight * s);
        }
    }

    /// `e(a, b) = e(c, d)`, where `d` is a fixed point and `b` is fixed when `b_fixed`.
    pub fn pairing(&mut self, (a, b, b_fixed): (G1, G2, bool), (c, d): (G1, G2)) {
        let weight = self.next_weight();
        if b_fixed {
            self.add_fixed_pair(b, a * weight);
        } else {
            self.pairs.push(((a * weight).into_affine(), b));
        }
        self.add_fixed_pair(d, -(c * weight));
    }

    fn add_fixed_pair(&mut self, point: G2, sum: G1Projective) {
        match self.fixed_pairs.iter_mut().find(|(p, _)| *p == point) {
            Some((_, total)) => *total += sum,
            None => self.fixed_pairs.push((point, sum)),
        }
    }

    /// Whether every accumulated check holds.
    pub fn hold(&self) -> bool {
        if !self.g1.is_zero() || !self.g2.is_zero() {
            return false;
        }
        let mut left: Vec<G1> = self.pairs.iter().map(|(a, _)| *a).collect();
        let mut right: Vec<G2> = self.pairs.iter().map(|(_, b)| *b).collect();
        let fixed_left: Vec<G1> =
            G1Projective::normalize_batch(&self.fixed_pairs.iter().map(|(_, a)| *a).collect::<Vec<_>>());
        left.extend(fixed_left);
        right.extend(self.fixed_pairs.iter().map(|(b, _)| *b));
        Pairing::multi_pairing(left, right) == PairingOutput::zero()
    }
}

/// `a + b` in G2, affine.
pub(crate) fn g2_sum(a: &G2, b: &G2) -> G2 {
    (G2Projective::from(*a) + b).into_affine()
}
