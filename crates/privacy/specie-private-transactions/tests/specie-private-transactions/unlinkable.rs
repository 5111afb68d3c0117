//! Unlinkable transactions (kind 0x0a) at the sentinel: entering from an ordinary output,
//! paying unlinkably and leaving to an ordinary output are valid, and the compact transaction
//! creates the tokens and serial numbers; refused with their codes: a node without certifiers,
//! a clear amount that is not the transparent total, an owner auditor left out, a proof for
//! other transparent parts, a token certified by another group. The batch path gives each
//! transaction the verdict it gets alone.

use crate::common;

use common::{key, owned_input, pays, trusted_with};
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, Encode};
use specie_credential::unlinkable::{
    deal_certifiers, Certificate, CertifierGroup, CertifierSecret, SpentToken, TokenOpening, UnlinkableKeys,
};
use specie_credential::{
    AuditDirectory, AuditorSecret, EnrolmentId, Identity, Jurisdiction, RaPublicKey, RegistrationAuthority, UserSecret,
};
use specie_private_transactions::unlinkable::serial_uhs_id;
use specie_private_transactions::{PrivacyRules, UnlinkableBuild, UnlinkableTransaction};
use specie_sentinel::{validate, validate_batch, TrustedKeys};
use specie_transaction::{DecodeLimits, NonceMode, SpecieTransaction};

const ALICE: EnrolmentId = EnrolmentId(21);
const BOB: EnrolmentId = EnrolmentId(22);

struct World {
    rng: StdRng,
    authority: RaPublicKey,
    alice: Identity,
    group: CertifierGroup,
    certifiers: Vec<CertifierSecret>,
}

fn world() -> World {
    let mut rng = StdRng::seed_from_u64(9);
    let mut ra = RegistrationAuthority::from_seed(&[0x52; 32]);
    let secret = UserSecret::from_seed(&[0x21; 32]);
    let challenge = ra.challenge(ALICE, Jurisdiction(1), &mut rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).unwrap();
    let alice = Identity::new(secret, credential, &ra.public_key()).unwrap();
    let (group, certifiers) = deal_certifiers(2, 3, &mut rng).unwrap();
    World {
        rng,
        authority: ra.public_key(),
        alice,
        group,
        certifiers,
    }
}

fn owner_auditor() -> AuditorSecret {
    AuditorSecret::from_seed(&[0xb2; 32])
}

fn rules(w: &World) -> PrivacyRules {
    PrivacyRules::new(
        vec![],
        Some(w.authority.clone()),
        vec![owner_auditor().public()],
        vec![],
    )
    .with_certifiers(w.group.clone())
}

fn code(tx: &UnlinkableTransaction, trusted: &TrustedKeys) -> Option<&'static str> {
    validate(&SpecieTransaction::from(tx.clone()), trusted)
        .err()
        .map(|e| e.code())
}

fn build<'a>(spent: Vec<SpentToken<'a>>, outputs: Vec<TokenOpening>) -> UnlinkableBuild<'a> {
    UnlinkableBuild {
        transparent_inputs: vec![],
        spent,
        outputs,
        transparent_outputs: vec![],
        owner_auditors: vec![owner_auditor().public()],
    }
}

fn keys<'a>(authority: &'a RaPublicKey, certifiers: &'a CertifierGroup) -> UnlinkableKeys<'a> {
    UnlinkableKeys { authority, certifiers }
}

impl World {
    /// Alice's ordinary 100 enters as a token of hers, certified by two certifiers.
    fn enter(&mut self) -> (UnlinkableTransaction, TokenOpening, Certificate) {
        let opening = TokenOpening::random(ALICE, 100, &mut self.rng);
        let plan = UnlinkableBuild {
            transparent_inputs: vec![owned_input(&key(1), 100, 7, 0)],
            ..build(vec![], vec![opening.clone()])
        };
        let alice = self.alice.clone();
        let keys = UnlinkableKeys {
            authority: &self.authority,
            certifiers: &self.group,
        };
        let tx = plan
            .prove_and_sign(&[key(1)], &alice, &keys, NonceMode::Deterministic, &mut self.rng)
            .unwrap();
        let token = tx.created_tokens()[0].token;
        let shares: Vec<_> = self.certifiers[..2].iter().map(|c| c.certify(&token)).collect();
        let certificate = opening.certificate(&self.group, &shares).unwrap();
        (tx, opening, certificate)
    }
}

#[test]
fn entering_paying_and_leaving_are_valid_and_create_tokens_and_serial_numbers() {
    let mut w = world();
    let trusted = trusted_with(rules(&w));
    let (entered, opening, certificate) = w.enter();
    assert_eq!(code(&entered, &trusted), None);
    // Alice pays bob 70 unlinkably and takes 30 back to an ordinary output.
    let plan = UnlinkableBuild {
        transparent_outputs: vec![pays(&key(1), 30)],
        ..build(
            vec![SpentToken {
                opening: &opening,
                certificate: &certificate,
            }],
            vec![TokenOpening::random(BOB, 70, &mut w.rng)],
        )
    };
    let paid = plan
        .prove_and_sign(
            &[],
            &w.alice,
            &keys(&w.authority, &w.group),
            NonceMode::Deterministic,
            &mut w.rng,
        )
        .unwrap();
    assert_eq!(code(&paid, &trusted), None);
    // It round-trips as a core transaction; the compact form spends nothing by id and creates
    // the change, bob's token and alice's serial number.
    let bytes = SpecieTransaction::from(paid.clone()).encode();
    let decoded = SpecieTransaction::decode_exact_with(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(decoded.encode(), bytes);
    let compact = decoded.compact();
    assert!(compact.spent.is_empty());
    let serial = opening.serial_number(&w.alice).unwrap();
    assert_eq!(compact.created.len(), 3);
    assert_eq!(compact.created[1], paid.created_tokens()[0].uhs_id);
    assert_eq!(compact.created[2], serial_uhs_id(&serial));
    // The owner auditor reads both parties.
    let directory = AuditDirectory::new([ALICE, BOB]);
    let (spenders, payees) = paid.proof.party_ciphertexts(&owner_auditor().public());
    assert_eq!(directory.identify(&owner_auditor(), &spenders[0]), Ok(ALICE));
    assert_eq!(directory.identify(&owner_auditor(), &payees[0]), Ok(BOB));
    // A second spend of the token makes the same serial number id: the shards refuse it as an
    // id that exists (what the cluster test shows end to end).
    let again = build(
        vec![SpentToken {
            opening: &opening,
            certificate: &certificate,
        }],
        vec![TokenOpening::random(BOB, 100, &mut w.rng)],
    )
    .prove_and_sign(
        &[],
        &w.alice,
        &keys(&w.authority, &w.group),
        NonceMode::Deterministic,
        &mut w.rng,
    )
    .unwrap();
    assert_eq!(code(&again, &trusted), None);
    assert_eq!(
        SpecieTransaction::from(again).compact().created.last(),
        Some(&serial_uhs_id(&serial))
    );
}

#[test]
fn forgeries_are_refused_with_their_codes_alone_and_in_a_batch() {
    let mut w = world();
    let trusted = trusted_with(rules(&w));
    let (entered, _, _) = w.enter();
    // No certifier group trusted: no unlinkable transaction.
    let without = trusted_with(PrivacyRules::new(
        vec![],
        Some(w.authority.clone()),
        vec![owner_auditor().public()],
        vec![],
    ));
    assert_eq!(code(&entered, &without), Some("no_certifiers"));
    // The clear amount is not the transparent total: the input claims more than the proof.
    let mut inflated = entered.clone();
    inflated.transparent_inputs[0].data.value = 101;
    inflated.sign_transparent(&[key(1)], NonceMode::Deterministic).unwrap();
    assert_eq!(code(&inflated, &trusted), Some("unlinkable_issued_mismatch"));
    // An owner auditor with jurisdiction left out.
    let lax = UnlinkableBuild {
        transparent_inputs: vec![owned_input(&key(1), 5, 8, 0)],
        owner_auditors: vec![],
        ..build(vec![], vec![TokenOpening::random(ALICE, 5, &mut w.rng)])
    }
    .prove_and_sign(
        &[key(1)],
        &w.alice,
        &keys(&w.authority, &w.group),
        NonceMode::Deterministic,
        &mut w.rng,
    )
    .unwrap();
    assert_eq!(code(&lax, &trusted), Some("unlinkable_owner_auditors"));
    // The proof moved onto other transparent parts (its context changes).
    let mut moved = entered.clone();
    moved.transparent_inputs[0] = owned_input(&key(1), 100, 9, 0);
    moved.sign_transparent(&[key(1)], NonceMode::Deterministic).unwrap();
    assert_eq!(code(&moved, &trusted), Some("invalid_unlinkable_proof"));
    // A token certified by another group cannot be spent here.
    let (rogue, rogue_certifiers) = deal_certifiers(1, 1, &mut w.rng).unwrap();
    let forged = TokenOpening::random(ALICE, 1_000, &mut w.rng);
    let certificate = forged
        .certificate(&rogue, &[rogue_certifiers[0].certify(&forged.token())])
        .unwrap();
    let rogue_keys = UnlinkableKeys {
        authority: &w.authority,
        certifiers: &rogue,
    };
    let printed = build(
        vec![SpentToken {
            opening: &forged,
            certificate: &certificate,
        }],
        vec![TokenOpening::random(BOB, 1_000, &mut w.rng)],
    )
    .prove_and_sign(&[], &w.alice, &rogue_keys, NonceMode::Deterministic, &mut w.rng)
    .unwrap();
    assert_eq!(code(&printed, &trusted), Some("invalid_unlinkable_proof"));
    // In one batch, each gets the verdict it gets alone.
    let txs: Vec<SpecieTransaction> = [&entered, &moved, &printed, &lax]
        .into_iter()
        .map(|tx| SpecieTransaction::from(tx.clone()))
        .collect();
    let verdicts: Vec<Option<&str>> = validate_batch(&txs, &trusted)
        .into_iter()
        .map(|v| v.err().map(|e| e.code()))
        .collect();
    assert_eq!(
        verdicts,
        vec![
            None,
            Some("invalid_unlinkable_proof"),
            Some("invalid_unlinkable_proof"),
            Some("unlinkable_owner_auditors")
        ]
    );
}
