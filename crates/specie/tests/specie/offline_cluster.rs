//! The offline cash authority as a Raft group of three replica processes in a cluster
//! (`specie cluster up --offline`), over the cluster's mutual TLS: a core wallet funds a device
//! through the cluster's sentinel (the authority finds the funding in the shards' UHS itself),
//! the device pays another offline, the authority's leader is killed with SIGKILL, and the payee
//! deposits back to its core wallet through the new leader, the device following the group's
//! `not_leader` answers. Every replica then holds the same books, and the audit is OK.

use crate::cluster_harness;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cluster_harness::offline_devices::{core_wallet as wallet, device, enrolled_devices, minted_wallet, run};
use cluster_harness::{free_ports, group_roles, kill_9, replace_replica, specie, Down};
use serde_json::Value;
use specie_cluster::Topology;

/// The offline authority group's rows of `cluster status`: (replica, role).
fn offline_roles(dir: &str) -> Vec<(u64, String)> {
    group_roles(dir, specie_cluster::OFFLINE_AUTHORITY_GROUP)
}

/// Each offline replica's books (funded, defunded, outstanding) from `cluster status`. Its exit
/// status is not asked: a replica just restarted is listed DOWN (status fails) until it learns
/// its leader, which the caller waits out.
fn replica_books(dir: &str) -> Vec<Vec<String>> {
    let out = std::process::Command::new(cluster_harness::BIN)
        .args(["cluster", "status", "--dir", dir])
        .output()
        .expect("run specie");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip_while(|line| !line.starts_with("offline authority"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(|line| line.split_whitespace().skip(2).take(3).map(str::to_string).collect())
        .collect()
}

#[test]
fn an_offline_authority_group_survives_losing_its_leader_and_settles_through_the_core() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    let issuer_wallet = temp.path().join("issuer.json");
    let created = wallet(&issuer_wallet, &["create", "--issuer"]);
    let issuer = created
        .lines()
        .find_map(|line| line.strip_prefix("issuer public key: "))
        .unwrap()
        .to_string();
    // Core 4, offline 3 (wire + HTTP), the archiver's wire and metrics ports, and spare.
    let base = free_ports(4 + 3 + 6 + 4).to_string();
    specie(&[
        "cluster",
        "up",
        "--dir",
        &dir,
        "--base-port",
        &base,
        "--replicas",
        "1",
        "--sentinels",
        "1",
        "--offline",
        "--ledger-of-record",
        "1",
        "--issuer",
        &issuer,
    ]);
    let topology = Topology::load(&Path::new(&dir).join("cluster.toml")).unwrap();
    let urls = topology.offline_authority.as_ref().unwrap().http_urls();
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let token_file = topology.pki_dir.join("offline-operator.token");
    let token_file = token_file.to_str().unwrap();

    // Alice's core wallet gets 1,000 minted and funds her device with 700 through the core.
    let alice_wallet = temp.path().join("alice.json");
    minted_wallet(&issuer_wallet, &alice_wallet, &sentinel, "1000");
    let (alice, bob) = enrolled_devices(temp.path(), &urls, token_file);
    // A device takes key rings signed by one authority only: the one it pinned.
    let bridge = &topology.offline_authority.as_ref().unwrap().bridge;
    let enrolled = device(&alice, &urls, &["balance"]).unwrap();
    assert!(enrolled.starts_with("balance 0;"), "{enrolled}");
    let other_key = hex::encode(
        specie_offline::deterministic_key("not-the-authority", 0)
            .verifying_key()
            .to_bytes(),
    );
    let carol = temp.path().join("carol.device");
    let pinned_other = |file: &Path, args: &[&str]| {
        let mut all = vec!["--authority-key", other_key.as_str()];
        all.extend_from_slice(args);
        device(file, &urls, &all)
    };
    pinned_other(&carol, &["create"]).unwrap();
    let refused = pinned_other(&carol, &["enrol", "--operator-token-file", token_file]).unwrap_err();
    assert!(refused.contains(&format!("signed by {bridge}")), "{refused}");
    let refused = pinned_other(&alice, &["sync"]).unwrap_err();
    assert!(
        refused.contains(&format!("the device trusts authority key {bridge}")),
        "{refused}"
    );
    let refused = device(&alice, &urls, &["fund", "--operator-token-file", token_file, "100"]).unwrap_err();
    assert!(refused.contains("operator's word is off"), "{refused}");
    let funded = device(
        &alice,
        &urls,
        &["fund-from-core", "--wallet", alice_wallet.to_str().unwrap(), "700"],
    )
    .unwrap();
    assert!(funded.starts_with("funded 700 from the core"), "{funded}");

    // Bob is paid 500 offline; then the authority's leader dies.
    let request = device(&bob, &urls, &["request", "500"]).unwrap();
    let paid = device(&alice, &urls, &["pay", &request]).unwrap();
    device(&bob, &urls, &["receive", &paid]).unwrap();
    let roles = offline_roles(&dir);
    assert_eq!(roles.len(), 3, "{roles:?}");
    let (leader, _) = roles
        .iter()
        .find(|(_, role)| role == "leader")
        .expect("a leader")
        .clone();
    kill_9(&dir, &format!("{}-{leader}", specie_cluster::OFFLINE_AUTHORITY_GROUP));

    // Bob deposits back to his core wallet: the device finds the new leader by itself.
    let bob_wallet = temp.path().join("bob.json");
    wallet(&bob_wallet, &["create", "--node", &sentinel]);
    let deposited = device(&bob, &urls, &["deposit", "--wallet", bob_wallet.to_str().unwrap()]).unwrap();
    assert!(
        deposited.starts_with("deposited: 500 paid (500 back to the core, 500 now spendable"),
        "{deposited}"
    );
    assert!(wallet(&bob_wallet, &["balance"]).contains("spendable:   500"));
    let now_leading: Vec<u64> = offline_roles(&dir)
        .into_iter()
        .filter(|(_, role)| role == "leader")
        .map(|(replica, _)| replica)
        .collect();
    assert!(
        now_leading.len() == 1 && now_leading[0] != leader,
        "another replica leads: {now_leading:?}"
    );
    let audit: Value =
        serde_json::from_str(&run(&["offline", "audit", "--authority", &urls, "--json"]).unwrap()).unwrap();
    assert_eq!(audit["ok"], true, "{audit}");
    let books = &audit["books"];
    assert_eq!(
        (&books["funded"], &books["defunded"], &books["outstanding"]),
        (&"700".into(), &"500".into(), &"200".into())
    );

    // The killed replica comes back (`cluster up` restarts it) and catches up from the log.
    specie(&["cluster", "up", "--dir", &dir]);
    let started = Instant::now();
    let expected = vec!["700".to_string(), "500".to_string(), "200".to_string()];
    loop {
        let books = replica_books(&dir);
        if books.len() == 3 && books.iter().all(|b| *b == expected) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "replicas disagree: {books:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The group's leader is replaced (a new replica joins and catches up, the old id is
    // retired) while Alice's device funds itself from the core, 1 at a time, without pause:
    // every funding it was told of is in the books; devices given the replicas' URLs as the
    // cluster started still find a leader, and every replica, the new one included, holds the
    // same books.
    let leader = offline_roles(&dir)
        .into_iter()
        .find(|(_, role)| role == "leader")
        .expect("a leader")
        .0;
    let group = specie_cluster::OFFLINE_AUTHORITY_GROUP;
    let stop = AtomicBool::new(false);
    let (told, failed) = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            let (mut told, mut failed) = (0u64, vec![]);
            let args = ["fund-from-core", "--wallet", alice_wallet.to_str().unwrap(), "1"];
            while !stop.load(Ordering::Relaxed) {
                match device(&alice, &urls, &args) {
                    Ok(out) if out.starts_with("funded 1 from the core") => told += 1,
                    Ok(out) | Err(out) => failed.push(out),
                }
            }
            (told, failed)
        });
        std::thread::sleep(Duration::from_millis(500));
        replace_replica(&dir, group, leader);
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        load.join().unwrap()
    });
    eprintln!("during the replacement: {told} fundings told, {} failed", failed.len());
    assert!(told >= 3, "too little load: {told} fundings, failures {failed:?}");
    // A funding cut off mid-way is finished by the device's next sync, never lost.
    device(&alice, &urls, &["sync"]).unwrap();
    let audit: Value =
        serde_json::from_str(&run(&["offline", "audit", "--authority", &urls, "--json"]).unwrap()).unwrap();
    assert_eq!(audit["ok"], true, "{audit}");
    let funded: u64 = audit["books"]["funded"].as_str().unwrap().parse().unwrap();
    assert!(funded >= 700 + told, "{funded} funded, {told} fundings told: {audit}");
    let expected = vec![funded.to_string(), "500".to_string(), (funded - 500).to_string()];
    let more = temp.path().join("more");
    std::fs::create_dir_all(&more).unwrap();
    let (carol, _) = enrolled_devices(&more, &urls, token_file);
    let request = device(&carol, &urls, &["request", "200"]).unwrap();
    let paid = device(&alice, &urls, &["pay", &request]).unwrap();
    device(&carol, &urls, &["receive", &paid]).unwrap();
    let started = Instant::now();
    loop {
        let books = replica_books(&dir);
        let ids: Vec<u64> = offline_roles(&dir).into_iter().map(|(id, _)| id).collect();
        if books.len() == 3 && books.iter().all(|b| *b == expected) && !ids.contains(&leader) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "replicas disagree after the replacement: {books:?} of {ids:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The platform's supply report agrees with the authority's audit: of the 1,000 minted, the
    // ledger of record says `funded` went to the authority's bridge key and 500 came back, and
    // the authority's books hold the rest outstanding.
    let report: Value =
        serde_json::from_str(&run(&["audit", "supply", "--node", &sentinel, "--offline", &urls, "--json"]).unwrap())
            .unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["supply"]["issued"], "1000", "{report}");
    let outstanding = funded - 500;
    assert_eq!(
        report["supply"]["core_outputs"],
        (1000 - outstanding).to_string(),
        "{report}"
    );
    let row = &report["modes"][0];
    assert_eq!(
        (&row["role"], &row["key"], &row["core_says"], &row["books"]["holds"]),
        (
            &"bridge".into(),
            &Value::from(bridge.as_str()),
            &outstanding.to_string().into(),
            &outstanding.into()
        ),
        "{report}"
    );
}
