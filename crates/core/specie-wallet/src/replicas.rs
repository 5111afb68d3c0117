//! A JSON client of a service that may be one process or a Raft group of replicas: the offline
//! authority and the exchange. `urls` lists the replicas, comma-separated; a replica that does
//! not lead answers 503 `not_leader` (or `outcome_unknown`) with the leader's address in
//! `leader_http`, and the call goes there; a replica that does not answer is passed over for the
//! next. Errors carry the service's `{error: {code, message}}`.

use std::cell::Cell;
use std::time::Duration;

use serde_json::Value;
use specie_service::{ErrorBody, ErrorDetail};

/// Rounds over the replicas before a call gives up (an election takes well under a second).
pub const REPLICA_ROUNDS_MAX: usize = 20;
/// How long a call waits between rounds while no replica leads.
pub const REPLICA_RETRY_WAIT_MS: u64 = 250;

/// Why a call to the replicas failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    #[error("no URL given")]
    NoUrl,
    /// The service answered with an error: its status, code and message.
    #[error("{message}")]
    Refused { status: u16, code: String, message: String },
    /// An answer that is not JSON.
    #[error("{url}: {reason}")]
    BadAnswer { url: String, reason: String },
    /// No replica answered, or none led: the last reason.
    #[error("{0}")]
    Unavailable(String),
}

impl ReplicaError {
    /// The service's error code, if it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ReplicaError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status, if the service answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ReplicaError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// What one replica said to one call.
enum Attempt {
    Answered(Value),
    Failed(ReplicaError),
    /// Ask elsewhere: the leader, if this replica knows it.
    Elsewhere {
        leader_http: Option<String>,
        why: String,
    },
    /// No answer at all: down, or not there.
    Down(String),
}

/// Replicas of one service, the one that answered last asked first.
pub struct ReplicaClient {
    urls: Vec<String>,
    bearer: Option<String>,
    /// How long one request may take (none: no limit).
    timeout: Option<Duration>,
    preferred: Cell<usize>,
}

impl ReplicaClient {
    /// `urls`: comma-separated, each like `http://127.0.0.1:8480`; `bearer` is sent as
    /// `authorization: Bearer …` if given.
    pub fn new(urls: &str, bearer: Option<String>) -> ReplicaClient {
        ReplicaClient {
            urls: urls
                .split(',')
                .map(|url| url.trim().trim_end_matches('/').to_string())
                .filter(|url| !url.is_empty())
                .collect(),
            bearer,
            timeout: None,
            preferred: Cell::new(0),
        }
    }

    /// Every request limited to `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> ReplicaClient {
        self.timeout = Some(timeout);
        self
    }

    /// The replicas' URLs, comma-separated (for messages).
    pub fn urls(&self) -> String {
        self.urls.join(",")
    }

    fn attempt(&self, url: &str, method: &str, path: &str, body: Option<&Value>) -> Attempt {
        let mut request = ureq::request(method, &format!("{url}{path}"));
        if let Some(timeout) = self.timeout {
            request = request.timeout(timeout);
        }
        if let Some(token) = &self.bearer {
            request = request.set("authorization", &format!("Bearer {token}"));
        }
        let response = match body {
            Some(body) => request.send_json(body),
            None => request.call(),
        };
        match response {
            Ok(response) => match crate::json_limited(response) {
                Ok(value) => Attempt::Answered(value),
                Err(error) => Attempt::Failed(ReplicaError::BadAnswer {
                    url: url.to_string(),
                    reason: error.to_string(),
                }),
            },
            Err(ureq::Error::Status(status, response)) => {
                let error = match crate::json_limited::<ErrorBody>(response) {
                    Ok(body) => body.error,
                    Err(_) => ErrorDetail::new("", "refused"),
                };
                match (status, error.code.as_str()) {
                    (503, "not_leader" | "outcome_unknown") => Attempt::Elsewhere {
                        leader_http: error.leader_http.map(|http| format!("http://{http}")),
                        why: error.message,
                    },
                    _ => Attempt::Failed(ReplicaError::Refused {
                        status,
                        code: error.code,
                        message: error.message,
                    }),
                }
            }
            Err(error) => Attempt::Down(format!("{url}: {error}")),
        }
    }

    /// One call, leader search included: the caller makes sure the call is safe to send again.
    /// A lone replica that does not answer fails the call at once; a group is given time to
    /// elect a leader.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, ReplicaError> {
        if self.urls.is_empty() {
            return Err(ReplicaError::NoUrl);
        }
        let mut last = String::new();
        for round in 0..REPLICA_ROUNDS_MAX {
            if round > 0 {
                std::thread::sleep(Duration::from_millis(REPLICA_RETRY_WAIT_MS));
            }
            let first = self.preferred.get();
            let (mut hinted, mut group_answered) = (None::<String>, false);
            let (mut next, mut attempts) = (0, 0);
            // Each listed replica once, and the leader each names (even one not listed), up to
            // twice as many attempts in all: two replicas naming each other end the round.
            while attempts < 2 * self.urls.len() {
                let url = match hinted.take() {
                    Some(leader) => leader,
                    None if next < self.urls.len() => {
                        next += 1;
                        self.urls[(first + next - 1) % self.urls.len()].clone()
                    }
                    None => break,
                };
                attempts += 1;
                match self.attempt(&url, method, path, body.as_ref()) {
                    Attempt::Answered(value) => {
                        if let Some(known) = self.urls.iter().position(|u| *u == url) {
                            self.preferred.set(known);
                        }
                        return Ok(value);
                    }
                    Attempt::Failed(error) => return Err(error),
                    Attempt::Elsewhere { leader_http, why } => {
                        hinted = leader_http.filter(|leader| *leader != url);
                        (last, group_answered) = (why, true);
                    }
                    Attempt::Down(why) => last = why,
                }
            }
            if self.urls.len() == 1 && !group_answered {
                break;
            }
        }
        Err(ReplicaError::Unavailable(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_split_trimmed_and_empty_ones_dropped() {
        let client = ReplicaClient::new(" http://a:1/ ,, http://b:2", None);
        assert_eq!(client.urls(), "http://a:1,http://b:2");
        assert_eq!(
            ReplicaClient::new(" , ", None).call("GET", "/", None),
            Err(ReplicaError::NoUrl)
        );
    }

    /// A one-connection-at-a-time HTTP server answering every request with `status` and `body`.
    fn serve(status: &'static str, body: String) -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap() > 2 {
                    line.clear();
                }
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(answer.as_bytes()).unwrap();
            }
        });
        address
    }

    #[test]
    fn a_follower_sends_the_call_to_its_leader_and_refusals_carry_code_and_message() {
        let leader = serve("200 OK", r#"{"height": 7}"#.into());
        let follower = serve(
            "503 Service Unavailable",
            format!(r#"{{"error": {{"code": "not_leader", "message": "ask the leader", "leader_http": "{leader}"}}}}"#),
        );
        let client = ReplicaClient::new(&format!("http://{follower}"), None);
        assert_eq!(client.call("GET", "/x", None).unwrap()["height"], 7);
        let refusing = serve(
            "422 Unprocessable Entity",
            r#"{"error": {"code": "refused", "message": "no such asset"}}"#.into(),
        );
        let error = ReplicaClient::new(&format!("http://{refusing}"), None)
            .call("GET", "/x", None)
            .unwrap_err();
        assert_eq!((error.status(), error.code()), (Some(422), Some("refused")));
        assert_eq!(error.to_string(), "no such asset");
    }

    #[test]
    fn a_lone_replica_that_does_not_answer_fails_at_once() {
        // Port 9 on 127.0.0.1 (discard) is not served in tests.
        let started = std::time::Instant::now();
        let error = ReplicaClient::new("http://127.0.0.1:9", None)
            .call("GET", "/", None)
            .unwrap_err();
        assert!(matches!(error, ReplicaError::Unavailable(_)), "{error:?}");
        assert!(started.elapsed() < Duration::from_millis(REPLICA_RETRY_WAIT_MS));
    }
}
