//! The operator's views: groups and replicas, charts, supply, the ledger of record, the FastPay
//! committee, the offline authority, the exchange, the auditors' flags. Live data, read when the
//! page is asked for; the pages refresh themselves.

use std::collections::HashMap;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{html, Markup};
use serde_json::Value;

use crate::pages::{self, cell, field, json, layout, notice, table, unavailable};
use crate::routes::{blocking, query, respond, Shared};
use crate::source::{Member, ReadError, Source};
use crate::{chart, Console};

/// The most of an auditor's reading the console takes in.
const AUDIT_OUTPUT_BYTES_MAX: u64 = 16 << 20;

/// How many flagged transactions the auditors' view lists.
const FLAGGED_SHOWN: usize = 500;

/// How many of the newest blocks the ledger view lists.
const BLOCKS_SHOWN: u64 = 10;

/// A live view, refreshing itself.
fn page(console: &Console, headers: &HeaderMap, title: &str, here: &str, body: Markup) -> Response {
    let visitor = console.sessions.visit(headers);
    respond(StatusCode::OK, &visitor, layout(title, here, &visitor, true, body))
}

/// A view that does not refresh itself: reading it costs the platform more than a status (the
/// ledger's head sorts the whole UHS it replays to: an operator's tool, not for every 5 s).
fn still_page(console: &Console, headers: &HeaderMap, title: &str, here: &str, body: Markup) -> Response {
    let visitor = console.sessions.visit(headers);
    let body = html! { (body) p { a href=(here) { "Read again" } } };
    respond(StatusCode::OK, &visitor, layout(title, here, &visitor, false, body))
}

/// The lag of each replica behind its leader, from the leaders' `replication_lag`.
fn lags(members: &[Member]) -> HashMap<(String, String), u64> {
    let mut lags = HashMap::new();
    for member in members {
        let Ok(status) = &member.status else { continue };
        if let Some(lag) = status["replication_lag"].as_object() {
            for (replica, behind) in lag {
                lags.insert((member.group.clone(), replica.clone()), behind.as_u64().unwrap_or(0));
            }
        }
    }
    lags
}

fn replica_rows(members: &[Member]) -> Vec<Vec<Markup>> {
    let lags = lags(members);
    members
        .iter()
        .map(|m| {
            let lag = lags.get(&(m.group.clone(), m.replica.clone()));
            let health = match &m.status {
                Ok(_) => html! { span class="ok-text" { "ok" } },
                Err(why) => html! { span class="bad-text" { "DOWN" } " " span class="muted" { (why) } },
            };
            let s = m.status.as_ref().unwrap_or(&Value::Null);
            let role = match s["role"].as_str() {
                Some("leader") => html! { strong { "leader" } },
                _ => field(&s["role"]),
            };
            let lag = match (s["role"].as_str(), lag) {
                (Some("leader"), _) => cell("0"),
                (_, Some(lag)) => cell(lag),
                _ => field(&Value::Null),
            };
            vec![
                cell(&m.group),
                cell(&m.replica),
                role,
                field(&s["term"]),
                field(&s["leader"]),
                field(&s["commit_index"]),
                field(&s["applied_index"]),
                lag,
                health,
            ]
        })
        .collect()
}

pub async fn groups(State(console): Shared, headers: HeaderMap) -> Response {
    let visitor = console.sessions.visit(&headers);
    groups_page(&console, &visitor, None).await
}

/// The cluster directory, if this host started the cluster's members from it (`cluster up`
/// wrote their pids there): only then may the console start what is not running.
fn started_here(source: &Source) -> Option<&std::path::Path> {
    match source {
        Source::Cluster { dir } => {
            let pids = dir.join("pids").read_dir().ok()?;
            pids.into_iter().next().is_some().then_some(dir.as_path())
        }
        Source::Node { .. } => None,
    }
}

/// The operator's one action on the cluster: start the members of this host that are not
/// running (`specie cluster up`, which starts nothing else and waits for every group's leader).
pub async fn start_stopped(
    State(console): Shared,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let visitor = match console.sessions.check_post(&headers, crate::routes::csrf_of(&form)) {
        Ok(visitor) if visitor.operator => visitor,
        Ok(_) => return crate::routes::refused(&console, &headers, crate::auth::Refused::NotOperator),
        Err(why) => return crate::routes::refused(&console, &headers, why),
    };
    let outcome = match started_here(&console.config.source) {
        Some(dir) => {
            let args = vec!["cluster".into(), "up".into(), format!("--dir={}", dir.display())];
            let outcome = crate::program::run(&console.config.program, args).await;
            html! {
                @if outcome.ok { (notice("ok", "Every member of this host runs again.")) }
                @else { (notice("error", "Not every member started: `specie cluster up` says why below.")) }
                pre { (outcome.output) }
            }
        }
        None => notice(
            "error",
            "This console's host did not start the cluster's members: start them where they run.",
        ),
    };
    groups_page(&console, &visitor, Some(outcome)).await
}

async fn groups_page(console: &Console, visitor: &crate::auth::Visitor, outcome: Option<Markup>) -> Response {
    let permit = console.heavy_reads.acquire().await;
    let members = console.config.source.replicas().await;
    let source = console.config.source.clone();
    let endpoints = blocking(move || source.endpoints()).await;
    drop(permit);
    let down = members.as_ref().is_ok_and(|m| m.iter().any(|m| m.status.is_err()));
    // A post's answer does not refresh itself: reloading it would ask again for the post.
    let refresh = outcome.is_none();
    let body = html! {
        @if let Some(outcome) = outcome { (outcome) }
        @if visitor.operator && down && started_here(&console.config.source).is_some() {
            form class="action" method="post" action="/start-stopped" {
                (pages::csrf(visitor))
                button type="submit" { "Start the members that are not running" }
            }
        }
        @match &members {
            Ok(members) if members.is_empty() => p { "An embedded node: every role in one process." },
            Ok(members) => {
                p { (members.iter().filter(|m| m.status.as_ref().is_ok_and(|s| s["role"] == "leader")).count())
                    " leaders among " (members.len()) " replicas. Lag: log entries a follower is behind its leader." }
                (table("Every replica of every group", &["group", "replica", "role", "term", "leader", "commit", "applied", "lag", "health"], replica_rows(members)))
            }
            Err(error) => (unavailable("The replicas' status", error)),
        }
        @match endpoints {
            Some(Ok(endpoints)) => {
                @let rows = endpoints.iter().map(|e| vec![cell(&e.name), html! { code { (e.url) } }, match &e.ready {
                    Ok(()) => html! { span class="ok-text" { "ready" } },
                    Err(why) => html! { span class="bad-text" { "not ready" } " " span class="muted" { (why) } },
                }]).collect();
                (table("The wallets' API (sentinels)", &["name", "URL", "health"], rows))
            }
            Some(Err(error)) => (unavailable("The sentinels", &error)),
            None => (unavailable("The sentinels", "the read failed")),
        }
    };
    respond(
        StatusCode::OK,
        visitor,
        layout("Groups and replicas", "/", visitor, refresh, body),
    )
}

pub async fn charts(State(console): Shared, headers: HeaderMap) -> Response {
    let (confirmed, refused, latency) = console.samples.series();
    let body = html! {
        p { "From every sentinel's " code { "/metrics" } ", sampled every "
            (console.config.sample_interval_ms) " ms; the last " (crate::sampler::SAMPLES_MAX) " samples." }
        (chart::line("confirmed", "Transactions confirmed", "tx/s", &confirmed))
        (chart::line("refused", "Transactions refused or not taken", "tx/s", &refused))
        (chart::line("latency", "Mean submission latency", "ms", &latency))
    };
    page(&console, &headers, "Throughput and latency", "/charts", body)
}

/// `specie audit supply --json` against every mode's books the platform has.
fn supply_audit(source: &Source) -> Result<Vec<String>, ReadError> {
    let node = source.wallet_node()?.ok_or(ReadError::NoSentinel)?;
    let mut args: Vec<String> = ["audit", "supply", "--json", "--settle-ms=2000"]
        .map(String::from)
        .into();
    args.push(format!("--node={node}"));
    if let Some(topology) = source.topology()? {
        args.extend(
            topology
                .offline_authority
                .map(|o| format!("--offline={}", o.http_urls())),
        );
        args.extend(topology.exchange.map(|e| format!("--exchange={}", e.http_urls())));
        // The committee's books are one authority's, summed over its shards.
        let first = (topology.fastpay_committee.iter()).flat_map(|c| c.http_addresses().into_iter().take(1));
        args.extend(
            first
                .flat_map(|a| a.shards)
                .map(|shard| format!("--fastpay-shard={}", shard.join(","))),
        );
    }
    Ok(args)
}

pub async fn supply(State(console): Shared, headers: HeaderMap) -> Response {
    let _permit = console.heavy_reads.acquire().await;
    let source = console.config.source.clone();
    let args = blocking(move || supply_audit(&source))
        .await
        .unwrap_or(Err(ReadError::NoSentinel));
    let body = match args {
        Ok(args) => {
            let outcome = crate::program::run(&console.config.program, args).await;
            let report = (outcome.output.lines())
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|value| value.get("supply").is_some());
            match report {
                Some(report) => html! {
                    (audit_body(&report))
                    p class="muted" { "The same report from the command line: " code id="audit-command" { (outcome.command) } }
                    (supply_body(&report["supply"]))
                },
                None => html! { (notice("error", "The supply audit did not run:")) pre { (outcome.output) } },
            }
        }
        Err(why) => unavailable("The supply report", &why),
    };
    still_page(&console, &headers, "Supply", "/supply", body)
}

/// The platform-wide audit's verdict, and each mode's books beside what the core says it holds.
fn audit_body(report: &Value) -> Markup {
    let rows = (report["modes"].as_array().into_iter().flatten())
        .map(|m| {
            let parts = (m["books"]["parts"].as_array().into_iter().flatten())
                .map(|p| format!("{} {}", p[0].as_str().unwrap_or("?"), p[1]))
                .collect::<Vec<_>>()
                .join(", ");
            let agrees = match m["agrees"].as_bool() {
                Some(true) => html! { span class="ok-text" { "yes" } },
                _ => html! { span class="bad-text" { "NO" } },
            };
            vec![
                field(&m["books"]["name"]),
                field(&m["core_says"]),
                field(&m["books"]["holds"]),
                field(&m["difference"]),
                agrees,
                cell(parts),
            ]
        })
        .collect();
    html! {
        @if report["ok"].as_bool() == Some(true) {
            (notice("ok", "The audit's verdict: balanced. The ledger's supply balances (issued = core outputs + hidden notes + what every mode holds) and every mode's own books agree with what the core says it holds."))
        } @else {
            (notice("error", "The audit's verdict: NOT balanced. See which mode below; `specie audit supply` gives the same report, and docs/operator-guide.md, \"The supply report\", what to do."))
        }
        (table("Each mode's books beside the core", &["books", "the core says it holds", "its books hold", "difference", "agrees", "made of"], rows))
        @if let Some(unfunded) = report["unfunded"].as_array().filter(|u| !u.is_empty()) {
            h2 { "Held by a key the core never funded" }
            (json(&Value::Array(unfunded.clone())))
        }
    }
}

fn supply_body(supply: &Value) -> Markup {
    let balanced = supply["balanced"].as_bool() == Some(true);
    let issuers = (supply["issuers"].as_array().into_iter().flatten())
        .map(|i| {
            vec![
                html! { code { (i["key"].as_str().unwrap_or("?")) } },
                field(&i["minted"]),
                field(&i["redeemed"]),
            ]
        })
        .collect();
    let modes = (supply["modes"].as_array().into_iter().flatten())
        .map(|m| {
            vec![
                field(&m["role"]),
                html! { code { (m["key"].as_str().unwrap_or("?")) } },
                field(&m["funded"]),
                field(&m["returned"]),
                field(&m["held"]),
            ]
        })
        .collect();
    html! {
        h2 { "The ledger's supply" }
        p { "The ledger's own balance: " @if balanced { span class="ok-text" { "balanced" } } @else { span class="bad-text" { "NOT balanced" } } }
        p { "At ledger height " (field(&supply["ledger"]["height"])) ". Issued " strong { (field(&supply["issued"])) }
            "; in core outputs " (field(&supply["core_outputs"])) "; in hidden notes " (field(&supply["hidden_notes"])) "." }
        (table("Per issuer", &["issuer key", "minted", "redeemed"], issuers))
        (table("Per mode (what left the core to each, what came back)", &["mode", "key", "funded", "returned", "held"], modes))
    }
}

pub async fn ledger(State(console): Shared, headers: HeaderMap, q: Query<HashMap<String, String>>) -> Response {
    let _permit = console.heavy_reads.acquire().await;
    let source = console.config.source.clone();
    let txid = query(&q, "txid").map(str::to_string);
    let read = blocking(move || ledger_read(&source, txid.as_deref())).await;
    let body = read.unwrap_or_else(|| unavailable("The ledger of record", "the read failed"));
    still_page(&console, &headers, "Ledger of record", "/ledger", body)
}

fn ledger_read(source: &Source, txid: Option<&str>) -> Markup {
    let lookup = html! {
        form class="action" method="get" action="/ledger" {
            label { "Transaction id (64 hex digits)" input type="text" name="txid" value=[txid] required; }
            button type="submit" { "Find with its inclusion proof" }
        }
    };
    let found = txid.map(
        |txid| match txid.len() == 64 && txid.bytes().all(|b| b.is_ascii_hexdigit()) {
            true => match source.api_json(&format!("/v1/ledger/transactions/{txid}")) {
                Ok(found) => html! {
                    h2 { "Transaction " code { (txid) } }
                    p { "In block " (field(&found["height"])) " at position " (field(&found["position"]))
                        ". The proof takes its record's leaf to the block header's records root; check it with "
                        code { "specie audit check-proof" } "." }
                    (json(&found))
                },
                Err(why) => unavailable("That transaction", &why),
            },
            false => notice("error", "A transaction id is 64 hex digits: copy it whole."),
        },
    );
    let head = match source.api_json("/v1/ledger") {
        Ok(head) => head,
        Err(why) => return html! { (lookup) (unavailable("The ledger of record", &why)) },
    };
    let height = head["height"].as_u64().unwrap_or(0);
    let blocks: Vec<Vec<Markup>> = (height.saturating_sub(BLOCKS_SHOWN - 1).max(1)..=height)
        .rev()
        .filter_map(|h| source.api_json(&format!("/v1/ledger/blocks/{h}")).ok())
        .map(|block| block_row(&block))
        .collect();
    html! {
        (lookup)
        @if let Some(found) = found { (found) }
        p { "Height " strong { (height) } "; " (field(&head["waiting"])) " confirmed transactions wait for a block, "
            (field(&head["undecided"])) " undecided; the blocks replay to a UHS of " (field(&head["uhs_ids"])) " ids." }
        (table("The newest blocks", &["height", "hash", "records", "transactions"], blocks))
    }
}

fn block_row(block: &Value) -> Vec<Markup> {
    let header = &block["header"];
    let txids = block["txids"].as_array().cloned().unwrap_or_default();
    vec![
        field(&header["height"]),
        html! { code { (header["hash"].as_str().unwrap_or("?").chars().take(16).collect::<String>()) "…" } },
        field(&header["records"]),
        html! {
            @for txid in txids.iter().take(5).filter_map(|t| t.as_str()) {
                a href=(format!("/ledger?txid={txid}")) { code { (txid.chars().take(16).collect::<String>()) "…" } } " "
            }
            @if txids.len() > 5 { span class="muted" { "and " (txids.len() - 5) " more" } }
        },
    ]
}

/// The figures one group's replicas give in their status under `key`, leaders only.
fn leaders_figures<'a>(members: &'a [Member], key: &str) -> Vec<(&'a Member, &'a Value)> {
    members
        .iter()
        .filter_map(|m| Some((m, m.status.as_ref().ok()?)))
        .filter(|(_, s)| s["role"] == "leader" && !s[key].is_null())
        .map(|(m, s)| (m, &s[key]))
        .collect()
}

pub async fn committee(State(console): Shared, headers: HeaderMap) -> Response {
    let members = console.config.source.replicas().await;
    let source = console.config.source.clone();
    let topology = blocking(move || source.topology()).await.unwrap_or(Ok(None));
    let body = match (members, topology) {
        (Ok(members), Ok(Some(topology))) if topology.fastpay_committee.is_some() => {
            let rows = leaders_figures(&members, "authority")
                .into_iter()
                .map(|(m, a)| {
                    let fields = [
                        "epoch",
                        "seated",
                        "accounts",
                        "votes",
                        "confirmed",
                        "credits_unacked",
                        "funded",
                    ];
                    let mut row = vec![cell(&m.group)];
                    row.extend(fields.iter().map(|f| field(&a[*f])));
                    row
                })
                .collect();
            let authorities = topology.fastpay_committee.as_ref().map_or(0, |c| c.authorities.len());
            html! {
                p { (authorities) " authorities: up to " ((authorities.max(1) - 1) / 3) " of them may lie. Each authority's shards, as their leaders hold them:" }
                (table("The Byzantine committee (FastPay)", &["authority shard", "epoch", "seated", "accounts", "votes", "confirmed", "credits unacked", "funded"], rows))
            }
        }
        (Ok(_), Ok(_)) => notice(
            "info",
            "This platform has no FastPay committee: start the cluster with --authorities.",
        ),
        (Err(error), _) | (_, Err(error)) => unavailable("The committee", &error),
    };
    page(&console, &headers, "Byzantine committee", "/committee", body)
}

pub async fn offline(State(console): Shared, headers: HeaderMap, q: Query<HashMap<String, String>>) -> Response {
    let source = console.config.source.clone();
    let topology = blocking(move || source.topology()).await.unwrap_or(Ok(None));
    let evidence = query(&q, "evidence").map(str::to_string);
    let body = match topology {
        Ok(Some(topology)) => match topology.offline_authority {
            Some(offline) => {
                let urls = offline.http_urls();
                blocking(move || offline_read(&urls, evidence.as_deref()))
                    .await
                    .unwrap_or_else(|| unavailable("The offline authority", "the read failed"))
            }
            None => notice(
                "info",
                "This platform has no offline authority: start the cluster with --offline.",
            ),
        },
        Ok(None) => notice(
            "info",
            "An embedded node has no offline authority: run `specie offline serve`.",
        ),
        Err(error) => unavailable("The offline authority", &error),
    };
    page(&console, &headers, "Offline authority", "/offline", body)
}

fn offline_read(urls: &str, evidence: Option<&str>) -> Markup {
    let books = match Source::service_json(urls, "/v1/offline/books") {
        Ok(books) => books,
        Err(why) => return unavailable("The offline authority's books", &why),
    };
    let evidence = evidence.map(|identity| {
        match identity.bytes().all(|b| b.is_ascii_hexdigit()) && identity.len() <= 128 {
            true => match Source::service_json(urls, &format!("/v1/offline/evidence/{identity}")) {
                Ok(bundle) => html! {
                    h2 { "Evidence against " code { (identity) } }
                    p { "The bundle (the double spender's own signed statements, with the key ring): anyone can check it with "
                        code { "specie offline check-evidence" } "." }
                    pre { (bundle["bundle"].as_str().unwrap_or("?")) }
                },
                Err(why) => unavailable("That evidence", &why),
            },
            false => notice("error", "An identity is hex digits: pick one from the list."),
        }
    });
    let debts: Vec<Vec<Markup>> = (books["debts"].as_array().into_iter().flatten())
        .map(|debt| {
            let identity = debt["identity"].as_str().unwrap_or("?");
            vec![
                html! { a href=(format!("/offline?evidence={identity}")) { code { (identity) } } },
                field(&debt["double_spends"]),
                field(&debt["value"]),
            ]
        })
        .collect();
    let keys = (books["by_key"].as_array().into_iter().flatten())
        .map(|key| {
            let mut row = vec![html! { code { (key["issuing_key"].as_str().unwrap_or("?").chars().take(16).collect::<String>()) "…" } }];
            row.extend(["denomination", "period", "status", "issued", "paid"].iter().map(|f| field(&key[*f])));
            row
        })
        .collect();
    html! {
        p { "Funded " strong { (field(&books["funded"])) } ", defunded " (field(&books["defunded"]))
            ", outstanding " strong { (field(&books["outstanding"])) } ", expired " (field(&books["expired"]))
            "; period " (field(&books["current_period"])) "." }
        h2 { "Double spenders, named" }
        @if debts.is_empty() { p { "No double spender has been named." } }
        @else { (table("Identities that spent a token twice (select one for its evidence)", &["identity", "double spends", "value owed"], debts)) }
        @if let Some(evidence) = evidence { (evidence) }
        (table("Issuing keys", &["key", "denomination", "period", "status", "issued", "paid"], keys))
    }
}

pub async fn exchange(State(console): Shared, headers: HeaderMap) -> Response {
    let source = console.config.source.clone();
    let topology = blocking(move || source.topology()).await.unwrap_or(Ok(None));
    let body = match topology {
        Ok(Some(topology)) => match topology.exchange {
            Some(exchange) => {
                let urls = exchange.http_urls();
                let read = blocking(move || {
                    let info = Source::service_json(&urls, "/v1/exchange");
                    let last = Source::service_json(&urls, "/v1/exchange/blocks/last");
                    let supply = Source::service_json(&urls, "/v1/exchange/supply");
                    (info, last, supply)
                });
                match read.await {
                    Some((info, last, supply)) => exchange_body(info, last, supply),
                    None => unavailable("The exchange", "the read failed"),
                }
            }
            None => notice(
                "info",
                "This platform has no exchange: start the cluster with --exchange.",
            ),
        },
        Ok(None) => notice("info", "An embedded node has no exchange: run `specie exchange serve`."),
        Err(error) => unavailable("The exchange", &error),
    };
    page(&console, &headers, "Exchange", "/exchange", body)
}

fn exchange_body(
    info: Result<Value, ReadError>,
    last: Result<Value, ReadError>,
    supply: Result<Value, ReadError>,
) -> Markup {
    let (info, last, supply) = match (info, last, supply) {
        (Ok(info), Ok(last), Ok(supply)) => (info, last, supply),
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => return unavailable("The exchange", &why),
    };
    let assets: Vec<&Value> = supply["assets"].as_array().into_iter().flatten().collect();
    let prices = last["prices"].as_array().cloned().unwrap_or_default();
    let holdings = (assets.iter().enumerate())
        .map(|(i, a)| {
            let mut row = vec![field(&a["name"]), field(prices.get(i).unwrap_or(&Value::Null))];
            row.extend(
                ["deposited", "withdrawn", "balances", "locked", "burned"]
                    .iter()
                    .map(|f| field(&a[*f])),
            );
            row
        })
        .collect();
    let trades = (last["trades"].as_array().into_iter().flatten())
        .map(|t| vec![field(&t["sell"]), field(&t["buy"]), field(&t["amount"])])
        .collect();
    html! {
        p { "Block " strong { (field(&last["height"])) } " with " (field(&last["transactions"]))
            " transactions. A pair trades at the ratio of its two assets' valuations." }
        p { "State hash at height " (field(&info["height"])) ": " code { (field(&info["state_hash"])) }
            " (equal on every replica at equal heights)." }
        (table("What traded in the last block", &["sold", "for", "amount sold"], trades))
        (table("Per asset: the last block's valuation, and what the exchange holds", &["asset", "valuation", "deposited", "withdrawn", "in accounts", "locked in offers", "burned"], holdings))
    }
}

pub async fn auditors(State(console): Shared, headers: HeaderMap) -> Response {
    let visitor = console.sessions.visit(&headers);
    let body = match (&console.config.auditor_key, visitor.operator) {
        (_, false) => notice("info", "The auditors' findings name payers and payees: log in as the operator to see them."),
        (None, true) => notice(
            "info",
            "No auditor's key was given: start the console with --auditor-key FILE (from `specie audit keygen`) to see what it flags.",
        ),
        (Some(key), true) => auditor_findings(&console, key).await,
    };
    respond(
        StatusCode::OK,
        &visitor,
        layout("Auditors' flags", "/auditors", &visitor, false, body),
    )
}

async fn auditor_findings(console: &Console, key: &std::path::Path) -> Markup {
    let _permit = console.heavy_reads.acquire().await;
    let Ok(Some(node)) = console.config.source.wallet_node() else {
        return unavailable("The ledger", "no sentinel in the cluster file");
    };
    let args = vec![
        "audit".to_string(),
        "show".to_string(),
        format!("--node={node}"),
        format!("--key={}", key.display()),
        format!("--flag-over={}", console.config.flag_over),
        "--flagged-only".to_string(),
        "--json".to_string(),
    ];
    // One line per flagged transaction: room for many more than a page shows.
    let outcome = crate::program::run_showing(&console.config.program, args, AUDIT_OUTPUT_BYTES_MAX).await;
    let lines: Vec<Value> = (outcome.output.lines())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let Some((summary, flagged)) = lines
        .split_last()
        .filter(|(summary, _)| summary.get("summary").is_some())
    else {
        let tail: String = outcome
            .output
            .chars()
            .rev()
            .take(4096)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return html! { (notice("error", "The auditor could not read the ledger:")) pre { (tail) } };
    };
    let party = |p: &Value| {
        let owner: String = p["owner"].as_str().unwrap_or("?").chars().take(20).collect();
        format!("{owner}… {}", p["value"].as_u64().map_or("?".into(), |v| v.to_string()))
    };
    // The newest first, at most FLAGGED_SHOWN of them (the summary counts them all).
    let rows = (flagged.iter().rev().take(FLAGGED_SHOWN))
        .map(|t| {
            let txid = t["txid"].as_str().unwrap_or("?");
            let parties = |side: &str| (t[side].as_array().into_iter().flatten()).map(party).collect::<Vec<_>>().join(", ");
            vec![
                field(&t["height"]),
                html! { a href=(format!("/ledger?txid={txid}")) { code { (txid.chars().take(16).collect::<String>()) "…" } } },
                field(&t["kind"]),
                cell(parties("inputs")),
                cell(parties("outputs")),
            ]
        })
        .collect();
    html! {
        @if !outcome.ok { (notice("error", "The auditor found proofs that do not hold or records not endorsed: see the summary.")) }
        p { "Transactions with an output over " (console.config.flag_over) ", as the auditor reads them (" code { (outcome.command) } ")." }
        (table("Flagged transactions", &["height", "transaction", "kind", "paid by", "paid to"], rows))
        @if flagged.len() > FLAGGED_SHOWN { p class="muted" { "The newest " (FLAGGED_SHOWN) " of " (flagged.len()) " shown." } }
        h2 { "Summary" }
        (json(summary.get("summary").unwrap_or(summary)))
        p { a href="/auditors" { "Read again" } }
        (pages::notice("info", "The auditor reads the whole ledger each time: on a long ledger this page takes a while."))
    }
}
