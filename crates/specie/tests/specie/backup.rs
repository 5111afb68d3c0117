//! Backup and restore: `specie cluster backup` under load (mints posted to the sentinel's HTTP
//! API, as wallets submit) and once idle, the cluster gone, and `specie cluster restore` into
//! fresh directories. The cut taken under load restores
//! to a cluster whose supply report balances and whose replicas agree; the idle one to a cluster
//! serving the same UHS digest and ledger head as the original did, which then takes payments
//! and passes the demo's audit.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::cluster_harness::{
    assert_audit, cluster_up, digest, finish_demo, free_ports, specie, start_demo, Down, MintLoad, BIN,
};

fn supply(sentinel: &str) -> Value {
    ureq::get(&format!("{sentinel}/v1/supply"))
        .call()
        .expect("supply")
        .into_json()
        .unwrap()
}

/// `cluster restore --from BACKUP --dir DIR`, then `cluster up`, then `cluster digests` agreeing.
fn restore_and_start(backup: &Path, dir: &Path, base: &str) -> Down {
    let (backup, dir) = (backup.to_str().unwrap(), dir.to_str().unwrap());
    let restored = specie(&["cluster", "restore", "--from", backup, "--dir", dir]);
    let said = String::from_utf8_lossy(&restored.stdout);
    assert!(said.contains("restored 4 groups into"), "{said}");
    let down = Down(dir.to_string());
    cluster_up(dir, base, &[]);
    let digests = specie(&["cluster", "digests", "--dir", dir]);
    let digests = String::from_utf8_lossy(&digests.stdout);
    assert!(
        digests.contains("every group's replicas hold the same UHS"),
        "{digests}"
    );
    down
}

#[test]
fn a_backup_restores_to_a_cluster_serving_the_same_digest_and_ledger() {
    let temp = tempfile::tempdir().unwrap();
    let original = temp.path().join("original");
    let dir = original.to_str().unwrap();
    let base = free_ports(40).to_string();
    let down = Down(dir.to_string());
    cluster_up(dir, &base, &["--sentinels", "1", "--ledger-of-record", "3"]);
    let topology = specie_cluster::Topology::load(&original.join("cluster.toml")).unwrap();
    let sentinel = format!("http://{}", topology.sentinels[0].http);

    // The demo's payments first: a ledger of record of a few MiB, read in chunks below.
    assert_audit(&finish_demo(start_demo(dir, "6000", "7")));
    // Under load through the sentinel: it is held while the cut is taken, and the load goes on
    // after it.
    let load = MintLoad::start(&sentinel, &original);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let under_load = temp.path().join("under-load");
    let before = load.confirmed();
    let backed_up = specie(&["cluster", "backup", "--dir", dir, "--out", under_load.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&backed_up.stdout);
    assert!(said.contains("backed up 4 groups into"), "{said}");
    eprintln!("{said}");
    let during = load.confirmed();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let confirmed = load.stop();
    eprintln!("mints confirmed: {before} before the backup, {during} when it ended, {confirmed} in all");
    assert!(
        before > 0 && confirmed > during,
        "the load did not go on: {before} {during} {confirmed}"
    );

    // The ledger of record's state is read in more than one chunk (1 MiB each).
    let manifest: Value = serde_json::from_slice(&std::fs::read(under_load.join("manifest.json")).unwrap()).unwrap();
    let archiver = manifest["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "archiver")
        .unwrap();
    assert!(archiver["bytes"].as_u64().unwrap() > 1 << 20, "{manifest}");

    // Idle: what the cluster serves now is what the restored one must serve. The load's last
    // records are still being decided by the ledger of record for a moment: wait until nothing
    // is, so that the cluster serves the same before the backup as after it.
    let settled = std::time::Instant::now();
    while supply(&sentinel)["ledger"]["undecided"] != 0 || supply(&sentinel)["ledger"]["waiting"] != 0 {
        assert!(
            settled.elapsed() < std::time::Duration::from_secs(90),
            "the ledger never settled"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let idle = temp.path().join("idle");
    specie(&["cluster", "backup", "--dir", dir, "--out", idle.to_str().unwrap()]);
    let (uhs, at_cut) = (digest(&sentinel), supply(&sentinel));
    assert_eq!(at_cut["balanced"], true, "{at_cut}");
    // A backup is never written over.
    let again = Command::new(BIN)
        .args(["cluster", "backup", "--dir", dir, "--out", idle.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is not empty"));
    drop(down);

    // The cut under load balances where it was restored.
    let restored = restore_and_start(&under_load, &temp.path().join("restored-under-load"), &base);
    let mid = supply(&sentinel);
    assert_eq!(mid["balanced"], true, "{mid}");
    assert!(
        mid["ledger"]["height"].as_u64() <= at_cut["ledger"]["height"].as_u64(),
        "{mid} {at_cut}"
    );
    drop(restored);

    // The idle cut serves exactly what the original served, and goes on from there.
    let restored_dir = temp.path().join("restored");
    let restored = restore_and_start(&idle, &restored_dir, &base);
    assert_eq!(digest(&sentinel), uhs);
    assert_eq!(supply(&sentinel), at_cut);
    // The issuer's key is the issuer's, not the cluster's: no backup holds it.
    std::fs::copy(original.join("issuer.key"), restored_dir.join("issuer.key")).unwrap();
    let demo = start_demo(restored_dir.to_str().unwrap(), "1000", "8");
    assert_audit(&finish_demo(demo));
    drop(restored);

    // Its replicas start from the states the cluster file names, and from no other backup's.
    for entry in std::fs::read_dir(&under_load).unwrap() {
        let from = entry.unwrap().path();
        std::fs::copy(
            &from,
            restored_dir.join("restored-from").join(from.file_name().unwrap()),
        )
        .unwrap();
    }
    let refused = Command::new(BIN)
        .args(["cluster", "up", "--dir", restored_dir.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    assert!(said.contains("it is another backup's"), "{said}");
    specie(&["cluster", "down", "--dir", restored_dir.to_str().unwrap()]);

    // A damaged backup is refused before anything is made.
    let state = std::fs::read_dir(&idle)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "state"))
        .unwrap();
    let mut bytes = std::fs::read(&state).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&state, bytes).unwrap();
    let target = temp.path().join("from-damaged");
    let refused = Command::new(BIN)
        .args([
            "cluster",
            "restore",
            "--from",
            idle.to_str().unwrap(),
            "--dir",
            target.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        message.contains("is not intact") && message.contains("SHA-256"),
        "{message}"
    );
    assert!(!target.exists());
}
