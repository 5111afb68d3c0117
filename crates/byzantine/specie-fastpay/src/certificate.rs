//! Votes (one authority's signature on an order) and certificates (a quorum of them).

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use specie_codec::{put_u32, DecodeError, Reader};
use thiserror::Error;

use crate::committee::{AuthorityIndex, Committee, COMMITTEE_MEMBERS_MAX};
use crate::order::{OrderError, SignedOrder, SIGNED_ORDER_BYTES_MAX};
use crate::{read_version, ENCODING_VERSION, SIGNATURE_BYTES};

/// Signed by authorities: keeps a vote signature from being valid as anything else.
const VOTE_DOMAIN: &[u8] = b"specie/fastpay/vote/v2";

/// The longest canonical certificate encoding: version, the longest signed order, committee id,
/// kind, round, signature count, and a signature from every member of the largest committee. A
/// decoder handed more bytes than this for one certificate refuses them before reading.
pub const CERTIFICATE_BYTES_MAX: usize =
    1 + SIGNED_ORDER_BYTES_MAX + 32 + 1 + 4 + 4 + COMMITTEE_MEMBERS_MAX * (2 + SIGNATURE_BYTES);

/// The two phases of a round (docs/byzantine-mode.md, "Rounds").
///
/// `Prepare`: the authority accepts the order for the account's slot in this round (FastPay's
/// vote). Prepare votes of *every* member in round 0 are final at once (the fast path); a
/// quorum of them in any round is only a *lock*. `Commit`: the authority saw that lock and
/// locked the order itself; a quorum of commit votes is final. Only final certificates settle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VoteKind {
    Prepare = 0,
    Commit = 1,
}

impl VoteKind {
    pub fn from_byte(byte: u8) -> Option<VoteKind> {
        match byte {
            0 => Some(VoteKind::Prepare),
            1 => Some(VoteKind::Commit),
            _ => None,
        }
    }

    pub fn read(reader: &mut Reader<'_>, what: &'static str) -> Result<VoteKind, DecodeError> {
        let byte = reader.read_u8(what)?;
        VoteKind::from_byte(byte).ok_or(DecodeError::NonCanonical {
            what,
            reason: "a vote kind is 0 (prepare) or 1 (commit)",
        })
    }
}

/// What an authority's vote signature covers: this committee, this phase of this round, this
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VoteStatement {
    pub committee_id: [u8; 32],
    pub kind: VoteKind,
    /// 0 is FastPay's round; rounds ≥ 1 recover an account whose owner signed two orders for
    /// one sequence number (or whose round 0 stalled).
    pub round: u32,
    pub order_digest: [u8; 32],
}

impl VoteStatement {
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(VOTE_DOMAIN.len() + 1 + 32 + 1 + 4 + 32);
        bytes.extend_from_slice(VOTE_DOMAIN);
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(&self.committee_id);
        bytes.push(self.kind as u8);
        put_u32(&mut bytes, self.round);
        bytes.extend_from_slice(&self.order_digest);
        bytes
    }

    pub fn sign(&self, authority: &SigningKey) -> [u8; SIGNATURE_BYTES] {
        authority.sign(&self.signing_bytes()).to_bytes()
    }

    /// Strict single verification (for votes one at a time; evidence uses the cofactored equation).
    pub fn verify(&self, key: &VerifyingKey, signature: &[u8; SIGNATURE_BYTES]) -> bool {
        key.verify_strict(&self.signing_bytes(), &Signature::from_bytes(signature))
            .is_ok()
    }
}

/// One authority's signed answer to a transfer order it accepted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Vote {
    pub authority: AuthorityIndex,
    pub statement: VoteStatement,
    pub signature: [u8; SIGNATURE_BYTES],
}

impl Vote {
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.authority.to_le_bytes());
        out.extend_from_slice(&self.statement.committee_id);
        out.push(self.statement.kind as u8);
        put_u32(out, self.statement.round);
        out.extend_from_slice(&self.statement.order_digest);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Vote, DecodeError> {
        read_version(reader, "vote")?;
        let authority = u16::from_le_bytes(reader.read_array("vote authority")?);
        let committee_id = reader.read_array("vote committee id")?;
        let kind = VoteKind::read(reader, "vote kind")?;
        let round = reader.read_u32("vote round")?;
        let order_digest = reader.read_array("vote order digest")?;
        let signature = reader.read_array("vote signature")?;
        Ok(Vote {
            authority,
            statement: VoteStatement {
                committee_id,
                kind,
                round,
                order_digest,
            },
            signature,
        })
    }

    /// Whether this is a valid vote of `committee`'s member making `expected` (what a client
    /// checks before counting it towards a certificate).
    pub fn check(&self, committee: &Committee, expected: &VoteStatement) -> Result<(), VoteError> {
        if self.statement.committee_id != committee.id() {
            return Err(VoteError::WrongCommittee);
        }
        if self.statement.order_digest != expected.order_digest {
            return Err(VoteError::OtherOrder);
        }
        if self.statement != *expected {
            return Err(VoteError::OtherPhase);
        }
        let key = committee.key(self.authority).ok_or(VoteError::UnknownAuthority {
            authority: self.authority,
        })?;
        if !self.statement.verify(key, &self.signature) {
            return Err(VoteError::BadSignature);
        }
        Ok(())
    }
}

/// Why a vote does not count.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VoteError {
    #[error("the vote is for another committee")]
    WrongCommittee,
    #[error("the vote is for another order")]
    OtherOrder,
    #[error("the vote is for another round or phase")]
    OtherPhase,
    #[error("authority {authority} is not in the committee")]
    UnknownAuthority { authority: AuthorityIndex },
    #[error("the vote's signature does not verify")]
    BadSignature,
}

/// A transfer order with votes of one phase of one round from distinct members. Final (proof
/// that the payment settles, [`Certificate::check`]) when it holds prepare votes of every member
/// in round 0 or commit votes of a quorum in any round; a lock ([`Certificate::check_lock`])
/// when it holds prepare votes of a quorum. Signatures are sorted by authority index, strictly
/// (so one encoding per certificate, and a repeated signer is refused by the decoder and the
/// checks).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Certificate {
    pub order: SignedOrder,
    pub committee_id: [u8; 32],
    pub kind: VoteKind,
    pub round: u32,
    pub signatures: Vec<(AuthorityIndex, [u8; SIGNATURE_BYTES])>,
}

/// Why a certificate is refused. `Copy`, so that verdicts which carry it (the online core's
/// validation errors) stay `Copy` too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum CertificateError {
    #[error("signed by another committee")]
    WrongCommittee,
    #[error("prepare votes of round {round}: a lock, never final (only round 0 has a fast path)")]
    NotFinal { round: u32 },
    #[error("commit votes are a final certificate, not a lock")]
    NotALock,
    #[error("{signers} distinct signers, below the quorum of {quorum}")]
    BelowQuorum { signers: usize, quorum: usize },
    #[error("authority {authority} signs more than once")]
    RepeatedSigner { authority: AuthorityIndex },
    #[error("signatures are not sorted by authority")]
    Unsorted,
    #[error("authority {authority} is not in the committee")]
    UnknownAuthority { authority: AuthorityIndex },
    #[error("the certified order is invalid: {0}")]
    Order(#[from] OrderError),
    #[error("authority {authority}'s signature does not verify")]
    BadSignature { authority: AuthorityIndex },
}

impl Certificate {
    /// The statement every signature of this certificate signs.
    pub fn statement(&self) -> VoteStatement {
        VoteStatement {
            committee_id: self.committee_id,
            kind: self.kind,
            round: self.round,
            order_digest: self.order.order.digest(),
        }
    }

    /// Whether the order settles: a final certificate (see [`Certificate`]). Every check of a
    /// confirmation order that needs no account state.
    pub fn check(&self, committee: &Committee) -> Result<(), CertificateError> {
        let signers_min = match (self.kind, self.round) {
            (VoteKind::Commit, _) => committee.quorum(),
            (VoteKind::Prepare, 0) => committee.size(),
            (VoteKind::Prepare, round) => return Err(CertificateError::NotFinal { round }),
        };
        self.check_signed(committee, signers_min)
    }

    /// Whether this is a lock: prepare votes of a quorum for the order in its round.
    pub fn check_lock(&self, committee: &Committee) -> Result<(), CertificateError> {
        if self.kind != VoteKind::Prepare {
            return Err(CertificateError::NotALock);
        }
        self.check_signed(committee, committee.quorum())
    }

    /// Builds a certificate from votes a client checked with [`Vote::check`].
    pub fn from_votes(order: SignedOrder, votes: &[Vote]) -> Certificate {
        let statement = votes.first().expect("at least one vote").statement;
        let mut signatures: Vec<_> = votes.iter().map(|vote| (vote.authority, vote.signature)).collect();
        signatures.sort_by_key(|(authority, _)| *authority);
        signatures.dedup_by_key(|(authority, _)| *authority);
        Certificate {
            order,
            committee_id: statement.committee_id,
            kind: statement.kind,
            round: statement.round,
            signatures,
        }
    }

    /// In this order: the committee, at least `quorum` distinct known signers, the order's
    /// fields, then one batch verification of the owner's signature and every authority's
    /// (FastPay §6). If the batch fails, single verification names the first bad signer.
    fn check_signed(&self, committee: &Committee, quorum: usize) -> Result<(), CertificateError> {
        if self.committee_id != committee.id() {
            return Err(CertificateError::WrongCommittee);
        }
        for pair in self.signatures.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(CertificateError::RepeatedSigner { authority: pair[0].0 });
            }
            if pair[0].0 > pair[1].0 {
                return Err(CertificateError::Unsorted);
            }
        }
        if self.signatures.len() < quorum {
            return Err(CertificateError::BelowQuorum {
                signers: self.signatures.len(),
                quorum,
            });
        }
        let mut keys = Vec::with_capacity(self.signatures.len() + 1);
        for &(authority, _) in &self.signatures {
            keys.push(
                *committee
                    .key(authority)
                    .ok_or(CertificateError::UnknownAuthority { authority })?,
            );
        }
        self.order.order.check_fields()?;
        keys.push(self.order.order.sender_key()?);

        let statement_bytes = self.statement().signing_bytes();
        let order_bytes = self.order.order.signing_bytes();
        let mut messages: Vec<&[u8]> = vec![&statement_bytes; self.signatures.len()];
        messages.push(&order_bytes);
        let mut signatures: Vec<Signature> = self
            .signatures
            .iter()
            .map(|(_, signature)| Signature::from_bytes(signature))
            .collect();
        signatures.push(Signature::from_bytes(&self.order.signature));
        if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok() {
            return Ok(());
        }
        self.order.check()?;
        let statement = self.statement();
        for (&(authority, ref signature), key) in self.signatures.iter().zip(&keys) {
            if !statement.verify(key, signature) {
                return Err(CertificateError::BadSignature { authority });
            }
        }
        // The batch equation failed but every signature verifies alone: a malformed signature
        // crafted for the difference between the two; refuse it all the same.
        Err(CertificateError::BadSignature {
            authority: self.signatures[0].0,
        })
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        self.order.encode_to(out);
        out.extend_from_slice(&self.committee_id);
        out.push(self.kind as u8);
        put_u32(out, self.round);
        put_u32(out, self.signatures.len() as u32);
        for (authority, signature) in &self.signatures {
            out.extend_from_slice(&authority.to_le_bytes());
            out.extend_from_slice(signature);
        }
    }

    /// Reads a certificate; signers must be strictly increasing (the one canonical form).
    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Certificate, DecodeError> {
        read_version(reader, "certificate")?;
        let order = SignedOrder::decode_from(reader)?;
        let committee_id = reader.read_array("certificate committee id")?;
        let kind = VoteKind::read(reader, "certificate kind")?;
        let round = reader.read_u32("certificate round")?;
        let count = reader.read_u32_count(
            "certificate signatures",
            COMMITTEE_MEMBERS_MAX as u64,
            2 + SIGNATURE_BYTES,
        )?;
        let mut signatures: Vec<(AuthorityIndex, [u8; SIGNATURE_BYTES])> = Vec::with_capacity(count);
        for _ in 0..count {
            let authority = u16::from_le_bytes(reader.read_array("certificate signer")?);
            if signatures.last().is_some_and(|(last, _)| *last >= authority) {
                return Err(DecodeError::NonCanonical {
                    what: "certificate signatures",
                    reason: "signers must be strictly increasing",
                });
            }
            signatures.push((authority, reader.read_array("certificate signature")?));
        }
        Ok(Certificate {
            order,
            committee_id,
            kind,
            round,
            signatures,
        })
    }
}
