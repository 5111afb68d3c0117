//! `specie exchange …`: the exchange as a process (the work is in `specie-exchange-service`),
//! and a trader's commands (`exchange_trader_cmd`, `exchange_bridge_cmd`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_exchange::AccountId;
use specie_exchange_service::{Asset, ServeOptions};
use specie_service::HttpLimits;

use crate::exchange_trader_cmd::TraderArgs;

#[derive(Args, Debug)]
pub struct ExchangeArgs {
    #[command(subcommand)]
    pub command: ExchangeCommand,
}

#[derive(Subcommand, Debug)]
pub enum ExchangeCommand {
    /// Run the exchange (SPEEDEX batch auctions between currencies) on its durable log, serving
    /// traders over HTTP/JSON (docs/exchange.md). Each currency is minted on its own online core;
    /// start each core with `specie node --exchange <BRIDGE-KEY>` (`specie exchange bridge-key`).
    /// Example: specie exchange serve --asset usd=http://127.0.0.1:8470 --asset eur=http://127.0.0.1:8471
    Serve {
        #[arg(long, default_value = "./specie-exchange")]
        data_dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8480")]
        listen: SocketAddr,
        /// A currency traded, as NAME=CORE-URL (the core that mints it, asked to confirm each
        /// deposit), in asset order; 2 to 64, fixed when the exchange is created.
        #[arg(long = "asset", value_name = "NAME=URL", required = true)]
        assets: Vec<String>,
        /// How long transactions wait for the next block.
        #[arg(long, default_value_t = 250)]
        block_interval_ms: u64,
    },
    /// Print the exchange's bridge key (hex), creating the exchange's seed in --data-dir if it is
    /// new: what each currency's core banks for (`specie node --exchange`).
    BridgeKey {
        #[arg(long, default_value = "./specie-exchange")]
        data_dir: PathBuf,
    },
    /// Show your exchange account: balances by asset, resting offers (with their ids), and any
    /// deposit or withdrawal still under way.
    ///
    /// The account lives in your wallet file (its key and sequence numbers); `--json` prints it
    /// as JSON. Amounts are in each currency's smallest unit.
    #[command(after_help = "Example:\n  specie exchange account --wallet alice-usd.json --json")]
    Account {
        #[command(flatten)]
        trader: TraderArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the exchange's last block: its height, each asset's valuation (a pair trades at the
    /// ratio of its two assets' valuations), what traded, and the exchange's state hash.
    #[command(after_help = "Example:\n  specie exchange last-block --exchange http://127.0.0.1:8480 --json")]
    LastBlock {
        #[command(flatten)]
        trader: TraderArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move coins of a currency from its core wallet into your exchange account.
    ///
    /// Pays AMOUNT of the wallet's coins to the exchange's bridge key on that currency's core
    /// (a funding that names your account), waits until the core made it final, then hands it
    /// to the exchange, which credits it once. The first deposit opens your account (a fresh
    /// key kept in --wallet) on the exchange given by --exchange. If anything is interrupted,
    /// the deposit stays recorded in the wallet and the next `specie exchange` command on it
    /// finishes it: nothing is lost or credited twice.
    #[command(
        after_help = "Examples:\n  specie exchange deposit --wallet alice-usd.json --exchange http://127.0.0.1:8480 --asset usd --amount 5000\n  specie exchange deposit --wallet alice-usd.json --core-wallet alice-eur.json --asset eur --amount 5000"
    )]
    Deposit {
        #[command(flatten)]
        trader: TraderArgs,
        #[command(flatten)]
        movement: Movement,
    },
    /// Offer to sell AMOUNT of one asset for another, at no less than a minimum price.
    ///
    /// --min-price is in units of the bought asset per unit sold, as a decimal (1.25); the
    /// exchange keeps it in 32.32 fixed point, rounded up so you never get less than you asked.
    /// The amount is locked until the offer trades (every block trades all offers at one price
    /// per asset, which may be better than your limit, never worse) or is cancelled. Prints the
    /// offer's id (for `cancel`) and the block it is in, or why it was refused.
    #[command(
        after_help = "Example (sell 1000 usd for eur, at 0.9 eur per usd at least):\n  specie exchange offer --wallet alice-usd.json --sell usd --buy eur --amount 1000 --min-price 0.9"
    )]
    Offer {
        #[command(flatten)]
        trader: TraderArgs,
        /// The asset sold (its name on the exchange: usd, eur, …).
        #[arg(long)]
        sell: String,
        /// The asset bought.
        #[arg(long)]
        buy: String,
        /// How much of --sell to sell, in its smallest unit.
        #[arg(long)]
        amount: u64,
        /// The least units of --buy accepted per unit of --sell, as a decimal (0.9, 1.25).
        #[arg(long, value_name = "DECIMAL")]
        min_price: String,
    },
    /// Cancel a resting offer of yours; what is left of it is unlocked.
    #[command(
        after_help = "Example (the id is the one `offer` and `account` print):\n  specie exchange cancel --wallet alice-usd.json --offer 3"
    )]
    Cancel {
        #[command(flatten)]
        trader: TraderArgs,
        /// The offer's id (the sequence number of the transaction that made it).
        #[arg(long, value_name = "ID")]
        offer: u64,
    },
    /// Pay AMOUNT of an asset to another exchange account (its number, from its `account`).
    #[command(
        after_help = "Example:\n  specie exchange pay --wallet alice-usd.json --to 1234567890 --asset usd --amount 250"
    )]
    Pay {
        #[command(flatten)]
        trader: TraderArgs,
        /// The payee's account number.
        #[arg(long, value_name = "ACCOUNT")]
        to: AccountId,
        /// The asset paid.
        #[arg(long)]
        asset: String,
        /// How much, in the asset's smallest unit.
        #[arg(long)]
        amount: u64,
    },
    /// Move AMOUNT of an asset out of the exchange into that currency's core wallet.
    ///
    /// Signs a withdrawal to a fresh address of the core wallet, waits for its block, fetches
    /// the payout the exchange's bridge key signs, presents it to the core (which pays it once)
    /// and adds the coin to the wallet. If anything is interrupted, the withdrawal stays
    /// recorded and the next `specie exchange` command on the wallet finishes it.
    #[command(
        after_help = "Examples:\n  specie exchange withdraw --wallet alice-usd.json --asset usd --amount 700\n  specie exchange withdraw --wallet alice-usd.json --core-wallet alice-eur.json --asset eur --amount 700"
    )]
    Withdraw {
        #[command(flatten)]
        trader: TraderArgs,
        #[command(flatten)]
        movement: Movement,
    },
    /// Drop the deposits marked refused: fundings their core refused and did not hold when asked.
    ///
    /// They are kept (a wrong node may have said so, and a funding's bytes are what the exchange
    /// credits) and every command asks their core again; this drops them for good. Offline.
    #[command(after_help = "Example:\n  specie exchange forget-refused --wallet alice-usd.json --yes")]
    ForgetRefused {
        #[command(flatten)]
        trader: TraderArgs,
        /// Confirms that the cores never took these fundings.
        #[arg(long)]
        yes: bool,
    },
}

fn asset(text: &str) -> anyhow::Result<Asset> {
    let (name, url) = text.split_once('=').context("an asset is NAME=CORE-URL")?;
    Ok(Asset {
        name: name.to_string(),
        core: Some(specie_wallet::core_api(url)),
    })
}

/// Value moved between a core wallet and the exchange account.
#[derive(Args, Debug)]
pub struct Movement {
    /// The currency (the exchange's name for it: the core's address prefix).
    #[arg(long)]
    asset: String,
    /// How much, in the currency's smallest unit.
    #[arg(long)]
    amount: u64,
    /// The core wallet of that currency, if it is not --wallet (which keeps the account).
    #[arg(long, value_name = "PATH")]
    core_wallet: Option<PathBuf>,
}

impl ExchangeArgs {
    /// Whether this runs until stopped (the exchange), rather than acting as a trader.
    pub fn serves(&self) -> bool {
        matches!(self.command, ExchangeCommand::Serve { .. })
    }
}

pub fn run(args: ExchangeArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ExchangeCommand::Serve {
            data_dir,
            listen,
            assets,
            block_interval_ms,
        } => {
            let assets = assets.iter().map(|a| asset(a)).collect::<anyhow::Result<Vec<_>>>()?;
            specie_exchange_service::serve(ServeOptions {
                data_dir,
                listen,
                assets,
                limits: HttpLimits::default(),
                block_interval_ms: block_interval_ms.max(1),
                core_format: &specie_wallet::CORE_FORMAT,
            })?;
        }
        ExchangeCommand::BridgeKey { data_dir } => {
            println!("{}", hex::encode(specie_exchange_service::bridge_key(&data_dir)?));
        }
        trader => run_trader(trader)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// A trader's command.
fn run_trader(command: ExchangeCommand) -> anyhow::Result<()> {
    use crate::{exchange_bridge_cmd as bridge, exchange_trader_cmd as trade};
    match command {
        ExchangeCommand::Account { trader, json } => trade::account(&trader, json),
        ExchangeCommand::LastBlock { trader, json } => trade::last_block(&trader, json),
        ExchangeCommand::Deposit { trader, movement } => bridge::deposit(
            &trader,
            movement.core_wallet.as_deref(),
            &movement.asset,
            movement.amount,
        ),
        ExchangeCommand::Offer {
            trader,
            sell,
            buy,
            amount,
            min_price,
        } => trade::offer(&trader, &sell, &buy, amount, &min_price),
        ExchangeCommand::Cancel { trader, offer } => trade::cancel(&trader, offer),
        ExchangeCommand::Pay {
            trader,
            to,
            asset,
            amount,
        } => trade::pay(&trader, to, &asset, amount),
        ExchangeCommand::Withdraw { trader, movement } => bridge::withdraw(
            &trader,
            movement.core_wallet.as_deref(),
            &movement.asset,
            movement.amount,
        ),
        ExchangeCommand::ForgetRefused { trader, yes } => bridge::forget_refused(&trader, yes),
        ExchangeCommand::Serve { .. } | ExchangeCommand::BridgeKey { .. } => unreachable!("not a trader's command"),
    }
}
