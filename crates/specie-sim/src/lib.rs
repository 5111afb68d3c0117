//! Deterministic simulation of the 2PC protocol (Hamilton §4), FoundationDB style.
//!
//! The shard and coordinator state machines run exactly as in a node, but every source of
//! nondeterminism — the network, the clock, crashes, the workload — comes from one seeded RNG, so a
//! seed replays the same run bit for bit. Each role group is modelled as its durable log plus a
//! leader: a crash loses the leader's memory and everything in flight to or from it; a restart
//! (or a new leader of the same group) rebuilds the state by replaying the log, which is exactly
//! what Raft gives the role. The network drops, duplicates, delays and reorders messages.
//!
//! After every step the simulator checks the safety invariants; once faults stop it checks that
//! every dtxn finishes (liveness) and that value is conserved:
//! - no UHS id is ever spent twice, and no id is ever created twice (so a spent id never returns);
//! - every transaction reported confirmed is durable: its outputs exist (or were spent since);
//! - a restarted shard holds exactly the state it had when it crashed;
//! - every shard's locks match its prepared dtxns;
//! - at the end, no lock is held, no dtxn is active, and the values in the UHS equal what was minted.

mod world;

pub use world::{run, Faults, SimOptions, SimReport, Violation};
