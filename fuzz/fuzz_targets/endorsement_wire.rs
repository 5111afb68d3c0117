//! Feeds arbitrary bytes to the endorsement protocol's wire decoders (docs/endorsement-format.md
//! §7): the aggregator's messages (`AggregatorMessage<[u8; 32]>`), the endorsers' answers
//! (`EndorserMessage<RefusalCode>`), an endorser's key file (`EndorserKeys`) and the key
//! generation and refresh ceremony's messages (`CeremonyMessage`). Nothing may panic; whatever
//! decodes must re-encode to exactly the input (one encoding per value) and fit the decoder's
//! `encoded_bytes_max`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_codec::{Decode, Encode};
use specie_endorsement::{
    CeremonyMessage, AggregatorMessage, EndorserKeys, EndorserMessage, MessageLimits, RefusalCode, ReplyLimits,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = AggregatorMessage::<[u8; 32]>::decode_exact(data) {
        assert_eq!(message.encode(), data, "one encoding per aggregator message");
        assert!(data.len() <= AggregatorMessage::<[u8; 32]>::encoded_bytes_max(&MessageLimits::default()));
    }
    if let Ok(message) = EndorserMessage::<RefusalCode>::decode_exact(data) {
        assert_eq!(message.encode(), data, "one encoding per endorser message");
        assert!(data.len() <= EndorserMessage::<RefusalCode>::encoded_bytes_max(&ReplyLimits::default()));
    }
    if let Ok(keys) = EndorserKeys::decode_exact(data) {
        assert_eq!(keys.encode(), data, "one encoding per key file");
        assert!(data.len() <= EndorserKeys::encoded_bytes_max(&()));
    }
    if let Ok(message) = CeremonyMessage::decode_exact(data) {
        assert_eq!(message.encode(), data, "one encoding per ceremony message");
        assert!(data.len() <= CeremonyMessage::encoded_bytes_max(&()));
    }
});
