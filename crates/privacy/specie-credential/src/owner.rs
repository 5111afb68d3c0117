//! Anonymous owners (Fabric CBDC Appendix B.1 and C.2): an output's owner is `Commit(eid, t) =
//! eid·G_id + t·G_blind`, fresh `t` per output, so outputs of one user are unlinkable; and the
//! auditors' view of the owner: ElGamal of `eid·G_id` to an auditor key, with the linear relations
//! that tie it to the commitment (`link` rows proven with schnorr_pok's multi-base Schnorr).

use std::collections::BTreeMap;

use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::UniformRand;
use rand_core::{CryptoRng, RngCore};
use schnorr_pok::{SchnorrCommitment, SchnorrResponse};
use sha2::Sha256;

use crate::authority::EnrolmentId;
use crate::error::{AuditError, VerifyError};
use crate::group::{compressed, generators, Scalar, Transcript, G1, G1_BYTES};

/// Prefix of an auditor secret derived from a seed.
pub const DOMAIN_AUDITOR_KEY: &[u8] = b"specie/credential/auditor-key/v1";
/// Prefix of the challenge of an [`OwnerAudit`] (the output-side proof).
pub const DOMAIN_OWNER_AUDIT: &[u8] = b"specie/credential/owner-audit/v1";

/// The hiding commitment to an output owner's enrolment id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerCommitment(pub(crate) G1);

/// What the payer tells the payee (and the payee's wallet keeps) to spend an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerOpening {
    pub enrolment_id: EnrolmentId,
    pub(crate) blinding: Scalar,
}

impl OwnerOpening {
    /// A fresh opening: a new blinding, so no two outputs of one owner look alike.
    pub fn random(enrolment_id: EnrolmentId, rng: &mut (impl RngCore + CryptoRng)) -> OwnerOpening {
        OwnerOpening {
            enrolment_id,
            blinding: Scalar::rand(rng),
        }
    }

    pub fn commitment(&self) -> OwnerCommitment {
        let g = generators();
        OwnerCommitment((g.owner_id * self.enrolment_id.scalar() + g.owner_blinding * self.blinding).into_affine())
    }

    /// The blinding `t`, little-endian: what the payer sends the payee.
    pub fn blinding_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(&compressed(&self.blinding));
        out
    }
}

impl OwnerCommitment {
    pub fn to_bytes(&self) -> [u8; G1_BYTES] {
        let mut out = [0u8; G1_BYTES];
        out.copy_from_slice(&compressed(&self.0));
        out
    }
}

/// An auditor's decryption key `a`.
#[derive(Clone, PartialEq, Eq)]
pub struct AuditorSecret(Scalar);

impl std::fmt::Debug for AuditorSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditorSecret(..)")
    }
}

/// An auditor's public key `a·G_aud`, with its encoding, by which keys are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditorKey(pub(crate) [u8; G1_BYTES], pub(crate) G1);

impl PartialOrd for AuditorKey {
    fn partial_cmp(&self, other: &AuditorKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for AuditorKey {
    fn cmp(&self, other: &AuditorKey) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl AuditorKey {
    pub(crate) fn from_point(point: G1) -> AuditorKey {
        let mut bytes = [0u8; G1_BYTES];
        bytes.copy_from_slice(&compressed(&point));
        AuditorKey(bytes, point)
    }

    pub fn to_bytes(&self) -> [u8; G1_BYTES] {
        self.0
    }
}

/// ElGamal of the owner's `eid·G_id` to one auditor: `(k·G_aud, eid·G_id + k·K)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerCiphertext {
    pub(crate) auditor: AuditorKey,
    pub(crate) ephemeral: G1,
    pub(crate) masked: G1,
}

/// What an auditor recovers: `eid·G_id`. Enrolment ids are too many to take a discrete log of, so
/// an auditor matches the tag against the ids it oversees ([`AuditDirectory`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuditTag(pub [u8; G1_BYTES]);

impl EnrolmentId {
    pub fn audit_tag(self) -> AuditTag {
        let mut out = [0u8; G1_BYTES];
        out.copy_from_slice(&compressed(&(generators().owner_id * self.scalar()).into_affine()));
        AuditTag(out)
    }
}

impl AuditorSecret {
    pub fn random(rng: &mut (impl RngCore + CryptoRng)) -> AuditorSecret {
        AuditorSecret(nonzero(Scalar::rand(rng)))
    }

    pub fn from_seed(seed: &[u8; 32]) -> AuditorSecret {
        AuditorSecret(nonzero(
            dock_crypto_utils::hashing_utils::hash_to_field::<Scalar, Sha256>(DOMAIN_AUDITOR_KEY, seed),
        ))
    }

    pub fn public(&self) -> AuditorKey {
        AuditorKey::from_point((generators().auditor * self.0).into_affine())
    }

    /// The owner's tag, if the ciphertext is addressed to this auditor.
    pub fn decrypt(&self, ciphertext: &OwnerCiphertext) -> Result<AuditTag, AuditError> {
        let tag = self.decrypt_point(ciphertext)?;
        let mut out = [0u8; G1_BYTES];
        out.copy_from_slice(&compressed(&tag));
        Ok(AuditTag(out))
    }

    /// `m·G_id` of a ciphertext of `m` addressed to this auditor.
    pub(crate) fn decrypt_point(&self, ciphertext: &OwnerCiphertext) -> Result<G1, AuditError> {
        if ciphertext.auditor != self.public() {
            return Err(AuditError::NotAddressedToThisAuditor);
        }
        Ok((ciphertext.masked.into_group() - ciphertext.ephemeral * self.0).into_affine())
    }
}

/// A zero secret would make every ciphertext readable by anyone; the chance is 2^-255, but the map
/// from seeds must be total.
fn nonzero(secret: Scalar) -> Scalar {
    if secret == Scalar::from(0u64) {
        Scalar::from(1u64)
    } else {
        secret
    }
}

/// The ids an auditor oversees, by tag.
#[derive(Clone, Debug, Default)]
pub struct AuditDirectory(BTreeMap<AuditTag, EnrolmentId>);

impl AuditDirectory {
    pub fn new(ids: impl IntoIterator<Item = EnrolmentId>) -> AuditDirectory {
        AuditDirectory(ids.into_iter().map(|id| (id.audit_tag(), id)).collect())
    }

    pub fn insert(&mut self, id: EnrolmentId) {
        self.0.insert(id.audit_tag(), id);
    }

    /// Who the ciphertext names, if it is addressed to `auditor` and names an id in the directory.
    pub fn identify(&self, auditor: &AuditorSecret, ciphertext: &OwnerCiphertext) -> Result<EnrolmentId, AuditError> {
        let tag = auditor.decrypt(ciphertext)?;
        self.0.get(&tag).copied().ok_or(AuditError::UnknownOwner)
    }
}

impl OwnerCiphertext {
    pub fn auditor(&self) -> AuditorKey {
        self.auditor
    }
}

/// The prover's side of the rows that tie an owner's enrolment id (whose blinding `eid_blinding`
/// the enclosing protocol chose) to an ElGamal ciphertext: `E1 = k·G_aud` and `E2 = eid·G_id + k·K`.
pub(crate) struct CiphertextLinkProver {
    pub ciphertext: OwnerCiphertext,
    ephemeral_secret: Scalar,
    ephemeral_row: SchnorrCommitment<G1>,
    masked_row: SchnorrCommitment<G1>,
}

/// The verifier's side: the Schnorr commitments of the two rows and the response for `k` (the
/// response for `eid` is shared with the enclosing protocol, which is what proves the equality).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CiphertextLink {
    pub ciphertext: OwnerCiphertext,
    pub ephemeral_nonce: G1,
    pub masked_nonce: G1,
    pub ephemeral_response: Scalar,
}

impl CiphertextLinkProver {
    pub fn new(
        auditor: AuditorKey,
        enrolment_id: EnrolmentId,
        eid_blinding: Scalar,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> CiphertextLinkProver {
        Self::for_scalar(auditor, enrolment_id.scalar(), eid_blinding, rng)
    }

    /// The rows for any scalar `message` (an owner's id, or a value's half) under the same
    /// generator `G_id`, its blinding `message_blinding` shared with the enclosing protocol.
    pub fn for_scalar(
        auditor: AuditorKey,
        message: Scalar,
        message_blinding: Scalar,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> CiphertextLinkProver {
        let g = generators();
        let ephemeral_secret = Scalar::rand(rng);
        let ciphertext = OwnerCiphertext {
            auditor,
            ephemeral: (g.auditor * ephemeral_secret).into_affine(),
            masked: (g.owner_id * message + auditor.1 * ephemeral_secret).into_affine(),
        };
        let ephemeral_blinding = Scalar::rand(rng);
        CiphertextLinkProver {
            ciphertext,
            ephemeral_secret,
            ephemeral_row: SchnorrCommitment::new(&[g.auditor], vec![ephemeral_blinding]),
            masked_row: SchnorrCommitment::new(&[g.owner_id, auditor.1], vec![message_blinding, ephemeral_blinding]),
        }
    }

    pub fn absorb(&self, transcript: &mut Transcript) {
        absorb_link(transcript, &self.ciphertext, &self.ephemeral_row.t, &self.masked_row.t);
    }

    pub fn finish(self, challenge: &Scalar) -> CiphertextLink {
        CiphertextLink {
            ciphertext: self.ciphertext,
            ephemeral_nonce: self.ephemeral_row.t,
            masked_nonce: self.masked_row.t,
            ephemeral_response: self.ephemeral_row.blindings[0] + self.ephemeral_secret * challenge,
        }
    }
}

fn absorb_link(transcript: &mut Transcript, ciphertext: &OwnerCiphertext, ephemeral_nonce: &G1, masked_nonce: &G1) {
    transcript.bytes(&ciphertext.auditor.0);
    transcript.point(&ciphertext.ephemeral);
    transcript.point(&ciphertext.masked);
    transcript.point(ephemeral_nonce);
    transcript.point(masked_nonce);
}

impl CiphertextLink {
    pub fn absorb(&self, transcript: &mut Transcript) {
        absorb_link(transcript, &self.ciphertext, &self.ephemeral_nonce, &self.masked_nonce);
    }

    /// Both rows, with the shared enrolment-id response `eid_response`, into a batch's checks.
    pub fn rows_into(&self, checks: &mut crate::batch::Checks, eid_response: Scalar, challenge: &Scalar) {
        let g = generators();
        let one = Scalar::from(1u8);
        let c = self.ciphertext;
        checks.g1_row(
            &[(g.auditor, self.ephemeral_response)],
            &[(c.ephemeral, -*challenge), (self.ephemeral_nonce, -one)],
        );
        checks.g1_row(
            &[(g.owner_id, eid_response)],
            &[
                (c.auditor.1, self.ephemeral_response),
                (c.masked, -*challenge),
                (self.masked_nonce, -one),
            ],
        );
    }

    /// Both rows hold with the shared enrolment-id response `eid_response`.
    pub fn holds(&self, eid_response: Scalar, challenge: &Scalar) -> bool {
        let g = generators();
        let ephemeral = SchnorrResponse::<G1>(vec![self.ephemeral_response]);
        let masked = SchnorrResponse::<G1>(vec![eid_response, self.ephemeral_response]);
        ephemeral
            .is_valid(
                &[g.auditor],
                &self.ciphertext.ephemeral,
                &self.ephemeral_nonce,
                challenge,
            )
            .is_ok()
            && masked
                .is_valid(
                    &[g.owner_id, self.ciphertext.auditor.1],
                    &self.ciphertext.masked,
                    &self.masked_nonce,
                    challenge,
                )
                .is_ok()
    }
}

/// The output side of a passive audit: a ciphertext of the owner's id to one auditor, with a proof
/// (bound to the output's commitment and to a 32-byte context, the transaction digest) that it is
/// the id committed in the output. Made by the payer, who knows the payee's opening.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerAudit {
    pub(crate) link: CiphertextLink,
    pub(crate) owner_nonce: G1,
    pub(crate) eid_response: Scalar,
    pub(crate) blinding_response: Scalar,
}

fn owner_audit_challenge(owner: &OwnerCommitment, context: &[u8; 32], owner_nonce: &G1) -> Transcript {
    let mut transcript = Transcript::new(DOMAIN_OWNER_AUDIT);
    transcript.bytes(context);
    transcript.point(&owner.0);
    transcript.point(owner_nonce);
    transcript
}

impl OwnerAudit {
    pub fn prove(
        opening: &OwnerOpening,
        auditor: AuditorKey,
        context: &[u8; 32],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> OwnerAudit {
        let g = generators();
        let eid_blinding = Scalar::rand(rng);
        let owner_row = SchnorrCommitment::new(&[g.owner_id, g.owner_blinding], vec![eid_blinding, Scalar::rand(rng)]);
        let link = CiphertextLinkProver::new(auditor, opening.enrolment_id, eid_blinding, rng);
        let mut transcript = owner_audit_challenge(&opening.commitment(), context, &owner_row.t);
        link.absorb(&mut transcript);
        let challenge = transcript.challenge();
        let responses = owner_row
            .response(&[opening.enrolment_id.scalar(), opening.blinding], &challenge)
            .expect("two witnesses for two blindings");
        OwnerAudit {
            link: link.finish(&challenge),
            owner_nonce: owner_row.t,
            eid_response: responses.0[0],
            blinding_response: responses.0[1],
        }
    }

    pub fn ciphertext(&self) -> &OwnerCiphertext {
        &self.link.ciphertext
    }

    pub(crate) fn challenge(&self, owner: &OwnerCommitment, context: &[u8; 32]) -> Scalar {
        let mut transcript = owner_audit_challenge(owner, context, &self.owner_nonce);
        self.link.absorb(&mut transcript);
        transcript.challenge()
    }

    /// The audit's rows into a batch's checks (`crate::spend::verify_batch_with_audits`).
    pub(crate) fn rows_into(&self, checks: &mut crate::batch::Checks, owner: &OwnerCommitment, challenge: Scalar) {
        let g = generators();
        checks.g1_row(
            &[
                (g.owner_id, self.eid_response),
                (g.owner_blinding, self.blinding_response),
            ],
            &[(owner.0, -challenge), (self.owner_nonce, -Scalar::from(1u8))],
        );
        self.link.rows_into(checks, self.eid_response, &challenge);
    }

    /// Verifies the audit alone, naming the row that fails.
    pub fn verify(&self, owner: &OwnerCommitment, context: &[u8; 32]) -> Result<(), VerifyError> {
        let g = generators();
        let challenge = self.challenge(owner, context);
        let owner_row = SchnorrResponse::<G1>(vec![self.eid_response, self.blinding_response]);
        if owner_row
            .is_valid(&[g.owner_id, g.owner_blinding], &owner.0, &self.owner_nonce, &challenge)
            .is_err()
        {
            return Err(VerifyError::OwnerLink);
        }
        if !self.link.holds(self.eid_response, &challenge) {
            return Err(VerifyError::AuditorLink { index: 0 });
        }
        Ok(())
    }
}
