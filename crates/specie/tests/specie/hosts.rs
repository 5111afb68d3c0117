//! One process per host (issue 37, item 1), on 127.0.0.1: every member of a cluster is started
//! by `specie cluster run` from a directory of its own, as its own host would hold it (the
//! cluster file, only the credentials `specie cluster credentials` copied for it, and an empty
//! data directory, the file saying `founding = true`); the operator's directory holds only the
//! operator's. `cluster status` from there sees every member healthy, and the demo, run where
//! the sentinel's credentials are, ends in the audit. Once founding is off, a replica whose
//! directory is lost is refused under its old id.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster_harness;

use cluster_harness::{
    assert_audit, finish_demo, free_ports, make_host, specie, start_demo, wait_healthy, Children, Down, BIN,
};

/// `specie cluster credentials` of `name` into `out`, run to its end: its status and stderr.
fn credentials(cluster: &str, name: &str, out: &str) -> (std::process::ExitStatus, String) {
    let args = ["cluster", "credentials", "--dir", cluster, "--name", name, "--out", out];
    cluster_harness::run_to_exit(&args, Duration::from_secs(30))
}

#[test]
fn every_member_runs_from_its_own_host_directory_with_its_own_credentials_only() {
    let root = tempfile::tempdir().unwrap();
    let cluster = root.path().join("cluster");
    let cluster = cluster.to_str().unwrap();
    let _down = Down(cluster.to_string());
    let base = free_ports(40).to_string();
    // Made on one host, then stopped: its file and PKI are what an operator distributes.
    let more = [
        "--replicas",
        "1",
        "--sentinels",
        "1",
        "--authorities",
        "--authority-shards",
        "1",
    ];
    let modes = ["--offline", "1", "--ledger-of-record", "1"];
    cluster_harness::cluster_up(cluster, &base, &[&more[..], &modes].concat());
    specie(&["cluster", "down", "--dir", cluster]);
    let path = Path::new(cluster).join("cluster.toml");
    let topology = specie_cluster::Topology::load(&path).unwrap();
    let members = specie_cluster::supervisor::members(&path, &topology);
    assert_eq!(members.len(), 10);

    let hosts = root.path().join("hosts");
    let mut running = Children(vec![]);
    for member in &members {
        let host = hosts.join(&member.name);
        let copied = make_host(cluster, &host, &member.name);
        // The CA's key never leaves the operator's host; another member's files never come.
        assert!(copied.contains("ca.crt") && !copied.contains("ca.key"), "{copied:?}");
        let secrets = match member.name.as_str() {
            "sentinel-0" => vec!["sentinel-0.sentinel.specie.attestation.key"],
            "offline-authority-1" => vec!["offline-authority.seed", "offline-operator.token"],
            name if name.starts_with("authority-") => vec![&name[..11]],
            _ => vec![],
        };
        assert_eq!(copied.len(), 3 + secrets.len(), "{}: {copied:?}", member.name);
        for secret in secrets {
            assert!(
                copied.iter().any(|file| file.starts_with(secret)),
                "{}: {copied:?}",
                member.name
            );
        }
        // A host of its own: its data on its own disk, empty, founding its group.
        let file = host.join("cluster.toml");
        let mut own = specie_cluster::Topology::load(&file).unwrap();
        (own.data_dir, own.founding) = (host.join("data"), true);
        std::fs::write(&file, own.to_toml()).unwrap();
        let log = std::fs::File::create(host.join("log")).unwrap();
        let child = Command::new(BIN)
            .args([
                "cluster",
                "run",
                "--dir",
                host.to_str().unwrap(),
                "--name",
                &member.name,
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        running.0.push(child);
    }
    let operator = hosts.join("operator");
    assert_eq!(make_host(cluster, &operator, "operator").len(), 3);
    // Again: nothing to write, and it says so.
    let (code, stderr) = credentials(cluster, "operator", operator.join("pki").to_str().unwrap());
    assert!(
        code.success() && stderr.contains("holds operator's credentials already"),
        "{stderr}"
    );
    let operator = operator.to_str().unwrap();

    // The operator's host sees every member healthy, with nothing of theirs.
    wait_healthy(operator);

    // Payments through the members, ending in the audit (the demo submits as the sentinel does,
    // so it runs where the sentinel's credentials are, with the issuer's key).
    let sentinel_host = hosts.join("sentinel-0");
    std::fs::copy(Path::new(cluster).join("issuer.key"), sentinel_host.join("issuer.key")).unwrap();
    assert_audit(&finish_demo(start_demo(sentinel_host.to_str().unwrap(), "400", "37")));

    // A cluster file naming another network: its sentinel's address answers, but not as
    // this network's, and `status` says so.
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mut file = specie_cluster::Topology::load(&Path::new(operator).join("cluster.toml")).unwrap();
    file.network_id = Some("00".repeat(16));
    std::fs::write(other.join("cluster.toml"), file.to_toml()).unwrap();
    let status = Command::new(BIN)
        .args(["cluster", "status", "--dir", other.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(2), "{shown}");
    assert!(shown.contains("not with this cluster's network_id"), "{shown}");

    // Mistakes: a member that is not in the file is named with the list of those that are;
    // a second `run` of a running member cannot take its address; credentials are never
    // written over different ones.
    let (code, stderr) = cluster_harness::run_to_exit(
        &["cluster", "run", "--dir", operator, "--name", "shard-9-1"],
        Duration::from_secs(30),
    );
    assert!(!code.success());
    assert!(
        stderr.contains("no member named 'shard-9-1'") && stderr.contains("sentinel-0"),
        "{stderr}"
    );
    let shard_host = hosts.join("shard-0-1");
    let shard_dir = shard_host.to_str().unwrap();
    let run_shard = || {
        let args = ["cluster", "run", "--dir", shard_dir, "--name", "shard-0-1"];
        cluster_harness::run_to_exit(&args, Duration::from_secs(30))
    };
    let (code, stderr) = run_shard();
    assert!(!code.success() && stderr.contains("Address already in use"), "{stderr}");
    let stale = root.path().join("stale");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("ca.crt"), "an old CA").unwrap();
    let (code, stderr) = credentials(cluster, "shard-1-1", stale.to_str().unwrap());
    assert!(
        !code.success() && stderr.contains("ca.crt exists and differs"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(stale.join("ca.crt")).unwrap(), "an old CA");

    // Founding over, a replica whose directory is lost does not found again under its old id.
    let at = members.iter().position(|m| m.name == "shard-0-1").unwrap();
    running.0[at].kill().unwrap();
    running.0[at].wait().unwrap();
    let file = shard_host.join("cluster.toml");
    let mut own = specie_cluster::Topology::load(&file).unwrap();
    own.founding = false;
    std::fs::write(&file, own.to_toml()).unwrap();
    assert!(!own.to_toml().contains("founding"));
    std::fs::remove_dir_all(shard_host.join("data")).unwrap();
    let (code, stderr) = run_shard();
    assert!(
        !code.success() && stderr.contains("holds no replica (node 1)"),
        "{stderr}"
    );
}
