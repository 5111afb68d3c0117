//! The confidential transfer: what a wallet proves and a sentinel verifies.

use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::VartimeMultiscalarMul;
use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};

use crate::auditor::{AuditorKey, AuditorSecret};
use crate::error::{AuditError, BatchError, ProveError, VerifyError};
use crate::group::{commit, hash_to_scalar, Equation, Point};
use crate::range;
use crate::sigma::{BalanceProof, ValidityProof};
use crate::{AUDITORS_MAX, INPUTS_MAX, LIMBS, LIMB_BITS, OUTPUTS_MAX};

/// Domain of the verifier's batch weights.
pub const DOMAIN_WEIGHTS: &[u8] = b"specie/confidential/batch-weights/v1";

/// A value and the blinding that commit to it: what an output's owner keeps to spend it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    pub value: u64,
    pub blinding: Scalar,
}

impl Opening {
    pub fn random(value: u64, rng: &mut impl CryptoRngCore) -> Opening {
        Opening {
            value,
            blinding: Scalar::random(rng),
        }
    }

    /// The commitment `value·G + blinding·H`.
    pub fn commitment(&self) -> Point {
        Point::new(commit(Scalar::from(self.value), self.blinding))
    }
}

/// What a wallet asks to prove: spend `inputs` (whose openings it holds) into outputs of the given
/// values, with `public_in` entering in clear (a mint) and `public_out` leaving in clear (a fee or a
/// redeem), readable by `auditors`, for the enclosing transaction whose other parts hash to `context`.
#[derive(Clone, Debug)]
pub struct TransferPlan {
    pub context: [u8; 32],
    pub inputs: Vec<Opening>,
    pub outputs: Vec<u64>,
    pub public_in: u64,
    pub public_out: u64,
    pub auditors: Vec<AuditorKey>,
}

/// The public statement of a transfer: everything but the proofs. Its digest binds the proofs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Statement {
    pub public_in: u64,
    pub public_out: u64,
    /// Commitments of the spent outputs.
    pub inputs: Vec<Point>,
    /// Limb commitments, output by output, `LIMBS` each, least significant first.
    pub limbs: Vec<Point>,
    /// Auditors in ascending key order, each with one handle per limb.
    pub auditors: Vec<AuditorEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AuditorEntry {
    pub key: AuditorKey,
    pub handles: Vec<Point>,
}

/// A confidential transfer: commitments, auditors' ciphertexts, and the three proofs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfidentialTransfer {
    pub(crate) statement: Statement,
    pub(crate) balance: BalanceProof,
    pub(crate) validity: ValidityProof,
    pub(crate) range: RangeProofBytes,
}

/// A range proof with its encoding (the library's type has no `PartialEq`).
#[derive(Clone, Debug)]
pub(crate) struct RangeProofBytes {
    pub proof: range::Proof,
    pub bytes: Vec<u8>,
}

impl PartialEq for RangeProofBytes {
    fn eq(&self, other: &RangeProofBytes) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for RangeProofBytes {}

/// The secrets behind a statement's limbs: what the proofs are made from.
pub(crate) struct LimbSecrets {
    pub values: Vec<Scalar>,
    pub blindings: Vec<Scalar>,
}

/// `2^(16j)` for limb `j` of an output.
pub(crate) fn limb_weight(j: usize) -> Scalar {
    Scalar::from(1u64 << (LIMB_BITS as usize * j))
}

impl Statement {
    /// Limb commitments and every auditor's handles for the given limb secrets.
    pub fn new(public: (u64, u64), inputs: Vec<Point>, secrets: &LimbSecrets, keys: &[AuditorKey]) -> Statement {
        let limbs = secrets
            .values
            .iter()
            .zip(&secrets.blindings)
            .map(|(v, r)| Point::new(commit(*v, *r)))
            .collect();
        let auditors = keys
            .iter()
            .map(|key| AuditorEntry {
                key: *key,
                handles: secrets.blindings.iter().map(|r| Point::new(r * key.0.point)).collect(),
            })
            .collect();
        Statement {
            public_in: public.0,
            public_out: public.1,
            inputs,
            limbs,
            auditors,
        }
    }

    pub fn outputs(&self) -> usize {
        self.limbs.len() / LIMBS
    }

    /// SHA-256(domain ‖ context ‖ statement encoding): what every proof is bound to.
    pub fn digest(&self, context: &[u8; 32]) -> [u8; 32] {
        let mut bytes = Vec::with_capacity(crate::codec::statement_bytes(self));
        self.encode_to(&mut bytes);
        Sha256::new()
            .chain_update(crate::codec::DOMAIN_STATEMENT)
            .chain_update(context)
            .chain_update(&bytes)
            .finalize()
            .into()
    }

    fn keys(&self) -> Vec<AuditorKey> {
        self.auditors.iter().map(|a| a.key).collect()
    }
}

/// Checks the plan's counts and balance, and returns its auditors in canonical (ascending) order.
fn check_plan(plan: &TransferPlan) -> Result<Vec<AuditorKey>, ProveError> {
    if plan.inputs.len() > INPUTS_MAX {
        return Err(ProveError::TooManyInputs {
            count: plan.inputs.len(),
            max: INPUTS_MAX,
        });
    }
    if plan.outputs.is_empty() {
        return Err(ProveError::NoOutputs);
    }
    if plan.outputs.len() > OUTPUTS_MAX {
        return Err(ProveError::TooManyOutputs {
            count: plan.outputs.len(),
            max: OUTPUTS_MAX,
        });
    }
    if plan.auditors.len() > AUDITORS_MAX {
        return Err(ProveError::TooManyAuditors {
            count: plan.auditors.len(),
            max: AUDITORS_MAX,
        });
    }
    let mut keys = plan.auditors.clone();
    keys.sort_by_key(|k| k.to_bytes());
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err(ProveError::DuplicateAuditor);
    }
    // u128: at most 16 inputs of 2⁶⁴ plus one public amount cannot overflow.
    let incoming: u128 = plan.inputs.iter().map(|i| u128::from(i.value)).sum::<u128>() + u128::from(plan.public_in);
    let outgoing: u128 = plan.outputs.iter().map(|v| u128::from(*v)).sum::<u128>() + u128::from(plan.public_out);
    if incoming != outgoing {
        return Err(ProveError::Unbalanced { incoming, outgoing });
    }
    Ok(keys)
}

/// The blinding of the whole output `o`: `Σ 2^(16j)·r_j`.
fn output_blinding(blindings: &[Scalar], o: usize) -> Scalar {
    (0..LIMBS).map(|j| limb_weight(j) * blindings[o * LIMBS + j]).sum()
}

/// `x` with `Σ C_in + public_in·G − Σ C_out − public_out·G = x·H`.
pub(crate) fn excess_blinding(inputs: &[Opening], blindings: &[Scalar]) -> Scalar {
    let outputs = blindings.len() / LIMBS;
    let spent: Scalar = inputs.iter().map(|i| i.blinding).sum();
    let created: Scalar = (0..outputs).map(|o| output_blinding(blindings, o)).sum();
    spent - created
}

impl ConfidentialTransfer {
    /// Proves `plan`: returns the transfer and each output's opening (for its payee).
    pub fn prove(
        plan: &TransferPlan,
        rng: &mut impl CryptoRngCore,
    ) -> Result<(ConfidentialTransfer, Vec<Opening>), ProveError> {
        let keys = check_plan(plan)?;
        let mut limb_values = Vec::with_capacity(plan.outputs.len() * LIMBS);
        for value in &plan.outputs {
            limb_values.extend((0..LIMBS).map(|j| (value >> (LIMB_BITS as usize * j)) as u16));
        }
        let secrets = LimbSecrets {
            values: limb_values.iter().map(|v| Scalar::from(*v)).collect(),
            blindings: limb_values.iter().map(|_| Scalar::random(rng)).collect(),
        };
        let inputs = plan.inputs.iter().map(Opening::commitment).collect();
        let statement = Statement::new((plan.public_in, plan.public_out), inputs, &secrets, &keys);
        let digest = statement.digest(&plan.context);
        let range = range::prove(&digest, &statement.limbs, &limb_values, &secrets.blindings, rng)
            .map_err(|e| ProveError::RangeProof { reason: e.to_string() })?;
        let transfer = ConfidentialTransfer::with_sigma_proofs(statement, &digest, &plan.inputs, &secrets, range, rng);
        let openings = (0..plan.outputs.len())
            .map(|o| Opening {
                value: plan.outputs[o],
                blinding: output_blinding(&secrets.blindings, o),
            })
            .collect();
        Ok((transfer, openings))
    }

    /// Completes a statement with its balance and validity proofs and a range proof.
    pub(crate) fn with_sigma_proofs(
        statement: Statement,
        digest: &[u8; 32],
        inputs: &[Opening],
        secrets: &LimbSecrets,
        range: range::Proof,
        rng: &mut impl CryptoRngCore,
    ) -> ConfidentialTransfer {
        let balance = BalanceProof::prove(digest, excess_blinding(inputs, &secrets.blindings), rng);
        let keys = statement.keys();
        let validity = ValidityProof::prove(digest, &secrets.values, &secrets.blindings, &keys, rng);
        let bytes = range.to_bytes();
        ConfidentialTransfer {
            statement,
            balance,
            validity,
            range: RangeProofBytes { proof: range, bytes },
        }
    }

    /// Verifies the transfer for the enclosing transaction whose other parts hash to `context`.
    pub fn verify(&self, context: &[u8; 32]) -> Result<(), VerifyError> {
        verify_batch(&[(self, *context)]).map_err(|e| e.error)
    }

    pub fn public_in(&self) -> u64 {
        self.statement.public_in
    }

    pub fn public_out(&self) -> u64 {
        self.statement.public_out
    }

    /// The commitments of the spent outputs, as the transfer states them (the caller checks that
    /// they are the ones its inputs reference).
    pub fn input_commitments(&self) -> &[Point] {
        &self.statement.inputs
    }

    /// Each output's commitment `Σ 2^(16j)·C_j`: what the output's identifier commits to.
    pub fn output_commitments(&self) -> Vec<Point> {
        let weights: Vec<Scalar> = (0..LIMBS).map(limb_weight).collect();
        self.statement
            .limbs
            .chunks(LIMBS)
            .map(|limbs| {
                let points = limbs.iter().map(|l| l.point);
                Point::new(RistrettoPoint::vartime_multiscalar_mul(&weights, points))
            })
            .collect()
    }

    /// How many outputs the transfer creates, without computing their commitments.
    pub fn output_count(&self) -> usize {
        self.statement.limbs.len() / LIMBS
    }

    pub fn auditors(&self) -> Vec<AuditorKey> {
        self.statement.keys()
    }

    /// The statement digest for `context`: what the proofs are bound to.
    pub fn digest(&self, context: &[u8; 32]) -> [u8; 32] {
        self.statement.digest(context)
    }

    /// The value of every output, as `auditor` decrypts it. Meaningful for a transfer that verified:
    /// then each value is the one committed.
    pub fn audit(&self, auditor: &AuditorSecret) -> Result<Vec<u64>, AuditError> {
        let entry = self
            .statement
            .auditors
            .iter()
            .find(|a| a.key == auditor.public())
            .ok_or(AuditError::NotAddressed)?;
        let limbs = self.statement.limbs.chunks_exact(LIMBS);
        let handles = entry.handles.chunks_exact(LIMBS);
        limbs
            .zip(handles)
            .enumerate()
            .map(|(output, (limbs, handles))| {
                let (limbs, handles) = (limbs.try_into().expect("LIMBS"), handles.try_into().expect("LIMBS"));
                auditor
                    .decrypt_value(limbs, handles)
                    .ok_or(AuditError::Undecryptable { output })
            })
            .collect()
    }

    /// Adds this transfer's weighted balance and validity equations to `equation`.
    pub(crate) fn add_sigma_terms(&self, digest: &[u8; 32], weights: &[Scalar], equation: &mut Equation) {
        let s = &self.statement;
        assert_eq!(
            weights.len(),
            2 + s.auditors.len(),
            "balance, validity and one per auditor"
        );
        let factor = self.balance.add_terms(digest, weights[0], equation);
        for input in &s.inputs {
            equation.add(factor, input);
        }
        equation.add_g(factor * (Scalar::from(s.public_in) - Scalar::from(s.public_out)));
        let mut limb_factors: Vec<Scalar> = (0..s.limbs.len()).map(|i| -factor * limb_weight(i % LIMBS)).collect();
        let keys = s.keys();
        let handles: Vec<&[Point]> = s.auditors.iter().map(|a| &a.handles[..]).collect();
        self.validity
            .add_terms(digest, &weights[1..], &keys, &handles, &mut limb_factors, equation);
        for (factor, limb) in limb_factors.iter().zip(&s.limbs) {
            equation.add(*factor, limb);
        }
    }

    fn sigma_terms(&self) -> usize {
        let s = &self.statement;
        2 + s.inputs.len() + s.limbs.len() + s.auditors.len() * (2 + s.limbs.len())
    }

    /// Whether the balance (`balance`) or validity (`!balance`) equation alone holds: names the
    /// failing proof after a combined check failed.
    pub(crate) fn sigma_part_holds(&self, digest: &[u8; 32], balance: bool) -> bool {
        let mut weights = vec![Scalar::ZERO; 2 + self.statement.auditors.len()];
        if balance {
            weights[0] = Scalar::ONE;
        } else {
            weights[1..].iter_mut().enumerate().for_each(|(i, w)| {
                *w = hash_to_scalar(DOMAIN_WEIGHTS, &[digest, &(i as u64).to_le_bytes()]);
            });
        }
        let mut equation = Equation::with_capacity(self.sigma_terms());
        self.add_sigma_terms(digest, &weights, &mut equation);
        equation.holds()
    }

    /// This transfer alone, with its failing proof named.
    fn verify_alone(&self, digest: &[u8; 32]) -> Result<(), VerifyError> {
        if !self.sigma_part_holds(digest, true) {
            return Err(VerifyError::Balance);
        }
        if !self.sigma_part_holds(digest, false) {
            return Err(VerifyError::AuditorValidity);
        }
        let claim = self.range_claim(digest);
        range::verify_batch(&[claim]).map_err(|e| VerifyError::Range { reason: e.to_string() })
    }

    fn range_claim<'a>(&'a self, digest: &'a [u8; 32]) -> range::Claim<'a> {
        range::Claim {
            digest,
            limbs: &self.statement.limbs,
            proof: &self.range.proof,
        }
    }

    /// The bytes of the proofs the batch weights are derived from (everything the prover chose).
    fn proof_transcript(&self, out: &mut Vec<u8>) {
        crate::codec::encode_proofs(self, out);
    }
}

/// Verifies every `(transfer, context)` of a batch: one multi-scalar check for all balance and
/// validity proofs and one batched Bulletproofs+ check. If the batch fails, each transfer is checked
/// alone to name the first that does not verify.
pub fn verify_batch(batch: &[(&ConfidentialTransfer, [u8; 32])]) -> Result<(), BatchError> {
    let digests: Vec<[u8; 32]> = batch.iter().map(|(t, context)| t.digest(context)).collect();
    if batch_holds(batch, &digests) {
        return Ok(());
    }
    for (index, ((transfer, _), digest)) in batch.iter().zip(&digests).enumerate() {
        transfer
            .verify_alone(digest)
            .map_err(|error| BatchError { index, error })?;
    }
    // The combined check failed but every transfer verifies alone: the weights cancelled an error,
    // which has probability 2⁻²⁵². Treat it as a failure of the first.
    Err(BatchError {
        index: 0,
        error: VerifyError::Balance,
    })
}

fn batch_holds(batch: &[(&ConfidentialTransfer, [u8; 32])], digests: &[[u8; 32]]) -> bool {
    if batch.is_empty() {
        return true;
    }
    // Weights: hash of every digest and every proof, so no prover can choose them.
    let mut transcript = Vec::new();
    for ((transfer, _), digest) in batch.iter().zip(digests) {
        transcript.extend_from_slice(digest);
        transfer.proof_transcript(&mut transcript);
    }
    let seed: [u8; 32] = Sha256::new()
        .chain_update(DOMAIN_WEIGHTS)
        .chain_update(&transcript)
        .finalize()
        .into();
    let terms = batch.iter().map(|(t, _)| t.sigma_terms()).sum();
    let mut equation = Equation::with_capacity(terms);
    for (k, ((transfer, _), digest)) in batch.iter().zip(digests).enumerate() {
        let weights: Vec<Scalar> = (0..2 + transfer.statement.auditors.len())
            .map(|e| {
                hash_to_scalar(
                    DOMAIN_WEIGHTS,
                    &[&seed, &(k as u64).to_le_bytes(), &(e as u64).to_le_bytes()],
                )
            })
            .collect();
        transfer.add_sigma_terms(digest, &weights, &mut equation);
    }
    if !equation.holds() {
        return false;
    }
    let claims: Vec<range::Claim<'_>> = batch.iter().zip(digests).map(|((t, _), d)| t.range_claim(d)).collect();
    range::verify_batch(&claims).is_ok()
}
