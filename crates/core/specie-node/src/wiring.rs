//! How the embedded node wires its roles together on the shared embedded host
//! ([`specie_host::EmbeddedHost`]): the coordinator's requests go to the shards' call channels,
//! the shards' answers come back on the coordinator's input channel, outcomes go to callers.

use crossbeam_channel::Sender;
use specie_api::{Completion, CompletionSender, TxStatus};
use specie_coordinator::{Coordinator, CoordinatorInput, CoordinatorReport, TxOutcome, TxResult};
use specie_host::{HostMessage, Wiring};
use specie_role::Ticket;
use specie_shard::{Shard, ShardCall, ShardInput, ShardReply, ShardRequest, ShardResponse};
use specie_transaction::{CompactTransaction, Txid};

use crate::archive::ArchiveMessage;

/// Who waits for a shard's answer.
pub enum ShardReplyTo {
    Coordinator,
    Reader(Sender<ShardReply>),
}

pub type ShardMessage = HostMessage<ShardCall, ShardReplyTo>;
pub type CoordinatorMessage = HostMessage<CompactTransaction, (u64, CompletionSender)>;

pub struct ShardWiring {
    pub index: usize,
    pub coordinator: Sender<Vec<CoordinatorInput>>,
    pub answers: Vec<CoordinatorInput>,
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
            (ShardReplyTo::Coordinator, ShardReply::Response(ShardResponse::Discarded { .. })) => {}
            (ShardReplyTo::Coordinator, ShardReply::Response(response)) => {
                self.answers.push(CoordinatorInput::ShardAnswer {
                    shard: self.index,
                    response,
                });
            }
            (ShardReplyTo::Coordinator, other) => unreachable!("the coordinator only sends requests, got {other:?}"),
            (ShardReplyTo::Reader(reader), reply) => {
                let _ = reader.send(reply);
            }
        }
    }

    fn report(&mut self, report: std::convert::Infallible) {
        match report {}
    }

    fn flush(&mut self) {
        if !self.answers.is_empty() {
            // A closed channel means the coordinator is gone: the node is stopping.
            let _ = self.coordinator.send(std::mem::take(&mut self.answers));
        }
    }
}

pub struct CoordinatorWiring {
    pub shards: Vec<Sender<ShardMessage>>,
    /// Requests of the current round, per shard: one message per shard per round.
    pub requests: Vec<Vec<ShardRequest>>,
    /// The archiver, told every outcome so it can seal the confirmed transactions.
    pub archive: Option<Sender<ArchiveMessage>>,
    /// Outcomes of the current round: one message to the archiver per round.
    pub outcomes: Vec<(Txid, bool)>,
}

impl Wiring<Coordinator> for CoordinatorWiring {
    type Call = CompactTransaction;
    type ReplyTo = (u64, CompletionSender);

    fn input(tx: CompactTransaction, ticket: Ticket) -> CoordinatorInput {
        CoordinatorInput::Submit { ticket, tx }
    }

    fn send(&mut self, shard: usize, request: ShardRequest) {
        self.requests[shard].push(request);
    }

    fn reply(&mut self, (client_ref, reply): (u64, CompletionSender), outcome: TxOutcome) {
        if self.archive.is_some() {
            self.outcomes
                .push((outcome.txid, matches!(outcome.result, TxResult::Confirmed)));
        }
        let _ = reply.send(Completion {
            client_ref,
            txid: outcome.txid,
            status: TxStatus::from(outcome.result),
        });
    }

    fn report(&mut self, report: CoordinatorReport) {
        if let CoordinatorReport::ShardRefused { shard, response } = report {
            tracing::error!(shard, ?response, "shard refused a request: protocol bug");
        }
    }

    fn flush(&mut self) {
        if let Some(archive) = &self.archive {
            if !self.outcomes.is_empty() {
                let _ = archive.send(ArchiveMessage::Outcomes(std::mem::take(&mut self.outcomes)));
            }
        }
        for (shard, requests) in self.requests.iter_mut().enumerate() {
            if !requests.is_empty() {
                let calls = requests
                    .drain(..)
                    .map(|request| (ShardCall::Request(request), ShardReplyTo::Coordinator))
                    .collect();
                let _ = self.shards[shard].send(HostMessage::Calls(calls));
            }
        }
    }
}
