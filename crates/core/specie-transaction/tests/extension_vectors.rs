//! specie's own vectors: built here from fixed keys with deterministic (no aux randomness)
//! BIP-340 signatures, and compared with the vector block of `docs/transaction-format.md`, so
//! the document and the code cannot drift apart.

mod common;

use std::collections::BTreeMap;

use rand::SeedableRng;

use common::{format_doc, parse_kv_blocks, read, Vectors};
use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{AccountKey, Committee, CoreAddress, Recipient, TransferOrder};
use specie_transaction::extension::{EXTENSION_HEADER, KIND_FASTPAY_FUND, KIND_FASTPAY_REDEEM, KIND_MINT, KIND_REDEEM};
use specie_transaction::hash::sha256;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    mint_marker, redeem_marker, witness_program_commitment, CompactTransaction, ConfidentialPlan, CreatedOutput,
    FastpayFunding, FastpayRedeem, Input, MintTransaction, NonceMode, Output, RedeemTransaction, SpecieTransaction,
    Transaction, UhsId,
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

    let alice_change = transfer.created_outputs()[1];
    fastpay_vectors(&mut v, &alice, &bob, alice_change);
    confidential_vectors(&mut v, &alice, &bob, transfer.created_outputs()[0]);
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

/// The FastPay vectors: a committee of four authorities and one Byzantine-mode account, keys from
/// `specie_fastpay::deterministic_key`; alice funds the account from her transfer change, and the
/// account's certified transfer to bob's core address is redeemed.
fn fastpay_vectors(v: &mut BTreeMap<String, String>, alice: &Keypair, bob: &Keypair, alice_change: CreatedOutput) {
    let mut put = |name: &str, bytes: &[u8]| {
        v.insert(name.to_owned(), hex::encode(bytes));
    };
    let signing = SigningCommittee::deterministic(4, 0);
    for (i, authority) in signing.keys.iter().enumerate() {
        put(&format!("fastpay_authority_seed[{i}]"), &authority.to_bytes());
        put(
            &format!("fastpay_authority_pubkey[{i}]"),
            &authority.verifying_key().to_bytes(),
        );
    }
    let committee = &signing.committee;
    let mut committee_ser = Vec::new();
    committee.encode_to(&mut committee_ser);
    put("fastpay_committee_ser", &committee_ser);
    put("fastpay_committee_id", &committee.id());
    let owner = specie_fastpay::deterministic_key("account", 0);
    let account = AccountKey(owner.verifying_key().to_bytes());
    put("fastpay_account_seed", &owner.to_bytes());
    put("fastpay_account_pubkey", &account.0);

    // Funding: alice moves 25 of her 40 change into the account, 15 change back to her.
    assert_eq!(alice_change.output.value, 40);
    let funding = FastpayFunding::new_signed(
        committee.id(),
        account,
        25,
        vec![alice_change.to_input()],
        vec![pays(alice, 15)],
        &[*alice],
        NonceMode::Deterministic,
    )
    .unwrap();
    let funding = SpecieTransaction::FastpayFunding(funding);
    put("fastpay_funding_ser", &funding.encode());
    put("fastpay_funding_txid", &funding.txid().0);
    put("fastpay_funding_marker", &funding.marker().unwrap().0);
    put("fastpay_funding_compact_ser", &funding.compact().encode());

    // Redeem: the account pays 10 to bob's core address as its transfer 0, certified by the
    // commit votes of authorities 0, 1 and 2 (a quorum of 3 out of 4: the slow path's final
    // certificate).
    let order = TransferOrder {
        sender: account,
        recipient: Recipient::Core(CoreAddress(witness_program_commitment(&xonly_bytes(bob)))),
        amount: 10,
        sequence: 0,
        memo: Vec::new(),
    }
    .sign(&owner);
    let certificate = signing.commit_certificate(0, &order, &[0, 1, 2]);
    let redeem = SpecieTransaction::FastpayRedeem(FastpayRedeem::new(certificate));
    put("fastpay_redeem_order_digest", &order.order.digest());
    put("fastpay_redeem_ser", &redeem.encode());
    put("fastpay_redeem_txid", &redeem.txid().0);
    put("fastpay_redeem_uhs_id[0]", &redeem.created_outputs()[0].uhs_id.0);
    put("fastpay_redeem_marker", &redeem.marker().unwrap().0);
    put("fastpay_redeem_compact_ser", &redeem.compact().encode());
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
    for name in documented.keys() {
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

#[test]
fn documented_fastpay_bytes_decode_and_hash_as_specified() {
    let v = Vectors(parse_kv_blocks(&read(&format_doc())));

    // Funding: txid and marker from their definitions.
    let funding_bytes = v.bytes("fastpay_funding_ser");
    let SpecieTransaction::FastpayFunding(funding) = SpecieTransaction::decode_exact(&funding_bytes).unwrap() else {
        panic!("fastpay_funding_ser is not a funding");
    };
    assert_eq!(funding.encode(), funding_bytes);
    assert_eq!(funding.committee_id, v.hash("fastpay_committee_id"));
    assert_eq!(funding.account.0, v.hash("fastpay_account_pubkey"));
    let mut preimage = EXTENSION_HEADER.to_vec();
    preimage.push(KIND_FASTPAY_FUND);
    preimage.extend_from_slice(&funding.committee_id);
    preimage.extend_from_slice(&funding.account.0);
    preimage.extend_from_slice(&funding.amount.to_le_bytes());
    funding.inputs.encode_to(&mut preimage);
    funding.outputs.encode_to(&mut preimage);
    assert_eq!(sha256(&preimage), v.hash("fastpay_funding_txid"));
    let mut marker_preimage = b"specie/fastpay-funding/v1".to_vec();
    marker_preimage.extend_from_slice(&v.hash("fastpay_funding_txid"));
    assert_eq!(marker_preimage.len(), 57);
    assert_eq!(sha256(&marker_preimage), v.hash("fastpay_funding_marker"));
    let claim = funding.claim();
    assert_eq!(
        (claim.committee_id, claim.account, claim.amount, claim.marker),
        (
            v.hash("fastpay_committee_id"),
            funding.account,
            25,
            UhsId(v.hash("fastpay_funding_marker"))
        )
    );
    let compact = CompactTransaction::decode_exact(&v.bytes("fastpay_funding_compact_ser")).unwrap();
    assert_eq!(compact.spent, vec![funding.inputs[0].uhs_id()]);
    assert_eq!(compact.created.len(), 2, "the change, then the marker");
    assert_eq!(compact.created[1], UhsId(v.hash("fastpay_funding_marker")));

    // The committee decodes to the documented keys and id.
    let committee = specie_fastpay::decode_exact(
        "committee",
        &v.bytes("fastpay_committee_ser"),
        1 << 16,
        Committee::decode_from,
    )
    .unwrap();
    assert_eq!(committee.id(), v.hash("fastpay_committee_id"));
    for i in 0..4 {
        assert_eq!(
            committee.members()[i],
            v.hash(&format!("fastpay_authority_pubkey[{i}]"))
        );
    }

    // Redeem: the certificate checks, the txid and marker follow their definitions, and the one
    // output pays the order's core address.
    let redeem_bytes = v.bytes("fastpay_redeem_ser");
    let SpecieTransaction::FastpayRedeem(redeem) = SpecieTransaction::decode_exact(&redeem_bytes).unwrap() else {
        panic!("fastpay_redeem_ser is not a FastPay redeem");
    };
    assert_eq!(redeem.encode(), redeem_bytes);
    assert_eq!(redeem.certificate().check(&committee), Ok(()));
    let order = &redeem.certificate().order.order;
    assert_eq!(order.digest(), v.hash("fastpay_redeem_order_digest"));
    let mut preimage = EXTENSION_HEADER.to_vec();
    preimage.push(KIND_FASTPAY_REDEEM);
    preimage.extend_from_slice(&order.digest());
    assert_eq!(sha256(&preimage), v.hash("fastpay_redeem_txid"));
    let mut marker_preimage = b"specie/fastpay-redeem/v1".to_vec();
    marker_preimage.extend_from_slice(&order.sender.0);
    marker_preimage.extend_from_slice(&order.sequence.to_le_bytes());
    assert_eq!(marker_preimage.len(), 64);
    assert_eq!(sha256(&marker_preimage), v.hash("fastpay_redeem_marker"));
    let Recipient::Core(address) = order.recipient else {
        panic!("the documented redeem pays the core");
    };
    let output = Output {
        witness_program_commitment: address.0,
        value: order.amount,
    };
    let txid = specie_transaction::Txid(v.hash("fastpay_redeem_txid"));
    let output_id = specie_transaction::uhs_id_for(&txid, 0, &output);
    assert_eq!(output_id, UhsId(v.hash("fastpay_redeem_uhs_id[0]")));
    let compact = CompactTransaction::decode_exact(&v.bytes("fastpay_redeem_compact_ser")).unwrap();
    assert!(compact.spent.is_empty());
    assert_eq!(compact.created, vec![output_id, UhsId(v.hash("fastpay_redeem_marker"))]);
}
