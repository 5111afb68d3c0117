//! CI's share of the simulation: a few hundred seeds, every invariant checked after every step.
//! `specie sim --seeds N` runs the long soak.

use specie_sim::{run, SimOptions};

#[test]
fn hundreds_of_seeds_hold_every_invariant() {
    let mut confirmed = 0;
    let mut crashes = 0;
    let mut dropped = 0;
    for seed in 0..300 {
        let report = run(SimOptions::from_seed(seed)).unwrap_or_else(|violation| panic!("{violation}"));
        confirmed += report.confirmed;
        crashes += report.crashes;
        dropped += report.messages_dropped;
    }
    // The runs must actually exercise the protocol and its faults, not pass vacuously.
    assert!(
        confirmed > 3_000,
        "only {confirmed} transactions confirmed across all seeds"
    );
    assert!(crashes > 100, "only {crashes} crashes injected");
    assert!(dropped > 1_000, "only {dropped} messages dropped");
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 77, 1234] {
        let first = run(SimOptions::from_seed(seed)).unwrap();
        let second = run(SimOptions::from_seed(seed)).unwrap();
        assert_eq!(first.trace_digest, second.trace_digest, "seed {seed} diverged");
        assert_eq!(
            (first.steps, first.confirmed, first.crashes),
            (second.steps, second.confirmed, second.crashes)
        );
    }
    let other = run(SimOptions::from_seed(4)).unwrap();
    assert_ne!(other.trace_digest, run(SimOptions::from_seed(3)).unwrap().trace_digest);
}

#[test]
fn without_faults_everything_valid_confirms() {
    let mut options = SimOptions::from_seed(9);
    options.faults.drop_per_mille = 0;
    options.faults.duplicate_per_mille = 0;
    options.faults.crash_per_mille = 0;
    let report = run(options).unwrap();
    assert_eq!(report.crashes, 0);
    assert!(report.confirmed > 0 && report.confirmed + report.rejected == report.submitted);
}
