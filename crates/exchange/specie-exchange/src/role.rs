//! The exchange as a role of the shared contract (`specie-role`), so it runs on the embedded host
//! over its log, replicated by Raft, and in the simulator. Its commands are blocks and deposits
//! (value a core confirmed moving to the exchange, credited once per funding marker). The leader
//! assembles one every `block_interval_ms` from what traders submitted (clearing it once), the
//! host makes it durable (one fsync, or one Raft entry, per block) and every replica applies it.
//! A submission is answered only once its transactions are in a durable block, or refused: what
//! was answered is never lost. The mempool is bounded; beyond it a submission is refused as busy.
//!
//! A transaction is executed once however often it is submitted: the same transaction twice in
//! one submission, in two submissions waiting together, or while its block is in flight, is
//! queued once, and every submitter waiting for it gets its one fate (included at a height, or
//! refused with the reason). Submitted again after its block (a retry whose first answer was
//! lost with the lead), it is answered as included at that block's height, as long as the block
//! is among the last ones remembered (`RoleLimits::recent_transactions_max`).

use std::collections::{HashMap, VecDeque};

use specie_codec::DecodeError;
use specie_role::{Durable, Output, Role, Ticket};

use crate::block::{Block, BlockError};
use crate::bridge::Credit;
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
    /// Transactions of the last blocks remembered (whole blocks, at least the last one), so
    /// that one submitted again after its block is answered as included there.
    pub recent_transactions_max: usize,
}

impl Default for RoleLimits {
    fn default() -> Self {
        RoleLimits {
            block_interval_ms: 250,
            mempool_transactions_max: 1 << 20,
            submission_transactions_max: 10_000,
            recent_transactions_max: 1 << 18,
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
    /// Per asset, what came in, went out and is held, now (the supply report's).
    Holdings {
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
    /// checks the core itself; the role credits each marker once). With `refund_to` (the
    /// funding's `bridge::refund_address`), a funding that can never be credited as it stands is
    /// refunded there instead of refused.
    Deposit {
        ticket: Ticket,
        deposit: Deposit,
        refund_to: Option<[u8; 32]>,
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
    /// Credited, or refused.
    Deposit(Deposit),
    /// Credited, or refunded to `refund_to` if it never can be (`Ledger::deposit_or_refund`).
    DepositOrRefund {
        deposit: Deposit,
        refund_to: [u8; 32],
    },
}

const COMMAND_BLOCK: u8 = 1;
const COMMAND_DEPOSIT: u8 = 2;
const COMMAND_DEPOSIT_OR_REFUND: u8 = 3;

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
    Holdings {
        height: u64,
        holdings: Vec<crate::ledger::AssetHoldings>,
    },
    LastBlock(Option<Box<Block>>),
    Deposited,
    DepositRefused(DepositRefusal),
    /// The funding was not credited but refunded by this withdrawal (its payout is the bridge
    /// key's, like any withdrawal's); `reason` is why (unknown when it was refunded earlier).
    Refunded {
        withdrawal: Withdrawal,
        reason: Option<DepositRefusal>,
    },
    Withdrawal(Option<Withdrawal>),
}

/// What the operator must see.
#[derive(Debug)]
pub enum ExchangeReport {
    /// A committed block that does not apply: a bug (only the leader proposes, and it proposes
    /// only what it assembled from this very state).
    BlockRefused { height: u64, error: BlockError },
    /// A block this leader assembled is durable and applied: what its metrics count.
    Cleared(Cleared),
}

/// A block a leader assembled, once applied: its size, its trades and how its clearing went.
#[derive(Debug)]
pub struct Cleared {
    pub height: u64,
    pub transactions: usize,
    /// The clearing's trades, each pair's amount in units of the asset sold.
    pub trades: Vec<specie_clearing::PairTrade>,
    pub clearing: specie_clearing::ComputeReport,
}

/// The block a leader proposed and has not applied yet.
struct InFlight {
    height: u64,
    transactions: Vec<SignedTransaction>,
    clearing: specie_clearing::ComputeReport,
}

/// A submission waiting for its transactions' fates.
struct Waiting {
    fates: Vec<Option<Fate>>,
    left: usize,
}

/// Who waits for one transaction: each submission, and the transaction's place in it, that sent
/// it (one transaction, sent several times, is executed once and answers them all).
type Waiters = Vec<(Ticket, usize)>;

/// The transactions of the last blocks applied, with their heights: not state (neither hashed
/// nor snapshotted; empty after a restore), only what answers a transaction submitted again.
#[derive(Default)]
struct Recent {
    heights: HashMap<SignedTransaction, u64>,
    blocks: VecDeque<Vec<SignedTransaction>>,
    transactions: usize,
}

impl Recent {
    fn remember(&mut self, block: &Block, max: usize) {
        for transaction in &block.transactions {
            self.heights.insert(*transaction, block.height);
        }
        self.transactions += block.transactions.len();
        self.blocks.push_back(block.transactions.clone());
        while self.transactions > max && self.blocks.len() > 1 {
            let forgotten = self.blocks.pop_front().expect("more than one block");
            self.transactions -= forgotten.len();
            for transaction in forgotten {
                self.heights.remove(&transaction);
            }
        }
    }
}

pub struct ExchangeRole {
    ledger: Ledger,
    limits: RoleLimits,
    leading: bool,
    /// Transactions waiting for a block, each once, in the order first submitted.
    mempool: Vec<SignedTransaction>,
    /// Who waits for each transaction of the mempool and of the block in flight.
    waiters: HashMap<SignedTransaction, Waiters>,
    waiting: HashMap<Ticket, Waiting>,
    /// The block in flight (proposed, not yet applied).
    in_flight: Option<InFlight>,
    recent: Recent,
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
            waiters: HashMap::new(),
            waiting: HashMap::new(),
            in_flight: None,
            recent: Recent::default(),
            next_block_ms: None,
            last_block: None,
            depositing: HashMap::new(),
            outputs: VecDeque::new(),
        }
    }

    fn apply_block(&mut self, now_ms: u64, block: &Block) {
        let (in_flight, clearing) = self
            .in_flight
            .take()
            .map_or_else(Default::default, |f| (f.transactions, Some((f.height, f.clearing))));
        match self.ledger.apply(block) {
            Ok(_) => {
                let height = block.height;
                if let Some((_, clearing)) = clearing.filter(|(proposed, _)| *proposed == height) {
                    self.outputs.push_back(Output::Report(ExchangeReport::Cleared(Cleared {
                        height,
                        transactions: block.transactions.len(),
                        trades: block.clearing.trades.clone(),
                        clearing,
                    })));
                }
                for transaction in in_flight {
                    for (ticket, index) in self.waiters.remove(&transaction).unwrap_or_default() {
                        self.settle(ticket, index, Fate::Included { height });
                    }
                }
                self.recent.remember(block, self.limits.recent_transactions_max);
                self.last_block = Some(Box::new(block.clone()));
            }
            Err(error) => {
                // Nothing of it was executed: its transactions wait for the next block, with
                // whoever waits for them.
                self.mempool.splice(0..0, in_flight);
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
    fn deposit(&mut self, ticket: Ticket, deposit: Deposit, refund_to: Option<[u8; 32]>) {
        if let Some(waiting) = self.depositing.get_mut(&(deposit.asset, deposit.marker)) {
            return waiting.push(ticket);
        }
        let (checked, command) = match refund_to {
            Some(refund_to) => (
                self.ledger.check_deposit_or_refund(&deposit).map(|_| ()),
                ExchangeCommand::DepositOrRefund { deposit, refund_to },
            ),
            None => (self.ledger.check_deposit(&deposit), ExchangeCommand::Deposit(deposit)),
        };
        match checked {
            Err(refusal) => {
                let reply = self.deposit_refused(&deposit, refusal);
                self.reply(ticket, reply);
            }
            Ok(()) => {
                self.depositing.insert((deposit.asset, deposit.marker), vec![ticket]);
                self.outputs.push_back(Output::Propose(command));
            }
        }
    }

    /// The answer to a deposit refused for `refusal`: a funding refunded earlier is answered with
    /// its refund (its marker counts as credited).
    fn deposit_refused(&self, deposit: &Deposit, refusal: DepositRefusal) -> ExchangeReply {
        match (refusal, self.ledger.refund_of(deposit.asset, &deposit.marker)) {
            (DepositRefusal::AlreadyCredited, Some(withdrawal)) => ExchangeReply::Refunded {
                withdrawal: *withdrawal,
                reason: None,
            },
            _ => ExchangeReply::DepositRefused(refusal),
        }
    }

    /// Applies a deposit command and answers whoever waits for it.
    fn apply_deposit(&mut self, deposit: &Deposit, refund_to: Option<[u8; 32]>) {
        let credited = match refund_to {
            Some(refund_to) => self.ledger.deposit_or_refund(deposit, refund_to),
            None => self.ledger.deposit(deposit).map(|()| Credit::Deposited),
        };
        let reply = match credited {
            Ok(Credit::Deposited) => ExchangeReply::Deposited,
            Ok(Credit::Refunded { withdrawal, reason }) => ExchangeReply::Refunded {
                withdrawal,
                reason: Some(reason),
            },
            Err(refusal) => self.deposit_refused(deposit, refusal),
        };
        for ticket in self
            .depositing
            .remove(&(deposit.asset, deposit.marker))
            .unwrap_or_default()
        {
            self.reply(ticket, reply.clone());
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
        for (index, transaction) in transactions.into_iter().enumerate() {
            if let Some(waiters) = self.waiters.get_mut(&transaction) {
                // Queued or in flight already: executed once, answering every submitter.
                waiters.push((ticket, index));
            } else if let Some(&height) = self.recent.heights.get(&transaction) {
                // In a block applied already (so durable): its fate is known.
                self.settle(ticket, index, Fate::Included { height });
            } else {
                self.waiters.insert(transaction, vec![(ticket, index)]);
                self.mempool.push(transaction);
            }
        }
        if !self.mempool.is_empty() {
            self.next_block_ms.get_or_insert(now_ms + self.limits.block_interval_ms);
        }
    }

    /// Assembles a block from the mempool and proposes it; refuses at once what the screen drops.
    fn assemble(&mut self) {
        let pool = std::mem::take(&mut self.mempool);
        let (block, refused, clearing) = self.ledger.assemble(pool);
        for (transaction, refusal) in refused {
            for (ticket, index) in self.waiters.remove(&transaction).unwrap_or_default() {
                self.settle(ticket, index, Fate::Refused(refusal));
            }
        }
        self.in_flight = Some(InFlight {
            height: block.height,
            transactions: block.transactions.clone(),
            clearing,
        });
        self.outputs.push_back(Output::Propose(ExchangeCommand::Block(block)));
    }

    /// On losing the lead: a submission none of whose transactions is in the block in flight is
    /// answered as dropped (nothing of it will be executed); one with a transaction in flight is
    /// not answered here, so its host tells it the outcome is unknown (the log decides).
    fn drop_waiting(&mut self) {
        let proposed: std::collections::HashSet<Ticket> = self
            .in_flight
            .take()
            .map(|flight| flight.transactions)
            .unwrap_or_default()
            .iter()
            .filter_map(|transaction| self.waiters.get(transaction))
            .flatten()
            .map(|(ticket, _)| *ticket)
            .collect();
        self.waiters.clear();
        let mut dropped: Vec<Ticket> = self
            .waiting
            .drain()
            .map(|(ticket, _)| ticket)
            .filter(|ticket| !proposed.contains(ticket))
            .collect();
        dropped.sort_unstable();
        for ticket in dropped {
            self.reply(ticket, ExchangeReply::Dropped);
        }
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
        self.next_block_ms = None;
        self.drop_waiting();
        // Handing a deposit in again is safe (credited once, answered from the state).
        let depositing: Vec<Ticket> = self.depositing.drain().flat_map(|(_, tickets)| tickets).collect();
        for ticket in depositing {
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
            ExchangeInput::Holdings { ticket } => {
                let (height, holdings) = (self.ledger.height(), self.ledger.holdings());
                self.reply(ticket, ExchangeReply::Holdings { height, holdings });
            }
            ExchangeInput::Offers { ticket, account } => {
                let offers = self.ledger.offers_of(account);
                self.reply(ticket, ExchangeReply::Offers(offers));
            }
            ExchangeInput::LastBlock { ticket } => {
                let last = self.last_block.clone();
                self.reply(ticket, ExchangeReply::LastBlock(last));
            }
            ExchangeInput::Deposit {
                ticket,
                deposit,
                refund_to,
            } if self.leading => self.deposit(ticket, deposit, refund_to),
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
            ExchangeCommand::Deposit(deposit) => self.apply_deposit(deposit, None),
            ExchangeCommand::DepositOrRefund { deposit, refund_to } => self.apply_deposit(deposit, Some(*refund_to)),
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

fn encode_deposit(deposit: &Deposit, bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&deposit.asset.to_le_bytes());
    bytes.extend_from_slice(&deposit.marker);
    specie_codec::put_u64(bytes, deposit.account);
    bytes.extend_from_slice(&deposit.key);
    specie_codec::put_u64(bytes, deposit.amount);
}

fn decode_deposit(reader: &mut specie_codec::Reader<'_>) -> Result<Deposit, DecodeError> {
    Ok(Deposit {
        asset: u16::from_le_bytes(reader.read_array("asset")?),
        marker: reader.read_array("marker")?,
        account: reader.read_u64("account")?,
        key: reader.read_array("key")?,
        amount: reader.read_u64("amount")?,
    })
}

impl Durable for ExchangeRole {
    type StateError = ExchangeStateError;

    /// A tag, then a block (`0x01`), a deposit (`0x02`: asset, marker, account, key, amount),
    /// or a deposit refunded if it cannot be credited (`0x03`: the deposit as `0x02`, then the
    /// refund address).
    fn encode_command(command: &ExchangeCommand) -> Vec<u8> {
        let mut bytes = Vec::new();
        match command {
            ExchangeCommand::Block(block) => {
                bytes.push(COMMAND_BLOCK);
                block.encode_to(&mut bytes);
            }
            ExchangeCommand::Deposit(deposit) => {
                bytes.push(COMMAND_DEPOSIT);
                encode_deposit(deposit, &mut bytes);
            }
            ExchangeCommand::DepositOrRefund { deposit, refund_to } => {
                bytes.push(COMMAND_DEPOSIT_OR_REFUND);
                encode_deposit(deposit, &mut bytes);
                bytes.extend_from_slice(refund_to);
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
                    COMMAND_DEPOSIT => decode_deposit(reader).map(ExchangeCommand::Deposit),
                    COMMAND_DEPOSIT_OR_REFUND => Ok(ExchangeCommand::DepositOrRefund {
                        deposit: decode_deposit(reader)?,
                        refund_to: reader.read_array("refund address")?,
                    }),
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
        self.recent = Recent::default();
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
