//! specie's own vectors: built here from fixed keys with deterministic (no aux randomness)
//! BIP-340 signatures, and compared with the vector block of `docs/transaction-format.md`, so
//! the document and the code cannot drift apart.

use crate::common;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::SeedableRng;

use common::{format_doc, parse_kv_blocks, read, Vectors};
use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_credential::{
    AuditDirectory, AuditorKey as OwnerAuditorKey, AuditorSecret as OwnerAuditorSecret, EnrolmentId, Identity,
    Jurisdiction, OwnerCommitment, OwnerOpening, RaPublicKey, RegistrationAuthority, UserSecret,
};
use specie_transaction::extension::{EXTENSION_HEADER, KIND_MINT, KIND_REDEEM};
use specie_transaction::hash::sha256;
use specie_transaction::signing::{keypair_from_secret, parse_xonly, schnorr_verify, xonly_bytes, P2pkWitness};
use specie_transaction::{
    mint_marker, redeem_marker, witness_program_commitment, AnonymousPlan, AnonymousSpend, AnonymousTransaction,
    AnonymousValue, AnonymousValues, CompactTransaction, ConfidentialPlan, CreatedOutput, Input, MintTransaction,
    NonceMode, OutPoint, Output, RedeemTransaction, SpecieTransaction, Transaction, Txid, UhsId,
};

fn key(byte: u8) -> Keypair {
    keypair_from_secret(&[byte; 32]).unwrap()
}

fn pays(keypair: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(keypair)),
        value,
    }
}

/// Every value the document lists, computed from scratch.
fn computed() -> BTreeMap<String, String> {
    let (alice, bob, issuer, sentinel) = (key(0x01), key(0x02), key(0x03), key(0x04));
    let mut v = BTreeMap::new();
    let mut put = |name: &str, bytes: &[u8]| {
        v.insert(name.to_owned(), hex::encode(bytes));
    };
    put("alice_privkey", &[0x01; 32]);
    put("bob_privkey", &[0x02; 32]);
    put("issuer_privkey", &[0x03; 32]);
    put("sentinel_privkey", &[0x04; 32]);
    put("issuer_xonly_pubkey", &xonly_bytes(&issuer));
    put("sentinel_xonly_pubkey", &xonly_bytes(&sentinel));

    // Mint: 100 to alice, 50 to bob.
    let nonce: [u8; 32] = std::array::from_fn(|i| i as u8);
    let mint = MintTransaction::new_signed(
        nonce,
        vec![pays(&alice, 100), pays(&bob, 50)],
        &issuer,
        NonceMode::Deterministic,
    );
    let mint = SpecieTransaction::Mint(mint);
    let mint_txid = mint.txid();
    put("mint_nonce", &nonce);
    put("mint_ser", &mint.encode());
    put("mint_txid", &mint_txid.0);
    let mint_created = mint.created_outputs();
    put("mint_uhs_id[0]", &mint_created[0].uhs_id.0);
    put("mint_uhs_id[1]", &mint_created[1].uhs_id.0);
    put("mint_marker", &mint_marker(&mint_txid).0);
    let mut mint_compact = mint.compact();
    put("mint_compact_ser", &mint_compact.encode());
    put("mint_attestation_message", &mint_compact.attestation_message());
    mint_compact.attest(&sentinel, NonceMode::Deterministic);
    put("mint_compact_ser_attested", &mint_compact.encode());

    // Transfer (the reference format): alice spends mint output 0, 60 to bob, 40 change.
    let mut transfer = Transaction {
        inputs: vec![mint_created[0].to_input()],
        outputs: vec![pays(&bob, 60), pays(&alice, 40)],
        witnesses: vec![],
    };
    transfer.sign(&[alice], NonceMode::Deterministic).unwrap();
    let transfer = SpecieTransaction::Transfer(transfer);
    put("transfer_ser", &transfer.encode());
    put("transfer_txid", &transfer.txid().0);
    put("transfer_compact_ser", &transfer.compact().encode());

    // Redeem: bob redeems 30 of mint output 1 (50), 20 change back to bob.
    let redeem = RedeemTransaction::new_signed(
        30,
        vec![mint_created[1].to_input()],
        vec![pays(&bob, 20)],
        &[bob],
        &issuer,
        NonceMode::Deterministic,
    )
    .unwrap();
    let redeem = SpecieTransaction::Redeem(redeem);
    put("redeem_ser", &redeem.encode());
    put("redeem_txid", &redeem.txid().0);
    put("redeem_compact_ser", &redeem.compact().encode());

    let alice_funding_change = documented_funding_change(&alice, transfer.created_outputs()[1]);
    confidential_vectors(&mut v, &alice, &bob, transfer.created_outputs()[0]);
    anonymous_vectors(&mut v, &alice, &bob, alice_funding_change, redeem.created_outputs()[0]);
    v
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
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
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
fn documented_funding_change(alice: &Keypair, alice_change: CreatedOutput) -> CreatedOutput {
    assert_eq!(alice_change.output.value, 40);
    let v = Vectors(parse_kv_blocks(&read(&format_doc())));
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
    let documented = parse_kv_blocks(&read(&format_doc()));
    let computed = computed();
    // Collect every difference so that one run shows the whole block to paste into the doc.
    let wrong: Vec<String> = computed
        .iter()
        .filter(|(name, value)| documented.get(*name) != Some(*value))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "docs/transaction-format.md lacks or misstates these vectors:\n{}",
        wrong.join("\n")
    );
    // specie-fastpay-primary's tests check the `fastpay_*` vectors.
    for name in documented.keys().filter(|name| !name.starts_with("fastpay_")) {
        assert!(computed.contains_key(name), "documented vector {name} is not checked");
    }
}

#[test]
fn documented_bytes_decode_and_hash_as_specified() {
    let v = Vectors(parse_kv_blocks(&read(&format_doc())));

    // Mint: decode, re-encode, and recompute the txid from its definition.
    let mint_bytes = v.bytes("mint_ser");
    let SpecieTransaction::Mint(mint) = SpecieTransaction::decode_exact(&mint_bytes).unwrap() else {
        panic!("mint_ser is not a mint");
    };
    assert_eq!(mint.encode(), mint_bytes);
    let mut preimage = EXTENSION_HEADER.to_vec();
    preimage.push(KIND_MINT);
    preimage.extend_from_slice(&mint.nonce);
    mint.outputs.encode_to(&mut preimage);
    assert_eq!(sha256(&preimage), v.hash("mint_txid"));
    let mut marker_preimage = b"specie/mint-marker/v1".to_vec();
    marker_preimage.extend_from_slice(&v.hash("mint_txid"));
    assert_eq!(marker_preimage.len(), 53);
    assert_eq!(sha256(&marker_preimage), v.hash("mint_marker"));

    let compact = CompactTransaction::decode_exact(&v.bytes("mint_compact_ser")).unwrap();
    assert!(compact.spent.is_empty());
    assert_eq!(
        compact.created,
        vec![
            UhsId(v.hash("mint_uhs_id[0]")),
            UhsId(v.hash("mint_uhs_id[1]")),
            UhsId(v.hash("mint_marker"))
        ]
    );
    let attested = CompactTransaction::decode_exact(&v.bytes("mint_compact_ser_attested")).unwrap();
    let (pubkey, signature) = attested.attestations.iter().next().unwrap();
    assert_eq!(pubkey, &v.hash("sentinel_xonly_pubkey"));
    assert_eq!(attested.verify_attestation(pubkey, signature), Ok(()));

    // The transfer decodes with the reference format alone.
    let transfer = Transaction::decode_exact(&v.bytes("transfer_ser")).unwrap();
    assert_eq!(transfer.txid().0, v.hash("transfer_txid"));
    assert_eq!(transfer.inputs[0].uhs_id(), UhsId(v.hash("mint_uhs_id[0]")));

    // Redeem txid from its definition.
    let SpecieTransaction::Redeem(redeem) = SpecieTransaction::decode_exact(&v.bytes("redeem_ser")).unwrap() else {
        panic!("redeem_ser is not a redeem");
    };
    let mut preimage = EXTENSION_HEADER.to_vec();
    preimage.push(KIND_REDEEM);
    preimage.extend_from_slice(&redeem.amount.to_le_bytes());
    redeem.inputs.encode_to(&mut preimage);
    redeem.outputs.encode_to(&mut preimage);
    assert_eq!(sha256(&preimage), v.hash("redeem_txid"));
    let redeem_compact = CompactTransaction::decode_exact(&v.bytes("redeem_compact_ser")).unwrap();
    assert_eq!(redeem_compact.spent, vec![UhsId(v.hash("mint_uhs_id[1]"))]);
    assert_eq!(redeem_compact.created.len(), 2, "the change, then the marker");
    assert_eq!(redeem_compact.created[1], redeem_marker(&redeem.txid()));
    let input: Input = redeem.inputs[0];
    assert_eq!(input.data.value, 50);
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
    let SpecieTransaction::Anonymous(tx) = SpecieTransaction::decode_exact(&bytes).unwrap() else {
        panic!("{name}_ser is not an anonymous transaction");
    };
    assert_eq!(tx.encode(), bytes);
    assert_eq!(AnonymousTransaction::decode_exact(&bytes).as_ref(), Ok(&*tx));
    let mut kind = EXTENSION_HEADER.to_vec();
    kind.push(0x08);
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
    *tx
}

#[test]
fn documented_anonymous_bytes_decode_hash_and_verify_as_specified() {
    let v = Vectors(parse_kv_blocks(&read(&format_doc())));
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
