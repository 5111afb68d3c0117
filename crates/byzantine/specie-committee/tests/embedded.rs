//! A committee of 4 authorities × 2 shards on durable embedded hosts: payments settle at the first
//! quorum with one authority forging its votes or silent, and every authority's books balance.

use std::time::Duration;

use specie_authority::Funding;
use specie_committee::{AuthorityBooks, Behaviour, Call, EmbeddedCommittee, EmbeddedCommitteeOptions, Pipeline};
use specie_fastpay::{deterministic_key, AccountKey, CoreAddress, Recipient, SigningKey, TransferOrder};
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
            pipeline.submit(order);
            redeemed += u128::from(matches!(recipient, Recipient::Core(_))) * 10;
        }
        let mut settled = 0;
        while settled < owners.len() {
            for (_, outcome) in pipeline.poll(Duration::from_secs(10)) {
                let settlement = outcome.expect("every correct payment settles");
                assert!(settlement.to_certificate <= settlement.to_settlement);
                settled += 1;
            }
        }
    }
    // Let the stragglers (the fourth authority's confirmations, cross-shard credits) finish.
    std::thread::sleep(Duration::from_millis(300));
    let reports = committee.reports();
    let authorities = committee.stop();
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
fn payments_settle_at_the_first_quorum_with_an_authority_forging_votes() {
    run_payments(Behaviour::ForgesVotes);
}

#[test]
fn payments_settle_with_an_authority_silent() {
    run_payments(Behaviour::Silent);
}
