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
use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::{PrimeField, UniformRand, Zero};
use bbs_plus::proof_23_ietf::{PoKOfSignature23G1Proof, PoKOfSignature23G1Protocol};
use bbs_plus::setup::PreparedPublicKeyG2;
use dock_crypto_utils::signature::MessageOrBlinding;
use rand_core::{CryptoRng, RngCore};
use schnorr_pok::{SchnorrCommitment, SchnorrResponse};
use sha2::{Digest, Sha512};

use crate::authority::{Identity, RaPublicKey};
use crate::batch::Checks;
use crate::error::{BatchError, ProveError, VerifyError};
use crate::group::{compressed, generators, Pairing, Scalar, Transcript, ATTRIBUTE_ENROLMENT_ID, G1};
use crate::owner::{
    AuditorKey, CiphertextLink, CiphertextLinkProver, OwnerAudit, OwnerCiphertext, OwnerCommitment, OwnerOpening,
};

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

    /// Everything but the pairing equation `e(Ā, pk) = e(B̄, g2)`, row by row. Returns the
    /// challenge.
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

    /// Verifies the proof for this owner commitment and message under the RA's key (a batch of
    /// one; if it fails, checked row by row to say why).
    pub fn verify(
        &self,
        authority: &RaPublicKey,
        owner: &OwnerCommitment,
        message: &[u8; 32],
    ) -> Result<(), VerifyError> {
        verify_batch(authority, &[(self, owner, message)]).map_err(|error| match error {
            BatchError::Proof { source, .. } | BatchError::Audit { source, .. } => source,
        })
    }

    /// The proof checked row by row, each equation on its own: what names a failure.
    fn verify_alone(
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
/// An owner audit with the owner commitment and the context it is proven for.
pub type AuditItem<'a> = (&'a OwnerAudit, &'a OwnerCommitment, &'a [u8; 32]);

/// Verifies several spend proofs under one RA key ([`verify_batch_with_audits`] without audits).
pub fn verify_batch(authority: &RaPublicKey, items: &[SpendItem<'_>]) -> Result<(), BatchError> {
    verify_batch_with_audits(authority, items, &[])
}

impl SpendProof {
    /// The proof's rows and pairing into a batch's checks; what is not an equation (the
    /// auditors' order, a degenerate `Ā`, the response count) is checked here.
    fn rows_into(
        &self,
        checks: &mut Checks,
        authority: &RaPublicKey,
        owner: &OwnerCommitment,
        c: Scalar,
    ) -> Result<(), VerifyError> {
        let g = generators();
        let keys: Vec<AuditorKey> = self.auditors.iter().map(|link| link.ciphertext.auditor).collect();
        check_auditors(&keys)?;
        let z = match &self.signature.sc_resp {
            Some(responses) if responses.0.len() == SIGNATURE_RESPONSES && !self.signature.A_bar.is_zero() => {
                &responses.0
            }
            _ => return Err(VerifyError::Signature),
        };
        let one = Scalar::from(1u8);
        let (a_bar, b_bar) = (self.signature.A_bar, self.signature.B_bar);
        // Σ z_i·b_i + c·g1 = T over (h_1, h_2, h_3, Ā, B̄), and e(Ā, pk) = e(B̄, g2).
        checks.g1_row(
            &[
                (g.bbs.h[0], z[0]),
                (g.bbs.h[1], z[1]),
                (g.bbs.h[2], z[2]),
                (g.bbs.g1, c),
            ],
            &[(a_bar, z[3]), (b_bar, z[4]), (self.signature.T, -one)],
        );
        checks.pairing((a_bar, authority.0, true), (b_bar, g.bbs.g2));
        let eid_response = z[ATTRIBUTE_ENROLMENT_ID];
        checks.g1_row(
            &[(g.owner_id, eid_response), (g.owner_blinding, self.blinding_response)],
            &[(owner.0, -c), (self.owner_nonce, -one)],
        );
        self.auditors
            .iter()
            .for_each(|link| link.rows_into(checks, eid_response, &c));
        Ok(())
    }
}

/// Verifies spend proofs under one RA key and owner audits together, the way a sentinel checks
/// a batch of anonymous transactions: every Schnorr row of every proof in one multi-scalar
/// multiplication, every pairing (all against the RA key and `g2`) in one two-pairing product,
/// weighted by the powers of one scalar hashed from every challenge. If the batch fails, each
/// proof is checked alone to name the first that fails, and why.
pub fn verify_batch_with_audits(
    authority: &RaPublicKey,
    spends: &[SpendItem<'_>],
    audits: &[AuditItem<'_>],
) -> Result<(), BatchError> {
    if spends.is_empty() && audits.is_empty() {
        return Ok(());
    }
    let spend_challenges: Vec<Scalar> = (spends.iter())
        .map(|(proof, owner, message)| proof.challenge(authority, owner, message))
        .collect();
    let audit_challenges: Vec<Scalar> = (audits.iter())
        .map(|(audit, owner, context)| audit.challenge(owner, context))
        .collect();
    let mut seed = Sha512::new();
    seed.update(DOMAIN_BATCH_WEIGHTS);
    spend_challenges
        .iter()
        .chain(&audit_challenges)
        .for_each(|c| seed.update(compressed(c)));
    let mut checks = Checks::new(Scalar::from_le_bytes_mod_order(&seed.finalize()));
    for (index, ((proof, owner, _), c)) in spends.iter().zip(spend_challenges).enumerate() {
        proof
            .rows_into(&mut checks, authority, owner, c)
            .map_err(|source| BatchError::Proof { index, source })?;
    }
    for ((audit, owner, _), c) in audits.iter().zip(audit_challenges) {
        audit.rows_into(&mut checks, owner, c);
    }
    if checks.hold() {
        return Ok(());
    }
    for (index, (proof, owner, message)) in spends.iter().enumerate() {
        proof
            .verify_alone(authority, owner, message)
            .map_err(|source| BatchError::Proof { index, source })?;
    }
    for (index, (audit, owner, context)) in audits.iter().enumerate() {
        audit
            .verify(owner, context)
            .map_err(|source| BatchError::Audit { index, source })?;
    }
    Err(BatchError::Proof {
        index: 0,
        source: VerifyError::Signature,
    })
}
