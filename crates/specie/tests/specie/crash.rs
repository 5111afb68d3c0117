//! `kill -9` of a loaded node, in either shape of the core, loses no confirmed transaction, and
//! a restart restores the exact UHS. A real `specie node` process on 127.0.0.1 is driven over HTTP by several clients,
//! killed with SIGKILL mid-load, and restarted on the same data directory. The ledger of record
//! comes back replaying to that same UHS (the transactions in flight at the kill decided by the
//! shards), and every transaction a client saw confirmed is in it, with a proof that checks.
//! And a data directory is one process's: a second node on it is refused while the first runs;
//! and the keys it was started with are kept in it, changed only when a start says so.

use crate::cluster_harness;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use secp256k1::Keypair;
use specie_archiver::{BlockHeader, Record, RECORDS_DOMAIN};
use specie_codec::{Decode, Encode};
use specie_merkle::InclusionProof;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    mint_marker, witness_program_commitment, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction,
    Transaction, Txid, UhsId,
};

const CLIENTS: usize = 4;
const COINS_PER_CLIENT: usize = 100;
const BATCH: usize = 20;

struct Node {
    child: Child,
    url: String,
}

fn start(dir: &std::path::Path, issuer: &str, shape: &str) -> Node {
    // 2PC runs two coordinators: each resumes its own dtxns after the kill.
    let coordinators = if shape == "2pc" { "2" } else { "1" };
    let mut child = Command::new(env!("CARGO_BIN_EXE_specie"))
        .args([
            "node",
            "--coordinators",
            coordinators,
            "--shape",
            shape,
            "--listen",
            "127.0.0.1:0",
            "--shards",
            "2",
            "--issuer",
            issuer,
            "--data-dir",
        ])
        .arg(dir)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start specie node");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = loop {
        assert!(Instant::now() < deadline, "node did not start");
        let line = lines.next().expect("node exited early").expect("read stderr");
        if let Some(rest) = line.split("API on ").nth(1) {
            break rest.split_whitespace().next().expect("url").to_string();
        }
    };
    // Keep draining stderr so the node never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Node { child, url }
}

fn post(url: &str, body: serde_json::Value) -> Result<serde_json::Value, String> {
    ureq::post(url)
        .timeout(Duration::from_secs(30))
        .send_json(body)
        .map_err(|e| e.to_string())?
        .into_json()
        .map_err(|e| e.to_string())
}

fn submit(node_url: &str, txs: &[SpecieTransaction]) -> Result<Vec<String>, String> {
    let hexes: Vec<String> = txs.iter().map(|tx| hex::encode(tx.encode())).collect();
    let response = post(
        &format!("{node_url}/v1/transactions"),
        serde_json::json!({"transactions": hexes}),
    )?;
    Ok(response["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["status"].as_str().expect("status").to_string())
        .collect())
}

fn digest(node_url: &str) -> (u64, String) {
    let body: serde_json::Value = ureq::get(&format!("{node_url}/v1/uhs/digest"))
        .call()
        .expect("digest")
        .into_json()
        .expect("json");
    (
        body["ids"].as_u64().expect("ids"),
        body["sha256_sorted"].as_str().expect("sha").to_string(),
    )
}

fn query(node_url: &str, ids: &[UhsId]) -> Vec<bool> {
    let hexes: Vec<String> = ids.iter().map(|id| hex::encode(id.0)).collect();
    let body = post(&format!("{node_url}/v1/uhs/query"), serde_json::json!({"ids": hexes})).expect("query");
    body["present"]
        .as_array()
        .expect("present")
        .iter()
        .map(|p| p.as_bool().expect("bool"))
        .collect()
}

/// What a client learned: transactions confirmed, and a batch whose fate the kill hid.
#[derive(Default)]
struct Seen {
    confirmed: Vec<(Vec<UhsId>, Vec<UhsId>)>,
    confirmed_txids: Vec<Txid>,
    unknown: Vec<(Vec<UhsId>, Vec<UhsId>)>,
}

/// The ledger of record's replayed UHS: count and digest.
fn ledger_digest(node_url: &str) -> (u64, String) {
    let body: serde_json::Value = ureq::get(&format!("{node_url}/v1/ledger"))
        .call()
        .expect("ledger head")
        .into_json()
        .expect("json");
    assert_eq!(body["waiting"], 0, "{body}");
    (
        body["uhs_ids"].as_u64().expect("ids"),
        body["uhs_sha256_sorted"].as_str().expect("sha").to_string(),
    )
}

/// Fetches `txid`'s place in the ledger and checks its proof against the header given, and that
/// header against the block the ledger serves at that height.
fn check_in_ledger(node_url: &str, txid: &Txid) {
    let body: serde_json::Value = ureq::get(&format!("{node_url}/v1/ledger/transactions/{}", hex::encode(txid.0)))
        .call()
        .unwrap_or_else(|e| panic!("{txid} is not in the ledger: {e}"))
        .into_json()
        .expect("json");
    let bytes = |key: &str| hex::decode(body[key].as_str().expect(key)).expect("hex");
    let record = Record::decode_exact(&bytes("record")).expect("record");
    assert_eq!(&record.txid(), txid);
    let proof = InclusionProof::decode_exact(&bytes("proof")).expect("proof");
    let header = BlockHeader::decode_exact(&hex::decode(body["header"]["encoded"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(
        proof.verify(RECORDS_DOMAIN, &record.leaf(), &header.records_root),
        Ok(())
    );
    let block: serde_json::Value = ureq::get(&format!("{node_url}/v1/ledger/blocks/{}", header.height))
        .call()
        .expect("block")
        .into_json()
        .expect("json");
    assert_eq!(block["header"]["hash"].as_str().unwrap(), hex::encode(header.hash()));
}

/// `specie audit prove` and `check-proof` against the node: a transaction in the ledger is proven
/// in, a stranger proven out, each checked by the CLI itself; a proof ending at another head than
/// the one trusted, or with a byte changed, fails with exit code 1.
fn check_disputes_by_cli(node_url: &str, txid: &Txid) {
    let dir = tempfile::tempdir().unwrap();
    let proof_file = dir.path().join("proof.bin");
    let audit = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_specie"))
            .arg("audit")
            .args(args)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let head: serde_json::Value = ureq::get(&format!("{node_url}/v1/ledger"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let head_hash = head["head"]["hash"].as_str().unwrap().to_string();
    let txid_hex = hex::encode(txid.0);
    let file = proof_file.to_str().unwrap();
    let prove = [
        "prove", "--node", node_url, "--txid", &txid_hex, "--out", file, "--head", &head_hash,
    ];
    let (code, text) = audit(&prove);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("IS in the ledger") && text.contains("the head is the one you trust"),
        "{text}"
    );
    let stranger = "ab".repeat(32);
    let (code, text) = audit(&["prove", "--node", node_url, "--txid", &stranger]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("is NOT in any block"), "{text}");
    let (code, text) = audit(&["check-proof", file, "--head", &"00".repeat(32)]);
    assert_eq!(code, Some(1), "another head: {text}");
    let mut bytes = std::fs::read(&proof_file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&proof_file, &bytes).unwrap();
    let (code, text) = audit(&["check-proof", file]);
    assert_ne!(code, Some(0), "a changed proof: {text}");
}

fn spent_created(tx: &SpecieTransaction) -> (Vec<UhsId>, Vec<UhsId>) {
    let compact = tx.compact();
    (compact.spent, compact.created)
}

#[test]
fn kill_9_under_load_loses_nothing_and_restart_restores_the_exact_uhs() {
    kill_9_under_load("2pc");
}

/// The same in the atomizer shape: the blocks made durable before the kill survive it, and the
/// shards catch up to the last of them before the node serves again.
#[test]
fn kill_9_of_the_atomizer_shape_loses_nothing_either() {
    kill_9_under_load("atomizer");
}

fn kill_9_under_load(shape: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let issuer = Keypair::new_global(&mut rand::thread_rng());
    let owner = Keypair::new_global(&mut rand::thread_rng());
    let commitment = witness_program_commitment(&xonly_bytes(&owner));
    let issuer_hex = hex::encode(xonly_bytes(&issuer));
    let mut node = start(dir.path(), &issuer_hex, shape);

    let outputs = vec![
        Output {
            witness_program_commitment: commitment,
            value: 1000
        };
        CLIENTS * COINS_PER_CLIENT
    ];
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        rand::random(),
        outputs,
        &issuer,
        NonceMode::Randomized,
    ));
    assert_eq!(
        submit(&node.url, std::slice::from_ref(&mint)).unwrap(),
        vec!["confirmed"]
    );
    let coins = mint.created_outputs();

    let ledger = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = coins
        .chunks(COINS_PER_CLIENT)
        .map(|chunk| {
            let (mut coins, ledger, stop, url) = (chunk.to_vec(), ledger.clone(), stop.clone(), node.url.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let txs: Vec<SpecieTransaction> = (0..BATCH)
                        .map(|_| {
                            let inputs: Vec<CreatedOutput> = coins.drain(..2).collect();
                            let total: u64 = inputs.iter().map(|c| c.output.value).sum();
                            let first = total / 2;
                            let outputs = vec![
                                Output {
                                    witness_program_commitment: commitment,
                                    value: first,
                                },
                                Output {
                                    witness_program_commitment: commitment,
                                    value: total - first,
                                },
                            ];
                            let mut tx = Transaction {
                                inputs: inputs.iter().map(CreatedOutput::to_input).collect(),
                                outputs,
                                witnesses: vec![],
                            };
                            tx.sign(&[owner, owner], NonceMode::Randomized).unwrap();
                            SpecieTransaction::Transfer(tx)
                        })
                        .collect();
                    match submit(&url, &txs) {
                        Ok(statuses) => {
                            let mut ledger = ledger.lock().unwrap();
                            for (tx, status) in txs.iter().zip(statuses) {
                                assert_eq!(status, "confirmed", "an honest transfer was refused");
                                ledger.confirmed.push(spent_created(tx));
                                ledger.confirmed_txids.push(tx.txid());
                                coins.extend(tx.created_outputs());
                            }
                        }
                        Err(_) => {
                            ledger.lock().unwrap().unknown.extend(txs.iter().map(spent_created));
                            return;
                        }
                    }
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_millis(1500));
    // Under load the node's metrics time its orderer's stages: two-phase commit's phases, or
    // the atomizer's rounds and blocks.
    let metrics = ureq::get(&format!("{}/metrics", node.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let stages = match shape {
        "2pc" => [
            "specie_coordinator_phase_duration_seconds_count{phase=\"commit\"}",
            "specie_coordinator_dtxn_size_count",
        ],
        _ => [
            "specie_atomizer_phase_duration_seconds_count{phase=\"confirm\"}",
            "specie_atomizer_block_size_count",
        ],
    };
    for stage in stages {
        let count: f64 = (metrics.lines())
            .find_map(|line| line.strip_prefix(stage)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {stage}: {metrics}"));
        assert!(count > 0.0, "{stage} {count}");
    }
    node.child.kill().expect("SIGKILL the node");
    node.child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().expect("client");
    }

    let node = start(dir.path(), &issuer_hex, shape);
    let ledger = ledger.lock().unwrap();
    assert!(
        ledger.confirmed.len() > 100,
        "too little load before the kill: {}",
        ledger.confirmed.len()
    );

    // Model of the UHS: the mint's outputs and marker, plus every applied transaction.
    let mut model: BTreeSet<UhsId> = coins.iter().map(|c| c.uhs_id).collect();
    model.insert(mint_marker(&mint.txid()));
    let mut apply = |(spent, created): &(Vec<UhsId>, Vec<UhsId>)| {
        for id in spent {
            assert!(model.remove(id), "an id was spent twice");
        }
        model.extend(created.iter().copied());
    };
    for tx in &ledger.confirmed {
        apply(tx);
    }
    // A transaction in flight at the kill is all or nothing: outputs present iff inputs gone.
    let mut applied_unknown = 0;
    for tx in &ledger.unknown {
        let inputs = query(&node.url, &tx.0);
        let outputs = query(&node.url, &tx.1);
        let applied = outputs.iter().all(|p| *p) && inputs.iter().all(|p| !*p);
        let not_applied = outputs.iter().all(|p| !*p) && inputs.iter().all(|p| *p);
        assert!(
            applied || not_applied,
            "a transaction was half applied: inputs {inputs:?}, outputs {outputs:?}"
        );
        if applied {
            applied_unknown += 1;
            apply(tx);
        }
    }
    let mut hasher = specie_transaction::hash::Sha256Writer::new();
    for id in &model {
        hasher.update(&id.0);
    }
    let expected = (model.len() as u64, hex::encode(hasher.finish()));
    let recovered = digest(&node.url);
    assert_eq!(
        recovered,
        expected,
        "restart must restore exactly the confirmed UHS ({} confirmed, {applied_unknown} in flight applied)",
        ledger.confirmed.len()
    );
    assert_eq!(
        ledger_digest(&node.url),
        expected,
        "the ledger of record, reconciled after the kill, replays to the UHS"
    );

    // And a second kill and restart of the idle node changes nothing.
    let mut node = node;
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let mut again = start(dir.path(), &issuer_hex, shape);
    assert_eq!(digest(&again.url), expected);
    assert_eq!(
        ledger_digest(&again.url),
        expected,
        "the ledger of record replays to the same UHS"
    );
    for txid in ledger
        .confirmed_txids
        .iter()
        .step_by(ledger.confirmed_txids.len() / 50 + 1)
    {
        check_in_ledger(&again.url, txid);
    }
    check_in_ledger(&again.url, &mint.txid());
    check_disputes_by_cli(&again.url, &ledger.confirmed_txids[0]);
    // The node's metrics carry its roles' families: the height the ledger's blocks replayed
    // to, supply tallies that agree, and its orderer's (the coordinators' limits, summed; the
    // atomizer's height).
    let head: serde_json::Value = ureq::get(&format!("{}/v1/ledger", again.url))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let height = head["height"].as_u64().unwrap_or_else(|| panic!("{head}"));
    assert!(height > 0, "{head}");
    let metrics = ureq::get(&format!("{}/metrics", again.url))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let gauge = |name: &str| -> f64 {
        (metrics.lines())
            .find_map(|line| line.strip_prefix(&format!("{name} "))?.parse().ok())
            .unwrap_or_else(|| panic!("no {name}: {metrics}"))
    };
    assert_eq!(gauge("specie_ledger_height"), height as f64);
    assert_eq!(gauge("specie_ledger_supply_balanced"), 1.0);
    assert!(gauge("specie_ledger_supply_issued_value") > 0.0);
    if shape == "2pc" {
        assert!(gauge("specie_coordinator_queue_transactions_max") > 0.0);
        assert!(gauge("specie_coordinator_dtxns_in_flight_max") > 0.0);
        assert_eq!(gauge("specie_coordinator_dtxns_in_flight"), 0.0, "idle");
    } else {
        assert!(gauge("specie_atomizer_height") > 0.0);
    }
    again.child.kill().unwrap();
    again.child.wait().unwrap();
}

/// Runs `specie ARGS`, which must end within 30 s (killed, and the test failed, if not): its
/// exit status and its stderr.
fn run_to_exit(args: &[&str]) -> (std::process::ExitStatus, String) {
    cluster_harness::run_to_exit(args, Duration::from_secs(30))
}

/// One process per data directory: a second node on the same directory (another port) is
/// refused at once with a sentence naming the first, which still answers; and a busy port fails
/// before a new data directory is made.
#[test]
fn a_second_node_on_one_data_directory_is_refused_and_a_busy_port_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let issuer = Keypair::new_global(&mut rand::thread_rng());
    let mut node = start(&data, &hex::encode(xonly_bytes(&issuer)), "2pc");
    let started = Instant::now();
    let (status, stderr) = run_to_exit(&["node", "--listen", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()]);
    assert!(!status.success(), "{stderr}");
    let holder = format!("{} is in use by process {} (", data.display(), node.child.id());
    assert!(stderr.contains(&holder), "{stderr}");
    assert!(stderr.contains("stop that process first"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "refused only after {:?}",
        started.elapsed()
    );
    let info = ureq::get(&format!("{}/v1/info", node.url))
        .call()
        .expect("the first node answers");
    assert_eq!(info.status(), 200);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let busy = taken.local_addr().unwrap().to_string();
    let fresh = dir.path().join("fresh");
    let (status, stderr) = run_to_exit(&["node", "--listen", &busy, "--data-dir", fresh.to_str().unwrap()]);
    assert!(!status.success() && stderr.contains("cannot listen on"), "{stderr}");
    assert!(!fresh.exists(), "a busy port left {} behind", fresh.display());
    drop(taken);
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}

/// The keys a node banks for are kept in node.toml: a restart without the flag keeps the key
/// (shown at start and at `/v1/info`), a restart with another key is refused until it says
/// `--reconfigure`, and `--forget` drops one.
#[test]
fn kept_keys_survive_a_restart_without_their_flags_and_change_only_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let bridge = |seed: u8| {
        hex::encode(
            ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
                .verifying_key()
                .to_bytes(),
        )
    };
    let (first, second) = (bridge(7), bridge(8));
    let info_after = |extra: &[&str]| {
        let mut args = vec!["node", "--listen", "127.0.0.1:0", "--data-dir", data];
        args.extend_from_slice(extra);
        let (mut child, url) = cluster_harness::start_serving(&args);
        let info: serde_json::Value = ureq::get(&format!("{url}/v1/info"))
            .call()
            .unwrap()
            .into_json()
            .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        info
    };
    let info = info_after(&["--exchange", &first]);
    let network = info["network_id"].as_str().expect("a network id").to_string();
    assert_eq!(info["exchange"], first.as_str());
    let info = info_after(&[]);
    assert_eq!(info["exchange"], first.as_str(), "kept without the flag: {info}");
    assert_eq!(
        info["network_id"],
        network.as_str(),
        "a directory's network never changes"
    );
    let (status, stderr) = run_to_exit(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data,
        "--exchange",
        &second,
    ]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&first) && stderr.contains(&second) && stderr.contains("--reconfigure"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Error {") && !stderr.contains("Some("),
        "a sentence, not a dump: {stderr}"
    );
    assert_eq!(
        info_after(&["--exchange", &second, "--reconfigure"])["exchange"],
        second.as_str()
    );
    assert!(info_after(&["--forget", "exchange"])["exchange"].is_null());
}
