//! Block execution: blocks of payments and of crossing offers from the synthetic workload,
//! applied to a ledger of many accounts with `Ledger::apply` (state hash on) and appended to a
//! real log with fdatasync (durability on), on one thread and on all cores.
//!
//! `apply` is one call, so its steps are timed apart on the same pool, on the same block, just
//! before it: the signatures (verified as `apply` verifies them), the screen
//! (`specie_exchange::screen::screen`, public), the books after the effects and the clearing's
//! `check`. A block with no transactions, applied after each kind's blocks, costs what every block
//! costs whatever it holds (the copy of the books, the state hash's top; before the state hash was
//! kept incremental, the full Merkle hash over every account and offer). What is left of `apply`
//! is the effects, the trades and the rehash of what they touched.

use std::collections::BTreeMap;
use std::time::Instant;

use ed25519_dalek::SigningKey;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use rayon::ThreadPool;
use serde::Serialize;
use specie_clearing::{PairSupply, VALUATION_START};
use specie_exchange::screen::{screen, Effects};
use specie_exchange::{
    AssetId, Block, Clearing, ExchangeCommand, ExchangeConfig, ExchangeRole, Ledger, SignedTransaction, Valuation,
    ASSET_TOTAL_MAX,
};
use specie_log::{Log, LogOptions};
use specie_role::Durable;
use specie_workload::exchange::{Market, MarketMix};

use super::clearing::{supply_of, Books};
use super::{
    ms_since, verdict, Ceiling, ExchangeBenchOptions, PAPER_PAYMENTS_PER_S_PER_THREAD, TARGET_EXECUTION_RATIO,
};
use crate::cpu::CpuClock;
use crate::ensure_that;
use crate::error::{BenchResult, StepContext};

/// Distinct signing keys: account `n` has key `n % KEYS` (deriving a million keys would take
/// longer than the benchmark; the exchange verifies each transaction whatever its key).
const KEYS: usize = 1_024;
/// Most of each asset an account starts with.
const BALANCE_MAX: u64 = 1_000_000_000_000;

/// A step's time: by the wall clock, and the process's CPU time (every thread's), in
/// milliseconds. The machine may be shared: CPU time is what the step cost, whatever else ran.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Ms {
    pub wall: f64,
    pub cpu: f64,
}

impl Ms {
    fn time<T>(step: impl FnOnce() -> T) -> (T, Ms) {
        let (wall, cpu) = (Instant::now(), CpuClock::now());
        let out = step();
        let ms = Ms {
            wall: ms_since(wall),
            cpu: cpu.used().process_s * 1e3,
        };
        (out, ms)
    }

    fn add(&mut self, other: Ms) {
        self.wall += other.wall;
        self.cpu += other.cpu;
    }

    fn per(self, count: usize) -> Ms {
        let count = count.max(1) as f64;
        Ms {
            wall: self.wall / count,
            cpu: self.cpu / count,
        }
    }
}

/// A block's time, averaged over a kind's blocks.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PerBlockMs {
    /// Verification of every signature as `apply` does it (batches of 64, keys decompressed
    /// once per account), measured apart on the kind's first block.
    pub signatures: Ms,
    /// The screen (order-independent admission), measured apart.
    pub screen: Ms,
    /// The books after the effects (a copy of every book, the block's changes, aggregated by
    /// limit) and `check` of the clearing, measured apart.
    pub supply_check: Ms,
    /// `apply` of a block with no transactions: what every block pays whatever it holds (the
    /// copy of the books, the state hash's top; the trees are rehashed only where a block
    /// touched them).
    pub empty_block_apply: Ms,
    /// What is left of `apply`: the effects and the trades (and the noise of the above).
    pub effects_execution: Ms,
    /// The whole `Ledger::apply`.
    pub apply: Ms,
    /// Encoding the block and appending it to the log with fdatasync.
    pub log: Ms,
    /// The proposer's `compute_from` the last block's prices (Tâtonnement and LP), not part of
    /// `apply`.
    pub proposer_clearing: Ms,
}

/// One kind of block on one pool.
#[derive(Clone, Debug, Serialize)]
pub struct KindReport {
    pub threads: usize,
    pub kind: &'static str,
    pub blocks: usize,
    /// Transactions over the blocks (the workload skips zero amounts and payments to oneself).
    pub transactions: usize,
    pub offers_traded: usize,
    /// Offers resting after the kind's blocks.
    pub resting_offers: usize,
    /// Transactions per second of `apply` alone, by the wall clock.
    pub applied_per_s: f64,
    /// Transactions per second of `apply` then the log's append and fdatasync, by the wall clock.
    pub durable_per_s: f64,
    pub durable_per_s_per_thread: f64,
    /// The share of the pool's cores the process had during `apply` (CPU time / wall time /
    /// threads): below 1 when other processes took the cores, or `apply` ran on fewer threads.
    pub cpu_share: f64,
    /// Transactions per CPU second of `apply` and the log, and per CPU second of `apply` plus the
    /// wall time of the log: what one core to itself does, waiting for fdatasync.
    pub per_cpu_s: f64,
    pub one_core_durable_per_s: f64,
    /// Per thread, against the paper's 10k payments/s per thread: by the wall clock, and for one
    /// core to itself (`one_core_durable_per_s`, on one thread only; 0 otherwise).
    pub per_thread_vs_paper: f64,
    pub one_core_vs_paper: f64,
    /// `per_cpu_s` against the Ed25519 strict verifications per CPU second of one core.
    pub share_of_ceiling: f64,
    /// Per CPU second, if a block did not pay the empty block's work (a state hash rehashing only
    /// what the block changed): a projection, not a measurement.
    pub projected_without_full_hash_per_cpu_s: f64,
    pub per_block_ms: PerBlockMs,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExecutionReport {
    pub accounts: usize,
    pub assets: usize,
    pub block_transactions: usize,
    /// `Ledger::genesis` of the accounts (one full state hash included).
    pub genesis_s: f64,
    /// One thread's payments, then offers; all cores' payments, then offers.
    pub kinds: Vec<KindReport>,
    /// One thread, payments: per second for one core to itself (fdatasync waited), against the
    /// paper's per-thread rate; the target's verdict.
    pub one_thread_payments_vs_paper: f64,
    pub meets_target: bool,
}

/// The ledger and what drives it.
struct Exec {
    ledger: Ledger,
    market: Market,
    keys: Vec<SigningKey>,
    exchange: [u8; 32],
    rng: StdRng,
    log: Log,
    _dir: tempfile::TempDir,
    one_thread: ThreadPool,
    /// Every thread asked for: also signs the planned transactions (not timed).
    all_cores: ThreadPool,
    /// The last block's valuations, where the proposer's next search starts (as `Ledger::assemble`).
    previous_prices: Vec<Valuation>,
}

pub fn measure(options: &ExchangeBenchOptions, ceiling: &Ceiling, say: &impl Fn(&str)) -> BenchResult<ExecutionReport> {
    say(&format!(
        "execution: genesis of {} accounts with {} assets …",
        options.accounts, options.execution_assets
    ));
    let started = Instant::now();
    let mut exec = Exec::new(options)?;
    let genesis_s = started.elapsed().as_secs_f64();
    let mut kinds = Vec::new();
    for threads in [1, options.threads] {
        for kind in ["payments", "offers"] {
            say(&format!(
                "execution: {} blocks of {kind} on {threads} thread(s) …",
                options.blocks
            ));
            let mut report = exec.run_kind(threads, kind, options)?;
            report.share_of_ceiling = report.per_cpu_s / ceiling.verify_strict_per_core_per_s;
            kinds.push(report);
        }
    }
    let one_thread_payments_vs_paper = kinds[0].one_core_vs_paper;
    Ok(ExecutionReport {
        accounts: options.accounts,
        assets: options.execution_assets,
        block_transactions: options.block_transactions,
        genesis_s,
        kinds,
        one_thread_payments_vs_paper,
        meets_target: one_thread_payments_vs_paper >= TARGET_EXECUTION_RATIO,
    })
}

fn pool(threads: usize) -> BenchResult<ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .step("a thread pool")
}

/// Sums of a kind's blocks.
#[derive(Default)]
struct Sums {
    blocks: usize,
    transactions: usize,
    offers_traded: usize,
    /// Blocks whose signatures were verified apart (the first of each kind).
    signature_blocks: usize,
    ms: PerBlockMs,
}

impl Exec {
    fn new(options: &ExchangeBenchOptions) -> BenchResult<Exec> {
        let all_cores = pool(options.threads)?;
        let mut rng = StdRng::seed_from_u64(options.seed);
        let keys: Vec<SigningKey> = (0..KEYS).map(|_| SigningKey::from_bytes(&rng.gen())).collect();
        let public: Vec<[u8; 32]> = keys.iter().map(|k| k.verifying_key().to_bytes()).collect();
        let exchange: [u8; 32] = rng.gen();
        let assets = options.execution_assets;
        let mut config = ExchangeConfig::new(exchange, assets);
        config.block_transactions_max = config.block_transactions_max.max(options.block_transactions);
        let balance = BALANCE_MAX.min(ASSET_TOTAL_MAX / options.accounts as u64);
        let accounts = (0..options.accounts)
            .map(|n| (Market::account(n), public[n % KEYS], vec![balance; assets]))
            .collect();
        let record_bytes_max = u32::try_from(config.command_bytes_max()).step("a block's record fits the log")?;
        let ledger = all_cores
            .install(|| Ledger::genesis(config, accounts))
            .step("the genesis")?;
        let dir = tempfile::Builder::new().prefix("specie-bench-exchange-").tempdir()?;
        let log_options = LogOptions {
            record_bytes_max,
            segment_bytes_max: 4 * u64::from(record_bytes_max),
            ..LogOptions::default()
        };
        let (log, _) = Log::open(dir.path(), log_options).step("opening the exchange's log")?;
        Ok(Exec {
            ledger,
            market: Market::new(assets, options.accounts),
            keys,
            exchange,
            rng,
            log,
            _dir: dir,
            one_thread: pool(1)?,
            all_cores,
            previous_prices: Vec::new(),
        })
    }

    /// `options.blocks` blocks of one kind on `threads` threads (1 or all), then an empty block.
    fn run_kind(
        &mut self,
        threads: usize,
        kind: &'static str,
        options: &ExchangeBenchOptions,
    ) -> BenchResult<KindReport> {
        let n = options.block_transactions;
        let mix = MarketMix {
            offers: if kind == "offers" { n } else { 0 },
            cancels: 0,
            payments: if kind == "payments" { n } else { 0 },
            ..MarketMix::for_traders(options.accounts)
        };
        let mut sums = Sums::default();
        for _ in 0..options.blocks {
            self.block(threads, &mix, &mut sums)?;
        }
        let mut ms = sums.ms;
        ms.signatures = ms.signatures.per(sums.signature_blocks);
        for step in [
            &mut ms.screen,
            &mut ms.supply_check,
            &mut ms.apply,
            &mut ms.log,
            &mut ms.proposer_clearing,
        ] {
            *step = step.per(sums.blocks);
        }
        ms.empty_block_apply = self.empty_block(threads)?;
        let timed_apart = [ms.signatures, ms.screen, ms.supply_check, ms.empty_block_apply];
        ms.effects_execution = Ms {
            wall: (ms.apply.wall - timed_apart.iter().map(|m| m.wall).sum::<f64>()).max(0.0),
            cpu: (ms.apply.cpu - timed_apart.iter().map(|m| m.cpu).sum::<f64>()).max(0.0),
        };
        let per_block = sums.transactions as f64 / sums.blocks as f64;
        let rate = |ms: f64| per_block / (ms.max(1e-3) / 1e3);
        let durable_per_s = rate(ms.apply.wall + ms.log.wall);
        let one_core = match threads {
            1 => rate(ms.apply.cpu + ms.log.wall),
            _ => 0.0,
        };
        Ok(KindReport {
            threads,
            kind,
            blocks: sums.blocks,
            transactions: sums.transactions,
            offers_traded: sums.offers_traded,
            resting_offers: self.ledger.offer_count(),
            applied_per_s: rate(ms.apply.wall),
            durable_per_s,
            durable_per_s_per_thread: durable_per_s / threads as f64,
            cpu_share: ms.apply.cpu / ms.apply.wall.max(1e-3) / threads as f64,
            per_cpu_s: rate(ms.apply.cpu + ms.log.cpu),
            one_core_durable_per_s: one_core,
            per_thread_vs_paper: durable_per_s / threads as f64 / PAPER_PAYMENTS_PER_S_PER_THREAD,
            one_core_vs_paper: one_core / PAPER_PAYMENTS_PER_S_PER_THREAD,
            share_of_ceiling: 0.0,
            projected_without_full_hash_per_cpu_s: rate(ms.apply.cpu + ms.log.cpu - ms.empty_block_apply.cpu),
            per_block_ms: ms,
        })
    }

    /// Plans and signs one block's transactions (on all cores, not timed).
    fn plan(&mut self, mix: &MarketMix) -> Vec<SignedTransaction> {
        let Exec {
            ledger, market, rng, ..
        } = self;
        market.drift(rng, mix);
        let planned = market.block(rng, mix, |trader, asset| {
            ledger
                .account(Market::account(trader))
                .map_or(0, |account| account.balances[usize::from(asset)])
        });
        let (keys, exchange) = (&self.keys, &self.exchange);
        self.all_cores.install(|| {
            planned
                .into_par_iter()
                .map(|(trader, transaction)| transaction.sign(exchange, &keys[trader % KEYS]))
                .collect()
        })
    }

    /// One block: planned, its steps timed apart, cleared as a proposer would, applied, logged.
    fn block(&mut self, threads: usize, mix: &MarketMix, sums: &mut Sums) -> BenchResult<()> {
        let transactions = self.plan(mix);
        let pool = match threads {
            1 => &self.one_thread,
            _ => &self.all_cores,
        };
        let (ledger, previous) = (&mut self.ledger, &self.previous_prices);
        let verify_apart = sums.signature_blocks == 0;
        let ms = &mut sums.ms;
        let (block, executed) = pool.install(|| -> BenchResult<_> {
            if verify_apart {
                let (valid, took) = Ms::time(|| signatures_valid(ledger, &transactions));
                ensure_that!(valid, "a signature does not verify");
                ms.signatures.add(took);
            }
            let ((verdicts, effects), took) = Ms::time(|| screen(ledger, &transactions));
            ms.screen.add(took);
            if let Some(refusal) = verdicts.iter().flatten().next() {
                crate::fail!("the screen refused a planned transaction: {refusal}");
            }
            let (supply, took) = Ms::time(|| supply_after(ledger, &effects));
            ms.supply_check.add(took);
            let (assets, params) = (ledger.config().assets, ledger.config().clearing.clone());
            let (clearing, took) = Ms::time(|| specie_clearing::compute_from(assets, &supply, &params, previous));
            ms.proposer_clearing.add(took);
            let (checked, took) = Ms::time(|| specie_clearing::check(assets, &supply, &params, &clearing));
            checked.step("the proposer's clearing")?;
            ms.supply_check.add(took);
            let block = Block {
                height: ledger.height() + 1,
                previous: ledger.state_hash(),
                transactions,
                clearing,
            };
            let (executed, took) = Ms::time(|| ledger.apply(&block));
            ms.apply.add(took);
            Ok((block, executed.step("the block does not apply")?))
        })?;
        self.previous_prices.clone_from(&block.clearing.prices);
        sums.signature_blocks += usize::from(verify_apart);
        sums.blocks += 1;
        sums.transactions += executed.transactions;
        sums.offers_traded += executed.offers_traded;
        let took = self.append(block)?;
        sums.ms.log.add(took);
        Ok(())
    }

    /// Appends the block to the log as the exchange's role does (one record, fdatasync).
    fn append(&mut self, block: Block) -> BenchResult<Ms> {
        let log = &mut self.log;
        let (appended, took) = Ms::time(|| {
            let record = ExchangeRole::encode_command(&ExchangeCommand::Block(block));
            log.append_batch(&[record])
        });
        appended.step("appending a block")?;
        Ok(took)
    }

    /// Applies (and logs) a block with no transactions: what every block costs, in ms.
    fn empty_block(&mut self, threads: usize) -> BenchResult<Ms> {
        let assets = self.ledger.config().assets;
        let block = Block {
            height: self.ledger.height() + 1,
            previous: self.ledger.state_hash(),
            transactions: Vec::new(),
            clearing: Clearing {
                prices: vec![Valuation(VALUATION_START); assets],
                trades: Vec::new(),
            },
        };
        let pool = match threads {
            1 => &self.one_thread,
            _ => &self.all_cores,
        };
        let ledger = &mut self.ledger;
        let (applied, took) = Ms::time(|| pool.install(|| ledger.apply(&block)));
        applied.step("an empty block")?;
        self.append(block)?;
        Ok(took)
    }
}

/// Whether every signature verifies, as `Ledger::apply` checks them first (in batches, in
/// parallel).
fn signatures_valid(ledger: &Ledger, transactions: &[SignedTransaction]) -> bool {
    specie_exchange::block::signatures_valid(ledger, transactions)
        .into_iter()
        .all(|ok| ok)
}

/// The books once `effects` are applied (a copy of every book, as `apply` makes), aggregated.
fn supply_after(ledger: &Ledger, effects: &Effects) -> Vec<PairSupply> {
    let assets = ledger.config().assets as AssetId;
    let mut books = Books::new();
    for sell in 0..assets {
        for buy in (0..assets).filter(|buy| *buy != sell) {
            let book: BTreeMap<_, _> = ledger.book((sell, buy)).map(|(key, amount)| (*key, *amount)).collect();
            if !book.is_empty() {
                books.insert((sell, buy), book);
            }
        }
    }
    for (pair, key) in &effects.cancels {
        books.get_mut(pair).and_then(|book| book.remove(key));
    }
    for (pair, key, amount) in &effects.offers {
        books.entry(*pair).or_default().insert(*key, *amount);
    }
    supply_of(&books)
}

pub fn table(report: &ExecutionReport, ceiling: &Ceiling, cores: usize) -> String {
    let mut out =
        format!(
        "execution: {} accounts, {} assets, blocks of {} transactions; Ledger::apply (signatures, screen, clearing \
         check, effects, trades, state hash) then the block appended to a real log with fdatasync; genesis {:.1} s\n\
         ceiling (same run): Ed25519 strict verification {:.0}/s per core (CPU time), {:.0}/s on {cores} threads \
         (wall clock); per core: {:.0}/s decompressing the key each time, {:.0}/s in batches of 64 (as apply does)\n\
         {:>7} {:>8} {:>8} {:>9} {:>9} {:>10} {:>6} {:>8} {:>9} {:>8} {:>8} {:>7} {:>7} {:>12}\n",
        report.accounts,
        report.assets,
        report.block_transactions,
        report.genesis_s,
        ceiling.verify_strict_per_core_per_s,
        ceiling.verify_strict_all_cores_per_s,
        ceiling.verify_strict_decompressing_per_core_per_s,
        ceiling.batch_verify_per_core_per_s,
        "threads", "kind", "tx/block", "applied/s", "durable/s", "per thread", "cpu", "per cpu-s", "one core",
        "vs paper", "ceiling", "traded", "resting", "no full hash",
    );
    for k in &report.kinds {
        let paper = match k.threads {
            1 => k.one_core_vs_paper,
            _ => k.per_thread_vs_paper,
        };
        out.push_str(&format!(
            "{:>7} {:>8} {:>8} {:>9.0} {:>9.0} {:>10.0} {:>5.0}% {:>9.0} {:>9} {:>7.2}x {:>7.1}% {:>7} {:>7} {:>12.0}\n",
            k.threads,
            k.kind,
            k.transactions / k.blocks.max(1),
            k.applied_per_s,
            k.durable_per_s,
            k.durable_per_s_per_thread,
            k.cpu_share * 100.0,
            k.per_cpu_s,
            if k.threads == 1 { format!("{:.0}", k.one_core_durable_per_s) } else { "-".into() },
            paper,
            k.share_of_ceiling * 100.0,
            k.offers_traded,
            k.resting_offers,
            k.projected_without_full_hash_per_cpu_s,
        ));
    }
    out.push_str(&breakdown(report));
    out.push_str(&format!(
        "execution target (one thread, payments, a core to itself, fdatasync waited: >= {TARGET_EXECUTION_RATIO}x the \
         paper's {:.0}/s per thread): {:.2}x: {}\n\
         (applied/s, durable/s, per thread: wall clock, apply then the log's fdatasync one after the other; cpu: the \
         process's CPU time / wall time / threads during apply (other processes share the machine); per cpu-s: \
         transactions per CPU second of apply and the log; one core: per CPU second of apply plus the log's wall \
         time; vs paper: one core (1 thread) or per thread (all cores) / {:.0}; ceiling: per cpu-s as a share of \
         strict verifications per CPU second; no full hash: per cpu-s without the empty block's cost, a projection)\n",
        PAPER_PAYMENTS_PER_S_PER_THREAD,
        report.one_thread_payments_vs_paper,
        verdict(report.meets_target),
        PAPER_PAYMENTS_PER_S_PER_THREAD,
    ));
    out
}

/// Where a block's time goes: CPU milliseconds per step, and the wall clock of apply and the log.
fn breakdown(report: &ExecutionReport) -> String {
    let mut out = format!(
        "per block, CPU ms: {:>8} {:>7} {:>10} {:>7} {:>12} {:>11} {:>9} {:>9} | wall ms: {:>7} {:>6} {:>9}\n",
        "kind",
        "threads",
        "signatures",
        "screen",
        "supply+check",
        "empty block",
        "effects+",
        "apply",
        "apply",
        "log",
        "proposer",
    );
    for k in &report.kinds {
        let b = &k.per_block_ms;
        let share = |m: &Ms| format!("{:.0} ({:.0}%)", m.cpu, m.cpu / b.apply.cpu.max(1e-3) * 100.0);
        out.push_str(&format!(
            "                   {:>8} {:>7} {:>10} {:>7} {:>12} {:>11} {:>9} {:>9.0} |          {:>7.0} {:>6.1} {:>9.1}\n",
            k.kind,
            k.threads,
            share(&b.signatures),
            share(&b.screen),
            share(&b.supply_check),
            share(&b.empty_block_apply),
            share(&b.effects_execution),
            b.apply.cpu,
            b.apply.wall,
            b.log.wall,
            b.proposer_clearing.wall,
        ));
    }
    out.push_str(
        "(steps timed apart on the same pool and block; empty block: apply of a block with no transactions, the \
         books' copy and the state hash's top, paid by every block; effects+: apply less the steps timed apart, \
         i.e. effects, trades and the rehash of the accounts and books they touched; proposer: the proposer's clearing, not part of apply)\n",
    );
    out
}
