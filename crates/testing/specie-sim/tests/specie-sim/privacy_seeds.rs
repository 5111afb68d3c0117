//! CI's share of the privacy capability's simulation: FROST threshold endorsement with
//! compromised endorsers on a network that drops, duplicates, delays and reorders messages, the
//! ledger of record reconciled by the UHS after crashes, and the replicated archiver role behind
//! the ordering leader's gate, with forging sentinels and ordering leaders that die before
//! reporting. A seed replays bit for bit, and planted bugs (a restart that does not reconcile the
//! records written ahead; a leader's driver that hands back no evidence; an ordering leader that
//! skips the gate) are caught. The unlinkable level's certification: no certificate for a token
//! the ledger never held, and every second spend meets its serial number.
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
        t.archiver_committed += r.archiver_committed;
        t.archiver_refused += r.archiver_refused;
        t.archiver_not_written += r.archiver_not_written;
        t.archiver_outcomes_lost += r.archiver_outcomes_lost;
        t.archiver_forgeries_refused += r.archiver_forgeries_refused;
        t.archiver_settled_committed += r.archiver_settled_committed;
        t.archiver_settled_not_committed += r.archiver_settled_not_committed;
        t.archiver_evidence_rounds += r.archiver_evidence_rounds;
        t.archiver_blocks += r.archiver_blocks;
        t.archiver_crashes += r.archiver_crashes;
        t.certificates += r.certificates;
        t.certification_retries += r.certification_retries;
        t.uncertified_refused += r.uncertified_refused;
        t.double_spends_refused += r.double_spends_refused;
    }
    assert!(
        t.certificates > 0 && t.certification_retries > 0 && t.uncertified_refused > 0 && t.double_spends_refused > 0,
        "tokens certified (after retries), forged requests refused, second spends met: {t:?}"
    );
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
    assert!(
        t.archiver_committed > 0 && t.archiver_refused > 0 && t.archiver_blocks > 0,
        "{t:?}"
    );
    assert!(
        t.archiver_crashes > 0 && t.archiver_not_written > 0 && t.archiver_outcomes_lost > 0,
        "{t:?}"
    );
    assert!(
        t.archiver_forgeries_refused > 0,
        "compromised sentinels' forgeries met the ledger's gate: {t:?}"
    );
    assert!(
        t.archiver_evidence_rounds > 0 && t.archiver_settled_committed > 0 && t.archiver_settled_not_committed > 0,
        "the UHS decided records no ordering leader reported, both ways: {t:?}"
    );
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let first = run_privacy(PrivacyOptions::from_seed(7)).unwrap();
    let second = run_privacy(PrivacyOptions::from_seed(7)).unwrap();
    assert_eq!(first, second);
    assert!(first.endorsed > 0 && first.blocks > 0);
}

/// The first violation the world reports over the first `seeds` seeds, each with a bug planted
/// by `plant`.
fn first_caught(seeds: u64, plant: impl Fn(PrivacyOptions) -> PrivacyOptions) -> Option<specie_sim::Violation> {
    (0..seeds).find_map(|seed| run_privacy(plant(PrivacyOptions::from_seed(seed))).err())
}

#[test]
fn the_world_catches_a_restart_that_does_not_reconcile_the_records_written_ahead() {
    let caught = first_caught(20, |options| PrivacyOptions {
        skip_reconciliation: true,
        ..options
    });
    let violation = caught.expect("committed transactions whose outcome a crash lost never reach a block");
    assert!(violation.message.contains("in no block after recovery"), "{violation}");
}

#[test]
fn the_world_catches_an_archiver_driver_that_hands_back_no_evidence() {
    let caught = first_caught(10, |options| PrivacyOptions {
        archiver_ignores_evidence: true,
        ..options
    });
    let violation = caught.expect("committed transactions no ordering leader reported never reach a block");
    assert!(violation.message.contains("replicated archiver"), "{violation}");
    assert!(violation.message.contains("in no block once settled"), "{violation}");
}

/// The ledger's gate is what keeps a compromised sentinel's forgery out of the core: without it,
/// the UHS commits what the ledger of record never holds.
#[test]
fn the_world_catches_an_ordering_leader_that_skips_the_ledgers_gate() {
    let caught = first_caught(10, |options| PrivacyOptions {
        ordering_skips_ledger_gate: true,
        ..options
    });
    let violation = caught.expect("a forgery ordered without the gate is committed and missing from the ledger");
    assert!(violation.message.contains("replicated archiver"), "{violation}");
    assert!(violation.message.contains("in no block once settled"), "{violation}");
}

/// Seeds that caught bugs of the archiver role (`specie_archiver::Archiver`) before they were
/// fixed, with the options that exposed them (options the seeds alone leave at safe values).
mod archiver_role_regressions {
    use super::*;

    fn holds(options: PrivacyOptions) {
        if let Err(violation) = run_privacy(options) {
            panic!("{violation}");
        }
    }

    /// Stale records were asked about in txid order from the first, `batch_records_max` at a
    /// time; a record whose created ids an unasked undecided record spends is left open, so when
    /// the first batch was all such records the same batch was asked forever and the spenders
    /// never were. Questions now go on from where the last one stopped.
    #[test]
    fn every_stale_record_is_decided_when_the_stale_outnumber_a_batch() {
        holds(PrivacyOptions {
            archiver_batch_records_max: 2,
            ..PrivacyOptions::from_seed(51)
        });
    }

    /// Committed records whose parent's outcome was lost filled the waiting room; the parent,
    /// once the UHS decided it, was refused a place (`WaitingRoomFull`) and went back to
    /// undecided, and nothing in the room could be sealed without it (nor was it asked about
    /// again: it had no `first_seen_ms`). Admission now counts the waiting room, which is never
    /// smaller than `undecided_max`.
    #[test]
    fn a_full_waiting_room_drains() {
        holds(PrivacyOptions {
            archiver_waiting_records_max: 40,
            ..PrivacyOptions::from_seed(2)
        });
    }
}

/// The endorsement checks can fail: with k compromised endorsers (beyond what the world draws),
/// a forgery gathers k shares and the world reports it.
#[test]
fn the_world_catches_a_forgery_endorsed_by_a_compromised_quorum() {
    let caught = first_caught(20, |options| PrivacyOptions {
        compromised: options.threshold,
        ..options
    });
    let violation = caught.expect("k compromised endorsers endorse a forgery");
    assert!(violation.message.contains("forged transaction"), "{violation}");
}
