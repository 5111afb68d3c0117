//! Recovery rounds: how an account whose round 0 stalled (its owner signed two orders for one
//! sequence number, or too few authorities answered) still reaches a final certificate, without
//! ever contradicting one that may already exist (docs/byzantine-mode.md, "Rounds").
//!
//! Before voting in round r ≥ 1 an authority signs a [`RoundChange`]: it will act in no round
//! below r for the slot, and it reports the order it prepared in round 0 and its highest lock. A
//! proposal for round r carries a [`Justification`], the round changes of a quorum, which decides
//! the orders the round may prepare ([`Allowed`]):
//! - the order of the highest lock reported, if any (a commit quorum in round ℓ means a quorum of
//!   authorities locked in ℓ, at least one honest among any quorum of reporters);
//! - else, if exactly one order was reported prepared in round 0 by more than f authorities, that
//!   order (a fast certificate means every honest authority prepared it: more than f of any
//!   quorum report it, and at most f, the faulty ones, report another);
//! - else any order the owner signed for the slot.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use specie_codec::{put_u32, put_u64, DecodeError, Reader};
use thiserror::Error;

use crate::certificate::{Certificate, CertificateError, VoteKind, CERTIFICATE_BYTES_MAX};
use crate::committee::{AuthorityIndex, Committee, COMMITTEE_MEMBERS_MAX};
use crate::order::AccountKey;
use crate::{read_version, ENCODING_VERSION, SIGNATURE_BYTES};

/// Signed by authorities entering a round: never valid as a vote or anything else.
const ROUND_CHANGE_DOMAIN: &[u8] = b"specie/fastpay/round-change/v2";
/// Signed by account owners asking the committee to enter a round of their slot.
const ROUND_REQUEST_DOMAIN: &[u8] = b"specie/fastpay/round-request/v2";

/// The longest canonical signed round change: its version and signer, the round change's own
/// version and fixed fields, both options, the signature, and the longest lock certificate.
pub const SIGNED_ROUND_CHANGE_BYTES_MAX: usize =
    1 + 2 + 1 + 32 + 32 + 8 + 4 + (1 + 32) + (1 + 4 + 32) + SIGNATURE_BYTES + 1 + CERTIFICATE_BYTES_MAX;
/// The longest canonical justification: a round change from every member of the largest
/// committee.
pub const JUSTIFICATION_BYTES_MAX: usize = 1 + 4 + COMMITTEE_MEMBERS_MAX * SIGNED_ROUND_CHANGE_BYTES_MAX;

/// An authority's statement on entering `round` for one account's slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoundChange {
    pub committee_id: [u8; 32],
    pub account: AccountKey,
    pub sequence: u64,
    pub round: u32,
    /// The digest of the order this authority prepared in round 0, if it prepared one.
    pub prepared_first: Option<[u8; 32]>,
    /// Its highest lock: the round and the digest of the locked order.
    pub lock: Option<(u32, [u8; 32])>,
}

impl RoundChange {
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(ROUND_CHANGE_DOMAIN.len() + 128);
        bytes.extend_from_slice(ROUND_CHANGE_DOMAIN);
        self.encode_fields(&mut bytes);
        bytes
    }

    pub(crate) fn encode_fields(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.committee_id);
        out.extend_from_slice(&self.account.0);
        put_u64(out, self.sequence);
        put_u32(out, self.round);
        match self.prepared_first {
            None => out.push(0),
            Some(digest) => {
                out.push(1);
                out.extend_from_slice(&digest);
            }
        }
        match self.lock {
            None => out.push(0),
            Some((round, digest)) => {
                out.push(1);
                put_u32(out, round);
                out.extend_from_slice(&digest);
            }
        }
    }

    pub(crate) fn decode_fields(reader: &mut Reader<'_>) -> Result<RoundChange, DecodeError> {
        read_version(reader, "round change")?;
        let committee_id = reader.read_array("round change committee id")?;
        let account = AccountKey(reader.read_array("round change account")?);
        let sequence = reader.read_u64("round change sequence")?;
        let round = reader.read_u32("round change round")?;
        let prepared_first = match reader.read_bool("round change prepared")? {
            false => None,
            true => Some(reader.read_array("round change prepared digest")?),
        };
        let lock = match reader.read_bool("round change lock")? {
            false => None,
            true => Some((
                reader.read_u32("round change lock round")?,
                reader.read_array("round change lock digest")?,
            )),
        };
        Ok(RoundChange {
            committee_id,
            account,
            sequence,
            round,
            prepared_first,
            lock,
        })
    }

    /// Whether an authority that signed this round change contradicts it by having signed a
    /// vote of `kind` in `round` for the order with `digest` (same slot): an honest authority
    /// enters a round only after every act in a lower one, acts in no lower round afterwards, and
    /// reports its round-0 prepare and its highest lock truthfully. So a round-0 prepare must be
    /// the one reported, and a commit vote (a lock) in a lower round must be covered by the
    /// reported lock: at a higher round, or at that round on that order. A prepare of a round
    /// ≥ 1 is not reported, and votes of this round or later ones promise nothing here.
    pub fn contradicted_by(&self, kind: VoteKind, round: u32, digest: &[u8; 32]) -> bool {
        if round >= self.round {
            return false;
        }
        match kind {
            VoteKind::Prepare => round == 0 && self.prepared_first != Some(*digest),
            VoteKind::Commit => match self.lock {
                None => true,
                Some((lock_round, locked)) => lock_round < round || (lock_round == round && locked != *digest),
            },
        }
    }

    pub fn sign(self, authority: AuthorityIndex, key: &SigningKey, lock: Option<Certificate>) -> SignedRoundChange {
        SignedRoundChange {
            authority,
            change: self,
            signature: key.sign(&self.signing_bytes()).to_bytes(),
            lock_certificate: lock,
        }
    }
}

/// A round change with its signature and, when it reports a lock, the lock's certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedRoundChange {
    pub authority: AuthorityIndex,
    pub change: RoundChange,
    pub signature: [u8; SIGNATURE_BYTES],
    pub lock_certificate: Option<Certificate>,
}

/// An account owner's request that authorities enter `round` of its slot (`account`,
/// `sequence`). Only the owner may move its slot to a later round: were round changes free for
/// anyone to ask, a stranger could spend an account's recovery rounds and lock it out. A copy
/// replayed by someone else only asks for a round the owner asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoundRequest {
    pub committee_id: [u8; 32],
    pub account: AccountKey,
    pub sequence: u64,
    pub round: u32,
}

/// A round request with the owner's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignedRoundRequest {
    pub request: RoundRequest,
    pub signature: [u8; SIGNATURE_BYTES],
}

/// Why an authority refuses a round request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum RoundRequestError {
    #[error("the request is for another committee")]
    OtherCommittee,
    #[error("round 0 needs no request; recovery rounds start at 1")]
    RoundZero,
    #[error("the account is not a valid Ed25519 public key, or a weak one")]
    BadAccountKey,
    #[error("the owner's signature does not verify")]
    BadSignature,
}

impl RoundRequest {
    /// The canonical length of a signed round request: version, committee id, account,
    /// sequence, round, signature.
    pub const SIGNED_BYTES: usize = 1 + 32 + 32 + 8 + 4 + SIGNATURE_BYTES;

    fn encode_fields(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.committee_id);
        out.extend_from_slice(&self.account.0);
        put_u64(out, self.sequence);
        put_u32(out, self.round);
    }

    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(ROUND_REQUEST_DOMAIN.len() + Self::SIGNED_BYTES);
        bytes.extend_from_slice(ROUND_REQUEST_DOMAIN);
        self.encode_fields(&mut bytes);
        bytes
    }

    pub fn sign(self, owner: &SigningKey) -> SignedRoundRequest {
        debug_assert_eq!(
            owner.verifying_key().to_bytes(),
            self.account.0,
            "signed by the account's owner"
        );
        SignedRoundRequest {
            request: self,
            signature: owner.sign(&self.signing_bytes()).to_bytes(),
        }
    }
}

impl SignedRoundRequest {
    /// Whether the account's owner asks `committee` for a recovery round (the signature is
    /// verified strictly, as an order's is).
    pub fn check(&self, committee: &Committee) -> Result<(), RoundRequestError> {
        let request = &self.request;
        if request.committee_id != committee.id() {
            return Err(RoundRequestError::OtherCommittee);
        }
        if request.round == 0 {
            return Err(RoundRequestError::RoundZero);
        }
        let key = VerifyingKey::from_bytes(&request.account.0).map_err(|_| RoundRequestError::BadAccountKey)?;
        if key.is_weak() {
            return Err(RoundRequestError::BadAccountKey);
        }
        key.verify_strict(&request.signing_bytes(), &Signature::from_bytes(&self.signature))
            .map_err(|_| RoundRequestError::BadSignature)
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        self.request.encode_fields(out);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<SignedRoundRequest, DecodeError> {
        read_version(reader, "round request")?;
        let request = RoundRequest {
            committee_id: reader.read_array("round request committee id")?,
            account: AccountKey(reader.read_array("round request account")?),
            sequence: reader.read_u64("round request sequence")?,
            round: reader.read_u32("round request round")?,
        };
        let signature = reader.read_array("round request signature")?;
        Ok(SignedRoundRequest { request, signature })
    }
}

/// Which orders a justified round may prepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    Any,
    /// Only the order with this digest; `lock_round` is the round of the lock that decided it
    /// (`None`: decided by round-0 reports).
    Only {
        digest: [u8; 32],
        lock_round: Option<u32>,
    },
}

impl Allowed {
    pub fn allows(&self, digest: &[u8; 32]) -> bool {
        match self {
            Allowed::Any => true,
            Allowed::Only { digest: only, .. } => only == digest,
        }
    }
}

/// The round changes of a quorum for one slot and round, sorted by authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Justification {
    pub changes: Vec<SignedRoundChange>,
}

/// Why a justification does not justify.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum JustificationError {
    #[error("round 0 needs no justification; recovery rounds start at 1")]
    RoundZero,
    #[error("{signers} distinct authorities, below the quorum of {quorum}")]
    BelowQuorum { signers: usize, quorum: usize },
    #[error("round changes must be sorted by authority, each once")]
    Unsorted,
    #[error("authority {authority} is not in the committee")]
    UnknownAuthority { authority: AuthorityIndex },
    #[error("authority {authority}'s round change is for another committee, slot or round")]
    OtherSlot { authority: AuthorityIndex },
    #[error("authority {authority}'s round change signature does not verify")]
    BadSignature { authority: AuthorityIndex },
    #[error("authority {authority} reports a lock without its certificate, or a certificate without a lock")]
    LockUnproven { authority: AuthorityIndex },
    #[error("authority {authority}'s lock certificate does not match its report: {reason}")]
    BadLock { authority: AuthorityIndex, reason: String },
}

/// The lookup of lock committees that knows one committee only: locks of one epoch.
fn only<'c>(committee: &'c Committee) -> impl Fn(&[u8; 32]) -> Option<&'c Committee> + 'c {
    move |id: &[u8; 32]| (*id == committee.id()).then_some(committee)
}

impl Justification {
    /// Checks the justification for `round` of (`account`, `sequence`) and says which orders
    /// the round may prepare.
    pub fn check(
        &self,
        committee: &Committee,
        account: &AccountKey,
        sequence: u64,
        round: u32,
    ) -> Result<Allowed, JustificationError> {
        self.check_in(committee, &only(committee), account, sequence, round)
    }

    /// [`Justification::check`] where a reported lock may be of an earlier epoch of the same
    /// seats (`lock_committee` finds a committee by id): locks carry over an epoch change.
    pub fn check_in<'c>(
        &self,
        committee: &'c Committee,
        lock_committee: &dyn Fn(&[u8; 32]) -> Option<&'c Committee>,
        account: &AccountKey,
        sequence: u64,
        round: u32,
    ) -> Result<Allowed, JustificationError> {
        if round == 0 {
            return Err(JustificationError::RoundZero);
        }
        if self
            .changes
            .windows(2)
            .any(|pair| pair[0].authority >= pair[1].authority)
        {
            return Err(JustificationError::Unsorted);
        }
        if self.changes.len() < committee.quorum() {
            return Err(JustificationError::BelowQuorum {
                signers: self.changes.len(),
                quorum: committee.quorum(),
            });
        }
        for signed in &self.changes {
            signed.check_in(committee, lock_committee, account, sequence, round)?;
        }
        Ok(self.allowed(committee))
    }

    fn allowed(&self, committee: &Committee) -> Allowed {
        let reports = self.changes.iter().map(|c| (c.change.prepared_first, c.change.lock));
        decide(reports, committee.fault_tolerance())
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        put_u32(out, self.changes.len() as u32);
        for signed in &self.changes {
            signed.encode_to(out);
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Justification, DecodeError> {
        read_version(reader, "justification")?;
        // Versions, signer, fields, two absent options, signature, no lock certificate.
        let minimal = 1 + 2 + 1 + 32 + 32 + 8 + 4 + 1 + 1 + SIGNATURE_BYTES + 1;
        let count = reader.read_u32_count("justification changes", COMMITTEE_MEMBERS_MAX as u64, minimal)?;
        let changes = (0..count)
            .map(|_| SignedRoundChange::decode_from(reader))
            .collect::<Result<Vec<_>, _>>()?;
        if changes.windows(2).any(|pair| pair[0].authority >= pair[1].authority) {
            return Err(DecodeError::NonCanonical {
                what: "justification changes",
                reason: "authorities must be strictly increasing",
            });
        }
        Ok(Justification { changes })
    }
}

/// The rule of the module documentation, on reports already checked: each report is what one
/// authority prepared in round 0 and its highest lock; `faults` is f.
pub fn decide(
    reports: impl IntoIterator<Item = (Option<[u8; 32]>, Option<(u32, [u8; 32])>)>,
    faults: usize,
) -> Allowed {
    let mut prepared = Vec::new();
    let mut highest_lock: Option<(u32, [u8; 32])> = None;
    for (first, lock) in reports {
        prepared.extend(first);
        if let Some(lock) = lock {
            if highest_lock.is_none_or(|(round, _)| lock.0 > round) {
                highest_lock = Some(lock);
            }
        }
    }
    if let Some((lock_round, digest)) = highest_lock {
        return Allowed::Only {
            digest,
            lock_round: Some(lock_round),
        };
    }
    prepared.sort_unstable();
    let mut heavy = prepared
        .chunk_by(|a, b| a == b)
        .filter(|same| same.len() > faults)
        .map(|same| same[0]);
    match (heavy.next(), heavy.next()) {
        (Some(digest), None) => Allowed::Only {
            digest,
            lock_round: None,
        },
        _ => Allowed::Any,
    }
}

impl SignedRoundChange {
    /// Whether this is `committee`'s member entering `round` of (`account`, `sequence`), with a
    /// valid signature and, if it reports a lock, that lock's certificate.
    pub fn check(
        &self,
        committee: &Committee,
        account: &AccountKey,
        sequence: u64,
        round: u32,
    ) -> Result<(), JustificationError> {
        self.check_in(committee, &only(committee), account, sequence, round)
    }

    /// [`SignedRoundChange::check`] with the lock's committee found by `lock_committee`.
    pub fn check_in<'c>(
        &self,
        committee: &'c Committee,
        lock_committee: &dyn Fn(&[u8; 32]) -> Option<&'c Committee>,
        account: &AccountKey,
        sequence: u64,
        round: u32,
    ) -> Result<(), JustificationError> {
        let signed = self;
        let authority = signed.authority;
        let key: &VerifyingKey = committee
            .key(authority)
            .ok_or(JustificationError::UnknownAuthority { authority })?;
        let change = &signed.change;
        if change.committee_id != committee.id()
            || change.account != *account
            || change.sequence != sequence
            || change.round != round
        {
            return Err(JustificationError::OtherSlot { authority });
        }
        let signature = Signature::from_bytes(&signed.signature);
        if key.verify_strict(&change.signing_bytes(), &signature).is_err() {
            return Err(JustificationError::BadSignature { authority });
        }
        let bad_lock = |reason: String| JustificationError::BadLock { authority, reason };
        match (change.lock, &signed.lock_certificate) {
            (None, None) => Ok(()),
            (Some((lock_round, digest)), Some(certificate)) => {
                let order = &certificate.order.order;
                if certificate.round != lock_round || order.digest() != digest || lock_round >= round {
                    return Err(bad_lock("another round or order".into()));
                }
                if order.sender != *account || order.sequence != sequence {
                    return Err(bad_lock("another slot".into()));
                }
                let lock_committee = lock_committee(&certificate.committee_id)
                    .ok_or_else(|| bad_lock(CertificateError::WrongCommittee.to_string()))?;
                if lock_committee.size() != committee.size() {
                    return Err(bad_lock("a committee of other seats".into()));
                }
                certificate
                    .check_lock(lock_committee)
                    .map_err(|error: CertificateError| bad_lock(error.to_string()))
            }
            _ => Err(JustificationError::LockUnproven { authority }),
        }
    }

    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.authority.to_le_bytes());
        self.change.encode_fields(out);
        out.extend_from_slice(&self.signature);
        match &self.lock_certificate {
            None => out.push(0),
            Some(certificate) => {
                out.push(1);
                certificate.encode_to(out);
            }
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<SignedRoundChange, DecodeError> {
        read_version(reader, "signed round change")?;
        let authority = u16::from_le_bytes(reader.read_array("round change authority")?);
        let change = RoundChange::decode_fields(reader)?;
        let signature = reader.read_array("round change signature")?;
        let lock_certificate = match reader.read_bool("round change lock certificate")? {
            false => None,
            true => Some(Certificate::decode_from(reader)?),
        };
        Ok(SignedRoundChange {
            authority,
            change,
            signature,
            lock_certificate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: [u8; 32] = [1; 32];
    const Y: [u8; 32] = [2; 32];
    const Z: [u8; 32] = [3; 32];

    /// Every way 4 authorities (f = 1) can have prepared in round 0, every choice of the one
    /// faulty authority, every quorum of 3 reporters and every lie the faulty one can tell:
    /// whenever an order has a fast certificate (every honest authority prepared it and the
    /// faulty one signed it too), the rule allows that order only.
    #[test]
    fn a_fast_certificate_is_never_contradicted_by_round_zero_reports() {
        let choices = [None, Some(X), Some(Y), Some(Z)];
        let mut checked = 0;
        for faulty in 0..4usize {
            for reporters_left_out in 0..4usize {
                for lie in choices {
                    // Fast certificate on X: all four signed X; the faulty one may report anything.
                    let reports = (0..4)
                        .filter(|&a| a != reporters_left_out)
                        .map(|a| (if a == faulty { lie } else { Some(X) }, None));
                    assert_eq!(
                        decide(reports, 1),
                        Allowed::Only {
                            digest: X,
                            lock_round: None
                        }
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 64);
    }

    /// A lock outranks round-0 reports, and the highest lock wins.
    #[test]
    fn the_highest_lock_decides() {
        let reports = [(Some(X), None), (Some(X), Some((1, Y))), (Some(Y), Some((3, Z)))];
        assert_eq!(
            decide(reports, 1),
            Allowed::Only {
                digest: Z,
                lock_round: Some(3)
            }
        );
    }

    /// A split round 0 (the equivocating owner's case) leaves the owner free to choose, and so
    /// does a round 0 where nobody prepared.
    #[test]
    fn a_split_or_empty_round_zero_allows_any_order() {
        assert_eq!(
            decide([(Some(X), None), (Some(X), None), (Some(Y), None)], 1),
            Allowed::Only {
                digest: X,
                lock_round: None
            }
        );
        assert_eq!(
            decide([(Some(X), None), (Some(Y), None), (None, None)], 1),
            Allowed::Any
        );
        assert_eq!(decide([(None, None); 3], 1), Allowed::Any);
        assert!(Allowed::Any.allows(&Y));
    }

    /// Only the account's owner can ask for a round of its slot, only of this committee, and
    /// only for a recovery round; the request says exactly what it was signed for.
    #[test]
    fn a_round_request_counts_only_signed_by_the_owner_for_this_committee() {
        use crate::test_keys::{account_key, authority_keys};
        let members = authority_keys(4).iter().map(|k| k.verifying_key().to_bytes()).collect();
        let committee = Committee::new(1, members).unwrap();
        let owner = account_key(0);
        let request = RoundRequest {
            committee_id: committee.id(),
            account: AccountKey(owner.verifying_key().to_bytes()),
            sequence: 3,
            round: 2,
        };
        let signed = request.sign(&owner);
        assert_eq!(signed.check(&committee), Ok(()));
        let mut bytes = Vec::new();
        signed.encode_to(&mut bytes);
        assert_eq!(bytes.len(), RoundRequest::SIGNED_BYTES);
        let decoded = crate::decode_exact(
            "round request",
            &bytes,
            RoundRequest::SIGNED_BYTES,
            SignedRoundRequest::decode_from,
        );
        assert_eq!(decoded, Ok(signed));

        let stranger = SignedRoundRequest {
            signature: account_key(1).sign(&request.signing_bytes()).to_bytes(),
            ..signed
        };
        assert_eq!(stranger.check(&committee), Err(RoundRequestError::BadSignature));
        let later = SignedRoundRequest {
            request: RoundRequest { round: 3, ..request },
            ..signed
        };
        assert_eq!(later.check(&committee), Err(RoundRequestError::BadSignature));
        let other = Committee::new(2, committee.members().to_vec()).unwrap();
        assert_eq!(signed.check(&other), Err(RoundRequestError::OtherCommittee));
        let zero = RoundRequest { round: 0, ..request }.sign(&owner);
        assert_eq!(zero.check(&committee), Err(RoundRequestError::RoundZero));
    }
}
