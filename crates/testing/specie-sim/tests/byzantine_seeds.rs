//! CI's share of the Byzantine-mode simulation: a FastPay committee of 4 authorities (one of them
//! Byzantine in most seeds) × 2–3 shards of the real authority role, correct and Byzantine users,
//! crashes and restarts from the shards' logs, and a network that drops, duplicates, delays and
//! reorders, with every invariant checked after every step. `specie sim --seeds N` runs the long
//! soak.

use specie_sim::{run_byzantine, AuthorityBehaviour, ByzantineOptions, ByzantineReport};

#[test]
fn hundreds_of_byzantine_seeds_hold_every_invariant() {
    let mut t = ByzantineReport::default();
    let mut behaviours = std::collections::BTreeSet::new();
    for seed in 0..300 {
        let options = ByzantineOptions::from_seed(seed);
        if let Some((_, behaviour)) = options.byzantine_authority {
            behaviours.insert(format!("{behaviour:?}"));
        }
        let r = run_byzantine(options).unwrap_or_else(|violation| panic!("{violation}"));
        t.payments += r.payments;
        t.redeems += r.redeems;
        t.byzantine_certificates += r.byzantine_certificates;
        t.equivocations += r.equivocations;
        t.double_votes += r.double_votes;
        t.forged_votes_ignored += r.forged_votes_ignored;
        t.false_answers_ignored += r.false_answers_ignored;
        t.forged_certificates_refused += r.forged_certificates_refused;
        t.replays += r.replays;
        t.forged_credits_refused += r.forged_credits_refused;
        t.corrupt_channel_messages += r.corrupt_channel_messages;
        t.channel_violations_reported += r.channel_violations_reported;
        t.missing_earlier += r.missing_earlier;
        t.channel_full += r.channel_full;
        t.inputs_before_durable += r.inputs_before_durable;
        t.crashes += r.crashes;
        t.snapshots += r.snapshots;
        t.messages_dropped += r.messages_dropped;
        t.messages_duplicated += r.messages_duplicated;
    }
    // The runs must exercise the protocol, its attacks and its faults, not pass vacuously.
    assert_eq!(behaviours.len(), 4, "every Byzantine behaviour ran: {behaviours:?}");
    let expected = [
        ("payments settled everywhere", t.payments, 4_000),
        ("redeems", t.redeems, 500),
        ("equivocations", t.equivocations, 200),
        ("Byzantine certificates", t.byzantine_certificates, 150),
        ("double votes held as evidence", t.double_votes, 100),
        ("forged votes ignored", t.forged_votes_ignored, 400),
        ("false answers ignored", t.false_answers_ignored, 200),
        ("forged certificates refused", t.forged_certificates_refused, 100),
        ("replays", t.replays, 1_000),
        ("forged credits refused by the transport", t.forged_credits_refused, 300),
        ("malformed channel messages", t.corrupt_channel_messages, 500),
        ("channel violations reported", t.channel_violations_reported, 500),
        ("catch-ups after MissingEarlier", t.missing_earlier, 100),
        ("confirmations refused while a channel was full", t.channel_full, 20),
        (
            "inputs taken before earlier commands were durable",
            t.inputs_before_durable,
            1_000,
        ),
        ("crashes", t.crashes, 500),
        ("snapshots", t.snapshots, 1_500),
        ("messages dropped", t.messages_dropped, 3_000),
        ("messages duplicated", t.messages_duplicated, 3_000),
    ];
    for (what, count, least) in expected {
        assert!(count > least, "only {count} {what} in 300 seeds: {t:?}");
    }
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
