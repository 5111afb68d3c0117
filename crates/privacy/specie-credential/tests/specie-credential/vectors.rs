//! The vectors of `docs/credential-format.md` (`docs/credential-vectors.json`): the fixed
//! generators, keys from seeds, and one enrolment and two spends made with a seeded generator
//! (`StdRng::seed_from_u64(2026)`, rand 0.8's ChaCha12, fixed by Cargo.lock), so every byte is
//! reproducible. Any change to a domain string, a generator, the encoding or the proving order fails
//! this test. The stored proofs are also decoded, re-encoded, verified and audited.
//!
//! Regenerate after a deliberate format change (which also needs a new version byte):
//! `SPECIE_WRITE_VECTORS=1 cargo test -p specie-credential --test specie-credential vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;
use specie_codec::{Decode, Encode};
use specie_credential::{
    generator_encodings, AuditDirectory, AuditorSecret, Credential, EnrolmentChallenge, EnrolmentId, EnrolmentRequest,
    Identity, Jurisdiction, OwnerAudit, OwnerCommitment, OwnerOpening, RaPublicKey, RegistrationAuthority, SpendProof,
    UserSecret,
};
use specie_vectors::{assert_file_matches, read_or_write, stored_bytes, vectors_text, Vector};

const FILE: &str = "docs/credential-vectors.json";
const DESCRIPTION: &str = "Test vectors of docs/credential-format.md, generated and checked by crates/privacy/specie-credential/tests/specie-credential/vectors.rs";
const MESSAGE: [u8; 32] = [0xc0; 32];
const ENROLMENT_ID: EnrolmentId = EnrolmentId(0x0102_0304_0506_0708);
const JURISDICTION: Jurisdiction = Jurisdiction(276);
const RA_SEED: [u8; 32] = [0x0a; 32];
const USER_SEED: [u8; 32] = [0x05; 32];
const AUDITOR_SEED: [u8; 32] = [0xa1; 32];

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..").join(FILE)
}

fn vector(name: &str, description: &str, bytes: &[u8]) -> Vector {
    Vector {
        name: name.into(),
        description: description.into(),
        bytes: bytes.to_vec(),
    }
}

fn vectors() -> Vec<Vector> {
    let mut rng = StdRng::seed_from_u64(2026);
    let mut ra = RegistrationAuthority::from_seed(&RA_SEED);
    let secret = UserSecret::from_seed(&USER_SEED);
    let auditor = AuditorSecret::from_seed(&AUDITOR_SEED);
    let challenge = ra.challenge(ENROLMENT_ID, JURISDICTION, &mut rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).unwrap();
    let identity = Identity::new(secret.clone(), credential.clone(), &ra.public_key()).unwrap();
    let opening = OwnerOpening::random(ENROLMENT_ID, &mut rng);
    let spend = identity
        .prove_spend(&ra.public_key(), &opening, &MESSAGE, &[], &mut rng)
        .unwrap();
    let audited = identity
        .prove_spend(&ra.public_key(), &opening, &MESSAGE, &[auditor.public()], &mut rng)
        .unwrap();
    let owner_audit = OwnerAudit::prove(&opening, auditor.public(), &MESSAGE, &mut rng);

    let mut v: Vec<Vector> = generator_encodings()
        .into_iter()
        .map(|(name, bytes)| {
            vector(
                &format!("generator_{name}"),
                "compressed G1/G2 point hashed from its domain",
                &bytes,
            )
        })
        .collect();
    v.push(vector("ra_seed", "seed of RegistrationAuthority::from_seed", &RA_SEED));
    v.push(vector(
        "ra_public_key",
        "x·g2 (version 1, kind 0x01)",
        &ra.public_key().encode(),
    ));
    v.push(vector("user_seed", "seed of UserSecret::from_seed", &USER_SEED));
    v.push(vector(
        "user_public_key",
        "sk·h1, compressed",
        &secret.public_key().to_bytes(),
    ));
    v.push(vector(
        "auditor_seed",
        "seed of AuditorSecret::from_seed",
        &AUDITOR_SEED,
    ));
    v.push(vector("auditor_key", "a·G_aud (kind 0x06)", &auditor.public().encode()));
    v.push(vector(
        "enrolment_challenge",
        "eid 0x0102030405060708, jurisdiction 276, fresh nonce (kind 0x02)",
        &challenge.encode(),
    ));
    v.push(vector(
        "enrolment_request",
        "user key and proof of possession of sk (kind 0x03)",
        &request.encode(),
    ));
    v.push(vector(
        "credential",
        "BBS signature (A, e) over (sk, eid, jurisdiction) (kind 0x04)",
        &credential.encode(),
    ));
    v.push(vector(
        "owner_opening",
        "eid and blinding t the payer sends the payee (kind 0x0a)",
        &opening.encode(),
    ));
    v.push(vector(
        "owner_commitment",
        "eid·G_id + t·G_blind (kind 0x05)",
        &opening.commitment().encode(),
    ));
    v.push(vector(
        "audit_tag",
        "eid·G_id, what an auditor decrypts",
        &ENROLMENT_ID.audit_tag().0,
    ));
    v.push(vector("message", "the transaction digest the spends sign", &MESSAGE));
    v.push(vector(
        "spend_proof",
        "spend proof without auditors (kind 0x08)",
        &spend.encode(),
    ));
    v.push(vector(
        "spend_proof_audited",
        "spend proof with the auditor's ciphertext (kind 0x08)",
        &audited.encode(),
    ));
    v.push(vector(
        "owner_ciphertext",
        "the audited spend's ciphertext alone (kind 0x07)",
        &audited.auditor_ciphertexts()[0].encode(),
    ));
    v.push(vector(
        "owner_audit",
        "output-side audit for the commitment and message (kind 0x09)",
        &owner_audit.encode(),
    ));
    v
}

fn stored() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| read_or_write(&path(), || vectors_text(DESCRIPTION, &vectors())))
}

#[test]
fn the_code_makes_the_stored_vectors() {
    assert_file_matches(stored(), FILE, DESCRIPTION, &vectors());
}

#[test]
fn the_stored_vectors_decode_verify_and_audit() {
    let stored: Value = serde_json::from_str(stored()).unwrap();
    let bytes = |name: &str| stored_bytes(&stored, name);
    let ra = RaPublicKey::decode_exact(&bytes("ra_public_key")).unwrap();
    let owner = OwnerCommitment::decode_exact(&bytes("owner_commitment")).unwrap();
    let request = EnrolmentRequest::decode_exact(&bytes("enrolment_request")).unwrap();
    assert!(request.possession_holds(&ra));
    assert_eq!(
        request.challenge(),
        &EnrolmentChallenge::decode_exact(&bytes("enrolment_challenge")).unwrap()
    );
    let credential = Credential::decode_exact(&bytes("credential")).unwrap();
    assert_eq!(credential.verify(&UserSecret::from_seed(&USER_SEED), &ra), Ok(()));
    let auditor = AuditorSecret::from_seed(&AUDITOR_SEED);
    let directory = AuditDirectory::new([ENROLMENT_ID]);
    for name in ["spend_proof", "spend_proof_audited"] {
        let proof = SpendProof::decode_exact(&bytes(name)).unwrap();
        assert_eq!(proof.encode(), bytes(name));
        assert_eq!(proof.verify(&ra, &owner, &MESSAGE), Ok(()));
        assert!(proof.verify(&ra, &owner, &[0xc1; 32]).is_err());
        for ciphertext in proof.auditor_ciphertexts() {
            assert_eq!(directory.identify(&auditor, &ciphertext), Ok(ENROLMENT_ID));
        }
    }
    let audit = OwnerAudit::decode_exact(&bytes("owner_audit")).unwrap();
    assert_eq!(audit.verify(&owner, &MESSAGE), Ok(()));
    assert_eq!(directory.identify(&auditor, audit.ciphertext()), Ok(ENROLMENT_ID));
    assert_eq!(
        OwnerOpening::decode_exact(&bytes("owner_opening"))
            .unwrap()
            .commitment(),
        owner
    );
}
