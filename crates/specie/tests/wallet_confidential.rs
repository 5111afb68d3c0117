//! Confidential payments with the CLI only, against a real `specie node --auditor --endorsement
//! 2-of-3` on 127.0.0.1:
//! Alice is minted coins, shields part of them, pays Bob confidentially and gives him the
//! printed `specie-cpay1…` string; Bob receives it (once, however often he tries), a string with
//! a changed character is refused, Alice unshields the rest, and the auditor's reading of the
//! ledger (`specie audit show`) agrees with both wallets and verifies every record's threshold
//! endorsement.

mod cluster_harness;

use std::path::Path;

use cluster_harness::offline_devices::{core_wallet, run};
use cluster_harness::start_serving;

/// The number after `label` in `specie wallet balance`.
fn balance(wallet: &Path, label: &str) -> u64 {
    let text = core_wallet(wallet, &["balance"]);
    text.lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{label}' in {text}"))
}

/// The last line of `text` that starts with `prefix`.
fn line_starting(text: &str, prefix: &str) -> String {
    let found = text.lines().map(str::trim).rfind(|l| l.starts_with(prefix));
    found.unwrap_or_else(|| panic!("no {prefix}… in {text}")).to_string()
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
    let address = |wallet: &Path| {
        core_wallet(wallet, &["address"])
            .trim()
            .lines()
            .last()
            .unwrap()
            .trim()
            .to_string()
    };
    let minted = core_wallet(&issuer, &["--node", &url, "mint", "1000", "--to", &address(&alice)]);
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);

    core_wallet(&alice, &["shield", "--amount", "600"]);
    assert_eq!(balance(&alice, "spendable:"), 400);
    assert_eq!(balance(&alice, "confidential spendable:"), 600);
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
    assert_eq!(balance(&bob, "confidential spendable:"), 250, "received once");
    core_wallet(&alice, &["unshield", "--amount", "350"]);
    assert_eq!(balance(&alice, "spendable:"), 750);
    assert_eq!(balance(&alice, "confidential spendable:"), 0);

    // The auditor reads the ledger from genesis: the confidential values, all of its jurisdiction.
    let show = [
        "audit",
        "show",
        "--node",
        &url,
        "--key",
        auditor_key.to_str().unwrap(),
        "--json",
    ];
    let shown = run(&show).unwrap();
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
    let mut wrong = show.to_vec();
    wrong.extend(["--group-key", other_key]);
    assert!(run(&wrong).is_err(), "records not endorsed under the key given: exit 1");
    node.kill().unwrap();
    node.wait().unwrap();
}
