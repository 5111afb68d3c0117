//! The one client of a service that may be one process or a Raft group of replicas (the offline
//! authority, the exchange, a FastPay authority's shards). A replica that does not lead answers
//! with a code of [`ASK_ELSEWHERE`] and, if it knows, the leader's address in `leader_http`; the
//! call goes there. A replica that does not answer is passed over for the next. How long the
//! search goes on is the caller's [`LeaderSearch`]. Every answer is read within a bound.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::error::{ErrorBody, ErrorDetail, NoMore};

/// The largest answer a client reads unless it says otherwise.
pub const ANSWER_BYTES_MAX: u64 = 8 << 20;

/// The error codes with which a replica says "ask another": it does not lead, it lost the lead
/// while the call was in flight (the outcome is unknown: every call sent through this client is
/// one that is safe to send again), or it is stopping.
pub const ASK_ELSEWHERE: [&str; 3] = ["not_leader", "outcome_unknown", "stopping"];

/// How long a call looks for a replica that answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderSearch {
    /// Rounds over the replicas (each listed replica once, and the leaders they name).
    pub rounds_max: u32,
    /// The pause after a round that found no leader (an election takes well under a second).
    pub pause: Duration,
    /// The whole call, leader search included; `None`: bounded by the rounds and
    /// [`Replicas::with_request_timeout`] only.
    pub deadline: Option<Duration>,
    /// A group none of whose replicas could be reached in a round: wait for it (`true`: it may
    /// be restarting) or give up at once (`false`: waiting would hold up the caller's other
    /// calls). A lone replica that cannot be reached always fails the call at once.
    pub wait_while_down: bool,
    /// Follow a replica's hint to a leader the caller did not list (`true`: the caller may list
    /// any one replica of the group) or ask only the listed ones.
    pub follow_unlisted: bool,
}

impl LeaderSearch {
    /// For a person's command: up to 20 rounds 250 ms apart (about five seconds of elections),
    /// waiting for a group that restarts, any replica a good starting point.
    pub fn patient() -> LeaderSearch {
        LeaderSearch {
            rounds_max: 20,
            pause: Duration::from_millis(250),
            deadline: None,
            wait_while_down: true,
            follow_unlisted: true,
        }
    }
}

/// What a call sends.
#[derive(Clone, Copy, Debug)]
pub enum Body<'a> {
    Empty,
    Json(&'a serde_json::Value),
    /// Canonical bytes, sent as `application/octet-stream`.
    Bytes(&'a [u8]),
}

/// Why a call failed. `X` is the service's own error fields (see [`ErrorDetail`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError<X = NoMore> {
    #[error("no URL given")]
    NoUrl,
    /// The service answered with an error (an answer that is not an error body reads as one
    /// with an empty code and the status as its message).
    #[error("{}", error.message)]
    Refused {
        url: String,
        status: u16,
        error: Box<ErrorDetail<X>>,
    },
    /// A success whose body could not be read (too large, cut off, not JSON).
    #[error("{url}: {reason}")]
    BadAnswer { url: String, reason: String },
    /// No replica answered, or none led: the last reason.
    #[error("{0}")]
    Unavailable(String),
}

impl<X> CallError<X> {
    /// The service's error code, if it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            CallError::Refused { error, .. } => Some(&error.code),
            _ => None,
        }
    }

    /// The HTTP status, if the service answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// What one replica said to one call.
enum Attempt<X> {
    /// A success's body, or the service's refusal: the call ends here.
    Answered(Result<Vec<u8>, CallError<X>>),
    /// Ask elsewhere: the leader, if this replica knows it.
    Elsewhere { leader_http: Option<String>, why: String },
    /// No answer at all: down, not there, or timed out.
    Down(String),
}

/// The replicas of one service, the one believed to lead asked first. `Sync`: threads may share
/// one, and what one call learns of the leader the next starts from.
pub struct Replicas {
    urls: Vec<String>,
    agent: ureq::Agent,
    bearer: Option<String>,
    search: LeaderSearch,
    /// One request's limit (none: the agent's, or the search's deadline).
    request_timeout: Option<Duration>,
    leader: AtomicUsize,
}

impl Replicas {
    /// `urls`: comma-separated, each like `http://127.0.0.1:8480` (blanks and trailing slashes
    /// ignored).
    pub fn new(urls: &str, search: LeaderSearch) -> Replicas {
        Replicas::of(
            urls.split(',').map(str::to_string).collect(),
            ureq::AgentBuilder::new().build(),
            search,
        )
    }

    /// The replicas at `urls`, called through `agent` (its connections pooled and shared).
    pub fn of(urls: Vec<String>, agent: ureq::Agent, search: LeaderSearch) -> Replicas {
        Replicas {
            urls: urls
                .iter()
                .map(|url| url.trim().trim_end_matches('/').to_string())
                .filter(|url| !url.is_empty())
                .collect(),
            agent,
            bearer: None,
            search,
            request_timeout: None,
            leader: AtomicUsize::new(0),
        }
    }

    /// Sends `authorization: Bearer <token>` with every call, if `token` is given.
    pub fn with_bearer(mut self, token: Option<String>) -> Replicas {
        self.bearer = token;
        self
    }

    /// Every request limited to `timeout`.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Replicas {
        self.request_timeout = Some(timeout);
        self
    }

    /// The replicas' URLs, comma-separated (for messages).
    pub fn urls(&self) -> String {
        self.urls.join(",")
    }

    /// One call, leader search included; the answer's JSON. The caller makes sure the call is
    /// safe to send again.
    pub fn call_json<T: DeserializeOwned, X: DeserializeOwned + Default>(
        &self,
        method: &str,
        path: &str,
        body: Body<'_>,
    ) -> Result<T, CallError<X>> {
        let bytes = self.call(method, path, body)?;
        serde_json::from_slice(&bytes).map_err(|error| CallError::BadAnswer {
            url: self.urls(),
            reason: format!("not JSON of the expected shape: {error}"),
        })
    }

    /// One call, leader search included; the answer's body. The caller makes sure the call is
    /// safe to send again.
    pub fn call<X: DeserializeOwned + Default>(
        &self,
        method: &str,
        path: &str,
        body: Body<'_>,
    ) -> Result<Vec<u8>, CallError<X>> {
        if self.urls.is_empty() {
            return Err(CallError::NoUrl);
        }
        let started = Instant::now();
        let count = self.urls.len();
        let mut last = String::from("no replica tried");
        for round in 0..self.search.rounds_max {
            if round > 0 {
                let Some(remaining) = self.remaining(started) else {
                    break;
                };
                std::thread::sleep(self.search.pause.min(remaining));
            }
            let first = self.leader.load(Ordering::Relaxed);
            let (mut hinted, mut next, mut attempts) = (None::<String>, 0, 0);
            let mut led_elsewhere = false;
            // Each listed replica once, and the leader each names, up to twice as many attempts
            // in all: two replicas naming each other end the round.
            while attempts < 2 * count {
                let url = match hinted.take() {
                    Some(leader) => leader,
                    None if next < count => {
                        next += 1;
                        self.urls[(first + next - 1) % count].clone()
                    }
                    None => break,
                };
                let Some(remaining) = self.remaining(started) else {
                    return Err(CallError::Unavailable(last));
                };
                attempts += 1;
                match self.attempt(&url, method, path, body, remaining) {
                    Attempt::Answered(result) => {
                        if let Some(known) = self.urls.iter().position(|u| *u == url) {
                            self.leader.store(known, Ordering::Relaxed);
                        }
                        return result;
                    }
                    Attempt::Elsewhere { leader_http, why } => {
                        hinted = leader_http
                            .and_then(|http| self.leader_url(&http))
                            .filter(|leader| *leader != url);
                        (last, led_elsewhere) = (why, true);
                    }
                    Attempt::Down(why) => last = why,
                }
            }
            if !led_elsewhere && (count == 1 || !self.search.wait_while_down) {
                break;
            }
        }
        Err(CallError::Unavailable(last))
    }

    /// What is left of the call's deadline (`Some(Duration::MAX)` without one); `None`: spent.
    fn remaining(&self, started: Instant) -> Option<Duration> {
        match self.search.deadline {
            None => Some(Duration::MAX),
            Some(deadline) => Some(deadline.saturating_sub(started.elapsed())).filter(|left| !left.is_zero()),
        }
    }

    /// The URL of the leader a replica named by its address (`127.0.0.1:8480`): the listed
    /// replica at that address, else (if the search follows unlisted leaders) the address itself.
    fn leader_url(&self, http: &str) -> Option<String> {
        let address = http.trim_start_matches("http://");
        let listed = self
            .urls
            .iter()
            .find(|url| url.trim_start_matches("http://") == address);
        match listed {
            Some(url) => Some(url.clone()),
            None if self.search.follow_unlisted => Some(format!("http://{address}")),
            None => None,
        }
    }

    fn attempt<X: DeserializeOwned + Default>(
        &self,
        url: &str,
        method: &str,
        path: &str,
        body: Body<'_>,
        remaining: Duration,
    ) -> Attempt<X> {
        let mut request = self.agent.request(method, &format!("{url}{path}"));
        let timeout = self.request_timeout.map_or(remaining, |limit| limit.min(remaining));
        if timeout != Duration::MAX {
            request = request.timeout(timeout);
        }
        if let Some(token) = &self.bearer {
            request = request.set("authorization", &format!("Bearer {token}"));
        }
        let response = match body {
            Body::Empty => request.call(),
            Body::Json(value) => request.send_json(value),
            Body::Bytes(bytes) => request
                .set("content-type", "application/octet-stream")
                .send_bytes(bytes),
        };
        match response {
            Ok(response) => {
                Attempt::Answered(
                    read_limited(response, ANSWER_BYTES_MAX).map_err(|error| CallError::BadAnswer {
                        url: url.to_string(),
                        reason: error.to_string(),
                    }),
                )
            }
            Err(ureq::Error::Status(status, response)) => {
                let error = read_limited(response, ANSWER_BYTES_MAX)
                    .ok()
                    .and_then(|bytes| serde_json::from_slice::<ErrorBody<X>>(&bytes).ok())
                    .map_or_else(|| ErrorDetail::new("", format!("HTTP {status}")), |body| body.error);
                if ASK_ELSEWHERE.contains(&error.code.as_str()) {
                    return Attempt::Elsewhere {
                        leader_http: error.leader_http,
                        why: format!("{url}: {}", error.message),
                    };
                }
                Attempt::Answered(Err(CallError::Refused {
                    url: url.to_string(),
                    status,
                    error: Box::new(error),
                }))
            }
            // ureq says which URL it could not reach.
            Err(error) => Attempt::Down(error.to_string()),
        }
    }
}

/// The body of `response`, refused past `bytes_max` bytes rather than cut short.
pub fn read_limited(response: ureq::Response, bytes_max: u64) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    response.into_reader().take(bytes_max + 1).read_to_end(&mut body)?;
    if body.len() as u64 > bytes_max {
        return Err(std::io::Error::other(format!(
            "the answer is larger than {bytes_max} bytes"
        )));
    }
    Ok(body)
}

/// The JSON body of `response`, refused past [`ANSWER_BYTES_MAX`] bytes.
pub fn json_limited<T: DeserializeOwned>(response: ureq::Response) -> std::io::Result<T> {
    serde_json::from_slice(&read_limited(response, ANSWER_BYTES_MAX)?).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    use axum::http::StatusCode;
    use axum::routing::any;
    use axum::Router;

    fn patient(urls: &str) -> Replicas {
        Replicas::new(urls, LeaderSearch::patient())
    }

    #[test]
    fn urls_are_split_trimmed_and_empty_ones_dropped() {
        assert_eq!(patient(" http://a:1/ ,, http://b:2").urls(), "http://a:1,http://b:2");
        assert_eq!(
            patient(" , ").call::<NoMore>("GET", "/", Body::Empty),
            Err(CallError::NoUrl)
        );
    }

    /// A replica on 127.0.0.1 answering every request with `status` and `body`, counting them;
    /// it serves until its runtime is dropped.
    fn serve(status: StatusCode, body: String) -> (String, Arc<AtomicU32>, tokio::runtime::Runtime) {
        let asked = Arc::new(AtomicU32::new(0));
        let counter = asked.clone();
        let app = Router::new().fallback(any(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            let body = body.clone();
            async move { (status, [("content-type", "application/json")], body) }
        }));
        let (runtime, address) = crate::server::serve_on_loopback(app, crate::HttpLimits::default()).unwrap();
        (address.to_string(), asked, runtime)
    }

    #[test]
    fn a_follower_sends_the_call_to_its_leader_listed_or_not_as_the_search_says() {
        let (leader, _, _leader) = serve(StatusCode::OK, r#"{"height": 7}"#.into());
        for code in ASK_ELSEWHERE {
            let (follower, _, _follower) = serve(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(r#"{{"error": {{"code": "{code}", "message": "ask the leader", "leader_http": "{leader}"}}}}"#),
            );
            let answer: serde_json::Value = patient(&format!("http://{follower}"))
                .call_json::<_, NoMore>("GET", "/x", Body::Empty)
                .unwrap();
            assert_eq!(answer["height"], 7, "{code}");
            // Asking only listed replicas, a hint elsewhere leads nowhere: the call gives up
            // within its deadline, naming the last reason.
            let strict = LeaderSearch {
                deadline: Some(Duration::from_millis(300)),
                follow_unlisted: false,
                pause: Duration::from_millis(10),
                ..LeaderSearch::patient()
            };
            let error = Replicas::new(&format!("http://{follower}"), strict)
                .call::<NoMore>("GET", "/x", Body::Empty)
                .unwrap_err();
            assert!(
                matches!(&error, CallError::Unavailable(why) if why.contains("ask the leader")),
                "{error:?}"
            );
        }
    }

    #[test]
    fn refusals_carry_status_code_message_and_the_services_own_fields() {
        #[derive(Debug, Default, PartialEq, Eq, serde::Deserialize)]
        struct Extra {
            next_sequence: Option<u64>,
        }
        let (refusing, asked, _refusing) = serve(
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"error": {"code": "refused", "message": "no such asset", "next_sequence": 4}}"#.into(),
        );
        // The down replica (port 9, not served in tests) is passed over; the refusal ends the
        // call (it is not asked again).
        let replicas = patient(&format!("http://127.0.0.1:9,http://{refusing}"));
        let error = replicas.call::<Extra>("GET", "/x", Body::Empty).unwrap_err();
        assert_eq!((error.status(), error.code()), (Some(422), Some("refused")));
        assert_eq!(error.to_string(), "no such asset");
        assert!(matches!(&error, CallError::Refused { error, .. } if error.more.next_sequence == Some(4)));
        assert_eq!(asked.load(Ordering::Relaxed), 1);
        // What answered is asked first the next time.
        replicas.call::<Extra>("GET", "/x", Body::Empty).unwrap_err();
        assert_eq!(replicas.leader.load(Ordering::Relaxed), 1);
        // An answer that is no error body still says its status.
        let (plain, _, _plain) = serve(StatusCode::INTERNAL_SERVER_ERROR, "oops".into());
        let error = patient(&format!("http://{plain}"))
            .call::<NoMore>("GET", "/", Body::Empty)
            .unwrap_err();
        assert_eq!((error.status(), error.to_string()), (Some(500), "HTTP 500".to_string()));
    }

    #[test]
    fn answers_past_the_bound_are_refused_not_cut() {
        let (big, _, _big) = serve(StatusCode::OK, "x".repeat(ANSWER_BYTES_MAX as usize + 1));
        let error = patient(&format!("http://{big}"))
            .call::<NoMore>("GET", "/", Body::Empty)
            .unwrap_err();
        let bound = format!("larger than {ANSWER_BYTES_MAX}");
        assert!(
            matches!(&error, CallError::BadAnswer { reason, .. } if reason.contains(&bound)),
            "{error:?}"
        );
    }

    #[test]
    fn a_lone_replica_or_an_impatient_group_that_cannot_be_reached_fails_at_once() {
        // Ports 9 and 7 on 127.0.0.1 (discard, echo) are not served in tests.
        let started = Instant::now();
        let error = patient("http://127.0.0.1:9")
            .call::<NoMore>("GET", "/", Body::Empty)
            .unwrap_err();
        assert!(matches!(error, CallError::Unavailable(_)), "{error:?}");
        let impatient = LeaderSearch {
            wait_while_down: false,
            ..LeaderSearch::patient()
        };
        let error = Replicas::new("http://127.0.0.1:9,http://127.0.0.1:7", impatient)
            .call::<NoMore>("GET", "/", Body::Empty)
            .unwrap_err();
        assert!(matches!(error, CallError::Unavailable(_)), "{error:?}");
        assert!(started.elapsed() < LeaderSearch::patient().pause);
    }
}
