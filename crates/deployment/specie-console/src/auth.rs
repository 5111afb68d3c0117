//! Who is at the browser: a session per visitor (an unguessable id in an HttpOnly, SameSite=Strict
//! cookie), a CSRF token per session that every form carries back, and the operator's login.
//!
//! - A session is made only by the login page, so that its form carries a CSRF token; every
//!   other page reads the visitor's session if there is one and never sets a cookie (so a link
//!   or a forged form from another site cannot replace the operator's cookie). At most
//!   [`SESSIONS_MAX`] visitors' sessions are kept (the oldest go first), and apart from them at
//!   most [`OPERATOR_SESSIONS_MAX`] logged in, so that strangers cannot push the operator's
//!   session out; each lasts at most [`SESSION_LIFETIME`]; logging in replaces the session's
//!   id (no fixation).
//! - A post is taken only with its session's CSRF token, compared in constant time, and only
//!   from this console's own pages: a browser's `Origin` (when sent) must be the console's
//!   origin, and `Sec-Fetch-Site` (when sent) must not be another site.
//! - The operator's login compares the token (256 bits: guessing is hopeless) in constant time;
//!   a wrong one is answered after [`LOGIN_FAILURE_DELAY`], and never locks anyone out.

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use rand::RngCore as _;
use subtle::ConstantTimeEq as _;

/// The operator's login token, in the cluster's PKI directory.
pub const OPERATOR_TOKEN_FILE: &str = "console.token";
/// The session cookie's name.
pub const COOKIE: &str = "specie_console";
const SESSIONS_MAX: usize = 4096;
const OPERATOR_SESSIONS_MAX: usize = 64;
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// How long a wrong token's answer waits.
pub const LOGIN_FAILURE_DELAY: Duration = Duration::from_secs(1);

/// One visitor's session as a page sees it.
#[derive(Clone, Debug)]
pub struct Visitor {
    pub id: String,
    pub csrf: String,
    pub operator: bool,
    /// Made by this request: its cookie must be set.
    pub new: bool,
    /// Its cookie is for HTTPS only (the console's origin is https://).
    pub secure: bool,
}

struct Session {
    csrf: String,
    operator: bool,
    made: Instant,
}

#[derive(Default)]
pub struct Sessions {
    inner: Mutex<SessionsInner>,
    /// The origin browsers reach the console at, when it is not the one they name in `Host`
    /// (behind a proxy): e.g. `https://console.bank.example`.
    origin: Option<String>,
}

#[derive(Default)]
struct SessionsInner {
    by_id: HashMap<String, Session>,
    /// Visitors' sessions, oldest first; and the operator's, apart.
    order: VecDeque<String>,
    operator_order: VecDeque<String>,
}

/// Why a post was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No session, a wrong CSRF token, or a post from another site.
    Forged,
    /// The wallets need the operator's login.
    NotOperator,
    /// A wrong token.
    WrongToken,
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn cookie_session(headers: &HeaderMap) -> Option<String> {
    let cookies = headers.get_all(axum::http::header::COOKIE);
    cookies
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Whether a post comes from this console's own pages, as far as the browser says: its
/// `Origin` is the configured `origin`, or the host the request was sent to.
fn same_origin(headers: &HeaderMap, origin: Option<&str>) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    match (header("origin"), header("host")) {
        (Some(sent), _) if Some(sent) == origin => true,
        (Some(sent), Some(host)) => {
            sent.strip_prefix("http://").or_else(|| sent.strip_prefix("https://")) == Some(host)
        }
        (Some(_), None) => false,
        (None, _) => true,
    }
}

fn equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Sessions {
    /// Sessions of a console that browsers reach at `origin` (None: the address they name).
    pub fn new(origin: Option<String>) -> Sessions {
        Sessions {
            inner: Mutex::default(),
            origin,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SessionsInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The visitor's session, or a stranger without one (no cookie is set for it).
    pub fn visit(&self, headers: &HeaderMap) -> Visitor {
        self.session(headers).unwrap_or(Visitor {
            id: String::new(),
            csrf: String::new(),
            operator: false,
            new: false,
            secure: false,
        })
    }

    /// The visitor's session, or a new one (the login page: its form needs a CSRF token).
    pub fn visit_to_log_in(&self, headers: &HeaderMap) -> Visitor {
        let secure = self.origin.as_deref().is_some_and(|o| o.starts_with("https://"));
        self.session(headers).unwrap_or_else(|| self.lock().open(false, secure))
    }

    fn session(&self, headers: &HeaderMap) -> Option<Visitor> {
        let id = cookie_session(headers)?;
        let inner = self.lock();
        let session = inner.by_id.get(&id).filter(|s| s.made.elapsed() < SESSION_LIFETIME)?;
        Some(Visitor {
            csrf: session.csrf.clone(),
            operator: session.operator,
            id,
            new: false,
            secure: false,
        })
    }

    /// The session of a post that carries `csrf`, if it is one of this console's own forms.
    pub fn check_post(&self, headers: &HeaderMap, csrf: &str) -> Result<Visitor, Refused> {
        if !same_origin(headers, self.origin.as_deref()) {
            return Err(Refused::Forged);
        }
        let visitor = self.session(headers).ok_or(Refused::Forged)?;
        equal(&visitor.csrf, csrf).then_some(visitor).ok_or(Refused::Forged)
    }

    /// Logs `visitor` in as the operator if `given` is the token: a new session (new id and
    /// CSRF token) replaces the old.
    pub fn log_in(&self, visitor: &Visitor, given: &str, token: &str) -> Result<Visitor, Refused> {
        if !equal(given.trim(), token) {
            return Err(Refused::WrongToken);
        }
        let secure = self.origin.as_deref().is_some_and(|o| o.starts_with("https://"));
        let mut inner = self.lock();
        inner.by_id.remove(&visitor.id);
        Ok(inner.open(true, secure))
    }

    /// Ends `visitor`'s session; the next page opens a new one.
    pub fn log_out(&self, visitor: &Visitor) {
        self.lock().by_id.remove(&visitor.id);
    }
}

impl SessionsInner {
    fn open(&mut self, operator: bool, secure: bool) -> Visitor {
        let (order, max) = match operator {
            true => (&mut self.operator_order, OPERATOR_SESSIONS_MAX),
            false => (&mut self.order, SESSIONS_MAX),
        };
        // Ids of sessions already ended may linger in the order: drop them as the order grows.
        order.retain(|id| self.by_id.contains_key(id));
        while order.len() >= max {
            let Some(oldest) = order.pop_front() else { break };
            self.by_id.remove(&oldest);
        }
        let id = random_hex();
        let csrf = random_hex();
        self.by_id.insert(
            id.clone(),
            Session {
                csrf: csrf.clone(),
                operator,
                made: Instant::now(),
            },
        );
        order.push_back(id.clone());
        Visitor {
            id,
            csrf,
            operator,
            new: true,
            secure,
        }
    }
}

/// Why the operator's token file could not be read or made.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct TokenFileError {
    path: String,
    reason: String,
}

/// The token in `dir/console.token`, made (0600, 32 random bytes as hex) if the file is not there.
pub fn operator_token(dir: &Path) -> Result<String, TokenFileError> {
    let path = dir.join(OPERATOR_TOKEN_FILE);
    let failed = |reason: String| TokenFileError {
        path: path.display().to_string(),
        reason,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim().to_string();
            if token.len() < 32 {
                return Err(failed(
                    "the token is shorter than 32 characters: delete the file and start the console again to make a new one"
                        .into(),
                ));
            }
            Ok(token)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let token = random_hex();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(|error| failed(format!("cannot create it: {error}")))?;
            writeln!(file, "{token}")
                .and_then(|()| file.sync_all())
                .map_err(|error| failed(format!("cannot write it: {error}")))?;
            Ok(token)
        }
        Err(error) => Err(failed(format!("cannot read it: {error}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_post_needs_its_session_token_and_this_origin() {
        let sessions = Sessions::default();
        let visitor = sessions.visit_to_log_in(&HeaderMap::new());
        assert!(visitor.new);
        let cookie = format!("{COOKIE}={}", visitor.id);
        let ours = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8480"),
            ("origin", "http://127.0.0.1:8480"),
        ]);
        assert_eq!(sessions.check_post(&ours, &visitor.csrf).unwrap().id, visitor.id);
        assert_eq!(sessions.check_post(&ours, "00").unwrap_err(), Refused::Forged);
        assert_eq!(sessions.check_post(&ours, "").unwrap_err(), Refused::Forged);
        let elsewhere = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8480"),
            ("origin", "http://evil.test"),
        ]);
        assert_eq!(
            sessions.check_post(&elsewhere, &visitor.csrf).unwrap_err(),
            Refused::Forged
        );
        let cross = headers(&[("cookie", &cookie), ("sec-fetch-site", "cross-site")]);
        assert_eq!(sessions.check_post(&cross, &visitor.csrf).unwrap_err(), Refused::Forged);
        let stranger = headers(&[("cookie", &format!("{COOKIE}={}", random_hex()))]);
        assert_eq!(
            sessions.check_post(&stranger, &visitor.csrf).unwrap_err(),
            Refused::Forged
        );
        // The same page seen again keeps the session.
        assert_eq!(sessions.visit(&ours).id, visitor.id);
    }

    #[test]
    fn behind_a_proxy_the_configured_origin_is_the_consoles() {
        let sessions = Sessions::new(Some("https://console.bank.example".into()));
        let visitor = sessions.visit_to_log_in(&HeaderMap::new());
        assert!(visitor.secure, "an https origin's cookie is Secure");
        let cookie = format!("{COOKIE}={}", visitor.id);
        let proxied = |origin: &str| headers(&[("cookie", &cookie), ("host", "127.0.0.1:8495"), ("origin", origin)]);
        assert!(sessions
            .check_post(&proxied("https://console.bank.example"), &visitor.csrf)
            .is_ok());
        assert!(sessions
            .check_post(&proxied("http://127.0.0.1:8495"), &visitor.csrf)
            .is_ok());
        assert_eq!(
            sessions
                .check_post(&proxied("https://evil.example"), &visitor.csrf)
                .unwrap_err(),
            Refused::Forged
        );
    }

    #[test]
    fn only_the_login_page_makes_a_session() {
        let sessions = Sessions::default();
        let stranger = sessions.visit(&HeaderMap::new());
        assert!(!stranger.new && stranger.id.is_empty() && !stranger.operator);
        // A stranger's empty token is no session's.
        assert_eq!(sessions.check_post(&HeaderMap::new(), "").unwrap_err(), Refused::Forged);
        assert_eq!(sessions.lock().by_id.len(), 0);
    }

    #[test]
    fn logging_in_replaces_the_session_and_wrong_tokens_lock_no_one_out() {
        let sessions = Sessions::default();
        let token = random_hex();
        let visitor = sessions.visit_to_log_in(&HeaderMap::new());
        for _ in 0..100 {
            assert_eq!(
                sessions.log_in(&visitor, "guess", &token).unwrap_err(),
                Refused::WrongToken
            );
        }
        let operator = sessions.log_in(&visitor, &format!(" {token}\n"), &token).unwrap();
        assert!(operator.operator && operator.id != visitor.id && operator.csrf != visitor.csrf);
        let old = headers(&[("cookie", &format!("{COOKIE}={}", visitor.id))]);
        assert!(
            sessions.visit(&old).id.is_empty(),
            "the session before the login is gone"
        );
    }

    #[test]
    fn strangers_visits_never_push_the_operators_session_out() {
        let sessions = Sessions::default();
        let token = random_hex();
        let visitor = sessions.visit_to_log_in(&HeaderMap::new());
        let operator = sessions.log_in(&visitor, &token, &token).unwrap();
        let mut first = None;
        for _ in 0..SESSIONS_MAX + 10 {
            let stranger = sessions.visit_to_log_in(&HeaderMap::new());
            first.get_or_insert(stranger.id);
        }
        let seen = |id: &str| headers(&[("cookie", &format!("{COOKIE}={id}"))]);
        assert!(
            sessions.visit(&seen(&operator.id)).operator,
            "the operator is still logged in"
        );
        assert!(
            sessions.visit(&seen(&first.unwrap())).id.is_empty(),
            "the oldest stranger's session went"
        );
    }

    #[test]
    fn the_token_file_is_made_once_and_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let token = operator_token(dir.path()).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(operator_token(dir.path()).unwrap(), token);
        let mode = std::fs::metadata(dir.path().join(OPERATOR_TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join(OPERATOR_TOKEN_FILE), "short\n").unwrap();
        assert!(operator_token(dir.path()).unwrap_err().to_string().contains("shorter"));
    }
}
