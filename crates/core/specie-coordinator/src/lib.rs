//! The transaction coordinator of Hamilton's two-phase commit (§4.1, §4.2), as pure state.
//!
//! Two parts, as in the paper's Raft-replicated coordinator:
//! - [`CoordinatorState`] is what every replica holds: the dtxns in flight and their last phase.
//!   It changes only through [`CoordinatorCommand`]s that the driver has made durable.
//! - [`Coordinator`] wraps the state and, on the leader, the engine that batches incoming
//!   compact transactions, proposes commands, fans requests out to shards, collects votes,
//!   retries silent shards and reports each transaction's outcome. A new leader resumes every
//!   dtxn from the start of its last durable phase; shards answer re-sent phases from memory.
//!
//! Hosts drive it through the role contract ([`specie_role::Role`], implemented in `role.rs`):
//! inputs with the time, outputs polled, proposals made durable and applied back, and a
//! deadline ([`Coordinator::deadline_ms`]) to sleep until.

mod codec;
mod engine;
mod role;
mod state;

pub use codec::CommandLimits;
pub use engine::{Coordinator, CoordinatorConfig, CoordinatorOutput, DtxnTimes, SubmitError, Tag, TxResult};
pub use role::{CoordinatorInput, CoordinatorReport, CoordinatorStateError, TxOutcome};
pub use specie_shard::DtxnId;
pub use state::{ActiveDtxn, Applied, CoordinatorCommand, CoordinatorState, InvariantViolation};

/// Most coordinators (embedded) or coordinator groups (cluster) one deployment runs: each
/// shard keeps every one's dtxns apart, so each costs every shard memory.
pub const COORDINATORS_MAX: usize = 64;

/// Cores per coordinator a deployment gets unless told otherwise.
pub const CORES_PER_COORDINATOR: usize = 8;

/// How many coordinators (embedded) or coordinator groups (cluster) a new deployment of `shards`
/// shards on a machine of `cores` cores gets unless told: one per [`CORES_PER_COORDINATOR`]
/// cores, at least one and at most one per shard. Below 8 cores a second coordinator would
/// share the cores the first already uses (and in a cluster add three processes); above one
/// per shard, dtxns would only conflict more.
pub fn default_coordinators(shards: usize, cores: usize) -> usize {
    (cores / CORES_PER_COORDINATOR).clamp(1, shards.max(1))
}

#[cfg(test)]
mod default_tests {
    #[test]
    fn one_coordinator_per_eight_cores_at_most_one_per_shard() {
        use super::default_coordinators as d;
        assert_eq!([d(2, 1), d(2, 2), d(2, 8), d(2, 16), d(2, 64)], [1, 1, 1, 2, 2]);
        assert_eq!([d(8, 16), d(8, 64), d(8, 128), d(0, 16)], [2, 8, 8, 1]);
    }
}
