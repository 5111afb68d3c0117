//! A cluster upgraded while it serves: `specie cluster restart` under the demo's load restarts
//! every process, one at a time, and nothing confirmed is lost (the demo's audit; every shard
//! group's replicas hold the same UHS); again under wallets' load through a sentinel, which
//! restarts too (every confirmed mint in the UHS). A restart that could cost a group its
//! majority is refused before it stops anything. Versions agreed in the handshake are the wire's tests
//! (`specie-wire`, `mutual_tls::peers_agree_on_a_common_version_or_are_refused_with_both_named`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cluster_harness::{
    assert_audit, digest, finish_demo, kill_9, specie, start_cluster, start_demo, status, MintLoad, BIN,
};
use specie_cluster::Topology;

/// Every member's pid, by name, from the cluster's pid files.
fn pids(dir: &str) -> BTreeMap<String, String> {
    (std::fs::read_dir(Path::new(dir).join("pids")).unwrap())
        .map(|entry| entry.unwrap().path())
        .map(|path| {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap().trim().to_string())
        })
        .collect()
}

#[test]
fn a_rolling_restart_under_load_loses_nothing() {
    let (_temp, dir, _base, _down) = start_cluster(2);
    let dir = dir.as_str();
    let before = pids(dir);
    let mut demo = start_demo(dir, "60000", "5");
    std::thread::sleep(Duration::from_millis(1500));
    let leaders: Vec<String> = (status(dir).into_iter())
        .filter(|row| row.role == "leader")
        .map(|row| format!("{}-{}", row.group, row.replica))
        .collect();

    let restart = specie(&["cluster", "restart", "--dir", dir]);
    let said = String::from_utf8_lossy(&restart.stdout);
    eprintln!("{said}");
    assert!(
        demo.try_wait().unwrap().is_none(),
        "the load ended before the restart did"
    );
    let restarted: Vec<&str> = said.lines().filter(|l| l.contains(" restarted (pid ")).collect();
    assert_eq!(restarted.len(), before.len(), "{said}");
    assert!(
        said.contains(&format!("restarted {} processes, one at a time", before.len())),
        "{said}"
    );
    // Each group's leader went last in its group, the sentinels after every group.
    for leader in &leaders {
        let group = leader.rsplit_once('-').unwrap().0;
        let last = restarted
            .iter()
            .rposition(|l| l.starts_with(&format!("{group}-")))
            .unwrap();
        assert!(
            restarted[last].starts_with(&format!("{leader} ")),
            "{leader} was not last: {said}"
        );
    }
    let first_sentinel = restarted.iter().position(|l| l.starts_with("sentinel-")).unwrap();
    assert!(
        restarted[first_sentinel..].iter().all(|l| l.starts_with("sentinel-")),
        "{said}"
    );
    let after = pids(dir);
    assert_eq!(after.len(), before.len());
    for (name, pid) in &before {
        assert_ne!(&after[name], pid, "{name} was not restarted");
    }

    let summary = finish_demo(demo);
    assert_audit(&summary);
    assert!(summary["confirmed_payments"].as_u64().unwrap() > 9_000, "{summary}");
    let digests = specie(&["cluster", "digests", "--dir", dir]);
    let digests = String::from_utf8_lossy(&digests.stdout);
    assert!(
        digests.contains("every group's replicas hold the same UHS"),
        "{digests}"
    );

    // Again under wallets' load, mints posted to a sentinel's HTTP API, which restarts too: the
    // load goes on, and every mint confirmed is in the UHS (each adds two ids, its output and its
    // marker; none is spent).
    let sentinel = format!(
        "http://{}",
        Topology::load(&Path::new(dir).join("cluster.toml")).unwrap().sentinels[0].http
    );
    let ids = |digest: serde_json::Value| digest["ids"].as_u64().unwrap();
    let ids_before = ids(digest(&sentinel));
    let load = MintLoad::start(&sentinel, Path::new(dir));
    std::thread::sleep(Duration::from_millis(1000));
    specie(&["cluster", "restart", "--dir", dir]);
    let during = load.confirmed();
    std::thread::sleep(Duration::from_millis(1000));
    let confirmed = load.stop();
    assert!(
        during > 0 && confirmed > during,
        "the load did not go on: {during} {confirmed}"
    );
    let ids_after = ids(digest(&sentinel));
    let more = ids_after - ids_before;
    eprintln!("mints confirmed: {during} by the restart's end, {confirmed} in all; {more} ids more in the UHS");
    assert!(more >= 2 * confirmed, "{confirmed} mints confirmed, {more} ids more");
    let after = pids(dir);

    // One replica down: restarting another of its group is refused, and nothing is stopped.
    kill_9(dir, "shard-0-1");
    let refused = Command::new(BIN)
        .args(["cluster", "restart", "--dir", dir, "--name", "shard-0-2"])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a restart began with a replica down");
    assert!(
        message.contains("not every process is ready") && message.contains("shard-0-1:"),
        "{message}"
    );
    assert_eq!(pids(dir)["shard-0-2"], after["shard-0-2"]);
    // Named alone, the replica that is down is started again and waited for.
    specie(&["cluster", "restart", "--dir", dir, "--name", "shard-0-1"]);
}
