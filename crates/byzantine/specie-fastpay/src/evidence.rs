//! Accountable safety: two conflicting signatures of one authority, as evidence anyone can check.
//!
//! - A [`DoubleVote`]: an honest authority signs at most one order per (account, sequence
//!   number, round, phase). Two of its vote signatures, in one phase of one round, on two
//!   different orders from the same account with the same sequence number convict it. Two
//!   conflicting certificates of one phase and round always contain such pairs for every
//!   authority in both quorums (at least f+1 of them).
//! - A [`BrokenPromise`]: a round change (docs/byzantine-mode.md, "Rounds") is a promise about
//!   every lower round of the slot; a vote of the same authority that contradicts it
//!   ([`RoundChange::contradicted_by`]) convicts it. This is what an authority leaves behind when
//!   it hides a lock or a round-0 prepare to let a later round settle another order, the only
//!   way two final certificates of different rounds can exist.
//!
//! An honest authority never signs either pair, so the evidence never convicts an honest one.

use specie_codec::{put_u32, DecodeError, Reader};
use thiserror::Error;

use crate::certificate::{Certificate, VoteKind, VoteStatement};
use crate::committee::{AuthorityIndex, Committee, COMMITTEE_MEMBERS_MAX};
use crate::order::TransferOrder;
use crate::rounds::{RoundChange, SignedRoundChange};
use crate::SIGNATURE_BYTES;

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

/// An authority's round change and one of its votes, for the same slot, that contradict each
/// other ([`RoundChange::contradicted_by`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenPromise {
    pub authority: AuthorityIndex,
    pub change: RoundChange,
    /// The authority's signature over the round change.
    pub change_signature: [u8; SIGNATURE_BYTES],
    pub vote: SignedVote,
}

impl BrokenPromise {
    /// Checks the pair against the committee: the round change is this committee's and for
    /// the vote's slot, the vote contradicts it, and both signatures verify under the
    /// cofactored equation with the member's key.
    pub fn check(&self, committee: &Committee) -> Result<(), EvidenceError> {
        let authority = self.authority;
        let key = committee
            .key(authority)
            .ok_or(EvidenceError::UnknownAuthority { authority })?;
        let (change, vote) = (&self.change, &self.vote);
        if change.committee_id != committee.id() {
            return Err(EvidenceError::OtherCommittee);
        }
        if (change.account, change.sequence) != (vote.order.sender, vote.order.sequence) {
            return Err(EvidenceError::NoConflict);
        }
        if !change.contradicted_by(vote.kind, vote.round, &vote.order.digest()) {
            return Err(EvidenceError::PromiseKept);
        }
        let statement = VoteStatement {
            committee_id: committee.id(),
            kind: vote.kind,
            round: vote.round,
            order_digest: vote.order.digest(),
        };
        let signed = [
            (change.signing_bytes(), &self.change_signature),
            (statement.signing_bytes(), &vote.signature),
        ];
        if signed
            .iter()
            .any(|(message, signature)| !specie_ed25519::verify_cofactored(key, message, signature))
        {
            return Err(EvidenceError::BadSignature { authority });
        }
        Ok(())
    }

    /// The broken promises among `changes` (checked round changes) and the votes of
    /// `certificates` (checked too): every pair of one authority where its vote in a
    /// certificate contradicts its round change.
    pub fn find<'a>(
        changes: impl IntoIterator<Item = &'a SignedRoundChange>,
        certificates: &[&Certificate],
    ) -> Vec<BrokenPromise> {
        let mut found = Vec::new();
        for signed in changes {
            let change = &signed.change;
            for certificate in certificates {
                let order = &certificate.order.order;
                if (order.sender, order.sequence) != (change.account, change.sequence)
                    || !change.contradicted_by(certificate.kind, certificate.round, &order.digest())
                {
                    continue;
                }
                let Some(&(_, signature)) = certificate.signatures.iter().find(|(a, _)| *a == signed.authority) else {
                    continue;
                };
                found.push(BrokenPromise {
                    authority: signed.authority,
                    change: *change,
                    change_signature: signed.signature,
                    vote: SignedVote {
                        order: order.clone(),
                        kind: certificate.kind,
                        round: certificate.round,
                        signature,
                    },
                });
            }
        }
        found
    }
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
    #[error("the round change is another committee's")]
    OtherCommittee,
    #[error("the vote does not contradict the round change")]
    PromiseKept,
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
            if !specie_ed25519::verify_cofactored(key, &statement.signing_bytes(), &vote.signature) {
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

/// The version byte of an evidence file: 3 since evidence carries broken promises. Every other
/// value of this crate is still at [`ENCODING_VERSION`]; evidence is never signed, so its layout
/// moved alone.
pub const EVIDENCE_VERSION: u8 = 3;

/// What `specie byzantine check-evidence` reads: the committee, double votes and broken promises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub committee: Committee,
    pub double_votes: Vec<DoubleVote>,
    pub broken_promises: Vec<BrokenPromise>,
}

/// The smallest encoded vote of an evidence file: an order without memo, kind, round, signature.
const MINIMAL_VOTE_BYTES: usize = 1 + 32 + 1 + 32 + 8 + 8 + 4 + 1 + 4 + SIGNATURE_BYTES;
/// The smallest encoded round change: no reports.
const MINIMAL_ROUND_CHANGE_BYTES: usize = 1 + 32 + 32 + 8 + 4 + 1 + 1;

impl Evidence {
    /// The convicted authorities, each once, in index order, if every pair checks.
    pub fn convicted(&self) -> Result<Vec<AuthorityIndex>, EvidenceError> {
        if self.double_votes.is_empty() && self.broken_promises.is_empty() {
            return Err(EvidenceError::Empty);
        }
        let mut convicted = Vec::new();
        for double_vote in &self.double_votes {
            double_vote.check(&self.committee)?;
            convicted.push(double_vote.authority);
        }
        for broken in &self.broken_promises {
            broken.check(&self.committee)?;
            convicted.push(broken.authority);
        }
        convicted.sort_unstable();
        convicted.dedup();
        Ok(convicted)
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(EVIDENCE_VERSION);
        self.committee.encode_to(out);
        put_u32(out, self.double_votes.len() as u32);
        for double_vote in &self.double_votes {
            out.extend_from_slice(&double_vote.authority.to_le_bytes());
            write_signed_vote(&double_vote.first, out);
            write_signed_vote(&double_vote.second, out);
        }
        put_u32(out, self.broken_promises.len() as u32);
        for broken in &self.broken_promises {
            out.extend_from_slice(&broken.authority.to_le_bytes());
            broken.change.encode_fields(out);
            out.extend_from_slice(&broken.change_signature);
            write_signed_vote(&broken.vote, out);
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Evidence, DecodeError> {
        match reader.read_u8("evidence")? {
            EVIDENCE_VERSION => {}
            version => {
                return Err(DecodeError::UnsupportedVersion {
                    what: "evidence",
                    version,
                    supported: EVIDENCE_VERSION,
                })
            }
        }
        let committee = Committee::decode_from(reader)?;
        // Each double vote is at least its authority and two minimal votes.
        let count = reader.read_u32_count(
            "evidence double votes",
            COMMITTEE_MEMBERS_MAX as u64,
            2 + 2 * MINIMAL_VOTE_BYTES,
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
        let count = reader.read_u32_count(
            "evidence broken promises",
            COMMITTEE_MEMBERS_MAX as u64,
            2 + MINIMAL_ROUND_CHANGE_BYTES + SIGNATURE_BYTES + MINIMAL_VOTE_BYTES,
        )?;
        let mut broken_promises = Vec::with_capacity(count);
        for _ in 0..count {
            broken_promises.push(BrokenPromise {
                authority: u16::from_le_bytes(reader.read_array("evidence authority")?),
                change: RoundChange::decode_fields(reader)?,
                change_signature: reader.read_array("evidence round change signature")?,
                vote: read_signed_vote(reader)?,
            });
        }
        Ok(Evidence {
            committee,
            double_votes,
            broken_promises,
        })
    }
}

fn write_signed_vote(vote: &SignedVote, out: &mut Vec<u8>) {
    vote.order.encode_to(out);
    out.push(vote.kind as u8);
    put_u32(out, vote.round);
    out.extend_from_slice(&vote.signature);
}

fn read_signed_vote(reader: &mut Reader<'_>) -> Result<SignedVote, DecodeError> {
    Ok(SignedVote {
        order: TransferOrder::decode_from(reader)?,
        kind: VoteKind::read(reader, "evidence vote kind")?,
        round: reader.read_u32("evidence vote round")?,
        signature: reader.read_array("evidence vote signature")?,
    })
}
