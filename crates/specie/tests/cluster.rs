//! Fault tests of a real cluster on 127.0.0.1: under steady load, `kill -9` the leader of a
//! shard group and then of the coordinator group; service resumes (a new leader within 5 s), no
//! confirmed transaction is lost, no double spend is accepted, and the supply audit holds. A
//! follower cut off from its peers (SIGSTOP) while transactions commit catches up once healed.
//! A restart of the whole cluster restores the exact UHS.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_specie");
const FAILOVER_LIMIT: Duration = Duration::from_secs(5);

fn specie(args: &[&str]) -> Output {
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
fn free_ports(count: u16) -> u16 {
    let start = 20_000 + (std::process::id() % 2_000) as u16 * 20;
    (0..200u16)
        .map(|i| start.wrapping_add(i * 37) % 40_000 + 20_000)
        .find(|base| (0..count).all(|p| std::net::TcpListener::bind(("127.0.0.1", base + p)).is_ok()))
        .expect("free ports")
}

#[derive(Debug, Clone)]
struct Row {
    group: String,
    replica: u64,
    pid: u32,
    role: String,
    applied: Option<u64>,
}

fn status(dir: &str) -> Vec<Row> {
    let output = Command::new(BIN)
        .args(["cluster", "status", "--dir", dir])
        .output()
        .expect("status");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
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

fn leader(dir: &str, group: &str) -> Option<Row> {
    status(dir).into_iter().find(|r| r.group == group && r.role == "leader")
}

fn kill(pid: u32, signal: &str) {
    assert!(Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap()
        .success());
}

/// Kills the group's leader and returns how long until another replica leads.
fn kill_leader_and_time_failover(dir: &str, group: &str) -> Duration {
    let old = leader(dir, group).unwrap_or_else(|| panic!("{group} has no leader"));
    kill(old.pid, "KILL");
    let killed = Instant::now();
    loop {
        if let Some(new) = leader(dir, group) {
            if new.replica != old.replica {
                return killed.elapsed();
            }
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "{group}: no new leader after 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_demo(dir: &str, payments: &str, seed: &str) -> Child {
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

fn finish_demo(demo: Child) -> serde_json::Value {
    let output = demo.wait_with_output().expect("demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

fn digest(sentinel: &str) -> serde_json::Value {
    ureq::get(&format!("{sentinel}/v1/uhs/digest"))
        .timeout(Duration::from_secs(30))
        .call()
        .expect("digest")
        .into_json()
        .unwrap()
}

fn assert_audit(summary: &serde_json::Value) {
    assert_eq!(summary["audit_ok"], true, "{summary}");
    assert!(summary["confirmed_payments"].as_u64().unwrap() > 100, "{summary}");
    let checks = &summary["checks"];
    assert_eq!(checks["replays"], checks["replays_rejected"], "{summary}");
    assert_eq!(checks["conflict_pairs_with_two_winners"], 0, "{summary}");
}

#[test]
fn leader_kills_partition_and_restart_lose_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let dir = dir.to_str().unwrap();
    let base = free_ports(12);
    specie(&[
        "cluster",
        "up",
        "--dir",
        dir,
        "--base-port",
        &base.to_string(),
        "--sentinels",
        "1",
    ]);
    let sentinel = format!("http://127.0.0.1:{}", base + 9);
    let _guard = Down(dir.to_string());

    // 1. Leader kills under load.
    let demo = start_demo(dir, "12000", "1");
    std::thread::sleep(Duration::from_millis(1500));
    let shard_failover = kill_leader_and_time_failover(dir, "shard-0");
    std::thread::sleep(Duration::from_millis(1000));
    let coordinator_failover = kill_leader_and_time_failover(dir, "coordinator-0");
    let summary = finish_demo(demo);
    assert_audit(&summary);
    assert!(
        shard_failover < FAILOVER_LIMIT,
        "shard group failover took {shard_failover:?}"
    );
    assert!(
        coordinator_failover < FAILOVER_LIMIT,
        "coordinator failover took {coordinator_failover:?}"
    );
    eprintln!("failover: shard group {shard_failover:?}, coordinator group {coordinator_failover:?}");

    // 2. Restart the killed replicas; then cut one follower off while transactions commit.
    specie(&["cluster", "up", "--dir", dir, "--base-port", &base.to_string()]);
    let follower = status(dir)
        .into_iter()
        .find(|r| r.group == "shard-1" && r.role == "follower")
        .expect("a follower");
    kill(follower.pid, "STOP");
    let summary = finish_demo(start_demo(dir, "3000", "2"));
    assert_audit(&summary);
    kill(follower.pid, "CONT");
    let healed = Instant::now();
    loop {
        let rows = status(dir);
        let leader_applied = rows
            .iter()
            .find(|r| r.group == "shard-1" && r.role == "leader")
            .and_then(|r| r.applied);
        let follower_applied = rows
            .iter()
            .find(|r| r.group == "shard-1" && r.replica == follower.replica)
            .and_then(|r| r.applied);
        if leader_applied.is_some() && follower_applied >= leader_applied {
            break;
        }
        assert!(
            healed.elapsed() < Duration::from_secs(20),
            "the healed follower did not catch up: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 3. Restart the whole cluster: the UHS is exactly what it was.
    let before = digest(&sentinel);
    assert!(before["ids"].as_u64().unwrap() > 1000);
    specie(&["cluster", "down", "--dir", dir]);
    specie(&["cluster", "up", "--dir", dir]);
    assert_eq!(digest(&sentinel), before, "a full restart changed the UHS");
}

/// Stops the cluster even when the test fails.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        if Path::new(&self.0).join("cluster.toml").exists() {
            let _ = Command::new(BIN).args(["cluster", "down", "--dir", &self.0]).output();
        }
    }
}
