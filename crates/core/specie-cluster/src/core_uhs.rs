//! The online core's UHS as an authority reads it: before crediting a funding, an authority
//! (FastPay's or the offline one) finds the funding's marker in the UHS itself, asking the shard
//! group that owns it, and takes no one's word for it.

use std::time::Duration;

use specie_shard::ShardRange;
use specie_transaction::UhsId;
use specie_wire::{InvalidWireLimits, Transport, WireLimits};

use crate::group_client::{GroupClient, GroupError};
use crate::identity::GroupRole;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::Topology;

/// A query waits this many request time-outs: the shard group may be electing a leader.
const QUERY_TIMEOUTS: u32 = 5;

/// The online core's shard groups, as an authority reads the UHS.
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

    /// Whether `marker` is in the UHS, asked of the shard group that owns it.
    pub async fn contains(&self, marker: UhsId) -> Result<bool, GroupError> {
        let group = &self.groups[ShardRange::owner(&self.ranges, &marker)];
        match group.call(&RoleRequest::ShardQuery(vec![marker]), self.timeout).await? {
            RoleResponse::ShardQuery(present) if present.len() == 1 => Ok(present[0]),
            other => Err(GroupError::Malformed {
                group: group.name().to_string(),
                reason: format!("answered {}", other_kind(&other)),
            }),
        }
    }
}

impl CoreUhs {
    /// Whether a funding's marker is in the UHS, as the services that credit fundings (the
    /// offline authority, the exchange) ask it.
    pub async fn holds_marker(
        &self,
        marker: [u8; 32],
    ) -> Result<bool, specie_offline_service::service::CoreCheckError> {
        self.contains(UhsId(marker)).await.map_err(|error| {
            specie_offline_service::service::CoreCheckError::Unreachable {
                at: "the cluster's shard groups".into(),
                reason: error.to_string(),
            }
        })
    }
}

fn other_kind(response: &RoleResponse) -> &'static str {
    match response {
        RoleResponse::NotLeader(_) => "not leader",
        RoleResponse::Status(_) => "a status",
        _ => "something else",
    }
}
