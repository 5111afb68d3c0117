//! Whether the process can serve, as `/livez` and `/readyz` answer it on every port the
//! template serves ([`crate::observe`]).
//!
//! - **Live**: the process runs and answers HTTP. Nothing else: a live process that is not
//!   ready must not be restarted for it (its group may simply have no leader).
//! - **Ready**: every check the process added holds (a replica: its group has a leader, and it
//!   has applied what it knows committed, within a bound), and it is not draining (a stop began).
//!   A load balancer sends callers only to ready processes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Why a check does not hold: one line for the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotReady(pub String);

type Check = Arc<dyn Fn() -> Result<(), NotReady> + Send + Sync>;

/// Checks of one process; a process adds a handful at start, so they are kept in a vector.
static CHECKS: Mutex<Vec<(&'static str, Check)>> = Mutex::new(Vec::new());
static DRAINING: AtomicBool = AtomicBool::new(false);

/// The process is ready only while `check` holds (asked at every `/readyz`, so it must be quick).
pub fn add_check(name: &'static str, check: impl Fn() -> Result<(), NotReady> + Send + Sync + 'static) {
    CHECKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((name, Arc::new(check)));
}

/// A stop began: from now on the process is not ready.
pub fn set_draining() {
    DRAINING.store(true, Ordering::Relaxed);
}

/// Each check's verdict (`None`: it holds), draining first.
pub fn readiness() -> Vec<(&'static str, Option<NotReady>)> {
    let checks: Vec<(&'static str, Check)> = CHECKS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let draining = DRAINING
        .load(Ordering::Relaxed)
        .then(|| NotReady("a stop began; the process is draining".to_string()));
    std::iter::once(("draining", draining))
        .chain(checks.into_iter().map(|(name, check)| (name, check().err())))
        .collect()
}

/// What a process's `/readyz` said, as a caller that waits for it sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    Ready,
    /// It answered 503 (the body names the checks that do not hold) or something else.
    NotReady(String),
    /// It did not answer HTTP: not started yet, stopped, or the wrong address.
    Unreachable(String),
}

/// The largest `/readyz` answer a probe reads.
const PROBE_BYTES_MAX: u64 = 64 << 10;

/// Asks `GET http://{address}/readyz` once, within `timeout`.
pub fn probe(address: std::net::SocketAddr, timeout: std::time::Duration) -> Probe {
    let url = format!("http://{address}{}", crate::observe::READYZ_PATH);
    let body = |response: ureq::Response| {
        let bytes = crate::client::read_limited(response, PROBE_BYTES_MAX).unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_string()
    };
    match ureq::get(&url).timeout(timeout).call() {
        Ok(response) if response.status() == 200 => Probe::Ready,
        Ok(response) => Probe::NotReady(body(response)),
        Err(ureq::Error::Status(code, response)) => Probe::NotReady(format!("{code} {}", body(response))),
        Err(error) => Probe::Unreachable(error.to_string()),
    }
}
