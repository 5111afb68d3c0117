//! Reads the byte vectors of `docs/wire-protocol.md`, for the tests that check them against the
//! codecs (this crate's frame test, and the role and Raft message tests of specie-cluster and
//! specie-raft, which include this file by path).
#![allow(dead_code)] // each test uses its own part of this

use std::collections::BTreeMap;
use std::path::Path;

/// The document, from a crate directory under `crates/`.
pub fn wire_protocol_doc(manifest_dir: &str) -> String {
    let path = Path::new(manifest_dir).join("../../../docs/wire-protocol.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bytes of the ```hex block right after `marker`: hex digits, with `# comments` and
/// whitespace ignored.
pub fn hex_block_after(doc: &str, marker: &str) -> Vec<u8> {
    let rest = doc
        .split_once(marker)
        .unwrap_or_else(|| panic!("no {marker} in the document"))
        .1;
    assert!(
        rest.trim_start().starts_with("```hex"),
        "{marker}: no ```hex block right after it"
    );
    let block = rest.split("```").nth(1).expect("fenced block");
    let digits: String = block
        .lines()
        .skip(1) // the fence's info string
        .flat_map(|line| line.split('#').next().unwrap_or("").split_whitespace())
        .collect();
    assert!(digits.len().is_multiple_of(2), "{marker}: odd number of hex digits");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or_else(|e| panic!("{marker}: {e}")))
        .collect()
}

/// Every block marked `<!-- vector: NAME -->`, by name; a name used twice fails.
pub fn named_vectors(doc: &str) -> BTreeMap<String, Vec<u8>> {
    let mut vectors = BTreeMap::new();
    for marked in doc.split("<!-- vector: ").skip(1) {
        let name = marked.split_once("-->").expect("vector marker ends with -->").0.trim();
        let bytes = hex_block_after(doc, &format!("<!-- vector: {name} -->"));
        assert!(
            vectors.insert(name.to_string(), bytes).is_none(),
            "vector {name} appears twice"
        );
    }
    vectors
}
