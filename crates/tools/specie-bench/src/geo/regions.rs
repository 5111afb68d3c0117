//! The three regions of `specie bench geo`: round trips between them, which region each member
//! is in, the relays needed, and each region's copy of the cluster file.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use specie_cluster::supervisor::Member;
use specie_cluster::Topology;

use crate::error::BenchResult;
use crate::fail;

/// Regions: replica `i` of every replicated group is in region `i`.
pub(crate) const REGIONS: usize = 3;
/// The region of the sentinels and the load generator.
pub(crate) const LOAD_REGION: usize = 0;
/// The longest round trip `--rtt-ms` takes.
pub(crate) const RTT_MS_MAX: u32 = 1_000;

/// Round trips between the three regions, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundTrips {
    pub r0_r1_ms: u32,
    pub r0_r2_ms: u32,
    pub r1_r2_ms: u32,
}

impl RoundTrips {
    /// Hamilton §6: Virginia (r0) – Ohio (r1) ≈ 12 ms, Virginia – Oregon (r2) ≈ 62 ms, Ohio –
    /// Oregon ≈ 51 ms.
    pub const HAMILTON: RoundTrips = RoundTrips {
        r0_r1_ms: 12,
        r0_r2_ms: 62,
        r1_r2_ms: 51,
    };

    /// The round trip between regions `a` and `b` (0 within a region).
    pub(crate) fn rtt_ms(&self, a: usize, b: usize) -> u32 {
        assert!(a < REGIONS && b < REGIONS);
        match (a.min(b), a.max(b)) {
            (0, 1) => self.r0_r1_ms,
            (0, 2) => self.r0_r2_ms,
            (1, 2) => self.r1_r2_ms,
            _ => 0,
        }
    }

    /// What a relay between `a` and `b` holds bytes for in each direction: half the round trip.
    pub(crate) fn one_way_delay(&self, a: usize, b: usize) -> Duration {
        Duration::from_micros(u64::from(self.rtt_ms(a, b)) * 500)
    }

    pub(crate) fn max_ms(&self) -> u32 {
        self.r0_r1_ms.max(self.r0_r2_ms).max(self.r1_r2_ms)
    }
}

impl std::fmt::Display for RoundTrips {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "r0–r1 {} ms, r0–r2 {} ms, r1–r2 {} ms",
            self.r0_r1_ms, self.r0_r2_ms, self.r1_r2_ms
        )
    }
}

/// Why `--rtt-ms` was not understood.
#[derive(Debug, thiserror::Error)]
#[error("expected three round trips in ms, r0–r1,r0–r2,r1–r2 (e.g. 12,62,51), each 1 to {RTT_MS_MAX}: {0}")]
pub struct RoundTripsError(String);

impl std::str::FromStr for RoundTrips {
    type Err = RoundTripsError;

    fn from_str(text: &str) -> Result<RoundTrips, RoundTripsError> {
        let values: Vec<u32> = text
            .split(',')
            .map(|part| part.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|error| RoundTripsError(format!("'{text}': {error}")))?;
        let [r0_r1_ms, r0_r2_ms, r1_r2_ms] = values[..] else {
            return Err(RoundTripsError(format!("'{text}' has {} values", values.len())));
        };
        if values.iter().any(|&ms| ms == 0 || ms > RTT_MS_MAX) {
            return Err(RoundTripsError(format!("'{text}' is out of range")));
        }
        Ok(RoundTrips {
            r0_r1_ms,
            r0_r2_ms,
            r1_r2_ms,
        })
    }
}

/// Where each member of a cluster is: its real address (replicas) and its region.
pub(crate) struct Placement {
    /// Replica address → region.
    pub(crate) address_region: BTreeMap<SocketAddr, usize>,
    /// Member name (as `supervisor::members` names it) → region.
    pub(crate) member_region: HashMap<String, usize>,
    /// Group → (replica id → region).
    pub(crate) replica_region: BTreeMap<String, BTreeMap<u64, usize>>,
}

impl Placement {
    /// Replica `i` of every group in region `(i + rotation[group]) % 3` (no rotation: region
    /// `i`), sentinels in [`LOAD_REGION`]. Only the online core's groups (shards and
    /// coordinators) are placed: a cluster with other groups is refused.
    pub(crate) fn of(topology: &Topology, rotation: &BTreeMap<String, usize>) -> BenchResult<Placement> {
        let core_groups = topology.shard_groups.len() + topology.coordinator_groups.len();
        if topology.replica_groups().len() != core_groups {
            fail!("specie bench geo places only shard and coordinator groups; this cluster has other groups");
        }
        let groups = (topology.shard_groups.iter().map(|g| (&g.name, &g.replicas)))
            .chain(topology.coordinator_groups.iter().map(|g| (&g.name, &g.replicas)));
        let mut placement = Placement {
            address_region: BTreeMap::new(),
            member_region: HashMap::new(),
            replica_region: BTreeMap::new(),
        };
        for (name, replicas) in groups {
            if replicas.len() != REGIONS {
                fail!(
                    "group {name} has {} replicas; specie bench geo puts one in each of {REGIONS} regions",
                    replicas.len()
                );
            }
            let turn = rotation.get(name).copied().unwrap_or(0);
            assert!(turn < REGIONS);
            for (index, replica) in replicas.iter().enumerate() {
                let region = (index + turn) % REGIONS;
                placement.address_region.insert(replica.address, region);
                placement.member_region.insert(format!("{name}-{}", replica.id), region);
                (placement.replica_region.entry(name.clone()).or_default()).insert(replica.id, region);
            }
        }
        for sentinel in &topology.sentinels {
            placement.member_region.insert(sentinel.name.clone(), LOAD_REGION);
        }
        Ok(placement)
    }

    /// The rotation that puts the replica at `leader_index[group]` of each group in `region`.
    pub(crate) fn rotation_to(leader_index: &BTreeMap<String, usize>, region: usize) -> BTreeMap<String, usize> {
        assert!(region < REGIONS);
        (leader_index.iter())
            .map(|(group, &index)| (group.clone(), (region + REGIONS - index % REGIONS) % REGIONS))
            .collect()
    }

    /// The region of `member`; an error names a member this placement does not know (the
    /// supervisor's naming changed).
    pub(crate) fn region_of(&self, member: &Member) -> BenchResult<usize> {
        match self.member_region.get(&member.name) {
            Some(&region) => Ok(region),
            None => fail!(
                "specie bench geo does not know which region member {} is in",
                member.name
            ),
        }
    }

    /// One relay per replica per region other than its own: (target address, target's region,
    /// region the relay serves).
    pub(crate) fn relays_needed(&self) -> Vec<(SocketAddr, usize, usize)> {
        let mut needed = vec![];
        for (&address, &region) in &self.address_region {
            for from in (0..REGIONS).filter(|&from| from != region) {
                needed.push((address, region, from));
            }
        }
        needed
    }
}

/// Region `region`'s copy of the cluster file: every replica outside the region at the address
/// of its relay for `region` (`relay_of[(real address, region)]`).
pub(crate) fn region_topology(
    topology: &Topology,
    placement: &Placement,
    region: usize,
    relay_of: &HashMap<(SocketAddr, usize), SocketAddr>,
) -> BenchResult<Topology> {
    assert!(region < REGIONS);
    let mut copy = topology.clone();
    let replicas = (copy.shard_groups.iter_mut().flat_map(|g| g.replicas.iter_mut()))
        .chain(copy.coordinator_groups.iter_mut().flat_map(|g| g.replicas.iter_mut()));
    for replica in replicas {
        let Some(&home) = placement.address_region.get(&replica.address) else {
            fail!("replica at {} has no region", replica.address);
        };
        if home == region {
            continue;
        }
        let Some(&relay) = relay_of.get(&(replica.address, region)) else {
            fail!("no relay to {} for region {region}", replica.address);
        };
        replica.address = relay;
    }
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_cluster::{GroupBridges, Shape};
    use std::path::Path;
    use std::str::FromStr;

    fn local_topology() -> Topology {
        let keys = [[1u8; 32], [2; 32]]
            .map(|secret| {
                let key = specie_transaction::signing::keypair_from_secret(&secret).unwrap();
                hex::encode(specie_transaction::signing::xonly_bytes(&key))
            })
            .to_vec();
        Topology::local(
            Shape::default(),
            Path::new("/tmp/x"),
            vec![],
            keys,
            vec![],
            GroupBridges::default(),
        )
        .unwrap()
    }

    #[test]
    fn round_trips_parse_and_are_symmetric() {
        assert_eq!(RoundTrips::from_str("12,62,51").unwrap(), RoundTrips::HAMILTON);
        let trips = RoundTrips::from_str(" 10, 20 ,30").unwrap();
        assert_eq!(
            (trips.rtt_ms(0, 1), trips.rtt_ms(2, 0), trips.rtt_ms(2, 1)),
            (10, 20, 30)
        );
        assert_eq!(trips.rtt_ms(1, 1), 0);
        assert_eq!(RoundTrips::HAMILTON.one_way_delay(1, 2), Duration::from_micros(25_500));
        for bad in ["12,62", "12,62,51,1", "12,x,51", "0,62,51", "12,62,1001"] {
            assert!(RoundTrips::from_str(bad).is_err(), "{bad}");
        }
    }

    /// Each region's file moves exactly the replicas of the other regions onto their relays for
    /// it, and every member, sentinels included, has a region.
    #[test]
    fn each_region_sees_the_others_through_its_relays() {
        let topology = local_topology();
        let placement = Placement::of(&topology, &BTreeMap::new()).unwrap();
        let needed = placement.relays_needed();
        // 3 groups of 3 replicas, each relayed for the 2 other regions.
        assert_eq!(needed.len(), 9 * 2);
        let relay_of: HashMap<(SocketAddr, usize), SocketAddr> = needed
            .iter()
            .enumerate()
            .map(|(i, &(address, _, from))| ((address, from), SocketAddr::from(([127, 0, 0, 2], 40_000 + i as u16))))
            .collect();
        for region in 0..REGIONS {
            let copy = region_topology(&topology, &placement, region, &relay_of).unwrap();
            for (original, moved) in topology.shard_groups.iter().zip(&copy.shard_groups) {
                for (index, (a, b)) in original.replicas.iter().zip(&moved.replicas).enumerate() {
                    if index == region {
                        assert_eq!(a.address, b.address);
                    } else {
                        assert_eq!(b.address, relay_of[&(a.address, region)]);
                    }
                }
            }
            assert_eq!(copy.sentinels, topology.sentinels);
            assert_eq!(copy.data_dir, topology.data_dir);
        }
        let members = specie_cluster::supervisor::members(Path::new("/tmp/x/cluster.toml"), &topology);
        let regions: Vec<usize> = members.iter().map(|m| placement.region_of(m).unwrap()).collect();
        assert_eq!(regions.iter().filter(|&&r| r == 2).count(), 3);
        assert!(members.iter().any(|m| m.name == "sentinel-0"));
    }

    /// Rotating a group's placement puts the replica that leads it in the region asked for, and
    /// still one replica in each region.
    #[test]
    fn a_rotation_puts_each_leader_in_the_region_asked_for() {
        let topology = local_topology();
        let leader_index: BTreeMap<String, usize> = [
            ("shard-0".to_string(), 2),
            ("shard-1".to_string(), 0),
            ("coordinator-0".to_string(), 1),
        ]
        .into();
        for region in 0..REGIONS {
            let placement = Placement::of(&topology, &Placement::rotation_to(&leader_index, region)).unwrap();
            for (group, &index) in &leader_index {
                let regions = &placement.replica_region[group];
                assert_eq!(regions[&(index as u64 + 1)], region, "{group}");
                let mut all: Vec<usize> = regions.values().copied().collect();
                all.sort();
                assert_eq!(all, vec![0, 1, 2]);
            }
        }
    }
}
