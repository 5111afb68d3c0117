//! How long throughput took to recover after each fault.

use super::*;

/// How throughput behaved around one fault.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Recovery {
    /// Mean confirmed/s over the full seconds before the fault (since the previous recovery).
    pub(crate) baseline_tps: f64,
    /// First second at or after the fault below half the baseline (none: no dip).
    pub(crate) dip_second: Option<usize>,
    /// First second after the dip back at half the baseline or more.
    pub(crate) recovered_second: Option<usize>,
    /// From the fault to the start of `recovered_second` (0 without a dip; none if throughput
    /// had not recovered when the load stopped).
    pub(crate) recovery_s: Option<f64>,
}

/// Recovery after each fault (`fault_s`: seconds into the load, ascending), from the confirmed
/// counts per second; only the first `load_seconds` (full) seconds are considered.
pub(crate) fn recoveries(confirmed: &[u64], fault_s: &[f64], load_seconds: usize) -> Vec<Recovery> {
    let limit = load_seconds.min(confirmed.len());
    let mean = |from: usize, to: usize| {
        let bins = &confirmed[from.min(to)..to];
        (!bins.is_empty()).then(|| bins.iter().sum::<u64>() as f64 / bins.len() as f64)
    };
    let mut results: Vec<Recovery> = vec![];
    // Second 0 holds the ramp-up; baselines start after it, and after the previous recovery.
    let mut baseline_from = 1usize;
    for &fault in fault_s {
        let k = fault.max(0.0).floor() as usize;
        let k_limited = k.min(limit);
        let baseline_tps = mean(baseline_from, k_limited)
            .or_else(|| mean(1, k_limited))
            .or_else(|| mean(0, k_limited))
            .unwrap_or(0.0);
        let threshold = RECOVERED_SHARE * baseline_tps;
        let dip_second = (k..(k + DIP_SEARCH_SECONDS).min(limit)).find(|&s| (confirmed[s] as f64) < threshold);
        let (recovered_second, recovery_s) = match dip_second {
            None => (None, Some(0.0)),
            Some(dip) => match (dip + 1..limit).find(|&s| confirmed[s] as f64 >= threshold) {
                Some(m) => (Some(m), Some(m as f64 - fault)),
                None => (None, None),
            },
        };
        baseline_from = match (dip_second, recovered_second) {
            (Some(_), Some(m)) => m,
            (Some(_), None) => limit,
            (None, _) => k + 1,
        };
        results.push(Recovery {
            baseline_tps,
            dip_second,
            recovered_second,
            recovery_s,
        });
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_is_the_first_second_back_above_half_the_baseline() {
        //               0    1     2     3     4     5     6    7    8     9     10    11    12   13    14
        let series = [
            300, 1000, 1000, 1000, 1000, 1000, 900, 100, 400, 800, 1000, 1000, 1000, 200, 1000,
        ];
        let r = recoveries(&series, &[6.4, 12.5], 15);
        assert_eq!(r[0].baseline_tps, 1000.0);
        assert_eq!(r[0].dip_second, Some(7));
        assert_eq!(r[0].recovered_second, Some(9));
        assert!((r[0].recovery_s.unwrap() - 2.6).abs() < 1e-9);
        // The second baseline starts where the first fault recovered: seconds 9..12.
        assert!((r[1].baseline_tps - 2800.0 / 3.0).abs() < 1e-9);
        assert_eq!(r[1].dip_second, Some(13));
        assert_eq!(r[1].recovered_second, Some(14));
        assert!((r[1].recovery_s.unwrap() - 1.5).abs() < 1e-9);

        // No dip: recovered at once. Never recovered: none.
        let flat = [500, 1000, 1000, 1000, 900, 1000];
        assert_eq!(recoveries(&flat, &[3.0], 6)[0].recovery_s, Some(0.0));
        let dead = [500, 1000, 1000, 1000, 0, 0];
        let r = recoveries(&dead, &[3.2], 6);
        assert_eq!((r[0].dip_second, r[0].recovery_s), (Some(4), None));
        // A fault at the very start has only the ramp-up second as baseline.
        assert_eq!(recoveries(&[10, 0, 10], &[1.0], 3)[0].baseline_tps, 10.0);
    }
}
