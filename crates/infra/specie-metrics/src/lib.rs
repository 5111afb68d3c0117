//! The process's Prometheus metrics, one home. Every family specie records is defined here, once
//! (its name `specie_<subsystem>_<what>_<unit>`, its help, its buckets), and recorded through the
//! functions of its subsystem's module ([`http`], [`transactions`], [`coordinator`],
//! [`atomizer`], [`fastpay`], [`exchange`], [`log`], [`raft`], [`wire`], [`role`]), so a name has
//! one meaning and the dashboards and alert rules (`ops/`) are checked against the one list,
//! [`FAMILIES_EXPOSED`].
//!
//! - **Cost.** Counters are atomics. A histogram takes a lock per observation, so the data
//!   plane observes once per batch (a validated batch, a group commit, an answered request),
//!   never once per transaction.
//! - **Bounded.** Label values come from bounded sets: route templates, outcome and refusal
//!   codes, peer roles, replica ids of one group. Nothing a caller sends becomes a label.
//! - **Off.** `SPECIE_METRICS=off` in a process's environment makes every recording function
//!   return at once (the families stay, at zero): how the cost of metrics is measured, back to
//!   back (`docs/figures.md`, "What metrics cost").
//! - **Scrape-time views.** What a process already knows (a Raft replica's term and indexes,
//!   its wire server's counters, its role's state) is read when scraped ([`raft::watch`],
//!   [`wire::watch`], [`role::watch`]), not copied on every change.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

pub mod atomizer;
pub mod coordinator;
pub mod exchange;
pub mod fastpay;
pub mod http;
pub mod log;
pub mod raft;
pub mod role;
pub mod transactions;
pub mod wire;

/// The content type of [`exposition`]'s text (OpenMetrics 1.0, which Prometheus negotiates).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The environment variable that turns recording off (`off`); anything else, or nothing, is on.
pub const SWITCH_VARIABLE: &str = "SPECIE_METRICS";

/// Every family specie exposes, as PromQL names it (a counter with `_total`, an info with
/// `_info`; a histogram by its base name, queried with `_bucket`, `_sum` and `_count`) and its
/// type. A family appears in a scrape once it has a value. The dashboards and alert rules
/// (`ops/`) may name only these (checked by the tidy test).
pub const FAMILIES_EXPOSED: &[(&str, &str)] = &[
    ("specie_build_info", "info"),
    ("specie_http_requests_total", "counter"),
    ("specie_http_request_duration_seconds", "histogram"),
    ("specie_transactions_submitted_total", "counter"),
    ("specie_transactions_finished_total", "counter"),
    ("specie_transactions_validation_duration_seconds", "histogram"),
    ("specie_transactions_validation_batch_size", "histogram"),
    ("specie_transactions_submit_duration_seconds", "histogram"),
    ("specie_transactions_verified_total", "counter"),
    ("specie_transactions_verification_seconds_total", "counter"),
    ("specie_coordinator_dtxn_size", "histogram"),
    ("specie_coordinator_phase_duration_seconds", "histogram"),
    ("specie_log_fsync_duration_seconds", "histogram"),
    ("specie_raft_leader_changes_total", "counter"),
    ("specie_raft_term", "gauge"),
    ("specie_raft_is_leader", "gauge"),
    ("specie_raft_has_leader", "gauge"),
    ("specie_raft_leader_id", "gauge"),
    ("specie_raft_commit_index", "gauge"),
    ("specie_raft_applied_index", "gauge"),
    ("specie_raft_last_log_index", "gauge"),
    ("specie_raft_snapshot_index", "gauge"),
    ("specie_raft_snapshot_duration_seconds", "histogram"),
    ("specie_raft_log_appends_total", "counter"),
    ("specie_raft_log_syncs_total", "counter"),
    ("specie_raft_replication_lag_entries", "gauge"),
    ("specie_raft_voters", "gauge"),
    ("specie_raft_learners", "gauge"),
    ("specie_raft_membership_changing", "gauge"),
    ("specie_wire_authorization_refused_total", "counter"),
    ("specie_wire_server_events_total", "counter"),
    ("specie_wire_handshakes_total", "counter"),
    ("specie_fastpay_accounts", "gauge"),
    ("specie_fastpay_call_duration_seconds", "histogram"),
    ("specie_fastpay_refusals_total", "counter"),
    ("specie_fastpay_votes_total", "counter"),
    ("specie_fastpay_confirmed_total", "counter"),
    ("specie_fastpay_balances_value", "gauge"),
    ("specie_fastpay_funded_value_total", "counter"),
    ("specie_fastpay_redeemed_value_total", "counter"),
    ("specie_fastpay_credits_unacked_value", "gauge"),
    ("specie_fastpay_epoch", "gauge"),
    ("specie_fastpay_seated", "gauge"),
    ("specie_offline_funded_value_total", "counter"),
    ("specie_offline_defunded_value_total", "counter"),
    ("specie_offline_outstanding_value", "gauge"),
    ("specie_offline_expired_value", "gauge"),
    ("specie_offline_double_spent_value", "gauge"),
    ("specie_offline_debtors", "gauge"),
    ("specie_exchange_height", "gauge"),
    ("specie_exchange_block_size", "histogram"),
    ("specie_exchange_clearing_duration_seconds", "histogram"),
    ("specie_exchange_traded_value_total", "counter"),
    ("specie_exchange_accounts", "gauge"),
    ("specie_exchange_offers", "gauge"),
    ("specie_ledger_height", "gauge"),
    ("specie_ledger_records_waiting", "gauge"),
    ("specie_ledger_records_undecided", "gauge"),
    ("specie_ledger_supply_issued_value", "gauge"),
    ("specie_ledger_supply_balanced", "gauge"),
    ("specie_coordinator_queue_transactions", "gauge"),
    ("specie_coordinator_queue_transactions_max", "gauge"),
    ("specie_coordinator_dtxns_in_flight", "gauge"),
    ("specie_coordinator_dtxns_in_flight_max", "gauge"),
    ("specie_atomizer_height", "gauge"),
    ("specie_atomizer_admitted_total", "counter"),
    ("specie_atomizer_block_size", "histogram"),
    ("specie_atomizer_phase_duration_seconds", "histogram"),
];

/// Labels as (name, value) pairs, the values from bounded sets (see the module's doc).
type Labels<const N: usize> = [(&'static str, String); N];

/// Every family of the process, registered once on first use.
struct Families {
    registry: Mutex<Registry>,
    on: AtomicBool,
    http: http::Families,
    transactions: transactions::Families,
    coordinator: coordinator::Families,
    atomizer: atomizer::Families,
    fastpay: fastpay::Families,
    exchange: exchange::Families,
    log: log::Families,
    raft: raft::Families,
    wire: wire::Families,
}

static FAMILIES: LazyLock<Families> = LazyLock::new(|| {
    let mut registry = Registry::default();
    registry.register(
        "specie_build",
        "The running build: its version (a constant 1)",
        Info::new([("version", env!("CARGO_PKG_VERSION").to_string())]),
    );
    let on = std::env::var(SWITCH_VARIABLE).map_or(true, |value| value != "off");
    Families {
        http: http::Families::register(&mut registry),
        transactions: transactions::Families::register(&mut registry),
        coordinator: coordinator::Families::register(&mut registry),
        atomizer: atomizer::Families::register(&mut registry),
        fastpay: fastpay::Families::register(&mut registry),
        exchange: exchange::Families::register(&mut registry),
        log: log::Families::register(&mut registry),
        raft: raft::Families::register(&mut registry),
        wire: wire::Families::register(&mut registry),
        on: AtomicBool::new(on),
        registry: Mutex::new(registry),
    }
});

/// The families, if recording is on.
fn recording() -> Option<&'static Families> {
    let families = &*FAMILIES;
    families.on.load(Ordering::Relaxed).then_some(families)
}

/// Whether this process records (see [`SWITCH_VARIABLE`]).
pub fn enabled() -> bool {
    recording().is_some()
}

/// Adds what `collector` reports to every scrape from now on (a view read at scrape time).
fn add_collector(collector: Box<dyn Collector>) {
    FAMILIES.registry.lock().register_collector(collector);
}

/// Every family of the process and its current values, as Prometheus scrapes them
/// ([`CONTENT_TYPE`]).
pub fn exposition() -> String {
    let mut text = String::with_capacity(16 * 1024);
    // Writing into a String cannot fail; an encoder error would be a bug in a family's labels.
    encode(&mut text, &FAMILIES.registry.lock()).expect("metrics encode into a String");
    text
}

/// Seconds from 100 µs to about 26 s, doubling: request, validation and stage latencies.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_1, 2.0, 19)
}

/// Counts from 1 to 65 536, doubling: batch sizes.
fn size_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(1.0, 2.0, 17)
}

fn latency_histogram() -> Histogram {
    Histogram::new(latency_buckets())
}

fn size_histogram() -> Histogram {
    Histogram::new(size_buckets())
}

/// A family of counters labelled by `N` labels.
type CounterFamily<const N: usize> = Family<Labels<N>, Counter>;
/// A family of histograms with [`latency_buckets`].
type LatencyFamily<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

fn latency_family<const N: usize>() -> LatencyFamily<N> {
    Family::new_with_constructor(latency_histogram as fn() -> Histogram)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once each subsystem has recorded, a scrape shows exactly the families listed in
    /// [`FAMILIES_EXPOSED`], each with its type: the list the dashboards are checked against
    /// cannot drift from what the code exposes.
    #[test]
    fn a_scrape_shows_exactly_the_listed_families() {
        http::answered("GET", "/v1/info", 200, std::time::Duration::from_millis(3));
        let kinds = [("confidential", 3, std::time::Duration::from_millis(6))];
        transactions::validated(10, std::time::Duration::from_millis(2), &kinds);
        transactions::finished("invalid", "bad_signature", 1);
        transactions::submission_answered(std::time::Duration::from_millis(9));
        coordinator::dtxn_finished(4, Some(1), None, 2);
        atomizer::attested(3);
        atomizer::block_finished(7, 4, 2);
        exchange::block_cleared(3, std::time::Duration::from_millis(20), [(0, 5), (1, 7)].into_iter());
        fastpay::answered(
            "order",
            Some(("refused", "WrongSequence")),
            std::time::Duration::from_millis(2),
        );
        log::synced(std::time::Duration::from_micros(700));
        raft::leader_changed();
        raft::snapshot_step(raft::SnapshotStep::Write, std::time::Duration::from_millis(4));
        raft::watch(|| raft::RaftView {
            is_leader: true,
            leader: Some(1),
            commit_index: Some(1),
            applied_index: Some(1),
            last_log_index: Some(1),
            snapshot_index: Some(0),
            replication_lag: vec![(2, 0)],
            ..raft::RaftView::default()
        });
        wire::authorization_refused("sentinel");
        wire::handshake_admitted("coordinator");
        wire::watch(|| vec![("requests_refused", 2)]);
        role::watch(|| role::RoleFamily::ALL.iter().map(|family| (*family, 1.0)).collect());
        let text = exposition();
        // OpenMetrics names a counter's family without `_total` and an info's without `_info`.
        let typed: std::collections::BTreeSet<(String, String)> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .map(|line| {
                let (family, kind) = line.split_once(' ').unwrap();
                let suffix = match kind {
                    "counter" => "_total",
                    "info" => "_info",
                    _ => "",
                };
                (format!("{family}{suffix}"), kind.to_string())
            })
            .collect();
        let listed: std::collections::BTreeSet<(String, String)> = FAMILIES_EXPOSED
            .iter()
            .map(|(name, kind)| (name.to_string(), kind.to_string()))
            .collect();
        assert_eq!(typed, listed, "{text}");
        assert!(text.contains("specie_build_info{version=\""), "{text}");
        assert!(
            text.contains("specie_http_requests_total{route=\"/v1/info\",method=\"GET\",status=\"200\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn buckets_are_explicit_and_increasing() {
        let latency: Vec<f64> = latency_buckets().collect();
        assert_eq!(latency.len(), 19);
        assert!(latency.windows(2).all(|w| w[0] < w[1]));
        assert!(latency[0] <= 0.000_1 && *latency.last().unwrap() > 20.0);
        let sizes: Vec<f64> = size_buckets().collect();
        assert_eq!((sizes[0], *sizes.last().unwrap()), (1.0, 65_536.0));
    }
}
