//! Byte encoding of what key-generation and refresh ceremony participants send each other
//! (docs/endorsement-format.md §7, "Ceremony messages"): a cluster's sentinels run the
//! [`Ceremony`](crate::Ceremony) over mutual TLS, which also keeps round 2's secret shares
//! confidential.
//!
//! The same rules as the protocol messages of [`crate::wire`]: a peer may be faulty or hostile,
//! so every length is checked against a cap and the bytes left before anything is allocated,
//! a message longer than [`Decode::encoded_bytes_max`] is refused unread, and FROST's
//! serializations must re-serialize to the bytes received (one encoding per message, so the
//! confirmation round's transcript digests cannot differ over encodings).

use frost::keys::dkg::{round1, round2};
use frost_secp256k1_tr as frost;
use specie_codec::{put_byte_vec, Decode, DecodeError, Encode, Reader, U64_BYTES};

use crate::ceremony::{CeremonyMessage, Confirmation};
use crate::format::GroupKey;
use crate::keys::ENDORSERS_MAX;
use crate::wire::{frost_canonical, read_frost, FROST_HEADER_BYTES, POINT_BYTES, SCALAR_BYTES, SHORT_COUNT_BYTES};

/// The version byte every ceremony message starts with.
pub const CEREMONY_VERSION: u8 = 1;
/// A DKG round-1 proof of knowledge: a BIP340 signature (x-only nonce point, scalar), which
/// FROST serializes as a byte string with a one-byte length.
pub const PROOF_OF_KNOWLEDGE_BYTES: usize = 64;
/// FROST's serialization of a DKG round-2 package: header and one signing share (37 bytes).
pub const ROUND2_PACKAGE_BYTES: usize = FROST_HEADER_BYTES + SCALAR_BYTES;
/// A [`Confirmation`]: transcript digest, x-only group key, public shares digest.
pub const CONFIRMATION_BYTES: usize = 3 * 32;

/// FROST's serialization of a DKG round-1 package whose commitment holds up to
/// `coefficients_max` coefficients (clamped to [`ENDORSERS_MAX`]): header, count, one point per
/// coefficient, the proof's length and the proof: `5 + 1 + 33 × c + 1 + 64 = 71 + 33·c` bytes
/// (104 for 1, 137 for 2, 2,183 for 64). A DKG of threshold k commits to k coefficients, a
/// refresh to k − 1 (its constant term is zero and left out).
pub const fn round1_package_bytes_max(coefficients_max: u16) -> usize {
    let coefficients = if coefficients_max < ENDORSERS_MAX {
        coefficients_max
    } else {
        ENDORSERS_MAX
    } as usize;
    FROST_HEADER_BYTES + SHORT_COUNT_BYTES + coefficients * POINT_BYTES + SHORT_COUNT_BYTES + PROOF_OF_KNOWLEDGE_BYTES
}

/// The largest round-1 package: a DKG of threshold [`ENDORSERS_MAX`] (2,183 bytes).
pub const ROUND1_PACKAGE_BYTES_MAX: usize = round1_package_bytes_max(ENDORSERS_MAX);

const TAG_ROUND1: u8 = 1;
const TAG_ROUND2: u8 = 2;
const TAG_CONFIRM: u8 = 3;

/// Version and kind.
const CEREMONY_HEAD_BYTES: usize = 2;

impl Encode for CeremonyMessage {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(CEREMONY_VERSION);
        match self {
            CeremonyMessage::Round1(package) => {
                out.push(TAG_ROUND1);
                let bytes = package
                    .serialize()
                    .expect("FROST's round-1 packages, made or decoded, hold no identity point");
                put_byte_vec(out, &bytes);
            }
            CeremonyMessage::Round2(package) => {
                out.push(TAG_ROUND2);
                let bytes = package.serialize().expect("a signing share always serializes");
                put_byte_vec(out, &bytes);
            }
            CeremonyMessage::Confirm(confirmation) => {
                out.push(TAG_CONFIRM);
                out.extend_from_slice(&confirmation.transcript);
                out.extend_from_slice(&confirmation.group_key.0);
                out.extend_from_slice(&confirmation.public_shares);
            }
        }
    }
}

/// A round-1 package whose commitment holds 1 to [`ENDORSERS_MAX`] coefficients.
fn read_round1(reader: &mut Reader<'_>) -> Result<round1::Package, DecodeError> {
    const WHAT: &str = "DKG round-1 package";
    let bytes = reader.read_byte_vec(WHAT, ROUND1_PACKAGE_BYTES_MAX as u64)?;
    // postcard's count follows the header; one byte below 128 is the whole count, and the
    // canonical check below makes it the count FROST decodes. Checked first because serde
    // preallocates a vector for whatever count it is told (up to 1 MiB).
    let coefficients = bytes.get(FROST_HEADER_BYTES).copied().map_or(0, u16::from);
    if !(1..=ENDORSERS_MAX).contains(&coefficients) {
        return Err(DecodeError::Invalid {
            what: WHAT,
            reason: format!("a commitment holds 1 to {ENDORSERS_MAX} coefficients"),
        });
    }
    frost_canonical(bytes, WHAT, round1::Package::deserialize, round1::Package::serialize)
}

fn read_confirmation(reader: &mut Reader<'_>) -> Result<Confirmation, DecodeError> {
    let transcript = reader.read_array::<32>("confirmation transcript")?;
    let group_key = GroupKey(reader.read_array::<32>("confirmation group key")?);
    let public_shares = reader.read_array::<32>("confirmation public shares")?;
    // No ceremony derives such a key, and a peer comparing against it would only fail later.
    if group_key.xonly().is_none() {
        return Err(DecodeError::Invalid {
            what: "confirmation group key",
            reason: "not a valid BIP340 x-only key".to_string(),
        });
    }
    Ok(Confirmation {
        transcript,
        group_key,
        public_shares,
    })
}

impl Decode for CeremonyMessage {
    type Limits = ();
    const WHAT: &'static str = "ceremony message";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        reader.read_version("ceremony message version", CEREMONY_VERSION)?;
        match reader.read_u8("ceremony message kind")? {
            TAG_ROUND1 => Ok(CeremonyMessage::Round1(Box::new(read_round1(reader)?))),
            TAG_ROUND2 => Ok(CeremonyMessage::Round2(Box::new(read_frost(
                reader,
                "DKG round-2 package",
                ROUND2_PACKAGE_BYTES,
                round2::Package::deserialize,
                round2::Package::serialize,
            )?))),
            TAG_CONFIRM => read_confirmation(reader).map(CeremonyMessage::Confirm),
            kind => Err(DecodeError::UnknownKind { what: Self::WHAT, kind }),
        }
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        let round1 = U64_BYTES + ROUND1_PACKAGE_BYTES_MAX;
        let round2 = U64_BYTES + ROUND2_PACKAGE_BYTES;
        CEREMONY_HEAD_BYTES + round1.max(round2).max(CONFIRMATION_BYTES)
    }
}
