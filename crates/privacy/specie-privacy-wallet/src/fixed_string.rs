//! What the fixed-length private payment strings (`specie-apay1…`, `specie-upay1…`) share: a
//! prefix, lowercase hex of a payload and its 4-byte checksum (`specie_wallet::checksum_with`,
//! the prefix hashed in), the length checked before anything is decoded.

use specie_wallet::{checksum_with, strip_prefix_ignore_case, CHECKSUM_BYTES};

/// Why a string does not pass the gate; each string's error says it in its own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    MissingPrefix,
    WrongLength { chars: usize, expected: usize },
    NotHex,
    BadChecksum,
}

/// The characters of a string whose payload is `payload_bytes` long.
pub(crate) const fn chars(prefix: &str, payload_bytes: usize) -> usize {
    prefix.len() + 2 * (payload_bytes + CHECKSUM_BYTES)
}

/// `prefix`, then hex of `payload` and its checksum.
pub(crate) fn encode(prefix: &str, mut payload: Vec<u8>) -> String {
    let checksum = checksum_with(prefix, &payload);
    payload.extend_from_slice(&checksum);
    format!("{prefix}{}", hex::encode(payload))
}

/// The payload of `text` (surrounding whitespace and upper-case hex tolerated), if it has the
/// prefix, exactly `chars` characters, hex after the prefix and a checksum that matches.
pub(crate) fn open(text: &str, prefix: &str, chars: usize) -> Result<Vec<u8>, Gate> {
    let text = text.trim();
    let body = strip_prefix_ignore_case(text, prefix).ok_or(Gate::MissingPrefix)?;
    let found = text.chars().count();
    if found != chars {
        return Err(Gate::WrongLength {
            chars: found,
            expected: chars,
        });
    }
    let mut bytes = hex::decode(body).map_err(|_| Gate::NotHex)?;
    let checksum = bytes.split_off(bytes.len() - CHECKSUM_BYTES);
    if checksum_with(prefix, &bytes)[..] != checksum[..] {
        return Err(Gate::BadChecksum);
    }
    Ok(bytes)
}
