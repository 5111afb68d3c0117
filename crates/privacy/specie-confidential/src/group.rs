//! The group and its fixed generators, Fiat–Shamir hashing, and points as they travel: a
//! Ristretto point kept together with the canonical 32 bytes it was decoded from.

use std::sync::OnceLock;

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{IsIdentity, MultiscalarMul, VartimeMultiscalarMul};
use sha2::{Digest, Sha512};

/// Prefix of the hash-to-group input of the two commitment generators.
pub const DOMAIN_GENERATOR: &[u8] = b"specie/confidential/generator/v1/";

/// Bytes of a compressed Ristretto point or of a canonical scalar.
pub const ELEMENT_BYTES: usize = 32;

/// A Ristretto point and its canonical encoding. Decoding keeps both so that verification does not
/// decompress twice and re-encoding gives back exactly the bytes that were read.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub(crate) point: RistrettoPoint,
    pub(crate) bytes: [u8; ELEMENT_BYTES],
}

impl Point {
    pub(crate) fn new(point: RistrettoPoint) -> Point {
        Point {
            point,
            bytes: point.compress().to_bytes(),
        }
    }

    /// The point these bytes encode, if they are a canonical Ristretto encoding.
    pub fn from_bytes(bytes: [u8; ELEMENT_BYTES]) -> Option<Point> {
        let point = CompressedRistretto(bytes).decompress()?;
        Some(Point { point, bytes })
    }

    pub fn to_bytes(&self) -> [u8; ELEMENT_BYTES] {
        self.bytes
    }

    pub fn is_identity(&self) -> bool {
        self.point.is_identity()
    }
}

impl PartialEq for Point {
    fn eq(&self, other: &Point) -> bool {
        // Canonical encodings: equal points have equal bytes.
        self.bytes == other.bytes
    }
}

impl Eq for Point {}

/// A nothing-up-my-sleeve generator: SHA-512 of the domain and `name`, mapped to the group with
/// Ristretto's `from_uniform_bytes` (Elligator twice). Nobody knows a discrete log between two of them.
pub fn hash_to_group(name: &[u8]) -> RistrettoPoint {
    let digest: [u8; 64] = Sha512::new()
        .chain_update(DOMAIN_GENERATOR)
        .chain_update(name)
        .finalize()
        .into();
    RistrettoPoint::from_uniform_bytes(&digest)
}

/// The two Pedersen generators: `G` multiplies the value, `H` the blinding.
pub struct Generators {
    pub value: RistrettoPoint,
    pub blinding: RistrettoPoint,
    pub value_point: Point,
    pub blinding_point: Point,
}

/// The generators, derived once.
pub fn generators() -> &'static Generators {
    static GENERATORS: OnceLock<Generators> = OnceLock::new();
    GENERATORS.get_or_init(|| {
        let value = hash_to_group(b"value");
        let blinding = hash_to_group(b"blinding");
        Generators {
            value,
            blinding,
            value_point: Point::new(value),
            blinding_point: Point::new(blinding),
        }
    })
}

/// Pedersen commitment `value·G + blinding·H`, in constant time (the prover's secrets go through here).
pub fn commit(value: Scalar, blinding: Scalar) -> RistrettoPoint {
    let g = generators();
    RistrettoPoint::multiscalar_mul([value, blinding], [g.value, g.blinding])
}

/// A Fiat–Shamir challenge: SHA-512 of the domain and the parts, reduced modulo the group order.
pub fn hash_to_scalar(domain: &[u8], parts: &[&[u8]]) -> Scalar {
    let mut hasher = Sha512::new();
    hasher.update(domain);
    for part in parts {
        hasher.update(part);
    }
    Scalar::from_bytes_mod_order_wide(&hasher.finalize().into())
}

/// A canonical scalar from 32 bytes (below the group order), or `None`.
pub fn scalar_from_bytes(bytes: [u8; ELEMENT_BYTES]) -> Option<Scalar> {
    Option::from(Scalar::from_canonical_bytes(bytes))
}

/// One multi-scalar equation `Σ scalar·point + g·G + h·H == identity`, assembled term by term
/// (several proofs, each with its own random weight, add into one) and checked with one
/// variable-time multi-scalar multiplication: verification handles public data only.
#[derive(Default)]
pub struct Equation {
    scalars: Vec<Scalar>,
    points: Vec<RistrettoPoint>,
    g: Scalar,
    h: Scalar,
}

impl Equation {
    pub fn with_capacity(terms: usize) -> Equation {
        Equation {
            scalars: Vec::with_capacity(terms + 2),
            points: Vec::with_capacity(terms + 2),
            g: Scalar::ZERO,
            h: Scalar::ZERO,
        }
    }

    pub fn add(&mut self, scalar: Scalar, point: &Point) {
        self.scalars.push(scalar);
        self.points.push(point.point);
    }

    pub fn add_g(&mut self, scalar: Scalar) {
        self.g += scalar;
    }

    pub fn add_h(&mut self, scalar: Scalar) {
        self.h += scalar;
    }

    pub fn holds(mut self) -> bool {
        let g = generators();
        self.scalars.push(self.g);
        self.points.push(g.value);
        self.scalars.push(self.h);
        self.points.push(g.blinding);
        RistrettoPoint::vartime_multiscalar_mul(&self.scalars, &self.points).is_identity()
    }
}
