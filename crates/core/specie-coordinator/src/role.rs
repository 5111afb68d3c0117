//! The coordinator behind the role contract ([`specie_role::Role`]), so the shared hosts run it.

use specie_role::{Output, Role, Ticket};
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::{CompactTransaction, Txid};

use crate::engine::{Coordinator, CoordinatorOutput, TxResult};
use crate::state::CoordinatorCommand;

/// What callers and shards hand the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorInput {
    /// A compact transaction to run through 2PC; its outcome is replied under `ticket`.
    Submit { ticket: Ticket, tx: CompactTransaction },
    /// Shard `shard`'s answer to a phase (untrusted: see [`Coordinator::on_shard_response`]).
    ShardAnswer { shard: usize, response: ShardResponse },
}

/// The outcome of one submitted transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxOutcome {
    pub txid: Txid,
    pub result: TxResult,
}

/// What the coordinator tells the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorReport {
    /// A shard refused a request or answered as no honest shard does; the answer was dropped.
    ShardRefused { shard: usize, response: ShardResponse },
    /// A transaction accepted by an earlier leader (or before a restart) reached its outcome;
    /// no caller here waits for it, its client learns it from the UHS.
    Settled(TxOutcome),
}

impl Role for Coordinator {
    type Command = CoordinatorCommand;
    type Input = CoordinatorInput;
    /// A shard's index in the coordinator's shard ranges.
    type Peer = usize;
    type Message = ShardRequest;
    type Reply = TxOutcome;
    type Report = CoordinatorReport;

    fn lead(&mut self, now_ms: u64) {
        self.become_leader(now_ms);
    }

    fn follow(&mut self) {
        self.step_down();
    }

    fn handle(&mut self, now_ms: u64, input: CoordinatorInput) {
        match input {
            CoordinatorInput::Submit { ticket, tx } => {
                let txid = tx.txid;
                if let Err(error) = self.submit(ticket, tx, now_ms) {
                    self.refuse(ticket, txid, error);
                }
            }
            CoordinatorInput::ShardAnswer { shard, response } => self.on_shard_response(shard, response, now_ms),
        }
    }

    fn apply(&mut self, now_ms: u64, command: &CoordinatorCommand) {
        Coordinator::apply(self, command, now_ms);
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.tick(now_ms);
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        Some(match self.poll()? {
            CoordinatorOutput::Propose(command) => Output::Propose(command),
            CoordinatorOutput::Send { shard, request } => Output::Send {
                to: shard,
                message: request,
            },
            CoordinatorOutput::Outcome { tag, txid, result } => {
                let outcome = TxOutcome { txid, result };
                match tag {
                    Some(ticket) => Output::Reply { ticket, reply: outcome },
                    None => Output::Report(CoordinatorReport::Settled(outcome)),
                }
            }
            CoordinatorOutput::ShardRefused { shard, response } => {
                Output::Report(CoordinatorReport::ShardRefused { shard, response })
            }
        })
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.deadline_ms()
    }
}
