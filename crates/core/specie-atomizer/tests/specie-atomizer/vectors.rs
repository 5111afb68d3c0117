//! The vectors of the atomizer shape's durable encodings (`docs/atomizer-vectors.json`): a block
//! of two compact transactions, one shard's share of it, the atomizer's snapshot after it,
//! that shard's snapshot, and the messages between the atomizer and a shard (their network
//! encoding in a cluster). Any change to an encoding fails this test; the stored bytes are also
//! decoded, re-encoded and restored.
//!
//! Regenerate after a deliberate format change (which also needs a new version byte):
//! `SPECIE_WRITE_VECTORS=1 cargo test -p specie-atomizer --test specie-atomizer vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use specie_atomizer::{
    attested_ids_digest, AtomizerBlock, AtomizerLimits, AtomizerState, AttestRequest, ShardAnswer, ShardBlock,
    ShardMessage, ShardMessageLimits, UhsShard,
};
use specie_codec::{Decode, Encode};
use specie_role::{Durable, Role};
use specie_shard::ShardRange;
use specie_transaction::{CompactTransaction, Txid, UhsId};
use specie_vectors::{assert_file_matches, read_or_write, stored_bytes, Vector};

const FILE: &str = "docs/atomizer-vectors.json";
const DESCRIPTION: &str =
    "Test vectors of the atomizer shape (docs/architecture.md), generated and checked by crates/core/specie-atomizer/tests/specie-atomizer/vectors.rs";

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..").join(FILE)
}

fn id(first: u8, fill: u8) -> UhsId {
    let mut bytes = [fill; 32];
    bytes[0] = first;
    UhsId(bytes)
}

/// Shard 0 of two owns ids whose first byte is below 0x80.
fn shard_0() -> ShardRange {
    ShardRange::partition(2).unwrap()[0]
}

fn block() -> AtomizerBlock {
    let tx = |n: u8, spent: Vec<UhsId>, created: Vec<UhsId>| CompactTransaction {
        txid: Txid([n; 32]),
        spent,
        created,
        attestations: Default::default(),
    };
    AtomizerBlock {
        height: 1,
        txs: vec![
            tx(0xa1, vec![id(0x10, 1)], vec![id(0x90, 2), id(0x20, 3)]),
            tx(0xa2, vec![id(0xc0, 4)], vec![id(0x30, 5)]),
        ],
    }
}

fn share() -> ShardBlock {
    let range = shard_0();
    block().for_shard(|id| range.contains(id))
}

fn shard_after_block() -> UhsShard {
    let mut shard = UhsShard::with_unspent(shard_0(), [id(0x10, 1), id(0x11, 6)]);
    shard.apply(0, &share());
    shard
}

fn vectors() -> Vec<Vector> {
    let mut atomizer = AtomizerState::new(8);
    atomizer.apply(&block());
    let vector = |name: &str, description: &str, bytes: Vec<u8>| Vector {
        name: name.into(),
        description: description.into(),
        bytes,
    };
    vec![
        vector(
            "block_1",
            "an atomizer block: height (u64 LE) ‖ count ‖ compact transactions (txid ‖ spent ‖ created ‖ no attestations)",
            block().encode(),
        ),
        vector(
            "shard_0_block_1",
            "shard 0 of 2's share of block_1: height ‖ spent ids it owns ‖ created ids it owns, in block order",
            share().encode(),
        ),
        vector(
            "atomizer_snapshot_1",
            "the atomizer's snapshot after block_1 with a window of 8 blocks: version 1 ‖ height ‖ window ‖ count ‖ blocks",
            atomizer.encode_snapshot(),
        ),
        vector(
            "shard_0_snapshot_1",
            "shard 0's snapshot after block_1: version 1 ‖ range first ‖ range last ‖ height ‖ count ‖ ids ascending",
            shard_after_block().snapshot(),
        ),
        vector(
            "message_attest",
            "the atomizer asks shard 0 to attest (over the network): kind 0 ‖ round (u64 LE) ‖ count ‖ ids, in the order asked",
            attest().encode(),
        ),
        vector(
            "message_block_1",
            "the atomizer sends shard 0 its share of block_1: kind 1 ‖ shard_0_block_1",
            ShardMessage::Block(share()).encode(),
        ),
        vector(
            "answer_attested",
            "shard 0's attestation of message_attest at height 1: kind 0 ‖ round ‖ SHA-256 digest of the ids asked ‖ height ‖ count ‖ one byte 0 or 1 per id",
            attested().encode(),
        ),
        vector(
            "answer_applied",
            "shard 0 made block_1 durable: kind 1 ‖ height",
            ShardAnswer::Applied { height: 1 }.encode(),
        ),
        vector(
            "answer_behind",
            "a shard at height 1 was sent a block beyond the next: kind 2 ‖ its height",
            ShardAnswer::Behind { height: 1 }.encode(),
        ),
    ]
}

fn attest() -> ShardMessage {
    ShardMessage::Attest(AttestRequest {
        round: 7,
        ids: vec![id(0x20, 3), id(0x10, 1)],
    })
}

fn attested() -> ShardAnswer {
    ShardAnswer::Attested {
        round: 7,
        asked: attested_ids_digest(&[id(0x20, 3), id(0x10, 1)]),
        height: 1,
        present: vec![true, false],
    }
}

fn stored() -> &'static str {
    static STORED: OnceLock<String> = OnceLock::new();
    STORED.get_or_init(|| read_or_write(&path(), || specie_vectors::vectors_text(DESCRIPTION, &vectors())))
}

#[test]
fn the_code_makes_exactly_the_stored_vectors() {
    assert_file_matches(stored(), FILE, DESCRIPTION, &vectors());
}

#[test]
fn the_stored_bytes_decode_re_encode_and_restore() {
    let stored: serde_json::Value = serde_json::from_str(stored()).unwrap();
    let limits = AtomizerLimits::default();
    let bytes = stored_bytes(&stored, "block_1");
    let block = AtomizerBlock::decode_exact_with(&bytes, &limits).unwrap();
    assert_eq!(block.encode(), bytes);
    let bytes = stored_bytes(&stored, "shard_0_block_1");
    let decoded_share = ShardBlock::decode_exact_with(&bytes, &limits).unwrap();
    assert_eq!(
        (decoded_share.spent.len(), decoded_share.created.len()),
        (1, 2),
        "the ids below 0x80"
    );
    let bytes = stored_bytes(&stored, "atomizer_snapshot_1");
    let state = AtomizerState::decode_snapshot(&bytes, &limits).unwrap();
    assert_eq!((state.height(), state.spent_at(&id(0xc0, 4))), (1, Some(1)));
    assert_eq!(state.encode_snapshot(), bytes);
    let bytes = stored_bytes(&stored, "shard_0_snapshot_1");
    let mut shard = UhsShard::new(shard_0());
    shard.restore(&bytes).unwrap();
    assert_eq!(shard.height(), 1);
    assert_eq!(shard.sorted_ids(), vec![id(0x11, 6), id(0x20, 3), id(0x30, 5)]);
    assert_eq!(shard.snapshot(), bytes);
    // Ids out of order are not the canonical snapshot, and are refused.
    let mut swapped = bytes.clone();
    let ids_at = bytes.len() - 3 * 32;
    swapped[ids_at..ids_at + 32].copy_from_slice(&bytes[ids_at + 32..ids_at + 64]);
    swapped[ids_at + 32..ids_at + 64].copy_from_slice(&bytes[ids_at..ids_at + 32]);
    assert!(UhsShard::new(shard_0()).restore(&swapped).is_err());

    let message_limits = ShardMessageLimits::default();
    let bytes = stored_bytes(&stored, "message_attest");
    assert_eq!(
        ShardMessage::decode_exact_with(&bytes, &message_limits).unwrap(),
        attest()
    );
    let bytes = stored_bytes(&stored, "message_block_1");
    assert_eq!(
        ShardMessage::decode_exact_with(&bytes, &message_limits).unwrap(),
        ShardMessage::Block(share())
    );
    let bytes = stored_bytes(&stored, "answer_attested");
    assert_eq!(
        ShardAnswer::decode_exact_with(&bytes, &message_limits).unwrap(),
        attested()
    );
    // A presence flag other than 0 or 1 would be a second encoding of the same answer.
    let mut flag_2 = bytes.clone();
    *flag_2.last_mut().unwrap() = 2;
    assert!(ShardAnswer::decode_exact_with(&flag_2, &message_limits).is_err());
    for (name, answer) in [
        ("answer_applied", ShardAnswer::Applied { height: 1 }),
        ("answer_behind", ShardAnswer::Behind { height: 1 }),
    ] {
        assert_eq!(
            ShardAnswer::decode_exact_with(&stored_bytes(&stored, name), &message_limits).unwrap(),
            answer
        );
    }
    // Unknown kinds are refused, never guessed.
    assert!(ShardMessage::decode_exact_with(&[2], &message_limits).is_err());
    assert!(ShardAnswer::decode_exact_with(&[3, 0, 0, 0, 0, 0, 0, 0, 0], &message_limits).is_err());
}
