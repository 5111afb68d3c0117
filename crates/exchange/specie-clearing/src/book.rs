//! The order book as the price search sees it (the paper's Appendix G): per ordered asset pair, the
//! distinct limit prices ascending with prefix sums, so that every question "how much is offered at
//! or below this rate" is one binary search, however many offers there are.

use crate::{PairSupply, ASSETS_MAX};

/// 2^32 as a float: a Q32.32 limit divided by this is the limit as a real rate.
pub(crate) const Q32_ONE_F: f64 = 4_294_967_296.0;

/// One ordered pair's offers: distinct limits ascending, the amount at each, and prefix sums.
#[derive(Debug)]
pub(crate) struct PairBook {
    pub(crate) sell: usize,
    pub(crate) buy: usize,
    /// Distinct Q32.32 limits, strictly ascending.
    pub(crate) limits: Vec<u64>,
    /// `cum[i]` = exact total offered at the first `i` limits (`cum.len() == limits.len() + 1`).
    pub(crate) cum: Vec<u128>,
    /// The limits as real rates (limit / 2^32), for Tatonnement's float demand queries.
    pub(crate) limit_f: Vec<f64>,
    /// `cum` as floats.
    pub(crate) cum_f: Vec<f64>,
    /// Prefix sums of rate × amount (the paper's expression 18), for smoothed demand and utility.
    pub(crate) cum_rate_amount_f: Vec<f64>,
}

/// Every pair with a nonzero offer, and a dense index from (sell, buy) to the pair.
#[derive(Debug)]
pub(crate) struct Book {
    pub(crate) assets: usize,
    pub(crate) pairs: Vec<PairBook>,
}

impl Book {
    /// Builds the book from the ledger's supply. It does not trust the input to be tidy: entries with
    /// an asset out of range or selling an asset for itself are ignored, zero amounts dropped, levels
    /// sorted, and repeated limits or repeated pairs merged (amounts summed exactly in u128).
    pub(crate) fn new(assets: usize, supply: &[PairSupply]) -> Book {
        let assets = assets.min(ASSETS_MAX);
        let mut raw: Vec<Vec<(u64, u128)>> = vec![Vec::new(); assets * assets];
        for entry in supply {
            let (sell, buy) = (usize::from(entry.sell), usize::from(entry.buy));
            if sell >= assets || buy >= assets || sell == buy {
                continue;
            }
            let levels = &mut raw[sell * assets + buy];
            levels.extend(
                entry
                    .levels
                    .iter()
                    .filter(|l| l.1 > 0)
                    .map(|&(limit, amount)| (limit.0, u128::from(amount))),
            );
        }
        let mut pairs = Vec::new();
        for (index, mut levels) in raw.into_iter().enumerate() {
            if levels.is_empty() {
                continue;
            }
            levels.sort_unstable_by_key(|l| l.0);
            pairs.push(PairBook::from_sorted(index / assets, index % assets, &levels));
        }
        Book { assets, pairs }
    }
}

impl PairBook {
    fn from_sorted(sell: usize, buy: usize, levels: &[(u64, u128)]) -> PairBook {
        let mut book = PairBook {
            sell,
            buy,
            limits: Vec::with_capacity(levels.len()),
            cum: vec![0],
            limit_f: Vec::with_capacity(levels.len()),
            cum_f: vec![0.0],
            cum_rate_amount_f: vec![0.0],
        };
        let mut rate_amount = 0.0f64;
        let mut total: u128 = 0;
        for &(limit, amount) in levels {
            total = total.saturating_add(amount);
            rate_amount += limit as f64 / Q32_ONE_F * amount as f64;
            if book.limits.last() == Some(&limit) {
                // A repeated limit: fold it into the level before.
                *book.cum.last_mut().expect("cum starts non-empty") = total;
                *book.cum_f.last_mut().expect("cum_f starts non-empty") = total as f64;
                *book.cum_rate_amount_f.last_mut().expect("starts non-empty") = rate_amount;
                continue;
            }
            book.limits.push(limit);
            book.limit_f.push(limit as f64 / Q32_ONE_F);
            book.cum.push(total);
            book.cum_f.push(total as f64);
            book.cum_rate_amount_f.push(rate_amount);
        }
        book
    }

    /// How many levels are in the money at integer valuations: limit · p_buy ≤ p_sell · 2^32, exactly.
    pub(crate) fn in_money_levels(&self, p_sell: u64, p_buy: u64) -> usize {
        let rate = u128::from(p_sell) << 32;
        self.limits
            .partition_point(|&l| u128::from(l) * u128::from(p_buy) <= rate)
    }

    /// U: the total offered at limits at or below the rate p_sell / p_buy (exact).
    pub(crate) fn available(&self, p_sell: u64, p_buy: u64) -> u128 {
        self.cum[self.in_money_levels(p_sell, p_buy)]
    }

    /// How many levels lie strictly below (1 − μ) · rate, μ = 2^-smoothing_bits: the offers that must
    /// trade in full. The threshold is rounded down, so in doubt an offer is not required to trade.
    pub(crate) fn required_levels(&self, p_sell: u64, p_buy: u64, smoothing_bits: u8) -> usize {
        let rate = u128::from(p_sell) << 32;
        let cut = match rate.checked_shr(u32::from(smoothing_bits)) {
            Some(share) if smoothing_bits < 128 => {
                let mask = (1u128 << smoothing_bits) - 1;
                share + u128::from(rate & mask != 0)
            }
            _ => u128::from(rate != 0),
        };
        let threshold = rate - cut.min(rate);
        self.limits
            .partition_point(|&l| u128::from(l) * u128::from(p_buy) < threshold)
    }

    /// L: the total that must trade for the clearing to be μ-approximate (exact).
    pub(crate) fn required(&self, p_sell: u64, p_buy: u64, smoothing_bits: u8) -> u128 {
        self.cum[self.required_levels(p_sell, p_buy, smoothing_bits)]
    }

    /// The paper's smoothed demand (Appendix G, expression 16) at real rate `alpha`: offers below
    /// (1 − μ)·alpha sell in full, offers between sell the share (alpha − r) / (alpha·μ), the rest
    /// nothing. Two binary searches. Returns units of the sold asset.
    pub(crate) fn smoothed_supply(&self, alpha: f64, mu: f64) -> f64 {
        let upper = self.limit_f.partition_point(|&r| r <= alpha);
        let floor_rate = alpha * (1.0 - mu);
        let lower = self.limit_f[..upper].partition_point(|&r| r < floor_rate);
        let full = self.cum_f[lower];
        let band = self.cum_f[upper] - self.cum_f[lower];
        if band <= 0.0 || mu <= 0.0 || alpha <= 0.0 {
            return full;
        }
        let band_rate_amount = self.cum_rate_amount_f[upper] - self.cum_rate_amount_f[lower];
        let partial = (alpha * band - band_rate_amount) / (alpha * mu);
        // Cancellation in the prefix sums can push the interpolation slightly out of range.
        full + partial.clamp(0.0, band)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LimitPrice;

    fn one_pair(levels: Vec<(u64, u64)>) -> Book {
        let levels = levels.into_iter().map(|(l, a)| (LimitPrice(l), a)).collect();
        Book::new(
            2,
            &[PairSupply {
                sell: 0,
                buy: 1,
                levels,
            }],
        )
    }

    #[test]
    fn merges_repeated_limits_and_drops_zero_amounts() {
        let book = one_pair(vec![(3 << 32, 5), (1 << 32, 7), (3 << 32, 1), (2 << 32, 0)]);
        let pair = &book.pairs[0];
        assert_eq!(pair.limits, vec![1 << 32, 3 << 32]);
        assert_eq!(pair.cum, vec![0, 7, 13]);
    }

    #[test]
    fn available_and_required_follow_the_rate_exactly() {
        let book = one_pair(vec![(1 << 32, 10), (2 << 32, 20), ((2 << 32) - (1 << 20), 5)]);
        let pair = &book.pairs[0];
        // Rate exactly 2: every level is in the money.
        assert_eq!(pair.available(2, 1), 35);
        assert_eq!(pair.available(1, 1), 10);
        // μ = 2^-10: (1 − μ)·2 ≈ 1.998; the level at 2 − 2^-12 is inside the band, not required.
        assert_eq!(pair.required(2, 1, 10), 10);
        assert_eq!(pair.required(2, 1, 0), 0);
        assert_eq!(pair.required(2, 1, 200), 15);
    }

    #[test]
    fn ignores_self_pairs_and_out_of_range_assets() {
        let supply = [
            PairSupply {
                sell: 0,
                buy: 0,
                levels: vec![(LimitPrice(1), 1)],
            },
            PairSupply {
                sell: 0,
                buy: 9,
                levels: vec![(LimitPrice(1), 1)],
            },
        ];
        assert!(Book::new(2, &supply).pairs.is_empty());
    }

    #[test]
    fn smoothed_supply_interpolates_across_the_band() {
        let book = one_pair(vec![(1 << 32, 100)]);
        let pair = &book.pairs[0];
        assert_eq!(pair.smoothed_supply(0.5, 0.01), 0.0);
        assert_eq!(pair.smoothed_supply(2.0, 0.01), 100.0);
        let half = pair.smoothed_supply(1.0 / (1.0 - 0.005), 0.01);
        assert!((half - 50.0).abs() < 1.0, "{half}");
    }
}
