//! The one error answer of every specie HTTP API: a status, and the body
//! `{"error": {"code": "...", "message": "...", "leader_http": "...", ...}}` (docs/api.md). The
//! `code` is stable, for programs; the `message` says what went wrong and what to do, for
//! people; `leader_http`, from a replica that does not lead, is where to ask instead. A service
//! whose errors carry more (FastPay's refusals carry the sequence to resume from) names those
//! fields in a struct of its own, `X`, flattened into the same object.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

/// The body of every error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody<X = NoMore> {
    pub error: ErrorDetail<X>,
}

/// What went wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail<X = NoMore> {
    /// What kind of error, stable: `bad_request`, `not_leader`, `too_many_connections`, …
    pub code: String,
    pub message: String,
    /// From a replica that does not lead: the leader's API, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_http: Option<String>,
    /// The service's own fields, if it has any.
    #[serde(flatten)]
    pub more: X,
}

/// No fields beyond the common ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoMore {}

impl<X: Default> ErrorDetail<X> {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ErrorDetail {
            code: code.to_string(),
            message: message.into(),
            leader_http: None,
            more: X::default(),
        }
    }
}

/// An answer other than success, as a handler returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError<X = NoMore> {
    pub status: StatusCode,
    /// Boxed: handlers return `Result<_, ApiError>`, and the error path may be the larger one.
    pub detail: Box<ErrorDetail<X>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError::of(status, ErrorDetail::new(code, message))
    }

    /// `400 bad_request`: the request cannot be what the caller meant.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

impl<X> ApiError<X> {
    /// The answer `status` with `detail`, a service's own fields among them.
    pub fn of(status: StatusCode, detail: ErrorDetail<X>) -> Self {
        ApiError {
            status,
            detail: Box::new(detail),
        }
    }

    /// The same answer, naming where the leader's API is.
    pub fn with_leader_http(mut self, leader_http: Option<String>) -> Self {
        self.detail.leader_http = leader_http;
        self
    }
}

impl<X: Serialize> IntoResponse for ApiError<X> {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: *self.detail })).into_response()
    }
}

/// The body of an error answer, as text (for answers written before any router runs).
pub fn error_json(code: &str, message: &str) -> String {
    let body: ErrorBody = ErrorBody {
        error: ErrorDetail::new(code, message),
    };
    serde_json::to_string(&body).expect("an error body serializes")
}

/// The longest text of an extractor's rejection kept in the error body it becomes.
const REJECTION_TEXT_BYTES_MAX: usize = 1024;

/// Middleware: an error answer that is not the one error body (the text/plain rejection of a
/// path, query or body extractor: a path segment that is not a number, JSON sent without its
/// content type) becomes one, its text the message, its code named by its status. Every service
/// answers errors in one shape however its handlers extract their input; a page made for people
/// (`text/html`, the console's) is kept as it is.
pub async fn uniform_errors(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let deliberate = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json") || value.starts_with("text/html"));
    if !(status.is_client_error() || status.is_server_error()) || deliberate {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), REJECTION_TEXT_BYTES_MAX)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
        .unwrap_or_default();
    let (code, hint) = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            "send the body as JSON with `Content-Type: application/json`",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ("body_too_large", "send less in one request"),
        StatusCode::UNPROCESSABLE_ENTITY => ("bad_json", "the body is JSON but not the request asked for"),
        StatusCode::NOT_FOUND => ("not_found", "no such endpoint or resource"),
        StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", "wrong HTTP method for this endpoint"),
        _ if status.is_server_error() => ("internal", "the service failed to answer"),
        _ => ("bad_request", "the request cannot be what was meant"),
    };
    let message = match text.is_empty() {
        true => format!("{hint}; see the service's GET /openapi.json"),
        false => format!("{text} ({hint}; see the service's GET /openapi.json)"),
    };
    ApiError::new(status, code, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    struct Extra {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next_sequence: Option<u64>,
    }

    #[test]
    fn the_body_has_one_shape_and_a_services_own_fields_sit_beside_the_common_ones() {
        assert_eq!(
            error_json("bad_request", "no \"amount\""),
            r#"{"error":{"code":"bad_request","message":"no \"amount\""}}"#
        );
        let mut detail: ErrorDetail<Extra> = ErrorDetail::new("refused", "missing earlier orders");
        detail.leader_http = Some("http://127.0.0.1:1".into());
        detail.more.next_sequence = Some(3);
        let text = serde_json::to_string(&ErrorBody { error: detail.clone() }).unwrap();
        assert_eq!(
            text,
            r#"{"error":{"code":"refused","message":"missing earlier orders","leader_http":"http://127.0.0.1:1","next_sequence":3}}"#
        );
        assert_eq!(serde_json::from_str::<ErrorBody<Extra>>(&text).unwrap().error, detail);
        // A client that knows only the common fields reads any service's errors.
        let common: ErrorBody = serde_json::from_str(&text).unwrap();
        assert_eq!(common.error.code, "refused");
        assert_eq!(common.error.leader_http.as_deref(), Some("http://127.0.0.1:1"));
    }

    #[tokio::test]
    async fn an_api_error_answers_its_status_and_body() {
        let error = ApiError::bad_request("amount: not a number").with_leader_http(Some("http://l".into()));
        let response = error.into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let body: ErrorBody = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body.error.code, "bad_request");
        assert_eq!(body.error.message, "amount: not a number");
        assert_eq!(body.error.leader_http.as_deref(), Some("http://l"));
    }
}
