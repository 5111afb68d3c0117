//! Anonymous transactions (kind 0x08) at the sentinel (moved from `specie-sentinel`'s tests), in
//! both value modes: entering from ordinary
//! outputs, paying anonymously and leaving to an ordinary output are valid; every forgery is
//! refused with its code: a spend without a credential (another RA's), a spend proof for another
//! transaction or replayed into a new one, a malleated owner commitment, an unbalanced clear
//! payment, a hidden value spent in clear, an owner auditor left out or lied to, a wrong count.
//! The batch path gives each transaction the verdict it gets alone.

use crate::common;

use common::{issuers_only, key, owned_input, pays, trusted, trusted_with};
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_credential::{
    AuditDirectory, AuditorKey, AuditorSecret, EnrolmentId, Identity, Jurisdiction, OwnerAudit, OwnerOpening,
    RaPublicKey, RegistrationAuthority, UserSecret,
};
use specie_private_transactions::{
    AnonymousErrorCode, AnonymousPlan, AnonymousSpend, AnonymousTransaction, AnonymousValue, AnonymousValues,
    PrivacyRules,
};
use specie_sentinel::{validate, validate_batch, CapabilityError, TrustedKeys, ValidationError};
use specie_transaction::{NonceMode, SpecieTransaction};

const ALICE: EnrolmentId = EnrolmentId(11);
const BOB: EnrolmentId = EnrolmentId(12);

fn ra(seed: u8) -> RegistrationAuthority {
    RegistrationAuthority::from_seed(&[seed; 32])
}

fn enrol(ra: &mut RegistrationAuthority, id: EnrolmentId, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::from_seed(&[id.0 as u8; 32]);
    let challenge = ra.challenge(id, Jurisdiction(1), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let credential = ra.enrol(&request, rng).unwrap();
    Identity::new(secret, credential, &ra.public_key()).unwrap()
}

fn owner_auditor() -> AuditorSecret {
    AuditorSecret::from_seed(&[0xb1; 32])
}

fn value_auditor() -> specie_confidential::AuditorSecret {
    specie_confidential::AuditorSecret::from_seed(&[0xa1; 32])
}

/// The privacy rules: the value auditor, `authority`, the owner auditors `owner_auditors` and
/// the active auditors `active`.
fn rules(authority: &RaPublicKey, owner_auditors: Vec<AuditorKey>, active: Vec<[u8; 32]>) -> TrustedKeys {
    trusted_with(PrivacyRules::new(
        vec![value_auditor().public().to_bytes()],
        Some(authority.clone()),
        owner_auditors,
        active,
    ))
}

/// The value auditor, `authority` and the owner auditor; no active auditor.
fn policy(authority: &RaPublicKey) -> TrustedKeys {
    rules(authority, vec![owner_auditor().public()], vec![])
}

fn code(tx: &AnonymousTransaction, trusted: &TrustedKeys) -> Option<&'static str> {
    validate(&SpecieTransaction::from(tx.clone()), trusted)
        .err()
        .map(|e| e.code())
}

struct World {
    rng: StdRng,
    authority: RaPublicKey,
    alice: Identity,
    bob: Identity,
}

fn world() -> World {
    let mut rng = StdRng::seed_from_u64(8);
    let mut authority = ra(0x51);
    let alice = enrol(&mut authority, ALICE, &mut rng);
    let bob = enrol(&mut authority, BOB, &mut rng);
    World {
        rng,
        authority: authority.public_key(),
        alice,
        bob,
    }
}

fn plan(hide_values: bool) -> AnonymousPlan {
    AnonymousPlan {
        transparent_inputs: vec![],
        anonymous_inputs: vec![],
        outputs: vec![],
        transparent_outputs: vec![],
        hide_values,
        value_auditors: vec![value_auditor().public()],
        owner_auditors: vec![owner_auditor().public()],
    }
}

/// Alice's ordinary 100 enters as an anonymous output of hers; returns it with its openings.
fn enter(w: &mut World, hide_values: bool) -> (AnonymousTransaction, AnonymousSpend) {
    let alice_key = key(1);
    let owner = OwnerOpening::random(ALICE, &mut w.rng);
    let plan = AnonymousPlan {
        transparent_inputs: vec![owned_input(&alice_key, 100, 7, 0)],
        outputs: vec![(owner, 100)],
        ..plan(hide_values)
    };
    let (tx, openings) = plan
        .prove_and_sign(&[alice_key], None, &w.authority, NonceMode::Deterministic, &mut w.rng)
        .unwrap();
    let spend = AnonymousSpend {
        input: tx.created_anonymous_outputs()[0].to_input(),
        owner,
        value: openings[0],
    };
    (tx, spend)
}

/// Alice pays bob 70 anonymously and takes 30 back to an ordinary output.
fn pay(w: &mut World, spend: AnonymousSpend, hide_values: bool) -> (AnonymousTransaction, AnonymousPlan) {
    let plan = AnonymousPlan {
        anonymous_inputs: vec![spend],
        outputs: vec![(OwnerOpening::random(BOB, &mut w.rng), 70)],
        transparent_outputs: vec![pays(&key(1), 30)],
        ..plan(hide_values)
    };
    let (tx, _) = plan
        .prove_and_sign(&[], Some(&w.alice), &w.authority, NonceMode::Deterministic, &mut w.rng)
        .unwrap();
    (tx, plan)
}

#[test]
fn entering_paying_and_leaving_are_valid_in_both_modes_and_the_auditor_names_the_owners() {
    for hide_values in [false, true] {
        let mut w = world();
        let trusted = policy(&w.authority);
        let (entered, spend) = enter(&mut w, hide_values);
        assert_eq!(code(&entered, &trusted), None, "hide_values {hide_values}");
        let (paid, _) = pay(&mut w, spend, hide_values);
        assert_eq!(code(&paid, &trusted), None, "hide_values {hide_values}");
        let value = paid.created_anonymous_outputs()[0].value;
        assert_eq!(matches!(value, AnonymousValue::Hidden(_)), hide_values);
        // The owner auditor reads the payee (the output's audit) and the payer (the spend proof).
        let directory = AuditDirectory::new([ALICE, BOB]);
        let payee = directory.identify(&owner_auditor(), paid.owner_audits[0].ciphertext());
        assert_eq!(payee.unwrap(), BOB);
        let payer = directory.identify(&owner_auditor(), &paid.spend_proofs[0].auditor_ciphertexts()[0]);
        assert_eq!(payer.unwrap(), ALICE);
        // Outputs: the transparent change first, then bob's; the compact form spends alice's.
        let compact = SpecieTransaction::from(paid.clone()).compact();
        assert_eq!(compact.spent, vec![paid.anonymous_inputs[0].uhs_id()]);
        assert_eq!(compact.created.len(), 2);
        assert_eq!(compact.created[1], paid.created_anonymous_outputs()[0].uhs_id);
        assert_eq!(paid.created_anonymous_outputs()[0].outpoint.index, 1);
    }
}

#[test]
fn a_spend_without_a_credential_of_the_trusted_authority_is_refused() {
    let mut w = world();
    let (_, spend) = enter(&mut w, false);
    // Mallory is enrolled, but by another RA: her proof of owning alice's output cannot verify.
    let mut rogue = ra(0x66);
    let mallory_as_alice = enrol(&mut rogue, ALICE, &mut w.rng);
    let plan = AnonymousPlan {
        anonymous_inputs: vec![spend],
        outputs: vec![(OwnerOpening::random(BOB, &mut w.rng), 100)],
        ..plan(false)
    };
    let (forged, _) = plan
        .prove_and_sign(
            &[],
            Some(&mallory_as_alice),
            &rogue.public_key(),
            NonceMode::Deterministic,
            &mut w.rng,
        )
        .unwrap();
    assert_eq!(code(&forged, &policy(&w.authority)), Some("invalid_spend_proof"));
    // Bob holds a genuine credential, but for another id than the output's owner.
    assert!(plan
        .prove_and_sign(&[], Some(&w.bob), &w.authority, NonceMode::Deterministic, &mut w.rng)
        .is_err());
    // A node that trusts no RA takes no anonymous transaction at all.
    let (entered, _) = enter(&mut w, false);
    assert_eq!(code(&entered, &trusted()), Some("no_registration_authority"));
    let refusal = validate(&SpecieTransaction::from(entered.clone()), &trusted()).unwrap_err();
    assert_eq!(refusal, AnonymousErrorCode::NoRegistrationAuthority.into_error());
    assert_eq!(
        refusal,
        ValidationError::Capability(CapabilityError {
            category: "anonymous",
            code: "no_registration_authority",
            message: "this node trusts no registration authority".to_owned(),
        })
    );
    // Nor does a node without privacy rules: the kind is not accepted.
    assert_eq!(code(&entered, &issuers_only()), Some("kind_not_accepted"));
}

#[test]
fn a_spend_proof_for_another_transaction_or_replayed_is_refused() {
    let mut w = world();
    let trusted = policy(&w.authority);
    let (_, spend) = enter(&mut w, true);
    let (paid, paid_plan) = pay(&mut w, spend.clone(), true);
    let (other, _) = pay(&mut w, spend, true);
    assert_ne!(paid.txid(), other.txid());
    let mut replayed = other.clone();
    replayed.spend_proofs = paid.spend_proofs.clone();
    assert_eq!(code(&replayed, &trusted), Some("invalid_spend_proof"));
    // The same transaction with its change sent elsewhere: every proof bound to the old context
    // fails, the values' proof first (then the owner audits, then the spend proofs).
    let mut redirected = paid.clone();
    redirected.transparent_outputs = vec![pays(&key(9), 30)];
    assert_eq!(code(&redirected, &trusted), Some("invalid_confidential_proof"));
    // With the audits made afresh for the new context, the values' proof still fails.
    let context = redirected.context();
    redirected.owner_audits = vec![OwnerAudit::prove(
        &paid_plan.outputs[0].0,
        owner_auditor().public(),
        &context,
        &mut w.rng,
    )];
    assert_eq!(code(&redirected, &trusted), Some("invalid_confidential_proof"));
    // A payment in clear redirected: no values' proof, so its owner audits fail first.
    let (_, spend) = enter(&mut w, false);
    let (paid_in_clear, _) = pay(&mut w, spend, false);
    let mut redirected = paid_in_clear.clone();
    redirected.transparent_outputs = vec![pays(&key(9), 30)];
    assert_eq!(code(&redirected, &trusted), Some("invalid_owner_audit"));
}

#[test]
fn a_malleated_owner_commitment_is_refused() {
    let mut w = world();
    let trusted = policy(&w.authority);
    let (_, spend) = enter(&mut w, false);
    let (paid, _) = pay(&mut w, spend, false);
    // The spent output named with another owner (bob's fresh commitment): the proof is for
    // alice's. With owner auditors the audits (bound to the inputs too) fail first; without, the
    // spend proof.
    let mut renamed = paid.clone();
    renamed.anonymous_inputs[0].owner = paid.owners[0];
    assert_eq!(code(&renamed, &trusted), Some("invalid_owner_audit"));
    let (_, spend) = enter(&mut w, false);
    let plan = AnonymousPlan {
        anonymous_inputs: vec![spend],
        outputs: vec![(OwnerOpening::random(BOB, &mut w.rng), 100)],
        owner_auditors: vec![],
        ..plan(false)
    };
    let (unaudited, _) = plan
        .prove_and_sign(&[], Some(&w.alice), &w.authority, NonceMode::Deterministic, &mut w.rng)
        .unwrap();
    let no_owner_auditors = rules(&w.authority, vec![], vec![]);
    assert_eq!(code(&unaudited, &no_owner_auditors), None);
    let mut renamed = unaudited.clone();
    renamed.anonymous_inputs[0].owner = unaudited.owners[0];
    assert_eq!(code(&renamed, &no_owner_auditors), Some("invalid_spend_proof"));
    // The payee's commitment swapped for another: its owner audit no longer matches it.
    let mut swapped = paid.clone();
    swapped.owners[0] = paid.anonymous_inputs[0].owner;
    assert_eq!(code(&swapped, &trusted), Some("invalid_owner_audit"));
}

#[test]
fn clear_values_must_balance_and_cannot_spend_hidden_values() {
    let mut w = world();
    let trusted = policy(&w.authority);
    let (_, spend) = enter(&mut w, false);
    let (paid, _) = pay(&mut w, spend, false);
    let mut inflated = paid.clone();
    inflated.values = AnonymousValues::Clear(vec![71]);
    assert_eq!(code(&inflated, &trusted), Some("asymmetric_values"));
    let mut zero = paid.clone();
    zero.values = AnonymousValues::Clear(vec![0]);
    assert_eq!(code(&zero, &trusted), Some("anonymous_zero_value"));
    let mut missing = paid.clone();
    missing.values = AnonymousValues::Clear(vec![]);
    assert_eq!(code(&missing, &trusted), Some("anonymous_owner_count"));
    let (_, hidden) = enter(&mut w, true);
    let plan = AnonymousPlan {
        anonymous_inputs: vec![hidden.clone()],
        outputs: vec![(OwnerOpening::random(BOB, &mut w.rng), 100)],
        ..plan(false)
    };
    assert!(plan
        .prove_and_sign(&[], Some(&w.alice), &w.authority, NonceMode::Deterministic, &mut w.rng)
        .is_err());
    let mut smuggled = paid.clone();
    smuggled.anonymous_inputs[0] = hidden.input;
    assert_eq!(code(&smuggled, &trusted), Some("anonymous_hidden_input_in_clear"));
}

#[test]
fn every_owner_auditor_must_be_given_every_owner() {
    let mut w = world();
    let trusted = policy(&w.authority);
    let (entered, spend) = enter(&mut w, true);
    let mut unaudited = entered.clone();
    unaudited.owner_audits.clear();
    assert_eq!(code(&unaudited, &trusted), Some("owner_auditor_missing"));
    // A payer who leaves the auditor out of its spend proof.
    let plan = AnonymousPlan {
        anonymous_inputs: vec![spend],
        outputs: vec![(OwnerOpening::random(BOB, &mut w.rng), 100)],
        owner_auditors: vec![],
        ..plan(true)
    };
    let (hidden_payer, _) = plan
        .prove_and_sign(&[], Some(&w.alice), &w.authority, NonceMode::Deterministic, &mut w.rng)
        .unwrap();
    assert_eq!(code(&hidden_payer, &trusted), Some("owner_auditor_missing"));
    // Another auditor's key in its place.
    let other = AuditorSecret::from_seed(&[0xb2; 32]).public();
    let strict = rules(&w.authority, vec![other], vec![]);
    assert_eq!(code(&entered, &strict), Some("owner_auditor_missing"));
}

#[test]
fn a_batch_gives_each_transaction_its_own_verdict() {
    let mut w = world();
    let trusted = policy(&w.authority);
    let mut txs = vec![];
    for hide_values in [false, true, false, true] {
        let (entered, spend) = enter(&mut w, hide_values);
        let (paid, _) = pay(&mut w, spend, hide_values);
        txs.push(SpecieTransaction::from(entered));
        txs.push(SpecieTransaction::from(paid));
    }
    let good = txs[3].capability::<AnonymousTransaction>().unwrap().clone();
    let mut replayed = txs[1].capability::<AnonymousTransaction>().unwrap().clone();
    replayed.spend_proofs = good.spend_proofs.clone();
    txs.push(SpecieTransaction::from(replayed));
    let alone: Vec<Option<&str>> = txs
        .iter()
        .map(|tx| validate(tx, &trusted).err().map(|e| e.code()))
        .collect();
    let together: Vec<Option<&str>> = validate_batch(&txs, &trusted)
        .into_iter()
        .map(|v| v.err().map(|e| e.code()))
        .collect();
    assert_eq!(alone, together);
    assert_eq!(alone.iter().filter(|v| v.is_none()).count(), 8);
    assert_eq!(alone[8], Some("invalid_spend_proof"));
}

#[test]
fn an_active_auditor_must_co_sign_every_private_transaction() {
    use specie_transaction::signing::xonly_bytes;
    use specie_transaction::P2pkWitness;
    let mut w = world();
    let auditor = key(0x71);
    let trusted = rules(
        &w.authority,
        vec![owner_auditor().public()],
        vec![xonly_bytes(&auditor)],
    );
    let (entered, spend) = enter(&mut w, true);
    let (paid, _) = pay(&mut w, spend, true);
    for tx in [entered, paid] {
        assert_eq!(code(&tx, &trusted), Some("active_auditor_missing"));
        let cosigned_by = |signer: &secp256k1::Keypair, message: &[u8; 32]| {
            let mut cosigned = tx.clone();
            let witness = P2pkWitness::sign(signer, message, NonceMode::Deterministic).to_witness();
            cosigned.witnesses.push(witness);
            cosigned
        };
        let txid = tx.txid().0;
        assert_eq!(code(&cosigned_by(&auditor, &txid), &trusted), None);
        assert_eq!(
            code(&cosigned_by(&key(0x72), &txid), &trusted),
            Some("invalid_cosignature")
        );
        assert_eq!(
            code(&cosigned_by(&auditor, &[0; 32]), &trusted),
            Some("invalid_cosignature")
        );
        // Without active auditors, a co-signature is one witness too many.
        assert_eq!(
            code(&cosigned_by(&auditor, &txid), &policy(&w.authority)),
            Some("missing_witness")
        );
    }
}
