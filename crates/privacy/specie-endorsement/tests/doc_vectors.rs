//! The vectors of docs/endorsement-format.md: regenerated from a fixed scenario (dealt 3-of-5
//! group, seeded FROST nonces) and compared with the document line by line; each endorsement in
//! the document is also decoded, re-encoded and verified on its own, and each invalid encoding
//! refused with the documented error. `ENDORSEMENT_VECTORS_PRINT=1` prints the block to paste.

mod common;

use common::frost_sign;
use sha2::{Digest, Sha256};
use specie_codec::{Decode, DecodeError, Encode};
use specie_endorsement::{deal, group_key, Endorsement, EndorserId, GroupKey, MerkleTree, Threshold};

const DOC: &str = include_str!("../../../../docs/endorsement-format.md");

fn digest(i: u8) -> [u8; 32] {
    Sha256::digest(format!("specie endorsement vector {i}")).into()
}

/// The scenario: dealer seed 2024, signers 1, 3 and 5, nonce seed 7; a batch of five digests
/// (its last leaf is promoted twice) and a batch of one.
fn generate() -> Vec<(String, String)> {
    let (keys, public) = deal(Threshold::new(3, 5).unwrap(), 2024).unwrap();
    let signers = [EndorserId(1), EndorserId(3), EndorserId(5)];
    let mut out = vec![("group-key".to_string(), hex::encode(group_key(&public).unwrap().0))];
    let digests: Vec<_> = (0..5).map(digest).collect();
    for (i, d) in digests.iter().enumerate() {
        out.push((format!("digest-{i}"), hex::encode(d)));
    }
    for (name, batch) in [("batch", &digests[..]), ("single", &digests[..1])] {
        let tree = MerkleTree::new(batch);
        let signature = frost_sign(&keys, &public, &signers, &tree.message(), 7).unwrap();
        let signature: [u8; 64] = signature.serialize().unwrap().try_into().unwrap();
        out.push((format!("{name}-root"), hex::encode(tree.root())));
        out.push((format!("{name}-message"), hex::encode(tree.message())));
        for index in 0..tree.leaf_count() {
            let e = Endorsement {
                signature,
                leaf_count: tree.leaf_count(),
                index,
                siblings: tree.path(index),
            };
            out.push((format!("{name}-endorsement-{index}"), hex::encode(e.encode())));
        }
    }
    out
}

/// `name = hex` lines of the document's vector blocks.
fn documented() -> Vec<(String, String)> {
    DOC.lines()
        .filter_map(|line| line.split_once(" = "))
        .filter(|(name, value)| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && value.chars().all(|c| c.is_ascii_hexdigit())
        })
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

#[test]
fn the_documented_vectors_are_what_the_code_makes() {
    let generated = generate();
    if std::env::var("ENDORSEMENT_VECTORS_PRINT").is_ok() {
        for (name, value) in &generated {
            println!("{name} = {value}");
        }
    }
    let documented: Vec<_> = documented()
        .into_iter()
        .filter(|(name, _)| !name.starts_with("invalid-"))
        .collect();
    assert_eq!(
        documented, generated,
        "docs/endorsement-format.md and the code disagree"
    );
}

#[test]
fn each_documented_endorsement_decodes_reencodes_and_verifies() {
    let vectors = documented();
    let get = |name: &str| hex::decode(&vectors.iter().find(|(n, _)| n == name).unwrap().1).unwrap();
    let key = GroupKey(get("group-key").try_into().unwrap());
    let mut checked = 0;
    for (name, value) in &vectors {
        let Some(rest) = name
            .strip_prefix("batch-endorsement-")
            .or_else(|| name.strip_prefix("single-endorsement-"))
        else {
            continue;
        };
        let bytes = hex::decode(value).unwrap();
        let endorsement = Endorsement::decode_exact(&bytes).unwrap();
        assert_eq!(endorsement.encode(), bytes);
        let index: usize = rest.parse().unwrap();
        let digest: [u8; 32] = get(&format!("digest-{index}")).try_into().unwrap();
        endorsement
            .verify(&key, &digest)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut wrong = digest;
        wrong[0] ^= 1;
        assert!(
            endorsement.verify(&key, &wrong).is_err(),
            "{name} endorses only its own digest"
        );
        checked += 1;
    }
    assert_eq!(checked, 6);
}

#[test]
fn each_documented_invalid_encoding_is_refused_as_documented() {
    let vectors = documented();
    let invalid: Vec<_> = vectors
        .iter()
        .filter(|(name, _)| name.starts_with("invalid-"))
        .collect();
    assert_eq!(invalid.len(), 6);
    for (name, value) in invalid {
        let error = Endorsement::decode_exact(&hex::decode(value).unwrap()).expect_err(name);
        let matches = match name.as_str() {
            "invalid-version" => matches!(error, DecodeError::UnsupportedVersion { .. }),
            "invalid-leaf-count-zero" | "invalid-index" | "invalid-path-length" => {
                matches!(error, DecodeError::Invalid { .. })
            }
            "invalid-truncated" => matches!(error, DecodeError::UnexpectedEnd { .. }),
            "invalid-trailing" => matches!(error, DecodeError::TrailingBytes { .. }),
            other => panic!("undocumented invalid vector {other}"),
        };
        assert!(matches, "{name}: {error:?}");
    }
}
