//! The endorser's and the aggregator's behaviour, one request at a time, and a seeded
//! simulation of an aggregator with endorsers that stay silent, garble or censor on a network
//! that drops and garbles messages.

use crate::common;

use std::collections::BTreeMap;

use common::{Fault, NetFaults, TestEndorser, TestTx, TestValidator, World, INVALID};
use specie_endorsement::frost;
use specie_endorsement::{
    deal, AggregatorConfig, AggregatorMessage, AggregatorReport, BatchItem, EndorseReply, Endorser, EndorserConfig,
    EndorserId, EndorserInput, EndorserMessage, MerkleTree, Refusal, Threshold,
};
use specie_role::{Role, Round};

fn endorser(id: u16) -> (TestEndorser, frost::keys::PublicKeyPackage) {
    let (keys, public) = deal(Threshold::new(2, 3).unwrap(), 11).unwrap();
    let endorser = Endorser::new(
        keys[&EndorserId(id)].clone(),
        TestValidator::default(),
        EndorserConfig::default(),
        [id as u8; 32],
    );
    (endorser, public)
}

fn ask(endorser: &mut TestEndorser, message: AggregatorMessage<TestTx>) -> EndorserMessage<&'static str> {
    endorser.handle(0, EndorserInput { from: 1, message });
    let mut sends = Round::take(endorser).sends;
    assert_eq!(sends.len(), 1);
    sends.pop().unwrap().1
}

fn commitments(message: EndorserMessage<&'static str>) -> frost::round1::SigningCommitments {
    match message {
        EndorserMessage::Commitments { commitments, .. } => *commitments,
        other => panic!("expected commitments, got {other:?}"),
    }
}

/// A signing package for `items` with endorser 1's commitments and a second signer's.
fn package(items: &[TestTx], mine: frost::round1::SigningCommitments) -> frost::SigningPackage {
    let (other, _) = endorser(2);
    let (_, theirs) = frost::round1::commit(other.keys().share.signing_share(), &mut rand::thread_rng());
    let digests: Vec<_> = items.iter().map(BatchItem::digest).collect();
    let map = BTreeMap::from([(EndorserId(1).identifier(), mine), (EndorserId(2).identifier(), theirs)]);
    frost::SigningPackage::new(map, &MerkleTree::new(&digests).message())
}

#[test]
fn an_endorser_signs_once_per_session_and_repeats_itself_exactly() {
    let (mut e, _) = endorser(1);
    let mine = commitments(ask(&mut e, AggregatorMessage::Commit { session: 5 }));
    assert_eq!(
        commitments(ask(&mut e, AggregatorMessage::Commit { session: 5 })),
        mine,
        "same session, same nonces"
    );
    assert_ne!(
        commitments(ask(&mut e, AggregatorMessage::Commit { session: 6 })),
        mine,
        "fresh nonces per session"
    );
    let items = vec![TestTx::valid(1), TestTx::valid(2)];
    let package = package(&items, mine);
    let sign = AggregatorMessage::Sign {
        session: 5,
        items: items.clone(),
        package: package.clone(),
    };
    let share = match ask(&mut e, sign.clone()) {
        EndorserMessage::Share { share, .. } => share,
        other => panic!("expected a share, got {other:?}"),
    };
    assert_eq!(
        ask(&mut e, sign),
        EndorserMessage::Share { session: 5, share },
        "a retransmission gets the same share"
    );
    // Another package in the same session (other items, hence another message): refused.
    let other_items = vec![TestTx::valid(3)];
    let other = AggregatorMessage::Sign {
        session: 5,
        items: other_items.clone(),
        package: self::package(&other_items, mine),
    };
    assert_eq!(
        ask(&mut e, other),
        EndorserMessage::Refused {
            session: 5,
            refusal: Refusal::SessionReused
        }
    );
    assert_eq!(
        e.sessions_with_nonces(),
        1,
        "session 5's nonces are gone, session 6's wait"
    );
}

#[test]
fn an_endorser_refuses_what_it_should_not_sign() {
    let (mut e, _) = endorser(1);
    let mine = commitments(ask(&mut e, AggregatorMessage::Commit { session: 1 }));
    let items = vec![TestTx::valid(1), TestTx::invalid(2), TestTx::valid(3)];
    let refused = |refusal| EndorserMessage::Refused { session: 1, refusal };
    // A message that is not the items' batch message.
    let wrong = package(&items[..1], mine);
    let ask_sign = |e: &mut TestEndorser, items: Vec<TestTx>, package| {
        ask(
            e,
            AggregatorMessage::Sign {
                session: 1,
                items,
                package,
            },
        )
    };
    assert_eq!(ask_sign(&mut e, items.clone(), wrong), refused(Refusal::WrongMessage));
    // Someone else's commitments in this endorser's place.
    let (_, forged) = frost::round1::commit(e.keys().share.signing_share(), &mut rand::thread_rng());
    assert_eq!(
        ask_sign(&mut e, items.clone(), package(&items, forged)),
        refused(Refusal::WrongCommitments)
    );
    // An invalid transaction.
    let expected = refused(Refusal::Invalid {
        items: vec![(1, INVALID)],
    });
    assert_eq!(ask_sign(&mut e, items.clone(), package(&items, mine)), expected);
    // A session it never opened.
    let unknown = ask(
        &mut e,
        AggregatorMessage::Sign {
            session: 9,
            items: items.clone(),
            package: package(&items, mine),
        },
    );
    assert_eq!(
        unknown,
        EndorserMessage::Refused {
            session: 9,
            refusal: Refusal::UnknownSession
        }
    );
    // None of this spent the nonces: the valid batch still signs.
    let valid = vec![TestTx::valid(1)];
    assert!(matches!(
        ask_sign(&mut e, valid.clone(), package(&valid, mine)),
        EndorserMessage::Share { .. }
    ));
}

#[test]
fn an_endorser_forgets_expired_and_evicted_sessions() {
    let (keys, _) = deal(Threshold::new(2, 3).unwrap(), 11).unwrap();
    let config = EndorserConfig {
        sessions_max: 2,
        session_ttl_ms: 100,
        ..EndorserConfig::default()
    };
    let mut e = Endorser::new(keys[&EndorserId(1)].clone(), TestValidator::default(), config, [1; 32]);
    for session in 1..=3 {
        e.handle(
            10 * session,
            EndorserInput {
                from: 1,
                message: AggregatorMessage::Commit { session },
            },
        );
    }
    assert_eq!(e.sessions_with_nonces(), 2, "bounded by sessions_max");
    assert_eq!(e.poll_timeout(), Some(120));
    e.handle_timeout(120);
    assert_eq!(e.sessions_with_nonces(), 1);
    e.handle_timeout(130);
    assert_eq!(e.sessions_with_nonces(), 0);
    assert_eq!(e.poll_timeout(), None);
}

fn config() -> AggregatorConfig {
    AggregatorConfig {
        batch_transactions_max: 10,
        batch_delay_ms: 5,
        round_timeout_ms: 50,
        attempts_max: 6,
        ..AggregatorConfig::default()
    }
}

fn world(faults: &[(u16, Fault)], net: NetFaults, seed: u64) -> World {
    let (keys, public) = deal(Threshold::new(3, 5).unwrap(), 21).unwrap();
    let faults = faults.iter().map(|(id, f)| (EndorserId(*id), *f)).collect();
    World::new(&keys, &public, config(), faults, net, seed)
}

const CLEAN: NetFaults = NetFaults {
    drop_per_mille: 0,
    garble_per_mille: 0,
    delay_ms_max: 2,
};

/// Every ticket is answered; endorsements verify for their own transaction; invalid ones never
/// get endorsed. Returns (endorsed, refused, failed).
fn check_replies(world: &World, items: &BTreeMap<u64, TestTx>) -> (usize, usize, usize) {
    let key = world.aggregator.group_key();
    let mut counts = (0, 0, 0);
    for (ticket, item) in items {
        match world
            .replies
            .get(ticket)
            .unwrap_or_else(|| panic!("ticket {ticket} unanswered"))
        {
            EndorseReply::Endorsed(endorsement) => {
                assert!(item.is_valid(), "an invalid transaction was endorsed");
                endorsement
                    .verify(&key, &item.digest())
                    .expect("an endorsement verifies");
                let other = TestTx::valid(u64::MAX).digest();
                assert!(
                    endorsement.verify(&key, &other).is_err(),
                    "and only for its own transaction"
                );
                counts.0 += 1;
            }
            EndorseReply::Refused { reasons } => {
                assert!(!item.is_valid(), "a valid transaction was refused: {reasons:?}");
                assert!(reasons.len() >= 3, "n - k + 1 endorsers refused it");
                counts.1 += 1;
            }
            EndorseReply::Failed => counts.2 += 1,
            other => panic!("unexpected reply {other:?}"),
        }
    }
    counts
}

fn submit_all(world: &mut World, items: &BTreeMap<u64, TestTx>, spacing_ms: u64) {
    for (ticket, item) in items {
        world.submit(*ticket, item.clone());
        let until = world.now_ms + spacing_ms;
        world.run(until);
        world.now_ms = world.now_ms.max(until);
    }
    world.run(u64::MAX);
}

#[test]
fn an_aggregator_endorses_batches_and_drops_invalid_transactions() {
    let mut world = world(&[], CLEAN, 1);
    let items: BTreeMap<u64, TestTx> = (0..25)
        .map(|i| {
            (
                i,
                if i % 7 == 3 {
                    TestTx::invalid(i)
                } else {
                    TestTx::valid(i)
                },
            )
        })
        .collect();
    submit_all(&mut world, &items, 0);
    assert_eq!(check_replies(&world, &items), (21, 4, 0));
    let batches = world
        .reports
        .iter()
        .filter(|r| matches!(r, AggregatorReport::Endorsed { .. }))
        .count();
    assert_eq!(batches, 3, "25 transactions in batches of at most 10");
    assert!(
        world.endorsers.values().all(|e| e.sessions_with_nonces() == 0),
        "expired or used"
    );
}

#[test]
fn a_partial_batch_waits_batch_delay_ms() {
    let mut world = world(&[], CLEAN, 2);
    world.submit(1, TestTx::valid(1));
    assert_eq!(world.aggregator.poll_timeout(), Some(5));
    world.run(4);
    assert!(world.replies.is_empty());
    world.run(u64::MAX);
    assert!(matches!(world.replies[&1], EndorseReply::Endorsed(ref e) if e.leaf_count == 1 && e.siblings.is_empty()));
}

#[test]
fn a_full_queue_answers_busy() {
    let (_, public) = deal(Threshold::new(3, 5).unwrap(), 21).unwrap();
    let config = AggregatorConfig {
        queue_transactions_max: 2,
        batch_transactions_max: 10,
        ..AggregatorConfig::default()
    };
    let mut aggregator = common::TestAggregator::new(1, public, config, 1).unwrap();
    let submit = |c: &mut common::TestAggregator, ticket| {
        c.handle(
            0,
            specie_endorsement::AggregatorInput::Submit {
                ticket,
                item: TestTx::valid(ticket),
            },
        );
        Round::take(c).replies
    };
    assert_eq!(submit(&mut aggregator, 1), vec![(1, EndorseReply::NotLeading)]);
    aggregator.lead(0);
    assert!(submit(&mut aggregator, 2).is_empty());
    assert!(submit(&mut aggregator, 3).is_empty());
    assert_eq!(submit(&mut aggregator, 4), vec![(4, EndorseReply::Busy)]);
    aggregator.follow();
    let replies = Round::take(&mut aggregator).replies;
    assert_eq!(
        replies,
        vec![(2, EndorseReply::NotLeading), (3, EndorseReply::NotLeading)]
    );
}

#[test]
fn silent_garbling_and_censoring_endorsers_are_worked_around() {
    for faults in [
        vec![(1, Fault::Silent), (2, Fault::Silent)],
        vec![(2, Fault::GarbleShares), (4, Fault::Silent)],
        vec![(1, Fault::Censor), (3, Fault::Censor)],
        vec![(5, Fault::GarbleShares), (1, Fault::Censor)],
    ] {
        let mut world = world(&faults, CLEAN, 3);
        let items: BTreeMap<u64, TestTx> = (0..30).map(|i| (i, TestTx::valid(i))).collect();
        submit_all(&mut world, &items, 1);
        assert_eq!(check_replies(&world, &items), (30, 0, 0), "faults {faults:?}");
    }
}

#[test]
fn three_silent_endorsers_of_five_stop_endorsement() {
    let mut world = world(&[(1, Fault::Silent), (2, Fault::Silent), (3, Fault::Silent)], CLEAN, 4);
    let items: BTreeMap<u64, TestTx> = (0..3).map(|i| (i, TestTx::valid(i))).collect();
    submit_all(&mut world, &items, 0);
    assert_eq!(
        check_replies(&world, &items),
        (0, 0, 3),
        "k - 1 honest endorsers cannot sign"
    );
}

/// The deterministic simulation: seeded faults of both endorsers and network.
#[test]
fn simulation_with_lossy_network_and_faulty_endorsers() {
    let mut totals = (0, 0, 0);
    for seed in 0..16u64 {
        let fault = [Fault::Honest, Fault::Silent, Fault::GarbleShares, Fault::Censor][(seed % 4) as usize];
        let faulty = (seed % 5) as u16 + 1;
        let net = NetFaults {
            drop_per_mille: 20,
            garble_per_mille: 20,
            delay_ms_max: 20,
        };
        let mut world = world(&[(faulty, fault)], net, seed);
        let items: BTreeMap<u64, TestTx> = (0..40)
            .map(|i| {
                (
                    i,
                    if (i + seed) % 11 == 0 {
                        TestTx::invalid(i)
                    } else {
                        TestTx::valid(i)
                    },
                )
            })
            .collect();
        submit_all(&mut world, &items, 1);
        let counts = check_replies(&world, &items);
        assert!(
            counts.2 <= 10,
            "seed {seed}: most batches get through a 2% lossy network: {counts:?}"
        );
        totals = (totals.0 + counts.0, totals.1 + counts.1, totals.2 + counts.2);
        // Replays to the same seed give the same outcome.
        if seed == 0 {
            let mut again = self::world(&[(faulty, fault)], net, seed);
            submit_all(&mut again, &items, 1);
            assert_eq!(again.replies, world.replies, "deterministic");
        }
    }
    assert!(
        totals.0 > 500 && totals.1 > 30,
        "the simulation exercised both outcomes: {totals:?}"
    );
}
