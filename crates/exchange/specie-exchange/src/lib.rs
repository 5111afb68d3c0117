//! SPEEDEX (seed 004, NSDI'23) as specie's exchange between the currencies its issuers mint: a
//! pure state machine over accounts holding many assets and resting sell offers, advanced one
//! block at a time. A block's transactions commute ([`screen`]), its offers all trade at one
//! valuation per asset computed once by the block's proposer and checked by every replica with
//! exact integer arithmetic (`specie-clearing`), and executing it gives the same state hash
//! whatever the order of its transactions or the number of threads ([`block`], [`state_hash`]).
//!
//! - [`transaction`]: what a trader signs: create an account, offer, cancel, pay; one canonical
//!   encoding each, bounded decoders.
//! - [`ledger`]: accounts in shards, one book per ordered pair, per-asset totals, the audit.
//! - [`screen`]: which transactions a block may hold, order-independently.
//! - [`block`]: blocks, proposing, checking and executing them.
//! - [`bridge`]: deposits from and payouts to the online cores, one per asset.
//! - [`state_hash`]: the Merkle state hash and account proofs.
//! - [`role`]: the exchange behind the shared role contract: blocks as its durable commands.

pub mod block;
pub mod bridge;
pub mod ledger;
pub mod role;
pub mod screen;
pub mod state_hash;
pub mod transaction;

pub use block::{Block, BlockError, Executed, BLOCK_VERSION};
pub use bridge::{refund_id, Credit, REFUND_SEQUENCE_BIT};
pub use ledger::{
    deposit_commitment, Account, AssetHoldings, AssetTotals, Deposit, DepositRefusal, ExchangeConfig, Ledger,
    LedgerError, OfferKey, Pair, ACCOUNT_SHARDS, ASSET_TOTAL_MAX,
};
pub use role::{
    Cleared, ExchangeCommand, ExchangeInput, ExchangeReply, ExchangeReport, ExchangeRole, ExchangeStateError, Fate,
    RoleLimits,
};
pub use screen::{Effects, Refusal, Withdrawal};
pub use specie_clearing::{payout, Clearing, ClearingParams, LimitPrice, PairTrade, Valuation, ASSETS_MAX};
pub use state_hash::AccountProof;
pub use transaction::{
    AccountId, AssetId, Operation, SignedTransaction, Transaction, SIGNED_TRANSACTION_BYTES_MAX, TRANSACTION_VERSION,
};
