//! The console's routes: the operator's views (read-only, open), the login, and the wallets
//! (the operator's only). Every answer carries the strict security headers.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Form, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};

use crate::auth::{Refused, Visitor, COOKIE};
use crate::pages::{self, layout, notice};
use crate::{views, wallet_views, Console, ConsoleConfig};

/// The largest form the console takes (a payment string is the largest field).
const FORM_BYTES_MAX: usize = 64 * 1024;

/// What every page forbids: any script, any inline style, any other origin, being framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub type Shared = State<Arc<Console>>;

/// The console's router; its sampler starts now and stops when the router is dropped.
pub fn router(config: ConsoleConfig) -> Router {
    let console = Console::new(config);
    crate::sampler::start(&console);
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
        .route("/wallets", get(wallet_views::list).post(wallet_views::create))
        .route("/wallets/{name}", get(wallet_views::show).post(wallet_views::act))
        .route("/console.css", get(stylesheet))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(FORM_BYTES_MAX))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(console)
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
        let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", visitor.id);
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
        Refused::Throttled => (
            StatusCode::TOO_MANY_REQUESTS,
            "Too many wrong tokens in the last minute: wait a minute, then try again.",
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
    let visitor = console.sessions.visit(&headers);
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
        Err(why) => refused(&console, &headers, why),
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
