//! Real `specie` processes for the cluster tests: run the binary, find free ports, read
//! `cluster status`, confirm transactions in the core, kill a member, run the demo and check its
//! audit, stop a cluster when a test ends; and what FastPay authorities hold
//! ([`authority_state`]).
#![allow(dead_code)] // each test module uses its own part of this

pub mod authority_state;
pub mod exchange_traders;
pub mod offline_devices;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use specie_codec::Encode;
use specie_transaction::SpecieTransaction;

pub const BIN: &str = env!("CARGO_BIN_EXE_specie");

pub fn specie(args: &[&str]) -> Output {
    let output = Command::new(BIN).args(args).output().expect("run specie");
    assert!(
        output.status.success(),
        "specie {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A base port with `count` free consecutive ports above it.
/// Tests of one binary run in parallel: each call starts its search elsewhere, so two tests do
/// not both find the same ports free before either binds them. The ports are below Linux's
/// ephemeral range (32768 and up), from which every outgoing connection of the machine takes a
/// port: a port found free there can be taken by one before the cluster binds it.
pub fn free_ports(count: u16) -> u16 {
    static CALLS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let call = u32::from(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    // In u32: every test of the binary calls this, and the offsets add up past u16.
    let start = (std::process::id() % 2_000) * 20 + call * 1_009;
    (0..1_000u32)
        .map(|i| ((start + i * 37) % 12_000 + 20_000) as u16)
        .find(|base| (0..count).all(|p| std::net::TcpListener::bind(("127.0.0.1", base + p)).is_ok()))
        .expect("free ports")
}

#[derive(Debug, Clone)]
pub struct Row {
    pub group: String,
    pub replica: u64,
    pub pid: u32,
    pub role: String,
    pub applied: Option<u64>,
}

pub fn status(dir: &str) -> Vec<Row> {
    let output = Command::new(BIN)
        .args(["cluster", "status", "--dir", dir])
        .output()
        .expect("status");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
        // The replicas' table ends at the first blank line (FastPay figures may follow).
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 || f[0].starts_with("sentinel") {
                return None;
            }
            Some(Row {
                group: f[0].to_string(),
                replica: f[1].parse().ok()?,
                pid: f[2].parse().unwrap_or(0),
                role: f[3].to_string(),
                applied: f[7].parse().ok(),
            })
        })
        .collect()
}

/// The rows of `cluster status` for the replicas of `group`: (replica, role).
pub fn group_roles(dir: &str, group: &str) -> Vec<(u64, String)> {
    status(dir)
        .into_iter()
        .filter(|row| row.group == group)
        .map(|row| (row.replica, row.role))
        .collect()
}

/// `specie cluster replace-replica` of replica `replica` of `group`: the new replica's id.
pub fn replace_replica(dir: &str, group: &str, replica: u64) -> u64 {
    let replica = replica.to_string();
    let args = [
        "cluster",
        "replace-replica",
        "--dir",
        dir,
        "--group",
        group,
        "--replica",
        &replica,
    ];
    let output = specie(&args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .last()
        .and_then(|line| line.parse().ok())
        .expect("the new replica's id")
}

/// `kill -9` of the cluster member `member` (its pid from DIR/pids).
pub fn kill_9(dir: &str, member: &str) {
    let pid = std::fs::read_to_string(Path::new(dir).join("pids").join(format!("{member}.pid"))).unwrap();
    assert!(Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap()
        .success());
    // SIGKILL is delivered, not yet acted on: wait until the process is gone (or a zombie), so
    // that whatever replaces it finds its port and its data directory's lock free.
    let started = std::time::Instant::now();
    let gone = || match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    };
    while !gone() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{member} survived SIGKILL for 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Each transaction's result object (`status`, `code`, …) as the sentinel answers its submission.
pub fn submit_results(sentinel: &str, txs: &[SpecieTransaction]) -> Vec<serde_json::Value> {
    let hexes: Vec<String> = txs.iter().map(|tx| hex::encode(tx.encode())).collect();
    let body: serde_json::Value = ureq::post(&format!("{sentinel}/v1/transactions"))
        .timeout(Duration::from_secs(60))
        .send_json(serde_json::json!({ "transactions": hexes }))
        .expect("submit")
        .into_json()
        .expect("json");
    body["results"].as_array().expect("results").clone()
}

/// Each transaction's status as the sentinel answers its submission.
pub fn post_transactions(sentinel: &str, txs: &[SpecieTransaction]) -> Vec<String> {
    submit_results(sentinel, txs)
        .iter()
        .map(|r| r["status"].as_str().expect("status").to_string())
        .collect()
}

/// Submits until every transaction is confirmed (a coordinator may answer busy at first).
pub fn confirm_in_core(sentinel: &str, txs: &[SpecieTransaction]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let statuses = post_transactions(sentinel, txs);
        if statuses.iter().all(|s| s == "confirmed") {
            return;
        }
        assert!(
            statuses.iter().all(|s| s == "confirmed" || s == "busy") && Instant::now() < deadline,
            "{statuses:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `program`: on PATH, or installed from Debian's `package` when this runs as root on a machine
/// with apt (the test setup a fresh CI machine needs); otherwise the test fails and says what to
/// install.
pub fn debian_program(program: &str, package: &str) -> std::path::PathBuf {
    let found = || {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    };
    if let Some(path) = found() {
        return path;
    }
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n");
    assert!(
        root && Path::new("/usr/bin/apt-get").exists(),
        "this test needs {program}: `apt-get install {package}` (Debian's package), then run it again"
    );
    eprintln!("installing Debian's {package} package for this test…");
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null())
            .status();
        assert!(install(), "apt-get install {package} failed");
    }
    found().unwrap_or_else(|| panic!("{program} on PATH after installing {package}"))
}

/// Starts `specie ARGS` in the background; its child and the URL it says it serves on (the
/// first stderr line with "API on ", or "console on " for `specie console`). Its later output
/// is drained.
pub fn start_serving(args: &[&str]) -> (Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the specie binary runs");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let url = loop {
        let line = lines.next().expect("the process says where it serves").unwrap();
        if let Some(rest) = (line.split("API on ").nth(1)).or_else(|| line.split("console on ").nth(1)) {
            break rest
                .split(|c: char| c.is_whitespace() || c == ',')
                .next()
                .unwrap()
                .to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

/// Runs `specie ARGS`, which must end within `limit` (it is killed and the test fails if not):
/// its exit status and its stderr.
pub fn run_to_exit(args: &[&str], limit: Duration) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the specie binary runs");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("specie {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().expect("stderr read"))
}

pub fn start_demo(dir: &str, payments: &str, seed: &str) -> Child {
    Command::new(BIN)
        .args([
            "demo",
            "--cluster",
            dir,
            "--payments",
            payments,
            "--wallets",
            "50",
            "--window",
            "1024",
            "--seed",
            seed,
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start demo")
}

pub fn finish_demo(demo: Child) -> serde_json::Value {
    let output = demo.wait_with_output().expect("demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

pub fn digest(sentinel: &str) -> serde_json::Value {
    ureq::get(&format!("{sentinel}/v1/uhs/digest"))
        .timeout(Duration::from_secs(30))
        .call()
        .expect("digest")
        .into_json()
        .unwrap()
}

pub fn assert_audit(summary: &serde_json::Value) {
    assert_eq!(summary["audit_ok"], true, "{summary}");
    assert!(summary["confirmed_payments"].as_u64().unwrap() > 100, "{summary}");
    let checks = &summary["checks"];
    assert_eq!(checks["replays"], checks["replays_rejected"], "{summary}");
    assert_eq!(checks["conflict_pairs_with_two_winners"], 0, "{summary}");
}

/// A default cluster (2 shard groups and a coordinator group of 3 replicas each) with
/// `sentinels` sentinels, started in a new temporary directory on free ports. Returns the
/// directory (dropping it deletes the files), the cluster's directory inside it, its first port,
/// and the guard that stops the cluster, even one that only half started.
pub fn start_cluster(sentinels: u16) -> (tempfile::TempDir, String, u16, Down) {
    start_cluster_with(sentinels, 1)
}

/// [`start_cluster`] with `coordinator_groups` coordinator groups of 3 replicas each. The
/// sentinels' ports follow every replica's: `base + 3 × (2 + coordinator_groups)` onwards.
pub fn start_cluster_with(sentinels: u16, coordinator_groups: u16) -> (tempfile::TempDir, String, u16, Down) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let base = free_ports(2 * 3 * (2 + coordinator_groups) + sentinels);
    let guard = Down(dir.clone());
    specie(&[
        "cluster",
        "up",
        "--dir",
        &dir,
        "--base-port",
        &base.to_string(),
        "--sentinels",
        &sentinels.to_string(),
        "--coordinator-groups",
        &coordinator_groups.to_string(),
    ]);
    (temp, dir, base, guard)
}

/// `specie cluster up --dir DIR --base-port BASE` with `more` options.
pub fn cluster_up(dir: &str, base: &str, more: &[&str]) -> Output {
    specie(&[&["cluster", "up", "--dir", dir, "--base-port", base][..], more].concat())
}

/// A cluster in `dir` on ports from `base`: a core of one replica per group and one sentinel, and
/// the FastPay committee that `committee` (`cluster up` options: `--authorities`, …) describes.
pub fn cluster_up_with_committee(dir: &str, base: u16, committee: &[&str]) {
    let base = base.to_string();
    let core = [
        "cluster",
        "up",
        "--dir",
        dir,
        "--base-port",
        &base,
        "--replicas",
        "1",
        "--sentinels",
        "1",
    ];
    specie(&[&core[..], committee].concat());
}

/// Mints of 1 signed by the cluster's issuer, posted to the sentinel's HTTP API in batches of 50
/// from a thread of their own, as wallets would; a refused connection (the sentinel held) is
/// tried again.
pub struct MintLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    confirmed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MintLoad {
    /// Posts to `sentinel` mints by the issuer of the cluster in `cluster_dir` (its `issuer.key`).
    pub fn start(sentinel: &str, cluster_dir: &Path) -> MintLoad {
        use specie_transaction::signing::{xonly_bytes, NonceMode};
        use specie_transaction::{witness_program_commitment, MintTransaction, Output, SpecieTransaction};
        let issuer_secret = std::fs::read_to_string(cluster_dir.join("issuer.key")).unwrap();
        let issuer = secp256k1::Keypair::from_seckey_str_global(issuer_secret.trim()).unwrap();
        let owner = witness_program_commitment(&xonly_bytes(&issuer));
        let (stop, confirmed) = (
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
        );
        let (done, count, url) = (stop.clone(), confirmed.clone(), format!("{sentinel}/v1/transactions"));
        let thread = std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let hexes: Vec<String> = (0..50)
                    .map(|_| {
                        let output = Output {
                            witness_program_commitment: owner,
                            value: 1,
                        };
                        let mint =
                            MintTransaction::new_signed(rand::random(), vec![output], &issuer, NonceMode::Randomized);
                        hex::encode(specie_codec::Encode::encode(&SpecieTransaction::Mint(mint)))
                    })
                    .collect();
                let answer = ureq::post(&url)
                    .timeout(std::time::Duration::from_secs(30))
                    .send_json(serde_json::json!({ "transactions": hexes }));
                match answer.ok().and_then(|a| a.into_json::<serde_json::Value>().ok()) {
                    Some(body) => {
                        let results = body["results"].as_array().cloned().unwrap_or_default();
                        let ok = results.iter().filter(|r| r["status"] == "confirmed").count();
                        count.fetch_add(ok as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                    None => std::thread::sleep(std::time::Duration::from_millis(50)),
                }
            }
        });
        MintLoad {
            stop,
            confirmed,
            thread: Some(thread),
        }
    }

    pub fn confirmed(&self) -> u64 {
        self.confirmed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops it; how many mints were confirmed in all.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.confirmed()
    }
}

impl Drop for MintLoad {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Processes a test started, killed when it ends however it ends.
pub struct Children(pub Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Stops the cluster in the directory when dropped, so a failing test leaves no processes.
pub struct Down(pub String);

impl Drop for Down {
    fn drop(&mut self) {
        if Path::new(&self.0).join("cluster.toml").exists() {
            let _ = Command::new(BIN).args(["cluster", "down", "--dir", &self.0]).output();
        }
    }
}

/// A wire client holding `me`'s certificate, to the process `server` listening at `address`.
pub fn wire_client(
    topology: &specie_cluster::Topology,
    me: &specie_cluster::Identity,
    address: &str,
    server: &specie_cluster::Identity,
) -> specie_wire::Client {
    let transport = specie_cluster::credentials::transport(topology, me).unwrap();
    let limits = specie_wire::WireLimits::default();
    specie_wire::Client::new(address.to_string(), server.to_string(), limits, transport).unwrap()
}

/// `host`, as the member `name`'s host would hold the cluster: the cluster file, its pki_dir
/// pointing at the credentials copied for `name` alone. Returns the file names copied.
pub fn make_host(cluster: &str, host: &Path, name: &str) -> BTreeSet<String> {
    let pki = host.join("pki");
    let output = specie(&[
        "cluster",
        "credentials",
        "--dir",
        cluster,
        "--name",
        name,
        "--out",
        pki.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(Path::new(cluster).join("cluster.toml")).unwrap();
    let mut file = specie_cluster::Topology::load(&Path::new(cluster).join("cluster.toml")).unwrap();
    file.pki_dir = pki.clone();
    assert_ne!(file.to_toml(), text);
    std::fs::write(host.join("cluster.toml"), file.to_toml()).unwrap();
    let listed: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let copied: BTreeSet<String> = std::fs::read_dir(&pki)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed.len(), copied.len(), "{listed:?}");
    copied
}

/// Waits until `cluster status` from `operator` says every member is healthy.
pub fn wait_healthy(operator: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = Command::new(BIN)
            .args(["cluster", "status", "--dir", operator])
            .output()
            .unwrap();
        if output.status.success() {
            return;
        }
        assert!(Instant::now() < deadline, "{}", String::from_utf8_lossy(&output.stdout));
        std::thread::sleep(Duration::from_millis(500));
    }
}
