//! The enrolment's messages as text a person can carry between the registration authority and a
//! wallet (by mail, a form, a QR code): a prefix naming the message, then lowercase hex of its
//! canonical encoding and a 4-byte checksum, the first bytes of SHA-256(prefix ‖ encoding). A
//! mistyped or truncated string fails the checksum rather than decoding to something else.

use sha2::{Digest, Sha256};
use specie_codec::{Decode, DecodeError, Encode};

use crate::authority::{Credential, EnrolmentChallenge, EnrolmentRequest};

pub const CHALLENGE_PREFIX: &str = "specie-enrol-challenge1";
pub const REQUEST_PREFIX: &str = "specie-enrol-request1";
pub const CREDENTIAL_PREFIX: &str = "specie-credential1";

const CHECKSUM_BYTES: usize = 4;

/// A message that travels as text, with its prefix.
pub trait Textual: Encode + Decode<Limits = ()> {
    const PREFIX: &'static str;

    fn to_text(&self) -> String {
        let mut bytes = self.encode();
        let checksum = checksum(Self::PREFIX, &bytes);
        bytes.extend_from_slice(&checksum);
        format!("{}{}", Self::PREFIX, hex::encode(bytes))
    }

    /// Parses the text (surrounding whitespace tolerated). The length is checked against the
    /// largest encoding before any hex is decoded.
    fn from_text(text: &str) -> Result<Self, TextError> {
        let body = text
            .trim()
            .strip_prefix(Self::PREFIX)
            .ok_or(TextError::Prefix { expected: Self::PREFIX })?;
        let bytes_max = Self::encoded_bytes_max(&()) + CHECKSUM_BYTES;
        if body.len() > 2 * bytes_max || body.len() % 2 != 0 || body.len() < 2 * CHECKSUM_BYTES {
            return Err(TextError::Length {
                chars: body.len(),
                max: 2 * bytes_max,
            });
        }
        let bytes = hex::decode(body).map_err(|_| TextError::NotHex)?;
        let (encoding, sum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
        if checksum(Self::PREFIX, encoding) != sum {
            return Err(TextError::Checksum);
        }
        Ok(Self::decode_exact(encoding)?)
    }
}

fn checksum(prefix: &str, bytes: &[u8]) -> [u8; CHECKSUM_BYTES] {
    let digest = Sha256::new()
        .chain_update(prefix.as_bytes())
        .chain_update(bytes)
        .finalize();
    let mut out = [0u8; CHECKSUM_BYTES];
    out.copy_from_slice(&digest[..CHECKSUM_BYTES]);
    out
}

/// Why a text does not hold the message expected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TextError {
    #[error("it does not start with {expected}")]
    Prefix { expected: &'static str },
    #[error("it has {chars} characters after the prefix (an even number up to {max} expected)")]
    Length { chars: usize, max: usize },
    #[error("it is not hex after the prefix")]
    NotHex,
    #[error("its checksum does not match: a character was changed or lost")]
    Checksum,
    #[error("it does not decode: {0}")]
    Decode(#[from] DecodeError),
}

impl Textual for EnrolmentChallenge {
    const PREFIX: &'static str = CHALLENGE_PREFIX;
}

impl Textual for EnrolmentRequest {
    const PREFIX: &'static str = REQUEST_PREFIX;
}

impl Textual for Credential {
    const PREFIX: &'static str = CREDENTIAL_PREFIX;
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;
    use crate::{EnrolmentId, Jurisdiction, RegistrationAuthority, UserSecret};

    #[test]
    fn enrolment_travels_as_text_and_a_changed_character_is_caught() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut ra = RegistrationAuthority::from_seed(&[1; 32]);
        let challenge = ra.challenge(EnrolmentId(5), Jurisdiction(2), &mut rng);
        let text = challenge.to_text();
        assert!(text.starts_with(CHALLENGE_PREFIX));
        assert_eq!(
            EnrolmentChallenge::from_text(&format!(" {text}\n")),
            Ok(challenge.clone())
        );
        let request = UserSecret::from_seed(&[2; 32]).enrolment_request(&ra.public_key(), &challenge, &mut rng);
        assert_eq!(EnrolmentRequest::from_text(&request.to_text()), Ok(request.clone()));
        let credential = ra.enrol(&request, &mut rng).unwrap();
        let text = credential.to_text();
        assert_eq!(Credential::from_text(&text), Ok(credential));
        // Every single changed hex digit is caught, by the checksum or the decoder.
        let prefix = CREDENTIAL_PREFIX.len();
        for at in prefix..text.len() {
            let mut changed = text.clone().into_bytes();
            changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
            assert!(
                Credential::from_text(std::str::from_utf8(&changed).unwrap()).is_err(),
                "at {at}"
            );
        }
        assert_eq!(
            Credential::from_text(&text[..text.len() - 2]),
            Err(TextError::Checksum),
            "a lost byte"
        );
        assert!(matches!(
            Credential::from_text(&challenge.to_text()),
            Err(TextError::Prefix { .. })
        ));
        let long = format!("{CREDENTIAL_PREFIX}{}", "00".repeat(4096));
        assert!(matches!(Credential::from_text(&long), Err(TextError::Length { .. })));
    }
}
