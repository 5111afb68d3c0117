//! Raft's messages between the replicas of one group, carried by `specie-wire`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use specie_codec::Encode;
use specie_raft::{NodeId, RaftTransport, RpcFuture, TransportError};
use specie_wire::{Client, InvalidWireLimits, Transport, WireError, WireLimits};

use crate::group_client::replica_client;
use crate::identity::GroupRole;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Replica;

pub struct WireRaftTransport {
    peers: BTreeMap<NodeId, Client>,
    timeout: Duration,
}

impl WireRaftTransport {
    /// Clients for the other replicas of `group`, each expecting the peer's certificate to name it.
    pub fn new(
        role: GroupRole,
        group: &str,
        replicas: &[Replica],
        local: NodeId,
        limits: &WireLimits,
        transport: Transport,
        timeout: Duration,
    ) -> Result<Arc<Self>, InvalidWireLimits> {
        let peers = replicas
            .iter()
            .filter(|r| r.id != local)
            .map(|r| Ok((r.id, replica_client(role, group, r, limits, &transport)?)))
            .collect::<Result<_, InvalidWireLimits>>()?;
        Ok(Arc::new(WireRaftTransport { peers, timeout }))
    }
}

impl RaftTransport for WireRaftTransport {
    fn call(&self, target: NodeId, request: Vec<u8>) -> RpcFuture<'_> {
        Box::pin(async move {
            let client = self.peers.get(&target).ok_or_else(|| TransportError::Unreachable {
                node: target,
                reason: "not a member of this group".into(),
            })?;
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
