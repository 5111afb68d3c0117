//! CI's share of the privacy capability's simulation: FROST threshold endorsement with
//! compromised endorsers on a network that drops, duplicates, delays and reorders messages, and
//! the ledger of record reconciled by the UHS after crashes. A seed replays bit for bit, and a
//! planted bug (a restart that does not reconcile the records written ahead) is caught.
//! `specie sim --world privacy --seeds N` runs the long soak.

use specie_sim::{run_privacy, PrivacyOptions, PrivacyReport};

const CI_SEEDS: u64 = 64;

#[test]
fn privacy_seeds_hold_every_invariant_and_exercise_every_fault() {
    let mut t = PrivacyReport::default();
    for seed in 0..CI_SEEDS {
        let r = run_privacy(PrivacyOptions::from_seed(seed)).unwrap_or_else(|violation| panic!("{violation}"));
        t.endorsed += r.endorsed;
        t.forged_refused += r.forged_refused;
        t.endorsement_failures += r.endorsement_failures;
        t.resubmitted += r.resubmitted;
        t.messages_dropped += r.messages_dropped;
        t.messages_duplicated += r.messages_duplicated;
        t.endorser_restarts += r.endorser_restarts;
        t.committed += r.committed;
        t.refused += r.refused;
        t.lost_in_crash += r.lost_in_crash;
        t.blocks += r.blocks;
        t.crashes += r.crashes;
        t.reconciled += r.reconciled;
    }
    assert!(t.endorsed > 0 && t.forged_refused > 0, "{t:?}");
    assert!(
        t.endorsement_failures > 0 && t.resubmitted > 0,
        "failed, then endorsed once healed: {t:?}"
    );
    assert!(
        t.messages_dropped > 0 && t.messages_duplicated > 0 && t.endorser_restarts > 0,
        "{t:?}"
    );
    assert!(t.committed > 0 && t.refused > 0 && t.blocks > 0, "{t:?}");
    assert!(t.crashes > 0 && t.lost_in_crash > 0, "{t:?}");
    assert!(
        t.reconciled > 0,
        "recoveries found committed transactions whose outcome was lost: {t:?}"
    );
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let first = run_privacy(PrivacyOptions::from_seed(7)).unwrap();
    let second = run_privacy(PrivacyOptions::from_seed(7)).unwrap();
    assert_eq!(first, second);
    assert!(first.endorsed > 0 && first.blocks > 0);
}

#[test]
fn the_world_catches_a_restart_that_does_not_reconcile_the_records_written_ahead() {
    let caught = (0..20).find_map(|seed| {
        let options = PrivacyOptions {
            skip_reconciliation: true,
            ..PrivacyOptions::from_seed(seed)
        };
        run_privacy(options).err()
    });
    let violation = caught.expect("committed transactions whose outcome a crash lost never reach a block");
    assert!(violation.message.contains("in no block after recovery"), "{violation}");
}

/// The endorsement checks can fail: with k compromised endorsers (beyond what the world draws),
/// a forgery gathers k shares and the world reports it.
#[test]
fn the_world_catches_a_forgery_endorsed_by_a_compromised_quorum() {
    let caught = (0..20).find_map(|seed| {
        let options = PrivacyOptions::from_seed(seed);
        let options = PrivacyOptions {
            compromised: options.threshold,
            ..options
        };
        run_privacy(options).err()
    });
    let violation = caught.expect("k compromised endorsers endorse a forgery");
    assert!(violation.message.contains("forged transaction"), "{violation}");
}
