//! The locking shard of Hamilton's two-phase commit (§4.1), as a deterministic state machine.
//!
//! A shard owns a range of the UHS id space. Everything that changes its state is a
//! [`ShardRequest`] from a coordinator; the driver makes each request durable (local log or Raft)
//! before it calls [`ShardState::apply`], so every replica that applies the same requests in the
//! same order holds the same UHS and answers the same way. No I/O, clocks or randomness in here.

mod range;
mod role;
mod state;
mod wire;

pub use range::{ShardRange, ShardRangeError};
pub use role::{Shard, ShardCall, ShardCommand, ShardInput, ShardRead, ShardReply, ShardStateError};
pub use state::{ShardInvariantViolation, ShardState, ShardStats};
pub use wire::{put_votes, read_votes, Refusal, ShardRequest, ShardResponse, ShardTx, ShardWireLimits, Vote};

/// Identifier of a distributed transaction (a batch of compact transactions committed by one
/// 2PC run). Assigned by the coordinator in strictly increasing order.
pub type DtxnId = u64;

/// Which coordinator group a dtxn belongs to: its position among the cluster's coordinator groups
/// (0 for the embedded node's one coordinator). Each coordinator numbers its own dtxns, so a
/// shard keeps each coordinator's dtxns and watermark apart. The shard's host learns it from who
/// sent the request (the caller's certificate), never from the request itself.
pub type CoordinatorIndex = u16;
