//! CI's share of the Byzantine-mode simulation: a FastPay committee of 4 authorities (one of them
//! Byzantine in most seeds) × 2–3 shards of the real authority role, correct and Byzantine users,
//! crashes and restarts from the shards' logs, and a network that drops, duplicates, delays and
//! reorders, with every invariant checked after every step. `specie sim --seeds N` runs the long
//! soak.

use std::sync::OnceLock;

use specie_sim::{run_byzantine, AuthorityBehaviour, ByzantineOptions, ByzantineReport};

/// The seeds CI runs.
const CI_SEEDS: u64 = 300;

/// Every CI seed's report, run once and shared by the tests that read them (a violation fails
/// the first test to ask, with its seed).
fn ci_reports() -> &'static [(ByzantineOptions, ByzantineReport)] {
    static REPORTS: OnceLock<Vec<(ByzantineOptions, ByzantineReport)>> = OnceLock::new();
    REPORTS.get_or_init(|| {
        (0..CI_SEEDS)
            .map(|seed| {
                let options = ByzantineOptions::from_seed(seed);
                let report = run_byzantine(options.clone()).unwrap_or_else(|violation| panic!("{violation}"));
                (options, report)
            })
            .collect()
    })
}

#[test]
fn hundreds_of_byzantine_seeds_hold_every_invariant() {
    let mut t = ByzantineReport::default();
    let mut behaviours = std::collections::BTreeSet::new();
    for (options, r) in ci_reports() {
        if let Some((_, behaviour)) = options.byzantine_authority {
            behaviours.insert(format!("{behaviour:?}"));
        }
        t.payments += r.payments;
        t.redeems += r.redeems;
        t.byzantine_certificates += r.byzantine_certificates;
        t.equivocations += r.equivocations;
        t.commit_certificates += r.commit_certificates;
        t.recovery_rounds_used += r.recovery_rounds_used;
        t.double_votes += r.double_votes;
        t.forged_votes_ignored += r.forged_votes_ignored;
        t.false_answers_ignored += r.false_answers_ignored;
        t.forged_certificates_refused += r.forged_certificates_refused;
        t.forged_round_requests_refused += r.forged_round_requests_refused;
        t.broken_promises += r.broken_promises;
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
        (
            "final certificates of commit votes (slow path or recovery)",
            t.commit_certificates,
            100,
        ),
        ("payments final in a recovery round", t.recovery_rounds_used, 50),
        ("double votes held as evidence", t.double_votes, 100),
        ("broken promises held as evidence", t.broken_promises, 10),
        ("forged votes ignored", t.forged_votes_ignored, 400),
        ("false answers ignored", t.false_answers_ignored, 200),
        ("forged certificates refused", t.forged_certificates_refused, 70),
        ("forged round requests refused", t.forged_round_requests_refused, 150),
        ("replays", t.replays, 1_000),
        ("forged credits refused by the transport", t.forged_credits_refused, 300),
        ("malformed channel messages", t.corrupt_channel_messages, 500),
        ("channel violations reported", t.channel_violations_reported, 500),
        // Fewer than before the recovery rounds: a payment takes the slow path whenever one
        // authority is slow or faulty, so confirmations more often land before the next one.
        ("catch-ups after MissingEarlier", t.missing_earlier, 40),
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
        assert!(count > least, "only {count} {what} in {CI_SEEDS} seeds: {t:?}");
    }
}

/// The acceptance point of the recovery rounds: an owner who signed two orders for one sequence
/// number and split the committee between them regains its account within bounded time. Every
/// such slot of every CI seed ends final (one of its orders) and confirmed by a quorum, those
/// still open when faults stopped within `recovery_ms_max` of it, and the account moves on.
#[test]
fn an_owner_who_equivocated_regains_the_account_within_bounded_time() {
    let (mut split, mut recovered, mut after_heal) = (0, 0, 0);
    for (options, r) in ci_reports() {
        assert_eq!(
            r.recovered_slots, r.equivocations,
            "seed {}: every split slot ends with a final certificate",
            options.seed
        );
        assert!(
            r.recovery_after_heal_ms_max <= options.recovery_ms_max,
            "seed {}: a split slot took {} ms after faults stopped",
            options.seed,
            r.recovery_after_heal_ms_max
        );
        split += r.equivocations;
        recovered += r.recovered_slots;
        after_heal += r.recovered_after_heal;
    }
    assert!(
        recovered > 100,
        "only {recovered} split slots recovered in {CI_SEEDS} seeds"
    );
    assert!(
        after_heal > 10,
        "no split slot was still open when faults stopped ({split} split slots): the bound went untested"
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

/// Issue 36's acceptance in the simulator: in about half the CI seeds the committee moves to
/// the next epoch in the middle of the run, one honest seat's key replaced and its state handed
/// to the successor, while payments flow under every fault of the world; every invariant holds
/// (the checks take each vote, round change and certificate in the name of its own epoch), every
/// payment settles, payers learn the epoch from what authorities answer (and refuse a Byzantine
/// authority's forged records), and the first payment of the new epoch is certified within the
/// stated bound of the record.
#[test]
fn a_committee_moves_to_the_next_epoch_with_payments_flowing() {
    let (mut changes, mut learned, mut forged, mut lag, mut stall_ms_max, mut stalls) = (0, 0, 0, 0, 0, 0);
    for (options, r) in ci_reports() {
        assert_eq!(
            r.epoch_changes,
            u64::from(options.epoch_change.is_some()),
            "seed {}",
            options.seed
        );
        changes += r.epoch_changes;
        learned += r.epochs_learned;
        forged += r.forged_records_refused;
        lag += r.epoch_lag_answers;
        if let Some(stall_ms) = r.epoch_stall_ms {
            assert!(
                stall_ms <= options.epoch_stall_ms_max,
                "seed {}: {stall_ms} ms",
                options.seed
            );
            stall_ms_max = stall_ms_max.max(stall_ms);
            stalls += 1;
        }
    }
    eprintln!(
        "{changes} epoch changes in {CI_SEEDS} seeds; {learned} payers learned one; {forged} forged records refused; \
         {lag} answers of another epoch waited out; first payment of the new epoch certified at most {stall_ms_max} ms \
         after the record ({stalls} seeds with payments after the change)"
    );
    assert!(changes > 100, "{changes} epoch changes");
    assert!(stalls > 50, "only {stalls} seeds paid in the new epoch");
    assert!(learned > 200, "only {learned} payers learned an epoch");
    assert!(forged > 10, "only {forged} forged records refused");
}
