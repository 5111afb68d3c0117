//! How the embedded node wires its roles together on the shared embedded host
//! ([`specie_host::EmbeddedHost`]), in either shape of the core: the orderer's (coordinator's or
//! atomizer's) requests go to the shards' call channels, the shards' answers come back on the
//! orderer's input channel, outcomes go to callers and to the archiver.

use crossbeam_channel::Sender;
use std::sync::{Arc, Mutex};

use specie_api::{Completion, CompletionSender, TxStatus, Watchtower};
use specie_atomizer::{
    Atomizer, AtomizerInput, AtomizerReport, UhsShard, UhsShardInput, UhsShardReply, UhsShardReport,
};
use specie_coordinator::{Coordinator, CoordinatorInput, CoordinatorReport, TxOutcome};
use specie_host::{HostMessage, Wiring};
use specie_role::Ticket;
use specie_shard::{
    CoordinatorIndex, Shard, ShardCall, ShardCommand, ShardInput, ShardRead, ShardReply, ShardRequest, ShardResponse,
};
use specie_transaction::{CompactTransaction, Txid};

use crate::archive::ArchiveMessage;

/// Who waits for a shard's answer.
pub enum ShardReplyTo {
    /// A coordinator (by index; the first is 0) or the atomizer (0).
    Orderer(CoordinatorIndex),
    Reader(Sender<ShardReply>),
}

pub type ShardMessage = HostMessage<ShardCall, ShardReplyTo>;
pub type UhsShardMessage = HostMessage<UhsShardCall, ShardReplyTo>;
pub type SubmissionMessage = HostMessage<CompactTransaction, (u64, CompletionSender)>;

/// What a shard of the atomizer shape is asked.
pub enum UhsShardCall {
    Atomizer(specie_atomizer::ShardMessage),
    Read(ShardRead),
}

/// The shards' inboxes, in shard order.
pub enum ShardInboxes {
    TwoPhaseCommit(Vec<Sender<ShardMessage>>),
    Atomizer(Vec<Sender<UhsShardMessage>>),
}

impl ShardInboxes {
    pub fn len(&self) -> usize {
        match self {
            ShardInboxes::TwoPhaseCommit(inboxes) => inboxes.len(),
            ShardInboxes::Atomizer(inboxes) => inboxes.len(),
        }
    }

    /// Asks shard `shard` to read; the answer goes to `reader`. False if the shard has stopped.
    pub fn read(&self, shard: usize, read: ShardRead, reader: Sender<ShardReply>) -> bool {
        let reader = ShardReplyTo::Reader(reader);
        match self {
            ShardInboxes::TwoPhaseCommit(inboxes) => inboxes[shard]
                .send(HostMessage::Calls(vec![(ShardCall::Read(read), reader)]))
                .is_ok(),
            ShardInboxes::Atomizer(inboxes) => inboxes[shard]
                .send(HostMessage::Calls(vec![(UhsShardCall::Read(read), reader)]))
                .is_ok(),
        }
    }

    pub fn stop(&self) {
        match self {
            ShardInboxes::TwoPhaseCommit(inboxes) => inboxes.iter().for_each(|i| drop(i.send(HostMessage::Stop))),
            ShardInboxes::Atomizer(inboxes) => inboxes.iter().for_each(|i| drop(i.send(HostMessage::Stop))),
        }
    }
}

pub struct ShardWiring {
    pub index: usize,
    /// Each coordinator's input channel, by coordinator index.
    pub coordinators: Vec<Sender<Vec<CoordinatorInput>>>,
    /// Answers of the current round, by coordinator index: one message each per round.
    pub answers: Vec<Vec<CoordinatorInput>>,
}

impl ShardWiring {
    pub fn new(index: usize, coordinators: Vec<Sender<Vec<CoordinatorInput>>>) -> ShardWiring {
        let answers = coordinators.iter().map(|_| vec![]).collect();
        ShardWiring {
            index,
            coordinators,
            answers,
        }
    }
}

impl Wiring<Shard> for ShardWiring {
    type Call = ShardCall;
    type ReplyTo = ShardReplyTo;

    fn input(call: ShardCall, ticket: Ticket) -> ShardInput {
        call.into_input(ticket)
    }

    fn send(&mut self, to: std::convert::Infallible, _message: std::convert::Infallible) {
        match to {}
    }

    fn reply(&mut self, reply_to: ShardReplyTo, reply: ShardReply) {
        match (reply_to, reply) {
            // Discarded needs no answer: the coordinator has already moved on.
            (ShardReplyTo::Orderer(_), ShardReply::Response(ShardResponse::Discarded { .. })) => {}
            (ShardReplyTo::Orderer(coordinator), ShardReply::Response(response)) => {
                self.answers[usize::from(coordinator)].push(CoordinatorInput::ShardAnswer {
                    shard: self.index,
                    response,
                });
            }
            (ShardReplyTo::Orderer(_), other) => unreachable!("a coordinator only sends requests, got {other:?}"),
            (ShardReplyTo::Reader(reader), reply) => {
                let _ = reader.send(reply);
            }
        }
    }

    fn report(&mut self, report: std::convert::Infallible) {
        match report {}
    }

    fn flush(&mut self) {
        for (answers, coordinator) in self.answers.iter_mut().zip(&self.coordinators) {
            if !answers.is_empty() {
                // A closed channel means the coordinator is gone: the node is stopping.
                let _ = coordinator.send(std::mem::take(answers));
            }
        }
    }
}

pub struct UhsShardWiring {
    pub index: usize,
    pub atomizer: Sender<Vec<AtomizerInput>>,
    pub answers: Vec<AtomizerInput>,
}

impl Wiring<UhsShard> for UhsShardWiring {
    type Call = UhsShardCall;
    type ReplyTo = ShardReplyTo;

    fn input(call: UhsShardCall, ticket: Ticket) -> UhsShardInput {
        match call {
            UhsShardCall::Atomizer(message) => UhsShardInput::Atomizer { ticket, message },
            UhsShardCall::Read(read) => UhsShardInput::Read { ticket, read },
        }
    }

    fn send(&mut self, to: std::convert::Infallible, _message: std::convert::Infallible) {
        match to {}
    }

    fn reply(&mut self, reply_to: ShardReplyTo, reply: UhsShardReply) {
        match (reply_to, reply) {
            (ShardReplyTo::Orderer(_), UhsShardReply::Answer(answer)) => {
                self.answers.push(AtomizerInput::ShardAnswer {
                    shard: self.index,
                    answer,
                })
            }
            (ShardReplyTo::Reader(reader), UhsShardReply::Read(reply)) => {
                let _ = reader.send(reply);
            }
            (_, reply) => unreachable!("a shard answers each caller in kind, got {reply:?}"),
        }
    }

    fn report(&mut self, report: UhsShardReport) {
        tracing::error!(
            shard = self.index,
            ?report,
            "shard refused the atomizer's block: they disagree"
        );
    }

    fn flush(&mut self) {
        if !self.answers.is_empty() {
            // A closed channel means the atomizer is gone: the node is stopping.
            let _ = self.atomizer.send(std::mem::take(&mut self.answers));
        }
    }
}

/// The wiring of the role that orders transactions (the coordinator, or the atomizer), whose
/// shard calls are `C`.
pub struct OrdererWiring<C> {
    /// Which coordinator this is (0 for the first, and for the atomizer): how shards tell
    /// coordinators' dtxns apart and where they answer.
    pub index: CoordinatorIndex,
    pub shards: Vec<Sender<HostMessage<C, ShardReplyTo>>>,
    /// Calls of the current round, per shard: one message per shard per round.
    pub calls: Vec<Vec<C>>,
    /// The archiver, told every outcome so it can seal the confirmed transactions.
    pub archive: Option<Sender<ArchiveMessage>>,
    /// Told every outcome, under one lock per round.
    pub watchtower: Arc<Mutex<Watchtower>>,
    /// Outcomes of the current round: one message to the archiver and one lock of the
    /// watchtower per round.
    pub decided: Vec<(Txid, TxStatus)>,
    /// The orderer's metric families, published after each turn.
    pub gauges: specie_metrics::role::Published,
}

impl<C: Send> OrdererWiring<C> {
    pub fn new(
        index: CoordinatorIndex,
        shards: Vec<Sender<HostMessage<C, ShardReplyTo>>>,
        archive: Option<Sender<ArchiveMessage>>,
        watchtower: Arc<Mutex<Watchtower>>,
    ) -> Self {
        let calls = shards.iter().map(|_| vec![]).collect();
        OrdererWiring {
            index,
            shards,
            calls,
            archive,
            watchtower,
            decided: vec![],
            gauges: Default::default(),
        }
    }

    fn answer(&mut self, (client_ref, reply): (u64, CompletionSender), outcome: TxOutcome) {
        let status = TxStatus::from(outcome.result);
        self.decided.push((outcome.txid, status.clone()));
        let _ = reply.send(Completion {
            client_ref,
            txid: outcome.txid,
            status,
        });
    }

    fn hand_on(&mut self) {
        if !self.decided.is_empty() {
            if let Some(archive) = &self.archive {
                let outcomes = self
                    .decided
                    .iter()
                    .map(|(txid, status)| (*txid, *status == TxStatus::Confirmed))
                    .collect();
                let _ = archive.send(ArchiveMessage::Outcomes(outcomes));
            }
            let mut watchtower = self
                .watchtower
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (txid, status) in self.decided.drain(..) {
                watchtower.record(txid, status);
            }
        }
        for (shard, calls) in self.calls.iter_mut().enumerate() {
            if !calls.is_empty() {
                let calls = calls
                    .drain(..)
                    .map(|call| (call, ShardReplyTo::Orderer(self.index)))
                    .collect();
                let _ = self.shards[shard].send(HostMessage::Calls(calls));
            }
        }
    }
}

impl Wiring<Coordinator> for OrdererWiring<ShardCall> {
    type Call = CompactTransaction;
    type ReplyTo = (u64, CompletionSender);

    fn input(tx: CompactTransaction, ticket: Ticket) -> CoordinatorInput {
        CoordinatorInput::Submit { ticket, tx }
    }

    fn send(&mut self, shard: usize, request: ShardRequest) {
        self.calls[shard].push(ShardCall::Request(ShardCommand {
            coordinator: self.index,
            request,
        }));
    }

    fn reply(&mut self, reply_to: (u64, CompletionSender), outcome: TxOutcome) {
        self.answer(reply_to, outcome);
    }

    fn report(&mut self, report: CoordinatorReport) {
        specie_api::observe::coordinator_reported(&report);
    }

    fn flush(&mut self) {
        self.hand_on();
    }

    fn observe(&mut self, coordinator: &Coordinator) {
        self.gauges
            .publish(&specie_api::observe::coordinator_gauges(coordinator));
    }
}

impl Wiring<Atomizer> for OrdererWiring<UhsShardCall> {
    type Call = CompactTransaction;
    type ReplyTo = (u64, CompletionSender);

    fn input(tx: CompactTransaction, ticket: Ticket) -> AtomizerInput {
        AtomizerInput::Submit { ticket, tx }
    }

    fn send(&mut self, shard: usize, message: specie_atomizer::ShardMessage) {
        self.calls[shard].push(UhsShardCall::Atomizer(message));
    }

    fn reply(&mut self, reply_to: (u64, CompletionSender), outcome: TxOutcome) {
        self.answer(reply_to, outcome);
    }

    fn report(&mut self, report: AtomizerReport) {
        // Settled: a block replayed from the log, whose callers heard when it was first made.
        specie_api::observe::atomizer_reported(&report);
    }

    fn flush(&mut self) {
        self.hand_on();
    }

    fn observe(&mut self, atomizer: &Atomizer) {
        self.gauges.publish(&specie_api::observe::atomizer_gauges(atomizer));
    }
}
