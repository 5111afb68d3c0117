//! compute → check → execute, on random, deep, tiny and hostile markets; and check's refusals.

mod market;

use std::time::{Duration, Instant};

use market::{execute, market, Offer, Shape};
use proptest::prelude::*;
use specie_clearing::{
    check, compute, compute_from, compute_with_report, compute_with_report_from, quality, Clearing, ClearingParams,
    ClearingViolation, LimitPrice, PairSupply, PairTrade, Valuation, ASSETS_MAX,
};

fn params(time_budget_ms: u64) -> ClearingParams {
    ClearingParams {
        time_budget_ms,
        ..ClearingParams::default()
    }
}

fn wild(assets: usize, offers: usize) -> Shape {
    Shape {
        assets,
        offers,
        spread_below: 0.2,
        spread_above: 0.2,
        wild_amounts: true,
        wild_limits: true,
    }
}

/// Deep and consistent: limits up to 10% below the true rate (every offer wants to trade).
fn deep(assets: usize, offers: usize) -> Shape {
    Shape {
        assets,
        offers,
        spread_below: 0.1,
        spread_above: 0.0,
        wild_amounts: false,
        wild_limits: false,
    }
}

/// compute, then the three views of validity: check, the offer-by-offer ledger model, and the time.
fn clear_and_verify(assets: usize, offers: &[Offer], supply: &[PairSupply], params: &ClearingParams) -> Clearing {
    let started = Instant::now();
    let clearing = compute(assets, supply, params);
    let elapsed = started.elapsed();
    assert_eq!(check(assets, supply, params, &clearing), Ok(()));
    execute(offers, &clearing, params.fee_bits).expect("the ledger model accepts the clearing");
    assert!(clearing.prices.iter().all(|p| p.0 >= 1 && p.0 < 1 << 63));
    // The budget, plus room for the budget-independent integer steps and a loaded debug build.
    assert!(
        elapsed < Duration::from_millis(params.time_budget_ms + 500),
        "took {elapsed:?}"
    );
    clearing
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn compute_passes_check_and_the_ledger_model(seed in any::<u64>(), assets in 2usize..=6, offers in 0usize..=200) {
        let m = market(seed, wild(assets, offers));
        clear_and_verify(assets, &m.offers, &m.supply, &params(20));
    }

    #[test]
    fn compute_passes_check_with_odd_parameters(
        seed in any::<u64>(),
        assets in 2usize..=4,
        fee_bits in prop_oneof![Just(0u8), 1u8..=64, Just(255u8)],
        smoothing_bits in prop_oneof![Just(0u8), 1u8..=64, Just(255u8)],
        instances in 0u8..=3,
    ) {
        let m = market(seed, wild(assets, 60));
        let params = ClearingParams { fee_bits, smoothing_bits, rounds_max: 300, time_budget_ms: 10, instances };
        clear_and_verify(assets, &m.offers, &m.supply, &params);
    }

    /// check is total: any clearing, however malformed or huge, gets an answer and no panic; and the
    /// same answer twice.
    #[test]
    fn check_never_panics_and_is_deterministic(
        assets in 0usize..=70,
        prices in proptest::collection::vec(prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>()], 0..=8),
        trades in proptest::collection::vec((0u16..9, 0u16..9, prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()]), 0..=12),
        seed in any::<u64>(),
    ) {
        let m = market(seed, wild(assets.clamp(2, 8), 40));
        let clearing = Clearing {
            prices: prices.into_iter().map(Valuation).collect(),
            trades: trades.into_iter().map(|(sell, buy, amount)| PairTrade { sell, buy, amount }).collect(),
        };
        let p = ClearingParams::default();
        let first = check(assets, &m.supply, &p, &clearing);
        prop_assert_eq!(first, check(assets, &m.supply, &p, &clearing));
        let _ = quality(assets, &m.supply, &p, &clearing);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Wherever Tâtonnement starts (a previous block's prices, prices of another length, zeros,
    /// extremes), the clearing passes check and the ledger model.
    #[test]
    fn compute_from_any_start_passes_check(
        seed in any::<u64>(),
        assets in 2usize..=6,
        offers in 0usize..=200,
        start in proptest::collection::vec(prop_oneof![Just(0u64), Just(1u64), Just(u64::MAX), any::<u64>()], 0..=7),
    ) {
        let m = market(seed, wild(assets, offers));
        let start: Vec<Valuation> = start.into_iter().map(Valuation).collect();
        let p = params(20);
        let clearing = compute_from(assets, &m.supply, &p, &start);
        prop_assert_eq!(check(assets, &m.supply, &p, &clearing), Ok(()));
        execute(&m.offers, &clearing, p.fee_bits).expect("the ledger model accepts the clearing");
    }
}

/// Started from the prices a clearing found, the next clearing of the same book meets the
/// criterion in fewer rounds.
#[test]
fn a_warm_start_from_converged_prices_converges_sooner() {
    let p = ClearingParams {
        instances: 1,
        ..params(1_000)
    };
    let mut converged = 0;
    for seed in 0..8 {
        let m = market(seed, deep(6, 2_000));
        let (cold, report) = compute_with_report(6, &m.supply, &p);
        if !report.converged || report.rounds == 0 {
            continue;
        }
        converged += 1;
        let (warm, again) = compute_with_report_from(6, &m.supply, &p, &cold.prices);
        assert!(again.converged, "{again:?}");
        assert!(
            again.rounds < report.rounds,
            "{} rounds warm, {} cold",
            again.rounds,
            report.rounds
        );
        assert_eq!(check(6, &m.supply, &p, &warm), Ok(()));
    }
    assert!(converged > 0, "some market converged cold");
}

#[test]
fn compute_twice_gives_clearings_that_both_pass_check() {
    let m = market(7, deep(5, 2_000));
    let p = params(50);
    for _ in 0..2 {
        clear_and_verify(5, &m.offers, &m.supply, &p);
    }
}

#[test]
fn empty_tiny_and_disconnected_books_clear_quickly_and_validly() {
    let p = params(20);
    let one = |sell, buy, limit, amount| Offer {
        sell,
        buy,
        limit,
        amount,
    };
    let cases: Vec<(usize, Vec<Offer>)> = vec![
        (0, vec![]),
        (1, vec![]),
        (5, vec![]),
        (2, vec![one(0, 1, 1 << 32, 100)]),
        (2, vec![one(0, 1, 1 << 32, 100), one(1, 0, 1 << 32, 100)]),
        (2, vec![one(0, 1, 0, u64::MAX), one(1, 0, u64::MAX, u64::MAX)]),
        (2, vec![one(0, 1, 0, u64::MAX), one(1, 0, 0, u64::MAX)]),
        (
            3,
            vec![one(0, 1, u64::MAX, u64::MAX), one(1, 2, 0, 1), one(2, 0, 1, u64::MAX)],
        ),
        // Two components: 0↔1 and 2↔3, at very different rates.
        (
            4,
            vec![
                one(0, 1, 1 << 20, 1_000),
                one(1, 0, 1 << 43, 1_000),
                one(2, 3, 1 << 40, 5),
                one(3, 2, 1 << 23, 9),
            ],
        ),
        (ASSETS_MAX, vec![one(63, 0, 1 << 32, 10), one(0, 63, 1 << 32, 10)]),
    ];
    for (assets, mut offers) in cases {
        let supply = market::aggregate(&mut offers);
        let clearing = clear_and_verify(assets, &offers, &supply, &p);
        assert_eq!(clearing.prices.len(), assets);
    }
    // Beyond the limit: an empty clearing, which check refuses.
    let too_many = compute(ASSETS_MAX + 1, &[], &p);
    assert!(too_many.prices.is_empty());
    assert!(check(ASSETS_MAX + 1, &[], &p, &too_many).is_err());
}

#[test]
fn a_single_crossing_pair_trades() {
    let mut offers = vec![
        Offer {
            sell: 0,
            buy: 1,
            limit: 1 << 31,
            amount: 1_000_000,
        },
        Offer {
            sell: 1,
            buy: 0,
            limit: 1 << 31,
            amount: 1_000_000,
        },
    ];
    let supply = market::aggregate(&mut offers);
    let clearing = clear_and_verify(2, &offers, &supply, &params(50));
    assert_eq!(clearing.trades.len(), 2, "{clearing:?}");
    assert!(clearing.trades.iter().all(|t| t.amount > 900_000), "{clearing:?}");
}

/// Consistent, deep offers: Tâtonnement must find the valuations and the LP clear nearly all the
/// utility. Broken price updates leave a large share unrealized (or trade nothing).
#[test]
fn deep_markets_realize_most_utility() {
    for (seed, assets, offers) in [(1u64, 2usize, 2_000usize), (2, 4, 4_000), (3, 6, 6_000)] {
        let m = market(seed, deep(assets, offers));
        let p = params(400);
        let (clearing, report) = compute_with_report(assets, &m.supply, &p);
        assert_eq!(check(assets, &m.supply, &p, &clearing), Ok(()));
        let q = quality(assets, &m.supply, &p, &clearing);
        assert!(q.unrealized_utility_ratio < 0.05, "{assets} assets: {q:?} {report:?}");
        assert!(q.volume_cleared_share() > 0.9, "{assets} assets: {q:?}");
        // Two assets: the rate found is the true one, within the offers' spread. (With more, chains
        // of pairs let single rates settle outside it; the utility measure above is what counts.)
        for a in (0..assets).filter(|_| assets == 2) {
            let found = clearing.prices[a].0 as f64 / clearing.prices[0].0 as f64;
            let truth = m.valuations[a] / m.valuations[0];
            assert!(
                (found / truth - 1.0).abs() < 0.12,
                "{assets} assets, asset {a}: {found} vs {truth}; {q:?} {report:?}"
            );
        }
    }
}

/// No internal arbitrage: the rate A→B equals (A→C)·(C→B) exactly in rationals (one valuation per
/// asset), and within Q32.32 rounding as fixed-point rates.
#[test]
fn rates_have_no_internal_arbitrage() {
    let m = market(11, deep(5, 3_000));
    let clearing = compute(5, &m.supply, &params(100));
    let p: Vec<u128> = clearing.prices.iter().map(|v| u128::from(v.0)).collect();
    let rate_q32 = |a: usize, b: usize| (p[a] << 32) as f64 / p[b] as f64;
    for a in 0..5 {
        for b in 0..5 {
            for c in 0..5 {
                let direct = rate_q32(a, b);
                let via = rate_q32(a, c) * rate_q32(c, b) / 4_294_967_296.0;
                assert!((direct - via).abs() <= direct * 1e-9 + 2.0, "{a}->{b} via {c}");
            }
        }
    }
}

#[test]
fn check_refuses_a_conservation_violation_and_a_trade_over_u() {
    // Two assets at par, deep books both ways at limit 1.
    let supply = vec![
        PairSupply {
            sell: 0,
            buy: 1,
            levels: vec![(LimitPrice(1 << 32), 10_000)],
        },
        PairSupply {
            sell: 1,
            buy: 0,
            levels: vec![(LimitPrice(1 << 32), 10_000)],
        },
    ];
    let p = ClearingParams {
        fee_bits: 10,
        ..ClearingParams::default()
    };
    let valid = Clearing {
        prices: vec![Valuation(1 << 40), Valuation(1 << 40)],
        trades: vec![
            PairTrade {
                sell: 0,
                buy: 1,
                amount: 1_000,
            },
            PairTrade {
                sell: 1,
                buy: 0,
                amount: 1_000,
            },
        ],
    };
    assert_eq!(check(2, &supply, &p, &valid), Ok(()));
    let mut more = valid.clone();
    more.trades[0].amount = 1_010; // 1% more of asset 0 sold: asset 1 pays out 1009 for 1000 in.
    assert!(matches!(
        check(2, &supply, &p, &more),
        Err(ClearingViolation::Conservation { asset: 1, .. })
    ));
    let mut over = valid.clone();
    over.trades[0].amount = 10_001;
    assert!(matches!(
        check(2, &supply, &p, &over),
        Err(ClearingViolation::OverLimit { .. })
    ));
    let mut below_limit = valid;
    below_limit.prices[0] = Valuation((1 << 40) - 1); // rate just under every limit: U = 0
    assert!(matches!(
        check(2, &supply, &p, &below_limit),
        Err(ClearingViolation::OverLimit { .. })
    ));
}

#[test]
fn check_refuses_computed_trades_scaled_up() {
    let m = market(5, deep(3, 3_000));
    let p = params(200);
    let clearing = compute(3, &m.supply, &p);
    assert!(!clearing.trades.is_empty());
    for index in 0..clearing.trades.len() {
        let mut scaled = clearing.clone();
        let t = &mut scaled.trades[index];
        t.amount = t.amount.saturating_add(t.amount / 100 + 1);
        assert!(
            check(3, &m.supply, &p, &scaled).is_err(),
            "trade {index} scaled by 1% passed"
        );
    }
}

#[test]
fn check_refuses_malformed_clearings() {
    let supply = vec![PairSupply {
        sell: 0,
        buy: 1,
        levels: vec![(LimitPrice(0), 10)],
    }];
    let p = ClearingParams::default();
    let prices = vec![Valuation(1 << 32); 3];
    let t = |sell, buy, amount| PairTrade { sell, buy, amount };
    let refuse = |prices: Vec<Valuation>, trades: Vec<PairTrade>| check(3, &supply, &p, &Clearing { prices, trades });
    assert_eq!(
        refuse(vec![Valuation(1); 2], vec![]),
        Err(ClearingViolation::PriceCount { prices: 2, assets: 3 })
    );
    assert_eq!(
        refuse(vec![Valuation(1), Valuation(0), Valuation(1)], vec![]),
        Err(ClearingViolation::ZeroPrice { asset: 1 })
    );
    assert!(matches!(
        refuse(prices.clone(), vec![t(0, 3, 1)]),
        Err(ClearingViolation::AssetOutOfRange { .. })
    ));
    assert!(matches!(
        refuse(prices.clone(), vec![t(1, 1, 1)]),
        Err(ClearingViolation::SameAsset { .. })
    ));
    assert!(matches!(
        refuse(prices.clone(), vec![t(0, 1, 0)]),
        Err(ClearingViolation::ZeroAmount { .. })
    ));
    assert!(matches!(
        refuse(prices.clone(), vec![t(0, 1, 1), t(0, 1, 1)]),
        Err(ClearingViolation::DuplicatePair { sell: 0, buy: 1 })
    ));
    assert!(matches!(
        refuse(prices.clone(), vec![t(1, 0, 1), t(0, 1, 1)]),
        Err(ClearingViolation::Unsorted { .. })
    ));
    assert!(matches!(
        check(
            ASSETS_MAX + 1,
            &supply,
            &p,
            &Clearing {
                prices: vec![],
                trades: vec![]
            }
        ),
        Err(ClearingViolation::TooManyAssets { .. })
    ));
}

#[test]
fn check_reports_overflowing_payouts_without_panicking() {
    // Assets 1 and 2 valued u64::MAX, asset 0 valued 1: each trade into 0 pays out ~2^128.
    let supply = vec![
        PairSupply {
            sell: 1,
            buy: 0,
            levels: vec![(LimitPrice(0), u64::MAX)],
        },
        PairSupply {
            sell: 2,
            buy: 0,
            levels: vec![(LimitPrice(0), u64::MAX)],
        },
    ];
    let clearing = Clearing {
        prices: vec![Valuation(1), Valuation(u64::MAX), Valuation(u64::MAX)],
        trades: vec![
            PairTrade {
                sell: 1,
                buy: 0,
                amount: u64::MAX,
            },
            PairTrade {
                sell: 2,
                buy: 0,
                amount: u64::MAX,
            },
        ],
    };
    let p = ClearingParams::default();
    assert_eq!(
        check(3, &supply, &p, &clearing),
        Err(ClearingViolation::Overflow { asset: 0 })
    );
    // The proposer, given the same book, stays valid.
    let computed = compute(3, &supply, &params(20));
    assert_eq!(check(3, &supply, &p, &computed), Ok(()));
}
