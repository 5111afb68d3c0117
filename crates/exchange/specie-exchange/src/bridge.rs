//! The exchange's bridge to the online cores, one core per asset (each currency's own core and
//! issuer). Value comes in as a core *funding* to the exchange's bridge key whose owners' digest
//! commits to the exchange account and its key ([`deposit_from_core`]); it goes out as a core
//! *payout* the bridge key signs for a withdrawal executed in a block ([`payout`]): the same two
//! kinds the offline authority uses (docs/transaction-format.md §5.7–5.8). Each funding is
//! credited once (its marker, in the exchange's state); each withdrawal is paid once (its
//! payout's marker, in the core's UHS, per bridge key and serial).

use ed25519_dalek::SigningKey;
use specie_transaction::{OfflineFunding, OfflinePayout};

use crate::ledger::{deposit_commitment, Deposit};
use crate::screen::Withdrawal;
use crate::transaction::{AccountId, AssetId};

/// Why a core funding cannot be credited to an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BridgeRefusal {
    #[error("the funding is made out to another bridge key than the exchange's")]
    OtherBridge,
    #[error("the funding commits to another account or key")]
    OtherAccount,
}

/// The deposit a confirmed core funding of `asset` makes, for `account` with `key`, if the
/// funding is the exchange's and commits to them. Whether the core confirmed it (its marker in
/// that core's UHS) is the caller's check, made against the core itself.
pub fn deposit_from_core(
    funding: &OfflineFunding,
    bridge: &[u8; 32],
    asset: AssetId,
    account: AccountId,
    key: [u8; 32],
) -> Result<Deposit, BridgeRefusal> {
    if &funding.authority != bridge {
        return Err(BridgeRefusal::OtherBridge);
    }
    if funding.owners_digest != deposit_commitment(account, &key) {
        return Err(BridgeRefusal::OtherAccount);
    }
    Ok(Deposit {
        asset,
        marker: funding.marker().0,
        account,
        key,
        amount: funding.amount,
    })
}

impl Withdrawal {
    /// The payout's serial: the withdrawing transaction's account and sequence (little-endian).
    pub fn serial(&self) -> [u8; 16] {
        let mut serial = [0u8; 16];
        serial[..8].copy_from_slice(&self.account.to_le_bytes());
        serial[8..].copy_from_slice(&self.sequence.to_le_bytes());
        serial
    }
}

/// The payout of `withdrawal` for the core of its asset, signed by the bridge key. Ed25519 is
/// deterministic: every replica signs the same bytes, and presenting it twice pays once.
pub fn payout(withdrawal: &Withdrawal, bridge: &SigningKey) -> OfflinePayout {
    OfflinePayout::new_signed(bridge, withdrawal.serial(), withdrawal.address, withdrawal.amount)
}
