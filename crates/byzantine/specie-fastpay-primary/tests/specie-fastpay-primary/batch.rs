//! Property tests with FastPay's kinds among the core's (moved from `specie-sentinel`'s tests):
//! honestly signed random transactions validate; a corrupted signature, amount or certificate is
//! rejected; and the parallel batch, which hands each task's fundings and redeems to
//! `FastpayRules::check_batch`, equals validating one by one.

use crate::common;

use common::*;
use proptest::collection::vec;
use proptest::prelude::*;
use specie_fastpay_primary::{FastpayFunding, FastpayRedeem};
use specie_sentinel::{validate, validate_and_compact, validate_batch};
use specie_transaction::test_support::strategies;
use specie_transaction::{CompactTransaction, SpecieTransaction};

/// `amount` of `value` (1 ≤ amount ≤ value), and the change, if any.
fn amount_and_change(seed: u8, value: u64, cut: u64) -> (u64, Vec<(secp256k1::Keypair, u64)>) {
    let amount = 1 + cut % value;
    let change = if amount == value {
        vec![]
    } else {
        vec![(key(seed), value - amount)]
    };
    (amount, change)
}

fn valid_specie_strategy() -> impl Strategy<Value = SpecieTransaction> {
    prop_oneof![
        strategies::valid_transfer().prop_map(SpecieTransaction::Transfer),
        (vec((1u8..=250, 1u64..1_000_000), 1..4)).prop_map(|outputs| {
            let outputs: Vec<_> = outputs.iter().map(|(seed, value)| (key(*seed), *value)).collect();
            SpecieTransaction::Mint(mint(&outputs))
        }),
        (1u8..=250, 2u64..1_000_000, any::<u64>()).prop_map(|(seed, value, cut)| {
            let (amount, change) = amount_and_change(seed, value, cut);
            SpecieTransaction::Redeem(redeem(amount, &[(key(seed), value)], &change))
        }),
        (1u8..=250, 2u64..1_000_000, any::<u64>()).prop_map(|(seed, value, cut)| {
            let (amount, change) = amount_and_change(seed, value, cut);
            SpecieTransaction::from(funding(amount, &[(key(seed), value)], &change))
        }),
        (1u8..=250, 1u64..1_000_000, any::<u64>()).prop_map(|(seed, amount, sequence)| {
            SpecieTransaction::from(fastpay_redeem(&key(seed), amount, sequence))
        }),
    ]
}

/// A FastPay funding or redeem with one thing changed: its amount or a witness byte (funding),
/// or the certified amount, the owner's or an authority's signature (redeem). `None` for the
/// core's kinds.
fn corrupt_fastpay(tx: &SpecieTransaction, byte: usize, flip: u8) -> Option<SpecieTransaction> {
    if let Some(funding) = tx.capability::<FastpayFunding>() {
        let mut funding = funding.clone();
        if byte < 8 {
            funding.amount ^= u64::from(flip) << (8 * byte);
        } else {
            funding.witnesses[0].0[33 + byte % 64] ^= flip;
        }
        return Some(funding.into());
    }
    let redeem = tx.capability::<FastpayRedeem>()?;
    let mut certificate = redeem.certificate().clone();
    match byte % 3 {
        0 => certificate.order.order.amount ^= u64::from(flip) << (8 * (byte % 8)),
        1 => certificate.order.signature[byte % 64] ^= flip,
        _ => certificate.signatures[byte % 3].1[byte % 64] ^= flip,
    }
    Some(FastpayRedeem::new(certificate).into())
}

/// One bit of a signature flipped: a witness, the issuer's, or a FastPay authority's.
fn corrupt_signature(tx: SpecieTransaction, byte: usize) -> SpecieTransaction {
    match tx {
        SpecieTransaction::Transfer(mut t) => {
            t.witnesses[0].0[byte] ^= 1;
            SpecieTransaction::Transfer(t)
        }
        SpecieTransaction::Mint(mut m) => {
            m.issuer_signature[byte % 64] ^= 1;
            SpecieTransaction::Mint(m)
        }
        SpecieTransaction::Redeem(mut r) => {
            r.witnesses[0].0[byte] ^= 1;
            SpecieTransaction::Redeem(r)
        }
        tx => {
            if let Some(funding) = tx.capability::<FastpayFunding>() {
                let mut funding = funding.clone();
                funding.witnesses[0].0[byte] ^= 1;
                return funding.into();
            }
            let mut certificate = tx
                .capability::<FastpayRedeem>()
                .expect("the strategy's kinds")
                .certificate()
                .clone();
            certificate.signatures[0].1[byte % 64] ^= 1;
            FastpayRedeem::new(certificate).into()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn valid_signed_transactions_validate(tx in valid_specie_strategy()) {
        prop_assert_eq!(validate(&tx, &trusted()), Ok(()));
        let compact = validate_and_compact(&tx, &trusted()).unwrap();
        prop_assert_eq!(compact.spent.len(), tx.inputs().len());
        prop_assert_eq!(compact.created.len(), tx.outputs().len() + usize::from(tx.marker().is_some()));
    }

    #[test]
    fn corrupted_issuer_signature_or_amount_is_rejected(tx in valid_specie_strategy(), byte in 0usize..64,
                                                        flip in 1u8..=255) {
        let mut tx = tx;
        match &mut tx {
            SpecieTransaction::Transfer(_) => return Ok(()),
            SpecieTransaction::Mint(mint) => mint.issuer_signature[byte] ^= flip,
            SpecieTransaction::Redeem(redeem) => {
                if byte < 8 {
                    redeem.amount ^= u64::from(flip) << (8 * byte);
                } else {
                    redeem.issuer_signature[byte] ^= flip;
                }
            }
            SpecieTransaction::Capability(_) => {
                tx = corrupt_fastpay(&tx, byte, flip).expect("the strategy's capability kinds are FastPay's");
            }
            SpecieTransaction::BridgeFunding(_) | SpecieTransaction::BridgePayout(_) => {
                unreachable!("the strategy makes no offline or private transactions")
            }
        }
        prop_assert!(validate(&tx, &trusted()).is_err());
    }

    #[test]
    fn batch_equals_sequential(txs in vec((valid_specie_strategy(), any::<bool>(), 0usize..97), 0..24)) {
        let txs: Vec<SpecieTransaction> = txs
            .into_iter()
            .map(|(tx, corrupt, byte)| if corrupt { corrupt_signature(tx, byte) } else { tx })
            .collect();
        let trusted = trusted();
        let sequential: Vec<_> = txs.iter().map(|tx| validate_and_compact(tx, &trusted)).collect();
        prop_assert_eq!(validate_batch(&txs, &trusted), sequential);
    }
}

/// Enough transactions for several chunks on any core count, FastPay's kinds in every chunk.
#[test]
fn large_mixed_batch_with_fastpay_kinds_equals_sequential() {
    let mut txs = Vec::new();
    for i in 0..120u64 {
        let value = 10 + i;
        let tx = match i % 4 {
            0 => SpecieTransaction::Transfer(transfer(&[(key(1), value)], &[(key(2), value - 1), (key(1), 1)])),
            1 => SpecieTransaction::from(funding(value - 1, &[(key(1), value)], &[(key(1), 1)])),
            2 => SpecieTransaction::from(fastpay_redeem(&key(2), value, i)),
            _ => SpecieTransaction::Mint(mint(&[(key(1), value)])),
        };
        // Every fifth broken: a signature, or a certificate's (a redeem whose quorum is forged).
        txs.push(if i % 5 == 2 { corrupt_signature(tx, 40) } else { tx });
    }
    // And fundings that FastPay's own checks refuse (another committee), not only the reference's.
    for i in 0..8u64 {
        let mut other = funding(5, &[(key(3), 5 + i)], &[]);
        other.committee_id = committee_of(&authorities(4), 1).id();
        other
            .sign(&[key(3)], specie_transaction::NonceMode::Deterministic)
            .unwrap();
        txs.insert(usize::try_from(i * 15).unwrap(), other.into());
    }
    let trusted = trusted();
    let sequential: Vec<Result<CompactTransaction, _>> =
        txs.iter().map(|tx| validate_and_compact(tx, &trusted)).collect();
    assert_eq!(validate_batch(&txs, &trusted), sequential);
    let codes: std::collections::BTreeSet<&str> = sequential
        .iter()
        .filter_map(|verdict| verdict.as_ref().err())
        .map(|e| e.code())
        .collect();
    let fastpay_ok = txs
        .iter()
        .zip(&sequential)
        .filter(|(tx, verdict)| matches!(tx, SpecieTransaction::Capability(_)) && verdict.is_ok())
        .count();
    assert!(fastpay_ok > 40, "{fastpay_ok} valid fundings and redeems");
    for code in [
        "funding_other_committee",
        "certificate_bad_signature",
        "invalid_signature",
    ] {
        assert!(codes.contains(code), "{code} in {codes:?}");
    }
}
