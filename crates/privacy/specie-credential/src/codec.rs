//! The one canonical encoding of everything that travels (`docs/credential-format.md` §3): a format
//! version byte, a kind byte, then fixed-width fields. Points are compressed (48 bytes in G1, 96 in
//! G2), never the identity, in the prime-order subgroup and re-encoding to the same bytes; scalars
//! are 32 bytes little-endian below the group order. The only variable part, a spend proof's
//! auditors, is a one-byte count checked against [`crate::AUDITORS_MAX`] and the bytes left before
//! anything is allocated.

use ark_bls12_381::G1Affine;
use bbs_plus::proof_23_ietf::PoKOfSignature23G1Proof;
use bbs_plus::signature_23::Signature23G1;
use schnorr_pok::discrete_log::PokDiscreteLog;
use schnorr_pok::SchnorrResponse;
use specie_codec::{Decode, DecodeError, Encode, Reader};

use crate::authority::{
    Credential, EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Jurisdiction, RaPublicKey, UserPublicKey,
};
use crate::group::{put, put_header, read_g1, read_g2, read_header, read_scalar, G1_BYTES, G2_BYTES, SCALAR_BYTES};
use crate::owner::{AuditorKey, CiphertextLink, OwnerAudit, OwnerCiphertext, OwnerCommitment, OwnerOpening};
use crate::spend::{check_auditors, SpendProof, SIGNATURE_RESPONSES};
use crate::AUDITORS_MAX;

/// Kind bytes (the second byte of every encoding), so that no encoding of one kind decodes as another.
pub mod kind {
    pub const RA_PUBLIC_KEY: u8 = 0x01;
    pub const ENROLMENT_CHALLENGE: u8 = 0x02;
    pub const ENROLMENT_REQUEST: u8 = 0x03;
    pub const CREDENTIAL: u8 = 0x04;
    pub const OWNER_COMMITMENT: u8 = 0x05;
    pub const AUDITOR_KEY: u8 = 0x06;
    pub const OWNER_CIPHERTEXT: u8 = 0x07;
    pub const SPEND_PROOF: u8 = 0x08;
    pub const OWNER_AUDIT: u8 = 0x09;
    pub const OWNER_OPENING: u8 = 0x0a;
    // The unlinkable level's (`crate::unlinkable`).
    pub const TOKEN: u8 = 0x0b;
    pub const TOKEN_OPENING: u8 = 0x0c;
    pub const SERIAL_NUMBER: u8 = 0x0d;
    pub const CERTIFIER_GROUP: u8 = 0x0e;
    pub const CERTIFIER_SECRET: u8 = 0x0f;
    pub const CERTIFICATE_SHARE: u8 = 0x10;
    pub const CERTIFICATE: u8 = 0x11;
    /// 0x12 was the transfer before its value ciphertexts (never released).
    pub const UNLINKABLE_TRANSFER: u8 = 0x13;
}

pub(crate) const HEADER_BYTES: usize = 2;
const CHALLENGE_FIELDS_BYTES: usize = 8 + 4 + 32;
const CIPHERTEXT_FIELDS_BYTES: usize = 3 * G1_BYTES;
pub(crate) const LINK_BYTES: usize = CIPHERTEXT_FIELDS_BYTES + 2 * G1_BYTES + SCALAR_BYTES;

pub const RA_PUBLIC_KEY_BYTES: usize = HEADER_BYTES + G2_BYTES;
pub const ENROLMENT_CHALLENGE_BYTES: usize = HEADER_BYTES + CHALLENGE_FIELDS_BYTES;
pub const ENROLMENT_REQUEST_BYTES: usize = HEADER_BYTES + CHALLENGE_FIELDS_BYTES + 2 * G1_BYTES + SCALAR_BYTES;
pub const CREDENTIAL_BYTES: usize = HEADER_BYTES + 8 + 4 + G1_BYTES + SCALAR_BYTES;
pub const OWNER_COMMITMENT_BYTES: usize = HEADER_BYTES + G1_BYTES;
pub const AUDITOR_KEY_BYTES: usize = HEADER_BYTES + G1_BYTES;
pub const OWNER_CIPHERTEXT_BYTES: usize = HEADER_BYTES + CIPHERTEXT_FIELDS_BYTES;
pub const OWNER_AUDIT_BYTES: usize = HEADER_BYTES + LINK_BYTES + G1_BYTES + 2 * SCALAR_BYTES;
pub const OWNER_OPENING_BYTES: usize = HEADER_BYTES + 8 + SCALAR_BYTES;

/// A spend proof's size with `auditors` ciphertexts.
pub const fn spend_proof_bytes(auditors: usize) -> usize {
    HEADER_BYTES + SIGNATURE_PROOF_BYTES + G1_BYTES + SCALAR_BYTES + 1 + auditors * LINK_BYTES
}

/// The largest spend proof (with [`AUDITORS_MAX`] auditors).
pub const SPEND_PROOF_BYTES_MAX: usize = spend_proof_bytes(AUDITORS_MAX);

macro_rules! fixed_size_decode {
    ($type:ty, $what:literal, $bytes:expr, $decode:expr) => {
        impl Decode for $type {
            type Limits = ();
            const WHAT: &'static str = $what;
            fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
                $decode(reader)
            }
            fn encoded_bytes_max(_limits: &()) -> usize {
                $bytes
            }
        }
    };
}

impl Encode for RaPublicKey {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::RA_PUBLIC_KEY);
        put(out, &self.0);
    }
}

fixed_size_decode!(
    RaPublicKey,
    "RA public key",
    RA_PUBLIC_KEY_BYTES,
    |reader: &mut Reader<'_>| {
        read_header(reader, "RA public key", kind::RA_PUBLIC_KEY)?;
        Ok(RaPublicKey(read_g2(reader, "RA public key")?))
    }
);

fn put_challenge_fields(out: &mut Vec<u8>, challenge: &EnrolmentChallenge) {
    out.extend_from_slice(&challenge.enrolment_id.0.to_le_bytes());
    out.extend_from_slice(&challenge.jurisdiction.0.to_le_bytes());
    out.extend_from_slice(&challenge.nonce);
}

fn read_challenge_fields(reader: &mut Reader<'_>) -> Result<EnrolmentChallenge, DecodeError> {
    Ok(EnrolmentChallenge {
        enrolment_id: EnrolmentId(reader.read_u64("enrolment id")?),
        jurisdiction: Jurisdiction(reader.read_u32("jurisdiction")?),
        nonce: reader.read_array("challenge nonce")?,
    })
}

impl Encode for EnrolmentChallenge {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::ENROLMENT_CHALLENGE);
        put_challenge_fields(out, self);
    }
}

fixed_size_decode!(
    EnrolmentChallenge,
    "enrolment challenge",
    ENROLMENT_CHALLENGE_BYTES,
    |reader: &mut Reader<'_>| {
        read_header(reader, "enrolment challenge", kind::ENROLMENT_CHALLENGE)?;
        read_challenge_fields(reader)
    }
);

impl Encode for EnrolmentRequest {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::ENROLMENT_REQUEST);
        put_challenge_fields(out, &self.challenge);
        put(out, &self.user_key.0);
        put(out, &self.possession.t);
        put(out, &self.possession.response);
    }
}

fixed_size_decode!(
    EnrolmentRequest,
    "enrolment request",
    ENROLMENT_REQUEST_BYTES,
    |reader: &mut Reader<'_>| {
        read_header(reader, "enrolment request", kind::ENROLMENT_REQUEST)?;
        Ok(EnrolmentRequest {
            challenge: read_challenge_fields(reader)?,
            user_key: UserPublicKey(read_g1(reader, "user public key")?),
            possession: PokDiscreteLog {
                t: read_g1(reader, "possession nonce")?,
                response: read_scalar(reader, "possession response")?,
            },
        })
    }
);

impl Encode for Credential {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::CREDENTIAL);
        out.extend_from_slice(&self.enrolment_id.0.to_le_bytes());
        out.extend_from_slice(&self.jurisdiction.0.to_le_bytes());
        put(out, &self.signature.A);
        put(out, &self.signature.e);
    }
}

fixed_size_decode!(Credential, "credential", CREDENTIAL_BYTES, |reader: &mut Reader<'_>| {
    read_header(reader, "credential", kind::CREDENTIAL)?;
    Ok(Credential {
        enrolment_id: EnrolmentId(reader.read_u64("enrolment id")?),
        jurisdiction: Jurisdiction(reader.read_u32("jurisdiction")?),
        signature: Signature23G1 {
            A: read_g1(reader, "credential signature A")?,
            e: read_scalar(reader, "credential signature e")?,
        },
    })
});

impl Encode for OwnerCommitment {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::OWNER_COMMITMENT);
        put(out, &self.0);
    }
}

fixed_size_decode!(
    OwnerCommitment,
    "owner commitment",
    OWNER_COMMITMENT_BYTES,
    |reader: &mut Reader<'_>| {
        read_header(reader, "owner commitment", kind::OWNER_COMMITMENT)?;
        Ok(OwnerCommitment(read_g1(reader, "owner commitment")?))
    }
);

impl Encode for OwnerOpening {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::OWNER_OPENING);
        out.extend_from_slice(&self.enrolment_id.0.to_le_bytes());
        put(out, &self.blinding);
    }
}

fixed_size_decode!(
    OwnerOpening,
    "owner opening",
    OWNER_OPENING_BYTES,
    |reader: &mut Reader<'_>| {
        read_header(reader, "owner opening", kind::OWNER_OPENING)?;
        Ok(OwnerOpening {
            enrolment_id: EnrolmentId(reader.read_u64("enrolment id")?),
            blinding: read_scalar(reader, "owner blinding")?,
        })
    }
);

impl Encode for AuditorKey {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::AUDITOR_KEY);
        out.extend_from_slice(&self.0);
    }
}

pub(crate) fn read_auditor_key(reader: &mut Reader<'_>) -> Result<AuditorKey, DecodeError> {
    Ok(AuditorKey::from_point(read_g1(reader, "auditor key")?))
}

fixed_size_decode!(AuditorKey, "auditor key", AUDITOR_KEY_BYTES, |reader: &mut Reader<
    '_,
>| {
    read_header(reader, "auditor key", kind::AUDITOR_KEY)?;
    read_auditor_key(reader)
});

fn put_ciphertext_fields(out: &mut Vec<u8>, ciphertext: &OwnerCiphertext) {
    out.extend_from_slice(&ciphertext.auditor.0);
    put(out, &ciphertext.ephemeral);
    put(out, &ciphertext.masked);
}

fn read_ciphertext_fields(reader: &mut Reader<'_>) -> Result<OwnerCiphertext, DecodeError> {
    Ok(OwnerCiphertext {
        auditor: read_auditor_key(reader)?,
        ephemeral: read_g1(reader, "ciphertext ephemeral")?,
        masked: read_g1(reader, "ciphertext masked id")?,
    })
}

impl Encode for OwnerCiphertext {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::OWNER_CIPHERTEXT);
        put_ciphertext_fields(out, self);
    }
}

fixed_size_decode!(
    OwnerCiphertext,
    "owner ciphertext",
    OWNER_CIPHERTEXT_BYTES,
    |reader: &mut Reader<'_>| {
        read_header(reader, "owner ciphertext", kind::OWNER_CIPHERTEXT)?;
        read_ciphertext_fields(reader)
    }
);

pub(crate) fn put_link(out: &mut Vec<u8>, link: &CiphertextLink) {
    put_ciphertext_fields(out, &link.ciphertext);
    put(out, &link.ephemeral_nonce);
    put(out, &link.masked_nonce);
    put(out, &link.ephemeral_response);
}

pub(crate) fn read_link(reader: &mut Reader<'_>) -> Result<CiphertextLink, DecodeError> {
    Ok(CiphertextLink {
        ciphertext: read_ciphertext_fields(reader)?,
        ephemeral_nonce: read_g1(reader, "link ephemeral nonce")?,
        masked_nonce: read_g1(reader, "link masked nonce")?,
        ephemeral_response: read_scalar(reader, "link ephemeral response")?,
    })
}

impl Encode for OwnerAudit {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, kind::OWNER_AUDIT);
        put_link(out, &self.link);
        put(out, &self.owner_nonce);
        put(out, &self.eid_response);
        put(out, &self.blinding_response);
    }
}

fixed_size_decode!(OwnerAudit, "owner audit", OWNER_AUDIT_BYTES, |reader: &mut Reader<
    '_,
>| {
    read_header(reader, "owner audit", kind::OWNER_AUDIT)?;
    Ok(OwnerAudit {
        link: read_link(reader)?,
        owner_nonce: read_g1(reader, "owner nonce")?,
        eid_response: read_scalar(reader, "enrolment id response")?,
        blinding_response: read_scalar(reader, "owner blinding response")?,
    })
});

impl Encode for SpendProof {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.reserve(spend_proof_bytes(self.auditors.len()));
        put_header(out, kind::SPEND_PROOF);
        put_signature_proof(out, &self.signature);
        put(out, &self.owner_nonce);
        put(out, &self.blinding_response);
        out.push(self.auditors.len() as u8);
        self.auditors.iter().for_each(|link| put_link(out, link));
    }
}

pub(crate) fn put_signature_proof(out: &mut Vec<u8>, signature: &PoKOfSignature23G1Proof<crate::group::Pairing>) {
    put(out, &signature.A_bar);
    put(out, &signature.B_bar);
    put(out, &signature.T);
    // Our prover always makes full responses; an absent one encodes as none and will not decode.
    let responses = signature.sc_resp.as_ref().map(|r| r.0.as_slice()).unwrap_or(&[]);
    responses.iter().for_each(|response| put(out, response));
}

/// A BBS proof of knowledge's encoding: `Ā`, `B̄`, `T` and the five responses.
pub(crate) const SIGNATURE_PROOF_BYTES: usize = 3 * G1_BYTES + SIGNATURE_RESPONSES * SCALAR_BYTES;

pub(crate) fn read_signature_proof(
    reader: &mut Reader<'_>,
) -> Result<PoKOfSignature23G1Proof<crate::group::Pairing>, DecodeError> {
    let a_bar: G1Affine = read_g1(reader, "signature proof A_bar")?;
    let b_bar = read_g1(reader, "signature proof B_bar")?;
    let t = read_g1(reader, "signature proof T")?;
    let responses = (0..SIGNATURE_RESPONSES)
        .map(|_| read_scalar(reader, "signature proof response"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PoKOfSignature23G1Proof {
        A_bar: a_bar,
        B_bar: b_bar,
        T: t,
        sc_resp: Some(SchnorrResponse(responses)),
        sc_partial_resp: None,
    })
}

impl Decode for SpendProof {
    type Limits = ();
    const WHAT: &'static str = "spend proof";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        read_header(reader, Self::WHAT, kind::SPEND_PROOF)?;
        let signature = read_signature_proof(reader)?;
        let owner_nonce = read_g1(reader, "owner nonce")?;
        let blinding_response = read_scalar(reader, "owner blinding response")?;
        let count = reader.read_u8_count("auditors", AUDITORS_MAX as u64, LINK_BYTES)?;
        let auditors = (0..count).map(|_| read_link(reader)).collect::<Result<Vec<_>, _>>()?;
        let keys: Vec<AuditorKey> = auditors.iter().map(|link| link.ciphertext.auditor).collect();
        if check_auditors(&keys).is_err() {
            return Err(DecodeError::NonCanonical {
                what: "auditor key",
                reason: "auditor keys must be strictly ascending",
            });
        }
        Ok(SpendProof {
            signature,
            owner_nonce,
            blinding_response,
            auditors,
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        SPEND_PROOF_BYTES_MAX
    }
}
