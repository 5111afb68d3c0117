//! Property tests: honestly signed random transactions validate; a single corrupted byte of any
//! signature or value is rejected; the parallel batch equals sequential validation.

use crate::common;

use common::*;
use proptest::collection::vec;
use proptest::prelude::*;
use specie_sentinel::{validate, validate_and_compact, validate_batch, ValidationError, WitnessErrorCode};
use specie_transaction::test_support::strategies;
use specie_transaction::SpecieTransaction;

fn valid_specie_strategy() -> impl Strategy<Value = SpecieTransaction> {
    prop_oneof![
        strategies::valid_transfer().prop_map(SpecieTransaction::Transfer),
        (vec((1u8..=250, 1u64..1_000_000), 1..4)).prop_map(|outputs| {
            let outputs: Vec<_> = outputs.iter().map(|(seed, value)| (key(*seed), *value)).collect();
            SpecieTransaction::Mint(mint(&outputs))
        }),
        (1u8..=250, 2u64..1_000_000, any::<u64>()).prop_map(|(seed, value, cut)| {
            let amount = 1 + cut % value;
            let change: Vec<_> = if amount == value {
                vec![]
            } else {
                vec![(key(seed), value - amount)]
            };
            SpecieTransaction::Redeem(redeem(amount, &[(key(seed), value)], &change))
        }),
    ]
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
    fn corrupted_witness_signature_is_rejected(tx in strategies::valid_transfer(),
                                               which in any::<prop::sample::Index>(),
                                               byte in 33usize..97, flip in 1u8..=255) {
        let mut tx = tx;
        let index = which.index(tx.witnesses.len());
        tx.witnesses[index].0[byte] ^= flip;
        prop_assert_eq!(
            specie_sentinel::validate_transfer(&tx),
            Err(ValidationError::Witness { index: index as u64, code: WitnessErrorCode::InvalidSignature })
        );
    }

    #[test]
    fn corrupted_value_is_rejected(tx in strategies::valid_transfer(), in_input in any::<bool>(),
                                   which in any::<prop::sample::Index>(), byte in 0usize..8, flip in 1u8..=255) {
        let mut tx = tx;
        let mask = u64::from(flip) << (8 * byte);
        if in_input {
            let index = which.index(tx.inputs.len());
            tx.inputs[index].data.value ^= mask;
        } else {
            let index = which.index(tx.outputs.len());
            tx.outputs[index].value ^= mask;
        }
        prop_assert!(specie_sentinel::validate_transfer(&tx).is_err());
    }

    #[test]
    fn corrupted_issuer_signature_or_amount_is_rejected(tx in valid_specie_strategy(), byte in 0usize..64, flip in 1u8..=255) {
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
            SpecieTransaction::BridgeFunding(_) | SpecieTransaction::BridgePayout(_) | SpecieTransaction::Capability(_) => {
                unreachable!("the strategy makes no offline or capability transactions (tested elsewhere)")
            }
        }
        prop_assert!(validate(&tx, &trusted()).is_err());
    }

    #[test]
    fn batch_equals_sequential(txs in vec((valid_specie_strategy(), any::<bool>(), 0usize..97), 0..24)) {
        let txs: Vec<SpecieTransaction> = txs
            .into_iter()
            .map(|(mut tx, corrupt, byte)| {
                if corrupt {
                    match &mut tx {
                        SpecieTransaction::Transfer(t) => t.witnesses[0].0[byte] ^= 1,
                        SpecieTransaction::Mint(m) => m.issuer_signature[byte % 64] ^= 1,
                        SpecieTransaction::Redeem(r) => r.witnesses[0].0[byte] ^= 1,
                        SpecieTransaction::BridgeFunding(_)
                        | SpecieTransaction::BridgePayout(_)
                        | SpecieTransaction::Capability(_) => {
                            unreachable!("the strategy makes no offline or capability transactions")
                        }
                    }
                }
                tx
            })
            .collect();
        let trusted = trusted();
        let sequential: Vec<_> = txs.iter().map(|tx| validate_and_compact(tx, &trusted)).collect();
        prop_assert_eq!(validate_batch(&txs, &trusted), sequential);
    }
}
