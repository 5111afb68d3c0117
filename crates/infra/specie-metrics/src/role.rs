//! What each mode's role holds, read at scrape time from a replica's state machine
//! ([`watch`]): FastPay's accounts, votes and value, offline cash's books, the exchange's
//! height and book, the ledger of record's height and what waits for a block, the atomizer's
//! height. Values are in the currency's smallest unit (exact up to 2^53 as Prometheus's floats).

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::add_collector;

/// Declares [`RoleFamily`], one variant per family with its name in the exposition (a
/// counter's without `_total`), its help, and whether it is a counter (else a gauge).
macro_rules! role_families {
    ($($variant:ident => ($name:literal, $help:literal, $counter:literal),)*) => {
        /// A family a role's state gives.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum RoleFamily {
            $($variant,)*
        }

        impl RoleFamily {
            pub const ALL: &[RoleFamily] = &[$(RoleFamily::$variant,)*];

            fn describe(self) -> (&'static str, &'static str, bool) {
                match self {
                    $(RoleFamily::$variant => ($name, $help, $counter),)*
                }
            }
        }
    };
}

role_families! {
    FastpayAccounts => ("specie_fastpay_accounts", "Accounts this authority shard holds", false),
    FastpayVotes => ("specie_fastpay_votes", "Transfer orders this authority shard signed", true),
    FastpayConfirmed => ("specie_fastpay_confirmed", "Certificates this authority shard confirmed", true),
    FastpayBalances => ("specie_fastpay_balances_value", "Value in this shard's accounts", false),
    FastpayFunded => ("specie_fastpay_funded_value", "Value funded into this shard from the core", true),
    FastpayRedeemed => ("specie_fastpay_redeemed_value", "Value redeemed from this shard to the core", true),
    FastpayEpoch => ("specie_fastpay_epoch", "The committee epoch this authority shard is in", false),
    FastpaySeated => (
        "specie_fastpay_seated",
        "1 if this shard's key holds its seat in the current epoch (it votes), else 0 (replaced, or not yet handed the seat)",
        false
    ),
    FastpayCreditsUnacked => (
        "specie_fastpay_credits_unacked_value",
        "Value credited to other shards and not yet acknowledged by them",
        false
    ),
    OfflineFunded => ("specie_offline_funded_value", "Value moved into offline cash from the core", true),
    OfflineDefunded => ("specie_offline_defunded_value", "Value paid back from offline cash to the core", true),
    OfflineOutstanding => ("specie_offline_outstanding_value", "Value of issued tokens not yet paid", false),
    OfflineExpired => (
        "specie_offline_expired_value",
        "Of the outstanding value, tokens past their key's deposit window",
        false
    ),
    OfflineDoubleSpent => (
        "specie_offline_double_spent_value",
        "Double-spent value refused at deposit, owed by the named debtors",
        false
    ),
    OfflineDebtors => ("specie_offline_debtors", "Identities named as double spenders", false),
    ExchangeHeight => ("specie_exchange_height", "Blocks the exchange has cleared", false),
    ExchangeAccounts => ("specie_exchange_accounts", "Accounts on the exchange", false),
    ExchangeOffers => ("specie_exchange_offers", "Sell offers resting on the exchange", false),
    LedgerHeight => ("specie_ledger_height", "Blocks in the ledger of record", false),
    LedgerWaiting => (
        "specie_ledger_records_waiting",
        "Confirmed transactions not sealed in a block yet (the sealing lag)",
        false
    ),
    LedgerUndecided => (
        "specie_ledger_records_undecided",
        "Written-ahead transactions whose outcome is not known yet",
        false
    ),
    LedgerSupplyIssued => (
        "specie_ledger_supply_issued_value",
        "Minted minus redeemed, per the ledger of record up to its head",
        false
    ),
    LedgerSupplyBalanced => (
        "specie_ledger_supply_balanced",
        "1 while the ledger's supply tallies agree (issued = core outputs + hidden notes + held by modes), else 0",
        false
    ),
    CoordinatorQueue => (
        "specie_coordinator_queue_transactions",
        "Transactions a coordinator leader holds, not yet cut into a dtxn",
        false
    ),
    CoordinatorQueueMax => (
        "specie_coordinator_queue_transactions_max",
        "The most a coordinator leader queues before it answers busy",
        false
    ),
    CoordinatorInFlight => (
        "specie_coordinator_dtxns_in_flight",
        "Dtxns a coordinator leader has proposed and not finished",
        false
    ),
    CoordinatorInFlightMax => (
        "specie_coordinator_dtxns_in_flight_max",
        "The most dtxns a coordinator leader keeps in flight",
        false
    ),
    AtomizerHeight => ("specie_atomizer_height", "Blocks the atomizer has ordered", false),
    AtomizerAdmitted => ("specie_atomizer_admitted", "Transactions the atomizer has admitted", true),
}

/// What a role's thread last published of its families, where no other thread may read the
/// role's state (the embedded node's threads own theirs): the thread publishes after each
/// round of its work, and a scrape ([`watch`]) reads the copy.
#[derive(Clone, Debug, Default)]
pub struct Published(std::sync::Arc<parking_lot::Mutex<Vec<(RoleFamily, f64)>>>);

impl Published {
    /// Replaces what was published with `gauges` (no allocation once the first is in).
    pub fn publish(&self, gauges: &[(RoleFamily, f64)]) {
        let mut held = self.0.lock();
        held.clear();
        held.extend_from_slice(gauges);
    }

    /// What was published last.
    pub fn read(&self) -> Vec<(RoleFamily, f64)> {
        self.0.lock().clone()
    }
}

/// From now on every scrape reads `read` (what the role holds now) for its families.
pub fn watch(read: impl Fn() -> Vec<(RoleFamily, f64)> + Send + Sync + 'static) {
    add_collector(Box::new(View(Box::new(read))));
}

struct View(Box<dyn Fn() -> Vec<(RoleFamily, f64)> + Send + Sync>);

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("role::View")
    }
}

impl Collector for View {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        for (family, value) in (self.0)() {
            let (name, help, counter) = family.describe();
            if counter {
                let metric = ConstCounter::new(value);
                metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
            } else {
                let metric = ConstGauge::new(value);
                metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
            }
        }
        Ok(())
    }
}
