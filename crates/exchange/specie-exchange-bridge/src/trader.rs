//! A trader's wallet, locked, with its exchange account and a client of that exchange: what every
//! `specie exchange` command on a wallet starts from.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use specie_exchange::{AccountId, Operation, Transaction};
use specie_exchange_service::client::{account_id, ExchangeClient, ExchangeInfo, TxFate};
use specie_wallet::exchange::ExchangeAccount;
use specie_wallet::{Wallet, WalletFile, WalletLock, WALLET_LOCK_WAIT_MS};

use crate::{ExchangeBridgeError, Notice};

/// A trader's wallet, locked, with its exchange account and a client of that exchange.
pub struct Trader {
    pub path: PathBuf,
    pub wallet: Wallet,
    _lock: WalletLock,
    pub client: ExchangeClient,
    pub info: ExchangeInfo,
    /// Told what the user may want to know while a command goes on (waits, what earlier
    /// commands left and this one finished).
    notify: Box<dyn Fn(Notice)>,
}

impl Trader {
    /// Locks and loads the wallet at `path` and reaches its exchange (`exchange`: its URLs, else
    /// the wallet's). With `open_account`, a wallet with no exchange account gets one (a fresh
    /// key; the id follows from it) on that exchange. Then finishes what earlier commands left
    /// under way (failing that is only told: [`Notice::NotFinished`]).
    pub fn open(
        path: &Path,
        exchange: Option<&str>,
        open_account: bool,
        notify: impl Fn(Notice) + 'static,
    ) -> Result<Trader, ExchangeBridgeError> {
        let path = path.to_path_buf();
        let lock = WalletLock::acquire(&path, WALLET_LOCK_WAIT_MS, || {
            notify(Notice::WaitingForWallet(path.clone()))
        })?;
        let mut wallet = WalletFile::load(&path)?;
        let urls = match (exchange, wallet.exchange()) {
            (Some(urls), _) => urls.to_string(),
            (None, Some(account)) => account.urls.clone(),
            (None, None) => return Err(ExchangeBridgeError::NoAccount { path }),
        };
        let client = ExchangeClient::new(&urls);
        let info = client.info()?;
        match wallet.exchange_mut() {
            Some(account) => check_exchange(account, &info, urls, &path)?,
            None if open_account => wallet.set_exchange(new_account(&client, &info, &urls)?),
            None => return Err(ExchangeBridgeError::NoAccount { path }),
        }
        WalletFile::save(&path, &wallet)?;
        let mut trader = Trader {
            path,
            wallet,
            _lock: lock,
            client,
            info,
            notify: Box::new(notify),
        };
        if let Err(error) = crate::finish_under_way(&mut trader) {
            trader.notify(Notice::NotFinished(Box::new(error)));
        }
        Ok(trader)
    }

    /// Tells the user (see [`Trader::open`]).
    pub fn notify(&self, notice: Notice) {
        (self.notify)(notice)
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

    pub fn save(&self) -> Result<(), ExchangeBridgeError> {
        Ok(WalletFile::save(&self.path, &self.wallet)?)
    }

    /// A refusal's reason with asset numbers named (`asset 0` → `usd`).
    pub fn in_words(&self, reason: &str) -> String {
        name_assets(&self.info.assets, reason)
    }

    /// The sequence number to sign with: the wallet's next, or above the exchange's last used
    /// one if that is further (a transaction sent from elsewhere, or a crash).
    fn sequence(&self) -> Result<u64, ExchangeBridgeError> {
        let state = self
            .client
            .account(self.id())?
            .ok_or(ExchangeBridgeError::NotOpened { id: self.id() })?;
        Ok(self.account().next_sequence.max(state.last_sequence + 1))
    }

    /// Signs `operation` with the account's key and next sequence number, saves the wallet
    /// (with `record`'s changes to it) and submits it; a refused transaction gives its sequence
    /// number back. Returns the sequence used and its fate.
    pub fn sign_and_submit(
        &mut self,
        operation: Operation,
        record: impl FnOnce(&mut ExchangeAccount, u64, &[u8]),
    ) -> Result<(u64, TxFate), ExchangeBridgeError> {
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

/// Checks that the wallet's account is on the exchange at `urls` and that its pinned bridge key
/// is the one the exchange names; remembers the URLs.
pub(crate) fn check_exchange(
    account: &mut ExchangeAccount,
    info: &ExchangeInfo,
    urls: String,
    path: &Path,
) -> Result<(), ExchangeBridgeError> {
    if account.exchange != info.exchange {
        return Err(ExchangeBridgeError::OtherExchange {
            urls,
            path: path.to_path_buf(),
            found: info.exchange,
            expected: account.exchange,
        });
    }
    if let Some(pinned) = account.bridge.filter(|pinned| *pinned != info.bridge) {
        return Err(ExchangeBridgeError::OtherBridge {
            urls,
            path: path.to_path_buf(),
            found: info.bridge,
            pinned,
        });
    }
    account.urls = urls;
    // A file from before the bridge key was kept: pinned now, by the exchange whose identity the
    // account is on.
    account.bridge.get_or_insert(info.bridge);
    Ok(())
}

/// A fresh account for this wallet: a random Ed25519 key, the id that key gives (checked to be
/// free on the exchange, so a first deposit cannot be refused for it).
fn new_account(
    client: &ExchangeClient,
    info: &ExchangeInfo,
    urls: &str,
) -> Result<ExchangeAccount, ExchangeBridgeError> {
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
    Err(ExchangeBridgeError::AccountIdsTaken { urls: urls.to_string() })
}

/// `reason` with `asset N` replaced by the asset's name.
pub fn name_assets(assets: &[String], reason: &str) -> String {
    assets
        .iter()
        .enumerate()
        .fold(format!("{reason} "), |text, (index, name)| {
            text.replace(&format!("asset {index} "), &format!("{name} "))
        })
        .trim_end()
        .to_string()
}
