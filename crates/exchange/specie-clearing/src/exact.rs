//! Exact integer arithmetic: the replicas' check of a proposed clearing, and the proposer's repair
//! that turns approximate (float) trade amounts into integers that pass that check.

use crate::{Clearing, ClearingParams, ClearingViolation, PairSupply, ASSETS_MAX};

/// fee(v) = v − ceil(v / 2^fee_bits): what a seller receives of a gross amount v after the
/// auctioneer's commission (rounded in the auctioneer's favour). fee_bits ≥ 128 leaves one unit.
pub fn fee(gross: u128, fee_bits: u8) -> u128 {
    let commission = if fee_bits >= 128 {
        u128::from(gross != 0)
    } else {
        let mask = (1u128 << fee_bits) - 1;
        (gross >> fee_bits) + u128::from(gross & mask != 0)
    };
    gross - commission
}

/// payout(x) = fee(floor(x · p_sold / p_bought)): the units of the bought asset paid for `amount`
/// units of the sold asset. x < 2^64 and p < 2^64, so the product fits u128; the division cannot
/// fail because valuations are nonzero (a zero divisor yields `None`).
pub fn payout(amount: u64, p_sold: u64, p_bought: u64, fee_bits: u8) -> Option<u128> {
    let gross = (u128::from(amount) * u128::from(p_sold)).checked_div(u128::from(p_bought))?;
    Some(fee(gross, fee_bits))
}

/// The structural rules (1) of `check`.
fn check_structure(assets: usize, clearing: &Clearing) -> Result<(), ClearingViolation> {
    if assets > ASSETS_MAX {
        return Err(ClearingViolation::TooManyAssets { assets });
    }
    if clearing.prices.len() != assets {
        return Err(ClearingViolation::PriceCount {
            prices: clearing.prices.len(),
            assets,
        });
    }
    if let Some(asset) = clearing.prices.iter().position(|p| p.0 == 0) {
        return Err(ClearingViolation::ZeroPrice { asset });
    }
    let mut previous: Option<(u16, u16)> = None;
    for (index, trade) in clearing.trades.iter().enumerate() {
        let (sell, buy) = (trade.sell, trade.buy);
        if usize::from(sell) >= assets || usize::from(buy) >= assets {
            return Err(ClearingViolation::AssetOutOfRange { index, sell, buy });
        }
        if sell == buy {
            return Err(ClearingViolation::SameAsset { index, asset: sell });
        }
        if trade.amount == 0 {
            return Err(ClearingViolation::ZeroAmount { index });
        }
        match previous {
            Some(p) if p == (sell, buy) => return Err(ClearingViolation::DuplicatePair { sell, buy }),
            Some(p) if p > (sell, buy) => return Err(ClearingViolation::Unsorted { index }),
            _ => {}
        }
        previous = Some((sell, buy));
    }
    Ok(())
}

/// U for every ordered pair at the clearing's valuations, by one linear scan of the supply (no
/// trust in its order or tidiness). Requires `check_structure` to have passed.
fn available_by_pair(assets: usize, supply: &[PairSupply], prices: &[u64]) -> Vec<u128> {
    let mut available = vec![0u128; assets * assets];
    for entry in supply {
        let (sell, buy) = (usize::from(entry.sell), usize::from(entry.buy));
        if sell >= assets || buy >= assets || sell == buy {
            continue;
        }
        let rate = u128::from(prices[sell]) << 32;
        let p_buy = u128::from(prices[buy]);
        let total = &mut available[sell * assets + buy];
        for &(limit, amount) in &entry.levels {
            if u128::from(limit.0) * p_buy <= rate {
                *total = total.saturating_add(u128::from(amount));
            }
        }
    }
    available
}

/// See [`crate::check`].
pub(crate) fn check(
    assets: usize,
    supply: &[PairSupply],
    params: &ClearingParams,
    clearing: &Clearing,
) -> Result<(), ClearingViolation> {
    check_structure(assets, clearing)?;
    let prices: Vec<u64> = clearing.prices.iter().map(|p| p.0).collect();
    let available = available_by_pair(assets, supply, &prices);
    let mut taken_in = vec![0u128; assets];
    let mut paid_out: Vec<Option<u128>> = vec![Some(0); assets];
    for trade in &clearing.trades {
        let (sell, buy) = (usize::from(trade.sell), usize::from(trade.buy));
        let limit = available[sell * assets + buy];
        if u128::from(trade.amount) > limit {
            let (sell, buy, amount) = (trade.sell, trade.buy, trade.amount);
            return Err(ClearingViolation::OverLimit {
                sell,
                buy,
                amount,
                available: limit,
            });
        }
        // Σ of at most 63 amounts < 2^64 each: cannot overflow u128.
        taken_in[sell] += u128::from(trade.amount);
        let paid = payout(trade.amount, prices[sell], prices[buy], params.fee_bits);
        paid_out[buy] = paid_out[buy].zip(paid).and_then(|(a, b)| a.checked_add(b));
    }
    for asset in 0..assets {
        let Some(paid) = paid_out[asset] else {
            return Err(ClearingViolation::Overflow { asset });
        };
        if paid > taken_in[asset] {
            return Err(ClearingViolation::Conservation {
                asset,
                paid_out: paid,
                taken_in: taken_in[asset],
            });
        }
    }
    Ok(())
}

/// Trade amounts as a dense `assets × assets` matrix (row = sold asset), with the exact valuations.
pub(crate) struct Flows<'a> {
    pub(crate) assets: usize,
    pub(crate) prices: &'a [u64],
    pub(crate) fee_bits: u8,
    pub(crate) amounts: Vec<u64>,
}

/// The most passes of [`Flows::repair`] over all assets before it gives up and trades nothing.
const REPAIR_PASSES_MAX: usize = 4 * ASSETS_MAX + 8;

impl Flows<'_> {
    fn taken_in(&self, asset: usize) -> u128 {
        let row = &self.amounts[asset * self.assets..(asset + 1) * self.assets];
        row.iter().map(|&x| u128::from(x)).sum()
    }

    /// Σ payouts of `asset`, saturating (a saturated sum is a deficit all the same).
    fn paid_out(&self, asset: usize) -> u128 {
        (0..self.assets)
            .map(|from| self.payout_of(from, asset))
            .fold(0u128, |sum, paid| sum.saturating_add(paid))
    }

    fn payout_of(&self, from: usize, to: usize) -> u128 {
        let amount = self.amounts[from * self.assets + to];
        payout(amount, self.prices[from], self.prices[to], self.fee_bits).unwrap_or(u128::MAX)
    }

    /// Makes the amounts conserve assets exactly (rule 3 of `check`) by only ever lowering them, so
    /// limits (rule 2) stay met. Each pass visits every asset paying out more than it takes in and
    /// lowers the trades paying it, largest first, by a float estimate of the units needed (plus a
    /// margin for the roundings), rechecking exactly after each cut. Lowering what is paid in asset
    /// A lowers what other assets take in, so they may then need a cut: passes repeat until one is
    /// clean. Every cut strictly lowers some amount, and zero trades is always valid, so the worst
    /// case ends at no trades (also forced after [`REPAIR_PASSES_MAX`] passes).
    pub(crate) fn repair(&mut self) {
        for _ in 0..REPAIR_PASSES_MAX {
            let mut clean = true;
            for asset in 0..self.assets {
                let taken = self.taken_in(asset);
                if self.paid_out(asset) > taken {
                    clean = false;
                    self.cut_payments_to(asset, taken);
                }
            }
            if clean {
                return;
            }
        }
        self.amounts.fill(0);
    }

    fn cut_payments_to(&mut self, asset: usize, taken: u128) {
        let n = self.assets;
        let mut payers: Vec<usize> = (0..n).filter(|&from| self.amounts[from * n + asset] > 0).collect();
        // Largest payment first: the fewest pairs touched.
        payers.sort_by_key(|&from| std::cmp::Reverse(self.payout_of(from, asset)));
        let keep = 1.0 - fee_share(self.fee_bits);
        for from in payers {
            let paid = self.paid_out(asset);
            if paid <= taken {
                return;
            }
            let deficit = (paid - taken) as f64;
            // Units of `from` whose payout covers the deficit, with room for the two roundings.
            let per_unit = self.prices[from] as f64 / self.prices[asset] as f64 * keep;
            let needed = ((deficit + 2.0) / per_unit * (1.0 + 1e-9)).ceil() + 1.0;
            let amount = &mut self.amounts[from * n + asset];
            *amount = if needed.is_finite() && needed < *amount as f64 {
                *amount - needed as u64
            } else {
                0
            };
        }
        if self.paid_out(asset) > taken {
            // The estimates fell short (only possible through float rounding): pay nothing in asset.
            (0..n).for_each(|from| self.amounts[from * n + asset] = 0);
        }
    }
}

/// ε = 2^-fee_bits as a float (0 for fee_bits ≥ 1075, 1 for fee_bits = 0).
pub(crate) fn fee_share(fee_bits: u8) -> f64 {
    (-f64::from(fee_bits)).exp2()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fee_rounds_in_the_auctioneers_favour() {
        assert_eq!(fee(0, 15), 0);
        assert_eq!(fee(1, 15), 0);
        assert_eq!(fee(1 << 15, 15), (1 << 15) - 1);
        assert_eq!(fee((1 << 15) + 1, 15), (1 << 15) - 1);
        assert_eq!(fee(100, 0), 0);
        assert_eq!(fee(100, 200), 99);
        assert_eq!(fee(u128::MAX, 1), u128::MAX / 2);
    }

    #[test]
    fn payout_is_superadditive_safe() {
        // Σ payouts of parts ≤ payout of the whole, for a few awkward ratios.
        for (p_sold, p_bought) in [(3u64, 7u64), (1 << 40, 3), (5, 1 << 50), (u64::MAX, 1)] {
            let whole = payout(1000, p_sold, p_bought, 3).expect("nonzero price");
            let parts: u128 = [1u64, 333, 666]
                .iter()
                .map(|&x| payout(x, p_sold, p_bought, 3).expect("nonzero"))
                .sum();
            assert!(parts <= whole);
        }
        assert_eq!(payout(5, 1, 0, 3), None);
    }

    #[test]
    fn repair_only_lowers_and_ends_conserving() {
        let prices = [1u64 << 40, 3 << 38, 7 << 36];
        let mut flows = Flows {
            assets: 3,
            prices: &prices,
            fee_bits: 10,
            amounts: vec![0, 500, 9, 700, 0, 40, 3, 80, 0],
        };
        let before = flows.amounts.clone();
        flows.repair();
        for asset in 0..3 {
            assert!(flows.paid_out(asset) <= flows.taken_in(asset));
        }
        assert!(flows.amounts.iter().zip(&before).all(|(after, before)| after <= before));
    }
}
