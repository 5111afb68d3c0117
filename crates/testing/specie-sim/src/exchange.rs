//! The exchange's world: the real exchange role (`specie_exchange::ExchangeRole`) on the
//! simulated host as the proposer, and replica ledgers that apply every block it makes durable,
//! one of them on a single thread and every one of them given the block's transactions in a
//! shuffled order. Traders draw offers, cancels and payments around drifting valuations (the
//! demo's workload); hostile ones forge signatures, overdraw, replay sequence numbers; deposits
//! arrive, some twice; the proposer crashes and restarts from its log, and replicas are rebuilt
//! from the proposer's snapshot. Checked after every block:
//! - every replica reaches the proposer's state hash (order and thread count change nothing);
//! - the per-asset audit holds (balances + locked + burned = deposited − withdrawn);
//! - every submission is answered with one fate per transaction, and a transaction answered as
//!   included is in the block just made durable; hostile transactions are refused;
//! - a deposit is credited once, however often it is handed in;
//! - a restarted proposer is the state it crashed in (the simulated host checks it), and a
//!   replica restored from a snapshot has the same state hash.
//!
//! Clearing runs one Tâtonnement instance bounded by rounds (not time) here, so a seed replays
//! bit for bit.

use std::hash::{DefaultHasher, Hasher};

use ed25519_dalek::SigningKey;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use specie_exchange::{
    ClearingParams, Deposit, ExchangeCommand, ExchangeConfig, ExchangeInput, ExchangeReply, ExchangeRole, Fate, Ledger,
    Operation, RoleLimits, SignedTransaction, Transaction,
};
use specie_host::{SimEvent, SimHost};
use specie_role::Durable;
use specie_workload::exchange::{Market, MarketMix};

use crate::Violation;

/// Block interval of the simulated exchange, in the world's milliseconds.
const BLOCK_INTERVAL_MS: u64 = 100;

#[derive(Clone, Debug)]
pub struct ExchangeOptions {
    pub seed: u64,
    pub traders: usize,
    pub assets: usize,
    pub steps: u64,
    pub crash_per_mille: u32,
    pub restore_per_mille: u32,
    pub hostile_per_mille: u32,
    pub deposit_per_mille: u32,
    /// A planted bug: the proposer's blocks trade 1% more than their clearing allows. Replicas
    /// must refuse them, and the world must report it.
    pub inflate_trades: bool,
}

impl ExchangeOptions {
    pub fn from_seed(seed: u64) -> ExchangeOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_e8c4);
        ExchangeOptions {
            seed,
            traders: rng.gen_range(3..=8),
            assets: rng.gen_range(2..=4),
            steps: rng.gen_range(8..=20),
            crash_per_mille: rng.gen_range(0..=150),
            restore_per_mille: rng.gen_range(0..=200),
            hostile_per_mille: rng.gen_range(0..=300),
            deposit_per_mille: rng.gen_range(100..=500),
            inflate_trades: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExchangeReport {
    pub blocks: u64,
    /// Blocks the proposer reported cleared once applied (each checked against its block).
    pub cleared: u64,
    pub included: u64,
    pub refused: u64,
    pub offers_traded: u64,
    pub hostile_refused: u64,
    pub deposits: u64,
    pub deposits_refused_again: u64,
    pub crashes: u64,
    pub replicas_restored: u64,
    pub trace_digest: u64,
}

struct World {
    options: ExchangeOptions,
    rng: StdRng,
    step: u64,
    now_ms: u64,
    host: SimHost<ExchangeRole>,
    config: ExchangeConfig,
    replicas: Vec<Ledger>,
    single_thread: rayon::ThreadPool,
    market: Market,
    keys: Vec<SigningKey>,
    next_ticket: u64,
    next_marker: u64,
    report: ExchangeReport,
    trace: DefaultHasher,
    /// The last block made durable, as proposed: its height, size and trades.
    durable_block: Option<(u64, usize, Vec<specie_exchange::PairTrade>)>,
}

fn key(trader: usize) -> SigningKey {
    SigningKey::from_bytes(&[trader as u8 + 1; 32])
}

pub fn run_exchange(options: ExchangeOptions) -> Result<ExchangeReport, Violation> {
    let mut config = ExchangeConfig::new([0xe7; 32], options.assets);
    config.clearing = ClearingParams {
        instances: 1,
        rounds_max: 400,
        time_budget_ms: specie_clearing::TIME_BUDGET_MS_MAX,
        ..ClearingParams::default()
    };
    let accounts = (0..options.traders)
        .map(|t| {
            (
                Market::account(t),
                key(t).verifying_key().to_bytes(),
                vec![1_000_000; options.assets],
            )
        })
        .collect();
    let genesis = Ledger::genesis(config.clone(), accounts).expect("a valid genesis");
    let limits = RoleLimits {
        block_interval_ms: BLOCK_INTERVAL_MS,
        ..RoleLimits::default()
    };
    let fresh_genesis = genesis.clone();
    let host = SimHost::start("exchange", move || ExchangeRole::new(fresh_genesis.clone(), limits));
    let mut world = World {
        rng: StdRng::seed_from_u64(options.seed),
        step: 0,
        now_ms: 0,
        host,
        replicas: vec![genesis.clone(), genesis],
        single_thread: rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a pool"),
        market: Market::new(options.assets, options.traders),
        keys: (0..options.traders).map(key).collect(),
        next_ticket: 1,
        next_marker: 1,
        report: ExchangeReport::default(),
        durable_block: None,
        trace: DefaultHasher::new(),
        config,
        options,
    };
    while world.step < world.options.steps {
        world.step += 1;
        world.act()?;
    }
    world.report.trace_digest = world.trace.finish();
    Ok(world.report)
}

impl World {
    fn violation(&self, message: impl Into<String>) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: format!("exchange world: {}", message.into()),
        }
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        self.rng.gen_range(0..1000) < per_mille
    }

    fn act(&mut self) -> Result<(), Violation> {
        if !self.host.is_up() {
            self.host
                .restart(self.now_ms)
                .map_err(|e| self.violation(e.to_string()))?;
            self.check_replicas()?;
        }
        if self.chance(self.options.deposit_per_mille) {
            self.deposit()?;
        }
        self.block()?;
        if self.chance(self.options.restore_per_mille) {
            self.restore_replica()?;
        }
        if self.chance(self.options.crash_per_mille) && self.host.crash() {
            self.report.crashes += 1;
        }
        Ok(())
    }

    fn ledger(&self) -> &Ledger {
        self.host.role().expect("the proposer is up").ledger()
    }

    fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// A deposit for a random trader, handed in twice: credited once, refused the second time.
    fn deposit(&mut self) -> Result<(), Violation> {
        let trader = self.rng.gen_range(0..self.options.traders);
        self.next_marker += 1;
        let mut marker = [0u8; 32];
        marker[..8].copy_from_slice(&self.next_marker.to_le_bytes());
        let deposit = Deposit {
            asset: self.rng.gen_range(0..self.options.assets as u16),
            marker,
            account: Market::account(trader),
            key: self.keys[trader].verifying_key().to_bytes(),
            amount: self.rng.gen_range(1..100_000),
        };
        for attempt in 0..2 {
            let ticket = self.ticket();
            let events = self.host.handle(
                self.now_ms,
                ExchangeInput::Deposit {
                    ticket,
                    deposit,
                    refund_to: None,
                },
            );
            let replies = self.take_events(events)?;
            let expected = match attempt {
                0 => ExchangeReply::Deposited,
                _ => ExchangeReply::DepositRefused(specie_exchange::DepositRefusal::AlreadyCredited),
            };
            if replies != vec![(ticket, expected.clone())] {
                return Err(self.violation(format!("deposit {attempt}: {replies:?}, expected {expected:?}")));
            }
        }
        self.report.deposits += 1;
        self.report.deposits_refused_again += 1;
        Ok(())
    }

    /// One block: the workload's transactions and some hostile ones, submitted, then the
    /// interval passes and the block is made durable and applied everywhere.
    fn block(&mut self) -> Result<(), Violation> {
        let ledger = self.ledger().clone();
        self.market
            .drift(&mut self.rng, &MarketMix::for_traders(self.options.traders));
        for trader in 0..self.options.traders {
            let last = ledger.account(Market::account(trader)).expect("a trader").last_sequence;
            self.market.resync(trader, last + 1);
        }
        let mix = MarketMix::for_traders(self.options.traders);
        let planned = self.market.block(&mut self.rng, &mix, |trader, asset| {
            ledger.account(Market::account(trader)).expect("a trader").balances[usize::from(asset)]
        });
        let exchange = self.config.exchange;
        let mut transactions: Vec<SignedTransaction> = planned
            .into_iter()
            .map(|(t, tx)| tx.sign(&exchange, &self.keys[t]))
            .collect();
        let hostile = self.hostile(&ledger);
        let hostile_at = transactions.len();
        transactions.extend(hostile.iter().copied());
        let ticket = self.ticket();
        let submitted = transactions.clone();
        let events = self
            .host
            .handle(self.now_ms, ExchangeInput::Submit { ticket, transactions });
        self.take_events(events)?;
        self.now_ms += BLOCK_INTERVAL_MS;
        let events = self.host.tick(self.now_ms);
        let replies = self.take_events(events)?;
        let Some((_, ExchangeReply::Settled(fates))) = replies.into_iter().find(|(t, _)| *t == ticket) else {
            return Err(self.violation("a submission was not answered after its block"));
        };
        if fates.len() != submitted.len() {
            return Err(self.violation("a fate per transaction"));
        }
        for fate in &fates[hostile_at..] {
            if matches!(fate, Fate::Included { .. }) {
                return Err(self.violation("a hostile transaction was included"));
            }
            self.report.hostile_refused += 1;
        }
        let included = fates.iter().filter(|f| matches!(f, Fate::Included { .. })).count() as u64;
        self.report.included += included;
        self.report.refused += fates.len() as u64 - included;
        Ok(())
    }

    /// Transactions the screen must refuse: a forged signature, an overdraft, a replayed sequence.
    fn hostile(&mut self, ledger: &Ledger) -> Vec<SignedTransaction> {
        if !self.chance(self.options.hostile_per_mille) {
            return Vec::new();
        }
        let trader = self.rng.gen_range(0..self.options.traders);
        let account = ledger.account(Market::account(trader)).expect("a trader");
        let to = Market::account((trader + 1) % self.options.traders);
        let exchange = self.config.exchange;
        let pay = |sequence: u64, amount: u64| Transaction {
            account: Market::account(trader),
            sequence,
            operation: Operation::Payment { to, asset: 0, amount },
        };
        let mut forged = pay(account.last_sequence + 63, 1).sign(&exchange, &self.keys[trader]);
        forged.signature[0] ^= 1;
        let replayed = pay(account.last_sequence, 1).sign(&exchange, &self.keys[trader]);
        let overdraft = pay(account.last_sequence + 62, account.balances[0] + 1).sign(&exchange, &self.keys[trader]);
        // The overdraft and the replay refuse every transaction of their account in the block:
        // only one of them goes in, with the forgery (refused on its own).
        match self.rng.gen_range(0..2) {
            0 => vec![forged, replayed],
            _ => vec![forged, overdraft],
        }
    }

    /// Hands what the proposer did to the world: durable commands go to every replica (checked),
    /// replies come back to the caller.
    fn take_events(&mut self, events: Vec<SimEvent<ExchangeRole>>) -> Result<Vec<(u64, ExchangeReply)>, Violation> {
        let mut replies = Vec::new();
        for event in events {
            match event {
                SimEvent::Durable(bytes) => {
                    self.trace.write(&bytes);
                    let role = self.host.role().expect("the proposer is up");
                    let command = role.decode_command(&bytes).map_err(|e| self.violation(e.to_string()))?;
                    self.replicate(command)?;
                }
                SimEvent::Reply { ticket, reply } => replies.push((ticket, reply)),
                SimEvent::Report(specie_exchange::ExchangeReport::Cleared(cleared)) => self.cleared(&cleared)?,
                SimEvent::Report(report) => return Err(self.violation(format!("the proposer reported {report:?}"))),
                SimEvent::Send { to, .. } => match to {},
            }
        }
        Ok(replies)
    }

    /// The proposer's report of a block it cleared must describe the block just made durable.
    fn cleared(&mut self, cleared: &specie_exchange::Cleared) -> Result<(), Violation> {
        let reported = (cleared.height, cleared.transactions, cleared.trades.clone());
        if self.durable_block.as_ref() != Some(&reported) {
            let durable = self.durable_block.as_ref().map(|(height, size, _)| (height, size));
            return Err(self.violation(format!(
                "the proposer reported block {} of {} transactions cleared; the last durable block is {durable:?}",
                cleared.height, cleared.transactions
            )));
        }
        self.report.cleared += 1;
        Ok(())
    }

    /// Every replica applies `command`, the first on one thread, every block's transactions
    /// shuffled; all must reach the proposer's state hash, and the audit must hold.
    fn replicate(&mut self, command: ExchangeCommand) -> Result<(), Violation> {
        let mut command = command;
        if let ExchangeCommand::Block(block) = &mut command {
            self.report.blocks += 1;
            let trades = block.clearing.trades.clone();
            self.durable_block = Some((block.height, block.transactions.len(), trades));
            if self.options.inflate_trades {
                block
                    .clearing
                    .trades
                    .iter_mut()
                    .for_each(|t| t.amount += t.amount / 100 + 1);
            }
        }
        for index in 0..self.replicas.len() {
            let mut command = command.clone();
            if let ExchangeCommand::Block(block) = &mut command {
                block.transactions.shuffle(&mut self.rng);
            }
            let replica = &mut self.replicas[index];
            let applied = match &command {
                ExchangeCommand::Block(block) if index == 0 => self
                    .single_thread
                    .install(|| replica.apply(block))
                    .map(|e| e.offers_traded as u64)
                    .map_err(|e| e.to_string()),
                ExchangeCommand::Block(block) => replica
                    .apply(block)
                    .map(|e| e.offers_traded as u64)
                    .map_err(|e| e.to_string()),
                ExchangeCommand::Deposit(deposit) => replica.deposit(deposit).map(|()| 0).map_err(|e| e.to_string()),
                ExchangeCommand::DepositOrRefund { deposit, refund_to } => replica
                    .deposit_or_refund(deposit, *refund_to)
                    .map(|_| 0)
                    .map_err(|e| e.to_string()),
            };
            match applied {
                Ok(traded) if index == 0 => self.report.offers_traded += traded,
                Ok(_) => {}
                Err(error) => {
                    return Err(self.violation(format!("replica {index} refused a committed command: {error}")))
                }
            }
        }
        self.check_replicas()
    }

    fn check_replicas(&self) -> Result<(), Violation> {
        let Some(role) = self.host.role() else {
            return Ok(());
        };
        let hash = role.ledger().state_hash();
        for (index, replica) in self.replicas.iter().enumerate() {
            if replica.state_hash() != hash {
                return Err(self.violation(format!("replica {index} diverged at height {}", replica.height())));
            }
            replica
                .audit()
                .map_err(|e| self.violation(format!("replica {index}: {e}")))?;
        }
        Ok(())
    }

    /// A replica rebuilt from the proposer's snapshot: the same state hash.
    fn restore_replica(&mut self) -> Result<(), Violation> {
        let Some(role) = self.host.role() else {
            return Ok(());
        };
        let snapshot = role.snapshot();
        let restored = Ledger::restore(self.config.clone(), &snapshot).map_err(|e| self.violation(e.to_string()))?;
        if restored.state_hash() != role.ledger().state_hash() {
            return Err(self.violation("a replica restored from a snapshot has another state hash"));
        }
        let index = self.rng.gen_range(0..self.replicas.len());
        self.replicas[index] = restored;
        self.report.replicas_restored += 1;
        Ok(())
    }
}
