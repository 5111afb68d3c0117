//! Membership change of a running cluster's groups, with real processes on 127.0.0.1, under the
//! demo's load: a shard group's leader replaced, a coordinator replica added and the
//! coordinator group's leader removed. Nothing confirmed is lost (the demo's audit), every
//! shard group's replicas hold the same UHS (`cluster digests`), the ids removed are retired in
//! the cluster file and never given again, a second change while one runs is refused, and a
//! replica whose directory was wiped is refused under its old id and then replaced.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use specie_cluster::Topology;

use crate::cluster_harness::{
    self, assert_audit, finish_demo, replace_replica, specie, start_cluster, start_demo, status, BIN,
};

/// The replica of `group` that leads, once one does.
fn leader_of(dir: &str, group: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(row) = status(dir).into_iter().find(|r| r.group == group && r.role == "leader") {
            return row.replica;
        }
        assert!(Instant::now() < deadline, "{group} has no leader");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The replica ids `group` lists in the cluster file.
fn listed(dir: &str, group: &str) -> Vec<u64> {
    let topology = Topology::load(&Path::new(dir).join("cluster.toml")).unwrap();
    let groups = topology.replica_groups();
    let (_, _, replicas) = groups.iter().find(|(_, name, _)| name == group).expect("the group");
    replicas.iter().map(|r| r.id).collect()
}

#[test]
fn groups_change_members_under_load_and_lose_nothing() {
    let (_temp, dir, _base, _down) = start_cluster(1);
    let dir = dir.as_str();
    let demo = start_demo(dir, "12000", "3");
    std::thread::sleep(Duration::from_millis(1500));

    // The shard group's leader is replaced: a new replica joins, then the old leader leaves.
    let old = leader_of(dir, "shard-0");
    let new = replace_replica(dir, "shard-0", old);
    assert_eq!(new, 4, "ids are never reused: the next after 1, 2, 3");

    // A second change while one runs is refused, and the running one completes.
    let mut adding = Command::new(BIN)
        .args(["cluster", "add-replica", "--dir", dir, "--group", "coordinator-0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let second = Command::new(BIN)
        .args([
            "cluster",
            "remove-replica",
            "--dir",
            dir,
            "--group",
            "coordinator-0",
            "--replica",
            "1",
        ])
        .output()
        .unwrap();
    let refusal = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second change ran");
    assert!(refusal.contains("another membership change runs"), "{refusal}");
    assert!(adding.wait().unwrap().success());
    let mut stdout = String::new();
    std::io::Read::read_to_string(adding.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert_eq!(stdout.lines().last(), Some("4"), "{stdout}");

    // The coordinator group's leader removes itself: it steps down, another leads.
    let coordinator_leader = leader_of(dir, "coordinator-0");
    specie(&[
        "cluster",
        "remove-replica",
        "--dir",
        dir,
        "--group",
        "coordinator-0",
        "--replica",
        &coordinator_leader.to_string(),
    ]);

    let summary = finish_demo(demo);
    assert_audit(&summary);
    assert!(summary["confirmed_payments"].as_u64().unwrap() > 9_000, "{summary}");

    let mut shard_0 = vec![1, 2, 3, 4];
    shard_0.retain(|id| *id != old);
    assert_eq!(listed(dir, "shard-0"), shard_0);
    let mut coordinators = vec![1, 2, 3, 4];
    coordinators.retain(|id| *id != coordinator_leader);
    assert_eq!(listed(dir, "coordinator-0"), coordinators);
    let topology = Topology::load(&Path::new(dir).join("cluster.toml")).unwrap();
    assert_eq!(
        topology.retired,
        [
            format!("{old}.shard-0.shard.specie"),
            format!("{coordinator_leader}.coordinator-0.coordinator.specie")
        ]
    );
    let leader = leader_of(dir, "coordinator-0");
    assert_ne!(leader, coordinator_leader, "another replica leads");
    // The new shard replica serves its metrics: a group of three voters, no learner.
    let added = &topology.shard_groups[0].replicas.iter().find(|r| r.id == new).unwrap();
    let metrics = ureq::get(&format!("http://{}/metrics", added.metrics.unwrap()))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    for line in [
        "specie_raft_voters 3\n",
        "specie_raft_learners 0\n",
        "specie_raft_membership_changing 0\n",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
    let digests = specie(&["cluster", "digests", "--dir", dir]);
    let digests = String::from_utf8_lossy(&digests.stdout);
    assert!(
        digests.contains("every group's replicas hold the same UHS"),
        "{digests}"
    );
    assert_eq!(
        digests.lines().filter(|l| l.starts_with("shard-")).count(),
        6,
        "{digests}"
    );

    // A replica whose directory is wiped is refused under its old id, and replaced.
    let follower = status(dir)
        .into_iter()
        .find(|r| r.group == "shard-1" && r.role == "follower")
        .expect("a follower");
    cluster_harness::kill_9(dir, &format!("shard-1-{}", follower.replica));
    std::fs::remove_dir_all(topology.data_dir.join(format!("shard-1-{}", follower.replica))).unwrap();
    let up = Command::new(BIN)
        .args(["cluster", "up", "--dir", dir])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&up.stderr);
    assert!(!up.status.success(), "a wiped replica came back");
    assert!(
        said.contains("holds no replica") && said.contains("rebuild it under a new id"),
        "{said}"
    );
    assert_eq!(replace_replica(dir, "shard-1", follower.replica), 4);
    specie(&["cluster", "up", "--dir", dir]);
    let summary = finish_demo(start_demo(dir, "2000", "4"));
    assert_audit(&summary);
    let digests = specie(&["cluster", "digests", "--dir", dir]);
    assert!(String::from_utf8_lossy(&digests.stdout).contains("every group's replicas hold the same UHS"));
}
