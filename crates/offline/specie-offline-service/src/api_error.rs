//! The error answer of the HTTP APIs of the replicated services (the offline authority, the
//! exchange): a status, a stable code, a message, and from a replica that does not lead the
//! leader's API, so one client (`specie_wallet::replicas::ReplicaClient`) follows both.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::service::Unavailable;

/// An answer other than success: the status, a stable code, and what went wrong.
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Where the caller should ask instead: the leader's API, from a replica that does not lead.
    pub leader_http: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if let Some(leader_http) = self.leader_http {
            body["error"]["leader_http"] = Value::String(leader_http);
        }
        (self.status, Json(body)).into_response()
    }
}

pub fn error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        code,
        message: message.into(),
        leader_http: None,
    }
}

/// A call with no answer: 503, and the leader's API if a follower was asked.
pub fn unavailable(why: Unavailable) -> ApiError {
    let mut answer = error(StatusCode::SERVICE_UNAVAILABLE, why.code(), why.to_string());
    if let Unavailable::NotLeader { leader_http } = why {
        answer.leader_http = leader_http;
    }
    answer
}

pub fn bad_request(message: impl Into<String>) -> ApiError {
    error(StatusCode::BAD_REQUEST, "bad_request", message)
}
