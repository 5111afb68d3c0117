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
pub use engine::{Coordinator, CoordinatorConfig, CoordinatorOutput, SubmitError, Tag, TxResult};
pub use role::{CoordinatorInput, CoordinatorReport, CoordinatorStateError, TxOutcome};
pub use specie_shard::DtxnId;
pub use state::{ActiveDtxn, Applied, CoordinatorCommand, CoordinatorState, InvariantViolation};
