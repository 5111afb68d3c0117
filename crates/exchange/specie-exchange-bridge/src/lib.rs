//! Value between a currency's core wallet and a trader's exchange account, through that
//! currency's core (`specie exchange deposit|withdraw`), and the trader's wallet every exchange
//! command starts from ([`Trader`]).
//!
//! A deposit is a core funding to the exchange's bridge key committing to the account and its
//! key; it is recorded in the wallet's exchange section before it is sent, sent and made final on
//! the core, then handed to the exchange, which credits each funding once. A withdrawal is a
//! `Withdraw` transaction to a fresh address of the core wallet; recorded before it is sent, then
//! its payout (signed by the exchange's bridge key) is fetched, presented to the core (which pays
//! it once) and imported into the core wallet. Whatever a crash or a lost connection interrupts
//! stays recorded and is finished by the next `specie exchange` command on that wallet
//! ([`finish_under_way`]): never lost, never credited or paid twice.
//!
//! Nothing is dropped on a remote's word. The exchange's bridge key is pinned in the wallet
//! ([`Trader::open`] checks it), and a payout, a withdrawal's or a refund's, is checked against it
//! and against what is owed (serial, address, amount) before it is presented or the withdrawal
//! or deposit is taken as paid. A funding its core refused is kept, marked refused, once the core
//! does not hold its marker either: every later command asks that core again and hands it in if
//! it does; only `specie exchange forget-refused --yes` ([`forget_refused`]) drops it.
//!
//! Before paying anything, a deposit checks that the exchange could credit it: the account must
//! be free or this wallet's key's (a funding committing to an account another key holds could
//! never be credited). That check is the wallet's courtesy, not the guarantee: a funding the
//! exchange can never credit is refunded by the exchange to the owner of its first input (the
//! core wallet that paid it), and the refund's payout is presented to the core and imported here
//! like a withdrawal's.

mod deposit;
mod error;
mod payout;
pub mod supply;
pub(crate) mod trader;
mod withdraw;

use std::path::{Path, PathBuf};

use specie_transaction::Txid;
use specie_wallet::{PaymentString, Wallet, WalletFile, WalletLock, WALLET_LOCK_WAIT_MS};

pub use deposit::{deposit, Deposited};
pub use error::{chain, ExchangeBridgeError, KEPT_REFUSED};
pub use payout::{check_payout, owed_by_refund, owed_by_withdrawal, PayoutError};
pub use trader::{name_assets, Trader};
pub use withdraw::{finish_under_way, withdraw, Withdrawn};

/// How long a core may take to make a funding or a payout final.
pub const CORE_SUBMIT_TIMEOUT_MS: u64 = 10_000;

/// What the caller may tell the user while a command goes on (`Display` says it in words).
#[derive(Debug)]
pub enum Notice {
    /// Another command holds the wallet at this path: this one waits for it.
    WaitingForWallet(PathBuf),
    /// What earlier commands left under way could not be finished now (it stays recorded).
    NotFinished(Box<ExchangeBridgeError>),
    /// An earlier deposit was credited by the exchange.
    EarlierCredited,
    /// An earlier deposit was sent to its core again, and credited.
    EarlierResentAndCredited,
    /// An earlier deposit could not be credited; its refund is spendable again in this wallet.
    EarlierRefunded {
        amount: u64,
        asset: String,
        reason: String,
        back: u64,
    },
    /// An earlier deposit could not be credited; its refund pays the wallet that paid it, which
    /// imports `payment`.
    EarlierRefundedElsewhere {
        amount: u64,
        asset: String,
        reason: String,
        payment: PaymentString,
    },
    /// An earlier deposit's funding was refused by its core: kept, marked refused.
    EarlierFundingRefused { txid: Txid, reason: String },
    /// A funding its core had refused is held by the core after all: handed in.
    RefusedFundingHeld { txid: Txid },
    /// A refused funding's core could not be asked again.
    RefusedNotChecked {
        txid: Txid,
        error: Box<ExchangeBridgeError>,
    },
    /// An earlier withdrawal was refused by the exchange: dropped.
    EarlierWithdrawalRefused { amount: u64, asset: String, reason: String },
    /// An earlier withdrawal was paid: `paid` spendable in the wallet at `path`.
    EarlierWithdrawalPaid {
        amount: u64,
        asset: String,
        paid: u64,
        path: PathBuf,
    },
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::WaitingForWallet(path) => {
                write!(f, "waiting for another command using {} to finish…", path.display())
            }
            Notice::NotFinished(error) => write!(
                f,
                "warning: what an earlier command left under way is not finished: {}",
                chain(error.as_ref())
            ),
            Notice::EarlierCredited => write!(f, "an earlier deposit was credited"),
            Notice::EarlierResentAndCredited => write!(f, "an earlier deposit was sent to its core again and credited"),
            Notice::EarlierRefunded {
                amount,
                asset,
                reason,
                back,
            } => write!(
                f,
                "an earlier deposit of {amount} {asset} could not be credited by the exchange ({reason}) and was \
                 refunded: {back} spendable again"
            ),
            Notice::EarlierRefundedElsewhere {
                amount,
                asset,
                reason,
                payment,
            } => write!(
                f,
                "an earlier deposit of {amount} {asset} could not be credited by the exchange ({reason}) and was \
                 refunded to the {asset} wallet that paid it: import it there with `specie wallet --wallet <that \
                 wallet> import {payment}`"
            ),
            Notice::EarlierFundingRefused { txid, reason } => write!(
                f,
                "an earlier deposit's funding ({txid}) was refused by its core ({reason}): nothing was spent as far \
                 as it says (`specie wallet sync` releases the coins). {KEPT_REFUSED}"
            ),
            Notice::RefusedFundingHeld { txid } => write!(
                f,
                "an earlier deposit's funding ({txid}) that its core had refused is held by the core: handing it in"
            ),
            Notice::RefusedNotChecked { txid, error } => write!(
                f,
                "warning: an earlier deposit's refused funding ({txid}) was not checked again: {}",
                chain(error.as_ref())
            ),
            Notice::EarlierWithdrawalRefused { amount, asset, reason } => write!(
                f,
                "an earlier withdrawal of {amount} {asset} was refused by the exchange ({reason}): dropped"
            ),
            Notice::EarlierWithdrawalPaid {
                amount,
                asset,
                paid,
                path,
            } => write!(
                f,
                "an earlier withdrawal of {amount} {asset} was paid: {paid} now spendable in {}",
                path.display()
            ),
        }
    }
}

/// A core wallet other than the trader's, locked for the command.
struct OtherWallet {
    path: PathBuf,
    wallet: Wallet,
    _lock: WalletLock,
}

/// The core wallet at `path`, unless it is the trader's own (then `None`: use the trader's).
fn open_other(trader: &Trader, path: Option<&Path>) -> Result<Option<OtherWallet>, ExchangeBridgeError> {
    let Some(path) = path.filter(|path| !specie_wallet::same_file(path, &trader.path)) else {
        return Ok(None);
    };
    let lock = WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        trader.notify(Notice::WaitingForWallet(path.to_path_buf()))
    })?;
    Ok(Some(OtherWallet {
        path: path.to_path_buf(),
        wallet: WalletFile::load(path)?,
        _lock: lock,
    }))
}

/// The core wallet to use: the other one if open, else the trader's.
fn core<'a>(trader: &'a mut Trader, other: &'a mut Option<OtherWallet>) -> (&'a Path, &'a mut Wallet) {
    match other {
        Some(other) => (&other.path, &mut other.wallet),
        None => (&trader.path, &mut trader.wallet),
    }
}

/// Checks that the core wallet holds the currency `asset`.
fn check_currency(path: &Path, wallet: &Wallet, asset: &str) -> Result<(), ExchangeBridgeError> {
    if wallet.hrp() != asset {
        return Err(ExchangeBridgeError::WrongCurrency {
            path: path.to_path_buf(),
            hrp: wallet.hrp().to_string(),
            asset: asset.to_string(),
        });
    }
    Ok(())
}

/// Refuses a new deposit or withdrawal when the wallet keeps the most it may under way.
fn check_room(trader: &Trader) -> Result<(), ExchangeBridgeError> {
    if !trader.account().has_room() {
        return Err(ExchangeBridgeError::NoRoom {
            path: trader.path.clone(),
            max: specie_wallet::exchange::EXCHANGE_PENDING_MAX,
        });
    }
    Ok(())
}

/// `specie exchange forget-refused --yes`: drops the deposits marked refused in the wallet at
/// `path`, for good; returns how many.
pub fn forget_refused(path: &Path, notify: impl Fn(Notice)) -> Result<usize, ExchangeBridgeError> {
    let _lock = WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        notify(Notice::WaitingForWallet(path.to_path_buf()))
    })?;
    let mut wallet = WalletFile::load(path)?;
    let forgotten = wallet.exchange_mut().map_or(0, |account| account.forget_refused());
    WalletFile::save(path, &wallet)?;
    Ok(forgotten)
}

#[cfg(test)]
mod tests;
