//! Hamilton's two-phase commit, as a coordinator leader runs it (a cluster's coordinator
//! replica, the embedded node's coordinator thread): each finished dtxn's size and how long its
//! phases took. One observation per dtxn, never per transaction.

use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::{latency_family, recording, size_histogram, LatencyFamily};

pub(crate) struct Families {
    dtxn_size: Histogram,
    phase: LatencyFamily<1>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            dtxn_size: size_histogram(),
            phase: latency_family(),
        };
        registry.register(
            "specie_coordinator_dtxn_size",
            "Transactions in one finished dtxn",
            families.dtxn_size.clone(),
        );
        registry.register(
            "specie_coordinator_phase_duration_seconds",
            "Time one dtxn spent in a phase of two-phase commit: prepare (prepares sent to every \
             vote in), decide (the decision made durable through Raft), commit (commits sent to \
             every acknowledgement in)",
            families.phase.clone(),
        );
        families
    }
}

/// A coordinator leader finished a dtxn of `transactions`, its phases having taken these
/// milliseconds by the coordinator's clock (`None`: a phase this leader did not see, for a dtxn
/// it took over already decided).
pub fn dtxn_finished(transactions: usize, prepare_ms: Option<u64>, decide_ms: Option<u64>, commit_ms: u64) {
    let Some(all) = recording() else { return };
    let families = &all.coordinator;
    families.dtxn_size.observe(transactions as f64);
    for (phase, took_ms) in [
        ("prepare", prepare_ms),
        ("decide", decide_ms),
        ("commit", Some(commit_ms)),
    ] {
        if let Some(took_ms) = took_ms {
            let seconds = Duration::from_millis(took_ms).as_secs_f64();
            families
                .phase
                .get_or_create(&[("phase", phase.to_string())])
                .observe(seconds);
        }
    }
}
