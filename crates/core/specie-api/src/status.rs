//! What the API reports about transactions and the node: a transaction's final status, the
//! completion that carries it to the caller.

use specie_coordinator::TxResult;
use specie_sentinel::ValidationError;
use specie_shard::Vote;
use specie_transaction::Txid;

/// The final status of one submitted transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxStatus {
    /// Durably applied: its inputs are gone from the UHS and its outputs are in it.
    Confirmed,
    /// Failed the sentinel's transaction-local checks; never reached the shards.
    Invalid(ValidationError),
    /// Valid, but the shards refused it (spent input, concurrent conflict, replayed mint).
    Rejected(Vote),
    /// Not accepted (queue full); nothing was applied; safe to resubmit.
    Busy,
    /// Accepted but abandoned before it was durable; nothing was applied.
    Dropped,
    /// Accepted, but this front end lost track of it (a coordinator failed over mid-flight): it
    /// may or may not be applied. Its outputs' presence in the UHS tells.
    Unknown,
}

impl TxStatus {
    /// Stable machine-readable name.
    pub fn code(&self) -> &'static str {
        match self {
            TxStatus::Confirmed => "confirmed",
            TxStatus::Invalid(error) => error.code(),
            TxStatus::Rejected(vote) => vote.code(),
            TxStatus::Busy => "busy",
            TxStatus::Dropped => "dropped",
            TxStatus::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Completion {
    /// The caller's own reference, echoed back.
    pub client_ref: u64,
    pub txid: Txid,
    pub status: TxStatus,
}

/// Where completions are delivered. Unbounded, so driver threads never block on a slow client;
/// the number outstanding is bounded by the coordinator's queue limit.
pub type CompletionSender = tokio::sync::mpsc::UnboundedSender<Completion>;

impl From<TxResult> for TxStatus {
    fn from(result: TxResult) -> TxStatus {
        match result {
            TxResult::Confirmed => TxStatus::Confirmed,
            TxResult::Rejected(vote) => TxStatus::Rejected(vote),
            TxResult::Dropped => TxStatus::Dropped,
            // The coordinator's queue was full (or it is stopping): nothing was applied.
            TxResult::Refused(_) => TxStatus::Busy,
        }
    }
}
