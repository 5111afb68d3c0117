//! Property tests of anonymous transactions (kind 0x08; moved from `specie-transaction`'s tests),
//! whose proofs are too costly to generate
//! per case: valid transactions in both value modes are proven once ([`fixtures`]), and the cases
//! mutate their bytes or recombine their parts. Decoding never panics; whatever decodes re-encodes
//! to exactly its bytes (one encoding per value), and what a node derives from it (txid, context,
//! UHS ids, created outputs, compact transaction) never panics either.

use std::sync::OnceLock;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use rand::rngs::StdRng;
use rand::SeedableRng;
use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_confidential::ConfidentialTransfer;
use specie_credential::{
    AuditorSecret, EnrolmentId, Identity, Jurisdiction, OwnerAudit, OwnerCommitment, OwnerOpening, RaPublicKey,
    RegistrationAuthority, SpendProof, UserSecret,
};
use specie_private_transactions::{
    AnonymousInput, AnonymousPlan, AnonymousSpend, AnonymousTransaction, AnonymousValue, AnonymousValues,
};
use specie_transaction::extension::EXTENSION_HEADER;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, Input, NonceMode, OutPoint, Output, SpecieTransaction, Txid, Witness,
};

const ALICE: EnrolmentId = EnrolmentId(21);
const BOB: EnrolmentId = EnrolmentId(22);

fn key(byte: u8) -> Keypair {
    keypair_from_secret(&[byte; 32]).unwrap()
}

fn pays(keypair: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(keypair)),
        value,
    }
}

fn enrol(ra: &mut RegistrationAuthority, id: EnrolmentId, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::from_seed(&[id.0 as u8; 32]);
    let challenge = ra.challenge(id, Jurisdiction(1), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let credential = ra.enrol(&request, rng).unwrap();
    Identity::new(secret, credential, &ra.public_key()).unwrap()
}

fn plan(hide_values: bool, owner_auditors: usize) -> AnonymousPlan {
    let mut owner_auditors: Vec<_> = (0..owner_auditors)
        .map(|i| AuditorSecret::from_seed(&[0xb1 + i as u8; 32]).public())
        .collect();
    owner_auditors.sort();
    AnonymousPlan {
        transparent_inputs: vec![],
        anonymous_inputs: vec![],
        outputs: vec![],
        transparent_outputs: vec![],
        hide_values,
        value_auditors: vec![specie_confidential::AuditorSecret::from_seed(&[0xa1; 32]).public()],
        owner_auditors,
    }
}

/// Alice's ordinary 100 enters as an anonymous output of hers; she then pays bob 70 of it
/// anonymously (with a spend proof) and takes 30 back to an ordinary output. Returns both.
fn enter_and_pay(
    rng: &mut StdRng,
    authority: &RaPublicKey,
    alice: &Identity,
    hide_values: bool,
    owner_auditors: usize,
) -> [AnonymousTransaction; 2] {
    let alice_key = key(1);
    let alice_owner = OwnerOpening::random(ALICE, rng);
    let input = Input {
        prevout: OutPoint {
            txid: Txid([7; 32]),
            index: 0,
        },
        data: pays(&alice_key, 100),
    };
    let enter = AnonymousPlan {
        transparent_inputs: vec![input],
        outputs: vec![(alice_owner, 100)],
        ..plan(hide_values, owner_auditors)
    };
    let (entered, openings) = enter
        .prove_and_sign(&[alice_key], None, authority, NonceMode::Deterministic, rng)
        .unwrap();
    let pay = AnonymousPlan {
        anonymous_inputs: vec![AnonymousSpend {
            input: entered.created_anonymous_outputs()[0].to_input(),
            owner: alice_owner,
            value: openings[0],
        }],
        outputs: vec![(OwnerOpening::random(BOB, rng), 70)],
        transparent_outputs: vec![pays(&alice_key, 30)],
        ..plan(hide_values, owner_auditors)
    };
    let (paid, _) = pay
        .prove_and_sign(&[], Some(alice), authority, NonceMode::Deterministic, rng)
        .unwrap();
    [entered, paid]
}

/// Valid anonymous transactions, proven once: in clear with one owner auditor, then hidden
/// (spending a hidden value) with two.
fn fixtures() -> &'static [AnonymousTransaction] {
    static FIXTURES: OnceLock<Vec<AnonymousTransaction>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(0x08);
        let mut ra = RegistrationAuthority::from_seed(&[0x52; 32]);
        let alice = enrol(&mut ra, ALICE, &mut rng);
        let authority = ra.public_key();
        let mut txs = Vec::new();
        txs.extend(enter_and_pay(&mut rng, &authority, &alice, false, 1));
        txs.extend(enter_and_pay(&mut rng, &authority, &alice, true, 2));
        txs
    })
}

/// The parts of the fixtures, for the strategies to recombine.
struct Parts {
    owners: Vec<OwnerCommitment>,
    audits: Vec<OwnerAudit>,
    spend_proofs: Vec<SpendProof>,
    transfers: Vec<ConfidentialTransfer>,
}

fn parts() -> &'static Parts {
    static PARTS: OnceLock<Parts> = OnceLock::new();
    PARTS.get_or_init(|| {
        let txs = fixtures();
        let transfers = txs
            .iter()
            .filter_map(|tx| match &tx.values {
                AnonymousValues::Hidden(transfer) => Some(transfer.clone()),
                AnonymousValues::Clear(_) => None,
            })
            .collect();
        Parts {
            owners: txs.iter().flat_map(|tx| tx.owners.clone()).collect(),
            audits: txs.iter().flat_map(|tx| tx.owner_audits.clone()).collect(),
            spend_proofs: txs.iter().flat_map(|tx| tx.spend_proofs.clone()).collect(),
            transfers,
        }
    })
}

fn outpoint() -> impl Strategy<Value = OutPoint> {
    (any::<[u8; 32]>(), any::<u64>()).prop_map(|(txid, index)| OutPoint {
        txid: Txid(txid),
        index,
    })
}

fn output() -> impl Strategy<Value = Output> {
    (any::<[u8; 32]>(), any::<u64>()).prop_map(|(witness_program_commitment, value)| Output {
        witness_program_commitment,
        value,
    })
}

fn input() -> impl Strategy<Value = Input> {
    (outpoint(), output()).prop_map(|(prevout, data)| Input { prevout, data })
}

fn owner() -> impl Strategy<Value = OwnerCommitment> {
    select(parts().owners.clone())
}

fn anonymous_value() -> impl Strategy<Value = AnonymousValue> {
    prop_oneof![
        any::<u64>().prop_map(AnonymousValue::Clear),
        any::<[u8; 32]>().prop_map(AnonymousValue::Hidden),
    ]
}

fn anonymous_input() -> impl Strategy<Value = AnonymousInput> {
    (outpoint(), owner(), anonymous_value()).prop_map(|(prevout, owner, value)| AnonymousInput {
        prevout,
        owner,
        value,
    })
}

fn values() -> impl Strategy<Value = AnonymousValues> {
    prop_oneof![
        vec(any::<u64>(), 0..4).prop_map(AnonymousValues::Clear),
        select(parts().transfers.clone()).prop_map(AnonymousValues::Hidden),
    ]
}

/// Anonymous transactions of any shape the encoding allows, built from real owners, audits,
/// spend proofs and value proofs (which the decoder checks are valid group elements), whether
/// or not a sentinel would take them. Few of each: decoding a group element costs about a
/// millisecond.
fn anonymous_transaction() -> impl Strategy<Value = AnonymousTransaction> {
    let witness = vec(any::<u8>(), 0..100).prop_map(Witness);
    (
        (vec(input(), 0..3), vec(anonymous_input(), 0..3), vec(owner(), 0..3)),
        (vec(output(), 0..3), values(), vec(select(parts().audits.clone()), 0..3)),
        (vec(witness, 0..3), vec(select(parts().spend_proofs.clone()), 0..2)),
    )
        .prop_map(
            |(
                (transparent_inputs, anonymous_inputs, owners),
                (transparent_outputs, values, owner_audits),
                (witnesses, spend_proofs),
            )| AnonymousTransaction {
                transparent_inputs,
                anonymous_inputs,
                owners,
                transparent_outputs,
                values,
                owner_audits,
                witnesses,
                spend_proofs,
            },
        )
}

/// Everything a node derives from a decoded transaction, which must not panic, and agrees.
fn derive_all(tx: &AnonymousTransaction) {
    let txid = tx.txid();
    let _ = tx.context();
    let created = tx.created_anonymous_outputs();
    assert_eq!(created.len(), tx.owners.len().min(tx.output_values().len()));
    let (spent, created_ids) = tx.uhs_ids();
    assert_eq!(spent.len(), tx.transparent_inputs.len() + tx.anonymous_inputs.len());
    assert_eq!(created_ids.len(), tx.transparent_outputs.len() + created.len());
    let compact = SpecieTransaction::from(tx.clone()).compact();
    assert_eq!(
        (compact.txid, compact.spent, compact.created),
        (txid, spent, created_ids)
    );
}

/// Decoding `bytes` never panics; when it succeeds, the value re-encodes to exactly `bytes`, the
/// generic (with the private kinds installed) and the kind's decoder agree, and the derived
/// values can be computed. Returns the anonymous transaction decoded, if any.
fn check_canonical(bytes: &[u8]) -> Option<AnonymousTransaction> {
    specie_private_transactions::install();
    let specie = SpecieTransaction::decode_exact(bytes);
    let anonymous = AnonymousTransaction::decode_exact(bytes);
    match (specie, anonymous) {
        (Ok(specie), Ok(anonymous)) => {
            assert_eq!(specie.capability::<AnonymousTransaction>(), Some(&anonymous));
            assert_eq!(
                anonymous.encode(),
                bytes,
                "accepted bytes must be the canonical encoding"
            );
            derive_all(&anonymous);
            Some(anonymous)
        }
        (Ok(other), Err(_)) => {
            // Only a change of the kind byte makes it another kind.
            assert_eq!(other.encode(), bytes, "accepted bytes must be the canonical encoding");
            assert!(other.capability::<AnonymousTransaction>().is_none());
            None
        }
        (Err(_), Err(_)) => None,
        (specie, anonymous) => panic!("the decoders disagree: {specie:?} / {anonymous:?}"),
    }
}

#[test]
fn valid_anonymous_transactions_round_trip_in_both_value_modes() {
    specie_private_transactions::install();
    let txs = fixtures();
    let hidden: Vec<bool> = txs
        .iter()
        .map(|tx| matches!(tx.values, AnonymousValues::Hidden(_)))
        .collect();
    assert_eq!(hidden, [false, false, true, true]);
    for tx in txs {
        let bytes = tx.encode();
        let specie = SpecieTransaction::from(tx.clone());
        assert_eq!(specie.encode(), bytes);
        assert_eq!(SpecieTransaction::decode_exact(&bytes), Ok(specie));
        assert_eq!(check_canonical(&bytes).as_ref(), Some(tx));
        // Trailing bytes are refused.
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(check_canonical(&longer).is_none());
    }
    // The payments spend an anonymous input each, with its spend proof.
    assert!(txs[1].spend_proofs.len() == 1 && txs[3].spend_proofs.len() == 1);
    assert!(matches!(txs[3].anonymous_inputs[0].value, AnonymousValue::Hidden(_)));
}

#[test]
fn a_changed_value_still_decodes_and_re_encodes_to_the_changed_bytes() {
    // The last byte of the change's value (transparent output 0 of the clear payment, just
    // before the values' tag): any u64 is a value.
    let tx = &fixtures()[1];
    let mut bytes = tx.encode();
    let at = EXTENSION_HEADER.len()
        + 1
        + tx.transparent_inputs.encode().len()
        + tx.anonymous_inputs.encode().len()
        + tx.owners.encode().len()
        + tx.transparent_outputs.encode().len()
        - 1;
    bytes[at] ^= 0x80;
    let changed = check_canonical(&bytes).expect("any value decodes");
    assert_eq!(
        changed.transparent_outputs[0].value,
        tx.transparent_outputs[0].value ^ (0x80 << 56)
    );
    assert_ne!(changed.txid(), tx.txid());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn anonymous_transactions_of_any_shape_round_trip(tx in anonymous_transaction()) {
        let bytes = tx.encode();
        prop_assert_eq!(SpecieTransaction::from(tx.clone()).encode(), bytes.clone());
        // Both decoders give it back (check_canonical compares them).
        prop_assert_eq!(check_canonical(&bytes), Some(tx));
    }

    #[test]
    fn a_changed_byte_never_panics_and_decodes_only_canonically(
        which in 0usize..4,
        position in any::<prop::sample::Index>(),
        delta in 1u8..=255,
    ) {
        let mut bytes = fixtures()[which].encode();
        let at = position.index(bytes.len());
        bytes[at] ^= delta;
        check_canonical(&bytes);
    }

    #[test]
    fn a_truncated_encoding_never_decodes(which in 0usize..4, position in any::<prop::sample::Index>()) {
        // A strict prefix of a valid encoding: the decoder reads it exactly as it read the whole
        // until the bytes run out, so it must fail, never panic, and never yield another value.
        let bytes = fixtures()[which].encode();
        let cut = position.index(bytes.len());
        prop_assert!(check_canonical(&bytes[..cut]).is_none());
        prop_assert!(SpecieTransaction::decode_exact(&bytes[..cut]).is_err());
    }
}
