//! The internal RPC protocol's servers: requests the authorisation table refused, by the role
//! of the peer that sent them, and what each wire server turned away (read at scrape time,
//! [`watch`]).

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;

use crate::{add_collector, recording, CounterFamily};

pub(crate) struct Families {
    authorization_refused: CounterFamily<1>,
    handshakes: CounterFamily<1>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            authorization_refused: CounterFamily::default(),
            handshakes: CounterFamily::default(),
        };
        registry.register(
            "specie_wire_authorization_refused",
            "Requests refused by the authorisation table before they were decoded, by the \
             calling peer's role",
            families.authorization_refused.clone(),
        );
        registry.register(
            "specie_wire_handshakes",
            "Connections whose peer passed the handshake (mutual TLS) and was admitted as a member \
             of the cluster, by its role (`unauthenticated` when the transport authenticates no \
             one); failed handshakes are in specie_wire_server_events_total",
            families.handshakes.clone(),
        );
        families
    }
}

/// The authorisation table refused a request from a peer of `peer_role` (a role's name).
pub fn authorization_refused(peer_role: &str) {
    let Some(all) = recording() else { return };
    let families = &all.wire;
    families
        .authorization_refused
        .get_or_create(&[("peer_role", peer_role.to_string())])
        .inc();
}

/// A peer of `peer_role` passed the handshake and was admitted.
pub fn handshake_admitted(peer_role: &str) {
    let Some(all) = recording() else { return };
    all.wire
        .handshakes
        .get_or_create(&[("peer_role", peer_role.to_string())])
        .inc();
}

/// From now on every scrape reads `counters` (name and count, e.g. from the wire server's own
/// counters) as `specie_wire_server_events_total{event=…}`.
pub fn watch(counters: impl Fn() -> Vec<(&'static str, u64)> + Send + Sync + 'static) {
    add_collector(Box::new(ServerEvents(Box::new(counters))));
}

struct ServerEvents(Box<dyn Fn() -> Vec<(&'static str, u64)> + Send + Sync>);

impl fmt::Debug for ServerEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("wire::ServerEvents")
    }
}

impl Collector for ServerEvents {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let help = "What the wire server counted: connections and handshakes accepted and refused, \
                    requests refused, by event";
        let kind = ConstCounter::new(0u64).metric_type();
        let mut family = encoder.encode_descriptor("specie_wire_server_events", help, None, kind)?;
        for (event, count) in (self.0)() {
            let labels = [("event", event.to_string())];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
