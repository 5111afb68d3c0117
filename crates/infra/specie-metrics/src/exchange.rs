//! The exchange's blocks as their leader clears them (a cluster's exchange replica, the
//! standalone exchange): each block's size, how long its clearing took, and the value it traded
//! per asset. Observed once per block, when the block is durable and applied.

use std::time::Duration;

use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::{latency_histogram, recording, size_histogram, CounterFamily};

pub(crate) struct Families {
    block_size: Histogram,
    clearing: Histogram,
    traded: CounterFamily<1>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            block_size: size_histogram(),
            clearing: latency_histogram(),
            traded: CounterFamily::default(),
        };
        registry.register(
            "specie_exchange_block_size",
            "Transactions in one block this leader assembled, once applied",
            families.block_size.clone(),
        );
        registry.register(
            "specie_exchange_clearing_duration_seconds",
            "Time the leader's clearing of one block took (Tâtonnement, the LP, integer repair and \
             its own check)",
            families.clearing.clone(),
        );
        registry.register(
            "specie_exchange_traded_value",
            "Value sold through the clearing, by asset (its index), in the asset's smallest unit",
            families.traded.clone(),
        );
        families
    }
}

/// A block of `transactions`, whose clearing took `clearing` and sold `sold` (asset index,
/// amount) per traded pair, is durable and applied.
pub fn block_cleared(transactions: usize, clearing: Duration, sold: impl Iterator<Item = (u16, u64)>) {
    let Some(all) = recording() else { return };
    let families = &all.exchange;
    families.block_size.observe(transactions as f64);
    families.clearing.observe(clearing.as_secs_f64());
    for (asset, amount) in sold {
        families
            .traded
            .get_or_create(&[("asset", asset.to_string())])
            .inc_by(amount);
    }
}
