//! Withdrawals: an exchange balance paid out into a core wallet; and finishing whatever earlier
//! commands left under way.

use std::path::{Path, PathBuf};

use specie_exchange::Operation;
use specie_exchange_service::client::TxFate;
use specie_wallet::exchange::ExchangeWithdrawal;
use specie_wallet::session;
use specie_wallet::WalletFile;

use crate::deposit::{core_holds, deposit_node, finish_deposit, payout_payment};
use crate::payout::{check_payout, owed_by_withdrawal};
use crate::{
    check_currency, check_room, core, open_other, ExchangeBridgeError, Notice, OtherWallet, Trader,
    CORE_SUBMIT_TIMEOUT_MS,
};

/// A withdrawal paid into a core wallet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Withdrawn {
    /// The value made spendable.
    pub paid: u64,
    /// The core wallet it is spendable in.
    pub core_wallet: PathBuf,
}

/// `specie exchange withdraw`: `amount` of `asset` out of the exchange into the core wallet
/// (`core_wallet`, else the trader's own).
pub fn withdraw(
    trader: &mut Trader,
    core_wallet: Option<&Path>,
    asset: &str,
    amount: u64,
) -> Result<Withdrawn, ExchangeBridgeError> {
    let asset_id = trader.info.asset(asset)?;
    check_room(trader)?;
    let mut other = open_other(trader, core_wallet)?;
    let (core_path, address) = {
        let (path, wallet) = core(trader, &mut other);
        check_currency(path, wallet, asset)?;
        let address = wallet.new_address(&mut rand::thread_rng())?;
        // The address's key is kept before anything pays it.
        WalletFile::save(path, wallet)?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        // What the payout's one output pays (the exchange's `address` is the core's witness
        // program commitment, as the bridge signs it).
        (path, address.witness_program_commitment())
    };
    let operation = Operation::Withdraw {
        asset: asset_id,
        amount,
        address,
    };
    let (sequence, fate) = trader.sign_and_submit(operation, |account, sequence, bytes| {
        account.withdrawals.push(ExchangeWithdrawal {
            asset: asset.to_string(),
            sequence,
            amount,
            transaction: bytes.to_vec(),
            core_wallet: core_path.display().to_string(),
        })
    })?;
    // A refusal is taken only if the exchange executed no such withdrawal either (a replica's
    // answer may be behind): otherwise it is paid out like any other.
    let executed =
        matches!(fate, TxFate::Refused(_)) && trader.client.withdrawal(trader.id(), sequence).ok().flatten().is_some();
    if let (TxFate::Refused(reason), false) = (&fate, executed) {
        trader.account_mut().withdrawals.retain(|w| w.sequence != sequence);
        trader.save()?;
        return Err(ExchangeBridgeError::WithdrawalRefused {
            amount,
            asset: asset.to_string(),
            reason: trader.in_words(reason),
        });
    }
    let index = trader.account().withdrawals.len() - 1;
    let paid = pay_out(trader, &mut other, index)?;
    Ok(Withdrawn {
        paid,
        core_wallet: core_path,
    })
}

/// What the errors about an unfinished withdrawal say.
const KEPT_WITHDRAWAL: &str =
    "the withdrawal is kept: run any `specie exchange` command on this wallet later to finish it";

/// Presents withdrawal `index`'s payout to its core and imports it into the core wallet
/// (`other`, or the trader's own); removed once the wallet holds the coin. Returns the value
/// made spendable.
fn pay_out(trader: &mut Trader, other: &mut Option<OtherWallet>, index: usize) -> Result<u64, ExchangeBridgeError> {
    let withdrawal = trader.account().withdrawals[index].clone();
    let kept = KEPT_WITHDRAWAL;
    let payout = trader
        .client
        .withdrawal(trader.id(), withdrawal.sequence)?
        .ok_or(ExchangeBridgeError::NoSuchWithdrawal)?;
    // Only the payout of this very withdrawal, by the pinned bridge key, pays it (an older one
    // of this wallet's would be "already known" to the import below).
    let owed = owed_by_withdrawal(&withdrawal.transaction)?;
    let payout =
        check_payout(&payout, &trader.bridge(), &owed).map_err(|source| ExchangeBridgeError::NotThisWithdrawal {
            kept,
            source: Box::new(source),
        })?;
    let (path, wallet) = core(trader, other);
    let node =
        session::client_for(wallet, None).map_err(|source| ExchangeBridgeError::CoreNotReached { kept, source })?;
    // Presented before (a crash after it): refused as paid, and the import below finds it.
    let status = node
        .submit(std::slice::from_ref(&payout), CORE_SUBMIT_TIMEOUT_MS)
        .map_err(|source| ExchangeBridgeError::PayoutNotTaken { kept, source })?
        .remove(0)
        .status;
    let report = session::import(path, wallet, &node, &payout_payment(&payout).to_string())?;
    if report.imported.spendable == 0 && report.imported.already_known == 0 {
        return Err(ExchangeBridgeError::PayoutNotPaid {
            reason: status.reason().to_string(),
            kept,
        });
    }
    trader.account_mut().withdrawals.remove(index);
    trader.save()?;
    Ok(report.imported.spendable)
}

/// Finishes a withdrawal an earlier command left: its transaction sent again if the exchange
/// has no such withdrawal (refused then if it was used: then it was never executed, and it is
/// dropped), then paid out.
fn finish_withdrawal(trader: &mut Trader, index: usize) -> Result<(), ExchangeBridgeError> {
    let withdrawal = trader.account().withdrawals[index].clone();
    if trader.client.withdrawal(trader.id(), withdrawal.sequence)?.is_none() {
        let signed = specie_codec::decode_bounded(
            "exchange transaction",
            &withdrawal.transaction,
            specie_exchange::SIGNED_TRANSACTION_BYTES_MAX,
            specie_exchange::SignedTransaction::decode_from,
        )?;
        if let TxFate::Refused(reason) = trader.client.submit(&[signed])?.remove(0) {
            if trader.client.withdrawal(trader.id(), withdrawal.sequence)?.is_none() {
                trader.notify(Notice::EarlierWithdrawalRefused {
                    amount: withdrawal.amount,
                    asset: withdrawal.asset.clone(),
                    reason: trader.in_words(&reason),
                });
                trader.account_mut().withdrawals.remove(index);
                return trader.save();
            }
        }
    }
    let path = PathBuf::from(&withdrawal.core_wallet);
    let mut other = open_other(trader, Some(&path))?;
    let paid = pay_out(trader, &mut other, index)?;
    trader.notify(Notice::EarlierWithdrawalPaid {
        amount: withdrawal.amount,
        asset: withdrawal.asset,
        paid,
        path,
    });
    Ok(())
}

/// Asks the core of refused deposit `index` again: true (and no longer marked) if it holds the
/// funding after all. A core that cannot be asked leaves it as it is, told.
fn core_took_refused(trader: &mut Trader, index: usize) -> bool {
    let deposit = trader.account().deposits[index].clone();
    let txid = deposit.transaction.txid();
    let held = deposit_node(trader, &deposit).and_then(|node| core_holds(&node, &deposit.transaction));
    match held {
        Ok(true) => {
            trader.notify(Notice::RefusedFundingHeld { txid });
            trader.account_mut().deposits[index].refused = false;
            true
        }
        Ok(false) => false,
        Err(error) => {
            trader.notify(Notice::RefusedNotChecked {
                txid,
                error: Box::new(error),
            });
            false
        }
    }
}

/// Finishes every deposit and withdrawal earlier commands left under way, oldest first; a
/// refused deposit only if its core holds it after all.
pub fn finish_under_way(trader: &mut Trader) -> Result<(), ExchangeBridgeError> {
    let mut index = 0;
    while index < trader.account().deposits.len() {
        if trader.account().deposits[index].refused && !core_took_refused(trader, index) {
            index += 1;
            continue;
        }
        let before = trader.account().deposits.len();
        finish_deposit(trader, index)?;
        if trader.account().deposits.len() == before {
            index += 1; // kept, marked refused
        }
    }
    while !trader.account().withdrawals.is_empty() {
        finish_withdrawal(trader, 0)?;
    }
    Ok(())
}
