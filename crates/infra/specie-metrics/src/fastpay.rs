//! FastPay's authority shards as their clients reach them (a cluster's authority replica, a
//! standalone committee's shards): how long each call took from its arrival to the role's
//! answer (a vote is answered once it is durable), and each call refused, by why. One
//! observation per call.

use std::time::Duration;

use prometheus_client::registry::Registry;

use crate::{latency_family, recording, CounterFamily, LatencyFamily};

pub(crate) struct Families {
    calls: LatencyFamily<1>,
    refused: CounterFamily<3>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            calls: latency_family(),
            refused: CounterFamily::default(),
        };
        registry.register(
            "specie_fastpay_call_duration_seconds",
            "Time an authority shard took to answer one call, by call: order (its vote, durable), \
             certificate (its confirmation, durable), lock, round_change, proposal, funding",
            families.calls.clone(),
        );
        registry.register(
            "specie_fastpay_refusals",
            "Calls an authority shard did not grant, by call, the API's code (refused, settled, \
             not_leader, outcome_unknown, stopping) and, when refused, the refusal",
            families.refused.clone(),
        );
        families
    }
}

/// An authority shard answered a call of `call` after `elapsed`. `refused`: not granted, with
/// the API's code and, for a refusal by the role, its name (`""` otherwise). All three come
/// from fixed sets: the API's calls, codes and the role's refusals.
pub fn answered(call: &'static str, refused: Option<(&'static str, &str)>, elapsed: Duration) {
    let Some(all) = recording() else { return };
    let families = &all.fastpay;
    families
        .calls
        .get_or_create(&[("call", call.to_string())])
        .observe(elapsed.as_secs_f64());
    if let Some((code, refusal)) = refused {
        families
            .refused
            .get_or_create(&[
                ("call", call.to_string()),
                ("code", code.to_string()),
                ("refusal", refusal.to_string()),
            ])
            .inc();
    }
}
