//! Random markets and a model of the ledger's execution, shared by the tests and the timing example.
#![allow(dead_code)]

use specie_clearing::{payout, Clearing, LimitPrice, PairSupply};

/// splitmix64: deterministic, dependency-free randomness for generated markets.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One raw offer (the ledger's view, before aggregation by limit).
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    pub sell: u16,
    pub buy: u16,
    pub limit: u64,
    pub amount: u64,
}

/// How a market is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub assets: usize,
    pub offers: usize,
    /// Limits are true rate × (1 + u), u uniform in [−spread_below, +spread_above].
    pub spread_below: f64,
    pub spread_above: f64,
    /// Draw amounts from the awkward set (0, 1, huge, u64::MAX) too, not just moderate ones.
    pub wild_amounts: bool,
    /// Draw the occasional limit 0 or u64::MAX.
    pub wild_limits: bool,
}

pub struct Market {
    pub valuations: Vec<f64>,
    pub offers: Vec<Offer>,
    pub supply: Vec<PairSupply>,
}

fn amount(rng: &mut Rng, wild: bool) -> u64 {
    if wild {
        match rng.below(8) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => rng.next(),
            _ => 1 + rng.below(1 << 40),
        }
    } else {
        1_000 + rng.below(1_000_000_000)
    }
}

fn limit(rng: &mut Rng, shape: &Shape, rate: f64) -> u64 {
    if shape.wild_limits {
        match rng.below(40) {
            0 => return 0,
            1 => return u64::MAX,
            _ => {}
        }
    }
    let u = -shape.spread_below + rng.unit() * (shape.spread_below + shape.spread_above);
    let q = rate * (1.0 + u) * 4_294_967_296.0;
    q.clamp(0.0, u64::MAX as f64) as u64
}

/// A market with offers around random true valuations (2^-8 … 2^8 apart).
pub fn market(seed: u64, shape: Shape) -> Market {
    let mut rng = Rng(seed);
    let valuations: Vec<f64> = (0..shape.assets).map(|_| (rng.unit() * 16.0 - 8.0).exp2()).collect();
    let mut offers = Vec::with_capacity(shape.offers);
    if shape.assets >= 2 {
        for _ in 0..shape.offers {
            let sell = rng.below(shape.assets as u64) as usize;
            let buy = (sell + 1 + rng.below(shape.assets as u64 - 1) as usize) % shape.assets;
            let limit = limit(&mut rng, &shape, valuations[sell] / valuations[buy]);
            let amount = amount(&mut rng, shape.wild_amounts);
            offers.push(Offer {
                sell: sell as u16,
                buy: buy as u16,
                limit,
                amount,
            });
        }
    }
    let supply = aggregate(&mut offers);
    Market {
        valuations,
        offers,
        supply,
    }
}

/// Aggregates offers by (sell, buy, limit); an offer that would overflow its level's u64 total is
/// dropped from the market (so `offers` and `supply` always agree).
pub fn aggregate(offers: &mut Vec<Offer>) -> Vec<PairSupply> {
    let mut levels: std::collections::BTreeMap<(u16, u16, u64), u64> = Default::default();
    offers.retain(|o| {
        let total = levels.entry((o.sell, o.buy, o.limit)).or_insert(0);
        match total.checked_add(o.amount) {
            Some(t) => {
                *total = t;
                true
            }
            None => false,
        }
    });
    let mut supply: Vec<PairSupply> = Vec::new();
    for ((sell, buy, limit), amount) in levels {
        match supply.last_mut() {
            Some(last) if last.sell == sell && last.buy == buy => last.levels.push((LimitPrice(limit), amount)),
            _ => supply.push(PairSupply {
                sell,
                buy,
                levels: vec![(LimitPrice(limit), amount)],
            }),
        }
    }
    supply
}

/// The ledger's execution, offer by offer: per pair, offers in (limit, index) order up to the trade's
/// amount, at most one partially, each paid `payout(sold_i)`. Checks that every executed offer is
/// within its limit, that the in-the-money supply covers the amount, and that no asset pays out more
/// than it took in. Returns the per-asset (taken in, paid out).
pub fn execute(offers: &[Offer], clearing: &Clearing, fee_bits: u8) -> Result<Vec<(u128, u128)>, String> {
    let prices: Vec<u64> = clearing.prices.iter().map(|p| p.0).collect();
    let mut books: Vec<(u128, u128)> = vec![(0, 0); prices.len()];
    for trade in &clearing.trades {
        let (s, b) = (usize::from(trade.sell), usize::from(trade.buy));
        let mut pair: Vec<&Offer> = offers
            .iter()
            .filter(|o| o.sell == trade.sell && o.buy == trade.buy)
            .collect();
        pair.sort_by_key(|o| o.limit);
        let mut left = trade.amount;
        for offer in pair {
            if left == 0 {
                break;
            }
            if u128::from(offer.limit) * u128::from(prices[b]) > u128::from(prices[s]) << 32 {
                return Err(format!("trade {trade:?} reaches offer {offer:?} beyond its limit"));
            }
            let sold = left.min(offer.amount);
            left -= sold;
            books[s].0 += u128::from(sold);
            books[b].1 += payout(sold, prices[s], prices[b], fee_bits).ok_or("zero price")?;
        }
        if left > 0 {
            return Err(format!("trade {trade:?} exceeds the supply within the rate by {left}"));
        }
    }
    for (asset, &(taken, paid)) in books.iter().enumerate() {
        if paid > taken {
            return Err(format!("asset {asset} pays out {paid} > takes in {taken}"));
        }
    }
    Ok(books)
}
