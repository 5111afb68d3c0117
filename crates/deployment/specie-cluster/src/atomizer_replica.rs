//! An atomizer group member (Hamilton §5): the atomizer role ([`specie_atomizer::Atomizer`]) as
//! the ordering role of the atomizer shape ([`crate::ordering_replica`]). Its leader asks the
//! shard groups to attest each transaction's ids (wire tag 17), seals the transactions whose
//! attestations hold into the next block (durable in the group's Raft log before any shard sees
//! it), and streams each shard group its share of every block, in order. A new leader first
//! brings every shard group to its last block.
use specie_metrics::role::RoleFamily;

use specie_atomizer::{Atomizer, AtomizerConfig, AtomizerInput, AtomizerReport, ShardAnswer, ShardMessage};
use specie_coordinator::TxOutcome;
use specie_host::RoleMachine;
use specie_role::Ticket;
use specie_transaction::CompactTransaction;

use crate::host::{ReplicaError, RoleStatus};
use crate::identity::Identity;
use crate::ordering_replica::{OrderingRole, ShardCallError};
use crate::protocol::{RoleRequest, RoleResponse};
use crate::topology::Topology;

/// The atomizer role as Raft's state machine.
pub type AtomizerMachine = RoleMachine<Atomizer>;

impl RoleStatus for AtomizerMachine {
    fn role_status(&self) -> serde_json::Value {
        let atomizer = self.role();
        serde_json::json!({ "atomizer": {
            "height": atomizer.height(),
            "admitted": atomizer.admitted(),
            "shards_caught_up": atomizer.shards_caught_up(),
        }})
    }

    fn role_gauges(&self) -> Vec<(RoleFamily, f64)> {
        specie_api::observe::atomizer_gauges(self.role()).to_vec()
    }
}

impl OrderingRole for Atomizer {
    type Answer = ShardAnswer;

    fn submit(ticket: Ticket, tx: CompactTransaction) -> AtomizerInput {
        AtomizerInput::Submit { ticket, tx }
    }

    fn answer(shard: usize, answer: ShardAnswer) -> AtomizerInput {
        AtomizerInput::ShardAnswer { shard, answer }
    }

    fn shard_count(&self) -> usize {
        self.config().shards.len()
    }

    fn request(messages: Vec<ShardMessage>) -> RoleRequest {
        RoleRequest::AtomizerShard(messages)
    }

    fn answers(response: RoleResponse) -> Result<Vec<ShardAnswer>, ShardCallError> {
        match response {
            RoleResponse::AtomizerShard(answers) => Ok(answers),
            other => Err(ShardCallError::UnexpectedReply(Box::new(other))),
        }
    }

    fn log_report(report: AtomizerReport) {
        // A block of an earlier leader settling (its callers heard "dropped" or nothing) is
        // reported to the ledger of record by the replica's wiring (`settled`).
        specie_api::observe::atomizer_reported(&report);
    }

    fn settled(report: &AtomizerReport) -> Option<&TxOutcome> {
        match report {
            AtomizerReport::Settled(outcome) => Some(outcome),
            _ => None,
        }
    }
}

/// The atomizer's configuration in `topology` (which must have an `[atomizer]` section).
pub fn atomizer_config(topology: &Topology) -> Option<AtomizerConfig> {
    let group = topology.atomizer.as_ref()?;
    let mut config = AtomizerConfig::with_shards(topology.shard_ranges());
    config.window_blocks = group.window_blocks;
    config.block_transactions_max = group.block_transactions_max as usize;
    config.resend_after_ms = topology.limits.request_timeout_ms;
    Some(config)
}

/// Runs replica `id` of the atomizer group until stopped.
pub async fn run(topology: Topology, id: u64) -> Result<(), ReplicaError> {
    let Some(config) = atomizer_config(&topology) else {
        return Err(ReplicaError::NoAtomizer);
    };
    let replicas = topology
        .atomizer
        .as_ref()
        .map(|a| a.replicas.clone())
        .unwrap_or_default();
    let machine = RoleMachine::new(Atomizer::new(config));
    crate::ordering_replica::run(topology, Identity::atomizer(id), &replicas, machine).await
}
