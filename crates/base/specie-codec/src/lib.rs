//! specie's one byte-encoding toolkit: the reference (OpenCBDC) serialization, and the bounded
//! reader every decoder in the workspace uses. No I/O, no workspace dependencies.
//!
//! Rules of the reference format (see `docs/transaction-format.md`): integers are little-endian
//! and fixed width, fixed arrays are raw bytes, and every variable-length collection is a `u64`
//! little-endian count followed by its elements. Formats of specie's own (the Raft codec, see
//! `docs/wire-protocol.md`) use `u32` counts and lengths: [`Reader::read_u32_count`].
//!
//! Decoding is the attack surface: every byte here may come from an adversary. So a [`Reader`]
//! never trusts a count. [`Reader::read_count`] checks a claimed element count against an
//! explicit maximum *and* against the bytes actually left (count × smallest possible element)
//! before anything is allocated, which bounds every allocation by a small multiple of the input
//! length. Errors are typed ([`DecodeError`]) and decoding never panics.
//!
//! Other crates reuse [`Encode`], [`Decode`] and [`Reader`] for their own record formats.

use thiserror::Error;

/// Bytes in an encoded `u64` (counts, values, indices).
pub const U64_BYTES: usize = 8;

/// Why a byte string could not be decoded. Each variant names what was being read so that a
/// person reading a log line can tell which field of which record was wrong.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error(
        "unexpected end of input while reading {what}: needed {needed_bytes} bytes but only {remaining_bytes} remain"
    )]
    UnexpectedEnd {
        what: &'static str,
        needed_bytes: u64,
        remaining_bytes: usize,
    },
    /// A collection claims more elements than this decoder accepts.
    #[error("{what}: count {count} exceeds the limit of {max}")]
    CountTooLarge { what: &'static str, count: u64, max: u64 },
    /// A collection claims more elements than the remaining input could possibly hold. Checked
    /// before allocation so a forged count cannot make us reserve memory.
    #[error("{what}: count {count} needs at least {min_element_bytes} bytes per element, but only {remaining_bytes} bytes remain")]
    CountExceedsInput {
        what: &'static str,
        count: u64,
        min_element_bytes: usize,
        remaining_bytes: usize,
    },
    /// The value decoded completely but bytes were left over; a canonical encoding has none.
    #[error("{trailing_bytes} trailing bytes after the end of the encoded value")]
    TrailingBytes { trailing_bytes: usize },
    /// The whole input is larger than the limit for this kind of record.
    #[error("{what} is {bytes} bytes, more than the limit of {bytes_max} bytes")]
    TooLarge {
        what: &'static str,
        bytes: usize,
        bytes_max: usize,
    },
    /// A record that must start with a magic number starts with something else.
    #[error("{what}: bad magic bytes {found_hex} (expected {expected_hex})")]
    BadMagic {
        what: &'static str,
        found_hex: String,
        expected_hex: String,
    },
    /// A known record format with a version this code does not understand.
    #[error("{what}: unsupported version {version} (supported: {supported})")]
    UnsupportedVersion {
        what: &'static str,
        version: u8,
        supported: u8,
    },
    /// A kind / variant / tag byte that is not defined.
    #[error("{what}: unknown kind {kind:#04x}")]
    UnknownKind { what: &'static str, kind: u8 },
    /// The bytes decode, but not in the one canonical form (e.g. unsorted map keys), so
    /// re-encoding would not reproduce them.
    #[error("{what}: not canonical: {reason}")]
    NonCanonical { what: &'static str, reason: &'static str },
    /// The bytes are well formed, but the value they carry is not allowed (out of range, out
    /// of order, inconsistent with another field).
    #[error("malformed {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
}

/// A value with a canonical byte encoding.
pub trait Encode {
    /// Appends the canonical encoding of `self` to `out`.
    fn encode_to(&self, out: &mut Vec<u8>);

    /// The canonical encoding of `self` as a fresh buffer.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_to(&mut out);
        out
    }
}

/// A value that can be decoded from untrusted bytes within explicit limits.
pub trait Decode: Sized {
    /// The bounds this decoder enforces (counts, sizes). `()` for fixed-size values.
    type Limits: Default;

    /// Reads one value from `reader`, leaving the reader just past it.
    fn decode_from(reader: &mut Reader<'_>, limits: &Self::Limits) -> Result<Self, DecodeError>;

    /// The largest complete encoding accepted by [`Decode::decode_exact_with`], in bytes.
    fn encoded_bytes_max(limits: &Self::Limits) -> usize;

    /// A short name for error messages ("transaction", "compact transaction", …).
    const WHAT: &'static str;

    /// Decodes exactly one value occupying all of `bytes`; trailing bytes are an error.
    fn decode_exact_with(bytes: &[u8], limits: &Self::Limits) -> Result<Self, DecodeError> {
        decode_bounded(Self::WHAT, bytes, Self::encoded_bytes_max(limits), |reader| {
            Self::decode_from(reader, limits)
        })
    }

    /// [`Decode::decode_exact_with`] under the default limits.
    fn decode_exact(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_exact_with(bytes, &Self::Limits::default())
    }
}

/// Decodes exactly one value from all of `bytes` with `decode`, refusing more than `bytes_max`
/// bytes before reading any, and trailing bytes after.
pub fn decode_bounded<T>(
    what: &'static str,
    bytes: &[u8],
    bytes_max: usize,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    if bytes.len() > bytes_max {
        return Err(DecodeError::TooLarge {
            what,
            bytes: bytes.len(),
            bytes_max,
        });
    }
    let mut reader = Reader::new(bytes);
    let value = decode(&mut reader)?;
    reader.finish()?;
    Ok(value)
}

/// A cursor over an untrusted byte slice. Every read is bounds-checked; none panics.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, offset: 0 }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        debug_assert!(self.offset <= self.bytes.len());
        self.bytes.len() - self.offset
    }

    /// The unconsumed bytes, without consuming them (e.g. to test for a magic prefix).
    pub fn peek_rest(&self) -> &'a [u8] {
        &self.bytes[self.offset..]
    }

    /// Consumes `len` bytes.
    pub fn read_bytes(&mut self, what: &'static str, len: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.remaining();
        if len > remaining {
            return Err(DecodeError::UnexpectedEnd {
                what,
                needed_bytes: len as u64,
                remaining_bytes: remaining,
            });
        }
        let start = self.offset;
        self.offset += len;
        Ok(&self.bytes[start..self.offset])
    }

    /// Consumes a fixed-size array (hash, key, signature): raw bytes, no prefix.
    pub fn read_array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let slice = self.read_bytes(what, N)?;
        let mut array = [0u8; N];
        array.copy_from_slice(slice);
        Ok(array)
    }

    pub fn read_u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let [byte] = self.read_array::<1>(what)?;
        Ok(byte)
    }

    /// A boolean as one byte, 0 or 1; anything else is not canonical.
    pub fn read_bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.read_u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::NonCanonical {
                what,
                reason: "a flag must be 0 or 1",
            }),
        }
    }

    /// A little-endian `u32`.
    pub fn read_u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.read_array::<4>(what)?))
    }

    /// A little-endian `u64`.
    pub fn read_u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.read_array::<U64_BYTES>(what)?))
    }

    /// Reads a `u64` element count and checks it before anything is allocated:
    /// `count <= max` and `count * min_element_bytes <= remaining()`. `min_element_bytes` is
    /// the smallest encoding one element can have; pass at least 1 so that even empty-looking
    /// elements cost input bytes (a zero would let a count of 2^63 through to the allocator).
    pub fn read_count(&mut self, what: &'static str, max: u64, min_element_bytes: usize) -> Result<usize, DecodeError> {
        let count = self.read_u64(what)?;
        self.check_count(what, count, max, min_element_bytes)
    }

    fn check_count(
        &self,
        what: &'static str,
        count: u64,
        max: u64,
        min_element_bytes: usize,
    ) -> Result<usize, DecodeError> {
        debug_assert!(min_element_bytes >= 1, "min_element_bytes must be at least 1");
        if count > max {
            return Err(DecodeError::CountTooLarge { what, count, max });
        }
        let remaining = self.remaining();
        let needed = u128::from(count) * (min_element_bytes.max(1) as u128);
        if needed > remaining as u128 {
            return Err(DecodeError::CountExceedsInput {
                what,
                count,
                min_element_bytes,
                remaining_bytes: remaining,
            });
        }
        // Fits: count <= remaining, and remaining is a usize.
        Ok(count as usize)
    }

    /// [`Reader::read_count`] for formats whose counts are one byte.
    pub fn read_u8_count(
        &mut self,
        what: &'static str,
        max: u64,
        min_element_bytes: usize,
    ) -> Result<usize, DecodeError> {
        let count = u64::from(self.read_u8(what)?);
        self.check_count(what, count, max, min_element_bytes)
    }

    /// [`Reader::read_count`] for formats whose counts are a little-endian `u32`.
    pub fn read_u32_count(
        &mut self,
        what: &'static str,
        max: u64,
        min_element_bytes: usize,
    ) -> Result<usize, DecodeError> {
        let count = u64::from(self.read_u32(what)?);
        self.check_count(what, count, max, min_element_bytes)
    }

    /// Reads a counted vector, element by element, after [`Reader::read_count`] has bounded it.
    pub fn read_vec<T>(
        &mut self,
        what: &'static str,
        max: u64,
        min_element_bytes: usize,
        mut read_element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let count = self.read_count(what, max, min_element_bytes)?;
        let mut elements = Vec::with_capacity(count);
        for _ in 0..count {
            elements.push(read_element(self)?);
        }
        Ok(elements)
    }

    /// A byte vector: `u64` length, then the bytes (the reference's `std::vector<std::byte>`).
    pub fn read_byte_vec(&mut self, what: &'static str, bytes_max: u64) -> Result<&'a [u8], DecodeError> {
        let len = self.read_count(what, bytes_max, 1)?;
        self.read_bytes(what, len)
    }

    /// Reads a version byte, refusing any but `supported`.
    pub fn read_version(&mut self, what: &'static str, supported: u8) -> Result<(), DecodeError> {
        match self.read_u8(what)? {
            version if version == supported => Ok(()),
            version => Err(DecodeError::UnsupportedVersion {
                what,
                version,
                supported,
            }),
        }
    }

    /// Succeeds only if every byte was consumed.
    pub fn finish(self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            trailing_bytes => Err(DecodeError::TrailingBytes { trailing_bytes }),
        }
    }
}

/// Appends a little-endian `u32`.
pub fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a little-endian `u64`.
pub fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a collection length as the reference's `u64` count.
pub fn put_count(out: &mut Vec<u8>, count: usize) {
    // usize is at most 64 bits on every platform Rust supports for this crate.
    put_u64(out, count as u64);
}

/// Appends a byte vector: `u64` length, then the bytes.
pub fn put_byte_vec(out: &mut Vec<u8>, bytes: &[u8]) {
    put_count(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Appends a counted vector of encodable elements.
pub fn put_vec<T: Encode>(out: &mut Vec<u8>, elements: &[T]) {
    put_count(out, elements.len());
    for element in elements {
        element.encode_to(out);
    }
}

impl Encode for u8 {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
}

impl Encode for u64 {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_u64(out, *self);
    }
}

impl<const N: usize> Encode for [u8; N] {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_vec(out, self);
    }
}

impl<T: Encode> Encode for [T] {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_vec(out, self);
    }
}

impl Decode for u64 {
    type Limits = ();
    const WHAT: &'static str = "u64";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        reader.read_u64(Self::WHAT)
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        U64_BYTES
    }
}

impl<const N: usize> Decode for [u8; N] {
    type Limits = ();
    const WHAT: &'static str = "byte array";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        reader.read_array::<N>(Self::WHAT)
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        N
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_count_is_rejected_before_allocation() {
        let mut bytes = u64::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 10]);
        let mut reader = Reader::new(&bytes);
        let err = reader.read_count("things", u64::MAX, 1).unwrap_err();
        assert_eq!(
            err,
            DecodeError::CountExceedsInput {
                what: "things",
                count: u64::MAX,
                min_element_bytes: 1,
                remaining_bytes: 10
            }
        );
        let mut reader = Reader::new(&bytes);
        let err = reader.read_count("things", 1000, 1).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::CountTooLarge {
                count: u64::MAX,
                max: 1000,
                ..
            }
        ));
    }

    #[test]
    fn count_times_element_size_is_checked() {
        // 3 elements of at least 40 bytes need 120 bytes; 119 are present.
        let mut bytes = 3u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 119]);
        let err = Reader::new(&bytes).read_count("outputs", 10, 40).unwrap_err();
        assert!(matches!(err, DecodeError::CountExceedsInput { count: 3, .. }));
        bytes.push(0);
        assert_eq!(Reader::new(&bytes).read_count("outputs", 10, 40), Ok(3));
    }

    #[test]
    fn short_reads_report_needed_and_remaining() {
        let err = Reader::new(&[1, 2, 3]).read_u64("value").unwrap_err();
        assert_eq!(
            err,
            DecodeError::UnexpectedEnd {
                what: "value",
                needed_bytes: 8,
                remaining_bytes: 3
            }
        );
        assert_eq!(
            err.to_string(),
            "unexpected end of input while reading value: needed 8 bytes but only 3 remain"
        );
    }

    #[test]
    fn decode_exact_rejects_trailing_bytes() {
        assert_eq!(u64::decode_exact(&[7, 0, 0, 0, 0, 0, 0, 0]), Ok(7));
        // Nine bytes exceed the 8-byte maximum for a u64, so the size check fires first.
        assert!(matches!(
            u64::decode_exact(&[7, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::TooLarge { .. })
        ));
        let mut reader = Reader::new(&[7, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(reader.read_u64("v"), Ok(7));
        assert_eq!(reader.finish(), Err(DecodeError::TrailingBytes { trailing_bytes: 1 }));
    }

    #[test]
    fn byte_vec_round_trip() {
        let mut out = Vec::new();
        put_byte_vec(&mut out, b"abc");
        assert_eq!(out, [3, 0, 0, 0, 0, 0, 0, 0, b'a', b'b', b'c']);
        let mut reader = Reader::new(&out);
        assert_eq!(reader.read_byte_vec("w", 3), Ok(&b"abc"[..]));
        assert_eq!(reader.finish(), Ok(()));
        assert!(matches!(
            Reader::new(&out).read_byte_vec("w", 2),
            Err(DecodeError::CountTooLarge { .. })
        ));
    }
}
