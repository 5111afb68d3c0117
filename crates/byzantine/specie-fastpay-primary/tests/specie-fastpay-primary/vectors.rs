//! FastPay's vectors in `docs/transaction-format.md` (moved from `specie-transaction`'s and
//! `specie-sentinel`'s tests with FastPay's kinds): built here from fixed keys with deterministic
//! signatures and compared with the document, decoded and hashed from their definitions, and
//! validated and compacted by a sentinel with FastPay's rules.

use crate::common;

use std::collections::BTreeMap;

use common::{key, pays, vectors, Vectors};
use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{AccountKey, Committee, CommitteeRecord, CoreAddress, Recipient, TransferOrder};
use specie_fastpay_primary::{
    FastpayEpoch, FastpayFunding, FastpayRedeem, FastpayRules, KIND_FASTPAY_EPOCH, KIND_FASTPAY_FUND,
    KIND_FASTPAY_REDEEM,
};
use specie_sentinel::{validate, validate_and_compact, IssuerKeys, TrustedKeys};
use specie_transaction::extension::EXTENSION_HEADER;
use specie_transaction::hash::sha256;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CompactTransaction, CreatedOutput, NonceMode, Output, SpecieTransaction, UhsId,
};

/// The FastPay values the document lists, computed from scratch from the documented transfer
/// (which `specie-transaction`'s tests check): alice (key `01`×32) funds from her 40 of change,
/// and bob (key `02`×32) is paid by the account.
fn computed(v: &Vectors) -> BTreeMap<String, String> {
    let (alice, bob) = (key(0x01), key(0x02));
    let transfer = SpecieTransaction::decode_exact(&v.bytes("transfer_ser")).unwrap();
    let alice_change = transfer.created_outputs()[1];
    assert_eq!(alice_change.output, pays(&alice, 40));
    let mut computed = BTreeMap::new();
    // The anonymous vectors spend the funding's change (alice's 15, output 0): checked with
    // them, in `specie-private-transactions`.
    fastpay_vectors(&mut computed, &alice, &bob, alice_change);
    computed
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
    let funding = SpecieTransaction::from(funding);
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
    let redeem = SpecieTransaction::from(FastpayRedeem::new(certificate));
    put("fastpay_redeem_order_digest", &order.order.digest());
    put("fastpay_redeem_ser", &redeem.encode());
    put("fastpay_redeem_txid", &redeem.txid().0);
    put("fastpay_redeem_uhs_id[0]", &redeem.created_outputs()[0].uhs_id.0);
    put("fastpay_redeem_marker", &redeem.marker().unwrap().0);
    put("fastpay_redeem_compact_ser", &redeem.compact().encode());

    // Epoch: the committee's epoch 1 hands seat 3 to deterministic_key("authority", 4), endorsed
    // by seats 0, 1 and 2 of epoch 0, and is kept in the ledger.
    let mut members = committee.members().to_vec();
    members[3] = specie_fastpay::deterministic_key("authority", 4)
        .verifying_key()
        .to_bytes();
    let mut record = CommitteeRecord::propose(committee, members).unwrap();
    for seat in 0..3u16 {
        record.endorse(seat, &signing.keys[usize::from(seat)]);
    }
    let epoch = SpecieTransaction::from(FastpayEpoch { record });
    put("fastpay_epoch_ser", &epoch.encode());
    put("fastpay_epoch_txid", &epoch.txid().0);
    put("fastpay_epoch_marker", &epoch.marker().unwrap().0);
    put("fastpay_epoch_compact_ser", &epoch.compact().encode());
}

#[test]
fn document_fastpay_vectors_match_the_code() {
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
    let documented: Vec<&String> = v.0.keys().filter(|name| name.starts_with("fastpay_")).collect();
    assert!(!documented.is_empty());
    for name in documented {
        assert!(computed.contains_key(name), "documented vector {name} is not checked");
    }
}

#[test]
fn documented_fastpay_bytes_decode_and_hash_as_specified() {
    let v = vectors();

    // Funding: txid and marker from their definitions.
    let funding_bytes = v.bytes("fastpay_funding_ser");
    let decoded = SpecieTransaction::decode_exact(&funding_bytes).unwrap();
    let funding = decoded
        .capability::<FastpayFunding>()
        .expect("fastpay_funding_ser is a funding");
    assert_eq!(funding.encode(), funding_bytes);
    assert_eq!(FastpayFunding::decode_exact(&funding_bytes).as_ref(), Ok(funding));
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
    let committee = documented_committee(&v);
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
    let decoded = SpecieTransaction::decode_exact(&redeem_bytes).unwrap();
    let redeem = decoded
        .capability::<FastpayRedeem>()
        .expect("fastpay_redeem_ser is a FastPay redeem");
    assert_eq!(redeem.encode(), redeem_bytes);
    assert_eq!(FastpayRedeem::decode_exact(&redeem_bytes).as_ref(), Ok(redeem));
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

    // Epoch: the record follows the documented committee; txid and marker from their
    // definitions; it creates the marker alone.
    let epoch_bytes = v.bytes("fastpay_epoch_ser");
    let decoded = SpecieTransaction::decode_exact(&epoch_bytes).unwrap();
    let epoch = decoded
        .capability::<FastpayEpoch>()
        .expect("fastpay_epoch_ser is an epoch");
    assert_eq!(FastpayEpoch::decode_exact(&epoch_bytes).as_ref(), Ok(epoch));
    assert_eq!(epoch.record.check(&committee), Ok(()));
    assert_eq!(epoch.record.replaced_seats(&committee), vec![3]);
    let mut preimage = EXTENSION_HEADER.to_vec();
    preimage.push(KIND_FASTPAY_EPOCH);
    preimage.extend_from_slice(&committee.id());
    epoch.record.next.encode_to(&mut preimage);
    assert_eq!(sha256(&preimage), v.hash("fastpay_epoch_txid"));
    let mut marker_preimage = b"specie/fastpay-epoch-record/v1".to_vec();
    marker_preimage.extend_from_slice(&committee.id());
    assert_eq!(marker_preimage.len(), 62);
    assert_eq!(sha256(&marker_preimage), v.hash("fastpay_epoch_marker"));
    let compact = CompactTransaction::decode_exact(&v.bytes("fastpay_epoch_compact_ser")).unwrap();
    assert!(compact.spent.is_empty());
    assert_eq!(compact.created, vec![UhsId(v.hash("fastpay_epoch_marker"))]);
}

/// The committee of the documented vectors.
fn documented_committee(v: &Vectors) -> Committee {
    specie_fastpay::decode_exact(
        "committee",
        &v.bytes("fastpay_committee_ser"),
        1 << 16,
        Committee::decode_from,
    )
    .unwrap()
}

#[test]
fn documented_fastpay_transactions_validate_and_compact_as_documented() {
    let v = vectors();
    let committee = documented_committee(&v);
    let trusted = TrustedKeys::new(IssuerKeys::empty()).with_capability(std::sync::Arc::new(FastpayRules::of(
        specie_fastpay::CommitteeChain::new(committee),
    )));
    let without_committee =
        TrustedKeys::new(IssuerKeys::empty()).with_capability(std::sync::Arc::new(FastpayRules::none()));
    for name in ["fastpay_funding", "fastpay_redeem", "fastpay_epoch"] {
        let bytes = hex::decode(v.get(&format!("{name}_ser"))).unwrap();
        let tx = SpecieTransaction::decode_exact(&bytes).unwrap();
        assert_eq!(tx.kind_name(), name);
        let compact = validate_and_compact(&tx, &trusted).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            hex::encode(compact.encode()),
            v.get(&format!("{name}_compact_ser")),
            "{name}"
        );
        // Without the committee configured, both are refused; without FastPay's rules, too.
        let verdict = validate(&tx, &without_committee).map_err(|e| e.code());
        assert_eq!(verdict, Err("no_fastpay_committee"), "{name}");
        let verdict = validate(&tx, &TrustedKeys::default()).map_err(|e| e.code());
        assert_eq!(verdict, Err("kind_not_accepted"), "{name}");
    }
}
