//! The exchange's state: accounts with a balance per asset, resting sell offers in one book per
//! ordered pair of assets, and per asset what came in, went out and was burned. Accounts live in
//! [`ACCOUNT_SHARDS`] maps by id, so a block's effects are applied shard by shard on every core
//! with no lock (the shards are disjoint); a book per pair is likewise its own unit of work.

use std::collections::{BTreeMap, BTreeSet};

use ed25519_dalek::VerifyingKey;
use rayon::prelude::*;
use specie_clearing::{ClearingParams, LimitPrice, PairSupply, ASSETS_MAX};

use crate::screen::Withdrawal;
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
            // SPEEDEX's blocks hold 500,000; 100,000 keeps a block's log record near 12 MB.
            block_transactions_max: 100_000,
        }
    }

    /// The largest command the exchange logs (a full block): what its log's record limit and
    /// its Raft entries must admit.
    pub fn command_bytes_max(&self) -> usize {
        1 + crate::block::Block::encoded_bytes_max(self.block_transactions_max)
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
    /// `key` decompressed, once when the account is made or restored (`None`: not a key
    /// [`specie_ed25519::check_public_key`] accepts, so nothing it signs verifies).
    pub(crate) verifying: Option<VerifyingKey>,
}

impl Account {
    pub(crate) fn new(key: [u8; 32], last_sequence: u64, balances: Vec<u64>) -> Account {
        Account {
            key,
            last_sequence,
            balances,
            verifying: specie_ed25519::check_public_key(&key).ok(),
        }
    }
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
    /// Withdrawals executed, by (account, sequence): what the exchange's payouts to the online
    /// cores pay (each core pays one at most once: its marker).
    pub(crate) withdrawals: BTreeMap<(AccountId, u64), Withdrawal>,
    /// The (asset, funding marker) of the core deposits credited: each is credited once. The
    /// asset is part of it: each core has its own UHS, so only the pair names one funding.
    pub(crate) credited: BTreeSet<(AssetId, [u8; 32])>,
    pub(crate) height: u64,
    pub(crate) state_hash: [u8; 32],
    /// The Merkle trees `state_hash` is the root of, kept to rehash only what a block touches.
    pub(crate) trees: crate::state_hash::StateTrees,
    /// The last block's valuations, where a proposer's price search starts.
    pub(crate) previous_prices: PreviousPrices,
}

/// The last applied block's valuations: not state (neither hashed, snapshotted nor compared;
/// empty after a restore), only where the next proposal's Tâtonnement starts. Replicas check
/// the prices a block carries, wherever its proposer's search started.
#[derive(Clone, Debug, Default)]
pub(crate) struct PreviousPrices(pub(crate) Vec<specie_clearing::Valuation>);

impl PartialEq for PreviousPrices {
    fn eq(&self, _: &PreviousPrices) -> bool {
        true
    }
}

impl Eq for PreviousPrices {}

/// Value that came in from an online core: a funding of `amount` of `asset` to the exchange,
/// confirmed there (its `marker` is in that core's UHS), for `account` with `key`: the funding
/// commits to both ([`deposit_commitment`]). A first deposit opens the account.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deposit {
    pub asset: AssetId,
    pub marker: [u8; 32],
    pub account: AccountId,
    pub key: [u8; 32],
    pub amount: u64,
}

/// What a core funding to the exchange names as its `owners_digest`: SHA-256 of the domain, the
/// account and its key, so that whoever sees the funding confirmed cannot have it credited to an
/// account of their own.
pub fn deposit_commitment(account: AccountId, key: &[u8; 32]) -> [u8; 32] {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"specie/exchange/deposit/v1");
    hasher.update(account.to_le_bytes());
    hasher.update(key);
    hasher.finalize().into()
}

/// Why a deposit is not credited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DepositRefusal {
    #[error("this funding was credited already")]
    AlreadyCredited,
    #[error("the account exists with another key")]
    OtherKey,
    #[error("not a valid Ed25519 public key for a new account")]
    BadKey,
    #[error("no such asset")]
    NoSuchAsset,
    #[error("a zero amount")]
    ZeroAmount,
    #[error("the asset's total on the exchange would pass ASSET_TOTAL_MAX")]
    TooMuch,
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
        for (id, _, balances) in &accounts {
            if balances.len() != config.assets {
                return Err(LedgerError::BalanceCount(*id, balances.len(), config.assets));
            }
            for (asset, balance) in balances.iter().enumerate() {
                totals[asset].deposited += u128::from(*balance);
                if totals[asset].deposited > u128::from(ASSET_TOTAL_MAX) {
                    return Err(LedgerError::TooMuch(asset as AssetId));
                }
            }
        }
        let accounts: Vec<(AccountId, Account)> = accounts
            .into_par_iter()
            .map(|(id, key, balances)| (id, Account::new(key, 0, balances)))
            .collect();
        for (id, account) in accounts {
            if shards[shard_of(id)].insert(id, account).is_some() {
                return Err(LedgerError::AccountTwice(id));
            }
        }
        let mut ledger = Ledger {
            config,
            shards,
            books: BTreeMap::new(),
            totals,
            withdrawals: BTreeMap::new(),
            credited: BTreeSet::new(),
            height: 0,
            state_hash: [0; 32],
            trees: crate::state_hash::StateTrees::empty(),
            previous_prices: PreviousPrices::default(),
        };
        ledger.rebuild_trees();
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

    /// `account`'s resting offers, by pair then key (a scan of every book: for queries, not
    /// for blocks).
    pub fn offers_of(&self, account: AccountId) -> Vec<(Pair, OfferKey, u64)> {
        self.books
            .iter()
            .flat_map(|(pair, book)| book.iter().map(move |(key, amount)| (*pair, *key, *amount)))
            .filter(|(_, key, _)| key.account == account)
            .collect()
    }

    pub fn offer_count(&self) -> usize {
        self.books.values().map(BTreeMap::len).sum()
    }

    pub fn totals(&self) -> &[AssetTotals] {
        &self.totals
    }

    /// Every pair's offers as clearing sees them: aggregated by limit price, ascending.
    pub fn supply(&self) -> Vec<PairSupply> {
        supply_of(&self.books)
    }

    /// The withdrawals executed, in (account, sequence) order.
    pub fn withdrawals(&self) -> impl Iterator<Item = &Withdrawal> {
        self.withdrawals.values()
    }

    pub fn withdrawal(&self, account: AccountId, sequence: u64) -> Option<&Withdrawal> {
        self.withdrawals.get(&(account, sequence))
    }

    /// Whether [`Ledger::deposit`] would credit `deposit` now.
    pub fn check_deposit(&self, deposit: &Deposit) -> Result<(), DepositRefusal> {
        let asset = usize::from(deposit.asset);
        let refusal = match () {
            _ if asset >= self.config.assets => Some(DepositRefusal::NoSuchAsset),
            _ if deposit.amount == 0 => Some(DepositRefusal::ZeroAmount),
            _ if self.credited.contains(&(deposit.asset, deposit.marker)) => Some(DepositRefusal::AlreadyCredited),
            _ => match self.account(deposit.account) {
                Some(account) if account.key != deposit.key => Some(DepositRefusal::OtherKey),
                Some(_) => None,
                None => specie_ed25519::check_public_key(&deposit.key)
                    .err()
                    .map(|_| DepositRefusal::BadKey),
            },
        };
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        let totals = &self.totals[asset];
        let on_exchange = totals.deposited + u128::from(deposit.amount) - totals.withdrawn;
        if on_exchange > u128::from(ASSET_TOTAL_MAX) {
            return Err(DepositRefusal::TooMuch);
        }
        Ok(())
    }

    /// Credits a deposit from an online core, once per funding marker.
    pub fn deposit(&mut self, deposit: &Deposit) -> Result<(), DepositRefusal> {
        self.check_deposit(deposit)?;
        let asset = usize::from(deposit.asset);
        self.totals[asset].deposited += u128::from(deposit.amount);
        self.credited.insert((deposit.asset, deposit.marker));
        let assets = self.config.assets;
        let account = self.shards[shard_of(deposit.account)]
            .entry(deposit.account)
            .or_insert_with(|| Account::new(deposit.key, 0, vec![0; assets]));
        account.balances[asset] += deposit.amount;
        self.rehash(crate::state_hash::Touched {
            accounts: vec![deposit.account],
            credited: true,
            ..Default::default()
        });
        Ok(())
    }

    pub fn credited(&self, asset: AssetId, marker: &[u8; 32]) -> bool {
        self.credited.contains(&(asset, *marker))
    }

    /// Per asset: what came in and went out through the cores, and where the rest is.
    pub fn holdings(&self) -> Vec<AssetHoldings> {
        let assets = self.config.assets;
        let mut holdings: Vec<AssetHoldings> = self
            .totals
            .iter()
            .map(|totals| AssetHoldings {
                totals: *totals,
                balances: 0,
                locked: 0,
            })
            .collect();
        for (_, account) in self.accounts() {
            for (asset, balance) in account.balances.iter().enumerate() {
                holdings[asset].balances += u128::from(*balance);
            }
        }
        for (&(sell, _), book) in &self.books {
            holdings[usize::from(sell)].locked += book.values().map(|amount| u128::from(*amount)).sum::<u128>();
        }
        debug_assert_eq!(holdings.len(), assets);
        holdings
    }

    /// Per asset: unlocked balances + locked in offers + burned = deposited − withdrawn, exactly.
    pub fn audit(&self) -> Result<(), LedgerError> {
        for (asset, held) in self.holdings().iter().enumerate() {
            if !held.balanced() {
                let totals = held.totals;
                return Err(LedgerError::Unbalanced {
                    asset: asset as AssetId,
                    balances: held.balances,
                    locked: held.locked,
                    burned: totals.burned,
                    deposited: totals.deposited,
                    withdrawn: totals.withdrawn,
                });
            }
        }
        Ok(())
    }
}

/// One asset's place on the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssetHoldings {
    pub totals: AssetTotals,
    /// Unlocked balances, over every account.
    pub balances: u128,
    /// Offered for sale in resting offers.
    pub locked: u128,
}

impl AssetHoldings {
    /// What the exchange holds of the asset: balances, offers and the burned commission.
    pub fn held(&self) -> u128 {
        self.balances + self.locked + self.totals.burned
    }

    /// Whether it holds exactly what was deposited and not withdrawn.
    pub fn balanced(&self) -> bool {
        Some(self.held()) == self.totals.deposited.checked_sub(self.totals.withdrawn)
    }
}

/// A snapshot's accounts, in increasing id order, into shards (their keys decompressed in
/// parallel).
fn read_accounts(
    reader: &mut specie_codec::Reader<'_>,
    assets: usize,
) -> Result<Vec<BTreeMap<AccountId, Account>>, specie_codec::DecodeError> {
    let count = reader.read_count("accounts", SNAPSHOT_ITEMS_MAX, 48 + 8 * assets)?;
    let mut read: Vec<(AccountId, [u8; 32], u64, Vec<u64>)> = Vec::with_capacity(count);
    for _ in 0..count {
        let id = reader.read_u64("account")?;
        if read.last().is_some_and(|(last, ..)| *last >= id) {
            return Err(specie_codec::DecodeError::Invalid {
                what: "exchange snapshot",
                reason: "accounts not in increasing id order".into(),
            });
        }
        let key: [u8; 32] = reader.read_array("key")?;
        let last_sequence = reader.read_u64("last sequence")?;
        let balances: Vec<u64> = (0..assets)
            .map(|_| reader.read_u64("balance"))
            .collect::<Result<_, _>>()?;
        read.push((id, key, last_sequence, balances));
    }
    let accounts: Vec<(AccountId, Account)> = read
        .into_par_iter()
        .map(|(id, key, last_sequence, balances)| (id, Account::new(key, last_sequence, balances)))
        .collect();
    let mut shards = vec![BTreeMap::new(); ACCOUNT_SHARDS];
    for (id, account) in accounts {
        shards[shard_of(id)].insert(id, account);
    }
    Ok(shards)
}

fn read_withdrawals(
    reader: &mut specie_codec::Reader<'_>,
) -> Result<BTreeMap<(AccountId, u64), Withdrawal>, specie_codec::DecodeError> {
    let mut withdrawals = BTreeMap::new();
    let count = reader.read_count("withdrawals", SNAPSHOT_ITEMS_MAX, WITHDRAWAL_BYTES)?;
    for _ in 0..count {
        let withdrawal = Withdrawal {
            account: reader.read_u64("withdrawal account")?,
            sequence: reader.read_u64("withdrawal sequence")?,
            asset: u16::from_le_bytes(reader.read_array("withdrawal asset")?),
            amount: reader.read_u64("withdrawal amount")?,
            address: reader.read_array("withdrawal address")?,
        };
        let id = (withdrawal.account, withdrawal.sequence);
        if withdrawals.last_key_value().is_some_and(|(last, _)| *last >= id) {
            return Err(specie_codec::DecodeError::NonCanonical {
                what: "exchange snapshot",
                reason: "withdrawals not in increasing order",
            });
        }
        withdrawals.insert(id, withdrawal);
    }
    Ok(withdrawals)
}

fn read_credited(
    reader: &mut specie_codec::Reader<'_>,
) -> Result<BTreeSet<(AssetId, [u8; 32])>, specie_codec::DecodeError> {
    let mut credited = BTreeSet::new();
    let count = reader.read_count("credited markers", SNAPSHOT_ITEMS_MAX, 34)?;
    for _ in 0..count {
        let marker = (
            u16::from_le_bytes(reader.read_array("credited asset")?),
            reader.read_array("credited marker")?,
        );
        if credited.last().is_some_and(|last| *last >= marker) {
            return Err(specie_codec::DecodeError::NonCanonical {
                what: "exchange snapshot",
                reason: "credited markers not in increasing order",
            });
        }
        credited.insert(marker);
    }
    Ok(credited)
}

/// A withdrawal's bytes in snapshots and the state hash.
const WITHDRAWAL_BYTES: usize = 8 + 8 + 2 + 8 + 32;

pub(crate) fn withdrawal_bytes(withdrawal: &Withdrawal) -> [u8; WITHDRAWAL_BYTES] {
    let mut bytes = [0u8; WITHDRAWAL_BYTES];
    bytes[..8].copy_from_slice(&withdrawal.account.to_le_bytes());
    bytes[8..16].copy_from_slice(&withdrawal.sequence.to_le_bytes());
    bytes[16..18].copy_from_slice(&withdrawal.asset.to_le_bytes());
    bytes[18..26].copy_from_slice(&withdrawal.amount.to_le_bytes());
    bytes[26..].copy_from_slice(&withdrawal.address);
    bytes
}

/// Every nonempty book's offers as clearing sees them.
pub(crate) fn supply_of(books: &BTreeMap<Pair, BTreeMap<OfferKey, u64>>) -> Vec<PairSupply> {
    books
        .iter()
        .filter(|(_, book)| !book.is_empty())
        .map(|(&(sell, buy), book)| PairSupply {
            sell,
            buy,
            levels: levels(book.iter().map(|(key, amount)| (key.limit, *amount))),
        })
        .collect()
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

/// The first byte of a ledger snapshot.
pub const SNAPSHOT_VERSION: u8 = 1;
/// Most accounts and resting offers a snapshot's decoder takes.
pub const SNAPSHOT_ITEMS_MAX: u64 = 1 << 32;

impl Ledger {
    /// The state as bytes: version, height, state hash, per asset (deposited, withdrawn, burned:
    /// `u128` each), account count (`u64`) and accounts in id order (id, key, last sequence,
    /// balances), offer count (`u64`) and offers in (pair, key) order (sell, buy, limit, account,
    /// sequence, amount), withdrawal count (`u64`) and withdrawals in (account, sequence) order
    /// (account, sequence, asset, amount, address), credited count (`u64`) and (asset, marker) pairs
    /// in order. Equal states give equal bytes.
    pub fn snapshot(&self) -> Vec<u8> {
        use specie_codec::put_u64;
        let mut out = vec![SNAPSHOT_VERSION];
        put_u64(&mut out, self.height);
        out.extend_from_slice(&self.state_hash);
        for totals in &self.totals {
            for figure in [totals.deposited, totals.withdrawn, totals.burned] {
                out.extend_from_slice(&figure.to_le_bytes());
            }
        }
        let mut accounts: Vec<(&AccountId, &Account)> = self.accounts().collect();
        accounts.sort_unstable_by_key(|(id, _)| **id);
        put_u64(&mut out, accounts.len() as u64);
        for (id, account) in accounts {
            out.extend_from_slice(&crate::state_hash::account_leaf(*id, account));
        }
        put_u64(&mut out, self.offer_count() as u64);
        for (&(sell, buy), book) in &self.books {
            for (key, amount) in book {
                out.extend_from_slice(&sell.to_le_bytes());
                out.extend_from_slice(&buy.to_le_bytes());
                for figure in [key.limit.0, key.account, key.sequence, *amount] {
                    put_u64(&mut out, figure);
                }
            }
        }
        put_u64(&mut out, self.withdrawals.len() as u64);
        self.withdrawals
            .values()
            .for_each(|w| out.extend_from_slice(&withdrawal_bytes(w)));
        put_u64(&mut out, self.credited.len() as u64);
        for (asset, marker) in &self.credited {
            out.extend_from_slice(&asset.to_le_bytes());
            out.extend_from_slice(marker);
        }
        out
    }

    /// The state a snapshot holds, under `config`; its state hash is computed again and must be
    /// the one recorded, and the audit must hold.
    pub fn restore(config: ExchangeConfig, bytes: &[u8]) -> Result<Ledger, specie_codec::DecodeError> {
        use specie_codec::DecodeError;
        let invalid = |reason: String| DecodeError::Invalid {
            what: "exchange snapshot",
            reason,
        };
        let mut reader = specie_codec::Reader::new(bytes);
        reader.read_version("exchange snapshot", SNAPSHOT_VERSION)?;
        let height = reader.read_u64("height")?;
        let state_hash = reader.read_array("state hash")?;
        let mut totals = Vec::with_capacity(config.assets);
        for _ in 0..config.assets {
            let mut figure = || reader.read_array::<16>("total").map(u128::from_le_bytes);
            totals.push(AssetTotals {
                deposited: figure()?,
                withdrawn: figure()?,
                burned: figure()?,
            });
        }
        let shards = read_accounts(&mut reader, config.assets)?;
        let mut books: BTreeMap<Pair, BTreeMap<OfferKey, u64>> = BTreeMap::new();
        let offers = reader.read_count("offers", SNAPSHOT_ITEMS_MAX, 36)?;
        for _ in 0..offers {
            let sell = u16::from_le_bytes(reader.read_array("sold asset")?);
            let buy = u16::from_le_bytes(reader.read_array("bought asset")?);
            let key = OfferKey {
                limit: LimitPrice(reader.read_u64("limit")?),
                account: reader.read_u64("offer account")?,
                sequence: reader.read_u64("offer sequence")?,
            };
            let amount = reader.read_u64("offer amount")?;
            if usize::from(sell.max(buy)) >= config.assets || sell == buy || amount == 0 {
                return Err(invalid("an offer of no pair, or of nothing".into()));
            }
            if books.entry((sell, buy)).or_default().insert(key, amount).is_some() {
                return Err(invalid("an offer twice".into()));
            }
        }
        let withdrawals = read_withdrawals(&mut reader)?;
        let credited = read_credited(&mut reader)?;
        reader.finish()?;
        let mut ledger = Ledger {
            config,
            shards,
            books,
            totals,
            withdrawals,
            credited,
            height,
            state_hash,
            trees: crate::state_hash::StateTrees::empty(),
            previous_prices: PreviousPrices::default(),
        };
        ledger.rebuild_trees();
        if ledger.state_hash != state_hash {
            return Err(invalid("the state does not hash to the recorded state hash".into()));
        }
        ledger.audit().map_err(|e| invalid(e.to_string()))?;
        Ok(ledger)
    }
}
