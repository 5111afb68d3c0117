//! The one durable record format: every record of the embedded log and every entry of Raft's log
//! store is one frame
//!
//! ```text
//! offset  size  field
//! 0       4     payload length in bytes (u32, <= the reader's record_bytes_max)
//! 4       4     CRC-32 (IEEE, as crc32fast) over (index ‖ payload)
//! 8       8     index (u64)
//! 16      len   payload
//! ```
//!
//! all integers little-endian. The checksum covers the index, so a valid frame in the wrong place
//! is told apart from the right one. What the payload holds is the writer's business.
//!
//! How a sequence of frames in a segment file is read, and where a torn tail ends and corruption
//! starts, is [`crate::segment::SegmentScan`]'s.

pub use crate::error::FrameDefect;

/// Bytes of a frame before its payload.
pub const HEADER_BYTES: usize = 16;

fn checksum(index: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&index.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Frame size on disk for a payload of `payload_bytes`.
pub fn frame_bytes(payload_bytes: usize) -> u64 {
    (HEADER_BYTES + payload_bytes) as u64
}

/// A payload over the `record_bytes_max` it was encoded under: no frame was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("record payload of {bytes} bytes exceeds record_bytes_max {record_bytes_max}")]
pub struct PayloadTooLarge {
    pub bytes: usize,
    pub record_bytes_max: u32,
}

/// Appends the frame for record `index` to `buffer`, its payload written by `write_payload`
/// straight into `buffer` (no intermediate copy). Returns the payload's length. A payload over
/// `record_bytes_max` is refused and `buffer` is left as it was.
pub fn encode_with(
    buffer: &mut Vec<u8>,
    index: u64,
    record_bytes_max: u32,
    write_payload: impl FnOnce(&mut Vec<u8>),
) -> Result<u32, PayloadTooLarge> {
    let start = buffer.len();
    let payload_start = start + HEADER_BYTES;
    buffer.resize(payload_start, 0);
    write_payload(buffer);
    assert!(buffer.len() >= payload_start, "write_payload only appends");
    let bytes = buffer.len() - payload_start;
    let Some(length) = u32::try_from(bytes).ok().filter(|&length| length <= record_bytes_max) else {
        buffer.truncate(start);
        return Err(PayloadTooLarge {
            bytes,
            record_bytes_max,
        });
    };
    let crc = checksum(index, &buffer[payload_start..]);
    buffer[start..start + 4].copy_from_slice(&length.to_le_bytes());
    buffer[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    buffer[start + 8..payload_start].copy_from_slice(&index.to_le_bytes());
    Ok(length)
}

/// Appends the frame for record `index` with `payload` to `buffer`; see [`encode_with`].
pub fn encode(buffer: &mut Vec<u8>, index: u64, payload: &[u8], record_bytes_max: u32) -> Result<u32, PayloadTooLarge> {
    encode_with(buffer, index, record_bytes_max, |buffer| {
        buffer.extend_from_slice(payload)
    })
}

/// One decoded frame, borrowing its payload from the bytes it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub index: u64,
    pub payload: &'a [u8],
}

impl Frame<'_> {
    /// The frame's size on disk, header included.
    pub fn bytes(&self) -> u64 {
        frame_bytes(self.payload.len())
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4-byte slice"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8-byte slice"))
}

/// Decodes the frame at the start of `bytes` (which may go on past it). Only slices `bytes`: the
/// length field is checked against `record_bytes_max` and against what is actually left before it
/// is used, so no byte on disk can make this allocate or panic.
pub fn decode(bytes: &[u8], record_bytes_max: u32) -> Result<Frame<'_>, FrameDefect> {
    if bytes.len() < HEADER_BYTES {
        return Err(FrameDefect::HeaderShort {
            bytes_remaining: bytes.len() as u64,
        });
    }
    let length = u32_at(bytes, 0);
    let stored = u32_at(bytes, 4);
    let index = u64_at(bytes, 8);
    if length > record_bytes_max {
        return Err(FrameDefect::LengthExceedsMax {
            length,
            record_bytes_max,
        });
    }
    let bytes_remaining = bytes.len() - HEADER_BYTES;
    if length as usize > bytes_remaining {
        return Err(FrameDefect::PayloadShort {
            length,
            bytes_remaining: bytes_remaining as u64,
        });
    }
    let payload = &bytes[HEADER_BYTES..HEADER_BYTES + length as usize];
    let computed = checksum(index, payload);
    if computed != stored {
        return Err(FrameDefect::ChecksumMismatch { stored, computed });
    }
    Ok(Frame { index, payload })
}

/// Looks for any valid frame starting strictly after `from` whose index could belong to the
/// sequence that broke at `from` (at least `index_expected`). Used to tell a torn tail (nothing
/// valid follows) from damage to acknowledged data (something valid follows).
///
/// The index window keeps this cheap: a frame is at least 16 bytes, so a frame k records later
/// than `index_expected` cannot start before k * 16 bytes, and most byte offsets are rejected
/// on the index field alone without computing a checksum.
pub(crate) fn find_valid_after(bytes: &[u8], from: usize, index_expected: u64, record_bytes_max: u32) -> Option<usize> {
    let bytes_after = (bytes.len() - from) as u64;
    let index_max = index_expected.saturating_add(bytes_after / HEADER_BYTES as u64);
    let offset_last = bytes.len().checked_sub(HEADER_BYTES)?;
    (from + 1..=offset_last).find(|&offset| {
        let index = u64_at(bytes, offset + 8);
        (index_expected..=index_max).contains(&index) && decode(&bytes[offset..], record_bytes_max).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(index: u64, payload: &[u8]) -> Vec<u8> {
        let mut buffer = Vec::new();
        encode(&mut buffer, index, payload, 64).unwrap();
        buffer
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// The format, pinned: changing any of these bytes breaks every log on disk, so it must be a
    /// deliberate change (and the format docs must change with it).
    #[test]
    fn golden_bytes() {
        let bytes = encoded(0x0102_0304_0506_0708, b"specie");
        assert_eq!(
            hex(&bytes),
            concat!(
                "06000000",         // length 6
                "ac50256e",         // crc32(index ‖ payload)
                "0807060504030201", // index
                "737065636965",     // "specie"
            )
        );
        assert_eq!(
            decode(&bytes, 64),
            Ok(Frame {
                index: 0x0102_0304_0506_0708,
                payload: b"specie"
            })
        );
        assert_eq!(hex(&encoded(1, b"")), "00000000f7df88a90100000000000000");
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut buffer = Vec::new();
        assert_eq!(encode(&mut buffer, 7, b"hello", 64), Ok(5));
        assert_eq!(encode(&mut buffer, 8, b"", 64), Ok(0));
        assert_eq!(buffer.len() as u64, frame_bytes(5) + frame_bytes(0));
        let first = decode(&buffer, 64).unwrap();
        assert_eq!(
            first,
            Frame {
                index: 7,
                payload: b"hello"
            }
        );
        let second = decode(&buffer[first.bytes() as usize..], 64).unwrap();
        assert_eq!(second, Frame { index: 8, payload: b"" });
    }

    #[test]
    fn encode_with_writes_in_place_and_refuses_oversized_payloads() {
        let mut buffer = b"kept".to_vec();
        let length = encode_with(&mut buffer, 3, 8, |buffer| buffer.extend_from_slice(b"abc")).unwrap();
        assert_eq!(length, 3);
        assert_eq!(buffer[4..], encoded(3, b"abc"));
        let before = buffer.clone();
        assert_eq!(
            encode_with(&mut buffer, 4, 2, |buffer| buffer.extend_from_slice(b"abc")),
            Err(PayloadTooLarge {
                bytes: 3,
                record_bytes_max: 2
            })
        );
        assert_eq!(buffer, before, "a refused frame leaves nothing behind");
        assert_eq!(encode(&mut buffer, 4, b"ab", 2), Ok(2));
    }

    #[test]
    fn layout_is_length_checksum_index_payload() {
        let buffer = encoded(0x0102_0304_0506_0708, b"ab");
        assert_eq!(&buffer[0..4], &2u32.to_le_bytes());
        assert_eq!(&buffer[4..8], &checksum(0x0102_0304_0506_0708, b"ab").to_le_bytes());
        assert_eq!(&buffer[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&buffer[16..], b"ab");
    }

    #[test]
    fn defects() {
        let mut buffer = encoded(1, b"payload");
        assert!(matches!(
            decode(&buffer[..15], 64),
            Err(FrameDefect::HeaderShort { .. })
        ));
        assert!(matches!(
            decode(&buffer[..20], 64),
            Err(FrameDefect::PayloadShort { .. })
        ));
        assert!(matches!(decode(&buffer, 3), Err(FrameDefect::LengthExceedsMax { .. })));
        let mut flipped = buffer.clone();
        flipped[18] ^= 0x40;
        assert!(matches!(
            decode(&flipped, 64),
            Err(FrameDefect::ChecksumMismatch { .. })
        ));
        // The checksum covers the index too.
        let mut moved = buffer.clone();
        moved[8] ^= 0x01;
        assert!(matches!(decode(&moved, 64), Err(FrameDefect::ChecksumMismatch { .. })));
        buffer[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&buffer, u32::MAX),
            Err(FrameDefect::PayloadShort { length: u32::MAX, .. })
        ));
    }

    #[test]
    fn find_valid_after_skips_garbage() {
        let mut buffer = vec![0u8; 40];
        let second = buffer.len();
        encode(&mut buffer, 5, b"xyz", 64).unwrap();
        assert_eq!(find_valid_after(&buffer, 0, 4, 64), Some(second));
        assert_eq!(find_valid_after(&buffer, 0, 6, 64), None);
        assert_eq!(find_valid_after(&buffer, second, 4, 64), None);
    }
}
