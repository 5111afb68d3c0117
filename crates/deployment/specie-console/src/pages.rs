//! The pages' HTML: one layout, tables, and a renderer for the platform's JSON answers. Every
//! value is inserted through maud, which escapes it.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::auth::Visitor;

/// The views, in the navigation's order: path and name.
pub const VIEWS: [(&str, &str); 9] = [
    ("/", "Groups"),
    ("/charts", "Charts"),
    ("/supply", "Supply"),
    ("/ledger", "Ledger"),
    ("/committee", "Committee"),
    ("/offline", "Offline"),
    ("/exchange", "Exchange"),
    ("/auditors", "Auditors"),
    ("/wallets", "Wallets"),
];

/// How deep the JSON renderer goes before it shows the rest as text.
const JSON_DEPTH_MAX: usize = 5;
/// The most items of a JSON array shown.
const JSON_ITEMS_MAX: usize = 64;

/// Whether a page refreshes itself (the live views) and how often, in seconds.
pub const REFRESH_S: u32 = 5;

/// A whole page: navigation, the operator's login state, `body` under the heading `title`.
pub fn layout(title: &str, here: &str, visitor: &Visitor, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if refresh { meta http-equiv="refresh" content=(REFRESH_S); }
                title { (title) " · specie console" }
                link rel="stylesheet" href="/console.css";
            }
            body {
                a class="skip" href="#main" { "Skip to the content" }
                header {
                    span class="brand" { "specie console" }
                    nav aria-label="Views" {
                        ul {
                            @for (path, name) in VIEWS {
                                li { a href=(path) aria-current=[(path == here).then_some("page")] { (name) } }
                            }
                        }
                    }
                    div class="who" {
                        @if visitor.operator {
                            form method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(visitor.csrf);
                                span { "Operator" } " "
                                button type="submit" { "Log out" }
                            }
                        } @else {
                            a href="/login" { "Operator login" }
                        }
                    }
                }
                main id="main" tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A notice: `kind` is `ok`, `error` or `info`.
pub fn notice(kind: &str, text: &str) -> Markup {
    let role = if kind == "error" { "alert" } else { "status" };
    html! { p class=(format!("notice {kind}")) role=(role) { (text) } }
}

/// What a view could not read, and what to do.
pub fn unavailable(what: &str, why: impl std::fmt::Display) -> Markup {
    notice("error", &format!("{what} is not available: {why}"))
}

/// A JSON value as nested tables and lists.
pub fn json(value: &serde_json::Value) -> Markup {
    json_at(value, 0)
}

fn json_at(value: &serde_json::Value, depth: usize) -> Markup {
    use serde_json::Value;
    match value {
        Value::Object(map) if depth < JSON_DEPTH_MAX => html! {
            table class="kv" {
                @for (key, value) in map {
                    tr { th scope="row" { (key) } td { (json_at(value, depth + 1)) } }
                }
            }
        },
        Value::Array(items) if depth < JSON_DEPTH_MAX => html! {
            @if items.is_empty() { span class="muted" { "none" } }
            ol {
                @for item in items.iter().take(JSON_ITEMS_MAX) { li { (json_at(item, depth + 1)) } }
            }
            @if items.len() > JSON_ITEMS_MAX {
                p class="muted" { (items.len() - JSON_ITEMS_MAX) " more not shown" }
            }
        },
        Value::String(text) => html! { code { (text) } },
        Value::Null => html! { span class="muted" { "—" } },
        other => html! { code { (other.to_string()) } },
    }
}

/// A table with a header row; each row's cells as markup.
pub fn table(caption: &str, headers: &[&str], rows: Vec<Vec<Markup>>) -> Markup {
    html! {
        table {
            caption { (caption) }
            thead { tr { @for h in headers { th scope="col" { (h) } } } }
            tbody {
                @if rows.is_empty() { tr { td colspan=(headers.len()) class="muted" { "none" } } }
                @for row in rows { tr { @for cell in row { td { (cell) } } } }
            }
        }
    }
}

/// Plain text in a cell.
pub fn cell(text: impl std::fmt::Display) -> Markup {
    html! { (text.to_string()) }
}

/// A JSON field as a cell's text (`—` for null or absent; strings without quotes).
pub fn field(value: &serde_json::Value) -> Markup {
    match value {
        serde_json::Value::Null => html! { span class="muted" { "—" } },
        serde_json::Value::String(text) => html! { (text) },
        other => html! { (other.to_string()) },
    }
}

/// A hidden CSRF field for a form of `visitor`'s.
pub fn csrf(visitor: &Visitor) -> Markup {
    html! { input type="hidden" name="csrf" value=(visitor.csrf); }
}

/// A QR code of `text` as inline SVG (dark modules on light, with its quiet zone).
pub fn qr(text: &str, label: &str) -> Markup {
    let Ok(code) = qrcode::QrCode::new(text.as_bytes()) else {
        return notice("error", "the request is too long for a QR code");
    };
    let svg = code
        .render::<qrcode::render::svg::Color<'_>>()
        .min_dimensions(200, 200)
        .dark_color(qrcode::render::svg::Color("#000000"))
        .light_color(qrcode::render::svg::Color("#ffffff"))
        .build();
    // The SVG is the library's drawing of modules: it holds no text of ours. Drop its XML
    // declaration (invalid inside HTML) and label it for screen readers.
    let label = html! { (label) }.into_string();
    let svg = (svg.split_once("<svg")).map_or(String::new(), |(_, rest)| {
        format!("<svg role=\"img\" aria-label=\"{label}\"{rest}")
    });
    html! { div class="qr" { (PreEscaped(svg)) } }
}

/// The stylesheet, embedded in the binary.
pub const STYLESHEET: &str = include_str!("../assets/console.css");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_from_the_platform_are_escaped() {
        let hostile = serde_json::json!({"<script>alert(1)</script>": "<img src=x onerror=alert(1)>", "n": [1, null]});
        let html = json(&hostile).into_string();
        assert!(!html.contains("<script>") && !html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"));
        let cell = field(&serde_json::json!("<b>")).into_string();
        assert_eq!(cell, "&lt;b&gt;");
    }

    #[test]
    fn the_qr_code_is_svg_with_a_label() {
        let markup = qr("specie:usd1qxyz?amount=5", "pay \"me\"").into_string();
        assert!(
            markup.starts_with("<div class=\"qr\"><svg role=\"img\" aria-label=\"pay &quot;me&quot;\""),
            "{markup}"
        );
        assert!(!markup.contains("<?xml"));
    }
}
