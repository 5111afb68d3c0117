//! The exchange's side of its bridge to the online cores: a core funding to the bridge key as a
//! deposit ([`deposit_from_core`]), where its refund goes ([`refund_address`]), and a withdrawal
//! as the core payout the bridge key signs ([`bridge_payout`]). The core's own code reads and
//! writes its transactions ([`CoreTransactions`], handed in by whoever starts the exchange); the
//! exchange's role keeps deposits and withdrawals (`specie_exchange::bridge`).

use ed25519_dalek::SigningKey;
use specie_exchange::{deposit_commitment, AccountId, AssetId, Deposit, Withdrawal};
use specie_service::{BridgeFundingTerms, CoreTransactions, PayTo};

/// Why a core funding cannot be credited to an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BridgeRefusal {
    #[error("the funding is made out to another bridge key than the exchange's")]
    OtherBridge,
    #[error("the funding commits to another account or key")]
    OtherAccount,
    #[error("the funding spends no input, so no one could be refunded")]
    NoInput,
}

/// Where a refund of `funding` is paid on its core: the owner (witness program commitment) of
/// its first input, whose key signed it. Confirmed fundings spend at least one input.
pub fn refund_address(funding: &BridgeFundingTerms) -> Result<[u8; 32], BridgeRefusal> {
    funding.refund_to.ok_or(BridgeRefusal::NoInput)
}

/// The deposit a confirmed core funding of `asset` makes, for `account` with `key`, if the
/// funding is the exchange's and commits to them. Whether the core confirmed it (its marker in
/// that core's UHS) is the caller's check, made against the core itself.
pub fn deposit_from_core(
    funding: &BridgeFundingTerms,
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
        marker: funding.marker,
        account,
        key,
        amount: funding.amount,
    })
}

/// The encoded payout of `withdrawal` for the core of its asset, signed by the bridge key.
/// Ed25519 is deterministic: every replica signs the same bytes, and presenting it twice pays
/// once.
pub fn bridge_payout(core: &dyn CoreTransactions, withdrawal: &Withdrawal, bridge: &SigningKey) -> Vec<u8> {
    core.bridge_payout(
        bridge,
        withdrawal.serial(),
        PayTo::Commitment(withdrawal.address),
        withdrawal.amount,
    )
}
