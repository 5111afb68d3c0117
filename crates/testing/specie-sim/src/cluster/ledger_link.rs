//! The ledger of record as the cluster world's ordering replicas reach it: the real ordering
//! replica's gate and reports (`specie-cluster`'s `LedgerGate`) over a model of the archiver
//! group. The simulated sentinel writes most transactions ahead before it submits them; the
//! model answers the gate's questions from what was written, and keeps every report that
//! arrives. Both cross a network of their own that drops and delays (its duplicates are not
//! sent: a question is idempotent, and a report a hint). The archiver's own protocol under crashes is the
//! privacy world's (`crate::privacy`); here the world checks what the ordering side says:
//!
//! - a transaction not written ahead is never applied;
//! - every report, including those of an earlier leader's transactions that a new leader
//!   settles after a failover, says what the UHS did: a false "refused" could have had the
//!   archiver decide a committed transaction out of the ledger.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use specie_cluster::ordering_replica::{LedgerCall, LedgerGate, LedgerLink, LedgerRefusal};
use specie_faultnet::FaultNetwork;
use specie_transaction::Txid;

/// What the model archiver holds, shared with the world that checks it.
#[derive(Default)]
pub(super) struct LedgerModel {
    /// Written ahead: txid and the digest of the compact form.
    written: BTreeSet<(Txid, [u8; 32])>,
    /// Every report that arrived, in order.
    pub(super) reports: Vec<(Txid, bool)>,
}

/// The model archiver group behind its network.
#[derive(Clone)]
pub(super) struct SimLedger {
    pub(super) model: Arc<Mutex<LedgerModel>>,
    network: FaultNetwork,
}

impl SimLedger {
    pub(super) fn new(network: FaultNetwork) -> SimLedger {
        SimLedger {
            model: Arc::default(),
            network,
        }
    }

    /// The simulated sentinel's write-ahead, which the world makes durable at once.
    pub(super) fn write_ahead(&self, txid: Txid, digest: [u8; 32]) {
        self.model.lock().written.insert((txid, digest));
    }

    pub(super) fn gate(&self) -> LedgerGate {
        LedgerGate::new(Arc::new(self.clone()))
    }

    /// Each report against the fates the world settled: what is wrong, if anything.
    pub(super) fn false_report(&self, fates: &BTreeMap<Txid, bool>) -> Option<String> {
        let model = self.model.lock();
        model.reports.iter().find_map(|(txid, committed)| {
            let fate = fates.get(txid);
            (fate != Some(committed)).then(|| {
                format!(
                    "the ordering group reported transaction {} {}, but it {}",
                    hex::encode(&txid.0[..8]),
                    if *committed { "committed" } else { "refused" },
                    match fate {
                        Some(true) => "applied",
                        Some(false) => "never applied",
                        None => "was never submitted",
                    }
                )
            })
        })
    }
}

impl LedgerLink for SimLedger {
    fn written_ahead(&self, asked: Vec<(Txid, [u8; 32])>) -> LedgerCall<Vec<bool>> {
        let (model, network) = (self.model.clone(), self.network.clone());
        Box::pin(async move {
            let there = network.fate();
            there.in_transit().await;
            if there.dropped {
                return Err(LedgerRefusal::Lost);
            }
            let written: Vec<bool> = {
                let model = model.lock();
                asked.iter().map(|question| model.written.contains(question)).collect()
            };
            let back = network.fate();
            back.in_transit().await;
            if back.dropped {
                return Err(LedgerRefusal::Lost);
            }
            Ok(written)
        })
    }

    fn report(&self, decided: Vec<(Txid, bool)>) {
        let (model, network) = (self.model.clone(), self.network.clone());
        tokio::spawn(async move {
            let there = network.fate();
            there.in_transit().await;
            if !there.dropped {
                model.lock().reports.extend(decided);
            }
        });
    }
}
