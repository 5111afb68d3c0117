//! Votes, certificates and justifications made directly from the authorities' signing keys, for
//! tests, simulations and benchmarks (feature `testing`): what a committee's members would sign,
//! without running them. One place that knows which certificates are final
//! ([`Certificate::check`]) and which are only locks ([`Certificate::check_lock`]), so tests of
//! every crate build them alike.

use crate::certificate::{Certificate, Vote, VoteKind, VoteStatement};
use crate::committee::{AuthorityIndex, Committee};
use crate::order::{AccountKey, SignedOrder};
use crate::rounds::{Justification, RoundChange, RoundRequest, SignedRoundChange, SignedRoundRequest};
use crate::{deterministic_key, SigningKey};

/// A committee with its members' signing keys, `keys[i]` being authority `i`'s.
#[derive(Clone, Debug)]
pub struct SigningCommittee {
    pub committee: Committee,
    pub keys: Vec<SigningKey>,
}

impl SigningCommittee {
    /// The committee of `keys` at `epoch`.
    pub fn new(epoch: u64, keys: Vec<SigningKey>) -> SigningCommittee {
        let members = keys.iter().map(|key| key.verifying_key().to_bytes()).collect();
        let committee = Committee::new(epoch, members).expect("a valid committee size");
        SigningCommittee { committee, keys }
    }

    /// `members` authorities keyed `deterministic_key("authority", i)`.
    pub fn deterministic(members: usize, epoch: u64) -> SigningCommittee {
        let keys = (0..members as u64).map(|i| deterministic_key("authority", i)).collect();
        SigningCommittee::new(epoch, keys)
    }

    pub fn statement(&self, kind: VoteKind, round: u32, order: &SignedOrder) -> VoteStatement {
        VoteStatement {
            committee_id: self.committee.id(),
            kind,
            round,
            order_digest: order.order.digest(),
        }
    }

    /// Authority `authority`'s vote of phase `kind` in `round` for `order`.
    pub fn vote(&self, authority: AuthorityIndex, kind: VoteKind, round: u32, order: &SignedOrder) -> Vote {
        let statement = self.statement(kind, round, order);
        Vote {
            authority,
            statement,
            signature: statement.sign(&self.keys[usize::from(authority)]),
        }
    }

    /// The votes of `signers` (any order, repeats dropped) as one certificate; final, a lock or
    /// neither depending on `kind`, `round` and how many sign.
    pub fn certificate(
        &self,
        kind: VoteKind,
        round: u32,
        order: &SignedOrder,
        signers: &[AuthorityIndex],
    ) -> Certificate {
        let votes: Vec<Vote> = signers
            .iter()
            .map(|&authority| self.vote(authority, kind, round, order))
            .collect();
        Certificate::from_votes(order.clone(), &votes)
    }

    /// The fast path's final certificate: round-0 prepare votes of every member.
    pub fn final_certificate(&self, order: &SignedOrder) -> Certificate {
        let everyone: Vec<AuthorityIndex> = (0..self.keys.len() as AuthorityIndex).collect();
        self.certificate(VoteKind::Prepare, 0, order, &everyone)
    }

    /// The slow path's final certificate: commit votes of `signers` (a quorum, for it to be
    /// final) in `round`.
    pub fn commit_certificate(&self, round: u32, order: &SignedOrder, signers: &[AuthorityIndex]) -> Certificate {
        self.certificate(VoteKind::Commit, round, order, signers)
    }

    /// A lock: prepare votes of `signers` (a quorum, for it to be a lock) in `round`. Final
    /// never, unless `round` is 0 and every member signs.
    pub fn lock_certificate(&self, round: u32, order: &SignedOrder, signers: &[AuthorityIndex]) -> Certificate {
        self.certificate(VoteKind::Prepare, round, order, signers)
    }

    /// `change` signed by `authority`, with the certificate of the lock it reports.
    pub fn round_change(
        &self,
        authority: AuthorityIndex,
        change: RoundChange,
        lock: Option<Certificate>,
    ) -> SignedRoundChange {
        change.sign(authority, &self.keys[usize::from(authority)], lock)
    }

    /// `owner`'s request that the committee enter `round` of its slot at `sequence`.
    pub fn round_request(&self, owner: &SigningKey, sequence: u64, round: u32) -> SignedRoundRequest {
        RoundRequest {
            committee_id: self.committee.id(),
            account: AccountKey(owner.verifying_key().to_bytes()),
            sequence,
            round,
        }
        .sign(owner)
    }

    /// The justification of these round changes, sorted by authority as it must be.
    pub fn justification(&self, mut changes: Vec<SignedRoundChange>) -> Justification {
        changes.sort_by_key(|signed| signed.authority);
        Justification { changes }
    }
}
