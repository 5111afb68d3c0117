//! Who a process is, as its certificate proves, and what each role may ask of each other role.
//!
//! Every process of a cluster holds a certificate from the cluster's CA whose first DNS subject
//! alternative name is its identity:
//!
//! | process | identity |
//! |---|---|
//! | replica `N` of shard group `G` | `N.G.shard.specie` |
//! | replica `N` of coordinator group `G` | `N.G.coordinator.specie` |
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
}

impl GroupRole {
    fn label(self) -> &'static str {
        match self {
            GroupRole::Shard => "shard",
            GroupRole::Coordinator => "coordinator",
        }
    }
}

/// `shard` or `coordinator`, as in certificate names.
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
    for group in &topology.shard_groups {
        all.extend(group.replicas.iter().map(|r| Identity::shard(&group.name, r.id)));
    }
    for group in &topology.coordinator_groups {
        all.extend(group.replicas.iter().map(|r| Identity::coordinator(&group.name, r.id)));
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
/// with tag `tag` to the replica `me`? `peer` was authenticated and admitted as a member.
pub fn authorize(me: &Identity, peer: &Identity, tag: u8) -> Result<(), Unauthorised> {
    let allowed = match me {
        Identity::Replica { role, group, .. } => replica_allows(me, *role, group, peer, tag),
        // Only replicas serve the wire protocol.
        Identity::Sentinel { .. } | Identity::Operator => false,
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

fn replica_allows(me: &Identity, role: GroupRole, group: &str, peer: &Identity, tag: u8) -> bool {
    match tag {
        // Raft only within the group: an outsider with inflated terms could depose its leader.
        tag::RAFT => {
            matches!(peer, Identity::Replica { role: r, group: g, .. } if *r == role && g == group) && peer != me
        }
        // 2PC phases change the UHS: only a coordinator drives them.
        tag::SHARD_BATCH => role == GroupRole::Shard && peer.is_replica_of(GroupRole::Coordinator),
        tag::SHARD_QUERY | tag::SHARD_IDS => {
            role == GroupRole::Shard && (peer.is_sentinel() || *peer == Identity::Operator)
        }
        // Transactions enter only through a sentinel, which validated them.
        tag::SUBMIT => role == GroupRole::Coordinator && peer.is_sentinel(),
        tag::STATUS => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::topology::{test_keys, Shape};

    #[test]
    fn names_round_trip_and_strangers_do_not_parse() {
        let topology = Topology::local(Shape::default(), Path::new("/tmp/x"), vec![], test_keys(2)).unwrap();
        for identity in every_identity(&topology) {
            assert_eq!(Identity::parse(&identity.to_string()), Some(identity.clone()));
            assert!(identity.is_member_of(&topology), "{identity}");
        }
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
        ] {
            assert_eq!(Identity::parse(name), None, "{name}");
        }
        assert!(!Identity::shard("shard-0", 9).is_member_of(&topology));
        assert!(!Identity::coordinator("shard-0", 1).is_member_of(&topology));
        assert!(!Identity::sentinel("sentinel-9").is_member_of(&topology));
    }

    #[test]
    fn the_authorisation_table() {
        let shard = Identity::shard("shard-0", 1);
        let shard_peer = Identity::shard("shard-0", 2);
        let other_shard = Identity::shard("shard-1", 2);
        let coordinator = Identity::coordinator("coordinator-0", 1);
        let coordinator_peer = Identity::coordinator("coordinator-0", 2);
        let sentinel = Identity::sentinel("sentinel-0");
        let operator = Identity::Operator;
        let all = [
            &shard_peer,
            &other_shard,
            &coordinator,
            &coordinator_peer,
            &sentinel,
            &operator,
        ];
        let allowed = |me: &Identity, tag: u8| -> Vec<String> {
            all.iter()
                .filter(|peer| authorize(me, peer, tag).is_ok())
                .map(|peer| peer.to_string())
                .collect()
        };
        assert_eq!(allowed(&shard, tag::RAFT), vec![shard_peer.to_string()]);
        assert!(authorize(&shard, &shard, tag::RAFT).is_err());
        assert_eq!(allowed(&coordinator, tag::RAFT), vec![coordinator_peer.to_string()]);
        assert_eq!(
            allowed(&shard, tag::SHARD_BATCH),
            vec![coordinator.to_string(), coordinator_peer.to_string()]
        );
        assert!(allowed(&coordinator, tag::SHARD_BATCH).is_empty());
        for read in [tag::SHARD_QUERY, tag::SHARD_IDS] {
            assert_eq!(allowed(&shard, read), vec![sentinel.to_string(), operator.to_string()]);
            assert!(allowed(&coordinator, read).is_empty());
        }
        assert_eq!(allowed(&coordinator, tag::SUBMIT), vec![sentinel.to_string()]);
        assert!(allowed(&shard, tag::SUBMIT).is_empty());
        assert_eq!(allowed(&shard, tag::STATUS).len(), all.len());
        assert!(allowed(&shard, 0xee).is_empty());
        let refusal = authorize(&shard, &sentinel, tag::SHARD_BATCH).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "sentinel-0.sentinel.specie may not send shard batch to 1.shard-0.shard.specie"
        );
    }
}
