//! `specie demo`: each mode's short run on embedded nodes, ending in the platform-wide supply
//! audit. The figures each prints stand beside the same-run ceiling (`specie_measure::ceiling`).
//!
//! - [`payments`]: `specie demo`, the payment workload through an embedded node (or a cluster),
//!   double spends, conflicting spends and forgeries mixed in, then the supply audit.
//! - [`byzantine`]: `specie demo --byzantine`, the Byzantine mode with the core as its Primary.
//! - [`offline`]: `specie demo --offline`, devices funded from the core, paying each other with no
//!   network (some cheating), deposits and payouts back to the core, the double spenders named.
//! - [`exchange`]: `specie demo --exchange`, three currencies' cores and the SPEEDEX exchange
//!   between them, ending in the per-currency audit.
//! - [`privacy`]: `specie demo --privacy`, transparent, confidential and anonymous payments,
//!   forgeries, the passive auditor's reconstruction from the ledger of record and the supply
//!   audit.

pub mod byzantine;
pub mod exchange;
mod exchange_chart;
pub mod offline;
pub mod payments;
pub mod privacy;
mod supply;
