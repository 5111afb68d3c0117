//! The atomizer's blocks, as its leader makes them (a cluster's atomizer replica, the embedded
//! node in the atomizer shape): each round of attestations, and each block's size and time to
//! be ordered and confirmed. One observation per round or block, never per transaction.

use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::{latency_family, recording, size_histogram, LatencyFamily};

pub(crate) struct Families {
    block_size: Histogram,
    phase: LatencyFamily<1>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            block_size: size_histogram(),
            phase: latency_family(),
        };
        registry.register(
            "specie_atomizer_block_size",
            "Transactions in one block the atomizer leader confirmed",
            families.block_size.clone(),
        );
        registry.register(
            "specie_atomizer_phase_duration_seconds",
            "Time a round or block spent in a stage of the atomizer: attest (a round's ids asked \
             of the shards to the last answer), order (a block proposed to durable through Raft), \
             confirm (durable to applied by every shard)",
            families.phase.clone(),
        );
        families
    }
}

fn observe(families: &Families, phase: &str, took_ms: u64) {
    families
        .phase
        .get_or_create(&[("phase", phase.to_string())])
        .observe(Duration::from_millis(took_ms).as_secs_f64());
}

/// A round of attestations came in `took_ms` after it was first asked.
pub fn attested(took_ms: u64) {
    let Some(all) = recording() else { return };
    observe(&all.atomizer, "attest", took_ms);
}

/// A block of `transactions` was confirmed: ordered in `order_ms`, applied everywhere
/// `confirm_ms` later.
pub fn block_finished(transactions: usize, order_ms: u64, confirm_ms: u64) {
    let Some(all) = recording() else { return };
    let families = &all.atomizer;
    families.block_size.observe(transactions as f64);
    observe(families, "order", order_ms);
    observe(families, "confirm", confirm_ms);
}
