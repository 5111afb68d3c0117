//! The seam where a process's request metrics attach: every HTTP service's routes are served
//! through [`crate::server::serve`], which reports each answered request to the process's
//! [`RequestObserver`] if one is installed. A request is named by its route's template
//! (`/v1/uhs/{id}`), never by its path, so whatever counts requests keeps a bounded set of names
//! however many ids callers send.
//!
//! (The API descriptions attach at the other seam of the template: each service's `http_api`
//! module, where every request and answer body is a type.)

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Router;

/// Sees every answered request of every service the process serves.
pub trait RequestObserver: Send + Sync + 'static {
    /// `method` on `route` (a route's template) was answered with `status` after `elapsed`.
    fn answered(&self, method: &Method, route: &str, status: StatusCode, elapsed: Duration);
}

static INSTALLED: OnceLock<Arc<dyn RequestObserver>> = OnceLock::new();

/// Makes `observer` the process's: every router served from now on reports to it. Once per
/// process; a second observer is refused and handed back.
pub fn install(observer: Arc<dyn RequestObserver>) -> Result<(), Arc<dyn RequestObserver>> {
    INSTALLED.set(observer)
}

/// `router` as [`crate::server::serve`] serves it: reporting to the installed observer, if any.
pub(crate) fn with_installed(router: Router) -> Router {
    match INSTALLED.get() {
        Some(observer) => observed(router, observer.clone()),
        None => router,
    }
}

/// `router`, each of whose routes reports its answered requests to `observer` (requests no route
/// matches are not reported: the fallback's answer names no route).
pub fn observed(router: Router, observer: Arc<dyn RequestObserver>) -> Router {
    if !router.has_routes() {
        return router;
    }
    router.route_layer(middleware::from_fn(move |request: Request, next: Next| {
        let observer = observer.clone();
        async move {
            let started = Instant::now();
            let method = request.method().clone();
            let route = request
                .extensions()
                .get::<MatchedPath>()
                .map_or_else(String::new, |path| path.as_str().to_string());
            let response: Response = next.run(request).await;
            observer.answered(&method, &route, response.status(), started.elapsed());
            response
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use axum::routing::get;

    #[derive(Default)]
    struct Seen(Mutex<Vec<(Method, String, u16)>>);

    impl RequestObserver for Seen {
        fn answered(&self, method: &Method, route: &str, status: StatusCode, _elapsed: Duration) {
            self.0
                .lock()
                .unwrap()
                .push((method.clone(), route.to_string(), status.as_u16()));
        }
    }

    #[test]
    fn requests_are_seen_by_route_template_not_by_path() {
        let seen = Arc::new(Seen::default());
        let router = Router::new()
            .route("/v1/uhs/{id}", get(|| async { "present" }))
            .route("/v1/refuse", get(|| async { StatusCode::CONFLICT }));
        let router = observed(router, seen.clone());
        // A router of a fallback only (a test's stub) has no route to observe, and is served as it is.
        let _stub = observed(Router::new().fallback(|| async { "stub" }), seen.clone());
        let (_runtime, address) = crate::server::serve_on_loopback(router, crate::HttpLimits::default()).unwrap();
        for path in ["/v1/uhs/00", "/v1/uhs/ff", "/v1/refuse", "/nowhere"] {
            let _ = ureq::get(&format!("http://{address}{path}")).call();
        }
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                (Method::GET, "/v1/uhs/{id}".to_string(), 200),
                (Method::GET, "/v1/uhs/{id}".to_string(), 200),
                (Method::GET, "/v1/refuse".to_string(), 409),
            ]
        );
    }

    #[test]
    fn an_installed_observer_sees_what_every_served_router_answers() {
        let seen = Arc::new(Seen::default());
        assert!(install(seen.clone()).is_ok());
        assert!(install(Arc::new(Seen::default())).is_err(), "one observer per process");
        // Served as every service is (`server::serve`), without being wrapped by hand.
        let router = Router::new().route("/v1/probe/{n}", get(|| async { "ok" }));
        let (_runtime, address) = crate::server::serve_on_loopback(router, crate::HttpLimits::default()).unwrap();
        ureq::get(&format!("http://{address}/v1/probe/7")).call().unwrap();
        // Other tests' routers report here too; this one's request is among what was seen.
        let seen = seen.0.lock().unwrap().clone();
        assert!(
            seen.contains(&(Method::GET, "/v1/probe/{n}".to_string(), 200)),
            "{seen:?}"
        );
    }
}
