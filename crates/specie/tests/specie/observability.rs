//! A cluster with every mode on, as its operators see it: a real Prometheus (Debian's package,
//! installed here if missing) scrapes every process from the targets file `cluster up` writes,
//! sees the families move under load, sees a leader killed in `specie_raft_leader_changes_total`,
//! and `/readyz` follows a group that loses its majority and gets it back.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster_harness::{
    assert_audit, finish_demo, free_ports, kill_9, specie, start_demo, status, wire_client, Down,
};

/// `prometheus` (and `promtool`, in the same package).
fn prometheus_installed() -> PathBuf {
    crate::cluster_harness::debian_program("prometheus", "prometheus")
}

/// A Prometheus scraping the targets in `targets` every 500 ms, its data under `dir`.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(binary: &Path, dir: &Path, targets: &Path, port: u16) -> Prometheus {
        let config = dir.join("prometheus.yml");
        let text = format!(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\nscrape_configs:\n  - job_name: specie\n    \
             file_sd_configs:\n      - files: ['{}']\n        refresh_interval: 1s\n",
            targets.display()
        );
        std::fs::write(&config, text).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        let prometheus = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        wait_for("Prometheus to be ready", Duration::from_secs(30), || {
            ureq::get(&format!("{}/-/ready", prometheus.url))
                .call()
                .is_ok()
                .then_some(())
        });
        prometheus
    }

    /// The instant vector `query` evaluates to now: each series' labels and value.
    fn query(&self, query: &str) -> Vec<(Value, f64)> {
        let answer: Value = ureq::get(&format!("{}/api/v1/query", self.url))
            .query("query", query)
            .call()
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .into_json()
            .unwrap();
        assert_eq!(answer["status"], "success", "{query}: {answer}");
        (answer["data"]["result"].as_array().unwrap().iter())
            .map(|series| {
                let value = series["value"][1].as_str().unwrap().parse().unwrap();
                (series["metric"].clone(), value)
            })
            .collect()
    }

    /// `query`'s one value (a sum, a count), or 0 when it has no series yet.
    fn value(&self, query: &str) -> f64 {
        self.query(query).first().map_or(0.0, |(_, value)| *value)
    }
}

/// Polls `probe` every 200 ms until it gives a value; fails naming `what` after `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `/readyz` of `address`: its status code and body.
/// Follows one transaction through the JSON logs of a cluster's processes, by the lines of
/// `specie_transaction::TRANSACTION_LOG`: the sentinel answered it, the coordinator settled it in
/// a dtxn at an index, and the shard answered that coordinator's dtxn. Every line of every log
/// is one JSON object.
fn follow_in_the_logs(dir: &Path, txid: &str) {
    let events = |process: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(dir.join("logs").join(format!("{process}.log"))).unwrap();
        (text.lines())
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{process}: not JSON ({e}): {line}")))
            .filter(|event: &Value| event["target"] == specie_transaction::TRANSACTION_LOG)
            .collect()
    };
    let line_of_the_tx = |process: &str| -> Value {
        (events(process).into_iter())
            .find(|event| event["fields"]["txid"] == txid)
            .unwrap_or_else(|| panic!("no line of {process} for the txid"))
    };
    let answered = line_of_the_tx("sentinel-0");
    assert_eq!(answered["fields"]["status"], "confirmed", "{answered}");
    let settled = line_of_the_tx("coordinator-0-1");
    assert_eq!(settled["fields"]["outcome"], "Confirmed", "{settled}");
    let dtxn = settled["fields"]["dtxn"].as_u64().expect("the dtxn");
    let shard = events("shard-0-1");
    let prepared = (shard.iter()).find(|event| {
        let response = event["fields"]["response"].as_str().unwrap_or("");
        response.starts_with(&format!("Prepared {{ dtxn: {dtxn},"))
    });
    assert!(prepared.is_some(), "no shard line for dtxn {dtxn}: {shard:?}");
}

fn readyz(address: &str) -> (u16, Value) {
    let answer = match ureq::get(&format!("http://{address}/readyz"))
        .timeout(Duration::from_secs(2))
        .call()
    {
        Ok(answer) => answer,
        Err(ureq::Error::Status(_, answer)) => answer,
        Err(error) => return (0, Value::String(error.to_string())),
    };
    (answer.status(), answer.into_json().unwrap_or(Value::Null))
}

/// What the families sum to across the cluster, by the names an operator's queries use: each
/// must grow under load.
const MOVING_UNDER_LOAD: &[&str] = &[
    "sum(specie_transactions_submitted_total)",
    "sum(specie_transactions_finished_total{outcome=\"confirmed\"})",
    "sum(specie_transactions_validation_duration_seconds_count)",
    "sum(specie_transactions_validation_batch_size_sum)",
    "sum(specie_transactions_submit_duration_seconds_count)",
    "sum(specie_log_fsync_duration_seconds_count)",
    "sum(specie_coordinator_dtxn_size_sum)",
    "sum(specie_coordinator_phase_duration_seconds_count{phase=\"commit\"})",
    "sum(specie_http_requests_total{role=\"sentinel\"})",
    "sum(specie_http_request_duration_seconds_count{role=\"sentinel\"})",
    "sum(specie_http_requests_total{role=\"authority\"})",
    "sum(specie_http_requests_total{role=\"offline\"})",
    "sum(specie_http_requests_total{role=\"exchange\"})",
    "max(specie_raft_commit_index{group=\"shard-0\"})",
    "max(specie_raft_applied_index{group=\"archiver\"})",
    "sum(specie_raft_log_appends_total)",
    "sum(specie_raft_log_syncs_total)",
    "sum(specie_fastpay_call_duration_seconds_count{call=\"order\"})",
    "sum(specie_fastpay_refusals_total{refusal=\"UnknownAccount\"})",
];

#[test]
fn prometheus_scrapes_every_process_of_a_cluster_and_sees_a_leader_killed() {
    let binary = prometheus_installed();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    // Core 3 (shard, coordinator, sentinel), 4 authorities × 1 shard × 1 replica (wire + HTTP),
    // offline and exchange 1 replica each (wire + HTTP), 3 archivers, the metrics ports of the
    // core's and the archivers' 5 replicas; then Prometheus and the eur core the exchange names.
    let base = free_ports(3 + 8 + 2 + 2 + 3 + 5 + 2);
    let prometheus_port = base + 23;
    let eur = format!("eur=http://127.0.0.1:{}", base + 24);
    let wallet = |name: &str| temp.path().join(name).to_str().unwrap().to_string();
    let created = specie(&["wallet", "--wallet", &wallet("issuer.json"), "create", "--issuer"]);
    let issuer = String::from_utf8_lossy(&created.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("issuer public key: ").map(str::to_string))
        .expect("the issuer's key");
    // JSON logs, with the lines that follow a transaction through the core turned on.
    let up = Command::new(crate::cluster_harness::BIN)
        .env(
            "RUST_LOG",
            format!("warn,{}=debug", specie_transaction::TRANSACTION_LOG),
        )
        .env("SPECIE_LOG_FORMAT", "json")
        .args([
            "cluster",
            "up",
            "--dir",
            &dir,
            "--issuer",
            &issuer,
            "--base-port",
            &base.to_string(),
            "--shard-groups",
            "1",
            "--replicas",
            "1",
            "--sentinels",
            "1",
            "--authorities",
            "4",
            "--authority-shards",
            "1",
            "--offline",
            "1",
            "--exchange",
            "1",
            "--exchange-asset",
            &eur,
            "--ledger-of-record",
            "3",
        ])
        .output()
        .unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let targets_path = Path::new(&dir).join("prometheus-targets.json");
    let targets: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&targets_path).unwrap()).unwrap();
    let roles: std::collections::BTreeSet<&str> = (targets.iter())
        .map(|t| t["labels"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.into_iter().collect::<Vec<_>>(),
        [
            "archiver",
            "authority",
            "coordinator",
            "exchange",
            "offline",
            "sentinel",
            "shard"
        ]
    );
    assert_eq!(targets.len(), 12, "every process is a target: {targets:?}");

    let prometheus = Prometheus::start(&binary, temp.path(), &targets_path, prometheus_port);
    wait_for("every target up", Duration::from_secs(60), || {
        (prometheus.value("count(up{job=\"specie\"} == 1)") == targets.len() as f64).then_some(())
    });
    for target in &targets {
        let address = target["targets"][0].as_str().unwrap();
        let (code, body) = readyz(address);
        assert_eq!((code, &body["status"]), (200, &Value::from("ready")), "{target}");
        // Every port describes itself, a metrics-only port too.
        let doc: Value = ureq::get(&format!("http://{address}/openapi.json"))
            .call()
            .unwrap()
            .into_json()
            .unwrap();
        assert!(doc["paths"]["/readyz"].is_object(), "{target}: {doc}");
    }

    // Load: the demo's payments (it runs the sentinel's part itself, into the shards and
    // coordinators), a mint and a payment through the sentinel's API, and the other modes' APIs
    // asked what they hold.
    let before: Vec<f64> = MOVING_UNDER_LOAD.iter().map(|q| prometheus.value(q)).collect();
    let demo = start_demo(&dir, "300", "7");
    let sentinel = format!(
        "http://{}",
        targets.iter().find(|t| t["labels"]["role"] == "sentinel").unwrap()["targets"][0]
            .as_str()
            .unwrap()
    );
    let address = |name: &str| {
        let created = specie(&["wallet", "--wallet", &wallet(name), "--node", &sentinel, "create"]);
        let text = String::from_utf8_lossy(&created.stdout).to_string();
        text.lines()
            .find_map(|l| l.strip_prefix("address: ").map(str::to_string))
            .expect("an address")
    };
    let (alice, bob) = (address("alice.json"), address("bob.json"));
    let payment = |output: std::process::Output| {
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        text.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("specie-pay1")
                    .map(|rest| format!("specie-pay1{rest}"))
            })
            .expect("a payment string")
    };
    let minted = payment(specie(&[
        "wallet",
        "--wallet",
        &wallet("issuer.json"),
        "--node",
        &sentinel,
        "mint",
        "1000",
        "--to",
        &alice,
    ]));
    specie(&["wallet", "--wallet", &wallet("alice.json"), "import", &minted]);
    let sent = specie(&["wallet", "--wallet", &wallet("alice.json"), "send", &bob, "250"]);
    let txid = (String::from_utf8_lossy(&sent.stdout).lines())
        .find_map(|line| line.strip_prefix("confirmed: txid ").map(str::to_string))
        .expect("the payment's txid");
    follow_in_the_logs(Path::new(&dir), &txid);
    let paid = payment(sent);
    specie(&["wallet", "--wallet", &wallet("bob.json"), "import", &paid]);
    // An order from an account no one funded: each authority shard times the call and counts
    // its refusal.
    let stranger = specie_fastpay::deterministic_key("observability", 1);
    let order = specie_fastpay::TransferOrder {
        sender: specie_fastpay::AccountKey(stranger.verifying_key().to_bytes()),
        recipient: specie_fastpay::Recipient::Account(specie_fastpay::AccountKey([7; 32])),
        amount: 1,
        sequence: 0,
        memo: vec![],
    }
    .sign(&stranger);
    let mut bytes = vec![];
    order.encode_to(&mut bytes);
    for target in &targets {
        let role = target["labels"]["role"].as_str().unwrap();
        if role == "authority" {
            let address = target["targets"][0].as_str().unwrap();
            let refused =
                ureq::post(&format!("http://{address}{}", specie_committee::http_api::ORDERS_PATH)).send_bytes(&bytes);
            assert!(matches!(refused, Err(ureq::Error::Status(404, _))), "{refused:?}");
        }
        let info = match role {
            "authority" => "/v1/fastpay/info",
            "offline" => "/v1/offline/keys",
            "exchange" => "/v1/exchange",
            _ => continue,
        };
        let address = target["targets"][0].as_str().unwrap();
        let _ = ureq::get(&format!("http://{address}{info}")).call();
    }
    assert_audit(&finish_demo(demo));
    for (query, before) in MOVING_UNDER_LOAD.iter().zip(before) {
        wait_for(
            &format!("{query} to grow from {before}"),
            Duration::from_secs(30),
            || (prometheus.value(query) > before).then_some(()),
        );
    }
    let build = prometheus.query("specie_build_info");
    assert_eq!(build.len(), targets.len(), "{build:?}");

    // The supply: the ledger's tallies agree, in Prometheus and in `specie audit supply`, which
    // finds the offline authority's books empty (nothing was funded to it).
    wait_for("the ledger's supply in Prometheus", Duration::from_secs(30), || {
        let issued = prometheus.value("max(specie_ledger_supply_issued_value)");
        (issued > 0.0 && prometheus.value("min(specie_ledger_supply_balanced)") == 1.0).then_some(())
    });
    let offline = targets.iter().find(|t| t["labels"]["role"] == "offline").unwrap()["targets"][0]
        .as_str()
        .unwrap();
    let audited = specie(&[
        "audit",
        "supply",
        "--node",
        &sentinel,
        "--offline",
        &format!("http://{offline}"),
        "--json",
    ]);
    let report: Value = serde_json::from_slice(&audited.stdout).unwrap();
    assert_eq!(
        (&report["ok"], &report["supply"]["balanced"]),
        (&true.into(), &true.into()),
        "{report}"
    );
    assert_eq!(report["unfunded"][0]["holds"], 0, "{report}");

    // A request the authorisation table refuses: the operator's certificate asking a shard to
    // prepare a batch. Counted by the caller's role.
    let topology = specie_cluster::Topology::load(&Path::new(&dir).join("cluster.toml")).unwrap();
    let replica = &topology.shard_groups[0].replicas[0];
    let server = specie_cluster::Identity::shard(&topology.shard_groups[0].name, replica.id);
    let operator = wire_client(
        &topology,
        &specie_cluster::Identity::Operator,
        &replica.address.to_string(),
        &server,
    );
    let forbidden = specie_codec::Encode::encode(&specie_cluster::protocol::RoleRequest::ShardBatch(vec![]));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let refused = runtime.block_on(operator.call(forbidden, Duration::from_secs(5)));
    assert!(format!("{refused:?}").contains("not authorised"), "{refused:?}");
    wait_for("the refusal in Prometheus", Duration::from_secs(30), || {
        let query = "sum(specie_wire_authorization_refused_total{role=\"shard\",peer_role=\"operator\"})";
        (prometheus.value(query) >= 1.0).then_some(())
    });

    // Every family the code exposes is in Prometheus (a histogram by its `_count`).
    let stored: std::collections::BTreeSet<String> = (prometheus
        .query("group by (__name__) ({__name__=~\"specie_.+\"})"))
    .into_iter()
    .map(|(labels, _)| labels["__name__"].as_str().unwrap().to_string())
    .collect();
    // (The atomizer's families come from the atomizer shape, another cluster. Snapshots come
    // every `raft_snapshot_entries` (1,000) entries, more than this run makes: specie-raft's
    // snapshot test checks their timings. The exchange's traded value appears with its first
    // trade, and this cluster trades nothing: `exchange_process` checks it.)
    let here = (specie_metrics::FAMILIES_EXPOSED.iter()).filter(|(family, _)| {
        !family.starts_with("specie_atomizer_")
            && ![
                "specie_raft_snapshot_duration_seconds",
                "specie_exchange_traded_value_total",
            ]
            .contains(family)
    });
    for (family, kind) in here {
        let name = match *kind {
            "histogram" => format!("{family}_count"),
            _ => family.to_string(),
        };
        assert!(stored.contains(&name), "{name} is not in Prometheus: {stored:?}");
    }

    // A killed leader: its followers count the change, and the group elects another.
    let archivers = |role: &str| -> Vec<u64> {
        (status(&dir).into_iter())
            .filter(|row| row.group == "archiver" && row.role == role)
            .map(|row| row.replica)
            .collect()
    };
    let leader = wait_for("an archiver leader", Duration::from_secs(30), || {
        archivers("leader").first().copied()
    });
    let changes = "sum(specie_raft_leader_changes_total{group=\"archiver\"})";
    let changes_before = prometheus.value(changes);
    kill_9(&dir, &format!("archiver-{leader}"));
    let new_leader = wait_for("a new archiver leader", Duration::from_secs(30), || {
        archivers("leader").into_iter().find(|&id| id != leader)
    });
    wait_for("the leader change in Prometheus", Duration::from_secs(30), || {
        (prometheus.value(changes) > changes_before).then_some(())
    });
    wait_for("the killed replica down in Prometheus", Duration::from_secs(30), || {
        (prometheus.value(&format!("up{{group=\"archiver\",replica=\"{leader}\"}}")) == 0.0).then_some(())
    });

    // Without a majority the last archiver is live but not ready, and says why; once `cluster
    // up` restarts the others it is ready again.
    kill_9(&dir, &format!("archiver-{new_leader}"));
    let last = (1..=3u64).find(|id| ![leader, new_leader].contains(id)).unwrap();
    let address = (targets.iter())
        .find(|t| {
            t["labels"]["group"] == "archiver"
                && t["labels"]["replica"].as_str().and_then(|r| r.parse().ok()) == Some(last)
        })
        .map(|t| t["targets"][0].as_str().unwrap().to_string())
        .unwrap();
    let body = wait_for("the last archiver not ready", Duration::from_secs(30), || {
        let (code, body) = readyz(&address);
        (code == 503).then_some(body)
    });
    assert_eq!(body["status"], "not_ready", "{body}");
    assert!(body["not_ready"].to_string().contains("no leader"), "{body}");
    assert_eq!(
        ureq::get(&format!("http://{address}/livez"))
            .call()
            .map(|a| a.status())
            .ok(),
        Some(200),
        "not ready is still live"
    );
    specie(&["cluster", "up", "--dir", &dir]);
    wait_for("the last archiver ready again", Duration::from_secs(60), || {
        (readyz(&address).0 == 200).then_some(())
    });
}

/// Under `--log-format json` a standalone service's stderr is JSON lines from its start to its
/// stop after Ctrl-C: its settings, where it serves and its stop are `specie::start` events.
#[test]
fn a_standalone_service_logs_json_lines_from_start_to_ctrl_c() {
    use std::io::Read;
    let temp = tempfile::tempdir().unwrap();
    let dir = |name: &str| temp.path().join(name).to_str().unwrap().to_string();
    let issuer = secp256k1::Keypair::new_global(&mut rand::thread_rng());
    let issuer = hex::encode(specie_transaction::signing::xonly_bytes(&issuer));
    let services: [(&str, Vec<String>); 2] = [
        (
            "specie node: stopped",
            [
                "node",
                "--listen",
                "127.0.0.1:0",
                "--issuer",
                &issuer,
                "--data-dir",
                &dir("node"),
            ]
            .map(String::from)
            .to_vec(),
        ),
        (
            "specie exchange: stopped",
            [
                "exchange",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                &dir("exchange"),
            ]
            .into_iter()
            .chain(["--asset", "usd=http://127.0.0.1:9", "--asset", "eur=http://127.0.0.1:9"])
            .map(String::from)
            .collect(),
        ),
    ];
    for (expected, args) in services {
        let mut child = Command::new(crate::cluster_harness::BIN)
            .args(["--log-format", "json"])
            .args(&args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let mut text = String::new();
        let mut buffer = [0u8; 4096];
        wait_for("the service to say where it serves", Duration::from_secs(30), || {
            let read = stderr.read(&mut buffer).unwrap();
            assert!(read > 0, "{args:?} ended early: {text}");
            text.push_str(std::str::from_utf8(&buffer[..read]).unwrap());
            text.contains("API on http://").then_some(())
        });
        let interrupted = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(interrupted.success());
        stderr.read_to_string(&mut text).unwrap();
        assert!(child.wait().unwrap().success(), "{args:?}: {text}");
        let events: Vec<Value> = (text.lines())
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {line}")))
            .collect();
        assert!(
            events
                .iter()
                .all(|event| event["target"] == specie_service::announce::START_LOG),
            "{text}"
        );
        let said = |part: &str| {
            events
                .iter()
                .any(|e| e["fields"]["message"].as_str().is_some_and(|m| m.contains(part)))
        };
        assert!(said(expected) && said("API on http://"), "{args:?}: {text}");
    }
}
