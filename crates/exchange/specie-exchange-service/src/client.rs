//! A trader's client of the exchange's HTTP/JSON API (the bodies of [`crate::http_api`]),
//! blocking. The exchange may be one process or a replicated group: `urls` lists its replicas,
//! comma-separated; a replica that does not lead answers 503 `not_leader` with the leader's
//! address and the call follows it (`specie_service::client::Replicas`, which the offline
//! authority's client shares). Errors carry the API's `{error: {code, message}}`.
//!
//! The answers' bodies are read by pure functions (`*_from` below), so what the client makes of
//! an answer is tested without a server; beside them, the trader's conversions: a decimal limit
//! price to the exchange's Q32.32 [`LimitPrice`] and back, and an account's id from its key.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use specie_exchange::{AccountId, AssetId, LimitPrice, SignedTransaction};
use specie_service::client::{Body, CallError, LeaderSearch, Replicas};

use crate::http_api::{
    AccountBody, DepositBody, DepositRequest, FateBody, FatesBody, LastBlockBody, OffersBody, SummaryBody,
    TransactionsRequest, WithdrawalBody, ACCOUNTS_PATH, CODE_NO_SUCH_ACCOUNT, CODE_NO_SUCH_WITHDRAWAL, CODE_REFUSED,
    DEPOSITS_PATH, LAST_BLOCK_PATH, SUMMARY_PATH, TRANSACTIONS_PATH, WITHDRAWALS_PATH,
};

/// How long one request may take: a submission is answered once its block is durable.
pub const REQUEST_TIMEOUT_MS: u64 = 60_000;
/// Digits after the decimal point a limit price may have (Q32.32 resolves about 2.3e-10).
pub const PRICE_FRACTION_DIGITS_MAX: usize = 18;
/// The most transactions one submission carries (the API's limit).
pub const TRANSACTIONS_PER_SUBMISSION_MAX: usize = 10_000;

/// Why a call to the exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeClientError {
    /// The exchange answered with an error.
    #[error("the exchange at {urls} refused: {message} ({code}, HTTP {status})")]
    Api {
        urls: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("the exchange at {urls} did not answer: {reason}")]
    Unavailable { urls: String, reason: String },
    #[error("the exchange at {urls} answered something unexpected: {reason}")]
    BadAnswer { urls: String, reason: String },
    #[error("the exchange trades no asset {asset:?} (it trades {assets:?})")]
    NoSuchAsset { asset: String, assets: Vec<String> },
}

impl ExchangeClientError {
    /// The API's error code, if the exchange answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ExchangeClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Why a decimal is not a limit price.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("{0:?} is not a decimal number like 1.25")]
    NotDecimal(String),
    #[error("{0:?} has more than {PRICE_FRACTION_DIGITS_MAX} digits after the point")]
    TooPrecise(String),
    #[error("{0:?} is out of range: a limit price is above 0 and below 4294967296 (2^32)")]
    OutOfRange(String),
}

/// A decimal price (units of the bought asset per unit sold) as the exchange's Q32.32 fixed
/// point, rounded up: an offer never accepts less than the price asked.
pub fn parse_limit_price(text: &str) -> Result<LimitPrice, PriceError> {
    let trimmed = text.trim();
    let (whole, fraction) = trimmed.split_once('.').unwrap_or((trimmed, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(PriceError::NotDecimal(text.to_string()));
    }
    if fraction.len() > PRICE_FRACTION_DIGITS_MAX {
        return Err(PriceError::TooPrecise(text.to_string()));
    }
    let whole = whole.trim_start_matches('0');
    let out_of_range = || PriceError::OutOfRange(text.to_string());
    let whole: u128 = match whole {
        "" => 0,
        w if w.len() > 10 => return Err(out_of_range()),
        w => w.parse().map_err(|_| out_of_range())?,
    };
    let scale = 10u128.pow(fraction.len() as u32);
    let numerator: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| out_of_range())?
    };
    let fixed = (whole << 32) + (numerator << 32).div_ceil(scale);
    match u64::try_from(fixed) {
        Ok(0) | Err(_) => Err(out_of_range()),
        Ok(fixed) => Ok(LimitPrice(fixed)),
    }
}

/// A limit price as a decimal, to 6 places (rounded down).
pub fn limit_price_text(limit: LimitPrice) -> String {
    let whole = limit.0 >> 32;
    let millionths = (u128::from(limit.0 & 0xffff_ffff) * 1_000_000) >> 32;
    format!("{whole}.{millionths:06}")
}

/// The account id a trader's key opens: the first 8 bytes of SHA-256 of a domain and the key.
/// Keys are random, so ids are as unlikely to collide as 64-bit random numbers, and nobody can
/// take a trader's id before the trader's first deposit reveals the key.
pub fn account_id(key: &[u8; 32]) -> AccountId {
    let digest = Sha256::new()
        .chain_update(b"specie/exchange/account-id/v1")
        .chain_update(key)
        .finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// `GET /v1/exchange`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExchangeInfo {
    pub exchange: [u8; 32],
    pub bridge: [u8; 32],
    pub assets: Vec<String>,
    pub height: u64,
    pub state_hash: [u8; 32],
}

impl ExchangeInfo {
    /// The index of the asset named `name`.
    pub fn asset(&self, name: &str) -> Result<AssetId, ExchangeClientError> {
        self.assets
            .iter()
            .position(|a| a == name)
            .map(|index| index as AssetId)
            .ok_or_else(|| ExchangeClientError::NoSuchAsset {
                asset: name.to_string(),
                assets: self.assets.clone(),
            })
    }

    /// The name of asset `id` (`?` if out of range).
    pub fn asset_name(&self, id: AssetId) -> &str {
        self.assets.get(usize::from(id)).map_or("?", String::as_str)
    }
}

/// `GET /v1/exchange/accounts/{id}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountState {
    pub key: [u8; 32],
    pub last_sequence: u64,
    /// Unlocked balance per asset, by name, in name order.
    pub balances: Vec<(String, u64)>,
}

/// One resting offer, as `GET /v1/exchange/accounts/{id}/offers` gives it; its id is the
/// sequence number of the transaction that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestingOffer {
    pub sell: String,
    pub buy: String,
    pub limit: LimitPrice,
    pub sequence: u64,
    pub amount: u64,
}

/// `GET /v1/exchange/blocks/last`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastBlock {
    pub height: u64,
    pub transactions: u64,
    /// Each asset's valuation, in asset order (a pair trades at the ratio of its two).
    pub prices: Vec<u64>,
    /// (sold, bought, amount sold) per pair that traded.
    pub trades: Vec<(String, String, u64)>,
}

/// What became of one submitted transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxFate {
    Included { height: u64 },
    Refused(String),
}

/// What the exchange made of a deposit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepositAnswer {
    Credited,
    /// Credited by an earlier call (the exchange credits a funding once).
    CreditedBefore,
    /// The funding's core does not hold it (yet).
    Unconfirmed,
    /// Never creditable as it stands (its account is another key's, say): refunded instead, to
    /// the owner of the funding's first input, by the payout in it (now or by an earlier call).
    Refunded(Box<Refund>),
}

/// A funding the exchange refunded: why, the withdrawal it became, and that withdrawal's payout
/// for the core (signed by the bridge key; the core pays it once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refund {
    pub reason: String,
    pub account: AccountId,
    pub sequence: u64,
    pub amount: u64,
    /// The payout's bytes, as served: a core bridge payout if the exchange is honest.
    pub payout: Vec<u8>,
}

/// A client of one exchange (its replicas).
pub struct ExchangeClient {
    replicas: Replicas,
}

fn bad(urls: &str, reason: impl Into<String>) -> ExchangeClientError {
    ExchangeClientError::BadAnswer {
        urls: urls.to_string(),
        reason: reason.into(),
    }
}

fn hex32(text: &str) -> Option<[u8; 32]> {
    hex::decode(text).ok()?.try_into().ok()
}

fn hex_of(transaction: &SignedTransaction) -> String {
    let mut bytes = Vec::new();
    transaction.encode_to(&mut bytes);
    hex::encode(bytes)
}

impl ExchangeClient {
    /// `urls`: the exchange's replicas, comma-separated (`http://127.0.0.1:8480,…`).
    pub fn new(urls: &str) -> ExchangeClient {
        ExchangeClient {
            replicas: Replicas::new(urls, LeaderSearch::patient())
                .with_request_timeout(Duration::from_millis(REQUEST_TIMEOUT_MS)),
        }
    }

    pub fn urls(&self) -> String {
        self.replicas.urls()
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ExchangeClientError> {
        self.call("GET", path, Body::Empty)
    }

    fn post<T: DeserializeOwned>(&self, path: &str, request: &impl Serialize) -> Result<T, ExchangeClientError> {
        let request = serde_json::to_value(request).expect("a request body serializes");
        self.call("POST", path, Body::Json(&request))
    }

    fn call<T: DeserializeOwned>(&self, method: &str, path: &str, body: Body<'_>) -> Result<T, ExchangeClientError> {
        let urls = self.replicas.urls();
        self.replicas
            .call_json(method, path, body)
            .map_err(|error: CallError| match error {
                CallError::Refused { status, error, .. } => ExchangeClientError::Api {
                    urls,
                    status,
                    code: error.code,
                    message: error.message,
                },
                CallError::BadAnswer { reason, .. } => bad(&urls, reason),
                other => ExchangeClientError::Unavailable {
                    urls,
                    reason: other.to_string(),
                },
            })
    }

    pub fn info(&self) -> Result<ExchangeInfo, ExchangeClientError> {
        info_from(self.get(SUMMARY_PATH)?).ok_or_else(|| bad(&self.urls(), "no exchange summary"))
    }

    /// The account's state, or `None` if the exchange has no such account (yet).
    pub fn account(&self, id: AccountId) -> Result<Option<AccountState>, ExchangeClientError> {
        match self.get(&format!("{ACCOUNTS_PATH}/{id}")) {
            Ok(answer) => account_from(answer)
                .map(Some)
                .ok_or_else(|| bad(&self.urls(), "no account state")),
            Err(error) if error.code() == Some(CODE_NO_SUCH_ACCOUNT) => Ok(None),
            Err(error) => Err(error),
        }
    }

    pub fn offers(&self, id: AccountId) -> Result<Vec<RestingOffer>, ExchangeClientError> {
        Ok(offers_from(self.get(&format!("{ACCOUNTS_PATH}/{id}/offers"))?))
    }

    /// Per asset, what the exchange holds (`GET /v1/exchange/supply`).
    pub fn supply(&self) -> Result<crate::http_api::ExchangeSupplyBody, ExchangeClientError> {
        self.get(crate::http_api::SUPPLY_PATH)
    }

    pub fn last_block(&self) -> Result<LastBlock, ExchangeClientError> {
        Ok(last_block_from(self.get(LAST_BLOCK_PATH)?))
    }

    /// Submits `transactions` (at most [`TRANSACTIONS_PER_SUBMISSION_MAX`]); answered once
    /// they are in a durable block: each one's fate, in order.
    pub fn submit(&self, transactions: &[SignedTransaction]) -> Result<Vec<TxFate>, ExchangeClientError> {
        let request = TransactionsRequest {
            transactions: transactions.iter().map(hex_of).collect(),
        };
        let fates = fates_from(self.post(TRANSACTIONS_PATH, &request)?);
        if fates.len() != transactions.len() {
            return Err(bad(&self.urls(), "not one fate per transaction"));
        }
        Ok(fates)
    }

    /// Hands in a core funding to the exchange (`funding`, its encoding), for `account` with
    /// `key`.
    pub fn deposit(
        &self,
        asset: &str,
        funding: &[u8],
        account: AccountId,
        key: &[u8; 32],
    ) -> Result<DepositAnswer, ExchangeClientError> {
        let request = DepositRequest {
            asset: asset.to_string(),
            transaction: hex::encode(funding),
            account,
            key: hex::encode(key),
        };
        match self.post(DEPOSITS_PATH, &request) {
            Ok(answer) => deposit_answer_from(answer).ok_or_else(|| bad(&self.urls(), "neither credited nor refunded")),
            Err(ExchangeClientError::Api { code, message, .. })
                if code == CODE_REFUSED && message == specie_exchange::DepositRefusal::AlreadyCredited.to_string() =>
            {
                Ok(DepositAnswer::CreditedBefore)
            }
            Err(error) if error.code() == Some("funding_unconfirmed") => Ok(DepositAnswer::Unconfirmed),
            Err(error) => Err(error),
        }
    }

    /// The core payout (its bytes) of the withdrawal made by `account`'s transaction `sequence`,
    /// signed by the exchange's bridge key, or `None` if no such withdrawal was executed.
    pub fn withdrawal(&self, account: AccountId, sequence: u64) -> Result<Option<Vec<u8>>, ExchangeClientError> {
        match self.get::<WithdrawalBody>(&format!("{WITHDRAWALS_PATH}/{account}/{sequence}")) {
            Ok(answer) => payout_from(&answer.payout)
                .map(Some)
                .ok_or_else(|| bad(&self.urls(), "no payout")),
            Err(error) if error.code() == Some(CODE_NO_SUCH_WITHDRAWAL) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// The summary `GET /v1/exchange` answers, if its keys and hash are 32 bytes of hex.
pub fn info_from(body: SummaryBody) -> Option<ExchangeInfo> {
    Some(ExchangeInfo {
        exchange: hex32(&body.exchange)?,
        bridge: hex32(&body.bridge)?,
        assets: body.assets,
        height: body.height,
        state_hash: hex32(&body.state_hash)?,
    })
}

pub fn account_from(body: AccountBody) -> Option<AccountState> {
    Some(AccountState {
        key: hex32(&body.key)?,
        last_sequence: body.last_sequence,
        balances: body.balances.into_iter().collect(),
    })
}

pub fn offers_from(body: OffersBody) -> Vec<RestingOffer> {
    body.offers
        .into_iter()
        .map(|offer| RestingOffer {
            sell: offer.sell,
            buy: offer.buy,
            limit: LimitPrice(offer.limit),
            sequence: offer.sequence,
            amount: offer.amount,
        })
        .collect()
}

pub fn last_block_from(body: LastBlockBody) -> LastBlock {
    LastBlock {
        height: body.height,
        transactions: body.transactions,
        prices: body.prices,
        trades: body.trades.into_iter().map(|t| (t.sell, t.buy, t.amount)).collect(),
    }
}

pub fn fates_from(body: FatesBody) -> Vec<TxFate> {
    body.fates
        .into_iter()
        .map(|fate| match fate {
            FateBody::Included(height) => TxFate::Included { height },
            FateBody::Refused(reason) => TxFate::Refused(reason),
        })
        .collect()
}

/// A deposit's answer: credited, or refunded by a bridge payout.
pub fn deposit_answer_from(body: DepositBody) -> Option<DepositAnswer> {
    if body.credited {
        return Some(DepositAnswer::Credited);
    }
    let refund = body.refunded?;
    Some(DepositAnswer::Refunded(Box::new(Refund {
        payout: payout_from(&refund.payout)?,
        reason: refund.reason,
        account: refund.account,
        sequence: refund.sequence,
        amount: refund.amount,
    })))
}

/// The payout's bytes (hex) in an answer of `GET /v1/exchange/withdrawals/…` or a refund: a
/// core transaction the wallet's bridge checks against what is owed before it takes it.
pub fn payout_from(hex_text: &str) -> Option<Vec<u8>> {
    hex::decode(hex_text).ok().filter(|bytes| !bytes.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimal_prices_convert_to_q32_32_rounded_up() {
        assert_eq!(parse_limit_price("1"), Ok(LimitPrice(1 << 32)));
        assert_eq!(parse_limit_price("1.5"), Ok(LimitPrice(3 << 31)));
        assert_eq!(parse_limit_price("0.5"), Ok(LimitPrice(1 << 31)));
        assert_eq!(parse_limit_price(".25"), Ok(LimitPrice(1 << 30)));
        assert_eq!(parse_limit_price("007.0"), Ok(LimitPrice(7 << 32)));
        // 0.1 is not a binary fraction: rounded up, never below what was asked.
        let tenth = parse_limit_price("0.1").unwrap();
        assert!(u128::from(tenth.0) * 10 >= 1 << 32 && u128::from(tenth.0 - 1) * 10 < 1 << 32);
        assert_eq!(
            parse_limit_price("4294967295.99"),
            Ok(LimitPrice(u64::MAX - 42_949_671))
        );
        assert_eq!(limit_price_text(parse_limit_price("1.25").unwrap()), "1.250000");
        assert_eq!(limit_price_text(LimitPrice(1)), "0.000000");
    }

    #[test]
    fn malformed_or_out_of_range_prices_are_refused_clearly() {
        for text in ["", ".", "abc", "1.2.3", "-1", "1e3", "1,5", " "] {
            assert!(
                matches!(parse_limit_price(text), Err(PriceError::NotDecimal(_))),
                "{text}"
            );
        }
        for text in [
            "0",
            "0.0",
            "4294967296",
            "99999999999999999999",
            "0.0000000000000000001",
        ] {
            let error = parse_limit_price(text).unwrap_err();
            assert!(
                matches!(error, PriceError::OutOfRange(_) | PriceError::TooPrecise(_)),
                "{text}: {error}"
            );
        }
        assert!(parse_limit_price("0").unwrap_err().to_string().contains("2^32"));
    }

    #[test]
    fn account_ids_come_from_the_key() {
        assert_eq!(account_id(&[1; 32]), account_id(&[1; 32]));
        assert_ne!(account_id(&[1; 32]), account_id(&[2; 32]));
    }

    /// An answer's JSON as its body, if it has the body's shape.
    fn read<T: DeserializeOwned>(answer: serde_json::Value) -> Option<T> {
        serde_json::from_value(answer).ok()
    }

    #[test]
    fn answers_are_read_or_refused() {
        let info = json!({"exchange": hex::encode([1u8; 32]), "bridge": hex::encode([2u8; 32]),
            "assets": ["usd", "eur"], "height": 4, "state_hash": hex::encode([3u8; 32])});
        let info = read(info).and_then(info_from).unwrap();
        assert_eq!((info.asset("eur").unwrap(), info.asset_name(0)), (1, "usd"));
        assert!(info.asset("gbp").unwrap_err().to_string().contains("no asset \"gbp\""));
        assert_eq!(read(json!({"exchange": "zz"})).and_then(info_from), None);
        let bad_key = json!({"exchange": "zz", "bridge": "", "assets": [], "height": 0, "state_hash": ""});
        assert_eq!(read(bad_key).and_then(info_from), None);
        let fates = read(json!({"fates": [{"included": 3}, {"refused": "no such payee"}]})).map(fates_from);
        assert_eq!(
            fates.unwrap(),
            vec![TxFate::Included { height: 3 }, TxFate::Refused("no such payee".into())]
        );
        assert_eq!(read::<FatesBody>(json!({"fates": [{}]})), None);
        let block = last_block_from(read(json!({"height": 0})).unwrap());
        assert_eq!((block.height, block.trades.len()), (0, 0));
        let offers =
            read(json!({"offers": [{"sell": "usd", "buy": "eur", "limit": 1u64 << 32, "sequence": 2, "amount": 9}]}));
        assert_eq!(offers_from(offers.unwrap())[0].limit, LimitPrice(1 << 32));
        // Bytes only: whether they are the payout owed is the wallet's bridge's check.
        assert_eq!(
            (payout_from(""), payout_from("zz"), payout_from("00")),
            (None, None, Some(vec![0]))
        );
        assert_eq!(
            read(json!({"credited": true})).and_then(deposit_answer_from),
            Some(DepositAnswer::Credited)
        );
        assert_eq!(read(json!({"credited": false})).and_then(deposit_answer_from), None);
        let payout = crate::core_bridge::bridge_payout(
            &specie_wallet::CORE_FORMAT,
            &specie_exchange::Withdrawal {
                account: 7,
                sequence: specie_exchange::REFUND_SEQUENCE_BIT | 9,
                asset: 0,
                amount: 40,
                address: [5; 32],
            },
            &ed25519_dalek::SigningKey::from_bytes(&[6; 32]),
        );
        let refunded = json!({"credited": false, "refunded": {"reason": "the account exists with another key",
            "account": 7, "sequence": specie_exchange::REFUND_SEQUENCE_BIT | 9, "amount": 40,
            "address": hex::encode([5u8; 32]), "payout": hex::encode(&payout)}});
        let Some(DepositAnswer::Refunded(refund)) = read(refunded).and_then(deposit_answer_from) else {
            panic!("a refund is read");
        };
        assert_eq!((refund.amount, refund.payout), (40, payout));
    }
}
