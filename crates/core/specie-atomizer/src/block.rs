//! The atomizer's blocks, its durable state (the height and the window of recent blocks), and
//! the part of a block each shard applies; with their canonical, bounded encodings.

use std::collections::{HashMap, VecDeque};

use specie_codec::{put_u64, put_vec, Decode, DecodeError, Encode, Reader};
use specie_transaction::{CompactTransaction, DecodeLimits, UhsId};

const SNAPSHOT_VERSION: u8 = 1;
/// Smallest compact transaction: txid and three empty counts.
const COMPACT_BYTES_MIN: usize = 32 + 3 * 8;
const UHS_ID_BYTES: usize = 32;

/// Bounds on what the atomizer's and the shards' logs and snapshots may hold.
#[derive(Clone, Debug)]
pub struct AtomizerLimits {
    pub block_transactions_max: u64,
    /// Ids one shard's share of a block may spend or create.
    pub shard_block_ids_max: u64,
    pub window_blocks_max: u64,
    pub transaction: DecodeLimits,
}

impl Default for AtomizerLimits {
    fn default() -> Self {
        AtomizerLimits {
            block_transactions_max: 100_000,
            shard_block_ids_max: 10_000_000,
            window_blocks_max: 4096,
            transaction: DecodeLimits::default(),
        }
    }
}

/// One block of the global order: the atomizer's durable command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtomizerBlock {
    pub height: u64,
    pub txs: Vec<CompactTransaction>,
}

impl AtomizerBlock {
    /// The ids `range_contains` selects, as the shard owning them applies them.
    pub fn for_shard(&self, range_contains: impl Fn(&UhsId) -> bool) -> ShardBlock {
        let mut spent = vec![];
        let mut created = vec![];
        for tx in &self.txs {
            spent.extend(tx.spent.iter().filter(|id| range_contains(id)).copied());
            created.extend(tx.created.iter().filter(|id| range_contains(id)).copied());
        }
        ShardBlock {
            height: self.height,
            spent,
            created,
        }
    }
}

impl Encode for AtomizerBlock {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_u64(out, self.height);
        put_vec(out, &self.txs);
    }
}

impl Decode for AtomizerBlock {
    type Limits = AtomizerLimits;
    const WHAT: &'static str = "atomizer block";

    fn decode_from(reader: &mut Reader<'_>, limits: &AtomizerLimits) -> Result<Self, DecodeError> {
        let height = reader.read_u64("block height")?;
        let txs = reader.read_vec(
            "block transactions",
            limits.block_transactions_max,
            COMPACT_BYTES_MIN,
            |r| CompactTransaction::decode_from(r, &limits.transaction),
        )?;
        Ok(AtomizerBlock { height, txs })
    }

    fn encoded_bytes_max(limits: &AtomizerLimits) -> usize {
        let tx = CompactTransaction::encoded_bytes_max(&limits.transaction);
        (16usize).saturating_add((limits.block_transactions_max as usize).saturating_mul(tx))
    }
}

/// One shard's share of a block: its durable command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardBlock {
    pub height: u64,
    pub spent: Vec<UhsId>,
    pub created: Vec<UhsId>,
}

impl Encode for ShardBlock {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_u64(out, self.height);
        put_vec(out, &self.spent);
        put_vec(out, &self.created);
    }
}

impl Decode for ShardBlock {
    type Limits = AtomizerLimits;
    const WHAT: &'static str = "shard block";

    fn decode_from(reader: &mut Reader<'_>, limits: &AtomizerLimits) -> Result<Self, DecodeError> {
        let height = reader.read_u64("block height")?;
        let max = limits.shard_block_ids_max;
        let spent = reader.read_vec("spent ids", max, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))?;
        let created = reader.read_vec("created ids", max, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))?;
        Ok(ShardBlock { height, spent, created })
    }

    fn encoded_bytes_max(limits: &AtomizerLimits) -> usize {
        24usize.saturating_add((limits.shard_block_ids_max as usize).saturating_mul(2 * UHS_ID_BYTES))
    }
}

/// A state that breaks an invariant: a bug, or a forged snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AtomizerInvariantViolation {
    #[error("block {found} applied at height {height}")]
    OutOfOrder { height: u64, found: u64 },
    #[error("{id} is spent twice within the window")]
    SpentTwice { id: UhsId },
    #[error("{id} is created twice within the window")]
    CreatedTwice { id: UhsId },
    #[error("the window holds {blocks} blocks, more than {max}")]
    WindowTooLong { blocks: usize, max: u64 },
    #[error("the window's blocks do not end at height {height}")]
    WindowNotContiguous { height: u64 },
    #[error("the caches hold {cached} ids, the window's blocks {expected}")]
    CacheDiffers { cached: usize, expected: usize },
}

/// The atomizer's durable state: its height and the last `window_blocks` blocks, with the ids
/// they spent and created (by height) derived from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtomizerState {
    height: u64,
    window_blocks: u64,
    window: VecDeque<AtomizerBlock>,
    spent: HashMap<UhsId, u64>,
    created: HashMap<UhsId, u64>,
}

impl AtomizerState {
    pub fn new(window_blocks: u64) -> AtomizerState {
        assert!(
            window_blocks >= 2,
            "a window of {window_blocks} blocks leaves no room for a lagging shard"
        );
        AtomizerState {
            height: 0,
            window_blocks,
            window: VecDeque::new(),
            spent: HashMap::new(),
            created: HashMap::new(),
        }
    }

    /// Height of the last block made durable (0: none yet).
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Height of the oldest block the window still holds (`height + 1` when it holds none).
    pub fn window_start(&self) -> u64 {
        self.height + 1 - self.window.len() as u64
    }

    /// The block at `height`, if the window still holds it.
    pub fn block(&self, height: u64) -> Option<&AtomizerBlock> {
        let index = height.checked_sub(self.window_start())?;
        self.window.get(usize::try_from(index).ok()?)
    }

    /// The height of the window's block that spent `id`, if any.
    pub fn spent_at(&self, id: &UhsId) -> Option<u64> {
        self.spent.get(id).copied()
    }

    /// The height of the window's block that created `id`, if any.
    pub fn created_at(&self, id: &UhsId) -> Option<u64> {
        self.created.get(id).copied()
    }

    /// Appends the next block and forgets the one that falls out of the window.
    ///
    /// # Panics
    /// If the block is not the next one, or spends or creates an id a block of the window
    /// already did: the atomizer checks both before sealing, so either is a bug.
    pub fn apply(&mut self, block: &AtomizerBlock) {
        if let Err(violation) = self.insert(block.clone()) {
            panic!("atomizer block {}: {violation}", block.height);
        }
    }

    fn insert(&mut self, block: AtomizerBlock) -> Result<(), AtomizerInvariantViolation> {
        if self.height.checked_add(1) != Some(block.height) {
            return Err(AtomizerInvariantViolation::OutOfOrder {
                height: self.height,
                found: block.height,
            });
        }
        for tx in &block.txs {
            for id in &tx.spent {
                if self.spent.insert(*id, block.height).is_some() {
                    return Err(AtomizerInvariantViolation::SpentTwice { id: *id });
                }
            }
            for id in &tx.created {
                if self.created.insert(*id, block.height).is_some() {
                    return Err(AtomizerInvariantViolation::CreatedTwice { id: *id });
                }
            }
        }
        self.height = block.height;
        self.window.push_back(block);
        while self.window.len() as u64 > self.window_blocks {
            let old = self.window.pop_front().expect("the window is longer than its bound");
            for tx in &old.txs {
                tx.spent
                    .iter()
                    .for_each(|id| assert_eq!(self.spent.remove(id), Some(old.height)));
                tx.created
                    .iter()
                    .for_each(|id| assert_eq!(self.created.remove(id), Some(old.height)));
            }
        }
        Ok(())
    }

    pub fn check_invariants(&self) -> Result<(), AtomizerInvariantViolation> {
        if self.window.len() as u64 > self.window_blocks {
            return Err(AtomizerInvariantViolation::WindowTooLong {
                blocks: self.window.len(),
                max: self.window_blocks,
            });
        }
        let start = self.window_start();
        if self
            .window
            .iter()
            .enumerate()
            .any(|(i, b)| b.height != start + i as u64)
        {
            return Err(AtomizerInvariantViolation::WindowNotContiguous { height: self.height });
        }
        let ids =
            |of: fn(&CompactTransaction) -> usize| -> usize { self.window.iter().flat_map(|b| &b.txs).map(of).sum() };
        let expected = ids(|tx| tx.spent.len()) + ids(|tx| tx.created.len());
        let cached = self.spent.len() + self.created.len();
        if cached != expected {
            return Err(AtomizerInvariantViolation::CacheDiffers { cached, expected });
        }
        Ok(())
    }

    /// Canonical bytes: the height, the window's length bound and its blocks (the caches are
    /// derived from them on load).
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut out = vec![SNAPSHOT_VERSION];
        put_u64(&mut out, self.height);
        put_u64(&mut out, self.window_blocks);
        let blocks: Vec<AtomizerBlock> = self.window.iter().cloned().collect();
        put_vec(&mut out, &blocks);
        out
    }

    pub fn decode_snapshot(bytes: &[u8], limits: &AtomizerLimits) -> Result<AtomizerState, AtomizerSnapshotError> {
        let mut reader = Reader::new(bytes);
        reader.read_version("atomizer snapshot", SNAPSHOT_VERSION)?;
        let height = reader.read_u64("atomizer height")?;
        if height == u64::MAX {
            // No block could follow it (found by fuzzing: the next height overflowed).
            return Err(DecodeError::NonCanonical {
                what: "atomizer height",
                reason: "the last height leaves no room for a next block",
            }
            .into());
        }
        let window_blocks = reader.read_u64("window blocks")?;
        if !(2..=limits.window_blocks_max).contains(&window_blocks) {
            return Err(DecodeError::CountTooLarge {
                what: "window blocks",
                count: window_blocks,
                max: limits.window_blocks_max,
            }
            .into());
        }
        let blocks = reader.read_vec("window", window_blocks, 16, |r| AtomizerBlock::decode_from(r, limits))?;
        reader.finish()?;
        let first = blocks.first().map_or(height + 1, |b| b.height);
        let mut state = AtomizerState::new(window_blocks);
        state.height = first
            .checked_sub(1)
            .ok_or(AtomizerInvariantViolation::OutOfOrder { height: 0, found: 0 })?;
        for block in blocks {
            state.insert(block)?;
        }
        if state.height != height {
            return Err(AtomizerInvariantViolation::WindowNotContiguous { height }.into());
        }
        Ok(state)
    }
}

/// Why a snapshot was refused.
#[derive(Debug, thiserror::Error)]
pub enum AtomizerSnapshotError {
    #[error("does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Invariant(#[from] AtomizerInvariantViolation),
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_transaction::Txid;

    fn tx(n: u8, spent: &[u8], created: &[u8]) -> CompactTransaction {
        let id = |b: u8| UhsId([b; 32]);
        CompactTransaction {
            txid: Txid([n; 32]),
            spent: spent.iter().map(|b| id(*b)).collect(),
            created: created.iter().map(|b| id(*b)).collect(),
            attestations: Default::default(),
        }
    }

    #[test]
    fn the_window_forgets_old_blocks_and_snapshots_round_trip() {
        let mut state = AtomizerState::new(2);
        for height in 1..=3u8 {
            let block = AtomizerBlock {
                height: height.into(),
                txs: vec![tx(height, &[height], &[height + 100])],
            };
            state.apply(&block);
            assert_eq!(state.check_invariants(), Ok(()));
        }
        assert_eq!(state.window_start(), 2);
        assert_eq!(state.spent_at(&UhsId([1; 32])), None, "block 1 left the window");
        assert_eq!(state.spent_at(&UhsId([3; 32])), Some(3));
        assert_eq!(state.created_at(&UhsId([102; 32])), Some(2));
        assert!(state.block(1).is_none() && state.block(3).is_some());
        let bytes = state.encode_snapshot();
        let back = AtomizerState::decode_snapshot(&bytes, &AtomizerLimits::default()).unwrap();
        assert_eq!(back, state);
        assert_eq!(back.encode_snapshot(), bytes);
    }

    #[test]
    fn a_block_out_of_order_or_spending_twice_is_refused() {
        let mut state = AtomizerState::new(4);
        let block = |height, txs| AtomizerBlock { height, txs };
        assert!(matches!(
            state.clone().insert(block(2, vec![])),
            Err(AtomizerInvariantViolation::OutOfOrder { .. })
        ));
        state.apply(&block(1, vec![tx(1, &[9], &[10])]));
        assert_eq!(
            state.clone().insert(block(2, vec![tx(2, &[9], &[11])])),
            Err(AtomizerInvariantViolation::SpentTwice { id: UhsId([9; 32]) })
        );
        assert_eq!(
            state.insert(block(2, vec![tx(3, &[8], &[10])])),
            Err(AtomizerInvariantViolation::CreatedTwice { id: UhsId([10; 32]) })
        );
    }

    /// Found by fuzzing (`atomizer_decoders`): a snapshot whose window reaches the last height
    /// overflowed on the block after it, instead of being refused.
    #[test]
    fn a_snapshot_at_the_last_height_is_refused() {
        let mut bytes = AtomizerState::new(4).encode_snapshot();
        bytes[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(AtomizerState::decode_snapshot(&bytes, &AtomizerLimits::default()).is_err());
        let crash = "01fffffff70100000000010000000000000600000000000000ffffffffffffffff00000000000000000000000004000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000002000000000000000000";
        let crash: Vec<u8> = (0..crash.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&crash[i..i + 2], 16).unwrap())
            .collect();
        let fuzzed = AtomizerLimits {
            block_transactions_max: 64,
            shard_block_ids_max: 256,
            ..AtomizerLimits::default()
        };
        assert!(AtomizerState::decode_snapshot(&crash, &fuzzed).is_err());
    }

    #[test]
    fn blocks_decode_only_within_their_limits() {
        let block = AtomizerBlock {
            height: 7,
            txs: vec![tx(1, &[1, 2], &[3])],
        };
        let bytes = block.encode();
        assert_eq!(
            AtomizerBlock::decode_exact_with(&bytes, &AtomizerLimits::default()).unwrap(),
            block
        );
        let tight = AtomizerLimits {
            block_transactions_max: 0,
            ..AtomizerLimits::default()
        };
        assert!(AtomizerBlock::decode_exact_with(&bytes, &tight).is_err());
        let share = block.for_shard(|id| id.0[0] != 2);
        assert_eq!(share.spent, vec![UhsId([1; 32])]);
        let share_bytes = share.encode();
        assert_eq!(
            ShardBlock::decode_exact_with(&share_bytes, &AtomizerLimits::default()).unwrap(),
            share
        );
        for cut in 0..share_bytes.len() {
            assert!(ShardBlock::decode_exact_with(&share_bytes[..cut], &AtomizerLimits::default()).is_err());
        }
    }
}
