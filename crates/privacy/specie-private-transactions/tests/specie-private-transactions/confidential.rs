//! Confidential transactions at the sentinel (moved from `specie-sentinel`'s tests): shielding
//! ordinary outputs, paying confidentially and unshielding are valid; every forgery is refused
//! with its code: a wrong clear value, a proof for another transaction, a proof replayed into a
//! new one, a malleated commitment, an auditor left out, a bad witness, a tampered proof. The
//! batch path verifies the proofs together and gives each transaction the verdict it gets alone.

use crate::common;

use common::{issuers_only, key, owned_input, pays, trusted, trusted_with};
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_confidential::{AuditorKey, AuditorSecret, Opening};
use specie_private_transactions::{ConfidentialErrorCode, ConfidentialPlan, ConfidentialTransaction, PrivacyRules};
use specie_sentinel::{validate, CapabilityError, TrustedKeys, ValidationError};
use specie_transaction::{NonceMode, SpecieTransaction};

fn owner(key: &secp256k1::Keypair) -> [u8; 32] {
    pays(key, 1).witness_program_commitment
}

fn auditor() -> AuditorSecret {
    AuditorSecret::from_seed(&[0xa1; 32])
}

/// The privacy rules with the auditor of seed `a1`×32 and the active auditors `active`.
fn with_auditor_and_active(active: Vec<[u8; 32]>) -> TrustedKeys {
    trusted_with(PrivacyRules::new(
        vec![auditor().public().to_bytes()],
        None,
        vec![],
        active,
    ))
}

fn with_auditor() -> TrustedKeys {
    with_auditor_and_active(vec![])
}

fn auditors() -> Vec<AuditorKey> {
    vec![auditor().public()]
}

fn code(tx: &ConfidentialTransaction, trusted: &TrustedKeys) -> Option<&'static str> {
    validate(&SpecieTransaction::from(tx.clone()), trusted)
        .err()
        .map(|e| e.code())
}

/// Alice shields 100 and 50 into confidential outputs of 120 (to bob) and 30 (to herself).
fn shield(rng: &mut StdRng) -> (ConfidentialTransaction, Vec<Opening>) {
    let alice = key(1);
    let plan = ConfidentialPlan {
        transparent_inputs: vec![owned_input(&alice, 100, 7, 0), owned_input(&alice, 50, 7, 1)],
        confidential_inputs: vec![],
        outputs: vec![(owner(&key(2)), 120), (owner(&alice), 30)],
        transparent_outputs: vec![],
        auditors: auditors(),
    };
    plan.prove_and_sign(&[alice, alice], NonceMode::Deterministic, rng)
        .unwrap()
}

/// Bob spends his 120: 70 to carol confidentially, 50 unshielded to himself.
fn pay_and_unshield(rng: &mut StdRng) -> (ConfidentialTransaction, ConfidentialPlan) {
    let (shielded, openings) = shield(rng);
    let bob = key(2);
    let input = shielded.created_confidential_outputs()[0].to_input();
    let plan = ConfidentialPlan {
        transparent_inputs: vec![],
        confidential_inputs: vec![(input, openings[0])],
        outputs: vec![(owner(&key(3)), 70)],
        transparent_outputs: vec![pays(&bob, 50)],
        auditors: auditors(),
    };
    let (tx, _) = plan.prove_and_sign(&[bob], NonceMode::Deterministic, rng).unwrap();
    (tx, plan)
}

#[test]
fn shielding_paying_and_unshielding_are_valid_and_the_auditor_reads_the_values() {
    specie_private_transactions::install();
    let mut rng = StdRng::seed_from_u64(1);
    let (shielded, openings) = shield(&mut rng);
    assert_eq!(code(&shielded, &with_auditor()), None);
    assert_eq!(openings.iter().map(|o| o.value).collect::<Vec<_>>(), vec![120, 30]);
    assert_eq!(shielded.proof.audit(&auditor()).unwrap(), vec![120, 30]);
    let (paid, _) = pay_and_unshield(&mut rng);
    assert_eq!(code(&paid, &with_auditor()), None);
    assert_eq!(paid.proof.audit(&auditor()).unwrap(), vec![70]);
    // Its transparent output is an ordinary output, numbered before the confidential one.
    let compact = SpecieTransaction::from(paid.clone()).compact();
    let created = SpecieTransaction::from(paid.clone()).created_outputs();
    assert_eq!(compact.created[0], created[0].uhs_id);
    assert_eq!(compact.created[1], paid.created_confidential_outputs()[0].uhs_id);
    assert_eq!(paid.created_confidential_outputs()[0].outpoint.index, 1);
    assert_eq!(compact.spent, vec![paid.confidential_inputs[0].uhs_id()]);
    // Encodings round-trip.
    let tx = SpecieTransaction::from(paid);
    let bytes = specie_codec::Encode::encode(&tx);
    assert_eq!(
        <SpecieTransaction as specie_codec::Decode>::decode_exact(&bytes).unwrap(),
        tx
    );
}

#[test]
fn a_clear_value_that_does_not_match_the_proof_is_refused() {
    let mut rng = StdRng::seed_from_u64(2);
    let (mut shielded, _) = shield(&mut rng);
    shielded.transparent_inputs[1].data.value += 1;
    shielded.sign(&[key(1), key(1)], NonceMode::Deterministic).unwrap();
    assert_eq!(
        code(&shielded, &with_auditor()),
        Some("confidential_public_in_mismatch")
    );
    // The whole refusal: a capability error of category `confidential`, with its sentence.
    let refusal = validate(&SpecieTransaction::from(shielded), &with_auditor()).unwrap_err();
    assert_eq!(refusal, ConfidentialErrorCode::PublicInMismatch.into_error());
    assert_eq!(
        refusal,
        ValidationError::Capability(CapabilityError {
            category: "confidential",
            code: "confidential_public_in_mismatch",
            message: "the proof's clear input value is not the total of the transparent inputs".to_owned(),
        })
    );
    assert_eq!(refusal.category(), "confidential");
    let (mut paid, _) = pay_and_unshield(&mut rng);
    paid.transparent_outputs[0].value += 1;
    paid.sign(&[key(2)], NonceMode::Deterministic).unwrap();
    assert_eq!(code(&paid, &with_auditor()), Some("confidential_public_out_mismatch"));
}

#[test]
fn a_proof_for_another_transaction_or_replayed_into_a_new_one_is_refused() {
    let mut rng = StdRng::seed_from_u64(3);
    let (paid, plan) = pay_and_unshield(&mut rng);
    // The same spend, paying carol's 70 to mallory instead, under the proof made for carol.
    let mut redirected = paid.clone();
    redirected.owners[0] = owner(&key(9));
    redirected.sign(&[key(2)], NonceMode::Deterministic).unwrap();
    assert_eq!(code(&redirected, &with_auditor()), Some("invalid_confidential_proof"));
    // Another valid transaction's proof, transplanted.
    let (other, _) = plan
        .prove_and_sign(&[key(2)], NonceMode::Deterministic, &mut rng)
        .unwrap();
    assert_ne!(other.proof, paid.proof, "fresh blindings");
    let mut transplanted = paid.clone();
    transplanted.proof = shield(&mut rng).0.proof;
    transplanted.sign(&[key(2)], NonceMode::Deterministic).unwrap();
    assert!(code(&transplanted, &with_auditor()).is_some());
}

#[test]
fn a_malleated_commitment_is_refused() {
    let mut rng = StdRng::seed_from_u64(4);
    let (paid, _) = pay_and_unshield(&mut rng);
    // The input names another commitment than the proof states (e.g. one worth more).
    let mut other_input = paid.clone();
    other_input.confidential_inputs[0].commitment = shield(&mut rng).0.output_commitments()[0];
    other_input.sign(&[key(2)], NonceMode::Deterministic).unwrap();
    assert_eq!(code(&other_input, &with_auditor()), Some("confidential_input_mismatch"));
    // One owner too many for the outputs the proof commits to.
    let mut extra_owner = paid.clone();
    extra_owner.owners.push(owner(&key(4)));
    extra_owner.sign(&[key(2)], NonceMode::Deterministic).unwrap();
    assert_eq!(code(&extra_owner, &with_auditor()), Some("confidential_owner_count"));
}

#[test]
fn leaving_out_an_auditor_with_jurisdiction_is_refused() {
    let mut rng = StdRng::seed_from_u64(5);
    let (_, mut plan) = pay_and_unshield(&mut rng);
    plan.auditors = vec![AuditorSecret::from_seed(&[0xbb; 32]).public()];
    let (tx, _) = plan
        .prove_and_sign(&[key(2)], NonceMode::Deterministic, &mut rng)
        .unwrap();
    assert_eq!(code(&tx, &with_auditor()), Some("auditor_missing"));
    // Where no auditor has jurisdiction, it is valid.
    assert_eq!(code(&tx, &trusted()), None);
    // Where the node has no privacy rules at all, the kind is not accepted.
    assert_eq!(code(&tx, &issuers_only()), Some("kind_not_accepted"));
}

#[test]
fn a_bad_witness_or_a_tampered_proof_is_refused() {
    specie_private_transactions::install();
    let mut rng = StdRng::seed_from_u64(6);
    let (paid, _) = pay_and_unshield(&mut rng);
    let mut stolen = paid.clone();
    assert!(
        stolen.sign(&[key(9)], NonceMode::Deterministic).is_err(),
        "the wallet refuses a wrong key"
    );
    stolen.witnesses[0].0[40] ^= 1;
    assert_eq!(code(&stolen, &with_auditor()), Some("invalid_signature"));
    let mut unsigned = paid.clone();
    unsigned.witnesses.clear();
    assert_eq!(code(&unsigned, &with_auditor()), Some("missing_witness"));
    // Flip bytes across the proof's encoding: it either no longer decodes or no longer verifies.
    let tx = SpecieTransaction::from(paid.clone());
    let bytes = specie_codec::Encode::encode(&tx);
    let decode = |bytes: &[u8]| <SpecieTransaction as specie_codec::Decode>::decode_exact(bytes);
    assert_eq!(
        decode(&bytes).unwrap().capability::<ConfidentialTransaction>(),
        Some(&paid)
    );
    let proof_bytes = specie_codec::Encode::encode(&paid.proof);
    let start = bytes.windows(proof_bytes.len()).position(|w| w == proof_bytes).unwrap();
    for offset in (0..proof_bytes.len()).step_by(37) {
        let mut tampered = bytes.clone();
        tampered[start + offset] ^= 0x40;
        let Ok(decoded) = decode(&tampered) else {
            continue;
        };
        let mut forged = decoded
            .capability::<ConfidentialTransaction>()
            .expect("a flipped proof byte leaves the kind")
            .clone();
        forged.sign(&[key(2)], NonceMode::Deterministic).unwrap();
        assert!(
            code(&forged, &with_auditor()).is_some(),
            "byte {offset} of the proof flipped"
        );
    }
}

#[test]
fn a_batch_verifies_proofs_together_and_gives_each_transaction_its_own_verdict() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut txs = vec![];
    for n in 0..40 {
        let (mut paid, _) = pay_and_unshield(&mut rng);
        if n % 7 == 3 {
            // A proof made for another transaction: only the proofs can tell.
            paid.proof = pay_and_unshield(&mut rng).0.proof;
            paid.sign(&[key(2)], NonceMode::Deterministic).unwrap();
        }
        if n % 11 == 5 {
            paid.witnesses[0].0[40] ^= 1;
        }
        txs.push(SpecieTransaction::from(paid));
        if n % 5 == 0 {
            txs.push(SpecieTransaction::Transfer(common::valid_transfer()));
        }
    }
    let trusted = with_auditor();
    let batch = specie_sentinel::validate_batch(&txs, &trusted);
    let sequential: Vec<_> = txs
        .iter()
        .map(|tx| specie_sentinel::validate_and_compact(tx, &trusted))
        .collect();
    assert_eq!(batch, sequential);
    let refused = batch.iter().filter(|v| v.is_err()).count();
    assert!(refused >= 8, "the forgeries are refused: {refused}");
    assert!(batch.iter().filter(|v| v.is_ok()).count() > 30);
}

#[test]
fn one_bad_proof_fails_the_batch_and_only_its_transaction_is_refused() {
    let mut rng = StdRng::seed_from_u64(8);
    let mut txs: Vec<SpecieTransaction> = (0..6)
        .map(|_| SpecieTransaction::from(pay_and_unshield(&mut rng).0))
        .collect();
    // Carol's 70 paid to mallory under the proof made for carol: every check but the proof holds.
    let mut redirected = pay_and_unshield(&mut rng).0;
    redirected.owners[0] = owner(&key(9));
    redirected.sign(&[key(2)], NonceMode::Deterministic).unwrap();
    txs.insert(3, SpecieTransaction::from(redirected));
    let trusted = with_auditor();
    let batch = specie_sentinel::validate_batch(&txs, &trusted);
    let sequential: Vec<_> = txs
        .iter()
        .map(|tx| specie_sentinel::validate_and_compact(tx, &trusted))
        .collect();
    assert_eq!(batch, sequential);
    let codes: Vec<Option<&str>> = batch.iter().map(|v| v.as_ref().err().map(|e| e.code())).collect();
    let mut expected = vec![None; 7];
    expected[3] = Some("invalid_confidential_proof");
    assert_eq!(codes, expected);
    assert_eq!(batch[3], Err(ConfidentialErrorCode::InvalidProof.into_error()));
}

#[test]
fn an_active_auditor_must_co_sign_a_confidential_transaction() {
    use specie_transaction::signing::xonly_bytes;
    use specie_transaction::P2pkWitness;
    let mut rng = StdRng::seed_from_u64(9);
    let auditor = key(0x71);
    let trusted = with_auditor_and_active(vec![xonly_bytes(&auditor)]);
    let (shielded, _) = shield(&mut rng);
    assert_eq!(code(&shielded, &trusted), Some("active_auditor_missing"));
    let mut cosigned = shielded.clone();
    let witness = P2pkWitness::sign(&auditor, &shielded.txid().0, NonceMode::Deterministic);
    cosigned.witnesses.push(witness.to_witness());
    assert_eq!(code(&cosigned, &trusted), None);
    // The co-signature cannot stand in for an owner's witness: the owners still sign.
    let mut unsigned = cosigned.clone();
    unsigned.witnesses.remove(0);
    assert_eq!(code(&unsigned, &trusted), Some("active_auditor_missing"));
}
