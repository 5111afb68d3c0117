//! `specie exchange account|last-block|offer|cancel|pay`: a trader's account on the exchange,
//! kept in the trader's core wallet file (`specie_wallet::exchange`), and the transactions it
//! signs. Every command opens a `specie_exchange_bridge::Trader`: it holds the wallet's lock,
//! first finishes the deposits and withdrawals an earlier command left under way, and saves the
//! next sequence number before a transaction leaves the process.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use serde_json::{json, Value};
use specie_exchange::{AccountId, Operation};
use specie_exchange_bridge::{Notice, Trader};
use specie_exchange_service::client::{limit_price_text, parse_limit_price, ExchangeClient, TxFate};
use specie_wallet::WalletFile;

/// What every trader's command takes.
#[derive(Args, Debug, Clone)]
pub struct TraderArgs {
    /// The wallet file that keeps the exchange account (its key and sequence numbers).
    #[arg(long, value_name = "PATH", default_value = "wallet.json")]
    pub wallet: PathBuf,
    /// The exchange's URL, or its replicas' URLs comma-separated. Needed the first time (the
    /// first deposit opens the account); later the wallet remembers it.
    #[arg(long, value_name = "URL[,URL…]")]
    pub exchange: Option<String>,
}

/// Tells the user, on stderr, what a trader's command is waiting for or finished on the way.
pub fn tell(notice: Notice) {
    eprintln!("{notice}");
}

/// The trader's wallet, locked, and its exchange ([`Trader::open`]); with `open_account`, a
/// wallet without an exchange account gets one.
pub fn open_trader(args: &TraderArgs, open_account: bool) -> anyhow::Result<Trader> {
    Ok(Trader::open(
        &args.wallet,
        args.exchange.as_deref(),
        open_account,
        tell,
    )?)
}

/// `specie exchange account`: balances by asset, open offers, what is under way.
pub fn account(args: &TraderArgs, json_out: bool) -> anyhow::Result<()> {
    let trader = open_trader(args, false)?;
    let id = trader.id();
    let state = trader.client.account(id)?;
    let offers = trader.client.offers(id)?;
    let balances: serde_json::Map<String, Value> = state
        .as_ref()
        .map(|s| s.balances.iter().map(|(name, b)| (name.clone(), json!(b))).collect())
        .unwrap_or_default();
    let offers: Vec<Value> = offers
        .iter()
        .map(|o| {
            json!({"offer": o.sequence, "sell": o.sell, "buy": o.buy, "amount": o.amount,
                "min_price": limit_price_text(o.limit), "limit": o.limit.0})
        })
        .collect();
    let account = trader.account();
    let pending: Vec<Value> = account
        .deposits
        .iter()
        .map(|d| json!({"deposit": d.asset, "txid": d.transaction.txid().to_string(), "refused": d.refused}))
        .chain(
            account
                .withdrawals
                .iter()
                .map(|w| json!({"withdrawal": w.asset, "amount": w.amount, "sequence": w.sequence})),
        )
        .collect();
    let summary = json!({
        "account": id,
        "exchange": trader.client.urls(),
        "opened": state.is_some(),
        "last_sequence": state.as_ref().map_or(0, |s| s.last_sequence),
        "balances": balances,
        "offers": offers,
        "under_way": pending,
    });
    if json_out {
        println!("{summary:#}");
        return Ok(());
    }
    println!("account {id} on {}", trader.client.urls());
    if state.is_none() {
        println!("  not opened yet: a first deposit opens it");
    }
    for (name, balance) in &balances {
        println!("  {name}: {balance}");
    }
    for offer in &offers {
        println!(
            "  offer {}: sell {} {} for {} at no less than {}",
            offer["offer"],
            offer["amount"],
            offer["sell"].as_str().unwrap_or("?"),
            offer["buy"].as_str().unwrap_or("?"),
            offer["min_price"].as_str().unwrap_or("?")
        );
    }
    for item in &pending {
        if item["refused"] == true {
            println!(
                "  refused by its core, kept (asked again by every command; `specie exchange forget-refused --yes` drops it): {item}"
            );
        } else {
            println!("  under way (finished by the next command): {item}");
        }
    }
    Ok(())
}

/// The exchange URLs to read from: `--exchange`, else the wallet's.
fn read_urls(args: &TraderArgs) -> anyhow::Result<String> {
    if let Some(urls) = &args.exchange {
        return Ok(urls.clone());
    }
    let wallet =
        WalletFile::load(&args.wallet).context("pass --exchange URL, or a --wallet with an exchange account")?;
    wallet
        .exchange()
        .map(|account| account.urls.clone())
        .context("pass --exchange URL: the wallet has no exchange account")
}

/// `specie exchange last-block`: height, prices, volumes, state hash.
pub fn last_block(args: &TraderArgs, json_out: bool) -> anyhow::Result<()> {
    let client = ExchangeClient::new(&read_urls(args)?);
    let info = client.info()?;
    let block = client.last_block()?;
    let prices: serde_json::Map<String, Value> = info
        .assets
        .iter()
        .zip(&block.prices)
        .map(|(name, price)| (name.clone(), json!(price)))
        .collect();
    let trades: Vec<Value> = block
        .trades
        .iter()
        .map(|(sell, buy, amount)| json!({"sell": sell, "buy": buy, "amount": amount}))
        .collect();
    let summary = json!({
        "height": block.height,
        "transactions": block.transactions,
        "prices": prices,
        "trades": trades,
        "state_height": info.height,
        "state_hash": hex::encode(info.state_hash),
    });
    if json_out {
        println!("{summary:#}");
        return Ok(());
    }
    println!(
        "block {} ({} transactions); state hash {}",
        block.height,
        block.transactions,
        hex::encode(info.state_hash)
    );
    for (name, price) in &prices {
        println!("  valuation {name}: {price}");
    }
    for (sell, buy, amount) in &block.trades {
        println!("  traded {amount} {sell} for {buy}");
    }
    Ok(())
}

/// Prints a fate, or fails with the refusal in words.
fn report(trader: &Trader, what: &str, fate: &TxFate) -> anyhow::Result<()> {
    match fate {
        TxFate::Included { height } => {
            println!("{what}: included at height {height}");
            Ok(())
        }
        TxFate::Refused(reason) => bail!("{what}: refused by the exchange: {}", trader.in_words(reason)),
    }
}

/// `specie exchange offer`.
pub fn offer(args: &TraderArgs, sell: &str, buy: &str, amount: u64, min_price: &str) -> anyhow::Result<()> {
    let limit = parse_limit_price(min_price).context("--min-price")?;
    if amount == 0 {
        bail!("--amount: an offer sells more than 0");
    }
    let mut trader = open_trader(args, false)?;
    let (sell_id, buy_id) = (trader.info.asset(sell)?, trader.info.asset(buy)?);
    if sell_id == buy_id {
        bail!("--sell and --buy: an offer sells one asset for another");
    }
    let operation = Operation::SellOffer {
        sell: sell_id,
        buy: buy_id,
        amount,
        limit,
    };
    let (sequence, fate) = trader.sign_and_submit(operation, |_, _, _| {})?;
    let what = format!(
        "offer {sequence} (sell {amount} {sell} for {buy} at no less than {} {buy} per {sell})",
        limit_price_text(limit)
    );
    report(&trader, &what, &fate)
}

/// `specie exchange cancel`.
pub fn cancel(args: &TraderArgs, offer: u64) -> anyhow::Result<()> {
    let mut trader = open_trader(args, false)?;
    let offers = trader.client.offers(trader.id())?;
    let Some(resting) = offers.iter().find(|o| o.sequence == offer) else {
        bail!("--offer {offer}: the account has no such resting offer (traded in full, cancelled, or never made); `specie exchange account` lists them");
    };
    let operation = Operation::CancelOffer {
        sell: trader.info.asset(&resting.sell)?,
        buy: trader.info.asset(&resting.buy)?,
        limit: resting.limit,
        sequence: offer,
    };
    let what = format!("cancel of offer {offer} ({} {} left)", resting.amount, resting.sell);
    let (_, fate) = trader.sign_and_submit(operation, |_, _, _| {})?;
    report(&trader, &what, &fate)
}

/// `specie exchange pay`.
pub fn pay(args: &TraderArgs, to: AccountId, asset: &str, amount: u64) -> anyhow::Result<()> {
    if amount == 0 {
        bail!("--amount: a payment pays more than 0");
    }
    let mut trader = open_trader(args, false)?;
    let operation = Operation::Payment {
        to,
        asset: trader.info.asset(asset)?,
        amount,
    };
    let (_, fate) = trader.sign_and_submit(operation, |_, _, _| {})?;
    report(&trader, &format!("payment of {amount} {asset} to account {to}"), &fate)
}
