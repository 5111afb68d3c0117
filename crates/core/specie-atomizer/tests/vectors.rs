//! The vectors of the atomizer shape's durable encodings (`docs/atomizer-vectors.json`): a block
//! of two compact transactions, one shard's share of it, the atomizer's snapshot after it, and
//! that shard's snapshot. Any change to an encoding fails this test; the stored bytes are also
//! decoded, re-encoded and restored.
//!
//! Regenerate after a deliberate format change (which also needs a new version byte):
//! `SPECIE_WRITE_VECTORS=1 cargo test -p specie-atomizer --test vectors`.

use std::path::PathBuf;
use std::sync::OnceLock;

use specie_atomizer::{AtomizerBlock, AtomizerLimits, AtomizerState, ShardBlock, UhsShard};
use specie_codec::{Decode, Encode};
use specie_role::{Durable, Role};
use specie_shard::ShardRange;
use specie_transaction::{CompactTransaction, Txid, UhsId};
use specie_vectors::{assert_file_matches, read_or_write, stored_bytes, Vector};

const FILE: &str = "docs/atomizer-vectors.json";
const DESCRIPTION: &str =
    "Test vectors of the atomizer shape (docs/architecture.md), generated and checked by crates/core/specie-atomizer/tests/vectors.rs";

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
    ]
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
    let share = ShardBlock::decode_exact_with(&bytes, &limits).unwrap();
    assert_eq!((share.spent.len(), share.created.len()), (1, 2), "the ids below 0x80");
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
}
