//! Fault tests of a real cluster on 127.0.0.1: under steady load, on a cluster of two coordinator
//! groups (the sentinel sends each in turn; every shard serves both), `kill -9` the leader of a
//! shard group and then of each coordinator group; service resumes (a new leader within 8 s), no
//! confirmed transaction is lost, no double spend is accepted, and the supply audit holds. A
//! replica cut off from its peers by a fault-injecting proxy while transactions commit catches
//! up once healed. A restart of the whole cluster restores the exact UHS. Snapshots are taken
//! every 200 entries, so restarts and catch-up cross snapshots.

use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use specie_cluster::Topology;

use crate::cluster_harness;

use cluster_harness::{
    assert_audit, digest, finish_demo, specie, start_cluster_with, start_demo, status, wire_client, Row, BIN,
};
/// A new leader must be reported within this: four times the longest election time-out (2 s).
/// Measured in this debug-build test with the demo loading the machine: 3.1–3.8 s before issue
/// 8's hosts and 3.1–4.2 s after, with one CI run at 5.3 s, so a 5 s bound only measured noise.
/// The failover time itself is measured by `specie bench cluster --kill-leader` in release builds.
const FAILOVER_LIMIT: Duration = Duration::from_secs(8);

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
            "{group}: no new leader after 20 s:\n{}",
            String::from_utf8_lossy(
                &Command::new(BIN)
                    .args(["cluster", "status", "--dir", dir])
                    .output()
                    .unwrap()
                    .stdout
            )
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A TCP relay to `target` on 127.0.0.1 that can be cut (existing connections reset, new ones
/// refused at once) and healed: the network between two replicas, under the test's control.
struct Link {
    address: SocketAddr,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Link {
    fn new(target: SocketAddr) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let link = Link {
            address: listener.local_addr().unwrap(),
            cut: Arc::new(AtomicBool::new(false)),
            open: Arc::new(Mutex::new(vec![])),
        };
        let (cut, open) = (link.cut.clone(), link.open.clone());
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { continue };
                if cut.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(outbound) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = (inbound.set_nodelay(true), outbound.set_nodelay(true));
                let mut open = open.lock().unwrap();
                open.push(inbound.try_clone().unwrap());
                open.push(outbound.try_clone().unwrap());
                for (mut from, mut to) in [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound, inbound),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = (from.shutdown(Shutdown::Both), to.shutdown(Shutdown::Both));
                    });
                }
            }
        });
        link
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        if cut {
            for stream in self.open.lock().unwrap().drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}

/// Links between the replicas of one group, by (from, to).
type Links = Vec<((u64, u64), Link)>;

/// Restarts `group`'s replicas so that every replica reaches every peer through its own
/// [`Link`]: replica i runs from a view of the topology in which peer j's address is the link
/// i→j. Returns the links by (from, to), and the replica processes (`cluster down` stops them,
/// through their pid files). Other roles still reach the replicas directly.
fn restart_group_behind_links(dir: &str, group: &str) -> (Links, Vec<Child>) {
    let topology_file = Path::new(dir).join("cluster.toml");
    let topology = Topology::load(&topology_file).unwrap();
    let replicas = topology
        .shard_groups
        .iter()
        .find(|g| g.name == group)
        .expect("the group")
        .replicas
        .clone();
    for row in status(dir).into_iter().filter(|r| r.group == group) {
        assert!(row.pid > 0, "no pid for {row:?}");
        kill(row.pid, "TERM");
        // Gone, or a zombie nobody has reaped yet.
        let running =
            || std::fs::read_to_string(format!("/proc/{}/stat", row.pid)).is_ok_and(|stat| !stat.contains(") Z "));
        while running() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (mut links, mut children) = (vec![], vec![]);
    for replica in &replicas {
        let mut view = topology.clone();
        let members = &mut view.shard_groups.iter_mut().find(|g| g.name == group).unwrap().replicas;
        for peer in members.iter_mut().filter(|p| p.id != replica.id) {
            let link = Link::new(peer.address);
            peer.address = link.address;
            links.push(((replica.id, peer.id), link));
        }
        let view_file: PathBuf = Path::new(dir).join(format!("view-{group}-{}.toml", replica.id));
        std::fs::write(&view_file, view.to_toml()).unwrap();
        let name = format!("{group}-{}", replica.id);
        let log = std::fs::File::create(Path::new(dir).join("logs").join(format!("{name}.view.log"))).unwrap();
        let child = Command::new(BIN)
            .args(["shard", "--cluster", view_file.to_str().unwrap(), "--group", group])
            .args(["--replica", &replica.id.to_string()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start a replica");
        // Under `cluster`'s management from here: status shows it, `cluster down` stops it.
        std::fs::File::create(Path::new(dir).join("pids").join(format!("{name}.pid")))
            .unwrap()
            .write_all(child.id().to_string().as_bytes())
            .unwrap();
        children.push(child);
    }
    (links, children)
}

/// Waits until `group` has a leader and replica `replica` has applied what the leader has.
fn wait_caught_up(dir: &str, group: &str, replica: u64, within: Duration) {
    let started = Instant::now();
    loop {
        let rows = status(dir);
        let leader_applied = rows
            .iter()
            .find(|r| r.group == group && r.role == "leader")
            .and_then(|r| r.applied);
        let applied = rows
            .iter()
            .find(|r| r.group == group && r.replica == replica)
            .and_then(|r| r.applied);
        if leader_applied.is_some() && applied >= leader_applied {
            return;
        }
        assert!(
            started.elapsed() < within,
            "{group} replica {replica} did not catch up: {rows:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn leader_kills_partition_and_restart_lose_nothing() {
    let (_temp, dir, base, _guard) = start_cluster_with(1, 2);
    let dir = dir.as_str();
    let sentinel = format!("http://127.0.0.1:{}", base + 12);
    // Frequent snapshots: the restarts and the catch-up below all cross one.
    specie(&["cluster", "down", "--dir", dir]);
    let topology_file = Path::new(dir).join("cluster.toml");
    let mut topology = Topology::load(&topology_file).unwrap();
    topology.limits.raft_snapshot_entries = 200;
    std::fs::write(&topology_file, topology.to_toml()).unwrap();
    specie(&["cluster", "up", "--dir", dir]);

    // 1. Leader kills under load.
    let demo = start_demo(dir, "12000", "1");
    std::thread::sleep(Duration::from_millis(1500));
    let shard_failover = kill_leader_and_time_failover(dir, "shard-0");
    std::thread::sleep(Duration::from_millis(1000));
    let coordinator_failover = kill_leader_and_time_failover(dir, "coordinator-0");
    std::thread::sleep(Duration::from_millis(1000));
    let second_coordinator_failover = kill_leader_and_time_failover(dir, "coordinator-1");
    let summary = finish_demo(demo);
    assert_audit(&summary);
    assert!(
        summary["confirmed_payments"].as_u64().unwrap() > 9_000,
        "both coordinator groups confirm: {summary}"
    );
    assert!(
        shard_failover < FAILOVER_LIMIT,
        "shard group failover took {shard_failover:?}"
    );
    assert!(
        coordinator_failover < FAILOVER_LIMIT && second_coordinator_failover < FAILOVER_LIMIT,
        "coordinator failovers took {coordinator_failover:?} and {second_coordinator_failover:?}"
    );
    eprintln!(
        "failover: shard group {shard_failover:?}, coordinator groups {coordinator_failover:?} and {second_coordinator_failover:?}"
    );

    // 2. Restart the killed replicas; put shard-1's replicas behind links, and cut one of them
    //    off from both its peers (both directions) while transactions commit.
    specie(&["cluster", "up", "--dir", dir, "--base-port", &base.to_string()]);
    let (links, relinked) = restart_group_behind_links(dir, "shard-1");
    let started = Instant::now();
    let cut_off = loop {
        if let Some(follower) = status(dir)
            .into_iter()
            .find(|r| r.group == "shard-1" && r.role == "follower")
        {
            break follower.replica;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "shard-1 has no follower");
        std::thread::sleep(Duration::from_millis(100));
    };
    let touches = |(from, to): (u64, u64)| from == cut_off || to == cut_off;
    for (_, link) in links.iter().filter(|(pair, _)| touches(*pair)) {
        link.set_cut(true);
    }
    let summary = finish_demo(start_demo(dir, "3000", "2"));
    assert_audit(&summary);
    let rows = status(dir);
    let behind = |rows: &[Row]| {
        let applied = |replica: u64| {
            rows.iter()
                .find(|r| r.group == "shard-1" && r.replica == replica)?
                .applied
        };
        let leader = rows.iter().find(|r| r.group == "shard-1" && r.role == "leader")?;
        Some(applied(cut_off) < leader.applied && leader.replica != cut_off)
    };
    assert_eq!(behind(&rows), Some(true), "the cut-off replica kept up: {rows:?}");
    for (_, link) in &links {
        link.set_cut(false);
    }
    wait_caught_up(dir, "shard-1", cut_off, Duration::from_secs(20));

    // 3. Restart the whole cluster: the UHS is exactly what it was.
    let before = digest(&sentinel);
    assert!(before["ids"].as_u64().unwrap() > 1000);
    specie(&["cluster", "down", "--dir", dir]);
    for mut child in relinked {
        child.wait().unwrap();
    }
    specie(&["cluster", "up", "--dir", dir]);
    assert_eq!(digest(&sentinel), before, "a full restart changed the UHS");
}

/// A mint of `value` by an issuer the cluster does not trust: what a compromised sentinel would
/// like committed.
fn forged_mint(value: u64) -> specie_transaction::SpecieTransaction {
    use specie_transaction::signing::NonceMode;
    use specie_transaction::{witness_program_commitment, MintTransaction, Output, SpecieTransaction};
    let stranger = secp256k1::Keypair::new_global(&mut rand::thread_rng());
    let output = Output {
        witness_program_commitment: witness_program_commitment(&specie_transaction::signing::xonly_bytes(&stranger)),
        value,
    };
    SpecieTransaction::Mint(MintTransaction::new_signed(
        rand::random(),
        vec![output],
        &stranger,
        NonceMode::Randomized,
    ))
}

/// Threshold endorsement in a real cluster (issue 12): three sentinels, which make their key
/// shares among themselves at first start, any two of which must sign every transaction, one of
/// them compromised (it validates nothing and endorses
/// everything). Valid payments confirm through the compromised sentinel and through an honest
/// one; a forged mint sent to the compromised one is refused by the other two (`not_endorsed`);
/// the compromised sentinel's own submissions straight to the coordinators, without an
/// endorsement or with one of another transaction, are refused; with an honest sentinel down,
/// payments still confirm (two of three remain) and the forgery still gets nowhere. The UHS
/// holds exactly what the valid payments made.
#[test]
fn one_compromised_sentinel_of_a_two_of_three_group_gets_no_forgery_committed() {
    use cluster_harness::offline_devices::{core_wallet, line_starting, wallet_address, wallet_balance};
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let base = cluster_harness::free_ports(12 + 1).to_string();
    let _down = cluster_harness::Down(dir.clone());
    let up = || {
        let shape = [
            "--shard-groups",
            "1",
            "--replicas",
            "1",
            "--sentinels",
            "3",
            "--endorsement",
            "2",
        ];
        cluster_harness::cluster_up(&dir, &base, &shape)
    };
    up();
    let file = Path::new(&dir).join("cluster.toml");
    let mut topology = Topology::load(&file).unwrap();
    let endorsement = topology
        .endorsement
        .clone()
        .expect("cluster up --endorsement writes [endorsement]");
    assert_eq!(endorsement.threshold, 2);
    let group_key = endorsement.group_key.expect("the group key the sentinels made");
    let urls: Vec<String> = topology
        .sentinels
        .iter()
        .map(|s| format!("http://{}", s.http))
        .collect();
    for url in &urls {
        let info: serde_json::Value = ureq::get(&format!("{url}/v1/info"))
            .call()
            .unwrap()
            .into_json()
            .unwrap();
        assert_eq!(info["endorsement_group_key"], group_key.as_str(), "{info}");
    }
    // Each sentinel made its own share (the distributed key generation); no tool of the
    // operator holds one.
    for sentinel in &topology.sentinels {
        let share = Path::new(&dir).join("data").join(&sentinel.name).join("endorser.key");
        assert!(share.exists(), "{}", share.display());
    }
    let status = String::from_utf8(specie(&["cluster", "status", "--dir", &dir]).stdout).unwrap();
    assert!(
        status.contains(&format!(
            "endorsement: 2 of 3 sentinels sign each transaction; group key {group_key}"
        )) && status.matches("  endorser 127.0.0.1:").count() == 3,
        "{status}"
    );
    let pki = std::fs::read_dir(Path::new(&dir).join("pki")).unwrap();
    assert!(pki
        .flatten()
        .all(|f| !f.file_name().to_string_lossy().contains("endorser")));

    // The issuer's key goes into the cluster file; sentinel 0 comes back compromised.
    let wallet = |name: &str| temp.path().join(name);
    let (issuer, alice, bob) = (wallet("issuer.json"), wallet("alice.json"), wallet("bob.json"));
    let created = core_wallet(&issuer, &["create", "--issuer", "--node", &urls[1]]);
    let issuer_key = line_starting(&created, "issuer public key: ").replace("issuer public key: ", "");
    specie(&["cluster", "down", "--dir", &dir]);
    topology.issuers = vec![issuer_key];
    std::fs::write(&file, topology.to_toml()).unwrap();
    up();
    cluster_harness::kill_9(&dir, "sentinel-0");
    let log = std::fs::File::create(Path::new(&dir).join("logs").join("sentinel-0.compromised.log")).unwrap();
    let mut compromised = Command::new(BIN)
        .args([
            "sentinel",
            "--cluster",
            file.to_str().unwrap(),
            "--name",
            "sentinel-0",
            "--compromised",
        ])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    std::fs::write(
        Path::new(&dir).join("pids").join("sentinel-0.pid"),
        compromised.id().to_string(),
    )
    .unwrap();
    let started = Instant::now();
    while ureq::get(&format!("{}/v1/info", urls[0])).call().is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the compromised sentinel did not start: {}",
            std::fs::read_to_string(Path::new(&dir).join("logs").join("sentinel-0.compromised.log"))
                .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Valid payments: minted through an honest sentinel, paid on through the compromised one.
    core_wallet(&alice, &["create", "--node", &urls[0]]);
    core_wallet(&bob, &["create", "--node", &urls[2]]);
    let minted = core_wallet(&issuer, &["mint", "1000", "--to", &wallet_address(&alice)]);
    core_wallet(&alice, &["import", &line_starting(&minted, "specie-pay1")]);
    core_wallet(&alice, &["send", &wallet_address(&bob), "100"]);
    let before = digest(&urls[1]);

    // The forgery, through the compromised sentinel: endorsers 2 and 3 refuse it.
    let results = cluster_harness::submit_results(&urls[0], &[forged_mint(1_000_000)]);
    assert_eq!(results[0]["status"], "invalid", "{results:?}");
    assert_eq!(results[0]["code"], "not_endorsed", "{results:?}");
    // Through an honest sentinel it never leaves the front door.
    let results = cluster_harness::submit_results(&urls[1], &[forged_mint(1_000_000)]);
    assert_eq!(results[0]["code"], "unknown_issuer", "{results:?}");
    assert_eq!(digest(&urls[1]), before, "nothing was committed");

    // The compromised sentinel submits to the coordinators itself, with its own credentials.
    bypass_the_endorsers(&topology);
    hostile_requests_to_an_endorser(&topology);
    assert_eq!(digest(&urls[1]), before, "nothing was committed");

    // An honest sentinel goes down: two of three remain, so payments confirm and forgeries fail.
    cluster_harness::kill_9(&dir, "sentinel-2");
    core_wallet(&alice, &["send", &wallet_address(&bob), "50"]);
    let results = cluster_harness::submit_results(&urls[0], &[forged_mint(1_000_000)]);
    assert_ne!(results[0]["status"], "confirmed", "{results:?}");
    let after = digest(&urls[1]);
    assert_eq!(
        after["count"].as_u64(),
        before["count"].as_u64().map(|count| count + 1),
        "one more payment (one id spent, change and payee created) and nothing else: {after}"
    );
    assert_eq!(wallet_balance(&alice, "spendable:"), 850);

    // The proactive refresh: every sentinel (the compromised one restarted honest, the one
    // killed started again) gets a new share of the same key, and payments go on under it.
    let share = |name: &str| Path::new(&dir).join("data").join(name).join("endorser.key");
    let old: Vec<String> = topology
        .sentinels
        .iter()
        .map(|s| std::fs::read_to_string(share(&s.name)).unwrap())
        .collect();
    let refreshed = String::from_utf8(specie(&["cluster", "refresh-endorsement", "--dir", &dir]).stdout).unwrap();
    assert!(
        refreshed.contains(&format!("group key {group_key} unchanged")),
        "{refreshed}"
    );
    for (sentinel, old) in topology.sentinels.iter().zip(&old) {
        assert_ne!(
            &std::fs::read_to_string(share(&sentinel.name)).unwrap(),
            old,
            "{} kept its share",
            sentinel.name
        );
    }
    assert_eq!(
        Topology::load(&file).unwrap().endorsement.and_then(|e| e.group_key),
        Some(group_key)
    );
    core_wallet(&alice, &["send", &wallet_address(&bob), "25"]);
    assert_eq!(wallet_balance(&alice, "spendable:"), 825);
    specie(&["cluster", "down", "--dir", &dir]);
    compromised.wait().unwrap();

    // A sentinel given another's share refuses to start, naming both.
    std::fs::copy(share("sentinel-2"), share("sentinel-1")).unwrap();
    let refused = cluster_harness::offline_devices::run(&[
        "sentinel",
        "--cluster",
        file.to_str().unwrap(),
        "--name",
        "sentinel-1",
    ]);
    let error = refused.expect_err("a sentinel with another's share must not start");
    assert!(
        error.contains("is endorser 3's share") && error.contains("is endorser 2"),
        "{error}"
    );
}

/// Sentinel 0's credentials (certificate and attestation key), used to submit a mint straight to
/// the coordinators: without an endorsement, and with an endorsement of another transaction.
fn bypass_the_endorsers(topology: &Topology) {
    use specie_cluster::group_client::GroupClient;
    use specie_cluster::protocol::{RoleRequest, Submission};
    use specie_cluster::{credentials, GroupRole, Identity};
    use specie_codec::Decode;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let transport = credentials::transport(topology, &Identity::sentinel("sentinel-0")).unwrap();
    let key = credentials::attestation_key(topology, "sentinel-0").unwrap();
    let group = &topology.coordinator_groups[0];
    let coordinators = GroupClient::new(
        GroupRole::Coordinator,
        &group.name,
        &group.replicas,
        &specie_wire::WireLimits::default(),
        &transport,
    )
    .unwrap();
    let mint = forged_mint(1_000_000).compact();
    // docs/endorsement-format.md's `single-endorsement-0`: a genuine endorsement, of another digest.
    let other = hex::decode(
        "01a43c0bf72b2cba376d14d7b9ececeefe7229fd9839286910c2c4bb9a1762b898f46d1e93639da316c795e9d5768c\
         ec455469eea333bd6cecdcbbdb009fa4709b010000000000000000",
    )
    .unwrap();
    let other = specie_endorsement::Endorsement::decode_exact(&other).unwrap();
    for submission in [
        Submission::attest(vec![mint.clone()], &key),
        Submission::attest_endorsed(vec![(mint.clone(), other)], &key),
    ] {
        let answer =
            runtime.block_on(coordinators.call_once(&RoleRequest::Submit(submission), Duration::from_secs(10)));
        let shown = format!("{answer:?}");
        assert!(shown.contains("refused") && shown.contains("endorse"), "{shown}");
    }
}

/// An honest sentinel's endorser port, asked by a member that is no sentinel (refused at
/// admission), and by the compromised sentinel with garbage, a request of another tag and a
/// signing round for a session it never opened: each refused or answered, nothing panics, and
/// the endorser goes on serving (the payments after this still confirm).
fn hostile_requests_to_an_endorser(topology: &Topology) {
    use specie_cluster::protocol::{tag, RoleRequest, RoleResponse};
    use specie_cluster::Identity;
    use specie_codec::Encode;
    use specie_endorsement::{AggregatorMessage, EndorserMessage};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let honest = &topology.sentinels[1];
    let endorser = honest.endorser.expect("an endorser address").to_string();
    let client = |identity: &Identity| wire_client(topology, identity, &endorser, &Identity::sentinel(&honest.name));
    let call =
        |client: &specie_wire::Client, bytes: Vec<u8>| runtime.block_on(client.call(bytes, Duration::from_secs(5)));
    let coordinator = client(&Identity::coordinator(&topology.coordinator_groups[0].name, 1));
    let refused = call(
        &coordinator,
        RoleRequest::Endorse(Box::new(AggregatorMessage::Commit { session: 1 })).encode(),
    );
    assert!(format!("{refused:?}").contains("not a sentinel"), "{refused:?}");
    let compromised = client(&Identity::sentinel("sentinel-0"));
    for garbage in [
        vec![tag::ENDORSE, 0xff, 0x00],
        vec![tag::ENDORSE],
        vec![tag::SUBMIT, 1, 2, 3],
        vec![0xee],
    ] {
        let answer = call(&compromised, garbage.clone());
        assert!(format!("{answer:?}").contains("Remote"), "{garbage:?}: {answer:?}");
    }
    // A signing round with no signers is refused by the decoder; a well-formed request is
    // still answered.
    let empty = AggregatorMessage::Sign {
        session: u64::MAX,
        items: vec![],
        package: specie_endorsement::frost::SigningPackage::new(Default::default(), &[0; 32]),
    };
    let answer = call(&compromised, RoleRequest::Endorse(Box::new(empty)).encode());
    assert!(format!("{answer:?}").contains("malformed"), "{answer:?}");
    let answer = call(
        &compromised,
        RoleRequest::Endorse(Box::new(AggregatorMessage::Commit { session: 42 })).encode(),
    );
    let commitments = RoleResponse::decode(&answer.unwrap()).unwrap();
    assert!(
        matches!(&commitments, RoleResponse::Endorser(m) if matches!(**m, EndorserMessage::Commitments { session: 42, .. })),
        "{commitments:?}"
    );
}

/// The ledger of record as a Raft group of the cluster (`cluster up --ledger-of-record`): the
/// audited demo runs while its leader is killed; a record whose sentinel never reported its
/// outcome is decided from the UHS (one committed straight through a coordinator, one never
/// submitted); strangers and garbage are refused; and through all of it, and after a restart of
/// the whole cluster, the ledger replays to exactly the UHS the shards hold.
#[test]
fn the_ledger_of_record_survives_its_leader_and_lost_reports_and_replays_to_the_uhs() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let base = cluster_harness::free_ports(10 + 3).to_string();
    let _down = cluster_harness::Down(dir.clone());
    let up = || {
        cluster_harness::cluster_up(
            &dir,
            &base,
            &["--replicas", "1", "--sentinels", "1", "--ledger-of-record"],
        )
    };
    up();
    let topology = decide_unreported_records_sooner(&dir);
    up();
    let sentinel = format!("http://{}", topology.sentinels[0].http);

    let demo = start_demo(&dir, "3000", "5");
    std::thread::sleep(Duration::from_millis(1500));
    kill_leader_and_time_failover(&dir, "archiver");
    assert_audit(&finish_demo(demo));
    // The killed replica comes back and catches up.
    up();

    let (committed, never_submitted) = write_ahead_two_and_submit_one(&topology);
    hostile_requests_to_the_archiver(&topology);
    let head = ledger_caught_up(&sentinel);
    assert!(head["height"].as_u64().unwrap() >= 1, "{head}");
    let found = ureq::get(&format!("{sentinel}/v1/ledger/transactions/{committed}"))
        .call()
        .unwrap()
        .into_json::<serde_json::Value>()
        .unwrap();
    assert_eq!(found["txid"], committed.as_str(), "{found}");
    let missing = ureq::get(&format!("{sentinel}/v1/ledger/transactions/{never_submitted}")).call();
    assert!(matches!(missing, Err(ureq::Error::Status(404, _))), "{missing:?}");

    // A whole restart: the replicas replay their logs to the same ledger.
    specie(&["cluster", "down", "--dir", &dir]);
    up();
    assert_eq!(ledger_caught_up(&sentinel), head);
}

/// How long a record nobody reported waits before the UHS decides it, in these tests (the
/// default is a minute). It must outlast any transaction in flight, or one still to commit is
/// decided "not committed" and left out: with 1 s, what a killed atomizer leader had proposed
/// (committed by the next leader seconds later) was, and a loaded machine (a build alongside)
/// took the demo's p99 latency to 13 s.
const DECIDE_UNREPORTED_AFTER_MS: u64 = 15_000;

/// Stops the cluster in `dir` and has its archivers decide records nobody reported after
/// [`DECIDE_UNREPORTED_AFTER_MS`]; returns its topology.
fn decide_unreported_records_sooner(dir: &str) -> Topology {
    specie(&["cluster", "down", "--dir", dir]);
    let topology_file = Path::new(dir).join("cluster.toml");
    let mut topology = Topology::load(&topology_file).unwrap();
    topology.ledger_of_record.as_mut().unwrap().decide_after_ms = DECIDE_UNREPORTED_AFTER_MS;
    std::fs::write(&topology_file, topology.to_toml()).unwrap();
    topology
}

/// Waits until the ledger has decided and sealed everything and replays to the shards' UHS;
/// returns its head.
fn ledger_caught_up(sentinel: &str) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let head: Option<serde_json::Value> = ureq::get(&format!("{sentinel}/v1/ledger"))
            .call()
            .ok()
            .and_then(|r| r.into_json().ok());
        let uhs = digest(sentinel);
        if let Some(head) = head {
            if head["undecided"] == 0
                && head["waiting"] == 0
                && head["uhs_ids"] == uhs["ids"]
                && head["uhs_sha256_sorted"] == uhs["sha256_sorted"]
            {
                return head;
            }
            assert!(
                started.elapsed() < Duration::from_millis(DECIDE_UNREPORTED_AFTER_MS) * 3,
                "the ledger {head} is not the UHS {uhs}"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// As sentinel 0: writes two mints ahead, has a coordinator commit one (the coordinator reports
/// it), and never submits the other (as a sentinel killed after its write-ahead would), which
/// the UHS decides. Their txids: committed, never submitted.
/// Before that, as a compromised sentinel would, submits one without writing it ahead, and
/// then another compact form under a written txid: the coordinator orders neither. The forged
/// form submitted beside the written one is answered busy, and the written one committed.
fn write_ahead_two_and_submit_one(topology: &Topology) -> (String, String) {
    use specie_cluster::group_client::GroupClient;
    use specie_cluster::protocol::{RoleRequest, RoleResponse, Submission, SubmitOutcome};
    use specie_cluster::{credentials, GroupRole, Identity};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let transport = credentials::transport(topology, &Identity::sentinel("sentinel-0")).unwrap();
    let key = credentials::attestation_key(topology, "sentinel-0").unwrap();
    let limits = specie_wire::WireLimits::default();
    let group = &topology.coordinator_groups[0];
    let coordinators = GroupClient::new(
        GroupRole::Coordinator,
        &group.name,
        &group.replicas,
        &limits,
        &transport,
    )
    .unwrap();
    let archiver = GroupClient::archiver(topology, &limits, &transport).unwrap().unwrap();
    let timeout = Duration::from_secs(10);
    let [committed, never] = [forged_mint(7), forged_mint(8)];
    let submit = |txs| {
        let submission = Submission::attest(txs, &key);
        runtime.block_on(coordinators.call_once(&RoleRequest::Submit(submission), timeout))
    };
    let bypass = submit(vec![committed.compact()]);
    assert!(format!("{bypass:?}").contains("not written ahead"), "{bypass:?}");
    let records = [&committed, &never]
        .map(|tx| specie_archiver::Record::new(tx.clone(), &tx.compact()).unwrap())
        .to_vec();
    let written = runtime.block_on(archiver.call_once(&RoleRequest::ArchiveWrite(records), timeout));
    assert!(matches!(written, Ok(RoleResponse::Taken)), "{written:?}");
    let mut swapped = never.compact();
    swapped.created = committed.compact().created;
    let refused = submit(vec![swapped.clone()]);
    assert!(format!("{refused:?}").contains("not written ahead"), "{refused:?}");
    // Had the forgery been ordered after the written one, the shards would have refused it as
    // creating what exists; busy says it was never ordered.
    let answer = submit(vec![committed.compact(), swapped]);
    assert!(
        matches!(&answer, Ok(RoleResponse::Submitted(outcomes)) if outcomes[..] == [SubmitOutcome::Confirmed, SubmitOutcome::Busy]),
        "{answer:?}"
    );
    (committed.txid().to_string(), never.txid().to_string())
}

/// The archiver's port, asked by members that may not write to it and with garbage: refused,
/// nothing panics, and the operator may read.
fn hostile_requests_to_the_archiver(topology: &Topology) {
    use specie_cluster::protocol::{tag, RoleRequest, RoleResponse};
    use specie_cluster::Identity;
    use specie_codec::Encode;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let replicas = &topology.ledger_of_record.as_ref().unwrap().replicas;
    let client = |identity: &Identity, replica: &specie_cluster::Replica| {
        wire_client(
            topology,
            identity,
            &replica.address.to_string(),
            &Identity::archiver(replica.id),
        )
    };
    let call =
        |client: &specie_wire::Client, bytes: Vec<u8>| runtime.block_on(client.call(bytes, Duration::from_secs(5)));
    let coordinator = Identity::coordinator(&topology.coordinator_groups[0].name, 1);
    for replica in replicas {
        // Sentinels write ahead; only what orders transactions reports their outcomes and asks
        // what is written ahead. Each is refused from the other, and garbage from either.
        let orderer = client(&coordinator, replica);
        let sentinel = client(&Identity::sentinel("sentinel-0"), replica);
        let refused = [
            call(&orderer, RoleRequest::ArchiveWrite(vec![]).encode()),
            call(&sentinel, RoleRequest::ArchiveOutcomes(vec![]).encode()),
            call(&sentinel, RoleRequest::WrittenAhead(vec![]).encode()),
        ];
        for refused in refused {
            assert!(format!("{refused:?}").contains("not authorised"), "{refused:?}");
        }
        let garbage = [
            (&sentinel, vec![tag::ARCHIVE_WRITE, 0xff]),
            (&orderer, vec![tag::ARCHIVE_OUTCOMES, 1, 0, 0, 0, 0, 0, 0, 0]),
            (&orderer, vec![tag::WRITTEN_AHEAD, 2, 0, 0, 0, 0, 0, 0, 0, 1]),
        ];
        for (client, garbage) in garbage {
            let answer = call(client, garbage.clone());
            assert!(format!("{answer:?}").contains("malformed"), "{garbage:?}: {answer:?}");
        }
        let operator = client(&Identity::Operator, replica);
        let read = call(
            &operator,
            RoleRequest::LedgerRead(specie_archiver::LedgerRead::Head).encode(),
        );
        let read = RoleResponse::decode(&read.unwrap()).unwrap();
        assert!(
            matches!(read, RoleResponse::Ledger(_) | RoleResponse::NotLeader(_)),
            "{read:?}"
        );
    }
}

/// The atomizer shape as a cluster (`cluster up --shape atomizer`): an atomizer group of three
/// replicas orders every transaction into blocks the two shard groups apply. The audited demo
/// runs while the atomizer's leader is killed; the ledger of record replays to exactly the UHS
/// the shards hold; the shards take blocks and attestation requests from the atomizer group
/// only; and a restart of the whole cluster comes back to the same UHS and ledger.
#[test]
fn the_atomizer_shape_orders_the_demo_through_a_leader_kill_and_replays_to_the_uhs() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let base = cluster_harness::free_ports(14 + 5).to_string();
    let _down = cluster_harness::Down(dir.clone());
    let up = || {
        cluster_harness::cluster_up(
            &dir,
            &base,
            &["--shape", "atomizer", "--sentinels", "1", "--ledger-of-record", "1"],
        )
    };
    up();
    let topology = decide_unreported_records_sooner(&dir);
    let started = String::from_utf8_lossy(&up().stdout).to_string();
    assert!(started.contains("shape: atomizer"), "{started}");
    assert!(topology.coordinator_groups.is_empty() && topology.atomizer.is_some());
    let sentinel = format!("http://{}", topology.sentinels[0].http);

    let demo = start_demo(&dir, "3000", "6");
    std::thread::sleep(Duration::from_millis(1500));
    kill_leader_and_time_failover(&dir, "atomizer");
    let summary = finish_demo(demo);
    assert_audit(&summary);
    assert_eq!(summary["ledger_of_record_replays_to_uhs"], true, "{summary}");
    assert_eq!(summary["shape"], "atomizer", "{summary}");
    // The killed replica comes back, and every replica of every group reaches the same height.
    up();
    let heights = atomizer_shape_caught_up(&dir);
    assert!(heights >= 2, "blocks sealed: {heights}");
    hostile_requests_to_an_atomizer_shard(&topology);

    let head = ledger_caught_up(&sentinel);
    // The atomizer reports what it decided: only what was in flight at its leader's kill went
    // unreported (and was decided from the UHS later).
    let (reported, unreported) = archiver_verdicts(&topology);
    assert!(
        reported > 1000 && reported > unreported,
        "{reported} reported, {unreported} not"
    );
    let uhs = digest(&sentinel);
    specie(&["cluster", "down", "--dir", &dir]);
    up();
    assert_eq!(digest(&sentinel), uhs);
    assert_eq!(ledger_caught_up(&sentinel), head);
    assert_eq!(atomizer_shape_caught_up(&dir), heights);
}

/// The verdicts every archiver replica proposed while it led, from its status (tag 6): on
/// records someone reported, and on records nobody did.
fn archiver_verdicts(topology: &Topology) -> (u64, u64) {
    use specie_cluster::protocol::{RoleRequest, RoleResponse};
    use specie_cluster::Identity;
    use specie_codec::Encode;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut verdicts = (0, 0);
    for replica in &topology.ledger_of_record.as_ref().unwrap().replicas {
        let server = Identity::archiver(replica.id);
        let client = wire_client(topology, &Identity::Operator, &replica.address.to_string(), &server);
        let answer = runtime.block_on(client.call(RoleRequest::Status.encode(), Duration::from_secs(5)));
        let RoleResponse::Status(json) = RoleResponse::decode(&answer.unwrap()).unwrap() else {
            panic!("a status answer")
        };
        let status: serde_json::Value = serde_json::from_str(&json).unwrap();
        verdicts.0 += status["ledger"]["verdicts_on_reported"].as_u64().unwrap();
        verdicts.1 += status["ledger"]["verdicts_on_unreported"].as_u64().unwrap();
    }
    verdicts
}

/// Waits until every atomizer and shard replica reports the same block height; returns it.
fn atomizer_shape_caught_up(dir: &str) -> u64 {
    let started = Instant::now();
    loop {
        let output = specie(&["cluster", "status", "--dir", dir]);
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let table = text.split("atomizer shape").nth(1).unwrap_or_default();
        let heights: Vec<&str> = table
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().nth(2))
            .collect();
        // 3 atomizer replicas and 2 shard groups of 3.
        if heights.len() == 9 && heights.iter().all(|h| *h == heights[0]) {
            return heights[0].parse().unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the shape never caught up:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A shard replica's port, asked by members that may not move it and with garbage: refused,
/// nothing panics, nothing moves.
fn hostile_requests_to_an_atomizer_shard(topology: &Topology) {
    use specie_atomizer::{ShardBlock, ShardMessage};
    use specie_cluster::protocol::{tag, RoleRequest};
    use specie_cluster::Identity;
    use specie_codec::Encode;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let group = &topology.shard_groups[0];
    let client = |identity: &Identity, replica: &specie_cluster::Replica| {
        let server = Identity::shard(&group.name, replica.id);
        wire_client(topology, identity, &replica.address.to_string(), &server)
    };
    let call =
        |client: &specie_wire::Client, bytes: Vec<u8>| runtime.block_on(client.call(bytes, Duration::from_secs(5)));
    // A block that would create an id out of nowhere: value from nothing, if a shard took it.
    let forged = RoleRequest::AtomizerShard(vec![ShardMessage::Block(ShardBlock {
        height: u64::MAX,
        spent: vec![],
        created: vec![specie_transaction::UhsId([1; 32])],
    })]);
    for replica in &group.replicas {
        for stranger in [Identity::sentinel("sentinel-0"), Identity::Operator] {
            let refused = call(&client(&stranger, replica), forged.encode());
            assert!(format!("{refused:?}").contains("not authorised"), "{refused:?}");
        }
        let atomizer = client(&Identity::atomizer(1), replica);
        // A 2PC batch is no request of this shape, even from the atomizer.
        let refused = call(&atomizer, RoleRequest::ShardBatch(vec![]).encode());
        assert!(format!("{refused:?}").contains("not authorised"), "{refused:?}");
        for garbage in [
            vec![tag::ATOMIZER_SHARD, 0xff],
            vec![tag::ATOMIZER_SHARD, 1, 0, 0, 0, 0, 0, 0, 0, 9],
        ] {
            let answer = call(&atomizer, garbage.clone());
            assert!(format!("{answer:?}").contains("malformed"), "{garbage:?}: {answer:?}");
        }
    }
}

/// `cluster up` on an existing cluster starts it as it is, or refuses a flag that asks for
/// another topology (nothing silently ignored); a process that dies at start (here: its port is
/// another cluster's) is reported at once with its log's last lines, not after a minute's wait;
/// and `status` does not count another cluster's processes on its ports as its own.
#[test]
fn cluster_up_refuses_to_reshape_and_reports_a_process_that_dies_at_start() {
    let work = tempfile::tempdir().unwrap();
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let _down = (
        cluster_harness::Down(a.to_string()),
        cluster_harness::Down(b.to_string()),
    );
    let base = cluster_harness::free_ports(4 + 1).to_string();
    let small = ["--replicas", "1", "--sentinels", "1", "--shard-groups", "1"];
    cluster_harness::cluster_up(a, &base, &small);
    let limit = Duration::from_secs(60);
    let (code, stderr) = cluster_harness::run_to_exit(&["cluster", "up", "--dir", a, "--shard-groups", "2"], limit);
    assert!(!code.success(), "{stderr}");
    assert!(
        stderr.contains("was made with --shard-groups 1")
            && stderr.contains("asks for --shard-groups 2")
            && stderr.contains("nothing was started"),
        "{stderr}"
    );
    // The same flags again, or none: it is the same cluster, started as it is.
    cluster_harness::cluster_up(a, &base, &small);
    specie(&["cluster", "up", "--dir", a]);

    // A second cluster on the same ports: its processes cannot listen, and `up` says so at once.
    let started = Instant::now();
    let mut second = vec!["cluster", "up", "--dir", b, "--base-port", &base];
    second.extend_from_slice(&small);
    let (code, stderr) = cluster_harness::run_to_exit(&second, limit);
    assert!(!code.success(), "{stderr}");
    assert!(
        stderr.contains("exited as it started") && stderr.contains(".log"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "reported after {:?}",
        started.elapsed()
    );
    let status = Command::new(BIN)
        .args(["cluster", "status", "--dir", b])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert_eq!(status.status.code(), Some(2), "{shown}");
    assert!(shown.contains("another process answers on its port"), "{shown}");
    assert!(Command::new(BIN)
        .args(["cluster", "status", "--dir", a])
        .output()
        .unwrap()
        .status
        .success());
}
