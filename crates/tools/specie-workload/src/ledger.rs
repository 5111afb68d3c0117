//! Compact load with values: what the simulators submit to shards and coordinators directly,
//! and the audit of the UHS they hold afterwards.
//!
//! Compact transactions carry UHS ids only, so the values live here: every id this workload
//! creates has one. A run plans with [`CompactLedger::plan`], submits however it likes, and
//! reports each transaction's fate with [`CompactLedger::settle`] (or leaves it unsettled while it
//! is unknown). A transaction whose fate stayed unknown (a lost reply) keeps its inputs out of
//! later plans; once the system is quiet, [`CompactLedger::resolve`] reads its fate from the UHS,
//! and checks that it applied all or nothing. At any quiet point [`CompactLedger::audit`] checks
//! a UHS: every id in it was created by this workload and never spent by an applied transaction,
//! and the value it holds is exactly what the applied mints created.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use specie_transaction::{CompactTransaction, Txid, UhsId};

/// How often each kind of transaction is planned, per mille (what is left is honest swaps).
#[derive(Clone, Copy, Debug)]
pub struct CompactMix {
    /// New money: a mint of 1 to 3 outputs.
    pub mint_per_mille: u32,
    /// A swap whose first input an applied transaction already spent.
    pub replay_per_mille: u32,
    /// A swap planned with a conflicting twin (same inputs, other outputs), submitted together.
    pub conflict_per_mille: u32,
    /// A swap with an extra input that never existed.
    pub unknown_input_per_mille: u32,
}

/// One planned transaction, and whether the workload vouches that it can apply (all inputs
/// spendable and not in another planned, unsettled transaction).
#[derive(Clone, Debug)]
pub struct CompactPlanned {
    pub tx: CompactTransaction,
    pub clean: bool,
}

/// Values of the ids this workload created, and which are spendable, in use or spent.
#[derive(Clone, Debug, Default)]
pub struct CompactLedger {
    values: BTreeMap<UhsId, u64>,
    /// Outputs of mints, whether or not the mint applied.
    mint_outputs: BTreeSet<UhsId>,
    /// Created by an applied transaction and not spent by one.
    spendable: BTreeSet<UhsId>,
    /// Spent by an applied transaction.
    spent: BTreeSet<UhsId>,
    /// Inputs of planned, unsettled transactions (with how many).
    in_use: BTreeMap<UhsId, u32>,
}

/// What [`CompactLedger::audit`] found wrong.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LedgerViolation {
    #[error("the UHS holds {0:?}, which no applied transaction of the workload created")]
    Unknown(UhsId),
    #[error("the UHS holds {0:?}, which an applied transaction spent")]
    Spent(UhsId),
    #[error("value not conserved: the UHS holds {in_uhs}, applied mints created {minted}")]
    Value { in_uhs: u64, minted: u64 },
    #[error("{id:?} spent twice: transaction {txid:?} applied after an applied transaction had spent it")]
    SpentTwice { id: UhsId, txid: Txid },
    #[error(
        "transaction {txid:?} applied in part: {outputs_present} of {outputs} outputs in the UHS, \
         {inputs_left} of {inputs} inputs still there"
    )]
    Partial {
        txid: Txid,
        outputs_present: usize,
        outputs: usize,
        inputs_left: usize,
        inputs: usize,
    },
}

/// True with a chance of `per_mille` in a thousand.
pub fn roll(rng: &mut impl Rng, per_mille: u32) -> bool {
    rng.gen_range(0..1000) < per_mille
}

impl CompactLedger {
    pub fn new() -> CompactLedger {
        CompactLedger::default()
    }

    fn fresh(&mut self, rng: &mut impl Rng, value: u64) -> UhsId {
        let id = UhsId(rng.gen());
        self.values.insert(id, value);
        id
    }

    /// One transaction, or a conflicting pair of two.
    pub fn plan(&mut self, rng: &mut impl Rng, mix: &CompactMix) -> Vec<CompactPlanned> {
        let free: Vec<UhsId> = self
            .spendable
            .iter()
            .filter(|id| !self.in_use.contains_key(*id))
            .copied()
            .collect();
        if free.len() < 2 || roll(rng, mix.mint_per_mille) {
            let created: Vec<UhsId> = (0..rng.gen_range(1..=3))
                .map(|_| {
                    let value = rng.gen_range(1..=1000);
                    self.fresh(rng, value)
                })
                .collect();
            self.mint_outputs.extend(&created);
            return vec![self.planned(rng, vec![], created, true)];
        }
        let mut spent = vec![free[rng.gen_range(0..free.len())]];
        let second = free[rng.gen_range(0..free.len())];
        if second != spent[0] {
            spent.push(second);
        }
        let mut clean = true;
        if roll(rng, mix.replay_per_mille) && !self.spent.is_empty() {
            let spent_ids: Vec<UhsId> = self.spent.iter().copied().collect();
            spent[0] = spent_ids[rng.gen_range(0..spent_ids.len())];
            clean = false;
        } else if roll(rng, mix.unknown_input_per_mille) {
            spent.push(UhsId(rng.gen()));
            clean = false;
        }
        let total: u64 = spent.iter().map(|id| self.values.get(id).copied().unwrap_or(0)).sum();
        let first = rng.gen_range(0..=total);
        let created = vec![self.fresh(rng, first), self.fresh(rng, total - first)];
        if !roll(rng, mix.conflict_per_mille) {
            return vec![self.planned(rng, spent, created, clean)];
        }
        let twin = vec![self.fresh(rng, total), self.fresh(rng, 0)];
        vec![
            self.planned(rng, spent.clone(), created, false),
            self.planned(rng, spent, twin, false),
        ]
    }

    fn planned(&mut self, rng: &mut impl Rng, spent: Vec<UhsId>, created: Vec<UhsId>, clean: bool) -> CompactPlanned {
        for id in &spent {
            *self.in_use.entry(*id).or_default() += 1;
        }
        CompactPlanned {
            tx: CompactTransaction {
                txid: Txid(rng.gen()),
                spent,
                created,
                ..Default::default()
            },
            clean,
        }
    }

    /// The final fate of a planned transaction: applied (its inputs are spent, its outputs
    /// spendable) or not. Refuses an applied transaction that spends an id an applied
    /// transaction already spent: the system under test let one id be spent twice.
    pub fn settle(&mut self, tx: &CompactTransaction, applied: bool) -> Result<(), LedgerViolation> {
        if applied {
            if let Some(id) = tx.spent.iter().find(|id| self.spent.contains(*id)) {
                return Err(LedgerViolation::SpentTwice { id: *id, txid: tx.txid });
            }
        }
        for id in &tx.spent {
            if let Some(count) = self.in_use.get_mut(id) {
                *count -= 1;
                if *count == 0 {
                    self.in_use.remove(id);
                }
            }
        }
        if applied {
            for id in &tx.spent {
                self.spendable.remove(id);
                self.spent.insert(*id);
            }
            self.spendable.extend(&tx.created);
        }
        Ok(())
    }

    /// Settles a transaction whose fate its submitter never learned, from a quiet UHS: its
    /// outputs are fresh and nothing else creates them, so it applied exactly when they are all
    /// there. Some but not all of them, or all of them beside an input it spent, means it applied
    /// in part. Returns whether it applied.
    pub fn resolve(&mut self, tx: &CompactTransaction, uhs: &BTreeSet<UhsId>) -> Result<bool, LedgerViolation> {
        let outputs_present = tx.created.iter().filter(|id| uhs.contains(*id)).count();
        let inputs_left = tx.spent.iter().filter(|id| uhs.contains(*id)).count();
        let applied = outputs_present == tx.created.len();
        if (outputs_present != 0 && !applied) || (applied && inputs_left != 0) {
            return Err(LedgerViolation::Partial {
                txid: tx.txid,
                outputs_present,
                outputs: tx.created.len(),
                inputs_left,
                inputs: tx.spent.len(),
            });
        }
        self.settle(tx, applied)?;
        Ok(applied)
    }

    /// Checks the ids a UHS holds (shard state, or the union of every shard's). A mint's replay
    /// marker, which the shards create beside its outputs, is not the workload's: pass the UHS
    /// without markers.
    pub fn audit(&self, uhs: impl IntoIterator<Item = UhsId>) -> Result<(), LedgerViolation> {
        let mut in_uhs = 0u64;
        for id in uhs {
            if self.spent.contains(&id) {
                return Err(LedgerViolation::Spent(id));
            }
            let Some(value) = self.values.get(&id) else {
                return Err(LedgerViolation::Unknown(id));
            };
            in_uhs += value;
        }
        let minted: u64 = self
            .mint_outputs
            .iter()
            .filter(|id| self.spendable.contains(*id) || self.spent.contains(*id))
            .map(|id| self.values[id])
            .sum();
        if in_uhs != minted {
            return Err(LedgerViolation::Value { in_uhs, minted });
        }
        Ok(())
    }

    /// The ids an applied transaction created and none spent: what the UHS should hold.
    pub fn spendable(&self) -> impl Iterator<Item = &UhsId> {
        self.spendable.iter()
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    const MIX: CompactMix = CompactMix {
        mint_per_mille: 150,
        replay_per_mille: 100,
        conflict_per_mille: 70,
        unknown_input_per_mille: 30,
    };

    /// A correct UHS: a transaction applies if all its inputs are present.
    fn apply(uhs: &mut BTreeSet<UhsId>, tx: &CompactTransaction) -> bool {
        let distinct: BTreeSet<&UhsId> = tx.spent.iter().collect();
        if distinct.len() != tx.spent.len() || !tx.spent.iter().all(|id| uhs.contains(id)) {
            return false;
        }
        for id in &tx.spent {
            uhs.remove(id);
        }
        uhs.extend(&tx.created);
        true
    }

    #[test]
    fn a_correct_uhs_passes_and_value_is_conserved() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut ledger = CompactLedger::new();
        let mut uhs = BTreeSet::new();
        let (mut refused_clean, mut hostile) = (0, 0);
        for _ in 0..500 {
            for planned in ledger.plan(&mut rng, &MIX) {
                let applied = apply(&mut uhs, &planned.tx);
                refused_clean += usize::from(planned.clean && !applied);
                hostile += usize::from(!planned.clean);
                ledger.settle(&planned.tx, applied).unwrap();
            }
        }
        assert_eq!(refused_clean, 0);
        assert!(hostile > 0);
        ledger.audit(uhs.iter().copied()).unwrap();
        assert_eq!(ledger.spendable().count(), uhs.len());
    }

    #[test]
    fn the_audit_catches_a_resurrected_or_invented_id_and_lost_value() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut ledger = CompactLedger::new();
        let mut uhs = BTreeSet::new();
        for _ in 0..100 {
            for planned in ledger.plan(&mut rng, &MIX) {
                let applied = apply(&mut uhs, &planned.tx);
                ledger.settle(&planned.tx, applied).unwrap();
            }
        }
        let spent = *ledger.spent.iter().next().expect("something was spent");
        let resurrected = uhs.iter().copied().chain([spent]);
        assert_eq!(ledger.audit(resurrected), Err(LedgerViolation::Spent(spent)));
        let invented = UhsId([9; 32]);
        assert_eq!(
            ledger.audit(uhs.iter().copied().chain([invented])),
            Err(LedgerViolation::Unknown(invented))
        );
        let lost = uhs.iter().copied().filter(|id| ledger.values[id] > 0).skip(1);
        assert!(matches!(ledger.audit(lost), Err(LedgerViolation::Value { .. })));
    }

    /// A conflicting pair whose fates were lost: whichever applied is found from the UHS, and
    /// a UHS where both applied, or one applied in part, is caught.
    #[test]
    fn unknown_fates_resolve_from_the_uhs_and_double_or_partial_application_is_caught() {
        let mix = CompactMix {
            conflict_per_mille: 1000,
            ..MIX
        };
        let mut rng = StdRng::seed_from_u64(5);
        let mut ledger = CompactLedger::new();
        let mut uhs = BTreeSet::new();
        let pair = loop {
            let planned = ledger.plan(&mut rng, &mix);
            if planned.len() == 2 {
                break planned;
            }
            let applied = apply(&mut uhs, &planned[0].tx);
            ledger.settle(&planned[0].tx, applied).unwrap();
        };
        let (first, second) = (&pair[0].tx, &pair[1].tx);
        assert!(apply(&mut uhs, first));
        assert!(!apply(&mut uhs, second));

        let mut both = ledger.clone();
        let mut partial = ledger.clone();
        assert_eq!(ledger.resolve(second, &uhs), Ok(false));
        assert_eq!(ledger.resolve(first, &uhs), Ok(true));
        ledger.audit(uhs.iter().copied()).unwrap();

        let both_uhs: BTreeSet<UhsId> = uhs.iter().chain(&second.created).copied().collect();
        assert_eq!(both.resolve(first, &both_uhs), Ok(true));
        assert!(matches!(
            both.resolve(second, &both_uhs),
            Err(LedgerViolation::SpentTwice { txid, .. }) if txid == second.txid
        ));

        let half: BTreeSet<UhsId> = uhs.iter().copied().filter(|id| *id != first.created[0]).collect();
        assert!(matches!(
            partial.resolve(first, &half),
            Err(LedgerViolation::Partial {
                outputs_present: 1,
                outputs: 2,
                ..
            })
        ));
    }
}
