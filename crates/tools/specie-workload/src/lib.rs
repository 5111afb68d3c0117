//! specie's workloads: what the demo, the benchmarks and the simulator submit, and the audit that
//! proves afterwards that no money was created or destroyed.
//!
//! Pure: no I/O, no clocks, no threads of its own. Every choice comes from a seeded RNG the
//! caller passes in, so a seed names a run; the caller submits what is planned, however it
//! talks to the system (an embedded node, a cluster, a simulated world), and reports each
//! outcome back.
//!
//! - [`payments`]: signed transactions between wallets with real keys: mints, 2-in/2-out and
//!   4-in/4-out payments, redemptions, and hostile ones (replays of spent outputs, conflicting
//!   pairs, forged signatures). [`payments::PaymentWorkload`] tracks every wallet's coins from
//!   the outcomes and ends in [`payments::PaymentWorkload::audit`].
//! - [`compact`]: compact transactions (UHS ids only, no signatures) for load that bypasses the
//!   sentinel: preloads, 2-in/2-out swaps from a pool, and signed 2-in/2-out transfers to
//!   validate.
//! - [`ledger`]: compact load *with values* (mints, swaps, replays, conflicting twins, unknown
//!   inputs) and the audit of a UHS against it: the simulators' workload.
//! - [`audit`]: the supply audit's figures and verdict.
//! - [`exchange`]: traders of the exchange: offers around drifting valuations, cancels, payments.
//! - [`offline`]: devices of offline cash, honest or cheating, as the demo and the simulator
//!   drive them.

pub mod audit;
pub mod compact;
pub mod exchange;
pub mod ledger;
pub mod offline;
pub mod payments;

pub use audit::SupplyAudit;
pub use ledger::{roll, CompactLedger, CompactMix, CompactPlanned, LedgerViolation};
pub use payments::{Kind, Outcome, PaymentMix, PaymentWorkload, Planned, Sent};
