//! Helpers shared by the integration tests: locating and parsing vector files.

#![allow(dead_code)] // Each test module uses a different subset.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The checked-in copies of the shared vectors (so tests do not depend on a sibling checkout).
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors"))
}

/// Where the shared originals live when the `shared/` directory sits beside the repository.
pub fn shared_vectors_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../../shared/vectors"))
}

/// specie's own format document, whose vector block the tests check.
pub fn format_doc() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/transaction-format.md"
    ))
}

pub fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

/// `name=value` lines inside the fenced code blocks of a markdown file; `#` lines are comments.
pub fn parse_kv_blocks(markdown: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let mut in_block = false;
    for line in markdown.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block || line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Vector lines are `name=value` with no spaces; formulas such as `txid = SHA256(…)`
        // in the same document are not vectors.
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let is_name = |c: char| c.is_ascii_alphanumeric() || "_[]".contains(c);
        if key.is_empty() || !key.chars().all(is_name) || value.contains(char::is_whitespace) {
            continue;
        }
        let previous = values.insert(key.to_owned(), value.to_owned());
        assert!(previous.is_none(), "duplicate vector key {key}");
    }
    values
}

pub fn hex32(text: &str) -> [u8; 32] {
    hex::decode(text).unwrap().try_into().unwrap()
}

pub struct Vectors(pub BTreeMap<String, String>);

impl Vectors {
    pub fn get(&self, key: &str) -> &str {
        self.0.get(key).unwrap_or_else(|| panic!("vector {key} missing"))
    }
    pub fn bytes(&self, key: &str) -> Vec<u8> {
        hex::decode(self.get(key)).unwrap_or_else(|error| panic!("vector {key}: {error}"))
    }
    pub fn hash(&self, key: &str) -> [u8; 32] {
        hex32(self.get(key))
    }
}
