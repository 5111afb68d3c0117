//! `specie exchange account|last-block|offer|cancel|pay`: a trader's account on the exchange,
//! kept in the trader's core wallet file (`specie_wallet::exchange`), and the transactions it
//! signs. Every command holds the wallet's lock, first finishes the deposits and withdrawals an
//! earlier command left under way (`exchange_bridge_cmd`), and saves the next sequence number
//! before a transaction leaves the process.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};
use specie_exchange::{AccountId, Operation, Transaction};
use specie_exchange_service::client::{
    account_id, limit_price_text, parse_limit_price, ExchangeClient, ExchangeInfo, TxFate,
};
use specie_wallet::exchange::ExchangeAccount;
use specie_wallet::{Wallet, WalletFile, WalletLock};

use crate::wallet_cmd::WALLET_LOCK_WAIT_MS;

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

/// A trader's wallet, locked, with its exchange account and a client of that exchange.
pub struct Trader {
    pub path: PathBuf,
    pub wallet: Wallet,
    _lock: WalletLock,
    pub client: ExchangeClient,
    pub info: ExchangeInfo,
}

impl Trader {
    /// Locks and loads the wallet and reaches its exchange. With `open_account`, a wallet with
    /// no exchange account gets one (a fresh key; the id follows from it) on the exchange of
    /// `--exchange`. Then finishes what earlier commands left under way.
    pub fn open(args: &TraderArgs, open_account: bool) -> anyhow::Result<Trader> {
        let path = args.wallet.clone();
        let lock = WalletLock::acquire(&path, WALLET_LOCK_WAIT_MS, || {
            eprintln!("waiting for another command using {} to finish…", path.display())
        })?;
        let mut wallet = WalletFile::load(&path)?;
        let urls = match (&args.exchange, wallet.exchange()) {
            (Some(urls), _) => urls.clone(),
            (None, Some(account)) => account.urls.clone(),
            (None, None) => bail!(
                "{} has no exchange account yet: make a first deposit with `specie exchange deposit --exchange URL …`",
                path.display()
            ),
        };
        let client = ExchangeClient::new(&urls);
        let info = client.info()?;
        match wallet.exchange_mut() {
            Some(account) if account.exchange != info.exchange => bail!(
                "the exchange at {urls} is not the one {}'s account is on (identity {}, not {})",
                path.display(),
                hex::encode(info.exchange),
                hex::encode(account.exchange)
            ),
            Some(account) if account.bridge.is_some_and(|pinned| pinned != info.bridge) => bail!(
                "the exchange at {urls} names bridge key {}, not the {} {}'s account pinned: deposits would be \
                 paid to, and payouts checked against, another key; nothing was done",
                hex::encode(info.bridge),
                hex::encode(account.bridge.unwrap_or_default()),
                path.display()
            ),
            Some(account) => {
                account.urls = urls;
                // A file from before the bridge key was kept: pinned now, by the exchange whose
                // identity the account is on.
                account.bridge.get_or_insert(info.bridge);
            }
            None if open_account => wallet.set_exchange(new_account(&client, &info, &urls)?),
            None => bail!(
                "{} has no exchange account yet: make a first deposit with `specie exchange deposit --exchange URL …`",
                path.display()
            ),
        }
        WalletFile::save(&path, &wallet)?;
        let mut trader = Trader {
            path,
            wallet,
            _lock: lock,
            client,
            info,
        };
        if let Err(error) = crate::exchange_bridge_cmd::finish_under_way(&mut trader) {
            eprintln!("warning: what an earlier command left under way is not finished: {error:#}");
        }
        Ok(trader)
    }

    pub fn account(&self) -> &ExchangeAccount {
        self.wallet.exchange().expect("a trader has an exchange account")
    }

    pub fn account_mut(&mut self) -> &mut ExchangeAccount {
        self.wallet.exchange_mut().expect("a trader has an exchange account")
    }

    pub fn id(&self) -> AccountId {
        self.account().account
    }

    pub fn key(&self) -> SigningKey {
        SigningKey::from_bytes(&self.account().secret_key)
    }

    /// The exchange's bridge key, as the wallet pinned it ([`Trader::open`] checked the
    /// exchange's answer against it).
    pub fn bridge(&self) -> [u8; 32] {
        self.account().bridge.unwrap_or(self.info.bridge)
    }

    pub fn save(&self) -> anyhow::Result<()> {
        Ok(WalletFile::save(&self.path, &self.wallet)?)
    }

    /// A refusal's reason with asset numbers named (`asset 0` → `usd`).
    pub fn in_words(&self, reason: &str) -> String {
        name_assets(&self.info.assets, reason)
    }

    /// The sequence number to sign with: the wallet's next, or above the exchange's last used
    /// one if that is further (a transaction sent from elsewhere, or a crash).
    fn sequence(&self) -> anyhow::Result<u64> {
        let state = self.client.account(self.id())?.with_context(|| {
            format!(
                "the exchange has no account {} yet: a first deposit opens it (`specie exchange deposit`)",
                self.id()
            )
        })?;
        Ok(self.account().next_sequence.max(state.last_sequence + 1))
    }

    /// Signs `operation` with the account's key and next sequence number, saves the wallet
    /// (with `record`'s changes to it) and submits it; a refused transaction gives its sequence
    /// number back. Returns the sequence used and its fate.
    pub fn sign_and_submit(
        &mut self,
        operation: Operation,
        record: impl FnOnce(&mut ExchangeAccount, u64, &[u8]),
    ) -> anyhow::Result<(u64, TxFate)> {
        let sequence = self.sequence()?;
        let signed = Transaction {
            account: self.id(),
            sequence,
            operation,
        }
        .sign(&self.info.exchange, &self.key());
        let mut bytes = Vec::new();
        signed.encode_to(&mut bytes);
        let account = self.account_mut();
        account.next_sequence = sequence + 1;
        record(account, sequence, &bytes);
        // Durable before it leaves the process: the sequence number is never signed twice.
        self.save()?;
        let fate = self.client.submit(&[signed])?.remove(0);
        if let TxFate::Refused(_) = fate {
            self.account_mut().next_sequence = sequence;
            self.save()?;
        }
        Ok((sequence, fate))
    }
}

/// A fresh account for this wallet: a random Ed25519 key, the id that key gives (checked to be
/// free on the exchange, so a first deposit cannot be refused for it).
fn new_account(client: &ExchangeClient, info: &ExchangeInfo, urls: &str) -> anyhow::Result<ExchangeAccount> {
    for _ in 0..4 {
        let secret: [u8; 32] = rand::random();
        let id = account_id(&SigningKey::from_bytes(&secret).verifying_key().to_bytes());
        if client.account(id)?.is_none() {
            return Ok(ExchangeAccount {
                exchange: info.exchange,
                bridge: Some(info.bridge),
                urls: urls.to_string(),
                account: id,
                secret_key: secret,
                next_sequence: 1,
                deposits: Vec::new(),
                withdrawals: Vec::new(),
            });
        }
    }
    bail!("the exchange at {urls} has every account id tried taken: it answers wrongly")
}

/// `specie exchange account`: balances by asset, open offers, what is under way.
pub fn account(args: &TraderArgs, json_out: bool) -> anyhow::Result<()> {
    let trader = Trader::open(args, false)?;
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
    let mut trader = Trader::open(args, false)?;
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
    let mut trader = Trader::open(args, false)?;
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
    let mut trader = Trader::open(args, false)?;
    let operation = Operation::Payment {
        to,
        asset: trader.info.asset(asset)?,
        amount,
    };
    let (_, fate) = trader.sign_and_submit(operation, |_, _, _| {})?;
    report(&trader, &format!("payment of {amount} {asset} to account {to}"), &fate)
}

/// `reason` with `asset N` replaced by the asset's name.
fn name_assets(assets: &[String], reason: &str) -> String {
    assets
        .iter()
        .enumerate()
        .fold(format!("{reason} "), |text, (index, name)| {
            text.replace(&format!("asset {index} "), &format!("{name} "))
        })
        .trim_end()
        .to_string()
}

/// Whether two paths name the same file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_their_assets() {
        let assets = ["usd".to_string(), "eur".to_string()];
        assert_eq!(
            name_assets(
                &assets,
                "the account's payments and offers take more of asset 1 than it has"
            ),
            "the account's payments and offers take more of eur than it has"
        );
        assert_eq!(name_assets(&assets, "no such payee"), "no such payee");
    }
}
