//! specie's benchmarks: workloads from `specie-workload` run against an embedded node or a
//! cluster, measured beside the ceilings that bound them (`specie-measure`, which `specie demo`
//! shares).
//!
//! - [`swap`]: `specie bench validate | swap` against an embedded node (and, to weigh running
//!   embedded mode through Raft, against one-replica Raft groups in the same process).
//! - [`postgres`]: `specie bench postgres`, the PostgreSQL baseline of Hamilton §6.1 (a throwaway
//!   server) beside specie's figures, embedded and replicated.
//! - [`cluster`]: `specie bench cluster`, load against a running cluster with leader kills,
//!   per-second throughput, latency and SVG charts.
//! - [`geo`]: `specie bench geo`, a fresh cluster with one replica of every group in each of three
//!   regions, Hamilton's round trips between them injected by in-process relays, the same load
//!   over loopback and across the regions.
//! - [`byzantine`]: `specie bench byzantine`, a FastPay committee (the Byzantine mode) on durable
//!   hosts: transfer and confirmation orders per second, CPU per order beside the signature work
//!   it needs, and payment latency with every authority up and with one silent.
//! - [`offline`]: `specie bench offline`, offline cash's authority (deposits with 3-signature
//!   chains, on one thread and on every core, in memory and durably) and device-to-device
//!   payments, beside the Ed25519 ceilings.
//! - [`exchange`]: `specie bench exchange`, the SPEEDEX exchange: clearing time and quality per
//!   (assets, offers), and block execution (payments, offers) with state hashing and fsync on, on
//!   one thread and on every core, beside the reference's figures and the Ed25519 ceiling.
//! - [`privacy`]: `specie bench privacy`, the privacy levels: validation per level on one core
//!   and all cores, proving in the wallet, the ledger of record's append rate and end-to-end
//!   payments per level, beside BIP-340 and the confidential proofs' own verification.
//! - [`scale`]: `specie bench scale`, one workload at 1, 2, 4, … cores, each run pinned to its
//!   cores: the curve, its efficiency against linear, the same-run ceiling, and the busiest
//!   thread with its CPU per transaction (the serial stage and the cap it sets).

pub mod byzantine;
pub mod cluster;
pub mod exchange;
pub mod geo;
pub mod offline;
mod one_replica;
pub mod postgres;
pub mod privacy;
mod replicated;
pub mod scale;
pub mod swap;

pub use specie_measure::{ceiling, ensure_that, error, fail, BenchError, BenchResult};
use specie_measure::{cpu, submit};
