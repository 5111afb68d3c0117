//! The clearing cells: books of the synthetic workload cleared as the exchange's proposer clears
//! them, timed over several runs, each clearing checked exactly and its quality measured.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use specie_clearing::{check, compute_with_report, ClearingParams, LimitPrice, PairSupply};
use specie_exchange::{ExchangeConfig, OfferKey, Operation, Pair};
use specie_workload::exchange::{Market, MarketMix};

use super::{
    ms_since, verdict, ExchangeBenchOptions, Spread, REFERENCE_ASSETS, REFERENCE_MEDIAN_MS_50_ASSETS,
    TARGET_CLEARING_P99_MS,
};

/// Steps of the valuations' random walk before a book is drawn, so valuations spread apart (the
/// workload's step is 1%: after 100 steps log-valuations are about 10% apart).
const DRIFT_STEPS: usize = 100;
/// What each trader may spend of every asset when a book is drawn.
const BALANCE: u64 = 1_000_000_000_000;
/// Offers per trader in a drawn book (the workload's 10 a block).
const OFFERS_PER_TRADER: usize = 10;

/// Resting offers as the ledger keeps them: a book per ordered pair, in execution order.
pub type Books = BTreeMap<Pair, BTreeMap<OfferKey, u64>>;

/// The median and the least of a share.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Share {
    pub median: f64,
    pub min: f64,
}

/// One (assets, offers) cell.
#[derive(Clone, Debug, Serialize)]
pub struct CellReport {
    pub assets: usize,
    /// Offers asked for; `offers_drawn` is what the workload made (it skips zero amounts).
    pub offers: usize,
    pub offers_drawn: usize,
    pub runs: usize,
    /// Nonempty pairs and distinct price levels, averaged over the runs.
    pub pairs: usize,
    pub levels: usize,
    /// `compute_with_report`, the whole clearing (Tâtonnement, LP, integer repair, its own check).
    pub compute_ms: Spread,
    pub rounds: Spread,
    pub converged: usize,
    /// Runs whose Tâtonnement did not meet its criterion within the budget (the clearing is still
    /// valid: the best smoothed or LP clearing at the prices reached).
    pub timeouts: usize,
    /// Runs that took longer than the time budget by the wall clock.
    pub over_budget: usize,
    /// Clearings `check` refused: must be 0.
    pub invalid: usize,
    pub lp_solved: usize,
    pub lp_used: usize,
    /// Book preparation: the books aggregated by limit (what `Ledger::supply` does).
    pub supply_ms: Spread,
    /// A copy of the books (what `Ledger::apply` makes of them every block, to clear against).
    pub books_clone_ms: Spread,
    pub check_ms: Spread,
    /// `specie_clearing::quality` of the clearing: the book's preprocessing (per pair, limits
    /// sorted with prefix sums, as `compute` does first) and one quality measure; an upper bound
    /// on the part of `compute_ms` that does not depend on Tâtonnement.
    pub preprocessing_ms: Spread,
    /// Unrealized / realized utility (§6.2).
    pub unrealized_utility_ratio: Spread,
    /// Value traded / value offered in the money.
    pub volume_cleared_share: Share,
    /// Price levels below (1 − μ)·rate not traded in full, summed over the runs.
    pub below_mu_misses: u64,
    /// The reference's median at this size (50 assets only), and reference / ours.
    pub reference_median_ms: Option<f64>,
    pub speedup_vs_reference: Option<f64>,
    /// Our p99 / the 50 ms target (below 1 meets it).
    pub p99_vs_target: f64,
}

/// The parameters and the verdict over every cell.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub fee_bits: u8,
    pub smoothing_bits: u8,
    pub time_budget_ms: u64,
    pub instances: u8,
    pub invalid: usize,
    pub timeouts: usize,
    /// Over the target's cells (50 assets; every cell if the run has none): the worst p99, the
    /// time-outs, and whether both meet the target.
    pub target_cells: usize,
    pub target_worst_p99_ms: f64,
    pub target_timeouts: usize,
    pub meets_target: bool,
}

/// The exchange's own clearing parameters.
pub fn params() -> ClearingParams {
    ExchangeConfig::new([0; 32], 2).clearing
}

pub fn measure(options: &ExchangeBenchOptions, say: &impl Fn(&str)) -> Vec<CellReport> {
    let params = params();
    let mut cells = Vec::new();
    for &assets in &options.assets {
        for &offers in &options.offers {
            let runs = runs_for(options.runs, offers);
            say(&format!("clearing: {assets} assets, {offers} offers, {runs} runs …"));
            cells.push(cell(assets, offers, runs, &params, options.seed));
        }
    }
    cells
}

/// Fewer runs for the largest books (each draws its own).
fn runs_for(runs: usize, offers: usize) -> usize {
    match offers {
        0..=10_000 => runs,
        10_001..=100_000 => runs / 2,
        _ => runs / 4,
    }
    .max(1)
}

/// What one run measured.
struct Run {
    offers: usize,
    pairs: usize,
    levels: usize,
    supply_ms: f64,
    clone_ms: f64,
    compute_ms: f64,
    check_ms: f64,
    preprocessing_ms: f64,
    valid: bool,
    report: specie_clearing::ComputeReport,
}

fn run_once(assets: usize, offers: usize, params: &ClearingParams, seed: u64) -> Run {
    let books = draw_books(assets, offers, seed);
    let started = Instant::now();
    let copy = books.clone();
    let clone_ms = ms_since(started);
    drop(copy);
    let started = Instant::now();
    let supply = supply_of(&books);
    let supply_ms = ms_since(started);
    let started = Instant::now();
    let (clearing, report) = compute_with_report(assets, &supply, params);
    let compute_ms = ms_since(started);
    let started = Instant::now();
    let valid = check(assets, &supply, params, &clearing).is_ok();
    let check_ms = ms_since(started);
    let started = Instant::now();
    std::hint::black_box(specie_clearing::quality(assets, &supply, params, &clearing));
    let preprocessing_ms = ms_since(started);
    Run {
        offers: books.values().map(BTreeMap::len).sum(),
        pairs: supply.len(),
        levels: supply.iter().map(|pair| pair.levels.len()).sum(),
        supply_ms,
        clone_ms,
        compute_ms,
        check_ms,
        preprocessing_ms,
        valid,
        report,
    }
}

fn cell(assets: usize, offers: usize, runs: usize, params: &ClearingParams, seed: u64) -> CellReport {
    let done: Vec<Run> = (0..runs as u64)
        .map(|run| run_once(assets, offers, params, seed ^ (run << 32) ^ ((assets as u64) << 48)))
        .collect();
    let spread = |figure: fn(&Run) -> f64| Spread::of(done.iter().map(figure).collect());
    let count = |holds: fn(&Run) -> bool| done.iter().filter(|r| holds(r)).count();
    let mean = |figure: fn(&Run) -> usize| done.iter().map(figure).sum::<usize>() / runs;
    let compute_ms = spread(|r| r.compute_ms);
    let mut shares: Vec<f64> = done.iter().map(|r| r.report.quality.volume_cleared_share()).collect();
    shares.sort_by(f64::total_cmp);
    let budget_ms = params.time_budget_ms as f64;
    let reference_median_ms = (assets == REFERENCE_ASSETS)
        .then(|| REFERENCE_MEDIAN_MS_50_ASSETS.iter().find(|(o, _)| *o == offers))
        .flatten()
        .map(|(_, ms)| *ms);
    CellReport {
        assets,
        offers,
        offers_drawn: mean(|r| r.offers),
        runs,
        pairs: mean(|r| r.pairs),
        levels: mean(|r| r.levels),
        compute_ms,
        rounds: spread(|r| f64::from(r.report.rounds)),
        converged: count(|r| r.report.converged),
        timeouts: count(|r| !r.report.converged),
        over_budget: done.iter().filter(|r| r.compute_ms > budget_ms).count(),
        invalid: count(|r| !r.valid),
        lp_solved: count(|r| r.report.lp_solved),
        lp_used: count(|r| r.report.lp_used),
        supply_ms: spread(|r| r.supply_ms),
        books_clone_ms: spread(|r| r.clone_ms),
        check_ms: spread(|r| r.check_ms),
        preprocessing_ms: spread(|r| r.preprocessing_ms),
        unrealized_utility_ratio: spread(|r| r.report.quality.unrealized_utility_ratio),
        volume_cleared_share: Share {
            median: shares[shares.len() / 2],
            min: shares[0],
        },
        below_mu_misses: done.iter().map(|r| r.report.quality.offers_below_mu_not_full).sum(),
        reference_median_ms,
        speedup_vs_reference: reference_median_ms.map(|ms| ms / compute_ms.median.max(1e-6)),
        p99_vs_target: compute_ms.p99 / TARGET_CLEARING_P99_MS,
    }
}

/// `offers` sell offers of the synthetic workload (limits within its spread of the drifted
/// valuations' rates), as the ledger would rest them.
pub fn draw_books(assets: usize, offers: usize, seed: u64) -> Books {
    let mut rng = StdRng::seed_from_u64(seed);
    let traders = (offers / OFFERS_PER_TRADER).max(2);
    let mut market = Market::new(assets, traders);
    let mix = MarketMix {
        offers,
        cancels: 0,
        payments: 0,
        ..MarketMix::for_traders(traders)
    };
    for _ in 0..DRIFT_STEPS {
        market.drift(&mut rng, &mix);
    }
    let mut books = Books::new();
    for (_, transaction) in market.block(&mut rng, &mix, |_, _| BALANCE) {
        if let Operation::SellOffer {
            sell,
            buy,
            amount,
            limit,
        } = transaction.operation
        {
            let key = OfferKey {
                limit,
                account: transaction.account,
                sequence: transaction.sequence,
            };
            books.entry((sell, buy)).or_default().insert(key, amount);
        }
    }
    books
}

/// Every nonempty book aggregated by limit, ascending: what `Ledger::supply` computes from the
/// ledger's books (the same code, over the same structure).
pub fn supply_of(books: &Books) -> Vec<PairSupply> {
    books
        .iter()
        .filter(|(_, book)| !book.is_empty())
        .map(|(&(sell, buy), book)| {
            let mut levels: Vec<(LimitPrice, u64)> = Vec::new();
            for (key, &amount) in book {
                match levels.last_mut() {
                    Some((limit, total)) if *limit == key.limit => *total = total.saturating_add(amount),
                    _ => levels.push((key.limit, amount)),
                }
            }
            PairSupply { sell, buy, levels }
        })
        .collect()
}

pub fn summarise(cells: &[CellReport]) -> Summary {
    let params = params();
    let targeted: Vec<&CellReport> = match cells.iter().any(|c| c.assets == REFERENCE_ASSETS) {
        true => cells.iter().filter(|c| c.assets == REFERENCE_ASSETS).collect(),
        false => cells.iter().collect(),
    };
    let worst = targeted.iter().map(|c| c.compute_ms.p99).fold(0.0, f64::max);
    let target_timeouts = targeted.iter().map(|c| c.timeouts).sum();
    let invalid = cells.iter().map(|c| c.invalid).sum();
    Summary {
        fee_bits: params.fee_bits,
        smoothing_bits: params.smoothing_bits,
        time_budget_ms: params.time_budget_ms,
        instances: params.instances,
        invalid,
        timeouts: cells.iter().map(|c| c.timeouts).sum(),
        target_cells: targeted.len(),
        target_worst_p99_ms: worst,
        target_timeouts,
        meets_target: worst < TARGET_CLEARING_P99_MS && target_timeouts == 0 && invalid == 0,
    }
}

fn percent(ratio: f64) -> String {
    match ratio.is_finite() {
        true => format!("{:.3}%", ratio * 100.0),
        false => "inf".into(),
    }
}

pub fn table(cells: &[CellReport], summary: &Summary) -> String {
    let mut out = format!(
        "clearing (the exchange's parameters: fee 2^-{}, mu 2^-{}, budget {} ms, {} Tatonnement instances), \
         books of the synthetic workload (offers within ±2% of drifting valuations), times in ms\n\
         {:>6} {:>7} {:>4} {:>8} {:>8} {:>8} {:>4} {:>7} {:>6} {:>7} {:>12} {:>8} {:>7} {:>7} {:>7} {:>7} {:>22} {:>10}\n",
        summary.fee_bits,
        summary.smoothing_bits,
        summary.time_budget_ms,
        summary.instances,
        "assets",
        "offers",
        "runs",
        "median",
        "p99",
        "max",
        "t/o",
        "invalid",
        "LP",
        "rounds",
        "unreal/real",
        "cleared",
        "prep",
        "supply",
        "clone",
        "check",
        "vs reference (median)",
        "p99/50ms",
    );
    for c in cells {
        let reference = match (c.reference_median_ms, c.speedup_vs_reference) {
            (Some(ms), Some(x)) => format!("{ms:.0} ms: {x:.1}x faster"),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:>6} {:>7} {:>4} {:>8.2} {:>8.2} {:>8.2} {:>4} {:>7} {:>6} {:>7.0} {:>12} {:>7.2}% {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>22} {:>9.2}x\n",
            c.assets,
            c.offers,
            c.runs,
            c.compute_ms.median,
            c.compute_ms.p99,
            c.compute_ms.max,
            c.timeouts,
            c.invalid,
            format!("{}/{}", c.lp_used, c.runs),
            c.rounds.median,
            percent(c.unrealized_utility_ratio.median),
            c.volume_cleared_share.median * 100.0,
            c.preprocessing_ms.median,
            c.supply_ms.median,
            c.books_clone_ms.median,
            c.check_ms.median,
            reference,
            c.p99_vs_target,
        ));
    }
    out.push_str(&format!(
        "clearing target (p99 < {TARGET_CLEARING_P99_MS} ms, no time-out, at {REFERENCE_ASSETS} assets): worst p99 \
         {:.2} ms over {} cells, {} time-outs: {}; invalid clearings {} (must be 0), time-outs in all cells {}\n\
         (t/o: Tatonnement missed its criterion within the budget; LP: runs whose LP clearing was kept; unreal/real: \
         median unrealized/realized utility; cleared: median share of the in-the-money value traded; prep: \
         specie_clearing::quality, i.e. the preprocessing compute does first plus one measure; supply: \
         book preparation as Ledger::supply; clone: the copy of the books Ledger::apply makes per block)\n",
        summary.target_worst_p99_ms,
        summary.target_cells,
        summary.target_timeouts,
        verdict(summary.meets_target),
        summary.invalid,
        summary.timeouts,
    ));
    out
}
