//! What every mode's format tests share (docs/byzantine-format.md and docs/offline-format.md,
//! "Vectors" and "Untrusted input"): vector files of named hex values, written from the code on
//! request and compared with it byte for byte; the check that whatever decodes re-encodes to its
//! input; and the byte mutations that decoder property tests feed stored vectors through.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::Value;
use specie_codec::{decode_bounded, DecodeError, Reader};

/// Set to `1` to rewrite a vector file from the code (after a deliberate format change).
pub const WRITE_VECTORS_ENV: &str = "SPECIE_WRITE_VECTORS";

/// One named value of a vector file.
pub struct Vector {
    pub name: String,
    pub description: String,
    pub bytes: Vec<u8>,
}

/// What `encode` writes.
pub fn encoded(encode: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out);
    out
}

/// A vector file's text: one vector a line, fields in reading order (serde_json would sort them).
pub fn vectors_text(file_description: &str, vectors: &[Vector]) -> String {
    let quoted = |text: &str| serde_json::to_string(text).expect("a string serializes");
    let lines: Vec<String> = vectors
        .iter()
        .map(|v| {
            format!(
                "    {{\"name\": {}, \"description\": {}, \"hex\": \"{}\"}}",
                quoted(&v.name),
                quoted(&v.description),
                hex::encode(&v.bytes)
            )
        })
        .collect();
    format!(
        "{{\n  \"description\": {},\n  \"vectors\": [\n{}\n  ]\n}}\n",
        quoted(file_description),
        lines.join(",\n")
    )
}

/// The file's text at `path`, written first with `generate()` if `SPECIE_WRITE_VECTORS=1`.
/// Callers keep it in a `OnceLock`, so that tests running in parallel all read the new file.
pub fn read_or_write(path: &Path, generate: impl FnOnce() -> String) -> String {
    if std::env::var_os(WRITE_VECTORS_ENV).is_some_and(|v| v == "1") {
        std::fs::write(path, generate()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every vector the code makes is in the stored file with the same bytes, and the file is exactly
/// the text the code would write (so a missing, extra or reworded vector fails too).
pub fn assert_file_matches(stored_text: &str, file_name: &str, file_description: &str, expected: &[Vector]) {
    let stored: Value = serde_json::from_str(stored_text).expect("the vectors file is JSON");
    for vector in expected {
        assert_eq!(
            hex::encode(stored_bytes(&stored, &vector.name)),
            hex::encode(&vector.bytes),
            "vector {}: the code's bytes differ from {file_name} (regenerate with \
             {WRITE_VECTORS_ENV}=1 only for a deliberate format change)",
            vector.name
        );
    }
    assert_eq!(
        stored_text,
        vectors_text(file_description, expected),
        "{file_name} has other vectors or descriptions than the code makes"
    );
}

/// The stored vector `name`, as bytes.
pub fn stored_bytes(stored: &Value, name: &str) -> Vec<u8> {
    let vector = stored["vectors"]
        .as_array()
        .expect("a vectors array")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name}"));
    hex::decode(vector["hex"].as_str().expect("hex")).expect("valid hex")
}

/// Decodes all of `bytes` (at most `bytes_max`); if that succeeds, the encoding must be `bytes`
/// again: one encoding per value.
pub fn decode_canonical<T>(
    bytes: &[u8],
    bytes_max: usize,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    encode: impl FnOnce(&T, &mut Vec<u8>),
) -> Result<Option<T>, TestCaseError> {
    let Ok(value) = decode_bounded("input", bytes, bytes_max, decode) else {
        return Ok(None);
    };
    prop_assert_eq!(
        encoded(|out| encode(&value, out)),
        bytes,
        "what decodes re-encodes to its input"
    );
    Ok(Some(value))
}

/// Every copy of `bytes` with one byte set to one of `telling` or to itself xor 1 (skipping
/// values it already has), with the position and the value.
pub fn single_byte_changes<'a>(bytes: &'a [u8], telling: &'a [u8]) -> impl Iterator<Item = (usize, u8, Vec<u8>)> + 'a {
    (0..bytes.len()).flat_map(move |at| {
        telling
            .iter()
            .copied()
            .chain([bytes[at] ^ 1])
            .filter(move |value| *value != bytes[at])
            .map(move |value| {
                let mut changed = bytes.to_vec();
                changed[at] = value;
                (at, value, changed)
            })
    })
}

/// A change to some bytes: what a decoder property test does to stored vectors.
#[derive(Clone, Debug)]
pub enum Mutation {
    Flip {
        at: usize,
        mask: u8,
    },
    Insert {
        at: usize,
        byte: u8,
    },
    Remove {
        at: usize,
    },
    Truncate {
        at: usize,
    },
    /// Overwrites four bytes with a little-endian `u32`: reaches counts, lengths and periods.
    PutU32 {
        at: usize,
        value: u32,
    },
}

/// Any mutation; `values` are the `u32`s worth writing (small counts, the maximum, ones the
/// format means something by).
pub fn mutation(values: impl Strategy<Value = u32> + 'static) -> BoxedStrategy<Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        any::<usize>().prop_map(|at| Mutation::Remove { at }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), values).prop_map(|(at, value)| Mutation::PutU32 { at, value }),
    ]
    .boxed()
}

/// Applies `mutation` to `bytes` (positions wrap around the length).
pub fn mutate(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len();
    match *mutation {
        Mutation::Flip { at, mask } if len > 0 => bytes[at % len] ^= mask,
        Mutation::Insert { at, byte } => bytes.insert(at % (len + 1), byte),
        Mutation::Remove { at } if len > 0 => {
            bytes.remove(at % len);
        }
        Mutation::Truncate { at } => bytes.truncate(at % (len + 1)),
        Mutation::PutU32 { at, value } if len >= 4 => {
            let at = at % (len - 3);
            bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
        }
        _ => {}
    }
}
