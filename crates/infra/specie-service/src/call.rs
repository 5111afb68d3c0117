//! A service's call into its role, however hosted (on this process's embedded host, or on a Raft
//! group's replica whose followers send callers to the leader): what the API awaits, and why a
//! call got no answer.

use std::future::Future;
use std::pin::Pin;

use axum::http::StatusCode;

use crate::error::{ApiError, ErrorDetail};

/// A future the API awaits, boxed so the service can sit behind `dyn`.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a call got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("the service is stopping")]
    Stopping,
    /// This replica does not lead its group; the leader's HTTP API, if known.
    #[error("this replica does not lead its group: ask the leader")]
    NotLeader { leader_http: Option<String> },
    /// The lead was lost while the call was in flight: the log decides. Every call of the
    /// replicated services is safe to send again (a call sent again gets its first answer).
    #[error("the lead was lost while the call was in flight: send it again")]
    OutcomeUnknown,
}

impl Unavailable {
    /// The API's error code for it (a 503 either way; `not_leader` comes with `leader_http`).
    pub fn code(&self) -> &'static str {
        match self {
            Unavailable::Stopping => "stopping",
            Unavailable::NotLeader { .. } => "not_leader",
            Unavailable::OutcomeUnknown => "outcome_unknown",
        }
    }
}

/// `503`, and the leader's API if a follower was asked.
impl<X: Default> From<Unavailable> for ApiError<X> {
    fn from(why: Unavailable) -> Self {
        let mut detail = ErrorDetail::new(why.code(), why.to_string());
        if let Unavailable::NotLeader { leader_http } = why {
            detail.leader_http = leader_http;
        }
        ApiError::of(StatusCode::SERVICE_UNAVAILABLE, detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_answers_503_not_leader_with_the_leaders_api() {
        let answer: ApiError = Unavailable::NotLeader {
            leader_http: Some("http://127.0.0.1:9".into()),
        }
        .into();
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.detail.code, "not_leader");
        assert_eq!(answer.detail.leader_http.as_deref(), Some("http://127.0.0.1:9"));
        let stopping: ApiError = Unavailable::Stopping.into();
        assert_eq!(
            (stopping.detail.code.as_str(), stopping.detail.leader_http),
            ("stopping", None)
        );
    }
}
