//! The core's transactions, wherever they enter (the embedded node, a cluster's sentinels):
//! submitted, validated in batches, finished by outcome and refusal code, and how long a
//! submission took from its arrival to its last answer.

use std::time::Duration;

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::{latency_histogram, recording, size_histogram, CounterFamily, Labels};

pub(crate) struct Families {
    submitted: Counter,
    finished: CounterFamily<2>,
    validation: Histogram,
    validation_batch: Histogram,
    submit: Histogram,
    verified: CounterFamily<1>,
    verification: Family<Labels<1>, Counter<f64, AtomicU64>>,
}

impl Families {
    pub(crate) fn register(registry: &mut Registry) -> Families {
        let families = Families {
            submitted: Counter::default(),
            finished: CounterFamily::default(),
            validation: latency_histogram(),
            validation_batch: size_histogram(),
            submit: latency_histogram(),
            verified: CounterFamily::default(),
            verification: Family::default(),
        };
        registry.register(
            "specie_transactions_submitted",
            "Transactions handed to a sentinel for validation",
            families.submitted.clone(),
        );
        registry.register(
            "specie_transactions_finished",
            "Transactions answered, by outcome (confirmed, invalid, rejected, busy, dropped, \
             pending, malformed) and code (why it was refused; empty when confirmed)",
            families.finished.clone(),
        );
        registry.register(
            "specie_transactions_validation_duration_seconds",
            "Time a sentinel took to validate one batch on all cores",
            families.validation.clone(),
        );
        registry.register(
            "specie_transactions_validation_batch_size",
            "Transactions in one batch a sentinel validated",
            families.validation_batch.clone(),
        );
        registry.register(
            "specie_transactions_submit_duration_seconds",
            "Time from a submission's arrival at the API to its last transaction's answer \
             (or its time-out)",
            families.submit.clone(),
        );
        registry.register(
            "specie_transactions_verified",
            "Transactions a sentinel checked, by kind (transfer, mint, redeem, confidential, \
             anonymous, fastpay_funding, …)",
            families.verified.clone(),
        );
        registry.register(
            "specie_transactions_verification_seconds",
            "Core time a sentinel spent checking transactions (signatures, proofs), by kind: \
             divided by specie_transactions_verified_total, each privacy level's cost per \
             transaction",
            families.verification.clone(),
        );
        families
    }
}

/// A sentinel validated `count` transactions in one batch in `elapsed`, spending, per kind (its
/// stable name, from a fixed set), the core time given on that kind's transactions.
pub fn validated(count: usize, elapsed: Duration, kinds: &[(&'static str, u64, Duration)]) {
    let Some(all) = recording() else { return };
    let families = &all.transactions;
    families.submitted.inc_by(count as u64);
    families.validation_batch.observe(count as f64);
    families.validation.observe(elapsed.as_secs_f64());
    for (kind, transactions, took) in kinds {
        let labels = [("kind", kind.to_string())];
        families.verified.get_or_create(&labels).inc_by(*transactions);
        families.verification.get_or_create(&labels).inc_by(took.as_secs_f64());
    }
}

/// `count` transactions were answered with `outcome`, refused for `code` (`""` when confirmed).
/// Both come from fixed sets: the API's statuses and refusal codes.
pub fn finished(outcome: &str, code: &str, count: u64) {
    let Some(all) = recording() else { return };
    let families = &all.transactions;
    families
        .finished
        .get_or_create(&[("outcome", outcome.to_string()), ("code", code.to_string())])
        .inc_by(count);
}

/// A submission of transactions got its last answer `elapsed` after it arrived.
pub fn submission_answered(elapsed: Duration) {
    let Some(all) = recording() else { return };
    let families = &all.transactions;
    families.submit.observe(elapsed.as_secs_f64());
}
