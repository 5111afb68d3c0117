//! The registration authority's operator tool (`specie ra`) with real processes, one per command,
//! so that everything the RA remembers between two commands went through its state file: init,
//! key, a challenge answered by a wallet's request made here with the library, a credential that
//! verifies, the refusals (a second key for an enrolled id, a key for two ids, garbage, a damaged
//! state, a second init), the list an auditor uses as its directory; then a node started with the
//! RA's key and an owner auditor's key (from `specie audit keygen`) lists both in `/v1/info`, takes
//! an anonymous transaction to enrolments 7 and 9, and `specie audit show --directory` with the
//! RA's list of jurisdiction 1 names the owner `id:7` (and 9, not in it, `unknown`).

use crate::cluster_harness;

use std::path::Path;
use std::process::{Child, Command};

use cluster_harness::{confirm_in_core, start_serving, BIN};
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::Decode;
use specie_credential::{
    AuditorKey, Credential, EnrolmentChallenge, EnrolmentId, Identity, Jurisdiction, OwnerOpening, RaPublicKey,
    Textual, UserSecret,
};
use specie_private_transactions::AnonymousPlan;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{witness_program_commitment, MintTransaction, NonceMode, Output, SpecieTransaction};

/// A finished `specie` process: its exit code, stdout and stderr.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn specie(args: &[&str]) -> Run {
    let output = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the specie binary runs");
    let run = Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "specie {args:?}: {}", run.stderr);
    run
}

/// `specie ra --dir DIR ARGS`, which must succeed: its stdout, trimmed.
fn ra(dir: &Path, args: &[&str]) -> String {
    let run = ra_run(dir, args);
    assert_eq!(run.code, 0, "specie ra {args:?}: {}", run.stderr);
    run.stdout.trim().to_string()
}

fn ra_run(dir: &Path, args: &[&str]) -> Run {
    let mut all = vec!["ra", "--dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    specie(&all)
}

/// `specie ra ARGS` must be refused: exit 1, with `why` in its error.
fn ra_refused(dir: &Path, args: &[&str], why: &str) {
    let run = ra_run(dir, args);
    assert_eq!(
        run.code, 1,
        "specie ra {args:?} must be refused: {}{}",
        run.stdout, run.stderr
    );
    assert!(
        run.stdout.is_empty(),
        "a refusal prints nothing on stdout: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains(why),
        "specie ra {args:?}: expected '{why}' in: {}",
        run.stderr
    );
}

/// A wallet's answer to the RA's challenge text.
fn request(secret: &UserSecret, ra_key: &RaPublicKey, challenge: &str, rng: &mut StdRng) -> String {
    let challenge = EnrolmentChallenge::from_text(challenge).expect("a challenge text");
    secret.enrolment_request(ra_key, &challenge, rng).to_text()
}

/// Kills the node when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_ra_enrols_durably_refuses_what_it_must_and_a_node_takes_its_key() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("ra");
    let mut rng = StdRng::seed_from_u64(7);

    let key_hex = ra(&dir, &["init"]);
    assert_eq!(ra(&dir, &["key"]), key_hex, "`ra key` prints init's key");
    let ra_key = RaPublicKey::decode_exact(&hex::decode(&key_hex).unwrap()).expect("an RA public key");
    ra_refused(&dir, &["init"], "already holds a registration authority");
    assert_eq!(ra(&dir, &["key"]), key_hex, "a refused init changed nothing");

    // Enrolment 7: the challenge, the wallet's request, the credential.
    let challenge = ra(&dir, &["challenge", "--id", "7"]);
    let parsed = EnrolmentChallenge::from_text(&challenge).unwrap();
    assert_eq!(
        (parsed.enrolment_id, parsed.jurisdiction),
        (EnrolmentId(7), Jurisdiction(1))
    );
    let alice = UserSecret::from_seed(&[1; 32]);
    let alice_request = request(&alice, &ra_key, &challenge, &mut rng);
    let credential = Credential::from_text(&ra(&dir, &["enrol", &alice_request])).expect("a credential text");
    assert_eq!(credential.enrolment_id, EnrolmentId(7));
    let bob = UserSecret::from_seed(&[2; 32]);
    assert!(
        Identity::new(bob.clone(), credential.clone(), &ra_key).is_err(),
        "the credential is alice's alone"
    );
    Identity::new(alice.clone(), credential, &ra_key).expect("the credential verifies under the RA's key");

    // Refusals, each by a new process that knows the enrolment only from the state file.
    ra_refused(
        &dir,
        &["enrol", &alice_request],
        "no outstanding challenge for enrolment 7",
    );
    ra_refused(&dir, &["enrol", "specie-enrol-request1zz"], "not an enrolment request");
    ra_refused(&dir, &["enrol", &challenge], "not an enrolment request");
    let second = ra(&dir, &["challenge", "--id", "7"]);
    ra_refused(
        &dir,
        &["enrol", &request(&bob, &ra_key, &second, &mut rng)],
        "enrolment 7 is already enrolled with another key",
    );
    ra_refused(
        &dir,
        &["challenge", "--id", "7", "--jurisdiction", "2"],
        "jurisdiction 1",
    );
    // The enrolled key answers the new challenge: a wallet that lost its credential gets another.
    let again = Credential::from_text(&ra(&dir, &["enrol", &request(&alice, &ra_key, &second, &mut rng)])).unwrap();
    Identity::new(alice.clone(), again, &ra_key).unwrap();
    // One key, one id.
    let eight = ra(&dir, &["challenge", "--id", "8"]);
    ra_refused(
        &dir,
        &["enrol", &request(&alice, &ra_key, &eight, &mut rng)],
        "already enrolled for enrolment 7",
    );
    // A request made for another RA's key fails its proof of possession.
    let other_ra = specie_credential::RegistrationAuthority::from_seed(&[9; 32]).public_key();
    ra_refused(
        &dir,
        &["enrol", &request(&bob, &other_ra, &eight, &mut rng)],
        "proof of possession",
    );
    ra(&dir, &["enrol", &request(&bob, &ra_key, &eight, &mut rng)]);
    let nine = ra(&dir, &["challenge", "--id", "9", "--jurisdiction", "2"]);
    let carol = UserSecret::from_seed(&[3; 32]);
    ra(&dir, &["enrol", &request(&carol, &ra_key, &nine, &mut rng)]);
    ra(&dir, &["challenge", "--id", "10"]);

    assert_eq!(ra(&dir, &["list"]), "7\n8\n9");
    assert_eq!(ra(&dir, &["list", "--jurisdiction", "1"]), "7\n8");
    let listed: serde_json::Value =
        serde_json::from_str(&ra(&dir, &["list", "--json", "--jurisdiction", "2"])).unwrap();
    assert_eq!(
        listed,
        serde_json::json!({"enrolled": [{"id": 9, "jurisdiction": 2}], "pending": []})
    );
    let listed: serde_json::Value = serde_json::from_str(&ra(&dir, &["list", "--json"])).unwrap();
    assert_eq!(listed["pending"], serde_json::json!([{"id": 10, "jurisdiction": 1}]));

    node_takes_the_keys(temp.path(), &ra_key, &ra(&dir, &["list", "--jurisdiction", "1"]));
    damaged_states_are_refused(&dir, &temp.path().join("copy"));
}

/// A damaged state file is refused with a clear error, never a panic, and never overwritten.
fn damaged_states_are_refused(dir: &Path, copy: &Path) {
    std::fs::create_dir(copy).unwrap();
    for name in ["secret", "state.json"] {
        std::fs::copy(dir.join(name), copy.join(name)).unwrap();
    }
    assert_eq!(ra(copy, &["list"]), "7\n8\n9", "a copied directory is the same RA");
    let state = std::fs::read_to_string(dir.join("state.json")).unwrap();
    let damaged = [
        state[..state.len() / 2].to_string(),
        state.replacen("\"id\": 8", "\"id\": 7", 1),
        state.replacen("specie-enrol-request1", "specie-enrol-request1f", 1),
    ];
    for text in damaged {
        std::fs::write(copy.join("state.json"), &text).unwrap();
        ra_refused(copy, &["challenge", "--id", "11"], "is damaged");
        assert_eq!(std::fs::read_to_string(copy.join("state.json")).unwrap(), text);
    }
    // Another RA's state with this seed.
    let other = temp_ra();
    std::fs::copy(other.path().join("ra/state.json"), copy.join("state.json")).unwrap();
    ra_refused(copy, &["list"], "the state of another RA");
    std::fs::remove_file(copy.join("state.json")).unwrap();
    ra_refused(copy, &["list"], "is missing");
}

fn temp_ra() -> tempfile::TempDir {
    let temp = tempfile::tempdir().unwrap();
    ra(&temp.path().join("ra"), &["init"]);
    temp
}

/// `specie node --registration-authority --owner-auditor` lists both keys in `/v1/info`; bad
/// keys are refused before it starts; `specie audit show --directory` reads the RA's list.
fn node_takes_the_keys(dir: &Path, ra_public: &RaPublicKey, directory: &str) {
    let ra_key = &hex::encode(specie_codec::Encode::encode(ra_public));
    let auditor_key = dir.join("auditor.key");
    let keygen = specie(&["audit", "keygen", "--out", auditor_key.to_str().unwrap()]);
    assert_eq!(keygen.code, 0, "{}", keygen.stderr);
    let key = specie(&["audit", "key", "--key", auditor_key.to_str().unwrap()]);
    assert_eq!(key.stdout, keygen.stdout, "`audit key` prints what keygen printed");
    let lines: Vec<&str> = keygen.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", keygen.stdout);
    assert_eq!(
        lines[0].len(),
        64,
        "the first line is the value key, as before: {}",
        lines[0]
    );
    let owner = lines[1]
        .strip_prefix("owner auditor key: ")
        .expect("a labelled owner key");
    let owner_key = AuditorKey::decode_exact(&hex::decode(owner).unwrap()).expect("an owner auditor key");

    let data = dir.join("node");
    let data = data.to_str().unwrap();
    let node_args = |extra: &[&'static str]| -> Vec<String> {
        let mut args = vec!["node", "--listen", "127.0.0.1:0", "--data-dir", data];
        args.extend_from_slice(extra);
        args.into_iter().map(String::from).collect()
    };
    let refused = |args: Vec<String>, why: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = specie(&args);
        assert_eq!(run.code, 2, "{args:?} must be refused: {}", run.stderr);
        assert!(run.stderr.contains(why), "expected '{why}' in: {}", run.stderr);
    };
    let mut bad = node_args(&["--registration-authority"]);
    bad.push(owner.to_string());
    refused(bad, "not a registration authority's public key");
    let mut bad = node_args(&["--registration-authority", "zz"]);
    bad.extend(["--owner-auditor".to_string(), owner.to_string()]);
    refused(bad, "not hex");
    let mut bad = node_args(&["--owner-auditor"]);
    bad.push(ra_key.to_string());
    refused(bad, "not an owner auditor's key");

    let (issuer, payer) = (
        keypair_from_secret(&[8; 32]).unwrap(),
        keypair_from_secret(&[1; 32]).unwrap(),
    );
    let (node, url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data,
        "--issuer",
        &hex::encode(xonly_bytes(&issuer)),
        "--registration-authority",
        ra_key,
        "--owner-auditor",
        owner,
    ]);
    let _node = Killed(node);
    let info: serde_json::Value = ureq::get(&format!("{url}/v1/info"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(info["registration_authority"], ra_key.as_str(), "{info}");
    assert_eq!(info["owner_auditors"], serde_json::json!([owner]), "{info}");

    // A mint, then its coin paid anonymously to enrolments 7 and 9, values in clear.
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [5; 32],
        vec![Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(&payer)),
            value: 100,
        }],
        &issuer,
        NonceMode::Deterministic,
    ));
    let mut rng = StdRng::seed_from_u64(11);
    let (anonymous, _) = AnonymousPlan {
        transparent_inputs: vec![mint.created_outputs()[0].to_input()],
        anonymous_inputs: vec![],
        outputs: vec![
            (OwnerOpening::random(EnrolmentId(7), &mut rng), 60),
            (OwnerOpening::random(EnrolmentId(9), &mut rng), 40),
        ],
        transparent_outputs: vec![],
        hide_values: false,
        value_auditors: vec![],
        owner_auditors: vec![owner_key],
    }
    .prove_and_sign(&[payer], None, ra_public, NonceMode::Deterministic, &mut rng)
    .unwrap();
    confirm_in_core(&url, &[mint]);
    confirm_in_core(&url, &[SpecieTransaction::from(anonymous)]);

    let ids = dir.join("ids");
    std::fs::write(&ids, format!("{directory}\n")).unwrap();
    let show = |directory: Option<&Path>| {
        let mut args = vec![
            "audit",
            "show",
            "--node",
            &url,
            "--key",
            auditor_key.to_str().unwrap(),
            "--json",
        ];
        if let Some(directory) = directory {
            args.extend(["--directory", directory.to_str().unwrap()]);
        }
        specie(&args)
    };
    // The anonymous transaction's owners, once the archiver sealed its block (every 100 ms).
    let owners = |directory: Option<&Path>| -> Vec<String> {
        for _ in 0..100 {
            let shown = show(directory);
            assert_eq!(shown.code, 0, "{}", shown.stderr);
            let anonymous = shown.stdout.lines().find_map(|line| {
                let line: serde_json::Value = serde_json::from_str(line).unwrap();
                (line["anonymous"] == true).then_some(line)
            });
            if let Some(line) = anonymous {
                let outputs = line["outputs"].as_array().unwrap();
                return outputs
                    .iter()
                    .map(|o| o["owner"].as_str().unwrap().to_string())
                    .collect();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the anonymous transaction never reached the ledger of record");
    };
    assert_eq!(owners(Some(&ids)), ["id:7", "unknown"], "9 is of another jurisdiction");
    assert_eq!(owners(None), ["unknown", "unknown"], "no directory, no names");
    std::fs::write(&ids, "7\nid-8\n").unwrap();
    let shown = show(Some(&ids));
    assert_eq!(shown.code, 1);
    assert!(shown.stderr.contains("line 2"), "{}", shown.stderr);
}
