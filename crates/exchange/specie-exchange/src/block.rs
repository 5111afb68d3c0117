//! A block: its transactions (in no meaningful order) and the clearing its proposer computed
//! (one valuation per asset, an amount per traded pair). A proposer screens candidates, applies
//! their effects and clears the books once (racing Tâtonnement instances is its business); every
//! replica checks the block against the rules and the clearing against the guarantees with exact
//! integer arithmetic, and executes it to the same state, bit for bit, whatever its thread count:
//!
//! 1. effects (debits, credits, cancels, new offers, new accounts) applied shard by shard and
//!    book by book in parallel: they commute;
//! 2. the clearing: proposed from the books after step 1, or checked against them;
//! 3. execution: per pair, offers sold in (limit, account, sequence) order up to the pair's
//!    amount, at most one partly; each seller paid fee(floor(sold · p_sell / p_buy)) of the
//!    bought asset; what the auctioneer keeps is burned.

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, VerifyingKey};
use rayon::prelude::*;
use specie_clearing::{Clearing, ClearingViolation, PairTrade, Valuation};
use specie_codec::{put_u64, DecodeError, Reader};

use crate::ledger::{shard_of, Ledger, OfferKey, ACCOUNT_SHARDS};
use crate::screen::{screen, Effects, Refusal};
use crate::state_hash::Touched;
use crate::transaction::{AccountId, AssetId, SignedTransaction, SIGNED_TRANSACTION_BYTES_MAX};

/// The first byte of a block's encoding.
pub const BLOCK_VERSION: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub height: u64,
    /// The state hash after the previous block.
    pub previous: [u8; 32],
    pub transactions: Vec<SignedTransaction>,
    pub clearing: Clearing,
}

/// Why a replica refuses a block.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("block {got} where {expected} comes next")]
    Height { expected: u64, got: u64 },
    #[error("the block does not follow this state (previous state hash differs)")]
    Previous,
    #[error("{count} transactions; a block holds at most {max}")]
    TooManyTransactions { count: usize, max: usize },
    #[error("transaction {index}: the signature does not verify")]
    Signature { index: usize },
    #[error("transaction {index}: {refusal}")]
    Refused { index: usize, refusal: Refusal },
    #[error("the clearing: {0}")]
    Clearing(#[from] ClearingViolation),
}

/// What executing a block did, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Executed {
    pub transactions: usize,
    pub offers_traded: usize,
    /// Per asset: sold to the auctioneer, paid out by it.
    pub sold: Vec<u128>,
    pub paid: Vec<u128>,
}

impl Block {
    /// Version, height, previous, transaction count (`u32`) and transactions, asset count (`u8`)
    /// and valuations (`u64` each), trade count (`u32`) and trades (sell, buy `u16`, amount).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(BLOCK_VERSION);
        put_u64(out, self.height);
        out.extend_from_slice(&self.previous);
        out.extend_from_slice(&(self.transactions.len() as u32).to_le_bytes());
        self.transactions.iter().for_each(|t| t.encode_to(out));
        out.push(self.clearing.prices.len() as u8);
        self.clearing.prices.iter().for_each(|p| put_u64(out, p.0));
        out.extend_from_slice(&(self.clearing.trades.len() as u32).to_le_bytes());
        for trade in &self.clearing.trades {
            out.extend_from_slice(&trade.sell.to_le_bytes());
            out.extend_from_slice(&trade.buy.to_le_bytes());
            put_u64(out, trade.amount);
        }
    }

    /// A block of at most `transactions_max` transactions, counts checked before allocating.
    pub fn decode_from(reader: &mut Reader<'_>, transactions_max: usize) -> Result<Block, DecodeError> {
        reader.read_version("exchange block", BLOCK_VERSION)?;
        let height = reader.read_u64("height")?;
        let previous = reader.read_array("previous state hash")?;
        let count = reader.read_u32_count("transactions", transactions_max as u64, 1 + 8 + 8 + 1 + 18 + 64)?;
        let mut transactions = Vec::with_capacity(count);
        for _ in 0..count {
            transactions.push(SignedTransaction::decode_from(reader)?);
        }
        let prices = reader.read_u8_count("valuations", specie_clearing::ASSETS_MAX as u64, 8)?;
        let prices = (0..prices)
            .map(|_| reader.read_u64("valuation").map(Valuation))
            .collect::<Result<_, _>>()?;
        let pairs_max = (specie_clearing::ASSETS_MAX * (specie_clearing::ASSETS_MAX - 1)) as u64;
        let trades = reader.read_u32_count("trades", pairs_max, 12)?;
        let trades = (0..trades)
            .map(|_| {
                Ok(PairTrade {
                    sell: u16::from_le_bytes(reader.read_array("sold asset")?),
                    buy: u16::from_le_bytes(reader.read_array("bought asset")?),
                    amount: reader.read_u64("amount")?,
                })
            })
            .collect::<Result<_, DecodeError>>()?;
        Ok(Block {
            height,
            previous,
            transactions,
            clearing: Clearing { prices, trades },
        })
    }

    /// The largest encoding of a block of `transactions_max` transactions.
    pub fn encoded_bytes_max(transactions_max: usize) -> usize {
        let assets = specie_clearing::ASSETS_MAX;
        1 + 8 + 32 + 4 + transactions_max * SIGNED_TRANSACTION_BYTES_MAX + 1 + assets * 8 + 4 + assets * assets * 12
    }
}

/// Signatures checked by one batch equation: enough to halve the cost per signature, few enough
/// that a block's batches spread over every core.
pub const SIGNATURE_BATCH: usize = 64;

/// Whether each transaction's signature verifies under its account's key: a transaction of an
/// unknown account is left to the screen (true); an account whose key is not one
/// (`specie_ed25519::check_public_key`) signs nothing (false).
///
/// The rule is Ed25519's cofactored equation (`specie_ed25519::verify_cofactored`), checked for
/// [`SIGNATURE_BATCH`] transactions at a time by one batch equation (`ed25519_dalek::verify_batch`)
/// and, only for a batch that fails it, signature by signature to find which: the verdicts are
/// those of checking every signature alone, whatever the batches (but for a chance of 2^-128 per
/// failing batch), and the same on every replica and thread count. Batches run in parallel.
pub fn signatures_valid(ledger: &Ledger, transactions: &[SignedTransaction]) -> Vec<bool> {
    let exchange = ledger.config.exchange;
    transactions
        .par_chunks(SIGNATURE_BATCH)
        .flat_map_iter(|batch| batch_verdicts(ledger, &exchange, batch))
        .collect()
}

/// One batch's verdicts, in order.
fn batch_verdicts(ledger: &Ledger, exchange: &[u8; 32], batch: &[SignedTransaction]) -> Vec<bool> {
    // Per transaction: its account's key, if the account exists (`Some(None)`: not a key).
    let keys: Vec<Option<Option<&VerifyingKey>>> = batch
        .iter()
        .map(|signed| ledger.account(signed.transaction.account).map(|a| a.verifying.as_ref()))
        .collect();
    let mut verdicts: Vec<bool> = keys.iter().map(|key| !matches!(key, Some(None))).collect();
    let checked: Vec<(usize, &VerifyingKey)> = keys
        .iter()
        .enumerate()
        .filter_map(|(index, key)| Some((index, (*key)??)))
        .collect();
    let messages: Vec<Vec<u8>> = checked
        .iter()
        .map(|(index, _)| batch[*index].transaction.signing_bytes(exchange))
        .collect();
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let signatures: Vec<Signature> = checked
        .iter()
        .map(|(index, _)| Signature::from_bytes(&batch[*index].signature))
        .collect();
    let verifying: Vec<VerifyingKey> = checked.iter().map(|(_, key)| **key).collect();
    if checked.is_empty() || ed25519_dalek::verify_batch(&slices, &signatures, &verifying).is_ok() {
        return verdicts;
    }
    for ((index, key), message) in checked.iter().zip(&messages) {
        verdicts[*index] = specie_ed25519::verify_cofactored(key, message, &batch[*index].signature);
    }
    verdicts
}

impl Ledger {
    /// Assembles the next block from `candidates`, changing nothing: those whose signature
    /// verifies and that pass the screen (the refused ones are returned with their refusal, for
    /// their senders), cleared once at the prices the clearing computes for the books the block
    /// leaves, with how that clearing went. Apply it with [`Ledger::apply`] like any replica.
    pub fn assemble(
        &self,
        candidates: Vec<SignedTransaction>,
    ) -> (Block, Vec<(SignedTransaction, Refusal)>, specie_clearing::ComputeReport) {
        let max = self.config.block_transactions_max;
        let valid = signatures_valid(self, &candidates);
        let mut refused = Vec::new();
        let mut signed = Vec::with_capacity(candidates.len().min(max));
        for (transaction, ok) in candidates.into_iter().zip(valid) {
            match (ok, signed.len() < max) {
                (true, true) => signed.push(transaction),
                (false, _) => refused.push((transaction, Refusal::Signature)),
                (true, false) => refused.push((transaction, Refusal::BlockFull)),
            }
        }
        let (verdicts, effects) = screen(self, &signed);
        let mut transactions = Vec::with_capacity(signed.len());
        for (transaction, verdict) in signed.into_iter().zip(verdicts) {
            match verdict {
                None => transactions.push(transaction),
                Some(refusal) => refused.push((transaction, refusal)),
            }
        }
        let supply = self.supply_after(&effects);
        let (assets, params) = (self.config.assets, &self.config.clearing);
        let (clearing, report) =
            specie_clearing::compute_with_report_from(assets, &supply, params, &self.previous_prices.0);
        let checked = specie_clearing::check(self.config.assets, &supply, &self.config.clearing, &clearing);
        assert_eq!(checked, Ok(()), "the clearing's own result passes its check");
        let block = Block {
            height: self.height + 1,
            previous: self.state_hash,
            transactions,
            clearing,
        };
        (block, refused, report)
    }

    /// [`Ledger::assemble`] then [`Ledger::apply`]: what a lone proposer does.
    pub fn propose(&mut self, candidates: Vec<SignedTransaction>) -> (Block, Executed) {
        let (block, _, _) = self.assemble(candidates);
        let executed = self.apply(&block).expect("an assembled block applies");
        (block, executed)
    }

    /// Checks `block` and applies it; on an error the state is unchanged.
    pub fn apply(&mut self, block: &Block) -> Result<Executed, BlockError> {
        if block.height != self.height + 1 {
            return Err(BlockError::Height {
                expected: self.height + 1,
                got: block.height,
            });
        }
        if block.previous != self.state_hash {
            return Err(BlockError::Previous);
        }
        let max = self.config.block_transactions_max;
        if block.transactions.len() > max {
            return Err(BlockError::TooManyTransactions {
                count: block.transactions.len(),
                max,
            });
        }
        if let Some(index) = signatures_valid(self, &block.transactions).iter().position(|ok| !ok) {
            return Err(BlockError::Signature { index });
        }
        let (verdicts, effects) = screen(self, &block.transactions);
        if let Some((index, refusal)) = verdicts.iter().enumerate().find_map(|(i, v)| v.map(|r| (i, r))) {
            return Err(BlockError::Refused { index, refusal });
        }
        let supply = self.supply_after(&effects);
        specie_clearing::check(self.config.assets, &supply, &self.config.clearing, &block.clearing)?;
        let touched = self.apply_effects(effects);
        Ok(self.execute(&block.clearing, block.transactions.len(), touched))
    }

    /// The books' supply as it will be once `effects` are applied, without applying them.
    fn supply_after(&self, effects: &Effects) -> Vec<specie_clearing::PairSupply> {
        let mut books = self.books.clone();
        for (pair, key) in &effects.cancels {
            books.get_mut(pair).and_then(|book| book.remove(key));
        }
        for (pair, key, amount) in &effects.offers {
            books.entry(*pair).or_default().insert(*key, *amount);
        }
        crate::ledger::supply_of(&books)
    }

    /// Step 1: the effects, account shard by shard and book by book, in parallel. Returns what
    /// they touched.
    fn apply_effects(&mut self, effects: Effects) -> Touched {
        let mut touched = Touched {
            accounts: effects.debits.keys().copied().collect(),
            books: !effects.cancels.is_empty() || !effects.offers.is_empty(),
            withdrawals: !effects.withdrawals.is_empty(),
            credited: false,
        };
        touched
            .accounts
            .extend(effects.credits.iter().map(|(account, ..)| *account));
        touched
            .accounts
            .extend(effects.new_accounts.iter().map(|(account, _)| *account));
        let mut per_shard: Vec<ShardWork> = (0..ACCOUNT_SHARDS).map(|_| ShardWork::default()).collect();
        for (account, (debits, sequence)) in effects.debits {
            per_shard[shard_of(account)].debits.push((account, debits, sequence));
        }
        for (account, asset, amount) in effects.credits {
            per_shard[shard_of(account)].credits.push((account, asset, amount));
        }
        for (account, key) in effects.new_accounts {
            per_shard[shard_of(account)].new_accounts.push((account, key));
        }
        let assets = self.config.assets;
        self.shards
            .par_iter_mut()
            .zip(per_shard)
            .for_each(|(shard, work)| work.apply(shard, assets));
        let mut per_pair: BTreeMap<(AssetId, AssetId), BookWork> = BTreeMap::new();
        for (pair, key) in effects.cancels {
            per_pair.entry(pair).or_default().cancels.push(key);
        }
        for (pair, key, amount) in effects.offers {
            per_pair.entry(pair).or_default().offers.push((key, amount));
            self.books.entry(pair).or_default();
        }
        self.books.par_iter_mut().for_each(|(pair, book)| {
            if let Some(work) = per_pair.get(pair) {
                work.cancels.iter().for_each(|key| {
                    book.remove(key).expect("a screened cancel names a resting offer");
                });
                work.offers.iter().for_each(|(key, amount)| {
                    assert!(book.insert(*key, *amount).is_none(), "an offer key is used once");
                });
            }
        });
        self.books.retain(|_, book| !book.is_empty());
        for withdrawal in effects.withdrawals {
            self.totals[usize::from(withdrawal.asset)].withdrawn += u128::from(withdrawal.amount);
            let id = (withdrawal.account, withdrawal.sequence);
            assert!(
                self.withdrawals.insert(id, withdrawal).is_none(),
                "a sequence is used once"
            );
        }
        touched
    }

    /// Steps 3 and the end of the block: trades executed pair by pair in parallel, sellers paid
    /// shard by shard, the auctioneer's surplus burned, the height and state hash moved on (what
    /// the block touched rehashed).
    fn execute(&mut self, clearing: &Clearing, transactions: usize, mut touched: Touched) -> Executed {
        let prices: Vec<u64> = clearing.prices.iter().map(|p| p.0).collect();
        let fee_bits = self.config.clearing.fee_bits;
        let trades: BTreeMap<(AssetId, AssetId), u64> =
            clearing.trades.iter().map(|t| ((t.sell, t.buy), t.amount)).collect();
        let sold_per_pair: Vec<PairExecution> = self
            .books
            .par_iter_mut()
            .filter_map(|(pair, book)| {
                let amount = *trades.get(pair)?;
                Some(execute_pair(*pair, book, amount, &prices, fee_bits))
            })
            .collect();
        self.books.retain(|_, book| !book.is_empty());
        let assets = self.config.assets;
        let mut executed = Executed {
            transactions,
            offers_traded: 0,
            sold: vec![0; assets],
            paid: vec![0; assets],
        };
        let mut per_shard: Vec<ShardWork> = (0..ACCOUNT_SHARDS).map(|_| ShardWork::default()).collect();
        touched.books |= !sold_per_pair.is_empty();
        for pair in sold_per_pair {
            touched
                .accounts
                .extend(pair.payouts.iter().map(|(account, _)| *account));
            executed.offers_traded += pair.payouts.len();
            executed.sold[usize::from(pair.sell)] += u128::from(pair.sold);
            for (account, payout) in pair.payouts {
                executed.paid[usize::from(pair.buy)] += u128::from(payout);
                per_shard[shard_of(account)].credits.push((account, pair.buy, payout));
            }
        }
        self.shards
            .par_iter_mut()
            .zip(per_shard)
            .for_each(|(shard, work)| work.apply(shard, assets));
        for asset in 0..assets {
            let kept = executed.sold[asset]
                .checked_sub(executed.paid[asset])
                .expect("a checked clearing never pays out more than it takes in");
            self.totals[asset].burned += kept;
        }
        self.height += 1;
        self.previous_prices = crate::ledger::PreviousPrices(clearing.prices.clone());
        self.rehash(touched);
        executed
    }
}

/// One pair's execution: what was sold and who is paid.
struct PairExecution {
    sell: AssetId,
    buy: AssetId,
    sold: u64,
    payouts: Vec<(AccountId, u64)>,
}

/// Sells `amount` of the pair's offers, cheapest first.
fn execute_pair(
    pair: (AssetId, AssetId),
    book: &mut BTreeMap<OfferKey, u64>,
    amount: u64,
    prices: &[u64],
    fee_bits: u8,
) -> PairExecution {
    let (sell, buy) = pair;
    let (p_sell, p_buy) = (
        u128::from(prices[usize::from(sell)]),
        u128::from(prices[usize::from(buy)]),
    );
    let mut left = amount;
    let mut payouts = Vec::new();
    let mut emptied = Vec::new();
    for (key, offered) in book.iter_mut() {
        if left == 0 {
            break;
        }
        // Checked: the amount is within what offers at or below the rate hold.
        assert!(
            u128::from(key.limit.0) * p_buy <= p_sell << 32,
            "an offer above the rate is never sold"
        );
        let sold = left.min(*offered);
        left -= sold;
        *offered -= sold;
        if *offered == 0 {
            emptied.push(*key);
        }
        // The clearing's own payout: what `check` bounded, so the auctioneer never pays more.
        let paid = specie_clearing::payout(sold, p_sell as u64, p_buy as u64, fee_bits)
            .and_then(|paid| u64::try_from(paid).ok())
            .expect("a checked clearing's payouts fit a u64");
        payouts.push((key.account, paid));
    }
    assert_eq!(left, 0, "a checked trade is within the book");
    emptied.iter().for_each(|key| {
        book.remove(key);
    });
    PairExecution {
        sell,
        buy,
        sold: amount,
        payouts,
    }
}

/// One account shard's part of a block.
#[derive(Default)]
struct ShardWork {
    debits: Vec<(AccountId, Vec<u64>, u64)>,
    credits: Vec<(AccountId, AssetId, u64)>,
    new_accounts: Vec<(AccountId, [u8; 32])>,
}

impl ShardWork {
    fn apply(self, shard: &mut BTreeMap<AccountId, crate::ledger::Account>, assets: usize) {
        for (account, debits, sequence) in self.debits {
            let state = shard.get_mut(&account).expect("a screened account exists");
            for (balance, debit) in state.balances.iter_mut().zip(debits) {
                *balance = balance.checked_sub(debit).expect("the screen leaves no overdraft");
            }
            state.last_sequence = state.last_sequence.max(sequence);
        }
        for (account, asset, amount) in self.credits {
            let state = shard.get_mut(&account).expect("credits go to existing accounts");
            let balance = &mut state.balances[usize::from(asset)];
            *balance = balance.checked_add(amount).expect("an asset's total fits a u64");
        }
        for (account, key) in self.new_accounts {
            let fresh = crate::ledger::Account::new(key, 0, vec![0; assets]);
            assert!(shard.insert(account, fresh).is_none(), "a screened new account is new");
        }
    }
}

#[derive(Default)]
struct BookWork {
    cancels: Vec<OfferKey>,
    offers: Vec<(OfferKey, u64)>,
}
