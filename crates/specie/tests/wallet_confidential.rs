//! Confidential and anonymous payments with the CLI only, against real nodes on 127.0.0.1.
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

mod cluster_harness;

use std::path::Path;

use cluster_harness::offline_devices::{core_wallet, line_starting, run, wallet_address, wallet_balance};
use cluster_harness::start_serving;

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
    let created = core_wallet(&issuer, &["create", "--issuer"]);
    let issuer_key = line_starting(&created, "issuer public key: ").replace("issuer public key: ", "");
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

#[test]
fn enrol_and_pay_anonymously_with_the_cli_and_the_auditor_names_the_parties() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let (issuer, alice, bob, auditor_key, ra_dir) = (
        path("issuer.json"),
        path("alice.json"),
        path("bob.json"),
        path("auditor.key"),
        path("ra"),
    );
    let created = core_wallet(&issuer, &["create", "--issuer"]);
    let issuer_key = line_starting(&created, "issuer public key: ").replace("issuer public key: ", "");
    let keys = run(&["audit", "keygen", "--out", auditor_key.to_str().unwrap()]).unwrap();
    let value_auditor = keys.lines().next().unwrap().trim().to_string();
    let owner_auditor = line_starting(&keys, "owner auditor key: ").replace("owner auditor key: ", "");
    let cosigning_key = line_starting(&keys, "co-signing key: ").replace("co-signing key: ", "");
    let ra_key = ra(&ra_dir, &["init"]);
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
}
