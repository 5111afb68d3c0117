//! The workspace's tidy test: layering and hygiene rules, enforced by reading the source tree.
//!
//! Each rule is its own `#[test]`:
//!
//! 1. [`layering`]: crates live in `crates/base/*` (depend on no workspace crate outside
//!    `crates/base`), `crates/core/*`, a capability folder (`crates/byzantine/*`,
//!    `crates/offline/*`, `crates/exchange/*`, `crates/privacy/*`), `crates/infra/*`,
//!    `crates/deployment/*`, `crates/tools/*` (workloads, benchmarks, the demo), `crates/testing/*`
//!    or the binary `crates/specie`. Only `crates/testing` and the binary may depend on a testing crate, and
//!    nothing depends on the binary.
//! 2. [`pure_role_crates_do_no_io`]: the pure protocol-role crates ([`PURE_CRATES`] and every base
//!    crate) mention no tokio, file system, network, clock or sleep in their `src/`, and do not
//!    depend on tokio.
//! 3. [`fn_length`]: no function in `crates/**/src` is longer than [`MAX_FN_LINES`] lines.
//! 4. [`no_result_string_in_library_apis`]: no library function returns `Result<_, String>`.
//! 5. [`no_anyhow_in_library_crates`]: no base, core, capability, infra or tools crate depends on `anyhow`.
//! 6. [`the_house_map_is_true`]: every crate has one row in `docs/architecture.md`'s crate table
//!    (tier, capability, bridge), the table agrees with the folders, and every dependency points to
//!    the same tier or a lower one (foundation < format < role < infra < service < deployment <
//!    tools < binary; testing crates apart).
//! 7. [`capabilities_meet_only_through_bridges`]: a crate of one capability depends on another
//!    capability's crate only if the table marks it `bridge` (deployment and tools crates, which
//!    assemble every capability, are exempt).
//! 8. [`doc_links_resolve`]: every relative link in `README.md` and `docs/` names a file that
//!    exists, and a heading that exists for `#anchor` links.
//! 9. [`ops`]: the alert rules (`ops/prometheus/alerts.yml`) and the Grafana dashboards
//!    (`ops/grafana/*.json`) name only metric families the code exposes
//!    (`specie_metrics::FAMILIES_EXPOSED`), and every dashboard is well-formed Grafana JSON.
//! 10. [`build`]: the build diet. Every library turns doc tests off (there are none; doc-comment
//!     code fences are `text`), and every package that only the compiler runs (proc macros,
//!     build scripts and their dependencies) is built unoptimised.
//!
//! Only normal (and, for layering, build) dependencies count; dev-dependencies are free. Test code
//! is exempt throughout: `tests/`, benches, `#[cfg(test)]` items and modules, and `#[test]` fns.
//!
//! Rules 1, 2, 6, 8, 9 and 10 must pass outright. Rules 3 to 5 and 7 are a ratchet: violations that predate them are
//! listed in `allowlist.txt` (line-number free, sorted), and the tests fail both on a violation that
//! is not listed and on a listed line that matches no violation any more, so the list only shrinks.
//! `TIDY_BLESS=1 cargo test -p specie-tidy` rewrites the list to exactly today's violations, for a
//! maintainer after a deliberate change.
//!
//! The Rust sources are parsed once with `syn` (so comments and strings never trigger a rule) and
//! the facts the rules need are shared between the tests through a [`OnceLock`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use proc_macro2::{TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{
    Attribute, Block, GenericArgument, ImplItem, Item, Meta, PathArguments, ReturnType, Signature, TraitItem, Type,
    UseTree, Visibility,
};

#[path = "tidy/build.rs"]
mod build;
#[path = "tidy/map.rs"]
mod map;
#[path = "tidy/ops.rs"]
mod ops;

/// The crates that hold a protocol role as a pure (sans-IO) state machine, besides every crate in
/// `crates/base`. Their `src/` may not do I/O or read clocks: the drivers in other crates do that.
const PURE_CRATES: &[&str] = &[
    "specie-transaction",
    "specie-shard",
    "specie-coordinator",
    "specie-sentinel",
    "specie-fastpay",
    "specie-authority",
    "specie-offline",
    "specie-offline-authority",
    "specie-offline-device",
    "specie-archiver",
    "specie-atomizer",
    "specie-endorsement",
    "specie-auditor",
    // Not a role, but pure: the confidential payments' proofs take their randomness as an argument.
    "specie-confidential",
    // Not a role, but pure: the registration authority and the credential proofs take their
    // randomness as an argument.
    "specie-credential",
    // Not a role, but as pure: the workloads the demo, benchmarks and simulator share take their
    // randomness as an argument and leave submitting, and timing, to the caller.
    "specie-workload",
];

/// Paths that mean I/O, clocks or sleeping, matched as a run of segments anywhere in a path.
const FORBIDDEN_PATHS: &[&[&str]] = &[
    &["tokio"],
    &["std", "fs"],
    &["std", "net"],
    &["std", "time", "Instant"],
    &["std", "time", "SystemTime"],
    &["Instant", "now"],
    &["SystemTime", "now"],
    &["std", "thread", "sleep"],
];

/// The longest a function may be, from the first line of its signature to its closing brace.
const MAX_FN_LINES: usize = 100;

const FN_LENGTH: &str = "fn-length";
const RESULT_STRING: &str = "result-string";
const ANYHOW: &str = "anyhow";
const CAPABILITY_EDGE: &str = "capability-edge";
/// The rules that have an allowlist.
const RATCHETED: &[&str] = &[FN_LENGTH, RESULT_STRING, ANYHOW, CAPABILITY_EDGE];

const ALLOWLIST: &str = "crates/testing/specie-tidy/allowlist.txt";
const ALLOWLIST_HEADER: &str = "\
# specie-tidy allowlist: violations of the ratcheted tidy rules (fn-length, result-string, anyhow,
# capability-edge) that predate the rules, one per line as `RULE PATH [FN or DEPENDENCY]`, sorted,
# without line numbers.
#
# This list must only shrink. tests/tidy.rs fails on a violation that is not listed here, and on a
# line here that matches no violation any more: once the code is fixed, delete its line. Do not add
# lines to get new code past the check; fix the code. After a deliberate change (say, an allowlisted
# function was renamed or moved), a maintainer may regenerate this file with
#     TIDY_BLESS=1 cargo test -p specie-tidy
";

// ---------------------------------------------------------------------------------------------
// The rules, over the real tree.
// ---------------------------------------------------------------------------------------------

#[test]
fn layering() {
    let ws = workspace();
    assert_clean("layering", layering_violations(&ws.crates));
}

#[test]
fn pure_role_crates_do_no_io() {
    let ws = workspace();
    assert_clean("pure role crates", purity_violations(&ws.crates, &ws.files));
}

#[test]
fn fn_length() {
    let ws = workspace();
    check_ratchet(FN_LENGTH, fn_length_violations(&ws.files));
}

#[test]
fn no_result_string_in_library_apis() {
    let ws = workspace();
    check_ratchet(RESULT_STRING, result_string_violations(&ws.crates, &ws.files));
}

#[test]
fn no_anyhow_in_library_crates() {
    let ws = workspace();
    check_ratchet(ANYHOW, anyhow_violations(&ws.crates));
}

#[test]
fn the_house_map_is_true() {
    let ws = workspace();
    let (table, mut problems) = crate_table();
    problems.extend(map::tier_violations(&ws.crates, &table));
    assert_clean("house map", problems);
}

#[test]
fn capabilities_meet_only_through_bridges() {
    let ws = workspace();
    let (table, _) = crate_table();
    check_ratchet(
        CAPABILITY_EDGE,
        map::capability_edges(CAPABILITY_EDGE, &ws.crates, &table),
    );
}

#[test]
fn doc_links_resolve() {
    let root = workspace_root();
    let mut problems = Vec::new();
    for doc in map::documents(&root) {
        match std::fs::read_to_string(root.join(&doc)) {
            Ok(text) => problems.extend(map::dangling_links(&root, &doc, &text)),
            Err(e) => problems.push(format!("{doc}: {e}")),
        }
    }
    assert_clean("doc links", problems);
}

/// A crate's `testing` feature: test support (builders, test kits) that only tests compile.
const TESTING_FEATURE: &str = "testing";

/// Code behind a crate's `testing` feature counts as test code here, so no normal dependency may
/// enable it: the release binary carries no test support.
#[test]
fn no_normal_dependency_enables_testing() {
    let ws = workspace();
    let mut problems = Vec::new();
    for krate in &ws.crates {
        let path = workspace_root().join(krate.manifest());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let table: toml::Table = text
            .parse()
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let Some(deps) = table.get("dependencies").and_then(|d| d.as_table()) else {
            continue;
        };
        for (name, spec) in deps {
            let features = spec.get("features").and_then(|f| f.as_array()).into_iter().flatten();
            if features.filter_map(|f| f.as_str()).any(|f| f == TESTING_FEATURE) {
                problems.push(format!(
                    "{}/Cargo.toml: [dependencies] {name} enables `{TESTING_FEATURE}`; test support belongs in [dev-dependencies]",
                    krate.dir
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The crate table of the architecture document, and what is wrong with its rows.
fn crate_table() -> (BTreeMap<String, map::Entry>, Vec<String>) {
    match std::fs::read_to_string(workspace_root().join(map::ARCHITECTURE)) {
        Ok(text) => map::crate_table(&text),
        Err(e) => (BTreeMap::new(), vec![format!("{}: {e}", map::ARCHITECTURE)]),
    }
}

#[test]
fn every_source_file_parses() {
    let ws = workspace();
    assert_clean("readable sources", ws.errors.clone());
    assert!(
        !ws.crates.is_empty() && !ws.files.is_empty(),
        "found no crates or no sources under {}",
        ws.root
    );
}

#[test]
fn allowlist_is_sorted_and_well_formed() {
    if blessing() {
        bless(workspace());
        return;
    }
    let entries = read_allowlist();
    let mut problems = Vec::new();
    for (line, entry) in &entries {
        let rule = entry.split(' ').next().unwrap_or_default();
        if !RATCHETED.contains(&rule) {
            problems.push(format!(
                "{ALLOWLIST}:{line}: `{entry}` names no ratcheted rule (one of {RATCHETED:?}); fix or delete the line"
            ));
        }
    }
    for pair in entries.windows(2) {
        if pair[0].1 > pair[1].1 {
            problems.push(format!(
                "{ALLOWLIST}:{}: `{}` is out of order (after `{}`); keep the file sorted",
                pair[1].0, pair[1].1, pair[0].1
            ));
        }
    }
    assert_clean("allowlist format", problems);
}

// ---------------------------------------------------------------------------------------------
// The workspace as the rules see it.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrateKind {
    Base,
    Core,
    Infra,
    Tools,
    Testing,
    Binary,
    Unknown,
}

impl CrateKind {
    /// The kind of the crate in `dir`, a path relative to the workspace root.
    fn of(dir: &str) -> CrateKind {
        let parts: Vec<&str> = dir.split('/').collect();
        match parts.as_slice() {
            ["crates", "specie"] => CrateKind::Binary,
            ["crates", "base", _] => CrateKind::Base,
            ["crates", "core", _] => CrateKind::Core,
            // The modes built on the online core live in one folder each, as the core does.
            ["crates", "byzantine" | "offline" | "exchange" | "privacy", _] => CrateKind::Core,
            // Whole deployments (the embedded node, the cluster): library crates like the core's.
            ["crates", "deployment", _] => CrateKind::Core,
            ["crates", "infra", _] => CrateKind::Infra,
            ["crates", "tools", _] => CrateKind::Tools,
            ["crates", "testing", _] => CrateKind::Testing,
            _ => CrateKind::Unknown,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepKind {
    Normal,
    Build,
    Dev,
}

#[derive(Debug)]
struct Dep {
    /// The real package name (after `package = ...` renames, also through the workspace table).
    package: String,
    kind: DepKind,
    /// The line of `Cargo.toml` that declares it (1 if it cannot be found).
    line: usize,
}

#[derive(Debug)]
struct Krate {
    /// Relative to the workspace root, with `/` separators, e.g. `crates/core/specie-shard`.
    dir: String,
    name: String,
    kind: CrateKind,
    deps: Vec<Dep>,
}

impl Krate {
    fn manifest(&self) -> String {
        format!("{}/Cargo.toml", self.dir)
    }

    /// Normal and build dependencies: the ones that end up in what the crate ships.
    fn shipped_deps(&self) -> impl Iterator<Item = &Dep> {
        self.deps.iter().filter(|d| d.kind != DepKind::Dev)
    }
}

/// What the rules need to know about one Rust source file; no syn types (they are neither `Send`
/// nor meaningful outside the thread that parsed them).
#[derive(Debug, Default)]
struct FileFacts {
    /// Every non-test function, with or without a body.
    fns: Vec<FnFact>,
    /// Non-test mentions of a [`FORBIDDEN_PATHS`] entry.
    io_mentions: Vec<Mention>,
    /// `mod name;` declarations, to find the files of `#[cfg(test)]` modules.
    mod_decls: Vec<ModDecl>,
    /// The file starts with `#![cfg(test)]`.
    test_only: bool,
}

#[derive(Debug)]
struct FnFact {
    /// Qualified within the file: `Type::method`, `<Type as Trait>::method`, `module::function`.
    name: String,
    line: usize,
    /// Signature to closing brace; `None` for a trait method without a default body.
    lines: Option<usize>,
    returns_result_string: bool,
}

#[derive(Debug)]
struct Mention {
    line: usize,
    path: String,
    forbidden: String,
}

#[derive(Debug)]
struct ModDecl {
    /// The inline modules (`mod a { ... }`) the declaration sits in.
    inline_path: Vec<String>,
    name: String,
    /// A `#[path = "..."]` attribute.
    path_attr: Option<String>,
    cfg_test: bool,
}

#[derive(Debug)]
struct SourceFile {
    /// Relative to the workspace root, with `/` separators.
    path: String,
    /// The owning crate's `dir`.
    crate_dir: String,
    /// Test-only as a whole (`#![cfg(test)]`, or reached only through a `#[cfg(test)] mod x;`).
    test_only: bool,
    facts: FileFacts,
}

#[derive(Debug)]
struct Workspace {
    root: String,
    crates: Vec<Krate>,
    /// The Rust files under each crate's `src/`.
    files: Vec<SourceFile>,
    /// Manifests and sources that could not be read or parsed.
    errors: Vec<String>,
}

fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/testing/specie-tidy -> the workspace root.
    manifest_dir
        .ancestors()
        .nth(3)
        .expect("specie-tidy lives at crates/testing/specie-tidy")
        .to_path_buf()
}

/// The workspace, read and parsed once for all tests.
fn workspace() -> &'static Workspace {
    static WORKSPACE: OnceLock<Workspace> = OnceLock::new();
    WORKSPACE.get_or_init(|| load_workspace(&workspace_root()))
}

fn load_workspace(root: &Path) -> Workspace {
    let mut errors = Vec::new();
    let workspace_deps = match std::fs::read_to_string(root.join("Cargo.toml")) {
        Ok(text) => workspace_dependency_packages(&text).unwrap_or_else(|e| {
            errors.push(format!("Cargo.toml: {e}"));
            BTreeMap::new()
        }),
        Err(e) => {
            errors.push(format!("Cargo.toml: {e}"));
            BTreeMap::new()
        }
    };

    let mut manifests = Vec::new();
    walk(&root.join("crates"), &mut |path| {
        if path.file_name().is_some_and(|n| n == "Cargo.toml") {
            manifests.push(path.to_path_buf());
        }
    });
    let mut crates = Vec::new();
    for manifest in manifests {
        let dir = relative(root, manifest.parent().expect("a manifest has a parent"));
        let parsed = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("{dir}/Cargo.toml: {e}"))
            .and_then(|text| parse_manifest(&dir, &text, &workspace_deps));
        match parsed {
            Ok(Some(krate)) => crates.push(krate),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    crates.sort_by(|a, b| a.dir.cmp(&b.dir));

    let mut files = Vec::new();
    for krate in &crates {
        let mut paths = Vec::new();
        walk(&root.join(&krate.dir).join("src"), &mut |path| {
            if path.extension().is_some_and(|e| e == "rs") {
                paths.push(path.to_path_buf());
            }
        });
        for path in paths {
            let rel = relative(root, &path);
            let facts = std::fs::read_to_string(&path)
                .map_err(|e| e.to_string())
                .and_then(|src| analyze_source(&src).map_err(|e| format!("{}: {e}", e.span().start().line)));
            match facts {
                Ok(facts) => files.push(SourceFile {
                    path: rel,
                    crate_dir: krate.dir.clone(),
                    test_only: false,
                    facts,
                }),
                Err(e) => errors.push(format!("{rel}:{e} (the file does not parse)")),
            }
        }
    }
    mark_test_only_files(&mut files);
    Workspace {
        root: root.display().to_string(),
        crates,
        files,
        errors,
    }
}

/// Calls `found` on every file under `dir`, in a stable order, skipping `target/` and `fuzz/`.
fn walk(dir: &Path, found: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if name != "target" && name != "fuzz" && !name.starts_with('.') {
                walk(&path, found);
            }
        } else {
            found(&path);
        }
    }
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Marks the files of `#[cfg(test)] mod x;` declarations (and everything below them) test-only.
fn mark_test_only_files(files: &mut [SourceFile]) {
    let mut test_only: BTreeSet<String> = files
        .iter()
        .filter(|f| f.facts.test_only)
        .map(|f| f.path.clone())
        .collect();
    loop {
        let before = test_only.len();
        for file in files.iter() {
            let parent_is_test = test_only.contains(&file.path);
            for decl in &file.facts.mod_decls {
                if parent_is_test || decl.cfg_test {
                    test_only.extend(module_file_candidates(&file.path, decl));
                }
            }
        }
        if test_only.len() == before {
            break;
        }
    }
    for file in files {
        file.test_only = test_only.contains(&file.path);
    }
}

/// Where the file of `decl`, declared in the file at `declaring`, may be.
fn module_file_candidates(declaring: &str, decl: &ModDecl) -> Vec<String> {
    let file = Path::new(declaring);
    let parent = file.parent().unwrap_or(Path::new(""));
    let file_name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let owns_its_dir = matches!(file_name, "lib.rs" | "main.rs" | "mod.rs") || parent.ends_with("src/bin");
    let mut dir = if owns_its_dir {
        parent.to_path_buf()
    } else {
        parent.join(file.file_stem().unwrap_or_default())
    };
    if let Some(path) = &decl.path_attr {
        let base = if decl.inline_path.is_empty() {
            parent.to_path_buf()
        } else {
            dir.join(decl.inline_path.join("/"))
        };
        return vec![normalize(&base.join(path))];
    }
    dir.extend(&decl.inline_path);
    vec![
        normalize(&dir.join(format!("{}.rs", decl.name))),
        normalize(&dir.join(&decl.name).join("mod.rs")),
    ]
}

/// Resolves `.` and `..` lexically; returns a `/`-separated path.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                parts.pop();
            }
            Component::CurDir => {}
            other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

// ---------------------------------------------------------------------------------------------
// Manifests.
// ---------------------------------------------------------------------------------------------

/// The root manifest's `[workspace.dependencies]`: key -> real package name.
fn workspace_dependency_packages(root_manifest: &str) -> Result<BTreeMap<String, String>, toml::de::Error> {
    let table: toml::Table = root_manifest.parse()?;
    let deps = table
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(|d| d.as_table());
    Ok(deps
        .into_iter()
        .flatten()
        .map(|(key, spec)| {
            (
                key.clone(),
                spec.get("package").and_then(|p| p.as_str()).unwrap_or(key).to_string(),
            )
        })
        .collect())
}

/// The crate declared by the manifest of `dir`, or `None` for a manifest without `[package]`.
fn parse_manifest(dir: &str, text: &str, workspace_deps: &BTreeMap<String, String>) -> Result<Option<Krate>, String> {
    let table: toml::Table = text.parse().map_err(|e| format!("{dir}/Cargo.toml: {e}"))?;
    let Some(package) = table.get("package").and_then(|p| p.as_table()) else {
        return Ok(None);
    };
    let name = package
        .get("name")
        .and_then(|n| n.as_str())
        .ok_or_else(|| format!("{dir}/Cargo.toml: [package] has no name"))?
        .to_string();
    let mut deps = Vec::new();
    collect_deps(&table, text, workspace_deps, &mut deps);
    for target in table
        .get("target")
        .and_then(|t| t.as_table())
        .into_iter()
        .flat_map(|t| t.values())
    {
        if let Some(target) = target.as_table() {
            collect_deps(target, text, workspace_deps, &mut deps);
        }
    }
    Ok(Some(Krate {
        dir: dir.to_string(),
        name,
        kind: CrateKind::of(dir),
        deps,
    }))
}

fn collect_deps(table: &toml::Table, text: &str, workspace_deps: &BTreeMap<String, String>, out: &mut Vec<Dep>) {
    for (section, kind) in [
        ("dependencies", DepKind::Normal),
        ("build-dependencies", DepKind::Build),
        ("dev-dependencies", DepKind::Dev),
    ] {
        let Some(deps) = table.get(section).and_then(|d| d.as_table()) else {
            continue;
        };
        for (key, spec) in deps {
            let renamed = spec.get("package").and_then(|p| p.as_str()).map(str::to_string);
            let inherited = spec.get("workspace").and_then(|w| w.as_bool()) == Some(true);
            let package = match renamed {
                Some(package) => package,
                None if inherited => workspace_deps.get(key).cloned().unwrap_or_else(|| key.clone()),
                None => key.clone(),
            };
            out.push(Dep {
                package,
                kind,
                line: line_of_dep(text, kind, key),
            });
        }
    }
}

/// The line of `text` (a manifest) that declares dependency `key` of `kind`; 1 if not found.
fn line_of_dep(text: &str, kind: DepKind, key: &str) -> usize {
    let table_name = match kind {
        DepKind::Normal => "dependencies",
        DepKind::Build => "build-dependencies",
        DepKind::Dev => "dev-dependencies",
    };
    let is_dep_table = |section: &str| section == table_name || section.ends_with(&format!(".{table_name}"));
    let mut section = String::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            section = header.trim().to_string();
            if section
                .strip_suffix(key)
                .and_then(|s| s.strip_suffix('.'))
                .is_some_and(is_dep_table)
            {
                return i + 1;
            }
            continue;
        }
        let declares_key = line
            .strip_prefix(key)
            .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
            .is_some_and(|rest| rest.starts_with([' ', '=', '.']));
        if declares_key && is_dep_table(&section) {
            return i + 1;
        }
    }
    1
}

// ---------------------------------------------------------------------------------------------
// Rust sources.
// ---------------------------------------------------------------------------------------------

/// Parses one Rust source file and collects the facts the rules need.
fn analyze_source(src: &str) -> syn::Result<FileFacts> {
    let file = syn::parse_file(src)?;
    let mut collector = Collector::default();
    collector.facts.test_only = file
        .attrs
        .iter()
        .any(|a| matches!(a.style, syn::AttrStyle::Inner(_)) && is_cfg_test(a));
    collector.test_depth = usize::from(collector.facts.test_only);
    collector.visit_file(&file);
    Ok(collector.facts)
}

#[derive(Default)]
struct Collector {
    facts: FileFacts,
    /// Modules, impls, traits and fns around the current node, for qualified fn names.
    scope: Vec<String>,
    /// The inline modules around the current node, for module file paths.
    inline_mods: Vec<String>,
    /// How many `#[cfg(test)]` items or `#[test]` fns the current node sits in.
    test_depth: usize,
}

impl Collector {
    fn in_test(&self) -> bool {
        self.test_depth > 0
    }

    fn record_fn(&mut self, vis: &Visibility, sig: &Signature, body: Option<&Block>) {
        if self.in_test() {
            return;
        }
        let sig_line = sig.span().start().line;
        let line = match vis {
            Visibility::Inherited => sig_line,
            vis => vis.span().start().line.min(sig_line),
        };
        let lines = body.map(|b| b.brace_token.span.close().end().line + 1 - line);
        let mut name = self.scope.clone();
        name.push(sig.ident.to_string());
        self.facts.fns.push(FnFact {
            name: name.join("::"),
            line,
            lines,
            returns_result_string: returns_result_string(&sig.output),
        });
    }

    fn mention(&mut self, segments: &[String], line: usize) {
        if self.in_test() {
            return;
        }
        if let Some(forbidden) = forbidden_path(segments) {
            self.facts.io_mentions.push(Mention {
                line,
                path: segments.join("::"),
                forbidden,
            });
        }
    }

    /// Runs `visit` inside `scope`, as test code if `test`.
    fn within(&mut self, scope: Option<String>, test: bool, visit: impl FnOnce(&mut Self)) {
        let pushed = scope.is_some();
        self.scope.extend(scope);
        self.test_depth += usize::from(test);
        visit(self);
        self.test_depth -= usize::from(test);
        if pushed {
            self.scope.pop();
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast Item) {
        let test = item_attrs(item).iter().any(is_cfg_test);
        self.within(None, test, |v| visit::visit_item(v, item));
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        let attrs = match item {
            ImplItem::Const(i) => &i.attrs[..],
            ImplItem::Fn(i) => &i.attrs,
            ImplItem::Type(i) => &i.attrs,
            ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        let test = attrs.iter().any(is_cfg_test);
        self.within(None, test, |v| visit::visit_impl_item(v, item));
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        let attrs = match item {
            TraitItem::Const(i) => &i.attrs[..],
            TraitItem::Fn(i) => &i.attrs,
            TraitItem::Type(i) => &i.attrs,
            TraitItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        let test = attrs.iter().any(is_cfg_test);
        self.within(None, test, |v| visit::visit_trait_item(v, item));
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let name = item.ident.to_string();
        if item.content.is_some() {
            self.inline_mods.push(name.clone());
            self.within(Some(name), false, |v| visit::visit_item_mod(v, item));
            self.inline_mods.pop();
        } else {
            self.facts.mod_decls.push(ModDecl {
                inline_path: self.inline_mods.clone(),
                name,
                path_attr: path_attr(&item.attrs),
                cfg_test: self.in_test(),
            });
            visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let ty = type_name(&item.self_ty);
        let scope = match &item.trait_ {
            Some((_, trait_path, _)) => format!("<{ty} as {}>", last_ident(trait_path)),
            None => ty,
        };
        self.within(Some(scope), false, |v| visit::visit_item_impl(v, item));
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        self.within(Some(item.ident.to_string()), false, |v| {
            visit::visit_item_trait(v, item)
        });
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        let test = item.attrs.iter().any(is_test_attr);
        self.within(None, test, |v| v.record_fn(&item.vis, &item.sig, Some(&item.block)));
        self.within(Some(item.sig.ident.to_string()), test, |v| {
            visit::visit_item_fn(v, item)
        });
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        let test = item.attrs.iter().any(is_test_attr);
        self.within(None, test, |v| v.record_fn(&item.vis, &item.sig, Some(&item.block)));
        self.within(Some(item.sig.ident.to_string()), test, |v| {
            visit::visit_impl_item_fn(v, item)
        });
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        self.record_fn(&Visibility::Inherited, &item.sig, item.default.as_ref());
        self.within(Some(item.sig.ident.to_string()), false, |v| {
            visit::visit_trait_item_fn(v, item)
        });
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.mention(&segments, path.span().start().line);
        visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut uses = Vec::new();
        flatten_use(&item.tree, &mut Vec::new(), &mut uses);
        for (segments, line) in uses {
            self.mention(&segments, line);
        }
        visit::visit_item_use(self, item);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        self.mention(&[item.ident.to_string()], item.ident.span().start().line);
        visit::visit_item_extern_crate(self, item);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // Macro arguments are not parsed as Rust; look for `a::b::c` runs in their tokens.
        let mut paths = Vec::new();
        token_paths(mac.tokens.clone(), &mut paths);
        for (segments, line) in paths {
            self.mention(&segments, line);
        }
        visit::visit_macro(self, mac);
    }
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]`, `#[cfg(feature = "testing")]` (test support, which only dev-dependencies
/// enable: [`no_normal_dependency_enables_testing`]), a `cfg(all(...))` that requires one of
/// them, or a `cfg(any(...))` whose every alternative does.
fn is_cfg_test(attr: &Attribute) -> bool {
    fn requires_test(meta: &Meta) -> bool {
        let parts = |list: &syn::MetaList| list.parse_args_with(Punctuated::<Meta, syn::Token![,]>::parse_terminated);
        match meta {
            Meta::Path(path) => path.is_ident("test"),
            Meta::NameValue(pair) => {
                pair.path.is_ident("feature")
                    && matches!(&pair.value, syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(value), .. }) if value.value() == TESTING_FEATURE)
            }
            Meta::List(list) if list.path.is_ident("all") => {
                parts(list).is_ok_and(|metas| metas.iter().any(requires_test))
            }
            Meta::List(list) if list.path.is_ident("any") => {
                parts(list).is_ok_and(|metas| !metas.is_empty() && metas.iter().all(requires_test))
            }
            _ => false,
        }
    }
    attr.path().is_ident("cfg") && attr.parse_args::<Meta>().is_ok_and(|meta| requires_test(&meta))
}

/// `#[test]`, `#[tokio::test]` and the like.
fn is_test_attr(attr: &Attribute) -> bool {
    attr.path().segments.last().is_some_and(|s| s.ident == "test")
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("path"))
        .find_map(|a| match &a.meta {
            Meta::NameValue(syn::MetaNameValue {
                value: syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s), ..
                }),
                ..
            }) => Some(s.value()),
            _ => None,
        })
}

fn type_name(ty: &Type) -> String {
    match ty {
        Type::Path(p) => last_ident(&p.path),
        Type::Reference(r) => type_name(&r.elem),
        Type::Paren(p) => type_name(&p.elem),
        Type::Group(g) => type_name(&g.elem),
        Type::Slice(s) => format!("[{}]", type_name(&s.elem)),
        _ => "_".to_string(),
    }
}

fn last_ident(path: &syn::Path) -> String {
    path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default()
}

/// The path's segments if it has no `<T as Trait>` qualifier.
fn plain_segments(ty: &Type) -> Option<(Vec<String>, &PathArguments)> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let last = p.path.segments.last()?;
    Some((
        p.path.segments.iter().map(|s| s.ident.to_string()).collect(),
        &last.arguments,
    ))
}

/// `-> Result<T, String>`, also spelled `std::result::Result` / `std::string::String`.
fn returns_result_string(output: &ReturnType) -> bool {
    let ReturnType::Type(_, ty) = output else { return false };
    let Some((segments, PathArguments::AngleBracketed(args))) = plain_segments(ty) else {
        return false;
    };
    if !matches!(segments.as_slice(), [r] | [_, _, r] if r == "Result")
        || (segments.len() == 3 && !(matches!(segments[0].as_str(), "std" | "core") && segments[1] == "result"))
    {
        return false;
    }
    let types: Vec<&Type> = args
        .args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    let is_string = |ty: &Type| match plain_segments(ty) {
        Some((segments, PathArguments::None)) => {
            segments == ["String"]
                || (segments.len() == 3
                    && matches!(segments[0].as_str(), "std" | "alloc")
                    && segments[1] == "string"
                    && segments[2] == "String")
        }
        _ => false,
    };
    types.len() == 2 && is_string(types[1])
}

/// Every path a `use` tree imports, as segments with the line of its last segment.
fn flatten_use(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut leaf = |prefix: &[String], last: String, line: usize| {
        let mut segments = prefix.to_vec();
        segments.push(last);
        out.push((segments, line));
    };
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => leaf(prefix, n.ident.to_string(), n.ident.span().start().line),
        UseTree::Rename(r) => leaf(prefix, r.ident.to_string(), r.ident.span().start().line),
        UseTree::Glob(g) => leaf(prefix, "*".to_string(), g.star_token.span.start().line),
        UseTree::Group(g) => {
            for item in &g.items {
                flatten_use(item, prefix, out);
            }
        }
    }
}

/// The `a::b::c` runs of identifiers in a token stream (a macro's unparsed arguments).
fn token_paths(tokens: TokenStream, out: &mut Vec<(Vec<String>, usize)>) {
    let mut current: Vec<String> = Vec::new();
    let mut line = 0;
    let mut colons = 0;
    let flush = |current: &mut Vec<String>, line: usize, out: &mut Vec<(Vec<String>, usize)>| {
        if !current.is_empty() {
            out.push((std::mem::take(current), line));
        }
    };
    for token in tokens {
        match token {
            TokenTree::Ident(ident) => {
                if colons != 2 {
                    flush(&mut current, line, out);
                    line = ident.span().start().line;
                }
                current.push(ident.to_string());
                colons = 0;
            }
            TokenTree::Punct(p) if p.as_char() == ':' && !current.is_empty() && colons < 2 => colons += 1,
            other => {
                flush(&mut current, line, out);
                colons = 0;
                if let TokenTree::Group(group) = other {
                    token_paths(group.stream(), out);
                }
            }
        }
    }
    flush(&mut current, line, out);
}

/// The [`FORBIDDEN_PATHS`] entry that `segments` contains, if any.
fn forbidden_path(segments: &[String]) -> Option<String> {
    FORBIDDEN_PATHS
        .iter()
        .find(|pattern| {
            segments
                .windows(pattern.len())
                .any(|window| window.iter().zip(pattern.iter()).all(|(a, b)| a == b))
        })
        .map(|pattern| pattern.join("::"))
}

// ---------------------------------------------------------------------------------------------
// The rules.
// ---------------------------------------------------------------------------------------------

/// A violation of a ratcheted rule.
#[derive(Debug)]
struct Violation {
    /// The line-number-free allowlist entry, e.g. `fn-length crates/specie/src/bench.rs run`.
    key: String,
    /// `file:line: what is wrong and how to fix it`.
    message: String,
}

fn layering_violations(crates: &[Krate]) -> Vec<String> {
    let testing: BTreeSet<&str> = crates
        .iter()
        .filter(|k| k.kind == CrateKind::Testing)
        .map(|k| k.name.as_str())
        .collect();
    let mut binaries: BTreeSet<&str> = crates
        .iter()
        .filter(|k| k.kind == CrateKind::Binary)
        .map(|k| k.name.as_str())
        .collect();
    binaries.insert("specie");
    let base: BTreeSet<&str> = crates
        .iter()
        .filter(|k| k.kind == CrateKind::Base)
        .map(|k| k.name.as_str())
        .collect();
    let mut problems = Vec::new();
    for krate in crates {
        let manifest = krate.manifest();
        if krate.kind == CrateKind::Unknown {
            problems.push(format!(
                "{manifest}:1: crate `{}` is in no layer folder; move it to crates/base/, crates/core/, a capability \
                 folder (crates/byzantine/, crates/offline/, crates/exchange/, crates/privacy/), crates/infra/, \
                 crates/deployment/, crates/tools/ or crates/testing/ (only the binary lives at crates/specie)",
                krate.name
            ));
        }
        for dep in krate.shipped_deps() {
            let package = dep.package.as_str();
            let outside_base =
                (package.starts_with("specie-") && !base.contains(package)) || binaries.contains(package);
            if krate.kind == CrateKind::Base && outside_base {
                problems.push(format!(
                    "{manifest}:{}: base crate `{}` depends on workspace crate `{package}`; base crates depend on no \
                     workspace crate outside crates/base/. Move the code it needs into a base crate, or move `{}` out \
                     of crates/base/",
                    dep.line, krate.name, krate.name
                ));
            }
            let may_use_testing = matches!(krate.kind, CrateKind::Testing | CrateKind::Binary);
            if testing.contains(package) && !may_use_testing {
                problems.push(format!(
                    "{manifest}:{}: `{}` depends on the testing crate `{package}`; outside crates/testing/ and the \
                     binary, use it only as a dev-dependency (move it to [dev-dependencies])",
                    dep.line, krate.name
                ));
            }
            if binaries.contains(package) {
                problems.push(format!(
                    "{manifest}:{}: `{}` depends on the binary crate `{package}`; nothing may. Move the code it needs \
                     out of crates/specie into a library crate",
                    dep.line, krate.name
                ));
            }
        }
    }
    problems
}

fn is_pure(krate: &Krate) -> bool {
    krate.kind == CrateKind::Base || PURE_CRATES.contains(&krate.name.as_str())
}

fn purity_violations(crates: &[Krate], files: &[SourceFile]) -> Vec<String> {
    let mut problems = Vec::new();
    for name in PURE_CRATES {
        if !crates.iter().any(|k| k.name == *name) {
            problems.push(format!(
                "crates/testing/specie-tidy/tests/tidy.rs: PURE_CRATES names `{name}`, which is not in the workspace; \
                 update the list (a renamed pure crate must stay checked)"
            ));
        }
    }
    for krate in crates.iter().filter(|k| is_pure(k)) {
        for dep in krate.deps.iter().filter(|d| d.kind == DepKind::Normal) {
            if dep.package == "tokio" || dep.package.starts_with("tokio-") {
                problems.push(format!(
                    "{}:{}: pure crate `{}` depends on `{}`; pure role crates do no I/O. Drive the state machine from \
                     a driver crate (or make it a dev-dependency if only tests need it)",
                    krate.manifest(),
                    dep.line,
                    krate.name,
                    dep.package
                ));
            }
        }
    }
    let pure_dirs: BTreeMap<&str, &str> = crates
        .iter()
        .filter(|k| is_pure(k))
        .map(|k| (k.dir.as_str(), k.name.as_str()))
        .collect();
    for file in files.iter().filter(|f| !f.test_only) {
        let Some(name) = pure_dirs.get(file.crate_dir.as_str()) else {
            continue;
        };
        for m in &file.facts.io_mentions {
            problems.push(format!(
                "{}:{}: pure crate `{name}` mentions `{}` (`{}`: I/O, a clock or sleeping); pure role crates take \
                 time and I/O results as inputs from their driver. Move this code to a driver crate, or into a \
                 #[cfg(test)] module if only tests need it",
                file.path, m.line, m.path, m.forbidden
            ));
        }
    }
    problems
}

fn fn_length_violations(files: &[SourceFile]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in files.iter().filter(|f| !f.test_only) {
        for f in &file.facts.fns {
            let Some(lines) = f.lines.filter(|&n| n > MAX_FN_LINES) else {
                continue;
            };
            violations.push(Violation {
                key: format!("{FN_LENGTH} {} {}", file.path, f.name),
                message: format!(
                    "{}:{}: fn `{}` is {lines} lines long (limit {MAX_FN_LINES}, signature to closing brace); split \
                     it into smaller functions",
                    file.path, f.line, f.name
                ),
            });
        }
    }
    violations
}

fn result_string_violations(crates: &[Krate], files: &[SourceFile]) -> Vec<Violation> {
    let binary_dirs: BTreeSet<&str> = crates
        .iter()
        .filter(|k| k.kind == CrateKind::Binary)
        .map(|k| k.dir.as_str())
        .collect();
    let mut violations = Vec::new();
    for file in files
        .iter()
        .filter(|f| !f.test_only && !binary_dirs.contains(f.crate_dir.as_str()))
    {
        for f in file.facts.fns.iter().filter(|f| f.returns_result_string) {
            violations.push(Violation {
                key: format!("{RESULT_STRING} {} {}", file.path, f.name),
                message: format!(
                    "{}:{}: fn `{}` returns `Result<_, String>`; library APIs return typed errors. Define an error \
                     enum (thiserror) and return that",
                    file.path, f.line, f.name
                ),
            });
        }
    }
    violations
}

fn anyhow_violations(crates: &[Krate]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for krate in crates.iter().filter(|k| {
        matches!(
            k.kind,
            CrateKind::Base | CrateKind::Core | CrateKind::Infra | CrateKind::Tools
        )
    }) {
        for dep in krate
            .deps
            .iter()
            .filter(|d| d.kind == DepKind::Normal && d.package == "anyhow")
        {
            violations.push(Violation {
                key: format!("{ANYHOW} {}", krate.dir),
                message: format!(
                    "{}:{}: library crate `{}` depends on anyhow; library crates return typed errors (thiserror) and \
                     leave anyhow to the binary. Replace it, or make it a dev-dependency if only tests use it",
                    krate.manifest(),
                    dep.line,
                    krate.name
                ),
            });
        }
    }
    violations
}

// ---------------------------------------------------------------------------------------------
// Reporting and the ratchet.
// ---------------------------------------------------------------------------------------------

fn assert_clean(rule: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "tidy: {} violation(s) of the {rule} rule (this rule has no allowlist; fix them):\n\n{}\n",
        problems.len(),
        problems.join("\n")
    );
}

fn blessing() -> bool {
    std::env::var_os("TIDY_BLESS").is_some_and(|v| v == "1")
}

/// The allowlist's entries, with their line numbers; comments and blank lines skipped.
fn read_allowlist() -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(workspace_root().join(ALLOWLIST)).unwrap_or_default();
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(i, line)| (i, line.to_string()))
        .collect()
}

/// Rewrites the allowlist to exactly the current violations of every ratcheted rule (once per run).
fn bless(ws: &Workspace) {
    static BLESSED: OnceLock<()> = OnceLock::new();
    BLESSED.get_or_init(|| {
        let mut keys: Vec<String> = fn_length_violations(&ws.files)
            .into_iter()
            .chain(result_string_violations(&ws.crates, &ws.files))
            .chain(anyhow_violations(&ws.crates))
            .chain(map::capability_edges(CAPABILITY_EDGE, &ws.crates, &crate_table().0))
            .map(|v| v.key)
            .collect();
        keys.sort();
        let mut text = ALLOWLIST_HEADER.to_string();
        text.push('\n');
        for key in keys {
            text.push_str(&key);
            text.push('\n');
        }
        let path = workspace_root().join(ALLOWLIST);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!("tidy: TIDY_BLESS=1: rewrote {ALLOWLIST}");
    });
}

/// Fails on violations of `rule` not in the allowlist, and on allowlist entries of `rule` that match
/// no violation (entries are counted, so a key may be listed as often as it occurs).
fn check_ratchet(rule: &str, violations: Vec<Violation>) {
    if blessing() {
        bless(workspace());
        return;
    }
    let prefix = format!("{rule} ");
    let allowed: Vec<(usize, String)> = read_allowlist()
        .into_iter()
        .filter(|(_, e)| e.starts_with(&prefix))
        .collect();
    let mut allowed_count: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, entry) in &allowed {
        *allowed_count.entry(entry.as_str()).or_default() += 1;
    }
    let mut found_count: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &violations {
        *found_count.entry(v.key.as_str()).or_default() += 1;
    }

    let mut problems: Vec<String> = violations
        .iter()
        .filter(|v| found_count[v.key.as_str()] > allowed_count.get(v.key.as_str()).copied().unwrap_or(0))
        .map(|v| v.message.clone())
        .collect();
    let new = problems.len();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (line, entry) in &allowed {
        let seen = seen.entry(entry.as_str()).or_default();
        *seen += 1;
        if *seen > found_count.get(entry.as_str()).copied().unwrap_or(0) {
            problems.push(format!(
                "{ALLOWLIST}:{line}: stale entry `{entry}`: it matches no violation any more. Delete the line (the \
                 allowlist only shrinks)"
            ));
        }
    }
    let errors = &workspace().errors;
    let note = if errors.is_empty() {
        String::new()
    } else {
        format!("\n\nNote: unreadable files: {errors:?}")
    };
    assert!(
        problems.is_empty(),
        "tidy: rule {rule}: {new} new violation(s), {} stale allowlist entr(y/ies):\n\n{}\n\n\
         New violations must be fixed, not allowlisted: {ALLOWLIST} only records what predates the rule and only \
         shrinks. If an allowlisted function was merely renamed or moved, a maintainer may regenerate the list with \
         `TIDY_BLESS=1 cargo test -p specie-tidy`.{note}\n",
        problems.len() - new,
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Self-checks: each rule fires on a small in-memory example.
// ---------------------------------------------------------------------------------------------

mod self_checks {
    use super::*;

    fn source(path: &str, crate_dir: &str, src: &str) -> SourceFile {
        let facts = analyze_source(src).expect("example parses");
        SourceFile {
            path: path.to_string(),
            crate_dir: crate_dir.to_string(),
            test_only: facts.test_only,
            facts,
        }
    }

    fn krate(dir: &str, manifest: &str) -> Krate {
        let workspace_deps = workspace_dependency_packages(
            "[workspace.dependencies]\nwebpki = { package = \"rustls-webpki\", version = \"0.103\" }\n",
        )
        .unwrap();
        parse_manifest(dir, manifest, &workspace_deps)
            .unwrap()
            .expect("example has [package]")
    }

    /// A fn whose signature-to-brace span is `lines` lines.
    fn fn_of_lines(name: &str, lines: usize) -> String {
        let mut src = format!("pub fn {name}() {{\n");
        for _ in 0..lines - 2 {
            src.push_str("    let _ = 0;\n");
        }
        src.push_str("}\n");
        src
    }

    #[test]
    fn fn_length_flags_101_lines_but_not_100() {
        let src = format!(
            "/// Docs do not count.\n#[inline]\n{}\n{}",
            fn_of_lines("long", 101),
            fn_of_lines("ok", 100)
        );
        let files = [source("crates/core/x/src/lib.rs", "crates/core/x", &src)];
        let violations = fn_length_violations(&files);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].key, "fn-length crates/core/x/src/lib.rs long");
        assert!(violations[0]
            .message
            .starts_with("crates/core/x/src/lib.rs:3: fn `long` is 101 lines"));
    }

    #[test]
    fn fn_length_names_methods_and_skips_tests() {
        let body: String = (0..120).map(|_| "        let _ = 0;\n").collect();
        let src = format!(
            "struct S;\ntrait T {{ fn d(&self) {{\n{body} }} fn decl(&self); }}\n\
             impl S {{ pub fn m(&self) {{\n{body} }} }}\nimpl T for S {{ fn d(&self) {{\n{body} }} fn decl(&self) {{}} }}\n\
             mod inner {{ fn f() {{\n{body} }} }}\n\
             #[cfg(test)]\nmod tests {{ fn helper() {{\n{body} }} }}\n#[test]\nfn a_test() {{\n{body} }}\n\
             #[cfg(all(test, unix))]\nfn unix_helper() {{\n{body} }}\n"
        );
        let files = [source("crates/core/x/src/lib.rs", "crates/core/x", &src)];
        let mut keys: Vec<String> = fn_length_violations(&files).into_iter().map(|v| v.key).collect();
        keys.sort();
        let prefix = "fn-length crates/core/x/src/lib.rs";
        assert_eq!(
            keys,
            [
                format!("{prefix} <S as T>::d"),
                format!("{prefix} S::m"),
                format!("{prefix} T::d"),
                format!("{prefix} inner::f"),
            ]
        );
    }

    #[test]
    fn result_string_is_flagged_in_libraries_only() {
        let src = "pub fn a() -> Result<(), String> { Ok(()) }\n\
                   fn b() -> std::result::Result<u8, std::string::String> { Ok(1) }\n\
                   trait T { fn c(&self) -> Result<u8, String>; }\n\
                   fn ok1() -> Result<(), Error> { Ok(()) }\n\
                   fn ok2() -> io::Result<String> { Ok(String::new()) }\n\
                   fn ok3() -> Option<String> { None }\n\
                   #[cfg(test)] mod tests { fn t() -> Result<(), String> { Ok(()) } }\n";
        let crates = [
            krate("crates/core/x", "[package]\nname = \"specie-x\"\n"),
            krate("crates/specie", "[package]\nname = \"specie\"\n"),
        ];
        let files = [
            source("crates/core/x/src/lib.rs", "crates/core/x", src),
            source("crates/specie/src/main.rs", "crates/specie", src),
        ];
        let keys: Vec<String> = result_string_violations(&crates, &files)
            .into_iter()
            .map(|v| v.key)
            .collect();
        assert_eq!(
            keys,
            [
                "result-string crates/core/x/src/lib.rs a",
                "result-string crates/core/x/src/lib.rs b",
                "result-string crates/core/x/src/lib.rs T::c",
            ]
        );
    }

    #[test]
    fn pure_crates_may_not_mention_io_or_clocks() {
        let src = "// tokio and std::fs in a comment are fine.\n\
                   const DOC: &str = \"tokio::spawn\";\n\
                   use tokio::sync::Mutex;\n\
                   use std::{fs, time::{Duration, Instant}};\n\
                   pub fn now() -> u64 { let _ = std::time::SystemTime::now(); 0 }\n\
                   pub fn log() { println!(\"{:?}\", std::net::Ipv4Addr::LOCALHOST); }\n\
                   #[cfg(test)]\nmod tests { use tokio::runtime::Runtime; fn t() { std::thread::sleep(D); } }\n";
        let crates = [
            krate("crates/core/specie-shard", "[package]\nname = \"specie-shard\"\n"),
            krate("crates/core/specie-node", "[package]\nname = \"specie-node\"\n"),
        ];
        let files = [
            source("crates/core/specie-shard/src/lib.rs", "crates/core/specie-shard", src),
            source("crates/core/specie-node/src/lib.rs", "crates/core/specie-node", src),
        ];
        let problems = purity_violations(&crates, &files);
        let lines: Vec<&str> = problems.iter().map(|p| p.split(": ").next().unwrap()).collect();
        // tokio::sync::Mutex, std::fs, std::time::Instant, std::time::SystemTime::now, std::net (in a macro);
        // and PURE_CRATES names three crates this example lacks.
        let file = "crates/core/specie-shard/src/lib.rs";
        let expected = [
            format!("{file}:3"),
            format!("{file}:4"),
            format!("{file}:4"),
            format!("{file}:5"),
        ];
        assert_eq!(lines.iter().filter(|l| l.starts_with(file)).count(), 5, "{problems:#?}");
        for line in expected {
            assert!(lines.contains(&line.as_str()), "missing {line}: {problems:#?}");
        }
        assert!(problems
            .iter()
            .any(|p| p.starts_with(&format!("{file}:6")) && p.contains("std::net")));
        assert!(!problems.iter().any(|p| p.contains("specie-node/src")), "{problems:#?}");
        assert!(problems
            .iter()
            .any(|p| p.contains("PURE_CRATES names `specie-transaction`")));
    }

    #[test]
    fn pure_and_base_crates_may_not_depend_on_tokio() {
        let crates = [
            krate(
                "crates/base/specie-codec",
                "[package]\nname = \"specie-codec\"\n\n[dependencies]\ntokio.workspace = true\n\n\
                 [dev-dependencies]\ntokio-util = \"0.7\"\n",
            ),
            krate(
                "crates/infra/specie-wire",
                "[package]\nname = \"specie-wire\"\n[dependencies]\ntokio = \"1\"\n",
            ),
        ];
        let problems = purity_violations(&crates, &[]);
        let tokio: Vec<&String> = problems.iter().filter(|p| p.contains("depends on `tokio")).collect();
        assert_eq!(tokio.len(), 1, "{problems:#?}");
        assert!(tokio[0].starts_with("crates/base/specie-codec/Cargo.toml:5: pure crate `specie-codec`"));
    }

    #[test]
    fn layering_flags_base_testing_and_binary_dependencies() {
        let crates = [
            krate(
                "crates/base/specie-codec",
                "[package]\nname = \"specie-codec\"\n\n[dependencies]\nthiserror = \"2\"\nspecie-x.workspace = true\n\n\
                 [dev-dependencies]\nspecie-y = { path = \"../y\" }\n",
            ),
            // A base crate may build on another base crate.
            krate(
                "crates/base/specie-merkle",
                "[package]\nname = \"specie-merkle\"\n\n[dependencies]\nspecie-codec.workspace = true\n",
            ),
            krate(
                "crates/core/specie-node",
                "[package]\nname = \"specie-node\"\n\n[dependencies.specie-sim]\npath = \"../../testing/specie-sim\"\n\n\
                 [dev-dependencies]\nspecie-sim.workspace = true\n",
            ),
            krate("crates/testing/specie-sim", "[package]\nname = \"specie-sim\"\n[dependencies]\nspecie-node = \"*\"\n"),
            krate(
                "crates/infra/specie-log",
                "[package]\nname = \"specie-log\"\n[target.'cfg(unix)'.dependencies]\nspecie = { path = \"../..\" }\n",
            ),
            krate("crates/specie", "[package]\nname = \"specie\"\n[dependencies]\nspecie-sim.workspace = true\n"),
            krate("crates/misc", "[package]\nname = \"specie-misc\"\n"),
        ];
        let problems = layering_violations(&crates);
        let starts: Vec<&str> = problems.iter().map(|p| p.split(": ").next().unwrap()).collect();
        assert_eq!(
            starts,
            [
                "crates/base/specie-codec/Cargo.toml:6",
                "crates/core/specie-node/Cargo.toml:4",
                "crates/infra/specie-log/Cargo.toml:4",
                "crates/misc/Cargo.toml:1",
            ],
            "{problems:#?}"
        );
        assert!(problems[0].contains("base crate `specie-codec` depends on workspace crate `specie-x`"));
        assert!(problems[1].contains("testing crate `specie-sim`"));
        assert!(problems[2].contains("binary crate `specie`"));
    }

    #[test]
    fn anyhow_is_flagged_in_library_crates_only() {
        let crates = [
            krate(
                "crates/core/specie-node",
                "[package]\nname = \"specie-node\"\n[dependencies]\nanyhow.workspace = true\n",
            ),
            krate(
                "crates/infra/specie-log",
                "[package]\nname = \"specie-log\"\n[dev-dependencies]\nanyhow = \"1\"\n",
            ),
            krate(
                "crates/specie",
                "[package]\nname = \"specie\"\n[dependencies]\nanyhow = \"1\"\n",
            ),
            krate(
                "crates/tools/specie-bench",
                "[package]\nname = \"specie-bench\"\n[dependencies]\nanyhow = \"1\"\n",
            ),
        ];
        let violations = anyhow_violations(&crates);
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert_eq!(violations[0].key, "anyhow crates/core/specie-node");
        assert_eq!(violations[1].key, "anyhow crates/tools/specie-bench");
        assert!(violations[0]
            .message
            .starts_with("crates/core/specie-node/Cargo.toml:4:"));
    }

    #[test]
    fn renamed_dependencies_resolve_to_their_package() {
        let k = krate(
            "crates/infra/x",
            "[package]\nname = \"x\"\n[dependencies]\nwebpki.workspace = true\nmy-tokio = { package = \"tokio\", version = \"1\" }\n",
        );
        let mut packages: Vec<&str> = k.deps.iter().map(|d| d.package.as_str()).collect();
        packages.sort();
        assert_eq!(packages, ["rustls-webpki", "tokio"]);
    }

    #[test]
    fn cfg_test_module_files_are_test_only() {
        let lib =
            "#[cfg(test)]\nmod scenario_tests;\nmod engine;\n#[cfg(test)]\n#[path = \"../shared/t.rs\"]\nmod shared;\n";
        let mut files = vec![
            source("crates/core/x/src/lib.rs", "crates/core/x", lib),
            source(
                "crates/core/x/src/scenario_tests.rs",
                "crates/core/x",
                "mod deeper;\nfn a() {}\n",
            ),
            source(
                "crates/core/x/src/scenario_tests/deeper/mod.rs",
                "crates/core/x",
                "fn b() {}\n",
            ),
            source("crates/core/x/src/engine.rs", "crates/core/x", "fn c() {}\n"),
            source("crates/core/x/shared/t.rs", "crates/core/x", "fn d() {}\n"),
            source(
                "crates/core/x/src/inner.rs",
                "crates/core/x",
                "#![cfg(test)]\nfn e() {}\n",
            ),
        ];
        mark_test_only_files(&mut files);
        let test_only: Vec<bool> = files.iter().map(|f| f.test_only).collect();
        assert_eq!(test_only, [false, true, true, false, true, true]);
    }
}
