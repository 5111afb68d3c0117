//! Deposits: core coins of a currency into the trader's exchange account.

use std::path::Path;

use specie_codec::Encode;
use specie_exchange::{deposit_commitment, AccountId};
use specie_exchange_service::client::{DepositAnswer, Refund};
use specie_transaction::{SpecieTransaction, Txid};
use specie_wallet::exchange::ExchangeDeposit;
use specie_wallet::session::{self, Submitted};
use specie_wallet::{NodeClient, Outcome, PaidOutput, PaymentString, SubmitStatus, Wallet};

use crate::payout::{check_payout, owed_by_refund};
use crate::{
    check_currency, check_room, core, open_other, ExchangeBridgeError, Notice, Trader, CORE_SUBMIT_TIMEOUT_MS,
};

/// A deposit credited by the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deposited {
    /// The account credited.
    pub account: AccountId,
    /// The core funding that paid it.
    pub txid: Txid,
}

/// `specie exchange deposit`: `amount` of core coins of `asset` (from `core_wallet`, else the
/// trader's own wallet) into the exchange account (opened by the first deposit: open the trader
/// with `open_account`).
pub fn deposit(
    trader: &mut Trader,
    core_wallet: Option<&Path>,
    asset: &str,
    amount: u64,
) -> Result<Deposited, ExchangeBridgeError> {
    trader.info.asset(asset)?;
    check_room(trader)?;
    let mut other = open_other(trader, core_wallet)?;
    let (bridge, id, key) = (trader.bridge(), trader.id(), trader.key().verifying_key().to_bytes());
    check_creditable(trader, id, &key)?;
    let (tx, node_url) = {
        let (path, wallet) = core(trader, &mut other);
        check_currency(path, wallet, asset)?;
        let tx = wallet.build_bridge_funding(bridge, deposit_commitment(id, &key), amount, &mut rand::thread_rng())?;
        (tx, wallet.node_url().to_string())
    };
    trader.account_mut().deposits.push(ExchangeDeposit {
        asset: asset.to_string(),
        node_url,
        transaction: tx.clone(),
        refused: false,
    });
    // Recorded before the funding can leave the process (with it, if one wallet holds both).
    trader.save()?;
    let (path, wallet) = core(trader, &mut other);
    let client = session::client_for(wallet, None).map_err(ExchangeBridgeError::FundingNotSent)?;
    match session::submit(path, wallet, &client, &tx, CORE_SUBMIT_TIMEOUT_MS)? {
        Submitted::Settled(Outcome::Confirmed(_)) => {}
        Submitted::Settled(Outcome::StillPending { reason }) => {
            return Err(ExchangeBridgeError::FundingNotFinal { reason })
        }
        Submitted::Unknown(error) => return Err(ExchangeBridgeError::FundingUnknown(error)),
        Submitted::Settled(refused) => {
            // The core wallet double-checked the refusal against the UHS; kept all the same,
            // marked (crate docs): if the node was wrong, these bytes are what the exchange
            // credits.
            mark_refused(trader, tx.txid());
            trader.save()?;
            return Err(ExchangeBridgeError::FundingRefused {
                refused: refused.to_string(),
            });
        }
    }
    let index = trader.account().deposits.len() - 1;
    if let DepositAnswer::Refunded(refund) = hand_in(trader, index)? {
        let payout = check_refund(trader, index, &refund)?;
        let (path, wallet) = core(trader, &mut other);
        let shown = path.to_path_buf();
        let back = take_refund(path, wallet, &payout)?;
        trader.account_mut().deposits.remove(index);
        trader.save()?;
        return Err(ExchangeBridgeError::DepositRefunded {
            reason: refund.reason,
            back,
            asset: asset.to_string(),
            path: shown,
        });
    }
    Ok(Deposited {
        account: id,
        txid: tx.txid(),
    })
}

/// Marks the deposits whose funding is `txid` refused by their core.
pub(crate) fn mark_refused(trader: &mut Trader, txid: Txid) {
    for deposit in &mut trader.account_mut().deposits {
        deposit.refused |= deposit.transaction.txid() == txid;
    }
}

/// Checks that `refund` is the refund of deposit `index`: the pinned bridge key's payout of the
/// funding's amount to its first input's owner, under the refund's id; and returns the payout.
/// Anything else is not taken back, and the deposit is kept.
pub(crate) fn check_refund(
    trader: &Trader,
    index: usize,
    refund: &Refund,
) -> Result<SpecieTransaction, ExchangeBridgeError> {
    let deposit = &trader.account().deposits[index];
    let owed = owed_by_refund(trader.info.asset(&deposit.asset)?, &deposit.transaction)?;
    check_payout(&refund.payout, &trader.bridge(), &owed).map_err(|source| ExchangeBridgeError::NotItsRefund {
        asset: deposit.asset.clone(),
        txid: deposit.transaction.txid(),
        source: Box::new(source),
    })
}

/// Refuses, before anything is paid, a deposit the exchange could never credit: one to an
/// account the exchange holds under another key.
fn check_creditable(trader: &Trader, id: u64, key: &[u8; 32]) -> Result<(), ExchangeBridgeError> {
    match trader.client.account(id)? {
        Some(state) if state.key != *key => Err(ExchangeBridgeError::NotCreditable {
            urls: trader.client.urls(),
            id,
        }),
        _ => Ok(()),
    }
}

/// Hands deposit `index` (confirmed by its core) to the exchange; removed once credited (a
/// refunded one is removed by the caller, once the refund is taken back).
fn hand_in(trader: &mut Trader, index: usize) -> Result<DepositAnswer, ExchangeBridgeError> {
    let deposit = trader.account().deposits[index].clone();
    let key = trader.key().verifying_key().to_bytes();
    let answer = trader
        .client
        .deposit(&deposit.asset, &deposit.transaction.encode(), trader.id(), &key)
        .map_err(ExchangeBridgeError::NotHandedIn)?;
    if matches!(answer, DepositAnswer::Credited | DepositAnswer::CreditedBefore) {
        trader.account_mut().deposits.remove(index);
        trader.save()?;
    }
    Ok(answer)
}

/// The payment string of a payout's one output.
pub(crate) fn payout_payment(payout: &SpecieTransaction) -> PaymentString {
    PaymentString::new(
        payout.txid(),
        vec![PaidOutput {
            index: 0,
            output: payout.outputs()[0],
        }],
    )
}

/// What the errors about a refund not taken back yet say.
const KEPT_REFUND: &str =
    "the deposit is kept: run any `specie exchange` command on this wallet later to take the refund back";

/// Takes a refunded funding back into `wallet` (the core wallet that paid it): the refund's
/// payout presented to the core (which pays it once, however often presented), then its coin
/// imported. Returns the value made spendable.
fn take_refund(path: &Path, wallet: &mut Wallet, payout: &SpecieTransaction) -> Result<u64, ExchangeBridgeError> {
    let node = session::client_for(wallet, None).map_err(|source| ExchangeBridgeError::CoreNotReached {
        kept: KEPT_REFUND,
        source,
    })?;
    let status = node
        .submit(std::slice::from_ref(payout), CORE_SUBMIT_TIMEOUT_MS)
        .map_err(|source| ExchangeBridgeError::RefundNotTaken {
            kept: KEPT_REFUND,
            source,
        })?
        .remove(0)
        .status;
    let report = session::import(path, wallet, &node, &payout_payment(payout).to_string())?;
    if report.imported.spendable == 0 && report.imported.already_known == 0 {
        return Err(ExchangeBridgeError::RefundNotPaid {
            reason: status.reason().to_string(),
            kept: KEPT_REFUND,
        });
    }
    Ok(report.imported.spendable)
}

/// A refund an earlier deposit left: taken back into the trader's wallet if that wallet paid
/// the funding; otherwise presented to the core, with the payment string the paying wallet
/// imports (`specie wallet import`).
fn finish_refund(trader: &mut Trader, index: usize, refund: &Refund) -> Result<(), ExchangeBridgeError> {
    let payout = check_refund(trader, index, refund)?;
    let deposit = trader.account().deposits[index].clone();
    let payment = payout_payment(&payout);
    let (amount, asset, reason) = (refund.amount, deposit.asset.clone(), refund.reason.clone());
    if trader.wallet.hrp() == deposit.asset && trader.wallet.receivable_outputs(&payment).is_ok() {
        let back = take_refund(&trader.path.clone(), &mut trader.wallet, &payout)?;
        trader.notify(Notice::EarlierRefunded {
            amount,
            asset,
            reason,
            back,
        });
    } else {
        let node = deposit_node(trader, &deposit)?;
        let status = node
            .submit(std::slice::from_ref(&payout), CORE_SUBMIT_TIMEOUT_MS)?
            .remove(0)
            .status;
        let created: Vec<_> = payment.created_outputs().iter().map(|created| created.uhs_id).collect();
        if !node.query_uhs(&created)?.iter().all(|present| *present) {
            return Err(ExchangeBridgeError::EarlierRefundNotPaid {
                reason: status.reason().to_string(),
            });
        }
        trader.notify(Notice::EarlierRefundedElsewhere {
            amount,
            asset,
            reason,
            payment,
        });
    }
    trader.account_mut().deposits.remove(index);
    trader.save()
}

/// The core an earlier deposit's funding went to: checked to be the trader's wallet's network
/// when that wallet holds the deposit's currency (a node of another network would refuse the
/// funding, and the deposit would be dropped on its word).
pub(crate) fn deposit_node(trader: &mut Trader, deposit: &ExchangeDeposit) -> Result<NodeClient, ExchangeBridgeError> {
    if trader.wallet.hrp() == deposit.asset {
        return Ok(session::client_for(&mut trader.wallet, Some(&deposit.node_url))?);
    }
    Ok(NodeClient::new(&deposit.node_url)?)
}

/// Whether the core at `node` holds the marker of `funding`: it was applied.
pub(crate) fn core_holds(node: &NodeClient, funding: &SpecieTransaction) -> Result<bool, ExchangeBridgeError> {
    let marker = funding.marker().ok_or(ExchangeBridgeError::NoMarker)?;
    Ok(node.query_uhs(&[marker])?.first().copied().unwrap_or(false))
}

/// Finishes a deposit an earlier command left: handed in if its core has it; sent to its core
/// again if not (the same signed funding: it is made final or refused, never paid twice); if the
/// core refuses it and does not hold its marker, kept and marked refused (crate docs).
pub(crate) fn finish_deposit(trader: &mut Trader, index: usize) -> Result<(), ExchangeBridgeError> {
    match hand_in(trader, index)? {
        DepositAnswer::Unconfirmed => {}
        DepositAnswer::Refunded(refund) => return finish_refund(trader, index, &refund),
        _ => {
            trader.notify(Notice::EarlierCredited);
            return Ok(());
        }
    }
    let deposit = trader.account().deposits[index].clone();
    let node = deposit_node(trader, &deposit)?;
    let status = node
        .submit(std::slice::from_ref(&deposit.transaction), CORE_SUBMIT_TIMEOUT_MS)?
        .remove(0)
        .status;
    match status {
        SubmitStatus::Confirmed => match hand_in(trader, index)? {
            DepositAnswer::Unconfirmed => return Err(ExchangeBridgeError::ConfirmedNotSeen),
            DepositAnswer::Refunded(refund) => return finish_refund(trader, index, &refund),
            _ => trader.notify(Notice::EarlierResentAndCredited),
        },
        SubmitStatus::Invalid { .. } | SubmitStatus::Rejected { .. } | SubmitStatus::Malformed { .. } => {
            // "Refused" may mean "applied already" (its inputs are gone because it spent them).
            if core_holds(&node, &deposit.transaction)? {
                return Err(ExchangeBridgeError::HeldNotSeen);
            }
            trader.notify(Notice::EarlierFundingRefused {
                txid: deposit.transaction.txid(),
                reason: status.reason().to_string(),
            });
            trader.account_mut().deposits[index].refused = true;
            trader.save()?;
        }
        other => {
            return Err(ExchangeBridgeError::EarlierNotFinal {
                reason: other.reason().to_string(),
            })
        }
    }
    Ok(())
}
