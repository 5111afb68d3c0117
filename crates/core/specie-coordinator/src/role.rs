//! The coordinator behind the role contract ([`specie_role::Role`]), so the shared hosts run it.

use specie_codec::{Decode, Encode};
use specie_role::{Durable, Output, Role, Ticket};
use specie_shard::{ShardRequest, ShardResponse};
use specie_transaction::{CompactTransaction, Txid};

use crate::codec::CommandLimits;
use crate::engine::{Coordinator, CoordinatorOutput, DtxnTimes, TxResult};
use crate::state::{CoordinatorCommand, CoordinatorState, InvariantViolation};

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
    /// A dtxn finished: its size and its phases' times, for the host's metrics.
    Finished(DtxnTimes),
}

impl Coordinator {
    /// After every input: a broken invariant is a bug that must stop the role before it acts on it.
    fn assert_invariants(&self) {
        if let Err(violation) = self.check_invariants() {
            panic!("coordinator invariant broken: {violation}");
        }
    }
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
        self.assert_invariants();
    }

    fn apply(&mut self, now_ms: u64, command: &CoordinatorCommand) {
        Coordinator::apply(self, command, now_ms);
        self.assert_invariants();
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.tick(now_ms);
        self.assert_invariants();
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
            CoordinatorOutput::Finished(times) => Output::Report(CoordinatorReport::Finished(times)),
        })
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.deadline_ms()
    }
}

/// Why the coordinator's log or snapshot bytes were refused, or its state is inconsistent.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorStateError {
    #[error("does not decode: {0}")]
    Decode(#[from] specie_codec::DecodeError),
    #[error(transparent)]
    Invariant(#[from] InvariantViolation),
}

impl Durable for Coordinator {
    type StateError = CoordinatorStateError;

    fn encode_command(command: &CoordinatorCommand) -> Vec<u8> {
        command.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<CoordinatorCommand, CoordinatorStateError> {
        Ok(CoordinatorCommand::decode_exact_with(bytes, &CommandLimits::default())?)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state().encode_snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), CoordinatorStateError> {
        let state = CoordinatorState::decode_snapshot(snapshot, &CommandLimits::default())?;
        state.check_invariants()?;
        self.replace_state(state);
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), CoordinatorStateError> {
        Ok(Coordinator::check_invariants(self)?)
    }
}
