//! The online core's UHS as other roles read it: before crediting a funding, an authority
//! (FastPay's or the offline one) finds the funding's marker in the UHS itself, asking the shard
//! group that owns it, and takes no one's word for it; the archiver reads there what became of
//! records nobody reported; sentinels answer the wallets' UHS queries.

use std::time::Duration;

use specie_shard::ShardRange;
use specie_transaction::UhsId;
use specie_wire::{InvalidWireLimits, Transport, WireLimits};

use crate::group_client::{GroupClient, GroupError};
use crate::identity::GroupRole;
use crate::protocol::{RoleRequest, RoleResponse, BATCH_ITEMS_MAX};
use crate::Topology;

/// A query waits this many request time-outs: the shard group may be electing a leader.
const QUERY_TIMEOUTS: u32 = 5;

/// The online core's shard groups, as other roles read the UHS.
pub struct CoreUhs {
    groups: Vec<GroupClient>,
    ranges: Vec<ShardRange>,
    timeout: Duration,
}

impl CoreUhs {
    pub fn new(topology: &Topology, limits: &WireLimits, transport: &Transport) -> Result<CoreUhs, InvalidWireLimits> {
        let groups = topology
            .shard_groups
            .iter()
            .map(|g| GroupClient::new(GroupRole::Shard, &g.name, &g.replicas, limits, transport))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CoreUhs {
            groups,
            ranges: topology.shard_ranges(),
            timeout: Duration::from_millis(topology.limits.request_timeout_ms) * QUERY_TIMEOUTS,
        })
    }

    /// How many shard groups hold the UHS.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Every id of every shard group, group by group (ascending ranges, each ascending).
    pub async fn all_ids(&self) -> Result<Vec<Vec<UhsId>>, GroupError> {
        let mut all = vec![];
        for group in &self.groups {
            match group.call(&RoleRequest::ShardIds, self.timeout).await? {
                RoleResponse::ShardIds(ids) => all.push(ids),
                other => {
                    return Err(GroupError::Malformed {
                        group: group.name().to_string(),
                        reason: format!("answered {}", other_kind(&other)),
                    })
                }
            }
        }
        Ok(all)
    }

    /// Whether `marker` is in the UHS, asked of the shard group that owns it.
    pub async fn contains(&self, marker: UhsId) -> Result<bool, GroupError> {
        Ok(self.holds(&[marker]).await?[0])
    }

    /// Which of `ids` are in the UHS: queries to each shard group that owns some of them, of at
    /// most [`BATCH_ITEMS_MAX`] ids each (what a shard decodes), so an audit of any size is asked.
    pub async fn holds(&self, ids: &[UhsId]) -> Result<Vec<bool>, GroupError> {
        let mut present = vec![false; ids.len()];
        for (shard, asked) in queries(&self.ranges, ids, BATCH_ITEMS_MAX as usize) {
            let (positions, shard_ids): (Vec<usize>, Vec<UhsId>) = asked.into_iter().unzip();
            let count = shard_ids.len();
            let group = &self.groups[shard];
            match group.call(&RoleRequest::ShardQuery(shard_ids), self.timeout).await? {
                RoleResponse::ShardQuery(answers) if answers.len() == count => {
                    for (position, answer) in positions.into_iter().zip(answers) {
                        present[position] = answer;
                    }
                }
                other => {
                    return Err(GroupError::Malformed {
                        group: group.name().to_string(),
                        reason: format!("answered {}", other_kind(&other)),
                    })
                }
            }
        }
        Ok(present)
    }
}

/// `ids` as queries of at most `ids_max` ids each to the shard groups owning them: each query
/// its group's index and its ids, each with its position in `ids`.
fn queries(ranges: &[ShardRange], ids: &[UhsId], ids_max: usize) -> Vec<(usize, Vec<(usize, UhsId)>)> {
    let mut by_shard: Vec<Vec<(usize, UhsId)>> = vec![vec![]; ranges.len()];
    for (position, id) in ids.iter().enumerate() {
        by_shard[ShardRange::owner(ranges, id)].push((position, *id));
    }
    (by_shard.iter().enumerate())
        .flat_map(|(shard, asked)| asked.chunks(ids_max).map(move |chunk| (shard, chunk.to_vec())))
        .collect()
}

impl CoreUhs {
    /// Whether a funding's marker is in the UHS, as the services that credit fundings (the
    /// offline authority, the exchange) ask it.
    pub async fn holds_marker(&self, marker: [u8; 32]) -> Result<bool, specie_service::CoreCheckError> {
        self.contains(UhsId(marker))
            .await
            .map_err(|error| specie_service::CoreCheckError::Unreachable {
                at: "the cluster's shard groups".into(),
                reason: error.to_string(),
            })
    }
}

/// A response's kind, for refusals of an unexpected answer (never its payload).
pub(crate) fn other_kind(response: &RoleResponse) -> &'static str {
    match response {
        RoleResponse::NotLeader(_) => "not leader",
        RoleResponse::ArchiveBusy => "busy",
        RoleResponse::Status(_) => "a status",
        _ => "something else",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_of_any_size_is_asked_in_pieces_a_shard_decodes() {
        let ranges = ShardRange::partition(2).unwrap();
        // Ids 0x00.. belong to shard 0, 0xff.. to shard 1; positions interleave.
        let ids: Vec<UhsId> = (0..7u8)
            .map(|n| UhsId([if n % 2 == 0 { 0 } else { 0xff }; 32]))
            .collect();
        let asked = queries(&ranges, &ids, 3);
        let shape: Vec<(usize, Vec<usize>)> = (asked.iter())
            .map(|(shard, chunk)| (*shard, chunk.iter().map(|(position, _)| *position).collect()))
            .collect();
        assert_eq!(shape, [(0, vec![0, 2, 4]), (0, vec![6]), (1, vec![1, 3, 5])]);
        assert!(asked.iter().all(|(shard, chunk)| chunk
            .iter()
            .all(|(position, id)| ids[*position] == *id && ShardRange::owner(&ranges, id) == *shard)));
        assert!(queries(&ranges, &[], 3).is_empty(), "nothing to ask, no query");
    }
}
