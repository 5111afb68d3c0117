//! Forgeries every verifier here must refuse: a spend proof moved to another message, another
//! output or another RA; a proof with any byte changed; a malleated owner commitment; a mixed-up
//! auditor ciphertext; an enrolment whose proof of possession does not hold or that reuses an id or
//! a key.

use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::UniformRand;
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, Encode};

use crate::authority::{EnrolmentChallenge, Identity};
use crate::group::{generators, Scalar};
use crate::owner::CiphertextLinkProver;
use crate::*;

const MESSAGE: [u8; 32] = [0x5a; 32];

struct World {
    rng: StdRng,
    ra: RegistrationAuthority,
    alice: Identity,
    bob: Identity,
}

/// An honest enrolment of `id` (jurisdiction 56) with a fresh secret; the unlinkable tests use it too.
pub(crate) fn enrol(ra: &mut RegistrationAuthority, id: u64, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::random(rng);
    let challenge = ra.challenge(EnrolmentId(id), Jurisdiction(56), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let credential = ra.enrol(&request, rng).expect("an honest enrolment");
    Identity::new(secret, credential, &ra.public_key()).expect("an honest credential")
}

fn world(seed: u64) -> World {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let alice = enrol(&mut ra, 1, &mut rng);
    let bob = enrol(&mut ra, 2, &mut rng);
    World { rng, ra, alice, bob }
}

impl World {
    fn spend(&mut self, auditors: &[AuditorKey]) -> (SpendProof, OwnerOpening) {
        let opening = OwnerOpening::random(self.alice.enrolment_id(), &mut self.rng);
        let proof = self
            .alice
            .prove_spend(&self.ra.public_key(), &opening, &MESSAGE, auditors, &mut self.rng)
            .expect("alice owns the output");
        (proof, opening)
    }
}

#[test]
fn an_honest_spend_verifies() {
    let mut w = world(1);
    let (proof, opening) = w.spend(&[]);
    assert_eq!(
        proof.verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE),
        Ok(())
    );
}

#[test]
fn a_proof_for_another_transaction_is_refused() {
    let mut w = world(2);
    let (proof, opening) = w.spend(&[]);
    let mut other = MESSAGE;
    other[31] ^= 1;
    assert!(proof.verify(&w.ra.public_key(), &opening.commitment(), &other).is_err());
}

#[test]
fn a_proof_replayed_on_another_output_is_refused() {
    let mut w = world(3);
    let (proof, _) = w.spend(&[]);
    // Another output of the same owner, and an output of someone else.
    let same_owner = OwnerOpening::random(w.alice.enrolment_id(), &mut w.rng).commitment();
    let other_owner = OwnerOpening::random(w.bob.enrolment_id(), &mut w.rng).commitment();
    // The challenge hashes the commitment, so the signature part fails first.
    for owner in [same_owner, other_owner] {
        assert!(proof.verify(&w.ra.public_key(), &owner, &MESSAGE).is_err());
    }
}

#[test]
fn a_malleated_commitment_is_refused() {
    let mut w = world(4);
    let (proof, opening) = w.spend(&[]);
    let g = generators();
    let c = opening.commitment().0;
    let shifted_blinding = OwnerCommitment((c + g.owner_blinding).into_affine());
    let shifted_id = OwnerCommitment((c + g.owner_id).into_affine());
    let doubled = OwnerCommitment((c + c).into_affine());
    let negated = OwnerCommitment((-c.into_group()).into_affine());
    for owner in [shifted_blinding, shifted_id, doubled, negated] {
        assert!(proof.verify(&w.ra.public_key(), &owner, &MESSAGE).is_err());
    }
}

#[test]
fn a_credential_of_another_ra_is_refused() {
    let mut w = world(5);
    let mut rogue = RegistrationAuthority::random(&mut w.rng);
    let mallory = enrol(&mut rogue, 1, &mut w.rng);
    let opening = OwnerOpening::random(mallory.enrolment_id(), &mut w.rng);
    // Claiming the real RA in the proof, or proving honestly under the rogue key: neither passes
    // the real RA's verifier.
    for claimed in [w.ra.public_key(), rogue.public_key()] {
        let proof = mallory
            .prove_spend(&claimed, &opening, &MESSAGE, &[], &mut w.rng)
            .unwrap();
        assert!(proof
            .verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE)
            .is_err());
    }
    assert!(Identity::new(
        UserSecret::random(&mut w.rng),
        w.alice.credential().clone(),
        &w.ra.public_key()
    )
    .is_err());
}

#[test]
fn a_forged_credential_cannot_spend() {
    let mut w = world(6);
    // Alice's credential with another secret (a stolen credential without the key).
    let thief = Identity {
        secret: UserSecret::random(&mut w.rng),
        credential: w.alice.credential().clone(),
    };
    let opening = OwnerOpening::random(w.alice.enrolment_id(), &mut w.rng);
    let proof = thief
        .prove_spend(&w.ra.public_key(), &opening, &MESSAGE, &[], &mut w.rng)
        .unwrap();
    assert_eq!(
        proof.verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE),
        Err(VerifyError::Signature)
    );
    // A credential whose enrolment id was rewritten to bob's.
    let mut relabelled = w.alice.credential().clone();
    relabelled.enrolment_id = w.bob.enrolment_id();
    let impostor = Identity {
        secret: w.alice.secret.clone(),
        credential: relabelled,
    };
    let opening = OwnerOpening::random(w.bob.enrolment_id(), &mut w.rng);
    let proof = impostor
        .prove_spend(&w.ra.public_key(), &opening, &MESSAGE, &[], &mut w.rng)
        .unwrap();
    assert!(proof
        .verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE)
        .is_err());
}

/// Every byte of the encoding matters: changing any one (in the signature proof, the owner row,
/// the count, the auditor link) makes the bytes either undecodable or unverifiable.
#[test]
fn every_tampered_byte_is_refused() {
    let mut w = world(7);
    let auditor = AuditorSecret::random(&mut w.rng).public();
    let (proof, opening) = w.spend(&[auditor]);
    let bytes = proof.encode();
    let owner = opening.commitment();
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80] {
            let mut tampered = bytes.clone();
            tampered[at] ^= mask;
            if let Ok(decoded) = SpendProof::decode_exact(&tampered) {
                assert!(
                    decoded.verify(&w.ra.public_key(), &owner, &MESSAGE).is_err(),
                    "byte {at} ^ {mask:#04x} still verifies"
                );
            }
        }
    }
}

#[test]
fn mixing_two_proofs_is_refused() {
    let mut w = world(8);
    let (first, opening) = w.spend(&[]);
    let (second, _) = w.spend(&[]);
    let mut mixed = first.clone();
    mixed.signature = second.signature.clone();
    assert!(mixed
        .verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE)
        .is_err());
    let mut mixed = first;
    mixed.owner_nonce = second.owner_nonce;
    mixed.blinding_response = second.blinding_response;
    assert!(mixed
        .verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE)
        .is_err());
}

#[test]
fn an_auditor_ciphertext_of_another_id_or_dropped_is_refused() {
    let mut w = world(9);
    let keys = {
        let mut keys = [
            AuditorSecret::random(&mut w.rng).public(),
            AuditorSecret::random(&mut w.rng).public(),
        ];
        keys.sort();
        keys
    };
    let (proof, opening) = w.spend(&keys);
    let owner = opening.commitment();
    assert_eq!(proof.verify(&w.ra.public_key(), &owner, &MESSAGE), Ok(()));

    // A link made honestly, but for bob's id, with the same blinding cannot share alice's response.
    let mut swapped = proof.clone();
    let challenge = Scalar::rand(&mut w.rng);
    let link = CiphertextLinkProver::new(keys[0], w.bob.enrolment_id(), Scalar::rand(&mut w.rng), &mut w.rng);
    swapped.auditors[0] = link.finish(&challenge);
    assert!(swapped.verify(&w.ra.public_key(), &owner, &MESSAGE).is_err());

    let mut dropped = proof.clone();
    dropped.auditors.pop();
    assert!(dropped.verify(&w.ra.public_key(), &owner, &MESSAGE).is_err());

    let mut reordered = proof;
    reordered.auditors.swap(0, 1);
    assert_eq!(
        reordered.verify(&w.ra.public_key(), &owner, &MESSAGE),
        Err(VerifyError::AuditorsNotAscending)
    );
}

#[test]
fn an_owner_audit_for_another_commitment_or_context_is_refused() {
    let mut w = world(10);
    let auditor = AuditorSecret::random(&mut w.rng);
    let opening = OwnerOpening::random(w.bob.enrolment_id(), &mut w.rng);
    let audit = OwnerAudit::prove(&opening, auditor.public(), &MESSAGE, &mut w.rng);
    assert_eq!(audit.verify(&opening.commitment(), &MESSAGE), Ok(()));
    assert!(audit.verify(&opening.commitment(), &[0; 32]).is_err());
    let elsewhere = OwnerOpening::random(w.bob.enrolment_id(), &mut w.rng).commitment();
    assert!(audit.verify(&elsewhere, &MESSAGE).is_err());
    let bytes = audit.encode();
    for at in 0..bytes.len() {
        let mut tampered = bytes.clone();
        tampered[at] ^= 1;
        if let Ok(decoded) = OwnerAudit::decode_exact(&tampered) {
            assert!(decoded.verify(&opening.commitment(), &MESSAGE).is_err(), "byte {at}");
        }
    }
}

#[test]
fn a_batch_names_a_proof_whose_pairing_fails() {
    let mut w = world(11);
    let mut rogue = RegistrationAuthority::random(&mut w.rng);
    let mallory = enrol(&mut rogue, 1, &mut w.rng);
    let (good, good_opening) = w.spend(&[]);
    let bad_opening = OwnerOpening::random(mallory.enrolment_id(), &mut w.rng);
    // Proven under the real RA's key in the transcript, so only the pairing can catch it.
    let bad = mallory
        .prove_spend(&w.ra.public_key(), &bad_opening, &MESSAGE, &[], &mut w.rng)
        .unwrap();
    let (good_owner, bad_owner) = (good_opening.commitment(), bad_opening.commitment());
    let items = [
        (&good, &good_owner, &MESSAGE),
        (&bad, &bad_owner, &MESSAGE),
        (&good, &good_owner, &MESSAGE),
    ];
    assert_eq!(
        verify_batch(&w.ra.public_key(), &items),
        Err(BatchError::Proof {
            index: 1,
            source: VerifyError::Signature
        })
    );
}

fn fresh_request(w: &mut World, id: u64) -> (UserSecret, EnrolmentChallenge, EnrolmentRequest) {
    let secret = UserSecret::random(&mut w.rng);
    let challenge = w.ra.challenge(EnrolmentId(id), Jurisdiction(56), &mut w.rng);
    let request = secret.enrolment_request(&w.ra.public_key(), &challenge, &mut w.rng);
    (secret, challenge, request)
}

#[test]
fn an_enrolment_with_a_wrong_proof_of_possession_is_refused() {
    let mut w = world(12);
    let (_, _, honest) = fresh_request(&mut w, 30);
    let refused = EnrolError::PossessionProofInvalid {
        enrolment_id: EnrolmentId(30),
    };

    let mut wrong_response = honest.clone();
    wrong_response.possession.response += Scalar::from(1u64);
    assert_eq!(w.ra.enrol(&wrong_response, &mut w.rng), Err(refused.clone()));

    // Someone else's key with a proof of possession of another secret.
    let mut borrowed_key = honest.clone();
    borrowed_key.user_key = w.alice.secret.public_key();
    assert_eq!(w.ra.enrol(&borrowed_key, &mut w.rng), Err(refused.clone()));

    // A request made for another RA's key.
    let rogue = RegistrationAuthority::random(&mut w.rng);
    let secret = UserSecret::random(&mut w.rng);
    let for_rogue = secret.enrolment_request(&rogue.public_key(), &honest.challenge, &mut w.rng);
    assert_eq!(w.ra.enrol(&for_rogue, &mut w.rng), Err(refused));

    assert!(w.ra.enrol(&honest, &mut w.rng).is_ok());
}

#[test]
fn a_request_cannot_be_replayed_for_another_identity_or_challenge() {
    let mut w = world(13);
    let (_, _, request) = fresh_request(&mut w, 40);
    // Relabelled to another id the RA has a challenge out for: the proof no longer holds.
    let other = w.ra.challenge(EnrolmentId(41), Jurisdiction(56), &mut w.rng);
    let mut relabelled = request.clone();
    relabelled.challenge = other;
    assert_eq!(
        w.ra.enrol(&relabelled, &mut w.rng),
        Err(EnrolError::PossessionProofInvalid {
            enrolment_id: EnrolmentId(41)
        })
    );
    // Another jurisdiction than the RA assigned.
    let mut rejurisdicted = request.clone();
    rejurisdicted.challenge.jurisdiction = Jurisdiction(57);
    assert_eq!(
        w.ra.enrol(&rejurisdicted, &mut w.rng),
        Err(EnrolError::ChallengeMismatch {
            enrolment_id: EnrolmentId(40)
        })
    );
    // A newer challenge supersedes the one the request answers.
    let _newer = w.ra.challenge(EnrolmentId(40), Jurisdiction(56), &mut w.rng);
    assert_eq!(
        w.ra.enrol(&request, &mut w.rng),
        Err(EnrolError::ChallengeMismatch {
            enrolment_id: EnrolmentId(40)
        })
    );
    // No challenge at all.
    let mut unsolicited = request;
    unsolicited.challenge.enrolment_id = EnrolmentId(99);
    assert_eq!(
        w.ra.enrol(&unsolicited, &mut w.rng),
        Err(EnrolError::NoChallenge {
            enrolment_id: EnrolmentId(99)
        })
    );
}

#[test]
fn a_second_enrolment_of_one_id_or_one_key_is_refused() {
    let mut w = world(14);
    // Alice (id 1) again with a new key.
    let secret = UserSecret::random(&mut w.rng);
    let challenge = w.ra.challenge(w.alice.enrolment_id(), Jurisdiction(56), &mut w.rng);
    let request = secret.enrolment_request(&w.ra.public_key(), &challenge, &mut w.rng);
    assert_eq!(
        w.ra.enrol(&request, &mut w.rng),
        Err(EnrolError::AlreadyEnrolled {
            enrolment_id: w.alice.enrolment_id()
        })
    );
    // Alice's key for a new id.
    let challenge = w.ra.challenge(EnrolmentId(77), Jurisdiction(56), &mut w.rng);
    let request = w
        .alice
        .secret
        .enrolment_request(&w.ra.public_key(), &challenge, &mut w.rng);
    assert_eq!(
        w.ra.enrol(&request, &mut w.rng),
        Err(EnrolError::KeyAlreadyEnrolled {
            holder: w.alice.enrolment_id()
        })
    );
    // Alice again with her own key: a fresh credential, same enrolment.
    let challenge = w.ra.challenge(w.alice.enrolment_id(), Jurisdiction(56), &mut w.rng);
    let request = w
        .alice
        .secret
        .enrolment_request(&w.ra.public_key(), &challenge, &mut w.rng);
    let again = w.ra.enrol(&request, &mut w.rng).unwrap();
    assert!(Identity::new(w.alice.secret.clone(), again, &w.ra.public_key()).is_ok());
    assert_eq!(w.ra.enrolled().count(), 2);
}

#[test]
fn a_zero_a_bar_is_refused() {
    let mut w = world(15);
    let (mut proof, opening) = w.spend(&[]);
    proof.signature.A_bar = crate::group::G1::zero();
    proof.signature.B_bar = crate::group::G1::zero();
    assert_eq!(
        proof.verify(&w.ra.public_key(), &opening.commitment(), &MESSAGE),
        Err(VerifyError::Signature)
    );
}
