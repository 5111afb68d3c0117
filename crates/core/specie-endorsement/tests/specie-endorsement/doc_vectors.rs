//! The vectors of docs/endorsement-format.md: regenerated from a fixed scenario (dealt 3-of-5
//! group, seeded FROST nonces) and compared with the document line by line; each endorsement in
//! the document is also decoded, re-encoded and verified on its own, and each invalid encoding
//! refused with the documented error. The `wire-*` vectors (§7) come from a deterministic run of
//! the roles (`common::wire_run`) and are decoded and re-encoded too; the `ceremony-*` vectors
//! come from a deterministic key generation (`common::ceremony_run`).
//! `ENDORSEMENT_VECTORS_PRINT=1` prints the blocks to paste.

use crate::common;

use common::ceremony_run::{generate as generate_keys, is_confirm, is_round1, is_round2};
use common::wire_run::{wire_digest, wire_run};
use sha2::{Digest, Sha256};
use specie_codec::{Decode, DecodeError, Encode};
use specie_endorsement::{
    deal, group_key, sign_together, AggregatorMessage, CeremonyMessage, Endorsement, EndorserId, EndorserMessage,
    GroupKey, MerkleTree, RefusalCode, Threshold,
};

const DOC: &str = include_str!("../../../../../docs/endorsement-format.md");

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
        let signature = sign_together(&keys, &public, &signers, &tree.message(), 7).unwrap();
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
        .filter(|(name, _)| {
            !name.starts_with("invalid-") && !name.starts_with("wire-") && !name.starts_with("ceremony-")
        })
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

/// The wire scenario: a 2-of-3 group dealt from seed 2024, endorser nonce seeds `[id; 32]`; the
/// aggregator batches wire digests 0 and 1 and asks endorsers 1 and 2; endorser 2 refuses
/// digest 1 as `double_spend`. The messages are those to and from endorser 1, and endorser 2's
/// refusal.
fn generate_wire() -> Vec<(String, String)> {
    let run = wire_run(2024);
    let commit = run.sent_to(1, |m| matches!(m, AggregatorMessage::Commit { .. }));
    let sign = run.sent_to(1, |m| matches!(m, AggregatorMessage::Sign { .. }));
    let commitments = run.answered_by(1, |m| matches!(m, EndorserMessage::Commitments { .. }));
    let share = run.answered_by(1, |m| matches!(m, EndorserMessage::Share { .. }));
    let refused = run.answered_by(2, |m| matches!(m, EndorserMessage::Refused { .. }));
    [
        ("wire-group-key", group_key(&run.public).unwrap().0.to_vec()),
        ("wire-digest-0", wire_digest(0).to_vec()),
        ("wire-digest-1", wire_digest(1).to_vec()),
        ("wire-commit", commit.encode()),
        ("wire-sign", sign.encode()),
        ("wire-commitments", commitments.encode()),
        ("wire-share", share.encode()),
        ("wire-refused-invalid", refused.encode()),
    ]
    .into_iter()
    .map(|(name, bytes)| (name.to_string(), hex::encode(bytes)))
    .collect()
}

#[test]
fn the_documented_wire_vectors_are_what_the_roles_send() {
    let generated = generate_wire();
    if std::env::var("ENDORSEMENT_VECTORS_PRINT").is_ok() {
        for (name, value) in &generated {
            println!("{name} = {value}");
        }
    }
    let documented: Vec<_> = documented()
        .into_iter()
        .filter(|(name, _)| name.starts_with("wire-"))
        .collect();
    assert_eq!(
        documented, generated,
        "docs/endorsement-format.md's wire vectors and the code disagree"
    );
    for (name, value) in &documented {
        let bytes = hex::decode(value).unwrap();
        let again = match name.as_str() {
            "wire-commit" | "wire-sign" => AggregatorMessage::<[u8; 32]>::decode_exact(&bytes).unwrap().encode(),
            "wire-commitments" | "wire-share" | "wire-refused-invalid" => {
                EndorserMessage::<RefusalCode>::decode_exact(&bytes).unwrap().encode()
            }
            _ => continue,
        };
        assert_eq!(again, bytes, "{name} re-encodes to itself");
    }
}

/// The ceremony scenario: a 2-of-3 key generation, participant `id` seeded with `[id; 32]`
/// (rand 0.8's `StdRng`), messages delivered in the order sent. The messages are endorser 1's
/// round-1 broadcast, its round-2 share for endorser 2, and its confirmation.
fn generate_ceremony() -> Vec<(String, String)> {
    let run = generate_keys(Threshold::new(2, 3).unwrap(), 0);
    let group_key = run.keys[&EndorserId(1)].group_key();
    [
        ("ceremony-group-key", group_key.0.to_vec()),
        ("ceremony-round1", run.message(1, 2, is_round1).encode()),
        ("ceremony-round2", run.message(1, 2, is_round2).encode()),
        ("ceremony-confirm", run.message(1, 2, is_confirm).encode()),
    ]
    .into_iter()
    .map(|(name, bytes)| (name.to_string(), hex::encode(bytes)))
    .collect()
}

#[test]
fn the_documented_ceremony_vectors_are_what_a_key_generation_sends() {
    let generated = generate_ceremony();
    if std::env::var("ENDORSEMENT_VECTORS_PRINT").is_ok() {
        for (name, value) in &generated {
            println!("{name} = {value}");
        }
    }
    let documented: Vec<_> = documented()
        .into_iter()
        .filter(|(name, _)| name.starts_with("ceremony-"))
        .collect();
    assert_eq!(
        documented, generated,
        "docs/endorsement-format.md's ceremony vectors and the code disagree"
    );
    for (name, value) in documented.iter().filter(|(name, _)| name != "ceremony-group-key") {
        let bytes = hex::decode(value).unwrap();
        let again = CeremonyMessage::decode_exact(&bytes).unwrap().encode();
        assert_eq!(again, bytes, "{name} re-encodes to itself");
    }
}
