//! The exchange's synthetic workload, after SPEEDEX §7 and §6.2: assets have underlying
//! valuations that drift between blocks (a geometric random walk); each trader sells a random
//! asset for another at a limit close to the underlying rate (some below it, which trade, some
//! above, which rest), cancels some of its resting offers, and pays other traders. Cycles arise
//! by themselves (A→B, B→C, C→A offers in one block). Pure and seeded: the caller signs and
//! submits what is planned.

use rand::Rng;
use specie_exchange::{AccountId, AssetId, LimitPrice, Operation, Transaction};

/// How one block's transactions are drawn.
#[derive(Clone, Copy, Debug)]
pub struct MarketMix {
    /// Offers per block.
    pub offers: usize,
    /// Cancels per block, of offers resting from earlier blocks.
    pub cancels: usize,
    pub payments: usize,
    /// How far a limit strays from the underlying rate: uniform in ±spread.
    pub spread: f64,
    /// Standard deviation of each asset's log-valuation step per block.
    pub drift: f64,
}

impl MarketMix {
    /// Per block and trader: 10 offers, 1 cancel, 1.5 payments (about 12 transactions each, well
    /// within the exchange's sequence window of 64 per block).
    pub fn for_traders(traders: usize) -> MarketMix {
        MarketMix {
            offers: 10 * traders,
            cancels: traders,
            payments: traders * 3 / 2,
            spread: 0.02,
            drift: 0.01,
        }
    }
}

/// A Q32.32 limit price from a rate.
pub fn limit_of(rate: f64) -> LimitPrice {
    LimitPrice((rate * (1u64 << 32) as f64).clamp(1.0, u64::MAX as f64) as u64)
}

/// The market's underlying valuations and each trader's next sequence number and resting
/// offers.
pub struct Market {
    pub valuations: Vec<f64>,
    next_sequence: Vec<u64>,
    /// Per trader: (sell, buy, limit, sequence) of offers it made and has not cancelled.
    resting: Vec<Vec<(AssetId, AssetId, LimitPrice, u64)>>,
}

impl Market {
    /// `traders` accounts numbered 1..=traders, `assets` valuations starting at 1.
    pub fn new(assets: usize, traders: usize) -> Market {
        Market {
            valuations: vec![1.0; assets],
            next_sequence: vec![1; traders],
            resting: vec![Vec::new(); traders],
        }
    }

    pub fn account(trader: usize) -> AccountId {
        trader as AccountId + 1
    }

    /// Moves every valuation one step of the random walk.
    pub fn drift(&mut self, rng: &mut impl Rng, mix: &MarketMix) {
        for valuation in &mut self.valuations {
            let step: f64 = rng.gen_range(-1.0..1.0) * mix.drift * 3f64.sqrt();
            *valuation *= step.exp();
        }
    }

    fn sequence(&mut self, trader: usize) -> u64 {
        let sequence = self.next_sequence[trader];
        self.next_sequence[trader] += 1;
        sequence
    }

    /// One block's transactions, unsigned, with the trader who signs each. A trader's amounts
    /// are drawn within `balances(trader, asset)`, what it may still spend.
    pub fn block(
        &mut self,
        rng: &mut impl Rng,
        mix: &MarketMix,
        mut spendable: impl FnMut(usize, AssetId) -> u64,
    ) -> Vec<(usize, Transaction)> {
        let traders = self.next_sequence.len();
        let assets = self.valuations.len() as AssetId;
        let mut planned = Vec::with_capacity(mix.offers + mix.cancels + mix.payments);
        let mut taken = std::collections::HashMap::<(usize, AssetId), u64>::new();
        let mut draw = |rng: &mut dyn rand::RngCore,
                        trader: usize,
                        asset: AssetId,
                        spendable: &mut dyn FnMut(usize, AssetId) -> u64| {
            let left = spendable(trader, asset).saturating_sub(*taken.get(&(trader, asset)).unwrap_or(&0));
            let amount = rng.gen_range(0..=left / 20);
            *taken.entry((trader, asset)).or_default() += amount;
            amount
        };
        for _ in 0..mix.offers {
            let trader = rng.gen_range(0..traders);
            let sell = rng.gen_range(0..assets);
            let buy = (sell + rng.gen_range(1..assets)) % assets;
            let amount = draw(rng, trader, sell, &mut spendable);
            if amount == 0 {
                continue;
            }
            let rate = self.valuations[usize::from(sell)] / self.valuations[usize::from(buy)];
            let limit = limit_of(rate * (1.0 + rng.gen_range(-mix.spread..mix.spread)));
            let sequence = self.sequence(trader);
            self.resting[trader].push((sell, buy, limit, sequence));
            let operation = Operation::SellOffer {
                sell,
                buy,
                amount,
                limit,
            };
            planned.push((
                trader,
                Transaction {
                    account: Self::account(trader),
                    sequence,
                    operation,
                },
            ));
        }
        for _ in 0..mix.cancels {
            let trader = rng.gen_range(0..traders);
            // Only offers from earlier blocks: an offer is not made and cancelled in one block.
            let made_now = planned.iter().filter(|(t, _)| *t == trader).count();
            let older = self.resting[trader].len().saturating_sub(made_now);
            if older == 0 {
                continue;
            }
            let (sell, buy, limit, offer) = self.resting[trader].swap_remove(rng.gen_range(0..older));
            let sequence = self.sequence(trader);
            let operation = Operation::CancelOffer {
                sell,
                buy,
                limit,
                sequence: offer,
            };
            planned.push((
                trader,
                Transaction {
                    account: Self::account(trader),
                    sequence,
                    operation,
                },
            ));
        }
        for _ in 0..mix.payments {
            let (trader, to) = (rng.gen_range(0..traders), rng.gen_range(0..traders));
            let asset = rng.gen_range(0..assets);
            let amount = draw(rng, trader, asset, &mut spendable);
            if amount == 0 || trader == to {
                continue;
            }
            let sequence = self.sequence(trader);
            let operation = Operation::Payment {
                to: Self::account(to),
                asset,
                amount,
            };
            planned.push((
                trader,
                Transaction {
                    account: Self::account(trader),
                    sequence,
                    operation,
                },
            ));
        }
        planned
    }

    /// Resumes `trader`'s sequence numbers at `next` (after the exchange's last used one):
    /// transactions the exchange refused leave no gap that grows past its window.
    pub fn resync(&mut self, trader: usize, next: u64) {
        self.next_sequence[trader] = next;
    }
}
