//! The core's HTTP/JSON API as types (`docs/api.md`): every path, and every request and answer
//! body, shared by the server ([`crate::api::router`], [`crate::cosign_api::router`]) and the
//! client (`specie_wallet::NodeClient`) so the two cannot drift. Ids, keys and transactions are
//! lowercase hex; errors are the one error body of `specie_service`.
//!
//! | endpoint | request | answer |
//! |---|---|---|
//! | `GET /v1/info` | | [`NodeInfo`] |
//! | `POST /v1/transactions` | [`SubmitRequest`] | [`SubmitBody`], each transaction final or timed out |
//! | `GET /v1/transactions/{txid}` | | [`SubmitResultBody`]: the watchtower's recent outcome |
//! | `POST /v1/uhs/query` | [`QueryRequest`] | [`PresentBody`] |
//! | `GET /v1/uhs/{id}` | | [`UhsIdBody`] |
//! | `GET /v1/uhs/digest` | | [`DigestBody`] |
//! | `GET /v1/ledger` | | [`LedgerHeadBody`] |
//! | `GET /v1/ledger/blocks/{height}` | | [`BlockBody`] |
//! | `GET /v1/ledger/transactions/{txid}` | | [`LedgerEntryBody`] |
//! | `GET /v1/ledger/disputes/{txid}?height=H` | | [`DisputeBody`] |
//! | `GET /v1/supply` | | [`SupplyBody`]: the supply at the ledger's head |
//!
//! An active auditor's co-signing service (`specie audit serve`) answers `GET /v1/info` with
//! [`CosignInfoBody`] and `POST /v1/cosign` ([`CosignRequest`]) with [`CosignBody`].

use serde::{Deserialize, Serialize};

pub const INFO_PATH: &str = "/v1/info";
/// `POST` submits; followed by `/{txid}`, the watchtower's outcome.
pub const TRANSACTIONS_PATH: &str = "/v1/transactions";
pub const UHS_QUERY_PATH: &str = "/v1/uhs/query";
pub const UHS_DIGEST_PATH: &str = "/v1/uhs/digest";
/// Followed by `/{id}`.
pub const UHS_PATH: &str = "/v1/uhs";
pub const LEDGER_PATH: &str = "/v1/ledger";
/// Followed by `/{height}`.
pub const LEDGER_BLOCKS_PATH: &str = "/v1/ledger/blocks";
/// Followed by `/{txid}`.
pub const LEDGER_TRANSACTIONS_PATH: &str = "/v1/ledger/transactions";
/// Followed by `/{txid}`, and `?height=H` for a height other than the head.
pub const LEDGER_DISPUTES_PATH: &str = "/v1/ledger/disputes";
/// The supply at the ledger of record's head (`crate::supply`).
pub const SUPPLY_PATH: &str = "/v1/supply";
/// The active auditor's service: `POST` a transaction to co-sign.
pub const COSIGN_PATH: &str = "/v1/cosign";
/// A certifier's `POST` (`specie certifier serve`).
pub const CERTIFY_PATH: &str = "/v1/certify";

/// `GET /v1/info`: the node and the network it belongs to. Fields a node of an older version
/// leaves out read as absent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeInfo {
    pub version: String,
    pub hrp: String,
    /// The network's identity (16 bytes, hex): made when the node's data directory or the
    /// cluster was created, never changed. Wallets remember it and refuse another network's
    /// node. `None` for a cluster file from before it.
    #[serde(default)]
    pub network_id: Option<String>,
    pub shards: u64,
    /// x-only public keys (hex) the node accepts mints and redeems from.
    pub issuers: Vec<String>,
    pub uhs_ids: u64,
    /// The auditors with jurisdiction (Ristretto keys, hex): every confidential transaction must
    /// give each of them its values.
    #[serde(default)]
    pub auditors: Vec<String>,
    /// The registration authority's key (its encoding, hex), if the node takes anonymous
    /// transactions: what wallets enrol with and spend proofs verify under.
    #[serde(default)]
    pub registration_authority: Option<String>,
    /// The registration authority's earlier keys (oldest first), which the ledger's earlier
    /// anonymous and unlinkable proofs verify under; none takes new transactions.
    #[serde(default)]
    pub former_registration_authorities: Vec<String>,
    /// The owner auditors with jurisdiction (their encodings, hex): every anonymous transaction
    /// must give each of them every owner it names.
    #[serde(default)]
    pub owner_auditors: Vec<String>,
    /// The active auditors (x-only keys, hex): every private transaction must carry each one's
    /// co-signature, appended after its own witnesses.
    #[serde(default)]
    pub active_auditors: Vec<String>,
    /// The endorsers' group key (x-only, hex), if every transaction needs their threshold
    /// endorsement: what the ledger's endorsements verify under.
    #[serde(default)]
    pub endorsement_group_key: Option<String>,
    /// The offline authority's bridge key (Ed25519, hex) the core banks for, if any.
    #[serde(default)]
    pub offline_authority: Option<String>,
    /// The exchange's bridge key (Ed25519, hex) the core banks for, if any.
    #[serde(default)]
    pub exchange: Option<String>,
    /// The unlinkable level's certifier group (its encoding, hex), if the node takes unlinkable
    /// transactions: what their certificates verify under.
    #[serde(default)]
    pub certifiers: Option<String>,
    /// How the core orders transactions: `2pc` (two-phase commit) or `atomizer` (blocks).
    #[serde(default)]
    pub shape: String,
}

/// `POST /v1/transactions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// Transactions (hex of each one's canonical encoding), at most 1000.
    pub transactions: Vec<String>,
    /// How long to wait for the transactions to become final (default 30 s, at most 120 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// The answer to [`SubmitRequest`]: one result per transaction, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubmitBody {
    pub results: Vec<SubmitResultBody>,
}

/// The fate of one transaction: `status` is `confirmed`, `invalid`, `rejected`, `malformed`,
/// `busy`, `dropped` or `pending`; every status but `confirmed` comes with a stable `code` and a
/// `message`, and `invalid` with the `index` of the input or output at fault, if one is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SubmitResultBody {
    /// Absent (null) when the node could not decode the transaction.
    pub txid: Option<String>,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `POST /v1/uhs/query`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// UHS ids (hex, 32 bytes each), at most 10,000.
    pub ids: Vec<String>,
}

/// The answer to [`QueryRequest`]: whether each id is in the UHS, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PresentBody {
    pub present: Vec<bool>,
}

/// `GET /v1/uhs/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UhsIdBody {
    pub id: String,
    pub present: bool,
}

/// `GET /v1/uhs/digest`: how many ids the UHS holds, and SHA-256 over them in ascending order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DigestBody {
    pub ids: u64,
    pub sha256_sorted: String,
}

/// A block's header, its fields and its canonical encoding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HeaderBody {
    pub height: u64,
    pub hash: String,
    pub previous: String,
    pub records: u32,
    pub records_root: String,
    pub txids_root: String,
    pub encoded: String,
}

/// `GET /v1/ledger`: the ledger of record's head, the UHS it leaves, and what waits for a block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LedgerHeadBody {
    pub height: u64,
    /// `None` before the first block.
    pub head: Option<HeaderBody>,
    pub uhs_ids: u64,
    pub uhs_sha256_sorted: String,
    /// Confirmed transactions waiting for a block.
    pub waiting: u64,
    pub undecided: u64,
}

/// `GET /v1/supply`: what the ledger of record's blocks, up to its head, did to the circulating
/// supply (`specie_archiver::Supply`), and whether its three tallies agree. Amounts are decimal
/// strings of the smallest unit (they may pass 2^64).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SupplyBody {
    /// The cut: the ledger's head, with the UHS its blocks replay to.
    pub ledger: LedgerHeadBody,
    /// Per issuer key: what it minted and redeemed.
    pub issuers: Vec<IssuerSupplyBody>,
    /// Σ minted − Σ redeemed.
    pub issued: String,
    /// Per mode the core funded (by its key's role and key): what left the core to it and what
    /// came back.
    pub modes: Vec<ModeFlowBody>,
    /// The value of the unspent transparent outputs.
    pub core_outputs: String,
    /// The value in confidential and anonymous notes, from their public inputs and outputs.
    pub hidden_notes: String,
    /// `issued` = `core_outputs` + `hidden_notes` + Σ modes' `held`, and none is negative.
    pub balanced: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IssuerSupplyBody {
    /// The issuer's x-only key (hex).
    pub key: String,
    pub minted: String,
    pub redeemed: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ModeFlowBody {
    /// What the key is: `bridge` (an offline authority's or an exchange's key),
    /// `fastpay_committee` (a FastPay committee's id).
    pub role: String,
    /// The key or id (hex).
    pub key: String,
    /// Value that left the core to the mode (its fundings).
    pub funded: String,
    /// Value that came back (its payouts, redeemed certificates).
    pub returned: String,
    /// `funded` − `returned`: what the mode should hold.
    pub held: String,
}

/// `GET /v1/ledger/blocks/{height}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BlockBody {
    pub header: HeaderBody,
    pub txids: Vec<String>,
    /// The block's canonical encoding (hex): what a client decodes and checks.
    pub encoded: String,
}

/// `GET /v1/ledger/transactions/{txid}`: where the transaction is, its record and the proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LedgerEntryBody {
    pub txid: String,
    pub height: u64,
    pub position: u32,
    pub header: HeaderBody,
    pub record: String,
    pub proof: String,
}

/// The query of `GET /v1/ledger/disputes/{txid}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DisputeQuery {
    pub height: Option<u64>,
}

/// The proof that a transaction is, or is not, in the ledger up to `height`, which anyone checks
/// with the headers alone, and the node's own reading of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DisputeBody {
    pub txid: String,
    pub height: u64,
    pub head: String,
    pub included: bool,
    pub block: Option<u64>,
    pub position: Option<u32>,
    /// The proof's canonical encoding (hex): what a client decodes and checks itself.
    pub proof: String,
}

/// The active auditor's `GET /v1/info`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CosignInfoBody {
    /// The key `specie node --active-auditor` takes (x-only, hex).
    pub cosigning_key: String,
}

/// `POST /v1/cosign`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CosignRequest {
    /// The transaction to co-sign (hex of its canonical encoding).
    pub transaction: String,
}

/// The answer to [`CosignRequest`]: the p2pk witness to append after the transaction's own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CosignBody {
    pub auditor: String,
    pub witness: String,
}

/// A certifier's `GET /v1/info`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CertifierInfoBody {
    /// Its place in the group (1-based), as its shares name it.
    pub certifier: u16,
    /// The group it belongs to (its encoding, hex): what `specie node --certifiers` takes.
    pub group: String,
}

/// `POST /v1/certify`: certify the token at output `index` of transaction `txid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CertifyRequest {
    /// The transaction that created the token (hex).
    pub txid: String,
    /// The token's output index in it.
    pub index: u64,
    /// The token (hex of its canonical encoding).
    pub token: String,
}

/// The answer to [`CertifyRequest`]: this certifier's blind share of the token's certificate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CertifyBody {
    pub certifier: u16,
    /// The share (hex of its canonical encoding).
    pub share: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shapes docs/api.md documents; a change here is a change of the API every wallet reads.
    #[test]
    fn bodies_have_their_documented_shapes() {
        let malformed = SubmitResultBody {
            txid: None,
            status: "malformed".into(),
            code: Some("decode_error".into()),
            index: None,
            message: Some("not a transaction".into()),
        };
        assert_eq!(
            serde_json::to_value(&malformed).unwrap(),
            json!({"txid": null, "status": "malformed", "code": "decode_error", "message": "not a transaction"})
        );
        // A node from before the privacy levels and bridges answers without their fields.
        let old = json!({"version": "0.1.0", "hrp": "spc", "shards": 4, "issuers": [], "uhs_ids": 9});
        let info: NodeInfo = serde_json::from_value(old).unwrap();
        assert_eq!(
            (info.network_id, info.auditors.len(), info.shape.as_str()),
            (None, 0, "")
        );
        // The server refuses what it does not know, so a misspelt field is not silently dropped.
        let misspelt = json!({"transactions": [], "timeout": 5});
        assert!(serde_json::from_value::<SubmitRequest>(misspelt).is_err());
    }
}
