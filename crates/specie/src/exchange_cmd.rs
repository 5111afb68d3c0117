//! `specie exchange …`: the exchange as a process (the work is in `specie-exchange-service`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_api::HttpLimits;
use specie_exchange_service::{Asset, ServeOptions};

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
}

fn asset(text: &str) -> anyhow::Result<Asset> {
    let (name, url) = text.split_once('=').context("an asset is NAME=CORE-URL")?;
    Ok(Asset {
        name: name.to_string(),
        core_url: Some(url.to_string()),
    })
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
            })?;
        }
        ExchangeCommand::BridgeKey { data_dir } => {
            println!("{}", hex::encode(specie_exchange_service::bridge_key(&data_dir)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}
