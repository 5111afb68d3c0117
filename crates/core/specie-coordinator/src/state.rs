use std::collections::BTreeMap;

use specie_shard::{DtxnId, Vote};
use specie_transaction::CompactTransaction;

/// The durable inputs of each 2PC phase (Hamilton §4.2: "the coordinator replicates the inputs
/// to both the prepare and commit requests").
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CoordinatorCommand {
    /// Start dtxn `dtxn` with these transactions (attestations stripped: shards never see them).
    Prepare { dtxn: DtxnId, txs: Vec<CompactTransaction> },
    /// The decision for every transaction of `dtxn`: `Vote::Yes` completes it, anything else
    /// is the first reason a shard gave for refusing it.
    Commit { dtxn: DtxnId, outcomes: Vec<Vote> },
    /// Every participant has committed these dtxns: forget them.
    Finish { dtxns: Vec<DtxnId> },
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ActiveDtxn {
    pub txs: Vec<CompactTransaction>,
    /// `None` while preparing; the durable decision once committing.
    pub outcomes: Option<Vec<Vote>>,
}

/// What every coordinator replica holds.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct CoordinatorState {
    next_dtxn: DtxnId,
    active: BTreeMap<DtxnId, ActiveDtxn>,
}

/// Whether a command changed the state. A command that does not fit (a deposed leader's
/// proposal racing its successor's) is ignored identically on every replica.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Applied {
    Changed,
    Ignored,
}

/// A coordinator state (or engine) that breaks one of its invariants: a bug, or a forged log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvariantViolation {
    #[error("active dtxn {dtxn} is not below next_dtxn {next_dtxn}")]
    ActiveBeyondNext { dtxn: DtxnId, next_dtxn: DtxnId },
    #[error("active dtxn {dtxn} has no transactions")]
    EmptyDtxn { dtxn: DtxnId },
    #[error("dtxn {dtxn} has {outcomes} outcomes for {txs} transactions")]
    OutcomeCount { dtxn: DtxnId, outcomes: usize, txs: usize },
    #[error("engine: {0}")]
    Engine(&'static str),
}

impl CoordinatorState {
    /// Every active dtxn was prepared (below `next_dtxn`, with transactions) and a decision, once
    /// taken, has one outcome per transaction. O(active dtxns): cheap enough after every input.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        for (&dtxn, active) in &self.active {
            if dtxn >= self.next_dtxn {
                return Err(InvariantViolation::ActiveBeyondNext {
                    dtxn,
                    next_dtxn: self.next_dtxn,
                });
            }
            if active.txs.is_empty() {
                return Err(InvariantViolation::EmptyDtxn { dtxn });
            }
            if let Some(outcomes) = &active.outcomes {
                if outcomes.len() != active.txs.len() {
                    return Err(InvariantViolation::OutcomeCount {
                        dtxn,
                        outcomes: outcomes.len(),
                        txs: active.txs.len(),
                    });
                }
            }
        }
        Ok(())
    }

    pub fn from_parts(next_dtxn: DtxnId, active: BTreeMap<DtxnId, ActiveDtxn>) -> Self {
        assert!(active.keys().all(|d| *d < next_dtxn), "active dtxns precede next_dtxn");
        CoordinatorState { next_dtxn, active }
    }

    pub fn next_dtxn(&self) -> DtxnId {
        self.next_dtxn
    }

    pub fn active(&self) -> &BTreeMap<DtxnId, ActiveDtxn> {
        &self.active
    }

    /// Every dtxn below this id is finished; shards may forget them.
    pub fn finished_below(&self) -> DtxnId {
        self.active.keys().next().copied().unwrap_or(self.next_dtxn)
    }

    pub fn apply(&mut self, command: &CoordinatorCommand) -> Applied {
        match command {
            CoordinatorCommand::Prepare { dtxn, txs } => {
                // The last id, u64::MAX, is never used: `next_dtxn` could not pass it.
                let next = match self.next_dtxn.checked_add(1) {
                    Some(next) if *dtxn == self.next_dtxn && !txs.is_empty() => next,
                    _ => return Applied::Ignored,
                };
                self.next_dtxn = next;
                self.active.insert(
                    *dtxn,
                    ActiveDtxn {
                        txs: txs.clone(),
                        outcomes: None,
                    },
                );
                Applied::Changed
            }
            CoordinatorCommand::Commit { dtxn, outcomes } => match self.active.get_mut(dtxn) {
                // Phases advance in order: only a preparing dtxn takes a decision, exactly once.
                Some(active) if active.outcomes.is_none() && active.txs.len() == outcomes.len() => {
                    active.outcomes = Some(outcomes.clone());
                    Applied::Changed
                }
                _ => Applied::Ignored,
            },
            CoordinatorCommand::Finish { dtxns } => {
                let mut changed = Applied::Ignored;
                for dtxn in dtxns {
                    if self.active.get(dtxn).is_some_and(|a| a.outcomes.is_some()) {
                        self.active.remove(dtxn);
                        changed = Applied::Changed;
                    }
                }
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_transaction::{Txid, UhsId};

    fn tx(n: u8) -> CompactTransaction {
        CompactTransaction {
            txid: Txid([n; 32]),
            spent: vec![UhsId([n; 32])],
            created: vec![UhsId([n + 1; 32])],
            ..Default::default()
        }
    }

    #[test]
    fn invariant_checks_catch_each_broken_shape() {
        let active = |txs: Vec<CompactTransaction>, outcomes: Option<Vec<Vote>>| ActiveDtxn { txs, outcomes };
        let good = CoordinatorState::from_parts(2, BTreeMap::from([(1, active(vec![tx(1)], Some(vec![Vote::Yes])))]));
        assert_eq!(good.check_invariants(), Ok(()));
        let beyond = CoordinatorState {
            next_dtxn: 1,
            active: BTreeMap::from([(1, active(vec![tx(1)], None))]),
        };
        assert!(matches!(
            beyond.check_invariants(),
            Err(InvariantViolation::ActiveBeyondNext { .. })
        ));
        let empty = CoordinatorState::from_parts(2, BTreeMap::from([(0, active(vec![], None))]));
        assert_eq!(empty.check_invariants(), Err(InvariantViolation::EmptyDtxn { dtxn: 0 }));
        let short = CoordinatorState::from_parts(
            2,
            BTreeMap::from([(0, active(vec![tx(1), tx(2)], Some(vec![Vote::Yes])))]),
        );
        assert!(matches!(
            short.check_invariants(),
            Err(InvariantViolation::OutcomeCount { .. })
        ));
    }

    #[test]
    fn phases_advance_only_in_order() {
        let mut state = CoordinatorState::default();
        let commit = CoordinatorCommand::Commit {
            dtxn: 0,
            outcomes: vec![Vote::Yes],
        };
        let finish = CoordinatorCommand::Finish { dtxns: vec![0] };
        assert_eq!(state.apply(&commit), Applied::Ignored, "commit before prepare");
        assert_eq!(state.apply(&finish), Applied::Ignored, "finish before prepare");
        let prepare = CoordinatorCommand::Prepare {
            dtxn: 0,
            txs: vec![tx(1)],
        };
        assert_eq!(state.apply(&prepare), Applied::Changed);
        assert_eq!(state.apply(&prepare), Applied::Ignored, "same dtxn id twice");
        assert_eq!(state.apply(&finish), Applied::Ignored, "finish before commit");
        let wrong_len = CoordinatorCommand::Commit {
            dtxn: 0,
            outcomes: vec![Vote::Yes, Vote::Yes],
        };
        assert_eq!(state.apply(&wrong_len), Applied::Ignored);
        assert_eq!(state.apply(&commit), Applied::Changed);
        let other = CoordinatorCommand::Commit {
            dtxn: 0,
            outcomes: vec![Vote::InputMissing],
        };
        assert_eq!(state.apply(&other), Applied::Ignored, "a decision is taken once");
        assert_eq!(state.finished_below(), 0);
        assert_eq!(state.apply(&finish), Applied::Changed);
        assert_eq!(state.finished_below(), 1);
        assert!(state.active().is_empty());
    }

    #[test]
    fn the_last_dtxn_id_is_never_used() {
        let mut state = CoordinatorState::from_parts(u64::MAX, BTreeMap::new());
        let last = CoordinatorCommand::Prepare {
            dtxn: u64::MAX,
            txs: vec![tx(1)],
        };
        assert_eq!(state.apply(&last), Applied::Ignored);
        assert_eq!(state.next_dtxn(), u64::MAX);
        assert_eq!(state.finished_below(), u64::MAX);
        let commit = CoordinatorCommand::Commit {
            dtxn: u64::MAX,
            outcomes: vec![Vote::Yes],
        };
        assert_eq!(state.apply(&commit), Applied::Ignored);
        let finish = CoordinatorCommand::Finish {
            dtxns: vec![u64::MAX, 0, u64::MAX],
        };
        assert_eq!(state.apply(&finish), Applied::Ignored);
    }

    #[test]
    fn prepare_ids_must_be_consecutive() {
        let mut state = CoordinatorState::default();
        let skip = CoordinatorCommand::Prepare {
            dtxn: 1,
            txs: vec![tx(1)],
        };
        assert_eq!(state.apply(&skip), Applied::Ignored);
        let empty = CoordinatorCommand::Prepare { dtxn: 0, txs: vec![] };
        assert_eq!(state.apply(&empty), Applied::Ignored);
        assert_eq!(state.next_dtxn(), 0);
    }
}
