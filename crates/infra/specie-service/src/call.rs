//! A service's call into its role, however hosted (on this process's embedded host, or on a Raft
//! group's replica whose followers send callers to the leader): what the API awaits, and why a
//! call got no answer. And the one answer of every service that takes value from the online core
//! (the FastPay authorities, the offline authority, the exchange) to a funding it must find there.

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

/// Why a service could not learn whether the online core holds a funding's marker.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoreCheckError {
    #[error("started without a core for this currency, so it cannot check fundings")]
    NoCore,
    #[error("the online core at {at}: {reason}")]
    Unreachable { at: String, reason: String },
}

/// How a service asks one online core, over the core's HTTP API, whether a UHS id is in its
/// UHS. The lookup itself is the core's client's (`specie_wallet::marker_in_core`), handed in by
/// whoever starts the service, so a capability's service does not reach into the core's wallet.
#[derive(Clone, Debug)]
pub struct CoreApi {
    /// The core's HTTP API (`http://127.0.0.1:8080`).
    pub url: String,
    /// Asks the core at the URL whether it holds the marker (blocking).
    pub lookup: MarkerLookup,
}

/// A blocking lookup of a marker in the core whose HTTP API is at the URL.
pub type MarkerLookup = fn(core_url: &str, marker: [u8; 32]) -> Result<bool, CoreCheckError>;

impl CoreApi {
    /// Whether the core holds `marker`, asked off the async workers.
    pub async fn holds(&self, marker: [u8; 32]) -> Result<bool, CoreCheckError> {
        let (url, lookup) = (self.url.clone(), self.lookup);
        tokio::task::spawn_blocking(move || lookup(&url, marker))
            .await
            .map_err(|error| CoreCheckError::Unreachable {
                at: self.url.clone(),
                reason: format!("the lookup stopped: {error}"),
            })?
    }
}

/// The one answer to a funding check: go on if the core holds the funding's marker; else `409
/// funding_unconfirmed` (submit it to the core first), `503 no_core`, or `502 core_unreachable`.
pub fn funding_confirmed<X: Default>(held: Result<bool, CoreCheckError>) -> Result<(), ApiError<X>> {
    let (status, code, message) = match held {
        Ok(true) => return Ok(()),
        Ok(false) => (
            StatusCode::CONFLICT,
            "funding_unconfirmed",
            "the funding's marker is not in the online core's UHS: submit the funding to the core first, and \
             send it here once it is confirmed"
                .to_string(),
        ),
        Err(error @ CoreCheckError::NoCore) => (StatusCode::SERVICE_UNAVAILABLE, "no_core", error.to_string()),
        Err(error @ CoreCheckError::Unreachable { .. }) => (
            StatusCode::BAD_GATEWAY,
            "core_unreachable",
            format!("cannot ask the online core: {error}"),
        ),
    };
    Err(ApiError::of(status, ErrorDetail::new(code, message)))
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

    #[test]
    fn a_funding_goes_on_only_if_the_core_holds_it_and_each_other_case_has_its_answer() {
        assert_eq!(funding_confirmed::<crate::NoMore>(Ok(true)), Ok(()));
        let answer = |held| {
            let error: ApiError = funding_confirmed(held).unwrap_err();
            (error.status, error.detail.code)
        };
        assert_eq!(
            answer(Ok(false)),
            (StatusCode::CONFLICT, "funding_unconfirmed".to_string())
        );
        assert_eq!(
            answer(Err(CoreCheckError::NoCore)),
            (StatusCode::SERVICE_UNAVAILABLE, "no_core".to_string())
        );
        let down = CoreCheckError::Unreachable {
            at: "http://127.0.0.1:1".into(),
            reason: "refused".into(),
        };
        assert_eq!(
            answer(Err(down)),
            (StatusCode::BAD_GATEWAY, "core_unreachable".to_string())
        );
    }

    #[tokio::test]
    async fn a_core_is_asked_through_the_lookup_it_was_given_off_the_async_workers() {
        fn holds_odd(url: &str, marker: [u8; 32]) -> Result<bool, CoreCheckError> {
            match url {
                "http://core" => Ok(marker[0] % 2 == 1),
                _ => Err(CoreCheckError::Unreachable {
                    at: url.to_string(),
                    reason: "no such core".into(),
                }),
            }
        }
        let core = CoreApi {
            url: "http://core".into(),
            lookup: holds_odd,
        };
        assert_eq!(core.holds([1; 32]).await, Ok(true));
        assert_eq!(core.holds([2; 32]).await, Ok(false));
        let elsewhere = CoreApi {
            url: "http://elsewhere".into(),
            lookup: holds_odd,
        };
        let error = funding_confirmed::<crate::NoMore>(elsewhere.holds([1; 32]).await).unwrap_err();
        assert_eq!(error.detail.code, "core_unreachable");
    }
}
