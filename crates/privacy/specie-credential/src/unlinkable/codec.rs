//! The unlinkable level's canonical encodings (`docs/unlinkable-format.md`), in the credential's
//! scheme: a version byte, a kind byte ([`crate::kind`]), fixed-width fields; points compressed,
//! in the subgroup, never the identity, re-encoding to the same bytes; scalars below the order.
//! Counts are one byte, checked against their maximum and the bytes left before anything is
//! allocated. The libraries' proofs (Coconut's proof of knowledge, Bulletproofs++) are carried in
//! their own canonical encodings, after their fixed shape is checked byte by byte, so that no
//! length they contain reaches an allocator or a verifier unchecked.

use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use bulletproofs_plus_plus::prelude::Proof as RangeProof;
use coconut_crypto::setup::{PublicKey, SecretKey};
use coconut_crypto::{BlindSignature, Signature};
use specie_codec::{Decode, DecodeError, Encode, Reader};

use crate::codec::{
    kind, put_link, put_signature_proof, read_auditor_key, read_link, read_signature_proof, HEADER_BYTES, LINK_BYTES,
    SIGNATURE_PROOF_BYTES,
};
use crate::group::{
    compressed, put, put_header, read_canonical, read_g1, read_g2, read_header, read_scalar, Pairing, G1, G1_BYTES,
    G2_BYTES, SCALAR_BYTES,
};
use crate::owner::AuditorKey;
use crate::spend::check_auditors;
use crate::unlinkable::group::TOKEN_MESSAGES;
use crate::unlinkable::token::{
    Certificate, CertificateShare, CertifierGroup, CertifierSecret, SerialNumber, Token, TokenOpening,
};
use crate::unlinkable::transfer::{
    range_values, PublicAmounts, TokenShowing, UnlinkableInput, UnlinkableOutput, UnlinkableTransfer, OUTPUT_RESPONSES,
    OUTPUT_ROWS, TOKEN_RESPONSES,
};
use crate::unlinkable::{CERTIFIERS_MAX, INPUTS_MAX, OUTPUTS_MAX};
use crate::{EnrolmentId, AUDITORS_MAX};

const TOKEN_FIELDS_BYTES: usize = (1 + TOKEN_MESSAGES) * G1_BYTES;
pub const TOKEN_BYTES: usize = HEADER_BYTES + TOKEN_FIELDS_BYTES;
pub const TOKEN_OPENING_BYTES: usize = HEADER_BYTES + 8 + 8 + (2 + TOKEN_MESSAGES) * SCALAR_BYTES;
pub const SERIAL_NUMBER_BYTES: usize = HEADER_BYTES + G1_BYTES;
const PS_KEY_BYTES: usize = G2_BYTES + TOKEN_MESSAGES * (G1_BYTES + G2_BYTES);
const PS_SIGNATURE_BYTES: usize = 2 * G1_BYTES;
pub const CERTIFIER_SECRET_BYTES: usize = HEADER_BYTES + 2 + (1 + TOKEN_MESSAGES) * SCALAR_BYTES;
pub const CERTIFICATE_SHARE_BYTES: usize = HEADER_BYTES + 2 + PS_SIGNATURE_BYTES;
pub const CERTIFICATE_BYTES: usize = HEADER_BYTES + PS_SIGNATURE_BYTES;

/// A certifier group's size with `members` members.
pub const fn certifier_group_bytes(members: usize) -> usize {
    HEADER_BYTES + 2 + 1 + (1 + members) * PS_KEY_BYTES
}

/// A token showing: `h'`, `s'`, `k`, `k`'s nonce, four responses.
const TOKEN_SHOWING_BYTES: usize = 2 * G1_BYTES + 2 * G2_BYTES + TOKEN_RESPONSES * SCALAR_BYTES;

/// Bulletproofs++ over `n` values (a power of two) in base 16 for 64 bits, the library's
/// canonical encoding: the base (u16), four G1 commitments, then the norm argument's vectors `X`
/// and `R` (`4 + log2 n` points each) and `l` and `n` (one scalar each), each after its u64 length.
fn range_proof_shape(values: usize) -> (usize, [(usize, u64); 4]) {
    debug_assert!(values.is_power_of_two());
    let rounds = 4 + u64::from(values.trailing_zeros());
    let x = 2 + 4 * G1_BYTES;
    let r = x + 8 + rounds as usize * G1_BYTES;
    let l = r + 8 + rounds as usize * G1_BYTES;
    let n = l + 8 + SCALAR_BYTES;
    (n + 8 + SCALAR_BYTES, [(x, rounds), (r, rounds), (l, 1), (n, 1)])
}

const INPUT_BYTES_MIN: usize = G1_BYTES + SIGNATURE_PROOF_BYTES + TOKEN_SHOWING_BYTES + G1_BYTES;
const OUTPUT_BYTES_MIN: usize =
    TOKEN_FIELDS_BYTES + G1_BYTES + OUTPUT_ROWS * G1_BYTES + (OUTPUT_RESPONSES + 2) * SCALAR_BYTES;
/// Per auditor, an output's links: its owner's, then its value's two halves'.
const OUTPUT_LINKS: usize = 3;

/// An unlinkable transfer's size.
pub fn unlinkable_transfer_bytes(inputs: usize, outputs: usize, auditors: usize) -> usize {
    HEADER_BYTES
        + 16
        + 1
        + auditors * G1_BYTES
        + 2
        + inputs * (INPUT_BYTES_MIN + auditors * LINK_BYTES)
        + outputs * (OUTPUT_BYTES_MIN + auditors * OUTPUT_LINKS * LINK_BYTES)
        + range_proof_shape(range_values(outputs.max(1))).0
}

/// The largest unlinkable transfer.
pub fn unlinkable_transfer_bytes_max() -> usize {
    unlinkable_transfer_bytes(INPUTS_MAX, OUTPUTS_MAX, AUDITORS_MAX)
}

fn non_canonical(what: &'static str, reason: &'static str) -> DecodeError {
    DecodeError::NonCanonical { what, reason }
}

/// Reads a library object of exactly `len` bytes whose u64 fields at `fixed` offsets must hold
/// the given values, refusing what does not re-encode to the same bytes.
fn read_library<T: CanonicalSerialize + CanonicalDeserialize>(
    reader: &mut Reader<'_>,
    what: &'static str,
    len: usize,
    fixed: &[(usize, u64)],
) -> Result<T, DecodeError> {
    let bytes = reader.read_bytes(what, len)?;
    for &(offset, value) in fixed {
        let field = u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("eight bytes"));
        if field != value {
            return Err(non_canonical(what, "a length or index field differs from the format's"));
        }
    }
    let value = T::deserialize_compressed(bytes).map_err(|e| DecodeError::Invalid {
        what,
        reason: format!("not a valid element: {e}"),
    })?;
    if compressed(&value) != bytes {
        return Err(non_canonical(what, "does not re-encode to the same bytes"));
    }
    Ok(value)
}

fn put_token_showing(out: &mut Vec<u8>, showing: &TokenShowing) {
    showing.randomized.iter().for_each(|p| put(out, p));
    put(out, &showing.k);
    put(out, &showing.nonce);
    showing.responses.iter().for_each(|z| put(out, z));
}

fn read_token_showing(reader: &mut Reader<'_>) -> Result<TokenShowing, DecodeError> {
    let randomized = [
        read_g1(reader, "token showing h'")?,
        read_g1(reader, "token showing s'")?,
    ];
    let k = read_g2(reader, "token showing k")?;
    let nonce = read_g2(reader, "token showing nonce")?;
    let mut responses = [crate::group::Scalar::from(0u8); TOKEN_RESPONSES];
    for response in responses.iter_mut() {
        *response = read_scalar(reader, "token showing response")?;
    }
    Ok(TokenShowing {
        randomized,
        k,
        nonce,
        responses,
    })
}

fn put_token_fields(out: &mut Vec<u8>, token: &Token) {
    put(out, &token.commitment);
    token.messages.iter().for_each(|c| put(out, c));
}

fn read_token_fields(reader: &mut Reader<'_>) -> Result<Token, DecodeError> {
    Ok(Token {
        commitment: read_g1(reader, "token commitment")?,
        messages: [
            read_g1(reader, "token owner commitment")?,
            read_g1(reader, "token value commitment")?,
            read_g1(reader, "token serial seed commitment")?,
        ],
    })
}

macro_rules! fixed_decode {
    ($type:ty, $what:literal, $bytes:expr, $kind:expr, $decode:expr) => {
        impl Decode for $type {
            type Limits = ();
            const WHAT: &'static str = $what;
            fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
                read_header(reader, $what, $kind)?;
                $decode(reader)
            }
            fn encoded_bytes_max(_limits: &()) -> usize {
                $bytes
            }
        }
    };
}

impl Encode for Token {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::TOKEN);
        put_token_fields(out, self);
    }
}

fixed_decode!(Token, "token", TOKEN_BYTES, kind::TOKEN, read_token_fields);

impl Encode for TokenOpening {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::TOKEN_OPENING);
        out.extend_from_slice(&self.owner.0.to_le_bytes());
        out.extend_from_slice(&self.value.to_le_bytes());
        put(out, &self.serial_seed);
        put(out, &self.blinding);
        self.message_blindings.iter().for_each(|b| put(out, b));
    }
}

fixed_decode!(
    TokenOpening,
    "token opening",
    TOKEN_OPENING_BYTES,
    kind::TOKEN_OPENING,
    |reader: &mut Reader<'_>| {
        Ok(TokenOpening {
            owner: EnrolmentId(reader.read_u64("token owner")?),
            value: reader.read_u64("token value")?,
            serial_seed: read_scalar(reader, "token serial seed")?,
            blinding: read_scalar(reader, "token blinding")?,
            message_blindings: [
                read_scalar(reader, "token message blinding")?,
                read_scalar(reader, "token message blinding")?,
                read_scalar(reader, "token message blinding")?,
            ],
        })
    }
);

impl Encode for SerialNumber {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::SERIAL_NUMBER);
        out.extend_from_slice(&self.0);
    }
}

fn read_serial(reader: &mut Reader<'_>) -> Result<SerialNumber, DecodeError> {
    Ok(SerialNumber::from_point(read_g1(reader, "serial number")?))
}

fixed_decode!(
    SerialNumber,
    "serial number",
    SERIAL_NUMBER_BYTES,
    kind::SERIAL_NUMBER,
    read_serial
);

fn put_ps_key(out: &mut Vec<u8>, key: &PublicKey<Pairing>) {
    put(out, &key.alpha_tilde);
    key.beta.iter().for_each(|b| put(out, b));
    key.beta_tilde.iter().for_each(|b| put(out, b));
}

fn read_ps_key(reader: &mut Reader<'_>) -> Result<PublicKey<Pairing>, DecodeError> {
    let alpha_tilde = read_g2(reader, "certifier key α̃")?;
    let beta = (0..TOKEN_MESSAGES)
        .map(|_| read_g1(reader, "certifier key β"))
        .collect::<Result<Vec<_>, _>>()?;
    let beta_tilde = (0..TOKEN_MESSAGES)
        .map(|_| read_g2(reader, "certifier key β̃"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PublicKey {
        alpha_tilde,
        beta,
        beta_tilde,
    })
}

impl Encode for CertifierGroup {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::CERTIFIER_GROUP);
        out.extend_from_slice(&self.threshold.to_le_bytes());
        out.push(self.members.len() as u8);
        put_ps_key(out, &self.key);
        self.members.iter().for_each(|member| put_ps_key(out, member));
    }
}

impl Decode for CertifierGroup {
    type Limits = ();
    const WHAT: &'static str = "certifier group";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        read_header(reader, Self::WHAT, kind::CERTIFIER_GROUP)?;
        let threshold = u16::from_le_bytes(reader.read_array("certifier threshold")?);
        let count = reader.read_u8_count("certifiers", CERTIFIERS_MAX as u64, PS_KEY_BYTES)?;
        if threshold == 0 || usize::from(threshold) > count {
            return Err(DecodeError::Invalid {
                what: "certifier threshold",
                reason: format!("{threshold} of {count} certifiers"),
            });
        }
        let key = read_ps_key(reader)?;
        let members = (0..count).map(|_| read_ps_key(reader)).collect::<Result<Vec<_>, _>>()?;
        Ok(CertifierGroup {
            threshold,
            key,
            members,
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        certifier_group_bytes(CERTIFIERS_MAX)
    }
}

impl Encode for CertifierSecret {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::CERTIFIER_SECRET);
        out.extend_from_slice(&self.index.to_le_bytes());
        put(out, &self.key.x);
        self.key.y.iter().for_each(|y| put(out, y));
    }
}

fn read_certifier_index(reader: &mut Reader<'_>) -> Result<u16, DecodeError> {
    let index = u16::from_le_bytes(reader.read_array("certifier index")?);
    if index == 0 || usize::from(index) > CERTIFIERS_MAX {
        return Err(DecodeError::Invalid {
            what: "certifier index",
            reason: format!("{index} is not in 1..={CERTIFIERS_MAX}"),
        });
    }
    Ok(index)
}

fixed_decode!(
    CertifierSecret,
    "certifier secret",
    CERTIFIER_SECRET_BYTES,
    kind::CERTIFIER_SECRET,
    |reader: &mut Reader<'_>| {
        let index = read_certifier_index(reader)?;
        let x = read_scalar(reader, "certifier secret x")?;
        let y = (0..TOKEN_MESSAGES)
            .map(|_| read_scalar(reader, "certifier secret y"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CertifierSecret {
            index,
            key: SecretKey { x, y },
        })
    }
);

impl Encode for CertificateShare {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::CERTIFICATE_SHARE);
        out.extend_from_slice(&self.certifier.to_le_bytes());
        put(out, &self.signature);
    }
}

fixed_decode!(
    CertificateShare,
    "certificate share",
    CERTIFICATE_SHARE_BYTES,
    kind::CERTIFICATE_SHARE,
    |reader: &mut Reader<'_>| {
        Ok(CertificateShare {
            certifier: read_certifier_index(reader)?,
            signature: read_canonical::<BlindSignature<Pairing>>(reader, "certificate share", PS_SIGNATURE_BYTES)?,
        })
    }
);

impl Encode for Certificate {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::CERTIFICATE);
        put(out, &self.0);
    }
}

fixed_decode!(
    Certificate,
    "certificate",
    CERTIFICATE_BYTES,
    kind::CERTIFICATE,
    |reader: &mut Reader<'_>| {
        Ok(Certificate(read_canonical::<Signature<Pairing>>(
            reader,
            "certificate",
            PS_SIGNATURE_BYTES,
        )?))
    }
);

impl Encode for UnlinkableTransfer {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.reserve(unlinkable_transfer_bytes(
            self.inputs.len(),
            self.outputs.len(),
            self.auditors.len(),
        ));
        put_header(out, kind::UNLINKABLE_TRANSFER);
        out.extend_from_slice(&self.amounts.issued.to_le_bytes());
        out.extend_from_slice(&self.amounts.redeemed.to_le_bytes());
        out.push(self.auditors.len() as u8);
        self.auditors
            .iter()
            .for_each(|key| out.extend_from_slice(&key.to_bytes()));
        out.push(self.inputs.len() as u8);
        out.push(self.outputs.len() as u8);
        for input in &self.inputs {
            out.extend_from_slice(&input.serial.0);
            put_signature_proof(out, &input.credential);
            put_token_showing(out, &input.token);
            put(out, &input.serial_nonce);
            input.auditors.iter().for_each(|link| put_link(out, link));
        }
        for output in &self.outputs {
            put_token_fields(out, &output.token);
            put(out, &output.range_commitment);
            output.nonces.iter().for_each(|n| put(out, n));
            output.responses.iter().for_each(|z| put(out, z));
            output.auditors.iter().for_each(|link| put_link(out, link));
            output.value_responses.iter().for_each(|z| put(out, z));
            output.values.iter().flatten().for_each(|link| put_link(out, link));
        }
        put(out, &self.range);
    }
}

impl Decode for UnlinkableTransfer {
    type Limits = ();
    const WHAT: &'static str = "unlinkable transfer";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        read_header(reader, Self::WHAT, kind::UNLINKABLE_TRANSFER)?;
        let amounts = PublicAmounts {
            issued: reader.read_u64("issued")?,
            redeemed: reader.read_u64("redeemed")?,
        };
        let auditor_count = reader.read_u8_count("auditors", AUDITORS_MAX as u64, G1_BYTES)?;
        let auditors = (0..auditor_count)
            .map(|_| read_auditor_key(reader))
            .collect::<Result<Vec<AuditorKey>, _>>()?;
        if check_auditors(&auditors).is_err() {
            return Err(non_canonical("auditor key", "auditor keys must be strictly ascending"));
        }
        let link_bytes = auditor_count * LINK_BYTES;
        let input_count = reader.read_u8_count("inputs", INPUTS_MAX as u64, INPUT_BYTES_MIN + link_bytes)?;
        let output_count = reader.read_u8_count(
            "outputs",
            OUTPUTS_MAX as u64,
            OUTPUT_BYTES_MIN + OUTPUT_LINKS * link_bytes,
        )?;
        if output_count == 0 {
            return Err(DecodeError::Invalid {
                what: "outputs",
                reason: "a transfer creates at least one output".into(),
            });
        }
        let links = |reader: &mut Reader<'_>| {
            (0..auditor_count)
                .map(|_| read_link(reader))
                .collect::<Result<Vec<_>, _>>()
        };
        let mut inputs = Vec::with_capacity(input_count);
        for _ in 0..input_count {
            inputs.push(UnlinkableInput {
                serial: read_serial(reader)?,
                credential: read_signature_proof(reader)?,
                token: read_token_showing(reader)?,
                serial_nonce: read_g1(reader, "serial number nonce")?,
                auditors: links(reader)?,
            });
        }
        let mut outputs = Vec::with_capacity(output_count);
        for _ in 0..output_count {
            let token = read_token_fields(reader)?;
            let range_commitment = read_g1(reader, "range commitment")?;
            let mut nonces = [G1::default(); OUTPUT_ROWS];
            for nonce in nonces.iter_mut() {
                *nonce = read_g1(reader, "output nonce")?;
            }
            let mut responses = [crate::group::Scalar::from(0u8); OUTPUT_RESPONSES];
            for response in responses.iter_mut() {
                *response = read_scalar(reader, "output response")?;
            }
            let auditors = links(reader)?;
            let value_responses = [
                read_scalar(reader, "value half response")?,
                read_scalar(reader, "value half response")?,
            ];
            let values = (0..auditor_count)
                .map(|_| Ok([read_link(reader)?, read_link(reader)?]))
                .collect::<Result<Vec<_>, DecodeError>>()?;
            outputs.push(UnlinkableOutput {
                token,
                range_commitment,
                nonces,
                responses,
                auditors,
                value_responses,
                values,
            });
        }
        let (range_bytes, range_fixed) = range_proof_shape(range_values(output_count));
        if reader.peek_rest().get(..2) != Some(&16u16.to_le_bytes()[..]) {
            return Err(non_canonical("range proof", "the base must be 16"));
        }
        let range = read_library::<RangeProof<G1>>(reader, "range proof", range_bytes, &range_fixed)?;
        Ok(UnlinkableTransfer {
            amounts,
            auditors,
            inputs,
            outputs,
            range,
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        unlinkable_transfer_bytes_max()
    }
}
