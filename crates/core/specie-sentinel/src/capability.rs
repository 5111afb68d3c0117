//! The rules of the transaction kinds capabilities add (`specie_transaction::capability`).
//!
//! A capability's bridge crate implements [`CapabilityRules`] for its kinds, with the keys its
//! mode trusts (FastPay's committee, for its funding and redeem); the deployment hands the rules
//! to the sentinel in [`TrustedKeys`](crate::TrustedKeys). A kind the sentinel has no rules for
//! is refused (`kind_not_accepted`), whatever it says. The checks the reference's transfer is
//! made of are public in [`checks`](crate::checks), so that every kind composes the same ones in
//! the same order.

use std::fmt::Debug;
use std::sync::Arc;

use specie_transaction::{CapabilityTransaction, Txid};

use crate::error::ValidationError;

/// What a sentinel checks of a capability's kinds: the keys the mode trusts live in the rules.
pub trait CapabilityRules: Debug + Send + Sync {
    /// The kind bytes judged here.
    fn kinds(&self) -> &'static [u8];
    /// Every check of `tx`, whose txid is `txid`, the first failure wins.
    fn check(&self, tx: &dyn CapabilityTransaction, txid: &Txid) -> Result<(), ValidationError>;
    /// The verdicts of a parallel task's transactions of these kinds, one per transaction, in
    /// order, each equal to [`CapabilityRules::check`]'s. A kind whose proofs verify faster
    /// together overrides this.
    fn check_batch(&self, txs: &[(&dyn CapabilityTransaction, Txid)]) -> Vec<Result<(), ValidationError>> {
        txs.iter().map(|(tx, txid)| self.check(*tx, txid)).collect()
    }
}

/// The rules a sentinel holds, at most one per kind byte.
#[derive(Clone, Debug, Default)]
pub struct CapabilityRulesSet {
    rules: Vec<Arc<dyn CapabilityRules>>,
}

impl CapabilityRulesSet {
    /// These rules and `rules`. Two rules for one kind byte is a deployment assembled wrong.
    pub fn with(mut self, rules: Arc<dyn CapabilityRules>) -> Self {
        for kind in rules.kinds() {
            assert!(self.for_kind(*kind).is_none(), "two rules for kind 0x{kind:02x}");
        }
        self.rules.push(rules);
        self
    }

    /// The rules of `kind`, if this sentinel has any.
    pub fn for_kind(&self, kind: u8) -> Option<&Arc<dyn CapabilityRules>> {
        self.rules.iter().find(|rules| rules.kinds().contains(&kind))
    }

    /// Every rules object held, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn CapabilityRules>> {
        self.rules.iter()
    }
}

/// A capability kind's refusal: its mode's category and stable code, and a sentence.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CapabilityError {
    /// The error group, as [`ValidationError::category`] gives it (`fastpay`).
    pub category: &'static str,
    /// Stable snake_case, unique across every kind's codes.
    pub code: &'static str,
    /// For people.
    pub message: String,
}

/// The refusal of a kind the sentinel has no rules for.
pub(crate) fn not_accepted(tx: &dyn CapabilityTransaction) -> ValidationError {
    ValidationError::Capability(CapabilityError {
        category: "specie",
        code: "kind_not_accepted",
        message: format!(
            "this node accepts no {} transactions (its configuration names no keys for that mode)",
            tx.kind_name()
        ),
    })
}
