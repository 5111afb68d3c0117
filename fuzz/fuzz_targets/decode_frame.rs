//! Feeds arbitrary bytes to the wire frame decoder, in chunk sizes chosen by the input itself.
//! Nothing may panic; every frame that decodes must re-encode to exactly the bytes it came from;
//! and the decoder's buffer must stay within one frame limit plus one chunk.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_wire::{FrameDecoder, FrameEncoder};

/// Small, so that the fuzzer reaches the too-large path as well as complete frames.
const FRAME_BYTES_MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    // First byte: the chunk size, so that one input exercises one particular split of the
    // stream and the fuzzer can explore splits across header fields.
    let Some((&chunk_byte, stream)) = data.split_first() else {
        return;
    };
    let chunk_bytes = usize::from(chunk_byte).max(1);
    let mut decoder = FrameDecoder::new(FRAME_BYTES_MAX);
    let mut encoder = FrameEncoder::new(FRAME_BYTES_MAX);
    'stream: for chunk in stream.chunks(chunk_bytes) {
        decoder.feed(chunk);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => encoder.push_frame(&frame).expect("a decoded frame re-encodes"),
                Ok(None) => break,
                Err(_) => break 'stream,
            }
        }
        assert!(decoder.buffered_bytes() <= FRAME_BYTES_MAX + chunk_bytes);
    }
    let decoded = encoder.as_bytes();
    assert_eq!(decoded, &stream[..decoded.len()], "frames re-encode to their input bytes");
});
