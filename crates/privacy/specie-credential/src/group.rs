//! The groups (BLS12-381's G1, G2 and scalar field), the fixed generators every party derives from
//! the domain strings alone, the Fiat–Shamir challenge, and the canonical element encodings.

use std::sync::OnceLock;

use ark_bls12_381::{Bls12_381, Fr, G1Affine, G2Affine};
use ark_ec::AffineRepr;
use ark_ff::PrimeField;
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use bbs_plus::setup::SignatureParams23G1;
use dock_crypto_utils::hashing_utils::affine_group_elem_from_try_and_incr;
use sha2::{Digest, Sha256, Sha512};
use specie_codec::{DecodeError, Reader};

/// Bytes of a compressed G1 point.
pub const G1_BYTES: usize = 48;
/// Bytes of a compressed G2 point.
pub const G2_BYTES: usize = 96;
/// Bytes of a scalar (little-endian, below the group order).
pub const SCALAR_BYTES: usize = 32;

/// Label the BBS generators `g1`, `g2`, `h_1..h_3` are hashed from (bbs_plus's
/// `SignatureParams23G1::new::<Sha256>`, try-and-increment then cofactor clearing).
pub const DOMAIN_BBS_GENERATORS: &[u8] = b"specie/credential/bbs-generators/v1";
/// Prefix of the owner commitment's enrolment-id generator (hashed to G1 the same way).
pub const DOMAIN_OWNER_ID_GENERATOR: &[u8] = b"specie/credential/generator/v1/owner-id";
/// Prefix of the owner commitment's blinding generator.
pub const DOMAIN_OWNER_BLINDING_GENERATOR: &[u8] = b"specie/credential/generator/v1/owner-blinding";
/// Prefix of the auditors' ElGamal base.
pub const DOMAIN_AUDITOR_GENERATOR: &[u8] = b"specie/credential/generator/v1/auditor";

/// Attributes in a credential, in signing order: the user secret, the enrolment id, the jurisdiction.
pub const CREDENTIAL_ATTRIBUTES: u32 = 3;
pub(crate) const ATTRIBUTE_SECRET: usize = 0;
pub(crate) const ATTRIBUTE_ENROLMENT_ID: usize = 1;

pub(crate) type Pairing = Bls12_381;
pub(crate) type Scalar = Fr;
pub(crate) type G1 = G1Affine;
pub(crate) type G2 = G2Affine;

/// Every fixed generator. Deriving them costs a few hash-to-curve tries, so they are derived once.
pub(crate) struct Generators {
    pub bbs: SignatureParams23G1<Pairing>,
    pub owner_id: G1,
    pub owner_blinding: G1,
    pub auditor: G1,
}

pub(crate) fn generators() -> &'static Generators {
    static GENERATORS: OnceLock<Generators> = OnceLock::new();
    GENERATORS.get_or_init(|| Generators {
        bbs: SignatureParams23G1::new::<Sha256>(DOMAIN_BBS_GENERATORS, CREDENTIAL_ATTRIBUTES),
        owner_id: affine_group_elem_from_try_and_incr::<G1, Sha256>(DOMAIN_OWNER_ID_GENERATOR),
        owner_blinding: affine_group_elem_from_try_and_incr::<G1, Sha256>(DOMAIN_OWNER_BLINDING_GENERATOR),
        auditor: affine_group_elem_from_try_and_incr::<G1, Sha256>(DOMAIN_AUDITOR_GENERATOR),
    })
}

/// The fixed generators' compressed encodings, by name (for the vectors and the format document).
pub fn generator_encodings() -> Vec<(String, Vec<u8>)> {
    let g = generators();
    let mut named = vec![
        ("bbs_g1".to_string(), compressed(&g.bbs.g1)),
        ("bbs_g2".to_string(), compressed(&g.bbs.g2)),
    ];
    for (i, h) in g.bbs.h.iter().enumerate() {
        named.push((format!("bbs_h{}", i + 1), compressed(h)));
    }
    named.push(("owner_id".to_string(), compressed(&g.owner_id)));
    named.push(("owner_blinding".to_string(), compressed(&g.owner_blinding)));
    named.push(("auditor".to_string(), compressed(&g.auditor)));
    named
}

/// A Fiat–Shamir transcript: SHA-512 over a domain and the statement, reduced to a scalar (64
/// bytes, so the reduction's bias is negligible).
pub(crate) struct Transcript(Sha512);

impl Transcript {
    pub fn new(domain: &[u8]) -> Transcript {
        let mut hash = Sha512::new();
        hash.update((domain.len() as u64).to_le_bytes());
        hash.update(domain);
        Transcript(hash)
    }

    pub fn bytes(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn point<P: CanonicalSerialize>(&mut self, point: &P) {
        self.0.update(compressed(point));
    }

    pub fn challenge(self) -> Scalar {
        Scalar::from_le_bytes_mod_order(&self.0.finalize())
    }

    /// The writer the library's `challenge_contribution` functions serialize into.
    pub fn writer(&mut self) -> TranscriptWriter<'_> {
        TranscriptWriter(&mut self.0)
    }
}

pub(crate) struct TranscriptWriter<'a>(&'a mut Sha512);

impl std::io::Write for TranscriptWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The compressed encoding of a point or scalar.
pub(crate) fn compressed<P: CanonicalSerialize>(value: &P) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.compressed_size());
    value
        .serialize_compressed(&mut out)
        .expect("serializing into a Vec cannot fail");
    out
}

pub(crate) fn put<P: CanonicalSerialize>(out: &mut Vec<u8>, value: &P) {
    value
        .serialize_compressed(out)
        .expect("serializing into a Vec cannot fail");
}

/// Reads `len` bytes as `T`, refusing what the library refuses (off the curve, outside the
/// prime-order subgroup, a scalar at least the order) and whatever does not re-encode to the same
/// bytes, so that every element has exactly one encoding.
pub(crate) fn read_canonical<T: CanonicalSerialize + CanonicalDeserialize>(
    reader: &mut Reader<'_>,
    what: &'static str,
    len: usize,
) -> Result<T, DecodeError> {
    let bytes = reader.read_bytes(what, len)?;
    let value = T::deserialize_compressed(bytes).map_err(|e| DecodeError::Invalid {
        what,
        reason: format!("not a valid element: {e}"),
    })?;
    if compressed(&value) != bytes {
        return Err(DecodeError::NonCanonical {
            what,
            reason: "does not re-encode to the same bytes",
        });
    }
    Ok(value)
}

/// A G1 point other than the identity (no honest encoding carries the identity, and refusing it
/// keeps degenerate statements out of every verifier).
pub(crate) fn read_g1(reader: &mut Reader<'_>, what: &'static str) -> Result<G1, DecodeError> {
    let point: G1 = read_canonical(reader, what, G1_BYTES)?;
    if point.is_zero() {
        return Err(DecodeError::Invalid {
            what,
            reason: "the identity point".into(),
        });
    }
    Ok(point)
}

pub(crate) fn read_g2(reader: &mut Reader<'_>, what: &'static str) -> Result<G2, DecodeError> {
    let point: G2 = read_canonical(reader, what, G2_BYTES)?;
    if point.is_zero() {
        return Err(DecodeError::Invalid {
            what,
            reason: "the identity point".into(),
        });
    }
    Ok(point)
}

pub(crate) fn read_scalar(reader: &mut Reader<'_>, what: &'static str) -> Result<Scalar, DecodeError> {
    read_canonical(reader, what, SCALAR_BYTES)
}

/// Reads the version and kind bytes every encoding starts with.
pub(crate) fn read_header(reader: &mut Reader<'_>, what: &'static str, kind: u8) -> Result<(), DecodeError> {
    reader.read_version(what, crate::FORMAT_VERSION)?;
    match reader.read_u8(what)? {
        found if found == kind => Ok(()),
        found => Err(DecodeError::UnknownKind { what, kind: found }),
    }
}

pub(crate) fn put_header(out: &mut Vec<u8>, kind: u8) {
    out.push(crate::FORMAT_VERSION);
    out.push(kind);
}
