//! Tests of the `specie` binary: `tx inspect`, help, and a small audited `demo` run.

use std::process::{Command, Output as ProcessOutput};

use serde_json::Value;
use specie_codec::Encode;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, Input, MintTransaction, NonceMode, OutPoint, Output, SpecieTransaction, Transaction,
    Txid,
};

use crate::cluster_harness::free_ports;

// From /work/shared/vectors/opencbdc-format.md: the reference's zero-input "mint" shape.
const MINT_TX_SER: &str = "00000000000000000200000000000000da24aa23a493b40070ab2b078e87302dc86244e5e75d702df5182cad469a33e76400000000000000da24aa23a493b40070ab2b078e87302dc86244e5e75d702df5182cad469a33e732000000000000000000000000000000";
const MINT_TXID: &str = "2d549e9d8ea165428d8dce262f355b949a9a89482b0e86dd18aecf05ae65b95b";
const MINT_UHS_ID_0: &str = "d84c6bb57c0926137e6173d947d2a8f2a0fd2e3d081fbceda1ec278f8ee4d1d9";
const MINT_UHS_ID_1: &str = "d4de0cb6c27d370bccc85676f42d1f9c31da7602d0495727633c5284ec053fcf";
const ALICE_PRIVKEY: [u8; 32] = [0x01; 32];
const BOB_PRIVKEY: [u8; 32] = [0x02; 32];

fn specie(args: &[&str]) -> ProcessOutput {
    Command::new(env!("CARGO_BIN_EXE_specie"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the specie binary runs")
}

fn stdout(output: &ProcessOutput) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &ProcessOutput) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code, and that the process did not panic whatever it returned.
fn assert_exit(output: &ProcessOutput, code: i32) {
    assert!(!stderr(output).contains("panicked"), "panicked:\n{}", stderr(output));
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

fn inspect_json(hex: &str, extra: &[&str]) -> (ProcessOutput, Value) {
    let mut args = vec!["tx", "inspect", "--json", hex];
    args.extend_from_slice(extra);
    let output = specie(&args);
    let text = stdout(&output);
    let value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{text}\nstderr:\n{}", stderr(&output)));
    (output, value)
}

fn pay_to(secret: &[u8; 32], value: u64) -> Output {
    let keypair = keypair_from_secret(secret).unwrap();
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(&keypair)),
        value,
    }
}

/// Alice spends a 100 output of some earlier transaction: 60 to bob, 40 back to herself.
fn signed_transfer() -> Transaction {
    let alice = keypair_from_secret(&ALICE_PRIVKEY).unwrap();
    let input = Input {
        prevout: OutPoint {
            txid: Txid([0x5a; 32]),
            index: 3,
        },
        data: pay_to(&ALICE_PRIVKEY, 100),
    };
    let mut tx = Transaction {
        inputs: vec![input],
        outputs: vec![pay_to(&BOB_PRIVKEY, 60), pay_to(&ALICE_PRIVKEY, 40)],
        witnesses: vec![],
    };
    tx.sign(&[alice], NonceMode::Deterministic).unwrap();
    tx
}

#[test]
fn inspect_reference_vector() {
    let output = specie(&["tx", "inspect", MINT_TX_SER]);
    // The reference mints with a zero-input transfer, which its own sentinel refuses.
    assert_exit(&output, 1);
    let text = stdout(&output);
    for expected in [MINT_TXID, MINT_UHS_ID_0, MINT_UHS_ID_1, "no_inputs"] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    assert!(text.contains("value 100") && text.contains("value 50"), "{text}");

    let (output, json) = inspect_json(MINT_TX_SER, &[]);
    assert_exit(&output, 1);
    assert_eq!(json["kind"], "transfer", "{json}");
    assert_eq!(json["txid"], MINT_TXID, "{json}");
    assert_eq!(json["inputs"], serde_json::json!([]), "{json}");
    assert_eq!(
        json["outputs"],
        serde_json::json!([{"value": 100, "uhs_id": MINT_UHS_ID_0}, {"value": 50, "uhs_id": MINT_UHS_ID_1}]),
        "{json}"
    );
    assert_eq!(json["verdict"]["valid"], false, "{json}");
    assert_eq!(json["verdict"]["code"], "no_inputs", "{json}");
    // Upper-case hex and surrounding whitespace are accepted.
    let (output, json) = inspect_json(&format!(" {} ", MINT_TX_SER.to_uppercase()), &[]);
    assert_exit(&output, 1);
    assert_eq!(json["txid"], MINT_TXID, "{json}");
}

#[test]
fn inspect_signed_transfer() {
    let tx = signed_transfer();
    let txid = tx.txid().to_string();
    let input_id = hex::encode(tx.inputs[0].uhs_id().0);
    let output_ids: Vec<String> = tx
        .output_uhs_ids(&tx.txid())
        .iter()
        .map(|id| hex::encode(id.0))
        .collect();
    let hex = hex::encode(tx.encode());

    let output = specie(&["tx", "inspect", &hex]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    for expected in [&txid, &input_id, &output_ids[0], &output_ids[1]] {
        assert!(text.contains(expected.as_str()), "{expected} missing from:\n{text}");
    }
    assert!(text.contains("valid"), "{text}");

    let (output, json) = inspect_json(&hex, &[]);
    assert_exit(&output, 0);
    assert_eq!(json["kind"], "transfer", "{json}");
    assert_eq!(json["txid"], txid, "{json}");
    assert_eq!(json["inputs"], serde_json::json!([input_id]), "{json}");
    assert_eq!(json["outputs"][0]["uhs_id"], output_ids[0], "{json}");
    assert_eq!(json["outputs"][1]["value"], 40, "{json}");
    assert_eq!(json["verdict"]["valid"], true, "{json}");

    // Corrupt the signature: same txid, verdict invalid_signature on input 0, exit 1.
    let mut forged = tx.clone();
    *forged.witnesses[0].0.last_mut().unwrap() ^= 0x80;
    let hex = hex::encode(forged.encode());
    let output = specie(&["tx", "inspect", &hex]);
    assert_exit(&output, 1);
    assert!(stdout(&output).contains("invalid_signature"), "{}", stdout(&output));
    let (output, json) = inspect_json(&hex, &[]);
    assert_exit(&output, 1);
    assert_eq!(json["txid"], txid, "{json}");
    assert_eq!(json["verdict"]["valid"], false, "{json}");
    assert_eq!(json["verdict"]["code"], "invalid_signature", "{json}");
    assert_eq!(json["verdict"]["index"], 0, "{json}");

    // Unbalanced: the sentinel's asymmetric_values.
    let mut unbalanced = tx.clone();
    unbalanced.outputs[1].value = 41;
    unbalanced
        .sign(
            &[keypair_from_secret(&ALICE_PRIVKEY).unwrap()],
            NonceMode::Deterministic,
        )
        .unwrap();
    let (output, json) = inspect_json(&hex::encode(unbalanced.encode()), &[]);
    assert_exit(&output, 1);
    assert_eq!(json["verdict"]["code"], "asymmetric_values", "{json}");
}

/// A `name=value` vector of `docs/transaction-format.md`.
fn documented_vector(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/transaction-format.md");
    let text = std::fs::read_to_string(path).expect("the format document");
    let prefix = format!("{name}=");
    let line = text.lines().find(|line| line.starts_with(&prefix));
    line.unwrap_or_else(|| panic!("vector {name} missing"))[prefix.len()..].to_owned()
}

#[test]
fn inspect_fastpay_redeem_shows_its_marker_and_needs_a_committee() {
    let (output, json) = inspect_json(&documented_vector("fastpay_redeem_ser"), &[]);
    assert_exit(&output, 1);
    assert_eq!(json["kind"], "fastpay_redeem", "{json}");
    assert_eq!(json["txid"], documented_vector("fastpay_redeem_txid"), "{json}");
    assert_eq!(
        json["fastpay_marker"],
        documented_vector("fastpay_redeem_marker"),
        "{json}"
    );
    assert_eq!(json["mint_marker"], Value::Null, "{json}");
    assert_eq!(json["outputs"][0]["value"], 10, "{json}");
    assert_eq!(json["verdict"]["code"], "no_fastpay_committee", "{json}");
}

#[test]
fn inspect_mint_needs_a_trusted_issuer() {
    let issuer = keypair_from_secret(&[0x07; 32]).unwrap();
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [0x11; 32],
        vec![pay_to(&ALICE_PRIVKEY, 500)],
        &issuer,
        NonceMode::Deterministic,
    ));
    let hex = hex::encode(mint.encode());
    let issuer_hex = hex::encode(xonly_bytes(&issuer));

    let (output, json) = inspect_json(&hex, &["--issuer", &issuer_hex]);
    assert_exit(&output, 0);
    assert_eq!(json["kind"], "mint", "{json}");
    assert_eq!(json["txid"], mint.txid().to_string(), "{json}");
    assert_eq!(json["verdict"]["valid"], true, "{json}");
    assert!(json["mint_marker"].as_str().is_some_and(|m| m.len() == 64), "{json}");

    let (output, json) = inspect_json(&hex, &[]);
    assert_exit(&output, 1);
    assert_eq!(json["verdict"]["code"], "unknown_issuer", "{json}");

    let output = specie(&["tx", "inspect", &hex, "--issuer", "not-a-key"]);
    assert_exit(&output, 1);
    assert!(stderr(&output).contains("--issuer"), "{}", stderr(&output));
}

#[test]
fn inspect_rejects_garbage_without_panicking() {
    let truncated = &MINT_TX_SER[..MINT_TX_SER.len() - 20];
    let cases: [(&str, &str); 6] = [
        ("not hex", "not hex"),
        ("abc", "not hex"),
        (truncated, "not a transaction"),
        ("", "not a transaction"),
        ("ff", "not a transaction"),
        // Claims 2^64 - 1 inputs.
        ("ffffffffffffffff", "not a transaction"),
    ];
    for (input, message) in cases {
        let output = specie(&["tx", "inspect", input]);
        assert_exit(&output, 1);
        let err = stderr(&output);
        assert!(err.starts_with("error: ") && err.contains(message), "{input:?}: {err}");

        let (output, json) = inspect_json(input, &[]);
        assert_exit(&output, 1);
        assert_eq!(json["verdict"]["valid"], false, "{json}");
        assert_eq!(json["verdict"]["code"], "decode_error", "{json}");
        assert!(
            json["verdict"]["message"].as_str().is_some_and(|m| m.contains(message)),
            "{json}"
        );
    }
    // A valid transaction with a trailing byte is not one transaction.
    let mut bytes = signed_transfer().encode();
    bytes.push(0);
    let output = specie(&["tx", "inspect", &hex::encode(bytes)]);
    assert_exit(&output, 1);
    assert!(stderr(&output).contains("not a transaction"), "{}", stderr(&output));
}

#[test]
fn help_describes_the_commands() {
    let output = specie(&["--help"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    for expected in ["central bank digital currency", "demo", "node", "wallet", "tx"] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }

    let output = specie(&["demo", "--help"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    for expected in ["audit", "--payments", "--wallets", "--double-spend-fraction", "--json"] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }

    let output = specie(&["tx", "inspect", "--help"]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("verdict"), "{}", stdout(&output));

    let output = specie(&["--version"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        stdout(&output)
    );

    // No subcommand, or an unknown one: usage on stderr, non-zero.
    for args in [&[][..], &["frobnicate"][..]] {
        let output = specie(args);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr(&output).contains("Usage"), "{args:?}: {}", stderr(&output));
        assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    }
}

/// `specie bench scale --workload cluster` starts a cluster pinned to one core, loads it, reads
/// every member's threads (named by member) and the bench's figures, and stops the cluster: its
/// ports are free again afterwards (no timing is asserted).
#[test]
fn bench_scale_runs_a_cluster_reads_its_members_threads_and_stops_it() {
    // A default cluster's processes, one port each, with room to spare.
    let base_port = free_ports(20 + 9);
    let output = specie(&[
        "bench",
        "scale",
        "--workload",
        "cluster",
        "--cores",
        "1",
        // On one core of a debug build the first swaps of the bench's 20 000 window confirm
        // about a second in: a 1-second run can end with none (seen at `b9057cc` as well).
        "--seconds",
        "3",
        "--base-port",
        &base_port.to_string(),
        "--json",
    ]);
    assert_exit(&output, 0);
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["workload"], "cluster");
    let point = &report["points"][0];
    assert_eq!(point["cores"], 1);
    assert!(point["tps"].as_f64().unwrap() > 0.0, "{point}");
    let names: Vec<&str> = (point["threads"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    for member in ["shard-", "coordinator-"] {
        assert!(
            names.iter().any(|n| n.starts_with(member)),
            "no {member} thread in {names:?}"
        );
    }
    // Torn down: the cluster's first port can be bound again.
    std::net::TcpListener::bind(("127.0.0.1", base_port)).expect("the scale run's cluster stopped");
}

/// `specie bench exchange` teaches its figures and runs at a toy size: every clearing valid, the
/// JSON has each phase's figures (no timing is asserted).
#[test]
fn bench_exchange_explains_itself_and_runs_at_a_toy_size() {
    let output = specie(&["bench", "exchange", "--help"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    for expected in [
        "Tatonnement",
        "time-out",
        "state hash",
        "fdatasync",
        "--offers",
        "--accounts",
        "--json",
    ] {
        assert!(text.contains(expected), "{expected} missing from:\n{text}");
    }
    let output = specie(&[
        "bench",
        "exchange",
        "--assets",
        "2,3",
        "--offers",
        "0,300",
        "--runs",
        "1",
        "--accounts",
        "300",
        "--execution-assets",
        "3",
        "--block-transactions",
        "200",
        "--blocks",
        "1",
        "--ceiling-seconds",
        "0.02",
        "--json",
    ]);
    assert_exit(&output, 0);
    let json: Value = serde_json::from_str(&stdout(&output)).expect("one JSON object");
    assert_eq!(
        json.pointer("/clearing_summary/invalid"),
        Some(&Value::from(0)),
        "{json:#}"
    );
    assert_eq!(json["clearing"].as_array().map(Vec::len), Some(4), "{json:#}");
    for pointer in [
        "/clearing/1/compute_ms/p99",
        "/clearing/3/volume_cleared_share/median",
        "/ceiling/verify_strict_per_core_per_s",
        "/execution/kinds/0/durable_per_s",
        "/execution/kinds/3/per_cpu_s",
        "/execution/one_thread_payments_vs_paper",
    ] {
        let value = json.pointer(pointer).and_then(Value::as_f64);
        assert!(value.is_some_and(|v| v.is_finite() && v > 0.0), "{pointer} in {json:#}");
    }
}

#[test]
fn demo_runs_and_audits_in_both_shapes_of_the_core() {
    for shape in ["2pc", "atomizer"] {
        demo_runs_and_audits(shape);
    }
}

fn demo_runs_and_audits(shape: &str) {
    let mut args = vec![
        "demo",
        "--payments",
        "2000",
        "--wallets",
        "20",
        "--shape",
        shape,
        "--json",
    ];
    if shape == "2pc" {
        // Two coordinators: batches alternate between them, and a double spend whose halves
        // reach different coordinators meets the shards' locks, which keep their dtxns apart.
        args.extend(["--coordinators", "2"]);
    }
    let output = specie(&args);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert_eq!(text.trim().lines().count(), 1, "not one line:\n{text}");
    let summary: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    assert!(summary.is_object(), "{summary}");

    let number = |key: &str| {
        summary[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} is not a number: {summary}"))
    };
    assert!(number("confirmed") > 0.0, "{summary}");
    assert!(number("throughput_tps") > 0.0, "{summary}");
    let p50 = number("latency_ms_p50");
    let p99 = number("latency_ms_p99");
    assert!(p50 >= 0.0 && p99 >= p50, "{summary}");
    assert!(summary["rejected"].is_object(), "{summary}");
    assert_eq!(summary["audit_ok"], true, "{summary}");
    assert_eq!(summary["shape"], shape, "{summary}");
    assert_eq!(summary["ledger_of_record_replays_to_uhs"], true, "{summary}");
    let issued = summary["minted"].as_u64().unwrap() - summary["redeemed"].as_u64().unwrap();
    let report = assert_supply_report(&summary["supply"], issued, &summary);
    assert_eq!(
        report["supply"]["core_outputs"],
        summary["wallet_balances"].as_u64().unwrap().to_string(),
        "{summary}"
    );

    let checks = &summary["checks"];
    let count = |key: &str| {
        checks[key]
            .as_u64()
            .unwrap_or_else(|| panic!("checks.{key} is not a count: {summary}"))
    };
    assert!(count("replays") > 0, "no replays were tried: {summary}");
    assert_eq!(count("replays_rejected"), count("replays"), "{summary}");
    assert!(count("forged") > 0, "no forged signatures were tried: {summary}");
    assert_eq!(count("forged_rejected"), count("forged"), "{summary}");
    assert_eq!(count("conflict_pairs_with_two_winners"), 0, "{summary}");
    assert_eq!(count("honest_refused"), 0, "{summary}");
}

#[test]
fn demo_privacy_refuses_every_forgery_and_the_auditor_agrees_with_the_wallets() {
    let output = specie(&["demo", "--privacy", "--wallets", "8", "--rounds", "3", "--json"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    let summary: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    let count = |key: &str| {
        summary[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} is not a count: {summary}"))
    };
    assert!(count("transparent_payments") > 0, "{summary}");
    assert!(count("confidential_transactions") > 0, "{summary}");
    assert!(count("forgeries") >= 5, "{summary}");
    assert_eq!(count("forgeries_refused"), count("forgeries"), "{summary}");
    assert_eq!(count("honest_refused"), 0, "{summary}");
    assert!(count("auditor_reconstructed") > 0, "{summary}");
    assert_eq!(count("auditor_mismatches"), 0, "{summary}");
    assert_eq!(
        count("auditor_held"),
        count("minted") - count("redeemed"),
        "the auditor's reading of the ledger is the money in circulation: {summary}"
    );
    assert_eq!(summary["ledger_replays_to_uhs"], true, "{summary}");
    assert!(count("forged_endorsements") > 0, "{summary}");
    assert!(count("ledger_records_endorsed") > 0, "{summary}");
    assert_eq!(count("ledger_records_unendorsed"), 0, "{summary}");
    assert_eq!(summary["audit_ok"], true, "{summary}");
    let report = assert_supply_report(&summary["supply"], count("minted") - count("redeemed"), &summary);
    // The unlinkable level: payments made, every forgery of its own kinds refused with its code,
    // and the auditor's total of the level (what entered less what left) the wallets' tokens.
    assert!(
        count("unlinkable_transactions") > 8,
        "8 entries and unlinkable payments after them: {summary}"
    );
    assert!(count("unlinkable_held") > 0, "{summary}");
    for code in [
        "invalid_unlinkable_proof",
        "output_already_exists",
        "unlinkable_redeemed_mismatch",
        "certification_refused_not_in_ledger",
    ] {
        assert!(
            summary["forgery_codes"][code].as_u64().unwrap_or(0) > 0,
            "no {code} refusal: {summary}"
        );
    }
    assert_eq!(count("auditor_unlinkable"), count("unlinkable_held"), "{summary}");
    let hidden = count("confidential_held") + count("anonymous_held") + count("unlinkable_held");
    assert!(hidden > 0, "the demo ends with value in hidden notes: {summary}");
    assert_eq!(report["supply"]["hidden_notes"], hidden.to_string(), "{summary}");
    assert_eq!(
        report["supply"]["core_outputs"],
        count("transparent_held").to_string(),
        "{summary}"
    );
}

/// A demo's supply report (`supply` in its JSON, what `specie audit supply` prints): it holds,
/// it agrees with the demo's own audit, and it counts `issued` as minted − redeemed. Returns the
/// report.
fn assert_supply_report<'a>(supply: &'a Value, issued: u64, summary: &Value) -> &'a Value {
    assert_eq!(supply["agrees_with_demo"], true, "{summary}");
    let report = &supply["report"];
    assert_eq!(report["ok"], true, "{summary}");
    assert_eq!(report["supply"]["balanced"], true, "{summary}");
    assert_eq!(report["supply"]["issued"], issued.to_string(), "{summary}");
    assert!(report["supply"]["ledger"]["height"].as_u64().unwrap() > 0, "{summary}");
    report
}

/// The report's one mode row: its role, and what the ledger says the mode holds (funded − returned).
fn single_mode_row(report: &Value, role: &str, summary: &Value) -> (u64, Value) {
    let rows = report["modes"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{summary}");
    assert_eq!(rows[0]["role"], role, "{summary}");
    assert_eq!(rows[0]["agrees"], true, "{summary}");
    let held: u64 = rows[0]["core_says"].as_str().unwrap().parse().unwrap();
    (held, rows[0]["books"].clone())
}

#[test]
fn demo_rejects_bad_flags() {
    let cases: [(&[&str], &str); 6] = [
        (&["--double-spend-fraction", "2"], "--double-spend-fraction"),
        (&["--double-spend-fraction", "NaN"], "--double-spend-fraction"),
        (&["--bad-signature-fraction=-0.1"], "--bad-signature-fraction"),
        (&["--wallets", "1"], "--wallets"),
        (&["--payments", "many"], "--payments"),
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (flags, mention) in cases {
        let mut args = vec!["demo", "--json"];
        args.extend_from_slice(flags);
        let output = specie(&args);
        assert!(!output.status.success(), "{flags:?} was accepted");
        let err = stderr(&output);
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
        assert!(err.contains("error") && err.contains(mention), "{flags:?}: {err}");
        assert!(stdout(&output).trim().is_empty(), "{flags:?}: {}", stdout(&output));
    }
}

/// Concurrent commands on one wallet each get their turn (the wallet's lock), so no change is
/// lost: without it, two `address` commands that load the same file both save their own copy.
#[test]
fn concurrent_wallet_commands_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let wallet = dir.path().join("w.json");
    let wallet = wallet.to_str().unwrap();
    let created = specie(&["wallet", "--wallet", wallet, "create"]);
    assert!(created.status.success(), "{}", stderr(&created));
    let list = || {
        let output = specie(&["wallet", "--wallet", wallet, "address", "--list"]);
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output).lines().count()
    };
    let before = list();
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_specie"))
                .args(["wallet", "--wallet", wallet, "address"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    assert_eq!(list(), before + 8, "every new address was kept");
}

/// Runs `specie wallet --wallet WALLET ARGS…` with `passphrase` (if any) in the environment and
/// nothing else of the test's environment that could give one.
fn wallet_command(wallet: &str, args: &[&str], passphrase: Option<&str>) -> ProcessOutput {
    let mut command = Command::new(env!("CARGO_BIN_EXE_specie"));
    command
        .args(["wallet", "--wallet", wallet])
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("SPECIE_WALLET_PASSPHRASE");
    if let Some(passphrase) = passphrase {
        command.env("SPECIE_WALLET_PASSPHRASE", passphrase);
    }
    command.output().expect("the specie binary runs")
}

/// An encrypted wallet file holds no key in clear; with its passphrase (a file or the
/// environment) commands work as on any wallet; without it, or with a wrong one, they fail,
/// saying what to do, and the file is not changed. `encrypt` turns a wallet in clear into one.
#[test]
fn encrypted_wallet_keeps_its_keys_out_of_the_file_and_needs_its_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    let wallet = path.to_str().unwrap();
    let write = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_owned()
    };
    let pass = write("pass", "correct horse battery staple\n");
    let wrong = write("wrong", "correct horse battery stable\n");

    let refused = wallet_command(wallet, &["create", "--encrypt"], None);
    assert_exit(&refused, 1);
    assert!(stderr(&refused).contains("--passphrase-file"), "{}", stderr(&refused));
    assert!(!path.exists(), "nothing was created");

    let created = wallet_command(wallet, &["--passphrase-file", &pass, "create", "--encrypt"], None);
    assert_exit(&created, 0);
    let address = stdout(&created)
        .lines()
        .find_map(|line| line.strip_prefix("address: ").map(str::to_owned))
        .expect("create prints the address");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"specie-wallet-encrypted\""), "{text}");
    for clear in ["secret_key", "usd1", &address] {
        assert!(!text.contains(clear), "{clear:?} is in the encrypted file");
    }

    let balance = wallet_command(wallet, &["--passphrase-file", &pass, "balance"], None);
    assert_exit(&balance, 0);
    assert!(stdout(&balance).contains("spendable:   0 usd"), "{}", stdout(&balance));
    let made = wallet_command(wallet, &["address"], Some("correct horse battery staple"));
    assert_exit(&made, 0);
    let list = wallet_command(wallet, &["--passphrase-file", &pass, "address", "--list"], None);
    assert_exit(&list, 0);
    assert_eq!(stdout(&list).lines().count(), 2, "{}", stdout(&list));
    assert!(stdout(&list).contains(&address));
    let saved = std::fs::read(&path).unwrap();
    assert!(
        String::from_utf8_lossy(&saved).contains("specie-wallet-encrypted"),
        "still encrypted"
    );

    let without = wallet_command(wallet, &["address"], None);
    assert_exit(&without, 1);
    let message = stderr(&without);
    assert!(
        message.contains("is an encrypted wallet file and no passphrase was given"),
        "{message}"
    );
    assert!(
        message.contains("--passphrase-file") && message.contains("SPECIE_WALLET_PASSPHRASE"),
        "{message}"
    );
    for args in [
        &["--passphrase-file", &wrong, "address"][..],
        &["--passphrase-file", &wrong, "balance"],
    ] {
        let output = wallet_command(wallet, args, None);
        assert_exit(&output, 1);
        assert!(
            stderr(&output).contains("the passphrase does not open"),
            "{}",
            stderr(&output)
        );
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        saved,
        "a refused command changes nothing"
    );

    let clear = dir.path().join("clear.json");
    let clear = clear.to_str().unwrap();
    assert_exit(&wallet_command(clear, &["create"], None), 0);
    assert_exit(&wallet_command(clear, &["encrypt"], None), 1);
    assert_exit(
        &wallet_command(clear, &["--passphrase-file", &pass, "encrypt"], None),
        0,
    );
    assert!(!std::fs::read_to_string(clear).unwrap().contains("secret_key"));
    assert_exit(&wallet_command(clear, &["balance"], None), 1);
    assert_exit(
        &wallet_command(clear, &["balance"], Some("correct horse battery staple")),
        0,
    );
}

/// `create` keeps how to reach the node (the auth file's path, never its contents) beside the
/// node's URL, and warns once that plain http:// to another machine is unencrypted.
#[test]
fn wallet_create_keeps_node_settings_and_warns_about_plain_http() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("node.token");
    std::fs::write(&token, "Bearer not-for-printing\n").unwrap();
    let wallet = dir.path().join("w.json");
    let wallet = wallet.to_str().unwrap();
    let args = [
        "--node",
        "http://192.0.2.7:8470",
        "--node-auth-file",
        token.to_str().unwrap(),
        "create",
    ];
    let created = wallet_command(wallet, &args, None);
    assert_exit(&created, 0);
    let errors = stderr(&created);
    let warnings: Vec<&str> = errors.lines().filter(|line| line.contains("unencrypted")).collect();
    assert_eq!(warnings.len(), 1, "{}", stderr(&created));
    assert!(
        warnings[0].starts_with("warning: http://192.0.2.7:8470"),
        "{warnings:?}"
    );
    let document: Value = serde_json::from_slice(&std::fs::read(wallet).unwrap()).unwrap();
    assert_eq!(document["node_url"], "http://192.0.2.7:8470");
    assert_eq!(document["node_auth_file"], token.to_str().unwrap());
    let everything = format!("{}{}{document}", stdout(&created), stderr(&created));
    assert!(!everything.contains("not-for-printing"), "{everything}");

    let local = dir.path().join("local.json");
    let local = wallet_command(
        local.to_str().unwrap(),
        &["--node", "http://127.0.0.1:8470", "create"],
        None,
    );
    assert_exit(&local, 0);
    assert!(!stderr(&local).contains("unencrypted"), "{}", stderr(&local));
    let missing = dir.path().join("missing.token");
    let args = ["--node-auth-file", missing.to_str().unwrap(), "create"];
    let refused = wallet_command(dir.path().join("x.json").to_str().unwrap(), &args, None);
    assert_exit(&refused, 1);
    assert!(stderr(&refused).contains("--node-auth-file"), "{}", stderr(&refused));
}

/// Evidence from two conflicting final certificates (commit votes) of a 4-member committee:
/// authorities 0 and 1 signed both; and a round change of authority 3 that hides its commit.
fn conflicting_evidence() -> specie_fastpay::Evidence {
    use specie_fastpay::test_support::SigningCommittee;
    use specie_fastpay::{
        deterministic_key, AccountKey, BrokenPromise, DoubleVote, Recipient, RoundChange, TransferOrder,
    };
    let signing = SigningCommittee::deterministic(4, 1);
    let owner = deterministic_key("account", 0);
    let certify = |to: u8, signers: &[u16]| {
        let order = TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: Recipient::Account(AccountKey([to; 32])),
            amount: 5,
            sequence: 0,
            memo: Vec::new(),
        }
        .sign(&owner);
        let certificate = signing.commit_certificate(0, &order, signers);
        assert_eq!(certificate.check(&signing.committee), Ok(()));
        certificate
    };
    let (first, second) = (certify(1, &[0, 1, 2]), certify(2, &[0, 1, 3]));
    let hiding = RoundChange {
        committee_id: signing.committee.id(),
        account: AccountKey(owner.verifying_key().to_bytes()),
        sequence: 0,
        round: 1,
        prepared_first: None,
        lock: None,
    };
    let hiding = signing.round_change(3, hiding, None);
    specie_fastpay::Evidence {
        double_votes: DoubleVote::from_certificates(&first, &second),
        committee: signing.committee.clone(),
        broken_promises: BrokenPromise::find([&hiding], &[&second]),
    }
}

#[test]
fn byzantine_check_evidence_convicts_exactly_the_double_signers_and_promise_breakers_and_refuses_doctored_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.bin");
    let evidence = conflicting_evidence();
    let mut bytes = Vec::new();
    evidence.encode_to(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let output = specie(&["byzantine", "check-evidence", path.to_str().unwrap()]);
    assert_exit(&output, 0);
    let convicted: Vec<String> = stdout(&output)
        .lines()
        .filter(|l| l.starts_with("convicted:"))
        .map(String::from)
        .collect();
    assert_eq!(convicted.len(), 3, "{}", stdout(&output));
    for (line, authority) in convicted.iter().zip([0, 1, 3]) {
        assert!(
            line.starts_with(&format!("convicted: authority {authority} ")),
            "{line}"
        );
    }

    // Blame an honest authority instead: its key does not verify the signatures.
    let mut framed_by_votes = evidence.clone();
    framed_by_votes.double_votes[0].authority = 2;
    let mut framed_by_promise = evidence.clone();
    framed_by_promise.broken_promises[0].authority = 2;
    for framed in [framed_by_votes, framed_by_promise] {
        let mut bytes = Vec::new();
        framed.encode_to(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let output = specie(&["byzantine", "check-evidence", path.to_str().unwrap()]);
        assert_exit(&output, 1);
        assert!(stdout(&output).contains("convicts no one"), "{}", stdout(&output));
    }

    std::fs::write(&path, b"not evidence at all").unwrap();
    let output = specie(&["byzantine", "check-evidence", path.to_str().unwrap()]);
    assert_exit(&output, 1);
    assert!(stderr(&output).contains("is not evidence"), "{}", stderr(&output));
}

#[test]
fn demo_byzantine_funds_from_the_core_pays_redeems_once_and_audits() {
    let output = specie(&[
        "demo",
        "--byzantine",
        "--payments",
        "300",
        "--wallets",
        "24",
        "--equivocation-fraction",
        "0.05",
        "--redeem-fraction",
        "0.1",
        "--json",
    ]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    let summary: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    let audit = &summary["audit"];
    assert_eq!(audit["ok"], true, "{summary}");
    assert_eq!(audit["minted"], 24 * 10_000, "{summary}");
    assert!(summary["payments_settled"].as_u64().unwrap() > 200, "{summary}");
    assert!(summary["owners_equivocating"].as_u64().unwrap() > 0, "{summary}");
    let redeemed = &summary["redeemed"];
    assert!(redeemed["count"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(redeemed["replays_refused"], redeemed["count"], "{summary}");
    assert_eq!(
        audit["core_spendable"].as_i64().unwrap() + audit["byzantine_held"].as_i64().unwrap(),
        24 * 10_000,
        "{summary}"
    );
    let report = assert_supply_report(&audit["supply"], 24 * 10_000, &summary);
    let (held, books) = single_mode_row(report, "fastpay_committee", &summary);
    assert_eq!(held as i64, audit["byzantine_held"].as_i64().unwrap(), "{summary}");
    assert_eq!(books["holds"], held, "{summary}");
    let p50 = summary["to_settlement_ms"]["p50"].as_f64().unwrap();
    assert!(
        p50 > 0.0 && summary["to_settlement_ms"]["p99"].as_f64().unwrap() >= p50,
        "{summary}"
    );
}

/// Offline cash end to end: devices funded from the core, cheaters caught and named with
/// evidence that `specie offline check-evidence` accepts, payouts back to the core once, and the
/// supply audit across both.
#[test]
fn demo_offline_funds_from_the_core_names_the_cheaters_pays_out_once_and_audits() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let output = specie(&[
        "demo",
        "--offline",
        "--payments",
        "1500",
        "--wallets",
        "16",
        "--cheater-fraction",
        "0.25",
        "--seed",
        "7",
        "--data-dir",
        data.to_str().unwrap(),
        "--json",
    ]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    let summary: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    let audit = &summary["audit"];
    assert_eq!(audit["ok"], true, "{summary}");
    assert_eq!(audit["minted"], 16 * 800, "{summary}");
    let outstanding: u64 = audit["offline_outstanding"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        audit["core_spendable"].as_u64().unwrap() + outstanding,
        16 * 800,
        "{summary}"
    );
    let report = assert_supply_report(&audit["supply"], 16 * 800, &summary);
    let (held, books) = single_mode_row(report, "bridge", &summary);
    assert_eq!(
        (held, books["holds"].as_u64()),
        (outstanding, Some(outstanding)),
        "{summary}"
    );
    assert!(
        books["notes"][0][1].as_u64().unwrap() > 0,
        "the double-spent value refused is named: {summary}"
    );
    assert_eq!(summary["payments"], 1500, "{summary}");
    assert!(
        summary["syncs"].as_u64().unwrap() > 0,
        "no token reached the hop limit: {summary}"
    );
    let deposits = &summary["deposits"];
    assert!(deposits["double_spends_refused"].as_u64().unwrap() > 0, "{summary}");
    let named = summary["named"].as_array().unwrap();
    assert!(
        !named.is_empty() && named.len() <= 4,
        "only the 4 cheaters may be named: {summary}"
    );
    assert_eq!(
        summary["evidence_checked"], deposits["double_spends_refused"],
        "{summary}"
    );
    let payouts = &summary["payouts"];
    assert!(payouts["confirmed"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(payouts["replays_refused"], payouts["confirmed"], "{summary}");

    let evidence = data.join("evidence.bin");
    let output = specie(&["offline", "check-evidence", evidence.to_str().unwrap()]);
    assert_exit(&output, 0);
    for identity in named {
        assert!(
            stdout(&output).contains(identity.as_str().unwrap()),
            "{}",
            stdout(&output)
        );
    }
}

/// Alice's one-time key pays one token to Bob and to Carol; the evidence, built from the
/// authority's tree as the authority builds it, convicts Alice's identity and no one else.
fn offline_double_spend() -> specie_offline::EvidenceBundle {
    use specie_offline::{
        deterministic_key, History, Issuance, KeyBinding, KeyCertificate, KeyRing, Recorded, SigningKey, Token,
    };
    let public = |key: &SigningKey| key.verifying_key().to_bytes();
    let (issuing, certifying) = (
        deterministic_key("cli-issuing", 0),
        deterministic_key("cli-certifying", 0),
    );
    let mut ring = KeyRing::default();
    ring.add_issuing_key(public(&issuing), 100).unwrap();
    ring.add_certifying_key(1, public(&certifying)).unwrap();
    let one_time = |n: u64| deterministic_key("cli-one-time", n);
    let certificate = |n: u64| KeyCertificate::sign(public(&one_time(n)), 1, &certifying);
    let token = Token::issued(Issuance::sign(&issuing, [1; 16], public(&one_time(1))));
    let to_bob = token.transfer(&one_time(1), certificate(2), [1; 16]).unwrap();
    let to_carol = token.transfer(&one_time(1), certificate(3), [2; 16]).unwrap();
    let mut history = History::new(&token.issuance);
    history.record(&to_bob, None).unwrap();
    let Ok(Recorded::New { conflicts }) = history.record(&to_carol, None) else {
        panic!("a second branch");
    };
    let conflict = &conflicts[0];
    let double_spend = specie_offline::DoubleSpend {
        token: history.chain_to(&conflict.node).unwrap(),
        first: conflict.first,
        second: conflict.second,
        binding: KeyBinding::sign(&deterministic_key("cli-identity", 1), public(&one_time(1))),
    };
    specie_offline::EvidenceBundle {
        ring,
        double_spends: vec![double_spend],
    }
}

#[test]
fn offline_check_evidence_convicts_the_double_spender_and_refuses_doctored_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.bin");
    let write = |bundle: &specie_offline::EvidenceBundle| {
        let mut bytes = Vec::new();
        bundle.encode_to(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
    };
    let bundle = offline_double_spend();
    write(&bundle);
    let output = specie(&["offline", "check-evidence", path.to_str().unwrap()]);
    assert_exit(&output, 0);
    let alice = specie_offline::deterministic_key("cli-identity", 1)
        .verifying_key()
        .to_bytes();
    let expected = format!("convicted: identity {} ", hex::encode(alice));
    assert!(stdout(&output).contains(&expected), "{}", stdout(&output));
    assert!(stdout(&output).contains("1 of 1 double spends hold up"));

    // A replay passed off as a double spend; another key passed off as Alice's.
    let mut replay = bundle.clone();
    replay.double_spends[0].second = replay.double_spends[0].first;
    let mut framed = bundle.clone();
    framed.double_spends[0].binding.key = [9; 32];
    for doctored in [replay, framed] {
        write(&doctored);
        let output = specie(&["offline", "check-evidence", path.to_str().unwrap()]);
        assert_exit(&output, 1);
        assert!(stdout(&output).contains("convicts no one"), "{}", stdout(&output));
    }
    std::fs::write(&path, b"not evidence at all").unwrap();
    let output = specie(&["offline", "check-evidence", path.to_str().unwrap()]);
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("is not offline evidence"),
        "{}",
        stderr(&output)
    );
}

/// The exchange end to end: three currencies on three cores, deposits, blocks cleared at one
/// price per currency, every offer cancelled and everything withdrawn back to the cores, the
/// per-currency audit (the exchange keeps only its commission), and the chart.
#[test]
fn demo_exchange_trades_three_currencies_withdraws_everything_and_audits() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart.svg");
    let output = specie(&[
        "demo",
        "--exchange",
        "--wallets",
        "12",
        "--blocks",
        "4",
        "--seed",
        "3",
        "--chart",
        chart.to_str().unwrap(),
        "--json",
    ]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    let summary: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    assert_eq!(summary["ok"], true, "{summary}");
    assert!(summary["included"].as_u64().unwrap() > 0, "{summary}");
    assert!(
        summary["volume_usd"].as_f64().unwrap() > 0.0,
        "nothing traded: {summary}"
    );
    let currencies = summary["audit"].as_array().unwrap();
    assert_eq!(currencies.len(), 3);
    for currency in currencies {
        assert_eq!(currency["ok"], true, "{summary}");
        assert_eq!(currency["on_exchange"], currency["burned"], "{summary}");
        let minted: u64 = currency["minted"].as_str().unwrap().parse().unwrap();
        let report = assert_supply_report(&currency["supply"], minted, &summary);
        let (held, _) = single_mode_row(report, "bridge", &summary);
        assert_eq!(held.to_string(), currency["on_exchange"].as_str().unwrap(), "{summary}");
    }
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
}

/// The walkthroughs in `docs/walkthroughs`, each with the documents that show or link it.
const WALKTHROUGHS: [(&str, &[&str]); 10] = [
    ("core-node.sh", &["README.md"]),
    ("core-cluster.sh", &["README.md", "docs/operator-guide.md"]),
    ("fastpay-node.sh", &["README.md", "docs/byzantine-mode.md"]),
    ("fastpay-cluster.sh", &["README.md", "docs/byzantine-mode.md"]),
    ("offline-node.sh", &["README.md", "docs/offline-mode.md"]),
    ("offline-cluster.sh", &["README.md", "docs/offline-mode.md"]),
    ("exchange-node.sh", &["README.md", "docs/exchange.md"]),
    ("exchange-cluster.sh", &["README.md", "docs/exchange.md"]),
    ("privacy-node.sh", &["README.md", "docs/privacy.md"]),
    ("privacy-cluster.sh", &["README.md", "docs/privacy.md"]),
];

/// How long one walkthrough may run (each takes a few seconds; its waits give up after 30 s).
const WALKTHROUGH_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

/// Sends `signal` to every process of the process group `group`.
fn signal_group(group: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{group}")])
        .stderr(std::process::Stdio::null())
        .status();
}

/// The last lines of every log the walkthrough in `work` left (servers' and the cluster's).
fn walkthrough_logs(work: &std::path::Path) -> String {
    let mut logs = String::new();
    for dir in [work.to_path_buf(), work.join("cluster").join("logs")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths.iter().filter(|p| p.extension().is_some_and(|e| e == "log")) {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n");
            logs.push_str(&format!("--- {}:\n{tail}\n", path.display()));
        }
    }
    logs
}

/// Runs `sh SCRIPT` as a newcomer would: in an empty directory, `specie` on PATH, on free ports.
/// Past [`WALKTHROUGH_LIMIT`] the script's process group is stopped. Fails with the script's
/// output and its servers' logs unless it exits 0; returns how long it took.
fn run_walkthrough(script: &std::path::Path) -> std::time::Duration {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_specie")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let work = tempfile::tempdir().unwrap();
    let output_dir = tempfile::tempdir().unwrap();
    let output_path = output_dir.path().join("output");
    let output = std::fs::File::create(&output_path).unwrap();
    // BASE_PORT takes up to 17 ports (a cluster with a FastPay committee, two coordinator groups
    // on a machine of 9 cores or more, and its core replicas' metrics ports last); the node
    // walkthroughs' ports follow, one each.
    let base = free_ports(22);
    let ports = [
        ("BASE_PORT", 0),
        ("PORT", 17),
        ("EUR_PORT", 18),
        ("OFFLINE_PORT", 19),
        ("EXCHANGE_PORT", 20),
        ("COMMITTEE_PORT", 21),
    ];
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg(script)
        .current_dir(work.path())
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .envs(ports.map(|(name, offset)| (name, (base + offset).to_string())))
        .stdin(std::process::Stdio::null())
        .stdout(output.try_clone().unwrap())
        .stderr(output)
        .process_group(0)
        .spawn()
        .expect("sh runs");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > WALKTHROUGH_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed();
    if status.is_none() {
        // The script's trap stops what it started (and the cluster) on SIGTERM; then the rest.
        signal_group(child.id(), "-TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        signal_group(child.id(), "-KILL");
        let _ = child.wait();
    }
    if status.is_some_and(|status| status.success()) {
        // Its trap stopped every server it started (they share its process group).
        let left = Command::new("kill")
            .args(["-0", "--", &format!("-{}", child.id())])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        signal_group(child.id(), "-KILL");
        assert!(!left.success(), "sh {} left processes running", script.display());
        return elapsed;
    }
    let cluster = work.path().join("cluster");
    if cluster.join("cluster.toml").exists() {
        let _ = specie(&["cluster", "down", "--dir", cluster.to_str().unwrap()]);
    }
    let verdict = match status {
        Some(status) => format!("exited with {status}"),
        None => format!("still ran after {WALKTHROUGH_LIMIT:?}"),
    };
    panic!(
        "sh {} {verdict} (ports from {base}). Its output:\n{}\nIts logs:\n{}",
        script.display(),
        std::fs::read_to_string(&output_path).unwrap_or_default(),
        walkthrough_logs(work.path())
    );
}

/// Every walkthrough of `docs/walkthroughs` runs as written, from nothing to its mode's payment
/// and a check of it; the README shows the node walkthrough verbatim, and each mode's doc links
/// its walkthroughs.
#[test]
fn every_walkthrough_runs_as_written_and_the_docs_show_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("docs/walkthroughs");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = WALKTHROUGHS.iter().map(|(name, _)| name.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "docs/walkthroughs holds exactly the walkthroughs this test runs"
    );

    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let node = read(&dir.join("core-node.sh"));
    assert!(
        read(&root.join("README.md")).contains(&format!("```sh\n{node}```")),
        "README.md shows docs/walkthroughs/core-node.sh verbatim, in a sh block"
    );
    for (script, docs) in WALKTHROUGHS {
        for doc in docs {
            let link = format!("walkthroughs/{script}");
            assert!(read(&root.join(doc)).contains(&link), "{doc} does not link {link}");
        }
    }

    let mut timings = Vec::new();
    for (script, _) in WALKTHROUGHS {
        let took = run_walkthrough(&dir.join(script));
        timings.push(format!("{script} {:.1} s", took.as_secs_f64()));
    }
    eprintln!("walkthroughs: {}", timings.join(", "));
}

/// The newcomer's tryout (`scripts/newcomer-tryout.sh`): the first day's mistakes made on
/// purpose against real nodes, each refused with a message that says what to do, and nothing
/// lost. It runs as the walkthroughs do; the operator guide links it.
#[test]
fn newcomer_tryout_is_refused_with_advice_and_loses_nothing() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let guide = std::fs::read_to_string(root.join("docs/operator-guide.md")).unwrap();
    assert!(
        guide.contains("scripts/newcomer-tryout.sh"),
        "docs/operator-guide.md links the tryout"
    );
    let took = run_walkthrough(&root.join("scripts/newcomer-tryout.sh"));
    eprintln!("newcomer-tryout.sh {:.1} s", took.as_secs_f64());
}
