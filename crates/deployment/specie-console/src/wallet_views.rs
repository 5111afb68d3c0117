//! The wallet pages: the list (and creating one), and one wallet with its balances in every
//! mode and a form per action. Only the operator sees them: a wallet moves money.

use std::collections::HashMap;
use std::path::PathBuf;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{html, Markup};

use crate::auth::{Refused, Visitor};
use crate::pages::{self, layout, notice};
use crate::program::Outcome;
use crate::routes::{csrf_of, refused, respond, wallet_name, Shared};
use crate::source::ReadError;
use crate::wallet::{self, Endpoints};
use crate::Console;

/// Where the wallet's commands reach the platform (the cluster file read off the runtime).
async fn endpoints(console: &Console) -> Result<Endpoints, ReadError> {
    let source = console.config.source.clone();
    crate::routes::blocking(move || endpoints_of(&source))
        .await
        .unwrap_or(Err(ReadError::NoSentinel))
}

fn endpoints_of(source: &crate::Source) -> Result<Endpoints, ReadError> {
    let node = source.wallet_node()?.ok_or(ReadError::NoSentinel)?;
    let topology = source.topology()?;
    Ok(Endpoints {
        node,
        exchange: (topology.as_ref()).and_then(|t| t.exchange.as_ref().map(|e| e.http_urls())),
        cluster_file: match source {
            crate::Source::Cluster { dir } => Some(dir.join(specie_cluster::supervisor::TOPOLOGY_FILE)),
            crate::Source::Node { .. } => None,
        },
        offline: (topology.as_ref()).and_then(|t| {
            t.offline_authority.as_ref().map(|offline| wallet::OfflineAuthority {
                urls: offline.http_urls(),
                key: offline.bridge.clone(),
                operator_token: specie_cluster::credentials::offline_operator_token_path(&t.pki_dir),
            })
        }),
    })
}

fn wallet_path(console: &Console, name: &str) -> PathBuf {
    console.config.wallets_dir.join(format!("{name}.json"))
}

fn not_operator(console: &Console, headers: &HeaderMap) -> Response {
    refused(console, headers, Refused::NotOperator)
}

pub async fn list(State(console): Shared, headers: HeaderMap) -> Response {
    let visitor = console.sessions.visit(&headers);
    if !visitor.operator {
        return not_operator(&console, &headers);
    }
    respond(StatusCode::OK, &visitor, list_page(&console, &visitor, None))
}

fn list_page(console: &Console, visitor: &Visitor, outcome: Option<Markup>) -> Markup {
    let names = wallet::names(&console.config.wallets_dir);
    let body = html! {
        @if let Some(outcome) = outcome { (outcome) }
        p { "Wallet files on this host, in " code { (console.config.wallets_dir.display()) }
            ". Their keys never leave it: each action runs " code { "specie wallet" } " here." }
        @if names.is_empty() { p { "No wallet yet." } }
        ul { @for name in &names { li { a href=(format!("/wallets/{name}")) { (name) } } } }
        h2 { "Create a wallet" }
        form class="action" method="post" action="/wallets" {
            (pages::csrf(visitor))
            label { "Name (lowercase letters, digits, - or _)" input type="text" name="name" required pattern="[a-z0-9_\\-]{1,32}"; }
            button type="submit" { "Create" }
        }
    };
    layout("Wallets", "/wallets", visitor, false, body)
}

/// The receiving address `create` or `address` printed.
fn address_in(output: &str) -> Option<&str> {
    let line = output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("created"))?;
    let address = line.strip_prefix("address: ").unwrap_or(line);
    let shaped = address.contains('1') && address.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    shaped.then_some(address)
}

/// The payment request a receiving address is shown as: `specie:ADDRESS`, with `?amount=N` if
/// the payee asks for an amount.
fn payment_request(address: &str, amount: Option<u64>) -> String {
    match amount {
        Some(amount) => format!("specie:{address}?amount={amount}"),
        None => format!("specie:{address}"),
    }
}

/// What an action printed; for a receiving action (`receiving` holds the amount asked for, if
/// any) the address and a QR code of the payment request.
fn outcome_markup(outcome: &Outcome, receiving: Option<Option<u64>>) -> Markup {
    html! {
        div class="outcome" {
            @if outcome.ok { (notice("ok", "Done.")) } @else { (notice("error", "Not done: the wallet says why below.")) }
            pre aria-label="What the wallet printed" { (outcome.output) }
            p class="muted" { "Ran " code { (outcome.command) } }
            @if let (Some(address), Some(amount), true) = (address_in(&outcome.output), receiving, outcome.ok) {
                @let request = payment_request(address, amount);
                h2 { "Receive" }
                p { "Give the payer this address: " code id="address" { (address) } }
                p { "or this payment request: " code id="request" { (request) } }
                (pages::qr(&request, &format!("A QR code of the payment request {request}")))
            }
        }
    }
}

pub async fn create(State(console): Shared, headers: HeaderMap, Form(form): Form<HashMap<String, String>>) -> Response {
    let visitor = match console.sessions.check_post(&headers, csrf_of(&form)) {
        Ok(visitor) if visitor.operator => visitor,
        Ok(_) => return not_operator(&console, &headers),
        Err(why) => return refused(&console, &headers, why),
    };
    let name = form.get("name").map_or("", |n| n.trim());
    let done = match (wallet::check_name(name), endpoints(&console).await) {
        (Err(bad), _) => notice("error", &bad.to_string()),
        (_, Err(why)) => notice("error", &format!("cannot reach the platform: {why}")),
        (Ok(()), Ok(endpoints)) => {
            let path = wallet_path(&console, name);
            if let Err(error) = std::fs::create_dir_all(&console.config.wallets_dir) {
                notice(
                    "error",
                    &format!("cannot make {}: {error}", console.config.wallets_dir.display()),
                )
            } else if path.exists() {
                notice(
                    "error",
                    &format!("a wallet named {name} exists already: open it, or pick another name"),
                )
            } else {
                let args = wallet::arguments("create", &form, &path, &endpoints);
                match args {
                    Ok(args) => outcome_markup(&crate::program::run(&console.config.program, args).await, Some(None)),
                    Err(bad) => notice("error", &bad.to_string()),
                }
            }
        }
    };
    respond(StatusCode::OK, &visitor, list_page(&console, &visitor, Some(done)))
}

pub async fn show(State(console): Shared, headers: HeaderMap, name: Path<String>) -> Response {
    let visitor = console.sessions.visit(&headers);
    if !visitor.operator {
        return not_operator(&console, &headers);
    }
    wallet_page(&console, &visitor, &name, None).await
}

pub async fn act(
    State(console): Shared,
    headers: HeaderMap,
    name: Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let visitor = match console.sessions.check_post(&headers, csrf_of(&form)) {
        Ok(visitor) if visitor.operator => visitor,
        Ok(_) => return not_operator(&console, &headers),
        Err(why) => return refused(&console, &headers, why),
    };
    let done = match (wallet_name(&name), endpoints(&console).await) {
        // The page says there is no such wallet; nothing runs.
        (Err(_), _) => None,
        (Ok(name), _) if !wallet_path(&console, name).exists() => None,
        (_, Err(why)) => Some(notice("error", &format!("cannot reach the platform: {why}"))),
        (Ok(name), Ok(endpoints)) => Some({
            let action = form.get("action").map_or("", String::as_str);
            let receiving = match action {
                "address" => wallet::requested_amount(&form).map(Some),
                _ => Ok(None),
            };
            match (
                receiving,
                wallet::arguments(action, &form, &wallet_path(&console, name), &endpoints),
            ) {
                (Ok(receiving), Ok(args)) => {
                    outcome_markup(&crate::program::run(&console.config.program, args).await, receiving)
                }
                (Err(bad), _) | (_, Err(bad)) => notice("error", &format!("Not done: {bad}.")),
            }
        }),
    };
    wallet_page(&console, &visitor, &name, done).await
}

async fn wallet_page(console: &Console, visitor: &Visitor, name: &str, outcome: Option<Markup>) -> Response {
    let missing = |text: String| {
        let body = notice("error", &text);
        respond(
            StatusCode::NOT_FOUND,
            visitor,
            layout("No such wallet", "/wallets", visitor, false, body),
        )
    };
    if let Err(bad) = wallet::check_name(name) {
        return missing(bad.to_string());
    }
    let path = wallet_path(console, name);
    if !path.exists() {
        return missing(format!(
            "There is no wallet named {name} here: create it on the Wallets page."
        ));
    }
    let endpoints = match endpoints(console).await {
        Ok(endpoints) => endpoints,
        Err(why) => return missing(format!("cannot reach the platform: {why}")),
    };
    // One after another: each takes the wallet file's lock.
    let mut balances = vec![];
    for (mode, args) in wallet::balance_commands(&path, &endpoints) {
        balances.push((mode, crate::program::run(&console.config.program, args).await));
    }
    let body = html! {
        @if let Some(outcome) = outcome { (outcome) }
        h2 { "Balances in every mode" }
        div class="modes" {
            @for (mode, outcome) in &balances {
                section aria-label=(mode) { h3 { (mode) } pre { (outcome.output) } }
            }
        }
        (action_forms(visitor, name, endpoints.exchange.is_some()))
    };
    respond(
        StatusCode::OK,
        visitor,
        layout(&format!("Wallet {name}"), "/wallets", visitor, false, body),
    )
}

/// One form: the action's name, its fields (name, label), its button.
fn action_form(visitor: &Visitor, wallet: &str, action: &str, fields: &[(&str, &str)], button: &str) -> Markup {
    html! {
        form class="action" method="post" action=(format!("/wallets/{wallet}")) {
            (pages::csrf(visitor))
            input type="hidden" name="action" value=(action);
            @for (name, label) in fields {
                label { (label) input type="text" name=(name) required[!label.ends_with("(optional)")] autocomplete="off"; }
            }
            button type="submit" { (button) }
        }
    }
}

fn action_forms(visitor: &Visitor, wallet: &str, exchange: bool) -> Markup {
    let form =
        |action: &str, fields: &[(&str, &str)], button: &str| action_form(visitor, wallet, action, fields, button);
    html! {
        h2 { "Online core" }
        (form("address", &[("amount", "Amount to ask for (optional)")], "New receiving address (with its QR code)"))
        (form("send", &[("to", "Payee's address"), ("amount", "Amount")], "Send"))
        (form("import", &[("payment", "Payment string from the payer (specie-pay1…)")], "Receive a payment"))
        (form("sync", &[], "Sync with the node"))
        h2 { "Confidential payments" }
        (form("shield", &[("amount", "Amount")], "Shield coins into a confidential note"))
        (form("send-confidential", &[("to", "Payee's address"), ("amount", "Amount")], "Send confidentially"))
        (form("receive", &[("payment", "Private payment string (specie-cpay1…, specie-apay1…, specie-upay1…)")], "Receive a private payment"))
        h2 { "Anonymous payments" }
        p { "Enrolment: the registration authority gives a challenge; this wallet answers it with a request; the authority signs a credential for it." }
        (form("enrol", &[("challenge", "The registration authority's challenge (specie-enrol-challenge1…)")], "Answer the challenge"))
        (form("enrol-credential", &[("credential", "The registration authority's credential (specie-credential1…)")], "Finish the enrolment"))
        (form("anonymise", &[("amount", "Amount")], "Turn coins into an anonymous note (values hidden)"))
        (form("send-anonymous", &[("to_id", "Payee's enrolment id"), ("amount", "Amount")], "Pay anonymously (values hidden)"))
        h2 { "Byzantine mode (FastPay)" }
        (form("fastpay-account", &[], "Make a FastPay account"))
        (form("fastpay-fund", &[("amount", "Amount")], "Fund the account from core coins"))
        (form("fastpay-pay", &[("to", "Payee's account (64 hex digits)"), ("amount", "Amount")], "Pay from the account"))
        (form("fastpay-sync", &[], "Sync the accounts"))
        h2 { "Offline cash" }
        (form("offline-create", &[], "Create this wallet's offline device"))
        (form("offline-enrol", &[], "Enrol the device at the offline authority (operator)"))
        (form("offline-fund", &[("amount", "Amount")], "Fund the device from core coins"))
        (form("offline-request", &[("amount", "Amount")], "Ask to be paid (a payment request for the payer's device)"))
        (form("offline-pay", &[("request", "Payment request from the payee (specie-offline-request1:…)")], "Pay the request from the device"))
        (form("offline-receive", &[("payment", "Offline payment from the payer (specie-offline-pay1:…)")], "Take the payment into the device"))
        @if exchange {
            h2 { "Exchange" }
            (form("exchange-deposit", &[("asset", "Asset (e.g. usd)"), ("amount", "Amount")], "Deposit into the exchange"))
            (form("exchange-offer", &[("sell", "Sell asset"), ("buy", "Buy asset"), ("amount", "Amount to sell"), ("min_price", "Minimum price (e.g. 0.95)")], "Place an offer"))
            (form("exchange-cancel", &[("offer", "Offer id")], "Cancel an offer"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receiving_address_is_found_in_what_create_and_address_print() {
        let created = "created wallet a.json for currency \"usd\"\naddress: usd1qxyz9\nkeep a.json safe";
        assert_eq!(address_in(created), Some("usd1qxyz9"));
        assert_eq!(address_in("usd1qabc\n"), Some("usd1qabc"));
        assert_eq!(address_in("error: the node did not answer"), None);
        assert_eq!(payment_request("usd1qa", Some(250)), "specie:usd1qa?amount=250");
        assert_eq!(payment_request("usd1qa", None), "specie:usd1qa");
    }
}
