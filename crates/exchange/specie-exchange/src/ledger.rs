//! The exchange's state: accounts with a balance per asset, resting sell offers in one book per
//! ordered pair of assets, and per asset what came in, went out and was burned. Accounts live in
//! [`ACCOUNT_SHARDS`] maps by id, so a block's effects are applied shard by shard on every core
//! with no lock (the shards are disjoint); a book per pair is likewise its own unit of work.

use std::collections::BTreeMap;

use specie_clearing::{ClearingParams, LimitPrice, PairSupply, ASSETS_MAX};

use crate::transaction::{AccountId, AssetId};

/// Account maps a ledger is split into (a power of two: the shard is the id's low bits).
pub const ACCOUNT_SHARDS: usize = 64;
/// Most of one asset there may ever be on the exchange: credits then never overflow a `u64`
/// balance, whatever the order they are applied in (SPEEDEX caps issuance at `INT64_MAX` too).
pub const ASSET_TOTAL_MAX: u64 = i64::MAX as u64;

/// What a deployment fixes once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeConfig {
    /// The exchange's identity, signed by every transaction (genesis hash, say).
    pub exchange: [u8; 32],
    /// Assets traded, at most [`ASSETS_MAX`].
    pub assets: usize,
    pub clearing: ClearingParams,
    /// How far above its last used sequence number an account's transaction may be.
    pub sequence_window: u64,
    pub block_transactions_max: usize,
}

impl ExchangeConfig {
    pub fn new(exchange: [u8; 32], assets: usize) -> ExchangeConfig {
        assert!((2..=ASSETS_MAX).contains(&assets), "2 to ASSETS_MAX assets");
        ExchangeConfig {
            exchange,
            assets,
            clearing: ClearingParams::default(),
            sequence_window: 64,
            block_transactions_max: 500_000,
        }
    }
}

/// One account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub key: [u8; 32],
    /// The highest sequence number used; a transaction must be above it.
    pub last_sequence: u64,
    /// Unlocked balance per asset (what offers lock is in the books).
    pub balances: Vec<u64>,
}

/// A resting offer's place in its pair's book: by limit price, then account, then the sequence
/// of the transaction that made it. Execution sells offers in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferKey {
    pub limit: LimitPrice,
    pub account: AccountId,
    pub sequence: u64,
}

/// An ordered pair of assets: (sold, bought).
pub type Pair = (AssetId, AssetId);

/// Per asset, what the platform audit compares: on the exchange = in − out − burned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AssetTotals {
    pub deposited: u128,
    pub withdrawn: u128,
    /// Commissions and rounding kept by the auctioneer (SPEEDEX burns them).
    pub burned: u128,
}

/// The exchange's state after `height` blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ledger {
    pub(crate) config: ExchangeConfig,
    pub(crate) shards: Vec<BTreeMap<AccountId, Account>>,
    pub(crate) books: BTreeMap<Pair, BTreeMap<OfferKey, u64>>,
    pub(crate) totals: Vec<AssetTotals>,
    pub(crate) height: u64,
    pub(crate) state_hash: [u8; 32],
}

/// Why a genesis or an audit fails.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("account {0} is listed twice")]
    AccountTwice(AccountId),
    #[error("account {0} has {1} balances for {2} assets")]
    BalanceCount(AccountId, usize, usize),
    #[error("asset {0}: more than ASSET_TOTAL_MAX in total")]
    TooMuch(AssetId),
    #[error(
        "asset {asset}: balances {balances} + locked {locked} + burned {burned} ≠ deposited {deposited} − withdrawn {withdrawn}"
    )]
    Unbalanced {
        asset: AssetId,
        balances: u128,
        locked: u128,
        burned: u128,
        deposited: u128,
        withdrawn: u128,
    },
}

pub(crate) fn shard_of(account: AccountId) -> usize {
    (account as usize) & (ACCOUNT_SHARDS - 1)
}

impl Ledger {
    /// The state before the first block: `accounts` with their balances, counted as deposited.
    pub fn genesis(
        config: ExchangeConfig,
        accounts: Vec<(AccountId, [u8; 32], Vec<u64>)>,
    ) -> Result<Ledger, LedgerError> {
        let mut shards = vec![BTreeMap::new(); ACCOUNT_SHARDS];
        let mut totals = vec![AssetTotals::default(); config.assets];
        for (id, key, balances) in accounts {
            if balances.len() != config.assets {
                return Err(LedgerError::BalanceCount(id, balances.len(), config.assets));
            }
            for (asset, balance) in balances.iter().enumerate() {
                totals[asset].deposited += u128::from(*balance);
                if totals[asset].deposited > u128::from(ASSET_TOTAL_MAX) {
                    return Err(LedgerError::TooMuch(asset as AssetId));
                }
            }
            let account = Account {
                key,
                last_sequence: 0,
                balances,
            };
            if shards[shard_of(id)].insert(id, account).is_some() {
                return Err(LedgerError::AccountTwice(id));
            }
        }
        let mut ledger = Ledger {
            config,
            shards,
            books: BTreeMap::new(),
            totals,
            height: 0,
            state_hash: [0; 32],
        };
        ledger.state_hash = ledger.compute_state_hash();
        Ok(ledger)
    }

    pub fn config(&self) -> &ExchangeConfig {
        &self.config
    }

    pub fn height(&self) -> u64 {
        self.height
    }

    /// The hash of the state after the last block (accounts, books, totals, height).
    pub fn state_hash(&self) -> [u8; 32] {
        self.state_hash
    }

    pub fn account(&self, id: AccountId) -> Option<&Account> {
        self.shards[shard_of(id)].get(&id)
    }

    pub fn accounts(&self) -> impl Iterator<Item = (&AccountId, &Account)> {
        self.shards.iter().flat_map(|shard| shard.iter())
    }

    pub fn account_count(&self) -> usize {
        self.shards.iter().map(BTreeMap::len).sum()
    }

    /// The resting offers of `pair`, in execution order.
    pub fn book(&self, pair: Pair) -> impl Iterator<Item = (&OfferKey, &u64)> {
        self.books.get(&pair).into_iter().flat_map(|book| book.iter())
    }

    pub fn offer_count(&self) -> usize {
        self.books.values().map(BTreeMap::len).sum()
    }

    pub fn totals(&self) -> &[AssetTotals] {
        &self.totals
    }

    /// Every pair's offers as clearing sees them: aggregated by limit price, ascending.
    pub fn supply(&self) -> Vec<PairSupply> {
        self.books
            .iter()
            .filter(|(_, book)| !book.is_empty())
            .map(|(&(sell, buy), book)| PairSupply {
                sell,
                buy,
                levels: levels(book.iter().map(|(key, amount)| (key.limit, *amount))),
            })
            .collect()
    }

    /// Per asset: unlocked balances + locked in offers + burned = deposited − withdrawn, exactly.
    pub fn audit(&self) -> Result<(), LedgerError> {
        let assets = self.config.assets;
        let mut balances = vec![0u128; assets];
        for (_, account) in self.accounts() {
            for (asset, balance) in account.balances.iter().enumerate() {
                balances[asset] += u128::from(*balance);
            }
        }
        let mut locked = vec![0u128; assets];
        for (&(sell, _), book) in &self.books {
            locked[usize::from(sell)] += book.values().map(|amount| u128::from(*amount)).sum::<u128>();
        }
        for asset in 0..assets {
            let totals = self.totals[asset];
            let held = balances[asset] + locked[asset] + totals.burned;
            if Some(held) != totals.deposited.checked_sub(totals.withdrawn) {
                return Err(LedgerError::Unbalanced {
                    asset: asset as AssetId,
                    balances: balances[asset],
                    locked: locked[asset],
                    burned: totals.burned,
                    deposited: totals.deposited,
                    withdrawn: totals.withdrawn,
                });
            }
        }
        Ok(())
    }
}

/// (limit, amount) in ascending limit order, summed per distinct limit.
pub(crate) fn levels(offers: impl Iterator<Item = (LimitPrice, u64)>) -> Vec<(LimitPrice, u64)> {
    let mut levels: Vec<(LimitPrice, u64)> = Vec::new();
    for (limit, amount) in offers {
        match levels.last_mut() {
            Some((last, total)) if *last == limit => {
                // Bounded by ASSET_TOTAL_MAX: all of one asset fits a u64.
                *total = total.checked_add(amount).expect("an asset's total fits a u64");
            }
            _ => levels.push((limit, amount)),
        }
    }
    levels
}
