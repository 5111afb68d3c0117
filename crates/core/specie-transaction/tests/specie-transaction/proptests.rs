//! Property tests: decode ∘ encode = id, and hostile bytes never panic, never over-allocate, and
//! when they do decode, re-encode to themselves (one encoding per value).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use specie_codec::DecodeError;
use specie_codec::{Decode, Encode};
use specie_transaction::extension::{EXTENSION_HEADER, KIND_BRIDGE_FUND, KIND_BRIDGE_PAYOUT, KIND_MINT, KIND_REDEEM};
use specie_transaction::test_support::strategies::{hash, input, output, witness};
use specie_transaction::{
    CompactTransaction, DecodeLimits, MintTransaction, RedeemTransaction, SpecieTransaction, Transaction, Txid, UhsId,
};

fn transaction() -> impl Strategy<Value = Transaction> {
    (vec(input(), 0..6), vec(output(), 0..6), vec(witness(), 0..6)).prop_map(|(inputs, outputs, witnesses)| {
        Transaction {
            inputs,
            outputs,
            witnesses,
        }
    })
}

fn mint() -> impl Strategy<Value = MintTransaction> {
    (hash(), vec(output(), 0..6), hash(), hash(), hash()).prop_map(|(nonce, outputs, issuer_pubkey, s0, s1)| {
        let mut issuer_signature = [0u8; 64];
        issuer_signature[..32].copy_from_slice(&s0);
        issuer_signature[32..].copy_from_slice(&s1);
        MintTransaction {
            nonce,
            outputs,
            issuer_pubkey,
            issuer_signature,
        }
    })
}

fn redeem() -> impl Strategy<Value = RedeemTransaction> {
    (any::<u64>(), transaction(), hash(), hash()).prop_map(|(amount, tx, issuer_pubkey, s)| {
        let mut issuer_signature = [7u8; 64];
        issuer_signature[..32].copy_from_slice(&s);
        RedeemTransaction {
            amount,
            inputs: tx.inputs,
            outputs: tx.outputs,
            witnesses: tx.witnesses,
            issuer_pubkey,
            issuer_signature,
        }
    })
}

fn specie_transaction() -> impl Strategy<Value = SpecieTransaction> {
    prop_oneof![
        transaction().prop_map(SpecieTransaction::Transfer),
        mint().prop_map(SpecieTransaction::Mint),
        redeem().prop_map(SpecieTransaction::Redeem),
    ]
}

fn compact() -> impl Strategy<Value = CompactTransaction> {
    (
        hash(),
        vec(hash(), 0..6),
        vec(hash(), 0..6),
        btree_map(hash(), (hash(), hash()), 0..4),
    )
        .prop_map(|(txid, spent, created, attestations)| CompactTransaction {
            txid: Txid(txid),
            spent: spent.into_iter().map(UhsId).collect(),
            created: created.into_iter().map(UhsId).collect(),
            attestations: attestations
                .into_iter()
                .map(|(key, (a, b))| {
                    let mut signature = [0u8; 64];
                    signature[..32].copy_from_slice(&a);
                    signature[32..].copy_from_slice(&b);
                    (key, signature)
                })
                .collect::<BTreeMap<_, _>>(),
        })
}

/// Decoding must never panic; if it succeeds the value must re-encode to exactly these bytes.
fn check_canonical<T: Decode<Limits = DecodeLimits> + Encode>(bytes: &[u8]) {
    if let Ok(value) = T::decode_exact(bytes) {
        assert_eq!(value.encode(), bytes, "accepted bytes must be the canonical encoding");
    }
}

fn check_all(bytes: &[u8]) {
    check_canonical::<SpecieTransaction>(bytes);
    check_canonical::<Transaction>(bytes);
    check_canonical::<MintTransaction>(bytes);
    check_canonical::<RedeemTransaction>(bytes);
    check_canonical::<CompactTransaction>(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn transaction_round_trips(tx in transaction()) {
        let bytes = tx.encode();
        prop_assert_eq!(Transaction::decode_exact(&bytes), Ok(tx.clone()));
        // A transfer is a SpecieTransaction with the very same bytes.
        let specie = SpecieTransaction::Transfer(tx);
        prop_assert_eq!(specie.encode(), bytes.clone());
        prop_assert_eq!(SpecieTransaction::decode_exact(&bytes), Ok(specie));
    }

    #[test]
    fn specie_transaction_round_trips(tx in specie_transaction()) {
        let bytes = tx.encode();
        prop_assert_eq!(SpecieTransaction::decode_exact(&bytes), Ok(tx.clone()));
        prop_assert_eq!(SpecieTransaction::is_extension_encoding(&bytes), !matches!(tx, SpecieTransaction::Transfer(_)));
        // Trailing bytes are refused.
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(SpecieTransaction::decode_exact(&longer).is_err());
        // Every strict prefix is refused.
        for cut in [0, bytes.len() / 2, bytes.len() - 1] {
            prop_assert!(SpecieTransaction::decode_exact(&bytes[..cut]).is_err());
        }
        // The compact transaction spends the inputs and creates the outputs, then the marker of
        // the kinds that have one.
        let compact = tx.compact();
        prop_assert_eq!(compact.spent.len(), tx.inputs().len());
        prop_assert_eq!(compact.created.len(), tx.outputs().len() + usize::from(tx.marker().is_some()));
        prop_assert_eq!(compact.created.last().copied(), tx.marker().or(compact.created.last().copied()));
    }

    #[test]
    fn compact_transaction_round_trips(compact in compact()) {
        let bytes = compact.encode();
        prop_assert_eq!(CompactTransaction::decode_exact(&bytes), Ok(compact.clone()));
        // Attestations never change the message they sign.
        let mut bare = compact.clone();
        bare.attestations.clear();
        prop_assert_eq!(bare.attestation_message(), compact.attestation_message());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..600)) {
        check_all(&bytes);
    }

    #[test]
    fn extension_prefixed_bytes_never_panic(kind in prop_oneof![Just(KIND_MINT), Just(KIND_REDEEM),
                                                                Just(KIND_BRIDGE_FUND), Just(KIND_BRIDGE_PAYOUT), any::<u8>()],
                                             body in vec(any::<u8>(), 0..400)) {
        let mut bytes = EXTENSION_HEADER.to_vec();
        bytes.push(kind);
        bytes.extend_from_slice(&body);
        check_all(&bytes);
    }

    #[test]
    fn mutated_encodings_never_panic(tx in specie_transaction(), position in any::<prop::sample::Index>(),
                                     byte in any::<u8>(), mode in 0u8..3) {
        let mut bytes = tx.encode();
        let at = position.index(bytes.len());
        match mode {
            0 => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            _ => { bytes.remove(at); }
        }
        check_all(&bytes);
    }

    #[test]
    fn forged_counts_fail_fast_without_allocating(count in any::<u64>(), tail in 0usize..16) {
        // A count at the first count position of every format, with only `tail` bytes after it.
        let limits = DecodeLimits {
            inputs_max: u64::MAX,
            outputs_max: u64::MAX,
            witnesses_max: u64::MAX,
            witness_bytes_max: u64::MAX,
            compact_spent_max: u64::MAX,
            compact_created_max: u64::MAX,
            attestations_max: u64::MAX,
            ..DecodeLimits::default()
        };
        let mut transfer = count.to_le_bytes().to_vec();
        transfer.resize(8 + tail, 0);
        let mut compact_bytes = vec![0u8; 32];
        compact_bytes.extend_from_slice(&count.to_le_bytes());
        compact_bytes.resize(40 + tail, 0);
        let started = Instant::now();
        let transfer_result = Transaction::decode_exact_with(&transfer, &limits);
        let compact_result = CompactTransaction::decode_exact_with(&compact_bytes, &limits);
        prop_assert!(started.elapsed() < Duration::from_millis(100));
        if count > 0 {
            let is_count_exceeds_input = matches!(transfer_result, Err(DecodeError::CountExceedsInput { .. }));
            prop_assert!(is_count_exceeds_input);
            let is_count_exceeds_input = matches!(compact_result, Err(DecodeError::CountExceedsInput { .. }));
            prop_assert!(is_count_exceeds_input);
        }
    }
}

#[test]
fn u64_max_count_with_ten_bytes_is_an_error_under_default_limits() {
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 10]);
    assert_eq!(
        SpecieTransaction::decode_exact(&bytes),
        Err(DecodeError::CountTooLarge {
            what: "inputs",
            count: u64::MAX,
            max: DecodeLimits::INPUTS_MAX_DEFAULT
        })
    );
    let mut compact_bytes = vec![0u8; 32];
    compact_bytes.extend_from_slice(&bytes);
    assert!(matches!(
        CompactTransaction::decode_exact(&compact_bytes),
        Err(DecodeError::CountTooLarge {
            what: "spent uhs ids",
            ..
        })
    ));
}

#[test]
fn oversized_input_is_refused_before_parsing() {
    let limits = DecodeLimits::default();
    let bytes = vec![0u8; limits.transaction_bytes_max + 1];
    assert!(matches!(
        SpecieTransaction::decode_exact(&bytes),
        Err(DecodeError::TooLarge {
            what: "transaction",
            ..
        })
    ));
}

#[test]
fn error_messages_read_as_sentences() {
    let err = Transaction::decode_exact(&[1, 0, 0, 0, 0, 0, 0, 0, 5]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "inputs: count 1 needs at least 80 bytes per element, but only 1 bytes remain"
    );
}
