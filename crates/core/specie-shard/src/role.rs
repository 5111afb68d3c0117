//! The shard as a role of the shared contract ([`specie_role::Role`]): the coordinator's
//! requests become commands the host makes durable before they are applied and answered; reads
//! of the UHS are answered only after every request received before them has been applied, so
//! a transaction reported confirmed is always visible to the read that follows.

use std::collections::VecDeque;
use std::convert::Infallible;

use specie_codec::{Decode, DecodeError, Encode};
use specie_role::{Durable, Output, Role, Ticket};
use specie_transaction::{UhsId, TRANSACTION_LOG};

use crate::{
    CoordinatorIndex, ShardInvariantViolation, ShardRange, ShardRequest, ShardResponse, ShardState, ShardStats,
    ShardWireLimits,
};

/// A coordinator's request as the shard makes it durable: the request, and which coordinator
/// sent it (its host knows that from the caller, and the log must keep it so that every replica
/// applies the request to that coordinator's dtxns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardCommand {
    pub coordinator: CoordinatorIndex,
    pub request: ShardRequest,
}

/// The log encoding of a command of a coordinator other than 0: this byte, the coordinator's
/// index (u16, little-endian, never 0), then the request. Coordinator 0's commands are the bare
/// request (a request's first byte is its kind, 0 to 2), as every command was before shards
/// served several coordinators, so logs written then still replay.
const COMMAND_OF_COORDINATOR: u8 = 0x80;

impl ShardCommand {
    pub fn encode(&self) -> Vec<u8> {
        if self.coordinator == 0 {
            return self.request.encode();
        }
        let mut out = vec![COMMAND_OF_COORDINATOR];
        out.extend_from_slice(&self.coordinator.to_le_bytes());
        self.request.encode_to(&mut out);
        out
    }

    pub fn decode(bytes: &[u8], limits: &ShardWireLimits) -> Result<ShardCommand, DecodeError> {
        let (coordinator, request) = match bytes {
            [COMMAND_OF_COORDINATOR, low, high, request @ ..] => {
                let coordinator = CoordinatorIndex::from_le_bytes([*low, *high]);
                if coordinator == 0 {
                    return Err(DecodeError::NonCanonical {
                        what: "shard command",
                        reason: "coordinator 0's commands are bare requests",
                    });
                }
                (coordinator, request)
            }
            [COMMAND_OF_COORDINATOR, ..] => {
                return Err(DecodeError::NonCanonical {
                    what: "shard command",
                    reason: "truncated coordinator index",
                })
            }
            request => (0, request),
        };
        Ok(ShardCommand {
            coordinator,
            request: ShardRequest::decode_exact_with(request, limits)?,
        })
    }
}

/// What a shard is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardInput {
    /// A coordinator's request: made durable, applied, then answered with its response.
    Request { ticket: Ticket, command: ShardCommand },
    /// A read of the UHS.
    Read { ticket: Ticket, read: ShardRead },
}

/// What a shard is asked, before its host gives the request a ticket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardCall {
    Request(ShardCommand),
    Read(ShardRead),
}

impl ShardCall {
    /// The role's input for this call, whose reply will carry `ticket`.
    pub fn into_input(self, ticket: Ticket) -> ShardInput {
        match self {
            ShardCall::Request(command) => ShardInput::Request { ticket, command },
            ShardCall::Read(read) => ShardInput::Read { ticket, read },
        }
    }
}

/// A read of the UHS; it changes nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardRead {
    /// Whether each id is unspent.
    Contains(Vec<UhsId>),
    Stats,
    /// Every id, ascending.
    SortedIds,
}

/// A shard's answer to one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardReply {
    Response(ShardResponse),
    Contains(Vec<bool>),
    Stats(ShardStats),
    SortedIds(Vec<UhsId>),
}

/// One shard: its replicated state, and (while it leads) the callers waiting for answers.
#[derive(Debug)]
pub struct Shard {
    state: ShardState,
    /// Tickets of proposed requests, in proposal order: applying a command answers the oldest.
    proposed: VecDeque<Ticket>,
    /// Reads that arrived while requests before them were not yet applied.
    reads_waiting: VecDeque<(Ticket, ShardRead)>,
    outputs: VecDeque<Output<Shard>>,
    leading: bool,
}

impl Shard {
    /// A shard over `state` that follows until [`Role::lead`].
    pub fn new(state: ShardState) -> Shard {
        Shard {
            state,
            proposed: VecDeque::new(),
            reads_waiting: VecDeque::new(),
            outputs: VecDeque::new(),
            leading: false,
        }
    }

    pub fn empty(range: ShardRange) -> Shard {
        Shard::new(ShardState::new(range))
    }

    pub fn state(&self) -> &ShardState {
        &self.state
    }

    /// Replaces the state with a snapshot's (a follower catching up); only while following.
    pub fn restore_state(&mut self, state: ShardState) {
        assert!(!self.leading, "a leader's state is changed only by its own commands");
        self.state = state;
    }

    fn answer(&mut self, ticket: Ticket, read: ShardRead) {
        let reply = match read {
            ShardRead::Contains(ids) => ShardReply::Contains(ids.iter().map(|id| self.state.contains(id)).collect()),
            ShardRead::Stats => ShardReply::Stats(self.state.stats()),
            ShardRead::SortedIds => ShardReply::SortedIds(self.state.sorted_ids()),
        };
        self.outputs.push_back(Output::Reply { ticket, reply });
    }
}

impl Role for Shard {
    type Command = ShardCommand;
    type Input = ShardInput;
    /// A shard only answers: it never sends to a peer of its own accord.
    type Peer = Infallible;
    type Message = Infallible;
    type Reply = ShardReply;
    type Report = Infallible;

    fn lead(&mut self, _now_ms: u64) {
        debug_assert!(self.proposed.is_empty() && self.reads_waiting.is_empty());
        self.leading = true;
    }

    fn follow(&mut self) {
        // Callers of requests not yet applied learn their fate by asking again: shards answer a
        // re-sent request as they did the first time.
        self.leading = false;
        self.proposed.clear();
        self.reads_waiting.clear();
        self.outputs.clear();
    }

    fn handle(&mut self, _now_ms: u64, input: ShardInput) {
        assert!(self.leading, "only a leading shard takes inputs");
        match input {
            ShardInput::Request { ticket, command } => {
                self.proposed.push_back(ticket);
                self.outputs.push_back(Output::Propose(command));
            }
            ShardInput::Read { ticket, read } if self.proposed.is_empty() => self.answer(ticket, read),
            ShardInput::Read { ticket, read } => self.reads_waiting.push_back((ticket, read)),
        }
    }

    fn apply(&mut self, _now_ms: u64, command: &ShardCommand) {
        let response = self.state.apply(command.coordinator, &command.request);
        // A follower (or a leader replaying what an earlier leader proposed) answers no one.
        if !self.leading {
            return;
        }
        tracing::debug!(target: TRANSACTION_LOG, coordinator = command.coordinator, ?response, "answered");
        let ticket = self
            .proposed
            .pop_front()
            .expect("a leader applies only what it proposed");
        self.outputs.push_back(Output::Reply {
            ticket,
            reply: ShardReply::Response(response),
        });
        if self.proposed.is_empty() {
            while let Some((ticket, read)) = self.reads_waiting.pop_front() {
                self.answer(ticket, read);
            }
        }
    }

    fn handle_timeout(&mut self, _now_ms: u64) {}

    fn poll_output(&mut self) -> Option<Output<Shard>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }
}

/// Why a shard's log or snapshot bytes were refused, or its state is inconsistent.
#[derive(Debug, thiserror::Error)]
pub enum ShardStateError {
    #[error("does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("the snapshot covers {found:?}, this shard owns {owned:?}")]
    WrongRange { found: ShardRange, owned: ShardRange },
    #[error("inconsistent state: {0}")]
    Invariant(#[source] ShardInvariantViolation),
}

impl Durable for Shard {
    type StateError = ShardStateError;

    fn encode_command(command: &ShardCommand) -> Vec<u8> {
        command.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<ShardCommand, ShardStateError> {
        Ok(ShardCommand::decode(bytes, &ShardWireLimits::default())?)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode_snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), ShardStateError> {
        let state = ShardState::decode_snapshot(snapshot)?;
        if state.range() != self.state.range() {
            return Err(ShardStateError::WrongRange {
                found: state.range(),
                owned: self.state.range(),
            });
        }
        self.restore_state(state);
        Ok(())
    }

    /// The full cross-check: O(UHS), so hosts run it after recovery, not per command (the shard
    /// checks the O(1) invariants itself after every request).
    fn check_invariants(&self) -> Result<(), ShardStateError> {
        self.state.check_invariants().map_err(ShardStateError::Invariant)
    }
}

#[cfg(test)]
mod tests {
    use specie_role::Round;

    use super::*;
    use crate::{ShardTx, Vote};

    const FULL: ShardRange = ShardRange {
        first: 0,
        last: u16::MAX,
    };

    fn id(n: u8) -> UhsId {
        UhsId([n; 32])
    }

    /// Coordinator 0's prepare of dtxn `dtxn` minting `output`.
    fn mint(dtxn: u64, output: UhsId) -> ShardCommand {
        ShardCommand {
            coordinator: 0,
            request: ShardRequest::Prepare {
                dtxn,
                txs: vec![ShardTx {
                    index: 0,
                    spent: vec![],
                    created: vec![output],
                }],
            },
        }
    }

    fn leading_shard() -> Shard {
        let mut shard = Shard::empty(FULL);
        shard.lead(0);
        shard
    }

    /// Makes the round's proposals "durable" and applies them, as a host does.
    fn settle(shard: &mut Shard) -> Vec<(Ticket, ShardReply)> {
        let mut replies = vec![];
        loop {
            let round = Round::take(shard);
            replies.extend(round.replies);
            if round.proposals.is_empty() {
                return replies;
            }
            for command in &round.proposals {
                shard.apply(0, command);
            }
        }
    }

    #[test]
    fn a_read_waits_for_the_requests_received_before_it() {
        let mut shard = leading_shard();
        shard.handle(
            0,
            ShardInput::Request {
                ticket: 1,
                command: mint(1, id(7)),
            },
        );
        shard.handle(
            0,
            ShardInput::Request {
                ticket: 2,
                command: ShardCommand {
                    coordinator: 0,
                    request: ShardRequest::Commit {
                        dtxn: 1,
                        complete: vec![true],
                    },
                },
            },
        );
        shard.handle(
            0,
            ShardInput::Read {
                ticket: 3,
                read: ShardRead::Contains(vec![id(7)]),
            },
        );
        // Nothing is answered before the host made the requests durable.
        let round = Round::take(&mut shard);
        assert!(round.replies.is_empty());
        assert_eq!(round.proposals.len(), 2);
        for command in &round.proposals {
            shard.apply(0, command);
        }
        let replies = settle(&mut shard);
        let tickets: Vec<Ticket> = replies.iter().map(|(ticket, _)| *ticket).collect();
        assert_eq!(tickets, [1, 2, 3], "answers come in input order");
        assert!(
            matches!(&replies[0].1, ShardReply::Response(ShardResponse::Prepared { votes, .. }) if votes == &[Vote::Yes])
        );
        assert_eq!(
            replies[2].1,
            ShardReply::Contains(vec![true]),
            "the read sees the commit"
        );
    }

    #[test]
    fn a_read_with_nothing_pending_is_answered_at_once() {
        let mut shard = leading_shard();
        shard.handle(
            0,
            ShardInput::Read {
                ticket: 9,
                read: ShardRead::Contains(vec![id(1)]),
            },
        );
        let round = Round::take(&mut shard);
        assert!(round.proposals.is_empty());
        assert_eq!(round.replies, vec![(9, ShardReply::Contains(vec![false]))]);
    }

    #[test]
    fn a_follower_applies_but_answers_no_one() {
        let mut leader = leading_shard();
        let mut follower = Shard::empty(FULL);
        leader.handle(
            0,
            ShardInput::Request {
                ticket: 1,
                command: mint(1, id(3)),
            },
        );
        let round = Round::take(&mut leader);
        for command in &round.proposals {
            leader.apply(0, command);
            follower.apply(0, command);
        }
        assert_eq!(Round::take(&mut leader).replies.len(), 1);
        assert!(follower.poll_output().is_none());
        assert_eq!(follower.state().encode_snapshot(), leader.state().encode_snapshot());
    }

    #[test]
    fn losing_the_lead_forgets_waiting_callers() {
        let mut shard = leading_shard();
        shard.handle(
            0,
            ShardInput::Request {
                ticket: 1,
                command: mint(1, id(3)),
            },
        );
        shard.handle(
            0,
            ShardInput::Read {
                ticket: 2,
                read: ShardRead::Stats,
            },
        );
        let proposals = Round::take(&mut shard).proposals;
        shard.follow();
        for command in &proposals {
            shard.apply(0, command);
        }
        assert!(shard.poll_output().is_none(), "a follower answers no one");
        assert_eq!(
            shard.state().stats().dtxns_active,
            1,
            "the durable command still applies"
        );
    }

    #[test]
    fn commands_keep_their_coordinator_in_the_log_and_old_logs_still_replay() {
        let ours = mint(4, id(1));
        // Coordinator 0's command is the bare request, as every command was before.
        assert_eq!(ours.encode(), ours.request.encode());
        let theirs = ShardCommand {
            coordinator: 3,
            request: ours.request.clone(),
        };
        let limits = ShardWireLimits::default();
        for command in [&ours, &theirs] {
            assert_eq!(&ShardCommand::decode(&command.encode(), &limits).unwrap(), command);
        }
        let mut zero = theirs.encode();
        zero[1..3].copy_from_slice(&[0, 0]);
        assert!(
            ShardCommand::decode(&zero, &limits).is_err(),
            "coordinator 0 spelt long"
        );
        assert!(ShardCommand::decode(&[COMMAND_OF_COORDINATOR, 1], &limits).is_err());
        assert!(ShardCommand::decode(&theirs.encode()[..3], &limits).is_err());
    }

    #[test]
    fn two_coordinators_number_their_dtxns_alike_without_colliding() {
        let mut shard = leading_shard();
        let of = |coordinator, request: ShardRequest| ShardCommand { coordinator, request };
        let commands = [
            mint(0, id(1)),
            of(1, mint(0, id(2)).request),
            // Coordinator 1 wants the output coordinator 0's dtxn 0 reserved: refused.
            of(1, mint(1, id(1)).request),
        ];
        for (ticket, command) in commands.into_iter().enumerate() {
            shard.handle(
                0,
                ShardInput::Request {
                    ticket: ticket as Ticket,
                    command,
                },
            );
        }
        let replies = settle(&mut shard);
        let votes: Vec<Vec<Vote>> = replies
            .into_iter()
            .map(|(_, reply)| match reply {
                ShardReply::Response(ShardResponse::Prepared { votes, .. }) => votes,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(votes, [vec![Vote::Yes], vec![Vote::Yes], vec![Vote::OutputLocked]]);
        assert_eq!(shard.state().stats().dtxns_active, 3);
        shard.state().check_invariants().unwrap();
    }
}
