//! Range proofs: Bulletproofs+ (`tari_bulletproofs_plus`) over the limb commitments, one aggregated
//! proof per transfer. Every limb is proven in `[0, 2¹⁶)`, so each output, `Σ 2^(16j)·C_j`, commits
//! to a value in `[0, 2⁶⁴)`: the same 64 bits per output as a 64-bit proof, and what lets auditors
//! decrypt a limb by a small discrete log. Aggregation needs a power-of-two count of commitments; the
//! statement is padded with identity points (value 0, blinding 0), which the verifier adds the same way.

use std::sync::OnceLock;

use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use rand_core::CryptoRngCore;
use tari_bulletproofs_plus::commitment_opening::CommitmentOpening;
use tari_bulletproofs_plus::errors::ProofError;
use tari_bulletproofs_plus::generators::pedersen_gens::ExtensionDegree;
use tari_bulletproofs_plus::range_parameters::RangeParameters;
use tari_bulletproofs_plus::range_proof::{RangeProof, VerifyAction};
use tari_bulletproofs_plus::range_statement::RangeStatement;
use tari_bulletproofs_plus::range_witness::RangeWitness;
use tari_bulletproofs_plus::{PedersenGens, Transcript};

use crate::group::{generators, Point, ELEMENT_BYTES};
use crate::{LIMBS, LIMB_BITS, OUTPUTS_MAX};

/// The Merlin transcript label of every range proof; the statement digest is its first message.
pub const DOMAIN_RANGE: &[u8] = b"specie/confidential/range/v1";

/// Commitments one aggregated proof may cover (limbs, padded to a power of two).
pub const AGGREGATED_LIMBS_MAX: usize = (OUTPUTS_MAX * LIMBS).next_power_of_two();

/// Range proofs one call of the library's batch verifier checks: it verifies only the first 256 of a
/// longer batch (0.4.1, `verify_batch`), so longer batches are cut here.
pub const BATCH_PROOFS_MAX: usize = 256;

pub type Proof = RangeProof<RistrettoPoint>;

/// The Bulletproofs+ generators for 16-bit proofs of up to [`AGGREGATED_LIMBS_MAX`] commitments,
/// with our Pedersen generators (value `G`, blinding `H`) in place of the library's defaults.
fn parameters() -> &'static RangeParameters<RistrettoPoint> {
    static PARAMETERS: OnceLock<RangeParameters<RistrettoPoint>> = OnceLock::new();
    PARAMETERS.get_or_init(|| {
        let g = generators();
        let pedersen = PedersenGens {
            h_base: g.value,
            h_base_compressed: g.value.compress(),
            g_base_vec: vec![g.blinding],
            g_base_compressed_vec: vec![g.blinding.compress()],
            extension_degree: ExtensionDegree::DefaultPedersen,
        };
        RangeParameters::init(LIMB_BITS as usize, AGGREGATED_LIMBS_MAX, pedersen)
            .expect("16 bits and a power-of-two aggregation are valid parameters")
    })
}

/// The exact encoded size of the proof for `limbs` commitments: the extension byte, one `d1`
/// scalar, `A`, `A1`, `B`, `r1`, `s1`, and `log2(16 · padded)` pairs `(Lᵢ, Rᵢ)`.
pub fn proof_bytes(limbs: usize) -> usize {
    let bits = LIMB_BITS as usize * limbs.next_power_of_two();
    let rounds = bits.trailing_zeros() as usize;
    1 + ELEMENT_BYTES * (1 + 5 + 2 * rounds)
}

fn transcript(digest: &[u8; 32]) -> Transcript {
    let mut transcript = Transcript::new(DOMAIN_RANGE);
    transcript.append_message(b"statement", digest);
    transcript
}

fn statement(limbs: &[Point]) -> Result<RangeStatement<RistrettoPoint>, ProofError> {
    let padded = limbs.len().next_power_of_two();
    let mut commitments: Vec<RistrettoPoint> = limbs.iter().map(|p| p.point).collect();
    commitments.resize(padded, RistrettoPoint::default());
    RangeStatement::init(parameters().clone(), commitments, vec![None; padded], None)
}

/// An aggregated proof that every limb commitment opens to a 16-bit value.
pub fn prove(
    digest: &[u8; 32],
    limbs: &[Point],
    values: &[u16],
    blindings: &[Scalar],
    rng: &mut impl CryptoRngCore,
) -> Result<Proof, ProofError> {
    assert_eq!(limbs.len(), values.len(), "one value per limb");
    assert_eq!(limbs.len(), blindings.len(), "one blinding per limb");
    let padded = limbs.len().next_power_of_two();
    let mut openings: Vec<CommitmentOpening> = values
        .iter()
        .zip(blindings)
        .map(|(v, r)| CommitmentOpening::new(u64::from(*v), vec![*r]))
        .collect();
    openings.resize_with(padded, || CommitmentOpening::new(0, vec![Scalar::ZERO]));
    let witness = RangeWitness::init(openings)?;
    RangeProof::prove_with_rng(&mut transcript(digest), &statement(limbs)?, &witness, rng)
}

/// One transfer's range statement: its digest, its limbs and its proof.
pub struct Claim<'a> {
    pub digest: &'a [u8; 32],
    pub limbs: &'a [Point],
    pub proof: &'a Proof,
}

/// Whether every claim's proof verifies, in batches of at most [`BATCH_PROOFS_MAX`].
pub fn verify_batch(claims: &[Claim<'_>]) -> Result<(), ProofError> {
    for chunk in claims.chunks(BATCH_PROOFS_MAX) {
        let mut transcripts: Vec<Transcript> = chunk.iter().map(|c| transcript(c.digest)).collect();
        let statements = chunk
            .iter()
            .map(|c| statement(c.limbs))
            .collect::<Result<Vec<_>, _>>()?;
        let proofs: Vec<Proof> = chunk.iter().map(|c| c.proof.clone()).collect();
        RangeProof::verify_batch(&mut transcripts, &statements, &proofs, VerifyAction::VerifyOnly)?;
    }
    Ok(())
}
