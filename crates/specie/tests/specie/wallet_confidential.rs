//! Wallets with the CLI only, against real nodes on 127.0.0.1: confidential and anonymous
//! payments, and the mistakes a person makes (the wrong node, the wrong currency, a copy of the
//! wallet spending its coins) losing nothing.
//!
//! Confidential, against `specie node --auditor --endorsement 2-of-3`:
//! Alice is minted coins, shields part of them, pays Bob confidentially and gives him the
//! printed `specie-cpay1…` string; Bob receives it (once, however often he tries), a string with
//! a changed character is refused, Alice unshields the rest, and the auditor's reading of the
//! ledger (`specie audit show`) agrees with both wallets and verifies every record's threshold
//! endorsement.
//!
//! Anonymous, against `specie node --registration-authority --owner-auditor`: Alice and Bob enrol
//! with `specie ra` and `specie wallet enrol`, Alice's coins enter the anonymous level, she pays
//! Bob by enrolment id with values in clear, Bob pays part back with values hidden, each receives
//! the other's `specie-apay1…` string, and `specie audit show --directory` (the RA's list) names
//! every payer and payee and finds every proof valid.

use crate::cluster_harness;

use std::path::Path;

use cluster_harness::offline_devices::{core_wallet, line_starting, run, wallet_address, wallet_balance};
use cluster_harness::start_serving;

/// Creates the issuer wallet at `path`: its issuer public key (hex).
fn issuer_wallet(path: &Path) -> String {
    let created = core_wallet(path, &["create", "--issuer"]);
    line_starting(&created, "issuer public key: ").replace("issuer public key: ", "")
}

/// `GET URL/v1/info`'s `network_id`.
fn network_id(url: &str) -> String {
    let info: serde_json::Value = ureq::get(&format!("{url}/v1/info"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    info["network_id"]
        .as_str()
        .expect("a node names its network")
        .to_string()
}

/// The wallet file as JSON, to compare or to edit as an older version would have written it.
fn wallet_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A newcomer's slips with a core wallet, against real nodes, each losing nothing and answered
/// with what to do: a mistyped `--node` (another node of the same currency, or of another
/// currency) is refused before anything is sent or concluded, naming both networks; a wallet
/// file from before network ids is not fooled by a stranger node either; coins a copy of the
/// wallet spent are marked missing, never deleted, until the user drops them; an overspend; a
/// closed stdout before the payment string is printed; a wallet file cut short. (A second
/// process on a data directory and a busy port: `crash.rs`; FastPay overspends: the
/// fastpay-wallet crate; the exchange's: `exchange_cli.rs`.)
#[test]
fn a_newcomers_slips_with_a_core_wallet_lose_nothing_and_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let (issuer, alice, bob, copy) = (
        path("issuer.json"),
        path("alice.json"),
        path("bob.json"),
        path("copy.json"),
    );
    let issuer_key = issuer_wallet(&issuer);
    let node = |name: &str, extra: &[&str]| {
        let data = path(name);
        let mut args = vec!["node", "--listen", "127.0.0.1:0", "--issuer", &issuer_key, "--data-dir"];
        args.push(data.to_str().unwrap());
        args.extend_from_slice(extra);
        start_serving(&args)
    };
    let ((mut right, url), (mut other, other_url), (mut euro, euro_url)) =
        (node("a", &[]), node("b", &[]), node("e", &["--hrp", "eur"]));
    let (ours, theirs) = (network_id(&url), network_id(&other_url));
    assert_ne!(ours, theirs, "every data directory is its own network");
    for wallet in [&alice, &bob] {
        core_wallet(wallet, &["create", "--node", &url]);
    }
    let minted = core_wallet(
        &issuer,
        &["--node", &url, "mint", "1000", "--to", &wallet_address(&alice)],
    );
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);
    assert_eq!(
        wallet_json(&alice)["network_id"],
        ours.as_str(),
        "remembered once it holds money"
    );

    let before = std::fs::read(&alice).unwrap();
    let alice_at = |url: &str, args: &[&str]| {
        let mut all = vec!["wallet", "--wallet", alice.to_str().unwrap(), "--node", url];
        all.extend_from_slice(args);
        run(&all)
    };
    let error = alice_at(&other_url, &["sync"]).unwrap_err();
    assert!(
        error.contains(&ours) && error.contains(&theirs) && error.contains("nothing changed"),
        "{error}"
    );
    let error = alice_at(&other_url, &["send", &wallet_address(&bob), "10"]).unwrap_err();
    assert!(error.contains("belongs to network"), "{error}");
    let error = alice_at(&euro_url, &["send", &wallet_address(&bob), "10"]).unwrap_err();
    assert!(
        error.contains("serves currency \"eur\"") && error.contains("nothing was sent"),
        "{error}"
    );
    assert_eq!(std::fs::read(&alice).unwrap(), before, "the wallet file is untouched");
    assert_eq!(wallet_balance(&alice, "spendable:"), 1000);

    // A copy of Alice's wallet spends her coin: her sync marks it missing, keeps it, and only
    // `forget-missing --yes` drops it.
    std::fs::copy(&alice, &copy).unwrap();
    let sent = core_wallet(&copy, &["send", &wallet_address(&bob), "400"]);
    core_wallet(&bob, &["import", &line_starting(&sent, "specie-pay1")]);
    let synced = core_wallet(&alice, &["sync"]);
    assert!(
        synced.contains("missing: coin") && synced.contains("forget-missing"),
        "{synced}"
    );
    assert_eq!(wallet_balance(&alice, "missing:"), 1000);
    assert_eq!(wallet_balance(&alice, "spendable:"), 0);
    assert!(core_wallet(&alice, &["list-coins"]).contains("missing"));
    assert!(core_wallet(&alice, &["forget-missing"]).contains("--yes"));
    assert_eq!(wallet_balance(&alice, "missing:"), 1000, "not without --yes");
    assert!(core_wallet(&alice, &["forget-missing", "--yes"]).contains("forgot 1"));
    assert!(!core_wallet(&alice, &["balance"]).contains("missing:"));

    // Bob's file as a version before network ids wrote it: a stranger node holding none of his
    // coins is refused, not believed; his own node is, and is remembered again.
    let mut old = wallet_json(&bob);
    old.as_object_mut().unwrap().remove("network_id");
    std::fs::write(&bob, serde_json::to_vec_pretty(&old).unwrap()).unwrap();
    let bob_at = |url: &str| run(&["wallet", "--wallet", bob.to_str().unwrap(), "--node", url, "sync"]);
    let error = bob_at(&other_url).unwrap_err();
    assert!(
        error.contains("holds none of this wallet's") && error.contains("nothing changed"),
        "{error}"
    );
    assert_eq!(wallet_balance(&bob, "spendable:"), 400);
    bob_at(&url).unwrap();
    assert_eq!(wallet_json(&bob)["network_id"], ours.as_str());

    // More than the wallet holds: refused in words, nothing changed.
    let before = std::fs::read(&bob).unwrap();
    let bob_cli = |args: &[&str]| {
        let mut all = vec!["wallet", "--wallet", bob.to_str().unwrap()];
        all.extend_from_slice(args);
        run(&all)
    };
    let error = bob_cli(&["send", &wallet_address(&alice), "401"]).unwrap_err();
    assert!(error.contains("401") && error.contains("400"), "{error}");
    assert_eq!(std::fs::read(&bob).unwrap(), before);

    // A terminal that drops the payment string (stdout closed before it is printed) loses no
    // money: the payment is saved before anything is printed, and `sent` shows the string again.
    let mut send = std::process::Command::new(cluster_harness::BIN)
        .args([
            "wallet",
            "--wallet",
            bob.to_str().unwrap(),
            "send",
            &wallet_address(&alice),
            "150",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(send.stdout.take());
    send.wait().unwrap();
    let shown = bob_cli(&["sent"]).unwrap();
    core_wallet(&alice, &["import", &line_starting(&shown, "specie-pay1")]);
    assert_eq!(wallet_balance(&alice, "spendable:"), 150);
    assert_eq!(wallet_balance(&bob, "spendable:"), 250);

    // A wallet file cut short: refused, untouched, and the message says to restore a backup.
    let whole = std::fs::read(&bob).unwrap();
    std::fs::write(&bob, &whole[..whole.len() / 2]).unwrap();
    let error = bob_cli(&["balance"]).unwrap_err();
    assert!(
        error.contains("restore it from your backup") && error.contains("nothing was changed"),
        "{error}"
    );
    assert!(bob_cli(&["address"]).is_err());
    assert_eq!(
        std::fs::read(&bob).unwrap(),
        &whole[..whole.len() / 2],
        "never overwritten"
    );
    for child in [&mut right, &mut other, &mut euro] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn shield_pay_receive_and_unshield_with_the_cli_and_the_auditor_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let (issuer, alice, bob, auditor_key) = (
        path("issuer.json"),
        path("alice.json"),
        path("bob.json"),
        path("auditor.key"),
    );
    let issuer_key = issuer_wallet(&issuer);
    run(&["audit", "keygen", "--out", auditor_key.to_str().unwrap()]).unwrap();
    let keys = run(&["audit", "key", "--key", auditor_key.to_str().unwrap()]).unwrap();
    let auditor = keys.lines().next().unwrap().to_string();
    let data = path("node");
    let (mut node, url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--issuer",
        &issuer_key,
        "--auditor",
        auditor.trim(),
        "--endorsement",
        "2-of-3",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    for wallet in [&alice, &bob] {
        core_wallet(wallet, &["create", "--node", &url]);
    }
    let address = wallet_address;
    let minted = core_wallet(&issuer, &["--node", &url, "mint", "1000", "--to", &address(&alice)]);
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);

    core_wallet(&alice, &["shield", "--amount", "600"]);
    assert_eq!(wallet_balance(&alice, "spendable:"), 400);
    assert_eq!(wallet_balance(&alice, "confidential spendable:"), 600);
    let sent = core_wallet(
        &alice,
        &["send", "--confidential", "--to", &address(&bob), "--amount", "250"],
    );
    let payment = line_starting(&sent, "specie-cpay1");
    // One character changed: the string's checksum, or the node, refuses it.
    let mut forged: Vec<char> = payment.chars().collect();
    let at = forged.len() / 2;
    forged[at] = if forged[at] == '0' { '1' } else { '0' };
    let forged: String = forged.into_iter().collect();
    let wallet_arg = bob.to_str().unwrap();
    assert!(
        run(&["wallet", "--wallet", wallet_arg, "receive", &forged]).is_err(),
        "a changed string is refused"
    );
    core_wallet(&bob, &["receive", &payment]);
    core_wallet(&bob, &["receive", &payment]);
    assert_eq!(wallet_balance(&bob, "confidential spendable:"), 250, "received once");
    core_wallet(&alice, &["unshield", "--amount", "350"]);
    assert_eq!(wallet_balance(&alice, "spendable:"), 750);
    assert_eq!(wallet_balance(&alice, "confidential spendable:"), 0);

    // The auditor reads the ledger from genesis: the confidential values, all of its jurisdiction.
    let shown = audit_show(&url, &auditor_key, &[]).unwrap();
    let last: serde_json::Value = serde_json::from_str(shown.trim().lines().last().unwrap()).unwrap();
    let summary = &last["summary"];
    assert!(summary["confidential"].as_u64().unwrap() >= 1, "{summary}");
    assert_eq!(summary["invalid_proofs"], 0, "{summary}");
    assert_eq!(summary["unreadable"], 0, "{summary}");
    // Every record carries a 2-of-3 endorsement that verifies under the node's group key; under
    // another key none does, and the auditor says so.
    assert_eq!(summary["endorsed"], summary["transactions"], "{summary}");
    assert_eq!(summary["unendorsed"], 0, "{summary}");
    let other_key = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
    let wrong = audit_show(&url, &auditor_key, &["--group-key", other_key]);
    assert!(wrong.is_err(), "records not endorsed under the key given: exit 1");
    node.kill().unwrap();
    node.wait().unwrap();
}

/// The lines of `specie audit show --json` that are transactions of kind `kind`.
fn audited_of_kind(shown: &str, kind: &str) -> Vec<serde_json::Value> {
    shown
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|line| line["kind"] == kind)
        .collect()
}

/// The summary of `specie audit show --node URL --key KEY --json` and all it printed, once
/// `ready` holds of the summary (the node cuts a block every 100 ms: the last payment may not be
/// in one yet), or after 30 s.
fn audit_summary(url: &str, key: &Path, ready: impl Fn(&serde_json::Value) -> bool) -> (serde_json::Value, String) {
    let read = || {
        let shown = audit_show(url, key, &[]).unwrap();
        let last: serde_json::Value = serde_json::from_str(shown.trim().lines().last().unwrap()).unwrap();
        (last["summary"].clone(), shown)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (mut summary, mut shown) = read();
    while !ready(&summary) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        (summary, shown) = read();
    }
    (summary, shown)
}

/// `specie audit show --node URL --key KEY --json EXTRA`: its stdout, or its stderr if it failed.
fn audit_show(url: &str, key: &Path, extra: &[&str]) -> Result<String, String> {
    let args = ["audit", "show", "--node", url, "--key", key.to_str().unwrap(), "--json"];
    run(&[&args[..], extra].concat())
}

/// `specie ra --dir DIR ARGS`, which must succeed: its stdout, trimmed.
fn ra(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["ra", "--dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all)
        .unwrap_or_else(|error| panic!("specie ra {args:?}: {error}"))
        .trim()
        .to_string()
}

/// Creates `wallet` for the node at `url` and enrols it as `id` with the RA in `ra_dir`: the RA's
/// challenge, the wallet's request, the RA's credential. What `enrol --credential` printed.
fn create_and_enrol(wallet: &Path, url: &str, ra_dir: &Path, id: &str) -> String {
    core_wallet(wallet, &["create", "--node", url]);
    let challenge = ra(ra_dir, &["challenge", "--id", id]);
    let request = line_starting(&core_wallet(wallet, &["enrol", &challenge]), "specie-enrol-request1");
    core_wallet(wallet, &["enrol", "--credential", &ra(ra_dir, &["enrol", &request])])
}

/// What the enrolled-payment tests start from, in a fresh temporary directory: the issuer's wallet
/// and key, an auditor's seed file and its three keys, an RA, and where Alice's and Bob's wallets go.
struct Enrolled {
    dir: tempfile::TempDir,
    issuer: std::path::PathBuf,
    alice: std::path::PathBuf,
    bob: std::path::PathBuf,
    auditor_key: std::path::PathBuf,
    ra_dir: std::path::PathBuf,
    issuer_key: String,
    value_auditor: String,
    owner_auditor: String,
    cosigning_key: String,
    ra_key: String,
}

impl Enrolled {
    fn new() -> Enrolled {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        let (issuer, auditor_key, ra_dir) = (path("issuer.json"), path("auditor.key"), path("ra"));
        let issuer_key = issuer_wallet(&issuer);
        let keys = run(&["audit", "keygen", "--out", auditor_key.to_str().unwrap()]).unwrap();
        let labelled = |label: &str| line_starting(&keys, label).replace(label, "");
        Enrolled {
            alice: path("alice.json"),
            bob: path("bob.json"),
            value_auditor: keys.lines().next().unwrap().trim().to_string(),
            owner_auditor: labelled("owner auditor key: "),
            cosigning_key: labelled("co-signing key: "),
            ra_key: ra(&ra_dir, &["init"]),
            issuer,
            auditor_key,
            ra_dir,
            issuer_key,
            dir,
        }
    }
}

#[test]
fn enrol_and_pay_anonymously_with_the_cli_and_the_auditor_names_the_parties() {
    let Enrolled {
        dir,
        issuer,
        alice,
        bob,
        auditor_key,
        ra_dir,
        issuer_key,
        value_auditor,
        owner_auditor,
        cosigning_key,
        ra_key,
    } = Enrolled::new();
    let path = |name: &str| dir.path().join(name);
    let (mut node, url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--issuer",
        &issuer_key,
        "--auditor",
        &value_auditor,
        "--registration-authority",
        &ra_key,
        "--owner-auditor",
        &owner_auditor,
        "--active-auditor",
        &cosigning_key,
        "--data-dir",
        path("node").to_str().unwrap(),
    ]);
    for (wallet, id) in [(&alice, "7"), (&bob, "8")] {
        let enrolled = create_and_enrol(wallet, &url, &ra_dir, id);
        assert!(enrolled.contains(&format!("enrolled as id {id}")), "{enrolled}");
    }
    let address = wallet_address(&alice);
    let minted = core_wallet(&issuer, &["--node", &url, "mint", "1000", "--to", &address]);
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);

    // The same auditor is active: it co-signs what it can read, names, and finds within 600.
    let directory = path("directory.txt");
    std::fs::write(&directory, ra(&ra_dir, &["list"])).unwrap();
    let (mut cosigner, cosigner_url) = start_serving(&[
        "audit",
        "serve",
        "--key",
        auditor_key.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--directory",
        directory.to_str().unwrap(),
        "--refuse-over",
        "600",
    ]);
    let alice_arg = alice.to_str().unwrap();
    let refused = run(&["wallet", "--wallet", alice_arg, "anonymise", "--amount", "600"]).unwrap_err();
    assert!(
        refused.contains("active auditor"),
        "no co-signer, nothing sent: {refused}"
    );
    let over = run(&[
        "wallet",
        "--wallet",
        alice_arg,
        "anonymise",
        "--amount",
        "700",
        "--cosigner",
        &cosigner_url,
    ]);
    assert!(over.unwrap_err().contains("over_limit"), "the auditor refuses 700");
    assert_eq!(wallet_balance(&alice, "spendable:"), 1000, "nothing was spent");
    let cosigned = ["--cosigner", cosigner_url.as_str()];
    core_wallet(&alice, &[&["anonymise", "--amount", "600"][..], &cosigned].concat());
    assert_eq!(wallet_balance(&alice, "anonymous spendable:"), 600);
    let sent = core_wallet(
        &alice,
        &[&["send-anonymous", "--to-id", "8", "--amount", "250"][..], &cosigned].concat(),
    );
    let payment = line_starting(&sent, "specie-apay1");
    assert!(
        run(&["wallet", "--wallet", alice.to_str().unwrap(), "receive", &payment]).is_err(),
        "a payment to id 8 is not alice's to receive"
    );
    core_wallet(&bob, &["receive", &payment]);
    core_wallet(&bob, &["receive", &payment]);
    assert_eq!(wallet_balance(&bob, "anonymous spendable:"), 250, "received once");
    let back = core_wallet(
        &bob,
        &[
            &["send-anonymous", "--to-id", "7", "--amount", "100", "--hide-values"][..],
            &cosigned,
        ]
        .concat(),
    );
    core_wallet(&alice, &["receive", &line_starting(&back, "specie-apay1")]);
    assert_eq!(wallet_balance(&alice, "anonymous spendable:"), 450);
    assert_eq!(wallet_balance(&bob, "anonymous spendable:"), 150);

    // The auditor, with the RA's list as its directory, names both parties of every payment.
    let shown = audit_show(&url, &auditor_key, &["--directory", directory.to_str().unwrap()]).unwrap();
    let payments = audited_of_kind(&shown, "anonymous");
    let parties: Vec<(String, Vec<(String, u64)>)> = payments
        .iter()
        .map(|line| {
            let payer = line["inputs"][0]["owner"].as_str().unwrap().to_string();
            let mut outputs: Vec<(String, u64)> = line["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| (o["owner"].as_str().unwrap().to_string(), o["value"].as_u64().unwrap()))
                .collect();
            outputs.sort();
            (payer, outputs)
        })
        .collect();
    assert_eq!(parties.len(), 3, "{shown}");
    // Every anonymous transaction was co-signed by the active auditor, and the passive one sees it.
    for payment in &payments {
        assert_eq!(payment["cosigned_by"], serde_json::json!([cosigning_key]), "{payment}");
    }
    assert_eq!(
        parties[1],
        ("id:7".into(), vec![("id:7".into(), 350), ("id:8".into(), 250)])
    );
    assert_eq!(
        parties[2],
        ("id:8".into(), vec![("id:7".into(), 100), ("id:8".into(), 150)])
    );
    let last: serde_json::Value = serde_json::from_str(shown.trim().lines().last().unwrap()).unwrap();
    let summary = &last["summary"];
    assert_eq!(
        (summary["anonymous"].as_u64(), summary["unnamed"].as_u64()),
        (Some(3), Some(0)),
        "{summary}"
    );
    assert_eq!(summary["invalid_proofs"], 0, "{summary}");
    // The auditor can pin the RA instead of taking the node's word for it: under the RA's own key
    // the spend proofs hold; under another RA's (a node lying about its RA) they do not.
    let pinned = |key: &str| audit_show(&url, &auditor_key, &["--registration-authority", key]);
    pinned(&ra_key).expect("the spend proofs verify under the RA that issued the credentials");
    let other_ra = ra(&path("other-ra"), &["init"]);
    let refused = pinned(&other_ra).expect_err("spend proofs must not verify under another RA");
    assert!(refused.contains("INVALID PROOF"), "{refused}");
    for child in [&mut node, &mut cosigner] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A cluster's sentinels take private transactions too, as the topology's `[privacy]` section
/// says (the same keys as `specie node`'s flags): enrolment and an anonymous payment, a way back
/// out of the anonymous level, and a confidential shielding, all through a sentinel of a real
/// cluster on 127.0.0.1.
#[test]
fn a_cluster_sentinel_takes_private_payments_under_its_privacy_section() {
    let (_temp, dir, base, _down) = cluster_harness::start_cluster(1);
    let url = format!("http://127.0.0.1:{}", base + 9);
    let work = tempfile::tempdir().unwrap();
    let path = |name: &str| work.path().join(name);
    let (issuer, alice, bob, auditor_key, ra_dir) = (
        path("issuer.json"),
        path("alice.json"),
        path("bob.json"),
        path("auditor.key"),
        path("ra"),
    );
    let created = core_wallet(&issuer, &["create", "--issuer", "--node", &url]);
    let issuer_key = line_starting(&created, "issuer public key: ").replace("issuer public key: ", "");
    let keys = run(&["audit", "keygen", "--out", auditor_key.to_str().unwrap()]).unwrap();
    let owner_auditor = line_starting(&keys, "owner auditor key: ").replace("owner auditor key: ", "");
    // The operator adds the issuer and the privacy section, and restarts the cluster.
    cluster_harness::specie(&["cluster", "down", "--dir", &dir]);
    let file = std::path::Path::new(&dir).join("cluster.toml");
    let mut topology = specie_cluster::Topology::load(&file).unwrap();
    topology.issuers = vec![issuer_key];
    topology.privacy = Some(specie_cluster::PrivacyConfig {
        auditors: vec![keys.lines().next().unwrap().trim().to_string()],
        registration_authority: Some(ra(&ra_dir, &["init"])),
        owner_auditors: vec![owner_auditor],
        active_auditors: vec![],
        certifiers: None,
    });
    std::fs::write(&file, topology.to_toml()).unwrap();
    cluster_harness::specie(&["cluster", "up", "--dir", &dir, "--base-port", &base.to_string()]);

    for (wallet, id) in [(&alice, "7"), (&bob, "8")] {
        create_and_enrol(wallet, &url, &ra_dir, id);
    }
    let address = wallet_address(&alice);
    let minted = core_wallet(&issuer, &["mint", "1000", "--to", &address]);
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);
    core_wallet(&alice, &["anonymise", "--amount", "600", "--hide-values"]);
    let sent = core_wallet(
        &alice,
        &["send-anonymous", "--to-id", "8", "--amount", "250", "--hide-values"],
    );
    core_wallet(&bob, &["receive", &line_starting(&sent, "specie-apay1")]);
    core_wallet(&alice, &["shield", "--amount", "300"]);
    assert_eq!(wallet_balance(&alice, "anonymous spendable:"), 350);
    assert_eq!(wallet_balance(&alice, "confidential spendable:"), 300);
    assert_eq!(wallet_balance(&alice, "spendable:"), 100);
    assert_eq!(wallet_balance(&bob, "anonymous spendable:"), 250);
    // Bob takes 100 out of the anonymous level: his note's value is hidden, so only with
    // --hide-values.
    let bob_arg = bob.to_str().unwrap();
    let refused = run(&["wallet", "--wallet", bob_arg, "leave-anonymous", "--amount", "100"]).unwrap_err();
    assert!(refused.contains("only with --hide-values"), "{refused}");
    let left = core_wallet(&bob, &["leave-anonymous", "--amount", "100", "--hide-values"]);
    assert!(left.contains("left the anonymous level"), "{left}");
    assert_eq!(wallet_balance(&bob, "anonymous spendable:"), 150);
    assert_eq!(wallet_balance(&bob, "spendable:"), 100);
    // Out of the level into Alice's coin: she imports the string `send` would have given her.
    let paid = core_wallet(
        &bob,
        &["leave-anonymous", "--amount", "30", "--hide-values", "--to", &address],
    );
    core_wallet(&alice, &["import", &line_starting(&paid, "specie-pay1")]);
    assert_eq!(wallet_balance(&alice, "spendable:"), 130);
    assert_eq!(wallet_balance(&bob, "anonymous spendable:"), 120);
    assert_eq!(wallet_balance(&bob, "spendable:"), 100);
    // The sentinel's metrics time each privacy level's checks apart: the mint in clear, the
    // anonymous and confidential transactions with their proofs.
    let metrics = ureq::get(&format!("{url}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    for kind in ["mint", "anonymous", "confidential"] {
        let value = |family: &str| -> f64 {
            let series = format!("{family}{{kind=\"{kind}\"}} ");
            (metrics.lines())
                .find_map(|line| line.strip_prefix(&series)?.parse().ok())
                .unwrap_or_else(|| panic!("no {series}: {metrics}"))
        };
        assert!(value("specie_transactions_verified_total") >= 1.0, "{kind}");
        assert!(value("specie_transactions_verification_seconds_total") > 0.0, "{kind}");
    }
}

/// The issuer key kept apart from the wallet: `specie issuer sign` signs each mint and redeem
/// of a wallet created with `--issuer-signer`, whose file holds no issuer secret; a signer of
/// another key is refused when the wallet is created.
#[test]
fn an_issuer_key_kept_apart_signs_mints_and_redeems_through_an_external_signer() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let (key_file, other_key, issuer, alice) = (
        path("issuer.key"),
        path("other.key"),
        path("issuer.json"),
        path("alice.json"),
    );
    let public = run(&["issuer", "keygen", "--key-file", key_file.to_str().unwrap()]).unwrap();
    let public = public.trim();
    assert_eq!(
        run(&["issuer", "key", "--key-file", key_file.to_str().unwrap()])
            .unwrap()
            .trim(),
        public
    );
    run(&["issuer", "keygen", "--key-file", other_key.to_str().unwrap()]).unwrap();
    let signer = |key: &Path| format!("{} issuer sign --key-file {}", cluster_harness::BIN, key.display());
    let create = |signer: &str| {
        run(&[
            "wallet",
            "--wallet",
            issuer.to_str().unwrap(),
            "create",
            "--issuer-signer",
            signer,
            "--issuer-key",
            public,
        ])
    };
    let error = create(&signer(&other_key)).unwrap_err();
    assert!(error.contains("does not verify") && !issuer.exists(), "{error}");
    let created = create(&signer(&key_file)).unwrap();
    assert!(created.contains(public), "{created}");
    let file = std::fs::read_to_string(&issuer).unwrap();
    assert!(
        !file.contains(std::fs::read_to_string(&key_file).unwrap().trim()),
        "no issuer secret in the file"
    );

    let data = path("node");
    let (mut node, url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--issuer",
        public,
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    core_wallet(&alice, &["create", "--node", &url]);
    let minted = core_wallet(
        &issuer,
        &["--node", &url, "mint", "700", "--to", &wallet_address(&alice)],
    );
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);
    assert_eq!(wallet_balance(&alice, "spendable:"), 700);
    core_wallet(&issuer, &["--node", &url, "mint", "300"]);
    core_wallet(&issuer, &["--node", &url, "redeem", "120"]);
    assert_eq!(wallet_balance(&issuer, "spendable:"), 180);
    node.kill().unwrap();
    node.wait().unwrap();
}

/// The unlinkable level with the CLI only, against `specie node --certifiers` and two members of
/// a 2-of-3 certifier group (`specie certifier deal`, `specie certifier serve`): Alice's coins
/// enter the level, her token waits until two certifiers certified it (one is not enough), she
/// pays Bob unlinkably, Bob receives the `specie-upay1…` string (once, however often; not Alice),
/// has it certified and leaves the level with part of it. The certifiers refuse a token the
/// ledger does not hold and what does not decode; a certifier pointed at a node that takes no
/// unlinkable transactions refuses to start; the auditor counts the level and its total exactly
/// and verifies every transfer proof under the group (and none under another).
#[test]
fn enter_pay_receive_and_leave_unlinkably_with_the_cli() {
    let Enrolled {
        dir,
        issuer,
        alice,
        bob,
        auditor_key,
        ra_dir,
        issuer_key,
        owner_auditor,
        ra_key,
        ..
    } = Enrolled::new();
    let path = |name: &str| dir.path().join(name);
    let group_dir = path("certifiers");
    let group = run(&[
        "certifier",
        "deal",
        "--group",
        "2-of-3",
        "--out",
        group_dir.to_str().unwrap(),
    ])
    .unwrap();
    let group = group.trim().to_string();
    assert_eq!(
        std::fs::read_to_string(group_dir.join("group.hex")).unwrap().trim(),
        group
    );
    let again = run(&[
        "certifier",
        "deal",
        "--group",
        "2-of-3",
        "--out",
        group_dir.to_str().unwrap(),
    ]);
    assert!(
        again.unwrap_err().contains("does not exist yet"),
        "a group is never overwritten"
    );
    let (mut node, url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--issuer",
        &issuer_key,
        "--registration-authority",
        &ra_key,
        "--owner-auditor",
        &owner_auditor,
        "--certifiers",
        &group,
        "--data-dir",
        path("node").to_str().unwrap(),
    ]);
    let secret = |i: u8| group_dir.join(format!("certifier-{i}.secret"));
    let serve = |i: u8, node: &str| {
        let secret = secret(i);
        start_serving(&[
            "certifier",
            "serve",
            "--secret",
            secret.to_str().unwrap(),
            "--node",
            node,
            "--listen",
            "127.0.0.1:0",
        ])
    };
    let (mut first, first_url) = serve(1, &url);
    let (mut second, second_url) = serve(2, &url);

    // A member pointed at a node that trusts no certifier group refuses to start.
    let (mut plain, plain_url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        path("plain").to_str().unwrap(),
    ]);
    let secret3 = secret(3);
    let refused = run(&[
        "certifier",
        "serve",
        "--secret",
        secret3.to_str().unwrap(),
        "--node",
        &plain_url,
    ]);
    assert!(refused.unwrap_err().contains("takes no unlinkable transactions"));

    for (wallet, id) in [(&alice, "7"), (&bob, "8")] {
        create_and_enrol(wallet, &url, &ra_dir, id);
    }
    let minted = core_wallet(
        &issuer,
        &["--node", &url, "mint", "1000", "--to", &wallet_address(&alice)],
    );
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);
    core_wallet(&alice, &["enter-unlinkable", "--amount", "600"]);
    assert_eq!(wallet_balance(&alice, "unlinkable uncertified:"), 600);
    let alice_arg = alice.to_str().unwrap();
    let early = run(&[
        "wallet",
        "--wallet",
        alice_arg,
        "send-unlinkable",
        "--to-id",
        "8",
        "--amount",
        "10",
    ]);
    assert!(
        early.unwrap_err().contains("wait for their certificate"),
        "an uncertified token cannot pay"
    );
    let one = run(&["wallet", "--wallet", alice_arg, "certify", "--certifier", &first_url]);
    assert!(one.is_err(), "one share of a 2-of-3 group certifies nothing");
    let both = ["--certifier", first_url.as_str(), "--certifier", second_url.as_str()];
    core_wallet(&alice, &[&["certify"][..], &both].concat());
    assert_eq!(wallet_balance(&alice, "unlinkable spendable:"), 600);
    assert_eq!(wallet_balance(&alice, "spendable:"), 400);

    let sent = core_wallet(
        &alice,
        &[&["send-unlinkable", "--to-id", "8", "--amount", "250"][..], &both].concat(),
    );
    let payment = line_starting(&sent, "specie-upay1");
    assert_eq!(
        wallet_balance(&alice, "unlinkable spendable:"),
        350,
        "the change came back certified"
    );
    let not_hers = run(&["wallet", "--wallet", alice_arg, "receive", &payment]);
    assert!(
        not_hers.unwrap_err().contains("another enrolment id"),
        "a payment to id 8 is not alice's"
    );
    core_wallet(&bob, &[&["receive", &payment][..], &both].concat());
    core_wallet(&bob, &[&["receive", &payment][..], &both].concat());
    assert_eq!(wallet_balance(&bob, "unlinkable spendable:"), 250, "received once");
    let copy = path("bob-copy.json");
    std::fs::copy(&bob, &copy).unwrap();
    core_wallet(&bob, &[&["leave-unlinkable", "--amount", "100"][..], &both].concat());
    // The copy from before learns at its next sync that its token was spent: its serial number is
    // in the ledger. It is marked missing, not spendable.
    core_wallet(&copy, &["sync"]);
    assert_eq!(wallet_balance(&copy, "unlinkable missing:"), 250);
    assert_eq!(wallet_balance(&copy, "unlinkable spendable:"), 0);
    assert_eq!(wallet_balance(&bob, "unlinkable spendable:"), 150);
    assert_eq!(wallet_balance(&bob, "spendable:"), 100);
    // The spent token's string again (a copy of the wallet from before): refused, nothing added.
    let spent = run(&["wallet", "--wallet", bob.to_str().unwrap(), "receive", &payment]);
    assert!(
        spent.unwrap_err().contains("spent already"),
        "its serial number is in the ledger"
    );
    assert_eq!(wallet_balance(&bob, "unlinkable spendable:"), 150);

    // A certifier answers only for tokens the ledger holds, and refuses what does not decode.
    let post = |token: String| {
        let body = serde_json::json!({"txid": "00".repeat(32), "index": 0, "token": token});
        match ureq::post(&format!("{first_url}/v1/certify")).send_json(body) {
            Err(ureq::Error::Status(code, response)) => (code, response.into_string().unwrap()),
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    use specie_codec::Encode;
    let stranger = specie_credential::unlinkable::TokenOpening::random(
        specie_credential::EnrolmentId(8),
        5,
        &mut rand::thread_rng(),
    );
    let (code, body) = post(hex::encode(stranger.token().encode()));
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("not_in_ledger"), "{body}");
    let (code, body) = post("00ff".into());
    assert_eq!((code, body.contains("bad_token")), (400, true), "{body}");

    // The auditor counts the three unlinkable transactions and the 500 still in the level.
    let (summary, shown) = audit_summary(&url, &auditor_key, |summary| summary["unlinkable"] == 3);
    assert_eq!(
        (summary["unlinkable"].as_u64(), summary["unlinkable_pool"].as_u64()),
        (Some(3), Some(500)),
        "{summary}"
    );
    assert_eq!(
        summary["invalid_proofs"], 0,
        "every transfer proof verifies under the node's group"
    );
    // With the owner key it reads every new token (600; 250 and 350; 150) beside the coins in
    // clear (alice's 400 of change, bob's 100).
    let mut values: Vec<u64> = audited_of_kind(&shown, "unlinkable")
        .iter()
        .flat_map(|line| line["outputs"].as_array().unwrap().clone())
        .filter_map(|output| output["value"].as_u64())
        .collect();
    values.sort();
    assert_eq!(values, [100, 150, 250, 350, 400, 600], "{shown}");
    // Pinned to another group (a node lying about its certifiers), the proofs do not verify.
    let other_dir = path("other-certifiers");
    let other = run(&[
        "certifier",
        "deal",
        "--group",
        "2-of-3",
        "--out",
        other_dir.to_str().unwrap(),
    ])
    .unwrap();
    let refused = audit_show(&url, &auditor_key, &["--certifiers", other.trim()]).unwrap_err();
    assert!(refused.contains("INVALID PROOF"), "{refused}");
    for child in [&mut node, &mut first, &mut second, &mut plain] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Revocation with the CLI: the RA revokes enrolment 9 and moves to its next key (`specie ra
/// revoke`, `specie ra rotate`), the node takes it (`--reconfigure --registration-authority`,
/// keeping the old key as a former one), and from then on Bob (9) cannot spend his anonymous
/// note, and Alice (7) can only once her wallet holds the re-issued credential. The auditor
/// still finds every proof valid, those made under the old key included.
#[test]
fn a_revoked_enrolment_cannot_spend_once_the_ra_moves_to_its_next_key() {
    let Enrolled {
        dir,
        issuer,
        alice,
        bob,
        auditor_key,
        ra_dir,
        issuer_key,
        owner_auditor,
        ra_key,
        ..
    } = Enrolled::new();
    let path = |name: &str| dir.path().join(name);
    let node_dir = path("node");
    let node_args = |extra: &[&str]| {
        let mut args = vec![
            "node",
            "--listen",
            "127.0.0.1:0",
            "--issuer",
            &issuer_key,
            "--owner-auditor",
            &owner_auditor,
            "--data-dir",
            node_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let start = |args: Vec<String>| start_serving(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (mut node, url) = start(node_args(&["--registration-authority", &ra_key]));
    for (wallet, id) in [(&alice, "7"), (&bob, "9")] {
        create_and_enrol(wallet, &url, &ra_dir, id);
        let minted = core_wallet(
            &issuer,
            &["--node", &url, "mint", "500", "--to", &wallet_address(wallet)],
        );
        core_wallet(wallet, &["import", &line_starting(&minted, "specie-pay1")]);
        core_wallet(wallet, &["anonymise", "--amount", "300"]);
    }

    ra(&ra_dir, &["revoke", "--id", "9"]);
    let again = run(&["ra", "--dir", ra_dir.to_str().unwrap(), "challenge", "--id", "9"]);
    assert!(
        again.unwrap_err().contains("revoked"),
        "no new challenge for a revoked id"
    );
    let epoch = path("epoch-1");
    let new_key = ra(&ra_dir, &["rotate", "--out", epoch.to_str().unwrap()]);
    assert_ne!(new_key, ra_key);
    assert_eq!(ra(&ra_dir, &["key"]), new_key);
    assert!(!epoch.join("9.credential").exists(), "no credential for the revoked id");
    let renewed = std::fs::read_to_string(epoch.join("7.credential")).unwrap();

    // Before the node takes the new key, a wallet cannot take the new credential.
    let early = run(&[
        "wallet",
        "--wallet",
        alice.to_str().unwrap(),
        "enrol",
        "--credential",
        renewed.trim(),
    ]);
    assert!(
        early.unwrap_err().contains("--reconfigure"),
        "the node still trusts the old key"
    );
    node.kill().unwrap();
    node.wait().unwrap();
    let refused = run(&node_args(&["--registration-authority", &new_key])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert!(
        refused.unwrap_err().contains("--reconfigure"),
        "a new RA key needs --reconfigure"
    );
    let (mut node, url) = start(node_args(&["--registration-authority", &new_key, "--reconfigure"]));
    let info: serde_json::Value = ureq::get(&format!("{url}/v1/info"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(info["former_registration_authorities"], serde_json::json!([ra_key]));

    let send = |wallet: &Path, to: &str| {
        let wallet = wallet.to_str().unwrap();
        run(&[
            "wallet",
            "--wallet",
            wallet,
            "--node",
            &url,
            "send-anonymous",
            "--to-id",
            to,
            "--amount",
            "50",
        ])
    };
    let refused = send(&bob, "7").unwrap_err();
    assert!(
        refused.contains("invalid_spend_proof"),
        "the revoked id's old credential: {refused}"
    );
    assert_eq!(
        wallet_balance(&bob, "anonymous spendable:"),
        300,
        "the refused spend cost nothing"
    );
    let refused = send(&alice, "9").unwrap_err();
    assert!(
        refused.contains("invalid_spend_proof"),
        "alice's old credential too: {refused}"
    );
    let renew = core_wallet(&alice, &["--node", &url, "enrol", "--credential", renewed.trim()]);
    assert!(renew.contains("renewed"), "{renew}");
    send(&alice, "9").expect("alice pays with the renewed credential");
    assert_eq!(wallet_balance(&alice, "anonymous spendable:"), 250);

    // The auditor checks every proof under the node's current and former keys.
    let (summary, shown) = audit_summary(&url, &auditor_key, |summary| summary["anonymous"] == 3);
    assert_eq!(
        (summary["anonymous"].as_u64(), summary["invalid_proofs"].as_u64()),
        (Some(3), Some(0)),
        "{shown}"
    );
    node.kill().unwrap();
    node.wait().unwrap();
}
