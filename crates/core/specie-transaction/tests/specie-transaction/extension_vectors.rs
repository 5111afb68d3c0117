//! specie's own vectors: built here from fixed keys with deterministic (no aux randomness)
//! BIP-340 signatures, and compared with the vector block of `docs/transaction-format.md`, so
//! the document and the code cannot drift apart. The vectors of the kinds capabilities add are
//! checked by their crates' tests, where those kinds are known: `fastpay_*` by
//! `specie-fastpay-primary`'s, `confidential_*` and `anonymous_*` by
//! `specie-private-transactions`'s.

use crate::common;

use std::collections::BTreeMap;

use common::{format_doc, parse_kv_blocks, read, Vectors};
use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_transaction::extension::{EXTENSION_HEADER, KIND_MINT, KIND_REDEEM};
use specie_transaction::hash::sha256;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    mint_marker, redeem_marker, witness_program_commitment, CompactTransaction, Input, MintTransaction, NonceMode,
    Output, RedeemTransaction, SpecieTransaction, Transaction, UhsId,
};

/// The prefixes of the vectors the capabilities' crates check.
const CAPABILITY_PREFIXES: [&str; 3] = ["fastpay_", "confidential_", "anonymous_"];

fn key(byte: u8) -> Keypair {
    keypair_from_secret(&[byte; 32]).unwrap()
}

fn pays(keypair: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(keypair)),
        value,
    }
}

/// Every value of the core's kinds the document lists, computed from scratch.
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
    v
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
    // The capabilities' crates check theirs.
    let core = documented
        .keys()
        .filter(|name| !CAPABILITY_PREFIXES.iter().any(|prefix| name.starts_with(prefix)));
    for name in core {
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
