//! A device's limits and why it refuses: each refusal names the limit and the numbers, so a person
//! at a market stall knows what to do next.

use specie_offline::{KeyError, TokenError};
use thiserror::Error;

/// What a device allows offline. Without a secure element a modified device can ignore its own
/// holding and payment limits; the payee's checks (hops, its own sync age, revocation) it cannot
/// escape, and the authority checks the rest at funding and deposit (docs/offline-mode.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Most value the device may hold, in minor units.
    pub holding_max: u64,
    /// Most value one payment may move, in minor units.
    pub payment_max: u64,
    /// Most hops a token may have before the device refuses it: it must go back to the authority.
    pub hops_max: usize,
    /// Longest time since the last sync with the authority during which the device pays and
    /// receives (the revocation list it holds is that old).
    pub sync_age_ms_max: u64,
}

impl Default for DeviceLimits {
    fn default() -> DeviceLimits {
        DeviceLimits {
            holding_max: 3_000,
            payment_max: 500,
            hops_max: 8,
            sync_age_ms_max: 7 * 24 * 3_600 * 1_000,
        }
    }
}

/// Why a device refuses to pay, receive or fund.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DeviceError {
    #[error("receiving {amount} would make the holding {total}, over the holding limit of {limit}")]
    HoldingLimit { amount: u64, total: u64, limit: u64 },
    #[error("a payment of {amount} is over the per-payment limit of {limit}")]
    PaymentLimit { amount: u64, limit: u64 },
    #[error(
        "the last sync with the authority was {} hours ago, more than the {} hours allowed: go online and sync first",
        age_ms / 3_600_000,
        limit_ms / 3_600_000
    )]
    SyncTooOld { age_ms: u64, limit_ms: u64 },
    #[error("{needed} certified one-time keys needed, {left} left: sync with the authority to certify more")]
    NoKeys { needed: usize, left: usize },
    #[error(
        "{amount} is more than the {spendable} this device can pay offline ({blocked} more is held in tokens past the hop limit or revoked: deposit them when online)"
    )]
    NotEnough { amount: u64, spendable: u64, blocked: u64 },
    #[error(
        "the tokens held cannot make exactly {amount}: exchange tokens for smaller ones at the authority when online"
    )]
    NoExactChange { amount: u64 },
    #[error("token {index} has passed {hops} hands, more than the {limit} allowed offline: it must go back to the authority")]
    TooManyHops { index: usize, hops: usize, limit: usize },
    #[error("token {index} is revoked (it was spent twice)")]
    Revoked { index: usize },
    #[error("token {index} expired: its key's tokens could be spent offline through period {spendable_through}; its holder must deposit it")]
    Expired { index: usize, spendable_through: u32 },
    #[error(
        "token {index} is worth nothing: its key's tokens could be deposited through period {depositable_through}"
    )]
    Worthless { index: usize, depositable_through: u32 },
    #[error("the payment request's key certificate does not check under the authority's keys: {0}")]
    BadRequest(KeyError),
    #[error(
        "this request's key was certified in period {period}, too long ago to be paid to: sync to certify fresh keys"
    )]
    StaleKey { period: u32 },
    #[error("token {index} is of a revoked issuing key: its holder must deposit it, and is paid if the authority issued it (recoup)")]
    KeyRevoked { index: usize },
    #[error("token {index} does not verify: {error}")]
    BadToken { index: usize, error: TokenError },
    #[error("token {index} is not paid to the key and nonce of this payment: a replay, or another payment's token")]
    NotForThisPayment { index: usize },
    #[error("no payment request with this nonce is open on this device")]
    UnknownRequest,
    #[error("the payment is worth {paid}, not the {asked} asked")]
    WrongAmount { paid: u64, asked: u64 },
    #[error(
        "the authority's answer to a deposit gives other tokens than the deposit asked for (token {index}): \
         the deposit is kept, to be sent again"
    )]
    NotTheReissueAsked { index: usize },
}
