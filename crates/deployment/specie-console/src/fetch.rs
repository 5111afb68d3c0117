//! The console's reads of the platform's HTTP APIs: short time-outs, bounded bodies, no
//! redirects (an answer is never followed to another host).

use std::io::Read as _;
use std::sync::OnceLock;
use std::time::Duration;

/// The largest answer the console reads (a block's JSON, a metrics page).
const BODY_BYTES_MAX: u64 = 8 << 20;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const REQUEST_TIMEOUT: Duration = Duration::from_millis(3000);

/// Why a read got nothing to show.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url} did not answer ({reason})")]
    Unreachable { url: String, reason: String },
    #[error("{url} answered {status}: {body}")]
    Status { url: String, status: u16, body: String },
    #[error("{url} answered with more than {BODY_BYTES_MAX} bytes")]
    TooLarge { url: String },
    #[error("{url} answered what is not JSON: {reason}")]
    NotJson { url: String, reason: String },
}

fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .redirects(0)
            .build()
    })
}

/// The body of `GET url`, as text.
pub fn text(url: &str) -> Result<String, FetchError> {
    let answer = match agent().get(url).call() {
        Ok(answer) => answer,
        Err(ureq::Error::Status(status, answer)) => {
            let body = read_bounded(url, answer).unwrap_or_default();
            let body: String = body.chars().take(300).collect();
            return Err(FetchError::Status {
                url: url.to_string(),
                status,
                body,
            });
        }
        Err(error) => {
            return Err(FetchError::Unreachable {
                url: url.to_string(),
                reason: error.to_string(),
            })
        }
    };
    read_bounded(url, answer)
}

fn read_bounded(url: &str, answer: ureq::Response) -> Result<String, FetchError> {
    let mut body = String::new();
    let read = answer.into_reader().take(BODY_BYTES_MAX + 1).read_to_string(&mut body);
    read.map_err(|error| FetchError::Unreachable {
        url: url.to_string(),
        reason: error.to_string(),
    })?;
    if body.len() as u64 > BODY_BYTES_MAX {
        return Err(FetchError::TooLarge { url: url.to_string() });
    }
    Ok(body)
}

/// The body of `GET url`, as JSON.
pub fn json(url: &str) -> Result<serde_json::Value, FetchError> {
    let body = text(url)?;
    serde_json::from_str(&body).map_err(|error| FetchError::NotJson {
        url: url.to_string(),
        reason: error.to_string(),
    })
}
