//! The registration and spending flows end to end: enrol, pay to a fresh owner commitment, spend
//! with and without auditors, audit, verify one by one and in a batch.

use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, Encode};
use specie_credential::{
    verify_batch, AuditDirectory, AuditorSecret, Credential, EnrolError, EnrolmentId, EnrolmentRequest, Identity,
    Jurisdiction, OwnerAudit, OwnerCommitment, OwnerOpening, RegistrationAuthority, SpendProof, UserSecret,
};

fn enrol(ra: &mut RegistrationAuthority, id: u64, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::random(rng);
    let challenge = ra.challenge(EnrolmentId(id), Jurisdiction(276), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let request = EnrolmentRequest::decode_exact(&request.encode()).unwrap();
    let credential = ra.enrol(&request, rng).unwrap();
    let credential = Credential::decode_exact(&credential.encode()).unwrap();
    Identity::new(secret, credential, &ra.public_key()).unwrap()
}

#[test]
fn enrol_pay_spend_and_audit() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let alice = enrol(&mut ra, 1001, &mut rng);
    let bob = enrol(&mut ra, 1002, &mut rng);
    assert_eq!(ra.enrolled().count(), 2);

    // The payer makes bob's output and sends him the opening.
    let opening = OwnerOpening::random(bob.enrolment_id(), &mut rng);
    let opening = OwnerOpening::decode_exact(&opening.encode()).unwrap();
    let owner = opening.commitment();
    assert_ne!(owner, OwnerOpening::random(bob.enrolment_id(), &mut rng).commitment());

    let auditor = AuditorSecret::random(&mut rng);
    let tx = [0x42; 32];
    let proof = bob
        .prove_spend(&ra.public_key(), &opening, &tx, &[auditor.public()], &mut rng)
        .unwrap();
    let proof = SpendProof::decode_exact(&proof.encode()).unwrap();
    assert_eq!(proof.verify(&ra.public_key(), &owner, &tx), Ok(()));
    assert!(proof.verify(&ra.public_key(), &owner, &[0x43; 32]).is_err());

    let directory = AuditDirectory::new([alice.enrolment_id(), bob.enrolment_id()]);
    let ciphertext = proof.auditor_ciphertexts()[0];
    assert_eq!(directory.identify(&auditor, &ciphertext), Ok(bob.enrolment_id()));
    assert!(directory
        .identify(&AuditorSecret::random(&mut rng), &ciphertext)
        .is_err());

    // Alice cannot spend bob's output.
    assert!(alice
        .prove_spend(&ra.public_key(), &opening, &tx, &[], &mut rng)
        .is_err());

    // The output-side audit.
    let audit = OwnerAudit::prove(&opening, auditor.public(), &tx, &mut rng);
    let audit = OwnerAudit::decode_exact(&audit.encode()).unwrap();
    assert_eq!(audit.verify(&owner, &tx), Ok(()));
    assert_eq!(directory.identify(&auditor, audit.ciphertext()), Ok(bob.enrolment_id()));
    let other: OwnerCommitment = OwnerOpening::random(bob.enrolment_id(), &mut rng).commitment();
    assert!(audit.verify(&other, &tx).is_err());
}

#[test]
fn batches_verify_and_name_the_bad_proof() {
    let mut rng = StdRng::seed_from_u64(8);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let users: Vec<Identity> = (0..4).map(|i| enrol(&mut ra, 10 + i, &mut rng)).collect();
    let openings: Vec<OwnerOpening> = users
        .iter()
        .map(|u| OwnerOpening::random(u.enrolment_id(), &mut rng))
        .collect();
    let owners: Vec<OwnerCommitment> = openings.iter().map(OwnerOpening::commitment).collect();
    let messages: Vec<[u8; 32]> = (0..4u8).map(|i| [i; 32]).collect();
    let proofs: Vec<SpendProof> = users
        .iter()
        .zip(&openings)
        .zip(&messages)
        .map(|((u, o), m)| u.prove_spend(&ra.public_key(), o, m, &[], &mut rng).unwrap())
        .collect();
    let items: Vec<_> = (0..4).map(|i| (&proofs[i], &owners[i], &messages[i])).collect();
    assert_eq!(verify_batch(&ra.public_key(), &items), Ok(()));
    assert_eq!(verify_batch(&ra.public_key(), &[]), Ok(()));
    let mut swapped = items.clone();
    swapped[2].2 = &messages[3];
    let err = verify_batch(&ra.public_key(), &swapped).unwrap_err();
    assert!(err.to_string().starts_with("spend proof 2 of the batch"), "{err}");
}

#[test]
fn the_ra_refuses_a_second_key_for_an_enrolled_id() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let _first = enrol(&mut ra, 5, &mut rng);
    let challenge = ra.challenge(EnrolmentId(5), Jurisdiction(276), &mut rng);
    let request = UserSecret::random(&mut rng).enrolment_request(&ra.public_key(), &challenge, &mut rng);
    assert_eq!(
        ra.enrol(&request, &mut rng),
        Err(EnrolError::AlreadyEnrolled {
            enrolment_id: EnrolmentId(5)
        })
    );
}
