//! Raft's messages between the replicas of one group, carried by `specie-wire`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use specie_codec::Encode;
use specie_raft::{NodeId, RaftTransport, RpcFuture, TransportError};
use specie_wire::{Client, Transport, WireError, WireLimits};

use crate::group_client::replica_client;
use crate::identity::GroupRole;
use crate::live;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

/// Clients for the other replicas of one group, made as Raft first calls each: a replica added
/// to the group since this one started is found in the cluster file as this process follows it
/// ([`crate::live`]).
pub struct WireRaftTransport {
    role: GroupRole,
    group: String,
    topology: Arc<Topology>,
    limits: WireLimits,
    transport: Transport,
    peers: RwLock<BTreeMap<NodeId, Client>>,
    timeout: Duration,
}

impl WireRaftTransport {
    /// A transport for a replica of `group`, each peer expected to prove, by its certificate,
    /// that it is the replica it is called as.
    pub fn new(
        role: GroupRole,
        group: &str,
        topology: &Topology,
        limits: WireLimits,
        transport: Transport,
        timeout: Duration,
    ) -> Arc<Self> {
        Arc::new(WireRaftTransport {
            role,
            group: group.to_string(),
            topology: Arc::new(topology.clone()),
            limits,
            transport,
            peers: RwLock::default(),
            timeout,
        })
    }

    fn client(&self, target: NodeId) -> Result<Client, TransportError> {
        if let Some(client) = self.peers.read().get(&target) {
            return Ok(client.clone());
        }
        let unreachable = |reason: String| TransportError::Unreachable { node: target, reason };
        let topology = live::current(&self.topology);
        let groups = topology.replica_groups();
        let replica = (groups.iter())
            .find(|(role, name, _)| *role == self.role && *name == self.group)
            .and_then(|(_, _, replicas)| replicas.iter().find(|r| r.id == target))
            .ok_or_else(|| unreachable("not a member of this group in the cluster file".into()))?;
        let client = replica_client(self.role, &self.group, replica, &self.limits, &self.transport)
            .map_err(|error| unreachable(error.to_string()))?;
        Ok(self.peers.write().entry(target).or_insert(client).clone())
    }
}

impl RaftTransport for WireRaftTransport {
    fn call(&self, target: NodeId, request: Vec<u8>) -> RpcFuture<'_> {
        Box::pin(async move {
            let client = self.client(target)?;
            let reply = client
                .call(RoleRequest::Raft(request).encode(), self.timeout)
                .await
                .map_err(|error| match error {
                    WireError::ConnectFailed { .. } | WireError::Unavailable { .. } => TransportError::Unreachable {
                        node: target,
                        reason: error.to_string(),
                    },
                    other => TransportError::Lost {
                        node: target,
                        reason: other.to_string(),
                    },
                })?;
            match RoleResponse::decode(&reply) {
                Ok(RoleResponse::Raft(bytes)) => Ok(bytes),
                Ok(other) => Err(TransportError::Lost {
                    node: target,
                    reason: format!("unexpected reply {other:?}"),
                }),
                Err(error) => Err(TransportError::Lost {
                    node: target,
                    reason: error.to_string(),
                }),
            }
        })
    }
}
