//! The linear program that corrects Tâtonnement's approximation (the paper's Appendix D), solved
//! in f64 by microlp. Its answer is only a proposal: the caller rounds it down, clamps it to U and
//! repairs it with exact integers before anything is checked.

use std::time::Duration;

use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOutcome};

use crate::book::Book;

/// Per pair of the book: the lower bound L (μ-approximation) and upper bound U (limits), exact.
pub(crate) struct Bounds {
    pub(crate) required: Vec<u128>,
    pub(crate) available: Vec<u128>,
}

impl Bounds {
    pub(crate) fn new(book: &Book, prices: &[u64], smoothing_bits: u8) -> Bounds {
        let available = book
            .pairs
            .iter()
            .map(|p| p.available(prices[p.sell], prices[p.buy]))
            .collect();
        let required = book
            .pairs
            .iter()
            .map(|p| p.required(prices[p.sell], prices[p.buy], smoothing_bits))
            .collect();
        Bounds { required, available }
    }
}

/// Solves, in value variables y_AB = p_A·x_AB / scale (scale = the largest p_A·U_AB, so every bound
/// lies in [0, 1] and microlp's absolute tolerances are relative to the largest flow):
///
/// max Σ y  s.t.  L_AB·p_A/scale ≤ y_AB ≤ U_AB·p_A/scale,  Σ_B y_AB − (1 − ε_lp)·Σ_B y_BA ≥ 0 ∀A.
///
/// If the lower bounds make it infeasible (Tâtonnement did not converge), it is solved again with
/// them at zero, as the paper does. Returns dense amounts `x[sell * assets + buy]` rounded and
/// clamped to U, or `None` if microlp fails or runs out of `time_limit`.
pub(crate) fn solve(
    book: &Book,
    prices: &[u64],
    bounds: &Bounds,
    eps_lp: f64,
    time_limit: Duration,
) -> Option<Vec<u64>> {
    let n = book.assets;
    let mut amounts = vec![0u64; n * n];
    let values: Vec<f64> = book
        .pairs
        .iter()
        .zip(&bounds.available)
        .map(|(p, &u)| u as f64 * prices[p.sell] as f64)
        .collect();
    let scale = values.iter().copied().fold(0.0, f64::max);
    if scale <= 0.0 || !scale.is_finite() {
        return Some(amounts);
    }
    let solution = solve_scaled(book, prices, bounds, scale, eps_lp, time_limit, true)
        .or_else(|| solve_scaled(book, prices, bounds, scale, eps_lp, time_limit, false))?;
    for (index, pair) in book.pairs.iter().enumerate() {
        let Some(y) = solution[index] else { continue };
        // Rounded to nearest, not down: a bound L the LP met is met by the integer too (the LP keeps
        // ε/4 of slack, and the exact repair after this settles any unit of rounding).
        let x = (y * scale / prices[pair.sell] as f64).round();
        let cap = bounds.available[index].min(u128::from(u64::MAX));
        // `as` saturates: NaN → 0, huge → u64::MAX; then the exact cap.
        let x = if x.is_finite() && x > 0.0 { x as u64 } else { 0 };
        amounts[pair.sell * n + pair.buy] = u128::from(x).min(cap) as u64;
    }
    Some(amounts)
}

/// One microlp solve; `None` if infeasible, failed or interrupted. A variable per pair with U > 0.
fn solve_scaled(
    book: &Book,
    prices: &[u64],
    bounds: &Bounds,
    scale: f64,
    eps_lp: f64,
    time_limit: Duration,
    with_lower_bounds: bool,
) -> Option<Vec<Option<f64>>> {
    let n = book.assets;
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    problem.set_time_limit(time_limit);
    let mut outgoing: Vec<Vec<(microlp::Variable, f64)>> = vec![Vec::new(); n];
    let mut variables = Vec::with_capacity(book.pairs.len());
    for (index, pair) in book.pairs.iter().enumerate() {
        let price = prices[pair.sell] as f64;
        let upper = bounds.available[index] as f64 * price / scale;
        if upper <= 0.0 {
            variables.push(None);
            continue;
        }
        let lower = if with_lower_bounds {
            (bounds.required[index] as f64 * price / scale).min(upper)
        } else {
            0.0
        };
        let variable = problem.add_var(1.0, (lower, upper));
        outgoing[pair.sell].push((variable, 1.0));
        outgoing[pair.buy].push((variable, -(1.0 - eps_lp)));
        variables.push(Some(variable));
    }
    for row in outgoing.into_iter().filter(|row| !row.is_empty()) {
        problem.add_constraint(row.as_slice(), ComparisonOp::Ge, 0.0);
    }
    match problem.solve() {
        Ok(SolveOutcome::Solution(solution)) => {
            Some(variables.iter().map(|v| v.map(|v| solution.var_value(v))).collect())
        }
        _ => None,
    }
}
