//! What the operator's tools ask of a running cluster, as the `operator.specie` identity: each
//! replica's own account of itself.

use std::time::Duration;

use specie_wire::InvalidWireLimits;

use crate::credentials::{self, CredentialsError};
use crate::group_client::{GroupClient, ReplicaCallError};
use crate::host::wire_limits;
use crate::identity::{GroupRole, Identity};
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

/// Why the operator cannot ask the replicas at all.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("invalid wire limits: {0}")]
    WireLimits(#[from] InvalidWireLimits),
}

/// Why one replica's status is not known.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Call(#[from] ReplicaCallError),
    #[error("unexpected answer {answer}")]
    UnexpectedAnswer { answer: String },
    #[error("its state changed while it was read ({reason})")]
    StateMoved { reason: String },
    #[error("the status is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

/// What one replica said about itself (its status JSON), or why it could not be asked.
pub struct ReplicaStatus {
    pub group: String,
    pub id: u64,
    pub status: Result<serde_json::Value, StatusError>,
}

impl ReplicaStatus {
    pub fn is_leader(&self) -> bool {
        self.status.as_ref().is_ok_and(|s| s["role"] == "leader")
    }
}

/// The status of every replica of every group (or only of `group`), asked one by one.
pub async fn replica_statuses(
    topology: &Topology,
    group: Option<&str>,
    timeout: Duration,
) -> Result<Vec<ReplicaStatus>, OperatorError> {
    let wanted = |_: GroupRole, name: &str| group.is_none_or(|wanted| wanted == name);
    ask_every_replica(topology, wanted, &RoleRequest::Status, timeout).await
}

/// What every replica of every group whose role keeps a digest (the shards: their UHS) says of
/// its own state, asked one by one; a group whose role keeps none is not asked.
pub async fn replica_digests(topology: &Topology, timeout: Duration) -> Result<Vec<ReplicaStatus>, OperatorError> {
    let wanted = |role: GroupRole, _: &str| role == GroupRole::Shard;
    ask_every_replica(topology, wanted, &RoleRequest::ReplicaDigest, timeout).await
}

/// The whole applied state of the replica `leaders` names in each group (its role's snapshot
/// encoding), with the applied index it is of, by group, read in chunks, one group after another.
pub async fn replica_states(
    topology: &Topology,
    leaders: &std::collections::BTreeMap<String, u64>,
    timeout: Duration,
) -> Result<Vec<(String, Result<(u64, Vec<u8>), StatusError>)>, OperatorError> {
    let transport = credentials::transport(topology, &Identity::Operator)?;
    let limits = wire_limits(topology);
    let mut states = vec![];
    for (role, name, replicas) in topology.replica_groups() {
        let Some(&leader) = leaders.get(&name) else { continue };
        let client = GroupClient::new(role, &name, &replicas, &limits, &transport)?;
        states.push((name, read_state(&client, leader, timeout).await));
    }
    Ok(states)
}

/// The largest state a backup reads of one group (the operator's memory holds it whole).
pub const STATE_BYTES_MAX: u64 = 64 << 30;

/// One replica's state, chunk by chunk; refused if it changed between chunks. Grows by the
/// chunks that arrived, never by the length the replica claims.
async fn read_state(client: &GroupClient, id: u64, timeout: Duration) -> Result<(u64, Vec<u8>), StatusError> {
    let mut state = Vec::new();
    let mut first_applied = None;
    loop {
        let request = RoleRequest::ReplicaSnapshot {
            offset: state.len() as u64,
        };
        let (applied_index, total_bytes, chunk) = match client.call_replica(id, &request, timeout).await? {
            RoleResponse::Snapshot {
                applied_index,
                total_bytes,
                chunk,
            } => (applied_index, total_bytes, chunk),
            other => {
                return Err(StatusError::UnexpectedAnswer {
                    answer: format!("{other:?}").chars().take(200).collect(),
                })
            }
        };
        let first = *first_applied.get_or_insert(applied_index);
        let read = (state.len() + chunk.len()) as u64;
        if first != applied_index {
            return Err(StatusError::StateMoved {
                reason: format!("at applied index {first} then {applied_index}"),
            });
        }
        if read > total_bytes.min(STATE_BYTES_MAX) || (chunk.is_empty() && read < total_bytes) {
            return Err(StatusError::UnexpectedAnswer {
                answer: format!(
                    "a chunk of {} bytes at byte {} of a state of {total_bytes} (at most {STATE_BYTES_MAX} read)",
                    chunk.len(),
                    state.len()
                ),
            });
        }
        state.extend_from_slice(&chunk);
        if read == total_bytes {
            return Ok((applied_index, state));
        }
    }
}

/// `request` (answered with JSON) asked of every replica of the groups `wanted` picks, one by one.
async fn ask_every_replica(
    topology: &Topology,
    wanted: impl Fn(GroupRole, &str) -> bool,
    request: &RoleRequest,
    timeout: Duration,
) -> Result<Vec<ReplicaStatus>, OperatorError> {
    let transport = credentials::transport(topology, &Identity::Operator)?;
    let limits = wire_limits(topology);
    let mut answers = vec![];
    for (role, name, replicas) in topology.replica_groups() {
        if !wanted(role, &name) {
            continue;
        }
        let client = GroupClient::new(role, &name, &replicas, &limits, &transport)?;
        for replica in &replicas {
            let status = match client.call_replica(replica.id, request, timeout).await {
                Ok(RoleResponse::Status(json)) => serde_json::from_str(&json).map_err(StatusError::NotJson),
                Ok(other) => Err(StatusError::UnexpectedAnswer {
                    answer: format!("{other:?}"),
                }),
                Err(error) => Err(error.into()),
            };
            answers.push(ReplicaStatus {
                group: name.clone(),
                id: replica.id,
                status,
            });
        }
    }
    Ok(answers)
}
