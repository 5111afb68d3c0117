//! A trader's whole round trip through `specie exchange` commands only, with real processes on
//! 127.0.0.1: two cores (usd and eur, each with its own issuer, banking for the exchange's
//! bridge key) and the exchange. Alice and Bob are minted on their cores, deposit into the
//! exchange from their wallets (the first deposit opens each account), offer both ways, trade,
//! Alice pays Bob and withdraws what she bought back to an eur core wallet; an overdraft and a
//! malformed price are refused with clear messages.

use crate::cluster_harness;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use cluster_harness::offline_devices::{core_wallet, run};
use cluster_harness::start_serving;
use serde_json::Value;

/// `specie wallet create --issuer` for currency `hrp`; its issuer key.
fn issuer_wallet(path: &Path, hrp: &str) -> String {
    let created = core_wallet(path, &["create", "--issuer", "--hrp", hrp]);
    created
        .lines()
        .find_map(|line| line.strip_prefix("issuer public key: "))
        .expect("an issuer key")
        .to_string()
}

/// A core for `hrp` with `issuer` on `listen`, banking for the exchange's `bridge`.
fn start_core(dir: &Path, listen: &str, hrp: &str, issuer: &str, bridge: &str) -> (Child, String) {
    start_serving(&[
        "node",
        "--listen",
        listen,
        "--hrp",
        hrp,
        "--issuer",
        issuer,
        "--exchange",
        bridge,
        "--data-dir",
        dir.join(hrp).to_str().unwrap(),
    ])
}

/// A new `hrp` wallet at `path` on `node`, minted `amount` by `issuer` (unless 0).
fn wallet(issuer: &Path, path: &Path, hrp: &str, node: &str, amount: &str) {
    core_wallet(path, &["create", "--hrp", hrp, "--node", node]);
    if amount == "0" {
        return;
    }
    let address = core_wallet(path, &["address"]);
    let address = address.trim().lines().last().unwrap().trim();
    let minted = core_wallet(issuer, &["--node", node, "mint", amount, "--to", address]);
    let payment = minted
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("specie-pay1"))
        .expect("a payment string");
    core_wallet(path, &["import", payment]);
}

/// `specie exchange COMMAND --wallet W ARGS`.
fn exchange(command: &str, wallet: &Path, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["exchange", command, "--wallet", wallet.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all)
}

fn account(wallet: &Path) -> Value {
    let text = exchange("account", wallet, &["--json"]).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn spendable(wallet: &Path) -> u64 {
    let balance = core_wallet(wallet, &["balance"]);
    balance
        .lines()
        .find_map(|line| line.strip_prefix("spendable:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no spendable balance in {balance}"))
}

#[test]
fn a_trader_deposits_trades_pays_and_withdraws_with_the_cli_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let exchange_dir = path("exchange");
    let bridge = run(&["exchange", "bridge-key", "--data-dir", exchange_dir.to_str().unwrap()]).unwrap();
    let bridge = bridge.trim();
    let (usd_issuer, eur_issuer) = (path("usd-issuer.json"), path("eur-issuer.json"));
    let (usd_key, eur_key) = (issuer_wallet(&usd_issuer, "usd"), issuer_wallet(&eur_issuer, "eur"));
    let (mut usd, usd_url) = start_core(dir.path(), "127.0.0.1:0", "usd", &usd_key, bridge);
    // On a port of its own: it is restarted on it below.
    let eur_listen = format!("127.0.0.1:{}", cluster_harness::free_ports(1));
    let (mut eur, eur_url) = start_core(dir.path(), &eur_listen, "eur", &eur_key, bridge);
    let (mut ex, url) = start_serving(&[
        "exchange",
        "serve",
        "--data-dir",
        exchange_dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--asset",
        &format!("usd={usd_url}"),
        "--asset",
        &format!("eur={eur_url}"),
        "--block-interval-ms",
        "20",
    ]);
    let (alice, alice_eur, bob) = (path("alice-usd.json"), path("alice-eur.json"), path("bob-eur.json"));
    wallet(&usd_issuer, &alice, "usd", &usd_url, "10000");
    wallet(&eur_issuer, &bob, "eur", &eur_url, "10000");
    wallet(&eur_issuer, &alice_eur, "eur", &eur_url, "0");

    // Deposits: the first opens each account on the exchange given once.
    let deposited = exchange(
        "deposit",
        &alice,
        &["--exchange", &url, "--asset", "usd", "--amount", "6000"],
    )
    .unwrap();
    assert!(deposited.contains("deposited 6000 usd"), "{deposited}");
    exchange(
        "deposit",
        &bob,
        &["--exchange", &url, "--asset", "eur", "--amount", "5000"],
    )
    .unwrap();
    assert_eq!(spendable(&alice), 4000, "the change stays in the core wallet");
    let (alice_state, bob_state) = (account(&alice), account(&bob));
    assert_eq!(alice_state["balances"]["usd"], 6000, "{alice_state}");
    assert_eq!(bob_state["balances"]["eur"], 5000, "{bob_state}");
    assert_ne!(alice_state["account"], bob_state["account"]);
    let bob_id = bob_state["account"].to_string();

    // Offers both ways, crossing: they trade.
    let offered = exchange(
        "offer",
        &alice,
        &[
            "--sell",
            "usd",
            "--buy",
            "eur",
            "--amount",
            "2000",
            "--min-price",
            "0.5",
        ],
    )
    .unwrap();
    assert!(offered.contains("included at height"), "{offered}");
    exchange(
        "offer",
        &bob,
        &[
            "--sell",
            "eur",
            "--buy",
            "usd",
            "--amount",
            "2000",
            "--min-price",
            "0.5",
        ],
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let bought = loop {
        let state = account(&alice);
        let eur = state["balances"]["eur"].as_u64().unwrap();
        if eur > 0 {
            break eur;
        }
        assert!(Instant::now() < deadline, "no trade: {state}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        bought > 1_000,
        "Alice sold usd for eur at a price of at least 0.5: {bought}"
    );
    let block = run(&["exchange", "last-block", "--exchange", &url, "--json"]).unwrap();
    assert!(block.contains("state_hash"), "{block}");

    // A payment, then a withdrawal of the rest of the eur to Alice's eur core wallet.
    let paid = exchange("pay", &alice, &["--to", &bob_id, "--asset", "eur", "--amount", "10"]).unwrap();
    assert!(paid.contains("included at height"), "{paid}");
    let rest = (bought - 10).to_string();
    let withdrew = exchange(
        "withdraw",
        &alice,
        &[
            "--asset",
            "eur",
            "--amount",
            &rest,
            "--core-wallet",
            alice_eur.to_str().unwrap(),
        ],
    )
    .unwrap();
    assert!(withdrew.contains(&format!("withdrew {rest} eur")), "{withdrew}");
    assert_eq!(
        spendable(&alice_eur),
        bought - 10,
        "the core wallet holds the withdrawn eur"
    );
    let state = account(&alice);
    assert_eq!(state["balances"]["eur"], 0, "{state}");
    assert_eq!(state["under_way"].as_array().unwrap().len(), 0, "{state}");
    assert_eq!(
        account(&bob)["balances"]["eur"].as_u64().unwrap(),
        3010,
        "Bob's eur: 5000 − 2000 + 10"
    );

    // Refusals: an overdraft, in words, and a malformed price; both exit non-zero.
    let overdraft = exchange(
        "pay",
        &alice,
        &["--to", &bob_id, "--asset", "usd", "--amount", "1000000"],
    )
    .unwrap_err();
    assert!(
        overdraft.contains("refused") && overdraft.contains("more of usd than it has"),
        "{overdraft}"
    );
    let bad = exchange(
        "offer",
        &alice,
        &["--sell", "usd", "--buy", "eur", "--amount", "1", "--min-price", "1,5"],
    )
    .unwrap_err();
    assert!(bad.contains("--min-price") && bad.contains("not a decimal"), "{bad}");
    let wrong = exchange("withdraw", &alice, &["--asset", "eur", "--amount", "1"]).unwrap_err();
    assert!(wrong.contains("--core-wallet"), "{wrong}");

    // A deposit interrupted (its core is down) is kept in the wallet, and the next command,
    // once the core is back, sends it again and has it credited: once.
    eur.kill().unwrap();
    eur.wait().unwrap();
    let interrupted = exchange("deposit", &bob, &["--asset", "eur", "--amount", "1000"]).unwrap_err();
    assert!(interrupted.contains("it is kept"), "{interrupted}");
    assert_eq!(
        account(&bob)["under_way"].as_array().unwrap().len(),
        1,
        "kept while the core is down"
    );
    let read_json = |path: &Path| -> Value { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
    let interrupted_deposit = read_json(&bob)["exchange"]["deposits"][0].clone();
    (eur, _) = start_core(dir.path(), &eur_listen, "eur", &eur_key, bridge);
    let state = account(&bob);
    assert_eq!(state["balances"]["eur"], 4010, "credited once: {state}");
    assert_eq!(state["under_way"].as_array().unwrap().len(), 0, "{state}");
    assert_eq!(account(&bob)["balances"]["eur"], 4010, "not credited twice");
    core_wallet(&bob, &["sync"]);
    assert_eq!(
        spendable(&bob),
        4000,
        "10000 − 5000 − 1000: no coin lost or spent twice"
    );

    // A withdrawal interrupted (the core is down when its payout is presented) is kept, and
    // finished by the next command: paid once.
    eur.kill().unwrap();
    eur.wait().unwrap();
    let interrupted = exchange("withdraw", &bob, &["--asset", "eur", "--amount", "500"]).unwrap_err();
    assert!(interrupted.contains("is kept"), "{interrupted}");
    (eur, _) = start_core(dir.path(), &eur_listen, "eur", &eur_key, bridge);
    let state = account(&bob);
    assert_eq!(state["balances"]["eur"], 3510, "{state}");
    assert_eq!(state["under_way"].as_array().unwrap().len(), 0, "{state}");
    exchange("account", &bob, &[]).unwrap();
    assert_eq!(spendable(&bob), 4500, "the payout is in the wallet, once");

    // A deposit marked refused (a node said its core refused it) whose funding the core holds:
    // the next command asks the core, hands it in, and the exchange credits it once only.
    let mut json = read_json(&bob);
    assert_eq!(json["exchange"]["bridge"], bridge, "the bridge key is pinned");
    let mut refused = interrupted_deposit.clone();
    refused["refused"] = true.into();
    json["exchange"]["deposits"] = vec![refused].into();
    std::fs::write(&bob, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let state = account(&bob);
    assert_eq!(state["under_way"].as_array().unwrap().len(), 0, "{state}");
    assert_eq!(state["balances"]["eur"], 3510, "not credited twice: {state}");
    // An exchange that names another bridge key than the pinned one is refused.
    let mut json = read_json(&bob);
    json["exchange"]["bridge"] = "07".repeat(32).into();
    std::fs::write(&bob, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let other = exchange("account", &bob, &[]).unwrap_err();
    assert!(other.contains("names bridge key") && other.contains(bridge), "{other}");
    json["exchange"]["bridge"] = bridge.into();
    std::fs::write(&bob, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    // Refused deposits are dropped only on the user's word.
    assert!(exchange("forget-refused", &bob, &[]).unwrap_err().contains("--yes"));
    let forgot = exchange("forget-refused", &bob, &["--yes"]).unwrap();
    assert!(forgot.contains("forgot 0 refused deposits"), "{forgot}");
    for child in [&mut ex, &mut usd, &mut eur] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// `specie exchange serve` on `data_dir` and `listen`; its cores are never asked here.
fn exchange_serve_args<'a>(data_dir: &'a str, listen: &'a str) -> Vec<&'a str> {
    let assets = ["--asset", "usd=http://127.0.0.1:9", "--asset", "eur=http://127.0.0.1:9"];
    let mut args = vec!["exchange", "serve", "--data-dir", data_dir, "--listen", listen];
    args.extend_from_slice(&assets);
    args
}

/// One process per data directory: a second exchange on the same directory (another port) is
/// refused at once, naming the first, which still answers; a busy port fails before a new data
/// directory is made.
#[test]
fn a_second_exchange_on_one_data_directory_is_refused_and_the_first_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("exchange");
    let data_text = data.to_str().unwrap();
    let (mut first, url) = start_serving(&exchange_serve_args(data_text, "127.0.0.1:0"));
    let limit = Duration::from_secs(30);
    let (status, stderr) = cluster_harness::run_to_exit(&exchange_serve_args(data_text, "127.0.0.1:0"), limit);
    assert!(!status.success(), "{stderr}");
    let holder = format!("{} is in use by process {} (", data.display(), first.id());
    assert!(stderr.contains(&holder), "{stderr}");
    assert!(stderr.contains("stop that process first"), "{stderr}");
    assert_eq!(ureq::get(&format!("{url}/v1/exchange")).call().unwrap().status(), 200);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let fresh = dir.path().join("fresh");
    let (status, stderr) = cluster_harness::run_to_exit(&exchange_serve_args(fresh.to_str().unwrap(), &busy), limit);
    assert!(!status.success() && stderr.contains("cannot listen on"), "{stderr}");
    assert!(!fresh.exists(), "a busy port left {} behind", fresh.display());
    drop(taken);
    first.kill().unwrap();
    first.wait().unwrap();
}
