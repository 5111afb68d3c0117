//! Prints how long `compute` takes for 50 assets at 1k, 10k, 100k and 500k random offers (limits
//! within ±10% of random true valuations), with the quality of the answer. An order-of-magnitude
//! look, not a benchmark: `cargo run --release -p specie-clearing --example clearing_time [runs]`.

#[path = "../tests/market/mod.rs"]
mod market;

use std::time::Instant;

use specie_clearing::{check, compute_with_report, ClearingParams};

fn main() {
    let runs: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let params = ClearingParams {
        time_budget_ms: 1_000,
        ..ClearingParams::default()
    };
    println!(
        "50 assets, fee 2^-{}, mu 2^-{}, {} instances, budget {} ms",
        params.fee_bits, params.smoothing_bits, params.instances, params.time_budget_ms
    );
    for offers in [1_000usize, 10_000, 100_000, 500_000] {
        let shape = market::Shape {
            assets: 50,
            offers,
            spread_below: 0.1,
            spread_above: 0.1,
            wild_amounts: false,
            wild_limits: false,
        };
        let mut times_ms = Vec::new();
        for run in 0..runs {
            let m = market::market(1_000 + run, shape);
            let started = Instant::now();
            let (clearing, report) = compute_with_report(50, &m.supply, &params);
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            times_ms.push(elapsed_ms);
            let checked = Instant::now();
            let ok = check(50, &m.supply, &params, &clearing).is_ok();
            let check_ms = checked.elapsed().as_secs_f64() * 1e3;
            // quality() = preprocessing the book (what compute does first) + the measure.
            let measured = Instant::now();
            let _ = specie_clearing::quality(50, &m.supply, &params, &clearing);
            let book_ms = measured.elapsed().as_secs_f64() * 1e3;
            println!(
                "  {offers:>7} offers run {run}: {elapsed_ms:8.2} ms  converged {} rounds {:>5} lp {} used {}  unrealized/realized {:.4}%  cleared {:.2}%  below-mu misses {}  check {} ({check_ms:.2} ms; book preprocessing ~{book_ms:.2} ms)",
                report.converged, report.rounds, report.lp_solved, report.lp_used,
                report.quality.unrealized_utility_ratio * 100.0, report.quality.volume_cleared_share() * 100.0,
                report.quality.offers_below_mu_not_full, if ok { "ok" } else { "FAILED" },
            );
        }
        times_ms.sort_by(f64::total_cmp);
        println!(
            "{offers:>7} offers: median {:.2} ms, max {:.2} ms",
            times_ms[times_ms.len() / 2],
            times_ms[times_ms.len() - 1]
        );
    }
}
