//! SPEEDEX batch clearing (seed paper 004, §4–§6 and Appendices B–D, G): one valuation per asset
//! and one trade amount per ordered asset pair for a block of limit offers, and the exact check
//! a replica runs on a proposed clearing.
//!
//! # Roles
//!
//! * [`compute`] is the proposer's: heuristic, parallel, floating point, time-bounded. Its output
//!   need not be reproducible (instances race), so it travels in the block (the paper's §K.3).
//! * [`check`] is every replica's: exact integers, deterministic, linear in the supply. It is what
//!   makes a clearing safe; `compute` calls it on its own answer before returning it.
//! * [`quality`] is the paper's §6.2 measure, for choosing among candidates, benchmarks and reports.
//!
//! # What a valid clearing guarantees (the paper's Appendix B, made exact)
//!
//! Selling A for B trades at rate p_A / p_B. For each pair the ledger sells offers in (limit,
//! account, offer id) order up to `amount`, at most one partially, and pays each seller
//! [`payout`]`(sold_i)` = fee(floor(sold_i · p_A / p_B)) of B, with fee(v) = v − ceil(v / 2^fee_bits).
//! `check` requires (2) `amount ≤ U`, the total offered at limits ≤ the rate (limit · p_B ≤ p_A · 2^32
//! in u128), so no offer trades beyond its limit; and (3) for every asset A,
//! Σ_B payout(x_BA) ≤ Σ_B x_AB. floor and fee only ever round down and fee(a) + fee(b) ≤ fee(a + b),
//! so the per-offer payouts of a pair sum to at most the pair's payout: the auctioneer never pays
//! out more of any asset than it took in, whatever the split into offers. The commission (and the
//! rounding dust) is burned.
//!
//! # How `compute` works
//!
//! 1. **Preprocessing** (Appendix G): per ordered pair, distinct limits ascending with prefix sums
//!    of amount and of rate × amount, so a demand query is two binary searches per pair,
//!    O(pairs · log levels), independent of the number of offers otherwise.
//! 2. **Tâtonnement** (§5, Appendix C) over log-valuations in f64: smoothed demand (offers below
//!    (1 − μ)·rate sell in full, those in the band [(1 − μ)·rate, rate] a linear share); the
//!    multiplicative, value-normalised update p_A ← p_A·exp(δ·Z_A/ν_A) with excess demand Z_A in
//!    value and a volume factor ν_A; a backtracking step δ (a step is taken only if it lowers the
//!    squared l2 norm of the value excess demand, then δ grows, else δ shrinks). The stopping
//!    criterion: the smoothed flows conserve every asset with commission ε/2, which makes them a
//!    feasible point of the LP below. `instances` instances with different step parameters and
//!    volume normalisations (`tatonnement::STRATEGIES`) race on their own threads; the first to
//!    meet the criterion stops the others. Otherwise, at `rounds_max` or after 60% of the time
//!    budget, each instance's prices are turned into a full integer clearing (smoothed flows,
//!    rounded down and repaired) and the best by [`quality`] (least unrealized/realized utility)
//!    is kept.
//! 3. **Integer valuations**: the log-valuations are scaled so the largest valuation is 2^62 (all
//!    within [1, 2^63): the most resolution, and every product x · p fits u128).
//! 4. **The LP** (Appendix D) at those exact valuations, via microlp in f64, in value variables
//!    scaled to [0, 1]: maximise traded value subject to L ≤ x ≤ U (L: all offers below (1 − μ)·rate)
//!    and Σ_B p_A·x_AB ≥ (1 − ε_lp)·Σ_B p_B·x_BA with **ε_lp = 3/4·ε**: *smaller* than the fee
//!    check charges, so the LP is stricter than conservation and its slack (ε/4 of each asset's
//!    payouts) absorbs the rounding. (The LP with a larger ε would allow payouts the check refuses.)
//!    If L makes it infeasible, L is dropped (the paper's fallback). It gets the rest of the budget.
//! 5. **Rounding and repair**: amounts are rounded down and clamped to the exact U; then an exact
//!    integer repair only ever lowers amounts until every asset conserves (`exact::Flows::repair`). Of the LP's
//!    and the smoothed-flow clearing, the better by [`quality`] is kept; `check` runs on it, and a
//!    clearing that fails (a bug) is replaced by no trades. Zero trades is always valid.
//!
//! `compute` never fails: empty books, one offer, disconnected assets, limits 0 or u64::MAX and
//! amounts up to u64::MAX all give a valid clearing (worst case, no trades); input pairs out of
//! range or selling an asset for itself are ignored. Given the same input twice it may return
//! different (each valid) clearings: which instance wins a race depends on thread timing.
//!
//! # Limits
//!
//! At most [`ASSETS_MAX`] assets (above it `compute` returns an empty clearing and `check` refuses
//! every clearing); at most [`INSTANCES_MAX`] Tâtonnement threads; time budget at most
//! [`TIME_BUDGET_MS_MAX`]. Tâtonnement's rounds are O(pairs · log levels) each, and an instance
//! runs at least 32 of them (`tatonnement::ROUNDS_BEFORE_DEADLINE`) whatever the clock says, so
//! that a large book on a loaded machine is not cleared at its starting prices; the LP has one
//! variable per pair with offers in the money and one row per asset; the repair makes at most
//! 4·ASSETS_MAX + 8 passes of O(assets²).

mod book;
mod exact;
mod lp;
mod quality;
mod tatonnement;

use std::time::{Duration, Instant};

pub use exact::{fee, payout};
pub use quality::Quality;

use book::Book;
use exact::{fee_share, Flows};
use lp::Bounds;

/// The most assets one clearing prices (one LP row and up to 63 pairs each).
pub const ASSETS_MAX: usize = 64;
/// The most Tâtonnement instances raced, each on its own thread.
pub const INSTANCES_MAX: u8 = 8;
/// The longest time budget `compute` accepts; larger budgets are cut to this.
pub const TIME_BUDGET_MS_MAX: u64 = 60_000;
/// The valuation every asset gets when there is nothing to price (CAP-45's start price, 2^32).
pub const VALUATION_START: u64 = 1 << 32;
/// Integer valuations are scaled so the largest is this (2^62).
const VALUATION_TOP: f64 = 4_611_686_018_427_387_904.0;
/// The largest integer valuation (2^63 − 1).
const VALUATION_MAX: u64 = (1 << 63) - 1;
/// Share of the time budget for Tâtonnement; the rest is the LP's (and the cheap integer steps').
const TATONNEMENT_BUDGET_SHARE: f64 = 0.6;
/// The commission Tâtonnement's stopping criterion allows, as a share of ε.
const STOP_FEE_SHARE: f64 = 0.5;
/// The commission the LP assumes, as a share of ε (below 1: the rest is room for rounding).
const LP_FEE_SHARE: f64 = 0.75;

/// A limit price: the least units of the bought asset accepted per unit sold, Q32.32 fixed point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LimitPrice(pub u64);

/// An asset's valuation in one block (nonzero). Selling A for B trades at rate p_A / p_B units of B
/// per unit of A. `compute` keeps valuations within [1, 2^63).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Valuation(pub u64);

/// The offers selling `sell` for `buy`, aggregated by distinct limit price, ascending: (limit, total
/// amount of `sell` offered at exactly that limit). `compute` and `check` tolerate untidy input
/// (unsorted, repeated limits, repeated pairs: amounts add up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairSupply {
    pub sell: u16,
    pub buy: u16,
    pub levels: Vec<(LimitPrice, u64)>,
}

/// The clearing's parameters. ε = 2^-fee_bits is the auctioneer's commission (burned); μ =
/// 2^-smoothing_bits: offers with limit below (1 − μ)·rate must trade in full, if the LP is feasible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClearingParams {
    /// ε = 2^-fee_bits. The paper's robustness runs use 15 (0.003%); 0 means ε = 1 (everything burned).
    pub fee_bits: u8,
    /// μ = 2^-smoothing_bits. The paper uses 10 (0.1%). Larger is closer to exact limit behaviour
    /// and makes Tâtonnement slower to converge (its Fig. 2).
    pub smoothing_bits: u8,
    /// Rounds per Tâtonnement instance (each round is one or two demand queries).
    pub rounds_max: u32,
    /// Wall-clock budget of `compute`, Tâtonnement and LP together (capped at [`TIME_BUDGET_MS_MAX`]).
    pub time_budget_ms: u64,
    /// Tâtonnement instances raced on their own threads (clamped to 1..=[`INSTANCES_MAX`]; 1 runs on
    /// the caller's thread).
    pub instances: u8,
}

impl Default for ClearingParams {
    /// The paper's §6.2 settings (ε = 2^-15, μ = 2^-10), two instances (the target machines have
    /// few cores to spare), a 100 ms budget.
    fn default() -> Self {
        ClearingParams {
            fee_bits: 15,
            smoothing_bits: 10,
            rounds_max: 5_000,
            time_budget_ms: 100,
            instances: 2,
        }
    }
}

/// An amount of `sell` sold for `buy` at the clearing's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PairTrade {
    pub sell: u16,
    pub buy: u16,
    pub amount: u64,
}

/// One block's clearing: a valuation per asset, and the trades sorted by (sell, buy), zero amounts
/// omitted, each pair at most once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clearing {
    pub prices: Vec<Valuation>,
    pub trades: Vec<PairTrade>,
}

/// Why `check` refused a clearing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClearingViolation {
    #[error("{assets} assets, more than the {ASSETS_MAX} a clearing may price")]
    TooManyAssets { assets: usize },
    #[error("{prices} valuations for {assets} assets")]
    PriceCount { prices: usize, assets: usize },
    #[error("asset {asset} has valuation zero")]
    ZeroPrice { asset: usize },
    #[error("trade {index} ({sell} → {buy}) names an asset out of range")]
    AssetOutOfRange { index: usize, sell: u16, buy: u16 },
    #[error("trade {index} sells asset {asset} for itself")]
    SameAsset { index: usize, asset: u16 },
    #[error("trade {index} has amount zero (zero trades are omitted)")]
    ZeroAmount { index: usize },
    #[error("pair {sell} → {buy} appears twice")]
    DuplicatePair { sell: u16, buy: u16 },
    #[error("trade {index} is out of (sell, buy) order")]
    Unsorted { index: usize },
    #[error("pair {sell} → {buy} trades {amount}, but only {available} is offered within the rate")]
    OverLimit {
        sell: u16,
        buy: u16,
        amount: u64,
        available: u128,
    },
    #[error("asset {asset}: pays out {paid_out}, takes in only {taken_in}")]
    Conservation {
        asset: usize,
        paid_out: u128,
        taken_in: u128,
    },
    #[error("asset {asset}: payouts overflow u128")]
    Overflow { asset: usize },
}

/// A replica's check of a proposed clearing: exact integers, no floats, deterministic, O(supply).
///
/// (1) `assets ≤ ASSETS_MAX`, `prices.len() == assets`, every price nonzero, trades strictly sorted by
/// (sell, buy) (so no pair twice), `sell != buy`, assets in range, amounts nonzero; (2) for each
/// pair, amount ≤ U = total offered at limits with limit · p_B ≤ p_A · 2^32 (u128); (3) for each
/// asset A, Σ_B payout(x_BA) ≤ Σ_B x_AB, in u128 (an overflow is a violation, never a panic).
pub fn check(
    assets: usize,
    supply: &[PairSupply],
    params: &ClearingParams,
    clearing: &Clearing,
) -> Result<(), ClearingViolation> {
    exact::check(assets, supply, params, clearing)
}

/// The paper's §6.2 quality measure of a clearing for this supply (floats; for ranking and reports).
/// A clearing that fails `check`'s structural rules gets the default (all zero) measure.
pub fn quality(assets: usize, supply: &[PairSupply], params: &ClearingParams, clearing: &Clearing) -> Quality {
    let book = Book::new(assets, supply);
    if clearing.prices.len() != book.assets || clearing.prices.iter().any(|p| p.0 == 0) {
        return Quality::default();
    }
    let prices: Vec<u64> = clearing.prices.iter().map(|p| p.0).collect();
    let mut amounts = vec![0u64; book.assets * book.assets];
    for t in clearing
        .trades
        .iter()
        .filter(|t| usize::from(t.sell.max(t.buy)) < book.assets)
    {
        amounts[usize::from(t.sell) * book.assets + usize::from(t.buy)] = t.amount;
    }
    quality::measure(&book, &prices, &amounts, params.smoothing_bits)
}

/// The proposer's clearing: Tâtonnement instances raced in parallel, then the LP, then exact integer
/// repair and `check` (see the crate documentation). Never fails; returns within the time budget
/// plus the (bounded, budget-independent) integer steps and, at most, 32 Tâtonnement rounds.
pub fn compute(assets: usize, supply: &[PairSupply], params: &ClearingParams) -> Clearing {
    compute_with_report(assets, supply, params).0
}

/// What one `compute` did, for benchmarks and logs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComputeReport {
    /// Whether a Tâtonnement instance met the stopping criterion (else the budget or rounds ran out).
    pub converged: bool,
    /// Rounds of the chosen instance.
    pub rounds: u32,
    /// Whether the LP answered in time (else the smoothed flows were used).
    pub lp_solved: bool,
    /// Whether the LP's clearing was kept (it may lose to the smoothed one on quality).
    pub lp_used: bool,
    /// The quality of the returned clearing.
    pub quality: Quality,
    /// How long it took, by the clock its time budget is kept by (microseconds).
    pub took_us: u64,
}

/// [`compute`] with Tâtonnement's first instance started from `start` (the previous block's
/// valuations, say: a market moves little between blocks), the others from equal valuations.
/// `start` of another length, or with a zero, is ignored. Only where the search starts changes:
/// the result is checked as any other.
pub fn compute_from(assets: usize, supply: &[PairSupply], params: &ClearingParams, start: &[Valuation]) -> Clearing {
    compute_with_report_from(assets, supply, params, start).0
}

/// [`compute`], also saying how it went.
pub fn compute_with_report(assets: usize, supply: &[PairSupply], params: &ClearingParams) -> (Clearing, ComputeReport) {
    compute_with_report_from(assets, supply, params, &[])
}

/// Log-valuations, mean zero, from integer ones; empty if they are not one per asset, nonzero.
fn warm_log_prices(assets: usize, start: &[Valuation]) -> Vec<f64> {
    if start.len() != assets || start.iter().any(|p| p.0 == 0) {
        return Vec::new();
    }
    let mut log_prices: Vec<f64> = start.iter().map(|p| (p.0 as f64).ln()).collect();
    let mean = log_prices.iter().sum::<f64>() / assets as f64;
    log_prices.iter_mut().for_each(|lp| *lp -= mean);
    log_prices
}

/// [`compute_from`], also saying how it went.
pub fn compute_with_report_from(
    assets: usize,
    supply: &[PairSupply],
    params: &ClearingParams,
    start: &[Valuation],
) -> (Clearing, ComputeReport) {
    let started = Instant::now();
    let (clearing, mut report) = clear(assets, supply, params, start, started);
    report.took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    (clearing, report)
}

/// [`compute_with_report_from`] but for `took_us`, its budget counted from `started`.
fn clear(
    assets: usize,
    supply: &[PairSupply],
    params: &ClearingParams,
    start: &[Valuation],
    started: Instant,
) -> (Clearing, ComputeReport) {
    let mut report = ComputeReport::default();
    if assets > ASSETS_MAX {
        return (
            Clearing {
                prices: Vec::new(),
                trades: Vec::new(),
            },
            report,
        );
    }
    let book = Book::new(assets, supply);
    if book.pairs.is_empty() {
        report.converged = true;
        return (
            Clearing {
                prices: vec![Valuation(VALUATION_START); assets],
                trades: Vec::new(),
            },
            report,
        );
    }
    let budget = Duration::from_millis(params.time_budget_ms.min(TIME_BUDGET_MS_MAX));
    let eps = fee_share(params.fee_bits);
    let setup = tatonnement::Setup {
        mu: fee_share(params.smoothing_bits),
        eps_stop: eps * STOP_FEE_SHARE,
        rounds_max: params.rounds_max,
        deadline: started + budget.mul_f64(TATONNEMENT_BUDGET_SHARE),
        warm_start: warm_log_prices(book.assets, start),
    };
    let instances = usize::from(params.instances.clamp(1, INSTANCES_MAX));
    let candidates = tatonnement::race(&book, &setup, instances);
    let chosen = best_candidate(&book, params, setup.mu, &candidates);
    (report.converged, report.rounds) = (chosen.met, chosen.rounds);
    let (prices, mut best_amounts) = (chosen.prices, chosen.amounts);
    report.quality = chosen.quality;
    let bounds = Bounds::new(&book, &prices, params.smoothing_bits);
    let time_left = budget.saturating_sub(started.elapsed());
    if let Some(amounts) = lp::solve(&book, &prices, &bounds, eps * LP_FEE_SHARE, time_left) {
        report.lp_solved = true;
        let mut flows = Flows {
            assets: book.assets,
            prices: &prices,
            fee_bits: params.fee_bits,
            amounts,
        };
        flows.repair();
        let lp_quality = quality::measure(&book, &prices, &flows.amounts, params.smoothing_bits);
        if !quality::better(&report.quality, &lp_quality) {
            report.lp_used = true;
            (best_amounts, report.quality) = (flows.amounts, lp_quality);
        }
    }
    let clearing = assemble(&prices, &best_amounts);
    match check(assets, supply, params, &clearing) {
        Ok(()) => (clearing, report),
        Err(_) => {
            report.quality = Quality::default();
            (
                Clearing {
                    prices: clearing.prices,
                    trades: Vec::new(),
                },
                report,
            )
        }
    }
}

/// Integer valuations from log-valuations: the largest becomes 2^62, all within [1, 2^63).
fn integer_prices(log_prices: &[f64]) -> Vec<u64> {
    let top = log_prices
        .iter()
        .copied()
        .filter(|lp| lp.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    log_prices
        .iter()
        .map(|&lp| {
            let scaled = ((lp - top) * std::f64::consts::LOG2_E).exp2() * VALUATION_TOP;
            // `as` saturates and maps NaN to 0; the clamp keeps the valuation nonzero.
            (scaled as u64).clamp(1, VALUATION_MAX)
        })
        .collect()
}

/// A full integer clearing from prices alone: the smoothed demand's flows at the exact valuations,
/// rounded down, clamped to U and repaired.
fn smoothed_clearing(book: &Book, prices: &[u64], fee_bits: u8, mu: f64) -> Vec<u64> {
    let n = book.assets;
    let mut amounts = vec![0u64; n * n];
    for pair in &book.pairs {
        let (p_sell, p_buy) = (prices[pair.sell], prices[pair.buy]);
        let supply = pair.smoothed_supply(p_sell as f64 / p_buy as f64, mu).floor();
        let cap = pair.available(p_sell, p_buy).min(u128::from(u64::MAX)) as u64;
        let supply = if supply.is_finite() && supply > 0.0 {
            supply as u64
        } else {
            0
        };
        amounts[pair.sell * n + pair.buy] = supply.min(cap);
    }
    let mut flows = Flows {
        assets: n,
        prices,
        fee_bits,
        amounts,
    };
    flows.repair();
    flows.amounts
}

/// A candidate's prices with its smoothed integer clearing and that clearing's quality.
struct Chosen {
    prices: Vec<u64>,
    amounts: Vec<u64>,
    quality: Quality,
    met: bool,
    rounds: u32,
}

/// The candidate to correct with the LP: the winner if one met the criterion (`race` then returns it
/// alone), else the best by the quality of its smoothed integer clearing.
fn best_candidate(book: &Book, params: &ClearingParams, mu: f64, candidates: &[tatonnement::Candidate]) -> Chosen {
    let mut best: Option<Chosen> = None;
    for candidate in candidates {
        let prices = integer_prices(&candidate.log_prices);
        let amounts = smoothed_clearing(book, &prices, params.fee_bits, mu);
        let quality = quality::measure(book, &prices, &amounts, params.smoothing_bits);
        if best.as_ref().is_none_or(|b| quality::better(&quality, &b.quality)) {
            best = Some(Chosen {
                prices,
                amounts,
                quality,
                met: candidate.met,
                rounds: candidate.rounds,
            });
        }
    }
    best.unwrap_or_else(|| {
        let prices = vec![VALUATION_START; book.assets];
        let amounts = vec![0; book.assets * book.assets];
        let quality = quality::measure(book, &prices, &amounts, params.smoothing_bits);
        Chosen {
            prices,
            amounts,
            quality,
            met: false,
            rounds: 0,
        }
    })
}

/// The clearing's canonical form: trades sorted by (sell, buy), zero amounts omitted.
fn assemble(prices: &[u64], amounts: &[u64]) -> Clearing {
    let n = prices.len();
    let trades = amounts
        .iter()
        .enumerate()
        .filter(|(_, &amount)| amount > 0)
        .map(|(index, &amount)| PairTrade {
            sell: (index / n) as u16,
            buy: (index % n) as u16,
            amount,
        })
        .collect();
    Clearing {
        prices: prices.iter().map(|&p| Valuation(p)).collect(),
        trades,
    }
}
