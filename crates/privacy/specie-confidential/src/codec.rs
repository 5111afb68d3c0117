//! The one canonical encoding of a transfer (`docs/privacy-format.md` §3), and its bounded decoder:
//! counts are checked against limits and against the bytes left before anything is allocated; every
//! point must be a canonical Ristretto encoding and every scalar canonical, so each transfer has
//! exactly one encoding.

use specie_codec::{Decode, DecodeError, Encode, Reader, U64_BYTES};

use crate::auditor::AuditorKey;
use curve25519_dalek::scalar::Scalar;

use crate::group::{scalar_from_bytes, Point, ELEMENT_BYTES};
use crate::range;
use crate::sigma::{BalanceProof, ValidityProof};
use crate::transfer::{AuditorEntry, ConfidentialTransfer, RangeProofBytes, Statement};
use crate::{AUDITORS_MAX, INPUTS_MAX, LIMBS, OUTPUTS_MAX};

/// The format version, the first byte of every encoding.
pub const FORMAT_VERSION: u8 = 1;

/// Prefix of the statement digest: SHA-256(domain ‖ context ‖ statement).
pub const DOMAIN_STATEMENT: &[u8] = b"specie/confidential/statement/v1";

/// The version byte and the two public amounts.
const HEADER_BYTES: usize = 1 + 2 * U64_BYTES;
const OUTPUT_BYTES: usize = LIMBS * ELEMENT_BYTES;

/// The largest accepted encoding under [`TransferLimits::default`], in bytes.
pub const TRANSFER_BYTES_MAX: usize = encoded_bytes(INPUTS_MAX, OUTPUTS_MAX, AUDITORS_MAX);

/// The encoded size of a transfer with these counts.
const fn encoded_bytes(inputs: usize, outputs: usize, auditors: usize) -> usize {
    let statement = HEADER_BYTES
        + 3 * U64_BYTES
        + inputs * ELEMENT_BYTES
        + outputs * OUTPUT_BYTES
        + auditors * (ELEMENT_BYTES + outputs * OUTPUT_BYTES);
    let balance = 2 * ELEMENT_BYTES;
    let validity = (3 + auditors) * ELEMENT_BYTES;
    // range::proof_bytes, in a const context.
    let bits = crate::LIMB_BITS as usize * (outputs * LIMBS).next_power_of_two();
    let range = 1 + ELEMENT_BYTES * (6 + 2 * bits.trailing_zeros() as usize);
    statement + balance + validity + range
}

/// Bounds of the decoder; each at most the crate's hard limit (the generators are sized for it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferLimits {
    pub inputs_max: usize,
    pub outputs_max: usize,
    pub auditors_max: usize,
}

impl Default for TransferLimits {
    fn default() -> TransferLimits {
        TransferLimits {
            inputs_max: INPUTS_MAX,
            outputs_max: OUTPUTS_MAX,
            auditors_max: AUDITORS_MAX,
        }
    }
}

/// Bytes of a statement's encoding.
pub(crate) fn statement_bytes(s: &Statement) -> usize {
    HEADER_BYTES
        + 3 * U64_BYTES
        + (s.inputs.len() + s.limbs.len() + s.auditors.len() * (1 + s.limbs.len())) * ELEMENT_BYTES
}

fn put_count(out: &mut Vec<u8>, count: usize) {
    out.extend_from_slice(&(count as u64).to_le_bytes());
}

impl Statement {
    pub(crate) fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.public_in.to_le_bytes());
        out.extend_from_slice(&self.public_out.to_le_bytes());
        put_count(out, self.inputs.len());
        self.inputs.iter().for_each(|p| out.extend_from_slice(&p.bytes));
        put_count(out, self.outputs());
        self.limbs.iter().for_each(|p| out.extend_from_slice(&p.bytes));
        put_count(out, self.auditors.len());
        for auditor in &self.auditors {
            out.extend_from_slice(&auditor.key.to_bytes());
            auditor.handles.iter().for_each(|p| out.extend_from_slice(&p.bytes));
        }
    }
}

/// The proofs' encoding: balance, validity, range.
pub(crate) fn encode_proofs(t: &ConfidentialTransfer, out: &mut Vec<u8>) {
    out.extend_from_slice(&t.balance.nonce.bytes);
    out.extend_from_slice(t.balance.response.as_bytes());
    out.extend_from_slice(&t.validity.nonce.bytes);
    t.validity
        .auditor_nonces
        .iter()
        .for_each(|p| out.extend_from_slice(&p.bytes));
    out.extend_from_slice(t.validity.value_response.as_bytes());
    out.extend_from_slice(t.validity.blinding_response.as_bytes());
    out.extend_from_slice(&t.range.bytes);
}

impl Encode for ConfidentialTransfer {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.reserve(statement_bytes(&self.statement) + 2 * ELEMENT_BYTES + self.range.bytes.len());
        self.statement.encode_to(out);
        encode_proofs(self, out);
    }
}

fn read_point(reader: &mut Reader<'_>, what: &'static str) -> Result<Point, DecodeError> {
    Point::from_bytes(reader.read_array(what)?).ok_or(DecodeError::Invalid {
        what,
        reason: "not a canonical Ristretto point".into(),
    })
}

fn read_points(reader: &mut Reader<'_>, what: &'static str, count: usize) -> Result<Vec<Point>, DecodeError> {
    // The caller bounded `count` against the bytes left, so this allocation is backed by input.
    (0..count).map(|_| read_point(reader, what)).collect()
}

fn read_scalar(reader: &mut Reader<'_>, what: &'static str) -> Result<Scalar, DecodeError> {
    scalar_from_bytes(reader.read_array(what)?).ok_or(DecodeError::Invalid {
        what,
        reason: "not a canonical scalar (at least the group order)".into(),
    })
}

fn decode_statement(reader: &mut Reader<'_>, limits: &TransferLimits) -> Result<Statement, DecodeError> {
    let version = reader.read_u8("version")?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion {
            what: "confidential transfer",
            version,
            supported: FORMAT_VERSION,
        });
    }
    let public_in = reader.read_u64("public_in")?;
    let public_out = reader.read_u64("public_out")?;
    let inputs_max = limits.inputs_max.min(INPUTS_MAX) as u64;
    let count = reader.read_count("inputs", inputs_max, ELEMENT_BYTES)?;
    let inputs = read_points(reader, "input commitment", count)?;
    let outputs_max = limits.outputs_max.min(OUTPUTS_MAX) as u64;
    let outputs = reader.read_count("outputs", outputs_max, OUTPUT_BYTES)?;
    if outputs == 0 {
        return Err(DecodeError::Invalid {
            what: "outputs",
            reason: "a transfer has at least one output".into(),
        });
    }
    let limbs = read_points(reader, "limb commitment", outputs * LIMBS)?;
    let auditors_max = limits.auditors_max.min(AUDITORS_MAX) as u64;
    let count = reader.read_count("auditors", auditors_max, ELEMENT_BYTES + outputs * OUTPUT_BYTES)?;
    let mut auditors: Vec<AuditorEntry> = Vec::with_capacity(count);
    for _ in 0..count {
        let key = AuditorKey::from_bytes(reader.read_array("auditor key")?).ok_or(DecodeError::Invalid {
            what: "auditor key",
            reason: "not a canonical Ristretto point other than the identity".into(),
        })?;
        if auditors
            .last()
            .is_some_and(|last| last.key.to_bytes() >= key.to_bytes())
        {
            return Err(DecodeError::NonCanonical {
                what: "auditor key",
                reason: "auditor keys must be strictly ascending",
            });
        }
        let handles = read_points(reader, "decryption handle", outputs * LIMBS)?;
        auditors.push(AuditorEntry { key, handles });
    }
    Ok(Statement {
        public_in,
        public_out,
        inputs,
        limbs,
        auditors,
    })
}

fn decode_range(reader: &mut Reader<'_>, limbs: usize) -> Result<RangeProofBytes, DecodeError> {
    let bytes = reader.read_bytes("range proof", range::proof_bytes(limbs))?.to_vec();
    if bytes[0] != 1 {
        return Err(DecodeError::Invalid {
            what: "range proof",
            reason: format!("extension degree byte {} (only 1 is used)", bytes[0]),
        });
    }
    let proof = range::Proof::from_bytes(&bytes).map_err(|e| DecodeError::Invalid {
        what: "range proof",
        reason: e.to_string(),
    })?;
    // The library's decoder is the judge of its format; one encoding per proof is ours to check.
    if proof.to_bytes() != bytes {
        return Err(DecodeError::NonCanonical {
            what: "range proof",
            reason: "does not re-encode to the same bytes",
        });
    }
    Ok(RangeProofBytes { proof, bytes })
}

impl Decode for ConfidentialTransfer {
    type Limits = TransferLimits;
    const WHAT: &'static str = "confidential transfer";

    fn decode_from(reader: &mut Reader<'_>, limits: &TransferLimits) -> Result<Self, DecodeError> {
        let statement = decode_statement(reader, limits)?;
        let balance = BalanceProof {
            nonce: read_point(reader, "balance nonce")?,
            response: read_scalar(reader, "balance response")?,
        };
        let nonce = read_point(reader, "validity nonce")?;
        let auditor_nonces = read_points(reader, "validity auditor nonce", statement.auditors.len())?;
        let validity = ValidityProof {
            nonce,
            auditor_nonces,
            value_response: read_scalar(reader, "validity value response")?,
            blinding_response: read_scalar(reader, "validity blinding response")?,
        };
        let range = decode_range(reader, statement.limbs.len())?;
        Ok(ConfidentialTransfer {
            statement,
            balance,
            validity,
            range,
        })
    }

    fn encoded_bytes_max(limits: &TransferLimits) -> usize {
        encoded_bytes(
            limits.inputs_max.min(INPUTS_MAX),
            limits.outputs_max.min(OUTPUTS_MAX),
            limits.auditors_max.min(AUDITORS_MAX),
        )
    }
}
