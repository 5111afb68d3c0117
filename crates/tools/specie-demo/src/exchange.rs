//! `specie demo --exchange`: three currencies, each minted by its own issuer on its own embedded
//! online core (fsync on), and the SPEEDEX exchange between them on the embedded host (fsync on,
//! one per block). Traders move value into the exchange by core fundings to its bridge key
//! (credited once the exchange finds each in its core's UHS), trade in blocks of offers, cancels
//! and payments drawn around drifting valuations, then cancel every offer and withdraw
//! everything: payouts the exchange signs, presented to each core twice. The per-currency audit
//! ends it: minted = what the core holds + what the exchange holds, exactly, and the exchange
//! holds nothing but the commission it burned.

use crate::supply::{DemoFigures, SupplyCheck};
use specie_exchange_service::http_api::ExchangeSupplyBody;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use secp256k1::Keypair;
use specie_api::TxStatus;
use specie_codec::{Decode, Encode};
use specie_exchange::{
    deposit_commitment, Account, AssetId, ExchangeConfig, ExchangeInput, ExchangeReply, ExchangeRole, Fate, Ledger,
    Operation, RoleLimits, SignedTransaction, Transaction, Valuation,
};
use specie_exchange_service::core_bridge::{bridge_payout, deposit_from_core};
use specie_host::{RoleCall, RoleThread};
use specie_log::LogOptions;
use specie_node::{EmbeddedNode, NodeOptions};
use specie_service::CoreTransactions;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, BridgeFunding, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction,
};
use specie_wallet::CORE_FORMAT;
use specie_workload::exchange::{Market, MarketMix};

use crate::byzantine::{present_twice, value_held_by_core};
use specie_measure::error::{BenchError, BenchResult, StepContext};
use specie_measure::fail;
use specie_measure::submit::submit_all;

/// The currencies, each on its own core.
const CURRENCIES: [&str; 3] = ["usd", "eur", "gbp"];
/// Minted to each trader on each core; most of it moves into the exchange.
const MINTED: u64 = 10_000_000;
const DEPOSITED: u64 = 8_000_000;

pub struct ExchangeDemoOptions {
    pub traders: usize,
    pub blocks: usize,
    pub seed: u64,
    pub data_dir: Option<PathBuf>,
    pub chart: PathBuf,
    pub json: bool,
}

/// The exchange: its role on the embedded host, its identity (signed by every transaction) and
/// its bridge key (fundings are made out to it, payouts signed by it).
struct Venue {
    role: RoleThread<ExchangeRole>,
    id: [u8; 32],
    bridge: SigningKey,
}

/// One core per currency, and what was submitted to it.
struct Core {
    node: EmbeddedNode,
    issuer: Keypair,
    fundings: Vec<SpecieTransaction>,
    payouts: Vec<SpecieTransaction>,
}

struct Trader {
    core_key: Keypair,
    exchange_key: SigningKey,
}

/// One block's figures, for the chart and the summary.
pub struct BlockFigures {
    prices: Vec<Valuation>,
    /// Value traded, in units of the first currency at the block's prices.
    volume: f64,
    included: u64,
    refused: u64,
}

impl crate::exchange_chart::BlockPoint for BlockFigures {
    fn prices(&self) -> &[Valuation] {
        &self.prices
    }

    fn volume(&self) -> f64 {
        self.volume
    }
}

pub fn run(args: &ExchangeDemoOptions) -> BenchResult<ExitCode> {
    if !(2..=2_000).contains(&args.traders) || !(1..=10_000).contains(&args.blocks) {
        return Err(BenchError::InvalidOptions(
            "--wallets must be 2..=2000 and --blocks 1..=10000".into(),
        ));
    }
    let temp = tempfile::Builder::new().prefix("specie-demo-exchange-").tempdir()?;
    let root = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let mut rng = StdRng::seed_from_u64(args.seed);
    let venue = open_exchange(&root, &mut rng)?;
    let traders: Vec<Trader> = (0..args.traders)
        .map(|_| Trader {
            core_key: Keypair::new_global(&mut rng),
            exchange_key: SigningKey::from_bytes(&rng.gen()),
        })
        .collect();
    let started = Instant::now();
    let mut cores = Vec::new();
    for (asset, currency) in CURRENCIES.iter().enumerate() {
        let core = open_core(&root, currency, &venue.bridge, &traders, &mut rng)?;
        cores.push(deposit(core, &venue, asset as AssetId, &traders)?);
    }
    let figures = trade(args, &venue, &traders, &mut rng)?;
    cancel_everything(&venue, &traders)?;
    let withdrawn = withdraw_all(&venue, &traders, &mut cores)?;
    let elapsed = started.elapsed();
    let role = venue.role.stop().step("the exchange stopped early")?;
    let bridge = venue.bridge.verifying_key().to_bytes();
    let audit = audit(&cores, role.ledger(), bridge, args.traders)?;
    cores.into_iter().for_each(|core| core.node.shutdown());
    crate::exchange_chart::write(&args.chart, &figures, &CURRENCIES)?;
    report(args, &figures, &audit, withdrawn, elapsed);
    Ok(if audit.iter().all(|a| a.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The exchange on the embedded host over its log in `root/exchange`, with no account yet (a
/// first deposit opens one).
fn open_exchange(root: &std::path::Path, rng: &mut StdRng) -> BenchResult<Venue> {
    let bridge = SigningKey::from_bytes(&rng.gen());
    let id: [u8; 32] = rng.gen();
    let config = ExchangeConfig::new(id, CURRENCIES.len());
    let limits = RoleLimits {
        block_interval_ms: 10,
        ..RoleLimits::default()
    };
    let record_bytes_max = u32::try_from(config.command_bytes_max()).expect("a block's record fits the log");
    let log = LogOptions {
        record_bytes_max,
        segment_bytes_max: 4 * u64::from(record_bytes_max),
        ..LogOptions::default()
    };
    let ledger = Ledger::genesis(config, vec![]).map_err(|e| BenchError::Failed(e.to_string()))?;
    let role = RoleThread::start(
        "exchange",
        ExchangeRole::new(ledger, limits),
        &root.join("exchange"),
        log,
        64 << 20,
        |report| eprintln!("exchange: {report:?}"),
    )
    .map_err(|e| BenchError::Failed(format!("cannot start the exchange: {e}")))?;
    Ok(Venue { role, id, bridge })
}

/// A core for `currency` with its own issuer, banking for the exchange, every trader minted to.
fn open_core(
    root: &std::path::Path,
    currency: &str,
    bridge: &SigningKey,
    traders: &[Trader],
    rng: &mut StdRng,
) -> BenchResult<(Core, Vec<CreatedOutput>)> {
    let issuer = Keypair::new_global(rng);
    let mut options = NodeOptions::new(root.join(currency));
    options.hrp = Some(currency.to_string());
    options.issuers = vec![hex::encode(xonly_bytes(&issuer))];
    options.exchange = Some(bridge.verifying_key().to_bytes());
    let node = EmbeddedNode::open(options).step("cannot start a core")?;
    let outputs: Vec<Output> = traders
        .iter()
        .map(|t| Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(&t.core_key)),
            value: MINTED,
        })
        .collect();
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        rng.gen(),
        outputs,
        &issuer,
        NonceMode::Deterministic,
    ));
    let minted = mint.created_outputs();
    if submit_all(&node.handle(), vec![mint])? != [TxStatus::Confirmed] {
        fail!("the {currency} mint was not confirmed");
    }
    let core = Core {
        node,
        issuer,
        fundings: Vec::new(),
        payouts: Vec::new(),
    };
    Ok((core, minted))
}

/// Each trader funds the exchange from its minted output on this core (change back to it); the
/// exchange credits each funding once it finds the marker in this core's UHS itself.
fn deposit(
    (mut core, minted): (Core, Vec<CreatedOutput>),
    venue: &Venue,
    asset: AssetId,
    traders: &[Trader],
) -> BenchResult<Core> {
    let bridge_key = venue.bridge.verifying_key().to_bytes();
    let mut fundings = Vec::with_capacity(traders.len());
    for (trader, (output, index)) in traders.iter().zip(minted.iter().zip(0..)) {
        let key = trader.exchange_key.verifying_key().to_bytes();
        let change = Output {
            witness_program_commitment: output.output.witness_program_commitment,
            value: MINTED - DEPOSITED,
        };
        let funding = BridgeFunding::new_signed(
            bridge_key,
            deposit_commitment(Market::account(index), &key),
            DEPOSITED,
            vec![output.to_input()],
            vec![change],
            std::slice::from_ref(&trader.core_key),
            NonceMode::Deterministic,
        )
        .step("cannot sign a funding")?;
        fundings.push((funding, Market::account(index), key));
    }
    let txs: Vec<SpecieTransaction> = fundings
        .iter()
        .map(|(f, _, _)| SpecieTransaction::BridgeFunding(f.clone()))
        .collect();
    if submit_all(&core.node.handle(), txs.clone())?
        .iter()
        .any(|s| *s != TxStatus::Confirmed)
    {
        fail!("a funding was not confirmed");
    }
    let markers: Vec<_> = fundings.iter().map(|(f, _, _)| f.marker()).collect();
    let present = core.node.handle().query_uhs(&markers).step("cannot query the core")?;
    let mut calls: Vec<RoleCall<ExchangeRole>> = Vec::new();
    for ((funding, account, key), present) in fundings.into_iter().zip(present) {
        if !present {
            fail!("a funding's marker is not in its core's UHS");
        }
        // Read as the exchange's service reads it: through the core's format.
        let terms = CORE_FORMAT
            .bridge_funding(&SpecieTransaction::BridgeFunding(funding).encode())
            .step("a funding the core's format does not read")?;
        let deposit =
            deposit_from_core(&terms, &bridge_key, asset, account, key).step("a funding the exchange refuses")?;
        calls.push(Box::new(move |ticket| ExchangeInput::Deposit {
            ticket,
            deposit,
            refund_to: None,
        }));
    }
    for reply in venue.role.call_together(calls) {
        if reply != Some(ExchangeReply::Deposited) {
            fail!("a deposit was not credited: {reply:?}");
        }
    }
    core.fundings = txs;
    Ok(core)
}

/// Every trader's account as the exchange has it now.
fn accounts(venue: &Venue, traders: usize) -> BenchResult<Vec<Account>> {
    let calls: Vec<RoleCall<ExchangeRole>> = (0..traders)
        .map(|trader| {
            let id = Market::account(trader);
            Box::new(move |ticket| ExchangeInput::Account { ticket, id }) as RoleCall<ExchangeRole>
        })
        .collect();
    venue
        .role
        .call_together(calls)
        .into_iter()
        .map(|reply| match reply {
            Some(ExchangeReply::Account(Some(account))) => Ok(account),
            other => fail!("no account: {other:?}"),
        })
        .collect()
}

/// `blocks` blocks of the synthetic workload, each submitted whole and answered once durable.
fn trade(
    args: &ExchangeDemoOptions,
    venue: &Venue,
    traders: &[Trader],
    rng: &mut StdRng,
) -> BenchResult<Vec<BlockFigures>> {
    let mix = MarketMix::for_traders(traders.len());
    let mut market = Market::new(CURRENCIES.len(), traders.len());
    let progress = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.blocks as u64)
    };
    progress.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} blocks {msg}").expect("a valid template"));
    let mut figures = Vec::with_capacity(args.blocks);
    for _ in 0..args.blocks {
        market.drift(rng, &mix);
        let accounts = accounts(venue, traders.len())?;
        for (trader, account) in accounts.iter().enumerate() {
            market.resync(trader, account.last_sequence + 1);
        }
        let planned = market.block(rng, &mix, |trader, asset| accounts[trader].balances[usize::from(asset)]);
        let (included, refused) = submit(venue, traders, planned)?;
        let Some(ExchangeReply::LastBlock(Some(block))) =
            venue.role.call_blocking(|ticket| ExchangeInput::LastBlock { ticket })
        else {
            fail!("no last block");
        };
        let p0 = block.clearing.prices[0].0 as f64;
        let volume = block
            .clearing
            .trades
            .iter()
            .map(|t| t.amount as f64 * block.clearing.prices[usize::from(t.sell)].0 as f64 / p0)
            .sum();
        figures.push(BlockFigures {
            prices: block.clearing.prices.clone(),
            volume,
            included,
            refused,
        });
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(figures)
}

/// Every trader cancels every offer of its that rests (as the exchange lists them), in chunks
/// within the sequence window: afterwards nothing rests and nothing is locked.
fn cancel_everything(venue: &Venue, traders: &[Trader]) -> BenchResult<()> {
    const CANCELS_PER_BLOCK: u64 = 60;
    loop {
        let mut planned = Vec::new();
        for (trader, state) in accounts(venue, traders.len())?.into_iter().enumerate() {
            let account = Market::account(trader);
            let Some(ExchangeReply::Offers(offers)) = venue
                .role
                .call_blocking(move |ticket| ExchangeInput::Offers { ticket, account })
            else {
                fail!("no offers of {account}");
            };
            for ((sell, buy), key, _) in offers.into_iter().take(CANCELS_PER_BLOCK as usize) {
                let sequence = state.last_sequence + 1 + planned.iter().filter(|(t, _)| *t == trader).count() as u64;
                let operation = Operation::CancelOffer {
                    sell,
                    buy,
                    limit: key.limit,
                    sequence: key.sequence,
                };
                planned.push((
                    trader,
                    Transaction {
                        account,
                        sequence,
                        operation,
                    },
                ));
            }
        }
        if planned.is_empty() {
            return Ok(());
        }
        let (_, refused) = submit(venue, traders, planned)?;
        if refused > 0 {
            fail!("{refused} cancels of resting offers refused");
        }
    }
}

/// Signs and submits transactions, in submissions of at most the role's limit handed over
/// together (one turn, so one block); counts what the block included and refused.
fn submit(venue: &Venue, traders: &[Trader], planned: Vec<(usize, Transaction)>) -> BenchResult<(u64, u64)> {
    let signed: Vec<SignedTransaction> = planned
        .into_iter()
        .map(|(trader, t)| t.sign(&venue.id, &traders[trader].exchange_key))
        .collect();
    let calls: Vec<RoleCall<ExchangeRole>> = signed
        .chunks(RoleLimits::default().submission_transactions_max)
        .map(|chunk| {
            let transactions = chunk.to_vec();
            Box::new(move |ticket| ExchangeInput::Submit { ticket, transactions }) as RoleCall<ExchangeRole>
        })
        .collect();
    let (mut included, mut all) = (0, 0);
    for reply in venue.role.call_together(calls) {
        let Some(ExchangeReply::Settled(fates)) = reply else {
            fail!("a submission was not settled: {reply:?}");
        };
        included += fates.iter().filter(|f| matches!(f, Fate::Included { .. })).count() as u64;
        all += fates.len() as u64;
    }
    Ok((included, all - included))
}

/// Every trader withdraws all it holds of every asset to its core key; the exchange's payouts
/// are presented to each core twice (the second refused). Returns the withdrawals paid.
fn withdraw_all(venue: &Venue, traders: &[Trader], cores: &mut [Core]) -> BenchResult<u64> {
    let mut market_sequences = Vec::new();
    let mut planned = Vec::new();
    for (trader, state) in accounts(venue, traders.len())?.into_iter().enumerate() {
        let account = Market::account(trader);
        let mut sequence = state.last_sequence;
        let address = witness_program_commitment(&xonly_bytes(&traders[trader].core_key));
        for (asset, amount) in state.balances.iter().enumerate().filter(|(_, a)| **a > 0) {
            sequence += 1;
            let operation = Operation::Withdraw {
                asset: asset as AssetId,
                amount: *amount,
                address,
            };
            planned.push((
                trader,
                Transaction {
                    account,
                    sequence,
                    operation,
                },
            ));
            market_sequences.push((account, sequence));
        }
    }
    let (included, refused) = submit(venue, traders, planned)?;
    if refused > 0 {
        fail!("{refused} withdrawals refused");
    }
    let calls: Vec<RoleCall<ExchangeRole>> = market_sequences
        .into_iter()
        .map(|(account, sequence)| {
            Box::new(move |ticket| ExchangeInput::Withdrawal {
                ticket,
                account,
                sequence,
            }) as RoleCall<ExchangeRole>
        })
        .collect();
    for reply in venue.role.call_together(calls) {
        let Some(ExchangeReply::Withdrawal(Some(withdrawal))) = reply else {
            fail!("a withdrawal was not recorded: {reply:?}");
        };
        let payout = bridge_payout(&CORE_FORMAT, &withdrawal, &venue.bridge);
        let payout = SpecieTransaction::decode_exact(&payout).step("a payout the core's format does not read")?;
        cores[usize::from(withdrawal.asset)].payouts.push(payout);
    }
    for core in cores.iter() {
        let presented = present_twice(&core.node.handle(), &core.payouts, "a payout")?;
        if presented.replays_refused != core.payouts.len() as u64 {
            fail!("a payout was paid twice");
        }
    }
    Ok(included)
}

/// One currency's audit: minted = what its core holds (change, payouts) + what the exchange holds,
/// which, once every offer is cancelled and every balance withdrawn, is the burned commission.
struct CurrencyAudit {
    minted: u128,
    core: u128,
    on_exchange: u128,
    burned: u128,
    /// The currency's core's supply report, set beside this audit.
    supply: SupplyCheck,
    ok: bool,
}

fn audit(cores: &[Core], ledger: &Ledger, bridge: [u8; 32], traders: usize) -> BenchResult<Vec<CurrencyAudit>> {
    let ledger_ok = ledger.audit().is_ok();
    let names: Vec<String> = CURRENCIES.iter().map(|name| name.to_string()).collect();
    let books = ExchangeSupplyBody::new(bridge, ledger.height(), &names, &ledger.holdings());
    cores
        .iter()
        .zip(ledger.totals())
        .zip(CURRENCIES)
        .map(|((core, totals), name)| {
            let txs: Vec<SpecieTransaction> = core.fundings.iter().chain(&core.payouts).cloned().collect();
            let handle = core.node.handle();
            let held = u128::from(value_held_by_core(&handle, &txs)?);
            let on_exchange = totals.deposited - totals.withdrawn;
            let minted = traders as u128 * u128::from(MINTED);
            let cut =
                crate::payments::check_ledger_of_record(&handle)?.step("the demo's cores keep a ledger of record")?;
            let figures = DemoFigures::new(&core.issuer, minted, 0, held, 0);
            let supply = SupplyCheck::new(
                None,
                cut.supply,
                specie_exchange_bridge::supply::mode_books(&books, name)
                    .into_iter()
                    .collect(),
                &figures,
            );
            Ok(CurrencyAudit {
                minted,
                core: held,
                on_exchange,
                burned: totals.burned,
                // Nothing rests and every balance was withdrawn: only the commission stays.
                ok: ledger_ok && minted == held + on_exchange && on_exchange == totals.burned && supply.ok(),
                supply,
            })
        })
        .collect()
}

fn report(
    args: &ExchangeDemoOptions,
    figures: &[BlockFigures],
    audit: &[CurrencyAudit],
    withdrawals: u64,
    elapsed: Duration,
) {
    let included: u64 = figures.iter().map(|f| f.included).sum();
    let refused: u64 = figures.iter().map(|f| f.refused).sum();
    let volume: f64 = figures.iter().map(|f| f.volume).sum();
    let ok = audit.iter().all(|a| a.ok);
    let currencies: Vec<serde_json::Value> = audit
        .iter()
        .zip(CURRENCIES)
        .map(|(a, name)| {
            serde_json::json!({"currency": name, "minted": a.minted.to_string(), "core": a.core.to_string(),
                "on_exchange": a.on_exchange.to_string(), "burned": a.burned.to_string(), "supply": a.supply.json(), "ok": a.ok})
        })
        .collect();
    if args.json {
        let summary = serde_json::json!({
            "traders": args.traders, "blocks": args.blocks, "included": included, "refused": refused,
            "volume_usd": volume, "withdrawals": withdrawals, "elapsed_s": elapsed.as_secs_f64(),
            "chart": args.chart.display().to_string(), "audit": currencies, "ok": ok,
        });
        println!("{summary}");
        return;
    }
    println!(
        "{} traders, {} blocks in {:.1} s: {included} transactions included, {refused} refused by the screen",
        args.traders,
        args.blocks,
        elapsed.as_secs_f64()
    );
    println!("traded {volume:.0} (in usd at each block's prices); {withdrawals} withdrawals paid back to the cores");
    for (a, name) in audit.iter().zip(CURRENCIES) {
        println!(
            "  {name}: minted {} = core {} + exchange {} (of which burned commission {}): {}",
            a.minted,
            a.core,
            a.on_exchange,
            a.burned,
            if a.ok { "OK" } else { "MISMATCH" }
        );
    }
    for (a, name) in audit.iter().zip(CURRENCIES) {
        println!("{name}'s core:");
        a.supply.print();
    }
    println!("chart: {}", args.chart.display());
    println!("audit: {}", if ok { "OK" } else { "FAILED" });
}
