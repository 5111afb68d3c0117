//! The durable logs' writes (the embedded log and every Raft replica's): one observation per
//! `fdatasync`, which group commit makes one per batch.

use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::{latency_histogram, recording};

pub(crate) struct Families {
    fsync: Histogram,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            fsync: latency_histogram(),
        };
        registry.register(
            "specie_log_fsync_duration_seconds",
            "Time one fdatasync or fsync of a durable log took",
            families.fsync.clone(),
        );
        families
    }
}

/// A durable log's sync took `elapsed`.
pub fn synced(elapsed: Duration) {
    let Some(all) = recording() else { return };
    let families = &all.log;
    families.fsync.observe(elapsed.as_secs_f64());
}
