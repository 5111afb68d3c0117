//! Tâtonnement (the paper's §5 and Appendix C), in f64 over log-valuations. Only the proposer runs
//! it; its answer is judged by the exact check, so floats here cannot break conservation.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use crate::book::Book;

/// How an asset's price step is normalised by its trade volume (Appendix C.1's ν).
#[derive(Clone, Copy, Debug)]
pub(crate) enum VolumeNorm {
    /// ν = max(sold, bought): the relative excess demand, in [−1, 1].
    Max,
    /// ν = (sold + bought) / 2.
    Mean,
    /// ν = min(sold, bought), the paper's choice, floored at 1/8 of the max.
    Min,
}

/// One instance's control parameters; instances race with different ones (§5.2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strategy {
    /// The first step (a change of log-valuation of up to this, for a fully one-sided asset).
    pub(crate) step_initial: f64,
    /// Step factor after a step that lowered the heuristic.
    pub(crate) step_up: f64,
    /// Step factor after a rejected step.
    pub(crate) step_down: f64,
    pub(crate) norm: VolumeNorm,
}

/// The instances' strategies, used in turn (instance i takes `STRATEGIES[i % 4]`).
pub(crate) const STRATEGIES: [Strategy; 4] = [
    Strategy {
        step_initial: 0.5,
        step_up: 1.25,
        step_down: 0.5,
        norm: VolumeNorm::Max,
    },
    Strategy {
        step_initial: 0.1,
        step_up: 1.5,
        step_down: 0.3,
        norm: VolumeNorm::Min,
    },
    Strategy {
        step_initial: 1.0,
        step_up: 1.1,
        step_down: 0.6,
        norm: VolumeNorm::Mean,
    },
    Strategy {
        step_initial: 0.05,
        step_up: 2.0,
        step_down: 0.25,
        norm: VolumeNorm::Max,
    },
];

/// Steps never grow beyond this (a factor e^1 per round) ...
const STEP_MAX: f64 = 1.0;
/// ... nor shrink below this; a step at the floor is taken even if it does not help, so an
/// instance never stalls.
const STEP_MIN: f64 = 1e-10;
/// Rounds an instance runs before it looks at the deadline (unless `rounds_max` is lower): a
/// large book on a loaded machine may reach the deadline while it is still being prepared, and
/// its starting valuations would be cleared as they are (measured: 500k offers cleared 6%).
/// Deep books converge in about 20.
pub(crate) const ROUNDS_BEFORE_DEADLINE: u32 = 32;
/// Rounds between reads of the clock.
const ROUNDS_PER_CLOCK_READ: u32 = 8;

/// The knobs one instance needs, shared by all.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    /// μ as a float.
    pub(crate) mu: f64,
    /// The commission the stopping criterion allows (below ε, to leave the integer rounding room).
    pub(crate) eps_stop: f64,
    pub(crate) rounds_max: u32,
    pub(crate) deadline: Instant,
    /// Log-valuations to start the first instance from (the previous block's, mean zero); empty:
    /// every instance starts from equal valuations.
    pub(crate) warm_start: Vec<f64>,
}

/// What an instance ended with.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    /// Log-valuations, mean zero.
    pub(crate) log_prices: Vec<f64>,
    /// Whether the stopping criterion was met (the smoothed demand conserves with `eps_stop`).
    pub(crate) met: bool,
    pub(crate) rounds: u32,
}

/// Values (valuation × amount) sold to and bought from the auctioneer per asset, at smoothed demand.
struct Demand {
    sold: Vec<f64>,
    bought: Vec<f64>,
}

impl Demand {
    fn query(book: &Book, log_prices: &[f64], mu: f64) -> Demand {
        let mut demand = Demand {
            sold: vec![0.0; book.assets],
            bought: vec![0.0; book.assets],
        };
        // One exponential per asset, not two per pair (the rate is a ratio of valuations).
        let prices: Vec<f64> = log_prices.iter().map(|lp| lp.exp()).collect();
        for pair in &book.pairs {
            let (ls, lb) = (log_prices[pair.sell], log_prices[pair.buy]);
            let (ps, pb) = (prices[pair.sell], prices[pair.buy]);
            let alpha = match pb > 0.0 && pb.is_finite() && ps.is_finite() {
                true => ps / pb,
                false => (ls - lb).exp(),
            };
            let value = pair.smoothed_supply(alpha, mu) * ls.exp();
            demand.sold[pair.sell] += value;
            demand.bought[pair.buy] += value;
        }
        demand
    }

    /// Each asset's trade volume ν under a normalisation (0 for an asset that does not trade).
    fn volumes(&self, norm: VolumeNorm) -> Vec<f64> {
        self.sold
            .iter()
            .zip(&self.bought)
            .map(|(&sold, &bought)| {
                let volume = match norm {
                    VolumeNorm::Max => sold.max(bought),
                    VolumeNorm::Mean => (sold + bought) / 2.0,
                    VolumeNorm::Min => sold.min(bought).max(sold.max(bought) / 8.0),
                };
                if volume.is_finite() && volume > 0.0 {
                    volume
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The line-search heuristic (Appendix C.1): the squared l2 norm of the value excess demand,
    /// each asset's divided by its volume at the current prices (`volumes`, held fixed while the
    /// current and the candidate prices are compared). Unweighted, the norm is ruled by the most
    /// valuable, most traded assets and the volume-normalised step is no descent direction for it
    /// (measured: the step size collapses in the first rounds on 50 assets); weighted by volumes
    /// taken at each point separately, pricing an asset out of the market would look like progress.
    fn heuristic(&self, volumes: &[f64]) -> f64 {
        self.sold
            .iter()
            .zip(&self.bought)
            .zip(volumes)
            .filter(|(_, &v)| v > 0.0)
            .map(|((s, b), v)| ((b - s) / v) * ((b - s) / v))
            .sum()
    }

    /// The stopping criterion (§5): every asset takes in at least (1 − ε) of what it pays out. The
    /// smoothed flows respect limits and trade in full below (1 − μ)·rate, so when this holds they
    /// are a feasible point of the paper's linear program.
    fn conserves(&self, eps: f64) -> bool {
        self.sold.iter().zip(&self.bought).all(|(s, b)| *s >= (1.0 - eps) * b)
    }

    fn step(&self, log_prices: &[f64], step: f64, volumes: &[f64]) -> Vec<f64> {
        let mut next: Vec<f64> = log_prices
            .iter()
            .enumerate()
            .map(|(asset, &lp)| {
                let volume = volumes[asset];
                if volume <= 0.0 {
                    return lp;
                }
                let excess = self.bought[asset] - self.sold[asset];
                lp + (step * excess / volume).clamp(-2.0 * STEP_MAX, 2.0 * STEP_MAX)
            })
            .collect();
        normalise(&mut next);
        next
    }
}

/// Shifts log-valuations to mean zero: demand depends only on ratios, and a fixed level keeps the
/// heuristic's values comparable between rounds.
fn normalise(log_prices: &mut [f64]) {
    if log_prices.is_empty() {
        return;
    }
    let mean = log_prices.iter().sum::<f64>() / log_prices.len() as f64;
    log_prices.iter_mut().for_each(|lp| *lp -= mean);
}

/// One Tâtonnement instance: multiplicative, value-normalised, volume-normalised updates with a
/// backtracking step (a step is taken only if it lowers the heuristic, then grows; otherwise it
/// shrinks). Stops when the criterion holds, another instance won (`stop`), after `rounds_max`
/// rounds, or at the deadline.
pub(crate) fn run(book: &Book, setup: &Setup, strategy: Strategy, stop: &AtomicBool, warm: bool) -> Candidate {
    let mut log_prices = match warm && setup.warm_start.len() == book.assets {
        true => setup.warm_start.clone(),
        false => vec![0.0; book.assets],
    };
    let mut demand = Demand::query(book, &log_prices, setup.mu);
    let mut step = strategy.step_initial;
    for round in 0..setup.rounds_max {
        if demand.conserves(setup.eps_stop) {
            return Candidate {
                log_prices,
                met: true,
                rounds: round,
            };
        }
        let late =
            round >= ROUNDS_BEFORE_DEADLINE && round % ROUNDS_PER_CLOCK_READ == 0 && Instant::now() >= setup.deadline;
        if late || stop.load(Ordering::Relaxed) {
            return Candidate {
                log_prices,
                met: false,
                rounds: round,
            };
        }
        let volumes = demand.volumes(strategy.norm);
        let next = demand.step(&log_prices, step, &volumes);
        let next_demand = Demand::query(book, &next, setup.mu);
        if next_demand.heuristic(&volumes) < demand.heuristic(&volumes) || step <= STEP_MIN {
            (log_prices, demand) = (next, next_demand);
            step = (step * strategy.step_up).min(STEP_MAX);
        } else {
            step = (step * strategy.step_down).max(STEP_MIN);
        }
    }
    let met = demand.conserves(setup.eps_stop);
    Candidate {
        log_prices,
        met,
        rounds: setup.rounds_max,
    }
}

/// Races `instances` Tâtonnement instances on their own threads (std scoped threads: each must run
/// from the start, which a work-stealing pool with fewer cores than instances would not give). The
/// first to meet the criterion stops the others and is returned alone; otherwise every instance's
/// final prices are returned for the caller to pick the best. A panicking instance is dropped.
/// Instance 0 starts from `setup.warm_start` if there is one, the others from equal valuations (a
/// hedge against a market that moved).
pub(crate) fn race(book: &Book, setup: &Setup, instances: usize) -> Vec<Candidate> {
    let stop = AtomicBool::new(false);
    let winner = AtomicUsize::new(usize::MAX);
    let finish = |index: usize, candidate: Candidate| {
        if candidate.met
            && winner
                .compare_exchange(usize::MAX, index, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            stop.store(true, Ordering::Relaxed);
        }
        candidate
    };
    let mut candidates: Vec<(usize, Candidate)> = if instances <= 1 {
        Vec::new()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..instances)
                .filter_map(|i| {
                    let (stop, finish) = (&stop, &finish);
                    let strategy = STRATEGIES[i % STRATEGIES.len()];
                    let body = move || (i, finish(i, run(book, setup, strategy, stop, i == 0)));
                    // A thread the system will not give is an instance less, not a failure.
                    std::thread::Builder::new()
                        .name(format!("tatonnement-{i}"))
                        .spawn_scoped(scope, body)
                        .ok()
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    };
    if candidates.is_empty() {
        candidates.push((0, finish(0, run(book, setup, STRATEGIES[0], &stop, true))));
    }
    let won = winner.load(Ordering::Acquire);
    if let Some(position) = candidates.iter().position(|(i, _)| *i == won) {
        return vec![candidates.swap_remove(position).1];
    }
    candidates.into_iter().map(|(_, c)| c).collect()
}
