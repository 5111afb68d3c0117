//! Properties of the pure frame codec, and the example frame of `docs/wire-protocol.md`.

use crate::doc_vectors;

use proptest::prelude::*;
use specie_wire::{Frame, FrameDecoder, FrameEncoder, FrameError, FrameKind, HEADER_BYTES};

const FRAME_BYTES_MAX: usize = 4096;

fn kind() -> impl Strategy<Value = FrameKind> {
    prop_oneof![
        Just(FrameKind::Request),
        Just(FrameKind::Response),
        Just(FrameKind::Error),
        Just(FrameKind::Ping),
        Just(FrameKind::Pong),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (kind(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..300))
        .prop_map(|(kind, request_id, payload)| Frame::new(kind, request_id, payload))
}

/// Feeds `bytes` in chunks of the given sizes (cycled), collecting frames until an error.
fn decode_chunked(bytes: &[u8], chunk_sizes: &[usize], frame_bytes_max: usize) -> (Vec<Frame>, Option<FrameError>) {
    let mut decoder = FrameDecoder::new(frame_bytes_max);
    let mut frames = Vec::new();
    let mut rest = bytes;
    let mut sizes = chunk_sizes.iter().cycle();
    while !rest.is_empty() {
        let size = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
        decoder.feed(&rest[..size]);
        rest = &rest[size..];
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(error) => return (frames, Some(error)),
            }
        }
        // The decoder never holds more than one incomplete frame plus the last chunk.
        assert!(decoder.buffered_bytes() <= frame_bytes_max + size);
    }
    (frames, None)
}

proptest! {
    #[test]
    fn frames_round_trip_in_any_chunking(
        frames in proptest::collection::vec(frame(), 0..20),
        chunk_sizes in proptest::collection::vec(1usize..200, 1..10),
    ) {
        let mut encoder = FrameEncoder::new(FRAME_BYTES_MAX);
        for frame in &frames {
            encoder.push_frame(frame).unwrap();
        }
        prop_assert_eq!(encoder.buffered_frames(), frames.len());
        let (decoded, error) = decode_chunked(encoder.as_bytes(), &chunk_sizes, FRAME_BYTES_MAX);
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, frames);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
        chunk_sizes in proptest::collection::vec(1usize..100, 1..5),
    ) {
        let _ = decode_chunked(&bytes, &chunk_sizes, FRAME_BYTES_MAX);
        let _ = Frame::decode_exact(&bytes, FRAME_BYTES_MAX);
    }

    /// Random bytes behind a valid prefix reach the length and checksum checks, which bytes
    /// that are random from the start almost never do.
    #[test]
    fn arbitrary_bytes_after_a_valid_prefix_never_panic(
        kind in 1u8..=5,
        rest in proptest::collection::vec(any::<u8>(), 0..600),
        chunk_sizes in proptest::collection::vec(1usize..100, 1..5),
    ) {
        let mut bytes = vec![b'S', b'W', 1, kind];
        bytes.extend(rest);
        let (frames, error) = decode_chunked(&bytes, &chunk_sizes, FRAME_BYTES_MAX);
        // A random checksum matches with probability 2^-32: decoding must fail or yield frames
        // that re-encode to exactly the bytes they came from.
        let mut encoder = FrameEncoder::new(FRAME_BYTES_MAX);
        for frame in &frames {
            encoder.push_frame(frame).unwrap();
        }
        prop_assert_eq!(encoder.as_bytes(), &bytes[..encoder.buffered_bytes()]);
        let _ = error;
    }

    #[test]
    fn any_single_bit_flip_is_detected(
        frame in frame(),
        bit in any::<prop::sample::Index>(),
    ) {
        let mut encoder = FrameEncoder::new(FRAME_BYTES_MAX);
        encoder.push_frame(&frame).unwrap();
        let mut bytes = encoder.as_bytes().to_vec();
        let bit = bit.index(bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        // A flipped length may also just leave the frame incomplete or oversize; it must never
        // decode to a frame.
        prop_assert!(Frame::decode_exact(&bytes, FRAME_BYTES_MAX).is_err());
    }
}

#[test]
fn header_claiming_4_gib_is_rejected_before_allocation() {
    let mut header = Vec::new();
    header.extend_from_slice(b"SW");
    header.push(1);
    header.push(FrameKind::Request as u8);
    header.extend_from_slice(&7u64.to_le_bytes());
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(header.len(), 16);
    // Only the first 16 bytes: the length field is checked before the checksum even arrives.
    let mut decoder = FrameDecoder::new(16 * 1024 * 1024);
    decoder.feed(&header);
    assert_eq!(
        decoder.next_frame(),
        Err(FrameError::TooLarge {
            frame_bytes: HEADER_BYTES as u64 + u64::from(u32::MAX),
            frame_bytes_max: 16 * 1024 * 1024
        })
    );
    // Nothing was reserved for the claimed payload.
    assert!(
        decoder.buffer_capacity() < 1024,
        "capacity {}",
        decoder.buffer_capacity()
    );
    // Poisoned: later bytes are neither kept nor decoded.
    decoder.feed(&[0u8; 4096]);
    assert_eq!(decoder.buffered_bytes(), 0);
    assert!(matches!(decoder.next_frame(), Err(FrameError::TooLarge { .. })));
}

/// The hex example in `docs/wire-protocol.md` is exactly what the encoder produces.
#[test]
fn documented_example_frame_matches_the_codec() {
    let doc = doc_vectors::wire_protocol_doc(env!("CARGO_MANIFEST_DIR"));
    let bytes = doc_vectors::hex_block_after(&doc, "<!-- example-frame -->");

    let expected = Frame::new(FrameKind::Request, 42, b"hello".to_vec());
    let mut encoder = FrameEncoder::new(FRAME_BYTES_MAX);
    encoder.push_frame(&expected).unwrap();
    assert_eq!(hex::encode(encoder.as_bytes()), hex::encode(&bytes));
    assert_eq!(Frame::decode_exact(&bytes, FRAME_BYTES_MAX), Ok(expected));
}
