//! The privacy levels' vectors in `docs/transaction-format.md` (moved from `specie-transaction`'s
//! tests with the private kinds): built here from fixed keys, deterministic signatures and seeded
//! randomness, and compared with the document, so the document and the code cannot drift apart;
//! and the documented anonymous transactions decoded, hashed and verified from their definitions.
//! The core transactions they spend (the transfer, the redeem, FastPay's funding) are read from
//! the document, whose core vectors `specie-transaction`'s tests check (and FastPay's,
//! `specie-fastpay-primary`'s).

use crate::common;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::SeedableRng;

use common::{key, pays, vectors, Vectors};
use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_credential::{
    AuditDirectory, AuditorKey as OwnerAuditorKey, AuditorSecret as OwnerAuditorSecret, EnrolmentId, Identity,
    Jurisdiction, OwnerCommitment, OwnerOpening, RaPublicKey, RegistrationAuthority, UserSecret,
};
use specie_private_transactions::{
    AnonymousPlan, AnonymousSpend, AnonymousTransaction, AnonymousValue, AnonymousValues, ConfidentialPlan,
    ConfidentialTransaction, KIND_ANONYMOUS, KIND_CONFIDENTIAL,
};
use specie_transaction::extension::EXTENSION_HEADER;
use specie_transaction::hash::sha256;
use specie_transaction::signing::{parse_xonly, schnorr_verify, P2pkWitness};
use specie_transaction::{
    CompactTransaction, CreatedOutput, Input, NonceMode, OutPoint, SpecieTransaction, Txid, UhsId,
};

/// The prefixes of the vectors checked here.
const PREFIXES: [&str; 2] = ["confidential_", "anonymous_"];

/// Every privacy vector the document lists, computed from scratch from the documented core
/// transactions they spend: bob's 60 of the transfer, alice's 15 of FastPay funding change (of
/// her 40 of transfer change) and bob's 20 of redeem change.
fn computed(v: &Vectors) -> BTreeMap<String, String> {
    let (alice, bob) = (key(0x01), key(0x02));
    let transfer = SpecieTransaction::decode_exact(&v.bytes("transfer_ser")).unwrap();
    let redeem = SpecieTransaction::decode_exact(&v.bytes("redeem_ser")).unwrap();
    assert!(matches!(transfer, SpecieTransaction::Transfer(_)));
    assert!(matches!(redeem, SpecieTransaction::Redeem(_)));
    let alice_funding_change = documented_funding_change(v, &alice, transfer.created_outputs()[1]);
    let mut computed = BTreeMap::new();
    confidential_vectors(&mut computed, &alice, &bob, transfer.created_outputs()[0]);
    anonymous_vectors(
        &mut computed,
        &alice,
        &bob,
        alice_funding_change,
        redeem.created_outputs()[0],
    );
    computed
}

/// Bob shields the 60 alice paid him: 45 to alice and 15 to himself, confidential, readable by
/// the auditor of seed `a1`×32; proven with `StdRng::seed_from_u64(2026)`.
fn confidential_vectors(v: &mut BTreeMap<String, String>, alice: &Keypair, bob: &Keypair, bobs: CreatedOutput) {
    let mut put = |name: &str, bytes: &[u8]| {
        v.insert(name.to_owned(), hex::encode(bytes));
    };
    let auditor = specie_confidential::AuditorSecret::from_seed(&[0xa1; 32]);
    put("confidential_auditor_key", &auditor.public().to_bytes());
    let plan = ConfidentialPlan {
        transparent_inputs: vec![bobs.to_input()],
        confidential_inputs: vec![],
        outputs: vec![
            (pays(alice, 0).witness_program_commitment, 45),
            (pays(bob, 0).witness_program_commitment, 15),
        ],
        transparent_outputs: vec![],
        auditors: vec![auditor.public()],
    };
    let mut rng = StdRng::seed_from_u64(2026);
    let (tx, openings) = plan
        .prove_and_sign(&[*bob], NonceMode::Deterministic, &mut rng)
        .unwrap();
    put("confidential_context", &tx.context());
    let tx = SpecieTransaction::from(tx);
    put("confidential_ser", &tx.encode());
    put("confidential_txid", &tx.txid().0);
    put("confidential_compact_ser", &tx.compact().encode());
    put("confidential_opening[0]_blinding", openings[0].blinding.as_bytes());
}

const ANONYMOUS_ALICE: EnrolmentId = EnrolmentId(11);
const ANONYMOUS_BOB: EnrolmentId = EnrolmentId(12);
const ANONYMOUS_CONTEXT_DOMAIN: &[u8] = b"specie/anonymous-context/v1";
const ANONYMOUS_OUTPUT_DOMAIN: &[u8] = b"specie/anonymous-output/v1";

/// A user of the anonymous vectors: user secret of seed `id`×32, enrolled in jurisdiction 1.
fn enrol(ra: &mut RegistrationAuthority, id: EnrolmentId, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::from_seed(&[id.0 as u8; 32]);
    let challenge = ra.challenge(id, Jurisdiction(1), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let credential = ra.enrol(&request, rng).unwrap();
    Identity::new(secret, credential, &ra.public_key()).unwrap()
}

fn owner_auditor() -> OwnerAuditorSecret {
    OwnerAuditorSecret::from_seed(&[0xb1; 32])
}

/// Every owner given to the owner auditor of seed `b1`×32; hidden values readable by the
/// confidential vectors' auditor (seed `a1`×32).
fn anonymous_plan(hide_values: bool) -> AnonymousPlan {
    AnonymousPlan {
        transparent_inputs: vec![],
        anonymous_inputs: vec![],
        outputs: vec![],
        transparent_outputs: vec![],
        hide_values,
        value_auditors: vec![specie_confidential::AuditorSecret::from_seed(&[0xa1; 32]).public()],
        owner_auditors: vec![owner_auditor().public()],
    }
}

/// The documented values of one anonymous transaction: context, bytes, txid, compact
/// transaction, the UHS ids it creates and the openings of its anonymous outputs' owners.
fn put_anonymous(v: &mut BTreeMap<String, String>, name: &str, tx: &AnonymousTransaction, owners: &[OwnerOpening]) {
    let mut put = |key: String, bytes: &[u8]| {
        v.insert(key, hex::encode(bytes));
    };
    put(format!("{name}_context"), &tx.context());
    for (i, owner) in owners.iter().enumerate() {
        put(format!("{name}_owner_opening[{i}]"), &owner.encode());
    }
    let tx = SpecieTransaction::from(tx.clone());
    put(format!("{name}_ser"), &tx.encode());
    put(format!("{name}_txid"), &tx.txid().0);
    let compact = tx.compact();
    put(format!("{name}_compact_ser"), &compact.encode());
    for (i, id) in compact.created.iter().enumerate() {
        put(format!("{name}_uhs_id[{i}]"), &id.0);
    }
}

/// The anonymous vectors. The RA of seed `51`×32 enrols alice (enrolment id 11) and bob (12);
/// then, values in clear, alice's 15 of FastPay funding change enters as an anonymous output of
/// hers (`anonymous_enter`), and she pays 10 of it to bob anonymously and 5 back to her ordinary
/// address (`anonymous_pay`, with a spend proof); then, values hidden, bob spends those 10 and
/// his 20 of redeem change: 25 to alice and 5 to himself, both anonymous (`anonymous_hidden`).
/// Everything random comes from `StdRng::seed_from_u64(2027)`, in that order.
fn anonymous_vectors(
    v: &mut BTreeMap<String, String>,
    alice: &Keypair,
    bob: &Keypair,
    alices: CreatedOutput,
    bobs: CreatedOutput,
) {
    let mut rng = StdRng::seed_from_u64(2027);
    let mut ra = RegistrationAuthority::from_seed(&[0x51; 32]);
    let alice_identity = enrol(&mut ra, ANONYMOUS_ALICE, &mut rng);
    let bob_identity = enrol(&mut ra, ANONYMOUS_BOB, &mut rng);
    let authority = ra.public_key();
    v.insert("anonymous_ra_public_key".into(), hex::encode(authority.encode()));
    v.insert(
        "anonymous_owner_auditor_key".into(),
        hex::encode(owner_auditor().public().encode()),
    );
    let mode = NonceMode::Deterministic;

    assert_eq!(alices.output.value, 15);
    let alice_owner = OwnerOpening::random(ANONYMOUS_ALICE, &mut rng);
    let enter_plan = AnonymousPlan {
        transparent_inputs: vec![alices.to_input()],
        outputs: vec![(alice_owner, 15)],
        ..anonymous_plan(false)
    };
    let (enter, _) = enter_plan
        .prove_and_sign(&[*alice], None, &authority, mode, &mut rng)
        .unwrap();
    put_anonymous(v, "anonymous_enter", &enter, &[alice_owner]);

    let bob_owner = OwnerOpening::random(ANONYMOUS_BOB, &mut rng);
    let pay_plan = AnonymousPlan {
        anonymous_inputs: vec![AnonymousSpend {
            input: enter.created_anonymous_outputs()[0].to_input(),
            owner: alice_owner,
            value: None,
        }],
        outputs: vec![(bob_owner, 10)],
        transparent_outputs: vec![pays(alice, 5)],
        ..anonymous_plan(false)
    };
    let (pay, _) = pay_plan
        .prove_and_sign(&[], Some(&alice_identity), &authority, mode, &mut rng)
        .unwrap();
    put_anonymous(v, "anonymous_pay", &pay, &[bob_owner]);

    assert_eq!(bobs.output.value, 20);
    let owners = [
        OwnerOpening::random(ANONYMOUS_ALICE, &mut rng),
        OwnerOpening::random(ANONYMOUS_BOB, &mut rng),
    ];
    let hidden_plan = AnonymousPlan {
        transparent_inputs: vec![bobs.to_input()],
        anonymous_inputs: vec![AnonymousSpend {
            input: pay.created_anonymous_outputs()[0].to_input(),
            owner: bob_owner,
            value: None,
        }],
        outputs: vec![(owners[0], 25), (owners[1], 5)],
        ..anonymous_plan(true)
    };
    let (hidden, openings) = hidden_plan
        .prove_and_sign(&[*bob], Some(&bob_identity), &authority, mode, &mut rng)
        .unwrap();
    put_anonymous(v, "anonymous_hidden", &hidden, &owners);
    let opening = openings[0].expect("hidden values have openings");
    v.insert(
        "anonymous_hidden_opening[0]_blinding".into(),
        hex::encode(opening.blinding.as_bytes()),
    );
}

/// The `fastpay_*` vectors (alice funds a FastPay account with 25 of her 40 transfer change) are
/// made and checked by `specie-fastpay-primary`'s tests, where FastPay's kinds are known. Here,
/// the documented funding's compact transaction spends alice's change, and its change output
/// (alice's 15, output 0 of the documented funding txid) is what the anonymous vectors spend.
fn documented_funding_change(v: &Vectors, alice: &Keypair, alice_change: CreatedOutput) -> CreatedOutput {
    assert_eq!(alice_change.output.value, 40);
    let txid = Txid(v.hash("fastpay_funding_txid"));
    let output = pays(alice, 15);
    let change = CreatedOutput {
        outpoint: OutPoint { txid, index: 0 },
        output,
        uhs_id: specie_transaction::uhs_id_for(&txid, 0, &output),
    };
    let compact = CompactTransaction::decode_exact(&v.bytes("fastpay_funding_compact_ser")).unwrap();
    assert_eq!(compact.txid, txid);
    assert_eq!(compact.spent, vec![alice_change.uhs_id]);
    assert_eq!(compact.created[0], change.uhs_id);
    change
}

#[test]
fn document_vectors_match_the_code() {
    let v = vectors();
    let computed = computed(&v);
    // Collect every difference so that one run shows the whole block to paste into the doc.
    let wrong: Vec<String> = computed
        .iter()
        .filter(|(name, value)| v.0.get(*name) != Some(*value))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "docs/transaction-format.md lacks or misstates these vectors:\n{}",
        wrong.join("\n")
    );
    let ours = v.0.keys().filter(|name| PREFIXES.iter().any(|p| name.starts_with(p)));
    for name in ours {
        assert!(computed.contains_key(name), "documented vector {name} is not checked");
    }
    assert!(computed.keys().all(|name| PREFIXES.iter().any(|p| name.starts_with(p))));
}

#[test]
fn documented_confidential_bytes_decode_and_verify_and_the_auditor_reads_them() {
    let v = vectors();
    let bytes = v.bytes("confidential_ser");
    let specie = SpecieTransaction::decode_exact(&bytes).unwrap();
    let tx = specie
        .capability::<ConfidentialTransaction>()
        .expect("confidential_ser is a confidential transaction");
    assert_eq!(specie.encode(), bytes);
    assert_eq!(ConfidentialTransaction::decode_exact(&bytes).as_ref(), Ok(tx));
    assert!(bytes.starts_with(&[&EXTENSION_HEADER[..], &[KIND_CONFIDENTIAL]].concat()));
    assert_eq!(tx.txid().0, v.hash("confidential_txid"));
    assert_eq!(tx.context(), v.hash("confidential_context"));
    assert_eq!(specie.compact().encode(), v.bytes("confidential_compact_ser"));
    assert!(tx.proof.verify(&tx.context()).is_ok());
    // Bob's 60 shielded: 45 to alice and 15 to bob, which the auditor reads and the documented
    // opening opens.
    let auditor = specie_confidential::AuditorSecret::from_seed(&[0xa1; 32]);
    assert_eq!(auditor.public().to_bytes(), v.hash("confidential_auditor_key"));
    assert_eq!(tx.proof.audit(&auditor).unwrap(), vec![45, 15]);
    assert_eq!((tx.proof.public_in(), tx.proof.public_out()), (60, 0));
    let blinding = v.hash("confidential_opening[0]_blinding");
    let opening = specie_confidential::Opening {
        value: 45,
        blinding: Option::from(specie_confidential::Scalar::from_canonical_bytes(blinding)).unwrap(),
    };
    assert_eq!(opening.commitment().to_bytes(), tx.output_commitments()[0]);
}

/// The bytes of an anonymous value in a UHS id preimage: its tag, then 8 or 32 bytes.
fn anonymous_value_bytes(value: &AnonymousValue) -> Vec<u8> {
    match value {
        AnonymousValue::Clear(value) => [&[0x00][..], &value.to_le_bytes()].concat(),
        AnonymousValue::Hidden(commitment) => [&[0x01][..], commitment].concat(),
    }
}

/// SHA256("specie/anonymous-output/v1" ‖ txid ‖ u64le(index) ‖ owner(48) ‖ value).
fn anonymous_id(txid: &[u8; 32], index: u64, owner: &OwnerCommitment, value: &AnonymousValue) -> UhsId {
    let mut preimage = ANONYMOUS_OUTPUT_DOMAIN.to_vec();
    preimage.extend_from_slice(txid);
    preimage.extend_from_slice(&index.to_le_bytes());
    preimage.extend_from_slice(&owner.to_bytes());
    preimage.extend_from_slice(&anonymous_value_bytes(value));
    UhsId(sha256(&preimage))
}

/// The context from its definition: the domain, every byte of the encoding before the values,
/// then the values' tag and, in clear, the values (which are then the very bytes that follow).
fn documented_anonymous_context(bytes: &[u8], tx: &AnonymousTransaction) -> [u8; 32] {
    let statement = EXTENSION_HEADER.len()
        + 1
        + tx.transparent_inputs.encode().len()
        + tx.anonymous_inputs.encode().len()
        + tx.owners.encode().len()
        + tx.transparent_outputs.encode().len();
    let mut preimage = ANONYMOUS_CONTEXT_DOMAIN.to_vec();
    preimage.extend_from_slice(&bytes[..statement]);
    match &tx.values {
        AnonymousValues::Clear(values) => {
            assert_eq!(bytes[statement], 0x00);
            preimage.extend_from_slice(&bytes[statement..statement + 1 + 8 + 8 * values.len()]);
        }
        AnonymousValues::Hidden(_) => {
            assert_eq!(bytes[statement], 0x01);
            preimage.push(0x01);
        }
    }
    sha256(&preimage)
}

/// The ids it spends and creates, from their definitions, against the documented ids and
/// compact transaction.
fn check_documented_anonymous_ids(v: &Vectors, name: &str, tx: &AnonymousTransaction, txid: &[u8; 32]) {
    let mut created = Vec::new();
    for (index, output) in tx.transparent_outputs.iter().enumerate() {
        let mut preimage = txid.to_vec();
        preimage.extend_from_slice(&(index as u64).to_le_bytes());
        preimage.extend_from_slice(&output.witness_program_commitment);
        preimage.extend_from_slice(&output.value.to_le_bytes());
        created.push(UhsId(sha256(&preimage)));
    }
    let values: Vec<AnonymousValue> = match &tx.values {
        AnonymousValues::Clear(values) => values.iter().map(|value| AnonymousValue::Clear(*value)).collect(),
        AnonymousValues::Hidden(proof) => proof
            .output_commitments()
            .iter()
            .map(|commitment| AnonymousValue::Hidden(commitment.to_bytes()))
            .collect(),
    };
    assert_eq!(values.len(), tx.owners.len());
    let first = tx.transparent_outputs.len() as u64;
    for (i, (owner, value)) in tx.owners.iter().zip(&values).enumerate() {
        created.push(anonymous_id(txid, first + i as u64, owner, value));
    }
    let documented: Vec<UhsId> = (0..created.len())
        .map(|i| UhsId(v.hash(&format!("{name}_uhs_id[{i}]"))))
        .collect();
    assert_eq!(created, documented, "{name}: created ids");
    assert!(!v.0.contains_key(&format!("{name}_uhs_id[{}]", created.len())));
    let spent: Vec<UhsId> = tx
        .transparent_inputs
        .iter()
        .map(Input::uhs_id)
        .chain(
            tx.anonymous_inputs
                .iter()
                .map(|input| anonymous_id(&input.prevout.txid.0, input.prevout.index, &input.owner, &input.value)),
        )
        .collect();
    let compact = CompactTransaction::decode_exact(&v.bytes(&format!("{name}_compact_ser"))).unwrap();
    assert_eq!(
        (compact.txid.0, &compact.spent, &compact.created),
        (*txid, &spent, &created)
    );
    assert_eq!(tx.uhs_ids(), (spent, created));
}

/// Its proofs under the documented keys: the spend proofs for the txid, the owner audits (and
/// the documented owner openings) for the owners, the witnesses, the values' transfer.
fn check_documented_anonymous_proofs(
    v: &Vectors,
    name: &str,
    tx: &AnonymousTransaction,
    txid: &[u8; 32],
    context: &[u8; 32],
) {
    let authority = RaPublicKey::decode_exact(&v.bytes("anonymous_ra_public_key")).unwrap();
    let auditor = OwnerAuditorKey::decode_exact(&v.bytes("anonymous_owner_auditor_key")).unwrap();
    assert_eq!(tx.spend_proofs.len(), tx.anonymous_inputs.len());
    for (proof, input) in tx.spend_proofs.iter().zip(&tx.anonymous_inputs) {
        assert!(
            proof.verify(&authority, &input.owner, txid).is_ok(),
            "{name}: spend proof"
        );
        let named: Vec<OwnerAuditorKey> = proof.auditor_ciphertexts().iter().map(|c| c.auditor()).collect();
        assert_eq!(named, vec![auditor]);
    }
    assert_eq!(tx.owner_audits.len(), tx.owners.len(), "one owner auditor");
    let directory = AuditDirectory::new([ANONYMOUS_ALICE, ANONYMOUS_BOB]);
    for (i, (owner, audit)) in tx.owners.iter().zip(&tx.owner_audits).enumerate() {
        assert_eq!(audit.ciphertext().auditor(), auditor);
        assert!(audit.verify(owner, context).is_ok(), "{name}: owner audit {i}");
        let opening = OwnerOpening::decode_exact(&v.bytes(&format!("{name}_owner_opening[{i}]"))).unwrap();
        assert_eq!(opening.commitment(), *owner);
        let named = directory.identify(&owner_auditor(), audit.ciphertext()).unwrap();
        assert_eq!(named, opening.enrolment_id);
    }
    assert_eq!(tx.witnesses.len(), tx.transparent_inputs.len());
    for (witness, input) in tx.witnesses.iter().zip(&tx.transparent_inputs) {
        let witness = P2pkWitness::parse(witness).unwrap();
        assert_eq!(witness.program_commitment(), input.data.witness_program_commitment);
        let pubkey = parse_xonly(&witness.pubkey).unwrap();
        assert!(schnorr_verify(&pubkey, txid, &witness.signature), "{name}: witness");
    }
    if let AnonymousValues::Hidden(proof) = &tx.values {
        assert!(proof.verify(context).is_ok(), "{name}: values' proof");
    }
}

/// One documented anonymous transaction against §5.10: it decodes and re-encodes byte for byte,
/// its txid hashes every byte before the witnesses and the spend proofs, its context and ids
/// follow their definitions, and its proofs verify. Returns it.
fn documented_anonymous(v: &Vectors, name: &str) -> AnonymousTransaction {
    let bytes = v.bytes(&format!("{name}_ser"));
    let specie = SpecieTransaction::decode_exact(&bytes).unwrap();
    let Some(tx) = specie.capability::<AnonymousTransaction>() else {
        panic!("{name}_ser is not an anonymous transaction");
    };
    let tx = tx.clone();
    assert_eq!(specie.encode(), bytes);
    assert_eq!(tx.encode(), bytes);
    assert_eq!(AnonymousTransaction::decode_exact(&bytes).as_ref(), Ok(&tx));
    let mut kind = EXTENSION_HEADER.to_vec();
    kind.push(0x08);
    assert_eq!(KIND_ANONYMOUS, 0x08);
    assert!(bytes.starts_with(&kind));
    let mut unsigned = Vec::new();
    tx.witnesses.encode_to(&mut unsigned);
    tx.spend_proofs.encode_to(&mut unsigned);
    assert!(bytes.ends_with(&unsigned));
    let txid = sha256(&bytes[..bytes.len() - unsigned.len()]);
    assert_eq!(txid, v.hash(&format!("{name}_txid")));
    assert_eq!(tx.txid().0, txid);
    let context = documented_anonymous_context(&bytes, &tx);
    assert_eq!(context, v.hash(&format!("{name}_context")));
    assert_eq!(tx.context(), context);
    check_documented_anonymous_ids(v, name, &tx, &txid);
    check_documented_anonymous_proofs(v, name, &tx, &txid, &context);
    tx
}

#[test]
fn documented_anonymous_bytes_decode_hash_and_verify_as_specified() {
    let v = vectors();
    let enter = documented_anonymous(&v, "anonymous_enter");
    let pay = documented_anonymous(&v, "anonymous_pay");
    let hidden = documented_anonymous(&v, "anonymous_hidden");

    // The chain: alice's funding change enters; she spends what entered; bob spends what she paid
    // him with his redeem change.
    let funding = CompactTransaction::decode_exact(&v.bytes("fastpay_funding_compact_ser")).unwrap();
    assert_eq!(enter.transparent_inputs[0].uhs_id(), funding.created[0]);
    assert_eq!(
        pay.anonymous_inputs[0].uhs_id(),
        UhsId(v.hash("anonymous_enter_uhs_id[0]"))
    );
    assert_eq!(
        hidden.anonymous_inputs[0].uhs_id(),
        UhsId(v.hash("anonymous_pay_uhs_id[1]"))
    );
    let redeem = CompactTransaction::decode_exact(&v.bytes("redeem_compact_ser")).unwrap();
    assert_eq!(hidden.transparent_inputs[0].uhs_id(), redeem.created[0]);

    // The values: 15 in; 10 to bob and 5 out; 10 + 20 in clear to 25 and 5 hidden, which the
    // value auditor reads and the documented opening opens.
    assert_eq!(enter.values, AnonymousValues::Clear(vec![15]));
    assert_eq!(pay.values, AnonymousValues::Clear(vec![10]));
    assert_eq!(pay.transparent_outputs, vec![pays(&key(0x01), 5)]);
    let AnonymousValues::Hidden(proof) = &hidden.values else {
        panic!("anonymous_hidden has values in clear");
    };
    assert_eq!((proof.public_in(), proof.public_out()), (30, 0));
    let value_auditor = specie_confidential::AuditorSecret::from_seed(&[0xa1; 32]);
    assert_eq!(proof.audit(&value_auditor).unwrap(), vec![25, 5]);
    let blinding = v.hash("anonymous_hidden_opening[0]_blinding");
    let opening = specie_confidential::Opening {
        value: 25,
        blinding: Option::from(specie_confidential::Scalar::from_canonical_bytes(blinding)).unwrap(),
    };
    assert_eq!(opening.commitment(), proof.output_commitments()[0]);
}
