//! CI's share of the replication simulation: real Raft replicas (openraft, the log store,
//! snapshots) under crashes, whole-group restarts, partitions and a network that drops,
//! duplicates, delays and reorders, with every invariant checked after every step.
//! `specie sim --seeds N` runs the long soak.

use specie_sim::{run_replication, ReplicationOptions};

#[test]
fn two_hundred_seeds_hold_every_invariant() {
    let (mut elections, mut acknowledged, mut crashes, mut full_restarts, mut dropped, mut duplicated) =
        (0, 0, 0, 0, 0, 0);
    for seed in 0..200 {
        let report = run_replication(ReplicationOptions::from_seed(seed)).unwrap_or_else(|v| panic!("{v}"));
        elections += report.term.saturating_sub(1);
        acknowledged += report.acknowledged;
        crashes += report.crashes;
        full_restarts += report.full_restarts;
        dropped += report.messages_dropped;
        duplicated += report.messages_duplicated;
    }
    // The runs must exercise failover, restarts and the network's faults, not pass vacuously.
    assert!(acknowledged > 10_000, "only {acknowledged} commands acknowledged");
    assert!(elections > 50, "only {elections} elections after the first");
    assert!(crashes > 300, "only {crashes} crashes");
    assert!(full_restarts > 30, "only {full_restarts} whole-group restarts");
    assert!(
        dropped > 1_000 && duplicated > 1_000,
        "{dropped} dropped, {duplicated} duplicated"
    );
}

#[test]
fn a_replication_seed_replays_exactly() {
    for seed in [3, 77, 1234] {
        let first = run_replication(ReplicationOptions::from_seed(seed)).unwrap();
        let second = run_replication(ReplicationOptions::from_seed(seed)).unwrap();
        assert_eq!(first.trace_digest, second.trace_digest, "seed {seed} diverged");
        assert_eq!(
            (first.acknowledged, first.term, first.applied),
            (second.acknowledged, second.term, second.applied)
        );
    }
    let other = run_replication(ReplicationOptions::from_seed(4)).unwrap();
    assert_ne!(
        other.trace_digest,
        run_replication(ReplicationOptions::from_seed(3)).unwrap().trace_digest
    );
}
