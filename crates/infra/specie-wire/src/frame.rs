//! The frame codec: pure, sans-IO. Bytes in, frames out; frames in, bytes out. No sockets, no
//! clocks, no tasks, so the same code runs under the tokio drivers, in tests and under a fuzzer.
//!
//! Layout (all integers little-endian; see `docs/wire-protocol.md`):
//!
//! ```text
//! offset size field
//!      0    2 magic        0x53 0x57 ("SW")
//!      2    1 version      0x01
//!      3    1 kind         1 request, 2 response, 3 error, 4 ping, 5 pong
//!      4    8 request_id   u64
//!     12    4 payload_len  u32
//!     16    4 crc32        CRC-32 (ISO-HDLC) of bytes 0..16 followed by the payload
//!     20    n payload
//! ```
//!
//! Decoding is the attack surface. [`FrameDecoder`] validates each header field as soon as its
//! bytes arrive and rejects a frame larger than `frame_bytes_max` from its length field alone,
//! before any payload is buffered for it, so a peer cannot make us reserve memory by claiming a
//! large payload. It never reserves capacity from a length read off the wire.

use specie_codec::{DecodeError, Encode, Reader};
use thiserror::Error;

/// The two bytes every frame starts with: "SW", for specie wire.
pub const MAGIC: [u8; 2] = *b"SW";
/// The only frame version this code speaks.
pub const VERSION: u8 = 1;
/// Bytes before the payload: magic 2, version 1, kind 1, request id 8, payload length 4, crc 4.
pub const HEADER_BYTES: usize = 20;
/// Bytes covered by the checksum before the payload (the header up to, excluding, the crc).
const CHECKSUMMED_HEADER_BYTES: usize = 16;
/// Offsets of the fields that [`FrameDecoder`] checks before the whole header has arrived.
const VERSION_OFFSET: usize = 2;
const KIND_OFFSET: usize = 3;
const PAYLOAD_LEN_OFFSET: usize = 12;
/// The largest frame the format can express: the length field is a `u32`.
pub const FRAME_BYTES_MAX_FORMAT: u64 = HEADER_BYTES as u64 + u32::MAX as u64;

/// What a frame is for. The byte values are part of the wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// A call; the receiver answers with a `Response` or an `Error` carrying the same id.
    Request = 1,
    /// The successful answer to the request with the same id.
    Response = 2,
    /// A failed request (payload: UTF-8 message). With request id 0 it concerns the whole
    /// connection, and the sender closes the connection after it.
    Error = 3,
    /// A liveness probe; answered with a `Pong` carrying the same id and payload.
    Ping = 4,
    Pong = 5,
}

impl FrameKind {
    pub fn from_u8(byte: u8) -> Option<FrameKind> {
        Some(match byte {
            1 => FrameKind::Request,
            2 => FrameKind::Response,
            3 => FrameKind::Error,
            4 => FrameKind::Ping,
            5 => FrameKind::Pong,
            _ => return None,
        })
    }

    pub fn to_u8(self) -> u8 {
        self as u8
    }
}

/// One message on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    /// Chosen by the caller, unique among its requests in flight on one connection; never 0,
    /// which error frames use to speak about the whole connection.
    pub request_id: u64,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn new(kind: FrameKind, request_id: u64, payload: Vec<u8>) -> Frame {
        Frame {
            kind,
            request_id,
            payload,
        }
    }

    /// Header plus payload, in bytes (what `frame_bytes_max` bounds).
    pub fn encoded_bytes(&self) -> u64 {
        frame_bytes(self.payload.len())
    }

    /// Decodes exactly one frame occupying all of `bytes`.
    pub fn decode_exact(bytes: &[u8], frame_bytes_max: usize) -> Result<Frame, FrameError> {
        let mut decoder = FrameDecoder::new(frame_bytes_max);
        decoder.feed(bytes);
        match decoder.next_frame()? {
            Some(frame) if decoder.buffered_bytes() == 0 => Ok(frame),
            Some(_) => Err(FrameError::Malformed(DecodeError::TrailingBytes {
                trailing_bytes: decoder.buffered_bytes(),
            })),
            None => Err(FrameError::Malformed(DecodeError::UnexpectedEnd {
                what: "frame",
                needed_bytes: decoder.bytes_needed() as u64,
                remaining_bytes: bytes.len(),
            })),
        }
    }
}

/// Bytes of a frame with a payload of `payload_bytes`; u64 so that it cannot overflow.
pub fn frame_bytes(payload_bytes: usize) -> u64 {
    HEADER_BYTES as u64 + payload_bytes as u64
}

/// Why bytes from a peer are not a valid frame. After any of these the stream is out of sync,
/// so the connection must be closed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("bad frame magic {found:02x?} (expected {MAGIC:02x?}): the peer does not speak the specie wire protocol")]
    BadMagic { found: [u8; 2] },
    #[error("unsupported frame version {version} (supported: {VERSION})")]
    UnsupportedVersion { version: u8 },
    #[error("unknown frame kind {kind:#04x}")]
    UnknownKind { kind: u8 },
    #[error("frame of {frame_bytes} bytes exceeds the limit of {frame_bytes_max} bytes")]
    TooLarge { frame_bytes: u64, frame_bytes_max: u64 },
    #[error("frame checksum mismatch: header says {expected:#010x}, content gives {computed:#010x}")]
    BadChecksum { expected: u32, computed: u32 },
    /// Only from [`Frame::decode_exact`]: the input is not exactly one frame.
    #[error("malformed frame: {0}")]
    Malformed(#[from] DecodeError),
}

/// The fixed part of a frame. Encoded with the workspace codec toolkit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameHeader {
    kind: FrameKind,
    request_id: u64,
    payload_len: u32,
    crc32: u32,
}

impl FrameHeader {
    /// Everything but the checksum, which is computed over these bytes and the payload.
    fn encode_checksummed_part(&self, out: &mut Vec<u8>) {
        MAGIC.encode_to(out);
        VERSION.encode_to(out);
        self.kind.to_u8().encode_to(out);
        self.request_id.encode_to(out);
        out.extend_from_slice(&self.payload_len.to_le_bytes());
    }

    /// Reads a header whose magic, version, kind and size the decoder has already checked.
    fn decode(bytes: &[u8]) -> Result<FrameHeader, FrameError> {
        let mut reader = Reader::new(bytes);
        let found = reader.read_array::<2>("frame magic")?;
        if found != MAGIC {
            return Err(FrameError::BadMagic { found });
        }
        let version = reader.read_u8("frame version")?;
        if version != VERSION {
            return Err(FrameError::UnsupportedVersion { version });
        }
        let kind_byte = reader.read_u8("frame kind")?;
        let kind = FrameKind::from_u8(kind_byte).ok_or(FrameError::UnknownKind { kind: kind_byte })?;
        let request_id = reader.read_u64("frame request id")?;
        let payload_len = u32::from_le_bytes(reader.read_array::<4>("frame payload length")?);
        let crc32 = u32::from_le_bytes(reader.read_array::<4>("frame checksum")?);
        Ok(FrameHeader {
            kind,
            request_id,
            payload_len,
            crc32,
        })
    }
}

fn checksum(checksummed_header: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(checksummed_header);
    hasher.update(payload);
    hasher.finalize()
}

/// Appends one frame to `out`, refusing a frame the peer would refuse (over `frame_bytes_max`).
pub fn encode_frame(
    kind: FrameKind,
    request_id: u64,
    payload: &[u8],
    frame_bytes_max: usize,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let bytes = frame_bytes(payload.len());
    let bytes_max = (frame_bytes_max as u64).min(FRAME_BYTES_MAX_FORMAT);
    if bytes > bytes_max {
        return Err(FrameError::TooLarge {
            frame_bytes: bytes,
            frame_bytes_max: bytes_max,
        });
    }
    // Fits: bytes <= FRAME_BYTES_MAX_FORMAT, so the payload length fits the u32 field.
    let header = FrameHeader {
        kind,
        request_id,
        payload_len: payload.len() as u32,
        crc32: 0,
    };
    let start = out.len();
    out.reserve(HEADER_BYTES + payload.len());
    header.encode_checksummed_part(out);
    let crc = checksum(&out[start..], payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    debug_assert_eq!((out.len() - start) as u64, bytes);
    Ok(())
}

/// Collects many frames into one buffer so a driver can send them with one write.
#[derive(Debug)]
pub struct FrameEncoder {
    buf: Vec<u8>,
    frames: usize,
    frame_bytes_max: usize,
}

impl FrameEncoder {
    pub fn new(frame_bytes_max: usize) -> FrameEncoder {
        FrameEncoder {
            buf: Vec::new(),
            frames: 0,
            frame_bytes_max,
        }
    }

    /// Appends one frame; on error nothing is appended.
    pub fn push(&mut self, kind: FrameKind, request_id: u64, payload: &[u8]) -> Result<(), FrameError> {
        encode_frame(kind, request_id, payload, self.frame_bytes_max, &mut self.buf)?;
        self.frames += 1;
        Ok(())
    }

    pub fn push_frame(&mut self, frame: &Frame) -> Result<(), FrameError> {
        self.push(frame.kind, frame.request_id, &frame.payload)
    }

    /// The encoded frames, back to back.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn buffered_bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn buffered_frames(&self) -> usize {
        self.frames
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// Forgets the buffered frames (after they were written) but keeps the allocation.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.frames = 0;
    }
}

/// Turns a byte stream into frames. Feed it whatever the socket returned, in any chunking, then
/// call [`FrameDecoder::next_frame`] until it returns `Ok(None)`.
///
/// Memory: the buffer holds at most one incomplete frame (at most `frame_bytes_max`, checked
/// from its header) plus whatever was fed since the last `next_frame`; a driver bounds the
/// latter by its read size. After an error the decoder is poisoned and repeats that error,
/// since the stream can no longer be trusted to be aligned on frame boundaries.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out as frames; dropped lazily to avoid a memmove per frame.
    start: usize,
    frame_bytes_max: u64,
    failed: Option<FrameError>,
}

/// Consumed bytes are dropped from the front of the buffer once there are this many, so that
/// shifting the remainder is amortised over many frames.
const COMPACT_AFTER_BYTES: usize = 64 * 1024;

impl FrameDecoder {
    pub fn new(frame_bytes_max: usize) -> FrameDecoder {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            frame_bytes_max: (frame_bytes_max as u64).min(FRAME_BYTES_MAX_FORMAT),
            failed: None,
        }
    }

    /// Appends received bytes. Cheap; all checking happens in [`FrameDecoder::next_frame`].
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            // The stream is already rejected; keeping more of it would only cost memory.
            return;
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start >= COMPACT_AFTER_BYTES {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Capacity of the internal buffer: lets tests show that a forged length allocated nothing.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether the decoder has rejected the stream.
    pub fn failed(&self) -> Option<&FrameError> {
        self.failed.as_ref()
    }

    /// Lower bound on the bytes still needed to complete the next frame (0 if one is ready).
    pub fn bytes_needed(&self) -> usize {
        let pending = &self.buf[self.start..];
        if pending.len() < HEADER_BYTES {
            return HEADER_BYTES - pending.len();
        }
        // u64: on a 32-bit target a forged length plus the header could overflow usize.
        let total = HEADER_BYTES as u64 + u64::from(u32::from_le_bytes(len_field(pending)));
        usize::try_from(total.saturating_sub(pending.len() as u64)).unwrap_or(usize::MAX)
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed, or the reason the stream
    /// is invalid. Header fields are checked as soon as they are buffered, so garbage is
    /// rejected after at most a few bytes and an oversized frame right after its length field.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        match self.try_next_frame() {
            Ok(frame) => Ok(frame),
            Err(error) => {
                self.failed = Some(error.clone());
                // Release the buffer: nothing in it will ever be decoded.
                self.buf = Vec::new();
                self.start = 0;
                Err(error)
            }
        }
    }

    fn try_next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let pending = &self.buf[self.start..];
        self.check_partial_header(pending)?;
        if pending.len() < HEADER_BYTES {
            return Ok(None);
        }
        let header = FrameHeader::decode(&pending[..HEADER_BYTES])?;
        let total = HEADER_BYTES + header.payload_len as usize;
        if pending.len() < total {
            return Ok(None);
        }
        let payload = &pending[HEADER_BYTES..total];
        let computed = checksum(&pending[..CHECKSUMMED_HEADER_BYTES], payload);
        if computed != header.crc32 {
            return Err(FrameError::BadChecksum {
                expected: header.crc32,
                computed,
            });
        }
        let frame = Frame {
            kind: header.kind,
            request_id: header.request_id,
            payload: payload.to_vec(),
        };
        self.start += total;
        Ok(Some(frame))
    }

    /// Checks whichever header fields have fully arrived.
    fn check_partial_header(&self, pending: &[u8]) -> Result<(), FrameError> {
        // Compare the magic byte by byte so that even one wrong byte is rejected at once.
        for (offset, &byte) in pending.iter().take(MAGIC.len()).enumerate() {
            if byte != MAGIC[offset] {
                let mut found = [0u8; 2];
                found[..pending.len().min(2)].copy_from_slice(&pending[..pending.len().min(2)]);
                return Err(FrameError::BadMagic { found });
            }
        }
        if let Some(&version) = pending.get(VERSION_OFFSET) {
            if version != VERSION {
                return Err(FrameError::UnsupportedVersion { version });
            }
        }
        if let Some(&kind) = pending.get(KIND_OFFSET) {
            if FrameKind::from_u8(kind).is_none() {
                return Err(FrameError::UnknownKind { kind });
            }
        }
        if pending.len() >= PAYLOAD_LEN_OFFSET + 4 {
            let frame_bytes = HEADER_BYTES as u64 + u64::from(u32::from_le_bytes(len_field(pending)));
            if frame_bytes > self.frame_bytes_max {
                return Err(FrameError::TooLarge {
                    frame_bytes,
                    frame_bytes_max: self.frame_bytes_max,
                });
            }
        }
        Ok(())
    }
}

/// The payload length field of a buffer holding at least 16 header bytes.
fn len_field(pending: &[u8]) -> [u8; 4] {
    let mut field = [0u8; 4];
    field.copy_from_slice(&pending[PAYLOAD_LEN_OFFSET..PAYLOAD_LEN_OFFSET + 4]);
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1024;

    fn encoded(kind: FrameKind, id: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(kind, id, payload, MAX, &mut out).unwrap();
        out
    }

    #[test]
    fn round_trip_one_frame() {
        let bytes = encoded(FrameKind::Request, 7, b"abc");
        assert_eq!(bytes.len(), HEADER_BYTES + 3);
        assert_eq!(&bytes[..4], &[0x53, 0x57, 0x01, 0x01]);
        let frame = Frame::decode_exact(&bytes, MAX).unwrap();
        assert_eq!(frame, Frame::new(FrameKind::Request, 7, b"abc".to_vec()));
    }

    #[test]
    fn byte_at_a_time() {
        let mut bytes = encoded(FrameKind::Response, 1, b"");
        bytes.extend(encoded(FrameKind::Error, 2, b"boom"));
        let mut decoder = FrameDecoder::new(MAX);
        let mut frames = Vec::new();
        for byte in bytes {
            decoder.feed(&[byte]);
            while let Some(frame) = decoder.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[1].payload, b"boom");
        assert_eq!(decoder.buffered_bytes(), 0);
    }

    #[test]
    fn header_errors_are_typed_and_early() {
        let mut decoder = FrameDecoder::new(MAX);
        decoder.feed(b"G");
        assert_eq!(decoder.next_frame(), Err(FrameError::BadMagic { found: [b'G', 0] }));
        // Poisoned: the same error again, even after more (valid-looking) input.
        decoder.feed(&encoded(FrameKind::Ping, 1, b""));
        assert!(matches!(decoder.next_frame(), Err(FrameError::BadMagic { .. })));

        let mut decoder = FrameDecoder::new(MAX);
        decoder.feed(&[0x53, 0x57, 0x02]);
        assert_eq!(decoder.next_frame(), Err(FrameError::UnsupportedVersion { version: 2 }));

        let mut decoder = FrameDecoder::new(MAX);
        decoder.feed(&[0x53, 0x57, 0x01, 0x09]);
        assert_eq!(decoder.next_frame(), Err(FrameError::UnknownKind { kind: 9 }));
    }

    #[test]
    fn checksum_covers_header_and_payload() {
        for flip in [4, 12, HEADER_BYTES + 1] {
            let mut bytes = encoded(FrameKind::Request, 5, b"payload");
            bytes[flip] ^= 0x01;
            let err = Frame::decode_exact(&bytes, MAX).unwrap_err();
            assert!(matches!(err, FrameError::BadChecksum { .. }), "flip at {flip}: {err:?}");
        }
    }

    #[test]
    fn too_large_is_refused_by_encoder_and_decoder() {
        let payload = vec![0u8; MAX - HEADER_BYTES + 1];
        let mut out = Vec::new();
        assert!(matches!(
            encode_frame(FrameKind::Request, 1, &payload, MAX, &mut out),
            Err(FrameError::TooLarge { frame_bytes, .. }) if frame_bytes == MAX as u64 + 1
        ));
        assert!(out.is_empty());
        encode_frame(FrameKind::Request, 1, &payload[1..], MAX, &mut out).unwrap();
        let bytes = encoded(FrameKind::Request, 1, &payload[1..]);
        assert_eq!(
            Frame::decode_exact(&bytes, MAX).unwrap().payload.len(),
            MAX - HEADER_BYTES
        );
        assert!(matches!(
            Frame::decode_exact(&bytes, MAX - 1),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn decode_exact_wants_exactly_one_frame() {
        let bytes = encoded(FrameKind::Pong, 3, b"x");
        assert!(matches!(
            Frame::decode_exact(&bytes[..bytes.len() - 1], MAX),
            Err(FrameError::Malformed(DecodeError::UnexpectedEnd {
                needed_bytes: 1,
                ..
            }))
        ));
        let mut two = bytes.clone();
        two.push(0x53);
        assert!(matches!(
            Frame::decode_exact(&two, MAX),
            Err(FrameError::Malformed(DecodeError::TrailingBytes { trailing_bytes: 1 }))
        ));
    }

    #[test]
    fn encoder_batches_frames_into_one_buffer() {
        let mut encoder = FrameEncoder::new(MAX);
        encoder.push(FrameKind::Request, 1, b"a").unwrap();
        encoder
            .push_frame(&Frame::new(FrameKind::Request, 2, b"bc".to_vec()))
            .unwrap();
        assert!(encoder.push(FrameKind::Request, 3, &[0u8; MAX]).is_err());
        assert_eq!(encoder.buffered_frames(), 2);
        assert_eq!(encoder.buffered_bytes(), 2 * HEADER_BYTES + 3);
        let mut decoder = FrameDecoder::new(MAX);
        decoder.feed(encoder.as_bytes());
        assert_eq!(decoder.next_frame().unwrap().unwrap().request_id, 1);
        assert_eq!(decoder.next_frame().unwrap().unwrap().payload, b"bc");
        assert_eq!(decoder.next_frame(), Ok(None));
        encoder.clear();
        assert!(encoder.is_empty());
    }
}
