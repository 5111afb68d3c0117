//! What the API reports about transactions and the node: a transaction's final status, the
//! completion that carries it to the caller, and the node's summary.

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

#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeInfo {
    pub version: &'static str,
    pub hrp: String,
    /// The network's identity (16 bytes, hex): made when the node's data directory or the
    /// cluster was created, never changed. Wallets remember it and refuse another network's
    /// node. `None` for a cluster file from before it.
    pub network_id: Option<String>,
    pub shards: usize,
    pub issuers: Vec<String>,
    pub uhs_ids: u64,
    /// The auditors with jurisdiction (Ristretto keys, hex): every confidential transaction must
    /// give each of them its values.
    pub auditors: Vec<String>,
    /// The registration authority's key (its encoding, hex), if the node takes anonymous
    /// transactions: what wallets enrol with and spend proofs verify under.
    pub registration_authority: Option<String>,
    /// The owner auditors with jurisdiction (their encodings, hex): every anonymous transaction
    /// must give each of them every owner it names.
    pub owner_auditors: Vec<String>,
    /// The active auditors (x-only keys, hex): every private transaction must carry each one's
    /// co-signature, appended after its own witnesses.
    pub active_auditors: Vec<String>,
    /// The endorsers' group key (x-only, hex), if every transaction needs their threshold
    /// endorsement: what the ledger's endorsements verify under.
    pub endorsement_group_key: Option<String>,
    /// The offline authority's bridge key (Ed25519, hex) the core banks for, if any.
    pub offline_authority: Option<String>,
    /// The exchange's bridge key (Ed25519, hex) the core banks for, if any.
    pub exchange: Option<String>,
    /// How the core orders transactions: `2pc` (two-phase commit) or `atomizer` (blocks).
    pub shape: &'static str,
}

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
