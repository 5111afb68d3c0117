//! Load that bypasses the sentinel: compact transactions over UHS ids (the 2PC engine's own
//! input, as in Hamilton §6.1), and signed transfers for measuring validation alone.

use rand::Rng;
use secp256k1::Keypair;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CompactTransaction, Input, NonceMode, OutPoint, Output, SpecieTransaction, Transaction,
    Txid, UhsId,
};

/// Compact transactions that only create `ids`, `per_tx` at a time, numbered from 0: how the
/// swap benchmarks fill the UHS before measuring.
pub fn preload_transactions(ids: &[UhsId], per_tx: usize, rng: &mut impl Rng) -> Vec<(u64, CompactTransaction)> {
    ids.chunks(per_tx)
        .enumerate()
        .map(|(i, ids)| {
            (
                i as u64,
                CompactTransaction {
                    txid: Txid(rng.gen()),
                    created: ids.to_vec(),
                    ..Default::default()
                },
            )
        })
        .collect()
}

/// A 2-in/2-out swap: spends two random ids taken out of `pool` (at least two) and creates two
/// fresh ones, which the caller returns to the pool once the swap is confirmed.
pub fn swap_from_pool(pool: &mut Vec<UhsId>, rng: &mut impl Rng) -> CompactTransaction {
    let spent = vec![
        pool.swap_remove(rng.gen_range(0..pool.len())),
        pool.swap_remove(rng.gen_range(0..pool.len())),
    ];
    let created = vec![UhsId(rng.gen()), UhsId(rng.gen())];
    CompactTransaction {
        txid: Txid(rng.gen()),
        spent,
        created,
        ..Default::default()
    }
}

/// `count` validly signed 2-in/2-out transfers of one key's made-up outputs (not in any UHS):
/// what the sentinel's validation is measured on.
pub fn signed_2in2out(count: usize, rng: &mut impl Rng) -> Vec<SpecieTransaction> {
    let keypair = Keypair::new_global(rng);
    let commitment = witness_program_commitment(&xonly_bytes(&keypair));
    (0..count)
        .map(|_| {
            let inputs: Vec<Input> = (0..2)
                .map(|_| Input {
                    prevout: OutPoint {
                        txid: Txid(rng.gen()),
                        index: 0,
                    },
                    data: Output {
                        witness_program_commitment: commitment,
                        value: 50,
                    },
                })
                .collect();
            let outputs = vec![
                Output {
                    witness_program_commitment: commitment,
                    value: 60,
                },
                Output {
                    witness_program_commitment: commitment,
                    value: 40,
                },
            ];
            let mut tx = Transaction {
                inputs,
                outputs,
                witnesses: vec![],
            };
            tx.sign(&[keypair, keypair], NonceMode::Randomized).expect("own key");
            SpecieTransaction::Transfer(tx)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn swaps_spend_from_the_pool_and_create_fresh_ids() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut pool: Vec<UhsId> = (0..10).map(|_| UhsId(rng.gen())).collect();
        let before = pool.clone();
        let swap = swap_from_pool(&mut pool, &mut rng);
        assert_eq!(pool.len(), 8);
        assert_eq!(swap.spent.len(), 2);
        assert!(swap.spent.iter().all(|id| before.contains(id) && !pool.contains(id)));
        assert!(swap.created.iter().all(|id| !before.contains(id)));
    }

    #[test]
    fn preload_creates_every_id_once() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let ids: Vec<UhsId> = (0..250).map(|_| UhsId(rng.gen())).collect();
        let txs = preload_transactions(&ids, 100, &mut rng);
        assert_eq!(txs.iter().map(|(r, _)| *r).collect::<Vec<_>>(), [0, 1, 2]);
        let created: Vec<UhsId> = txs.iter().flat_map(|(_, tx)| tx.created.clone()).collect();
        assert_eq!(created, ids);
        assert!(txs.iter().all(|(_, tx)| tx.spent.is_empty()));
    }
}
