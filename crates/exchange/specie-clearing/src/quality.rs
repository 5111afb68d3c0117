//! The paper's measure of a clearing's quality (§6.2): utility left unrealized against utility
//! realized. Floats: it ranks proposals and feeds reports, it decides nothing a replica checks.

use crate::book::{Book, PairBook};

/// How good a clearing is, for the offers in its book.
///
/// The utility of selling one unit of A for B at rate α = p_A/p_B with limit r ≤ α is
/// p_B·(α − r) = p_A·(1 − r/α): the value received above the least the seller would take, in
/// valuation units (invariant under redenominating either asset). Offers in the money that do not
/// trade leave their utility unrealized; execution fills the lowest limits first, so a pair's
/// realized utility is that of its first `amount` units in limit order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quality {
    /// Unrealized / realized utility (0 when nothing could trade; +∞ when something could and
    /// nothing did). The paper reports 0.71% mean on hard cryptocurrency-derived batches.
    pub unrealized_utility_ratio: f64,
    /// Utility realized, in valuation units relative to the largest valuation (= 1).
    pub realized_utility: f64,
    /// Utility unrealized, same units.
    pub unrealized_utility: f64,
    /// Σ over pairs of p_A · amount: the value traded, same units.
    pub volume_cleared: f64,
    /// Σ over pairs of p_A · U: the value offered in the money at these valuations.
    pub volume_available: f64,
    /// Price levels (distinct limits of a pair; each aggregates offers) with a limit below
    /// (1 − μ)·rate that did not trade in full: the μ-approximation misses (0 when the LP bound held).
    pub offers_below_mu_not_full: u64,
}

impl Quality {
    /// The share of the in-the-money value that traded (1 when nothing was in the money).
    pub fn volume_cleared_share(&self) -> f64 {
        if self.volume_available <= 0.0 {
            1.0
        } else {
            self.volume_cleared / self.volume_available
        }
    }
}

/// Utility of the first `levels` levels, all traded in full, at rate `alpha`, per unit of p_sell.
fn full_levels_utility(pair: &PairBook, levels: usize, alpha: f64) -> f64 {
    (pair.cum_f[levels] - pair.cum_rate_amount_f[levels] / alpha).max(0.0)
}

/// The measure for dense trade amounts (`amounts[sell * assets + buy]`) at exact valuations.
pub(crate) fn measure(book: &Book, prices: &[u64], amounts: &[u64], smoothing_bits: u8) -> Quality {
    let top = prices.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mut quality = Quality::default();
    for pair in &book.pairs {
        let (p_sell, p_buy) = (prices[pair.sell], prices[pair.buy]);
        let value = p_sell as f64 / top;
        let alpha = p_sell as f64 / p_buy as f64;
        let amount = u128::from(amounts[pair.sell * book.assets + pair.buy]);
        let in_money = pair.in_money_levels(p_sell, p_buy);
        let possible = full_levels_utility(pair, in_money, alpha);
        // Levels fully executed, then the one partial level.
        let full = pair.cum[1..].partition_point(|&c| c <= amount).min(in_money);
        let mut realized = full_levels_utility(pair, full, alpha);
        if full < in_money {
            let rest = amount.saturating_sub(pair.cum[full]) as f64;
            realized += rest * (1.0 - pair.limit_f[full] / alpha).max(0.0);
        }
        let realized = realized.min(possible);
        quality.realized_utility += realized * value;
        quality.unrealized_utility += (possible - realized) * value;
        quality.volume_cleared += amount as f64 * value;
        quality.volume_available += pair.cum_f[in_money] * value;
        let required = pair.required_levels(p_sell, p_buy, smoothing_bits);
        quality.offers_below_mu_not_full += required.saturating_sub(full) as u64;
    }
    quality.unrealized_utility_ratio = match (quality.unrealized_utility, quality.realized_utility) {
        (u, _) if u <= 0.0 => 0.0,
        (_, r) if r <= 0.0 => f64::INFINITY,
        (u, r) => u / r,
    };
    quality
}

/// Orders candidates: the lower unrealized/realized ratio first, then the more realized utility.
pub(crate) fn better(a: &Quality, b: &Quality) -> bool {
    match a.unrealized_utility_ratio.partial_cmp(&b.unrealized_utility_ratio) {
        Some(std::cmp::Ordering::Less) => true,
        Some(std::cmp::Ordering::Equal) => a.realized_utility > b.realized_utility,
        _ => false,
    }
}
