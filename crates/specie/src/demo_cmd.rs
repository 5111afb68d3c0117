//! `specie demo`: its arguments (the demo itself is in `specie-bench`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use specie_demo::payments::DemoOptions;

use crate::node_cmd::ShapeArg;

/// The directory the demos make their temporary directories in: one per run, removed when the
/// run ends, and on Ctrl-C too (a demo interrupted leaves nothing behind in the system's
/// temporary directory).
struct Scratch {
    _dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let dir = tempfile::Builder::new().prefix("specie-demo-run-").tempdir()?;
        // The demos' temporary directories go under it: `tempfile` asks `std::env::temp_dir`,
        // which reads TMPDIR. Set before the demo starts any thread.
        std::env::set_var("TMPDIR", dir.path());
        let path = dir.path().to_path_buf();
        std::thread::Builder::new().name("ctrl-c".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build();
            if let Ok(runtime) = runtime {
                if runtime.block_on(tokio::signal::ctrl_c()).is_ok() {
                    let _ = std::fs::remove_dir_all(&path);
                    eprintln!("interrupted: removed the demo's data in {}", path.display());
                    std::process::exit(130);
                }
            }
        })?;
        Ok(Scratch { _dir: dir })
    }
}

/// Run the whole system on this machine and audit it: the first thing to try.
///
/// Starts an embedded node (fsync on) in a temporary directory, mints to a set of wallets, runs
/// a stream of payments (mostly 2-in/2-out, some 4-in/4-out) with a fraction of double spends,
/// conflicting concurrent spends and forged signatures, redeems some money, then audits: total
/// minted minus redeemed equals the sum of all wallet balances, every output a wallet holds is in
/// the UHS and no spent one is. Exits non-zero if any check fails.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Number of wallets (each with its own key).
    #[arg(long, default_value_t = 200)]
    pub wallets: usize,
    /// Number of payments to stream.
    #[arg(long, default_value_t = 40_000)]
    pub payments: usize,
    /// Fraction of payments that are double spends: re-spending an already spent output, or two
    /// conflicting spends of one output submitted together.
    #[arg(long, default_value_t = 0.02)]
    pub double_spend_fraction: f64,
    /// Fraction of payments sent with a forged (corrupted) signature.
    #[arg(long, default_value_t = 0.02)]
    pub bad_signature_fraction: f64,
    /// Fraction of honest payments that are 4-in/4-out instead of 2-in/2-out.
    #[arg(long, default_value_t = 0.05)]
    pub large_fraction: f64,
    /// Number of shards.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Coordinators of the embedded 2PC core, each on its own thread and log; batches go to
    /// them in turn [default: one per 8 cores, at most one per shard].
    #[arg(long, conflicts_with_all = ["cluster", "byzantine", "offline", "exchange"])]
    pub coordinators: Option<usize>,
    /// Transactions in flight at once.
    #[arg(long, default_value_t = 4096)]
    pub window: usize,
    /// Seed for the workload (keys, amounts, choices).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the node's data here instead of a temporary directory.
    #[arg(long, conflicts_with = "cluster")]
    pub data_dir: Option<PathBuf>,
    /// Run against the cluster in this directory (started by `specie cluster up --dir DIR`)
    /// instead of an embedded node.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Run the embedded node without the ledger of record (which is on by default and checked at
    /// the end: its blocks must replay to exactly the shards' UHS). To measure what it costs.
    #[arg(long, conflicts_with = "cluster")]
    pub no_ledger_of_record: bool,
    /// How the embedded core orders transactions: two-phase commit across the shards, or an
    /// atomizer ordering every transaction into blocks (one global order). Also for --privacy.
    #[arg(long, value_enum, default_value = "2pc", conflicts_with_all = ["cluster", "byzantine", "offline", "exchange"])]
    pub shape: ShapeArg,
    /// Run the Byzantine mode instead (FastPay): an embedded core as the Primary and a committee
    /// of 4 authorities, one of them Byzantine (it forges its votes), each with --shards shards.
    /// --wallets accounts are funded from the core, --payments payments stream between them
    /// (some owners equivocate), some are redeemed back to the core (each presented twice),
    /// and the platform-wide audit ends it. See docs/byzantine-mode.md.
    #[arg(long, conflicts_with = "cluster")]
    pub byzantine: bool,
    /// (--byzantine) Fraction of owners who, once, sign two orders for one sequence number and split
    /// the committee between them (a recovery round settles one and gives the account back).
    #[arg(long, default_value_t = 0.01, requires = "byzantine")]
    pub equivocation_fraction: f64,
    /// (--byzantine) Fraction of payments that redeem to the owner's core address.
    #[arg(long, default_value_t = 0.05, requires = "byzantine")]
    pub redeem_fraction: f64,
    /// Run offline cash instead: an embedded core banking for an offline authority (both fsync
    /// on). --wallets devices are funded from core coins, --payments payments pass device to
    /// device with no network (some payers cheat and spend copies again), every device deposits
    /// (half of them back to the core), the double spenders are named with evidence you can check,
    /// and the platform-wide audit ends it. See docs/offline-mode.md.
    #[arg(long, conflicts_with_all = ["cluster", "byzantine"])]
    pub offline: bool,
    /// (--offline) Fraction of devices that cheat: they keep copies of tokens they paid and spend
    /// them again.
    #[arg(long, default_value_t = 0.1, requires = "offline")]
    pub cheater_fraction: f64,
    /// (--offline) Fraction of payments replayed: sent again to the payee, under their own nonce
    /// and to a fresh request. Every replay must be refused.
    #[arg(long, default_value_t = 0.05, requires = "offline")]
    pub replay_fraction: f64,
    /// Run the exchange instead (SPEEDEX): three currencies (usd, eur, gbp), each minted by its
    /// own issuer on its own embedded core, and the exchange between them (all fsync on).
    /// --wallets traders deposit through the cores, trade in --blocks blocks of offers, cancels and
    /// payments cleared at one price per currency, withdraw everything back to the cores, and the
    /// per-currency audit ends it; writes a chart of prices and volume. See docs/exchange.md.
    #[arg(long, conflicts_with_all = ["cluster", "byzantine", "offline"])]
    pub exchange: bool,
    /// (--exchange) Blocks to trade.
    #[arg(long, default_value_t = 40, requires = "exchange")]
    pub blocks: usize,
    /// (--exchange) Where to write the chart (SVG) of clearing prices and volume per block.
    #[arg(long, default_value = "specie-exchange-demo.svg", requires = "exchange")]
    pub chart: PathBuf,
    /// Run the privacy levels instead: an embedded core keeping the ledger of record, with one
    /// auditor with jurisdiction. --wallets users (at most 1000) are minted coins in clear, shield
    /// part of them, and pay each other for --rounds rounds, transparently or confidentially;
    /// a forger submits confidential transactions that cheat in every way the proofs exclude;
    /// users unshield and the issuer redeems. It ends with the passive auditor reconstructing
    /// every confidential payment from the ledger, the supply audit and the ledger's replay.
    /// See docs/privacy.md.
    #[arg(long, conflicts_with_all = ["cluster", "byzantine", "offline", "exchange"])]
    pub privacy: bool,
    /// (--privacy) Rounds of payments: one payment per user per round.
    #[arg(long, default_value_t = 6, requires = "privacy")]
    pub rounds: usize,
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let _scratch = Scratch::new()?;
    if args.privacy {
        let options = specie_demo::privacy::PrivacyDemoOptions {
            // The default 200 wallets suit the other modes; each confidential payment takes
            // milliseconds to prove, so the privacy demo's default is smaller.
            users: if args.wallets == 200 { 40 } else { args.wallets },
            rounds: args.rounds,
            seed: args.seed,
            data_dir: args.data_dir,
            json: args.json,
            shape: args.shape.into(),
        };
        return Ok(specie_demo::privacy::run(&options)?);
    }
    if args.exchange {
        let options = specie_demo::exchange::ExchangeDemoOptions {
            traders: args.wallets,
            blocks: args.blocks,
            seed: args.seed,
            data_dir: args.data_dir,
            chart: args.chart,
            json: args.json,
        };
        return Ok(specie_demo::exchange::run(&options)?);
    }
    if args.offline {
        let options = specie_demo::offline::OfflineDemoOptions {
            devices: args.wallets,
            payments: args.payments,
            cheater_fraction: args.cheater_fraction,
            replay_fraction: args.replay_fraction,
            seed: args.seed,
            data_dir: args.data_dir,
            json: args.json,
        };
        return Ok(specie_demo::offline::run(&options)?);
    }
    if args.byzantine {
        let options = specie_demo::byzantine::ByzantineDemoOptions {
            accounts: args.wallets,
            payments: args.payments,
            shards: u32::try_from(args.shards)?,
            equivocation_fraction: args.equivocation_fraction,
            redeem_fraction: args.redeem_fraction,
            window: args.window,
            seed: args.seed,
            data_dir: args.data_dir,
            json: args.json,
        };
        return Ok(specie_demo::byzantine::run(&options)?);
    }
    let options = DemoOptions {
        wallets: args.wallets,
        payments: args.payments,
        double_spend_fraction: args.double_spend_fraction,
        bad_signature_fraction: args.bad_signature_fraction,
        large_fraction: args.large_fraction,
        shards: args.shards,
        coordinators: args.coordinators,
        window: args.window,
        seed: args.seed,
        data_dir: args.data_dir,
        cluster: args.cluster,
        json: args.json,
        ledger_of_record: !args.no_ledger_of_record,
        shape: args.shape.into(),
    };
    Ok(specie_demo::payments::run(&options)?)
}
