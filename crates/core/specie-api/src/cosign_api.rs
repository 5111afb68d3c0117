//! An active auditor's HTTP API (`specie audit serve`; docs/privacy.md, "Active auditors"):
//!
//! - `GET /v1/info`: `{"cosigning_key": hex}`, the key `specie node --active-auditor` takes;
//! - `POST /v1/cosign` `{"transaction": hex}`: `{"auditor": hex, "witness": hex}`, the p2pk
//!   witness to append after the transaction's own, or 422 with the refusal's code
//!   (`not_private`, `invalid_proof`, `unreadable`, `unknown_owner`, `over_limit`), 400 for
//!   what does not decode.
//!
//! Anyone who can reach it can ask; it signs only what its policy passes, and its signature is
//! only an approval (the transaction still needs its owners' signatures or spend proofs).
//!
//! The core declares what it needs of a co-signer ([`Cosigner`]); the privacy capability's active
//! auditor (`specie_auditor::ActiveAuditor`) is one, handed in by `specie audit serve`.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use specie_codec::Decode;
use specie_transaction::{DecodeLimits, SpecieTransaction, Witness};

use specie_service::{ApiDoc, ApiError};

use crate::api::json_rejection;
use crate::http_api::{CosignBody, CosignInfoBody, CosignRequest, COSIGN_PATH, INFO_PATH};

/// Largest request body: a hex transaction at the decoder's limit, and the JSON around it.
pub const COSIGN_BODY_BYTES_MAX: usize = 2 * DecodeLimits::TRANSACTION_BYTES_MAX_DEFAULT + 1024;

/// An active auditor, as the co-signing API reaches it.
pub trait Cosigner: Send + Sync + 'static {
    /// The co-signing key (x-only): what `specie node --active-auditor` takes.
    fn public_key(&self) -> [u8; 32];
    /// The p2pk witness to append after `tx`'s own, or why the policy refuses it.
    fn review(&self, tx: &SpecieTransaction) -> Result<Witness, CosignRefused>;
}

/// A co-signer's refusal: a stable code (`not_private`, `invalid_proof`, `unreadable`,
/// `unknown_owner`, `over_limit`) and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CosignRefused {
    pub code: &'static str,
    pub message: String,
}

type Auditor = Arc<dyn Cosigner>;

/// The co-signing service's API as an OpenAPI document.
pub fn openapi() -> ApiDoc {
    ApiDoc::new(
        "specie active auditor",
        "An active auditor's co-signing service, `specie audit serve` (docs/privacy.md, \"The auditor's guide\").",
    )
    .get::<CosignInfoBody>(INFO_PATH, "The auditor's keys")
    .post::<CosignRequest, CosignBody>(COSIGN_PATH, "Review a private transaction and co-sign it, or refuse")
}

pub fn router(auditor: Auditor) -> Router {
    Router::new()
        .route(INFO_PATH, get(info))
        .route(COSIGN_PATH, post(cosign))
        .merge(openapi().router())
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such endpoint; see docs/privacy.md",
            )
        })
        .layer(DefaultBodyLimit::max(COSIGN_BODY_BYTES_MAX))
        .with_state(auditor)
}

async fn info(State(auditor): State<Auditor>) -> Json<CosignInfoBody> {
    Json(CosignInfoBody {
        cosigning_key: hex::encode(auditor.public_key()),
    })
}

async fn cosign(
    State(auditor): State<Auditor>,
    request: Result<Json<CosignRequest>, JsonRejection>,
) -> Result<Json<CosignBody>, ApiError> {
    let Json(request) = request.map_err(json_rejection)?;
    let bytes = hex::decode(request.transaction.trim())
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "bad_transaction", "the transaction is not hex"))?;
    let tx = SpecieTransaction::decode_exact(&bytes)
        .map_err(|error| ApiError::new(StatusCode::BAD_REQUEST, "bad_transaction", error.to_string()))?;
    // Proof verification takes milliseconds: off the async workers.
    let reviewer = auditor.clone();
    let verdict = tokio::task::spawn_blocking(move || reviewer.review(&tx))
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the review failed"))?;
    match verdict {
        Ok(witness) => Ok(Json(CosignBody {
            auditor: hex::encode(auditor.public_key()),
            witness: hex::encode(&witness.0),
        })),
        Err(refusal) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            refusal.code,
            refusal.message,
        )),
    }
}
