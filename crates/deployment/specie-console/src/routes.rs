//! The console's routes: the operator's views (read-only, open), the login, and the wallets
//! (the operator's only). Every answer carries the strict security headers.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Form, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup, DOCTYPE};

use crate::auth::{Refused, Visitor, COOKIE};
use crate::pages::{self, layout, notice};
use crate::{views, wallet_views, Console, ConsoleConfig};

/// The largest form the console takes from anyone (the login, a wallet's name).
const FORM_BYTES_MAX: usize = 16 * 1024;
/// The largest form a wallet's action takes (an offline payment of the most tokens, each with
/// the most hops, is the largest field); read only once the operator's session is seen.
const WALLET_FORM_BYTES_MAX: usize = crate::wallet::PAYMENT_CHARS_MAX + 16 * 1024;

/// What every page forbids: any script, any inline style, any other origin, being framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub type Shared = State<Arc<Console>>;

/// The console's router; its sampler starts now and stops when the router is dropped.
pub fn router(config: ConsoleConfig) -> Router {
    let console = Console::new(config);
    crate::sampler::start(&console);
    // The wallets are the operator's: anyone else is turned away before a body is read.
    let wallets = Router::new()
        .route("/wallets", get(wallet_views::list).post(wallet_views::create))
        .route("/wallets/{name}", get(wallet_views::show).post(wallet_views::act))
        .route_layer(axum::middleware::from_fn_with_state(console.clone(), operator_only))
        .layer(DefaultBodyLimit::max(WALLET_FORM_BYTES_MAX));
    Router::new()
        .route("/", get(views::groups))
        .route("/start-stopped", post(views::start_stopped))
        .route("/charts", get(views::charts))
        .route("/supply", get(views::supply))
        .route("/ledger", get(views::ledger))
        .route("/committee", get(views::committee))
        .route("/offline", get(views::offline))
        .route("/exchange", get(views::exchange))
        .route("/auditors", get(views::auditors))
        .route("/login", get(login_page).post(log_in))
        .route("/logout", post(log_out))
        .route("/console.css", get(stylesheet))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(FORM_BYTES_MAX))
        .merge(wallets)
        .layer(axum::middleware::from_fn_with_state(console.clone(), named_host))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(console)
}

async fn operator_only(
    State(console): Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match console.sessions.visit(request.headers()).operator {
        true => next.run(request).await,
        false => refused(&console, request.headers(), Refused::NotOperator),
    }
}

/// The `Host` values the console answers: its listening address and the loopback names of its
/// port, and the configured origin's host.
pub fn hosts(config: &ConsoleConfig) -> Vec<String> {
    let port = config.listen.port();
    let mut hosts = vec![
        config.listen.to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    let origin_host = (config.origin.as_deref())
        .and_then(|o| o.split_once("://"))
        .map(|(_, host)| host);
    hosts.extend(origin_host.map(str::to_string));
    hosts
}

/// Answers only requests that name this console in `Host`: a page of another site whose name
/// was rebound to this address (DNS rebinding) names its own, and gets 421.
async fn named_host(State(console): Shared, request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok());
    if host.is_some_and(|host| console.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))) {
        return next.run(request).await;
    }
    let text = "This console answers only at its own address (the one it printed when it started, or --origin).";
    let page = html! { (DOCTYPE) html lang="en" { head { title { "Wrong address" } } body { p { (text) } } } };
    (
        StatusCode::MISDIRECTED_REQUEST,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page.into_string(),
    )
        .into_response()
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        // Not `no-referrer`: with it a browser sends `Origin: null` on its own forms, which the CSRF
        // check then refuses.
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
        ("cross-origin-opener-policy", "same-origin"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// A page for `visitor`, setting its session cookie if the session is new.
pub fn respond(status: StatusCode, visitor: &Visitor, page: Markup) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page.into_string(),
    )
        .into_response();
    if visitor.new {
        let secure = if visitor.secure { "; Secure" } else { "" };
        let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}", visitor.id);
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
    }
    response
}

/// The page a refused post gets.
pub fn refused(console: &Console, headers: &HeaderMap, why: Refused) -> Response {
    let visitor = console.sessions.visit(headers);
    let (status, text) = match why {
        Refused::Forged => (
            StatusCode::FORBIDDEN,
            "This form was not accepted: it came from another site or from a page older than your session. \
             Reload the page and try again.",
        ),
        Refused::NotOperator => (
            StatusCode::UNAUTHORIZED,
            "Only the operator may do this: log in with the operator's token first.",
        ),
        Refused::WrongToken => (
            StatusCode::UNAUTHORIZED,
            "That is not the operator's token: copy it whole from console.token in the cluster's PKI directory.",
        ),
    };
    let body = html! {
        (notice("error", text))
        @if matches!(why, Refused::NotOperator | Refused::WrongToken) { p { a href="/login" { "Log in" } } }
    };
    respond(status, &visitor, layout("Not done", "", &visitor, false, body))
}

/// A form's CSRF field, empty if it has none.
pub fn csrf_of(form: &HashMap<String, String>) -> &str {
    form.get("csrf").map_or("", String::as_str)
}

async fn login_page(State(console): Shared, headers: HeaderMap) -> Response {
    let visitor = console.sessions.visit_to_log_in(&headers);
    let body = html! {
        @if visitor.operator {
            (notice("ok", "You are logged in as the operator."))
        } @else {
            p { "The wallets and the auditors' findings need the operator's token: the one line of "
                code { "console.token" } " in the cluster's PKI directory, readable only by the operator." }
            form class="action" method="post" action="/login" {
                (pages::csrf(&visitor))
                label { "Operator token" input type="password" name="token" autocomplete="off" required; }
                button type="submit" { "Log in" }
            }
        }
    };
    respond(
        StatusCode::OK,
        &visitor,
        layout("Operator login", "/login", &visitor, false, body),
    )
}

async fn log_in(State(console): Shared, headers: HeaderMap, Form(form): Form<HashMap<String, String>>) -> Response {
    let visitor = match console.sessions.check_post(&headers, csrf_of(&form)) {
        Ok(visitor) => visitor,
        Err(why) => return refused(&console, &headers, why),
    };
    let given = form.get("token").map_or("", String::as_str);
    match console.sessions.log_in(&visitor, given, &console.config.operator_token) {
        Ok(operator) => {
            let body =
                html! { (notice("ok", "Logged in as the operator.")) p { a href="/wallets" { "Open the wallets" } } };
            respond(
                StatusCode::OK,
                &operator,
                layout("Operator login", "/login", &operator, false, body),
            )
        }
        Err(why) => {
            // A wrong token waits: a guesser gets one try a second per connection.
            tokio::time::sleep(crate::auth::LOGIN_FAILURE_DELAY).await;
            refused(&console, &headers, why)
        }
    }
}

async fn log_out(State(console): Shared, headers: HeaderMap, Form(form): Form<HashMap<String, String>>) -> Response {
    match console.sessions.check_post(&headers, csrf_of(&form)) {
        Ok(visitor) => {
            console.sessions.log_out(&visitor);
            let fresh = console.sessions.visit(&HeaderMap::new());
            let body = notice("ok", "Logged out.");
            respond(StatusCode::OK, &fresh, layout("Logged out", "", &fresh, false, body))
        }
        Err(why) => refused(&console, &headers, why),
    }
}

async fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], pages::STYLESHEET).into_response()
}

async fn not_found(State(console): Shared, headers: HeaderMap) -> Response {
    let visitor = console.sessions.visit(&headers);
    let body = notice("error", "There is no such page: pick a view above.");
    respond(
        StatusCode::NOT_FOUND,
        &visitor,
        layout("Not found", "", &visitor, false, body),
    )
}

/// Runs a blocking read (the platform's APIs are read with a blocking client) off the runtime.
pub async fn blocking<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    tokio::task::spawn_blocking(read).await.ok()
}

/// The query's `name`, if given.
pub fn query<'a>(query: &'a Query<HashMap<String, String>>, name: &str) -> Option<&'a str> {
    query.get(name).map(String::as_str).filter(|v| !v.is_empty())
}

/// A wallet's name from the path, checked.
pub fn wallet_name(name: &Path<String>) -> Result<&str, crate::wallet::BadField> {
    crate::wallet::check_name(name).map(|()| name.as_str())
}
