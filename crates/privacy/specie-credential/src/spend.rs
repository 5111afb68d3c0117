//! The spend proof (Fabric CBDC Appendix B.1's signature of knowledge σ): proves, bound to a 32-byte
//! message (the transaction digest), knowledge of
//!
//! * a BBS signature of the RA over `(sk, eid, jurisdiction)` (bbs_plus's proof of knowledge, the
//!   IETF draft's variant, all three attributes hidden), and
//! * an opening `(eid, t)` of the spent output's owner commitment `C = eid·G_id + t·G_blind`,
//!
//! with the same `eid`: the BBS protocol is given the blinding of `eid` that the commitment row
//! uses, so both produce one response for it, and the proof carries that response once. Each
//! optional auditor ciphertext adds two rows sharing the same response. One Fiat–Shamir challenge
//! covers all rows.

use std::collections::BTreeMap;

use ark_ec::pairing::Pairing as _;
use ark_ec::{AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{PrimeField, UniformRand, Zero};
use bbs_plus::proof_23_ietf::{PoKOfSignature23G1Proof, PoKOfSignature23G1Protocol};
use bbs_plus::setup::PreparedPublicKeyG2;
use dock_crypto_utils::signature::MessageOrBlinding;
use rand_core::{CryptoRng, RngCore};
use schnorr_pok::{SchnorrCommitment, SchnorrResponse};
use sha2::{Digest, Sha512};

use crate::authority::{Identity, RaPublicKey};
use crate::error::{BatchError, ProveError, VerifyError};
use crate::group::{compressed, generators, Pairing, Scalar, Transcript, ATTRIBUTE_ENROLMENT_ID, G1};
use crate::owner::{AuditorKey, CiphertextLink, CiphertextLinkProver, OwnerCiphertext, OwnerCommitment, OwnerOpening};
use crate::AUDITORS_MAX;

/// Prefix of the spend proof's challenge.
pub const DOMAIN_SPEND: &[u8] = b"specie/credential/spend/v1";
/// Prefix of the batch verifier's weights.
pub const DOMAIN_BATCH_WEIGHTS: &[u8] = b"specie/credential/batch-weights/v1";

/// Responses of the BBS part: the three attributes, then the two randomisation witnesses.
pub(crate) const SIGNATURE_RESPONSES: usize = 5;

/// A signature of knowledge authorising the spend of one output, for one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpendProof {
    pub(crate) signature: PoKOfSignature23G1Proof<Pairing>,
    pub(crate) owner_nonce: G1,
    pub(crate) blinding_response: Scalar,
    pub(crate) auditors: Vec<CiphertextLink>,
}

fn spend_transcript(
    authority: &RaPublicKey,
    owner: &OwnerCommitment,
    message: &[u8; 32],
    signature_contribution: impl FnOnce(&mut Transcript),
    owner_nonce: &G1,
) -> Transcript {
    let mut transcript = Transcript::new(DOMAIN_SPEND);
    transcript.point(&authority.0);
    transcript.point(&owner.0);
    transcript.bytes(message);
    signature_contribution(&mut transcript);
    transcript.point(owner_nonce);
    transcript
}

impl Identity {
    /// Proves that this identity owns the output committed by `opening` and authorises `message`;
    /// `auditors` (strictly ascending keys, at most [`AUDITORS_MAX`]) each get the owner's id encrypted.
    pub fn prove_spend(
        &self,
        authority: &RaPublicKey,
        opening: &OwnerOpening,
        message: &[u8; 32],
        auditors: &[AuditorKey],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SpendProof, ProveError> {
        if opening.enrolment_id != self.credential.enrolment_id {
            return Err(ProveError::NotTheOwner);
        }
        check_auditors(auditors).map_err(|_| ProveError::Auditors)?;
        let g = generators();
        let eid = self.credential.enrolment_id.scalar();
        let jurisdiction = self.credential.jurisdiction.scalar();
        let eid_blinding = Scalar::rand(rng);
        let attributes = [
            MessageOrBlinding::BlindMessageRandomly(&self.secret.0),
            MessageOrBlinding::blind_message_with(&eid, eid_blinding),
            MessageOrBlinding::BlindMessageRandomly(&jurisdiction),
        ];
        let protocol = PoKOfSignature23G1Protocol::init(rng, &self.credential.signature, &g.bbs, attributes)
            .map_err(|e| ProveError::Library(format!("{e:?}")))?;
        let owner_row = SchnorrCommitment::new(&[g.owner_id, g.owner_blinding], vec![eid_blinding, Scalar::rand(rng)]);
        let links: Vec<CiphertextLinkProver> = auditors
            .iter()
            .map(|key| CiphertextLinkProver::new(*key, self.credential.enrolment_id, eid_blinding, rng))
            .collect();
        let no_revealed = BTreeMap::new();
        let mut transcript = spend_transcript(
            authority,
            &opening.commitment(),
            message,
            |t| {
                protocol
                    .challenge_contribution(&no_revealed, &g.bbs, t.writer())
                    .expect("writing into a hash cannot fail")
            },
            &owner_row.t,
        );
        absorb_count(&mut transcript, links.len());
        links.iter().for_each(|link| link.absorb(&mut transcript));
        let challenge = transcript.challenge();
        let signature = protocol
            .gen_proof(&challenge)
            .map_err(|e| ProveError::Library(format!("{e:?}")))?;
        let owner_responses = owner_row
            .response(&[eid, opening.blinding], &challenge)
            .expect("two witnesses for two blindings");
        Ok(SpendProof {
            signature,
            owner_nonce: owner_row.t,
            blinding_response: owner_responses.0[1],
            auditors: links.into_iter().map(|link| link.finish(&challenge)).collect(),
        })
    }
}

fn absorb_count(transcript: &mut Transcript, count: usize) {
    transcript.bytes(&[count as u8]);
}

/// Auditor keys must be strictly ascending (one canonical order, no duplicates) and few.
pub(crate) fn check_auditors(auditors: &[AuditorKey]) -> Result<(), VerifyError> {
    if auditors.len() > AUDITORS_MAX {
        return Err(VerifyError::TooManyAuditors);
    }
    if auditors.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(VerifyError::AuditorsNotAscending);
    }
    Ok(())
}

impl SpendProof {
    /// The ciphertexts of the spender's id, one per auditor, in ascending key order.
    pub fn auditor_ciphertexts(&self) -> Vec<OwnerCiphertext> {
        self.auditors.iter().map(|link| link.ciphertext).collect()
    }

    fn challenge(&self, authority: &RaPublicKey, owner: &OwnerCommitment, message: &[u8; 32]) -> Scalar {
        let g = generators();
        let mut transcript = spend_transcript(
            authority,
            owner,
            message,
            |t| {
                self.signature
                    .challenge_contribution(&BTreeMap::new(), &g.bbs, t.writer())
                    .expect("writing into a hash cannot fail")
            },
            &self.owner_nonce,
        );
        absorb_count(&mut transcript, self.auditors.len());
        self.auditors.iter().for_each(|link| link.absorb(&mut transcript));
        transcript.challenge()
    }

    /// Everything but the pairing equation `e(Ā, pk) = e(B̄, g2)`, which [`SpendProof::verify`]
    /// checks alone and [`verify_batch`] folds across proofs. Returns the challenge.
    fn verify_except_pairing(
        &self,
        authority: &RaPublicKey,
        owner: &OwnerCommitment,
        message: &[u8; 32],
    ) -> Result<Scalar, VerifyError> {
        let g = generators();
        let keys: Vec<AuditorKey> = self.auditors.iter().map(|link| link.ciphertext.auditor).collect();
        check_auditors(&keys)?;
        if self.signature.A_bar.is_zero() {
            return Err(VerifyError::Signature);
        }
        let challenge = self.challenge(authority, owner, message);
        self.signature
            .verify_schnorr_proofs(&BTreeMap::new(), &challenge, g.bbs.g1, g.bbs.h.clone(), None)
            .map_err(|_| VerifyError::Signature)?;
        let eid_response = *self
            .signature
            .get_resp_for_message(ATTRIBUTE_ENROLMENT_ID, &Default::default())
            .map_err(|_| VerifyError::Signature)?;
        let owner_row = SchnorrResponse::<G1>(vec![eid_response, self.blinding_response]);
        owner_row
            .is_valid(&[g.owner_id, g.owner_blinding], &owner.0, &self.owner_nonce, &challenge)
            .map_err(|_| VerifyError::OwnerLink)?;
        for (index, link) in self.auditors.iter().enumerate() {
            if !link.holds(eid_response, &challenge) {
                return Err(VerifyError::AuditorLink { index });
            }
        }
        Ok(challenge)
    }

    /// Verifies the proof for this owner commitment and message under the RA's key.
    pub fn verify(
        &self,
        authority: &RaPublicKey,
        owner: &OwnerCommitment,
        message: &[u8; 32],
    ) -> Result<(), VerifyError> {
        self.verify_except_pairing(authority, owner, message)?;
        let prepared = PreparedPublicKeyG2::from(authority.bbs());
        if signature_pairing_holds(&self.signature.A_bar, &self.signature.B_bar, prepared) {
            Ok(())
        } else {
            Err(VerifyError::Signature)
        }
    }
}

fn signature_pairing_holds(a_bar: &G1, b_bar: &G1, authority: PreparedPublicKeyG2<Pairing>) -> bool {
    let g2 = generators().bbs.g2;
    Pairing::multi_pairing([*a_bar, (-b_bar.into_group()).into_affine()], [authority.0, g2.into()]).is_zero()
}

/// One item of a batch: the proof, the owner commitment of the output it spends, and the message.
pub type SpendItem<'a> = (&'a SpendProof, &'a OwnerCommitment, &'a [u8; 32]);

/// Verifies several spend proofs under one RA key. The Schnorr rows are checked one by one (cheap
/// multi-scalar multiplications); the pairing equations, which dominate, are folded into one:
/// `e(Σ ρ_i·Ā_i, pk) = e(Σ ρ_i·B̄_i, g2)` with 128-bit weights `ρ_i` hashed from every challenge, so
/// a prover cannot choose proofs whose errors cancel. On failure the pairings are rechecked one by
/// one to name the culprit.
pub fn verify_batch(authority: &RaPublicKey, items: &[SpendItem<'_>]) -> Result<(), BatchError> {
    let mut challenges = Vec::with_capacity(items.len());
    for (index, (proof, owner, message)) in items.iter().enumerate() {
        let challenge = proof
            .verify_except_pairing(authority, owner, message)
            .map_err(|source| BatchError::Proof { index, source })?;
        challenges.push(challenge);
    }
    if items.is_empty() {
        return Ok(());
    }
    let weights = batch_weights(&challenges);
    let a_bars: Vec<G1> = items.iter().map(|(proof, _, _)| proof.signature.A_bar).collect();
    let b_bars: Vec<G1> = items.iter().map(|(proof, _, _)| proof.signature.B_bar).collect();
    let a_sum = <Pairing as ark_ec::pairing::Pairing>::G1::msm_unchecked(&a_bars, &weights).into_affine();
    let b_sum = <Pairing as ark_ec::pairing::Pairing>::G1::msm_unchecked(&b_bars, &weights).into_affine();
    let prepared = PreparedPublicKeyG2::from(authority.bbs());
    if signature_pairing_holds(&a_sum, &b_sum, prepared.clone()) {
        return Ok(());
    }
    let index = items
        .iter()
        .position(|(proof, _, _)| {
            !signature_pairing_holds(&proof.signature.A_bar, &proof.signature.B_bar, prepared.clone())
        })
        .unwrap_or(0);
    Err(BatchError::Proof {
        index,
        source: VerifyError::Signature,
    })
}

/// ρ_i = first 16 bytes of SHA-512(domain ‖ c_1 ‖ … ‖ c_n ‖ i), little-endian.
fn batch_weights(challenges: &[Scalar]) -> Vec<Scalar> {
    let mut seed = Sha512::new();
    seed.update(DOMAIN_BATCH_WEIGHTS);
    challenges.iter().for_each(|c| seed.update(compressed(c)));
    (0..challenges.len() as u64)
        .map(|index| {
            let mut hash = seed.clone();
            hash.update(index.to_le_bytes());
            Scalar::from_le_bytes_mod_order(&hash.finalize()[..16])
        })
        .collect()
}
