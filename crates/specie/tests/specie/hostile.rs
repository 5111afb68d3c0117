//! Hostile peers against a real cluster on 127.0.0.1. For every replica of every group: a
//! stranger without a certificate, one with a certificate from another CA, one with an expired
//! certificate, a certificate of a process the cluster does not have, valid certificates of the
//! wrong role, and valid peers sending out-of-protocol requests (the forged discard watermark,
//! forged and stolen sentinel attestations, garbage). Afterwards every process is alive, no state
//! changed (UHS digest, Raft terms), the refusals were counted, and the demo's audit passes.
//! Then the wallets' HTTP API of a real `specie node` under a flood of idle and drip-fed
//! connections keeps serving.

use crate::cluster_harness;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cluster_harness::{assert_audit, finish_demo, free_ports, start_cluster, start_demo};
use specie_cluster::credentials::{self, CA_CERT_FILE, CA_KEY_FILE};
use specie_cluster::group_client::GroupClient;
use specie_cluster::operator::{self, ReplicaStatus};
use specie_cluster::protocol::{RoleRequest, RoleResponse, Submission};
use specie_cluster::{GroupRole, Identity, Topology};
use specie_codec::Encode;
use specie_shard::{Refusal, ShardRequest, ShardResponse, ShardTx};
use specie_transaction::{CompactTransaction, Txid, UhsId};
use specie_wire::pki::{CertificateAuthority, PROCESS_VALIDITY};
use specie_wire::{Client, TlsCredentials, Transport, WireError, WireLimits};

const CALL: Duration = Duration::from_secs(3);

/// Credentials for `name`, issued by `ca`, trusting the cluster's CA certificate.
fn forged(ca_pem: &[u8], issued: &specie_wire::pki::Issued) -> Transport {
    Transport::MutualTls(Arc::new(
        TlsCredentials::from_pem(ca_pem, issued.cert_pem.as_bytes(), issued.key_pem.as_bytes()).unwrap(),
    ))
}

/// One replica to attack: its identity and address.
struct Target {
    identity: Identity,
    role: GroupRole,
    address: String,
}

fn targets(topology: &Topology) -> Vec<Target> {
    let shards = topology.shard_groups.iter().flat_map(|g| {
        g.replicas.iter().map(|r| Target {
            identity: Identity::shard(&g.name, r.id),
            role: GroupRole::Shard,
            address: r.address.to_string(),
        })
    });
    let coordinators = topology.coordinator_groups.iter().flat_map(|g| {
        g.replicas.iter().map(|r| Target {
            identity: Identity::coordinator(&g.name, r.id),
            role: GroupRole::Coordinator,
            address: r.address.to_string(),
        })
    });
    shards.chain(coordinators).collect()
}

/// A 2PC round that would create an id out of nothing: prepare and commit of a transaction that
/// spends nothing and creates `id`.
fn minting_batch(id: UhsId) -> RoleRequest {
    const DTXN: u64 = 1 << 60;
    RoleRequest::ShardBatch(vec![
        ShardRequest::Prepare {
            dtxn: DTXN,
            txs: vec![ShardTx {
                index: 0,
                spent: vec![],
                created: vec![id],
            }],
        },
        ShardRequest::Commit {
            dtxn: DTXN,
            complete: vec![true],
        },
    ])
}

/// A compact transaction creating `id` from nothing, as an outsider would submit it.
fn minting_tx(id: UhsId) -> CompactTransaction {
    CompactTransaction {
        txid: Txid(id.0),
        spent: vec![],
        created: vec![id],
        ..Default::default()
    }
}

/// An id owned by `topology`'s first shard group, unlike any a wallet makes.
fn forged_id(topology: &Topology, byte: u8) -> UhsId {
    let mut id = [byte; 32];
    id[..2].copy_from_slice(&topology.shard_groups[0].range[0].to_be_bytes());
    UhsId(id)
}

/// What a request to `target` as `transport` got back: it must not have been acted on.
async fn refused(target: &Target, transport: &Transport, request: &RoleRequest) -> String {
    let client = Client::new(
        target.address.clone(),
        target.identity.to_string(),
        WireLimits::default(),
        transport.clone(),
    )
    .unwrap();
    match client.call(request.encode(), CALL).await {
        Ok(bytes) => panic!(
            "{} acted on {}: {:?}",
            target.identity,
            request.kind(),
            RoleResponse::decode(&bytes)
        ),
        Err(error) => error.to_string(),
    }
}

fn statuses(runtime: &tokio::runtime::Runtime, topology: &Topology) -> Vec<ReplicaStatus> {
    runtime
        .block_on(operator::replica_statuses(topology, None, CALL))
        .unwrap()
}

/// Each replica's term, and the UHS digest as an honest sentinel sees it.
fn observed_state(runtime: &tokio::runtime::Runtime, topology: &Topology) -> (BTreeMap<String, u64>, String) {
    let terms = statuses(runtime, topology)
        .into_iter()
        .map(|s| {
            let status = s.status.unwrap_or_else(|e| panic!("{} {} is down: {e}", s.group, s.id));
            (format!("{}-{}", s.group, s.id), status["term"].as_u64().unwrap())
        })
        .collect();
    let backend =
        specie_cluster::sentinel::ClusterBackend::new(topology, runtime.handle().clone(), "sentinel-0").unwrap();
    let (count, digest) = specie_api::Backend::uhs_digest(&backend).unwrap();
    (terms, format!("{count}:{}", hex::encode(digest)))
}

#[test]
fn hostile_peers_change_nothing_and_crash_nothing() {
    let (_temp, dir, _, _guard) = start_cluster(2);
    let dir = dir.as_str();
    let topology = Topology::load(&Path::new(dir).join("cluster.toml")).unwrap();
    let pki = &topology.pki_dir;
    let ca_pem = std::fs::read(pki.join(CA_CERT_FILE)).unwrap();
    let ca = CertificateAuthority::from_key_pem(&std::fs::read_to_string(pki.join(CA_KEY_FILE)).unwrap()).unwrap();
    let other_ca = CertificateAuthority::generate().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Let the first elections settle so that terms only change if an attack changes them.
    std::thread::sleep(Duration::from_millis(1500));
    let before = observed_state(&runtime, &topology);

    let legit = |identity: &Identity| credentials::transport(&topology, identity).unwrap();
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let sentinel = Identity::sentinel("sentinel-0");
    let sentinel_key = credentials::attestation_key(&topology, "sentinel-0").unwrap();
    let other_sentinel_key = credentials::attestation_key(&topology, "sentinel-1").unwrap();
    let stranger_key = secp256k1::Keypair::new_global(&mut rand::thread_rng());
    let mint = minting_tx(forged_id(&topology, 0xab));

    runtime.block_on(async {
        for target in targets(&topology) {
            // The request that would do the damage, for this role.
            let damage = match target.role {
                GroupRole::Shard => minting_batch(forged_id(&topology, 0xcd)),
                GroupRole::Coordinator => RoleRequest::Submit(Submission::attest(vec![mint.clone()], &sentinel_key)),
                other => unreachable!("this 2PC cluster runs no {other} group"),
            };
            // The identity that may send it, and one of the wrong role.
            let (rightful, wrong_role) = match target.role {
                GroupRole::Shard => (Identity::coordinator("coordinator-0", 1), sentinel.clone()),
                GroupRole::Coordinator => (sentinel.clone(), Identity::shard("shard-0", 1)),
                other => unreachable!("this 2PC cluster runs no {other} group"),
            };
            let who = &target.identity;
            let strangers = [
                ("no certificate", Transport::InsecurePlaintext),
                (
                    "another CA",
                    forged(
                        &ca_pem,
                        &other_ca.issue(&rightful.to_string(), PROCESS_VALIDITY).unwrap(),
                    ),
                ),
                (
                    "an expired certificate",
                    forged(
                        &ca_pem,
                        &ca.issue_between(&rightful.to_string(), now - 2 * hour, now - hour)
                            .unwrap(),
                    ),
                ),
            ];
            for (what, transport) in strangers {
                // Refused in the handshake: a plaintext client reads the server's TLS alert as a
                // bad frame, a TLS client sees the handshake fail.
                let error = refused(&target, &transport, &damage).await;
                assert!(
                    !error.contains("not authorised"),
                    "{who}, {what}: got as far as a request: {error}"
                );
            }
            let not_a_member = match target.role {
                GroupRole::Shard => Identity::coordinator("coordinator-0", 9),
                GroupRole::Coordinator => Identity::sentinel("sentinel-9"),
                other => unreachable!("this 2PC cluster runs no {other} group"),
            };
            let error = refused(
                &target,
                &forged(&ca_pem, &ca.issue(&not_a_member.to_string(), PROCESS_VALIDITY).unwrap()),
                &damage,
            )
            .await;
            assert!(error.contains("not a member"), "{who}, non-member: {error}");
            let error = refused(&target, &legit(&wrong_role), &damage).await;
            assert!(error.contains("not authorised"), "{who}, wrong role: {error}");
            // Raft from outside the group: a vote request with an inflated term would depose the
            // leader; it is refused on its tag, before its bytes are even read.
            let vote = RoleRequest::Raft(vec![2; 64]);
            for outsider in [&rightful, &wrong_role, &Identity::Operator] {
                let error = refused(&target, &legit(outsider), &vote).await;
                assert!(error.contains("not authorised"), "{who}, raft from {outsider}: {error}");
            }
            // Garbage from a rightful peer: refused, not a crash.
            let client = Client::new(
                target.address.clone(),
                who.to_string(),
                WireLimits::default(),
                legit(&rightful),
            )
            .unwrap();
            for garbage in [
                vec![],
                vec![0xee],
                vec![2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
                vec![5; 40],
            ] {
                let answer = client.call(garbage.clone(), CALL).await;
                assert!(
                    matches!(answer, Err(WireError::Remote { .. })),
                    "{who}, {garbage:?}: {answer:?}"
                );
            }
        }

        // A valid sentinel whose submission is attested by a stranger's key, or by another
        // sentinel's stolen key: refused by the coordinator leader.
        let coordinator_group = &topology.coordinator_groups[0];
        let transport = legit(&sentinel);
        let coordinators = GroupClient::new(
            GroupRole::Coordinator,
            &coordinator_group.name,
            &coordinator_group.replicas,
            &WireLimits::default(),
            &transport,
        )
        .unwrap();
        for key in [&stranger_key, &other_sentinel_key] {
            let forged = RoleRequest::Submit(Submission::attest(vec![mint.clone()], key));
            let answer = coordinators.call_once(&forged, CALL).await;
            assert!(format!("{answer:?}").contains("refused"), "{answer:?}");
        }
        let mut tampered = Submission::attest(vec![mint.clone()], &sentinel_key);
        tampered.txs[0].created.push(forged_id(&topology, 0xef));
        let answer = coordinators.call_once(&RoleRequest::Submit(tampered), CALL).await;
        assert!(format!("{answer:?}").contains("refused"), "{answer:?}");

        // The coordinator's own out-of-protocol request: a discard whose watermark passes a
        // prepared, uncommitted dtxn. Before, every replica of the shard group panicked on it.
        let shard_group = &topology.shard_groups[0];
        let coordinator = legit(&Identity::coordinator(&coordinator_group.name, 1));
        let shards = GroupClient::new(
            GroupRole::Shard,
            &shard_group.name,
            &shard_group.replicas,
            &WireLimits::default(),
            &coordinator,
        )
        .unwrap();
        let dtxn = 1 << 61;
        let forged_watermark = RoleRequest::ShardBatch(vec![
            ShardRequest::Prepare {
                dtxn,
                txs: vec![ShardTx {
                    index: 0,
                    spent: vec![],
                    created: vec![forged_id(&topology, 0x77)],
                }],
            },
            ShardRequest::Discard {
                dtxn: dtxn + 1,
                finished_below: dtxn + 2,
            },
        ]);
        match shards.call(&forged_watermark, CALL).await.unwrap() {
            RoleResponse::ShardBatch(answers) => assert_eq!(
                answers[1],
                ShardResponse::Refused {
                    dtxn: dtxn + 1,
                    reason: Refusal::WatermarkPassesUncommitted
                }
            ),
            other => panic!("{other:?}"),
        }
        // Release what the prepare locked, creating nothing, so the UHS is as before.
        let release = RoleRequest::ShardBatch(vec![
            ShardRequest::Commit {
                dtxn,
                complete: vec![false],
            },
            ShardRequest::Discard {
                dtxn,
                finished_below: 0,
            },
        ]);
        shards.call(&release, CALL).await.unwrap();
    });

    // Every process is alive and nothing changed.
    let (terms_after, digest_after) = observed_state(&runtime, &topology);
    assert_eq!(digest_after, before.1, "an attack changed the UHS");
    for (replica, term) in &terms_after {
        // A loaded machine may hold an election or two on its own; a forged vote request with
        // an inflated term would have moved terms far more.
        assert!(
            *term <= before.0[replica] + 3,
            "{replica}: term {} -> {term}",
            before.0[replica]
        );
    }
    let refused_counts = statuses(&runtime, &topology)
        .into_iter()
        .map(|s| s.status.unwrap()["refused"].clone())
        .collect::<Vec<_>>();
    let total = |key: &str| refused_counts.iter().map(|r| r[key].as_u64().unwrap()).sum::<u64>();
    assert!(total("handshakes_failed") >= 3 * 9, "{refused_counts:?}");
    assert!(total("peers_refused") >= 9, "{refused_counts:?}");
    assert!(total("requests_refused") >= 9 * 4, "{refused_counts:?}");

    // And it keeps serving: the demo's workload and audit pass.
    assert_audit(&finish_demo(start_demo(dir, "3000", "7")));
}

/// Opens a connection and sends `bytes`, keeping it open.
fn open(address: &str, bytes: &[u8]) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(address).ok()?;
    let _ = stream.write_all(bytes);
    Some(stream)
}

/// A plain HTTP/1.1 GET of /v1/info; the status line, or why there is none.
fn get_info(address: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(address).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    stream
        .write_all(b"GET /v1/info HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .lines()
        .next()
        .map(str::to_string)
        .ok_or_else(|| "no answer".to_string())
}

#[test]
fn the_http_api_keeps_serving_through_idle_and_drip_fed_floods() {
    let temp = tempfile::tempdir().unwrap();
    let address = format!("127.0.0.1:{}", free_ports(1));
    let mut node: Child = Command::new(cluster_harness::BIN)
        .args([
            "node",
            "--data-dir",
            temp.path().to_str().unwrap(),
            "--listen",
            &address,
            "--http-connections-max",
            "32",
            "--http-header-timeout-ms",
            "500",
            "--http-idle-timeout-ms",
            "1000",
            "--http-body-timeout-ms",
            "500",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while get_info(&address).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "node did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // 200 connections that say nothing, 50 that drip a header, 50 that send headers and then
    // withhold the body: far more than the 32 the node serves at once.
    let mut flood: Vec<TcpStream> = (0..200).filter_map(|_| open(&address, b"")).collect();
    flood.extend((0..50).filter_map(|_| open(&address, b"GET /v1/info HTTP/1.1\r\nhost: ")));
    flood.extend((0..50).filter_map(|_| {
        open(
            &address,
            b"POST /v1/uhs/query HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        )
    }));
    // Those over the cap were told so at once; the rest are cut off by their time-outs, and
    // an honest client is served again within about one idle time-out, while the flood's
    // sockets are all still open on the attacker's side.
    let flooded = Instant::now();
    let served = loop {
        match get_info(&address) {
            Ok(line) if line.contains("200") => break flooded.elapsed(),
            Ok(line) => assert!(line.contains("503"), "{line}"),
            Err(_) => {}
        }
        assert!(flooded.elapsed() < Duration::from_secs(10), "the node stopped serving");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(node.try_wait().unwrap().is_none(), "the node died");
    drop(flood);
    let _ = node.kill();
    let _ = node.wait();
    eprintln!("honest client served {served:?} after the flood began");
}
