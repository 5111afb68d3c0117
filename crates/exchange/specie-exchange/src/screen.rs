//! Which transactions a block may hold, decided against the state at the block's start only, so
//! that the decision does not depend on the order of the transactions (SPEEDEX §3, §K.6 and
//! Appendix I). A proposer drops what fails; a replica refuses a block that holds any. The rules:
//!
//! - a transaction alone: known account, assets in range, two different assets, a nonzero amount,
//!   a nonzero limit, a payee that exists, a resting offer of its own to cancel, a valid new key;
//! - an account's transactions together: sequence numbers distinct, in the window above its
//!   last one and below 2^63 (refunds' ids are above: `bridge::REFUND_SEQUENCE_BIT`); what its
//!   payments and offers take, per asset, within its balance (an overdraft is impossible in any
//!   order); no offer cancelled twice. One failure drops all of them: which one to keep would
//!   depend on order;
//! - new accounts: an id not taken, created once in the block (created twice: both dropped).
//!
//! What passes becomes [`Effects`]: debits, credits, book changes and new accounts, which commute.

use std::collections::{BTreeMap, BTreeSet};

use crate::ledger::{Ledger, OfferKey, Pair};
use crate::transaction::{AccountId, AssetId, Operation, SignedTransaction};

/// Why a transaction cannot be in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no such account")]
    NoSuchAccount,
    #[error("an asset out of range")]
    NoSuchAsset,
    #[error("an offer must sell one asset for another")]
    SameAsset,
    #[error("a zero amount")]
    ZeroAmount,
    #[error("a zero limit price")]
    ZeroLimit,
    #[error("no such payee")]
    NoSuchPayee,
    #[error("no such offer of this account")]
    NoSuchOffer,
    #[error("not a valid Ed25519 public key for the new account")]
    BadKey,
    #[error("the new account's id is taken")]
    AccountExists,
    #[error("the account's sequence numbers repeat, are used, or are beyond the window")]
    Sequence,
    #[error("the account's payments and offers take more of asset {0} than it has")]
    Overdraft(AssetId),
    #[error("an offer cancelled twice")]
    CancelledTwice,
    #[error("an account created twice in the block")]
    CreatedTwice,
    #[error("the same transaction twice")]
    Duplicate,
    #[error("the signature does not verify")]
    Signature,
    #[error("the block is full: send it again")]
    BlockFull,
}

/// A block's commutative effects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Per account: what it pays out or locks, per asset; its new last sequence.
    pub debits: BTreeMap<AccountId, (Vec<u64>, u64)>,
    /// (account, asset, amount): payments received and cancelled offers' remainders.
    pub credits: Vec<(AccountId, AssetId, u64)>,
    pub cancels: Vec<(Pair, OfferKey)>,
    pub offers: Vec<(Pair, OfferKey, u64)>,
    pub new_accounts: Vec<(AccountId, [u8; 32])>,
    /// In (account, sequence) order, whatever the order of the block's transactions.
    pub withdrawals: Vec<Withdrawal>,
}

/// Value leaving the exchange for an online core: what the exchange's payout for that core
/// pays. Known by (account, sequence), unique on the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Withdrawal {
    pub account: AccountId,
    pub sequence: u64,
    pub asset: AssetId,
    pub amount: u64,
    pub address: [u8; 32],
}

/// Screens `transactions` (signatures already checked) against `ledger`: the verdict per
/// transaction (`None`: in the block) and the effects of those in it.
pub fn screen(ledger: &Ledger, transactions: &[SignedTransaction]) -> (Vec<Option<Refusal>>, Effects) {
    let mut verdicts: Vec<Option<Refusal>> = transactions.iter().map(|t| alone(ledger, t).err()).collect();
    let mut seen = std::collections::HashSet::new();
    for (index, signed) in transactions.iter().enumerate() {
        if !seen.insert(signed) {
            verdicts[index] = Some(Refusal::Duplicate);
        }
    }
    let mut by_account: BTreeMap<AccountId, Vec<usize>> = BTreeMap::new();
    for (index, signed) in transactions.iter().enumerate() {
        if verdicts[index].is_none() {
            by_account.entry(signed.transaction.account).or_default().push(index);
        }
    }
    for (account, indices) in &by_account {
        if let Err(refusal) = together(ledger, *account, indices.iter().map(|&i| &transactions[i])) {
            indices.iter().for_each(|&i| verdicts[i] = Some(refusal));
        }
    }
    refuse_double_creations(transactions, &mut verdicts);
    let effects = effects(ledger, transactions, &verdicts);
    (verdicts, effects)
}

/// The checks of one transaction on its own.
fn alone(ledger: &Ledger, signed: &SignedTransaction) -> Result<(), Refusal> {
    let transaction = &signed.transaction;
    let assets = ledger.config.assets;
    let in_range = |asset: AssetId| {
        if usize::from(asset) < assets {
            Ok(())
        } else {
            Err(Refusal::NoSuchAsset)
        }
    };
    ledger.account(transaction.account).ok_or(Refusal::NoSuchAccount)?;
    match transaction.operation {
        Operation::CreateAccount { id, key } => {
            specie_ed25519::check_public_key(&key).map_err(|_| Refusal::BadKey)?;
            match ledger.account(id) {
                Some(_) => Err(Refusal::AccountExists),
                None => Ok(()),
            }
        }
        Operation::SellOffer {
            sell,
            buy,
            amount,
            limit,
        } => {
            in_range(sell)?;
            in_range(buy)?;
            match () {
                _ if sell == buy => Err(Refusal::SameAsset),
                _ if amount == 0 => Err(Refusal::ZeroAmount),
                _ if limit.0 == 0 => Err(Refusal::ZeroLimit),
                _ => Ok(()),
            }
        }
        Operation::CancelOffer {
            sell,
            buy,
            limit,
            sequence,
        } => {
            let key = OfferKey {
                limit,
                account: transaction.account,
                sequence,
            };
            let resting = ledger
                .books
                .get(&(sell, buy))
                .is_some_and(|book| book.contains_key(&key));
            if resting {
                Ok(())
            } else {
                Err(Refusal::NoSuchOffer)
            }
        }
        Operation::Payment { to, asset, amount } => {
            in_range(asset)?;
            if amount == 0 {
                return Err(Refusal::ZeroAmount);
            }
            ledger.account(to).map(|_| ()).ok_or(Refusal::NoSuchPayee)
        }
        Operation::Withdraw { asset, amount, .. } => {
            in_range(asset)?;
            if amount == 0 {
                return Err(Refusal::ZeroAmount);
            }
            Ok(())
        }
    }
}

/// The checks of one account's transactions together.
fn together<'a>(
    ledger: &Ledger,
    account: AccountId,
    transactions: impl Iterator<Item = &'a SignedTransaction>,
) -> Result<(), Refusal> {
    let state = ledger.account(account).expect("checked alone");
    let window = state.last_sequence..=state.last_sequence.saturating_add(ledger.config.sequence_window);
    let mut sequences = BTreeSet::new();
    let mut taken = vec![0u128; ledger.config.assets];
    let mut cancelled = BTreeSet::new();
    for signed in transactions {
        let sequence = signed.transaction.sequence;
        if sequence == state.last_sequence
            || !window.contains(&sequence)
            || sequence & crate::bridge::REFUND_SEQUENCE_BIT != 0
            || !sequences.insert(sequence)
        {
            return Err(Refusal::Sequence);
        }
        match signed.transaction.operation {
            Operation::SellOffer { sell, amount, .. } => taken[usize::from(sell)] += u128::from(amount),
            Operation::Payment { asset, amount, .. } | Operation::Withdraw { asset, amount, .. } => {
                taken[usize::from(asset)] += u128::from(amount)
            }
            Operation::CancelOffer {
                sell,
                buy,
                limit,
                sequence,
            } => {
                if !cancelled.insert((sell, buy, limit, sequence)) {
                    return Err(Refusal::CancelledTwice);
                }
            }
            Operation::CreateAccount { .. } => {}
        }
    }
    match taken
        .iter()
        .zip(&state.balances)
        .position(|(taken, balance)| *taken > u128::from(*balance))
    {
        Some(asset) => Err(Refusal::Overdraft(asset as AssetId)),
        None => Ok(()),
    }
}

/// An id created by two transactions of the block: neither may be in it.
fn refuse_double_creations(transactions: &[SignedTransaction], verdicts: &mut [Option<Refusal>]) {
    let mut creations: BTreeMap<AccountId, Vec<usize>> = BTreeMap::new();
    for (index, signed) in transactions.iter().enumerate() {
        if let (None, Operation::CreateAccount { id, .. }) = (verdicts[index], signed.transaction.operation) {
            creations.entry(id).or_default().push(index);
        }
    }
    for indices in creations.values().filter(|indices| indices.len() > 1) {
        indices.iter().for_each(|&i| verdicts[i] = Some(Refusal::CreatedTwice));
    }
}

fn effects(ledger: &Ledger, transactions: &[SignedTransaction], verdicts: &[Option<Refusal>]) -> Effects {
    let assets = ledger.config.assets;
    let mut effects = Effects::default();
    let accepted = transactions
        .iter()
        .zip(verdicts)
        .filter(|(_, verdict)| verdict.is_none());
    for (signed, _) in accepted {
        let transaction = &signed.transaction;
        let account = transaction.account;
        let entry = effects.debits.entry(account).or_insert_with(|| (vec![0; assets], 0));
        entry.1 = entry.1.max(transaction.sequence);
        match transaction.operation {
            Operation::CreateAccount { id, key } => effects.new_accounts.push((id, key)),
            Operation::SellOffer {
                sell,
                buy,
                amount,
                limit,
            } => {
                entry.0[usize::from(sell)] += amount;
                let key = OfferKey {
                    limit,
                    account,
                    sequence: transaction.sequence,
                };
                effects.offers.push(((sell, buy), key, amount));
            }
            Operation::CancelOffer {
                sell,
                buy,
                limit,
                sequence,
            } => {
                let key = OfferKey {
                    limit,
                    account,
                    sequence,
                };
                let left = ledger.books[&(sell, buy)][&key];
                effects.cancels.push(((sell, buy), key));
                effects.credits.push((account, sell, left));
            }
            Operation::Payment { to, asset, amount } => {
                entry.0[usize::from(asset)] += amount;
                effects.credits.push((to, asset, amount));
            }
            Operation::Withdraw { asset, amount, address } => {
                entry.0[usize::from(asset)] += amount;
                effects.withdrawals.push(Withdrawal {
                    account,
                    sequence: transaction.sequence,
                    asset,
                    amount,
                    address,
                });
            }
        }
    }
    effects.withdrawals.sort_unstable();
    effects
}
