//! The exchange's bridge to the online cores, one core per asset (each currency's own core and
//! issuer). Value comes in as a core *funding* to the exchange's bridge key whose owners' digest
//! commits to the exchange account and its key; it goes out as a core *payout* the bridge key
//! signs for a withdrawal executed in a block: the same two kinds the offline authority uses
//! (docs/transaction-format.md §5.7–5.8). The conversions between the core's transactions and
//! the exchange's deposits and withdrawals are the service's (`specie_exchange_service::
//! core_bridge`); here, what the ledger keeps of them. Each funding is
//! credited once (its marker, in the exchange's state); each withdrawal is paid once (its
//! payout's marker, in the core's UHS, per bridge key and serial).
//!
//! A confirmed funding the exchange can never credit as it stands (it commits to an account
//! another key holds, or to a key that is not one, or it would take the asset's total on the
//! exchange past [`crate::ASSET_TOTAL_MAX`]) is not left out of every book: it is *refunded*
//! ([`Ledger::deposit_or_refund`]), once per marker like a credit. The refund is a withdrawal of
//! the funding's amount to the owner of the funding's first input, kept
//! among the withdrawals under an id no transaction's withdrawal can have ([`refund_id`]), so
//! the bridge key's payout for it is served, paid once by the core, hashed into the state and
//! counted in the audit (deposited and withdrawn alike) as every other withdrawal is.

use sha2::{Digest, Sha256};

use crate::ledger::{Deposit, DepositRefusal, Ledger};
use crate::screen::Withdrawal;
use crate::state_hash::Touched;
use crate::transaction::{AccountId, AssetId};

/// The top bit of a refund's sequence number. No transaction's sequence has it (the screen
/// refuses one that does), so a refund's id, and the serial of its payout, are never a
/// transaction's withdrawal's.
pub const REFUND_SEQUENCE_BIT: u64 = 1 << 63;

/// The id (account, sequence) the refund of funding `marker` of `asset` is kept under among the
/// withdrawals: from SHA-256 of a domain, the asset and the marker, with
/// [`REFUND_SEQUENCE_BIT`] set in the sequence.
pub fn refund_id(asset: AssetId, marker: &[u8; 32]) -> (AccountId, u64) {
    let mut hasher = Sha256::new();
    hasher.update(b"specie/exchange/refund/v1");
    hasher.update(asset.to_le_bytes());
    hasher.update(marker);
    let digest: [u8; 32] = hasher.finalize().into();
    let half = |from: usize| u64::from_le_bytes(digest[from..from + 8].try_into().expect("8 bytes"));
    (half(0), half(8) | REFUND_SEQUENCE_BIT)
}

/// What a deposit handed in with a refund address came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credit {
    Deposited,
    /// Not creditable for `reason`: refunded by `withdrawal`, whose payout the core pays.
    Refunded {
        withdrawal: Withdrawal,
        reason: DepositRefusal,
    },
}

impl DepositRefusal {
    /// Whether a confirmed funding refused for this is refunded rather than refused: it could
    /// never be credited as it stands, and it is not credited (or refunded) already.
    pub fn refundable(self) -> bool {
        matches!(
            self,
            DepositRefusal::OtherKey | DepositRefusal::BadKey | DepositRefusal::TooMuch
        )
    }
}

impl Ledger {
    /// What [`Ledger::deposit_or_refund`] would do now: credit it (`None`), refund it (the
    /// refusal that makes it a refund), or refuse it.
    pub fn check_deposit_or_refund(&self, deposit: &Deposit) -> Result<Option<DepositRefusal>, DepositRefusal> {
        match self.check_deposit(deposit) {
            Ok(()) => Ok(None),
            Err(reason)
                if reason.refundable()
                    && !self
                        .withdrawals
                        .contains_key(&refund_id(deposit.asset, &deposit.marker)) =>
            {
                Ok(Some(reason))
            }
            Err(reason) => Err(reason),
        }
    }

    /// Credits `deposit` if it can be; if it never can as it stands ([`DepositRefusal::refundable`]),
    /// refunds it instead: a withdrawal of its amount to `refund_to` (the funding's
    /// [`refund_address`]) under [`refund_id`], counted as deposited and withdrawn. Either way
    /// its marker is credited, so a funding is credited or refunded once.
    pub fn deposit_or_refund(&mut self, deposit: &Deposit, refund_to: [u8; 32]) -> Result<Credit, DepositRefusal> {
        let Some(reason) = self.check_deposit_or_refund(deposit)? else {
            self.deposit(deposit)?;
            return Ok(Credit::Deposited);
        };
        let (account, sequence) = refund_id(deposit.asset, &deposit.marker);
        let withdrawal = Withdrawal {
            account,
            sequence,
            asset: deposit.asset,
            amount: deposit.amount,
            address: refund_to,
        };
        let totals = &mut self.totals[usize::from(deposit.asset)];
        totals.deposited += u128::from(deposit.amount);
        totals.withdrawn += u128::from(deposit.amount);
        self.credited.insert((deposit.asset, deposit.marker));
        self.withdrawals.insert((account, sequence), withdrawal);
        self.rehash(Touched {
            withdrawals: true,
            credited: true,
            ..Default::default()
        });
        Ok(Credit::Refunded { withdrawal, reason })
    }

    /// The refund of funding `marker` of `asset`, if it was refunded.
    pub fn refund_of(&self, asset: AssetId, marker: &[u8; 32]) -> Option<&Withdrawal> {
        self.withdrawals.get(&refund_id(asset, marker))
    }
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
