//! CI's share of the offline-cash simulation: devices paying each other offline in random
//! topologies, cheaters keeping copies of what they pay, replays, late syncs, lost answers,
//! authority crashes, and the key lifecycle (rotations, revocations, tokens expiring), direct
//! hand-overs with change (links cut, sides vanishing, hostile messages), with the authority's invariants checked after every step and, once every
//! device has synced, conservation and debts exactly as the model says. `specie sim --seeds N`
//! runs the long soak.

use std::sync::OnceLock;

use specie_sim::{run_offline, OfflineOptions, OfflineReport};

/// The seeds CI runs.
const CI_SEEDS: u64 = 300;

fn ci_reports() -> &'static [OfflineReport] {
    static REPORTS: OnceLock<Vec<OfflineReport>> = OnceLock::new();
    REPORTS.get_or_init(|| {
        (0..CI_SEEDS)
            .map(|seed| run_offline(OfflineOptions::from_seed(seed)).unwrap_or_else(|violation| panic!("{violation}")))
            .collect()
    })
}

#[test]
fn hundreds_of_offline_seeds_hold_every_invariant_and_exercise_every_fault() {
    let mut t = OfflineReport::default();
    for r in ci_reports() {
        t.payments += r.payments;
        t.copies_kept += r.copies_kept;
        t.replays_refused += r.replays_refused;
        t.revoked_refused += r.revoked_refused;
        t.hop_limit_reached += r.hop_limit_reached;
        t.deposits += r.deposits;
        t.deposits_resent += r.deposits_resent;
        t.answers_lost += r.answers_lost;
        t.double_spends_refused += r.double_spends_refused;
        t.debtors += r.debtors;
        t.crashes += r.crashes;
        t.syncs_while_down += r.syncs_while_down;
        t.rotations += r.rotations;
        t.keys_revoked += r.keys_revoked;
        t.expired_refused += r.expired_refused;
        t.hand_overs += r.hand_overs;
        t.hand_overs_completed += r.hand_overs_completed;
        t.hand_overs_with_change += r.hand_overs_with_change;
        t.hand_overs_cut += r.hand_overs_cut;
        t.hand_overs_vanished += r.hand_overs_vanished;
        t.hand_overs_refused += r.hand_overs_refused;
        t.hand_overs_not_payable += r.hand_overs_not_payable;
        t.hostile_refused += r.hostile_refused;
        t.late_payments_refused += r.late_payments_refused;
        t.tokens_in_limbo += r.tokens_in_limbo;
    }
    println!("{CI_SEEDS} offline seeds: {t:?}");
    // The seeds must reach every path the checks are about, or passing them means little.
    let exercised = [
        ("payments", t.payments),
        ("copies kept", t.copies_kept),
        ("replays refused", t.replays_refused),
        ("revoked tokens refused", t.revoked_refused),
        ("hop limits reached", t.hop_limit_reached),
        ("deposits resent", t.deposits_resent),
        ("answers lost", t.answers_lost),
        ("double spends refused", t.double_spends_refused),
        ("authority crashes", t.crashes),
        ("syncs while the authority was down", t.syncs_while_down),
        ("key rotations", t.rotations),
        ("key revocations", t.keys_revoked),
        ("deposits refused past their key's deposit window", t.expired_refused),
        ("direct hand-overs completed", t.hand_overs_completed),
        ("direct hand-overs with change", t.hand_overs_with_change),
        ("direct hand-overs cut on the link", t.hand_overs_cut),
        ("direct hand-overs where a side vanished", t.hand_overs_vanished),
        ("direct hand-overs refused", t.hand_overs_refused),
        (
            "direct hand-overs of an amount that could not be made",
            t.hand_overs_not_payable,
        ),
        ("hostile messages refused", t.hostile_refused),
        ("lost payments refused late", t.late_payments_refused),
        ("tokens in limbo", t.tokens_in_limbo),
    ];
    for (what, count) in exercised {
        assert!(count > 0, "no seed exercised {what}: {t:?}");
    }
}

#[test]
fn an_offline_seed_replays_exactly() {
    for seed in [3, 141] {
        let first = run_offline(OfflineOptions::from_seed(seed)).unwrap();
        let again = run_offline(OfflineOptions::from_seed(seed)).unwrap();
        assert_eq!(first, again, "seed {seed}");
    }
}
