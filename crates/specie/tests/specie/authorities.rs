//! FastPay authorities as real processes of a cluster, beside the online core that is their
//! Primary: 4 authorities × 2 shards, each shard its own `specie authority` process. Accounts are
//! funded from the core (wallet-signed fundings confirmed through a sentinel, then posted to the
//! authorities, each of which finds the funding in the core's UHS itself); payments run across
//! shards under load while one authority shard is `kill -9`ed and restarted. Then: every payment
//! a client saw settled is settled at a quorum, the restarted shard still holds every
//! confirmation it gave, it never signed two different orders for one account and sequence
//! number (every vote it ever returned, compared; and conflicting orders sent to it now are
//! refused), every authority's books balance, and with one authority killed for good payments
//! still settle (f = 1).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use specie_authority::shard_of;
use specie_cluster::Topology;
use specie_codec::Encode;
use specie_committee::http_api::BODY_BYTES_MAX;
use specie_committee::http_client::Request;
use specie_committee::{
    AuthorityReply, FundWait, HttpCommittee, HttpCommitteeOptions, Observed, PayError, PaymentError,
};
use specie_fastpay::{
    deterministic_key, AccountKey, AuthorityIndex, Certificate, Committee, Recipient, SignedOrder, SigningKey,
    TransferOrder,
};
use specie_fastpay_primary::FastpayFunding;
use specie_transaction::SpecieTransaction;

use crate::cluster_harness;

use cluster_harness::authority_state::{check_books, history, mint_and_sign_fundings};
use cluster_harness::{cluster_up_with_committee, confirm_in_core, free_ports, kill_9, specie, Down};

const ACCOUNTS: usize = 8;
const PAYERS: usize = 4;
const FUNDING: u64 = 1_000_000;
/// The authority one of whose shards is killed and restarted, and that shard.
const RESTARTED: (AuthorityIndex, u32) = (1, 0);
/// The authority killed for good at the end.
const GONE: AuthorityIndex = 3;

struct Account {
    owner: SigningKey,
    key: AccountKey,
    next_sequence: u64,
    /// An order sent whose payment did not end: sent again as it is (a new order for its
    /// sequence number would make the owner equivocate).
    unsettled: Option<SignedOrder>,
}

/// Mints to one core key per account, moves each output whole into its account by a funding the
/// core confirms, and posts every funding to every authority.
fn fund(dir: &str, topology: &Topology, client: &HttpCommittee, accounts: &[&Account]) {
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    let (mint, fundings) = mint_and_sign_fundings(dir, topology, client.committee().id(), &keys, FUNDING);
    let txs: Vec<SpecieTransaction> = fundings.iter().cloned().map(SpecieTransaction::from).collect();
    // An authority takes a funding only once it is in the core: before, it is refused.
    let early = client.fund(accounts[0].key, txs[0].encode(), FundWait::All);
    assert!(
        early
            .values()
            .all(|reply| matches!(reply, AuthorityReply::Unavailable(why) if why.contains("funding_unconfirmed"))),
        "{early:?}"
    );
    confirm_in_core(&sentinel, &txs);
    check_bad_input(topology, &mint, &fundings);
    for (account, tx) in accounts.iter().zip(&txs) {
        let replies = client.fund(account.key, tx.encode(), FundWait::All);
        assert_eq!(replies.len(), client.committee().size(), "{replies:?}");
        assert!(
            replies
                .values()
                .all(|reply| matches!(reply, AuthorityReply::Funded { .. })),
            "{replies:?}"
        );
    }
}

/// The status and error code an authority shard answers `body` with.
fn answer(url: &str, body: Option<&[u8]>) -> (u16, String) {
    let response = match body {
        Some(body) => ureq::post(url).send_bytes(body),
        None => ureq::get(url).call(),
    };
    let (status, response) = match response {
        Ok(response) => (response.status(), response),
        Err(ureq::Error::Status(status, response)) => (status, response),
        Err(error) => panic!("{url}: {error}"),
    };
    let json: serde_json::Value = response.into_json().unwrap_or_default();
    let code = json["error"]["code"].as_str().unwrap_or("").to_string();
    let refusal = json["error"]["refusal"]
        .as_str()
        .map(|r| format!(" {r}"))
        .unwrap_or_default();
    (status, code + &refusal)
}

/// Bad input gets a 4xx that names what is wrong, and the authority serves on.
fn check_bad_input(topology: &Topology, mint: &SpecieTransaction, fundings: &[FastpayFunding]) {
    let group = &topology.fastpay_committee.as_ref().unwrap().authorities[0].shards[0];
    let api = format!("http://{}", group.replicas[0].http);
    assert_eq!(
        answer(&format!("{api}/v1/fastpay/orders"), Some(b"xyz")),
        (400, "bad_body".into())
    );
    assert_eq!(
        // One byte over: the server has read all but that byte when it answers, so the client is
        // not still writing (and failing with a broken pipe) when the connection closes.
        answer(
            &format!("{api}/v1/fastpay/certificates"),
            Some(&vec![1; BODY_BYTES_MAX + 1])
        ),
        (413, "body_too_large".into())
    );
    assert_eq!(
        answer(&format!("{api}/v1/fastpay/accounts/zz"), None),
        (400, "bad_account".into())
    );
    assert_eq!(
        answer(&format!("{api}/v1/fastpay/fundings"), Some(&mint.encode())),
        (422, "not_a_funding".into())
    );
    let mut other_committee = fundings[0].clone();
    other_committee.committee_id = [7; 32];
    let bytes = SpecieTransaction::from(other_committee).encode();
    assert_eq!(
        answer(&format!("{api}/v1/fastpay/fundings"), Some(&bytes)),
        (422, "wrong_committee".into())
    );
    let elsewhere = fundings
        .iter()
        .find(|f| shard_of(&f.account, 2) != 0)
        .expect("an account of shard 1");
    let bytes = SpecieTransaction::from(elsewhere.clone()).encode();
    assert_eq!(
        answer(&format!("{api}/v1/fastpay/fundings"), Some(&bytes)),
        (421, "refused WrongShard".into())
    );
    assert_eq!(answer(&format!("{api}/v1/fastpay/info"), None).0, 200);
}

/// What the payers learned.
#[derive(Default)]
struct Ledger {
    settled: Vec<Certificate>,
    /// When each payment of `settled` settled, in order.
    settled_at: Vec<Instant>,
    failed: Vec<String>,
}

/// One payer: pays from its accounts, in turn, to any account, until `stop`.
fn pay_until(
    client: &HttpCommittee,
    accounts: &mut [Account],
    keys: &[AccountKey],
    ledger: &Mutex<Ledger>,
    stop: &AtomicBool,
) {
    let mut turn = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let account = &mut accounts[turn % accounts.len()];
        turn += 1;
        let order = account.unsettled.take().unwrap_or_else(|| {
            TransferOrder {
                sender: account.key,
                recipient: Recipient::Account(keys[rand::random::<usize>() % keys.len()]),
                amount: 1 + rand::random::<u64>() % 5,
                sequence: account.next_sequence,
                memo: Vec::new(),
            }
            .sign(&account.owner)
        });
        match client.pay(&account.owner, order.clone()) {
            Ok(settlement) => {
                account.next_sequence += 1;
                let mut ledger = ledger.lock().unwrap();
                ledger.settled.push(settlement.certificate);
                ledger.settled_at.push(Instant::now());
            }
            Err(error) => {
                let certificate = match &error {
                    PayError::Payment(PaymentError::NotSettled { certificate, .. }) => Some(certificate.clone()),
                    PayError::TimedOut { certificate, .. } => certificate.clone(),
                    PayError::Payment(_) => None,
                };
                ledger.lock().unwrap().failed.push(error.to_string());
                // Certified is final: the next payment's catch-ups settle it where it is missing.
                match certificate {
                    Some(_) => account.next_sequence += 1,
                    None => account.unsettled = Some(order),
                }
            }
        }
    }
}

/// Whether the restarted shard gave a vote among `observations`.
fn voted_since(observations: &[Observed]) -> bool {
    observations.iter().any(|o| {
        o.authority == RESTARTED.0
            && matches!(&o.request, Request::Transfer(order) if shard_of(&order.order.sender, 2) == RESTARTED.1)
            && matches!(o.reply, AuthorityReply::Voted(_))
    })
}

/// A cluster with a core of one replica per group and one sentinel, and the committee `committee`
/// says (`cluster up` options); a client of the committee, and what it observes.
fn start(
    dir: &str,
    base: u16,
    committee: &[&str],
    request_timeout: Duration,
) -> (Topology, HttpCommittee, crossbeam_channel::Receiver<Observed>) {
    cluster_up_with_committee(dir, base, committee);
    let topology = Topology::load(&Path::new(dir).join("cluster.toml")).unwrap();
    let config = topology.fastpay_committee.clone().unwrap();
    let committee: Committee = config.committee().unwrap();
    let addresses = config.http_addresses();
    let (observer, observed) = crossbeam_channel::unbounded();
    let options = HttpCommitteeOptions {
        request_timeout,
        payment_timeout: Duration::from_secs(30),
        observer: Some(observer),
        ..HttpCommitteeOptions::default()
    };
    let client = HttpCommittee::new(Arc::new(committee), addresses, options).unwrap();
    (topology, client, observed)
}

/// [`start`] with 4 authorities × 2 shards beside a core with the ledger of record.
fn start_four_by_two(dir: &str) -> (Topology, HttpCommittee, crossbeam_channel::Receiver<Observed>) {
    start(
        dir,
        // Core 4, sentinel 3, authorities 4 × 2 shards × (wire + HTTP), one archiver (wire and
        // metrics), and spare.
        free_ports(4 + 3 + 16 + 4),
        &["--authorities", "--authority-shards", "2", "--ledger-of-record", "1"],
        Duration::from_secs(5),
    )
}

/// The platform's supply report, with authority 0's shards read over HTTP.
fn supply_report(topology: &Topology) -> serde_json::Value {
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let shards: Vec<String> = topology.fastpay_committee.as_ref().unwrap().http_addresses()[0]
        .shards
        .iter()
        .map(|replicas| replicas.join(","))
        .collect();
    let mut args = vec!["audit", "supply", "--node", &sentinel, "--json"];
    for urls in &shards {
        args.extend(["--fastpay-shard", urls.as_str()]);
    }
    serde_json::from_slice(&specie(&args).stdout).unwrap()
}

/// The platform's supply report agrees with the committee's books: everything minted was funded
/// into the committee, and authority 0's shards, read over HTTP, hold exactly that.
fn check_supply(topology: &Topology) {
    let report = supply_report(topology);
    let funded = ((ACCOUNTS as u64 + 1) * FUNDING).to_string();
    assert_eq!(
        (&report["ok"], &report["supply"]["issued"]),
        (&true.into(), &funded.as_str().into()),
        "{report}"
    );
    let row = &report["modes"][0];
    assert_eq!(
        (&row["role"], &row["core_says"], &row["agrees"]),
        (&"fastpay_committee".into(), &funded.as_str().into(), &true.into()),
        "{report}"
    );
    assert_eq!(row["books"]["holds"].to_string(), funded, "{report}");
}

fn owner_account(n: u64) -> Account {
    let owner = deterministic_key("authorities-test-owner", n);
    Account {
        key: AccountKey(owner.verifying_key().to_bytes()),
        owner,
        next_sequence: 0,
        unsettled: None,
    }
}

fn order(account: &Account, recipient: AccountKey, amount: u64, memo: &[u8]) -> SignedOrder {
    TransferOrder {
        sender: account.key,
        recipient: Recipient::Account(recipient),
        amount,
        sequence: account.next_sequence,
        memo: memo.to_vec(),
    }
    .sign(&account.owner)
}

#[test]
fn authority_processes_survive_kill_9_and_settle_with_one_authority_gone() {
    let started = Instant::now();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    let (topology, client, observed) = start_four_by_two(&dir);
    let mut accounts: Vec<Account> = (0..ACCOUNTS as u64).map(owner_account).collect();
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    assert!(keys.iter().any(|k| shard_of(k, 2) == 0) && keys.iter().any(|k| shard_of(k, 2) == 1));
    // An account of the shard to be killed that only this test's probe pays from.
    let mut probe = (ACCOUNTS as u64..)
        .map(owner_account)
        .find(|a| shard_of(&a.key, 2) == RESTARTED.1)
        .unwrap();
    let funded: Vec<&Account> = accounts.iter().chain([&probe]).collect();
    fund(&dir, &topology, &client, &funded);
    let funded_keys: Vec<AccountKey> = funded.iter().map(|a| a.key).collect();
    let owners: BTreeMap<AccountKey, SigningKey> = funded.iter().map(|a| (a.key, a.owner.clone())).collect();

    // A vote of the shard about to be killed, for an order no other authority has seen.
    let pending = order(&probe, keys[0], 7, b"pending at the killed shard");
    let voted = client.ask(RESTARTED.0, Request::Transfer(pending.clone()));
    assert!(matches!(voted, AuthorityReply::Voted(_)), "{voted:?}");

    // Payments under load; the shard killed with SIGKILL and restarted meanwhile.
    let ledger = Mutex::new(Ledger::default());
    let stop = AtomicBool::new(false);
    let restarted = format!("authority-{}-shard-{}-1", RESTARTED.0, RESTARTED.1);
    let mut observations: Vec<Observed> = vec![];
    std::thread::scope(|scope| {
        for chunk in accounts.chunks_mut(ACCOUNTS / PAYERS) {
            let (client, keys, ledger, stop) = (&client, &keys, &ledger, &stop);
            scope.spawn(move || pay_until(client, chunk, keys, ledger, stop));
        }
        std::thread::sleep(Duration::from_secs(2));
        kill_9(&dir, &restarted);
        std::thread::sleep(Duration::from_secs(2));
        specie(&["cluster", "up", "--dir", &dir]);
        observations.extend(observed.try_iter());
        let restarted_at = observations.len();
        // Load goes on until the restarted shard votes again (once it has caught up on what
        // settled while it was down).
        let deadline = Instant::now() + Duration::from_secs(30);
        while !voted_since(&observations[restarted_at..]) {
            assert!(
                Instant::now() < deadline,
                "the restarted shard voted on nothing after its restart"
            );
            std::thread::sleep(Duration::from_millis(100));
            observations.extend(observed.try_iter());
        }
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
    });
    let ledger = ledger.into_inner().unwrap();
    assert!(
        ledger.settled.len() > 40,
        "too little load: {} settled",
        ledger.settled.len()
    );
    assert!(ledger.failed.is_empty(), "payments failed: {:?}", ledger.failed);
    observations.extend(observed.try_iter());

    // Durable before it answered: the same vote again, a conflicting order refused, and the
    // payment settles.
    assert_eq!(client.ask(RESTARTED.0, Request::Transfer(pending.clone())), voted);
    let conflicting = order(&probe, keys[1], 7, b"conflicting");
    let refused = client.ask(RESTARTED.0, Request::Transfer(conflicting));
    assert!(
        matches!(&refused, AuthorityReply::Refused { refusal, .. } if refusal == "OtherOrderPending"),
        "{refused:?}"
    );
    client.pay(&probe.owner, pending).expect("the pending payment settles");
    probe.next_sequence += 1;

    let histories: Vec<_> = (0..4)
        .map(|authority| histories(&client, authority, &funded_keys))
        .collect();
    check_settled_everywhere(&histories, &ledger.settled);
    check_restarted_shard(&client, &histories[usize::from(RESTARTED.0)], &observations, &owners);
    check_books(&topology, 4 * 2, (ACCOUNTS as u64 + 1) * FUNDING);
    check_supply(&topology);

    // An owner who signs two orders and splits the committee gets the account back: the recovery
    // round goes over the HTTP API (round changes, a proposal, a lock, commits).
    let (first, second) = (
        order(&probe, keys[2], 3, b"first"),
        order(&probe, keys[3], 4, b"second"),
    );
    for authority in [2, 3] {
        let voted = client.ask(authority, Request::Transfer(second.clone()));
        assert!(matches!(voted, AuthorityReply::Voted(_)), "{voted:?}");
    }
    let recovered = client
        .pay_orders(&probe.owner, vec![first.clone(), second.clone()])
        .expect("the split slot settles");
    assert!(recovered.round >= 1, "settled in round {}", recovered.round);
    assert_eq!(recovered.certificate.check(client.committee()), Ok(()));
    assert!([&first, &second].contains(&&recovered.certificate.order));
    probe.next_sequence += 1;

    // f = 1: one authority gone for good; every account still pays (the restarted shard, behind
    // on what settled while it was down, is caught up by the client on the way).
    for shard in 0..2 {
        kill_9(&dir, &format!("authority-{GONE}-shard-{shard}-1"));
    }
    for account in accounts.iter_mut().chain([&mut probe]) {
        for _ in 0..2 {
            let order = account
                .unsettled
                .take()
                .unwrap_or_else(|| order(account, keys[account.next_sequence as usize % keys.len()], 1, b""));
            let settlement = client.pay(&account.owner, order.clone()).unwrap_or_else(|error| {
                let at_x = client.ask(
                    RESTARTED.0,
                    Request::Account {
                        account: account.key,
                        from_sequence: u64::MAX,
                    },
                );
                panic!(
                    "with authority {GONE} gone: {error}\nours: {order:?}\nat {}: {at_x:?}",
                    RESTARTED.0
                )
            });
            assert!(!settlement.confirmed_by.contains(&GONE));
            account.next_sequence += 1;
        }
    }
    check_books(&topology, 3 * 2, (ACCOUNTS as u64 + 1) * FUNDING);
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "took {:?}",
        started.elapsed()
    );
}

/// Every certificate each account has confirmed at `authority`, by sequence number.
fn histories(
    client: &HttpCommittee,
    authority: AuthorityIndex,
    accounts: &[AccountKey],
) -> BTreeMap<AccountKey, Vec<Certificate>> {
    accounts
        .iter()
        .map(|account| (*account, history(client, authority, *account)))
        .collect()
}

/// Every certificate a payer saw settle is confirmed now at a quorum of authorities.
fn check_settled_everywhere(histories: &[BTreeMap<AccountKey, Vec<Certificate>>], settled: &[Certificate]) {
    for certificate in settled {
        let order = &certificate.order.order;
        let holding = histories
            .iter()
            .filter(|h| {
                h[&order.sender]
                    .get(order.sequence as usize)
                    .is_some_and(|c| c.order == certificate.order)
            })
            .count();
        assert!(
            holding >= 3,
            "a settled payment is confirmed at {holding} authorities: {order:?}"
        );
    }
}

/// The restarted shard kept every confirmation it gave and never voted for two orders of one
/// account and sequence number, and it refuses conflicting orders now.
fn check_restarted_shard(
    client: &HttpCommittee,
    history: &BTreeMap<AccountKey, Vec<Certificate>>,
    observations: &[Observed],
    owners: &BTreeMap<AccountKey, SigningKey>,
) {
    let (authority, shard) = RESTARTED;
    let mine = |o: &&Observed| o.authority == authority;
    let mut voted: BTreeMap<(AccountKey, u64), BTreeSet<[u8; 32]>> = BTreeMap::new();
    let mut confirmed: BTreeSet<(AccountKey, u64)> = BTreeSet::new();
    for observation in observations.iter().filter(mine) {
        match (&observation.request, &observation.reply) {
            (Request::Transfer(order), AuthorityReply::Voted(vote)) => {
                voted
                    .entry((order.order.sender, order.order.sequence))
                    .or_default()
                    .insert(vote.statement.order_digest);
            }
            (Request::Confirm(certificates), AuthorityReply::Confirmed { sender, sequence }) => {
                assert!(certificates.iter().any(|c| c.order.order.sender == *sender));
                confirmed.insert((*sender, *sequence));
            }
            _ => {}
        }
    }
    let on_shard = |account: &AccountKey| shard_of(account, 2) == shard;
    assert!(
        voted.keys().filter(|(a, _)| on_shard(a)).count() > 10,
        "too few votes of the restarted shard"
    );
    for ((account, sequence), digests) in &voted {
        assert_eq!(
            digests.len(),
            1,
            "authority {authority} signed two orders for {account:?} #{sequence}"
        );
    }
    for (account, sequence) in &confirmed {
        assert!(
            history[account].len() as u64 > *sequence,
            "a confirmation authority {authority} gave was lost: {account:?} #{sequence}"
        );
    }
    // Conflicting orders for what it voted on: never a second vote.
    for (account, sequence) in voted.keys().filter(|(a, _)| on_shard(a)).step_by(7) {
        let conflicting = TransferOrder {
            sender: *account,
            recipient: Recipient::Account(*account),
            amount: 1,
            sequence: *sequence,
            memo: b"conflicting".to_vec(),
        }
        .sign(&owners[account]);
        let reply = client.ask(authority, Request::Transfer(conflicting));
        assert!(
            matches!(reply, AuthorityReply::Refused { .. }),
            "a conflicting order for {account:?} #{sequence}: {reply:?}"
        );
    }
}

/// The replica of `group` that leads, by asking each one's API.
fn leader_of(group: &specie_cluster::AuthorityGroup) -> specie_cluster::AuthorityReplica {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leading = group.replicas.iter().find(|replica| {
            ureq::get(&format!("http://{}/v1/fastpay/info", replica.http))
                .call()
                .ok()
                .and_then(|r| r.into_json::<serde_json::Value>().ok())
                .is_some_and(|info| info["leader"] == true)
        });
        if let Some(leader) = leading {
            return leader.clone();
        }
        assert!(Instant::now() < deadline, "{} has no leader", group.name);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An authority whose shards are groups of three replicas: followers send clients to the leader,
/// and when the leader of a shard is killed with SIGKILL, another takes over with the same votes:
/// the vote given before is given again, a conflicting order is refused, payments settle.
#[test]
fn an_authority_shard_of_three_replicas_fails_over_without_a_second_vote() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    let committee = [
        "--authorities",
        "1",
        "--authority-shards",
        "2",
        "--authority-replicas",
        "3",
    ];
    // A request may wait out an election: up to 2 election time-outs, slower on a loaded machine.
    let (topology, client, _observed) = start(&dir, free_ports(4 + 3 + 12), &committee, Duration::from_secs(15));
    let mut accounts: Vec<Account> = (0..)
        .map(|n| owner_account(1000 + n))
        .filter(|a| shard_of(&a.key, 2) == 0)
        .take(2)
        .chain(
            (0..)
                .map(|n| owner_account(2000 + n))
                .filter(|a| shard_of(&a.key, 2) == 1)
                .take(2),
        )
        .collect();
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    fund(&dir, &topology, &client, &accounts.iter().collect::<Vec<_>>());

    let group = topology.authority_group("authority-0-shard-0").unwrap();
    let leader = leader_of(&group);
    for follower in group.replicas.iter().filter(|r| r.id != leader.id) {
        let url = format!("http://{}/v1/fastpay/orders", follower.http);
        let mut bytes = vec![];
        order(&accounts[0], keys[2], 1, b"").encode_to(&mut bytes);
        let Err(ureq::Error::Status(503, response)) = ureq::post(&url).send_bytes(&bytes) else {
            panic!("a follower served an order")
        };
        let body: serde_json::Value = response.into_json().unwrap();
        assert_eq!(body["error"]["code"], "not_leader", "{body}");
        assert_eq!(body["error"]["leader"], leader.id, "{body}");
        assert_eq!(body["error"]["leader_http"], leader.http.to_string(), "{body}");
    }

    let pending = order(&accounts[0], keys[2], 7, b"pending across the failover");
    let voted = client.ask(0, Request::Transfer(pending.clone()));
    assert!(matches!(voted, AuthorityReply::Voted(_)), "{voted:?}");
    let pay_each = |accounts: &mut [Account]| {
        for account in accounts.iter_mut() {
            let order = order(account, keys[(account.next_sequence as usize + 1) % keys.len()], 1, b"");
            client
                .pay(&account.owner, order)
                .unwrap_or_else(|error| panic!("{error}"));
            account.next_sequence += 1;
        }
    };
    pay_each(&mut accounts[1..]);

    kill_9(&dir, &format!("{}-{}", group.name, leader.id));
    pay_each(&mut accounts[1..]);
    assert_ne!(leader_of(&group).id, leader.id);
    assert_eq!(client.ask(0, Request::Transfer(pending.clone())), voted);
    let refused = client.ask(0, Request::Transfer(order(&accounts[0], keys[3], 7, b"conflicting")));
    assert!(
        matches!(&refused, AuthorityReply::Refused { refusal, .. } if refusal == "OtherOrderPending"),
        "{refused:?}"
    );
    client
        .pay(&accounts[0].owner, pending)
        .expect("the pending payment settles");
    check_books(&topology, 2, accounts.len() as u64 * FUNDING);
}

/// The authority whose key is rotated.
const ROTATED: AuthorityIndex = 2;
/// The longest payments may stop while a committee changes epoch with real processes (one
/// machine, debug build, payers at full speed).
const EPOCH_STALL_MS_MAX: u128 = 2_000;

/// The committee moves from epoch 1 to 2 with a new key for one authority (`specie cluster
/// rotate-authority`) while payers pay: no payment fails (a payer that hears of the epoch learns
/// its record and pays again in its name), payments after it are certified in epoch 2's name
/// with the rotated seat voting under its new key on the data the old key left (a vote it gave
/// in epoch 1 for an order still open is given again, and a conflicting order refused), the
/// books and the platform's supply audit hold, and the core takes a redeem certified in epoch 2
/// (its sentinels follow the cluster file's records).
#[test]
fn a_committee_rotates_an_authority_key_under_load_and_the_audit_holds() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    let (topology, client, observed) = start_four_by_two(&dir);
    let mut accounts: Vec<Account> = (100..100 + ACCOUNTS as u64).map(owner_account).collect();
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    let mut probe = owner_account(200);
    let funded: Vec<&Account> = accounts.iter().chain([&probe]).collect();
    fund(&dir, &topology, &client, &funded);
    // An order the rotated seat votes for in epoch 1 and that stays open across the change.
    let open = order(&probe, keys[0], 7, b"open across the epochs");
    assert!(matches!(
        client.ask(ROTATED, Request::Transfer(open.clone())),
        AuthorityReply::Voted(_)
    ));

    let ledger = Mutex::new(Ledger::default());
    let stop = AtomicBool::new(false);
    let rotated = std::thread::scope(|scope| {
        for chunk in accounts.chunks_mut(ACCOUNTS / PAYERS) {
            let (client, keys, ledger, stop) = (&client, &keys, &ledger, &stop);
            scope.spawn(move || pay_until(client, chunk, keys, ledger, stop));
        }
        std::thread::sleep(Duration::from_secs(2));
        let before = ledger.lock().unwrap().settled.len();
        let rotating = Instant::now();
        let output = specie(&["cluster", "rotate-authority", "--dir", &dir, "--authority", "2"]);
        let rotated = Instant::now();
        // Load goes on until payments settle in epoch 2 with the rotated seat voting again.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !observed.try_iter().any(|o| {
            o.authority == ROTATED
                && matches!(&o.reply, AuthorityReply::Voted(v) if v.statement.committee_id != client.committee().id())
        }) {
            assert!(
                Instant::now() < deadline,
                "the rotated seat voted on nothing in epoch 2"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        (before, output, rotating, rotated)
    });
    let (before, output, rotating, rotated) = rotated;
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().last(), Some("2"));
    let ledger = ledger.into_inner().unwrap();
    assert!(ledger.failed.is_empty(), "payments failed: {:?}", ledger.failed);
    let epoch_two = client.current();
    assert_eq!(
        epoch_two.epoch(),
        2,
        "the client learned the epoch from the authorities"
    );
    let in_epoch_two = ledger
        .settled
        .iter()
        .filter(|c| c.committee_id == epoch_two.id())
        .count();
    assert!(
        before > 10 && in_epoch_two > 10,
        "settled {before} before, {in_epoch_two} in epoch 2"
    );
    // The stall bound: while the command ran, payments never stopped for longer than
    // EPOCH_STALL_MS_MAX (docs/byzantine-mode.md, "The stall bound").
    let during: Vec<Instant> = ledger.settled_at.iter().copied().filter(|at| *at >= rotating).collect();
    let longest_ms = std::iter::once(rotating)
        .chain(during.iter().copied().filter(|at| *at <= rotated))
        .chain(during.iter().copied().find(|at| *at > rotated))
        .collect::<Vec<_>>()
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).as_millis())
        .max()
        .unwrap_or(u128::MAX);
    eprintln!(
        "rotation: {} ms; longest pause between settlements {longest_ms} ms; {before} settled before, {in_epoch_two} in epoch 2",
        (rotated - rotating).as_millis()
    );
    assert!(longest_ms < EPOCH_STALL_MS_MAX, "payments stalled {longest_ms} ms");

    // The file holds the record, the seat's key file the new key (the old one is gone), and a
    // client reading the file alone starts in epoch 2.
    let reloaded = Topology::load(&Path::new(&dir).join("cluster.toml")).unwrap();
    let chain = reloaded.fastpay_committee.as_ref().unwrap().chain().unwrap();
    assert_eq!(chain.current(), &*epoch_two);
    let key = specie_cluster::credentials::authority_key(&reloaded, ROTATED).unwrap();
    assert_eq!(
        epoch_two.members()[usize::from(ROTATED)],
        key.verifying_key().to_bytes()
    );
    assert_ne!(
        client.committee().members()[usize::from(ROTATED)],
        key.verifying_key().to_bytes()
    );
    let pki = &reloaded.pki_dir;
    assert!(!pki.join(format!("authority-{ROTATED}.fastpay.key.next")).exists());

    // The ledger of record keeps the record, as a FastPay epoch transaction, and no other
    // successor of epoch 1's committee: a rival record endorsed by the same quorum of epoch 1
    // (seat 2 given another key) is refused.
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let record = chain.records().last().unwrap().clone();
    let kept = SpecieTransaction::from(specie_fastpay_primary::FastpayEpoch { record: record.clone() });
    let deadline = Instant::now() + Duration::from_secs(30);
    let entry = loop {
        let url = format!("{sentinel}/v1/ledger/transactions/{}", hex::encode(kept.txid().0));
        if let Ok(response) = ureq::get(&url).call() {
            break response.into_json::<serde_json::Value>().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the ledger of record does not hold epoch 2's record"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        entry["record"].as_str().unwrap().contains(&hex::encode(kept.encode())),
        "{entry}"
    );
    let mut rival = specie_fastpay::CommitteeRecord::propose(chain.first(), {
        let mut members = chain.first().members().to_vec();
        members[usize::from(ROTATED)] = [9; 32];
        members
    })
    .unwrap();
    for seat in (0..4).filter(|seat| *seat != ROTATED) {
        rival.endorse(
            seat,
            &specie_cluster::credentials::authority_key(&reloaded, seat).unwrap(),
        );
    }
    assert_eq!(
        rival.check(chain.first()),
        Ok(()),
        "a quorum of epoch 1 endorses the rival"
    );
    let rival = SpecieTransaction::from(specie_fastpay_primary::FastpayEpoch { record: rival });
    // The sentinels know epoch 2 and refuse the rival; the same record again passes them and
    // is refused by the shards, whose UHS holds the marker of epoch 1's one successor.
    let results = cluster_harness::submit_results(&sentinel, &[rival, kept]);
    assert_eq!(
        (&results[0]["status"], &results[0]["code"]),
        (&"invalid".into(), &"epoch_conflicts".into()),
        "{results:?}"
    );
    assert_eq!(results[1]["status"], "rejected", "{results:?}");

    // The seat's promise of epoch 1 holds under the new key: the same order gets its vote, now
    // in epoch 2's name; another order for the slot is refused; the open payment settles.
    let voted = client.ask(ROTATED, Request::Transfer(open.clone()));
    assert!(
        matches!(&voted, AuthorityReply::Voted(v) if v.statement.committee_id == epoch_two.id() && v.authority == ROTATED),
        "{voted:?}"
    );
    let conflicting = order(&probe, keys[1], 7, b"conflicting");
    assert!(matches!(
        client.ask(ROTATED, Request::Transfer(conflicting)),
        AuthorityReply::Refused { refusal, .. } if refusal == "OtherOrderPending"
    ));
    let settled = client
        .pay(&probe.owner, open)
        .expect("the open payment settles in epoch 2");
    assert_eq!(settled.certificate.check(&epoch_two), Ok(()));
    probe.next_sequence += 1;

    check_books(&topology, 4 * 2, (ACCOUNTS as u64 + 1) * FUNDING);
    check_supply(&topology);

    // A redeem certified in epoch 2: the core takes it (its sentinels follow the records), and
    // the audit still agrees with the committee's books.
    let redeem = TransferOrder {
        sender: probe.key,
        recipient: Recipient::Core(specie_fastpay::CoreAddress([7; 32])),
        amount: 1_000,
        sequence: probe.next_sequence,
        memo: Vec::new(),
    }
    .sign(&probe.owner);
    let certificate = client
        .pay(&probe.owner, redeem)
        .expect("the redeem is certified")
        .certificate;
    assert_eq!(certificate.committee_id, epoch_two.id());
    let tx = SpecieTransaction::from(specie_fastpay_primary::FastpayRedeem::new(certificate));
    confirm_in_core(&sentinel, &[tx]);
    // Once the ledger of record holds the redeem: the committee's one row counts it as
    // returned (though certified under epoch 2's committee id), nothing as still certified.
    let funded = (ACCOUNTS as u64 + 1) * FUNDING;
    let deadline = Instant::now() + Duration::from_secs(30);
    let report = loop {
        let report = supply_report(&topology);
        if report["supply"]["ledger"]["undecided"] == 0 && report["supply"]["ledger"]["waiting"] == 0 {
            break report;
        }
        assert!(
            Instant::now() < deadline,
            "the ledger did not take the redeem: {report}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(report["ok"], true, "{report}");
    let rows = report["modes"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(
        (&rows[0]["core_says"], &rows[0]["agrees"]),
        (&(funded - 1_000).to_string().into(), &true.into()),
        "{report}"
    );
    assert_eq!(rows[0]["books"]["parts"][2][1], 0, "{report}");
}
