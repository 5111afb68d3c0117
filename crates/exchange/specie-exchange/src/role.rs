//! The exchange as a role of the shared contract (`specie-role`), so it runs on the embedded host
//! over its log, replicated by Raft, and in the simulator. Its commands are blocks and deposits
//! (value a core confirmed moving to the exchange, credited once per funding marker). The leader
//! assembles one every `block_interval_ms` from what traders submitted (clearing it once), the
//! host makes it durable (one fsync, or one Raft entry, per block) and every replica applies it.
//! A submission is answered only once its transactions are in a durable block, or refused: what
//! was answered is never lost. The mempool is bounded; beyond it a submission is refused as busy.

use std::collections::{HashMap, VecDeque};

use specie_codec::DecodeError;
use specie_role::{Durable, Output, Role, Ticket};

use crate::block::{Block, BlockError};
use crate::ledger::{Account, Deposit, DepositRefusal, ExchangeConfig, Ledger, LedgerError};
use crate::screen::{Refusal, Withdrawal};
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
    /// The height and state hash now.
    Summary {
        ticket: Ticket,
    },
    /// An account's resting offers.
    Offers {
        ticket: Ticket,
        account: AccountId,
    },
    /// The last block's height, state hash and clearing.
    LastBlock {
        ticket: Ticket,
    },
    /// A deposit whose funding the caller found confirmed in the asset's core (the service
    /// checks the core itself; the role credits each marker once).
    Deposit {
        ticket: Ticket,
        deposit: Deposit,
    },
    Withdrawal {
        ticket: Ticket,
        account: AccountId,
        sequence: u64,
    },
}

/// What the exchange makes durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExchangeCommand {
    Block(Block),
    Deposit(Deposit),
}

const COMMAND_BLOCK: u8 = 1;
const COMMAND_DEPOSIT: u8 = 2;

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
    Offers(Vec<(crate::ledger::Pair, crate::ledger::OfferKey, u64)>),
    Summary {
        height: u64,
        state_hash: [u8; 32],
    },
    LastBlock(Option<Box<Block>>),
    Deposited,
    DepositRefused(DepositRefusal),
    Withdrawal(Option<Withdrawal>),
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
    /// Deposits on their way to the log, by marker, with whoever waits for each.
    depositing: HashMap<(u16, [u8; 32]), Vec<Ticket>>,
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
            depositing: HashMap::new(),
            outputs: VecDeque::new(),
        }
    }

    fn apply_block(&mut self, now_ms: u64, block: &Block) {
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

    /// A deposit: refused at once if the state refuses it, else proposed (once per marker).
    fn deposit(&mut self, ticket: Ticket, deposit: Deposit) {
        if let Some(waiting) = self.depositing.get_mut(&(deposit.asset, deposit.marker)) {
            return waiting.push(ticket);
        }
        match self.ledger.check_deposit(&deposit) {
            Err(refusal) => self.reply(ticket, ExchangeReply::DepositRefused(refusal)),
            Ok(()) => {
                self.depositing.insert((deposit.asset, deposit.marker), vec![ticket]);
                self.outputs
                    .push_back(Output::Propose(ExchangeCommand::Deposit(deposit)));
            }
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
        self.outputs.push_back(Output::Propose(ExchangeCommand::Block(block)));
    }
}

impl Role for ExchangeRole {
    type Command = ExchangeCommand;
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
        let depositing: Vec<Ticket> = self.depositing.drain().flat_map(|(_, tickets)| tickets).collect();
        let waiting = self.waiting.drain().map(|(ticket, _)| ticket);
        for ticket in waiting.chain(depositing).collect::<Vec<_>>() {
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
            ExchangeInput::Summary { ticket } => {
                let (height, state_hash) = (self.ledger.height(), self.ledger.state_hash());
                self.reply(ticket, ExchangeReply::Summary { height, state_hash });
            }
            ExchangeInput::Offers { ticket, account } => {
                let offers = self.ledger.offers_of(account);
                self.reply(ticket, ExchangeReply::Offers(offers));
            }
            ExchangeInput::LastBlock { ticket } => {
                let last = self.last_block.clone();
                self.reply(ticket, ExchangeReply::LastBlock(last));
            }
            ExchangeInput::Deposit { ticket, deposit } if self.leading => self.deposit(ticket, deposit),
            ExchangeInput::Deposit { ticket, .. } => self.reply(ticket, ExchangeReply::Dropped),
            ExchangeInput::Withdrawal {
                ticket,
                account,
                sequence,
            } => {
                let withdrawal = self.ledger.withdrawal(account, sequence).copied();
                self.reply(ticket, ExchangeReply::Withdrawal(withdrawal));
            }
        }
    }

    fn apply(&mut self, now_ms: u64, command: &ExchangeCommand) {
        match command {
            ExchangeCommand::Block(block) => self.apply_block(now_ms, block),
            ExchangeCommand::Deposit(deposit) => {
                let reply = match self.ledger.deposit(deposit) {
                    Ok(()) => ExchangeReply::Deposited,
                    Err(refusal) => ExchangeReply::DepositRefused(refusal),
                };
                for ticket in self
                    .depositing
                    .remove(&(deposit.asset, deposit.marker))
                    .unwrap_or_default()
                {
                    self.reply(ticket, reply.clone());
                }
            }
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

    /// A tag, then a block (`0x01`) or a deposit (`0x02`: asset, marker, account, key, amount).
    fn encode_command(command: &ExchangeCommand) -> Vec<u8> {
        let mut bytes = Vec::new();
        match command {
            ExchangeCommand::Block(block) => {
                bytes.push(COMMAND_BLOCK);
                block.encode_to(&mut bytes);
            }
            ExchangeCommand::Deposit(deposit) => {
                bytes.push(COMMAND_DEPOSIT);
                bytes.extend_from_slice(&deposit.asset.to_le_bytes());
                bytes.extend_from_slice(&deposit.marker);
                specie_codec::put_u64(&mut bytes, deposit.account);
                bytes.extend_from_slice(&deposit.key);
                specie_codec::put_u64(&mut bytes, deposit.amount);
            }
        }
        bytes
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<ExchangeCommand, ExchangeStateError> {
        let max = self.ledger.config().block_transactions_max;
        let command =
            specie_codec::decode_bounded("exchange command", bytes, 1 + Block::encoded_bytes_max(max), |reader| {
                match reader.read_u8("command")? {
                    COMMAND_BLOCK => Block::decode_from(reader, max).map(ExchangeCommand::Block),
                    COMMAND_DEPOSIT => Ok(ExchangeCommand::Deposit(Deposit {
                        asset: u16::from_le_bytes(reader.read_array("asset")?),
                        marker: reader.read_array("marker")?,
                        account: reader.read_u64("account")?,
                        key: reader.read_array("key")?,
                        amount: reader.read_u64("amount")?,
                    })),
                    tag => Err(DecodeError::Invalid {
                        what: "exchange command",
                        reason: format!("unknown command {tag:#04x}"),
                    }),
                }
            })?;
        Ok(command)
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
