//! The trader's account on the exchange (docs/exchange.md), kept in the wallet file: which
//! exchange (its identity and its bridge key, pinned at first use), its account number and
//! Ed25519 key, the next sequence number to sign with, and the deposits and withdrawals under
//! way. A deposit is recorded here before its core funding is sent and a withdrawal before its
//! exchange transaction is, and each is removed only once the exchange credited it or the core
//! paid it: a crash leaves them here for the next command to finish (the exchange credits a
//! funding once, the core pays a payout once, so finishing twice is harmless). A deposit whose
//! funding the core refused is kept, marked refused ([`ExchangeDeposit::refused`]), never
//! dropped on a node's word: its bytes are what the exchange credits if the core took it after
//! all. The wallet only keeps these; the exchange's encodings are the CLI's business.

use serde::{Deserialize, Serialize};
use specie_codec::Decode;
use specie_transaction::SpecieTransaction;

use crate::file::WalletFileError;

/// Deposits and withdrawals one wallet keeps under way at most.
pub const EXCHANGE_PENDING_MAX: usize = 64;

/// The trader's account on one exchange.
#[derive(Clone, PartialEq, Eq)]
pub struct ExchangeAccount {
    /// The exchange's identity, signed by every transaction.
    pub exchange: [u8; 32],
    /// The exchange's bridge key: what deposits are paid to and what signs payouts. Pinned when
    /// the account is opened (or, for a file from before it, at the next command), and checked
    /// against the exchange's answer from then on.
    pub bridge: Option<[u8; 32]>,
    /// The exchange's replicas, comma-separated.
    pub urls: String,
    pub account: u64,
    /// The account key's Ed25519 secret (never printed: see the `Debug` impl).
    pub secret_key: [u8; 32],
    /// The sequence number the next transaction signs with (the exchange's last one + 1 at least).
    pub next_sequence: u64,
    pub deposits: Vec<ExchangeDeposit>,
    pub withdrawals: Vec<ExchangeWithdrawal>,
}

impl std::fmt::Debug for ExchangeAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeAccount")
            .field("exchange", &hex::encode(self.exchange))
            .field("bridge", &self.bridge.map(hex::encode))
            .field("urls", &self.urls)
            .field("account", &self.account)
            .field("secret_key", &"<secret>")
            .field("next_sequence", &self.next_sequence)
            .field("deposits", &self.deposits)
            .field("withdrawals", &self.withdrawals)
            .finish()
    }
}

impl ExchangeAccount {
    /// Whether another deposit or withdrawal may be recorded ([`EXCHANGE_PENDING_MAX`]).
    pub fn has_room(&self) -> bool {
        self.deposits.len() + self.withdrawals.len() < EXCHANGE_PENDING_MAX
    }

    /// Drops every deposit marked refused, for good (`specie exchange forget-refused`): the user
    /// says the core never took them. Returns how many.
    pub fn forget_refused(&mut self) -> usize {
        let before = self.deposits.len();
        self.deposits.retain(|deposit| !deposit.refused);
        before - self.deposits.len()
    }
}

/// A core funding to the exchange not yet known to be credited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeDeposit {
    pub asset: String,
    /// The core the funding was sent to (asked again if the exchange has not seen it).
    pub node_url: String,
    /// The funding (a `BridgeFunding`), exactly as sent.
    pub transaction: SpecieTransaction,
    /// Its core refused it, and did not hold its marker when asked: kept (a wrong or lying node
    /// may have said so), asked about again by later commands, handed in if the core holds it.
    pub refused: bool,
}

/// A withdrawal not yet known to be paid by its core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeWithdrawal {
    pub asset: String,
    pub sequence: u64,
    pub amount: u64,
    /// The signed exchange transaction (its canonical encoding), exactly as sent.
    pub transaction: Vec<u8>,
    /// The core wallet that holds the payout's address.
    pub core_wallet: String,
}

/// [`ExchangeAccount`] in the wallet file: hex for keys and transactions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExchangeRecord {
    pub exchange: String,
    pub urls: String,
    pub account: u64,
    pub secret_key: String,
    pub next_sequence: u64,
    /// Absent in files from before it: pinned at the next command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    #[serde(default)]
    pub deposits: Vec<ExchangeDepositRecord>,
    #[serde(default)]
    pub withdrawals: Vec<ExchangeWithdrawalRecord>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExchangeDepositRecord {
    pub asset: String,
    pub node_url: String,
    pub transaction: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub refused: bool,
}

fn is_false(value: &bool) -> bool {
    !value
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExchangeWithdrawalRecord {
    pub asset: String,
    pub sequence: u64,
    pub amount: u64,
    pub transaction: String,
    pub core_wallet: String,
}

fn problem(what: &str, problem: impl Into<String>) -> WalletFileError {
    WalletFileError::Exchange {
        what: what.to_string(),
        problem: problem.into(),
    }
}

fn hex32(what: &str, text: &str) -> Result<[u8; 32], WalletFileError> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| problem(what, "not 32 bytes of hex"))
}

impl ExchangeRecord {
    pub fn from_account(account: &ExchangeAccount) -> ExchangeRecord {
        ExchangeRecord {
            exchange: hex::encode(account.exchange),
            urls: account.urls.clone(),
            account: account.account,
            secret_key: hex::encode(account.secret_key),
            next_sequence: account.next_sequence,
            bridge: account.bridge.map(hex::encode),
            deposits: account
                .deposits
                .iter()
                .map(|d| ExchangeDepositRecord {
                    asset: d.asset.clone(),
                    node_url: d.node_url.clone(),
                    transaction: hex::encode(specie_codec::Encode::encode(&d.transaction)),
                    refused: d.refused,
                })
                .collect(),
            withdrawals: account
                .withdrawals
                .iter()
                .map(|w| ExchangeWithdrawalRecord {
                    asset: w.asset.clone(),
                    sequence: w.sequence,
                    amount: w.amount,
                    transaction: hex::encode(&w.transaction),
                    core_wallet: w.core_wallet.clone(),
                })
                .collect(),
        }
    }

    /// The account, every field checked.
    pub fn to_account(&self) -> Result<ExchangeAccount, WalletFileError> {
        if self.deposits.len() + self.withdrawals.len() > EXCHANGE_PENDING_MAX {
            return Err(problem("pending", format!("more than {EXCHANGE_PENDING_MAX}")));
        }
        let deposits = self
            .deposits
            .iter()
            .map(|d| {
                let bytes = hex::decode(&d.transaction).map_err(|_| problem("deposit", "not hex"))?;
                let transaction =
                    SpecieTransaction::decode_exact(&bytes).map_err(|e| problem("deposit", e.to_string()))?;
                if !matches!(transaction, SpecieTransaction::BridgeFunding(_)) {
                    return Err(problem("deposit", "not a funding"));
                }
                Ok(ExchangeDeposit {
                    asset: d.asset.clone(),
                    node_url: d.node_url.clone(),
                    transaction,
                    refused: d.refused,
                })
            })
            .collect::<Result<_, WalletFileError>>()?;
        let withdrawals = self
            .withdrawals
            .iter()
            .map(|w| {
                Ok(ExchangeWithdrawal {
                    asset: w.asset.clone(),
                    sequence: w.sequence,
                    amount: w.amount,
                    transaction: hex::decode(&w.transaction).map_err(|_| problem("withdrawal", "not hex"))?,
                    core_wallet: w.core_wallet.clone(),
                })
            })
            .collect::<Result<_, WalletFileError>>()?;
        Ok(ExchangeAccount {
            exchange: hex32("exchange", &self.exchange)?,
            bridge: self.bridge.as_deref().map(|text| hex32("bridge", text)).transpose()?,
            urls: self.urls.clone(),
            account: self.account,
            secret_key: hex32("secret key", &self.secret_key)?,
            next_sequence: self.next_sequence,
            deposits,
            withdrawals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> ExchangeAccount {
        ExchangeAccount {
            exchange: [1; 32],
            bridge: Some([2; 32]),
            urls: "http://127.0.0.1:8480".into(),
            account: 77,
            secret_key: [9; 32],
            next_sequence: 3,
            deposits: vec![],
            withdrawals: vec![ExchangeWithdrawal {
                asset: "usd".into(),
                sequence: 2,
                amount: 5,
                transaction: vec![1, 2, 3],
                core_wallet: "/w.json".into(),
            }],
        }
    }

    #[test]
    fn an_account_round_trips_through_its_record() {
        let record = ExchangeRecord::from_account(&account());
        let json = serde_json::to_string(&record).unwrap();
        let back: ExchangeRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.to_account().unwrap(), account());
    }

    #[test]
    fn the_secret_is_never_in_debug_output() {
        let text = format!("{:?}", account());
        assert!(
            !text.contains(&hex::encode([9u8; 32])) && text.contains("<secret>"),
            "{text}"
        );
    }

    #[test]
    fn a_damaged_record_is_refused() {
        let mut record = ExchangeRecord::from_account(&account());
        record.secret_key = "zz".into();
        assert!(record.to_account().is_err());
        let mut record = ExchangeRecord::from_account(&account());
        record.deposits.push(ExchangeDepositRecord {
            asset: "usd".into(),
            node_url: String::new(),
            transaction: "00".into(),
            refused: false,
        });
        assert!(record.to_account().is_err());
        let mut record = ExchangeRecord::from_account(&account());
        record.bridge = Some("zz".into());
        assert!(record.to_account().is_err());
    }

    /// A refused deposit keeps its funding and its mark; a file from before the bridge key and
    /// the mark loads (the key unknown until pinned, nothing refused) and saves as it was.
    #[test]
    fn refused_deposits_and_the_bridge_key_are_kept_and_old_files_load() {
        let mut rng = crate::testkit::rng(60);
        let mut wallet = crate::testkit::funded_wallet(&[100], &mut rng);
        let transaction = wallet.build_bridge_funding([2; 32], [3; 32], 60, &mut rng).unwrap();
        let mut refused = account();
        refused.deposits.push(ExchangeDeposit {
            asset: "usd".into(),
            node_url: "http://127.0.0.1:8470".into(),
            transaction,
            refused: true,
        });
        let json = serde_json::to_value(ExchangeRecord::from_account(&refused)).unwrap();
        assert_eq!(json["deposits"][0]["refused"], true);
        let back: ExchangeRecord = serde_json::from_value(json).unwrap();
        let mut back = back.to_account().unwrap();
        assert_eq!(back, refused);
        assert!(back.has_room());
        assert_eq!(back.forget_refused(), 1);
        assert!(back.deposits.is_empty());

        let mut old = serde_json::to_value(ExchangeRecord::from_account(&account())).unwrap();
        old.as_object_mut().unwrap().remove("bridge");
        let loaded: ExchangeRecord = serde_json::from_value(old.clone()).unwrap();
        let loaded = loaded.to_account().unwrap();
        assert_eq!(loaded.bridge, None);
        assert_eq!(
            serde_json::to_value(ExchangeRecord::from_account(&loaded)).unwrap(),
            old
        );
    }
}
