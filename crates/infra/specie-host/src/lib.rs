//! Hosts for specie's roles. A role ([`specie_role::Role`]) is a pure state machine; a host
//! gives it time, inputs, durability and a way to reach its peers and callers. Each host is
//! written once, for every role:
//! - [`embedded`]: one thread per role over the local durable log (`specie-log`): a round's
//!   proposals are one append and one fsync, then applied, then answered.
//! - [`replicated`]: one task per replica over Raft (`specie-raft`): the role lives in the Raft
//!   state machine, leads while its replica does, and a round's proposals are one Raft entry.
//! - [`thread`]: the embedded host on a thread of its own, for a service's or a demo's callers.
//! - [`simulated`]: one role in a deterministic simulation: the world owns time and the network,
//!   the host owns the log (which survives crashes) and checks each restart against the crash.
//!
//! What is specific to a deployment (which channel a send goes down, who waits for a reply) is
//! the host's [`embedded::Wiring`], a few lines per role.

pub mod embedded;
pub mod replicated;
pub mod simulated;
#[cfg(test)]
mod test_role;
pub mod thread;

pub use embedded::{call_in_turn, EmbeddedHost, HostMessage, RecoverError, Wiring};
pub use replicated::{
    CallError, Calls, Gather, GatherAnswer, HostStopped, Refuse, ReplicatedHost, RoleMachine, Slot, SnapshotPlan,
};
pub use simulated::{SimEvent, SimHost, SimRestartError};
pub use thread::{RoleCall, RoleThread, RoleThreadError};
