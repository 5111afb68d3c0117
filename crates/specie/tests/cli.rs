//! Tests of the `specie` binary: `tx inspect`, help, and a small audited `demo` run.

use std::process::{Command, Output as ProcessOutput};

use serde_json::Value;
use specie_codec::Encode;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, Input, MintTransaction, NonceMode, OutPoint, Output, SpecieTransaction, Transaction,
    Txid,
};

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
    let output = specie(&[
        "demo",
        "--payments",
        "2000",
        "--wallets",
        "20",
        "--shape",
        shape,
        "--json",
    ]);
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
    }
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
}
