//! `specie wallet fastpay` against real processes: a core and a committee of 4 authorities
//! (`specie cluster up --authorities`). One wallet funds an account from its core coins, pays
//! another wallet's account (whose owner checks the certificate offline), redeems back to the
//! core, and sees its balance at the authorities. Then the pending order: an order saved and
//! never sent is sent as it is by `sync`, and a wallet restored from a backup that lacks an
//! order one authority already voted on learns it from the authorities and finishes it instead
//! of signing another.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use secp256k1::Keypair;
use specie_cluster::Topology;
use specie_committee::http_client::Request;
use specie_committee::{AuthorityReply, HttpCommittee, HttpCommitteeOptions};
use specie_fastpay::{AccountKey, Recipient};
use specie_fastpay_wallet::FastpayWallet;
use specie_transaction::{MintTransaction, NonceMode, Output, SpecieTransaction};
use specie_wallet::{PaidOutput, PaymentString, WalletFile};

use crate::cluster_harness;

use cluster_harness::{cluster_up_with_committee, free_ports, Down, BIN};

/// Runs `specie wallet --wallet PATH ARGS…`; its exit code and standard output.
fn wallet(path: &Path, args: &[&str]) -> (i32, String) {
    let output = Command::new(BIN)
        .args(["wallet", "--wallet", path.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

fn ok(path: &Path, args: &[&str]) -> String {
    let (code, out) = wallet(path, args);
    assert_eq!(code, 0, "specie wallet {args:?}:\n{out}");
    out
}

/// Mints `value` to the wallet at `path` through the sentinel and imports it.
fn mint_to(dir: &str, sentinel: &str, path: &Path, value: u64) {
    let issuer_hex = std::fs::read_to_string(Path::new(dir).join("issuer.key")).unwrap();
    let issuer = Keypair::from_seckey_str_global(issuer_hex.trim()).unwrap();
    let address = WalletFile::load(path).unwrap().latest_address().unwrap();
    let output = Output {
        witness_program_commitment: address.witness_program_commitment(),
        value,
    };
    let mint = MintTransaction::new_signed(rand::random(), vec![output], &issuer, NonceMode::Randomized);
    let tx = SpecieTransaction::Mint(mint);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body: serde_json::Value = ureq::post(&format!("{sentinel}/v1/transactions"))
            .send_json(serde_json::json!({ "transactions": [hex::encode(specie_codec::Encode::encode(&tx))] }))
            .unwrap()
            .into_json()
            .unwrap();
        match body["results"][0]["status"].as_str() {
            Some("confirmed") => break,
            Some("busy") if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("mint: {other:?} {body}"),
        }
    }
    let payment = PaymentString::new(tx.txid(), vec![PaidOutput { index: 0, output }]);
    ok(path, &["import", &payment.encode()]);
}

fn committee_client(cluster_file: &Path) -> HttpCommittee {
    let config = Topology::load(cluster_file).unwrap().fastpay_committee.unwrap();
    let addresses = config.http_addresses();
    let committee = Arc::new(config.committee().unwrap());
    HttpCommittee::new(committee, addresses, HttpCommitteeOptions::default()).unwrap()
}

/// The line of `history` for transfer `sequence`.
fn sent_line(history: &str, sequence: u64) -> String {
    history
        .lines()
        .find(|line| line.trim_start().starts_with(&format!("sent #{sequence} ")))
        .unwrap_or_else(|| panic!("no transfer {sequence} in:\n{history}"))
        .to_string()
}

#[test]
fn fund_pay_verify_redeem_and_finish_a_pending_order_after_a_crash_and_a_restore() {
    let started = Instant::now();
    // The wallets this test reads hold FastPay fundings and redeems.
    specie_fastpay_wallet::install();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    cluster_up_with_committee(
        &dir,
        free_ports(4 + 8 + 3),
        &["--authorities", "--authority-shards", "1"],
    );
    let cluster_file = Path::new(&dir).join("cluster.toml");
    let cluster = cluster_file.to_str().unwrap();
    let topology = Topology::load(&cluster_file).unwrap();
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let alice = temp.path().join("alice.json");
    let bob = temp.path().join("bob.json");
    ok(&alice, &["create", "--node", &sentinel]);
    ok(&bob, &["create", "--node", &sentinel]);
    mint_to(&dir, &sentinel, &alice, 1_000);

    // Fund: core coins into a new account (the cluster file is remembered from here on).
    let out = ok(&alice, &["fastpay", "--cluster-file", cluster, "fund", "500"]);
    assert!(out.contains("4 of 4 authorities credited 500"), "{out}");
    assert!(ok(&alice, &["balance"]).contains("spendable:   500 usd"));
    let bob_account = ok(&bob, &["fastpay", "--cluster-file", cluster, "accounts", "--new"])
        .trim()
        .to_string();

    // Pay: the payee checks the certificate alone, against the committee in its wallet.
    let out = ok(&alice, &["fastpay", "pay", &bob_account, "120"]);
    let certificate = out.lines().last().unwrap().trim().to_string();
    let verified = ok(&bob, &["fastpay", "verify", &certificate]);
    assert!(
        verified.contains("amount:    120") && verified.contains(&bob_account),
        "{verified}"
    );
    let mut forged = hex::decode(&certificate).unwrap();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let (code, out) = wallet(&bob, &["fastpay", "verify", &hex::encode(forged)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("invalid"), "{out}");

    // Redeem: a transfer to the core, presented to the core.
    let out = ok(&alice, &["fastpay", "redeem", "100"]);
    assert!(out.contains("redeemed: 100 usd back in the core"), "{out}");
    assert!(ok(&alice, &["balance"]).contains("spendable:   600 usd"));
    let out = ok(&alice, &["fastpay", "balance"]);
    assert!(out.lines().next().unwrap().ends_with(" 280 usd"), "{out}");
    let out = ok(&bob, &["fastpay", "balance"]);
    assert!(out.lines().next().unwrap().ends_with(" 120 usd"), "{out}");

    // A crash after saving an order and before sending it: `sync` sends that order.
    let payee = AccountKey(hex::decode(&bob_account).unwrap().try_into().unwrap());
    let mut loaded = WalletFile::load(&alice).unwrap();
    let account = loaded.fastpay().unwrap().accounts()[0].key();
    let saved = loaded
        .fastpay_sign_order(&account, Recipient::Account(payee), 7, vec![])
        .unwrap();
    WalletFile::save(&alice, &loaded).unwrap();
    assert_eq!(saved.order.sequence, 2);
    let out = ok(&alice, &["fastpay", "sync"]);
    assert!(out.contains("pending order certified"), "{out}");
    assert!(sent_line(&ok(&alice, &["fastpay", "history"]), 2).contains(" 7 usd"));

    // A restore from a backup that lacks an order one authority has voted on (the crash came
    // while sending it): the wallet learns it back and finishes it, never signing another.
    let backup = temp.path().join("alice-backup.json");
    std::fs::copy(&alice, &backup).unwrap();
    let mut loaded = WalletFile::load(&alice).unwrap();
    let in_flight = loaded
        .fastpay_sign_order(&account, Recipient::Account(payee), 9, b"in flight".to_vec())
        .unwrap();
    WalletFile::save(&alice, &loaded).unwrap();
    let client = committee_client(&cluster_file);
    let voted = client.ask(0, Request::Transfer(in_flight));
    assert!(matches!(voted, AuthorityReply::Voted(_)), "{voted:?}");
    std::fs::copy(&backup, &alice).unwrap();
    // Paying now finishes the order the authorities know first: sequence 3 stays the 9.
    let out = ok(&alice, &["fastpay", "pay", &bob_account, "11"]);
    assert!(out.contains("transfer 4 of account"), "{out}");
    let history = ok(&alice, &["fastpay", "history"]);
    assert!(sent_line(&history, 3).contains(" 9 usd"), "{history}");
    assert!(sent_line(&history, 4).contains(" 11 usd"), "{history}");
    let out = ok(&bob, &["fastpay", "balance"]);
    assert!(out.lines().next().unwrap().ends_with(" 147 usd"), "{out}");
    assert!(sent_line(&history, 1).contains("redeemed"), "{history}");

    // A redeem a node called refused: the core wallet dropped it and its coin, and nothing is
    // lost: `sync` finds the core without its marker and presents it again, paid once.
    let mut loaded = WalletFile::load(&alice).unwrap();
    let recipient = loaded.fastpay_redeem_recipient(&mut rand::thread_rng()).unwrap();
    let order = loaded.fastpay_sign_order(&account, recipient, 5, vec![]).unwrap();
    WalletFile::save(&alice, &loaded).unwrap();
    let owner = loaded.fastpay().unwrap().accounts()[0].owner().clone();
    let certificate = client.pay_orders(&owner, vec![order]).unwrap().certificate;
    loaded.fastpay_on_certified(certificate).unwrap();
    let redeem = loaded.build_fastpay_redeem(&account, 5).unwrap();
    loaded.on_rejected(&redeem.txid()).unwrap();
    WalletFile::save(&alice, &loaded).unwrap();
    let out = ok(&alice, &["fastpay", "sync"]);
    assert!(
        out.contains("does not hold the redeem of transfer 5; presenting it again")
            && out.contains("redeemed: 5 usd back in the core"),
        "{out}"
    );
    assert!(ok(&alice, &["balance"]).contains("spendable:   605 usd"));
    assert!(sent_line(&ok(&alice, &["fastpay", "history"]), 5).contains("redeemed"));
    let out = ok(&alice, &["fastpay", "sync"]);
    assert!(!out.contains("presenting it again"), "{out}");

    // An order beyond the account's balance is refused, and each shard's metrics show its
    // votes, confirmations and fundings timed and that refusal counted by its name.
    let broke = specie_fastpay::TransferOrder {
        sender: account,
        recipient: Recipient::Account(payee),
        amount: 1 << 40,
        sequence: 6,
        memo: vec![],
    }
    .sign(&owner);
    let refused = client.ask(0, Request::Transfer(broke));
    assert!(format!("{refused:?}").contains("InsufficientBalance"), "{refused:?}");
    let scraped: String = (topology.authority_groups().iter())
        .flat_map(|group| group.replicas.iter())
        .map(|replica| {
            let url = format!("http://{}/metrics", replica.http);
            ureq::get(&url).call().unwrap().into_string().unwrap()
        })
        .collect();
    for call in ["order", "certificate", "funding"] {
        let timed = format!("specie_fastpay_call_duration_seconds_count{{call=\"{call}\"}}");
        assert!(
            scraped.lines().any(|line| line.starts_with(&timed)),
            "no {timed}: {scraped}"
        );
    }
    let counted = "specie_fastpay_refusals_total{call=\"order\",code=\"refused\",refusal=\"InsufficientBalance\"} 1";
    assert!(scraped.lines().any(|line| line.starts_with(counted)), "{scraped}");

    // The committee moves to epoch 2 (authority 1 gets a new key): the wallet learns it from
    // the cluster file, pays and redeems in its name; the payee's wallet checks the new epoch's
    // certificate; both wallets load back with certificates of both epochs.
    let rotated = cluster_harness::specie(&["cluster", "rotate-authority", "--dir", &dir, "--authority", "1"]);
    assert_eq!(String::from_utf8_lossy(&rotated.stdout).lines().last(), Some("2"));
    let out = ok(&alice, &["fastpay", "pay", &bob_account, "3"]);
    let certificate = out.lines().last().unwrap().trim().to_string();
    let verified = ok(&bob, &["fastpay", "verify", &certificate]);
    assert!(
        verified.contains("final for committee epoch 2") && verified.contains("amount:    3"),
        "{verified}"
    );
    let out = ok(&alice, &["fastpay", "redeem", "4"]);
    assert!(out.contains("redeemed: 4 usd back in the core"), "{out}");
    let out = ok(&bob, &["fastpay", "balance"]);
    assert!(out.lines().next().unwrap().ends_with(" 150 usd"), "{out}");
    let loaded = WalletFile::load(&alice).unwrap();
    assert_eq!(loaded.fastpay().unwrap().chain().current().epoch(), 2);

    // Refused fundings are dropped only on the user's word.
    let (code, out) = wallet(&alice, &["fastpay", "forget-refused"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("--yes"), "{out}");
    assert!(ok(&alice, &["fastpay", "forget-refused", "--yes"]).contains("forgot 0 refused fundings"));
    eprintln!("took {:?}", started.elapsed());
}
