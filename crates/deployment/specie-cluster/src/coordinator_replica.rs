//! A coordinator group member (Hamilton §4.2): the coordinator role
//! ([`specie_coordinator::Coordinator`]) as the ordering role of the 2PC shape
//! ([`crate::ordering_replica`]), driving two-phase commit on the shard groups.

use specie_coordinator::{
    Coordinator, CoordinatorConfig, CoordinatorInput, CoordinatorReport, CoordinatorState, TxOutcome,
};
use specie_host::RoleMachine;
use specie_role::Ticket;
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::CompactTransaction;

use crate::host::ReplicaError;
use crate::identity::Identity;
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

pub use crate::ordering_replica::{
    Admission, EndorsementGate, EndorsementRefusal, OrderingRole, ShardCallError, ShardGroupCall, ShardGroups,
};

/// The coordinator role as Raft's state machine.
pub type CoordinatorMachine = RoleMachine<Coordinator>;

/// A running coordinator replica.
pub type CoordinatorReplica = crate::ordering_replica::OrderingReplica<Coordinator>;

/// A coordinator's initial state, the same on every replica of its group.
pub fn coordinator_machine(config: CoordinatorConfig) -> CoordinatorMachine {
    RoleMachine::new(Coordinator::new(config, CoordinatorState::default()))
}

/// A shard group's response to a batch, as the coordinator takes it: its answers, or why not.
pub fn shard_answers(response: RoleResponse) -> Result<Vec<ShardResponse>, ShardCallError> {
    match response {
        RoleResponse::ShardBatch(answers) => Ok(answers),
        other => Err(ShardCallError::UnexpectedReply(Box::new(other))),
    }
}

impl OrderingRole for Coordinator {
    type Answer = ShardResponse;

    fn submit(ticket: Ticket, tx: CompactTransaction) -> CoordinatorInput {
        CoordinatorInput::Submit { ticket, tx }
    }

    fn answer(shard: usize, response: ShardResponse) -> CoordinatorInput {
        CoordinatorInput::ShardAnswer { shard, response }
    }

    fn shard_count(&self) -> usize {
        self.config().shards.len()
    }

    fn request(requests: Vec<ShardRequest>) -> RoleRequest {
        RoleRequest::ShardBatch(requests)
    }

    fn answers(response: RoleResponse) -> Result<Vec<ShardResponse>, ShardCallError> {
        shard_answers(response)
    }

    fn log_report(report: CoordinatorReport) {
        specie_api::observe::coordinator_reported(&report);
    }

    fn settled(report: &CoordinatorReport) -> Option<&TxOutcome> {
        match report {
            CoordinatorReport::Settled(outcome) => Some(outcome),
            CoordinatorReport::ShardRefused { .. } | CoordinatorReport::Finished(_) => None,
        }
    }
}

/// Runs replica `id` of coordinator group `group` until stopped.
pub async fn run(topology: Topology, group: String, id: u64) -> Result<(), ReplicaError> {
    let coordinator_group = topology.coordinator_group(&group)?.clone();
    let mut config = CoordinatorConfig::with_shards(topology.shard_ranges());
    config.batch_transactions_max = topology.limits.batch_transactions_max as usize;
    config.dtxns_in_flight_max = topology.limits.dtxns_in_flight_max as usize;
    config.retry_timeout_ms = topology.limits.request_timeout_ms;
    let me = Identity::coordinator(&group, id);
    crate::ordering_replica::run(topology, me, &coordinator_group.replicas, coordinator_machine(config)).await
}
