//! Calls to a replica group: find its leader, follow `NotLeader` hints, fail over on silence.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use specie_codec::{DecodeError, Encode};
use specie_wire::{Client, InvalidWireLimits, Transport, WireError, WireLimits};
use tokio::time::Instant;

use crate::identity::{GroupRole, Identity};
use crate::live;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::{Replica, Topology, ARCHIVER_GROUP};

/// Pause before trying the next replica when none answers, so a group mid-election is not
/// hammered; bounded by the caller's deadline.
const LEADER_SEARCH_PAUSE_MS: u64 = 50;

/// An idempotent call gives one replica at most this share of its time: a replica cut off by the
/// network answers nothing (no reset, no refusal) until the attempt's deadline, and the call must
/// have time left for the others.
const ATTEMPTS_PER_CALL_MIN: u32 = 4;

#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("group {group}: no leader answered within {timeout_ms} ms (last error: {last})")]
    NoLeader {
        group: String,
        timeout_ms: u64,
        last: String,
    },
    #[error("group {group}: the request may or may not have executed: {reason}")]
    OutcomeUnknown { group: String, reason: String },
    #[error("group {group}: malformed response: {reason}")]
    Malformed { group: String, reason: String },
}

/// Why one specific replica gave no usable answer ([`GroupClient::call_replica`]).
#[derive(Debug, thiserror::Error)]
pub enum ReplicaCallError {
    #[error("group {group} has no replica {id}")]
    NoSuchReplica { group: String, id: u64 },
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("malformed response: {0}")]
    Malformed(#[source] DecodeError),
}

/// A client for replica `replica` of `group`, which must prove it is that replica.
pub fn replica_client(
    role: GroupRole,
    group: &str,
    replica: &Replica,
    limits: &WireLimits,
    transport: &Transport,
) -> Result<Client, InvalidWireLimits> {
    let identity = Identity::Replica {
        role,
        group: group.to_string(),
        id: replica.id,
    };
    Client::new(
        replica.address.to_string(),
        identity.to_string(),
        limits.clone(),
        transport.clone(),
    )
}

/// A client for one replica group. Cheap to clone. In a process that follows its cluster file
/// ([`crate::live`]), it follows the group's membership: replicas added are called, replicas
/// removed are not.
#[derive(Clone)]
pub struct GroupClient {
    name: String,
    role: GroupRole,
    limits: WireLimits,
    transport: Transport,
    members: Arc<RwLock<Members>>,
    /// Index into the replicas of the replica believed to lead.
    leader: Arc<AtomicUsize>,
}

/// The clients for the group's replicas, as of a generation of the followed cluster file.
struct Members {
    generation: u64,
    replicas: Arc<Vec<(u64, Client)>>,
}

impl GroupClient {
    /// A client for group `name` of `role`; each replica must prove it is that group's member.
    pub fn new(
        role: GroupRole,
        name: &str,
        replicas: &[Replica],
        limits: &WireLimits,
        transport: &Transport,
    ) -> Result<GroupClient, InvalidWireLimits> {
        let clients = replicas
            .iter()
            .map(|r| Ok((r.id, replica_client(role, name, r, limits, transport)?)))
            .collect::<Result<Vec<_>, InvalidWireLimits>>()?;
        Ok(GroupClient {
            name: name.to_string(),
            role,
            limits: limits.clone(),
            transport: transport.clone(),
            members: Arc::new(RwLock::new(Members {
                generation: live::generation(),
                replicas: Arc::new(clients),
            })),
            leader: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The group's replicas now: rebuilt (keeping the clients of replicas still there) when the
    /// followed cluster file changed the membership.
    fn replicas(&self) -> Arc<Vec<(u64, Client)>> {
        let generation = live::generation();
        {
            // Every call passes here: a shared read while the membership is unchanged.
            let members = self.members.read();
            if members.generation == generation {
                return members.replicas.clone();
            }
        }
        let mut members = self.members.write();
        if members.generation != generation {
            members.generation = generation;
            if let Some(topology) = live::followed() {
                let groups = topology.replica_groups();
                let listed = (groups.iter())
                    .find(|(role, name, _)| *role == self.role && *name == self.name)
                    .map(|(_, _, replicas)| replicas.clone());
                if let Some(listed) = listed.filter(|listed| !listed.is_empty()) {
                    let rebuilt: Vec<(u64, Client)> = (listed.iter())
                        .filter_map(|replica| {
                            let kept = members.replicas.iter().find(|(id, _)| *id == replica.id);
                            let client = match kept {
                                Some((_, client)) => client.clone(),
                                None => replica_client(self.role, &self.name, replica, &self.limits, &self.transport)
                                    .ok()?,
                            };
                            Some((replica.id, client))
                        })
                        .collect();
                    members.replicas = Arc::new(rebuilt);
                }
            }
        }
        members.replicas.clone()
    }

    /// A client for the topology's archiver group, if it keeps a ledger of record.
    pub fn archiver(
        topology: &Topology,
        limits: &WireLimits,
        transport: &Transport,
    ) -> Result<Option<GroupClient>, InvalidWireLimits> {
        (topology.ledger_of_record.as_ref())
            .map(|ledger| GroupClient::new(GroupRole::Archiver, ARCHIVER_GROUP, &ledger.replicas, limits, transport))
            .transpose()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sends an idempotent `request` to the leader, retrying other replicas until `timeout`.
    pub async fn call(&self, request: &RoleRequest, timeout: Duration) -> Result<RoleResponse, GroupError> {
        self.call_with(request, timeout, true).await
    }

    /// Sends a request that must not run twice: it is retried elsewhere only when a replica
    /// said it is not the leader, or when it certainly never left this process. Any other
    /// failure is returned at once, because the request may have executed.
    pub async fn call_once(&self, request: &RoleRequest, timeout: Duration) -> Result<RoleResponse, GroupError> {
        self.call_with(request, timeout, false).await
    }

    async fn call_with(
        &self,
        request: &RoleRequest,
        timeout: Duration,
        idempotent: bool,
    ) -> Result<RoleResponse, GroupError> {
        let deadline = Instant::now() + timeout;
        let bytes = request.encode();
        let mut last = String::from("no attempt");
        let mut attempts = 0usize;
        // Replicas that did not answer in this call: a follower's hint that names one of them
        // (it may not have heard of a newer leader yet) is passed over once, so that another
        // replica is asked before going back into the silence; a leader only slow is asked again
        // at the next hint to it.
        let mut silent: Vec<u64> = vec![];
        while Instant::now() < deadline {
            let replicas = self.replicas();
            let index = self.leader.load(Ordering::Relaxed) % replicas.len();
            let (id, client) = &replicas[index];
            // A call that must not run twice is not sent elsewhere after silence: it keeps the
            // half it always had.
            let share = if idempotent { ATTEMPTS_PER_CALL_MIN } else { 2 };
            let attempt_deadline = deadline.min(Instant::now() + timeout / share);
            match client.call_by(bytes.clone(), attempt_deadline).await {
                Ok(reply) => match RoleResponse::decode(&reply) {
                    Ok(RoleResponse::NotLeader(hint)) => {
                        last = format!("replica {id} is not the leader");
                        let hint = match hint.and_then(|h| silent.iter().position(|s| *s == h)) {
                            Some(at) => {
                                silent.swap_remove(at);
                                None
                            }
                            None => hint,
                        };
                        let followed = hint
                            .and_then(|h| replicas.iter().position(|(rid, _)| *rid == h))
                            .filter(|next| *next != index);
                        self.leader
                            .store(followed.unwrap_or((index + 1) % replicas.len()), Ordering::Relaxed);
                        if followed.is_none() {
                            tokio::time::sleep(Duration::from_millis(LEADER_SEARCH_PAUSE_MS)).await;
                        }
                    }
                    Ok(response) => return Ok(response),
                    Err(error) => {
                        return Err(GroupError::Malformed {
                            group: self.name.clone(),
                            reason: error.to_string(),
                        })
                    }
                },
                Err(error) => {
                    if !idempotent && !error.certainly_not_sent() {
                        return Err(GroupError::OutcomeUnknown {
                            group: self.name.clone(),
                            reason: error.to_string(),
                        });
                    }
                    last = format!("replica {id}: {error}");
                    silent.push(*id);
                    self.leader.store((index + 1) % replicas.len(), Ordering::Relaxed);
                    attempts += 1;
                    if attempts.is_multiple_of(replicas.len()) {
                        tokio::time::sleep(Duration::from_millis(LEADER_SEARCH_PAUSE_MS)).await;
                    }
                }
            }
        }
        Err(GroupError::NoLeader {
            group: self.name.clone(),
            timeout_ms: timeout.as_millis() as u64,
            last,
        })
    }

    /// Asks one specific replica (status pages), without leader search.
    pub async fn call_replica(
        &self,
        id: u64,
        request: &RoleRequest,
        timeout: Duration,
    ) -> Result<RoleResponse, ReplicaCallError> {
        let replicas = self.replicas();
        let (_, client) =
            replicas
                .iter()
                .find(|(rid, _)| *rid == id)
                .ok_or_else(|| ReplicaCallError::NoSuchReplica {
                    group: self.name.clone(),
                    id,
                })?;
        let reply = client.call(request.encode(), timeout).await?;
        RoleResponse::decode(&reply).map_err(ReplicaCallError::Malformed)
    }
}
