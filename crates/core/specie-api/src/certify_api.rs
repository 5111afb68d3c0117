//! A certifier's HTTP API (`specie certifier serve`; docs/unlinkable-format.md, "Certification"):
//!
//! - `GET /v1/info`: `{"certifier": n, "group": hex}`, its place in the group and the group
//!   (what `specie node --certifiers` takes);
//! - `POST /v1/certify` `{"txid": hex, "index": n, "token": hex}`: `{"certifier": n, "share":
//!   hex}`, its blind share of the token's certificate, only if the ledger holds that token at
//!   that place (Figure 5, steps 5–6); 422 `not_in_ledger` otherwise, 400 for what does not
//!   decode, 503 `node_unavailable` when it cannot ask the ledger.
//!
//! Anyone who can reach it can ask: it learns which token is asked about, never its owner,
//! value or serial number, and a share is useless without `k − 1` others.
//!
//! The core declares what it needs of a certifier ([`TokenCertifier`]); the privacy
//! capability's certifier is one, handed in by `specie certifier serve`.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};

use specie_service::{ApiDoc, ApiError};

use crate::api::json_rejection;
use crate::http_api::{CertifierInfoBody, CertifyBody, CertifyRequest, CERTIFY_PATH, INFO_PATH};

/// Largest request body: a token is under 400 bytes; the JSON around it.
pub const CERTIFY_BODY_BYTES_MAX: usize = 4 * 1024;

/// A certifier, as the certification API reaches it.
pub trait TokenCertifier: Send + Sync + 'static {
    fn info(&self) -> CertifierInfoBody;
    /// Its share of the certificate of `token` (its encoding) at output `index` of `txid`, or
    /// why not.
    fn certify(&self, txid: [u8; 32], index: u64, token: &[u8]) -> Result<CertifyBody, CertifyRefused>;
}

/// Why a certifier did not certify; each message says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertifyRefused {
    /// The token does not decode (400 `bad_token`).
    BadToken(String),
    /// The ledger holds no such token there (422 `not_in_ledger`).
    NotInLedger(String),
    /// The certifier cannot ask the ledger (503 `node_unavailable`).
    NodeUnavailable(String),
}

impl From<CertifyRefused> for ApiError {
    fn from(refused: CertifyRefused) -> ApiError {
        match refused {
            CertifyRefused::BadToken(message) => ApiError::new(StatusCode::BAD_REQUEST, "bad_token", message),
            CertifyRefused::NotInLedger(message) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "not_in_ledger", message)
            }
            CertifyRefused::NodeUnavailable(message) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "node_unavailable", message)
            }
        }
    }
}

type Certifier = Arc<dyn TokenCertifier>;

/// The certification service's API as an OpenAPI document.
pub fn openapi() -> ApiDoc {
    ApiDoc::new(
        "specie certifier",
        "A certifier of the unlinkable privacy level, `specie certifier serve` (docs/unlinkable-format.md).",
    )
    .get::<CertifierInfoBody>(INFO_PATH, "The certifier's place and group")
    .post::<CertifyRequest, CertifyBody>(CERTIFY_PATH, "Certify a token the ledger holds, or refuse")
}

pub fn router(certifier: Certifier) -> Router {
    Router::new()
        .route(INFO_PATH, get(info))
        .route(CERTIFY_PATH, post(certify))
        .merge(openapi().router())
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such endpoint; see docs/unlinkable-format.md",
            )
        })
        .layer(DefaultBodyLimit::max(CERTIFY_BODY_BYTES_MAX))
        .with_state(certifier)
}

async fn info(State(certifier): State<Certifier>) -> Json<CertifierInfoBody> {
    Json(certifier.info())
}

async fn certify(
    State(certifier): State<Certifier>,
    request: Result<Json<CertifyRequest>, JsonRejection>,
) -> Result<Json<CertifyBody>, ApiError> {
    let Json(request) = request.map_err(json_rejection)?;
    let bad = |code: &'static str, message: &str| ApiError::new(StatusCode::BAD_REQUEST, code, message.to_owned());
    let txid: [u8; 32] = hex::decode(request.txid.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| bad("bad_txid", "the txid is not 32 bytes of hex"))?;
    let token = hex::decode(request.token.trim()).map_err(|_| bad("bad_token", "the token is not hex"))?;
    // Asking the ledger and signing take milliseconds: off the async workers.
    let answer = tokio::task::spawn_blocking(move || certifier.certify(txid, request.index, &token))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the certification failed",
            )
        })?;
    answer.map(Json).map_err(ApiError::from)
}
