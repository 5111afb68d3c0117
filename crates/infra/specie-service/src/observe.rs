//! What the template adds to every router it serves ([`crate::server::serve`]), so every
//! process's every port has them, once:
//!
//! - `GET /metrics`: the process's Prometheus metrics (`specie_metrics::exposition`);
//! - `GET /livez` and `GET /readyz`: 200 or 503 with a JSON reason ([`crate::health`]);
//! - each answered request counted in `specie_http_requests_total` and timed in
//!   `specie_http_request_duration_seconds`, named by its route's template (`/v1/uhs/{id}`),
//!   never by its path, so however many ids callers send the set of names stays bounded.
//!   Requests no route matches are not counted: their answer names no route.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

/// The paths the template serves on every port.
pub const METRICS_PATH: &str = "/metrics";
pub const LIVEZ_PATH: &str = "/livez";
pub const READYZ_PATH: &str = "/readyz";

/// `/livez` and `/readyz`'s answer.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct HealthBody {
    /// `live`, `ready` or `not_ready`.
    pub status: String,
    /// Each readiness check that does not hold, with why (empty when ready, and for `/livez`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready: Vec<NotReadyBody>,
}

#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct NotReadyBody {
    pub check: String,
    pub reason: String,
}

/// `router` with the operations routes, each of its routes counted and timed, and every error
/// answered as the one error body.
pub(crate) fn with_operations(router: Router) -> Router {
    let router = if router.has_routes() {
        router.route_layer(middleware::from_fn(count_and_time))
    } else {
        router
    };
    router
        .route(METRICS_PATH, get(metrics))
        .route(LIVEZ_PATH, get(livez))
        .route(READYZ_PATH, get(readyz))
        .layer(middleware::from_fn(crate::error::uniform_errors))
}

async fn count_and_time(request: Request, next: Next) -> Response {
    if !specie_metrics::enabled() {
        return next.run(request).await;
    }
    let started = Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(String::new, |path| path.as_str().to_string());
    let response = next.run(request).await;
    specie_metrics::http::answered(method.as_str(), &route, response.status().as_u16(), started.elapsed());
    response
}

async fn metrics() -> Response {
    (
        [(header::CONTENT_TYPE, specie_metrics::CONTENT_TYPE)],
        specie_metrics::exposition(),
    )
        .into_response()
}

async fn livez() -> Json<HealthBody> {
    Json(HealthBody {
        status: "live".to_string(),
        not_ready: vec![],
    })
}

async fn readyz() -> (StatusCode, Json<HealthBody>) {
    let not_ready: Vec<NotReadyBody> = crate::health::readiness()
        .into_iter()
        .filter_map(|(check, verdict)| {
            verdict.map(|reason| NotReadyBody {
                check: check.to_string(),
                reason: reason.0,
            })
        })
        .collect();
    let (code, status) = if not_ready.is_empty() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not_ready")
    };
    let status = status.to_string();
    (code, Json(HealthBody { status, not_ready }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn get_text(address: std::net::SocketAddr, path: &str) -> (u16, String) {
        match ureq::get(&format!("http://{address}{path}")).call() {
            Ok(answer) => (answer.status(), answer.into_string().unwrap()),
            Err(ureq::Error::Status(code, answer)) => (code, answer.into_string().unwrap()),
            Err(error) => panic!("{path}: {error}"),
        }
    }

    /// An extractor's text/plain rejection (here a path segment that is not a number) reaches
    /// the caller as the one error body; a success passes untouched.
    #[test]
    fn an_extractors_rejection_is_answered_as_the_one_error_body() {
        let number = |axum::extract::Path(id): axum::extract::Path<u64>| async move { id.to_string() };
        let router = Router::new().route("/v1/things/{id}", get(number));
        let (_runtime, address) = crate::server::serve_on_loopback(router, crate::HttpLimits::default()).unwrap();
        let (code, text) = get_text(address, "/v1/things/-1");
        assert_eq!(code, 400, "{text}");
        let body: crate::ErrorBody = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(body.error.code, "bad_request");
        assert!(body.error.message.contains("Invalid URL"), "{text}");
        assert_eq!(get_text(address, "/v1/things/7"), (200, "7".to_string()));
    }

    /// Every served router gets the operations routes; its requests are counted by route
    /// template; readiness follows the checks added, and a stop makes the process not ready.
    #[test]
    fn every_served_router_has_metrics_and_health() {
        let router = Router::new().route("/v1/uhs/{id}", get(|| async { "present" }));
        let (_runtime, address) = crate::server::serve_on_loopback(router, crate::HttpLimits::default()).unwrap();
        for path in ["/v1/uhs/00", "/v1/uhs/ff", "/nowhere"] {
            let _ = ureq::get(&format!("http://{address}{path}")).call();
        }
        let (code, text) = get_text(address, METRICS_PATH);
        assert_eq!(code, 200);
        let line = "specie_http_requests_total{route=\"/v1/uhs/{id}\",method=\"GET\",status=\"200\"} ";
        let count: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .unwrap_or_else(|| panic!("{text}"))
            .parse()
            .unwrap();
        assert!(count >= 2, "{text}");
        assert!(
            !text.contains("/v1/uhs/00") && !text.contains("/nowhere"),
            "paths are never labels: {text}"
        );

        assert_eq!(get_text(address, LIVEZ_PATH), (200, r#"{"status":"live"}"#.to_string()));
        let holds = Arc::new(AtomicBool::new(true));
        let read = holds.clone();
        crate::health::add_check("test_leader", move || {
            if read.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err(crate::health::NotReady("no leader".to_string()))
            }
        });
        // Other tests of this process stop servers, which marks the process draining, so only
        // this check's own line is asserted until the drain below.
        let test_leader = |body: &HealthBody| {
            body.not_ready
                .iter()
                .find(|n| n.check == "test_leader")
                .map(|n| n.reason.clone())
        };
        let (_, body) = get_text(address, READYZ_PATH);
        assert_eq!(test_leader(&serde_json::from_str(&body).unwrap()), None, "{body}");
        holds.store(false, Ordering::Relaxed);
        let (code, body) = get_text(address, READYZ_PATH);
        assert_eq!(code, 503);
        let body: HealthBody = serde_json::from_str(&body).unwrap();
        assert_eq!(body.status, "not_ready");
        assert_eq!(test_leader(&body).as_deref(), Some("no leader"));
        holds.store(true, Ordering::Relaxed);
        crate::health::set_draining();
        let (code, body) = get_text(address, READYZ_PATH);
        assert_eq!(code, 503);
        assert!(body.contains("draining"), "{body}");
        assert_eq!(get_text(address, LIVEZ_PATH).0, 200, "a draining process is still live");
    }
}
