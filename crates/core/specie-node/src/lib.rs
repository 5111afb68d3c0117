//! The embedded specie node: every role of Hamilton's 2PC architecture in one process.
//!
//! ```text
//! submit ─▶ sentinel (rayon, caller's thread) ─▶ coordinator thread ─▶ shard threads
//!                                                   │  log: coordinator/      │ log: shard-N/
//!            ◀──────────── completion (confirmed / invalid / rejected) ◀─────┘
//! ```
//! The roles are the pure state machines of `specie-coordinator` and `specie-shard`; this crate
//! is only their drivers: channels, clocks, and a durable log per role (one write + one fsync
//! per batch of commands, group commit). A role's command is durable before it is applied, so
//! after `kill -9` the same log replays into the same state, and the coordinator resumes every
//! dtxn in flight from its last phase.

pub mod api;
mod coordinator_driver;
pub mod http_server;
mod manifest;
mod node;
mod shard_driver;

pub use http_server::HttpLimits;
pub use manifest::{NodeManifest, NodeManifestError};
pub use node::{Completion, CompletionSender, EmbeddedNode, NodeHandle, NodeInfo, NodeOptions, TxStatus};
