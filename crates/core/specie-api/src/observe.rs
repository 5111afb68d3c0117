//! What the core's roles hold and report, as their metric families: the one mapping every host
//! of the core uses, the embedded node's threads and a cluster's replicas alike. Read where the
//! role's state may be read (a replica's state machine under its lock, an embedded role's own
//! thread after each turn).

use specie_archiver::LedgerOfRecord;
use specie_atomizer::{Atomizer, AtomizerReport};
use specie_coordinator::{Coordinator, CoordinatorReport};
use specie_metrics::role::RoleFamily;

/// A coordinator's queue and dtxns in flight beside their limits (0 on a follower).
pub fn coordinator_gauges(coordinator: &Coordinator) -> [(RoleFamily, f64); 4] {
    let config = coordinator.config();
    [
        (RoleFamily::CoordinatorQueue, coordinator.queued() as f64),
        (RoleFamily::CoordinatorQueueMax, config.queue_transactions_max as f64),
        (RoleFamily::CoordinatorInFlight, coordinator.dtxns_in_flight() as f64),
        (RoleFamily::CoordinatorInFlightMax, config.dtxns_in_flight_max as f64),
    ]
}

/// The atomizer's height and the transactions it admitted.
pub fn atomizer_gauges(atomizer: &Atomizer) -> [(RoleFamily, f64); 2] {
    [
        (RoleFamily::AtomizerHeight, atomizer.height() as f64),
        (RoleFamily::AtomizerAdmitted, atomizer.admitted() as f64),
    ]
}

/// The ledger of record's height, what waits for a block, what is written ahead and undecided
/// (`undecided`), and its supply tallies.
pub fn ledger_gauges(ledger: &LedgerOfRecord, undecided: usize) -> [(RoleFamily, f64); 5] {
    let supply = ledger.supply();
    [
        (RoleFamily::LedgerHeight, ledger.height() as f64),
        (RoleFamily::LedgerWaiting, ledger.waiting() as f64),
        (RoleFamily::LedgerUndecided, undecided as f64),
        (RoleFamily::LedgerSupplyIssued, supply.issued() as f64),
        (RoleFamily::LedgerSupplyBalanced, f64::from(u8::from(supply.balanced()))),
    ]
}

/// What a coordinator's report means to its operator: a finished dtxn's times go to the
/// metrics, a shard's refusal is logged as the protocol bug it is; a settled outcome is its
/// host's business.
pub fn coordinator_reported(report: &CoordinatorReport) {
    match report {
        CoordinatorReport::ShardRefused { shard, response } => {
            tracing::error!(shard, ?response, "a shard refused a request: protocol bug");
        }
        CoordinatorReport::Finished(t) => {
            specie_metrics::coordinator::dtxn_finished(t.transactions, t.prepare_ms, t.decide_ms, t.commit_ms);
        }
        CoordinatorReport::Settled(_) => {}
    }
}

/// What an atomizer's report means to its operator: its rounds' and blocks' times go to the
/// metrics, a shard that misbehaves or falls out of the window is logged as an error; an
/// earlier leader's block settling is its host's business (logged at debug).
pub fn atomizer_reported(report: &AtomizerReport) {
    match report {
        AtomizerReport::Attested { took_ms, .. } => specie_metrics::atomizer::attested(*took_ms),
        AtomizerReport::Finished {
            transactions,
            order_ms,
            confirm_ms,
        } => specie_metrics::atomizer::block_finished(*transactions, *order_ms, *confirm_ms),
        AtomizerReport::Settled(outcome) => tracing::debug!(?outcome, "an earlier leader's transaction settled"),
        AtomizerReport::ShardMisbehaved { shard, answer } => {
            tracing::error!(
                shard,
                ?answer,
                "a shard answered what no correct shard answers; dropped"
            );
        }
        AtomizerReport::ShardTooFarBehind { shard, height } => tracing::error!(
            shard,
            height,
            "a shard needs a block older than the atomizer's window: restore it from a snapshot"
        ),
    }
}
