//! Payment strings: what a sender hands the recipient after paying.
//!
//! Hamilton §3.7: the UHS stores only hashes, so a recipient cannot discover a payment on the
//! ledger. It needs the preimage of each output paid to it: the creating txid, the output index,
//! the commitment and the value. With those it can compute the UHS id, ask the node whether it
//! exists, and later spend it. Without them the money is as good as destroyed.
//!
//! Format (version 1): `specie-pay1` followed by lowercase hex of
//!
//! ```text
//! version u8 = 0x01 ‖ txid (32) ‖ count u64le ‖ count × (index u64le ‖ commitment (32) ‖ value u64le)
//!   ‖ checksum (4) = first 4 bytes of SHA-256("specie-pay1" ‖ everything before the checksum)
//! ```
//!
//! Indices are strictly increasing (one canonical string per payment). The checksum catches
//! copy-and-paste damage before the string reaches the node, with a clear message.

use std::fmt;
use std::str::FromStr;

use specie_codec::{put_count, put_u64};
use specie_codec::{DecodeError, Encode, Reader};
use specie_transaction::hash::sha256;
use specie_transaction::{uhs_id_for, CreatedOutput, OutPoint, Output, Txid, UhsId};
use thiserror::Error;

/// Every payment string starts with this.
pub const PAYMENT_STRING_PREFIX: &str = "specie-pay1";
/// The only format version defined.
pub const PAYMENT_STRING_VERSION: u8 = 1;
/// Most outputs one payment string may carry: a transaction's output limit.
pub const PAYMENT_OUTPUTS_MAX: u64 = specie_transaction::DecodeLimits::OUTPUTS_MAX_DEFAULT;
/// Bytes of every payment string's checksum (a capability's strings use the same: [`checksum_with`]).
pub const CHECKSUM_BYTES: usize = 4;
const ENTRY_BYTES: usize = 8 + 32 + 8;
const HEADER_BYTES: usize = 1 + 32 + 8;
/// The longest string accepted: the prefix plus hex of the largest possible payload. Checked
/// before decoding so that a pasted novel is refused without being hex-decoded.
pub const PAYMENT_STRING_CHARS_MAX: usize =
    PAYMENT_STRING_PREFIX.len() + 2 * (HEADER_BYTES + PAYMENT_OUTPUTS_MAX as usize * ENTRY_BYTES + CHECKSUM_BYTES);

/// One output of the paying transaction that the recipient should record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaidOutput {
    pub index: u64,
    pub output: Output,
}

/// The preimages of some outputs of one transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentString {
    pub txid: Txid,
    /// Sorted by index, no duplicates, at least one, every value at least 1.
    pub outputs: Vec<PaidOutput>,
}

/// Why a string is not a usable payment string.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PaymentStringError {
    #[error("a payment string starts with `specie-pay1`; this one starts with {start:?}")]
    MissingPrefix { start: String },
    #[error("the payment string is {chars} characters long, more than the {chars_max} the longest payment needs")]
    TooLong { chars: usize, chars_max: usize },
    #[error("the payment string contains {found:?} at character {position}, where only hex digits (0-9, a-f) belong; copy it again")]
    NotHex { position: usize, found: char },
    #[error("the payment string has an odd number of hex digits, so it was cut short; copy it again")]
    OddLength,
    #[error("the payment string is too short to hold a payment ({bytes} bytes); copy it again")]
    TooShort { bytes: usize },
    #[error("the payment string's checksum does not match: it was mistyped or damaged in copying; copy it again")]
    BadChecksum,
    #[error("this payment string has format version {version}; this wallet understands version {supported} only")]
    UnsupportedVersion { version: u8, supported: u8 },
    #[error("the payment string's contents are damaged: {0}")]
    Decode(#[from] DecodeError),
    #[error("the payment string lists no outputs")]
    NoOutputs,
    #[error("the payment string lists output {index} out of order or twice")]
    NotCanonical { index: u64 },
    #[error("the payment string lists output {index} with value 0, which no valid transaction creates")]
    ZeroValue { index: u64 },
}

impl PaymentString {
    /// A payment string for `outputs` of `txid`, sorted into canonical order. Output values and
    /// the count come from a transaction the wallet built, so they already satisfy the limits.
    pub fn new(txid: Txid, mut outputs: Vec<PaidOutput>) -> Self {
        outputs.sort_by_key(|paid| paid.index);
        outputs.dedup_by_key(|paid| paid.index);
        PaymentString { txid, outputs }
    }

    /// The outputs with their outpoints and UHS ids, as a wallet stores them.
    pub fn created_outputs(&self) -> Vec<CreatedOutput> {
        self.outputs
            .iter()
            .map(|paid| CreatedOutput {
                outpoint: OutPoint {
                    txid: self.txid,
                    index: paid.index,
                },
                output: paid.output,
                uhs_id: uhs_id_for(&self.txid, paid.index, &paid.output),
            })
            .collect()
    }

    /// UHS ids of the listed outputs: present at the node = the payment happened.
    pub fn uhs_ids(&self) -> Vec<UhsId> {
        self.created_outputs().iter().map(|created| created.uhs_id).collect()
    }

    /// Sum of the listed values (saturating: a string from a stranger may claim anything).
    pub fn total(&self) -> u64 {
        self.outputs
            .iter()
            .fold(0u64, |total, paid| total.saturating_add(paid.output.value))
    }

    fn payload(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_BYTES + self.outputs.len() * ENTRY_BYTES + CHECKSUM_BYTES);
        bytes.push(PAYMENT_STRING_VERSION);
        self.txid.encode_to(&mut bytes);
        put_count(&mut bytes, self.outputs.len());
        for paid in &self.outputs {
            put_u64(&mut bytes, paid.index);
            paid.output.encode_to(&mut bytes);
        }
        bytes
    }

    /// The `specie-pay1…` string.
    pub fn encode(&self) -> String {
        let mut bytes = self.payload();
        let checksum = checksum(&bytes);
        bytes.extend_from_slice(&checksum);
        format!("{PAYMENT_STRING_PREFIX}{}", hex::encode(bytes))
    }

    /// Parses a payment string (surrounding whitespace and upper-case hex are tolerated: people
    /// paste these from chat windows).
    pub fn parse(text: &str) -> Result<Self, PaymentStringError> {
        let text = text.trim();
        let chars = text.chars().count();
        if chars > PAYMENT_STRING_CHARS_MAX {
            return Err(PaymentStringError::TooLong {
                chars,
                chars_max: PAYMENT_STRING_CHARS_MAX,
            });
        }
        let Some(body) = strip_prefix_ignore_case(text, PAYMENT_STRING_PREFIX) else {
            return Err(PaymentStringError::MissingPrefix {
                start: text.chars().take(PAYMENT_STRING_PREFIX.len()).collect(),
            });
        };
        if let Some((offset, found)) = body.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
            return Err(PaymentStringError::NotHex {
                position: PAYMENT_STRING_PREFIX.len() + body[..offset].chars().count() + 1,
                found,
            });
        }
        if body.len() % 2 != 0 {
            return Err(PaymentStringError::OddLength);
        }
        let bytes = hex::decode(body).map_err(|_| PaymentStringError::OddLength)?;
        if bytes.len() < 1 + CHECKSUM_BYTES {
            return Err(PaymentStringError::TooShort { bytes: bytes.len() });
        }
        let (payload, found_checksum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
        if checksum(payload) != found_checksum {
            return Err(PaymentStringError::BadChecksum);
        }
        let mut reader = Reader::new(payload);
        let version = reader.read_u8("payment string version")?;
        if version != PAYMENT_STRING_VERSION {
            return Err(PaymentStringError::UnsupportedVersion {
                version,
                supported: PAYMENT_STRING_VERSION,
            });
        }
        let txid = Txid(reader.read_array("payment txid")?);
        let outputs = reader.read_vec("payment outputs", PAYMENT_OUTPUTS_MAX, ENTRY_BYTES, |reader| {
            let index = reader.read_u64("payment output index")?;
            let witness_program_commitment = reader.read_array("payment output commitment")?;
            let value = reader.read_u64("payment output value")?;
            Ok(PaidOutput {
                index,
                output: Output {
                    witness_program_commitment,
                    value,
                },
            })
        })?;
        reader.finish()?;
        if outputs.is_empty() {
            return Err(PaymentStringError::NoOutputs);
        }
        for pair in outputs.windows(2) {
            if pair[1].index <= pair[0].index {
                return Err(PaymentStringError::NotCanonical { index: pair[1].index });
            }
        }
        if let Some(zero) = outputs.iter().find(|paid| paid.output.value == 0) {
            return Err(PaymentStringError::ZeroValue { index: zero.index });
        }
        Ok(PaymentString { txid, outputs })
    }
}

fn checksum(payload: &[u8]) -> [u8; CHECKSUM_BYTES] {
    checksum_with(PAYMENT_STRING_PREFIX, payload)
}

/// The first bytes of SHA-256(`prefix` ‖ `payload`): the prefix is hashed in so that a string of
/// one kind can never pass as another kind with a valid checksum.
pub fn checksum_with(prefix: &str, payload: &[u8]) -> [u8; CHECKSUM_BYTES] {
    let mut preimage = Vec::with_capacity(prefix.len() + payload.len());
    preimage.extend_from_slice(prefix.as_bytes());
    preimage.extend_from_slice(payload);
    let digest = sha256(&preimage);
    let mut out = [0u8; CHECKSUM_BYTES];
    out.copy_from_slice(&digest[..CHECKSUM_BYTES]);
    out
}

/// `text` after `prefix`, if it starts with it in any letter case (payment strings are read so).
pub fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

impl fmt::Display for PaymentString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for PaymentString {
    type Err = PaymentStringError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PaymentString::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> PaymentString {
        PaymentString::new(
            Txid([7; 32]),
            vec![
                PaidOutput {
                    index: 1,
                    output: Output {
                        witness_program_commitment: [9; 32],
                        value: 150,
                    },
                },
                PaidOutput {
                    index: 0,
                    output: Output {
                        witness_program_commitment: [8; 32],
                        value: 5,
                    },
                },
            ],
        )
    }

    #[test]
    fn round_trip_and_canonical_order() {
        let payment = sample();
        assert_eq!(payment.outputs[0].index, 0, "new() sorts by index");
        let text = payment.encode();
        assert!(text.starts_with("specie-pay101"));
        assert_eq!(PaymentString::parse(&text), Ok(payment.clone()));
        assert_eq!(
            PaymentString::parse(&format!("  {}\n", text.to_uppercase())),
            Ok(payment.clone())
        );
        assert_eq!(payment.total(), 155);
        assert_eq!(
            payment.uhs_ids()[1],
            uhs_id_for(&payment.txid, 1, &payment.outputs[1].output)
        );
    }

    #[test]
    fn corrupted_strings_get_typed_errors() {
        let text = sample().encode();
        // One flipped hex digit in the middle: the checksum catches it.
        let mut chars: Vec<char> = text.chars().collect();
        let middle = chars.len() / 2;
        chars[middle] = if chars[middle] == '0' { '1' } else { '0' };
        let flipped: String = chars.into_iter().collect();
        assert_eq!(PaymentString::parse(&flipped), Err(PaymentStringError::BadChecksum));
        // Cut short by one byte and by one digit.
        assert_eq!(
            PaymentString::parse(&text[..text.len() - 2]),
            Err(PaymentStringError::BadChecksum)
        );
        assert_eq!(
            PaymentString::parse(&text[..text.len() - 1]),
            Err(PaymentStringError::OddLength)
        );
        assert!(matches!(
            PaymentString::parse("usd1qqdcf32k0vfxgsyet5ldt"),
            Err(PaymentStringError::MissingPrefix { .. })
        ));
        assert_eq!(
            PaymentString::parse(&format!("{text}zz")),
            Err(PaymentStringError::NotHex {
                position: text.len() + 1,
                found: 'z'
            })
        );
        assert_eq!(
            PaymentString::parse("specie-pay1ab"),
            Err(PaymentStringError::TooShort { bytes: 1 })
        );
        let huge = format!("specie-pay1{}", "0".repeat(PAYMENT_STRING_CHARS_MAX));
        assert!(matches!(
            PaymentString::parse(&huge),
            Err(PaymentStringError::TooLong { .. })
        ));
    }

    /// Builds a string with a valid checksum around arbitrary payload bytes, to reach the
    /// checks behind the checksum.
    fn with_checksum(payload: &[u8]) -> String {
        let mut bytes = payload.to_vec();
        bytes.extend_from_slice(&checksum(payload));
        format!("{PAYMENT_STRING_PREFIX}{}", hex::encode(bytes))
    }

    #[test]
    fn well_checksummed_but_wrong_contents() {
        let mut payload = sample().payload();
        payload[0] = 2;
        assert_eq!(
            PaymentString::parse(&with_checksum(&payload)),
            Err(PaymentStringError::UnsupportedVersion {
                version: 2,
                supported: 1
            })
        );
        let mut no_outputs = vec![1u8];
        no_outputs.extend_from_slice(&[7; 32]);
        no_outputs.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            PaymentString::parse(&with_checksum(&no_outputs)),
            Err(PaymentStringError::NoOutputs)
        );
        // A count far beyond the bytes present is refused before any allocation.
        let mut huge_count = vec![1u8];
        huge_count.extend_from_slice(&[7; 32]);
        huge_count.extend_from_slice(&1000u64.to_le_bytes());
        assert!(matches!(
            PaymentString::parse(&with_checksum(&huge_count)),
            Err(PaymentStringError::Decode(DecodeError::CountExceedsInput { .. }))
        ));
        let mut twice = sample();
        twice.outputs[1].index = 0;
        assert_eq!(
            PaymentString::parse(&with_checksum(&twice.payload())),
            Err(PaymentStringError::NotCanonical { index: 0 })
        );
        let mut zero = sample();
        zero.outputs[0].output.value = 0;
        assert_eq!(
            PaymentString::parse(&with_checksum(&zero.payload())),
            Err(PaymentStringError::ZeroValue { index: 0 })
        );
        let mut trailing = sample().payload();
        trailing.push(0);
        assert!(matches!(
            PaymentString::parse(&with_checksum(&trailing)),
            Err(PaymentStringError::Decode(DecodeError::TrailingBytes {
                trailing_bytes: 1
            }))
        ));
    }

    proptest! {
        #[test]
        fn any_payment_round_trips(
            txid in any::<[u8; 32]>(),
            entries in proptest::collection::btree_map(any::<u64>(), (any::<[u8; 32]>(), 1u64..), 1..20),
        ) {
            let outputs = entries
                .into_iter()
                .map(|(index, (commitment, value))| PaidOutput {
                    index,
                    output: Output { witness_program_commitment: commitment, value },
                })
                .collect();
            let payment = PaymentString::new(Txid(txid), outputs);
            let text = payment.encode();
            prop_assert!(text.len() <= PAYMENT_STRING_CHARS_MAX);
            prop_assert_eq!(PaymentString::parse(&text), Ok(payment));
        }

        #[test]
        fn any_single_character_change_is_caught(position in 0usize..200, replacement in "[0-9a-f]") {
            let text = sample().encode();
            let position = PAYMENT_STRING_PREFIX.len() + position % (text.len() - PAYMENT_STRING_PREFIX.len());
            let mut chars: Vec<char> = text.chars().collect();
            let new = replacement.chars().next().unwrap_or('0');
            prop_assume!(chars[position] != new);
            chars[position] = new;
            let damaged: String = chars.into_iter().collect();
            prop_assert!(PaymentString::parse(&damaged).is_err());
        }

        #[test]
        fn arbitrary_text_never_panics(text in ".{0,300}") {
            let _ = PaymentString::parse(&text);
            let _ = PaymentString::parse(&format!("specie-pay1{text}"));
        }
    }
}
