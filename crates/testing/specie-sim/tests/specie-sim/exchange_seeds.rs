//! CI's share of the exchange's simulation: the real exchange role proposing blocks of the
//! synthetic workload and hostile transactions, crashing and restarting from its log, replica
//! ledgers applying every block shuffled (one on a single thread) and rebuilt from snapshots;
//! every replica at the proposer's state hash and the audit after every block. A seed replays bit
//! for bit, and a planted bug (a proposer whose blocks trade more than their clearing allows) is
//! caught. `specie sim --world exchange --seeds N` runs the long soak.

use specie_sim::{run_exchange, ExchangeOptions, ExchangeReport};

const CI_SEEDS: u64 = 40;

#[test]
fn exchange_seeds_hold_every_invariant_and_exercise_every_fault() {
    let mut t = ExchangeReport::default();
    for seed in 0..CI_SEEDS {
        let r = run_exchange(ExchangeOptions::from_seed(seed)).unwrap_or_else(|violation| panic!("{violation}"));
        t.blocks += r.blocks;
        t.cleared += r.cleared;
        t.included += r.included;
        t.refused += r.refused;
        t.offers_traded += r.offers_traded;
        t.hostile_refused += r.hostile_refused;
        t.deposits += r.deposits;
        t.crashes += r.crashes;
        t.replicas_restored += r.replicas_restored;
    }
    assert!(t.blocks > 0 && t.included > 0 && t.refused > 0, "{t:?}");
    // A block in flight when its proposer crashed is applied without its report.
    assert!(t.cleared > 0 && t.cleared <= t.blocks, "{t:?}");
    assert!(t.offers_traded > 0, "offers traded: {t:?}");
    assert!(t.hostile_refused > 0 && t.deposits > 0, "{t:?}");
    assert!(t.crashes > 0 && t.replicas_restored > 0, "{t:?}");
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let first = run_exchange(ExchangeOptions::from_seed(11)).unwrap();
    let second = run_exchange(ExchangeOptions::from_seed(11)).unwrap();
    assert_eq!(first, second);
    assert!(first.blocks > 0);
}

#[test]
fn the_world_catches_a_proposer_whose_blocks_trade_more_than_their_clearing_allows() {
    let caught = (0..20).find_map(|seed| {
        let options = ExchangeOptions {
            inflate_trades: true,
            ..ExchangeOptions::from_seed(seed)
        };
        run_exchange(options).err()
    });
    let violation = caught.expect("an inflated block is refused by the replicas");
    assert!(violation.message.contains("refused a committed command"), "{violation}");
}
