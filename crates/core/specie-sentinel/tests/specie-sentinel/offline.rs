//! Bridge funding and payout: valid ones pass and compact as specified, each refusal has its
//! own reason, both round-trip through their encodings, and a fixed vector pins the bytes
//! (docs/transaction-format.md §5.7–5.8).

use crate::common;

use common::*;
use specie_codec::{Decode, Encode};
use specie_ed25519::deterministic_key;
use specie_sentinel::{
    validate, validate_and_compact, BridgeErrorCode, TrustedKeys, TxErrorCode, ValidationError, WitnessErrorCode,
};
use specie_transaction::{
    bridge_funding_marker, bridge_payout_marker, BridgeFunding, BridgePayout, NonceMode, SpecieTransaction,
};

fn bridge() -> ed25519_dalek::SigningKey {
    deterministic_key(b"specie/test/", "offline-bridge", 0)
}

fn banking() -> TrustedKeys {
    trusted().with_offline_authority(Some(bridge().verifying_key().to_bytes()))
}

/// What the funding commits its value to: the bridge's own digest, which the core never reads
/// (the offline bridge's digest of the keys `[1; 32]`, `[2; 32]`, `[3; 32]`, which the documented
/// vectors were made with).
fn owners_digest() -> [u8; 32] {
    let digest = hex::decode("8a2e491356cfdb05a1d13785e0794d7cd163f91af79a146c976b1d2ac643b679").expect("hex");
    digest.try_into().expect("32 bytes")
}

fn bridge_funding(
    amount: u64,
    inputs: &[(secp256k1::Keypair, u64)],
    change: &[(secp256k1::Keypair, u64)],
) -> BridgeFunding {
    let signers: Vec<secp256k1::Keypair> = inputs.iter().map(|(owner, _)| *owner).collect();
    BridgeFunding::new_signed(
        bridge().verifying_key().to_bytes(),
        owners_digest(),
        amount,
        inputs
            .iter()
            .enumerate()
            .map(|(i, (owner, value))| owned_input(owner, *value, 0xD0, i as u64))
            .collect(),
        change.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        &signers,
        NonceMode::Deterministic,
    )
    .unwrap()
}

fn payout(amount: u64) -> BridgePayout {
    let address = pays(&key(7), 1).witness_program_commitment;
    BridgePayout::new_signed(&bridge(), [0x5A; 16], address, amount)
}

fn bridge_error(code: BridgeErrorCode) -> ValidationError {
    ValidationError::Bridge(code)
}

#[test]
fn a_valid_funding_spends_its_inputs_and_creates_its_change_and_marker() {
    let funding = bridge_funding(30, &[(key(1), 50)], &[(key(1), 20)]);
    let tx = SpecieTransaction::BridgeFunding(funding.clone());
    let compact = validate_and_compact(&tx, &banking()).unwrap();
    assert_eq!(compact.spent, vec![funding.inputs[0].uhs_id()]);
    let marker = bridge_funding_marker(&funding.txid());
    assert_eq!(compact.created, vec![tx.created_outputs()[0].uhs_id, marker]);
    assert_eq!(SpecieTransaction::decode_exact(&tx.encode()).unwrap(), tx);
}

#[test]
fn funding_refusals_value_witnesses_and_the_authority() {
    let valid = bridge_funding(30, &[(key(1), 50)], &[(key(1), 20)]);
    let check =
        |funding: BridgeFunding, trusted: &TrustedKeys| validate(&SpecieTransaction::BridgeFunding(funding), trusted);
    assert_eq!(check(valid.clone(), &banking()), Ok(()));
    // Value created from nothing, and a witness over other bytes.
    let inflated = bridge_funding(31, &[(key(1), 50)], &[(key(1), 20)]);
    assert_eq!(
        check(inflated, &banking()),
        Err(ValidationError::Transaction(TxErrorCode::AsymmetricValues))
    );
    let tampered = BridgeFunding {
        owners_digest: [9; 32],
        ..valid.clone()
    };
    assert!(matches!(
        check(tampered, &banking()),
        Err(ValidationError::Witness {
            code: WitnessErrorCode::InvalidSignature,
            ..
        })
    ));
    let zero = bridge_funding(0, &[(key(1), 50)], &[(key(1), 50)]);
    assert_eq!(check(zero, &banking()), Err(bridge_error(BridgeErrorCode::ZeroAmount)));
    // A node that banks for nobody, or for another authority.
    assert_eq!(
        check(valid.clone(), &trusted()),
        Err(bridge_error(BridgeErrorCode::NoAuthority))
    );
    let other = trusted().with_offline_authority(Some([4; 32]));
    assert_eq!(check(valid, &other), Err(bridge_error(BridgeErrorCode::OtherAuthority)));
}

#[test]
fn a_valid_payout_creates_its_output_and_a_marker_per_serial() {
    let payout = payout(40);
    let tx = SpecieTransaction::BridgePayout(payout.clone());
    let compact = validate_and_compact(&tx, &banking()).unwrap();
    assert!(compact.spent.is_empty());
    let created = tx.created_outputs();
    assert_eq!(created.len(), 1);
    assert_eq!((created[0].output.value, created[0].outpoint.index), (40, 0));
    let marker = bridge_payout_marker(&payout.authority, &payout.serial);
    assert_eq!(compact.created, vec![created[0].uhs_id, marker]);
    // Another amount or address for the same serial: another txid, the same marker, so the
    // shards take only one of them.
    let other = BridgePayout::new_signed(&bridge(), payout.serial, [3; 32], 39);
    assert_ne!(other.txid(), payout.txid());
    assert_eq!(other.marker(), payout.marker());
    assert_eq!(SpecieTransaction::decode_exact(&tx.encode()).unwrap(), tx);
}

#[test]
fn payout_refusals_signature_amount_and_the_authority() {
    let check =
        |payout: BridgePayout, trusted: &TrustedKeys| validate(&SpecieTransaction::BridgePayout(payout), trusted);
    assert_eq!(check(payout(40), &banking()), Ok(()));
    let mut forged = payout(40);
    forged.signature[5] ^= 1;
    assert_eq!(
        check(forged, &banking()),
        Err(bridge_error(BridgeErrorCode::InvalidPayoutSignature))
    );
    // Signed by a key the node does not bank for: refused for the key, not the signature.
    let stranger = deterministic_key(b"specie/test/", "stranger", 0);
    let by_stranger = BridgePayout::new_signed(&stranger, [1; 16], [2; 32], 5);
    assert_eq!(
        check(by_stranger, &banking()),
        Err(bridge_error(BridgeErrorCode::OtherAuthority))
    );
    assert_eq!(
        check(payout(0), &banking()),
        Err(bridge_error(BridgeErrorCode::ZeroAmount))
    );
    assert_eq!(
        check(payout(40), &trusted()),
        Err(bridge_error(BridgeErrorCode::NoAuthority))
    );
}

/// The exchange banks through the same two kinds: a node that banks for it takes payouts and
/// fundings naming its key, beside the offline authority's, and refuses every other key.
#[test]
fn the_exchange_is_a_second_bridge_of_the_same_kinds() {
    let exchange = deterministic_key(b"specie/test/", "exchange", 0);
    let both = banking().with_exchange(Some(exchange.verifying_key().to_bytes()));
    let by_exchange = SpecieTransaction::BridgePayout(BridgePayout::new_signed(&exchange, [7; 16], [2; 32], 9));
    assert_eq!(validate(&by_exchange, &both), Ok(()));
    assert_eq!(validate(&SpecieTransaction::BridgePayout(payout(40)), &both), Ok(()));
    let exchange_only = trusted().with_exchange(Some(exchange.verifying_key().to_bytes()));
    assert_eq!(validate(&by_exchange, &exchange_only), Ok(()));
    assert_eq!(
        validate(&SpecieTransaction::BridgePayout(payout(40)), &exchange_only),
        Err(bridge_error(BridgeErrorCode::OtherAuthority))
    );
    assert_eq!(
        validate(&by_exchange, &banking()),
        Err(bridge_error(BridgeErrorCode::OtherAuthority))
    );
}

#[test]
fn truncated_and_extended_encodings_are_refused() {
    for tx in [
        SpecieTransaction::BridgePayout(payout(40)),
        SpecieTransaction::BridgeFunding(bridge_funding(30, &[(key(1), 50)], &[])),
    ] {
        let bytes = tx.encode();
        for cut in 0..bytes.len() {
            assert!(SpecieTransaction::decode_exact(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(SpecieTransaction::decode_exact(&longer).is_err());
    }
}

/// The vectors of docs/transaction-format.md §5.7–5.8: the payout in full, and the funding's
/// txid and marker (its witnesses use deterministic nonces, so its bytes are fixed too).
#[test]
fn the_documented_vectors_hold() {
    let payout = payout(40);
    let funding = bridge_funding(30, &[(key(1), 50)], &[(key(1), 20)]);
    let printed = format!(
        "payout {}\npayout txid {}\npayout marker {}\nfunding txid {}\nfunding marker {}\nfunding bytes {}",
        hex::encode(SpecieTransaction::BridgePayout(payout.clone()).encode()),
        hex::encode(payout.txid().0),
        hex::encode(payout.marker().0),
        hex::encode(funding.txid().0),
        hex::encode(funding.marker().0),
        SpecieTransaction::BridgeFunding(funding).encode().len(),
    );
    let documented = include_str!("../../../../../docs/transaction-format.md");
    for line in printed.lines() {
        assert!(documented.contains(line), "docs/transaction-format.md lacks `{line}`");
    }
}
