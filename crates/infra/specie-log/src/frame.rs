//! One record on disk: `u32 length ‖ u32 crc32(index ‖ payload) ‖ u64 index ‖ payload`.

use crate::error::FrameDefect;

pub(crate) const FRAME_HEADER_BYTES: usize = 16;

pub(crate) fn checksum(index: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&index.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Frame size on disk for a payload of `payload_bytes`.
pub(crate) fn frame_bytes(payload_bytes: usize) -> u64 {
    (FRAME_HEADER_BYTES + payload_bytes) as u64
}

pub(crate) fn encode(buffer: &mut Vec<u8>, index: u64, payload: &[u8]) {
    // The caller checked the payload against record_bytes_max, which is capped below u32::MAX.
    let length = u32::try_from(payload.len()).expect("payload length checked by the caller");
    buffer.extend_from_slice(&length.to_le_bytes());
    buffer.extend_from_slice(&checksum(index, payload).to_le_bytes());
    buffer.extend_from_slice(&index.to_le_bytes());
    buffer.extend_from_slice(payload);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    pub index: u64,
    pub payload: &'a [u8],
}

impl Frame<'_> {
    pub(crate) fn bytes(&self) -> u64 {
        frame_bytes(self.payload.len())
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4-byte slice"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8-byte slice"))
}

/// Decodes the frame at the start of `bytes`. Only slices `bytes`: the length field is checked
/// against `record_bytes_max` and against what is actually left before it is used.
pub(crate) fn decode(bytes: &[u8], record_bytes_max: u32) -> Result<Frame<'_>, FrameDefect> {
    if bytes.len() < FRAME_HEADER_BYTES {
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
    let bytes_remaining = bytes.len() - FRAME_HEADER_BYTES;
    if length as usize > bytes_remaining {
        return Err(FrameDefect::PayloadShort {
            length,
            bytes_remaining: bytes_remaining as u64,
        });
    }
    let payload = &bytes[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + length as usize];
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
    let index_max = index_expected.saturating_add(bytes_after / FRAME_HEADER_BYTES as u64);
    let offset_last = bytes.len().checked_sub(FRAME_HEADER_BYTES)?;
    (from + 1..=offset_last).find(|&offset| {
        let index = u64_at(bytes, offset + 8);
        (index_expected..=index_max).contains(&index) && decode(&bytes[offset..], record_bytes_max).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let mut buffer = Vec::new();
        encode(&mut buffer, 7, b"hello");
        encode(&mut buffer, 8, b"");
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
    fn layout_is_length_checksum_index_payload() {
        let mut buffer = Vec::new();
        encode(&mut buffer, 0x0102_0304_0506_0708, b"ab");
        assert_eq!(&buffer[0..4], &2u32.to_le_bytes());
        assert_eq!(&buffer[4..8], &checksum(0x0102_0304_0506_0708, b"ab").to_le_bytes());
        assert_eq!(&buffer[8..16], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&buffer[16..], b"ab");
    }

    #[test]
    fn defects() {
        let mut buffer = Vec::new();
        encode(&mut buffer, 1, b"payload");
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
        encode(&mut buffer, 5, b"xyz");
        assert_eq!(find_valid_after(&buffer, 0, 4, 64), Some(second));
        assert_eq!(find_valid_after(&buffer, 0, 6, 64), None);
        assert_eq!(find_valid_after(&buffer, second, 4, 64), None);
    }
}
