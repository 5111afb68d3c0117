//! Helpers shared by the integration tests: locating and parsing vector files.

#![allow(dead_code)] // Each test module uses a different subset.

use std::path::PathBuf;

pub use specie_transaction::test_support::{format_doc, parse_kv_blocks, Vectors};

/// The checked-in copies of the shared vectors (so tests do not depend on a sibling checkout).
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors"))
}

/// Where the shared originals live when the `shared/` directory sits beside the repository.
pub fn shared_vectors_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../../shared/vectors"))
}

pub fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

pub fn hex32(text: &str) -> [u8; 32] {
    hex::decode(text).unwrap().try_into().unwrap()
}
