//! Property tests of FastPay's kinds in the core's format (moved from `specie-transaction`'s
//! tests): decode ∘ encode = id, once installed; hostile bytes never panic and, when they
//! decode, re-encode to themselves (one encoding per value).

use proptest::collection::vec;
use proptest::prelude::*;
use specie_codec::{Decode, Encode};
use specie_fastpay::{
    AccountKey, Certificate, Committee, CommitteeRecord, CoreAddress, Recipient, SignedOrder, TransferOrder,
};
use specie_fastpay_primary::{
    FastpayEpoch, FastpayFunding, FastpayRedeem, KIND_FASTPAY_EPOCH, KIND_FASTPAY_FUND, KIND_FASTPAY_REDEEM,
};
use specie_transaction::extension::EXTENSION_HEADER;
use specie_transaction::test_support::strategies::{hash, input, output, signature, witness};
use specie_transaction::{DecodeLimits, SpecieTransaction};

fn funding() -> impl Strategy<Value = FastpayFunding> {
    (
        hash(),
        hash(),
        any::<u64>(),
        vec(input(), 0..6),
        vec(output(), 0..6),
        vec(witness(), 0..6),
    )
        .prop_map(
            |(committee_id, account, amount, inputs, outputs, witnesses)| FastpayFunding {
                committee_id,
                account: AccountKey(account),
                amount,
                inputs,
                outputs,
                witnesses,
            },
        )
}

/// Certificates of any shape the encoding allows: either recipient, any memo up to the limit,
/// and strictly increasing signers (the one canonical order).
fn fastpay_redeem() -> impl Strategy<Value = FastpayRedeem> {
    let order = (
        hash(),
        any::<bool>(),
        hash(),
        any::<u64>(),
        any::<u64>(),
        vec(any::<u8>(), 0..=specie_fastpay::MEMO_BYTES_MAX),
    )
        .prop_map(|(sender, to_core, to, amount, sequence, memo)| TransferOrder {
            sender: AccountKey(sender),
            recipient: if to_core {
                Recipient::Core(CoreAddress(to))
            } else {
                Recipient::Account(AccountKey(to))
            },
            amount,
            sequence,
            memo,
        });
    let signers = proptest::collection::btree_set(any::<u16>(), 0..6);
    (order, signature(), hash(), any::<u32>(), signers, signature()).prop_map(
        |(order, owner_signature, committee_id, round, signers, authority_signature)| {
            FastpayRedeem::new(Certificate {
                kind: specie_fastpay::VoteKind::Prepare,
                order: SignedOrder {
                    order,
                    signature: owner_signature,
                },
                committee_id,
                round,
                signatures: signers
                    .into_iter()
                    .map(|signer| (signer, authority_signature))
                    .collect(),
            })
        },
    )
}

/// Records of any shape the encoding allows: distinct valid member keys, strictly increasing
/// seats (not necessarily valid endorsements: the decoder does not check them).
fn fastpay_epoch() -> impl Strategy<Value = FastpayEpoch> {
    let members = proptest::collection::btree_set(any::<u64>(), 1..6).prop_map(|seeds| {
        (seeds.into_iter())
            .map(|n| {
                specie_fastpay::deterministic_key("proptest", n)
                    .verifying_key()
                    .to_bytes()
            })
            .collect::<Vec<_>>()
    });
    let seats = proptest::collection::btree_set(any::<u16>(), 0..6);
    (hash(), any::<u64>(), members, seats, signature()).prop_map(|(previous_id, epoch, members, seats, signature)| {
        FastpayEpoch {
            record: CommitteeRecord {
                previous_id,
                next: Committee::new(epoch, members).expect("distinct valid keys"),
                signatures: seats.into_iter().map(|seat| (seat, signature)).collect(),
            },
        }
    })
}

fn fastpay_transaction() -> impl Strategy<Value = SpecieTransaction> {
    prop_oneof![
        funding().prop_map(SpecieTransaction::from),
        fastpay_redeem().prop_map(SpecieTransaction::from),
        fastpay_epoch().prop_map(SpecieTransaction::from),
    ]
}

/// Decoding must never panic; if it succeeds the value must re-encode to exactly these bytes.
fn check_canonical<T: Decode<Limits = DecodeLimits> + Encode>(bytes: &[u8]) {
    if let Ok(value) = T::decode_exact(bytes) {
        assert_eq!(value.encode(), bytes, "accepted bytes must be the canonical encoding");
    }
}

fn check_all(bytes: &[u8]) {
    specie_fastpay_primary::install();
    check_canonical::<SpecieTransaction>(bytes);
    check_canonical::<FastpayFunding>(bytes);
    check_canonical::<FastpayRedeem>(bytes);
    check_canonical::<FastpayEpoch>(bytes);
}

/// The same bytes decode as the kind's own type and as a core transaction, to the same value.
fn decodes_as<T: Decode<Limits = DecodeLimits> + specie_transaction::CapabilityTransaction + PartialEq>(
    tx: &SpecieTransaction,
    bytes: &[u8],
) -> bool {
    match tx.capability::<T>() {
        Some(value) => T::decode_exact(bytes).as_ref() == Ok(value),
        None => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fastpay_transactions_round_trip(tx in fastpay_transaction()) {
        specie_fastpay_primary::install();
        let bytes = tx.encode();
        prop_assert_eq!(SpecieTransaction::decode_exact(&bytes), Ok(tx.clone()));
        prop_assert!(decodes_as::<FastpayFunding>(&tx, &bytes) && decodes_as::<FastpayRedeem>(&tx, &bytes));
        prop_assert!(decodes_as::<FastpayEpoch>(&tx, &bytes));
        prop_assert!(SpecieTransaction::is_extension_encoding(&bytes));
        // Trailing bytes are refused.
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(SpecieTransaction::decode_exact(&longer).is_err());
        // Every strict prefix is refused.
        for cut in [0, bytes.len() / 2, bytes.len() - 1] {
            prop_assert!(SpecieTransaction::decode_exact(&bytes[..cut]).is_err());
        }
        // The compact transaction spends the inputs and creates the outputs, then the marker.
        let compact = tx.compact();
        prop_assert_eq!(compact.spent.len(), tx.inputs().len());
        prop_assert_eq!(compact.created.len(), tx.outputs().len() + 1);
        prop_assert_eq!(compact.created.last().copied(), tx.marker());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..600)) {
        check_all(&bytes);
    }

    #[test]
    fn extension_prefixed_bytes_never_panic(kind in prop_oneof![Just(KIND_FASTPAY_FUND), Just(KIND_FASTPAY_REDEEM),
                                                                Just(KIND_FASTPAY_EPOCH), any::<u8>()],
                                             body in vec(any::<u8>(), 0..400)) {
        let mut bytes = EXTENSION_HEADER.to_vec();
        bytes.push(kind);
        bytes.extend_from_slice(&body);
        check_all(&bytes);
    }

    #[test]
    fn mutated_encodings_never_panic(tx in fastpay_transaction(), position in any::<prop::sample::Index>(),
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
}
