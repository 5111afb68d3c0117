//! The exchange as a role of the shared contract (`specie-role`), so it runs on the embedded host
//! over its log, replicated by Raft, and in the simulator. Its one command is a block: the leader
//! assembles one every `block_interval_ms` from what traders submitted (clearing it once), the
//! host makes it durable (one fsync, or one Raft entry, per block) and every replica applies it.
//! A submission is answered only once its transactions are in a durable block, or refused: what
//! was answered is never lost. The mempool is bounded; beyond it a submission is refused as busy.

use std::collections::{HashMap, VecDeque};

use specie_codec::DecodeError;
use specie_role::{Durable, Output, Role, Ticket};

use crate::block::{Block, BlockError};
use crate::ledger::{Account, ExchangeConfig, Ledger, LedgerError};
use crate::screen::Refusal;
use crate::transaction::{AccountId, SignedTransaction};

/// How the role paces and bounds its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleLimits {
    /// How long transactions wait for the next block.
    pub block_interval_ms: u64,
    /// Transactions waiting for a block; beyond, submissions are refused as busy.
    pub mempool_transactions_max: usize,
    /// Most transactions one submission carries.
    pub submission_transactions_max: usize,
}

impl Default for RoleLimits {
    fn default() -> Self {
        RoleLimits {
            block_interval_ms: 250,
            mempool_transactions_max: 1 << 20,
            submission_transactions_max: 10_000,
        }
    }
}

/// What callers ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExchangeInput {
    /// Transactions for the next blocks; answered once each is in a durable block or refused.
    Submit {
        ticket: Ticket,
        transactions: Vec<SignedTransaction>,
    },
    Account {
        ticket: Ticket,
        id: AccountId,
    },
    /// The last block's height, state hash and clearing.
    LastBlock {
        ticket: Ticket,
    },
}

/// What a transaction of a submission came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Included { height: u64 },
    Refused(Refusal),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExchangeReply {
    /// Each transaction's fate, in submission order.
    Settled(Vec<Fate>),
    Busy {
        mempool_transactions_max: usize,
    },
    TooMany {
        submission_transactions_max: usize,
    },
    /// The lead was lost before the transactions were in a block: send them again.
    Dropped,
    Account(Option<Account>),
    LastBlock(Option<Box<Block>>),
}

/// What the operator must see: a committed block that does not apply is a bug (only the leader
/// proposes, and it proposes only what it assembled from this very state).
#[derive(Debug)]
pub enum ExchangeReport {
    BlockRefused { height: u64, error: BlockError },
}

/// A submission waiting for its transactions' fates.
struct Waiting {
    fates: Vec<Option<Fate>>,
    left: usize,
}

pub struct ExchangeRole {
    ledger: Ledger,
    limits: RoleLimits,
    leading: bool,
    mempool: Vec<(SignedTransaction, Ticket, usize)>,
    waiting: HashMap<Ticket, Waiting>,
    /// Where each transaction in the block in flight came from.
    in_flight: Option<Vec<(Ticket, usize)>>,
    next_block_ms: Option<u64>,
    last_block: Option<Box<Block>>,
    outputs: VecDeque<Output<ExchangeRole>>,
}

impl ExchangeRole {
    pub fn new(ledger: Ledger, limits: RoleLimits) -> ExchangeRole {
        ExchangeRole {
            ledger,
            limits,
            leading: false,
            mempool: Vec::new(),
            waiting: HashMap::new(),
            in_flight: None,
            next_block_ms: None,
            last_block: None,
            outputs: VecDeque::new(),
        }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn reply(&mut self, ticket: Ticket, reply: ExchangeReply) {
        self.outputs.push_back(Output::Reply { ticket, reply });
    }

    fn settle(&mut self, ticket: Ticket, index: usize, fate: Fate) {
        let Some(waiting) = self.waiting.get_mut(&ticket) else {
            return;
        };
        if waiting.fates[index].replace(fate).is_none() {
            waiting.left -= 1;
        }
        if waiting.left == 0 {
            let waiting = self.waiting.remove(&ticket).expect("present");
            let fates = waiting.fates.into_iter().map(|f| f.expect("settled")).collect();
            self.reply(ticket, ExchangeReply::Settled(fates));
        }
    }

    fn submit(&mut self, now_ms: u64, ticket: Ticket, transactions: Vec<SignedTransaction>) {
        if transactions.len() > self.limits.submission_transactions_max {
            let max = self.limits.submission_transactions_max;
            return self.reply(
                ticket,
                ExchangeReply::TooMany {
                    submission_transactions_max: max,
                },
            );
        }
        if self.mempool.len() + transactions.len() > self.limits.mempool_transactions_max {
            let max = self.limits.mempool_transactions_max;
            return self.reply(
                ticket,
                ExchangeReply::Busy {
                    mempool_transactions_max: max,
                },
            );
        }
        if transactions.is_empty() {
            return self.reply(ticket, ExchangeReply::Settled(Vec::new()));
        }
        self.waiting.insert(
            ticket,
            Waiting {
                fates: vec![None; transactions.len()],
                left: transactions.len(),
            },
        );
        let entries = transactions.into_iter().enumerate().map(|(i, t)| (t, ticket, i));
        self.mempool.extend(entries);
        self.next_block_ms.get_or_insert(now_ms + self.limits.block_interval_ms);
    }

    /// Assembles a block from the mempool and proposes it; refuses at once what the screen drops.
    fn assemble(&mut self) {
        let pool = std::mem::take(&mut self.mempool);
        let origins: HashMap<SignedTransaction, (Ticket, usize)> =
            pool.iter().map(|(t, ticket, index)| (*t, (*ticket, *index))).collect();
        let (block, refused) = self.ledger.assemble(pool.into_iter().map(|(t, _, _)| t).collect());
        for (transaction, refusal) in refused {
            if let Some(&(ticket, index)) = origins.get(&transaction) {
                self.settle(ticket, index, Fate::Refused(refusal));
            }
        }
        let in_flight = block
            .transactions
            .iter()
            .filter_map(|t| origins.get(t).copied())
            .collect();
        self.in_flight = Some(in_flight);
        self.outputs.push_back(Output::Propose(block));
    }
}

impl Role for ExchangeRole {
    type Command = Block;
    type Input = ExchangeInput;
    type Peer = std::convert::Infallible;
    type Message = std::convert::Infallible;
    type Reply = ExchangeReply;
    type Report = ExchangeReport;

    fn lead(&mut self, _now_ms: u64) {
        self.leading = true;
    }

    fn follow(&mut self) {
        self.leading = false;
        self.mempool.clear();
        self.in_flight = None;
        self.next_block_ms = None;
        for ticket in self.waiting.drain().map(|(ticket, _)| ticket).collect::<Vec<_>>() {
            self.reply(ticket, ExchangeReply::Dropped);
        }
    }

    fn handle(&mut self, now_ms: u64, input: ExchangeInput) {
        match input {
            ExchangeInput::Submit { ticket, transactions } if self.leading => self.submit(now_ms, ticket, transactions),
            ExchangeInput::Submit { ticket, .. } => self.reply(ticket, ExchangeReply::Dropped),
            ExchangeInput::Account { ticket, id } => {
                let account = self.ledger.account(id).cloned();
                self.reply(ticket, ExchangeReply::Account(account));
            }
            ExchangeInput::LastBlock { ticket } => {
                let last = self.last_block.clone();
                self.reply(ticket, ExchangeReply::LastBlock(last));
            }
        }
    }

    fn apply(&mut self, now_ms: u64, block: &Block) {
        match self.ledger.apply(block) {
            Ok(_) => {
                let height = block.height;
                for (ticket, index) in self.in_flight.take().unwrap_or_default() {
                    self.settle(ticket, index, Fate::Included { height });
                }
                self.last_block = Some(Box::new(block.clone()));
            }
            Err(error) => {
                self.in_flight = None;
                let report = ExchangeReport::BlockRefused {
                    height: block.height,
                    error,
                };
                self.outputs.push_back(Output::Report(report));
            }
        }
        if self.leading && !self.mempool.is_empty() {
            self.next_block_ms = Some(now_ms + self.limits.block_interval_ms);
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        if !self.leading || self.in_flight.is_some() || self.next_block_ms.is_none_or(|due| due > now_ms) {
            return;
        }
        self.next_block_ms = None;
        if !self.mempool.is_empty() {
            self.assemble();
        }
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        match self.in_flight {
            Some(_) => None,
            None => self.next_block_ms,
        }
    }
}

/// Why a log record or snapshot is refused, or the state is inconsistent.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeStateError {
    #[error("{0}")]
    Decode(#[from] DecodeError),
    #[error("{0}")]
    Ledger(#[from] LedgerError),
    #[error("the state does not hash to its recorded state hash")]
    StateHash,
}

impl Durable for ExchangeRole {
    type StateError = ExchangeStateError;

    fn encode_command(block: &Block) -> Vec<u8> {
        let mut bytes = Vec::new();
        block.encode_to(&mut bytes);
        bytes
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<Block, ExchangeStateError> {
        let max = self.ledger.config().block_transactions_max;
        Ok(specie_codec::decode_bounded(
            "exchange block",
            bytes,
            Block::encoded_bytes_max(max),
            |reader| Block::decode_from(reader, max),
        )?)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.ledger.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), ExchangeStateError> {
        let config: ExchangeConfig = self.ledger.config().clone();
        self.ledger = Ledger::restore(config, snapshot)?;
        self.last_block = None;
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), ExchangeStateError> {
        self.ledger.audit()?;
        if self.ledger.compute_state_hash() != self.ledger.state_hash() {
            return Err(ExchangeStateError::StateHash);
        }
        Ok(())
    }
}
