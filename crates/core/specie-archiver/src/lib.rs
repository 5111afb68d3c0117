//! The ledger of record (the Fabric CBDC framework's system of record; Hamilton's archiver): every
//! transaction the online core confirms, as the payer signed it and with the endorsements the core
//! accepted, in blocks chained by hash. Replaying the blocks from genesis gives exactly the UHS the
//! shards hold, so the ledger and the shards check each other; a transaction's block and position
//! come with a Merkle proof against the block's header, so anyone can show it is in the ledger;
//! and each header commits to its block's txids in ascending order too, so anyone can show a
//! transaction is *not* in the ledger up to a height ([`DisputeProof`]).
//!
//! The 2PC core has no global order: its coordinators commit independently. The ledger makes one.
//! It takes confirmed transactions in any order and seals them into blocks in an order in which
//! every transaction's inputs exist before it spends them (the dependency order of the Fabric
//! framework's committer, Appendix A), so a replay never meets a spend of an unknown output.
//!
//! Pure: [`Archiver`] is the ledger as a role of the role contract (replicated by a cluster's
//! archiver group); [`LedgerOfRecord`] holds the chain's head, the replayed UHS and the index; blocks are
//! stored and served by whoever hosts it.

mod archiver;
mod block;
mod dispute;
mod ledger;
mod query;
mod reconcile;
mod record;
mod supply;

pub use archiver::{
    put_outcomes, read_outcomes, Archiver, ArchiverCommand, ArchiverConfig, ArchiverInput, ArchiverReply,
    ArchiverReport, ArchiverStateError, Verdicts,
};
pub use block::{
    sorted_txids, txid_leaf, Block, BlockError, BlockHeader, BlockLimits, BLOCK_DOMAIN, RECORDS_DOMAIN, TXIDS_DOMAIN,
};
pub use dispute::{BlockAbsence, DisputeError, DisputeLimits, DisputeProof, Finding, SortedTxids, TxidLeaf, Verdict};
pub use ledger::{LedgerLimits, LedgerOfRecord, Located, Offered};
pub use query::{LedgerEntry, LedgerHead, LedgerRead, LedgerReply, LedgerReplyLimits, SupplyCut, FAILURE_BYTES_MAX};
pub use reconcile::{committed, created_ids};
pub use record::{Record, RecordError, RecordLimits};
pub use supply::{CounterpartyFlow, Flow, Supply, COUNTERPARTIES_MAX};
