//! Resolving pending transactions against a node.
//!
//! The node keeps no transaction history (Hamilton §3.7): all it can say is whether a UHS id is
//! present. Everything here follows from three facts of the UHS model:
//!
//! 1. A transaction is applied atomically: its inputs' ids disappear and its outputs' ids
//!    appear together (§3.5, *swap*).
//! 2. An id, once removed, never comes back: serial numbers are unique across time (§3.6).
//!    So an input that is absent is spent for good, by *some* transaction.
//! 3. Applying the same transaction twice is impossible: the second attempt finds its inputs
//!    gone (a transfer or redeem) or its mint marker present (a mint) and is refused. So
//!    resubmitting the exact same bytes is always safe.
//!
//! For each pending transaction `sync` asks about its inputs and its "proof" ids (outputs, plus
//! the marker of a mint):
//!
//! * **any proof id present** → it was applied: confirmed. (Our own outputs cannot have been
//!   spent since, because the wallet never spends a `PendingReceive` coin; a recipient's can
//!   have been, which is why *any* suffices.)
//! * **no proof id present, some input absent** → the inputs were consumed, and not visibly by
//!   this transaction. Either another transaction spent them (a copy of this wallet, say), or
//!   this one was applied and the recipient has already spent every output (possible only when
//!   no output pays this wallet). Both leave this wallet in the same place: the absent inputs
//!   are gone, its other inputs are free, it receives nothing. The proof ids are asked again
//!   first, after the inputs were seen gone, to narrow the window in which a two-phase commit
//!   has deleted the inputs on one shard but not yet created the outputs on another.
//! * **every input present, no proof id** → not applied yet: still in flight, or lost, or
//!   refused. Resubmit the stored bytes once (fact 3 makes that safe) and act on the answer.
//!
//! Besides pending transactions, `sync` checks coins received by import that are still
//! waiting (present → spendable), spendable coins and notes (absent → spent elsewhere, marked
//! missing: kept with their preimages, never selected) and missing ones (present again →
//! spendable: restored). Nothing is deleted on a node's word: the wallet talks only to nodes of
//! its own network (`Wallet::check_network`), and only the user drops missing coins
//! (`Wallet::forget_missing`).

use std::collections::HashMap;

use specie_transaction::{OutPoint, SpecieTransaction, Txid, UhsId};
use thiserror::Error;

use crate::client::{ClientError, Ledger, SubmitStatus};
use crate::error::WalletError;
use crate::wallet::{CoinState, Settled, Wallet};

/// How long a resubmission during `sync` may wait for finality, in milliseconds. Shorter than a
/// send's wait: sync resolves many transactions and a slow one can be synced again later.
pub const SYNC_RESUBMIT_TIMEOUT_MS: u64 = 10_000;

/// `sync` failed part-way; the wallet keeps what was resolved before the failure.
#[derive(Debug, Error)]
pub enum SyncError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Wallet(#[from] WalletError),
    #[error(
        "the node holds none of this wallet's {coins} coins and notes ({value} {unit}), and the wallet does not \
         know its network yet (a file from before network ids), so this is probably not the node it was used \
         with: nothing changed. Sync with the right node (--node URL); if every coin really was spent from \
         another copy of this wallet, run `specie wallet sync --accept-node` to mark them missing"
    )]
    Stranger { coins: usize, value: u64, unit: String },
}

/// What became of one pending transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied by the node.
    Confirmed(Settled),
    /// Refused for good; inputs released, expected outputs dropped.
    Rejected { reason: String, settled: Settled },
    /// Its inputs were consumed without its outputs appearing (see the module docs).
    Conflicted { settled: Settled },
    /// Not resolved yet (node busy, or not final before the timeout).
    StillPending { reason: String },
}

/// As a person reads it: what became of the transaction.
impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Confirmed(_) => f.write_str("confirmed"),
            Outcome::Rejected { reason, .. } => write!(f, "refused ({reason})"),
            Outcome::Conflicted { .. } => f.write_str("never applied: its coins were spent by another transaction"),
            Outcome::StillPending { reason } => write!(f, "not final yet ({reason})"),
        }
    }
}

/// Everything a `sync` changed, for the CLI to print.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub outcomes: Vec<(Txid, Outcome)>,
    /// Imported coins that the node now shows: value made spendable.
    pub imports_confirmed: u64,
    /// Spendable coins that the node no longer holds: marked missing.
    pub coins_missing: Vec<(OutPoint, u64)>,
    /// Spendable notes (confidential or anonymous) that the node no longer holds: marked missing.
    pub notes_missing: Vec<(OutPoint, u64)>,
    /// Missing coins and notes that the node holds after all: spendable again.
    pub restored: Vec<(OutPoint, u64)>,
}

impl SyncReport {
    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
            && self.imports_confirmed == 0
            && self.coins_missing.is_empty()
            && self.notes_missing.is_empty()
            && self.restored.is_empty()
    }
}

/// Marks missing the spendable notes of the wallet's parts (`crate::part`: confidential and
/// anonymous ones) whose UHS ids the node no longer holds, and the tokens whose spend's marker it
/// holds (spent from another copy of this wallet); asked after the pending transactions are
/// resolved, so that a note this wallet's own confirmed transaction spent is already gone.
fn mark_missing_notes<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    ledger: &L,
) -> Result<Vec<(OutPoint, u64)>, ClientError> {
    let spendable: Vec<(OutPoint, UhsId, u64)> = wallet.spendable_in_parts();
    let markers: Vec<(OutPoint, UhsId, u64)> = wallet.spent_markers_in_parts();
    if spendable.is_empty() && markers.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<UhsId> = spendable.iter().chain(&markers).map(|(_, id, _)| *id).collect();
    let present = ledger.query_uhs(&ids)?;
    // An output is gone when its id is, or when its spend's marker is there.
    let gone = (present.iter().take(spendable.len()).map(|present| !present))
        .chain(present.iter().skip(spendable.len()).copied());
    let vanished: Vec<(OutPoint, u64)> = (spendable.iter().chain(&markers))
        .zip(gone)
        .filter(|(_, gone)| *gone)
        .map(|((outpoint, _, value), _)| (*outpoint, *value))
        .collect();
    let outpoints: Vec<OutPoint> = vanished.iter().map(|(outpoint, _)| *outpoint).collect();
    wallet.mark_missing_in_parts(&outpoints);
    Ok(vanished)
}

/// What one presence look-up says about a pending transaction.
enum Presence {
    Applied,
    InputsGone(Vec<OutPoint>),
    NotApplied,
}

fn presence_of(wallet: &Wallet, txid: &Txid, present: &HashMap<UhsId, bool>) -> Option<Presence> {
    let pending = wallet.pending_tx(txid)?;
    let is_present = |id: &UhsId| present.get(id).copied().unwrap_or(false);
    if pending.proof_ids().iter().any(is_present) {
        return Some(Presence::Applied);
    }
    let gone: Vec<OutPoint> = pending
        .spends()
        .iter()
        .filter(|input| !is_present(&input.uhs_id()))
        .map(|input| input.prevout)
        .collect();
    Some(if gone.is_empty() {
        Presence::NotApplied
    } else {
        Presence::InputsGone(gone)
    })
}

fn query_map<L: Ledger + ?Sized>(ledger: &L, ids: Vec<UhsId>) -> Result<HashMap<UhsId, bool>, ClientError> {
    let present = ledger.query_uhs(&ids)?;
    Ok(ids.into_iter().zip(present).collect())
}

/// Looks up a pending transaction's inputs, then its proof ids (in that order, see the module
/// docs), and resolves it if the answer is conclusive. `None` = not applied, inputs unspent.
/// Sends nothing: what `abandon` asks before it builds anything.
pub fn resolve_by_presence<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    ledger: &L,
    txid: &Txid,
) -> Result<Option<Outcome>, SyncError> {
    let Some(pending) = wallet.pending_tx(txid) else {
        return Err(WalletError::UnknownTransaction(*txid).into());
    };
    let inputs: Vec<UhsId> = pending.spends().iter().map(|input| input.uhs_id()).collect();
    let proofs = pending.proof_ids();
    let mut present = query_map(ledger, inputs)?;
    present.extend(query_map(ledger, proofs)?);
    Ok(match presence_of(wallet, txid, &present) {
        Some(Presence::Applied) => Some(Outcome::Confirmed(wallet.on_confirmed(txid)?)),
        Some(Presence::InputsGone(gone)) => Some(Outcome::Conflicted {
            settled: wallet.on_conflicted(txid, &gone)?,
        }),
        Some(Presence::NotApplied) | None => None,
    })
}

/// Applies the node's answer about pending transaction `txid` to the wallet.
///
/// `Busy` and `Pending` leave it pending: `Busy` means this attempt was not accepted, but an
/// earlier attempt may still be in flight, and `Pending` means it may still be applied. A
/// `Rejected` answer is double-checked against the UHS, because "refused" may mean "already
/// applied" (an earlier attempt won), in which case its outputs exist and must not be dropped.
pub fn settle<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    ledger: &L,
    txid: &Txid,
    status: &SubmitStatus,
) -> Result<Outcome, SyncError> {
    match status {
        SubmitStatus::Confirmed => Ok(Outcome::Confirmed(wallet.on_confirmed(txid)?)),
        // Transaction-local failures cannot change with time: the exact bytes will always fail.
        SubmitStatus::Invalid { .. } | SubmitStatus::Malformed { .. } => Ok(Outcome::Rejected {
            reason: status.reason(),
            settled: wallet.on_rejected(txid)?,
        }),
        SubmitStatus::Rejected { .. } => match resolve_by_presence(wallet, ledger, txid)? {
            Some(outcome) => Ok(outcome),
            None => Ok(Outcome::Rejected {
                reason: status.reason(),
                settled: wallet.on_rejected(txid)?,
            }),
        },
        SubmitStatus::Busy { .. } | SubmitStatus::Pending { .. } => Ok(Outcome::StillPending {
            reason: status.reason(),
        }),
    }
}

fn outpoints_of(found: &[(OutPoint, u64)]) -> Vec<OutPoint> {
    found.iter().map(|(outpoint, _)| *outpoint).collect()
}

/// A wallet that does not know its network cannot tell a stranger node from its own: a node
/// that holds none of its coins (`held`) is taken for a stranger, and nothing is concluded
/// from its answers.
fn refuse_a_stranger<'a>(
    wallet: &mut Wallet,
    held: impl Iterator<Item = &'a (OutPoint, UhsId, u64)>,
    is_present: impl Fn(&UhsId) -> bool,
) -> Result<(), SyncError> {
    let held: Vec<&(OutPoint, UhsId, u64)> = held.collect();
    if wallet.node_vouched() || held.is_empty() || held.iter().any(|(_, id, _)| is_present(id)) {
        return Ok(());
    }
    wallet.network_seen = None;
    Err(SyncError::Stranger {
        coins: held.len(),
        value: held.iter().map(|(_, _, value)| value).sum(),
        unit: wallet.hrp().to_owned(),
    })
}

/// Resolves every pending transaction, confirms waiting imports, marks missing the coins the
/// node no longer holds and restores missing ones it holds again.
/// See the module docs for the reasoning. The caller saves the wallet afterwards (also after an
/// error: whatever was resolved before it is correct).
pub fn sync<L: Ledger + ?Sized>(wallet: &mut Wallet, ledger: &L) -> Result<SyncReport, SyncError> {
    let mut report = SyncReport::default();

    // One batched look-up for everything we want to know.
    let pending_txids: Vec<Txid> = wallet.pending().map(|pending| pending.txid).collect();
    let imports = wallet.unconfirmed_imports();
    let spendable: Vec<(OutPoint, UhsId, u64)> = wallet
        .coins()
        .filter(|coin| coin.state == CoinState::Spendable)
        .map(|coin| (coin.outpoint, coin.uhs_id(), coin.value()))
        .collect();
    let missing = wallet.missing();
    let mut ids: Vec<UhsId> = Vec::new();
    for txid in &pending_txids {
        if let Some(pending) = wallet.pending_tx(txid) {
            ids.extend(pending.spends().iter().map(|input| input.uhs_id()));
            ids.extend(pending.proof_ids());
        }
    }
    ids.extend(imports.iter().map(|(_, id)| *id));
    ids.extend(spendable.iter().map(|(_, id, _)| *id));
    ids.extend(missing.iter().map(|(_, id, _)| *id));
    ids.sort_unstable();
    ids.dedup();
    let present = query_map(ledger, ids)?;
    let is_present = |id: &UhsId| present.get(id).copied().unwrap_or(false);
    refuse_a_stranger(wallet, spendable.iter().chain(&missing), is_present)?;

    let mut to_resubmit: Vec<(Txid, SpecieTransaction)> = Vec::new();
    for txid in &pending_txids {
        match presence_of(wallet, txid, &present) {
            Some(Presence::Applied) => {
                let settled = wallet.on_confirmed(txid)?;
                report.outcomes.push((*txid, Outcome::Confirmed(settled)));
            }
            Some(Presence::InputsGone(_)) => {
                // Ask again, proofs after inputs, before concluding (module docs).
                if let Some(outcome) = resolve_by_presence(wallet, ledger, txid)? {
                    report.outcomes.push((*txid, outcome));
                } else if let Some(pending) = wallet.pending_tx(txid).filter(|pending| !pending.abandoned) {
                    // The inputs are back?! Ids never reappear, so the first answer was
                    // wrong; treat it like any unapplied transaction.
                    to_resubmit.push((*txid, pending.tx.clone()));
                }
            }
            Some(Presence::NotApplied) => {
                // An abandoned one waits for its replacement to take its coins.
                if let Some(pending) = wallet.pending_tx(txid).filter(|pending| !pending.abandoned) {
                    to_resubmit.push((*txid, pending.tx.clone()));
                }
            }
            None => {}
        }
    }

    if !to_resubmit.is_empty() {
        let transactions: Vec<SpecieTransaction> = to_resubmit.iter().map(|(_, tx)| tx.clone()).collect();
        let results = ledger.submit(&transactions, SYNC_RESUBMIT_TIMEOUT_MS)?;
        for ((txid, _), result) in to_resubmit.iter().zip(results) {
            let outcome = settle(wallet, ledger, txid, &result.status)?;
            report.outcomes.push((*txid, outcome));
        }
    }

    let arrived: Vec<OutPoint> = imports
        .iter()
        .filter(|(_, id)| is_present(id))
        .map(|(outpoint, _)| *outpoint)
        .collect();
    report.imports_confirmed = wallet.confirm_imported(&arrived);

    let picked = |held: &[(OutPoint, UhsId, u64)], present: bool| -> Vec<(OutPoint, u64)> {
        (held.iter())
            .filter(|(_, id, _)| is_present(id) == present)
            .map(|(outpoint, _, value)| (*outpoint, *value))
            .collect()
    };
    report.coins_missing = picked(&spendable, false);
    wallet.mark_missing_coins(&outpoints_of(&report.coins_missing));
    report.notes_missing = mark_missing_notes(wallet, ledger)?;
    // Ids never come back (module docs), so a missing coin the node holds was never spent: the
    // earlier answer came from a node that had not seen it.
    report.restored = picked(&missing, true);
    wallet.restore_missing(&outpoints_of(&report.restored));

    Ok(report)
}
