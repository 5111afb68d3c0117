//! Feeds arbitrary bytes to the atomizer shape's decoders (`specie_atomizer`): a block, a
//! shard's share of one, the atomizer's snapshot and a shard's snapshot. Nothing may panic;
//! whatever decodes must re-encode to exactly the input (one encoding each); a decoded shard
//! block must be applied by a shard, or refused and reported, without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_atomizer::{AtomizerBlock, AtomizerLimits, AtomizerState, ShardBlock, ShardMessage, UhsShard, UhsShardInput};
use specie_codec::{Decode, Encode};
use specie_role::{Durable, Role, Round};
use specie_shard::ShardRange;

fuzz_target!(|data: &[u8]| {
    let limits = AtomizerLimits {
        block_transactions_max: 64,
        shard_block_ids_max: 256,
        ..AtomizerLimits::default()
    };
    if let Ok(block) = AtomizerBlock::decode_exact_with(data, &limits) {
        assert_eq!(block.encode(), data, "a block has one encoding");
    }
    if let Ok(state) = AtomizerState::decode_snapshot(data, &limits) {
        assert_eq!(state.encode_snapshot(), data, "an atomizer snapshot has one encoding");
        assert!(state.check_invariants().is_ok(), "a restored state holds its invariants");
    }
    let everything = ShardRange { first: 0, last: u16::MAX };
    let mut restored = UhsShard::new(everything);
    if restored.restore(data).is_ok() {
        assert_eq!(restored.snapshot(), data, "a shard snapshot has one encoding");
    }
    if let Ok(share) = ShardBlock::decode_exact_with(data, &limits) {
        assert_eq!(share.encode(), data, "a shard block has one encoding");
        // A shard holding the block's inputs gets it as a peer message: it applies or refuses it.
        let mut shard = UhsShard::with_unspent(everything, share.spent.iter().copied());
        let message = ShardMessage::Block(share);
        shard.handle(0, UhsShardInput::Atomizer { ticket: 0, message });
        let round = Round::take(&mut shard);
        for block in &round.proposals {
            shard.apply(0, block);
        }
    }
});
