//! Every HTTP API described and fuzzed: each service serves its OpenAPI document at
//! `/openapi.json`, built from the code, and Schemathesis (from PyPI: `pip install
//! schemathesis`; `.ci/run` installs it) reads it and sends each operation generated requests,
//! valid and not, for a bounded time: no answer may be a server error, every status, content
//! type and body must be the documented ones, and every process must still run afterwards.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster_harness::{free_ports, specie, Children, BIN};

/// Each service's fuzzing time, coverage phase and random phase together.
const FUZZ_SECONDS: &str = "8";
/// What Schemathesis checks: no 5xx, and status, content type and body as documented.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance";

fn schemathesis() -> String {
    let found = Command::new("st").arg("--version").output();
    assert!(
        found.is_ok_and(|output| output.status.success()),
        "Schemathesis is not installed: `pip install schemathesis` (`.ci/run` does it)"
    );
    "st".to_string()
}

fn start(args: &[&str], log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start specie")
}

/// Waits until `url/livez` answers 200.
fn wait_live(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while ureq::get(&format!("{url}/livez")).call().is_err() {
        assert!(Instant::now() < deadline, "{url} did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs Schemathesis against `url`'s document; returns its report if it found a failure.
fn fuzz(st: &str, url: &str, headers: &[String], scratch: &std::path::Path) -> Option<String> {
    let mut command = Command::new(st);
    // Its cache of crashes (`.schemathesis/`) goes to the test's scratch folder, not the tree.
    command.current_dir(scratch);
    command.args([
        "run",
        &format!("{url}/openapi.json"),
        "--checks",
        CHECKS,
        "--max-time",
        FUZZ_SECONDS,
        "--workers",
        "1",
        "--seed",
        "1",
        "--no-color",
    ]);
    for header in headers {
        command.args(["--header", header]);
    }
    let output = command.output().expect("run schemathesis");
    let report = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    (!output.status.success()).then_some(report)
}

#[test]
fn every_service_answers_a_schema_driven_fuzzer_as_its_document_says() {
    let st = schemathesis();
    let temp = tempfile::tempdir().unwrap();
    let dir = |name: &str| temp.path().join(name).to_str().unwrap().to_string();
    let base = free_ports(6);
    let url = |n: u16| format!("http://127.0.0.1:{}", base + n);
    let listen = |n: u16| format!("127.0.0.1:{}", base + n);
    let key = dir("auditor.key");
    specie(&["audit", "keygen", "--out", &key]);
    let mut services = Children(Vec::new());
    let mut run = |args: Vec<String>, log: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        services.0.push(start(&args, &temp.path().join(log)));
    };
    let s = |text: &str| text.to_string();
    run(
        vec![
            s("node"),
            s("--data-dir"),
            dir("usd"),
            s("--hrp"),
            s("usd"),
            s("--listen"),
            listen(0),
        ],
        "usd.log",
    );
    run(
        vec![
            s("node"),
            s("--data-dir"),
            dir("eur"),
            s("--hrp"),
            s("eur"),
            s("--listen"),
            listen(1),
        ],
        "eur.log",
    );
    wait_live(&url(0));
    wait_live(&url(1));
    run(
        vec![
            s("exchange"),
            s("serve"),
            s("--data-dir"),
            dir("exchange"),
            s("--listen"),
            listen(2),
            s("--asset"),
            format!("usd={}", url(0)),
            s("--asset"),
            format!("eur={}", url(1)),
        ],
        "exchange.log",
    );
    run(
        vec![
            s("offline"),
            s("authority"),
            s("--data-dir"),
            dir("offline"),
            s("--listen"),
            listen(3),
            s("--core"),
            url(0),
        ],
        "offline.log",
    );
    run(
        vec![
            s("byzantine"),
            s("committee"),
            s("--data-dir"),
            dir("committee"),
            s("--listen"),
            listen(4),
            s("--core"),
            url(0),
            s("--authorities"),
            s("4"),
            s("--shards"),
            s("1"),
        ],
        "committee.log",
    );
    run(
        vec![
            s("audit"),
            s("serve"),
            s("--key"),
            key.clone(),
            s("--listen"),
            listen(5),
        ],
        "auditor.log",
    );
    for n in 2..6 {
        wait_live(&url(n));
    }
    let token = std::fs::read_to_string(temp.path().join("offline/operator.token")).unwrap();
    let operator = vec![format!("Authorization: Bearer {}", token.trim())];

    let mut failures = Vec::new();
    for (name, n, headers) in [
        ("the node", 0, &vec![]),
        ("the exchange", 2, &vec![]),
        ("the offline authority (as its operator)", 3, &operator),
        ("the FastPay committee", 4, &vec![]),
        ("the active auditor", 5, &vec![]),
    ] {
        if let Some(report) = fuzz(&st, &url(n), headers, temp.path()) {
            failures.push(format!("{name} at {}:\n{report}", url(n)));
        }
    }
    for n in 0..6 {
        let live = ureq::get(&format!("{}/livez", url(n))).call();
        if live.is_err() {
            let logs: Vec<String> = ["usd", "eur", "exchange", "offline", "committee", "auditor"]
                .iter()
                .map(|log| std::fs::read_to_string(temp.path().join(format!("{log}.log"))).unwrap_or_default())
                .collect();
            failures.push(format!(
                "{} stopped answering after the fuzzing: {live:?}\n{logs:?}",
                url(n)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
