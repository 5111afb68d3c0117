//! The node's HTTP/JSON API, as documented in `docs/api.md`.

use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use specie_archiver::{Block, BlockHeader, DisputeProof, LedgerEntry, LedgerHead, SupplyCut};
use specie_codec::Decode;
use specie_codec::Encode;
use specie_service::{ApiDoc, ApiError, Param};
use specie_transaction::{SpecieTransaction, Txid, UhsId};

use crate::http_api::{
    BlockBody, DigestBody, DisputeBody, DisputeQuery, HeaderBody, LedgerEntryBody, LedgerHeadBody, NodeInfo,
    PresentBody, QueryRequest, SubmitBody, SubmitRequest, SubmitResultBody, SupplyBody, UhsIdBody, INFO_PATH,
    LEDGER_BLOCKS_PATH, LEDGER_DISPUTES_PATH, LEDGER_PATH, LEDGER_TRANSACTIONS_PATH, SUPPLY_PATH, TRANSACTIONS_PATH,
    UHS_DIGEST_PATH, UHS_PATH, UHS_QUERY_PATH,
};
use crate::status::{CompletionSender, TxStatus};

pub const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
pub const SUBMIT_TRANSACTIONS_MAX: usize = 1000;
pub const QUERY_IDS_MAX: usize = 10_000;
pub const TIMEOUT_MS_DEFAULT: u64 = 30_000;
pub const TIMEOUT_MS_MAX: u64 = 120_000;

/// Why a backend could not answer a read.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The node or sentinel is shutting down.
    #[error("the node is stopping")]
    Stopping,
    /// A role behind the backend did not answer, or answered something it should not have.
    #[error("{role} did not answer: {reason}")]
    Unavailable { role: String, reason: String },
    /// No leader took up the work in time (after a failover).
    #[error("no {role} leader within {timeout_ms} ms")]
    NoLeader { role: String, timeout_ms: u64 },
    /// This backend keeps no ledger of record.
    #[error("this node keeps no ledger of record")]
    NoLedger,
}

/// What the API needs from whatever stands behind it: an embedded node, or a sentinel in front
/// of a cluster. Calls may block; the API runs them off its async workers.
pub trait Backend: Clone + Send + Sync + 'static {
    /// Validates and submits; exactly one completion per transaction arrives on `reply`.
    fn submit(&self, txs: Vec<(u64, SpecieTransaction)>, reply: &CompletionSender);
    fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, BackendError>;
    fn info(&self) -> Result<NodeInfo, BackendError>;
    /// SHA-256 over every UHS id in ascending order, and their count.
    fn uhs_digest(&self) -> Result<(u64, [u8; 32]), BackendError>;
    /// Returns once whatever accepts transactions is leading and has taken up the work its
    /// predecessors left in flight (after a failover). An embedded node has no failover.
    fn wait_for_leaders(&self, _timeout: std::time::Duration) -> Result<(), BackendError> {
        Ok(())
    }
    /// The ledger of record's head, if this backend keeps one.
    fn ledger_head(&self) -> Result<LedgerHead, BackendError> {
        Err(BackendError::NoLedger)
    }
    /// The supply at the ledger of record's head, if this backend keeps one.
    fn ledger_supply(&self) -> Result<SupplyCut, BackendError> {
        Err(BackendError::NoLedger)
    }
    /// Block `height` of the ledger of record; `None` past the head.
    fn ledger_block(&self, _height: u64) -> Result<Option<Block>, BackendError> {
        Err(BackendError::NoLedger)
    }
    /// Where `txid` is in the ledger of record, with the proof; `None` if it is in no block.
    /// The watchtower's outcome of `txid`, if this backend decided it recently.
    fn transaction_status(&self, _txid: Txid) -> Result<Option<TxStatus>, BackendError> {
        Ok(None)
    }
    /// The proof that `txid` is, or is not, in the ledger of record up to `height` (the head if
    /// `None`); `None` if the height is beyond the head.
    fn ledger_dispute(&self, _txid: Txid, _height: Option<u64>) -> Result<Option<DisputeProof>, BackendError> {
        Err(BackendError::NoLedger)
    }
    fn ledger_transaction(&self, _txid: Txid) -> Result<Option<LedgerEntry>, BackendError> {
        Err(BackendError::NoLedger)
    }
}

pub fn router<B: Backend>(node: B) -> Router {
    Router::new()
        .route(INFO_PATH, get(info::<B>))
        .route(TRANSACTIONS_PATH, post(submit::<B>))
        .route(UHS_QUERY_PATH, post(query::<B>))
        .route(UHS_DIGEST_PATH, get(digest::<B>))
        .route(&format!("{UHS_PATH}/{{id}}"), get(query_one::<B>))
        .route(LEDGER_PATH, get(ledger_head::<B>))
        .route(SUPPLY_PATH, get(supply::<B>))
        .route(&format!("{LEDGER_BLOCKS_PATH}/{{height}}"), get(ledger_block::<B>))
        .route(
            &format!("{LEDGER_TRANSACTIONS_PATH}/{{txid}}"),
            get(ledger_transaction::<B>),
        )
        .route(&format!("{LEDGER_DISPUTES_PATH}/{{txid}}"), get(ledger_dispute::<B>))
        .route(&format!("{TRANSACTIONS_PATH}/{{txid}}"), get(transaction_status::<B>))
        .merge(openapi().router())
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint; see docs/api.md") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "wrong HTTP method for this endpoint; see docs/api.md",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(node)
}

/// The node's API (and a sentinel's) as an OpenAPI document: what `GET /openapi.json` serves.
pub fn openapi() -> ApiDoc {
    let id = |path: &str, name: &str| format!("{path}/{{{name}}}");
    ApiDoc::new(
        "specie node",
        "The online core's API, served by an embedded node and by a cluster's sentinels (docs/api.md).",
    )
    .path_parameter("txid", Param::Hex32)
    .path_parameter("id", Param::Hex32)
    .path_parameter("height", Param::Number)
    .get::<NodeInfo>(INFO_PATH, "The node: its version, shape, keys and limits")
    .post::<SubmitRequest, SubmitBody>(
        TRANSACTIONS_PATH,
        "Submit transactions; each answers final or timed out",
    )
    .get::<SubmitResultBody>(
        &id(TRANSACTIONS_PATH, "txid"),
        "The watchtower's recent outcome of a transaction",
    )
    .post::<QueryRequest, PresentBody>(UHS_QUERY_PATH, "Whether each UHS id is unspent")
    .get::<UhsIdBody>(&id(UHS_PATH, "id"), "Whether one UHS id is unspent")
    .get::<DigestBody>(UHS_DIGEST_PATH, "The UHS's size and SHA-256 over its sorted ids")
    .get::<LedgerHeadBody>(LEDGER_PATH, "The ledger of record's head")
    .get::<SupplyBody>(
        SUPPLY_PATH,
        "The supply at the ledger's head (docs/operator-guide.md, \"The supply report\")",
    )
    .get::<BlockBody>(&id(LEDGER_BLOCKS_PATH, "height"), "A block of the ledger of record")
    .get::<LedgerEntryBody>(
        &id(LEDGER_TRANSACTIONS_PATH, "txid"),
        "A transaction's place in the ledger, with its proof",
    )
    .get_with_query::<DisputeBody>(
        &id(LEDGER_DISPUTES_PATH, "txid"),
        "The proof that a transaction is, or is not, in the ledger up to a height",
        &[("height", "the height (default: the head)")],
    )
}

/// A request body that is not the JSON asked for: too large, or not parsed.
pub(crate) fn json_rejection(rejection: JsonRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("request body exceeds {BODY_BYTES_MAX} bytes"),
        );
    }
    ApiError::new(StatusCode::BAD_REQUEST, "bad_json", rejection.body_text())
}

fn stopping() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the node is stopping")
}

/// Runs a blocking backend call off the async workers.
async fn on_node<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, BackendError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(call)
        .await
        .map_err(|_| stopping())?
        .map_err(|error| match error {
            BackendError::Stopping => stopping(),
            BackendError::NoLedger => ApiError::new(StatusCode::NOT_FOUND, "no_ledger_of_record", error.to_string()),
            other => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", other.to_string()),
        })
}

async fn info<B: Backend>(State(node): State<B>) -> Result<Json<NodeInfo>, ApiError> {
    let mut info = on_node(move || node.info()).await?;
    // docs/api.md: keys are lowercase hex in responses too, whatever case a cluster file used.
    info.issuers.iter_mut().for_each(|key| key.make_ascii_lowercase());
    Ok(Json(info))
}

impl SubmitResultBody {
    fn from_status(txid: String, status: &TxStatus) -> Self {
        let (name, message, index) = match status {
            TxStatus::Confirmed => ("confirmed", None, None),
            TxStatus::Invalid(error) => ("invalid", Some(error.to_string()), error.index()),
            TxStatus::Rejected(vote) => (
                "rejected",
                Some(format!("the shards refused it: {}", vote.code().replace('_', " "))),
                None,
            ),
            TxStatus::Busy => (
                "busy",
                Some("the node is overloaded; nothing was applied; retry later".to_string()),
                None,
            ),
            TxStatus::Dropped => (
                "dropped",
                Some("abandoned before it was durable; nothing was applied; retry".to_string()),
                None,
            ),
            TxStatus::Unknown => (
                "pending",
                Some("its fate is not known here; query its outputs with /v1/uhs/query".to_string()),
                None,
            ),
        };
        let code = (!matches!(status, TxStatus::Confirmed)).then(|| status.code().to_string());
        SubmitResultBody {
            txid: Some(txid),
            status: name.to_string(),
            code,
            index,
            message,
        }
    }
}

async fn submit<B: Backend>(
    State(node): State<B>,
    body: Result<Json<SubmitRequest>, JsonRejection>,
) -> Result<Json<SubmitBody>, ApiError> {
    let arrived = std::time::Instant::now();
    let Json(request) = body.map_err(json_rejection)?;
    if request.transactions.len() > SUBMIT_TRANSACTIONS_MAX {
        let message = format!(
            "{} transactions in one request; the limit is {SUBMIT_TRANSACTIONS_MAX}",
            request.transactions.len()
        );
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "too_many", message));
    }
    let timeout_ms = request.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT).min(TIMEOUT_MS_MAX);
    // Every transaction must be hex before any is submitted: a request with one that is not is
    // refused whole (400), so a client's encoding bug cannot submit half of a batch.
    let bytes = request
        .transactions
        .iter()
        .enumerate()
        .map(|(i, text)| decode_hex(text, &format!("transactions[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut results: Vec<Option<SubmitResultBody>> = vec![None; request.transactions.len()];
    let mut decoded = vec![];
    for (position, bytes) in bytes.iter().enumerate() {
        match SpecieTransaction::decode_exact(bytes) {
            Ok(tx) => decoded.push((position as u64, tx)),
            Err(e) => {
                results[position] = Some(SubmitResultBody {
                    txid: None,
                    status: "malformed".into(),
                    code: Some("decode_error".into()),
                    index: None,
                    message: Some(format!("transactions[{position}] is hex but not a transaction: {e}")),
                })
            }
        }
    }
    let txids: Vec<(usize, String)> = decoded
        .iter()
        .map(|(p, tx)| (*p as usize, hex::encode(tx.txid().0)))
        .collect();
    let expected = decoded.len();
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel();
    let submitter = node.clone();
    tokio::task::spawn_blocking(move || submitter.submit(decoded, &reply))
        .await
        .map_err(|_| stopping())?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
    let mut received = 0;
    while received < expected {
        match tokio::time::timeout_at(deadline, completions.recv()).await {
            Ok(Some(completion)) => {
                let position = completion.client_ref as usize;
                results[position] = Some(SubmitResultBody::from_status(
                    hex::encode(completion.txid.0),
                    &completion.status,
                ));
                received += 1;
            }
            Ok(None) => return Err(stopping()),
            Err(_) => break,
        }
    }
    for (position, txid) in txids {
        if results[position].is_none() {
            let message = format!("not final after {timeout_ms} ms; query its outputs with /v1/uhs/query");
            results[position] = Some(SubmitResultBody {
                txid: Some(txid),
                status: "pending".into(),
                code: Some("timeout".into()),
                index: None,
                message: Some(message),
            });
        }
    }
    let results: Vec<SubmitResultBody> = results
        .into_iter()
        .map(|result| result.expect("every transaction has a result: malformed, final or pending"))
        .collect();
    count_outcomes(&results);
    for result in &results {
        if let Some(txid) = &result.txid {
            let code = result.code.as_deref().unwrap_or("");
            tracing::debug!(target: specie_transaction::TRANSACTION_LOG, txid = txid.as_str(), status = result.status.as_str(), code, "answered");
        }
    }
    specie_metrics::transactions::submission_answered(arrived.elapsed());
    Ok(Json(SubmitBody { results }))
}

/// `specie_transactions_finished_total`, by outcome and code, one increment per pair.
fn count_outcomes(results: &[SubmitResultBody]) {
    let mut counts: std::collections::BTreeMap<(&str, &str), u64> = std::collections::BTreeMap::new();
    for result in results {
        *counts
            .entry((&result.status, result.code.as_deref().unwrap_or("")))
            .or_default() += 1;
    }
    for ((outcome, code), count) in counts {
        specie_metrics::transactions::finished(outcome, code, count);
    }
}

/// Decodes `field` as docs/api.md defines hex: lowercase, two digits (`0`-`9`, `a`-`f`) a byte,
/// nothing else (no uppercase, no whitespace, no `0x`). Anything else is 400 `bad_hex`.
fn decode_hex(text: &str, field: &str) -> Result<Vec<u8>, ApiError> {
    let bad = |message: String| ApiError::new(StatusCode::BAD_REQUEST, "bad_hex", message);
    if let Some((at, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| !matches!(c, '0'..='9' | 'a'..='f'))
    {
        let what = match c {
            'A'..='F' => "an uppercase digit",
            c if c.is_whitespace() => "whitespace",
            _ => "a character that is not a hex digit",
        };
        return Err(bad(format!(
            "{field} is not lowercase hex: {what} ({c:?}) at character {at}; ids, keys and transactions are \
             lowercase hex, 0-9 and a-f only"
        )));
    }
    if text.len() % 2 == 1 {
        return Err(bad(format!(
            "{field} is not lowercase hex: an odd number of digits ({}); each byte is two",
            text.len()
        )));
    }
    hex::decode(text).map_err(|e| bad(format!("{field} is not lowercase hex: {e}")))
}

fn parse_id(text: &str, field: &str) -> Result<UhsId, ApiError> {
    let bytes = decode_hex(text, field)?;
    let array: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_hex",
            format!("{field} is {} bytes; a UHS id is 32 (64 hex digits)", b.len()),
        )
    })?;
    Ok(UhsId(array))
}

async fn query<B: Backend>(
    State(node): State<B>,
    body: Result<Json<QueryRequest>, JsonRejection>,
) -> Result<Json<PresentBody>, ApiError> {
    let Json(request) = body.map_err(json_rejection)?;
    if request.ids.len() > QUERY_IDS_MAX {
        let message = format!("{} ids in one query; the limit is {QUERY_IDS_MAX}", request.ids.len());
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "too_many", message));
    }
    let ids = request
        .ids
        .iter()
        .enumerate()
        .map(|(i, text)| parse_id(text, &format!("ids[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let present = on_node(move || node.query_uhs(&ids)).await?;
    Ok(Json(PresentBody { present }))
}

async fn query_one<B: Backend>(State(node): State<B>, Path(id): Path<String>) -> Result<Json<UhsIdBody>, ApiError> {
    let uhs_id = parse_id(&id, "the id in the path")?;
    let present = on_node(move || node.query_uhs(&[uhs_id])).await?;
    Ok(Json(UhsIdBody {
        id: hex::encode(uhs_id.0),
        present: present[0],
    }))
}

async fn digest<B: Backend>(State(node): State<B>) -> Result<Json<DigestBody>, ApiError> {
    let (ids, sha256) = on_node(move || node.uhs_digest()).await?;
    Ok(Json(DigestBody {
        ids,
        sha256_sorted: hex::encode(sha256),
    }))
}

fn header_body(header: &BlockHeader) -> HeaderBody {
    HeaderBody {
        height: header.height,
        hash: hex::encode(header.hash()),
        previous: hex::encode(header.previous),
        records: header.records,
        records_root: hex::encode(header.records_root),
        txids_root: hex::encode(header.txids_root),
        encoded: hex::encode(header.encode()),
    }
}

async fn ledger_head<B: Backend>(State(node): State<B>) -> Result<Json<LedgerHeadBody>, ApiError> {
    let head = on_node(move || node.ledger_head()).await?;
    Ok(Json(ledger_head_body(&head)))
}

pub(crate) fn ledger_head_body(head: &LedgerHead) -> LedgerHeadBody {
    LedgerHeadBody {
        height: head.height,
        head: head.head.as_ref().map(header_body),
        uhs_ids: head.uhs.0,
        uhs_sha256_sorted: hex::encode(head.uhs.1),
        waiting: head.waiting as u64,
        undecided: head.undecided as u64,
    }
}

async fn supply<B: Backend>(State(node): State<B>) -> Result<Json<SupplyBody>, ApiError> {
    let cut = on_node(move || node.ledger_supply()).await?;
    Ok(Json(crate::supply::supply_body(&cut)))
}

async fn ledger_block<B: Backend>(
    State(node): State<B>,
    Path(height): Path<String>,
) -> Result<Json<BlockBody>, ApiError> {
    let height: u64 = height.parse().ok().filter(|h| *h > 0).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_height",
            format!("block height '{height}' is not a whole number from 1"),
        )
    })?;
    let block = on_node(move || node.ledger_block(height)).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "no_such_block",
            format!("the ledger has no block {height} yet"),
        )
    })?;
    Ok(Json(BlockBody {
        header: header_body(&block.header),
        txids: block.records.iter().map(|r| hex::encode(r.txid().0)).collect(),
        encoded: hex::encode(block.encode()),
    }))
}

async fn ledger_transaction<B: Backend>(
    State(node): State<B>,
    Path(txid): Path<String>,
) -> Result<Json<LedgerEntryBody>, ApiError> {
    let txid = Txid(parse_id(&txid, "the txid in the path")?.0);
    let reader = node.clone();
    let Some(entry) = on_node(move || reader.ledger_transaction(txid)).await? else {
        let head = on_node(move || node.ledger_head()).await?;
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_in_ledger",
            format!(
                "transaction {} is in no block up to height {} ({} confirmed transactions wait for a block)",
                hex::encode(txid.0),
                head.height,
                head.waiting
            ),
        ));
    };
    Ok(Json(LedgerEntryBody {
        txid: hex::encode(txid.0),
        height: entry.located.height,
        position: entry.located.position,
        header: header_body(&entry.header),
        record: hex::encode(entry.record.encode()),
        proof: hex::encode(entry.proof.encode()),
    }))
}

/// `GET /v1/ledger/disputes/{txid}?height=H`: the proof that the transaction is, or is not, in
/// the ledger up to height H (the head if absent), which anyone checks with the headers alone.
async fn ledger_dispute<B: Backend>(
    State(node): State<B>,
    Path(txid): Path<String>,
    query: Result<axum::extract::Query<DisputeQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DisputeBody>, ApiError> {
    let txid = Txid(parse_id(&txid, "the txid in the path")?.0);
    let axum::extract::Query(query) = query.map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_height",
            "height must be a whole number".to_string(),
        )
    })?;
    let proof = on_node(move || node.ledger_dispute(txid, query.height))
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "no_such_block",
                format!("the ledger has no block {} yet", query.height.unwrap_or_default()),
            )
        })?;
    let verdict = proof
        .check()
        .map_err(|error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", error.to_string()))?;
    Ok(Json(DisputeBody {
        txid: hex::encode(txid.0),
        height: verdict.height,
        head: hex::encode(verdict.head),
        included: verdict.located.is_some(),
        block: verdict.located.map(|l| l.height),
        position: verdict.located.map(|l| l.position),
        proof: hex::encode(proof.encode()),
    }))
}

/// `GET /v1/transactions/{txid}`: the watchtower's outcome of a transaction this node decided
/// recently.
async fn transaction_status<B: Backend>(
    State(node): State<B>,
    Path(txid): Path<String>,
) -> Result<Json<SubmitResultBody>, ApiError> {
    let txid = Txid(parse_id(&txid, "the txid in the path")?.0);
    let status = on_node(move || node.transaction_status(txid)).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_transaction",
            format!(
                "this node has no recent outcome of {}: it never decided it, or has forgotten it (look for it in /v1/ledger/transactions, or query its outputs)",
                hex::encode(txid.0)
            ),
        )
    })?;
    Ok(Json(SubmitResultBody::from_status(hex::encode(txid.0), &status)))
}
