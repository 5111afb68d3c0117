//! End-to-end payment latency through the client's [`Pipeline`]: order to certificate, and to
//! settlement at a quorum, with every authority up or with one silent.

use std::path::Path;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use specie_committee::{Behaviour, Pipeline};

use super::load::{audit, CommitteeSetup, Owners};
use crate::error::BenchResult;
use crate::{ensure_that, fail};

/// Fail rather than hang if no payment ends for this long.
const STALL: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);

/// Latency percentiles of one run, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Percentiles {
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Percentiles {
    fn of(histogram: &Histogram<u64>) -> Percentiles {
        Percentiles {
            p50_ms: histogram.value_at_quantile(0.5) as f64 / 1e3,
            p99_ms: histogram.value_at_quantile(0.99) as f64 / 1e3,
        }
    }
}

/// What one latency run measured.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Latency {
    pub payments: usize,
    pub seconds: f64,
    /// From sending the order to every authority to holding a final certificate: every
    /// authority's prepare, or a quorum's commits after a lock (the client checks each vote).
    pub to_certificate: Percentiles,
    /// From sending the order to a quorum having settled the certificate.
    pub to_settlement: Percentiles,
}

impl Latency {
    pub fn payments_per_s(&self) -> f64 {
        self.payments as f64 / self.seconds
    }
}

/// Settles `payments` payments (one from each of as many fresh accounts) through a committee with
/// these behaviours, `window` in flight.
pub(crate) fn measure_latency(
    setup: &CommitteeSetup,
    dir: &Path,
    payments: usize,
    window: usize,
    behaviours: Vec<Behaviour>,
) -> BenchResult<Latency> {
    ensure_that!(payments >= 2, "at least 2 payments (each pays the next account)");
    ensure_that!(window > 0, "the latency window must be positive");
    let answering = behaviours.iter().filter(|b| **b != Behaviour::Silent).count();
    let committee = setup.start(dir, behaviours)?;
    let owners = Owners::new("bench-latency-account", payments);
    owners.fund(&committee, answering)?;
    let orders = owners.orders();

    let mut to_certificate = Histogram::<u64>::new(3)?;
    let mut to_settlement = Histogram::<u64>::new(3)?;
    let started = Instant::now();
    {
        let mut pipeline = Pipeline::new(&committee);
        let (mut submitted, mut settled) = (0usize, 0usize);
        let mut progress = Instant::now();
        while settled < payments {
            while submitted < payments && pipeline.in_flight() < window {
                pipeline.submit(&owners.keys[submitted], orders[submitted].clone());
                submitted += 1;
            }
            for (_, outcome) in pipeline.poll(POLL) {
                let settlement = match outcome {
                    Ok(settlement) => settlement,
                    Err(error) => fail!("a payment failed: {error}"),
                };
                to_certificate.record(settlement.to_certificate.as_micros() as u64)?;
                to_settlement.record(settlement.to_settlement.as_micros() as u64)?;
                settled += 1;
                progress = Instant::now();
            }
            ensure_that!(
                progress.elapsed() < STALL,
                "no payment ended for {STALL:?} with {settled} of {payments} settled"
            );
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    audit(committee, payments)?;
    Ok(Latency {
        payments,
        seconds,
        to_certificate: Percentiles::of(&to_certificate),
        to_settlement: Percentiles::of(&to_settlement),
    })
}
