//! A blocking client for the node's HTTP/JSON API (`docs/api.md`), and the [`Ledger`] trait
//! that `sync` is written against so that tests can run it against an in-memory ledger.

use std::io::Read;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use specie_codec::Encode;
use specie_transaction::{SpecieTransaction, Txid, UhsId};
use thiserror::Error;

/// Transactions in one `POST /v1/transactions` (the API's limit).
pub const SUBMIT_TRANSACTIONS_MAX: usize = 1000;
/// Ids in one `POST /v1/uhs/query` (the API's limit).
pub const QUERY_IDS_MAX: usize = 10_000;
/// The longest the node will wait for a submission to become final.
pub const SUBMIT_TIMEOUT_MS_MAX: u64 = 120_000;
/// How long to wait for a TCP connection: a local node answers in microseconds, so a few
/// seconds is plenty and keeps a wrong `--node` from hanging the CLI.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Whole-request limit for `info` and `query_uhs`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Extra time on top of `timeout_ms` for a submission: the node answers only after its own
/// timeout, and the answer still has to travel back.
const SUBMIT_SLACK: Duration = Duration::from_secs(10);
/// Largest response body read: 1000 results with messages, or 10000 booleans, fit easily.
const RESPONSE_BYTES_MAX: u64 = 8 * 1024 * 1024;
/// A ledger block's answer: up to 10,000 records of a few kilobytes each, in hex.
const BLOCK_RESPONSE_BYTES_MAX: u64 = 128 * 1024 * 1024;

/// Why talking to the node failed. Each message names the URL.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("{url:?} is not a node URL this wallet can use: {reason}")]
    BadUrl { url: String, reason: String },
    #[error(
        "could not reach the specie node at {url}: {reason}. Is `specie node` running there? \
         (pass --node URL to use another address)"
    )]
    Unreachable { url: String, reason: String },
    #[error("the node at {url} refused the request (HTTP {status}, {code}): {message}")]
    Refused {
        url: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("the node at {url} sent an answer this wallet does not understand: {reason}")]
    BadResponse { url: String, reason: String },
    #[error("the node at {url} sent an answer this wallet does not understand: {problem}")]
    BadResult {
        url: String,
        #[source]
        problem: BadSubmitResult,
    },
}

/// What is wrong with one entry of a submission's `results` (`docs/api.md`).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BadSubmitResult {
    #[error("txid {text:?} is not hex")]
    TxidNotHex { text: String },
    #[error("txid {text:?} is not 32 bytes")]
    TxidNot32Bytes { text: String },
    #[error("unknown status {status:?}")]
    UnknownStatus { status: String },
}

/// `GET /v1/info`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct NodeInfo {
    pub version: String,
    pub hrp: String,
    pub shards: u64,
    /// x-only public keys (hex) the node accepts mints and redeems from.
    pub issuers: Vec<String>,
    pub uhs_ids: u64,
    /// Auditors with jurisdiction (hex Ristretto keys); absent from older nodes.
    #[serde(default)]
    pub auditors: Vec<String>,
    #[serde(default)]
    pub endorsement_group_key: Option<String>,
    /// The registration authority's key (hex of its encoding), if the node takes anonymous
    /// transactions; absent from older nodes.
    #[serde(default)]
    pub registration_authority: Option<String>,
    /// Owner auditors with jurisdiction (hex of their encodings); absent from older nodes.
    #[serde(default)]
    pub owner_auditors: Vec<String>,
    /// Active auditors whose co-signatures a private transaction needs (x-only keys, hex);
    /// absent from older nodes.
    #[serde(default)]
    pub active_auditors: Vec<String>,
}

/// An active auditor's answer to `POST /v1/cosign`.
#[derive(Deserialize)]
struct CosignResponse {
    auditor: String,
    witness: String,
}

/// The fate of one submitted transaction, mirroring `docs/api.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitStatus {
    /// Durably applied; its outputs are in the UHS.
    Confirmed,
    /// Failed the sentinel's transaction-local checks; will never be applied.
    Invalid {
        code: String,
        index: Option<u64>,
        message: String,
    },
    /// Valid but refused by the shards (inputs spent or locked, outputs exist).
    Rejected { code: String, message: String },
    /// Not decodable.
    Malformed { code: String, message: String },
    /// Not accepted; nothing was applied; safe to resubmit.
    Busy { message: String },
    /// Accepted but not final before the timeout; its fate is learnt from its outputs.
    Pending { message: String },
}

impl SubmitStatus {
    /// A short human-readable reason (for every status but `Confirmed`).
    pub fn reason(&self) -> String {
        match self {
            SubmitStatus::Confirmed => "confirmed".to_owned(),
            SubmitStatus::Invalid { code, message, .. }
            | SubmitStatus::Rejected { code, message }
            | SubmitStatus::Malformed { code, message } => format!("{message} ({code})"),
            SubmitStatus::Busy { message } | SubmitStatus::Pending { message } => message.clone(),
        }
    }
}

/// One entry of the `results` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmitResult {
    /// `None` when the node could not decode the transaction.
    pub txid: Option<Txid>,
    pub status: SubmitStatus,
}

/// What `sync` needs from a node. [`NodeClient`] is the real one.
pub trait Ledger {
    /// Submits transactions and waits up to `timeout_ms` for each to become final; one result
    /// per transaction, in order.
    fn submit(&self, transactions: &[SpecieTransaction], timeout_ms: u64) -> Result<Vec<SubmitResult>, ClientError>;
    /// Whether each UHS id is present, in order.
    fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, ClientError>;
}

/// Blocking HTTP client for one node.
#[derive(Clone, Debug)]
pub struct NodeClient {
    base: String,
    agent: ureq::Agent,
}

#[derive(Serialize)]
struct SubmitRequest<'a> {
    transactions: &'a [String],
    timeout_ms: u64,
}

#[derive(Deserialize)]
struct SubmitResponse {
    results: Vec<RawResult>,
}

#[derive(Deserialize)]
struct RawResult {
    txid: Option<String>,
    status: String,
    code: Option<String>,
    index: Option<u64>,
    message: Option<String>,
}

#[derive(Serialize)]
struct QueryRequest<'a> {
    ids: &'a [String],
}

#[derive(Deserialize)]
struct QueryResponse {
    present: Vec<bool>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

impl NodeClient {
    /// A client for the node at `url` (e.g. `http://127.0.0.1:8470`). Only plain HTTP: the
    /// node serves nothing else.
    pub fn new(url: &str) -> Result<Self, ClientError> {
        let base = url.trim().trim_end_matches('/').to_owned();
        let bad = |reason: &str| ClientError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        if base.starts_with("https://") {
            return Err(bad("the node speaks plain HTTP; use an http:// URL"));
        }
        let Some(rest) = base.strip_prefix("http://") else {
            return Err(bad("it must start with http://, like http://127.0.0.1:8470"));
        };
        if rest.is_empty() || rest.contains(char::is_whitespace) {
            return Err(bad("it names no host"));
        }
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build();
        Ok(NodeClient { base, agent })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Turns a ureq error into one that names the URL and says what to do.
    fn transport_error(&self, url: &str, error: ureq::Error) -> ClientError {
        match error {
            ureq::Error::Status(status, response) => {
                let body = read_limited(response).ok();
                let detail = body.and_then(|body| serde_json::from_slice::<ErrorBody>(&body).ok());
                match detail {
                    Some(ErrorBody { error }) => ClientError::Refused {
                        url: url.to_owned(),
                        status,
                        code: error.code,
                        message: error.message,
                    },
                    None => ClientError::Refused {
                        url: url.to_owned(),
                        status,
                        code: "unknown".to_owned(),
                        message: "the answer carried no error description".to_owned(),
                    },
                }
            }
            // ureq's own text repeats the URL; say the kind and the detail only.
            ureq::Error::Transport(transport) => ClientError::Unreachable {
                url: url.to_owned(),
                reason: match transport.message() {
                    Some(message) => format!("{}: {message}", transport.kind()),
                    None => transport.kind().to_string(),
                },
            },
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(&self, url: &str, response: ureq::Response) -> Result<T, ClientError> {
        self.parse_limited(url, response, RESPONSE_BYTES_MAX)
    }

    fn parse_limited<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        response: ureq::Response,
        bytes_max: u64,
    ) -> Result<T, ClientError> {
        let bad = |reason: String| ClientError::BadResponse {
            url: url.to_owned(),
            reason,
        };
        let body = read_limited_to(response, bytes_max).map_err(|error| bad(error.to_string()))?;
        serde_json::from_slice(&body).map_err(|error| bad(error.to_string()))
    }

    fn get<T: for<'de> Deserialize<'de>>(&self, path: &str, bytes_max: u64) -> Result<T, ClientError> {
        let url = self.endpoint(path);
        let response = self
            .agent
            .get(&url)
            .call()
            .map_err(|error| self.transport_error(&url, error))?;
        self.parse_limited(&url, response, bytes_max)
    }

    /// `GET /v1/ledger`: the height of the node's ledger of record.
    pub fn ledger_height(&self) -> Result<u64, ClientError> {
        #[derive(Deserialize)]
        struct Head {
            height: u64,
        }
        Ok(self.get::<Head>("/v1/ledger", RESPONSE_BYTES_MAX)?.height)
    }

    /// `GET /v1/ledger/blocks/{height}`: the block's canonical encoding (to decode and check
    /// as `specie_archiver::Block`).
    pub fn ledger_block_bytes(&self, height: u64) -> Result<Vec<u8>, ClientError> {
        #[derive(Deserialize)]
        struct BlockBody {
            encoded: String,
        }
        let path = format!("/v1/ledger/blocks/{height}");
        let body: BlockBody = self.get(&path, BLOCK_RESPONSE_BYTES_MAX)?;
        hex::decode(&body.encoded).map_err(|error| ClientError::BadResponse {
            url: self.endpoint(&path),
            reason: format!("the block is not hex: {error}"),
        })
    }

    /// `GET /v1/ledger/disputes/{txid}?height=H`: the dispute proof's canonical encoding (to
    /// decode and check as `specie_archiver::DisputeProof`; the node's own verdict is not read).
    pub fn ledger_dispute_bytes(&self, txid: &Txid, height: Option<u64>) -> Result<Vec<u8>, ClientError> {
        #[derive(Deserialize)]
        struct DisputeBody {
            proof: String,
        }
        let query = height.map(|h| format!("?height={h}")).unwrap_or_default();
        let path = format!("/v1/ledger/disputes/{}{query}", hex::encode(txid.0));
        // A proof carries every header to its height: allow what blocks are allowed.
        let body: DisputeBody = self.get(&path, BLOCK_RESPONSE_BYTES_MAX)?;
        hex::decode(&body.proof).map_err(|error| ClientError::BadResponse {
            url: self.endpoint(&path),
            reason: format!("the proof is not hex: {error}"),
        })
    }

    /// `GET /v1/info`.
    pub fn info(&self) -> Result<NodeInfo, ClientError> {
        self.get("/v1/info", RESPONSE_BYTES_MAX)
    }

    /// `POST /v1/transactions`, in chunks of [`SUBMIT_TRANSACTIONS_MAX`]. `timeout_ms` is
    /// capped at [`SUBMIT_TIMEOUT_MS_MAX`], as the node caps it.
    pub fn submit(
        &self,
        transactions: &[SpecieTransaction],
        timeout_ms: u64,
    ) -> Result<Vec<SubmitResult>, ClientError> {
        let url = self.endpoint("/v1/transactions");
        let timeout_ms = timeout_ms.min(SUBMIT_TIMEOUT_MS_MAX);
        let mut results = Vec::with_capacity(transactions.len());
        for chunk in transactions.chunks(SUBMIT_TRANSACTIONS_MAX) {
            let encoded: Vec<String> = chunk.iter().map(|tx| hex::encode(tx.encode())).collect();
            let response = self
                .agent
                .post(&url)
                .timeout(Duration::from_millis(timeout_ms) + SUBMIT_SLACK)
                .send_json(SubmitRequest {
                    transactions: &encoded,
                    timeout_ms,
                })
                .map_err(|error| self.transport_error(&url, error))?;
            let response: SubmitResponse = self.parse(&url, response)?;
            if response.results.len() != chunk.len() {
                return Err(ClientError::BadResponse {
                    url,
                    reason: format!("{} results for {} transactions", response.results.len(), chunk.len()),
                });
            }
            for raw in response.results {
                results.push(convert_result(raw).map_err(|problem| ClientError::BadResult {
                    url: url.clone(),
                    problem,
                })?);
            }
        }
        Ok(results)
    }

    /// `POST /v1/cosign` to an active auditor's service (`specie audit serve`; this client then
    /// talks to the auditor, not to a node): its key and its co-signature of `tx`, a p2pk witness
    /// to append after the transaction's own.
    pub fn cosign(&self, tx: &SpecieTransaction) -> Result<([u8; 32], specie_transaction::Witness), ClientError> {
        let url = self.endpoint("/v1/cosign");
        let response = self
            .agent
            .post(&url)
            .send_json(serde_json::json!({ "transaction": hex::encode(tx.encode()) }))
            .map_err(|error| self.transport_error(&url, error))?;
        let answer: CosignResponse = self.parse(&url, response)?;
        let bad = |reason: &str| ClientError::BadResponse {
            url: url.clone(),
            reason: reason.to_owned(),
        };
        let auditor: [u8; 32] = hex::decode(&answer.auditor)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(|| bad("its auditor key is not 32 bytes of hex"))?;
        let witness = hex::decode(&answer.witness).map_err(|_| bad("its witness is not hex"))?;
        Ok((auditor, specie_transaction::Witness(witness)))
    }

    /// `POST /v1/uhs/query`, in chunks of [`QUERY_IDS_MAX`].
    pub fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, ClientError> {
        let url = self.endpoint("/v1/uhs/query");
        let mut present = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(QUERY_IDS_MAX) {
            let encoded: Vec<String> = chunk.iter().map(|id| hex::encode(id.0)).collect();
            let response = self
                .agent
                .post(&url)
                .send_json(QueryRequest { ids: &encoded })
                .map_err(|error| self.transport_error(&url, error))?;
            let response: QueryResponse = self.parse(&url, response)?;
            if response.present.len() != chunk.len() {
                return Err(ClientError::BadResponse {
                    url,
                    reason: format!("{} answers for {} ids", response.present.len(), chunk.len()),
                });
            }
            present.extend(response.present);
        }
        Ok(present)
    }
}

impl Ledger for NodeClient {
    fn submit(&self, transactions: &[SpecieTransaction], timeout_ms: u64) -> Result<Vec<SubmitResult>, ClientError> {
        NodeClient::submit(self, transactions, timeout_ms)
    }

    fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, ClientError> {
        NodeClient::query_uhs(self, ids)
    }
}

/// Reads a body of at most [`RESPONSE_BYTES_MAX`] bytes; a longer one is an error rather than
/// an unbounded allocation.
fn read_limited(response: ureq::Response) -> std::io::Result<Vec<u8>> {
    read_limited_to(response, RESPONSE_BYTES_MAX)
}

fn read_limited_to(response: ureq::Response, bytes_max: u64) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    response.into_reader().take(bytes_max + 1).read_to_end(&mut body)?;
    if body.len() as u64 > bytes_max {
        return Err(std::io::Error::other(format!(
            "the response is larger than {bytes_max} bytes"
        )));
    }
    Ok(body)
}

fn parse_txid(text: &str) -> Result<Txid, BadSubmitResult> {
    let bytes = hex::decode(text).map_err(|_| BadSubmitResult::TxidNotHex { text: text.to_owned() })?;
    let array: [u8; 32] = bytes
        .try_into()
        .map_err(|_| BadSubmitResult::TxidNot32Bytes { text: text.to_owned() })?;
    Ok(Txid(array))
}

fn convert_result(raw: RawResult) -> Result<SubmitResult, BadSubmitResult> {
    let txid = raw.txid.as_deref().map(parse_txid).transpose()?;
    let code = raw.code.unwrap_or_default();
    let message = raw.message.unwrap_or_default();
    let status = match raw.status.as_str() {
        "confirmed" => SubmitStatus::Confirmed,
        "invalid" => SubmitStatus::Invalid {
            code,
            index: raw.index,
            message,
        },
        "rejected" => SubmitStatus::Rejected { code, message },
        "malformed" => SubmitStatus::Malformed { code, message },
        "busy" => SubmitStatus::Busy { message },
        "pending" => SubmitStatus::Pending { message },
        other => {
            return Err(BadSubmitResult::UnknownStatus {
                status: other.to_owned(),
            })
        }
    };
    Ok(SubmitResult { txid, status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    #[test]
    fn urls_are_checked() {
        assert!(NodeClient::new("http://127.0.0.1:8470/").is_ok());
        assert_eq!(
            NodeClient::new("http://127.0.0.1:8470/").unwrap().url(),
            "http://127.0.0.1:8470"
        );
        assert!(matches!(
            NodeClient::new("127.0.0.1:8470"),
            Err(ClientError::BadUrl { .. })
        ));
        assert!(matches!(NodeClient::new("https://x"), Err(ClientError::BadUrl { .. })));
        assert!(matches!(NodeClient::new("http://"), Err(ClientError::BadUrl { .. })));
    }

    #[test]
    fn statuses_mirror_the_api() {
        let raw = |status: &str| RawResult {
            txid: Some("11".repeat(32)),
            status: status.to_owned(),
            code: Some("invalid_signature".to_owned()),
            index: Some(1),
            message: Some("input 1: bad".to_owned()),
        };
        assert_eq!(
            convert_result(raw("confirmed")).unwrap().status,
            SubmitStatus::Confirmed
        );
        assert_eq!(
            convert_result(raw("invalid")).unwrap().status,
            SubmitStatus::Invalid {
                code: "invalid_signature".into(),
                index: Some(1),
                message: "input 1: bad".into()
            }
        );
        assert!(matches!(
            convert_result(raw("busy")).unwrap().status,
            SubmitStatus::Busy { .. }
        ));
        assert_eq!(
            convert_result(raw("exploded")).unwrap_err(),
            BadSubmitResult::UnknownStatus {
                status: "exploded".into()
            }
        );
        let mut short = raw("confirmed");
        short.txid = Some("11".into());
        assert_eq!(
            convert_result(short).unwrap_err().to_string(),
            "txid \"11\" is not 32 bytes"
        );
        let mut undecodable = raw("malformed");
        undecodable.txid = None;
        assert_eq!(convert_result(undecodable).unwrap().txid, None);
    }

    #[test]
    fn unreachable_node_error_names_the_url_and_the_fix() {
        // Bind then drop: the port is (almost certainly) closed.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let client = NodeClient::new(&format!("http://127.0.0.1:{port}")).unwrap();
        let message = client.info().unwrap_err().to_string();
        assert!(
            message.contains(&format!("http://127.0.0.1:{port}/v1/info")),
            "{message}"
        );
        assert!(message.contains("`specie node`"), "{message}");
    }

    /// Serves one canned HTTP response and returns the request it received.
    fn serve_once(status_line: &'static str, body: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            let mut content_length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    content_length = value.trim().parse().unwrap();
                }
                request.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body_bytes = vec![0u8; content_length];
            reader.read_exact(&mut body_bytes).unwrap();
            request.push_str(&String::from_utf8(body_bytes).unwrap());
            let mut stream = stream;
            write!(
                stream,
                "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            request
        });
        (url, handle)
    }

    #[test]
    fn query_speaks_the_documented_json() {
        let (url, server) = serve_once("HTTP/1.1 200 OK", r#"{"present": [true, false]}"#);
        let client = NodeClient::new(&url).unwrap();
        let present = client.query_uhs(&[UhsId([1; 32]), UhsId([2; 32])]).unwrap();
        assert_eq!(present, vec![true, false]);
        let request = server.join().unwrap();
        assert!(request.starts_with("POST /v1/uhs/query "), "{request}");
        assert!(request.contains(&format!(r#"{{"ids":["{}","{}"]}}"#, "01".repeat(32), "02".repeat(32))));
    }

    #[test]
    fn http_errors_carry_the_node_message() {
        let (url, server) = serve_once(
            "HTTP/1.1 400 Bad Request",
            r#"{"error": {"code": "too_many", "message": "at most 10000 ids"}}"#,
        );
        let client = NodeClient::new(&url).unwrap();
        let error = client.query_uhs(&[UhsId([1; 32])]).unwrap_err();
        server.join().unwrap();
        assert!(matches!(&error, ClientError::Refused { status: 400, code, .. } if code == "too_many"));
        assert!(error.to_string().contains("at most 10000 ids"));
    }

    #[test]
    fn result_count_mismatch_is_an_error() {
        let (url, server) = serve_once("HTTP/1.1 200 OK", r#"{"present": [true]}"#);
        let client = NodeClient::new(&url).unwrap();
        let error = client.query_uhs(&[UhsId([1; 32]), UhsId([2; 32])]).unwrap_err();
        server.join().unwrap();
        assert!(matches!(error, ClientError::BadResponse { .. }));
    }
}
