//! Accountable safety: two conflicting signatures of one authority, as evidence anyone can check.
//!
//! An honest authority signs at most one order per (account, sequence number, round, phase). Two
//! of its vote signatures, in one phase of one round, on two different orders from the same
//! account with the same sequence number convict it. Two conflicting certificates always contain such pairs for every
//! authority in both quorums (at least f+1 of them), and an honest authority never signs such a
//! pair, so the evidence never convicts an honest one.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha512};
use specie_codec::{put_u32, DecodeError, Reader};
use thiserror::Error;

use crate::certificate::{Certificate, VoteKind, VoteStatement};
use crate::committee::{AuthorityIndex, Committee, COMMITTEE_MEMBERS_MAX};
use crate::order::TransferOrder;
use crate::{read_version, ENCODING_VERSION, SIGNATURE_BYTES};

/// One authority's vote signature on one order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedVote {
    pub order: TransferOrder,
    pub kind: VoteKind,
    pub round: u32,
    pub signature: [u8; SIGNATURE_BYTES],
}

/// Two votes of `authority` that an honest authority never signs together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleVote {
    pub authority: AuthorityIndex,
    pub first: SignedVote,
    pub second: SignedVote,
}

/// Why a piece of evidence convicts no one.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EvidenceError {
    #[error("authority {authority} is not in the committee")]
    UnknownAuthority { authority: AuthorityIndex },
    #[error("the two orders are for different accounts or sequence numbers: no conflict")]
    NoConflict,
    #[error("the two votes are in different rounds or phases")]
    DifferentRounds,
    #[error("the two votes are for the same order")]
    SameOrder,
    #[error("authority {authority}'s signature does not verify")]
    BadSignature { authority: AuthorityIndex },
    #[error("the evidence convicts no one")]
    Empty,
}

impl DoubleVote {
    /// Checks the pair against the committee: same account, sequence number and round,
    /// different orders, and both signatures verify under the cofactored equation (see
    /// `verify_cofactored`: not strictly, or a signer could escape conviction).
    pub fn check(&self, committee: &Committee) -> Result<(), EvidenceError> {
        let key = committee.key(self.authority).ok_or(EvidenceError::UnknownAuthority {
            authority: self.authority,
        })?;
        let (a, b) = (&self.first, &self.second);
        if a.order.sender != b.order.sender || a.order.sequence != b.order.sequence {
            return Err(EvidenceError::NoConflict);
        }
        if (a.kind, a.round) != (b.kind, b.round) {
            return Err(EvidenceError::DifferentRounds);
        }
        if a.order == b.order {
            return Err(EvidenceError::SameOrder);
        }
        for vote in [a, b] {
            let statement = VoteStatement {
                committee_id: committee.id(),
                kind: vote.kind,
                round: vote.round,
                order_digest: vote.order.digest(),
            };
            if !verify_cofactored(key, &statement.signing_bytes(), &vote.signature) {
                return Err(EvidenceError::BadSignature {
                    authority: self.authority,
                });
            }
        }
        Ok(())
    }

    /// The double votes two conflicting certificates of `committee` prove: one for every
    /// authority that signed both. Empty if they do not conflict.
    pub fn from_certificates(first: &Certificate, second: &Certificate) -> Vec<DoubleVote> {
        let (a, b) = (&first.order.order, &second.order.order);
        let same_phase = (first.kind, first.round) == (second.kind, second.round);
        if a.sender != b.sender || a.sequence != b.sequence || a == b || !same_phase {
            return Vec::new();
        }
        first
            .signatures
            .iter()
            .filter_map(|&(authority, signature)| {
                let (_, other) = second.signatures.iter().find(|(signer, _)| *signer == authority)?;
                Some(DoubleVote {
                    authority,
                    first: SignedVote {
                        order: a.clone(),
                        kind: first.kind,
                        round: first.round,
                        signature,
                    },
                    second: SignedVote {
                        order: b.clone(),
                        kind: second.kind,
                        round: second.round,
                        signature: *other,
                    },
                })
            })
            .collect()
    }
}

/// What `specie byzantine check-evidence` reads: the committee and the double votes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub committee: Committee,
    pub double_votes: Vec<DoubleVote>,
}

impl Evidence {
    /// The convicted authorities, each once, in index order, if every double vote checks.
    pub fn convicted(&self) -> Result<Vec<AuthorityIndex>, EvidenceError> {
        if self.double_votes.is_empty() {
            return Err(EvidenceError::Empty);
        }
        let mut convicted = Vec::new();
        for double_vote in &self.double_votes {
            double_vote.check(&self.committee)?;
            convicted.push(double_vote.authority);
        }
        convicted.sort_unstable();
        convicted.dedup();
        Ok(convicted)
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        self.committee.encode_to(out);
        put_u32(out, self.double_votes.len() as u32);
        for double_vote in &self.double_votes {
            out.extend_from_slice(&double_vote.authority.to_le_bytes());
            for vote in [&double_vote.first, &double_vote.second] {
                vote.order.encode_to(out);
                out.push(vote.kind as u8);
                put_u32(out, vote.round);
                out.extend_from_slice(&vote.signature);
            }
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Evidence, DecodeError> {
        read_version(reader, "evidence")?;
        let committee = Committee::decode_from(reader)?;
        // Each double vote is at least its authority and two minimal votes.
        let minimal_vote_bytes = 1 + 32 + 1 + 32 + 8 + 8 + 4 + 1 + 4 + SIGNATURE_BYTES;
        let count = reader.read_u32_count(
            "evidence double votes",
            COMMITTEE_MEMBERS_MAX as u64,
            2 + 2 * minimal_vote_bytes,
        )?;
        let mut double_votes = Vec::with_capacity(count);
        for _ in 0..count {
            let authority = u16::from_le_bytes(reader.read_array("evidence authority")?);
            let first = read_signed_vote(reader)?;
            let second = read_signed_vote(reader)?;
            double_votes.push(DoubleVote {
                authority,
                first,
                second,
            });
        }
        Ok(Evidence {
            committee,
            double_votes,
        })
    }
}

/// Ed25519's cofactored verification, `[8]([s]B − R − [k]A) = 0` with `k = SHA-512(R ‖ A ‖ M)`
/// and `s` canonical, which accepts every signature that verifies strictly and, but for a
/// negligible chance, every one that a certificate's batch verification accepts. Strict
/// verification would not do for evidence: a signer can put a small-order component into its
/// nonce point R (or its committee key), which the batch equation's random multipliers cancel
/// about half the time and which strict verification always refuses. Such a signer could sign
/// two certified conflicting orders and still not be convicted. Forging a signature that this
/// equation accepts is as hard as forging one that verifies strictly, so it frames no one.
fn verify_cofactored(key: &VerifyingKey, message: &[u8], signature: &[u8; SIGNATURE_BYTES]) -> bool {
    let signature = Signature::from_bytes(signature);
    let Some(s) = Option::<Scalar>::from(Scalar::from_canonical_bytes(*signature.s_bytes())) else {
        return false;
    };
    let Some(nonce_point) = CompressedEdwardsY(*signature.r_bytes()).decompress() else {
        return false;
    };
    let k = Scalar::from_hash(
        Sha512::new()
            .chain_update(signature.r_bytes())
            .chain_update(key.as_bytes())
            .chain_update(message),
    );
    let difference = EdwardsPoint::vartime_double_scalar_mul_basepoint(&-k, &key.to_edwards(), &s) - nonce_point;
    difference.mul_by_cofactor().is_identity()
}

fn read_signed_vote(reader: &mut Reader<'_>) -> Result<SignedVote, DecodeError> {
    Ok(SignedVote {
        order: TransferOrder::decode_from(reader)?,
        kind: VoteKind::read(reader, "evidence vote kind")?,
        round: reader.read_u32("evidence vote round")?,
        signature: reader.read_array("evidence vote signature")?,
    })
}
