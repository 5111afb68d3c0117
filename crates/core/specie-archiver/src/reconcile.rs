//! After a crash: which written-ahead transactions did the shards commit?
//!
//! A host writes every transaction's record ahead, durably, before the coordinator sees it, and
//! learns outcomes afterwards without writing them down. After a restart (once the coordinator
//! has finished every dtxn that was in flight) the outcome of a written-ahead record that is not
//! in the ledger is read off the UHS:
//!
//! - every transaction creates at least one id (outputs, or its kind's marker), and an id
//!   commits to its transaction (the txid is in its preimage), so only that transaction can
//!   ever have put it in the UHS;
//! - an id leaves the UHS only when a committed transaction spends it, and every committed
//!   transaction was written ahead.
//!
//! So a record was committed exactly when one of its created ids is in the UHS now, or is spent
//! by a record that was committed: a walk from the first kind back along the spends finds all.

use std::collections::{HashMap, HashSet};

use specie_transaction::UhsId;

use crate::record::Record;

/// Every id the records create: what to ask the shards about.
pub fn created_ids(records: &[Record]) -> Vec<UhsId> {
    records
        .iter()
        .flat_map(|record| record.created().iter().copied())
        .collect()
}

/// Which of `records` (distinct transactions) were committed, given which of their created ids
/// are in the UHS now.
pub fn committed(records: &[Record], in_uhs: &HashSet<UhsId>) -> Vec<bool> {
    let creator: HashMap<UhsId, usize> = records
        .iter()
        .enumerate()
        .flat_map(|(index, record)| record.created().iter().map(move |id| (*id, index)))
        .collect();
    let mut committed: Vec<bool> = records
        .iter()
        .map(|record| record.created().iter().any(|id| in_uhs.contains(id)))
        .collect();
    let mut walk: Vec<usize> = (0..records.len()).filter(|&index| committed[index]).collect();
    while let Some(spender) = walk.pop() {
        for id in records[spender].spent() {
            if let Some(&created_by) = creator.get(id) {
                if !committed[created_by] {
                    committed[created_by] = true;
                    walk.push(created_by);
                }
            }
        }
    }
    committed
}
