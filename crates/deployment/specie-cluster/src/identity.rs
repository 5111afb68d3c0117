//! Who a process is, as its certificate proves, and what each role may ask of each other role.
//!
//! Every process of a cluster holds a certificate from the cluster's CA whose first DNS subject
//! alternative name is its identity:
//!
//! | process | identity |
//! |---|---|
//! | replica `N` of shard group `G` | `N.G.shard.specie` |
//! | replica `N` of coordinator group `G` | `N.G.coordinator.specie` |
//! | replica `N` of FastPay authority shard group `G` (`authority-A-shard-S`) | `N.G.authority.specie` |
//! | replica `N` of the offline cash authority's group | `N.offline-authority.offline.specie` |
//! | replica `N` of the archiver group (the ledger of record) | `N.archiver.archiver.specie` |
//! | replica `N` of the atomizer group (the atomizer shape) | `N.atomizer.atomizer.specie` |
//! | sentinel `S` | `S.sentinel.specie` |
//! | the operator's tools (`cluster status`, audits) | `operator.specie` |
//!
//! A server admits a connection only from an identity the topology lists, and then acts on a
//! request only if [`authorize`] allows that identity to send that kind of request to it — a
//! decision taken from the request's tag byte, before the rest is decoded.

use std::fmt;

use crate::protocol::tag;
use crate::topology::Topology;

const SUFFIX: &str = "specie";

/// What a replica replicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupRole {
    Shard,
    Coordinator,
    /// One shard of one FastPay authority (Byzantine mode).
    Authority,
    /// The offline cash authority.
    Offline,
    /// The exchange between currencies.
    Exchange,
    /// The ledger of record.
    Archiver,
    /// Hamilton's atomizer: the one group that orders every transaction, in the atomizer shape.
    Atomizer,
}

impl GroupRole {
    pub fn label(self) -> &'static str {
        match self {
            GroupRole::Shard => "shard",
            GroupRole::Coordinator => "coordinator",
            GroupRole::Authority => "authority",
            GroupRole::Offline => "offline",
            GroupRole::Exchange => "exchange",
            GroupRole::Archiver => "archiver",
            GroupRole::Atomizer => "atomizer",
        }
    }
}

/// `shard`, `coordinator`, `authority`, `offline`, `exchange`, `archiver` or `atomizer`, as in
/// certificate names.
impl fmt::Display for GroupRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A process of a cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    Replica { role: GroupRole, group: String, id: u64 },
    Sentinel { name: String },
    Operator,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Replica { role, group, id } => write!(f, "{id}.{group}.{}.{SUFFIX}", role.label()),
            Identity::Sentinel { name } => write!(f, "{name}.sentinel.{SUFFIX}"),
            Identity::Operator => write!(f, "operator.{SUFFIX}"),
        }
    }
}

impl Identity {
    /// The role this identity acts in, as metrics label it (`shard`, …, `sentinel`, `operator`).
    pub fn role_label(&self) -> &'static str {
        match self {
            Identity::Replica { role, .. } => role.label(),
            Identity::Sentinel { .. } => "sentinel",
            Identity::Operator => "operator",
        }
    }

    pub fn shard(group: &str, id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Shard,
            group: group.to_string(),
            id,
        }
    }

    pub fn coordinator(group: &str, id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Coordinator,
            group: group.to_string(),
            id,
        }
    }

    pub fn authority(group: &str, id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Authority,
            group: group.to_string(),
            id,
        }
    }

    pub fn offline(group: &str, id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Offline,
            group: group.to_string(),
            id,
        }
    }

    pub fn exchange(id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Exchange,
            group: crate::topology::EXCHANGE_GROUP.to_string(),
            id,
        }
    }

    pub fn archiver(id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Archiver,
            group: crate::topology::ARCHIVER_GROUP.to_string(),
            id,
        }
    }

    pub fn atomizer(id: u64) -> Identity {
        Identity::Replica {
            role: GroupRole::Atomizer,
            group: crate::topology::ATOMIZER_GROUP.to_string(),
            id,
        }
    }

    pub fn sentinel(name: &str) -> Identity {
        Identity::Sentinel { name: name.to_string() }
    }

    /// Reads an identity from a certificate name; `None` if it is not of a form above.
    pub fn parse(name: &str) -> Option<Identity> {
        let labels: Vec<&str> = name.split('.').collect();
        if labels.iter().any(|label| label.is_empty()) {
            return None;
        }
        let identity = match labels.as_slice() {
            ["operator", SUFFIX] => Identity::Operator,
            [sentinel, "sentinel", SUFFIX] => Identity::sentinel(sentinel),
            [id, group, role, SUFFIX] => {
                let role = match *role {
                    "shard" => GroupRole::Shard,
                    "coordinator" => GroupRole::Coordinator,
                    "authority" => GroupRole::Authority,
                    "offline" => GroupRole::Offline,
                    "exchange" => GroupRole::Exchange,
                    "archiver" => GroupRole::Archiver,
                    "atomizer" => GroupRole::Atomizer,
                    _ => return None,
                };
                // Canonical decimal only, so one replica has one name.
                let id: u64 = id.parse().ok().filter(|n: &u64| n.to_string() == *id)?;
                Identity::Replica {
                    role,
                    group: group.to_string(),
                    id,
                }
            }
            _ => return None,
        };
        Some(identity)
    }

    /// Whether the topology lists this process.
    pub fn is_member_of(&self, topology: &Topology) -> bool {
        match self {
            Identity::Operator => true,
            Identity::Sentinel { name } => topology.sentinels.iter().any(|s| &s.name == name),
            Identity::Replica {
                role: GroupRole::Shard,
                group,
                id,
            } => topology
                .shard_groups
                .iter()
                .any(|g| &g.name == group && g.replicas.iter().any(|r| r.id == *id)),
            Identity::Replica {
                role: GroupRole::Coordinator,
                group,
                id,
            } => topology
                .coordinator_groups
                .iter()
                .any(|g| &g.name == group && g.replicas.iter().any(|r| r.id == *id)),
            Identity::Replica {
                role: GroupRole::Authority,
                group,
                id,
            } => topology.authority_place(group).is_some_and(|place| {
                let committee = topology.fastpay_committee.as_ref().expect("a place is in a committee");
                committee.authorities[usize::from(place.authority)].shards[place.shard as usize]
                    .replicas
                    .iter()
                    .any(|r| r.id == *id)
            }),
            Identity::Replica {
                role: GroupRole::Offline,
                group,
                id,
            } => {
                group == crate::topology::OFFLINE_AUTHORITY_GROUP
                    && topology
                        .offline_authority
                        .as_ref()
                        .is_some_and(|o| o.replicas.iter().any(|r| r.id == *id))
            }
            Identity::Replica {
                role: GroupRole::Exchange,
                group,
                id,
            } => {
                group == crate::topology::EXCHANGE_GROUP
                    && topology
                        .exchange
                        .as_ref()
                        .is_some_and(|e| e.replicas.iter().any(|r| r.id == *id))
            }
            Identity::Replica {
                role: GroupRole::Archiver,
                group,
                id,
            } => {
                group == crate::topology::ARCHIVER_GROUP
                    && topology
                        .ledger_of_record
                        .as_ref()
                        .is_some_and(|l| l.replicas.iter().any(|r| r.id == *id))
            }
            Identity::Replica {
                role: GroupRole::Atomizer,
                group,
                id,
            } => {
                group == crate::topology::ATOMIZER_GROUP
                    && topology
                        .atomizer
                        .as_ref()
                        .is_some_and(|a| a.replicas.iter().any(|r| r.id == *id))
            }
        }
    }

    /// The file stem of this process's key and certificate in the cluster's PKI directory.
    pub fn file_stem(&self) -> String {
        self.to_string()
    }

    fn is_sentinel(&self) -> bool {
        matches!(self, Identity::Sentinel { .. })
    }

    fn is_replica_of(&self, wanted: GroupRole) -> bool {
        matches!(self, Identity::Replica { role, .. } if *role == wanted)
    }
}

/// Every identity the topology lists, operator included: what `cluster up` issues certificates for.
pub fn every_identity(topology: &Topology) -> Vec<Identity> {
    let mut all = vec![Identity::Operator];
    for (role, group, replicas) in topology.replica_groups() {
        all.extend(replicas.iter().map(|r| Identity::Replica {
            role,
            group: group.clone(),
            id: r.id,
        }));
    }
    all.extend(topology.sentinels.iter().map(|s| Identity::sentinel(&s.name)));
    all
}

/// Why a request was not acted on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{peer} may not send {request} to {me}")]
pub struct Unauthorised {
    pub peer: String,
    pub request: &'static str,
    pub me: String,
}

/// The authorisation table (docs/wire-protocol.md, "Authorisation"): may `peer` send a request
/// with tag `tag` to the replica `me` of the cluster `topology`? `peer` was authenticated and
/// admitted as a member.
pub fn authorize(topology: &Topology, me: &Identity, peer: &Identity, tag: u8) -> Result<(), Unauthorised> {
    let allowed = match me {
        Identity::Replica { role, group, .. } => replica_allows(topology, me, *role, group, peer, tag),
        // A sentinel serves two requests, and only when the sentinels endorse: another sentinel
        // asking it to endorse, or taking part in their key generation (operators read its
        // status over HTTP).
        Identity::Sentinel { .. } => {
            matches!(tag, tag::ENDORSE | tag::CEREMONY)
                && topology.endorsement.is_some()
                && peer.is_sentinel()
                && peer != me
        }
        Identity::Operator => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(Unauthorised {
            peer: peer.to_string(),
            request: tag::name(tag),
            me: me.to_string(),
        })
    }
}

fn replica_allows(topology: &Topology, me: &Identity, role: GroupRole, group: &str, peer: &Identity, tag: u8) -> bool {
    match tag {
        // Raft only within the group: an outsider with inflated terms could depose its leader.
        tag::RAFT => {
            matches!(peer, Identity::Replica { role: r, group: g, .. } if *r == role && g == group) && peer != me
        }
        // 2PC phases change the UHS: only a coordinator drives them.
        tag::SHARD_BATCH => role == GroupRole::Shard && peer.is_replica_of(GroupRole::Coordinator),
        // In the atomizer shape, only the atomizer moves the UHS (its blocks) or asks for
        // attestations.
        tag::ATOMIZER_SHARD => role == GroupRole::Shard && peer.is_replica_of(GroupRole::Atomizer),
        tag::SHARD_QUERY => {
            // Authorities (FastPay's and the offline one) and the exchange look for a funding's
            // marker in the UHS themselves before crediting it.
            role == GroupRole::Shard
                && (peer.is_sentinel()
                    || *peer == Identity::Operator
                    || peer.is_replica_of(GroupRole::Authority)
                    || peer.is_replica_of(GroupRole::Offline)
                    || peer.is_replica_of(GroupRole::Exchange)
                    // The archiver decides from the UHS what nobody reported.
                    || peer.is_replica_of(GroupRole::Archiver))
        }
        tag::SHARD_IDS => role == GroupRole::Shard && (peer.is_sentinel() || *peer == Identity::Operator),
        // Transactions enter only through a sentinel, which validated them.
        tag::SUBMIT | tag::SUBMIT_ENDORSED => {
            matches!(role, GroupRole::Coordinator | GroupRole::Atomizer) && peer.is_sentinel()
        }
        // What goes into the ledger of record comes from the sentinels that submitted it.
        tag::ARCHIVE_WRITE => role == GroupRole::Archiver && peer.is_sentinel(),
        // What became of it, from what ordered it: a sentinel's report could come too early.
        tag::ARCHIVE_OUTCOMES | tag::WRITTEN_AHEAD => {
            role == GroupRole::Archiver
                && (peer.is_replica_of(GroupRole::Coordinator) || peer.is_replica_of(GroupRole::Atomizer))
        }
        tag::LEDGER_READ => role == GroupRole::Archiver && (peer.is_sentinel() || *peer == Identity::Operator),
        // Credits move value between an authority's own shards: only another shard of the same
        // authority may send them (FastPay's trust domain is the authority).
        tag::CREDITS | tag::CREDIT_ACK => {
            role == GroupRole::Authority && peer.is_replica_of(GroupRole::Authority) && {
                let place = |identity: &Identity| match identity {
                    Identity::Replica { group, .. } => topology.authority_place(group),
                    _ => None,
                };
                match (place(me), place(peer)) {
                    (Some(mine), Some(theirs)) => mine.authority == theirs.authority && mine.shard != theirs.shard,
                    _ => false,
                }
            }
        }
        tag::STATUS => true,
        // Who belongs to a group, and what each replica holds, are the operator's business.
        tag::MEMBERSHIP => *peer == Identity::Operator,
        tag::REPLICA_DIGEST => role == GroupRole::Shard && *peer == Identity::Operator,
        tag::REPLICA_SNAPSHOT => *peer == Identity::Operator,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::topology::{test_keys, CommitteeShape, GroupBridges, Shape};

    /// The default shape with a committee of 4 authorities × 3 shards × 2 replicas.
    fn topology() -> Topology {
        let shape = Shape {
            committee: Some(CommitteeShape {
                authorities: 4,
                shards: 3,
                replicas: 2,
            }),
            ..Shape::default()
        };
        let authority_keys = (0..4)
            .map(|i| {
                hex::encode(
                    specie_fastpay::deterministic_key("authority", i)
                        .verifying_key()
                        .to_bytes(),
                )
            })
            .collect();
        Topology::local(
            shape,
            Path::new("/tmp/x"),
            vec![],
            test_keys(2),
            authority_keys,
            GroupBridges::default(),
        )
        .unwrap()
    }

    #[test]
    fn names_round_trip_and_strangers_do_not_parse() {
        let topology = topology();
        let identities = every_identity(&topology);
        assert_eq!(identities.len(), 1 + 2 * 3 + 3 + 4 * 3 * 2 + 2);
        for identity in identities {
            assert_eq!(Identity::parse(&identity.to_string()), Some(identity.clone()));
            assert!(identity.is_member_of(&topology), "{identity}");
        }
        assert_eq!(
            Identity::authority("authority-3-shard-2", 2).to_string(),
            "2.authority-3-shard-2.authority.specie"
        );
        for name in [
            "",
            "specie",
            "1.shard-0.shard.example",
            "01.shard-0.shard.specie",
            "x.shard-0.shard.specie",
            "1.shard-0.wallet.specie",
            "a.b.sentinel.specie",
            "operator.specie.evil",
            ".sentinel.specie",
            "1..shard.specie",
            "1.authority-0-shard-0.authority.example",
        ] {
            assert_eq!(Identity::parse(name), None, "{name}");
        }
        assert!(!Identity::shard("shard-0", 9).is_member_of(&topology));
        assert!(!Identity::coordinator("shard-0", 1).is_member_of(&topology));
        assert!(!Identity::sentinel("sentinel-9").is_member_of(&topology));
        for stranger in [
            Identity::authority("authority-0-shard-0", 3),
            Identity::authority("authority-4-shard-0", 1),
            Identity::authority("authority-0-shard-3", 1),
            Identity::authority("authority-00-shard-0", 1),
            Identity::authority("shard-0", 1),
            Identity::shard("authority-0-shard-0", 1),
        ] {
            assert!(!stranger.is_member_of(&topology), "{stranger}");
        }
    }

    #[test]
    fn the_authorisation_table() {
        let topology = topology();
        let shard = Identity::shard("shard-0", 1);
        let shard_peer = Identity::shard("shard-0", 2);
        let other_shard = Identity::shard("shard-1", 2);
        let coordinator = Identity::coordinator("coordinator-0", 1);
        let coordinator_peer = Identity::coordinator("coordinator-0", 2);
        let sentinel = Identity::sentinel("sentinel-0");
        let operator = Identity::Operator;
        let authority = Identity::authority("authority-1-shard-0", 1);
        let all = [
            &shard_peer,
            &other_shard,
            &coordinator,
            &coordinator_peer,
            &sentinel,
            &operator,
            &authority,
        ];
        let allowed = |me: &Identity, tag: u8| -> Vec<String> {
            all.iter()
                .filter(|peer| authorize(&topology, me, peer, tag).is_ok())
                .map(|peer| peer.to_string())
                .collect()
        };
        assert_eq!(allowed(&shard, tag::RAFT), vec![shard_peer.to_string()]);
        assert!(authorize(&topology, &shard, &shard, tag::RAFT).is_err());
        assert_eq!(allowed(&coordinator, tag::RAFT), vec![coordinator_peer.to_string()]);
        assert_eq!(
            allowed(&shard, tag::SHARD_BATCH),
            vec![coordinator.to_string(), coordinator_peer.to_string()]
        );
        assert!(allowed(&coordinator, tag::SHARD_BATCH).is_empty());
        assert_eq!(
            allowed(&shard, tag::SHARD_QUERY),
            vec![sentinel.to_string(), operator.to_string(), authority.to_string()]
        );
        assert_eq!(
            allowed(&shard, tag::SHARD_IDS),
            vec![sentinel.to_string(), operator.to_string()]
        );
        for read in [tag::SHARD_QUERY, tag::SHARD_IDS] {
            assert!(allowed(&coordinator, read).is_empty());
        }
        assert_eq!(allowed(&coordinator, tag::SUBMIT), vec![sentinel.to_string()]);
        assert_eq!(allowed(&coordinator, tag::SUBMIT_ENDORSED), vec![sentinel.to_string()]);
        assert!(allowed(&shard, tag::SUBMIT).is_empty());
        // Sentinels ask each other to endorse, and nothing else, only when the cluster says so.
        let other_sentinel = Identity::sentinel("sentinel-1");
        assert!(authorize(&topology, &other_sentinel, &sentinel, tag::ENDORSE).is_err());
        let mut endorsing = topology.clone();
        endorsing.endorsement = Some(crate::topology::EndorsementConfig {
            threshold: 1,
            group_key: None,
        });
        assert!(authorize(&endorsing, &other_sentinel, &sentinel, tag::ENDORSE).is_ok());
        assert!(authorize(&endorsing, &other_sentinel, &sentinel, tag::CEREMONY).is_ok());
        assert!(authorize(&topology, &other_sentinel, &sentinel, tag::CEREMONY).is_err());
        assert!(authorize(&endorsing, &sentinel, &sentinel, tag::ENDORSE).is_err());
        for peer in all.iter().filter(|peer| !peer.is_sentinel()) {
            assert!(
                authorize(&endorsing, &other_sentinel, peer, tag::ENDORSE).is_err(),
                "{peer}"
            );
        }
        for other in [tag::RAFT, tag::SUBMIT, tag::SHARD_BATCH, tag::STATUS, tag::CREDITS] {
            assert!(authorize(&endorsing, &other_sentinel, &sentinel, other).is_err());
        }
        assert!(authorize(&endorsing, &coordinator, &sentinel, tag::ENDORSE).is_err());
        assert_eq!(allowed(&shard, tag::STATUS).len(), all.len());
        // Membership changes and each replica's own digest come from the operator alone.
        for me in [&shard, &coordinator] {
            assert_eq!(allowed(me, tag::MEMBERSHIP), vec![operator.to_string()]);
        }
        assert_eq!(allowed(&shard, tag::REPLICA_DIGEST), vec![operator.to_string()]);
        assert!(allowed(&coordinator, tag::REPLICA_DIGEST).is_empty());
        for me in [&shard, &coordinator] {
            assert_eq!(allowed(me, tag::REPLICA_SNAPSHOT), vec![operator.to_string()]);
        }
        assert!(allowed(&shard, 0xee).is_empty());
        for credits in [tag::CREDITS, tag::CREDIT_ACK] {
            assert!(allowed(&shard, credits).is_empty());
            assert!(allowed(&coordinator, credits).is_empty());
        }
        let refusal = authorize(&topology, &shard, &sentinel, tag::SHARD_BATCH).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "sentinel-0.sentinel.specie may not send shard batch to 1.shard-0.shard.specie"
        );
    }

    /// The archiver group takes write-aheads and outcomes from sentinels only, reads from sentinels
    /// and the operator, Raft from its own group; it reads the UHS; it may not submit or drive 2PC.
    #[test]
    fn the_archiver_group_takes_records_from_sentinels_only() {
        let shape = Shape {
            ledger_replicas: 3,
            ..Shape::default()
        };
        let topology = crate::topology::local_for_tests(shape);
        let archiver = Identity::archiver(1);
        let archiver_peer = Identity::archiver(2);
        let sentinel = Identity::sentinel("sentinel-0");
        let coordinator = Identity::coordinator("coordinator-0", 1);
        let shard = Identity::shard("shard-0", 1);
        assert!(archiver.is_member_of(&topology) && archiver_peer.is_member_of(&topology));
        assert!(!Identity::archiver(4).is_member_of(&topology));
        assert_eq!(
            Identity::parse("2.archiver.archiver.specie"),
            Some(archiver_peer.clone())
        );
        let all = [&archiver_peer, &sentinel, &coordinator, &shard, &Identity::Operator];
        let allowed = |me: &Identity, tag: u8| -> Vec<String> {
            all.iter()
                .filter(|peer| authorize(&topology, me, peer, tag).is_ok())
                .map(|peer| peer.to_string())
                .collect()
        };
        assert_eq!(allowed(&archiver, tag::ARCHIVE_WRITE), vec![sentinel.to_string()]);
        for ordering in [tag::ARCHIVE_OUTCOMES, tag::WRITTEN_AHEAD] {
            assert_eq!(allowed(&archiver, ordering), vec![coordinator.to_string()]);
        }
        for write in [tag::ARCHIVE_WRITE, tag::ARCHIVE_OUTCOMES, tag::WRITTEN_AHEAD] {
            assert!(allowed(&shard, write).is_empty() && allowed(&coordinator, write).is_empty());
        }
        assert_eq!(
            allowed(&archiver, tag::LEDGER_READ),
            vec![sentinel.to_string(), Identity::Operator.to_string()]
        );
        assert_eq!(allowed(&archiver, tag::RAFT), vec![archiver_peer.to_string()]);
        assert!(allowed(&shard, tag::SHARD_QUERY).contains(&archiver_peer.to_string()));
        for core in [tag::SHARD_BATCH, tag::SUBMIT, tag::SUBMIT_ENDORSED, tag::SHARD_IDS] {
            assert!(!allowed(&shard, core).contains(&archiver_peer.to_string()));
            assert!(!allowed(&coordinator, core).contains(&archiver_peer.to_string()));
            assert!(allowed(&archiver, core).is_empty());
        }
    }

    /// In the atomizer shape, the shards take attestation requests and blocks from the atomizer
    /// group only, and the atomizer takes submissions from sentinels only; nothing else of the
    /// core may reach either, and a coordinator's name is no member.
    #[test]
    fn in_the_atomizer_shape_only_the_atomizer_moves_the_shards() {
        let topology = crate::topology::local_for_tests(Shape {
            atomizer_replicas: 3,
            ..Shape::default()
        });
        assert!(topology.coordinator_groups.is_empty());
        let atomizer = Identity::atomizer(1);
        let atomizer_peer = Identity::atomizer(2);
        let sentinel = Identity::sentinel("sentinel-0");
        let shard = Identity::shard("shard-0", 1);
        assert!(atomizer.is_member_of(&topology) && atomizer_peer.is_member_of(&topology));
        assert!(!Identity::atomizer(4).is_member_of(&topology));
        assert!(!Identity::coordinator("coordinator-0", 1).is_member_of(&topology));
        assert_eq!(
            Identity::parse("2.atomizer.atomizer.specie"),
            Some(atomizer_peer.clone())
        );
        let all = [&atomizer_peer, &sentinel, &shard, &Identity::Operator];
        let allowed = |me: &Identity, tag: u8| -> Vec<String> {
            all.iter()
                .filter(|peer| authorize(&topology, me, peer, tag).is_ok())
                .map(|peer| peer.to_string())
                .collect()
        };
        assert_eq!(allowed(&shard, tag::ATOMIZER_SHARD), vec![atomizer_peer.to_string()]);
        for submit in [tag::SUBMIT, tag::SUBMIT_ENDORSED] {
            assert_eq!(allowed(&atomizer, submit), vec![sentinel.to_string()]);
        }
        assert_eq!(allowed(&atomizer, tag::RAFT), vec![atomizer_peer.to_string()]);
        assert!(!allowed(&shard, tag::SHARD_BATCH).contains(&atomizer_peer.to_string()));
        for other in [
            tag::ATOMIZER_SHARD,
            tag::SHARD_BATCH,
            tag::SHARD_QUERY,
            tag::SHARD_IDS,
            tag::ARCHIVE_WRITE,
            tag::LEDGER_READ,
        ] {
            assert!(allowed(&atomizer, other).is_empty(), "{}", tag::name(other));
        }
    }

    /// The offline authority's and the exchange's replicas take Raft from their own group only and
    /// status from anyone; of the core they may only read the UHS (a funding's marker), never
    /// submit or drive 2PC.
    #[test]
    fn the_offline_authority_and_exchange_groups_read_the_uhs_and_take_raft_only_from_themselves() {
        let shape = Shape {
            offline_replicas: 3,
            exchange: Some(crate::topology::ExchangeShape {
                replicas: 3,
                other_assets: vec![crate::topology::ExchangeAsset {
                    name: "eur".into(),
                    core: Some("http://127.0.0.1:9".into()),
                }],
            }),
            ..Shape::default()
        };
        let key = |n| {
            hex::encode(
                specie_fastpay::deterministic_key("bridge", n)
                    .verifying_key()
                    .to_bytes(),
            )
        };
        let bridges = |offline: String, exchange: String| GroupBridges {
            offline: Some(offline),
            exchange: Some(exchange),
        };
        let local = |bridges| {
            Topology::local(
                shape.clone(),
                Path::new("/tmp/x"),
                vec![],
                test_keys(2),
                vec![],
                bridges,
            )
        };
        for bad in [hex::encode([0u8; 32]), "not hex".into(), hex::encode([7u8; 31])] {
            let refused = [
                (
                    local(bridges(bad.clone(), key(1))),
                    crate::InvalidTopology::OfflineBridgeKey,
                ),
                (
                    local(bridges(key(0), bad.clone())),
                    crate::InvalidTopology::ExchangeBridgeKey,
                ),
            ];
            for (topology, expected) in refused {
                assert_eq!(
                    topology,
                    Err(expected),
                    "{bad}: a small-order point, not hex, too short"
                );
            }
        }
        let topology = local(bridges(key(0), key(1))).unwrap();
        let groups = [
            (
                GroupRole::Offline,
                crate::OFFLINE_AUTHORITY_GROUP,
                "1.offline-authority.offline.specie",
            ),
            (GroupRole::Exchange, crate::EXCHANGE_GROUP, "1.exchange.exchange.specie"),
        ];
        for (role, group, name) in groups {
            let replica = |group: &str, id| Identity::Replica {
                role,
                group: group.to_string(),
                id,
            };
            let me = replica(group, 1);
            assert_eq!(me.to_string(), name);
            assert_eq!(Identity::parse(name), Some(me.clone()));
            assert!(me.is_member_of(&topology));
            assert!(!replica(group, 4).is_member_of(&topology));
            assert!(!replica("other", 1).is_member_of(&topology));
            let group_peer = replica(group, 2);
            let other_group = if role == GroupRole::Offline {
                Identity::exchange(1)
            } else {
                Identity::offline(crate::OFFLINE_AUTHORITY_GROUP, 1)
            };
            let everyone = [
                &group_peer,
                &other_group,
                &Identity::shard("shard-0", 1),
                &Identity::coordinator("coordinator-0", 1),
                &Identity::sentinel("sentinel-0"),
                &Identity::Operator,
            ];
            for tag in 0..=u8::MAX {
                let allowed: Vec<&Identity> = everyone
                    .iter()
                    .copied()
                    .filter(|peer| authorize(&topology, &me, peer, tag).is_ok())
                    .collect();
                let expected: Vec<&Identity> = match tag {
                    tag::RAFT => vec![&group_peer],
                    tag::STATUS => everyone.to_vec(),
                    tag::MEMBERSHIP | tag::REPLICA_SNAPSHOT => vec![&Identity::Operator],
                    _ => vec![],
                };
                assert_eq!(allowed, expected, "{name}: tag {tag} ({})", tag::name(tag));
            }
            let shard = Identity::shard("shard-0", 1);
            assert!(authorize(&topology, &shard, &me, tag::SHARD_QUERY).is_ok());
            for tag in [tag::SHARD_BATCH, tag::SHARD_IDS, tag::RAFT] {
                assert!(authorize(&topology, &shard, &me, tag).is_err(), "{}", tag::name(tag));
            }
            let coordinator = Identity::coordinator("coordinator-0", 1);
            assert!(authorize(&topology, &coordinator, &me, tag::SUBMIT).is_err());
            assert!(every_identity(&topology).contains(&me));
        }
    }

    /// An authority shard replica takes Raft from its group only, credits only from the other
    /// shards of its own authority (whatever their replica), status from every member, and
    /// nothing else: every tag, every kind of peer.
    #[test]
    fn an_authority_shard_takes_credits_only_from_its_own_authoritys_other_shards() {
        let topology = topology();
        let me = Identity::authority("authority-1-shard-1", 1);
        let group_peer = Identity::authority("authority-1-shard-1", 2);
        let sibling = Identity::authority("authority-1-shard-0", 1);
        let sibling_replica = Identity::authority("authority-1-shard-2", 2);
        let same_shard_other_authority = Identity::authority("authority-0-shard-1", 1);
        let other_authority = Identity::authority("authority-2-shard-0", 2);
        let everyone = [
            &group_peer,
            &sibling,
            &sibling_replica,
            &same_shard_other_authority,
            &other_authority,
            &Identity::shard("shard-0", 1),
            &Identity::coordinator("coordinator-0", 1),
            &Identity::sentinel("sentinel-0"),
            &Identity::Operator,
        ];
        for tag in 0..=u8::MAX {
            let allowed: Vec<&Identity> = everyone
                .iter()
                .copied()
                .filter(|peer| authorize(&topology, &me, peer, tag).is_ok())
                .collect();
            let expected: Vec<&Identity> = match tag {
                tag::RAFT => vec![&group_peer],
                tag::CREDITS | tag::CREDIT_ACK => vec![&sibling, &sibling_replica],
                tag::STATUS => everyone.to_vec(),
                tag::MEMBERSHIP | tag::REPLICA_SNAPSHOT => vec![&Identity::Operator],
                _ => vec![],
            };
            assert_eq!(allowed, expected, "tag {tag} ({})", tag::name(tag));
        }
        assert!(authorize(&topology, &me, &me, tag::CREDITS).is_err(), "not from itself");
        let refusal = authorize(&topology, &me, &same_shard_other_authority, tag::CREDITS).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "1.authority-0-shard-1.authority.specie may not send credits to 1.authority-1-shard-1.authority.specie"
        );
        // A group the topology does not list is no sibling, whatever its name says.
        let unlisted = Identity::authority("authority-1-shard-7", 1);
        assert!(authorize(&topology, &me, &unlisted, tag::CREDITS).is_err());
    }
}
