//! The exchange as a Raft group of three replica processes in a cluster (`specie cluster up
//! --exchange`), over the cluster's mutual TLS: it trades the cluster's own currency (usd, whose
//! deposits it finds in the shards' UHS itself) and eur (minted by a separate core it asks over
//! HTTP). Traders deposit, then trade under load while the group's leader is killed with SIGKILL;
//! the load follows the group's `not_leader` answers to the new leader, nothing answered is lost,
//! the restarted replica catches up to the identical height and state hash, the trader's CLI
//! finds the leader among the replicas' URLs, and a withdrawal is paid by the cluster's core once.
//! The killed replica is then replaced under load (`cluster replace-replica`): nothing answered
//! is lost and the three replicas agree.

use crate::cluster_harness;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_harness::exchange_traders::{
    assert_included_kept, deposit_all, fund_exchange, height, issuer_hex, run_load, summary, withdraw_once,
};
use cluster_harness::{free_ports, group_roles, kill_9, replace_replica, specie, start_serving, Down};
use specie_cluster::Topology;

/// The exchange group's rows of `cluster status`: (replica, role).
fn exchange_roles(dir: &str) -> Vec<(u64, String)> {
    group_roles(dir, specie_cluster::EXCHANGE_GROUP)
}

/// Each exchange replica's (height, state hash) that answered `cluster status`.
fn replica_ledgers(dir: &str) -> Vec<(String, String)> {
    let out = specie(&["cluster", "status", "--dir", dir]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip_while(|line| !(line.starts_with("exchange ") && line.ends_with("state hash")))
        .skip(1)
        .take_while(|line| line.starts_with(specie_cluster::EXCHANGE_GROUP))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields[2].to_string(), fields[5].to_string())
        })
        .collect()
}

/// The API of the replica that leads, once one does.
fn leader_url(dir: &str, topology: &Topology) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leading = exchange_roles(dir).into_iter().find(|(_, role)| role == "leader");
        if let Some((id, _)) = leading {
            let replica = topology.exchange.as_ref().unwrap().replicas.iter().find(|r| r.id == id);
            return format!("http://{}", replica.unwrap().http);
        }
        assert!(Instant::now() < deadline, "the exchange group elected no leader");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_exchange_group_survives_losing_its_leader_and_its_replicas_agree() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    // Two shard groups, a coordinator and a sentinel (one port each), three exchange replicas
    // (two each), then the eur core.
    // The core's 4 ports, the exchange's 6, the core replicas' 3 metrics ports, then eur's.
    let base = free_ports(4 + 6 + 3 + 1);
    let eur_listen = format!("127.0.0.1:{}", base + 13);
    let eur_asset = format!("eur=http://{eur_listen}");
    specie(&[
        "cluster",
        "up",
        "--dir",
        &dir,
        "--base-port",
        &base.to_string(),
        "--replicas",
        "1",
        "--sentinels",
        "1",
        "--exchange",
        "--exchange-asset",
        &eur_asset,
        "--issuer",
        &issuer_hex("usd"),
    ]);
    let topology = Topology::load(&Path::new(&dir).join("cluster.toml")).unwrap();
    let exchange = topology.exchange.clone().unwrap();
    let bridge = exchange.bridge_key().unwrap();
    let sentinel = format!("http://{}", topology.sentinels[0].http);
    let eur_dir = temp.path().join("eur");
    let (mut eur, eur_url) = start_serving(&[
        "node",
        "--listen",
        &eur_listen,
        "--hrp",
        "eur",
        "--issuer",
        &issuer_hex("eur"),
        "--exchange",
        &hex::encode(bridge),
        "--data-dir",
        eur_dir.to_str().unwrap(),
    ]);

    // Deposits: usd funded through the cluster's sentinel, eur through its own core.
    let usd_fundings = fund_exchange(&sentinel, "usd", &bridge);
    let eur_fundings = fund_exchange(&eur_url, "eur", &bridge);
    let url = leader_url(&dir, &topology);
    let (id, _, _) = summary(&url);
    deposit_all(&url, "usd", &usd_fundings);
    deposit_all(&url, "eur", &eur_fundings);

    // Load over every replica's API, and kill -9 the leader in the middle of it.
    let urls_at_start: Vec<String> = exchange.replicas.iter().map(|r| format!("http://{}", r.http)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (urls, stop) = (Arc::new(Mutex::new(urls_at_start.clone())), stop.clone());
        std::thread::spawn(move || run_load(urls, id, stop))
    };
    std::thread::sleep(Duration::from_millis(1_500));
    let (old_leader, _) = exchange_roles(&dir)
        .into_iter()
        .find(|(_, role)| role == "leader")
        .unwrap();
    let (_, height_at_kill, _) = summary(&url);
    kill_9(&dir, &format!("{}-{old_leader}", specie_cluster::EXCHANGE_GROUP));
    // Another replica leads (Raft elects one in one to two election time-outs), and the load,
    // following it, makes blocks again.
    let url = leader_url(&dir, &topology);
    let (new_leader, _) = exchange_roles(&dir)
        .into_iter()
        .find(|(_, role)| role == "leader")
        .unwrap();
    assert_ne!(new_leader, old_leader, "another replica leads");
    let deadline = Instant::now() + Duration::from_secs(20);
    while height(&url).is_none_or(|height| height < height_at_kill + 3) {
        assert!(Instant::now() < deadline, "no blocks after the leader was killed");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    assert_included_kept(&url, &load.join().unwrap());

    // The killed replica restarts and catches up: every replica at one height and state hash.
    specie(&["cluster", "up", "--dir", &dir]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ledgers = replica_ledgers(&dir);
        if ledgers.len() == 3 && ledgers.iter().all(|l| *l == ledgers[0]) {
            let (_, height, state_hash) = summary(&url);
            assert_eq!(ledgers[0], (height.to_string(), state_hash));
            break;
        }
        assert!(Instant::now() < deadline, "the replicas disagree: {ledgers:?}");
        std::thread::sleep(Duration::from_millis(300));
    }

    // The replica that was killed is replaced under load: a new one joins and catches up, the
    // old id is retired, the load follows, nothing answered is lost, and three replicas agree.
    let urls = Arc::new(Mutex::new(urls_at_start.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (urls, stop) = (urls.clone(), stop.clone());
        std::thread::spawn(move || run_load(urls, id, stop))
    };
    std::thread::sleep(Duration::from_millis(500));
    let group = specie_cluster::EXCHANGE_GROUP;
    let new_id = replace_replica(&dir, group, old_leader);
    let topology = Topology::load(&Path::new(&dir).join("cluster.toml")).unwrap();
    let new_replica = topology
        .exchange
        .as_ref()
        .unwrap()
        .replicas
        .iter()
        .find(|r| r.id == new_id)
        .unwrap();
    urls.lock().unwrap().push(format!("http://{}", new_replica.http));
    std::thread::sleep(Duration::from_millis(1_000));
    stop.store(true, Ordering::Relaxed);
    let url = leader_url(&dir, &topology);
    assert_included_kept(&url, &load.join().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ledgers = replica_ledgers(&dir);
        if ledgers.len() == 3 && ledgers.iter().all(|l| *l == ledgers[0]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replicas disagree after the replacement: {ledgers:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // The trader's CLI, given every replica's API as the cluster started, finds the leader (the
    // first URL may be a follower, or the replica that was replaced).
    let cli = specie(&["exchange", "last-block", "--exchange", &exchange.http_urls(), "--json"]);
    let last: serde_json::Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(last["height"].as_u64(), Some(summary(&url).1), "{last}");

    // A withdrawal of usd: its payout is paid by the cluster's core once.
    withdraw_once(&url, &id, &sentinel);
    eur.kill().unwrap();
    eur.wait().unwrap();
}
