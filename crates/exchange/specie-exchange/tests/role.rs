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
    let first = replies(host.handle(0, ExchangeInput::Deposit { ticket: 1, deposit }));
    assert_eq!(first, vec![(1, ExchangeReply::Deposited)]);
    let again = replies(host.handle(0, ExchangeInput::Deposit { ticket: 2, deposit }));
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
    let again = replies(host.handle(200, ExchangeInput::Deposit { ticket: 6, deposit }));
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
