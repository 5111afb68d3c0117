//! Hamilton's atomizer shape (NSDI'23 §5), the second deployment shape of the online core
//! beside two-phase commit, as pure roles behind the role contract ([`specie_role::Role`]).
//!
//! - The [`Atomizer`] orders compact transactions into blocks: one global order, which is what
//!   an operator chooses this shape for. It asks the shards that own a transaction's ids to
//!   attest them, checks each attestation against the blocks made since (its spent-and-created
//!   cache of the last `window_blocks` blocks, Hamilton's STXO cache), and seals the transactions
//!   whose attestations hold into the next block. A block is durable before anyone hears of it.
//! - Each [`UhsShard`] holds its part of the UHS and a height: it attests at its height and
//!   applies the atomizer's blocks strictly in order, each durable before it is acknowledged.
//!
//! Hamilton's sentinels send a transaction to the shards, which forward their attestations to
//! the atomizer. Here the atomizer asks the shards itself, in one batched request per shard per
//! round, so that a transaction's caller, its attestations and its block meet in one role; the
//! check the atomizer makes is Hamilton's. A transaction's outcome is Hamilton's watchtower
//! answer, sent straight to the caller: a refusal at once, a confirmation once its block is
//! durable and every shard has applied it (so that, as with two-phase commit, a transaction
//! reported confirmed is visible to every read of the UHS).
//!
//! Safety rests on one rule: an id a shard attests at height `h` is unspent at the atomizer's
//! height `H` exactly when no block in `(h, H]` spent it, and absent exactly when none created
//! it; the cache covers `(H − window_blocks, H]`, so an attestation older than that is asked
//! again. The atomizer never seals a block while a shard lags by half the window, so every block
//! a shard may still need is in the window to be sent again.

mod atomizer;
mod block;
mod shard;

pub use atomizer::{Atomizer, AtomizerConfig, AtomizerInput, AtomizerReport, AtomizerStateError};
pub use block::{AtomizerBlock, AtomizerLimits, AtomizerState, ShardBlock};
pub use shard::{
    attested_ids_digest, AttestRequest, ShardAnswer, ShardMessage, ShardMessageLimits, UhsShard, UhsShardInput,
    UhsShardReply, UhsShardReport, UhsShardStateError,
};
