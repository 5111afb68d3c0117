//! CI's share of the Byzantine-mode simulation: a FastPay committee of 4 authorities (one of them
//! Byzantine in most seeds) × 2–3 shards of the real authority role, correct and Byzantine users,
//! crashes and restarts from the shards' logs, and a network that drops, duplicates, delays and
//! reorders, with every invariant checked after every step. `specie sim --seeds N` runs the long
//! soak.

use specie_sim::{run_byzantine, AuthorityBehaviour, ByzantineOptions};

#[test]
fn hundreds_of_byzantine_seeds_hold_every_invariant() {
    let mut totals = specie_sim::ByzantineReport::default();
    let mut behaviours = std::collections::BTreeSet::new();
    for seed in 0..300 {
        let options = ByzantineOptions::from_seed(seed);
        if let Some((_, behaviour)) = options.byzantine_authority {
            behaviours.insert(format!("{behaviour:?}"));
        }
        let r = run_byzantine(options).unwrap_or_else(|violation| panic!("{violation}"));
        totals.payments += r.payments;
        totals.redeems += r.redeems;
        totals.byzantine_certificates += r.byzantine_certificates;
        totals.equivocations += r.equivocations;
        totals.forged_votes_ignored += r.forged_votes_ignored;
        totals.false_answers_ignored += r.false_answers_ignored;
        totals.forged_certificates_refused += r.forged_certificates_refused;
        totals.replays += r.replays;
        totals.double_votes += r.double_votes;
        totals.corrupt_channel_messages += r.corrupt_channel_messages;
        totals.messages_duplicated += r.messages_duplicated;
        totals.forged_credits_refused += r.forged_credits_refused;
        totals.channel_violations_reported += r.channel_violations_reported;
        totals.missing_earlier += r.missing_earlier;
        totals.crashes += r.crashes;
        totals.snapshots += r.snapshots;
        totals.messages_dropped += r.messages_dropped;
    }
    let t = &totals;
    // The runs must exercise the protocol, its attacks and its faults, not pass vacuously.
    assert_eq!(behaviours.len(), 4, "every Byzantine behaviour ran: {behaviours:?}");
    assert!(
        t.payments > 3_000 && t.redeems > 300,
        "{} payments, {} redeems",
        t.payments,
        t.redeems
    );
    assert!(
        t.equivocations > 100 && t.byzantine_certificates > 100,
        "{} equivocations, {} Byzantine certificates",
        t.equivocations,
        t.byzantine_certificates
    );
    assert!(
        t.forged_votes_ignored > 400 && t.false_answers_ignored > 200,
        "{} forged votes, {} false answers",
        t.forged_votes_ignored,
        t.false_answers_ignored
    );
    assert!(
        t.forged_certificates_refused > 100 && t.replays > 1_000 && t.forged_credits_refused > 300,
        "{} forged certificates refused, {} replays, {} forged credits",
        t.forged_certificates_refused,
        t.replays,
        t.forged_credits_refused
    );
    assert!(
        t.channel_violations_reported > 20,
        "{} channel violations",
        t.channel_violations_reported
    );
    assert!(t.missing_earlier > 100, "{} catch-ups", t.missing_earlier);
    assert!(
        t.crashes > 300 && t.snapshots > 1_000 && t.messages_dropped > 1_000,
        "{} crashes, {} snapshots, {} dropped",
        t.crashes,
        t.snapshots,
        t.messages_dropped
    );
}

#[test]
fn a_byzantine_seed_replays_exactly() {
    for seed in [7, 1234] {
        let first = run_byzantine(ByzantineOptions::from_seed(seed)).unwrap();
        let second = run_byzantine(ByzantineOptions::from_seed(seed)).unwrap();
        assert_eq!(first.trace_digest, second.trace_digest, "seed {seed} diverged");
        assert_eq!(
            (first.steps, first.payments, first.crashes),
            (second.steps, second.payments, second.crashes)
        );
    }
    let other = run_byzantine(ByzantineOptions::from_seed(8)).unwrap();
    assert_ne!(
        other.trace_digest,
        run_byzantine(ByzantineOptions::from_seed(7)).unwrap().trace_digest
    );
}

#[test]
fn without_faults_or_byzantine_parties_every_payment_settles() {
    let mut options = ByzantineOptions::from_seed(11);
    options.byzantine_authority = None;
    options.byzantine_users = 0;
    options.faults.drop_per_mille = 0;
    options.faults.duplicate_per_mille = 0;
    options.faults.crash_per_mille = 0;
    options.faults.corrupt_channel_per_mille = 0;
    let payments = options.payments as u64;
    let report = run_byzantine(options).unwrap_or_else(|violation| panic!("{violation}"));
    assert_eq!((report.payments, report.crashes), (payments, 0));
}

#[test]
fn a_withholding_authority_and_a_crash_prone_committee_still_settle_every_payment() {
    for seed in 0..10 {
        let mut options = ByzantineOptions::from_seed(seed);
        options.byzantine_authority = Some((seed as u16 % 4, AuthorityBehaviour::Withholds));
        options.faults.crash_per_mille = 20;
        let payments = options.payments as u64;
        let report = run_byzantine(options).unwrap_or_else(|violation| panic!("{violation}"));
        assert_eq!(report.payments, payments, "seed {seed}");
    }
}
