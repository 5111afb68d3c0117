//! Registration (Fabric CBDC §2.1): after KYC the registration authority (RA) assigns an enrolment
//! id and a jurisdiction and hands the user a fresh challenge; the user answers with a proof that it
//! knows the secret behind its public key, bound to that challenge and to everything the credential
//! will say; the RA then signs (blindly for the secret) the attributes (user secret, enrolment id,
//! jurisdiction) with BBS.
//!
//! The user's public key is `sk·h_1`, the BBS generator of the secret's slot, which is exactly the
//! commitment blind BBS signing needs: the RA never learns `sk`, and the credential is a plain BBS
//! signature over `(sk, eid, jurisdiction)` that only the holder of `sk` can prove knowledge of.

use std::collections::BTreeMap;

use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::UniformRand;
use bbs_plus::setup::{PublicKeyG2, SecretKey};
use bbs_plus::signature_23::Signature23G1;
use rand_core::{CryptoRng, RngCore};
use schnorr_pok::discrete_log::{PokDiscreteLog, PokDiscreteLogProtocol};
use sha2::Sha256;

use crate::error::{CredentialError, EnrolError};
use crate::group::{generators, Pairing, Scalar, Transcript, ATTRIBUTE_SECRET, G1, G2};

/// Prefix of the proof of possession's challenge.
pub const DOMAIN_ENROL: &[u8] = b"specie/credential/enrol/v1";
/// Salt of `RegistrationAuthority::from_seed` and `UserSecret::from_seed` (hashed to a scalar
/// with the draft's hash_to_field over SHA-256).
pub const DOMAIN_KEY_SEED: &[u8] = b"specie/credential/key-seed/v1";
/// Label the RA key of an epoch after the first is derived from, with the seed and the epoch.
pub const DOMAIN_KEY_EPOCH: &[u8] = b"specie/credential/ra-epoch/v1";

/// The unique enrolment identifier the RA assigns to a physical identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnrolmentId(pub u64);

/// The jurisdiction the RA files a user under (an ISO 3166 numeric code, say); signed into the
/// credential as its third attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Jurisdiction(pub u32);

impl EnrolmentId {
    pub(crate) fn scalar(self) -> Scalar {
        Scalar::from(self.0)
    }
}

impl Jurisdiction {
    pub(crate) fn scalar(self) -> Scalar {
        Scalar::from(self.0)
    }
}

/// The RA's public key: `x·g2`. All a verifier of spend proofs needs besides the statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaPublicKey(pub(crate) G2);

impl RaPublicKey {
    pub(crate) fn bbs(&self) -> PublicKeyG2<Pairing> {
        PublicKeyG2(self.0)
    }
}

/// A user's long-term secret `sk`, the first attribute of its credential.
#[derive(Clone, PartialEq, Eq)]
pub struct UserSecret(pub(crate) Scalar);

impl std::fmt::Debug for UserSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserSecret(..)")
    }
}

/// A user's public key `sk·h_1`, what the RA records against the enrolment id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserPublicKey(pub(crate) G1);

/// What the RA gives a user after KYC: the attributes it assigned and a fresh nonce the proof of
/// possession must sign, so that a request cannot be replayed for another identity or later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnrolmentChallenge {
    pub enrolment_id: EnrolmentId,
    pub jurisdiction: Jurisdiction,
    pub nonce: [u8; 32],
}

/// The user's answer: its public key and a Schnorr proof of knowledge of `sk`, whose challenge
/// hashes the RA key, the challenge and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnrolmentRequest {
    pub(crate) challenge: EnrolmentChallenge,
    pub(crate) user_key: UserPublicKey,
    pub(crate) possession: PokDiscreteLog<G1>,
}

/// The RA's BBS signature over `(sk, enrolment id, jurisdiction)`, with the two public attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub enrolment_id: EnrolmentId,
    pub jurisdiction: Jurisdiction,
    pub(crate) signature: Signature23G1<Pairing>,
}

/// A wallet's long-term identity: the secret and a credential checked against the RA's key.
#[derive(Clone, Debug)]
pub struct Identity {
    pub(crate) secret: UserSecret,
    pub(crate) credential: Credential,
}

fn scalar_from_seed(seed: &[u8; 32]) -> Scalar {
    dock_crypto_utils::hashing_utils::hash_to_field::<Scalar, Sha256>(DOMAIN_KEY_SEED, seed)
}

fn possession_challenge(
    authority: &RaPublicKey,
    challenge: &EnrolmentChallenge,
    user_key: &UserPublicKey,
    nonce_point: &G1,
) -> Scalar {
    let mut transcript = Transcript::new(DOMAIN_ENROL);
    transcript.point(&authority.0);
    transcript.bytes(&challenge.enrolment_id.0.to_le_bytes());
    transcript.bytes(&challenge.jurisdiction.0.to_le_bytes());
    transcript.bytes(&challenge.nonce);
    transcript.point(&generators().bbs.h[ATTRIBUTE_SECRET]);
    transcript.point(&user_key.0);
    transcript.point(nonce_point);
    transcript.challenge()
}

impl UserSecret {
    pub fn random(rng: &mut (impl RngCore + CryptoRng)) -> UserSecret {
        UserSecret(Scalar::rand(rng))
    }

    /// A secret derived from a 32-byte seed (test vectors, deterministic wallets).
    pub fn from_seed(seed: &[u8; 32]) -> UserSecret {
        UserSecret(scalar_from_seed(seed))
    }

    pub fn public_key(&self) -> UserPublicKey {
        UserPublicKey((generators().bbs.h[ATTRIBUTE_SECRET] * self.0).into_affine())
    }

    /// Answers the RA's challenge with a proof of possession of this secret.
    pub fn enrolment_request(
        &self,
        authority: &RaPublicKey,
        challenge: &EnrolmentChallenge,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> EnrolmentRequest {
        let user_key = self.public_key();
        let base = generators().bbs.h[ATTRIBUTE_SECRET];
        let protocol = PokDiscreteLogProtocol::init(self.0, Scalar::rand(rng), &base);
        let challenge_scalar = possession_challenge(authority, challenge, &user_key, &protocol.t);
        EnrolmentRequest {
            challenge: challenge.clone(),
            user_key,
            possession: protocol.gen_proof(&challenge_scalar),
        }
    }
}

impl EnrolmentRequest {
    pub fn challenge(&self) -> &EnrolmentChallenge {
        &self.challenge
    }

    pub fn user_key(&self) -> UserPublicKey {
        self.user_key
    }

    /// Whether the proof of possession holds for this RA (what the RA checks before signing).
    pub fn possession_holds(&self, authority: &RaPublicKey) -> bool {
        let base = generators().bbs.h[ATTRIBUTE_SECRET];
        let challenge = possession_challenge(authority, &self.challenge, &self.user_key, &self.possession.t);
        !self.user_key.0.is_zero() && self.possession.verify(&self.user_key.0, &base, &challenge)
    }
}

/// The registration authority as a sans-IO role: KYC happens outside; this keeps the outstanding
/// challenges and the enrolments it has signed, and signs.
pub struct RegistrationAuthority {
    secret: SecretKey<Scalar>,
    public: RaPublicKey,
    pending: BTreeMap<EnrolmentId, EnrolmentChallenge>,
    enrolled: BTreeMap<EnrolmentId, UserPublicKey>,
}

impl std::fmt::Debug for RegistrationAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistrationAuthority")
            .field("public", &self.public)
            .field("pending", &self.pending.len())
            .field("enrolled", &self.enrolled.len())
            .finish_non_exhaustive()
    }
}

impl RegistrationAuthority {
    pub fn random(rng: &mut (impl RngCore + CryptoRng)) -> RegistrationAuthority {
        RegistrationAuthority::from_secret(Scalar::rand(rng))
    }

    /// An RA whose signing key is derived from a 32-byte seed (test vectors).
    pub fn from_seed(seed: &[u8; 32]) -> RegistrationAuthority {
        RegistrationAuthority::from_secret(scalar_from_seed(seed))
    }

    /// The RA's key of `epoch` from the same seed: epoch 0 is [`Self::from_seed`]'s; each later
    /// one is derived from the seed and the epoch ([`DOMAIN_KEY_EPOCH`]). Moving to a new epoch
    /// (and re-issuing every credential but the revoked ones) is how the RA revokes: a credential
    /// of an earlier epoch does not verify under the new key.
    pub fn from_seed_epoch(seed: &[u8; 32], epoch: u64) -> RegistrationAuthority {
        if epoch == 0 {
            return RegistrationAuthority::from_seed(seed);
        }
        let mut input = seed.to_vec();
        input.extend_from_slice(&epoch.to_le_bytes());
        RegistrationAuthority::from_secret(dock_crypto_utils::hashing_utils::hash_to_field::<Scalar, Sha256>(
            DOMAIN_KEY_EPOCH,
            &input,
        ))
    }

    fn from_secret(secret: Scalar) -> RegistrationAuthority {
        let secret = SecretKey(secret);
        let public = PublicKeyG2::generate_using_secret_key_and_bbs23_params(&secret, &generators().bbs);
        RegistrationAuthority {
            secret,
            public: RaPublicKey(public.0),
            pending: BTreeMap::new(),
            enrolled: BTreeMap::new(),
        }
    }

    pub fn public_key(&self) -> RaPublicKey {
        self.public.clone()
    }

    /// Takes back what an earlier run of this RA recorded (its outstanding challenges and its
    /// enrolments), so that a driver keeping them durable answers after a restart as before.
    pub fn restore(
        &mut self,
        pending: impl IntoIterator<Item = EnrolmentChallenge>,
        enrolled: impl IntoIterator<Item = (EnrolmentId, UserPublicKey)>,
    ) {
        self.pending.extend(pending.into_iter().map(|c| (c.enrolment_id, c)));
        self.enrolled.extend(enrolled);
    }

    /// The challenges issued and not yet answered.
    pub fn pending(&self) -> impl Iterator<Item = &EnrolmentChallenge> + '_ {
        self.pending.values()
    }

    /// The enrolments signed so far, with the key each was signed for.
    pub fn enrolled(&self) -> impl Iterator<Item = (EnrolmentId, UserPublicKey)> + '_ {
        self.enrolled.iter().map(|(id, key)| (*id, *key))
    }

    /// Opens an enrolment after KYC mapped a person to `enrolment_id`: a fresh nonce replaces any
    /// earlier one for the same id, so only the latest challenge can be answered.
    pub fn challenge(
        &mut self,
        enrolment_id: EnrolmentId,
        jurisdiction: Jurisdiction,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> EnrolmentChallenge {
        let mut nonce = [0u8; 32];
        rng.fill_bytes(&mut nonce);
        let challenge = EnrolmentChallenge {
            enrolment_id,
            jurisdiction,
            nonce,
        };
        self.pending.insert(enrolment_id, challenge.clone());
        challenge
    }

    /// Checks the request against the outstanding challenge and the proof of possession, refuses a
    /// second key for an enrolled id (or an enrolled key for a new id), and signs. A repeated
    /// request with the enrolled key gets a fresh credential: a wallet that lost the answer can ask again.
    pub fn enrol(
        &mut self,
        request: &EnrolmentRequest,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Credential, EnrolError> {
        let enrolment_id = request.challenge.enrolment_id;
        match self.pending.get(&enrolment_id) {
            None => return Err(EnrolError::NoChallenge { enrolment_id }),
            Some(expected) if *expected != request.challenge => {
                return Err(EnrolError::ChallengeMismatch { enrolment_id })
            }
            Some(_) => {}
        }
        if !request.possession_holds(&self.public) {
            return Err(EnrolError::PossessionProofInvalid { enrolment_id });
        }
        match self.enrolled.get(&enrolment_id) {
            Some(key) if *key != request.user_key => return Err(EnrolError::AlreadyEnrolled { enrolment_id }),
            Some(_) => {}
            None => {
                if let Some((holder, _)) = self.enrolled.iter().find(|(_, key)| **key == request.user_key) {
                    return Err(EnrolError::KeyAlreadyEnrolled { holder: *holder });
                }
            }
        }
        let signature = self.sign(request, rng)?;
        self.pending.remove(&enrolment_id);
        self.enrolled.insert(enrolment_id, request.user_key);
        Ok(Credential {
            enrolment_id,
            jurisdiction: request.challenge.jurisdiction,
            signature,
        })
    }

    fn sign(
        &self,
        request: &EnrolmentRequest,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Signature23G1<Pairing>, EnrolError> {
        let challenge = &request.challenge;
        self.sign_key(&request.user_key, challenge.enrolment_id, challenge.jurisdiction, rng)
    }

    fn sign_key(
        &self,
        user_key: &UserPublicKey,
        enrolment_id: EnrolmentId,
        jurisdiction: Jurisdiction,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Signature23G1<Pairing>, EnrolError> {
        let (enrolment_id, jurisdiction) = (enrolment_id.scalar(), jurisdiction.scalar());
        let known: BTreeMap<usize, &Scalar> = [(1, &enrolment_id), (2, &jurisdiction)].into_iter().collect();
        Signature23G1::new_with_committed_messages(rng, &user_key.0, known, &self.secret, &generators().bbs)
            .map_err(|e| EnrolError::Signing(format!("{e:?}")))
    }

    /// A fresh credential for an enrolment this RA (of an earlier epoch) signed: the same key,
    /// id and jurisdiction under this RA's key, with no new challenge (the key was proven when
    /// it enrolled). Refused for an id this RA has not recorded with that key.
    pub fn reissue(
        &self,
        enrolment_id: EnrolmentId,
        jurisdiction: Jurisdiction,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Credential, EnrolError> {
        let user_key = (self.enrolled.get(&enrolment_id)).ok_or(EnrolError::NoChallenge { enrolment_id })?;
        Ok(Credential {
            enrolment_id,
            jurisdiction,
            signature: self.sign_key(user_key, enrolment_id, jurisdiction, rng)?,
        })
    }
}

impl Credential {
    /// Whether this is the RA's signature over `(secret, enrolment id, jurisdiction)`.
    pub fn verify(&self, secret: &UserSecret, authority: &RaPublicKey) -> Result<(), CredentialError> {
        let attributes = [secret.0, self.enrolment_id.scalar(), self.jurisdiction.scalar()];
        self.signature
            .verify(&attributes, authority.bbs(), generators().bbs.clone())
            .map_err(|_| CredentialError::InvalidSignature)
    }
}

impl Identity {
    /// The wallet's identity, once the credential checks out against the RA's key.
    pub fn new(
        secret: UserSecret,
        credential: Credential,
        authority: &RaPublicKey,
    ) -> Result<Identity, CredentialError> {
        credential.verify(&secret, authority)?;
        Ok(Identity { secret, credential })
    }

    pub fn enrolment_id(&self) -> EnrolmentId {
        self.credential.enrolment_id
    }

    pub fn credential(&self) -> &Credential {
        &self.credential
    }
}

impl UserPublicKey {
    pub fn to_bytes(&self) -> [u8; crate::group::G1_BYTES] {
        let mut out = [0u8; crate::group::G1_BYTES];
        out.copy_from_slice(&crate::group::compressed(&self.0));
        out
    }
}
