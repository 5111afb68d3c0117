//! Unlinkable payment strings: what a payer hands the payee of an unlinkable token.
//!
//! A token is a commitment to the payee's enrolment id, the value and a serial seed under
//! blindings the payer drew; the ledger holds only its UHS id, so the payee needs the opening to
//! find the token, to have it certified and to spend it.
//!
//! Format (version 1): `specie-upay1` followed by lowercase hex of
//!
//! ```text
//! version u8 = 0x01 ‖ txid (32) ‖ index u64le ‖ token opening (specie-credential's encoding:
//!   owner, value, serial seed and blindings) ‖ checksum (4) = first 4 bytes of
//!   SHA-256("specie-upay1" ‖ everything before it)
//! ```
//!
//! The token is not carried: it is the opening's, so a changed field names a token whose UHS id
//! the node does not hold. The string is as secret as the token: whoever reads it learns the
//! value and can recognise the token in the ledger (not spend it, which takes the owner's
//! credential, nor link its spend, whose serial number is keyed with the owner's secret).

use std::fmt;

use specie_codec::{put_u64, Decode, DecodeError, Encode, Reader};
use specie_credential::unlinkable::{Token, TokenOpening, TOKEN_OPENING_BYTES};
use specie_credential::EnrolmentId;
use specie_private_transactions::unlinkable::token_uhs_id;
use specie_transaction::{OutPoint, Txid, UhsId};
use thiserror::Error;

use crate::confidential_payment::CONFIDENTIAL_OUTPUT_INDEX_LIMIT;
use crate::fixed_string::{self, Gate};

pub const UNLINKABLE_PAYMENT_PREFIX: &str = "specie-upay1";
pub const UNLINKABLE_PAYMENT_VERSION: u8 = 1;
const PAYLOAD_BYTES: usize = 1 + 32 + 8 + TOKEN_OPENING_BYTES;
/// The exact length of every string.
pub const UNLINKABLE_PAYMENT_CHARS: usize = fixed_string::chars(UNLINKABLE_PAYMENT_PREFIX, PAYLOAD_BYTES);

/// Where an unlinkable token paid to someone is, and what opens it.
#[derive(Clone, PartialEq, Eq)]
pub struct UnlinkablePaymentString {
    pub txid: Txid,
    pub index: u64,
    pub opening: TokenOpening,
}

impl fmt::Debug for UnlinkablePaymentString {
    /// Leaves out the opening: a log line must not reveal the owner or the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnlinkablePaymentString")
            .field("txid", &self.txid)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// Why a string is not a usable unlinkable payment string. No variant carries the string.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum UnlinkablePaymentStringError {
    #[error("an unlinkable payment string starts with `specie-upay1`; this one does not")]
    MissingPrefix,
    #[error("an unlinkable payment string is {expected} characters long; this one is {chars}; copy it again")]
    WrongLength { chars: usize, expected: usize },
    #[error("the unlinkable payment string is not hex after its prefix; copy it again")]
    NotHex,
    #[error(
        "the unlinkable payment string's checksum does not match: it was mistyped or damaged in copying; copy it again"
    )]
    BadChecksum,
    #[error(
        "this unlinkable payment string has format version {version}; this wallet understands version {supported} only"
    )]
    UnsupportedVersion { version: u8, supported: u8 },
    #[error("the unlinkable payment string's contents are damaged: {0}")]
    Decode(#[from] DecodeError),
    #[error("the unlinkable payment string names output {index}, past any transaction's outputs")]
    IndexOutOfRange { index: u64 },
    #[error("the unlinkable payment string pays 0, which is no payment")]
    ZeroValue,
}

impl From<Gate> for UnlinkablePaymentStringError {
    fn from(gate: Gate) -> Self {
        match gate {
            Gate::MissingPrefix => Self::MissingPrefix,
            Gate::WrongLength { chars, expected } => Self::WrongLength { chars, expected },
            Gate::NotHex => Self::NotHex,
            Gate::BadChecksum => Self::BadChecksum,
        }
    }
}

impl UnlinkablePaymentString {
    pub fn outpoint(&self) -> OutPoint {
        OutPoint {
            txid: self.txid,
            index: self.index,
        }
    }

    pub fn token(&self) -> Token {
        self.opening.token()
    }

    pub fn payee(&self) -> EnrolmentId {
        self.opening.owner()
    }

    pub fn value(&self) -> u64 {
        self.opening.value()
    }

    /// The token's UHS id: present at the node = the token was created there, to this owner,
    /// with this value (it stays after a spend: serial numbers mark spends).
    pub fn uhs_id(&self) -> UhsId {
        token_uhs_id(&self.outpoint(), &self.token())
    }

    fn payload(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(PAYLOAD_BYTES + specie_wallet::CHECKSUM_BYTES);
        bytes.push(UNLINKABLE_PAYMENT_VERSION);
        self.txid.encode_to(&mut bytes);
        put_u64(&mut bytes, self.index);
        self.opening.encode_to(&mut bytes);
        bytes
    }

    /// The `specie-upay1…` string.
    pub fn encode(&self) -> String {
        fixed_string::encode(UNLINKABLE_PAYMENT_PREFIX, self.payload())
    }

    /// Parses a string (surrounding whitespace and upper-case hex tolerated). Fixed size: the
    /// length is checked before anything is decoded.
    pub fn parse(text: &str) -> Result<Self, UnlinkablePaymentStringError> {
        let payload = fixed_string::open(text, UNLINKABLE_PAYMENT_PREFIX, UNLINKABLE_PAYMENT_CHARS)?;
        let mut reader = Reader::new(&payload);
        let version = reader.read_u8("unlinkable payment version")?;
        if version != UNLINKABLE_PAYMENT_VERSION {
            return Err(UnlinkablePaymentStringError::UnsupportedVersion {
                version,
                supported: UNLINKABLE_PAYMENT_VERSION,
            });
        }
        let txid = Txid(reader.read_array("unlinkable payment txid")?);
        let index = reader.read_u64("unlinkable payment output index")?;
        let opening = TokenOpening::decode_from(&mut reader, &())?;
        reader.finish()?;
        if index >= CONFIDENTIAL_OUTPUT_INDEX_LIMIT {
            return Err(UnlinkablePaymentStringError::IndexOutOfRange { index });
        }
        if opening.value() == 0 {
            return Err(UnlinkablePaymentStringError::ZeroValue);
        }
        Ok(UnlinkablePaymentString { txid, index, opening })
    }
}

impl fmt::Display for UnlinkablePaymentString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn sample() -> UnlinkablePaymentString {
        UnlinkablePaymentString {
            txid: Txid([7; 32]),
            index: 1,
            opening: TokenOpening::random(EnrolmentId(42), 1500, &mut StdRng::seed_from_u64(5)),
        }
    }

    #[test]
    fn it_round_trips_and_names_the_token() {
        let payment = sample();
        let text = payment.encode();
        assert_eq!(text.len(), UNLINKABLE_PAYMENT_CHARS);
        let shouted = text.to_uppercase().replacen("SPECIE-UPAY1", "specie-upay1", 1);
        assert_eq!(
            UnlinkablePaymentString::parse(&format!(" {shouted}\n")),
            Ok(payment.clone())
        );
        assert_eq!(
            payment.uhs_id(),
            token_uhs_id(&payment.outpoint(), &payment.opening.token())
        );
        assert!(!format!("{payment:?}").contains("1500"), "Debug hides the value");
    }

    #[test]
    fn damaged_strings_are_refused() {
        let text = sample().encode();
        assert_eq!(
            UnlinkablePaymentString::parse(&text[..text.len() - 1]),
            Err(UnlinkablePaymentStringError::WrongLength {
                chars: UNLINKABLE_PAYMENT_CHARS - 1,
                expected: UNLINKABLE_PAYMENT_CHARS
            })
        );
        assert_eq!(
            UnlinkablePaymentString::parse(&text.replacen("specie-upay1", "specie-apay1", 1)),
            Err(UnlinkablePaymentStringError::MissingPrefix)
        );
        let zero = UnlinkablePaymentString {
            opening: TokenOpening::random(EnrolmentId(42), 0, &mut StdRng::seed_from_u64(6)),
            ..sample()
        };
        assert_eq!(
            UnlinkablePaymentString::parse(&zero.encode()),
            Err(UnlinkablePaymentStringError::ZeroValue)
        );
    }

    proptest! {
        #[test]
        fn any_changed_character_is_refused_or_names_another_token(at in 12usize..UNLINKABLE_PAYMENT_CHARS, digit in 0u8..16) {
            let payment = sample();
            let mut text = payment.encode().into_bytes();
            let replacement = b"0123456789abcdef"[digit as usize];
            prop_assume!(text[at] != replacement);
            text[at] = replacement;
            if let Ok(parsed) = UnlinkablePaymentString::parse(std::str::from_utf8(&text).unwrap()) {
                prop_assert_ne!(parsed.uhs_id(), payment.uhs_id());
            }
        }
    }
}
