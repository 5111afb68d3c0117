//! Offline cash's wallet driver and its bridge to the core. A device as its owner keeps and
//! drives it ([`device`]: its file, the authority's client, funding, certifying, depositing;
//! [`hand_over`]: paying another device over a local link), and value between a core wallet and
//! a device, through the online core: `specie offline device fund-from-core` (a bridge funding,
//! then tokens: [`fund_from_core`]) and `deposit --wallet` (payouts, then core coins in the
//! wallet: [`deposit_to_wallet`]).
//!
//! Before paying, [`fund_from_core`] checks that the authority could issue the funding (its
//! amount makes at most `TOKENS_PER_FUNDING_MAX` tokens of the ring's denominations; the owners
//! are the device's keys the authority certified). A funding the authority can never issue anyway
//! (built elsewhere, say) is refunded by the authority to the funding's first input's owner: its
//! payout is presented to the core and imported into the wallet.
//!
//! The crash-safe steps: the funding is written beside the device (`DEVICE.funding`) before it is
//! sent to the core, and removed only once the authority issued its tokens (the device saved) or
//! its refund is in the wallet; a later run finds it and hands it in first, instead of paying
//! anew. Nothing is dropped on a remote's word: a refund is taken only if it is the funding's
//! refund (`check_refund_payout`), a funding the core refused is kept beside the device
//! (`DEVICE.funding.refused-TXID`), and a deposit paid out to the core stays pending on the
//! device until the wallet holds its coin (the authority answers it again with the same payout).

mod deposit;
pub mod device;
mod error;
mod fund;
pub mod hand_over;
pub mod supply;

use std::path::{Path, PathBuf};

use crate::device::DeviceFile;
use specie_offline::PublicKey;
use specie_transaction::Txid;
use specie_wallet::{WalletLock, WALLET_LOCK_WAIT_MS};

pub use deposit::{deposit_to_wallet, DepositedToWallet};
pub use error::{OfflineBridgeError, RefundedTo};
pub use fund::{fund_from_core, refused_path, FundedFromCore};

/// How long the node may take to make a funding or payout final.
pub const SUBMIT_TIMEOUT_MS: u64 = 10_000;

/// What the caller may tell the user while a move goes on (`Display` says it in words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Another command holds the core wallet at this path: this one waits for it.
    WaitingForWallet(PathBuf),
    /// A payout the core has not credited yet: its deposit stays pending on the device.
    PayoutNotCredited { txid: Txid, reason: String },
    /// This many earlier deposits were paid out to another key than this wallet's.
    PaidOutElsewhere(usize),
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::WaitingForWallet(path) => {
                write!(f, "waiting for another command using {} to finish…", path.display())
            }
            Notice::PayoutNotCredited { txid, reason } => write!(
                f,
                "payout {txid} not credited yet ({reason}): its deposit stays pending on the device; run this again"
            ),
            Notice::PaidOutElsewhere(count) => write!(
                f,
                "{count} earlier deposits are paid out to another key than this wallet's: run `deposit --defund-to` \
                 with that key to print their payouts"
            ),
        }
    }
}

/// The funding the core may have confirmed and the authority not yet credited, beside the
/// device file: `{"transaction": hex, "owners": [hex]}`.
pub fn funding_path(device: &Path) -> PathBuf {
    let mut name = device.as_os_str().to_owned();
    name.push(".funding");
    PathBuf::from(name)
}

/// Locks the core wallet at `path`, unless it is the one the device is kept in (locked already,
/// by this very command).
fn lock_wallet(
    file: &DeviceFile,
    path: &Path,
    notify: &mut dyn FnMut(Notice),
) -> Result<Option<WalletLock>, OfflineBridgeError> {
    if file.wallet().is_some_and(|kept| specie_wallet::same_file(kept, path)) {
        return Ok(None);
    }
    let lock = WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        notify(Notice::WaitingForWallet(path.to_path_buf()))
    })?;
    Ok(Some(lock))
}

/// A funding kept beside the device: the core transaction (hex) and the owners it commits to;
/// `None` if there is none.
pub fn read_kept_funding(path: &Path) -> Result<Option<(String, Vec<PublicKey>)>, OfflineBridgeError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(OfflineBridgeError::Io {
                action: "read",
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let damaged = |why: &str| OfflineBridgeError::KeptDamaged {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let kept: serde_json::Value = serde_json::from_str(&text).map_err(|error| damaged(&error.to_string()))?;
    let transaction = kept["transaction"].as_str().ok_or_else(|| damaged("no transaction"))?;
    let owners = kept["owners"].as_array().ok_or_else(|| damaged("no owners"))?;
    let owners = owners
        .iter()
        .map(|owner| {
            let bytes = hex::decode(owner.as_str().unwrap_or_default()).map_err(|error| damaged(&error.to_string()))?;
            <[u8; 32]>::try_from(bytes).map_err(|_| damaged("an owner is not 32 bytes"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((transaction.to_string(), owners)))
}

/// Removes `path` (the kept funding, once done with).
fn remove(path: &Path) -> Result<(), OfflineBridgeError> {
    std::fs::remove_file(path).map_err(|source| OfflineBridgeError::Io {
        action: "remove",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
