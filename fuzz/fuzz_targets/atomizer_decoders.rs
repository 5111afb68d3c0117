//! Feeds arbitrary bytes to the atomizer shape's decoders (`specie_atomizer`): a block, a
//! shard's share of one, the atomizer's snapshot, a shard's snapshot, and the messages between
//! the atomizer and a shard as they cross a network (`ShardMessage`, `ShardAnswer`, under
//! `ShardMessageLimits::default()`; what tag 17 of the wire protocol carries). Nothing may panic;
//! whatever decodes must re-encode to exactly the input (one encoding each), and a message or an
//! answer must fit its decoder's `encoded_bytes_max`; a decoded shard block must be applied by a
//! shard, or refused and reported, without panicking; a shard's answer to a decoded attestation
//! request must decode under the same limits.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_atomizer::{
    AtomizerBlock, AtomizerLimits, AtomizerState, ShardAnswer, ShardBlock, ShardMessage, ShardMessageLimits, UhsShard,
    UhsShardInput, UhsShardReply,
};
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
    let message_limits = ShardMessageLimits::default();
    if let Ok(message) = ShardMessage::decode_exact_with(data, &message_limits) {
        assert_eq!(message.encode(), data, "a message to a shard has one encoding");
        assert!(data.len() <= ShardMessage::encoded_bytes_max(&message_limits));
        if let ShardMessage::Attest(request) = &message {
            // A shard answers an attestation request with one flag per id, and the answer crosses
            // the network under the same limits as the request.
            let mut shard = UhsShard::new(everything);
            shard.handle(0, UhsShardInput::Atomizer { ticket: 0, message: message.clone() });
            let round = Round::take(&mut shard);
            for (_, reply) in &round.replies {
                if let UhsShardReply::Answer(answer) = reply {
                    if let ShardAnswer::Attested { present, .. } = answer {
                        assert_eq!(present.len(), request.ids.len(), "one flag per id asked");
                    }
                    let bytes = answer.encode();
                    assert_eq!(
                        ShardAnswer::decode_exact_with(&bytes, &message_limits).as_ref(),
                        Ok(answer),
                        "a shard's answer to a request that decodes decodes too"
                    );
                }
            }
        }
    }
    if let Ok(answer) = ShardAnswer::decode_exact_with(data, &message_limits) {
        assert_eq!(answer.encode(), data, "a shard's answer has one encoding");
        assert!(data.len() <= ShardAnswer::encoded_bytes_max(&message_limits));
    }
});
