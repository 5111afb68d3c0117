//! A shard group member, in either shape of the core: 2PC's shard role ([`specie_shard::Shard`])
//! or the atomizer shape's ([`specie_atomizer::UhsShard`]), on the shared replicated host
//! (`specie_host::ReplicatedHost`). The leader makes each round of its ordering group's messages
//! durable as one Raft entry (one fsync per replica) before answering; reads are answered after
//! every request received before them has been applied. Which role a shard group runs is the
//! cluster file's shape: an `[atomizer]` section means the atomizer's.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;

use specie_atomizer::{ShardMessage, UhsShard, UhsShardInput, UhsShardReply, UhsShardReport};
use specie_host::{Calls, Gather, HostStopped, ReplicatedHost, RoleMachine, Slot, Wiring};
use specie_role::{Durable, Ticket};
use specie_shard::{
    CoordinatorIndex, Shard, ShardCall, ShardCommand, ShardInput, ShardRange, ShardRead, ShardReply, ShardResponse,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::host::{
    call_host, serve_replica, Caller, Hosted, ReplicaError, RoleStatus, ServeError, ROLE_CALLS_QUEUED_MAX,
};
use crate::identity::{GroupRole, Identity};
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

/// The 2PC shard role as Raft's state machine.
pub type ShardMachine = RoleMachine<Shard>;

/// A 2PC shard's initial state, the same on every replica of its group.
pub fn shard_machine(range: ShardRange) -> ShardMachine {
    RoleMachine::new(Shard::empty(range))
}

impl RoleStatus for RoleMachine<UhsShard> {
    fn role_status(&self) -> serde_json::Value {
        serde_json::json!({ "uhs_shard": { "height": self.role().height() } })
    }

    fn replica_digest(&self) -> Option<serde_json::Value> {
        Some(crate::host::uhs_digest_json(&self.role().sorted_ids()))
    }
}

/// A shard role of either shape: what a [`ShardReplica`] needs of it beyond the role contract.
/// A shard never sends on its own; callers wait for its replies.
pub trait ShardGroupRole:
    Durable<
        Peer = Infallible,
        Message = Infallible,
        Command: Send + Sync + 'static,
        Input: Send + 'static,
        Reply: Send + 'static,
        Report: Send + 'static,
    > + Send
    + Sync
    + 'static
{
    type Call: Send + 'static;
    fn input(call: Self::Call, ticket: Ticket) -> Self::Input;
    fn read(read: ShardRead) -> Self::Call;
    /// The answer to a [`ShardGroupRole::read`].
    fn read_reply(reply: Self::Reply) -> Option<ShardReply>;
    /// The ordering group's round as calls, or `None` for a request this shape's shards do not
    /// take (a 2PC batch to an atomizer shape's shard, or the reverse). `coordinator` is the
    /// sending coordinator group's index (the atomizer shape has one ordering group).
    fn ordering_calls(coordinator: CoordinatorIndex, request: RoleRequest) -> Option<Vec<Self::Call>>;
    /// The ordering group's answer to [`ShardGroupRole::ordering_calls`], from their replies.
    fn ordering_response(replies: Vec<Self::Reply>) -> Option<RoleResponse>;
    fn log_report(report: Self::Report);
}

impl ShardGroupRole for Shard {
    type Call = ShardCall;

    fn input(call: ShardCall, ticket: Ticket) -> ShardInput {
        call.into_input(ticket)
    }

    fn read(read: ShardRead) -> ShardCall {
        ShardCall::Read(read)
    }

    fn read_reply(reply: ShardReply) -> Option<ShardReply> {
        Some(reply)
    }

    fn ordering_calls(coordinator: CoordinatorIndex, request: RoleRequest) -> Option<Vec<ShardCall>> {
        match request {
            RoleRequest::ShardBatch(requests) => Some(
                requests
                    .into_iter()
                    .map(|request| ShardCall::Request(ShardCommand { coordinator, request }))
                    .collect(),
            ),
            _ => None,
        }
    }

    fn ordering_response(replies: Vec<ShardReply>) -> Option<RoleResponse> {
        let responses = replies.into_iter().map(|reply| match reply {
            ShardReply::Response(response) => Some(response),
            _ => None,
        });
        responses
            .collect::<Option<Vec<ShardResponse>>>()
            .map(RoleResponse::ShardBatch)
    }

    fn log_report(report: Infallible) {
        match report {}
    }
}

/// What a caller hands the atomizer shape's shard: a message of the atomizer, or a read.
pub enum UhsShardCall {
    Atomizer(ShardMessage),
    Read(ShardRead),
}

impl ShardGroupRole for UhsShard {
    type Call = UhsShardCall;

    fn input(call: UhsShardCall, ticket: Ticket) -> UhsShardInput {
        match call {
            UhsShardCall::Atomizer(message) => UhsShardInput::Atomizer { ticket, message },
            UhsShardCall::Read(read) => UhsShardInput::Read { ticket, read },
        }
    }

    fn read(read: ShardRead) -> UhsShardCall {
        UhsShardCall::Read(read)
    }

    fn read_reply(reply: UhsShardReply) -> Option<ShardReply> {
        match reply {
            UhsShardReply::Read(reply) => Some(reply),
            UhsShardReply::Answer(_) => None,
        }
    }

    fn ordering_calls(_atomizer: CoordinatorIndex, request: RoleRequest) -> Option<Vec<UhsShardCall>> {
        match request {
            RoleRequest::AtomizerShard(messages) => Some(messages.into_iter().map(UhsShardCall::Atomizer).collect()),
            _ => None,
        }
    }

    fn ordering_response(replies: Vec<UhsShardReply>) -> Option<RoleResponse> {
        let answers = replies.into_iter().map(|reply| match reply {
            UhsShardReply::Answer(answer) => Some(answer),
            UhsShardReply::Read(_) => None,
        });
        answers.collect::<Option<Vec<_>>>().map(RoleResponse::AtomizerShard)
    }

    fn log_report(report: UhsShardReport) {
        let UhsShardReport::BlockRefused { height, id } = report;
        tracing::error!(
            height,
            %id,
            "the atomizer's block does not fit this shard's UHS: the shard stays where it is until an operator looks"
        );
    }
}

/// Callers wait for shard replies; a shard never sends on its own.
struct ShardReplicaWiring<R>(PhantomData<fn() -> R>);

impl<R: ShardGroupRole> Wiring<R> for ShardReplicaWiring<R> {
    type Call = R::Call;
    type ReplyTo = Slot<R::Reply>;

    fn input(call: R::Call, ticket: Ticket) -> R::Input {
        R::input(call, ticket)
    }

    fn send(&mut self, to: Infallible, _message: Infallible) {
        match to {}
    }

    fn reply(&mut self, slot: Slot<R::Reply>, reply: R::Reply) {
        slot.fill(reply);
    }

    fn report(&mut self, report: R::Report) {
        R::log_report(report);
    }
}

/// A running shard replica: its Raft replica and the way into its host.
pub struct ShardReplica<R: ShardGroupRole = Shard> {
    pub hosted: Arc<Hosted<RoleMachine<R>>>,
    calls: mpsc::Sender<Calls<ShardReplicaWiring<R>, R>>,
    /// The cluster's coordinator groups, by name, in the topology's order: a coordinator's
    /// index is its group's position here.
    coordinator_groups: Vec<String>,
}

impl<R: ShardGroupRole> ShardReplica<R> {
    /// Starts the shard's host on `hosted`, serving the coordinator groups named (in the
    /// topology's order); the task ends when the replica stops.
    pub fn start(
        hosted: Arc<Hosted<RoleMachine<R>>>,
        coordinator_groups: Vec<String>,
    ) -> (Arc<ShardReplica<R>>, JoinHandle<Result<(), HostStopped>>) {
        let (calls, calls_rx) = mpsc::channel(ROLE_CALLS_QUEUED_MAX);
        let wiring = ShardReplicaWiring(PhantomData);
        let mut host = ReplicatedHost::new(hosted.group.clone(), hosted.replica.clone(), wiring);
        if let Some(plan) = hosted.snapshots {
            host = host.with_snapshots(plan);
        }
        // A shard takes no peer messages: its inputs all come as calls.
        let (_no_inputs, inputs_rx) = mpsc::channel(1);
        let task = tokio::spawn(host.run(calls_rx, inputs_rx));
        let replica = ShardReplica {
            hosted,
            calls,
            coordinator_groups,
        };
        (Arc::new(replica), task)
    }

    /// Which coordinator's dtxns an ordering round belongs to: the caller's coordinator group's
    /// index, from its certificate, never from the request. Any other caller the authorisation
    /// table lets send rounds (the atomizer) and an unauthenticated one (an insecure plaintext
    /// transport, which a topology allows only with one coordinator group) are index 0.
    fn coordinator_of(&self, caller: &Caller) -> Result<CoordinatorIndex, ServeError> {
        let Some(Identity::Replica {
            role: GroupRole::Coordinator,
            group,
            ..
        }) = caller.as_deref()
        else {
            return Ok(0);
        };
        self.coordinator_groups
            .iter()
            .position(|name| name == group)
            .and_then(|index| CoordinatorIndex::try_from(index).ok())
            .ok_or_else(|| {
                self.hosted.refuse(
                    caller,
                    format_args!("coordinator group '{group}' is not one of this cluster's"),
                )
            })
    }

    /// Serves one role request: the ordering group's round (made durable through Raft first), or
    /// a read of the UHS (on the leader, after every earlier request: a transaction reported
    /// confirmed is visible). A replica that does not lead answers `NotLeader`.
    pub async fn serve(&self, caller: Caller, request: RoleRequest) -> Result<RoleResponse, ServeError> {
        if !self.hosted.is_leader() {
            return Ok(self.hosted.not_leader());
        }
        match request {
            RoleRequest::ShardQuery(ids) => {
                self.call(vec![R::read(ShardRead::Contains(ids))], "a UHS query", |replies| {
                    match <[R::Reply; 1]>::try_from(replies)
                        .ok()
                        .and_then(|[reply]| R::read_reply(reply))
                    {
                        Some(ShardReply::Contains(found)) => Some(RoleResponse::ShardQuery(found)),
                        _ => None,
                    }
                })
                .await
            }
            RoleRequest::ShardIds => {
                self.call(vec![R::read(ShardRead::SortedIds)], "a UHS listing", |replies| {
                    match <[R::Reply; 1]>::try_from(replies)
                        .ok()
                        .and_then(|[reply]| R::read_reply(reply))
                    {
                        Some(ShardReply::SortedIds(ids)) => Some(RoleResponse::ShardIds(ids)),
                        _ => None,
                    }
                })
                .await
            }
            other => {
                let kind = other.kind();
                let coordinator = self.coordinator_of(&caller)?;
                match R::ordering_calls(coordinator, other) {
                    Some(calls) if calls.is_empty() => Ok(R::ordering_response(vec![]).expect("no replies answer")),
                    Some(calls) => self.call(calls, "an ordering round", R::ordering_response).await,
                    None => Err(self.hosted.refuse(
                        &caller,
                        format_args!("a shard of this cluster's shape does not serve {kind}"),
                    )),
                }
            }
        }
    }

    async fn call(
        &self,
        calls: Vec<R::Call>,
        request: &'static str,
        respond: impl FnOnce(Vec<R::Reply>) -> Option<RoleResponse>,
    ) -> Result<RoleResponse, ServeError> {
        let (slots, gathered) = Gather::slots(calls.len());
        let calls = calls.into_iter().zip(slots).collect();
        call_host(&self.hosted, &self.calls, calls, gathered, request, respond).await
    }
}

/// Runs replica `id` of shard group `group` until stopped, with the shard role of the cluster's
/// shape.
pub async fn run(topology: Topology, group: String, id: u64) -> Result<(), ReplicaError> {
    let shard_group = topology.shard_group(&group)?.clone();
    let range = ShardRange {
        first: shard_group.range[0],
        last: shard_group.range[1],
    };
    let me = Identity::shard(&group, id);
    if topology.atomizer.is_some() {
        return serve_shard(
            &topology,
            me,
            &shard_group.replicas,
            RoleMachine::new(UhsShard::new(range)),
        )
        .await;
    }
    serve_shard(&topology, me, &shard_group.replicas, shard_machine(range)).await
}

async fn serve_shard<R: ShardGroupRole>(
    topology: &Topology,
    me: Identity,
    replicas: &[crate::topology::Replica],
    machine: RoleMachine<R>,
) -> Result<(), ReplicaError>
where
    RoleMachine<R>: RoleStatus,
{
    let coordinator_groups: Vec<String> = topology.coordinator_groups.iter().map(|g| g.name.clone()).collect();
    serve_replica(
        topology,
        me,
        replicas,
        machine,
        move |hosted| ShardReplica::start(hosted, coordinator_groups),
        |shard: Arc<ShardReplica<R>>, caller, request| async move { shard.serve(caller, request).await },
    )
    .await
}
