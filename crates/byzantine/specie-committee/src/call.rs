//! What a client asks one authority, whatever carries it (channels to embedded shards, HTTP to
//! authority processes), and what a payment makes of the answer.

use specie_authority::{shard_of, Funding, Input, Refusal, Reply, ShardIndex};
use specie_fastpay::{
    AccountKey, Certificate, CommitteeRecord, Justification, SignedOrder, SignedRoundChange, SignedRoundRequest, Vote,
};
use specie_role::Ticket;

/// A request to one authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Round 0: prepare this order.
    Transfer(SignedOrder),
    /// Settle this final certificate.
    Confirm(Certificate),
    /// Lock the order of this lock (a quorum's prepare votes) and give a commit vote.
    Lock(Certificate),
    /// Enter the round of the account's slot its owner asks for, and say what was prepared and
    /// locked.
    RoundChange(SignedRoundRequest),
    /// Prepare `order` in `round`, which `justification` opened.
    Propose {
        order: SignedOrder,
        round: u32,
        justification: Box<Justification>,
    },
    Account {
        account: AccountKey,
        from_sequence: u64,
    },
    Fund(Funding),
    /// Shard `shard`'s books (the supply report's).
    Books {
        shard: ShardIndex,
    },
    /// Shard `shard` enters the epoch this record makes (checked against its current one).
    EnterEpoch {
        shard: ShardIndex,
        record: Box<CommitteeRecord>,
    },
    /// The records shard `shard` holds of the epochs after `after`.
    Epochs {
        shard: ShardIndex,
        after: u64,
    },
}

impl Call {
    /// The account whose shard answers this call; none for a shard's books.
    pub fn account(&self) -> Option<AccountKey> {
        match self {
            Call::Transfer(order) | Call::Propose { order, .. } => Some(order.order.sender),
            Call::Confirm(certificate) | Call::Lock(certificate) => Some(certificate.order.order.sender),
            Call::RoundChange(request) => Some(request.request.account),
            Call::Account { account, .. } => Some(*account),
            Call::Fund(funding) => Some(funding.account),
            Call::Books { .. } | Call::EnterEpoch { .. } | Call::Epochs { .. } => None,
        }
    }

    /// The shard of `shards` that answers this call: its account's, or the one named.
    pub fn shard(&self, shards: u32) -> ShardIndex {
        match (self, self.account()) {
            (_, Some(account)) => shard_of(&account, shards),
            (Call::Books { shard } | Call::EnterEpoch { shard, .. } | Call::Epochs { shard, .. }, None) => *shard,
            (_, None) => unreachable!("only a call about a whole shard names no account"),
        }
    }

    /// The role's input for this call, answered under `ticket`.
    pub fn into_input(self, ticket: Ticket) -> Input {
        match self {
            Call::Transfer(order) => Input::Transfer { ticket, order },
            Call::Confirm(certificate) => Input::Confirm { ticket, certificate },
            Call::Lock(certificate) => Input::Lock { ticket, certificate },
            Call::RoundChange(request) => Input::RoundChange { ticket, request },
            Call::Propose {
                order,
                round,
                justification,
            } => Input::Propose {
                ticket,
                order,
                round,
                justification,
            },
            Call::Account { account, from_sequence } => Input::Account {
                ticket,
                account,
                from_sequence,
            },
            Call::Fund(funding) => Input::Fund { ticket, funding },
            Call::Books { .. } => Input::Books { ticket },
            Call::EnterEpoch { record, .. } => Input::EnterEpoch { ticket, record },
            Call::Epochs { after, .. } => Input::Epochs { ticket, after },
        }
    }
}

/// An authority's answer to a payment's call, as the payment weighs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    Vote(Vote),
    RoundChange(Box<SignedRoundChange>),
    /// The slot is settled already: its final certificate.
    Final(Box<Certificate>),
    Confirmed {
        sender: AccountKey,
        sequence: u64,
    },
    /// The authority has not settled the payer's certificates from `next_sequence` on.
    Lagging {
        next_sequence: u64,
    },
    /// The slot is contested at this authority (another order pending or locked): a recovery
    /// round can settle it.
    Contested(String),
    /// The authority is in a later round of the slot already: only a round above it can go on.
    RoundPassed {
        round: u32,
    },
    /// Refused for a reason no round changes (insufficient balance, an invalid order…), or no
    /// usable answer.
    Refused(String),
}

impl From<Reply> for Heard {
    fn from(reply: Reply) -> Heard {
        match reply {
            Reply::Voted(vote) => Heard::Vote(vote),
            Reply::RoundChanged(change) => Heard::RoundChange(change),
            Reply::Final(certificate) => Heard::Final(certificate),
            Reply::Confirmed { sender, sequence } => Heard::Confirmed { sender, sequence },
            Reply::Refused(refusal) => Heard::from(refusal),
            other => Heard::Refused(format!("unexpected answer {other:?}")),
        }
    }
}

impl From<Refusal> for Heard {
    fn from(refusal: Refusal) -> Heard {
        match refusal {
            Refusal::MissingEarlier { next, .. } => Heard::Lagging { next_sequence: next },
            Refusal::WrongSequence { expected, got } if expected < got => Heard::Lagging {
                next_sequence: expected,
            },
            // A vote for an earlier order whose certificate this authority missed: a lag; for
            // this very sequence number: the owner signed two orders.
            Refusal::OtherOrderPending { sequence } => Heard::Lagging {
                next_sequence: sequence,
            },
            Refusal::RoundPassed { round } => Heard::RoundPassed { round },
            Refusal::LockedOnOther { .. } | Refusal::ConflictingCertificate { .. } | Refusal::Busy => {
                Heard::Contested(refusal.to_string())
            }
            other => Heard::Refused(other.to_string()),
        }
    }
}
