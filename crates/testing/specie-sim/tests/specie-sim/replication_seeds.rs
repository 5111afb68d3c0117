//! CI's share of the replication simulation: real Raft replicas (openraft, the log store,
//! snapshots) under crashes, whole-group restarts, partitions, membership changes, lost
//! directories and a network that drops, duplicates, delays and reorders, with every invariant
//! checked after every step. `specie sim --seeds N` runs the long soak.

use specie_sim::{run_replication, ReplicationOptions};

#[test]
fn two_hundred_seeds_hold_every_invariant() {
    let (mut elections, mut acknowledged, mut crashes, mut full_restarts, mut dropped, mut duplicated) =
        (0, 0, 0, 0, 0, 0);
    let (mut joined, mut left, mut wiped) = (0, 0, 0);
    for seed in 0..200 {
        let report = run_replication(ReplicationOptions::from_seed(seed)).unwrap_or_else(|v| panic!("{v}"));
        elections += report.term.saturating_sub(1);
        acknowledged += report.acknowledged;
        crashes += report.crashes;
        full_restarts += report.full_restarts;
        dropped += report.messages_dropped;
        duplicated += report.messages_duplicated;
        (joined, left, wiped) = (joined + report.joined, left + report.left, wiped + report.wiped);
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
    assert!(
        joined > 100 && left > 100 && wiped > 20,
        "{joined} replicas joined, {left} left, {wiped} wiped"
    );
}

/// The planted bug: a replica whose directory was lost restarts under its old id as a founder
/// (what `Start::Prepared` refuses). Having forgotten its votes and its log, its vote can elect
/// a leader that lacks acknowledged commands; the world must see it on some seeds, and the same
/// seeds must pass without the bug.
#[test]
fn a_wiped_replica_voting_under_its_old_id_is_caught() {
    let mut caught = vec![];
    for seed in 0..60 {
        let mut options = ReplicationOptions::from_seed(seed);
        options.faults.wipe_per_mille = 40;
        options.faults.membership_per_mille = 0;
        let planted = ReplicationOptions {
            planted_wiped_rejoin: true,
            ..options.clone()
        };
        if let Err(violation) = run_replication(planted) {
            run_replication(options).unwrap_or_else(|v| panic!("without the planted bug: {v}"));
            caught.push((seed, violation.message));
            if caught.len() == 3 {
                eprintln!("caught: {caught:?}");
                return;
            }
        }
    }
    panic!("the planted bug was caught on only {} seeds: {caught:?}", caught.len());
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
