//! CI's share of the atomizer's simulation: the real atomizer and UHS shard roles over a lossy,
//! duplicating, reordering network, crashing and restarting from their logs, with double spends
//! and replayed mints among valid spends; every block against a model UHS, every answer against
//! the blocks, every shard against the model, and liveness once healed. A seed replays bit for
//! bit; an atomizer fed attestations replayed across its restarts stays safe, and a lying shard
//! is caught. `specie sim --world atomizer --seeds N` runs the long soak.

use specie_sim::{run_atomizer, AtomizerPlantedFault, AtomizerWorldOptions, AtomizerWorldReport};

const CI_SEEDS: u64 = 150;

fn run_seed(seed: u64, planted: AtomizerPlantedFault) -> Result<AtomizerWorldReport, specie_sim::Violation> {
    run_atomizer(AtomizerWorldOptions {
        planted,
        ..AtomizerWorldOptions::from_seed(seed)
    })
}

#[test]
fn atomizer_seeds_hold_every_invariant_and_exercise_every_fault() {
    let mut t = AtomizerWorldReport::default();
    for seed in 0..CI_SEEDS {
        let r = run_seed(seed, AtomizerPlantedFault::None).unwrap_or_else(|violation| panic!("{violation}"));
        t.blocks += r.blocks;
        t.submitted += r.submitted;
        t.confirmed += r.confirmed;
        t.rejected += r.rejected;
        t.dropped += r.dropped;
        t.busy += r.busy;
        t.lost_to_crashes += r.lost_to_crashes;
        t.double_spends += r.double_spends;
        t.replayed_mints += r.replayed_mints;
        t.stale_attestations += r.stale_attestations;
        t.resends += r.resends;
        t.healed_confirmed += r.healed_confirmed;
        t.atomizer_crashes += r.atomizer_crashes;
        t.shard_crashes += r.shard_crashes;
        t.messages_dropped += r.messages_dropped;
        t.messages_duplicated += r.messages_duplicated;
        t.rounds_attested += r.rounds_attested;
        t.blocks_finished += r.blocks_finished;
        t.transactions_finished += r.transactions_finished;
    }
    assert!(
        t.submitted > 0 && t.blocks > 0 && t.confirmed > 0 && t.rejected > 0,
        "{t:?}"
    );
    assert!(t.double_spends > 0 && t.replayed_mints > 0, "{t:?}");
    assert!(t.stale_attestations > 0 && t.dropped > 0 && t.busy > 0, "{t:?}");
    assert!(t.resends > 0 && t.healed_confirmed > 0, "{t:?}");
    assert!(
        t.atomizer_crashes > 0 && t.shard_crashes > 0 && t.lost_to_crashes > 0,
        "{t:?}"
    );
    assert!(t.messages_dropped > 0 && t.messages_duplicated > 0, "{t:?}");
    // The leader reports its rounds and the blocks it confirmed (a block whose leader crashed
    // before every shard applied it is not reported).
    assert!(t.rounds_attested > 0, "{t:?}");
    assert!(t.blocks_finished > 0 && t.blocks_finished <= t.blocks, "{t:?}");
    assert!(t.transactions_finished > 0, "{t:?}");
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let first = run_seed(7, AtomizerPlantedFault::None).unwrap();
    let second = run_seed(7, AtomizerPlantedFault::None).unwrap();
    assert_eq!(first, second);
    assert!(first.blocks > 0);
}

/// Hostile input, not a bug: attestations an earlier incarnation heard, delivered again after
/// every restart, answer rounds the new incarnation never asked, so it must stay safe.
#[test]
fn attestations_replayed_across_restarts_change_nothing() {
    let mut restarts = 0;
    for seed in 0..CI_SEEDS / 2 {
        let r =
            run_seed(seed, AtomizerPlantedFault::ReplayAttestations).unwrap_or_else(|violation| panic!("{violation}"));
        restarts += r.atomizer_crashes;
    }
    assert!(restarts > 0, "no atomizer restarted, so nothing was replayed");
}

/// A bug in the trust model's terms: a shard that attests every id present makes the atomizer
/// seal double spends, and the world must catch them.
#[test]
fn the_world_catches_a_shard_that_lies_about_its_ids() {
    let caught = (0..CI_SEEDS).find_map(|seed| run_seed(seed, AtomizerPlantedFault::LyingShard).err());
    let violation = caught.expect("a lying shard lets a double spend through");
    let message = &violation.message;
    assert!(
        message.contains("not in the UHS") || message.contains("spent twice") || message.contains("reported"),
        "{violation}"
    );
}
