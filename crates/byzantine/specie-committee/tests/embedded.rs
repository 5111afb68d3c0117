//! A committee of 4 authorities × 2 shards on durable embedded hosts: payments settle through the
//! slow path with one authority forging its votes or silent, an owner who signed two orders for
//! one sequence number gets the account back in a recovery round, and every authority's books
//! balance.

use std::time::Duration;

use specie_authority::Funding;
use specie_authority::Reply;
use specie_committee::{AuthorityBooks, Behaviour, Call, EmbeddedCommittee, EmbeddedCommitteeOptions, Pipeline};
use specie_fastpay::{deterministic_key, AccountKey, CoreAddress, Recipient, SigningKey, TransferOrder, VoteKind};
use specie_log::{LogOptions, SyncMode};

const ACCOUNTS: u64 = 8;

fn options(dir: &std::path::Path, faulty: Behaviour) -> EmbeddedCommitteeOptions {
    EmbeddedCommitteeOptions {
        data_dir: dir.to_path_buf(),
        shards: 2,
        behaviours: vec![Behaviour::Honest, Behaviour::Honest, faulty, Behaviour::Honest],
        log: LogOptions {
            sync: SyncMode::None,
            ..LogOptions::default()
        },
        snapshot_log_bytes: 64 * 1024,
        credit_retransmit_ms: 50,
        channel_credits_max: 10_000,
    }
}

fn owners() -> Vec<(SigningKey, AccountKey)> {
    (0..ACCOUNTS)
        .map(|n| {
            let key = deterministic_key("account", n);
            let account = AccountKey(key.verifying_key().to_bytes());
            (key, account)
        })
        .collect()
}

fn fund_all(committee: &EmbeddedCommittee, owners: &[(SigningKey, AccountKey)], answering: usize) {
    let (tx, rx) = crossbeam_channel::unbounded();
    for (n, (_, account)) in owners.iter().enumerate() {
        let funding = Funding {
            id: [n as u8; 32],
            account: *account,
            amount: 1_000,
        };
        committee.broadcast(&Call::Fund(funding), n as u64, &tx);
    }
    for _ in 0..owners.len() * answering {
        rx.recv_timeout(Duration::from_secs(10)).expect("funded");
    }
}

fn run_payments(faulty: Behaviour) {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = EmbeddedCommittee::start(&options(dir.path(), faulty), &keys, 1).unwrap();
    let owners = owners();
    fund_all(&committee, &owners, if faulty == Behaviour::Silent { 3 } else { 4 });
    let mut pipeline = Pipeline::new(&committee);
    let mut redeemed = 0;
    for round in 0..3u64 {
        for (n, (key, sender)) in owners.iter().enumerate() {
            let recipient = match (n + round as usize) % 4 {
                0 => Recipient::Core(CoreAddress([7; 32])),
                _ => Recipient::Account(owners[(n + 1 + round as usize) % owners.len()].1),
            };
            let order = TransferOrder {
                sender: *sender,
                recipient,
                amount: 10,
                sequence: round,
                memo: Vec::new(),
            }
            .sign(key);
            pipeline.submit(key, order);
            redeemed += u128::from(matches!(recipient, Recipient::Core(_))) * 10;
        }
        let mut settled = 0;
        while settled < owners.len() {
            for (_, outcome) in pipeline.poll(Duration::from_secs(10)) {
                let settlement = outcome.expect("every correct payment settles");
                assert!(settlement.to_certificate <= settlement.to_settlement);
                // One authority cannot give a valid prepare: never the fast path, no round change.
                assert_eq!((settlement.certificate.kind, settlement.round), (VoteKind::Commit, 0));
                assert_eq!(settlement.certificate.check(committee.committee()), Ok(()));
                settled += 1;
            }
        }
    }
    // Let the stragglers (the fourth authority's confirmations, cross-shard credits) finish.
    std::thread::sleep(Duration::from_millis(300));
    // Each running shard answers its books (what a standalone committee's API serves): what
    // the shards hold once stopped.
    let (asked, answers) = crossbeam_channel::unbounded();
    for shard in 0..committee.shards() {
        committee.call(0, Call::Books { shard }, u64::from(shard), &asked);
    }
    let mut live: Vec<(u64, specie_authority::ShardBooks)> = (0..committee.shards())
        .map(|_| {
            let answer = answers.recv_timeout(Duration::from_secs(10)).expect("books");
            match answer.reply {
                Reply::Books(books) => (answer.tag, books),
                other => panic!("{other:?}"),
            }
        })
        .collect();
    live.sort_by_key(|(tag, _)| *tag);
    let reports = committee.reports();
    let authorities = committee.stop();
    let stopped: Vec<(u64, specie_authority::ShardBooks)> = (authorities[0].iter().enumerate())
        .map(|(shard, role)| (shard as u64, role.books()))
        .collect();
    assert_eq!(live, stopped);
    for (authority, shards) in authorities.iter().enumerate() {
        let books = AuthorityBooks::of(shards);
        assert!(books.balanced(), "authority {authority}: {books:?}");
        if faulty == Behaviour::Honest || authority != 2 {
            assert_eq!(books.funded, 1_000 * u128::from(ACCOUNTS));
        }
    }
    let honest = AuthorityBooks::of(&authorities[0]);
    assert_eq!(honest.redeemed, redeemed);
    assert!(reports.is_empty(), "{reports:?}");
}

#[test]
fn payments_settle_through_the_slow_path_with_an_authority_forging_votes() {
    run_payments(Behaviour::ForgesVotes);
}

#[test]
fn payments_settle_with_an_authority_silent() {
    run_payments(Behaviour::Silent);
}

#[test]
fn an_owner_who_signed_two_orders_gets_the_account_back_in_a_recovery_round() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = EmbeddedCommittee::start(&options(dir.path(), Behaviour::Honest), &keys, 1).unwrap();
    let owners = owners();
    fund_all(&committee, &owners, 4);
    let (key, sender) = &owners[0];
    let order = |sequence, to: usize, amount| {
        TransferOrder {
            sender: *sender,
            recipient: Recipient::Account(owners[to].1),
            amount,
            sequence,
            memo: Vec::new(),
        }
        .sign(key)
    };
    let (first, second) = (order(0, 1, 10), order(0, 2, 20));
    // Authorities 2 and 3 prepare the second order before they see the first.
    let (tx, rx) = crossbeam_channel::unbounded();
    for authority in [2, 3] {
        committee.call(authority, Call::Transfer(second.clone()), 0, &tx);
    }
    for _ in 0..2 {
        let answer = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(answer.reply, Reply::Voted(_)), "{answer:?}");
    }
    let mut pipeline = Pipeline::new(&committee);
    let recovered = pipeline
        .settle_orders(key, vec![first.clone(), second.clone()], Duration::from_secs(30))
        .expect("an outcome within the time-out")
        .expect("the contested slot settles");
    assert!(recovered.round >= 1, "settled in a recovery round");
    assert_eq!(recovered.certificate.kind, VoteKind::Commit);
    assert_eq!(recovered.certificate.check(committee.committee()), Ok(()));
    assert!([&first, &second].contains(&&recovered.certificate.order));
    // The account is the owner's again: its next payment settles in round 0, with no recovery.
    // (By the fast path when all four authorities answer within `fast_path_wait_ms` of the
    // quorum, else by round 0's slow path: which one is a matter of timing, not of correctness.)
    let next = pipeline
        .settle(key, order(1, 3, 5), Duration::from_secs(30))
        .expect("an outcome")
        .expect("the next payment settles");
    assert_eq!(next.round, 0, "no recovery round for the next payment");
    assert_eq!(next.certificate.check(committee.committee()), Ok(()));
    std::thread::sleep(Duration::from_millis(300));
    let reports = committee.reports();
    for (authority, shards) in committee.stop().iter().enumerate() {
        let books = AuthorityBooks::of(shards);
        assert!(books.balanced(), "authority {authority}: {books:?}");
    }
    assert!(
        reports.is_empty(),
        "no authority signed two conflicting votes: {reports:?}"
    );
}
