//! Confidential payment strings: what a payer hands the payee of a confidential output.
//!
//! A confidential output's value is hidden in a Pedersen commitment; the ledger holds only the
//! hash of (outpoint, owner, commitment). The payee can neither find the output nor learn its
//! value without the opening (value and blinding) the payer's wallet drew while proving, so the
//! payer hands it over, with where the output is.
//!
//! Format (version 1): `specie-cpay1` followed by lowercase hex of
//!
//! ```text
//! version u8 = 0x01 ‖ txid (32) ‖ index u64le ‖ owner (32) ‖ value u64le ‖ blinding (32)
//!   ‖ checksum (4) = first 4 bytes of SHA-256("specie-cpay1" ‖ everything before the checksum)
//! ```
//!
//! The commitment is not carried: it is the opening's (`value·G + blinding·H`), so a string
//! whose value or blinding was changed names an output whose UHS id the node does not hold.
//! The blinding must be a canonical scalar, so every output has exactly one string. The string
//! is as secret as the output's value: whoever reads it learns the amount (not how to spend it,
//! which takes the owner's key).

use std::fmt;
use std::str::FromStr;

use specie_codec::{put_u64, DecodeError, Encode, Reader};
use specie_confidential::{Opening, Scalar};
use specie_private_transactions::confidential::confidential_uhs_id;
use specie_private_transactions::ConfidentialInput;
use specie_transaction::{DecodeLimits, OutPoint, Txid, UhsId};
use thiserror::Error;

use specie_wallet::{checksum_with, strip_prefix_ignore_case, CHECKSUM_BYTES};

/// Every confidential payment string starts with this.
pub const CONFIDENTIAL_PAYMENT_PREFIX: &str = "specie-cpay1";
/// The only format version defined.
pub const CONFIDENTIAL_PAYMENT_VERSION: u8 = 1;
/// Outputs are numbered transparent first, then confidential: no valid transaction has an
/// output index at or past this.
pub const CONFIDENTIAL_OUTPUT_INDEX_LIMIT: u64 =
    DecodeLimits::OUTPUTS_MAX_DEFAULT + specie_confidential::OUTPUTS_MAX as u64;
const PAYLOAD_BYTES: usize = 1 + 32 + 8 + 32 + 8 + 32;
/// The exact length of every string: the format has no variable part.
pub const CONFIDENTIAL_PAYMENT_CHARS: usize = CONFIDENTIAL_PAYMENT_PREFIX.len() + 2 * (PAYLOAD_BYTES + CHECKSUM_BYTES);

/// Where a confidential output paid to someone is, and its opening.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ConfidentialPaymentString {
    pub txid: Txid,
    /// The output's index in its transaction (after the transparent outputs).
    pub index: u64,
    /// The witness program commitment of the payee's key.
    pub owner: [u8; 32],
    pub opening: Opening,
}

impl fmt::Debug for ConfidentialPaymentString {
    /// Leaves out the blinding: with it anyone who sees a log line learns the value, and the
    /// value itself is what a confidential payment hides.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfidentialPaymentString")
            .field("txid", &self.txid)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// Why a string is not a usable confidential payment string. No variant carries the string or
/// its opening.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ConfidentialPaymentStringError {
    #[error("a confidential payment string starts with `specie-cpay1`; this one does not")]
    MissingPrefix,
    #[error("a confidential payment string is {expected} characters long; this one is {chars}; copy it again")]
    WrongLength { chars: usize, expected: usize },
    #[error("the confidential payment string has a character at position {position} that is not a hex digit (0-9, a-f); copy it again")]
    NotHex { position: usize },
    #[error("the confidential payment string's checksum does not match: it was mistyped or damaged in copying; copy it again")]
    BadChecksum,
    #[error("this confidential payment string has format version {version}; this wallet understands version {supported} only")]
    UnsupportedVersion { version: u8, supported: u8 },
    #[error("the confidential payment string's contents are damaged: {0}")]
    Decode(#[from] DecodeError),
    #[error("the confidential payment string names output {index}, past any transaction's outputs")]
    IndexOutOfRange { index: u64 },
    #[error("the confidential payment string's blinding is not a canonical scalar")]
    NonCanonicalBlinding,
    #[error("the confidential payment string pays 0, which is no payment")]
    ZeroValue,
}

impl ConfidentialPaymentString {
    pub fn outpoint(&self) -> OutPoint {
        OutPoint {
            txid: self.txid,
            index: self.index,
        }
    }

    /// The commitment the opening makes, compressed.
    pub fn commitment(&self) -> [u8; 32] {
        self.opening.commitment().to_bytes()
    }

    /// The input that spends the output.
    pub fn to_input(&self) -> ConfidentialInput {
        ConfidentialInput {
            prevout: self.outpoint(),
            owner: self.owner,
            commitment: self.commitment(),
        }
    }

    /// The output's UHS id: present at the node = the payment happened, with this value.
    pub fn uhs_id(&self) -> UhsId {
        confidential_uhs_id(&self.outpoint(), &self.owner, &self.commitment())
    }

    fn payload(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(PAYLOAD_BYTES + CHECKSUM_BYTES);
        bytes.push(CONFIDENTIAL_PAYMENT_VERSION);
        self.txid.encode_to(&mut bytes);
        put_u64(&mut bytes, self.index);
        bytes.extend_from_slice(&self.owner);
        put_u64(&mut bytes, self.opening.value);
        bytes.extend_from_slice(self.opening.blinding.as_bytes());
        bytes
    }

    /// The `specie-cpay1…` string.
    pub fn encode(&self) -> String {
        let mut bytes = self.payload();
        let checksum = checksum_with(CONFIDENTIAL_PAYMENT_PREFIX, &bytes);
        bytes.extend_from_slice(&checksum);
        format!("{CONFIDENTIAL_PAYMENT_PREFIX}{}", hex::encode(bytes))
    }

    /// Parses a confidential payment string (surrounding whitespace and upper-case hex are
    /// tolerated, as for transparent payment strings). The length is checked first: the format
    /// is fixed-size, so nothing longer is ever decoded.
    pub fn parse(text: &str) -> Result<Self, ConfidentialPaymentStringError> {
        let text = text.trim();
        let chars = text.chars().count();
        if chars != CONFIDENTIAL_PAYMENT_CHARS {
            if strip_prefix_ignore_case(text, CONFIDENTIAL_PAYMENT_PREFIX).is_none() {
                return Err(ConfidentialPaymentStringError::MissingPrefix);
            }
            return Err(ConfidentialPaymentStringError::WrongLength {
                chars,
                expected: CONFIDENTIAL_PAYMENT_CHARS,
            });
        }
        let body = strip_prefix_ignore_case(text, CONFIDENTIAL_PAYMENT_PREFIX)
            .ok_or(ConfidentialPaymentStringError::MissingPrefix)?;
        if let Some(offset) = body.chars().position(|c| !c.is_ascii_hexdigit()) {
            return Err(ConfidentialPaymentStringError::NotHex {
                position: CONFIDENTIAL_PAYMENT_PREFIX.len() + offset + 1,
            });
        }
        // Every character is an ASCII hex digit and the count is even: this cannot fail.
        let bytes = hex::decode(body).map_err(|_| ConfidentialPaymentStringError::BadChecksum)?;
        let (payload, found_checksum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
        if checksum_with(CONFIDENTIAL_PAYMENT_PREFIX, payload) != found_checksum {
            return Err(ConfidentialPaymentStringError::BadChecksum);
        }
        Self::decode_payload(payload)
    }

    fn decode_payload(payload: &[u8]) -> Result<Self, ConfidentialPaymentStringError> {
        let mut reader = Reader::new(payload);
        let version = reader.read_u8("confidential payment version")?;
        if version != CONFIDENTIAL_PAYMENT_VERSION {
            return Err(ConfidentialPaymentStringError::UnsupportedVersion {
                version,
                supported: CONFIDENTIAL_PAYMENT_VERSION,
            });
        }
        let txid = Txid(reader.read_array("confidential payment txid")?);
        let index = reader.read_u64("confidential payment output index")?;
        let owner = reader.read_array("confidential payment owner")?;
        let value = reader.read_u64("confidential payment value")?;
        let blinding: [u8; 32] = reader.read_array("confidential payment blinding")?;
        reader.finish()?;
        if index >= CONFIDENTIAL_OUTPUT_INDEX_LIMIT {
            return Err(ConfidentialPaymentStringError::IndexOutOfRange { index });
        }
        let blinding = Option::<Scalar>::from(Scalar::from_canonical_bytes(blinding))
            .ok_or(ConfidentialPaymentStringError::NonCanonicalBlinding)?;
        if value == 0 {
            return Err(ConfidentialPaymentStringError::ZeroValue);
        }
        Ok(ConfidentialPaymentString {
            txid,
            index,
            owner,
            opening: Opening { value, blinding },
        })
    }
}

impl fmt::Display for ConfidentialPaymentString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for ConfidentialPaymentString {
    type Err = ConfidentialPaymentStringError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ConfidentialPaymentString::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use specie_vectors::{mutate, mutation};

    fn sample() -> ConfidentialPaymentString {
        ConfidentialPaymentString {
            txid: Txid([7; 32]),
            index: 2,
            owner: [9; 32],
            opening: Opening {
                value: 1500,
                blinding: Scalar::from(0x0102_0304_0506_0708u64),
            },
        }
    }

    /// The encoding is frozen: a change to it breaks strings already handed over.
    #[test]
    fn test_vector() {
        let expected = concat!(
            "specie-cpay1",
            "01",
            "0707070707070707070707070707070707070707070707070707070707070707",
            "0200000000000000",
            "0909090909090909090909090909090909090909090909090909090909090909",
            "dc05000000000000",
            "0807060504030201000000000000000000000000000000000000000000000000",
        );
        let text = sample().encode();
        assert_eq!(&text[..expected.len()], expected);
        assert_eq!(text.len(), CONFIDENTIAL_PAYMENT_CHARS);
        assert_eq!(&text[expected.len()..], "a32bc673", "checksum");
        assert_eq!(ConfidentialPaymentString::parse(&text), Ok(sample()));
    }

    #[test]
    fn round_trip_tolerates_case_and_whitespace() {
        let text = sample().encode();
        assert_eq!(
            ConfidentialPaymentString::parse(&format!("  {}\n", text.to_uppercase())),
            Ok(sample())
        );
        assert_eq!(sample().to_input().uhs_id(), sample().uhs_id());
    }

    #[test]
    fn every_truncation_is_refused() {
        let text = sample().encode();
        for end in 0..text.len() {
            assert!(ConfidentialPaymentString::parse(&text[..end]).is_err(), "cut at {end}");
        }
        assert!(ConfidentialPaymentString::parse(&format!("{text}00")).is_err());
    }

    fn with_checksum(payload: &[u8]) -> String {
        let mut bytes = payload.to_vec();
        bytes.extend_from_slice(&checksum_with(CONFIDENTIAL_PAYMENT_PREFIX, payload));
        format!("{CONFIDENTIAL_PAYMENT_PREFIX}{}", hex::encode(bytes))
    }

    #[test]
    fn well_checksummed_but_wrong_contents_are_refused() {
        let mut version = sample().payload();
        version[0] = 2;
        assert_eq!(
            ConfidentialPaymentString::parse(&with_checksum(&version)),
            Err(ConfidentialPaymentStringError::UnsupportedVersion {
                version: 2,
                supported: 1
            })
        );
        let mut far = sample();
        far.index = CONFIDENTIAL_OUTPUT_INDEX_LIMIT;
        assert_eq!(
            ConfidentialPaymentString::parse(&with_checksum(&far.payload())),
            Err(ConfidentialPaymentStringError::IndexOutOfRange { index: far.index })
        );
        let mut zero = sample();
        zero.opening.value = 0;
        assert_eq!(
            ConfidentialPaymentString::parse(&with_checksum(&zero.payload())),
            Err(ConfidentialPaymentStringError::ZeroValue)
        );
        let mut wide = sample().payload();
        let blinding_at = wide.len() - 32;
        wide[blinding_at..].copy_from_slice(&[0xff; 32]);
        assert_eq!(
            ConfidentialPaymentString::parse(&with_checksum(&wide)),
            Err(ConfidentialPaymentStringError::NonCanonicalBlinding)
        );
        assert_eq!(
            ConfidentialPaymentString::parse(&sample().encode().replacen("specie-cpay1", "specie-xpay1", 1)),
            Err(ConfidentialPaymentStringError::MissingPrefix)
        );
        let mut not_hex = sample().encode();
        not_hex.replace_range(20..21, "g");
        assert_eq!(
            ConfidentialPaymentString::parse(&not_hex),
            Err(ConfidentialPaymentStringError::NotHex { position: 21 })
        );
    }

    #[test]
    fn a_transparent_payment_string_is_not_a_confidential_one() {
        let transparent = specie_wallet::PaymentString::new(
            Txid([7; 32]),
            vec![specie_wallet::PaidOutput {
                index: 0,
                output: specie_transaction::Output {
                    witness_program_commitment: [9; 32],
                    value: 5,
                },
            }],
        );
        assert_eq!(
            ConfidentialPaymentString::parse(&transparent.encode()),
            Err(ConfidentialPaymentStringError::MissingPrefix)
        );
    }

    #[test]
    fn debug_output_hides_the_opening() {
        let debug = format!("{:?}", sample());
        assert!(!debug.contains("1500"), "{debug}");
        assert!(!debug.to_lowercase().contains("blinding"), "{debug}");
    }

    proptest! {
        #[test]
        fn any_payment_round_trips(
            txid in any::<[u8; 32]>(),
            index in 0..CONFIDENTIAL_OUTPUT_INDEX_LIMIT,
            owner in any::<[u8; 32]>(),
            value in 1u64..,
            blinding in any::<[u8; 32]>(),
        ) {
            let payment = ConfidentialPaymentString {
                txid: Txid(txid),
                index,
                owner,
                opening: Opening { value, blinding: Scalar::from_bytes_mod_order(blinding) },
            };
            prop_assert_eq!(ConfidentialPaymentString::parse(&payment.encode()), Ok(payment));
        }

        /// Any change to the bytes under the hex is refused (the checksum, the length or the
        /// checks behind them catch it), and never panics.
        #[test]
        fn mutated_bytes_are_refused(change in mutation(0u32..=u32::MAX)) {
            let mut bytes = sample().payload();
            bytes.extend_from_slice(&checksum_with(CONFIDENTIAL_PAYMENT_PREFIX, &sample().payload()));
            let original = bytes.clone();
            mutate(&mut bytes, &change);
            prop_assume!(bytes != original);
            let text = format!("{CONFIDENTIAL_PAYMENT_PREFIX}{}", hex::encode(&bytes));
            prop_assert!(ConfidentialPaymentString::parse(&text).is_err());
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,300}") {
            let _ = ConfidentialPaymentString::parse(&text);
            let _ = ConfidentialPaymentString::parse(&format!("{CONFIDENTIAL_PAYMENT_PREFIX}{text}"));
        }
    }
}
