//! The online core as FastPay's Primary (seed 002 §4.3), FastPay's bridge to the core: its two
//! core transactions and the rules a sentinel judges them by.
//!
//! * [`transaction`]: [`FastpayFunding`] (kind `0x03`) moves value out of core circulation into
//!   a Byzantine-mode account; [`FastpayRedeem`] (kind `0x04`) brings a certified transfer to
//!   the core back as a core output; their markers make each happen once. [`FastpayEpoch`]
//!   (kind `0x09`) keeps the committee's record of its next epoch in the ledger.
//! * [`rules`]: [`FastpayRules`], what a sentinel checks of them against the committee.
//!
//! A process decodes these kinds once it calls [`install`] (the deployments do, at start).

pub mod rules;
pub mod transaction;

pub use rules::{FastpayErrorCode, FastpayRules};
pub use transaction::{
    fastpay_epoch_marker, fastpay_funding_marker, fastpay_redeem_marker, EpochKind, FastpayEpoch, FastpayFunding,
    FastpayFundingClaim, FastpayRedeem, FundingKind, RedeemKind, COMMITTEE_ROLE, KIND_FASTPAY_EPOCH, KIND_FASTPAY_FUND,
    KIND_FASTPAY_REDEEM,
};

/// Makes this process decode FastPay's funding, redeem and epoch (idempotent).
pub fn install() {
    specie_transaction::capability::install(&[&FundingKind, &RedeemKind, &EpochKind]);
}
