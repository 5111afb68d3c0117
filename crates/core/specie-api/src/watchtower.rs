//! Hamilton's watchtower (§5): the outcome of every transaction a node decided recently, for a
//! client that lost its answer (its connection dropped, its request timed out, it restarted). A
//! bounded memory, not a ledger: past `capacity` outcomes the oldest are forgotten, and a
//! confirmed transaction is then found in the ledger of record, or by its outputs in the UHS.

use std::collections::{HashMap, VecDeque};

use specie_transaction::Txid;

use crate::status::TxStatus;

/// Outcomes kept by default: about 25 MB.
pub const WATCHTOWER_CAPACITY_DEFAULT: usize = 1 << 18;

pub struct Watchtower {
    capacity: usize,
    statuses: HashMap<Txid, TxStatus>,
    /// Txids in the order they were first recorded: the oldest is forgotten first.
    order: VecDeque<Txid>,
}

impl Watchtower {
    pub fn new(capacity: usize) -> Watchtower {
        assert!(capacity > 0, "a watchtower remembers at least one outcome");
        Watchtower {
            capacity,
            statuses: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Remembers `txid`'s latest outcome (a transaction refused as busy and resubmitted may be
    /// confirmed later). `Unknown` is no outcome, and is not kept.
    pub fn record(&mut self, txid: Txid, status: TxStatus) {
        if status == TxStatus::Unknown {
            return;
        }
        if let Some(known) = self.statuses.get_mut(&txid) {
            // Confirmed is final: a replay of a confirmed transaction is refused, and that
            // refusal must not hide that it was confirmed.
            if *known != TxStatus::Confirmed {
                *known = status;
            }
            return;
        }
        if self.order.len() == self.capacity {
            let oldest = self.order.pop_front().expect("a full watchtower holds outcomes");
            self.statuses.remove(&oldest);
        }
        self.order.push_back(txid);
        self.statuses.insert(txid, status);
        debug_assert_eq!(self.order.len(), self.statuses.len());
    }

    pub fn status(&self, txid: &Txid) -> Option<&TxStatus> {
        self.statuses.get(txid)
    }

    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_shard::Vote;

    #[test]
    fn it_keeps_the_latest_outcome_confirmed_stays_and_the_oldest_is_forgotten() {
        let mut tower = Watchtower::new(2);
        let (a, b, c) = (Txid([1; 32]), Txid([2; 32]), Txid([3; 32]));
        tower.record(a, TxStatus::Busy);
        tower.record(a, TxStatus::Confirmed);
        tower.record(a, TxStatus::Rejected(Vote::OutputExists));
        assert_eq!(
            tower.status(&a),
            Some(&TxStatus::Confirmed),
            "a replay does not hide it"
        );
        tower.record(b, TxStatus::Unknown);
        assert_eq!(tower.status(&b), None, "unknown is no outcome");
        tower.record(b, TxStatus::Rejected(Vote::InputMissing));
        tower.record(c, TxStatus::Dropped);
        assert_eq!(tower.len(), 2);
        assert_eq!(tower.status(&a), None, "the oldest is forgotten");
        assert_eq!(tower.status(&b), Some(&TxStatus::Rejected(Vote::InputMissing)));
        assert_eq!(tower.status(&c), Some(&TxStatus::Dropped));
    }
}
