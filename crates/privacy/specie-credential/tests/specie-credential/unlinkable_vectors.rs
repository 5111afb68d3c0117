//! The vectors of `docs/unlinkable-format.md` (`docs/unlinkable-vectors.json`): a certifier group
//! dealt, a token issued, certified and spent, all made with a seeded generator
//! (`StdRng::seed_from_u64(2027)`, rand 0.8's ChaCha12, fixed by Cargo.lock), so every byte is
//! reproducible. Any change to a domain string, a generator, an encoding or the proving order fails
//! this test. The stored objects are also decoded, re-encoded and checked: the certificate
//! assembled from the stored shares, the transfers verified (and not for another message).
//!
//! Regenerate after a deliberate format change (which also needs a new version byte):
//! `SPECIE_WRITE_VECTORS=1 cargo test -p specie-credential --test specie-credential unlinkable_vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;
use specie_codec::{Decode, Encode};
use specie_credential::unlinkable::*;
use specie_credential::{
    AuditorSecret, EnrolmentId, Identity, Jurisdiction, RaPublicKey, RegistrationAuthority, UserSecret,
};
use specie_vectors::{assert_file_matches, read_or_write, stored_bytes, vectors_text, Vector};

const FILE: &str = "docs/unlinkable-vectors.json";
const DESCRIPTION: &str = "Test vectors of docs/unlinkable-format.md, generated and checked by crates/privacy/specie-credential/tests/specie-credential/unlinkable_vectors.rs";
const MESSAGE: [u8; 32] = [0xd0; 32];
const OWNER: EnrolmentId = EnrolmentId(0x0102_0304_0506_0708);
const PAYEE: EnrolmentId = EnrolmentId(9);
const RA_SEED: [u8; 32] = [0x0a; 32];
const USER_SEED: [u8; 32] = [0x05; 32];
const AUDITOR_SEED: [u8; 32] = [0x0d; 32];

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
    let mut rng = StdRng::seed_from_u64(2027);
    let mut ra = RegistrationAuthority::from_seed(&RA_SEED);
    let authority = ra.public_key();
    let secret = UserSecret::from_seed(&USER_SEED);
    let challenge = ra.challenge(OWNER, Jurisdiction(276), &mut rng);
    let request = secret.enrolment_request(&authority, &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).unwrap();
    let owner = Identity::new(secret, credential.clone(), &authority).unwrap();
    let (group, certifiers) = deal_certifiers(2, 3, &mut rng).unwrap();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &group,
    };
    let opening = TokenOpening::random(OWNER, 1000, &mut rng);
    let token = opening.token();
    let issue = owner
        .prove_unlinkable(
            &keys,
            &TransferPlan {
                inputs: &[],
                outputs: std::slice::from_ref(&opening),
                amounts: PublicAmounts {
                    issued: 1000,
                    redeemed: 0,
                },
                auditors: &[],
            },
            &MESSAGE,
            &mut rng,
        )
        .unwrap();
    let shares: Vec<CertificateShare> = certifiers[1..].iter().map(|c| c.certify(&token)).collect();
    let certificate = opening.certificate(&group, &shares).unwrap();
    let outputs = [
        TokenOpening::random(PAYEE, 600, &mut rng),
        TokenOpening::random(OWNER, 400, &mut rng),
    ];
    let transfer = owner
        .prove_unlinkable(
            &keys,
            &TransferPlan {
                inputs: &[SpentToken {
                    opening: &opening,
                    certificate: &certificate,
                }],
                outputs: &outputs,
                amounts: PublicAmounts::default(),
                auditors: &[AuditorSecret::from_seed(&AUDITOR_SEED).public()],
            },
            &MESSAGE,
            &mut rng,
        )
        .unwrap();

    vec![
        vector("ra_seed", "seed of RegistrationAuthority::from_seed", &RA_SEED),
        vector(
            "ra_public_key",
            "the RA's key (docs/credential-format.md, kind 0x01)",
            &authority.encode(),
        ),
        vector("user_seed", "seed of UserSecret::from_seed", &USER_SEED),
        vector(
            "credential",
            "the owner's credential, eid 0x0102030405060708 (kind 0x04)",
            &credential.encode(),
        ),
        vector(
            "certifier_group",
            "a 2-of-3 group: the Coconut key, then each member's (kind 0x0e)",
            &group.encode(),
        ),
        vector(
            "certifier_secret_2",
            "certifier 2's share of the key (kind 0x0f)",
            &certifiers[1].encode(),
        ),
        vector(
            "token_opening",
            "eid, value 1000, r, t and the o_j (kind 0x0c)",
            &opening.encode(),
        ),
        vector("token", "cm and c_eid, c_v, c_r (kind 0x0b)", &token.encode()),
        vector(
            "certificate_share_2",
            "certifier 2's blind signature on the token (kind 0x10)",
            &shares[0].encode(),
        ),
        vector("certificate_share_3", "certifier 3's (kind 0x10)", &shares[1].encode()),
        vector(
            "certificate",
            "the shares unblinded and combined (kind 0x11)",
            &certificate.encode(),
        ),
        vector(
            "serial_number",
            "G_sn / (sk + r) of the token for its owner (kind 0x0d)",
            &opening.serial_number(&owner).unwrap().encode(),
        ),
        vector("message", "the transaction digest both proofs are bound to", &MESSAGE),
        vector(
            "issue",
            "no input, 1000 issued, the token as output (kind 0x13)",
            &issue.encode(),
        ),
        vector(
            "transfer",
            "the token spent into 600 and 400, parties and values encrypted to the owner auditor of seed \
             0x0d…0d (kind 0x13)",
            &transfer.encode(),
        ),
    ]
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
fn the_stored_vectors_decode_certify_and_verify() {
    let stored: Value = serde_json::from_str(stored()).unwrap();
    let bytes = |name: &str| stored_bytes(&stored, name);
    let authority = RaPublicKey::decode_exact(&bytes("ra_public_key")).unwrap();
    let group = CertifierGroup::decode_exact(&bytes("certifier_group")).unwrap();
    let opening = TokenOpening::decode_exact(&bytes("token_opening")).unwrap();
    assert_eq!(Token::decode_exact(&bytes("token")).unwrap(), opening.token());
    let secret = CertifierSecret::decode_exact(&bytes("certifier_secret_2")).unwrap();
    let share = CertificateShare::decode_exact(&bytes("certificate_share_2")).unwrap();
    assert_eq!(secret.certify(&opening.token()), share);
    let shares = [
        share,
        CertificateShare::decode_exact(&bytes("certificate_share_3")).unwrap(),
    ];
    let certificate = Certificate::decode_exact(&bytes("certificate")).unwrap();
    assert_eq!(opening.certificate(&group, &shares), Ok(certificate));
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &group,
    };
    let serial = SerialNumber::decode_exact(&bytes("serial_number")).unwrap();
    for name in ["issue", "transfer"] {
        let proof = UnlinkableTransfer::decode_exact(&bytes(name)).unwrap();
        assert_eq!(proof.encode(), bytes(name));
        assert_eq!(proof.verify(&keys, &MESSAGE), Ok(()));
        assert!(proof.verify(&keys, &[0xd1; 32]).is_err());
    }
    let transfer = UnlinkableTransfer::decode_exact(&bytes("transfer")).unwrap();
    assert_eq!(transfer.serial_numbers().collect::<Vec<_>>(), vec![&serial]);
    let auditor = AuditorSecret::from_seed(&AUDITOR_SEED);
    let values: Vec<u64> = (transfer.value_ciphertexts(&auditor.public()).iter())
        .map(|ciphertext| auditor.read_value(ciphertext).unwrap())
        .collect();
    assert_eq!(values, [600, 400]);
}
