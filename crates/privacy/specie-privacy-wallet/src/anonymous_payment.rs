//! Anonymous payment strings: what a payer hands the payee of an anonymous output.
//!
//! An anonymous output's owner is a commitment to the payee's enrolment id under a blinding the
//! payer drew; its value is in clear or hidden in a Pedersen commitment. The ledger holds only the
//! hash of (outpoint, owner, value), so the payee needs the blinding (and a hidden value's
//! opening) to find the output and to spend it.
//!
//! Format (version 1): `specie-apay1` followed by lowercase hex of
//!
//! ```text
//! version u8 = 0x01 ‖ txid (32) ‖ index u64le ‖ owner opening (42, specie-credential's encoding:
//!   enrolment id and blinding) ‖ value u64le ‖ hidden u8 (0 or 1) ‖ value blinding (32, zero in
//!   clear) ‖ checksum (4) = first 4 bytes of SHA-256("specie-apay1" ‖ everything before it)
//! ```
//!
//! Neither commitment is carried: both are the openings', so a changed field names an output
//! whose UHS id the node does not hold. The string is as secret as the output: whoever reads it
//! learns the value and can recognise the owner's output (not spend it, which takes the owner's
//! credential).

use std::fmt;

use specie_codec::{put_u64, Decode, DecodeError, Encode, Reader};
use specie_confidential::{Opening, Scalar};
use specie_credential::{EnrolmentId, OwnerOpening, OWNER_OPENING_BYTES};
use specie_private_transactions::anonymous::anonymous_uhs_id;
use specie_private_transactions::{AnonymousInput, AnonymousValue};
use specie_transaction::{OutPoint, Txid, UhsId};
use thiserror::Error;

use crate::confidential_payment::CONFIDENTIAL_OUTPUT_INDEX_LIMIT;
use crate::fixed_string::{self, Gate};
use specie_wallet::CHECKSUM_BYTES;

pub const ANONYMOUS_PAYMENT_PREFIX: &str = "specie-apay1";
pub const ANONYMOUS_PAYMENT_VERSION: u8 = 1;
const PAYLOAD_BYTES: usize = 1 + 32 + 8 + OWNER_OPENING_BYTES + 8 + 1 + 32;
/// The exact length of every string.
pub const ANONYMOUS_PAYMENT_CHARS: usize = fixed_string::chars(ANONYMOUS_PAYMENT_PREFIX, PAYLOAD_BYTES);

/// Where an anonymous output paid to someone is, and what opens it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AnonymousPaymentString {
    pub txid: Txid,
    pub index: u64,
    pub owner: OwnerOpening,
    pub value: u64,
    /// A hidden value's blinding; `None` for a value in clear.
    pub value_blinding: Option<Scalar>,
}

impl fmt::Debug for AnonymousPaymentString {
    /// Leaves out the openings: a log line must not reveal the owner or a hidden value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnonymousPaymentString")
            .field("txid", &self.txid)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// Why a string is not a usable anonymous payment string. No variant carries the string.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum AnonymousPaymentStringError {
    #[error("an anonymous payment string starts with `specie-apay1`; this one does not")]
    MissingPrefix,
    #[error("an anonymous payment string is {expected} characters long; this one is {chars}; copy it again")]
    WrongLength { chars: usize, expected: usize },
    #[error("the anonymous payment string is not hex after its prefix; copy it again")]
    NotHex,
    #[error(
        "the anonymous payment string's checksum does not match: it was mistyped or damaged in copying; copy it again"
    )]
    BadChecksum,
    #[error(
        "this anonymous payment string has format version {version}; this wallet understands version {supported} only"
    )]
    UnsupportedVersion { version: u8, supported: u8 },
    #[error("the anonymous payment string's contents are damaged: {0}")]
    Decode(#[from] DecodeError),
    #[error("the anonymous payment string names output {index}, past any transaction's outputs")]
    IndexOutOfRange { index: u64 },
    #[error("the anonymous payment string's value blinding is not a canonical scalar, or is set for a clear value")]
    BadValueBlinding,
    #[error("the anonymous payment string pays 0, which is no payment")]
    ZeroValue,
}

impl From<Gate> for AnonymousPaymentStringError {
    fn from(gate: Gate) -> Self {
        match gate {
            Gate::MissingPrefix => Self::MissingPrefix,
            Gate::WrongLength { chars, expected } => Self::WrongLength { chars, expected },
            Gate::NotHex => Self::NotHex,
            Gate::BadChecksum => Self::BadChecksum,
        }
    }
}

impl AnonymousPaymentString {
    pub fn outpoint(&self) -> OutPoint {
        OutPoint {
            txid: self.txid,
            index: self.index,
        }
    }

    /// The value as the output states it: in clear, or the opening's commitment.
    pub fn stated_value(&self) -> AnonymousValue {
        match self.value_opening() {
            None => AnonymousValue::Clear(self.value),
            Some(opening) => AnonymousValue::Hidden(opening.commitment().to_bytes()),
        }
    }

    pub fn value_opening(&self) -> Option<Opening> {
        self.value_blinding.map(|blinding| Opening {
            value: self.value,
            blinding,
        })
    }

    pub fn payee(&self) -> EnrolmentId {
        self.owner.enrolment_id
    }

    /// The input that spends the output.
    pub fn to_input(&self) -> AnonymousInput {
        AnonymousInput {
            prevout: self.outpoint(),
            owner: self.owner.commitment(),
            value: self.stated_value(),
        }
    }

    /// The output's UHS id: present at the node = the payment happened, to this owner, with this value.
    pub fn uhs_id(&self) -> UhsId {
        anonymous_uhs_id(&self.outpoint(), &self.owner.commitment(), &self.stated_value())
    }

    fn payload(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(PAYLOAD_BYTES + CHECKSUM_BYTES);
        bytes.push(ANONYMOUS_PAYMENT_VERSION);
        self.txid.encode_to(&mut bytes);
        put_u64(&mut bytes, self.index);
        self.owner.encode_to(&mut bytes);
        put_u64(&mut bytes, self.value);
        bytes.push(u8::from(self.value_blinding.is_some()));
        bytes.extend_from_slice(self.value_blinding.unwrap_or(Scalar::ZERO).as_bytes());
        bytes
    }

    /// The `specie-apay1…` string.
    pub fn encode(&self) -> String {
        fixed_string::encode(ANONYMOUS_PAYMENT_PREFIX, self.payload())
    }

    /// Parses a string (surrounding whitespace and upper-case hex tolerated). Fixed size: the
    /// length is checked before anything is decoded.
    pub fn parse(text: &str) -> Result<Self, AnonymousPaymentStringError> {
        Self::decode_payload(&fixed_string::open(
            text,
            ANONYMOUS_PAYMENT_PREFIX,
            ANONYMOUS_PAYMENT_CHARS,
        )?)
    }

    fn decode_payload(payload: &[u8]) -> Result<Self, AnonymousPaymentStringError> {
        let mut reader = Reader::new(payload);
        let version = reader.read_u8("anonymous payment version")?;
        if version != ANONYMOUS_PAYMENT_VERSION {
            return Err(AnonymousPaymentStringError::UnsupportedVersion {
                version,
                supported: ANONYMOUS_PAYMENT_VERSION,
            });
        }
        let txid = Txid(reader.read_array("anonymous payment txid")?);
        let index = reader.read_u64("anonymous payment output index")?;
        let owner = OwnerOpening::decode_from(&mut reader, &())?;
        let value = reader.read_u64("anonymous payment value")?;
        let hidden = reader.read_u8("anonymous payment value mode")?;
        let blinding: [u8; 32] = reader.read_array("anonymous payment value blinding")?;
        reader.finish()?;
        if index >= CONFIDENTIAL_OUTPUT_INDEX_LIMIT {
            return Err(AnonymousPaymentStringError::IndexOutOfRange { index });
        }
        if value == 0 {
            return Err(AnonymousPaymentStringError::ZeroValue);
        }
        let value_blinding = match hidden {
            0 if blinding == [0; 32] => None,
            1 => Some(
                Option::<Scalar>::from(Scalar::from_canonical_bytes(blinding))
                    .ok_or(AnonymousPaymentStringError::BadValueBlinding)?,
            ),
            _ => return Err(AnonymousPaymentStringError::BadValueBlinding),
        };
        Ok(AnonymousPaymentString {
            txid,
            index,
            owner,
            value,
            value_blinding,
        })
    }
}

impl fmt::Display for AnonymousPaymentString {
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

    fn sample(hidden: bool) -> AnonymousPaymentString {
        let mut rng = StdRng::seed_from_u64(5);
        AnonymousPaymentString {
            txid: Txid([7; 32]),
            index: 1,
            owner: OwnerOpening::random(EnrolmentId(42), &mut rng),
            value: 1500,
            value_blinding: hidden.then(|| Scalar::from(0x0102_0304u64)),
        }
    }

    #[test]
    fn both_modes_round_trip_and_name_the_output() {
        for hidden in [false, true] {
            let payment = sample(hidden);
            let text = payment.encode();
            assert_eq!(text.len(), ANONYMOUS_PAYMENT_CHARS);
            assert_eq!(
                AnonymousPaymentString::parse(&format!(
                    " {}\n",
                    text.to_uppercase().replacen("SPECIE-APAY1", "specie-apay1", 1)
                )),
                Ok(payment)
            );
            assert_eq!(payment.to_input().uhs_id(), payment.uhs_id());
            assert_eq!(matches!(payment.stated_value(), AnonymousValue::Hidden(_)), hidden);
            assert!(!format!("{payment:?}").contains("1500"), "Debug hides the value");
        }
        assert_ne!(sample(false).uhs_id(), sample(true).uhs_id());
    }

    #[test]
    fn damaged_strings_are_refused() {
        let text = sample(true).encode();
        assert_eq!(
            AnonymousPaymentString::parse(&text[..text.len() - 1]),
            Err(AnonymousPaymentStringError::WrongLength {
                chars: ANONYMOUS_PAYMENT_CHARS - 1,
                expected: ANONYMOUS_PAYMENT_CHARS
            })
        );
        assert_eq!(
            AnonymousPaymentString::parse(&text.replacen("specie-apay1", "specie-cpay1", 1)),
            Err(AnonymousPaymentStringError::MissingPrefix)
        );
        let mut payload = sample(false).payload();
        *payload.last_mut().unwrap() = 1; // a blinding in clear
        let forged = fixed_string::encode(ANONYMOUS_PAYMENT_PREFIX, payload);
        assert_eq!(
            AnonymousPaymentString::parse(&forged),
            Err(AnonymousPaymentStringError::BadValueBlinding)
        );
    }

    proptest! {
        #[test]
        fn any_changed_character_is_refused_or_names_another_output(at in 12usize..ANONYMOUS_PAYMENT_CHARS, digit in 0u8..16) {
            let payment = sample(true);
            let mut text = payment.encode().into_bytes();
            let replacement = b"0123456789abcdef"[digit as usize];
            prop_assume!(text[at] != replacement);
            text[at] = replacement;
            if let Ok(parsed) = AnonymousPaymentString::parse(std::str::from_utf8(&text).unwrap()) {
                prop_assert_ne!(parsed.uhs_id(), payment.uhs_id());
            }
        }
    }
}
