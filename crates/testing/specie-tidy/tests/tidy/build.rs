//! The build diet: what keeps `cargo test --workspace` (CI's test command) and clippy fast on a
//! two-core machine stays true as crates and dependencies are added.
//!
//! - Every library sets `[lib] doctest = false`: the workspace has no doc tests, and rustdoc
//!   still parses every library to find none (49 of them took 2.5 minutes). Examples live in
//!   tests, so a doc comment's code fences name a language other than Rust (```` ```text ````,
//!   ```` ```json ````): a Rust fence would be a doc test that never runs.
//! - Every package that runs only inside the compiler (proc macros, build scripts and what they
//!   use) is built at `opt-level = 0` by a named `[profile.dev.package.NAME]` entry in the root
//!   `Cargo.toml`; otherwise the `"*"` entry builds it at opt-level 2 (syn took 40 s of
//!   codegen, once per major version).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use super::{assert_clean, workspace, workspace_root};

#[test]
fn build_diet_doc_tests_are_off_and_doc_fences_are_text() {
    let ws = workspace();
    let root = workspace_root();
    let mut problems = Vec::new();
    for krate in &ws.crates {
        if !root.join(&krate.dir).join("src/lib.rs").exists() {
            continue;
        }
        let path = root.join(krate.manifest());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let table: toml::Table = text
            .parse()
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let doctest = table
            .get("lib")
            .and_then(|lib| lib.get("doctest"))
            .and_then(|d| d.as_bool());
        if doctest != Some(false) {
            problems.push(format!(
                "{}: set `[lib] doctest = false` (doc tests are off; examples live in tests)",
                krate.manifest()
            ));
        }
    }
    for file in &ws.files {
        let text = std::fs::read_to_string(root.join(&file.path)).unwrap_or_default();
        problems.extend(rust_doc_fences(&text).into_iter().map(|line| {
            format!(
                "{}:{line}: a doc comment's Rust code fence is a doc test that never runs (doctest = \
                 false); name its language (```text), or move the example into a test",
                file.path
            )
        }));
    }
    assert_clean("doc tests", problems);
}

/// The lines of doc-comment code fences that rustdoc would take for Rust: an opening fence with
/// no language, or with `rust` or one of rustdoc's test attributes.
fn rust_doc_fences(source: &str) -> Vec<usize> {
    let mut open = false;
    let mut found = Vec::new();
    for (index, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        let Some(doc) = trimmed.strip_prefix("///").or_else(|| trimmed.strip_prefix("//!")) else {
            continue;
        };
        let Some(info) = doc.trim_start().strip_prefix("```") else {
            continue;
        };
        if !open && is_rust(info) {
            found.push(index + 1);
        }
        open = !open;
    }
    found
}

/// Whether rustdoc reads a code fence with this info string as a Rust doc test.
fn is_rust(info: &str) -> bool {
    const RUSTDOC_ATTRIBUTES: &[&str] = &["rust", "ignore", "should_panic", "no_run", "compile_fail"];
    let mut tokens = info
        .split([',', ' '])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .peekable();
    tokens.peek().is_none() || tokens.any(|t| RUSTDOC_ATTRIBUTES.contains(&t) || t.starts_with("edition"))
}

#[test]
fn build_diet_what_runs_in_the_compiler_is_not_optimised() {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the root Cargo.toml");
    let table: toml::Table = manifest.parse().expect("the root Cargo.toml parses");
    let unoptimised: BTreeSet<String> = table
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(|d| d.get("package"))
        .and_then(|p| p.as_table())
        .into_iter()
        .flatten()
        .filter(|(_, settings)| settings.get("opt-level").and_then(|o| o.as_integer()) == Some(0))
        .map(|(name, _)| name.clone())
        .collect();
    let host_only = host_only_packages();
    assert!(
        host_only.iter().any(|name| name == "serde_derive"),
        "the dependency graph as read has no serde_derive: {host_only:?}"
    );
    let problems = host_only
        .iter()
        .filter(|name| !unoptimised.contains(*name))
        .map(|name| {
            format!(
                "Cargo.toml: `{name}` runs only inside the compiler; add `[profile.dev.package.{name}]` \
                 with `opt-level = 0`"
            )
        })
        .collect();
    assert_clean("build diet", problems);
}

/// The packages of this host's dependency graph that only the compiler runs: proc macros, build
/// dependencies, and what only they depend on.
fn host_only_packages() -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let rustc = Command::new("rustc").arg("-vV").output().expect("rustc -vV runs");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names its host");
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--offline",
            "--filter-platform",
        ])
        .arg(&host)
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    host_only(&metadata)
}

/// From `cargo metadata`: every package not reachable from a workspace member through normal or
/// dev edges that stop at proc macros.
fn host_only(metadata: &Value) -> BTreeSet<String> {
    let items = |key: &str| metadata[key].as_array().cloned().unwrap_or_default();
    let name_of: BTreeMap<String, String> = items("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap_or("").to_string(),
                p["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let proc_macros: BTreeSet<String> = items("packages")
        .iter()
        .filter(|p| {
            p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["kind"].as_array().into_iter().flatten().any(|k| k == "proc-macro"))
        })
        .map(|p| p["id"].as_str().unwrap_or("").to_string())
        .collect();
    let nodes = metadata["resolve"]["nodes"].as_array().cloned().unwrap_or_default();
    let edges: BTreeMap<String, Vec<String>> = nodes
        .iter()
        .map(|node| {
            let runtime = node["deps"].as_array().into_iter().flatten().filter(|dep| {
                dep["dep_kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|kind| kind["kind"].is_null() || kind["kind"] == "dev")
            });
            let ids = runtime.filter_map(|dep| dep["pkg"].as_str().map(str::to_string));
            let id = node["id"].as_str().unwrap_or("").to_string();
            (id, ids.filter(|dep| !proc_macros.contains(dep)).collect())
        })
        .collect();
    let mut reached = BTreeSet::new();
    let mut stack: Vec<String> = items("workspace_members")
        .iter()
        .filter_map(|id| id.as_str().map(str::to_string))
        .collect();
    while let Some(id) = stack.pop() {
        if reached.insert(id.clone()) {
            stack.extend(edges.get(&id).into_iter().flatten().cloned());
        }
    }
    let at_runtime: BTreeSet<&String> = reached.iter().filter_map(|id| name_of.get(id)).collect();
    edges
        .keys()
        .filter_map(|id| name_of.get(id))
        .filter(|name| !at_runtime.contains(name))
        .cloned()
        .collect()
}

#[test]
fn a_rust_fence_in_a_doc_comment_is_found_and_a_text_fence_is_not() {
    let source = "//! ```text\n//! a ─▶ b\n//! ```\n/// ```\n/// let x = 1;\n/// ```\n/// ```rust\n/// ```\n\
                  //! ```json\n//! {}\n//! ```\n/// ```no_run\n/// ```\n";
    assert_eq!(rust_doc_fences(source), vec![4, 7, 12]);
}
