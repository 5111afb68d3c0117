//! One payment from the client's side (FastPay §4.1, §4.5): send the order to every authority,
//! form the certificate from the first quorum of valid votes, send it to every authority, and
//! call the payment settled at the first quorum of confirmations. Pure: the caller does the I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use specie_authority::{Refusal, Reply};
use specie_fastpay::{AuthorityIndex, Certificate, Committee, SignedOrder, Vote, VoteError};
use thiserror::Error;

/// Why a payment cannot complete.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PaymentError {
    /// So many authorities refused (or answered with invalid votes) that no quorum is left.
    #[error("no quorum possible: {refusals:?}")]
    Refused { refusals: Vec<(AuthorityIndex, String)> },
}

/// What the caller must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Keep waiting for answers.
    Wait,
    /// A quorum voted: send this certificate to every authority (the confirmation order).
    Certified(Box<Certificate>),
    /// This authority has not confirmed the sender's earlier certificates: send them to it,
    /// from `from_sequence` on, then this certificate again (§5).
    CatchUp {
        authority: AuthorityIndex,
        from_sequence: u64,
    },
    /// A quorum settled the certificate: the payment is final everywhere that matters.
    Settled,
    Failed(PaymentError),
}

/// A payment's progress.
#[derive(Debug)]
pub struct Payment {
    committee: Arc<Committee>,
    order: SignedOrder,
    votes: BTreeMap<AuthorityIndex, Vote>,
    refusals: BTreeMap<AuthorityIndex, String>,
    certificate: Option<Certificate>,
    confirmed: BTreeSet<AuthorityIndex>,
    done: bool,
}

impl Payment {
    pub fn new(committee: Arc<Committee>, order: SignedOrder) -> Payment {
        Payment {
            committee,
            order,
            votes: BTreeMap::new(),
            refusals: BTreeMap::new(),
            certificate: None,
            confirmed: BTreeSet::new(),
            done: false,
        }
    }

    pub fn order(&self) -> &SignedOrder {
        &self.order
    }

    pub fn certificate(&self) -> Option<&Certificate> {
        self.certificate.as_ref()
    }

    /// Authorities whose vote was counted or who refused: the rest may still be asked.
    pub fn answered(&self) -> usize {
        self.votes.len() + self.refusals.len()
    }

    fn refuse(&mut self, authority: AuthorityIndex, why: String) -> Step {
        self.refusals.entry(authority).or_insert(why);
        self.fail_without_quorum()
    }

    /// Fails the payment once no quorum can form: too many refusals, or every authority has
    /// answered (an owner who split the committee between two orders gets here).
    fn fail_without_quorum(&mut self) -> Step {
        let possible = self.committee.size() - self.refusals.len();
        let everyone_answered = self.answered() == self.committee.size();
        if (possible < self.committee.quorum() || everyone_answered) && !self.done && self.certificate.is_none() {
            self.done = true;
            return Step::Failed(PaymentError::Refused {
                refusals: self.refusals.iter().map(|(a, why)| (*a, why.clone())).collect(),
            });
        }
        Step::Wait
    }

    /// An authority's answer to the transfer order. Invalid votes (forged, for another order
    /// or committee, signed by someone else) count as refusals and are never used.
    pub fn on_vote(&mut self, authority: AuthorityIndex, reply: Reply) -> Step {
        if self.done || self.certificate.is_some() || self.votes.contains_key(&authority) {
            return Step::Wait;
        }
        match reply {
            Reply::Voted(vote) if vote.authority != authority => {
                self.refuse(authority, format!("answered with authority {}'s vote", vote.authority))
            }
            Reply::Voted(vote) => match vote.check(&self.committee, &self.order) {
                Err(error) => self.refuse(authority, invalid_vote(error)),
                Ok(()) => {
                    self.votes.insert(authority, vote);
                    self.refusals.remove(&authority);
                    if self.votes.len() < self.committee.quorum() {
                        return self.fail_without_quorum();
                    }
                    let votes: Vec<Vote> = self.votes.values().cloned().collect();
                    let certificate = Certificate::from_votes(self.order.clone(), &votes);
                    self.certificate = Some(certificate.clone());
                    Step::Certified(Box::new(certificate))
                }
            },
            Reply::Refused(refusal) => self.refuse(authority, refusal.to_string()),
            other => self.refuse(authority, format!("unexpected answer {other:?}")),
        }
    }

    /// An authority's answer to the confirmation order.
    pub fn on_confirm(&mut self, authority: AuthorityIndex, reply: Reply) -> Step {
        if self.done {
            return Step::Wait;
        }
        let sequence = self.order.order.sequence;
        match reply {
            Reply::Confirmed { sender, sequence: s } if sender == self.order.order.sender && s == sequence => {
                self.confirmed.insert(authority);
                if self.confirmed.len() >= self.committee.quorum() {
                    self.done = true;
                    return Step::Settled;
                }
                Step::Wait
            }
            Reply::Refused(Refusal::MissingEarlier { next, .. }) => Step::CatchUp {
                authority,
                from_sequence: next,
            },
            // Other refusals of a valid certificate come only from a faulty authority.
            other => {
                let why = format!("confirmation answered {other:?}");
                self.refusals.insert(authority, why);
                Step::Wait
            }
        }
    }
}

fn invalid_vote(error: VoteError) -> String {
    format!("invalid vote: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_fastpay::{deterministic_key, AccountKey, Recipient, TransferOrder, VoteStatement};

    fn setup() -> (Arc<Committee>, Vec<specie_fastpay::SigningKey>, SignedOrder) {
        let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
        let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
        let owner = deterministic_key("account", 0);
        let order = TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: Recipient::Account(AccountKey([3; 32])),
            amount: 1,
            sequence: 0,
            memo: Vec::new(),
        }
        .sign(&owner);
        (Arc::new(committee), keys, order)
    }

    fn vote(committee: &Committee, keys: &[specie_fastpay::SigningKey], authority: u16, order: &SignedOrder) -> Vote {
        let statement = VoteStatement {
            kind: specie_fastpay::VoteKind::Prepare,
            committee_id: committee.id(),
            round: 0,
            order_digest: order.order.digest(),
        };
        Vote {
            authority,
            statement,
            signature: statement.sign(&keys[usize::from(authority)]),
        }
    }

    #[test]
    fn the_first_quorum_of_valid_votes_certifies_and_forged_votes_never_count() {
        let (committee, keys, order) = setup();
        let mut payment = Payment::new(committee.clone(), order.clone());
        let mut forged = vote(&committee, &keys, 3, &order);
        forged.signature[0] ^= 1;
        assert_eq!(payment.on_vote(3, Reply::Voted(forged)), Step::Wait);
        // Authority 3 also relays authority 0's vote as its own: not counted for either.
        assert_eq!(
            payment.on_vote(3, Reply::Voted(vote(&committee, &keys, 0, &order))),
            Step::Wait
        );
        assert_eq!(
            payment.on_vote(0, Reply::Voted(vote(&committee, &keys, 0, &order))),
            Step::Wait
        );
        assert_eq!(
            payment.on_vote(1, Reply::Voted(vote(&committee, &keys, 1, &order))),
            Step::Wait
        );
        let Step::Certified(certificate) = payment.on_vote(2, Reply::Voted(vote(&committee, &keys, 2, &order))) else {
            panic!("a quorum of three valid votes certifies")
        };
        assert_eq!(certificate.check(&committee), Ok(()));
        assert_eq!(
            certificate.signatures.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            [0, 1, 2]
        );

        let confirmed = |_: u16| Reply::Confirmed {
            sender: order.order.sender,
            sequence: 0,
        };
        assert_eq!(payment.on_confirm(0, confirmed(0)), Step::Wait);
        assert_eq!(
            payment.on_confirm(3, Reply::Refused(Refusal::MissingEarlier { next: 0, got: 1 })),
            Step::CatchUp {
                authority: 3,
                from_sequence: 0
            }
        );
        assert_eq!(payment.on_confirm(1, confirmed(1)), Step::Wait);
        assert_eq!(payment.on_confirm(2, confirmed(2)), Step::Settled);
        assert_eq!(payment.on_confirm(3, confirmed(3)), Step::Wait, "settled once");
    }

    #[test]
    fn more_than_f_refusals_fail_the_payment_once() {
        let (committee, _, order) = setup();
        let mut payment = Payment::new(committee, order);
        let refusal = || Reply::Refused(Refusal::UnknownAccount);
        assert_eq!(payment.on_vote(0, refusal()), Step::Wait);
        assert!(matches!(payment.on_vote(1, refusal()), Step::Failed(_)));
        assert_eq!(payment.on_vote(2, refusal()), Step::Wait);
    }
}
