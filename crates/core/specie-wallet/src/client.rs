//! A blocking client for the node's HTTP/JSON API (`docs/api.md`), and the [`Ledger`] trait
//! that `sync` is written against so that tests can run it against an in-memory ledger.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use specie_api::http_api::{
    BlockBody, CertifyBody, CertifyRequest, CosignBody, CosignRequest, DisputeBody, LedgerHeadBody, PresentBody,
    QueryRequest, SubmitBody, SubmitRequest, SubmitResultBody, CERTIFY_PATH, COSIGN_PATH, INFO_PATH,
    LEDGER_BLOCKS_PATH, LEDGER_DISPUTES_PATH, LEDGER_PATH, TRANSACTIONS_PATH, UHS_QUERY_PATH,
};
pub use specie_api::NodeInfo;
use specie_codec::Encode;
use specie_service::client::read_limited;
use specie_service::CoreCheckError;
use specie_transaction::{OutPoint, SpecieTransaction, Txid, UhsId};
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
const RESPONSE_BYTES_MAX: u64 = specie_service::client::ANSWER_BYTES_MAX;
/// A ledger block's answer: up to 10,000 records of a few kilobytes each, in hex.
const BLOCK_RESPONSE_BYTES_MAX: u64 = 128 * 1024 * 1024;
/// The largest `--node-auth-file`: an `Authorization` value is a line, not a document.
pub const AUTH_FILE_BYTES_MAX: u64 = 4 * 1024;
/// The largest `--ca-cert` file: room for a whole system bundle of root certificates.
pub const CA_FILE_BYTES_MAX: u64 = 1024 * 1024;

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
    /// `--ca-cert` or `--node-auth-file` names a file that cannot be used. Never quotes the
    /// auth file's contents.
    #[error("{what} {path} is not usable: {reason}")]
    AccessFile {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// The TLS handshake failed: the certificate is not trusted, not for this host, expired…
    #[error("could not talk securely to {url}: {reason}. {advice}")]
    Tls {
        url: String,
        reason: String,
        advice: String,
    },
    /// Something in front of the node (a TLS proxy) wants credentials this wallet did not give.
    #[error("the server at {url} refused the request as not authorised (HTTP {status}). {advice}")]
    NotAuthorized { url: String, status: u16, advice: String },
}

/// How to reach a node beyond its URL: whom to trust for `https://`, and what to authorise
/// with. Both are files, read when a client is made: the paths are what a wallet file keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAccess {
    /// A PEM file of CA certificates to trust instead of the public roots (`--ca-cert`).
    pub ca_cert: Option<PathBuf>,
    /// A file whose contents, trimmed, are the `Authorization` header of every request
    /// (`--node-auth-file`), e.g. `Bearer abc`.
    pub auth_file: Option<PathBuf>,
}

impl NodeAccess {
    pub fn is_empty(&self) -> bool {
        self.ca_cert.is_none() && self.auth_file.is_none()
    }

    /// `self`, with each setting `over` has replaced by `over`'s.
    pub fn overridden_by(self, over: &NodeAccess) -> NodeAccess {
        NodeAccess {
            ca_cert: over.ca_cert.clone().or(self.ca_cert),
            auth_file: over.auth_file.clone().or(self.auth_file),
        }
    }
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

/// Blocking HTTP(S) client for one node.
#[derive(Clone, Debug)]
pub struct NodeClient {
    base: String,
    agent: ureq::Agent,
    /// For advice in errors; the auth file's contents live only in the agent's middleware.
    access: NodeAccess,
}

/// Whether the core whose HTTP API is `core_url` holds the UHS id `marker`: the one check of a
/// funding over HTTP, for the services that take value from the online core (blocking: async
/// callers run it off their workers). A [`specie_service::MarkerLookup`].
pub fn marker_in_core(core_url: &str, marker: [u8; 32]) -> Result<bool, CoreCheckError> {
    let failed = |error: ClientError| CoreCheckError::Unreachable {
        at: core_url.to_string(),
        reason: error.to_string(),
    };
    let client = NodeClient::new(core_url).map_err(failed)?;
    let present = client.query_uhs(&[UhsId(marker)]).map_err(failed)?;
    Ok(present.first().copied().unwrap_or(false))
}

/// The core at `url`, as a service that takes value from it checks fundings there.
pub fn core_api(url: &str) -> specie_service::CoreApi {
    specie_service::CoreApi {
        url: url.to_string(),
        lookup: marker_in_core,
    }
}

impl NodeClient {
    /// A client for the node at `url` (e.g. `http://127.0.0.1:8470`, or `https://…` for a node
    /// behind a TLS proxy), trusting the public roots and sending no credentials.
    pub fn new(url: &str) -> Result<Self, ClientError> {
        Self::with_access(url, &NodeAccess::default())
    }

    /// A client for the node at `url` that trusts and authorises as `access` says. Reads the
    /// files now, so that a wrong path is reported before anything is sent.
    pub fn with_access(url: &str, access: &NodeAccess) -> Result<Self, ClientError> {
        let base = normalize_url(url).to_owned();
        let bad = |reason: &str| ClientError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(rest) = base.strip_prefix("http://").or_else(|| base.strip_prefix("https://")) else {
            return Err(bad(
                "it must start with http:// or https://, like http://127.0.0.1:8470",
            ));
        };
        if host_of(rest).is_empty() || rest.contains(char::is_whitespace) {
            return Err(bad("it names no host"));
        }
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            // The API never redirects; following one could carry a request off to another host.
            .redirects(0);
        if let Some(path) = &access.ca_cert {
            builder = builder.tls_config(tls_config(path)?);
        }
        if let Some(path) = &access.auth_file {
            let value = read_auth_value(path)?;
            // The error is ureq's own: a middleware must return it as it is.
            #[allow(clippy::result_large_err)]
            let authorize = move |request: ureq::Request, next: ureq::MiddlewareNext| {
                next.handle(request.set("Authorization", &value))
            };
            builder = builder.middleware(authorize);
        }
        Ok(NodeClient {
            base,
            agent: builder.build(),
            access: access.clone(),
        })
    }

    /// Whether requests travel unencrypted to another machine: a plain `http://` URL whose host
    /// is not a loopback address (`localhost`, 127.0.0.0/8, `::1`).
    pub fn is_unencrypted_remote(&self) -> bool {
        match self.base.strip_prefix("http://") {
            Some(rest) => !is_loopback(host_of(rest)),
            None => false,
        }
    }

    /// How this client reaches its node (the paths, not the auth file's contents).
    pub fn access(&self) -> &NodeAccess {
        &self.access
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
                let body = read_limited(response, RESPONSE_BYTES_MAX).ok();
                let detail = body.and_then(|body| serde_json::from_slice::<specie_service::ErrorBody>(&body).ok());
                match detail {
                    None if matches!(status, 401 | 403 | 407) => ClientError::NotAuthorized {
                        url: url.to_owned(),
                        status,
                        advice: self.auth_advice(),
                    },
                    Some(specie_service::ErrorBody { error }) => ClientError::Refused {
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
            ureq::Error::Transport(transport) => match tls_problem(&transport) {
                Some(problem) => {
                    let (reason, advice) = self.tls_advice(&problem);
                    ClientError::Tls {
                        url: url.to_owned(),
                        reason,
                        advice,
                    }
                }
                // ureq's own text repeats the URL; say the kind and the detail only.
                None => ClientError::Unreachable {
                    url: url.to_owned(),
                    reason: match transport.message() {
                        Some(message) => format!("{}: {message}", transport.kind()),
                        None => transport.kind().to_string(),
                    },
                },
            },
        }
    }

    /// What to do about a refusal for want of credentials.
    fn auth_advice(&self) -> String {
        match &self.access.auth_file {
            None => "If the node is behind a proxy that wants credentials, pass --node-auth-file FILE, a file \
                     holding the Authorization header's value (like `Bearer …`)"
                .to_owned(),
            Some(path) => format!(
                "It refused the credentials in {}: check that file's contents with whoever runs the proxy",
                path.display()
            ),
        }
    }

    /// What went wrong in a TLS handshake, and what to do about it.
    fn tls_advice(&self, problem: &rustls::Error) -> (String, String) {
        use rustls::CertificateError as Cert;
        let ca = match &self.access.ca_cert {
            Some(path) => format!("the CA certificates in {} did not sign it", path.display()),
            None => "it is not signed by a public CA".to_owned(),
        };
        let pair = |reason: &str, advice: &str| (reason.to_owned(), advice.to_owned());
        match problem {
            rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => (
                format!("the server's certificate is not trusted ({ca})"),
                "Pass --ca-cert FILE with the proxy's CA certificate (PEM)".to_owned(),
            ),
            rustls::Error::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => pair(
                "the server's certificate is not for the host in this URL",
                "Use in --node the name or address the certificate is for, or have the proxy's certificate \
                 issued for this one",
            ),
            rustls::Error::InvalidCertificate(
                Cert::Expired | Cert::ExpiredContext { .. } | Cert::NotValidYet | Cert::NotValidYetContext { .. },
            ) => pair(
                "the server's certificate has expired or is not valid yet",
                "Renew the proxy's certificate, or check this machine's clock",
            ),
            rustls::Error::InvalidCertificate(other) => (
                format!("the server's certificate was refused ({other:?})"),
                "Check the proxy's certificate, or pass --ca-cert FILE with its CA (PEM)".to_owned(),
            ),
            rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => (
                format!("the server does not speak TLS there ({problem})"),
                "If it serves plain HTTP, use an http:// URL".to_owned(),
            ),
            other => (
                format!("the TLS handshake failed ({other})"),
                "Check the URL and the proxy's TLS settings".to_owned(),
            ),
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
        if (300..400).contains(&response.status()) {
            let to = response
                .header("location")
                .unwrap_or("nowhere")
                .chars()
                .take(200)
                .collect::<String>();
            return Err(bad(format!(
                "it redirects to {to}, which this wallet does not follow; give that URL with --node"
            )));
        }
        let body = read_limited(response, bytes_max).map_err(|error| bad(error.to_string()))?;
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
        Ok(self.get::<LedgerHeadBody>(LEDGER_PATH, RESPONSE_BYTES_MAX)?.height)
    }

    /// `GET /v1/ledger/blocks/{height}`: the block's canonical encoding (to decode and check
    /// as `specie_archiver::Block`).
    pub fn ledger_block_bytes(&self, height: u64) -> Result<Vec<u8>, ClientError> {
        let path = format!("{LEDGER_BLOCKS_PATH}/{height}");
        let body: BlockBody = self.get(&path, BLOCK_RESPONSE_BYTES_MAX)?;
        hex::decode(&body.encoded).map_err(|error| ClientError::BadResponse {
            url: self.endpoint(&path),
            reason: format!("the block is not hex: {error}"),
        })
    }

    /// `GET /v1/ledger/disputes/{txid}?height=H`: the dispute proof's canonical encoding (to
    /// decode and check as `specie_archiver::DisputeProof`; the node's own verdict is not read).
    pub fn ledger_dispute_bytes(&self, txid: &Txid, height: Option<u64>) -> Result<Vec<u8>, ClientError> {
        let query = height.map(|h| format!("?height={h}")).unwrap_or_default();
        let path = format!("{LEDGER_DISPUTES_PATH}/{}{query}", hex::encode(txid.0));
        // A proof carries every header to its height: allow what blocks are allowed.
        let body: DisputeBody = self.get(&path, BLOCK_RESPONSE_BYTES_MAX)?;
        hex::decode(&body.proof).map_err(|error| ClientError::BadResponse {
            url: self.endpoint(&path),
            reason: format!("the proof is not hex: {error}"),
        })
    }

    /// `GET /v1/info`.
    pub fn info(&self) -> Result<NodeInfo, ClientError> {
        self.get(INFO_PATH, RESPONSE_BYTES_MAX)
    }

    /// `GET /v1/supply`: the supply at the ledger of record's head.
    pub fn supply(&self) -> Result<specie_api::http_api::SupplyBody, ClientError> {
        self.get(specie_api::http_api::SUPPLY_PATH, RESPONSE_BYTES_MAX)
    }

    /// `POST /v1/transactions`, in chunks of [`SUBMIT_TRANSACTIONS_MAX`]. `timeout_ms` is
    /// capped at [`SUBMIT_TIMEOUT_MS_MAX`], as the node caps it.
    pub fn submit(
        &self,
        transactions: &[SpecieTransaction],
        timeout_ms: u64,
    ) -> Result<Vec<SubmitResult>, ClientError> {
        let url = self.endpoint(TRANSACTIONS_PATH);
        let timeout_ms = timeout_ms.min(SUBMIT_TIMEOUT_MS_MAX);
        let mut results = Vec::with_capacity(transactions.len());
        for chunk in transactions.chunks(SUBMIT_TRANSACTIONS_MAX) {
            let request = SubmitRequest {
                transactions: chunk.iter().map(|tx| hex::encode(tx.encode())).collect(),
                timeout_ms: Some(timeout_ms),
            };
            let response = self
                .agent
                .post(&url)
                .timeout(Duration::from_millis(timeout_ms) + SUBMIT_SLACK)
                .send_json(request)
                .map_err(|error| self.transport_error(&url, error))?;
            let response: SubmitBody = self.parse(&url, response)?;
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
        let url = self.endpoint(COSIGN_PATH);
        let request = CosignRequest {
            transaction: hex::encode(tx.encode()),
        };
        let response = self
            .agent
            .post(&url)
            .send_json(request)
            .map_err(|error| self.transport_error(&url, error))?;
        let answer: CosignBody = self.parse(&url, response)?;
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

    /// `POST /v1/certify` to a certifier's service (`specie certifier serve`; this client then
    /// talks to the certifier, not to a node): which certifier answered, and its share of the
    /// certificate of `token` (its encoding) at `outpoint` (the caller decodes and checks it).
    pub fn certify(&self, outpoint: &OutPoint, token: &[u8]) -> Result<(u16, Vec<u8>), ClientError> {
        let url = self.endpoint(CERTIFY_PATH);
        let request = CertifyRequest {
            txid: hex::encode(outpoint.txid.0),
            index: outpoint.index,
            token: hex::encode(token),
        };
        let response = self
            .agent
            .post(&url)
            .send_json(request)
            .map_err(|error| self.transport_error(&url, error))?;
        let answer: CertifyBody = self.parse(&url, response)?;
        let share = hex::decode(&answer.share).map_err(|_| ClientError::BadResponse {
            url: url.clone(),
            reason: "its share is not hex".to_owned(),
        })?;
        Ok((answer.certifier, share))
    }

    /// `POST /v1/uhs/query`, in chunks of [`QUERY_IDS_MAX`].
    pub fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, ClientError> {
        let url = self.endpoint(UHS_QUERY_PATH);
        let mut present = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(QUERY_IDS_MAX) {
            let request = QueryRequest {
                ids: chunk.iter().map(|id| hex::encode(id.0)).collect(),
            };
            let response = self
                .agent
                .post(&url)
                .send_json(request)
                .map_err(|error| self.transport_error(&url, error))?;
            let response: PresentBody = self.parse(&url, response)?;
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

/// `url` without surrounding space and trailing slashes: how clients and wallet files name a node.
pub(crate) fn normalize_url(url: &str) -> &str {
    url.trim().trim_end_matches('/')
}

/// The host of a URL's remainder after `scheme://`: no user, port or path; IPv6 unbracketed.
fn host_of(rest: &str) -> &str {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The rustls error under a failed connection, if TLS is what failed.
fn tls_problem(transport: &ureq::Transport) -> Option<rustls::Error> {
    let mut source = std::error::Error::source(transport);
    while let Some(error) = source {
        if let Some(problem) = error.downcast_ref::<rustls::Error>() {
            return Some(problem.clone());
        }
        // An io::Error's `source` skips the error it wraps; look at that one too.
        let inner = error.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
        if let Some(problem) = inner.and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
            return Some(problem.clone());
        }
        source = error.source();
    }
    None
}

/// Reads at most `bytes_max` bytes of a small file, or says why not.
fn read_small_file(what: &'static str, path: &Path, bytes_max: u64) -> Result<Vec<u8>, ClientError> {
    let bad = |reason: String| ClientError::AccessFile {
        what,
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|error| bad(format!("could not open it: {error}")))?;
    let mut bytes = Vec::new();
    file.take(bytes_max + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| bad(format!("could not read it: {error}")))?;
    if bytes.len() as u64 > bytes_max {
        return Err(bad(format!("it is larger than {bytes_max} bytes")));
    }
    Ok(bytes)
}

/// The `Authorization` value in the file at `path`: its contents, trimmed, on one line.
fn read_auth_value(path: &Path) -> Result<String, ClientError> {
    const WHAT: &str = "the node auth file (--node-auth-file)";
    let bad = |reason: &str| ClientError::AccessFile {
        what: WHAT,
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let bytes = read_small_file(WHAT, path, AUTH_FILE_BYTES_MAX)?;
    let text = String::from_utf8(bytes).map_err(|_| bad("it is not UTF-8 text"))?;
    let value = text.trim();
    if value.is_empty() {
        return Err(bad(
            "it is empty; it should hold the Authorization header's value, like `Bearer …`",
        ));
    }
    if value.contains(['\n', '\r']) {
        return Err(bad(
            "it holds more than one line; it should hold the Authorization header's value alone",
        ));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(bad("it holds control characters, which a header cannot carry"));
    }
    Ok(value.to_owned())
}

/// A TLS client configuration trusting exactly the CA certificates in the PEM file at `path`.
fn tls_config(path: &Path) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    const WHAT: &str = "the CA certificate file (--ca-cert)";
    let bad = |reason: String| ClientError::AccessFile {
        what: WHAT,
        path: path.to_owned(),
        reason,
    };
    let pem = read_small_file(WHAT, path, CA_FILE_BYTES_MAX)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| bad(format!("it is not PEM: {error}")))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(bad(
            "it holds no usable certificate; it should hold the CA's certificate in PEM \
             (-----BEGIN CERTIFICATE-----)"
                .to_owned(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| bad(error.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn parse_txid(text: &str) -> Result<Txid, BadSubmitResult> {
    let bytes = hex::decode(text).map_err(|_| BadSubmitResult::TxidNotHex { text: text.to_owned() })?;
    let array: [u8; 32] = bytes
        .try_into()
        .map_err(|_| BadSubmitResult::TxidNot32Bytes { text: text.to_owned() })?;
    Ok(Txid(array))
}

fn convert_result(raw: SubmitResultBody) -> Result<SubmitResult, BadSubmitResult> {
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
pub(crate) mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::path::PathBuf;

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
        assert!(NodeClient::new("https://x").is_ok());
        assert!(matches!(NodeClient::new("http://"), Err(ClientError::BadUrl { .. })));
        assert!(matches!(
            NodeClient::new("https://:443"),
            Err(ClientError::BadUrl { .. })
        ));
        assert!(matches!(NodeClient::new("ftp://x"), Err(ClientError::BadUrl { .. })));
        let remote = |url: &str| NodeClient::new(url).unwrap().is_unencrypted_remote();
        assert!(remote("http://10.0.0.1:8470"));
        assert!(remote("http://node.example"));
        assert!(!remote("http://127.0.0.1:8470"));
        assert!(!remote("http://127.9.0.1"));
        assert!(!remote("http://localhost:8470/"));
        assert!(!remote("http://[::1]:8470"));
        assert!(!remote("https://node.example"));
    }

    #[test]
    fn statuses_mirror_the_api() {
        let raw = |status: &str| SubmitResultBody {
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

    #[test]
    fn redirects_are_not_followed() {
        let (url, server) = serve_once(
            "HTTP/1.1 301 Moved Permanently\r\nlocation: http://elsewhere.example/",
            "",
        );
        let error = NodeClient::new(&url).unwrap().info().unwrap_err();
        server.join().unwrap();
        assert!(
            error.to_string().contains("redirects to http://elsewhere.example/"),
            "{error}"
        );
    }

    #[test]
    fn a_refusal_for_want_of_credentials_says_how_to_give_them() {
        let (url, server) = serve_once("HTTP/1.1 401 Unauthorized", "");
        let error = NodeClient::new(&url).unwrap().info().unwrap_err();
        server.join().unwrap();
        assert!(
            matches!(error, ClientError::NotAuthorized { status: 401, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("--node-auth-file"), "{error}");
    }

    /// A CA, and a server certificate it signed for `names`: (CA PEM, server chain, server key).
    fn proxy_pki(
        names: &[&str],
    ) -> (
        String,
        Vec<rustls::pki_types::CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ) {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test proxy CA");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let server = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&server_key, &ca, &ca_key)
            .unwrap();
        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(server_key.serialize_der()).into();
        (ca.pem(), vec![server.der().clone()], key)
    }

    /// A TLS server for `connections` connections, answering `GET /v1/info` with a fixed body;
    /// returns each request's head (or what failed).
    pub(crate) fn tls_server(
        names: &[&str],
        connections: usize,
    ) -> (String, String, std::thread::JoinHandle<Vec<String>>) {
        let (ca_pem, chain, key) = proxy_pki(names);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            (0..connections)
                .map(|_| {
                    let (tcp, _) = listener.accept().unwrap();
                    let connection = rustls::ServerConnection::new(config.clone()).unwrap();
                    let mut tls = rustls::StreamOwned::new(connection, tcp);
                    let mut head = String::new();
                    let mut reader = BufReader::new(&mut tls);
                    loop {
                        let mut line = String::new();
                        match reader.read_line(&mut line) {
                            Ok(0) => return format!("closed after {head:?}"),
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => head.push_str(&line),
                            Err(error) => return format!("failed: {error}"),
                        }
                    }
                    let body = r#"{"version":"t","hrp":"usd","shards":1,"issuers":[],"uhs_ids":0}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                         connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    tls.write_all(answer.as_bytes()).unwrap();
                    tls.conn.send_close_notify();
                    tls.flush().unwrap();
                    head
                })
                .collect()
        });
        (url, ca_pem, handle)
    }

    #[test]
    fn https_through_a_proxy_with_a_private_ca_and_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let (url, ca_pem, server) = tls_server(&["127.0.0.1"], 2);
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "  Bearer s3cret-token \n").unwrap();
        let access = NodeAccess {
            ca_cert: Some(ca.clone()),
            auth_file: Some(token),
        };
        let client = NodeClient::with_access(&url, &access).unwrap();
        assert!(!client.is_unencrypted_remote());
        assert!(!format!("{client:?}").contains("s3cret"), "the credentials never show");
        assert_eq!(client.info().unwrap().hrp, "usd");
        // The public roots do not know the proxy's CA: the error says what to pass.
        let error = NodeClient::new(&url).unwrap().info().unwrap_err();
        assert!(matches!(error, ClientError::Tls { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains(&url) && message.contains("--ca-cert"), "{message}");
        let heads = server.join().unwrap();
        assert!(heads[0].starts_with("GET /v1/info "), "{heads:?}");
        assert!(
            heads[0]
                .to_ascii_lowercase()
                .contains("\r\nauthorization: bearer s3cret-token\r\n"),
            "{heads:?}"
        );
        assert!(heads[1].starts_with("failed"), "{heads:?}");
    }

    #[test]
    fn a_certificate_for_another_host_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let (url, ca_pem, server) = tls_server(&["node.example"], 1);
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        let access = NodeAccess {
            ca_cert: Some(ca),
            auth_file: None,
        };
        let error = NodeClient::with_access(&url, &access).unwrap().info().unwrap_err();
        server.join().unwrap();
        assert!(error.to_string().contains("not for the host"), "{error}");
    }

    #[test]
    fn access_files_are_checked_and_never_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, contents: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, contents).unwrap();
            path
        };
        let auth = |path: PathBuf| {
            let access = NodeAccess {
                ca_cert: None,
                auth_file: Some(path),
            };
            NodeClient::with_access("https://node.example", &access)
                .unwrap_err()
                .to_string()
        };
        let message = auth(file("two-lines", b"Bearer s3cret\nX-Other: s3cret"));
        assert!(
            message.contains("more than one line") && !message.contains("s3cret"),
            "{message}"
        );
        let message = auth(file("large", &vec![b'a'; AUTH_FILE_BYTES_MAX as usize + 1]));
        assert!(message.contains("larger than"), "{message}");
        assert!(auth(file("empty", b" \n")).contains("is empty"));
        assert!(auth(file("control", b"Bearer \x01s3cret")).contains("control characters"));
        assert!(auth(dir.path().join("missing")).contains("could not open it"));
        let access = NodeAccess {
            ca_cert: Some(file("not-pem", b"hello")),
            auth_file: None,
        };
        let message = NodeClient::with_access("https://node.example", &access)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("--ca-cert") && message.contains("no usable certificate"),
            "{message}"
        );
    }
}
