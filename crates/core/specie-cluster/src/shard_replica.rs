//! A shard group member: the shard role ([`specie_shard::Shard`]) on the shared replicated host
//! (`specie_host::ReplicatedHost`). The leader makes each round of coordinator requests durable
//! as one Raft entry (one fsync per replica) before answering; reads are answered after every
//! request received before them has been applied.

use std::convert::Infallible;
use std::sync::Arc;

use specie_host::{Calls, Gather, HostStopped, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_role::Ticket;
use specie_shard::{Shard, ShardCall, ShardInput, ShardRange, ShardRead, ShardReply, ShardResponse};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::host::{call_host, serve_replica, Caller, Hosted, ReplicaError, ServeError, ROLE_CALLS_QUEUED_MAX};
use crate::identity::Identity;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

/// The shard role as Raft's state machine.
pub type ShardMachine = RoleMachine<Shard>;

/// A shard's initial state, the same on every replica of its group.
pub fn shard_machine(range: ShardRange) -> ShardMachine {
    RoleMachine::new(Shard::empty(range))
}

/// Callers wait for shard replies; a shard never sends or reports on its own.
struct ShardReplicaWiring;

impl Wiring<Shard> for ShardReplicaWiring {
    type Call = ShardCall;
    type ReplyTo = Slot<ShardReply>;

    fn input(call: ShardCall, ticket: Ticket) -> ShardInput {
        call.into_input(ticket)
    }

    fn send(&mut self, to: Infallible, _message: Infallible) {
        match to {}
    }

    fn reply(&mut self, slot: Slot<ShardReply>, reply: ShardReply) {
        slot.fill(reply);
    }

    fn report(&mut self, report: Infallible) {
        match report {}
    }
}

/// A running shard replica: its Raft replica and the way into its host.
pub struct ShardReplica {
    pub hosted: Arc<Hosted<ShardMachine>>,
    calls: mpsc::Sender<Calls<ShardReplicaWiring, Shard>>,
}

impl ShardReplica {
    /// Starts the shard's host on `hosted`; the task ends when the replica stops.
    pub fn start(hosted: Arc<Hosted<ShardMachine>>) -> (Arc<ShardReplica>, JoinHandle<Result<(), HostStopped>>) {
        let (calls, calls_rx) = mpsc::channel(ROLE_CALLS_QUEUED_MAX);
        let mut host = ReplicatedHost::new(hosted.group.clone(), hosted.replica.clone(), ShardReplicaWiring);
        if let Some(plan) = hosted.snapshots {
            host = host.with_snapshots(plan);
        }
        // A shard takes no peer messages: its inputs all come as calls.
        let (_no_inputs, inputs_rx) = mpsc::channel(1);
        let task = tokio::spawn(host.run(calls_rx, inputs_rx));
        (Arc::new(ShardReplica { hosted, calls }), task)
    }

    /// Serves one role request: a coordinator's batch (made durable through Raft first), or a
    /// read of the UHS (on the leader, after every earlier request: a transaction reported
    /// confirmed is visible). A replica that does not lead answers `NotLeader`.
    pub async fn serve(&self, caller: Caller, request: RoleRequest) -> Result<RoleResponse, ServeError> {
        if !self.hosted.is_leader() {
            return Ok(self.hosted.not_leader());
        }
        match request {
            RoleRequest::ShardBatch(requests) if requests.is_empty() => Ok(RoleResponse::ShardBatch(vec![])),
            RoleRequest::ShardBatch(requests) => {
                let calls = requests.into_iter().map(ShardCall::Request).collect();
                self.call(calls, "a shard batch", |replies| {
                    let responses = replies.into_iter().map(|reply| match reply {
                        ShardReply::Response(response) => Some(response),
                        _ => None,
                    });
                    responses
                        .collect::<Option<Vec<ShardResponse>>>()
                        .map(RoleResponse::ShardBatch)
                })
                .await
            }
            RoleRequest::ShardQuery(ids) => {
                self.call(
                    vec![ShardCall::Read(ShardRead::Contains(ids))],
                    "a UHS query",
                    |replies| match <[ShardReply; 1]>::try_from(replies) {
                        Ok([ShardReply::Contains(found)]) => Some(RoleResponse::ShardQuery(found)),
                        _ => None,
                    },
                )
                .await
            }
            RoleRequest::ShardIds => {
                self.call(
                    vec![ShardCall::Read(ShardRead::SortedIds)],
                    "a UHS listing",
                    |replies| match <[ShardReply; 1]>::try_from(replies) {
                        Ok([ShardReply::SortedIds(ids)]) => Some(RoleResponse::ShardIds(ids)),
                        _ => None,
                    },
                )
                .await
            }
            other => Err(self
                .hosted
                .refuse(&caller, format_args!("a shard does not serve {}", other.kind()))),
        }
    }

    async fn call(
        &self,
        calls: Vec<ShardCall>,
        request: &'static str,
        respond: impl FnOnce(Vec<ShardReply>) -> Option<RoleResponse>,
    ) -> Result<RoleResponse, ServeError> {
        let (slots, gathered) = Gather::slots(calls.len());
        let calls = calls.into_iter().zip(slots).collect();
        call_host(&self.hosted, &self.calls, calls, gathered, request, respond).await
    }
}

/// Runs replica `id` of shard group `group` until stopped.
pub async fn run(topology: Topology, group: String, id: u64) -> Result<(), ReplicaError> {
    let shard_group = topology.shard_group(&group)?.clone();
    let range = ShardRange {
        first: shard_group.range[0],
        last: shard_group.range[1],
    };
    serve_replica(
        &topology,
        Identity::shard(&group, id),
        &shard_group.replicas,
        shard_machine(range),
        ShardReplica::start,
        |shard: Arc<ShardReplica>, caller, request| async move { shard.serve(caller, request).await },
    )
    .await
}
