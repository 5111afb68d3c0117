//! What every HTTP service answers (recorded by the service template's request observer, so
//! each route of each service is counted the same way).

use std::time::Duration;

use prometheus_client::registry::Registry;

use crate::{latency_family, recording, CounterFamily, LatencyFamily};

pub(crate) struct Families {
    requests: CounterFamily<3>,
    duration: LatencyFamily<1>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            requests: CounterFamily::default(),
            duration: latency_family(),
        };
        registry.register(
            "specie_http_requests",
            "HTTP requests answered, by route template, method and status code",
            families.requests.clone(),
        );
        registry.register(
            "specie_http_request_duration_seconds",
            "Time from a request's arrival to its answer, by route template",
            families.duration.clone(),
        );
        families
    }
}

/// `method` on `route` (a route's template, never a path) was answered with `status` after
/// `elapsed`.
pub fn answered(method: &str, route: &str, status: u16, elapsed: Duration) {
    let Some(all) = recording() else { return };
    let families = &all.http;
    families
        .requests
        .get_or_create(&[
            ("route", route.to_string()),
            ("method", method.to_string()),
            ("status", status.to_string()),
        ])
        .inc();
    families
        .duration
        .get_or_create(&[("route", route.to_string())])
        .observe(elapsed.as_secs_f64());
}
