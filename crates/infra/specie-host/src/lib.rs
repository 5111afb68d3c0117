//! Hosts for specie's roles. A role ([`specie_role::Role`]) is a pure state machine; a host
//! gives it time, inputs, durability and a way to reach its peers and callers. Each host is
//! written once, for every role:
//! - [`embedded`]: one thread per role over the local durable log (`specie-log`): a round's
//!   proposals are one append and one fsync, then applied, then answered.
//!
//! What is specific to a deployment (which channel a send goes down, who waits for a reply) is
//! the host's [`embedded::Wiring`], a few lines per role.

pub mod embedded;

pub use embedded::{EmbeddedHost, HostMessage, RecoverError, Wiring};
