//! The exchange role on the simulated host: submissions are answered only once their
//! transactions are in a durable block (or refused, each with its reason), blocks come every
//! `block_interval_ms`, a crash loses nothing that was answered and the restarted role rebuilds
//! the same state from its log, a snapshot restores the identical state hash, and a follower
//! takes no submissions.

use ed25519_dalek::SigningKey;
use specie_exchange::{
    Deposit, DepositRefusal, ExchangeConfig, ExchangeInput, ExchangeReply, ExchangeRole, Fate, Ledger, LimitPrice,
    Operation, Refusal, RoleLimits, Transaction, Withdrawal,
};
use specie_host::{SimEvent, SimHost};
use specie_role::{Durable, Role};

const EXCHANGE: [u8; 32] = [3; 32];

fn key(n: u64) -> SigningKey {
    SigningKey::from_bytes(&[n as u8; 32])
}

fn fresh() -> ExchangeRole {
    let accounts = (1..=4)
        .map(|id| (id, key(id).verifying_key().to_bytes(), vec![1_000, 2_000, 3_000]))
        .collect();
    let ledger = Ledger::genesis(ExchangeConfig::new(EXCHANGE, 3), accounts).unwrap();
    ExchangeRole::new(
        ledger,
        RoleLimits {
            block_interval_ms: 100,
            mempool_transactions_max: 8,
            submission_transactions_max: 4,
            recent_transactions_max: 64,
        },
    )
}

fn pay(from: u64, sequence: u64, amount: u64) -> specie_exchange::SignedTransaction {
    Transaction {
        account: from,
        sequence,
        operation: Operation::Payment {
            to: from % 4 + 1,
            asset: 0,
            amount,
        },
    }
    .sign(&EXCHANGE, &key(from))
}

fn replies(events: Vec<SimEvent<ExchangeRole>>) -> Vec<(u64, ExchangeReply)> {
    events
        .into_iter()
        .filter_map(|event| match event {
            SimEvent::Reply { ticket, reply } => Some((ticket, reply)),
            _ => None,
        })
        .collect()
}

#[test]
fn submissions_are_answered_once_in_a_durable_block_and_survive_a_crash() {
    let mut host = SimHost::start("exchange", fresh);
    let offer = Transaction {
        account: 2,
        sequence: 1,
        operation: Operation::SellOffer {
            sell: 1,
            buy: 0,
            amount: 500,
            limit: LimitPrice(1 << 32),
        },
    }
    .sign(&EXCHANGE, &key(2));
    let events = host.handle(
        0,
        ExchangeInput::Submit {
            ticket: 1,
            transactions: vec![pay(1, 1, 10), offer, pay(3, 1, 5_000)],
        },
    );
    assert!(replies(events).is_empty(), "nothing is answered before a block");
    assert!(replies(host.tick(99)).is_empty(), "the block waits for its interval");
    let events = host.tick(100);
    assert!(
        events.iter().any(|e| matches!(e, SimEvent::Durable(_))),
        "one block made durable"
    );
    assert_eq!(
        replies(events),
        vec![(
            1,
            ExchangeReply::Settled(vec![
                Fate::Included { height: 1 },
                Fate::Included { height: 1 },
                Fate::Refused(Refusal::Overdraft(0)),
            ])
        )]
    );
    let hash = host.role().unwrap().ledger().state_hash();
    // Limits: more than a submission may carry; more than the mempool holds.
    let five = (2..7).map(|s| pay(1, s, 1)).collect();
    assert!(matches!(
        replies(host.handle(
            110,
            ExchangeInput::Submit {
                ticket: 2,
                transactions: five
            }
        ))[..],
        [(2, ExchangeReply::TooMany { .. })]
    ));
    for ticket in 3..5 {
        let four = (0..4).map(|s| pay(4, 10 * ticket + s, 1)).collect();
        assert!(replies(host.handle(
            110,
            ExchangeInput::Submit {
                ticket,
                transactions: four
            }
        ))
        .is_empty());
    }
    let one_more = replies(host.handle(
        110,
        ExchangeInput::Submit {
            ticket: 5,
            transactions: vec![pay(1, 2, 1)],
        },
    ));
    assert!(matches!(one_more[..], [(5, ExchangeReply::Busy { .. })]));
    // A crash before the block: the waiting submissions were never answered, so nothing is lost.
    assert!(host.crash());
    host.restart(150).unwrap();
    assert_eq!(host.role().unwrap().ledger().state_hash(), hash, "rebuilt from its log");
    let events = host.handle(
        150,
        ExchangeInput::Submit {
            ticket: 6,
            transactions: vec![pay(1, 2, 1)],
        },
    );
    assert!(replies(events).is_empty());
    let settled = replies(host.tick(250));
    assert_eq!(
        settled,
        vec![(6, ExchangeReply::Settled(vec![Fate::Included { height: 2 }]))]
    );
    let role = host.role().unwrap();
    // Paid 10 and 1; account 4's payments to it were lost with the crash, never answered.
    assert_eq!(role.ledger().account(1).unwrap().balances[0], 1_000 - 10 - 1);
    assert_eq!(role.ledger().book((1, 0)).count(), 1, "the offer rests");
    role.check_invariants().unwrap();
    // A snapshot restores the identical state.
    let snapshot = role.snapshot();
    let mut restored = fresh();
    restored.restore(&snapshot).unwrap();
    assert_eq!(restored.ledger().state_hash(), role.ledger().state_hash());
    assert_eq!(restored.ledger(), role.ledger());
    let mut damaged = snapshot.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    assert!(fresh().restore(&damaged).is_err(), "a damaged snapshot is refused");
}

#[test]
fn a_deposit_is_credited_once_and_a_withdrawal_is_recorded_for_its_payout() {
    let mut host = SimHost::start("exchange", fresh);
    let deposit = Deposit {
        asset: 2,
        marker: [9; 32],
        account: 3,
        key: key(3).verifying_key().to_bytes(),
        amount: 700,
    };
    let first = replies(host.handle(
        0,
        ExchangeInput::Deposit {
            ticket: 1,
            deposit,
            refund_to: None,
        },
    ));
    assert_eq!(first, vec![(1, ExchangeReply::Deposited)]);
    let again = replies(host.handle(
        0,
        ExchangeInput::Deposit {
            ticket: 2,
            deposit,
            refund_to: None,
        },
    ));
    assert_eq!(
        again,
        vec![(2, ExchangeReply::DepositRefused(DepositRefusal::AlreadyCredited))]
    );
    let wrong_key = Deposit {
        marker: [8; 32],
        key: key(4).verifying_key().to_bytes(),
        ..deposit
    };
    let refused = replies(host.handle(
        0,
        ExchangeInput::Deposit {
            ticket: 3,
            deposit: wrong_key,
            refund_to: None,
        },
    ));
    assert_eq!(
        refused,
        vec![(3, ExchangeReply::DepositRefused(DepositRefusal::OtherKey))]
    );
    // The same marker on another asset's core is another funding.
    let other_core = Deposit { asset: 1, ..deposit };
    let credited = replies(host.handle(
        0,
        ExchangeInput::Deposit {
            ticket: 8,
            deposit: other_core,
            refund_to: None,
        },
    ));
    assert_eq!(credited, vec![(8, ExchangeReply::Deposited)]);
    // A first deposit opens an account.
    let opening = Deposit {
        marker: [7; 32],
        account: 42,
        key: key(42).verifying_key().to_bytes(),
        ..deposit
    };
    let opened = replies(host.handle(
        0,
        ExchangeInput::Deposit {
            ticket: 7,
            deposit: opening,
            refund_to: None,
        },
    ));
    assert_eq!(opened, vec![(7, ExchangeReply::Deposited)]);
    assert_eq!(
        host.role().unwrap().ledger().account(42).unwrap().balances,
        vec![0, 0, 700]
    );
    let withdraw = Transaction {
        account: 3,
        sequence: 1,
        operation: Operation::Withdraw {
            asset: 2,
            amount: 3_500,
            address: [5; 32],
        },
    }
    .sign(&EXCHANGE, &key(3));
    host.handle(
        0,
        ExchangeInput::Submit {
            ticket: 4,
            transactions: vec![withdraw],
        },
    );
    assert_eq!(
        replies(host.tick(100)),
        vec![(4, ExchangeReply::Settled(vec![Fate::Included { height: 1 }]))]
    );
    let found = replies(host.handle(
        100,
        ExchangeInput::Withdrawal {
            ticket: 5,
            account: 3,
            sequence: 1,
        },
    ));
    let expected = Withdrawal {
        account: 3,
        sequence: 1,
        asset: 2,
        amount: 3_500,
        address: [5; 32],
    };
    assert_eq!(found, vec![(5, ExchangeReply::Withdrawal(Some(expected)))]);
    let ledger = host.role().unwrap().ledger();
    assert_eq!(ledger.account(3).unwrap().balances[2], 3_000 + 700 - 3_500);
    assert_eq!(
        (ledger.totals()[2].deposited, ledger.totals()[2].withdrawn),
        (4 * 3_000 + 2 * 700, 3_500)
    );
    ledger.audit().unwrap();
    // The deposit and the withdrawal survive a crash, from the log.
    let hash = ledger.state_hash();
    host.crash();
    host.restart(200).unwrap();
    assert_eq!(host.role().unwrap().ledger().state_hash(), hash);
    let again = replies(host.handle(
        200,
        ExchangeInput::Deposit {
            ticket: 6,
            deposit,
            refund_to: None,
        },
    ));
    assert_eq!(
        again,
        vec![(6, ExchangeReply::DepositRefused(DepositRefusal::AlreadyCredited))]
    );
}

#[test]
fn a_follower_takes_no_submission_and_losing_the_lead_answers_the_waiting_as_dropped() {
    let mut role = fresh();
    role.handle(
        0,
        ExchangeInput::Submit {
            ticket: 1,
            transactions: vec![pay(1, 1, 1)],
        },
    );
    assert!(matches!(
        role.poll_output(),
        Some(specie_role::Output::Reply {
            ticket: 1,
            reply: ExchangeReply::Dropped
        })
    ));
    role.lead(0);
    role.handle(
        0,
        ExchangeInput::Submit {
            ticket: 2,
            transactions: vec![pay(1, 1, 1)],
        },
    );
    assert!(role.poll_output().is_none());
    role.follow();
    assert!(matches!(
        role.poll_output(),
        Some(specie_role::Output::Reply {
            ticket: 2,
            reply: ExchangeReply::Dropped
        })
    ));
    assert_eq!(role.poll_timeout(), None);
}

fn submit(ticket: u64, transactions: Vec<specie_exchange::SignedTransaction>) -> ExchangeInput {
    ExchangeInput::Submit { ticket, transactions }
}

/// Drains the role's outputs: its proposals and its replies (no sends, and no reports but the
/// metrics' of a block it cleared).
fn outputs(role: &mut ExchangeRole) -> (Vec<specie_exchange::ExchangeCommand>, Vec<(u64, ExchangeReply)>) {
    let (mut proposals, mut replies) = (Vec::new(), Vec::new());
    while let Some(output) = role.poll_output() {
        match output {
            specie_role::Output::Propose(command) => proposals.push(command),
            specie_role::Output::Reply { ticket, reply } => replies.push((ticket, reply)),
            specie_role::Output::Report(specie_exchange::ExchangeReport::Cleared(_)) => {}
            _ => panic!("a report or a send"),
        }
    }
    (proposals, replies)
}

/// The one block among `proposals`.
fn the_block(proposals: Vec<specie_exchange::ExchangeCommand>) -> specie_exchange::Block {
    match &proposals[..] {
        [specie_exchange::ExchangeCommand::Block(block)] => block.clone(),
        other => panic!("expected one block, got {other:?}"),
    }
}

#[test]
fn a_transaction_sent_twice_in_one_submission_or_two_is_executed_once_and_answers_everyone() {
    let mut host = SimHost::start("exchange", fresh);
    let (twice, overdraft) = (pay(1, 1, 10), pay(3, 1, 5_000));
    let events = host.handle_all(
        0,
        [
            submit(1, vec![twice, twice, overdraft]),
            submit(2, vec![twice, overdraft]),
        ],
    );
    assert!(replies(events).is_empty());
    let events = host.tick(100);
    let role = host.role().unwrap();
    let blocks: Vec<usize> = events
        .iter()
        .filter_map(|event| match event {
            SimEvent::Durable(bytes) => match role.decode_command(bytes).unwrap() {
                specie_exchange::ExchangeCommand::Block(block) => Some(block.transactions.len()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(blocks, vec![1], "one block, holding the transaction once");
    // The leader reports the block it cleared once it is applied: for its metrics.
    let cleared: Vec<(u64, usize)> = (events.iter())
        .filter_map(|event| match event {
            SimEvent::Report(specie_exchange::ExchangeReport::Cleared(cleared)) => {
                Some((cleared.height, cleared.transactions))
            }
            _ => None,
        })
        .collect();
    assert_eq!(cleared, vec![(1, 1)]);
    let (included, refused) = (Fate::Included { height: 1 }, Fate::Refused(Refusal::Overdraft(0)));
    let mut settled = replies(events);
    settled.sort_by_key(|(ticket, _)| *ticket);
    assert_eq!(
        settled,
        vec![
            (1, ExchangeReply::Settled(vec![included, included, refused])),
            (2, ExchangeReply::Settled(vec![included, refused])),
        ]
    );
    let ledger = host.role().unwrap().ledger();
    assert_eq!(ledger.account(1).unwrap().balances[0], 1_000 - 10, "paid once");
    assert_eq!(ledger.account(2).unwrap().balances[0], 1_000 + 10);
    // Sent again after its block (its first answer lost, say): answered from that block at once.
    let again = replies(host.handle(150, submit(3, vec![twice])));
    assert_eq!(again, vec![(3, ExchangeReply::Settled(vec![included]))]);
    assert_eq!(host.role().unwrap().poll_timeout(), None, "nothing waits for a block");
    assert_eq!(host.role().unwrap().ledger().height(), 1);
}

#[test]
fn a_duplicate_sent_while_its_block_is_in_flight_is_answered_by_that_block() {
    let mut role = fresh();
    role.lead(0);
    let (first, second) = (pay(1, 1, 10), pay(2, 1, 5));
    role.handle(0, submit(1, vec![first]));
    role.handle_timeout(100);
    let block = the_block(outputs(&mut role).0);
    assert_eq!(block.transactions, vec![first]);
    // In flight (proposed, not yet durable): the duplicate waits for it, `second` for the next.
    role.handle(101, submit(2, vec![first, second]));
    assert_eq!(outputs(&mut role), (vec![], vec![]));
    role.apply(102, &specie_exchange::ExchangeCommand::Block(block));
    let (proposals, answered) = outputs(&mut role);
    assert!(proposals.is_empty());
    assert_eq!(
        answered,
        vec![(1, ExchangeReply::Settled(vec![Fate::Included { height: 1 }]))]
    );
    role.handle_timeout(role.poll_timeout().expect("the next block is due"));
    let next = the_block(outputs(&mut role).0);
    assert_eq!(next.transactions, vec![second], "the duplicate is not executed again");
    role.apply(300, &specie_exchange::ExchangeCommand::Block(next));
    assert_eq!(
        outputs(&mut role).1,
        vec![(
            2,
            ExchangeReply::Settled(vec![Fate::Included { height: 1 }, Fate::Included { height: 2 }])
        )]
    );
    assert_eq!(role.ledger().account(1).unwrap().balances[0], 1_000 - 10);
}

#[test]
fn losing_the_lead_drops_only_what_no_block_in_flight_holds() {
    let mut role = fresh();
    role.lead(0);
    let (proposed, queued) = (pay(1, 1, 10), pay(2, 1, 5));
    role.handle(0, submit(1, vec![proposed]));
    role.handle_timeout(100);
    let block = the_block(outputs(&mut role).0);
    role.handle(101, submit(2, vec![queued]));
    role.handle(101, submit(3, vec![proposed]));
    role.follow();
    // Ticket 2 waited for no block: dropped (send it again). Tickets 1 and 3 wait for the block
    // in flight, whose fate the log decides: not answered by the role (the host says unknown).
    assert_eq!(outputs(&mut role), (vec![], vec![(2, ExchangeReply::Dropped)]));
    role.apply(110, &specie_exchange::ExchangeCommand::Block(block));
    assert_eq!(outputs(&mut role), (vec![], vec![]));
    // The submitter sends it again to the next leader: answered as included, not refused.
    role.lead(120);
    role.handle(120, submit(4, vec![proposed]));
    assert_eq!(
        outputs(&mut role).1,
        vec![(4, ExchangeReply::Settled(vec![Fate::Included { height: 1 }]))]
    );
}

#[test]
fn a_committed_block_that_does_not_apply_gives_its_transactions_to_the_next() {
    let mut role = fresh();
    role.lead(0);
    let transaction = pay(1, 1, 10);
    role.handle(0, submit(1, vec![transaction]));
    role.handle_timeout(100);
    let block = the_block(outputs(&mut role).0);
    let broken = specie_exchange::Block {
        previous: [9; 32],
        ..block
    };
    role.apply(101, &specie_exchange::ExchangeCommand::Block(broken));
    let mut reports = 0;
    while let Some(output) = role.poll_output() {
        assert!(
            matches!(
                output,
                specie_role::Output::Report(specie_exchange::ExchangeReport::BlockRefused { .. })
            ),
            "only the refusal, and no block cleared"
        );
        reports += 1;
    }
    assert_eq!(reports, 1, "the operator sees it; nobody is answered yet");
    role.handle_timeout(role.poll_timeout().expect("its transactions wait for the next block"));
    let again = the_block(outputs(&mut role).0);
    assert_eq!(again.transactions, vec![transaction]);
    role.apply(300, &specie_exchange::ExchangeCommand::Block(again));
    assert_eq!(
        outputs(&mut role).1,
        vec![(1, ExchangeReply::Settled(vec![Fate::Included { height: 1 }]))]
    );
}

/// One step of a random run: a submission (transactions picked from a small pool, so they repeat
/// within and across submissions), the block timer, or the host making the proposal durable.
#[derive(Clone, Debug)]
enum Step {
    Submit(Vec<usize>),
    Timer,
    Apply,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => proptest::collection::vec(0..12usize, 0..=4).prop_map(Step::Submit),
        1 => Just(Step::Timer),
        1 => Just(Step::Apply),
    ]
}

/// Twelve transactions: accounts 1 to 4 paying (sequences 1 to 3), one of them an overdraft.
fn pool() -> Vec<specie_exchange::SignedTransaction> {
    (0..12u64)
        .map(|i| pay(i % 4 + 1, i / 4 + 1, if i == 7 { 5_000 } else { i + 1 }))
        .collect()
}

/// Runs `steps` on a leading role, then lets it finish, and checks: every submission is
/// answered exactly once, with one fate per transaction; no transaction is in two blocks; an
/// inclusion names the block that holds the transaction; a refusal comes before any block holds
/// it; and the ledger is each block applied once.
fn run_with_duplicates(steps: &[Step]) {
    let pool = pool();
    let mut role = fresh();
    role.lead(0);
    let (mut now, mut proposed, mut blocks) = (0, Vec::new(), Vec::<specie_exchange::Block>::new());
    let mut asked: Vec<Vec<usize>> = Vec::new();
    let mut answered = std::collections::BTreeMap::new();
    let take = |role: &mut ExchangeRole,
                proposed: &mut Vec<_>,
                blocks: &[specie_exchange::Block],
                answered: &mut std::collections::BTreeMap<u64, ExchangeReply>,
                asked: &[Vec<usize>]| {
        let (proposals, replies) = outputs(role);
        proposed.extend(proposals);
        for (ticket, reply) in replies {
            if let ExchangeReply::Settled(fates) = &reply {
                for (index, fate) in asked[ticket as usize].iter().zip(fates) {
                    let held = blocks.iter().find(|b| b.transactions.contains(&pool[*index]));
                    match fate {
                        Fate::Included { height } => assert_eq!(held.map(|b| b.height), Some(*height)),
                        Fate::Refused(_) => assert!(held.is_none(), "refused after a block held it"),
                    }
                }
            }
            assert!(
                answered.insert(ticket, reply).is_none(),
                "ticket {ticket} answered twice"
            );
        }
    };
    let finish = steps
        .iter()
        .cloned()
        .chain(std::iter::repeat_n([Step::Timer, Step::Apply], 8).flatten());
    for step in finish {
        now += 50;
        match step {
            Step::Submit(picked) => {
                let ticket = asked.len() as u64;
                asked.push(picked.clone());
                role.handle(now, submit(ticket, picked.iter().map(|i| pool[*i]).collect()));
            }
            Step::Timer if role.poll_timeout().is_some_and(|due| due <= now) => role.handle_timeout(now),
            Step::Timer => {}
            Step::Apply => {
                for command in proposed.drain(..) {
                    if let specie_exchange::ExchangeCommand::Block(block) = &command {
                        blocks.push(block.clone());
                    }
                    role.apply(now, &command);
                }
            }
        }
        take(&mut role, &mut proposed, &blocks, &mut answered, &asked);
    }
    assert_eq!(answered.len(), asked.len(), "every submission answered");
    for (ticket, reply) in &answered {
        match reply {
            ExchangeReply::Settled(fates) => assert_eq!(fates.len(), asked[*ticket as usize].len()),
            ExchangeReply::Busy { .. } => {}
            other => panic!("ticket {ticket}: {other:?}"),
        }
    }
    let executed: Vec<_> = blocks.iter().flat_map(|b| b.transactions.iter().copied()).collect();
    let distinct: std::collections::HashSet<_> = executed.iter().collect();
    assert_eq!(distinct.len(), executed.len(), "no transaction executed twice");
    let paid: u64 = executed
        .iter()
        .filter(|t| t.transaction.account == 1)
        .map(|t| match t.transaction.operation {
            Operation::Payment { amount, .. } => amount,
            _ => 0,
        })
        .sum();
    let received: u64 = executed
        .iter()
        .filter(|t| t.transaction.account == 4)
        .map(|t| match t.transaction.operation {
            Operation::Payment { amount, .. } => amount,
            _ => 0,
        })
        .sum();
    assert_eq!(role.ledger().account(1).unwrap().balances[0], 1_000 - paid + received);
    role.check_invariants().unwrap();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..proptest::prelude::ProptestConfig::default() })]

    /// Duplicates within a submission, across submissions waiting together, and sent while their
    /// block is in flight or after it: executed once, every submitter answered once.
    #[test]
    fn duplicates_are_executed_once_and_every_submitter_is_answered(
        steps in proptest::collection::vec(step(), 0..40)
    ) {
        run_with_duplicates(&steps);
    }
}

#[test]
fn a_funding_that_can_never_be_credited_is_refunded_once_to_its_funder() {
    let mut host = SimHost::start("exchange", fresh);
    let before = host.role().unwrap().ledger().totals()[2];
    // Account 3 is key 3's: a funding committing to it with key 4 can never be credited.
    let other_key = Deposit {
        asset: 2,
        marker: [8; 32],
        account: 3,
        key: key(4).verifying_key().to_bytes(),
        amount: 700,
    };
    let hand_in = |ticket, deposit, refund_to| ExchangeInput::Deposit {
        ticket,
        deposit,
        refund_to,
    };
    let (account, sequence) = specie_exchange::refund_id(2, &[8; 32]);
    assert_ne!(sequence & specie_exchange::REFUND_SEQUENCE_BIT, 0);
    let refund = Withdrawal {
        account,
        sequence,
        asset: 2,
        amount: 700,
        address: [5; 32],
    };
    let answered = replies(host.handle(0, hand_in(1, other_key, Some([5; 32]))));
    let refunded = |reason| ExchangeReply::Refunded {
        withdrawal: refund,
        reason,
    };
    assert_eq!(answered, vec![(1, refunded(Some(DepositRefusal::OtherKey)))]);
    // Once: handed in again (with or without a refund address), the same refund is the answer.
    let again = replies(host.handle_all(0, [hand_in(2, other_key, Some([6; 32])), hand_in(3, other_key, None)]));
    assert_eq!(again, vec![(2, refunded(None)), (3, refunded(None))]);
    let ledger = host.role().unwrap().ledger();
    assert_eq!(
        ledger.withdrawal(account, sequence),
        Some(&refund),
        "its payout is served"
    );
    assert_eq!(ledger.account(3).unwrap().balances[2], 3_000, "nothing credited");
    let after = ledger.totals()[2];
    assert_eq!(
        (after.deposited - before.deposited, after.withdrawn - before.withdrawn),
        (700, 700),
        "in and out of the books alike"
    );
    ledger.audit().unwrap();
    // A key that is not one (the identity point) can never hold an account: refunded too.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let bad_key = Deposit {
        marker: [9; 32],
        account: 99,
        key: identity,
        ..other_key
    };
    let answered = replies(host.handle(0, hand_in(4, bad_key, Some([5; 32]))));
    assert!(matches!(
        answered[..],
        [(
            4,
            ExchangeReply::Refunded {
                reason: Some(DepositRefusal::BadKey),
                ..
            }
        )]
    ));
    // Without a refund address (an older caller) it is refused, as before.
    let old_caller = Deposit {
        marker: [10; 32],
        ..other_key
    };
    let refused = replies(host.handle(0, hand_in(5, old_caller, None)));
    assert_eq!(
        refused,
        vec![(5, ExchangeReply::DepositRefused(DepositRefusal::OtherKey))]
    );
    // The refunds survive a crash (from the log) and a snapshot.
    let hash = host.role().unwrap().ledger().state_hash();
    host.crash();
    host.restart(100).unwrap();
    let role = host.role().unwrap();
    assert_eq!(role.ledger().state_hash(), hash);
    let mut restored = fresh();
    restored.restore(&role.snapshot()).unwrap();
    assert_eq!(restored.ledger().withdrawal(account, sequence), Some(&refund));
    assert_eq!(restored.ledger().state_hash(), hash);
}
