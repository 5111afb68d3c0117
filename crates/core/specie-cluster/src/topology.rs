use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use specie_api::http_server::HttpLimitError;
use specie_fastpay::{Committee, CommitteeError};
use specie_shard::{ShardRange, ShardRangeError};

use crate::identity::GroupRole;

pub const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub format_version: u32,
    /// Bech32 address prefix of the currency.
    pub hrp: String,
    /// x-only issuer public keys (hex) allowed to mint and redeem.
    #[serde(default)]
    pub issuers: Vec<String>,
    /// The FastPay committee the cluster is the Primary of: its sentinels accept fundings to it
    /// and redeems of its certificates. Absent: every FastPay funding and redeem is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastpay_committee: Option<FastpayCommitteeConfig>,
    /// Where each replica keeps its log and snapshots: `<data_dir>/<group>-<replica>/`.
    pub data_dir: PathBuf,
    /// The cluster's PKI: `ca.crt` (the CA every process's certificate must chain to) and, per
    /// process, `<identity>.crt` and `<identity>.key` (mode 0600), plus each sentinel's
    /// `<identity>.attestation.key`. See docs/operator-guide.md to bring your own CA.
    pub pki_dir: PathBuf,
    /// How processes connect: `mutual-tls` (the default), or `insecure-plaintext`, which turns off
    /// authentication and authorisation and exists only to measure what TLS costs.
    #[serde(default)]
    pub transport: TransportMode,
    #[serde(default)]
    pub limits: Limits,
    /// Limits of every sentinel's HTTP API: connections, header, body and idle time-outs.
    #[serde(default)]
    pub http: specie_api::HttpLimits,
    pub shard_groups: Vec<ShardGroup>,
    pub coordinator_groups: Vec<ReplicaGroup>,
    pub sentinels: Vec<Sentinel>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportMode {
    #[default]
    MutualTls,
    InsecurePlaintext,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub frame_bytes_max: u32,
    pub requests_in_flight_max: u32,
    pub request_timeout_ms: u64,
    pub batch_transactions_max: u32,
    pub dtxns_in_flight_max: u32,
    pub reconnect_backoff_ms_max: u64,
    pub raft_heartbeat_ms: u64,
    pub raft_election_timeout_ms: u64,
    /// A replica snapshots its state and compacts its log after this many entries.
    pub raft_snapshot_entries: u64,
    /// A peer must finish its TLS handshake within this long.
    #[serde(default = "default_handshake_timeout_ms")]
    pub handshake_timeout_ms: u64,
    /// TLS handshakes under way at once per process; further strangers are closed unread.
    #[serde(default = "default_handshakes_max")]
    pub handshakes_max: u32,
}

fn default_handshake_timeout_ms() -> u64 {
    specie_wire::WireLimits::default().handshake_timeout_ms
}

fn default_handshakes_max() -> u32 {
    specie_wire::WireLimits::default().handshakes_max as u32
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            frame_bytes_max: 64 * 1024 * 1024,
            requests_in_flight_max: 256,
            request_timeout_ms: 2_000,
            batch_transactions_max: 2_000,
            dtxns_in_flight_max: 4,
            reconnect_backoff_ms_max: 1_000,
            // openraft also uses the heartbeat interval as the time-out of one append-entries
            // RPC, which must cover a large batch plus a follower's fsync on a loaded machine:
            // at 100 ms, failovers under load stalled (docs/bench-cluster.md).
            raft_heartbeat_ms: 250,
            raft_election_timeout_ms: 1_000,
            // Bounds a log to about this many batches (coordinator entries carry whole dtxns);
            // a shard's snapshot is its whole UHS, so much smaller values cost write bandwidth.
            raft_snapshot_entries: 1_000,
            handshake_timeout_ms: default_handshake_timeout_ms(),
            handshakes_max: default_handshakes_max(),
        }
    }
}

/// A FastPay committee as the cluster file lists it (`[fastpay_committee]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastpayCommitteeConfig {
    pub epoch: u64,
    /// The authorities' Ed25519 public keys, hex, in committee order (authority 0 first).
    pub members: Vec<String>,
}

impl FastpayCommitteeConfig {
    /// The committee, with every key checked as `Committee::new` checks it.
    pub fn committee(&self) -> Result<Committee, InvalidTopology> {
        let members = self
            .members
            .iter()
            .enumerate()
            .map(|(index, member)| {
                let bytes = hex::decode(member)
                    .ok()
                    .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok());
                bytes.ok_or_else(|| InvalidTopology::FastpayMemberNotHex {
                    index,
                    member: member.chars().take(80).collect(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Committee::new(self.epoch, members).map_err(InvalidTopology::FastpayCommittee)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardGroup {
    pub name: String,
    /// First and last owned bucket (the first two bytes of a UHS id, big-endian), inclusive.
    pub range: [u16; 2],
    pub replicas: Vec<Replica>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaGroup {
    pub name: String,
    pub replicas: Vec<Replica>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replica {
    /// Raft node id, unique within its group, at least 1.
    pub id: u64,
    /// Where the replica serves other roles and its Raft peers (framed binary protocol).
    pub address: SocketAddr,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sentinel {
    pub name: String,
    /// The wallets' HTTP/JSON API (docs/api.md).
    pub http: SocketAddr,
    /// The x-only public key (hex) whose signature coordinators require on this sentinel's
    /// submissions; the secret key is `<pki_dir>/<identity>.attestation.key`.
    pub attestation_key: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {problem}")]
    Invalid {
        path: String,
        #[source]
        problem: InvalidTopology,
    },
}

/// Why a topology cannot run (or a shape cannot become one): each names the field at fault.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopology {
    #[error("format_version {found} is not supported (expected {})", FORMAT_VERSION)]
    UnsupportedFormat { found: u32 },
    #[error("a cluster needs at least one shard group, one coordinator group and one sentinel")]
    MissingRole,
    #[error("shard group ranges: {0}")]
    ShardRanges(#[source] ShardRangeError),
    #[error("issuer '{issuer}' is not a 32-byte x-only public key in hex")]
    BadIssuer { issuer: String },
    #[error("fastpay_committee.members[{index}] '{member}' is not a 32-byte Ed25519 public key in hex")]
    FastpayMemberNotHex { index: usize, member: String },
    #[error("fastpay_committee: {0}")]
    FastpayCommittee(#[source] CommitteeError),
    #[error("sentinel '{sentinel}': attestation_key is not a 32-byte x-only public key in hex")]
    BadAttestationKey { sentinel: String },
    #[error("{sentinels} sentinels need as many attestation keys, got {keys}")]
    AttestationKeyCount { sentinels: usize, keys: usize },
    #[error("http: {0}")]
    Http(#[source] HttpLimitError),
    #[error("limits.{name} must be positive")]
    ZeroLimit { name: &'static str },
    #[error("limits.raft_election_timeout_ms must be at least 3 × raft_heartbeat_ms")]
    ElectionTimeoutTooShort {
        raft_election_timeout_ms: u64,
        raft_heartbeat_ms: u64,
    },
    /// Group and sentinel names become labels of certificate names (`1.shard-0.shard.specie`).
    #[error(
        "name '{name}' must be 1-63 lowercase letters, digits or '-', not starting or ending with '-' \
         (it becomes part of the process's certificate name)"
    )]
    NotADnsLabel { name: String },
    #[error("group name '{name}' is used twice")]
    GroupNameTwice { name: String },
    #[error("name '{name}' is used twice")]
    SentinelNameTwice { name: String },
    #[error("group '{group}' has {replicas} replicas; use 1 to 7 (3 or 5 tolerate 1 or 2 failures)")]
    ReplicaCount { group: String, replicas: usize },
    #[error("group '{group}': replica ids must be unique and at least 1")]
    ReplicaIds { group: String },
    #[error("address {address} is used twice")]
    AddressTwice { address: SocketAddr },
}

/// A group name the cluster file does not list.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the cluster file has no {role} group named '{name}'")]
pub struct UnknownGroup {
    pub role: GroupRole,
    pub name: String,
}

/// The shape `specie cluster up` creates when given no file.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub shard_groups: usize,
    pub coordinator_groups: usize,
    pub replicas: usize,
    pub sentinels: usize,
    /// First port; every role takes the next free one in order.
    pub base_port: u16,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            shard_groups: 2,
            coordinator_groups: 1,
            replicas: 3,
            sentinels: 2,
            base_port: 18_470,
        }
    }
}

impl Shape {
    /// The name `Topology::local` gives the `index`-th sentinel.
    pub fn sentinel_name(index: usize) -> String {
        format!("sentinel-{index}")
    }
}

impl Topology {
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Read {
            path: shown.clone(),
            source,
        })?;
        let topology: Topology = toml::from_str(&text).map_err(|e| TopologyError::Parse {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        topology
            .validate()
            .map_err(|problem| TopologyError::Invalid { path: shown, problem })?;
        Ok(topology)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a topology serializes")
    }

    /// A local topology on 127.0.0.1 with consecutive ports, its data and PKI under `dir`, and
    /// one attestation key (x-only hex) per sentinel.
    pub fn local(
        shape: Shape,
        dir: &Path,
        issuers: Vec<String>,
        attestation_keys: Vec<String>,
    ) -> Result<Topology, InvalidTopology> {
        if attestation_keys.len() != shape.sentinels {
            return Err(InvalidTopology::AttestationKeyCount {
                sentinels: shape.sentinels,
                keys: attestation_keys.len(),
            });
        }
        let ranges = ShardRange::partition(shape.shard_groups).map_err(InvalidTopology::ShardRanges)?;
        let mut port = shape.base_port;
        let mut next = || {
            let address = SocketAddr::from(([127, 0, 0, 1], port));
            port = port.checked_add(1).expect("ports fit");
            address
        };
        let mut replicas = |count: usize| {
            (1..=count as u64)
                .map(|id| Replica { id, address: next() })
                .collect::<Vec<_>>()
        };
        let shard_groups = ranges
            .iter()
            .enumerate()
            .map(|(i, range)| ShardGroup {
                name: format!("shard-{i}"),
                range: [range.first, range.last],
                replicas: replicas(shape.replicas),
            })
            .collect();
        let coordinator_groups = (0..shape.coordinator_groups)
            .map(|i| ReplicaGroup {
                name: format!("coordinator-{i}"),
                replicas: replicas(shape.replicas),
            })
            .collect();
        let sentinels = attestation_keys
            .into_iter()
            .enumerate()
            .map(|(i, attestation_key)| Sentinel {
                name: Shape::sentinel_name(i),
                http: next(),
                attestation_key,
            })
            .collect();
        let topology = Topology {
            format_version: FORMAT_VERSION,
            hrp: "usd".into(),
            issuers,
            fastpay_committee: None,
            data_dir: dir.join("data"),
            pki_dir: dir.join("pki"),
            transport: TransportMode::default(),
            limits: Limits::default(),
            http: specie_api::HttpLimits::default(),
            shard_groups,
            coordinator_groups,
            sentinels,
        };
        topology.validate()?;
        Ok(topology)
    }

    pub fn shard_group(&self, name: &str) -> Result<&ShardGroup, UnknownGroup> {
        let found = self.shard_groups.iter().find(|g| g.name == name);
        found.ok_or_else(|| UnknownGroup {
            role: GroupRole::Shard,
            name: name.to_string(),
        })
    }

    pub fn coordinator_group(&self, name: &str) -> Result<&ReplicaGroup, UnknownGroup> {
        let found = self.coordinator_groups.iter().find(|g| g.name == name);
        found.ok_or_else(|| UnknownGroup {
            role: GroupRole::Coordinator,
            name: name.to_string(),
        })
    }

    /// Every sentinel's attestation key, by name (validated by [`Topology::validate`]).
    pub fn sentinel_keys(&self) -> crate::protocol::SentinelKeys {
        self.sentinels
            .iter()
            .filter_map(|s| Some((s.name.clone(), xonly_hex(&s.attestation_key)?)))
            .collect()
    }

    pub fn shard_ranges(&self) -> Vec<ShardRange> {
        self.shard_groups
            .iter()
            .map(|g| ShardRange {
                first: g.range[0],
                last: g.range[1],
            })
            .collect()
    }

    /// Checks everything a process would otherwise trip over at run time.
    pub fn validate(&self) -> Result<(), InvalidTopology> {
        if self.format_version != FORMAT_VERSION {
            return Err(InvalidTopology::UnsupportedFormat {
                found: self.format_version,
            });
        }
        if self.shard_groups.is_empty() || self.coordinator_groups.is_empty() || self.sentinels.is_empty() {
            return Err(InvalidTopology::MissingRole);
        }
        ShardRange::check_cover(&self.shard_ranges()).map_err(InvalidTopology::ShardRanges)?;
        if let Some(issuer) = self.issuers.iter().find(|issuer| xonly_hex(issuer).is_none()) {
            return Err(InvalidTopology::BadIssuer { issuer: issuer.clone() });
        }
        if let Some(committee) = &self.fastpay_committee {
            committee.committee()?;
        }
        if let Some(sentinel) = self.sentinels.iter().find(|s| xonly_hex(&s.attestation_key).is_none()) {
            return Err(InvalidTopology::BadAttestationKey {
                sentinel: sentinel.name.clone(),
            });
        }
        self.http.validate().map_err(InvalidTopology::Http)?;
        self.limits.validate()?;
        self.validate_names_and_addresses()
    }

    /// Group and sentinel names are DNS labels used once; replica ids are unique per group;
    /// every address is used once.
    fn validate_names_and_addresses(&self) -> Result<(), InvalidTopology> {
        let mut names = BTreeSet::new();
        let mut addresses = BTreeSet::new();
        let groups = self
            .shard_groups
            .iter()
            .map(|g| (&g.name, &g.replicas))
            .chain(self.coordinator_groups.iter().map(|g| (&g.name, &g.replicas)));
        for (name, replicas) in groups {
            dns_label(name)?;
            if !names.insert(name.clone()) {
                return Err(InvalidTopology::GroupNameTwice { name: name.clone() });
            }
            if replicas.is_empty() || replicas.len() > 7 {
                return Err(InvalidTopology::ReplicaCount {
                    group: name.clone(),
                    replicas: replicas.len(),
                });
            }
            let mut ids = BTreeSet::new();
            for replica in replicas {
                if replica.id == 0 || !ids.insert(replica.id) {
                    return Err(InvalidTopology::ReplicaIds { group: name.clone() });
                }
                if !addresses.insert(replica.address) {
                    return Err(InvalidTopology::AddressTwice {
                        address: replica.address,
                    });
                }
            }
        }
        for sentinel in &self.sentinels {
            dns_label(&sentinel.name)?;
            if !names.insert(sentinel.name.clone()) {
                return Err(InvalidTopology::SentinelNameTwice {
                    name: sentinel.name.clone(),
                });
            }
            if !addresses.insert(sentinel.http) {
                return Err(InvalidTopology::AddressTwice { address: sentinel.http });
            }
        }
        Ok(())
    }
}

impl Limits {
    /// Zeros would stall or refuse everything; elections must outlast a few heartbeats.
    fn validate(&self) -> Result<(), InvalidTopology> {
        let positive = [
            ("frame_bytes_max", u64::from(self.frame_bytes_max)),
            ("requests_in_flight_max", u64::from(self.requests_in_flight_max)),
            ("request_timeout_ms", self.request_timeout_ms),
            ("batch_transactions_max", u64::from(self.batch_transactions_max)),
            ("dtxns_in_flight_max", u64::from(self.dtxns_in_flight_max)),
            ("raft_heartbeat_ms", self.raft_heartbeat_ms),
            ("raft_snapshot_entries", self.raft_snapshot_entries),
            ("handshake_timeout_ms", self.handshake_timeout_ms),
            ("handshakes_max", u64::from(self.handshakes_max)),
        ];
        if let Some(&(name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(InvalidTopology::ZeroLimit { name });
        }
        if self.raft_election_timeout_ms < 3 * self.raft_heartbeat_ms {
            return Err(InvalidTopology::ElectionTimeoutTooShort {
                raft_election_timeout_ms: self.raft_election_timeout_ms,
                raft_heartbeat_ms: self.raft_heartbeat_ms,
            });
        }
        Ok(())
    }
}

/// A 32-byte x-only public key from lowercase or uppercase hex, if it is one.
fn xonly_hex(text: &str) -> Option<[u8; 32]> {
    let key: [u8; 32] = hex::decode(text).ok()?.try_into().ok()?;
    specie_transaction::signing::parse_xonly(&key).map(|_| key)
}

/// Group and sentinel names become labels of certificate names (`1.shard-0.shard.specie`).
fn dns_label(name: &str) -> Result<(), InvalidTopology> {
    let ok = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(InvalidTopology::NotADnsLabel { name: name.to_string() })
    }
}

#[cfg(test)]
pub(crate) fn test_keys(count: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            hex::encode(
                secp256k1::Keypair::new_global(&mut rand::thread_rng())
                    .x_only_public_key()
                    .0
                    .serialize(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_local_topology_round_trips_through_toml() {
        let topology = Topology::local(Shape::default(), Path::new("/tmp/x"), vec![], test_keys(2)).unwrap();
        assert_eq!(topology.shard_groups.len(), 2);
        assert_eq!(topology.coordinator_groups.len(), 1);
        assert!(topology.shard_groups.iter().all(|g| g.replicas.len() == 3));
        assert_eq!(topology.sentinels.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert_eq!(Topology::load(&path).unwrap(), topology);
        assert!(!topology.to_toml().contains("fastpay_committee"), "absent, not empty");
    }

    #[test]
    fn a_fastpay_committee_round_trips_through_toml_and_builds_its_committee() {
        let mut topology = Topology::local(Shape::default(), Path::new("/tmp/x"), vec![], test_keys(2)).unwrap();
        let keys: Vec<[u8; 32]> = (0..4)
            .map(|i| {
                specie_fastpay::deterministic_key("authority", i)
                    .verifying_key()
                    .to_bytes()
            })
            .collect();
        let config = FastpayCommitteeConfig {
            epoch: 2,
            members: keys.iter().map(hex::encode).collect(),
        };
        topology.fastpay_committee = Some(config.clone());
        assert_eq!(topology.validate(), Ok(()));
        assert_eq!(config.committee().unwrap(), Committee::new(2, keys).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, topology.to_toml()).unwrap();
        assert!(topology.to_toml().contains("[fastpay_committee]"));
        assert_eq!(Topology::load(&path).unwrap(), topology);
    }

    #[test]
    fn mistakes_are_named() {
        let good = Topology::local(Shape::default(), Path::new("/tmp/x"), vec![], test_keys(2)).unwrap();
        let mut bad_name = good.clone();
        bad_name.shard_groups[0].name = "Shard.0".into();
        assert_eq!(
            bad_name.validate(),
            Err(InvalidTopology::NotADnsLabel { name: "Shard.0".into() })
        );
        assert!(bad_name.validate().unwrap_err().to_string().contains("lowercase"));
        let mut bad_key = good.clone();
        bad_key.sentinels[0].attestation_key = "00".into();
        assert_eq!(
            bad_key.validate(),
            Err(InvalidTopology::BadAttestationKey {
                sentinel: "sentinel-0".into()
            })
        );
        let mut gap = good.clone();
        gap.shard_groups[1].range[0] += 1;
        assert!(matches!(gap.validate(), Err(InvalidTopology::ShardRanges(_))));
        assert!(gap
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("shard group ranges: "));
        let mut clash = good.clone();
        clash.sentinels[1].http = clash.sentinels[0].http;
        let address = clash.sentinels[0].http;
        assert_eq!(clash.validate(), Err(InvalidTopology::AddressTwice { address }));
        assert_eq!(
            clash.validate().unwrap_err().to_string(),
            format!("address {address} is used twice")
        );
        let mut zero = good.clone();
        zero.limits.request_timeout_ms = 0;
        assert_eq!(
            zero.validate(),
            Err(InvalidTopology::ZeroLimit {
                name: "request_timeout_ms"
            })
        );
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "limits.request_timeout_ms must be positive"
        );
        let mut issuer = good.clone();
        issuer.issuers.push("zz".into());
        assert_eq!(
            issuer.validate(),
            Err(InvalidTopology::BadIssuer { issuer: "zz".into() })
        );
        let mut committee = good.clone();
        committee.fastpay_committee = Some(FastpayCommitteeConfig {
            epoch: 0,
            members: vec!["zz".into()],
        });
        assert_eq!(
            committee.validate(),
            Err(InvalidTopology::FastpayMemberNotHex {
                index: 0,
                member: "zz".into()
            })
        );
        committee.fastpay_committee = Some(FastpayCommitteeConfig {
            epoch: 0,
            members: vec![],
        });
        assert_eq!(
            committee.validate().unwrap_err().to_string(),
            "fastpay_committee: a committee needs at least one authority"
        );
        let mut empty = good.clone();
        empty.coordinator_groups[0].replicas.clear();
        assert_eq!(
            empty.validate(),
            Err(InvalidTopology::ReplicaCount {
                group: "coordinator-0".into(),
                replicas: 0
            })
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "format_version = 1\nunknown = 3\n").unwrap();
        assert!(matches!(Topology::load(&path), Err(TopologyError::Parse { .. })));
        assert_eq!(
            good.shard_group("shard-9").unwrap_err().to_string(),
            "the cluster file has no shard group named 'shard-9'"
        );
        assert_eq!(
            good.coordinator_group("coordinator-9").unwrap_err().to_string(),
            "the cluster file has no coordinator group named 'coordinator-9'"
        );
    }
}
