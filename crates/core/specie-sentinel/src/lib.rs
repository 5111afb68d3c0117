//! The sentinel: Hamilton's transaction-local validation (§3.5: syntax, balance, authorization),
//! compaction, and attestation. Stateless: spent or unknown inputs are the shards' business.
//!
//! Transfers are checked exactly as the reference implementation checks them
//! (mit-dci/opencbdc-tx `src/uhs/transaction/validation.cpp`, `check_tx`), in the same order,
//! first failure wins, with the reference's error names ([`error`]). specie's issuer-signed mint
//! and redeem, its bridges' and private kinds, add their own checks after the reference's
//! (see `docs/transaction-format.md` §6), against the keys the sentinel trusts ([`TrustedKeys`]);
//! the kinds a capability adds are judged by the rules it hands in ([`capability`]), which
//! compose the same [`checks`].
//!
//! Batches are validated in parallel on rayon's pool; signature verification dominates (tens of
//! microseconds per input), so work is cut into chunks of many transactions to make the
//! per-task cost of the pool negligible.

pub mod capability;
pub mod endorsement;
pub mod error;
pub mod inspect;
pub mod issuer;
mod trusted;
mod validate;

use std::time::Duration;

use rayon::prelude::*;
use secp256k1::Keypair;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{CompactTransaction, NonceMode, SpecieTransaction, Transaction};

pub use capability::{CapabilityError, CapabilityRules, CapabilityRulesSet};
pub use error::{
    BridgeErrorCode, InputErrorCode, OutputErrorCode, SpecieErrorCode, TxErrorCode, ValidationError, WitnessErrorCode,
};

/// The reference's checks, for the rules of a capability's kinds to compose (module
/// [`capability`]): a funding's inputs, change and witnesses as every funding has them; the
/// structure, value and witness checks a transfer is made of.
pub mod checks {
    pub use crate::validate::{
        check_distinct_prevouts, check_funding_value, check_inputs_structure, check_outputs_value,
        check_owner_witnesses, check_witness, total,
    };
}
pub use issuer::{IssuerKeys, IssuerKeysError};
pub use trusted::TrustedKeys;

/// Transactions per parallel task at least: small enough to spread a batch of a few hundred over
/// the cores, large enough that the pool's per-task overhead (around a microsecond) is noise
/// next to the signature checks (tens of microseconds each).
pub const BATCH_CHUNK_TRANSACTIONS_MIN: usize = 16;
/// Chunks per worker thread, so that uneven chunks (many-input transactions) balance out.
pub const BATCH_CHUNKS_PER_THREAD: usize = 4;

/// Validates a reference transfer: the reference's `check_tx`.
pub fn validate_transfer(tx: &Transaction) -> Result<(), ValidationError> {
    validate::check_transfer(tx, &tx.txid())
}

/// Validates any specie transaction; mints and redeems must be signed by a key in
/// `trusted.issuers`, a capability's kinds need its rules in `trusted.capabilities`.
pub fn validate(tx: &SpecieTransaction, trusted: &TrustedKeys) -> Result<(), ValidationError> {
    validate::check(tx, &tx.txid(), trusted)
}

/// Validates, then compacts (no attestations).
pub fn validate_and_compact(
    tx: &SpecieTransaction,
    trusted: &TrustedKeys,
) -> Result<CompactTransaction, ValidationError> {
    validate(tx, trusted)?;
    Ok(tx.compact())
}

/// The number of transactions per parallel task for a batch of `transactions` on `threads`.
pub fn batch_chunk_transactions(transactions: usize, threads: usize) -> usize {
    let chunks = threads.max(1) * BATCH_CHUNKS_PER_THREAD;
    transactions.div_ceil(chunks).max(BATCH_CHUNK_TRANSACTIONS_MIN)
}

/// Validates and compacts every transaction of `txs` in parallel on all cores. The result has
/// one entry per transaction, in order; equal to mapping [`validate_and_compact`] sequentially.
pub fn validate_batch(
    txs: &[SpecieTransaction],
    trusted: &TrustedKeys,
) -> Vec<Result<CompactTransaction, ValidationError>> {
    validate_batch_timed(txs, trusted, &|| Duration::ZERO).0
}

/// How long checking a batch took, per kind (its stable name: `transfer`, `confidential`, …):
/// transactions checked and the time the cores spent on them, summed over the parallel tasks.
/// What the privacy levels' proofs cost, told apart; the operator's metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KindTimes(Vec<(&'static str, u64, Duration)>);

impl KindTimes {
    fn add(&mut self, kind: &'static str, transactions: u64, took: Duration) {
        match self.0.iter_mut().find(|(name, _, _)| *name == kind) {
            Some((_, count, total)) => {
                *count += transactions;
                *total += took;
            }
            None => self.0.push((kind, transactions, took)),
        }
    }

    fn merge(mut self, other: KindTimes) -> KindTimes {
        for (kind, transactions, took) in other.0 {
            self.add(kind, transactions, took);
        }
        self
    }

    /// Each kind checked: its name, its transactions, and the time spent on them.
    pub fn kinds(&self) -> &[(&'static str, u64, Duration)] {
        &self.0
    }
}

/// [`validate_batch`], also timing the checks per kind ([`KindTimes`]) by `clock`, a monotonic
/// reading its driver gives (this crate keeps no clock).
pub fn validate_batch_timed(
    txs: &[SpecieTransaction],
    trusted: &TrustedKeys,
    clock: &(dyn Fn() -> Duration + Sync),
) -> (Vec<Result<CompactTransaction, ValidationError>>, KindTimes) {
    let chunk = batch_chunk_transactions(txs.len(), rayon::current_num_threads());
    let chunks: Vec<_> = txs
        .par_chunks(chunk)
        .map(|chunk| validate_chunk(chunk, trusted, clock))
        .collect();
    let mut results = Vec::with_capacity(txs.len());
    let mut times = KindTimes::default();
    for (verdicts, chunk_times) in chunks {
        results.extend(verdicts);
        times = times.merge(chunk_times);
    }
    assert_eq!(results.len(), txs.len(), "one verdict per transaction");
    (results, times)
}

/// Validates and compacts one task's transactions, timing each kind's checks. A capability's
/// kinds go to its rules a kind at a time ([`CapabilityRules::check_batch`]), so that their
/// costly proofs are verified in batches (the private kinds') and timed apart; each
/// transaction gets exactly the verdict [`validate_and_compact`] gives it.
fn validate_chunk(
    chunk: &[SpecieTransaction],
    trusted: &TrustedKeys,
    clock: &(dyn Fn() -> Duration + Sync),
) -> (Vec<Result<CompactTransaction, ValidationError>>, KindTimes) {
    let mut verdicts = Vec::with_capacity(chunk.len());
    let mut times = KindTimes::default();
    let mut capability_kinds = vec![];
    for (position, tx) in chunk.iter().enumerate() {
        let txid = tx.txid();
        if let SpecieTransaction::Capability(capability) = tx {
            if let Some(rules) = trusted.capabilities.for_kind(capability.kind()) {
                // Judged below, together with the task's others of the same kind.
                capability_kinds.push((position, rules, &**capability, txid));
                verdicts.push(Ok(CompactTransaction::default()));
                continue;
            }
        }
        let started = clock();
        let verdict = validate::check(tx, &txid, trusted);
        times.add(tx.kind_name(), 1, clock().saturating_sub(started));
        verdicts.push(verdict.map(|()| tx.compact()));
    }
    while let Some(&(_, rules, first, _)) = capability_kinds.first() {
        let kind = first.kind();
        let (of_kind, others) = capability_kinds
            .into_iter()
            .partition(|(_, _, tx, _)| tx.kind() == kind);
        capability_kinds = others;
        let (positions, batch): (Vec<usize>, Vec<_>) = (of_kind.into_iter())
            .map(|(position, _, tx, txid)| (position, (tx, txid)))
            .unzip();
        let started = clock();
        let judged = rules.check_batch(&batch);
        times.add(first.kind_name(), batch.len() as u64, clock().saturating_sub(started));
        assert_eq!(judged.len(), batch.len(), "one verdict per transaction");
        for ((position, verdict), (tx, _)) in positions.into_iter().zip(judged).zip(batch) {
            verdicts[position] = verdict.map(|()| tx.compact());
        }
    }
    (verdicts, times)
}

/// A sentinel: the keys it trusts and, optionally, a key to attest what it validates.
#[derive(Clone, Debug)]
pub struct Sentinel {
    trusted: TrustedKeys,
    attestation_keypair: Option<Keypair>,
}

impl Sentinel {
    pub fn new(trusted: impl Into<TrustedKeys>, attestation_keypair: Option<Keypair>) -> Self {
        Sentinel {
            trusted: trusted.into(),
            attestation_keypair,
        }
    }

    pub fn issuers(&self) -> &IssuerKeys {
        &self.trusted.issuers
    }

    pub fn trusted(&self) -> &TrustedKeys {
        &self.trusted
    }

    /// The x-only key attestations are made with, if this sentinel attests.
    pub fn attestation_pubkey(&self) -> Option<[u8; 32]> {
        self.attestation_keypair.as_ref().map(xonly_bytes)
    }

    /// Adds this sentinel's attestation (randomized BIP-340 nonce). Returns false, changing
    /// nothing, if the sentinel has no attestation key.
    pub fn attest(&self, tx: &mut CompactTransaction) -> bool {
        match &self.attestation_keypair {
            Some(keypair) => {
                tx.attest(keypair, NonceMode::Randomized);
                true
            }
            None => false,
        }
    }

    /// Validates, compacts and (if configured) attests one transaction.
    pub fn process(&self, tx: &SpecieTransaction) -> Result<CompactTransaction, ValidationError> {
        let mut compact = validate_and_compact(tx, &self.trusted)?;
        self.attest(&mut compact);
        Ok(compact)
    }

    /// [`validate_batch`], then attests the valid ones (in parallel as well).
    pub fn process_batch(&self, txs: &[SpecieTransaction]) -> Vec<Result<CompactTransaction, ValidationError>> {
        let mut results = validate_batch(txs, &self.trusted);
        if self.attestation_keypair.is_some() {
            let chunk = batch_chunk_transactions(results.len(), rayon::current_num_threads());
            results.par_chunks_mut(chunk).for_each(|chunk| {
                for compact in chunk.iter_mut().flatten() {
                    self.attest(compact);
                }
            });
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_is_bounded_below_and_spreads_large_batches() {
        assert_eq!(batch_chunk_transactions(0, 2), BATCH_CHUNK_TRANSACTIONS_MIN);
        assert_eq!(batch_chunk_transactions(10, 2), BATCH_CHUNK_TRANSACTIONS_MIN);
        assert_eq!(batch_chunk_transactions(8000, 2), 1000);
        assert_eq!(batch_chunk_transactions(8000, 0), 2000);
    }
}
