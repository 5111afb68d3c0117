//! The embedded specie node: every role of Hamilton's 2PC architecture in one process.
//!
//! ```text
//! submit ─▶ sentinel (rayon, caller's thread) ─▶ coordinator thread ─▶ shard threads
//!                                                   │  log: coordinator/      │ log: shard-N/
//!            ◀──────────── completion (confirmed / invalid / rejected) ◀─────┘
//! ```
//! The roles are the pure state machines of `specie-coordinator` and `specie-shard`, each run by
//! the shared embedded host (`specie-host`: a thread and a durable log per role, one write and
//! one fsync per round of commands); this crate only wires them together and to the API. A role's command is durable before it is applied, so
//! after `kill -9` the same log replays into the same state, and the coordinator resumes every
//! dtxn in flight from its last phase.

pub mod archive;
pub mod endorsement;
mod manifest;
mod node;
pub mod serve;
pub mod settings;
mod wiring;

pub use manifest::{CoreShape, NodeManifest, NodeManifestError};
pub use node::{EmbeddedNode, NodeHandle, NodeOptions, OpenError};
