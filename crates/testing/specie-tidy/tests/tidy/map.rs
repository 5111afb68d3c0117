//! The house map: every crate's tier and capability, declared once in `docs/architecture.md`'s
//! crate table and checked against the manifests; and every relative link in `README.md` and
//! `docs/` resolving to a file (and a heading, for `#anchor` links).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{Krate, Violation};

/// The document that declares each crate's tier and capability.
pub const ARCHITECTURE: &str = "docs/architecture.md";
/// The heading of the crate table in [`ARCHITECTURE`].
const CRATE_TABLE_HEADING: &str = "## Crates";

/// What a crate is, from the bottom up. A crate may depend (normal and build dependencies) only on
/// crates of its own tier or a lower one; testing crates stand apart (see [`tier_violations`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Foundation,
    Format,
    Role,
    Infra,
    Service,
    Deployment,
    Tools,
    Binary,
    Testing,
}

impl Tier {
    const ALL: [(&'static str, Tier); 9] = [
        ("foundation", Tier::Foundation),
        ("format", Tier::Format),
        ("role", Tier::Role),
        ("infra", Tier::Infra),
        ("service", Tier::Service),
        ("deployment", Tier::Deployment),
        ("tools", Tier::Tools),
        ("binary", Tier::Binary),
        ("testing", Tier::Testing),
    ];

    fn parse(word: &str) -> Option<Tier> {
        Tier::ALL.iter().find(|(name, _)| *name == word).map(|(_, tier)| *tier)
    }

    fn name(self) -> &'static str {
        Tier::ALL
            .iter()
            .find(|(_, tier)| *tier == self)
            .map(|(name, _)| *name)
            .expect("every tier is named")
    }
}

/// The capabilities, each a folder under `crates/`. Crates of other folders belong to none ("—").
const CAPABILITIES: &[&str] = &["core", "byzantine", "offline", "exchange", "privacy"];

/// One row of the crate table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub tier: Tier,
    /// One of [`CAPABILITIES`], or `None` for the shared tiers' crates.
    pub capability: Option<String>,
    /// A named bridge: a crate of one capability allowed to depend on another's.
    pub bridge: bool,
    pub line: usize,
}

/// The crate table of `text` (the architecture document): crate name -> its row. Rows are
/// `| \`specie-x\` | tier | capability or — | bridge or blank | what it is |` below
/// [`CRATE_TABLE_HEADING`], up to the next heading; a malformed row is a problem.
pub fn crate_table(text: &str) -> (BTreeMap<String, Entry>, Vec<String>) {
    let mut entries = BTreeMap::new();
    let mut problems = Vec::new();
    let mut inside = false;
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if line.starts_with('#') {
            inside = line.trim() == CRATE_TABLE_HEADING;
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if !inside || cells.len() < 5 || !cells[0].starts_with('`') {
            continue;
        }
        let name = cells[0].trim_matches('`').to_string();
        let tier = Tier::parse(cells[1]);
        let capability = match cells[2] {
            "—" => Some(None),
            word if CAPABILITIES.contains(&word) => Some(Some(word.to_string())),
            _ => None,
        };
        let bridge = match cells[3] {
            "" => Some(false),
            "bridge" => Some(true),
            _ => None,
        };
        match (tier, capability, bridge) {
            (Some(tier), Some(capability), Some(bridge)) => {
                let entry = Entry {
                    tier,
                    capability,
                    bridge,
                    line: line_no,
                };
                if entries.insert(name.clone(), entry).is_some() {
                    problems.push(format!("{ARCHITECTURE}:{line_no}: `{name}` has a second row; keep one"));
                }
            }
            _ => problems.push(format!(
                "{ARCHITECTURE}:{line_no}: the row of `{name}` needs a tier (one of {:?}), a capability (one of \
                 {CAPABILITIES:?} or —) and `bridge` or nothing",
                Tier::ALL.map(|(name, _)| name)
            )),
        }
    }
    if entries.is_empty() {
        problems.push(format!("{ARCHITECTURE}: no crate table under `{CRATE_TABLE_HEADING}`"));
    }
    (entries, problems)
}

/// The capability a crate's folder says: `crates/offline/…` is offline's; `crates/infra/…` none.
fn folder_capability(dir: &str) -> Option<&str> {
    let folder = dir.split('/').nth(1)?;
    CAPABILITIES.iter().copied().find(|c| *c == folder)
}

/// Every crate in the table and the table true to the folders; every dependency pointing to the
/// same tier or down; testing crates used (shipped) only by testing crates and the binary.
pub fn tier_violations(crates: &[Krate], table: &BTreeMap<String, Entry>) -> Vec<String> {
    let mut problems = Vec::new();
    let names: BTreeSet<&str> = crates.iter().map(|k| k.name.as_str()).collect();
    for (name, entry) in table {
        if !names.contains(name.as_str()) {
            problems.push(format!(
                "{ARCHITECTURE}:{}: `{name}` is in the crate table but no crate has that name; delete the row",
                entry.line
            ));
        }
    }
    for krate in crates {
        let Some(entry) = table.get(&krate.name) else {
            problems.push(format!(
                "{}: crate `{}` is missing from the crate table of {ARCHITECTURE}; add a row with its tier and \
                 capability",
                krate.manifest(),
                krate.name
            ));
            continue;
        };
        if entry.capability.as_deref() != folder_capability(&krate.dir) {
            problems.push(format!(
                "{ARCHITECTURE}:{}: `{}` lives in {} but the table says capability {:?}; make them agree",
                entry.line, krate.name, krate.dir, entry.capability
            ));
        }
        for dep in krate.shipped_deps() {
            let Some(target) = table.get(&dep.package) else {
                continue;
            };
            let apart = target.tier == Tier::Testing && !matches!(entry.tier, Tier::Testing | Tier::Binary);
            let upward = target.tier > entry.tier && target.tier != Tier::Testing;
            if apart || upward {
                problems.push(format!(
                    "{}:{}: `{}` ({} tier) depends on `{}` ({} tier); a crate depends only on its own tier or lower \
                     ({}), and on testing crates only as a dev-dependency. Move the code it needs down a tier",
                    krate.manifest(),
                    dep.line,
                    krate.name,
                    entry.tier.name(),
                    dep.package,
                    target.tier.name(),
                    Tier::ALL.map(|(name, _)| name)[..8].join(" < "),
                ));
            }
        }
    }
    problems
}

/// Dependencies from one capability's crate to another capability's, outside a named bridge and
/// the deployment and tools tiers (which assemble every capability): a ratchet, keyed
/// `capability-edge DIR DEPENDENCY`.
pub fn capability_edges(rule: &str, crates: &[Krate], table: &BTreeMap<String, Entry>) -> Vec<Violation> {
    let mut violations = Vec::new();
    for krate in crates {
        let Some(entry) = table.get(&krate.name) else { continue };
        let Some(own) = entry.capability.as_deref() else {
            continue;
        };
        if entry.bridge || entry.tier >= Tier::Deployment {
            continue;
        }
        for dep in krate.shipped_deps() {
            let Some(other) = table.get(&dep.package).and_then(|t| t.capability.as_deref()) else {
                continue;
            };
            if other != own {
                violations.push(Violation {
                    key: format!("{rule} {} {}", krate.dir, dep.package),
                    message: format!(
                        "{}:{}: `{}` ({own}) depends on `{}` ({other}); one capability reaches another only through a \
                         crate marked `bridge` in {ARCHITECTURE}. Move what it needs into such a bridge crate",
                        krate.manifest(),
                        dep.line,
                        krate.name,
                        dep.package
                    ),
                });
            }
        }
    }
    violations
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-` and `_`
/// dropped.
pub fn heading_slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown document: one per heading outside code blocks, a repeated slug
/// numbered as GitHub numbers it (`-1`, `-2`, …).
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = BTreeSet::new();
    for line in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let slug = heading_slug(heading.trim_start_matches('#'));
        let count = seen.entry(slug.clone()).or_default();
        found.insert(match *count {
            0 => slug,
            n => format!("{slug}-{n}"),
        });
        *count += 1;
    }
    found
}

/// The lines of `text` outside fenced code blocks.
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// The relative link targets of `text` (`](target)` outside code blocks and code spans), with
/// their line numbers; web, mail and in-page links are left out.
pub fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut fenced = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = prose.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            let external = target.contains("://") || target.starts_with("mailto:");
            if !target.is_empty() && !external {
                links.push((index + 1, target.to_string()));
            }
            rest = &rest[end..];
        }
    }
    links
}

/// Links in `doc` (relative to `root`) whose file or heading does not exist.
pub fn dangling_links(root: &Path, doc: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let dir = Path::new(doc).parent().unwrap_or(Path::new(""));
    for (line, target) in relative_links(text) {
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let file = match path {
            "" => root.join(doc),
            path => root.join(dir).join(path),
        };
        if !file.exists() {
            problems.push(format!("{doc}:{line}: link `{target}`: no file {}", file.display()));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        let is_markdown = file.extension().is_some_and(|e| e == "md");
        let headings = std::fs::read_to_string(&file).map(|t| anchors(&t)).unwrap_or_default();
        if is_markdown && !headings.contains(anchor) {
            problems.push(format!(
                "{doc}:{line}: link `{target}`: no heading with the anchor `#{anchor}` there"
            ));
        }
    }
    problems
}

/// `README.md` and every Markdown file under `docs/`, relative to `root`.
pub fn documents(root: &Path) -> Vec<String> {
    let mut docs = vec!["README.md".to_string()];
    super::walk(&root.join("docs"), &mut |path| {
        if path.extension().is_some_and(|e| e == "md") {
            docs.push(super::relative(root, path));
        }
    });
    docs
}

// Each rule fires on a small in-memory example.
mod self_checks {
    use super::super::{CrateKind, Dep, DepKind};
    use super::*;

    const TABLE: &str = "\
# Architecture

| Crate | Tier | Capability | Bridge | What |
|---|---|---|---|---|
| `specie-elsewhere` | role | core | | a table before the crate table is not read |

## Crates

| Crate | Tier | Capability | Bridge | What it is |
|---|---|---|---|---|
| `specie-codec` | foundation | — | | bytes |
| `specie-transaction` | format | core | | the core's format |
| `specie-offline` | format | offline | | tokens |
| `specie-offline-bridge` | service | offline | bridge | funding from the core |
| `specie-node` | deployment | — | | everything |
| `specie-sim` | testing | — | | worlds |

## Next
| `specie-after` | role | core | | a row after the table is not read |
";

    fn krate(dir: &str, deps: &[&str]) -> Krate {
        Krate {
            dir: dir.to_string(),
            name: dir.rsplit('/').next().expect("a dir").to_string(),
            kind: CrateKind::of(dir),
            deps: deps
                .iter()
                .map(|package| Dep {
                    package: package.to_string(),
                    kind: DepKind::Normal,
                    line: 7,
                })
                .collect(),
        }
    }

    fn table() -> BTreeMap<String, Entry> {
        let (table, problems) = crate_table(TABLE);
        assert_eq!(problems, Vec::<String>::new());
        table
    }

    #[test]
    fn the_crate_table_is_read_below_its_heading_only_and_bad_rows_are_named() {
        let table = table();
        assert_eq!(table.len(), 6);
        assert!(!table.contains_key("specie-elsewhere") && !table.contains_key("specie-after"));
        let bridge = &table["specie-offline-bridge"];
        assert_eq!(
            (bridge.tier, bridge.capability.as_deref(), bridge.bridge),
            (Tier::Service, Some("offline"), true)
        );
        let bad = "## Crates\n| `specie-x` | middle | core | | ? |\n| `specie-y` | role | mars | | ? |\n\
                   | `specie-z` | role | core | maybe | ? |\n| `specie-w` | role | core | | ? |\n| `specie-w` | role | core | | ? |\n";
        let (rows, problems) = crate_table(bad);
        assert_eq!(rows.len(), 1, "{problems:?}");
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[3].contains("second row"), "{problems:?}");
        assert!(!crate_table("# nothing here\n").1.is_empty(), "no table is a problem");
    }

    #[test]
    fn tiers_flag_upward_and_testing_dependencies_missing_rows_and_wrong_folders() {
        let table = table();
        let fine = || {
            vec![
                krate("crates/base/specie-codec", &[]),
                krate("crates/core/specie-transaction", &["specie-codec", "serde"]),
                krate("crates/offline/specie-offline", &["specie-codec"]),
                krate(
                    "crates/offline/specie-offline-bridge",
                    &["specie-offline", "specie-transaction"],
                ),
                krate(
                    "crates/deployment/specie-node",
                    &["specie-offline-bridge", "specie-transaction"],
                ),
                krate("crates/testing/specie-sim", &["specie-node"]),
            ]
        };
        assert_eq!(tier_violations(&fine(), &table), Vec::<String>::new());

        let mut upward = fine();
        upward[1] = krate("crates/core/specie-transaction", &["specie-node"]);
        upward[2] = krate("crates/offline/specie-offline", &["specie-sim"]);
        let problems = tier_violations(&upward, &table);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("(format tier) depends on `specie-node` (deployment tier)"),
            "{problems:?}"
        );
        assert!(problems[1].contains("`specie-sim` (testing tier)"), "{problems:?}");

        let mut unmapped = fine();
        unmapped.remove(0);
        unmapped.push(krate("crates/core/specie-new", &[]));
        unmapped[1] = krate("crates/exchange/specie-offline", &["specie-codec"]);
        let problems = tier_violations(&unmapped, &table);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems
            .iter()
            .any(|p| p.contains("`specie-codec` is in the crate table but no crate")));
        assert!(problems
            .iter()
            .any(|p| p.contains("`specie-new` is missing from the crate table")));
        assert!(problems
            .iter()
            .any(|p| p.contains("lives in crates/exchange/specie-offline")));
    }

    #[test]
    fn capabilities_meet_through_bridges_and_deployments_only() {
        let table = table();
        let crates = [
            krate("crates/offline/specie-offline", &["specie-transaction", "specie-codec"]),
            krate("crates/offline/specie-offline-bridge", &["specie-transaction"]),
            krate(
                "crates/deployment/specie-node",
                &["specie-offline", "specie-transaction"],
            ),
        ];
        let found = capability_edges("capability-edge", &crates, &table);
        let keys: Vec<&str> = found.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(
            keys,
            ["capability-edge crates/offline/specie-offline specie-transaction"]
        );
        assert!(found[0]
            .message
            .contains("(offline) depends on `specie-transaction` (core)"));
    }

    #[test]
    fn anchors_follow_github_and_links_skip_code_and_the_web() {
        assert_eq!(
            heading_slug(" Offline cash's authority (2 cores)"),
            "offline-cashs-authority-2-cores"
        );
        assert_eq!(
            heading_slug("`specie bench scale`: the curve"),
            "specie-bench-scale-the-curve"
        );
        let doc = "# Top\n## Run\n```\n# not a heading [a](nowhere.md)\n```\n## Run\n";
        let found: Vec<String> = anchors(doc).into_iter().collect();
        assert_eq!(found, ["run", "run-1", "top"]);
        let text = "See [a](a.md), [b](https://x.y/b.md) and [c](#top).\n`[d](d.md)` and \
                    [e](dir/e.md#part \"title\")\n```\n[f](f.md)\n```\n[m](mailto:x@y)";
        assert_eq!(
            relative_links(text),
            [
                (1, "a.md".to_string()),
                (1, "#top".to_string()),
                (2, "dir/e.md#part".to_string())
            ]
        );
    }

    #[test]
    fn dangling_links_name_missing_files_and_headings() {
        let root = std::env::temp_dir().join(format!("specie-tidy-links-{}", std::process::id()));
        std::fs::create_dir_all(root.join("docs")).expect("temp dir");
        std::fs::write(root.join("docs/b.md"), "# B\n## Part two\n").expect("write");
        let text = "[ok](docs/b.md#part-two) [self](#here) [file](docs/b.md)\n\
                    [gone](docs/c.md) [no heading](docs/b.md#part-three)\n# Here\n";
        let problems = dangling_links(&root, "README.md", text);
        std::fs::write(root.join("README.md"), text).expect("write");
        let again = dangling_links(&root, "README.md", text);
        std::fs::remove_dir_all(&root).expect("clean up");
        assert_eq!(problems.len(), 3, "README.md itself is missing too: {problems:?}");
        assert_eq!(again.len(), 2, "{again:?}");
        assert!(
            again[0].starts_with("README.md:2: link `docs/c.md`: no file"),
            "{again:?}"
        );
        assert!(
            again[1].contains("no heading with the anchor `#part-three`"),
            "{again:?}"
        );
    }
}
