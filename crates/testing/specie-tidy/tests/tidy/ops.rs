//! The operations assets (`ops/`): the Prometheus alert rules and the Grafana dashboards name
//! only metric families the code exposes (`specie_metrics::FAMILIES_EXPOSED`), and every
//! dashboard is well-formed Grafana JSON that imports as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::{assert_clean, workspace_root};

/// The alert rules whose expressions are checked (their promtool tests, `alerts-test.yml`, are
/// exempt: their input series are made up).
const ALERTS: &str = "ops/prometheus/alerts.yml";
/// The folder of the Grafana dashboards, one `*.json` each.
const DASHBOARDS: &str = "ops/grafana";
/// The panel types a dashboard may use.
const PANEL_TYPES: &[&str] = &["timeseries", "stat", "gauge", "table", "row"];
/// Grafana's grid is 24 columns wide.
const GRID_COLUMNS: i64 = 24;
/// The oldest dashboard schema accepted (Grafana 9).
const SCHEMA_VERSION_MIN: i64 = 36;
/// What every panel's data source is: the dashboard's `datasource` variable.
const DATASOURCE_UID: &str = "${datasource}";

#[test]
fn ops_assets_name_only_families_the_code_exposes() {
    let root = workspace_root();
    let mut problems = Vec::new();
    let mut names_seen = 0;
    match std::fs::read_to_string(root.join(ALERTS)) {
        Ok(text) => {
            let expressions = alert_expressions(&text);
            if expressions.len() < 7 {
                problems.push(format!(
                    "{ALERTS}: found {} `expr:` lines, expected an alert's each",
                    expressions.len()
                ));
            }
            for expr in &expressions {
                names_seen += metric_names(expr).len();
                problems.extend(unknown_families(ALERTS, "", expr));
            }
        }
        Err(e) => problems.push(format!("{ALERTS}: {e}")),
    }
    for (file, text) in dashboard_files(&root, &mut problems) {
        match serde_json::from_str::<Value>(&text) {
            Ok(dashboard) => {
                for (panel, expr) in dashboard_expressions(&dashboard) {
                    names_seen += metric_names(&expr).len();
                    problems.extend(unknown_families(&file, &panel, &expr));
                }
            }
            Err(e) => problems.push(format!("{file}: not JSON: {e}")),
        }
    }
    assert!(
        names_seen > 0,
        "found no specie_ metric in {ALERTS} or {DASHBOARDS}/*.json"
    );
    assert_clean("ops assets name exposed families", problems);
}

#[test]
fn dashboards_are_well_formed_grafana_json() {
    let root = workspace_root();
    let mut problems = Vec::new();
    let mut uids: BTreeMap<String, String> = BTreeMap::new();
    let files = dashboard_files(&root, &mut problems);
    if files.is_empty() {
        problems.push(format!("{DASHBOARDS}: no dashboard (*.json)"));
    }
    for (file, text) in files {
        let (uid, found) = dashboard_problems(&file, &text);
        problems.extend(found);
        if let Some(uid) = uid {
            if let Some(first) = uids.insert(uid.clone(), file.clone()) {
                problems.push(format!(
                    "{file}: uid `{uid}` is {first}'s too; every dashboard needs its own"
                ));
            }
        }
    }
    assert_clean("Grafana dashboards", problems);
}

/// Every `*.json` under [`DASHBOARDS`], as (path relative to the root, text), sorted.
fn dashboard_files(root: &Path, problems: &mut Vec<String>) -> Vec<(String, String)> {
    let entries = match std::fs::read_dir(root.join(DASHBOARDS)) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(format!("{DASHBOARDS}: {e}"));
            return vec![];
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let file = format!("{DASHBOARDS}/{name}");
            match std::fs::read_to_string(root.join(&file)) {
                Ok(text) => Some((file, text)),
                Err(e) => {
                    problems.push(format!("{file}: {e}"));
                    None
                }
            }
        })
        .collect()
}

/// The expressions of a Prometheus rules file, read textually (no YAML parser): the rest of each
/// `expr:` line, or the lines of its block (`expr: |` or `expr: >`) indented deeper than the key.
fn alert_expressions(text: &str) -> Vec<String> {
    let indent_of = |line: &str| line.len() - line.trim_start().len();
    let lines: Vec<&str> = text.lines().collect();
    let mut expressions = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let key = line.trim_start().trim_start_matches("- ");
        i += 1;
        let Some(rest) = key.strip_prefix("expr:") else {
            continue;
        };
        let rest = rest.trim();
        if !(rest.starts_with('|') || rest.starts_with('>')) {
            expressions.push(rest.to_string());
            continue;
        }
        let indent = indent_of(line);
        let mut block = String::new();
        while i < lines.len() && (lines[i].trim().is_empty() || indent_of(lines[i]) > indent) {
            block.push_str(lines[i].trim());
            block.push('\n');
            i += 1;
        }
        expressions.push(block);
    }
    expressions
}

/// The `specie_…` metric names in a PromQL expression (whole identifiers only).
fn metric_names(expr: &str) -> Vec<&str> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = Vec::new();
    let mut rest = expr;
    let mut offset = 0;
    while let Some(at) = rest.find("specie_") {
        let start = offset + at;
        let before = expr[..start].chars().next_back();
        let len = expr[start..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(expr.len() - start);
        if !before.is_some_and(is_ident) {
            names.push(&expr[start..start + len]);
        }
        offset = start + len;
        rest = &expr[offset..];
    }
    names
}

/// The family a queried name belongs to: a histogram's `_bucket`, `_sum` and `_count` series
/// are its family's; any other name is its own.
fn family_of(name: &str) -> &str {
    let histogram = |base: &str| {
        specie_metrics::FAMILIES_EXPOSED
            .iter()
            .any(|(family, kind)| *family == base && *kind == "histogram")
    };
    ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|suffix| name.strip_suffix(suffix))
        .find(|base| histogram(base))
        .unwrap_or(name)
}

/// What `expr` (in `file`, on `panel` if a dashboard's) names that no exposed family is.
fn unknown_families(file: &str, panel: &str, expr: &str) -> Vec<String> {
    let exposed: BTreeSet<&str> = specie_metrics::FAMILIES_EXPOSED.iter().map(|(name, _)| *name).collect();
    let unknown: BTreeSet<&str> = metric_names(expr)
        .into_iter()
        .filter(|name| !exposed.contains(family_of(name)))
        .collect();
    let place = if panel.is_empty() {
        String::new()
    } else {
        format!(" {panel}")
    };
    unknown
        .into_iter()
        .map(|name| {
            format!(
                "{file}:{place} `{name}` is no family specie exposes (specie_metrics::FAMILIES_EXPOSED; \
                 a histogram is queried as <family>_bucket, _sum or _count)"
            )
        })
        .collect()
}

/// A dashboard's panels, with those nested in (collapsed) rows, each with how a message names it.
fn panels(dashboard: &Value) -> Vec<(String, &Value)> {
    let mut all = Vec::new();
    for (index, panel) in array(dashboard, "panels").enumerate() {
        all.push((panel_name(&index.to_string(), panel), panel));
        let nested = array(panel, "panels").enumerate();
        all.extend(nested.map(|(inner, p)| (panel_name(&format!("{index}.{inner}"), p), p)));
    }
    all
}

/// The elements of `value[key]`, none if it is not an array.
fn array<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn panel_name(index: &str, panel: &Value) -> String {
    let id = panel.get("id").map_or("?".to_string(), Value::to_string);
    let title = panel.get("title").and_then(Value::as_str).unwrap_or("?");
    format!("panel #{index} (id {id}, \"{title}\")")
}

/// Every target expression of a dashboard, with the panel that holds it.
fn dashboard_expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut expressions = Vec::new();
    for (name, panel) in panels(dashboard) {
        for target in array(panel, "targets") {
            if let Some(expr) = target.get("expr").and_then(Value::as_str) {
                expressions.push((name.clone(), expr.to_string()));
            }
        }
    }
    expressions
}

/// A dashboard's uid (if it has one) and what is wrong with it.
fn dashboard_problems(file: &str, text: &str) -> (Option<String>, Vec<String>) {
    let dashboard: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return (None, vec![format!("{file}: not JSON: {e}")]),
    };
    let mut problems = Vec::new();
    let uid = dashboard.get("uid").and_then(Value::as_str).map(str::to_string);
    if uid.as_deref().is_none_or(str::is_empty) {
        problems.push(format!("{file}: no string `uid`"));
    }
    if dashboard.get("title").and_then(Value::as_str).is_none_or(str::is_empty) {
        problems.push(format!("{file}: no string `title`"));
    }
    match dashboard.get("schemaVersion").and_then(Value::as_i64) {
        Some(version) if version >= SCHEMA_VERSION_MIN => {}
        other => problems.push(format!(
            "{file}: `schemaVersion` {other:?}, want an integer >= {SCHEMA_VERSION_MIN}"
        )),
    }
    let variables = dashboard
        .pointer("/templating/list")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let is_datasource = |v: &Value| {
        v.get("name") == Some(&Value::from("datasource")) && v.get("type") == Some(&Value::from("datasource"))
    };
    if !variables.into_iter().any(is_datasource) {
        problems.push(format!(
            "{file}: templating has no variable `datasource` of type `datasource`"
        ));
    }
    if dashboard
        .get("panels")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        problems.push(format!("{file}: `panels` is not a non-empty array"));
    }
    let mut ids = BTreeMap::new();
    for (name, panel) in panels(&dashboard) {
        if let Some(id) = panel.get("id").and_then(Value::as_i64) {
            if let Some(first) = ids.insert(id, name.clone()) {
                problems.push(format!("{file}: {name}: id {id} is also {first}'s"));
            }
        }
        problems.extend(
            panel_problems(panel)
                .into_iter()
                .map(|p| format!("{file}: {name}: {p}")),
        );
    }
    problems.extend(overlaps(file, &dashboard));
    (uid, problems)
}

/// What is wrong with one panel, on its own.
fn panel_problems(panel: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if panel.get("id").and_then(Value::as_i64).is_none() {
        problems.push("no integer `id`".to_string());
    }
    let kind = panel.get("type").and_then(Value::as_str).unwrap_or_default();
    if !PANEL_TYPES.contains(&kind) {
        problems.push(format!("`type` {:?} is not one of {PANEL_TYPES:?}", panel.get("type")));
    }
    if panel.get("title").and_then(Value::as_str).is_none() {
        problems.push("no string `title`".to_string());
    }
    match grid(panel) {
        Some((h, w, x, y)) if h > 0 && w > 0 && x >= 0 && y >= 0 && x + w <= GRID_COLUMNS => {}
        _ => problems.push(format!(
            "`gridPos` {:?} wants integers h > 0, w > 0, x >= 0, y >= 0 and x + w <= {GRID_COLUMNS}",
            panel.get("gridPos")
        )),
    }
    if kind == "row" {
        return problems;
    }
    if panel.pointer("/datasource/uid").and_then(Value::as_str) != Some(DATASOURCE_UID) {
        problems.push(format!(
            "`datasource.uid` is not `{DATASOURCE_UID}` (the dashboard's variable)"
        ));
    }
    let targets = panel.get("targets").and_then(Value::as_array);
    if targets.is_none_or(Vec::is_empty) {
        problems.push("no `targets`".to_string());
    }
    for (index, target) in targets.into_iter().flatten().enumerate() {
        for key in ["expr", "refId"] {
            if target.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                problems.push(format!("target #{index} has no non-empty string `{key}`"));
            }
        }
    }
    problems
}

/// A panel's `gridPos` as (h, w, x, y), if all four are integers.
fn grid(panel: &Value) -> Option<(i64, i64, i64, i64)> {
    let at = |key: &str| panel.get("gridPos")?.get(key)?.as_i64();
    Some((at("h")?, at("w")?, at("x")?, at("y")?))
}

/// The top-level panels whose rectangles overlap.
fn overlaps(file: &str, dashboard: &Value) -> Vec<String> {
    let placed: Vec<(String, (i64, i64, i64, i64))> = array(dashboard, "panels")
        .enumerate()
        .filter_map(|(index, panel)| Some((panel_name(&index.to_string(), panel), grid(panel)?)))
        .collect();
    let mut problems = Vec::new();
    for (i, (a, (ah, aw, ax, ay))) in placed.iter().enumerate() {
        for (b, (bh, bw, bx, by)) in &placed[i + 1..] {
            if ax < &(bx + bw) && bx < &(ax + aw) && ay < &(by + bh) && by < &(ay + ah) {
                problems.push(format!("{file}: {a} overlaps {b}"));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_are_read_from_lines_and_blocks() {
        let rules = "groups:\n  - rules:\n      - alert: A\n        expr: up{job=\"specie\"} == 0\n        for: 1m\n\
                     \x20     - alert: B\n        expr: |\n          sum(specie_raft_term)\n          or specie_x_total\n        for: 2m\n";
        let expressions = alert_expressions(rules);
        assert_eq!(
            expressions,
            ["up{job=\"specie\"} == 0", "sum(specie_raft_term)\nor specie_x_total\n"]
        );
    }

    #[test]
    fn unknown_names_are_named_and_histogram_series_are_their_family() {
        let expr = "rate(specie_log_fsync_duration_seconds_bucket[5m]) + specie_raft_term_count \
                    + specie_http_requests_total + not_specie_thing + specie_made_up_total";
        assert_eq!(
            metric_names(expr),
            [
                "specie_log_fsync_duration_seconds_bucket",
                "specie_raft_term_count",
                "specie_http_requests_total",
                "specie_made_up_total"
            ]
        );
        let problems = unknown_families("ops/x.yml", "", expr);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("ops/x.yml: `specie_made_up_total`"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("`specie_raft_term_count`"),
            "a gauge has no _count: {problems:?}"
        );
    }

    #[test]
    fn a_bad_dashboard_is_named_by_file_and_panel() {
        let good_panel = |id: i64, x: i64| {
            serde_json::json!({"id": id, "type": "stat", "title": format!("p{id}"),
                "gridPos": {"h": 4, "w": 12, "x": x, "y": 0},
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "targets": [{"expr": "up", "refId": "A"}]})
        };
        let dashboard = |panels: Vec<Value>| {
            serde_json::json!({"uid": "u", "title": "t", "schemaVersion": 39,
                "templating": {"list": [{"name": "datasource", "type": "datasource"}]}, "panels": panels})
            .to_string()
        };
        let (uid, problems) = dashboard_problems("d.json", &dashboard(vec![good_panel(1, 0), good_panel(2, 12)]));
        assert_eq!((uid.as_deref(), problems), (Some("u"), vec![]));

        let mut bad = good_panel(1, 6);
        bad["datasource"]["uid"] = Value::from("abc");
        bad["targets"][0]["refId"] = Value::from("");
        let (_, problems) = dashboard_problems("d.json", &dashboard(vec![good_panel(1, 0), bad]));
        let text = problems.join("\n");
        assert_eq!(problems.len(), 4, "{text}");
        assert!(text.contains("d.json: panel #1 (id 1, \"p1\"): id 1 is also"), "{text}");
        assert!(
            text.contains("`datasource.uid`") && text.contains("`refId`") && text.contains("overlaps"),
            "{text}"
        );
        assert!(!dashboard_problems("d.json", "{").1.is_empty());
    }
}
