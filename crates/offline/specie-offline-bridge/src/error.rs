//! Why a move between a core wallet and a device stopped, with what to do about it. Whatever it
//! stopped at is kept (beside the device, in the device, or in the wallet) for the next run.

use std::path::PathBuf;

use crate::device::DeviceCommandError;
use specie_wallet::session::SessionError;
use specie_wallet::{ClientError, FileError, PaymentString, WalletError};

/// What the errors about a refund say is kept.
const KEPT: &str = "the funding is kept beside the device: run this again to take the refund back";

/// Why `fund-from-core` or `deposit --wallet` stopped.
#[derive(Debug, thiserror::Error)]
pub enum OfflineBridgeError {
    #[error(transparent)]
    Device(#[from] DeviceCommandError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Wallet(#[from] WalletError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The funding kept beside the device does not read back.
    #[error("{} is damaged: {why}", path.display())]
    KeptDamaged { path: PathBuf, why: String },
    #[error("the core has not made the funding final yet ({reason}): run this again later")]
    NotFinal { reason: String },
    #[error("whether the core received the funding is unknown ({0}): run `specie wallet sync`, then this again")]
    Unknown(ClientError),
    /// The core refused the funding; it is kept as `archived`, and `kept` is where it must be
    /// to be handed in.
    #[error(
        "the core did not take the funding: {refused}; the wallet's coins are released. The funding is kept \
         as {}: should the core hold it after all, rename it back to {} and run this again to hand it in",
        archived.display(),
        kept.display()
    )]
    FundingRefused {
        refused: String,
        archived: PathBuf,
        kept: PathBuf,
    },
    #[error("the core confirmed the funding but the authority did not credit it: run this again to hand it in")]
    NotCredited(#[source] DeviceCommandError),
    #[error("the funding kept beside the device is gone")]
    KeptGone,
    #[error("the core was not reached; {KEPT}")]
    CoreNotReached(#[source] SessionError),
    #[error("the core did not take the offline authority's refund; {KEPT}")]
    RefundNotTaken(#[source] ClientError),
    #[error("the core has not paid the offline authority's refund yet; {KEPT}")]
    RefundNotPaid,
    /// The funding could never be issued; its refund was taken back (the funding is done with).
    #[error("the offline authority could not issue tokens for the funding ({reason}) and refunded it: {back}")]
    Refunded { reason: String, back: RefundedTo },
    #[error("the core did not take the payouts; the deposits stay pending on the device: run this again")]
    PayoutsNotTaken(#[source] ClientError),
}

/// Where a refunded funding's value went.
#[derive(Debug, Clone)]
pub enum RefundedTo {
    /// Spendable again in the wallet at `path`.
    Wallet { value: u64, path: PathBuf },
    /// Paid to a key this wallet does not hold (the funding was paid by another wallet): that
    /// wallet imports `payment`.
    Elsewhere { value: u64, payment: PaymentString },
}

impl std::fmt::Display for RefundedTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefundedTo::Wallet { value, path } => write!(f, "{value} spendable again in {}", path.display()),
            RefundedTo::Elsewhere { value, payment } => write!(
                f,
                "{value} paid back to the wallet that paid the funding: import it there with `specie wallet \
                 --wallet <that wallet> import {payment}`"
            ),
        }
    }
}
