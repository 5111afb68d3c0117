//! The charts' data: every few seconds the console reads each sentinel's (or the node's)
//! `/metrics` and keeps the totals it needs, the last [`SAMPLES_MAX`] of them. A chart is the
//! difference between two samples: transactions answered per second, and their mean latency.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::fetch;
use crate::Console;

/// How many samples are kept (at the default interval of 2 s, six minutes).
pub const SAMPLES_MAX: usize = 180;

/// The totals of every sentinel at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the console started.
    pub at_s: f64,
    /// Transactions answered as confirmed.
    pub confirmed: f64,
    /// Transactions answered otherwise (refused, busy, …).
    pub refused: f64,
    /// The sum and count of the submissions' durations, in seconds.
    pub latency_sum_s: f64,
    pub latency_count: f64,
    /// How many sentinels answered.
    pub answered: usize,
}

/// One point of a chart: seconds since the start, and a value.
pub type Point = (f64, f64);

#[derive(Default)]
pub struct Samples {
    inner: Mutex<VecDeque<Sample>>,
}

impl Samples {
    fn push(&self, sample: Sample) {
        let mut samples = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if samples.len() == SAMPLES_MAX {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// Confirmed and refused transactions per second, and the mean latency in milliseconds,
    /// between each two samples.
    pub fn series(&self) -> (Vec<Point>, Vec<Point>, Vec<Point>) {
        let samples = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut confirmed, mut refused, mut latency) = (vec![], vec![], vec![]);
        for (a, b) in samples.iter().zip(samples.iter().skip(1)) {
            let seconds = b.at_s - a.at_s;
            // A sentinel that restarted starts its counters again: skip the step.
            if seconds <= 0.0 || b.confirmed < a.confirmed || b.answered != a.answered {
                continue;
            }
            confirmed.push((b.at_s, (b.confirmed - a.confirmed) / seconds));
            refused.push((b.at_s, ((b.refused - a.refused) / seconds).max(0.0)));
            let count = b.latency_count - a.latency_count;
            if count > 0.0 {
                latency.push((b.at_s, 1000.0 * (b.latency_sum_s - a.latency_sum_s) / count));
            }
        }
        (confirmed, refused, latency)
    }
}

/// Adds the value of every line of `family` (every label set) in a Prometheus exposition; the
/// lines whose labels contain `only` if it is given, or do not contain it if `except`.
fn total(text: &str, family: &str, only: Option<&str>, except: Option<&str>) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(family)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.split_once('}')?,
                None if rest.starts_with(' ') => ("", rest),
                None => return None,
            };
            let keep = only.is_none_or(|o| labels.contains(o)) && except.is_none_or(|e| !labels.contains(e));
            keep.then(|| value.split_whitespace().next()?.parse::<f64>().ok())?
        })
        .filter(|v| v.is_finite())
        .sum()
}

/// Reads one exposition's totals into `sample`.
pub fn add(sample: &mut Sample, text: &str) {
    const CONFIRMED: &str = "outcome=\"confirmed\"";
    sample.confirmed += total(text, "specie_transactions_finished_total", Some(CONFIRMED), None);
    sample.refused += total(text, "specie_transactions_finished_total", None, Some(CONFIRMED));
    sample.latency_sum_s += total(text, "specie_transactions_submit_duration_seconds_sum", None, None);
    sample.latency_count += total(text, "specie_transactions_submit_duration_seconds_count", None, None);
    sample.answered += 1;
}

/// Samples until the console is dropped, on a thread of its own (the reads block).
pub fn start(console: &Arc<Console>) {
    let weak: Weak<Console> = Arc::downgrade(console);
    let interval = Duration::from_millis(console.config.sample_interval_ms.max(100));
    let started = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("console-sampler".into())
        .spawn(move || loop {
            let Some(console) = weak.upgrade() else { return };
            let mut sample = Sample {
                at_s: started.elapsed().as_secs_f64(),
                ..Sample::default()
            };
            for (_, url) in console.config.source.api_urls().unwrap_or_default() {
                if let Ok(text) = fetch::text(&format!("{url}/metrics")) {
                    add(&mut sample, &text);
                }
            }
            console.samples.push(sample);
            drop(console);
            std::thread::sleep(interval);
        });
    if let Err(error) = spawned {
        tracing::error!("the console's charts have no data: cannot start the sampler ({error})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPOSITION: &str = "\
# HELP specie_transactions_finished_total Transactions answered
# TYPE specie_transactions_finished_total counter
specie_transactions_finished_total{outcome=\"confirmed\",code=\"\"} 120
specie_transactions_finished_total{outcome=\"invalid\",code=\"bad_signature\"} 3
specie_transactions_finished_total{outcome=\"rejected\",code=\"output_already_exists\"} 2
specie_transactions_finished_totalx 99
specie_transactions_submit_duration_seconds_sum 6
specie_transactions_submit_duration_seconds_count 120
";

    #[test]
    fn totals_by_outcome_and_the_rates_between_samples() {
        let mut first = Sample::default();
        add(&mut first, EXPOSITION);
        assert_eq!((first.confirmed, first.refused, first.answered), (120.0, 5.0, 1));
        let samples = Samples::default();
        samples.push(first);
        let later = EXPOSITION
            .replace("} 120", "} 220")
            .replace("_sum 6", "_sum 8")
            .replace("count 120", "count 220");
        let mut second = Sample {
            at_s: 2.0,
            ..Sample::default()
        };
        add(&mut second, &later);
        samples.push(second);
        let (confirmed, refused, latency) = samples.series();
        assert_eq!(confirmed, vec![(2.0, 50.0)]);
        assert_eq!(refused, vec![(2.0, 0.0)]);
        assert_eq!(latency, vec![(2.0, 20.0)]);
    }

    #[test]
    fn a_restarted_sentinel_is_not_a_negative_rate_and_at_most_the_last_samples_are_kept() {
        let samples = Samples::default();
        for (i, confirmed) in [10.0, 5.0].into_iter().enumerate() {
            samples.push(Sample {
                at_s: i as f64,
                confirmed,
                answered: 1,
                ..Sample::default()
            });
        }
        assert!(samples.series().0.is_empty());
        for i in 0..SAMPLES_MAX + 10 {
            samples.push(Sample {
                at_s: i as f64,
                ..Sample::default()
            });
        }
        assert_eq!(samples.series().0.len(), SAMPLES_MAX - 1);
    }
}
